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
//! host (at least `MIN_FLOOR_RUNS` runs, `core::estimate::floor_from_series`), because two runs made minutes
//! apart differ by more than the repeats inside either run show. Without
//! such history the floor is `--noise-floor` (default 5%). When the two
//! sides ran on different kernels, CPUs, CPU counts or build profiles, a
//! difference is reported as inconclusive, not as a change.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::estimate::{familywise_z, floor_from_series, MIN_FLOOR_RUNS};
use commbench_core::record::Record;
use commbench_report::{compare_with, load, params_key, Change, Options};
use commbench_store::{Filter, Store};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
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
    #[arg(long, default_value_t = 5.0)]
    pub threshold: f64,
    /// Between-run noise (95% half-width, percent) added to every interval
    /// when the results store has too little history of a test to learn it.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub noise_floor: f64,
    /// Never learn the noise floor from the results store: use --noise-floor.
    #[arg(long)]
    pub fixed_noise_floor: bool,
    /// Exit 1 when a headline metric (or one of --metrics) is slower/worse with its whole interval beyond PCT percent.
    #[arg(long, value_name = "PCT")]
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
    /// Show every metric as a table, not one line per test with its headline verdicts.
    #[arg(long)]
    pub all: bool,
    /// A load-average difference between the two runs (each record's own load when it carries one) at or above which a change is called inconclusive; default: half the logical CPUs; 0: never.
    #[arg(long, value_name = "LOAD")]
    pub load_gap: Option<f64>,
    #[command(flatten)]
    pub out: OutputArgs,
}

fn pct_ok(x: f64) -> bool {
    x.is_finite() && (0.0..1000.0).contains(&x)
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

/// Learns noise floors from the results store, one (lab, test) query at
/// a time, for one host.
struct Floors {
    store: Option<Store>,
    host: String,
    z: f64,
    series: RefCell<HashMap<(String, String), Vec<commbench_store::StoredRecord>>>,
    learned: RefCell<Vec<(String, f64, usize)>>,
}

impl Floors {
    fn floor(&self, lab: &str, test: &str, params: &str, metric: &str) -> Option<f64> {
        let store = self.store.as_ref()?;
        let mut cache = self.series.borrow_mut();
        let recs = cache
            .entry((lab.to_owned(), test.to_owned()))
            .or_insert_with(|| {
                store
                    .records(&Filter {
                        lab: Some(lab.to_owned()),
                        test: Some(test.to_owned()),
                        host: Some(self.host.clone()),
                        ..Filter::default()
                    })
                    .unwrap_or_default()
            });
        let mut points: Vec<(i64, String, f64)> = recs
            .iter()
            .filter(|s| params_key(&s.record) == params)
            .filter_map(|s| {
                Some((
                    s.started_unix,
                    s.git_sha.clone(),
                    s.record.metric_f64(metric)?,
                ))
            })
            .collect();
        points.sort_by_key(|p| p.0);
        let values: Vec<(String, f64)> = points.into_iter().map(|p| (p.1, p.2)).collect();
        let f = floor_from_series(&values, self.z)?;
        self.learned
            .borrow_mut()
            .push((format!("{lab}/{test} {metric}"), f, values.len()));
        Some(f)
    }
}

/// Differences between the two sides' machines that make a change
/// meaningless (and the load, which is only reported).
fn env_differences(before: &Value, after: &Value) -> (Vec<String>, Option<String>) {
    let s = |v: &Value, k: &str| {
        v.get(k)
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
    };
    let mut hard = Vec::new();
    for k in ["kernel", "cpu_model", "logical_cpus", "build_profile"] {
        if let (Some(x), Some(y)) = (s(before, k), s(after, k)) {
            if x != y {
                hard.push(format!("{k} {x} vs {y}"));
            }
        }
    }
    let load = |v: &Value| {
        v.get("load_average")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_f64)
    };
    let soft = match (load(before), load(after)) {
        (Some(x), Some(y)) if (x - y).abs() >= 0.5 => {
            Some(format!("load average {x:.1} before, {y:.1} after"))
        }
        _ => None,
    };
    (hard, soft)
}

