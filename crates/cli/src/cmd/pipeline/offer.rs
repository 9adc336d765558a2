//! The offer every black-box command shares: the trial's settings from
//! the command line, and a capture to replay through the device instead
//! of synthetic frames (`--traffic`, `--traffic-mix`).
use super::OfferArgs;
use anyhow::Result;
use clap::Args;
use commbench_pipeline::netns;
use commbench_pipeline::tester::pace::{self, Sizes};
use commbench_pipeline::tester::replay::{Order, Traffic};
use commbench_pipeline::tester::trial::Offer;
use commbench_pipeline::tester::{RoleCpus, TrialSpec};
use std::sync::Arc;
use std::time::Duration;

/// A capture to offer instead of synthetic frames.
#[derive(Debug, Args)]
pub struct TrafficArgs {
    /// Offer the frames of this capture (pcap or pcapng; plain, gzip or zstd) in its order, looped, instead of synthetic frames: MACs rewritten, L3/L4 as captured, the tester's stamp past each IP datagram; its sizes and flows replace --size/--sizes and --flows. Frames the path cannot carry are counted and left out.
    #[arg(long, value_name = "FILE")]
    pub traffic: Option<String>,
    /// With --traffic: offer the capture's size and flow mix shuffled with --seed, not its order.
    #[arg(long, requires = "traffic")]
    pub traffic_mix: bool,
}

/// The offer shared by the black-box commands: the trial at `rate`
/// (pps or a share of `--link`) with `sizes`, checked (usage errors exit
/// 2), and only as root.
pub(super) fn offer(o: &OfferArgs, rate: &str, sizes: Sizes) -> Result<Offer> {
    let rate = pace::parse_rate(rate, o.link).map_err(crate::usage_err)?;
    let mut trial = TrialSpec {
        rate,
        arrivals: o.arrivals,
        sizes,
        burst: o.burst,
        flows: o.flows,
        duration: Duration::from_secs_f64(o.duration_s),
        late_ns: o.late_us.saturating_mul(1000),
        lag_bound_ns: o.lag_bound_us * 1000,
        drain: Duration::from_millis(o.drain_ms),
        tx: o.tx.into(),
        rx: o.rx.into(),
        spin_ns: o.spin_us * 1000,
        gen_priority: o.gen_priority,
        seed: o.seed,
        ..TrialSpec::default()
    };
    if let Some(path) = &o.traffic.traffic {
        let order = match o.traffic.traffic_mix {
            true => Order::Mix { seed: o.seed },
            false => Order::Capture,
        };
        let t = Traffic::load(path, order).map_err(crate::usage_err)?;
        eprintln!("commbench pipeline: traffic {}: {}", t.name(), t.mix.line());
        if let Some(l) = t.refused_line() {
            eprintln!("commbench pipeline: note: {l}");
        }
        trial = trial.with_traffic(Arc::new(t));
    }
    trial.validate().map_err(crate::usage_err)?;
    if !netns::is_root() {
        anyhow::bail!(
            "the black-box tester creates network namespaces and veth links: run it as root"
        );
    }
    Ok(Offer {
        dut: o.dut.clone(),
        trial,
        cpus: o.cpus.clone().unwrap_or_else(RoleCpus::for_host),
        bias: !o.no_bias,
    })
}
