//! The tester's frame stamp: flow id, sequence number and TX timestamp in
//! the first 18 payload bytes after Ethernet + IPv4 + UDP, so it fits a
//! 64 B frame (60 B without FCS = 42 B of headers + 18).
//!
//! ```text
//! offset 42  "CBPL"          magic (the XDP redirect program's mark)
//!        46  0xC1            version (tester stamp v1)
//!        47  flow id         u16, big endian
//!        49  sequence        u40, big endian (per flow, from 0)
//!        54  tx timestamp    u48, big endian: ns since the trial's epoch
//! ```
//!
//! A replayed capture's frame carries the same 18 bytes (version 0xC3)
//! and its class as a trailer of [`TRAILER_LEN`] bytes right past its IP
//! datagram, where no IP stack reads ([`super::replay`]).
//!
//! Frames of `pipeline netns` carry the same magic followed by a u64
//! sequence number whose first byte is 0 below 2^56, so the version byte
//! tells the two apart. Anything else on the wire is foreign.

use crate::wire::{ETH_HDR, IPV4_HDR, UDP_HDR};

/// Where the stamp starts.
pub const STAMP_OFF: usize = ETH_HDR + IPV4_HDR + UDP_HDR;
/// Bytes of the stamp.
pub const STAMP_LEN: usize = 18;
/// The stamp's magic (shared with the XDP program's filter).
pub const MAGIC: [u8; 4] = crate::netns::MAGIC;
/// Version byte of this layout.
pub const VERSION: u8 = 0xC1;
/// Largest sequence number a stamp holds (u40).
pub const MAX_SEQ: u64 = (1 << 40) - 1;
/// Largest timestamp a stamp holds (u48 ns: 78 hours).
pub const MAX_TS: u64 = (1 << 48) - 1;

/// A parsed stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub flow: u16,
    pub seq: u64,
    /// ns since the trial's epoch.
    pub tx_ns: u64,
}

/// Why a frame is not one of ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotOurs {
    /// Shorter than headers + stamp.
    Short,
    /// No magic where the stamp belongs.
    Foreign,
    /// Our magic with another version byte (e.g. a `pipeline netns` frame).
    Version(u8),
}

/// Reads the stamp of `frame` (the frame as received, without FCS); checks
/// the length first, never panics.
pub fn parse(frame: &[u8]) -> Result<Stamp, NotOurs> {
    let Some(s) = frame.get(STAMP_OFF..STAMP_OFF + STAMP_LEN) else {
        return Err(NotOurs::Short);
    };
    if s[..4] != MAGIC {
        return Err(NotOurs::Foreign);
    }
    if s[4] != VERSION {
        return Err(NotOurs::Version(s[4]));
    }
    let flow = u16::from_be_bytes([s[5], s[6]]);
    let mut seq = 0u64;
    for &b in &s[7..12] {
        seq = (seq << 8) | u64::from(b);
    }
    let mut ts = 0u64;
    for &b in &s[12..18] {
        ts = (ts << 8) | u64::from(b);
    }
    Ok(Stamp {
        flow,
        seq,
        tx_ns: ts,
    })
}

/// Writes magic, version, flow and sequence (the timestamp is written at
/// departure by [`write_ts`]). `frame` must hold the stamp.
#[inline]
pub fn write_id(frame: &mut [u8], flow: u16, seq: u64) {
    let s = &mut frame[STAMP_OFF..STAMP_OFF + STAMP_LEN];
    s[..4].copy_from_slice(&MAGIC);
    s[4] = VERSION;
    s[5..7].copy_from_slice(&flow.to_be_bytes());
    s[7..12].copy_from_slice(&(seq & MAX_SEQ).to_be_bytes()[3..]);
}

/// Writes the TX timestamp (ns since the epoch, wrapped to 48 bits).
#[inline]
pub fn write_ts(frame: &mut [u8], tx_ns: u64) {
    frame[STAMP_OFF + 12..STAMP_OFF + 18].copy_from_slice(&(tx_ns & MAX_TS).to_be_bytes()[2..]);
}

/// Bytes of the trailer a replayed frame carries past its IP datagram:
/// the stamp's 18 and the frame's class (see [`super::replay`]).
pub const TRAILER_LEN: usize = STAMP_LEN + 1;
/// Version byte of the trailer stamp (a replayed capture's frames).
pub const TRAILER_VERSION: u8 = 0xC3;

/// Writes a replayed frame's trailer at `at` (the end of its datagram):
/// magic, version, flow, sequence and class (the timestamp is written at
/// departure by [`write_ts_at`]). `frame` must hold `at + TRAILER_LEN`.
#[inline]
pub fn write_trailer(frame: &mut [u8], at: usize, flow: u16, seq: u64, class: u8) {
    let s = &mut frame[at..at + TRAILER_LEN];
    s[..4].copy_from_slice(&MAGIC);
    s[4] = TRAILER_VERSION;
    s[5..7].copy_from_slice(&flow.to_be_bytes());
    s[7..12].copy_from_slice(&(seq & MAX_SEQ).to_be_bytes()[3..]);
    s[18] = class;
}

