//! Comparing two runs: records are matched by (lab, test, params) and each
//! metric both carry gets a ratio after / before, its 95% interval and a
//! verdict judged by that interval (criterion's "change within noise
//! threshold", Kalibera & Jones's interval of a ratio).
//!
//! Invariants:
//! - A verdict of change (faster/slower, better/worse, changed) is given
//!   only when the whole interval, widened by the between-run noise floor,
//!   lies beyond the threshold; "no change" only when it lies within;
//!   "inconclusive" otherwise, with the repeats that would settle it.
//! - The interval comes from both sides' per-run samples (Hodges–Lehmann
//!   ratio with a Mann–Whitney p-value, `core::estimate`); a metric without
//!   samples on either side is "no samples", never a change.
//! - Which way is better comes from the labs' declared metrics, guessed
//!   only for metrics no lab declares; records without a partner in the
//!   other run are skipped, not reported; a metric's interval fields
//!   (`<key>_lo`, `_hi`, `_n`, `_samples`) belong to it and are not
//!   compared as metrics of their own.

use commbench_core::estimate::{self, Verdict};
use commbench_core::lab::{direction, Better, Lab, Quantity};
use commbench_core::record::Record;
use serde::Serialize;
use serde_json::{Map, Value};

/// One metric of one matched record pair.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub lab: String,
    pub test: String,
    pub params: String,
    /// The same parameters one by one (name, value as text), for showing
    /// only those that vary between tests.
    #[serde(skip)]
    pub param_list: Vec<(String, String)>,
    pub metric: String,
    /// The metric's unit as declared by its lab ("ns", "msg/s", "%"), or
    /// read from its name for metrics no lab declares; empty for counts.
    pub unit: String,
    /// The values compared: medians over repeats, or the single values.
    pub before: f64,
    pub after: f64,
    /// after / before (the Hodges–Lehmann ratio when both sides have
    /// samples, else the ratio of the values).
    pub ratio: f64,
    /// The 95% interval of the ratio, widened by the noise floor (NaN
    /// without samples).
    pub lo: f64,
    pub hi: f64,
    /// Mann–Whitney U two-sided p-value (NaN without samples).
    pub p_value: f64,
    /// Repeats on each side.
    pub n_before: usize,
    pub n_after: usize,
    /// The between-run noise floor used (relative 95% half-width).
    pub noise_floor: f64,
    pub change_pct: f64,
    pub better: Better,
    /// Declared as a headline metric of its test by its lab.
    pub headline: bool,
    /// `faster`/`slower` (or `better`/`worse` for non-time metrics),
    /// `changed` for a metric without a better direction, `no change`,
    /// `inconclusive` or `no samples`.
    pub verdict: String,
    /// For an inconclusive verdict: repeats per side that would settle it,
    /// if any number would.
    pub settle: Option<usize>,
    /// Why a change was not called one (`load 1.1 vs 2.6`), else empty.
    pub note: String,
    /// For a metric compared by difference (a signed percentage, or a
    /// value at or below zero on either side, where a ratio means
    /// nothing): after − before, in the metric's unit; NaN otherwise.
    pub difference: f64,
}

impl Change {
    /// Faster, slower, better, worse or changed.
    pub fn verdict_is_change(&self) -> bool {
        ["faster", "slower", "better", "worse", "changed"].contains(&self.verdict.as_str())
    }

    /// Compared by difference, not by ratio (see [`Change::difference`]).
    pub fn by_difference(&self) -> bool {
        self.verdict == NOT_JUDGED
    }

    /// Slower or worse: a regression whose whole interval lies beyond the
    /// threshold it was judged with.
    pub fn is_regression(&self) -> bool {
        self.verdict == "slower" || self.verdict == "worse"
    }

    /// `slower 1.12× [1.08, 1.17]`, or the verdict with the bare ratio;
    /// `not judged +0.31 pp` for a metric compared by difference.
    pub fn summary(&self) -> String {
        if self.by_difference() {
            format!(
                "{} {}",
                self.verdict,
                difference_text(self.difference, &self.unit)
            )
        } else if self.ratio.is_finite() {
            format!(
                "{} {}",
                self.verdict,
                commbench_core::estimate::ratio_text(self.ratio, self.lo, self.hi)
            )
        } else {
            self.verdict.clone()
        }
        .to_string()
            + &if self.note.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.note)
            }
    }
}

/// The verdict of a metric compared by difference: a ratio of signed
/// percentages or of values at or below zero means nothing, and a
/// threshold relative to the value does not apply to a difference.
pub const NOT_JUDGED: &str = "not judged";

