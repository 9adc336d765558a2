//! The ipc lab as the suite, the summary and `compare` see it: the seed's
//! question (is shared memory faster than the kernel's paths?), the
//! declared metrics, the suite step and the answer line.

use crate::{
    run_interleaved, run_interleaved_repeats, Clients, IpcConfig, TransportKind, Workload,
};
use commbench_core::estimate::Repeats;
use commbench_core::figure::FigureSpec;
use commbench_core::lab::answer::{is, median, ns, of, rate, ratio_between};
use commbench_core::lab::{
    Better, Lab, LabError, MetricSpec, Quantity, StepOutcome, SuiteBudget, SuiteCtx,
};
use commbench_core::placement::CpuList;
use commbench_core::{Record, Recorder};

/// The ipc lab.
pub struct IpcLab;

const REQRES: &[&str] = &["reqres"];
const STREAM: &[&str] = &["stream"];

static METRICS: [MetricSpec; 13] = [
    MetricSpec::headline(
        "cpu_ns_per_op",
        "CPU per message (both sides)",
        "ns",
        Better::Lower,
        Quantity::Cost,
        &[],
    ),
    MetricSpec::headline(
        "msgs_per_s",
        "messages per second",
        "msg/s",
        Better::Higher,
        Quantity::Time,
        REQRES,
    ),
    MetricSpec::headline(
        "gib_per_s",
        "stream throughput",
        "GiB/s",
        Better::Higher,
        Quantity::Time,
        STREAM,
    ),
    MetricSpec::other(
        "rt_p50_ns",
        "round trip, median",
        "ns",
        Better::Lower,
        Quantity::Time,
        REQRES,
    ),
    MetricSpec::other(
        "rt_p90_ns",
        "round trip, p90",
        "ns",
        Better::Lower,
        Quantity::Time,
        REQRES,
    ),
    MetricSpec::other(
        "rt_p999_ns",
        "round trip, p99.9",
        "ns",
        Better::Lower,
        Quantity::Time,
        REQRES,
    ),
    MetricSpec::other(
        "rt_p9999_ns",
        "round trip, p99.99",
        "ns",
        Better::Lower,
        Quantity::Time,
        REQRES,
    ),
    MetricSpec::other(
        "rt_p99_ns",
        "round trip, p99",
        "ns",
        Better::Lower,
        Quantity::Time,
        REQRES,
    ),
    MetricSpec::other(
        "server_cpu_ns_per_msg",
        "server CPU per message",
        "ns",
        Better::Lower,
        Quantity::Cost,
        &[],
    ),
    MetricSpec::other(
        "client_cpu_ns_per_msg",
        "client CPU per message",
        "ns",
        Better::Lower,
        Quantity::Cost,
        &[],
    ),
    MetricSpec::other(
        "ctx_per_op",
        "context switches per message",
        "switches",
        Better::Lower,
        Quantity::Cost,
        &[],
    ),
    MetricSpec::other(
        "mb_per_s",
        "stream throughput",
        "MB/s",
        Better::Higher,
        Quantity::Time,
        STREAM,
    ),
    MetricSpec::other(
        "elapsed_s",
        "elapsed",
        "s",
        Better::Lower,
        Quantity::Time,
        &[],
    ),
];

