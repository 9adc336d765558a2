//! Paired comparisons: A and B measured side by side in pairs (A then B or
//! B then A, close in time), judged on the per-pair log ratios ln(B/A).
//!
//! Two runs made minutes apart differ by the machine's drift as well as by
//! the change; a pair's two runs share the drift, so the log ratio within a
//! pair cancels it (Abedi & Brecht's randomized multiple interleaved trials;
//! Chromium Pinpoint's pairwise mode). The estimate is the Hodges–Lehmann
//! one-sample estimate of the log ratios (the median of the Walsh averages
//! (dᵢ + dⱼ)/2, i ≤ j) with Tukey's distribution-free interval from the
//! Wilcoxon signed-rank distribution: exact for up to [`EXACT_PAIRS`] pairs,
//! the normal approximation with continuity correction beyond. It assumes
//! only that the log ratios are symmetric about their centre, which holds
//! for a multiplicative change under any noise that hits both orders alike
//! (the order of each pair is shuffled and balanced for that reason).
//! [`ratio_paired_spread`] widens that interval by the run-to-run spread
//! of the change's own size, which no run's pairs can show
//! ([`CHANGE_SPREAD`]).
//!
//! Invariants: same input, same output (no random numbers); pairs with a
//! non-finite or non-positive side are dropped and counted; `lo ≤ ratio ≤
//! hi` whenever finite; fewer than [`MIN_PAIRS`] pairs give an unknown
//! (NaN) interval, never a zero-width one.

use super::{Method, RatioEstimate, CONFIDENCE, Z_975};
use crate::stats::{median, percentile_sorted};

/// Exact signed-rank tables are used up to this many pairs.
pub const EXACT_PAIRS: usize = 400;

/// Fewest pairs with a 95% signed-rank interval (2⁻⁶ · 2 < 5%).
pub const MIN_PAIRS: usize = 6;

/// Most pairs used (the Walsh averages grow as n²/2).
pub const MAX_PAIRS: usize = 4000;

/// The number of subsets of {1, …, n} with each rank sum t = 0 … n(n+1)/2
/// (the null distribution of the signed-rank statistic T⁺, times 2ⁿ),
/// as f64 (exact up to 2⁵³, relative error ~1e-16 beyond).
fn signed_rank_counts(n: usize) -> Vec<f64> {
    let max = n * (n + 1) / 2;
    let mut c = vec![0.0; max + 1];
    c[0] = 1.0;
    let mut top = 0;
    for k in 1..=n {
        top += k;
        for t in (k..=top).rev() {
            c[t] += c[t - k];
        }
    }
    c
}

/// 1-based rank C of the interval [W(C), W(M+1−C)] over the M = n(n+1)/2
/// sorted Walsh averages: the largest C with P(T⁺ ≤ C − 1) ≤ 2.5%. None
/// when even [min, max] covers less than 95% (n < 6).
pub fn signed_rank_rank(n: usize) -> Option<usize> {
    signed_rank_rank_at(n, CONFIDENCE)
}

/// [`signed_rank_rank`] at another two-sided `confidence` (0.99: a 99%
/// interval).
pub fn signed_rank_rank_at(n: usize, confidence: f64) -> Option<usize> {
    if n < MIN_PAIRS {
        return None;
    }
    let alpha2 = (1.0 - confidence) / 2.0 + 1e-12;
    let m = n * (n + 1) / 2;
    let c = if n <= EXACT_PAIRS {
        let counts = signed_rank_counts(n);
        let total = 2f64.powi(n as i32);
        let mut cdf = 0.0;
        let mut c = 0;
        for (t, k) in counts.iter().enumerate() {
            if cdf + k / total > alpha2 {
                break;
            }
            cdf += k / total;
            c = t + 1;
        }
        c
    } else {
        let nf = n as f64;
        let sd = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
        let z = if confidence == CONFIDENCE {
            Z_975
        } else {
            super::normal_quantile(1.0 - (1.0 - confidence) / 2.0)
        };
        (nf * (nf + 1.0) / 4.0 - z * sd + 0.5).floor().max(0.0) as usize
    };
    (c >= 1).then_some(c.min(m / 2 + 1))
}

