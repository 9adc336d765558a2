//! The Ethernet frames inside packet_in/packet_out: a reader that extracts
//! the OpenFlow 1.0 exact-match key (Ethernet, one 802.1Q tag, ARP, IPv4,
//! TCP/UDP/ICMP — the fields Trema's `ExactMatch.new(packet_in)` fills in,
//! with OVS `flow_extract` semantics for ARP and ICMP), and the builders for
//! cbench's probe and gratuitous-ARP frames (as cbench's source builds them).
//!
//! Invariants: the reader never indexes past the frame; a truncated inner
//! header simply leaves the deeper fields zero (as a switch does), it is not
//! an error. Seed: cbench-trema-speedup (the match built per packet_in).

use super::{be16, be32};

/// `OFP_VLAN_NONE`: the frame carries no 802.1Q tag.
pub const VLAN_NONE: u16 = 0xffff;
pub const ETH_TYPE_IPV4: u16 = 0x0800;
pub const ETH_TYPE_ARP: u16 = 0x0806;
pub const ETH_TYPE_VLAN: u16 = 0x8100;
pub const ETH_TYPE_LLDP: u16 = 0x88cc;

/// Header fields of one frame, as an OpenFlow 1.0 match sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowKey {
    pub dl_src: [u8; 6],
    pub dl_dst: [u8; 6],
    pub dl_vlan: u16,
    pub dl_vlan_pcp: u8,
    pub dl_type: u16,
    pub nw_tos: u8,
    pub nw_proto: u8,
    pub nw_src: u32,
    pub nw_dst: u32,
    pub tp_src: u16,
    pub tp_dst: u16,
}

impl FlowKey {
    /// Extract the key; `None` only when the frame is shorter than an
    /// Ethernet header.
    #[inline(always)]
    pub fn extract(f: &[u8]) -> Option<FlowKey> {
        if f.len() < 14 {
            return None;
        }
        let mut k = FlowKey {
            dl_vlan: VLAN_NONE,
            ..FlowKey::default()
        };
        k.dl_dst.copy_from_slice(&f[0..6]);
        k.dl_src.copy_from_slice(&f[6..12]);
        let mut ty = be16(f, 12);
        let mut off = 14;
        if ty == ETH_TYPE_VLAN {
            if f.len() < 18 {
                return Some(k);
            }
            let tci = be16(f, 14);
            k.dl_vlan = tci & 0x0fff;
            k.dl_vlan_pcp = (tci >> 13) as u8;
            ty = be16(f, 16);
            off = 18;
        }
        k.dl_type = ty;
        let l3 = &f[off..];
        match ty {
            ETH_TYPE_IPV4 if l3.len() >= 20 => {
                let ihl = (l3[0] & 0x0f) as usize * 4;
                k.nw_tos = l3[1] & 0xfc;
                k.nw_proto = l3[9];
                k.nw_src = be32(l3, 12);
                k.nw_dst = be32(l3, 16);
                let frag = be16(l3, 6) & 0x1fff;
                if ihl >= 20 && frag == 0 && l3.len() >= ihl + 4 {
                    let l4 = &l3[ihl..];
                    match k.nw_proto {
                        6 | 17 => {
                            k.tp_src = be16(l4, 0);
                            k.tp_dst = be16(l4, 2);
                        }
                        1 => {
                            k.tp_src = l4[0] as u16;
                            k.tp_dst = l4[1] as u16;
                        }
                        _ => {}
                    }
                }
            }
            ETH_TYPE_ARP if l3.len() >= 28 => {
                let op = be16(l3, 6);
                if op <= 0xff {
                    k.nw_proto = op as u8;
                }
                k.nw_src = be32(l3, 14);
                k.nw_dst = be32(l3, 24);
            }
            _ => {}
        }
        Some(k)
    }
}

/// Is this frame LLDP (cbench does not count such packet_outs)?
pub fn is_lldp(f: &[u8]) -> bool {
    f.len() >= 14 && be16(f, 12) == ETH_TYPE_LLDP
}

/// Length of cbench's probe frame.
pub const PROBE_FRAME_LEN: usize = 64;

/// The 30 bytes after the probe's IPv4 header: cbench's probe is a
/// captured packet (fakeswitch.c `make_packet_in`), and these are its
/// payload bytes, kept so that our probes are byte-for-byte cbench's.
const PROBE_PAYLOAD: [u8; 30] = [
    0x7a, 0x18, 0x58, 0x6b, 0x11, 0x08, 0x97, 0xf5, 0x19, 0xe2, 0x65, 0x7e, 0x07, 0xcc, 0x31, 0xc3,
    0x11, 0xc7, 0xc4, 0x0c, 0x8b, 0x95, 0x51, 0x51, 0x33, 0x54, 0x51, 0xd5, 0x00, 0x36,
];