/// Writes the TX timestamp of a stamp that starts at `at`.
#[inline]
pub fn write_ts_at(frame: &mut [u8], at: usize, tx_ns: u64) {
    frame[at + 12..at + 18].copy_from_slice(&(tx_ns & MAX_TS).to_be_bytes()[2..]);
}

/// Where a received frame's trailer starts: right past its IP datagram
/// (IPv4 total length, IPv6 payload length, after any VLAN tags), or in
/// its last [`TRAILER_LEN`] bytes (a frame that is not IP, or whose
/// padding a device stripped or added); None without the magic at either.
pub fn trailer_at(frame: &[u8]) -> Option<usize> {
    let magic_at = |at: usize| frame.get(at..at + 4) == Some(&MAGIC[..]);
    if let Some(end) = datagram_end(frame) {
        if end + TRAILER_LEN <= frame.len() && magic_at(end) {
            return Some(end);
        }
    }
    let at = frame.len().checked_sub(TRAILER_LEN)?;
    magic_at(at).then_some(at)
}

/// The end of the IP datagram a frame carries (after up to four VLAN
/// tags), from the IP header's length field; None for a frame that is
/// not IPv4 or IPv6 or is too short to say.
pub fn datagram_end(frame: &[u8]) -> Option<usize> {
    let mut at = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    for _ in 0..4 {
        if !matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) {
            break;
        }
        at += 4;
        ethertype = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
    }
    let l3 = at + 2;
    match ethertype {
        0x0800 => {
            let tl = u16::from_be_bytes([*frame.get(l3 + 2)?, *frame.get(l3 + 3)?]);
            (tl >= 20).then_some(l3 + usize::from(tl))
        }
        0x86dd => {
            let pl = u16::from_be_bytes([*frame.get(l3 + 4)?, *frame.get(l3 + 5)?]);
            // Payload length 0 is a jumbogram's: its length is elsewhere.
            (pl > 0).then_some(l3 + 40 + usize::from(pl))
        }
        _ => None,
    }
}

/// Reads a replayed frame's trailer: the stamp and the frame's class.
pub fn parse_trailer(frame: &[u8]) -> Result<(Stamp, u8), NotOurs> {
    if frame.len() < ETH_HDR + TRAILER_LEN {
        return Err(NotOurs::Short);
    }
    let Some(at) = trailer_at(frame) else {
        return Err(NotOurs::Foreign);
    };
    let s = &frame[at..at + TRAILER_LEN];
    if s[4] != TRAILER_VERSION {
        return Err(NotOurs::Version(s[4]));
    }
    Ok((fields(s), s[18]))
}

/// Flow, sequence and timestamp of a stamp's 18 bytes.
fn fields(s: &[u8]) -> Stamp {
    let flow = u16::from_be_bytes([s[5], s[6]]);
    let mut seq = 0u64;
    for &b in &s[7..12] {
        seq = (seq << 8) | u64::from(b);
    }
    let mut ts = 0u64;
    for &b in &s[12..18] {
        ts = (ts << 8) | u64::from(b);
    }
    Stamp {
        flow,
        seq,
        tx_ns: ts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_64_byte_frame_holds_the_stamp() {
        assert_eq!(STAMP_OFF + STAMP_LEN, 60);
    }

    #[test]
    fn short_foreign_and_other_versions_are_told_apart() {
        assert_eq!(parse(&[0u8; 59]), Err(NotOurs::Short));
        assert_eq!(parse(&[0u8; 60]), Err(NotOurs::Foreign));
        let mut f = vec![0u8; 60];
        f[STAMP_OFF..STAMP_OFF + 4].copy_from_slice(&MAGIC);
        // A `pipeline netns` frame: magic, then a u64 sequence number.
        f[STAMP_OFF + 4..STAMP_OFF + 12].copy_from_slice(&7u64.to_be_bytes());
        assert_eq!(parse(&f), Err(NotOurs::Version(0)));
    }

    proptest! {
        #[test]
        fn round_trip(flow: u16, seq in 0..=MAX_SEQ, ts in 0..=MAX_TS, extra in 0usize..1500) {
            let mut f = vec![0xAAu8; 60 + extra];
            write_id(&mut f, flow, seq);
            write_ts(&mut f, ts);
            prop_assert_eq!(parse(&f), Ok(Stamp { flow, seq, tx_ns: ts }));
        }

        #[test]
        fn never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&b);
            let _ = parse_trailer(&b);
        }
    }
}
