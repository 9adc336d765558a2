//! Delays for injecting per-packet work (seed: dpdk-vnf-evaluation), and the
//! measurement of how accurate they are.
//!
//! Three ways to wait: a TSC busy-wait against a calibrated frequency (the
//! accurate one), a volatile empty loop calibrated once (the seed's
//! `dirty_looped_delay_10ns`, which hard-coded 9 iterations per 10 ns; here
//! the iterations per ns are measured), and nanosleep (which on this kernel
//! never returns in under ~66 µs with the default timer slack). Each delay
//! is measured sample by sample with fenced TSC reads, so the report has a
//! median and p99 and the share of samples that were preempted, not one mean.

use crate::clock::{rdtsc, rdtsc_fenced, tsc};
use crate::stats::Summary;
use crate::timer::preempted_share;
use serde::Serialize;

/// Busy-waits until the TSC reaches `deadline` (ticks).
#[inline(always)]
pub fn spin_until(deadline: u64) {
    while rdtsc() < deadline {
        std::hint::spin_loop();
    }
}

/// Busy-waits `ticks` TSC ticks.
#[inline(always)]
pub fn tsc_delay_ticks(ticks: u64) {
    let start = rdtsc();
    spin_until(start + ticks);
}

/// A TSC busy-wait whose fixed cost (reading the start time, leaving the
/// loop) is measured once and subtracted, the way DPDK's `rte_delay_us`
/// relies on a calibrated TSC rate — but down to tens of ns.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SpinDelay {
    /// Smallest cost of a zero-length busy-wait, in ticks (the median
    /// read cost subtracted: an estimate that errs low).
    pub fixed_ticks: u64,
}

impl SpinDelay {
    /// Measures the fixed cost as the smallest of 2001 zero-length waits
    /// (timed with fenced reads, the reads' median cost subtracted). The
    /// smallest, not the median: subtracting more than a wait's own fixed
    /// cost makes it return early (a 1 µs wait read 971 ns at its minimum
    /// with the median), and a busy-wait overshoots, never undershoots.
    pub fn calibrate() -> Self {
        let read = read_overhead_ticks();
        let fixed = (0..2001)
            .map(|_| {
                let a = rdtsc_fenced();
                tsc_delay_ticks(0);
                let b = rdtsc_fenced();
                (b - a).saturating_sub(read)
            })
            .min()
            .unwrap_or(0);
        SpinDelay { fixed_ticks: fixed }
    }
    /// Busy-waits `ticks` in total, fixed cost included.
    #[inline(always)]
    pub fn delay_ticks(&self, ticks: u64) {
        tsc_delay_ticks(ticks.saturating_sub(self.fixed_ticks));
    }
    /// Busy-waits `ns` nanoseconds in total.
    #[inline]
    pub fn delay_ns(&self, ns: f64) {
        self.delay_ticks(tsc().ns_to_ticks(ns));
    }
}

/// Median cost of two back-to-back fenced TSC reads, in ticks.
pub fn read_overhead_ticks() -> u64 {
    let v = read_overheads();
    v[v.len() / 2]
}

/// Smallest cost of two back-to-back fenced TSC reads seen in 1001 tries,
/// in ticks: what the reads around a timed section cost at least.
pub fn read_overhead_min_ticks() -> u64 {
    read_overheads()[0]
}

fn read_overheads() -> Vec<u64> {
    let mut v: Vec<u64> = (0..1001)
        .map(|_| {
            let a = rdtsc_fenced();
            let b = rdtsc_fenced();
            b - a
        })
        .collect();
    v.sort_unstable();
    v
}

