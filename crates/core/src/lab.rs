//! Every lab the same shape: the [`Lab`] trait that each lab crate (and
//! the measurement core itself, [`crate::corelab`]) implements, and what the
//! suite, the summary, the report and `compare` need to know of a lab
//! without knowing the lab.
//!
//! A lab declares: its name (the suite step), the `lab` values its records
//! carry, the question its seed experiment asked, its figures, its metrics
//! with a human label, a unit and which direction is better (the headline
//! ones first, in the order they are judged: CPU per operation before wall
//! rates), its suite step within a time budget, and its answer line
//! computed from records alone. The CLI keeps one registry (`labs()`) and
//! iterates it; nothing outside a lab's own command file names a lab's
//! types.
//!
//! Invariants: a metric's direction is declared, never guessed from its
//! name, wherever a lab declares it; [`guess_better`] is the fallback for
//! undeclared metrics of old or foreign records only. Answer lines are
//! computed from the records they summarise, so a resumed suite and
//! `commbench report` print what the suite printed.

use crate::figure::FigureSpec;
use crate::record::Record;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Which way is better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Higher is better (a rate).
    Higher,
    /// Lower is better (a latency, a cost).
    Lower,
    /// Neither (a count, a parameter echoed back, a distance to a target).
    Unknown,
}

/// What kind of quantity a metric is: decides the verdict's word (a time
/// is faster/slower, anything else better/worse).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// A duration or a rate of operations: faster / slower.
    Time,
    /// CPU per operation, memory, counts: better / worse.
    Cost,
    /// Anything else.
    Other,
}

/// A declared metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricSpec {
    /// The metric path in a record (`msgs_per_s`, `latency_ns.p99`).
    pub key: &'static str,
    /// A human label ("round trips per second").
    pub label: &'static str,
    /// The unit as printed on an axis ("msg/s", "ns", "µs").
    pub unit: &'static str,
    /// Which way is better.
    pub better: Better,
    /// What kind of quantity it is.
    pub quantity: Quantity,
    /// Judged first by `compare` and the summary (in declaration order).
    pub headline: bool,
    /// The tests whose records carry it (empty: any test of the lab).
    pub tests: &'static [&'static str],
}

impl MetricSpec {
    /// A headline metric of some tests.
    pub const fn headline(
        key: &'static str,
        label: &'static str,
        unit: &'static str,
        better: Better,
        quantity: Quantity,
        tests: &'static [&'static str],
    ) -> Self {
        MetricSpec {
            key,
            label,
            unit,
            better,
            quantity,
            headline: true,
            tests,
        }
    }

    /// A further declared metric (direction and unit known, not judged
    /// first).
    pub const fn other(
        key: &'static str,
        label: &'static str,
        unit: &'static str,
        better: Better,
        quantity: Quantity,
        tests: &'static [&'static str],
    ) -> Self {
        MetricSpec {
            key,
            label,
            unit,
            better,
            quantity,
            headline: false,
            tests,
        }
    }

    /// Whether it applies to records of `test`.
    pub fn applies_to(&self, test: &str) -> bool {
        self.tests.is_empty() || self.tests.contains(&test)
    }
}

/// How long and thorough the suite is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// `--quick`: each lab's quick budget.
    Quick,
    /// The default: each lab's default budget.
    Default,
    /// `--full`: twenty times the default budget.
    Full,
}

impl Preset {
    /// The preset's name in records and messages.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Quick => "quick",
            Preset::Default => "default",
            Preset::Full => "full",
        }
    }
}

/// What a suite step is given: the preset and the instant its budget ends.
#[derive(Debug, Clone, Copy)]
pub struct SuiteCtx {
    /// The preset the suite runs.
    pub preset: Preset,
    /// When the step's budget ends.
    pub deadline: Instant,
}

