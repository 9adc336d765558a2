//! One emulated switch: its connection and buffers, the probe packet_in
//! template (latency mode) or ring of templates (throughput mode) stamped
//! in place with cbench's xid, buffer_id and MAC patterns, and the ring
//! that matches each response to the probe it answers.
//!
//! Invariants: a response matches a probe only once (the answered ring;
//! later ones are duplicates); a buffer_id outside the sequence or a probe
//! not yet sent never matches; a match more than `FAR_MATCH` probes back
//! is flagged, since the buffer_id wraps at `BUFFER_ID_MOD`; no division
//! per probe or per response.

use super::{CbenchConfig, ANSWER_RING_BITS, BUFFER_ID_MOD, FAR_MATCH, INBUF_LEN, OUTBUF_LEN};
use crate::wire::common::field as f;
use crate::wire::frame;
use crate::wire::{of10, of13, put32, NO_BUFFER, OFP10_VERSION, OFP13_VERSION};
use std::net::TcpStream;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SwState {
    /// Waiting for the controller's HELLO/FEATURES_REQUEST.
    Handshake,
    /// FEATURES_REPLY sent: may send probes.
    Ready,
    Closed,
}

pub(super) struct Switch {
    pub(super) idx: usize,
    pub(super) dpid: u64,
    pub(super) stream: TcpStream,
    pub(super) state: SwState,
    pub(super) version: u8,
    pub(super) inbuf: Box<[u8]>,
    pub(super) in_len: usize,
    /// Control replies (and latency-mode probes), written in order.
    pub(super) out: Vec<u8>,
    pub(super) out_pos: usize,
    /// What of this switch's unsent replies is in `Shared::reply_backlog`.
    pub(super) counted: usize,
    /// Throughput mode: a ring of probe templates at a fixed stride,
    /// written to the socket in place. A top-up stamps xid, buffer_id and
    /// MAC counter into the free slots after the unsent ones (three stores
    /// per probe) instead of copying 82 bytes per probe into `out` — that
    /// copy was about a fifth of the emulator's CPU. The ring holds twice
    /// cbench's 64 KiB of probes, so the unsent rest of a short write and
    /// a fresh top-up to 64 KiB go out in one call (two slices when they
    /// wrap), as cbench's one write per switch per poll turn does; a block
    /// that had to be finished before it could be refilled made two calls.
    /// Empty until the first top-up.
    pub(super) pblock: Vec<u8>,
    /// Byte offset of the first unsent probe byte in `pblock`.
    pub(super) pb_pos: usize,
    /// Unsent probe bytes from `pb_pos` on (wrapping); whole slots except
    /// for a first one that a short write left half sent.
    pub(super) pb_len: usize,
    /// Last write hit EAGAIN; wait for EPOLLOUT.
    pub(super) blocked: bool,
    probe: Vec<u8>,
    frame_off: usize,
    pub(super) next_seq: u64,
    /// `(next_seq + 1) % BUFFER_ID_MOD` and `next_seq % mac_mod`, kept
    /// incrementally: no division per probe or per response.
    next_bid: u64,
    next_mac: u32,
    /// xid of probe 0: 1, or 2 when the learn-dst-mac packet_in took xid 1
    /// (cbench's per-switch xid counter is shared by both).
    xid_base: u64,
    pub(super) in_flight: usize,
    /// Throughput mode: probes sent and not yet answered (reset per window).
    pub(super) tp_in_flight: u64,
    answered: Vec<u64>,
    pub(super) sent_ns: Vec<u64>,
    pub(super) config_flags: u16,
    pub(super) miss_send_len: u16,
    pub(super) window_count: u64,
    pub(super) warned_types: u32,
}

