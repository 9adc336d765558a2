//! Golden bytes (layouts from the OpenFlow 1.0.0 specification), round
//! trips, and malformed-length cases for the OpenFlow 1.0 codec.

use super::*;
use crate::wire::frame::probe_frame;
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn roundtrip(golden: &[u8], repr: Repr) {
    assert_eq!(repr.to_bytes(), golden, "encode {:?}", repr.msg.msg_type());
    assert_eq!(Repr::parse(golden).unwrap(), repr, "decode");
}

#[test]
fn golden_hello() {
    roundtrip(
        &hex("01 00 0008 00000001"),
        Repr::new(1, Message::Hello(vec![])),
    );
}

#[test]
fn golden_echo() {
    roundtrip(
        &hex("01 02 000c 12345678 61626364"),
        Repr::new(0x12345678, Message::EchoRequest(b"abcd".to_vec())),
    );
    roundtrip(
        &hex("01 03 0008 00000009"),
        Repr::new(9, Message::EchoReply(vec![])),
    );
}

#[test]
fn golden_error() {
    roundtrip(
        &hex("01 01 0010 00000005 0001 0003 01040008"),
        Repr::new(
            5,
            Message::Error {
                err_type: OFPET_BAD_REQUEST,
                code: OFPBRC_BAD_VENDOR,
                data: hex("01040008"),
            },
        ),
    );
}

#[test]
fn golden_vendor() {
    roundtrip(
        &hex("01 04 0010 00000007 00002320 deadbeef"),
        Repr::new(
            7,
            Message::Vendor {
                vendor: 0x2320,
                data: hex("deadbeef"),
            },
        ),
    );
}

#[test]
fn golden_features() {
    roundtrip(
        &hex("01 05 0008 00000002"),
        Repr::new(2, Message::FeaturesRequest),
    );
    let port = PhyPort {
        port_no: 1,
        hw_addr: [0, 1, 2, 3, 4, 5],
        name: "eth1".into(),
        config: 0,
        state: 0,
        curr: 0x2c0,
        advertised: 0,
        supported: 0,
        peer: 0,
    };
    let golden = hex(concat!(
        "01 06 0050 00000002",
        "0000000000000001 00000100 02 000000 00000000 000007ff",
        "0001 000102030405 65746831000000000000000000000000",
        "00000000 00000000 000002c0 00000000 00000000 00000000"
    ));
    assert_eq!(golden.len(), 32 + 48);
    roundtrip(
        &golden,
        Repr::new(
            2,
            Message::FeaturesReply(SwitchFeatures {
                datapath_id: 1,
                n_buffers: 256,
                n_tables: 2,
                capabilities: 0,
                actions: 0x7ff,
                ports: vec![port],
            }),
        ),
    );
}

#[test]
fn golden_config() {
    roundtrip(
        &hex("01 07 0008 00000003"),
        Repr::new(3, Message::GetConfigRequest),
    );
    let c = SwitchConfig {
        flags: 0,
        miss_send_len: 128,
    };
    roundtrip(
        &hex("01 08 000c 00000003 0000 0080"),
        Repr::new(3, Message::GetConfigReply(c)),
    );
    roundtrip(
        &hex("01 09 000c 00000004 0000 0080"),
        Repr::new(4, Message::SetConfig(c)),
    );
}

#[test]
fn golden_packet_in_probe_is_82_bytes() {
    let frame = probe_frame(1, 0);
    let mut golden = hex("01 0a 0052 00000001 00000001 0040 0001 00 00");
    golden.extend_from_slice(&frame);
    assert_eq!(golden.len(), 82);
    roundtrip(
        &golden,
        Repr::new(
            1,
            Message::PacketIn(PacketIn {
                buffer_id: 1,
                total_len: 64,
                in_port: 1,
                reason: OFPR_NO_MATCH,
                data: frame.to_vec(),
            }),
        ),
    );
    let v = PacketInView::new_checked(&golden[..]).unwrap();
    assert_eq!((v.buffer_id(), v.in_port(), v.data().len()), (1, 1, 64));
}

