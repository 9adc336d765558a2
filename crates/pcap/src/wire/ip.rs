//! Network-layer views: IPv4 (with options and fragment fields) and IPv6
//! (with a walker over hop-by-hop, routing, fragment, destination-options,
//! AH and mobility extension headers that reports the final protocol).
//!
//! Invariants: an `Ipv4Packet` from `new_checked` holds its whole header
//! including options (IHL is checked against the buffer); `payload()` stops
//! at the total length when the capture holds more (Ethernet padding) and at
//! the buffer end when the capture was cut short. The IPv6 walker never
//! loops more often than the bytes allow: every extension header takes at
//! least 8 bytes, so a chain ends within `rest.len() / 8 + 1` steps (long
//! chains are walked to the end, as tshark does).

use super::{be16, ipproto, WireError};

/// IPv4 header view.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub const MIN_HEADER_LEN: usize = 20;

    /// Checks version 4, IHL >= 5 and that the header with its options fits.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < Self::MIN_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b[0] >> 4 != 4 || (b[0] & 0x0f) < 5 {
            return Err(WireError::Malformed);
        }
        if b.len() < ((b[0] & 0x0f) as usize) * 4 {
            return Err(WireError::Truncated);
        }
        Ok(Self { buffer })
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[0] & 0x0f) as usize) * 4
    }
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[1]
    }
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }
    pub fn dont_frag(&self) -> bool {
        self.buffer.as_ref()[6] & 0x40 != 0
    }
    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[6] & 0x20 != 0
    }
    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        be16(self.buffer.as_ref(), 6) & 0x1fff
    }
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[8]
    }
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[9]
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 10)
    }
    pub fn src_addr(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[12], b[13], b[14], b[15]]
    }
    pub fn dst_addr(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[16], b[17], b[18], b[19]]
    }
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::MIN_HEADER_LEN..self.header_len()]
    }
    /// The bytes after the header, up to the total length or the capture end.
    /// The bytes after the header up to the total length. A total length
    /// of 0 is what captures of TSO / BIG TCP sends show (the NIC or the
    /// stack fills it in later): then the payload is the rest of the
    /// captured frame, as tshark takes it.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let hl = self.header_len();
        let end = match self.total_len() {
            0 => b.len(),
            n => (n as usize).clamp(hl, b.len()),
        };
        &b[hl..end]
    }
}

/// RFC 1071 checksum of an IPv4 header (used by the generator and tests).
pub fn ipv4_header_checksum(header: &[u8]) -> u16 {
    let mut sum = 0u32;
    for (i, pair) in header.chunks(2).enumerate() {
        if i == 5 {
            continue; // the checksum field itself
        }
        let w = if pair.len() == 2 {
            u16::from_be_bytes([pair[0], pair[1]])
        } else {
            u16::from_be_bytes([pair[0], 0])
        };
        sum += w as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// IPv6 fixed header view (40 bytes).
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Result of walking an IPv6 extension-header chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Chain<'a> {
    /// Final protocol: the first next-header value that is not an extension
    /// header we walk (TCP, UDP, ICMPv6, ESP, No Next Header, ...).
    pub protocol: u8,
    /// The L4 bytes, when the chain ended inside the capture and this is not
    /// a non-first fragment.
    pub l4: Option<&'a [u8]>,
    /// A fragment header was present.
    pub fragment: bool,
    /// Fragment offset (8-byte units) when `fragment`.
    pub frag_offset: u16,
    /// The chain was cut short by the end of the capture.
    pub truncated: bool,
    /// Number of extension headers walked.
    pub ext_headers: u32,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub const HEADER_LEN: usize = 40;

    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let b = buffer.as_ref();
        if b.len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(WireError::Malformed);
        }
        Ok(Self { buffer })
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[6]
    }
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[7]
    }
    pub fn src_addr(&self) -> [u8; 16] {
        self.buffer.as_ref()[8..24].try_into().unwrap_or([0; 16])
    }
    pub fn dst_addr(&self) -> [u8; 16] {
        self.buffer.as_ref()[24..40].try_into().unwrap_or([0; 16])
    }
    /// Bytes after the fixed header, up to the payload length or capture end.
    /// The bytes after the fixed header up to the payload length. A
    /// payload length of 0 marks a jumbogram (RFC 2675; BIG TCP's
    /// hop-by-hop jumbo option): then the payload is the rest of the
    /// captured frame.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = match self.payload_len() {
            0 => b.len(),
            n => (Self::HEADER_LEN + n as usize).min(b.len()),
        };
        &b[Self::HEADER_LEN..end]
    }

    /// Walks the extension headers and returns the final protocol.
    pub fn chain(&self) -> Result<Ipv6Chain<'_>, WireError> {
        walk_ipv6_chain(self.next_header(), self.payload())
    }
}

