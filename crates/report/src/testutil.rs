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
}
