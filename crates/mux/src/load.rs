//! The load generator: N client connections, each doing R closed-loop
//! rounds (send K bytes, receive the K echoed bytes, check them, next) with
//! one message in flight per connection, as the seed's clients do — but
//! driven from epoll event loops (`loop`, one loop per load thread), not a
//! thread per connection. `threads` reproduces the seed's thread-per-
//! connection client for comparison.
//!
//! Invariants: every echoed byte is compared with what was sent (each
//! message is a slice of a pseudo-random pattern that depends on the
//! connection and the round, so a misrouted or stale echo is caught); a
//! connection closed by the server, a mismatch or the deadline ends the run
//! with an error that names what happened; nothing here waits without a
//! bound.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::RawFd;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use commbench_core::clock;
use commbench_core::placement::CpuList;
use commbench_core::rusage::Usage;
use commbench_core::stats::LatencyHistogram;
use commbench_core::sys::{self, Epoll};

use crate::http1::HttpRequest;
use crate::net;
use crate::open::{OpenConfig, OpenOut};
use crate::protocol::{self, Protocol};
use crate::{MuxError, Result};

/// How the load side drives its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientsKind {
    /// Event loops (epoll), `load_threads` of them.
    Loop,
    /// A thread per connection with blocking calls (the seed's client).
    Threads,
}

impl ClientsKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ClientsKind::Loop => "loop",
            ClientsKind::Threads => "threads",
        }
    }
}

/// What the load side does.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub target: SocketAddr,
    pub conns: usize,
    /// Connections doing rounds; the rest stay connected and idle.
    pub active: usize,
    pub rounds: u64,
    /// Rounds until this long after they began (at most `rounds`); the
    /// event-loop client only.
    pub rounds_for: Option<Duration>,
    pub size: usize,
    pub protocol: Protocol,
    pub clients: ClientsKind,
    pub load_threads: usize,
    /// Source addresses to spread connections over (empty: the kernel's choice).
    pub sources: Vec<Ipv4Addr>,
    /// Bound on each phase.
    pub timeout: Duration,
    pub cpus: Option<CpuList>,
    /// Connects in progress at once (see [`CONNECT_WINDOW`]).
    pub connect_window: usize,
    /// Open-loop schedule and window ([`crate::open`]); the closed loop
    /// with one request in flight (rate None, in_flight 1) is the seed's.
    pub open: OpenConfig,
    /// The request of `--protocol http1`.
    pub http: HttpRequest,
    /// HTTPS: the client config every connection shares.
    pub tls: Option<std::sync::Arc<crate::tls::ClientTls>>,
}

impl LoadConfig {
    /// Whether the rounds run on the open-loop engine ([`crate::open`]):
    /// a rate, a window over 1, or HTTP.
    pub fn uses_open_loop(&self) -> bool {
        self.open.rate.is_some() || self.open.in_flight > 1 || self.protocol == Protocol::Http1
    }
}

/// Connections made.
#[derive(Debug)]
pub struct Connected {
    pub fds: Vec<RawFd>,
    pub failures: u64,
    pub first_error: Option<String>,
    pub connect_s: f64,
}

impl Drop for Connected {
    fn drop(&mut self) {
        for &fd in &self.fds {
            net::close(fd);
        }
    }
}

impl Connected {
    /// Closes every connection now (the server sees EOF on each).
    pub fn close(&mut self) {
        for fd in self.fds.drain(..) {
            net::close(fd);
        }
    }
}

/// Default connects outstanding at once: keeps a listen backlog of a few
/// hundred from overflowing, which would turn into SYN retransmits. A
/// server with a tiny backlog (sockperf's is 10) needs a smaller window:
/// an overflowing accept queue drops handshakes the client already counts
/// as connected.
pub const CONNECT_WINDOW: usize = 256;

