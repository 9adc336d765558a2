//! What the generator offers and when: the rate (pps or a share of a link
//! speed), the arrival process (constant bit rate or Poisson), bursts of N
//! frames at that rate, frame sizes (fixed or IMIX), flows, and the
//! absolute departure schedule on the TSC.
//!
//! The schedule is absolute: burst k is due at `start + offset(k)` where
//! the offsets are fixed before the run (CBR: k·N/rate; Poisson: the sum
//! of exponential gaps of mean N/rate from a seeded generator), so a late
//! send never moves the bursts after it. The generator sleeps while a
//! burst is more than its learned guard away (at most [`SPIN_NS`]) and
//! busy-waits the rest on the TSC.

use super::SpecError;
use serde::Serialize;

/// The most the generator busy-waits before a departure: the ceiling of
/// its learned guard ([`commbench_core::delay::WakeGuard`]: the worst
/// recent timer overshoot plus 2 µs, at least 5 µs). The guard tracks how
/// late this host wakes a sleeping thread: 16 µs on a quiet VM with 1 ns
/// timer slack, ~100 µs on the same VM with a busy neighbour, where a
/// fixed 30 µs window left the generator 10–30 µs late at the median and
/// its lag p99 at 0.2–2.7 ms. A spinning thread on a shared CPU is
/// preempted for whole time slices (200 µs of spinning at 10 kpps lagged
/// 3.5 ms at p99 and used 0.86 CPU-s per second), hence a ceiling.
pub const SPIN_NS: u64 = 200_000;
/// The guard before the first overshoot is measured.
pub const SPIN_INITIAL_NS: f64 = 30_000.0;

/// How the generator's thread is scheduled while it paces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GenPriority {
    /// Real-time when the generator has a CPU of its own (no other role
    /// placed on it), normal otherwise.
    #[default]
    Auto,
    /// Real-time (SCHED_FIFO) in spans of [`RT_ON`], with [`RT_OFF`]
    /// normal between them.
    Realtime,
    /// A normal thread (SCHED_OTHER) throughout.
    Normal,
}

impl GenPriority {
    /// Parses `auto`, `realtime` or `normal`.
    pub fn parse(s: &str) -> Result<Self, SpecError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(GenPriority::Auto),
            "realtime" => Ok(GenPriority::Realtime),
            "normal" => Ok(GenPriority::Normal),
            _ => Err(SpecError::GenPriority(s.to_owned())),
        }
    }
}

/// A real-time span of the paced generator. A normal thread shares its
/// CPU with whatever else the host runs there: on two vCPUs with another
/// program's build beside it, the generator at 140 kpps waited 17-31 ms
/// per second for its CPU and its lag p99 was 1-6 ms in 3 of 8 trials;
/// SCHED_FIFO runs it ahead of every normal thread. The span is bounded
/// because the kernel lets a real-time thread hold a CPU for at most
/// 950 ms of each second (`sched_rt_runtime_us`, or the fair server of
/// newer kernels) and then runs the normal threads it held off for the
/// rest, a 50 ms pause; stepping down for [`RT_OFF`] of its own accord
/// gives them that time in normal slices instead.
pub const RT_ON: std::time::Duration = std::time::Duration::from_millis(900);
/// The normal span between two real-time ones (see [`RT_ON`]).
pub const RT_OFF: std::time::Duration = std::time::Duration::from_millis(100);

/// The generator's real-time spans over a paced run: real-time for
/// `on` ticks from the start, normal for `off`, and again.
#[derive(Debug, Clone, Copy)]
pub struct RtSpans {
    on: u64,
    period: u64,
}

impl RtSpans {
    /// Spans of `on` and `off` ticks.
    pub fn new(on: u64, off: u64) -> Self {
        RtSpans {
            on,
            period: on.saturating_add(off).max(1),
        }
    }

    /// Whether the generator runs real-time `elapsed` ticks after its
    /// first departure was due.
    #[inline]
    pub fn realtime_at(&self, elapsed: u64) -> bool {
        elapsed % self.period < self.on
    }
}

/// Ethernet's per-frame overhead on the wire besides the frame: preamble,
/// start delimiter and the inter-frame gap.
pub const WIRE_OVERHEAD: u32 = 20;

/// A rate: frames per second, or a share of a link speed at the frame size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Pps(f64),
    /// Percent of `link_bps` at the mean frame size.
    LinkPct {
        pct: f64,
        link_bps: f64,
    },
}

