//! Estimates with 95% confidence intervals, before/after ratios and the
//! verdicts drawn from them: the statistics that let a comparison on a noisy
//! two-core VM say "slower", "no change" or "can't tell" honestly.
//!
//! What it does: [`Estimate::from_samples`] turns the repeats of one
//! measurement (one value per run) into a median with a 95% interval;
//! [`ratio`] compares two sets of repeats (after / before) with a 95%
//! interval and a Mann–Whitney p-value; [`judge`] turns that into a
//! [`Verdict`] against a practical threshold, the way criterion.rs does with
//! its noise threshold (a change is reported only when the whole interval
//! lies beyond it); [`Repeats`] decides when to stop repeating;
//! [`attach`]/[`read`] store an estimate in a [`Record`](crate::Record)'s
//! metrics as the value plus sibling `<key>_lo`, `<key>_hi`, `<key>_n`,
//! `<key>_samples` fields.
//!
//! Methods and references:
//! * Median interval: the distribution-free order-statistic interval
//!   (binomial; Hollander & Wolfe, Conover) whenever it exists at 95%
//!   (n ≥ 6), else the bootstrap percentile interval of the median (Efron;
//!   criterion.rs resamples the same way) with [`BOOTSTRAP_RESAMPLES`]
//!   resamples (n = 2…5, where it is [min, max] in practice).
//! * Ratio interval, default: the Hodges–Lehmann estimate of the shift of
//!   the logarithms (the median of all pairwise log ratios) with Moses'
//!   distribution-free interval (exact Mann–Whitney quantiles for small
//!   samples, the normal approximation otherwise). Alternative: the
//!   bootstrap of the ratio of medians, resampling each side independently
//!   (as criterion.rs and Kalibera & Jones 2013 do for a ratio). The default
//!   is Hodges–Lehmann because on a noisy VM's kind of noise (lognormal
//!   σ 0.02–0.3 with 5% of 2–5× outliers) it keeps 92.5–98.5% coverage
//!   from n = 4 up, where the bootstrap of medians under-covers at n = 4 (≈ 90%),
//!   and it detects a given change with fewer repeats (10% change, σ 0.03:
//!   90.8% vs 85% at n = 15; σ 0.1: 82.8% vs 69% at n = 100); it needs no
//!   random numbers at all (the `calibration` test prints both; see
//!   [`DEFAULT_REPEATS`]). Its point estimate, the median of the pairwise
//!   ratios, is the ratio of medians' more efficient sibling; both medians
//!   are reported beside it. It falls back to the bootstrap when a side
//!   has fewer than 4 samples (no 95% Moses interval exists) or a value
//!   ≤ 0 (no logarithm).
//! * p-value: two-sided Mann–Whitney U (as Google Benchmark's compare.py),
//!   exact without ties up to 25 per side, else the normal approximation
//!   with tie and continuity correction.
//! * Noise floor: between-run noise that the repeats of one run cannot see
//!   (Kalibera & Jones' point about run-level variation) is added in
//!   quadrature to the ratio interval's half-widths on the log scale.
//!
//! Invariants: same input, same output (the xoshiro256** [`Rng`] with
//! fixed seeds, no clock, no global state; inputs are sorted first, so
//! the order of the samples does not matter either); `lo ≤ median ≤ hi` and
//! `lo ≤ ratio ≤ hi` whenever they are finite; non-finite samples are
//! dropped and counted, never used; an unknown interval is NaN (JSON
//! `null`), never a zero-width one; at most [`MAX_SAMPLES`] samples are kept
//! in an [`Estimate`].

use crate::stats::{median, percentile_sorted};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// Most samples an [`Estimate`] keeps (and [`attach`] writes). With more,
/// the estimate keeps [`MAX_SAMPLES`] evenly spaced order statistics
/// (a quantile sketch, ascending, including min and max), so a record stays
/// small while a later [`ratio`] still sees the shape of the distribution;
/// the interval and `n` are those of all samples.
pub const MAX_SAMPLES: usize = 64;

/// Bootstrap resamples (criterion.rs uses 100 000 on one benchmark; 2 000
/// puts the percentile's Monte-Carlo error well below the interval's width
/// at the small n used here and keeps a comparison cheap).
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// Largest side [`ratio`] works on; a larger side is reduced to this many
/// evenly spaced order statistics (the interval then is somewhat wider than
/// all samples would give: conservative). Bounds the pairwise work to
/// 512² log ratios.
pub const MAX_RATIO_SAMPLES: usize = 512;

/// Confidence level of every interval here.
pub const CONFIDENCE: f64 = 0.95;

/// Standard normal 97.5% quantile.
const Z_975: f64 = 1.959_963_984_540_054;

