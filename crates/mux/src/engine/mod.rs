//! The echo server's event engines, one [`Engine`] trait with a backend per
//! kernel interface (the shape of mio's `sys/unix/selector`): [`poll`]
//! (poll(2) over the whole pollfd array), [`epoll`] (level- or
//! edge-triggered), [`uring`] (io_uring completions: multishot accept,
//! multishot recv into a shared provided-buffer ring, send from the ring
//! buffer).
//!
//! The seed's finding lives in [`Lookup`]: when an engine reports a ready
//! descriptor, its connection state is found either by a linear scan of the
//! state array comparing descriptors (`scan`, the seed's
//! `for (j = 0; process_info[j].sock != evs[i].data.fd; j++);`) or directly
//! by the slot index the engine carries (`index`: epoll data, io_uring
//! user_data, the pollfd position). Everything else is the same code for
//! every engine, so the difference measured is the engine and the lookup.
//!
//! Invariants: one message of state per connection ([`Conn`]); a connection
//! with unsent echo bytes is not read from again until they are sent (the
//! pending buffer never exceeds one read buffer: backpressure, bounded
//! memory); with HTTP, where one read of pipelined requests can ask for
//! many responses, a read's responses stop at one read buffer (plus one
//! response) and the rest of its requests wait unparsed, read no further,
//! until those were sent ([`crate::http1::ServerFilter`]); an HTTP
//! connection whose last answer was made (a 400 for a refused request, or
//! the response to HTTP/1.0 or `Connection: close`) reads nothing more and
//! is closed once that answer is sent; every descriptor a loop accepted is
//! closed when it ends; the
//! loops together hold at most [`LoopCtx::max_conns`] connections (more
//! are accepted and closed at once, counted as `refused`), and a loop out
//! of descriptors sheds what waits through its reserve descriptor
//! ([`net::Reserve`]) and keeps serving the connections it has.

pub mod epoll;
pub mod poll;
mod tls;
pub mod uring;

use std::io;
use std::net::TcpListener;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::net;
use crate::protocol::{Filter, Protocol};

/// Which kernel interface the server waits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    Poll,
    EpollLt,
    EpollEt,
    IoUring,
}

impl EngineKind {
    pub const ALL: [EngineKind; 4] = [
        EngineKind::Poll,
        EngineKind::EpollLt,
        EngineKind::EpollEt,
        EngineKind::IoUring,
    ];

    /// Why this engine cannot run on this kernel (io_uring missing or
    /// restricted), or `None` when it can.
    pub fn unavailable_here(self) -> Option<String> {
        match self {
            EngineKind::IoUring => uring::probe().err().map(|e| e.to_string()),
            _ => None,
        }
    }

    /// Every engine this kernel can run; `skipped` hears of each other one
    /// and why.
    pub fn runnable_here(mut skipped: impl FnMut(EngineKind, &str)) -> Vec<EngineKind> {
        EngineKind::ALL
            .into_iter()
            .filter(|&e| match e.unavailable_here() {
                Some(why) => {
                    skipped(e, &why);
                    false
                }
                None => true,
            })
            .collect()
    }
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Poll => "poll",
            EngineKind::EpollLt => "epoll-lt",
            EngineKind::EpollEt => "epoll-et",
            EngineKind::IoUring => "io-uring",
        }
    }
    pub fn parse(s: &str) -> Option<EngineKind> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// How a ready descriptor's state is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lookup {
    /// Linear search of the state array for the descriptor (the seed's epoll server).
    Scan,
    /// The slot index carried by the event (epoll data, user_data, pollfd position).
    Index,
}

impl Lookup {
    pub fn as_str(self) -> &'static str {
        match self {
            Lookup::Scan => "scan",
            Lookup::Index => "index",
        }
    }
    pub fn parse(s: &str) -> Option<Lookup> {
        match s {
            "scan" => Some(Lookup::Scan),
            "index" => Some(Lookup::Index),
            _ => None,
        }
    }
}