/// Two-sided Wilcoxon signed-rank p-value that the differences `d` are
/// centred on 0 (zeros dropped, Pratt would keep them; ties get average
/// ranks and the normal approximation). NaN without a non-zero difference.
pub fn signed_rank_p(d: &[f64]) -> f64 {
    let mut a: Vec<f64> = d
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x != 0.0)
        .collect();
    let n = a.len();
    if n == 0 {
        return f64::NAN;
    }
    a.sort_by(|x, y| x.abs().total_cmp(&y.abs()));
    let mut t_plus = 0.0;
    let mut ties = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && a[j + 1].abs() == a[i].abs() {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let rank = (i + j) as f64 / 2.0 + 1.0;
        t_plus += rank * a[i..=j].iter().filter(|x| **x > 0.0).count() as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    let nf = n as f64;
    if ties == 0.0 && n <= EXACT_PAIRS {
        let c = signed_rank_counts(n);
        let total = 2f64.powi(n as i32);
        let t = t_plus.round() as usize;
        let le: f64 = c[..=t].iter().sum::<f64>() / total;
        let ge: f64 = c[t..].iter().sum::<f64>() / total;
        return (2.0 * le.min(ge)).min(1.0);
    }
    let mean = nf * (nf + 1.0) / 4.0;
    let var = nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0 - ties / 48.0;
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((t_plus - mean).abs() - 0.5).max(0.0) / var.sqrt();
    super::erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// The log ratios ln(b/a) of the usable pairs and how many were dropped
/// (a side non-finite or ≤ 0).
pub fn log_ratios(a: &[f64], b: &[f64]) -> (Vec<f64>, usize) {
    let mut d = Vec::with_capacity(a.len().min(b.len()));
    let mut dropped = a.len().abs_diff(b.len());
    for (&x, &y) in a.iter().zip(b) {
        if x.is_finite() && y.is_finite() && x > 0.0 && y > 0.0 {
            d.push((y / x).ln());
        } else {
            dropped += 1;
        }
    }
    if d.len() > MAX_PAIRS {
        dropped += d.len() - MAX_PAIRS;
        d.truncate(MAX_PAIRS);
    }
    (d, dropped)
}

/// The ratio B / A of paired measurements (`a[i]` and `b[i]` one pair):
/// the Hodges–Lehmann estimate of the log ratios with the signed-rank 95%
/// interval, and the signed-rank p-value. `before_median`/`after_median`
/// are A's and B's medians; `n_before = n_after` = the usable pairs.
pub fn ratio_paired(a: &[f64], b: &[f64]) -> RatioEstimate {
    ratio_paired_at(a, b, CONFIDENCE)
}

/// [`ratio_paired`] with a `confidence` interval (0.99: 99%).
pub fn ratio_paired_at(a: &[f64], b: &[f64], confidence: f64) -> RatioEstimate {
    ratio_paired_spread(a, b, confidence, 0.0)
}

/// How much a change's own size varies between runs, as a share of the
/// change: the default of `ab --change-spread` (3.5%). A paired ratio
/// cancels the machine's drift in the level of both sides, but not the
/// drift of the ratio itself: a fixed added cost is a larger share of a
/// round trip when the machine runs fast. On the 2-vCPU host the ten
/// estimates of one 3% change (mux, shared-CPU duet, 10-40 pairs each)
/// spread from 1.0265 to 1.0300, a standard deviation of 3.5% of the
/// change, where each run's interval was ±0.14% (±5% of the change), and
/// two 40-pair runs minutes apart gave 1.0282 [1.0276, 1.0289] and 1.0291
/// [1.0284, 1.0297]: disjoint. Inside one run the pairs showed no
/// dependence that a block or batch interval could use (lag-1
/// autocorrelation of the log ratios −0.23 to 0.03; the halves' estimates
/// within 0.1% of each other), so the spread lives between runs, where no
/// run can see it, and enters as this.
pub const CHANGE_SPREAD: f64 = 0.035;

/// [`ratio_paired_at`] whose interval also holds the run-to-run spread of
/// the change's size: `spread` is its standard deviation as a share of
/// the change (ln of the ratio), and each side of the signed-rank interval
/// (on the log scale) becomes √(side² + (z · spread · |ln ratio|)²), z the
/// normal quantile of `confidence`. It widens nothing when there is no
/// change (an A/A keeps its interval) and in proportion to the change
/// when there is one; the estimate and the p-value stay the signed-rank
/// ones.
pub fn ratio_paired_spread(a: &[f64], b: &[f64], confidence: f64, spread: f64) -> RatioEstimate {
    let mut r = ratio_paired_core(a, b, confidence);
    if r.method == Method::SignedRank && spread > 0.0 && spread.is_finite() {
        let c = r.ratio.ln();
        let f = super::normal_quantile(1.0 - (1.0 - confidence) / 2.0) * spread * c.abs();
        let below = c - r.lo.ln();
        let above = r.hi.ln() - c;
        r.lo = (c - below.hypot(f)).exp();
        r.hi = (c + above.hypot(f)).exp();
    }
    r
}

fn ratio_paired_core(a: &[f64], b: &[f64], confidence: f64) -> RatioEstimate {
    let (d, _) = log_ratios(a, b);
    let n = d.len();
    let med = |xs: &[f64]| {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        median(&mut v)
    };
    let mut out = RatioEstimate {
        ratio: f64::NAN,
        lo: f64::NAN,
        hi: f64::NAN,
        method: Method::Unknown,
        p_value: f64::NAN,
        before_median: med(a),
        after_median: med(b),
        n_before: n,
        n_after: n,
    };
    if n == 0 {
        return out;
    }
    let mut w: Vec<f64> = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            w.push((d[i] + d[j]) / 2.0);
        }
    }
    w.sort_unstable_by(f64::total_cmp);
    let centre = percentile_sorted(&w, 0.5);
    out.ratio = centre.exp();
    out.p_value = signed_rank_p(&d);
    match signed_rank_rank_at(n, confidence) {
        Some(c) => {
            let m = w.len();
            out.lo = w[c - 1].min(centre).exp();
            out.hi = w[m - c].max(centre).exp();
            out.method = Method::SignedRank;
        }
        None => out.method = Method::Single,
    }
    out
}

