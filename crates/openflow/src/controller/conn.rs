//! Connection handling: the worker threads (one epoll instance each;
//! worker 0 also accepts and deals new connections round-robin through the
//! inboxes and eventfd wakers), each connection's buffers, reads and
//! writes, backpressure, the global input bound, the idle and
//! partial-message timeouts and the periodic sweep. Complete messages go
//! to `apps::handle`.
//!
//! Invariants: a connection's unsent replies above `max_pending_out` stop
//! its reads until they drain to a quarter; a connection holds input only
//! for its started message (at most 64 KiB), reserved against the global
//! `InputBudget` before each read and settled after it; at the bound, only
//! the rest of a message that has fully arrived is read; reads per
//! connection per turn stop at `READ_BUDGET` so one switch cannot starve
//! the others; a failing peer loses only its own connection, with one log
//! line.

use super::apps::{handle, packet_in_run10, App, PeerCtx, PeerError, Templates};
use super::budget::InputBudget;
use super::log::{Logger, PeerLog};
use super::{ControllerConfig, ControllerStats};
use crate::sys::{self, Epoll, EventFd};
use crate::wire::frame::{FlowKey, VLAN_NONE};
use crate::wire::{frame_len, of10, of13, OFP10_VERSION, OFP13_VERSION};
use commbench_core::placement::CpuList;
use commbench_core::rusage::Usage;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Per worker: connections accepted by worker 0, waiting to be adopted.
pub(super) type Inboxes = Arc<Vec<Mutex<Vec<(TcpStream, SocketAddr)>>>>;

const TOKEN_LISTENER: u64 = u64::MAX;
const TOKEN_WAKER: u64 = u64::MAX - 1;
/// A worker's read buffer: one connection's started message (at most
/// 64 KiB) followed by one read.
const SCRATCH_LEN: usize = 65536 + READ_CHUNK;
/// A connection's input buffer above this is freed when it empties.
const KEEP_PARTIAL: usize = 4096;
/// A connection's output buffer above this is freed by the sweep when it
/// is empty.
const KEEP_OUT: usize = 65536;
/// Freed buffer bytes after which a sweep returns heap memory to the kernel.
const TRIM_AFTER: usize = 1 << 20;

pub(super) struct WorkerCtx {
    pub(super) cpus: Option<CpuList>,
    pub(super) id: usize,
    pub(super) cfg: ControllerConfig,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) wakers: Vec<Arc<EventFd>>,
    pub(super) inboxes: Inboxes,
    pub(super) listener: Option<TcpListener>,
    pub(super) log: Logger,
    pub(super) budget: Arc<InputBudget>,
}

struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    /// The started, unfinished message (empty between messages).
    partial: Vec<u8>,
    /// When `partial` became non-empty.
    partial_since: Option<Instant>,
    /// When the last complete message arrived (or the connection opened).
    last_msg: Instant,
    /// Waiting for room under the global input bound (in `Worker::held`).
    held: bool,
    out: Vec<u8>,
    out_pos: usize,
    write_blocked: bool,
    read_paused: bool,
    /// Negotiated version; 0 until the peer's HELLO.
    version: u8,
    dpid: Option<u64>,
    macs: HashMap<[u8; 6], u32>,
    plog: PeerLog,
    open: bool,
}

impl Conn {
    fn pending(&self) -> usize {
        self.out.len() - self.out_pos
    }
    fn who(&self) -> String {
        match self.dpid {
            Some(d) => format!("{} (dpid {d:#x})", self.peer),
            None => self.peer.to_string(),
        }
    }
}

