//! How a shm endpoint waits for its peer: `spin`, `block` or `adaptive`.
//!
//! * `spin` busy-polls the ring index (with a pause hint) and never sleeps.
//!   Fastest when each thread owns a CPU (round trip p50 260 ns at 128 B
//!   here); catastrophic when two spinners share one CPU (~82 round
//!   trips/s), so it is never the default.
//! * `block` sleeps at once. The peer rings the sleeper's doorbell
//!   ([`crate::bell`]) only when it sees the sleeper's flag set (a Dekker
//!   handshake: flag store, full fence, index re-check on the sleeper's side;
//!   index store, full fence, flag load on the peer's side), so a run where
//!   nobody sleeps makes no system calls. Without `--cpus`, each session's
//!   two ends are placed on one CPU (round robin over the allowed CPUs): a
//!   wake-up on the other, idle vCPU costs ~28 µs here against ~4 µs on the
//!   waker's own.
//! * `adaptive` (default) spins for at most [`ADAPTIVE_SPIN`], and only
//!   while a core is free for the peer: the run's awake threads (threads
//!   started minus sleepers, counted in the segment) fit in our affinity
//!   mask, the machine's run queue (`procs_running`, sampled every 20 ms)
//!   has no more runnable threads than CPUs. When our last notify had to
//!   wake the peer, it is off-CPU for a wake-up latency, so the budget is
//!   [`ADAPTIVE_SPIN_AFTER_WAKE`] instead: long enough to cover that wake,
//!   so that the peer's answer finds us spinning and the next hand-off
//!   needs no wake at all. (Not spinning then, as an earlier version did,
//!   locks a ping-pong into sleep/wake on both sides for good: measured on
//!   idle cores, 27.8 k msgs/s with p50 72 µs at 128 B — below the pipe's
//!   28.9 k — against 5.1 M msgs/s for `spin`.) A spin that runs out backs
//!   off exponentially (2, 4, ... 1024 waits without spinning). Otherwise it sleeps like `block`; and when the run
//!   has more threads than CPUs it co-locates each session's pair as
//!   `block` does.
//!
//! Why these numbers (2-vCPU VM, see the ipc section of the README for the
//! runs): a spinning hand-off costs ~80 ns one way; a sleep/wake ~4 µs on
//! one CPU and ~28 µs across the two. A spin budget near the cross-CPU wake
//! cost (the 2-competitive rule) would burn a whole wake's worth of CPU
//! every time the peer has been descheduled — common on this shared
//! machine, whose load average sat at 10–12 during development — so the
//! budget is 5 µs: it covers an echo of several KiB in flight, and a wrong
//! guess costs less than the wake it tries to avoid. With more awake
//! threads than CPUs (4 sessions = 8 threads on 2 CPUs) nobody spins, which
//! keeps the oversubscribed sweep sane.
//!
//! Every sleep has a timeout ([`SLEEP_SLICE`]) after which the caller checks
//! whether the peer closed its end or its process died, so a killed client
//! turns into an error, never a hang.

use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::futex;

/// The longest an adaptive waiter spins before sleeping.
pub const ADAPTIVE_SPIN: Duration = Duration::from_micros(5);
/// The adaptive spin budget right after waking the peer: above the
/// cross-CPU wake-up latency (~28 µs here) plus a small echo, so the
/// ping-pong returns to spinning instead of waking on every message.
pub const ADAPTIVE_SPIN_AFTER_WAKE: Duration = Duration::from_micros(50);
/// Longest single futex sleep before re-checking the peer's liveness.
pub const SLEEP_SLICE: Duration = Duration::from_millis(50);
/// Spin iterations between liveness checks in `spin` mode.
const SPIN_CHECK_EVERY: u32 = 1 << 14;

/// How an endpoint waits for data or space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitPolicy {
    /// Busy-poll, never sleep.
    Spin,
    /// Futex sleep immediately.
    Block,
    /// Spin briefly while a core is free for the peer, then sleep.
    #[default]
    Adaptive,
}

impl WaitPolicy {
    /// Name as used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitPolicy::Spin => "spin",
            WaitPolicy::Block => "block",
            WaitPolicy::Adaptive => "adaptive",
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Option<WaitPolicy> {
        match s {
            "spin" => Some(WaitPolicy::Spin),
            "block" => Some(WaitPolicy::Block),
            "adaptive" => Some(WaitPolicy::Adaptive),
            _ => None,
        }
    }

    pub(crate) fn code(self) -> u32 {
        match self {
            WaitPolicy::Spin => 1,
            WaitPolicy::Block => 2,
            WaitPolicy::Adaptive => 3,
        }
    }

    pub(crate) fn from_code(c: u32) -> Option<WaitPolicy> {
        match c {
            1 => Some(WaitPolicy::Spin),
            2 => Some(WaitPolicy::Block),
            3 => Some(WaitPolicy::Adaptive),
            _ => None,
        }
    }
}

impl std::fmt::Display for WaitPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Number of CPUs this thread may run on (core's placement read-back).
pub fn affinity_cpus() -> u32 {
    let n = commbench_core::placement::current_affinity().cpus().len() as u32;
    if n > 0 {
        n
    } else {
        commbench_core::rusage::online_cpus() as u32
    }
}

/// The run-wide count of sleeping threads, shared through the segment,
/// with the number of threads the run started: awake = threads - sleeping.
pub(crate) struct Awake<'a> {
    pub sleeping: &'a AtomicU32,
    pub threads: u32,
    pub cpus: u32,
}

impl Awake<'_> {
    #[inline]
    fn core_free_for_peer(&self) -> bool {
        let sleeping = self.sleeping.load(Ordering::Relaxed);
        self.threads.saturating_sub(sleeping) <= self.cpus
    }
}