/// Opens `cfg.conns` connections with non-blocking connects, at most
/// `cfg.connect_window` in progress at a time.
pub fn connect_all(cfg: &LoadConfig) -> Result<Connected> {
    let ep = Epoll::new().map_err(|e| MuxError::io("epoll_create".into(), e))?;
    let mut events = sys::new_events(1024);
    let start = Instant::now();
    let deadline = start + cfg.timeout;
    let mut out = Connected {
        fds: Vec::with_capacity(cfg.conns),
        failures: 0,
        first_error: None,
        connect_s: 0.0,
    };
    let mut pending: Vec<RawFd> = Vec::new();
    let mut next = 0usize;
    let fail = |out: &mut Connected, e: String| {
        out.failures += 1;
        if out.first_error.is_none() {
            out.first_error = Some(e);
        }
    };
    while out.fds.len() + (out.failures as usize) < cfg.conns {
        while next < cfg.conns && pending.len() < cfg.connect_window.max(1) {
            let src = if cfg.sources.is_empty() {
                None
            } else {
                Some(cfg.sources[next % cfg.sources.len()])
            };
            next += 1;
            match net::connect_start(cfg.target, src) {
                Ok(fd) => {
                    if let Err(e) = ep.add(fd, fd as u64, sys::OUT | sys::ERR) {
                        net::close(fd);
                        fail(&mut out, format!("epoll_ctl: {e}"));
                        continue;
                    }
                    pending.push(fd);
                }
                Err(e) => fail(&mut out, connect_hint(e, cfg)),
            }
        }
        if pending.is_empty() {
            continue;
        }
        if Instant::now() > deadline {
            for fd in pending.drain(..) {
                net::close(fd);
                fail(
                    &mut out,
                    format!("connect not done after {:?} (timeout)", cfg.timeout),
                );
            }
            break;
        }
        let ready = ep
            .wait(&mut events, 100)
            .map_err(|e| MuxError::io("epoll_wait".into(), e))?;
        for e in ready {
            let fd = sys::event_token(e) as RawFd;
            let _ = ep.delete(fd);
            if let Some(p) = pending.iter().position(|&x| x == fd) {
                pending.swap_remove(p);
            }
            match net::take_error(fd) {
                Ok(()) => {
                    let _ = net::set_nodelay(fd, true);
                    out.fds.push(fd);
                }
                Err(e) => {
                    net::close(fd);
                    fail(&mut out, connect_hint(e, cfg));
                }
            }
        }
    }
    out.connect_s = start.elapsed().as_secs_f64();
    Ok(out)
}

fn connect_hint(e: io::Error, cfg: &LoadConfig) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            " (out of file descriptors: lower --conns or raise RLIMIT_NOFILE)"
        }
        Some(libc::EADDRNOTAVAIL) => {
            " (out of local ports: use more source addresses (--sources) or widen net.ipv4.ip_local_port_range, e.g. with --netns)"
        }
        Some(libc::ECONNREFUSED) => " (is the server running?)",
        _ => "",
    };
    format!("connect to {}: {e}{hint}", cfg.target)
}

/// What the rounds phase measured.
#[derive(Debug)]
pub struct Rounds {
    pub round_trips: u64,
    pub wall_s: f64,
    pub latency: LatencyHistogram,
    /// The load process's CPU during the phase.
    pub usage: Usage,
    pub waits: u64,
    pub events: u64,
    pub bytes: u64,
    /// Open-loop figures (corrected and raw latency, schedule lag).
    pub open: Option<OpenOut>,
}

/// The message pattern: message (conn, round) is `size` bytes starting at
/// [`offset`]; consecutive rounds and neighbouring connections differ.
pub struct Pattern {
    bytes: Vec<u8>,
    size: usize,
}

impl Pattern {
    pub fn new(size: usize) -> Self {
        let bytes = (0..size + 256)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        Pattern { bytes, size }
    }
    #[inline]
    pub fn offset(conn: usize, round: u64) -> usize {
        ((conn as u64)
            .wrapping_mul(131)
            .wrapping_add(round.wrapping_mul(17))
            % 256) as usize
    }
    #[inline]
    pub fn message(&self, conn: usize, round: u64) -> &[u8] {
        let o = Self::offset(conn, round);
        &self.bytes[o..o + self.size]
    }
}

