//! The generator: a template per (flow, size) staged a burst at a time,
//! paced on the TSC against an absolute schedule (caught up in one send
//! when behind), stamped just before each send, real-time in spans when
//! it has a CPU of its own.

use super::identity::IdSlots;
use super::pace::{RtSpans, Schedule};
use super::replay::Traffic;
use super::{pace, stamp, TrialSpec, PROBE_PATIENCE, PROBE_VERSION};
use crate::netns::{self, interrupted, realtime_ns};
use crate::txpath::{self, TxPath};
use crate::wire::{FlowRepr, FCS, PROTO_UDP};
use commbench_core::clock::{rdtsc, tsc};
use commbench_core::delay::{spin_until, GuardBounds, WakeGuard};
use commbench_core::rusage::Usage;
use commbench_core::stats::LatencyHistogram;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the generator did.
#[derive(Debug, Clone)]
pub struct GenOut {
    pub sent: Vec<u64>,
    /// Bytes of the frames sent, without FCS (a replayed frame's with its
    /// stamp trailer).
    pub bytes: u64,
    pub lag: LatencyHistogram,
    pub last_lag_ns: u64,
    /// From the first departure's due time to one gap after the last one's.
    pub span_s: f64,
    pub cpu_s: f64,
    pub wall_s: f64,
    /// Time the generator's thread was runnable but not running (its
    /// run-queue delay, `/proc/thread-self/schedstat`), ms; None without
    /// schedstats.
    pub wait_ms: Option<f64>,
    /// Times the generator's thread was preempted (involuntary context
    /// switches).
    pub preempted: u64,
    pub probes: u64,
    pub stopped_early: bool,
    /// How the generator was scheduled while it paced, in words.
    pub sched: String,
}

/// The frames of each (flow, size): Ethernet + IPv4 + UDP, zero payload.
fn templates(flows: u16, sizes: &[u32]) -> Vec<Vec<Vec<u8>>> {
    (0..flows)
        .map(|f| {
            sizes
                .iter()
                .map(|&s| {
                    let len = s as usize - FCS;
                    let mut b = vec![0u8; len];
                    let r = FlowRepr {
                        src_mac: [0x02, 0xcb, 0, 0, 0, 1],
                        dst_mac: [0x02, 0xcb, 0, 0, 0, 2],
                        tuple: crate::gen::flow_tuple(usize::from(f), false),
                        proto: PROTO_UDP,
                    };
                    let _ = r.emit(&mut b, len);
                    b
                })
                .collect()
        })
        .collect()
}

/// The generator's frames: a template per (flow, size), staged a burst at
/// a time with each frame's flow id and sequence number (flows round
/// robin, sizes in the pattern's order), and stamped just before they go.
pub(super) struct Stager {
    tmpl: Vec<Vec<Vec<u8>>>,
    /// The sizes' pattern as indices into each flow's templates.
    pattern: Vec<usize>,
    pub(super) stage: Vec<[u8; 2048]>,
    pub(super) lens: Vec<usize>,
    /// Next sequence number per flow: after the run, frames sent per flow.
    seq: Vec<u64>,
    flow_rr: usize,
    size_i: usize,
    flow_base: u16,
    /// Bytes staged (every staged frame is sent, or the run fails).
    bytes: u64,
    /// A capture replayed instead of the templates: the next frame's
    /// index in its offer, and where each staged frame's trailer starts
    /// (with the identity table: its index in the offer).
    replay: Option<(Arc<Traffic>, u64, Vec<usize>)>,
    /// The identity table's departures, when the frames carry no stamp.
    departures: Option<Arc<IdSlots>>,
}

impl Stager {
    pub(super) fn new(
        spec: &TrialSpec,
        flow_base: u16,
        departures: Option<Arc<IdSlots>>,
    ) -> Stager {
        let distinct = spec.sizes.distinct();
        let burst = spec.burst as usize;
        Stager {
            tmpl: templates(spec.flows, &distinct),
            pattern: spec
                .sizes
                .pattern
                .iter()
                // A capture's sizes (`--sizes-from`) make a pattern of up
                // to 2,000,000 sizes over up to ~1,450 distinct ones.
                .map(|s| distinct.binary_search(s).unwrap_or(0))
                .collect(),
            stage: vec![[0u8; 2048]; burst.max(CATCH_UP)],
            lens: vec![0usize; burst.max(CATCH_UP)],
            seq: vec![0u64; usize::from(spec.flows)],
            flow_rr: 0,
            size_i: 0,
            flow_base,
            bytes: 0,
            replay: spec
                .traffic
                .clone()
                .map(|t| (t, 0, vec![0usize; burst.max(CATCH_UP)])),
            departures,
        }
    }