/// `+0.31 pp` for a percentage, `+5 drops` (the unit) otherwise.
pub fn difference_text(d: f64, unit: &str) -> String {
    if !d.is_finite() {
        return "-".into();
    }
    let sign = if d > 0.0 {
        "+"
    } else if d < 0.0 {
        "−"
    } else {
        "±"
    };
    let unit = if unit == "%" { "pp" } else { unit };
    format!("{sign}{}", commbench_core::lab::answer::num(d.abs(), unit))
}

/// A unit read from a metric's name, for metrics no lab declares:
/// `…_ns` ns, `…per_s` /s, `…_pct` %, `…_s` s; empty when the name says
/// none.
pub fn guess_unit(metric: &str) -> &'static str {
    let last = metric.rsplit('.').next().unwrap_or(metric);
    let words: Vec<&str> = last.split('_').collect();
    if last.contains("per_s") || last.ends_with("pps") {
        "/s"
    } else if words.contains(&"pct") {
        "%"
    } else if words.contains(&"ns") || metric.contains("_ns.") {
        "ns"
    } else if words.contains(&"us") {
        "µs"
    } else if words.contains(&"ms") {
        "ms"
    } else if words.contains(&"ticks") {
        "ticks"
    } else if words.last() == Some(&"s")
        || words.first() == Some(&"s")
        || words.contains(&"seconds")
    {
        "s"
    } else {
        ""
    }
}

/// How to compare.
#[derive(Clone, Copy)]
pub struct Options<'a> {
    /// Relative change below which a difference is no change (0.05).
    pub threshold: f64,
    /// Compare only these metrics (empty: all).
    pub only: &'a [String],
    /// Parameters left out of the match key (a known, deliberate
    /// difference such as `work`).
    pub ignore_params: &'a [String],
    /// The between-run noise floor of a metric (relative 95% half-width)
    /// learned elsewhere, by (lab, test, params of the "before" record with
    /// none ignored, metric); None: `default_floor`.
    pub noise_floor: &'a dyn Fn(&str, &str, &str, &str) -> Option<f64>,
    /// The floor when nothing was learned.
    pub default_floor: f64,
    /// The floor when nothing was learned of a metric whose record (either
    /// side) crossed CPUs ([`commbench_core::lab::CROSS_CPU`]), where it is
    /// above `default_floor`; 0: none (a floor the user gave holds).
    pub cross_cpu_floor: f64,
    /// A load-average difference between the two sides' runs at or above
    /// which a change is reported as inconclusive (the machine, not the
    /// code, changed); 0 or NaN: never. Each record's own `load_start` /
    /// `load_end` are used, else the runs' environment (`env_load`).
    pub load_gap: f64,
    /// The load average at the start of each side's run, when known.
    pub env_load: (Option<f64>, Option<f64>),
    /// How the two sides' machines or builds differ (kernel, CPU, build
    /// profile), when they do: every change is then inconclusive.
    pub machines_differ: Option<&'a str>,
}

/// The load a record ran under: the mean of its `load_start` and
/// `load_end`, else `fallback`.
fn record_load(r: &Record, fallback: Option<f64>) -> Option<f64> {
    match (r.metric_f64("load_start"), r.metric_f64("load_end")) {
        (Some(a), Some(b)) if a.is_finite() && b.is_finite() => Some((a + b) / 2.0),
        (Some(a), _) if a.is_finite() => Some(a),
        _ => fallback,
    }
}

/// Whether `r` carries the boolean metric `key` as true.
fn flag(r: &Record, key: &str) -> bool {
    matches!(r.metrics.get(key), Some(Value::Bool(true)))
}

/// No learned floor.
pub fn no_floor(_: &str, _: &str, _: &str, _: &str) -> Option<f64> {
    None
}

/// Whether `key` is an interval field of a metric the record carries
/// (`msgs_per_s_lo` beside `msgs_per_s`). Probes through one buffer: a
/// `format!` per suffix and probe was a tenth of compare's time at
/// 100,000 records.
fn interval_field_of(metrics: &Map<String, Value>, key: &str) -> bool {
    let mut probe = String::new();
    ["_lo", "_hi", "_n", "_samples"].iter().any(|s| {
        key.strip_suffix(s).is_some_and(|base| {
            metrics.contains_key(base)
                && ["_samples", "_lo"].iter().any(|t| {
                    probe.clear();
                    probe.push_str(base);
                    probe.push_str(t);
                    metrics.contains_key(probe.as_str())
                })
        })
    })
}

/// What a record says of the conditions it ran under, not what it
/// measured: the judgement reads them (the load gap, oversubscription),
/// never compares them as metrics.
const CONDITIONS: [&str; 5] = [
    "load_start",
    "load_end",
    "oversubscribed",
    "cpu_wait_pct",
    "cpu_pressure_pct",
];

