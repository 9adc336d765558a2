//! Summary statistics for repeated measurements: raw samples (per-test
//! rates, per-batch timings) and HdrHistogram latency distributions.
//!
//! Invariants: percentiles are monotone (p50 ≤ p90 ≤ … ≤ max) and lie within
//! [min, max]; `stdev` is the *population* standard deviation (cbench's
//! RESULT line uses it); outliers are counted with the modified z-score of
//! Iglewicz and Hoaglin (|0.6745·(x−median)/MAD| > 3.5) and never removed;
//! warm-up and cool-down samples are excluded from the summary but their
//! count and mean are reported beside it. Empty input yields n = 0 and null
//! (NaN) statistics, which JSON output writes as `null`.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Threshold on the modified z-score above which a sample is an outlier.
pub const OUTLIER_Z: f64 = 3.5;

/// Samples left out of a summary, reported so that nothing is silently
/// dropped (iperf3's `--omit`, cbench's warm-up).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Excluded {
    /// Leading samples excluded as warm-up.
    pub warmup: usize,
    /// Mean of the warm-up samples (null when none).
    pub warmup_mean: f64,
    /// Trailing samples excluded as cool-down.
    pub cooldown: usize,
    /// Mean of the cool-down samples (null when none).
    pub cooldown_mean: f64,
}

/// The statistics every lab reports for a set of samples.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Samples summarised.
    pub n: u64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation.
    pub stdev: f64,
    /// Median (the 0.5 quantile).
    pub median: f64,
    /// The 0.5 quantile again, under the percentile ladder's name.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// 99.99th percentile.
    pub p9999: f64,
    /// Samples with a modified z-score above [`OUTLIER_Z`]; null for
    /// histogram summaries, whose raw samples are gone.
    pub outliers: Option<u64>,
    /// Warm-up / cool-down samples left out of the figures above.
    pub excluded: Excluded,
}

/// Linear-interpolation percentile (type 7) of sorted data, `q` in [0, 1].
pub fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = pos.ceil() as usize;
            let frac = pos - lo as f64;
            // Written so that equal neighbours give exactly that value.
            sorted[lo] + (sorted[hi] - sorted[lo]) * frac
        }
    }
}

/// The median of `xs`, which it sorts in place: the middle value, or
/// between the two middle ones as [`percentile_sorted`] interpolates.
/// NaN when `xs` is empty. Values sort in total order, so a NaN is kept
/// (past every number, or before them when its sign is set), not dropped:
/// a caller that wants only finite values filters them first.
pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_unstable_by(f64::total_cmp);
    percentile_sorted(xs, 0.5)
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Population standard deviation, two-pass.
pub fn population_stdev(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64).sqrt()
}

/// Number of samples whose modified z-score exceeds [`OUTLIER_Z`]. With a
/// zero MAD (more than half the samples equal) the mean absolute deviation
/// scaled by 1.2533 stands in, as Iglewicz and Hoaglin suggest.
pub fn count_outliers(sorted: &[f64]) -> u64 {
    if sorted.len() < 3 {
        return 0;
    }
    let med = percentile_sorted(sorted, 0.5);
    let mut dev: Vec<f64> = sorted.iter().map(|x| (x - med).abs()).collect();
    dev.sort_by(f64::total_cmp);
    let mad = percentile_sorted(&dev, 0.5);
    let scale = if mad > 0.0 {
        mad / 0.6745
    } else {
        let meanad = mean(&dev);
        if meanad == 0.0 {
            return 0;
        }
        meanad * 1.253_314
    };
    sorted
        .iter()
        .filter(|x| ((*x - med) / scale).abs() > OUTLIER_Z)
        .count() as u64
}

impl Summary {
    /// The summary of an empty set: n = 0 and every statistic NaN (null).
    pub fn empty() -> Self {
        Summary {
            n: 0,
            min: f64::NAN,
            max: f64::NAN,
            mean: f64::NAN,
            stdev: f64::NAN,
            median: f64::NAN,
            p50: f64::NAN,
            p90: f64::NAN,
            p99: f64::NAN,
            p999: f64::NAN,
            p9999: f64::NAN,
            outliers: Some(0),
            excluded: Excluded::default(),
        }
    }

