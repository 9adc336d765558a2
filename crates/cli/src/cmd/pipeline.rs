//! `commbench pipeline ...`: wiring for the pipeline lab
//! (crates/pipeline). Arguments are parsed here (values by the lab's own
//! parsers, as clap `value_parser`s; ranges by clap), the lab runs them
//! (`commbench_pipeline::{run, io, tester::{trial, rfc2544, crosscheck}}`),
//! and the records go to an exporter; notes (oversubscription,
//! untrustworthy delays) go to stderr.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::builder::RangedU64ValueParser;
use clap::{Args, Subcommand, ValueEnum};
use commbench_core::placement::CpuList;
use commbench_pipeline::tester::crosscheck::{self, Delays};
use commbench_pipeline::tester::dut::{DutSpec, FwdWork, Impair};
use commbench_pipeline::tester::pace::{self, Sizes};
use commbench_pipeline::tester::rfc2544::{self, SizeList};
use commbench_pipeline::tester::trial;
use commbench_pipeline::tester::RoleCpus;
use commbench_pipeline::{
    netns, summary_lines, HashFields, IpMix, Mode, PipelineConfig, RssAt, RxFull, Sweep, Work,
};
use offer::offer;
use std::time::Duration;

mod offer;

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
    /// Device under test: none, l2fwd[:work=swap|delay:NS][,rx=af-xdp][,drop=N,dup=N,swap=N], bridge, router (the kernel's IP forwarding), cmd:'PROGRAM ARGS', ifaces:IF1,IF2.
    #[arg(long, default_value = "l2fwd", value_parser = DutSpec::parse)]
    pub dut: DutSpec,
    /// Arrival process of the bursts: cbr or poisson.
    #[arg(long, default_value = "cbr", value_parser = pace::Arrivals::parse)]
    pub arrivals: pace::Arrivals,
    /// Frames per burst (sent together at the burst's departure time).
    #[arg(long, default_value_t = 1)]
    pub burst: u32,
    /// Flows (round robin; each its own UDP 4-tuple and sequence numbers), 1..=256.
    #[arg(long, default_value_t = 1)]
    pub flows: u16,
    /// Link speed that a rate in % refers to (10G, 25G, 1G, ...).
    #[arg(long, default_value = "10G", value_parser = parse_link)]
    pub link: f64,
    /// Seconds per trial, (0, 3600].
    #[arg(long, default_value_t = 1.0, value_parser = f64_in(0.0, false, 3600.0, true))]
    pub duration_s: f64,
    /// A received frame with a one-way latency above this is late (µs).
    #[arg(long, default_value_t = 10_000)]
    pub late_us: u64,
    /// A generator whose schedule lag (p99 or at the end) exceeds this (µs) is behind schedule.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(..=60_000_000))]
    pub lag_bound_us: u64,
    /// The sink keeps counting this long after the last departure (ms).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(..=60_000))]
    pub drain_ms: u64,
    /// Busy-wait at most this many µs before each departure; below it the
    /// generator learns how late the host's timer wakes it and spins that long.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(..=1_000_000))]
    pub spin_us: u64,
    /// How the paced generator is scheduled: auto (real-time SCHED_FIFO in
    /// 900 ms spans when it has a CPU of its own, so other programs on that
    /// CPU cannot delay it), realtime, or normal.
    #[arg(long, default_value = "auto", value_parser = pace::GenPriority::parse)]
    pub gen_priority: pace::GenPriority,
    /// Generator transmit path.
    #[arg(long, value_enum, default_value = "sendmmsg")]
    pub tx: TxArg,
    /// Sink receive path (af-packet: kernel receive timestamps).
    #[arg(long, value_enum, default_value = "af-packet")]
    pub rx: EngineArg,
    /// CPUs for the roles: GEN,SINK,DUT (any may be empty: `,,` pins none); default: the generator alone.
    #[arg(long, value_parser = RoleCpus::parse)]
    pub cpus: Option<RoleCpus>,
    /// Seed of the Poisson schedule and of --traffic-mix's shuffle.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Skip measuring the path's latency with no device (the loopback bias).
    #[arg(long)]
    pub no_bias: bool,
    #[command(flatten)]
    pub traffic: offer::TrafficArgs,
}

