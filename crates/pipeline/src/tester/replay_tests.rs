//! Root tests of a replayed capture through the device: every frame
//! accounted per stream and per class with a known subset dropped,
//! duplicated and reordered; a capture's frames through a bridge with
//! their VLAN tags, IPv6 and fragments; AF_XDP refused. Counts only,
//! never speed.

use super::dut::{DutSpec, FwdWork, Impair};
use super::pace::Rate;
use super::replay::tests::{mixed, pcap_of};
use super::replay::{self, class_names, Order, Traffic};
use super::*;
use crate::netns;
use std::collections::HashSet;

fn root() -> bool {
    commbench_core::testing::root_or_skip("the tester creates namespaces and veths")
}

fn traffic(order: Order) -> Arc<Traffic> {
    Arc::new(Traffic::from_bytes("mixed.pcap", pcap_of(&mixed(), 1), order).unwrap())
}

/// The mixed capture with each frame twice in a row: a swap of two
/// neighbours then reorders within a flow.
fn doubled(order: Order) -> Arc<Traffic> {
    let frames: Vec<Vec<u8>> = mixed().into_iter().flat_map(|f| [f.clone(), f]).collect();
    Arc::new(Traffic::from_bytes("doubled.pcap", pcap_of(&frames, 1), order).unwrap())
}

fn spec(t: Arc<Traffic>, pps: f64, ms: u64) -> TrialSpec {
    TrialSpec {
        rate: Rate::Pps(pps),
        duration: Duration::from_millis(ms),
        // Counts, not pacing, are under test: a loaded machine may lag.
        lag_bound_ns: u64::MAX,
        drain: Duration::from_millis(300),
        ..TrialSpec::default()
    }
    .with_traffic(t)
}

