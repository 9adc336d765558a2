//! `commbench compare A B`: before/after ratios with a noise threshold.
//! `commbench compare --baseline NAME|last|SHA [RESULTS]`: the given run
//! (or the latest run in the results store) against a stored one of the
//! same host. `--fail-on-regression PCT` turns a worse metric into exit 1
//! for CI.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::record::Record;
use commbench_report::{compare, load, params_key, Change};
use commbench_store::{Filter, Store};
use serde_json::Value;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The "before" results (--format json or jsonl output, or results.jsonl); with --baseline, the results to compare (default: the latest run in the store).
    pub before: Option<PathBuf>,
    /// The "after" results.
    pub after: Option<PathBuf>,
    /// Compare with a run in the results store: a name given with `history --save-baseline`, `last` (the previous run of this host), a git SHA or a run id.
    #[arg(long, value_name = "NAME|last|SHA")]
    pub baseline: Option<String>,
    /// Relative change below which a difference is noise, in percent.
    #[arg(long, default_value_t = 5.0)]
    pub threshold: f64,
    /// Exit 1 when a metric got worse (slower/worse) by more than PCT percent.
    #[arg(long, value_name = "PCT")]
    pub fail_on_regression: Option<f64>,
    /// Compare only these metrics (comma-separated, dotted for nested: latency_ns.p99).
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Show every metric, including those without change.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

fn pct_ok(x: f64) -> bool {
    x.is_finite() && (0.0..1000.0).contains(&x)
}

/// The records to compare: (label, records) before and after.
type Sides = ((String, Vec<Record>), (String, Vec<Record>));

fn from_files(a: &CompareArgs) -> Result<Sides> {
    let (Some(b), Some(c)) = (&a.before, &a.after) else {
        return Err(crate::usage(
            "give two result files (BEFORE AFTER), or --baseline NAME|last|SHA [RESULTS]",
        ));
    };
    let before = load(b)?;
    let after = load(c)?;
    Ok((
        (b.display().to_string(), before.records),
        (c.display().to_string(), after.records),
    ))
}

fn from_store(a: &CompareArgs, spec: &str) -> Result<Sides> {
    if a.after.is_some() {
        return Err(crate::usage(
            "--baseline compares one result file (or the latest stored run) with a stored run: give at most one file",
        ));
    }
    let store = crate::store::open_for_reading()?;
    // The current run: a file (already stored when it was measured, so
    // the stored run with its start time and host is excluded below), or
    // the latest stored run.
    let (label, records, host, current_id, current_unix) = match &a.before {
        Some(p) => {
            let l = load(p)?;
            let env = l.environment.unwrap_or(Value::Null);
            let get = |k: &str| env.get(k).and_then(Value::as_str).map(str::to_owned);
            let host = get("hostname").unwrap_or_else(|| "unknown".into());
            let started = get("started_utc").unwrap_or_default();
            let same = store
                .runs(&Filter {
                    host: Some(host.clone()),
                    ..Filter::default()
                })?
                .into_iter()
                .find(|r| !started.is_empty() && r.started_utc == started);
            let unix = commbench_store::parse_utc(&started);
            (
                p.display().to_string(),
                l.records,
                host,
                same.map(|r| r.run_id),
                unix,
            )
        }
        None => {
            let Some(id) = store.resolve("last", None)? else {
                return Err(crate::usage(format!(
                    "the results store {} holds no run yet",
                    store.path()
                )));
            };
            let run = store
                .runs(&Filter {
                    run_id: Some(id.clone()),
                    ..Filter::default()
                })?
                .into_iter()
                .next()
                .ok_or_else(|| anyhow::anyhow!("run {id} vanished from the store"))?;
            let recs = run_records(&store, &id)?;
            (
                format!("run {id}"),
                recs,
                run.host,
                Some(id),
                Some(run.started_unix),
            )
        }
    };
    let base_id = if spec == "last" {
        previous_matching(&store, &records, &host, current_id.as_deref(), current_unix)?
    } else {
        store.resolve(spec, Some(&host))?
    };
    let Some(base_id) = base_id else {
        return Err(crate::usage(format!(
            "--baseline {spec}: no stored run of host {host} matches (see `commbench history --host {host}`)"
        )));
    };
    let base = store
        .runs(&Filter {
            run_id: Some(base_id.clone()),
            ..Filter::default()
        })?
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("run {base_id} vanished from the store"))?;
    if base.host != host {
        return Err(crate::usage(format!(
            "--baseline {spec} is run {base_id} of host {}, the results are of host {host}: baselines compare runs of one host (compare files of two hosts with `commbench compare A B`)",
            base.host
        )));
    }
    eprintln!(
        "compare: baseline {spec} = run {base_id} ({} {}, {})",
        base.host, base.started_utc, base.git_sha
    );
    Ok((
        (format!("run {base_id}"), run_records(&store, &base_id)?),
        (label, records),
    ))
}

