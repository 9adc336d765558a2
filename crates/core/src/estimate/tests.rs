//! Tests of the estimates, ratios and verdicts, with calibration runs on
//! synthetic noise like this machine's (the `#[ignore]`d ones print tables).

use super::Rng;
use super::*;
use proptest::prelude::*;

/// Equal, NaN included (JSON writes NaN as null).
fn same<T: Serialize>(a: &T, b: &T) -> bool {
    serde_json::to_string(a).unwrap() == serde_json::to_string(b).unwrap()
}

fn draw(rng: &mut Rng, n: usize, scale: f64, sigma: f64) -> Vec<f64> {
    (0..n)
        .map(|_| 100.0 * scale * vm_noise(rng, sigma, 0.05))
        .collect()
}

#[test]
fn prng_is_fixed() {
    let mut a = Rng::new(1);
    let mut b = Rng::new(1);
    let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
    let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
    assert_eq!(xs, ys);
    let mut r = Rng::new(7);
    for _ in 0..10_000 {
        let u = r.next_f64();
        assert!((0.0..1.0).contains(&u));
        assert!(r.below(3) < 3);
    }
    let mut s = 0u64;
    assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
}

#[test]
fn empty_single_and_nonfinite() {
    let e = Estimate::from_samples(&[]);
    assert_eq!((e.n, e.method), (0, Method::Unknown));
    assert!(e.median.is_nan() && e.lo.is_nan() && e.rel_width().is_nan());
    let e = Estimate::from_samples(&[f64::NAN, 3.0, f64::INFINITY]);
    assert_eq!((e.n, e.dropped, e.method), (1, 2, Method::Single));
    assert_eq!((e.lo, e.median, e.hi), (3.0, 3.0, 3.0));
    assert_eq!(e.samples, vec![3.0]);
}

#[test]
fn order_statistic_ranks() {
    assert_eq!(order_statistic_rank(5), None);
    assert_eq!(order_statistic_rank(6), Some(1));
    assert_eq!(order_statistic_rank(9), Some(2));
    assert_eq!(order_statistic_rank(10), Some(2));
    // n = 20: P(B ≤ 5) = 0.0207, P(B ≤ 6) = 0.0577.
    assert_eq!(order_statistic_rank(20), Some(6));
    // Large n: about n/2 − 0.98·√n.
    let j = order_statistic_rank(10_000).unwrap();
    assert!((4900..=4903).contains(&j), "{j}");
    let e = Estimate::from_samples(&(1..=10).map(f64::from).collect::<Vec<_>>());
    assert_eq!(e.method, Method::OrderStatistic);
    assert_eq!((e.lo, e.median, e.hi), (2.0, 5.5, 9.0));
}

#[test]
fn small_n_bootstrap() {
    let e = Estimate::from_samples(&[10.0, 11.0, 12.0, 13.0, 40.0]);
    assert_eq!(e.method, Method::BootstrapPercentile);
    assert!(e.lo <= 12.0 && e.hi >= 12.0 && e.lo >= 10.0 && e.hi <= 40.0);
    assert_eq!(
        e,
        Estimate::from_samples(&[40.0, 13.0, 12.0, 11.0, 10.0]).with_samples(e.samples.clone())
    );
}

impl Estimate {
    fn with_samples(mut self, s: Vec<f64>) -> Self {
        self.samples = s;
        self
    }
}

