//! The identity table: how the sink tells a replayed frame when nothing
//! the tester adds survives the device. A router's IP input trims every
//! frame to its IP datagram's length, and with it the stamp's trailer
//! ([`super::stamp::TRAILER_LEN`] bytes past the datagram); rewriting the
//! capture's own bytes to carry one would change what the device sees.
//! So the frame itself is its identity:
//!
//! - **The key** ([`key`]): a 64-bit hash of the frame's L3/L4 bytes (its
//!   datagram from the ethertype on, at most [`KEY_BYTES`] of it, and its
//!   length), less what a forwarder rewrites: the MACs, VLAN tags, the
//!   IPv4 ToS, TTL and header checksum, the IPv6 traffic class and hop
//!   limit. A NAT, which rewrites addresses and ports, is out of its
//!   reach: its frames come back foreign.
//! - **The index** ([`IdIndex`], built once per capture): the offer's
//!   positions grouped by key. Frames with equal keys (twins: a capture
//!   with identical frames, or equal in their first [`KEY_BYTES`]) share
//!   a group, and so does one position across the loops of the offer.
//! - **The departures** ([`IdSlots`], one per trial): the generator
//!   writes each frame's departure time under its position and loop
//!   before it sends it, and then how many frames it has stamped; the
//!   last [`IdIndex::history`] loops of each position are kept.
//! - **The match** ([`IdResolver`], the sink's): a frame of a group is
//!   the group's oldest departure not yet matched (the frames of a group
//!   cannot be told apart by their bytes, so by their order); a departure
//!   older than the late bound is passed over when a later departure of
//!   the group left before the frame arrived (the earlier one was lost),
//!   and a frame with no departure left to match is a duplicate of the
//!   last one matched.
//!
//! What the trailer tells and this cannot: reordering between the frames
//! of one group (between loops of one position, or between twins), and
//! which one of a group's frames was lost (the count is exact, the
//! latency then is measured against the departure of the frame taken for
//! it, at most one loop of the offer apart, or passed over beyond the
//! late bound). A frame that arrives after [`IdIndex::history`] more
//! loops left is counted without a latency ([`IdResolver::no_time`]).

use super::replay::Traffic;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of a frame's datagram (from its ethertype on) the key reads.
pub const KEY_BYTES: usize = 256;
/// Departures kept per trial in all (8 bytes each, 16 MiB): a capture of
/// `n` frames keeps `HISTORY_ENTRIES / n` loops of each, at least one.
pub const HISTORY_ENTRIES: usize = 1 << 21;
/// Most loops kept of one position.
pub const MAX_HISTORY: usize = 4096;

/// A departure, packed: the loop (mod 2^22) over the departure time (ns
/// since the trial's epoch, 42 bits: 73 minutes, past the longest trial).
const TX_BITS: u32 = 42;
const TX_MASK: u64 = (1 << TX_BITS) - 1;
const LOOP_MASK: u64 = (1 << (64 - TX_BITS)) - 1;

/// What the key reads of a frame: where its L3 header starts (past up
/// to four VLAN tags), where its datagram ends (the IP length, or the
/// frame's end) and which bytes a forwarder may rewrite.
struct Layout {
    l3: usize,
    end: usize,
    /// (offset from the ethertype, the bits kept) of the bytes masked.
    masks: [(usize, u8); 4],
}

fn layout(frame: &[u8]) -> Option<Layout> {
    let mut at = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    for _ in 0..4 {
        if !matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) || frame.len() < at + 6 {
            break;
        }
        at += 4;
        ethertype = u16::from_be_bytes([frame[at], frame[at + 1]]);
    }
    let l3 = at + 2;
    let none = [(0, 0xff); 4];
    let (end, masks) = match ethertype {
        0x0800 if frame.len() >= l3 + 20 => {
            let tl = usize::from(u16::from_be_bytes([frame[l3 + 2], frame[l3 + 3]]));
            // ToS, TTL and the header checksum (offsets past the 2 B
            // ethertype the key starts with).
            let m = [(2 + 1, 0), (2 + 8, 0), (2 + 10, 0), (2 + 11, 0)];
            ((l3 + tl.max(20)).min(frame.len()), m)
        }
        0x86dd if frame.len() >= l3 + 40 => {
            let pl = usize::from(u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]));
            let end = if pl == 0 {
                frame.len()
            } else {
                (l3 + 40 + pl).min(frame.len())
            };
            // The traffic class (the low nibble of byte 0, the high one
            // of byte 1) and the hop limit.
            (end, [(2, 0xf0), (2 + 1, 0x0f), (2 + 7, 0), (2 + 7, 0)])
        }
        _ => (frame.len(), none),
    };
    Some(Layout { l3, end, masks })
}