/// Roughly how many pairs would make the interval of `r` (from `n` pairs)
/// lie wholly beyond or wholly within ±`threshold`, if its half-width
/// shrinks as 1/√n and the estimate stays put. `n` when it already does;
/// None when no number would (no interval, or the estimate sits on the
/// threshold).
pub fn pairs_to_settle(r: &RatioEstimate, threshold: f64) -> Option<usize> {
    // The unpaired rule with no floor: pairing leaves no between-run noise.
    if r.n_before < MIN_PAIRS {
        return None;
    }
    super::repeats_to_settle(r, threshold, 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::{judge, Direction, Rng, Verdict};

    #[test]
    fn signed_rank_counts_match_small_tables() {
        // n = 3: subsets of {1,2,3}: sums 0,1,2,3,3,4,5,6.
        assert_eq!(
            signed_rank_counts(3),
            vec![1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0]
        );
        let c = signed_rank_counts(10);
        assert_eq!(c.iter().sum::<f64>(), 1024.0);
        assert_eq!(c.len(), 56);
    }

    #[test]
    fn a_99_percent_rank_matches_published_critical_values() {
        // Two-sided 1% critical values of T: n = 8: 0, 10: 3, 20: 37, 30:
        // 109 (standard tables); the rank is crit + 1.
        assert_eq!(signed_rank_rank_at(7, 0.99), None);
        assert_eq!(signed_rank_rank_at(8, 0.99), Some(1));
        assert_eq!(signed_rank_rank_at(10, 0.99), Some(4));
        assert_eq!(signed_rank_rank_at(20, 0.99), Some(38));
        assert_eq!(signed_rank_rank_at(30, 0.99), Some(110));
        let (a, b): (Vec<f64>, Vec<f64>) = (0..30)
            .map(|i| (100.0, 100.0 + (i % 7) as f64 - 3.0))
            .unzip();
        let (r95, r99) = (ratio_paired(&a, &b), ratio_paired_at(&a, &b, 0.99));
        assert!(r99.lo <= r95.lo && r99.hi >= r95.hi && r99.lo < r99.hi);
    }

    #[test]
    fn signed_rank_rank_matches_published_critical_values() {
        // Two-sided 5% critical values of T (reject when T ≤ crit):
        // n = 6: 0, 8: 3, 10: 8, 20: 52, 30: 137 (standard tables); the
        // interval's rank C is crit + 1.
        assert_eq!(signed_rank_rank(5), None);
        assert_eq!(signed_rank_rank(6), Some(1));
        assert_eq!(signed_rank_rank(8), Some(4));
        assert_eq!(signed_rank_rank(10), Some(9));
        assert_eq!(signed_rank_rank(20), Some(53));
        assert_eq!(signed_rank_rank(30), Some(138));
        // The normal approximation agrees with the exact table near the switch.
        let nf = 400.0f64;
        let sd = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
        let approx = (nf * (nf + 1.0) / 4.0 - Z_975 * sd + 0.5).floor() as usize;
        let exact = signed_rank_rank(400).unwrap();
        assert!(approx.abs_diff(exact) <= 2, "{approx} vs {exact}");
    }

    #[test]
    fn signed_rank_p_is_exact_for_all_positive() {
        // All 8 differences positive: p = 2 · 2⁻⁸.
        let d: Vec<f64> = (1..=8).map(|i| i as f64).collect();
        assert!((signed_rank_p(&d) - 2.0 / 256.0).abs() < 1e-12);
        assert!(signed_rank_p(&[]).is_nan());
        assert_eq!(signed_rank_p(&[1.0, -1.0]), 1.0);
    }

    #[test]
    fn paired_ratio_recovers_a_known_change_under_drift() {
        // A drifting machine (each pair's level varies 2×) with 1% noise
        // per run: the paired ratio sees the 3% change, the drift cancels.
        let mut rng = Rng::new(7);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..30 {
            let level = 1.0 + rng.next_f64();
            a.push(1000.0 * level * (0.01 * rng.normal()).exp());
            b.push(1030.0 * level * (0.01 * rng.normal()).exp());
        }
        let r = ratio_paired(&a, &b);
        assert_eq!(r.method, Method::SignedRank);
        assert!(r.lo <= 1.03 && 1.03 <= r.hi, "{r:?}");
        assert!(r.lo > 1.015, "{r:?}");
        assert_eq!(judge(&r, 0.01, 0.0, Direction::Lower), Verdict::Regressed);
        // The same data unpaired cannot tell.
        let u = crate::estimate::ratio(&a, &b);
        assert_eq!(
            judge(&u, 0.01, 0.0, Direction::Lower),
            Verdict::Inconclusive
        );
    }

    #[test]
    fn paired_aa_is_no_change_and_covers_one() {
        let mut rng = Rng::new(11);
        let mut covered = 0;
        let trials = 400;
        for _ in 0..trials {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..12 {
                let level = 1.0 + 3.0 * rng.next_f64();
                a.push(level * (0.02 * rng.normal()).exp());
                b.push(level * (0.02 * rng.normal()).exp());
            }
            let r = ratio_paired(&a, &b);
            if r.lo <= 1.0 && 1.0 <= r.hi {
                covered += 1;
            }
        }
        // Nominal 95% (the exact interval covers at least that): allow
        // sampling error of 400 trials.
        assert!(
            covered >= trials * 92 / 100,
            "covered {covered} of {trials}"
        );
    }

    #[test]
    fn the_change_spread_covers_a_change_whose_size_moves_between_runs() {
        // The mux proof's shape: each run's change is 3% with its size
        // moving by 3.5% of itself from run to run (a fixed added cost on a
        // machine whose speed comes and goes), 12 pairs a run with 0.23%
        // of noise per pair. The signed-rank interval alone covers the
        // change over all runs (the truth) about 3 runs in 4; with the
        // spread, at least 92 in 100.
        let mut rng = Rng::new(52);
        let truth = 1.03f64.ln();
        let runs = 400;
        let (mut plain, mut spread) = (0, 0);
        for _ in 0..runs {
            let run = truth * (1.0 + CHANGE_SPREAD * rng.normal());
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..12 {
                let level = 100.0 * (1.0 + 0.05 * rng.next_f64());
                a.push(level);
                b.push(level * (run + 0.0023 * rng.normal()).exp());
            }
            let inside = |r: &RatioEstimate| r.lo.ln() <= truth && truth <= r.hi.ln();
            let p = ratio_paired(&a, &b);
            let s = ratio_paired_spread(&a, &b, CONFIDENCE, CHANGE_SPREAD);
            assert!(
                s.lo <= p.lo && s.hi >= p.hi && s.ratio == p.ratio,
                "{p:?} {s:?}"
            );
            plain += inside(&p) as usize;
            spread += inside(&s) as usize;
        }
        assert!(plain < runs * 85 / 100, "plain covered {plain} of {runs}");
        assert!(
            spread >= runs * 92 / 100,
            "with the spread {spread} of {runs}"
        );
    }

    #[test]
    fn the_change_spread_leaves_an_aa_interval_as_it_was() {
        // No change, no widening: the spread is a share of the change.
        let mut rng = Rng::new(3);
        let (a, b): (Vec<f64>, Vec<f64>) = (0..20)
            .map(|_| (100.0, 100.0 * (0.01 * rng.normal()).exp()))
            .unzip();
        let p = ratio_paired(&a, &b);
        let s = ratio_paired_spread(&a, &b, CONFIDENCE, CHANGE_SPREAD);
        let c = p.ratio.ln().abs();
        // Each side grows by at most z · spread · |ln ratio|.
        let most = Z_975 * CHANGE_SPREAD * c;
        assert!((p.lo.ln() - s.lo.ln()).abs() <= most + 1e-12, "{p:?} {s:?}");
        assert!((s.hi.ln() - p.hi.ln()).abs() <= most + 1e-12, "{p:?} {s:?}");
        assert_eq!(ratio_paired_spread(&a, &b, CONFIDENCE, 0.0).lo, p.lo);
        // Below six pairs there is still no interval to widen.
        let few = ratio_paired_spread(&a[..4], &b[..4], CONFIDENCE, CHANGE_SPREAD);
        assert!(few.lo.is_nan() && few.hi.is_nan());
    }

    #[test]
    fn paired_drops_unusable_pairs_and_says_unknown_below_six() {
        let (d, dropped) = log_ratios(&[1.0, 0.0, f64::NAN, 2.0], &[1.0, 1.0, 1.0, 2.0]);
        assert_eq!((d.len(), dropped), (2, 2));
        let r = ratio_paired(&[1.0, 2.0, 3.0], &[1.1, 2.2, 3.3]);
        assert!((r.ratio - 1.1).abs() < 1e-9);
        assert!(r.lo.is_nan() && r.hi.is_nan());
        assert_eq!(r.method, Method::Single);
        assert_eq!(
            judge(&r, 0.05, 0.0, Direction::Lower),
            Verdict::Inconclusive
        );
        let e = ratio_paired(&[], &[]);
        assert_eq!(e.n_before, 0);
        assert_eq!(judge(&e, 0.05, 0.0, Direction::Lower), Verdict::NoSamples);
    }

    #[test]
    fn pairs_to_settle_scales_with_the_square_of_the_width() {
        let r = RatioEstimate {
            ratio: 1.0,
            lo: 0.96,
            hi: 1.04,
            method: Method::SignedRank,
            p_value: 1.0,
            before_median: 1.0,
            after_median: 1.0,
            n_before: 10,
            n_after: 10,
        };
        // Half-width ~4%, threshold 2%: about 4× the pairs.
        let need = pairs_to_settle(&r, 0.02).unwrap();
        assert!((38..=44).contains(&need), "{need}");
        assert_eq!(pairs_to_settle(&r, 0.05), Some(10));
    }
}
