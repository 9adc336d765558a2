//! commbench lab pipeline: DPDK-style packet processing in memory (seed:
//! dpdk-vnf-evaluation — the 14.88 Mpps / 67 ns / 134 cycles budget, the
//! rdtsc section timer, "32 bulk rx / packet process / 1 tx buffering",
//! and the RSS and TxBuffer studies it never finished).
//!
//! A generator stands in for the NIC: it writes realistic frames (Ethernet,
//! IPv4/IPv6, TCP/UDP, many flows) into buffers of a preallocated pool and
//! hands them out in rx bursts, each packet steered to a queue by the
//! Toeplitz RSS hash and a 128-entry indirection table. Per-packet work
//! (none, parse, MAC swap, or an injected TSC delay) is followed by a tx
//! buffer that flushes at `tx_bulk` packets or on a drain timeout, and a
//! sink that recycles the buffers. `rtc` runs all of it on one thread,
//! `pipeline` puts rx/tx-completion on an I/O thread and a worker thread
//! per queue, joined by SPSC rings.
//!
//! Each run reports Mpps, TSC ticks per packet split into rx burst, work
//! and tx (medians over short batches), the ticks left at 10/25/40/100 GbE
//! for the frame size, per-queue counts with the conservation check
//! (generated = transmitted + dropped), the queue balance, CPU time per
//! packet, load average and whether threads outnumbered CPUs.

// Buffers are `Box<Mbuf>` on purpose: a 2 KiB buffer moves between pool,
// rings and tx buffers as one pointer, never copied.
#![allow(clippy::vec_box)]

pub mod afpacket;
pub mod afxdp;
pub mod engine;
pub mod figures;
pub mod gen;
pub mod io;
pub mod lab;
pub mod mbuf;
pub mod netns;
pub mod rss;
pub mod summary;
pub mod tester;
pub mod txbuf;
pub mod txpath;
pub mod wire;
pub mod xdpprog;

pub use engine::{RxFull, Work};
pub use figures::figures;
pub use gen::{IpMix, RssAt};
pub use lab::PipelineLab;
pub use rss::HashFields;
pub use summary::summary_lines;

use commbench_core::delay::{measure, DelayMethod, Delays, SpinDelay};
use commbench_core::linerate::budget;
use commbench_core::placement::CpuList;
use commbench_core::record::{Record, Recorder};
use commbench_core::rusage::{online_cpus, RunMeter, RunUsage};
use commbench_core::stats::Summary;
use engine::{LoopSpec, Outcome, QueueCounts};
use gen::Generator;
use rss::{Balance, Rss, STANDARD_KEY, SYMMETRIC_KEY};
use serde::Serialize;
use thiserror::Error;

/// Frame sizes accepted (with FCS): minimum Ethernet to a standard MTU frame.
pub const SIZE_RANGE: std::ops::RangeInclusive<u32> = 64..=1518;
/// Largest pool (2 KiB buffers: 128 MiB).
pub const MAX_POOL: usize = 65_536;
/// Largest packet count of one run.
pub const MAX_PACKETS: u64 = 10_000_000_000;
/// Delays under this are below what the TSC busy-wait can hit reliably on
/// a 10 ns-step TSC with a ~20 ns read; the sweep says so next to them.
pub const DELAY_TRUSTWORTHY_NS: u64 = 100;

/// Run to completion on one core, or a pipeline of threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Rtc,
    Pipeline,
}

impl Mode {
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Rtc => "rtc",
            Mode::Pipeline => "pipeline",
        }
    }
}

/// One parameter swept over values (the seed's studies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sweep {
    /// TxBuffer bulk sizes.
    TxBulk(Vec<usize>),
    /// RSS queue counts.
    Queues(Vec<usize>),
    /// Injected per-packet delay, ns (0 = no work).
    Delay(Vec<u64>),
}