#[test]
fn many_samples_are_sketched() {
    let xs: Vec<f64> = (0..1000).rev().map(f64::from).collect();
    let e = Estimate::from_samples(&xs);
    assert_eq!(e.n, 1000);
    assert_eq!(e.samples.len(), MAX_SAMPLES);
    assert_eq!(e.samples[0], 0.0);
    assert_eq!(*e.samples.last().unwrap(), 999.0);
    assert!(e.samples.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn record_fields_round_trip() {
    let mut m = Map::new();
    let e = Estimate::from_samples(&[5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
    attach(&mut m, "ns", &e);
    let keys: Vec<&str> = m.keys().map(String::as_str).collect();
    assert_eq!(keys, ["ns", "ns_lo", "ns_hi", "ns_n", "ns_samples"]);
    assert_eq!(m["ns"], serde_json::json!(8.0));
    assert_eq!(read(&m, "ns").unwrap(), e);
    // An old record: only the value.
    let mut old = Map::new();
    old.insert("ns".into(), serde_json::json!(42.5));
    let u = read(&old, "ns").unwrap();
    assert_eq!((u.median, u.n, u.method), (42.5, 0, Method::Unknown));
    assert!(u.lo.is_nan() && u.hi.is_nan());
    assert!(read(&old, "missing").is_none());
    // NaN survives as null.
    let mut m = Map::new();
    attach(&mut m, "x", &Estimate::empty());
    assert!(!serde_json::to_string(&m).unwrap().contains("NaN"));
    let back = read(&m, "x").unwrap();
    assert!(back.median.is_nan() && back.n == 0);
}

#[test]
fn json_round_trip() {
    for e in [
        Estimate::from_samples(&[1.0, 2.0, 3.0]),
        Estimate::unknown(3.5),
        Estimate::empty(),
    ] {
        let j = e.to_json();
        assert!(!j.to_string().contains("NaN"));
        let back = Estimate::from_json(&j).unwrap();
        assert_eq!(back.samples, e.samples);
        assert_eq!(back.method, e.method);
        assert!(back.lo.total_cmp(&e.lo).is_eq() || (back.lo.is_nan() && e.lo.is_nan()));
    }
    assert_eq!(
        Estimate::from_samples(&[1.0; 8]).to_json()["method"],
        "order-statistic"
    );
}

#[test]
fn mann_whitney_known_values() {
    // Complete separation, 5 v 5: 2/252.
    let a = [1.0, 2.0, 3.0, 4.0, 5.0];
    let b = [6.0, 7.0, 8.0, 9.0, 10.0];
    assert!((mann_whitney_p(&a, &b) - 2.0 / 252.0).abs() < 1e-12);
    assert!((mann_whitney_p(&b, &a) - 2.0 / 252.0).abs() < 1e-12);
    assert!(mann_whitney_p(&a, &a.map(|x| x + 0.5)) > 0.5);
    // Identical constant samples: p = 1.
    assert_eq!(mann_whitney_p(&[3.0; 6], &[3.0; 6]), 1.0);
    // Normal approximation: 30 v 30 shifted apart.
    let x: Vec<f64> = (0..30).map(f64::from).collect();
    let y: Vec<f64> = (0..30).map(|i| f64::from(i) + 100.0).collect();
    assert!(mann_whitney_p(&x, &y) < 1e-9);
    assert!(mann_whitney_p(&x, &x) > 0.9);
    assert!(mann_whitney_p(&[], &x).is_nan());
    let c = u_counts(5, 5);
    assert_eq!(c.iter().sum::<f64>(), 252.0);
    assert_eq!(&c[..4], &[1.0, 1.0, 2.0, 3.0]);
}

#[test]
fn moses_ranks() {
    assert_eq!(moses_rank(3, 3), None);
    assert_eq!(moses_rank(4, 4), Some(1));
    assert_eq!(moses_rank(5, 5), Some(3));
    assert_eq!(moses_rank(10, 10), Some(24));
    // The normal approximation continues the exact table.
    let k = moses_rank(30, 30).unwrap();
    assert!((315..=320).contains(&k), "{k}");
}

#[test]
fn ratio_basics() {
    let b = [100.0, 101.0, 99.0, 102.0, 98.0, 100.5];
    let a: Vec<f64> = b.iter().map(|x| x * 1.2).collect();
    let r = ratio(&b, &a);
    assert_eq!(r.method, Method::HodgesLehmann);
    assert!((r.ratio - 1.2).abs() < 1e-9, "{r:?}");
    assert!(r.lo <= r.ratio && r.ratio <= r.hi);
    assert!(r.p_value < 0.01);
    let boot = ratio_bootstrap(&b, &a);
    assert_eq!(boot.method, Method::BootstrapPercentile);
    assert!((boot.ratio - 1.2).abs() < 1e-9);
    // Too few for Moses: bootstrap.
    assert_eq!(
        ratio(&[1.0, 2.0, 3.0], &[2.0, 3.0, 4.0]).method,
        Method::BootstrapPercentile
    );
    // Zeros: bootstrap of medians.
    assert_eq!(
        ratio(&[0.0, 2.0, 3.0, 4.0], &[2.0, 3.0, 4.0, 5.0]).method,
        Method::BootstrapPercentile
    );
    let one = ratio(&[2.0], &[3.0]);
    assert_eq!(one.method, Method::Single);
    assert!(one.lo.is_nan());
    assert_eq!(
        judge(&one, 0.05, 0.0, Direction::Lower),
        Verdict::Inconclusive
    );
    let none = ratio(&[], &[3.0]);
    assert_eq!(
        judge(&none, 0.05, 0.0, Direction::Lower),
        Verdict::NoSamples
    );
}

fn fake(ratio: f64, lo: f64, hi: f64) -> RatioEstimate {
    RatioEstimate {
        ratio,
        lo,
        hi,
        method: Method::HodgesLehmann,
        p_value: 0.01,
        before_median: 1.0,
        after_median: ratio,
        n_before: 10,
        n_after: 10,
    }
}

#[test]
fn verdicts() {
    let up = fake(1.12, 1.08, 1.17);
    assert_eq!(judge(&up, 0.05, 0.0, Direction::Lower), Verdict::Regressed);
    assert_eq!(judge(&up, 0.05, 0.0, Direction::Higher), Verdict::Improved);
    assert_eq!(judge(&up, 0.05, 0.0, Direction::Unknown), Verdict::Changed);
    let down = fake(0.88, 0.84, 0.93);
    assert_eq!(judge(&down, 0.05, 0.0, Direction::Lower), Verdict::Improved);
    assert_eq!(
        judge(&down, 0.05, 0.0, Direction::Higher),
        Verdict::Regressed
    );
    assert_eq!(
        judge(&fake(1.0, 0.97, 1.04), 0.05, 0.0, Direction::Lower),
        Verdict::NoChange
    );
    assert_eq!(
        judge(&fake(1.06, 1.02, 1.1), 0.05, 0.0, Direction::Lower),
        Verdict::Inconclusive
    );
    // The noise floor widens: 1.08 → 1.12 is 3.6%, plus the floor in
    // quadrature.
    // (5% still leaves lo at 1.054.)
    assert_eq!(judge(&up, 0.05, 0.05, Direction::Lower), Verdict::Regressed);
    assert_eq!(
        judge(&up, 0.05, 0.07, Direction::Lower),
        Verdict::Inconclusive
    );
    let (lo, hi) = widen(&up, 0.05);
    assert!(lo < 1.08 && hi > 1.17);
    let shown = Judgement::new(&up, 0.05, 0.0, Direction::Lower);
    assert_eq!(shown.to_string(), "slower 1.12× [1.08, 1.17]");
    assert_eq!(format!("{shown:#}"), "worse 1.12× [1.08, 1.17]");
    let tight = Judgement::new(&fake(1.001, 0.998, 1.004), 0.05, 0.0, Direction::Lower);
    assert_eq!(tight.to_string(), "no change 1.001× [0.998, 1.004]");
    let old = ratio_of(&Estimate::unknown(10.0), &Estimate::unknown(11.2));
    let j = Judgement::new(&old, 0.05, 0.0, Direction::Lower);
    assert_eq!(j.verdict, Verdict::NoSamples);
    assert_eq!(j.to_string(), "no samples 1.12×");
    assert_eq!(
        serde_json::to_value(Verdict::NoChange).unwrap(),
        serde_json::json!("no_change")
    );
    assert_eq!(
        serde_json::to_value(Direction::Higher).unwrap(),
        serde_json::json!("higher")
    );
}

#[test]
fn settle_estimate() {
    // Straddles 1.05; half-width ln(1.12/1.03) = 0.084, room to 1.05:
    // ln(1.12/1.05) = 0.0645 → n·(0.084/0.0645)² ≈ 1.7·n.
    let r = fake(1.12, 1.03, 1.20);
    let n = repeats_to_settle(&r, 0.05, 0.0).unwrap();
    assert!((17..=18).contains(&n), "{n}");
    assert_eq!(
        repeats_to_settle(&fake(1.12, 1.08, 1.17), 0.05, 0.0),
        Some(10)
    );
    // Right on the threshold: never.
    assert_eq!(repeats_to_settle(&fake(1.05, 1.0, 1.1), 0.05, 0.0), None);
    // A noise floor larger than the distance to the threshold: never.
    assert_eq!(repeats_to_settle(&r, 0.05, 0.10), None);
}

#[test]
fn repeats_policy() {
    let p = Repeats::default();
    assert!(p.should_continue(&[]));
    assert!(p.should_continue(&[1.0; 4]));
    assert!(!p.should_continue(&[1.0; 6]));
    // Wide spread keeps going until max.
    let wide: Vec<f64> = (0..10).map(|i| 100.0 + 10.0 * (i % 3) as f64).collect();
    assert!(p.should_continue(&wide));
    assert!(!p.should_continue(&vec![f64::NAN; p.max]));
}

/// A/A false alarms and 10% detection rates over `trials`.
fn rates(
    f: fn(&[f64], &[f64]) -> RatioEstimate,
    n: usize,
    sigma: f64,
    shift: f64,
    trials: usize,
) -> (f64, f64) {
    let mut rng = Rng::new(0xdead_beef ^ ((n as u64) << 8) ^ ((sigma * 1000.0) as u64));
    let (mut flagged, mut covered) = (0, 0);
    for _ in 0..trials {
        let b = draw(&mut rng, n, 1.0, sigma);
        let a = draw(&mut rng, n, shift, sigma);
        let r = f(&b, &a);
        let v = judge(&r, 0.05, 0.0, Direction::Lower);
        let hit = if shift > 1.0 {
            v == Verdict::Regressed
        } else {
            v.is_change()
        };
        flagged += hit as usize;
        covered += (r.lo <= shift && shift <= r.hi) as usize;
    }
    (
        flagged as f64 / trials as f64,
        covered as f64 / trials as f64,
    )
}

#[test]
fn aa_false_alarms_at_five_repeats() {
    for sigma in [0.1, 0.2, 0.3] {
        let (fa, cov) = rates(ratio, 5, sigma, 1.0, 400);
        assert!(fa <= 0.05, "σ {sigma}: false alarms {fa}");
        assert!(cov >= 0.93, "σ {sigma}: coverage {cov}");
    }
}

#[test]
fn ten_percent_detected_at_default_repeats() {
    let (det, cov) = rates(ratio, DEFAULT_REPEATS, 0.03, 1.10, 400);
    assert!(det >= 0.90, "detection {det}");
    assert!(cov >= 0.93, "coverage {cov}");
    let (fa, _) = rates(ratio, DEFAULT_REPEATS, 0.03, 1.0, 400);
    assert!(fa <= 0.05, "false alarms {fa}");
}

#[test]
fn intervals_shrink_with_more_samples() {
    let mut rng = Rng::new(99);
    let mean_width = |rng: &mut Rng, n: usize| {
        (0..100)
            .map(|_| Estimate::from_samples(&draw(rng, n, 1.0, 0.1)).rel_width())
            .sum::<f64>()
            / 100.0
    };
    let w10 = mean_width(&mut rng, 10);
    let w40 = mean_width(&mut rng, 40);
    let w160 = mean_width(&mut rng, 160);
    assert!(w40 < 0.75 * w10 && w160 < 0.75 * w40, "{w10} {w40} {w160}");
    let mut rng = Rng::new(5);
    let rw = |rng: &mut Rng, n: usize| {
        (0..50)
            .map(|_| {
                let r = ratio(&draw(rng, n, 1.0, 0.1), &draw(rng, n, 1.0, 0.1));
                (r.hi / r.lo).ln()
            })
            .sum::<f64>()
    };
    let (r5, r20) = (rw(&mut rng, 5), rw(&mut rng, 20));
    assert!(r20 < 0.6 * r5, "{r5} {r20}");
}

/// Prints the table behind [`DEFAULT_REPEATS`]:
/// `cargo test -p commbench-core --release calibration -- --ignored --nocapture`.
#[test]
#[ignore]
fn calibration() {
    type F = fn(&[f64], &[f64]) -> RatioEstimate;
    let methods: [(&str, F); 2] = [
        ("hodges-lehmann", ratio_hodges_lehmann),
        ("bootstrap", ratio_bootstrap),
    ];
    println!("method          sigma   n  A/A-flag  A/A-cover  1.10-detect  1.10-cover");
    for (name, f) in methods {
        for sigma in [0.02, 0.03, 0.05, 0.1, 0.2, 0.3] {
            for n in [4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 50, 100, 200] {
                let (fa, c0) = rates(f, n, sigma, 1.0, 400);
                let (det, c1) = rates(f, n, sigma, 1.10, 400);
                println!("{name:<15} {sigma:5.2} {n:3}  {fa:8.4}  {c0:9.4}  {det:11.4}  {c1:10.4}");
            }
        }
    }
}

proptest! {
    #[test]
    fn interval_contains_median(xs in prop::collection::vec(-1e6f64..1e6, 0..100)) {
        let e = Estimate::from_samples(&xs);
        prop_assert_eq!(e.n, xs.len());
        if e.n > 0 {
            prop_assert!(e.lo <= e.median && e.median <= e.hi, "{:?}", e);
            let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
            let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(min <= e.lo && e.hi <= max);
        }
        prop_assert!(e.samples.len() <= MAX_SAMPLES);
        prop_assert!(same(&e, &Estimate::from_samples(&xs)));
    }

    #[test]
    fn duplicating_samples_never_widens(xs in prop::collection::vec(1f64..1e6, 1..40)) {
        let e = Estimate::from_samples(&xs);
        let four: Vec<f64> = xs.iter().chain(&xs).chain(&xs).chain(&xs).copied().collect();
        let e4 = Estimate::from_samples(&four);
        prop_assert!(e4.hi - e4.lo <= e.hi - e.lo, "{:?} {:?}", e, e4);
    }

}

proptest! {
    // Each case runs several bootstraps of 2 000 resamples: keep the
    // debug-build test quick.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn ratio_invariants(
        b in prop::collection::vec(0.1f64..1e3, 1..30),
        a in prop::collection::vec(0.1f64..1e3, 1..30),
        k in 1e-3f64..1e3,
    ) {
        for f in [ratio, ratio_bootstrap] {
            let r = f(&b, &a);
            prop_assert!(r.ratio > 0.0);
            if r.lo.is_finite() {
                prop_assert!(r.lo <= r.ratio && r.ratio <= r.hi, "{:?}", r);
            }
            prop_assert!(r.p_value >= 0.0 && r.p_value <= 1.0);
            // Deterministic, whatever the order.
            let mut rb = b.clone();
            rb.reverse();
            prop_assert!(same(&r, &f(&rb, &a)));
            // Scale invariant: multiplying both sides changes nothing.
            let s = f(
                &b.iter().map(|x| x * k).collect::<Vec<_>>(),
                &a.iter().map(|x| x * k).collect::<Vec<_>>(),
            );
            let close = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * x.abs().max(1.0);
            prop_assert!(close(r.ratio, s.ratio) && close(r.lo, s.lo) && close(r.hi, s.hi), "{:?} {:?}", r, s);
            prop_assert_eq!(r.method, s.method);
            // Scaling one side scales the ratio.
            let t = f(&b, &a.iter().map(|x| x * k).collect::<Vec<_>>());
            prop_assert!(close(t.ratio, r.ratio * k) && close(t.lo, r.lo * k) && close(t.hi, r.hi * k));
            // Swapping sides inverts it, interval and all, whatever the
            // method (compare(B, A) is the mirror of compare(A, B)).
            let inv = f(&a, &b);
            let closer = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-6 * x.abs().max(1.0);
            prop_assert!(
                closer(inv.ratio, 1.0 / r.ratio) && closer(inv.lo, 1.0 / r.hi) && closer(inv.hi, 1.0 / r.lo),
                "{:?} {:?}", r, inv
            );
        }
    }
}

#[test]
fn normal_quantiles_match_the_table() {
    assert!((normal_quantile(0.975) - 1.959_963_985).abs() < 1e-6);
    assert!((normal_quantile(0.5)).abs() < 1e-9);
    assert!((normal_quantile(0.005) + 2.575_829_304).abs() < 1e-6);
    assert!((normal_quantile(1.0 - 0.025 / 60.0) - 3.341_479).abs() < 1e-5);
    assert!(normal_quantile(0.0).is_nan() && normal_quantile(1.0).is_nan());
}

fn runs(sha: &str, xs: &[f64]) -> Vec<(String, f64)> {
    xs.iter().map(|&x| (sha.to_owned(), x)).collect()
}

#[test]
fn the_floor_is_learned_from_reruns_of_one_build_and_covers_their_widest_swing() {
    // Too few reruns: nothing learned.
    assert_eq!(
        floor_from_series(&runs("a", &[100.0, 101.0, 99.0]), 1.96),
        None
    );
    // A step between builds is not noise: only same-build pairs count.
    let mut s = runs("a", &[100.0, 101.0, 99.0, 100.0]);
    s.extend(runs("b", &[150.0, 151.0, 149.0, 150.0]));
    let f = floor_from_series(&s, 1.96).unwrap();
    assert!(f < 0.1, "{f}");
    // A bimodal metric: the rare large swing sets the floor.
    let bimodal = runs("a", &[100.0, 101.0, 99.0, 100.0, 400.0, 100.0, 99.0]);
    let f = floor_from_series(&bimodal, 1.96).unwrap();
    assert!(f >= 3.0, "{f}");
}

#[test]
fn the_familywise_z_grows_with_the_metrics_judged() {
    assert!((familywise_z(1) - 1.96).abs() < 0.01);
    assert!((familywise_z(60) - 3.34).abs() < 0.01);
}