impl SuiteCtx {
    /// Short runs (the quick preset).
    pub fn quick(&self) -> bool {
        self.preset == Preset::Quick
    }
    /// The long preset, which has no time budget.
    pub fn full(&self) -> bool {
        self.preset == Preset::Full
    }
    /// The budget is spent: start nothing new (never under the full preset).
    pub fn over(&self) -> bool {
        !self.full() && Instant::now() >= self.deadline
    }
    /// The deadline, unless the preset has none.
    pub fn deadline(&self) -> Option<Instant> {
        (!self.full()).then_some(self.deadline)
    }
}

/// What a step did besides its records: what it left out, if anything.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StepOutcome {
    /// Configurations not run because the budget was spent.
    pub cut_short: Vec<String>,
}

impl StepOutcome {
    /// Notes `what` as cut when the budget is spent, and says whether it was.
    pub fn cut_if_over(&mut self, ctx: &SuiteCtx, what: impl Into<String>) -> bool {
        if ctx.over() {
            self.cut_short.push(what.into());
            true
        } else {
            false
        }
    }
}

/// A suite step's error (the lab's own error type, boxed).
pub type LabError = Box<dyn std::error::Error + Send + Sync>;

/// A lab's suite budget in seconds: (quick, default). The full preset has
/// none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuiteBudget {
    /// Seconds under the quick preset.
    pub quick_s: u64,
    /// Seconds under the default preset.
    pub default_s: u64,
}

/// Something a dead run of a lab left behind outside the shm and temp
/// folders (a network namespace, a server), as `commbench clean` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Leftover {
    /// What it is (`netns`).
    pub kind: &'static str,
    /// Its name or path.
    pub name: String,
    /// The process that made it.
    pub pid: u32,
    /// `removed`, `would remove`, `live` or `error: …`.
    pub action: String,
}

/// One lab, as the suite, the summary, the report and `compare` see it.
pub trait Lab: Sync {
    /// The lab's name: its suite step and its summary row.
    fn name(&self) -> &'static str;
    /// The `lab` values its records carry (usually just its name).
    fn record_labs(&self) -> &'static [&'static str];
    /// The question its seed experiment asked, in a line.
    fn question(&self) -> &'static str;
    /// The figures the report draws from its records.
    fn figures(&self) -> Vec<FigureSpec>;
    /// Its metrics, headline ones first in the order they are judged.
    fn metrics(&self) -> &'static [MetricSpec];
    /// Its suite budget.
    fn budget(&self) -> SuiteBudget;
    /// Runs its suite step into `rec` and says what it cut.
    fn suite_step(
        &self,
        ctx: &SuiteCtx,
        rec: &mut crate::record::Recorder,
    ) -> Result<StepOutcome, LabError>;
    /// The answer to its question from records (any records: it picks its
    /// own), or None when they hold no figure for it.
    fn answer(&self, records: &[Record]) -> Option<String>;

    /// Removes what dead runs of this lab left behind besides shm files
    /// and temp folders (which [`crate::artifact::clean`] handles), or
    /// lists it when `dry_run`.
    fn clean_leftovers(&self, dry_run: bool) -> Vec<Leftover> {
        let _ = dry_run;
        Vec::new()
    }

    /// What adds the segments of one run (`--segment` files, each checked
    /// to belong with the others by [`crate::segment::Together`]) into
    /// the run's records, one file at a time; None when this lab writes
    /// no segments.
    fn segment_merger(&self) -> Option<Box<dyn crate::segment::SegmentMerger>> {
        None
    }

    /// What a parameter's value means in words, where the value is a code
    /// a reader cannot read (an MLRsearch goal `1f4d0l50e1w`); the
    /// report prints it under the tables that show the value.
    fn param_legend(&self, key: &str, value: &str) -> Option<String> {
        let _ = (key, value);
        None
    }

    /// Whether a record is one of this lab's.
    fn owns(&self, r: &Record) -> bool {
        self.record_labs().contains(&r.lab.as_str())
    }
    /// The declared metric `key` of a record of `test`.
    fn metric(&self, test: &str, key: &str) -> Option<&'static MetricSpec> {
        self.metrics()
            .iter()
            .find(|m| m.key == key && m.applies_to(test))
    }
    /// The headline metrics of `test`, in the order they are judged.
    fn headlines(&self, test: &str) -> Vec<&'static MetricSpec> {
        self.metrics()
            .iter()
            .filter(|m| m.headline && m.applies_to(test))
            .collect()
    }
}