/// Counters one event loop keeps; summed over loops for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoopStats {
    /// Wait calls (poll, epoll_wait, io_uring_enter).
    pub waits: u64,
    /// Ready descriptors (or completions) those calls returned.
    pub events: u64,
    /// Every system call the loop made (waits included).
    pub syscalls: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// Accept failures (EMFILE, ENFILE, ...).
    pub accept_errors: u64,
    /// Connections accepted and closed at once: the server was at its
    /// connection limit (`--max-conns`, or what its descriptors allow) or
    /// out of descriptors.
    #[serde(default)]
    pub refused: u64,
    /// Connections closed (peer closed or failed).
    pub closed: u64,
    /// Bytes echoed.
    pub bytes: u64,
    /// State-array entries compared by `scan` lookups.
    pub scan_steps: u64,
    /// Connections open now.
    pub live: u64,
    /// io_uring submission entries (0 for the others).
    pub sqes: u64,
    /// Connections closed for a malformed message (sockperf framing).
    pub protocol_errors: u64,
    /// io_uring: receive buffers in the provided-buffer ring (fixed when
    /// the loop starts; does not grow with connections). 0 for the others.
    #[serde(default)]
    pub bufs: u64,
    /// io_uring: ring buffers taken by a receive and not yet given back
    /// (data being echoed). An idle connection holds none.
    #[serde(default)]
    pub bufs_in_use: u64,
    /// io_uring: bytes of receive buffer reserved for the ring (address
    /// space; pages become resident only when data lands in them, and are
    /// given back when the loop's last connection leaves).
    #[serde(default)]
    pub buf_bytes: u64,
    /// Bytes of per-connection memory now: unsent responses or echo bytes
    /// and unparsed request input (io_uring also counts its state arrays
    /// and echo bytes copied out of the ring while a send is in progress);
    /// falls back when connections leave.
    #[serde(default)]
    pub conn_bytes: u64,
    /// io_uring: receives that found the buffer ring empty (ENOBUFS); each
    /// waits, its data in the socket, until buffers come back.
    #[serde(default)]
    pub enobufs: u64,
}

impl LoopStats {
    pub fn add(&mut self, o: &LoopStats) {
        self.waits += o.waits;
        self.events += o.events;
        self.syscalls += o.syscalls;
        self.accepted += o.accepted;
        self.accept_errors += o.accept_errors;
        self.refused += o.refused;
        self.closed += o.closed;
        self.bytes += o.bytes;
        self.scan_steps += o.scan_steps;
        self.live += o.live;
        self.sqes += o.sqes;
        self.protocol_errors += o.protocol_errors;
        self.bufs += o.bufs;
        self.bufs_in_use += o.bufs_in_use;
        self.buf_bytes += o.buf_bytes;
        self.conn_bytes += o.conn_bytes;
        self.enobufs += o.enobufs;
    }
}

/// What a server loop needs besides its engine.
pub struct LoopCtx<'a> {
    pub listener: &'a TcpListener,
    pub lookup: Lookup,
    pub protocol: Protocol,
    /// Set by the control thread: stop at the next wake-up.
    pub stop: &'a AtomicBool,
    /// Bytes per read (and per io_uring connection buffer).
    pub buf_size: usize,
    /// Live counters, published for the control thread's STATS.
    pub shared: &'a std::sync::Mutex<LoopStats>,
    /// Connections open in all loops together.
    pub live_total: &'a AtomicUsize,
    /// Most connections all loops together may hold.
    pub max_conns: usize,
    /// TSC ticks to busy-wait per read that carried data (a calibration
    /// aid; 0: none).
    pub extra_work_ticks: u64,
    /// HTTPS: every connection gets a TLS session with this config.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
}

