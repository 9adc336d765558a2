//! The frames the pipeline carries: an Ethernet II header, IPv4 or IPv6,
//! TCP or UDP. [`FlowRepr::emit`] writes one into a buffer (the generator,
//! standing in for a NIC's DMA), [`Frame::new_checked`] is the only way
//! bytes are read back (the `parse` work and software RSS), and
//! [`swap_macs`] is l2fwd's per-packet work.
//!
//! Invariant: a [`Frame`] has been checked to hold a complete Ethernet
//! header; every further read goes through a length check, so a short or
//! malformed frame is an error, never a panic.

#![deny(unsafe_code)]

use crate::rss::FlowTuple;
use thiserror::Error;

pub const ETH_HDR: usize = 14;
pub const IPV4_HDR: usize = 20;
pub const IPV6_HDR: usize = 40;
pub const TCP_HDR: usize = 20;
pub const UDP_HDR: usize = 8;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
/// The 4-byte frame check sequence a NIC appends; frame sizes given to the
/// pipeline include it (64 B is the minimum Ethernet frame), buffers do not.
pub const FCS: usize = 4;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("frame of {0} B is shorter than its headers need")]
    Truncated(usize),
    #[error("ethertype {0:#06x} is neither IPv4 nor IPv6")]
    Ethertype(u16),
    #[error("IPv4 header length {0} B is below 20")]
    Ihl(usize),
}

/// A checked view over an Ethernet frame.
#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Checks that `buf` holds at least an Ethernet header.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let n = buf.as_ref().len();
        if n < ETH_HDR {
            return Err(WireError::Truncated(n));
        }
        Ok(Frame { buf })
    }

    pub fn dst_mac(&self) -> [u8; 6] {
        let b = self.buf.as_ref();
        [b[0], b[1], b[2], b[3], b[4], b[5]]
    }

    pub fn src_mac(&self) -> [u8; 6] {
        let b = self.buf.as_ref();
        [b[6], b[7], b[8], b[9], b[10], b[11]]
    }

    pub fn ethertype(&self) -> u16 {
        let b = self.buf.as_ref();
        u16::from_be_bytes([b[12], b[13]])
    }

    /// Addresses and, for TCP/UDP, ports of the packet.
    pub fn flow_tuple(&self) -> Result<FlowTuple, WireError> {
        let b = self.buf.as_ref();
        let n = b.len();
        let ip = &b[ETH_HDR..];
        match self.ethertype() {
            ETHERTYPE_IPV4 => {
                if ip.len() < IPV4_HDR {
                    return Err(WireError::Truncated(n));
                }
                let ihl = usize::from(ip[0] & 0x0f) * 4;
                if ihl < IPV4_HDR {
                    return Err(WireError::Ihl(ihl));
                }
                let src = [ip[12], ip[13], ip[14], ip[15]];
                let dst = [ip[16], ip[17], ip[18], ip[19]];
                let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
                let ports = if fragment {
                    None
                } else {
                    ports(ip[9], ip.get(ihl..))
                };
                Ok(FlowTuple::V4 { src, dst, ports })
            }
            ETHERTYPE_IPV6 => {
                if ip.len() < IPV6_HDR {
                    return Err(WireError::Truncated(n));
                }
                let mut src = [0u8; 16];
                let mut dst = [0u8; 16];
                src.copy_from_slice(&ip[8..24]);
                dst.copy_from_slice(&ip[24..40]);
                let ports = ports(ip[6], ip.get(IPV6_HDR..));
                Ok(FlowTuple::V6 { src, dst, ports })
            }
            other => Err(WireError::Ethertype(other)),
        }
    }
}

fn ports(proto: u8, l4: Option<&[u8]>) -> Option<(u16, u16)> {
    let l4 = l4?;
    if (proto == PROTO_TCP || proto == PROTO_UDP) && l4.len() >= 4 {
        Some((
            u16::from_be_bytes([l4[0], l4[1]]),
            u16::from_be_bytes([l4[2], l4[3]]),
        ))
    } else {
        None
    }
}

/// l2fwd's work: swap source and destination MAC. Frames shorter than 12 B
/// are left alone.
#[inline(always)]
pub fn swap_macs(frame: &mut [u8]) {
    // One 8-byte and one 4-byte load, shifts, two stores (little-endian
    // lanes: bytes 6..12 move to 0..6 and 0..6 to 6..12).
    if let Some(h) = frame.first_chunk_mut::<12>() {
        let (lo, hi) = h.split_at_mut(8);
        let a = u64::from_le_bytes(lo.try_into().unwrap_or([0; 8]));
        let b = u32::from_le_bytes(hi.try_into().unwrap_or([0; 4]));
        let na = (a >> 48) | (u64::from(b) << 16) | (a << 48);
        let nb = (a >> 16) as u32;
        lo.copy_from_slice(&na.to_le_bytes());
        hi.copy_from_slice(&nb.to_le_bytes());
    }
}

/// What the generator writes: one flow's headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRepr {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub tuple: FlowTuple,
    /// TCP or UDP.
    pub proto: u8,
}

impl FlowRepr {
    /// Header bytes before the payload.
    pub fn header_len(&self) -> usize {
        let ip = match self.tuple {
            FlowTuple::V4 { .. } => IPV4_HDR,
            FlowTuple::V6 { .. } => IPV6_HDR,
        };
        let l4 = if self.proto == PROTO_TCP {
            TCP_HDR
        } else {
            UDP_HDR
        };
        ETH_HDR + ip + l4
    }

