//! The pipeline lab as the suite, the summary and `compare` see it: the
//! seed's question (what do rx burst, work and tx cost per packet?), the
//! declared metrics, the suite step and the answer line.

use crate::{rss_bench, run_repeats, Mode, PipelineConfig, Sweep};
use commbench_core::estimate::Repeats;
use commbench_core::figure::FigureSpec;
use commbench_core::lab::answer::{is, median, of};
use commbench_core::lab::{
    Better, Lab, LabError, Leftover, MetricSpec, Quantity, StepOutcome, SuiteBudget, SuiteCtx,
};
use commbench_core::{Record, Recorder};

/// The pipeline lab.
pub struct PipelineLab;

const RUNS: &[&str] = &["run", "sweep-tx-bulk", "sweep-queues", "sweep-delay"];

/// Records of the black-box tester with one trial each.
const TRIALS: &[&str] = &[
    "trial",
    "rfc2544-trial",
    "rfc2544-loss",
    "rfc2544-latency",
    "loopback",
];
const SEARCHES: &[&str] = &["rfc2544-ndr", "rfc2544-pdr"];

static METRICS: [MetricSpec; 40] = [
    MetricSpec::headline(
        "ticks_total",
        "TSC ticks per packet",
        "ticks",
        Better::Lower,
        Quantity::Cost,
        RUNS,
    ),
    MetricSpec::headline(
        "cpu_ns_per_packet",
        "CPU per packet",
        "ns",
        Better::Lower,
        Quantity::Cost,
        RUNS,
    ),
    MetricSpec::headline(
        "mpps",
        "packets per second",
        "Mpps",
        Better::Higher,
        Quantity::Time,
        RUNS,
    ),
    MetricSpec::headline(
        "ticks_per_hash",
        "TSC ticks per RSS hash",
        "ticks",
        Better::Lower,
        Quantity::Cost,
        &["rss-hash"],
    ),
    MetricSpec::other(
        "ticks_rx",
        "rx burst, ticks per packet",
        "ticks",
        Better::Lower,
        Quantity::Cost,
        RUNS,
    ),
    MetricSpec::other(
        "ticks_work",
        "work, ticks per packet",
        "ticks",
        Better::Lower,
        Quantity::Cost,
        RUNS,
    ),
    MetricSpec::other(
        "ticks_tx",
        "tx buffering, ticks per packet",
        "ticks",
        Better::Lower,
        Quantity::Cost,
        RUNS,
    ),
    MetricSpec::other(
        "ticks_sink",
        "tx completion, ticks per packet",
        "ticks",
        Better::Lower,
        Quantity::Cost,
        RUNS,
    ),
    MetricSpec::other(
        "left_ticks_10G",
        "ticks left per packet at 10 GbE",
        "ticks",
        Better::Higher,
        Quantity::Cost,
        RUNS,
    ),
    MetricSpec::other(
        "left_ticks_100G",
        "ticks left per packet at 100 GbE",
        "ticks",
        Better::Higher,
        Quantity::Cost,
        RUNS,
    ),
    MetricSpec::other(
        "ticks_p99",
        "TSC ticks per RSS hash, p99",
        "ticks",
        Better::Lower,
        Quantity::Cost,
        &["rss-hash"],
    ),
    MetricSpec::other(
        "max_over_mean",
        "busiest queue over the mean",
        "×",
        Better::Lower,
        Quantity::Other,
        &["rss-balance"],
    ),
    MetricSpec::other(
        "dropped",
        "packets dropped",
        "packets",
        Better::Lower,
        Quantity::Cost,
        RUNS,
    ),
    MetricSpec::headline(
        "rate_pps",
        "RFC 2544 throughput (NDR / PDR)",
        "pps",
        Better::Higher,
        Quantity::Time,
        SEARCHES,
    ),
    MetricSpec::other(
        "rate_mpps",
        "RFC 2544 throughput (NDR / PDR)",
        "Mpps",
        Better::Higher,
        Quantity::Time,
        SEARCHES,
    ),
    MetricSpec::headline(
        "delivered_per_gen_cpu_s",
        "frames delivered per generator CPU-second",
        "frames/CPU-s",
        Better::Higher,
        Quantity::Cost,
        TRIALS,
    ),
    MetricSpec::headline(
        "loss_pct",
        "frames lost",
        "%",
        Better::Lower,
        Quantity::Other,
        TRIALS,
    ),
    MetricSpec::headline(
        "latency_p99_ns",
        "one-way latency, p99",
        "ns",
        Better::Lower,
        Quantity::Time,
        TRIALS,
    ),
    MetricSpec::other(
        "latency_p50_ns",
        "one-way latency, median",
        "ns",
        Better::Lower,
        Quantity::Time,
        TRIALS,
    ),
    MetricSpec::other(
        "latency_p9999_ns",
        "one-way latency, p99.99",
        "ns",
        Better::Lower,
        Quantity::Time,
        TRIALS,
    ),
    MetricSpec::other(
        "achieved_pps",
        "rate the generator achieved",
        "pps",
        Better::Unknown,
        Quantity::Other,
        TRIALS,
    ),
    MetricSpec::other(
        "rate_error_pct",
        "generator rate error",
        "%",
        Better::Unknown,
        Quantity::Other,
        TRIALS,
    ),
    MetricSpec::other(
        "lag_p99_ns",
        "generator schedule lag, p99",
        "ns",
        Better::Lower,
        Quantity::Time,
        TRIALS,
    ),
    MetricSpec::other(
        "gen_wait_ms",
        "generator's run-queue delay in the trial (another task had its CPU)",
        "ms",
        Better::Lower,
        Quantity::Time,
        TRIALS,
    ),
    MetricSpec::other(
        "gen_preempted",
        "times the generator was preempted in the trial",
        "count",
        Better::Lower,
        Quantity::Other,
        TRIALS,
    ),
    MetricSpec::other(
        "host_stall_ms",
        "host's longest stall in the trial (stall monitor)",
        "ms",
        Better::Lower,
        Quantity::Time,
        TRIALS,
    ),
    MetricSpec::other(
        "steal_ms",
        "CPU time stolen by the hypervisor in the trial",
        "ms",
        Better::Lower,
        Quantity::Time,
        TRIALS,
    ),
    MetricSpec::other(
        "dut_cpu_busy_ms",
        "device CPU busy in the trial (its window less idle)",
        "ms",
        Better::Lower,
        Quantity::Cost,
        TRIALS,
    ),
    MetricSpec::other(
        "dut_cpu_softirq_ms",
        "device CPU in softirq in the trial (tick-sampled)",
        "ms",
        Better::Lower,
        Quantity::Cost,
        TRIALS,
    ),
    MetricSpec::other(
        "dut_cpu_system_ms",
        "device CPU in the kernel for tasks in the trial (tick-sampled)",
        "ms",
        Better::Lower,
        Quantity::Cost,
        TRIALS,
    ),
    MetricSpec::other(
        "dut_cpu_ns_per_frame",
        "device CPU busy time per frame received",
        "ns",
        Better::Lower,
        Quantity::Cost,
        TRIALS,
    ),
    MetricSpec::other(
        "fwd_ticks_kernel",
        "device CPU ticks per frame outside the forwarder's own sections",
        "ticks",
        Better::Lower,
        Quantity::Cost,
        TRIALS,
    ),
    MetricSpec::other(
        "window_100us_over_share",
        "most frames in 100 µs over the rate's share",
        "×",
        Better::Lower,
        Quantity::Other,
        TRIALS,
    ),
    MetricSpec::headline(
        "b2b_frames",
        "RFC 2544 back-to-back burst forwarded without loss",
        "frames",
        Better::Higher,
        Quantity::Other,
        &["rfc2544-b2b"],
    ),
    MetricSpec::other(
        "corrected_buffer_us",
        "RFC 9004 corrected buffer time",
        "µs",
        Better::Higher,
        Quantity::Other,
        &["rfc2544-b2b"],
    ),
    MetricSpec::other(
        "measured_pps",
        "black-box NDR of l2fwd",
        "pps",
        Better::Higher,
        Quantity::Time,
        &["crosscheck"],
    ),
    MetricSpec::other(
        "kernel_ticks",
        "white box: device CPU ticks per packet outside the forwarder",
        "ticks",
        Better::Lower,
        Quantity::Cost,
        &["crosscheck"],
    ),
    MetricSpec::other(
        "predicted_pps",
        "white-box NDR: forwarder and its CPU's kernel receive",
        "pps",
        Better::Higher,
        Quantity::Other,
        &["crosscheck"],
    ),
    MetricSpec::other(
        "predicted_fwd_pps",
        "white-box NDR from the forwarder's own ticks alone",
        "pps",
        Better::Higher,
        Quantity::Other,
        &["crosscheck"],
    ),
    MetricSpec::other(
        "error_pct",
        "measured NDR vs the cost model",
        "%",
        Better::Unknown,
        Quantity::Other,
        &["crosscheck"],
    ),
];

