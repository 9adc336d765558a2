//! How a shm endpoint waits for its peer: `spin`, `block` or `adaptive`.
//!
//! * `spin` busy-polls the ring index (with a pause hint) and never sleeps.
//!   Fastest when each thread owns a CPU; catastrophic when two spinners
//!   share one (measured here: ~82 round trips/s).
//! * `block` goes straight to a futex sleep. The peer issues FUTEX_WAKE only
//!   when it sees our "sleeping" flag set (a Dekker handshake: flag store,
//!   full fence, index re-check on our side; index store, full fence, flag
//!   load on the peer's side), so a run where nobody sleeps makes no system
//!   calls at all.
//! * `adaptive` (default) spins for at most [`ADAPTIVE_SPIN`] and only while
//!   the number of awake threads of the run (threads started minus a
//!   counter of sleepers in the shared segment) does not exceed the CPUs in our
//!   affinity mask and the machine's run queue (`/proc/loadavg`, sampled
//!   every 20 ms) has no more runnable threads than CPUs, i.e. while a core
//!   is free for the peer; it never spins right after it had to wake the
//!   peer (the peer is then off-CPU for a wake-up latency), and after a spin
//!   that ran out it backs off exponentially. Otherwise, or when the budget
//!   runs out, it blocks like `block`.
//!
//! Why these numbers (measured on the 2-vCPU VM this was built on, see the
//! ipc section of the README): a futex wake costs ~4 µs on the same CPU and
//! ~28 µs across the two vCPUs, while a spinning hand-off costs ~160 ns per
//! round trip. Spinning up to ~the cost of one cross-CPU sleep/wake (the
//! classic 2-competitive bound) would waste a whole time slice when the
//! peer is descheduled, so the budget is kept at a few microseconds: enough
//! to catch an echo of up to several KiB in flight, short enough that a
//! wrongly chosen spin costs less than the wake it tries to avoid. With more
//! awake threads than CPUs (e.g. 4 sessions = 8 threads on 2 CPUs) nobody
//! spins, which is what keeps the oversubscribed sweep sane.
//!
//! Every sleep has a timeout ([`SLEEP_SLICE`]) after which the caller checks
//! whether the peer closed its end or its process died, so a killed client
//! turns into an error, never a hang.

use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::futex;

/// The longest an adaptive waiter spins before sleeping.
pub const ADAPTIVE_SPIN: Duration = Duration::from_micros(5);
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

/// Number of CPUs this thread may run on.
pub fn affinity_cpus() -> u32 {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most
    // size_of::<cpu_set_t>() bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let n = libc::CPU_COUNT(&set);
            if n > 0 {
                return n as u32;
            }
        }
    }
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
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

/// Runnable threads right now, system-wide (4th field of /proc/loadavg,
/// "running/total"), and the online CPUs.
fn system_has_room() -> bool {
    let Ok(s) = std::fs::read_to_string("/proc/loadavg") else {
        return true;
    };
    let running = s
        .split_whitespace()
        .nth(3)
        .and_then(|f| f.split('/').next())
        .and_then(|n| n.parse::<usize>().ok());
    match running {
        Some(r) => r <= commbench_core::rusage::online_cpus(),
        None => true,
    }
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
/// this endpoint's last notify had to wake the peer from a futex sleep: the
/// peer is then not on a CPU and cannot answer before a wake-up latency
/// (~4-28 µs here), so the adaptive policy does not spin.
#[inline]
pub(crate) fn wait_for(
    policy: WaitPolicy,
    awake: &Awake<'_>,
    adapt: &mut Adapt,
    peer_just_woken: bool,
    sleep_flag: &AtomicU32,
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
            if !peer_just_woken
                && awake.core_free_for_peer()
                && adapt.machine_has_room()
                && adapt.try_spin()
            {
                let start = Instant::now();
                let mut i: u32 = 0;
                loop {
                    std::hint::spin_loop();
                    if ready() {
                        adapt.spun(true);
                        return Waited::Ready;
                    }
                    i = i.wrapping_add(1);
                    if i & 63 == 0 && start.elapsed() >= ADAPTIVE_SPIN {
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
        futex::wait(sleep_flag, 1, SLEEP_SLICE);
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
pub(crate) fn notify(policy: WaitPolicy, sleep_flag: &AtomicU32) -> bool {
    if policy == WaitPolicy::Spin {
        return false;
    }
    fence(Ordering::SeqCst);
    if sleep_flag.load(Ordering::Relaxed) != 0 && sleep_flag.swap(0, Ordering::SeqCst) != 0 {
        futex::wake(sleep_flag, 1);
        return true;
    }
    false
}