/// The frame's key: its L3/L4 bytes less what a forwarder rewrites (see
/// the module's text). None: shorter than an Ethernet header.
pub fn key(frame: &[u8]) -> Option<u64> {
    let l = layout(frame)?;
    let from = l.l3 - 2;
    let n = (l.end - from).min(KEY_BYTES + 2);
    let mut buf = [0u8; KEY_BYTES + 2];
    buf[..n].copy_from_slice(&frame[from..from + n]);
    for (off, keep) in l.masks {
        if off < n {
            buf[off] &= keep;
        }
    }
    Some(hash(&buf[..n], (l.end - l.l3) as u64))
}

/// A 64-bit hash of `b` (8 bytes a step, then splitmix64's finish): the
/// sink's per-frame cost, ~256 B at most.
fn hash(b: &[u8], seed: u64) -> u64 {
    const K: u64 = 0x9fb2_1c65_1e98_df25;
    let mut h = seed.wrapping_mul(K) ^ 0x9e37_79b9_7f4a_7c15;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    let r = chunks.remainder();
    let mut w = [0u8; 8];
    w[..r.len()].copy_from_slice(r);
    h = (h ^ u64::from_le_bytes(w) ^ ((r.len() as u64) << 59))
        .wrapping_mul(K)
        .rotate_left(29);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The offer's positions grouped by key, and what the sink needs to turn
/// a position and a loop into the generator's flow and sequence number.
#[derive(Debug)]
pub struct IdIndex {
    groups: HashMap<u64, u32>,
    /// Group g's positions are `members[start[g]..start[g + 1]]`, in the
    /// offer's order.
    start: Vec<u32>,
    members: Vec<u32>,
    /// Per position: how many frames of its stream come before it in a
    /// loop.
    rank: Vec<u32>,
    /// Per stream: its frames in a loop.
    per_loop: Vec<u64>,
    /// Positions that share their key with another (twins).
    pub twins: u64,
    /// Loops of each position whose departure is kept.
    pub history: usize,
}

impl IdIndex {
    /// The index of `t`'s offer: `frame(p)` is the bytes and stream of
    /// position `p`.
    pub fn build<'a>(len: usize, streams: u16, frame: impl Fn(usize) -> (&'a [u8], u8)) -> IdIndex {
        let mut by_key: HashMap<u64, Vec<u32>> = HashMap::new();
        let mut rank = Vec::with_capacity(len);
        let mut per_loop = vec![0u64; usize::from(streams).max(1)];
        for p in 0..len {
            let (b, s) = frame(p);
            // A kept frame has an Ethernet header: its key exists.
            let k = key(b).unwrap_or(0);
            by_key.entry(k).or_default().push(p as u32);
            let s = usize::from(s).min(per_loop.len() - 1);
            rank.push(per_loop[s] as u32);
            per_loop[s] += 1;
        }
        let mut keys: Vec<(u64, Vec<u32>)> = by_key.into_iter().collect();
        // Groups in the order of their first position: the same index for
        // the same capture.
        keys.sort_by_key(|(_, m)| m[0]);
        let mut groups = HashMap::with_capacity(keys.len());
        let (mut start, mut members) =
            (Vec::with_capacity(keys.len() + 1), Vec::with_capacity(len));
        let mut twins = 0u64;
        for (g, (k, m)) in keys.into_iter().enumerate() {
            groups.insert(k, g as u32);
            start.push(members.len() as u32);
            if m.len() > 1 {
                twins += m.len() as u64;
            }
            members.extend(m);
        }
        start.push(members.len() as u32);
        IdIndex {
            groups,
            start,
            members,
            rank,
            per_loop,
            twins,
            history: (HISTORY_ENTRIES / len.max(1)).clamp(1, MAX_HISTORY),
        }
    }

    /// Distinct keys.
    pub fn groups(&self) -> usize {
        self.start.len() - 1
    }

    fn members(&self, g: u32) -> &[u32] {
        let g = g as usize;
        &self.members[self.start[g] as usize..self.start[g + 1] as usize]
    }

    /// The generator's sequence number of position `p` in loop `l`, in
    /// stream `s`.
    fn seq(&self, p: u32, s: u8, l: u64) -> u64 {
        let s = usize::from(s).min(self.per_loop.len() - 1);
        l * self.per_loop[s] + u64::from(self.rank[p as usize])
    }
}