impl Lab for PipelineLab {
    fn name(&self) -> &'static str {
        "pipeline"
    }
    fn record_labs(&self) -> &'static [&'static str] {
        &["pipeline"]
    }
    fn question(&self) -> &'static str {
        "what do rx burst, work and tx cost per packet?"
    }
    fn figures(&self) -> Vec<FigureSpec> {
        crate::figures()
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        &METRICS
    }
    fn budget(&self) -> SuiteBudget {
        SuiteBudget {
            quick_s: 10,
            default_s: 35,
        }
    }
    /// Run to completion and a short pipeline with swap work, a tx-bulk
    /// sweep and the RSS hash; as root, the black-box tester on commbench's
    /// forwarder with 2 µs of work per frame (quick: one trial; default:
    /// the RFC 2544 NDR search).
    fn suite_step(&self, ctx: &SuiteCtx, rec: &mut Recorder) -> Result<StepOutcome, LabError> {
        let packets = if ctx.quick() { 2_000_000 } else { 20_000_000 };
        // At least 5 separate runs per configuration, more (up to 20)
        // while an interval is wider than ±2%, within the budget.
        let plan = Repeats {
            min: 5,
            max: 20,
            target_rel_half_width: 0.02,
        };
        let mut out = StepOutcome::default();
        // Pinned: the io thread on the first CPU this process may use, the
        // worker on the next. Left to the scheduler, the pipeline mode's
        // two spinning threads ran at 79.7 Mpps in one quick suite and
        // 33.6 in the next, back to back on a quiet host (load 0.9): the
        // run measured where the scheduler put them, and said "unpinned".
        let cpus = {
            let allowed = commbench_core::placement::current_affinity();
            (allowed.cpus().len() >= 2).then_some(allowed)
        };
        for mode in [Mode::Rtc, Mode::Pipeline] {
            if out.cut_if_over(ctx, format!("pipeline {}", mode.name())) {
                continue;
            }
            let c = PipelineConfig {
                mode,
                packets,
                cpus: cpus.clone(),
                ..PipelineConfig::default()
            };
            run_repeats(&c, &plan, ctx.deadline(), rec)?;
        }
        if !out.cut_if_over(ctx, "pipeline tx-bulk sweep") {
            let c = PipelineConfig {
                packets: packets / 4,
                sweep: Some(Sweep::TxBulk(vec![1, 4, 32])),
                cpus: cpus.clone(),
                ..PipelineConfig::default()
            };
            run_repeats(&c, &plan, ctx.deadline(), rec)?;
        }
        if !out.cut_if_over(ctx, "pipeline rss") {
            // Five separate rounds (each hashes every input afresh),
            // folded into one record per implementation and input with
            // the rounds' samples and interval; fewer when the budget ends.
            let mut rounds = Vec::new();
            for i in 0..5 {
                if i >= 2
                    && ctx
                        .deadline()
                        .is_some_and(|d| std::time::Instant::now() >= d)
                {
                    break;
                }
                rounds.extend(rss_bench(4, 4096, rec)?);
            }
            for r in commbench_core::lab::fold_repeats(self, rounds) {
                rec.push(r);
            }
        }
        // The black-box half needs namespaces and veths: root only, and
        // the outcome says so otherwise.
        if !crate::netns::is_root() {
            out.cut_short
                .push("pipeline black-box tester (needs root: namespaces and veths)".to_owned());
        } else if !out.cut_if_over(ctx, "pipeline black-box tester") {
            crate::tester::suite_blackbox(ctx.quick(), rec)?;
        }
        Ok(out)
    }
    /// An MLRsearch goal code spelt out (RFC 9475's dense form).
    fn param_legend(&self, key: &str, value: &str) -> Option<String> {
        (key == "goal")
            .then(|| crate::tester::mlrsearch::Goal::from_code(value))
            .flatten()
            .map(|g| g.spelt_out())
    }
    /// Network namespaces (and their veths) of dead `pipeline netns` runs.
    fn clean_leftovers(&self, dry_run: bool) -> Vec<Leftover> {
        crate::netns::clean_leftovers(dry_run)
            .into_iter()
            .map(|e| Leftover {
                kind: "netns",
                name: e.name,
                pid: e.pid,
                action: e.action,
            })
            .collect()
    }
    fn answer(&self, recs: &[Record]) -> Option<String> {
        let r = of(recs, self.record_labs());
        let rtc = |k: &str| {
            median(
                r.iter().copied(),
                |x| x.test == "run" && is(x, "mode", "rtc"),
                k,
            )
        };
        let total = rtc("ticks_total")?;
        let mut a = format!("run to completion at 64 B: {total:.1} ticks per packet");
        if let (Some(rx), Some(w), Some(tx)) = (rtc("ticks_rx"), rtc("ticks_work"), rtc("ticks_tx"))
        {
            a.push_str(&parts_text(total, rx, "swap", w, tx));
        }
        if let Some(left) = rtc("left_ticks_100G") {
            a.push_str(&format!(
                ", {} at 100 GbE ({:+.1} ticks)",
                if left >= 0.0 {
                    "keeps up"
                } else {
                    "falls short"
                },
                left
            ));
        }
        if let Some(t) = median(
            r.iter().copied(),
            |x| x.test == "rss-hash" && is(x, "impl", "table") && is(x, "input", "ipv4-l4"),
            "ticks_per_hash",
        ) {
            a.push_str(&format!("; Toeplitz {t:.1} ticks per IPv4 4-tuple"));
        }
        if let Some(ndr) = r
            .iter()
            .find(|x| x.test == "rfc2544-ndr" && is(x, "dut", crate::tester::SUITE_DUT))
        {
            a.push_str(&ndr_answer(ndr));
        }
        Some(a)
    }
}

