//! The arguments of `commbench pipeline ...`: one clap struct per
//! subcommand, values read by the lab's own parsers (`value_parser`s) and
//! ranges checked by clap, so that a command body starts from checked
//! values.

use crate::output::OutputArgs;
use clap::builder::RangedU64ValueParser;
use clap::{Args, Subcommand, ValueEnum};
use commbench_pipeline::tester::crosscheck::Delays;
use commbench_pipeline::tester::dut::{DutSpec, FwdWork, Impair};
use commbench_pipeline::tester::pace::{self, Sizes};
use commbench_pipeline::tester::rfc2544::SizeList;
use commbench_pipeline::tester::RoleCpus;
use commbench_pipeline::{netns, Sweep, Work};

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
    #[arg(long, default_value = "l2fwd", value_parser = DutSpec::parse)]
    pub dut: DutSpec,
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
    /// Generator transmit path.
    #[arg(long, value_enum, default_value = "sendmmsg")]
    pub tx: TxArg,
    /// Sink receive path (af-packet: kernel receive timestamps).
    #[arg(long, value_enum, default_value = "af-packet")]
    pub rx: EngineArg,
    /// CPUs for the roles: GEN,SINK,DUT (any may be empty).
    #[arg(long, value_parser = RoleCpus::parse)]
    pub cpus: Option<RoleCpus>,
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
    /// Search resolution, % of the maximum rate.
    #[arg(long, default_value_t = 1.0)]
    pub resolution_pct: f64,
    #[arg(long, default_value_t = 16)]
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