/// Runs the rounds on the first `cfg.active` connections of `fds`.
pub fn run_rounds(cfg: &LoadConfig, fds: &[RawFd]) -> Result<Rounds> {
    let active = cfg.active.min(fds.len());
    let pattern = Arc::new(Pattern::new(cfg.size));
    let u0 = Usage::process();
    let t0 = Instant::now();
    if cfg.uses_open_loop() {
        return crate::open::run(cfg, &cfg.open, fds);
    }
    let r = match cfg.clients {
        ClientsKind::Loop => loop_clients(cfg, &fds[..active], &pattern),
        ClientsKind::Threads => thread_clients(cfg, &fds[..active], &pattern),
    };
    let wall_from_here = t0.elapsed().as_secs_f64();
    let mut r = r?;
    r.usage = Usage::process().since(&u0);
    if r.wall_s == 0.0 {
        r.wall_s = wall_from_here;
    }
    Ok(r)
}

/// One client connection's progress.
struct CConn {
    fd: RawFd,
    idx: usize,
    round: u64,
    sent: usize,
    recvd: usize,
    t0: u64,
    want_out: bool,
    /// Stopped by `--rounds-for` before `rounds`.
    done: bool,
    /// The message being sent (sockperf: its header changes every round);
    /// empty for raw, whose messages are slices of the shared pattern.
    msg: Vec<u8>,
}

impl CConn {
    /// Prepares round `self.round`'s message (sockperf framing only).
    fn start_round(&mut self, proto: Protocol) {
        if proto == Protocol::Sockperf {
            let len = self.msg.len() as u32;
            protocol::write_ping_header(&mut self.msg, self.round + 1, len);
        }
    }
}

/// A connection's current message.
#[inline]
fn current<'a>(pattern: &'a Pattern, msg: &'a [u8], idx: usize, round: u64) -> &'a [u8] {
    if msg.is_empty() {
        pattern.message(idx, round)
    } else {
        msg
    }
}

struct LoopOut {
    hist: LatencyHistogram,
    round_trips: u64,
    waits: u64,
    events: u64,
    bytes: u64,
    start: Instant,
    end: Instant,
}

fn loop_clients(cfg: &LoadConfig, fds: &[RawFd], pattern: &Arc<Pattern>) -> Result<Rounds> {
    let threads = cfg.load_threads.clamp(1, fds.len().max(1));
    let chunk = fds.len().div_ceil(threads).max(1);
    let parts: Vec<&[RawFd]> = fds.chunks(chunk).collect();
    let barrier = Arc::new(Barrier::new(parts.len().max(1)));
    let deadline = Instant::now() + cfg.timeout;
    let results: Vec<Result<LoopOut>> = std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .iter()
            .copied()
            .enumerate()
            .map(|(t, part)| {
                let barrier = barrier.clone();
                let pattern = pattern.clone();
                let cpus = cfg.cpus.clone();
                let base = t * chunk;
                s.spawn(move || {
                    if let Some(c) = &cpus {
                        let cpu = c.cpus()[t % c.cpus().len()];
                        let _ = CpuList::from_cpus(vec![cpu]).pin_current_thread();
                    }
                    client_loop(cfg, part, base, &pattern, &barrier, deadline)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(MuxError::Load("a load thread panicked".into())))
            })
            .collect()
    });
    let mut hist = LatencyHistogram::new();
    let (mut rts, mut waits, mut events, mut bytes) = (0, 0, 0, 0);
    let mut start: Option<Instant> = None;
    let mut end: Option<Instant> = None;
    for r in results {
        let o = r?;
        hist.merge(&o.hist);
        rts += o.round_trips;
        waits += o.waits;
        events += o.events;
        bytes += o.bytes;
        start = Some(start.map_or(o.start, |s| s.min(o.start)));
        end = Some(end.map_or(o.end, |e| e.max(o.end)));
    }
    let wall_s = match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s).as_secs_f64(),
        _ => 0.0,
    };
    Ok(Rounds {
        round_trips: rts,
        wall_s,
        latency: hist,
        usage: Usage::default(),
        waits,
        events,
        bytes,
        open: None,
    })
}

