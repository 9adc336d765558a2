//! The two loops: run to completion (one thread does rx burst → work → tx
//! buffer, the seed's l2fwd-style loop) and pipeline (an I/O thread does rx
//! and tx completion, one worker thread per RSS queue does the work and the
//! tx buffering; they meet in SPSC rings).
//!
//! Time is read with the TSC at the section borders of every burst, chained
//! (the end of one section is the start of the next), and summed over
//! batches of at least [`BATCH_PKTS`] packets: each batch gives one
//! ticks-per-packet figure per section, and the report takes medians over
//! batches, so a preempted batch moves the tail, not the figure (the seed
//! summed `rdtsc() - before` over the whole run).
//!
//! Waiting never spins without bound: an idle loop spins a little (not at
//! all when threads outnumber CPUs), then yields, then parks until the
//! thread that feeds it pushes work (or 100 µs pass).
//!
//! Conservation: every packet the generator produced is counted on its
//! queue as generated, and later as transmitted or dropped (rx ring full,
//! the NIC's "imissed"); tx rings are as large as the pool, so a tx flush
//! never fails and never drops.

use crate::gen::Generator;
use crate::mbuf::{Mbuf, Pool};
use crate::rss::FlowTuple;
use crate::txbuf::TxBuffer;
use crate::wire::{swap_macs, Frame};
use commbench_core::clock::rdtsc;
use commbench_core::delay::SpinDelay;
use commbench_core::placement::CpuList;
use commbench_core::timer::SectionTimer;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Packets per timed batch: enough that the chained TSC reads (one per
/// burst and section) and the subtracted read overhead are well under a
/// tick per packet.
pub const BATCH_PKTS: u32 = 256;

/// Per-packet work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    None,
    /// Parse Ethernet/IP/L4 through the checked view; fold the ports.
    Parse,
    /// l2fwd's MAC swap.
    Swap,
    /// TSC busy-wait of this many ns per packet (the seed's delay).
    Delay(u64),
}

impl Work {
    /// Parses `none`, `parse`, `swap` or `delay:NS` (whole nanoseconds).
    pub fn parse(s: &str) -> Result<Work, String> {
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

    pub fn name(&self) -> String {
        match self {
            Work::None => "none".into(),
            Work::Parse => "parse".into(),
            Work::Swap => "swap".into(),
            Work::Delay(ns) => format!("delay:{ns}"),
        }
    }
}

/// Does the work on one packet; `acc` keeps parse results observable.
struct Worker {
    work: Work,
    delay_ticks: u64,
    spin: SpinDelay,
    acc: u64,
    parse_errors: u64,
}

impl Worker {
    fn new(work: Work, spin: SpinDelay) -> Self {
        let delay_ticks = match work {
            Work::Delay(ns) => commbench_core::clock::tsc().ns_to_ticks(ns as f64),
            _ => 0,
        };
        Worker {
            work,
            delay_ticks,
            spin,
            acc: 0,
            parse_errors: 0,
        }
    }

