//! Golden bytes (layouts from the OpenFlow 1.3 specification), version
//! negotiation, round trips and malformed lengths for the 1.3 codec.

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
    assert_eq!(
        repr.to_bytes(),
        golden,
        "encode type {}",
        repr.msg.msg_type()
    );
    assert_eq!(Repr::parse(golden).unwrap(), repr, "decode");
}

#[test]
fn golden_hello_bitmap() {
    roundtrip(
        &hex("04 00 0010 00000001 0001 0008 00000012"),
        Repr::new(
            1,
            Message::Hello(vec![HelloElement::VersionBitmap(vec![0x12])]),
        ),
    );
    roundtrip(
        &hex("04 00 0008 00000001"),
        Repr::new(1, Message::Hello(vec![])),
    );
}

#[test]
fn negotiation() {
    let h13 = hex("04 00 0010 00000001 0001 0008 00000012");
    assert_eq!(negotiate(&h13, &[1, 4]), Some(4));
    assert_eq!(negotiate(&h13, &[1]), Some(1));
    let only13 = hex("04 00 0010 00000001 0001 0008 00000010");
    assert_eq!(negotiate(&only13, &[1]), None);
    let h10 = hex("01 00 0008 00000001");
    assert_eq!(negotiate(&h10, &[1, 4]), Some(1));
    assert_eq!(negotiate(&h10, &[4]), None);
    let h13_plain = hex("04 00 0008 00000001");
    assert_eq!(negotiate(&h13_plain, &[1, 4]), Some(4));
    assert_eq!(negotiate(&hex("02 00 0008 00000001"), &[1, 4]), None);
    assert_eq!(
        negotiate(&hex("04 00 0009 00000001"), &[1, 4]),
        None,
        "bad length"
    );
}

#[test]
fn golden_features() {
    roundtrip(
        &hex("04 05 0008 00000002"),
        Repr::new(2, Message::FeaturesRequest),
    );
    roundtrip(
        &hex("04 06 0020 00000002 0000000000000001 00000100 fe 00 0000 0000004f 00000000"),
        Repr::new(
            2,
            Message::FeaturesReply(SwitchFeatures {
                datapath_id: 1,
                n_buffers: 256,
                n_tables: 254,
                auxiliary_id: 0,
                capabilities: 0x4f,
            }),
        ),
    );
}

#[test]
fn golden_echo_barrier_config() {
    roundtrip(
        &hex("04 02 000a 00000003 abcd"),
        Repr::new(3, Message::EchoRequest(hex("abcd"))),
    );
    roundtrip(
        &hex("04 03 0008 00000003"),
        Repr::new(3, Message::EchoReply(vec![])),
    );
    roundtrip(
        &hex("04 14 0008 00000004"),
        Repr::new(4, Message::BarrierRequest),
    );
    roundtrip(
        &hex("04 15 0008 00000004"),
        Repr::new(4, Message::BarrierReply),
    );
    roundtrip(
        &hex("04 09 000c 00000005 0000 ffff"),
        Repr::new(
            5,
            Message::SetConfig {
                flags: 0,
                miss_send_len: 0xffff,
            },
        ),
    );
}

fn in_port_match(p: u32) -> Match {
    Match {
        fields: vec![Oxm::basic(OXM_IN_PORT, &p.to_be_bytes())],
    }
}

#[test]
fn golden_packet_in() {
    let frame = probe_frame(1, 0);
    let mut g = hex(concat!(
        "04 0a 006a 00000001 00000001 0040 00 00 0000000000000000",
        "0001 000c 80000004 00000001 00000000",
        "0000"
    ));
    g.extend_from_slice(&frame);
    assert_eq!(g.len(), 106);
    roundtrip(
        &g,
        Repr::new(
            1,
            Message::PacketIn(PacketIn {
                buffer_id: 1,
                total_len: 64,
                reason: 0,
                table_id: 0,
                cookie: 0,
                match_: in_port_match(1),
                data: frame.to_vec(),
            }),
        ),
    );
    let v = PacketInView::new_checked(&g[..]).unwrap();
    assert_eq!(v.in_port(), Some(1));
    assert_eq!(v.data(), &frame[..]);
}

#[test]
fn golden_flow_mod() {
    let g = hex(concat!(
        "04 0e 0058 00000007",
        "0000000000000000 0000000000000000 00 00 0000 0000 8000 00000009",
        "ffffffff ffffffff 0000 0000",
        "0001 000c 80000004 00000001 00000000",
        "0004 0018 00000000 0000 0010 00000002 0000 000000000000"
    ));
    roundtrip(
        &g,
        Repr::new(
            7,
            Message::FlowMod(FlowMod {
                cookie: 0,
                cookie_mask: 0,
                table_id: 0,
                command: OFPFC_ADD,
                idle_timeout: 0,
                hard_timeout: 0,
                priority: 0x8000,
                buffer_id: 9,
                out_port: OFPP_ANY,
                out_group: OFPG_ANY,
                flags: 0,
                match_: in_port_match(1),
                instructions: vec![Instruction::ApplyActions(vec![Action::Output {
                    port: 2,
                    max_len: 0,
                }])],
            }),
        ),
    );
}