fn run_records(store: &Store, id: &str) -> Result<Vec<Record>> {
    Ok(store
        .records(&Filter {
            run_id: Some(id.to_owned()),
            ..Filter::default()
        })?
        .into_iter()
        .map(|s| s.record)
        .collect())
}

/// The newest run of `host` before the current one that shares a (lab,
/// test, params) with it.
fn previous_matching(
    store: &Store,
    records: &[Record],
    host: &str,
    current: Option<&str>,
    current_unix: Option<i64>,
) -> Result<Option<String>> {
    let keys: Vec<(String, String, String)> = records
        .iter()
        .map(|r| (r.lab.clone(), r.test.clone(), params_key(r)))
        .collect();
    let runs = store.runs(&Filter {
        host: Some(host.to_owned()),
        ..Filter::default()
    })?;
    // Runs are in start order: when the current run is stored, only those
    // before it count; otherwise those that started no later than it.
    let end = current
        .and_then(|id| runs.iter().position(|r| r.run_id == id))
        .unwrap_or(runs.len());
    for r in runs[..end].iter().rev() {
        if current.is_none() && current_unix.is_some_and(|t| r.started_unix > t) {
            continue;
        }
        let recs = run_records(store, &r.run_id)?;
        if recs
            .iter()
            .any(|x| keys.contains(&(x.lab.clone(), x.test.clone(), params_key(x))))
        {
            return Ok(Some(r.run_id.clone()));
        }
    }
    Ok(None)
}

pub fn run(a: &CompareArgs) -> Result<()> {
    if !pct_ok(a.threshold) {
        return Err(crate::usage(format!(
            "--threshold {} is not a percentage in 0..1000",
            a.threshold
        )));
    }
    if let Some(p) = a.fail_on_regression.filter(|p| !pct_ok(*p)) {
        return Err(crate::usage(format!(
            "--fail-on-regression {p} is not a percentage in 0..1000"
        )));
    }
    let ((bl, before), (al, after)) = match &a.baseline {
        Some(spec) => from_store(a, spec)?,
        None => from_files(a)?,
    };
    let changes = compare(
        &before,
        &after,
        a.threshold / 100.0,
        &a.metrics,
        crate::labs::labs(),
    );
    if changes.is_empty() {
        anyhow::bail!(
            "no record of {bl} matches one of {al} by lab, test and parameters (or no common metric)"
        );
    }
    let shown: Vec<Record> = changes
        .iter()
        .filter(|c| a.all || !a.metrics.is_empty() || c.verdict != "no change")
        .map(|c| {
            Record::new("compare", "change")
                .param("source", format!("{}/{}", c.lab, c.test))
                .param("params", &c.params)
                .param("metric", &c.metric)
                .metric("before", c.before)
                .metric("after", c.after)
                .metric("ratio", c.ratio)
                .metric("change_pct", c.change_pct)
                .metric("better", c.better)
                .metric("verdict", &c.verdict)
        })
        .collect();
    let n = |v: &str| changes.iter().filter(|c| c.verdict == v).count();
    eprintln!(
        "compare: {} metrics; {} faster, {} slower, {} better, {} worse, {} changed, {} within ±{}% (noise)",
        changes.len(),
        n("faster"),
        n("slower"),
        n("better"),
        n("worse"),
        n("changed"),
        n("no change"),
        a.threshold
    );
    a.out.emit(&shown)?;
    if let Some(pct) = a.fail_on_regression {
        let worse: Vec<&Change> = changes
            .iter()
            .filter(|c| (c.verdict == "slower" || c.verdict == "worse") && c.change_pct.abs() > pct)
            .collect();
        if let Some(w) = worse.first() {
            anyhow::bail!(
                "{} metric(s) regressed by more than {pct}%: first {}/{} {} {} {:+.1}% ({} → {})",
                worse.len(),
                w.lab,
                w.test,
                w.params,
                w.metric,
                w.change_pct,
                w.before,
                w.after
            );
        }
    }
    Ok(())
}
