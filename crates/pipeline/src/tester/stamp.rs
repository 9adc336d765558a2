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
        }
    }
}
