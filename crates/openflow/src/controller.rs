//! The built-in OpenFlow controller: epoll worker threads serving many
//! switches, with the seed's cbench app in two variants and a learning
//! switch.
//!
//! - `cbench` app, default: each packet_in is answered by patching a
//!   prepared flow_mod template in place (xid, exact match from the frame,
//!   buffer_id, output in_port+1) — the seed's "cache the flow_mod" lesson
//!   without the allocation that remained in the Ruby version.
//! - `cbench --naive`: every packet_in is decoded into a fresh [`Repr`] and
//!   the reply built through the general encoder with fresh allocations —
//!   what the seed's `ExactMatch.new` + `send_flow_mod_add` did.
//! - `learning`: a MAC-learning switch (flow_mod to a known port, else
//!   packet_out flood).
//! - `trivial`: a constant flow_mod with only xid/buffer_id patched; it does
//!   no parsing and exists to measure the emulator's own ceiling.
//!
//! Invariants: per connection, output is bounded — when a switch's replies
//! stop draining (more than `max_pending_out` bytes queued) the controller
//! stops reading from it until they drain (backpressure), so an open-loop
//! emulator cannot grow the controller's memory; a peer that sends a bad
//! length, a bad version or closes mid-message loses only its own
//! connection, with one log line.
//!
//! Input memory is bounded too: a connection holds only the message it has
//! started (at most 64 KiB, freed when it completes or the connection
//! closes), the total held across connections is bounded ([`budget`]), a
//! message not finished within `partial_timeout` and a connection with no
//! complete message for `idle_timeout` are closed.
//!
//! Logging is off the packet path: workers queue lines for a logger thread
//! ([`log`]) and never write to stderr themselves, and repeated per-message
//! lines are limited per peer, so a peer flooding OFPT_ERROR (or a stderr
//! nobody reads) cannot stall the workers or shutdown.
//!
//! [`Repr`]: crate::wire::of10::Repr

mod budget;
pub mod log;

use crate::sys::{self, Epoll, EventFd};
use crate::wire::frame::{FlowKey, VLAN_NONE};
use crate::wire::{
    be32, frame_len, of10, of13, put32, Header, NO_BUFFER, OFP10_VERSION, OFP13_VERSION,
};
use commbench_core::placement::CpuList;
use commbench_core::rusage::Usage;
use serde::Serialize;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use budget::InputBudget;
use log::{Logger, PeerLog};

/// Which application answers packet_ins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum App {
    Cbench,
    Learning,
    Trivial,
}

impl std::str::FromStr for App {
    type Err = String;
    fn from_str(s: &str) -> Result<App, String> {
        match s {
            "cbench" => Ok(App::Cbench),
            "learning" => Ok(App::Learning),
            "trivial" => Ok(App::Trivial),
            _ => Err(format!(
                "unknown app '{s}': use cbench, learning or trivial"
            )),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ControllerConfig {
    pub app: App,
    /// Build every reply through the general encoder (the seed's slow path).
    pub naive: bool,
    /// Speak OpenFlow 1.3 (hello bitmap offers only 1.3) instead of 1.0.
    pub of13: bool,
    pub listen: SocketAddr,
    pub threads: usize,
    /// Backpressure threshold per connection, bytes of unsent replies.
    pub max_pending_out: usize,
    /// Log each connection and disconnection, and OFPT_ERROR messages from
    /// switches (limited per peer). Off (`-q`): only a connection closed
    /// for an error is logged.
    pub log_connections: bool,
    /// Pin the worker threads to these CPUs (taskset list syntax).
    pub cpus: Option<String>,
    /// Poll epoll without sleeping. Only for a worker with a CPU of its own
    /// (it refuses to start without `cpus`): a responder that never sleeps
    /// spares its peer the wake-up on every write, which is how the
    /// emulator's own ceiling is measured against `--app trivial`.
    pub busy_poll: bool,
    /// Close a connection with no complete message for this long (None: never).
    pub idle_timeout: Option<Duration>,
    /// Close a connection whose started message is not finished within this.
    pub partial_timeout: Duration,
    /// Bound on input bytes held across all connections (started,
    /// unfinished messages); at the bound, new data waits in the kernel.
    pub max_buffered_in: usize,
    /// TCP congestion control of each accepted connection: `auto`
    /// replaces a pacing algorithm (bbr) by cubic or reno, `kernel` keeps
    /// the kernel's default, or an algorithm name.
    pub tcp_congestion: String,
}

/// Smallest accepted `max_buffered_in`: one largest message and a read.
pub const MIN_BUFFERED_IN: usize = 1 << 20;

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            app: App::Cbench,
            naive: false,
            of13: false,
            listen: "127.0.0.1:6653".parse().unwrap(),
            threads: 1,
            max_pending_out: 1 << 20,
            log_connections: true,
            cpus: None,
            busy_poll: false,
            idle_timeout: Some(Duration::from_secs(300)),
            partial_timeout: Duration::from_secs(10),
            max_buffered_in: 64 << 20,
            tcp_congestion: "auto".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, io::Error),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}

/// What the controller did, summed over its worker threads.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ControllerStats {
    pub connections: u64,
    pub disconnections: u64,
    pub protocol_errors: u64,
    pub packet_in: u64,
    pub flow_mod_sent: u64,
    pub packet_out_sent: u64,
    pub echo_request: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Times a connection stopped being read because its replies did not drain.
    pub backpressure_pauses: u64,
    /// Largest backlog of unsent replies seen on one connection, bytes.
    pub max_pending_out: u64,
    /// OFPT_ERROR messages received from switches.
    pub error_msgs: u64,
    /// Per-message log lines not printed (beyond each peer's first few).
    pub log_lines_suppressed: u64,
    /// Log lines dropped because stderr did not take them.
    pub log_lines_dropped: u64,
    /// Connections closed for no complete message within the idle timeout.
    pub idle_timeouts: u64,
    /// Connections closed for a message not finished within the partial timeout.
    pub partial_timeouts: u64,
    /// Most input bytes held across all connections at once.
    pub max_buffered_in: u64,
    /// Times a connection's read waited for room under the global bound.
    pub buffered_in_waits: u64,
    pub cpu_user_s: f64,
    pub cpu_sys_s: f64,
}