    /// Writes a frame of `len` bytes (without FCS) into `buf[..len]`, zero
    /// payload. Errors when `len` cannot hold the headers or `buf` is short.
    pub fn emit(&self, buf: &mut [u8], len: usize) -> Result<(), WireError> {
        if len < self.header_len() || buf.len() < len || len > usize::from(u16::MAX) {
            return Err(WireError::Truncated(len));
        }
        let buf = &mut buf[..len];
        buf.fill(0);
        buf[0..6].copy_from_slice(&self.dst_mac);
        buf[6..12].copy_from_slice(&self.src_mac);
        let (ethertype, ip_len) = match self.tuple {
            FlowTuple::V4 { .. } => (ETHERTYPE_IPV4, IPV4_HDR),
            FlowTuple::V6 { .. } => (ETHERTYPE_IPV6, IPV6_HDR),
        };
        buf[12..14].copy_from_slice(&ethertype.to_be_bytes());
        let l3_len = len - ETH_HDR;
        let l4_len = l3_len - ip_len;
        let ports = {
            let ip = &mut buf[ETH_HDR..ETH_HDR + ip_len];
            match self.tuple {
                FlowTuple::V4 { src, dst, ports } => {
                    ip[0] = 0x45;
                    ip[2..4].copy_from_slice(&(l3_len as u16).to_be_bytes());
                    ip[6] = 0x40; // don't fragment
                    ip[8] = 64;
                    ip[9] = self.proto;
                    ip[12..16].copy_from_slice(&src);
                    ip[16..20].copy_from_slice(&dst);
                    let c = ipv4_checksum(ip);
                    ip[10..12].copy_from_slice(&c.to_be_bytes());
                    ports
                }
                FlowTuple::V6 { src, dst, ports } => {
                    ip[0] = 0x60;
                    ip[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
                    ip[6] = self.proto;
                    ip[7] = 64;
                    ip[8..24].copy_from_slice(&src);
                    ip[24..40].copy_from_slice(&dst);
                    ports
                }
            }
        };
        let (sport, dport) = ports.unwrap_or((0, 0));
        let l4 = &mut buf[ETH_HDR + ip_len..];
        l4[0..2].copy_from_slice(&sport.to_be_bytes());
        l4[2..4].copy_from_slice(&dport.to_be_bytes());
        if self.proto == PROTO_TCP {
            l4[12] = 0x50; // data offset 5
            l4[13] = 0x10; // ACK
            l4[14..16].copy_from_slice(&0xffffu16.to_be_bytes());
        } else {
            l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        }
        Ok(())
    }
}

/// The IPv4 header checksum (RFC 1071) over `hdr` with its checksum field
/// taken as zero (core's one checksum).
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    commbench_core::checksum::ipv4_header_checksum(hdr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4_flow(proto: u8) -> FlowRepr {
        FlowRepr {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            tuple: FlowTuple::V4 {
                src: [10, 0, 0, 1],
                dst: [10, 0, 1, 2],
                ports: Some((1234, 80)),
            },
            proto,
        }
    }

    #[test]
    fn emitted_frames_parse_back() {
        for proto in [PROTO_TCP, PROTO_UDP] {
            let f = v4_flow(proto);
            let mut buf = [0u8; 2048];
            f.emit(&mut buf, 60).unwrap();
            let fr = Frame::new_checked(&buf[..60]).unwrap();
            assert_eq!(fr.ethertype(), ETHERTYPE_IPV4);
            assert_eq!(fr.flow_tuple().unwrap(), f.tuple);
            assert_eq!(fr.src_mac(), f.src_mac);
            // A valid header checksums to zero including its checksum field.
            let ip = &buf[ETH_HDR..ETH_HDR + IPV4_HDR];
            let mut sum = 0u32;
            for c in ip.chunks(2) {
                sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            assert_eq!(sum, 0xffff);
        }
        let f6 = FlowRepr {
            tuple: FlowTuple::V6 {
                src: [0x20; 16],
                dst: [0x30; 16],
                ports: Some((5, 6)),
            },
            ..v4_flow(PROTO_TCP)
        };
        let mut buf = [0u8; 128];
        assert_eq!(f6.emit(&mut buf, 60), Err(WireError::Truncated(60)));
        f6.emit(&mut buf, 74).unwrap();
        assert_eq!(
            Frame::new_checked(&buf[..74])
                .unwrap()
                .flow_tuple()
                .unwrap(),
            f6.tuple
        );
    }

    #[test]
    fn mac_swap_swaps() {
        let mut buf = [0u8; 64];
        v4_flow(PROTO_UDP).emit(&mut buf, 60).unwrap();
        swap_macs(&mut buf);
        let fr = Frame::new_checked(&buf[..]).unwrap();
        assert_eq!(fr.dst_mac(), [2, 0, 0, 0, 0, 1]);
        assert_eq!(fr.src_mac(), [2, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn short_and_foreign_frames_are_errors() {
        assert_eq!(
            Frame::new_checked(&[0u8; 13][..]).unwrap_err(),
            WireError::Truncated(13)
        );
        let mut b = [0u8; 20];
        b[12] = 0x08;
        b[13] = 0x06; // ARP
        assert_eq!(
            Frame::new_checked(&b[..]).unwrap().flow_tuple(),
            Err(WireError::Ethertype(0x0806))
        );
        b[13] = 0x00;
        assert_eq!(
            Frame::new_checked(&b[..]).unwrap().flow_tuple(),
            Err(WireError::Truncated(20))
        );
    }

    proptest! {
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(f) = Frame::new_checked(&bytes[..]) {
                let _ = f.flow_tuple();
            }
        }
    }
}
