//! `commbench pipeline crosscheck`, the seed's question: does the
//! black-box NDR of commbench's own forwarder follow the white-box cost
//! model (its own rx + work + tx ticks per packet, plus an injected
//! delay)? NDR searches over the injected delays, in rounds (the tester
//! alone first in each, so a slow stretch of the host touches every point
//! alike); each point is the median of its rounds with a 95% interval,
//! told device- or tester-bound with a verdict ([`rfc2544::cross_point`]).
//!
//! Each NDR is MLRsearch's ([`rfc2544::mlr_search`]) with one goal
//! ([`ndr_goal`]): zero loss, exceed ratio 0.5, so a host pause in one
//! trial of a load does not decide the point, and a trial the tester or
//! the host spoiled is repeated, never read as the forwarder's loss.

use super::dut::{DutSpec, FwdWork, Impair};
use super::mlrsearch::{Goal, DEFAULT_GOAL};
use super::pace::Rate;
use super::rfc2544::{self, CrossPoint, SearchResult};
use super::trial::Offer;
use super::{interrupted, Bench};
use crate::netns::RxMethod;
use crate::PipelineError;
use commbench_core::estimate::{attach, Estimate};
use commbench_core::record::{Record, Recorder};
use thiserror::Error;

/// Largest injected delay, ns.
pub const MAX_DELAY_NS: f64 = 1_000_000.0;

/// Why a cross-check cannot run as asked.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum CrosscheckError {
    #[error("--delays: '{0}' is not a delay in ns (0..=1000000)")]
    BadDelay(String),
    #[error("--delays is empty")]
    NoDelays,
    #[error("crosscheck drives commbench's own forwarder: --dut l2fwd[:rx=...]")]
    NotOwnForwarder,
}

/// Injected per-packet delays, ns, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub struct Delays(pub Vec<f64>);

impl Delays {
    /// Parses `0,10,67.2`: each in 0..=1000000 ns, at least one.
    pub fn parse(s: &str) -> Result<Delays, CrosscheckError> {
        let v = s
            .split(',')
            .filter(|x| !x.is_empty())
            .map(|x| {
                x.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|d| (0.0..=MAX_DELAY_NS).contains(d))
                    .ok_or_else(|| CrosscheckError::BadDelay(x.to_owned()))
            })
            .collect::<Result<Vec<f64>, _>>()?;
        if v.is_empty() {
            return Err(CrosscheckError::NoDelays);
        }
        Ok(Delays(v))
    }
}

/// What to cross-check.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The device must be commbench's l2fwd: its rx path, burst and ring
    /// are kept, its work is each point's delay.
    pub offer: Offer,
    pub delays: Delays,
    /// Highest rate tried.
    pub max_rate: Rate,
    /// The NDR goal's width, % ([`ndr_goal`]).
    pub resolution_pct: f64,
    /// Trials at most per search (troubled ones included).
    pub max_trials: usize,
    /// Rounds: NDR searches per point and for the tester alone.
    pub repeat: u32,
}

/// The forwarder's settings a cross-check keeps across its points.
#[derive(Debug, Clone, Copy)]
struct Fwd {
    rx: RxMethod,
    burst: usize,
    rx_blocks: usize,
}

impl Spec {
    fn fwd(&self) -> Result<Fwd, CrosscheckError> {
        match self.offer.dut {
            DutSpec::L2fwd {
                rx,
                burst,
                rx_blocks,
                ..
            } => Ok(Fwd {
                rx,
                burst,
                rx_blocks,
            }),
            _ => Err(CrosscheckError::NotOwnForwarder),
        }
    }

    /// Checks what [`run`] checks before it starts anything.
    pub fn validate(&self) -> Result<(), CrosscheckError> {
        self.fwd().map(|_| ())
    }
}

