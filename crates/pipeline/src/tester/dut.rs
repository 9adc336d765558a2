//! Devices under test and the forwarder commbench brings as one.
//!
//! `l2fwd` is commbench's own forwarder (MAC swap, optionally a calibrated
//! TSC busy-wait per frame, optionally impairments for tests), instrumented
//! the seed's way: TSC reads around its rx, work and tx sections, summed
//! per packet, so the black-box figure can be checked against the white
//! box. `bridge` is a Linux bridge; `cmd:` a user's program between two
//! veths; `ifaces:` real interfaces.

use super::stamp;
use super::SpecError;
use crate::afpacket::PacketSocket;
use crate::netns::{self, interrupted, RxMethod, RxPath};
use crate::txpath;
use crate::wire::swap_macs;
use commbench_core::clock::rdtsc;
use commbench_core::delay::SpinDelay;
use serde::Serialize;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The forwarder's per-packet work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FwdWork {
    /// Swap source and destination MAC (l2fwd).
    Swap,
    /// Swap, then busy-wait this many ns on the TSC.
    Delay(u64),
}

impl FwdWork {
    pub fn name(&self) -> String {
        match self {
            FwdWork::Swap => "swap".to_owned(),
            FwdWork::Delay(ns) => format!("delay:{ns}"),
        }
    }
    pub fn delay_ns(&self) -> u64 {
        match self {
            FwdWork::Swap => 0,
            FwdWork::Delay(ns) => *ns,
        }
    }

    /// Parses `swap` or `delay:NS` (whole ns, at most [`MAX_DELAY_NS`]).
    pub fn parse(w: &str) -> Result<FwdWork, SpecError> {
        match w {
            "swap" => Ok(FwdWork::Swap),
            _ => match w.strip_prefix("delay:").and_then(|n| n.parse::<u64>().ok()) {
                Some(ns) if ns <= MAX_DELAY_NS => Ok(FwdWork::Delay(ns)),
                _ => Err(SpecError::Work(w.to_owned())),
            },
        }
    }
}

/// Longest injected delay per frame, ns.
pub const MAX_DELAY_NS: u64 = 1_000_000;

/// Deterministic impairments on the tester's stamped frames, counted in
/// arrival order from 1 (0 = off): every `drop`-th frame is dropped, every
/// `dup`-th (not dropped) is sent twice, every `swap`-th (not dropped) is
/// held back and sent after the next frame that goes out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Impair {
    pub drop: u64,
    pub dup: u64,
    pub swap: u64,
}

impl Impair {
    pub fn is_off(&self) -> bool {
        self.drop == 0 && self.dup == 0 && self.swap == 0
    }

    /// Parses `drop=N,dup=M,swap=K` (any subset).
    pub fn parse(s: &str) -> Result<Impair, SpecError> {
        let mut i = Impair::default();
        for part in s.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| SpecError::ImpairNotNameN(part.to_owned()))?;
            let n: u64 = v.parse().map_err(|_| SpecError::ImpairNotANumber {
                part: part.to_owned(),
                value: v.to_owned(),
            })?;
            match k {
                "drop" => i.drop = n,
                "dup" => i.dup = n,
                "swap" => i.swap = n,
                _ => return Err(SpecError::ImpairUnknown(k.to_owned())),
            }
        }
        Ok(i)
    }

    /// What the impairments do to a sequence of arrivals: the output
    /// order as indices into the input (a model the tests check the
    /// forwarder against).
    pub fn apply_model(&self, n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut held: Option<usize> = None;
        for i in 0..n {
            let k = i as u64 + 1;
            if self.drop > 0 && k.is_multiple_of(self.drop) {
                continue;
            }
            if self.swap > 0 && k.is_multiple_of(self.swap) && held.is_none() {
                held = Some(i);
                continue;
            }
            out.push(i);
            if self.dup > 0 && k.is_multiple_of(self.dup) {
                out.push(i);
            }
            if let Some(h) = held.take() {
                out.push(h);
            }
        }
        if let Some(h) = held {
            out.push(h);
        }
        out
    }
}

