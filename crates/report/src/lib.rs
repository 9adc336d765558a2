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

use commbench_core::record::Record;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use thiserror::Error;

mod plot;

pub use plot::{ladder_svg, line_svg, Series};

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

/// Which way is better for a metric, judged by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
    Unknown,
}

/// Guesses the better direction from the metric's name: rates are better
/// higher, times, CPU and memory better lower.
pub fn better(metric: &str) -> Better {
    let m = metric.to_ascii_lowercase();
    let last = m.rsplit('.').next().unwrap_or(&m);
    const HIGHER: [&str; 12] = [
        "per_s",
        "pps",
        "mpps",
        "gbps",
        "gb_per_s",
        "mb_per_s",
        "rate",
        "throughput",
        "per_ms",
        "responses",
        "hz",
        "speedup",
    ];
    const LOWER: [&str; 11] = [
        "_ns", "_us", "_ms", "_s", "latency", "cpu", "rss", "elapsed", "errors", "lost", "ctx",
    ];
    if HIGHER.iter().any(|h| m.contains(h)) && !m.contains("cpu") {
        return Better::Higher;
    }
    if LOWER.iter().any(|l| last.ends_with(l) || m.contains(l))
        || [
            "p50", "p90", "p99", "p999", "p9999", "median", "mean", "max", "min",
        ]
        .contains(&last)
    {
        return Better::Lower;
    }
    Better::Unknown
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

fn params_key(r: &Record) -> String {
    r.params
        .iter()
        .map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"')))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Compares matching records of two runs. `threshold` is the relative change
/// below which a difference is noise (0.05 = 5%); `only` restricts metrics.
pub fn compare(a: &[Record], b: &[Record], threshold: f64, only: &[String]) -> Vec<Change> {
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
            let dir = better(&m);
            let timeish = {
                let l = m.to_ascii_lowercase();
                l.ends_with("_ns") || l.ends_with("_s") || l.contains("per_s") || l.contains("pps")
            };
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

/// The metric a plot puts on the y axis for a group of records: the first
/// headline rate or time that the records carry, else the first number.
pub fn headline_metric(records: &[Record]) -> Option<String> {
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

/// Plots of one lab's records (see the module docs for how they are chosen).
pub fn figures_for_lab(lab: &str, records: &[&Record]) -> Result<Vec<Figure>, ReportError> {
    if lab == "pipeline" {
        return pipeline_figures(records);
    }
    let mut figs = Vec::new();
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
    if let (Some(x_key), Some(y_key)) = (x_key, headline_metric(&owned)) {
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
        });
    }
    Ok(figs)
}

/// The pipeline lab's declared figures: one per sweep it ran — the seed's
/// TxBuffer study (Mpps vs tx bulk), its RSS study (Mpps vs queues) and the
/// delay injection (Mpps vs injected ns). x is the swept parameter, one
/// series per (mode, frame size), the median Mpps over repeats.
const PIPELINE_FIGURES: [(&str, &str, &str); 3] = [
    (
        "sweep-tx-bulk",
        "tx_bulk",
        "Mpps vs tx bulk size (TxBuffer)",
    ),
    ("sweep-queues", "queues", "Mpps vs RSS queues"),
    (
        "sweep-delay",
        "delay_ns",
        "Mpps vs injected delay per packet (ns)",
    ),
];

fn pipeline_figures(records: &[&Record]) -> Result<Vec<Figure>, ReportError> {
    let mut figs = Vec::new();
    for (test, x_key, caption) in PIPELINE_FIGURES {
        // (series, x) -> Mpps samples over repeats.
        let mut points: Vec<(String, f64, Vec<f64>)> = Vec::new();
        for r in records.iter().filter(|r| r.test == test) {
            let (Some(x), Some(y)) = (r.params.get(x_key).and_then(num), r.metric_f64("mpps"))
            else {
                continue;
            };
            let p = |k: &str| {
                r.params
                    .get(k)
                    .map(|v| v.to_string().trim_matches('"').to_owned())
                    .unwrap_or_default()
            };
            let name = format!("{} {} B work={}", p("mode"), p("size"), p("work"));
            let name = if test == "sweep-delay" {
                format!("{} {} B", p("mode"), p("size"))
            } else {
                name
            };
            match points.iter_mut().find(|(n, px, _)| *n == name && *px == x) {
                Some((_, _, v)) => v.push(y),
                None => points.push((name, x, vec![y])),
            }
        }
        let mut series: Vec<Series> = Vec::new();
        for (name, x, mut ys) in points {
            ys.sort_by(f64::total_cmp);
            let med = commbench_core::stats::percentile_sorted(&ys, 0.5);
            match series.iter_mut().find(|s| s.name == name) {
                Some(s) => s.points.push((x, med)),
                None => series.push(Series {
                    name,
                    points: vec![(x, med)],
                }),
            }
        }
        series.retain(|s| s.points.len() >= 2);
        series.truncate(10);
        if series.is_empty() {
            continue;
        }
        for s in &mut series {
            s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let title = format!("pipeline: {caption}");
        figs.push(Figure {
            svg: line_svg(&title, x_key, "mpps", &series)?,
            title,
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

/// Renders a self-contained HTML page (no external resources) for the runs.
pub fn render_html(runs: &[Loaded], title: &str) -> Result<String, ReportError> {
    let mut labs: Vec<String> = Vec::new();
    let all: Vec<&Record> = runs.iter().flat_map(|l| l.records.iter()).collect();
    for r in &all {
        if !labs.contains(&r.lab) {
            labs.push(r.lab.clone());
        }
    }
    let mut sections = Vec::new();
    for lab in labs {
        let recs: Vec<&Record> = all.iter().copied().filter(|r| r.lab == lab).collect();
        let (columns, rows) = table(&recs);
        sections.push(LabSection {
            figures: figures_for_lab(&lab, &recs)?,
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
    tmpl.render(minijinja::context! {
        title => title,
        generated => commbench_core::env::now_utc(),
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
    fn directions() {
        assert_eq!(better("msgs_per_s"), Better::Higher);
        assert_eq!(better("cpu_ns_per_op"), Better::Lower);
        assert_eq!(better("latency_ns.p99"), Better::Lower);
        assert_eq!(better("elapsed_s"), Better::Lower);
        assert_eq!(better("sessions"), Better::Unknown);
    }

    #[test]
    fn verdicts_respect_threshold() {
        let a = vec![rec("reqres", 1, 1000.0), rec("reqres", 2, 1000.0)];
        let b = vec![rec("reqres", 1, 1030.0), rec("reqres", 2, 2000.0)];
        let c = compare(&a, &b, 0.05, &["msgs_per_s".into()]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].verdict, "no change");
        assert_eq!(c[1].verdict, "faster");
        assert!((c[1].ratio - 2.0).abs() < 1e-12);
        let slower = compare(&b, &a, 0.05, &["msgs_per_s".into()]);
        assert_eq!(slower[1].verdict, "slower");
        let lat = compare(&a, &a, 0.05, &["latency_ns.p99".into()]);
        assert_eq!(lat[0].verdict, "no change");
    }

    #[test]
    fn unmatched_records_are_skipped() {
        let a = vec![rec("reqres", 1, 1000.0)];
        let b = vec![rec("stream", 1, 1000.0)];
        assert!(compare(&a, &b, 0.05, &[]).is_empty());
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
        let html = render_html(&[run], "t").unwrap();
        assert!(html.contains("<svg"), "no svg");
        assert!(html.contains("msgs_per_s vs sessions"));
        assert!(html.contains("latency percentiles"));
        assert!(html.contains("Test CPU"));
        assert!(!html.contains("src=\"http"), "must be self-contained");
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

    #[test]
    fn pipeline_sweeps_get_their_declared_figures() {
        let mut recs = Vec::new();
        for (test, key) in [("sweep-tx-bulk", "tx_bulk"), ("sweep-queues", "queues")] {
            for x in [1u64, 2, 4] {
                for rep in 0..3u64 {
                    recs.push(
                        Record::new("pipeline", test)
                            .param("mode", "rtc")
                            .param("size", 64)
                            .param("work", "swap")
                            .param(key, x)
                            .param("repeat", rep)
                            .metric("mpps", (x * 10 + rep) as f64),
                    );
                }
            }
        }
        // A plain run adds no figure of its own.
        recs.push(Record::new("pipeline", "run").metric("mpps", 1.0));
        let refs: Vec<&Record> = recs.iter().collect();
        let figs = figures_for_lab("pipeline", &refs).unwrap();
        let titles: Vec<&str> = figs.iter().map(|f| f.title.as_str()).collect();
        assert_eq!(
            titles,
            vec![
                "pipeline: Mpps vs tx bulk size (TxBuffer)",
                "pipeline: Mpps vs RSS queues"
            ]
        );
        assert!(figs[0].svg.contains("<svg"));
    }
}
