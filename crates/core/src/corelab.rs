//! The measurement core as a lab like the others (seed: dpdk-vnf-evaluation's
//! rdtsc timing and delay injection): what a clock read costs, how exactly
//! a loop can wait, and the line-rate budget a packet path has. Its records
//! carry the labs `timer`, `delay` and `budget`; `commbench timer`,
//! `commbench delay` and `commbench budget` print the same records the
//! suite's core step keeps.
//!
//! Argument checking stays with the commands: the record builders here
//! take values that are already in range (and say so on their error).

use crate::clock::{read_costs, tsc};
use crate::delay::{default_samples, measure, DelayMethod, Delays};
use crate::figure::{FigureKind, FigureSpec};
use crate::lab::answer::{is, median, ns, of, ratio};
use crate::lab::{Better, Lab, LabError, MetricSpec, Quantity, StepOutcome, SuiteBudget, SuiteCtx};
use crate::linerate::{budget, parse_link, LineRateError, TABLE_LINKS_GBPS, TABLE_SIZES};
use crate::record::{Record, Recorder};
use serde_json::Value;

/// Records of `commbench timer`: the TSC and the cost of each clock read.
pub fn timer_records(batches: usize) -> Vec<Record> {
    let conditions = crate::rusage::Conditions::begin();
    let t = tsc();
    let mut v = vec![Record::new("timer", "tsc")
        .metric("hz", t.hz())
        .metric("hz_source", t.source)
        .metric("invariant", t.invariance.usable())
        .metric("constant_tsc", t.invariance.constant_tsc)
        .metric("nonstop_tsc", t.invariance.nonstop_tsc)
        .metric("cpuid_invariant", t.invariance.cpuid_invariant)
        .metric("granularity_ticks", t.granularity_ticks)
        .metric("granularity_ns", t.granularity_ns())];
    for c in read_costs(batches) {
        v.push(
            Record::new("timer", "read_cost")
                .param("method", c.method)
                .param("batch", 1000)
                .param("batches", batches)
                .metric("ns_median", c.ns.median)
                .metric("ns_p99", c.ns.p99)
                .metric("ns_min", c.ns.min)
                .metric("ticks_median", c.ticks_median)
                .metric("outliers", c.ns.outliers),
        );
    }
    stamp_all(&conditions, &mut v);
    v
}

/// The Lab contract's conditions on every record of one measurement: the
/// core lab's loops run on the calling thread alone.
fn stamp_all(conditions: &crate::rusage::Conditions, v: &mut [Record]) {
    let here = crate::placement::describe(&[("process", None)], &[]);
    for r in v {
        conditions.stamp(r, 1, Some(&here));
    }
}

/// Where the cycle budget's clock rate came from.
#[derive(Debug, Clone, Copy)]
pub enum CpuClock {
    /// The measured TSC rate.
    Tsc,
    /// Given in GHz (0.1..=10, checked by the caller).
    GivenGhz(f64),
}

/// Records of `commbench budget`: one per (link, frame size).
pub fn budget_records(
    link: Option<&str>,
    size: Option<u32>,
    clock: CpuClock,
) -> Result<Vec<Record>, LineRateError> {
    let (hz, hz_source) = match clock {
        CpuClock::GivenGhz(g) => (g * 1e9, "given"),
        CpuClock::Tsc => (tsc().hz(), "tsc"),
    };
    let links: Vec<f64> = match link {
        Some(l) => vec![parse_link(l)?],
        None => TABLE_LINKS_GBPS.iter().map(|g| g * 1e9).collect(),
    };
    let sizes: Vec<u32> = match size {
        Some(s) => vec![s],
        None => TABLE_SIZES.to_vec(),
    };
    let conditions = crate::rusage::Conditions::begin();
    let mut v = Vec::new();
    for &l in &links {
        for &s in &sizes {
            let b = budget(l, s, hz)?;
            v.push(
                Record::new("budget", "line_rate")
                    .param("link_gbps", l / 1e9)
                    .param("frame_bytes", s)
                    .param("cpu_ghz", hz / 1e9)
                    .param("cpu_hz_source", hz_source)
                    .metric("wire_bytes", b.wire_bytes)
                    .metric("mpps", round(b.pps / 1e6, 2))
                    .metric("pps", b.pps.round())
                    .metric("ns_per_packet", round(b.ns_per_packet, 2))
                    .metric("cycles_per_packet", round(b.cycles_per_packet, 1)),
            );
        }
    }
    stamp_all(&conditions, &mut v);
    Ok(v)
}

fn round(x: f64, d: i32) -> f64 {
    let k = 10f64.powi(d);
    (x * k).round() / k
}

/// Largest requested delay the delay records take (1 s).
pub const MAX_DELAY_NS: u64 = 1_000_000_000;
/// Largest sample count per (method, request).
pub const MAX_DELAY_SAMPLES: usize = 10_000_000;

