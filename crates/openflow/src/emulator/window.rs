//! What the emulator measures and prints: one `Window` per timed test
//! (cbench's per-test line), the RESULT statistics over the kept windows,
//! the per-kind `Tally` of messages, the round and report types, the
//! stall lines, and Jain's fairness index.
//!
//! Invariants: RESULT counts kept windows only (not warm-up or cool-down)
//! and uses the population standard deviation, as cbench does; the output
//! lines are byte-for-byte cbench's (checked against the seed's output in
//! the tests).

use super::CbenchConfig;
use crate::sys;
use commbench_core::stats::Summary;
use serde::Serialize;

/// One timed window (one cbench output line).
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// Local time at the window's end, `HH:MM:SS.mmm`.
    pub time: String,
    /// Responses per switch in this window (cbench's raw counts).
    pub counts: Vec<u64>,
    /// Elapsed ms (the first window's `--delay` subtracted).
    pub elapsed_ms: f64,
    /// Sum of counts / elapsed ms.
    pub per_ms: f64,
    /// Counted in RESULT (not warm-up or cool-down).
    pub kept: bool,
    /// CPU seconds the emulator's workers spent in this window.
    pub emulator_cpu_s: f64,
    /// `emulator_cpu_s / elapsed / threads`: near 1.0, the generator was
    /// saturated in this window.
    pub emulator_busy: f64,
    /// How late the machine woke a sleeping thread during this window
    /// (the core's stall monitor): a long stall explains a slow window or
    /// a latency tail that the controller did not cause.
    pub stall: commbench_core::stall::StallWindow,
}

/// cbench's RESULT statistics over the kept windows, in responses/s.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ResultStats {
    pub tests: usize,
    pub min: f64,
    pub max: f64,
    pub avg: f64,
    /// Population standard deviation (cbench divides by n).
    pub stdev: f64,
}

/// Messages the emulator received, by kind, and how responses matched.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Tally {
    pub probes_sent: u64,
    /// Responses cbench counts: flow_mod ADD/MODIFY_STRICT and non-LLDP packet_out.
    pub responses: u64,
    /// Responses that answered a probe for the first time.
    pub matched: u64,
    /// Responses to a probe that had already been answered (e.g. flow_mod + packet_out).
    pub duplicate: u64,
    /// Responses whose buffer_id/xid name no probe in flight.
    pub unmatched: u64,
    /// Matches more than 90000 probes back: the buffer_id may have wrapped
    /// (only possible with `--max-in-flight 0`), so matching is uncertain.
    pub far_matches: u64,
    pub flow_mod_add: u64,
    pub flow_mod_modify_strict: u64,
    pub flow_mod_other: u64,
    pub packet_out: u64,
    pub packet_out_lldp: u64,
    pub hello: u64,
    pub error: u64,
    pub echo_request: u64,
    pub echo_reply: u64,
    pub features_request: u64,
    pub get_config_request: u64,
    pub set_config: u64,
    pub barrier_request: u64,
    pub stats_request: u64,
    pub vendor: u64,
    pub other: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl Tally {
    pub(super) fn add(&mut self, o: &Tally) {
        macro_rules! sum { ($($f:ident),*) => { $( self.$f += o.$f; )* } }
        sum!(
            probes_sent,
            responses,
            matched,
            duplicate,
            unmatched,
            far_matches,
            flow_mod_add,
            flow_mod_modify_strict,
            flow_mod_other,
            packet_out,
            packet_out_lldp,
            hello,
            error,
            echo_request,
            echo_reply,
            features_request,
            get_config_request,
            set_config,
            barrier_request,
            stats_request,
            vendor,
            other,
            bytes_in,
            bytes_out
        );
    }
}

/// A switch whose connection ended before the run did.
#[derive(Debug, Clone, Serialize)]
pub struct ClosedSwitch {
    pub switch: usize,
    pub dpid: u64,
    pub reason: String,
}

/// One run over a fixed number of switches (one RESULT line).
#[derive(Debug, Clone, Serialize)]
pub struct CbenchRound {
    pub switches: usize,
    pub windows: Vec<Window>,
    pub result: ResultStats,
    pub tally: Tally,
    /// Round trip probe -> first matching response, kept windows only
    /// (latency mode).
    pub round_trip_ns: Option<Summary>,
    /// Responses per switch over the kept windows.
    pub per_switch_total: Vec<u64>,
    /// Jain's fairness index of `per_switch_total` (1 = perfectly even).
    pub fairness: f64,
    pub closed: Vec<ClosedSwitch>,
    /// CPU seconds of the emulator's worker threads (user + system).
    pub emulator_cpu_s: f64,
    pub emulator_user_s: f64,
    pub emulator_sys_s: f64,
    pub wall_s: f64,
    /// Mean over kept windows of emulator CPU / window time / threads:
    /// near 1.0 means the generator was saturated and the rate may be the
    /// emulator's, not the controller's.
    pub emulator_busy: f64,
    /// The busiest kept window's `emulator_busy`.
    pub emulator_busy_max: f64,
    pub switches_connected: usize,
    /// Switches that completed the handshake; fewer than `switches` makes
    /// the round partial.
    pub switches_ready: usize,
    /// The handshake time-out this round used (scaled with the switches).
    pub handshake_timeout_ms: u64,
    /// The most unsent replies all switches held at once (counted past
    /// each switch's first 64 KiB), bytes; bounded by
    /// [`MAX_TOTAL_REPLY_BACKLOG`](super::MAX_TOTAL_REPLY_BACKLOG).
    pub reply_backlog_peak: u64,
}

