//! Helpers shared by the modules' unit tests.

use commbench_core::record::Record;

/// An ipc record over shared memory: `sessions`, a `msgs_per_s` rate, a CPU
/// cost and a latency summary (p50…max).
pub(crate) fn rec(test: &str, sessions: u64, rate: f64) -> Record {
    Record::new("ipc", test)
        .param("transport", "shm")
        .param("sessions", sessions)
        .metric("msgs_per_s", rate)
        .metric("cpu_ns_per_op", 100.0)
        .metric(
            "latency_ns",
            serde_json::json!({"p50": 300.0, "p90": 400.0, "p99": 900.0, "p999": 2000.0, "p9999": 5000.0, "max": 9000.0}),
        )
}

use commbench_core::figure::FigureSpec;
use commbench_core::lab::{
    Better, Lab, LabError, MetricSpec, Quantity, StepOutcome, SuiteBudget, SuiteCtx,
};

/// A lab named `core` owning `timer`, `pcap` and `pipeline` records, with
/// a few declared metrics (units for the axes) and the figures given.
pub(crate) struct TestLab(pub Vec<FigureSpec>);

static METRICS: [MetricSpec; 6] = [
    MetricSpec::headline(
        "ns_median",
        "cost of one clock read",
        "ns",
        Better::Lower,
        Quantity::Time,
        &[],
    ),
    MetricSpec::other(
        "user_s_median",
        "user CPU (median run)",
        "s",
        Better::Lower,
        Quantity::Cost,
        &[],
    ),
    MetricSpec::other(
        "sys_s_median",
        "system CPU (median run)",
        "s",
        Better::Lower,
        Quantity::Cost,
        &[],
    ),
    MetricSpec::headline(
        "ticks_total",
        "TSC ticks per packet",
        "ticks",
        Better::Lower,
        Quantity::Cost,
        &[],
    ),
    MetricSpec::headline(
        "mpps",
        "packets per second",
        "Mpps",
        Better::Higher,
        Quantity::Time,
        &[],
    ),
    MetricSpec::other(
        "file",
        "capture",
        "path",
        Better::Unknown,
        Quantity::Other,
        &[],
    ),
];

impl Lab for TestLab {
    fn name(&self) -> &'static str {
        "core"
    }
    fn record_labs(&self) -> &'static [&'static str] {
        &["timer", "pcap", "pipeline"]
    }
    fn question(&self) -> &'static str {
        "?"
    }
    fn figures(&self) -> Vec<FigureSpec> {
        self.0.clone()
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        &METRICS
    }
    fn budget(&self) -> SuiteBudget {
        SuiteBudget {
            quick_s: 1,
            default_s: 1,
        }
    }
    fn suite_step(
        &self,
        _: &SuiteCtx,
        _: &mut commbench_core::Recorder,
    ) -> Result<StepOutcome, LabError> {
        Ok(StepOutcome::default())
    }
    fn answer(&self, records: &[Record]) -> Option<String> {
        records
            .iter()
            .any(|r| r.lab == "timer")
            .then(|| "clock read measured".to_owned())
    }
    fn param_legend(&self, key: &str, value: &str) -> Option<String> {
        (key == "goal" && value == "1f4d0l50e1w").then(|| "final trial 1 s, loss 0%".to_owned())
    }
}

/// A generated pair of runs for the judgement's property tests: pipeline
/// `run` records (TestLab: `ticks_total` a headline cost, `mpps` a
/// headline rate) at several bursts, each metric over 2–12 repeats of
/// lognormal noise with occasional outliers, the second run's values
/// scaled by a per-record factor (none, a few percent, or a step), and now
/// and then a load or an oversubscribed flag.
pub(crate) fn generated_runs(seed: u64) -> (Vec<Record>, Vec<Record>) {
    use commbench_core::estimate::{attach, Estimate, Rng};
    let mut rng = Rng::new(seed);
    let draw = |n: usize, centre: f64, sigma: f64, rng: &mut Rng| -> Vec<f64> {
        (0..n)
            .map(|_| {
                let x = centre * (sigma * rng.normal()).exp();
                if rng.next_f64() < 0.05 {
                    x * (2.0 + 3.0 * rng.next_f64())
                } else {
                    x
                }
            })
            .collect()
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for burst in 1..=(2 + rng.below(6) as u64) {
        let factor = [1.0, 1.0, 1.03, 0.97, 1.3, 0.7, 2.5][rng.below(7)];
        let sigma = [0.01, 0.05, 0.2][rng.below(3)];
        let (na, nb) = (2 + rng.below(11), 2 + rng.below(11));
        let mut ra = Record::new("pipeline", "run").param("burst", burst);
        let mut rb = ra.clone();
        for (key, centre) in [("ticks_total", 100.0), ("mpps", 3.0)] {
            let xa = draw(na, centre, sigma, &mut rng);
            let xb = draw(nb, centre * factor, sigma, &mut rng);
            attach(&mut ra.metrics, key, &Estimate::from_samples(&xa));
            attach(&mut rb.metrics, key, &Estimate::from_samples(&xb));
        }
        if rng.below(6) == 0 {
            ra.push_metric("load_start", 0.5);
            rb.push_metric("load_start", 2.0 + rng.next_f64());
        }
        if rng.below(8) == 0 {
            rb.push_metric("oversubscribed", true);
        }
        a.push(ra);
        b.push(rb);
    }
    (a, b)
}
