//! Zero-copy checked views over wire formats, smoltcp style.
//!
//! Each protocol has a `Xxx<T: AsRef<[u8]>>` view whose only entry point for
//! untrusted bytes is `new_checked`, which verifies that every fixed field the
//! getters read is inside the buffer; the getters then never fail. Payload is
//! never copied: `payload()` returns a sub-slice. These views serve the pcap
//! lab (seed: pcap-ruby-extension): the seed's C extension avoided copying
//! payload into Ruby objects, and we keep that property by construction.

pub mod ethernet;
pub mod ip;
pub mod transport;

/// Why a checked constructor refused a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The buffer ends before the fixed header (or the header's own length).
    Truncated,
    /// A length or version field is impossible (e.g. IPv4 IHL < 5).
    Malformed,
}

#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Well-known EtherType values used by the decoders and the generator.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    /// Reverse ARP (RFC 903): the ARP packet format, operations 3 and 4.
    pub const RARP: u16 = 0x8035;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard QinQ TPID still seen in captures.
    pub const QINQ_OLD: u16 = 0x9100;
    pub const IPV6: u16 = 0x86dd;
}

/// IP protocol numbers (IPv4 protocol / IPv6 next header).
pub mod ipproto {
    pub const HOPOPTS: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const NONE: u8 = 59;
    pub const DSTOPTS: u8 = 60;
    pub const MOBILITY: u8 = 135;
}
