//! `commbench compare A B`: per matched record and metric, the ratio
//! after / before with its 95% interval from both sides' repeats, widened
//! by the between-run noise floor, and a verdict only when the whole
//! interval clears the threshold (see `commbench_report::compare`).
//! `commbench compare --baseline NAME|last|SHA [RESULTS]`: the given run
//! (or the latest run in the results store) against a stored one of the
//! same host. `--fail-on-regression PCT` exits 1 on a headline metric whose
//! whole interval lies beyond PCT the wrong way.
//!
//! The noise floor of a metric is learned from the results store: the
//! spread between consecutive stored runs of the same test on the same
//! host (at least `MIN_FLOOR_RUNS` runs, `commbench_report::learn_floor`),
//! because two runs made minutes apart differ by more than the repeats
//! inside either run show. Without
//! such history the floor is `--noise-floor` (default 5%). When the two
//! sides ran on different kernels, CPUs, CPU counts or build profiles, a
//! difference is reported as inconclusive, not as a change.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::estimate::{COLD_FLOOR, MIN_FLOOR_RUNS};
use commbench_core::record::Record;
use commbench_report::{load, params_key, verdicts, Change};
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
    /// Relative change below which a difference is no change, in percent.
    #[arg(long, default_value_t = 5.0, value_parser = crate::args::parse_pct)]
    pub threshold: f64,
    /// Between-run noise (95% half-width, percent) added to every interval
    /// when the results store has too little history of a test to learn it
    /// (default: the cold-start floor, 75%: the widest swing two
    /// back-to-back suites of one binary showed; for a decisive answer use
    /// `commbench ab`).
    #[arg(long, value_name = "PCT", value_parser = crate::args::parse_pct)]
    pub noise_floor: Option<f64>,
    /// Never learn the noise floor from the results store: use --noise-floor.
    #[arg(long)]
    pub fixed_noise_floor: bool,
    /// Exit 1 when a headline metric (or one of --metrics) is slower/worse with its whole interval beyond PCT percent.
    #[arg(long, value_name = "PCT", value_parser = crate::args::parse_pct)]
    pub fail_on_regression: Option<f64>,
    /// With --fail-on-regression: also fail on an inconclusive verdict.
    #[arg(long, requires = "fail_on_regression")]
    pub strict: bool,
    /// Compare only these metrics (comma-separated, dotted for nested: latency_ns.p99).
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Match records also when these parameters differ (a deliberate change, e.g. --ignore-param work).
    #[arg(long, value_delimiter = ',', value_name = "PARAM")]
    pub ignore_param: Vec<String>,
    /// Show every metric, not only each test's headline metrics.
    #[arg(long)]
    pub all: bool,
    /// A load-average difference between the two runs (each record's own load when it carries one) at or above which a change is called inconclusive; default: half the logical CPUs; 0: never.
    #[arg(long, value_name = "LOAD", value_parser = crate::args::parse_load_gap)]
    pub load_gap: Option<f64>,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// One side: a label, its records and its environment.
struct Side {
    label: String,
    records: Vec<Record>,
    env: Value,
}

/// The records to compare, before and after.
type Sides = (Side, Side);