    /// Does the work on every packet of a burst. The kind is matched once
    /// per burst, not per packet: matched per packet it compiled to an
    /// indirect jump in the loop (rtc swap: 10.1 ticks per packet against
    /// 6.5 for the strongest C loop, `bench/pipeline-baseline/rtc.c`).
    /// `min_len`: a length every frame of the burst has at least (the
    /// generator's frame length), so that a swap need not check each.
    #[inline(always)]
    fn apply_burst(&mut self, burst: &mut [Box<Mbuf>], min_len: usize) {
        match self.work {
            Work::None => {}
            Work::Swap if min_len >= 12 => {
                for m in burst {
                    if let Some(h) = m.data.first_chunk_mut::<12>() {
                        swap_macs(h);
                    }
                }
            }
            Work::Swap => {
                for m in burst {
                    swap_macs_of(m);
                }
            }
            Work::Parse => {
                for m in burst {
                    match Frame::new_checked(m.frame()).and_then(|f| f.flow_tuple()) {
                        Ok(FlowTuple::V4 { ports, .. }) | Ok(FlowTuple::V6 { ports, .. }) => {
                            let (s, d) = ports.unwrap_or((0, 0));
                            self.acc = self.acc.wrapping_add(u64::from(s) ^ u64::from(d));
                        }
                        Err(_) => self.parse_errors += 1,
                    }
                }
            }
            Work::Delay(_) => {
                for _ in burst.iter() {
                    self.spin.delay_ticks(self.delay_ticks);
                }
            }
        }
    }
}

/// l2fwd's MAC swap on a buffer's frame: the 12 bytes are taken from the
/// buffer's fixed-size array (no slice of `len` to check against its
/// size), when the frame holds them.
#[inline(always)]
fn swap_macs_of(m: &mut Mbuf) {
    if usize::from(m.len) >= 12 {
        if let Some(h) = m.data.first_chunk_mut::<12>() {
            swap_macs(h);
        }
    }
}

/// What a loop is asked to do.
#[derive(Debug, Clone)]
pub struct LoopSpec {
    pub burst: usize,
    pub tx_bulk: usize,
    pub queues: usize,
    pub work: Work,
    pub packets: u64,
    pub ring_size: usize,
    pub pool_size: usize,
    pub drain_ticks: u64,
    pub cpus: Option<CpuList>,
    /// Idle iterations spent spinning before yielding (0 when
    /// oversubscribed).
    pub spin_limit: u32,
    /// What the I/O thread does when a queue's rx ring is full.
    pub rx_full: RxFull,
    /// Run to completion: read the TSC at every section border (the
    /// rx/work/tx split) or only around the whole burst (two reads per
    /// burst, as a plain C loop times itself).
    pub split: bool,
}

/// Full rx ring policy (pipeline mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RxFull {
    /// Wait for room (backpressure): the generator never outruns the
    /// workers, which keeps rates meaningful when threads share CPUs.
    Wait,
    /// Drop, as a NIC does when software does not keep up (imissed).
    Drop,
}

/// Counts of one queue.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct QueueCounts {
    pub generated: u64,
    pub transmitted: u64,
    pub dropped: u64,
}

impl QueueCounts {
    pub fn conserved(&self) -> bool {
        self.generated == self.transmitted + self.dropped
    }
}

/// Ticks per packet of every batch, per section; `total` only in
/// run-to-completion mode (where the sections are chained on one thread).
pub struct Timers {
    pub rx: Vec<f64>,
    pub work: Vec<f64>,
    pub tx: Vec<f64>,
    /// Tx completion at the I/O thread (pipeline mode; in run-to-completion
    /// mode recycling is part of `tx`).
    pub sink: Option<Vec<f64>>,
    pub total: Option<Vec<f64>>,
    /// The generator's writing of each frame (the NIC's DMA), timed apart
    /// in run-to-completion mode and not part of `total`.
    pub gen: Option<Vec<f64>>,
}

/// Per-packet ticks of each batch a timer recorded.
fn ticks_of(t: &SectionTimer) -> Vec<f64> {
    let k = commbench_core::clock::tsc().hz() / 1e9;
    t.per_op_ns().into_iter().map(|ns| ns * k).collect()
}

/// What a loop did.
pub struct Outcome {
    pub per_queue: Vec<QueueCounts>,
    /// From the first rx burst to the last packet back in the pool.
    pub wall_s: f64,
    pub timers: Timers,
    pub flushes_bulk: u64,
    pub flushes_drain: u64,
    pub flushes_final: u64,
    pub parse_errors: u64,
    /// Threads the loop kept busy.
    pub threads: usize,
    /// Folded parse results (kept so the work is not optimised away).
    pub checksum: u64,
}

fn timer(packets: u64) -> SectionTimer {
    let batches = (packets / u64::from(BATCH_PKTS) + 2).min(4_000_000) as usize;
    SectionTimer::new(BATCH_PKTS, batches)
}

/// A thread that parks when it has nothing to do, and the flag the threads
/// that feed it check after giving it work.
///
/// It replaced a timed 20 µs sleep, which ran the pipeline mode at one of
/// two speeds: once one thread slept (70 µs with the kernel's timer
/// slack), the other filled or emptied the ring and slept in turn, and the
/// pair stayed in that convoy. Two pinned spinning threads on this 2-vCPU
/// host gave 10–37 Mpps within one quick suite and 0.29× between two
/// (load ~0.7, the threads sleeping a quarter of the run, 2,300 voluntary
/// switches per 4 M packets); a thread parked here is woken by the push
/// that gives it work.
pub(crate) struct Sleeper {
    thread: std::sync::OnceLock<std::thread::Thread>,
    parked: AtomicBool,
}

