//! Exact accounting at the sink: per flow, which sequence numbers arrived,
//! how often and in what order; one-way latency of every frame; and the
//! arrival pattern (inter-arrival gaps, the most frames in any 100 µs).
//!
//! No heuristic: every sequence number the generator may send has a bit,
//! so a duplicate is a second arrival of a number already seen, however
//! far apart, and a loss is a number that never arrived by the end of the
//! trial. The counters, per flow:
//!
//! - `received`: distinct sequence numbers that arrived;
//! - `lost`: sent − received (sent comes from the generator at the end);
//! - `duplicated`: arrivals of a number already received;
//! - `reordered`: first arrivals of a number lower than the highest
//!   number already received in the flow (RFC 4737's reordered packet);
//!   its `distance` is that highest number minus its own;
//! - `late`: received with a one-way latency above the late bound (they
//!   count as received too);
//! - `out_of_range`: numbers the generator was never going to send
//!   (beyond its planned count): a DUT that rewrote the payload.

use super::identity::{IdResolver, Identified};
use super::stamp::{self, NotOurs};
use commbench_core::stats::LatencyHistogram;
use serde::Serialize;
use std::collections::VecDeque;

/// What happened to one arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    InOrder,
    Reordered { distance: u64 },
    Duplicate,
    OutOfRange,
}

/// One flow's counters and its bitmap of received sequence numbers.
#[derive(Debug, Clone)]
pub struct FlowAccount {
    seen: Vec<u64>,
    capacity: u64,
    highest: Option<u64>,
    pub received: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub reorder_max_distance: u64,
    reorder_distance_sum: u64,
    pub late: u64,
    pub out_of_range: u64,
}

impl FlowAccount {
    /// A flow whose sequence numbers run from 0 to `capacity` − 1.
    pub fn new(capacity: u64) -> Self {
        FlowAccount {
            seen: vec![0; capacity.div_ceil(64) as usize],
            capacity,
            highest: None,
            received: 0,
            duplicated: 0,
            reordered: 0,
            reorder_max_distance: 0,
            reorder_distance_sum: 0,
            late: 0,
            out_of_range: 0,
        }
    }

    /// Counts one arrival of `seq`.
    pub fn arrive(&mut self, seq: u64) -> Arrival {
        if seq >= self.capacity {
            self.out_of_range += 1;
            return Arrival::OutOfRange;
        }
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if self.seen[w] & (1 << b) != 0 {
            self.duplicated += 1;
            return Arrival::Duplicate;
        }
        self.seen[w] |= 1 << b;
        self.received += 1;
        match self.highest {
            Some(h) if seq < h => {
                let d = h - seq;
                self.reordered += 1;
                self.reorder_distance_sum += d;
                self.reorder_max_distance = self.reorder_max_distance.max(d);
                Arrival::Reordered { distance: d }
            }
            _ => {
                self.highest = Some(seq);
                Arrival::InOrder
            }
        }
    }

    /// Mean reorder distance over the reordered frames (0 when none).
    pub fn reorder_mean_distance(&self) -> f64 {
        if self.reordered == 0 {
            0.0
        } else {
            self.reorder_distance_sum as f64 / self.reordered as f64
        }
    }
}

/// One flow's final counts.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowCounts {
    pub flow: u16,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub reorder_max_distance: u64,
    pub reorder_mean_distance: f64,
    pub late: u64,
    pub out_of_range: u64,
}

/// Longest window of arrivals kept for the 100 µs count.
const WINDOW_CAP: usize = 1 << 20;

/// The arrival pattern: first and last arrival, the gaps between
/// arrivals, and the most arrivals within any window of `window_ns`.
#[derive(Debug, Clone)]
pub struct ArrivalStats {
    pub count: u64,
    /// Gaps between consecutive arrivals, ns.
    pub gaps: LatencyHistogram,
    window_ns: u64,
    window: VecDeque<u64>,
    /// Most arrivals in any `window_ns` span.
    pub window_max: u64,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
}

