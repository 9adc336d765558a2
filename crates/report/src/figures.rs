//! Which plots a lab's records get, and building them: the lab's declared
//! figures (line, grouped or stacked bars, percentile ladders from
//! [`FigureSpec`]), else a line plot guessed from the records' shape; then
//! a percentile ladder for every latency summary. Invariants: repeats are
//! drawn as their median; a figure is drawn only when its records fill it
//! (a line series needs two points, a ladder three quantiles); a lab that
//! declares figures never gets a guessed line; overlaid runs are told apart
//! by [`RUN_PARAM`], which prefixes their series names.

use crate::compare::headline_metric;
use crate::plot::{self, ladder_svg, line_svg, Series};
use crate::ReportError;
use commbench_core::figure::{FigureKind, FigureSpec};
use commbench_core::record::Record;
use serde::Serialize;
use serde_json::Value;

/// A plot made from a group of records.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub title: String,
    pub svg: String,
    /// What the figure answers (declared figures only).
    pub caption: String,
}

/// Draws the declared figures of a lab that its records can fill (at
/// least one series with two points).
pub fn declared_figures(
    lab: &str,
    records: &[&Record],
    specs: &[FigureSpec],
) -> Result<Vec<Figure>, ReportError> {
    let mut figs = Vec::new();
    for spec in specs.iter().filter(|s| s.lab == lab) {
        let fig = match spec.kind {
            FigureKind::Line => line_figure(spec, records)?,
            FigureKind::Bar => bar_figure(spec, records, &[spec.y], false)?,
            FigureKind::Stacked(parts) => bar_figure(spec, records, parts, true)?,
            FigureKind::Ladder(qs) => ladder_figure(spec, records, qs)?,
        };
        figs.extend(fig);
    }
    Ok(figs)
}

/// A series name with the run it came from when several runs are overlaid.
fn run_series(spec: &FigureSpec, r: &Record) -> String {
    let name = spec.series_name(r);
    match r.params.get(RUN_PARAM).and_then(Value::as_str) {
        Some(run) => format!("{run}: {name}"),
        None => name,
    }
}

/// The parameter the report adds to records when it overlays several runs.
pub const RUN_PARAM: &str = "run";

fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    commbench_core::stats::percentile_sorted(&v, 0.5)
}

fn text_of(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// Bars: categories are the values of `spec.x`; grouped bars are one per
/// series (y = `metrics[0]`), stacked bars one per category and series
/// with `metrics` as the parts; medians over repeats.
fn bar_figure(
    spec: &FigureSpec,
    records: &[&Record],
    metrics: &[&str],
    stacked: bool,
) -> Result<Option<Figure>, ReportError> {
    let mut cats: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    // (category, series name, metric) -> samples
    let mut samples: Vec<(usize, usize, usize, Vec<f64>)> = Vec::new();
    for r in records.iter().filter(|r| spec.accepts(r)) {
        let Some(x) = r.params.get(spec.x) else {
            continue;
        };
        let (cat_name, series) = if stacked {
            let s = run_series(spec, r);
            let c = if spec.series.is_empty() && r.params.get(RUN_PARAM).is_none() {
                text_of(x)
            } else {
                format!("{} {s}", text_of(x))
            };
            (c, None)
        } else {
            (text_of(x), Some(run_series(spec, r)))
        };
        for (mi, m) in metrics.iter().enumerate() {
            let Some(y) = r.metric_f64(m).filter(|y| y.is_finite()) else {
                continue;
            };
            let ci = match cats.iter().position(|c| *c == cat_name) {
                Some(i) => i,
                None => {
                    cats.push(cat_name.clone());
                    cats.len() - 1
                }
            };
            let sname = series.clone().unwrap_or_else(|| (*m).to_owned());
            let si = match names.iter().position(|n| *n == sname) {
                Some(i) => i,
                None => {
                    names.push(sname);
                    names.len() - 1
                }
            };
            match samples
                .iter_mut()
                .find(|(c, s, k, _)| *c == ci && *s == si && *k == mi)
            {
                Some((.., v)) => v.push(y),
                None => samples.push((ci, si, mi, vec![y])),
            }
        }
    }
    if cats.is_empty() || names.is_empty() {
        return Ok(None);
    }
    cats.truncate(24);
    names.truncate(12);
    let series: Vec<(String, Vec<Option<f64>>)> = names
        .iter()
        .enumerate()
        .map(|(si, n)| {
            let vals = (0..cats.len())
                .map(|ci| {
                    samples
                        .iter()
                        .find(|(c, s, _, _)| *c == ci && *s == si)
                        .map(|(.., v)| median_of(v.clone()))
                })
                .collect();
            (n.clone(), vals)
        })
        .collect();
    let y_desc = if stacked { "" } else { spec.y };
    Ok(Some(Figure {
        svg: plot::bar_svg(spec.title, y_desc, &cats, &series, stacked)?,
        title: spec.title.to_owned(),
        caption: spec.caption.to_owned(),
    }))
}

/// One percentile ladder per series (the median of each quantile over
/// repeats).
fn ladder_figure(
    spec: &FigureSpec,
    records: &[&Record],
    qs: &[(f64, &str)],
) -> Result<Option<Figure>, ReportError> {
    let mut by_series: Vec<(String, Vec<Vec<f64>>)> = Vec::new();
    for r in records.iter().filter(|r| spec.accepts(r)) {
        let name = run_series(spec, r);
        let i = match by_series.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                by_series.push((name, vec![Vec::new(); qs.len()]));
                by_series.len() - 1
            }
        };
        for (k, (_, m)) in qs.iter().enumerate() {
            if let Some(v) = r.metric_f64(m).filter(|v| v.is_finite() && *v > 0.0) {
                by_series[i].1[k].push(v);
            }
        }
    }
    let series: Vec<Series> = by_series
        .into_iter()
        .map(|(name, cols)| Series {
            name,
            points: qs
                .iter()
                .zip(cols)
                .filter(|(_, v)| !v.is_empty())
                .map(|((q, _), v)| (*q, median_of(v)))
                .collect(),
        })
        .filter(|s| s.points.len() >= 3)
        .take(12)
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    Ok(Some(Figure {
        svg: ladder_svg(spec.title, &series)?,
        title: spec.title.to_owned(),
        caption: spec.caption.to_owned(),
    }))
}