#[derive(Debug, Args)]
pub struct TrialArgs {
    /// Offered rate: pps (100000, 250k, 1.5M) or a share of --link (50%).
    #[arg(long, default_value = "100k")]
    pub rate: String,
    /// Frame size with FCS (64..=1518) or imix.
    #[arg(long, default_value = "64", value_parser = pace::parse_sizes)]
    pub size: Sizes,
    /// Trials (each one record), 1..=100.
    #[arg(long, default_value_t = 1, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100))]
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
    #[arg(long, default_value = "64", value_parser = SizeList::parse)]
    pub sizes: SizeList,
    /// Highest rate tried: pps or a share of --link.
    #[arg(long, default_value = "1M")]
    pub max_rate: String,
    /// Stop the search when its interval is below this share of the maximum rate, %, (0, 50].
    #[arg(long, default_value_t = 1.0, value_parser = f64_in(0.0, false, 50.0, true))]
    pub resolution_pct: f64,
    /// Also search the PDR: the highest rate with at most this loss, %, (0, 100).
    #[arg(long, value_parser = f64_in(0.0, false, 100.0, false))]
    pub pdr_loss_pct: Option<f64>,
    /// Most trials per search, 1..=64.
    #[arg(long, default_value_t = 20, value_parser = RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub max_trials: usize,
    /// Frame-loss rate over offered load: trials at 1/N .. N/N of the maximum rate (0: skip), 0..=100.
    #[arg(long, default_value_t = 0, value_parser = RangedU64ValueParser::<usize>::new().range(0..=100))]
    pub ladder: usize,
    /// Searches per frame size (the NDR's interval comes from these), 1..=100.
    #[arg(long, default_value_t = 1, value_parser = RangedU64ValueParser::<usize>::new().range(1..=100))]
    pub repeat: usize,
    /// Latency at 1/N .. N/N of the NDR found (RFC 2544 §26.2 at and below
    /// the throughput; 0: at the NDR only, from its confirmation trial), 0..=100.
    #[arg(long, default_value_t = 0, value_parser = RangedU64ValueParser::<usize>::new().range(0..=100))]
    pub latency_ladder: usize,
    /// Back-to-back test (RFC 2544 §26.4, RFC 9004): the longest burst of
    /// up to this many frames, sent with no gap, that the device forwards
    /// without loss; with its implied and corrected buffer time.
    #[arg(long, value_name = "MAX_FRAMES", value_parser = clap::value_parser!(u64).range(1..=commbench_pipeline::tester::MAX_FRAMES))]
    pub back_to_back: Option<u64>,
    /// Back-to-back searches per frame size (RFC 9004 asks for at least 50), 1..=1000.
    #[arg(long, default_value_t = 50, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub b2b_repeat: usize,
    /// Throughput search: mlr (RFC 9971 MLRsearch: goals with an exceed ratio, so rare host pauses do not decide; trials the tester or the host spoiled are repeated) or rfc2544 (binary search: one lossy trial fails a rate; --duration-s, --resolution-pct, --pdr-loss-pct are its).
    #[arg(long, default_value = "mlr", value_parser = rfc2544::Method::parse)]
    pub search: rfc2544::Method,
    /// MLRsearch goal, repeatable: loss=0.5%,exceed=0.5,final=1s,sum=4s,width=1%,initial=100ms (keys optional; these are the defaults but loss=0); default: two goals, loss=0 and loss=0.5%.
    #[arg(long = "goal", value_name = "GOAL", value_parser = commbench_pipeline::tester::mlrsearch::Goal::parse)]
    pub goals: Vec<commbench_pipeline::tester::mlrsearch::Goal>,
    #[command(flatten)]
    pub offer: OfferArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct CrosscheckArgs {
    /// Injected per-packet delays of l2fwd, ns (67.2 = 10 GbE at 64 B), each 0..=1000000.
    #[arg(long, default_value = "0,10,50,67.2,100,500,1000", value_parser = parse_delays)]
    pub delays: Delays,
    /// Highest rate tried: pps.
    #[arg(long, default_value = "2M")]
    pub max_rate: String,
    /// The NDR goal's width, % ((upper − lower) / upper of MLRsearch's bounds).
    #[arg(long, default_value_t = 1.0)]
    pub resolution_pct: f64,
    #[arg(long, default_value_t = 200)]
    pub max_trials: usize,
    /// Frame size with FCS.
    #[arg(long, default_value = "64", value_parser = pace::parse_sizes)]
    pub size: Sizes,
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

impl From<TxArg> for netns::TxMethod {
    fn from(t: TxArg) -> Self {
        match t {
            TxArg::Sendmmsg => netns::TxMethod::Sendmmsg,
            TxArg::TxRing => netns::TxMethod::TxRing,
            TxArg::AfXdp => netns::TxMethod::AfXdp,
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

impl From<EngineArg> for netns::RxMethod {
    fn from(e: EngineArg) -> Self {
        match e {
            EngineArg::AfPacket => netns::RxMethod::AfPacket,
            EngineArg::AfXdp => netns::RxMethod::AfXdp,
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
    #[arg(long, default_value = "swap", value_parser = FwdWork::parse)]
    pub work: FwdWork,
    /// fwd: deterministic impairments of the tester's stamped frames: drop=N,dup=N,swap=N (every N-th).
    #[arg(long, value_parser = Impair::parse)]
    pub impair: Option<Impair>,
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
    #[arg(long, default_value = "swap", value_parser = Work::parse)]
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
    #[arg(long, value_parser = Sweep::parse)]
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

/// `--link`: a link speed in bit/s (10G, 25G, 1G, ...).
fn parse_link(s: &str) -> std::result::Result<f64, String> {
    commbench_core::linerate::parse_link(s).map_err(|e| e.to_string())
}

/// `--delays`: the lab's delay list.
fn parse_delays(s: &str) -> std::result::Result<Delays, String> {
    Delays::parse(s).map_err(|e| e.to_string())
}

/// A number in a range whose ends may be open, naming the range.
fn f64_in(
    lo: f64,
    lo_closed: bool,
    hi: f64,
    hi_closed: bool,
) -> impl Fn(&str) -> std::result::Result<f64, String> + Clone + Send + Sync + 'static {
    move |s| {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not a number"))?;
        let above = if lo_closed { v >= lo } else { v > lo };
        let below = if hi_closed { v <= hi } else { v < hi };
        if above && below {
            Ok(v)
        } else {
            Err(format!(
                "{v} is outside {}{lo}, {hi}{}",
                if lo_closed { '[' } else { '(' },
                if hi_closed { ']' } else { ')' }
            ))
        }
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
        let x = netns::netns_record(&r, a.window, a.burst, a.tx.into(), a.rx.into());
        v.push(x);
        if netns::interrupted() {
            break;
        }
    }
    a.out.emit(&v)?;
    check_interrupted(netns::interrupted())
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
    let recs = rec.take();
    // A sweep's view is its table alone (its record table was 781 columns).
    let with_table = !commbench_pipeline::summary::is_sweep(&recs);
    a.out.emit_summary(&recs, summary_lines, with_table)?;
    if broken > 0 {
        anyhow::bail!(
            "{broken} run(s) lost packets (generated != transmitted + dropped): marked partial"
        );
    }
    Ok(())
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
    a.out.emit_summarized(&rec.take(), summary_lines)?;
    check_interrupted(r.interrupted)?;
    trial::behind_note(&r).inspect(|n| eprintln!("commbench pipeline: note: {n}"));
    Ok(())
}

fn run_rfc2544(a: &Rfc2544Args) -> Result<()> {
    let offer = offer(&a.offer, "1k", a.sizes.0[0].clone())?;
    let from = a.offer.traffic.sizes_from.as_ref(); // replaces the list with its sizes
    let sizes = from.map_or_else(|| a.sizes.0.clone(), |_| vec![offer.trial.sizes.clone()]);
    let max_rate = pace::parse_rate(&a.max_rate, a.offer.link).map_err(crate::usage_err)?;
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
        method: a.search,
        goals: a.goals.clone(),
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
        max_rate: pace::parse_rate(&a.max_rate, a.offer.link).map_err(crate::usage_err)?,
        resolution_pct: a.resolution_pct,
        max_trials: a.max_trials,
        repeat: a.repeat,
    };
    spec.validate().map_err(crate::usage_err)?;
    netns::catch_sigint();
    let mut rec = crate::progress::recorder();
    let r = crosscheck::run(&spec, &mut rec).map_err(crate::lab_err)?;
    crate::progress::finish();
    let table = crosscheck::table(&r);
    a.out.emit_or_show(&rec.take(), || table.clone())?;
    if !a.out.is_table() || a.out.output.is_some() {
        eprint!("{table}");
    }
    check_interrupted(r.interrupted)
}
