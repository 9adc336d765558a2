//! The mux lab as the suite, the summary and `compare` see it: the seed's
//! question (poll or epoll at many connections, and does the state lookup
//! matter?), the declared metrics, the suite step and the answer line.

use crate::{run, EngineKind, Lookup, MuxConfig};
use commbench_core::figure::FigureSpec;
use commbench_core::lab::answer::{is, median, of, ratio, ratio_between};
use commbench_core::lab::{
    Better, Lab, LabError, MetricSpec, Quantity, StepOutcome, SuiteBudget, SuiteCtx,
};
use commbench_core::{Record, Recorder};
use serde_json::Value;
use std::time::Duration;

/// The mux lab.
pub struct MuxLab;

const ECHO: &[&str] = &["echo"];
const BOTH: &[&str] = &["echo", "open", "httpd"];
const OPEN: &[&str] = &["open"];
const SWEEP: &[&str] = &["sweep"];
const HTTPD: &[&str] = &["httpd"];

static METRICS: [MetricSpec; 34] = [
    MetricSpec::headline(
        "corrected_p99_ns",
        "p99 latency from the intended send time (corrected)",
        "ns",
        Better::Lower,
        Quantity::Time,
        OPEN,
    ),
    MetricSpec::headline(
        "max_rate_meeting_slo",
        "highest rate meeting the latency objective",
        "req/s",
        Better::Higher,
        Quantity::Time,
        SWEEP,
    ),
    MetricSpec::headline(
        "server_cpu_us_per_rt",
        "server CPU per round trip",
        "µs",
        Better::Lower,
        Quantity::Cost,
        BOTH,
    ),
    MetricSpec::headline(
        "rt_per_s",
        "round trips per second",
        "rt/s",
        Better::Higher,
        Quantity::Time,
        BOTH,
    ),
    MetricSpec::other(
        "client_cpu_us_per_rt",
        "load generator CPU per round trip",
        "µs",
        Better::Lower,
        Quantity::Cost,
        BOTH,
    ),
    MetricSpec::other(
        "server_user_us_per_rt",
        "server user CPU per round trip",
        "µs",
        Better::Lower,
        Quantity::Cost,
        BOTH,
    ),
    MetricSpec::other(
        "server_sys_us_per_rt",
        "server system CPU per round trip",
        "µs",
        Better::Lower,
        Quantity::Cost,
        BOTH,
    ),
    MetricSpec::other(
        "latency_ns.p50",
        "round trip, median",
        "ns",
        Better::Lower,
        Quantity::Time,
        BOTH,
    ),
    MetricSpec::other(
        "latency_ns.p99",
        "round trip, p99",
        "ns",
        Better::Lower,
        Quantity::Time,
        BOTH,
    ),
    MetricSpec::other(
        "syscalls_per_rt",
        "system calls per round trip",
        "calls",
        Better::Lower,
        Quantity::Cost,
        BOTH,
    ),
    MetricSpec::other(
        "scan_steps_per_rt",
        "state lookup steps per round trip",
        "steps",
        Better::Lower,
        Quantity::Cost,
        ECHO,
    ),
    MetricSpec::other(
        "connects_per_s",
        "connections set up per second",
        "conn/s",
        Better::Higher,
        Quantity::Time,
        ECHO,
    ),
    MetricSpec::other(
        "rate_achieved",
        "achieved request rate",
        "req/s",
        Better::Higher,
        Quantity::Time,
        OPEN,
    ),
    MetricSpec::other(
        "corrected_p50_ns",
        "median latency from the intended send time",
        "ns",
        Better::Lower,
        Quantity::Time,
        OPEN,
    ),
    MetricSpec::other(
        "corrected_p999_ns",
        "p99.9 latency from the intended send time",
        "ns",
        Better::Lower,
        Quantity::Time,
        OPEN,
    ),
    MetricSpec::other(
        "raw_p99_ns",
        "p99 latency from the write (uncorrected)",
        "ns",
        Better::Lower,
        Quantity::Time,
        OPEN,
    ),
    MetricSpec::other(
        "raw_p999_ns",
        "p99.9 latency from the write (uncorrected)",
        "ns",
        Better::Lower,
        Quantity::Time,
        OPEN,
    ),
    MetricSpec::other(
        "lag_p99_ns",
        "load generator schedule lag, p99",
        "ns",
        Better::Lower,
        Quantity::Cost,
        OPEN,
    ),
    MetricSpec::other(
        "corrected_ns.p9999",
        "p99.99 latency from the intended send time",
        "ns",
        Better::Lower,
        Quantity::Time,
        OPEN,
    ),
    MetricSpec::other(
        "corrected_ns.max",
        "largest latency from the intended send time",
        "ns",
        Better::Lower,
        Quantity::Time,
        OPEN,
    ),
    MetricSpec::other(
        "raw_ns.p50",
        "median latency from the write",
        "ns",
        Better::Lower,
        Quantity::Time,
        OPEN,
    ),
    MetricSpec::other(
        "raw_ns.max",
        "largest latency from the write",
        "ns",
        Better::Lower,
        Quantity::Time,
        OPEN,
    ),
    MetricSpec::other(
        "lag_ns.p50",
        "load generator schedule lag, median",
        "ns",
        Better::Lower,
        Quantity::Cost,
        OPEN,
    ),
    MetricSpec::other(
        "lag_ns.max",
        "load generator schedule lag, largest",
        "ns",
        Better::Lower,
        Quantity::Cost,
        OPEN,
    ),
    MetricSpec::other(
        "held",
        "requests that waited for a window slot",
        "req",
        Better::Lower,
        Quantity::Cost,
        OPEN,
    ),
    MetricSpec::other(
        "http.errors",
        "malformed HTTP responses",
        "resp",
        Better::Lower,
        Quantity::Cost,
        BOTH,
    ),
    MetricSpec::other(
        "http.resets",
        "connections closed or reset by the server",
        "conn",
        Better::Lower,
        Quantity::Cost,
        BOTH,
    ),
    MetricSpec::other(
        "sweep_points",
        "rate steps measured",
        "steps",
        Better::Unknown,
        Quantity::Other,
        SWEEP,
    ),
    MetricSpec::other(
        "scheduled",
        "requests due in the measured window",
        "req",
        Better::Unknown,
        Quantity::Other,
        OPEN,
    ),
    MetricSpec::other(
        "completed",
        "measured requests completed",
        "req",
        Better::Unknown,
        Quantity::Other,
        OPEN,
    ),
    MetricSpec::other(
        "http.s2xx",
        "HTTP 2xx responses",
        "resp",
        Better::Unknown,
        Quantity::Other,
        BOTH,
    ),
    MetricSpec::other(
        "http.s4xx",
        "HTTP 4xx responses",
        "resp",
        Better::Lower,
        Quantity::Cost,
        BOTH,
    ),
    MetricSpec::other(
        "http.s5xx",
        "HTTP 5xx responses",
        "resp",
        Better::Lower,
        Quantity::Cost,
        BOTH,
    ),
    MetricSpec::other(
        "non_2xx",
        "non-2xx or malformed HTTP responses",
        "resp",
        Better::Lower,
        Quantity::Cost,
        HTTPD,
    ),
];