/// " (rx 1.7 + swap 5.8 + tx 5.7 + other 0.5)": the parts of a total that
/// add up to it as printed. Each figure is a median over batches, and the
/// medians of the parts need not add up to the median of the whole (nor
/// do the parts hold the timer reads between sections): what they leave
/// is "other", computed from the rounded figures so the line's own
/// arithmetic holds.
pub fn parts_text(total: f64, rx: f64, work_name: &str, work: f64, tx: f64) -> String {
    // The figures as printed (one decimal), so the line adds up as read.
    let r = |x: f64| format!("{x:.1}").parse::<f64>().unwrap_or(x);
    let other = r(total) - r(rx) - r(work) - r(tx);
    let other = if other.abs() < 0.05 {
        String::new()
    } else {
        format!(
            " {} other {:.1}",
            if other < 0.0 { "−" } else { "+" },
            other.abs()
        )
    };
    format!(" (rx {rx:.1} + {work_name} {work:.1} + tx {tx:.1}{other})")
}

/// The answer line's black-box part: the suite's NDR with how it was
/// decided, or in words why nothing was measured (never a 0).
fn ndr_answer(ndr: &Record) -> String {
    let s = |k: &str| ndr.metrics.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let Some(rate) = ndr
        .metric_f64("rate_mpps")
        .filter(|x| x.is_finite() && *x > 0.0)
    else {
        let why = match s("note") {
            "" => "no trial passed".to_owned(),
            n => n.trim_start_matches("not measured: ").to_owned(),
        };
        return format!("; black-box NDR of l2fwd at 2 µs per frame not measured: {why}");
    };
    let mut a = format!("; black-box NDR of l2fwd at 2 µs per frame {rate:.3} Mpps");
    let mut how = Vec::new();
    if is(ndr, "method", "mlr") {
        let regular = ndr.metrics.get("regular").and_then(|v| v.as_bool()) == Some(true);
        let p = |k: &str| {
            ndr.params
                .get(k)
                .and_then(|v| v.as_f64())
                .unwrap_or(f64::NAN)
        };
        how.push(if regular {
            format!(
                "MLRsearch, exceed ratio {}, bounds within {}%",
                p("goal_exceed_ratio"),
                p("goal_width_pct")
            )
        } else {
            format!(
                "MLRsearch, irregular: {}",
                s("note").trim_start_matches("irregular: ")
            )
        });
    }
    if !s("fail_loss_where").is_empty() {
        how.push(format!("losses above it in the {}", s("fail_loss_where")));
    }
    // An irregular search's note says it already.
    let regular = ndr.metrics.get("regular").and_then(|v| v.as_bool()) == Some(true);
    if let Some(n) = ndr
        .metric_f64("host_spoiled_trials")
        .filter(|&n| n > 0.0 && regular)
    {
        how.push(format!(
            "the host spoiled {n:.0} trials, re-run after {:.1} s of back-off",
            ndr.metric_f64("host_backoff_wait_s").unwrap_or(0.0)
        ));
    }
    if !how.is_empty() {
        a.push_str(&format!(" ({})", how.join("; ")));
    }
    // The device's CPU beside the rate (the figure a shared host repeats),
    // and a flag when other work took its CPU.
    if let Some(ns) = ndr.metric_f64("device_cpu_ns_per_frame") {
        a.push_str(&format!(", device CPU {ns:.0} ns per frame"));
        if let Some(per) = ndr.metric_f64("rate_per_device_cpu_s") {
            a.push_str(&format!(
                ", {} frames per device CPU-second",
                commbench_core::lab::answer::rate(per)
            ));
        }
    } else if let Some(n) = ndr.metrics.get("device_cpu_note").and_then(|v| v.as_str()) {
        a.push_str(&format!("; {n}"));
    }
    if ndr
        .metrics
        .get("device_cpu_shared")
        .and_then(|v| v.as_bool())
        == Some(true)
    {
        a.push_str(&format!(
            " [device CPU shared: other work took {:.0}% of it]",
            ndr.metric_f64("device_cpu_others_pct").unwrap_or(f64::NAN)
        ));
    }
    a
}

