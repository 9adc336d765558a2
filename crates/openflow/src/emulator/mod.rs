//! The cbench-compatible switch emulator: N fake OpenFlow switches on N TCP
//! connections, driven by a few epoll worker threads, that send cbench's
//! probe packet_ins and count the controller's flow_mods and packet_outs in
//! timed windows, printing cbench's per-test and RESULT lines.
//!
//! Wire behaviour follows cbench's source (oflops `cbench/`): HELLO xid 1,
//! 224-byte FEATURES_REPLY with 4 ports, the learn-dst-mac gratuitous ARP,
//! 82-byte probes with cbench's MAC/buffer_id/xid patterns, latency mode
//! (probes in flight per switch, 1 like cbench or `--outstanding N`) and
//! throughput mode (64 KiB output buffer topped up whenever writable),
//! 100 ms pause + drain after each window. Beyond cbench: every response is
//! matched to its probe by buffer_id (xid when the response carries no
//! buffer), so duplicate answers are visible; per-type counts; per-probe
//! round trips in an HdrHistogram; switches answer the controller while
//! others still connect; a closed connection is reported and the rest go
//! on; the emulator's own CPU time is measured per worker thread.
//!
//! Invariants: buffers are bounded (input 128 KiB, output 64 KiB + one
//! message per switch), a malformed message closes only that switch's
//! connection, and all loops are bounded by the window clock.
//!
//! Layout: this module holds the configuration, the run driver (rounds,
//! the window clock and its phases) and the state it shares with the
//! workers; `worker` is the epoll loop that connects switches and moves
//! their bytes; `switch` is one emulated switch's state (probe templates,
//! buffer_id/xid matching); `protocol` is what a switch does with each
//! controller message; `window` holds what is measured (windows, RESULT
//! statistics, tallies, the report) and cbench's output lines. Every
//! public item is re-exported here, so `emulator::X` paths are unchanged.

mod protocol;
mod switch;
mod window;
mod worker;

pub use protocol::{error_msg, features10};
pub use window::{
    format_result_line, format_window_line, jain, result_stats, stall_lines, CbenchReport,
    CbenchRound, ClosedSwitch, Line, ResultStats, Tally, Window,
};

use crate::sys;
use crate::wire::WireError;
use commbench_core::clock::now_ns;
use commbench_core::placement::CpuList;
use commbench_core::rusage::Usage;
use commbench_core::stats::LatencyHistogram;
use serde::Serialize;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use worker::worker;

/// cbench's output buffer per switch; throughput mode keeps it topped up.
pub const OUTBUF_LEN: usize = 65536;
/// cbench's pause after each window before the counts are taken.
pub const WINDOW_PAUSE: Duration = Duration::from_millis(100);
/// Replies (echo, features, config, stats, errors) queued for a controller
/// that does not read them: past this the switch's connection is closed
/// instead of growing without bound.
const MAX_REPLY_BACKLOG: usize = 16 << 20;
/// The same for all switches of a run together: a controller flooding
/// requests on every connection cannot make the emulator's memory grow
/// with the switch count. The switch that pushes the total past it is
/// closed.
pub const MAX_TOTAL_REPLY_BACKLOG: usize = 64 << 20;
/// A switch's backlog counts towards the run's total from this size on
/// (below it, no shared counter is touched on the reply path).
const COUNTED_BACKLOG: usize = 64 << 10;
/// A switch's reply buffer above this is freed once it drains.
const MAX_KEPT_OUT: usize = 1 << 20;
const INBUF_LEN: usize = 131072;
/// Most switches in a run: each is a TCP connection from its own local
/// port to one controller address, and there are 65535 ports.
pub const MAX_SWITCHES: usize = 65535;
/// cbench's buffer_id sequence wraps at this value.
pub const BUFFER_ID_MOD: u64 = 100000;
const ANSWER_RING_BITS: u64 = 131072;
/// Default cap on unanswered throughput-mode probes per switch: a previous
/// window's leftovers plus a full window stay below the 100000 wrap.
pub const DEFAULT_MAX_IN_FLIGHT: u64 = 40000;
/// Default SO_SNDBUF per switch (see [`CbenchConfig::sndbuf`]).
pub const DEFAULT_SNDBUF: usize = 65536;
/// A match this far back may be a wrapped buffer_id: reported, not trusted.
const FAR_MATCH: u64 = 90000;