impl LoopCtx<'_> {
    /// Takes a place for a new connection; `false` at the limit.
    pub fn admit(&self) -> bool {
        if self.live_total.fetch_add(1, Ordering::SeqCst) >= self.max_conns {
            self.live_total.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Gives back the places of `n` closed connections.
    pub fn release(&self, n: usize) {
        self.live_total.fetch_sub(n, Ordering::SeqCst);
    }
}

/// Wake-up period of a loop with nothing to do (how soon it sees `stop`).
pub const WAIT_TIMEOUT_MS: i32 = 100;

/// One echo server loop over one kernel interface.
pub trait Engine {
    /// Serves until `ctx.stop` is set; closes everything it accepted.
    fn serve(&mut self, ctx: &LoopCtx<'_>) -> io::Result<LoopStats>;
    /// io_uring only: whether SINGLE_ISSUER + DEFER_TASKRUN were set up.
    fn uring_deferred(&self) -> Option<bool> {
        None
    }
}

/// Builds an engine.
pub fn new_engine(kind: EngineKind, max_conns: usize) -> io::Result<Box<dyn Engine>> {
    Ok(match kind {
        EngineKind::Poll => Box::new(poll::PollEngine::new()),
        EngineKind::EpollLt => Box::new(epoll::EpollEngine::new(false)?),
        EngineKind::EpollEt => Box::new(epoll::EpollEngine::new(true)?),
        EngineKind::IoUring => Box::new(uring::UringEngine::new(max_conns)?),
    })
}

/// One connection's state.
#[derive(Debug, Default)]
pub struct Conn {
    /// The descriptor, -1 when the slot is free.
    pub fd: RawFd,
    /// Echo bytes not yet written (the rest of a short write).
    pub pending: Vec<u8>,
    pub pending_off: usize,
    /// sockperf framing state.
    pub filter: Filter,
    /// HTTP/1.1 request state.
    pub http: crate::http1::ServerFilter,
    /// After the connection's last answer was sent: bytes read and
    /// dropped since its FIN ([`linger`]); `None` before.
    pub lingering: Option<u64>,
    /// HTTPS: the connection's TLS session (None on a TLS server: it
    /// could not be made, and the connection is closed).
    pub tls: Option<Box<rustls::ServerConnection>>,
    /// The connection speaks TLS.
    pub secure: bool,
}

impl Conn {
    /// Runs received bytes through the protocol's filter into `out` (the
    /// bytes to send back); `false`: a malformed message (close at once,
    /// unless [`Conn::closes_after_output`]: HTTP put a 400 in `out`). HTTP
    /// stops making responses once `out` holds `max_out` bytes and keeps
    /// the rest of the input ([`Conn::holds_input`]); the other protocols
    /// send back at most what came in.
    pub fn filter_into(
        &mut self,
        proto: Protocol,
        input: &[u8],
        out: &mut Vec<u8>,
        max_out: usize,
    ) -> bool {
        match proto {
            Protocol::Raw => {
                out.extend_from_slice(input);
                true
            }
            Protocol::Sockperf => self.filter.feed(input, out).is_ok(),
            Protocol::Http1 => self.http.feed(input, out, max_out).is_ok(),
        }
    }

    /// Input received and not yet answered: read nothing more before
    /// [`Conn::resume_into`] has answered it.
    pub fn holds_input(&self) -> bool {
        self.http.holds_input()
    }

    /// Answers held input into `out` (up to `max_out` bytes, as
    /// [`Conn::filter_into`]); `false`: a malformed message (a 400 in
    /// `out`, then close).
    pub fn resume_into(&mut self, out: &mut Vec<u8>, max_out: usize) -> bool {
        self.http.resume(out, max_out).is_ok()
    }

    /// The connection's last answer was made (HTTP: a 400, or the response
    /// to a request that asked to close): send what is pending, read
    /// nothing more, then close.
    pub fn closes_after_output(&self) -> bool {
        self.http.closes()
    }

    /// Starts its lingering close ([`linger`]) once its last answer is
    /// written: the FIN goes after that answer (`shutdown(SHUT_WR)`, once)
    /// and the bytes dropped since are counted from 0. Returns them.
    pub fn start_linger(&mut self, stats: &mut LoopStats) -> u64 {
        *self.lingering.get_or_insert_with(|| {
            net::shutdown_write(self.fd);
            stats.syscalls += 1;
            0
        })
    }

    /// Bytes this connection holds besides its slot: unsent bytes and
    /// request state.
    pub fn own_bytes(&self) -> usize {
        self.pending.capacity() + self.http.own_bytes()
    }
}

/// The state array (a slab: free slots are reused, so indices stay small).
#[derive(Debug, Default)]
pub struct Conns {
    pub slots: Vec<Conn>,
    free: Vec<usize>,
    pub live: usize,
    /// HTTPS: the config new connections' sessions are made with.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
}

impl Conns {
    /// Stores a new connection; returns its slot.
    pub fn insert(&mut self, fd: RawFd) -> usize {
        self.live += 1;
        let tls = self.tls.as_ref().and_then(|cfg| {
            let mut s = rustls::ServerConnection::new(cfg.clone()).ok()?;
            // Bounded by the loop: a round's responses stop at one read
            // buffer, and nothing is read while the session holds output.
            s.set_buffer_limit(None);
            Some(Box::new(s))
        });
        let secure = self.tls.is_some();
        if let Some(i) = self.free.pop() {
            self.slots[i].fd = fd;
            self.slots[i].tls = tls;
            self.slots[i].secure = secure;
            return i;
        }
        self.slots.push(Conn {
            fd,
            tls,
            secure,
            ..Default::default()
        });
        self.slots.len() - 1
    }

    /// Frees a slot (the caller closes the descriptor).
    pub fn remove(&mut self, slot: usize) {
        let c = &mut self.slots[slot];
        c.fd = -1;
        c.pending = Vec::new();
        c.pending_off = 0;
        c.filter = Filter::default();
        c.http = Default::default();
        c.lingering = None;
        c.tls = None;
        c.secure = false;
        self.free.push(slot);
        self.live -= 1;
    }

    /// The seed's lookup: the first slot holding `fd`, comparing from the
    /// start of the array; `steps` counts the comparisons.
    #[inline]
    pub fn scan(&self, fd: RawFd, steps: &mut u64) -> Option<usize> {
        for (j, c) in self.slots.iter().enumerate() {
            if c.fd == fd {
                *steps += j as u64 + 1;
                return Some(j);
            }
        }
        *steps += self.slots.len() as u64;
        None
    }

    /// Closes every open descriptor; returns how many.
    pub fn close_all(&mut self, stats: &mut LoopStats) -> usize {
        stats.conn_bytes = 0;
        let mut n = 0;
        for i in 0..self.slots.len() {
            if self.slots[i].fd >= 0 {
                net::close(self.slots[i].fd);
                stats.syscalls += 1;
                stats.closed += 1;
                self.remove(i);
                n += 1;
            }
        }
        n
    }
}

/// What a readiness engine does next with a connection after echoing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Wait for readability.
    Read,
    /// Echo bytes are pending: wait for writability (and read nothing more).
    Write,
    /// The peer closed or failed: close it.
    Close,
}

/// Writes a connection's pending echo bytes; `true` when none are left.
fn flush_pending(c: &mut Conn, stats: &mut LoopStats) -> io::Result<bool> {
    while c.pending_off < c.pending.len() {
        stats.syscalls += 1;
        match net::write(c.fd, &c.pending[c.pending_off..]) {
            Ok(n) => {
                c.pending_off += n;
                stats.bytes += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    c.pending.clear();
    c.pending_off = 0;
    Ok(true)
}

/// The readiness engines' echo step: flush what is pending, then read and
/// write back — once (level-triggered: the engine reports again if more is
/// there) or until the socket is drained (`drain`, edge-triggered: no
/// second report comes). Held HTTP input is answered before anything more
/// is read; after a connection's last answer (HTTP: a 400, or a request
/// that asked to close) is sent, it is closed. Keeps `stats.conn_bytes` (the connections' own bytes) and, on
/// `Close`, frees the connection's buffers.
#[allow(clippy::too_many_arguments)]
pub fn echo_ready(
    c: &mut Conn,
    buf: &mut [u8],
    scratch: &mut Vec<u8>,
    proto: Protocol,
    drain: bool,
    extra_work_ticks: u64,
    stats: &mut LoopStats,
) -> Next {
    let before = c.own_bytes() as u64;
    let next = if c.secure {
        tls::step(c, buf, scratch, drain, extra_work_ticks, stats)
    } else {
        echo_step(c, buf, scratch, proto, drain, extra_work_ticks, stats)
    };
    if next == Next::Close {
        c.pending = Vec::new();
        c.pending_off = 0;
        c.http = Default::default();
        c.tls = None;
    }
    stats.conn_bytes = (stats.conn_bytes + c.own_bytes() as u64).saturating_sub(before);
    next
}

#[allow(clippy::too_many_arguments)]
fn echo_step(
    c: &mut Conn,
    buf: &mut [u8],
    scratch: &mut Vec<u8>,
    proto: Protocol,
    drain: bool,
    extra_work_ticks: u64,
    stats: &mut LoopStats,
) -> Next {
    match flush_pending(c, stats) {
        Ok(true) => {}
        Ok(false) => return Next::Write,
        Err(_) => return Next::Close,
    }
    if c.closes_after_output() {
        // Its last answer is sent.
        return linger(c, buf, stats);
    }
    // Responses made per round: one read buffer (plus one response).
    let max_out = buf.len();
    loop {
        let data: &[u8] = if c.holds_input() {
            scratch.clear();
            if !c.resume_into(scratch, max_out) {
                stats.protocol_errors += 1;
                if !c.closes_after_output() {
                    return Next::Close;
                }
            }
            scratch
        } else {
            stats.syscalls += 1;
            let n = match net::read(c.fd, buf) {
                Ok(0) => return Next::Close,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Read,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            };
            if extra_work_ticks > 0 {
                commbench_core::delay::tsc_delay_ticks(extra_work_ticks);
            }
            match proto {
                Protocol::Raw => &buf[..n],
                _ => {
                    scratch.clear();
                    if !c.filter_into(proto, &buf[..n], scratch, max_out) {
                        stats.protocol_errors += 1;
                        if !c.closes_after_output() {
                            return Next::Close;
                        }
                    }
                    scratch
                }
            }
        };
        let mut off = 0;
        while off < data.len() {
            stats.syscalls += 1;
            match net::write(c.fd, &data[off..]) {
                Ok(w) => {
                    off += w;
                    stats.bytes += w as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    c.pending.extend_from_slice(&data[off..]);
                    c.pending_off = 0;
                    return Next::Write;
                }
                Err(_) => return Next::Close,
            }
        }
        if c.closes_after_output() {
            return linger(c, buf, stats);
        }
        if !drain && !c.holds_input() {
            return Next::Read;
        }
    }
}

/// Most bytes a lingering connection reads and drops before it is closed
/// regardless (the peer keeps sending after the answer that ended it).
pub const LINGER_MAX_BYTES: u64 = 1 << 20;

/// A connection whose last answer (a refusal, or the response to a request
/// that asked to close) was written: closed only once the peer closes too
/// (or fails, or sends more than [`LINGER_MAX_BYTES`]), reading and
/// dropping what it still sends — nginx's lingering close. Closing at once
/// with unread input makes the kernel send a reset instead of a FIN and
/// drop what is still queued to send, so a client still sending lost the
/// answer (and a pipelining client the responses before it). The first
/// call sends the FIN after the answer (`shutdown(SHUT_WR)`).
pub fn linger(c: &mut Conn, buf: &mut [u8], stats: &mut LoopStats) -> Next {
    let mut dropped = c.start_linger(stats);
    loop {
        stats.syscalls += 1;
        match net::read(c.fd, buf) {
            Ok(0) => return Next::Close,
            Ok(n) => {
                dropped = dropped.saturating_add(n as u64);
                c.lingering = Some(dropped);
                if dropped > LINGER_MAX_BYTES {
                    return Next::Close;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Next::Close,
        }
    }
}

/// Connections shed per wake-up at most when out of descriptors.
pub const SHED_BATCH: usize = 4096;

/// Accepts every queued connection (until EAGAIN) and hands each to
/// `on_new`; past `ctx.max_conns` a connection is closed at once
/// (`refused`); out of descriptors, the waiting connections are shed
/// through `reserve` and the listener stays watched, so the loop accepts
/// again as soon as descriptors are free. Returns whether it ran out of
/// descriptors.
pub fn accept_all(
    listener: RawFd,
    ctx: &LoopCtx<'_>,
    reserve: &mut net::Reserve,
    stats: &mut LoopStats,
    mut on_new: impl FnMut(RawFd, &mut LoopStats),
) -> bool {
    loop {
        stats.syscalls += 1;
        match net::accept(listener) {
            Ok(fd) => {
                if !ctx.admit() {
                    net::close(fd);
                    stats.syscalls += 1;
                    stats.refused += 1;
                    continue;
                }
                let _ = net::set_nodelay(fd, true);
                stats.syscalls += 1;
                stats.accepted += 1;
                on_new(fd, stats);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ECONNABORTED) | Some(libc::EPROTO)
                ) =>
            {
                continue
            }
            Err(e) => {
                stats.accept_errors += 1;
                let out = net::out_of_descriptors(&e);
                if out {
                    stats.refused += reserve.shed(listener, SHED_BATCH);
                }
                return out;
            }
        }
    }
}

/// Publishes a loop's counters for the control thread (cheap: at most
/// once per wake-up).
pub fn publish(ctx: &LoopCtx<'_>, stats: &LoopStats, live: usize) {
    if let Ok(mut s) = ctx.shared.try_lock() {
        *s = *stats;
        s.live = live as u64;
    }
}