/// The longest a parked thread waits without a wake-up: a push that lands
/// between its last look at the ring and its flag being seen costs at most
/// this (the producer does not pay a full fence per burst to rule it out).
const PARK_MAX: Duration = Duration::from_micros(100);

impl Sleeper {
    fn new() -> Self {
        Sleeper {
            thread: std::sync::OnceLock::new(),
            parked: AtomicBool::new(false),
        }
    }
    /// Called by the thread that will park on this sleeper, before it
    /// waits for the first time.
    fn register(&self) {
        let _ = self.thread.set(std::thread::current());
    }
    /// Called after giving the sleeper's thread work: one relaxed load
    /// while it is awake (the line stays shared in both caches).
    #[inline(always)]
    fn wake(&self) {
        if self.parked.load(Ordering::Relaxed) && self.parked.swap(false, Ordering::AcqRel) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }
    fn park(&self) {
        self.parked.store(true, Ordering::SeqCst);
        std::thread::park_timeout(PARK_MAX);
        self.parked.store(false, Ordering::Relaxed);
    }
}

/// Bounded idle waiting: spin a little (not at all when threads outnumber
/// CPUs), yield, then park until fed (at most [`PARK_MAX`]).
struct Backoff<'a> {
    n: u32,
    spin_limit: u32,
    sleeper: Option<&'a Sleeper>,
}

