//! Reading results back, comparing two runs, and rendering the HTML report.
//!
//! Every seed reports a speed-up ("10x faster", "2.8x faster than zcat")
//! without saying how noisy the machine was. [`compare`] matches the records
//! of two runs by (lab, test, params) and gives, per metric, the ratio, the
//! change and a verdict (faster / slower / no change) that only calls a
//! change when it exceeds the noise threshold — criterion's approach with a
//! threshold the user can widen on a shared machine.
//!
//! [`render_html`] turns any set of records into one self-contained page:
//! SVG plots drawn with plotters (no fonts, no C libraries: the SVG carries
//! `<text>` for the browser to render) embedded in a minijinja template,
//! plus the tables and the environment. Plots are derived from the records'
//! shape, so a lab gets plots by emitting records, not by writing plot code:
//! a numeric parameter that varies becomes the x axis, the other parameters
//! name the series, and the lab's headline metric is the y axis; every
//! latency summary (p50…max) becomes a percentile-ladder plot.

use commbench_core::figure::{FigureKind, FigureSpec};
use commbench_core::record::Record;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use thiserror::Error;

mod plot;
pub mod summary;
mod trend;

pub use commbench_core::lab::Better;
use commbench_core::lab::{direction, Lab, Quantity};

pub use plot::{ladder_svg, line_svg, Series};
pub use trend::{render_trends_html, RunRow, Trend};

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("cannot read {path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path}: not commbench output ({reason}); give a file written with --format json or jsonl, or a suite's results.jsonl")]
    Format { path: String, reason: String },
    #[error("template error: {0}")]
    Template(String),
    #[error("plot error: {0}")]
    Plot(String),
}

/// A loaded result file: its records and the environment it was measured in.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: String,
    pub records: Vec<Record>,
    pub environment: Option<Value>,
}

/// Reads a JSON document (`--format json`) or JSON Lines (`--format jsonl`).
pub fn load(path: &Path) -> Result<Loaded, ReportError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| ReportError::Io {
        path: p.clone(),
        err,
    })?;
    let fmt_err = |reason: String| ReportError::Format {
        path: p.clone(),
        reason,
    };
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(fmt_err("the file is empty".into()));
    }
    // A JSON document spans lines; JSON Lines has one record per line.
    if let Ok(doc) = serde_json::from_str::<Value>(trimmed) {
        if let Some(recs) = doc.get("records") {
            let records: Vec<Record> = serde_json::from_value(recs.clone())
                .map_err(|e| fmt_err(format!("records: {e}")))?;
            return Ok(Loaded {
                path: p,
                records,
                environment: doc.get("environment").cloned(),
            });
        }
    }
    let mut records = Vec::new();
    let mut environment = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut r: Record =
            serde_json::from_str(line).map_err(|e| fmt_err(format!("line {}: {e}", i + 1)))?;
        if environment.is_none() {
            environment = r.environment.clone();
        }
        r.environment = None;
        records.push(r);
    }
    Ok(Loaded {
        path: p,
        records,
        environment,
    })
}

/// One metric of one matched record pair.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub lab: String,
    pub test: String,
    pub params: String,
    pub metric: String,
    pub before: f64,
    pub after: f64,
    /// after / before.
    pub ratio: f64,
    pub change_pct: f64,
    pub better: Better,
    /// `faster`/`slower` (or `better`/`worse` for non-time metrics),
    /// `no change` within the threshold, `changed` when direction is unknown.
    pub verdict: String,
}

fn flat_metrics(r: &Record) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for (k, v) in &r.metrics {
        let mut flat = Vec::new();
        commbench_core::record::flatten(k, v, &mut flat);
        for (k, v) in flat {
            if let Some(x) = v.as_f64() {
                if x.is_finite() {
                    out.push((k, x));
                }
            }
        }
    }
    out
}