/// TCP_NODELAY policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Nodelay {
    /// Off (Nagle on), as cbench leaves it in both modes: its latency-mode
    /// `setsockopt(TCP_NODELAY)` passes 0 (cbench.c:190) and throughput
    /// mode does not call it. On only for latency mode with
    /// `--outstanding` > 1, where Nagle would hold a probe back behind
    /// unacknowledged ones (beyond cbench).
    Auto,
    On,
    Off,
}

/// Everything `commbench cbench` can be asked (cbench's options first).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CbenchConfig {
    pub controller: String,
    pub port: u16,
    pub switches: usize,
    pub loops: usize,
    pub ms_per_test: u64,
    pub mac_addresses: u32,
    pub throughput: bool,
    pub warmup: usize,
    pub cooldown: usize,
    pub delay_ms: u64,
    pub connect_delay_ms: u64,
    pub connect_group_size: usize,
    pub learn_dst_macs: bool,
    pub dpid_offset: u64,
    pub ranged: bool,
    pub debug: bool,
    pub of13: bool,
    pub outstanding: usize,
    pub threads: usize,
    pub nodelay: Nodelay,
    pub legacy_format: bool,
    /// A partial run (fewer switches ready than asked) exits 0 from the
    /// `cbench` command instead of 1; it is marked partial either way.
    pub allow_partial: bool,
    pub handshake_timeout_ms: u64,
    /// Pin the generator threads to these CPUs (taskset list syntax).
    pub cpus: Option<String>,
    /// Throughput mode: at most this many unanswered probes per switch
    /// (0 = unlimited, as cbench). Keeps buffer_id matching exact: the
    /// sequence wraps at 100000.
    pub max_in_flight: u64,
    /// SO_SNDBUF for each switch's socket; 0 leaves the kernel's
    /// autotuned default, which is what cbench does (its 64 KiB is the
    /// user-space output buffer, [`OUTBUF_LEN`], not a socket option).
    /// Default [`DEFAULT_SNDBUF`]: with the kernel's up to 4 MiB per
    /// socket, throughput mode can keep more than 100000 probes per switch
    /// in flight across a window's drain (which forgets the in-flight
    /// count), the buffer_id wraps, and matching turns uncertain.
    pub sndbuf: usize,
    /// TCP congestion control of each switch's socket: `auto` replaces a
    /// pacing algorithm (bbr) by cubic or reno, `kernel` keeps the
    /// kernel's default (what cbench gets), or an algorithm name.
    pub tcp_congestion: String,
}

impl Default for CbenchConfig {
    fn default() -> Self {
        CbenchConfig {
            controller: "localhost".into(),
            port: 6633,
            switches: 16,
            loops: 16,
            ms_per_test: 1000,
            mac_addresses: 100000,
            throughput: false,
            warmup: 1,
            cooldown: 0,
            delay_ms: 0,
            connect_delay_ms: 0,
            connect_group_size: 1,
            learn_dst_macs: true,
            dpid_offset: 1,
            ranged: false,
            debug: false,
            of13: false,
            outstanding: 1,
            threads: 1,
            nodelay: Nodelay::Auto,
            legacy_format: false,
            allow_partial: false,
            handshake_timeout_ms: 10000,
            cpus: None,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            sndbuf: DEFAULT_SNDBUF,
            tcp_congestion: "auto".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot resolve controller address {0}: {1}")]
    Resolve(String, io::Error),
    #[error("no switch could connect to the controller at {addr}: {first}")]
    NoConnection { addr: String, first: String },
    #[error("no switch completed the OpenFlow handshake within {0} ms (did the controller send FEATURES_REQUEST?)")]
    Handshake(u64),
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}

/// Why the emulator closes one switch's connection to the controller (the
/// other switches continue): what the controller sent, or did not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SwitchError {
    /// The byte stream from the controller cannot be framed.
    #[error("malformed message from controller: {0}")]
    Framing(WireError),
    /// A framed message whose header is bad.
    #[error("{0}")]
    Header(WireError),
    #[error(
        "controller hello version {peer:#04x} is incompatible with {ours:#04x} (sent HELLO_FAILED)"
    )]
    HelloFailed { peer: u8, ours: u8 },
    #[error("message version {got:#04x} after negotiating {negotiated:#04x} (sent BAD_VERSION)")]
    BadVersion { got: u8, negotiated: u8 },
    #[error("malformed message type {msg_type}: {err}")]
    Malformed { msg_type: u8, err: WireError },
    #[error("malformed {0}: too short")]
    TooShort(&'static str),
    #[error("malformed packet_out: actions_len beyond the message")]
    ActionsBeyondMessage,
    /// One switch's unsent replies passed [`MAX_REPLY_BACKLOG`].
    #[error("the controller sends requests but does not read the replies ({} MiB unsent)", .backlog >> 20)]
    Backlog { backlog: usize },
    /// All switches' unsent replies together passed
    /// [`MAX_TOTAL_REPLY_BACKLOG`].
    #[error(
        "the controller sends requests but does not read the replies ({} MiB unsent on this switch, {} MiB on all switches together, more than the {} MiB the emulator holds for a run)",
        .backlog >> 20,
        .total >> 20,
        MAX_TOTAL_REPLY_BACKLOG >> 20
    )]
    TotalBacklog { backlog: usize, total: usize },
}