impl<'a> Backoff<'a> {
    fn new(spin_limit: u32, sleeper: Option<&'a Sleeper>) -> Self {
        if let Some(s) = sleeper {
            s.register();
        }
        Backoff {
            n: 0,
            spin_limit,
            sleeper,
        }
    }
    fn reset(&mut self) {
        self.n = 0;
    }
    fn idle(&mut self) {
        if self.n < self.spin_limit {
            std::hint::spin_loop();
        } else if self.n < self.spin_limit + 64 {
            std::thread::yield_now();
        } else if let Some(s) = self.sleeper {
            s.park();
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
        self.n = self.n.saturating_add(1);
    }
}

/// Batches section ticks until [`BATCH_PKTS`] packets, then records them.
struct Acc<const N: usize> {
    ticks: [u64; N],
    pkts: u32,
}

impl<const N: usize> Acc<N> {
    fn new() -> Self {
        Acc {
            ticks: [0; N],
            pkts: 0,
        }
    }
    /// Adds one burst; returns true when a batch is complete.
    #[inline(always)]
    fn add(&mut self, ticks: [u64; N], pkts: usize) -> bool {
        for (a, t) in self.ticks.iter_mut().zip(ticks) {
            *a += t;
        }
        self.pkts += pkts as u32;
        self.pkts >= BATCH_PKTS
    }
    fn take(&mut self) -> ([u64; N], u32) {
        let r = (self.ticks, self.pkts);
        *self = Acc::new();
        r
    }
}

/// Run to completion on the calling thread (pinned to the first CPU of
/// `spec.cpus` for the duration).
pub fn run_rtc(spec: &LoopSpec, mut gen: Generator, spin: SpinDelay) -> Outcome {
    let restore = spec.cpus.as_ref().map(|c| {
        let before = commbench_core::placement::current_affinity();
        let _ = CpuList::from_cpus(vec![c.cpus()[0]]).pin_current_thread();
        before
    });
    let q = spec.queues.max(1);
    let mut counts = vec![QueueCounts::default(); q];
    let mut txbufs: Vec<TxBuffer> = (0..q).map(|_| TxBuffer::new(spec.tx_bulk)).collect();
    let mut rx: Vec<Box<Mbuf>> = Vec::with_capacity(spec.burst);
    let mut worker = Worker::new(spec.work, spin);
    let (mut rx_t, mut work_t, mut tx_t, mut total_t) = (
        timer(spec.packets),
        timer(spec.packets),
        timer(spec.packets),
        timer(spec.packets),
    );
    let mut gen_t = timer(spec.packets);
    let mut acc = Acc::<4>::new();
    let mut sink = RtcSink {
        pool: Pool::new(spec.pool_size),
        transmitted: vec![0u64; q],
    };
    // The rx descriptor ring: buffers the NIC writes the next burst into,
    // refilled from the pool by the rx burst (as a PMD does).
    let mut ring: Vec<Box<Mbuf>> = Vec::with_capacity(spec.burst);
    sink.pool.get_bulk(spec.burst, &mut ring);
    gen.count_queues(q);
    let mut remaining = spec.packets;
    let start = Instant::now();
    let mut last_drain_check = rdtsc();
    // Reads are chained: the end of one burst's tx is the start of the
    // next burst's NIC section, so four reads time four sections.
    let mut t_prev = rdtsc();
    while remaining > 0 {
        let n = (spec.burst as u64).min(remaining).min(ring.len() as u64) as usize;
        // The NIC: the frames land in the ring's buffers (its DMA). Timed
        // apart as `gen`: on a real NIC the CPU does not pay for it.
        for m in ring[..n].iter_mut() {
            gen.fill(m);
        }
        let t0 = rdtsc();
        // rx burst: take the filled buffers (software RSS classifies them
        // here) and give the ring fresh buffers from the pool. Per-queue
        // counts are the NIC's (`gen.emitted`), or the software RSS's.
        rx.extend(ring.drain(..n));
        if gen.classifies() {
            for m in rx.iter_mut() {
                gen.classify(m);
            }
        }
        sink.pool.get_bulk(spec.burst - ring.len(), &mut ring);
        let got = rx.len();
        remaining -= got as u64;
        let t1 = if spec.split { rdtsc() } else { t0 };
        worker.apply_burst(&mut rx, usize::from(gen.frame_len()));
        let t2 = if spec.split { rdtsc() } else { t0 };
        if let [tb] = &mut txbufs[..] {
            // One queue: the burst moves into its buffer in runs.
            tb.buffer_all(&mut rx, t2, &mut |v| sink.send(v));
        } else {
            for m in rx.drain(..) {
                let qi = usize::from(m.queue);
                txbufs[qi].buffer(m, t2, &mut |v| sink.send(v));
            }
        }
        let t3 = rdtsc();
        if t3.wrapping_sub(last_drain_check) >= spec.drain_ticks {
            for tb in txbufs.iter_mut() {
                tb.drain_if_due(t3, spec.drain_ticks, &mut |v| sink.send(v));
            }
            last_drain_check = t3;
        }
        if acc.add([t0 - t_prev, t1 - t0, t2 - t1, t3 - t2], got) {
            let ([g, a, b, c], p) = acc.take();
            gen_t.record_batch_ticks(g, p);
            if spec.split {
                rx_t.record_batch_ticks(a, p);
                work_t.record_batch_ticks(b, p);
                tx_t.record_batch_ticks(c, p);
            }
            total_t.record_batch_ticks(a + b + c, p);
        }
        t_prev = t3;
        if got == 0 {
            break; // a pool too small for the config: stop, counts stay honest
        }
    }
    for tb in txbufs.iter_mut() {
        tb.flush(&mut |v| sink.send(v));
    }
    let wall_s = start.elapsed().as_secs_f64();
    for ((c, t), g) in counts.iter_mut().zip(&sink.transmitted).zip(&gen.emitted) {
        c.transmitted = *t;
        c.generated = *g;
    }
    if let Some(before) = restore {
        let _ = before.pin_current_thread();
    }
    Outcome {
        per_queue: counts,
        wall_s,
        timers: Timers {
            rx: ticks_of(&rx_t),
            work: ticks_of(&work_t),
            tx: ticks_of(&tx_t),
            sink: None,
            total: Some(ticks_of(&total_t)),
            gen: Some(ticks_of(&gen_t)),
        },
        flushes_bulk: txbufs.iter().map(|t| t.flushes_bulk).sum(),
        flushes_drain: txbufs.iter().map(|t| t.flushes_drain).sum(),
        flushes_final: txbufs.iter().map(|t| t.flushes_final).sum(),
        parse_errors: worker.parse_errors + gen.parse_errors,
        threads: 1,
        checksum: worker.acc,
    }
}

/// Run-to-completion tx: count the packet and put it back in the pool.
struct RtcSink {
    pool: Pool,
    transmitted: Vec<u64>,
}

impl RtcSink {
    /// `v` is one queue's tx buffer: every packet in it is on that queue.
    #[inline(always)]
    fn send(&mut self, v: &mut Vec<Box<Mbuf>>) {
        if let Some(m) = v.first() {
            debug_assert!(v.iter().all(|x| x.queue == m.queue));
            self.transmitted[usize::from(m.queue)] += v.len() as u64;
            self.pool.put_bulk(v);
        }
    }
}

/// Pushes every packet of `v` into a tx ring sized for the whole pool (so
/// it always fits; should it not, the thread waits for room rather than
/// losing a packet).
/// The I/O thread is woken after every push.
fn push_all(
    prod: &mut rtrb::Producer<Box<Mbuf>>,
    v: &mut Vec<Box<Mbuf>>,
    spin_limit: u32,
    io: &Sleeper,
) {
    let mut backoff = Backoff::new(spin_limit, None);
    while !v.is_empty() {
        let n = prod.slots().min(v.len());
        if n == 0 {
            io.wake();
            backoff.idle();
            continue;
        }
        if let Ok(chunk) = prod.write_chunk_uninit(n) {
            chunk.fill_from_iter(v.drain(..n));
        }
        io.wake();
    }
}

struct WorkerResult {
    work: SectionTimer,
    tx: SectionTimer,
    flushes: (u64, u64, u64),
    parse_errors: u64,
    acc: u64,
}

#[allow(clippy::too_many_arguments)]
fn worker_loop(
    spec: &LoopSpec,
    cpu: Option<usize>,
    mut rx: rtrb::Consumer<Box<Mbuf>>,
    mut tx: rtrb::Producer<Box<Mbuf>>,
    gen_done: &AtomicBool,
    workers_done: &AtomicUsize,
    spin: SpinDelay,
    me: &Sleeper,
    io: &Sleeper,
) -> WorkerResult {
    if let Some(c) = cpu {
        let _ = CpuList::from_cpus(vec![c]).pin_current_thread();
    }
    let mut worker = Worker::new(spec.work, spin);
    let mut txbuf = TxBuffer::new(spec.tx_bulk);
    let mut work_t = timer(spec.packets);
    let mut tx_t = timer(spec.packets);
    let mut acc = Acc::<2>::new();
    let mut burst: Vec<Box<Mbuf>> = Vec::with_capacity(spec.burst);
    let mut backoff = Backoff::new(spec.spin_limit, Some(me));
    let spin_limit = spec.spin_limit;
    let mut last_drain_check = rdtsc();
    loop {
        let n = rx.slots().min(spec.burst);
        if n > 0 {
            backoff.reset();
            let t0 = rdtsc();
            if let Ok(chunk) = rx.read_chunk(n) {
                burst.extend(chunk);
            }
            worker.apply_burst(&mut burst, 0);
            let t1 = rdtsc();
            let got = burst.len();
            for m in burst.drain(..) {
                txbuf.buffer(m, t1, &mut |v| push_all(&mut tx, v, spin_limit, io));
            }
            let t2 = rdtsc();
            if t2.wrapping_sub(last_drain_check) >= spec.drain_ticks {
                txbuf.drain_if_due(t2, spec.drain_ticks, &mut |v| {
                    push_all(&mut tx, v, spin_limit, io)
                });
                last_drain_check = t2;
            }
            if acc.add([t1 - t0, t2 - t1], got) {
                let ([a, b], p) = acc.take();
                work_t.record_batch_ticks(a, p);
                tx_t.record_batch_ticks(b, p);
            }
        } else {
            // Checked before the ring is looked at again: once the
            // generator is done, an empty ring stays empty.
            let done = gen_done.load(Ordering::Acquire);
            if done && rx.is_empty() {
                break;
            }
            let now = rdtsc();
            txbuf.drain_if_due(now, spec.drain_ticks, &mut |v| {
                push_all(&mut tx, v, spin_limit, io)
            });
            backoff.idle();
        }
    }
    txbuf.flush(&mut |v| push_all(&mut tx, v, spin_limit, io));
    workers_done.fetch_add(1, Ordering::AcqRel);
    io.wake();
    WorkerResult {
        work: work_t,
        tx: tx_t,
        flushes: (txbuf.flushes_bulk, txbuf.flushes_drain, txbuf.flushes_final),
        parse_errors: worker.parse_errors,
        acc: worker.acc,
    }
}

/// Pipeline: the calling thread spawns one I/O thread (generator = NIC rx,
/// and tx completion) and `queues` worker threads.
pub fn run_pipeline(spec: &LoopSpec, mut gen: Generator, spin: SpinDelay) -> Outcome {
    let q = spec.queues.max(1);
    let mut rx_prod = Vec::with_capacity(q);
    let mut rx_cons = Vec::with_capacity(q);
    let mut tx_prod = Vec::with_capacity(q);
    let mut tx_cons = Vec::with_capacity(q);
    for _ in 0..q {
        let (p, c) = rtrb::RingBuffer::<Box<Mbuf>>::new(spec.ring_size);
        rx_prod.push(p);
        rx_cons.push(c);
        let (p, c) = rtrb::RingBuffer::<Box<Mbuf>>::new(spec.pool_size);
        tx_prod.push(p);
        tx_cons.push(c);
    }
    let gen_done = AtomicBool::new(false);
    let workers_done = AtomicUsize::new(0);
    let io_sleeper = Sleeper::new();
    let worker_sleepers: Vec<Sleeper> = (0..q).map(|_| Sleeper::new()).collect();
    let cpu_of = |i: usize| spec.cpus.as_ref().map(|c| c.cpus()[i % c.cpus().len()]);
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(q);
        for (i, (rc, tp)) in rx_cons.into_iter().zip(tx_prod).enumerate() {
            let (gd, wd) = (&gen_done, &workers_done);
            let (me, io) = (&worker_sleepers[i], &io_sleeper);
            let cpu = cpu_of(i + 1);
            handles.push(s.spawn(move || worker_loop(spec, cpu, rc, tp, gd, wd, spin, me, io)));
        }
        let io = s.spawn(|| {
            if let Some(c) = cpu_of(0) {
                let _ = CpuList::from_cpus(vec![c]).pin_current_thread();
            }
            let r = io_loop(
                spec,
                &mut gen,
                rx_prod,
                tx_cons,
                (&gen_done, &workers_done),
                (&io_sleeper, &worker_sleepers),
            );
            (r, gen.parse_errors)
        });
        let ((per_queue, wall_s, rx_t, sink_t), gen_parse_errors) = match io.join() {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e),
        };
        let mut results = Vec::with_capacity(q);
        for h in handles {
            match h.join() {
                Ok(r) => results.push(r),
                Err(e) => std::panic::resume_unwind(e),
            }
        }
        // Medians per section over the batches of every worker.
        let work: Vec<f64> = results.iter().flat_map(|r| ticks_of(&r.work)).collect();
        let tx: Vec<f64> = results.iter().flat_map(|r| ticks_of(&r.tx)).collect();
        Outcome {
            per_queue,
            wall_s,
            timers: Timers {
                rx: ticks_of(&rx_t),
                work,
                tx,
                sink: Some(ticks_of(&sink_t)),
                total: None,
                gen: None,
            },
            flushes_bulk: results.iter().map(|r| r.flushes.0).sum(),
            flushes_drain: results.iter().map(|r| r.flushes.1).sum(),
            flushes_final: results.iter().map(|r| r.flushes.2).sum(),
            parse_errors: results.iter().map(|r| r.parse_errors).sum::<u64>() + gen_parse_errors,
            threads: 1 + q,
            checksum: results.iter().fold(0, |a, r| a ^ r.acc),
        }
    })
}