/// The parameters as `k=v` pairs: what records are matched by.
pub fn params_key(r: &Record) -> String {
    r.params
        .iter()
        .map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"')))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Compares matching records of two runs. `threshold` is the relative change
/// below which a difference is noise (0.05 = 5%); `only` restricts metrics.
/// Which way is better comes from the labs' declared metrics (`labs`),
/// falling back to [`commbench_core::lab::guess_better`] for metrics no lab
/// declares.
pub fn compare(
    a: &[Record],
    b: &[Record],
    threshold: f64,
    only: &[String],
    labs: &[&dyn Lab],
) -> Vec<Change> {
    let mut out = Vec::new();
    for ra in a {
        let key = params_key(ra);
        let Some(rb) = b
            .iter()
            .find(|rb| rb.lab == ra.lab && rb.test == ra.test && params_key(rb) == key)
        else {
            continue;
        };
        let mb = flat_metrics(rb);
        for (m, before) in flat_metrics(ra) {
            if !only.is_empty() && !only.iter().any(|o| o == &m) {
                continue;
            }
            let Some(&(_, after)) = mb.iter().find(|(k, _)| k == &m) else {
                continue;
            };
            let ratio = if before != 0.0 {
                after / before
            } else {
                f64::NAN
            };
            let change = ratio - 1.0;
            let (dir, quantity) = direction(labs, &ra.lab, &ra.test, &m);
            let timeish = quantity == Quantity::Time;
            let verdict = if before == after {
                "no change"
            } else if !ratio.is_finite() {
                "changed"
            } else if change.abs() < threshold {
                "no change"
            } else {
                let improved = match dir {
                    Better::Higher => Some(change > 0.0),
                    Better::Lower => Some(change < 0.0),
                    Better::Unknown => None,
                };
                match (improved, timeish) {
                    (Some(true), true) => "faster",
                    (Some(false), true) => "slower",
                    (Some(true), false) => "better",
                    (Some(false), false) => "worse",
                    (None, _) => "changed",
                }
            };
            out.push(Change {
                lab: ra.lab.clone(),
                test: ra.test.clone(),
                params: key.clone(),
                metric: m,
                before,
                after,
                ratio,
                change_pct: change * 100.0,
                better: dir,
                verdict: verdict.to_owned(),
            });
        }
    }
    out
}

/// The headline metric of a group of records: the first headline metric
/// their lab declares for their test that the records carry; for records
/// no lab declares, the first rate or time they carry, else the first
/// number.
pub fn headline_metric(records: &[Record], labs: &[&dyn Lab]) -> Option<String> {
    const PREFERRED: [&str; 16] = [
        "msgs_per_s",
        "responses_per_s",
        "mpps",
        "pps",
        "gb_per_s",
        "mb_per_s",
        "packets_per_s",
        "flows_per_s",
        "rate",
        "median_ns",
        "p50_ns",
        "latency_ns.p50",
        "ns_median",
        "elapsed_s",
        "wall_s",
        "ns_per_packet",
    ];
    let first = records.first()?;
    let flat = flat_metrics(first);
    if let Some(lab) = commbench_core::lab::find(labs, &first.lab) {
        for h in lab.headlines(&first.test) {
            if flat.iter().any(|(k, _)| k == h.key) {
                return Some(h.key.to_owned());
            }
        }
    }
    for p in PREFERRED {
        if flat.iter().any(|(k, _)| k == p) {
            return Some(p.to_owned());
        }
    }
    flat.first().map(|(k, _)| k.clone())
}

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

#[derive(Serialize)]
struct LabSection {
    lab: String,
    figures: Vec<Figure>,
    columns: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn table(records: &[&Record]) -> (Vec<String>, Vec<Vec<String>>) {
    let flat: Vec<Vec<(String, Value)>> = records
        .iter()
        .map(|r| {
            let mut v = vec![("test".to_owned(), Value::from(r.test.clone()))];
            for (k, x) in &r.params {
                commbench_core::record::flatten(k, x, &mut v);
            }
            for (k, x) in &r.metrics {
                commbench_core::record::flatten(k, x, &mut v);
            }
            v
        })
        .collect();
    let mut cols: Vec<String> = Vec::new();
    for row in &flat {
        for (k, _) in row {
            if !cols.contains(k) {
                cols.push(k.clone());
            }
        }
    }
    let rows = flat
        .iter()
        .map(|row| {
            cols.iter()
                .map(|c| match row.iter().find(|(k, _)| k == c).map(|(_, v)| v) {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => match n.as_i64() {
                        Some(i) => i.to_string(),
                        None => {
                            commbench_core::record::human_number(n.as_f64().unwrap_or(f64::NAN))
                        }
                    },
                    Some(v) => v.to_string(),
                })
                .collect()
        })
        .collect();
    (cols, rows)
}

const TEMPLATE: &str = include_str!("templates/report.html");

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
    for r in &all {
        if !labs.contains(&r.lab) {
            labs.push(r.lab.clone());
        }
    }
    let mut sections = Vec::new();
    for lab in labs {
        let recs: Vec<&Record> = all
            .iter()
            .copied()
            .filter(|r| r.lab == lab && r.lab != "suite")
            .collect();
        if recs.is_empty() {
            continue;
        }
        let (columns, rows) = table(&recs);
        sections.push(LabSection {
            figures: figures_for_lab(&lab, &recs, specs)?,
            lab,
            columns,
            rows,
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
    let mut env = minijinja::Environment::new();
    env.add_template("report", TEMPLATE)
        .map_err(|e| ReportError::Template(e.to_string()))?;
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
                commbench_core::record::human_number(c.before),
                commbench_core::record::human_number(c.after),
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

    fn rec(test: &str, sessions: u64, rate: f64) -> Record {
        Record::new("ipc", test)
            .param("transport", "shm")
            .param("sessions", sessions)
            .metric("msgs_per_s", rate)
            .metric("cpu_ns_per_op", 100.0)
            .metric(
                "latency_ns",
                serde_json::json!({"p50": 300.0, "p90": 400.0, "p99": 900.0, "p999": 2000.0, "p9999": 5000.0, "max": 9000.0}),
            )
    }

    #[test]
    fn verdicts_respect_threshold() {
        let a = vec![rec("reqres", 1, 1000.0), rec("reqres", 2, 1000.0)];
        let b = vec![rec("reqres", 1, 1030.0), rec("reqres", 2, 2000.0)];
        let c = compare(&a, &b, 0.05, &["msgs_per_s".into()], &[]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].verdict, "no change");
        assert_eq!(c[1].verdict, "faster");
        assert!((c[1].ratio - 2.0).abs() < 1e-12);
        let slower = compare(&b, &a, 0.05, &["msgs_per_s".into()], &[]);
        assert_eq!(slower[1].verdict, "slower");
        let lat = compare(&a, &a, 0.05, &["latency_ns.p99".into()], &[]);
        assert_eq!(lat[0].verdict, "no change");
    }

    #[test]
    fn unmatched_records_are_skipped() {
        let a = vec![rec("reqres", 1, 1000.0)];
        let b = vec![rec("stream", 1, 1000.0)];
        assert!(compare(&a, &b, 0.05, &[], &[]).is_empty());
    }

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

    #[test]
    fn load_rejects_non_results() {
        let dir = std::env::temp_dir().join(format!("cbreport-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.json");
        std::fs::write(&p, "{\"hello\": 1}\n").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("not commbench output"), "{e}");
        std::fs::write(&p, "").unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("empty"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
