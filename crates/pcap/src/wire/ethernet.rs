//! Link-layer views: Ethernet II, 802.1Q/802.1ad tags, Linux cooked capture
//! v1 (SLL) and v2 (SLL2), and the BSD loopback header (DLT_NULL/DLT_LOOP).
//!
//! Invariant: a view returned by `new_checked` holds at least its fixed
//! header, so every getter indexes in bounds.

use super::{be16, be32, WireError};

/// Ethernet II frame: dst(6) src(6) ethertype(2).
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    pub const HEADER_LEN: usize = 14;

    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self { buffer })
    }
    pub fn dst_addr(&self) -> [u8; 6] {
        self.buffer.as_ref()[0..6].try_into().unwrap_or([0; 6])
    }
    pub fn src_addr(&self) -> [u8; 6] {
        self.buffer.as_ref()[6..12].try_into().unwrap_or([0; 6])
    }
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), 12)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

/// One 802.1Q / 802.1ad tag as it follows its TPID: TCI(2) ethertype(2).
#[derive(Debug, Clone, Copy)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    pub const HEADER_LEN: usize = 4;

    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self { buffer })
    }
    pub fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    /// The 12-bit VLAN identifier.
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

/// Linux cooked capture v1 (LINKTYPE_LINUX_SLL, 113): 16-byte header.
#[derive(Debug, Clone, Copy)]
pub struct SllHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SllHeader<T> {
    pub const HEADER_LEN: usize = 16;

    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self { buffer })
    }
    pub fn packet_type(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    pub fn arphrd_type(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn addr_len(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }
    /// The (up to 8-byte) link-layer source address field.
    pub fn addr(&self) -> &[u8] {
        &self.buffer.as_ref()[6..14]
    }
    pub fn protocol(&self) -> u16 {
        be16(self.buffer.as_ref(), 14)
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

/// Linux cooked capture v2 (LINKTYPE_LINUX_SLL2, 276): 20-byte header.
#[derive(Debug, Clone, Copy)]
pub struct Sll2Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Sll2Header<T> {
    pub const HEADER_LEN: usize = 20;

    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self { buffer })
    }
    pub fn protocol(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    pub fn ifindex(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }
    pub fn arphrd_type(&self) -> u16 {
        be16(self.buffer.as_ref(), 8)
    }
    pub fn packet_type(&self) -> u8 {
        self.buffer.as_ref()[10]
    }
    pub fn addr_len(&self) -> u8 {
        self.buffer.as_ref()[11]
    }
    pub fn addr(&self) -> &[u8] {
        &self.buffer.as_ref()[12..20]
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

/// BSD loopback header: a 4-byte address family, in the capturing host's
/// byte order for DLT_NULL and in network order for DLT_LOOP.
#[derive(Debug, Clone, Copy)]
pub struct NullHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NullHeader<T> {
    pub const HEADER_LEN: usize = 4;

    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self { buffer })
    }
    /// Address family; for DLT_NULL the byte order is guessed the way
    /// libpcap/Wireshark do: a family never exceeds 16 bits, so a value with
    /// an empty low half was written in the other byte order.
    pub fn family(&self, network_order: bool) -> u32 {
        let b = self.buffer.as_ref();
        let raw = [b[0], b[1], b[2], b[3]];
        if network_order {
            return u32::from_be_bytes(raw);
        }
        let le = u32::from_le_bytes(raw);
        if le & 0xffff == 0 {
            le.swap_bytes()
        } else {
            le
        }
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethernet_fields() {
        let mut f = [0u8; 20];
        f[..6].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
        f[6..12].copy_from_slice(&[7, 8, 9, 10, 11, 12]);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let e = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(e.dst_addr(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(e.src_addr(), [7, 8, 9, 10, 11, 12]);
        assert_eq!(e.ethertype(), 0x0800);
        assert_eq!(e.payload().len(), 6);
        assert_eq!(
            EthernetFrame::new_checked(&f[..13]).unwrap_err(),
            WireError::Truncated
        );
    }

    #[test]
    fn vlan_tag_fields() {
        let t = [0xa0, 0x64, 0x86, 0xdd];
        let v = VlanTag::new_checked(&t[..]).unwrap();
        assert_eq!(v.vid(), 100);
        assert_eq!(v.pcp(), 5);
        assert_eq!(v.ethertype(), 0x86dd);
        assert!(VlanTag::new_checked(&t[..3]).is_err());
    }

    #[test]
    fn sll_and_sll2_fields() {
        let mut s = [0u8; 16];
        s[1] = 4; // outgoing
        s[3] = 1; // ARPHRD_ETHER
        s[5] = 6;
        s[6..12].copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
        s[14..16].copy_from_slice(&0x86ddu16.to_be_bytes());
        let h = SllHeader::new_checked(&s[..]).unwrap();
        assert_eq!(h.packet_type(), 4);
        assert_eq!(h.arphrd_type(), 1);
        assert_eq!(h.addr_len(), 6);
        assert_eq!(&h.addr()[..6], &[0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
        assert_eq!(h.protocol(), 0x86dd);

        let mut s2 = [0u8; 20];
        s2[0..2].copy_from_slice(&0x0800u16.to_be_bytes());
        s2[4..8].copy_from_slice(&3u32.to_be_bytes());
        s2[9] = 1;
        s2[10] = 0;
        s2[11] = 6;
        let h2 = Sll2Header::new_checked(&s2[..]).unwrap();
        assert_eq!(h2.protocol(), 0x0800);
        assert_eq!(h2.ifindex(), 3);
        assert_eq!(h2.arphrd_type(), 1);
        assert_eq!(h2.addr_len(), 6);
        assert!(Sll2Header::new_checked(&s2[..19]).is_err());
    }

    #[test]
    fn null_family_both_orders() {
        let le = 2u32.to_le_bytes();
        let be = 2u32.to_be_bytes();
        assert_eq!(NullHeader::new_checked(&le[..]).unwrap().family(false), 2);
        assert_eq!(NullHeader::new_checked(&be[..]).unwrap().family(false), 2);
        assert_eq!(NullHeader::new_checked(&be[..]).unwrap().family(true), 2);
        let v6 = 30u32.to_be_bytes();
        assert_eq!(NullHeader::new_checked(&v6[..]).unwrap().family(true), 30);
    }
}