/// Parses `1,2,4` or a range `1..8` (at most 64 values).
fn parse_values(s: &str) -> Result<Vec<u64>, String> {
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

impl Sweep {
    /// Parses `NAME=VALUES`: `tx-bulk=1,2,4`, `queues=1..4`,
    /// `delay=0,10,50` (values a list or a range of at most 64).
    pub fn parse(s: &str) -> Result<Sweep, String> {
        let (name, values) = s.split_once('=').ok_or_else(|| {
            format!("'{s}': expected NAME=VALUES, e.g. tx-bulk=1,2,4 or queues=1..4")
        })?;
        let v = parse_values(values)?;
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

    pub fn name(&self) -> &'static str {
        match self {
            Sweep::TxBulk(_) => "tx-bulk",
            Sweep::Queues(_) => "queues",
            Sweep::Delay(_) => "delay",
        }
    }
    fn len(&self) -> usize {
        match self {
            Sweep::TxBulk(v) | Sweep::Queues(v) => v.len(),
            Sweep::Delay(v) => v.len(),
        }
    }
}

/// What a pipeline run can fail with: a configuration to change (a usage
/// error), or the system refusing what the run needs (sockets,
/// namespaces, a device that stopped).
#[derive(Debug, Error)]
pub enum PipelineError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Crosscheck(#[from] tester::crosscheck::CrosscheckError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl commbench_core::error::IsUsage for PipelineError {
    /// A setting to change (exit 2), not a failed run.
    fn is_usage(&self) -> bool {
        matches!(
            self,
            PipelineError::Config(_) | PipelineError::Crosscheck(_)
        )
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    pub mode: Mode,
    /// Packets per rx burst.
    pub burst: usize,
    /// Packets per tx flush.
    pub tx_bulk: usize,
    /// RSS queues (pipeline mode: worker threads).
    pub queues: usize,
    pub work: Work,
    /// Packets generated per run.
    pub packets: u64,
    /// Frame sizes with FCS; one run each.
    pub sizes: Vec<u32>,
    pub flows: usize,
    pub ip: IpMix,
    pub hash: HashFields,
    /// Use the symmetric RSS key (0x6d5a…).
    pub symmetric: bool,
    pub rss_at: RssAt,
    /// Slots of each rx ring (pipeline mode).
    pub ring_size: usize,
    /// Buffers in the pool; 0 picks a size from the other settings.
    pub pool_size: usize,
    /// Tx buffer drain timeout, µs (l2fwd's BURST_TX_DRAIN_US).
    pub drain_us: u64,
    /// Full rx ring: wait (default) or drop (pipeline mode).
    pub rx_full: RxFull,
    /// Run to completion: time every section (the rx/work/tx split,
    /// default) or only the whole burst (`false`: two TSC reads per burst,
    /// the instrumentation a plain C loop has; only the total is reported).
    pub split: bool,
    pub cpus: Option<CpuList>,
    pub repeat: usize,
    pub sweep: Option<Sweep>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            mode: Mode::Rtc,
            burst: 32,
            tx_bulk: 32,
            queues: 1,
            work: Work::Swap,
            packets: 2_000_000,
            sizes: vec![64],
            flows: 1024,
            ip: IpMix::Mix,
            hash: HashFields::L4,
            symmetric: false,
            rss_at: RssAt::Nic,
            ring_size: 1024,
            pool_size: 0,
            drain_us: 100,
            rx_full: RxFull::Wait,
            split: true,
            cpus: None,
            repeat: 1,
            sweep: None,
        }
    }
}

fn bad(msg: impl Into<String>) -> PipelineError {
    PipelineError::Config(msg.into())
}