/// Repeats per side at which a comparison settles a 10% change against
/// the default 5% threshold, for run-level values with 3% noise.
///
/// Measured by the `calibration` test (400 trials per cell; synthetic
/// repeats: lognormal noise with σ as given times 2–5× outliers in 5% of
/// samples; after = 1.10 × before; default [`ratio`], [`judge`] with
/// threshold 0.05 and noise floor 0). Share of trials called "slower":
///
/// | σ    | n=5  | n=7  | n=10 | n=15  | n=20  | n=30  | n=50  | n=100 | n=200 |
/// |------|------|------|------|-------|-------|-------|-------|-------|-------|
/// | 0.02 | 64%  | 81%  | 93.5%| 99.5% | 99.8% | 100%  | 100%  | 100%  | 100%  |
/// | 0.03 | 37%  | 54%  | 78%  | 90.8% | 98.5% | 99.3% | 100%  | 100%  | 100%  |
/// | 0.05 | 13%  | 22.5%| 35.5%| 53%   | 66%   | 86.5% | 99%   | 99.8% | 100%  |
/// | 0.10 | 6%   | 9%   | 13%  | 15%   | 24.5% | 36%   | 56.5% | 82.8% | 98.3% |
/// | 0.30 | 2%   | 3%   | 5.5% | 5%    | 6.5%  | 5%    | 8%    | 18.5% | 27%   |
///
/// 20 is the default: with 3% run-to-run noise (σ = 0.03, the level this
/// default assumes for run-level values such as a run's median — an
/// assumption, not a measurement of this VM) it detects the 10% slowdown in
/// 98.5% of trials (15 repeats: 90.8%, too close to call the 90% goal met; 10:
/// 78%); with 2% noise 10 repeats would do (93.5%). A/A false alarms (A
/// against A called slower or faster) stay at or below 3.5% in every cell
/// from n = 4 to 200 and σ = 0.02 to 0.3 (0–1.5% at n = 5 for σ 0.1–0.3),
/// and the interval covers the true ratio in 92.5–98.5% of trials. Noisier
/// values cannot do better with any valid 95% interval: calling a 10%
/// change beyond a 5% threshold needs a standard error of the log ratio
/// below ≈ 0.014, i.e. n ≳ 2(σ/0.014)² per side — about 100 for σ = 0.1
/// and 900 for σ = 0.3. Such metrics stay "inconclusive", which is the
/// honest answer; [`repeats_to_settle`] says how many repeats would do.
pub const DEFAULT_REPEATS: usize = 20;

const SEED: u64 = 0x636f_6d6d_6265_6e63; // "commbenc"

// ---------------------------------------------------------------- PRNG

/// A small deterministic generator: xoshiro256** (Blackman & Vigna) seeded
/// through splitmix64. Not cryptographic; used for bootstrap resampling,
/// permutation tests and synthetic test data, always with fixed seeds.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

