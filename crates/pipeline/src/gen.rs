//! The traffic generator, standing in for the NIC: a table of flows (IPv4
//! and IPv6, TCP and UDP, distinct addresses and ports), each with its
//! frame headers prepared once for the run's frame size. Receiving a packet
//! writes the next flow's headers into a pool buffer — what a NIC's DMA
//! does; the payload bytes are not rewritten, as the CPU never touches a
//! DMA'd payload it does not read — and sets the RSS hash and queue.
//!
//! With [`RssAt::Nic`] the hash was computed per flow at setup (the NIC's
//! job, free for the CPU); with [`RssAt::Cpu`] the rx path parses each
//! frame and computes the Toeplitz hash itself, which is what a NIC
//! without RSS for the traffic costs in software.

use crate::mbuf::Mbuf;
use crate::rss::FlowTuple;
use crate::rss::Rss;
use crate::wire::{FlowRepr, Frame, FCS, PROTO_TCP, PROTO_UDP};
use serde::Serialize;

/// Which addresses the flows use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IpMix {
    V4,
    V6,
    /// Three IPv4 flows for every IPv6 one.
    Mix,
}

/// Where the RSS hash comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RssAt {
    /// Computed per flow at setup, as a NIC delivers it in the descriptor.
    Nic,
    /// Computed per packet in the rx path from the parsed frame.
    Cpu,
}

/// Longest header a flow has (Ethernet + IPv6 + TCP), rounded up.
const HDR_SLOT: usize = 80;

struct FlowEntry {
    /// Headers, zero-padded to the slot.
    hdr: [u8; HDR_SLOT],
    rss: u32,
    queue: u16,
}

/// The flows of one run at one frame size.
pub struct Generator {
    flows: Vec<FlowEntry>,
    next: usize,
    frame_len: u16,
    rss_at: RssAt,
    rss: Rss,
    /// Flows asked for as IPv6 that the frame size could not hold (sent
    /// as IPv4 instead).
    pub v6_downgraded: usize,
    pub v6_flows: usize,
    /// Frames the CPU-side RSS could not parse (never, for our own frames;
    /// counted rather than assumed).
    pub parse_errors: u64,
    /// Frames written per queue (with `RssAt::Nic`: the NIC's own per-queue
    /// rx counters; kept here, outside the loop's timed sections).
    pub emitted: Vec<u64>,
}

