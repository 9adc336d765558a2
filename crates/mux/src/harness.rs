//! One measured run per configuration and repeat: start a fresh server
//! process (or talk to a remote one), connect every client, wait until the
//! server has accepted them all, take the server's counters, run the
//! rounds, take them again, close every connection, wait until the server
//! has closed them, take them a last time. Server CPU per round trip comes
//! from the server process's own getrusage between those points (rounds
//! only, and total with accept and close); client CPU from this process's.
//! Configurations are interleaved across repeats and summarised as medians
//! with min–max.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::process::{Child, ChildStdin, Command};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use commbench_core::rusage::{load_average, online_cpus, runnable_threads};
use commbench_core::stats::{LatencyHistogram, Summary};
use commbench_core::{Record, Recorder};

use crate::engine::{EngineKind, Lookup};
use crate::load::{self, ClientsKind, LoadConfig};
use crate::server::ServerStats;
use crate::token::Token;
use crate::{limits, MuxConfig, MuxError, PartialConnect, Remote, Result, SERVE_SUBCOMMAND};

/// Memory the io_uring server may spend on connection buffers.
pub const URING_BUF_BUDGET: u64 = 512 << 20;

/// Bytes per server read (and per io_uring connection buffer): the message
/// size within 4–64 KiB, smaller for io_uring when connections are many.
pub fn buf_size(size: usize, conns: usize) -> usize {
    let b = size.clamp(4096, 64 * 1024);
    let cap = (URING_BUF_BUDGET / conns.max(1) as u64).max(1024) as usize;
    b.min(cap)
}

/// How long to wait for a control answer.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(20);

/// A server this run talks to: a child on stdin/stdout, or a remote one
/// over TCP.
enum ServerHandle {
    Child {
        child: Child,
        stdin: Option<ChildStdin>,
        lines: Receiver<String>,
    },
    Remote {
        control: Option<RemoteControl>,
    },
}

/// A remote server's control channel: one connection per command (the
/// server closes control peers idle for a few seconds), each opened with
/// the run's token.
struct RemoteControl {
    addr: SocketAddr,
    token: Token,
}

impl RemoteControl {
    /// Sends `cmd` and returns the answer line.
    fn command(&self, cmd: &str) -> Result<String> {
        let a = self.addr;
        let s = TcpStream::connect_timeout(&a, Duration::from_secs(10))
            .map_err(|e| MuxError::io(format!("cannot reach the server's control port {a}"), e))?;
        let _ = s.set_read_timeout(Some(CONTROL_TIMEOUT));
        let _ = s.set_write_timeout(Some(CONTROL_TIMEOUT));
        let mut r = BufReader::new(
            s.try_clone()
                .map_err(|e| MuxError::io("control socket".into(), e))?,
        );
        let mut w = &s;
        w.write_all(format!("TOKEN {}\n{cmd}\n", self.token.hex()).as_bytes())
            .map_err(|e| MuxError::io(format!("control write to {a}"), e))?;
        let mut line = || -> Result<String> {
            let mut l = String::new();
            match std::io::Read::take(&mut r, 1 << 20).read_line(&mut l) {
                Ok(0) => Err(MuxError::Server(format!(
                    "the control connection to {a} closed without an answer"
                ))),
                Ok(_) => Ok(l.trim_end().to_owned()),
                Err(e) => Err(MuxError::io(format!("control read from {a}"), e)),
            }
        };
        let ok = line()?;
        if ok != "OK" {
            return Err(MuxError::Server(format!(
                "the server at {a} refused the control token ({ok}): give the token this server made \
                 (--control-token-file, {} or --control-token)",
                crate::token::TOKEN_ENV
            )));
        }
        line()
    }
}

impl ServerHandle {
    fn spawn(cfg: &MuxConfig, engine: EngineKind, lookup: Lookup) -> Result<(ServerHandle, u16)> {
        let exe = match &cfg.server_exe {
            Some(p) => p.clone(),
            None => std::env::current_exe()
                .map_err(|e| MuxError::io("cannot find this executable".into(), e))?,
        };
        let port = limits::pick_listen_port(Ipv4Addr::LOCALHOST);
        let mut cmd = Command::new(exe);
        cmd.args(SERVE_SUBCOMMAND)
            .arg("--engine")
            .arg(engine.as_str())
            .arg("--lookup")
            .arg(lookup.as_str())
            .arg("--protocol")
            .arg(cfg.protocol.as_str())
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--server-threads")
            .arg(cfg.server_threads.to_string())
            .arg("--buf")
            .arg(buf_size(cfg.size, cfg.conns).to_string())
            .arg("--max-conns")
            .arg(cfg.conns.to_string())
            .arg("--response-size")
            .arg(cfg.size.to_string())
            .arg("--control")
            .arg("stdio");
        if let Some(c) = &cfg.server_cpus {
            cmd.arg("--cpus").arg(c.to_string());
        }
        if cfg.extra_work_ns > 0 {
            cmd.arg("--extra-work-ns")
                .arg(cfg.extra_work_ns.to_string());
        }
        let p = crate::child::spawn_piped(&mut cmd, "the server process")?;
        let mut h = ServerHandle::Child {
            child: p.child,
            stdin: p.stdin,
            lines: p.lines,
        };
        let line = h.next_line(Duration::from_secs(30))?;
        let port = line
            .strip_prefix("READY ")
            .and_then(|p| p.trim().parse::<u16>().ok())
            .ok_or_else(|| MuxError::Server(format!("expected 'READY <port>', got {line:?}")))?;
        Ok((h, port))
    }

    fn remote(control: Option<SocketAddr>, token: Option<&Token>) -> Result<ServerHandle> {
        let control = match (control, token) {
            (None, _) => None,
            (Some(addr), Some(t)) => Some(RemoteControl {
                addr,
                token: t.clone(),
            }),
            (Some(a), None) => {
                return Err(MuxError::usage(format!(
                    "the control channel {a} needs the token mux serve made: give --control-token-file PATH \
                     (mux serve --control-token-file PATH writes it), {} or --control-token; or --control none",
                    crate::token::TOKEN_ENV
                )))
            }
        };
        Ok(ServerHandle::Remote { control })
    }

    fn next_line(&mut self, timeout: Duration) -> Result<String> {
        match self {
            ServerHandle::Child { child, lines, .. } => match lines.recv_timeout(timeout) {
                Ok(l) => Ok(l),
                Err(RecvTimeoutError::Timeout) => Err(MuxError::Server(format!(
                    "no answer from the server process in {timeout:?} (stalled)"
                ))),
                Err(RecvTimeoutError::Disconnected) => {
                    let st = child
                        .wait()
                        .map(|s| describe_exit(&s))
                        .unwrap_or_else(|e| e.to_string());
                    Err(MuxError::Server(format!("the server process ended: {st}")))
                }
            },
            ServerHandle::Remote { .. } => Err(MuxError::Server("no control line pending".into())),
        }
    }