    /// Summarises all samples (non-finite values are ignored).
    pub fn from_samples(samples: &[f64]) -> Self {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if sorted.is_empty() {
            return Self::empty();
        }
        sorted.sort_by(f64::total_cmp);
        let p = |q| percentile_sorted(&sorted, q);
        Summary {
            n: sorted.len() as u64,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            mean: mean(&sorted),
            stdev: population_stdev(&sorted),
            median: p(0.5),
            p50: p(0.5),
            p90: p(0.9),
            p99: p(0.99),
            p999: p(0.999),
            p9999: p(0.9999),
            outliers: Some(count_outliers(&sorted)),
            excluded: Excluded::default(),
        }
    }

    /// Summarises `samples` without the first `warmup` and the last
    /// `cooldown`, which are reported in [`Summary::excluded`].
    pub fn from_phased(samples: &[f64], warmup: usize, cooldown: usize) -> Self {
        let w = warmup.min(samples.len());
        let c = cooldown.min(samples.len() - w);
        let kept = &samples[w..samples.len() - c];
        let mut s = Self::from_samples(kept);
        s.excluded = Excluded {
            warmup: w,
            warmup_mean: mean(&samples[..w]),
            cooldown: c,
            cooldown_mean: mean(&samples[samples.len() - c..]),
        };
        s
    }

    /// Multiplies every location/scale statistic by `k` (unit change).
    pub fn scaled(&self, k: f64) -> Self {
        let mut s = self.clone();
        for v in [
            &mut s.min,
            &mut s.max,
            &mut s.mean,
            &mut s.stdev,
            &mut s.median,
            &mut s.p50,
            &mut s.p90,
            &mut s.p99,
            &mut s.p999,
            &mut s.p9999,
        ] {
            *v *= k;
        }
        s.excluded.warmup_mean *= k;
        s.excluded.cooldown_mean *= k;
        s
    }
}