impl Rate {
    /// Frames per second at `mean_size` B (with FCS).
    pub fn pps(&self, mean_size: f64) -> f64 {
        match *self {
            Rate::Pps(p) => p,
            Rate::LinkPct { pct, link_bps } => {
                link_bps * pct / 100.0 / ((mean_size + f64::from(WIRE_OVERHEAD)) * 8.0)
            }
        }
    }
}

/// Parses `100000`, `1.5M`, `250k`, `2Mpps`, or `50%` (of `link_bps`).
pub fn parse_rate(s: &str, link_bps: f64) -> Result<Rate, SpecError> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let pct: f64 = p.trim().parse().map_err(|_| SpecError::RatePercent {
            rate: s.to_owned(),
            pct: p.to_owned(),
        })?;
        if !(pct > 0.0 && pct <= 100.0) {
            return Err(SpecError::RateShare(s.to_owned()));
        }
        return Ok(Rate::LinkPct { pct, link_bps });
    }
    let t = t.strip_suffix("pps").unwrap_or(t);
    let (num, k) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| SpecError::NotARate(s.to_owned()))?;
    let pps = v * k;
    if !(1.0..=1e9).contains(&pps) {
        return Err(SpecError::RateRange(s.to_owned()));
    }
    Ok(Rate::Pps(pps))
}

/// Arrival process of the bursts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    Cbr,
    Poisson,
}

impl Arrivals {
    /// Parses `cbr` or `poisson`.
    pub fn parse(s: &str) -> Result<Self, SpecError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cbr" => Ok(Arrivals::Cbr),
            "poisson" => Ok(Arrivals::Poisson),
            _ => Err(SpecError::Arrivals(s.to_owned())),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Arrivals::Cbr => "cbr",
            Arrivals::Poisson => "poisson",
        }
    }
}

/// Frame sizes, cycled frame by frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sizes {
    pub name: String,
    /// The repeating pattern of sizes (with FCS).
    pub pattern: Vec<u32>,
}

/// The simple IMIX (7 × 64 B : 4 × 594 B : 1 × 1518 B), interleaved.
pub const IMIX: [u32; 12] = [64, 594, 64, 64, 1518, 64, 594, 64, 64, 594, 64, 594];