impl CbenchConfig {
    pub fn validate(&self) -> Result<(), EmulatorError> {
        let bad = |m: &str| Err(EmulatorError::Config(m.to_string()));
        if self.switches == 0 || self.switches > MAX_SWITCHES {
            return bad(&format!(
                "--switches must be 1..={MAX_SWITCHES} (each switch is a TCP connection from its own local port to the controller)"
            ));
        }
        if self.loops == 0 {
            return bad("--loops must be at least 1");
        }
        if self.warmup + self.cooldown >= self.loops {
            return bad(&format!(
                "warmup ({}) + cooldown ({}) must be less than loops ({})",
                self.warmup, self.cooldown, self.loops
            ));
        }
        if self.ms_per_test == 0 {
            return bad("--ms-per-test must be at least 1");
        }
        if self.mac_addresses == 0 {
            return bad("--mac-addresses must be at least 1");
        }
        if self.connect_group_size == 0 {
            return bad("--connect-group-size must be at least 1");
        }
        if self.outstanding == 0 || self.outstanding > 65536 {
            return bad("--outstanding must be 1..=65536");
        }
        if self.threads == 0 || self.threads > 256 {
            return bad("--threads must be 1..=256");
        }
        if self.max_in_flight > 90000 {
            return bad("--max-in-flight must be 0 (unlimited) or at most 90000");
        }
        if !matches!(self.tcp_congestion.as_str(), "auto" | "kernel")
            && !sys::valid_congestion_name(&self.tcp_congestion)
        {
            return bad(
                "--tcp-congestion expects auto, kernel or an algorithm name such as cubic or reno",
            );
        }
        if self.sndbuf > i32::MAX as usize / 2 {
            return bad("--sndbuf must be at most 1073741823 bytes");
        }
        if let Some(c) = &self.cpus {
            CpuList::parse_online(c).map_err(|e| EmulatorError::Config(format!("--cpus: {e}")))?;
        }
        Ok(())
    }

    pub fn mode_name(&self) -> &'static str {
        if self.throughput {
            "throughput"
        } else {
            "latency"
        }
    }

    fn nodelay_on(&self) -> bool {
        match self.nodelay {
            Nodelay::On => true,
            Nodelay::Off => false,
            Nodelay::Auto => !self.throughput && self.outstanding > 1,
        }
    }
}

// ------------------------------------------------------------------ run

const PH_HANDSHAKE: u8 = 0;
const PH_RUN: u8 = 1;
const PH_PAUSE: u8 = 2;
const PH_DRAIN: u8 = 3;
const PH_STOP: u8 = 4;

struct Shared {
    cfg: CbenchConfig,
    addr: SocketAddr,
    phase: AtomicU8,
    epoch: AtomicU64,
    acks: AtomicUsize,
    kept: AtomicBool,
    probe_start_ns: AtomicU64,
    start_ns: u64,
    counts: Vec<AtomicU64>,
    connected: AtomicUsize,
    ready: AtomicUsize,
    finished_connecting: AtomicUsize,
    /// Per worker: its thread's CPU ns so far, updated at each phase change.
    worker_cpu_ns: Vec<AtomicU64>,
    notices: Mutex<Vec<String>>,
    closed: Mutex<Vec<ClosedSwitch>>,
    connect_errors: Mutex<Vec<String>>,
    /// Unsent replies of all switches past their first COUNTED_BACKLOG bytes.
    reply_backlog: AtomicUsize,
    /// The most `reply_backlog` ever was.
    reply_backlog_peak: AtomicUsize,
}