/// A cross-check's outcome, for its table.
#[derive(Debug, Clone)]
pub struct Report {
    /// The tester alone: the median NDR with no device.
    pub tester_pps: f64,
    /// Its searches (one per round).
    pub tester_searches: usize,
    /// Of them, the searches that measured a rate.
    pub tester_measured: usize,
    /// The generator fell behind its schedule in some search with no
    /// device: the tester's own ceiling is below its NDR.
    pub tester_limited: bool,
    /// One point per delay that was searched, with its NDR's interval.
    pub points: Vec<(CrossPoint, Estimate)>,
    pub repeat: u32,
    /// Ctrl-C cut the run: its records are partial.
    pub interrupted: bool,
}

/// The l2fwd of delay `d` ns with the kept settings.
fn forwarder(f: Fwd, d: f64) -> DutSpec {
    let work = if d == 0.0 {
        FwdWork::Swap
    } else {
        FwdWork::Delay(d.round() as u64)
    };
    DutSpec::L2fwd {
        work,
        rx: f.rx,
        burst: f.burst,
        impair: Impair::default(),
        rx_blocks: f.rx_blocks,
    }
}

/// The cross-check's MLRsearch goal: zero loss with RFC 9971's exceed
/// ratio 0.5, final trials of the offer's duration (`--duration-s`), a
/// duration sum of four of them, `--resolution-pct` as the width, and
/// initial trials of 0.1 s (or the final length when shorter).
pub fn ndr_goal(final_s: f64, resolution_pct: f64) -> Goal {
    Goal {
        loss_ratio: 0.0,
        final_s,
        sum_s: 4.0 * final_s,
        width: resolution_pct / 100.0,
        initial_s: DEFAULT_GOAL.initial_s.min(final_s),
        ..DEFAULT_GOAL
    }
}

/// Runs the rounds into `rec` (one `crosscheck` record per point).
pub fn run(s: &Spec, rec: &mut Recorder) -> Result<Report, PipelineError> {
    let f = s.fwd()?;
    let trial = &s.offer.trial;
    let cpus = &s.offer.cpus;
    let delays = &s.delays.0;
    let goal = ndr_goal(trial.duration.as_secs_f64(), s.resolution_pct);
    goal.validate().map_err(PipelineError::Config)?;
    let max_pps = s.max_rate.pps(trial.sizes.mean());
    let search = |b: &mut Bench, rec: &mut Recorder, what: &str| -> std::io::Result<SearchResult> {
        let (_, mut r) = rfc2544::mlr_search(
            b,
            trial,
            &[goal],
            max_pps,
            rfc2544::MLR_BUDGET_S,
            s.max_trials,
            |t, trouble| {
                rec.progress(&format!(
                    "crosscheck {what}: {:.0} pps for {:.2} s → loss {:.4}%{}",
                    t.offered_pps,
                    t.duration_s,
                    t.loss_pct,
                    trouble.map_or(String::new(), |w| format!(" (not counted: {w})"))
                ));
            },
        )?;
        Ok(r.remove(0))
    };
    // Rounds over the delays (the tester alone first in each), so that a
    // slow stretch of the host touches every point alike.
    let mut tester_runs: Vec<SearchResult> = Vec::new();
    let mut runs: Vec<Vec<SearchResult>> = delays.iter().map(|_| Vec::new()).collect();
    'rounds: for round in 0..s.repeat {
        let tag = if s.repeat > 1 {
            format!(" (round {}/{})", round + 1, s.repeat)
        } else {
            String::new()
        };
        {
            let mut b = Bench::new(&DutSpec::None, cpus.clone())?;
            tester_runs.push(search(&mut b, rec, &format!("no device{tag}"))?);
        }
        for (i, &d) in delays.iter().enumerate() {
            if interrupted() {
                break 'rounds;
            }
            let mut b = Bench::new(&forwarder(f, d), cpus.clone())?;
            runs[i].push(search(&mut b, rec, &format!("delay {d} ns{tag}"))?);
        }
    }
    let hz = commbench_core::clock::tsc().hz();
    let rep = fold(s, f, hz, &tester_runs, &runs, rec);
    Ok(rep)
}