#[test]
fn fast_flow_mod_equals_general_encoder() {
    for frame in [
        probe_frame(3, 77).to_vec(),
        crate::wire::frame::gratuitous_arp(3).to_vec(),
    ] {
        let k = FlowKey::extract(&frame).unwrap();
        let mut fast = Vec::new();
        write_exact_flow_mod(&mut fast, 42, 1, &k, 5);
        let general = Repr::new(42, Message::FlowMod(exact_flow_mod(1, &k, 5))).to_bytes();
        assert_eq!(fast, general);
        assert!(Repr::parse(&fast).is_ok());
    }
}

#[test]
fn golden_packet_out() {
    roundtrip(
        &hex(concat!(
            "04 0d 0028 00000003 ffffffff 00000001 0010 000000000000",
            "0000 0010 00000002 ffff 000000000000"
        )),
        Repr::new(
            3,
            Message::PacketOut(PacketOut {
                buffer_id: crate::wire::NO_BUFFER,
                in_port: 1,
                actions: vec![Action::Output {
                    port: 2,
                    max_len: 0xffff,
                }],
                data: vec![],
            }),
        ),
    );
}

#[test]
fn golden_multipart() {
    roundtrip(
        &hex("04 12 0010 00000008 0000 0000 00000000"),
        Repr::new(
            8,
            Message::MultipartRequest {
                mp_type: OFPMP_DESC,
                flags: 0,
                body: vec![],
            },
        ),
    );
    roundtrip(
        &hex("04 12 0010 00000009 000d 0000 00000000"),
        Repr::new(
            9,
            Message::MultipartRequest {
                mp_type: OFPMP_PORT_DESC,
                flags: 0,
                body: vec![],
            },
        ),
    );
    let r = Repr::new(
        8,
        Message::MultipartReply {
            flags: 0,
            body: MultipartBody::Desc(DescStats {
                mfr_desc: "m".into(),
                ..Default::default()
            }),
        },
    );
    let b = r.to_bytes();
    assert_eq!(b.len(), 16 + 1056);
    assert_eq!(&b[..16], &hex("04 13 0430 00000008 0000 0000 00000000")[..]);
    assert_eq!(Repr::parse(&b).unwrap(), r);
    let ports = Repr::new(
        9,
        Message::MultipartReply {
            flags: 0,
            body: MultipartBody::PortDesc(vec![Port {
                port_no: 1,
                name: "p1".into(),
                ..Default::default()
            }]),
        },
    );
    let b = ports.to_bytes();
    assert_eq!(b.len(), 16 + 64);
    assert_eq!(Repr::parse(&b).unwrap(), ports);
}

#[test]
fn malformed_lengths_are_errors() {
    // match length beyond the message
    assert!(Repr::parse(&hex(
        "04 0a 0020 00000001 00000001 0040 00 00 0000000000000000 0001 0040 00000000"
    ))
    .is_err());
    // OXM payload length beyond the match
    assert!(Repr::parse(&hex(
        "04 0a 0022 00000001 00000001 0040 00 00 0000000000000000 0001 0008 800000ff 0000"
    ))
    .is_err());
    // in_port OXM with wrong payload size
    assert!(Repr::parse(&hex(
        "04 0a 0022 00000001 00000001 0040 00 00 0000000000000000 0001 0006 80000002 0000"
    ))
    .is_err());
    // instruction length 0
    let mut fm = hex(concat!(
        "04 0e 0040 00000007",
        "0000000000000000 0000000000000000 00 00 0000 0000 8000 00000009",
        "ffffffff ffffffff 0000 0000",
        "0001 0004 00000000",
        "0004 0000 00000000"
    ));
    assert!(Repr::parse(&fm).is_err());
    fm[58..60].copy_from_slice(&0x10u16.to_be_bytes());
    assert!(Repr::parse(&fm).is_err());
    // hello element length below its header
    assert!(Repr::parse(&hex("04 00 0010 00000001 0001 0002 00000012")).is_err());
    // features reply must be exactly 32 bytes
    assert!(Repr::parse(&hex("04 06 0010 00000001 0000000000000001")).is_err());
    // packet_out actions_len beyond the message
    assert!(Repr::parse(&hex(
        "04 0d 0018 00000003 ffffffff 00000001 0010 000000000000"
    ))
    .is_err());
}

proptest! {
    #[test]
    fn parse_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..300), ty in 0u8..30) {
        if bytes.len() >= 8 {
            bytes[0] = OFP13_VERSION;
            bytes[1] = ty;
            let n = bytes.len() as u16;
            bytes[2..4].copy_from_slice(&n.to_be_bytes());
        }
        let _ = Repr::parse(&bytes);
        let _ = negotiate(&bytes, &[1, 4]);
        if let Ok(v) = PacketInView::new_checked(&bytes[..]) {
            let _ = (v.in_port(), v.data().len());
        }
    }

    #[test]
    fn reencode_is_identity(mut bytes in proptest::collection::vec(any::<u8>(), 8..200), ty in 0u8..30) {
        bytes[0] = OFP13_VERSION;
        bytes[1] = ty;
        let n = bytes.len() as u16;
        bytes[2..4].copy_from_slice(&n.to_be_bytes());
        if let Ok(r) = Repr::parse(&bytes) {
            let r2 = Repr::parse(&r.to_bytes()).unwrap();
            prop_assert_eq!(Repr::parse(&r2.to_bytes()).unwrap(), r2);
        }
    }
}