impl Shared {
    fn notice(&self, s: String) {
        self.notices.lock().unwrap().push(s);
    }
}

struct WorkerResult {
    tally: Tally,
    hist: LatencyHistogram,
    cpu: Usage,
}

/// Run cbench with `cfg`, reporting lines through `out` as they happen.
pub fn run_with(
    cfg: &CbenchConfig,
    out: &mut dyn FnMut(Line),
) -> Result<CbenchReport, EmulatorError> {
    cfg.validate()?;
    let tcp_congestion = sys::probe_congestion(&cfg.tcp_congestion)
        .map_err(|e| EmulatorError::Config(format!("--tcp-congestion: {e}")))?;
    let host_port = if cfg.controller.contains(':') && !cfg.controller.starts_with('[') {
        format!("[{}]:{}", cfg.controller, cfg.port)
    } else {
        format!("{}:{}", cfg.controller, cfg.port)
    };
    let addr = host_port
        .to_socket_addrs()
        .map_err(|e| EmulatorError::Resolve(host_port.clone(), e))?
        .find(|a| a.is_ipv4())
        .or_else(|| host_port.to_socket_addrs().ok().and_then(|mut i| i.next()))
        .ok_or_else(|| EmulatorError::Resolve(host_port.clone(), io::Error::other("no address")))?;
    let sizes: Vec<usize> = if cfg.ranged {
        (1..=cfg.switches).collect()
    } else {
        vec![cfg.switches]
    };
    let mut rounds = Vec::new();
    for n in sizes {
        let mut c = cfg.clone();
        c.switches = n;
        rounds.push(run_round(&c, addr, out)?);
    }
    Ok(CbenchReport {
        config: cfg.clone(),
        tcp_congestion,
        rounds,
    })
}

impl Shared {
    /// The state of a round of `n` switches over `threads` workers, in
    /// the handshake phase.
    fn new(cfg: &CbenchConfig, addr: SocketAddr, n: usize, threads: usize) -> Shared {
        Shared {
            cfg: cfg.clone(),
            addr,
            phase: AtomicU8::new(PH_HANDSHAKE),
            epoch: AtomicU64::new(0),
            acks: AtomicUsize::new(0),
            kept: AtomicBool::new(false),
            probe_start_ns: AtomicU64::new(u64::MAX),
            start_ns: now_ns(),
            counts: (0..n).map(|_| AtomicU64::new(0)).collect(),
            connected: AtomicUsize::new(0),
            ready: AtomicUsize::new(0),
            finished_connecting: AtomicUsize::new(0),
            worker_cpu_ns: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            notices: Mutex::new(Vec::new()),
            closed: Mutex::new(Vec::new()),
            connect_errors: Mutex::new(Vec::new()),
            reply_backlog: AtomicUsize::new(0),
            reply_backlog_peak: AtomicUsize::new(0),
        }
    }
}

