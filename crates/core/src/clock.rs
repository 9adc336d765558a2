//! The clock every lab measures with: the TSC read three ways (plain
//! `rdtsc`, `rdtscp`, `lfence; rdtsc`), its frequency calibrated against
//! `CLOCK_MONOTONIC_RAW`, and `clock_gettime` as the fallback when the TSC is
//! absent or not invariant.
//!
//! Invariants: [`tsc()`] is calibrated once per process and never changes;
//! tick→ns conversion uses that one frequency. On the VMs this tool was built
//! on, cpuid leaves 0x15/0x16 are empty, so the frequency is always measured
//! (seed: dpdk-vnf-evaluation, where `rte_get_tsc_hz()` was trusted blindly),
//! and the TSC advances in coarse steps (10 ns here): the measured step is
//! exposed as [`Tsc::granularity_ticks`] so nobody reads a 3-tick delta as
//! real resolution.

use serde::Serialize;
use std::sync::OnceLock;
use std::time::Duration;

/// Reads the time-stamp counter (not serialising: may be reordered with
/// surrounding loads).
#[inline(always)]
#[allow(unsafe_code)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no memory effects; every x86_64 CPU has it.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        now_ns()
    }
}

/// Reads the TSC with `rdtscp`, which waits for earlier instructions to
/// retire before reading.
#[inline(always)]
#[allow(unsafe_code)]
pub fn rdtscp() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut aux = 0u32;
        // SAFETY: rdtscp only writes the aux out-parameter, a valid local.
        unsafe { core::arch::x86_64::__rdtscp(&mut aux) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        now_ns()
    }
}

/// `lfence; rdtsc`: the read happens after all earlier instructions have
/// executed (Intel SDM recommendation for the start of a timed section).
#[inline(always)]
#[allow(unsafe_code)]
pub fn rdtsc_fenced() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: lfence and rdtsc have no memory effects.
        unsafe {
            core::arch::x86_64::_mm_lfence();
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        now_ns()
    }
}

/// Nanoseconds of `CLOCK_MONOTONIC_RAW` (not slewed by NTP).
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_RAW)
}

/// Nanoseconds of `CLOCK_MONOTONIC`.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds of `CLOCK_REALTIME` (wall-clock time since the epoch; the
/// clock of the kernel's packet timestamps).
#[inline]
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

#[allow(unsafe_code)]
fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How the TSC frequency was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HzSource {
    /// cpuid leaf 0x15 (crystal ratio) reported it.
    Cpuid15,
    /// Measured against CLOCK_MONOTONIC_RAW.
    Calibrated,
    /// No usable TSC: timing falls back to clock_gettime (1 tick = 1 ns).
    ClockGettime,
}

/// What the CPU says about TSC invariance.
#[derive(Debug, Clone, Serialize)]
pub struct Invariance {
    /// `constant_tsc` in /proc/cpuinfo flags.
    pub constant_tsc: bool,
    /// `nonstop_tsc` in /proc/cpuinfo flags.
    pub nonstop_tsc: bool,
    /// cpuid 0x80000007 EDX bit 8 (invariant TSC).
    pub cpuid_invariant: bool,
}

impl Invariance {
    /// True when the TSC can be used as a wall clock across frequency and
    /// idle changes.
    pub fn usable(&self) -> bool {
        self.cpuid_invariant || (self.constant_tsc && self.nonstop_tsc)
    }
}

/// The calibrated time-stamp counter.
#[derive(Debug, Clone, Serialize)]
pub struct Tsc {
    hz: f64,
    /// How the frequency was found.
    pub source: HzSource,
    /// Invariance flags.
    pub invariance: Invariance,
    /// Smallest non-zero difference seen between back-to-back reads, in
    /// ticks (the TSC here steps in 10 ns increments).
    pub granularity_ticks: u64,
}

impl Tsc {
    /// Ticks per second.
    pub fn hz(&self) -> f64 {
        self.hz
    }
    /// Converts a tick count to nanoseconds.
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> f64 {
        ticks as f64 * 1e9 / self.hz
    }
    /// Converts nanoseconds to ticks (rounded to nearest).
    #[inline]
    pub fn ns_to_ticks(&self, ns: f64) -> u64 {
        (ns * self.hz / 1e9).round().max(0.0) as u64
    }
    /// The granularity in nanoseconds.
    pub fn granularity_ns(&self) -> f64 {
        self.ticks_to_ns(self.granularity_ticks)
    }
    /// Reads the counter this clock is based on (TSC, or clock_gettime ns in
    /// fallback mode).
    #[inline(always)]
    pub fn read(&self) -> u64 {
        if self.source == HzSource::ClockGettime {
            now_ns()
        } else {
            rdtsc()
        }
    }
}

static TSC: OnceLock<Tsc> = OnceLock::new();

/// The process-wide calibrated TSC (calibrates on first use, ~50 ms).
pub fn tsc() -> &'static Tsc {
    TSC.get_or_init(calibrate)
}

fn cpuinfo_flags() -> Vec<String> {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("flags"))
                .map(|l| l.split_whitespace().map(str::to_owned).collect())
        })
        .unwrap_or_default()
}

/// Reads the invariance flags from /proc/cpuinfo and cpuid.
pub fn invariance() -> Invariance {
    let flags = cpuinfo_flags();
    let has = |f: &str| flags.iter().any(|x| x == f);
    Invariance {
        constant_tsc: has("constant_tsc"),
        nonstop_tsc: has("nonstop_tsc"),
        cpuid_invariant: cpuid_invariant_tsc(),
    }
}