    /// Stages the next `n` frames in the first slots.
    pub(super) fn fill(&mut self, n: usize) {
        self.fill_at(0, n);
    }

    /// Stages the next `n` frames from slot `at` on (`at + n` at most the
    /// slots: a burst, or [`CATCH_UP`] frames if more).
    fn fill_at(&mut self, at: usize, n: usize) {
        if let Some((t, next, trailer)) = &mut self.replay {
            let slots = self.stage[at..at + n]
                .iter_mut()
                .zip(&mut self.lens[at..at + n])
                .zip(&mut trailer[at..at + n]);
            for ((buf, len), tr) in slots {
                if self.departures.is_some() {
                    // Sent from the capture itself ([`Self::send`]): the
                    // frame as captured needs no copy into `buf`.
                    *len = t.count_bare(*next, &mut self.seq);
                    *tr = *next as usize;
                } else {
                    (*len, *tr) = t.stage(*next, buf, self.flow_base, &mut self.seq);
                }
                self.bytes += *len as u64;
                *next += 1;
            }
            return;
        }
        let flows = self.seq.len();
        for i in at..at + n {
            let f = self.flow_rr;
            self.flow_rr = if f + 1 == flows { 0 } else { f + 1 };
            let src = &self.tmpl[f][self.pattern[self.size_i]];
            self.size_i = if self.size_i + 1 == self.pattern.len() {
                0
            } else {
                self.size_i + 1
            };
            self.stage[i][..src.len()].copy_from_slice(src);
            self.lens[i] = src.len();
            self.bytes += src.len() as u64;
            stamp::write_id(&mut self.stage[i], self.flow_base + f as u16, self.seq[f]);
            self.seq[f] += 1;
        }
    }

    /// Stages the `k`-th probe frame (the first flow's, sequence 0, the
    /// probe version) alone.
    fn probe(&mut self, k: u64) {
        if let Some((t, _, _)) = &self.replay {
            // The offer's first frame, with a probe trailer. With the
            // identity table the capture's other frames in turn, bare: the
            // sink takes any of them before the first departure for a
            // probe, a router may not route the first (ARP, multicast),
            // and a probe the device held back past the first departure
            // is still not that frame.
            let bare = self.departures.is_some();
            let len = t.len() as u64;
            let i = match (bare, len) {
                (false, _) | (true, 1) => 0,
                (true, _) => 1 + k % (len - 1),
            };
            let (b, s, class) = t.frame(i);
            let l = b.len();
            if bare {
                // Sent from the capture, as the trial's frames are.
                if let Some((_, _, index)) = &mut self.replay {
                    index[0] = i as usize;
                }
                self.lens[0] = l;
                return;
            }
            self.stage[0][..l].copy_from_slice(b);
            stamp::write_trailer(
                &mut self.stage[0],
                l,
                self.flow_base + u16::from(s),
                0,
                class,
            );
            self.stage[0][l + 4] = PROBE_VERSION;
            self.lens[0] = l + stamp::TRAILER_LEN;
            return;
        }
        let l = self.tmpl[0][0].len();
        self.stage[0][..l].copy_from_slice(&self.tmpl[0][0]);
        stamp::write_id(&mut self.stage[0], self.flow_base, 0);
        self.stage[0][stamp::STAMP_OFF + 4] = PROBE_VERSION;
        self.lens[0] = l;
    }

    /// Stamps the first `n` staged frames with their departure time.
    fn stamp(&mut self, n: usize, ts: u64) {
        if let (Some((_, _, index)), Some(d)) = (&self.replay, &self.departures) {
            for &i in index.iter().take(n) {
                d.depart(i as u64, ts);
            }
            if let Some(&last) = index[..n].last() {
                d.stamped_up_to(last as u64 + 1);
            }
            return;
        }
        if let Some((_, _, trailer)) = &self.replay {
            for (b, &at) in self.stage.iter_mut().zip(trailer.iter()).take(n) {
                stamp::write_ts_at(b, at, ts);
            }
            return;
        }
        for b in self.stage.iter_mut().take(n) {
            stamp::write_ts(b, ts);
        }
    }