impl ControllerStats {
    fn add(&mut self, o: &ControllerStats) {
        self.connections += o.connections;
        self.disconnections += o.disconnections;
        self.protocol_errors += o.protocol_errors;
        self.packet_in += o.packet_in;
        self.flow_mod_sent += o.flow_mod_sent;
        self.packet_out_sent += o.packet_out_sent;
        self.echo_request += o.echo_request;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.backpressure_pauses += o.backpressure_pauses;
        self.max_pending_out = self.max_pending_out.max(o.max_pending_out);
        self.error_msgs += o.error_msgs;
        self.log_lines_suppressed += o.log_lines_suppressed;
        self.log_lines_dropped += o.log_lines_dropped;
        self.idle_timeouts += o.idle_timeouts;
        self.partial_timeouts += o.partial_timeouts;
        self.max_buffered_in = self.max_buffered_in.max(o.max_buffered_in);
        self.buffered_in_waits += o.buffered_in_waits;
        self.cpu_user_s += o.cpu_user_s;
        self.cpu_sys_s += o.cpu_sys_s;
    }
    pub fn cpu_s(&self) -> f64 {
        self.cpu_user_s + self.cpu_sys_s
    }
}

/// A running controller.
pub struct Controller {
    addr: SocketAddr,
    tcp_congestion: sys::CongestionApplied,
    stop: Arc<AtomicBool>,
    wakers: Vec<Arc<EventFd>>,
    handles: Vec<JoinHandle<ControllerStats>>,
    log: Logger,
    budget: Arc<InputBudget>,
}