fn median(xs: &[f64]) -> f64 {
    Estimate::from_samples(xs).median
}

/// The white box: the forwarder's own rx + work + tx ticks per packet at
/// zero delay (or the first point's, less its delay), the median over
/// the rounds; later points add their delay to it.
pub fn base_ticks(hz: f64, delays: &[f64], runs: &[Vec<SearchResult>]) -> f64 {
    let bi = delays.iter().position(|&d| d == 0.0).unwrap_or(0);
    let base: Vec<f64> = runs[bi]
        .iter()
        .filter_map(|r| r.fwd_ticks().map(|t| t - delays[bi] * hz / 1e9))
        .collect();
    median(&base)
}

/// The device CPU's ticks per packet outside the forwarder's own
/// sections, at the same point and in the same trials as [`base_ticks`]:
/// the kernel's receive into the forwarder's ring runs in softirq on the
/// device's CPU (its receive is steered there), which the forwarder's TSC
/// reads do not see. NaN when no trial measured it (no device CPU).
pub fn kernel_ticks(delays: &[f64], runs: &[Vec<SearchResult>]) -> f64 {
    let bi = delays.iter().position(|&d| d == 0.0).unwrap_or(0);
    median_measured(runs[bi].iter().map(|r| r.kernel_ticks()))
}

/// The median of the rounds that measured a value; NaN when none did.
fn median_measured(xs: impl Iterator<Item = Option<f64>>) -> f64 {
    let k: Vec<f64> = xs.flatten().filter(|x| x.is_finite()).collect();
    if k.is_empty() {
        return f64::NAN;
    }
    median(&k)
}

/// The white box's ticks per packet at zero delay: the forwarder's own
/// and, when measured, the device CPU's beside them.
pub fn model_ticks(base: f64, kernel: f64) -> f64 {
    if kernel.is_finite() {
        base + kernel
    } else {
        base
    }
}

/// Folds the rounds into points, pushing one record per point.
fn fold(
    s: &Spec,
    f: Fwd,
    hz: f64,
    tester_runs: &[SearchResult],
    runs: &[Vec<SearchResult>],
    rec: &mut Recorder,
) -> Report {
    let delays = &s.delays.0;
    // The tester alone's searches that measured a rate (one that could
    // not keep its schedule or passed nothing has none; NaN if none did).
    let tester_rates: Vec<f64> = tester_runs
        .iter()
        .map(|r| r.rate_pps)
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    let tester_pps = if tester_rates.is_empty() {
        f64::NAN
    } else {
        median(&tester_rates)
    };
    let base = base_ticks(hz, delays, runs);
    let kernel = kernel_ticks(delays, runs);
    let mut points = Vec::new();
    for (&d, rs) in delays.iter().zip(runs) {
        if rs.is_empty() {
            continue;
        }
        let predicted = rfc2544::predict_pps(hz, model_ticks(base, kernel), d);
        let (mut p, est) = rfc2544::cross_point(
            d,
            base,
            predicted,
            rs,
            tester_pps,
            s.offer.trial.duration.as_secs_f64(),
        );
        p.kernel_ticks = kernel;
        let ticks = median(&rs.iter().filter_map(|r| r.fwd_ticks()).collect::<Vec<_>>());
        let fwd_only = rfc2544::predict_pps(hz, base, d);
        rec.push(record(s, f, &p, &est, ticks, fwd_only, rs.last()));
        points.push((p, est));
    }
    Report {
        tester_pps,
        tester_searches: tester_runs.len(),
        tester_measured: tester_rates.len(),
        tester_limited: tester_runs.iter().any(|r| r.tester_limited),
        points,
        repeat: s.repeat,
        interrupted: interrupted(),
    }
}