/// One trial's departures: written by the generator, read by the sink.
#[derive(Debug)]
pub struct IdSlots {
    entries: Vec<AtomicU64>,
    /// Frames stamped so far (the offer's index of the next one).
    stamped: AtomicU64,
    len: u64,
    history: u64,
}

impl IdSlots {
    /// Departures of an offer of `len` positions, `history` loops each.
    pub fn new(len: usize, history: usize) -> IdSlots {
        let n = len.max(1) * history.max(1);
        IdSlots {
            entries: (0..n).map(|_| AtomicU64::new(0)).collect(),
            stamped: AtomicU64::new(0),
            len: len.max(1) as u64,
            history: history.max(1) as u64,
        }
    }

    fn at(&self, p: u64, l: u64) -> &AtomicU64 {
        &self.entries[(p * self.history + l % self.history) as usize]
    }

    /// The `i`-th frame offered leaves at `tx_ns` (before it is sent).
    #[inline]
    pub fn depart(&self, i: u64, tx_ns: u64) {
        let (l, p) = (i / self.len, i % self.len);
        self.at(p, l).store(
            ((l & LOOP_MASK) << TX_BITS) | (tx_ns & TX_MASK),
            Ordering::Relaxed,
        );
    }

    /// The frames before the `n`-th offered have their departures written.
    #[inline]
    pub fn stamped_up_to(&self, n: u64) {
        self.stamped.store(n, Ordering::Release);
    }

    fn stamped(&self) -> u64 {
        self.stamped.load(Ordering::Acquire)
    }

    /// The departure of position `p` in loop `l`, if still kept.
    fn tx(&self, p: u64, l: u64) -> Option<u64> {
        let e = self.at(p, l).load(Ordering::Relaxed);
        (e >> TX_BITS == l & LOOP_MASK).then_some(e & TX_MASK)
    }
}

/// What a received frame is, by the identity table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identified {
    /// Not one of the capture's frames (the kernel's chatter, or a frame
    /// the device rewrote).
    Foreign,
    /// One of them before the trial's first departure: a probe (or a
    /// straggler of the trial before).
    Probe,
    /// The frame of stream `stream`, sequence `seq`, class `class`, that
    /// left at `tx_ns` (None: no longer kept).
    Frame {
        stream: u8,
        seq: u64,
        class: u8,
        tx_ns: Option<u64>,
    },
}

/// The sink's side of the identity table.
#[derive(Clone)]
pub struct IdResolver {
    traffic: Arc<Traffic>,
    slots: Arc<IdSlots>,
    /// Per group: its next departure to match, counted over the group's
    /// departures (loop × members + member).
    next: Vec<u64>,
    late_ns: u64,
    /// Frames matched whose departure time was no longer kept.
    pub no_time: u64,
    /// Departures passed over (older than the late bound, a later one of
    /// the same group already arrived): counted lost.
    pub passed_over: u64,
}

impl std::fmt::Debug for IdResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdResolver")
            .field("no_time", &self.no_time)
            .field("passed_over", &self.passed_over)
            .finish()
    }
}

impl IdResolver {
    /// The sink's matcher of `traffic` (which has an index) against the
    /// trial's `slots`; `late_ns` is the trial's late bound.
    pub fn new(traffic: Arc<Traffic>, slots: Arc<IdSlots>, late_ns: u64) -> Option<IdResolver> {
        let groups = traffic.id_index()?.groups();
        Some(IdResolver {
            traffic,
            slots,
            next: vec![0; groups],
            late_ns,
            no_time: 0,
            passed_over: 0,
        })
    }

