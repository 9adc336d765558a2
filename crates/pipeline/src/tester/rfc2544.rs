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
//!
//! Parts: the searches and their records (here), the back-to-back test
//! (`b2b.rs`), the tables (`table.rs`), the cross-check's arithmetic
//! (`crosspoint.rs`) and the `rfc2544` command's run (`run.rs`).

mod b2b;
mod crosspoint;
mod run;
mod table;
#[cfg(test)]
mod tests;

pub use b2b::{b2b_record, back_to_back, buffer_times, B2bResult, B2bSpec};
pub use crosspoint::{
    buffer_inflation_pct, classify, cross_point, predict_pps, CrossPoint,
    BUFFER_INFLATION_LIMIT_PCT,
};
pub use run::{parse_size_list, run, run_table, RunReport, RunSpec, SizeList, RFC2544_SIZES};
pub use table::{b2b_table, device_line, mlr_table, table};

use super::mlrsearch::controller::{
    self as mlr, BackOff, Decided, GoalResult, HostCost, Measured, Measurer, SearchOutcome,
};
use super::mlrsearch::Goal;
use super::pace::Rate;
use super::{Bench, SpecError, TrialResult, TrialSpec};
use commbench_core::estimate::{attach, Estimate};
use commbench_core::record::Record;
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

/// MLRsearch's back-off before a trial the host spoiled is run again:
/// the stall monitor read every [`BACKOFF_POLL`] until a quiet stretch of
/// [`BACKOFF_QUIET`] (no steal, no wake-up later than
/// [`BACKOFF_QUIET_STALL_MS`]), at most [`BACKOFF_MAX`] a wait and
/// [`MLR_BACKOFF_BUDGET_S`] a search. Measured on this project's 2-vCPU
/// VM (2026-11-29, /proc/stat steal every 10 ms for 180 s, both CPUs
/// busy): steal came in 10-30 ms blips, 0.14% of the CPU time; merging
/// gaps under 0.5 s, spells lasted 0.1 s (median), 0.4 s (p90), 1.2 s at
/// most, a median 4.3 s apart. A quiet second outlasts nine in ten.
pub const BACKOFF_QUIET: Duration = Duration::from_secs(1);
pub const BACKOFF_POLL: Duration = Duration::from_millis(100);
pub const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// A window whose latest wake-up was later than this is not quiet: the
/// real-time monitor's worst wake-up in 100 ms windows was 0.13 ms at the
/// median, 1.0 ms at p90 and 9.3 ms at p99 with another session building
/// (2026-11-29, 150 s); 5 ms at 65 kpps is 325 frames.
pub const BACKOFF_QUIET_STALL_MS: f64 = 5.0;
/// Back-off waits at most per MLRsearch, s.
pub const MLR_BACKOFF_BUDGET_S: f64 = 60.0;

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
    /// MLRsearch: what the host's trouble cost the search (spoiled
    /// trials, back-offs, their waits).
    pub host: HostCost,
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
        host: HostCost::default(),
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
        host_retries: mlr::HOST_RETRIES,
        backoff_budget_s: MLR_BACKOFF_BUDGET_S,
        budget_s,
    };
    let start = Instant::now();
    let mut m = BenchMeasurer {
        b,
        trial,
        log: &mut log,
        counted: Vec::new(),
        last_quiet: false,
        shared_left: mlr::TROUBLE_REPEATS * mlr::HOST_RETRIES,
    };
    let out = mlr::search(&spec, &mut m)?;
    // The counted trials by load, for the latency at the lower bound and
    // where the frames were lost at the upper one.
    let counted = m.counted;
    let search_s = start.elapsed().as_secs_f64();
    let results = out
        .goals
        .iter()
        .map(|g| goal_result(g, &out, &counted, search_s))
        .collect();
    Ok((out, results))
}

/// MLRsearch's trials on the bench.
struct BenchMeasurer<'a, L> {
    b: &'a mut Bench,
    trial: &'a TrialSpec,
    log: &'a mut L,
    counted: Vec<(f64, TrialResult)>,
    /// Whether the last trial's own window was quiet (no steal, no late
    /// wake-up): its trouble was then not the host's, and waiting for a
    /// quiet host changes nothing (a generator that cannot keep
    /// `--lag-bound-us` waited out the whole budget).
    last_quiet: bool,
    /// Trials that may still be put on other work on the device's CPU
    /// ([`mlr::other_work`]): as many as the search goes on past in runs
    /// of spoiled trials. Past them the device shared its CPU for good,
    /// and a trial counts as it would without the evidence: its loss the
    /// device's, the result flagged "device CPU shared" (a false tester's
    /// ceiling otherwise, with no upper bound, beside a busy loop on each
    /// CPU).
    shared_left: usize,
}

