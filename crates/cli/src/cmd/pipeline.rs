//! `commbench pipeline run|rss`: wiring for the pipeline lab
//! (crates/pipeline). Argument grammar for `--work` and `--sweep` lives
//! here; notes (oversubscription, untrustworthy delays) go to stderr.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use commbench_core::placement::CpuList;
use commbench_pipeline::{
    HashFields, IpMix, Mode, PipelineConfig, PipelineError, RssAt, RxFull, Sweep, Work,
};

#[derive(Debug, Args)]
pub struct PipelineArgs {
    #[command(subcommand)]
    pub cmd: PipelineCmd,
}

#[derive(Debug, Subcommand)]
pub enum PipelineCmd {
    /// In-memory DPDK-style pipeline: rx burst → RSS queues → work → tx buffer → sink.
    Run(RunArgs),
    /// Toeplitz RSS: ticks per hash (byte table vs bitwise) and flow balance over queues.
    Rss(RssArgs),
    /// (root) gen → l2fwd → sink over veth pairs between namespaces it creates, AF_PACKET.
    Netns(NetnsArgs),
    /// Run one role (gen, fwd, sink) on an existing interface, AF_PACKET.
    Io(IoArgs),
}

/// Longest duration argument, seconds (a day): a clear usage error above
/// it instead of an overflow when the deadline is computed.
const MAX_SECS: u64 = 86_400;

#[derive(Debug, Args)]
pub struct NetnsArgs {
    /// Frames the generator sends.
    #[arg(long, default_value_t = 1_000_000)]
    pub frames: u64,
    /// Frame size with FCS (64..=1518 bytes).
    #[arg(long, default_value = "64", value_parser = crate::args::parse_size_u32)]
    pub size: u32,
    /// Frames per sendmmsg.
    #[arg(long, default_value_t = 32)]
    pub burst: usize,
    /// Most frames in flight before the generator waits (0: unpaced, drops expected).
    #[arg(long, default_value_t = 0)]
    pub window: u64,
    /// Give up after this many seconds, 1..=86400.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=MAX_SECS))]
    pub timeout_s: u64,
    /// Generator transmit path.
    #[arg(long, value_enum, default_value = "sendmmsg")]
    pub tx: TxArg,
    /// Forwarder and sink receive path (af-xdp: copy mode behind commbench's own XDP redirect program).
    #[arg(long, value_enum, default_value = "af-packet")]
    pub rx: EngineArg,
    /// Runs.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TxArg {
    /// One sendmmsg per burst.
    Sendmmsg,
    /// PACKET_TX_RING: frames written into the mapped ring, one send per burst.
    TxRing,
    /// AF_XDP, copy mode (veth has no zero-copy), transmit only.
    AfXdp,
}