type IoResult = (Vec<QueueCounts>, f64, SectionTimer, SectionTimer);

fn io_loop(
    spec: &LoopSpec,
    gen: &mut Generator,
    mut rx_prod: Vec<rtrb::Producer<Box<Mbuf>>>,
    mut tx_cons: Vec<rtrb::Consumer<Box<Mbuf>>>,
    (gen_done, workers_done): (&AtomicBool, &AtomicUsize),
    (me, workers): (&Sleeper, &[Sleeper]),
) -> IoResult {
    let q = rx_prod.len();
    let mut pool = Pool::new(spec.pool_size);
    let mut counts = vec![QueueCounts::default(); q];
    let mut staged: Vec<Vec<Box<Mbuf>>> = (0..q).map(|_| Vec::with_capacity(spec.burst)).collect();
    let mut rx_t = timer(spec.packets);
    let mut sink_t = timer(spec.packets);
    let mut rx_acc = Acc::<1>::new();
    let mut sink_acc = Acc::<1>::new();
    let mut backoff = Backoff::new(spec.spin_limit, Some(me));
    let mut remaining = spec.packets;
    let start = Instant::now();
    loop {
        let mut progressed = false;
        // Tx completion: count and recycle what the workers sent.
        let t0 = rdtsc();
        let mut freed = 0usize;
        for (qi, c) in tx_cons.iter_mut().enumerate() {
            let n = c.slots();
            if n == 0 {
                continue;
            }
            if let Ok(chunk) = c.read_chunk(n) {
                for m in chunk {
                    pool.put(m);
                }
            }
            counts[qi].transmitted += n as u64;
            freed += n;
        }
        if freed > 0 {
            progressed = true;
            if sink_acc.add([rdtsc() - t0], freed) {
                let ([a], p) = sink_acc.take();
                sink_t.record_batch_ticks(a, p);
            }
        }
        // Packets of an earlier burst still waiting for room (backpressure).
        let mut pending = false;
        if spec.rx_full == RxFull::Wait {
            for ((st, p), w) in staged.iter_mut().zip(rx_prod.iter_mut()).zip(workers) {
                let fit = p.slots().min(st.len());
                if fit > 0 {
                    progressed = true;
                    if let Ok(chunk) = p.write_chunk_uninit(fit) {
                        chunk.fill_from_iter(st.drain(..fit));
                    }
                    w.wake();
                }
                pending |= !st.is_empty();
            }
        }
        if remaining > 0 && !pending {
            let n = (spec.burst as u64)
                .min(remaining)
                .min(pool.available() as u64) as usize;
            if n > 0 {
                progressed = true;
                let t0 = rdtsc();
                for _ in 0..n {
                    if let Some(mut m) = pool.get() {
                        gen.fill_and_classify(&mut m);
                        let qi = usize::from(m.queue);
                        counts[qi].generated += 1;
                        staged[qi].push(m);
                    }
                }
                for (qi, (st, p)) in staged.iter_mut().zip(rx_prod.iter_mut()).enumerate() {
                    if st.is_empty() {
                        continue;
                    }
                    let fit = p.slots().min(st.len());
                    if fit > 0 {
                        if let Ok(chunk) = p.write_chunk_uninit(fit) {
                            chunk.fill_from_iter(st.drain(..fit));
                        }
                        workers[qi].wake();
                    }
                    if spec.rx_full == RxFull::Drop {
                        // The queue's ring is full: the NIC drops (imissed).
                        counts[qi].dropped += st.len() as u64;
                        for m in st.drain(..) {
                            pool.put(m);
                        }
                    }
                }
                remaining -= n as u64;
                if rx_acc.add([rdtsc() - t0], n) {
                    let ([a], p) = rx_acc.take();
                    rx_t.record_batch_ticks(a, p);
                }
            }
        }
        if remaining == 0 && staged.iter().all(|s| s.is_empty()) {
            if !gen_done.load(Ordering::Relaxed) {
                gen_done.store(true, Ordering::Release);
                for w in workers {
                    w.wake();
                }
            }
            if workers_done.load(Ordering::Acquire) == q && tx_cons.iter().all(|c| c.is_empty()) {
                break;
            }
        }
        if progressed {
            backoff.reset();
        } else {
            backoff.idle();
        }
    }
    (counts, start.elapsed().as_secs_f64(), rx_t, sink_t)
}