/// A latency distribution in nanoseconds (HdrHistogram, 3 significant
/// digits, auto-resizing so no value is ever rejected).
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram (3 significant digits, resizing itself).
    pub fn new() -> Self {
        let mut h = Histogram::new(3).expect("3 significant digits is a valid setting");
        h.auto(true);
        LatencyHistogram { h }
    }
    /// Records one latency.
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        // Auto-resize is on, so recording cannot fail for any u64 ≥ 0.
        let _ = self.h.record(ns);
    }
    /// Records `count` occurrences of one latency.
    #[inline]
    pub fn record_n_ns(&mut self, ns: u64, count: u64) {
        let _ = self.h.record_n(ns, count);
    }
    /// The recorded (value ns, count) pairs, for shipping a histogram from
    /// a child process to its parent ([`LatencyHistogram::record_n_ns`]
    /// rebuilds it; values are bucket representatives, 3 digits exact).
    pub fn recorded(&self) -> Vec<(u64, u64)> {
        self.h
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    }
    /// The histogram in HdrHistogram's compressed V2 encoding (what the
    /// interval log format carries, base64-encoded), for a segment file.
    pub fn hdr(&self) -> &Histogram<u64> {
        &self.h
    }
    /// A histogram decoded from a file, made auto-resizing like every
    /// other so that adding to it never drops a value. Values it cannot
    /// hold are an error, never dropped.
    pub fn from_hdr(h: &Histogram<u64>) -> Result<Self, String> {
        let mut out = Self::new();
        out.h
            .add(h)
            .map_err(|e| format!("histogram out of range: {e:?}"))?;
        Ok(out)
    }
    /// Adds another histogram's counts; an error when a count would
    /// overflow or a value is out of range (a file, never our own).
    pub fn try_merge(&mut self, other: &LatencyHistogram) -> Result<(), String> {
        if self.h.len().checked_add(other.h.len()).is_none() {
            return Err("histogram counts overflow".into());
        }
        self.h
            .add(&other.h)
            .map_err(|e| format!("histograms do not add: {e:?}"))
    }
    /// Adds another histogram's counts.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        let _ = self.h.add(&other.h);
    }
    /// Latencies recorded.
    pub fn len(&self) -> u64 {
        self.h.len()
    }
    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }
    /// Value at quantile q in [0, 1].
    pub fn quantile(&self, q: f64) -> f64 {
        if self.h.is_empty() {
            return f64::NAN;
        }
        self.h.value_at_quantile(q) as f64
    }
    /// Summary in nanoseconds; `outliers` is null (raw samples are gone).
    pub fn summary(&self) -> Summary {
        if self.h.is_empty() {
            let mut s = Summary::empty();
            s.outliers = None;
            return s;
        }
        let q = |x| self.h.value_at_quantile(x) as f64;
        Summary {
            n: self.h.len(),
            min: self.h.min() as f64,
            max: self.h.max() as f64,
            mean: self.h.mean(),
            stdev: self.h.stdev(),
            median: q(0.5),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            p9999: q(0.9999),
            outliers: None,
            excluded: Excluded::default(),
        }
    }
    /// (value ns, cumulative fraction) points for a CDF plot.
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        let total = self.h.len().max(1) as f64;
        let mut acc = 0u64;
        self.h
            .iter_recorded()
            .map(|v| {
                acc += v.count_at_value();
                (v.value_iterated_to() as f64, acc as f64 / total)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn median_of_odd_even_empty_and_nan_input() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
        // A NaN is a value past every number, not a hole.
        assert_eq!(median(&mut [f64::NAN, 1.0, 2.0]), 2.0);
        let mut v = [5.0, -1.0, 0.0];
        median(&mut v);
        assert_eq!(v, [-1.0, 0.0, 5.0], "sorted in place");
    }

    #[test]
    fn known_values() {
        let s = Summary::from_samples(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(s.n, 5);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.mean, 3.0);
        assert!((s.stdev - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.p90, 4.6);
        assert_eq!(s.outliers, Some(0));
    }

    #[test]
    fn outlier_is_counted_not_dropped() {
        let mut v = vec![10.0; 20];
        v.extend([10.5, 9.5, 10.2, 9.8, 1000.0]);
        let s = Summary::from_samples(&v);
        assert_eq!(s.outliers, Some(1));
        assert_eq!(s.max, 1000.0);
        assert_eq!(s.n, 25);
    }

    #[test]
    fn phased_excludes_and_reports() {
        let s = Summary::from_phased(&[100.0, 1.0, 2.0, 3.0, 50.0], 1, 1);
        assert_eq!(s.n, 3);
        assert_eq!(s.median, 2.0);
        assert_eq!(s.excluded.warmup, 1);
        assert_eq!(s.excluded.warmup_mean, 100.0);
        assert_eq!(s.excluded.cooldown, 1);
        assert_eq!(s.excluded.cooldown_mean, 50.0);
    }

    #[test]
    fn empty_is_null_in_json() {
        let s = Summary::from_samples(&[]);
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains("\"median\":null"), "{j}");
        assert!(!j.contains("NaN"));
    }

    #[test]
    fn histogram_summary() {
        let mut h = LatencyHistogram::new();
        for v in 1..=1000 {
            h.record_ns(v);
        }
        let mut copy = LatencyHistogram::new();
        for (v, c) in h.recorded() {
            copy.record_n_ns(v, c);
        }
        assert_eq!(copy.summary().p99, h.summary().p99);
        assert_eq!(copy.len(), h.len());
        let s = h.summary();
        assert_eq!(s.n, 1000);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 1000.0);
        assert!((s.median - 500.0).abs() <= 1.0);
        assert!(s.p99 >= s.p90 && s.p999 >= s.p99 && s.max >= s.p9999);
    }

    fn naive_stdev(xs: &[f64]) -> f64 {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt()
    }

    proptest! {
        #[test]
        fn order_invariants(xs in prop::collection::vec(-1e9f64..1e9, 1..300)) {
            let s = Summary::from_samples(&xs);
            prop_assert!(s.min <= s.median && s.median <= s.max);
            let ladder = [s.min, s.p50, s.p90, s.p99, s.p999, s.p9999, s.max];
            for w in ladder.windows(2) {
                prop_assert!(w[0] <= w[1], "{:?}", ladder);
            }
            prop_assert!(s.min <= s.mean + 1e-6 && s.mean <= s.max + 1e-6);
            let naive = naive_stdev(&xs);
            prop_assert!((s.stdev - naive).abs() <= 1e-9 * naive.max(1.0));
            prop_assert!(s.outliers.unwrap() <= s.n);
        }

        #[test]
        fn histogram_ladder_monotone(xs in prop::collection::vec(0u64..10_000_000, 1..300)) {
            let mut h = LatencyHistogram::new();
            for x in &xs { h.record_ns(*x); }
            let s = h.summary();
            let ladder = [s.min, s.p50, s.p90, s.p99, s.p999, s.p9999, s.max];
            for w in ladder.windows(2) {
                prop_assert!(w[0] <= w[1], "{:?}", ladder);
            }
        }
    }
}
