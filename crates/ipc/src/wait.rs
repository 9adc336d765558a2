//! How a shm endpoint waits for its peer: `spin`, `block` or `adaptive`.
//!
//! * `spin` busy-polls the ring index (with a pause hint) and never sleeps.
//!   Fastest when each thread owns a CPU; catastrophic when two spinners
//!   share one CPU (~82 round trips/s here), so it is never the default.
//! * `block` sleeps at once. The peer rings the sleeper's doorbell
//!   ([`crate::bell`]) only when it sees the sleeper's flag set (a Dekker
//!   handshake: flag store, full fence, index re-check on the sleeper's side;
//!   index store, full fence, flag load on the peer's side), so a run where
//!   nobody sleeps makes no system calls. Without `--cpus`, each session's
//!   two ends are placed on one CPU.
//! * `adaptive` (default) spins only while the peer is on a CPU, the way
//!   the kernel's optimistic spinning spins only while a lock's owner runs.
//!   Every endpoint publishes a *beat* in the ring header: the TSC and its
//!   CPU, stored every 64 spins while it waits, when it wakes, and an
//!   "asleep" mark before it sleeps. A waiter reads its peer's beat every
//!   64 spins and [`decide`]s from it:
//!   - a beat fresher than [`PEER_FRESH`] from another CPU: the peer is
//!     running → spin (up to [`MAX_SPIN`] in one wait);
//!   - the same, from the CPU we run on: the peer was preempted by us →
//!     sleep, since spinning would keep it off its CPU;
//!   - an awake peer without a fresh beat (it works, or it lost its CPU):
//!     spin for at most [`PEER_GRACE`] of no progress, then sleep — a peer
//!     descheduled by other work costs one grace period per preemption,
//!     not a time slice per message;
//!   - an asleep peer: sleep, unless our own notify just woke it and it
//!     has a CPU of its own to wake up on (the run's ends are placed on
//!     different CPUs, or the run's awake threads leave one of its CPUs
//!     free and the machine's run queue has room): then spin
//!     [`WAKE_SPIN`], long enough to cover a cross-CPU wake-up (~28 µs
//!     here), so the ping-pong returns to spinning instead of waking on
//!     every message;
//!   - more awake threads in the run than CPUs (e.g. 4 sessions on 2
//!     CPUs): never spin.
//!
//!   How busy the machine is comes from a history of the kernel's count
//!   of runnable threads (`/proc/loadavg`), sampled at most every
//!   [`LOAD_SAMPLE_EVERY`]; the verdict is the majority of the last eight
//!   samples, never one sample. Every wait is counted by outcome (spun to
//!   success, or slept and why) and the run reports the counts
//!   ([`WaitStats`]).
//!
//! Why (2-vCPU VM, figures in docs/ipc.md): a spinning hand-off costs ~80
//! ns one way, a sleep/wake ~4 µs on one CPU and ~28 µs across the two.
//! Beside one busy loop per CPU, the two ends pinned apart and spinning
//! exchange messages whenever both hold their CPUs at once, and sleep
//! only while one of them is descheduled; a fixed spin budget instead
//! either burns a slice per message or sleeps through
//! a 64 KiB stream whose messages take ~5 µs to copy (5,300 sleeps and
//! wake-ups in 30,000 messages with a 5 µs budget).
//!
//! Every sleep has a timeout ([`SLEEP_SLICE`]) after which the caller checks
//! whether the peer closed its end or its process died, so a killed client
//! turns into an error, never a hang.

use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::futex;

