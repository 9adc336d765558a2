//! The openflow lab as the suite, the summary and `compare` see it: the
//! seed's question (how much does a cached flow_mod template save?), the
//! declared metrics, the suite step and the answer line.

use crate::bench;
use commbench_core::figure::FigureSpec;
use commbench_core::lab::answer::{is, median, ns, of, placement, rate, ratio, ratio_between};
use commbench_core::lab::{
    Better, Lab, LabError, MetricSpec, Quantity, StepOutcome, SuiteBudget, SuiteCtx,
};
use commbench_core::{Record, Recorder};
use serde_json::Value;

/// The openflow lab.
pub struct OpenflowLab;

const BENCH: &[&str] = &["bench"];
const BOTH: &[&str] = &["bench", "cbench"];

static METRICS: [MetricSpec; 10] = [
    MetricSpec::headline(
        "controller_ns_per_response",
        "controller CPU per response",
        "ns",
        Better::Lower,
        Quantity::Cost,
        BENCH,
    ),
    MetricSpec::headline(
        "responses_per_s_median",
        "responses per second (median window)",
        "resp/s",
        Better::Higher,
        Quantity::Time,
        BOTH,
    ),
    MetricSpec::other(
        "emulator_ns_per_response",
        "emulator CPU per response",
        "ns",
        Better::Lower,
        Quantity::Cost,
        BENCH,
    ),
    MetricSpec::other(
        "responses_per_s_avg",
        "responses per second (mean window)",
        "resp/s",
        Better::Higher,
        Quantity::Time,
        BOTH,
    ),
    MetricSpec::other(
        "responses_per_s_min",
        "responses per second (slowest window)",
        "resp/s",
        Better::Higher,
        Quantity::Time,
        BOTH,
    ),
    MetricSpec::other(
        "responses_per_s_max",
        "responses per second (fastest window)",
        "resp/s",
        Better::Higher,
        Quantity::Time,
        BOTH,
    ),
    MetricSpec::other(
        "responses_per_s_stdev",
        "responses per second, spread between windows",
        "resp/s",
        Better::Unknown,
        Quantity::Other,
        BOTH,
    ),
    MetricSpec::other(
        "round_trip_ns.p50",
        "round trip, median (latency mode)",
        "ns",
        Better::Lower,
        Quantity::Time,
        BOTH,
    ),
    MetricSpec::other(
        "round_trip_ns.p99",
        "round trip, p99 (latency mode)",
        "ns",
        Better::Lower,
        Quantity::Time,
        BOTH,
    ),
    MetricSpec::other(
        "stall_worst_ms",
        "worst machine stall during a window",
        "ms",
        Better::Unknown,
        Quantity::Other,
        BOTH,
    ),
];

impl Lab for OpenflowLab {
    fn name(&self) -> &'static str {
        "openflow"
    }
    fn record_labs(&self) -> &'static [&'static str] {
        &["openflow"]
    }
    fn question(&self) -> &'static str {
        "how much does a cached flow_mod template save?"
    }
    fn figures(&self) -> Vec<FigureSpec> {
        crate::figures()
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        &METRICS
    }
    fn budget(&self) -> SuiteBudget {
        SuiteBudget {
            quick_s: 20,
            default_s: 58,
        }
    }
    fn suite_step(&self, ctx: &SuiteCtx, rec: &mut Recorder) -> Result<StepOutcome, LabError> {
        let r = bench::suite(ctx.quick(), ctx.deadline(), rec)?;
        for row in r.rows.iter().filter(|r| r.switches_connected < r.switches) {
            eprintln!(
                "suite: openflow: {} switches asked, {} completed the handshake ({}, {}): recorded as partial",
                row.switches, row.switches_connected, row.mode, row.variant
            );
        }
        let mut cut_short = r.skipped;
        cut_short.extend(r.short);
        Ok(StepOutcome { cut_short })
    }
    fn answer(&self, recs: &[Record]) -> Option<String> {
        let r = of(recs, self.record_labs());
        let get = |v: &str, k: &str| {
            median(
                r.iter().copied(),
                |x| {
                    x.test == "bench"
                        && is(x, "variant", v)
                        && is(x, "mode", "throughput")
                        && x.params.get("switches").and_then(Value::as_u64) == Some(1)
                },
                k,
            )
        };
        let t = get("template", "responses_per_s_median")?;
        let nv = get("naive", "responses_per_s_median")?;
        let pick = |v: &'static str| {
            move |x: &Record| {
                x.test == "bench"
                    && is(x, "variant", v)
                    && is(x, "mode", "throughput")
                    && x.params.get("switches").and_then(Value::as_u64) == Some(1)
            }
        };
        // With the interval of the ratio when the records carry repeats.
        let times = ratio_between(
            &r,
            pick("template"),
            pick("naive"),
            "responses_per_s_median",
        )
        .unwrap_or_else(|| ratio(t, nv));
        let mut a = format!(
            "template {}/s vs naive {}/s = {times} (seed: ~10× in Ruby)",
            rate(t),
            rate(nv),
        );
        if let (Some(ct), Some(cn)) = (
            get("template", "controller_ns_per_response"),
            get("naive", "controller_ns_per_response"),
        ) {
            a.push_str(&format!(
                "; controller CPU {} vs {} per response",
                ns(ct),
                ns(cn)
            ));
        }
        // Both variants ran at the one placement named here.
        if let Some(p) = placement(
            r.iter()
                .copied()
                .filter(|x| pick("template")(x) || pick("naive")(x)),
        ) {
            a.push_str(&format!(" ({p})"));
        }
        Some(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every default suite printed openflow "[cut short by its time
    /// budget]", the README's example too: its minimum plan (60 runs of
    /// three 250 ms windows) took longer than its budget. The minimum plan
    /// of both presets now fits in four fifths of the budget, the rest left
    /// for a loaded machine and the adaptive extra runs.
    #[test]
    fn the_suite_plan_fits_its_budget_so_a_default_run_is_not_cut_short() {
        let b = OpenflowLab.budget();
        for (quick, budget) in [(true, b.quick_s), (false, b.default_s)] {
            let plan = crate::bench::suite_config(quick, None).planned_min_s();
            assert!(
                plan <= 0.8 * budget as f64,
                "quick={quick}: {plan:.1} s planned for a {budget} s budget"
            );
        }
    }
}
