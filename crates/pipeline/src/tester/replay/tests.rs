//! The replay source on captures written here: several link types, pcapng
//! with several interfaces, VLAN tags, IPv6, fragments, gzip and zstd.

use super::*;
use commbench_core::capture::writer::{PcapBuilder, PcapngBuilder};
use std::io::Write;

/// An Ethernet frame from captured MACs `aa..`/`bb..`, with `vlans`
/// tags, ethertype and an L3 body, padded to 60 B as a NIC would.
pub(crate) fn eth(vlans: &[u16], ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = vec![0xaa; 6];
    f.extend_from_slice(&[0xbb; 6]);
    for v in vlans {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    while f.len() < 60 {
        f.push(0xee);
    }
    f
}

/// An IPv4 datagram: `proto`, addresses from `host`, fragment field
/// `frag`, an L4 body of `l4` (ports 1000+host → 53 first).
pub(crate) fn ipv4(proto: u8, host: u8, frag: u16, l4: usize) -> Vec<u8> {
    let tl = 20 + l4;
    let mut d = vec![0x45, 0, (tl >> 8) as u8, tl as u8, 0, 1];
    d.extend_from_slice(&frag.to_be_bytes());
    d.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, host, 10, 0, 1, 1]);
    // A valid header checksum: a bridge with br_netfilter drops others.
    let c = crate::wire::ipv4_checksum(&d[..20]);
    d[10..12].copy_from_slice(&c.to_be_bytes());
    let mut l4b = vec![0x5a; l4];
    if l4 >= 4 {
        l4b[..4].copy_from_slice(&[0x03, 0xe8u8.wrapping_add(host), 0, 53]);
    }
    d.extend_from_slice(&l4b);
    d
}

/// An IPv6 datagram with next header `nh` and `l4` bytes after it.
fn ipv6(nh: u8, l4: usize) -> Vec<u8> {
    let mut d = vec![0x60, 0, 0, 0, (l4 >> 8) as u8, l4 as u8, nh, 64];
    d.extend_from_slice(&[0x20; 16]);
    d.extend_from_slice(&[0x30; 16]);
    d.extend_from_slice(&vec![0x11; l4]);
    d
}

fn arp() -> Vec<u8> {
    vec![0, 1, 8, 0, 6, 4, 0, 1]
}

/// The frames of the mixed capture: what each is, by class.
pub(crate) fn mixed() -> Vec<Vec<u8>> {
    vec![
        eth(&[], 0x0800, &ipv4(17, 1, 0, 12)),      // udp, 64 B padded
        eth(&[], 0x0800, &ipv4(6, 2, 0, 200)),      // tcp
        eth(&[100], 0x0800, &ipv4(17, 3, 0, 1000)), // udp, VLAN 100
        eth(&[100, 7], 0x0800, &ipv4(1, 4, 0, 60)), // icmp, QinQ
        eth(&[], 0x0800, &ipv4(17, 5, 0x2000, 1480)), // first fragment
        eth(&[], 0x0800, &ipv4(17, 5, 185, 400)),   // later fragment
        eth(&[], 0x86dd, &ipv6(17, 100)),           // udp over IPv6
        eth(&[], 0x86dd, &ipv6(58, 16)),            // icmpv6
        eth(&[], 0x0806, &arp()),                   // arp
        eth(&[], 0x0800, &ipv4(6, 2, 0, 1480)),     // tcp, 1518 B
    ]
}

pub(crate) fn pcap_of(frames: &[Vec<u8>], linktype: u32) -> Vec<u8> {
    let mut b = PcapBuilder::new(false, false, false, 65535, linktype);
    for (i, f) in frames.iter().enumerate() {
        b.record(i as u32, 0, f);
    }
    b.bytes
}

fn load(bytes: Vec<u8>, order: Order) -> Traffic {
    Traffic::from_bytes("test.pcap", bytes, order).unwrap()
}