/// A point's record: the model, the measurement with its interval, the
/// verdict, and the latency of the last round's confirmation trial.
fn record(
    s: &Spec,
    f: Fwd,
    p: &CrossPoint,
    est: &Estimate,
    measured_ticks: f64,
    predicted_fwd_pps: f64,
    last: Option<&SearchResult>,
) -> Record {
    let predicted = p.predicted_pps;
    let mut x = Record::new("pipeline", "crosscheck")
        .param("delay_ns", p.delay_ns)
        .param("size", &s.offer.trial.sizes.name)
        .param("rx", f.rx.name())
        .param("repeat", s.repeat)
        .param("method", "mlr")
        .param(
            "goal",
            ndr_goal(s.offer.trial.duration.as_secs_f64(), s.resolution_pct).code(),
        )
        .metric("base_ticks", p.base_ticks)
        .metric(
            "kernel_ticks",
            p.kernel_ticks.is_finite().then_some(p.kernel_ticks),
        )
        .metric(
            "measured_ticks",
            measured_ticks.is_finite().then_some(measured_ticks),
        )
        .metric("predicted_pps", p.predicted_pps)
        .metric("predicted_fwd_pps", predicted_fwd_pps)
        .metric(
            "error_fwd_pct",
            (p.measured_pps / predicted_fwd_pps - 1.0) * 100.0,
        )
        .metric("error_pct", p.error_pct)
        .metric("error_lo_pct", (est.lo / predicted - 1.0) * 100.0)
        .metric("error_hi_pct", (est.hi / predicted - 1.0) * 100.0)
        .metric("tester_pps", p.tester_pps)
        .metric("bound", &p.bound)
        .metric("verdict", &p.verdict)
        .metric("confirmed", p.confirmed)
        .metric("tester_limited", p.tester_limited)
        .metric("fail_loss_where", &p.fail_loss_where)
        .metric(
            "buffer_inflation_pct",
            p.buffer_inflation_pct
                .is_finite()
                .then_some(p.buffer_inflation_pct),
        );
    attach(&mut x.metrics, "measured_pps", est);
    if let Some(r) = last {
        let t = r.final_trial.as_ref();
        x.push_metric("latency_p50_ns", t.map(|t| t.latency.p50));
        x.push_metric("latency_p99_ns", t.map(|t| t.latency.p99));
    }
    x
}

/// The cross-check's table: the tester alone, then one line per delay
/// (with the intervals when there were rounds).
pub fn table(r: &Report) -> String {
    let rounds = r.repeat > 1;
    let tester = if r.tester_pps.is_finite() {
        format!("NDR {:.3} Mpps", r.tester_pps / 1e6)
    } else {
        format!(
            "NDR not measured: none of its {} searches found a rate kept on schedule without loss",
            r.tester_searches
        )
    };
    let mut table = format!(
        "tester alone (no device): {tester}{}{}\n delay ns   predicted Mpps   measured Mpps{}   error{}    buffer   bound    verdict\n",
        if rounds && r.tester_pps.is_finite() {
            if r.tester_measured < r.tester_searches {
                format!(", median of {} ({} measured nothing)", r.tester_measured, r.tester_searches - r.tester_measured)
            } else {
                format!(", median of {}", r.tester_searches)
            }
        } else {
            String::new()
        },
        if r.tester_limited { " (generator behind schedule above it)" } else { "" },
        if rounds { " [95% interval]" } else { "" },
        if rounds { " [interval]  " } else { "" },
    );
    if let Some((p, _)) = r.points.first() {
        table.insert_str(table.find('\n').map_or(0, |i| i + 1), &white_box_line(p));
    }
    for (p, est) in &r.points {
        let (m, e) = if !p.measured_pps.is_finite() {
            ("not measured".to_owned(), "-".to_owned())
        } else if rounds {
            (
                format!(
                    "{:.3} [{:.3}, {:.3}]",
                    p.measured_pps / 1e6,
                    est.lo / 1e6,
                    est.hi / 1e6
                ),
                format!(
                    "{:+.1}% [{:+.1}, {:+.1}]",
                    p.error_pct,
                    (est.lo / p.predicted_pps - 1.0) * 100.0,
                    (est.hi / p.predicted_pps - 1.0) * 100.0
                ),
            )
        } else {
            (
                format!("{:.3}", p.measured_pps / 1e6),
                format!("{:+.1}%", p.error_pct),
            )
        };
        table.push_str(&format!(
            "{:>9}   {:>14.3}   {:>13}   {:>7}  {:>6.1}%  {:7}  {}\n",
            p.delay_ns,
            p.predicted_pps / 1e6,
            m,
            e,
            p.buffer_inflation_pct,
            p.bound,
            p.verdict
        ));
    }
    table
}