/// The lab among `labs` that owns records with this `lab` value.
pub fn find<'a>(labs: &[&'a dyn Lab], record_lab: &str) -> Option<&'a dyn Lab> {
    labs.iter()
        .copied()
        .find(|l| l.record_labs().contains(&record_lab))
}

/// A metric's declared spec, looked up through the registry.
pub fn spec_of(
    labs: &[&dyn Lab],
    record_lab: &str,
    test: &str,
    key: &str,
) -> Option<&'static MetricSpec> {
    find(labs, record_lab).and_then(|l| l.metric(test, key))
}

/// Direction and kind of a metric: declared when a lab declares it, else
/// guessed from its name ([`guess_better`]).
pub fn direction(labs: &[&dyn Lab], record_lab: &str, test: &str, key: &str) -> (Better, Quantity) {
    match spec_of(labs, record_lab, test, key) {
        Some(s) => (s.better, s.quantity),
        None => guess_better(key),
    }
}

/// Tokens of a metric name that say "per second" (a rate).
const RATE_TAILS: [&str; 4] = ["per_s", "_s_median", "_s_p50", "_s_mean"];

/// The fallback for metrics no lab declares (records from other versions,
/// hand-made files): rates (`…per_s`, `pkt_s`, `mb_s`, `pps`) are better
/// higher, times, CPU and memory lower, anything else unknown. Unlike the
/// old name guess, a unit before `_s` (`pkt_s`, `mb_s`, `msgs_s`) is a
/// rate, not seconds, and `cpu_mb_s` is a rate of work per CPU-second.
pub fn guess_better(metric: &str) -> (Better, Quantity) {
    let m = metric.to_ascii_lowercase();
    let last = m.rsplit('.').next().unwrap_or(&m);
    // `x_s` where x is a unit of work: a rate per second.
    const PER_SECOND_UNITS: [&str; 14] = [
        "pkt", "pkts", "packets", "frames", "msgs", "msg", "mb", "gb", "kb", "bytes", "ops", "req",
        "rt", "flows",
    ];
    let is_rate = |s: &str| {
        s.contains("per_s")
            || s.ends_with("pps")
            || s.contains("mpps")
            || s.contains("gbps")
            || s.contains("throughput")
            || s.ends_with("_hz")
            || s == "hz"
            || s.contains("speedup")
            || RATE_TAILS
                .iter()
                .any(|t| s.ends_with(t) && s.contains("per_s"))
            || PER_SECOND_UNITS.iter().any(|u| {
                // `{u}_s` at the end or `{u}_s_` anywhere, found without
                // building either string (28 `format!`s a call were a
                // sixth of compare's time at 100,000 records).
                s.match_indices(u)
                    .any(|(i, _)| s[i + u.len()..] == *"_s" || s[i + u.len()..].starts_with("_s_"))
            })
    };
    if is_rate(last) {
        return (Better::Higher, Quantity::Time);
    }
    const COST: [&str; 6] = ["cpu", "rss", "errors", "lost", "ctx", "drops"];
    if COST.iter().any(|c| last.contains(c)) {
        return (Better::Lower, Quantity::Cost);
    }
    // A time: a unit among the name's words (`elapsed_s`, `real_s_median`,
    // `ns_p99`, `ticks_rx`), a latency, or a bare order statistic.
    const TIME_UNITS: [&str; 6] = ["ns", "us", "ms", "s", "ticks", "seconds"];
    if last.split('_').any(|w| TIME_UNITS.contains(&w))
        || last.contains("latency")
        || [
            "p50", "p90", "p99", "p999", "p9999", "median", "mean", "max", "min",
        ]
        .contains(&last)
    {
        return (Better::Lower, Quantity::Time);
    }
    (Better::Unknown, Quantity::Other)
}

