//! `--load-procs P`: the load split over P worker processes (`commbench
//! mux load --worker`), for connection counts one process cannot hold
//! (RLIMIT_NOFILE) or one load loop cannot drive. The parent keeps the
//! phases in step: every worker connects and says so, then (after an
//! optional warm-up that every worker finishes first) all start their
//! rounds at the parent's word, report their figures as one JSON line, and
//! close at the parent's word. The rounds phase spans the earliest start to
//! the latest end (CLOCK_MONOTONIC is one clock for every process here).
//!
//! Worker lines are bounded (64 KiB) and parsed as JSON; a worker that dies
//! or says something else ends the run with an error naming it. With
//! `--tls` every worker builds its own rustls client config (its own
//! session cache) from the same options and reports its handshakes, which
//! the parent adds.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use commbench_core::clock;
use commbench_core::rusage::Usage;
use commbench_core::stats::LatencyHistogram;

use crate::load::{self, LoadConfig, Rounds};
use crate::open::OpenOut;
use crate::{MuxConfig, MuxError, Result};

/// What a worker says after connecting.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct WorkerConnected {
    pub connected: usize,
    pub failures: u64,
    pub connect_s: f64,
    pub first_error: Option<String>,
}

/// What a worker says after its rounds.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct WorkerRounds {
    pub round_trips: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub user_s: f64,
    pub sys_s: f64,
    pub waits: u64,
    pub events: u64,
    pub bytes: u64,
    /// (value ns, count) pairs of the latency histogram.
    pub latency: Vec<(u64, u64)>,
    /// Open-loop figures (`--rate`, `--in-flight`, http1).
    #[serde(default)]
    pub open: Option<WorkerOpen>,
}

/// A worker's [`OpenOut`], histograms as (value ns, count) pairs; send
/// times are TSC ticks, one counter for every process on the machine.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct WorkerOpen {
    pub corrected: Vec<(u64, u64)>,
    pub raw: Vec<(u64, u64)>,
    pub lag: Vec<(u64, u64)>,
    pub scheduled: u64,
    pub completed: u64,
    pub held: u64,
    pub measured_s: f64,
    pub sent: u64,
    pub first_send: u64,
    pub last_send: u64,
    pub http: crate::http1::Counts,
    /// HTTPS: the worker's handshakes (its own client config and session
    /// cache; absent without --tls).
    #[serde(default)]
    pub tls: Option<WorkerTls>,
}

/// A worker's [`crate::tls::TlsOut`], the handshake histogram as (value
/// ns, count) pairs.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct WorkerTls {
    pub full: u64,
    pub resumed: u64,
    pub failed: u64,
    pub first_error: Option<String>,
    pub version: Option<String>,
    pub cipher: Option<String>,
    pub alpn: Option<String>,
    pub handshake: Vec<(u64, u64)>,
}

fn hist(pairs: Vec<(u64, u64)>) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for (v, c) in pairs {
        h.record_n_ns(v, c);
    }
    h
}

impl WorkerOpen {
    fn from_out(o: &OpenOut, tls: bool) -> WorkerOpen {
        WorkerOpen {
            corrected: o.corrected.recorded(),
            raw: o.raw.recorded(),
            lag: o.lag.recorded(),
            scheduled: o.scheduled,
            completed: o.completed,
            held: o.held,
            measured_s: o.measured_s,
            sent: o.sent,
            first_send: o.first_send,
            last_send: o.last_send,
            http: o.http,
            tls: tls.then(|| {
                let t = &o.tls;
                WorkerTls {
                    full: t.full,
                    resumed: t.resumed,
                    failed: t.failed,
                    first_error: t.first_error.clone(),
                    version: t.version.clone(),
                    cipher: t.cipher.clone(),
                    alpn: t.alpn.clone(),
                    handshake: t.handshake.recorded(),
                }
            }),
        }
    }

