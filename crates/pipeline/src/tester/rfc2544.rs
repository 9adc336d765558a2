//! RFC 2544 throughput (binary search for the highest rate with no loss,
//! NDR, and with at most a set loss, PDR), a confirmation trial at the
//! found rate, latency at that rate, and the frame-loss rate over offered
//! load (RFC 2544 §26.3: from the maximum rate down in 10% steps); and the
//! cross-check of black-box NDRs against the white-box cost model.
//!
//! Two searches: RFC 9971's MLRsearch ([`mlr_search`], the default:
//! several goals from one set of trials, each with its relevant lower and
//! upper bound and conditional throughput, see [`super::mlrsearch`]) and
//! RFC 2544's binary search ([`search`], `--search rfc2544`). Both give
//! one [`SearchResult`] per goal (NDR for a zero-loss goal, PDR for one
//! that allows loss), so the latency ladder, the records and the table
//! read them alike.
//!
//! A trial whose generator fell behind its schedule did not offer the
//! rate: neither search counts it as the device's pass or fail. RFC 2544's
//! lowers its ceiling to that rate; MLRsearch repeats the trial and treats
//! a load troubled three times in a row as the tester's ceiling (or, below
//! a load it kept before, as the host's trouble that stops the search).
//! A goal nothing was measured for reads "not measured, because …" in
//! every output, never 0.

use super::mlrsearch::controller::{self as mlr, Decided, GoalResult, Measured, SearchOutcome};
use super::mlrsearch::{Goal, DEFAULT_GOALS};
use super::pace::{Rate, Sizes};
use super::trial::{bias_metrics, offer_bias, Offer};
use super::{Bench, SpecError, TrialResult, TrialSpec};
use crate::PipelineError;
use commbench_core::estimate::{attach, Estimate};
use commbench_core::record::{Record, Recorder};
use serde::Serialize;
use std::io;
use std::time::{Duration, Instant};

/// Which throughput search `rfc2544` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// RFC 9971 MLRsearch with goals.
    #[default]
    Mlr,
    /// RFC 2544's binary search (NDR, and PDR with `--pdr-loss-pct`).
    Rfc2544,
}

impl Method {
    /// `mlr` or `rfc2544`.
    pub fn parse(s: &str) -> Result<Method, SpecError> {
        match s {
            "mlr" => Ok(Method::Mlr),
            "rfc2544" => Ok(Method::Rfc2544),
            _ => Err(SpecError::SearchMethod(s.to_owned())),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Method::Mlr => "mlr",
            Method::Rfc2544 => "rfc2544",
        }
    }
}

/// MLRsearch's min load, pps (RFC 9971 asks for one that sends frames
/// even in the shortest trial: 100 in 0.1 s).
pub const MLR_MIN_PPS: f64 = 1_000.0;
/// MLRsearch's trials at most per frame size (troubled ones included).
pub const MLR_MAX_TRIALS: usize = 200;
/// MLRsearch's wall time at most per frame size, s: beyond it the goals
/// not yet decided say so (the defaults need about a third of it).
pub const MLR_BUDGET_S: f64 = 120.0;

/// What to search.
#[derive(Debug, Clone)]
pub struct SearchSpec {
    /// Every trial's settings (the rate is the search's).
    pub trial: TrialSpec,
    /// Highest rate tried, pps.
    pub max_pps: f64,
    /// Stop when the interval is narrower than this share of `max_pps`, %.
    pub resolution_pct: f64,
    /// PDR's allowed loss, % (None: NDR only).
    pub pdr_loss_pct: Option<f64>,
    /// Trials at most per search.
    pub max_trials: usize,
    /// Steps of the frame-loss ladder (0: none; 10: 10%, 20%, … 100% of max).
    pub ladder_steps: usize,
}

/// One search's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    /// `ndr` or `pdr`.
    pub kind: String,
    pub loss_allowed_pct: f64,
    /// The highest rate that passed (0: none did).
    pub rate_pps: f64,
    /// The lowest rate that failed (or the ceiling).
    pub fail_pps: f64,
    /// The confirmation trial at `rate_pps` passed too.
    pub confirmed: bool,
    /// The generator could not offer some rate at or below `max_pps`:
    /// the ceiling was the tester's, not the device's.
    pub tester_limited: bool,
    pub tester_ceiling_pps: f64,
    /// Where the frames of the lowest failing trial were lost
    /// ([`TrialResult::loss_where`]): who set the limit.
    pub fail_loss_where: String,
    pub trials: usize,
    pub final_trial: Option<TrialResult>,
    /// Which search found it.
    pub method: Method,
    /// MLRsearch: the goal and its result.
    pub goal: Option<GoalResult>,
    /// Trials that did not count (the tester's or the host's trouble).
    pub troubled: usize,
    /// Wall time of the search, s.
    pub search_s: f64,
    /// The device's own CPU during the search (FD.io CSIT's clocks per
    /// packet beside NDR/PDR): what a shared host can repeat.
    pub device: DeviceCpu,
}

/// The device's CPU over a search: its own CPU time per frame and its
/// share of its CPU at the found rate (trials at the lower bound), and
/// the share of its CPU other work took (every counted trial). Empty when
/// the device is not ours to measure (an `ifaces:` device).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DeviceCpu {
    /// Own CPU ns per frame, one per trial at the found rate.
    pub ns_per_frame: Vec<f64>,
    /// Own CPU seconds per second of trial, one per trial at the found rate.
    pub share: Vec<f64>,
    /// Other work's share of the device's CPU, %, one per counted trial.
    pub others_pct: Vec<f64>,
}

/// Other work's share of the device's CPU above which a search's figures
/// are flagged "device CPU shared" (the raw NDR then measures the host).
pub const SHARED_PCT: f64 = 5.0;

/// What one trial measured of the device's CPU (see [`TrialResult`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceSample {
    pub own_cpu_ms: Option<f64>,
    pub window_ms: Option<f64>,
    pub own_ns_per_frame: Option<f64>,
    pub others_pct: Option<f64>,
}

impl From<&TrialResult> for DeviceSample {
    fn from(t: &TrialResult) -> Self {
        DeviceSample {
            own_cpu_ms: t.dut_own_cpu_ms,
            window_ms: t.dut_cpu_window_ms,
            own_ns_per_frame: t.dut_own_ns_per_frame,
            others_pct: t.dut_cpu_others_pct,
        }
    }
}

impl DeviceCpu {
    /// From the trials at the found rate and every counted trial.
    pub fn from_trials<'a>(
        at_rate: impl IntoIterator<Item = &'a TrialResult>,
        all: impl IntoIterator<Item = &'a TrialResult>,
    ) -> Self {
        Self::from_samples(
            at_rate.into_iter().map(DeviceSample::from),
            all.into_iter().map(DeviceSample::from),
        )
    }

    /// From the samples of the trials at the found rate and of every
    /// counted trial.
    pub fn from_samples(
        at_rate: impl IntoIterator<Item = DeviceSample>,
        all: impl IntoIterator<Item = DeviceSample>,
    ) -> Self {
        let mut d = DeviceCpu::default();
        for t in at_rate {
            if let Some(x) = t.own_ns_per_frame.filter(|x| x.is_finite()) {
                d.ns_per_frame.push(x);
            }
            if let (Some(own), Some(w)) = (t.own_cpu_ms, t.window_ms) {
                if w > 0.0 && own > 0.0 {
                    d.share.push(own / w);
                }
            }
        }
        d.others_pct = all
            .into_iter()
            .filter_map(|t| t.others_pct)
            .filter(|x| x.is_finite())
            .collect();
        d
    }

    /// Whether anything was measured of the device's CPU.
    pub fn measured(&self) -> bool {
        !self.ns_per_frame.is_empty() || !self.others_pct.is_empty()
    }

    /// Other work's median share of the device's CPU, %.
    pub fn others_median(&self) -> Option<f64> {
        let mut v = self.others_pct.clone();
        (!v.is_empty()).then(|| commbench_core::stats::median(&mut v))
    }

    /// Over [`SHARED_PCT`]: the device's CPU was shared with other work.
    pub fn shared(&self) -> bool {
        self.others_median().is_some_and(|x| x > SHARED_PCT)
    }

    /// Writes the device's figures into a search record: its CPU per
    /// forwarded frame with the interval over the trials at the found
    /// rate, its share of its CPU there, the rate per device CPU-second,
    /// other work's share and the flag; "device CPU not measured" with
    /// the reason when nothing was.
    pub fn add_to(&self, r: &mut Record, rate_pps: f64) {
        use commbench_core::estimate::{attach, Estimate};
        if !self.measured() {
            r.push_metric(
                "device_cpu_note",
                "device CPU not measured: the device is not one the tester started here",
            );
            return;
        }
        if !self.ns_per_frame.is_empty() {
            let e = Estimate::from_samples(&self.ns_per_frame);
            attach(&mut r.metrics, "device_cpu_ns_per_frame", &e);
        }
        if !self.share.is_empty() {
            let mut v = self.share.clone();
            let share = commbench_core::stats::median(&mut v);
            r.push_metric("device_cpu_share_pct", share * 100.0);
        }
        if rate_pps.is_finite() && rate_pps > 0.0 {
            // Frames per second of the device's own CPU time at the found
            // rate (its CPU per frame inverted): the rate a shared host
            // repeats, where the raw rate follows the CPU other work
            // leaves the device.
            let per: Vec<f64> = self
                .ns_per_frame
                .iter()
                .filter(|x| **x > 0.0)
                .map(|x| 1e9 / x)
                .collect();
            if !per.is_empty() {
                attach(
                    &mut r.metrics,
                    "rate_per_device_cpu_s",
                    &Estimate::from_samples(&per),
                );
            }
        }
        if let Some(o) = self.others_median() {
            r.push_metric("device_cpu_others_pct", o);
        }
        r.push_metric("device_cpu_shared", self.shared());
    }
}