#[test]
fn a_capture_is_offered_with_its_headers_and_only_the_macs_rewritten() {
    let frames = mixed();
    let t = load(pcap_of(&frames, 1), Order::Capture);
    assert_eq!(t.len(), frames.len());
    assert!(t.refused.is_empty(), "{:?}", t.refused);
    for (i, orig) in frames.iter().enumerate() {
        let (b, _, _) = t.frame(i as u64);
        assert_eq!(&b[..6], &DST_MAC);
        assert_eq!(&b[6..12], &SRC_MAC);
        // Everything past the MACs as captured, up to the datagram's end:
        // the padding a short frame had is not carried.
        assert_eq!(&b[12..], &orig[12..b.len()], "frame {i}");
        if let Some(end) = stamp::datagram_end(orig) {
            assert_eq!(b.len(), end, "frame {i}");
        }
    }
    // The 64 B UDP frame had 14 B of padding past its 46 B frame.
    assert_eq!(t.frame(0).0.len(), 14 + 20 + 12);
    // Classes: size bucket and protocol.
    let names: Vec<(&str, &str)> = (0..frames.len() as u64)
        .map(|i| class_names(t.frame(i).2))
        .collect();
    assert_eq!(
        names,
        [
            ("64", "udp"),
            ("128-255", "tcp"),
            ("1024-1518", "udp"),
            ("65-127", "icmp"),
            ("1024-1518", "udp"),
            ("256-511", "ipv4 fragment"),
            ("128-255", "udp"),
            ("65-127", "icmpv6"),
            ("64", "arp"),
            ("1024-1518", "tcp"),
        ]
    );
}

#[test]
fn the_mix_says_sizes_flows_protocols_vlans_ipv6_and_fragments() {
    let t = load(pcap_of(&mixed(), 1), Order::Capture);
    let m = &t.mix;
    assert_eq!(m.frames, 10);
    assert_eq!(m.size_min, 64);
    assert_eq!(m.size_max, 1518);
    assert_eq!(m.vlan_frames, 2);
    assert_eq!(m.vlans, 1, "both tagged frames have outer VLAN 100");
    assert_eq!(m.ipv6_frames, 2);
    assert_eq!(m.fragments, 2);
    let proto = |p: &str| m.protocols.iter().find(|x| x.0 == p).unwrap().1;
    assert_eq!(proto("tcp"), 2);
    assert_eq!(proto("udp"), 4);
    assert_eq!(proto("arp"), 1);
    assert_eq!(proto("ipv4 fragment"), 1);
    // Frames 1 and 9 are one flow (same addresses, protocol and ports);
    // the two fragments are two (the later one has no ports).
    assert_eq!(m.flows, 9);
    assert!((m.top_flow_pct - 20.0).abs() < 1e-9, "{}", m.top_flow_pct);
    assert_eq!(m.size_buckets.iter().map(|b| b.1).sum::<u64>(), 10);
    assert!(m.imix.starts_with("64 B 20%"), "{}", m.imix);
    let line = m.line();
    assert!(line.contains("10 frames, 64/"), "{line}");
    assert!(line.contains("2 VLAN-tagged on 1 VLANs"), "{line}");
    assert!(line.contains("2 fragments"), "{line}");
}

#[test]
fn frames_the_path_cannot_carry_are_counted_by_reason_and_left_out() {
    let mut frames = mixed();
    // A 9000 B jumbo frame, over the MTU.
    frames.push(eth(&[], 0x0800, &ipv4(17, 9, 0, 8980)));
    // An IPv4 header saying more bytes than were captured.
    let mut cut = eth(&[], 0x0800, &ipv4(17, 8, 0, 500));
    cut.truncate(100);
    frames.push(cut);
    // A runt.
    let mut b = PcapBuilder::new(false, false, false, 65535, 1);
    for (i, f) in frames.iter().enumerate() {
        b.record(i as u32, 0, f);
    }
    b.record(99, 0, &[1, 2, 3]);
    // A record captured short of its wire length (snaplen 96).
    let big = eth(&[], 0x0800, &ipv4(6, 2, 0, 1000));
    b.record_raw(100, 0, 96, big.len() as u32, &big[..96]);
    let t = load(b.bytes, Order::Capture);
    assert_eq!(t.len(), 10);
    assert_eq!(
        t.refused,
        vec![
            (Refusal::OverMtu, 1),
            (Refusal::Truncated, 2),
            (Refusal::Runt, 1)
        ]
    );
    assert_eq!(t.refused_total(), 4);
    let line = t.refused_line().unwrap();
    assert_eq!(
        line,
        "4 frames of test.pcap left out: 1 over the 1500 B MTU, 2 captured short of their length, 1 shorter than an Ethernet header"
    );
}