pub(crate) fn flat_metrics(r: &Record) -> Vec<(String, f64)> {
    // Numbers only, and nested objects walked in place: flattening into
    // cloned values first copied every array a record carries.
    fn walk(prefix: String, v: &Value, out: &mut Vec<(String, f64)>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    walk(format!("{prefix}.{k}"), v, out);
                }
            }
            _ => {
                if let Some(x) = v.as_f64().filter(|x| x.is_finite()) {
                    out.push((prefix, x));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (k, v) in &r.metrics {
        if interval_field_of(&r.metrics, k) || CONDITIONS.contains(&k.as_str()) {
            continue;
        }
        match v {
            Value::Number(_) | Value::Object(_) => walk(k.clone(), v, &mut out),
            _ => {}
        }
    }
    out
}

/// The parameters as `k=v` pairs: what records are matched by.
pub fn params_key(r: &Record) -> String {
    params_key_without(r, &[])
}

/// [`params_key`] without the parameters in `ignore`.
pub fn params_key_without(r: &Record, ignore: &[String]) -> String {
    let mut out = String::new();
    for (k, v) in r
        .params
        .iter()
        .filter(|(k, _)| !ignore.iter().any(|i| i == *k))
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(k);
        out.push('=');
        push_param_value(&mut out, v);
    }
    out
}

/// A parameter's value as text, as `v.to_string().trim_matches('"')`
/// gives it, written into `out`: plain text of a string needing no JSON
/// escape is itself, anything else goes through serde_json. Three
/// allocations per parameter were most of compare's key building.
fn push_param_value(out: &mut String, v: &Value) {
    use std::fmt::Write;
    match v {
        Value::String(s)
            if !s
                .chars()
                .any(|c| c == '"' || c == '\\' || (c as u32) < 0x20) =>
        {
            out.push_str(s)
        }
        Value::String(_) => out.push_str(v.to_string().trim_matches('"')),
        _ => {
            // Numbers, booleans, null, arrays and objects: their JSON
            // neither starts nor ends with a quote.
            let _ = write!(out, "{v}");
        }
    }
}

/// The parameters as (name, value as text) pairs, without those in
/// `ignore`: what [`params_key_without`] joins.
pub fn param_list(r: &Record, ignore: &[String]) -> Vec<(String, String)> {
    r.params
        .iter()
        .filter(|(k, _)| !ignore.iter().any(|i| i == *k))
        .map(|(k, v)| {
            let mut t = String::new();
            push_param_value(&mut t, v);
            (k.clone(), t)
        })
        .collect()
}

/// Compares matching records of two runs with a plain threshold and the
/// default floor (see [`compare_with`]).
pub fn compare(
    a: &[Record],
    b: &[Record],
    threshold: f64,
    only: &[String],
    labs: &[&dyn Lab],
) -> Vec<Change> {
    compare_with(
        a,
        b,
        &Options {
            threshold,
            only,
            ignore_params: &[],
            noise_floor: &no_floor,
            default_floor: 0.0,
            cross_cpu_floor: 0.0,
            load_gap: 0.0,
            env_load: (None, None),
            machines_differ: None,
        },
        labs,
    )
}

/// Compares matching records of two runs: per metric both carry, the ratio
/// with its interval and the verdict (see the module docs).
///
/// The other side is indexed once by (lab, test, parameter key), the first
/// record of a key winning as a search from the start would: a comparison
/// is linear in records (a linear search per record took 128 s at 20,000).
pub fn compare_with(a: &[Record], b: &[Record], o: &Options, labs: &[&dyn Lab]) -> Vec<Change> {
    judge_matched(
        &match_records(a, b, o.only, o.ignore_params, labs),
        o,
        labs,
        None,
    )
}

/// A record, its partner in the other run, and the metrics both carry
/// (name, before, after) in the record's order.
pub(crate) struct Matched<'r> {
    ra: &'r Record,
    rb: &'r Record,
    /// The match key (parameters without the ignored ones).
    key: String,
    /// The headline metrics its lab declares for its test.
    heads: Vec<&'static str>,
    metrics: Vec<(String, f64, f64)>,
}