/// One splitmix64 step: advances `state` and returns a well-mixed word.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator seeded with `seed` (the same seed gives the same sequence).
    pub fn new(seed: u64) -> Self {
        let mut st = seed;
        let s = [
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
        ];
        Rng { s }
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform in 0..n (multiply-shift; the bias is below 2⁻⁵⁰ for the n
    /// used here). `n` must be > 0.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

// ------------------------------------------------------- small types

/// How an interval was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// No samples: the interval is unknown (NaN).
    Unknown,
    /// One sample: lo = hi = the value (a ratio of single samples has an
    /// unknown interval).
    Single,
    /// Distribution-free binomial interval of the median.
    OrderStatistic,
    /// Bootstrap percentile interval.
    BootstrapPercentile,
    /// Hodges–Lehmann shift of the logs with Moses' interval.
    HodgesLehmann,
    /// Paired: Hodges–Lehmann of the per-pair log ratios with the Wilcoxon
    /// signed-rank interval ([`paired`]).
    SignedRank,
}

impl Method {
    /// The method's name in records and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Unknown => "unknown",
            Method::Single => "single",
            Method::OrderStatistic => "order-statistic",
            Method::BootstrapPercentile => "bootstrap-percentile",
            Method::HodgesLehmann => "hodges-lehmann",
            Method::SignedRank => "signed-rank",
        }
    }
    /// The method [`Estimate::from_samples`] uses for `n` finite samples.
    pub fn for_median(n: usize) -> Method {
        match n {
            0 => Method::Unknown,
            1 => Method::Single,
            2..=5 => Method::BootstrapPercentile,
            _ => Method::OrderStatistic,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which way a metric is better: the labs' declared direction
/// ([`crate::lab::Better`]; `Unknown` means a change is only "changed").
pub use crate::lab::Better as Direction;

/// serde_json writes NaN as `null`; read `null` back as NaN.
fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

// ------------------------------------------------------------ Estimate

/// The median of repeated samples with its 95% interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The finite samples, in the order given, or a sketch of
    /// [`MAX_SAMPLES`] order statistics (ascending) when there were more.
    pub samples: Vec<f64>,
    /// The median of the samples.
    #[serde(deserialize_with = "f64_or_nan")]
    pub median: f64,
    /// Lower end of the 95% interval of the median.
    #[serde(deserialize_with = "f64_or_nan")]
    pub lo: f64,
    /// Upper end of the 95% interval of the median.
    #[serde(deserialize_with = "f64_or_nan")]
    pub hi: f64,
    /// Finite samples the estimate is made of (0 when unknown).
    pub n: usize,
    /// Non-finite samples that were dropped.
    #[serde(default)]
    pub dropped: usize,
    /// How the interval was computed.
    pub method: Method,
}

/// Evenly spaced order statistics of sorted data (first and last kept).
fn sketch(sorted: &[f64], k: usize) -> Vec<f64> {
    let n = sorted.len();
    if n <= k {
        return sorted.to_vec();
    }
    (0..k)
        .map(|i| sorted[(i * (n - 1) + (k - 1) / 2) / (k - 1)])
        .collect()
}

fn sorted_finite(xs: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// 1-based rank `j` of the symmetric order-statistic interval
/// [X(j), X(n+1−j)] for the median at 95%, or None when even [min, max]
/// covers less (n ≤ 5). Coverage is 1 − 2·P(Bin(n, ½) ≤ j−1) ≥ 95%.
pub fn order_statistic_rank(n: usize) -> Option<usize> {
    if n < 2 {
        return None;
    }
    let alpha2 = (1.0 - CONFIDENCE) / 2.0 + 1e-12;
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut log_c = 0.0; // ln C(n, i)
    let mut cdf = 0.0;
    let mut j = 0;
    for i in 0..=n / 2 {
        let p = (log_c + ln_half_n).exp();
        if cdf + p > alpha2 {
            break;
        }
        cdf += p;
        j = i + 1;
        log_c += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    (j > 0).then_some(j)
}

/// Bootstrap percentile interval of the median of sorted data.
fn bootstrap_median_ci(sorted: &[f64]) -> (f64, f64) {
    let n = sorted.len();
    let mut rng = Rng::new(SEED ^ (n as u64).wrapping_mul(0x9e37_79b9));
    let mut buf = vec![0.0; n];
    let mut meds: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            for b in buf.iter_mut() {
                *b = sorted[rng.below(n)];
            }
            median(&mut buf)
        })
        .collect();
    meds.sort_by(f64::total_cmp);
    let a = (1.0 - CONFIDENCE) / 2.0;
    (
        percentile_sorted(&meds, a),
        percentile_sorted(&meds, 1.0 - a),
    )
}

impl Estimate {
    /// The estimate of nothing: NaN everywhere, method unknown.
    pub fn empty() -> Self {
        Estimate {
            samples: Vec::new(),
            median: f64::NAN,
            lo: f64::NAN,
            hi: f64::NAN,
            n: 0,
            dropped: 0,
            method: Method::Unknown,
        }
    }

    /// A value without samples (an old record): the interval is unknown.
    pub fn unknown(value: f64) -> Self {
        Estimate {
            median: value,
            ..Self::empty()
        }
    }

    /// Median and 95% interval of the finite `samples` (see the module
    /// docs for the method by n).
    pub fn from_samples(samples: &[f64]) -> Self {
        let sorted = sorted_finite(samples);
        let n = sorted.len();
        let dropped = samples.len() - n;
        if n == 0 {
            return Estimate {
                dropped,
                ..Self::empty()
            };
        }
        let median = percentile_sorted(&sorted, 0.5);
        let method = Method::for_median(n);
        let (lo, hi) = match method {
            Method::OrderStatistic => {
                let j = order_statistic_rank(n).expect("n ≥ 6 has a 95% interval");
                (sorted[j - 1], sorted[n - j])
            }
            Method::BootstrapPercentile => bootstrap_median_ci(&sorted),
            _ => (median, median),
        };
        let kept = if n <= MAX_SAMPLES {
            samples.iter().copied().filter(|x| x.is_finite()).collect()
        } else {
            sketch(&sorted, MAX_SAMPLES)
        };
        Estimate {
            samples: kept,
            median,
            lo: lo.min(median),
            hi: hi.max(median),
            n,
            dropped,
            method,
        }
    }

    /// Relative width of the interval, (hi − lo) / |median| (NaN when
    /// unknown or the median is 0).
    pub fn rel_width(&self) -> f64 {
        if self.median == 0.0 {
            return f64::NAN;
        }
        (self.hi - self.lo) / self.median.abs()
    }

    /// Half the relative width: the "± x%" of the median.
    pub fn rel_half_width(&self) -> f64 {
        self.rel_width() / 2.0
    }

    /// As a JSON value (NaN as `null`).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// From [`Estimate::to_json`]'s value.
    pub fn from_json(v: &Value) -> Option<Self> {
        Self::deserialize(v).ok()
    }
}

fn num(x: f64) -> Value {
    // serde_json turns non-finite floats into null.
    Value::from(x)
}

/// Writes `est` into a record's metrics: the median under `key` (a plain
/// number, as records have always carried it) and siblings `<key>_lo`,
/// `<key>_hi`, `<key>_n`, `<key>_samples`. The method is not stored: it is
/// a function of n ([`Method::for_median`]).
pub fn attach(record_metrics: &mut Map<String, Value>, key: &str, est: &Estimate) {
    record_metrics.insert(key.to_owned(), num(est.median));
    record_metrics.insert(format!("{key}_lo"), num(est.lo));
    record_metrics.insert(format!("{key}_hi"), num(est.hi));
    record_metrics.insert(format!("{key}_n"), Value::from(est.n as u64));
    record_metrics.insert(
        format!("{key}_samples"),
        Value::Array(est.samples.iter().map(|&x| num(x)).collect()),
    );
}

/// Reads what [`attach`] wrote. A record with only the value (written
/// before intervals existed) gives [`Estimate::unknown`]; a key that is
/// absent or not a number (nor null) gives None.
pub fn read(metrics: &Map<String, Value>, key: &str) -> Option<Estimate> {
    let value = match metrics.get(key)? {
        Value::Number(x) => x.as_f64()?,
        Value::Null => f64::NAN,
        _ => return None,
    };
    // One buffer for the field names (a `format!` per field was a tenth
    // of compare's time at 100,000 records).
    let mut name = String::with_capacity(key.len() + 8);
    let mut field = |s: &str| {
        name.clear();
        name.push_str(key);
        name.push('_');
        name.push_str(s);
        metrics.get(name.as_str())
    };
    let as_f = |v: Option<&Value>| v.and_then(Value::as_f64).unwrap_or(f64::NAN);
    let samples: Vec<f64> = field("samples")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let n_field = field("n").and_then(Value::as_u64).map(|n| n as usize);
    if field("lo").is_none() || field("hi").is_none() {
        if samples.is_empty() {
            return Some(Estimate::unknown(value));
        }
        let mut e = Estimate::from_samples(&samples);
        e.n = e.n.max(n_field.unwrap_or(0));
        return Some(e);
    }
    let n = n_field.unwrap_or(samples.len());
    Some(Estimate {
        samples,
        median: value,
        lo: as_f(field("lo")),
        hi: as_f(field("hi")),
        n,
        dropped: 0,
        method: Method::for_median(n),
    })
}

// -------------------------------------------------------- Mann–Whitney

/// Complementary error function (Chebyshev fit, Numerical Recipes'
/// `erfcc`; fractional error below 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Counts of the Mann–Whitney U statistic for sample sizes m, n without
/// ties: `c[u]` arrangements give U = u, out of C(m+n, m) (the Gaussian
/// binomial coefficient's coefficients).
fn u_counts(m: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n + 1];
    c[0] = 1.0;
    // c ← c · (1 − q^{n+i}) / (1 − q^i), for i = 1..=m.
    for i in 1..=m {
        let k = n + i;
        for u in (k..c.len()).rev() {
            c[u] -= c[u - k];
        }
        for u in i..c.len() {
            c[u] += c[u - i];
        }
    }
    c
}