/// Aggregates repeated runs of one configuration into `target` (usually
/// the record of the median run): for each top-level metric the lab
/// declares for the test, the runs' values become an
/// [`Estimate`](crate::estimate::Estimate) — samples, median and 95%
/// interval — written beside the value (`<key>_lo`, `<key>_hi`, `<key>_n`,
/// `<key>_samples`; see [`crate::estimate::attach`]). Metrics no run
/// measured are left as they are; `<key>_n` says how many runs did.
pub fn attach_repeats(lab: &dyn Lab, target: &mut Record, runs: &[Record]) {
    for m in lab.metrics() {
        if m.key.contains('.') || !m.applies_to(&target.test) {
            continue;
        }
        let xs: Vec<f64> = runs
            .iter()
            .filter_map(|r| r.metric_f64(m.key))
            .filter(|x| x.is_finite())
            .collect();
        if xs.is_empty() {
            continue;
        }
        let est = crate::estimate::Estimate::from_samples(&xs);
        crate::estimate::attach(&mut target.metrics, m.key, &est);
    }
}

/// Folds the records of repeated rounds into one record per (lab, test,
/// parameters), in first-seen order: the round whose first headline
/// metric is the median, with [`attach_repeats`] over all rounds. Records
/// measured once pass through unchanged.
pub fn fold_repeats(lab: &dyn Lab, rounds: Vec<Record>) -> Vec<Record> {
    let key = |r: &Record| {
        format!(
            "{}\u{1f}{}\u{1f}{}",
            r.lab,
            r.test,
            serde_json::to_string(&r.params).unwrap_or_default()
        )
    };
    let mut groups: Vec<(String, Vec<Record>)> = Vec::new();
    for r in rounds {
        let k = key(&r);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    groups
        .into_iter()
        .map(|(_, v)| {
            if v.len() == 1 {
                return v.into_iter().next().expect("one record");
            }
            let head = lab
                .headlines(&v[0].test)
                .into_iter()
                .find(|h| v[0].metric_f64(h.key).is_some())
                .map(|h| h.key);
            let val = |r: &Record| head.and_then(|h| r.metric_f64(h)).unwrap_or(f64::NAN);
            let mut order: Vec<usize> = (0..v.len()).collect();
            order.sort_by(|&a, &b| val(&v[a]).total_cmp(&val(&v[b])));
            let mut out = v[order[order.len() / 2]].clone();
            attach_repeats(lab, &mut out, &v);
            out
        })
        .collect()
}

/// Whether one configuration's runs want another repeat: while the first
/// headline metric of the lab that the runs carry has fewer than
/// `plan.min` values, or a 95% interval wider than the plan's target and
/// fewer than `plan.max` values ([`crate::estimate::Repeats`]). Runs with
/// no headline metric want none beyond `plan.min`.
pub fn wants_more(lab: &dyn Lab, runs: &[Record], plan: &crate::estimate::Repeats) -> bool {
    let Some(first) = runs.first() else {
        return plan.min > 0;
    };
    for h in lab.headlines(&first.test) {
        let xs: Vec<f64> = runs
            .iter()
            .filter_map(|r| r.metric_f64(h.key))
            .filter(|x| x.is_finite())
            .collect();
        if !xs.is_empty() {
            return plan.should_continue(&xs);
        }
    }
    runs.len() < plan.min
}

/// Whether a metric name is one of the interval fields [`attach_repeats`]
/// writes beside a value (`msgs_per_s_lo`): `compare` and the tables treat
/// What every record of every lab carries of the conditions it was
/// measured under, the Lab contract (the registry test checks each lab's
/// suite records): the load average at its start and end, whether more
/// busy threads than CPUs ran (`oversubscribed`), and where each role ran
/// (`placement`: pinned CPUs, or unpinned and the CPUs it was seen on).
/// The judgement needs the first three (a change under another load or
/// on an oversubscribed machine is the machine's); a reader needs the
/// last to know which answer a figure is.
pub const ENVIRONMENT: [&str; 4] = ["load_start", "load_end", "oversubscribed", "placement"];

/// A record's flag (`true`; absent is false) that what it measured hands
/// work between threads or processes on two or more CPUs, or on CPUs the
/// scheduler picks: the pipeline mode's io thread and worker, a server
/// and its client apart or unpinned. Such a figure depends on how the two
/// CPUs share their caches and on where the scheduler puts the roles,
/// which a guest cannot see or hold: on a 2-vCPU VM the pipeline mode,
/// pinned apart on a quiet host, ran 33.7, 81.4, 83.3 and 36.3 Mpps in
/// four back-to-back processes, each process's own repeats within ±5%.
/// `compare` therefore floors such a metric at
/// [`crate::estimate::CROSS_CPU_COLD_FLOOR`] when no floor was learned.
pub const CROSS_CPU: &str = "cross_cpu";

/// The [`ENVIRONMENT`] keys `r` lacks.
pub fn missing_environment(r: &Record) -> Vec<&'static str> {
    ENVIRONMENT
        .iter()
        .copied()
        .filter(|k| !r.metrics.contains_key(*k))
        .collect()
}