impl<L: FnMut(&TrialResult, Option<&str>)> Measurer for &mut BenchMeasurer<'_, L> {
    type Error = io::Error;

    fn trial(&mut self, load: f64, duration_s: f64) -> io::Result<Option<Measured>> {
        if super::interrupted() {
            return Ok(None);
        }
        let mut t = self.trial.clone();
        t.rate = Rate::Pps(load);
        t.duration = Duration::from_secs_f64(duration_s);
        let t0 = Instant::now();
        let r = self.b.trial(&t)?;
        let mut trouble = mlr::trouble_of(&r);
        let shared = mlr::other_work(
            r.lost,
            r.offered_pps,
            r.dut_cpu_others_pct,
            r.dut_cpu_window_ms,
        )
        .is_some();
        if shared && trouble.as_ref().is_some_and(|t| t.host) {
            match self.shared_left.checked_sub(1) {
                Some(n) => self.shared_left = n,
                None => trouble = None,
            }
        }
        self.last_quiet = r.steal_ms.is_some_and(|s| s <= 0.0)
            && r.host_stall_ms.is_some_and(|w| w < BACKOFF_QUIET_STALL_MS);
        (self.log)(&r, trouble.as_ref().map(|t| t.why.as_str()));
        let m = Measured {
            loss_ratio: loss_ratio(&r),
            duration_s,
            wall_s: t0.elapsed().as_secs_f64(),
            kept_schedule: !r.behind_schedule,
            trouble,
        };
        if m.trouble.is_none() {
            self.counted.push((load, r));
        }
        Ok(Some(m))
    }

    /// Waits for the stall monitor to read the host quiet (see
    /// [`BACKOFF_QUIET`]); without a monitor, or after a trial whose own
    /// window was quiet, waits for nothing.
    fn back_off(&mut self) -> io::Result<Option<BackOff>> {
        if super::interrupted() {
            return Ok(None);
        }
        if self.last_quiet {
            return Ok(Some(BackOff::default()));
        }
        let Some(m) = self.b.stall_monitor_mut() else {
            return Ok(Some(BackOff::default()));
        };
        let q = commbench_core::stall::QuietSpec {
            poll: BACKOFF_POLL,
            quiet_for: BACKOFF_QUIET,
            max: BACKOFF_MAX,
        };
        let w = m.wait_quiet(q, quiet_window, super::interrupted);
        if super::interrupted() {
            return Ok(None);
        }
        Ok(Some(BackOff {
            waited_s: w.waited.as_secs_f64(),
            quiet: Some(w.quiet),
        }))
    }
}

/// A stall monitor window in which the host stole nothing and held no
/// wake-up back [`BACKOFF_QUIET_STALL_MS`] or more.
pub fn quiet_window(w: &commbench_core::stall::StallWindow) -> bool {
    w.steal_ms.unwrap_or(0.0) <= 0.0 && w.worst_ms < BACKOFF_QUIET_STALL_MS
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
        host: out.host.clone(),
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
    if s.method == Method::Mlr {
        r.push_metric("host_spoiled_trials", s.host.spoiled);
        r.push_metric("host_retries", s.host.retries);
        r.push_metric("host_backoffs", s.host.backoffs);
        r.push_metric("host_backoff_wait_s", s.host.waited_s);
        r.push_metric("host_backoffs_unquiet", s.host.unquiet);
    }
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
    if let Some(t) = &spec.trial.traffic {
        super::result::TrafficInfo::of(t).add_to(&mut r);
        // Loss and latency per class at the found rate: the final trial's.
        if let Some(f) = &s.final_trial {
            r.push_metric("per_size", super::result::classes_json(&f.per_size));
            r.push_metric("per_protocol", super::result::classes_json(&f.per_protocol));
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
    if s0.method == Method::Mlr {
        // What the host cost all the repeats, not the first one's.
        let sum = |f: fn(&HostCost) -> f64| v.iter().map(|(s, _)| f(&s.host)).sum::<f64>();
        r.push_metric("host_spoiled_trials", sum(|h| h.spoiled as f64) as usize);
        r.push_metric("host_retries", sum(|h| h.retries as f64) as usize);
        r.push_metric("host_backoffs", sum(|h| h.backoffs as f64) as usize);
        r.push_metric("host_backoff_wait_s", sum(|h| h.waited_s));
        r.push_metric("host_backoffs_unquiet", sum(|h| h.unquiet as f64) as usize);
    }
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
pub(super) fn cv_pct(x: &[f64]) -> f64 {
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