/// Sleeps with nanosleep.
#[allow(unsafe_code)]
pub fn nanosleep_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is valid; a null remainder is allowed.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// Runs `n` iterations of a loop whose counter lives in memory (volatile),
/// so the compiler cannot fold it away.
#[inline(never)]
#[allow(unsafe_code)]
pub fn volatile_loop(n: u64) {
    let mut c = n;
    let p = &mut c as *mut u64;
    // SAFETY: p points to a live local for the whole loop.
    unsafe {
        while std::ptr::read_volatile(p) > 0 {
            std::ptr::write_volatile(p, std::ptr::read_volatile(p) - 1);
        }
    }
}

/// The seed's empty-loop delay with a measured iterations-per-ns rate.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct VolatileLoop {
    /// Loop iterations per nanosecond, measured by [`VolatileLoop::calibrate`].
    pub iters_per_ns: f64,
}

impl VolatileLoop {
    /// Calibrates once: the median rate over several 1 M-iteration runs.
    pub fn calibrate() -> Self {
        let t = tsc();
        let n = 1_000_000u64;
        let mut rates: Vec<f64> = (0..7)
            .map(|_| {
                let a = rdtsc_fenced();
                volatile_loop(n);
                let b = rdtsc_fenced();
                n as f64 / t.ticks_to_ns(b - a).max(1.0)
            })
            .collect();
        rates.sort_by(f64::total_cmp);
        VolatileLoop {
            iters_per_ns: rates[rates.len() / 2],
        }
    }
    /// Waits about `ns` nanoseconds.
    #[inline]
    pub fn delay_ns(&self, ns: f64) {
        volatile_loop((ns * self.iters_per_ns).round() as u64);
    }
}

/// How a delay is produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DelayMethod {
    /// Spin on the TSC until the deadline ([`SpinDelay`]).
    TscSpin,
    /// Count down a volatile loop ([`VolatileLoop`], the seed's delay).
    VolatileLoop,
    /// Sleep in `nanosleep` ([`nanosleep_ns`]).
    Nanosleep,
}

impl DelayMethod {
    /// The method's name in records (`tsc_spin`, `volatile_loop`, `nanosleep`).
    pub fn name(&self) -> &'static str {
        match self {
            DelayMethod::TscSpin => "tsc_spin",
            DelayMethod::VolatileLoop => "volatile_loop",
            DelayMethod::Nanosleep => "nanosleep",
        }
    }
}

/// Requested delays of the default table (ns).
pub const DEFAULT_REQUESTS_NS: [u64; 8] = [10, 20, 50, 100, 1_000, 2_000, 4_000, 10_000];

/// Accuracy of one method at one requested delay.
#[derive(Debug, Clone, Serialize)]
pub struct DelayAccuracy {
    /// How the delay was produced.
    pub method: DelayMethod,
    /// The requested delay, ns.
    pub requested_ns: u64,
    /// How many delays were timed.
    pub samples: usize,
    /// Measured delay, ns (cost of the timing reads subtracted).
    pub measured: Summary,
    /// median / requested − 1.
    pub median_error: f64,
    /// Share of samples that were preempted (the thread lost its CPU during the
    /// delay).
    pub preempted_share: f64,
}

/// The calibrated delay implementations, measured once.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Delays {
    /// The TSC spin, with its fixed cost.
    pub spin: SpinDelay,
    /// The volatile loop, with its rate.
    pub vloop: VolatileLoop,
}

impl Delays {
    /// Calibrates both (takes a few milliseconds).
    pub fn calibrate() -> Self {
        Delays {
            spin: SpinDelay::calibrate(),
            vloop: VolatileLoop::calibrate(),
        }
    }
}