/// Exact tables are used up to this many samples per side.
const EXACT_MAX: usize = 25;

/// U of `after` against `before` (pairs with after > before, ties ½) and
/// the tie correction term Σ(t³ − t) over tie groups.
fn u_statistic(before: &[f64], after: &[f64]) -> (f64, f64) {
    let mut all: Vec<(f64, bool)> = before
        .iter()
        .map(|&x| (x, false))
        .chain(after.iter().map(|&x| (x, true)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rank_sum_after = 0.0;
    let mut ties = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let avg_rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_after += avg_rank * all[i..=j].iter().filter(|e| e.1).count() as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    let na = after.len() as f64;
    (rank_sum_after - na * (na + 1.0) / 2.0, ties)
}

/// Two-sided Mann–Whitney U p-value that `before` and `after` come from
/// the same distribution: exact without ties up to [`EXACT_MAX`] per side,
/// else the normal approximation with tie and continuity correction.
/// NaN when a side is empty.
pub fn mann_whitney_p(before: &[f64], after: &[f64]) -> f64 {
    let b = sorted_finite(before);
    let a = sorted_finite(after);
    let (m, n) = (b.len(), a.len());
    if m == 0 || n == 0 {
        return f64::NAN;
    }
    let (u, ties) = u_statistic(&b, &a);
    if ties == 0.0 && m <= EXACT_MAX && n <= EXACT_MAX {
        let c = u_counts(m, n);
        let total: f64 = c.iter().sum();
        let u = u.round() as usize;
        let le: f64 = c[..=u].iter().sum::<f64>() / total;
        let ge: f64 = c[u..].iter().sum::<f64>() / total;
        return (2.0 * le.min(ge)).min(1.0);
    }
    let (mf, nf) = (m as f64, n as f64);
    let big_n = mf + nf;
    let var = mf * nf / 12.0 * ((big_n + 1.0) - ties / (big_n * (big_n - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mf * nf / 2.0).abs() - 0.5).max(0.0) / var.sqrt();
    erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// 1-based rank k of Moses' interval [D(k), D(mn+1−k)] over the m·n sorted
/// pairwise differences, or None when no 95% interval exists (fewer than
/// 40 arrangements: 2 or 3 per side).
fn moses_rank(m: usize, n: usize) -> Option<usize> {
    let alpha2 = (1.0 - CONFIDENCE) / 2.0 + 1e-12;
    let k = if m <= EXACT_MAX && n <= EXACT_MAX {
        let c = u_counts(m, n);
        let total: f64 = c.iter().sum();
        let mut cdf = 0.0;
        let mut k = 0;
        for (u, cu) in c.iter().enumerate() {
            if cdf + cu / total > alpha2 {
                break;
            }
            cdf += cu / total;
            k = u + 1;
        }
        k
    } else {
        let (mf, nf) = (m as f64, n as f64);
        let sd = (mf * nf * (mf + nf + 1.0) / 12.0).sqrt();
        (mf * nf / 2.0 - Z_975 * sd + 0.5).floor().max(0.0) as usize
    };
    (k >= 1).then_some(k.min(m * n / 2 + 1))
}

// --------------------------------------------------------------- ratio

/// The ratio after / before of two sets of repeats, with its 95% interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatioEstimate {
    /// Point estimate of after / before: the Hodges–Lehmann ratio (median
    /// of all pairwise ratios) or, for the bootstrap, the ratio of medians.
    #[serde(deserialize_with = "f64_or_nan")]
    pub ratio: f64,
    /// Lower end of the 95% interval of the ratio.
    #[serde(deserialize_with = "f64_or_nan")]
    pub lo: f64,
    /// Upper end of the 95% interval of the ratio.
    #[serde(deserialize_with = "f64_or_nan")]
    pub hi: f64,
    /// How the interval was computed.
    pub method: Method,
    /// Two-sided Mann–Whitney U p-value (NaN when a side is empty).
    #[serde(deserialize_with = "f64_or_nan")]
    pub p_value: f64,
    /// Median of the before samples.
    #[serde(deserialize_with = "f64_or_nan")]
    pub before_median: f64,
    /// Median of the after samples.
    #[serde(deserialize_with = "f64_or_nan")]
    pub after_median: f64,
    /// Finite samples used on each side.
    pub n_before: usize,
    /// Finite samples used on the after side.
    pub n_after: usize,
}

struct Sides {
    b: Vec<f64>,
    a: Vec<f64>,
    out: RatioEstimate,
}

fn prepare(before: &[f64], after: &[f64]) -> Sides {
    let b = sketch(&sorted_finite(before), MAX_RATIO_SAMPLES);
    let a = sketch(&sorted_finite(after), MAX_RATIO_SAMPLES);
    let bm = percentile_sorted(&b, 0.5);
    let am = percentile_sorted(&a, 0.5);
    let out = RatioEstimate {
        ratio: if bm > 0.0 && am >= 0.0 {
            am / bm
        } else {
            f64::NAN
        },
        lo: f64::NAN,
        hi: f64::NAN,
        method: Method::Unknown,
        p_value: mann_whitney_p(&b, &a),
        before_median: bm,
        after_median: am,
        n_before: b.len(),
        n_after: a.len(),
    };
    Sides { b, a, out }
}

/// The default ratio: [`ratio_hodges_lehmann`] (see the module docs for
/// why), which itself falls back to [`ratio_bootstrap`] for fewer than 4
/// samples on a side or values ≤ 0.
pub fn ratio(before: &[f64], after: &[f64]) -> RatioEstimate {
    ratio_hodges_lehmann(before, after)
}

/// Hodges–Lehmann ratio: exp of the median of all pairwise differences
/// ln(after_j) − ln(before_i), with Moses' distribution-free 95% interval
/// (exact for a pure change of scale, whatever the noise distribution).
pub fn ratio_hodges_lehmann(before: &[f64], after: &[f64]) -> RatioEstimate {
    let s = prepare(before, after);
    let (m, n) = (s.b.len(), s.a.len());
    let positive = s.b.first().is_some_and(|&x| x > 0.0) && s.a.first().is_some_and(|&x| x > 0.0);
    let Some(k) = moses_rank(m, n).filter(|_| positive) else {
        return bootstrap_mirrored(s);
    };
    let lb: Vec<f64> = s.b.iter().map(|x| x.ln()).collect();
    let mut d: Vec<f64> = Vec::with_capacity(m * n);
    for x in s.a.iter().map(|x| x.ln()) {
        d.extend(lb.iter().map(|y| x - y));
    }
    d.sort_unstable_by(f64::total_cmp);
    let mid = percentile_sorted(&d, 0.5);
    let mut out = s.out;
    out.ratio = mid.exp();
    out.lo = d[k - 1].min(mid).exp();
    out.hi = d[m * n - k].max(mid).exp();
    out.method = Method::HodgesLehmann;
    out
}

/// Ratio of medians with the bootstrap percentile interval, each side
/// resampled independently [`BOOTSTRAP_RESAMPLES`] times with a seed fixed
/// by the sample sizes (so scaling the inputs scales nothing else).
pub fn ratio_bootstrap(before: &[f64], after: &[f64]) -> RatioEstimate {
    bootstrap_mirrored(prepare(before, after))
}

/// [`bootstrap_from`] with the shorter side first, its result inverted
/// when the sides were swapped for it: the resamples then do not depend
/// on which side is called "before", so B against A is the mirror of A
/// against B (the seed and the draw order otherwise gave a slightly
/// different interval each way round; sides of one size are mirrored
/// inside [`bootstrap_from`]).
fn bootstrap_mirrored(s: Sides) -> RatioEstimate {
    if s.b.len() <= s.a.len() || !s.out.ratio.is_finite() {
        return bootstrap_from(s);
    }
    let Sides { b, a, out } = s;
    let swapped = bootstrap_from(Sides {
        out: RatioEstimate {
            ratio: if out.after_median > 0.0 && out.before_median >= 0.0 {
                out.before_median / out.after_median
            } else {
                f64::NAN
            },
            before_median: out.after_median,
            after_median: out.before_median,
            n_before: out.n_after,
            n_after: out.n_before,
            ..out.clone()
        },
        b: a,
        a: b,
    });
    RatioEstimate {
        ratio: out.ratio,
        lo: 1.0 / swapped.hi,
        hi: 1.0 / swapped.lo,
        method: swapped.method,
        ..out
    }
}

fn bootstrap_from(s: Sides) -> RatioEstimate {
    let Sides { b, a, mut out } = s;
    let (m, n) = (b.len(), a.len());
    if m == 0 || n == 0 || !out.ratio.is_finite() {
        return out;
    }
    if m < 2 || n < 2 {
        // One side without spread: the interval cannot be known.
        out.method = Method::Single;
        return out;
    }
    let mut rng = Rng::new(SEED ^ (((m as u64) << 32) | n as u64));
    let (mut bb, mut ab) = (vec![0.0; m], vec![0.0; n]);
    let (mut i, mut j) = (vec![0usize; m], vec![0usize; n]);
    let mut rs: Vec<f64> = Vec::with_capacity(2 * BOOTSTRAP_RESAMPLES);
    let ratio_of = |bi: &[usize], aj: &[usize], bb: &mut [f64], ab: &mut [f64]| {
        for (x, &k) in bb.iter_mut().zip(bi) {
            *x = b[k];
        }
        for (x, &k) in ab.iter_mut().zip(aj) {
            *x = a[k];
        }
        let den = median(bb);
        let num = median(ab);
        if den > 0.0 {
            num / den
        } else {
            f64::INFINITY
        }
    };
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for k in i.iter_mut() {
            *k = rng.below(m);
        }
        for k in j.iter_mut() {
            *k = rng.below(n);
        }
        rs.push(ratio_of(&i, &j, &mut bb, &mut ab));
        if m == n {
            // Sides of one size: each draw of indices serves both sides
            // both ways, so that swapping the sides gives the reciprocal
            // of every resample (the mirror `bootstrap_mirrored` needs;
            // sides of different sizes are put in order by size there).
            rs.push(ratio_of(&j, &i, &mut bb, &mut ab));
        }
    }
    rs.sort_by(f64::total_cmp);
    let al = (1.0 - CONFIDENCE) / 2.0;
    // On the log scale where the ratios allow it: interpolating between
    // two resamples then commutes with taking reciprocals (swapped sides)
    // and with scaling a side.
    let logs = rs.first().is_some_and(|&x| x > 0.0) && rs.last().is_some_and(|x| x.is_finite());
    let pct = |q: f64| {
        if logs {
            let l: Vec<f64> = rs.iter().map(|x| x.ln()).collect();
            percentile_sorted(&l, q).exp()
        } else {
            percentile_sorted(&rs, q)
        }
    };
    out.lo = pct(al).min(out.ratio);
    out.hi = pct(1.0 - al).max(out.ratio);
    out.method = Method::BootstrapPercentile;
    out
}

/// The ratio of two estimates: from their samples when both have some,
/// else the ratio of the values with an unknown interval (n = 0, which
/// [`judge`] calls [`Verdict::NoSamples`]).
pub fn ratio_of(before: &Estimate, after: &Estimate) -> RatioEstimate {
    if !before.samples.is_empty() && !after.samples.is_empty() {
        return ratio(&before.samples, &after.samples);
    }
    RatioEstimate {
        ratio: after.median / before.median,
        lo: f64::NAN,
        hi: f64::NAN,
        method: Method::Unknown,
        p_value: f64::NAN,
        before_median: before.median,
        after_median: after.median,
        n_before: before.samples.len(),
        n_after: after.samples.len(),
    }
}

// ------------------------------------------------------------- verdict

/// What a comparison says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval lies beyond the threshold, the good way.
    Improved,
    /// The whole interval lies beyond the threshold, the bad way.
    Regressed,
    /// The whole interval lies within [1 − t, 1 + t].
    NoChange,
    /// The interval straddles a threshold (or is unknown): more repeats.
    Inconclusive,
    /// A side has no samples.
    NoSamples,
    /// Beyond the threshold for a metric with [`Direction::Unknown`].
    Changed,
}

impl Verdict {
    /// The word: faster/slower for times and rates (`timeish`), else
    /// better/worse.
    pub fn word(self, timeish: bool) -> &'static str {
        match (self, timeish) {
            (Verdict::Improved, true) => "faster",
            (Verdict::Regressed, true) => "slower",
            (Verdict::Improved, false) => "better",
            (Verdict::Regressed, false) => "worse",
            (Verdict::NoChange, _) => "no change",
            (Verdict::Inconclusive, _) => "inconclusive",
            (Verdict::NoSamples, _) => "no samples",
            (Verdict::Changed, _) => "changed",
        }
    }
    /// Improved or regressed or changed: a change that survived the noise.
    pub fn is_change(self) -> bool {
        matches!(
            self,
            Verdict::Improved | Verdict::Regressed | Verdict::Changed
        )
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word(true))
    }
}