/// them as part of their metric, not as metrics of their own.
pub fn is_interval_field(key: &str) -> bool {
    ["_lo", "_hi", "_n", "_samples"]
        .iter()
        .any(|s| key.ends_with(s))
}

/// Helpers for answer lines: picking records and formatting figures.
pub mod answer {
    use super::*;
    use serde_json::Value;

    /// A parameter as text.
    pub fn param(r: &Record, k: &str) -> Option<String> {
        r.params
            .get(k)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
    }

    /// Where the records an answer draws on ran, for the answer to name:
    /// their `placement` when they agree ("server unpinned (allowed
    /// 0-1)"), else the distinct ones in order of first appearance (three
    /// at most, then how many more). `None` when no record says.
    pub fn placement<'a>(recs: impl IntoIterator<Item = &'a Record>) -> Option<String> {
        let mut seen: Vec<String> = Vec::new();
        for r in recs {
            if let Some(p) = r.metrics.get("placement").and_then(Value::as_str) {
                if !p.is_empty() && !seen.iter().any(|s| s == p) {
                    seen.push(p.to_owned());
                }
            }
        }
        match seen.len() {
            0 => None,
            1..=3 => Some(seen.join("; ")),
            n => Some(format!("{}; and {} more", seen[..3].join("; "), n - 3)),
        }
    }

    /// The conditions a table's runs had, in one line under it: the load
    /// average's range over their starts and ends, where they ran, and how
    /// many were oversubscribed ("conditions: load 1.2-4.6; controller
    /// unpinned (allowed 0-1); OVERSUBSCRIBED in 2 of 12 runs: their rates
    /// are suspect").
    pub fn conditions_line(recs: &[&Record]) -> String {
        let loads: Vec<f64> = recs
            .iter()
            .flat_map(|r| [metric(r, "load_start"), metric(r, "load_end")])
            .flatten()
            .collect();
        let mut parts = Vec::new();
        if !loads.is_empty() {
            let lo = loads.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = loads.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            parts.push(if (hi - lo).abs() < 0.05 {
                format!("load {lo:.1}")
            } else {
                format!("load {lo:.1}-{hi:.1}")
            });
        }
        if let Some(p) = placement(recs.iter().copied()) {
            parts.push(p);
        }
        let over = recs
            .iter()
            .filter(|r| r.metrics.get("oversubscribed").and_then(Value::as_bool) == Some(true))
            .count();
        let runs = recs.len();
        if over > 0 {
            parts.push(format!(
                "OVERSUBSCRIBED in {over} of {runs} run{} (more runnable tasks than CPUs, or others kept waiting): {} suspect",
                if runs == 1 { "" } else { "s" },
                if over == 1 { "its figures are" } else { "their figures are" }
            ));
        } else if runs > 0 {
            parts.push("no run oversubscribed".to_owned());
        }
        format!("conditions: {}", parts.join("; "))
    }

    /// A finite metric.
    pub fn metric(r: &Record, k: &str) -> Option<f64> {
        r.metric_f64(k).filter(|x| x.is_finite())
    }

    /// Whether parameter `k` is the text `v`.
    pub fn is(r: &Record, k: &str, v: &str) -> bool {
        param(r, k).as_deref() == Some(v)
    }

    /// Whether parameter `k` is the number `v`.
    pub fn is_num(r: &Record, k: &str, v: f64) -> bool {
        r.params.get(k).and_then(Value::as_f64) == Some(v)
    }

    /// The records whose `lab` is one of `labs`.
    pub fn of<'a>(recs: &'a [Record], labs: &[&str]) -> Vec<&'a Record> {
        recs.iter()
            .filter(|r| labs.contains(&r.lab.as_str()))
            .collect()
    }

    /// Median of a metric over the records `pick` accepts.
    pub fn median<'a>(
        recs: impl IntoIterator<Item = &'a Record>,
        pick: impl Fn(&Record) -> bool,
        k: &str,
    ) -> Option<f64> {
        let mut v: Vec<f64> = recs
            .into_iter()
            .filter(|r| pick(r))
            .filter_map(|r| metric(r, k))
            .collect();
        if v.is_empty() {
            return None;
        }
        Some(crate::stats::median(&mut v))
    }

    /// A rate: 150k, 16.2M.
    pub fn rate(x: f64) -> String {
        let (v, u) = if x >= 1e9 {
            (x / 1e9, "G")
        } else if x >= 1e6 {
            (x / 1e6, "M")
        } else if x >= 1e3 {
            (x / 1e3, "k")
        } else {
            return crate::record::human_number(x);
        };
        let t = format!("{v:.1}");
        format!("{}{u}", t.trim_end_matches(".0"))
    }

    /// `a / b` as "3.21×" (three significant digits, as every ratio).
    pub fn ratio(a: f64, b: f64) -> String {
        if b > 0.0 && a.is_finite() {
            crate::estimate::ratio_text(a / b, f64::NAN, f64::NAN)
        } else {
            "-".into()
        }
    }

    /// `a / b` for metric `key` of the records `pick_a` and `pick_b`
    /// accept: with the 95% interval of the ratio when each side is one
    /// record carrying repeats ("1.8× [1.6, 2.0]"), else as [`ratio`] of
    /// the medians.
    pub fn ratio_between(
        recs: &[&Record],
        pick_a: impl Fn(&Record) -> bool,
        pick_b: impl Fn(&Record) -> bool,
        key: &str,
    ) -> Option<String> {
        let a: Vec<&Record> = recs.iter().copied().filter(|r| pick_a(r)).collect();
        let b: Vec<&Record> = recs.iter().copied().filter(|r| pick_b(r)).collect();
        let samples = |v: &[&Record]| -> Option<Vec<f64>> {
            match v {
                [one] => crate::estimate::read(&one.metrics, key)
                    .map(|e| e.samples)
                    .filter(|s| s.len() >= 2),
                _ => None,
            }
        };
        if let (Some(sa), Some(sb)) = (samples(&a), samples(&b)) {
            let r = crate::estimate::ratio(&sb, &sa);
            if r.lo.is_finite() && r.hi.is_finite() {
                return Some(crate::estimate::ratio_text(r.ratio, r.lo, r.hi));
            }
        }
        let ma = median(a.iter().copied(), |_| true, key)?;
        let mb = median(b.iter().copied(), |_| true, key)?;
        Some(ratio(ma, mb))
    }

    /// A number with four significant digits, a `k`/`M` suffix from
    /// 10,000 on, and its unit ("653.2k msg/s", "13.2 ticks"); "-" when
    /// not finite. What `compare` and `ab` print beside every value.
    pub fn num(x: f64, unit: &str) -> String {
        if !x.is_finite() {
            return "-".into();
        }
        let a = x.abs();
        let (v, suffix) = if a >= 1e6 {
            (x / 1e6, "M")
        } else if a >= 1e4 {
            (x / 1e3, "k")
        } else {
            (x, "")
        };
        let d = match v.abs() {
            y if y >= 1000.0 => 0,
            y if y >= 100.0 => 1,
            y if y >= 10.0 => 2,
            y if y >= 1.0 => 3,
            _ => 4,
        };
        let mut s = format!("{v:.d$}");
        if s.contains('.') {
            s = s.trim_end_matches('0').trim_end_matches('.').to_owned();
        }
        s.push_str(suffix);
        if unit.is_empty() {
            s
        } else if unit == "%" {
            format!("{s}%")
        } else {
            format!("{s} {unit}")
        }
    }

    /// A time in ns with a unit that suits it.
    pub fn ns(x: f64) -> String {
        if x >= 1e6 {
            format!("{:.2} ms", x / 1e6)
        } else if x >= 1e3 {
            format!("{:.1} µs", x / 1e3)
        } else {
            format!("{x:.0} ns")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tables_conditions_line_gives_load_placement_and_oversubscribed_runs() {
        let run = |load: f64, over: bool| {
            let mut r = Record::new("x", "t");
            r.push_metric("load_start", load);
            r.push_metric("load_end", load + 0.4);
            r.push_metric("oversubscribed", over);
            r.push_metric("placement", "unpinned (allowed 0-1)");
            r
        };
        let quiet = [run(1.2, false), run(0.9, false)];
        assert_eq!(
            answer::conditions_line(&quiet.iter().collect::<Vec<_>>()),
            "conditions: load 0.9-1.6; unpinned (allowed 0-1); no run oversubscribed"
        );
        let busy = [run(4.6, true), run(4.2, false), run(4.4, true)];
        let line = answer::conditions_line(&busy.iter().collect::<Vec<_>>());
        assert!(
            line.contains("load 4.2-5.0") && line.contains("OVERSUBSCRIBED in 2 of 3 runs"),
            "{line}"
        );
    }

    #[test]
    fn an_answer_names_the_placement_its_records_ran_with() {
        let at = |p: &str| {
            let mut r = Record::new("x", "t");
            r.push_metric("placement", p);
            r
        };
        let same = [
            at("server cpu 0, client cpu 1"),
            at("server cpu 0, client cpu 1"),
        ];
        assert_eq!(
            answer::placement(&same).as_deref(),
            Some("server cpu 0, client cpu 1")
        );
        let two = [
            at("unpinned (seen on 0-1)"),
            at("server cpu 0, client cpu 0"),
        ];
        assert_eq!(
            answer::placement(&two).as_deref(),
            Some("unpinned (seen on 0-1); server cpu 0, client cpu 0")
        );
        let many: Vec<Record> = (0..5).map(|i| at(&format!("cpu {i}"))).collect();
        assert_eq!(
            answer::placement(&many).as_deref(),
            Some("cpu 0; cpu 1; cpu 2; and 2 more")
        );
        assert_eq!(answer::placement(&[Record::new("x", "t")]), None);
    }

    #[test]
    fn guess_reads_units_before_s_as_rates_not_seconds() {
        // The old guess read pkt_s and mb_s as seconds (lower is better) and
        // anything containing `cpu` as a cost: pcap's pkt_s going up was
        // called slower.
        assert_eq!(guess_better("pkt_s").0, Better::Higher);
        // A unit of work before `_s_` in the middle, or `_s` at the end
        // after a longer word (found without building the strings).
        assert_eq!(guess_better("pkts_s_median").0, Better::Higher);
        assert_eq!(guess_better("sort_s").0, Better::Higher);
        assert_eq!(guess_better("pkt_sx").0, Better::Unknown);
        assert_eq!(guess_better("flows_s_p50").0, Better::Higher);
        assert_eq!(guess_better("mb_s").0, Better::Higher);
        assert_eq!(guess_better("cpu_mb_s").0, Better::Higher);
        assert_eq!(guess_better("msgs_per_s").0, Better::Higher);
        assert_eq!(guess_better("responses_per_s_median").0, Better::Higher);
        assert_eq!(guess_better("cpu_ns_per_op").0, Better::Lower);
        assert_eq!(guess_better("latency_ns.p99").0, Better::Lower);
        assert_eq!(guess_better("ns_median").0, Better::Lower);
        assert_eq!(guess_better("ns_p99").0, Better::Lower);
        assert_eq!(guess_better("elapsed_s").0, Better::Lower);
        assert_eq!(guess_better("real_s_median").0, Better::Lower);
        assert_eq!(guess_better("sessions").0, Better::Unknown);
    }

    struct OneMetric;

    impl Lab for OneMetric {
        fn name(&self) -> &'static str {
            "t"
        }
        fn record_labs(&self) -> &'static [&'static str] {
            &["t"]
        }
        fn question(&self) -> &'static str {
            "?"
        }
        fn figures(&self) -> Vec<FigureSpec> {
            Vec::new()
        }
        fn metrics(&self) -> &'static [MetricSpec] {
            static M: [MetricSpec; 1] = [MetricSpec::headline(
                "rate",
                "rate",
                "1/s",
                Better::Higher,
                Quantity::Time,
                &[],
            )];
            &M
        }
        fn budget(&self) -> SuiteBudget {
            SuiteBudget {
                quick_s: 1,
                default_s: 1,
            }
        }
        fn suite_step(
            &self,
            _: &SuiteCtx,
            _: &mut crate::record::Recorder,
        ) -> Result<StepOutcome, LabError> {
            Ok(StepOutcome::default())
        }
        fn answer(&self, _: &[Record]) -> Option<String> {
            None
        }
    }

    #[test]
    fn repeats_attach_samples_and_an_interval_to_declared_metrics() {
        let runs: Vec<Record> = [100.0, 104.0, 98.0, 101.0, 99.0]
            .iter()
            .map(|&x| Record::new("t", "x").metric("rate", x).metric("other", x))
            .collect();
        let mut r = runs[3].clone();
        attach_repeats(&OneMetric, &mut r, &runs);
        let e = crate::estimate::read(&r.metrics, "rate").unwrap();
        assert_eq!(e.n, 5);
        assert_eq!(e.median, 100.0);
        assert!(e.lo <= 100.0 && e.hi >= 100.0);
        assert!(r.metrics.get("rate_samples").is_some());
        assert!(r.metrics.get("other_samples").is_none(), "undeclared");
        assert!(is_interval_field("rate_lo") && !is_interval_field("rate"));
    }

    #[test]
    fn ctx_over_never_cuts_the_full_preset() {
        let past = Instant::now();
        let full = SuiteCtx {
            preset: Preset::Full,
            deadline: past,
        };
        assert!(!full.over());
        assert_eq!(full.deadline(), None);
        let quick = SuiteCtx {
            preset: Preset::Quick,
            deadline: past,
        };
        assert!(quick.over());
        let mut o = StepOutcome::default();
        assert!(o.cut_if_over(&quick, "x"));
        assert_eq!(o.cut_short, vec!["x".to_owned()]);
    }
}
