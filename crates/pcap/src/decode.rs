//! Packet decoder: from a link type and the captured bytes to the flat
//! `Fields` record that `extract` prints (the seed's "header information",
//! without ever copying the payload).
//!
//! Invariants: `decode` never panics and never allocates; every byte it reads
//! goes through a checked view from `crate::wire`. Optional fields are
//! flagged in `Fields::present` so a record is reset by clearing one word.
//! Protocol semantics follow tshark's where they differ from a naive parser
//! (as tshark reads them): ports only on the first fragment, the final IPv6
//! protocol after extension headers, the inner EtherType after VLAN tags.

use crate::wire::ethernet::{EthernetFrame, NullHeader, Sll2Header, SllHeader, VlanTag};
use crate::wire::ip::{Ipv4Packet, Ipv6Packet};
use crate::wire::transport::{ArpPacket, IcmpMessage, TcpSegment, UdpDatagram};
use crate::wire::{ethertype, ipproto, WireError};

/// LINKTYPE_* values as they appear in pcap and pcapng files.
pub mod linktype {
    pub const NULL: u32 = 0;
    pub const ETHERNET: u32 = 1;
    /// DLT_RAW as some BSDs write it in files.
    pub const RAW_BSD12: u32 = 12;
    pub const RAW_BSD14: u32 = 14;
    pub const RAW: u32 = 101;
    pub const LOOP: u32 = 108;
    pub const LINUX_SLL: u32 = 113;
    pub const IPV4: u32 = 228;
    pub const IPV6: u32 = 229;
    pub const LINUX_SLL2: u32 = 276;

    /// Whether `decode` understands this link type.
    pub fn is_supported(lt: u32) -> bool {
        matches!(
            lt,
            NULL | ETHERNET
                | RAW_BSD12
                | RAW_BSD14
                | RAW
                | LOOP
                | LINUX_SLL
                | IPV4
                | IPV6
                | LINUX_SLL2
        )
    }
}

/// Bits of `Fields::present`.
pub mod has {
    pub const ETH_SRC: u32 = 1 << 0;
    pub const ETH_DST: u32 = 1 << 1;
    pub const ETHERTYPE: u32 = 1 << 2;
    pub const VLAN_OUTER: u32 = 1 << 3;
    pub const VLAN_INNER: u32 = 1 << 4;
    pub const IP: u32 = 1 << 5;
    pub const PROTO: u32 = 1 << 6;
    pub const PORTS: u32 = 1 << 7;
    pub const TCP: u32 = 1 << 8;
    pub const ICMP: u32 = 1 << 9;
    pub const ARP: u32 = 1 << 10;
    pub const FRAG: u32 = 1 << 11;
    /// TCP fields present individually when the header is cut short.
    pub const TCP_SEQ: u32 = 1 << 12;
    pub const TCP_ACK: u32 = 1 << 13;
    pub const TCP_FLAGS: u32 = 1 << 14;
    pub const TCP_WIN: u32 = 1 << 15;
    /// No timestamp (pcapng simple packet block).
    pub const NO_TS: u32 = 1 << 16;
    pub const TCP_ALL: u32 = TCP | TCP_SEQ | TCP_ACK | TCP_FLAGS | TCP_WIN;
}

/// What stopped a decode early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeProblem {
    /// A header was cut short by the end of the captured bytes.
    Cut,
    /// A header field is impossible (bad IHL, wrong IP version, ...).
    Malformed,
    /// The link type is not one we decode.
    UnknownLinktype,
}

/// One packet's extracted fields. Addresses are raw bytes; IPv4 addresses
/// occupy the first four bytes of `ip_src`/`ip_dst`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields {
    pub ts_sec: u64,
    pub ts_nsec: u32,
    pub caplen: u32,
    pub len: u32,
    pub present: u32,
    pub eth_src: [u8; 6],
    pub eth_dst: [u8; 6],
    pub ethertype: u16,
    pub vlan_outer: u16,
    pub vlan_inner: u16,
    pub ip_version: u8,
    pub ip_src: [u8; 16],
    pub ip_dst: [u8; 16],
    pub proto: u8,
    pub ttl: u8,
    pub ip_len: u16,
    pub src_port: u16,
    pub dst_port: u16,
    pub tcp_flags: u16,
    pub tcp_seq: u32,
    pub tcp_ack: u32,
    pub tcp_win: u16,
    pub icmp_type: u8,
    pub icmp_code: u8,
    pub arp_op: u16,
    pub problem: Option<DecodeProblem>,
}