    fn into_out(self) -> OpenOut {
        OpenOut {
            corrected: hist(self.corrected),
            raw: hist(self.raw),
            lag: hist(self.lag),
            scheduled: self.scheduled,
            completed: self.completed,
            held: self.held,
            measured_s: self.measured_s,
            sent: self.sent,
            first_send: self.first_send,
            last_send: self.last_send,
            http: self.http,
            tls: self
                .tls
                .map(|t| crate::tls::TlsOut {
                    full: t.full,
                    resumed: t.resumed,
                    failed: t.failed,
                    first_error: t.first_error,
                    version: t.version,
                    cipher: t.cipher,
                    alpn: t.alpn,
                    handshake: hist(t.handshake),
                })
                .unwrap_or_default(),
        }
    }
}

fn line_out<T: serde::Serialize>(v: &T) -> Result<()> {
    let s = serde_json::to_string(v).map_err(|e| MuxError::Load(e.to_string()))?;
    let mut o = std::io::stdout().lock();
    writeln!(o, "{s}")
        .and_then(|_| o.flush())
        .map_err(|e| MuxError::io("worker output".into(), e))
}

fn line_in(input: &mut impl BufRead) -> Result<String> {
    let mut l = String::new();
    let n = std::io::Read::take(&mut *input, 64)
        .read_line(&mut l)
        .map_err(|e| MuxError::io("worker input".into(), e))?;
    if n == 0 {
        return Err(MuxError::Load(
            "the parent closed the worker's input".into(),
        ));
    }
    Ok(l.trim().to_owned())
}

/// The worker process: connect, report, wait for WARM/GO, run, report,
/// wait for CLOSE.
pub fn worker_main(lcfg: &LoadConfig, warmup_rounds: u64) -> Result<()> {
    crate::limits::ensure_nofile(lcfg.conns)?;
    let mut conn = load::connect_all(lcfg)?;
    line_out(&WorkerConnected {
        connected: conn.fds.len(),
        failures: conn.failures,
        connect_s: conn.connect_s,
        first_error: conn.first_error.clone(),
    })?;
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    loop {
        match line_in(&mut input)?.as_str() {
            "WARM" => {
                if warmup_rounds > 0 {
                    let warm = LoadConfig {
                        rounds: warmup_rounds,
                        rounds_for: None,
                        ..lcfg.clone()
                    };
                    load::run_rounds(&warm, &conn.fds)?;
                }
                line_out(&"WARMED")?;
            }
            "GO" => {
                let start_ns = clock::monotonic_ns();
                let r = load::run_rounds(lcfg, &conn.fds)?;
                let end_ns = clock::monotonic_ns();
                line_out(&WorkerRounds {
                    round_trips: r.round_trips,
                    start_ns,
                    end_ns,
                    user_s: r.usage.user_s,
                    sys_s: r.usage.sys_s,
                    waits: r.waits,
                    events: r.events,
                    bytes: r.bytes,
                    latency: r.latency.recorded(),
                    open: r
                        .open
                        .as_ref()
                        .map(|o| WorkerOpen::from_out(o, lcfg.tls.is_some())),
                })?;
            }
            "CLOSE" => {
                conn.close();
                return Ok(());
            }
            other => {
                return Err(MuxError::Load(format!(
                    "worker: unexpected command {other:?}"
                )))
            }
        }
    }
}

/// The open-loop and HTTP settings of one worker: its share of the rate
/// (in proportion to its active connections) and its place among all
/// active connections.
fn open_args(cmd: &mut Command, cfg: &MuxConfig, active: usize, first_active: usize) {
    let o = &cfg.open;
    cmd.args(["--in-flight", &o.in_flight.to_string()]);
    if let Some(rate) = o.rate {
        let share = rate_share(rate, active, cfg.active());
        cmd.args(["--rate", &share.to_string()])
            .args(["--arrivals", o.arrivals.as_str()])
            .args(["--warmup", &o.warmup.as_secs_f64().to_string()])
            .args(["--duration", &o.duration.as_secs_f64().to_string()])
            .args(["--max-lag-us", &(o.max_lag.as_secs_f64() * 1e6).to_string()])
            .args(["--worker-first-conn", &first_active.to_string()])
            .args(["--worker-active-total", &cfg.active().to_string()]);
    }
    if cfg.protocol == crate::Protocol::Http1 {
        let h = &cfg.http;
        cmd.args(["--method", &h.method])
            .args(["--path", &h.path])
            .args(["--host", &h.host]);
        for (n, v) in &h.headers {
            cmd.arg("--header").arg(format!("{n}: {v}"));
        }
        if !h.body.is_empty() {
            cmd.arg("--body")
                .arg(String::from_utf8_lossy(&h.body).as_ref());
        }
        if h.close {
            cmd.arg("--conn-per-request");
        }
    }
    // HTTPS: each worker builds its own client config from the same
    // settings, so each has its own session cache (a process's first
    // handshakes are full, as on separate hosts).
    if let Some(t) = &cfg.tls {
        let s = &t.spec;
        cmd.args(["--tls", "--tls-version", s.version.as_str()]);
        if let Some(n) = &s.sni {
            cmd.args(["--sni", n]);
        }
        if s.insecure {
            cmd.arg("--insecure");
        }
        if let Some(c) = &s.cacert {
            cmd.arg("--cacert").arg(c);
        }
    }
}

struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

/// The parent's handle on P workers.
pub struct Workers {
    workers: Vec<Worker>,
    pub connected: usize,
    pub failures: u64,
    pub connect_s: f64,
    pub first_error: Option<String>,
    timeout: Duration,
}

fn split(total: usize, parts: usize, i: usize) -> usize {
    total / parts + usize::from(i < total % parts)
}

/// One part's share of a load split over processes (`--load-procs`) or
/// segments (`--segment`): its connections, its active ones, and the
/// index of its first active connection among all parts' (so each
/// connection keeps the phase and seed it has in one process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub conns: usize,
    pub active: usize,
    pub first_active: usize,
}

/// The shares of `conns` connections, `active` of them active, over
/// `parts` parts.
pub fn shares(conns: usize, active: usize, parts: usize) -> Vec<Share> {
    let mut first_active = 0;
    (0..parts)
        .map(|i| {
            let conns = split(conns, parts, i);
            let active = split(active, parts, i).max(1).min(conns);
            let s = Share {
                conns,
                active,
                first_active,
            };
            first_active += active;
            s
        })
        .collect()
}

/// A part's share of `rate` (requests/s over `active_total` connections):
/// in proportion to its active connections.
pub fn rate_share(rate: f64, active: usize, active_total: usize) -> f64 {
    rate * active as f64 / active_total.max(1) as f64
}

impl Workers {
    /// Starts the workers and waits until each has connected.
    pub fn start(cfg: &MuxConfig, target: SocketAddr) -> Result<Workers> {
        let exe = match &cfg.server_exe {
            Some(p) => p.clone(),
            None => std::env::current_exe()
                .map_err(|e| MuxError::io("cannot find this executable".into(), e))?,
        };
        let p = cfg.load_procs;
        let mut workers = Vec::with_capacity(p);
        for (i, share) in shares(cfg.conns, cfg.active(), p).into_iter().enumerate() {
            let Share {
                conns,
                active,
                first_active,
            } = share;
            let mut cmd = Command::new(&exe);
            cmd.args(["mux", "load", "--worker", "--control", "none", "--target"])
                .arg(target.to_string())
                .args(["--conns", &conns.to_string()])
                .args(["--active", &active.to_string()])
                .args(["--rounds", &cfg.rounds.to_string()])
                .args(["--warmup-rounds", &cfg.warmup_rounds.to_string()])
                .args(["--size", &cfg.size.to_string()])
                .args(["--protocol", cfg.protocol.as_str()])
                .args(["--clients", cfg.clients.as_str()])
                .args(["--load-threads", &cfg.load_threads.to_string()])
                .args(["--timeout", &cfg.timeout.as_secs_f64().to_string()])
                .args(["--connect-window", &cfg.connect_window.to_string()]);
            if let Some(c) = &cfg.client_cpus {
                cmd.arg("--cpus").arg(format!("client={c}"));
            }
            open_args(&mut cmd, cfg, active, first_active);
            let p = crate::child::spawn_piped(&mut cmd, &format!("load worker {i}"))?;
            workers.push(Worker {
                child: p.child,
                stdin: p.stdin,
                lines: p.lines,
            });
        }
        let mut w = Workers {
            workers,
            connected: 0,
            failures: 0,
            connect_s: 0.0,
            first_error: None,
            timeout: cfg.timeout + Duration::from_secs(30),
        };
        for i in 0..w.workers.len() {
            let c: WorkerConnected = w.read(i)?;
            w.connected += c.connected;
            w.failures += c.failures;
            w.connect_s = w.connect_s.max(c.connect_s);
            if w.first_error.is_none() {
                w.first_error = c.first_error;
            }
        }
        Ok(w)
    }

