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
use commbench_report::{HistoryOptions, RunRecord, RunRow};
use commbench_store::export::{ExportFormat, ImportLimits};
use commbench_store::{parse_utc, Filter, Store, StoreError};
use std::path::{Path, PathBuf};

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
    #[arg(long, value_name = "DATE", value_parser = parse_since)]
    pub since: Option<i64>,
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

/// A start date (UTC) as Unix seconds.
fn parse_since(d: &str) -> std::result::Result<i64, String> {
    parse_utc(d)
        .ok_or_else(|| format!("{d}: not a date; give YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)"))
}

/// `--save-baseline NAME --run ID`.
fn save_baseline(store: &mut Store, name: &str, run: &str) -> Result<()> {
    let Some(id) = store.resolve(run, None)? else {
        return Err(crate::usage(format!(
            "--run {run}: no such run in {} (see `commbench history`)",
            store.path()
        )));
    };
    store.save_baseline(name, &id)?;
    eprintln!("history: baseline '{name}' is run {id}");
    Ok(())
}

/// `--import DIR|FILE` within the --import-max-* bounds.
fn import(store: &mut Store, path: &Path, a: &HistoryArgs) -> Result<()> {
    let lim = ImportLimits {
        max_bytes: a.import_max_bytes as u64,
        max_line_bytes: a.import_max_line_bytes,
        max_record_bytes: a.import_max_record_bytes,
        max_metrics: a.import_max_metrics,
    };
    // What is wrong with the input is the user's to fix: exit 2, as
    // `report` and `compare` refuse a bad result file.
    let sum = commbench_store::export::import_with(store, path, &lim).map_err(|e| match e {
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
    Ok(())
}

/// `--export jsonl|parquet DIR` of the runs `f` selects.
fn export(store: &Store, f: &Filter, e: &[String]) -> Result<()> {
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
    let sum = commbench_store::export::export(store, f, &dir, format)?;
    eprintln!(
        "history: {} records in {} files under {} (Hive partitions lab=…/host=…)",
        sum.rows,
        sum.files,
        dir.display()
    );
    Ok(())
}

/// `--plot -o FILE`: the trend page.
fn plot(path: &Path, trends: &[commbench_report::Trend], rows: &[RunRow]) -> Result<()> {
    let html = commbench_report::render_trends_html("commbench history", trends, rows)?;
    commbench_core::artifact::write_atomic(path, |f| std::io::Write::write_all(f, html.as_bytes()))
        .with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!(
        "history: {} runs, {} trends drawn into {}",
        rows.len(),
        trends.len(),
        path.display()
    );
    Ok(())
}

pub fn run(a: &HistoryArgs) -> Result<()> {
    if a.plot && a.out.output.is_none() {
        return Err(crate::usage(
            "--plot writes HTML: give -o FILE (trend.html)",
        ));
    }
    let given = a.out.format.map(|f| crate::output::value_name(&f));
    let chosen =
        crate::output::HISTORY.choose("history", given.as_deref(), a.out.output.as_deref())?;
    if a.plot && chosen != "html" {
        return Err(crate::usage(
            "--plot writes HTML: name the file .html (trend.html)",
        ));
    }
    if !a.plot && chosen == "html" {
        return Err(crate::usage(
            "-o *.html is the trend page: add --plot, or name the file .txt, .csv, .json or .jsonl for the records",
        ));
    }
    let mut store = crate::store::open_for_reading()?;
    if let Some(name) = &a.save_baseline {
        return save_baseline(&mut store, name, &a.run);
    }
    if let Some(path) = &a.import {
        return import(&mut store, path, a);
    }
    let f = Filter {
        lab: a.lab.clone(),
        test: a.test.clone(),
        host: a.host.clone(),
        since_unix: a.since,
        run_id: None,
    };
    if let Some(e) = &a.export {
        return export(&store, &f, e);
    }
    let runs = store.runs(&f)?;
    let recs = store.records(&f)?;
    // Records per run, counted once (not a pass over every record per run).
    let mut per_run: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for s in &recs {
        *per_run.entry(s.run_id.as_str()).or_default() += 1;
    }
    let mut out: Vec<Record> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            Record::new("history", "run")
                .param("run", i + 1)
                .param("run_id", &r.run_id)
                .param("started_utc", &r.started_utc)
                .param("host", &r.host)
                .param("git_sha", &r.git_sha)
                .param("build_profile", &r.build_profile)
                .metric(
                    "records",
                    per_run.get(r.run_id.as_str()).copied().unwrap_or(0),
                )
        })
        .collect();
    let rows: Vec<RunRow> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| RunRow {
            index: i + 1,
            run_id: r.run_id.clone(),
            started_utc: r.started_utc.clone(),
            host: r.host.clone(),
            git_sha: r.git_sha.clone(),
            environment: r.environment.clone(),
        })
        .collect();
    let recs: Vec<RunRecord> = recs
        .into_iter()
        .map(|s| RunRecord {
            run_id: s.run_id,
            host: s.host,
            record: s.record,
        })
        .collect();
    // Each trend is judged as `compare --baseline` judges the same two
    // runs: the floor learned from this store (at the family-wise level
    // over the series judged), else the cold-start floor, and the load
    // gap of half the later run's CPUs.
    let series: std::collections::HashSet<(&str, &str, String, &str)> = recs
        .iter()
        .map(|s| {
            (
                s.record.lab.as_str(),
                s.record.test.as_str(),
                commbench_report::params_key(&s.record),
                s.host.as_str(),
            )
        })
        .collect();
    let floors = commbench_report::FloorLearner::new(
        commbench_core::estimate::familywise_z(series.len()),
        Some(Box::new(|lab: &str, test: &str| {
            // One host per learner call is enough: floors are per host,
            // and a trend's records all come from one.
            let host = recs
                .iter()
                .find(|s| s.record.lab == lab && s.record.test == test)
                .map_or("", |s| s.host.as_str());
            crate::store::past_records(&store, host, lab, test)
        })),
    );
    let learned =
        |lab: &str, test: &str, params: &str, metric: &str| floors.floor(lab, test, params, metric);
    let judge = commbench_report::verdicts::Judge {
        noise_floor: &learned,
        default_floor: commbench_core::estimate::COLD_FLOOR,
        cross_cpu_floor: commbench_core::estimate::CROSS_CPU_COLD_FLOOR,
        load_gap: None,
    };
    let h = commbench_report::history(
        &recs,
        &rows,
        &HistoryOptions {
            metric: a.metric.as_deref(),
            threshold: a.threshold / 100.0,
            regressions: a.regressions,
            plot: a.plot,
            judge: &judge,
        },
        crate::labs::labs(),
    );
    out.extend(h.trends);
    if runs.is_empty() {
        eprintln!("history: no run in {} matches", store.path());
    }
    if a.regressions {
        eprintln!(
            "history: {} change point(s) in {} series of {} runs",
            h.change_points.len(),
            h.series_checked,
            runs.len()
        );
        return a.out.write_with(&h.change_points, &serde_json::Value::Null);
    }
    if a.plot {
        return plot(&a.out.output.clone().unwrap_or_default(), &h.figures, &rows);
    }
    a.out.emit_or_show(&out, || history_tables(&out))
}

/// The terminal view: the runs, then the trends grouped by series
/// (`commbench_report::history_text`), every line within 100 columns.
fn history_tables(records: &[Record]) -> String {
    // The runs come first, then the trends (as `run` makes them): split,
    // not copied (a copy of every record was 7% of `history`'s time).
    let (runs, trends) = records.split_at(records.partition_point(|r| r.test == "run"));
    commbench_report::history_text::history_text(runs, trends)
}