struct Worker {
    cfg: ControllerConfig,
    ep: Epoll,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    stats: ControllerStats,
    t: Templates,
    ours: u8,
    /// Connections whose read stopped at the budget before EAGAIN; the
    /// loop revisits them so one busy switch cannot starve the others.
    again: Vec<usize>,
    log: Logger,
    /// Last sweep over the connections (log summaries).
    swept: Instant,
    /// accept(2) errors not yet logged (at most one line per sweep).
    accept_errors: u64,
    budget: Arc<InputBudget>,
    /// Where every read lands: the connection's started message is copied
    /// in front of it, complete messages are handled in place.
    scratch: Box<[u8]>,
    /// Connections waiting for room under the global input bound.
    held: Vec<usize>,
    /// Buffer bytes freed since the heap was last trimmed.
    freed: usize,
    /// The output buffer a connection with no unsent replies borrows for
    /// a read turn (see `on_readable`). One per worker, kept: it holds at
    /// most the replies to one turn's input (`READ_BUDGET` reads of at
    /// most `READ_CHUNK` bytes each).
    spare: Vec<u8>,
}

/// How often a worker sweeps its connections for due log summaries.
const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// Reads per connection per turn.
const READ_BUDGET: usize = 4;
/// The largest read, and the smallest one: a read asks for as much as
/// the connection's replies have room for under `max_pending_out` (a
/// flow_mod is about as long as the packet_in it answers), within these.
/// 64 KiB, though it makes more read calls than a C controller reading up
/// to 1 MiB: under real cbench, whose autotuned send buffers keep the
/// controller's receive queues full, larger reads cost more kernel time
/// per response (sys 44.8 ns at 64 KiB, 64.2 at 256 KiB, 80.1 at 1 MiB
/// against the C controller's 43–50, interleaved, 9 repeats); under
/// `commbench cbench` the size made no difference.
const READ_CHUNK: usize = 65536;
const MIN_READ: usize = 65536;