    fn send(&mut self, cmd: &str) -> Result<()> {
        let w: &mut dyn Write = match self {
            ServerHandle::Child { stdin, .. } => match stdin {
                Some(s) => s,
                None => return Err(MuxError::Server("control input closed".into())),
            },
            ServerHandle::Remote { .. } => {
                return Err(MuxError::Server(format!(
                    "{cmd}: a remote server is asked one command per connection"
                )))
            }
        };
        w.write_all(cmd.as_bytes())
            .and_then(|_| w.write_all(b"\n"))
            .and_then(|_| w.flush())
            .map_err(|e| MuxError::Server(format!("cannot send {cmd} to the server: {e}")))
    }

    /// The server's counters now (None: a remote server without control).
    fn stats(&mut self) -> Result<Option<ServerStats>> {
        let l = match self {
            ServerHandle::Remote { control: None } => return Ok(None),
            ServerHandle::Remote { control: Some(c) } => c.command("STATS")?,
            ServerHandle::Child { .. } => {
                self.send("STATS")?;
                self.next_line(CONTROL_TIMEOUT)?
            }
        };
        serde_json::from_str(&l)
            .map(Some)
            .map_err(|e| MuxError::Server(format!("bad STATS answer {l:?}: {e}")))
    }

    /// Stops a child server and reaps it; remote servers keep running.
    fn finish(mut self) -> Result<Option<ServerStats>> {
        match &mut self {
            ServerHandle::Remote { .. } => self.stats(),
            ServerHandle::Child { .. } => {
                self.send("QUIT")?;
                let l = self.next_line(CONTROL_TIMEOUT)?;
                let s: ServerStats = serde_json::from_str(&l)
                    .map_err(|e| MuxError::Server(format!("bad final answer {l:?}: {e}")))?;
                if let ServerHandle::Child { child, stdin, .. } = &mut self {
                    drop(stdin.take());
                    let st = child
                        .wait()
                        .map_err(|e| MuxError::io("wait for the server".into(), e))?;
                    if !st.success() {
                        return Err(MuxError::Server(format!(
                            "the server process ended: {}",
                            describe_exit(&st)
                        )));
                    }
                }
                Ok(Some(s))
            }
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let ServerHandle::Child { child, stdin, .. } = self {
            drop(stdin.take());
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

fn describe_exit(s: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (_, Some(sig)) => format!("killed by signal {sig}"),
        _ => s.to_string(),
    }
}

/// What one run of one configuration measured.
#[derive(Debug)]
pub struct RunOne {
    pub connected: usize,
    pub connect_failures: u64,
    pub first_connect_error: Option<String>,
    pub connect_s: f64,
    pub rounds: load::Rounds,
    /// Server counters at: all accepted, rounds done, all closed; and at start.
    pub s_start: Option<ServerStats>,
    pub s_accepted: Option<ServerStats>,
    pub s_rounds: Option<ServerStats>,
    pub s_closed: Option<ServerStats>,
    pub runnable_max: u64,
}

fn wait_for(
    h: &mut ServerHandle,
    timeout: Duration,
    done: impl Fn(&ServerStats) -> bool,
) -> Result<Option<ServerStats>> {
    let deadline = Instant::now() + timeout;
    loop {
        let s = h.stats()?;
        match &s {
            None => return Ok(None),
            Some(st) if done(st) => return Ok(s),
            Some(_) if Instant::now() > deadline => return Ok(s),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Runs one configuration once.
pub fn run_one(cfg: &MuxConfig, engine: EngineKind, lookup: Lookup) -> Result<RunOne> {
    let (mut h, target) = match &cfg.remote {
        None => {
            let (h, port) = ServerHandle::spawn(cfg, engine, lookup)?;
            (
                h,
                SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)),
            )
        }
        Some(r) => (ServerHandle::remote(r.control, r.token.as_ref())?, r.target),
    };
    let lcfg = cfg.load_config(target)?;
    if let Some(c) = &cfg.client_cpus {
        // The connect phase and the control thread run here too.
        let _ = c.pin_current_thread();
    }
    let mut runnable_max = runnable_threads();
    let s_start = h.stats()?;
    let base_accepted = s_start.as_ref().map_or(0, |s| s.loops.accepted);
    let base_closed = s_start.as_ref().map_or(0, |s| s.loops.closed);
    let mut conn = if cfg.load_procs > 1 {
        LoadSide::Procs(crate::procs::Workers::start(cfg, target)?)
    } else {
        LoadSide::InProc(load::connect_all(&lcfg)?)
    };
    let connected = conn.connected();
    if connected < cfg.conns && !cfg.allow_partial {
        return Err(MuxError::Partial(PartialConnect::Fewer {
            connected,
            asked: cfg.conns,
            failed: conn.failures(),
            first: conn.first_connect_error_or_unknown(),
        }));
    }
    if connected == 0 {
        return Err(MuxError::Partial(PartialConnect::NoneMade {
            target,
            first: conn.first_connect_error_or_unknown(),
        }));
    }
    let base_accept_errors = s_start.as_ref().map_or(0, |s| s.loops.accept_errors);
    let base_refused = s_start.as_ref().map_or(0, |s| s.loops.refused);
    let s_accepted = wait_for(&mut h, cfg.timeout.min(Duration::from_secs(30)), |s| {
        s.loops.accepted - base_accepted >= connected as u64
            || s.loops.accept_errors > base_accept_errors
            || s.loops.refused > base_refused
    })?;
    if let Some(s) = &s_accepted {
        if s.loops.accepted - base_accepted < connected as u64 {
            let refused = s.loops.refused - base_refused;
            return Err(MuxError::Server(format!(
                "the server accepted only {} of {connected} connections{}",
                s.loops.accepted - base_accepted,
                if refused > 0 {
                    format!(
                        " and refused {refused}: it holds at most {} (its --max-conns, or what its \
                         RLIMIT_NOFILE of {} allows); raise them or lower --conns",
                        s.conn_limit, s.nofile
                    )
                } else if s.loops.accept_errors > base_accept_errors {
                    " (accept failed: out of file descriptors in the server?)".into()
                } else {
                    String::new()
                }
            )));
        }
    }
    runnable_max = runnable_max.max(runnable_threads());
    if cfg.warmup_rounds > 0 {
        conn.warm(&lcfg, cfg.warmup_rounds)?;
    }
    let s_accepted = if cfg.warmup_rounds > 0 {
        h.stats()?
    } else {
        s_accepted
    };
    let rounds = conn.rounds(&lcfg)?;
    if let Some(why) = rounds.open.as_ref().and_then(|o| o.tls.none_completed()) {
        return Err(MuxError::Unavailable(why));
    }
    // Failed requests were counted, not fatal; past a share the run is
    // partial, kept only when asked.
    if let Some(why) = rounds
        .open
        .as_ref()
        .and_then(|o| o.http.too_many_failures())
    {
        if !cfg.allow_partial {
            return Err(MuxError::Load(format!(
                "{why}: the server at {target} failed; fix it, or pass --allow-partial to keep the run (marked partial)"
            )));
        }
    }
    runnable_max = runnable_max.max(runnable_threads());
    let s_rounds = h.stats()?;
    conn.close()?;
    let s_closed = wait_for(&mut h, Duration::from_secs(10), |s| {
        s.loops.closed - base_closed >= connected as u64
    })?;
    let s_final = h.finish()?;
    Ok(RunOne {
        connected,
        connect_failures: conn.failures(),
        first_connect_error: conn.first_error(),
        connect_s: conn.connect_s(),
        rounds,
        s_start,
        s_accepted,
        s_rounds,
        s_closed: s_closed.or(s_final),
        runnable_max,
    })
}

/// The load side of a run: in this process, or split over worker processes.
enum LoadSide {
    InProc(load::Connected),
    Procs(crate::procs::Workers),
}

impl LoadSide {
    fn connected(&self) -> usize {
        match self {
            LoadSide::InProc(c) => c.fds.len(),
            LoadSide::Procs(w) => w.connected,
        }
    }
    fn failures(&self) -> u64 {
        match self {
            LoadSide::InProc(c) => c.failures,
            LoadSide::Procs(w) => w.failures,
        }
    }
    fn connect_s(&self) -> f64 {
        match self {
            LoadSide::InProc(c) => c.connect_s,
            LoadSide::Procs(w) => w.connect_s,
        }
    }
    fn first_error(&self) -> Option<String> {
        match self {
            LoadSide::InProc(c) => c.first_error.clone(),
            LoadSide::Procs(w) => w.first_error.clone(),
        }
    }
    fn first_connect_error_or_unknown(&self) -> String {
        self.first_error()
            .unwrap_or_else(|| "no error reported".into())
    }
    fn warm(&mut self, lcfg: &LoadConfig, rounds: u64) -> Result<()> {
        match self {
            LoadSide::InProc(c) => {
                let warm = LoadConfig {
                    rounds,
                    rounds_for: None,
                    ..lcfg.clone()
                };
                load::run_rounds(&warm, &c.fds).map(|_| ())
            }
            LoadSide::Procs(w) => w.warm(),
        }
    }
    fn rounds(&mut self, lcfg: &LoadConfig) -> Result<load::Rounds> {
        match self {
            LoadSide::InProc(c) => load::run_rounds(lcfg, &c.fds),
            LoadSide::Procs(w) => w.rounds(),
        }
    }
    fn close(&mut self) -> Result<()> {
        match self {
            LoadSide::InProc(c) => {
                c.close();
                Ok(())
            }
            LoadSide::Procs(w) => w.close(),
        }
    }
}

/// One configuration's result over its repeats.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConfigResult {
    pub engine: EngineKind,
    pub lookup: Lookup,
    /// Each repeat's headline figures (server and client CPU per round
    /// trip, round trips per second), for their samples and intervals.
    #[serde(skip)]
    pub per_run: Vec<Record>,
    /// False for a remote server without a control connection: engine and
    /// lookup are not known.
    #[serde(skip)]
    pub server_known: bool,
    /// A remote server without a control channel: why its CPU is unknown
    /// ("server CPU unknown: nothing answers on ...").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_unknown: Option<String>,
    pub runs: u32,
    pub connected: usize,
    pub connect_failures: u64,
    /// Connections the server refused (at its limit or out of
    /// descriptors) over the runs; None: server counters unknown.
    pub server_refused: Option<u64>,
    pub partial: bool,
    pub round_trips: u64,
    pub rt_per_s: f64,
    pub rt_per_s_min: f64,
    pub rt_per_s_max: f64,
    pub server_user_us_per_rt: Option<f64>,
    pub server_sys_us_per_rt: Option<f64>,
    pub server_cpu_us_per_rt: Option<f64>,
    pub server_cpu_us_per_rt_total: Option<f64>,
    /// The rounds window held less server CPU than the floor
    /// (`core::rusage::MIN_CPU_S`): user and sys are null, and this says
    /// so and what to raise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub too_short: Option<String>,
    pub client_cpu_us_per_rt: f64,
    /// The load process's CPU per round trip (request) split into user
    /// and system time (what TLS costs shows in user time).
    pub client_user_us_per_rt: Option<f64>,
    pub client_sys_us_per_rt: Option<f64>,
    pub events_per_wait: Option<f64>,
    pub waits_per_rt: Option<f64>,
    pub syscalls_per_rt: Option<f64>,
    pub scan_steps_per_rt: Option<f64>,
    pub connect_s: f64,
    pub connects_per_s: f64,
    pub latency_ns: Summary,
    pub uring_deferred: Option<bool>,
    pub oversubscribed: bool,
    /// Open-loop figures (None: closed loop, one request in flight).
    #[serde(flatten)]
    pub open: Option<OpenResult>,
    /// Each run's open-loop histograms and counts, kept for a segment
    /// file (`--segment`); empty otherwise.
    #[serde(skip)]
    pub open_runs: Vec<crate::open::OpenOut>,
}

/// What an open-loop (or windowed) configuration measured over its repeats.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OpenResult {
    /// Asked requests/s over all connections (null: closed loop).
    pub rate_asked: Option<f64>,
    /// Measured requests over the span of their sends (median of repeats).
    pub rate_achieved: Option<f64>,
    /// Latency from the intended send time (coordinated omission corrected).
    pub corrected_ns: Summary,
    /// Latency from the write that sent the request.
    pub raw_ns: Summary,
    /// How late the generator sent requests that left when due.
    pub lag_ns: Summary,
    /// Measured requests that waited in the generator for a window slot.
    pub held: u64,
    pub scheduled: u64,
    pub completed: u64,
    /// HTTP responses by class and failures (null for echo protocols).
    pub http: Option<crate::http1::Counts>,
    /// The schedule lag's p99 exceeded its bound: the load generator, not
    /// the server, was measured.
    pub generator_limited: bool,
    /// The achieved rate is more than 1% under the asked one.
    pub rate_short: bool,
    /// What the marks above mean for this run (null: nothing to say).
    pub note: Option<String>,
    /// HTTPS handshakes: full and resumed, failures, what was negotiated,
    /// handshake latency from the intended start (null without --tls).
    pub tls: Option<crate::tls::TlsResult>,
}

/// Folds the open-loop parts of a configuration's runs.
fn open_result(cfg: &MuxConfig, runs: &[RunOne]) -> Option<OpenResult> {
    let outs: Vec<&crate::open::OpenOut> =
        runs.iter().filter_map(|r| r.rounds.open.as_ref()).collect();
    let achieved = outs.iter().filter_map(|o| o.achieved_rate()).collect();
    open_figures(cfg, &outs, achieved, cfg.tls.is_some())
}

/// The open-loop figures of runs (repeats, or segments added by `merge`)
/// whose achieved rates are given; `tls`: they ran HTTPS (the handshake
/// figures are theirs to report).
pub(crate) fn open_figures(
    cfg: &MuxConfig,
    outs: &[&crate::open::OpenOut],
    achieved: Vec<f64>,
    tls: bool,
) -> Option<OpenResult> {
    if outs.is_empty() {
        return None;
    }
    let mut all = crate::open::OpenOut::default();
    for o in outs {
        all.corrected.merge(&o.corrected);
        all.raw.merge(&o.raw);
        all.lag.merge(&o.lag);
        all.held += o.held;
        all.scheduled += o.scheduled;
        all.completed += o.completed;
        all.http.merge(&o.http);
        all.tls.merge(&o.tls);
    }
    let rate_asked = cfg.open.rate;
    let rate_achieved = finite_median(achieved);
    let lag = all.lag.summary();
    let bound_ns = cfg.open.max_lag.as_nanos() as f64;
    let generator_limited = rate_asked.is_some() && lag.n > 0 && lag.p99 > bound_ns;
    let rate_short = match (rate_asked, rate_achieved) {
        (Some(a), Some(g)) => g < a * (1.0 - crate::open::RATE_TOLERANCE),
        _ => false,
    };
    let note = if generator_limited {
        Some(format!(
            "the generator, not the server, was measured: schedule lag p99 {:.1} µs is over the {:.1} µs bound (corrected latency includes the generator's own delay); lower --rate, add --load-threads or free a CPU",
            lag.p99 / 1e3,
            bound_ns / 1e3
        ))
    } else if rate_short {
        Some(format!(
            "asked {:.0} req/s, achieved {:.0} req/s: {}",
            rate_asked.unwrap_or(f64::NAN),
            rate_achieved.unwrap_or(f64::NAN),
            if all.held > 0 {
                "the server did not keep up (requests waited for a window slot; raise --in-flight to offer more)"
            } else {
                "the generator fell behind its schedule"
            }
        ))
    } else {
        None
    };
    Some(OpenResult {
        rate_asked,
        rate_achieved,
        corrected_ns: all.corrected.summary(),
        raw_ns: all.raw.summary(),
        lag_ns: lag,
        held: all.held,
        scheduled: all.scheduled,
        completed: all.completed,
        http: (cfg.protocol == crate::Protocol::Http1).then_some(all.http),
        generator_limited,
        rate_short,
        note,
        tls: tls.then(|| all.tls.result()),
    })
}

/// The open-loop figures every repeat carries as top-level metrics (so
/// that repeats give them intervals).
pub(crate) fn push_flat(x: &mut Record, c: &Summary, w: &Summary, l: &Summary) {
    x.push_metric("corrected_p50_ns", c.p50);
    x.push_metric("corrected_p99_ns", c.p99);
    x.push_metric("corrected_p999_ns", c.p999);
    x.push_metric("raw_p99_ns", w.p99);
    x.push_metric("raw_p999_ns", w.p999);
    x.push_metric("lag_p99_ns", l.p99);
}

/// The record test of a configuration: `open` with a rate, else `echo`.
pub fn test_name(cfg: &MuxConfig) -> &'static str {
    if cfg.open.rate.is_some() {
        "open"
    } else {
        "echo"
    }
}

/// The median of the finite values of `v` (core's, as every lab's); None
/// when there are none.
fn finite_median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    (!v.is_empty()).then(|| commbench_core::stats::median(&mut v))
}