/// A trial passes with no frame lost (NDR) or at most `loss_pct` lost.
pub fn passes(t: &TrialResult, loss_pct: f64) -> bool {
    t.sent > 0
        && if loss_pct <= 0.0 {
            t.lost == 0
        } else {
            t.loss_pct <= loss_pct
        }
}

/// Binary search for the highest passing rate in [lo, max].
pub fn search(
    b: &mut Bench,
    s: &SearchSpec,
    kind: &str,
    loss_pct: f64,
    lo_start: f64,
    mut log: impl FnMut(&TrialResult),
) -> io::Result<SearchResult> {
    let start = Instant::now();
    let mut behind = 0;
    let mut lo = lo_start.max(0.0);
    let mut hi = s.max_pps;
    let mut ceiling = s.max_pps;
    let mut behind_seen = false;
    // The lowest rate at which the device itself lost frames.
    let mut device_fail = f64::INFINITY;
    let mut fail_where = String::new();
    let mut trials = 0;
    let res = s.max_pps * s.resolution_pct / 100.0;
    let mut rate = s.max_pps;
    let mut last_pass: Option<TrialResult> = None;
    while trials < s.max_trials && !super::interrupted() {
        let mut t = s.trial.clone();
        t.rate = Rate::Pps(rate);
        let r = b.trial(&t)?;
        trials += 1;
        log(&r);
        if r.behind_schedule {
            // Not offered: the rate is beyond the tester here.
            behind += 1;
            behind_seen = true;
            ceiling = ceiling.min(rate);
            hi = rate;
        } else if passes(&r, loss_pct) {
            lo = rate;
            last_pass = Some(r);
        } else {
            if rate < device_fail {
                device_fail = rate;
                fail_where = r.loss_where.clone();
            }
            hi = rate;
        }
        if hi - lo <= res || rate <= 0.0 {
            break;
        }
        rate = (lo + hi) / 2.0;
    }
    // Confirmation at the found rate (RFC 2544 asks for a full-length
    // trial at the reported rate); step down by the resolution while it
    // fails, a few times at most.
    let mut confirmed = false;
    let mut final_trial = last_pass;
    let mut found = lo;
    for _ in 0..4 {
        if found <= 0.0 || super::interrupted() {
            break;
        }
        let mut t = s.trial.clone();
        t.rate = Rate::Pps(found);
        let r = b.trial(&t)?;
        trials += 1;
        log(&r);
        if !r.behind_schedule && passes(&r, loss_pct) {
            confirmed = true;
            final_trial = Some(r);
            break;
        }
        if r.behind_schedule {
            behind += 1;
            behind_seen = true;
            ceiling = ceiling.min(found);
        } else if found < device_fail {
            device_fail = found;
            fail_where = r.loss_where.clone();
        }
        hi = found;
        found = (found - res.max(found * 0.01)).max(0.0);
    }
    let tester_limited = limited_by_tester(behind_seen, ceiling, device_fail);
    let device = DeviceCpu::from_trials(final_trial.iter(), final_trial.iter());
    Ok(SearchResult {
        kind: kind.to_owned(),
        loss_allowed_pct: loss_pct,
        rate_pps: if confirmed { found } else { lo.min(found) },
        fail_pps: hi,
        confirmed,
        tester_limited,
        tester_ceiling_pps: ceiling,
        fail_loss_where: fail_where,
        trials,
        final_trial,
        method: Method::Rfc2544,
        goal: None,
        troubled: behind,
        search_s: start.elapsed().as_secs_f64(),
        device,
    })
}

/// A trial's loss ratio (1 when nothing was sent).
fn loss_ratio(t: &TrialResult) -> f64 {
    if t.sent > 0 {
        t.lost as f64 / t.sent as f64
    } else {
        1.0
    }
}

/// MLRsearch on the bench: one search for all `goals` between
/// [`MLR_MIN_PPS`] and `max_pps` in `budget_s` of wall time and at most
/// `max_trials` trials, every trial `trial` at the load and duration the
/// controller asks for; one [`SearchResult`] per goal. `log` sees every
/// trial with its trouble (None: it counted).
#[allow(clippy::too_many_arguments)] // the search's bounds, spelled out
pub fn mlr_search(
    b: &mut Bench,
    trial: &TrialSpec,
    goals: &[Goal],
    max_pps: f64,
    budget_s: f64,
    max_trials: usize,
    mut log: impl FnMut(&TrialResult, Option<&str>),
) -> io::Result<(SearchOutcome, Vec<SearchResult>)> {
    let spec = mlr::Spec {
        goals: goals.to_vec(),
        min_pps: MLR_MIN_PPS.min(max_pps),
        max_pps,
        max_trials,
        trouble_repeats: mlr::TROUBLE_REPEATS,
        budget_s,
    };
    let start = Instant::now();
    // The counted trials by load, for the latency at the lower bound and
    // where the frames were lost at the upper one.
    let mut counted: Vec<(f64, TrialResult)> = Vec::new();
    let out = mlr::search(&spec, |load, duration_s| {
        if super::interrupted() {
            return Ok(None);
        }
        let mut t = trial.clone();
        t.rate = Rate::Pps(load);
        t.duration = Duration::from_secs_f64(duration_s);
        let t0 = Instant::now();
        let r = b.trial(&t)?;
        let trouble = mlr::trouble_of(&r);
        log(&r, trouble.as_deref());
        let m = Measured {
            loss_ratio: loss_ratio(&r),
            duration_s,
            wall_s: t0.elapsed().as_secs_f64(),
            kept_schedule: !r.behind_schedule,
            trouble,
        };
        if m.trouble.is_none() {
            counted.push((load, r));
        }
        Ok::<_, io::Error>(Some(m))
    })?;
    let search_s = start.elapsed().as_secs_f64();
    let results = out
        .goals
        .iter()
        .map(|g| goal_result(g, &out, &counted, search_s))
        .collect();
    Ok((out, results))
}

/// One goal of an MLRsearch as a [`SearchResult`]: the relevant lower
/// bound as its rate (NaN, null in records, when none), the upper bound
/// as its failing rate, the latest full-length trial at the lower bound
/// that upheld the goal as its final trial.
fn goal_result(
    g: &GoalResult,
    out: &SearchOutcome,
    counted: &[(f64, TrialResult)],
    search_s: f64,
) -> SearchResult {
    let last = |load: Option<f64>, high: bool| {
        let l = load?;
        counted
            .iter()
            .rev()
            .find(|(x, t)| {
                *x == l
                    && g.goal.full_length(t.duration_s)
                    && g.goal.high_loss(loss_ratio(t)) == high
            })
            .map(|(_, t)| t.clone())
    };
    SearchResult {
        kind: if g.goal.loss_ratio > 0.0 {
            "pdr"
        } else {
            "ndr"
        }
        .to_owned(),
        loss_allowed_pct: g.goal.loss_ratio * 100.0,
        rate_pps: g.lower_pps.unwrap_or(f64::NAN),
        fail_pps: g.upper_pps.unwrap_or(f64::NAN),
        confirmed: g.regular,
        tester_limited: matches!(g.decided, Decided::TesterCeiling | Decided::HostTrouble),
        tester_ceiling_pps: out.tester_ceiling_pps.unwrap_or(f64::NAN),
        fail_loss_where: last(g.upper_pps, true).map_or(String::new(), |t| t.loss_where),
        trials: out.trials,
        final_trial: last(g.lower_pps, false),
        method: Method::Mlr,
        goal: Some(g.clone()),
        troubled: out.troubled,
        search_s,
        device: DeviceCpu::from_trials(
            counted
                .iter()
                .filter(|(x, t)| Some(*x) == g.lower_pps && !g.goal.high_loss(loss_ratio(t)))
                .map(|(_, t)| t),
            counted.iter().map(|(_, t)| t),
        ),
    }
}

/// Whether the tester, not the device, bounded a search: only when the
/// generator could not offer some rate at or below the lowest rate at
/// which the device lost frames. A generator that fell behind at 1.5 Mpps
/// says nothing of a device that lost frames at 0.5 Mpps.
pub fn limited_by_tester(behind_seen: bool, tester_ceiling: f64, device_fail: f64) -> bool {
    behind_seen && tester_ceiling <= device_fail
}

