//! Message framing shared by every transport: a 16-byte header (payload
//! length, checksum, sequence number) followed by the payload.
//!
//! Invariants: the sequence number of session `s` counts from 0 in each
//! direction; the first 8 payload bytes (when the payload has that many)
//! carry the sequence number too, so a stale or replayed payload is caught
//! even without `--verify`; the checksum is 0 unless verification is on.
//! Serves the seed's reqres_loop / data_channel_write experiments, which
//! trusted every byte blindly.

use crate::error::{IpcError, Result};

/// Bytes in a frame header.
pub const HEADER_LEN: usize = 16;
/// Largest payload a message may carry (16 MiB).
pub const MAX_MSG_LEN: usize = 16 << 20;

/// A decoded frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    /// Payload length in bytes.
    pub len: u32,
    /// Checksum of the payload, or 0 when verification is off.
    pub check: u32,
    /// Per-session, per-direction sequence number.
    pub seq: u64,
}

impl Header {
    /// Encode to wire bytes (little-endian).
    #[inline]
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&self.len.to_le_bytes());
        b[4..8].copy_from_slice(&self.check.to_le_bytes());
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b
    }

    /// Decode from wire bytes; rejects lengths above [`MAX_MSG_LEN`].
    #[inline]
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header> {
        let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if len as usize > MAX_MSG_LEN {
            return Err(IpcError::TooLarge {
                len: len as u64,
                max: MAX_MSG_LEN as u64,
            });
        }
        Ok(Header {
            len,
            check: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            seq: u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
        })
    }
}

/// A 32-bit checksum of a payload: 64-bit words mixed by multiply-rotate,
/// then the tail bytes, then the length. Each step is a bijection of the
/// 64-bit state, so a single changed byte always changes that state; the
/// fold to 32 bits leaves a 2^-32 chance of a collision.
pub fn checksum(data: &[u8]) -> u32 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(tail))
        .wrapping_mul(K)
        .rotate_left(29);
    h = (h ^ data.len() as u64).wrapping_mul(K);
    (h ^ (h >> 32)) as u32
}

/// Fill a payload buffer once with a deterministic pattern.
pub fn fill_pattern(buf: &mut [u8], session: u32) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(31).wrapping_add(session) as u8;
    }
}

/// Stamp `seq` into the first 8 bytes of the payload (if it has them).
#[inline]
pub fn stamp(buf: &mut [u8], seq: u64) {
    if buf.len() >= 8 {
        buf[..8].copy_from_slice(&seq.to_le_bytes());
    }
}

/// Build the header for `payload` (already stamped).
#[inline]
pub fn header_for(payload: &[u8], seq: u64, verify: bool) -> Header {
    Header {
        len: payload.len() as u32,
        check: if verify { checksum(payload) } else { 0 },
        seq,
    }
}

/// Check a received frame: length, sequence (header and stamp) and, with
/// `verify`, the checksum. Errors name the session and sequence.
#[inline]
pub fn check_frame(
    session: u32,
    expect_seq: u64,
    expect_len: usize,
    h: &Header,
    payload: &[u8],
    verify: bool,
) -> Result<()> {
    let fail = |what: String| {
        Err(IpcError::Verify {
            session,
            seq: expect_seq,
            what,
        })
    };
    if h.seq != expect_seq {
        return fail(format!(
            "received sequence {} (message lost or reordered)",
            h.seq
        ));
    }
    if h.len as usize != expect_len {
        return fail(format!(
            "received length {} instead of {}",
            h.len, expect_len
        ));
    }
    if payload.len() >= 8 {
        let s = u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"));
        if s != expect_seq {
            return fail(format!(
                "payload carries sequence {s} (stale or corrupted payload)"
            ));
        }
    }
    if verify {
        let c = checksum(payload);
        if c != h.check {
            return fail(format!(
                "checksum mismatch: header {:#010x}, payload {:#010x} (corrupted payload)",
                h.check, c
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_round_trip() {
        let h = Header {
            len: 65532,
            check: 0xdead_beef,
            seq: 1 << 40,
        };
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn header_rejects_oversized_length() {
        let h = Header {
            len: (MAX_MSG_LEN + 1) as u32,
            check: 0,
            seq: 0,
        };
        assert!(matches!(
            Header::decode(&h.encode()),
            Err(IpcError::TooLarge { .. })
        ));
    }

    #[test]
    fn check_frame_names_session_and_sequence() {
        let mut p = vec![0u8; 64];
        stamp(&mut p, 7);
        let h = header_for(&p, 7, true);
        check_frame(3, 7, 64, &h, &p, true).unwrap();
        p[40] ^= 1;
        let e = check_frame(3, 7, 64, &h, &p, true).unwrap_err().to_string();
        assert!(e.contains("session 3") && e.contains("sequence 7"), "{e}");
        let e = check_frame(3, 8, 64, &h, &p, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("lost or reordered"), "{e}");
    }

    proptest! {
        #[test]
        fn checksum_detects_any_single_byte_change(
            data in proptest::collection::vec(any::<u8>(), 1..300),
            idx in any::<prop::sample::Index>(),
            delta in 1u8..=255,
        ) {
            let i = idx.index(data.len());
            let mut other = data.clone();
            other[i] = other[i].wrapping_add(delta);
            prop_assert_ne!(checksum(&data), checksum(&other));
        }

        #[test]
        fn header_decode_never_panics(b in proptest::array::uniform16(any::<u8>())) {
            let _ = Header::decode(&b);
        }
    }
}
