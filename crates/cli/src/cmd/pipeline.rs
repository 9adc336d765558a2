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
    /// (root) Black-box trial: offer stamped frames to a device at a paced rate, count exactly what comes back.
    Trial(TrialArgs),
    /// (root) RFC 2544 throughput: NDR/PDR binary search, confirmation, latency, frame loss over offered load.
    Rfc2544(Rfc2544Args),
    /// (root) The seed's question: black-box NDR of l2fwd over injected delays vs the white-box cost model.
    Crosscheck(CrosscheckArgs),
}

/// What every black-box command offers (see docs/pipeline.md, "black-box tester").
#[derive(Debug, Args)]
pub struct OfferArgs {
    /// Device under test: none, l2fwd[:work=swap|delay:NS][,rx=af-xdp][,drop=N,dup=N,swap=N], bridge, cmd:'PROGRAM ARGS', ifaces:IF1,IF2.
    #[arg(long, default_value = "l2fwd")]
    pub dut: String,
    /// Arrival process of the bursts.
    #[arg(long, value_enum, default_value = "cbr")]
    pub arrivals: ArrivalsArg,
    /// Frames per burst (sent together at the burst's departure time).
    #[arg(long, default_value_t = 1)]
    pub burst: u32,
    /// Flows (round robin; each its own UDP 4-tuple and sequence numbers), 1..=256.
    #[arg(long, default_value_t = 1)]
    pub flows: u16,
    /// Link speed that a rate in % refers to (10G, 25G, 1G, ...).
    #[arg(long, default_value = "10G")]
    pub link: String,
    /// Seconds per trial.
    #[arg(long, default_value_t = 1.0)]
    pub duration_s: f64,
    /// A received frame with a one-way latency above this is late (µs).
    #[arg(long, default_value_t = 10_000)]
    pub late_us: u64,
    /// A generator whose schedule lag (p99 or at the end) exceeds this (µs) is behind schedule.
    #[arg(long, default_value_t = 100)]
    pub lag_bound_us: u64,
    /// The sink keeps counting this long after the last departure (ms).
    #[arg(long, default_value_t = 300)]
    pub drain_ms: u64,
    /// Busy-wait at most this many µs before each departure; below it the
    /// generator learns how late the host's timer wakes it and spins that long.
    #[arg(long, default_value_t = 200)]
    pub spin_us: u64,
    /// Generator transmit path.
    #[arg(long, value_enum, default_value = "sendmmsg")]
    pub tx: TxArg,
    /// Sink receive path (af-packet: kernel receive timestamps).
    #[arg(long, value_enum, default_value = "af-packet")]
    pub rx: EngineArg,
    /// CPUs for the roles: GEN,SINK,DUT (any may be empty).
    #[arg(long)]
    pub cpus: Option<String>,
    /// Seed of the Poisson schedule.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Skip measuring the path's latency with no device (the loopback bias).
    #[arg(long)]
    pub no_bias: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ArrivalsArg {
    Cbr,
    Poisson,
}

#[derive(Debug, Args)]
pub struct TrialArgs {
    /// Offered rate: pps (100000, 250k, 1.5M) or a share of --link (50%).
    #[arg(long, default_value = "100k")]
    pub rate: String,
    /// Frame size with FCS (64..=1518) or imix.
    #[arg(long, default_value = "64")]
    pub size: String,
    /// Trials (each one record).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Also write one record per flow.
    #[arg(long)]
    pub per_flow: bool,
    #[command(flatten)]
    pub offer: OfferArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct Rfc2544Args {
    /// Frame sizes: 64,128,... or rfc2544 (64,128,256,512,1024,1280,1518) or imix.
    #[arg(long, default_value = "64")]
    pub sizes: String,
    /// Highest rate tried: pps or a share of --link.
    #[arg(long, default_value = "1M")]
    pub max_rate: String,
    /// Stop the search when its interval is below this share of the maximum rate, %.
    #[arg(long, default_value_t = 1.0)]
    pub resolution_pct: f64,
    /// Also search the PDR: the highest rate with at most this loss, %.
    #[arg(long)]
    pub pdr_loss_pct: Option<f64>,
    /// Most trials per search.
    #[arg(long, default_value_t = 20)]
    pub max_trials: usize,
    /// Frame-loss rate over offered load: trials at 1/N .. N/N of the maximum rate (0: skip).
    #[arg(long, default_value_t = 0)]
    pub ladder: usize,
    /// Searches per frame size (the NDR's interval comes from these).
    #[arg(long, default_value_t = 1)]
    pub repeat: usize,
    /// Latency at 1/N .. N/N of the NDR found (RFC 2544 §26.2 at and below
    /// the throughput; 0: at the NDR only, from its confirmation trial).
    #[arg(long, default_value_t = 0)]
    pub latency_ladder: usize,
    /// Back-to-back test (RFC 2544 §26.4, RFC 9004): the longest burst of
    /// up to this many frames, sent with no gap, that the device forwards
    /// without loss; with its implied and corrected buffer time.
    #[arg(long, value_name = "MAX_FRAMES")]
    pub back_to_back: Option<u64>,
    /// Back-to-back searches per frame size (RFC 9004 asks for at least 50).
    #[arg(long, default_value_t = 50)]
    pub b2b_repeat: usize,
    #[command(flatten)]
    pub offer: OfferArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct CrosscheckArgs {
    /// Injected per-packet delays of l2fwd, ns (67.2 = 10 GbE at 64 B).
    #[arg(long, default_value = "0,10,50,67.2,100,500,1000")]
    pub delays: String,
    /// Highest rate tried: pps.
    #[arg(long, default_value = "2M")]
    pub max_rate: String,
    /// Search resolution, % of the maximum rate.
    #[arg(long, default_value_t = 1.0)]
    pub resolution_pct: f64,
    #[arg(long, default_value_t = 16)]
    pub max_trials: usize,
    /// Frame size with FCS.
    #[arg(long, default_value = "64")]
    pub size: String,
    /// NDR searches per point and for the tester alone, in rounds over
    /// the delays: each figure is their median, with its 95% interval.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub repeat: u32,
    #[command(flatten)]
    pub offer: OfferArgs,
    #[command(flatten)]
    pub out: OutputArgs,
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
    /// fwd: per-frame work after the MAC swap: swap or delay:NS (a TSC busy-wait).
    #[arg(long, default_value = "swap")]
    pub work: String,
    /// fwd: deterministic impairments of the tester's stamped frames: drop=N,dup=N,swap=N (every N-th).
    #[arg(long)]
    pub impair: Option<String>,
    /// sink: wait (up to --duration-s) for the first frame, stop --idle-ms after the last, and report the arrival pattern from kernel timestamps (rate, most frames in any 100 µs, gap p50/p99); counts every frame with commbench's magic, stamped or not.
    #[arg(long)]
    pub pattern: bool,
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
            use commbench_pipeline::tester::dut::{self, FwdCounters, FwdWork, Impair};
            let out = a.out_iface.clone().unwrap_or_else(|| a.iface.clone());
            let work = match a.work.as_str() {
                "swap" => FwdWork::Swap,
                w => match w.strip_prefix("delay:").and_then(|n| n.parse::<u64>().ok()) {
                    Some(ns) if ns <= 1_000_000 => FwdWork::Delay(ns),
                    _ => {
                        return Err(crate::usage(format!(
                            "--work {w}: give swap or delay:NS (whole ns, at most 1000000)"
                        )))
                    }
                },
            };
            let impair = match &a.impair {
                Some(i) => Impair::parse(i).map_err(crate::usage)?,
                None => Impair::default(),
            };
            let spec = dut::FwdSpec {
                in_if: a.iface.clone(),
                out_if: out.clone(),
                rx: engine,
                burst: a.burst,
                work,
                impair,
                rx_blocks: commbench_pipeline::netns::RX_BLOCKS,
            };
            let c = FwdCounters::default();
            let _ = (&done, &seen);
            let (drops, xdp_mode) = dut::l2fwd(
                &spec,
                &c,
                &AtomicBool::new(false),
                &AtomicBool::new(false),
                Some(idle),
                deadline,
            )?;
            let f = c.snapshot();
            let (r, w, t) = f.per_packet();
            Record::new("pipeline", "io-fwd")
                .param("engine", engine.name())
                .param("xdp_mode", xdp_mode.unwrap_or("-"))
                .param("iface", &a.iface)
                .param("out_iface", &out)
                .param("work", work.name())
                .metric("rx", f.rx)
                .metric("tx", f.tx)
                .metric("foreign", f.foreign)
                .metric("dropped", f.dropped)
                .metric("ring_drops", drops)
                .metric("ticks_rx", r)
                .metric("ticks_work", w)
                .metric("ticks_tx", t)
                .metric("ticks_per_packet", r + w + t)
        }
        RoleArg::Sink if a.pattern => {
            let k = commbench_pipeline::tester::count_arrivals(&a.iface, engine, idle, deadline)?;
            let st = &k.stats;
            Record::new("pipeline", "io-sink")
                .param("engine", engine.name())
                .param("iface", &a.iface)
                .metric("rx", k.ours)
                .metric("foreign", k.foreign)
                .metric("ring_drops", k.drops)
                .metric("pps", st.rate())
                .metric("span_s", st.span_s())
                .metric("window_100us_max", st.window_max)
                .metric(
                    "gap_p50_ns",
                    if st.gaps.is_empty() {
                        f64::NAN
                    } else {
                        st.gaps.quantile(0.5)
                    },
                )
                .metric(
                    "gap_p99_ns",
                    if st.gaps.is_empty() {
                        f64::NAN
                    } else {
                        st.gaps.quantile(0.99)
                    },
                )
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

/// The trial settings shared by the black-box commands.
fn offer_spec(
    o: &OfferArgs,
    rate: &str,
    sizes: commbench_pipeline::tester::pace::Sizes,
) -> Result<(
    commbench_pipeline::tester::dut::DutSpec,
    commbench_pipeline::tester::TrialSpec,
    commbench_pipeline::tester::RoleCpus,
    f64,
)> {
    use commbench_pipeline::tester::{dut::DutSpec, pace, RoleCpus, TrialSpec};
    use std::time::Duration;
    let dut = DutSpec::parse(&o.dut).map_err(crate::usage)?;
    let link = commbench_core::linerate::parse_link(&o.link)
        .map_err(|e| crate::usage(format!("--link {}: {e}", o.link)))?;
    let rate = pace::parse_rate(rate, link).map_err(crate::usage)?;
    if !(o.duration_s > 0.0 && o.duration_s <= 3600.0) {
        return Err(crate::usage(format!(
            "--duration-s {} is outside (0, 3600]",
            o.duration_s
        )));
    }
    if o.drain_ms > 60_000 || o.spin_us > 1_000_000 || o.lag_bound_us > 60_000_000 {
        return Err(crate::usage(
            "--drain-ms (<= 60000), --spin-us (<= 1000000) or --lag-bound-us (<= 60000000) is too large",
        ));
    }
    let cpus = match &o.cpus {
        Some(c) => RoleCpus::parse(c).map_err(crate::usage)?,
        None => RoleCpus::default(),
    };
    let spec = TrialSpec {
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
    spec.validate().map_err(crate::usage)?;
    if !commbench_pipeline::netns::is_root() {
        anyhow::bail!(
            "the black-box tester creates network namespaces and veth links: run it as root"
        );
    }
    Ok((dut, spec, cpus, link))
}

/// The path's latency with no device: a short trial at up to 100 kpps
/// over one veth pair, recorded as `loopback`.
fn loopback_bias(
    spec: &commbench_pipeline::tester::TrialSpec,
    cpus: &commbench_pipeline::tester::RoleCpus,
    rec: &mut commbench_core::record::Recorder,
) -> Result<Option<commbench_core::record::Record>> {
    use commbench_pipeline::tester::{dut::DutSpec, pace::Rate, Bench};
    let mut s = spec.clone();
    s.rate = Rate::Pps(spec.pps().min(100_000.0));
    s.duration = std::time::Duration::from_millis(500);
    rec.progress("pipeline: loopback bias (no device)");
    let mut b = Bench::new(&DutSpec::None, cpus.clone())?;
    let r = b.trial(&s)?;
    drop(b);
    Ok(Some(r.record("loopback")))
}

fn bias_metrics(
    rec: &mut commbench_core::record::Record,
    bias: &Option<commbench_core::record::Record>,
) {
    if let Some(b) = bias {
        for k in ["latency_p50_ns", "latency_p99_ns"] {
            if let Some(v) = b.metric_f64(k) {
                rec.push_metric(&format!("loopback_{k}"), v);
            }
        }
    }
}

fn run_trial(a: &TrialArgs) -> Result<()> {
    use commbench_pipeline::tester::{pace, Bench};
    let sizes = pace::parse_sizes(&a.size).map_err(crate::usage)?;
    if !(1..=100).contains(&a.repeat) {
        return Err(crate::usage(format!(
            "--repeat {} is outside 1..=100",
            a.repeat
        )));
    }
    let (dut, spec, cpus, _) = offer_spec(&a.offer, &a.rate, sizes)?;
    commbench_pipeline::netns::catch_sigint();
    let mut rec = crate::progress::recorder();
    let bias = if a.offer.no_bias {
        None
    } else {
        loopback_bias(&spec, &cpus, &mut rec)?
    };
    let mut out = Vec::new();
    let mut behind = 0;
    {
        let mut b = Bench::new(&dut, cpus)?;
        for i in 0..a.repeat {
            if commbench_pipeline::netns::interrupted() {
                break;
            }
            rec.progress(&format!(
                "pipeline trial: {} at {:.0} pps ({}/{})",
                dut.name(),
                spec.pps(),
                i + 1,
                a.repeat
            ));
            let r = b.trial(&spec)?;
            if r.behind_schedule {
                behind += 1;
            }
            let mut x = r.record("trial");
            x.push_param("repeat", i);
            bias_metrics(&mut x, &bias);
            out.push(x);
            if a.per_flow {
                for f in &r.per_flow {
                    out.push(
                        commbench_core::record::Record::new("pipeline", "trial-flow")
                            .param("dut", dut.name())
                            .param("repeat", i)
                            .param("flow", f.flow)
                            .metric("sent", f.sent)
                            .metric("received", f.received)
                            .metric("lost", f.lost)
                            .metric("duplicated", f.duplicated)
                            .metric("reordered", f.reordered)
                            .metric("reorder_max_distance", f.reorder_max_distance)
                            .metric("reorder_mean_distance", f.reorder_mean_distance)
                            .metric("late", f.late)
                            .metric("out_of_range", f.out_of_range),
                    );
                }
            }
        }
    }
    crate::progress::finish();
    if let Some(b) = bias {
        out.push(b);
    }
    a.out.emit(&out)?;
    if commbench_pipeline::netns::interrupted() {
        anyhow::bail!("interrupted: namespaces removed, the output above is partial");
    }
    if behind > 0 {
        eprintln!(
            "commbench pipeline: note: the generator fell behind its schedule in {behind} trial(s) (lag above --lag-bound-us): their offered rate was not offered (behind_schedule, partial)"
        );
    }
    Ok(())
}

fn run_rfc2544(a: &Rfc2544Args) -> Result<()> {
    use commbench_pipeline::tester::{pace, rfc2544, Bench};
    let sizes = rfc2544::parse_size_list(&a.sizes).map_err(crate::usage)?;
    if sizes.is_empty() {
        return Err(crate::usage("--sizes is empty"));
    }
    if !(1..=100).contains(&a.repeat)
        || !(1..=64).contains(&a.max_trials)
        || a.ladder > 100
        || a.latency_ladder > 100
    {
        return Err(crate::usage(
            "--repeat must be 1..=100, --max-trials 1..=64, --ladder and --latency-ladder 0..=100",
        ));
    }
    if let Some(m) = a.back_to_back {
        if !(1..=commbench_pipeline::tester::MAX_FRAMES).contains(&m)
            || !(1..=1000).contains(&a.b2b_repeat)
        {
            return Err(crate::usage(format!(
                "--back-to-back must be 1..={} frames and --b2b-repeat 1..=1000",
                commbench_pipeline::tester::MAX_FRAMES
            )));
        }
    }
    if !(a.resolution_pct > 0.0 && a.resolution_pct <= 50.0) {
        return Err(crate::usage("--resolution-pct must be in (0, 50]"));
    }
    if let Some(p) = a.pdr_loss_pct {
        if !(p > 0.0 && p < 100.0) {
            return Err(crate::usage("--pdr-loss-pct must be in (0, 100)"));
        }
    }
    let (dut, spec0, cpus, link) = offer_spec(&a.offer, "1k", sizes[0].clone())?;
    let max_rate = pace::parse_rate(&a.max_rate, link).map_err(crate::usage)?;
    commbench_pipeline::netns::catch_sigint();
    let mut rec = crate::progress::recorder();
    let bias = if a.offer.no_bias {
        None
    } else {
        loopback_bias(&spec0, &cpus, &mut rec)?
    };
    let mut out = Vec::new();
    let mut rows = Vec::new();
    let mut b2b_rows = Vec::new();
    {
        let mut b = Bench::new(&dut, cpus)?;
        for sz in &sizes {
            let mut t = spec0.clone();
            t.sizes = sz.clone();
            let s = rfc2544::SearchSpec {
                max_pps: max_rate.pps(sz.mean()),
                trial: t,
                resolution_pct: a.resolution_pct,
                pdr_loss_pct: a.pdr_loss_pct,
                max_trials: a.max_trials,
                ladder_steps: a.ladder,
            };
            let mut kinds: Vec<(&str, f64)> = vec![("ndr", 0.0)];
            if let Some(p) = a.pdr_loss_pct {
                kinds.push(("pdr", p));
            }
            let mut ndr_pps = None;
            for (kind, loss) in kinds {
                let mut reps = Vec::new();
                for i in 0..a.repeat {
                    if commbench_pipeline::netns::interrupted() {
                        break;
                    }
                    let mut trials = Vec::new();
                    let r = rfc2544::search(&mut b, &s, kind, loss, 0.0, |t| {
                        rec.progress(&format!(
                            "rfc2544 {kind} {} B: {:.0} pps → loss {:.4}%{}",
                            sz.name,
                            t.offered_pps,
                            t.loss_pct,
                            if t.behind_schedule {
                                " (generator behind)"
                            } else {
                                ""
                            }
                        ));
                        trials.push(t.record("rfc2544-trial"));
                    })?;
                    for mut x in trials {
                        x.push_param("search", kind);
                        x.push_param("repeat", i);
                        out.push(x);
                    }
                    let mut x = rfc2544::search_record(&r, &s, &dut.name(), &sz.name);
                    bias_metrics(&mut x, &bias);
                    rows.push((sz.name.clone(), r.clone()));
                    reps.push((r, x));
                }
                if kind == "ndr" && !reps.is_empty() {
                    let rates: Vec<f64> = reps.iter().map(|(r, _)| r.rate_pps).collect();
                    ndr_pps = Some(commbench_core::estimate::Estimate::from_samples(&rates).median)
                        .filter(|x| *x > 0.0);
                }
                if a.repeat > 1 {
                    if let Some(f) = rfc2544::fold_repeats(&reps) {
                        out.push(f);
                    }
                } else {
                    out.extend(reps.into_iter().map(|(_, x)| x));
                }
            }
            if let (Some(ndr), true) = (ndr_pps, a.latency_ladder > 0) {
                let l = rfc2544::latency_ladder(&mut b, &s, ndr, a.latency_ladder, |t| {
                    rec.progress(&format!(
                        "rfc2544 latency {} B: {:.0} pps → p99 {:.1} µs",
                        sz.name,
                        t.offered_pps,
                        t.latency.p99 / 1e3
                    ));
                })?;
                for (pct, t) in l {
                    let mut x = t.record("rfc2544-latency");
                    x.push_param("load_pct", pct);
                    x.push_param("ndr_pps", ndr);
                    bias_metrics(&mut x, &bias);
                    out.push(x);
                }
            }
            if let Some(max_frames) = a.back_to_back {
                let bs = rfc2544::B2bSpec {
                    trial: s.trial.clone(),
                    max_frames,
                    repeats: a.b2b_repeat,
                    resolution_pct: a.resolution_pct,
                    max_trials: a.max_trials,
                    throughput_pps: ndr_pps,
                };
                let r = rfc2544::back_to_back(&mut b, &bs, |t| {
                    rec.progress(&format!(
                        "rfc2544 back-to-back {} B: burst of {} → lost {}",
                        sz.name, t.sent, t.lost
                    ));
                })?;
                out.push(rfc2544::b2b_record(&r, &bs, &dut.name(), &sz.name));
                b2b_rows.push((sz.name.clone(), r));
            }
            if a.ladder > 0 {
                let l = rfc2544::ladder(&mut b, &s, |t| {
                    rec.progress(&format!(
                        "rfc2544 frame loss {} B: {:.0} pps → {:.4}%",
                        sz.name, t.offered_pps, t.loss_pct
                    ));
                })?;
                for t in l {
                    let mut x = t.record("rfc2544-loss");
                    x.push_param("load_pct", t.offered_pps / s.max_pps * 100.0);
                    out.push(x);
                }
            }
        }
    }
    crate::progress::finish();
    if let Some(b) = bias {
        out.push(b);
    }
    let mut table = rfc2544::table(&rows);
    if !b2b_rows.is_empty() {
        table.push('\n');
        table.push_str(&rfc2544::b2b_table(&b2b_rows));
    }
    a.out.emit_or_show(&out, || table.clone())?;
    if commbench_pipeline::netns::interrupted() {
        anyhow::bail!("interrupted: namespaces removed, the output above is partial");
    }
    Ok(())
}

fn run_crosscheck(a: &CrosscheckArgs) -> Result<()> {
    use commbench_pipeline::tester::dut::{DutSpec, FwdWork};
    use commbench_pipeline::tester::{pace, rfc2544, Bench};
    let delays: Vec<f64> = a
        .delays
        .split(',')
        .filter(|x| !x.is_empty())
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .ok()
                .filter(|d| (0.0..=1_000_000.0).contains(d))
                .ok_or_else(|| {
                    crate::usage(format!(
                        "--delays: '{x}' is not a delay in ns (0..=1000000)"
                    ))
                })
        })
        .collect::<Result<_>>()?;
    if delays.is_empty() {
        return Err(crate::usage("--delays is empty"));
    }
    let sizes = pace::parse_sizes(&a.size).map_err(crate::usage)?;
    let (dut0, spec, cpus, link) = offer_spec(&a.offer, "1k", sizes)?;
    let (rx, burst, rx_blocks) = match dut0 {
        DutSpec::L2fwd {
            rx,
            burst,
            rx_blocks,
            ..
        } => (rx, burst, rx_blocks),
        _ => {
            return Err(crate::usage(
                "crosscheck drives commbench's own forwarder: --dut l2fwd[:rx=...]",
            ))
        }
    };
    let max_pps = pace::parse_rate(&a.max_rate, link)
        .map_err(crate::usage)?
        .pps(spec.sizes.mean());
    commbench_pipeline::netns::catch_sigint();
    let mut rec = crate::progress::recorder();
    let hz = commbench_core::clock::tsc().hz();
    let search = |b: &mut Bench, rec: &mut commbench_core::record::Recorder, what: &str| {
        let s = rfc2544::SearchSpec {
            trial: spec.clone(),
            max_pps,
            resolution_pct: a.resolution_pct,
            pdr_loss_pct: None,
            max_trials: a.max_trials,
            ladder_steps: 0,
        };
        rfc2544::search(b, &s, "ndr", 0.0, 0.0, |t| {
            rec.progress(&format!(
                "crosscheck {what}: {:.0} pps → loss {:.4}%",
                t.offered_pps, t.loss_pct
            ));
        })
    };
    use commbench_core::estimate::{attach, Estimate};
    let med = |xs: &[f64]| Estimate::from_samples(xs).median;
    // Rounds over the delays (the tester alone first in each), so that a
    // slow stretch of the host touches every point alike.
    let mut tester_runs: Vec<rfc2544::SearchResult> = Vec::new();
    let mut runs: Vec<Vec<rfc2544::SearchResult>> = delays.iter().map(|_| Vec::new()).collect();
    'rounds: for round in 0..a.repeat {
        let tag = if a.repeat > 1 {
            format!(" (round {}/{})", round + 1, a.repeat)
        } else {
            String::new()
        };
        {
            let mut b = Bench::new(&DutSpec::None, cpus.clone())?;
            tester_runs.push(search(&mut b, &mut rec, &format!("no device{tag}"))?);
        }
        for (i, &d) in delays.iter().enumerate() {
            if commbench_pipeline::netns::interrupted() {
                break 'rounds;
            }
            let work = if d == 0.0 {
                FwdWork::Swap
            } else {
                FwdWork::Delay(d.round() as u64)
            };
            let dut = DutSpec::L2fwd {
                work,
                rx,
                burst,
                impair: Default::default(),
                rx_blocks,
            };
            let mut b = Bench::new(&dut, cpus.clone())?;
            runs[i].push(search(&mut b, &mut rec, &format!("delay {d} ns{tag}"))?);
        }
    }
    let tester_rates: Vec<f64> = tester_runs.iter().map(|r| r.rate_pps).collect();
    let tester_pps = med(&tester_rates);
    let tester_limited = tester_runs.iter().any(|r| r.tester_limited);
    // The white box: the forwarder's own rx + work + tx ticks per packet
    // at zero delay (or the first point's, less its delay), the median
    // over the rounds; later points add their delay to it.
    let bi = delays.iter().position(|&d| d == 0.0).unwrap_or(0);
    let base: Vec<f64> = runs[bi]
        .iter()
        .filter_map(|r| r.fwd_ticks().map(|t| t - delays[bi] * hz / 1e9))
        .collect();
    let base_ticks = med(&base);
    let mut out = Vec::new();
    let mut pts = Vec::new();
    let mut intervals = Vec::new();
    for (i, &d) in delays.iter().enumerate() {
        let rs = &runs[i];
        if rs.is_empty() {
            continue;
        }
        let predicted = rfc2544::predict_pps(hz, base_ticks, d);
        let (p, est) = rfc2544::cross_point(
            d,
            base_ticks,
            predicted,
            rs,
            tester_pps,
            spec.duration.as_secs_f64(),
        );
        let ticks = med(&rs.iter().filter_map(|r| r.fwd_ticks()).collect::<Vec<_>>());
        let mut x = commbench_core::record::Record::new("pipeline", "crosscheck")
            .param("delay_ns", d)
            .param("size", &spec.sizes.name)
            .param("rx", rx.name())
            .param("repeat", a.repeat)
            .metric("base_ticks", p.base_ticks)
            .metric("measured_ticks", ticks.is_finite().then_some(ticks))
            .metric("predicted_pps", p.predicted_pps)
            .metric("error_pct", p.error_pct)
            .metric("error_lo_pct", (est.lo / predicted - 1.0) * 100.0)
            .metric("error_hi_pct", (est.hi / predicted - 1.0) * 100.0)
            .metric("tester_pps", p.tester_pps)
            .metric("bound", &p.bound)
            .metric("verdict", &p.verdict)
            .metric("confirmed", p.confirmed)
            .metric("tester_limited", p.tester_limited)
            .metric("fail_loss_where", &p.fail_loss_where)
            .metric(
                "buffer_inflation_pct",
                p.buffer_inflation_pct
                    .is_finite()
                    .then_some(p.buffer_inflation_pct),
            );
        attach(&mut x.metrics, "measured_pps", &est);
        if let Some(r) = rs.last() {
            let t = r.final_trial.as_ref();
            x.push_metric("latency_p50_ns", t.map(|t| t.latency.p50));
            x.push_metric("latency_p99_ns", t.map(|t| t.latency.p99));
        }
        out.push(x);
        intervals.push(est);
        pts.push(p);
    }
    let tester = (tester_pps, tester_limited);
    crate::progress::finish();
    let mut table = format!(
        "tester alone (no device): NDR {:.3} Mpps{}{}\n delay ns   predicted Mpps   measured Mpps{}   error{}    buffer   bound    verdict\n",
        tester.0 / 1e6,
        if a.repeat > 1 { format!(", median of {}", tester_rates.len()) } else { String::new() },
        if tester.1 { " (generator behind schedule above it)" } else { "" },
        if a.repeat > 1 { " [95% interval]" } else { "" },
        if a.repeat > 1 { " [interval]  " } else { "" },
    );
    for (p, est) in pts.iter().zip(&intervals) {
        let (m, e) = if a.repeat > 1 {
            (
                format!(
                    "{:.3} [{:.3}, {:.3}]",
                    p.measured_pps / 1e6,
                    est.lo / 1e6,
                    est.hi / 1e6
                ),
                format!(
                    "{:+.1}% [{:+.1}, {:+.1}]",
                    p.error_pct,
                    (est.lo / p.predicted_pps - 1.0) * 100.0,
                    (est.hi / p.predicted_pps - 1.0) * 100.0
                ),
            )
        } else {
            (
                format!("{:.3}", p.measured_pps / 1e6),
                format!("{:+.1}%", p.error_pct),
            )
        };
        table.push_str(&format!(
            "{:>9}   {:>14.3}   {:>13}   {:>7}  {:>6.1}%  {:7}  {}\n",
            p.delay_ns,
            p.predicted_pps / 1e6,
            m,
            e,
            p.buffer_inflation_pct,
            p.bound,
            p.verdict
        ));
    }
    a.out.emit_or_show(&out, || table.clone())?;
    if a.out.format != crate::output::FormatArg::Table || a.out.output.is_some() {
        eprint!("{table}");
    }
    if commbench_pipeline::netns::interrupted() {
        anyhow::bail!("interrupted: namespaces removed, the output above is partial");
    }
    Ok(())
}