/// The records of `a` with a partner in `b` and the metrics both carry
/// (only those of `only`, when given).
///
/// The other side is indexed once by (lab, test, parameter key), the first
/// record of a key winning as a search from the start would: matching is
/// linear in records (a linear search per record took 128 s at 20,000).
pub(crate) fn match_records<'r>(
    a: &'r [Record],
    b: &'r [Record],
    only: &[String],
    ignore_params: &[String],
    labs: &[&dyn Lab],
) -> Vec<Matched<'r>> {
    let mut index: std::collections::HashMap<(&str, &str, String), &Record> =
        std::collections::HashMap::with_capacity(b.len());
    for rb in b {
        index
            .entry((
                rb.lab.as_str(),
                rb.test.as_str(),
                params_key_without(rb, ignore_params),
            ))
            .or_insert(rb);
    }
    let mut out = Vec::new();
    for ra in a {
        let key = params_key_without(ra, ignore_params);
        let Some(&rb) = index.get(&(ra.lab.as_str(), ra.test.as_str(), key.clone())) else {
            continue;
        };
        let mb: std::collections::HashMap<String, f64> =
            flat_metrics(rb).into_iter().rev().collect();
        let metrics = flat_metrics(ra)
            .into_iter()
            .filter(|(m, _)| only.is_empty() || only.iter().any(|x| x == m))
            .filter_map(|(m, before)| {
                let after = *mb.get(&m)?;
                Some((m, before, after))
            })
            .collect();
        let heads = commbench_core::lab::find(labs, &ra.lab)
            .map(|l| l.headlines(&ra.test).iter().map(|m| m.key).collect())
            .unwrap_or_default();
        out.push(Matched {
            ra,
            rb,
            key,
            heads,
            metrics,
        });
    }
    out
}

/// Each matched metric judged (see the module docs); with `focus` =
/// Some(everything), only the metrics [`crate::verdicts::split_focus`]
/// would show (the judged count needs no others: judging all of them
/// twice was a third of compare's time at 100,000 records).
pub(crate) fn judge_matched(
    ms: &[Matched],
    o: &Options,
    labs: &[&dyn Lab],
    focus: Option<bool>,
) -> Vec<Change> {
    // The tests with a headline metric among the matched ones.
    let with_headlines: std::collections::HashSet<(&str, &str)> = match focus {
        Some(false) => ms
            .iter()
            .filter(|p| {
                p.metrics
                    .iter()
                    .any(|(m, ..)| p.heads.contains(&m.as_str()))
            })
            .map(|p| (p.ra.lab.as_str(), p.ra.test.as_str()))
            .collect(),
        _ => Default::default(),
    };
    let mut out = Vec::new();
    for p in ms {
        let (ra, rb, key) = (p.ra, p.rb, &p.key);
        let test_has_headlines = with_headlines.contains(&(ra.lab.as_str(), ra.test.as_str()));
        // Per pair, not per metric: the keys the floor is learned under
        // and the parameters shown.
        let (ka, kb) = if o.ignore_params.is_empty() {
            (key.clone(), key.clone())
        } else {
            (params_key(ra), params_key(rb))
        };
        let plist = param_list(ra, o.ignore_params);
        // Per pair, not per metric: the flags either record carries.
        let either = |key: &str| flag(ra, key) || flag(rb, key);
        let (crossed, oversubscribed) = (
            either(commbench_core::lab::CROSS_CPU),
            either("oversubscribed"),
        );
        for (m, before, after) in &p.metrics {
            let (m, before, after) = (m.as_str(), *before, *after);
            let headline = p.heads.contains(&m);
            if focus == Some(false) && !headline && test_has_headlines {
                continue;
            }
            let (dir, quantity) = direction(labs, &ra.lab, &ra.test, m);
            let unit = commbench_core::lab::spec_of(labs, &ra.lab, &ra.test, m)
                .map_or_else(|| guess_unit(m), |s| s.unit);
            // Learned per side on runs of exactly that side's
            // configuration (with ignored parameters the two sides differ
            // on purpose, and each side's reruns show its own noise); the
            // larger floor counts, since either side may have drifted.
            let fa = (o.noise_floor)(&ra.lab, &ra.test, &ka, m);
            let fb = if kb == ka {
                None
            } else {
                (o.noise_floor)(&rb.lab, &rb.test, &kb, m)
            };
            let cross_floor =
                crossed && fa.is_none() && fb.is_none() && o.cross_cpu_floor > o.default_floor;
            let floor = match (fa, fb) {
                (Some(a), Some(b)) => a.max(b),
                _ if cross_floor => o.cross_cpu_floor,
                (a, b) => a.or(b).unwrap_or(o.default_floor),
            };
            let mut c = judge_pair(
                ra,
                rb,
                m,
                (before, after),
                (dir, quantity, unit),
                o.threshold,
                floor,
            );
            c.lab = ra.lab.clone();
            c.test = ra.test.clone();
            c.params = key.clone();
            c.param_list = plist.clone();
            c.headline = headline;
            if cross_floor && c.noise_floor == floor && c.note.is_empty() {
                c.note = format!(
                    "handed between CPUs, and no floor learned: the cold floor is {} (where the caches and the scheduler put the roles moves it between processes)",
                    estimate::ratio_text(1.0 + floor, f64::NAN, f64::NAN)
                );
            }
            if c.verdict_is_change() && oversubscribed {
                // More busy threads than CPUs: what was timed, and the CPU
                // spent spinning, is the scheduler's doing.
                c.verdict = "inconclusive".into();
                c.settle = None;
                c.note = "oversubscribed: more busy threads than CPUs".into();
            }
            if let Some(d) = o.machines_differ.filter(|_| c.verdict_is_change()) {
                // Another kernel, CPU or build: the difference is the
                // machine's as much as the code's.
                c.verdict = "inconclusive".into();
                c.settle = None;
                c.note = format!("the machines differ: {d}");
            }
            if c.verdict_is_change() && o.load_gap > 0.0 {
                if let (Some(la), Some(lb)) =
                    (record_load(ra, o.env_load.0), record_load(rb, o.env_load.1))
                {
                    if (la - lb).abs() >= o.load_gap {
                        c.verdict = "inconclusive".into();
                        c.settle = None;
                        c.note = format!("load {la:.1} vs {lb:.1}: the machine changed");
                    }
                }
            }
            out.push(c);
        }
    }
    out
}

