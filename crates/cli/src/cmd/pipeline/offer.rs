//! The offer every black-box command shares: the trial's settings from
//! the command line, and a capture to replay through the device instead
//! of synthetic frames (`--traffic`, `--traffic-mix`).
use super::OfferArgs;
use anyhow::Result;
use clap::{ArgGroup, Args};
use commbench_pipeline::netns;
use commbench_pipeline::tester::dut::DutSpec;
use commbench_pipeline::tester::pace::{self, Sizes};
use commbench_pipeline::tester::replay::{Order, Traffic};
use commbench_pipeline::tester::trial::Offer;
use commbench_pipeline::tester::{RoleCpus, TrialSpec};
use std::sync::Arc;
use std::time::Duration;

/// A capture to offer instead of synthetic frames, or whose sizes the
/// synthetic frames take.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("capture").args(["traffic", "sizes_from"])))]
pub struct TrafficArgs {
    /// Offer the frames of this capture (pcap or pcapng; plain, gzip or zstd) in its order, looped, instead of synthetic frames: MACs rewritten, L3/L4 as captured, the tester's stamp past each IP datagram; its sizes and flows replace --size/--sizes and --flows. Frames the path cannot carry are counted and left out.
    #[arg(long, value_name = "FILE")]
    pub traffic: Option<String>,
    /// Offer synthetic frames (UDP, as --size makes them) in the sizes of this capture's frames, one per captured frame in its order, looped: the capture's exact size mix, to set beside --traffic of the same file. Replaces --size/--sizes; sizes above 1518 B (VLAN-tagged full-size frames) are offered at 1518 B and counted in a note.
    #[arg(long, value_name = "FILE")]
    pub sizes_from: Option<String>,
    /// With --traffic or --sizes-from: offer the capture's mix shuffled with --seed, not its order.
    #[arg(long, requires = "capture")]
    pub traffic_mix: bool,
    /// With --traffic: how the sink tells the replayed frames. trailer: the tester's stamp rides past each IP datagram (every frame told apart, reordering measured); table: the frames go exactly as captured but for their MACs and are told by their L3/L4 bytes, for a device that trims frames to their IP length (a router); auto: table for --dut router, trailer otherwise.
    #[arg(long, value_enum, default_value_t = StampArg::Auto, value_name = "HOW")]
    pub stamp: StampArg,
}

/// `--stamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StampArg {
    Auto,
    Trailer,
    Table,
}

impl TrafficArgs {
    fn order(&self, seed: u64) -> Order {
        match self.traffic_mix {
            true => Order::Mix { seed },
            false => Order::Capture,
        }
    }
}

/// The sizes of the capture given with `--sizes-from` (as the replay
/// reads it), or `sizes` without one.
fn sizes_from(o: &OfferArgs, sizes: Sizes) -> Result<Sizes> {
    let Some(path) = &o.traffic.sizes_from else {
        return Ok(sizes);
    };
    let t = Traffic::load(path, o.traffic.order(o.seed))
        .map_err(|e| crate::usage(e.to_string().replacen("--traffic", "--sizes-from", 1)))?;
    let (sizes, cut) = t.sizes();
    eprintln!(
        "commbench pipeline: synthetic frames in the sizes of {}: {}",
        t.name(),
        t.mix.line()
    );
    if let Some(l) = t.refused_line() {
        eprintln!("commbench pipeline: note: {l}");
    }
    if cut > 0 {
        eprintln!(
            "commbench pipeline: note: {cut} frames of {} are over 1518 B (VLAN tags): their synthetic frames are 1518 B",
            t.name()
        );
    }
    Ok(sizes)
}

/// The offer shared by the black-box commands: the trial at `rate`
/// (pps or a share of `--link`) with `sizes`, checked (usage errors exit
/// 2), and only as root.
pub(super) fn offer(o: &OfferArgs, rate: &str, sizes: Sizes) -> Result<Offer> {
    let sizes = sizes_from(o, sizes)?;
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
    if o.traffic.stamp != StampArg::Auto && o.traffic.traffic.is_none() {
        return Err(crate::usage(
            "--stamp says how a replayed capture's frames are told: give it with --traffic FILE",
        ));
    }
    if let Some(path) = &o.traffic.traffic {
        let mut t = Traffic::load(path, o.traffic.order(o.seed)).map_err(crate::usage_err)?;
        let table = match o.traffic.stamp {
            StampArg::Table => true,
            StampArg::Trailer => false,
            StampArg::Auto => o.dut == DutSpec::Router,
        };
        eprintln!("commbench pipeline: traffic {}: {}", t.name(), t.mix.line());
        if table {
            t.set_identity_table();
            let ix = t.id_index().map_or(0, |i| i.twins);
            eprintln!(
                "commbench pipeline: traffic {}: no stamp on the frames, told by their L3/L4 bytes{}",
                t.name(),
                if ix > 0 {
                    format!(" ({ix} frames identical to another are told apart by their order: their reordering is not seen)")
                } else {
                    String::new()
                }
            );
        }
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