/// Deterministic 64-bit mixer (splitmix64) so flows differ in every byte.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The tuple of flow `i`.
pub fn flow_tuple(i: usize, v6: bool) -> FlowTuple {
    let r = mix(i as u64);
    let sport = 1024 + (r % 64_000) as u16;
    let dport = [80u16, 443, 53, 8080, 5201, 123][(r >> 20) as usize % 6];
    if v6 {
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        dst[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        src[4] = 1;
        dst[4] = 2;
        src[8..16].copy_from_slice(&r.to_be_bytes());
        dst[8..16].copy_from_slice(&mix(r).to_be_bytes());
        FlowTuple::V6 {
            src,
            dst,
            ports: Some((sport, dport)),
        }
    } else {
        let s = (r >> 32) as u32;
        FlowTuple::V4 {
            src: [10, (s >> 16) as u8, (s >> 8) as u8, s as u8],
            dst: [
                192,
                168,
                (i >> 8) as u8,
                (i as u8).max(1), // never .0
            ],
            ports: Some((sport, dport)),
        }
    }
}

impl Generator {
    /// Prepares `flows` flows for frames of `frame_size` bytes (with FCS).
    pub fn new(flows: usize, frame_size: u32, ip: IpMix, rss: Rss, rss_at: RssAt) -> Self {
        let frame_len = (frame_size as usize)
            .saturating_sub(FCS)
            .min(u16::MAX as usize) as u16;
        let mut v = Vec::with_capacity(flows.max(1));
        let mut downgraded = 0;
        let mut v6_flows = 0;
        for i in 0..flows.max(1) {
            let want_v6 = match ip {
                IpMix::V4 => false,
                IpMix::V6 => true,
                IpMix::Mix => i % 4 == 3,
            };
            let proto = if i % 2 == 0 { PROTO_TCP } else { PROTO_UDP };
            let mut repr = FlowRepr {
                src_mac: [0x02, 0, 0, 0, 0, 0x01],
                dst_mac: [0x02, 0, 0, 0, 0, 0x02],
                tuple: flow_tuple(i, want_v6),
                proto,
            };
            if want_v6 && repr.header_len() > usize::from(frame_len) {
                repr.tuple = flow_tuple(i, false);
                downgraded += 1;
            } else if want_v6 {
                v6_flows += 1;
            }
            let hdr_len = repr.header_len();
            let mut full = vec![0u8; usize::from(frame_len).max(hdr_len)];
            let len = full.len();
            // Cannot fail: the buffer holds the headers by construction.
            let _ = repr.emit(&mut full, len);
            let mut hdr = [0u8; HDR_SLOT];
            hdr[..hdr_len].copy_from_slice(&full[..hdr_len]);
            let h = rss.hash(&repr.tuple);
            v.push(FlowEntry {
                hdr,
                rss: h,
                queue: rss.queue_of(h) as u16,
            });
        }
        Generator {
            flows: v,
            next: 0,
            frame_len,
            rss_at,
            rss,
            v6_downgraded: downgraded,
            v6_flows,
            parse_errors: 0,
            emitted: Vec::new(),
        }
    }

    /// Frame length written (without FCS).
    pub fn frame_len(&self) -> u16 {
        self.frame_len
    }

    /// Flows in the table.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Queue of each flow (for the balance an even flow mix would give).
    pub fn flow_queues(&self) -> impl Iterator<Item = usize> + '_ {
        self.flows.iter().map(|f| usize::from(f.queue))
    }

    /// Fills `m` with the next flow's packet — what the NIC's DMA does —
    /// and, with [`RssAt::Nic`], sets its hash and queue from the flow
    /// table (the rx descriptor) and counts it on that queue.
    #[inline(always)]
    pub fn fill(&mut self, m: &mut Mbuf) {
        let f = &self.flows[self.next];
        self.next += 1;
        if self.next == self.flows.len() {
            self.next = 0;
        }
        // A fixed-size copy of the whole header slot compiles to a few
        // vector moves; a copy of exactly `hdr_len` bytes is a memcpy call
        // (rtc swap at 64 B: 22 rx ticks per packet before). Bytes past the header
        // are the template's zeros, inside the 2 KiB buffer.
        let dst: &mut [u8; HDR_SLOT] = (&mut m.data[..HDR_SLOT])
            .try_into()
            .expect("MBUF_DATA > HDR_SLOT");
        *dst = f.hdr;
        m.len = self.frame_len;
        if self.rss_at == RssAt::Nic {
            m.rss = f.rss;
            m.queue = f.queue;
            if let Some(c) = self.emitted.get_mut(usize::from(f.queue)) {
                *c += 1;
            }
        }
    }

    /// Whether [`Generator::classify`] does anything (software RSS).
    #[inline(always)]
    pub fn classifies(&self) -> bool {
        self.rss_at == RssAt::Cpu
    }

    /// The rx path's part with [`RssAt::Cpu`]: parse the frame, compute the
    /// Toeplitz hash, pick the queue, count it there (software RSS). A
    /// no-op with [`RssAt::Nic`].
    #[inline(always)]
    pub fn classify(&mut self, m: &mut Mbuf) {
        if self.rss_at == RssAt::Cpu {
            let h = match Frame::new_checked(m.frame()).and_then(|fr| fr.flow_tuple()) {
                Ok(t) => self.rss.hash(&t),
                Err(_) => {
                    self.parse_errors += 1;
                    0
                }
            };
            m.rss = h;
            m.queue = self.rss.queue_of(h) as u16;
            if let Some(c) = self.emitted.get_mut(usize::from(m.queue)) {
                *c += 1;
            }
        }
    }

    /// Starts the per-queue counts for `queues` queues.
    pub fn count_queues(&mut self, queues: usize) {
        self.emitted = vec![0; queues];
    }

    /// Fills and classifies (both halves, for callers that do not time
    /// them apart).
    #[inline(always)]
    pub fn fill_and_classify(&mut self, m: &mut Mbuf) {
        self.fill(m);
        self.classify(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mbuf::Pool;
    use crate::rss::{HashFields, STANDARD_KEY};

    #[test]
    fn frames_parse_and_carry_their_flow_hash() {
        for ip in [IpMix::V4, IpMix::V6, IpMix::Mix] {
            let rss = Rss::new(&STANDARD_KEY, HashFields::L4, 4);
            let mut nic = Generator::new(64, 128, ip, rss.clone(), RssAt::Nic);
            let mut cpu = Generator::new(64, 128, ip, rss.clone(), RssAt::Cpu);
            let mut pool = Pool::new(2);
            let mut a = pool.get().unwrap();
            let mut b = pool.get().unwrap();
            for _ in 0..200 {
                nic.fill_and_classify(&mut a);
                cpu.fill_and_classify(&mut b);
                assert_eq!(a.len, 124);
                assert_eq!(a.rss, b.rss);
                assert_eq!(a.queue, b.queue);
                let t = Frame::new_checked(a.frame()).unwrap().flow_tuple().unwrap();
                assert_eq!(rss.hash(&t), a.rss);
            }
            assert_eq!(cpu.parse_errors, 0);
        }
    }

    #[test]
    fn ipv6_that_does_not_fit_64_bytes_is_sent_as_ipv4_and_counted() {
        let rss = Rss::new(&STANDARD_KEY, HashFields::L4, 1);
        let g = Generator::new(8, 64, IpMix::V6, rss.clone(), RssAt::Nic);
        // 60 B holds neither IPv6+TCP (74) nor IPv6+UDP (62).
        assert_eq!(g.v6_downgraded, 8);
        assert_eq!(g.v6_flows, 0);
        let g = Generator::new(8, 128, IpMix::Mix, rss, RssAt::Nic);
        assert_eq!(g.v6_flows, 2);
        assert_eq!(g.v6_downgraded, 0);
    }

    #[test]
    fn many_flows_spread_over_queues() {
        let rss = Rss::new(&STANDARD_KEY, HashFields::L4, 4);
        let g = Generator::new(4096, 64, IpMix::V4, rss, RssAt::Nic);
        let mut c = [0u64; 4];
        for q in g.flow_queues() {
            c[q] += 1;
        }
        assert!(c.iter().all(|&n| n > 0), "{c:?}");
    }
}