/// The record of a search.
pub fn search_record(s: &SearchResult, spec: &SearchSpec, dut: &str, size: &str) -> Record {
    let duration_s = s
        .goal
        .as_ref()
        .map_or(spec.trial.duration.as_secs_f64(), |g| g.goal.final_s);
    let mut r = Record::new("pipeline", &format!("rfc2544-{}", s.kind))
        .param("dut", dut)
        .param("size", size)
        .param("method", s.method.name())
        .param("loss_allowed_pct", s.loss_allowed_pct)
        .param("duration_s", duration_s)
        .param("max_pps", spec.max_pps)
        .param("tx", spec.trial.tx.name())
        .param("rx", spec.trial.rx.name())
        .metric("rate_pps", s.rate_pps)
        .metric("rate_mpps", s.rate_pps / 1e6)
        .metric("fail_pps", s.fail_pps)
        .metric("confirmed", s.confirmed)
        .metric("tester_limited", s.tester_limited)
        .metric("tester_ceiling_pps", s.tester_ceiling_pps)
        .metric("fail_loss_where", &s.fail_loss_where)
        .metric("trials", s.trials)
        .metric("troubled_trials", s.troubled)
        .metric("search_s", s.search_s);
    match &s.goal {
        None => r.push_param("resolution_pct", spec.resolution_pct),
        Some(g) => goal_fields(&mut r, g),
    }
    if let Some(t) = &s.final_trial {
        r.push_metric("latency_p50_ns", t.latency.p50);
        r.push_metric("latency_p99_ns", t.latency.p99);
        r.push_metric("latency_p9999_ns", t.latency.p9999);
        r.push_metric("latency_max_ns", t.latency.max);
        r.push_metric("loss_pct", t.loss_pct);
        if let (Some(a), Some(w), Some(x)) = (t.fwd_ticks_rx, t.fwd_ticks_work, t.fwd_ticks_tx) {
            r.push_metric("fwd_ticks_rx", a);
            r.push_metric("fwd_ticks_work", w);
            r.push_metric("fwd_ticks_tx", x);
            r.push_metric("fwd_ticks_kernel", t.fwd_ticks_kernel);
        }
    }
    s.device.add_to(&mut r, s.rate_pps);
    r.push_metric("partial", super::interrupted());
    r
}

/// An MLRsearch goal's attributes (params) and result (metrics).
fn goal_fields(r: &mut Record, g: &GoalResult) {
    let a = &g.goal;
    r.push_param("goal", a.code());
    r.push_param("goal_exceed_ratio", a.exceed_ratio);
    r.push_param("goal_final_s", a.final_s);
    r.push_param("goal_sum_s", a.sum_s);
    r.push_param("goal_width_pct", a.width * 100.0);
    r.push_param("goal_initial_s", a.initial_s);
    r.push_metric("lower_pps", g.lower_pps);
    r.push_metric("upper_pps", g.upper_pps);
    r.push_metric("conditional_throughput_pps", g.conditional_pps);
    r.push_metric("regular", g.regular);
    r.push_metric("decided", g.decided.name());
    r.push_metric("lower_trials", g.lower_trials);
    r.push_metric("upper_trials", g.upper_trials);
    r.push_metric("note", &g.note);
}

/// Folds repeated searches of one kind (or MLRsearch goal) and size into
/// one record: the rate's median, its 95% interval and CV over the
/// searches that measured one (`measured_repeats` of `repeat`); for
/// MLRsearch the conditional throughput's too. A search that measured
/// nothing (no rate, or RFC 2544's 0) is left out of the figures and
/// counted; when none measured, the rate is null and the note says so.
pub fn fold_repeats(v: &[(SearchResult, Record)]) -> Option<Record> {
    let (s0, first) = v.first()?;
    let mut r = first.clone();
    let measured = |x: &f64| x.is_finite() && *x > 0.0;
    let rates: Vec<f64> = v.iter().map(|(s, _)| s.rate_pps).filter(measured).collect();
    fold_metric(&mut r, "rate_pps", &rates);
    let mpps: Vec<f64> = rates.iter().map(|x| x / 1e6).collect();
    fold_metric(&mut r, "rate_mpps", &mpps);
    r.push_metric("rate_cv_pct", cv_pct(&rates));
    // The device's CPU over the repeats: the rate per device CPU-second
    // (the figure a shared host repeats) and whether any was shared.
    if v.iter().any(|(s, _)| s.device.measured()) {
        let per_cpu: Vec<f64> = v
            .iter()
            .filter_map(|(_, x)| x.metric_f64("rate_per_device_cpu_s"))
            .filter(measured)
            .collect();
        fold_metric(&mut r, "rate_per_device_cpu_s", &per_cpu);
        r.push_metric("rate_per_device_cpu_s_cv_pct", cv_pct(&per_cpu));
        r.push_metric(
            "device_cpu_shared",
            v.iter().any(|(s, _)| s.device.shared()),
        );
    }
    r.push_param("repeat", v.len());
    r.push_metric("measured_repeats", rates.len());
    r.push_metric("confirmed", v.iter().all(|(s, _)| s.confirmed));
    r.push_metric("tester_limited", v.iter().any(|(s, _)| s.tester_limited));
    if s0.goal.is_some() {
        let goals: Vec<&GoalResult> = v.iter().filter_map(|(s, _)| s.goal.as_ref()).collect();
        let ct: Vec<f64> = goals
            .iter()
            .filter_map(|g| g.conditional_pps)
            .filter(measured)
            .collect();
        fold_metric(&mut r, "conditional_throughput_pps", &ct);
        r.push_metric("conditional_throughput_cv_pct", cv_pct(&ct));
        fold_metric(&mut r, "lower_pps", &rates);
        r.push_metric("regular", goals.iter().all(|g| g.regular));
        let decided: Vec<&str> = goals.iter().map(|g| g.decided.name()).collect();
        let same = decided.iter().all(|d| *d == decided[0]);
        r.push_metric("decided", if same { decided[0] } else { "mixed" });
        if let Some(n) = goals.iter().map(|g| &g.note).find(|n| !n.is_empty()) {
            let missing = v.len() - rates.len();
            r.push_metric(
                "note",
                if missing == 0 {
                    n.clone()
                } else if rates.is_empty() {
                    format!("not measured in any of {} searches: {}", v.len(), n)
                } else {
                    format!("{missing} of {} searches measured nothing: {n}", v.len())
                },
            );
        }
    }
    Some(r)
}

/// Sets `key` to the samples' median with its 95% interval (null
/// without samples).
fn fold_metric(r: &mut Record, key: &str, samples: &[f64]) {
    if samples.is_empty() {
        r.push_metric(key, f64::NAN);
    } else {
        attach(&mut r.metrics, key, &Estimate::from_samples(samples));
    }
}

/// The coefficient of variation, % (NaN under two samples or a zero mean).
fn cv_pct(x: &[f64]) -> f64 {
    if x.len() < 2 {
        return f64::NAN;
    }
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    if mean > 0.0 {
        commbench_core::stats::population_stdev(x) / mean * 100.0
    } else {
        f64::NAN
    }
}

/// The frame-loss ladder: one trial at each of `steps` shares of the
/// maximum rate, highest first.
pub fn ladder(
    b: &mut Bench,
    s: &SearchSpec,
    mut log: impl FnMut(&TrialResult),
) -> io::Result<Vec<TrialResult>> {
    let mut out = Vec::new();
    for i in (1..=s.ladder_steps).rev() {
        if super::interrupted() {
            break;
        }
        let mut t = s.trial.clone();
        t.rate = Rate::Pps(s.max_pps * i as f64 / s.ladder_steps as f64);
        let r = b.trial(&t)?;
        log(&r);
        out.push(r);
    }
    Ok(out)
}

/// The latency ladder (RFC 2544 §26.2 at the throughput rate, and below
/// it): one trial at each of `steps` shares of `rate_pps` (the NDR just
/// found), lowest first, so the figure shows how the tail grows as the
/// load nears what the device forwards without loss.
pub fn latency_ladder(
    b: &mut Bench,
    s: &SearchSpec,
    rate_pps: f64,
    steps: usize,
    mut log: impl FnMut(&TrialResult),
) -> io::Result<Vec<(f64, TrialResult)>> {
    let mut out = Vec::new();
    if rate_pps <= 0.0 {
        return Ok(out);
    }
    for i in 1..=steps {
        if super::interrupted() {
            break;
        }
        let share = i as f64 / steps as f64;
        let mut t = s.trial.clone();
        t.rate = Rate::Pps(rate_pps * share);
        let r = b.trial(&t)?;
        log(&r);
        out.push((share * 100.0, r));
    }
    Ok(out)
}

/// What the back-to-back test (RFC 2544 §26.4, updated by RFC 9004)
/// searches.
#[derive(Debug, Clone)]
pub struct B2bSpec {
    /// Every trial's settings (count and unpaced are the test's).
    pub trial: TrialSpec,
    /// Longest burst tried, frames.
    pub max_frames: u64,
    /// Searches (RFC 9004: at least 50), each one burst length.
    pub repeats: usize,
    /// A search stops when the passing and failing lengths are this
    /// close, % of the passing one (and at least one frame apart).
    pub resolution_pct: f64,
    /// Trials at most per search.
    pub max_trials: usize,
    /// The device's measured throughput (the NDR) at this frame size, pps,
    /// for RFC 9004's corrected buffer time.
    pub throughput_pps: Option<f64>,
}

/// The back-to-back result.
#[derive(Debug, Clone, Serialize)]
pub struct B2bResult {
    /// The longest loss-free burst of each search, frames.
    pub lengths: Vec<u64>,
    /// RFC 2544 reports their average.
    pub mean_frames: f64,
    /// Rate at which the bursts left the generator (back to back: the
    /// path's own maximum, standing in for the line rate), median, pps.
    pub burst_pps: f64,
    /// Every burst of `max_frames` passed: the device's buffer (or its
    /// speed) is beyond what was tried.
    pub at_max: bool,
    /// Some failing burst was lost in the sink's own ring: the tester's
    /// buffer, not the device's, was measured there.
    pub tester_limited: bool,
    pub trials: usize,
    /// RFC 9004: mean frames / burst rate, s.
    pub implied_buffer_s: f64,
    /// RFC 9004: the frames still held when the burst ended (the burst
    /// minus what the device forwarded meanwhile at its throughput),
    /// as time at the burst rate, s. NaN without a throughput.
    pub corrected_buffer_s: f64,
}