/// The forwarder's cumulative counters, readable while it runs.
#[derive(Debug, Default)]
pub struct FwdCounters {
    pub rx: AtomicU64,
    pub tx: AtomicU64,
    pub foreign: AtomicU64,
    pub dropped: AtomicU64,
    /// Frames the kernel dropped at the forwarder's receive ring (it was
    /// full): the device's own buffer overflowed. Read when it idles.
    pub rx_ring_drops: AtomicU64,
    /// TSC ticks in the rx section (ring read, copy out), work, tx (send).
    pub ticks_rx: AtomicU64,
    pub ticks_work: AtomicU64,
    pub ticks_tx: AtomicU64,
    /// Packets in the timed busy bursts (the denominators).
    pub timed: AtomicU64,
}

/// A snapshot of [`FwdCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct FwdSnapshot {
    pub rx: u64,
    pub tx: u64,
    pub foreign: u64,
    pub dropped: u64,
    pub rx_ring_drops: u64,
    pub ticks_rx: u64,
    pub ticks_work: u64,
    pub ticks_tx: u64,
    pub timed: u64,
}

impl FwdCounters {
    pub fn snapshot(&self) -> FwdSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        FwdSnapshot {
            rx: l(&self.rx),
            tx: l(&self.tx),
            foreign: l(&self.foreign),
            dropped: l(&self.dropped),
            rx_ring_drops: l(&self.rx_ring_drops),
            ticks_rx: l(&self.ticks_rx),
            ticks_work: l(&self.ticks_work),
            ticks_tx: l(&self.ticks_tx),
            timed: l(&self.timed),
        }
    }
}

impl FwdSnapshot {
    /// Counts since `earlier`.
    pub fn since(&self, e: &FwdSnapshot) -> FwdSnapshot {
        FwdSnapshot {
            rx: self.rx - e.rx,
            tx: self.tx - e.tx,
            foreign: self.foreign - e.foreign,
            dropped: self.dropped - e.dropped,
            rx_ring_drops: self.rx_ring_drops - e.rx_ring_drops,
            ticks_rx: self.ticks_rx - e.ticks_rx,
            ticks_work: self.ticks_work - e.ticks_work,
            ticks_tx: self.ticks_tx - e.ticks_tx,
            timed: self.timed - e.timed,
        }
    }
    /// (rx, work, tx) ticks per packet over the timed bursts.
    pub fn per_packet(&self) -> (f64, f64, f64) {
        if self.timed == 0 {
            return (f64::NAN, f64::NAN, f64::NAN);
        }
        let n = self.timed as f64;
        (
            self.ticks_rx as f64 / n,
            self.ticks_work as f64 / n,
            self.ticks_tx as f64 / n,
        )
    }
}

/// How the forwarder runs.
#[derive(Debug, Clone)]
pub struct FwdSpec {
    pub in_if: String,
    pub out_if: String,
    pub rx: RxMethod,
    pub burst: usize,
    pub work: FwdWork,
    pub impair: Impair,
    /// Blocks of the AF_PACKET receive ring (1 MiB each, handed over when
    /// full or after 1 ms): the forwarder's buffer.
    pub rx_blocks: usize,
}

/// Frames carrying the tester's or netns' magic, at its fixed offset or
/// in a replayed frame's trailer, or the tester's source MAC (a replayed
/// frame told by the identity table carries no stamp); the others are
/// not forwarded: the kernel's own chatter. The forwarder is the
/// tester's model of a device: it reads the stamp only to tell its
/// frames from that chatter and to impair a known subset.
fn marked(f: &[u8]) -> bool {
    has_magic(f) || from_tester(f)
}

fn has_magic(f: &[u8]) -> bool {
    f.get(stamp::STAMP_OFF..stamp::STAMP_OFF + 4) == Some(&stamp::MAGIC[..])
        || stamp::trailer_at(f).is_some()
}

