//! Transport-layer and ARP views: TCP, UDP, ICMP / ICMPv6 (same first four
//! bytes) and ARP. The fixed header is checked once in `new_checked`; TCP's
//! data offset is reported but a bogus one does not hide the fixed fields
//! (the way tshark still shows ports of such a segment).

use super::{be16, be32, WireError};

/// TCP segment view (20-byte fixed header).
#[derive(Debug, Clone, Copy)]
pub struct TcpSegment<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpSegment<T> {
    pub const HEADER_LEN: usize = 20;

    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self { buffer })
    }
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn seq_number(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }
    pub fn ack_number(&self) -> u32 {
        be32(self.buffer.as_ref(), 8)
    }
    /// Header length in bytes from the data-offset field.
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[12] >> 4) as usize) * 4
    }
    /// The 12 flag bits (reserved, AE/NS, CWR, ECE, URG, ACK, PSH, RST, SYN, FIN).
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), 12) & 0x0fff
    }
    pub fn window_len(&self) -> u16 {
        be16(self.buffer.as_ref(), 14)
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 16)
    }
    pub fn urgent_at(&self) -> u16 {
        be16(self.buffer.as_ref(), 18)
    }
    /// Payload after the header, empty if the data offset is bogus or cut.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let hl = self.header_len().max(Self::HEADER_LEN);
        b.get(hl..).unwrap_or(&[])
    }
}

/// TCP flag bits.
pub mod tcp_flags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
}

/// UDP datagram view (8-byte header).
#[derive(Debug, Clone, Copy)]
pub struct UdpDatagram<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpDatagram<T> {
    pub const HEADER_LEN: usize = 8;

    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self { buffer })
    }
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }
    pub fn is_empty(&self) -> bool {
        self.len() <= 8
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

/// ICMP or ICMPv6 message view: type(1) code(1) checksum(2).
#[derive(Debug, Clone, Copy)]
pub struct IcmpMessage<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpMessage<T> {
    pub const HEADER_LEN: usize = 4;

    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self { buffer })
    }
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

/// ARP packet view (8-byte fixed part; addresses follow).
#[derive(Debug, Clone, Copy)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    pub const HEADER_LEN: usize = 8;

    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self { buffer })
    }
    pub fn hardware_type(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    pub fn protocol_type(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[4]
    }
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[5]
    }
    pub fn operation(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }
    /// Sender protocol address for Ethernet/IPv4 ARP, if present.
    pub fn sender_ipv4(&self) -> Option<[u8; 4]> {
        self.ipv4_at(14)
    }
    /// Target protocol address for Ethernet/IPv4 ARP, if present.
    pub fn target_ipv4(&self) -> Option<[u8; 4]> {
        self.ipv4_at(24)
    }
    fn ipv4_at(&self, at: usize) -> Option<[u8; 4]> {
        if self.hardware_len() != 6 || self.protocol_len() != 4 {
            return None;
        }
        let b = self.buffer.as_ref().get(at..at + 4)?;
        Some([b[0], b[1], b[2], b[3]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_fields() {
        let mut s = [0u8; 24];
        s[0..2].copy_from_slice(&443u16.to_be_bytes());
        s[2..4].copy_from_slice(&51000u16.to_be_bytes());
        s[4..8].copy_from_slice(&0xdeadbeefu32.to_be_bytes());
        s[8..12].copy_from_slice(&7u32.to_be_bytes());
        s[12] = 0x60 | 0x01; // doff 6, NS bit
        s[13] = 0x18; // PSH|ACK
        s[14..16].copy_from_slice(&65535u16.to_be_bytes());
        let t = TcpSegment::new_checked(&s[..]).unwrap();
        assert_eq!(t.src_port(), 443);
        assert_eq!(t.dst_port(), 51000);
        assert_eq!(t.seq_number(), 0xdeadbeef);
        assert_eq!(t.ack_number(), 7);
        assert_eq!(t.header_len(), 24);
        assert_eq!(t.flags(), 0x118);
        assert_eq!(t.window_len(), 65535);
        assert!(t.payload().is_empty());
        assert!(TcpSegment::new_checked(&s[..19]).is_err());
    }

    #[test]
    fn udp_fields() {
        let d = [0, 53, 0xc3, 0x50, 0, 12, 0, 0, 1, 2, 3, 4];
        let u = UdpDatagram::new_checked(&d[..]).unwrap();
        assert_eq!(u.src_port(), 53);
        assert_eq!(u.dst_port(), 50000);
        assert_eq!(u.len(), 12);
        assert_eq!(u.payload(), &[1, 2, 3, 4]);
        assert!(UdpDatagram::new_checked(&d[..7]).is_err());
    }

    #[test]
    fn icmp_fields() {
        let m = [8, 0, 0xf7, 0xff, 0, 1, 0, 1];
        let i = IcmpMessage::new_checked(&m[..]).unwrap();
        assert_eq!((i.msg_type(), i.msg_code()), (8, 0));
        assert_eq!(i.checksum(), 0xf7ff);
        assert!(IcmpMessage::new_checked(&m[..3]).is_err());
    }

    #[test]
    fn arp_fields() {
        let mut a = [0u8; 28];
        a[0..2].copy_from_slice(&1u16.to_be_bytes());
        a[2..4].copy_from_slice(&0x0800u16.to_be_bytes());
        a[4] = 6;
        a[5] = 4;
        a[6..8].copy_from_slice(&2u16.to_be_bytes());
        a[14..18].copy_from_slice(&[10, 1, 2, 3]);
        a[24..28].copy_from_slice(&[10, 1, 2, 4]);
        let p = ArpPacket::new_checked(&a[..]).unwrap();
        assert_eq!(p.operation(), 2);
        assert_eq!(p.sender_ipv4(), Some([10, 1, 2, 3]));
        assert_eq!(p.target_ipv4(), Some([10, 1, 2, 4]));
        let p = ArpPacket::new_checked(&a[..20]).unwrap();
        assert_eq!(p.target_ipv4(), None);
    }
}