/// cbench's 64-byte probe frame for switch `dpid` and MAC counter `mac`:
/// dst 80:00:00:00:00:<dpid>, src 00:<mac, host order>:<dpid>, IPv4 total
/// length 50, TTL 64, protocol 255, 192.168.0.40 -> 192.168.1.40, then
/// cbench's 30 payload bytes.
pub fn probe_frame(dpid: u64, mac: u32) -> [u8; PROBE_FRAME_LEN] {
    let mut f = [0u8; PROBE_FRAME_LEN];
    let d = (dpid & 0xff) as u8;
    f[0..6].copy_from_slice(&[0x80, 0, 0, 0, 0, d]);
    f[6] = 0;
    f[7..11].copy_from_slice(&mac.to_ne_bytes());
    f[11] = d;
    f[12..14].copy_from_slice(&ETH_TYPE_IPV4.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&50u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 0xff;
    ip[12..16].copy_from_slice(&[192, 168, 0, 40]);
    ip[16..20].copy_from_slice(&[192, 168, 1, 40]);
    let csum = ipv4_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&csum.to_be_bytes());
    f[34..].copy_from_slice(&PROBE_PAYLOAD);
    f
}

/// Offset of the 4 per-probe MAC-counter bytes inside [`probe_frame`].
pub const PROBE_MAC_COUNTER_OFFSET: usize = 7;

/// Length of cbench's learn-dst-mac frame (zero-padded past the ARP).
pub const ARP_FRAME_LEN: usize = 64;

/// cbench's learn-dst-mac frame: a gratuitous ARP reply from
/// 80:00:00:00:00:<dpid>, IP 192.168.<dpid>.40, zero-padded to 64 bytes
/// (fakeswitch.c `fakeswitch_learn_dstmac`).
pub fn gratuitous_arp(dpid: u64) -> [u8; ARP_FRAME_LEN] {
    let d = (dpid & 0xff) as u8;
    let mac = [0x80, 0, 0, 0, 0, d];
    let ip = [192, 168, d, 40];
    let mut f = [0u8; ARP_FRAME_LEN];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&ETH_TYPE_ARP.to_be_bytes());
    let a = &mut f[14..42];
    a[0..2].copy_from_slice(&1u16.to_be_bytes()); // Ethernet
    a[2..4].copy_from_slice(&ETH_TYPE_IPV4.to_be_bytes());
    a[4] = 6;
    a[5] = 4;
    a[6..8].copy_from_slice(&2u16.to_be_bytes()); // reply
    a[8..14].copy_from_slice(&mac);
    a[14..18].copy_from_slice(&ip);
    a[18..24].copy_from_slice(&mac);
    a[24..28].copy_from_slice(&ip);
    f
}

/// RFC 1071 Internet checksum over all of `h` (core's one checksum).
pub fn ipv4_checksum(h: &[u8]) -> u16 {
    commbench_core::checksum::internet_checksum(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_frame_fields() {
        let f = probe_frame(0x0102, 0x0a0b0c0d);
        let k = FlowKey::extract(&f).unwrap();
        assert_eq!(k.dl_dst, [0x80, 0, 0, 0, 0, 0x02]);
        assert_eq!(k.dl_src[0], 0);
        assert_eq!(k.dl_src[5], 0x02);
        assert_eq!(&k.dl_src[1..5], &0x0a0b0c0du32.to_ne_bytes());
        assert_eq!(k.dl_type, ETH_TYPE_IPV4);
        assert_eq!(k.dl_vlan, VLAN_NONE);
        assert_eq!(k.nw_proto, 255);
        assert_eq!(k.nw_src, 0xc0a8_0028);
        assert_eq!(k.nw_dst, 0xc0a8_0128);
        assert_eq!((k.tp_src, k.tp_dst), (0, 0));
        assert_eq!(ipv4_checksum(&f[14..34]), 0, "header checksum verifies");
        // cbench's probe header checksum is the constant 0xf72c.
        assert_eq!(&f[24..26], &[0xf7, 0x2c]);
        assert_eq!(&f[34..], &PROBE_PAYLOAD);
    }

    #[test]
    fn arp_key_uses_opcode_and_protocol_addresses() {
        let f = gratuitous_arp(7);
        let k = FlowKey::extract(&f).unwrap();
        assert_eq!(k.dl_type, ETH_TYPE_ARP);
        assert_eq!(k.nw_proto, 2);
        assert_eq!(k.nw_src, u32::from_be_bytes([192, 168, 7, 40]));
        assert_eq!(k.nw_dst, k.nw_src);
    }

    #[test]
    fn vlan_tcp_ports() {
        let mut f = vec![0u8; 18 + 20 + 20];
        f[12..14].copy_from_slice(&ETH_TYPE_VLAN.to_be_bytes());
        f[14..16].copy_from_slice(&((5u16 << 13) | 100).to_be_bytes());
        f[16..18].copy_from_slice(&ETH_TYPE_IPV4.to_be_bytes());
        f[18] = 0x45;
        f[18 + 9] = 6;
        f[38..40].copy_from_slice(&1234u16.to_be_bytes());
        f[40..42].copy_from_slice(&80u16.to_be_bytes());
        let k = FlowKey::extract(&f).unwrap();
        assert_eq!((k.dl_vlan, k.dl_vlan_pcp), (100, 5));
        assert_eq!((k.tp_src, k.tp_dst), (1234, 80));
    }

    #[test]
    fn short_frames_never_panic() {
        for n in 0..64 {
            let f = probe_frame(1, 1);
            let _ = FlowKey::extract(&f[..n]);
            let a = gratuitous_arp(1);
            let _ = FlowKey::extract(&a[..n]);
        }
        assert!(FlowKey::extract(&[0u8; 13]).is_none());
    }
}