fn run_round(
    cfg: &CbenchConfig,
    addr: SocketAddr,
    out: &mut dyn FnMut(Line),
) -> Result<CbenchRound, EmulatorError> {
    let n = cfg.switches;
    let nofile = sys::raise_nofile();
    if (n as u64) + 64 > nofile {
        out(Line::Notice(format!(
            "cbench: {n} switches need {n} file descriptors but RLIMIT_NOFILE is {nofile}; \
             raise it (ulimit -n, or LimitNOFILE= in a unit) or some switches will fail to connect"
        )));
    }
    let threads = cfg.threads.min(n);
    let shared = Arc::new(Shared::new(cfg, addr, n, threads));
    let wall0 = now_ns();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let sh = shared.clone();
            let mine: Vec<usize> = (t..n).step_by(threads).collect();
            std::thread::Builder::new()
                .name(format!("cbench-{t}"))
                .spawn(move || worker(sh, t, mine))
        })
        .collect::<Result<_, _>>()?;

    let flush = |out: &mut dyn FnMut(Line)| {
        let v: Vec<String> = std::mem::take(&mut *shared.notices.lock().unwrap());
        for s in v {
            out(Line::Notice(s));
        }
    };
    let set_phase = |ph: u8| {
        shared.acks.store(0, Ordering::SeqCst);
        shared.phase.store(ph, Ordering::SeqCst);
        shared.epoch.fetch_add(1, Ordering::SeqCst);
    };
    let worker_cpu = || -> u64 {
        shared
            .worker_cpu_ns
            .iter()
            .map(|c| c.load(Ordering::SeqCst))
            .sum()
    };
    let wait_acks = || {
        let t0 = now_ns();
        while shared.acks.load(Ordering::SeqCst) < threads {
            std::thread::sleep(Duration::from_micros(100));
            if now_ns() - t0 > 10_000_000_000 {
                break; // a worker stuck in a blocking connect; go on
            }
        }
    };

    // Handshake: wait until every switch connected and sent FEATURES_REPLY.
    let connect_span = (n.saturating_sub(1) / cfg.connect_group_size) as u64 * cfg.connect_delay_ms;
    let handshake_ms = handshake_timeout_ms(cfg);
    let deadline = now_ns() + (handshake_ms + connect_span) * 1_000_000;
    loop {
        flush(out);
        let done = shared.finished_connecting.load(Ordering::SeqCst) == threads;
        let ready = shared.ready.load(Ordering::SeqCst);
        let connected = shared.connected.load(Ordering::SeqCst);
        if done && ready >= connected {
            break;
        }
        if now_ns() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let connected = shared.connected.load(Ordering::SeqCst);
    let ready = shared.ready.load(Ordering::SeqCst);
    let stop_workers = |handles: Vec<std::thread::JoinHandle<WorkerResult>>| {
        set_phase(PH_STOP);
        handles
            .into_iter()
            .map(|h| h.join().expect("emulator worker panicked"))
            .collect::<Vec<_>>()
    };
    if connected == 0 {
        let first = shared
            .connect_errors
            .lock()
            .unwrap()
            .first()
            .cloned()
            .unwrap_or_else(|| {
                "every connection ended before the OpenFlow handshake (the controller accepted and closed them, or reset them)".into()
            });
        stop_workers(handles);
        return Err(EmulatorError::NoConnection {
            addr: addr.to_string(),
            first,
        });
    }
    if ready == 0 {
        stop_workers(handles);
        return Err(EmulatorError::Handshake(cfg.handshake_timeout_ms));
    }
    if ready < n {
        out(Line::Notice(format!(
            "cbench: only {ready} of {n} switches completed the handshake within {handshake_ms} ms; \
             this run measures {ready} switches and is marked partial"
        )));
    }

    let mut stalls = commbench_core::stall::StallMonitor::start_default();
    let mut windows = Vec::with_capacity(cfg.loops);
    for j in 0..cfg.loops {
        let delay = if j == 0 { cfg.delay_ms } else { 0 };
        let kept = j >= cfg.warmup && j < cfg.loops - cfg.cooldown;
        shared.kept.store(kept, Ordering::SeqCst);
        if j == 0 {
            for c in &shared.counts {
                c.store(0, Ordering::SeqCst);
            }
        }
        let t0 = now_ns();
        let _ = stalls.take_window();
        shared
            .probe_start_ns
            .store(t0 + delay * 1_000_000, Ordering::SeqCst);
        set_phase(PH_RUN);
        wait_acks();
        let cpu_a = worker_cpu();
        let end = t0 + (cfg.ms_per_test + delay) * 1_000_000;
        loop {
            let now = now_ns();
            if now >= end {
                break;
            }
            let left = end - now;
            std::thread::sleep(Duration::from_nanos(left.min(20_000_000)));
            flush(out);
        }
        let t1 = now_ns();
        set_phase(PH_PAUSE);
        let (h, m, s, ms) = sys::local_hms_ms();
        wait_acks();
        let cpu_s = (worker_cpu() - cpu_a) as f64 / 1e9;
        std::thread::sleep(WINDOW_PAUSE);
        let counts: Vec<u64> = shared
            .counts
            .iter()
            .map(|c| c.swap(0, Ordering::SeqCst))
            .collect();
        set_phase(PH_DRAIN);
        wait_acks();
        let elapsed_ms = (t1 - t0) as f64 / 1e6 - delay as f64;
        let sum: u64 = counts.iter().sum();
        let w = Window {
            time: format!("{h:02}:{m:02}:{s:02}.{ms:03}"),
            counts,
            elapsed_ms,
            per_ms: sum as f64 / elapsed_ms,
            kept,
            emulator_cpu_s: cpu_s,
            emulator_busy: cpu_s * 1e3 / ((t1 - t0) as f64 / 1e6) / threads as f64,
            stall: stalls.take_window(),
        };
        flush(out);
        out(Line::Window {
            switches: n,
            window: &w,
        });
        windows.push(w);
    }
    let results = stop_workers(handles);
    let wall_s = (now_ns() - wall0) as f64 / 1e9;
    flush(out);
    let result = result_stats(&windows);
    out(Line::Result {
        switches: n,
        result: &result,
    });

    let closed = shared.closed.lock().unwrap().clone();
    Ok(fold_round(RoundParts {
        switches: n,
        windows,
        result,
        results,
        closed,
        wall_s,
        connected,
        ready,
        handshake_ms,
        reply_backlog_peak: shared.reply_backlog_peak.load(Ordering::Relaxed) as u64,
    }))
}