/// A delay request outside what [`delay_records`] measures.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DelayArgError {
    /// A requested delay outside 1 ns..=1 s.
    #[error("requested delay {0} ns is outside 1..=1000000000")]
    Request(u64),
    /// A sample count outside 1..=10,000,000.
    #[error("--samples {0} is outside 1..=10000000")]
    Samples(usize),
}

impl crate::error::IsUsage for DelayArgError {
    fn is_usage(&self) -> bool {
        true
    }
}

/// Records of `commbench delay`: requested vs measured delay per method.
pub fn delay_records(
    methods: &[DelayMethod],
    requests: &[u64],
    samples: Option<usize>,
    rec: &mut Recorder,
) -> Result<Vec<Record>, DelayArgError> {
    if let Some(&r) = requests.iter().find(|&&r| r == 0 || r > MAX_DELAY_NS) {
        return Err(DelayArgError::Request(r));
    }
    if let Some(s) = samples.filter(|&s| s == 0 || s > MAX_DELAY_SAMPLES) {
        return Err(DelayArgError::Samples(s));
    }
    let delays = Delays::calibrate();
    let mut v = Vec::new();
    for &m in methods {
        for &req in requests {
            rec.progress(&format!("delay: {} {req} ns", m.name()));
            let n = samples.unwrap_or_else(|| default_samples(m, req));
            let conditions = crate::rusage::Conditions::begin();
            let a = measure(m, req, n, &delays);
            let mut r = Record::new("delay", m.name())
                .param("requested_ns", req)
                .param("samples", n)
                .metric("median_ns", a.measured.median)
                .metric("p99_ns", a.measured.p99)
                .metric("mean_ns", a.measured.mean)
                .metric("min_ns", a.measured.min)
                .metric("median_error_pct", a.median_error * 100.0)
                .metric("preempted_pct", a.preempted_share * 100.0)
                .metric(
                    "spin_fixed_ns",
                    if m == DelayMethod::TscSpin {
                        Some(tsc().ticks_to_ns(delays.spin.fixed_ticks))
                    } else {
                        None
                    },
                )
                .metric(
                    "loop_iters_per_ns",
                    if m == DelayMethod::VolatileLoop {
                        Some(delays.vloop.iters_per_ns)
                    } else {
                        None
                    },
                );
            stamp_all(&conditions, std::slice::from_mut(&mut r));
            v.push(r);
        }
    }
    Ok(v)
}

/// The measurement core's lab.
pub struct CoreLab;

const DELAY_TESTS: &[&str] = &["tsc_spin", "volatile_loop", "nanosleep"];

static METRICS: [MetricSpec; 9] = [
    MetricSpec::headline(
        "ns_median",
        "cost of one clock read",
        "ns",
        Better::Lower,
        Quantity::Time,
        &["read_cost"],
    ),
    MetricSpec::headline(
        "median_error_pct",
        "median delay error",
        "%",
        Better::Unknown,
        Quantity::Other,
        DELAY_TESTS,
    ),
    MetricSpec::other(
        "median_ns",
        "measured delay (median)",
        "ns",
        Better::Unknown,
        Quantity::Other,
        DELAY_TESTS,
    ),
    MetricSpec::other(
        "p99_ns",
        "measured delay (p99)",
        "ns",
        Better::Unknown,
        Quantity::Other,
        DELAY_TESTS,
    ),
    MetricSpec::other(
        "preempted_pct",
        "samples preempted",
        "%",
        Better::Lower,
        Quantity::Cost,
        DELAY_TESTS,
    ),
    MetricSpec::other(
        "ns_p99",
        "cost of one clock read (p99)",
        "ns",
        Better::Lower,
        Quantity::Time,
        &["read_cost"],
    ),
    MetricSpec::headline(
        "hz",
        "TSC frequency",
        "Hz",
        Better::Unknown,
        Quantity::Other,
        &["tsc"],
    ),
    MetricSpec::headline(
        "ns_per_packet",
        "time per packet at line rate",
        "ns",
        Better::Unknown,
        Quantity::Other,
        &["line_rate"],
    ),
    MetricSpec::other(
        "mpps",
        "packets per second at line rate",
        "Mpps",
        Better::Higher,
        Quantity::Other,
        &["line_rate"],
    ),
];