/// RFC 9004's two buffer times from the average back-to-back length, the
/// rate the burst arrived at and the device's throughput.
pub fn buffer_times(mean_frames: f64, burst_pps: f64, throughput_pps: Option<f64>) -> (f64, f64) {
    let implied = mean_frames / burst_pps;
    let corrected = throughput_pps.map_or(f64::NAN, |t| {
        (mean_frames - t * implied).max(0.0) / burst_pps
    });
    (implied, corrected)
}

/// The back-to-back test: per search, the longest burst of frames sent
/// with no gap that the device forwards without losing one. Lengths are
/// bisected (geometrically while the bracket spans more than 4×); each
/// search after the first starts at the previous result.
pub fn back_to_back(
    b: &mut Bench,
    s: &B2bSpec,
    mut log: impl FnMut(&TrialResult),
) -> io::Result<B2bResult> {
    let mut lengths = Vec::new();
    let mut rates = Vec::new();
    let mut trials = 0;
    let mut tester_limited = false;
    let mut guess: Option<u64> = None;
    let mut at_max = true;
    for _ in 0..s.repeats {
        if super::interrupted() {
            break;
        }
        // lo: longest passing length (0 passes trivially); hi: shortest
        // failing one (max + 1: none failed yet).
        let (mut lo, mut hi) = (0u64, s.max_frames + 1);
        let mut next = guess.unwrap_or(s.max_frames).clamp(1, s.max_frames);
        for _ in 0..s.max_trials {
            if super::interrupted() {
                break;
            }
            let mut t = s.trial.clone();
            t.count = Some(next);
            t.unpaced = true;
            // Room for the device to empty its buffer at its throughput.
            if let Some(tp) = s.throughput_pps.filter(|&x| x > 0.0) {
                let empty = std::time::Duration::from_secs_f64((next as f64 / tp * 2.0).min(30.0));
                t.drain = t.drain.max(empty);
            }
            let r = b.trial(&t)?;
            trials += 1;
            log(&r);
            if r.sent > 0 && r.lost == 0 {
                lo = next;
                rates.push(r.achieved_pps);
            } else {
                if r.sink_drops > 0 {
                    tester_limited = true;
                }
                hi = next;
            }
            if lo >= s.max_frames {
                break;
            }
            let close = ((lo as f64) * s.resolution_pct / 100.0).max(1.0);
            if (hi - lo) as f64 <= close {
                break;
            }
            next = if hi > s.max_frames {
                // Only passes so far (from a guess): step up.
                (lo + lo / 4).max(lo + 1).min(s.max_frames)
            } else if lo == 0 {
                (hi / 4).max(1)
            } else if hi > 4 * lo {
                ((lo as f64 * hi as f64).sqrt() as u64).clamp(lo + 1, hi - 1)
            } else {
                lo + (hi - lo) / 2
            };
        }
        if lo < s.max_frames {
            at_max = false;
        }
        lengths.push(lo);
        guess = Some(lo.max(1));
    }
    let mean_frames = if lengths.is_empty() {
        f64::NAN
    } else {
        lengths.iter().sum::<u64>() as f64 / lengths.len() as f64
    };
    let burst_pps = if rates.is_empty() {
        f64::NAN
    } else {
        Estimate::from_samples(&rates).median
    };
    let (implied_buffer_s, corrected_buffer_s) =
        buffer_times(mean_frames, burst_pps, s.throughput_pps);
    Ok(B2bResult {
        at_max: at_max && !lengths.is_empty(),
        lengths,
        mean_frames,
        burst_pps,
        tester_limited,
        trials,
        implied_buffer_s,
        corrected_buffer_s,
    })
}

/// The record of a back-to-back test.
pub fn b2b_record(r: &B2bResult, s: &B2bSpec, dut: &str, size: &str) -> Record {
    let lens: Vec<f64> = r.lengths.iter().map(|&x| x as f64).collect();
    let mut x = Record::new("pipeline", "rfc2544-b2b")
        .param("dut", dut)
        .param("size", size)
        .param("max_frames", s.max_frames)
        .param("repeat", s.repeats)
        .param("resolution_pct", s.resolution_pct)
        .param("tx", s.trial.tx.name())
        .param("rx", s.trial.rx.name())
        .metric("b2b_frames_mean", r.mean_frames)
        .metric(
            "b2b_frames_min",
            lens.iter().copied().fold(f64::NAN, f64::min),
        )
        .metric(
            "b2b_frames_max",
            lens.iter().copied().fold(f64::NAN, f64::max),
        )
        .metric("burst_pps", r.burst_pps)
        .metric("throughput_pps", s.throughput_pps)
        .metric("implied_buffer_us", r.implied_buffer_s * 1e6)
        .metric("corrected_buffer_us", r.corrected_buffer_s * 1e6)
        .metric("at_max", r.at_max)
        .metric("tester_limited", r.tester_limited)
        .metric("trials", r.trials);
    if !lens.is_empty() {
        let est = Estimate::from_samples(&lens);
        x.push_metric("b2b_frames", est.median);
        attach(&mut x.metrics, "b2b_frames", &est);
    }
    x.push_metric(
        "partial",
        super::interrupted() || r.lengths.len() < s.repeats,
    );
    x
}

/// The table of a run's searches: [`mlr_table`] for MLRsearch, else one
/// line per frame size and kind (RFC 2544's), a rate nothing passed at
/// saying so in words.
pub fn table(rows: &[(String, SearchResult)]) -> String {
    if rows.iter().any(|(_, r)| r.goal.is_some()) {
        return mlr_table(rows);
    }
    let mut s = String::from(
        "frame size  kind  loss allowed  rate (pps)     Mpps    confirmed  tester-limited  losses above it in  latency p50 / p99 / max (µs)\n",
    );
    let mut notes = String::new();
    for (size, r) in rows {
        let lat = latency_cell(r);
        let (rate, mpps) = if r.rate_pps > 0.0 {
            (
                format!("{:.0}", r.rate_pps),
                format!("{:.4}", r.rate_pps / 1e6),
            )
        } else {
            notes.push_str(&format!(
                "{size} B {}: not measured: {}\n",
                r.kind,
                if r.tester_limited {
                    format!(
                        "the generator could not keep {:.0} pps on schedule",
                        r.tester_ceiling_pps
                    )
                } else {
                    format!("no trial passed, down to {:.0} pps", r.fail_pps)
                }
            ));
            ("not measured".to_owned(), "-".to_owned())
        };
        s.push_str(&format!(
            "{:>10}  {:4}  {:>11}%  {:>12}  {:>7}  {:9}  {:14}  {:18}  {}\n",
            size,
            r.kind,
            r.loss_allowed_pct,
            rate,
            mpps,
            if r.confirmed { "yes" } else { "NO" },
            if r.tester_limited { "yes" } else { "no" },
            if r.fail_loss_where.is_empty() {
                "-"
            } else {
                &r.fail_loss_where
            },
            lat
        ));
        notes.push_str(&device_line(&format!("{size} B {}", r.kind), r));
    }
    s.push_str(&notes);
    s
}

/// A search's device CPU in a line (CSIT's clocks per packet beside the
/// rate): its own CPU per frame at the found rate with the interval over
/// those trials, its share of its CPU there, the rate per device
/// CPU-second, and other work's share of its CPU, flagged over 5%.
pub fn device_line(label: &str, r: &SearchResult) -> String {
    let d = &r.device;
    if !d.measured() {
        return format!(
            "{label}: device CPU not measured (the device is not one the tester started here)\n"
        );
    }
    let mut parts = Vec::new();
    if !d.ns_per_frame.is_empty() {
        let e = Estimate::from_samples(&d.ns_per_frame);
        let iv = if e.n >= 2 {
            format!(" [{}, {}]", or_dash(e.lo, 0), or_dash(e.hi, 0))
        } else {
            String::new()
        };
        parts.push(format!(
            "device CPU {} ns per frame{iv}",
            or_dash(e.median, 0)
        ));
    }
    if !d.ns_per_frame.is_empty() && r.rate_pps.is_finite() && r.rate_pps > 0.0 {
        let per: Vec<f64> = d
            .ns_per_frame
            .iter()
            .filter(|x| **x > 0.0)
            .map(|x| 1e9 / x)
            .collect();
        let e = Estimate::from_samples(&per);
        let share = if d.share.is_empty() {
            String::new()
        } else {
            let mut v = d.share.clone();
            format!(
                ", {:.0}% of its CPU's window",
                commbench_core::stats::median(&mut v) * 100.0
            )
        };
        parts.push(format!(
            "at {:.0} pps{share}: {:.0} frames per device CPU-second",
            r.rate_pps, e.median
        ));
    }
    if let Some(o) = d.others_median() {
        parts.push(format!("other work took {o:.1}% of its CPU"));
    }
    let flag = if d.shared() {
        " — DEVICE CPU SHARED: the rate measures what the host's other work left the device; \
         compare the rate per device CPU-second"
    } else {
        ""
    };
    format!("{label}: {}{flag}\n", parts.join("; "))
}

/// The latency of a search's final trial, µs.
fn latency_cell(r: &SearchResult) -> String {
    r.final_trial.as_ref().map_or("-".to_owned(), |t| {
        format!(
            "{:.1} / {:.1} / {:.1}",
            t.latency.p50 / 1e3,
            t.latency.p99 / 1e3,
            t.latency.max / 1e3
        )
    })
}