impl PipelineConfig {
    /// Checks every setting and says what to change.
    pub fn validate(&self) -> Result<(), PipelineError> {
        if !(1..=1024).contains(&self.burst) {
            return Err(bad(format!("--burst {} is outside 1..=1024", self.burst)));
        }
        if !(1..=1024).contains(&self.tx_bulk) {
            return Err(bad(format!(
                "--tx-bulk {} is outside 1..=1024",
                self.tx_bulk
            )));
        }
        if !(1..=64).contains(&self.queues) {
            return Err(bad(format!(
                "--queues {} is outside 1..=64 (the indirection table has 128 entries; more queues than threads the machine can run only measures the scheduler)",
                self.queues
            )));
        }
        if self.packets == 0 || self.packets > MAX_PACKETS {
            return Err(bad(format!(
                "--packets {} is outside 1..={MAX_PACKETS}",
                self.packets
            )));
        }
        if self.sizes.is_empty() {
            return Err(bad("--sizes is empty: give frame sizes such as 64,128"));
        }
        if let Some(s) = self.sizes.iter().find(|s| !SIZE_RANGE.contains(s)) {
            return Err(bad(format!(
                "frame size {s} B is outside 64..=1518 (an Ethernet frame with FCS)"
            )));
        }
        if !(1..=1_000_000).contains(&self.flows) {
            return Err(bad(format!(
                "--flows {} is outside 1..=1000000",
                self.flows
            )));
        }
        if !self.ring_size.is_power_of_two() || !(16..=65_536).contains(&self.ring_size) {
            return Err(bad(format!(
                "--ring-size {} must be a power of two in 16..=65536",
                self.ring_size
            )));
        }
        if self.pool_size > MAX_POOL {
            return Err(bad(format!(
                "--pool-size {} is above {MAX_POOL}",
                self.pool_size
            )));
        }
        if self.drain_us == 0 || self.drain_us > 1_000_000 {
            return Err(bad(format!(
                "--drain-us {} is outside 1..=1000000",
                self.drain_us
            )));
        }
        if !(1..=100).contains(&self.repeat) {
            return Err(bad(format!("--repeat {} is outside 1..=100", self.repeat)));
        }
        if let Work::Delay(ns) = self.work {
            if ns > 1_000_000 {
                return Err(bad(format!(
                    "--work delay:{ns} is above 1000000 ns (1 ms per packet)"
                )));
            }
        }
        if let Some(s) = &self.sweep {
            if s.len() == 0 || s.len() > 64 {
                return Err(bad("--sweep needs 1..=64 values"));
            }
            let mut c = self.clone();
            c.sweep = None;
            for p in points(self) {
                c.apply(&p);
                c.validate()?;
            }
        }
        let pool = self.effective_pool();
        let need = self.min_pool();
        if pool < need {
            return Err(bad(format!(
                "--pool-size {pool} is below the {need} buffers this configuration can hold at once (burst + one tx buffer per queue{})",
                if self.mode == Mode::Pipeline { " + the rx rings" } else { "" }
            )));
        }
        Ok(())
    }

    /// Buffers that can be held at once without a packet being in the
    /// pool's debt: a burst, a full tx buffer per queue, and (pipeline) the
    /// rx rings and a burst per worker.
    fn min_pool(&self) -> usize {
        let q = self.queues;
        match self.mode {
            // The rx ring's buffers, the burst in hand, the tx buffers.
            Mode::Rtc => 2 * self.burst + q * self.tx_bulk,
            Mode::Pipeline => self.burst + q * (self.tx_bulk + self.burst),
        }
    }

    fn effective_pool(&self) -> usize {
        if self.pool_size > 0 {
            return self.pool_size;
        }
        let want = match self.mode {
            Mode::Rtc => self.min_pool(),
            Mode::Pipeline => self.min_pool() + self.queues * self.ring_size,
        };
        want.next_power_of_two()
            .clamp(1024, MAX_POOL)
            .max(self.min_pool())
    }

    fn apply(&mut self, p: &Point) {
        match *p {
            Point::None => {}
            Point::TxBulk(b) => self.tx_bulk = b,
            Point::Queues(q) => self.queues = q,
            Point::Delay(ns) => self.work = if ns == 0 { Work::None } else { Work::Delay(ns) },
        }
    }

    fn threads(&self) -> usize {
        match self.mode {
            Mode::Rtc => 1,
            Mode::Pipeline => 1 + self.queues,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Point {
    None,
    TxBulk(usize),
    Queues(usize),
    Delay(u64),
}

fn points(c: &PipelineConfig) -> Vec<Point> {
    match &c.sweep {
        None => vec![Point::None],
        Some(Sweep::TxBulk(v)) => v.iter().map(|&b| Point::TxBulk(b)).collect(),
        Some(Sweep::Queues(v)) => v.iter().map(|&q| Point::Queues(q)).collect(),
        Some(Sweep::Delay(v)) => v.iter().map(|&d| Point::Delay(d)).collect(),
    }
}

/// Ticks per packet of one section: median and p99 over batches.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Ticks {
    pub median: f64,
    pub p99: f64,
    pub batches: u64,
}

impl Ticks {
    fn of(v: &[f64]) -> Self {
        let s = Summary::from_samples(v);
        Ticks {
            median: s.median,
            p99: s.p99,
            batches: s.n,
        }
    }
}

/// The seed's three parts, per packet.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TickSplit {
    pub rx: Ticks,
    pub work: Ticks,
    pub tx: Ticks,
    /// Tx completion on the I/O thread (pipeline only).
    pub sink: Option<Ticks>,
    /// Run to completion: the chained total (rx + work + tx) of each
    /// batch. Pipeline: null.
    pub total: Option<Ticks>,
    /// Run to completion: the generator writing the frames (the NIC's
    /// DMA, which a real NIC does without the CPU): timed apart, not in
    /// `total`. Pipeline: null.
    pub gen: Option<Ticks>,
    /// rx + work + tx (+ sink) medians: CPU ticks per packet summed over
    /// the threads that touch it.
    pub sum_of_medians: f64,
    /// Share of batches whose total looks preempted.
    pub preempted_pct: f64,
}

/// Ticks per packet left at a link speed for this frame size.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BudgetLeft {
    pub link: String,
    pub budget_ticks: f64,
    /// budget − ticks per packet (negative: this path cannot keep up).
    pub left_ticks: f64,
}

