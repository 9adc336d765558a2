#!/usr/bin/env python3
"""The intervals the bench scripts print, computed the way commbench's
compare computes them (crates/core/src/estimate): the median of repeats
with its distribution-free 95% interval (order statistics), and the ratio
of two sets of interleaved repeats with the Hodges-Lehmann estimate on log
values and its 95% interval from the Mann-Whitney critical value (normal
approximation), and the paired ratio of repeats made side by side in pairs
(crates/core/src/estimate/paired.rs: the Hodges-Lehmann estimate of the
per-pair log ratios with its exact Wilcoxon signed-rank interval). No
third-party modules.

As a library:  from stats import median_ci, ratio_ci, paired_ratio_ci, fmt_ratio
As a command:  bench/stats.py median X1 X2 ...
               bench/stats.py ratio "B1 B2 ..." "A1 A2 ..."   (A / B, i.e. after / before)
"""
import math
import statistics
import sys

Z95 = 1.959963984540054


def median_ci(xs):
    """(median, lo, hi) of finite samples; the interval is the pair of
    order statistics whose binomial coverage of the median is >= 95%
    (None bounds below 6 samples, where no such pair exists)."""
    v = sorted(x for x in xs if isinstance(x, (int, float)) and math.isfinite(x))
    n = len(v)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    med = statistics.median(v)
    # Largest k with P(Bin(n, 1/2) < k) <= 2.5%: the interval [v[k-1], v[n-k]].
    k, cum = 0, 0.0
    for j in range(n + 1):
        p = math.comb(n, j) / 2**n
        if cum + p > 0.025:
            break
        cum += p
        k = j + 1
    if k == 0 or k > n - k + 1:
        return (med, None, None)
    return (med, v[k - 1], v[n - k])


def ratio_ci(before, after):
    """(ratio, lo, hi) of after / before: the Hodges-Lehmann shift of the
    log values and its 95% interval (Moses' distribution-free interval with
    the normal approximation to the Mann-Whitney U critical value). None
    bounds when a side has fewer than 2 positive samples."""
    b = [math.log(x) for x in before if isinstance(x, (int, float)) and x > 0 and math.isfinite(x)]
    a = [math.log(x) for x in after if isinstance(x, (int, float)) and x > 0 and math.isfinite(x)]
    if not a or not b:
        return (math.nan, None, None)
    d = sorted(y - x for y in a for x in b)
    est = math.exp(statistics.median(d))
    m, n = len(a), len(b)
    if m < 2 or n < 2:
        return (est, None, None)
    c = m * n / 2 - Z95 * math.sqrt(m * n * (m + n + 1) / 12)
    k = max(int(math.floor(c)), 0)
    if k >= len(d) - k:
        return (est, None, None)
    return (est, math.exp(d[k]), math.exp(d[len(d) - 1 - k]))


def signed_rank_rank(n):
    """1-based rank C of the interval [W(C), W(M+1-C)] over the M = n(n+1)/2
    sorted Walsh averages: the largest C with P(T+ <= C - 1) <= 2.5%, from
    the exact null distribution of the signed-rank statistic. None below 6
    pairs, where even [min, max] covers less than 95%."""
    if n < 6:
        return None
    counts = [1] + [0] * (n * (n + 1) // 2)
    top = 0
    for k in range(1, n + 1):
        top += k
        for t in range(top, k - 1, -1):
            counts[t] += counts[t - k]
    total, cdf, c = 2**n, 0, 0
    for t, k in enumerate(counts):
        if (cdf + k) / total > 0.025 + 1e-12:
            break
        cdf += k
        c = t + 1
    return c if c >= 1 else None


def paired_ratio_ci(pairs):
    """(ratio, lo, hi) of after / before over pairs (before, after) measured
    side by side: the Hodges-Lehmann estimate of the log ratios (median of
    the Walsh averages) with its 95% signed-rank interval. A pair's two runs
    share the machine's drift, which the ratio within the pair cancels.
    Pairs with a non-positive or non-finite side are dropped; None bounds
    below 6 pairs."""
    d = [math.log(a / b) for b, a in pairs
         if all(isinstance(x, (int, float)) and x > 0 and math.isfinite(x) for x in (a, b))]
    if not d:
        return (math.nan, None, None)
    w = sorted((d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d)))
    est = math.exp(statistics.median(w))
    c = signed_rank_rank(len(d))
    if c is None:
        return (est, None, None)
    return (est, math.exp(w[c - 1]), math.exp(w[len(w) - c]))


def fmt_ratio(r):
    est, lo, hi = r
    if lo is None or hi is None:
        return f"{est:.2f}× [interval needs more repeats]"
    return f"{est:.2f}× [{lo:.2f}, {hi:.2f}]"


def fmt_median(m, digits=3):
    med, lo, hi = m
    if lo is None or hi is None:
        return f"{med:.{digits}f} [n<6: no interval]"
    return f"{med:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "median":
        print(fmt_median(median_ci([float(x) for x in sys.argv[2:]])))
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "ratio":
        before = [float(x) for x in sys.argv[2].split()]
        after = [float(x) for x in sys.argv[3].split()]
        print(fmt_ratio(ratio_ci(before, after)))
        return 0
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