/// MLRsearch's table: per frame size and goal the relevant lower and upper
/// bound, the conditional throughput, the trials at each bound and how
/// the goal was decided; then per frame size the search's trials, its
/// troubled ones and the generator's ceiling, and every goal's note
/// ("not measured: …" where nothing was).
pub fn mlr_table(rows: &[(String, SearchResult)]) -> String {
    let mut s = String::from(
        "frame size  kind  goal                lower (pps)   upper (pps)   conditional (pps)  trials lower/upper  decided         losses above it in  latency p50 / p99 / max (µs)\n",
    );
    let pps = |x: Option<f64>| x.map_or("not measured".to_owned(), |x| format!("{x:.0}"));
    let mut notes = String::new();
    let mut last_size: Option<&str> = None;
    for (size, r) in rows {
        let Some(g) = &r.goal else { continue };
        s.push_str(&format!(
            "{:>10}  {:4}  {:18}  {:>12}  {:>12}  {:>17}  {:>8} / {:<7}  {:14}  {:18}  {}\n",
            size,
            r.kind,
            g.goal.code(),
            pps(g.lower_pps),
            g.upper_pps.map_or("-".to_owned(), |x| format!("{x:.0}")),
            pps(g.conditional_pps),
            g.lower_trials,
            g.upper_trials,
            g.decided.name(),
            if r.fail_loss_where.is_empty() {
                "-"
            } else {
                &r.fail_loss_where
            },
            latency_cell(r)
        ));
        if last_size != Some(size.as_str()) {
            last_size = Some(size);
            notes.push_str(&format!(
                "{size} B: MLRsearch, {} trials ({} not counted: the tester's or the host's trouble) in {:.1} s; the generator kept {} on schedule\n",
                r.trials,
                r.troubled,
                r.search_s,
                if r.tester_ceiling_pps.is_finite() {
                    format!("up to {:.0} pps", r.tester_ceiling_pps)
                } else {
                    "no rate".to_owned()
                }
            ));
        }
        if !g.note.is_empty() {
            notes.push_str(&format!("{size} B {}: {}\n", g.goal.code(), g.note));
        }
        notes.push_str(&device_line(&format!("{size} B {}", g.goal.code()), r));
    }
    s.push_str(&notes);
    s.push_str(&repeats_summary(rows));
    s
}

/// Per frame size and goal searched more than once: the lower bound's and
/// the conditional throughput's median with its 95% interval and CV over
/// the searches that measured one.
fn repeats_summary(rows: &[(String, SearchResult)]) -> String {
    let mut keys: Vec<(&str, String)> = Vec::new();
    for (size, r) in rows {
        let k = (
            size.as_str(),
            r.goal.as_ref().map_or(String::new(), |g| g.goal.code()),
        );
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut s = String::new();
    for (size, code) in keys {
        let of: Vec<&GoalResult> = rows
            .iter()
            .filter(|(z, _)| z == size)
            .filter_map(|(_, r)| r.goal.as_ref())
            .filter(|g| g.goal.code() == code)
            .collect();
        if of.len() < 2 {
            continue;
        }
        let line = |name: &str, x: Vec<f64>| {
            if x.is_empty() {
                return format!("{name} not measured");
            }
            let e = Estimate::from_samples(&x);
            // One sample has no interval and no spread: "-", never NaN
            // or a zero-width interval.
            let (lo, hi) = if e.n >= 2 {
                (e.lo, e.hi)
            } else {
                (f64::NAN, f64::NAN)
            };
            let cv = cv_pct(&x);
            format!(
                "{name} {} pps [{}, {}], CV {}",
                or_dash(e.median, 0),
                or_dash(lo, 0),
                or_dash(hi, 0),
                if cv.is_finite() {
                    format!("{cv:.1}%")
                } else {
                    "-".to_owned()
                }
            )
        };
        let lower = of.iter().filter_map(|g| g.lower_pps).collect();
        let ct = of.iter().filter_map(|g| g.conditional_pps).collect();
        s.push_str(&format!(
            "{size} B {code} over {} searches (median [95% interval]): {}; {}\n",
            of.len(),
            line("lower bound", lower),
            line("conditional throughput", ct)
        ));
    }
    s
}

/// `x` with `decimals`, or "-" when it is not a number (an interval or a
/// CV that too few samples cannot give).
fn or_dash(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        "-".to_owned()
    }
}

/// The back-to-back table: one line per frame size.
pub fn b2b_table(rows: &[(String, B2bResult)]) -> String {
    let mut s = String::from(
        "frame size  back-to-back frames (mean / min / max)  searches  burst rate (pps)  buffer time implied / corrected (µs)  note\n",
    );
    for (size, r) in rows {
        let min = r.lengths.iter().min().copied().unwrap_or(0);
        let max = r.lengths.iter().max().copied().unwrap_or(0);
        let note = if r.corrected_buffer_s == 0.0 {
            "the device forwards as fast as the bursts arrive (NDR >= burst rate): RFC 9004 has no buffer to measure; the lengths are where the host paused it"
        } else if r.at_max {
            "every burst up to the maximum passed: the buffer is at least this"
        } else if r.tester_limited {
            "the sink's ring dropped frames: the tester's buffer was measured"
        } else {
            ""
        };
        s.push_str(&format!(
            "{:>10}  {:>14.1} / {} / {:<12}  {:>8}  {:>16.0}  {:>16.1} / {:<17.1}  {}\n",
            size,
            r.mean_frames,
            min,
            max,
            r.lengths.len(),
            r.burst_pps,
            r.implied_buffer_s * 1e6,
            r.corrected_buffer_s * 1e6,
            note
        ));
    }
    s
}

/// One point of the white-box / black-box cross-check.
#[derive(Debug, Clone, Serialize)]
pub struct CrossPoint {
    pub delay_ns: f64,
    /// The forwarder's measured ticks per packet at zero delay (rx, work,
    /// tx), from its own TSC reads during the zero-delay search.
    pub base_ticks: f64,
    /// The device CPU's ticks per packet outside the forwarder's own
    /// sections at zero delay (its receive in softirq; NaN: not measured),
    /// part of the prediction beside `base_ticks`.
    pub kernel_ticks: f64,
    /// hz / (base ticks + delay ticks).
    pub predicted_pps: f64,
    pub measured_pps: f64,
    pub error_pct: f64,
    /// Highest rate the tester delivered with no device (loss-free).
    pub tester_pps: f64,
    /// "device", "tester" or "close".
    pub bound: String,
    pub verdict: String,
    pub confirmed: bool,
    /// How far the device's buffer can have carried the NDR trial, % of
    /// the rate ([`buffer_inflation_pct`]).
    pub buffer_inflation_pct: f64,
    /// Where the first losses were in most of the point's searches.
    pub fail_loss_where: String,
    pub tester_limited: bool,
}

impl SearchResult {
    /// The forwarder's own rx + work + tx ticks per packet in the
    /// confirmation trial (None for a device that does not report them).
    pub fn fwd_ticks(&self) -> Option<f64> {
        let t = self.final_trial.as_ref()?;
        Some(t.fwd_ticks_rx? + t.fwd_ticks_work? + t.fwd_ticks_tx?)
    }

    /// The device CPU's ticks per packet outside the forwarder's own
    /// sections in the confirmation trial ([`TrialResult::fwd_ticks_kernel`]).
    pub fn kernel_ticks(&self) -> Option<f64> {
        self.final_trial.as_ref()?.fwd_ticks_kernel
    }

    /// [`buffer_inflation_pct`] of the confirmation trial.
    pub fn buffer_inflation_pct(&self) -> f64 {
        self.final_trial.as_ref().map_or(f64::NAN, |t| {
            buffer_inflation_pct(t.latency.min, t.latency.max, t.duration_s)
        })
    }
}

/// Folds one delay's searches (one per round) into its cross-check point:
/// the median NDR with its interval (returned beside the point), the
/// median buffer share, where most searches first lost frames, and the
/// verdict against the model's `predicted` rate and the tester's own
/// ceiling.
pub fn cross_point(
    delay_ns: f64,
    base_ticks: f64,
    predicted_pps: f64,
    rounds: &[SearchResult],
    tester_pps: f64,
    duration_s: f64,
) -> (CrossPoint, Estimate) {
    // A search that measured nothing (no rate passed, or the tester could
    // not keep its schedule) has no rate: it is left out, not taken as 0.
    let rates: Vec<f64> = rounds
        .iter()
        .map(|r| r.rate_pps)
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    let est = Estimate::from_samples(&rates);
    let shares: Vec<f64> = rounds.iter().map(|r| r.buffer_inflation_pct()).collect();
    let inflation = Estimate::from_samples(&shares).median;
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for r in rounds {
        match counts.iter_mut().find(|x| x.0 == r.fail_loss_where) {
            Some(x) => x.1 += 1,
            None => counts.push((&r.fail_loss_where, 1)),
        }
    }
    let fail_where = counts
        .iter()
        .max_by_key(|x| x.1)
        .map(|x| x.0.to_owned())
        .unwrap_or_default();
    let (bound, verdict) = classify(
        predicted_pps,
        est.median,
        tester_pps,
        &fail_where,
        inflation,
        duration_s,
    );
    let p = CrossPoint {
        delay_ns,
        base_ticks,
        kernel_ticks: f64::NAN,
        predicted_pps,
        measured_pps: est.median,
        error_pct: (est.median / predicted_pps - 1.0) * 100.0,
        tester_pps,
        bound,
        verdict,
        confirmed: rounds.iter().all(|r| r.confirmed),
        buffer_inflation_pct: inflation,
        fail_loss_where: fail_where,
        tester_limited: rounds.iter().any(|r| r.tester_limited),
    };
    (p, est)
}

