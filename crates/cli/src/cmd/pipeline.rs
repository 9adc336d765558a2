//! `commbench pipeline ...`: wiring for the pipeline lab
//! (crates/pipeline). Arguments are parsed in [`args`] (values by the lab's
//! own parsers, as clap `value_parser`s), the lab runs them
//! (`commbench_pipeline::{run, io, tester::{trial, rfc2544, crosscheck}}`),
//! and the records go to an exporter; notes (oversubscription,
//! untrustworthy delays) go to stderr.
use anyhow::Result;
use commbench_core::placement::CpuList;
use commbench_pipeline::tester::crosscheck;
use commbench_pipeline::tester::pace::{self, Sizes};
use commbench_pipeline::tester::rfc2544;
use commbench_pipeline::tester::trial::{self, Offer};
use commbench_pipeline::tester::TrialSpec;
use commbench_pipeline::{netns, HashFields, IpMix, Mode, PipelineConfig, RssAt, RxFull};
use std::time::Duration;

mod args;
pub use args::*;

/// The library configuration for `args` (usage errors exit 2).
pub fn config(a: &RunArgs) -> Result<PipelineConfig> {
    let cpus = match &a.cpus {
        Some(s) => {
            Some(CpuList::parse_online(s).map_err(|e| crate::usage(format!("--cpus {s}: {e}")))?)
        }
        None => None,
    };
    let c = PipelineConfig {
        mode: match a.mode {
            ModeArg::Rtc => Mode::Rtc,
            ModeArg::Pipeline => Mode::Pipeline,
        },
        burst: a.burst,
        tx_bulk: a.tx_bulk,
        queues: a.queues,
        work: a.work,
        packets: a.packets,
        sizes: a.sizes.clone(),
        flows: a.flows,
        ip: match a.ip {
            IpArg::V4 => IpMix::V4,
            IpArg::V6 => IpMix::V6,
            IpArg::Mix => IpMix::Mix,
        },
        hash: match a.hash {
            HashArg::L3 => HashFields::L3,
            HashArg::L4 => HashFields::L4,
        },
        symmetric: a.symmetric,
        rss_at: match a.rss_at {
            RssAtArg::Nic => RssAt::Nic,
            RssAtArg::Cpu => RssAt::Cpu,
        },
        ring_size: a.ring_size,
        pool_size: a.pool_size,
        drain_us: a.drain_us,
        rx_full: match a.rx_full {
            RxFullArg::Wait => RxFull::Wait,
            RxFullArg::Drop => RxFull::Drop,
        },
        split: a.timing == TimingArg::Split,
        cpus,
        repeat: a.repeat,
        sweep: a.sweep.clone(),
    };
    c.validate().map_err(crate::lab_err)?;
    Ok(c)
}

pub fn run(a: &PipelineArgs) -> Result<()> {
    match &a.cmd {
        PipelineCmd::Run(r) => run_run(r),
        PipelineCmd::Rss(r) => {
            let mut rec = crate::progress::recorder();
            let v = commbench_pipeline::rss_bench(r.queues, r.flows, &mut rec)
                .map_err(crate::lab_err)?;
            crate::progress::finish();
            r.out.emit(&v)
        }
        PipelineCmd::Netns(n) => run_netns(n),
        PipelineCmd::Io(i) => run_io(i),
        PipelineCmd::Trial(t) => run_trial(t),
        PipelineCmd::Rfc2544(r) => run_rfc2544(r),
        PipelineCmd::Crosscheck(c) => run_crosscheck(c),
    }
}

fn check_io_args(size: u32, burst: usize) -> Result<()> {
    if !(64..=1518).contains(&size) {
        return Err(crate::usage(format!("--size {size} is outside 64..=1518")));
    }
    if !(1..=1024).contains(&burst) {
        return Err(crate::usage(format!("--burst {burst} is outside 1..=1024")));
    }
    Ok(())
}

fn run_netns(a: &NetnsArgs) -> Result<()> {
    use commbench_pipeline::netns;
    check_io_args(a.size, a.burst)?;
    if a.frames == 0 || !(1..=100).contains(&a.repeat) || a.timeout_s == 0 {
        return Err(crate::usage(
            "--frames, --repeat (1..=100) and --timeout-s must be at least 1",
        ));
    }
    if !netns::is_root() {
        anyhow::bail!("pipeline netns creates network namespaces and veth links: run it as root");
    }
    netns::catch_sigint();
    let cfg = netns::NetnsConfig {
        frames: a.frames,
        size: a.size,
        burst: a.burst,
        window: a.window,
        timeout: std::time::Duration::from_secs(a.timeout_s),
        tx: a.tx.into(),
        rx: a.rx.into(),
    };
    let mut v = Vec::new();
    for _ in 0..a.repeat {
        let r = netns::run_netns(&cfg)?;
        v.push(netns::netns_record(
            &r,
            a.window,
            a.burst,
            a.tx.into(),
            a.rx.into(),
        ));
        if netns::interrupted() {
            break;
        }
    }
    a.out.emit(&v)?;
    if netns::interrupted() {
        anyhow::bail!("interrupted: namespaces removed, the output above is partial");
    }
    Ok(())
}