impl WorkerCtx {
    pub(super) fn run(self) -> ControllerStats {
        if let Some(c) = &self.cpus {
            if let Err(e) = c.pin_current_thread() {
                self.log
                    .line(format!("controller: cannot pin worker {}: {e}", self.id));
            }
        }
        let cpu0 = Usage::thread();
        let ep = match Epoll::new() {
            Ok(e) => e,
            Err(e) => {
                self.log.line(format!("controller: epoll_create1: {e}"));
                return ControllerStats::default();
            }
        };
        let _ = ep.add(self.wakers[self.id].raw(), TOKEN_WAKER, sys::IN);
        if let Some(l) = &self.listener {
            let _ = ep.add(l.as_raw_fd(), TOKEN_LISTENER, sys::IN);
        }
        let trivial10 = {
            let t = of10::FlowModTemplate::new(0, 0, 0x8000);
            let pi = of10::Repr::new(
                0,
                of10::Message::PacketIn(of10::PacketIn {
                    buffer_id: 0,
                    total_len: 0,
                    in_port: 1,
                    reason: 0,
                    data: vec![],
                }),
            )
            .to_bytes();
            let mut b = vec![0u8; of10::FLOW_MOD_TEMPLATE_LEN];
            t.write(
                &mut b,
                0,
                &of10::PacketInView::new_checked(&pi[..]).unwrap(),
            );
            b
        };
        let trivial13 = {
            let mut v = Vec::new();
            of13::write_exact_flow_mod(
                &mut v,
                0,
                1,
                &FlowKey {
                    dl_vlan: VLAN_NONE,
                    ..Default::default()
                },
                0,
            );
            v
        };
        let mut w = Worker {
            ours: if self.cfg.of13 {
                OFP13_VERSION
            } else {
                OFP10_VERSION
            },
            cfg: self.cfg.clone(),
            ep,
            conns: Vec::new(),
            free: Vec::new(),
            stats: ControllerStats::default(),
            t: Templates {
                fm10: of10::FlowModTemplate::new(0, 0, 0x8000),
                trivial10,
                trivial13,
            },
            again: Vec::new(),
            log: self.log.clone(),
            swept: Instant::now(),
            accept_errors: 0,
            budget: self.budget.clone(),
            scratch: vec![0u8; SCRATCH_LEN].into_boxed_slice(),
            held: Vec::new(),
            freed: 0,
            spare: Vec::new(),
        };
        let mut events = sys::new_events(1024);
        let mut rr = 0usize;
        while !self.stop.load(Ordering::Relaxed) {
            let timeout = if w.again.is_empty() && !self.cfg.busy_poll {
                50
            } else {
                0
            };
            w.stats.waits += 1;
            let evs = match w.ep.wait(&mut events, timeout) {
                Ok(e) => e,
                Err(e) => {
                    w.log.line(format!("controller: epoll_wait: {e}"));
                    break;
                }
            };
            for e in evs {
                let tok = sys::event_token(e);
                let bits = sys::event_bits(e);
                if tok == TOKEN_LISTENER {
                    let l = self.listener.as_ref().expect("listener token on worker 0");
                    loop {
                        match l.accept() {
                            Ok((s, peer)) => {
                                let target = rr % self.wakers.len();
                                rr += 1;
                                if target == self.id {
                                    w.add_conn(s, peer);
                                } else {
                                    self.inboxes[target].lock().unwrap().push((s, peer));
                                    self.wakers[target].notify();
                                }
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => {
                                // EMFILE and friends: say so (once per
                                // sweep, with a count), keep serving.
                                if w.accept_errors == 0 {
                                    w.log.line(format!("controller: accept: {e}"));
                                }
                                w.accept_errors += 1;
                                break;
                            }
                        }
                    }
                } else if tok == TOKEN_WAKER {
                    self.wakers[self.id].drain();
                    let new: Vec<_> = std::mem::take(&mut *self.inboxes[self.id].lock().unwrap());
                    for (s, peer) in new {
                        w.add_conn(s, peer);
                    }
                } else {
                    let k = tok as usize;
                    if bits & sys::OUT != 0 {
                        w.on_writable(k);
                    }
                    if bits & (sys::IN | sys::ERR) != 0 {
                        w.on_readable(k);
                    }
                }
            }
            let again = std::mem::take(&mut w.again);
            for k in again {
                w.on_readable(k);
            }
            if !w.held.is_empty() && w.budget.has_room() {
                for k in std::mem::take(&mut w.held) {
                    if let Some(c) = w.conns[k].as_mut() {
                        c.held = false;
                        w.on_readable(k);
                    }
                }
            }
            w.sweep();
        }
        for k in 0..w.conns.len() {
            if w.conns[k].is_some() {
                w.drop_conn(k, None);
            }
        }
        let cpu = Usage::thread().since(&cpu0);
        w.stats.cpu_user_s = cpu.user_s;
        w.stats.cpu_sys_s = cpu.sys_s;
        w.stats
    }
}

impl Worker {
    fn add_conn(&mut self, s: TcpStream, peer: SocketAddr) {
        if s.set_nonblocking(true).is_err() {
            return;
        }
        let _ = sys::set_nodelay(s.as_raw_fd(), true);
        // Checked by `Controller::start` on a probe socket.
        let _ = sys::apply_congestion(s.as_raw_fd(), &self.cfg.tcp_congestion);
        let k = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Err(e) = self.ep.add(
            s.as_raw_fd(),
            k as u64,
            sys::IN | sys::OUT | sys::ET | sys::ERR,
        ) {
            self.log
                .line(format!("controller: epoll_ctl for {peer}: {e}"));
            self.free.push(k);
            return;
        }
        let mut c = Conn {
            stream: s,
            peer,
            partial: Vec::new(),
            partial_since: None,
            last_msg: Instant::now(),
            held: false,
            out: Vec::new(),
            out_pos: 0,
            write_blocked: false,
            read_paused: false,
            version: 0,
            dpid: None,
            macs: HashMap::new(),
            plog: PeerLog::default(),
            open: true,
        };
        if self.ours == OFP13_VERSION {
            of13::Repr::new(
                1,
                of13::Message::Hello(vec![of13::HelloElement::VersionBitmap(vec![
                    1 << OFP13_VERSION,
                ])]),
            )
            .emit(&mut c.out);
        } else {
            of10::Repr::new(1, of10::Message::Hello(vec![])).emit(&mut c.out);
        }
        self.stats.connections += 1;
        if self.cfg.log_connections {
            self.log
                .line(format!("controller: switch connected from {peer}"));
        }
        self.conns[k] = Some(c);
        self.flush(k);
    }