/// How much a device's buffer can have inflated a loss-free trial, in %
/// of its rate: the spread of one-way latency within the trial (max − min,
/// the longest any frame waited beyond the emptiest path) over the trial's
/// length. A device of capacity C offered R > C for T seconds builds a
/// queue of (R − C)·T frames and its last frame waits (R/C − 1)·T, so a
/// loss-free trial at R says only that C ≥ R / (1 + wait/T): with a deep
/// buffer and short trials the NDR is the buffer's, not the device's
/// (RFC 2544 asks for 60 s trials for this reason).
pub fn buffer_inflation_pct(latency_min_ns: f64, latency_max_ns: f64, duration_s: f64) -> f64 {
    if duration_s.is_nan()
        || duration_s <= 0.0
        || !latency_min_ns.is_finite()
        || !latency_max_ns.is_finite()
    {
        return f64::NAN;
    }
    ((latency_max_ns - latency_min_ns).max(0.0) / 1e9) / duration_s * 100.0
}

/// Above this [`buffer_inflation_pct`] a device-bound point is called
/// buffer-carried instead of compared with the model.
pub const BUFFER_INFLATION_LIMIT_PCT: f64 = 3.0;

/// The cost model's prediction: one core's rate at `base_ticks` + delay.
pub fn predict_pps(hz: f64, base_ticks: f64, delay_ns: f64) -> f64 {
    hz / (base_ticks + delay_ns * hz / 1e9)
}

/// Which side bounds a point: the device when its predicted capacity is
/// well below what the tester delivers without a device (under 80% of
/// it), the tester when the prediction is above the tester's ceiling, and
/// "close" in between, where neither can be told apart.
///
/// Whatever the capacities say, a search whose first loss was in the
/// sink's ring or the host's input queue (`fail_where`) was bounded by the
/// tester or the host: the device never dropped a frame there.
///
/// A device-bound point whose NDR trial the device's buffer can have
/// carried by more than [`BUFFER_INFLATION_LIMIT_PCT`] (`inflation_pct`,
/// see [`buffer_inflation_pct`]) is said to be so, with the trial length
/// that would measure the device instead.
pub fn classify(
    predicted: f64,
    measured: f64,
    tester: f64,
    fail_where: &str,
    inflation_pct: f64,
    duration_s: f64,
) -> (String, String) {
    let err = (measured / predicted - 1.0) * 100.0;
    if !(measured.is_finite() && measured > 0.0) {
        return (
            "none".to_owned(),
            "not measured: no search at this point found a rate the device passed with the tester on schedule".to_owned(),
        );
    }
    if !(tester.is_finite() && tester > 0.0) {
        return (
            "unknown".to_owned(),
            "not judged: the tester alone (no device) was not measured, so whether the device or the tester sets this figure is unknown".to_owned(),
        );
    }
    if fail_where == "sink ring" {
        return (
            "tester".to_owned(),
            format!("tester-bound: above {:.2} Mpps frames were lost in the sink's receive ring, not in the device", measured / 1e6),
        );
    }
    if fail_where == "host backlog" {
        return (
            "host".to_owned(),
            format!("host-bound: above {:.2} Mpps frames were lost in the kernel's per-CPU input queue (net.core.netdev_max_backlog), not in the device", measured / 1e6),
        );
    }
    if predicted < 0.8 * tester {
        let v = if inflation_pct > BUFFER_INFLATION_LIMIT_PCT {
            let wait_s = inflation_pct / 100.0 * duration_s;
            format!(
                "device-bound, but its buffer carried the trial: frames waited up to {:.1} ms of {:.2} s, so the NDR ({err:+.1}% off the model) can be up to {inflation_pct:.0}% above what the device sustains; trials of {:.0} s or more would measure the device",
                wait_s * 1e3,
                duration_s,
                (wait_s * 100.0 / BUFFER_INFLATION_LIMIT_PCT).ceil().max(1.0)
            )
        } else if err.abs() <= 10.0 {
            format!("device-bound: the black-box NDR matches the model within {:.1}% — it can be trusted", err.abs())
        } else {
            format!("device-bound but the NDR is {err:+.1}% off the model: the host (scheduling, the path's own costs) is in the figure")
        };
        ("device".to_owned(), v)
    } else if predicted > 1.25 * tester {
        (
            "tester".to_owned(),
            format!(
                "tester-bound: the device could do {:.2} Mpps, the generator/sink/host delivers {:.2} Mpps — the black-box figure measures the tester",
                predicted / 1e6,
                tester / 1e6
            ),
        )
    } else {
        (
            "close".to_owned(),
            "device and tester capacities are within 25%: the figure is a mix of both".to_owned(),
        )
    }
}

/// `commbench pipeline rfc2544`: per frame size, the NDR (and PDR)
/// searches, the latency at and below the NDR, the back-to-back test and
/// the frame-loss ladder, on one device.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub offer: Offer,
    /// Frame sizes, one pass each.
    pub sizes: Vec<Sizes>,
    /// Highest rate tried.
    pub max_rate: Rate,
    pub resolution_pct: f64,
    /// Also search the PDR with this loss, %.
    pub pdr_loss_pct: Option<f64>,
    pub max_trials: usize,
    /// Frame-loss ladder steps (0: none).
    pub ladder: usize,
    /// Searches per frame size and kind.
    pub repeat: usize,
    /// Latency ladder steps below the NDR (0: at the NDR only).
    pub latency_ladder: usize,
    /// Back-to-back test up to this many frames (None: not run).
    pub back_to_back: Option<u64>,
    /// Back-to-back searches per frame size.
    pub b2b_repeat: usize,
    /// MLRsearch (the default) or RFC 2544's binary search.
    pub method: Method,
    /// MLRsearch's goals (empty: [`DEFAULT_GOALS`]).
    pub goals: Vec<Goal>,
}

impl RunSpec {
    /// The goals MLRsearch searches for.
    pub fn goals(&self) -> Vec<Goal> {
        if self.goals.is_empty() {
            DEFAULT_GOALS.to_vec()
        } else {
            self.goals.clone()
        }
    }

    /// Refuses settings of the other search.
    pub fn validate(&self) -> Result<(), SpecError> {
        match (self.method, self.pdr_loss_pct) {
            (Method::Rfc2544, _) if !self.goals.is_empty() => Err(SpecError::GoalsNeedMlr),
            (Method::Mlr, Some(p)) => Err(SpecError::PdrNeedsRfc2544(p)),
            _ => Ok(()),
        }
    }
}

/// What an RFC 2544 run found, for its table.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// Every search, by frame size.
    pub searches: Vec<(String, SearchResult)>,
    /// Every back-to-back test, by frame size.
    pub b2b: Vec<(String, B2bResult)>,
    /// Ctrl-C cut the run: its records are partial.
    pub interrupted: bool,
}

/// Runs `s` into `rec`: per frame size the trials of every search
/// (`rfc2544-trial`), each search (`rfc2544-ndr`/`-pdr`, folded into one
/// record when repeated), the latency ladder (`rfc2544-latency`), the
/// back-to-back test (`rfc2544-b2b`) and the loss ladder (`rfc2544-loss`);
/// the loopback bias last.
pub fn run(s: &RunSpec, rec: &mut Recorder) -> Result<RunReport, PipelineError> {
    s.validate()
        .map_err(|e| PipelineError::Config(e.to_string()))?;
    let conditions = commbench_core::rusage::Conditions::begin();
    let start = rec.records().len();
    let r = run_sizes(s, rec);
    s.offer.cpus.stamp(&conditions, rec, start);
    r
}

fn run_sizes(s: &RunSpec, rec: &mut Recorder) -> Result<RunReport, PipelineError> {
    let mut spec0 = s.offer.trial.clone();
    if let Some(z) = s.sizes.first() {
        spec0.sizes = z.clone();
    }
    let bias = offer_bias(
        &Offer {
            trial: spec0,
            ..s.offer.clone()
        },
        rec,
    )?;
    let mut rep = RunReport::default();
    {
        let mut b = Bench::new(&s.offer.dut, s.offer.cpus.clone())?;
        for sz in &s.sizes {
            run_size(s, sz, &mut b, &bias, rec, &mut rep)?;
        }
    }
    if let Some(b) = bias {
        rec.push(b);
    }
    rep.interrupted = super::interrupted();
    Ok(rep)
}