fn run_io(a: &IoArgs) -> Result<()> {
    use commbench_pipeline::io::{self, IoSpec, Role};
    check_io_args(a.size, a.burst)?;
    netns::catch_sigint();
    let role = match a.mode {
        RoleArg::Gen => Role::Gen {
            frames: a.frames,
            tx: a.tx.into(),
        },
        RoleArg::Fwd => Role::Fwd {
            out_iface: a.out_iface.clone().unwrap_or_else(|| a.iface.clone()),
            work: a.work,
            impair: a.impair.unwrap_or_default(),
        },
        RoleArg::Sink => Role::Sink { pattern: a.pattern },
    };
    let spec = IoSpec {
        role,
        iface: a.iface.clone(),
        engine: a.engine.into(),
        size: a.size,
        burst: a.burst,
        duration: Duration::from_secs(a.duration_s),
        idle: Duration::from_millis(a.idle_ms),
    };
    let mut rec = commbench_core::record::Recorder::new();
    io::run(&spec, &mut rec).map_err(crate::lab_err)?;
    a.out.emit(&rec.take())
}

fn run_run(a: &RunArgs) -> Result<()> {
    let c = config(a)?;
    let mut rec = crate::progress::recorder();
    let rep = commbench_pipeline::run(&c, &mut rec).map_err(crate::lab_err)?;
    crate::progress::finish();
    for n in &rep.notes {
        eprintln!("commbench pipeline: note: {n}");
    }
    let broken = rep.runs.iter().filter(|r| !r.conserved).count();
    a.out.emit(&rec.take())?;
    if broken > 0 {
        anyhow::bail!(
            "{broken} run(s) lost packets (generated != transmitted + dropped): marked partial"
        );
    }
    Ok(())
}

/// The offer shared by the black-box commands: the trial at `rate`
/// (pps or a share of `--link`) with `sizes`, checked (usage errors exit
/// 2), and only as root.
fn offer(o: &OfferArgs, rate: &str, sizes: Sizes) -> Result<Offer> {
    let rate = pace::parse_rate(rate, o.link).map_err(crate::usage)?;
    let trial = TrialSpec {
        rate,
        arrivals: match o.arrivals {
            ArrivalsArg::Cbr => pace::Arrivals::Cbr,
            ArrivalsArg::Poisson => pace::Arrivals::Poisson,
        },
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
        seed: o.seed,
        count: None,
        unpaced: false,
    };
    trial.validate().map_err(crate::usage)?;
    if !netns::is_root() {
        anyhow::bail!(
            "the black-box tester creates network namespaces and veth links: run it as root"
        );
    }
    Ok(Offer {
        dut: o.dut.clone(),
        trial,
        cpus: o.cpus.clone().unwrap_or_default(),
        bias: !o.no_bias,
    })
}

/// Fails after the output when Ctrl-C cut the run.
fn check_interrupted(interrupted: bool) -> Result<()> {
    if interrupted {
        anyhow::bail!("interrupted: namespaces removed, the output above is partial");
    }
    Ok(())
}

fn run_trial(a: &TrialArgs) -> Result<()> {
    let spec = trial::Spec {
        offer: offer(&a.offer, &a.rate, a.size.clone())?,
        repeat: a.repeat,
        per_flow: a.per_flow,
    };
    netns::catch_sigint();
    let mut rec = crate::progress::recorder();
    let r = trial::run(&spec, &mut rec).map_err(crate::lab_err)?;
    crate::progress::finish();
    a.out.emit(&rec.take())?;
    check_interrupted(r.interrupted)?;
    if let Some(n) = trial::behind_note(&r) {
        eprintln!("commbench pipeline: note: {n}");
    }
    Ok(())
}

fn run_rfc2544(a: &Rfc2544Args) -> Result<()> {
    let sizes = a.sizes.0.clone();
    let offer = offer(&a.offer, "1k", sizes[0].clone())?;
    let max_rate = pace::parse_rate(&a.max_rate, a.offer.link).map_err(crate::usage)?;
    let spec = rfc2544::RunSpec {
        offer,
        sizes,
        max_rate,
        resolution_pct: a.resolution_pct,
        pdr_loss_pct: a.pdr_loss_pct,
        max_trials: a.max_trials,
        ladder: a.ladder,
        repeat: a.repeat,
        latency_ladder: a.latency_ladder,
        back_to_back: a.back_to_back,
        b2b_repeat: a.b2b_repeat,
    };
    netns::catch_sigint();
    let mut rec = crate::progress::recorder();
    let r = rfc2544::run(&spec, &mut rec).map_err(crate::lab_err)?;
    crate::progress::finish();
    a.out.emit_or_show(&rec.take(), || rfc2544::run_table(&r))?;
    check_interrupted(r.interrupted)
}

fn run_crosscheck(a: &CrosscheckArgs) -> Result<()> {
    let offer = offer(&a.offer, "1k", a.size.clone())?;
    let spec = crosscheck::Spec {
        offer,
        delays: a.delays.clone(),
        max_rate: pace::parse_rate(&a.max_rate, a.offer.link).map_err(crate::usage)?,
        resolution_pct: a.resolution_pct,
        max_trials: a.max_trials,
        repeat: a.repeat,
    };
    spec.validate().map_err(|e| crate::usage(e.to_string()))?;
    netns::catch_sigint();
    let mut rec = crate::progress::recorder();
    let r = crosscheck::run(&spec, &mut rec).map_err(crate::lab_err)?;
    crate::progress::finish();
    let table = crosscheck::table(&r);
    a.out.emit_or_show(&rec.take(), || table.clone())?;
    if a.out.format != crate::output::FormatArg::Table || a.out.output.is_some() {
        eprint!("{table}");
    }
    check_interrupted(r.interrupted)
}