/// One line per test: its headline verdicts with their intervals.
fn test_lines(changes: &[Change]) -> String {
    let mut out = String::new();
    let mut seen: Vec<(String, String, String)> = Vec::new();
    for c in changes.iter().filter(|c| c.headline) {
        let k = (c.lab.clone(), c.test.clone(), c.params.clone());
        if seen.contains(&k) {
            continue;
        }
        let parts: Vec<String> = changes
            .iter()
            .filter(|d| d.headline && d.lab == c.lab && d.test == c.test && d.params == c.params)
            .map(|d| {
                let mut t = format!("{} {}", d.metric, d.summary());
                if let Some(n) = d.settle.filter(|&n| n > d.n_before.min(d.n_after)) {
                    t.push_str(&format!(" (~{n} repeats would settle it)"));
                }
                t
            })
            .collect();
        out.push_str(&format!(
            "{}/{} {}: {}\n",
            c.lab,
            c.test,
            commbench_core::record::escape_control(&c.params),
            parts.join("; ")
        ));
        seen.push(k);
    }
    out
}

fn count_line(changes: &[&Change]) -> String {
    let words = [
        "faster",
        "slower",
        "better",
        "worse",
        "changed",
        "inconclusive",
        "no change",
        "no samples",
    ];
    let parts: Vec<String> = words
        .iter()
        .map(|w| (w, changes.iter().filter(|c| c.verdict == *w).count()))
        .filter(|(_, n)| *n > 0)
        .map(|(w, n)| format!("{n} {w}"))
        .collect();
    parts.join(", ")
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
    if let Some(g) = a.load_gap.filter(|g| !(g.is_finite() && *g >= 0.0)) {
        return Err(crate::usage(format!(
            "--load-gap {g} is not a load average difference (0 or more)"
        )));
    }
    if !pct_ok(a.noise_floor) {
        return Err(crate::usage(format!(
            "--noise-floor {} is not a percentage in 0..1000",
            a.noise_floor
        )));
    }
    let (before, after) = match &a.baseline {
        Some(spec) => from_store(a, spec)?,
        None => from_files(a)?,
    };
    let host = after
        .env
        .get("hostname")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned();
    // How many metrics this comparison judges with samples: the floor is
    // learned at the family-wise 95% level over them.
    let judged = {
        let probe = compare_with(
            &before.records,
            &after.records,
            &Options {
                threshold: a.threshold / 100.0,
                only: &a.metrics,
                ignore_params: &a.ignore_param,
                noise_floor: &commbench_report::no_floor,
                default_floor: 0.0,
                load_gap: 0.0,
                env_load: (None, None),
                machines_differ: None,
            },
            crate::labs::labs(),
        );
        let headline_tests: Vec<(String, String)> = probe
            .iter()
            .filter(|c| c.headline)
            .map(|c| (c.lab.clone(), c.test.clone()))
            .collect();
        probe
            .iter()
            .filter(|c| {
                !a.metrics.is_empty()
                    || a.all
                    || c.headline
                    || !headline_tests.contains(&(c.lab.clone(), c.test.clone()))
            })
            .filter(|c| c.n_before > 1 && c.n_after > 1)
            .count()
    };
    let z = familywise_z(judged);
    let floors = Floors {
        z,
        store: if a.fixed_noise_floor {
            None
        } else {
            crate::store::open_existing()
        },
        host,
        series: RefCell::new(HashMap::new()),
        learned: RefCell::new(Vec::new()),
    };
    let learned =
        |lab: &str, test: &str, params: &str, metric: &str| floors.floor(lab, test, params, metric);
    let env_load = |e: &Value| {
        e.get("load_average")
            .and_then(Value::as_array)
            .and_then(|v| v.first())
            .and_then(Value::as_f64)
    };
    let cpus = after
        .env
        .get("logical_cpus")
        .and_then(Value::as_f64)
        .unwrap_or(2.0);
    let load_gap = a.load_gap.unwrap_or(cpus / 2.0);
    let (hard, soft) = env_differences(&before.env, &after.env);
    let machines_differ = (!hard.is_empty()).then(|| hard.join("; "));
    let judge = |threshold: f64| {
        compare_with(
            &before.records,
            &after.records,
            &Options {
                threshold,
                only: &a.metrics,
                ignore_params: &a.ignore_param,
                noise_floor: &learned,
                default_floor: a.noise_floor / 100.0,
                load_gap,
                env_load: (env_load(&before.env), env_load(&after.env)),
                machines_differ: machines_differ.as_deref(),
            },
            crate::labs::labs(),
        )
    };
    let changes = judge(a.threshold / 100.0);
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
    // Shown: the named metrics, every metric with --all, else the headline
    // metrics (every metric of a test no lab declares headlines for).
    let has_headline = |c: &Change| {
        changes
            .iter()
            .any(|d| d.headline && d.lab == c.lab && d.test == c.test)
    };
    let focus = |c: &Change| !a.metrics.is_empty() || a.all || c.headline || !has_headline(c);
    let shown: Vec<&Change> = changes.iter().filter(|c| focus(c)).collect();
    let rest: Vec<&Change> = changes.iter().filter(|c| !focus(c)).collect();
    {
        let l = floors.learned.borrow();
        let n = l.len();
        if n > 0 {
            let mut f: Vec<f64> = l.iter().map(|x| x.1).collect();
            f.sort_by(f64::total_cmp);
            eprintln!(
                "compare: noise floor learned from the results store for {n} metric(s) (median ±{:.1}%, at the family-wise 95% level over {judged} metrics: z = {z:.2}); elsewhere ±{}%",
                commbench_core::stats::percentile_sorted(&f, 0.5) * 100.0,
                a.noise_floor
            );
        } else {
            eprintln!(
                "compare: noise floor ±{}% (the results store holds fewer than {MIN_FLOOR_RUNS} runs of these tests on this host)",
                a.noise_floor
            );
        }
    }
    eprintln!(
        "compare: {} metrics; shown {}: {}{}",
        changes.len(),
        shown.len(),
        count_line(&shown),
        if rest.is_empty() {
            String::new()
        } else {
            format!(
                "; the other {}: {} (--all shows them)",
                rest.len(),
                count_line(&rest)
            )
        }
    );
    let records: Vec<Record> = shown
        .iter()
        .map(|c| {
            Record::new("compare", "change")
                .param("source", format!("{}/{}", c.lab, c.test))
                .param("params", &c.params)
                .param("metric", &c.metric)
                .metric("before", c.before)
                .metric("after", c.after)
                .metric("ratio", c.ratio)
                .metric("ratio_lo", c.lo)
                .metric("ratio_hi", c.hi)
                .metric("p_value", c.p_value)
                .metric("n_before", c.n_before)
                .metric("n_after", c.n_after)
                .metric("noise_floor_pct", c.noise_floor * 100.0)
                .metric("change_pct", c.change_pct)
                .metric("better", c.better)
                .metric("verdict", &c.verdict)
                .metric("settle_repeats", c.settle)
                .metric("note", &c.note)
        })
        .collect();
    if a.out.format == crate::output::FormatArg::Table
        && a.out.output.is_none()
        && !a.all
        && a.metrics.is_empty()
    {
        print!("{}", test_lines(&changes));
    } else {
        a.out.emit(&records)?;
    }
    if let Some(pct) = a.fail_on_regression {
        let gate = judge(pct / 100.0);
        let gated: Vec<&Change> = gate.iter().filter(|c| focus(c)).collect();
        let worse: Vec<&&Change> = gated.iter().filter(|c| c.is_regression()).collect();
        let unsure: Vec<&&Change> = gated
            .iter()
            .filter(|c| c.verdict == "inconclusive")
            .collect();
        for u in &unsure {
            eprintln!(
                "compare: inconclusive against {pct}%: {}/{} {} {} {}{}",
                u.lab,
                u.test,
                u.params,
                u.metric,
                u.summary(),
                u.settle
                    .map(|n| format!(" (~{n} repeats per side would settle it)"))
                    .unwrap_or_default()
            );
        }
        if let Some(w) = worse.first() {
            anyhow::bail!(
                "{} metric(s) regressed beyond {pct}% with their whole interval: first {}/{} {} {} {}",
                worse.len(),
                w.lab,
                w.test,
                w.params,
                w.metric,
                w.summary()
            );
        }
        if a.strict && !unsure.is_empty() {
            anyhow::bail!(
                "{} metric(s) inconclusive against {pct}% (--strict)",
                unsure.len()
            );
        }
    }
    Ok(())
}
