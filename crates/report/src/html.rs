//! The HTML report: one self-contained page (no external resources) for
//! one or several runs, rendered through the minijinja template
//! `templates/report.html`: each lab's question and answer, the machine,
//! compare's verdicts between runs, per-lab figures and tables, and every
//! run's environment. Invariants: several runs are overlaid in the same
//! figures, each record tagged with its run under [`RUN_PARAM`]; the summary
//! is computed over the untagged records; `suite` records get no section.

use crate::compare::{compare, Change};
use crate::figures::{figures_for_lab, Figure, RUN_PARAM};
use crate::load::Loaded;
use crate::summary;
use crate::ReportError;
use commbench_core::figure::FigureSpec;
use commbench_core::lab::Lab;
use commbench_core::record::Record;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

#[derive(Serialize)]
struct LabSection {
    lab: String,
    figures: Vec<Figure>,
    columns: Vec<String>,
    rows: Vec<Vec<String>>,
    /// What the table leaves out ("" when nothing).
    note: String,
}

/// Figures on one page (each lab's figures until this many are drawn).
pub const MAX_PAGE_FIGURES: usize = 200;
/// Rows of one lab's table shown on the page.
pub const MAX_TABLE_ROWS: usize = 5_000;
/// Columns of one lab's table shown on the page.
pub const MAX_TABLE_COLUMNS: usize = 300;

/// A lab's table: one row per record (at most [`MAX_TABLE_ROWS`]), one
/// column per flattened parameter or metric in first-seen order (at most
/// [`MAX_TABLE_COLUMNS`]), and a note of what was left out.
fn table(records: &[&Record]) -> (Vec<String>, Vec<Vec<String>>, String) {
    let mut cols: Vec<String> = Vec::new();
    let mut col_ix: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut more_cols = 0usize;
    let mut rows = Vec::new();
    for r in records.iter().take(MAX_TABLE_ROWS) {
        let mut v = vec![("test".to_owned(), Value::from(r.test.clone()))];
        for (k, x) in &r.params {
            commbench_core::record::flatten(k, x, &mut v);
        }
        for (k, x) in &r.metrics {
            commbench_core::record::flatten(k, x, &mut v);
        }
        let mut row: Vec<Option<String>> = vec![None; cols.len()];
        for (k, x) in v {
            let i = match col_ix.get(&k) {
                Some(&i) => i,
                None if cols.len() < MAX_TABLE_COLUMNS => {
                    col_ix.insert(k.clone(), cols.len());
                    cols.push(k);
                    row.push(None);
                    cols.len() - 1
                }
                None => {
                    more_cols += 1;
                    continue;
                }
            };
            row[i] = Some(cell(&x));
        }
        rows.push(row);
    }
    let rows = rows
        .into_iter()
        .map(|mut row| {
            row.resize(cols.len(), None);
            row.into_iter().map(Option::unwrap_or_default).collect()
        })
        .collect();
    let mut note = Vec::new();
    if records.len() > MAX_TABLE_ROWS {
        note.push(format!(
            "the first {MAX_TABLE_ROWS} of {} records are shown",
            records.len()
        ));
    }
    if more_cols > 0 {
        note.push(format!(
            "{more_cols} values in columns past the first {MAX_TABLE_COLUMNS} are not shown"
        ));
    }
    let note = if note.is_empty() {
        String::new()
    } else {
        format!("{}; the results file has them all.", note.join("; "))
    };
    (cols, rows, note)
}

/// A number for a table cell: as `human_number` writes it, but in
/// scientific notation from 1e15 up, so that 1.7e308 is not 309 digits.
fn number(x: f64) -> String {
    if x.is_finite() && x.abs() >= 1e15 {
        format!("{x:.3e}")
    } else {
        commbench_core::record::human_number(x)
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => number(n.as_f64().unwrap_or(f64::NAN)),
        },
        v => v.to_string(),
    }
}

const TEMPLATE: &str = include_str!("templates/report.html");

/// A template environment that HTML-escapes every value it prints,
/// whatever the template's name: strings from a results file (host name,
/// CPU model, command line, parameters, string metrics, the lab and test
/// names) and the page title are untrusted, since result files travel
/// between hosts. Only the SVG of a figure is printed raw (`|safe`), and
/// [`crate::plot`] checks that it holds nothing but drawing elements.
pub(crate) fn page_env(
    name: &'static str,
    template: &'static str,
) -> Result<minijinja::Environment<'static>, ReportError> {
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    env.add_template(name, template)
        .map_err(|e| ReportError::Template(e.to_string()))?;
    Ok(env)
}