fn line_figure(spec: &FigureSpec, records: &[&Record]) -> Result<Option<Figure>, ReportError> {
    // (series, x) -> y samples (repeats, several runs): the median is drawn.
    let mut samples: Vec<(String, f64, Vec<f64>)> = Vec::new();
    for r in records.iter().filter(|r| spec.accepts(r)) {
        let (Some(x), Some(y)) = (r.params.get(spec.x).and_then(num), r.metric_f64(spec.y)) else {
            continue;
        };
        let name = run_series(spec, r);
        match samples.iter_mut().find(|(n, px, _)| *n == name && *px == x) {
            Some((_, _, v)) => v.push(y),
            None => samples.push((name, x, vec![y])),
        }
    }
    let mut series: Vec<Series> = Vec::new();
    for (name, x, ys) in samples {
        let med = median_of(ys);
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((x, med)),
            None => series.push(Series {
                name,
                points: vec![(x, med)],
            }),
        }
    }
    series.retain(|s| s.points.len() >= 2);
    if series.is_empty() {
        return Ok(None);
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Ok(Some(Figure {
        svg: line_svg(spec.title, spec.x, spec.y, &series)?,
        title: spec.title.to_owned(),
        caption: spec.caption.to_owned(),
    }))
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// Parameter names whose value differs between records (the ones worth
/// naming a series by), and whether the test names differ.
fn varying(records: &[&Record]) -> (Vec<String>, bool) {
    let mut keys: Vec<String> = Vec::new();
    for r in records {
        for k in r.params.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let first = records.first();
    keys.retain(|k| {
        records
            .iter()
            .any(|r| r.params.get(k) != first.and_then(|f| f.params.get(k)))
    });
    let tests_differ = records
        .iter()
        .any(|r| Some(&r.test) != first.map(|f| &f.test));
    (keys, tests_differ)
}

fn series_name(r: &Record, vary: &[String], tests_differ: bool, skip: &str) -> String {
    let mut parts = Vec::new();
    if tests_differ {
        parts.push(r.test.clone());
    }
    for k in vary {
        if k == skip {
            continue;
        }
        if let Some(v) = r.params.get(k) {
            parts.push(format!("{k}={}", v.to_string().trim_matches('"')));
        }
    }
    if parts.is_empty() {
        r.test.clone()
    } else {
        parts.join(" ")
    }
}

/// Plots of one lab's records: the lab's declared figures, or, when it
/// declares none that its records fill, a line plot guessed from the
/// records; then the latency percentile ladders.
pub fn figures_for_lab(
    lab: &str,
    records: &[&Record],
    specs: &[FigureSpec],
) -> Result<Vec<Figure>, ReportError> {
    let mut figs = declared_figures(lab, records, specs)?;
    // A lab that declares figures gets those only: no line guessed
    // through its categories.
    let declared = !figs.is_empty() || specs.iter().any(|s| s.lab == lab);
    let owned: Vec<Record> = records.iter().map(|r| (*r).clone()).collect();
    let (vary, tests_differ) = varying(records);
    // Line plots: group by metric set shape (records that share a headline).
    let mut tests: Vec<&str> = Vec::new();
    for r in records {
        if !tests.contains(&r.test.as_str()) {
            tests.push(&r.test);
        }
    }
    // x axis: the first numeric parameter with ≥ 2 distinct values over the lab.
    let mut keys: Vec<String> = Vec::new();
    for r in records {
        for k in r.params.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let x_key = keys.iter().find(|k| {
        let mut vals: Vec<f64> = records
            .iter()
            .filter_map(|r| r.params.get(*k).and_then(num))
            .collect();
        vals.sort_by(f64::total_cmp);
        vals.dedup();
        vals.len() >= 2
    });
    if let (false, Some(x_key), Some(y_key)) = (declared, x_key, headline_metric(&owned, &[])) {
        let mut series: Vec<Series> = Vec::new();
        for r in records {
            let (Some(x), Some(y)) = (r.params.get(x_key).and_then(num), r.metric_f64(&y_key))
            else {
                continue;
            };
            let name = series_name(r, &vary, tests_differ, x_key);
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push((x, y)),
                None => series.push(Series {
                    name,
                    points: vec![(x, y)],
                }),
            }
        }
        series.retain(|s| s.points.len() >= 2);
        series.truncate(10);
        if !series.is_empty() {
            for s in &mut series {
                s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            let title = format!("{lab}: {y_key} vs {x_key}");
            figs.push(Figure {
                svg: line_svg(&title, x_key, &y_key, &series)?,
                title,
                caption: String::new(),
            });
        }
    }
    // Percentile ladders: every metric object with p50 … max.
    let mut ladders: Vec<Series> = Vec::new();
    for r in records {
        for (k, v) in &r.metrics {
            let Some(o) = v.as_object() else { continue };
            let qs = [
                ("p50", 0.5),
                ("p90", 0.9),
                ("p99", 0.99),
                ("p999", 0.999),
                ("p9999", 0.9999),
            ];
            let pts: Vec<(f64, f64)> = qs
                .iter()
                .filter_map(|(name, q)| o.get(*name).and_then(num).map(|v| (*q, v)))
                .collect();
            if pts.len() >= 3 {
                ladders.push(Series {
                    name: format!("{} {k}", series_name(r, &vary, tests_differ, "")),
                    points: pts,
                });
            }
        }
    }
    ladders.truncate(10);
    if !ladders.is_empty() {
        let title = format!("{lab}: latency percentiles");
        figs.push(Figure {
            svg: ladder_svg(&title, &ladders)?,
            title,
            caption: String::new(),
        });
    }
    Ok(figs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::rec;

    #[test]
    fn declared_figures_replace_the_guessed_plot() {
        let spec = FigureSpec {
            kind: FigureKind::Line,
            lab: "ipc",
            test: "reqres",
            title: "declared: rate over sessions",
            caption: "what it answers",
            x: "sessions",
            y: "msgs_per_s",
            series: &["transport"],
            filter: Some(|r| r.params.get("sessions").and_then(|v| v.as_u64()) != Some(99)),
        };
        let recs: Vec<Record> = (1..=4)
            .map(|s| rec("reqres", s, 1000.0 * s as f64))
            .collect();
        let refs: Vec<&Record> = recs.iter().collect();
        let figs = figures_for_lab("ipc", &refs, &[spec]).unwrap();
        assert_eq!(figs[0].title, "declared: rate over sessions");
        assert_eq!(figs[0].caption, "what it answers");
        assert!(!figs.iter().any(|f| f.title.contains("vs sessions")));
        // A lab that declares figures gets no guessed line, even when its
        // records fill none of them; a lab that declares none does.
        let other = FigureSpec {
            x: "nothing",
            ..spec
        };
        let figs = figures_for_lab("ipc", &refs, &[other]).unwrap();
        assert!(!figs.iter().any(|f| f.title.contains("vs sessions")));
        let figs = figures_for_lab("ipc", &refs, &[]).unwrap();
        assert!(figs.iter().any(|f| f.title.contains("vs sessions")));
    }

    #[test]
    fn categorical_x_draws_bars_and_stacked_parts_add_up() {
        let bar = FigureSpec {
            kind: FigureKind::Bar,
            lab: "ipc",
            test: "reqres",
            title: "bars",
            caption: "",
            x: "transport",
            y: "msgs_per_s",
            series: &[],
            filter: None,
        };
        let recs: Vec<Record> = ["shm", "uds", "shm"]
            .iter()
            .zip([100.0, 50.0, 300.0])
            .map(|(t, v)| {
                Record::new("ipc", "reqres")
                    .param("transport", *t)
                    .metric("msgs_per_s", v)
                    .metric("cpu_a", 1.0)
                    .metric("cpu_b", 2.0)
            })
            .collect();
        let refs: Vec<&Record> = recs.iter().collect();
        let figs = declared_figures("ipc", &refs, &[bar]).unwrap();
        assert_eq!(figs.len(), 1);
        // Two categories, two bars, no line through them; labels drawn.
        let svg = &figs[0].svg;
        let texts: Vec<String> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| {
                t.split_once('>')
                    .map(|(_, rest)| rest.split('<').next().unwrap_or("").trim().to_owned())
            })
            .collect();
        assert!(
            texts.iter().any(|t| t == "shm") && texts.iter().any(|t| t == "uds"),
            "{texts:?}"
        );
        assert!(svg.matches("<rect").count() >= 3, "{svg}");
        let stacked = FigureSpec {
            kind: FigureKind::Stacked(&["cpu_a", "cpu_b"]),
            ..bar
        };
        let figs = declared_figures("ipc", &refs, &[stacked]).unwrap();
        assert!(figs[0].svg.contains("cpu_a") && figs[0].svg.contains("cpu_b"));
    }
}
