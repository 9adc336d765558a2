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