impl ArrivalStats {
    pub fn new(window_ns: u64) -> Self {
        ArrivalStats {
            count: 0,
            gaps: LatencyHistogram::new(),
            window_ns,
            window: VecDeque::new(),
            window_max: 0,
            first_ns: None,
            last_ns: 0,
        }
    }

    /// Counts an arrival at `t` ns (any epoch, non-decreasing in practice;
    /// an earlier one counts as a gap of 0).
    pub fn arrive(&mut self, t: u64) {
        self.count += 1;
        if self.first_ns.is_none() {
            self.first_ns = Some(t);
        } else {
            self.gaps.record_ns(t.saturating_sub(self.last_ns));
        }
        self.last_ns = self.last_ns.max(t);
        while let Some(&old) = self.window.front() {
            if t.saturating_sub(old) >= self.window_ns || self.window.len() >= WINDOW_CAP {
                self.window.pop_front();
            } else {
                break;
            }
        }
        self.window.push_back(t);
        self.window_max = self.window_max.max(self.window.len() as u64);
    }

    /// First to last arrival, s.
    pub fn span_s(&self) -> f64 {
        self.first_ns
            .map_or(0.0, |f| self.last_ns.saturating_sub(f) as f64 / 1e9)
    }

    /// Arrivals per second over the span (the first arrival opens it).
    pub fn rate(&self) -> f64 {
        let s = self.span_s();
        if s > 0.0 {
            (self.count.saturating_sub(1)) as f64 / s
        } else {
            f64::NAN
        }
    }
}

/// Everything the sink counts.
#[derive(Debug, Clone)]
pub struct SinkAccount {
    pub flows: Vec<FlowAccount>,
    pub latency: LatencyHistogram,
    pub late_ns: u64,
    /// Frames without the stamp's magic (the kernel's own, other traffic).
    pub foreign: u64,
    /// Frames too short to hold a stamp.
    pub short: u64,
    /// Our magic with another version byte.
    pub other_version: u64,
    /// A flow id the generator does not use.
    pub unknown_flow: u64,
    /// Arrivals stamped later than they were received (clock trouble):
    /// their latency is recorded as 0.
    pub negative_latency: u64,
    /// The arrival pattern of our frames.
    pub arrivals: ArrivalStats,
    /// Flow ids start here (the trial's number in the high byte).
    pub flow_base: u16,
    /// Probe frames (the path check before a trial).
    pub probes: u64,
    /// A replayed capture's frames, their stamp a trailer: what arrived
    /// per class (None: synthetic frames, the stamp at its fixed offset).
    pub classes: Option<Box<ClassAccount>>,
    /// A replayed capture's frames told by their bytes, not a stamp
    /// (None: they carry one).
    pub table: Option<Box<IdResolver>>,
    /// Arrivals counted with no latency: the identity table no longer
    /// held their departure.
    pub no_latency: u64,
}

/// Per class of a replayed capture's frames (the class byte of the
/// trailer: size bucket and protocol): first arrivals and the latency of
/// every arrival, as the totals count them.
#[derive(Debug, Clone)]
pub struct ClassAccount {
    pub received: [u64; 256],
    pub latency: Vec<Option<LatencyHistogram>>,
}

impl Default for ClassAccount {
    fn default() -> Self {
        ClassAccount {
            received: [0; 256],
            latency: vec![None; 256],
        }
    }
}

impl SinkAccount {
    /// `capacity[f]`: how many sequence numbers flow f may use.
    pub fn new(capacity: &[u64], late_ns: u64, window_ns: u64) -> Self {
        SinkAccount {
            flows: capacity.iter().map(|&c| FlowAccount::new(c)).collect(),
            latency: LatencyHistogram::new(),
            late_ns,
            foreign: 0,
            short: 0,
            other_version: 0,
            unknown_flow: 0,
            negative_latency: 0,
            arrivals: ArrivalStats::new(window_ns),
            flow_base: 0,
            probes: 0,
            classes: None,
            table: None,
            no_latency: 0,
        }
    }