impl From<TxArg> for commbench_pipeline::netns::TxMethod {
    fn from(t: TxArg) -> Self {
        match t {
            TxArg::Sendmmsg => commbench_pipeline::netns::TxMethod::Sendmmsg,
            TxArg::TxRing => commbench_pipeline::netns::TxMethod::TxRing,
            TxArg::AfXdp => commbench_pipeline::netns::TxMethod::AfXdp,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum EngineArg {
    /// AF_PACKET: TPACKET_V3 rx ring, sendmmsg tx with PACKET_QDISC_BYPASS.
    AfPacket,
    /// AF_XDP in copy mode: receive behind commbench's XDP redirect program
    /// (only frames carrying commbench's mark are taken; the rest go to the
    /// kernel), rx queue 0.
    AfXdp,
}

impl From<EngineArg> for commbench_pipeline::netns::RxMethod {
    fn from(e: EngineArg) -> Self {
        match e {
            EngineArg::AfPacket => commbench_pipeline::netns::RxMethod::AfPacket,
            EngineArg::AfXdp => commbench_pipeline::netns::RxMethod::AfXdp,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum RoleArg {
    Gen,
    Fwd,
    Sink,
}

#[derive(Debug, Args)]
pub struct IoArgs {
    #[arg(long, value_enum, default_value = "af-packet")]
    pub engine: EngineArg,
    #[arg(long, value_enum)]
    pub mode: RoleArg,
    /// Interface to send on (gen) or receive from (fwd, sink).
    #[arg(long)]
    pub iface: String,
    /// fwd: interface to send the forwarded frames on (default: --iface).
    #[arg(long)]
    pub out_iface: Option<String>,
    /// gen: frames to send.
    #[arg(long, default_value_t = 1_000_000)]
    pub frames: u64,
    /// gen: transmit path.
    #[arg(long, value_enum, default_value = "sendmmsg")]
    pub tx: TxArg,
    /// Frame size with FCS (64..=1518 bytes).
    #[arg(long, default_value = "64", value_parser = crate::args::parse_size_u32)]
    pub size: u32,
    #[arg(long, default_value_t = 32)]
    pub burst: usize,
    /// Stop after this many seconds, 1..=86400.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=MAX_SECS))]
    pub duration_s: u64,
    /// fwd, sink: stop after this long without a frame, 1..=86400000 ms.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=MAX_SECS * 1000))]
    pub idle_ms: u64,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ModeArg {
    /// Run to completion: rx, work and tx on one thread.
    Rtc,
    /// An I/O thread (rx, tx completion) and one worker thread per queue.
    Pipeline,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum IpArg {
    V4,
    V6,
    Mix,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum HashArg {
    /// Addresses only.
    L3,
    /// Addresses and ports.
    L4,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum RxFullArg {
    Wait,
    Drop,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum RssAtArg {
    /// Hash computed per flow at setup, as a NIC delivers it.
    Nic,
    /// Hash computed per packet in the rx path.
    Cpu,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Packets per rx burst.
    #[arg(long, default_value_t = 32)]
    pub burst: usize,
    /// Packets per tx flush (rte_eth_tx_buffer size).
    #[arg(long, default_value_t = 32)]
    pub tx_bulk: usize,
    /// RSS queues (pipeline mode: one worker thread each).
    #[arg(long, default_value_t = 1)]
    pub queues: usize,
    /// Per-packet work: none, parse, swap (MAC swap) or delay:NS.
    #[arg(long, default_value = "swap", value_parser = parse_work)]
    pub work: Work,
    /// Packets per run.
    #[arg(long, default_value_t = 2_000_000)]
    pub packets: u64,
    /// Frame sizes with FCS, comma-separated (one run each).
    #[arg(long, value_delimiter = ',', default_value = "64", value_parser = crate::args::parse_size_u32)]
    pub sizes: Vec<u32>,
    #[arg(long, value_enum, default_value = "rtc")]
    pub mode: ModeArg,
    /// CPUs, taskset syntax (e.g. 0-1): rtc/io thread on the first, workers round-robin.
    #[arg(long)]
    pub cpus: Option<String>,
    /// Runs per configuration.
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Sweep one parameter: tx-bulk=1,2,4,…  queues=1..N  delay=0,10,50,…
    #[arg(long, value_parser = parse_sweep)]
    pub sweep: Option<Sweep>,
    /// Distinct flows the generator cycles through.
    #[arg(long, default_value_t = 1024)]
    pub flows: usize,
    /// IP versions of the flows.
    #[arg(long, value_enum, default_value = "mix")]
    pub ip: IpArg,
    /// RSS hash input.
    #[arg(long, value_enum, default_value = "l4")]
    pub hash: HashArg,
    /// Use the symmetric RSS key (both directions of a flow on one queue).
    #[arg(long)]
    pub symmetric: bool,
    /// Where the RSS hash is computed.
    #[arg(long, value_enum, default_value = "nic")]
    pub rss_at: RssAtArg,
    /// Slots per rx ring (power of two; pipeline mode).
    #[arg(long, default_value_t = 1024)]
    pub ring_size: usize,
    /// Buffers in the pool (0: sized from the other settings).
    #[arg(long, default_value_t = 0)]
    pub pool_size: usize,
    /// Tx buffer drain timeout in µs.
    #[arg(long, default_value_t = 100)]
    pub drain_us: u64,
    /// Pipeline mode, full rx ring: wait for room (backpressure) or drop like a NIC.
    #[arg(long, value_enum, default_value = "wait")]
    pub rx_full: RxFullArg,
    /// rtc: time each section (split: rx, work, tx) or only whole bursts (total: two TSC reads per burst, what a plain C loop pays; no split reported).
    #[arg(long, value_enum, default_value = "split")]
    pub timing: TimingArg,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TimingArg {
    Split,
    Total,
}

#[derive(Debug, Args)]
pub struct RssArgs {
    /// Queues for the balance figure.
    #[arg(long, default_value_t = 4)]
    pub queues: usize,
    /// Flows for the balance figure.
    #[arg(long, default_value_t = 4096)]
    pub flows: usize,
    #[command(flatten)]
    pub out: OutputArgs,
}

fn parse_work(s: &str) -> Result<Work, String> {
    match s {
        "none" => Ok(Work::None),
        "parse" => Ok(Work::Parse),
        "swap" => Ok(Work::Swap),
        _ => match s.strip_prefix("delay:") {
            Some(ns) => ns
                .parse::<u64>()
                .map(Work::Delay)
                .map_err(|_| format!("'{s}': delay needs whole nanoseconds, e.g. delay:100")),
            None => Err(format!(
                "'{s}' is not a work kind: use none, parse, swap or delay:NS"
            )),
        },
    }
}

fn parse_list(s: &str) -> Result<Vec<u64>, String> {
    if let Some((a, b)) = s.split_once("..") {
        let a: u64 = a.parse().map_err(|_| format!("'{s}': bad range start"))?;
        let b: u64 = b.parse().map_err(|_| format!("'{s}': bad range end"))?;
        if a > b || b - a >= 64 {
            return Err(format!(
                "'{s}': a range needs start <= end and at most 64 values"
            ));
        }
        return Ok((a..=b).collect());
    }
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<u64>()
                .map_err(|_| format!("'{x}' is not a whole number"))
        })
        .collect()
}

fn parse_sweep(s: &str) -> Result<Sweep, String> {
    let (name, values) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': expected NAME=VALUES, e.g. tx-bulk=1,2,4 or queues=1..4"))?;
    let v = parse_list(values)?;
    let usize_list = || v.iter().map(|&x| x as usize).collect::<Vec<usize>>();
    match name {
        "tx-bulk" => Ok(Sweep::TxBulk(usize_list())),
        "queues" => Ok(Sweep::Queues(usize_list())),
        "delay" => Ok(Sweep::Delay(v.clone())),
        _ => Err(format!(
            "'{name}' cannot be swept: use tx-bulk, queues or delay"
        )),
    }
}

fn lib_err(e: PipelineError) -> anyhow::Error {
    match e {
        PipelineError::Config(_) => crate::usage(e.to_string()),
    }
}

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
    c.validate().map_err(lib_err)?;
    Ok(c)
}

pub fn run(a: &PipelineArgs) -> Result<()> {
    match &a.cmd {
        PipelineCmd::Run(r) => run_run(r),
        PipelineCmd::Rss(r) => {
            let mut rec = crate::progress::recorder();
            let v = commbench_pipeline::rss_bench(r.queues, r.flows, &mut rec).map_err(lib_err)?;
            crate::progress::finish();
            r.out.emit(&v)
        }
        PipelineCmd::Netns(n) => run_netns(n),
        PipelineCmd::Io(i) => run_io(i),
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
    use commbench_core::record::Record;
    use commbench_pipeline::netns;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::time::{Duration, Instant};
    check_io_args(a.size, a.burst)?;
    netns::catch_sigint();
    let deadline = Instant::now() + Duration::from_secs(a.duration_s);
    let idle = Duration::from_millis(a.idle_ms);
    let done = AtomicBool::new(true);
    let seen = AtomicU64::new(0);
    let engine = netns::RxMethod::from(a.engine);
    let rec = match a.mode {
        RoleArg::Gen => {
            // --engine af-xdp transmits with AF_XDP; otherwise --tx says how.
            let tx = match a.engine {
                EngineArg::AfXdp => netns::TxMethod::AfXdp,
                EngineArg::AfPacket => a.tx.into(),
            };
            let cfg = netns::NetnsConfig {
                frames: a.frames,
                size: a.size,
                burst: a.burst,
                window: 0,
                timeout: Duration::from_secs(a.duration_s),
                tx,
                rx: engine,
            };
            // A down link (or one without a carrier) is said at once, not
            // after --duration-s of spinning (with exit 0 and partial).
            netns::wait_link_up(&a.iface, Duration::from_secs(1))
                .map_err(|e| anyhow::anyhow!("pipeline io --mode gen: {e}"))?;
            let (sent, wall, cpu) =
                netns::gen_role(&a.iface, &cfg, &seen, &AtomicBool::new(false))?;
            Record::new("pipeline", "io-gen")
                .param("engine", engine.name())
                .param("iface", &a.iface)
                .param("size", a.size)
                .param("burst", a.burst)
                .param("tx", tx.name())
                .metric("sent", sent)
                .metric("pps", sent as f64 / wall)
                .metric("cpu_s", cpu)
                .metric("pps_per_cpu_s", sent as f64 / cpu)
                .metric("partial", sent < a.frames)
        }
        RoleArg::Fwd => {
            let out = a.out_iface.clone().unwrap_or_else(|| a.iface.clone());
            let f = netns::fwd_role(
                &a.iface, &out, engine, a.burst, &done, &seen, idle, deadline, None,
            )?;
            Record::new("pipeline", "io-fwd")
                .param("engine", engine.name())
                .param("xdp_mode", f.xdp_mode.unwrap_or("-"))
                .param("iface", &a.iface)
                .param("out_iface", &out)
                .metric("rx", f.rx)
                .metric("tx", f.tx)
                .metric("foreign", f.foreign)
                .metric("ring_drops", f.drops)
                .metric("ticks_per_packet", f.ticks)
        }
        RoleArg::Sink => {
            let k = netns::sink_role(&a.iface, engine, &done, &seen, idle, deadline, None)?;
            Record::new("pipeline", "io-sink")
                .param("engine", engine.name())
                .param("xdp_mode", k.xdp_mode.unwrap_or("-"))
                .param("iface", &a.iface)
                .metric("rx", k.rx)
                .metric("foreign", k.foreign)
                .metric("ring_drops", k.drops)
                .metric(
                    "pps",
                    if k.wall_s > 0.0 {
                        k.rx as f64 / k.wall_s
                    } else {
                        f64::NAN
                    },
                )
        }
    };
    a.out.emit(&[rec])
}

fn run_run(a: &RunArgs) -> Result<()> {
    let c = config(a)?;
    let mut rec = crate::progress::recorder();
    let rep = commbench_pipeline::run(&c, &mut rec).map_err(lib_err)?;
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