fn sample_flow_mod() -> FlowMod {
    FlowMod {
        match_: Match {
            wildcards: 0,
            in_port: 1,
            dl_src: [0, 0, 0, 0, 0, 1],
            dl_dst: [0x80, 0, 0, 0, 0, 1],
            dl_vlan: 0xffff,
            dl_vlan_pcp: 0,
            dl_type: 0x0800,
            nw_tos: 0,
            nw_proto: 0xff,
            nw_src: 0xc0a80028,
            nw_dst: 0xc0a80128,
            tp_src: 0,
            tp_dst: 0,
        },
        cookie: 0,
        command: OFPFC_ADD,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 0x8000,
        buffer_id: 7,
        out_port: OFPP_NONE,
        flags: 0,
        actions: vec![Action::Output {
            port: 2,
            max_len: 0,
        }],
    }
}

const FLOW_MOD_GOLDEN: &str = concat!(
    "01 0e 0050 0000000a",
    // ofp_match: wildcards, in_port, dl_src, dl_dst, dl_vlan, pcp, pad, dl_type,
    // tos, proto, pad2, nw_src, nw_dst, tp_src, tp_dst
    "00000000 0001 000000000001 800000000001 ffff 00 00 0800 00 ff 0000",
    "c0a80028 c0a80128 0000 0000",
    // cookie, command, idle, hard, priority, buffer_id, out_port, flags
    "0000000000000000 0000 0000 0000 8000 00000007 ffff 0000",
    // ofp_action_output: type 0, len 8, port 2, max_len 0
    "0000 0008 0002 0000"
);

#[test]
fn golden_flow_mod() {
    let g = hex(FLOW_MOD_GOLDEN);
    assert_eq!(g.len(), 80);
    roundtrip(&g, Repr::new(10, Message::FlowMod(sample_flow_mod())));
    let v = FlowModView::new_checked(&g[..]).unwrap();
    assert_eq!(v.command(), OFPFC_ADD);
    assert_eq!(v.buffer_id(), 7);
    assert_eq!(v.actions().len(), 8);
}

#[test]
fn template_equals_general_encoder() {
    let frame = probe_frame(1, 0x01000000);
    let pi = Repr::new(
        10,
        Message::PacketIn(PacketIn {
            buffer_id: 7,
            total_len: 64,
            in_port: 1,
            reason: 0,
            data: frame.to_vec(),
        }),
    )
    .to_bytes();
    let view = PacketInView::new_checked(&pi[..]).unwrap();
    let t = FlowModTemplate::new(0, 0, 0x8000);
    let mut out = [0u8; FLOW_MOD_TEMPLATE_LEN];
    t.write(&mut out, 10, &view);
    let mut fm = sample_flow_mod();
    fm.match_ = Match::exact(1, &FlowKey::extract(&frame).unwrap());
    let general = Repr::new(10, Message::FlowMod(fm)).to_bytes();
    assert_eq!(&out[..], &general[..]);
}

#[test]
fn golden_packet_out() {
    roundtrip(
        &hex("01 0d 0018 00000003 ffffffff 0001 0008 0000 0008 0002 0000"),
        Repr::new(
            3,
            Message::PacketOut(PacketOut {
                buffer_id: NO_BUFFER_ID,
                in_port: 1,
                actions: vec![Action::Output {
                    port: 2,
                    max_len: 0,
                }],
                data: vec![],
            }),
        ),
    );
    roundtrip(
        &hex("01 0d 0014 00000003 00000005 0001 0000 aabbccdd"),
        Repr::new(
            3,
            Message::PacketOut(PacketOut {
                buffer_id: 5,
                in_port: 1,
                actions: vec![],
                data: hex("aabbccdd"),
            }),
        ),
    );
}

const NO_BUFFER_ID: u32 = crate::wire::NO_BUFFER;

#[test]
fn golden_barrier() {
    roundtrip(
        &hex("01 12 0008 00000004"),
        Repr::new(4, Message::BarrierRequest),
    );
    roundtrip(
        &hex("01 13 0008 00000004"),
        Repr::new(4, Message::BarrierReply),
    );
}