impl Fields {
    #[inline]
    pub fn has(&self, bit: u32) -> bool {
        self.present & bit != 0
    }
}

#[inline]
fn problem(e: WireError) -> DecodeProblem {
    match e {
        WireError::Truncated => DecodeProblem::Cut,
        WireError::Malformed => DecodeProblem::Malformed,
    }
}

/// Decodes `data` captured on link type `lt` into `f` (timestamp and lengths
/// are left to the caller). Optional fields are cleared first.
#[inline]
pub fn decode(lt: u32, data: &[u8], f: &mut Fields) {
    f.present &= has::NO_TS;
    f.problem = None;
    let r = match lt {
        linktype::ETHERNET => decode_ethernet(data, f),
        linktype::RAW | linktype::RAW_BSD12 | linktype::RAW_BSD14 => decode_raw_ip(data, f),
        linktype::IPV4 => decode_ipv4(data, f),
        linktype::IPV6 => decode_ipv6(data, f),
        linktype::LINUX_SLL => decode_sll(data, f),
        linktype::LINUX_SLL2 => decode_sll2(data, f),
        linktype::NULL => decode_null(data, f, false),
        linktype::LOOP => decode_null(data, f, true),
        _ => Err(DecodeProblem::UnknownLinktype),
    };
    if let Err(p) = r {
        f.problem = Some(p);
    }
}

type Step = Result<(), DecodeProblem>;

fn decode_ethernet(data: &[u8], f: &mut Fields) -> Step {
    let eth = EthernetFrame::new_checked(data).map_err(problem)?;
    f.eth_dst = eth.dst_addr();
    f.eth_src = eth.src_addr();
    f.present |= has::ETH_SRC | has::ETH_DST;
    let et = eth.ethertype();
    if et < 0x0600 {
        // 802.3 length field (LLC follows): no EtherType to report.
        return Ok(());
    }
    decode_ethertype(et, eth.payload(), f)
}

/// Follows VLAN tags, then dispatches on the (inner) EtherType.
#[inline]
fn decode_ethertype(mut et: u16, mut rest: &[u8], f: &mut Fields) -> Step {
    let mut tags = 0;
    while matches!(et, ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_OLD) && tags < 8 {
        let tag = VlanTag::new_checked(rest).map_err(problem)?;
        if tags == 0 {
            f.vlan_outer = tag.vid();
            f.present |= has::VLAN_OUTER;
        } else if tags == 1 {
            f.vlan_inner = tag.vid();
            f.present |= has::VLAN_INNER;
        }
        tags += 1;
        et = tag.ethertype();
        rest = &rest[VlanTag::<&[u8]>::HEADER_LEN..];
    }
    if tags > 0 && et < 0x0600 {
        // An 802.3 length after the tags (LLC follows, as in PVST+ and
        // MSTP BPDUs): no EtherType, as for an untagged 802.3 frame.
        return Ok(());
    }
    f.ethertype = et;
    f.present |= has::ETHERTYPE;
    match et {
        ethertype::IPV4 => decode_ipv4(rest, f),
        ethertype::IPV6 => decode_ipv6(rest, f),
        ethertype::ARP | ethertype::RARP => decode_arp(rest, f),
        _ => Ok(()),
    }
}

fn decode_raw_ip(data: &[u8], f: &mut Fields) -> Step {
    match data.first().map(|b| b >> 4) {
        Some(4) => decode_ipv4(data, f),
        Some(6) => decode_ipv6(data, f),
        Some(_) => Err(DecodeProblem::Malformed),
        None => Err(DecodeProblem::Cut),
    }
}

fn decode_sll(data: &[u8], f: &mut Fields) -> Step {
    let h = SllHeader::new_checked(data).map_err(problem)?;
    if h.addr_len() == 6 {
        f.eth_src.copy_from_slice(&h.addr()[..6]);
        f.present |= has::ETH_SRC;
    }
    let proto = h.protocol();
    sll_payload(proto, h.arphrd_type(), h.payload(), f)
}