/// The standard normal quantile Φ⁻¹(p) for 0 < p < 1 (Acklam's rational
/// approximation, relative error below 1.2e-9); NaN outside (0, 1).
pub fn normal_quantile(p: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

// ---------------------------------------------------------- noise floor

/// Stored runs of a configuration on a host needed before `compare`
/// learns its noise floor (three differences between consecutive runs of one build).
pub const MIN_FLOOR_RUNS: usize = 4;

/// The between-run floor (relative 95% half-width) `compare` uses for a
/// metric when the results store has no history of it and no
/// `--noise-floor` is given: a cold start, such as a fresh CI runner
/// comparing two suites. It is set to cover the widest swing one binary's
/// headline metrics showed between two back-to-back quick suites on a
/// quiet 2-vCPU VM with an empty store (2026-11-26: pipeline ticks 0.62×,
/// i.e. ln 0.48; mux server CPU per round trip 1.43×; RSS hash cost
/// 1.21–1.23×), with a margin: ±75% is ln 1.75 = 0.56 on the log scale, so
/// a cold comparison calls a change only beyond about 0.55× or 1.85×
/// (with a 5% threshold). Swings on a loaded machine are larger still and
/// are caught by the load gap instead. A decisive answer at a few percent
/// comes from pairing, not from a floor: `commbench ab`.
pub const COLD_FLOOR: f64 = 0.75;

/// The cold-start floor of a metric whose record says it crossed CPUs
/// ([`crate::lab::CROSS_CPU`]): a 2.5× band. Such a figure moves between
/// processes by where the CPUs' caches and the scheduler put its roles,
/// and one run's repeats (one process) cannot show it: on a 2-vCPU VM the
/// pipeline mode moved 2.47× between back-to-back quiet processes (33.7
/// to 83.3 Mpps) and an unpinned mux server and client 1.98× between two
/// quick suites, where [`COLD_FLOOR`] (1.75×) made both a 10% gate's
/// failure in one A/A pair of four. A store's runs teach the real floor.
pub const CROSS_CPU_COLD_FLOOR: f64 = 1.5;

/// The between-run noise of one metric from stored runs of one
/// configuration on one host, as (git SHA, value) in time order: only
/// consecutive runs of the same build count (A/A-like reruns; a step
/// between builds is what compare looks for, not noise). The floor is the
/// larger of the half-width of the ratio of two runs at `z` standard
/// deviations (a robust σ of the log-difference, 1.4826 × its median
/// absolute value) and the largest swing seen between two such runs: a
/// bimodal metric (shared memory that spins or sleeps by the load) has a
/// small median swing and rare large ones. None with fewer than
/// [`MIN_FLOOR_RUNS`] − 1 such differences.
pub fn floor_from_series(series: &[(String, f64)], z: f64) -> Option<f64> {
    let mut d: Vec<f64> = series
        .windows(2)
        .filter(|w| w[0].0 == w[1].0)
        .filter(|w| w[0].1 > 0.0 && w[1].1 > 0.0 && w[0].1.is_finite() && w[1].1.is_finite())
        .map(|w| (w[1].1 / w[0].1).ln().abs())
        .collect();
    if d.len() + 1 < MIN_FLOOR_RUNS {
        return None;
    }
    let mad = median(&mut d);
    let widest = d.last().copied().unwrap_or(0.0);
    Some((z * 1.4826 * mad).max(widest).exp_m1())
}

/// Repeats a run needs before [`swing`] reads its spread: three, as the
/// quick suite's mux runs have (their echo rate moved 0.505× [0.286,
/// 0.898] between two quiet quick suites of one binary, 2026-11-28).
pub const SWING_MIN_REPEATS: usize = 3;

/// The [`swing`] from which a run's repeats are taken to spread over
/// modes rather than about one value (the 90th percentile at least twice
/// the 10th), and `compare` floors the metric's ratio at that swing.
pub const SWING_MODES: f64 = 1.0;

/// How far one run's repeats swung, as a relative floor: the 90th
/// percentile over the 10th, less one (0 with fewer than
/// [`SWING_MIN_REPEATS`] positive samples; with three, nearly their
/// extremes). The repeats are separate runs,
/// so a metric that moved this much between them moves as much between
/// two runs, whatever the interval of its median says: the pipeline
/// mode's two spinning threads on this 2-vCPU host ran at ~10, ~30 and
/// ~83 Mpps in one quiet quick suite (its repeats' medians 19.0 and 82.8
/// Mpps in two back-to-back suites), where the median's interval was
/// narrow. Middle 80%, not max/min, so one preempted repeat does not set
/// it.
pub fn swing(samples: &[f64]) -> f64 {
    if samples.len() < SWING_MIN_REPEATS {
        return 0.0;
    }
    let mut v: Vec<f64> = samples
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if v.len() < SWING_MIN_REPEATS {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let h = q * (v.len() - 1) as f64;
        let (i, f) = (h.floor() as usize, h - h.floor());
        v[i] + f * (v[(i + 1).min(v.len() - 1)] - v[i])
    };
    (at(0.9) / at(0.1) - 1.0).max(0.0)
}

/// The z of a floor that holds for all `m` metrics of one comparison at
/// once with 95% confidence (Bonferroni): a comparison judges tens of
/// metrics, and a per-metric 95% floor lets a few of them cross it in
/// every identical rerun.
pub fn familywise_z(m: usize) -> f64 {
    normal_quantile(1.0 - 0.025 / m.max(1) as f64)
}

/// The interval widened by `noise_floor`, the 95% relative half-width of
/// between-run noise the repeats could not see, added in quadrature to
/// each half-width on the log scale.
pub fn widen(r: &RatioEstimate, noise_floor: f64) -> (f64, f64) {
    if noise_floor.is_nan()
        || noise_floor <= 0.0
        || r.ratio.is_nan()
        || r.ratio <= 0.0
        || r.ratio.is_infinite()
    {
        return (r.lo, r.hi);
    }
    let f = noise_floor.ln_1p();
    let c = r.ratio.ln();
    let lo = if r.lo > 0.0 {
        let d = (c - r.lo.ln()).max(0.0);
        (c - d.hypot(f)).exp()
    } else {
        r.lo
    };
    let hi = if r.hi.is_finite() {
        let d = (r.hi.ln() - c).max(0.0);
        (c + d.hypot(f)).exp()
    } else {
        r.hi
    };
    (lo, hi)
}

/// The verdict on a ratio after / before: a change only when the whole
/// (noise-widened) interval lies beyond the threshold (`lo > 1 + t`: up,
/// `hi < 1 / (1 + t)`: down), no change when it lies within
/// [1 / (1 + t), 1 + t],
/// inconclusive otherwise. Up is a regression for [`Direction::Lower`],
/// an improvement for [`Direction::Higher`].
pub fn judge(r: &RatioEstimate, threshold: f64, noise_floor: f64, better: Direction) -> Verdict {
    if r.n_before == 0 || r.n_after == 0 {
        return Verdict::NoSamples;
    }
    let (lo, hi) = widen(r, noise_floor);
    if lo.is_nan() || hi.is_nan() || r.ratio.is_nan() {
        return Verdict::Inconclusive;
    }
    // The band is symmetric on the log scale, [1 / (1 + t), 1 + t], so
    // that judging B against A gives the mirror of A against B (a 1.06×
    // slowdown is a 0.943× speed-up the other way round; with 1 − t as
    // the lower edge, 1.051× was "slower" one way and inconclusive the
    // other, and a gate passed or failed by the order of its arguments).
    let t = threshold.abs();
    let (down_edge, up_edge) = (1.0 / (1.0 + t), 1.0 + t);
    let up = if lo > up_edge {
        true
    } else if hi < down_edge {
        false
    } else if lo >= down_edge && hi <= up_edge {
        return Verdict::NoChange;
    } else {
        return Verdict::Inconclusive;
    };
    match (better, up) {
        (Direction::Unknown, _) => Verdict::Changed,
        (Direction::Lower, true) | (Direction::Higher, false) => Verdict::Regressed,
        (Direction::Lower, false) | (Direction::Higher, true) => Verdict::Improved,
    }
}

/// A verdict with the numbers it rests on, for display:
/// `slower 1.12× [1.08, 1.17]` (`{:#}` says better/worse instead of
/// faster/slower).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// The verdict.
    pub verdict: Verdict,
    /// The ratio after / before.
    #[serde(deserialize_with = "f64_or_nan")]
    pub ratio: f64,
    /// The noise-widened interval the verdict was drawn from.
    #[serde(deserialize_with = "f64_or_nan")]
    pub lo: f64,
    /// Upper end of the noise-widened interval.
    #[serde(deserialize_with = "f64_or_nan")]
    pub hi: f64,
}

