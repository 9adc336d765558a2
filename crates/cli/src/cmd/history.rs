//! `commbench history`: the runs kept in the results store, and per (lab,
//! test, params, host) the headline metric over those runs with its trend
//! (first → last ratio and `compare`'s verdict); `--plot -o trend.html`
//! draws it; `--save-baseline NAME` names a run for `compare --baseline`;
//! `--export jsonl|parquet DIR` and `--import DIR|FILE` move runs between
//! machines and into DuckDB, Polars or Spark.
use crate::output::OutputArgs;
use anyhow::{Context, Result};
use clap::Args;
use commbench_core::record::escape_control;
use commbench_core::record::Record;
use commbench_report::{compare, headline_metric, params_key, RunRow, Series, Trend};
use commbench_store::export::{ExportFormat, ImportLimits};
use commbench_store::{parse_utc, Filter, StoreError, StoredRecord};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only runs with records of this lab (ipc, mux, openflow, ...).
    #[arg(long)]
    pub lab: Option<String>,
    /// Only records of this test.
    #[arg(long)]
    pub test: Option<String>,
    /// The metric to follow (dotted for nested: latency_ns.p99); default each test's headline metric.
    #[arg(long)]
    pub metric: Option<String>,
    /// Only runs on this host.
    #[arg(long)]
    pub host: Option<String>,
    /// Only runs started at or after DATE (UTC: 2026-11-24 or 2026-11-24T10:00).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Relative change of a trend below which it is noise, in percent (as in compare).
    #[arg(long, default_value_t = 5.0, value_parser = crate::args::parse_pct)]
    pub threshold: f64,
    /// Draw the trends into one self-contained HTML page (with -o FILE).
    #[arg(long)]
    pub plot: bool,
    /// List change points of each series' headline metric (E-Divisive on ranks with a permutation test, per-run intervals taken into account): the run where each step began, its git SHA and date, and the step with its interval.
    #[arg(long, conflicts_with_all = ["plot", "save_baseline", "import", "export"])]
    pub regressions: bool,
    /// Name a run as a baseline for `compare --baseline NAME` (the run given by --run).
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// The run --save-baseline names: `last`, a run id (or its prefix), a git SHA or a baseline name.
    #[arg(
        long,
        value_name = "ID",
        default_value = "last",
        requires = "save_baseline"
    )]
    pub run: String,
    /// Write the runs the filters select as Hive-partitioned files (lab=…/host=…/) into a new or empty DIR: --export jsonl|parquet DIR.
    #[arg(long, num_args = 2, value_names = ["FORMAT", "DIR"], conflicts_with_all = ["plot", "save_baseline", "import"])]
    pub export: Option<Vec<String>>,
    /// Merge runs of other machines: an export folder, or a results.jsonl / --format json|jsonl file; runs already kept are skipped.
    #[arg(long, value_name = "DIR|FILE", conflicts_with_all = ["plot", "save_baseline"])]
    pub import: Option<PathBuf>,
    /// Most bytes one --import reads, all files together (K/M suffixes).
    #[arg(long, value_name = "BYTES", value_parser = crate::args::parse_size, default_value = "256M", requires = "import")]
    pub import_max_bytes: usize,
    /// Longest line of an imported file, in bytes.
    #[arg(long, value_name = "BYTES", value_parser = crate::args::parse_size, default_value = "4M", requires = "import")]
    pub import_max_line_bytes: usize,
    /// Largest imported record (with its environment) as JSON, in bytes.
    #[arg(long, value_name = "BYTES", value_parser = crate::args::parse_size, default_value = "4M", requires = "import")]
    pub import_max_record_bytes: usize,
    /// Most parameters and metrics (nested values counted each) of one imported record.
    #[arg(long, value_name = "N", default_value_t = 10_000, requires = "import")]
    pub import_max_metrics: usize,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// One trend: the records of a (lab, test, params, host) over the runs.
struct Group {
    lab: String,
    test: String,
    params: String,
    host: String,
    /// (run index, records of that run)
    points: Vec<(usize, Vec<Record>)>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    commbench_core::stats::percentile_sorted(&v, 0.5)
}

