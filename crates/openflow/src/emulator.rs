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

use crate::sys::{self, Epoll};
use crate::wire::frame::{self, is_lldp};
use crate::wire::{
    be16, be32, frame_len, of10, of13, Header, WireError, NO_BUFFER, OFP10_VERSION, OFP13_VERSION,
};
use commbench_core::clock::now_ns;
use commbench_core::placement::CpuList;
use commbench_core::rusage::Usage;
use commbench_core::stats::{LatencyHistogram, Summary};
use serde::Serialize;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// cbench's output buffer per switch; throughput mode keeps it topped up.
pub const OUTBUF_LEN: usize = 65536;
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

impl CbenchConfig {
    pub fn validate(&self) -> Result<(), EmulatorError> {
        let bad = |m: &str| Err(EmulatorError::Config(m.to_string()));
        if self.switches == 0 {
            return bad("--switches must be at least 1");
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
    fn add(&mut self, o: &Tally) {
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
    /// [`MAX_TOTAL_REPLY_BACKLOG`].
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
    let shared = Arc::new(Shared {
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
    });
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
        std::thread::sleep(Duration::from_millis(100));
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

    let mut tally = Tally::default();
    let mut hist = LatencyHistogram::new();
    let mut cpu = Usage::default();
    for r in &results {
        tally.add(&r.tally);
        hist.merge(&r.hist);
        cpu.add(&r.cpu);
    }
    let per_switch_total: Vec<u64> = (0..n)
        .map(|i| windows.iter().filter(|w| w.kept).map(|w| w.counts[i]).sum())
        .collect();
    let fairness = jain(&per_switch_total);
    let kept_busy: Vec<f64> = windows
        .iter()
        .filter(|w| w.kept)
        .map(|w| w.emulator_busy)
        .collect();
    let mean_busy = kept_busy.iter().sum::<f64>() / kept_busy.len().max(1) as f64;
    let max_busy = kept_busy.iter().copied().fold(0.0, f64::max);
    let closed = shared.closed.lock().unwrap().clone();
    Ok(CbenchRound {
        switches: n,
        windows,
        result,
        tally,
        round_trip_ns: (!hist.is_empty()).then(|| hist.summary()),
        per_switch_total,
        fairness,
        closed,
        emulator_cpu_s: cpu.cpu_s(),
        emulator_user_s: cpu.user_s,
        emulator_sys_s: cpu.sys_s,
        wall_s,
        emulator_busy: mean_busy,
        emulator_busy_max: max_busy,
        switches_connected: connected,
        switches_ready: ready,
        handshake_timeout_ms: handshake_ms,
        reply_backlog_peak: shared.reply_backlog_peak.load(Ordering::Relaxed) as u64,
    })
}

/// The handshake time-out: the configured one, but at least 250 ms per
/// switch, so a loaded machine that needs longer for 256 switches than for
/// 16 does not turn a slow start into a partial run.
pub fn handshake_timeout_ms(cfg: &CbenchConfig) -> u64 {
    cfg.handshake_timeout_ms
        .max(250u64.saturating_mul(cfg.switches as u64))
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
/// Why a switch's connection ended, from a read or write error. A reset
/// or broken pipe is the controller closing (with our data still unread,
/// so its kernel answered with RST): say so plainly.
fn io_close_reason(op: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionAborted => {
            format!("connection closed by controller ({op}: {e})")
        }
        _ => format!("{op} error: {e}"),
    }
}

pub fn jain(x: &[u64]) -> f64 {
    let s: f64 = x.iter().map(|&v| v as f64).sum();
    let s2: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
    if s2 == 0.0 {
        f64::NAN
    } else {
        s * s / (x.len() as f64 * s2)
    }
}

// --------------------------------------------------------------- switch

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SwState {
    /// Waiting for the controller's HELLO/FEATURES_REQUEST.
    Handshake,
    /// FEATURES_REPLY sent: may send probes.
    Ready,
    Closed,
}

struct Switch {
    idx: usize,
    dpid: u64,
    stream: TcpStream,
    state: SwState,
    version: u8,
    inbuf: Box<[u8]>,
    in_len: usize,
    /// Control replies (and latency-mode probes), written in order.
    out: Vec<u8>,
    out_pos: usize,
    /// What of this switch's unsent replies is in `Shared::reply_backlog`.
    counted: usize,
    /// Throughput mode: a block of probe templates at a fixed stride that
    /// is written to the socket in place. A refill stamps xid, buffer_id
    /// and MAC counter into the slots (three stores per probe) instead of
    /// copying 82 bytes per probe into `out` — that copy, and moving the
    /// unsent rest of `out` to its front on EAGAIN, were about a fifth of
    /// the emulator's CPU. Empty until the first refill.
    pblock: Vec<u8>,
    pb_pos: usize,
    pb_len: usize,
    /// Last write hit EAGAIN; wait for EPOLLOUT.
    blocked: bool,
    probe: Vec<u8>,
    frame_off: usize,
    next_seq: u64,
    /// `(next_seq + 1) % BUFFER_ID_MOD` and `next_seq % mac_mod`, kept
    /// incrementally: no division per probe or per response.
    next_bid: u64,
    next_mac: u32,
    /// xid of probe 0: 1, or 2 when the learn-dst-mac packet_in took xid 1
    /// (cbench's per-switch xid counter is shared by both).
    xid_base: u64,
    in_flight: usize,
    /// Throughput mode: probes sent and not yet answered (reset per window).
    tp_in_flight: u64,
    answered: Vec<u64>,
    sent_ns: Vec<u64>,
    config_flags: u16,
    miss_send_len: u16,
    window_count: u64,
    warned_types: u32,
}

impl Switch {
    fn new(idx: usize, dpid: u64, stream: TcpStream, cfg: &CbenchConfig) -> Switch {
        let version = if cfg.of13 {
            OFP13_VERSION
        } else {
            OFP10_VERSION
        };
        let frame = frame::probe_frame(dpid, 0);
        let (probe, frame_off) = if cfg.of13 {
            let pi = of13::Repr::new(
                0,
                of13::Message::PacketIn(of13::PacketIn {
                    buffer_id: 0,
                    total_len: frame.len() as u16,
                    reason: 0,
                    table_id: 0,
                    cookie: 0,
                    match_: of13::Match {
                        fields: vec![of13::Oxm::basic(of13::OXM_IN_PORT, &1u32.to_be_bytes())],
                    },
                    data: frame.to_vec(),
                }),
            )
            .to_bytes();
            let off = pi.len() - frame.len();
            (pi, off)
        } else {
            let pi = of10::Repr::new(
                0,
                of10::Message::PacketIn(of10::PacketIn {
                    buffer_id: 0,
                    total_len: frame.len() as u16,
                    in_port: 1,
                    reason: of10::OFPR_NO_MATCH,
                    data: frame.to_vec(),
                }),
            )
            .to_bytes();
            (pi, of10::PACKET_IN_LEN)
        };
        let ring = if cfg.throughput {
            0
        } else {
            cfg.outstanding.next_power_of_two()
        };
        Switch {
            idx,
            dpid,
            stream,
            state: SwState::Handshake,
            version,
            inbuf: vec![0u8; INBUF_LEN].into_boxed_slice(),
            in_len: 0,
            out: Vec::with_capacity(OUTBUF_LEN + 4096),
            out_pos: 0,
            counted: 0,
            pblock: Vec::new(),
            pb_pos: 0,
            pb_len: 0,
            blocked: false,
            probe,
            frame_off,
            next_seq: 0,
            next_bid: 1,
            next_mac: 0,
            xid_base: if cfg.learn_dst_macs { 2 } else { 1 },
            in_flight: 0,
            tp_in_flight: 0,
            answered: vec![0u64; (ANSWER_RING_BITS / 64) as usize],
            sent_ns: vec![0u64; ring],
            config_flags: 0,
            // cbench answers GET_CONFIG with zeros until a SET_CONFIG.
            miss_send_len: 0,
            window_count: 0,
            warned_types: 0,
        }
    }

    fn pending_out(&self) -> usize {
        self.out.len() - self.out_pos + self.pb_len - self.pb_pos
    }

    /// Stamps the next probe's xid, buffer_id and MAC counter into `p` (a
    /// probe template) and marks it unanswered; returns its sequence number.
    #[inline(always)]
    fn stamp(&mut self, at: Stamp, mac_mod: u32) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let xid = (seq + self.xid_base) as u32;
        let bid = self.next_bid as u32;
        self.next_bid += 1;
        if self.next_bid == BUFFER_ID_MOD {
            self.next_bid = 0;
        }
        let mac = self.next_mac;
        self.next_mac += 1;
        if self.next_mac >= mac_mod {
            self.next_mac = 0;
        }
        let mo = self.frame_off + frame::PROBE_MAC_COUNTER_OFFSET;
        let p = match at {
            Stamp::Template => &mut self.probe[..],
            Stamp::Block(off) => &mut self.pblock[off..],
        };
        p[4..8].copy_from_slice(&xid.to_be_bytes());
        p[8..12].copy_from_slice(&bid.to_be_bytes());
        p[mo..mo + 4].copy_from_slice(&mac.to_ne_bytes());
        let slot = seq % ANSWER_RING_BITS;
        self.answered[(slot / 64) as usize] &= !(1u64 << (slot % 64));
        seq
    }

    /// Append one probe packet_in to `out` (latency mode).
    #[inline]
    fn push_probe(&mut self, mac_mod: u32, now: u64) {
        let seq = self.stamp(Stamp::Template, mac_mod);
        self.out.extend_from_slice(&self.probe);
        if !self.sent_ns.is_empty() {
            let m = self.sent_ns.len() as u64 - 1;
            self.sent_ns[(seq & m) as usize] = now;
        }
    }

    /// Throughput mode: stamps up to `max` probes into the probe block and
    /// queues them; returns how many.
    fn refill_block(&mut self, mac_mod: u32, max: u64) -> u64 {
        let plen = self.probe.len();
        if self.pblock.is_empty() {
            let slots = (OUTBUF_LEN / plen).max(1);
            self.pblock.reserve_exact(slots * plen);
            for _ in 0..slots {
                self.pblock.extend_from_slice(&self.probe);
            }
        }
        let n = ((self.pblock.len() / plen) as u64).min(max);
        for i in 0..n as usize {
            self.stamp(Stamp::Block(i * plen), mac_mod);
        }
        self.pb_pos = 0;
        self.pb_len = n as usize * plen;
        n
    }

    /// Accounts a response naming `buffer_id` / `xid`: the first answer to
    /// a probe of ours is marked in the answered ring and is a match.
    #[inline(always)]
    fn answer(&mut self, buffer_id: u32, xid: u32) -> Answer {
        let Some(seq) = self.probe_seq(buffer_id, xid) else {
            return Answer::Unmatched;
        };
        let slot = seq % ANSWER_RING_BITS;
        let (w, b) = ((slot / 64) as usize, 1u64 << (slot % 64));
        if self.answered[w] & b != 0 {
            return Answer::Duplicate;
        }
        self.answered[w] |= b;
        Answer::Matched {
            seq,
            far: self.next_seq - seq > FAR_MATCH,
        }
    }

    /// Which probe a response names: by buffer_id, else by xid.
    #[inline]
    fn probe_seq(&self, buffer_id: u32, xid: u32) -> Option<u64> {
        let sent = self.next_seq;
        if buffer_id != NO_BUFFER {
            let next_bid = self.next_bid;
            let b = buffer_id as u64;
            if b >= BUFFER_ID_MOD {
                return None;
            }
            let delta = if next_bid >= b {
                next_bid - b
            } else {
                next_bid + BUFFER_ID_MOD - b
            };
            (delta >= 1 && delta <= sent).then(|| sent - delta)
        } else {
            let delta = ((sent + self.xid_base) as u32).wrapping_sub(xid) as u64;
            (xid != 0 && delta >= 1 && delta <= sent.min(BUFFER_ID_MOD)).then(|| sent - delta)
        }
    }
}

/// How a response relates to the probes sent.
enum Answer {
    /// First answer to probe `seq`; `far` when it is older than FAR_MATCH.
    Matched {
        seq: u64,
        far: bool,
    },
    Duplicate,
    /// Names no probe of ours.
    Unmatched,
}

/// Where `Switch::stamp` writes: the latency-mode template, or a slot of
/// the throughput-mode probe block at a byte offset.
#[derive(Clone, Copy)]
enum Stamp {
    Template,
    Block(usize),
}

struct Worker {
    sh: Arc<Shared>,
    ep: Epoll,
    sw: Vec<Switch>,
    tally: Tally,
    hist: LatencyHistogram,
    throughput: bool,
    outstanding: usize,
    mac_mod: u32,
    max_in_flight: u64,
    probes_on: bool,
    /// Switches whose read or write stopped at the per-call budget before
    /// EAGAIN: edge-triggered epoll will not report them again, so the
    /// loop revisits them (fairness between switches).
    again_read: Revisit,
    again_write: Revisit,
}

/// Switches to revisit on the next turn, each at most once. A plain list
/// grew without bound under load (80 reads and 688 writes queued for 16
/// switches): a switch read from both its epoll event and the list went in
/// twice, each of its 4 reads flushed and queued it again, and the
/// duplicates fed back, so a few switches took every turn while the others
/// starved — whole windows with 0 responses for some switches.
#[derive(Default)]
struct Revisit {
    list: Vec<usize>,
    queued: Vec<bool>,
}

impl Revisit {
    fn push(&mut self, k: usize) {
        if k >= self.queued.len() {
            self.queued.resize(k + 1, false);
        }
        if !self.queued[k] {
            self.queued[k] = true;
            self.list.push(k);
        }
    }

    /// The switches queued so far; pushes from now on start a new turn.
    fn take(&mut self) -> Vec<usize> {
        let v = std::mem::take(&mut self.list);
        for &k in &v {
            self.queued[k] = false;
        }
        v
    }

    fn len(&self) -> usize {
        self.list.len()
    }

    fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// Reads or writes per switch per turn before moving on to the others.
const IO_BUDGET: usize = 4;

fn worker(sh: Arc<Shared>, id: usize, mine: Vec<usize>) -> WorkerResult {
    if let Some(c) = sh
        .cfg
        .cpus
        .as_deref()
        .and_then(|c| CpuList::parse_online(c).ok())
    {
        if let Err(e) = c.pin_current_thread() {
            sh.notice(format!("cbench: cannot pin generator thread: {e}"));
        }
    }
    let cpu0 = Usage::thread();
    let ep = Epoll::new().expect("epoll_create1");
    let cfg = sh.cfg.clone();
    let mut w = Worker {
        sh: sh.clone(),
        ep,
        sw: Vec::with_capacity(mine.len()),
        tally: Tally::default(),
        hist: LatencyHistogram::new(),
        throughput: cfg.throughput,
        outstanding: cfg.outstanding,
        mac_mod: cfg.mac_addresses,
        max_in_flight: if cfg.max_in_flight == 0 {
            u64::MAX
        } else {
            cfg.max_in_flight
        },
        probes_on: false,
        again_read: Revisit::default(),
        again_write: Revisit::default(),
    };
    let mut events = sys::new_events(1024);
    let mut pending: std::collections::VecDeque<usize> = mine.into_iter().collect();
    let mut seen_epoch = 0u64;
    let mut finished_connecting = false;
    loop {
        // Connect switches whose group is due.
        while let Some(&i) = pending.front() {
            let due = sh.start_ns
                + (i / cfg.connect_group_size) as u64 * cfg.connect_delay_ms * 1_000_000;
            if now_ns() < due {
                break;
            }
            pending.pop_front();
            w.connect(i, &cfg);
        }
        if pending.is_empty() && !finished_connecting {
            finished_connecting = true;
            sh.finished_connecting.fetch_add(1, Ordering::SeqCst);
        }
        let ep_now = sh.epoch.load(Ordering::SeqCst);
        if ep_now != seen_epoch {
            seen_epoch = ep_now;
            let used = Usage::thread().since(&cpu0).cpu_s();
            sh.worker_cpu_ns[id].store((used * 1e9) as u64, Ordering::SeqCst);
            match sh.phase.load(Ordering::SeqCst) {
                PH_RUN => {
                    w.probes_on = false;
                    for s in &mut w.sw {
                        s.window_count = 0;
                    }
                }
                PH_PAUSE => {
                    w.publish_counts();
                    if cfg.debug {
                        let blocked = w.sw.iter().filter(|s| s.blocked).count();
                        let tp: u64 = w.sw.iter().map(|s| s.tp_in_flight).sum();
                        let pend: usize = w.sw.iter().map(|s| s.pending_out()).sum();
                        let inl: usize = w.sw.iter().map(|s| s.in_len).sum();
                        sh.notice(format!(
                            "cbench debug: worker: blocked {blocked}, tp_in_flight {tp}, pending out {pend}, in_len {inl}, again r/w {}/{}, probes_on {}",
                            w.again_read.len(),
                            w.again_write.len(),
                            w.probes_on
                        ));
                    }
                }
                PH_DRAIN => w.drain(),
                PH_STOP => {
                    w.finish_writes();
                    sh.acks.fetch_add(1, Ordering::SeqCst);
                    break;
                }
                _ => {}
            }
            sh.acks.fetch_add(1, Ordering::SeqCst);
        }
        let phase = sh.phase.load(Ordering::SeqCst);
        if phase == PH_PAUSE || phase == PH_DRAIN {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        let now = now_ns();
        if phase == PH_RUN && !w.probes_on && now >= sh.probe_start_ns.load(Ordering::SeqCst) {
            w.probes_on = true;
            for k in 0..w.sw.len() {
                w.top_up(k, now);
                w.flush(k);
            }
        }
        let timeout = if !w.again_read.is_empty() || !w.again_write.is_empty() {
            0
        } else if !pending.is_empty() || (phase == PH_RUN && !w.probes_on) {
            1
        } else {
            5
        };
        let evs = match w.ep.wait(&mut events, timeout) {
            Ok(e) => e,
            Err(e) => {
                sh.notice(format!("cbench: epoll_wait failed: {e}"));
                break;
            }
        };
        for e in evs {
            let k = sys::event_token(e) as usize;
            let bits = sys::event_bits(e);
            if k >= w.sw.len() || w.sw[k].state == SwState::Closed {
                continue;
            }
            if bits & sys::OUT != 0 {
                w.sw[k].blocked = false;
                let now = now_ns();
                w.top_up(k, now);
                w.flush(k);
            }
            if bits & (sys::IN | sys::ERR) != 0 {
                w.read(k);
            }
        }
        let again = w.again_write.take();
        for k in again {
            w.flush(k);
        }
        let again = w.again_read.take();
        for k in again {
            w.read(k);
        }
        // Count publishing is cheap and keeps the window totals fresh.
        if phase == PH_RUN {
            w.publish_counts();
        }
    }
    w.publish_counts();
    let cpu = Usage::thread().since(&cpu0);
    WorkerResult {
        tally: w.tally,
        hist: w.hist,
        cpu,
    }
}

impl Worker {
    fn connect(&mut self, i: usize, cfg: &CbenchConfig) {
        let dpid = cfg.dpid_offset + i as u64;
        let stream = match TcpStream::connect_timeout(&self.sh.addr, Duration::from_secs(3)) {
            Ok(s) => s,
            Err(e) => {
                let msg = format!(
                    "cbench: switch {} (dpid {dpid:#x}) cannot connect to {}: {e}",
                    i + 1,
                    self.sh.addr
                );
                self.sh.connect_errors.lock().unwrap().push(msg.clone());
                self.sh.notice(msg);
                return;
            }
        };
        let _ = sys::set_nodelay(stream.as_raw_fd(), cfg.nodelay_on());
        // cbench sets no socket buffer size (`--sndbuf 0`); by default a
        // 64 KiB one bounds the probes queued in the kernel, so that the
        // buffer_id sequence (wrapping at 100000) stays unambiguous.
        if cfg.sndbuf > 0 {
            let _ = sys::set_sndbuf(stream.as_raw_fd(), cfg.sndbuf as i32);
        }
        // Checked by `run_with` on a probe socket before any switch
        // connects; every switch gets the same.
        let _ = sys::apply_congestion(stream.as_raw_fd(), &cfg.tcp_congestion);
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let k = self.sw.len();
        if let Err(e) = self.ep.add(
            stream.as_raw_fd(),
            k as u64,
            sys::IN | sys::OUT | sys::ET | sys::ERR,
        ) {
            self.sh.notice(format!("cbench: epoll_ctl: {e}"));
            return;
        }
        let mut s = Switch::new(i, dpid, stream, cfg);
        // HELLO, xid 1 (1.3: with a version bitmap offering only 1.3).
        if cfg.of13 {
            of13::Repr::new(
                1,
                of13::Message::Hello(vec![of13::HelloElement::VersionBitmap(vec![
                    1 << OFP13_VERSION,
                ])]),
            )
            .emit(&mut s.out);
        } else {
            of10::Repr::new(1, of10::Message::Hello(vec![])).emit(&mut s.out);
        }
        self.sw.push(s);
        self.sh.connected.fetch_add(1, Ordering::SeqCst);
        self.flush(k);
    }

    /// End every connection at a message boundary: the output buffer only
    /// ever holds whole messages, so writing what is left (bounded by a
    /// short timeout) means the controller never sees a torn message.
    fn finish_writes(&mut self) {
        for s in &mut self.sw {
            if s.state == SwState::Closed || s.pending_out() == 0 {
                continue;
            }
            let _ = s.stream.set_nonblocking(false);
            let _ = s.stream.set_write_timeout(Some(Duration::from_millis(200)));
            let _ = s.stream.write_all(&s.pblock[s.pb_pos..s.pb_len]);
            let _ = s.stream.write_all(&s.out[s.out_pos..]);
            s.pb_pos = s.pb_len;
            s.out_pos = s.out.len();
        }
    }

    fn publish_counts(&mut self) {
        for s in &mut self.sw {
            if s.window_count != 0 {
                self.sh.counts[s.idx].fetch_add(s.window_count, Ordering::Relaxed);
                s.window_count = 0;
            }
        }
    }

    /// cbench's get_count: read and discard pending input message by
    /// message (framing is kept: a partial message stays buffered), and
    /// forget probes in flight so latency mode restarts with a fresh probe.
    fn drain(&mut self) {
        for k in 0..self.sw.len() {
            let s = &mut self.sw[k];
            if s.state == SwState::Closed {
                continue;
            }
            s.in_flight = 0;
            s.tp_in_flight = 0;
            // Discard what is pending now (FIONREAD), not what the
            // controller keeps producing from its backlog meanwhile.
            let mut left = sys::readable_bytes(s.stream.as_raw_fd());
            while left > 0 {
                let s = &mut self.sw[k];
                let end = (s.in_len + left).min(s.inbuf.len());
                match s.stream.read(&mut s.inbuf[s.in_len..end]) {
                    Ok(0) => {
                        self.close(k, "connection closed by controller".into());
                        break;
                    }
                    Ok(n) => {
                        left = left.saturating_sub(n);
                        self.tally.bytes_in += n as u64;
                        s.in_len += n;
                        let mut off = 0;
                        loop {
                            match frame_len(&s.inbuf[off..s.in_len]) {
                                Ok(Some(m)) => off += m,
                                Ok(None) => break,
                                Err(e) => {
                                    let why = format!("malformed message from controller: {e}");
                                    self.close(k, why);
                                    break;
                                }
                            }
                        }
                        let s = &mut self.sw[k];
                        if s.state == SwState::Closed {
                            break;
                        }
                        s.inbuf.copy_within(off..s.in_len, 0);
                        s.in_len -= off;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        self.close(k, io_close_reason("read", &e));
                        break;
                    }
                }
            }
        }
    }

    fn close(&mut self, k: usize, reason: String) {
        let s = &mut self.sw[k];
        if s.state == SwState::Closed {
            return;
        }
        let was_ready = s.state == SwState::Ready;
        s.state = SwState::Closed;
        let _ = self.ep.delete(s.stream.as_raw_fd());
        let _ = s.stream.shutdown(std::net::Shutdown::Both);
        let msg = format!(
            "cbench: switch {} (dpid {:#x}): {reason}; the other switches go on",
            s.idx + 1,
            s.dpid
        );
        self.sh.notice(msg.clone());
        self.sh.closed.lock().unwrap().push(ClosedSwitch {
            switch: s.idx + 1,
            dpid: s.dpid,
            reason,
        });
        if !was_ready {
            // Let the handshake wait finish without this switch.
            self.sh.connected.fetch_sub(1, Ordering::SeqCst);
        }
        self.sh
            .reply_backlog
            .fetch_sub(s.counted, Ordering::Relaxed);
        s.counted = 0;
        // A closed switch keeps no reply memory.
        s.out = Vec::new();
        s.out_pos = 0;
        s.pb_pos = 0;
        s.pb_len = 0;
    }

    /// Queue probes: throughput mode fills the 64 KiB buffer, latency mode
    /// keeps `outstanding` probes in flight.
    #[inline]
    fn top_up(&mut self, k: usize, now: u64) {
        if !self.probes_on {
            return;
        }
        let mac_mod = self.mac_mod;
        let s = &mut self.sw[k];
        if s.state != SwState::Ready {
            return;
        }
        if self.throughput {
            // A new block only once the last one is out (and any reply
            // queued meanwhile has gone first, see `flush`): probes are
            // never moved or copied per probe.
            if s.pending_out() > 0 {
                return;
            }
            let room = self.max_in_flight.saturating_sub(s.tp_in_flight);
            let n = s.refill_block(mac_mod, room);
            s.tp_in_flight += n;
            self.tally.probes_sent += n;
        } else {
            while s.in_flight < self.outstanding {
                s.push_probe(mac_mod, now);
                s.in_flight += 1;
                self.tally.probes_sent += 1;
            }
        }
    }

    /// Write until EAGAIN or empty; throughput mode refills as it goes.
    /// The probe block is always finished before `out` is written (both
    /// end on message boundaries), and `out` before the block is refilled.
    fn flush(&mut self, k: usize) {
        let mut budget = IO_BUDGET;
        loop {
            if budget == 0 {
                self.again_write.push(k);
                return;
            }
            budget -= 1;
            let s = &mut self.sw[k];
            if s.state == SwState::Closed || s.blocked {
                return;
            }
            let from_block = s.pb_pos < s.pb_len;
            let buf = if from_block {
                &s.pblock[s.pb_pos..s.pb_len]
            } else if s.out_pos < s.out.len() {
                &s.out[s.out_pos..]
            } else {
                if s.counted > 0 {
                    self.sh
                        .reply_backlog
                        .fetch_sub(s.counted, Ordering::Relaxed);
                    s.counted = 0;
                }
                if s.out.capacity() > MAX_KEPT_OUT {
                    s.out = Vec::new();
                } else {
                    s.out.clear();
                }
                s.out_pos = 0;
                if self.throughput && self.probes_on && s.state == SwState::Ready {
                    let now = now_ns();
                    self.top_up(k, now);
                    if self.sw[k].pending_out() == 0 {
                        return;
                    }
                    continue;
                }
                return;
            };
            let want = buf.len();
            match s.stream.write(buf) {
                Ok(0) => {
                    self.close(k, "write returned 0".into());
                    return;
                }
                Ok(n) => {
                    if from_block {
                        s.pb_pos += n;
                    } else {
                        s.out_pos += n;
                    }
                    self.tally.bytes_out += n as u64;
                    if n < want {
                        // A short write on a non-blocking TCP socket means
                        // its send buffer is full, and the kernel has noted
                        // a writer waiting (SOCK_NOSPACE): EPOLLOUT comes
                        // when room frees. Writing again now would only
                        // return EAGAIN, one wasted system call per short
                        // write: half of all writes in throughput mode.
                        s.blocked = true;
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    s.blocked = true;
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.close(k, io_close_reason("write", &e));
                    return;
                }
            }
        }
    }

    /// Read until EAGAIN (edge-triggered), handling messages as they come.
    fn read(&mut self, k: usize) {
        for _ in 0..IO_BUDGET {
            let s = &mut self.sw[k];
            if s.state == SwState::Closed {
                return;
            }
            let room = s.inbuf.len() - s.in_len;
            match s.stream.read(&mut s.inbuf[s.in_len..]) {
                Ok(0) => {
                    let why = if s.in_len > 0 {
                        format!(
                            "connection closed by controller in the middle of a message ({} bytes pending)",
                            s.in_len
                        )
                    } else {
                        "connection closed by controller".into()
                    };
                    self.close(k, why);
                    return;
                }
                Ok(n) => {
                    s.in_len += n;
                    self.tally.bytes_in += n as u64;
                    if let Err(e) = self.process(k) {
                        self.close(k, e);
                        return;
                    }
                    self.flush(k);
                    if n < room {
                        // The receive queue was empty when this read
                        // returned: data arriving later raises a new
                        // edge-triggered EPOLLIN, so reading again now
                        // would only return EAGAIN.
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.close(k, io_close_reason("read", &e));
                    return;
                }
            }
        }
        self.again_read.push(k);
    }

    /// Handle every complete message in the input buffer.
    fn process(&mut self, k: usize) -> Result<(), String> {
        let now = now_ns();
        let mut off = 0;
        let kept = self.sh.kept.load(Ordering::Relaxed);
        let in_len = self.sw[k].in_len;
        let mut inbuf = std::mem::take(&mut self.sw[k].inbuf);
        if self.throughput && self.sw[k].version == OFP10_VERSION {
            off = self.flow_mod_run(k, &inbuf[..in_len]);
        }
        let res = (|| {
            while off < in_len {
                let n = match frame_len(&inbuf[off..in_len]) {
                    Ok(Some(n)) => n,
                    Ok(None) => break,
                    Err(e) => return Err(format!("malformed message from controller: {e}")),
                };
                let msg = &inbuf[off..off + n];
                off += n;
                self.handle(k, msg, now, kept)?;
                let s = &mut self.sw[k];
                let backlog = s.out.len() - s.out_pos;
                if backlog > MAX_REPLY_BACKLOG {
                    return Err(format!(
                        "the controller sends requests but does not read the replies ({} MiB unsent)",
                        backlog >> 20
                    ));
                }
                if backlog > COUNTED_BACKLOG || s.counted > 0 {
                    let now_counted = backlog.saturating_sub(COUNTED_BACKLOG);
                    let total = if now_counted >= s.counted {
                        let d = now_counted - s.counted;
                        self.sh.reply_backlog.fetch_add(d, Ordering::Relaxed) + d
                    } else {
                        let d = s.counted - now_counted;
                        self.sh.reply_backlog.fetch_sub(d, Ordering::Relaxed) - d
                    };
                    s.counted = now_counted;
                    self.sh
                        .reply_backlog_peak
                        .fetch_max(total, Ordering::Relaxed);
                    if total > MAX_TOTAL_REPLY_BACKLOG {
                        return Err(format!(
                            "the controller sends requests but does not read the replies ({} MiB unsent on this switch, {} MiB on all switches together, more than the {} MiB the emulator holds for a run)",
                            backlog >> 20,
                            total >> 20,
                            MAX_TOTAL_REPLY_BACKLOG >> 20
                        ));
                    }
                }
            }
            Ok(())
        })();
        if off > 0 && off < in_len {
            inbuf.copy_within(off..in_len, 0);
        }
        let s = &mut self.sw[k];
        s.inbuf = inbuf;
        s.in_len = in_len - off.min(in_len);
        res
    }

    /// Throughput mode, OpenFlow 1.0: counts and matches the leading run
    /// of flow_mod ADDs in `buf` (the reply to nearly every probe) with the
    /// counters in registers, and returns where the run ends; `handle`
    /// takes whatever follows. Same accounting as `response`, without its
    /// per-message dispatch: about a third of the emulator's user time.
    fn flow_mod_run(&mut self, k: usize, buf: &[u8]) -> usize {
        let s = &mut self.sw[k];
        let (mut off, mut n, mut matched, mut duplicate, mut unmatched, mut far) =
            (0, 0u64, 0, 0, 0, 0);
        while let Some(m) = buf.get(off..off + of10::FLOW_MOD_LEN) {
            let len = be16(m, 2) as usize;
            if m[0] != OFP10_VERSION
                || m[1] != of10::OFPT_FLOW_MOD
                || len < of10::FLOW_MOD_LEN
                || off + len > buf.len()
                || be16(m, 56) != of10::OFPFC_ADD
            {
                break;
            }
            off += len;
            n += 1;
            match s.answer(be32(m, 64), be32(m, 4)) {
                Answer::Matched { far: f, .. } => {
                    matched += 1;
                    far += f as u64;
                }
                Answer::Duplicate => duplicate += 1,
                Answer::Unmatched => unmatched += 1,
            }
        }
        s.window_count += n;
        s.tp_in_flight = s.tp_in_flight.saturating_sub(matched);
        let t = &mut self.tally;
        t.responses += n;
        t.flow_mod_add += n;
        t.matched += matched;
        t.duplicate += duplicate;
        t.unmatched += unmatched;
        t.far_matches += far;
        off
    }

    fn response(&mut self, k: usize, buffer_id: u32, xid: u32, now: u64, kept: bool) {
        self.tally.responses += 1;
        let s = &mut self.sw[k];
        s.window_count += 1;
        match s.answer(buffer_id, xid) {
            Answer::Duplicate => self.tally.duplicate += 1,
            Answer::Unmatched => self.tally.unmatched += 1,
            Answer::Matched { seq, far } => {
                self.tally.matched += 1;
                self.tally.far_matches += far as u64;
                s.tp_in_flight = s.tp_in_flight.saturating_sub(1);
                if !self.throughput {
                    let m = s.sent_ns.len() as u64 - 1;
                    let oldest_in_flight = s.next_seq - (s.in_flight as u64).min(s.next_seq);
                    if seq >= oldest_in_flight && s.in_flight > 0 {
                        if kept {
                            let t = s.sent_ns[(seq & m) as usize];
                            self.hist.record_ns(now.saturating_sub(t));
                        }
                        s.in_flight -= 1;
                        self.top_up(k, now);
                    }
                }
            }
        }
    }

    fn reply(&mut self, k: usize, f: impl FnOnce(&mut Vec<u8>)) {
        f(&mut self.sw[k].out);
    }

    fn handle(&mut self, k: usize, msg: &[u8], now: u64, kept: bool) -> Result<(), String> {
        // Fast path for the message that dominates: an OpenFlow 1.0 flow_mod
        // ADD (frame_len already checked that msg is exactly one message).
        if msg.len() >= of10::FLOW_MOD_LEN
            && msg[0] == OFP10_VERSION
            && msg[1] == of10::OFPT_FLOW_MOD
            && self.sw[k].version == OFP10_VERSION
            && be16(msg, 56) == of10::OFPFC_ADD
        {
            self.tally.flow_mod_add += 1;
            self.response(k, be32(msg, 64), be32(msg, 4), now, kept);
            return Ok(());
        }
        let h = Header::new_checked(msg).map_err(|e| e.to_string())?;
        let (ty, xid, ver) = (h.msg_type(), h.xid(), h.version());
        let sv = self.sw[k].version;
        if ty == 0 {
            // HELLO: cbench does no negotiation; we check the peer can
            // speak our version and otherwise fail the hello.
            self.tally.hello += 1;
            if of13::negotiate(msg, &[sv]).is_none() {
                let e = error_msg(sv, xid, 0, 0, msg);
                self.reply(k, |o| o.extend_from_slice(&e));
                self.flush(k);
                return Err(format!(
                    "controller hello version {ver:#04x} is incompatible with {sv:#04x} (sent HELLO_FAILED)"
                ));
            }
            return Ok(());
        }
        if ver != sv {
            let e = error_msg(sv, xid, 1, 0, msg);
            self.reply(k, |o| o.extend_from_slice(&e));
            self.flush(k);
            return Err(format!(
                "message version {ver:#04x} after negotiating {sv:#04x} (sent BAD_VERSION)"
            ));
        }
        if sv == OFP10_VERSION {
            self.handle10(k, ty, xid, msg, now, kept)
        } else {
            self.handle13(k, ty, xid, msg, now, kept)
        }
    }

    /// An ERROR from the controller (same layout in 1.0 and 1.3): counted
    /// and reported.
    fn controller_error(&mut self, k: usize, msg: &[u8]) {
        self.tally.error += 1;
        if msg.len() >= 12 {
            let m = format!(
                "cbench: switch {} got ERROR type {} code {} from the controller",
                self.sw[k].idx + 1,
                be16(msg, 8),
                be16(msg, 10)
            );
            self.sh.notice(m);
        }
    }

    fn features_done(&mut self, k: usize) {
        let s = &mut self.sw[k];
        if s.state == SwState::Handshake {
            s.state = SwState::Ready;
            self.sh.ready.fetch_add(1, Ordering::SeqCst);
            if self.sh.cfg.learn_dst_macs {
                // xid 1 (probes then count from 2), buffer_id none,
                // in_port 2. cbench sizes the 1.0 message as
                // sizeof(struct ofp_packet_in) (20, with its 2 bytes of
                // tail padding) + the 64-byte frame: 84 bytes whose last
                // two are zero, total_len 64.
                let arp = frame::gratuitous_arp(s.dpid);
                let v = s.version;
                if v == OFP10_VERSION {
                    let mut data = arp.to_vec();
                    data.extend_from_slice(&[0, 0]);
                    of10::Repr::new(
                        1,
                        of10::Message::PacketIn(of10::PacketIn {
                            buffer_id: NO_BUFFER,
                            total_len: arp.len() as u16,
                            in_port: 2,
                            reason: of10::OFPR_NO_MATCH,
                            data,
                        }),
                    )
                    .emit(&mut s.out);
                } else {
                    of13::Repr::new(
                        1,
                        of13::Message::PacketIn(of13::PacketIn {
                            buffer_id: NO_BUFFER,
                            total_len: arp.len() as u16,
                            reason: 0,
                            table_id: 0,
                            cookie: 0,
                            match_: of13::Match {
                                fields: vec![of13::Oxm::basic(
                                    of13::OXM_IN_PORT,
                                    &2u32.to_be_bytes(),
                                )],
                            },
                            data: arp.to_vec(),
                        }),
                    )
                    .emit(&mut s.out);
                }
            }
            let now = now_ns();
            self.top_up(k, now);
        }
    }

    /// cbench's latency-mode restart: a controller that blocks on its
    /// config exchange may have dropped the probe in flight, so after a
    /// GET_CONFIG_REQUEST or DESC stats request with the window full
    /// (`only_if_full`), or any VENDOR message, the switch forgets its
    /// probes in flight and sends fresh ones (fakeswitch.c:412-417,
    /// 427, 454-459). A late answer to a forgotten probe still counts.
    fn restart_latency_probes(&mut self, k: usize, only_if_full: bool) {
        if self.throughput {
            return;
        }
        let s = &mut self.sw[k];
        if s.state != SwState::Ready || s.in_flight == 0 {
            return;
        }
        if only_if_full && s.in_flight < self.outstanding {
            return;
        }
        s.in_flight = 0;
        let now = now_ns();
        self.top_up(k, now);
    }

    fn warn_once(&mut self, k: usize, ty: u8) {
        let s = &mut self.sw[k];
        let bit = 1u32 << (ty % 32);
        if self.sh.cfg.debug || s.warned_types & bit == 0 {
            s.warned_types |= bit;
            let m = format!(
                "cbench: switch {} ignoring OpenFlow message type {ty}",
                s.idx + 1
            );
            self.sh.notice(m);
        }
    }

    fn handle10(
        &mut self,
        k: usize,
        ty: u8,
        xid: u32,
        msg: &[u8],
        now: u64,
        kept: bool,
    ) -> Result<(), String> {
        let bad = |e: WireError| format!("malformed message type {ty}: {e}");
        match ty {
            of10::OFPT_FLOW_MOD => {
                let v = of10::FlowModView::new_checked(msg).map_err(bad)?;
                match v.command() {
                    of10::OFPFC_ADD => self.tally.flow_mod_add += 1,
                    of10::OFPFC_MODIFY_STRICT => self.tally.flow_mod_modify_strict += 1,
                    _ => {
                        self.tally.flow_mod_other += 1;
                        return Ok(());
                    }
                }
                self.response(k, v.buffer_id(), xid, now, kept);
            }
            of10::OFPT_PACKET_OUT => {
                let v = of10::PacketOutView::new_checked(msg).map_err(bad)?;
                if is_lldp(v.data()) {
                    self.tally.packet_out_lldp += 1;
                } else {
                    self.tally.packet_out += 1;
                    self.response(k, v.buffer_id(), xid, now, kept);
                }
            }
            of10::OFPT_ECHO_REQUEST => {
                // cbench answers with a bare 8-byte header, never echoing
                // the request's data (fakeswitch.c:433-440).
                self.tally.echo_request += 1;
                self.reply(k, |o| {
                    o.extend_from_slice(&[OFP10_VERSION, of10::OFPT_ECHO_REPLY, 0, 8]);
                    o.extend_from_slice(&xid.to_be_bytes());
                });
            }
            of10::OFPT_ECHO_REPLY => self.tally.echo_reply += 1,
            of10::OFPT_FEATURES_REQUEST => {
                self.tally.features_request += 1;
                let s = &self.sw[k];
                let r = of10::Repr::new(xid, of10::Message::FeaturesReply(features10(s.dpid)));
                self.reply(k, |o| r.emit(o));
                self.features_done(k);
            }
            of10::OFPT_SET_CONFIG => {
                self.tally.set_config += 1;
                if msg.len() >= 12 {
                    let s = &mut self.sw[k];
                    s.config_flags = be16(msg, 8);
                    s.miss_send_len = be16(msg, 10);
                }
            }
            of10::OFPT_GET_CONFIG_REQUEST => {
                self.tally.get_config_request += 1;
                let s = &self.sw[k];
                let r = of10::Repr::new(
                    xid,
                    of10::Message::GetConfigReply(of10::SwitchConfig {
                        flags: s.config_flags,
                        miss_send_len: s.miss_send_len,
                    }),
                );
                self.reply(k, |o| r.emit(o));
                self.restart_latency_probes(k, true);
            }
            of10::OFPT_BARRIER_REQUEST => {
                self.tally.barrier_request += 1;
                self.reply(k, |o| {
                    of10::Repr::new(xid, of10::Message::BarrierReply).emit(o)
                });
            }
            of10::OFPT_STATS_REQUEST => {
                self.tally.stats_request += 1;
                if msg.len() >= 12 && be16(msg, 8) == of10::OFPST_DESC {
                    let d = desc(self.sw[k].dpid);
                    self.reply(k, |o| {
                        of10::Repr::new(
                            xid,
                            of10::Message::StatsReply {
                                flags: 0,
                                body: of10::StatsBody::Desc(d),
                            },
                        )
                        .emit(o)
                    });
                    self.restart_latency_probes(k, true);
                } else if self.sh.cfg.debug {
                    // cbench ignores other stats requests silently.
                    self.warn_once(k, ty);
                }
            }
            of10::OFPT_VENDOR => {
                // A 12-byte BAD_REQUEST/BAD_VENDOR without the offending
                // message, as cbench sends (fakeswitch.c:257-268), and
                // its "nox hack": a controller that ignores packet_ins until
                // it has sent a vendor message gets a fresh probe.
                self.tally.vendor += 1;
                let e = of10::Repr::new(
                    xid,
                    of10::Message::Error {
                        err_type: of10::OFPET_BAD_REQUEST,
                        code: of10::OFPBRC_BAD_VENDOR,
                        data: Vec::new(),
                    },
                );
                self.reply(k, |o| e.emit(o));
                self.restart_latency_probes(k, false);
            }
            of10::OFPT_ERROR => {
                self.controller_error(k, msg);
            }
            _ => {
                self.tally.other += 1;
                self.warn_once(k, ty);
            }
        }
        Ok(())
    }

    fn handle13(
        &mut self,
        k: usize,
        ty: u8,
        xid: u32,
        msg: &[u8],
        now: u64,
        kept: bool,
    ) -> Result<(), String> {
        let short = |what: &str| format!("malformed {what}: too short");
        match ty {
            of13::OFPT_FLOW_MOD => {
                if msg.len() < of13::FLOW_MOD_FIXED + 8 {
                    return Err(short("flow_mod"));
                }
                match msg[25] {
                    of13::OFPFC_ADD => self.tally.flow_mod_add += 1,
                    of13::OFPFC_MODIFY_STRICT => self.tally.flow_mod_modify_strict += 1,
                    _ => {
                        self.tally.flow_mod_other += 1;
                        return Ok(());
                    }
                }
                self.response(k, be32(msg, 32), xid, now, kept);
            }
            of13::OFPT_PACKET_OUT => {
                if msg.len() < of13::PACKET_OUT_LEN {
                    return Err(short("packet_out"));
                }
                let alen = be16(msg, 16) as usize;
                if of13::PACKET_OUT_LEN + alen > msg.len() {
                    return Err("malformed packet_out: actions_len beyond the message".into());
                }
                if is_lldp(&msg[of13::PACKET_OUT_LEN + alen..]) {
                    self.tally.packet_out_lldp += 1;
                } else {
                    self.tally.packet_out += 1;
                    self.response(k, be32(msg, 8), xid, now, kept);
                }
            }
            of13::OFPT_ECHO_REQUEST => {
                self.tally.echo_request += 1;
                self.reply(k, |o| {
                    let s = o.len();
                    o.extend_from_slice(msg);
                    o[s + 1] = of13::OFPT_ECHO_REPLY;
                });
            }
            of13::OFPT_ECHO_REPLY => self.tally.echo_reply += 1,
            of13::OFPT_FEATURES_REQUEST => {
                self.tally.features_request += 1;
                let f = of13::SwitchFeatures {
                    datapath_id: self.sw[k].dpid,
                    n_buffers: 256,
                    n_tables: 2,
                    auxiliary_id: 0,
                    capabilities: 0,
                };
                self.reply(k, |o| {
                    of13::Repr::new(xid, of13::Message::FeaturesReply(f)).emit(o)
                });
                self.features_done(k);
            }
            of13::OFPT_SET_CONFIG => {
                self.tally.set_config += 1;
                if msg.len() >= 12 {
                    let s = &mut self.sw[k];
                    s.config_flags = be16(msg, 8);
                    s.miss_send_len = be16(msg, 10);
                }
            }
            of13::OFPT_GET_CONFIG_REQUEST => {
                self.tally.get_config_request += 1;
                let s = &self.sw[k];
                let r = of13::Repr::new(
                    xid,
                    of13::Message::GetConfigReply {
                        flags: s.config_flags,
                        miss_send_len: s.miss_send_len,
                    },
                );
                self.reply(k, |o| r.emit(o));
                self.restart_latency_probes(k, true);
            }
            of13::OFPT_BARRIER_REQUEST => {
                self.tally.barrier_request += 1;
                self.reply(k, |o| {
                    of13::Repr::new(xid, of13::Message::BarrierReply).emit(o)
                });
            }
            of13::OFPT_MULTIPART_REQUEST => {
                self.tally.stats_request += 1;
                let mp = if msg.len() >= 16 {
                    be16(msg, 8)
                } else {
                    u16::MAX
                };
                let dpid = self.sw[k].dpid;
                let body = match mp {
                    of13::OFPMP_DESC => Some(of13::MultipartBody::Desc(desc(dpid))),
                    of13::OFPMP_PORT_DESC => Some(of13::MultipartBody::PortDesc(
                        (1..=4u32)
                            .map(|p| of13::Port {
                                port_no: p,
                                hw_addr: [0, 0, 0, 0, dpid as u8, p as u8],
                                name: format!("s{dpid}-eth{p}"),
                                curr: 0x2000 | 0x800,
                                curr_speed: 10_000_000,
                                max_speed: 10_000_000,
                                ..Default::default()
                            })
                            .collect(),
                    )),
                    _ => None,
                };
                match body {
                    Some(body) => {
                        self.reply(k, |o| {
                            of13::Repr::new(xid, of13::Message::MultipartReply { flags: 0, body })
                                .emit(o)
                        });
                        if mp == of13::OFPMP_DESC {
                            self.restart_latency_probes(k, true);
                        }
                    }
                    None => {
                        // OFPET_BAD_REQUEST / OFPBRC_BAD_MULTIPART
                        let e = error_msg(OFP13_VERSION, xid, 1, 2, msg);
                        self.reply(k, |o| o.extend_from_slice(&e));
                    }
                }
            }
            of13::OFPT_EXPERIMENTER => {
                self.tally.vendor += 1;
                // OFPET_BAD_REQUEST / OFPBRC_BAD_EXPERIMENTER
                let e = error_msg(OFP13_VERSION, xid, 1, 3, msg);
                self.reply(k, |o| o.extend_from_slice(&e));
                self.restart_latency_probes(k, false);
            }
            of13::OFPT_ERROR => {
                self.controller_error(k, msg);
            }
            _ => {
                self.tally.other += 1;
                self.warn_once(k, ty);
            }
        }
        Ok(())
    }
}

/// An ERROR message carrying up to 64 bytes of the offending message.
pub fn error_msg(version: u8, xid: u32, err_type: u16, code: u16, offending: &[u8]) -> Vec<u8> {
    let data = offending[..offending.len().min(64)].to_vec();
    if version == OFP13_VERSION {
        of13::Repr::new(
            xid,
            of13::Message::Error {
                err_type,
                code,
                data,
            },
        )
        .to_bytes()
    } else {
        let mut v = of10::Repr::new(
            xid,
            of10::Message::Error {
                err_type,
                code,
                data,
            },
        )
        .to_bytes();
        v[0] = version;
        v
    }
}

/// The 4 ports of cbench's FEATURES_REPLY (a captured reply,
/// fakeswitch.c:203-221): the same hardware addresses and names for every
/// switch, curr = 10GB_FD | COPPER, everything else zero.
const CBENCH_PORTS: [([u8; 6], &str); 4] = [
    ([0x1a, 0xc1, 0x51, 0xff, 0xef, 0x8a], "veth1"),
    ([0xce, 0x2f, 0xa2, 0x87, 0xf6, 0x70], "veth3"),
    ([0xca, 0x8a, 0x1e, 0xf3, 0x77, 0xef], "veth5"),
    ([0xfa, 0xbc, 0x77, 0x8d, 0x7e, 0x0b], "veth7"),
];

/// The emulated switch's FEATURES_REPLY body (224 bytes on the wire,
/// byte-for-byte cbench's apart from the datapath_id).
pub fn features10(dpid: u64) -> of10::SwitchFeatures {
    of10::SwitchFeatures {
        datapath_id: dpid,
        n_buffers: 256,
        n_tables: 2,
        capabilities: 0,
        actions: 0x7ff,
        ports: CBENCH_PORTS
            .iter()
            .zip(1u16..)
            .map(|(&(hw_addr, name), port_no)| of10::PhyPort {
                port_no,
                hw_addr,
                name: name.into(),
                curr: 0xc0,
                ..Default::default()
            })
            .collect(),
    }
}

fn desc(dpid: u64) -> of10::DescStats {
    of10::DescStats {
        mfr_desc: "commbench".into(),
        hw_desc: "cbench-compatible switch emulator".into(),
        sw_desc: env!("CARGO_PKG_VERSION").into(),
        serial_num: "None".into(),
        dp_desc: format!("dpid {dpid}"),
    }
}

#[cfg(test)]
mod tests;