impl Judgement {
    /// Judges `r` against `threshold` after widening its interval by the
    /// `noise_floor`, with `better` saying which direction is an improvement.
    pub fn new(r: &RatioEstimate, threshold: f64, noise_floor: f64, better: Direction) -> Self {
        let (lo, hi) = widen(r, noise_floor);
        Judgement {
            verdict: judge(r, threshold, noise_floor, better),
            ratio: r.ratio,
            lo,
            hi,
        }
    }
}

impl fmt::Display for Judgement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = self.verdict.word(!f.alternate());
        if !self.ratio.is_finite() {
            return f.write_str(word);
        }
        write!(f, "{word} {}", ratio_text(self.ratio, self.lo, self.hi))
    }
}

// ---------------------------------------------------------- formatting

/// The decimals that print a ratio and its interval alike: three
/// significant digits of the ratio (`27.7`, `1.65`, `0.139`), more while
/// the two ends of an interval that differ would print alike (`[0.22,
/// 0.22]`), at most six. One precision for all three numbers is what keeps
/// a printed estimate inside its printed interval: rounding is monotone,
/// so `lo ≤ ratio ≤ hi` stays true once printed (`0.1× [0.13, 0.15]` came
/// from printing the ratio with one decimal and the interval with two).
pub fn ratio_decimals(ratio: f64, lo: f64, hi: f64) -> usize {
    let mag = |x: f64| {
        if x.is_finite() && x != 0.0 {
            x.abs().log10().floor() as i64
        } else {
            0
        }
    };
    let mut d = (2 - mag(ratio)).clamp(0, 6) as usize;
    if lo.is_finite() && hi.is_finite() && lo < hi {
        while d < 6 && format!("{lo:.d$}") == format!("{hi:.d$}") {
            d += 1;
        }
    }
    d
}