/// Walks an IPv6 extension-header chain starting with next header `nh`
/// over `rest` (the bytes after the fixed header).
pub fn walk_ipv6_chain(mut nh: u8, mut rest: &[u8]) -> Result<Ipv6Chain<'_>, WireError> {
    let mut out = Ipv6Chain {
        protocol: nh,
        l4: None,
        fragment: false,
        frag_offset: 0,
        truncated: false,
        ext_headers: 0,
    };
    // Every extension header is at least 8 bytes long (AH: (0 + 2) * 4), so
    // the chain ends — at the final protocol, or cut short — within this
    // many steps; the bound is the packet itself, never a fixed count.
    let steps = rest.len() / 8 + 1;
    for _ in 0..steps {
        let len = match nh {
            ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS | ipproto::MOBILITY => {
                if rest.len() < 2 {
                    out.protocol = nh;
                    out.truncated = true;
                    return Ok(out);
                }
                (rest[1] as usize + 1) * 8
            }
            ipproto::AH => {
                if rest.len() < 2 {
                    out.protocol = nh;
                    out.truncated = true;
                    return Ok(out);
                }
                (rest[1] as usize + 2) * 4
            }
            ipproto::FRAGMENT => {
                if rest.len() < 8 {
                    out.protocol = nh;
                    out.truncated = true;
                    return Ok(out);
                }
                out.fragment = true;
                out.frag_offset = be16(rest, 2) >> 3;
                8
            }
            _ => {
                out.protocol = nh;
                if !(out.fragment && out.frag_offset != 0) {
                    out.l4 = Some(rest);
                }
                return Ok(out);
            }
        };
        // The next-header byte is inside the header we just measured.
        let next = rest[0];
        out.ext_headers += 1;
        if rest.len() < len {
            out.protocol = next;
            out.truncated = true;
            return Ok(out);
        }
        rest = &rest[len..];
        nh = next;
        if out.fragment && out.frag_offset != 0 {
            // Later headers of a non-first fragment are not in this packet.
            out.protocol = nh;
            return Ok(out);
        }
    }
    // Not reached (see `steps`); a defensive end all the same.
    out.protocol = nh;
    out.truncated = true;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn ipv4_header(proto: u8, total_len: u16, frag: u16, opts: &[u8]) -> Vec<u8> {
        let ihl = 5 + opts.len() / 4;
        let mut h = vec![0u8; 20];
        h[0] = 0x40 | ihl as u8;
        h[2..4].copy_from_slice(&total_len.to_be_bytes());
        h[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        h[6..8].copy_from_slice(&frag.to_be_bytes());
        h[8] = 63;
        h[9] = proto;
        h[12..16].copy_from_slice(&[10, 0, 0, 1]);
        h[16..20].copy_from_slice(&[192, 168, 1, 200]);
        h.extend_from_slice(opts);
        let c = ipv4_header_checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    #[test]
    fn ipv4_basic_and_options() {
        let mut p = ipv4_header(6, 44, 0x4000, &[1, 1, 1, 0]);
        p.extend_from_slice(&[0xab; 20]);
        p.extend_from_slice(&[0; 6]); // ethernet padding beyond total length
        let v = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert_eq!(v.header_len(), 24);
        assert_eq!(v.options(), &[1, 1, 1, 0]);
        assert_eq!(v.ttl(), 63);
        assert_eq!(v.protocol(), 6);
        assert!(v.dont_frag());
        assert!(!v.is_fragment());
        assert_eq!(v.src_addr(), [10, 0, 0, 1]);
        assert_eq!(v.dst_addr(), [192, 168, 1, 200]);
        assert_eq!(v.payload().len(), 20);
        assert_eq!(ipv4_header_checksum(&p[..24]), v.checksum());
    }

    #[test]
    fn ipv4_rejects_bad_ihl_and_short_options() {
        let mut p = ipv4_header(6, 20, 0, &[]);
        p[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&p[..]).unwrap_err(),
            WireError::Malformed
        );
        let p = ipv4_header(6, 28, 0, &[0; 8]);
        assert_eq!(
            Ipv4Packet::new_checked(&p[..24]).unwrap_err(),
            WireError::Truncated
        );
    }

    #[test]
    fn ipv4_fragments() {
        let p = ipv4_header(17, 1500, 0x2000, &[]);
        let v = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert!(v.is_fragment() && v.more_frags() && v.frag_offset() == 0);
        let p = ipv4_header(17, 1500, 185, &[]);
        let v = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert!(v.is_fragment() && v.frag_offset() == 185);
    }

    fn ipv6_header(nh: u8, plen: u16) -> Vec<u8> {
        let mut h = vec![0u8; 40];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&plen.to_be_bytes());
        h[6] = nh;
        h[7] = 255;
        h[8] = 0x20;
        h[9] = 0x01;
        h[39] = 1;
        h
    }

    #[test]
    fn ipv6_ext_chain_reports_final_protocol() {
        // hop-by-hop (8) -> routing (24) -> dest opts (8) -> TCP
        let mut p = ipv6_header(0, 8 + 24 + 8 + 20);
        p.extend_from_slice(&[43, 0, 5, 2, 0, 0, 0, 0]);
        let mut rh = vec![60, 2, 0, 1, 0, 0, 0, 0];
        rh.extend_from_slice(&[0; 16]);
        p.extend_from_slice(&rh);
        p.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
        p.extend_from_slice(&[0x11; 20]);
        let v = Ipv6Packet::new_checked(&p[..]).unwrap();
        assert_eq!(v.next_header(), 0);
        assert_eq!(v.hop_limit(), 255);
        let c = v.chain().unwrap();
        assert_eq!(c.protocol, 6);
        assert_eq!(c.ext_headers, 3);
        assert_eq!(c.l4.unwrap().len(), 20);
        assert!(!c.fragment);
    }

    #[test]
    fn ipv6_fragment_header() {
        let mut p = ipv6_header(44, 8 + 8);
        p.extend_from_slice(&[17, 0, 0, 1, 0, 0, 0, 9]); // offset 0, M=1
        p.extend_from_slice(&[0; 8]);
        let v = Ipv6Packet::new_checked(&p[..]).unwrap();
        let c = v.chain().unwrap();
        assert_eq!(c.protocol, 17);
        assert!(c.fragment && c.frag_offset == 0 && c.l4.is_some());

        let mut p = ipv6_header(44, 8 + 8);
        p.extend_from_slice(&[17, 0, 0x05, 0x48, 0, 0, 0, 9]); // offset 169
        p.extend_from_slice(&[0; 8]);
        let v = Ipv6Packet::new_checked(&p[..]).unwrap();
        let c = v.chain().unwrap();
        assert_eq!(c.protocol, 17);
        assert_eq!(c.frag_offset, 169);
        assert!(c.l4.is_none());
    }

    #[test]
    fn ipv6_truncated_chain() {
        let mut p = ipv6_header(0, 16);
        p.extend_from_slice(&[6, 1, 0, 0]); // claims 16 bytes, 4 present
        let v = Ipv6Packet::new_checked(&p[..]).unwrap();
        let c = v.chain().unwrap();
        assert!(c.truncated);
        assert_eq!(c.protocol, 6);
        assert!(c.l4.is_none());
    }

    #[test]
    fn sixteen_or_more_extension_headers_are_walked_to_the_final_protocol() {
        // libpcap's tests/filter/ipv6_ext_headers.pcap frame 1: a valid
        // packet with more than 16 extension headers came out malformed
        // with an extension header (43) as its protocol; tshark: 17.
        for n in [15usize, 16, 17, 40, 300] {
            let mut rest = Vec::new();
            for i in 0..n {
                let next = if i + 1 == n { 17 } else { [43, 60, 0][i % 3] };
                if i % 3 == 0 {
                    // Routing header, 24 bytes.
                    rest.extend_from_slice(&[next, 2, 0, 0, 0, 0, 0, 0]);
                    rest.extend_from_slice(&[0; 16]);
                } else {
                    rest.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
                }
            }
            rest.extend_from_slice(&[0x04, 0xd2, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4]);
            let c = walk_ipv6_chain(43, &rest).unwrap();
            assert_eq!(c.protocol, 17, "{n} headers");
            assert_eq!(c.ext_headers as usize, n);
            assert!(!c.truncated && !c.fragment);
            assert_eq!(c.l4.unwrap().len(), 12);
        }
    }

    #[test]
    fn ipv6_chain_is_bounded_by_the_packet() {
        // A chain that never ends stops at the end of the bytes, cut short.
        let mut rest = Vec::new();
        for _ in 0..4000 {
            rest.extend_from_slice(&[60, 0, 0, 0, 0, 0, 0, 0]);
        }
        let c = walk_ipv6_chain(60, &rest).unwrap();
        assert!(c.truncated && c.l4.is_none());
        assert_eq!(c.protocol, 60);
        assert_eq!(c.ext_headers, 4000);
    }

    #[test]
    fn a_fragment_header_among_many_extension_headers_is_kept() {
        // tcpdump's ipv6_ext_headers.pcap: a fragment header among more
        // than 16 extension headers used to give frag=0 and no protocol.
        // Destination options whose next header is a fragment header
        // (offset 0, more fragments), then destination options on and on,
        // then UDP.
        let mut rest = vec![44, 0, 0, 0, 0, 0, 0, 0];
        rest.extend_from_slice(&[60, 0, 0, 1, 0, 0, 0, 7]);
        for i in 0..30 {
            let next = if i == 29 { 17 } else { 60 };
            rest.extend_from_slice(&[next, 0, 0, 0, 0, 0, 0, 0]);
        }
        rest.extend_from_slice(&[0; 8]);
        let c = walk_ipv6_chain(60, &rest).unwrap();
        assert!(c.fragment && !c.truncated);
        assert_eq!(c.protocol, 17);
        assert_eq!(c.l4.unwrap().len(), 8);
    }
}