/// One line of the summary at the top of the page (see [`summary`]: a
/// lab's question and the answer its records give).
#[derive(Debug, Clone, Serialize)]
pub struct SummaryLine {
    pub lab: String,
    pub question: String,
    pub answer: String,
    pub flags: String,
}

/// A short label for a run: host and start time, else the file name.
fn run_label(l: &Loaded) -> String {
    let env = l.environment.as_ref();
    let get = |k: &str| env.and_then(|e| e.get(k)).and_then(Value::as_str);
    match (get("hostname"), get("started_utc")) {
        (Some(h), Some(t)) => format!("{h} {}", t.get(..16).unwrap_or(t)),
        _ => Path::new(&l.path)
            .file_name()
            .map_or_else(|| l.path.clone(), |f| f.to_string_lossy().into_owned()),
    }
}

/// The machine in one line: CPU, cores, kernel, load, build.
fn machine_line(runs: &[Loaded], all: &[&Record]) -> String {
    let Some(env) = runs.iter().find_map(|l| l.environment.as_ref()) else {
        return String::new();
    };
    let g = |k: &str| {
        env.get(k)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_else(|| "?".into())
    };
    let load = env
        .get("load_average")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_f64)
        .map_or("?".into(), |l| format!("{l:.1}"));
    let over = all
        .iter()
        .any(|r| matches!(r.metrics.get("oversubscribed"), Some(Value::Bool(true))));
    format!(
        "{} · {} logical CPUs · kernel {} · load {load} at start · {} build · {}",
        g("cpu_model"),
        g("logical_cpus"),
        g("kernel"),
        g("build_profile"),
        if over {
            "some runs had more busy threads than CPUs (oversubscribed)"
        } else {
            "not oversubscribed"
        }
    )
}

