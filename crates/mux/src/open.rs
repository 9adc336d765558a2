//! Open-loop load: requests leave on a schedule that does not wait for
//! the server (wrk2's `-R`, tcpkali's `-r`), so a server that stalls is
//! charged for every request it delayed, not just the one it held
//! (coordinated omission).
//!
//! Each connection has an absolute schedule on the TSC: request n is due
//! at `start + (n + phase) · period` (cbr) or at `start` plus the sum of n
//! exponential gaps of mean `period` (poisson, a fixed seed per
//! connection); the schedule never moves with the time a send took. The
//! event loop sleeps in `epoll_pwait2` (timer slack 1 ns) until the next
//! due time less a guard window, then busy-waits the guard with the
//! core's TSC wait ([`commbench_core::delay::spin_until`]). The guard is
//! learned ([`WakeGuard`]): the recent worst overshoot of timed wake-ups
//! plus a margin, so the generator burns CPU only for as long as the
//! kernel is late, not a fixed tens of microseconds before every send.
//!
//! A connection keeps at most `in_flight` requests outstanding; a request
//! due while the window is full waits in the generator (the server is
//! slow: that wait is part of its corrected latency, not generator lag).
//! Every completed request gives three numbers:
//! - corrected latency: response complete − intended send time;
//! - raw latency: response complete − the write that finished sending it;
//! - schedule lag (requests sent the moment they were due): the write −
//!   intended time, i.e. how late the generator itself was.
//!
//! Phases: warm-up (served, not recorded), measured (requests due in the
//! window are recorded), drain (outstanding requests finish, bounded by
//! the run's timeout).

use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use commbench_core::clock;
use commbench_core::delay::{spin_until, GuardBounds, WakeGuard};
use commbench_core::estimate::Rng;
use commbench_core::placement::CpuList;
use commbench_core::stats::LatencyHistogram;
use commbench_core::sys::{self, Epoll};

use crate::http1::{self, ResponseReader};
use crate::load::{LoadConfig, Pattern, Rounds};
use crate::net;
use crate::protocol::{self, Protocol};
use crate::{MuxError, Result};

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Constant bit rate: evenly spaced.
    Cbr,
    /// A Poisson process (exponential gaps).
    Poisson,
}

impl Arrivals {
    pub fn as_str(self) -> &'static str {
        match self {
            Arrivals::Cbr => "cbr",
            Arrivals::Poisson => "poisson",
        }
    }
}

/// The open-loop settings of a run.
#[derive(Debug, Clone)]
pub struct OpenConfig {
    /// Requests per second over all active connections; None: closed
    /// loop (each connection sends `rounds` requests, the next as soon as
    /// a window slot frees, like wrk).
    pub rate: Option<f64>,
    pub arrivals: Arrivals,
    /// Requests outstanding per connection at most (pipelining).
    pub in_flight: usize,
    /// Unrecorded load before the measured window.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Bound on the p99 schedule lag: beyond it the run is marked as
    /// having measured the generator.
    pub max_lag: Duration,
    /// With the load split over processes (`--load-procs`): the index of
    /// this process's first active connection among all of them, and the
    /// active connections of all of them, so that every connection keeps
    /// its own phase and seed and the processes interleave instead of
    /// sending in step. None: this process is the whole load.
    pub split: Option<Split>,
    /// A segment of a run over several processes or hosts (`--segment`,
    /// `--start-at`): the schedule's start, ns since the Unix epoch, on
    /// which every segment starts. None: a moment after the threads start.
    pub start_at_unix_ns: Option<u64>,
}

/// This process's place in a load split over processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    pub first_conn: usize,
    pub active_total: usize,
}

/// Most requests outstanding per connection.
pub const MAX_IN_FLIGHT: usize = 1024;
/// Highest rate accepted (requests/s over all connections).
pub const MAX_RATE: f64 = 100e6;
/// Most requests one run may schedule (rate × (warm-up + duration)):
/// bounds the run's length in count as well as in time.
pub const MAX_REQUESTS: f64 = 2e9;
/// The achieved rate must be within this fraction of the asked one.
pub const RATE_TOLERANCE: f64 = 0.01;

/// The open loop's wake-up guard ([`WakeGuard`]): 20 µs until the
/// first overshoot is measured, 1 µs over the worst recent one, at least
/// 2 µs (leaving epoll_pwait2 and reaching the send) and at most 50 µs:
/// an overshoot beyond it is the thread descheduled, which spinning would
/// not have prevented (a spinning thread is preempted too), so it is not
/// worth paying for on every later send.
const GUARD: GuardBounds = GuardBounds {
    initial_ns: 20_000.0,
    margin_ns: 1_000.0,
    min_ns: 2_000.0,
    max_ns: 50_000.0,
};
/// A sleep shorter than this costs more than it saves: spin instead.
const MIN_SLEEP_NS: f64 = 1_000.0;

impl OpenConfig {
    /// A closed loop with `in_flight` requests outstanding per connection.
    pub fn closed(in_flight: usize) -> OpenConfig {
        OpenConfig {
            rate: None,
            arrivals: Arrivals::Cbr,
            in_flight,
            warmup: Duration::ZERO,
            duration: Duration::ZERO,
            max_lag: Duration::from_millis(1),
            split: None,
            start_at_unix_ns: None,
        }
    }

    pub fn validate(&self, active: usize) -> std::result::Result<(), OpenLoopError> {
        if !(1..=MAX_IN_FLIGHT).contains(&self.in_flight) {
            return Err(OpenLoopError::InFlight(self.in_flight));
        }
        let Some(rate) = self.rate else {
            return Ok(());
        };
        if !(rate.is_finite() && rate > 0.0 && rate <= MAX_RATE) {
            return Err(OpenLoopError::Rate(rate));
        }
        if self.duration.is_zero() {
            return Err(OpenLoopError::NoDuration);
        }
        let total = rate * (self.warmup + self.duration).as_secs_f64();
        if total > MAX_REQUESTS {
            return Err(OpenLoopError::TooManyRequests(total));
        }
        if rate / (active as f64) < 1e-3 {
            return Err(OpenLoopError::TooSparse { rate, active });
        }
        Ok(())
    }
}