    /// Sends the first `n` staged frames; told by the identity table, a
    /// replayed frame goes from the capture's own bytes, with no copy in
    /// between (the kernel copies it once, as from a staged buffer).
    fn send(&self, tx: &mut dyn TxPath, iface: &str, n: usize) -> io::Result<()> {
        if let (Some((t, _, index)), Some(_)) = (&self.replay, &self.departures) {
            for chunk in index[..n].chunks(txpath::BATCH) {
                let mut refs: [&[u8]; txpath::BATCH] = [&[]; txpath::BATCH];
                for (r, &i) in refs.iter_mut().zip(chunk) {
                    *r = t.frame(i as u64).0;
                }
                txpath::send_all(tx, iface, &refs[..chunk.len()])?;
            }
            return Ok(());
        }
        txpath::send_staged(tx, iface, &self.stage[..n], &self.lens[..n])
    }
}

/// Probes the path until a frame comes back (the device and the sink are
/// ready), every 5 ms for at most [`PROBE_PATIENCE`]; returns the probes
/// sent. Ctrl-C ends the probing without an error (the trial stops early);
/// a sink that failed ends it with an error (the sink's is the one
/// reported).
fn probe_path(
    tx: &mut dyn TxPath,
    iface: &str,
    st: &mut Stager,
    probe_seen: &AtomicBool,
    sink_failed: &AtomicBool,
) -> io::Result<u64> {
    let mut probes = 0u64;
    let t_probe = Instant::now();
    while !probe_seen.load(Ordering::Acquire) {
        if interrupted() {
            break;
        }
        if sink_failed.load(Ordering::Acquire) {
            return Err(io::Error::other("the sink failed before a probe came"));
        }
        if t_probe.elapsed() > PROBE_PATIENCE {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no probe frame came through the device in {} s: is it forwarding from the generator's link to the sink's?{}",
                    PROBE_PATIENCE.as_secs(),
                    match (&st.replay, &st.departures) {
                        (Some(_), None) => " A replayed frame carries the tester's stamp past its IP datagram: a device that trims frames to their IP length (a router, a bridge calling iptables) removes it; --stamp table tells the frames by their own bytes",
                        (Some(_), Some(_)) => " With --stamp table the frames are told by their L3/L4 bytes: a device that rewrites them (NAT) or does not route the capture's first frame never sends one back",
                        _ => "",
                    }
                ),
            ));
        }
        st.probe(probes);
        st.send(tx, iface, 1)?;
        probes += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    // Let the probes in flight land before the trial.
    std::thread::sleep(Duration::from_millis(20));
    tx.finish(Duration::from_millis(100));
    Ok(probes)
}

/// The paced generator's clock: sleeps until a guard before each
/// departure, then busy-waits on the TSC; records how late each departure
/// left (the lag).
pub(super) struct Pacer {
    sched: Schedule,
    /// Follows how late this host's timer wakes (the worst of the last 32
    /// sleeps plus 2 µs), at most --spin-us.
    guard: WakeGuard,
    pub(super) lag: LatencyHistogram,
    pub(super) last_lag: u64,
}

impl Pacer {
    pub(super) fn new(spec: &TrialSpec, hz: f64) -> Pacer {
        Pacer {
            sched: Schedule::new(spec.arrivals, spec.pps(), spec.burst, hz, spec.seed),
            guard: WakeGuard::new(
                hz / 1e9,
                GuardBounds {
                    initial_ns: (spec.spin_ns as f64).min(pace::SPIN_INITIAL_NS),
                    margin_ns: 2_000.0,
                    min_ns: 5_000.0_f64.min(spec.spin_ns as f64),
                    max_ns: spec.spin_ns as f64,
                },
            ),
            lag: LatencyHistogram::new(),
            last_lag: 0,
        }
    }

    /// Whether the next departure of the schedule that starts at TSC
    /// `start` is already due at `now`.
    #[inline]
    fn next_is_due(&self, start: u64, now: u64) -> bool {
        start + self.sched.peek_offset() <= now
    }

