//! `commbench delay`: requested vs measured delay for a TSC busy-wait, the
//! seed's volatile empty loop (calibrated once) and nanosleep.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::{Args, ValueEnum};
use commbench_core::corelab::delay_records;
use commbench_core::delay::{DelayMethod, DEFAULT_REQUESTS_NS};

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

pub fn run(a: &DelayArgs) -> Result<()> {
    let methods: Vec<DelayMethod> = a.methods.iter().map(|&m| m.into()).collect();
    let mut rec = crate::progress::recorder();
    let v = delay_records(&methods, &a.requests, a.samples, &mut rec).map_err(crate::lab_err)?;
    crate::progress::finish();
    a.out.emit(&v)
}