/// A frame the impairments count: stamped, or unstamped from the tester
/// (a probe, with its own version byte, is neither).
fn tester_frame(f: &[u8]) -> bool {
    stamp::parse(f).is_ok() || stamp::parse_trailer(f).is_ok() || (from_tester(f) && !has_magic(f))
}

/// Sent by the tester's generator, by its MAC (the source as received,
/// the destination once l2fwd's swap has run).
fn from_tester(f: &[u8]) -> bool {
    let m = Some(&super::replay::SRC_MAC[..]);
    f.get(6..12) == m || f.get(..6) == m
}

/// The forwarder: receives on `in_if`, swaps MACs (and waits, and
/// impairs), sends on `out_if`, until `stop`, Ctrl-C, `deadline`, or (with
/// `idle`) that long without a frame. `ready` is set once its sockets are
/// open. Returns the receiver's drops and, on AF_XDP, the XDP mode.
pub fn l2fwd(
    spec: &FwdSpec,
    c: &FwdCounters,
    stop: &AtomicBool,
    ready: &AtomicBool,
    idle: Option<Duration>,
    deadline: Instant,
) -> io::Result<(u64, Option<&'static str>)> {
    let mut ring = RxPath::open_with(&spec.in_if, spec.rx, spec.rx_blocks)?;
    let mut out = txpath::open_socket(&spec.out_if)?;
    ready.store(true, Ordering::Release);
    let spin = SpinDelay::calibrate();
    let delay_ticks = commbench_core::clock::tsc().ns_to_ticks(spec.work.delay_ns() as f64);
    let burst = spec.burst.clamp(1, 1024);
    let mut stage: Vec<[u8; 2048]> = vec![[0u8; 2048]; burst];
    let mut lens: Vec<usize> = Vec::with_capacity(burst);
    let mut imp = ImpairState::default();
    let mut last = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) || interrupted() || Instant::now() > deadline {
            break;
        }
        let t0 = rdtsc();
        let mut got = 0u64;
        let mut foreign = 0u64;
        let mut err: Option<io::Error> = None;
        // Work and tx ticks of this ring read (flushes inside it).
        let mut wt = (0u64, 0u64);
        let n = ring.next(|f| {
            if !marked(f) {
                foreign += 1;
                return;
            }
            let l = f.len().min(2048);
            stage[lens.len()][..l].copy_from_slice(&f[..l]);
            lens.push(l);
            got += 1;
            if lens.len() >= burst {
                if let Err(e) = flush(
                    &mut out,
                    &mut stage,
                    &mut lens,
                    spec,
                    &spin,
                    delay_ticks,
                    &mut imp,
                    c,
                    &mut wt,
                ) {
                    err = Some(e);
                }
            }
        })?;
        if !lens.is_empty() {
            flush(
                &mut out,
                &mut stage,
                &mut lens,
                spec,
                &spin,
                delay_ticks,
                &mut imp,
                c,
                &mut wt,
            )?;
        }
        if let Some(e) = err {
            return Err(e);
        }
        if n > 0 {
            let total = rdtsc() - t0;
            c.rx.fetch_add(got, Ordering::Relaxed);
            c.foreign.fetch_add(foreign, Ordering::Relaxed);
            if got > 0 {
                c.ticks_rx
                    .fetch_add(total.saturating_sub(wt.0 + wt.1), Ordering::Relaxed);
                c.ticks_work.fetch_add(wt.0, Ordering::Relaxed);
                c.ticks_tx.fetch_add(wt.1, Ordering::Relaxed);
                c.timed.fetch_add(got, Ordering::Relaxed);
            }
            last = Instant::now();
            continue;
        }
        if imp.held.is_some() && last.elapsed() > HELD_MAX {
            // Nothing came after a held frame for a while: send it now.
            if let Some(h) = imp.held.take() {
                txpath::send_all(&mut out, &spec.out_if, &[&h[..]])?;
                c.tx.fetch_add(1, Ordering::Relaxed);
            }
        }
        if idle.is_some_and(|i| last.elapsed() > i) {
            break;
        }
        // Idle: a good time for the one syscall that reads the drops.
        c.rx_ring_drops.store(ring.drops()?, Ordering::Relaxed);
        ring.wait(2)?;
    }
    Ok((ring.drops()?, ring.xdp_mode()))
}