/// Measures `samples` delays of `requested_ns` with `method`.
pub fn measure(
    method: DelayMethod,
    requested_ns: u64,
    samples: usize,
    delays: &Delays,
) -> DelayAccuracy {
    let t = tsc();
    // The reads' smallest cost, not their median: a sample is the time
    // between two fenced reads less what those reads cost at least, so a
    // busy-wait (which never returns before its own deadline) is never
    // reported as shorter than it was. Subtracting the median made a 1 µs
    // spin read 991 ns, and 2 µs read 1993 ns in one sample of 200.
    let overhead = read_overhead_min_ticks();
    let ticks = t.ns_to_ticks(requested_ns as f64);
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let a = rdtsc_fenced();
        match method {
            DelayMethod::TscSpin => delays.spin.delay_ticks(ticks),
            DelayMethod::VolatileLoop => delays.vloop.delay_ns(requested_ns as f64),
            DelayMethod::Nanosleep => nanosleep_ns(requested_ns),
        }
        let b = rdtsc_fenced();
        out.push(t.ticks_to_ns(b.saturating_sub(a).saturating_sub(overhead)));
    }
    let measured = Summary::from_samples(&out);
    DelayAccuracy {
        method,
        requested_ns,
        samples,
        median_error: measured.median / requested_ns as f64 - 1.0,
        preempted_share: preempted_share(&out),
        measured,
    }
}