#[test]
fn a_pcapng_of_several_interfaces_keeps_the_ethernet_ones_and_counts_the_others() {
    let frames = mixed();
    let mut b = PcapngBuilder::new();
    b.shb(false)
        .idb(1, 0, None, None) // Ethernet
        .idb(113, 0, None, None) // Linux cooked capture
        .idb(1, 0, Some(9), None) // Ethernet, ns timestamps
        .idb(101, 0, None, None); // raw IP
    for (i, f) in frames.iter().enumerate() {
        let iface = if i % 2 == 0 { 0 } else { 2 };
        b.epb(iface, i as u64, f, f.len() as u32);
        b.epb(1, i as u64, &f[..40], 40);
    }
    b.epb(3, 0, &ipv4(17, 1, 0, 30), 50);
    let t = Traffic::from_bytes("two.pcapng", b.bytes, Order::Capture).unwrap();
    assert_eq!(t.len(), frames.len());
    assert_eq!(
        t.refused,
        vec![(Refusal::LinkType(101), 1), (Refusal::LinkType(113), 10)]
    );
    assert!(t
        .refused_line()
        .unwrap()
        .contains("10 link type 113 is not Ethernet"));
    // In the capture's order across the interfaces.
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(&t.frame(i as u64).0[12..20], &f[12..20]);
    }
}

#[test]
fn a_capture_of_nothing_replayable_is_refused_saying_why() {
    let e = Traffic::from_bytes("sll.pcap", pcap_of(&mixed(), 113), Order::Capture).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("no frame to replay (10 link type 113 is not Ethernet)"),
        "{m}"
    );
    let e = Traffic::from_bytes("x", b"not a capture at all".to_vec(), Order::Capture).unwrap_err();
    assert!(e.to_string().contains("not a capture file"), "{e}");
}

#[test]
fn gzip_and_zstd_captures_replay_the_same_frames() {
    let raw = pcap_of(&mixed(), 1);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    let gz = gz.finish().unwrap();
    let zs = zstd::encode_all(&raw[..], 3).unwrap();
    let a = load(raw, Order::Capture);
    for bytes in [gz, zs] {
        let b = load(bytes, Order::Capture);
        assert_eq!(a.mix, b.mix);
        for i in 0..a.len() as u64 {
            assert_eq!(a.frame(i), b.frame(i));
        }
    }
}

#[test]
fn the_mix_order_is_a_seeded_shuffle_of_the_same_frames() {
    let frames: Vec<Vec<u8>> = (0..200u8)
        .map(|h| eth(&[], 0x0800, &ipv4(17, h, 0, 30 + usize::from(h))))
        .collect();
    let bytes = pcap_of(&frames, 1);
    let cap = load(bytes.clone(), Order::Capture);
    let a = load(bytes.clone(), Order::Mix { seed: 7 });
    let b = load(bytes.clone(), Order::Mix { seed: 7 });
    let c = load(bytes, Order::Mix { seed: 8 });
    let seq = |t: &Traffic| {
        (0..t.len() as u64)
            .map(|i| t.frame(i).0.to_vec())
            .collect::<Vec<_>>()
    };
    assert_eq!(seq(&a), seq(&b), "one seed, one order");
    assert_ne!(seq(&a), seq(&c));
    assert_ne!(seq(&a), seq(&cap));
    let mut sa = seq(&a);
    let mut sc = seq(&cap);
    sa.sort();
    sc.sort();
    assert_eq!(sa, sc, "the same frames");
    assert_eq!(a.mix, cap.mix);
}