impl Controller {
    /// Bind and start the worker threads.
    pub fn start(cfg: &ControllerConfig) -> Result<Controller, ControllerError> {
        if cfg.threads == 0 || cfg.threads > 256 {
            return Err(ControllerError::Config("--threads must be 1..=256".into()));
        }
        if cfg.max_pending_out < 4096 {
            return Err(ControllerError::Config(
                "max pending output must be at least 4096 bytes".into(),
            ));
        }
        if cfg.max_buffered_in < MIN_BUFFERED_IN {
            return Err(ControllerError::Config(format!(
                "max buffered input must be at least {MIN_BUFFERED_IN} bytes"
            )));
        }
        if cfg.partial_timeout.is_zero() || cfg.idle_timeout.is_some_and(|d| d.is_zero()) {
            return Err(ControllerError::Config(
                "timeouts must be positive (no idle timeout: None)".into(),
            ));
        }
        let cpus = match &cfg.cpus {
            Some(c) => Some(
                CpuList::parse_online(c)
                    .map_err(|e| ControllerError::Config(format!("--cpus: {e}")))?,
            ),
            None => None,
        };
        if cfg.busy_poll && cpus.as_ref().is_none_or(|c| c.cpus().len() < cfg.threads) {
            return Err(ControllerError::Config(
                "--busy-poll spins: give each worker thread a CPU of its own with --cpus (as many CPUs as --threads, none shared with the emulator)".into(),
            ));
        }
        let tcp_congestion = sys::probe_congestion(&cfg.tcp_congestion)
            .map_err(|e| ControllerError::Config(format!("--tcp-congestion: {e}")))?;
        sys::raise_nofile();
        let listener =
            TcpListener::bind(cfg.listen).map_err(|e| ControllerError::Bind(cfg.listen, e))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let n = cfg.threads;
        let wakers: Vec<Arc<EventFd>> = (0..n)
            .map(|_| EventFd::new().map(Arc::new))
            .collect::<io::Result<_>>()?;
        let inboxes: Inboxes = Arc::new((0..n).map(|_| Mutex::new(Vec::new())).collect());
        let mut listener = Some(listener);
        let log = Logger::start()?;
        let budget = Arc::new(InputBudget::new(cfg.max_buffered_in));
        let mut handles = Vec::new();
        for t in 0..n {
            let w = WorkerCtx {
                cpus: cpus.clone(),
                id: t,
                cfg: cfg.clone(),
                stop: stop.clone(),
                wakers: wakers.clone(),
                inboxes: inboxes.clone(),
                listener: if t == 0 { listener.take() } else { None },
                log: log.clone(),
                budget: budget.clone(),
            };
            handles.push(
                std::thread::Builder::new()
                    .name(format!("ofctl-{t}"))
                    .spawn(move || w.run())?,
            );
        }
        Ok(Controller {
            addr,
            tcp_congestion,
            stop,
            wakers,
            handles,
            log,
            budget,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The kernel's congestion control and the one each connection gets.
    pub fn tcp_congestion(&self) -> &sys::CongestionApplied {
        &self.tcp_congestion
    }

    /// A flag that stops the controller when set (e.g. from a signal handler).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stop all workers and return what they did.
    pub fn stop(self) -> ControllerStats {
        self.stop.store(true, Ordering::SeqCst);
        for w in &self.wakers {
            w.notify();
        }
        self.wait()
    }

    /// Wait for the workers to end (after the stop flag is set). The log
    /// gets a bounded time to reach stderr; what it cannot take is dropped.
    pub fn wait(self) -> ControllerStats {
        let mut s = ControllerStats::default();
        for h in self.handles {
            if let Ok(w) = h.join() {
                s.add(&w);
            }
        }
        s.log_lines_dropped = self.log.close().dropped;
        s.max_buffered_in = self.budget.peak() as u64;
        s
    }

    /// Input bytes held across all connections now (started, unfinished
    /// messages; the capacity of their buffers).
    pub fn buffered_in(&self) -> usize {
        self.budget.used()
    }

    /// Queue a line for the controller's log (never blocks on stderr).
    pub fn log_line(&self, line: String) {
        self.log.line(line);
    }
}

/// Per worker: connections accepted by worker 0, waiting to be adopted.
type Inboxes = Arc<Vec<Mutex<Vec<(TcpStream, SocketAddr)>>>>;

const TOKEN_LISTENER: u64 = u64::MAX;
const TOKEN_WAKER: u64 = u64::MAX - 1;
/// A worker's read buffer: one connection's started message (at most
/// 64 KiB) followed by one read.
const SCRATCH_LEN: usize = 65536 + READ_CHUNK;
/// A connection's input buffer above this is freed when it empties.
const KEEP_PARTIAL: usize = 4096;
/// A connection's output buffer above this is freed when it drains.
const KEEP_OUT: usize = 65536;
/// Freed buffer bytes after which a sweep returns heap memory to the kernel.
const TRIM_AFTER: usize = 1 << 20;

struct WorkerCtx {
    cpus: Option<CpuList>,
    id: usize,
    cfg: ControllerConfig,
    stop: Arc<AtomicBool>,
    wakers: Vec<Arc<EventFd>>,
    inboxes: Inboxes,
    listener: Option<TcpListener>,
    log: Logger,
    budget: Arc<InputBudget>,
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

/// Precomputed replies shared by a worker's connections.
struct Templates {
    fm10: of10::FlowModTemplate,
    trivial10: Vec<u8>,
    trivial13: Vec<u8>,
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
}

/// How often a worker sweeps its connections for due log summaries.
const SWEEP_EVERY: Duration = Duration::from_millis(250);

/// Reads per connection per turn.
const READ_BUDGET: usize = 4;
const READ_CHUNK: usize = 65536;

impl WorkerCtx {
    fn run(self) -> ControllerStats {
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
        };
        let mut events = sys::new_events(1024);
        let mut rr = 0usize;
        while !self.stop.load(Ordering::Relaxed) {
            let timeout = if w.again.is_empty() && !self.cfg.busy_poll {
                50
            } else {
                0
            };
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
            if c.out.capacity() > KEEP_OUT {
                // A burst of replies is over: give its memory back.
                self.freed += c.out.capacity();
                c.out = Vec::new();
            } else {
                c.out.clear();
            }
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
    fn on_readable(&mut self, k: usize) {
        self.read_turn(k);
        self.flush(k);
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
            // Read at most READ_CHUNK at a time (finer interleaving of
            // switches at a negligible syscall cost), and only what the
            // global input bound has room for; without room, only the rest
            // of the started message once all of it has arrived (reading it
            // frees the connection's buffer, never grows it).
            let have = c.partial.len();
            let granted = self.budget.reserve(READ_CHUNK);
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
                        self.drop_conn(k, Some(why));
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
    fn process(&mut self, k: usize, len: usize, reserved: usize) -> Result<(), String> {
        let mut c = self.conns[k].take().expect("open connection");
        let buf = &self.scratch[..len];
        let mut off = 0;
        let mut res = Ok(());
        while off < len {
            let n = match frame_len(&buf[off..]) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(e) => {
                    res = Err(format!("malformed message: {e}"));
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

#[allow(clippy::too_many_arguments)]
#[inline]
fn handle(
    st: &mut ControllerStats,
    t: &Templates,
    cfg: &ControllerConfig,
    ours: u8,
    out: &mut Vec<u8>,
    version: &mut u8,
    dpid: &mut Option<u64>,
    macs: &mut HashMap<[u8; 6], u32>,
    pc: &mut PeerCtx,
    msg: &[u8],
) -> Result<(), String> {
    let h = Header::new_checked(msg).map_err(|e| format!("malformed message: {e}"))?;
    let (ty, xid, ver) = (h.msg_type(), h.xid(), h.version());
    if *version == 0 {
        if ty != 0 {
            return Err(format!("first message is type {ty}, not HELLO"));
        }
        match of13::negotiate(msg, &[ours]) {
            Some(v) => {
                *version = v;
                // FEATURES_REQUEST, xid 2.
                out.extend_from_slice(&[v, 5, 0, 8, 0, 0, 0, 2]);
                return Ok(());
            }
            None => {
                // HELLO_FAILED / INCOMPATIBLE, then close.
                let text = format!("we speak only version {ours:#04x}");
                let mut e = of10::Repr::new(
                    xid,
                    of10::Message::Error {
                        err_type: of10::OFPET_HELLO_FAILED,
                        code: of10::OFPHFC_INCOMPATIBLE,
                        data: text.into_bytes(),
                    },
                )
                .to_bytes();
                e[0] = ours;
                out.extend_from_slice(&e);
                return Err(format!("version negotiation failed: peer hello {ver:#04x}, {ours:#04x} not offered (sent HELLO_FAILED)"));
            }
        }
    }
    if ver != *version {
        let mut e = of10::Repr::new(
            xid,
            of10::Message::Error {
                err_type: of10::OFPET_BAD_REQUEST,
                code: of10::OFPBRC_BAD_VERSION,
                data: msg[..msg.len().min(64)].to_vec(),
            },
        )
        .to_bytes();
        e[0] = *version;
        out.extend_from_slice(&e);
        return Err(format!(
            "message with version {ver:#04x} after negotiating {:#04x} (sent BAD_VERSION)",
            *version
        ));
    }
    // Types with the same number in 1.0 and 1.3: hello 0, error 1, echo 2/3,
    // features 5/6, packet_in 10.
    match ty {
        10 => {
            st.packet_in += 1;
            if *version == OFP10_VERSION {
                packet_in10(st, t, cfg, out, macs, xid, msg)
            } else {
                packet_in13(st, t, cfg, out, macs, xid, msg)
            }
        }
        2 => {
            st.echo_request += 1;
            let s = out.len();
            out.extend_from_slice(msg);
            out[s + 1] = 3;
            Ok(())
        }
        6 => {
            if msg.len() >= 16 {
                *dpid = Some(u64::from_be_bytes(msg[8..16].try_into().unwrap()));
                if cfg.log_connections {
                    pc.log.line(format!(
                        "controller: {}: datapath {:#x} ready",
                        pc.peer,
                        dpid.unwrap_or(0)
                    ));
                }
            }
            Ok(())
        }
        1 => {
            st.error_msgs += 1;
            if msg.len() >= 12 && cfg.log_connections && pc.plog.allow() {
                pc.log.line(format!(
                    "controller: {}: OFPT_ERROR type {} code {} from the switch",
                    pc.peer,
                    u16::from_be_bytes([msg[8], msg[9]]),
                    u16::from_be_bytes([msg[10], msg[11]])
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// What `handle` needs to log for one peer.
struct PeerCtx<'a> {
    log: &'a Logger,
    plog: &'a mut PeerLog,
    peer: SocketAddr,
}

fn bad(e: crate::wire::WireError) -> String {
    format!("malformed packet_in: {e}")
}

fn packet_in10(
    st: &mut ControllerStats,
    t: &Templates,
    cfg: &ControllerConfig,
    out: &mut Vec<u8>,
    macs: &mut HashMap<[u8; 6], u32>,
    xid: u32,
    msg: &[u8],
) -> Result<(), String> {
    match (cfg.app, cfg.naive) {
        (App::Cbench, false) => {
            let v = of10::PacketInView::new_checked(msg).map_err(bad)?;
            let mut buf = [0u8; of10::FLOW_MOD_TEMPLATE_LEN];
            t.fm10.write(&mut buf, xid, &v);
            out.extend_from_slice(&buf);
            st.flow_mod_sent += 1;
        }
        (App::Cbench, true) => {
            let r = of10::Repr::parse(msg).map_err(bad)?;
            let of10::Message::PacketIn(pi) = r.msg else {
                return Err("not a packet_in".into());
            };
            let key = FlowKey::extract(&pi.data).unwrap_or_default();
            let fm = of10::Repr::new(
                r.xid,
                of10::Message::FlowMod(of10::FlowMod {
                    match_: of10::Match::exact(pi.in_port, &key),
                    cookie: 0,
                    command: of10::OFPFC_ADD,
                    idle_timeout: 0,
                    hard_timeout: 0,
                    priority: 0x8000,
                    buffer_id: pi.buffer_id,
                    out_port: of10::OFPP_NONE,
                    flags: 0,
                    actions: vec![of10::Action::Output {
                        port: pi.in_port.wrapping_add(1),
                        max_len: 0,
                    }],
                }),
            );
            let bytes = fm.to_bytes();
            out.extend_from_slice(&bytes);
            st.flow_mod_sent += 1;
        }
        (App::Trivial, _) => {
            let v = of10::PacketInView::new_checked(msg).map_err(bad)?;
            let s = out.len();
            out.extend_from_slice(&t.trivial10);
            put32(&mut out[s..], 4, xid);
            put32(&mut out[s..], 64, v.buffer_id());
            st.flow_mod_sent += 1;
        }
        (App::Learning, _) => {
            let v = of10::PacketInView::new_checked(msg).map_err(bad)?;
            let Some(key) = FlowKey::extract(v.data()) else {
                return Ok(());
            };
            let in_port = v.in_port();
            learn(macs, key.dl_src, in_port as u32);
            let dst = (key.dl_dst[0] & 1 == 0)
                .then(|| macs.get(&key.dl_dst).copied())
                .flatten();
            match dst {
                Some(p) if p != in_port as u32 => {
                    of10::Repr::new(
                        xid,
                        of10::Message::FlowMod(of10::FlowMod {
                            match_: of10::Match::exact(in_port, &key),
                            cookie: 0,
                            command: of10::OFPFC_ADD,
                            idle_timeout: 60,
                            hard_timeout: 0,
                            priority: 0x8000,
                            buffer_id: v.buffer_id(),
                            out_port: of10::OFPP_NONE,
                            flags: 0,
                            actions: vec![of10::Action::Output {
                                port: p as u16,
                                max_len: 0,
                            }],
                        }),
                    )
                    .emit(out);
                    st.flow_mod_sent += 1;
                }
                _ => {
                    let data = if v.buffer_id() == NO_BUFFER {
                        v.data().to_vec()
                    } else {
                        vec![]
                    };
                    of10::Repr::new(
                        xid,
                        of10::Message::PacketOut(of10::PacketOut {
                            buffer_id: v.buffer_id(),
                            in_port,
                            actions: vec![of10::Action::Output {
                                port: of10::OFPP_FLOOD,
                                max_len: 0,
                            }],
                            data,
                        }),
                    )
                    .emit(out);
                    st.packet_out_sent += 1;
                }
            }
        }
    }
    Ok(())
}

fn learn(macs: &mut HashMap<[u8; 6], u32>, src: [u8; 6], port: u32) {
    if src[0] & 1 != 0 {
        return; // never learn a multicast source
    }
    if macs.len() >= 1 << 20 && !macs.contains_key(&src) {
        macs.clear(); // bounded: a peer cannot grow the table without limit
    }
    macs.insert(src, port);
}

fn packet_in13(
    st: &mut ControllerStats,
    t: &Templates,
    cfg: &ControllerConfig,
    out: &mut Vec<u8>,
    macs: &mut HashMap<[u8; 6], u32>,
    xid: u32,
    msg: &[u8],
) -> Result<(), String> {
    match (cfg.app, cfg.naive) {
        (App::Cbench, false) => {
            let v = of13::PacketInView::new_checked(msg).map_err(bad)?;
            let key = FlowKey::extract(v.data()).unwrap_or_default();
            of13::write_exact_flow_mod(out, xid, v.in_port().unwrap_or(0), &key, v.buffer_id());
            st.flow_mod_sent += 1;
        }
        (App::Cbench, true) => {
            let r = of13::Repr::parse(msg).map_err(bad)?;
            let of13::Message::PacketIn(pi) = r.msg else {
                return Err("not a packet_in".into());
            };
            let key = FlowKey::extract(&pi.data).unwrap_or_default();
            let in_port = pi.match_.in_port().unwrap_or(0);
            let bytes = of13::Repr::new(
                r.xid,
                of13::Message::FlowMod(of13::exact_flow_mod(in_port, &key, pi.buffer_id)),
            )
            .to_bytes();
            out.extend_from_slice(&bytes);
            st.flow_mod_sent += 1;
        }
        (App::Trivial, _) => {
            let v = of13::PacketInView::new_checked(msg).map_err(bad)?;
            let s = out.len();
            out.extend_from_slice(&t.trivial13);
            put32(&mut out[s..], 4, xid);
            put32(&mut out[s..], 32, v.buffer_id());
            st.flow_mod_sent += 1;
        }
        (App::Learning, _) => {
            let v = of13::PacketInView::new_checked(msg).map_err(bad)?;
            let Some(key) = FlowKey::extract(v.data()) else {
                return Ok(());
            };
            let in_port = v.in_port().unwrap_or(0);
            learn(macs, key.dl_src, in_port);
            let dst = (key.dl_dst[0] & 1 == 0)
                .then(|| macs.get(&key.dl_dst).copied())
                .flatten();
            match dst {
                Some(p) if p != in_port => {
                    let mut fm = of13::exact_flow_mod(in_port, &key, v.buffer_id());
                    fm.idle_timeout = 60;
                    fm.instructions = vec![of13::Instruction::ApplyActions(vec![
                        of13::Action::Output {
                            port: p,
                            max_len: 0,
                        },
                    ])];
                    of13::Repr::new(xid, of13::Message::FlowMod(fm)).emit(out);
                    st.flow_mod_sent += 1;
                }
                _ => {
                    let data = if v.buffer_id() == NO_BUFFER {
                        v.data().to_vec()
                    } else {
                        vec![]
                    };
                    of13::Repr::new(
                        xid,
                        of13::Message::PacketOut(of13::PacketOut {
                            buffer_id: v.buffer_id(),
                            in_port,
                            actions: vec![of13::Action::Output {
                                port: 0xffff_fffb,
                                max_len: 0,
                            }],
                            data,
                        }),
                    )
                    .emit(out);
                    st.packet_out_sent += 1;
                }
            }
        }
    }
    Ok(())
}

/// Read a flow_mod's buffer_id (1.0 or 1.3), for tests and tools.
pub fn flow_mod_buffer_id(msg: &[u8]) -> Option<u32> {
    match *msg.first()? {
        OFP10_VERSION if msg.len() >= 68 => Some(be32(msg, 64)),
        OFP13_VERSION if msg.len() >= 36 => Some(be32(msg, 32)),
        _ => None,
    }
}