#[test]
fn golden_stats_desc() {
    roundtrip(
        &hex("01 10 000c 00000006 0000 0000"),
        Repr::new(
            6,
            Message::StatsRequest {
                flags: 0,
                stats_type: OFPST_DESC,
                body: vec![],
            },
        ),
    );
    let d = DescStats {
        mfr_desc: "commbench".into(),
        hw_desc: "emulator".into(),
        sw_desc: "0.1".into(),
        serial_num: "1".into(),
        dp_desc: "switch 1".into(),
    };
    let r = Repr::new(
        6,
        Message::StatsReply {
            flags: 0,
            body: StatsBody::Desc(d),
        },
    );
    let b = r.to_bytes();
    assert_eq!(b.len(), 12 + 1056);
    assert_eq!(&b[..12], &hex("01 11 042c 00000006 0000 0000")[..]);
    assert_eq!(&b[12..21], b"commbench");
    assert_eq!(&b[12 + 256..12 + 264], b"emulator");
    assert_eq!(Repr::parse(&b).unwrap(), r);
}

#[test]
fn malformed_lengths_are_errors() {
    // header length disagrees with buffer
    assert!(Repr::parse(&hex("01 00 0009 00000001")).is_err());
    assert!(Repr::parse(&hex("01 00 0007 00000001")).is_err());
    // fixed-size messages with extra bytes
    assert!(Repr::parse(&hex("01 05 0009 00000001 00")).is_err());
    assert!(Repr::parse(&hex("01 12 000c 00000001 00000000")).is_err());
    assert!(Repr::parse(&hex("01 09 000a 00000001 0000")).is_err());
    // short bodies
    assert!(Repr::parse(&hex("01 01 000a 00000001 0000")).is_err());
    assert!(Repr::parse(&hex("01 0a 0010 00000001 00000000 0000")).is_err());
    assert!(Repr::parse(&hex("01 0e 0010 00000001 00000000 00000000")).is_err());
    // features reply: ports not a multiple of 48
    let mut f = hex("01 06 0021 00000001 0000000000000001 00000100 02 000000 00000000 000007ff");
    f.push(0);
    assert!(Repr::parse(&f).is_err());
    // desc stats reply body not 1056 bytes
    assert!(Repr::parse(&hex("01 11 0010 00000001 0000 0000 00000000")).is_err());
}

#[test]
fn malformed_actions_are_errors() {
    let mut g = hex(FLOW_MOD_GOLDEN);
    // action length 0 would loop forever in a naive parser
    g[74..76].copy_from_slice(&0u16.to_be_bytes());
    assert!(Repr::parse(&g).is_err());
    // action length beyond the message
    g[74..76].copy_from_slice(&16u16.to_be_bytes());
    assert!(Repr::parse(&g).is_err());
    // not a multiple of 8
    g[74..76].copy_from_slice(&6u16.to_be_bytes());
    assert!(Repr::parse(&g).is_err());
    // packet_out actions_len beyond the message
    let po = hex("01 0d 0018 00000003 ffffffff 0001 0010 0000 0008 0002 0000");
    assert!(PacketOutView::new_checked(&po[..]).is_err());
    assert!(Repr::parse(&po).is_err());
}

#[test]
fn wrong_version_is_reported() {
    assert_eq!(
        Repr::parse(&hex("04 00 0008 00000001")),
        Err(WireError::BadVersion(4))
    );
}

