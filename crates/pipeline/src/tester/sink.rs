//! The sink: counts every frame that comes back with its kernel receive
//! time until the drain after the generator's last departure.

use super::account::{self, SinkAccount};
use super::identity::{IdResolver, IdSlots};
use super::{stamp, TrialSpec};
use crate::netns::{interrupted, realtime_ns, RxMethod, RxPath};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[allow(clippy::too_many_arguments)] // one role, its plumbing spelled out
pub(super) fn sink_run(
    iface: &str,
    spec: &TrialSpec,
    cap: &[u64],
    flow_base: u16,
    epoch: u64,
    probe_seen: &AtomicBool,
    gen_done_at: &AtomicU64,
    deadline: Instant,
    departures: Option<&Arc<IdSlots>>,
) -> io::Result<(SinkAccount, u64)> {
    let mut rx = RxPath::open(iface, spec.rx)?;
    let mut acct = SinkAccount::new(cap, spec.late_ns, 100_000);
    acct.flow_base = flow_base;
    if let Some(t) = &spec.traffic {
        acct.classes = Some(Box::default());
        if let Some(d) = departures {
            acct.table = IdResolver::new(t.clone(), d.clone(), spec.late_ns).map(Box::new);
        }
    }
    let drain = spec.drain.as_nanos() as u64;
    loop {
        if interrupted() || Instant::now() > deadline {
            break;
        }
        let n = rx.next_ts(|f, ts| acct.frame(f, ts.saturating_sub(epoch)))?;
        if acct.probes > 0 && !probe_seen.load(Ordering::Relaxed) {
            probe_seen.store(true, Ordering::Release);
        }
        if n > 0 {
            continue;
        }
        let done = gen_done_at.load(Ordering::Acquire);
        if done != 0 && realtime_ns() > done + drain {
            break;
        }
        rx.wait(1)?;
    }
    let drops = rx.drops()?;
    Ok((acct, drops))
}

/// What [`count_arrivals`] saw.
#[derive(Debug, Clone)]
pub struct ArrivalCount {
    /// Frames with commbench's magic (any version, stamped or not).
    pub ours: u64,
    pub foreign: u64,
    pub drops: u64,
    pub stats: account::ArrivalStats,
}

/// Counts frames carrying commbench's magic on `iface` with their kernel
/// receive times until `idle` passes without one (after the first) or
/// `deadline`: the sink of a generator that does not stamp (another
/// tool's frames with the magic in their payload).
pub fn count_arrivals(
    iface: &str,
    rx: RxMethod,
    idle: Duration,
    deadline: Instant,
) -> io::Result<ArrivalCount> {
    let mut path = RxPath::open(iface, rx)?;
    let mut stats = account::ArrivalStats::new(100_000);
    let (mut ours, mut foreign) = (0u64, 0u64);
    let mut last = Instant::now();
    loop {
        if interrupted() || Instant::now() > deadline {
            break;
        }
        let n = path.next_ts(|f, ts| {
            if f.get(stamp::STAMP_OFF..stamp::STAMP_OFF + 4) == Some(&stamp::MAGIC[..]) {
                ours += 1;
                stats.arrive(ts);
            } else {
                foreign += 1;
            }
        })?;
        if n > 0 {
            last = Instant::now();
            continue;
        }
        if ours > 0 && last.elapsed() > idle {
            break;
        }
        path.wait(2)?;
    }
    Ok(ArrivalCount {
        ours,
        foreign,
        drops: path.drops()?,
        stats,
    })
}