    /// Takes the next departure, already due at `now`, recording its lag.
    #[inline]
    pub(super) fn take_due(&mut self, start: u64, now: u64) {
        let due = start + self.sched.next_offset();
        let l = tsc().ticks_to_ns(now.saturating_sub(due)) as u64;
        self.lag.record_ns(l);
        self.last_lag = l;
    }

    /// Waits for the next departure of the schedule that starts at TSC
    /// `start`: sleeps while far, busy-waits the rest.
    fn wait_next(&mut self, start: u64) {
        let t = tsc();
        let due = start + self.sched.next_offset();
        loop {
            let now = rdtsc();
            if now + self.guard.ticks() >= due {
                break;
            }
            let wake = due - self.guard.ticks();
            std::thread::sleep(Duration::from_nanos(t.ticks_to_ns(wake - now) as u64));
            self.guard.record(rdtsc().saturating_sub(wake));
        }
        spin_until(due);
        let l = t.ticks_to_ns(rdtsc().saturating_sub(due)) as u64;
        self.lag.record_ns(l);
        self.last_lag = l;
    }
}

/// The generator's scheduling policy over its paced run: real-time in
/// the spans of [`RtSpans`] when asked and allowed, normal otherwise, and
/// normal again when dropped (whatever path leaves the run).
struct GenSched {
    spans: Option<RtSpans>,
    /// Whether the thread is real-time now.
    on: bool,
    /// In words, for the records.
    what: String,
}

impl GenSched {
    /// Tries real-time for the first span when `realtime`; says why not
    /// when the kernel refuses.
    fn start(realtime: bool, hz: f64) -> GenSched {
        if !realtime {
            return GenSched {
                spans: None,
                on: false,
                what: "normal".to_owned(),
            };
        }
        let ticks = |d: Duration| (d.as_secs_f64() * hz) as u64;
        match commbench_core::sys::set_fifo_priority(GEN_PRIORITY) {
            Ok(()) => GenSched {
                spans: Some(RtSpans::new(ticks(pace::RT_ON), ticks(pace::RT_OFF))),
                on: true,
                what: format!(
                    "fifo {GEN_PRIORITY} ({} ms of each {} ms)",
                    pace::RT_ON.as_millis(),
                    (pace::RT_ON + pace::RT_OFF).as_millis()
                ),
            },
            Err(e) => GenSched {
                spans: None,
                on: false,
                what: format!("normal (real-time refused: {e})"),
            },
        }
    }

    /// Steps up or down at a span's edge, `elapsed` ticks into the run.
    #[inline]
    fn at(&mut self, elapsed: u64) {
        if let Some(s) = self.spans {
            let want = s.realtime_at(elapsed);
            if want != self.on {
                let r = if want {
                    commbench_core::sys::set_fifo_priority(GEN_PRIORITY)
                } else {
                    commbench_core::sys::set_normal_priority()
                };
                if r.is_ok() {
                    self.on = want;
                }
            }
        }
    }
}

impl Drop for GenSched {
    fn drop(&mut self) {
        if self.on {
            let _ = commbench_core::sys::set_normal_priority();
        }
    }
}

/// Behind schedule (the thread was held up), stages the bursts that are
/// already due after the `n` frames staged, up to [`CATCH_UP`] frames
/// (or a burst) and `left` frames in all, so what is overdue goes in one
/// send and not a system call per burst; returns the frames staged.
pub(super) fn catch_up(
    pacer: &mut Pacer,
    st: &mut Stager,
    start: u64,
    mut n: usize,
    left: u64,
    burst: usize,
) -> usize {
    loop {
        let rest = left.saturating_sub(n as u64) as usize;
        let now = rdtsc();
        if rest == 0 || n + burst > st.stage.len() || !pacer.next_is_due(start, now) {
            return n;
        }
        let m = rest.min(burst);
        st.fill_at(n, m);
        pacer.take_due(start, now);
        n += m;
    }
}

/// Frames at most that a generator behind its schedule sends in one
/// system call to catch up: [`txpath::BATCH`], one `sendmmsg`. A frame
/// alone costs ~2.5 µs of the generator's CPU on a two-vCPU VM (its own
/// send and the softirq that hands it to the device's CPU), so after a
/// pause of S at 150 kpps, caught up a burst at a time, bursts stayed
/// late for about 1.6 S.
pub const CATCH_UP: usize = txpath::BATCH;

