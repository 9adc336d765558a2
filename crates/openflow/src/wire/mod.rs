//! OpenFlow wire formats: what every version shares ([`common`]: the 8-byte
//! header, stream framing, the common bodies and the action walk), the
//! per-version codecs ([`of10`], [`of13`]) plus the Ethernet/ARP/IPv4 frame
//! reader ([`frame`]) that builds exact matches from a packet_in's payload.
//!
//! Invariants: untrusted bytes enter only through a `new_checked`
//! constructor or a `parse` function; every length field is validated
//! against the buffer before any field behind it is read, so a malformed
//! message is a [`WireError`], never a panic, and nothing is ever allocated
//! with a size taken from the peer (an OpenFlow message is at most 65535
//! bytes because its length field is 16 bits). Seed: cbench-trema-speedup —
//! the codec is the "general encoder" whose per-message cost the seed
//! profiled; the controller's template path bypasses it.

#![deny(unsafe_code)]

pub mod common;
pub mod frame;
pub mod of10;
pub mod of13;

pub use common::{frame_len, Header};

/// OpenFlow 1.0 wire version.
pub const OFP10_VERSION: u8 = 0x01;
/// OpenFlow 1.3 wire version.
pub const OFP13_VERSION: u8 = 0x04;
/// Size of `ofp_header`.
pub const HEADER_LEN: usize = 8;
/// Largest possible OpenFlow message (16-bit length field).
pub const MAX_MESSAGE_LEN: usize = 65535;
/// `OFP_NO_BUFFER`: the packet is not buffered on the switch.
pub const NO_BUFFER: u32 = 0xffff_ffff;

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("bad length {length} in {what} (available {have} bytes)")]
    BadLength {
        what: &'static str,
        length: usize,
        have: usize,
    },
    #[error("unsupported OpenFlow version {0:#04x}")]
    BadVersion(u8),
    #[error("malformed {what}: {why}")]
    Malformed {
        what: &'static str,
        why: &'static str,
    },
}

pub type Result<T> = core::result::Result<T, WireError>;

#[inline]
pub(crate) fn need(what: &'static str, buf: &[u8], n: usize) -> Result<()> {
    if buf.len() < n {
        Err(WireError::Truncated {
            what,
            need: n,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

#[inline]
pub(crate) fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}
#[inline]
pub(crate) fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
#[inline]
pub(crate) fn be64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(a)
}
#[inline]
pub(crate) fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}
/// Read a fixed-size NUL-padded string field.
pub(crate) fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Write `s` into a fixed-size field, truncated to leave a NUL terminator.
pub(crate) fn put_cstr(out: &mut Vec<u8>, s: &str, width: usize) {
    let bytes = s.as_bytes();
    let mut n = bytes.len().min(width - 1);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    out.extend_from_slice(&bytes[..n]);
    out.resize(out.len() + (width - n), 0);
}

/// The body of the `openflow_decode` fuzz target, shared with a stable
/// test that replays the committed seeds and their mutations: frame a byte
/// stream, decode every message with both codecs and the checked views,
/// and require that every successful decode re-encodes to a fixed point.
/// Panics on a codec bug; never on bad input.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) {
    let mut rest = data;
    while let Ok(Some(n)) = frame_len(rest) {
        let msg = &rest[..n];
        if let Ok(r) = of10::Repr::parse(msg) {
            let r2 = of10::Repr::parse(&r.to_bytes()).expect("re-encoded 1.0 parses");
            assert_eq!(of10::Repr::parse(&r2.to_bytes()).unwrap(), r2);
        }
        if let Ok(r) = of13::Repr::parse(msg) {
            let r2 = of13::Repr::parse(&r.to_bytes()).expect("re-encoded 1.3 parses");
            assert_eq!(of13::Repr::parse(&r2.to_bytes()).unwrap(), r2);
        }
        if let Ok(pi) = of10::PacketInView::new_checked(msg) {
            let t = of10::FlowModTemplate::new(0, 0, 0x8000);
            let mut out = [0u8; of10::FLOW_MOD_TEMPLATE_LEN];
            t.write(&mut out, pi.xid(), &pi);
            assert!(of10::Repr::parse(&out).is_ok());
        }
        if let Ok(pi) = of13::PacketInView::new_checked(msg) {
            let k = frame::FlowKey::extract(pi.data()).unwrap_or_default();
            let mut out = Vec::new();
            of13::write_exact_flow_mod(&mut out, pi.xid(), pi.in_port().unwrap_or(0), &k, 1);
            assert!(of13::Repr::parse(&out).is_ok());
        }
        let _ = of13::negotiate(msg, &[1, 4]);
        rest = &rest[n..];
    }
    let _ = frame::FlowKey::extract(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_len_waits_for_whole_message() {
        assert_eq!(frame_len(&[1, 0, 0]).unwrap(), None);
        assert_eq!(frame_len(&[1, 0, 0, 8, 0, 0, 0, 1]).unwrap(), Some(8));
        assert_eq!(frame_len(&[1, 2, 0, 12, 0, 0, 0, 1, 0]).unwrap(), None);
    }

    #[test]
    fn frame_len_rejects_length_below_header() {
        assert!(matches!(
            frame_len(&[1, 0, 0, 7, 0, 0, 0, 1]),
            Err(WireError::BadLength { length: 7, .. })
        ));
        assert!(frame_len(&[1, 0, 0, 0, 0, 0, 0, 1]).is_err());
    }

    #[test]
    fn header_checked_requires_exact_length() {
        assert!(Header::new_checked(&[1u8, 0, 0, 8, 0, 0, 0, 1][..]).is_ok());
        assert!(Header::new_checked(&[1u8, 0, 0, 9, 0, 0, 0, 1][..]).is_err());
        assert!(Header::new_checked(&[1u8, 0, 0, 8, 0, 0, 0, 1, 0][..]).is_err());
        assert!(Header::new_checked(&[1u8, 0, 0][..]).is_err());
    }
}
