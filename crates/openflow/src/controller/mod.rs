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
//! Layout: this module holds the configuration, the statistics and the
//! [`Controller`] handle (start, stop, wait); `conn` runs the worker
//! threads and their connections (accept, read, write, backpressure, the
//! input bound, timeouts); `apps` handles each complete message and
//! answers packet_ins. Every public item is re-exported here, so
//! `controller::X` paths are unchanged.
//!
//! [`Repr`]: crate::wire::of10::Repr

mod apps;
mod budget;
mod conn;
pub mod log;

pub use apps::{flow_mod_buffer_id, App, PeerError, UnknownApp};

use crate::sys::{self, EventFd};
use commbench_core::placement::CpuList;
use serde::Serialize;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use budget::InputBudget;
use conn::{Inboxes, WorkerCtx};
use log::Logger;

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
    /// Calibration aid: the controller busy-waits this many ns (TSC) on
    /// every packet_in before answering, a known extra cost per response
    /// for checking that a comparison finds a change of a known size.
    pub extra_work_ns: u64,
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
            extra_work_ns: 0,
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
    /// read(2) calls on the switches' sockets (each recv counts one).
    pub reads: u64,
    /// write(2) calls on the switches' sockets.
    pub writes: u64,
    /// epoll_wait(2) calls.
    pub waits: u64,
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
        self.reads += o.reads;
        self.writes += o.writes;
        self.waits += o.waits;
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