/// An open-loop setting that cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OpenLoopError {
    /// Requests in flight per connection outside 1..=MAX_IN_FLIGHT.
    #[error("--in-flight must be 1..={MAX_IN_FLIGHT}, got {0}")]
    InFlight(usize),
    /// A rate that is not 0 < requests/s <= MAX_RATE.
    #[error("--rate must be 0 < requests/s <= {max:.0}, got {0}", max = MAX_RATE)]
    Rate(f64),
    /// A rate without a duration.
    #[error("--duration must be positive")]
    NoDuration,
    /// More requests scheduled than MAX_REQUESTS.
    #[error("--rate × (--warmup + --duration) schedules {0:.0} requests, more than {max:.0}: shorten the run", max = MAX_REQUESTS)]
    TooManyRequests(f64),
    /// Under one request per 1000 s per active connection.
    #[error("--rate {rate} over {active} active connections is under one request per 1000 s per connection: raise --rate or lower --active")]
    TooSparse { rate: f64, active: usize },
}

/// One connection's absolute schedule, in TSC ticks.
#[derive(Debug, Clone)]
pub struct Schedule {
    start: u64,
    /// Mean ticks between this connection's requests.
    period: f64,
    /// Offset of request 0 in periods (cbr), so that connections interleave.
    phase: f64,
    arrivals: Arrivals,
    rng: Rng,
    /// Requests issued so far.
    n: u64,
    /// Poisson: periods elapsed since `start` up to the next arrival.
    acc: f64,
    next: u64,
}

impl Schedule {
    pub fn new(start: u64, period: f64, phase: f64, arrivals: Arrivals, seed: u64) -> Schedule {
        let mut s = Schedule {
            start,
            period,
            phase,
            arrivals,
            rng: Rng::new(seed),
            n: 0,
            acc: 0.0,
            next: 0,
        };
        s.next = s.compute();
        s
    }
    fn compute(&mut self) -> u64 {
        match self.arrivals {
            Arrivals::Cbr => self.start + ((self.n as f64 + self.phase) * self.period) as u64,
            Arrivals::Poisson => {
                // Inverse transform of a uniform in (0, 1].
                self.acc += -(1.0 - self.rng.next_f64()).ln();
                self.start + (self.acc * self.period) as u64
            }
        }
    }
    /// The intended send time of the next request.
    #[inline]
    pub fn due(&self) -> u64 {
        self.next
    }
    /// Moves to the following request (whenever the last one left).
    #[inline]
    pub fn advance(&mut self) {
        self.n += 1;
        self.next = self.compute();
    }
}

/// Latency from the intended send time (corrected) and from the write
/// (raw), in ticks. Clock reads never go backwards on one CPU; across
/// CPUs a small negative difference is taken as zero.
#[inline]
pub fn latencies(intended: u64, written: u64, done: u64) -> (u64, u64) {
    (done.saturating_sub(intended), done.saturating_sub(written))
}

/// What an open-loop run measured beyond [`Rounds`].
#[derive(Debug, Clone, Default)]
pub struct OpenOut {
    pub corrected: LatencyHistogram,
    pub raw: LatencyHistogram,
    pub lag: LatencyHistogram,
    /// Requests due in the measured window.
    pub scheduled: u64,
    /// Of those, completed (and recorded).
    pub completed: u64,
    /// Requests that waited in the generator for a free in-flight slot.
    pub held: u64,
    pub measured_s: f64,
    /// Measured requests sent, and the first and last send (TSC ticks).
    pub sent: u64,
    pub first_send: u64,
    pub last_send: u64,
    /// HTTP status classes and errors (empty for echo protocols).
    pub http: http1::Counts,
    /// HTTPS handshakes (empty without `--tls`).
    pub tls: crate::tls::TlsOut,
}

impl OpenOut {
    /// The rate the measured requests actually left at: (n − 1) over
    /// the span from the first send to the last (requests/s); None with
    /// fewer than two.
    pub fn achieved_rate(&self) -> Option<f64> {
        if self.sent < 2 || self.last_send <= self.first_send {
            return None;
        }
        let span_s = clock::tsc().ticks_to_ns(self.last_send - self.first_send) / 1e9;
        Some((self.sent - 1) as f64 / span_s)
    }

    pub fn merge(&mut self, o: &OpenOut) {
        self.corrected.merge(&o.corrected);
        self.raw.merge(&o.raw);
        self.lag.merge(&o.lag);
        self.scheduled += o.scheduled;
        self.completed += o.completed;
        self.held += o.held;
        if o.sent > 0 {
            self.first_send = if self.sent == 0 {
                o.first_send
            } else {
                self.first_send.min(o.first_send)
            };
            self.last_send = self.last_send.max(o.last_send);
            self.sent += o.sent;
        }
        self.measured_s = self.measured_s.max(o.measured_s);
        self.http.merge(&o.http);
        self.tls.merge(&o.tls);
    }
}

/// One request on its way.
#[derive(Debug, Clone, Copy)]
struct Req {
    intended: u64,
    /// When its last byte was written (0: not yet).
    written: u64,
    /// Byte offset in the connection's output stream where it ends.
    end: u64,
    measured: bool,
}

/// What a connection expects back.
enum Reader {
    /// `size` bytes per request, equal to what was sent.
    Echo {
        recvd: usize,
    },
    Http(Box<ResponseReader>),
}

struct OConn {
    fd: RawFd,
    idx: usize,
    sched: Schedule,
    /// Due but not yet sent (window full).
    backlog: VecDeque<(u64, bool)>,
    /// Sent (or being sent), oldest first.
    flight: VecDeque<Req>,
    out: Vec<u8>,
    out_off: usize,
    /// Bytes written so far on this connection.
    written: u64,
    /// Bytes queued so far.
    queued: u64,
    /// Requests queued (sequence numbers for the echo pattern).
    seq_sent: u64,
    seq_done: u64,
    reader: Reader,
    want_out: bool,
    /// Scheduling ended for this connection.
    ended: bool,
    /// Times this connection broke since its last response (HTTP).
    broken_in_row: u32,
    /// HTTPS: the session on this socket; None until the first request
    /// sent on the socket starts it (so a handshake starts when a request
    /// is due, and its latency counts from that request's intended time).
    tls: Option<Box<TlsConn>>,
    /// HTTPS: its handshake failed (a certificate, version or ALPN
    /// refusal, which another attempt would meet again): the connection
    /// takes no more requests.
    dead: bool,
}

