//! The white-box / black-box cross-check's arithmetic: one point per
//! injected delay, the cost model's prediction beside the black-box NDR,
//! and which side (device or tester) bounded it.

use super::SearchResult;
use commbench_core::estimate::Estimate;
use serde::Serialize;

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
    /// sections in the confirmation trial ([`crate::tester::TrialResult::fwd_ticks_kernel`]).
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