impl Lab for CoreLab {
    fn name(&self) -> &'static str {
        "core"
    }
    fn record_labs(&self) -> &'static [&'static str] {
        &["timer", "budget", "delay"]
    }
    fn question(&self) -> &'static str {
        "how exactly can a loop wait, and what does a clock read cost?"
    }
    fn figures(&self) -> Vec<FigureSpec> {
        vec![
            FigureSpec {
                kind: FigureKind::Bar,
                lab: "delay",
                test: "tsc_spin",
                title: "delay: measured median vs requested (TSC spin, ns)",
                caption: "How close a requested busy-wait lands: one bar per requested delay; the bar should reach its label.",
                x: "requested_ns",
                y: "median_ns",
                series: &[],
                filter: None,
                x_label: "requested delay (ns)",
                y_label: "",
                reference: None,
                more_x: "",
            },
            FigureSpec {
                kind: FigureKind::Bar,
                lab: "delay",
                test: "nanosleep",
                title: "delay: nanosleep measured median (ns)",
                caption: "What sleeping delivers instead of spinning: the measured median against the requested delay.",
                x: "requested_ns",
                y: "median_ns",
                series: &[],
                filter: None,
                x_label: "requested delay (ns)",
                y_label: "",
                reference: None,
                more_x: "",
            },
            FigureSpec {
                kind: FigureKind::Bar,
                lab: "timer",
                test: "read_cost",
                title: "timer: cost of one clock read (ns)",
                caption: "What timing itself costs per read: rdtsc against the fenced forms and clock_gettime.",
                x: "method",
                y: "ns_median",
                series: &[],
                filter: None,
                x_label: "clock read method",
                y_label: "",
                reference: None,
                more_x: "",
            },
        ]
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        &METRICS
    }
    fn budget(&self) -> SuiteBudget {
        SuiteBudget {
            quick_s: 4,
            default_s: 10,
        }
    }
    /// The clock reads and the busy-wait delays five times, interleaved
    /// (one record per configuration with its samples and interval), the
    /// line-rate budget once (arithmetic), then nanosleep if the budget
    /// allows.
    fn suite_step(&self, ctx: &SuiteCtx, rec: &mut Recorder) -> Result<StepOutcome, LabError> {
        rec.progress("core: timer");
        let requests = [100, 1_000, 10_000];
        let samples = if ctx.quick() { Some(500) } else { None };
        let mut rounds = Vec::new();
        for round in 0..5 {
            if round > 0 && ctx.over() {
                break;
            }
            rounds.extend(timer_records(if ctx.quick() { 200 } else { 2000 }));
            rounds.extend(delay_records(
                &[DelayMethod::TscSpin],
                &requests,
                samples,
                rec,
            )?);
        }
        for r in crate::lab::fold_repeats(self, rounds) {
            rec.push(r);
        }
        for r in budget_records(Some("10G"), Some(64), CpuClock::Tsc)? {
            rec.push(r);
        }
        let mut out = StepOutcome::default();
        if out.cut_if_over(ctx, "delay nanosleep") {
            return Ok(out);
        }
        for r in delay_records(&[DelayMethod::Nanosleep], &[10_000], Some(50), rec)? {
            rec.push(r);
        }
        Ok(out)
    }
    fn answer(&self, recs: &[Record]) -> Option<String> {
        let r = of(recs, self.record_labs());
        let at = |test: &'static str, req: f64| {
            move |x: &Record| {
                x.test == test && x.params.get("requested_ns").and_then(Value::as_f64) == Some(req)
            }
        };
        let spin = median(r.iter().copied(), at("tsc_spin", 1000.0), "median_ns")?;
        let mut a = format!(
            "TSC spin 1 µs → {} ({:+.1}%)",
            ns(spin),
            (spin / 1000.0 - 1.0) * 100.0
        );
        if let Some(sl) = median(r.iter().copied(), at("nanosleep", 10_000.0), "median_ns") {
            a.push_str(&format!(
                "; nanosleep 10 µs → {} ({} asked)",
                ns(sl),
                ratio(sl, 10_000.0)
            ));
        }
        let read = |method: &str| {
            median(
                r.iter().copied(),
                |x| x.test == "read_cost" && is(x, "method", method),
                "ns_median",
            )
        };
        if let (Some(t), Some(c)) = (read("rdtsc"), read("clock_gettime_monotonic")) {
            a.push_str(&format!(
                "; clock read: rdtsc {t:.1} ns, clock_gettime {c:.1} ns"
            ));
        }
        Some(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_records_refuse_requests_out_of_range() {
        let mut rec = Recorder::new();
        assert_eq!(
            delay_records(&[DelayMethod::TscSpin], &[0], None, &mut rec).unwrap_err(),
            DelayArgError::Request(0)
        );
        assert_eq!(
            delay_records(&[DelayMethod::TscSpin], &[100], Some(0), &mut rec).unwrap_err(),
            DelayArgError::Samples(0)
        );
    }

    #[test]
    fn budget_records_give_the_seed_figure_for_10g_64b() {
        let v = budget_records(Some("10G"), Some(64), CpuClock::GivenGhz(2.0)).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].metric_f64("ns_per_packet"), Some(67.2));
        assert_eq!(v[0].metric_f64("cycles_per_packet"), Some(134.4));
    }
}