fn diff_cpu(a: &Option<ServerStats>, b: &Option<ServerStats>) -> Option<(f64, f64)> {
    match (a, b) {
        (Some(a), Some(b)) => Some((b.user_s - a.user_s, b.sys_s - a.sys_s)),
        _ => None,
    }
}

fn aggregate(cfg: &MuxConfig, engine: EngineKind, lookup: Lookup, runs: &[RunOne]) -> ConfigResult {
    let rts: Vec<f64> = runs
        .iter()
        .map(|r| r.rounds.round_trips as f64 / r.rounds.wall_s.max(1e-9))
        .collect();
    let per_rt = |f: &dyn Fn(&RunOne) -> Option<f64>| -> Option<f64> {
        finite_median(
            runs.iter()
                .filter_map(|r| f(r).map(|x| x / r.rounds.round_trips.max(1) as f64))
                .collect(),
        )
    };
    // The server's CPU in the rounds window: its total is exact, its
    // user/sys split is sampled per scheduler tick, so under the floor
    // (core::rusage::MIN_CPU_S) the split is not reported.
    let window_cpu = |r: &RunOne| diff_cpu(&r.s_accepted, &r.s_rounds).map(|c| c.0 + c.1);
    let too_short = runs
        .iter()
        .filter_map(window_cpu)
        .reduce(f64::min)
        .and_then(|cpu| {
            commbench_core::rusage::too_short(
                "the server's user/sys split",
                cpu,
                "raise --rounds (or --conns) for a longer run",
            )
        });
    let split = |r: &RunOne, f: fn((f64, f64)) -> f64| {
        if too_short.is_some() {
            return None;
        }
        diff_cpu(&r.s_accepted, &r.s_rounds).map(|c| f(c) * 1e6)
    };
    let srv_user = per_rt(&|r| split(r, |c| c.0));
    let srv_sys = per_rt(&|r| split(r, |c| c.1));
    let srv_cpu = per_rt(&|r| window_cpu(r).map(|c| c * 1e6));
    let srv_total = per_rt(&|r| diff_cpu(&r.s_start, &r.s_closed).map(|c| (c.0 + c.1) * 1e6));
    let loop_diff = |r: &RunOne, f: &dyn Fn(&ServerStats) -> u64| -> Option<f64> {
        match (&r.s_accepted, &r.s_rounds) {
            (Some(a), Some(b)) => Some(f(b).saturating_sub(f(a)) as f64),
            _ => None,
        }
    };
    let waits = per_rt(&|r| loop_diff(r, &|s| s.loops.waits));
    let syscalls = per_rt(&|r| loop_diff(r, &|s| s.loops.syscalls));
    let scan = per_rt(&|r| loop_diff(r, &|s| s.loops.scan_steps));
    let events_per_wait = finite_median(
        runs.iter()
            .filter_map(|r| {
                let w = loop_diff(r, &|s| s.loops.waits)?;
                let e = loop_diff(r, &|s| s.loops.events)?;
                (w > 0.0).then_some(e / w)
            })
            .collect(),
    );
    let client = per_rt(&|r| Some(r.rounds.usage.cpu_s() * 1e6)).unwrap_or(f64::NAN);
    let mut hist = LatencyHistogram::new();
    for r in runs {
        hist.merge(&r.rounds.latency);
    }
    let connected = runs.iter().map(|r| r.connected).min().unwrap_or(0);
    let cpus = online_cpus();
    let busy = cfg.server_threads + cfg.load_threads * cfg.load_procs;
    let per_run: Vec<Record> = runs
        .iter()
        .zip(&rts)
        .map(|(r, &rate)| {
            let n = r.rounds.round_trips.max(1) as f64;
            let cpu = diff_cpu(&r.s_accepted, &r.s_rounds);
            let mut x = Record::new("mux", test_name(cfg))
                .metric("rt_per_s", rate)
                .metric("server_cpu_us_per_rt", cpu.map(|c| (c.0 + c.1) * 1e6 / n))
                .metric("server_user_us_per_rt", split(r, |c| c.0).map(|u| u / n))
                .metric("server_sys_us_per_rt", split(r, |c| c.1).map(|u| u / n))
                .metric("client_cpu_us_per_rt", r.rounds.usage.cpu_s() * 1e6 / n)
                .metric("client_user_us_per_rt", r.rounds.usage.user_s * 1e6 / n)
                .metric("client_sys_us_per_rt", r.rounds.usage.sys_s * 1e6 / n);
            if let Some(o) = &r.rounds.open {
                x.push_metric("rate_achieved", o.achieved_rate());
                push_flat(
                    &mut x,
                    &o.corrected.summary(),
                    &o.raw.summary(),
                    &o.lag.summary(),
                );
            }
            x
        })
        .collect();
    ConfigResult {
        engine,
        lookup,
        per_run,
        server_known: !cfg.server_unknown(),
        server_unknown: cfg.remote.as_ref().and_then(|r| {
            r.control.is_none().then(|| {
                r.unknown
                    .clone()
                    .unwrap_or_else(|| "no control channel".into())
            })
        }),
        runs: runs.len() as u32,
        connected,
        connect_failures: runs.iter().map(|r| r.connect_failures).sum(),
        server_refused: runs
            .iter()
            .map(|r| match (&r.s_start, &r.s_closed) {
                (Some(a), Some(b)) => Some(b.loops.refused.saturating_sub(a.loops.refused)),
                _ => None,
            })
            .sum(),
        partial: connected < cfg.conns
            || runs.iter().any(|r| {
                r.rounds
                    .open
                    .as_ref()
                    .is_some_and(|o| o.http.too_many_failures().is_some())
            }),
        round_trips: runs.iter().map(|r| r.rounds.round_trips).sum(),
        rt_per_s: finite_median(rts.clone()).unwrap_or(f64::NAN),
        rt_per_s_min: rts.iter().cloned().fold(f64::INFINITY, f64::min),
        rt_per_s_max: rts.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
        server_user_us_per_rt: srv_user,
        server_sys_us_per_rt: srv_sys,
        server_cpu_us_per_rt: srv_cpu,
        too_short,
        server_cpu_us_per_rt_total: srv_total,
        client_cpu_us_per_rt: client,
        client_user_us_per_rt: per_rt(&|r| Some(r.rounds.usage.user_s * 1e6)),
        client_sys_us_per_rt: per_rt(&|r| Some(r.rounds.usage.sys_s * 1e6)),
        events_per_wait,
        waits_per_rt: waits,
        syscalls_per_rt: syscalls,
        scan_steps_per_rt: scan,
        connect_s: finite_median(runs.iter().map(|r| r.connect_s).collect()).unwrap_or(f64::NAN),
        connects_per_s: finite_median(
            runs.iter()
                .map(|r| r.connected as f64 / r.connect_s.max(1e-9))
                .collect(),
        )
        .unwrap_or(f64::NAN),
        latency_ns: hist.summary(),
        uring_deferred: runs
            .iter()
            .find_map(|r| r.s_start.as_ref().and_then(|s| s.uring_deferred)),
        oversubscribed: busy > cpus
            || runs.iter().any(|r| r.runnable_max as usize > cpus)
            || (cfg.clients == ClientsKind::Threads && cfg.active() > cpus),
        open: open_result(cfg, runs),
        open_runs: match cfg.segment {
            Some(_) => runs.iter().filter_map(|r| r.rounds.open.clone()).collect(),
            None => Vec::new(),
        },
    }
}