/// The accuracy of the injected delay (delay sweep and `--work delay:NS`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DelayCheck {
    pub requested_ns: u64,
    pub measured_median_ns: f64,
    pub error_pct: f64,
    /// False under [`DELAY_TRUSTWORTHY_NS`]: the figure is not a delay this
    /// machine can inject precisely.
    pub trustworthy: bool,
}

/// One run.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub mode: Mode,
    /// `run` or `sweep-<name>`.
    pub test: String,
    pub size: u32,
    pub burst: usize,
    pub tx_bulk: usize,
    pub queues: usize,
    pub work: String,
    pub delay_ns: Option<u64>,
    pub repeat: usize,
    pub flows: usize,
    pub v6_flows: usize,
    pub v6_downgraded: usize,
    pub rss_at: RssAt,
    pub hash: HashFields,
    pub symmetric: bool,
    pub rx_full: RxFull,
    /// Section split timed (false: burst totals only).
    pub split: bool,
    pub pool_size: usize,
    pub generated: u64,
    pub transmitted: u64,
    pub dropped: u64,
    pub per_queue: Vec<QueueCounts>,
    pub conserved: bool,
    pub balance: Balance,
    pub mpps: f64,
    pub ticks: TickSplit,
    pub budget: Vec<BudgetLeft>,
    pub tx_flushes_bulk: u64,
    pub tx_flushes_drain: u64,
    pub tx_flushes_final: u64,
    pub parse_errors: u64,
    pub delay: Option<DelayCheck>,
    pub threads: usize,
    pub cpus: usize,
    pub placement: String,
    /// Its threads hand packets between CPUs (see
    /// [`commbench_core::lab::CROSS_CPU`]).
    pub cross_cpu: bool,
    pub usage: RunUsage,
    pub cpu_ns_per_packet: f64,
    pub oversubscribed: bool,
    pub checksum: u64,
}

/// Everything a `run` did.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineReport {
    pub runs: Vec<RunResult>,
    /// Notes worth printing (oversubscription, untrustworthy delays,
    /// downgraded IPv6 flows).
    pub notes: Vec<String>,
}

/// Runs the configuration (every sweep point × size, `cfg.repeat` times,
/// interleaved) and records one [`Record`] per point and size, with each
/// declared metric's samples and 95% interval over the repeats.
pub fn run(cfg: &PipelineConfig, rec: &mut Recorder) -> Result<PipelineReport, PipelineError> {
    let plan = commbench_core::estimate::Repeats {
        min: cfg.repeat,
        max: cfg.repeat,
        target_rel_half_width: 0.0,
    };
    run_repeats(cfg, &plan, None, rec)
}