/// [`commbench_core::lab::attach_repeats`] with this lab's declared metrics.
pub(crate) fn attach_repeats_of(target: &mut Record, runs: &[Record]) {
    commbench_core::lab::attach_repeats(&PipelineLab, target, runs);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report's tables print an MLRsearch goal's code spelt out.
    #[test]
    fn a_goal_code_is_spelt_out_for_the_reports_tables() {
        assert_eq!(
            PipelineLab.param_legend("goal", "1f4d0l50e1w").as_deref(),
            Some("final trial 1 s, sum 4 s, loss 0%, exceed 50%, width 1%")
        );
        assert_eq!(PipelineLab.param_legend("goal", "nonsense"), None);
        assert_eq!(PipelineLab.param_legend("dut", "1f4d0l50e1w"), None);
    }

    fn ndr(rate_mpps: f64) -> Record {
        Record::new("pipeline", "rfc2544-ndr")
            .param("dut", crate::tester::SUITE_DUT)
            .param("method", "mlr")
            .param("goal_exceed_ratio", 0.5)
            .param("goal_width_pct", 2.0)
            .metric("rate_mpps", rate_mpps)
    }

    /// "13.7 ticks per packet (rx 1.7 + swap 5.8 + tx 5.7)": the parts
    /// added to 13.2. What the parts' medians leave of the total is shown,
    /// so the printed figures add up.
    #[test]
    fn the_answer_line_parts_add_up_to_the_total_it_prints() {
        assert_eq!(
            parts_text(13.7, 1.7, "swap", 5.8, 5.7),
            " (rx 1.7 + swap 5.8 + tx 5.7 + other 0.5)"
        );
        assert_eq!(
            parts_text(6.3, 0.7, "swap", 2.8, 2.8),
            " (rx 0.7 + swap 2.8 + tx 2.8)"
        );
        assert_eq!(
            parts_text(8.6, 1.04, "swap", 4.46, 3.45),
            " (rx 1.0 + swap 4.5 + tx 3.5 − other 0.4)"
        );
        // Whatever the inputs, the printed parts add to the printed total.
        for (t, a, b, c) in [(13.74, 1.66, 5.83, 5.71), (204.04, 39.2, 126.26, 38.2)] {
            let line = format!("{t:.1}{}", parts_text(t, a, "swap", b, c));
            let nums: Vec<f64> = line
                .split(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
                .filter_map(|x| x.parse().ok())
                .collect();
            let sign = if line.contains('−') { -1.0 } else { 1.0 };
            let sum = nums[1] + nums[2] + nums[3] + sign * nums.get(4).copied().unwrap_or(0.0);
            assert!((sum - nums[0]).abs() < 1e-9, "{line}");
        }
    }

    #[test]
    fn the_answer_says_not_measured_and_why_instead_of_a_0() {
        let r = ndr(f64::NAN).metric(
            "note",
            "not measured: the tester/host could not keep 15.6 kpps on schedule (the generator fell behind its schedule)",
        );
        let a = ndr_answer(&r);
        assert_eq!(
            a,
            "; black-box NDR of l2fwd at 2 µs per frame not measured: the tester/host could not keep 15.6 kpps on schedule (the generator fell behind its schedule)"
        );
        assert!(!a.contains("0.000"));
        // RFC 2544's search with no passing rate: its 0 is not a rate.
        let z = Record::new("pipeline", "rfc2544-ndr").metric("rate_mpps", 0.0);
        assert!(ndr_answer(&z).ends_with("not measured: no trial passed"));
    }

    #[test]
    fn the_answer_gives_the_ndr_with_how_it_was_decided() {
        let r = ndr(0.123_4)
            .metric("regular", true)
            .metric("fail_loss_where", "device rx ring");
        assert_eq!(
            ndr_answer(&r),
            "; black-box NDR of l2fwd at 2 µs per frame 0.123 Mpps (MLRsearch, exceed ratio 0.5, bounds within 2%; losses above it in the device rx ring)"
        );
        // Decided despite the host: said so.
        let spoiled = ndr(0.1)
            .metric("regular", true)
            .metric("host_spoiled_trials", 4)
            .metric("host_backoff_wait_s", 6.54);
        assert!(
            ndr_answer(&spoiled)
                .ends_with("within 2%; the host spoiled 4 trials, re-run after 6.5 s of back-off)"),
            "{}",
            ndr_answer(&spoiled)
        );
        let irregular = ndr(0.1).metric("regular", false).metric(
            "note",
            "irregular: the search ran out of time; at least 100.0 kpps",
        );
        assert!(
            ndr_answer(&irregular).contains("(MLRsearch, irregular: the search ran out of time")
        );
    }
}