fn client_loop(
    cfg: &LoadConfig,
    fds: &[RawFd],
    base: usize,
    pattern: &Pattern,
    barrier: &Barrier,
    deadline: Instant,
) -> Result<LoopOut> {
    let io_err = |what: &str, e: io::Error| MuxError::io(what.to_string(), e);
    let ep = Epoll::new().map_err(|e| io_err("epoll_create", e))?;
    let mut conns: Vec<CConn> = fds
        .iter()
        .enumerate()
        .map(|(i, &fd)| CConn {
            fd,
            idx: base + i,
            round: 0,
            sent: 0,
            recvd: 0,
            t0: 0,
            want_out: false,
            done: false,
            msg: match cfg.protocol {
                Protocol::Sockperf => pattern.message(base + i, 0).to_vec(),
                _ => Vec::new(),
            },
        })
        .collect();
    for c in conns.iter_mut() {
        c.start_round(cfg.protocol);
    }
    for (i, c) in conns.iter().enumerate() {
        ep.add(c.fd, i as u64, sys::IN)
            .map_err(|e| io_err("epoll_ctl", e))?;
    }
    let mut events = sys::new_events(1024);
    let mut rbuf = vec![0u8; cfg.size.clamp(1, 64 * 1024)];
    let tsc = clock::tsc();
    let mut hist = LatencyHistogram::new();
    let mut out_bytes = 0u64;
    let (mut waits, mut nevents) = (0u64, 0u64);
    let mut remaining = conns.len();
    barrier.wait();
    let start = Instant::now();
    // --rounds-for: a connection that finishes a round past this TSC
    // stamp starts no other (read once per round trip: ~20 ns of a
    // round trip's ~5 µs).
    let stop_at = cfg
        .rounds_for
        .map(|d| clock::rdtsc().saturating_add(tsc.ns_to_ticks(d.as_nanos() as f64)));
    // Every connection sends its first message.
    if cfg.rounds > 0 {
        for (i, c) in conns.iter_mut().enumerate() {
            send_some(&ep, c, i, pattern, &mut out_bytes)?;
        }
    } else {
        remaining = 0;
    }
    while remaining > 0 {
        if Instant::now() > deadline {
            let left: u64 = conns.iter().map(|c| cfg.rounds - c.round).sum();
            return Err(MuxError::Stalled(format!(
                "{left} round trips of {} not done after {:?}: the server stopped answering (see its status above) or the machine is too loaded; raise --timeout",
                conns.len() as u64 * cfg.rounds,
                cfg.timeout
            )));
        }
        waits += 1;
        let ready = ep
            .wait(&mut events, 100)
            .map_err(|e| io_err("epoll_wait", e))?;
        nevents += ready.len() as u64;
        for e in ready {
            let i = sys::event_token(e) as usize;
            let bits = sys::event_bits(e);
            let c = &mut conns[i];
            if c.round >= cfg.rounds || c.done {
                continue;
            }
            if bits & sys::OUT != 0 && c.sent < cfg.size {
                send_some(&ep, c, i, pattern, &mut out_bytes)?;
            }
            if bits & (sys::IN | sys::ERR) == 0 {
                continue;
            }
            // Read what is there of this round's echo.
            let want = cfg.size - c.recvd;
            let cap = want.min(rbuf.len());
            let n = match net::read(c.fd, &mut rbuf[..cap]) {
                Ok(0) => {
                    return Err(MuxError::ServerClosed {
                        conn: c.idx,
                        what: format!(
                            "closed by the server in round {} of {} ({} of {} bytes echoed)",
                            c.round + 1,
                            cfg.rounds,
                            c.recvd,
                            cfg.size
                        ),
                    })
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(MuxError::ServerClosed {
                        conn: c.idx,
                        what: format!("failed in round {} of {}: {e}", c.round + 1, cfg.rounds),
                    })
                }
            };
            let sent = current(pattern, &c.msg, c.idx, c.round);
            if let Some(at) = protocol::mismatch(cfg.protocol, sent, c.recvd, &rbuf[..n]) {
                return Err(MuxError::Corrupt(format!(
                    "connection {} round {}: the answer differs from the bytes sent at byte {at} (--protocol {} expects them back)",
                    c.idx,
                    c.round + 1,
                    cfg.protocol.as_str()
                )));
            }
            c.recvd += n;
            if c.recvd == cfg.size && c.sent == cfg.size {
                hist.record_ns(tsc.ticks_to_ns(clock::rdtsc().wrapping_sub(c.t0)) as u64);
                c.round += 1;
                c.sent = 0;
                c.recvd = 0;
                if c.round == cfg.rounds || stop_at.is_some_and(|t| clock::rdtsc() >= t) {
                    c.done = true;
                    remaining -= 1;
                } else {
                    c.start_round(cfg.protocol);
                    send_some(&ep, c, i, pattern, &mut out_bytes)?;
                }
            }
        }
    }
    let end = Instant::now();
    Ok(LoopOut {
        round_trips: conns.iter().map(|c| c.round).sum(),
        hist,
        waits,
        events: nevents,
        bytes: out_bytes,
        start,
        end,
    })
}