/// One HTTPS session of a connection.
struct TlsConn {
    s: rustls::ClientConnection,
    /// The intended send time of the first request it carries (ticks).
    from: u64,
    /// That request is in the measured window.
    measured: bool,
}

/// Whether a connection is still the one the caller was handling, or was
/// replaced by a new one (reconnect) or given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fed {
    Same,
    Replaced,
}

/// A connection that breaks this many times in a row without one
/// response in between ends the run: the server answers no one.
const MAX_BROKEN_IN_ROW: u32 = 100;

/// The bytes of request `seq` on connection `idx`.
fn request_bytes<'a>(
    proto: Protocol,
    pattern: &'a Pattern,
    scratch: &'a mut Vec<u8>,
    http: Option<&'a [u8]>,
    idx: usize,
    seq: u64,
) -> &'a [u8] {
    match proto {
        Protocol::Raw => pattern.message(idx, seq),
        Protocol::Sockperf => {
            scratch.clear();
            scratch.extend_from_slice(pattern.message(idx, seq));
            let len = scratch.len() as u32;
            protocol::write_ping_header(scratch, seq + 1, len);
            scratch
        }
        Protocol::Http1 => http.unwrap_or_default(),
    }
}

/// Runs the open loop on the first `cfg.active` connections of `fds`.
pub fn run(cfg: &LoadConfig, open: &OpenConfig, fds: &[RawFd]) -> Result<Rounds> {
    let active = cfg.active.min(fds.len());
    let fds = &fds[..active];
    let pattern = Arc::new(Pattern::new(cfg.size));
    let threads = cfg.load_threads.clamp(1, fds.len().max(1));
    let chunk = fds.len().div_ceil(threads).max(1);
    let parts: Vec<&[RawFd]> = fds.chunks(chunk).collect();
    let tsc = clock::tsc();
    // Every thread starts on one common tick, far enough ahead for the
    // threads to be running.
    let lead = match open.start_at_unix_ns {
        Some(at) => {
            // The shared instant, reached on this host's clock; a segment
            // that is ready only after it would run a schedule others
            // began without it.
            let now = clock::realtime_ns();
            if at < now + 1_000_000 {
                return Err(MuxError::Load(format!(
                    "--start-at passed {:.0} ms before this segment was ready to send: give every segment a later --start-at (connecting took longer than the time left)",
                    (now + 1_000_000 - at) as f64 / 1e6
                )));
            }
            Duration::from_nanos(at - now)
        }
        None => Duration::from_millis(20),
    };
    let start = clock::rdtsc() + tsc.ns_to_ticks(lead.as_nanos() as f64);
    let (period, measure_from, end) = match open.rate {
        Some(rate) => {
            let measure_from = start + tsc.ns_to_ticks(open.warmup.as_nanos() as f64);
            (
                tsc.hz() / (rate / active.max(1) as f64),
                measure_from,
                measure_from + tsc.ns_to_ticks(open.duration.as_nanos() as f64),
            )
        }
        None => (0.0, start, u64::MAX),
    };
    let barrier = Arc::new(Barrier::new(parts.len().max(1)));
    let u0 = commbench_core::rusage::Usage::process();
    let t0 = Instant::now();
    // Outstanding requests are waited for after the schedule ends, but
    // not for longer than the schedule ran (at least a second): a silent
    // server must not hold a 3 s run for the whole --timeout.
    let drain = match open.rate {
        Some(_) => cfg
            .timeout
            .min((open.warmup + open.duration).max(Duration::from_secs(1))),
        None => cfg.timeout,
    };
    let deadline = t0 + lead + open.warmup + open.duration + drain;
    let http_req = match cfg.protocol {
        Protocol::Http1 => Some(cfg.http.encode()),
        _ => None,
    };
    let results: Vec<Result<(Rounds, OpenOut)>> = std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .iter()
            .copied()
            .enumerate()
            .map(|(t, part)| {
                let barrier = barrier.clone();
                let pattern = pattern.clone();
                let cpus = cfg.cpus.clone();
                let base = t * chunk;
                let http_req = http_req.as_deref();
                s.spawn(move || {
                    if let Some(c) = &cpus {
                        let cpu = c.cpus()[t % c.cpus().len()];
                        let _ = CpuList::from_cpus(vec![cpu]).pin_current_thread();
                    }
                    // Wake timed waits when asked, not up to 50 µs later.
                    sys::set_timer_slack_ns(1);
                    let lp = Loop {
                        cfg,
                        open,
                        base,
                        active,
                        period,
                        start,
                        measure_from,
                        end,
                        deadline,
                        pattern: &pattern,
                        http_req,
                    };
                    barrier.wait();
                    lp.run(part)
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
    let mut rounds = Rounds {
        round_trips: 0,
        // A segment's wait for its start instant is no part of the run.
        wall_s: t0
            .elapsed()
            .saturating_sub(lead.saturating_sub(Duration::from_millis(20)))
            .as_secs_f64(),
        latency: LatencyHistogram::new(),
        usage: commbench_core::rusage::Usage::process().since(&u0),
        waits: 0,
        events: 0,
        bytes: 0,
        open: None,
    };
    let mut out = OpenOut::default();
    for r in results {
        let (r, o) = r?;
        rounds.round_trips += r.round_trips;
        rounds.waits += r.waits;
        rounds.events += r.events;
        rounds.bytes += r.bytes;
        rounds.latency.merge(&r.latency);
        out.merge(&o);
    }
    out.measured_s = match open.rate {
        Some(_) => tsc.ticks_to_ns(end - measure_from) / 1e9,
        None => rounds.wall_s,
    };
    rounds.open = Some(out);
    Ok(rounds)
}

struct Loop<'a> {
    cfg: &'a LoadConfig,
    open: &'a OpenConfig,
    base: usize,
    active: usize,
    period: f64,
    start: u64,
    measure_from: u64,
    end: u64,
    deadline: Instant,
    pattern: &'a Pattern,
    http_req: Option<&'a [u8]>,
}

impl Loop<'_> {
    fn run(&self, fds: &[RawFd]) -> Result<(Rounds, OpenOut)> {
        let cfg = self.cfg;
        let io_err = |what: &str, e: io::Error| MuxError::io(what.to_string(), e);
        let ep = Epoll::new().map_err(|e| io_err("epoll_create", e))?;
        let mut conns: Vec<OConn> = fds
            .iter()
            .enumerate()
            .map(|(i, &fd)| {
                let (first, all) = match self.open.split {
                    Some(s) => (s.first_conn, s.active_total),
                    None => (0, self.active),
                };
                let idx = first + self.base + i;
                OConn {
                    fd,
                    idx,
                    sched: Schedule::new(
                        self.start,
                        self.period,
                        idx as f64 / all.max(1) as f64,
                        self.open.arrivals,
                        0x6d75_785f_6f70_656e ^ (idx as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    ),
                    backlog: VecDeque::new(),
                    flight: VecDeque::with_capacity(self.open.in_flight),
                    out: Vec::new(),
                    out_off: 0,
                    written: 0,
                    queued: 0,
                    seq_sent: 0,
                    seq_done: 0,
                    reader: match cfg.protocol {
                        Protocol::Http1 => {
                            Reader::Http(Box::new(ResponseReader::new(cfg.http.limits())))
                        }
                        _ => Reader::Echo { recvd: 0 },
                    },
                    want_out: false,
                    ended: false,
                    broken_in_row: 0,
                    tls: None,
                    dead: false,
                }
            })
            .collect();
        let closed = self.open.rate.is_none();
        let mut heap: BinaryHeap<std::cmp::Reverse<(u64, u32)>> = BinaryHeap::new();
        for (i, c) in conns.iter().enumerate() {
            ep.add(c.fd, i as u64, sys::IN)
                .map_err(|e| io_err("epoll_ctl", e))?;
            if !closed {
                heap.push(std::cmp::Reverse((c.sched.due(), i as u32)));
            }
        }
        let tsc = clock::tsc();
        let mut guard = WakeGuard::new(tsc.hz() / 1e9, GUARD);
        let min_sleep = tsc.ns_to_ticks(MIN_SLEEP_NS);
        let mut events = sys::new_events(1024);
        let mut rbuf = vec![0u8; 64 * 1024];
        // HTTPS: plaintext taken out of rustls (rbuf holds the ciphertext).
        let mut pbuf = if cfg.tls.is_some() {
            vec![0u8; 32 * 1024]
        } else {
            Vec::new()
        };
        let mut scratch = Vec::new();
        let mut st = LoopStats::default();
        let mut outstanding: usize = 0;
        // The last wait returned no events.
        let mut quiet = false;
        if closed {
            spin_until(self.start);
            for (i, c) in conns.iter_mut().enumerate() {
                outstanding += self.refill(c, &mut st);
                self.issue(&ep, c, i, &mut scratch, &mut st, None)?;
            }
        }
        loop {
            // Send everything due.
            let mut now = clock::rdtsc();
            while let Some(&std::cmp::Reverse((due, i))) = heap.peek() {
                if due > now {
                    break;
                }
                heap.pop();
                let c = &mut conns[i as usize];
                if c.dead {
                    // Its handshake failed: it takes no more requests.
                    continue;
                }
                let measured = due >= self.measure_from;
                if measured {
                    st.out.scheduled += 1;
                }
                c.backlog.push_back((due, measured));
                outstanding += 1;
                c.sched.advance();
                if c.sched.due() < self.end {
                    heap.push(std::cmp::Reverse((c.sched.due(), i)));
                } else {
                    c.ended = true;
                }
                self.issue(&ep, c, i as usize, &mut scratch, &mut st, Some(due))?;
                now = clock::rdtsc();
            }
            // Requests of connections given up (a session that could not
            // be made) are finished too.
            outstanding -= std::mem::take(&mut st.dropped);
            if heap.is_empty() && outstanding == 0 {
                break;
            }
            if Instant::now() > self.deadline {
                if self.cfg.protocol == Protocol::Http1 {
                    // wrk's way: what is unanswered counts as timed out,
                    // and the run says how much failed.
                    st.out.http.timeouts += outstanding as u64;
                    break;
                }
                return Err(MuxError::Stalled(if closed {
                    format!(
                        "{outstanding} requests unanswered after {:?}: the server stopped answering or the machine is too loaded; raise --timeout",
                        self.cfg.timeout
                    )
                } else {
                    format!(
                        "{outstanding} requests still unanswered {:?} after the schedule ended: the server stopped answering or the machine is too loaded; raise --timeout",
                        self.cfg.timeout
                    )
                }));
            }
            // Wait for responses until the next request is due.
            let next = heap.peek().map(|r| r.0 .0);
            let ready = match next {
                Some(d) if d > now + guard.ticks() + min_sleep => {
                    let wake = d - guard.ticks();
                    let ns = tsc.ticks_to_ns(wake - now) as u64;
                    st.waits += 1;
                    let r = ep
                        .wait_ns(&mut events, ns)
                        .map_err(|e| io_err("epoll_pwait2", e))?;
                    // Only a wait that ran out says how late the timer
                    // wakes; one ended early by a response says nothing.
                    if r.is_empty() {
                        guard.record(clock::rdtsc().saturating_sub(wake));
                    }
                    r
                }
                // Within the guard: look at the sockets once (unless the
                // last wait found them quiet and nothing was sent since),
                // then spin; never spin twice in a row without a look, or
                // at rates whose gaps are inside the guard no response
                // would be read.
                Some(d) if quiet => {
                    spin_until(d);
                    quiet = false;
                    continue;
                }
                Some(_) => {
                    st.waits += 1;
                    ep.wait(&mut events, 0)
                        .map_err(|e| io_err("epoll_wait", e))?
                }
                None => {
                    st.waits += 1;
                    ep.wait(&mut events, 100)
                        .map_err(|e| io_err("epoll_wait", e))?
                }
            };
            quiet = ready.is_empty();
            st.events += ready.len() as u64;
            for e in ready {
                let i = sys::event_token(e) as usize;
                let bits = sys::event_bits(e);
                let c = &mut conns[i];
                if bits & sys::OUT != 0 {
                    self.flush(&ep, c, i, &mut st)?;
                }
                if bits & (sys::IN | sys::ERR) != 0 {
                    let done = if cfg.tls.is_some() {
                        self.receive_tls(&ep, c, i, &mut rbuf, &mut pbuf, &mut st)?
                    } else {
                        self.receive(&ep, c, i, &mut rbuf, &mut st)?
                    };
                    outstanding -= done;
                    if closed {
                        outstanding += self.refill(c, &mut st);
                    }
                    if !c.backlog.is_empty() {
                        self.issue(&ep, c, i, &mut scratch, &mut st, None)?;
                    }
                }
            }
        }
        st.out.completed = st.out.corrected.len();
        Ok((
            Rounds {
                round_trips: st.completed_all,
                wall_s: 0.0,
                latency: st.out.raw.clone(),
                usage: Default::default(),
                waits: st.waits,
                events: st.events,
                bytes: st.bytes,
                open: None,
            },
            st.out,
        ))
    }

    /// Closed loop: queues requests up to the window while the
    /// connection's count lasts; returns how many were queued.
    fn refill(&self, c: &mut OConn, st: &mut LoopStats) -> usize {
        let mut n = 0;
        if c.dead {
            return 0;
        }
        while c.flight.len() + c.backlog.len() < self.open.in_flight
            && c.seq_sent + (c.backlog.len() as u64) < self.cfg.rounds
        {
            c.backlog.push_back((clock::rdtsc(), true));
            st.out.scheduled += 1;
            n += 1;
        }
        if c.seq_sent + c.backlog.len() as u64 >= self.cfg.rounds {
            c.ended = true;
        }
        n
    }

    /// Moves backlog requests into the window and writes them. `due`: the
    /// intended time of the request that just fell due (its lag is the
    /// generator's own lateness); requests that waited for a window slot
    /// are counted as held instead.
    fn issue(
        &self,
        ep: &Epoll,
        c: &mut OConn,
        token: usize,
        scratch: &mut Vec<u8>,
        st: &mut LoopStats,
        due: Option<u64>,
    ) -> Result<()> {
        if !self.start_tls(ep, c, st) {
            return Ok(());
        }
        while c.flight.len() < self.open.in_flight {
            let Some((intended, measured)) = c.backlog.pop_front() else {
                break;
            };
            let on_time = due == Some(intended);
            let bytes = request_bytes(
                self.cfg.protocol,
                self.pattern,
                scratch,
                self.http_req,
                c.idx,
                c.seq_sent,
            );
            if c.out_off == c.out.len() {
                c.out.clear();
                c.out_off = 0;
            }
            c.out.extend_from_slice(bytes);
            c.queued += bytes.len() as u64;
            c.seq_sent += 1;
            c.flight.push_back(Req {
                intended,
                written: 0,
                end: c.queued,
                measured,
            });
            let now = clock::rdtsc();
            if measured {
                if st.out.sent == 0 {
                    st.out.first_send = now;
                }
                st.out.last_send = now;
                st.out.sent += 1;
            }
            if measured && self.open.rate.is_some() {
                if on_time {
                    let lag = now.saturating_sub(intended);
                    st.out.lag.record_ns(clock::tsc().ticks_to_ns(lag) as u64);
                } else {
                    st.out.held += 1;
                }
            }
            self.flush(ep, c, token, st)?;
        }
        Ok(())
    }

    /// Writes what it can of the connection's output.
    fn flush(&self, ep: &Epoll, c: &mut OConn, token: usize, st: &mut LoopStats) -> Result<()> {
        if self.cfg.tls.is_some() {
            return self.flush_tls(ep, c, token, st).map(|_| ());
        }
        while c.out_off < c.out.len() {
            match net::write(c.fd, &c.out[c.out_off..]) {
                Ok(n) => {
                    let t = clock::rdtsc();
                    c.out_off += n;
                    c.written += n as u64;
                    st.bytes += n as u64;
                    for r in c.flight.iter_mut().rev() {
                        if r.written != 0 {
                            break;
                        }
                        if r.end <= c.written {
                            r.written = t;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(c.reader, Reader::Http(_)) => {
                    // Sent again on a new connection (after a reset the
                    // server has not read them).
                    st.out.http.resets += 1;
                    return self.reconnect(ep, c, token, st, &format!("sending failed: {e}"));
                }
                Err(e) => {
                    return Err(MuxError::ServerClosed {
                        conn: c.idx,
                        what: format!("failed sending request {}: {e}", c.seq_sent),
                    })
                }
            }
        }
        let want_out = c.out_off < c.out.len();
        crate::load::arm_out(ep, c.fd, token, want_out, &mut c.want_out)
    }

    /// HTTP: the connection broke (reset, a malformed response) or the
    /// server said it closes it. A new connection takes its place, as wrk
    /// does, and the requests that were in flight on the old one go back to
    /// the front of the backlog with their intended times (the delay is
    /// charged to their latency). The new socket takes the old descriptor's
    /// number, so the caller's list of connections stays true.
    fn reconnect(
        &self,
        ep: &Epoll,
        c: &mut OConn,
        token: usize,
        st: &mut LoopStats,
        why: &str,
    ) -> Result<()> {
        c.broken_in_row += 1;
        if c.broken_in_row > MAX_BROKEN_IN_ROW {
            return Err(MuxError::ServerClosed {
                conn: c.idx,
                what: format!(
                    "broke {MAX_BROKEN_IN_ROW} times in a row without one response (last: {why}): the server answers no one"
                ),
            });
        }
        let _ = ep.delete(c.fd);
        let src = (!self.cfg.sources.is_empty())
            .then(|| self.cfg.sources[c.idx % self.cfg.sources.len()]);
        let fd = connect_now(self.cfg.target, src, self.deadline).map_err(|e| {
            MuxError::ServerClosed {
                conn: c.idx,
                what: format!("{why}, and connecting again failed: {e}"),
            }
        })?;
        net::replace(fd, c.fd).map_err(|e| MuxError::io("dup2".into(), e))?;
        let _ = net::set_nodelay(c.fd, true);
        for r in c.flight.drain(..).rev() {
            c.backlog.push_front((r.intended, r.measured));
        }
        c.seq_sent = c.seq_done;
        c.out.clear();
        c.out_off = 0;
        c.written = 0;
        c.queued = 0;
        c.want_out = false;
        c.reader = Reader::Http(Box::new(ResponseReader::new(self.cfg.http.limits())));
        c.tls = None;
        st.out.http.reconnects += 1;
        ep.add(c.fd, token as u64, sys::IN)
            .map_err(|e| MuxError::io("epoll_ctl".into(), e))
    }

    /// Reads responses; returns how many requests completed.
    fn receive(
        &self,
        ep: &Epoll,
        c: &mut OConn,
        token: usize,
        rbuf: &mut [u8],
        st: &mut LoopStats,
    ) -> Result<usize> {
        let mut done = 0;
        // A read that did not fill the buffer took all the socket held: a
        // second read would only say EAGAIN (level-triggered epoll reports
        // the socket again when more arrives), so stop after it.
        let mut drained = false;
        loop {
            if drained {
                return Ok(done);
            }
            let n = match net::read(c.fd, rbuf) {
                Ok(0) => {
                    if c.flight.is_empty() && c.backlog.is_empty() && c.ended {
                        return Ok(done);
                    }
                    let what = format!(
                        "closed by the server with {} requests outstanding",
                        c.flight.len() + c.backlog.len()
                    );
                    if let Reader::Http(_) = c.reader {
                        st.out.http.resets += 1;
                        self.reconnect(ep, c, token, st, &what)?;
                        return Ok(done);
                    }
                    return Err(MuxError::ServerClosed { conn: c.idx, what });
                }
                Ok(n) => {
                    drained = n < rbuf.len();
                    n
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(done),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    if let Reader::Http(_) = c.reader {
                        st.out.http.resets += 1;
                        self.reconnect(ep, c, token, st, &format!("receiving failed: {e}"))?;
                        return Ok(done);
                    }
                    return Err(MuxError::ServerClosed {
                        conn: c.idx,
                        what: format!("failed: {e}"),
                    });
                }
            };
            let now = clock::rdtsc();
            if self.consume(ep, c, token, &rbuf[..n], now, st, &mut done)? == Fed::Replaced {
                return Ok(done);
            }
        }
    }

    /// HTTPS: starts the session of a new socket with the request due
    /// first (its intended time is where the handshake's latency counts
    /// from); nothing to do without TLS, with a session, or with nothing
    /// to send. `false`: the session could not be made and the
    /// connection was given up (its requests in `st.dropped`).
    fn start_tls(&self, ep: &Epoll, c: &mut OConn, st: &mut LoopStats) -> bool {
        let (Some(tls), None, false) = (&self.cfg.tls, &c.tls, c.dead) else {
            return true;
        };
        let first = c
            .flight
            .front()
            .map(|r| (r.intended, r.measured))
            .or_else(|| c.backlog.front().copied());
        let Some((from, measured)) = first else {
            return true;
        };
        match tls.connect() {
            Ok(mut s) => {
                // Bounded by the window: at most in_flight requests.
                s.set_buffer_limit(None);
                c.tls = Some(Box::new(TlsConn { s, from, measured }));
                true
            }
            Err(e) => {
                st.out.tls.failure(&e.to_string());
                st.dropped += self.give_up(ep, c, st);
                false
            }
        }
    }

    /// HTTPS: writes the connection's requests into its session (rustls
    /// keeps them until the handshake ends) and what the session has to
    /// send into the socket. Requests count as written when everything is
    /// out after the handshake. `Fed::Replaced`: the socket failed and a
    /// new connection took its place.
    fn flush_tls(
        &self,
        ep: &Epoll,
        c: &mut OConn,
        token: usize,
        st: &mut LoopStats,
    ) -> Result<Fed> {
        // A socket made again in the middle of sending: its session
        // starts with the oldest request it carries.
        if !self.start_tls(ep, c, st) {
            return Ok(Fed::Replaced);
        }
        let Some(t) = c.tls.as_mut() else {
            return Ok(Fed::Same);
        };
        if c.out_off < c.out.len() {
            // No buffer limit (set at the start): rustls takes it all.
            let n = io::Write::write(&mut t.s.writer(), &c.out[c.out_off..]).unwrap_or(0);
            c.out_off += n;
        }
        let mut failed = None;
        while t.s.wants_write() {
            match t.s.write_tls(&mut crate::tls::FdIo(c.fd)) {
                Ok(n) => st.bytes += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            if t.s.is_handshaking() {
                st.out
                    .tls
                    .failure(&format!("sending the handshake failed: {e}"));
            }
            st.out.http.resets += 1;
            self.reconnect(ep, c, token, st, &format!("sending failed: {e}"))?;
            return Ok(Fed::Replaced);
        }
        let pending = t.s.wants_write();
        if !pending && !t.s.is_handshaking() {
            let now = clock::rdtsc();
            for r in c.flight.iter_mut().rev() {
                if r.written != 0 {
                    break;
                }
                r.written = now;
            }
        }
        crate::load::arm_out(ep, c.fd, token, pending, &mut c.want_out)?;
        Ok(Fed::Same)
    }

    /// HTTPS: a handshake failed in a way another attempt would meet
    /// again (certificate, version, ALPN): the connection's requests fail
    /// and it takes no more. Returns how many requests it dropped.
    fn give_up(&self, ep: &Epoll, c: &mut OConn, st: &mut LoopStats) -> usize {
        let n = c.flight.len() + c.backlog.len();
        st.out.http.errors += n as u64;
        c.flight.clear();
        c.backlog.clear();
        c.ended = true;
        c.dead = true;
        c.tls = None;
        let _ = ep.delete(c.fd);
        n
    }

    /// HTTPS: reads the socket into the session, completes the handshake
    /// (counted, its latency from the intended start), sends what it
    /// answers, and takes the responses out of the plaintext. Returns the
    /// requests finished (answered, or dropped with a failed handshake).
    fn receive_tls(
        &self,
        ep: &Epoll,
        c: &mut OConn,
        token: usize,
        rbuf: &mut [u8],
        pbuf: &mut [u8],
        st: &mut LoopStats,
    ) -> Result<usize> {
        let mut done = 0;
        // As the plain path: a read that did not fill the buffer took all
        // the socket held.
        let mut drained = false;
        while !drained {
            let n = match net::read(c.fd, rbuf) {
                Ok(0) => {
                    let hs = c.tls.as_ref().is_some_and(|t| t.s.is_handshaking());
                    if !hs && c.flight.is_empty() && c.backlog.is_empty() && c.ended {
                        return Ok(done);
                    }
                    if hs {
                        st.out
                            .tls
                            .failure("the server closed the connection during the handshake");
                    }
                    let what = format!(
                        "closed by the server with {} requests outstanding",
                        c.flight.len() + c.backlog.len()
                    );
                    st.out.http.resets += 1;
                    self.reconnect(ep, c, token, st, &what)?;
                    return Ok(done);
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(done),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    if c.tls.as_ref().is_some_and(|t| t.s.is_handshaking()) {
                        st.out
                            .tls
                            .failure(&format!("receiving the handshake failed: {e}"));
                    }
                    st.out.http.resets += 1;
                    self.reconnect(ep, c, token, st, &format!("receiving failed: {e}"))?;
                    return Ok(done);
                }
            };
            drained = n < rbuf.len();
            let mut cipher = &rbuf[..n];
            while !cipher.is_empty() {
                let Some(t) = c.tls.as_mut() else {
                    // Bytes before any request: nothing asked for them.
                    st.out.http.errors += 1;
                    self.reconnect(ep, c, token, st, "bytes with no request outstanding")?;
                    return Ok(done);
                };
                let hs = t.s.is_handshaking();
                let res =
                    t.s.read_tls(&mut cipher)
                        .map_err(|e| e.to_string())
                        .and_then(|_| t.s.process_new_packets().map_err(|e| e.to_string()));
                if let Err(e) = res {
                    // Send the alert rustls prepared, then give up (a
                    // handshake refused) or start over (a broken session).
                    let _ = t.s.write_tls(&mut crate::tls::FdIo(c.fd));
                    if hs {
                        st.out.tls.failure(&e);
                        return Ok(done + self.give_up(ep, c, st));
                    }
                    st.out.http.errors += 1;
                    self.reconnect(ep, c, token, st, &format!("TLS: {e}"))?;
                    return Ok(done);
                }
                if hs && !t.s.is_handshaking() {
                    let now = clock::rdtsc();
                    st.out.tls.completed(&t.s);
                    if t.measured {
                        let ns = clock::tsc().ticks_to_ns(now.saturating_sub(t.from));
                        st.out.tls.handshake.record_ns(ns as u64);
                    }
                }
                // The handshake's answer, and the requests it held back.
                if self.flush_tls(ep, c, token, st)? == Fed::Replaced {
                    return Ok(done);
                }
                loop {
                    let Some(t) = c.tls.as_mut() else {
                        return Ok(done);
                    };
                    let m = match io::Read::read(&mut t.s.reader(), pbuf) {
                        Ok(0) => {
                            // close_notify: the server ends the session.
                            if c.flight.is_empty() && c.backlog.is_empty() && c.ended {
                                return Ok(done);
                            }
                            st.out.http.resets += 1;
                            self.reconnect(ep, c, token, st, "the server ended the TLS session")?;
                            return Ok(done);
                        }
                        Ok(m) => m,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => {
                            st.out.http.errors += 1;
                            self.reconnect(ep, c, token, st, &format!("TLS: {e}"))?;
                            return Ok(done);
                        }
                    };
                    let now = clock::rdtsc();
                    if self.consume(ep, c, token, &pbuf[..m], now, st, &mut done)? == Fed::Replaced
                    {
                        return Ok(done);
                    }
                }
            }
        }
        Ok(done)
    }

    /// Takes a read's bytes apart into responses (or echoes), completes
    /// their requests and records their latencies; `done` counts them.
    #[allow(clippy::too_many_arguments)]
    fn consume(
        &self,
        ep: &Epoll,
        c: &mut OConn,
        token: usize,
        mut input: &[u8],
        now: u64,
        st: &mut LoopStats,
        done: &mut usize,
    ) -> Result<Fed> {
        let cfg = self.cfg;
        let mut closing = false;
        while !input.is_empty() {
            if c.flight.is_empty() {
                if let Reader::Http(_) = c.reader {
                    st.out.http.errors += 1;
                    self.reconnect(ep, c, token, st, "bytes with no request outstanding")?;
                    return Ok(Fed::Replaced);
                }
                return Err(MuxError::Corrupt(format!(
                    "connection {}: {} bytes arrived with no request outstanding",
                    c.idx,
                    input.len()
                )));
            }
            let complete = match &mut c.reader {
                Reader::Echo { recvd } => {
                    let want = cfg.size - *recvd;
                    let take = want.min(input.len());
                    let mut scratch = Vec::new();
                    let sent = request_bytes(
                        cfg.protocol,
                        self.pattern,
                        &mut scratch,
                        None,
                        c.idx,
                        c.seq_done,
                    );
                    if let Some(at) = protocol::mismatch(cfg.protocol, sent, *recvd, &input[..take])
                    {
                        return Err(MuxError::Corrupt(format!(
                            "connection {} request {}: the answer differs from the bytes sent at byte {at} (--protocol {} expects them back)",
                            c.idx,
                            c.seq_done + 1,
                            cfg.protocol.as_str()
                        )));
                    }
                    *recvd += take;
                    input = &input[take..];
                    if *recvd == cfg.size {
                        *recvd = 0;
                        true
                    } else {
                        false
                    }
                }
                Reader::Http(r) => match r.feed(input) {
                    Ok((used, resp)) => {
                        input = &input[used..];
                        match resp {
                            Some(status) => {
                                st.out.http.count(status);
                                if r.closes_after() {
                                    // What follows on this connection
                                    // is not an answer.
                                    input = &[];
                                    closing = true;
                                }
                                true
                            }
                            None => false,
                        }
                    }
                    Err(e) => {
                        st.out.http.errors += 1;
                        let why = format!("response {}: {e}", c.seq_done + 1);
                        self.reconnect(ep, c, token, st, &why)?;
                        return Ok(Fed::Replaced);
                    }
                },
            };
            if complete {
                let Some(r) = c.flight.pop_front() else {
                    break;
                };
                c.seq_done += 1;
                c.broken_in_row = 0;
                *done += 1;
                st.completed_all += 1;
                if r.measured {
                    let tsc = clock::tsc();
                    // A response cannot complete before its request
                    // was written; if the write time was not seen
                    // (written in the same call), use now.
                    let written = if r.written == 0 { now } else { r.written };
                    let (cor, raw) = latencies(r.intended, written, now);
                    st.out.corrected.record_ns(tsc.ticks_to_ns(cor) as u64);
                    st.out.raw.record_ns(tsc.ticks_to_ns(raw) as u64);
                }
            }
        }
        if closing {
            // The server said it closes: not a failure, a new
            // connection for the rest (nginx's keepalive_requests).
            c.broken_in_row = 0;
            self.reconnect(ep, c, token, st, "the server closed it (Connection: close)")?;
            return Ok(Fed::Replaced);
        }
        Ok(Fed::Same)
    }
}

/// Connects to `target` now (waiting at most until `deadline`, and never
/// more than 5 s): a replacement for a connection the server closed.
fn connect_now(
    target: std::net::SocketAddr,
    source: Option<std::net::Ipv4Addr>,
    deadline: Instant,
) -> io::Result<RawFd> {
    let fd = net::connect_start(target, source)?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .min(Duration::from_secs(5));
    let mut p = [libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    }];
    let r = sys::poll(&mut p, left.as_millis().max(1) as i32).and_then(|n| {
        if n == 0 {
            Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
        } else {
            net::take_error(fd)
        }
    });
    match r {
        Ok(()) => Ok(fd),
        Err(e) => {
            net::close(fd);
            Err(e)
        }
    }
}

#[derive(Default)]
struct LoopStats {
    out: OpenOut,
    /// HTTPS: requests of connections given up since the loop last
    /// counted them out of `outstanding`.
    dropped: usize,
    completed_all: u64,
    waits: u64,
    events: u64,
    bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbr_schedule_is_absolute_and_never_drifts() {
        // 1000 ticks per request, phase 0.25: request n at 1_000_000 +
        // (n + 0.25) · 1000, exactly, however late each send was.
        let mut s = Schedule::new(1_000_000, 1000.0, 0.25, Arrivals::Cbr, 1);
        for n in 0..1_000_000u64 {
            assert_eq!(s.due(), 1_000_000 + 250 + n * 1000);
            s.advance();
        }
        // A non-integer period accumulates no rounding error either.
        let mut s = Schedule::new(0, 333.3, 0.0, Arrivals::Cbr, 1);
        for _ in 0..3_000_000 {
            s.advance();
        }
        assert_eq!(s.due(), (3_000_000f64 * 333.3) as u64);
    }

    #[test]
    fn poisson_schedule_has_the_asked_mean_and_exponential_gaps() {
        let mut s = Schedule::new(0, 1000.0, 0.0, Arrivals::Poisson, 42);
        let n = 200_000u64;
        let mut prev = s.due();
        let mut gaps = Vec::with_capacity(n as usize);
        for _ in 0..n {
            s.advance();
            gaps.push((s.due() - prev) as f64);
            prev = s.due();
        }
        let mean = gaps.iter().sum::<f64>() / n as f64;
        assert!((mean - 1000.0).abs() < 10.0, "mean gap {mean}");
        // Exponential: P(gap > mean) = e^-1.
        let above = gaps.iter().filter(|&&g| g > 1000.0).count() as f64 / n as f64;
        assert!(
            (above - (-1f64).exp()).abs() < 0.01,
            "share above mean {above}"
        );
        // Same seed, same schedule.
        let mut a = Schedule::new(5, 10.0, 0.0, Arrivals::Poisson, 9);
        let mut b = Schedule::new(5, 10.0, 0.0, Arrivals::Poisson, 9);
        for _ in 0..100 {
            assert_eq!(a.due(), b.due());
            a.advance();
            b.advance();
        }
    }

    #[test]
    fn corrected_latency_counts_from_the_intended_time() {
        // Due at 100, written at 150 (50 late), answered at 400.
        assert_eq!(latencies(100, 150, 400), (300, 250));
        // A stalled server: requests due every 10 ticks from 0 while the
        // server answers nothing until 1000; one request in flight. The
        // first (written on time) and the ones written after the stall
        // (as soon as the window frees) all complete near 1000; the
        // corrected figures fall from 1000 in steps of the period, the raw
        // ones stay small except the first.
        let mut corrected = Vec::new();
        let mut raw = Vec::new();
        let mut t = 1000u64;
        for n in 0..100u64 {
            let intended = n * 10;
            let written = if n == 0 { 0 } else { t };
            t += 1; // each answered 1 tick after its write
            let (c, r) = latencies(intended, written, t);
            corrected.push(c);
            raw.push(r);
        }
        assert_eq!(corrected[0], 1001);
        assert_eq!(raw[0], 1001);
        assert!(raw[1..].iter().all(|&r| r == 1));
        assert!(corrected.windows(2).all(|w| w[1] < w[0]));
        // Clock reads from two CPUs a little out of step never go negative.
        assert_eq!(latencies(500, 520, 510), (10, 0));
    }

    #[test]
    fn bad_settings_are_refused_with_the_reason() {
        let ok = OpenConfig {
            rate: Some(1000.0),
            arrivals: Arrivals::Cbr,
            in_flight: 1,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(1),
            max_lag: Duration::from_millis(1),
            split: None,
            start_at_unix_ns: None,
        };
        assert!(ok.validate(10).is_ok());
        let e = OpenConfig {
            rate: Some(0.0),
            ..ok.clone()
        }
        .validate(10)
        .unwrap_err()
        .to_string();
        assert!(e.contains("--rate"), "{e}");
        let e = OpenConfig {
            in_flight: 0,
            ..ok.clone()
        }
        .validate(10)
        .unwrap_err()
        .to_string();
        assert!(e.contains("--in-flight"), "{e}");
        let e = OpenConfig {
            rate: Some(1e8),
            duration: Duration::from_secs(3600),
            ..ok.clone()
        }
        .validate(10)
        .unwrap_err()
        .to_string();
        assert!(e.contains("shorten"), "{e}");
    }
}