/// The paced generator's SCHED_FIFO priority: below the stall monitor's
/// ([`commbench_core::stall::MONITOR_PRIORITY`]), which must wake on time
/// beside it.
pub const GEN_PRIORITY: i32 = 1;

/// The generator of a trial: probes the path, then offers `frames` frames
/// on the schedule (or back to back), stamping each burst just before it
/// goes; sends by the retry policy of [`crate::txpath`]. Paced and
/// `realtime`, it runs SCHED_FIFO in the spans of [`GenSched`].
#[allow(clippy::too_many_arguments)] // one role, its plumbing spelled out
pub(super) fn gen_run(
    iface: &str,
    spec: &TrialSpec,
    frames: u64,
    flow_base: u16,
    epoch: u64,
    (probe_seen, sink_failed): (&AtomicBool, &AtomicBool),
    deadline: Instant,
    realtime: bool,
    departures: Option<Arc<IdSlots>>,
) -> io::Result<GenOut> {
    // Nanosleep's slack: 1 ns instead of 50 µs (this thread only).
    commbench_core::sys::set_timer_slack_ns(1);
    netns::wait_link_up(iface, Duration::from_secs(2))?;
    let mut st = Stager::new(spec, flow_base, departures);
    let mut tx = txpath::open(iface, spec.tx, &st.tmpl[0][0], 1024)?;
    let probes = probe_path(tx.as_mut(), iface, &mut st, probe_seen, sink_failed)?;
    let t = tsc();
    let mut pacer = Pacer::new(spec, t.hz());
    let cpu0 = Usage::thread();
    let sched0 = commbench_core::sched::this_thread();
    let wall0 = Instant::now();
    // Paced: the schedule starts 1 ms ahead; back to back: now.
    let start = rdtsc() + if spec.unpaced { 0 } else { t.ns_to_ticks(1e6) };
    let burst = spec.burst as usize;
    let mut sent = 0u64;
    let mut stopped_early = false;
    let mut sched = GenSched::start(realtime && !spec.unpaced, t.hz());
    while sent < frames {
        if interrupted() || Instant::now() > deadline {
            stopped_early = true;
            break;
        }
        let mut n = ((frames - sent) as usize).min(burst);
        st.fill(n);
        if !spec.unpaced {
            sched.at(rdtsc().saturating_sub(start));
            pacer.wait_next(start);
            n = catch_up(&mut pacer, &mut st, start, n, frames - sent, burst);
        }
        st.stamp(n, realtime_ns().saturating_sub(epoch));
        st.send(tx.as_mut(), iface, n)?;
        sent += n as u64;
    }
    let end = rdtsc();
    let sched_what = std::mem::take(&mut sched.what);
    drop(sched);
    let cpu = Usage::thread().since(&cpu0);
    let wait_ms = sched0
        .zip(commbench_core::sched::this_thread())
        .map(|(a, b)| b.wait_ns.saturating_sub(a.wait_ns) as f64 / 1e6);
    let unsent = tx.finish(Duration::from_secs(1));
    if unsent > 0 {
        return Err(io::Error::other(tx.unsent(unsent)));
    }
    Ok(GenOut {
        sent: st.seq,
        bytes: st.bytes,
        lag: pacer.lag,
        last_lag_ns: pacer.last_lag,
        span_s: span_s(spec, start, end),
        cpu_s: cpu.cpu_s(),
        wall_s: wall0.elapsed().as_secs_f64(),
        wait_ms,
        preempted: cpu.involuntary_ctx,
        probes,
        stopped_early,
        sched: sched_what,
    })
}

/// The generator's span: the due time of the first burst to one mean gap
/// after the last departure (so a run exactly on schedule spans frames /
/// rate); back to back, first send to last.
fn span_s(spec: &TrialSpec, start: u64, end: u64) -> f64 {
    let t = tsc();
    let gap_ticks = if spec.unpaced {
        0.0
    } else {
        t.hz() * f64::from(spec.burst) / spec.pps()
    };
    (t.ticks_to_ns(end.saturating_sub(start)) + gap_ticks * 1e9 / t.hz()) / 1e9
}