impl Lab for IpcLab {
    fn name(&self) -> &'static str {
        "ipc"
    }
    fn record_labs(&self) -> &'static [&'static str] {
        &["ipc"]
    }
    fn question(&self) -> &'static str {
        "is shared memory faster than the kernel's paths?"
    }
    fn figures(&self) -> Vec<FigureSpec> {
        crate::figures::figures()
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        &METRICS
    }
    fn budget(&self) -> SuiteBudget {
        SuiteBudget {
            quick_s: 8,
            default_s: 25,
        }
    }
    fn suite_step(&self, ctx: &SuiteCtx, rec: &mut Recorder) -> Result<StepOutcome, LabError> {
        let mut out = StepOutcome::default();
        let count = if ctx.quick() { 5_000 } else { 20_000 };
        // At least 5 interleaved rounds, more (up to 15) while a
        // transport's CPU per message has an interval wider than ±2%.
        let plan = Repeats {
            min: 5,
            max: 15,
            target_rel_half_width: 0.02,
        };
        let (server_cpus, client_cpus) = suite_placement();
        let reqres: Vec<IpcConfig> = TransportKind::ALL
            .iter()
            .map(|&t| IpcConfig {
                transport: t,
                size: 128,
                count,
                server_cpus: server_cpus.clone(),
                client_cpus: client_cpus.clone(),
                ..IpcConfig::default()
            })
            .collect();
        // Request/response may repeat into 60% of what is left of the
        // budget, so that the stream still runs.
        let reqres_deadline = ctx.deadline().map(|d| {
            let now = std::time::Instant::now();
            now + d.saturating_duration_since(now).mul_f64(0.6)
        });
        run_interleaved_repeats(&reqres, &plan, reqres_deadline, rec)?;
        if out.cut_if_over(ctx, "ipc stream") {
            return Ok(out);
        }
        let stream: Vec<IpcConfig> = [TransportKind::Shm, TransportKind::Uds]
            .iter()
            .map(|&t| IpcConfig {
                transport: t,
                workload: Workload::Stream,
                size: 64 << 10,
                count: count / 5,
                latency: false,
                server_cpus: server_cpus.clone(),
                client_cpus: client_cpus.clone(),
                ..IpcConfig::default()
            })
            .collect();
        run_interleaved_repeats(&stream, &plan, ctx.deadline(), rec)?;
        if ctx.full() {
            // The seed's note on sessions beyond the core count, as a
            // sweep: mt and mp clients, 1..32 sessions, shm (adaptive) and
            // the Unix socket, interleaved.
            let mut cfgs = Vec::new();
            for sessions in [1u32, 2, 4, 8, 16, 32] {
                for clients in [Clients::Mt, Clients::Mp] {
                    for transport in [TransportKind::Shm, TransportKind::Uds] {
                        cfgs.push(IpcConfig {
                            transport,
                            sessions,
                            clients,
                            size: 128,
                            count: 20_000,
                            ..IpcConfig::default()
                        });
                    }
                }
            }
            run_interleaved(&cfgs, 3, rec)?;
        }
        Ok(out)
    }
    fn answer(&self, recs: &[Record]) -> Option<String> {
        let r = of(recs, self.record_labs());
        let of_transport = |t: &str, k: &str| {
            median(
                r.iter().copied(),
                |x| x.test == "reqres" && is(x, "transport", t),
                k,
            )
        };
        let cpu = |t: &str| {
            Some(
                of_transport(t, "server_cpu_ns_per_msg")?
                    + of_transport(t, "client_cpu_ns_per_msg")?,
            )
        };
        let shm = of_transport("shm", "msgs_per_s")?;
        let (best, b) = ["uds", "pipe", "tcp"]
            .iter()
            .filter_map(|t| of_transport(t, "msgs_per_s").map(|v| (*t, v)))
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        let reqres =
            |t: &'static str| move |x: &Record| x.test == "reqres" && is(x, "transport", t);
        let r_ratio = ratio_between(&r, reqres("shm"), reqres(best), "msgs_per_s")?;
        let mut a = format!(
            "request/response: shm {} msg/s vs {best} (fastest kernel path) {} = {r_ratio}",
            rate(shm),
            rate(b),
        );
        if let (Some(c1), Some(c2)) = (cpu("shm"), cpu(best)) {
            a.push_str(&format!("; CPU per message {} vs {}", ns(c1), ns(c2)));
        }
        Some(a)
    }
}

/// The suite's placement: the server on the last CPU this process may use,
/// the client on the first, each pinned (none with one CPU). Left to the
/// scheduler, the two ends of a kernel path shared a CPU in one suite
/// (pipe 277k msg/s) and sat on two in the next (31k: a cross-CPU wake-up
/// per message on a VM), a 6x swing between two runs of one binary that
/// no within-run repeat shows; shm's co-location likewise followed the
/// load of the moment. Pinned, every run measures the same path: a server
/// and its client on separate cores.
fn suite_placement() -> (Option<CpuList>, Option<CpuList>) {
    suite_placement_over(commbench_core::placement::current_affinity().cpus())
}

fn suite_placement_over(cpus: &[usize]) -> (Option<CpuList>, Option<CpuList>) {
    match cpus {
        [first, .., last] => (
            Some(CpuList::from_cpus(vec![*last])),
            Some(CpuList::from_cpus(vec![*first])),
        ),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suite_pins_server_and_client_to_cpus_of_their_own() {
        let (s, c) = suite_placement_over(&[0, 1]);
        assert_eq!((s.unwrap().cpus(), c.unwrap().cpus()), (&[1][..], &[0][..]));
        let (s, c) = suite_placement_over(&[2, 5, 7]);
        assert_eq!((s.unwrap().cpus(), c.unwrap().cpus()), (&[7][..], &[2][..]));
        // One CPU: nothing to separate, nothing pinned.
        let (s, c) = suite_placement_over(&[3]);
        assert!(s.is_none() && c.is_none());
    }
}