/// Sends what it can of a connection's current message; asks for
/// writability while some is left.
fn send_some(
    ep: &Epoll,
    c: &mut CConn,
    token: usize,
    pattern: &Pattern,
    bytes: &mut u64,
) -> Result<()> {
    let msg = current(pattern, &c.msg, c.idx, c.round);
    if c.sent == 0 {
        c.t0 = clock::rdtsc();
    }
    while c.sent < msg.len() {
        match net::write(c.fd, &msg[c.sent..]) {
            Ok(n) => {
                c.sent += n;
                *bytes += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(MuxError::ServerClosed {
                    conn: c.idx,
                    what: format!("failed sending round {}: {e}", c.round + 1),
                })
            }
        }
    }
    arm_out(ep, c.fd, token, c.sent < msg.len(), &mut c.want_out)
}

/// Asks epoll for EPOLLOUT on `fd` while it has bytes left to write
/// (`want_out`), with one epoll_ctl only when that changes (`armed`).
pub(crate) fn arm_out(
    ep: &Epoll,
    fd: RawFd,
    token: usize,
    want_out: bool,
    armed: &mut bool,
) -> Result<()> {
    if want_out != *armed {
        let ev = if want_out {
            sys::IN | sys::OUT
        } else {
            sys::IN
        };
        ep.modify(fd, token as u64, ev)
            .map_err(|e| MuxError::io("epoll_ctl".into(), e))?;
        *armed = want_out;
    }
    Ok(())
}

/// The seed's client: one thread per connection, blocking send then
/// receive.
fn thread_clients(cfg: &LoadConfig, fds: &[RawFd], pattern: &Arc<Pattern>) -> Result<Rounds> {
    let n = fds.len();
    let gate = Arc::new(Gate::default());
    let hist = Arc::new(Mutex::new(LatencyHistogram::new()));
    let first_err: Arc<Mutex<Option<MuxError>>> = Arc::new(Mutex::new(None));
    let mut handles = Vec::with_capacity(n);
    for (i, &fd) in fds.iter().enumerate() {
        net::set_blocking(fd).map_err(|e| MuxError::io("fcntl".into(), e))?;
        let tv = libc::timeval {
            tv_sec: cfg.timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_usec: 0,
        };
        set_rcvtimeo(fd, tv);
        let g = gate.clone();
        let hist = hist.clone();
        let first_err = first_err.clone();
        let pattern = pattern.clone();
        let rounds = cfg.rounds;
        let size = cfg.size;
        let proto = cfg.protocol;
        let h = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                if !g.wait() {
                    return;
                }
                let r = blocking_rounds(fd, i, rounds, size, proto, &pattern);
                match r {
                    Ok(lat) => {
                        if let Ok(mut h) = hist.lock() {
                            for ns in lat {
                                h.record_ns(ns as u64);
                            }
                        }
                    }
                    Err(e) => {
                        if let Ok(mut f) = first_err.lock() {
                            f.get_or_insert(e);
                        }
                    }
                }
            });
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                gate.open(false);
                for h in handles {
                    let _ = h.join();
                }
                return Err(MuxError::Load(format!(
                    "could only start {i} of {n} client threads: {e} (the thread-per-connection client; use --clients loop)"
                )));
            }
        }
    }
    let start = Instant::now();
    gate.open(true);
    for h in handles {
        let _ = h.join();
    }
    let wall_s = start.elapsed().as_secs_f64();
    if let Some(e) = first_err.lock().ok().and_then(|mut f| f.take()) {
        return Err(e);
    }
    let hist = Arc::try_unwrap(hist)
        .ok()
        .and_then(|m| m.into_inner().ok())
        .unwrap_or_default();
    Ok(Rounds {
        round_trips: n as u64 * cfg.rounds,
        wall_s,
        latency: hist,
        usage: Usage::default(),
        waits: 0,
        events: 0,
        bytes: n as u64 * cfg.rounds * cfg.size as u64,
        open: None,
    })
}

