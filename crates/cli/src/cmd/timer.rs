//! `commbench timer`: TSC frequency, how it was found, invariance,
//! granularity, and the cost of each way of reading the time.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::corelab::timer_records;

#[derive(Debug, Args)]
pub struct TimerArgs {
    /// Batches of 1000 reads per method.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(10..=1_000_000))]
    pub batches: u32,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run(a: &TimerArgs) -> Result<()> {
    a.out.emit(&timer_records(a.batches as usize))
}