/// Everything one invocation measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MuxReport {
    pub results: Vec<ConfigResult>,
    /// Configurations that could not run (engine unavailable, ...), with why.
    pub skipped: Vec<(String, String)>,
    pub load_start: f64,
    pub load_end: f64,
}

/// Runs every engine × lookup, interleaved over `cfg.repeat` repeats; one
/// record per configuration goes to `rec`.
pub fn run(cfg: &MuxConfig, rec: &mut Recorder) -> Result<MuxReport> {
    let all: Vec<(EngineKind, Lookup)> = cfg
        .engines
        .iter()
        .flat_map(|&e| cfg.lookups.iter().map(move |&l| (e, l)))
        .collect();
    run_configs(cfg, &all, rec)
}

/// Like [`run`], but only the (engine, lookup) pairs of `wanted`, in that
/// order (`--reproduce-seed --quick` runs three of the six).
pub fn run_configs(
    cfg: &MuxConfig,
    wanted: &[(EngineKind, Lookup)],
    rec: &mut Recorder,
) -> Result<MuxReport> {
    cfg.validate()?;
    if cfg.netns {
        limits::enter_private_netns()?;
    }
    // A local server inherits this process's limit and holds every
    // connection; a remote run needs room for one worker's share here.
    limits::ensure_nofile(if cfg.remote.is_some() {
        cfg.conns.div_ceil(cfg.load_procs)
    } else {
        cfg.conns
    })?;
    let load_start = load_average()[0];
    let mut configs: Vec<(EngineKind, Lookup)> = Vec::new();
    let mut skipped = Vec::new();
    for &(e, l) in wanted {
        if e == EngineKind::IoUring && cfg.remote.is_none() {
            if let Some(why) = e.unavailable_here() {
                if !skipped.iter().any(|(s, _)| s == e.as_str()) {
                    rec.progress(&format!("mux: io-uring skipped: {why}"));
                    skipped.push((e.as_str().to_owned(), why));
                }
                continue;
            }
        }
        configs.push((e, l));
    }
    if configs.is_empty() {
        return Err(MuxError::Unavailable(format!(
            "no engine can run here: {}",
            skipped
                .iter()
                .map(|(e, w)| format!("{e}: {w}"))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    if let Some(Remote {
        control: Some(ctl),
        token,
        ..
    }) = &cfg.remote
    {
        // The remote server says what it runs.
        let mut h = ServerHandle::remote(Some(*ctl), token.as_ref())?;
        if let Some(s) = h.stats()? {
            let e = EngineKind::parse(&s.engine);
            let l = Lookup::parse(&s.lookup);
            if let (Some(e), Some(l)) = (e, l) {
                configs = vec![(e, l)];
            }
        }
    }
    let mut runs: Vec<Vec<RunOne>> = configs.iter().map(|_| Vec::new()).collect();
    // A remote server without control: its engine is unknown, so the
    // server is named by its address, never by an engine it may not run.
    for rep in 0..cfg.repeat {
        for (i, &(e, l)) in configs.iter().enumerate() {
            let what = match &cfg.remote {
                Some(r) if cfg.server_unknown() => format!("the server at {}", r.target),
                _ => format!("{} {}", e.as_str(), l.as_str()),
            };
            rec.progress(&format!(
                "mux: {what} N={} R={} K={} (repeat {}/{})",
                cfg.conns,
                cfg.rounds,
                cfg.size,
                rep + 1,
                cfg.repeat
            ));
            let r = run_one(cfg, e, l).map_err(|err| match err {
                MuxError::Usage(_) | MuxError::Partial(_) => err,
                other => MuxError::Load(format!("{what}: {other}")),
            })?;
            runs[i].push(r);
        }
    }
    let load_end = load_average()[0];
    let results: Vec<ConfigResult> = configs
        .iter()
        .zip(&runs)
        .map(|(&(e, l), rs)| aggregate(cfg, e, l, rs))
        .collect();
    for r in &results {
        rec.push(record(cfg, r, load_start, load_end));
    }
    Ok(MuxReport {
        results,
        skipped,
        load_start,
        load_end,
    })
}

/// The record of one configuration.
pub fn record(cfg: &MuxConfig, r: &ConfigResult, load_start: f64, load_end: f64) -> Record {
    let unknown = cfg.server_unknown();
    let mut rec = Record::new("mux", test_name(cfg))
        .param(
            "engine",
            if unknown {
                "unknown"
            } else {
                r.engine.as_str()
            },
        )
        .param(
            "lookup",
            if unknown {
                "unknown"
            } else {
                r.lookup.as_str()
            },
        )
        .param("conns", cfg.conns)
        .param("active", cfg.active())
        .param("rounds", cfg.rounds)
        .param("warmup_rounds_omitted", cfg.warmup_rounds)
        .param("size", cfg.size)
        .param("protocol", cfg.protocol.as_str())
        .param("clients", cfg.clients.as_str())
        .param("server_threads", cfg.server_threads)
        .param("load_threads", cfg.load_threads)
        .param("load_procs", cfg.load_procs)
        .param("repeat", cfg.repeat)
        .param("netns", cfg.netns)
        .param(
            "target",
            cfg.remote
                .as_ref()
                .map(|r| r.target.to_string())
                .unwrap_or_else(|| "local".into()),
        );
    if cfg.extra_work_ns > 0 {
        rec.push_param("extra_work_ns", cfg.extra_work_ns);
    }
    if let Some(d) = cfg.rounds_for {
        rec.push_param("rounds_for_s", d.as_secs_f64());
    }
    if let Some(s) = &cfg.segment {
        rec.push_param("segment", format!("{}/{}", s.index, s.count));
    }
    if cfg.open.rate.is_some() || cfg.open.in_flight > 1 || cfg.protocol == crate::Protocol::Http1 {
        rec.push_param("rate", cfg.open.rate);
        rec.push_param(
            "arrivals",
            cfg.open.rate.map(|_| cfg.open.arrivals.as_str()),
        );
        rec.push_param("in_flight", cfg.open.in_flight);
        rec.push_param(
            "warmup_s",
            cfg.open.rate.map(|_| cfg.open.warmup.as_secs_f64()),
        );
        rec.push_param(
            "duration_s",
            cfg.open.rate.map(|_| cfg.open.duration.as_secs_f64()),
        );
        rec.push_param("max_lag_us", cfg.open.max_lag.as_secs_f64() * 1e6);
    }
    if cfg.protocol == crate::Protocol::Http1 {
        rec.push_param("method", &cfg.http.method);
        rec.push_param("path", &cfg.http.path);
        // Only when set: records of plain keep-alive runs keep their
        // parameters (and so still match older ones in compare).
        if let Some(t) = &cfg.tls {
            rec.push_param("tls", t.spec.version.as_str());
        }
        if cfg.http.close {
            rec.push_param("conn_per_request", true);
        }
    }
    let ser = serde_json::to_value(r).unwrap_or_default();
    if let serde_json::Value::Object(m) = ser {
        for (k, v) in m {
            if k == "engine" || k == "lookup" {
                continue;
            }
            rec.metrics.insert(k, v);
        }
    }
    if let Some(o) = &r.open {
        push_flat(&mut rec, &o.corrected_ns, &o.raw_ns, &o.lag_ns);
    }
    if r.per_run.len() > 1 {
        // Every declared metric over the repeats (separate server
        // processes, interleaved): samples, median, 95% interval.
        commbench_core::lab::attach_repeats(&crate::lab::MuxLab, &mut rec, &r.per_run);
    }
    rec.push_metric("status", status(r));
    rec.push_metric("load_start", load_start);
    rec.push_metric("load_end", load_end);
    rec.push_metric("oversubscribed", r.oversubscribed);
    rec.push_metric(
        "server_cpus",
        cfg.server_cpus.as_ref().map(|c| c.to_string()),
    );
    rec.push_metric(
        "client_cpus",
        cfg.client_cpus.as_ref().map(|c| c.to_string()),
    );
    rec.push_metric(
        "placement",
        commbench_core::placement::describe(
            &[
                ("server", cfg.server_cpus.as_ref()),
                ("client", cfg.client_cpus.as_ref()),
            ],
            &[],
        ),
    );
    rec.push_metric(
        commbench_core::lab::CROSS_CPU,
        commbench_core::placement::crosses_cpus(&[
            cfg.server_cpus.as_ref(),
            cfg.client_cpus.as_ref(),
        ]),
    );
    rec
}

/// A configuration's status word: what it could not do, or ok.
pub fn status(r: &ConfigResult) -> &'static str {
    status_of(r.partial, r.open.as_ref())
}

/// The status word of a run that was `partial` or not, with its open-loop
/// figures.
pub(crate) fn status_of(partial: bool, o: Option<&OpenResult>) -> &'static str {
    if partial {
        "partial"
    } else if o.is_some_and(|o| o.generator_limited) {
        "generator-limited"
    } else if o.is_some_and(|o| o.rate_short) {
        "rate-short"
    } else {
        "ok"
    }
}

fn fmt_opt(v: Option<f64>, prec: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.prec$}"),
        _ => "-".into(),
    }
}