    /// Counts one received frame; `rx_ns` is its arrival time in ns since
    /// the trial's epoch.
    pub fn frame(&mut self, frame: &[u8], rx_ns: u64) {
        if let Some(t) = &mut self.table {
            match t.identify(frame, rx_ns) {
                Identified::Foreign => self.foreign += 1,
                Identified::Probe => self.probes += 1,
                Identified::Frame {
                    stream,
                    seq,
                    class,
                    tx_ns,
                } => {
                    let flow = self.flow_base.wrapping_add(u16::from(stream));
                    self.count(flow, seq, tx_ns, Some(class), rx_ns);
                }
            }
            return;
        }
        let parsed = if self.classes.is_some() {
            stamp::parse_trailer(frame).map(|(s, c)| (s, Some(c)))
        } else {
            stamp::parse(frame).map(|s| (s, None))
        };
        let (s, class) = match parsed {
            Ok(s) => s,
            Err(NotOurs::Short) => {
                self.short += 1;
                return;
            }
            Err(NotOurs::Foreign) => {
                self.foreign += 1;
                return;
            }
            Err(NotOurs::Version(v)) => {
                if v == super::PROBE_VERSION {
                    self.probes += 1;
                } else {
                    self.other_version += 1;
                }
                return;
            }
        };
        self.count(s.flow, s.seq, Some(s.tx_ns), class, rx_ns);
    }

    /// Counts the arrival of `seq` of `flow` (of `class`, replayed) that
    /// left at `tx_ns` (None: not known) and arrived at `rx_ns`.
    fn count(&mut self, flow: u16, seq: u64, tx_ns: Option<u64>, class: Option<u8>, rx_ns: u64) {
        let idx = usize::from(flow.wrapping_sub(self.flow_base));
        let Some(f) = self.flows.get_mut(idx) else {
            self.unknown_flow += 1;
            return;
        };
        let a = f.arrive(seq);
        if a == Arrival::OutOfRange {
            return;
        }
        self.arrivals.arrive(rx_ns);
        if let (Some(c), Some(k)) = (&mut self.classes, class) {
            if a != Arrival::Duplicate {
                c.received[usize::from(k)] += 1;
            }
        }
        let Some(tx_ns) = tx_ns else {
            self.no_latency += 1;
            return;
        };
        let lat = if rx_ns >= tx_ns {
            rx_ns - tx_ns
        } else {
            self.negative_latency += 1;
            0
        };
        if lat > self.late_ns && a != Arrival::Duplicate {
            f.late += 1;
        }
        if let (Some(c), Some(k)) = (&mut self.classes, class) {
            c.latency[usize::from(k)]
                .get_or_insert_with(LatencyHistogram::new)
                .record_ns(lat);
        }
        self.latency.record_ns(lat);
    }