/// A peer's beat at most this old means it is spinning on a CPU (a
/// spinning endpoint beats every 64 spins, about every microsecond).
pub const PEER_FRESH: Duration = Duration::from_micros(10);
/// How long a waiter spins for an awake peer that does not beat (it is
/// working — a 64 KiB message takes ~5 µs to copy here, a 256 KiB ring
/// chunk ~20 µs — or it lost its CPU) before it sleeps.
pub const PEER_GRACE: Duration = Duration::from_micros(50);
/// How long a waiter spins after its own notify woke the peer: above the
/// cross-CPU wake-up latency (~28 µs here) plus a small echo.
pub const WAKE_SPIN: Duration = Duration::from_micros(50);
/// The longest one wait spins, whatever the peer does.
pub const MAX_SPIN: Duration = Duration::from_millis(1);
/// Longest single sleep before re-checking the peer's liveness.
pub const SLEEP_SLICE: Duration = Duration::from_millis(50);
/// How often an adaptive endpoint may sample the machine's run queue.
pub const LOAD_SAMPLE_EVERY: Duration = Duration::from_millis(1);
/// Spin iterations between liveness checks in `spin` mode.
const SPIN_CHECK_EVERY: u32 = 1 << 14;
/// Spin iterations between beats and decisions in `adaptive` mode.
const BEAT_EVERY: u32 = 64;

/// How an endpoint waits for data or space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitPolicy {
    /// Busy-poll, never sleep.
    Spin,
    /// Sleep immediately.
    Block,
    /// Spin while the peer runs on another CPU, else sleep.
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
    /// CPUs the run may use (the server's affinity when it started).
    pub cpus: u32,
    /// The run placed each session's two ends on different CPUs.
    pub apart: bool,
}

impl Awake<'_> {
    /// The run's threads that are not asleep.
    #[inline]
    fn awake(&self) -> u32 {
        let sleeping = self.sleeping.load(Ordering::Relaxed);
        self.threads.saturating_sub(sleeping)
    }
    #[inline]
    fn threads_fit(&self) -> bool {
        self.awake() <= self.cpus
    }
    /// One of the run's CPUs is left free by its awake threads: a peer we
    /// just woke (still counted asleep until it runs) has a CPU to run on.
    #[inline]
    fn spare_cpu(&self) -> bool {
        self.awake() < self.cpus
    }
}

/// Bit of [`Beat::state`] that says "asleep"; the low bits hold the CPU.
const ASLEEP: u32 = 1 << 31;

/// One endpoint's sign of life in the ring header: when it last ran
/// (TSC) and on which CPU, or that it sleeps.
#[repr(C)]
#[derive(Default)]
pub struct Beat {
    tsc: AtomicU64,
    state: AtomicU32,
}

impl Beat {
    pub(crate) fn reset(&self) {
        self.tsc.store(0, Ordering::Relaxed);
        self.state.store(0, Ordering::Relaxed);
    }
    #[inline]
    fn store(&self, tsc: u64, cpu: u32) {
        self.tsc.store(tsc, Ordering::Relaxed);
        self.state.store(cpu & !ASLEEP, Ordering::Relaxed);
    }
    #[inline]
    fn asleep(&self) {
        self.state.store(ASLEEP, Ordering::Relaxed);
    }
    /// What a waiter on `cpu` at time `now` (TSC) sees of this beat.
    #[inline]
    fn seen(&self, now: u64, cpu: u32, ns_per_tick: f64) -> PeerSeen {
        let state = self.state.load(Ordering::Relaxed);
        if state & ASLEEP != 0 {
            return PeerSeen::Asleep;
        }
        let tsc = self.tsc.load(Ordering::Relaxed);
        if tsc == 0 {
            // Never beat yet: awake, age unknown.
            return PeerSeen::Awake {
                age_ns: u64::MAX,
                same_cpu: false,
            };
        }
        PeerSeen::Awake {
            age_ns: (now.saturating_sub(tsc) as f64 * ns_per_tick) as u64,
            same_cpu: state == cpu,
        }
    }
}

/// The TSC (elsewhere the monotonic clock), for timing windows.
#[inline]
pub(crate) fn tsc_now() -> u64 {
    now_and_cpu().0
}

/// TSC and CPU number in one instruction (`rdtscp`'s aux is the CPU on
/// Linux); elsewhere the monotonic clock and CPU 0.
#[inline]
#[allow(unsafe_code)]
fn now_and_cpu() -> (u64, u32) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut aux = 0u32;
        // SAFETY: rdtscp only writes the aux out-parameter, a valid local.
        let t = unsafe { core::arch::x86_64::__rdtscp(&mut aux) };
        (t, aux & 0xfff)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (commbench_core::clock::now_ns(), 0)
    }
}