/// Like [`run`], with adaptive repeats: at least `plan.min` rounds over
/// every point, then more while a point's headline metric has an interval
/// wider than the plan's target, up to `plan.max` rounds, and no round
/// started after `deadline`. The record's `repeat` parameter is the
/// rounds asked for at least (`plan.min`); `<metric>_n` says how many ran.
pub fn run_repeats(
    cfg: &PipelineConfig,
    plan: &commbench_core::estimate::Repeats,
    deadline: Option<std::time::Instant>,
    rec: &mut Recorder,
) -> Result<PipelineReport, PipelineError> {
    cfg.validate()?;
    let spin = SpinDelay::calibrate();
    let delays = Delays {
        spin,
        vloop: commbench_core::delay::VolatileLoop::calibrate(),
    };
    let cpus_online = cfg
        .cpus
        .as_ref()
        .map_or_else(online_cpus, |c| c.cpus().len().max(1));
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    let test = cfg
        .sweep
        .as_ref()
        .map_or_else(|| "run".to_owned(), |s| format!("sweep-{}", s.name()));
    // Every point's configuration first, then the repeats interleaved
    // over points and sizes (A B C A B C): a slow spell of the machine
    // lands on every configuration alike, and the repeats are separate
    // runs, where the variance lives.
    let mut prepared = Vec::new();
    for p in points(cfg) {
        let mut c = cfg.clone();
        c.sweep = None;
        c.apply(&p);
        let delay = match c.work {
            Work::Delay(ns) => {
                let a = measure(DelayMethod::TscSpin, ns, 2000, &delays);
                Some(DelayCheck {
                    requested_ns: ns,
                    measured_median_ns: a.measured.median,
                    error_pct: a.median_error * 100.0,
                    trustworthy: ns >= DELAY_TRUSTWORTHY_NS,
                })
            }
            Work::None if matches!(p, Point::Delay(0)) => Some(DelayCheck {
                requested_ns: 0,
                measured_median_ns: 0.0,
                error_pct: 0.0,
                trustworthy: true,
            }),
            _ => None,
        };
        if let Some(d) = &delay {
            if !d.trustworthy {
                let n = format!(
                    "delay {} ns: measured median {:.0} ns; under {DELAY_TRUSTWORTHY_NS} ns the injected delay is not trustworthy here",
                    d.requested_ns, d.measured_median_ns
                );
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
        }
        let threads = c.threads();
        if threads > cpus_online {
            let n = format!(
                "{} mode with {} queue(s) keeps {threads} threads busy on {cpus_online} CPU(s): oversubscribed, rates measure the scheduler too",
                c.mode.name(),
                c.queues
            );
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
        prepared.push((c, delay));
    }
    let mut by_cfg: Vec<Vec<RunResult>> = Vec::new();
    let mut r = 0;
    loop {
        let enough = r >= plan.min.max(1)
            && (r >= plan.max
                || deadline.is_some_and(|d| std::time::Instant::now() >= d)
                || !by_cfg.iter().any(|v| {
                    let recs: Vec<Record> = v.iter().map(record).collect();
                    commbench_core::lab::wants_more(&lab::PipelineLab, &recs, plan)
                }));
        if enough {
            break;
        }
        r += 1;
        let mut slot = 0;
        for (c, delay) in &prepared {
            for &size in &c.sizes {
                rec.progress(&format!(
                    "pipeline: {} {size} B queues={} tx-bulk={} work={} ({}/{})",
                    c.mode.name(),
                    c.queues,
                    c.tx_bulk,
                    c.work.name(),
                    r,
                    plan.min.max(1)
                ));
                let res = run_one(c, size, r - 1, &test, spin, cpus_online, delay.clone());
                if res.v6_downgraded > 0 {
                    let n = format!(
                        "{size} B frames cannot hold IPv6 with TCP/UDP headers: {} IPv6 flow(s) sent as IPv4",
                        res.v6_downgraded
                    );
                    if !notes.contains(&n) {
                        notes.push(n);
                    }
                }
                if by_cfg.len() <= slot {
                    by_cfg.push(Vec::new());
                }
                by_cfg[slot].push(res);
                slot += 1;
            }
        }
    }
    for v in by_cfg {
        let mut out = repeats_record(&v);
        out.push_param("repeat", plan.min.max(1));
        rec.push(out);
        runs.extend(v);
    }
    Ok(PipelineReport { runs, notes })
}

fn run_one(
    c: &PipelineConfig,
    size: u32,
    repeat: usize,
    test: &str,
    spin: SpinDelay,
    cpus: usize,
    delay: Option<DelayCheck>,
) -> RunResult {
    let key = if c.symmetric {
        &SYMMETRIC_KEY
    } else {
        &STANDARD_KEY
    };
    let rss = Rss::new(key, c.hash, c.queues);
    let gen = Generator::new(c.flows, size, c.ip, rss, c.rss_at);
    let (v6_flows, v6_downgraded) = (gen.v6_flows, gen.v6_downgraded);
    let threads = c.threads();
    let oversubscribed_declared = threads > cpus;
    let tsc = commbench_core::clock::tsc();
    let spec = LoopSpec {
        burst: c.burst,
        tx_bulk: c.tx_bulk,
        queues: c.queues,
        work: c.work,
        packets: c.packets,
        ring_size: c.ring_size,
        pool_size: c.effective_pool(),
        drain_ticks: tsc.ns_to_ticks(c.drain_us as f64 * 1000.0).max(1),
        cpus: c.cpus.clone(),
        spin_limit: if oversubscribed_declared { 0 } else { 256 },
        rx_full: c.rx_full,
        split: c.split,
    };
    let mut meter = RunMeter::start();
    let out: Outcome = match c.mode {
        Mode::Rtc => engine::run_rtc(&spec, gen, spin),
        Mode::Pipeline => engine::run_pipeline(&spec, gen, spin),
    };
    meter.sample();
    let transmitted: u64 = out.per_queue.iter().map(|q| q.transmitted).sum();
    let usage = meter.finish_with_threads(transmitted, threads as u64);
    let generated: u64 = out.per_queue.iter().map(|q| q.generated).sum();
    let dropped: u64 = out.per_queue.iter().map(|q| q.dropped).sum();
    let conserved = out.per_queue.iter().all(QueueCounts::conserved)
        && generated == c.packets
        && generated == transmitted + dropped;
    let t = &out.timers;
    let rx = Ticks::of(&t.rx);
    let work = Ticks::of(&t.work);
    let tx = Ticks::of(&t.tx);
    let sink = t.sink.as_deref().map(Ticks::of);
    let total = t.total.as_deref().map(Ticks::of);
    let sum_of_medians =
        rx.median + work.median + tx.median + sink.as_ref().map_or(0.0, |s| s.median);
    let preempt_src: Vec<f64> = t.total.clone().unwrap_or_else(|| t.work.clone());
    let preempted_pct = {
        let k = 1e9 / tsc.hz();
        let batch = f64::from(engine::BATCH_PKTS);
        let ns: Vec<f64> = preempt_src.iter().map(|x| x * k * batch).collect();
        commbench_core::timer::preempted_share(&ns) * 100.0
    };
    let per_packet = total.as_ref().map_or(sum_of_medians, |t| t.median);
    let budget = [("10G", 10e9), ("25G", 25e9), ("40G", 40e9), ("100G", 100e9)]
        .iter()
        .filter_map(|&(name, bps)| {
            let b = budget(bps, size, tsc.hz()).ok()?;
            Some(BudgetLeft {
                link: name.to_owned(),
                budget_ticks: b.cycles_per_packet,
                left_ticks: b.cycles_per_packet - per_packet,
            })
        })
        .collect();
    let placement = match &c.cpus {
        None => "unpinned".to_owned(),
        Some(l) => {
            let v: Vec<String> = l.cpus().iter().map(|c| c.to_string()).collect();
            format!(
                "io/rtc on cpu {}, workers round-robin over {}",
                v[0],
                v.join(",")
            )
        }
    };
    let balance = Balance::from_counts(out.per_queue.iter().map(|q| q.generated).collect());
    RunResult {
        mode: c.mode,
        test: test.to_owned(),
        size,
        burst: c.burst,
        tx_bulk: c.tx_bulk,
        queues: c.queues,
        work: c.work.name(),
        delay_ns: match c.work {
            Work::Delay(ns) => Some(ns),
            Work::None if delay.is_some() => Some(0),
            _ => None,
        },
        repeat,
        flows: c.flows,
        v6_flows,
        v6_downgraded,
        rss_at: c.rss_at,
        hash: c.hash,
        symmetric: c.symmetric,
        rx_full: c.rx_full,
        split: c.split,
        pool_size: spec.pool_size,
        generated,
        transmitted,
        dropped,
        conserved,
        balance,
        mpps: if out.wall_s > 0.0 {
            transmitted as f64 / out.wall_s / 1e6
        } else {
            f64::NAN
        },
        ticks: TickSplit {
            rx,
            work,
            tx,
            sink,
            total,
            gen: t.gen.as_deref().map(Ticks::of),
            sum_of_medians,
            preempted_pct,
        },
        budget,
        tx_flushes_bulk: out.flushes_bulk,
        tx_flushes_drain: out.flushes_drain,
        tx_flushes_final: out.flushes_final,
        parse_errors: out.parse_errors,
        delay,
        threads: out.threads,
        cpus,
        placement,
        cross_cpu: out.threads > 1 && c.cpus.as_ref().is_none_or(|l| l.cpus().len() > 1),
        cpu_ns_per_packet: usage.cpu_ns_per_op,
        oversubscribed: usage.oversubscribed || oversubscribed_declared,
        usage,
        per_queue: out.per_queue,
        checksum: out.checksum,
    }
}

/// One configuration's record over its repeats: the median run's record
/// (by ticks per packet, else rate) with every declared metric's samples
/// and 95% interval over the runs, `repeat` the number of runs, and
/// `partial` when any run lost a packet.
pub fn repeats_record(runs: &[RunResult]) -> Record {
    let each: Vec<Record> = runs.iter().map(record).collect();
    let key = |r: &Record| {
        r.metric_f64("ticks_total")
            .or_else(|| r.metric_f64("mpps").map(|x| -x))
            .unwrap_or(f64::NAN)
    };
    let mut order: Vec<usize> = (0..each.len()).collect();
    order.sort_by(|&a, &b| key(&each[a]).total_cmp(&key(&each[b])));
    let Some(&mid) = order.get(order.len() / 2) else {
        return Record::new("pipeline", "run");
    };
    let mut out = each[mid].clone();
    out.push_param("repeat", each.len());
    if each.len() > 1 {
        lab::attach_repeats_of(&mut out, &each);
    }
    let lost = runs.iter().any(|r| !r.conserved);
    out.push_metric("conserved", !lost);
    out.push_metric("partial", lost);
    out
}

/// The record of one run (the fields every output format carries).
pub fn record(r: &RunResult) -> Record {
    let mut rec = Record::new("pipeline", &r.test)
        .param("mode", r.mode)
        .param("size", r.size)
        .param("burst", r.burst)
        .param("tx_bulk", r.tx_bulk)
        .param("queues", r.queues)
        .param("work", &r.work)
        .param("delay_ns", r.delay_ns)
        .param("repeat", r.repeat)
        .param("flows", r.flows)
        .param("rss_at", r.rss_at)
        .param("hash", r.hash)
        .param("symmetric", r.symmetric)
        .param("rx_full", r.rx_full)
        .param("timing", if r.split { "split" } else { "total" })
        .metric("mpps", r.mpps)
        .metric("ticks_rx", r.ticks.rx.median)
        .metric("ticks_work", r.ticks.work.median)
        .metric("ticks_tx", r.ticks.tx.median)
        .metric("ticks_sink", r.ticks.sink.as_ref().map(|s| s.median))
        .metric("ticks_gen", r.ticks.gen.as_ref().map(|s| s.median))
        // Pipeline mode has no chained total (its parts run on two
        // threads): its ticks per packet are the parts' medians summed over
        // the threads, what its link budgets use and its stacked bar draws
        // (the report's "pipeline: run" table had an empty ticks cell for
        // it while the figure drew 83.9).
        .metric(
            "ticks_total",
            r.ticks
                .total
                .as_ref()
                .map_or(r.ticks.sum_of_medians, |s| s.median),
        )
        .metric("ticks_sum_of_medians", r.ticks.sum_of_medians)
        .metric(
            "ticks_batches",
            r.ticks
                .total
                .as_ref()
                .map_or(r.ticks.rx.batches, |t| t.batches),
        )
        .metric("preempted_pct", r.ticks.preempted_pct)
        .metric("generated", r.generated)
        .metric("transmitted", r.transmitted)
        .metric("dropped", r.dropped)
        .metric("conserved", r.conserved)
        .metric(
            "per_queue_generated",
            join(r.per_queue.iter().map(|q| q.generated)),
        )
        .metric(
            "per_queue_transmitted",
            join(r.per_queue.iter().map(|q| q.transmitted)),
        )
        .metric(
            "per_queue_dropped",
            join(r.per_queue.iter().map(|q| q.dropped)),
        )
        .metric("balance_max_over_mean", r.balance.max_over_mean)
        .metric("tx_flushes_bulk", r.tx_flushes_bulk)
        .metric("tx_flushes_drain", r.tx_flushes_drain)
        .metric("v6_flows", r.v6_flows)
        .metric("parse_errors", r.parse_errors);
    for b in &r.budget {
        rec.push_metric(&format!("left_ticks_{}", b.link), b.left_ticks);
    }
    if let Some(d) = &r.delay {
        rec.push_metric("delay_measured_ns", d.measured_median_ns);
        rec.push_metric("delay_trustworthy", d.trustworthy);
    }
    rec.push_metric("threads", r.threads);
    rec.push_metric("cpus", r.cpus);
    rec.push_metric("placement", &r.placement);
    rec.push_metric(commbench_core::lab::CROSS_CPU, r.cross_cpu);
    r.usage.add_to(&mut rec);
    rec.push_metric("cpu_ns_per_packet", r.cpu_ns_per_packet);
    // add_to wrote the meter's verdict; ours also counts declared threads.
    rec.push_metric("oversubscribed", r.oversubscribed);
    rec.push_metric("partial", !r.conserved);
    rec
}

/// Cost of one Toeplitz hash and the balance of `flows` generated flows
/// over `queues`: byte table vs bitwise, IPv4/IPv6, 2- and 4-tuple. One
/// record per (implementation, input); ticks per hash are medians over
/// batches of 1024 hashes of distinct inputs.
pub fn rss_bench(
    queues: usize,
    flows: usize,
    rec: &mut Recorder,
) -> Result<Vec<Record>, PipelineError> {
    if !(1..=rss::RETA_SIZE).contains(&queues) {
        return Err(bad(format!("--queues {queues} is outside 1..=128")));
    }
    if !(1..=1_000_000).contains(&flows) {
        return Err(bad(format!("--flows {flows} is outside 1..=1000000")));
    }
    let conditions = commbench_core::rusage::Conditions::begin();
    let table = rss::Toeplitz::new(&STANDARD_KEY);
    let mut out = Vec::new();
    let inputs: Vec<(&str, bool, HashFields)> = vec![
        ("ipv4-l4", false, HashFields::L4),
        ("ipv4-l3", false, HashFields::L3),
        ("ipv6-l4", true, HashFields::L4),
        ("ipv6-l3", true, HashFields::L3),
    ];
    const N: usize = 1024;
    for (name, v6, fields) in inputs {
        let bufs: Vec<([u8; rss::MAX_INPUT], usize)> = (0..N)
            .map(|i| {
                let mut b = [0u8; rss::MAX_INPUT];
                let n = gen::flow_tuple(i, v6).hash_input(fields, &mut b);
                (b, n)
            })
            .collect();
        for imp in ["table", "bitwise"] {
            rec.progress(&format!("pipeline rss: {imp} {name}"));
            let batches = if imp == "table" { 400 } else { 40 };
            let mut t = commbench_core::timer::SectionTimer::new(1, batches);
            let mut sink = 0u32;
            for _ in 0..batches {
                let t0 = commbench_core::clock::rdtsc_fenced();
                // One loop per implementation: no per-hash dispatch.
                if imp == "bitwise" {
                    for (b, n) in &bufs {
                        sink ^=
                            rss::toeplitz_bitwise(&STANDARD_KEY, std::hint::black_box(&b[..*n]));
                    }
                } else if bufs[0].1 == 12 {
                    for (b, _) in &bufs {
                        let b12: &[u8; 12] = b[..12].try_into().expect("12 bytes");
                        sink ^= table.hash_v4_l4(std::hint::black_box(b12));
                    }
                } else {
                    for (b, n) in &bufs {
                        sink ^= table.hash(std::hint::black_box(&b[..*n]));
                    }
                }
                let t1 = commbench_core::clock::rdtsc_fenced();
                t.record_batch_ticks(t1 - t0, N as u32);
            }
            std::hint::black_box(sink);
            let k = commbench_core::clock::tsc().hz() / 1e9;
            let ticks: Vec<f64> = t.per_op_ns().iter().map(|ns| ns * k).collect();
            let s = Summary::from_samples(&ticks);
            out.push(
                Record::new("pipeline", "rss-hash")
                    .param("impl", imp)
                    .param("input", name)
                    .param("input_bytes", bufs[0].1)
                    .metric("ticks_per_hash", s.median)
                    .metric("ticks_p99", s.p99)
                    .metric("batches", s.n),
            );
        }
    }
    for symmetric in [false, true] {
        let key = if symmetric {
            &SYMMETRIC_KEY
        } else {
            &STANDARD_KEY
        };
        let rss = Rss::new(key, HashFields::L4, queues);
        let g = Generator::new(flows, 128, IpMix::Mix, rss, RssAt::Nic);
        let mut counts = vec![0u64; queues];
        for q in g.flow_queues() {
            counts[q] += 1;
        }
        let b = Balance::from_counts(counts);
        out.push(
            Record::new("pipeline", "rss-balance")
                .param("queues", queues)
                .param("flows", flows)
                .param("symmetric", symmetric)
                .metric("flows_per_queue", join(b.per_queue.iter().copied()))
                .metric("max_over_mean", b.max_over_mean),
        );
    }
    // The Lab contract's conditions: the hashes run on this thread alone.
    for r in &mut out {
        conditions.stamp(r, 1, None);
    }
    Ok(out)
}

fn join(v: impl Iterator<Item = u64>) -> String {
    v.map(|x| x.to_string()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