    /// Close a connection; `why` is logged (None: orderly shutdown).
    fn drop_conn(&mut self, k: usize, why: Option<String>) {
        if let Some(mut c) = self.conns[k].take() {
            let _ = self.ep.delete(c.stream.as_raw_fd());
            self.stats.disconnections += 1;
            let held = c.partial.capacity();
            self.budget.settle(0, 0, held);
            self.freed += held + c.out.capacity();
            self.summarise(&mut c, Instant::now(), true);
            match why {
                Some(w) => self.log.line(format!(
                    "controller: {}: {w}; connection closed, others continue",
                    c.who()
                )),
                None => {
                    if self.cfg.log_connections {
                        self.log
                            .line(format!("controller: {} disconnected", c.who()));
                    }
                }
            }
            self.free.push(k);
        }
    }

    /// Log how many of a peer's per-message lines were suppressed, when an
    /// interval has passed or the peer is leaving.
    fn summarise(&mut self, c: &mut Conn, now: Instant, closing: bool) {
        if let Some(n) = c.plog.take_summary(now, closing) {
            self.stats.log_lines_suppressed += n;
            self.log.line(format!(
                "controller: peer {}: {n} more OFPT_ERROR messages suppressed",
                c.who()
            ));
        }
    }

    /// Once per [`SWEEP_EVERY`]: due per-peer summaries, and the count of
    /// accept errors since the last sweep.
    fn sweep(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.swept) < SWEEP_EVERY {
            return;
        }
        self.swept = now;
        if self.accept_errors > 1 {
            self.log.line(format!(
                "controller: {} more accept errors",
                self.accept_errors - 1
            ));
        }
        self.accept_errors = 0;
        for k in 0..self.conns.len() {
            let Some(mut c) = self.conns[k].take() else {
                continue;
            };
            self.summarise(&mut c, now, false);
            if c.out.is_empty() && c.out.capacity() > KEEP_OUT {
                // A burst of replies is over: give its memory back.
                self.freed += c.out.capacity();
                c.out = Vec::new();
            }
            let started = c.partial_since.map(|t| now.duration_since(t));
            let idle = now.duration_since(c.last_msg);
            let why = if started.is_some_and(|d| d >= self.cfg.partial_timeout) {
                self.stats.partial_timeouts += 1;
                Some(format!(
                    "message not finished within {:?} ({} bytes of it received): partial-message timeout",
                    self.cfg.partial_timeout,
                    c.partial.len()
                ))
            } else if self.cfg.idle_timeout.is_some_and(|t| idle >= t) {
                self.stats.idle_timeouts += 1;
                Some(format!(
                    "no complete message for {}s: idle timeout",
                    idle.as_secs()
                ))
            } else {
                None
            };
            self.conns[k] = Some(c);
            if why.is_some() {
                self.drop_conn(k, why);
            }
        }
        if self.freed >= TRIM_AFTER {
            self.freed = 0;
            sys::trim_heap();
        }
    }

    fn flush(&mut self, k: usize) {
        let Some(c) = self.conns[k].as_mut() else {
            return;
        };
        while c.out_pos < c.out.len() && !c.write_blocked {
            self.stats.writes += 1;
            match c.stream.write(&c.out[c.out_pos..]) {
                Ok(0) => {
                    self.drop_conn(k, Some("write returned 0".into()));
                    return;
                }
                Ok(n) => {
                    // A short write means the send buffer is full and the
                    // kernel noted a waiting writer: EPOLLOUT follows when
                    // room frees, so a second call would only see EAGAIN.
                    c.write_blocked = c.out_pos + n < c.out.len();
                    c.out_pos += n;
                    self.stats.bytes_out += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.write_blocked = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let why = if e.kind() == io::ErrorKind::BrokenPipe
                        || e.kind() == io::ErrorKind::ConnectionReset
                    {
                        None
                    } else {
                        Some(format!("write error: {e}"))
                    };
                    self.drop_conn(k, why);
                    return;
                }
            }
        }
        if c.out_pos == c.out.len() {
            // Keep the capacity: under a generator that sends large
            // batches, every turn's replies outgrow KEEP_OUT, and freeing
            // them per turn cost a chain of reallocations (and the
            // allocator's trims) per turn. The sweep gives an empty
            // buffer above KEEP_OUT back within SWEEP_EVERY.
            c.out.clear();
            c.out_pos = 0;
        } else if c.out_pos >= 65536 {
            c.out.drain(..c.out_pos);
            c.out_pos = 0;
        }
    }