/// The beats one endpoint writes (its two roles: consumer of one ring and
/// producer of the other), shared by the endpoint's two halves with the
/// "we just woke our peer" flag. An `async` client's two threads share
/// one, so either thread's beat speaks for both.
pub struct Presence {
    pub(crate) woke: AtomicBool,
    mine: [*const Beat; 2],
    _backing: Arc<dyn crate::ring::Backing>,
}

// SAFETY: the beat pointers point into the shared mapping kept alive by
// `_backing`; beats are atomics.
#[allow(unsafe_code)]
unsafe impl Send for Presence {}
// SAFETY: as above.
#[allow(unsafe_code)]
unsafe impl Sync for Presence {}

impl Presence {
    pub(crate) fn new(mine: [*const Beat; 2], backing: Arc<dyn crate::ring::Backing>) -> Presence {
        Presence {
            woke: AtomicBool::new(false),
            mine,
            _backing: backing,
        }
    }
    #[inline]
    #[allow(unsafe_code)]
    fn each(&self, f: impl Fn(&Beat)) {
        for b in self.mine {
            // SAFETY: see the Send impl: valid for as long as `_backing`.
            f(unsafe { &*b })
        }
    }
    #[inline]
    fn beat(&self, tsc: u64, cpu: u32) {
        self.each(|b| b.store(tsc, cpu));
    }
    #[inline]
    fn asleep(&self) {
        self.each(Beat::asleep);
    }
}

/// What a waiter knows of its peer from the peer's beat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerSeen {
    /// The peer marked itself asleep.
    Asleep,
    /// The peer is awake; its last beat is `age_ns` old (u64::MAX: it
    /// has not beaten yet) and came from the waiter's own CPU or not.
    Awake {
        /// Age of the last beat, ns.
        age_ns: u64,
        /// The beat came from the CPU the waiter runs on.
        same_cpu: bool,
    },
}

/// Everything [`decide`] looks at, sampled by the waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The run's awake threads fit its CPUs.
    pub threads_fit: bool,
    /// Time spent spinning in this wait so far, ns.
    pub spun_ns: u64,
    /// Time since the waited-for index last moved (or the wait began), ns.
    pub idle_ns: u64,
    /// The peer, from its beat.
    pub peer: PeerSeen,
    /// Our last notify had to wake the peer.
    pub woke_peer: bool,
    /// The history of the machine's run queue says it is full.
    pub machine_busy: bool,
    /// The run placed the two ends on different CPUs.
    pub apart: bool,
    /// The run's awake threads leave one of its CPUs free (for a peer we
    /// woke). Without one, the woken peer waits for the CPU we would spin
    /// on: with both ends on one CPU, each wake-up spin cost the whole
    /// [`WAKE_SPIN`] (25k messages/s against 246k sleeping at once).
    pub spare_cpu: bool,
}

/// Why a wait spun or slept (also the index into [`WaitStats::slept`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The peer beats on another CPU.
    PeerOnCpu,
    /// The peer is awake and works; within the grace period.
    PeerWorking,
    /// We just woke the peer and it has a CPU to wake up on.
    WakingPeer,
    /// The peer sleeps (and we did not just wake it, or it would wake
    /// on a full machine).
    PeerAsleep,
    /// The peer made no progress and no beat for the grace period: it
    /// lost its CPU (or works for long).
    PeerOffCpu,
    /// The peer last ran on our CPU: spinning would keep it off.
    PeerOnOurCpu,
    /// More awake threads in the run than CPUs.
    ThreadsExceedCpus,
    /// One wait spun [`MAX_SPIN`].
    SpinCap,
}

/// Reasons to sleep, in [`WaitStats::slept`] order.
pub const SLEEP_REASONS: [Reason; 6] = [
    Reason::PeerAsleep,
    Reason::PeerOffCpu,
    Reason::PeerOnOurCpu,
    Reason::ThreadsExceedCpus,
    Reason::SpinCap,
    Reason::WakingPeer,
];