/// A frame held back for a swap goes out alone after this long without
/// another frame (the end of a trial).
const HELD_MAX: Duration = Duration::from_millis(50);

#[derive(Default)]
struct ImpairState {
    k: u64,
    held: Option<Vec<u8>>,
}

#[allow(clippy::too_many_arguments)] // the loop's state, spelled out
fn flush(
    out: &mut PacketSocket,
    stage: &mut [[u8; 2048]],
    lens: &mut Vec<usize>,
    spec: &FwdSpec,
    spin: &SpinDelay,
    delay_ticks: u64,
    imp: &mut ImpairState,
    c: &FwdCounters,
    wt: &mut (u64, u64),
) -> io::Result<()> {
    let t0 = rdtsc();
    for (b, &l) in stage.iter_mut().zip(lens.iter()) {
        swap_macs(&mut b[..l]);
        if delay_ticks > 0 {
            spin.delay_ticks(delay_ticks);
        }
    }
    let t1 = rdtsc();
    let sent = if spec.impair.is_off() {
        txpath::send_staged(out, &spec.out_if, &stage[..lens.len()], lens)?;
        lens.len() as u64
    } else {
        let (v, dropped) = impaired(stage, lens, &spec.impair, imp);
        c.dropped.fetch_add(dropped, Ordering::Relaxed);
        let refs: Vec<&[u8]> = v.iter().map(|f| f.as_slice()).collect();
        txpath::send_all(out, &spec.out_if, &refs)?;
        refs.len() as u64
    };
    let t2 = rdtsc();
    c.tx.fetch_add(sent, Ordering::Relaxed);
    wt.0 += t1 - t0;
    wt.1 += t2 - t1;
    lens.clear();
    Ok(())
}

/// The impairments on one flush (test mode: copies, allocates).
fn impaired(
    stage: &[[u8; 2048]],
    lens: &[usize],
    i: &Impair,
    st: &mut ImpairState,
) -> (Vec<Vec<u8>>, u64) {
    let mut out = Vec::with_capacity(lens.len() + 2);
    let mut dropped = 0;
    for (b, &l) in stage.iter().zip(lens) {
        let f = &b[..l];
        if !tester_frame(f) {
            out.push(f.to_vec());
            continue;
        }
        st.k += 1;
        let k = st.k;
        if i.drop > 0 && k.is_multiple_of(i.drop) {
            dropped += 1;
            continue;
        }
        if i.swap > 0 && k.is_multiple_of(i.swap) && st.held.is_none() {
            st.held = Some(f.to_vec());
            continue;
        }
        out.push(f.to_vec());
        if i.dup > 0 && k.is_multiple_of(i.dup) {
            out.push(f.to_vec());
        }
        if let Some(h) = st.held.take() {
            out.push(h);
        }
    }
    (out, dropped)
}

/// A device under test, as given on the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum DutSpec {
    /// No device: the generator's veth is the sink's (the loopback path).
    None,
    L2fwd {
        work: FwdWork,
        rx: RxMethod,
        burst: usize,
        impair: Impair,
        /// Blocks of its AF_PACKET receive ring: its buffer.
        rx_blocks: usize,
    },
    Bridge,
    /// The kernel's IP router in the device's namespace: IPv4 and IPv6
    /// forwarding, one default route each out of its second link to the
    /// sink, reverse-path filtering off. It rewrites the MACs, lowers the
    /// TTL and trims each frame to its IP length (so a replayed capture
    /// is told by the identity table, [`super::identity`]); what it does
    /// not route (multicast, broadcast, link-local, non-IP, TTL 1) it
    /// drops, and the per-protocol counts show it.
    Router,
    /// A program started with `sh -c` in the device's namespace, with
    /// `CB_IN_IF`, `CB_OUT_IF` and `CB_NETNS` in its environment.
    Cmd(String),
    /// Real interfaces: the generator sends on the first, the sink
    /// receives on the second (both in the current namespace).
    Ifaces(String, String),
}