/// Renders a self-contained HTML page (no external resources) for the runs.
/// Several runs are overlaid in the same figures, their series named by
/// host and start time.
pub fn render_html(
    runs: &[Loaded],
    title: &str,
    registry: &[&dyn Lab],
) -> Result<String, ReportError> {
    let specs: Vec<FigureSpec> = registry.iter().flat_map(|l| l.figures()).collect();
    let specs = specs.as_slice();
    let summary: Vec<SummaryLine> = {
        let every: Vec<Record> = runs
            .iter()
            .flat_map(|l| l.records.iter().cloned())
            .collect();
        summary::rows(&every, registry)
            .into_iter()
            .map(|r| SummaryLine {
                lab: r.lab.to_owned(),
                question: r.question.to_owned(),
                answer: r.answer,
                flags: r.flags.join("; "),
            })
            .collect()
    };
    let mut labs: Vec<String> = Vec::new();
    let labelled: Vec<Record> = if runs.len() > 1 {
        runs.iter()
            .flat_map(|l| {
                let label = run_label(l);
                l.records.iter().map(move |r| {
                    let mut r = r.clone();
                    r.params
                        .insert(RUN_PARAM.to_owned(), Value::from(label.clone()));
                    r
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let all: Vec<&Record> = if runs.len() > 1 {
        labelled.iter().collect()
    } else {
        runs.iter().flat_map(|l| l.records.iter()).collect()
    };
    // Records by lab in first-seen order, in one pass.
    let mut by_lab: Vec<Vec<&Record>> = Vec::new();
    let mut lab_ix: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for r in all.iter().copied().filter(|r| r.lab != "suite") {
        let i = *lab_ix.entry(r.lab.as_str()).or_insert_with(|| {
            labs.push(r.lab.clone());
            by_lab.push(Vec::new());
            by_lab.len() - 1
        });
        by_lab[i].push(r);
    }
    let mut sections = Vec::new();
    let mut figures_left = MAX_PAGE_FIGURES;
    for (lab, recs) in labs.into_iter().zip(by_lab) {
        let (columns, rows, mut note) = table(&recs);
        let figures = if figures_left > 0 {
            let mut f = figures_for_lab(&lab, &recs, specs)?;
            f.truncate(figures_left);
            figures_left -= f.len();
            f
        } else {
            note = format!("No figures: the page already holds {MAX_PAGE_FIGURES}. {note}");
            Vec::new()
        };
        sections.push(LabSection {
            figures,
            lab,
            columns,
            rows,
            note,
        });
    }
    let envs: Vec<(String, Vec<(String, String)>)> = runs
        .iter()
        .filter_map(|l| {
            let env = l.environment.as_ref()?;
            let mut flat = Vec::new();
            commbench_core::record::flatten("", env, &mut flat);
            Some((
                l.path.clone(),
                flat.into_iter()
                    .map(|(k, v)| (k, v.to_string().trim_matches('"').to_owned()))
                    .collect(),
            ))
        })
        .collect();
    let env = page_env("report", TEMPLATE)?;
    let tmpl = env
        .get_template("report")
        .map_err(|e| ReportError::Template(e.to_string()))?;
    // Several runs: compare's verdicts, first run against each later one,
    // beyond a 5% noise threshold, the clearest changes first.
    let mut changes: Vec<(String, Change)> = Vec::new();
    if let Some((first, rest)) = runs.split_first() {
        for later in rest {
            let label = format!("{} → {}", run_label(first), run_label(later));
            for c in compare(&first.records, &later.records, 0.05, &[], registry)
                .into_iter()
                .filter(|c| c.verdict != "no change")
            {
                changes.push((label.clone(), c));
            }
        }
    }
    changes.sort_by(|a, b| b.1.change_pct.abs().total_cmp(&a.1.change_pct.abs()));
    changes.truncate(60);
    let changes: Vec<Vec<String>> = changes
        .into_iter()
        .map(|(l, c)| {
            vec![
                l,
                format!("{} {}", c.lab, c.test),
                c.params,
                c.metric,
                number(c.before),
                number(c.after),
                format!("{:.2}×", c.ratio),
                c.verdict,
            ]
        })
        .collect();
    tmpl.render(minijinja::context! {
        title => title,
        generated => commbench_core::env::now_utc(),
        changes => changes,
        machine => machine_line(runs, &all),
        summary => summary,
        sections => sections,
        environments => envs,
        sources => runs.iter().map(|l| l.path.clone()).collect::<Vec<_>>(),
    })
    .map_err(|e| ReportError::Template(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::rec;
    use commbench_core::figure::FigureKind;

    /// A lab that only declares figures.
    struct SpecLab(Vec<FigureSpec>);

    impl Lab for SpecLab {
        fn name(&self) -> &'static str {
            "ipc"
        }
        fn record_labs(&self) -> &'static [&'static str] {
            &["ipc"]
        }
        fn question(&self) -> &'static str {
            "?"
        }
        fn figures(&self) -> Vec<FigureSpec> {
            self.0.clone()
        }
        fn metrics(&self) -> &'static [commbench_core::lab::MetricSpec] {
            &[]
        }
        fn budget(&self) -> commbench_core::lab::Budget {
            commbench_core::lab::Budget {
                quick_s: 1,
                default_s: 1,
            }
        }
        fn suite_step(
            &self,
            _: &commbench_core::lab::SuiteCtx,
            _: &mut commbench_core::Recorder,
        ) -> Result<commbench_core::lab::StepOutcome, commbench_core::lab::LabError> {
            Ok(Default::default())
        }
        fn answer(&self, _: &[Record]) -> Option<String> {
            None
        }
    }

    #[test]
    fn html_has_plots_and_tables() {
        let run = Loaded {
            path: "a.jsonl".into(),
            records: (1..=4)
                .map(|s| rec("reqres", s, 1000.0 * s as f64))
                .collect(),
            environment: Some(serde_json::json!({"cpu_model": "Test CPU"})),
        };
        let html = render_html(&[run], "t", &[]).unwrap();
        assert!(html.contains("<svg"), "no svg");
        assert!(html.contains("msgs_per_s vs sessions"));
        assert!(html.contains("latency percentiles"));
        assert!(html.contains("Test CPU"));
        assert!(!html.contains("src=\"http"), "must be self-contained");
    }

    /// Payloads a hostile results file can carry in any string.
    const PAYLOADS: [&str; 3] = [
        "<script>window.__pwned=1</script>",
        "\"><img src=x onerror=window.__pwned=2>",
        "'><svg onload=window.__pwned=3>",
    ];

    /// Strings from a results file and the title reach the page escaped:
    /// no payload leaves a tag of its own, every one is shown as text.
    #[test]
    fn hostile_strings_from_a_results_file_and_the_title_are_escaped() {
        let [s, img, svg] = PAYLOADS;
        let run = |host: &str| Loaded {
            path: format!("{svg}{host}.jsonl"),
            records: (1..=4)
                .map(|n| {
                    let mut r = rec("reqres", n, 1000.0 * n as f64)
                        .param("transport", format!("shm{s}{img}"))
                        .metric("note", format!("{svg}{s}"));
                    r.lab = format!("ipc{img}");
                    r.test = format!("reqres{s}");
                    r
                })
                .collect(),
            environment: Some(serde_json::json!({
                "hostname": format!("{host}{s}{img}"),
                "started_utc": "2026-11-24T10:00:00Z",
                "cpu_model": format!("{img}{s}"),
                "kernel": svg,
                "command_line": ["commbench", s, img, svg],
            })),
        };
        let html = render_html(&[run("a"), run("b")], &format!("{s}{img}"), &[]).unwrap();
        assert!(!html.contains("<script"), "a script tag got through");
        assert!(!html.contains("<img"), "an img tag got through");
        assert!(!html.contains("<svg onload"), "an svg tag got through");
        assert!(html.contains("&lt;script&gt;window.__pwned=1&lt;"));
        assert!(html.contains("&lt;img src=x onerror=window.__pwned=2&gt;"));
        assert!(html.contains("<svg"), "the figures are still drawn");
    }

    /// A results file with a metric of 1.7e308 hung `report` forever in
    /// plotters' tick code; the value is now left out and the caption
    /// says so.
    #[test]
    fn a_metric_of_1_7e308_draws_and_the_caption_says_it_was_left_out() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut records: Vec<Record> = (1..=4)
                .map(|s| rec("reqres", s, 1000.0 * s as f64))
                .collect();
            records[3] = rec("reqres", 4, 1.7e308).metric(
                "latency_ns",
                serde_json::json!({"p50": 1.0, "p90": 2.0, "p99": 1.7e308, "p999": 3.0}),
            );
            let run = Loaded {
                path: "a.jsonl".into(),
                records,
                environment: None,
            };
            let _ = tx.send(render_html(&[run], "t", &[]));
        });
        let html = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("report did not finish within 60 s")
            .unwrap();
        assert!(html.contains("<svg"));
        assert!(
            html.contains("1 value out of range (not finite, beyond ±1e300"),
            "the caption says what was left out"
        );
        assert!(html.contains(">1.700e308<"), "the table shows it short");
    }

    /// However many labs, records and columns a file holds, the page holds
    /// at most MAX_PAGE_FIGURES figures and each table at most
    /// MAX_TABLE_ROWS rows of MAX_TABLE_COLUMNS columns, and says so.
    #[test]
    fn a_page_is_bounded_in_figures_rows_and_columns() {
        let mut records = Vec::new();
        for lab in 0..(MAX_PAGE_FIGURES + 20) {
            for s in 1..=2 {
                let mut r = Record::new(&format!("lab{lab}"), "t")
                    .param("n", s)
                    .metric("rate", s as f64);
                r.lab = format!("lab{lab}");
                records.push(r);
            }
        }
        for i in 0..(MAX_TABLE_ROWS + 10) {
            let mut r = Record::new("wide", "t").metric("rate", i as f64);
            for c in 0..3 {
                r = r.metric(&format!("m{}", i * 3 + c), 1.0);
            }
            records.push(r);
        }
        let run = Loaded {
            path: "a.jsonl".into(),
            records,
            environment: None,
        };
        let html = render_html(&[run], "t", &[]).unwrap();
        assert_eq!(html.matches("<figure>").count(), MAX_PAGE_FIGURES);
        assert!(html.contains("No figures: the page already holds 200."));
        assert!(html.contains(&format!(
            "the first {MAX_TABLE_ROWS} of {} records are shown",
            MAX_TABLE_ROWS + 10
        )));
        assert!(html.contains("columns past the first 300 are not shown"));
        let wide = html.split("id=\"lab-wide\"").nth(1).unwrap();
        let header = wide.split("</tr>").next().unwrap();
        assert_eq!(header.matches("<th>").count(), MAX_TABLE_COLUMNS);
    }

    #[test]
    fn several_runs_overlay_with_series_named_by_host_and_time_and_compare_verdicts() {
        let run = |host: &str, t: &str, k: f64| Loaded {
            path: format!("{host}.jsonl"),
            records: (1..=4)
                .map(|s| rec("reqres", s, k * 1000.0 * s as f64))
                .collect(),
            environment: Some(serde_json::json!({"hostname": host, "started_utc": t})),
        };
        let spec = FigureSpec {
            kind: FigureKind::Line,
            lab: "ipc",
            test: "reqres",
            title: "rate over sessions",
            caption: "",
            x: "sessions",
            y: "msgs_per_s",
            series: &["transport"],
            filter: None,
        };
        let runs = [
            run("alpha", "2026-11-24T10:00:00Z", 1.0),
            run("beta", "2026-11-24T11:00:00Z", 2.0),
        ];
        let html = render_html(&runs, "t", &[&SpecLab(vec![spec])]).unwrap();
        assert!(
            html.contains("alpha 2026-11-24T10:00: shm"),
            "series not named by run"
        );
        assert!(html.contains("beta 2026-11-24T11:00: shm"));
        assert!(html.contains("What changed between the runs"));
        assert!(
            html.contains("2.00×"),
            "the doubled rate is not among the changes"
        );
    }
}