/// What a round measured, before it is folded into a [`CbenchRound`].
struct RoundParts {
    switches: usize,
    windows: Vec<Window>,
    result: ResultStats,
    results: Vec<WorkerResult>,
    closed: Vec<ClosedSwitch>,
    wall_s: f64,
    connected: usize,
    ready: usize,
    handshake_ms: u64,
    reply_backlog_peak: u64,
}

/// Folds the workers' tallies, round-trip histograms and CPU, and the kept
/// windows' per-switch counts and busy shares, into the round's record.
fn fold_round(p: RoundParts) -> CbenchRound {
    let n = p.switches;
    let mut tally = Tally::default();
    let mut hist = LatencyHistogram::new();
    let mut cpu = Usage::default();
    for r in &p.results {
        tally.add(&r.tally);
        hist.merge(&r.hist);
        cpu.add(&r.cpu);
    }
    let per_switch_total: Vec<u64> = (0..n)
        .map(|i| {
            p.windows
                .iter()
                .filter(|w| w.kept)
                .map(|w| w.counts[i])
                .sum()
        })
        .collect();
    let fairness = jain(&per_switch_total);
    let kept_busy: Vec<f64> = p
        .windows
        .iter()
        .filter(|w| w.kept)
        .map(|w| w.emulator_busy)
        .collect();
    let mean_busy = kept_busy.iter().sum::<f64>() / kept_busy.len().max(1) as f64;
    let max_busy = kept_busy.iter().copied().fold(0.0, f64::max);
    CbenchRound {
        switches: n,
        windows: p.windows,
        result: p.result,
        tally,
        round_trip_ns: (!hist.is_empty()).then(|| hist.summary()),
        per_switch_total,
        fairness,
        closed: p.closed,
        emulator_cpu_s: cpu.cpu_s(),
        emulator_user_s: cpu.user_s,
        emulator_sys_s: cpu.sys_s,
        wall_s: p.wall_s,
        emulator_busy: mean_busy,
        emulator_busy_max: max_busy,
        switches_connected: p.connected,
        switches_ready: p.ready,
        handshake_timeout_ms: p.handshake_ms,
        reply_backlog_peak: p.reply_backlog_peak,
    }
}

/// The handshake time-out: the configured one, but at least 250 ms per
/// switch, so a loaded machine that needs longer for 256 switches than for
/// 16 does not turn a slow start into a partial run.
pub fn handshake_timeout_ms(cfg: &CbenchConfig) -> u64 {
    cfg.handshake_timeout_ms
        .max(250u64.saturating_mul(cfg.switches as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodelay_follows_cbench() {
        // cbench never enables TCP_NODELAY: its latency-mode setsockopt passes 0.
        let mut c = CbenchConfig::default();
        assert!(!c.nodelay_on(), "latency mode");
        c.throughput = true;
        assert!(!c.nodelay_on(), "throughput mode");
        c.throughput = false;
        c.outstanding = 8;
        assert!(
            c.nodelay_on(),
            "several probes in flight: Nagle would hold them"
        );
        c.nodelay = Nodelay::Off;
        assert!(!c.nodelay_on());
    }
}