/// The change points of one series (a group's runs in order) of
/// `metric`: each run's value with its interval when its record carries
/// repeats, through `core::changepoint::detect`.
fn change_point_records(g: &Group, metric: &str, runs: &[commbench_store::RunMeta]) -> Vec<Record> {
    use commbench_core::changepoint::{detect, Config, Point};
    let mut at: Vec<usize> = Vec::new();
    let mut points: Vec<Point> = Vec::new();
    for (i, v) in &g.points {
        let Some(r) = v.iter().find(|r| r.metric_f64(metric).is_some()) else {
            continue;
        };
        let p = if metric.contains('.') {
            r.metric_f64(metric).map(Point::from)
        } else {
            commbench_core::estimate::read(&r.metrics, metric).map(|e| Point::from(&e))
        };
        if let Some(p) = p {
            at.push(*i);
            points.push(p);
        }
    }
    let (better, quantity) =
        commbench_core::lab::direction(crate::labs::labs(), &g.lab, &g.test, metric);
    detect(&points, &Config::default())
        .into_iter()
        .filter_map(|cp| {
            let run_index = *at.get(cp.index)?;
            let run = runs.get(run_index.checked_sub(1)?)?;
            let up = cp.ratio > 1.0;
            let verdict = match better {
                commbench_core::lab::Better::Unknown => commbench_core::estimate::Verdict::Changed,
                commbench_core::lab::Better::Higher if up => {
                    commbench_core::estimate::Verdict::Improved
                }
                commbench_core::lab::Better::Lower if !up => {
                    commbench_core::estimate::Verdict::Improved
                }
                _ => commbench_core::estimate::Verdict::Regressed,
            };
            Some(
                Record::new("history", "change_point")
                    .param("source", format!("{}/{}", g.lab, g.test))
                    .param("params", &g.params)
                    .param("host", &g.host)
                    .param("metric", metric)
                    .param("run", run_index)
                    .param("run_id", &run.run_id)
                    .param("git_sha", &run.git_sha)
                    .param("started_utc", &run.started_utc)
                    .metric("before_median", cp.before_median)
                    .metric("after_median", cp.after_median)
                    .metric("ratio", cp.ratio)
                    .metric("ratio_lo", cp.lo)
                    .metric("ratio_hi", cp.hi)
                    .metric("p_value", cp.p_value)
                    .metric("runs_before", cp.n_before)
                    .metric("runs_after", cp.n_after)
                    .metric(
                        "verdict",
                        verdict.word(quantity == commbench_core::lab::Quantity::Time),
                    ),
            )
        })
        .collect()
}