/// The side-by-side table a person reads (every field is in the JSON/CSV).
pub fn summary_table(report: &MuxReport) -> String {
    if report.results.iter().any(|r| r.open.is_some()) {
        return open_table(report);
    }
    let mut out = String::new();
    let header = [
        "engine",
        "lookup",
        "conns",
        "rt/s",
        "min-max",
        "srv us/rt",
        "user",
        "sys",
        "w/ accept+close",
        "cli us/rt",
        "ev/wait",
        "sysc/rt",
        "p50 us",
        "p99 us",
        "p99.99 us",
        "status",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in &report.results {
        let lat = &r.latency_ns;
        let (e, l) = if r.server_known {
            (r.engine.as_str(), r.lookup.as_str())
        } else {
            ("unknown", "-")
        };
        rows.push(vec![
            e.into(),
            l.into(),
            r.connected.to_string(),
            format!("{:.0}", r.rt_per_s),
            format!("{:.0}-{:.0}", r.rt_per_s_min, r.rt_per_s_max),
            fmt_opt(r.server_cpu_us_per_rt, 2),
            split_cell(r, r.server_user_us_per_rt),
            split_cell(r, r.server_sys_us_per_rt),
            fmt_opt(r.server_cpu_us_per_rt_total, 2),
            fmt_opt(Some(r.client_cpu_us_per_rt), 2),
            fmt_opt(r.events_per_wait, 1),
            fmt_opt(r.syscalls_per_rt, 2),
            fmt_opt(Some(lat.p50 / 1e3), 1),
            fmt_opt(Some(lat.p99 / 1e3), 1),
            fmt_opt(Some(lat.p9999 / 1e3), 1),
            if r.partial {
                "PARTIAL".into()
            } else if r.oversubscribed {
                "ok (oversubscribed)".into()
            } else {
                "ok".into()
            },
        ]);
    }
    out.push_str(&aligned(&rows));
    out.push_str(&unknown_lines(report));
    for (e, why) in &report.skipped {
        out.push_str(&format!("{e}: skipped: {why}\n"));
    }
    out
}

/// A user or sys cell: "too short" when the run was under the floor.
fn split_cell(r: &ConfigResult, v: Option<f64>) -> String {
    match &r.too_short {
        Some(_) => "too short".into(),
        None => fmt_opt(v, 2),
    }
}

/// Lines under a table: "server CPU unknown: why" when the server had no
/// control channel (its CPU columns show "-", never a measured 0), and why
/// a configuration's user/sys cells say "too short".
fn unknown_lines(report: &MuxReport) -> String {
    let mut out = String::new();
    let unknown = report
        .results
        .iter()
        .filter_map(|r| r.server_unknown.as_deref())
        .map(|why| format!("server CPU unknown: {why}\n"));
    let short = report.results.iter().filter_map(|r| {
        r.too_short
            .as_deref()
            .map(|n| format!("{} {}: {n}\n", r.engine.as_str(), r.lookup.as_str()))
    });
    for line in unknown.chain(short) {
        if !out.contains(&line) {
            out.push_str(&line);
        }
    }
    out
}

/// The open-loop table: asked and achieved rate, corrected and raw
/// latency, schedule lag, status — and every run's note under it.
fn open_table(report: &MuxReport) -> String {
    let header = [
        "engine",
        "lookup",
        "conns",
        "rate",
        "achieved",
        "srv us/req",
        "cli us/req",
        "corr p50",
        "corr p99",
        "corr p99.9",
        "corr max",
        "raw p99",
        "raw p99.9",
        "lag p99",
        "lag max",
        "non-2xx",
        "status",
    ];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    let us = |x: f64| fmt_opt(Some(x / 1e3), 1);
    let mut notes = Vec::new();
    for r in &report.results {
        let Some(o) = &r.open else { continue };
        let (e, l) = if r.server_known {
            (r.engine.as_str(), r.lookup.as_str())
        } else {
            ("unknown", "-")
        };
        rows.push(vec![
            e.into(),
            l.into(),
            r.connected.to_string(),
            fmt_opt(o.rate_asked, 0),
            fmt_opt(o.rate_achieved.or(Some(r.rt_per_s)), 0),
            fmt_opt(r.server_cpu_us_per_rt, 2),
            fmt_opt(Some(r.client_cpu_us_per_rt), 2),
            us(o.corrected_ns.p50),
            us(o.corrected_ns.p99),
            us(o.corrected_ns.p999),
            us(o.corrected_ns.max),
            us(o.raw_ns.p99),
            us(o.raw_ns.p999),
            us(o.lag_ns.p99),
            us(o.lag_ns.max),
            o.http
                .map(|h| (h.non_2xx() + h.errors).to_string())
                .unwrap_or_else(|| "-".into()),
            status(r).to_uppercase().replace("OK", "ok"),
        ]);
        if let Some(n) = &o.note {
            notes.push(format!("{} {}: {n}", e, l));
        }
    }
    let mut out = String::new();
    out.push_str(&aligned(&rows));
    out.push_str("latencies in µs; corr = from the intended send time (coordinated omission corrected), raw = from the write\n");
    for r in &report.results {
        if let Some(t) = r.open.as_ref().and_then(|o| o.tls.as_ref()) {
            out.push_str(&tls_line(r, t));
        }
    }
    for n in notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out.push_str(&unknown_lines(report));
    for (e, why) in &report.skipped {
        out.push_str(&format!("{e}: skipped: {why}\n"));
    }
    out
}

/// The TLS line under the open-loop table: what was negotiated, the
/// handshakes, their latency from the intended start, and the load side's
/// CPU per request split into user and system time.
fn tls_line(r: &ConfigResult, t: &crate::tls::TlsResult) -> String {
    let h = &t.handshake_ns;
    let us = |x: f64| fmt_opt(Some(x / 1e3), 1);
    let mut s = format!(
        "TLS: {} {} (ALPN {}): {} handshakes ({} full, {} resumed), {} failed",
        t.version.as_deref().unwrap_or("-"),
        t.cipher.as_deref().unwrap_or("-"),
        t.alpn.as_deref().unwrap_or("-"),
        t.handshakes,
        t.full,
        t.resumed,
        t.failed
    );
    if let Some(e) = &t.first_error {
        s.push_str(&format!(" (first: {e})"));
    }
    if h.n > 0 {
        s.push_str(&format!(
            "; handshake from the intended start p50 {} p90 {} p99 {} p99.9 {} p99.99 {} µs",
            us(h.p50),
            us(h.p90),
            us(h.p99),
            us(h.p999),
            us(h.p9999)
        ));
    }
    // A run of 500 requests printed "user 0.00 µs, sys 93.98 µs" as if
    // measured: the kernel splits CPU time by ticks, so under the floor
    // the split is said to be too short (the server side said so already).
    let cpu_s = r.client_cpu_us_per_rt * r.round_trips as f64 / r.runs.max(1) as f64 / 1e6;
    match commbench_core::rusage::too_short(
        "the load side's user/sys split",
        cpu_s,
        "raise --duration or --rate",
    ) {
        Some(why) => s.push_str(&format!(
            "; load CPU per request: {} µs ({why})\n",
            fmt_opt(Some(r.client_cpu_us_per_rt), 2)
        )),
        None => s.push_str(&format!(
            "; load CPU per request: user {} µs, sys {} µs\n",
            fmt_opt(r.client_user_us_per_rt, 2),
            fmt_opt(r.client_sys_us_per_rt, 2)
        )),
    }
    s
}

/// Rows as aligned columns: the first two and the last left-aligned (names
/// and status), the numbers between right-aligned.
fn aligned(rows: &[Vec<String>]) -> String {
    let cols = rows.first().map_or(0, Vec::len);
    let w: Vec<usize> = (0..cols)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i < 2 || i + 1 == cols {
                    format!("{c:<w$}", w = w[i])
                } else {
                    format!("{c:>w$}", w = w[i])
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stats(user_s: f64, sys_s: f64) -> ServerStats {
        let mut v = serde_json::to_value(crate::engine::LoopStats::default()).unwrap();
        let m = v.as_object_mut().unwrap();
        for (k, x) in [
            ("engine", json!("poll")),
            ("lookup", json!("index")),
            ("threads", json!(1)),
            ("user_s", json!(user_s)),
            ("sys_s", json!(sys_s)),
            ("voluntary_ctx", json!(0)),
            ("involuntary_ctx", json!(0)),
            ("uring_deferred", serde_json::Value::Null),
            ("nofile", json!(1024)),
        ] {
            m.insert(k.into(), x);
        }
        serde_json::from_value(v).unwrap()
    }

    /// One run whose rounds window held `user_s` + `sys_s` of server CPU.
    fn run(user_s: f64, sys_s: f64, round_trips: u64) -> RunOne {
        let mut latency = LatencyHistogram::new();
        latency.record_ns(10_000);
        RunOne {
            connected: 500,
            connect_failures: 0,
            first_connect_error: None,
            connect_s: 0.01,
            rounds: load::Rounds {
                round_trips,
                wall_s: 0.1,
                latency,
                usage: commbench_core::rusage::Usage::default(),
                waits: 0,
                events: 0,
                bytes: 0,
                open: None,
            },
            s_start: Some(stats(1.0, 1.0)),
            s_accepted: Some(stats(1.0, 1.0)),
            s_rounds: Some(stats(1.0 + user_s, 1.0 + sys_s)),
            s_closed: Some(stats(1.0 + user_s, 1.0 + sys_s)),
            runnable_max: 1,
        }
    }

    /// A TLS run of 500 requests printed "load CPU per request: user 0.00
    /// µs, sys 93.98 µs" with no word that the split was too short to
    /// measure; the server side said it.
    #[test]
    fn a_short_tls_run_printed_the_load_sides_user_sys_split_as_measured() {
        let cfg = MuxConfig::default();
        let r = aggregate(
            &cfg,
            EngineKind::Poll,
            Lookup::Index,
            &[run(0.0, 0.012, 500)],
        );
        let t = crate::tls::TlsResult {
            handshakes: 2,
            full: 2,
            resumed: 0,
            failed: 0,
            first_error: None,
            version: Some("TLSv1.3".into()),
            cipher: None,
            alpn: None,
            handshake_ns: commbench_core::stats::Summary::empty(),
        };
        let line = tls_line(&r, &t);
        assert!(
            line.contains("too short to measure the load side's user/sys split"),
            "{line}"
        );
        assert!(!line.contains("user 0.00"), "{line}");
    }

    /// `mux --conns 500 --rounds 10` showed the server's `user 0.00` µs
    /// per round trip: 20 ms of CPU, under two scheduler ticks of it in
    /// user mode. Under the floor the split is "too short", never 0.
    #[test]
    fn a_run_too_short_to_measure_shows_no_user_sys_split_never_a_zero() {
        let cfg = MuxConfig::default();
        let r = aggregate(
            &cfg,
            EngineKind::Poll,
            Lookup::Index,
            &[run(0.0, 0.012, 5000)],
        );
        assert_eq!(r.server_user_us_per_rt, None);
        assert_eq!(r.server_sys_us_per_rt, None);
        // The total is exact (the scheduler's runtime): still reported.
        assert!((r.server_cpu_us_per_rt.unwrap() - 2.4).abs() < 1e-9);
        let note = r.too_short.clone().unwrap();
        assert!(note.starts_with("too short to measure"), "{note}");
        assert!(
            note.contains("12.0 ms of CPU, under the floor of 40 ms"),
            "{note}"
        );
        assert!(note.contains("raise --rounds"), "{note}");
        let rec = record(&cfg, &r, 0.0, 0.0);
        assert!(rec.metrics["server_user_us_per_rt"].is_null());
        assert_eq!(rec.metrics["too_short"], json!(note));
        let table = summary_table(&MuxReport {
            results: vec![r],
            skipped: Vec::new(),
            load_start: 0.0,
            load_end: 0.0,
        });
        let row = table.lines().nth(1).unwrap();
        assert!(row.contains("2.40  too short  too short"), "{table}");
        assert!(
            table.contains("poll index: too short to measure"),
            "{table}"
        );
        // Above the floor the split is a measurement.
        let r = aggregate(
            &cfg,
            EngineKind::Poll,
            Lookup::Index,
            &[run(0.1, 0.3, 5000)],
        );
        assert!(r.too_short.is_none());
        assert!((r.server_user_us_per_rt.unwrap() - 20.0).abs() < 1e-9);
    }

    /// A server and its client on one CPU hand nothing between CPUs; apart
    /// they do, and compare floors such a figure wider when cold.
    #[test]
    fn a_record_says_whether_server_and_client_crossed_cpus() {
        let r = aggregate(
            &MuxConfig::default(),
            EngineKind::Poll,
            Lookup::Index,
            &[run(0.1, 0.3, 5000)],
        );
        let crossed = |s: &str, c: &str| {
            let cfg = MuxConfig {
                server_cpus: Some(commbench_core::placement::CpuList::parse(s).unwrap()),
                client_cpus: Some(commbench_core::placement::CpuList::parse(c).unwrap()),
                ..MuxConfig::default()
            };
            record(&cfg, &r, 0.0, 0.0).metrics[commbench_core::lab::CROSS_CPU].clone()
        };
        assert_eq!(crossed("0", "0"), json!(false));
        assert_eq!(crossed("0", "1"), json!(true));
    }
}