    /// Final counts, given what the generator sent per flow.
    pub fn counts(&self, sent: &[u64]) -> Vec<FlowCounts> {
        self.flows
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let s = sent.get(i).copied().unwrap_or(0);
                FlowCounts {
                    flow: i as u16,
                    sent: s,
                    received: f.received,
                    lost: s.saturating_sub(f.received),
                    duplicated: f.duplicated,
                    reordered: f.reordered,
                    reorder_max_distance: f.reorder_max_distance,
                    reorder_mean_distance: f.reorder_mean_distance(),
                    late: f.late,
                    out_of_range: f.out_of_range,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(seqs: &[u64], cap: u64) -> FlowAccount {
        let mut f = FlowAccount::new(cap);
        for &s in seqs {
            f.arrive(s);
        }
        f
    }

    #[test]
    fn in_order_with_a_gap_is_loss_not_reordering() {
        let f = run(&[0, 1, 2, 4, 5], 6);
        assert_eq!(f.received, 5);
        assert_eq!(f.reordered, 0);
        assert_eq!(f.duplicated, 0);
    }

    #[test]
    fn a_late_frame_is_reordered_with_its_distance() {
        // 2 overtaken by 3, 4, 5: distance 5 − 2 = 3.
        let f = run(&[0, 1, 3, 4, 5, 2], 6);
        assert_eq!(f.received, 6);
        assert_eq!(f.reordered, 1);
        assert_eq!(f.reorder_max_distance, 3);
        assert_eq!(f.reorder_mean_distance(), 3.0);
        // A swapped pair: one reordered frame at distance 1.
        let f = run(&[0, 2, 1, 3], 4);
        assert_eq!((f.reordered, f.reorder_max_distance), (1, 1));
    }

    #[test]
    fn duplicates_are_counted_however_far_apart() {
        let f = run(&[0, 1, 2, 0, 3, 1, 1], 4);
        assert_eq!(f.received, 4);
        assert_eq!(f.duplicated, 3);
        // A duplicate is not also reordered.
        assert_eq!(f.reordered, 0);
    }

    #[test]
    fn numbers_beyond_the_plan_are_out_of_range() {
        let f = run(&[0, 5, 1_000_000], 5);
        assert_eq!(f.received, 1);
        assert_eq!(f.out_of_range, 2);
    }

    #[test]
    fn sink_counts_lost_late_and_foreign() {
        let mut s = SinkAccount::new(&[10, 10], 1000, 100_000);
        let mut fr = vec![0u8; 60];
        for (flow, seq, tx, rx) in [
            (0u16, 0u64, 0u64, 500u64),
            (0, 2, 10, 5000),
            (1, 0, 0, 1),
            (1, 0, 0, 2),
        ] {
            stamp::write_id(&mut fr, flow, seq);
            stamp::write_ts(&mut fr, tx);
            s.frame(&fr, rx);
        }
        s.frame(&[0u8; 60], 0);
        s.frame(&[0u8; 20], 0);
        stamp::write_id(&mut fr, 9, 0);
        s.frame(&fr, 0);
        let c = s.counts(&[3, 1]);
        assert_eq!((c[0].received, c[0].lost, c[0].late), (2, 1, 1));
        assert_eq!((c[1].received, c[1].lost, c[1].duplicated), (1, 0, 1));
        assert_eq!((s.foreign, s.short, s.unknown_flow), (1, 1, 1));
        assert_eq!(s.latency.len(), 4);
    }

    #[test]
    fn window_max_counts_arrivals_within_the_window() {
        let mut s = SinkAccount::new(&[100], u64::MAX, 100);
        let mut fr = vec![0u8; 60];
        // Arrivals at 0, 10, 20, 200, 205: at most 3 within any 100 ns.
        for (i, t) in [0u64, 10, 20, 200, 205].into_iter().enumerate() {
            stamp::write_id(&mut fr, 0, i as u64);
            s.frame(&fr, t);
        }
        assert_eq!(s.arrivals.window_max, 3);
        assert_eq!(s.arrivals.gaps.len(), 4);
        // 4 gaps over 205 ns.
        assert!((s.arrivals.rate() - 4.0 / 205e-9).abs() < 1.0);
    }

    proptest! {
        /// Against a plain model: any arrival sequence of numbers below
        /// the capacity; received + duplicated = arrivals, received =
        /// distinct numbers, reordered = first arrivals below the running
        /// maximum.
        #[test]
        fn matches_a_model(seqs in proptest::collection::vec(0u64..50, 0..200)) {
            let f = run(&seqs, 50);
            let mut seen = std::collections::HashSet::new();
            let (mut re, mut maxd, mut hi): (u64, u64, Option<u64>) = (0, 0, None);
            for &s in &seqs {
                if seen.insert(s) {
                    if let Some(h) = hi { if s < h { re += 1; maxd = maxd.max(h - s); continue; } }
                    hi = Some(s);
                }
            }
            prop_assert_eq!(f.received, seen.len() as u64);
            prop_assert_eq!(f.received + f.duplicated, seqs.len() as u64);
            prop_assert_eq!(f.reordered, re);
            prop_assert_eq!(f.reorder_max_distance, maxd);
        }
    }
}