impl Reason {
    /// Words for the run's report.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::PeerOnCpu => "peer on a CPU",
            Reason::PeerWorking => "peer working",
            Reason::WakingPeer => "waking the peer",
            Reason::PeerAsleep => "peer asleep",
            Reason::PeerOffCpu => "peer descheduled",
            Reason::PeerOnOurCpu => "peer on our CPU",
            Reason::ThreadsExceedCpus => "more threads than CPUs",
            Reason::SpinCap => "spin cap",
        }
    }
    fn slot(self) -> usize {
        SLEEP_REASONS.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// The adaptive policy's verdict for one moment of a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Keep spinning.
    Spin(Reason),
    /// Stop spinning and sleep.
    Sleep(Reason),
}

impl Sample {
    /// A peer our notify just woke can run at once without our CPU: the
    /// ends are placed apart, or the run leaves a CPU free and the machine
    /// has room.
    fn woken_has_a_cpu(&self) -> bool {
        self.apart || (self.spare_cpu && !self.machine_busy)
    }
}

/// The adaptive policy: spin or sleep, from what the waiter sees now.
/// Pure and deterministic (the unit tests feed it samples).
pub fn decide(s: &Sample) -> Verdict {
    const NS: fn(Duration) -> u64 = |d| d.as_nanos() as u64;
    if !s.threads_fit {
        return Verdict::Sleep(Reason::ThreadsExceedCpus);
    }
    if s.spun_ns >= NS(MAX_SPIN) {
        return Verdict::Sleep(Reason::SpinCap);
    }
    match s.peer {
        PeerSeen::Awake { age_ns, same_cpu } if age_ns <= NS(PEER_FRESH) => {
            if same_cpu {
                Verdict::Sleep(Reason::PeerOnOurCpu)
            } else {
                Verdict::Spin(Reason::PeerOnCpu)
            }
        }
        PeerSeen::Awake { .. } if s.idle_ns < NS(PEER_GRACE) => Verdict::Spin(Reason::PeerWorking),
        PeerSeen::Awake { .. } => {
            if s.woke_peer && s.spun_ns < NS(WAKE_SPIN) && s.woken_has_a_cpu() {
                Verdict::Spin(Reason::WakingPeer)
            } else {
                Verdict::Sleep(Reason::PeerOffCpu)
            }
        }
        PeerSeen::Asleep => {
            if s.woke_peer && s.spun_ns < NS(WAKE_SPIN) && s.woken_has_a_cpu() {
                Verdict::Spin(Reason::WakingPeer)
            } else {
                Verdict::Sleep(Reason::PeerAsleep)
            }
        }
    }
}

/// The last eight samples of "more runnable threads than CPUs", newest in
/// bit 0; the verdict is their majority, so one sample taken while the
/// run's own threads start up does not decide a whole short run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LoadHistory {
    bits: u8,
    n: u8,
}

impl LoadHistory {
    /// Add a sample.
    pub fn push(&mut self, busy: bool) {
        self.bits = (self.bits << 1) | busy as u8;
        self.n = (self.n + 1).min(8);
    }
    /// Samples held.
    pub fn len(&self) -> u32 {
        self.n as u32
    }
    /// No samples yet.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Busy samples among those held.
    pub fn busy_samples(&self) -> u32 {
        let mask = if self.n >= 8 {
            0xff
        } else {
            (1u8 << self.n) - 1
        };
        (self.bits & mask).count_ones()
    }
    /// More than half of the held samples saw a full machine.
    pub fn busy(&self) -> bool {
        self.n > 0 && 2 * self.busy_samples() > self.n as u32
    }
}

/// Runnable threads on the machine right now (the kernel's count, which
/// includes the caller), from the fourth field of /proc/loadavg
/// (`running/total`); 0 when unreadable.
pub fn runnable_now() -> u32 {
    let mut buf = [0u8; 128];
    let n = std::fs::File::open("/proc/loadavg")
        .and_then(|mut f| std::io::Read::read(&mut f, &mut buf))
        .unwrap_or(0);
    parse_loadavg_running(&buf[..n]).unwrap_or(0)
}