/// Per stream (received, lost, duplicated, reordered, max distance) and
/// per protocol the frames lost, after `imp` acts on the first `n`
/// frames of `t`'s offer.
#[allow(clippy::type_complexity)]
fn expected(
    t: &Traffic,
    imp: &Impair,
    n: usize,
) -> (Vec<(u64, u64, u64, u64, u64)>, Vec<(&'static str, u64)>) {
    expected_after(t, imp, 0, n)
}

/// [`expected`] when the forwarder counted `skip` frames before the
/// trial's (unstamped probes, which it cannot tell from the frames).
#[allow(clippy::type_complexity)]
fn expected_after(
    t: &Traffic,
    imp: &Impair,
    skip: usize,
    n: usize,
) -> (Vec<(u64, u64, u64, u64, u64)>, Vec<(&'static str, u64)>) {
    let mut next = vec![0u64; usize::from(t.streams)];
    let sent: Vec<(usize, u64, u8)> = (0..n as u64)
        .map(|i| {
            let (_, s, class) = t.frame(i);
            let s = usize::from(s);
            next[s] += 1;
            (s, next[s] - 1, class)
        })
        .collect();
    let out: Vec<usize> = imp
        .apply_model(skip + n)
        .into_iter()
        .filter(|&i| i >= skip)
        .map(|i| i - skip)
        .collect();
    let arrived: HashSet<usize> = out.iter().copied().collect();
    let mut lost_by_proto: Vec<(&'static str, u64)> = Vec::new();
    for (i, &(_, _, class)) in sent.iter().enumerate() {
        if !arrived.contains(&i) {
            let p = class_names(class).1;
            match lost_by_proto.iter_mut().find(|x| x.0 == p) {
                Some(x) => x.1 += 1,
                None => lost_by_proto.push((p, 1)),
            }
        }
    }
    let per_stream = (0..usize::from(t.streams))
        .map(|f| {
            let mut seen = HashSet::new();
            let (mut dup, mut re, mut maxd, mut hi) = (0u64, 0u64, 0u64, None::<u64>);
            for &i in &out {
                let (fl, s, _) = sent[i];
                if fl != f {
                    continue;
                }
                if !seen.insert(s) {
                    dup += 1;
                    continue;
                }
                match hi {
                    Some(h) if s < h => {
                        re += 1;
                        maxd = maxd.max(h - s);
                    }
                    _ => hi = Some(s),
                }
            }
            let rcv = seen.len() as u64;
            (rcv, next[f] - rcv, dup, re, maxd)
        })
        .collect();
    (per_stream, lost_by_proto)
}

#[test]
fn every_replayed_frame_is_accounted_with_drops_duplicates_and_swaps() {
    if !root() {
        return;
    }
    let imp = Impair {
        drop: 7,
        dup: 5,
        swap: 3,
    };
    let dut = DutSpec::L2fwd {
        work: FwdWork::Swap,
        rx: RxMethod::AfPacket,
        burst: 32,
        impair: imp,
        rx_blocks: netns::RX_BLOCKS,
    };
    for order in [Order::Capture, Order::Mix { seed: 5 }] {
        let t = doubled(order);
        let mut b = Bench::new(&dut, RoleCpus::default()).unwrap();
        let r = b.trial(&spec(t.clone(), 20_000.0, 150)).unwrap();
        assert_eq!(r.sent, 3000, "{r:?}");
        let (per_stream, lost_by_proto) = expected(&t, &imp, 3000);
        for (c, e) in r.per_flow.iter().zip(&per_stream) {
            let got = (
                c.received,
                c.lost,
                c.duplicated,
                c.reordered,
                c.reorder_max_distance,
            );
            assert_eq!(got, *e, "stream {}: {r:?}", c.flow);
        }
        assert_eq!(r.per_flow.len(), per_stream.len());
        assert_eq!(r.lost, 3000 / 7);
        assert!(r.duplicated > 0, "{r:?}");
        if order == Order::Capture {
            assert!(r.reordered > 0, "{r:?}");
        }
        assert_eq!((r.stale, r.out_of_range, r.foreign), (0, 0, 0), "{r:?}");
        assert_eq!(r.latency.n, r.received + r.duplicated, "{r:?}");
        // Per class, the parts add up to the totals, and the frames lost
        // are the ones the forwarder dropped, by protocol.
        for classes in [&r.per_size, &r.per_protocol] {
            let sum = |f: fn(&result::ClassCounts) -> u64| classes.iter().map(f).sum::<u64>();
            assert_eq!(sum(|c| c.sent), r.sent);
            assert_eq!(sum(|c| c.received), r.received);
            assert_eq!(sum(|c| c.lost), r.lost);
        }
        for (p, n) in &lost_by_proto {
            let c = r.per_protocol.iter().find(|c| c.class == *p).unwrap();
            assert_eq!(c.lost, *n, "{p}: {:?}", r.per_protocol);
        }
        let ti = r.traffic.as_ref().unwrap();
        assert_eq!(ti.stamp, result::TRAILER_STAMP);
        assert_eq!(ti.mix.frames, 20);
        let rec = r.record("trial");
        assert_eq!(rec.params["traffic"], "doubled.pcap");
        assert_eq!(rec.metrics["traffic_flows"], 9);
        assert!(rec.metrics["per_protocol"].is_array());
        let ns = b.namespaces();
        drop(b);
        for n in ns {
            assert!(
                !std::path::Path::new(&format!("/run/netns/{n}")).exists(),
                "{n} left"
            );
        }
    }
}

#[test]
fn a_capture_crosses_a_bridge_and_no_device_whole() {
    if !root() {
        return;
    }
    for dut in [DutSpec::None, DutSpec::Bridge] {
        let mut b = Bench::new(&dut, RoleCpus::default()).unwrap();
        let r = b
            .trial(&spec(traffic(Order::Capture), 10_000.0, 100))
            .unwrap();
        assert_eq!(r.sent, 1000, "{r:?}");
        assert_eq!((r.received, r.lost, r.duplicated), (1000, 0, 0), "{r:?}");
        assert_eq!(r.out_of_range, 0);
        // Every size bucket and protocol of the capture came through:
        // the 1518 B frames, the VLAN-tagged, IPv6 and fragments.
        assert_eq!(r.per_size.len(), 5, "{:?}", r.per_size);
        assert!(r.per_size.iter().all(|c| c.lost == 0 && c.received > 0));
        assert!(r
            .per_protocol
            .iter()
            .any(|c| c.class == "ipv4 fragment" && c.received == 100));
        assert!(r
            .per_protocol
            .iter()
            .any(|c| c.class == "icmpv6" && c.received == 100));
    }
}

#[test]
fn a_capture_is_not_offered_through_af_xdp() {
    let t = traffic(Order::Capture);
    let mut s = spec(t, 10_000.0, 100);
    s.rx = RxMethod::AfXdp;
    assert_eq!(s.validate(), Err(SpecError::TrafficXdp));
    s.rx = RxMethod::AfPacket;
    s.flows = 3;
    assert_eq!(s.validate(), Err(SpecError::TrafficFlows(9)));
}

/// One TCP flow's `n` segments as a sender's stack would put them on the
/// wire, everything GRO asks to merge them: consecutive sequence numbers,
/// ACK only, DF with consecutive IP ids, valid IP and TCP checksums.
fn tcp_flow(n: u32) -> Vec<Vec<u8>> {
    use commbench_core::checksum::internet_checksum;
    const PAYLOAD: usize = 100;
    (0..n)
        .map(|i| {
            let tl = 20 + 20 + PAYLOAD;
            let id = 100 + i as u16;
            let mut ip = vec![0x45, 0, (tl >> 8) as u8, tl as u8];
            ip.extend_from_slice(&id.to_be_bytes());
            ip.extend_from_slice(&[0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 1, 2]);
            let c = crate::wire::ipv4_checksum(&ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let mut tcp = vec![0x04, 0xd2, 0, 80];
            tcp.extend_from_slice(&(1_000 + i * PAYLOAD as u32).to_be_bytes());
            tcp.extend_from_slice(&1u32.to_be_bytes());
            tcp.extend_from_slice(&[0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
            tcp.extend(std::iter::repeat_n(i as u8, PAYLOAD));
            let mut pseudo = ip[12..20].to_vec();
            pseudo.extend_from_slice(&[0, 6, 0, (20 + PAYLOAD) as u8]);
            pseudo.extend_from_slice(&tcp);
            let c = internet_checksum(&pseudo);
            tcp[16..18].copy_from_slice(&c.to_be_bytes());
            ip.extend_from_slice(&tcp);
            super::replay::tests::eth(&[], 0x0800, &ip)
        })
        .collect()
}

/// The device's and the sink's receive run in NAPI threads pinned to
/// their CPUs for a replay as for synthetic frames, and GRO there, which
/// those threads need on a veth, merges none of a TCP flow's segments:
/// every replayed frame arrives one for one, and every one went through
/// the device's NAPI poll (veth's own count).
#[test]
fn a_replayed_tcp_flow_arrives_frame_for_frame_through_the_receive_threads() {
    let Some(cpus) = super::tests::root_with_two_cpus("threaded receive") else {
        return;
    };
    let t = Arc::new(
        Traffic::from_bytes("tcp.pcap", pcap_of(&tcp_flow(20), 1), Order::Capture).unwrap(),
    );
    let dut = DutSpec::L2fwd {
        work: FwdWork::Swap,
        rx: RxMethod::AfPacket,
        burst: 32,
        impair: Impair::default(),
        rx_blocks: netns::RX_BLOCKS,
    };
    let mut b = Bench::new(&dut, RoleCpus::for_cpus(&cpus)).unwrap();
    let Some((pid, c)) = b.rx_thread else {
        commbench_core::testing::skip(
            "threaded NAPI",
            format_args!("no receive thread here (ethtool or the kernel's threaded NAPI missing)"),
        );
        return;
    };
    assert_eq!(Some(c), b.cpus.dut);
    assert_eq!(
        commbench_core::placement::affinity_of(pid as i32).cpus(),
        &[c]
    );
    let (fwd_ns, fwd_in) = {
        let t = b.topo.as_ref().unwrap();
        (t.fwd_ns.clone(), t.fwd_in.clone())
    };
    let polled0 = netns::napi_rx_frames(&fwd_ns, &fwd_in).unwrap();
    let r = b.trial(&spec(t, 20_000.0, 100)).unwrap();
    assert_eq!(r.sent, 2000, "{r:?}");
    assert_eq!((r.received, r.lost, r.duplicated), (2000, 0, 0), "{r:?}");
    assert_eq!((r.out_of_range, r.foreign), (0, 0), "{r:?}");
    assert!(
        b.placement().ends_with(&format!(", rx napi thread on {c}")),
        "{}",
        b.placement()
    );
    let polled = netns::napi_rx_frames(&fwd_ns, &fwd_in).unwrap() - polled0;
    assert!(polled >= 2000, "the device's NAPI polled {polled} frames");
    let rec = r.record("trial");
    assert_eq!(rec.metrics["traffic_flows"], 1);
}

/// The mixed capture told by the identity table.
fn table_traffic(order: Order) -> Arc<Traffic> {
    let mut t = Traffic::from_bytes("mixed.pcap", pcap_of(&mixed(), 1), order).unwrap();
    t.set_identity_table();
    Arc::new(t)
}

/// `copies` copies of the mixed capture's frames, each copy's number in
/// a payload byte: every frame distinct, the flows the same.
fn distinct(copies: u8) -> Vec<Vec<u8>> {
    (0..copies)
        .flat_map(|r| {
            mixed().into_iter().map(move |mut f| {
                // Past every header, within the key's first 256 bytes.
                let end = stamp::datagram_end(&f).unwrap_or(f.len());
                f[(end - 1).min(100)] = r;
                f
            })
        })
        .collect()
}

/// With no stamp on the frames, the identity table accounts a known
/// subset dropped, duplicated and swapped by the forwarder as exactly as
/// the trailer does: per stream and per protocol, from the frames' own
/// bytes. The capture's 1,000 frames are distinct and each is offered
/// once, so the counts owe nothing to timing (a loaded host cannot make
/// two copies of one frame leave close together); the matcher's order
/// rules for repeated frames are unit-tested in `identity`.
#[test]
fn the_identity_table_accounts_every_frame_with_drops_duplicates_and_swaps() {
    if !root() {
        return;
    }
    let imp = Impair {
        drop: 7,
        dup: 5,
        swap: 3,
    };
    let dut = DutSpec::L2fwd {
        work: FwdWork::Swap,
        rx: RxMethod::AfPacket,
        burst: 32,
        impair: imp,
        rx_blocks: netns::RX_BLOCKS,
    };
    for order in [Order::Capture, Order::Mix { seed: 5 }] {
        let mut t =
            Traffic::from_bytes("distinct.pcap", pcap_of(&distinct(100), 1), order).unwrap();
        t.set_identity_table();
        let t = Arc::new(t);
        assert_eq!(t.id_index().unwrap().twins, 0);
        let mut b = Bench::new(&dut, RoleCpus::default()).unwrap();
        let r = b.trial(&spec(t.clone(), 5_000.0, 200)).unwrap();
        assert_eq!(r.sent, 1000, "{r:?}");
        let (per_stream, lost_by_proto) = expected_after(&t, &imp, r.probes as usize, 1000);
        for (c, e) in r.per_flow.iter().zip(&per_stream) {
            let got = (
                c.received,
                c.lost,
                c.duplicated,
                c.reordered,
                c.reorder_max_distance,
            );
            assert_eq!(got, *e, "stream {} ({order:?}): {r:?}", c.flow);
        }
        assert!(r.lost > 100 && r.duplicated > 0, "{r:?}");
        if order == Order::Capture {
            assert!(r.reordered > 0, "{r:?}");
        }
        for (p, n) in &lost_by_proto {
            let c = r.per_protocol.iter().find(|c| c.class == *p).unwrap();
            assert_eq!(c.lost, *n, "{p}: {:?}", r.per_protocol);
        }
        assert_eq!((r.stale, r.out_of_range), (0, 0), "{r:?}");
        let ti = r.traffic.as_ref().unwrap();
        assert_eq!(ti.stamp, replay::Stamping::IdentityTable.describe());
        assert_eq!((ti.twins, ti.no_latency), (Some(0), Some(0)));
        let rec = r.record("trial");
        assert_eq!(
            rec.metrics["traffic_stamp"],
            replay::Stamping::IdentityTable.describe()
        );
    }
}

/// The kernel's router trims each frame to its IP length: the trailer
/// never comes back (the probe says what to do), and the identity table
/// accounts every frame it routes, by protocol; what a router does not
/// route (VLAN-tagged frames on an untagged link, ARP) is lost there.
#[test]
fn a_router_trims_the_trailer_and_the_identity_table_accounts_what_it_routes() {
    if !root() {
        return;
    }
    let mut b = Bench::new(&DutSpec::Router, RoleCpus::default()).unwrap();
    let r = b.trial(&spec(table_traffic(Order::Capture), 5_000.0, 200));
    let r = r.unwrap();
    assert_eq!(r.sent, 1000, "{r:?}");
    // Of the 10 frames of a loop, 7 are routable: untagged unicast IPv4
    // and IPv6 (fragments too).
    assert_eq!((r.received, r.lost, r.duplicated), (700, 300, 0), "{r:?}");
    let lost = |p: &str| r.per_protocol.iter().find(|c| c.class == p).map(|c| c.lost);
    assert_eq!(lost("arp"), Some(100), "{:?}", r.per_protocol);
    assert_eq!(lost("icmp"), Some(100), "QinQ-tagged: {:?}", r.per_protocol);
    assert_eq!(
        lost("udp"),
        Some(100),
        "one VLAN-tagged: {:?}",
        r.per_protocol
    );
    for p in ["tcp", "icmpv6", "ipv4 fragment"] {
        assert_eq!(lost(p), Some(0), "{p}: {:?}", r.per_protocol);
    }
    let trailer =
        Arc::new(Traffic::from_bytes("mixed.pcap", pcap_of(&mixed(), 1), Order::Capture).unwrap());
    let e = b
        .trial(&spec(trailer, 5_000.0, 100))
        .unwrap_err()
        .to_string();
    assert!(e.contains("--stamp table"), "{e}");
}

/// With no trailer, GRO would merge a replayed TCP flow's segments into
/// frames the capture does not hold: for the identity table the tester's
/// receive threads run with GRO off (an XDP pass program keeps them), so
/// through the router every segment arrives, is told and polled by the
/// device's NAPI thread, which stays pinned.
#[test]
fn the_identity_table_gets_a_tcp_flow_frame_for_frame_through_the_receive_threads() {
    let Some(cpus) = super::tests::root_with_two_cpus("threaded receive") else {
        return;
    };
    // 2,000 segments offered once each: no two frames alike, so nothing
    // rests on when they leave.
    let mut t =
        Traffic::from_bytes("tcp.pcap", pcap_of(&tcp_flow(2000), 1), Order::Capture).unwrap();
    t.set_identity_table();
    let mut b = Bench::new(&DutSpec::Router, RoleCpus::for_cpus(&cpus)).unwrap();
    let Some((pid, c)) = b.rx_thread else {
        commbench_core::testing::skip(
            "threaded NAPI",
            format_args!("no receive thread here (ethtool or the kernel's threaded NAPI missing)"),
        );
        return;
    };
    let (fwd_ns, fwd_in) = {
        let t = b.topo.as_ref().unwrap();
        (t.fwd_ns.clone(), t.fwd_in.clone())
    };
    let polled0 = netns::napi_rx_frames(&fwd_ns, &fwd_in).unwrap();
    let r = b.trial(&spec(Arc::new(t), 5_000.0, 400)).unwrap();
    assert_eq!(r.sent, 2000, "{r:?}");
    // GRO merged 1,173 of the 2,000 into frames the capture does not
    // hold; a host busy with other work may still make the router lose a
    // few of them on its own.
    assert_eq!((r.received + r.lost, r.duplicated), (2000, 0), "{r:?}");
    assert!(r.lost <= 100, "{r:?}");
    // The router's own chatter (IPv6 neighbour and multicast listener
    // messages as its links come up) is all the sink may see besides.
    assert!(r.foreign < 10, "{r:?}");
    assert_eq!(b.rx_thread, Some((pid, c)), "the receive thread stayed");
    assert_eq!(b.no_gro.len(), 2, "GRO off at the device and the sink");
    let polled = netns::napi_rx_frames(&fwd_ns, &fwd_in).unwrap() - polled0;
    assert!(polled >= 2000, "the device's NAPI polled {polled} frames");
}