    /// Which frame `frame`, received at `rx_ns` (since the trial's
    /// epoch), is.
    pub fn identify(&mut self, frame: &[u8], rx_ns: u64) -> Identified {
        let Some(ix) = self.traffic.id_index() else {
            return Identified::Foreign;
        };
        let Some(&g) = key(frame).and_then(|k| ix.groups.get(&k)) else {
            return Identified::Foreign;
        };
        let stamped = self.slots.stamped();
        if stamped == 0 {
            return Identified::Probe;
        }
        let members = ix.members(g);
        let k = members.len() as u64;
        let len = self.slots.len;
        let slots = &self.slots;
        // Departure m of the group: its position and loop.
        let at = |m: u64| (u64::from(members[(m % k) as usize]), m / k);
        let left = |m: u64| {
            let (p, l) = at(m);
            l.checked_mul(len)
                .and_then(|x| x.checked_add(p))
                .is_some_and(|i| i < stamped)
        };
        let tx = |m: u64| {
            let (p, l) = at(m);
            slots.tx(p, l)
        };
        let gi = g as usize;
        let mut m = self.next[gi];
        if !left(m) {
            // Nothing of the group left unmatched: a second copy of the
            // last one matched (or, before any, a straggler).
            if m == 0 {
                return Identified::Probe;
            }
            m -= 1;
        } else {
            if tx(m).is_some_and(|t| t > rx_ns) {
                // Left after this frame arrived: not this departure's.
                return Identified::Probe;
            }
            while left(m + 1)
                && tx(m).is_none_or(|t| t.saturating_add(self.late_ns) < rx_ns)
                && tx(m + 1).is_none_or(|t| t <= rx_ns)
            {
                m += 1;
                self.passed_over += 1;
            }
            self.next[gi] = m + 1;
        }
        let (p, l) = at(m);
        let (_, stream, class) = self.traffic.frame(p);
        let tx_ns = tx(m);
        if tx_ns.is_none() {
            self.no_time += 1;
        }
        Identified::Frame {
            stream,
            seq: ix.seq(p as u32, stream, l),
            class,
            tx_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_udp(ttl: u8, id: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let tl = (20 + 8 + payload.len()) as u16;
        f[14] = 0x45;
        f[16..18].copy_from_slice(&tl.to_be_bytes());
        f[18..20].copy_from_slice(&id.to_be_bytes());
        f[22] = ttl;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&2000u16.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn the_key_ignores_what_a_router_rewrites_and_nothing_else() {
        let a = ipv4_udp(64, 7, b"hello");
        let k = key(&a).unwrap();
        // Routed: new MACs, TTL one less, a new checksum, a VLAN tag
        // popped or pushed, the trailer trimmed, Ethernet padding added.
        let mut r = a.clone();
        r[..12].copy_from_slice(&[9; 12]);
        r[22] = 63;
        r[24..26].copy_from_slice(&[0xab, 0xcd]);
        r[15] = 0x20;
        assert_eq!(key(&r), Some(k));
        let mut tagged = r[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        tagged.extend_from_slice(&r[12..]);
        assert_eq!(key(&tagged), Some(k));
        let mut padded = r.clone();
        padded.extend_from_slice(&[0; 13]);
        assert_eq!(key(&padded), Some(k));
        // Any L3/L4 byte it does not rewrite tells frames apart.
        assert_ne!(key(&ipv4_udp(64, 8, b"hello")), Some(k));
        assert_ne!(key(&ipv4_udp(64, 7, b"hellp")), Some(k));
        let mut nat = a.clone();
        nat[34] ^= 1;
        assert_ne!(key(&nat), Some(k));
        assert_eq!(key(&[0u8; 13]), None);
    }

    #[test]
    fn ipv6_keys_ignore_the_hop_limit_and_traffic_class() {
        let mut f = vec![0u8; 14 + 40 + 8];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&8u16.to_be_bytes());
        f[20] = 17;
        f[21] = 64;
        f[22] = 0x20;
        let k = key(&f).unwrap();
        let mut r = f.clone();
        r[21] = 63;
        r[14] = 0x6b;
        r[15] = 0x80;
        assert_eq!(key(&r), Some(k));
        r[23] ^= 1;
        assert_ne!(key(&r), Some(k));
    }

    fn traffic(frames: &[Vec<u8>]) -> Arc<Traffic> {
        let mut cap = Vec::new();
        for f in frames {
            cap.push(f.clone());
        }
        let bytes = crate::tester::replay::tests::pcap_of(&cap, 1);
        let mut t =
            Traffic::from_bytes("t.pcap", bytes, crate::tester::replay::Order::Capture).unwrap();
        t.set_identity_table();
        Arc::new(t)
    }

    /// A capture of three frames, two of them identical, offered in 3
    /// loops: the sink's matches give back every departure's stream and
    /// sequence, passes over a lost one, and tells a duplicate.
    #[test]
    fn departures_are_matched_in_order_lost_ones_passed_over_and_copies_told() {
        let a = ipv4_udp(64, 1, b"a");
        let b = ipv4_udp(64, 2, b"b");
        let t = traffic(&[a.clone(), b.clone(), a.clone()]);
        let ix = t.id_index().unwrap();
        assert_eq!(ix.groups(), 2);
        assert_eq!(ix.twins, 2);
        let slots = Arc::new(IdSlots::new(t.len(), ix.history));
        let late = 1_000;
        let mut r = IdResolver::new(t.clone(), slots.clone(), late).unwrap();
        // Before any departure: a probe.
        assert_eq!(r.identify(&a, 5), Identified::Probe);
        // Frames 0..9 leave at 100 ns apart (t = 100 i).
        for i in 0..9u64 {
            slots.depart(i, 100 * i);
        }
        slots.stamped_up_to(9);
        let seq_of = |id: Identified| match id {
            Identified::Frame { seq, tx_ns, .. } => (seq, tx_ns),
            x => panic!("{x:?}"),
        };
        // The three frames are one flow (only their IP ids differ):
        // sequence 3 × loop + position. a (position 0, loop 0) arrives;
        // then b; then the second a.
        assert_eq!(seq_of(r.identify(&a, 50)), (0, Some(0)));
        assert_eq!(seq_of(r.identify(&b, 150)), (1, Some(100)));
        assert_eq!(seq_of(r.identify(&a, 250)), (2, Some(200)));
        // Loop 1's first a (sequence 3, left at 300) is lost; loop 1's
        // second a (left at 500) arrives at 1,350: the first is older
        // than the late bound, so it is passed over.
        assert_eq!(seq_of(r.identify(&a, 1_350)), (5, Some(500)));
        assert_eq!(r.passed_over, 1);
        // Loop 2's a's, then a copy with nothing left to match: a
        // duplicate of the last.
        assert_eq!(seq_of(r.identify(&a, 1_550)), (6, Some(600)));
        assert_eq!(seq_of(r.identify(&a, 1_560)), (8, Some(800)));
        assert_eq!(seq_of(r.identify(&a, 1_570)), (8, Some(800)));
        // A frame the capture does not hold.
        assert_eq!(
            r.identify(&ipv4_udp(64, 3, b"c"), 2_000),
            Identified::Foreign
        );
    }

    #[test]
    fn a_departure_no_longer_kept_is_matched_without_a_time() {
        let x = ipv4_udp(64, 1, b"x");
        let t = traffic(std::slice::from_ref(&x));
        let slots = Arc::new(IdSlots::new(1, 2));
        for i in 0..5u64 {
            slots.depart(i, 10 * i);
        }
        slots.stamped_up_to(5);
        // Loops 0-2's departures were overwritten by loops 2-4's. A frame
        // arriving at 25 ns, before loop 3 left: loops 0 and 1 are passed
        // over (a later one left before it), loop 2 is taken, its time
        // unknown.
        let mut r = IdResolver::new(t.clone(), slots.clone(), u64::MAX).unwrap();
        let got = |r: &mut IdResolver, rx| match r.identify(&x, rx) {
            Identified::Frame { seq, tx_ns, .. } => (seq, tx_ns),
            o => panic!("{o:?}"),
        };
        assert_eq!(got(&mut r, 25), (2, None));
        assert_eq!((r.passed_over, r.no_time), (2, 1));
        // With no late bound, a known departure is never passed over.
        assert_eq!(got(&mut r, 100), (3, Some(30)));
        assert_eq!(got(&mut r, 100), (4, Some(40)));
        assert_eq!(got(&mut r, 100), (4, Some(40)), "a copy: nothing left");
        // A late bound of 5 ns: everything before the last departure is
        // passed over.
        let mut r = IdResolver::new(t, slots, 5).unwrap();
        assert_eq!(got(&mut r, 100), (4, Some(40)));
        assert_eq!((r.passed_over, r.no_time), (4, 0));
    }
}