/// Holds client threads until every one is started (or tells them to
/// give up when one could not be).
#[derive(Default)]
struct Gate {
    state: Mutex<Option<bool>>,
    cv: std::sync::Condvar,
}

impl Gate {
    fn open(&self, go: bool) {
        if let Ok(mut s) = self.state.lock() {
            *s = Some(go);
        }
        self.cv.notify_all();
    }
    /// `true`: go; `false`: give up.
    fn wait(&self) -> bool {
        let Ok(mut s) = self.state.lock() else {
            return false;
        };
        loop {
            if let Some(go) = *s {
                return go;
            }
            s = match self.cv.wait(s) {
                Ok(s) => s,
                Err(_) => return false,
            };
        }
    }
}

fn set_rcvtimeo(fd: RawFd, tv: libc::timeval) {
    #[allow(unsafe_code)]
    // SAFETY: a live timeval of the stated size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
    }
}

fn blocking_rounds(
    fd: RawFd,
    idx: usize,
    rounds: u64,
    size: usize,
    proto: Protocol,
    pattern: &Pattern,
) -> Result<Vec<u32>> {
    let tsc = clock::tsc();
    let mut lat = Vec::with_capacity(rounds as usize);
    let mut buf = vec![0u8; size];
    let mut own = match proto {
        Protocol::Sockperf => pattern.message(idx, 0).to_vec(),
        _ => Vec::new(),
    };
    for round in 0..rounds {
        if proto == Protocol::Sockperf {
            protocol::write_ping_header(&mut own, round + 1, size as u32);
        }
        let msg = current(pattern, &own, idx, round);
        let t0 = clock::rdtsc();
        let mut sent = 0;
        while sent < size {
            match net::write(fd, &msg[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(MuxError::ServerClosed {
                        conn: idx,
                        what: format!("failed sending round {}: {e}", round + 1),
                    })
                }
            }
        }
        let mut got = 0;
        while got < size {
            match net::read(fd, &mut buf[got..]) {
                Ok(0) => {
                    return Err(MuxError::ServerClosed {
                        conn: idx,
                        what: format!(
                            "closed by the server in round {} ({got} of {size} bytes echoed)",
                            round + 1
                        ),
                    })
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(MuxError::ServerClosed {
                        conn: idx,
                        what: format!(
                            "failed in round {}: {e} (a receive timeout means the server stalled)",
                            round + 1
                        ),
                    })
                }
            }
        }
        if protocol::mismatch(proto, msg, 0, &buf).is_some() {
            return Err(MuxError::Corrupt(format!(
                "connection {idx} round {}: the answer differs from the bytes sent (--protocol {} expects them back)",
                round + 1,
                proto.as_str()
            )));
        }
        lat.push(
            tsc.ticks_to_ns(clock::rdtsc().wrapping_sub(t0))
                .min(u32::MAX as f64) as u32,
        );
    }
    Ok(lat)
}