#[test]
fn staged_frames_carry_a_trailer_the_sink_reads_back_per_stream_in_sequence() {
    let t = load(pcap_of(&mixed(), 1), Order::Capture);
    assert_eq!(t.streams, 9);
    let mut seq = vec![0u64; usize::from(t.streams)];
    let n = 3 * t.len() as u64 + 4;
    let mut next = vec![0u64; usize::from(t.streams)];
    let mut buf = [0u8; 2048];
    for i in 0..n {
        let (len, at) = t.stage(i, &mut buf, 0x0300, &mut seq);
        stamp::write_ts_at(&mut buf, at, 12345 + i);
        let f = &buf[..len];
        let (s, class) = stamp::parse_trailer(f).unwrap();
        let (_, stream, c) = t.frame(i);
        assert_eq!(s.flow, 0x0300 + u16::from(stream));
        assert_eq!(s.seq, next[usize::from(stream)]);
        assert_eq!(s.tx_ns, 12345 + i);
        assert_eq!(class, c);
        next[usize::from(stream)] += 1;
        // A device that pads the frame, or strips the VLAN tag, leaves
        // the trailer where the sink finds it.
        if stamp::datagram_end(f).is_some() {
            let mut padded = f.to_vec();
            padded.resize(len + 8, 0);
            assert_eq!(stamp::parse_trailer(&padded).unwrap().0, s);
        }
        if f[12..14] == [0x81, 0x00] {
            let mut untagged = f[..12].to_vec();
            untagged.extend_from_slice(&f[16..]);
            assert_eq!(stamp::parse_trailer(&untagged).unwrap().0, s);
        }
    }
    // What the plan says was sent is what was staged.
    let (streams, classes) = t.plan(n);
    assert_eq!(streams, seq);
    assert_eq!(classes.iter().sum::<u64>(), n);
    assert_eq!(streams.iter().sum::<u64>(), n);
}

#[test]
fn a_capture_of_many_flows_spreads_them_over_at_most_the_tester_flows() {
    let frames: Vec<Vec<u8>> = (0..1000u32)
        .map(|h| {
            let mut d = ipv4(17, (h % 250) as u8, 0, 30);
            d[19] = (h / 250) as u8; // the destination's last byte
            eth(&[], 0x0800, &d)
        })
        .collect();
    let t = load(pcap_of(&frames, 1), Order::Capture);
    assert_eq!(t.mix.flows, 1000);
    assert_eq!(t.streams, MAX_FLOWS);
    let (streams, _) = t.plan(1000);
    assert_eq!(streams.iter().sum::<u64>(), 1000);
    // A hash spread: 1,000 flows over 256 streams leave about 5 empty.
    let used = streams.iter().filter(|&&c| c > 0).count();
    assert!(used > 200, "{streams:?}");
}

#[test]
fn the_sizes_of_a_capture_are_its_frames_sizes_in_the_offer_order() {
    let mut frames = mixed();
    // A VLAN-tagged full-size frame: 1522 B with FCS, offered at 1518 B.
    frames.push(eth(&[100], 0x0800, &ipv4(6, 2, 0, 1480)));
    let cap = load(pcap_of(&frames, 1), Order::Capture);
    let (s, cut) = cap.sizes();
    assert_eq!(s.name, "sizes of test.pcap");
    assert_eq!(cut, 1);
    // Frame by frame: the mix's size (FCS included, at least 64 B).
    let want: Vec<u32> = (0..cap.len() as u64)
        .map(|i| ((cap.frame(i).0.len() + FCS) as u32).clamp(64, 1518))
        .collect();
    assert_eq!(s.pattern, want);
    assert_eq!(s.pattern[0], 64);
    assert_eq!(s.pattern[9], 1518);
    assert_eq!(s.pattern[10], 1518);
    let mut sorted = s.pattern.clone();
    sorted.sort_unstable();
    assert_eq!(sorted[0], cap.mix.size_min);
    assert_eq!(sorted[sorted.len() / 2], cap.mix.size_median);
    // Shuffled: the same sizes in the mix's seeded order, named so.
    let mix = load(pcap_of(&frames, 1), Order::Mix { seed: 7 });
    let (m, _) = mix.sizes();
    assert_eq!(m.name, "sizes of test.pcap, shuffled (seed 7)");
    let want: Vec<u32> = (0..mix.len() as u64)
        .map(|i| ((mix.frame(i).0.len() + FCS) as u32).clamp(64, 1518))
        .collect();
    assert_eq!(m.pattern, want);
    assert_ne!(m.pattern, s.pattern);
    let mut ms = m.pattern.clone();
    ms.sort_unstable();
    assert_eq!(ms, sorted);
}
