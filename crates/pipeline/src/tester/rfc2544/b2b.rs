//! The back-to-back test (RFC 2544 §26.4, updated by RFC 9004): the
//! longest burst at the path's own speed the device passes without loss,
//! and the buffer time that burst stands for.

use crate::netns::interrupted;
use crate::tester::TrialResult;
use crate::tester::{Bench, TrialSpec};
use commbench_core::estimate::{attach, Estimate};
use commbench_core::record::Record;
use serde::Serialize;
use std::io;

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
        if interrupted() {
            break;
        }
        // lo: longest passing length (0 passes trivially); hi: shortest
        // failing one (max + 1: none failed yet).
        let (mut lo, mut hi) = (0u64, s.max_frames + 1);
        let mut next = guess.unwrap_or(s.max_frames).clamp(1, s.max_frames);
        for _ in 0..s.max_trials {
            if interrupted() {
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
    x.push_metric("partial", interrupted() || r.lengths.len() < s.repeats);
    x
}