fn judge_pair(
    ra: &Record,
    rb: &Record,
    m: &str,
    (before, after): (f64, f64),
    (dir, quantity, unit): (Better, Quantity, &str),
    threshold: f64,
    floor: f64,
) -> Change {
    let timeish = quantity == Quantity::Time;
    // Each side's estimate read once (it was read four times a metric).
    let (ea, eb) = (
        estimate::read(&ra.metrics, m),
        estimate::read(&rb.metrics, m),
    );
    fn samples(e: &Option<estimate::Estimate>) -> Option<&[f64]> {
        e.as_ref()
            .map(|e| e.samples.as_slice())
            .filter(|s| s.len() >= 2)
    }
    let mut c = Change {
        lab: String::new(),
        test: String::new(),
        params: String::new(),
        param_list: Vec::new(),
        metric: m.to_owned(),
        unit: unit.to_owned(),
        before,
        after,
        ratio: if before != 0.0 {
            after / before
        } else {
            f64::NAN
        },
        lo: f64::NAN,
        hi: f64::NAN,
        p_value: f64::NAN,
        n_before: 1,
        n_after: 1,
        noise_floor: floor,
        change_pct: f64::NAN,
        better: dir,
        headline: false,
        verdict: String::new(),
        settle: None,
        note: String::new(),
        difference: f64::NAN,
    };
    // A percentage (a signed error, a share) or anything at or below zero
    // is compared by difference: the ratio of 0.01% and 0.5% errors is a
    // 50× "change" of nothing, and one across zero has no meaning.
    let (sa, sb) = (samples(&ea), samples(&eb));
    let signed = |s: Option<&[f64]>| s.is_some_and(|s| s.iter().any(|&x| x <= 0.0));
    if before != after && (unit == "%" || before <= 0.0 || after <= 0.0 || signed(sa) || signed(sb))
    {
        let med = |e: &Option<estimate::Estimate>, v: f64| e.as_ref().map_or(v, |e| e.median);
        c.before = med(&ea, before);
        c.after = med(&eb, after);
        c.n_before = sa.map_or(1, |s| s.len());
        c.n_after = sb.map_or(1, |s| s.len());
        c.difference = c.after - c.before;
        c.ratio = f64::NAN;
        c.verdict = NOT_JUDGED.to_owned();
        return c;
    }
    let verdict = match (sa, sb) {
        _ if before == after => Verdict::NoChange,
        (Some(sa), Some(sb)) => {
            // The floor is at least the swing either run showed between
            // its own repeats: a run's repeats are separate runs, and what
            // moved between modes inside one run moves as much between
            // two (the share of repeats in each mode moves the median).
            // Only where the repeats spread over modes (the 90th
            // percentile at least twice the 10th): the median of many
            // repeats with a unimodal spread is steadier than they are.
            let swing = estimate::swing(sa).max(estimate::swing(sb));
            let floor = if swing >= estimate::SWING_MODES && swing > floor {
                c.noise_floor = swing;
                c.note = format!(
                    "the runs' own repeats swung {} (10th to 90th percentile): the floor covers it",
                    estimate::ratio_text(1.0 + swing, f64::NAN, f64::NAN)
                );
                swing
            } else {
                floor
            };
            let r = estimate::ratio(sa, sb);
            let v = estimate::judge(&r, threshold, floor, dir);
            let (lo, hi) = estimate::widen(&r, floor);
            c.ratio = r.ratio;
            c.lo = lo;
            c.hi = hi;
            c.p_value = r.p_value;
            c.n_before = r.n_before;
            c.n_after = r.n_after;
            c.before = r.before_median;
            c.after = r.after_median;
            if v == Verdict::Inconclusive {
                c.settle = estimate::repeats_to_settle(&r, threshold, floor);
            }
            v
        }
        (sa, sb) => {
            c.n_before = sa.map_or(1, |s| s.len());
            c.n_after = sb.map_or(1, |s| s.len());
            Verdict::NoSamples
        }
    };
    c.change_pct = (c.ratio - 1.0) * 100.0;
    c.verdict = verdict.word(timeish).to_owned();
    c
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::rec;

    /// A record whose `msgs_per_s` was measured over repeats.
    fn sampled(sessions: u64, xs: &[f64]) -> Record {
        let mut r = rec("reqres", sessions, 0.0);
        let est = estimate::Estimate::from_samples(xs);
        estimate::attach(&mut r.metrics, "msgs_per_s", &est);
        r
    }

    #[test]
    fn a_file_compared_with_itself_was_quadratic_in_records() {
        // 100,000 records against themselves: every one matched by its own
        // key (a linear search per record did not finish at 40,000). No
        // time is asserted: a quadratic search would not end in the test.
        let n = 100_000u64;
        let a: Vec<Record> = (0..n).map(|i| rec("reqres", i, i as f64 + 1.0)).collect();
        let c = compare(&a, &a, 0.05, &["msgs_per_s".into()], &[]);
        assert_eq!(c.len(), n as usize);
        assert!(c.iter().all(|c| c.verdict == "no change"));
        assert!(c
            .iter()
            .enumerate()
            .all(|(i, c)| c.before == i as f64 + 1.0));
        // A key twice on the other side: the first record is the match.
        let b = vec![rec("reqres", 7, 2.0), rec("reqres", 7, 3.0)];
        let c = compare(
            &[rec("reqres", 7, 1.0)],
            &b,
            0.05,
            &["msgs_per_s".into()],
            &[],
        );
        assert_eq!((c.len(), c[0].after), (1, 2.0));
    }

    /// Two back-to-back quick suites of one binary: the pipeline mode's
    /// repeats ran at ~83, ~30 and ~10 Mpps in the first (median 19.0)
    /// and mostly at ~83 in the second (median 82.8), each median's
    /// interval narrow, and the 10% gate failed in one order. A run whose
    /// repeats spread over modes floors the ratio at that spread, in both
    /// orders alike; a unimodal spread leaves the floor alone.
    #[test]
    fn repeats_that_swing_between_modes_floor_the_ratio_at_their_swing() {
        let a4 = [
            25.3, 12.1, 4.6, 4.0, 4.9, 11.0, 83.2, 6.1, 15.4, 56.6, 79.0, 74.7, 16.9, 23.1, 6.4,
            28.0, 28.8, 29.9, 6.5, 21.0,
        ];
        let b4 = [
            20.0, 22.2, 83.0, 82.6, 83.5, 79.6, 83.4, 81.5, 83.4, 82.9, 82.8, 83.8,
        ];
        let (a, b) = (vec![sampled(1, &a4)], vec![sampled(1, &b4)]);
        for (x, y) in [(&a, &b), (&b, &a)] {
            let c = &compare(x, y, 0.10, &["msgs_per_s".into()], &[])[0];
            assert_eq!(c.verdict, "inconclusive", "{c:?}");
            assert!(c.note.contains("repeats swung"), "{c:?}");
            assert!(c.noise_floor > 10.0, "{c:?}");
        }
        // ±10% about one value: the floor stays the policy's, and a 2×
        // step is still found.
        let base = [
            900.0, 1100.0, 950.0, 1050.0, 1000.0, 980.0, 1020.0, 910.0, 1090.0, 1000.0,
        ];
        let double: Vec<f64> = base.iter().map(|x| x * 2.0).collect();
        let c = &compare(
            &[sampled(1, &base)],
            &[sampled(1, &double)],
            0.10,
            &["msgs_per_s".into()],
            &[],
        )[0];
        assert_eq!(c.noise_floor, 0.0, "{c:?}");
        assert_eq!(c.verdict, "faster", "{c:?}");
        assert!(estimate::swing(&base) < estimate::SWING_MODES);
        // Three repeats (the quick suite's mux runs) are read too, nearly
        // at their extremes; two are not.
        assert!(estimate::swing(&[30.0, 80.0, 90.0]) >= estimate::SWING_MODES);
        assert!(estimate::swing(&[100.0, 110.0, 95.0]) < 0.2);
        assert_eq!(estimate::swing(&[30.0, 90.0]), 0.0);
    }

    /// The pipeline mode pinned apart on a 2-vCPU VM moved 2.33× between
    /// two quiet quick suites, each suite's repeats tight: cold, a record
    /// that crossed CPUs is floored at the cross-CPU floor (in both
    /// orders), one that did not keeps the cold floor and the step is
    /// found, and a floor learned from a store replaces both.
    #[test]
    fn a_figure_handed_between_cpus_is_floored_wider_when_nothing_was_learned() {
        let low = [35.8, 36.2, 35.1, 36.7, 35.9];
        let high: Vec<f64> = low.iter().map(|x| x * 2.33).collect();
        let crossed = |xs: &[f64], c: bool| {
            let mut r = sampled(1, xs);
            r.push_metric(commbench_core::lab::CROSS_CPU, c);
            r
        };
        let o = |learned: &dyn Fn(&str, &str, &str, &str) -> Option<f64>| {
            let c = |a: &[Record], b: &[Record]| {
                let opts = Options {
                    threshold: 0.10,
                    only: &[],
                    ignore_params: &[],
                    noise_floor: learned,
                    default_floor: estimate::COLD_FLOOR,
                    cross_cpu_floor: estimate::CROSS_CPU_COLD_FLOOR,
                    load_gap: 0.0,
                    env_load: (None, None),
                    machines_differ: None,
                };
                compare_with(a, b, &opts, &[])
                    .into_iter()
                    .find(|c| c.metric == "msgs_per_s")
                    .unwrap()
            };
            let (a, b) = ([crossed(&low, true)], [crossed(&high, false)]);
            (c(&a, &b), c(&b, &a))
        };
        let (ab, ba) = o(&no_floor);
        for c in [&ab, &ba] {
            assert_eq!(c.verdict, "inconclusive", "{c:?}");
            assert_eq!(c.noise_floor, estimate::CROSS_CPU_COLD_FLOOR, "{c:?}");
            assert!(c.note.contains("handed between CPUs"), "{c:?}");
            assert!(c.lo < 1.0 && c.hi > 1.0, "{c:?}");
        }
        // Neither side crossed CPUs: the cold floor, and 2.33× is found.
        let plain = |xs: &[f64]| crossed(xs, false);
        let opts = Options {
            threshold: 0.10,
            only: &[],
            ignore_params: &[],
            noise_floor: &no_floor,
            default_floor: estimate::COLD_FLOOR,
            cross_cpu_floor: estimate::CROSS_CPU_COLD_FLOOR,
            load_gap: 0.0,
            env_load: (None, None),
            machines_differ: None,
        };
        let c = compare_with(&[plain(&low)], &[plain(&high)], &opts, &[]);
        let c = c.iter().find(|c| c.metric == "msgs_per_s").unwrap();
        assert_eq!(c.verdict, "faster", "{c:?}");
        assert_eq!(c.noise_floor, estimate::COLD_FLOOR, "{c:?}");
        // A floor learned from stored reruns is the evidence: it holds.
        let (ab, _) = o(&|_: &str, _: &str, _: &str, _: &str| Some(0.2));
        assert_eq!(ab.verdict, "faster", "{ab:?}");
        assert_eq!(ab.noise_floor, 0.2, "{ab:?}");
    }

    #[test]
    fn verdicts_are_judged_by_the_interval_of_the_ratio() {
        let base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0, 998.0];
        let same = [1001.0, 1008.0, 992.0, 1004.0, 996.0, 1003.0, 999.0];
        let double: Vec<f64> = base.iter().map(|x| x * 2.0).collect();
        let near: Vec<f64> = base.iter().map(|x| x * 1.05).collect();
        let a = vec![sampled(1, &base), sampled(2, &base), sampled(3, &base)];
        let b = vec![sampled(1, &same), sampled(2, &double), sampled(3, &near)];
        let c = compare(&a, &b, 0.05, &["msgs_per_s".into()], &[]);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].verdict, "no change", "{:?}", c[0]);
        assert_eq!(c[1].verdict, "faster", "{:?}", c[1]);
        assert!(c[1].lo > 1.9 && c[1].hi < 2.1, "{:?}", c[1]);
        assert!(
            c[1].summary().starts_with("faster 2.00× ["),
            "{}",
            c[1].summary()
        );
        // A 5% change against a 5% threshold: the interval straddles it.
        assert_eq!(c[2].verdict, "inconclusive", "{:?}", c[2]);
        let slower = compare(&b, &a, 0.05, &["msgs_per_s".into()], &[]);
        assert_eq!(slower[1].verdict, "slower");
        assert!(slower[1].is_regression());
    }

    #[test]
    fn a_noise_floor_widens_the_interval_before_judging() {
        let base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0, 998.0];
        let up: Vec<f64> = base.iter().map(|x| x * 1.12).collect();
        let a = vec![sampled(1, &base)];
        let b = vec![sampled(1, &up)];
        let floor = |_: &str, _: &str, _: &str, _: &str| Some(0.10);
        let o = Options {
            threshold: 0.05,
            only: &[],
            ignore_params: &[],
            noise_floor: &floor,
            default_floor: 0.0,
            cross_cpu_floor: 0.0,
            load_gap: 0.0,
            env_load: (None, None),
            machines_differ: None,
        };
        let c = compare_with(&a, &b, &o, &[]);
        let rate = c.iter().find(|c| c.metric == "msgs_per_s").unwrap();
        assert_eq!(rate.verdict, "inconclusive", "{rate:?}");
        assert!(rate.lo < 1.05, "{rate:?}");
    }

    #[test]
    fn with_ignored_parameters_the_noisier_side_sets_the_floor() {
        // delay:1000 against delay:1100 with `work` ignored: only the
        // after side's reruns are noisy, and its floor must widen the
        // interval too.
        let base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0, 998.0];
        let up: Vec<f64> = base.iter().map(|x| x * 1.12).collect();
        let a = vec![sampled(1, &base).param("work", "delay:1000")];
        let b = vec![sampled(1, &up).param("work", "delay:1100")];
        let floor =
            |_: &str, _: &str, params: &str, _: &str| params.contains("delay:1100").then_some(0.10);
        let ignore = ["work".to_owned()];
        let o = Options {
            threshold: 0.05,
            only: &[],
            ignore_params: &ignore,
            noise_floor: &floor,
            default_floor: 0.0,
            cross_cpu_floor: 0.0,
            load_gap: 0.0,
            env_load: (None, None),
            machines_differ: None,
        };
        let c = compare_with(&a, &b, &o, &[]);
        let rate = c.iter().find(|c| c.metric == "msgs_per_s").unwrap();
        assert!((rate.noise_floor - 0.10).abs() < 1e-12, "{rate:?}");
        assert_eq!(rate.verdict, "inconclusive", "{rate:?}");
    }

    #[test]
    fn a_change_under_a_different_load_is_inconclusive() {
        let base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0, 998.0];
        let double: Vec<f64> = base.iter().map(|x| x * 2.0).collect();
        let mut a = sampled(1, &base);
        a.push_metric("load_start", 1.0);
        a.push_metric("load_end", 1.2);
        let mut b = sampled(1, &double);
        b.push_metric("load_start", 2.5);
        b.push_metric("load_end", 2.9);
        let o = |gap: f64| Options {
            threshold: 0.05,
            only: &[],
            ignore_params: &[],
            noise_floor: &no_floor,
            default_floor: 0.0,
            cross_cpu_floor: 0.0,
            load_gap: gap,
            env_load: (None, None),
            machines_differ: None,
        };
        let rate = |gap: f64| {
            compare_with(
                std::slice::from_ref(&a),
                std::slice::from_ref(&b),
                &o(gap),
                &[],
            )
            .into_iter()
            .find(|c| c.metric == "msgs_per_s")
            .unwrap()
        };
        let c = rate(1.0);
        assert_eq!(c.verdict, "inconclusive", "{c:?}");
        assert!(c.summary().contains("load 1.1 vs 2.7"), "{}", c.summary());
        assert_eq!(rate(0.0).verdict, "faster");
        assert_eq!(rate(2.0).verdict, "faster");
    }

    #[test]
    fn a_change_in_an_oversubscribed_run_is_inconclusive() {
        let base = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0, 998.0];
        let double: Vec<f64> = base.iter().map(|x| x * 2.0).collect();
        let a = sampled(1, &base);
        let mut b = sampled(1, &double);
        b.push_metric("oversubscribed", true);
        let c = compare(&[a], &[b], 0.05, &["msgs_per_s".into()], &[]);
        assert_eq!(c[0].verdict, "inconclusive");
        assert!(
            c[0].summary().contains("oversubscribed"),
            "{}",
            c[0].summary()
        );
    }

    #[test]
    fn values_without_samples_are_never_called_a_change() {
        let a = vec![rec("reqres", 1, 1000.0), rec("reqres", 2, 1000.0)];
        let b = vec![rec("reqres", 1, 1030.0), rec("reqres", 2, 2000.0)];
        let c = compare(&a, &b, 0.05, &["msgs_per_s".into()], &[]);
        assert_eq!(c[1].verdict, "no samples");
        assert!((c[1].ratio - 2.0).abs() < 1e-12);
        let lat = compare(&a, &a, 0.05, &["latency_ns.p99".into()], &[]);
        assert_eq!(lat[0].verdict, "no change");
    }

    #[test]
    fn interval_fields_are_part_of_their_metric() {
        let a = vec![sampled(1, &[1.0, 2.0, 3.0])];
        let c = compare(&a, &a, 0.05, &[], &[]);
        assert!(
            !c.iter().any(|c| c.metric.starts_with("msgs_per_s_")),
            "{:?}",
            c.iter().map(|c| &c.metric).collect::<Vec<_>>()
        );
    }

    #[test]
    fn unmatched_records_are_skipped() {
        let a = vec![rec("reqres", 1, 1000.0)];
        let b = vec![rec("stream", 1, 1000.0)];
        assert!(compare(&a, &b, 0.05, &[], &[]).is_empty());
    }
}
