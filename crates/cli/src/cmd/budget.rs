//! `commbench budget`: line-rate arithmetic (pps, ns and cycles per packet).
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::clock::tsc;
use commbench_core::linerate::{budget, parse_link, TABLE_LINKS_GBPS, TABLE_SIZES};
use commbench_core::record::Record;

#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// Link speed, e.g. 1G, 10G, 25G, 40G, 100G, 400M (1M..=10T).
    #[arg(long)]
    pub link: Option<String>,
    /// Frame size in bytes including FCS (64..=9216).
    #[arg(long)]
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

pub fn records(link: Option<&str>, size: Option<u32>, ghz: Option<f64>) -> Result<Vec<Record>> {
    let (hz, hz_source) = match ghz {
        Some(g) if g.is_finite() && (0.1..=10.0).contains(&g) => (g * 1e9, "given"),
        Some(_) => {
            return Err(crate::usage(
                "--ghz is not a CPU clock between 0.1 and 10 GHz: give GHz, e.g. --ghz 2.0",
            ))
        }
        None => (tsc().hz(), "tsc"),
    };
    let links: Vec<f64> = match link {
        Some(l) => vec![parse_link(l)?],
        None => TABLE_LINKS_GBPS.iter().map(|g| g * 1e9).collect(),
    };
    let sizes: Vec<u32> = match size {
        Some(s) => vec![s],
        None => TABLE_SIZES.to_vec(),
    };
    let mut v = Vec::new();
    for &l in &links {
        for &s in &sizes {
            let b = budget(l, s, hz)?;
            v.push(
                Record::new("budget", "line_rate")
                    .param("link_gbps", l / 1e9)
                    .param("frame_bytes", s)
                    .param("cpu_ghz", hz / 1e9)
                    .param("cpu_hz_source", hz_source)
                    .metric("wire_bytes", b.wire_bytes)
                    .metric("mpps", round(b.pps / 1e6, 2))
                    .metric("pps", b.pps.round())
                    .metric("ns_per_packet", round(b.ns_per_packet, 2))
                    .metric("cycles_per_packet", round(b.cycles_per_packet, 1)),
            );
        }
    }
    Ok(v)
}

fn round(x: f64, d: i32) -> f64 {
    let k = 10f64.powi(d);
    (x * k).round() / k
}

pub fn run(a: &BudgetArgs) -> Result<()> {
    a.out.emit(&records(a.link.as_deref(), a.size, a.ghz)?)
}