/// `running` of /proc/loadavg's `a b c running/total last_pid`.
pub fn parse_loadavg_running(text: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(text).ok()?;
    let field = s.split_ascii_whitespace().nth(3)?;
    field.split_once('/')?.0.parse().ok()
}

/// Is the machine full: more runnable threads than online CPUs, counting
/// `extra` threads about to start (and not the caller)?
pub fn machine_full(extra: u32) -> bool {
    let running = runnable_now();
    running > 0 && (running - 1 + extra) as usize > commbench_core::rusage::online_cpus()
}

/// Counts of one run's waits by outcome, summed over its endpoints
/// (through the segment, so `mp` clients count too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WaitStats {
    /// Waits (calls that found the ring empty or full).
    pub waits: u64,
    /// Waits that ended while spinning.
    pub spun: u64,
    /// Waits that slept, by [`SLEEP_REASONS`].
    pub slept: [u64; 6],
}

impl WaitStats {
    /// Waits that slept.
    pub fn sleeps(&self) -> u64 {
        self.slept.iter().sum()
    }
    /// Add another endpoint's counts.
    pub fn add(&mut self, o: &WaitStats) {
        self.waits += o.waits;
        self.spun += o.spun;
        for (a, b) in self.slept.iter_mut().zip(o.slept) {
            *a += b;
        }
    }
    /// "spun 99.1% of 20,000 waits; slept 0.9% (peer descheduled 150, ...)".
    pub fn describe(&self) -> String {
        let pct = |x: u64| 100.0 * x as f64 / self.waits.max(1) as f64;
        let mut why: Vec<String> = SLEEP_REASONS
            .iter()
            .zip(self.slept)
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{} {n}", r.as_str()))
            .collect();
        if why.is_empty() {
            why.push("never".into());
        }
        format!(
            "spun through {:.1}% of {} waits, slept in {:.1}% ({})",
            pct(self.spun),
            self.waits,
            pct(self.sleeps()),
            why.join(", ")
        )
    }
}

/// The run-wide counters in the segment header.
#[repr(C)]
#[derive(Default)]
pub struct SharedStats {
    waits: AtomicU64,
    spun: AtomicU64,
    slept: [AtomicU64; 6],
}

impl SharedStats {
    pub(crate) fn add(&self, s: &WaitStats) {
        self.waits.fetch_add(s.waits, Ordering::Relaxed);
        self.spun.fetch_add(s.spun, Ordering::Relaxed);
        for (a, b) in self.slept.iter().zip(s.slept) {
            a.fetch_add(b, Ordering::Relaxed);
        }
    }
    pub(crate) fn read(&self) -> WaitStats {
        let mut s = WaitStats {
            waits: self.waits.load(Ordering::Relaxed),
            spun: self.spun.load(Ordering::Relaxed),
            ..WaitStats::default()
        };
        for (a, b) in s.slept.iter_mut().zip(&self.slept) {
            *a = b.load(Ordering::Relaxed);
        }
        s
    }
}

/// Per-endpoint memory of the adaptive policy: the machine's load
/// history, the TSC scale and this endpoint's wait counts.
#[derive(Debug)]
pub(crate) struct Adapt {
    load: LoadHistory,
    sampled: Option<Instant>,
    ns_per_tick: f64,
    pub(crate) stats: WaitStats,
    /// Doorbells this endpoint half rang for its peer (tests read it).
    pub(crate) bells_rung: u64,
}

impl Default for Adapt {
    fn default() -> Self {
        // Calibrated once per process, here (before the run's gate) and
        // not in the first measured wait.
        let hz = commbench_core::clock::tsc().hz();
        Adapt {
            load: LoadHistory::default(),
            sampled: None,
            ns_per_tick: if hz > 0.0 { 1e9 / hz } else { 1.0 },
            stats: WaitStats::default(),
            bells_rung: 0,
        }
    }
}