#[cfg(target_arch = "x86_64")]
fn cpuid_invariant_tsc() -> bool {
    use core::arch::x86_64::__cpuid;
    let max_ext = __cpuid(0x8000_0000).eax;
    if max_ext < 0x8000_0007 {
        return false;
    }
    let r = __cpuid(0x8000_0007);
    r.edx & (1 << 8) != 0
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_invariant_tsc() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn cpuid_hz() -> Option<f64> {
    use core::arch::x86_64::__cpuid;
    let max = __cpuid(0).eax;
    if max < 0x15 {
        return None;
    }
    let r = __cpuid(0x15);
    if r.eax == 0 || r.ebx == 0 || r.ecx == 0 {
        return None;
    }
    Some(r.ecx as f64 * r.ebx as f64 / r.eax as f64)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hz() -> Option<f64> {
    None
}

fn measure_granularity() -> u64 {
    let mut best = u64::MAX;
    for _ in 0..2000 {
        let a = rdtsc();
        let mut b = rdtsc();
        while b == a {
            b = rdtsc();
        }
        best = best.min(b - a);
    }
    best
}

/// Measures the TSC rate against CLOCK_MONOTONIC_RAW over several short
/// windows and takes the median, so one preemption does not skew it.
fn calibrated_hz() -> f64 {
    let mut rates = Vec::with_capacity(5);
    for _ in 0..5 {
        let (t0, c0) = paired_read();
        std::thread::sleep(Duration::from_millis(10));
        let (t1, c1) = paired_read();
        if t1 > t0 && c1 > c0 {
            rates.push((c1 - c0) as f64 * 1e9 / (t1 - t0) as f64);
        }
    }
    rates.sort_by(f64::total_cmp);
    rates.get(rates.len() / 2).copied().unwrap_or(0.0)
}

/// A (clock ns, tsc) pair read as close together as possible: the pair with
/// the shortest bracketing TSC interval out of a few tries.
fn paired_read() -> (u64, u64) {
    let mut best = (0, 0, u64::MAX);
    for _ in 0..8 {
        let a = rdtsc_fenced();
        let t = now_ns();
        let b = rdtsc_fenced();
        if b - a < best.2 {
            best = (t, a + (b - a) / 2, b - a);
        }
    }
    (best.0, best.1)
}

fn calibrate() -> Tsc {
    let invariance = invariance();
    let usable = cfg!(target_arch = "x86_64") && invariance.usable();
    if !usable {
        return Tsc {
            hz: 1e9,
            source: HzSource::ClockGettime,
            invariance,
            granularity_ticks: 1,
        };
    }
    let (hz, source) = match cpuid_hz() {
        Some(hz) => (hz, HzSource::Cpuid15),
        None => (calibrated_hz(), HzSource::Calibrated),
    };
    if hz.is_nan() || hz <= 1e6 {
        return Tsc {
            hz: 1e9,
            source: HzSource::ClockGettime,
            invariance,
            granularity_ticks: 1,
        };
    }
    Tsc {
        hz,
        source,
        invariance,
        granularity_ticks: measure_granularity(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_is_monotonic_and_calibrated() {
        let t = tsc();
        assert!(t.hz() > 1e6, "hz {}", t.hz());
        let a = t.read();
        let b = t.read();
        assert!(b >= a);
        assert!(t.granularity_ticks >= 1);
    }

    #[test]
    fn tick_conversion_round_trips() {
        let t = tsc();
        let ticks = t.ns_to_ticks(1_000_000.0);
        let ns = t.ticks_to_ns(ticks);
        assert!((ns - 1_000_000.0).abs() < 1.0, "{ns}");
    }

    #[test]
    fn tsc_agrees_with_monotonic_raw() {
        // Not a speed assertion: a 20 ms interval measured by both clocks
        // must agree to within the scheduler's noise (10%).
        let t = tsc();
        let (n0, c0) = (now_ns(), t.read());
        std::thread::sleep(Duration::from_millis(20));
        let (n1, c1) = (now_ns(), t.read());
        let by_tsc = t.ticks_to_ns(c1 - c0);
        let by_clock = (n1 - n0) as f64;
        assert!(
            (by_tsc / by_clock - 1.0).abs() < 0.1,
            "{by_tsc} vs {by_clock}"
        );
    }
}

/// Cost of one way of reading the time.
#[derive(Debug, Clone, Serialize)]
pub struct ReadCost {
    /// The way of reading (`rdtsc`, `rdtscp`, `lfence_rdtsc`,
    /// `clock_gettime_monotonic`, ...).
    pub method: &'static str,
    /// Per-read cost over batches of 1000 reads.
    pub ns: crate::stats::Summary,
    /// Median cost of one read in TSC ticks.
    pub ticks_median: f64,
}

/// Measures rdtsc, rdtscp, lfence+rdtsc and clock_gettime (MONOTONIC,
/// MONOTONIC_RAW) with the section timer: `batches` batches of 1000 reads.
pub fn read_costs(batches: usize) -> Vec<ReadCost> {
    use crate::timer::SectionTimer;
    let t = tsc();
    let mut sink = 0u64;
    let mut run = |method: &'static str, f: &dyn Fn() -> u64| {
        let mut st = SectionTimer::new(1000, batches);
        for _ in 0..batches {
            st.time_batch(|| sink = sink.wrapping_add(std::hint::black_box(f())));
        }
        let ns = st.summary_ns();
        ReadCost {
            method,
            ticks_median: ns.median * t.hz() / 1e9,
            ns,
        }
    };
    let v = vec![
        run("rdtsc", &rdtsc),
        run("rdtscp", &rdtscp),
        run("lfence_rdtsc", &rdtsc_fenced),
        run("clock_gettime_monotonic", &monotonic_ns),
        run("clock_gettime_monotonic_raw", &now_ns),
    ];
    std::hint::black_box(sink);
    v
}