/// A ratio and its interval as two cells, `0.139×` and `[0.131, 0.148]`,
/// printed with one precision ([`ratio_decimals`]); `-` for a ratio that
/// is not finite, `no interval` when an end is not known.
pub fn ratio_cells(ratio: f64, lo: f64, hi: f64) -> (String, String) {
    let d = ratio_decimals(ratio, lo, hi);
    let show = |x: f64| {
        if x.is_infinite() {
            "∞".to_owned()
        } else {
            format!("{x:.d$}")
        }
    };
    let r = if ratio.is_finite() {
        format!("{}×", show(ratio))
    } else {
        "-".into()
    };
    let iv = if lo.is_nan() || hi.is_nan() {
        "no interval".into()
    } else {
        format!("[{}, {}]", show(lo), show(hi))
    };
    (r, iv)
}

/// `0.139× [0.131, 0.148]`, or `1.65×` without an interval: the one way
/// every surface prints a ratio (compare, the report, history, ab and the
/// labs' answer lines).
pub fn ratio_text(ratio: f64, lo: f64, hi: f64) -> String {
    let (r, iv) = ratio_cells(ratio, lo, hi);
    if lo.is_nan() || hi.is_nan() {
        r
    } else {
        format!("{r} {iv}")
    }
}

/// Roughly how many repeats per side would settle the verdict (make the
/// widened interval lie wholly beyond or wholly within the threshold),
/// assuming the interval's half-width shrinks as 1/√n and the point
/// estimate stays put; the noise floor does not shrink. The current n when
/// it is already settled; None when it never can (no interval, or the
/// estimate sits on the threshold or within the noise floor of it).
pub fn repeats_to_settle(r: &RatioEstimate, threshold: f64, noise_floor: f64) -> Option<usize> {
    let n = r.n_before.min(r.n_after);
    let positive = |x: f64| x > 0.0 && x.is_finite();
    if n < 2 || !positive(r.ratio) || !positive(r.lo) || !positive(r.hi) {
        return None;
    }
    let t = threshold.abs();
    let c = r.ratio.ln();
    // The band [1 / (1 + t), 1 + t] of `judge`, symmetric on the log scale.
    let (up, down) = ((1.0 + t).ln(), -(1.0 + t).ln());
    // Largest total half-width (log scale) that still settles.
    let target = if c > up {
        c - up
    } else if c < down {
        down - c
    } else {
        (c - down).min(up - c)
    };
    let h = (c - r.lo.ln()).max(r.hi.ln() - c).max(0.0);
    let f = if noise_floor > 0.0 {
        noise_floor.ln_1p()
    } else {
        0.0
    };
    if h.hypot(f) <= target {
        return Some(n);
    }
    let room = target * target - f * f;
    if room.is_nan() || room <= 0.0 {
        return None;
    }
    let need = (n as f64 * h * h / room).ceil();
    (need < 1e9).then(|| (need as usize).max(n))
}