impl Adapt {
    /// The machine's load verdict, re-sampled at most every
    /// [`LOAD_SAMPLE_EVERY`].
    fn machine_busy(&mut self) -> bool {
        if self
            .sampled
            .is_none_or(|t| t.elapsed() >= LOAD_SAMPLE_EVERY)
        {
            self.load.push(machine_full(0));
            self.sampled = Some(Instant::now());
        }
        self.load.busy()
    }
}

/// Outcome of a wait.
pub(crate) enum Waited {
    Ready,
    Closed,
}

/// What a waiter needs of the ring: its sleep flag and doorbell, the
/// peer's beat, and its own presence.
pub(crate) struct Parties<'a> {
    pub awake: Awake<'a>,
    pub sleep_flag: &'a AtomicU32,
    pub bell: Option<&'a OwnedFd>,
    pub peer: &'a Beat,
    pub me: &'a Presence,
}

/// Wait until `ready()` holds, following `policy`.
///
/// `sleep_flag` is the word the peer checks after publishing (it swaps it
/// to 0 and rings our bell if it was 1). `closed()` reports that the peer
/// is gone (closed flag or dead process); it is checked after every sleep
/// slice and every few thousand spins. `progress()` returns the index the
/// waiter watches, so partial progress (a chunk released) restarts the
/// grace period.
#[inline]
pub(crate) fn wait_for(
    policy: WaitPolicy,
    p: &Parties<'_>,
    adapt: &mut Adapt,
    mut ready: impl FnMut() -> bool,
    mut progress: impl FnMut() -> u64,
    mut closed: impl FnMut() -> bool,
) -> Waited {
    if ready() {
        return Waited::Ready;
    }
    let why = match policy {
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
            adapt.stats.waits += 1;
            let woke_peer = p.me.woke.swap(false, Ordering::Relaxed);
            let (start, cpu) = now_and_cpu();
            p.me.beat(start, cpu);
            let mut moved_at = start;
            let mut last = progress();
            let mut now = start;
            let why = loop {
                let spun = now.wrapping_sub(start);
                let idle = now.wrapping_sub(moved_at);
                let peer = p.peer.seen(now, cpu, adapt.ns_per_tick);
                let sample = Sample {
                    threads_fit: p.awake.threads_fit(),
                    spun_ns: (spun as f64 * adapt.ns_per_tick) as u64,
                    idle_ns: (idle as f64 * adapt.ns_per_tick) as u64,
                    peer,
                    woke_peer,
                    machine_busy: woke_peer && !p.awake.apart && adapt.machine_busy(),
                    apart: p.awake.apart,
                    spare_cpu: p.awake.spare_cpu(),
                };
                match decide(&sample) {
                    Verdict::Sleep(r) => break r,
                    Verdict::Spin(_) => {}
                }
                for _ in 0..BEAT_EVERY {
                    std::hint::spin_loop();
                    if ready() {
                        adapt.stats.spun += 1;
                        return Waited::Ready;
                    }
                }
                let (t, c) = now_and_cpu();
                p.me.beat(t, c);
                now = t;
                let at = progress();
                if at != last {
                    last = at;
                    moved_at = t;
                }
                if closed() {
                    return if ready() {
                        Waited::Ready
                    } else {
                        Waited::Closed
                    };
                }
            };
            Some(why)
        }
        WaitPolicy::Block => None,
    };
    if let Some(r) = why {
        adapt.stats.slept[r.slot()] += 1;
    }
    let awake = &p.awake;
    loop {
        p.sleep_flag.store(1, Ordering::SeqCst);
        p.me.asleep();
        fence(Ordering::SeqCst);
        if ready() {
            p.sleep_flag.store(0, Ordering::Relaxed);
            wake_beat(policy, p.me);
            return Waited::Ready;
        }
        awake.sleeping.fetch_add(1, Ordering::Relaxed);
        match p.bell {
            Some(fd) => crate::bell::sleep(fd, SLEEP_SLICE),
            None => futex::wait(p.sleep_flag, 1, SLEEP_SLICE),
        }
        awake.sleeping.fetch_sub(1, Ordering::Relaxed);
        wake_beat(policy, p.me);
        if ready() {
            p.sleep_flag.store(0, Ordering::Relaxed);
            return Waited::Ready;
        }
        if closed() {
            p.sleep_flag.store(0, Ordering::Relaxed);
            return if ready() {
                Waited::Ready
            } else {
                Waited::Closed
            };
        }
    }
}