/// One frame size of [`run`].
fn run_size(
    s: &RunSpec,
    sz: &Sizes,
    b: &mut Bench,
    bias: &Option<Record>,
    rec: &mut Recorder,
    rep: &mut RunReport,
) -> Result<(), PipelineError> {
    let dut = s.offer.dut.name();
    let mut trial = s.offer.trial.clone();
    trial.sizes = sz.clone();
    let ss = SearchSpec {
        max_pps: s.max_rate.pps(sz.mean()),
        trial,
        resolution_pct: s.resolution_pct,
        pdr_loss_pct: s.pdr_loss_pct,
        max_trials: s.max_trials,
        ladder_steps: s.ladder,
    };
    let groups = match s.method {
        Method::Rfc2544 => classic_runs(s, &ss, sz, b, rec)?,
        Method::Mlr => mlr_runs(s, &ss, sz, b, rec)?,
    };
    let mut ndr_pps = None;
    for mut reps in groups {
        for (r, x) in &mut reps {
            bias_metrics(x, bias);
            rep.searches.push((sz.name.clone(), r.clone()));
        }
        if ndr_pps.is_none() && reps.first().is_some_and(|(r, _)| r.kind == "ndr") {
            let rates: Vec<f64> = reps
                .iter()
                .map(|(r, _)| r.rate_pps)
                .filter(|x| x.is_finite())
                .collect();
            ndr_pps = (!rates.is_empty())
                .then(|| Estimate::from_samples(&rates).median)
                .filter(|x| *x > 0.0);
        }
        if s.repeat > 1 {
            if let Some(f) = fold_repeats(&reps) {
                rec.push(f);
            }
        } else {
            for (_, x) in reps {
                rec.push(x);
            }
        }
    }
    if let (Some(ndr), true) = (ndr_pps, s.latency_ladder > 0) {
        let l = latency_ladder(b, &ss, ndr, s.latency_ladder, |t| {
            rec.progress(&format!(
                "rfc2544 latency {} B: {:.0} pps → p99 {:.1} µs",
                sz.name,
                t.offered_pps,
                t.latency.p99 / 1e3
            ));
        })?;
        for (pct, t) in l {
            let mut x = t.record("rfc2544-latency");
            x.push_param("load_pct", pct);
            x.push_param("ndr_pps", ndr);
            bias_metrics(&mut x, bias);
            rec.push(x);
        }
    }
    if let Some(max_frames) = s.back_to_back {
        let bs = B2bSpec {
            trial: ss.trial.clone(),
            max_frames,
            repeats: s.b2b_repeat,
            resolution_pct: s.resolution_pct,
            max_trials: s.max_trials,
            throughput_pps: ndr_pps,
        };
        let r = back_to_back(b, &bs, |t| {
            rec.progress(&format!(
                "rfc2544 back-to-back {} B: burst of {} → lost {}",
                sz.name, t.sent, t.lost
            ));
        })?;
        rec.push(b2b_record(&r, &bs, &dut, &sz.name));
        rep.b2b.push((sz.name.clone(), r));
    }
    if s.ladder > 0 {
        let l = ladder(b, &ss, |t| {
            rec.progress(&format!(
                "rfc2544 frame loss {} B: {:.0} pps → {:.4}%",
                sz.name, t.offered_pps, t.loss_pct
            ));
        })?;
        for t in l {
            let mut x = t.record("rfc2544-loss");
            x.push_param("load_pct", t.offered_pps / ss.max_pps * 100.0);
            rec.push(x);
        }
    }
    Ok(())
}

/// RFC 2544's searches of one frame size: per kind (NDR, PDR) its
/// repeats, each with its record; the trials recorded as they go.
fn classic_runs(
    s: &RunSpec,
    ss: &SearchSpec,
    sz: &Sizes,
    b: &mut Bench,
    rec: &mut Recorder,
) -> io::Result<Vec<Vec<(SearchResult, Record)>>> {
    let dut = s.offer.dut.name();
    let mut kinds: Vec<(&str, f64)> = vec![("ndr", 0.0)];
    if let Some(p) = s.pdr_loss_pct {
        kinds.push(("pdr", p));
    }
    let mut groups = Vec::new();
    for (kind, loss) in kinds {
        let mut reps = Vec::new();
        for i in 0..s.repeat {
            if super::interrupted() {
                break;
            }
            let mut trials = Vec::new();
            let r = search(b, ss, kind, loss, 0.0, |t| {
                rec.progress(&format!(
                    "rfc2544 {kind} {} B: {:.0} pps → loss {:.4}%{}",
                    sz.name,
                    t.offered_pps,
                    t.loss_pct,
                    if t.behind_schedule {
                        " (generator behind)"
                    } else {
                        ""
                    }
                ));
                trials.push(t.record("rfc2544-trial"));
            })?;
            for mut x in trials {
                x.push_param("search", kind);
                x.push_param("repeat", i);
                rec.push(x);
            }
            let x = search_record(&r, ss, &dut, &sz.name);
            reps.push((r, x));
        }
        groups.push(reps);
    }
    Ok(groups)
}

/// MLRsearch of one frame size: `repeat` searches of every goal at once;
/// per goal its repeats, each with its record; every trial recorded with
/// `method: mlr`, whether it counted and its trouble.
fn mlr_runs(
    s: &RunSpec,
    ss: &SearchSpec,
    sz: &Sizes,
    b: &mut Bench,
    rec: &mut Recorder,
) -> io::Result<Vec<Vec<(SearchResult, Record)>>> {
    let dut = s.offer.dut.name();
    let goals = s.goals();
    let mut groups: Vec<Vec<(SearchResult, Record)>> = vec![Vec::new(); goals.len()];
    for i in 0..s.repeat {
        if super::interrupted() {
            break;
        }
        let mut trials = Vec::new();
        let (_, results) = mlr_search(
            b,
            &ss.trial,
            &goals,
            ss.max_pps,
            MLR_BUDGET_S,
            MLR_MAX_TRIALS,
            |t, trouble| {
                rec.progress(&format!(
                    "mlrsearch {} B: {:.0} pps for {:.2} s → loss {:.4}%{}",
                    sz.name,
                    t.offered_pps,
                    t.duration_s,
                    t.loss_pct,
                    trouble.map_or(String::new(), |w| format!(" (not counted: {w})"))
                ));
                let mut x = t.record("rfc2544-trial");
                x.push_metric("counted", trouble.is_none());
                x.push_metric("trouble", trouble);
                trials.push(x);
            },
        )?;
        for mut x in trials {
            x.push_param("method", "mlr");
            x.push_param("repeat", i);
            rec.push(x);
        }
        for (g, r) in groups.iter_mut().zip(results) {
            let x = search_record(&r, ss, &dut, &sz.name);
            g.push((r, x));
        }
    }
    Ok(groups)
}

/// The table of a run: the searches, then the back-to-back tests.
pub fn run_table(r: &RunReport) -> String {
    let mut t = table(&r.searches);
    if !r.b2b.is_empty() {
        t.push('\n');
        t.push_str(&b2b_table(&r.b2b));
    }
    t
}