/// Everything a `commbench cbench` invocation measured.
#[derive(Debug, Clone, Serialize)]
pub struct CbenchReport {
    pub config: CbenchConfig,
    /// The switches' TCP congestion control: the kernel's default and the
    /// one `--tcp-congestion` put in force.
    pub tcp_congestion: sys::CongestionApplied,
    pub rounds: Vec<CbenchRound>,
}

/// What the emulator prints while it runs.
pub enum Line<'a> {
    Window {
        switches: usize,
        window: &'a Window,
    },
    Result {
        switches: usize,
        result: &'a ResultStats,
    },
    /// A notice for stderr (closed connection, handshake problems).
    Notice(String),
}

/// cbench's per-test line (`--legacy-format`: the seed's older form).
pub fn format_window_line(switches: usize, w: &Window, legacy: bool) -> String {
    let mut s = String::with_capacity(64 + 8 * w.counts.len());
    if legacy {
        s.push_str(&format!("{switches:<3} switches: fmods/sec:  "));
    } else {
        s.push_str(&format!("{} {switches:<3} switches: flows/sec:  ", w.time));
    }
    for c in &w.counts {
        s.push_str(&format!("{c}  "));
    }
    s.push_str(&format!(" total = {:.6} per ms ", w.per_ms));
    s
}

/// cbench's RESULT line.
pub fn format_result_line(switches: usize, r: &ResultStats) -> String {
    format!(
        "RESULT: {switches} switches {} tests min/max/avg/stdev = {:.2}/{:.2}/{:.2}/{:.2} responses/s",
        r.tests, r.min, r.max, r.avg, r.stdev
    )
}

/// RESULT statistics from the windows' `per_ms` values (kept windows only).
pub fn result_stats(windows: &[Window]) -> ResultStats {
    let v: Vec<f64> = windows
        .iter()
        .filter(|w| w.kept)
        .map(|w| 1000.0 * w.per_ms)
        .collect();
    if v.is_empty() {
        return ResultStats {
            tests: 0,
            min: 0.0,
            max: 0.0,
            avg: 0.0,
            stdev: 0.0,
        };
    }
    let n = v.len() as f64;
    let avg = v.iter().sum::<f64>() / n;
    ResultStats {
        tests: v.len(),
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        avg,
        stdev: commbench_core::stats::population_stdev(&v),
    }
}

impl CbenchRound {
    /// Fewer switches completed the handshake than were asked for.
    pub fn partial(&self) -> bool {
        self.switches_ready < self.switches
    }

    /// Lines naming the windows in which the machine stalled for longer
    /// than `threshold` (printed after RESULT).
    pub fn stall_lines(&self, threshold: std::time::Duration) -> Vec<String> {
        stall_lines(&self.windows, threshold)
    }
}

/// Lines naming the windows in which the machine stalled for longer than
/// `threshold`.
pub fn stall_lines(windows: &[Window], threshold: std::time::Duration) -> Vec<String> {
    windows
        .iter()
        .enumerate()
        .filter(|(_, w)| w.stall.stalled(threshold))
        .map(|(i, w)| {
            format!(
                "stall: window {} ({}): the machine stalled for {:.1} ms (a sleeping thread woke {:.1} ms late; {} wake-ups over {:.0} ms{})",
                i + 1,
                w.time,
                w.stall.worst_ms,
                w.stall.worst_ms,
                w.stall.stalls,
                threshold.as_secs_f64() * 1e3,
                w.stall
                    .steal_ms
                    .map(|s| format!("; hypervisor steal {s:.0} ms"))
                    .unwrap_or_default()
            )
        })
        .collect()
}

/// Jain's fairness index: (Σx)² / (n Σx²).
pub fn jain(x: &[u64]) -> f64 {
    let s: f64 = x.iter().map(|&v| v as f64).sum();
    let s2: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
    if s2 == 0.0 {
        f64::NAN
    } else {
        s * s / (x.len() as f64 * s2)
    }
}

#[cfg(test)]
mod tests;