/// Sample count that keeps one measurement near 20 ms of busy time
/// (nanosleep: a fixed 200, each sleeps ≥ 60 µs).
pub fn default_samples(method: DelayMethod, requested_ns: u64) -> usize {
    match method {
        DelayMethod::Nanosleep => 200,
        _ => (20_000_000 / requested_ns.max(100)).clamp(1_000, 100_000) as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_spin_waits_at_least_the_request() {
        // Behaviour, not speed: a busy-wait can overshoot but never return early.
        let a = measure(
            DelayMethod::TscSpin,
            2_000,
            200,
            &Delays {
                spin: SpinDelay { fixed_ticks: 0 },
                vloop: VolatileLoop { iters_per_ns: 1.0 },
            },
        );
        assert_eq!(a.measured.n, 200);
        assert!(
            a.measured.min >= 2_000.0 - tsc().granularity_ns() * 2.0,
            "{:?}",
            a.measured
        );
    }

    #[test]
    fn a_calibrated_spin_never_returns_early() {
        // The product's wait (its fixed cost measured and subtracted), not
        // a bare loop: its smallest sample may not fall below the request
        // by more than the clock's granularity.
        let d = Delays::calibrate();
        for req in [1_000, 2_000] {
            let a = measure(DelayMethod::TscSpin, req, 500, &d);
            assert!(
                a.measured.min >= req as f64 - tsc().granularity_ns() * 2.0,
                "{req} ns: {:?} (fixed cost {} ticks)",
                a.measured,
                d.spin.fixed_ticks
            );
        }
    }

    #[test]
    fn delays_calibrate() {
        let d = Delays::calibrate();
        assert!(d.vloop.iters_per_ns > 0.0 && d.vloop.iters_per_ns.is_finite());
        assert!(d.spin.fixed_ticks < tsc().ns_to_ticks(1e6));
    }

    #[test]
    fn nanosleep_reports_preemption_share() {
        let a = measure(
            DelayMethod::Nanosleep,
            1_000,
            5,
            &Delays {
                spin: SpinDelay { fixed_ticks: 0 },
                vloop: VolatileLoop { iters_per_ns: 1.0 },
            },
        );
        assert_eq!(a.samples, 5);
        assert!((0.0..=1.0).contains(&a.preempted_share));
        assert!(a.measured.min >= 1_000.0 - 50.0);
    }
}

/// How early before a due time a paced loop stops sleeping and starts
/// busy-waiting: the worst of the last [`WakeGuard::SAMPLES`] wake-up
/// overshoots (how late a timed sleep returned past the time asked for),
/// plus a margin, within a floor and a ceiling. All in TSC ticks.
///
/// Both paced generators (mux's open loop, the pipeline's packet tester)
/// use it, so a loop burns CPU only for as long as the kernel's timer is
/// late on this host — 16 µs on a quiet VM, 100 µs and more on a busy
/// one — rather than a fixed window that is too short on one host and
/// wasteful on the other. The ceiling is each user's: an overshoot beyond
/// it is the thread descheduled, which spinning would not have prevented.
#[derive(Debug, Clone)]
pub struct WakeGuard {
    samples: [u64; WakeGuard::SAMPLES],
    next: usize,
    seen: usize,
    margin: u64,
    min: u64,
    max: u64,
    initial: u64,
    guard: u64,
}

/// A [`WakeGuard`]'s bounds, in ns.
#[derive(Debug, Clone, Copy)]
pub struct GuardBounds {
    /// The guard before the first overshoot is measured.
    pub initial_ns: f64,
    /// Added to the worst recent overshoot.
    pub margin_ns: f64,
    /// Least guard: the cost of leaving the sleep and reaching the send.
    pub min_ns: f64,
    /// Most guard.
    pub max_ns: f64,
}

impl WakeGuard {
    /// Overshoots remembered: the guard covers the worst of these, so one
    /// late wake-up raises it for this many sleeps and then falls out.
    pub const SAMPLES: usize = 32;

    /// A guard for a clock of `ticks_per_ns` within `b`.
    pub fn new(ticks_per_ns: f64, b: GuardBounds) -> WakeGuard {
        let t = |ns: f64| (ns * ticks_per_ns).round() as u64;
        let initial = t(b.initial_ns);
        WakeGuard {
            samples: [0; Self::SAMPLES],
            next: 0,
            seen: 0,
            margin: t(b.margin_ns),
            min: t(b.min_ns),
            max: t(b.max_ns),
            initial,
            guard: initial,
        }
    }

    /// The current guard.
    #[inline]
    pub fn ticks(&self) -> u64 {
        self.guard
    }

    /// Records a timed wake-up that returned `overshoot` ticks after the
    /// time it was asked for.
    pub fn record(&mut self, overshoot: u64) {
        self.samples[self.next] = overshoot.min(self.max);
        self.next = (self.next + 1) % Self::SAMPLES;
        self.seen = (self.seen + 1).min(Self::SAMPLES);
        let worst = self.samples[..self.seen].iter().copied().max().unwrap_or(0);
        self.guard = (worst + self.margin).clamp(self.min, self.max);
    }

    /// Overshoots recorded so far (at most [`WakeGuard::SAMPLES`] kept).
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// The guard used before any overshoot was seen.
    pub fn initial(&self) -> u64 {
        self.initial
    }
}

#[cfg(test)]
mod wake_guard_tests {
    use super::*;

    #[test]
    fn wake_guard_covers_recent_overshoots_and_forgets_old_ones() {
        let b = GuardBounds {
            initial_ns: 20_000.0,
            margin_ns: 1_000.0,
            min_ns: 2_000.0,
            max_ns: 50_000.0,
        };
        // One tick per ns.
        let mut g = WakeGuard::new(1.0, b);
        assert_eq!(g.ticks(), g.initial());
        assert_eq!(g.seen(), 0);
        // Quiet wake-ups: the guard falls to the floor.
        for _ in 0..WakeGuard::SAMPLES {
            g.record(100);
        }
        assert_eq!(g.ticks(), 2_000);
        // A 5 µs overshoot: the guard covers it plus the margin.
        g.record(5_000);
        assert_eq!(g.ticks(), 6_000);
        // It stays for SAMPLES wake-ups, then falls out.
        for k in 1..WakeGuard::SAMPLES {
            g.record(300);
            assert_eq!(g.ticks(), 6_000, "after {k} quiet wake-ups");
        }
        g.record(300);
        assert_eq!(g.ticks(), 2_000);
        // A descheduled thread (10 ms late) is capped, not paid for in full.
        g.record(10_000_000);
        assert_eq!(g.ticks(), 50_000);
        assert_eq!(g.seen(), WakeGuard::SAMPLES);
        // Other clock rates scale every bound.
        let g = WakeGuard::new(3.0, b);
        assert_eq!(g.ticks(), 60_000);
    }
}
