//! `commbench delay`: requested vs measured delay for a TSC busy-wait, the
//! seed's volatile empty loop (calibrated once) and nanosleep.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::{Args, ValueEnum};
use commbench_core::delay::{default_samples, measure, DelayMethod, Delays, DEFAULT_REQUESTS_NS};
use commbench_core::record::{Record, Recorder};

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum MethodArg {
    TscSpin,
    VolatileLoop,
    Nanosleep,
}

impl From<MethodArg> for DelayMethod {
    fn from(m: MethodArg) -> Self {
        match m {
            MethodArg::TscSpin => DelayMethod::TscSpin,
            MethodArg::VolatileLoop => DelayMethod::VolatileLoop,
            MethodArg::Nanosleep => DelayMethod::Nanosleep,
        }
    }
}

#[derive(Debug, Args)]
pub struct DelayArgs {
    /// Methods to measure (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["tsc-spin", "volatile-loop", "nanosleep"])]
    pub methods: Vec<MethodArg>,
    /// Requested delays in ns (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_REQUESTS_NS.to_vec())]
    pub requests: Vec<u64>,
    /// Samples per (method, request); default keeps each near 20 ms.
    #[arg(long)]
    pub samples: Option<usize>,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn records(
    methods: &[DelayMethod],
    requests: &[u64],
    samples: Option<usize>,
    rec: &mut Recorder,
) -> Result<Vec<Record>> {
    if let Some(&r) = requests.iter().find(|&&r| r == 0 || r > 1_000_000_000) {
        return Err(crate::usage(format!(
            "requested delay {r} ns is outside 1..=1000000000"
        )));
    }
    if let Some(s) = samples {
        if s == 0 || s > 10_000_000 {
            return Err(crate::usage(format!(
                "--samples {s} is outside 1..=10000000"
            )));
        }
    }
    let delays = Delays::calibrate();
    let mut v = Vec::new();
    for &m in methods {
        for &req in requests {
            rec.progress(&format!("delay: {} {req} ns", m.name()));
            let n = samples.unwrap_or_else(|| default_samples(m, req));
            let a = measure(m, req, n, &delays);
            v.push(
                Record::new("delay", m.name())
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
                            Some(commbench_core::clock::tsc().ticks_to_ns(delays.spin.fixed_ticks))
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
                    ),
            );
        }
    }
    Ok(v)
}

pub fn run(a: &DelayArgs) -> Result<()> {
    let methods: Vec<DelayMethod> = a.methods.iter().map(|&m| m.into()).collect();
    let mut rec = crate::progress::recorder();
    let v = records(&methods, &a.requests, a.samples, &mut rec)?;
    crate::progress::finish();
    a.out.emit(&v)
}