#[inline]
fn wake_beat(policy: WaitPolicy, me: &Presence) {
    if policy == WaitPolicy::Adaptive {
        let (t, c) = now_and_cpu();
        me.beat(t, c);
    }
}

/// Called by the side that just published: wake the peer if it sleeps.
/// Returns whether it had to wake it.
#[inline]
pub(crate) fn notify(policy: WaitPolicy, sleep_flag: &AtomicU32, bell: Option<&OwnedFd>) -> bool {
    notify_when(policy, sleep_flag, || true, bell)
}

/// [`notify`], but only once `due()` holds: the sleeper said (before it
/// set its flag) how much progress it waits for, and a wake-up before
/// that would only put it back to sleep.
#[inline]
pub(crate) fn notify_when(
    policy: WaitPolicy,
    sleep_flag: &AtomicU32,
    due: impl FnOnce() -> bool,
    bell: Option<&OwnedFd>,
) -> bool {
    if policy == WaitPolicy::Spin {
        return false;
    }
    fence(Ordering::SeqCst);
    if sleep_flag.load(Ordering::Acquire) != 0 && due() && sleep_flag.swap(0, Ordering::SeqCst) != 0
    {
        match bell {
            Some(fd) => crate::bell::ring(fd),
            None => futex::wake(sleep_flag, 1),
        }
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    fn sample(peer: PeerSeen) -> Sample {
        Sample {
            threads_fit: true,
            spun_ns: 0,
            idle_ns: 0,
            peer,
            woke_peer: false,
            machine_busy: false,
            apart: false,
            spare_cpu: true,
        }
    }
    fn fresh(same_cpu: bool) -> PeerSeen {
        PeerSeen::Awake {
            age_ns: 2 * US,
            same_cpu,
        }
    }
    fn stale() -> PeerSeen {
        PeerSeen::Awake {
            age_ns: 400 * US,
            same_cpu: false,
        }
    }

    #[test]
    fn spins_while_the_peer_beats_on_another_cpu() {
        let mut s = sample(fresh(false));
        assert_eq!(decide(&s), Verdict::Spin(Reason::PeerOnCpu));
        // Long without progress, but the peer still runs: keep spinning...
        s.idle_ns = 900 * US;
        s.spun_ns = 900 * US;
        assert_eq!(decide(&s), Verdict::Spin(Reason::PeerOnCpu));
        // ... up to the cap.
        s.spun_ns = MAX_SPIN.as_nanos() as u64;
        assert_eq!(decide(&s), Verdict::Sleep(Reason::SpinCap));
    }

    #[test]
    fn never_spins_against_a_peer_on_our_cpu() {
        assert_eq!(
            decide(&sample(fresh(true))),
            Verdict::Sleep(Reason::PeerOnOurCpu)
        );
    }

    #[test]
    fn a_descheduled_peer_costs_one_grace_period() {
        let mut s = sample(stale());
        s.idle_ns = 10 * US;
        assert_eq!(decide(&s), Verdict::Spin(Reason::PeerWorking));
        s.idle_ns = PEER_GRACE.as_nanos() as u64;
        assert_eq!(decide(&s), Verdict::Sleep(Reason::PeerOffCpu));
        // A peer that has never beaten is treated the same way.
        s.peer = PeerSeen::Awake {
            age_ns: u64::MAX,
            same_cpu: false,
        };
        assert_eq!(decide(&s), Verdict::Sleep(Reason::PeerOffCpu));
    }

    #[test]
    fn an_asleep_peer_is_waited_for_only_right_after_waking_it() {
        let mut s = sample(PeerSeen::Asleep);
        assert_eq!(decide(&s), Verdict::Sleep(Reason::PeerAsleep));
        s.woke_peer = true;
        assert_eq!(decide(&s), Verdict::Spin(Reason::WakingPeer));
        s.spun_ns = WAKE_SPIN.as_nanos() as u64;
        assert_eq!(decide(&s), Verdict::Sleep(Reason::PeerAsleep));
    }

    #[test]
    fn a_full_machine_stops_the_wake_spin_unless_the_ends_are_apart() {
        let mut s = sample(PeerSeen::Asleep);
        s.woke_peer = true;
        s.machine_busy = true;
        assert_eq!(decide(&s), Verdict::Sleep(Reason::PeerAsleep));
        s.apart = true;
        assert_eq!(decide(&s), Verdict::Spin(Reason::WakingPeer));
    }

    #[test]
    fn no_wake_spin_when_the_woken_peer_needs_our_cpu() {
        // Both ends pinned to one CPU: the peer we woke runs only when we
        // stop, so a wake-up spin would only delay it by WAKE_SPIN.
        let mut s = sample(PeerSeen::Asleep);
        s.woke_peer = true;
        s.spare_cpu = false;
        assert_eq!(decide(&s), Verdict::Sleep(Reason::PeerAsleep));
        s.peer = stale();
        s.idle_ns = PEER_GRACE.as_nanos() as u64;
        assert_eq!(decide(&s), Verdict::Sleep(Reason::PeerOffCpu));
        // Ends placed apart: the woken peer has its own CPU.
        s.apart = true;
        assert_eq!(decide(&s), Verdict::Spin(Reason::WakingPeer));
    }

    #[test]
    fn spare_cpu_counts_the_awake_threads_against_the_runs_cpus() {
        let sleeping = AtomicU32::new(1);
        let one_cpu = Awake {
            sleeping: &sleeping,
            threads: 2,
            cpus: 1,
            apart: false,
        };
        assert!(one_cpu.threads_fit() && !one_cpu.spare_cpu());
        let two_cpus = Awake { cpus: 2, ..one_cpu };
        assert!(two_cpus.spare_cpu());
        sleeping.store(0, Ordering::Relaxed);
        assert!(two_cpus.threads_fit() && !two_cpus.spare_cpu());
    }

    #[test]
    fn more_threads_than_cpus_never_spin() {
        let mut s = sample(fresh(false));
        s.threads_fit = false;
        assert_eq!(decide(&s), Verdict::Sleep(Reason::ThreadsExceedCpus));
    }

    #[test]
    fn load_history_needs_a_majority_not_one_sample() {
        let mut h = LoadHistory::default();
        assert!(!h.busy() && h.is_empty());
        // A run's first sample sees its own threads starting: busy ...
        h.push(true);
        assert!(h.busy());
        // ... and the next ones do not: the verdict follows the majority.
        h.push(false);
        assert!(!h.busy(), "a tie is not busy");
        h.push(false);
        assert!(!h.busy());
        for _ in 0..8 {
            h.push(true);
        }
        assert!(h.busy());
        assert_eq!((h.len(), h.busy_samples()), (8, 8));
        // Back to quiet: five quiet samples out of the last eight.
        for _ in 0..5 {
            h.push(false);
        }
        assert!(!h.busy());
        assert_eq!(h.busy_samples(), 3);
    }

    #[test]
    fn loadavg_running_field() {
        assert_eq!(
            parse_loadavg_running(b"1.86 1.65 1.62 3/105 27402\n"),
            Some(3)
        );
        assert_eq!(parse_loadavg_running(b"garbage"), None);
        assert_eq!(parse_loadavg_running(b""), None);
    }

    #[test]
    fn stats_describe_the_outcome() {
        let mut s = WaitStats {
            waits: 200,
            spun: 150,
            ..WaitStats::default()
        };
        s.slept[Reason::PeerOffCpu.slot()] = 40;
        s.slept[Reason::PeerAsleep.slot()] = 10;
        let mut t = WaitStats::default();
        t.add(&s);
        assert_eq!(t, s);
        assert_eq!(s.sleeps(), 50);
        let d = s.describe();
        assert!(d.contains("75.0% of 200 waits"), "{d}");
        assert!(d.contains("peer descheduled 40"), "{d}");
        assert!(d.contains("peer asleep 10"), "{d}");
    }
}
