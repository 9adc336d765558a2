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

/// Reads every byte of `data` (an XOR of its 64-bit words, kept from the
/// optimizer): how a consumer handed a message where it lies reads it, so
/// that every byte crosses to its CPU as it would in a copy. One 64-byte
/// load per cache line where the CPU has them: lines that come from the
/// other CPU's cache arrive as fast as the loads in flight allow, and
/// 16-byte loads keep a quarter as many lines in flight (docs/ipc.md).
#[inline]
pub fn read_every_byte(data: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if wide_loads() {
        // SAFETY: the CPU has AVX-512F (checked at run time).
        #[allow(unsafe_code)]
        return std::hint::black_box(unsafe { fold_avx512(data) });
    }
    std::hint::black_box(fold_words(data))
}

/// Whether this CPU reads a message in place faster than memmove copies
/// it out: with 64-byte loads (AVX-512F). With 16-byte loads an in-place
/// read of a 64 KiB message from the other CPU's cache ran 9% slower
/// than glibc's memmove; with 64-byte loads 15% faster (docs/ipc.md).
#[inline]
pub fn wide_loads() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The portable fold: 64-bit words, then the tail bytes.
fn fold_words(data: &[u8]) -> u64 {
    let mut acc = [0u64; 8];
    let mut chunks = data.chunks_exact(64);
    for c in &mut chunks {
        for (i, a) in acc.iter_mut().enumerate() {
            *a ^= u64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        }
    }
    fold_tail(acc.iter().fold(0, |a, b| a ^ b), chunks.remainder())
}

fn fold_tail(mut x: u64, rest: &[u8]) -> u64 {
    let mut words = rest.chunks_exact(8);
    for w in &mut words {
        x ^= u64::from_le_bytes(w.try_into().expect("8 bytes"));
    }
    for &b in words.remainder() {
        x = x.rotate_left(8) ^ b as u64;
    }
    x
}

/// [`fold_words`] with 64-byte loads; the same result.
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "avx512f")]
unsafe fn fold_avx512(data: &[u8]) -> u64 {
    use core::arch::x86_64::{
        __m512i, _mm512_loadu_si512, _mm512_setzero_si512, _mm512_storeu_si512, _mm512_xor_si512,
    };
    let mut a = _mm512_setzero_si512();
    let mut b = _mm512_setzero_si512();
    let mut i = 0;
    let p = data.as_ptr();
    while i + 128 <= data.len() {
        // SAFETY: i + 128 <= len: both loads lie in `data`.
        unsafe {
            a = _mm512_xor_si512(a, _mm512_loadu_si512(p.add(i) as *const __m512i));
            b = _mm512_xor_si512(b, _mm512_loadu_si512(p.add(i + 64) as *const __m512i));
        }
        i += 128;
    }
    if i + 64 <= data.len() {
        // SAFETY: as above.
        unsafe { a = _mm512_xor_si512(a, _mm512_loadu_si512(p.add(i) as *const __m512i)) };
        i += 64;
    }
    let mut lanes = [0u64; 8];
    // SAFETY: lanes is 64 bytes.
    unsafe { _mm512_storeu_si512(lanes.as_mut_ptr() as *mut __m512i, _mm512_xor_si512(a, b)) };
    fold_tail(lanes.iter().fold(0, |x, y| x ^ y), &data[i..])
}

/// [`check_frame`] for a payload lent in parts ([`crate::transport::Lent`]).
/// Bytes lent in place are read whole here (by the checksum with
/// `verify`, else by [`read_every_byte`]); bytes received into a buffer
/// were read by that copy. A checksum over a wrapped payload joins its
/// parts in `scratch` first.
pub fn check_lent(
    session: u32,
    expect_seq: u64,
    expect_len: usize,
    h: &Header,
    lent: crate::transport::Lent<'_>,
    verify: bool,
    scratch: &mut Vec<u8>,
) -> Result<()> {
    let [a, b] = lent.parts;
    if b.is_empty() {
        check_frame(session, expect_seq, expect_len, h, a, verify)?;
        if lent.in_place && !verify {
            read_every_byte(a);
        }
        return Ok(());
    }
    if verify || a.len() < 8 {
        scratch.clear();
        scratch.extend_from_slice(a);
        scratch.extend_from_slice(b);
        return check_frame(session, expect_seq, expect_len, h, scratch, verify);
    }
    check_frame(session, expect_seq, expect_len, h, a, false)?;
    if a.len() + b.len() != expect_len {
        return Err(IpcError::Verify {
            session,
            seq: expect_seq,
            what: format!(
                "received {} bytes of a {}-byte payload",
                a.len() + b.len(),
                h.len
            ),
        });
    }
    read_every_byte(a);
    read_every_byte(b);
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

    /// The wide fold reads the same words as the portable one, for every
    /// length and alignment, so a changed byte changes both.
    #[test]
    fn the_wide_fold_agrees_with_the_portable_one() {
        let data: Vec<u8> = (0..1200u32).map(|i| (i * 131 + i / 7) as u8).collect();
        for off in [0, 1, 5, 63] {
            for len in (0..400).chain([1024, 1100]) {
                let d = &data[off..off + len];
                assert_eq!(read_every_byte(d), fold_words(d), "len {len} at +{off}");
                if len > 0 {
                    let mut e = d.to_vec();
                    e[len - 1] ^= 0x10;
                    assert_ne!(read_every_byte(&e), read_every_byte(d), "len {len}");
                }
            }
        }
    }

    /// A payload lent in two parts (wrapped at a ring's end) is checked
    /// whole: its stamp even when the split cuts it, its length, and with
    /// verification its checksum over both parts.
    #[test]
    fn a_payload_lent_in_two_parts_is_checked_whole() {
        use crate::transport::Lent;
        let mut p = vec![0u8; 300];
        fill_pattern(&mut p, 2);
        stamp(&mut p, 9);
        let h = header_for(&p, 9, true);
        let mut scratch = Vec::new();
        for cut in [0, 3, 8, 150, 299, 300] {
            let (a, b) = p.split_at(cut);
            let lent = Lent {
                parts: [a, b],
                in_place: true,
            };
            for verify in [false, true] {
                check_lent(2, 9, 300, &h, lent, verify, &mut scratch).unwrap();
                let e = check_lent(2, 10, 300, &h, lent, verify, &mut scratch).unwrap_err();
                assert!(e.to_string().contains("sequence"), "{e}");
            }
            let mut q = p.clone();
            q[299] ^= 1;
            let (a, b) = q.split_at(cut);
            let lent = Lent {
                parts: [a, b],
                in_place: true,
            };
            let e = check_lent(2, 9, 300, &h, lent, true, &mut scratch).unwrap_err();
            assert!(e.to_string().contains("checksum"), "cut {cut}: {e}");
        }
        // Fewer bytes than the header says.
        let lent = Lent {
            parts: [&p[..100], &p[100..200]],
            in_place: true,
        };
        let short = Header { len: 300, ..h };
        assert!(check_lent(2, 9, 300, &short, lent, false, &mut scratch).is_err());
    }
}
