//! `commbench timer`: TSC frequency, how it was found, invariance,
//! granularity, and the cost of each way of reading the time.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::clock::{read_costs, tsc};
use commbench_core::record::Record;

#[derive(Debug, Args)]
pub struct TimerArgs {
    /// Batches of 1000 reads per method.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(10..=1_000_000))]
    pub batches: u32,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn records(batches: usize) -> Vec<Record> {
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
    v
}

pub fn run(a: &TimerArgs) -> Result<()> {
    a.out.emit(&records(a.batches as usize))
}