fn decode_sll2(data: &[u8], f: &mut Fields) -> Step {
    let h = Sll2Header::new_checked(data).map_err(problem)?;
    if h.addr_len() == 6 {
        f.eth_src.copy_from_slice(&h.addr()[..6]);
        f.present |= has::ETH_SRC;
    }
    sll_payload(h.protocol(), h.arphrd_type(), h.payload(), f)
}

fn sll_payload(proto: u16, hatype: u16, rest: &[u8], f: &mut Fields) -> Step {
    const ARPHRD_NETLINK: u16 = 824;
    if hatype == ARPHRD_NETLINK || proto < 0x0600 {
        // Netlink, 802.3/802.2 frames and other non-EtherType protocols.
        return Ok(());
    }
    decode_ethertype(proto, rest, f)
}

fn decode_null(data: &[u8], f: &mut Fields, network_order: bool) -> Step {
    let h = NullHeader::new_checked(data).map_err(problem)?;
    match h.family(network_order) {
        2 => decode_ipv4(h.payload(), f),
        10 | 24 | 28 | 30 => decode_ipv6(h.payload(), f),
        _ => Ok(()),
    }
}

fn decode_ipv4(data: &[u8], f: &mut Fields) -> Step {
    let ip = Ipv4Packet::new_checked(data).map_err(problem)?;
    f.ip_version = 4;
    f.ip_src[..4].copy_from_slice(&ip.src_addr());
    f.ip_dst[..4].copy_from_slice(&ip.dst_addr());
    f.proto = ip.protocol();
    f.ttl = ip.ttl();
    f.ip_len = ip.total_len();
    f.present |= has::IP | has::PROTO;
    if ip.is_fragment() {
        f.present |= has::FRAG;
        if ip.frag_offset() != 0 {
            return Ok(());
        }
    }
    // Total length 0: a TSO / BIG TCP send, decoded from the captured bytes.
    if ip.total_len() != 0 && (ip.total_len() as usize) < ip.header_len() {
        return Err(DecodeProblem::Malformed);
    }
    decode_l4(ip.protocol(), ip.payload(), f)
}

fn decode_ipv6(data: &[u8], f: &mut Fields) -> Step {
    let ip = Ipv6Packet::new_checked(data).map_err(problem)?;
    f.ip_version = 6;
    f.ip_src = ip.src_addr();
    f.ip_dst = ip.dst_addr();
    f.ttl = ip.hop_limit();
    f.ip_len = ip.payload_len();
    f.present |= has::IP;
    let chain = ip.chain().map_err(problem)?;
    f.proto = chain.protocol;
    f.present |= has::PROTO;
    if chain.fragment {
        f.present |= has::FRAG;
    }
    if chain.truncated {
        return Err(DecodeProblem::Cut);
    }
    match chain.l4 {
        Some(l4) => decode_l4(chain.protocol, l4, f),
        None => Ok(()),
    }
}