impl Switch {
    pub(super) fn new(idx: usize, dpid: u64, stream: TcpStream, cfg: &CbenchConfig) -> Switch {
        let version = if cfg.of13 {
            OFP13_VERSION
        } else {
            OFP10_VERSION
        };
        let frame = frame::probe_frame(dpid, 0);
        let (probe, frame_off) = if cfg.of13 {
            let pi = of13::Repr::new(
                0,
                of13::Message::PacketIn(of13::PacketIn {
                    buffer_id: 0,
                    total_len: frame.len() as u16,
                    reason: 0,
                    table_id: 0,
                    cookie: 0,
                    match_: of13::Match {
                        fields: vec![of13::Oxm::basic(of13::OXM_IN_PORT, &1u32.to_be_bytes())],
                    },
                    data: frame.to_vec(),
                }),
            )
            .to_bytes();
            let off = pi.len() - frame.len();
            (pi, off)
        } else {
            let pi = of10::Repr::new(
                0,
                of10::Message::PacketIn(of10::PacketIn {
                    buffer_id: 0,
                    total_len: frame.len() as u16,
                    in_port: 1,
                    reason: of10::OFPR_NO_MATCH,
                    data: frame.to_vec(),
                }),
            )
            .to_bytes();
            (pi, of10::PACKET_IN_LEN)
        };
        let ring = if cfg.throughput {
            0
        } else {
            cfg.outstanding.next_power_of_two()
        };
        Switch {
            idx,
            dpid,
            stream,
            state: SwState::Handshake,
            version,
            inbuf: vec![0u8; INBUF_LEN].into_boxed_slice(),
            in_len: 0,
            out: Vec::with_capacity(OUTBUF_LEN + 4096),
            out_pos: 0,
            counted: 0,
            pblock: Vec::new(),
            pb_pos: 0,
            pb_len: 0,
            blocked: false,
            probe,
            frame_off,
            next_seq: 0,
            next_bid: 1,
            next_mac: 0,
            xid_base: if cfg.learn_dst_macs { 2 } else { 1 },
            in_flight: 0,
            tp_in_flight: 0,
            answered: vec![0u64; (ANSWER_RING_BITS / 64) as usize],
            sent_ns: vec![0u64; ring],
            config_flags: 0,
            // cbench answers GET_CONFIG with zeros until a SET_CONFIG.
            miss_send_len: 0,
            window_count: 0,
            warned_types: 0,
        }
    }

    pub(super) fn pending_out(&self) -> usize {
        self.out.len() - self.out_pos + self.pb_len
    }

    /// The unsent probes as at most two slices (the ring wraps once).
    pub(super) fn probe_slices(&self) -> (&[u8], &[u8]) {
        let end = self.pb_pos + self.pb_len;
        if end <= self.pblock.len() {
            (&self.pblock[self.pb_pos..end], &[])
        } else {
            (
                &self.pblock[self.pb_pos..],
                &self.pblock[..end - self.pblock.len()],
            )
        }
    }

    /// `n` probe bytes went out.
    pub(super) fn probes_sent(&mut self, n: usize) {
        self.pb_len -= n;
        self.pb_pos += n;
        if self.pb_pos >= self.pblock.len() {
            self.pb_pos -= self.pblock.len();
        }
        if self.pb_len == 0 {
            // Start over at the front: the next write is one slice.
            self.pb_pos = 0;
        }
    }