    fn on_writable(&mut self, k: usize) {
        let Some(c) = self.conns[k].as_mut() else {
            return;
        };
        c.write_blocked = false;
        self.flush(k);
        let Some(c) = self.conns[k].as_mut() else {
            return;
        };
        if c.read_paused && c.pending() <= self.cfg.max_pending_out / 4 {
            c.read_paused = false;
            // The read edge may have been consumed while paused.
            self.on_readable(k);
        }
    }

    /// Reads a turn's worth from connection `k`, then writes the replies
    /// to all of it at once: one write per turn instead of one per read
    /// (fewer, larger segments for both sides' kernels).
    ///
    /// A connection with no unsent replies borrows the worker's `spare`
    /// output buffer for the turn and gives it back once the replies are
    /// written, so every switch's replies are built in the same memory,
    /// which stays in cache for the kernel's copy out of it; a buffer per
    /// switch, reused only every N turns, was out of cache by then.
    fn on_readable(&mut self, k: usize) {
        let lent = match self.conns[k].as_mut() {
            Some(c) if c.out.is_empty() => {
                std::mem::swap(&mut c.out, &mut self.spare);
                true
            }
            _ => false,
        };
        self.read_turn(k);
        self.flush(k);
        if lent {
            if let Some(c) = self.conns[k].as_mut() {
                if c.out.is_empty() {
                    std::mem::swap(&mut c.out, &mut self.spare);
                }
            }
        }
    }

    fn read_turn(&mut self, k: usize) {
        for _ in 0..READ_BUDGET {
            let max_out = self.cfg.max_pending_out;
            let Some(c) = self.conns[k].as_mut() else {
                return;
            };
            if c.read_paused {
                return;
            }
            if c.pending() > max_out {
                c.read_paused = true;
                self.stats.backpressure_pauses += 1;
                return;
            }
            // Read at most what the replies have room for (see
            // READ_CHUNK; finer interleaving of switches), and only what the
            // global input bound has room for; without room, only the rest
            // of the started message once all of it has arrived (reading it
            // frees the connection's buffer, never grows it).
            let have = c.partial.len();
            let room = max_out.saturating_sub(c.pending());
            let granted = self.budget.reserve(room.clamp(MIN_READ, READ_CHUNK));
            let want = if granted > 0 {
                granted
            } else {
                match rest_of_message(&c.partial)
                    .filter(|&n| sys::readable_bytes(c.stream.as_raw_fd()) >= n)
                {
                    Some(n) => n,
                    None => {
                        // A peer that left while held is let go now, not at
                        // its timeout: its buffer is what the others wait for.
                        self.stats.reads += 1;
                        let gone = match c.stream.peek(&mut [0u8; 1]) {
                            Ok(n) => n == 0,
                            Err(e) => !matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                            ),
                        };
                        if gone {
                            let why = (have > 0).then(|| {
                                format!(
                                    "peer closed in the middle of a message ({have} bytes pending)"
                                )
                            });
                            self.drop_conn(k, why);
                            return;
                        }
                        // Revisited when the total drops (or the rest arrives).
                        if !c.held {
                            c.held = true;
                            self.held.push(k);
                            self.stats.buffered_in_waits += 1;
                        }
                        return;
                    }
                }
            };
            self.scratch[..have].copy_from_slice(&c.partial);
            self.stats.reads += 1;
            let r = c.stream.read(&mut self.scratch[have..have + want]);
            match r {
                Ok(0) => {
                    self.budget.settle(granted, 0, 0);
                    let why = (have > 0).then(|| {
                        format!("peer closed in the middle of a message ({have} bytes pending)")
                    });
                    self.drop_conn(k, why);
                    return;
                }
                Ok(n) => {
                    self.stats.bytes_in += n as u64;
                    let res = self.process(k, have + n, granted);
                    if let Err(why) = res {
                        self.stats.protocol_errors += 1;
                        self.flush(k);
                        self.drop_conn(k, Some(why.to_string()));
                        return;
                    }
                    if let Some(c) = self.conns[k].as_ref() {
                        self.stats.max_pending_out =
                            self.stats.max_pending_out.max(c.pending() as u64);
                    }
                    if n < want {
                        // The receive queue was empty: the next data raises
                        // a new edge-triggered EPOLLIN, so another read now
                        // would only return EAGAIN.
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.budget.settle(granted, 0, 0);
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    self.budget.settle(granted, 0, 0);
                }
                Err(e) => {
                    self.budget.settle(granted, 0, 0);
                    let why = (e.kind() != io::ErrorKind::ConnectionReset)
                        .then(|| format!("read error: {e}"));
                    self.drop_conn(k, why);
                    return;
                }
            }
        }
        self.again.push(k);
    }