fn from_files(a: &CompareArgs) -> Result<Sides> {
    let (Some(b), Some(c)) = (&a.before, &a.after) else {
        return Err(crate::usage(
            "give two result files (BEFORE AFTER), or --baseline NAME|last|SHA [RESULTS]",
        ));
    };
    // A file that is not results is bad input (exit 2), as for `report`.
    let before = load(b).map_err(crate::lab_err)?;
    let after = load(c).map_err(crate::lab_err)?;
    Ok((
        Side {
            label: b.display().to_string(),
            records: before.records,
            env: before.environment.unwrap_or(Value::Null),
        },
        Side {
            label: c.display().to_string(),
            records: after.records,
            env: after.environment.unwrap_or(Value::Null),
        },
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
    let (label, records, host, current_id, current_unix, current_env) = match &a.before {
        Some(p) => {
            let l = load(p).map_err(crate::lab_err)?;
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
                env.clone(),
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
                run.environment,
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
        Side {
            label: format!("run {base_id}"),
            records: run_records(&store, &base_id)?,
            env: base.environment,
        },
        Side {
            label,
            records,
            env: current_env,
        },
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
    let (before, after) = match &a.baseline {
        Some(spec) => from_store(a, spec)?,
        None => from_files(a)?,
    };
    // Shown: the named metrics, every metric with --all, else the headline
    // metrics (every metric of a test no lab declares headlines for).
    let everything = !a.metrics.is_empty() || a.all;
    let store = (!a.fixed_noise_floor)
        .then(crate::store::open_existing)
        .flatten();
    let past = store.map(|s| {
        move |host: &str, lab: &str, test: &str| crate::store::past_records(&s, host, lab, test)
    });
    let past_ref: Option<&verdicts::Past> = past.as_ref().map(|p| p as &verdicts::Past);
    // The one judgement (the report's overlay and history use it too).
    let comparison = verdicts::Comparison::new(
        verdicts::Run {
            records: &before.records,
            env: &before.env,
        },
        verdicts::Run {
            records: &after.records,
            env: &after.env,
        },
        verdicts::Policy {
            threshold: a.threshold / 100.0,
            only: &a.metrics,
            ignore_params: &a.ignore_param,
            everything,
            noise_floor: a.noise_floor.map(|p| p / 100.0),
            load_gap: a.load_gap,
        },
        past_ref,
        crate::labs::labs(),
    );
    let (machines_differ, soft) = comparison.machine_notes();
    let changes = comparison.changes();
    if changes.is_empty() {
        anyhow::bail!(
            "no record of {} matches one of {} by lab, test and parameters (or no common metric)",
            before.label,
            after.label
        );
    }
    if let Some(d) = &machines_differ {
        eprintln!(
            "compare: the two runs ran on different machines or builds ({d}): differences are reported as inconclusive, not as changes"
        );
    }
    if let Some(l) = &soft {
        eprintln!(
            "compare: {l}: wall-clock rates are the most affected; CPU per operation the least"
        );
    }
    let (shown, rest) = verdicts::split_focus(&changes, everything);
    let cold = comparison.cold();
    if cold {
        eprintln!(
            "compare: cold start: the results store holds fewer than {MIN_FLOOR_RUNS} runs of these tests on this host, so a difference counts only beyond what two back-to-back runs of one binary can differ by here (±{:.0}% between-run floor; --noise-floor sets another)",
            COLD_FLOOR * 100.0
        );
    } else {
        eprintln!("compare: {}", comparison.floor_note());
    }
    eprintln!(
        "compare: {} metrics; shown {}: {}{}",
        changes.len(),
        shown.len(),
        verdicts::count_line(&shown),
        if rest.is_empty() {
            String::new()
        } else {
            format!(
                "; the other {}: {} (--all shows them)",
                rest.len(),
                verdicts::count_line(&rest)
            )
        }
    );
    if shown.iter().any(|c| c.verdict == "inconclusive") {
        eprintln!(
            "compare: runs made at different times carry the machine's drift; for a decisive before/after run both builds side by side on this machine: commbench ab -L bin OLD,NEW -- '{{bin}} COMMAND' (docs/ci.md)"
        );
    }
    if a.out.is_table() {
        a.out.write_text(&commbench_report::compare_text::text(
            &shown,
            &before.label,
            &after.label,
            a.threshold / 100.0,
            crate::labs::labs(),
        ))?;
    } else {
        a.out.emit(&verdicts::change_records(&shown))?;
    }
    match a.fail_on_regression {
        Some(pct) => fail_on_regression(&comparison.gate_at(pct), pct, everything, a.strict),
        None => Ok(()),
    }
}

/// `--fail-on-regression PCT`: names each inconclusive metric, fails on
/// the first regression beyond PCT (and with --strict on an inconclusive
/// one).
fn fail_on_regression(gated: &[Change], pct: f64, everything: bool, strict: bool) -> Result<()> {
    let g = verdicts::gate(gated, everything);
    for u in &g.inconclusive {
        eprintln!(
            "compare: inconclusive against {pct}%: {}/{} {} {} {}{}",
            u.lab,
            u.test,
            u.params,
            u.metric,
            u.summary(),
            commbench_report::compare_text::settle_text(u)
                .map(|t| format!(" ({t})"))
                .unwrap_or_default()
        );
    }
    if let Some(w) = g.regressed.first() {
        anyhow::bail!(
            "{} metric(s) regressed beyond {pct}% with their whole interval: first {}/{} {} {} {}",
            g.regressed.len(),
            w.lab,
            w.test,
            w.params,
            w.metric,
            w.summary()
        );
    }
    if strict && !g.inconclusive.is_empty() {
        anyhow::bail!(
            "{} metric(s) inconclusive against {pct}% (--strict)",
            g.inconclusive.len()
        );
    }
    Ok(())
}