    /// Stamps the next probe's xid, buffer_id and MAC counter into `p` (a
    /// probe template) and marks it unanswered; returns its sequence number.
    #[inline(always)]
    fn stamp(&mut self, at: Stamp, mac_mod: u32) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let xid = (seq + self.xid_base) as u32;
        let bid = self.next_bid as u32;
        self.next_bid += 1;
        if self.next_bid == BUFFER_ID_MOD {
            self.next_bid = 0;
        }
        let mac = self.next_mac;
        self.next_mac += 1;
        if self.next_mac >= mac_mod {
            self.next_mac = 0;
        }
        let mo = self.frame_off + frame::PROBE_MAC_COUNTER_OFFSET;
        let p = match at {
            Stamp::Template => &mut self.probe[..],
            Stamp::Block(off) => &mut self.pblock[off..],
        };
        put32(p, f::XID, xid);
        put32(p, f::BUFFER_ID, bid);
        p[mo..mo + 4].copy_from_slice(&mac.to_ne_bytes());
        let slot = seq % ANSWER_RING_BITS;
        self.answered[(slot / 64) as usize] &= !(1u64 << (slot % 64));
        seq
    }

    /// Append one probe packet_in to `out` (latency mode).
    #[inline]
    pub(super) fn push_probe(&mut self, mac_mod: u32, now: u64) {
        let seq = self.stamp(Stamp::Template, mac_mod);
        self.out.extend_from_slice(&self.probe);
        if !self.sent_ns.is_empty() {
            let m = self.sent_ns.len() as u64 - 1;
            self.sent_ns[(seq & m) as usize] = now;
        }
    }

    /// Throughput mode: stamps probes into the ring's free slots until
    /// `OUTBUF_LEN` bytes of probes are unsent (cbench's "keep the buffer
    /// full"), at most `max`; returns how many.
    pub(super) fn top_up_ring(&mut self, mac_mod: u32, max: u64) -> u64 {
        let plen = self.probe.len();
        let per_fill = (OUTBUF_LEN / plen).max(1);
        if self.pblock.is_empty() {
            self.pblock.reserve_exact(2 * per_fill * plen);
            for _ in 0..2 * per_fill {
                self.pblock.extend_from_slice(&self.probe);
            }
        }
        let room = (per_fill * plen).saturating_sub(self.pb_len) / plen;
        let n = (room as u64).min(max);
        // The first free slot: the unsent bytes end on a slot boundary.
        let mut at = self.pb_pos + self.pb_len;
        if at >= self.pblock.len() {
            at -= self.pblock.len();
        }
        for _ in 0..n {
            self.stamp(Stamp::Block(at), mac_mod);
            at += plen;
            if at == self.pblock.len() {
                at = 0;
            }
        }
        self.pb_len += n as usize * plen;
        n
    }

    /// Accounts a response naming `buffer_id` / `xid`: the first answer to
    /// a probe of ours is marked in the answered ring and is a match.
    #[inline(always)]
    pub(super) fn answer(&mut self, buffer_id: u32, xid: u32) -> Answer {
        let Some(seq) = self.probe_seq(buffer_id, xid) else {
            return Answer::Unmatched;
        };
        let slot = seq % ANSWER_RING_BITS;
        let (w, b) = ((slot / 64) as usize, 1u64 << (slot % 64));
        if self.answered[w] & b != 0 {
            return Answer::Duplicate;
        }
        self.answered[w] |= b;
        Answer::Matched {
            seq,
            far: self.next_seq - seq > FAR_MATCH,
        }
    }

    /// Which probe a response names: by buffer_id, else by xid.
    #[inline]
    fn probe_seq(&self, buffer_id: u32, xid: u32) -> Option<u64> {
        let sent = self.next_seq;
        if buffer_id != NO_BUFFER {
            let next_bid = self.next_bid;
            let b = buffer_id as u64;
            if b >= BUFFER_ID_MOD {
                return None;
            }
            let delta = if next_bid >= b {
                next_bid - b
            } else {
                next_bid + BUFFER_ID_MOD - b
            };
            (delta >= 1 && delta <= sent).then(|| sent - delta)
        } else {
            let delta = ((sent + self.xid_base) as u32).wrapping_sub(xid) as u64;
            (xid != 0 && delta >= 1 && delta <= sent.min(BUFFER_ID_MOD)).then(|| sent - delta)
        }
    }
}

/// How a response relates to the probes sent.
pub(super) enum Answer {
    /// First answer to probe `seq`; `far` when it is older than FAR_MATCH.
    Matched {
        seq: u64,
        far: bool,
    },
    Duplicate,
    /// Names no probe of ours.
    Unmatched,
}

/// Where `Switch::stamp` writes: the latency-mode template, or a slot of
/// the throughput-mode probe ring at a byte offset.
#[derive(Clone, Copy)]
enum Stamp {
    Template,
    Block(usize),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::be32;