    /// Handle every complete message in `scratch[..len]` (connection `k`'s
    /// started message followed by what was just read), keep the rest as
    /// the connection's started message, and settle the read's `reserved`
    /// bytes of the global input bound with what the connection now holds.
    fn process(&mut self, k: usize, len: usize, reserved: usize) -> Result<(), PeerError> {
        let mut c = self.conns[k].take().expect("open connection");
        let buf = &self.scratch[..len];
        let mut off = 0;
        let mut res = Ok(());
        // The template path answers runs of packet_ins in one loop.
        let template =
            self.cfg.app == App::Cbench && !self.cfg.naive && self.cfg.extra_work_ns == 0;
        while off < len {
            if template && c.version == OFP10_VERSION {
                off += packet_in_run10(&mut self.stats, &self.t, &mut c.out, &buf[off..]);
                if off == len {
                    break;
                }
            }
            let n = match frame_len(&buf[off..]) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(e) => {
                    res = Err(PeerError::Malformed(e));
                    break;
                }
            };
            let msg = &buf[off..off + n];
            let r = handle(
                &mut self.stats,
                &self.t,
                &self.cfg,
                self.ours,
                &mut c.out,
                &mut c.version,
                &mut c.dpid,
                &mut c.macs,
                &mut PeerCtx {
                    log: &self.log,
                    plog: &mut c.plog,
                    peer: c.peer,
                },
                msg,
            );
            off += n;
            if let Err(e) = r {
                res = Err(e);
                break;
            }
        }
        if off > 0 {
            c.last_msg = Instant::now();
        }
        // Keep the rest; a buffer is held only while a message is started.
        let rest = &buf[off..];
        let before = c.partial.capacity();
        if rest.is_empty() {
            c.partial_since = None;
            if before > KEEP_PARTIAL {
                c.partial = Vec::new();
            } else {
                c.partial.clear();
            }
        } else {
            if off > 0 || c.partial_since.is_none() {
                c.partial_since = Some(Instant::now());
            }
            if before > KEEP_PARTIAL && rest.len() < before / 4 {
                c.partial = Vec::with_capacity(rest.len());
            } else {
                c.partial.clear();
                c.partial.reserve_exact(rest.len());
            }
            c.partial.extend_from_slice(rest);
        }
        let after = c.partial.capacity();
        self.budget.settle(
            reserved,
            after.saturating_sub(before),
            before.saturating_sub(after),
        );
        if after < before {
            self.freed += before - after;
        }
        c.open = res.is_ok();
        self.conns[k] = Some(c);
        res
    }
}

/// Bytes still missing from a started message whose length is known (its
/// header is complete); None when the header itself is not.
fn rest_of_message(partial: &[u8]) -> Option<usize> {
    if partial.len() < crate::wire::HEADER_LEN {
        return None;
    }
    let len = u16::from_be_bytes([partial[2], partial[3]]) as usize;
    len.checked_sub(partial.len()).filter(|&n| n > 0)
}
