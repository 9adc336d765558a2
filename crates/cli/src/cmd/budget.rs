//! `commbench budget`: line-rate arithmetic (pps, ns and cycles per packet).
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::corelab::{budget_records, CpuClock};

#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// Link speed, e.g. 1G, 10G, 25G, 40G, 100G, 400M (1M..=10T).
    #[arg(long)]
    pub link: Option<String>,
    /// Frame size in bytes including FCS (64..=9216).
    #[arg(long, value_parser = crate::args::parse_size_u32)]
    pub size: Option<u32>,
    /// CPU clock in GHz for the cycle budget, 0.1..=10 (default: the measured TSC rate).
    #[arg(long, value_parser = parse_ghz)]
    pub ghz: Option<f64>,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// A CPU clock in GHz, 0.1..=10; the message repeats what was given, not a
/// 309-digit rendering of it.
fn parse_ghz(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(g) if g.is_finite() && (0.1..=10.0).contains(&g) => Ok(g),
        _ => Err(format!(
            "'{s}' is not a CPU clock in GHz between 0.1 and 10 (e.g. 2.0)"
        )),
    }
}

pub fn run(a: &BudgetArgs) -> Result<()> {
    let clock = match a.ghz {
        Some(g) => CpuClock::GivenGhz(g),
        None => CpuClock::Tsc,
    };
    a.out
        .emit(&budget_records(a.link.as_deref(), a.size, clock).map_err(crate::lab_err)?)
}