/// The white box's ticks per packet before the injected delay (at zero
/// delay, or the first point's less its delay), its two parts named.
fn white_box_line(p: &CrossPoint) -> String {
    if p.kernel_ticks.is_finite() {
        format!(
            "white box before the injected delay: {:.0} ticks per packet = the forwarder's own rx + work + tx {:.0} + its CPU's time outside them {:.0} (the kernel's receive into its ring, in softirq)\n",
            p.base_ticks + p.kernel_ticks,
            p.base_ticks,
            p.kernel_ticks
        )
    } else {
        format!(
            "white box before the injected delay: the forwarder's own rx + work + tx {:.0} ticks per packet (its CPU's time outside them not measured: no device CPU)\n",
            p.base_ticks
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_parse_in_order_and_name_the_bad_one() {
        assert_eq!(
            Delays::parse("0,10,67.2").unwrap(),
            Delays(vec![0.0, 10.0, 67.2])
        );
        assert_eq!(
            Delays::parse("5,-1"),
            Err(CrosscheckError::BadDelay("-1".into()))
        );
        assert_eq!(
            Delays::parse("2000000"),
            Err(CrosscheckError::BadDelay("2000000".into()))
        );
        assert_eq!(Delays::parse(","), Err(CrosscheckError::NoDelays));
        assert!(CrosscheckError::BadDelay("-1".into())
            .to_string()
            .contains("'-1'"));
    }

    #[test]
    fn only_commbench_s_forwarder_can_be_cross_checked() {
        let mut s = Spec {
            offer: Offer {
                dut: DutSpec::Bridge,
                trial: Default::default(),
                cpus: Default::default(),
                bias: false,
            },
            delays: Delays(vec![0.0]),
            max_rate: Rate::Pps(1e6),
            resolution_pct: 1.0,
            max_trials: 4,
            repeat: 1,
        };
        assert_eq!(s.validate(), Err(CrosscheckError::NotOwnForwarder));
        s.offer.dut = DutSpec::parse("l2fwd:rx=af-xdp,burst=8").unwrap();
        assert_eq!(s.validate(), Ok(()));
        let f = s.fwd().unwrap();
        match forwarder(f, 67.2) {
            DutSpec::L2fwd {
                work, rx, burst, ..
            } => {
                assert_eq!(work, FwdWork::Delay(67));
                assert_eq!(rx, RxMethod::AfXdp);
                assert_eq!(burst, 8);
            }
            d => panic!("{d:?}"),
        }
        assert!(matches!(
            forwarder(f, 0.0),
            DutSpec::L2fwd {
                work: FwdWork::Swap,
                ..
            }
        ));
    }

    #[test]
    fn the_ndr_goal_is_mlrsearchs_zero_loss_default_at_the_trial_length() {
        use crate::tester::mlrsearch::DEFAULT_GOALS;
        // 1 s trials, 1% width: the default NDR goal.
        assert_eq!(ndr_goal(1.0, 1.0), DEFAULT_GOALS[0]);
        let g = ndr_goal(0.05, 2.0);
        assert_eq!((g.final_s, g.sum_s, g.initial_s), (0.05, 0.2, 0.05));
        assert_eq!((g.loss_ratio, g.exceed_ratio, g.width), (0.0, 0.5, 0.02));
        assert!(g.validate().is_ok());
    }

    #[test]
    fn the_prediction_adds_the_device_cpu_s_ticks_to_the_forwarder_s_own() {
        // The kernel term is the median of the zero-delay rounds that
        // measured it; rounds without a device CPU do not count.
        let k = median_measured([Some(900.0), None, Some(1200.0), Some(1000.0)].into_iter());
        assert_eq!(k, 1000.0);
        assert!(median_measured([None, None].into_iter()).is_nan());
        assert!(median_measured([Some(f64::NAN)].into_iter()).is_nan());
        let hz = 1e9;
        let model = model_ticks(3100.0, k);
        assert_eq!(model, 4100.0);
        // 4,100 ticks + 5 µs at 1 GHz: 9,100 ns per packet, where the
        // forwarder's own ticks alone said 8,100 ns.
        let p = rfc2544::predict_pps(hz, model, 5000.0);
        assert!((p - 1e9 / 9100.0).abs() < 1e-6, "{p}");
        let own = rfc2544::predict_pps(hz, model_ticks(3100.0, f64::NAN), 5000.0);
        assert!((own - 1e9 / 8100.0).abs() < 1e-6, "{own}");
    }

    fn point(delay_ns: f64, measured: f64) -> (CrossPoint, Estimate) {
        let p = CrossPoint {
            delay_ns,
            base_ticks: 100.0,
            kernel_ticks: f64::NAN,
            predicted_pps: 1e6,
            measured_pps: measured,
            error_pct: (measured / 1e6 - 1.0) * 100.0,
            tester_pps: 2e6,
            bound: "device".into(),
            verdict: "agrees".into(),
            confirmed: true,
            buffer_inflation_pct: 0.5,
            fail_loss_where: "device".into(),
            tester_limited: false,
        };
        (
            p,
            Estimate::from_samples(&[measured * 0.99, measured, measured * 1.01]),
        )
    }

    #[test]
    fn the_table_has_a_line_per_point_and_intervals_only_with_rounds() {
        let mut r = Report {
            tester_pps: 2e6,
            tester_searches: 1,
            tester_measured: 1,
            tester_limited: false,
            points: vec![point(0.0, 1e6), point(100.0, 0.5e6)],
            repeat: 1,
            interrupted: false,
        };
        let t = table(&r);
        assert_eq!(t.lines().count(), 5, "{t}");
        assert!(
            t.contains("the forwarder's own rx + work + tx 100 ticks"),
            "{t}"
        );
        assert!(t.contains("not measured"), "{t}");
        r.points[0].0.kernel_ticks = 25.0;
        let t = table(&r);
        assert!(t.contains("125 ticks per packet = the forwarder's own rx + work + tx 100 + its CPU's time outside them 25"), "{t}");
        assert!(
            t.starts_with("tester alone (no device): NDR 2.000 Mpps\n"),
            "{t}"
        );
        assert!(!t.contains("interval"), "{t}");
        r.repeat = 3;
        r.tester_searches = 3;
        r.tester_measured = 3;
        r.tester_limited = true;
        let t = table(&r);
        assert!(t.contains("median of 3"), "{t}");
        assert!(t.contains("[95% interval]"), "{t}");
        assert!(t.contains("generator behind schedule"), "{t}");
        r.tester_measured = 2;
        assert!(table(&r).contains("median of 2 (1 measured nothing)"));
    }

    #[test]
    fn a_tester_that_measured_nothing_printed_ndr_nan() {
        let mut r = Report {
            tester_pps: f64::NAN,
            tester_searches: 3,
            tester_measured: 0,
            tester_limited: true,
            points: vec![point(0.0, f64::NAN), point(100.0, 0.5e6)],
            repeat: 3,
            interrupted: false,
        };
        r.points[0].0.measured_pps = f64::NAN;
        let t = table(&r);
        assert!(!t.contains("NaN"), "{t}");
        assert!(
            t.starts_with("tester alone (no device): NDR not measured: none of its 3 searches"),
            "{t}"
        );
        assert!(t.lines().nth(3).unwrap().contains("not measured"), "{t}");
    }
}