impl Sizes {
    pub fn fixed(size: u32) -> Self {
        Sizes {
            name: size.to_string(),
            pattern: vec![size],
        }
    }
    pub fn imix() -> Self {
        Sizes {
            name: "imix".to_owned(),
            pattern: IMIX.to_vec(),
        }
    }
    pub fn mean(&self) -> f64 {
        self.pattern.iter().map(|&s| f64::from(s)).sum::<f64>() / self.pattern.len() as f64
    }
    /// Distinct sizes, ascending.
    pub fn distinct(&self) -> Vec<u32> {
        let mut v = self.pattern.clone();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Parses `64`, `1518` or `imix`.
pub fn parse_sizes(s: &str) -> Result<Sizes, SpecError> {
    if s.eq_ignore_ascii_case("imix") {
        return Ok(Sizes::imix());
    }
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| SpecError::NotASize(s.to_owned()))?;
    if !crate::SIZE_RANGE.contains(&v) {
        return Err(SpecError::SizeRange(v));
    }
    Ok(Sizes::fixed(v))
}

/// xorshift64*: the Poisson schedule's random numbers (seeded, so a
/// schedule can be repeated exactly).
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        XorShift(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

/// The departure offsets of the bursts, in TSC ticks from the start.
#[derive(Debug, Clone)]
pub struct Schedule {
    arrivals: Arrivals,
    /// Ticks between bursts (mean, for Poisson).
    gap_ticks: f64,
    next_offset: f64,
    rng: XorShift,
}

impl Schedule {
    /// Bursts of `burst` frames at `pps` on a `hz` clock.
    pub fn new(arrivals: Arrivals, pps: f64, burst: u32, hz: f64, seed: u64) -> Self {
        Schedule {
            arrivals,
            gap_ticks: hz * f64::from(burst) / pps,
            next_offset: 0.0,
            rng: XorShift::new(seed),
        }
    }

    /// The next burst's offset from the start, ticks, without taking it.
    #[inline]
    pub fn peek_offset(&self) -> u64 {
        self.next_offset as u64
    }

    /// The next burst's offset from the start, ticks.
    #[inline]
    pub fn next_offset(&mut self) -> u64 {
        let o = self.next_offset;
        self.next_offset += match self.arrivals {
            Arrivals::Cbr => self.gap_ticks,
            Arrivals::Poisson => -self.rng.unit().ln() * self.gap_ticks,
        };
        o as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_in_pps_and_link_share() {
        assert_eq!(parse_rate("100000", 10e9), Ok(Rate::Pps(100_000.0)));
        assert_eq!(parse_rate("250k", 10e9), Ok(Rate::Pps(250_000.0)));
        assert_eq!(parse_rate("1.5Mpps", 10e9), Ok(Rate::Pps(1_500_000.0)));
        // 100% of 10 GbE at 64 B is 14.88 Mpps.
        let r = parse_rate("100%", 10e9).unwrap();
        assert!((r.pps(64.0) - 14_880_952.4).abs() < 1.0);
        assert!(parse_rate("0%", 10e9)
            .unwrap_err()
            .to_string()
            .contains("(0, 100]"));
        assert!(parse_rate("fast", 10e9)
            .unwrap_err()
            .to_string()
            .contains("not a rate"));
        assert!(parse_rate("0", 10e9)
            .unwrap_err()
            .to_string()
            .contains("outside"));
    }

    #[test]
    fn arrivals_and_generator_priorities_parse_and_say_what_to_give() {
        assert_eq!(GenPriority::parse("auto"), Ok(GenPriority::Auto));
        assert_eq!(GenPriority::parse("Realtime"), Ok(GenPriority::Realtime));
        assert_eq!(GenPriority::parse("normal"), Ok(GenPriority::Normal));
        assert_eq!(Arrivals::parse("Poisson"), Ok(Arrivals::Poisson));
        assert_eq!(Arrivals::parse("cbr"), Ok(Arrivals::Cbr));
        let e = Arrivals::parse("burst").unwrap_err().to_string();
        assert!(e.contains("'burst'") && e.contains("cbr or poisson"), "{e}");
        let e = GenPriority::parse("fifo").unwrap_err().to_string();
        assert!(
            e.contains("'fifo'") && e.contains("auto, realtime or normal"),
            "{e}"
        );
    }

    #[test]
    fn the_generator_is_realtime_for_on_then_normal_for_off() {
        let s = RtSpans::new(900, 100);
        assert!(s.realtime_at(0));
        assert!(s.realtime_at(899));
        assert!(!s.realtime_at(900));
        assert!(!s.realtime_at(999));
        assert!(s.realtime_at(1000));
        assert!(!s.realtime_at(1950));
        // Never real-time with no span; always with no pause.
        assert!(!RtSpans::new(0, 100).realtime_at(0));
        assert!((0..10_000).all(|t| RtSpans::new(900, 0).realtime_at(t)));
        // The kernel's bound: in any second, at most RT_ON of it.
        let s = RtSpans::new(RT_ON.as_micros() as u64, RT_OFF.as_micros() as u64);
        for start in (0..2_000_000).step_by(37_017) {
            let rt = (start..start + 1_000_000)
                .step_by(100)
                .filter(|&t| s.realtime_at(t))
                .count();
            assert!(rt * 100 <= 900_000 + 100, "{start}: {rt}");
        }
    }

    #[test]
    fn imix_mean_and_sizes() {
        let m = Sizes::imix();
        assert_eq!(m.distinct(), vec![64, 594, 1518]);
        assert_eq!(m.pattern.iter().filter(|&&s| s == 64).count(), 7);
        assert!(parse_sizes("63")
            .unwrap_err()
            .to_string()
            .contains("outside"));
        assert_eq!(parse_sizes("IMIX").unwrap().name, "imix");
    }

    #[test]
    fn cbr_is_absolute_and_poisson_has_the_mean_gap() {
        let mut s = Schedule::new(Arrivals::Cbr, 1000.0, 1, 1e9, 1);
        let v: Vec<u64> = (0..4).map(|_| s.next_offset()).collect();
        assert_eq!(v, vec![0, 1_000_000, 2_000_000, 3_000_000]);
        let mut p = Schedule::new(Arrivals::Poisson, 1000.0, 4, 1e9, 7);
        let n = 100_000;
        let mut last = 0;
        for _ in 0..n {
            let o = p.next_offset();
            assert!(o >= last);
            last = o;
        }
        // Mean gap 4 ms: within 2% over 100k gaps (sd/mean = 1/sqrt(n)).
        let mean = last as f64 / (n - 1) as f64;
        assert!((mean / 4e6 - 1.0).abs() < 0.02, "{mean}");
    }
}