/// The frame-size list of RFC 2544 for Ethernet.
pub const RFC2544_SIZES: [u32; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// Parses `64,128` or `rfc2544` (all seven) or `imix`.
pub fn parse_size_list(s: &str) -> Result<Vec<Sizes>, super::SpecError> {
    if s == "rfc2544" {
        return Ok(RFC2544_SIZES.iter().map(|&z| Sizes::fixed(z)).collect());
    }
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(super::pace::parse_sizes)
        .collect()
}

/// The frame sizes of an RFC 2544 run: at least one.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeList(pub Vec<Sizes>);

impl SizeList {
    /// [`parse_size_list`], refusing an empty list.
    pub fn parse(s: &str) -> Result<SizeList, super::SpecError> {
        let v = parse_size_list(s)?;
        if v.is_empty() {
            return Err(super::SpecError::NoSizes);
        }
        Ok(SizeList(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_model_reproduces_the_seed_budget() {
        // 134 cycles per packet at 2 GHz is 14.9 Mpps (the seed's figure).
        let p = predict_pps(2e9, 134.0, 0.0);
        assert!((p - 14.925e6).abs() < 1e4, "{p}");
        // 67.2 ns of delay on top of 0 ticks: 1 / 67.2 ns.
        assert!((predict_pps(2e9, 0.0, 67.2) - 14.88e6).abs() < 1e4);
    }

    #[test]
    fn points_are_told_device_or_tester_bound() {
        // The device (1 Mpps) is far below the tester (5 Mpps).
        let (b, v) = classify(1e6, 0.97e6, 5e6, "device", 0.1, 2.0);
        assert_eq!(b, "device");
        assert!(v.contains("trusted"), "{v}");
        let (b, v) = classify(1e6, 0.5e6, 5e6, "device rx ring", 0.1, 2.0);
        assert_eq!(b, "device");
        assert!(v.contains("off the model"), "{v}");
        // The device could do 20 Mpps, the tester delivers 1.
        let (b, v) = classify(20e6, 1e6, 1e6, "device", 0.1, 2.0);
        assert_eq!(b, "tester");
        assert!(v.contains("measures the tester"), "{v}");
        assert_eq!(classify(1e6, 1e6, 1.1e6, "", 0.1, 2.0).0, "close");
        // Nothing measured for the tester alone, or at the point: said in
        // words, never "close" of a NaN.
        let (b, v) = classify(1e6, 0.97e6, f64::NAN, "device", 0.1, 2.0);
        assert_eq!(b, "unknown");
        assert!(v.starts_with("not judged"), "{v}");
        let (b, v) = classify(1e6, f64::NAN, 5e6, "", 0.1, 2.0);
        assert_eq!(b, "none");
        assert!(v.starts_with("not measured"), "{v}");
        // Where the frames were lost overrides the capacities.
        let (b, v) = classify(1e6, 0.5e6, 5e6, "sink ring", 0.1, 2.0);
        assert_eq!(b, "tester");
        assert!(v.contains("sink's receive ring"), "{v}");
        assert_eq!(
            classify(1e6, 0.5e6, 5e6, "host backlog", 0.1, 2.0).0,
            "host"
        );
        // 1.5x the model, but frames waited 250 ms of a 0.5 s trial: the
        // buffer's figure, and trials of 9 s would do.
        let (b, v) = classify(1e6, 1.5e6, 5e6, "device", 50.0, 0.5);
        assert_eq!(b, "device");
        assert!(v.contains("buffer carried the trial"), "{v}");
        assert!(v.contains("250.0 ms of 0.50 s"), "{v}");
        assert!(v.contains("trials of 9 s"), "{v}");
    }

    #[test]
    fn buffer_inflation_is_the_waits_spread_over_the_trial() {
        // Capacity 1 Mpps offered 1.5 Mpps for 1 s: the last frame waits
        // 0.5 s, the NDR trial says only C >= 1.5 / 1.5.
        let p = buffer_inflation_pct(20e3, 0.5e9 + 20e3, 1.0);
        assert!((p - 50.0).abs() < 1e-9, "{p}");
        assert_eq!(buffer_inflation_pct(30e3, 10e3, 1.0), 0.0);
        assert!(buffer_inflation_pct(1.0, 2.0, 0.0).is_nan());
        assert!(buffer_inflation_pct(f64::NAN, 2.0, 1.0).is_nan());
    }

    #[test]
    fn only_a_ceiling_below_the_devices_failure_limits_the_search() {
        // Behind at 1.5 Mpps, the device lost frames at 0.5: the device's.
        assert!(!limited_by_tester(true, 1.5e6, 0.5e6));
        // Behind at 0.4 Mpps, the device never failed: the tester's.
        assert!(limited_by_tester(true, 0.4e6, f64::INFINITY));
        // Behind at 0.4, device failed at 0.45: the NDR between is unknown.
        assert!(limited_by_tester(true, 0.4e6, 0.45e6));
        // Never behind.
        assert!(!limited_by_tester(false, 1e6, f64::INFINITY));
    }

    #[test]
    fn rfc9004_buffer_times() {
        // 10,000 frames arriving at 1 Mpps last 10 ms (implied); a device
        // forwarding 0.4 Mpps meanwhile sent 4,000 of them, so 6,000 were
        // held: 6 ms at the burst rate (corrected).
        let (i, c) = buffer_times(10_000.0, 1e6, Some(0.4e6));
        assert!((i - 0.010).abs() < 1e-12, "{i}");
        assert!((c - 0.006).abs() < 1e-12, "{c}");
        // A device as fast as the burst holds nothing.
        assert_eq!(buffer_times(10_000.0, 1e6, Some(2e6)).1, 0.0);
        assert!(buffer_times(10_000.0, 1e6, None).1.is_nan());
    }

    fn mlr_result(lower: Option<f64>, note: &str) -> SearchResult {
        let goal = DEFAULT_GOALS[0];
        SearchResult {
            kind: "ndr".into(),
            loss_allowed_pct: 0.0,
            rate_pps: lower.unwrap_or(f64::NAN),
            fail_pps: f64::NAN,
            confirmed: lower.is_some(),
            tester_limited: lower.is_none(),
            tester_ceiling_pps: 1e5,
            fail_loss_where: String::new(),
            trials: 20,
            final_trial: None,
            device: DeviceCpu::default(),
            method: Method::Mlr,
            goal: Some(GoalResult {
                goal,
                lower_pps: lower,
                upper_pps: lower.map(|l| l * 1.01),
                conditional_pps: lower,
                regular: lower.is_some(),
                decided: if lower.is_some() {
                    Decided::Width
                } else {
                    Decided::HostTrouble
                },
                lower_trials: 2,
                upper_trials: 2,
                note: note.into(),
            }),
            troubled: 0,
            search_s: 30.0,
        }
    }

    fn folded(v: Vec<SearchResult>) -> Record {
        let spec = SearchSpec {
            trial: TrialSpec::default(),
            max_pps: 1e6,
            resolution_pct: 1.0,
            pdr_loss_pct: None,
            max_trials: 20,
            ladder_steps: 0,
        };
        let v: Vec<(SearchResult, Record)> = v
            .into_iter()
            .map(|r| {
                let x = search_record(&r, &spec, "l2fwd", "64");
                (r, x)
            })
            .collect();
        fold_repeats(&v).unwrap()
    }

    #[test]
    fn repeated_mlr_searches_fold_into_a_median_with_its_interval_and_cv() {
        let none = "not measured: the tester/host could not keep 50.0 kpps on schedule";
        let r = folded(vec![
            mlr_result(Some(100e3), ""),
            mlr_result(Some(102e3), ""),
            mlr_result(None, none),
        ]);
        assert_eq!(r.metric_f64("rate_pps"), Some(101e3));
        assert_eq!(r.metric_f64("conditional_throughput_pps"), Some(101e3));
        assert_eq!(r.metric_f64("measured_repeats"), Some(2.0));
        assert!((r.metric_f64("rate_cv_pct").unwrap() - 1.0 / 1.01).abs() < 1e-9);
        assert_eq!(r.metrics["decided"], "mixed");
        assert_eq!(r.metrics["regular"], false);
        let note = r.metrics["note"].as_str().unwrap();
        assert!(
            note.starts_with("1 of 3 searches measured nothing: not measured"),
            "{note}"
        );
        // None measured: null, never 0, and said so.
        let r = folded(vec![mlr_result(None, none), mlr_result(None, none)]);
        assert!(r.metrics["rate_pps"].is_null(), "{:?}", r.metrics);
        let note = r.metrics["note"].as_str().unwrap();
        assert!(
            note.starts_with("not measured in any of 2 searches"),
            "{note}"
        );
    }

    #[test]
    fn the_mlr_table_says_not_measured_and_sums_up_repeats() {
        let rows: Vec<(String, SearchResult)> = vec![
            ("64".into(), mlr_result(Some(100e3), "")),
            ("64".into(), mlr_result(Some(102e3), "")),
            (
                "64".into(),
                mlr_result(None, "not measured: the host was busy"),
            ),
        ];
        let t = table(&rows);
        assert!(t.contains("not measured"), "{t}");
        assert!(
            t.contains("64 B 1f4d0l50e1w: not measured: the host was busy"),
            "{t}"
        );
        assert!(
            t.contains(
                "64 B 1f4d0l50e1w over 3 searches (median [95% interval]): lower bound 101000 pps"
            ),
            "{t}"
        );
        assert!(
            t.contains("64 B: MLRsearch, 20 trials (0 not counted"),
            "{t}"
        );
    }

    #[test]
    fn the_repeats_line_printed_nan_for_an_interval_of_one_sample() {
        // Two searches, one measured: one sample has no interval and no
        // CV; the line said "[100000, 100000], CV NaN%".
        let rows: Vec<(String, SearchResult)> = vec![
            ("64".into(), mlr_result(Some(100e3), "")),
            (
                "64".into(),
                mlr_result(None, "not measured: the host was busy"),
            ),
        ];
        let t = table(&rows);
        assert!(!t.contains("NaN") && !t.contains("nan"), "{t}");
        assert!(t.contains("lower bound 100000 pps [-, -], CV -;"), "{t}");
        assert_eq!(or_dash(f64::NAN, 0), "-");
        assert_eq!(or_dash(f64::INFINITY, 1), "-");
        assert_eq!(or_dash(1.25, 1), "1.2");
    }

    #[test]
    fn size_lists() {
        assert_eq!(parse_size_list("rfc2544").unwrap().len(), 7);
        assert_eq!(parse_size_list("64,imix").unwrap()[1].name, "imix");
        assert!(parse_size_list("64,x").is_err());
    }

    /// One device's NDR read 101k, 52k or 28k pps as other work came and
    /// went, and said nothing of it: the search record now gives the
    /// device's own CPU per frame, its share of its CPU, the rate per
    /// device CPU-second (which stays put when the raw rate halves
    /// because other work took half the CPU), other work's share and a
    /// flag over 5%; and says when the device's CPU was not measured.
    #[test]
    fn a_search_record_gives_the_devices_cpu_and_flags_a_shared_one() {
        let trial = |own_ms: f64, window_ms: f64, frames: f64, others: f64| DeviceSample {
            own_cpu_ms: Some(own_ms),
            window_ms: Some(window_ms),
            own_ns_per_frame: Some(own_ms * 1e6 / frames),
            others_pct: Some(others),
        };
        // Quiet: 100k pps with the device's whole CPU.
        let quiet: Vec<DeviceSample> = (0..5).map(|_| trial(1000.0, 1000.0, 1e5, 0.5)).collect();
        // Shared: half the CPU taken, 50k pps in half the CPU time.
        let busy: Vec<DeviceSample> = (0..5).map(|_| trial(500.0, 1000.0, 5e4, 48.0)).collect();
        let rec = |trials: &[DeviceSample], rate: f64| {
            let d = DeviceCpu::from_samples(trials.iter().copied(), trials.iter().copied());
            let mut r = Record::new("pipeline", "rfc2544-ndr");
            d.add_to(&mut r, rate);
            r
        };
        let (q, b) = (rec(&quiet, 1e5), rec(&busy, 5e4));
        let per = |r: &Record| r.metric_f64("rate_per_device_cpu_s").unwrap();
        assert!((per(&q) - 1e5).abs() < 1.0 && (per(&b) - 1e5).abs() < 1.0);
        assert_eq!(q.metrics["device_cpu_shared"], serde_json::json!(false));
        assert_eq!(b.metrics["device_cpu_shared"], serde_json::json!(true));
        assert!((b.metric_f64("device_cpu_others_pct").unwrap() - 48.0).abs() < 1e-9);
        assert!((q.metric_f64("device_cpu_ns_per_frame").unwrap() - 10_000.0).abs() < 1e-6);
        assert!(q.metrics.contains_key("device_cpu_ns_per_frame_lo"));
        // A device on another host: said, never a 0.
        let none = rec(&[DeviceSample::default()], 1e5);
        assert!(none.metrics["device_cpu_note"]
            .as_str()
            .unwrap()
            .starts_with("device CPU not measured"));
        assert!(none.metric_f64("rate_per_device_cpu_s").is_none());
    }
}