    fn read<T: serde::de::DeserializeOwned>(&mut self, i: usize) -> Result<T> {
        let w = &mut self.workers[i];
        match w.lines.recv_timeout(self.timeout) {
            Ok(l) => serde_json::from_str(&l)
                .map_err(|e| MuxError::Load(format!("load worker {i} said {:?}: {e}", l.trim()))),
            Err(RecvTimeoutError::Timeout) => Err(MuxError::Stalled(format!(
                "load worker {i} did not answer in {:?}",
                self.timeout
            ))),
            Err(RecvTimeoutError::Disconnected) => {
                let st = w.child.wait().map(|s| s.to_string()).unwrap_or_default();
                Err(MuxError::Load(format!(
                    "load worker {i} ended ({st}); its error is above"
                )))
            }
        }
    }

    fn tell(&mut self, cmd: &str) -> Result<()> {
        for (i, w) in self.workers.iter_mut().enumerate() {
            let Some(s) = w.stdin.as_mut() else {
                return Err(MuxError::Load(format!("load worker {i} has no input")));
            };
            s.write_all(cmd.as_bytes())
                .and_then(|_| s.write_all(b"\n"))
                .and_then(|_| s.flush())
                .map_err(|e| MuxError::Load(format!("load worker {i}: {e}")))?;
        }
        Ok(())
    }

    /// Every worker runs its warm-up rounds; returns when all are done.
    pub fn warm(&mut self) -> Result<()> {
        self.tell("WARM")?;
        for i in 0..self.workers.len() {
            let _: String = self.read(i)?;
        }
        Ok(())
    }

    /// Every worker runs its rounds; the merged figures.
    pub fn rounds(&mut self) -> Result<Rounds> {
        self.tell("GO")?;
        let mut out = Rounds {
            round_trips: 0,
            wall_s: 0.0,
            latency: LatencyHistogram::new(),
            usage: Usage::default(),
            waits: 0,
            events: 0,
            bytes: 0,
            open: None,
        };
        let (mut start, mut end) = (u64::MAX, 0u64);
        let mut open: Option<OpenOut> = None;
        for i in 0..self.workers.len() {
            let r: WorkerRounds = self.read(i)?;
            if let Some(o) = r.open {
                open.get_or_insert_with(OpenOut::default)
                    .merge(&o.into_out());
            }
            out.round_trips += r.round_trips;
            out.waits += r.waits;
            out.events += r.events;
            out.bytes += r.bytes;
            out.usage.user_s += r.user_s;
            out.usage.sys_s += r.sys_s;
            for (v, c) in r.latency {
                out.latency.record_n_ns(v, c);
            }
            start = start.min(r.start_ns);
            end = end.max(r.end_ns);
        }
        out.wall_s = end.saturating_sub(start) as f64 / 1e9;
        out.open = open;
        Ok(out)
    }

    /// Every worker closes its connections and exits.
    pub fn close(&mut self) -> Result<()> {
        let r = self.tell("CLOSE");
        for (i, w) in self.workers.iter_mut().enumerate() {
            drop(w.stdin.take());
            let st = w
                .child
                .wait()
                .map_err(|e| MuxError::io(format!("wait for load worker {i}"), e))?;
            if !st.success() {
                return Err(MuxError::Load(format!("load worker {i} ended: {st}")));
            }
        }
        r
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.workers {
            drop(w.stdin.take());
            if matches!(w.child.try_wait(), Ok(None)) {
                let _ = w.child.kill();
            }
            let _ = w.child.wait();
        }
    }
}
