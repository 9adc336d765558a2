//! The history page: one line figure per (lab, test, params) with one
//! series per host, the headline metric over the runs (oldest = 1), drawn
//! with the report's line code and embedded in one self-contained page.

use crate::{line_svg, Figure, ReportError, Series};
use serde::Serialize;

/// One trend to draw: a title (lab/test and params), the metric, and the
/// (run index, value) points of each host.
#[derive(Debug, Clone)]
pub struct Trend {
    pub title: String,
    pub metric: String,
    pub series: Vec<Series>,
}

/// A run listed under the figures so that an x value can be read back as a
/// date, host and build.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub index: usize,
    pub run_id: String,
    pub started_utc: String,
    pub host: String,
    pub git_sha: String,
    /// The run's environment (its load, CPUs, kernel, build), with which
    /// its trend is judged as `compare` judges it; `Value::Null` when
    /// unknown.
    #[serde(skip)]
    pub environment: serde_json::Value,
}

const TEMPLATE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1240px; padding: 0 1em; }
.muted { color: #666; font-size: .85em; }
.figs { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; border: 1px solid #ddd; max-width: 100%; background: #fff; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { font-size: .9em; padding: .3em .6em .5em; max-width: 760px; }
ul.legend { list-style: none; margin: 0; padding: .3em .6em; font-size: .9em; max-width: 760px; }
ul.legend li { display: inline-flex; gap: .4em; align-items: baseline; margin-right: 1.2em; }
.sw { display: inline-block; width: 1.1em; height: .25em; }
table { border-collapse: collapse; font-size: .8em; margin-top: 1em; }
th, td { border: 1px solid #ddd; padding: .25em .5em; text-align: left; }
</style>
</head>
<body>
<h1>{{ title }}</h1>
<p class="muted">generated {{ generated }} from the commbench results store; x is the run index (oldest = 1), one series per host.</p>
<div class="figs">
{% for f in figures %}<figure>{{ f.svg|safe }}{% if f.legend %}<ul class="legend">{% for l in f.legend %}<li><span class="sw" style="background: {{ l.colour }}"></span>{{ l.name }}</li>{% endfor %}</ul>{% endif %}<figcaption><b>{{ f.title }}</b>{{ f.caption }}{{ f.left_out }}</figcaption></figure>
{% endfor %}</div>
<h2>Runs</h2>
<table>
<tr><th>run</th><th>started (UTC)</th><th>host</th><th>git SHA</th><th>run id</th></tr>
{% for r in runs %}<tr><td>{{ r.index }}</td><td>{{ r.started_utc }}</td><td>{{ r.host }}</td><td>{{ r.git_sha }}</td><td>{{ r.run_id }}</td></tr>
{% endfor %}</table>
</body>
</html>
"#;

/// Draws every trend that has a series of two points or more, and renders
/// the page.
pub fn render_trends_html(
    title: &str,
    trends: &[Trend],
    runs: &[RunRow],
) -> Result<String, ReportError> {
    let mut figures = Vec::new();
    for t in trends {
        let series: Vec<Series> = t
            .series
            .iter()
            .filter(|s| s.points.len() >= 2)
            .cloned()
            .collect();
        if series.is_empty() {
            continue;
        }
        let plot = line_svg(&t.title, "run", &t.metric, &series)?;
        figures.push(Figure::plain(
            t.title.clone(),
            format!(" {} per run, one line per host.", t.metric),
            plot,
        ));
    }
    let env = crate::html::page_env("trend.html", TEMPLATE)?;
    let tmpl = env
        .get_template("trend.html")
        .map_err(|e| ReportError::Template(e.to_string()))?;
    tmpl.render(minijinja::context! {
        title => title,
        generated => commbench_core::env::now_utc(),
        figures => figures,
        runs => runs,
    })
    .map_err(|e| ReportError::Template(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trend_with_two_hosts_draws_one_figure_with_both() {
        let t = Trend {
            title: "ipc/reqres <script>".into(),
            metric: "msgs_per_s".into(),
            series: vec![
                Series {
                    name: "hostA".into(),
                    points: vec![(1.0, 10.0), (3.0, 12.0)],
                },
                Series {
                    name: "hostB".into(),
                    points: vec![(2.0, 20.0), (4.0, 18.0)],
                },
            ],
        };
        let single = Trend {
            title: "one point".into(),
            metric: "x".into(),
            series: vec![Series {
                name: "h".into(),
                points: vec![(1.0, 1.0)],
            }],
        };
        let html = render_trends_html("trend", &[t, single], &[]).unwrap();
        assert_eq!(html.matches("<figure>").count(), 1);
        assert!(html.contains("hostA") && html.contains("hostB"));
        assert!(!html.contains("<script>"), "titles are escaped");
        assert!(html.contains("<svg"));
    }

    /// The history page from an imported hostile file: host names (series),
    /// titles, metric names and run rows are escaped, and a value of
    /// 1.7e308 is left out with a note.
    #[test]
    fn trend_page_escapes_imported_strings_and_leaves_out_huge_values() {
        let bad = "\"><img src=x onerror=alert(1)><script>x</script>";
        let t = Trend {
            title: format!("ipc/reqres {bad}"),
            metric: bad.into(),
            series: vec![Series {
                name: bad.into(),
                points: vec![(1.0, 10.0), (2.0, 1.7e308), (3.0, 12.0)],
            }],
        };
        let row = RunRow {
            index: 1,
            run_id: bad.into(),
            started_utc: bad.into(),
            host: bad.into(),
            git_sha: bad.into(),
            environment: serde_json::Value::Null,
        };
        let html = render_trends_html(bad, &[t], &[row]).unwrap();
        assert!(
            !html.contains("<img") && !html.contains("<script"),
            "{html}"
        );
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(html.contains("1 value out of range"));
    }
}