impl DutSpec {
    pub fn name(&self) -> String {
        match self {
            DutSpec::None => "none".to_owned(),
            DutSpec::L2fwd {
                work, rx_blocks, ..
            } if *rx_blocks != netns::RX_BLOCKS => {
                format!("l2fwd:{},blocks={rx_blocks}", work.name())
            }
            DutSpec::L2fwd { work, .. } => format!("l2fwd:{}", work.name()),
            DutSpec::Bridge => "bridge".to_owned(),
            DutSpec::Router => "router".to_owned(),
            DutSpec::Cmd(c) => format!("cmd:{c}"),
            DutSpec::Ifaces(a, b) => format!("ifaces:{a},{b}"),
        }
    }

    /// Parses `none`, `l2fwd[:OPTS]`, `bridge`, `router`, `cmd:PROGRAM ARGS`,
    /// `ifaces:IF1,IF2`. l2fwd options, comma separated: `work=swap`,
    /// `work=delay:NS` (or just `delay:NS`), `rx=af-packet|af-xdp`,
    /// `burst=N`, `drop=N`, `dup=N`, `swap=N`.
    pub fn parse(s: &str) -> Result<DutSpec, SpecError> {
        let (kind, rest) = match s.split_once(':') {
            Some((k, r)) => (k, Some(r)),
            None => (s, None),
        };
        match (kind, rest) {
            ("none" | "loopback", None) => Ok(DutSpec::None),
            ("bridge", None) => Ok(DutSpec::Bridge),
            ("router", None) => Ok(DutSpec::Router),
            ("cmd", Some(c)) if !c.trim().is_empty() => Ok(DutSpec::Cmd(c.to_owned())),
            ("cmd", _) => Err(SpecError::CmdNoProgram),
            ("ifaces", Some(r)) => match r.split_once(',') {
                Some((a, b)) if !a.is_empty() && !b.is_empty() && a.len() < 16 && b.len() < 16 => {
                    Ok(DutSpec::Ifaces(a.to_owned(), b.to_owned()))
                }
                _ => Err(SpecError::Ifaces(r.to_owned())),
            },
            ("l2fwd", opts) => {
                let mut work = FwdWork::Swap;
                let mut rx = RxMethod::AfPacket;
                let mut burst = 32usize;
                let mut impair = Impair::default();
                let mut rx_blocks = netns::RX_BLOCKS;
                let opts = opts.unwrap_or("");
                for o in opts.split(',').filter(|o| !o.is_empty()) {
                    let o = o.strip_prefix("work=").unwrap_or(o);
                    if o == "swap" {
                        work = FwdWork::Swap;
                    } else if let Some(ns) = o.strip_prefix("delay:") {
                        let ns: u64 = ns
                            .parse()
                            .map_err(|_| SpecError::DelayNotWhole(ns.to_owned()))?;
                        if ns > MAX_DELAY_NS {
                            return Err(SpecError::DelayRange(ns));
                        }
                        work = FwdWork::Delay(ns);
                    } else if let Some(r) = o.strip_prefix("rx=") {
                        rx = match r {
                            "af-packet" => RxMethod::AfPacket,
                            "af-xdp" => RxMethod::AfXdp,
                            _ => return Err(SpecError::FwdRx(r.to_owned())),
                        };
                    } else if let Some(b) = o.strip_prefix("burst=") {
                        burst = b
                            .parse()
                            .ok()
                            .filter(|b| (1..=1024).contains(b))
                            .ok_or_else(|| SpecError::FwdBurst(b.to_owned()))?;
                    } else if let Some(b) = o.strip_prefix("blocks=") {
                        rx_blocks = b
                            .parse()
                            .ok()
                            .filter(|b| (2..=netns::RX_BLOCKS_MAX).contains(b))
                            .ok_or_else(|| SpecError::FwdBlocks(b.to_owned()))?;
                    } else if o.starts_with("drop=")
                        || o.starts_with("dup=")
                        || o.starts_with("swap=")
                    {
                        let i = Impair::parse(o)?;
                        impair.drop = impair.drop.max(i.drop);
                        impair.dup = impair.dup.max(i.dup);
                        impair.swap = impair.swap.max(i.swap);
                    } else {
                        return Err(SpecError::FwdOption(o.to_owned()));
                    }
                }
                Ok(DutSpec::L2fwd {
                    work,
                    rx,
                    burst,
                    impair,
                    rx_blocks,
                })
            }
            _ => Err(SpecError::NotADevice(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dut_specs_parse_and_say_what_is_wrong() {
        assert_eq!(DutSpec::parse("bridge"), Ok(DutSpec::Bridge));
        assert_eq!(DutSpec::parse("none"), Ok(DutSpec::None));
        match DutSpec::parse("l2fwd:delay:100").unwrap() {
            DutSpec::L2fwd { work, .. } => assert_eq!(work, FwdWork::Delay(100)),
            d => panic!("{d:?}"),
        }
        match DutSpec::parse("l2fwd:delay:100,blocks=256").unwrap() {
            d @ DutSpec::L2fwd { rx_blocks: 256, .. } => {
                assert_eq!(d.name(), "l2fwd:delay:100,blocks=256")
            }
            d => panic!("{d:?}"),
        }
        assert!(DutSpec::parse("l2fwd:blocks=1").is_err());
        assert!(DutSpec::parse("l2fwd:blocks=100000").is_err());
        match DutSpec::parse("l2fwd:work=swap,rx=af-xdp,drop=10,dup=3").unwrap() {
            DutSpec::L2fwd {
                work, rx, impair, ..
            } => {
                assert_eq!(work, FwdWork::Swap);
                assert_eq!(rx, RxMethod::AfXdp);
                assert_eq!(
                    impair,
                    Impair {
                        drop: 10,
                        dup: 3,
                        swap: 0
                    }
                );
            }
            d => panic!("{d:?}"),
        }
        assert_eq!(
            DutSpec::parse("cmd:my-fwd -x"),
            Ok(DutSpec::Cmd("my-fwd -x".into()))
        );
        assert_eq!(
            DutSpec::parse("ifaces:eth1,eth2"),
            Ok(DutSpec::Ifaces("eth1".into(), "eth2".into()))
        );
        assert!(DutSpec::parse("ifaces:eth1")
            .unwrap_err()
            .to_string()
            .contains("IF1,IF2"));
        assert!(DutSpec::parse("cmd:")
            .unwrap_err()
            .to_string()
            .contains("needs a program"));
        assert!(DutSpec::parse("l2fwd:delay:x")
            .unwrap_err()
            .to_string()
            .contains("whole nanoseconds"));
        assert!(DutSpec::parse("l2fwd:fast")
            .unwrap_err()
            .to_string()
            .contains("option 'fast'"));
        assert_eq!(DutSpec::parse("router"), Ok(DutSpec::Router));
        assert!(DutSpec::parse("switch")
            .unwrap_err()
            .to_string()
            .contains("not a device"));
    }

    #[test]
    fn the_impairment_model_drops_duplicates_and_swaps() {
        let i = Impair {
            drop: 4,
            dup: 3,
            swap: 5,
        };
        // 1 2 3 [4 dropped] 5(held) 6 → 6 5; 3 duplicated, 6 duplicated.
        let v = i.apply_model(7);
        assert_eq!(v, vec![0, 1, 2, 2, 5, 5, 4, 6]);
    }
}