impl Lab for MuxLab {
    fn name(&self) -> &'static str {
        "mux"
    }
    fn record_labs(&self) -> &'static [&'static str] {
        &["mux"]
    }
    fn question(&self) -> &'static str {
        "poll or epoll at many connections, and does the lookup matter?"
    }
    fn figures(&self) -> Vec<FigureSpec> {
        crate::figures()
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        &METRICS
    }
    fn budget(&self) -> SuiteBudget {
        // Five repeats of every engine and lookup (a server process each).
        SuiteBudget {
            quick_s: 15,
            default_s: 35,
        }
    }
    /// Every engine, both lookups, N=1000 (10,000 under the full preset);
    /// one engine at a time, so the budget is checked between engines.
    fn suite_step(&self, ctx: &SuiteCtx, rec: &mut Recorder) -> Result<StepOutcome, LabError> {
        let mut out = StepOutcome::default();
        for engine in EngineKind::ALL {
            if out.cut_if_over(ctx, format!("mux {}", engine.as_str())) {
                continue;
            }
            let cfg = MuxConfig {
                engines: vec![engine],
                lookups: vec![Lookup::Scan, Lookup::Index],
                conns: if ctx.full() { 10_000 } else { 1000 },
                rounds: if ctx.quick() { 10 } else { 20 },
                // Five server processes per configuration, interleaved:
                // the samples of each headline metric's interval.
                repeat: 5,
                timeout: Duration::from_secs(60),
                ..MuxConfig::default()
            };
            run(&cfg, rec)?;
        }
        // The open-loop view: HTTP/1.1 at a fixed rate on poll and
        // epoll, corrected and raw latency (the report's hockey-stick
        // figure gets one point per rate).
        for rate in [2000.0, 8000.0] {
            if out.cut_if_over(ctx, format!("mux open loop {rate:.0} req/s")) {
                continue;
            }
            let cfg = MuxConfig {
                engines: vec![EngineKind::Poll, EngineKind::EpollLt],
                lookups: vec![Lookup::Index],
                conns: if ctx.full() { 10_000 } else { 1000 },
                active: Some(100),
                protocol: crate::Protocol::Http1,
                open: crate::open::OpenConfig {
                    rate: Some(rate),
                    warmup: Duration::from_millis(300),
                    duration: Duration::from_secs(if ctx.quick() { 1 } else { 2 }),
                    ..crate::open::OpenConfig::closed(1)
                },
                timeout: Duration::from_secs(60),
                ..MuxConfig::default()
            };
            run(&cfg, rec)?;
        }
        Ok(out)
    }
    fn clean_leftovers(&self, dry_run: bool) -> Vec<commbench_core::lab::Leftover> {
        crate::httpd::clean_leftovers(dry_run)
    }
    fn answer(&self, recs: &[Record]) -> Option<String> {
        let r = of(recs, self.record_labs());
        let get = |e: &str, l: &str| {
            median(
                r.iter().copied(),
                |x| x.test == "echo" && is(x, "engine", e) && is(x, "lookup", l),
                "server_cpu_us_per_rt",
            )
        };
        let conns = r
            .iter()
            .find(|x| x.test == "echo")
            .and_then(|x| x.params.get("conns").and_then(Value::as_u64))?;
        let poll = get("poll", "index")?;
        let ep = get("epoll-lt", "index")?;
        let pick = |e: &'static str| {
            move |x: &Record| x.test == "echo" && is(x, "engine", e) && is(x, "lookup", "index")
        };
        let ep_poll = ratio_between(&r, pick("epoll-lt"), pick("poll"), "server_cpu_us_per_rt")
            .unwrap_or_else(|| ratio(ep, poll));
        let mut a = format!(
            "{conns} connections, server CPU per round trip: epoll {ep:.2} µs vs poll {poll:.2} µs = {ep_poll}"
        );
        if let Some(scan) = get("epoll-lt", "scan") {
            a.push_str(&format!(
                "; epoll with the seed's linear state lookup {scan:.2} µs ({} of indexed)",
                ratio(scan, ep)
            ));
        }
        if let Some(u) = get("io-uring", "index") {
            a.push_str(&format!("; io_uring {u:.2} µs"));
        }
        Some(a)
    }
}