fn groups(recs: &[StoredRecord], run_index: &dyn Fn(&str) -> usize) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for s in recs {
        let r = &s.record;
        let key = params_key(r);
        let i = run_index(&s.run_id);
        let g = match out
            .iter_mut()
            .position(|g| g.lab == r.lab && g.test == r.test && g.params == key && g.host == s.host)
        {
            Some(p) => &mut out[p],
            None => {
                out.push(Group {
                    lab: r.lab.clone(),
                    test: r.test.clone(),
                    params: key,
                    host: s.host.clone(),
                    points: Vec::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        match g.points.iter_mut().find(|(k, _)| *k == i) {
            Some((_, v)) => v.push(r.clone()),
            None => g.points.push((i, vec![r.clone()])),
        }
    }
    out
}

pub fn run(a: &HistoryArgs) -> Result<()> {
    let since_unix = match &a.since {
        Some(d) => Some(parse_utc(d).ok_or_else(|| {
            crate::usage(format!(
                "--since {d}: not a date; give YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)"
            ))
        })?),
        None => None,
    };
    if a.plot && a.out.output.is_none() {
        return Err(crate::usage(
            "--plot writes HTML: give -o FILE (trend.html)",
        ));
    }
    let mut store = crate::store::open_for_reading()?;
    if let Some(name) = &a.save_baseline {
        let Some(id) = store.resolve(&a.run, None)? else {
            return Err(crate::usage(format!(
                "--run {}: no such run in {} (see `commbench history`)",
                a.run,
                store.path()
            )));
        };
        store.save_baseline(name, &id)?;
        eprintln!("history: baseline '{name}' is run {id}");
        return Ok(());
    }
    if let Some(path) = &a.import {
        let lim = ImportLimits {
            max_bytes: a.import_max_bytes as u64,
            max_line_bytes: a.import_max_line_bytes,
            max_record_bytes: a.import_max_record_bytes,
            max_metrics: a.import_max_metrics,
        };
        // What is wrong with the input is the user's to fix: exit 2, as
        // `report` and `compare` refuse a bad result file.
        let sum =
            commbench_store::export::import_with(&mut store, path, &lim).map_err(|e| match e {
                StoreError::Input(m) => crate::usage(format!("--import: {m}")),
                e => e.into(),
            })?;
        eprintln!(
            "history: imported {} runs ({} records) from {}; {} already kept",
            sum.runs_added,
            sum.records_added,
            escape_control(&path.display().to_string()),
            sum.runs_skipped
        );
        return Ok(());
    }
    let f = Filter {
        lab: a.lab.clone(),
        test: a.test.clone(),
        host: a.host.clone(),
        since_unix,
        run_id: None,
    };
    if let Some(e) = &a.export {
        let (Some(fmt), Some(dir)) = (e.first(), e.get(1)) else {
            return Err(crate::usage(
                "--export takes a format and a folder: --export jsonl|parquet DIR",
            ));
        };
        let Some(format) = ExportFormat::parse(fmt) else {
            return Err(crate::usage(format!(
                "--export {fmt}: use jsonl or parquet"
            )));
        };
        if format == ExportFormat::Parquet && !commbench_store::export::PARQUET {
            return Err(crate::usage(
                "--export parquet: this commbench was built without Parquet (--no-default-features); use jsonl or rebuild with the default features",
            ));
        }
        let dir = PathBuf::from(dir);
        let sum = commbench_store::export::export(&store, &f, &dir, format)?;
        eprintln!(
            "history: {} records in {} files under {} (Hive partitions lab=…/host=…)",
            sum.rows,
            sum.files,
            dir.display()
        );
        return Ok(());
    }
    let runs = store.runs(&f)?;
    let recs = store.records(&f)?;
    let index = |id: &str| {
        runs.iter()
            .position(|r| r.run_id == id)
            .map_or(0, |p| p + 1)
    };
    let mut out: Vec<Record> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        out.push(
            Record::new("history", "run")
                .param("run", i + 1)
                .param("run_id", &r.run_id)
                .param("started_utc", &r.started_utc)
                .param("host", &r.host)
                .param("git_sha", &r.git_sha)
                .param("build_profile", &r.build_profile)
                .metric(
                    "records",
                    recs.iter().filter(|s| s.run_id == r.run_id).count(),
                ),
        );
    }
    let mut trends: Vec<Trend> = Vec::new();
    let mut change_points: Vec<Record> = Vec::new();
    let mut series_checked = 0usize;
    for g in groups(&recs, &index) {
        let all: Vec<Record> = g.points.iter().flat_map(|(_, v)| v.clone()).collect();
        let Some(metric) = a
            .metric
            .clone()
            .or_else(|| headline_metric(&all, crate::labs::labs()))
        else {
            continue;
        };
        let pts: Vec<(usize, f64)> = g
            .points
            .iter()
            .filter_map(|(i, v)| {
                let ys: Vec<f64> = v
                    .iter()
                    .filter_map(|r| r.metric_f64(&metric))
                    .filter(|y| y.is_finite())
                    .collect();
                (!ys.is_empty()).then(|| (*i, median(ys)))
            })
            .collect();
        let (Some(&(_, first)), Some(&(_, last))) = (pts.first(), pts.last()) else {
            continue;
        };
        // The verdict from the first and the last run's own records: with
        // their repeats' samples it is judged by the interval of the ratio;
        // without, it says "no samples".
        let carrying = |v: &Vec<Record>| -> Vec<Record> {
            v.iter()
                .filter(|r| r.metric_f64(&metric).is_some())
                .cloned()
                .collect()
        };
        let first_recs = g
            .points
            .iter()
            .map(|(_, v)| carrying(v))
            .find(|v| !v.is_empty())
            .unwrap_or_default();
        let last_recs = g
            .points
            .iter()
            .rev()
            .map(|(_, v)| carrying(v))
            .find(|v| !v.is_empty())
            .unwrap_or_default();
        let verdict = compare(
            &first_recs[..first_recs.len().min(1)],
            &last_recs[..last_recs.len().min(1)],
            a.threshold / 100.0,
            std::slice::from_ref(&metric),
            crate::labs::labs(),
        )
        .into_iter()
        .next();
        let (verdict, lo, hi) = verdict.map_or(("changed".to_owned(), f64::NAN, f64::NAN), |c| {
            (c.verdict, c.lo, c.hi)
        });
        let ratio = if first != 0.0 { last / first } else { f64::NAN };
        out.push(
            Record::new("history", "trend")
                .param("source", format!("{}/{}", g.lab, g.test))
                .param("params", &g.params)
                .param("host", &g.host)
                .param("metric", &metric)
                .metric("runs", pts.len())
                .metric("first", first)
                .metric("last", last)
                .metric("ratio", ratio)
                .metric("ratio_lo", lo)
                .metric("ratio_hi", hi)
                .metric("change_pct", (ratio - 1.0) * 100.0)
                .metric("verdict", verdict),
        );
        if a.regressions {
            series_checked += 1;
            change_points.extend(change_point_records(&g, &metric, &runs));
        }
        let title = format!("{}/{} {}", g.lab, g.test, g.params);
        let mut series = vec![Series {
            name: g.host.clone(),
            points: pts.iter().map(|&(i, y)| (i as f64, y)).collect(),
        }];
        if a.plot {
            // Each change point as a vertical mark across the series'
            // range, named with its step and interval.
            let (ylo, yhi) = pts
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                    (lo.min(p.1), hi.max(p.1))
                });
            for cp in change_point_records(&g, &metric, &runs) {
                let (Some(run), Some(r), Some(lo), Some(hi)) = (
                    cp.params.get("run").and_then(serde_json::Value::as_f64),
                    cp.metric_f64("ratio"),
                    cp.metric_f64("ratio_lo"),
                    cp.metric_f64("ratio_hi"),
                ) else {
                    continue;
                };
                series.push(Series {
                    name: format!(
                        "{}: change point at run {run} ({r:.2}× [{lo:.2}, {hi:.2}])",
                        g.host
                    ),
                    points: vec![(run - 0.5, ylo), (run - 0.5, yhi)],
                });
            }
        }
        match trends
            .iter_mut()
            .find(|t| t.title == title && t.metric == metric)
        {
            Some(t) => t.series.extend(series),
            None => trends.push(Trend {
                title,
                metric,
                series,
            }),
        }
    }
    if runs.is_empty() {
        eprintln!("history: no run in {} matches", store.path());
    }
    if a.regressions {
        eprintln!(
            "history: {} change point(s) in {series_checked} series of {} runs",
            change_points.len(),
            runs.len()
        );
        return a.out.write_with(&change_points, &serde_json::Value::Null);
    }
    if a.plot {
        let path: PathBuf = a.out.output.clone().unwrap_or_default();
        let rows: Vec<RunRow> = runs
            .iter()
            .enumerate()
            .map(|(i, r)| RunRow {
                index: i + 1,
                run_id: r.run_id.clone(),
                started_utc: r.started_utc.clone(),
                host: r.host.clone(),
                git_sha: r.git_sha.clone(),
            })
            .collect();
        let html = commbench_report::render_trends_html("commbench history", &trends, &rows)?;
        commbench_core::artifact::write_atomic(&path, |f| {
            std::io::Write::write_all(f, html.as_bytes())
        })
        .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!(
            "history: {} runs, {} trends drawn into {}",
            runs.len(),
            trends.len(),
            path.display()
        );
        return Ok(());
    }
    a.out.emit(&out)
}