#[inline]
fn decode_l4(proto: u8, l4: &[u8], f: &mut Fields) -> Step {
    match proto {
        ipproto::TCP => {
            let t = match TcpSegment::new_checked(l4) {
                Ok(t) => t,
                Err(e) => {
                    partial_tcp(l4, f);
                    return Err(problem(e));
                }
            };
            f.src_port = t.src_port();
            f.dst_port = t.dst_port();
            f.tcp_seq = t.seq_number();
            f.tcp_ack = t.ack_number();
            f.tcp_flags = t.flags();
            f.tcp_win = t.window_len();
            f.present |= has::PORTS | has::TCP_ALL;
            if t.header_len() < TcpSegment::<&[u8]>::HEADER_LEN {
                return Err(DecodeProblem::Malformed);
            }
            Ok(())
        }
        ipproto::UDP => {
            let u = match UdpDatagram::new_checked(l4) {
                Ok(u) => u,
                Err(e) => {
                    partial_ports(l4, f);
                    return Err(problem(e));
                }
            };
            f.src_port = u.src_port();
            f.dst_port = u.dst_port();
            f.present |= has::PORTS;
            Ok(())
        }
        ipproto::ICMP | ipproto::ICMPV6 => {
            // Type and code are the first two bytes; report them even when
            // the checksum is cut off, as tshark does.
            if l4.len() >= 2 {
                f.icmp_type = l4[0];
                f.icmp_code = l4[1];
                f.present |= has::ICMP;
            }
            IcmpMessage::new_checked(l4).map_err(problem)?;
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Ports of a transport header cut short (what the capture holds).
fn partial_ports(l4: &[u8], f: &mut Fields) {
    if l4.len() >= 4 {
        f.src_port = u16::from_be_bytes([l4[0], l4[1]]);
        f.dst_port = u16::from_be_bytes([l4[2], l4[3]]);
        f.present |= has::PORTS;
    }
}

/// The TCP fields of a header cut short, by the snaplen or by the IP
/// length, as tshark 4.0 shows them: the ports from 4 bytes on; sequence,
/// acknowledgment, flags and window once the 16 bytes that hold them are
/// there (it reads all four before it adds any, and the missing checksum
/// and urgent pointer do not stop it).
fn partial_tcp(l4: &[u8], f: &mut Fields) {
    partial_ports(l4, f);
    if l4.len() >= 16 {
        let w32 = |at: usize| u32::from_be_bytes([l4[at], l4[at + 1], l4[at + 2], l4[at + 3]]);
        f.tcp_seq = w32(4);
        f.tcp_ack = w32(8);
        f.tcp_flags = u16::from_be_bytes([l4[12], l4[13]]) & 0x0fff;
        f.tcp_win = u16::from_be_bytes([l4[14], l4[15]]);
        f.present |= has::TCP_SEQ | has::TCP_ACK | has::TCP_FLAGS | has::TCP_WIN;
    }
}

fn decode_arp(data: &[u8], f: &mut Fields) -> Step {
    let a = ArpPacket::new_checked(data).map_err(problem)?;
    f.arp_op = a.operation();
    f.present |= has::ARP;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::ip::ipv4_header_checksum;

    pub(crate) const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
    pub(crate) const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

    pub(crate) fn eth(et: u16) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&MAC_B);
        v.extend_from_slice(&MAC_A);
        v.extend_from_slice(&et.to_be_bytes());
        v
    }

    pub(crate) fn ipv4(proto: u8, payload_len: usize, frag: u16, opts: &[u8]) -> Vec<u8> {
        let ihl = 5 + opts.len() / 4;
        let mut h = vec![0u8; 20];
        h[0] = 0x40 | ihl as u8;
        let total = (ihl * 4 + payload_len) as u16;
        h[2..4].copy_from_slice(&total.to_be_bytes());
        h[6..8].copy_from_slice(&frag.to_be_bytes());
        h[8] = 64;
        h[9] = proto;
        h[12..16].copy_from_slice(&[10, 0, 0, 1]);
        h[16..20].copy_from_slice(&[10, 0, 0, 2]);
        h.extend_from_slice(opts);
        let c = ipv4_header_checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        h
    }

    pub(crate) fn ipv6(nh: u8, payload_len: usize) -> Vec<u8> {
        let mut h = vec![0u8; 40];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&(payload_len as u16).to_be_bytes());
        h[6] = nh;
        h[7] = 33;
        h[8..10].copy_from_slice(&[0x20, 0x01]);
        h[23] = 1;
        h[24..26].copy_from_slice(&[0x20, 0x01]);
        h[39] = 2;
        h
    }

    pub(crate) fn tcp(sport: u16, dport: u16, flags: u16) -> Vec<u8> {
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&sport.to_be_bytes());
        t[2..4].copy_from_slice(&dport.to_be_bytes());
        t[4..8].copy_from_slice(&1000u32.to_be_bytes());
        t[8..12].copy_from_slice(&2000u32.to_be_bytes());
        t[12] = 0x50 | ((flags >> 8) as u8 & 0x0f);
        t[13] = flags as u8;
        t[14..16].copy_from_slice(&512u16.to_be_bytes());
        t
    }

    pub(crate) fn udp(sport: u16, dport: u16, payload: usize) -> Vec<u8> {
        let mut u = vec![0u8; 8];
        u[0..2].copy_from_slice(&sport.to_be_bytes());
        u[2..4].copy_from_slice(&dport.to_be_bytes());
        u[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        u.extend(std::iter::repeat_n(0u8, payload));
        u
    }

    fn run(lt: u32, pkt: &[u8]) -> Fields {
        let mut f = Fields::default();
        decode(lt, pkt, &mut f);
        f
    }

    #[test]
    fn ethernet_ipv4_tcp() {
        let mut p = eth(0x0800);
        p.extend(ipv4(6, 20, 0x4000, &[]));
        p.extend(tcp(1234, 80, 0x012));
        let f = run(linktype::ETHERNET, &p);
        assert_eq!(f.problem, None);
        assert_eq!(f.eth_src, MAC_A);
        assert_eq!(f.eth_dst, MAC_B);
        assert_eq!(f.ethertype, 0x0800);
        assert_eq!(f.ip_version, 4);
        assert_eq!(&f.ip_src[..4], &[10, 0, 0, 1]);
        assert_eq!((f.proto, f.ttl, f.ip_len), (6, 64, 40));
        assert_eq!((f.src_port, f.dst_port), (1234, 80));
        assert_eq!(
            (f.tcp_flags, f.tcp_seq, f.tcp_ack, f.tcp_win),
            (0x12, 1000, 2000, 512)
        );
        assert!(f.has(has::TCP) && f.has(has::PORTS) && !f.has(has::FRAG));
        assert!(!f.has(has::VLAN_OUTER));
    }

    #[test]
    fn tcp_ack_is_reported_without_the_ack_flag() {
        // Regression (tshark cross-check): tshark 4.0 shows tcp.ack_raw for
        // every full TCP header, ACK flag or not (a nonzero value without
        // the flag only adds an expert note), so a SYN keeps its tcp_ack.
        for flags in [0x002, 0x004, 0x000, 0x012] {
            let mut p = eth(0x0800);
            p.extend(ipv4(6, 20, 0, &[]));
            p.extend(tcp(1234, 80, flags));
            let f = run(linktype::ETHERNET, &p);
            assert_eq!(f.problem, None);
            assert!(f.has(has::TCP_ACK), "flags {flags:#x}");
            assert_eq!((f.tcp_flags, f.tcp_ack), (flags, 2000));
        }
    }

    #[test]
    fn ipv4_options_and_padding() {
        let mut p = eth(0x0800);
        p.extend(ipv4(17, 12, 0, &[0x94, 4, 0, 0])); // router alert
        p.extend(udp(5353, 5353, 4));
        p.extend([0u8; 10]); // trailer/padding
        let f = run(linktype::ETHERNET, &p);
        assert_eq!(f.problem, None);
        assert_eq!((f.src_port, f.dst_port, f.ip_len), (5353, 5353, 36));
    }

    #[test]
    fn vlan_and_qinq() {
        let mut p = eth(0x8100);
        p.extend([0x00, 0x0a, 0x08, 0x00]);
        p.extend(ipv4(17, 8, 0, &[]));
        p.extend(udp(1, 2, 0));
        let f = run(linktype::ETHERNET, &p);
        assert_eq!((f.vlan_outer, f.ethertype), (10, 0x0800));
        assert!(f.has(has::VLAN_OUTER) && !f.has(has::VLAN_INNER));
        assert_eq!(f.dst_port, 2);

        let mut p = eth(0x88a8);
        p.extend([0x00, 0x64, 0x81, 0x00]);
        p.extend([0x20, 0xc8, 0x86, 0xdd]);
        p.extend(ipv6(58, 8));
        p.extend([128, 0, 0, 0, 0, 1, 0, 1]);
        let f = run(linktype::ETHERNET, &p);
        assert_eq!(
            (f.vlan_outer, f.vlan_inner, f.ethertype),
            (100, 200, 0x86dd)
        );
        assert_eq!((f.proto, f.icmp_type, f.icmp_code), (58, 128, 0));
    }

    #[test]
    fn ipv4_fragments_ports_only_on_first() {
        let mut p = eth(0x0800);
        p.extend(ipv4(17, 16, 0x2000, &[]));
        p.extend(udp(7000, 7001, 8));
        let f = run(linktype::ETHERNET, &p);
        assert!(f.has(has::FRAG) && f.has(has::PORTS));
        assert_eq!(f.src_port, 7000);

        let mut p = eth(0x0800);
        p.extend(ipv4(17, 16, 185, &[]));
        p.extend([0xffu8; 16]);
        let f = run(linktype::ETHERNET, &p);
        assert!(f.has(has::FRAG) && !f.has(has::PORTS));
        assert_eq!(f.proto, 17);
        assert_eq!(f.problem, None);
    }

    #[test]
    fn ipv6_ext_headers_final_protocol() {
        let mut p = eth(0x86dd);
        p.extend(ipv6(0, 8 + 8 + 20));
        p.extend([60, 0, 5, 2, 0, 0, 1, 0]); // hop-by-hop -> dstopts
        p.extend([6, 0, 1, 4, 0, 0, 0, 0]); // dstopts -> TCP
        p.extend(tcp(22, 40000, 0x018));
        let f = run(linktype::ETHERNET, &p);
        assert_eq!(f.problem, None);
        assert_eq!((f.ip_version, f.proto, f.ttl), (6, 6, 33));
        assert_eq!((f.src_port, f.dst_port, f.tcp_flags), (22, 40000, 0x18));
        assert_eq!(f.ip_src[0..2], [0x20, 0x01]);
    }

    /// An IPv6 packet over Ethernet with `n` extension headers (routing,
    /// hop-by-hop-free destination options, alternating) then UDP.
    pub(crate) fn ipv6_long_chain(n: usize) -> Vec<u8> {
        let mut ext = Vec::new();
        for i in 0..n {
            let next = if i + 1 == n {
                17
            } else if i % 2 == 0 {
                60
            } else {
                43
            };
            ext.extend([next, 0, 1, 4, 0, 0, 0, 0]);
        }
        let l4 = udp(5353, 53, 4);
        let mut p = eth(0x86dd);
        p.extend(ipv6(43, ext.len() + l4.len()));
        p.extend(ext);
        p.extend(l4);
        p
    }

    #[test]
    fn sixteen_or_more_ipv6_extension_headers_decode_as_valid_udp() {
        // libpcap's ipv6_ext_headers.pcap frame 1: proto was 43 and the
        // packet counted malformed; tshark: 17.
        for n in [16, 17, 64] {
            let f = run(linktype::ETHERNET, &ipv6_long_chain(n));
            assert_eq!(f.problem, None, "{n} headers");
            assert_eq!(f.proto, 17, "{n} headers");
            assert_eq!((f.src_port, f.dst_port), (5353, 53), "{n} headers");
        }
    }

    #[test]
    fn ipv4_total_length_0_of_a_tso_send_is_decoded_from_the_captured_bytes() {
        // tcpdump's ipv4_tcp_http_xml_tso.pcap frame 1: tshark shows
        // 39556 -> 8080; we used to drop the ports and count malformed_header.
        let mut p = eth(0x0800);
        let mut ip = ipv4(6, 20 + 3000, 0, &[]);
        ip[2..4].copy_from_slice(&0u16.to_be_bytes());
        p.extend(ip);
        p.extend(tcp(39556, 8080, 0x018));
        p.extend(vec![0x41; 3000]);
        let f = run(linktype::ETHERNET, &p);
        assert_eq!(f.problem, None);
        assert_eq!((f.src_port, f.dst_port), (39556, 8080));
        assert!(f.has(has::TCP_SEQ) && f.has(has::TCP_ACK));
        assert_eq!(f.ip_len, 0);
    }

    #[test]
    fn ipv6_payload_length_0_of_a_jumbogram_is_decoded_from_the_captured_bytes() {
        // tcpdump's bigtcp-ipv6-hbh.pcap frame 1: hop-by-hop jumbo option,
        // payload length 0; tshark: proto 6. We used to report proto 0 and
        // header_cut_short.
        let mut p = eth(0x86dd);
        p.extend(ipv6(0, 0));
        // Hop-by-hop: next header TCP, length 0 (8 bytes), jumbo option
        // (type 0xC2, length 4, the jumbo payload length).
        let jumbo = (8 + 20 + 70_000u32).to_be_bytes();
        p.extend([6, 0, 0xC2, 4, jumbo[0], jumbo[1], jumbo[2], jumbo[3]]);
        p.extend(tcp(41851, 443, 0x010));
        p.extend(vec![0u8; 200]);
        let f = run(linktype::ETHERNET, &p);
        assert_eq!(f.problem, None);
        assert_eq!(f.proto, 6);
        assert_eq!((f.src_port, f.dst_port), (41851, 443));
    }

    #[test]
    fn ipv6_fragment_header() {
        let mut p = eth(0x86dd);
        p.extend(ipv6(44, 8 + 16));
        p.extend([17, 0, 0x05, 0x48, 0, 0, 0, 1]);
        p.extend([0u8; 16]);
        let f = run(linktype::ETHERNET, &p);
        assert!(f.has(has::FRAG) && !f.has(has::PORTS));
        assert_eq!(f.proto, 17);
    }

    #[test]
    fn tcp_cut_short_keeps_the_fields_it_holds() {
        let mut p = eth(0x0800);
        p.extend(ipv4(6, 20, 0, &[]));
        p.extend(tcp(1234, 80, 0x012));
        // Regression (tshark cross-check): a TCP header cut by the snaplen
        // inside its first 16 bytes shows its ports, and nothing else, as
        // in tshark.
        let f = run(linktype::ETHERNET, &p[..34 + 13]);
        assert_eq!(f.problem, Some(DecodeProblem::Cut));
        assert_eq!((f.src_port, f.dst_port), (1234, 80));
        assert!(f.has(has::PORTS) && !f.has(has::TCP_SEQ) && !f.has(has::TCP_ACK));
        assert!(!f.has(has::TCP_FLAGS) && !f.has(has::TCP_WIN) && !f.has(has::TCP));
        let f = run(linktype::ETHERNET, &p[..34 + 3]);
        assert!(!f.has(has::PORTS));
        // With the 16 bytes up to the window, tshark shows seq, ack, flags
        // and window too (checksum and urgent pointer missing).
        for cut in [16, 19] {
            let f = run(linktype::ETHERNET, &p[..34 + cut]);
            assert_eq!(f.problem, Some(DecodeProblem::Cut));
            assert_eq!((f.tcp_flags, f.tcp_win), (0x012, 0x200), "{cut}");
            let want = has::PORTS | has::TCP_SEQ | has::TCP_ACK | has::TCP_FLAGS | has::TCP_WIN;
            assert_eq!(f.present & (want | has::TCP), want, "{cut}");
        }
    }

    #[test]
    fn tcp_cut_short_by_the_ip_length_keeps_the_fields_it_holds() {
        // Regression (issue 13, item 5): the IP total length ends inside
        // the TCP header although the whole frame (with a trailer) was
        // captured. tshark 4.0 gives ports from 4 bytes and seq, ack,
        // flags and window from 16; we gave the ports only.
        for (tcp_bytes, full) in [(4, false), (12, false), (15, false), (16, true), (19, true)] {
            let mut p = eth(0x0800);
            p.extend(ipv4(6, tcp_bytes, 0, &[]));
            let mut t = tcp(1234, 80, 0x018);
            t[4..8].copy_from_slice(&1000u32.to_be_bytes());
            t[8..12].copy_from_slice(&2000u32.to_be_bytes());
            p.extend(t);
            p.extend([0u8; 6]); // Ethernet trailer
            let f = run(linktype::ETHERNET, &p);
            assert_eq!(f.problem, Some(DecodeProblem::Cut), "{tcp_bytes}");
            assert_eq!(f.ip_len as usize, 20 + tcp_bytes);
            assert_eq!((f.src_port, f.dst_port), (1234, 80), "{tcp_bytes}");
            assert!(f.has(has::PORTS) && !f.has(has::TCP));
            for bit in [has::TCP_SEQ, has::TCP_ACK, has::TCP_FLAGS, has::TCP_WIN] {
                assert_eq!(f.has(bit), full, "{tcp_bytes}: bit {bit:#x}");
            }
            if full {
                assert_eq!((f.tcp_seq, f.tcp_ack, f.tcp_flags), (1000, 2000, 0x018));
            }
        }
    }

    #[test]
    fn tagged_802_3_frame_has_no_ethertype() {
        // Regression (tshark cross-check on tcpdump's MSTP and PVST+
        // captures): the length after a VLAN tag was reported as the
        // EtherType (0x0089); tshark has none, as for untagged 802.3.
        let mut p = eth(0x8100);
        p.extend([0x00, 0x05, 0x00, 0x89]);
        p.extend([0x42, 0x42, 0x03, 0, 0, 3, 0]);
        let f = run(linktype::ETHERNET, &p);
        assert_eq!(f.problem, None);
        assert!(f.has(has::VLAN_OUTER) && !f.has(has::ETHERTYPE));
        assert_eq!(f.vlan_outer, 5);
    }

    #[test]
    fn arp() {
        let mut p = eth(0x0806);
        p.extend([0, 1, 8, 0, 6, 4, 0, 1]);
        p.extend([0u8; 20]);
        let f = run(linktype::ETHERNET, &p);
        assert!(f.has(has::ARP) && !f.has(has::IP));
        assert_eq!((f.ethertype, f.arp_op), (0x0806, 1));
    }

    #[test]
    fn rarp_operations_are_decoded_like_arp() {
        // tcpdump's rarp_req_reply.pcapng: tshark gives arp.opcode 3 and 4;
        // ethertype 0x8035 used to be left undecoded.
        for op in [3u8, 4] {
            let mut p = eth(0x8035);
            p.extend([0, 1, 8, 0, 6, 4, 0, op]);
            p.extend([0u8; 20]);
            let f = run(linktype::ETHERNET, &p);
            assert!(f.has(has::ARP));
            assert_eq!((f.ethertype, f.arp_op), (0x8035, op as u16));
        }
    }

    #[test]
    fn sll_and_sll2() {
        let mut p = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 0x08, 0x00];
        p.extend(ipv4(1, 8, 0, &[]));
        p.extend([8, 0, 0, 0, 0, 0, 0, 0]);
        let f = run(linktype::LINUX_SLL, &p);
        assert_eq!(f.eth_src, [1, 2, 3, 4, 5, 6]);
        assert!(!f.has(has::ETH_DST));
        assert_eq!((f.ethertype, f.proto, f.icmp_type), (0x0800, 1, 8));

        let mut p = vec![0x86, 0xdd, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6];
        p.extend([9, 8, 7, 6, 5, 4, 0, 0]);
        p.extend(ipv6(17, 8));
        p.extend(udp(53, 3333, 0));
        let f = run(linktype::LINUX_SLL2, &p);
        assert_eq!(f.eth_src, [9, 8, 7, 6, 5, 4]);
        assert_eq!((f.ethertype, f.src_port, f.dst_port), (0x86dd, 53, 3333));
    }

    #[test]
    fn raw_null_loop() {
        let mut v4 = ipv4(6, 20, 0, &[]);
        v4.extend(tcp(1, 2, 0x02));
        let f = run(linktype::RAW, &v4);
        assert_eq!((f.ip_version, f.src_port), (4, 1));
        assert!(!f.has(has::ETH_SRC) && !f.has(has::ETHERTYPE));
        let f = run(linktype::IPV4, &v4);
        assert_eq!(f.dst_port, 2);

        let mut n = 2u32.to_le_bytes().to_vec();
        n.extend(&v4);
        assert_eq!(run(linktype::NULL, &n).src_port, 1);
        let mut l = 30u32.to_be_bytes().to_vec();
        let mut v6 = ipv6(17, 8);
        v6.extend(udp(9, 10, 0));
        l.extend(&v6);
        let f = run(linktype::LOOP, &l);
        assert_eq!((f.ip_version, f.dst_port), (6, 10));
        let f = run(linktype::IPV6, &v6);
        assert_eq!(f.src_port, 9);
    }

    #[test]
    fn problems_are_reported_not_panicked() {
        let mut p = eth(0x0800);
        p.extend(ipv4(6, 20, 0, &[]));
        p.extend(tcp(1, 2, 0));
        for cut in 0..p.len() {
            let f = run(linktype::ETHERNET, &p[..cut]);
            assert_eq!(f.problem, Some(DecodeProblem::Cut), "cut at {cut}");
        }
        let f = run(999, &p);
        assert_eq!(f.problem, Some(DecodeProblem::UnknownLinktype));
        let mut bad = p.clone();
        bad[14] = 0x43; // IHL 3
        assert_eq!(
            run(linktype::ETHERNET, &bad).problem,
            Some(DecodeProblem::Malformed)
        );
    }
}