    #[test]
    fn probe_matching_by_buffer_id_and_xid() {
        // A Switch owns a TcpStream; build one over loopback.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let cfg = CbenchConfig::default();
        let mut s = Switch::new(0, 1, c, &cfg);
        for _ in 0..5 {
            s.push_probe(100000, 0);
        }
        assert_eq!(s.probe.len(), 82);
        // Probes 0..5 have buffer_ids 1..=5 and xids 2..=6 (the learn-dst-mac
        // packet_in took xid 1).
        assert_eq!(s.probe_seq(1, 0), Some(0));
        assert_eq!(s.probe_seq(5, 0), Some(4));
        assert_eq!(s.probe_seq(6, 0), None, "not sent yet");
        assert_eq!(s.probe_seq(0, 0), None);
        assert_eq!(s.probe_seq(NO_BUFFER, 4), Some(2));
        assert_eq!(s.probe_seq(NO_BUFFER, 6), Some(4));
        assert_eq!(s.probe_seq(NO_BUFFER, 7), None, "not sent yet");
        assert_eq!(
            s.probe_seq(NO_BUFFER, 1),
            None,
            "the ARP's xid 1 is no probe"
        );
        assert_eq!(s.probe_seq(200000, 0), None);
        // Wrap-around of the buffer_id sequence.
        for _ in 5..100_003 {
            s.push_probe(100000, 0);
        }
        // seq 100002 has buffer_id 100003 % 100000 = 3
        assert_eq!(s.probe_seq(3, 0), Some(100_002));
        assert_eq!(s.probe_seq(99_999, 0), Some(99_998));
        // Probe bytes carry the patterns of cbench's fakeswitch.c.
        let p = of10::PacketInView::new_checked(&s.probe[..]).unwrap();
        assert_eq!(p.buffer_id(), 3);
        assert_eq!(p.xid(), 100_004);
        assert_eq!(p.in_port(), 1);
        assert_eq!(p.total_len(), 64);
        let mac = u32::from_ne_bytes(p.data()[7..11].try_into().unwrap());
        assert_eq!(mac, 100_002 % 100000);
    }

    #[test]
    fn probe_xids_count_from_1_without_learning() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let cfg = CbenchConfig {
            learn_dst_macs: false,
            ..Default::default()
        };
        let mut s = Switch::new(0, 1, c, &cfg);
        s.push_probe(100000, 0);
        assert_eq!(be32(&s.probe, 4), 1);
        assert_eq!(s.probe_seq(NO_BUFFER, 1), Some(0));
    }

    #[test]
    fn the_probe_ring_sends_every_probe_once_in_order_across_wraps() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let cfg = CbenchConfig::default();
        let mut s = Switch::new(0, 1, c, &cfg);
        let plen = s.probe.len();
        let mut sent = Vec::new();
        // Short writes of odd sizes, each followed by a top-up: the unsent
        // rest and the fresh probes must read as one run of whole probes.
        for (i, chunk) in [10_000usize, 65_536, 123, 40_000, 7, 65_000, 30_001, 99]
            .iter()
            .cycle()
            .take(40)
            .enumerate()
        {
            s.top_up_ring(100000, u64::MAX);
            assert!(s.pb_len <= OUTBUF_LEN, "step {i}: {} unsent", s.pb_len);
            let (a, b) = s.probe_slices();
            let mut all = a.to_vec();
            all.extend_from_slice(b);
            assert_eq!(all.len(), s.pb_len);
            let n = (*chunk).min(all.len());
            sent.extend_from_slice(&all[..n]);
            s.probes_sent(n);
        }
        let whole = sent.len() / plen * plen;
        let mut expect_xid = 2u32;
        for p in sent[..whole].chunks(plen) {
            let v = of10::PacketInView::new_checked(p).unwrap();
            assert_eq!(v.xid(), expect_xid);
            assert_eq!(v.buffer_id(), expect_xid - 1);
            expect_xid += 1;
        }
        assert!(expect_xid > 1000, "the ring wrapped several times");
    }
}