proptest! {
    #[test]
    fn parse_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..300), ty in 0u8..22) {
        if bytes.len() >= 8 {
            bytes[0] = OFP10_VERSION;
            bytes[1] = ty;
            let n = bytes.len() as u16;
            bytes[2..4].copy_from_slice(&n.to_be_bytes());
        }
        let _ = Repr::parse(&bytes);
        let _ = PacketInView::new_checked(&bytes[..]).map(|v| (v.data().len(), v.buffer_id()));
        let _ = PacketOutView::new_checked(&bytes[..]).map(|v| (v.actions().len(), v.data().len()));
        let _ = FlowModView::new_checked(&bytes[..]).map(|v| v.actions().len());
    }

    #[test]
    fn reencode_is_identity(mut bytes in proptest::collection::vec(any::<u8>(), 8..200), ty in 0u8..22) {
        bytes[0] = OFP10_VERSION;
        bytes[1] = ty;
        let n = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&n.to_be_bytes());
        if let Ok(r) = Repr::parse(&bytes) {
            // Names are decoded lossily (UTF-8), so compare from the
            // first re-encoding on: encoding must be a fixed point.
            let r2 = Repr::parse(&r.to_bytes()).unwrap();
            prop_assert_eq!(Repr::parse(&r2.to_bytes()).unwrap(), r2);
        }
    }

    #[test]
    fn packet_in_roundtrip(xid: u32, buffer_id: u32, in_port: u16, reason in 0u8..3,
                           data in proptest::collection::vec(any::<u8>(), 0..128)) {
        let r = Repr::new(xid, Message::PacketIn(PacketIn {
            buffer_id, total_len: data.len() as u16, in_port, reason, data }));
        prop_assert_eq!(Repr::parse(&r.to_bytes()).unwrap(), r);
    }
}

/// A frame for the template-vs-encoder check: random bytes with the
/// ethertype, VLAN tag, IPv4 header length, fragment offset and protocol
/// steered to the cases the exact match distinguishes.
fn steered_frame(
    mut f: Vec<u8>,
    ty: usize,
    inner: usize,
    proto: usize,
    unfragmented: bool,
) -> Vec<u8> {
    const TYPES: [u16; 4] = [0x0800, 0x0806, 0x8100, 0x88cc];
    let mut off = 12;
    if f.len() >= off + 2 {
        f[off..off + 2].copy_from_slice(&TYPES[ty].to_be_bytes());
    }
    if TYPES[ty] == 0x8100 && f.len() >= 18 {
        f[16..18].copy_from_slice(&TYPES[inner % 2].to_be_bytes());
        off = 16;
    }
    let l3 = off + 2;
    if f.len() >= l3 + 20 && be16(&f, off) == 0x0800 {
        f[l3] = 0x40 | (5 + (f[l3] & 1)); // IHL 5 or 6
        f[l3 + 9] = [1u8, 6, 17, 255, f[l3 + 9]][proto];
        if unfragmented {
            f[l3 + 6] &= 0xe0;
            f[l3 + 7] = 0;
        }
    }
    f
}

proptest! {
    /// The template path (`append`, the controller's hot loop) writes
    /// exactly the flow_mod the general encoder builds for the same
    /// packet_in: xid, exact match, buffer_id and output in_port+1.
    #[test]
    fn template_append_equals_general_encoder(
        frame in proptest::collection::vec(any::<u8>(), 0..90),
        ty in 0usize..4,
        inner in 0usize..2,
        proto in 0usize..5,
        unfragmented in any::<bool>(),
        xid in any::<u32>(),
        buffer_id in any::<u32>(),
        in_port in any::<u16>(),
        before in proptest::collection::vec(any::<u8>(), 0..100),
    ) {
        let frame = steered_frame(frame, ty, inner, proto, unfragmented);
        let pi = Repr::new(
            xid,
            Message::PacketIn(PacketIn {
                buffer_id,
                total_len: frame.len() as u16,
                in_port,
                reason: 0,
                data: frame.clone(),
            }),
        )
        .to_bytes();
        let view = PacketInView::new_checked(&pi[..]).unwrap();
        let mut out = before.clone();
        FlowModTemplate::new(0, 0, 0x8000).append(&mut out, view.xid(), &view);
        let mut fm = sample_flow_mod();
        fm.match_ = Match::exact(in_port, &FlowKey::extract(&frame).unwrap_or_default());
        fm.buffer_id = buffer_id;
        fm.actions = vec![Action::Output { port: in_port.wrapping_add(1), max_len: 0 }];
        let general = Repr::new(xid, Message::FlowMod(fm)).to_bytes();
        prop_assert_eq!(&out[..before.len()], &before[..]);
        prop_assert_eq!(&out[before.len()..], &general[..]);
    }
}