/// Per-endpoint memory of the adaptive policy: after a spin that ran out
/// without the peer answering, skip spinning for the next 2, 4, 8, ...
/// (at most 1024) waits; a spin that succeeds resets the backoff. On a
/// loaded machine (the peer keeps losing its CPU) this converges to `block`
/// within a few waits instead of burning the budget every time.
#[derive(Debug, Default)]
pub(crate) struct Adapt {
    fails: u32,
    skip: u32,
    /// When the system's run queue was last looked at, and what it said.
    checked: Option<Instant>,
    room: bool,
}

/// How often an adaptive endpoint re-reads the system's runnable count.
const ROOM_CHECK_EVERY: Duration = Duration::from_millis(20);

/// Whether the machine has a CPU for every runnable thread (core's
/// `procs_running` count, which includes the caller).
fn system_has_room() -> bool {
    let running = commbench_core::rusage::runnable_threads();
    running == 0 || running as usize <= commbench_core::rusage::online_cpus()
}

impl Adapt {
    /// Is there a CPU for everyone runnable on the machine (not only our
    /// threads)? Other processes' load makes a spinning peer lose its CPU,
    /// so spinning then only burns time. Sampled every 20 ms.
    #[inline]
    fn machine_has_room(&mut self) -> bool {
        let stale = match self.checked {
            None => true,
            Some(t) => t.elapsed() >= ROOM_CHECK_EVERY,
        };
        if stale {
            self.room = system_has_room();
            self.checked = Some(Instant::now());
        }
        self.room
    }

    #[inline]
    fn try_spin(&mut self) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            false
        } else {
            true
        }
    }
    #[inline]
    fn spun(&mut self, ok: bool) {
        if ok {
            self.fails = 0;
        } else {
            self.fails = (self.fails + 1).min(10);
            self.skip = 1 << self.fails;
        }
    }
}

/// Outcome of a wait.
pub(crate) enum Waited {
    Ready,
    Closed,
}

/// Wait until `ready()` holds, following `policy`.
///
/// `sleep_flag` is the futex word the peer checks after publishing (it
/// swaps it to 0 and wakes us if it was 1). `closed()` reports that the
/// peer is gone (closed flag or dead process); it is checked after every
/// sleep slice and every few thousand spins. `peer_just_woken` says that
/// this endpoint's last notify had to wake the peer from its sleep: the
/// peer is then not on a CPU and cannot answer before a wake-up latency
/// (~4-28 µs here), so the adaptive policy spins for the longer
/// [`ADAPTIVE_SPIN_AFTER_WAKE`] budget.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn wait_for(
    policy: WaitPolicy,
    awake: &Awake<'_>,
    adapt: &mut Adapt,
    peer_just_woken: bool,
    sleep_flag: &AtomicU32,
    bell: Option<&OwnedFd>,
    mut ready: impl FnMut() -> bool,
    mut closed: impl FnMut() -> bool,
) -> Waited {
    if ready() {
        return Waited::Ready;
    }
    match policy {
        WaitPolicy::Spin => {
            let mut i: u32 = 0;
            loop {
                std::hint::spin_loop();
                if ready() {
                    return Waited::Ready;
                }
                i = i.wrapping_add(1);
                if i & (SPIN_CHECK_EVERY - 1) == 0 && closed() {
                    return if ready() {
                        Waited::Ready
                    } else {
                        Waited::Closed
                    };
                }
            }
        }
        WaitPolicy::Adaptive => {
            if awake.core_free_for_peer() && adapt.machine_has_room() && adapt.try_spin() {
                let budget = if peer_just_woken {
                    ADAPTIVE_SPIN_AFTER_WAKE
                } else {
                    ADAPTIVE_SPIN
                };
                let start = Instant::now();
                let mut i: u32 = 0;
                loop {
                    std::hint::spin_loop();
                    if ready() {
                        adapt.spun(true);
                        return Waited::Ready;
                    }
                    i = i.wrapping_add(1);
                    if i & 63 == 0 && start.elapsed() >= budget {
                        adapt.spun(false);
                        break;
                    }
                }
            }
        }
        WaitPolicy::Block => {}
    }
    loop {
        sleep_flag.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if ready() {
            sleep_flag.store(0, Ordering::Relaxed);
            return Waited::Ready;
        }
        awake.sleeping.fetch_add(1, Ordering::Relaxed);
        match bell {
            Some(fd) => crate::bell::sleep(fd, SLEEP_SLICE),
            None => futex::wait(sleep_flag, 1, SLEEP_SLICE),
        }
        awake.sleeping.fetch_sub(1, Ordering::Relaxed);
        if ready() {
            sleep_flag.store(0, Ordering::Relaxed);
            return Waited::Ready;
        }
        if closed() {
            sleep_flag.store(0, Ordering::Relaxed);
            return if ready() {
                Waited::Ready
            } else {
                Waited::Closed
            };
        }
    }
}

/// Called by the side that just published: wake the peer if it sleeps.
/// Returns whether it had to wake it.
#[inline]
pub(crate) fn notify(policy: WaitPolicy, sleep_flag: &AtomicU32, bell: Option<&OwnedFd>) -> bool {
    if policy == WaitPolicy::Spin {
        return false;
    }
    fence(Ordering::SeqCst);
    if sleep_flag.load(Ordering::Relaxed) != 0 && sleep_flag.swap(0, Ordering::SeqCst) != 0 {
        match bell {
            Some(fd) => crate::bell::ring(fd),
            None => futex::wake(sleep_flag, 1),
        }
        return true;
    }
    false
}