// ------------------------------------------------------------- repeats

/// When to stop repeating a measurement: at least `min` repeats, at most
/// `max` (attempts, counting non-finite ones), and in between until the
/// median's 95% interval is within ± `target_rel_half_width`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    /// Fewest repeats.
    pub min: usize,
    /// Most attempts, non-finite ones counted.
    pub max: usize,
    /// Stop once the median's 95% interval is within ± this share of the
    /// median.
    pub target_rel_half_width: f64,
}

impl Default for Repeats {
    fn default() -> Self {
        Repeats {
            min: 5,
            max: 2 * DEFAULT_REPEATS,
            target_rel_half_width: 0.02,
        }
    }
}

impl Repeats {
    /// True while another repeat is wanted.
    pub fn should_continue(&self, samples: &[f64]) -> bool {
        if samples.len() >= self.max {
            return false;
        }
        let e = Estimate::from_samples(samples);
        if e.n < self.min {
            return true;
        }
        let hw = e.rel_half_width();
        hw.is_nan() || hw > self.target_rel_half_width
    }
}

/// Synthetic noise of a noisy VM for tests: a multiplicative factor,
/// lognormal with `sigma`, times 2–5 with probability `outliers`.
#[cfg(test)]
pub(crate) fn vm_noise(rng: &mut Rng, sigma: f64, outliers: f64) -> f64 {
    let mut x = (sigma * rng.normal()).exp();
    if rng.next_f64() < outliers {
        x *= 2.0 + 3.0 * rng.next_f64();
    }
    x
}

pub mod paired;

#[cfg(test)]
mod tests;
