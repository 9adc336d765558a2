//! Cross-check against a real peer: every field `extract` prints is compared
//! with `tshark -T fields` on generated captures (plain, nanosecond, snaplen
//! 128, and a multi-interface pcapng with every supported link type) and on
//! the real captures shipped in the pcap-parser crate's sources. tshark's
//! semantics are normalised as SPEC Appendix B says: defragmentation off,
//! the final IPv6 protocol taken from the extension-header chain, the inner
//! EtherType from `vlan.etype`, first occurrence elsewhere.
//!
//! Without tshark the test is skipped, except under CI (CI=true), where
//! .ci/run installs it and a missing tshark is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use commbench_pcap::extract::{extract, ExtractConfig};
use commbench_pcap::format::{Field, OutputFormat};
use commbench_pcap::gen::{generate, GenConfig, Generator};
use commbench_pcap::writer::{PcapBuilder, PcapngBuilder};

const TSHARK_FIELDS: &[&str] = &[
    "frame.number",
    "frame.time_epoch",
    "frame.cap_len",
    "frame.len",
    "eth.src",
    "eth.dst",
    "eth.type",
    "vlan.id",
    "vlan.etype",
    "ip.src",
    "ip.dst",
    "ip.proto",
    "ip.ttl",
    "ip.len",
    "ip.flags.mf",
    "ip.frag_offset",
    "ipv6.src",
    "ipv6.dst",
    "ipv6.nxt",
    "ipv6.hlim",
    "ipv6.plen",
    "ipv6.hopopts.nxt",
    "ipv6.routing.nxt",
    "ipv6.dstopts.nxt",
    "ipv6.fraghdr.nxt",
    "tcp.srcport",
    "tcp.dstport",
    "udp.srcport",
    "udp.dstport",
    "tcp.flags",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "tcp.window_size_value",
    "icmp.type",
    "icmp.code",
    "icmpv6.type",
    "icmpv6.code",
    "arp.opcode",
    "sll.src.eth",
    "sll.etype",
    "frame.protocols",
    "frame.interface_id",
    "ieee8021ad.id",
];

fn tshark_available() -> bool {
    Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A temp dir removed on drop, also when the test fails.
fn tmpdir(_tag: &str) -> commbench_core::artifact::TempDir {
    commbench_core::artifact::TempDir::new("pcap").unwrap()
}

/// tshark rows: one map per frame, field -> list of occurrences.
fn tshark_rows(path: &Path) -> Vec<Vec<Vec<String>>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(path)
        .args([
            "-n",
            "-o",
            "ip.defragment:FALSE",
            "-o",
            "ipv6.defragment:FALSE",
        ])
        .args([
            "-T",
            "fields",
            "-E",
            "separator=/t",
            "-E",
            "occurrence=a",
            "-E",
            "aggregator=;",
        ]);
    for f in TSHARK_FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            l.split('\t')
                .map(|c| {
                    if c.is_empty() {
                        Vec::new()
                    } else {
                        c.split(';').map(str::to_string).collect()
                    }
                })
                .collect()
        })
        .collect()
}

fn ours(path: &Path) -> Vec<Vec<String>> {
    let mut fields = vec![Field::Number];
    fields.extend(Field::defaults());
    let cfg = ExtractConfig {
        inputs: vec![path.display().to_string()],
        fields,
        format: OutputFormat::Csv,
        threads: 2,
        strict: false,
        header: false,
        mmap: false,
    };
    let mut out = Vec::new();
    let rep = extract(&cfg, &mut out, &mut |_| {}).unwrap();
    assert!(rep.failed_files().is_empty(), "{:?}", rep.files);
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn hex_or_dec(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

const EXT: [u64; 6] = [0, 43, 44, 60, 51, 135];

/// What tshark says, normalised to our columns (None = absent).
fn expected(t: &[Vec<String>]) -> Vec<Option<String>> {
    let col = |name: &str| -> &[String] {
        let i = TSHARK_FIELDS.iter().position(|f| *f == name).unwrap();
        t.get(i).map(|v| v.as_slice()).unwrap_or(&[])
    };
    let first = |name: &str| col(name).first().cloned();
    let protocols = first("frame.protocols").unwrap_or_default();
    let link = protocols.split(':').next().unwrap_or("").to_string();
    let num = |name: &str| {
        first(name)
            .and_then(|v| hex_or_dec(&v))
            .map(|v| v.to_string())
    };
    let v4 = first("ip.src").is_some();
    let v6 = !v4 && first("ipv6.src").is_some();
    let ethertype = col("vlan.etype")
        .last()
        .cloned()
        .or_else(|| first("eth.type"))
        .or_else(|| first("sll.etype"))
        .and_then(|v| hex_or_dec(&v))
        .map(|v| format!("0x{v:04x}"));
    let proto = if v4 {
        num("ip.proto")
    } else if v6 {
        let mut all = Vec::new();
        for c in [
            "ipv6.nxt",
            "ipv6.hopopts.nxt",
            "ipv6.routing.nxt",
            "ipv6.dstopts.nxt",
            "ipv6.fraghdr.nxt",
        ] {
            all.extend(col(c).iter().filter_map(|v| hex_or_dec(v)));
        }
        all.iter().find(|v| !EXT.contains(v)).map(|v| v.to_string())
    } else {
        None
    };
    let frag = if v4 {
        let mf = first("ip.flags.mf").is_some_and(|v| v == "1" || v == "True");
        let off = num("ip.frag_offset").is_some_and(|v| v != "0");
        Some(if mf || off { "1" } else { "0" }.to_string())
    } else if v6 {
        Some(
            if col("ipv6.fraghdr.nxt").is_empty() {
                "0"
            } else {
                "1"
            }
            .to_string(),
        )
    } else {
        None
    };
    let is_icmp = matches!(proto.as_deref(), Some("1") | Some("58"));
    let port = |tcp: &str, udp: &str| {
        if is_icmp {
            None
        } else {
            num(tcp).or_else(|| num(udp))
        }
    };
    let (ip_src, ip_dst, ttl, ip_len) = if v4 {
        (
            first("ip.src"),
            first("ip.dst"),
            num("ip.ttl"),
            num("ip.len"),
        )
    } else if v6 {
        (
            first("ipv6.src"),
            first("ipv6.dst"),
            num("ipv6.hlim"),
            num("ipv6.plen"),
        )
    } else {
        (None, None, None, None)
    };
    // 802.1ad S-tags are dissected as ieee8021ad, C-tags as vlan.
    let (vlan_outer, vlan_inner) = match first("ieee8021ad.id") {
        Some(s) => (Some(s), col("vlan.id").first().cloned()),
        None => (
            col("vlan.id").first().cloned(),
            col("vlan.id").get(1).cloned(),
        ),
    };
    let tcp_flags = num("tcp.flags").map(|v| format!("0x{:03x}", v.parse::<u64>().unwrap()));
    vec![
        num("frame.number"),
        first("frame.time_epoch"),
        num("frame.cap_len"),
        num("frame.len"),
        match link.as_str() {
            "eth" => first("eth.src"),
            "sll" => first("sll.src.eth"),
            _ => None,
        },
        if link == "eth" {
            first("eth.dst")
        } else {
            None
        },
        if link == "eth" || link == "sll" {
            ethertype
        } else {
            None
        },
        vlan_outer,
        vlan_inner,
        if v4 {
            Some("4".into())
        } else if v6 {
            Some("6".into())
        } else {
            None
        },
        ip_src,
        ip_dst,
        proto.clone(),
        ttl,
        ip_len,
        frag,
        port("tcp.srcport", "udp.srcport"),
        port("tcp.dstport", "udp.dstport"),
        tcp_flags,
        num("tcp.seq_raw"),
        num("tcp.ack_raw"),
        num("tcp.window_size_value"),
        num("icmp.type").or_else(|| num("icmpv6.type")),
        num("icmp.code").or_else(|| num("icmpv6.code")),
        num("arp.opcode"),
    ]
}

/// Compares every field; returns the mismatches as text.
fn compare(path: &Path) -> (usize, Vec<String>) {
    let all = tshark_rows(path);
    let proto_col = TSHARK_FIELDS
        .iter()
        .position(|f| *f == "frame.protocols")
        .unwrap();
    let iface_col = TSHARK_FIELDS
        .iter()
        .position(|f| *f == "frame.interface_id")
        .unwrap();
    // tshark lists pcapng custom blocks as frames with no packet fields; we
    // number them too but print no line for them.
    let t: Vec<_> = all
        .into_iter()
        .filter(|r| !(r[proto_col] == ["data"] && r[iface_col].is_empty()))
        .collect();
    let o = ours(path);
    let mut names = vec!["number"];
    names.extend(Field::defaults().iter().map(|f| f.name()));
    let mut bad = Vec::new();
    if t.len() != o.len() {
        bad.push(format!(
            "{}: tshark {} frames, ours {}",
            path.display(),
            t.len(),
            o.len()
        ));
    }
    for (tr, or) in t.iter().zip(o.iter()) {
        let want = expected(tr);
        for (k, w) in want.iter().enumerate() {
            let got = or.get(k).map(String::as_str).unwrap_or("");
            let name = names[k];
            let ok = match w {
                Some(w) => got == w,
                None => got.is_empty(),
            };
            if !ok {
                bad.push(format!(
                    "{} frame {}: {name}: tshark {:?}, ours {:?}",
                    path.display(),
                    or.first().map(String::as_str).unwrap_or("?"),
                    w,
                    got
                ));
            }
        }
    }
    (o.len(), bad)
}

fn check(paths: &[PathBuf]) {
    let mut all_bad = Vec::new();
    for p in paths {
        let (n, bad) = compare(p);
        eprintln!(
            "{}: {n} frames, {} mismatching fields",
            p.display(),
            bad.len()
        );
        all_bad.extend(bad);
    }
    if !all_bad.is_empty() {
        for b in all_bad.iter().take(40) {
            eprintln!("{b}");
        }
        panic!("{} fields differ from tshark", all_bad.len());
    }
}

fn require_tshark() -> bool {
    if tshark_available() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("tshark is not installed; .ci/run must install it");
    }
    eprintln!("SKIPPED: tshark not installed");
    false
}

#[test]
fn generated_captures_match_tshark() {
    if !require_tshark() {
        return;
    }
    let tmp = tmpdir("gen");
    let dir = tmp.path();
    let mut paths = Vec::new();
    for (name, nsec, snaplen) in [
        ("plain", false, 262_144),
        ("nsec", true, 262_144),
        ("snap128", false, 128),
    ] {
        let p = dir.join(format!("{name}.pcap"));
        let cfg = GenConfig {
            size: 3 << 20,
            seed: 42,
            nsec,
            snaplen,
            ..Default::default()
        };
        let mut f = std::fs::File::create(&p).unwrap();
        generate(&cfg, &mut f).unwrap();
        paths.push(p);
    }
    check(&paths);
    drop(tmp);
}

/// Strips Ethernet (frames without VLAN tags only) to the IP packet.
fn ip_of(frame: &[u8]) -> Option<(u16, &[u8])> {
    let et = u16::from_be_bytes([frame[12], frame[13]]);
    matches!(et, 0x0800 | 0x86dd).then(|| (et, &frame[14..]))
}

#[test]
fn every_link_type_in_one_pcapng_matches_tshark() {
    if !require_tshark() {
        return;
    }
    let tmp = tmpdir("linktypes");
    let dir = tmp.path();
    let mut b = PcapngBuilder::new();
    b.shb(false)
        .idb(1, 0, None, None)
        .idb(101, 0, Some(9), None)
        .idb(113, 96, None, None)
        .idb(276, 0, Some(0x80 | 20), None)
        .idb(0, 0, None, None)
        .idb(108, 0, None, None);
    let mut g = Generator::new(9, false);
    let mut n = 0u64;
    while n < 3000 {
        let (frame, len, ts) = g.next_packet();
        let frame = frame.to_vec();
        let iface = (n % 6) as u32;
        let us = ts / 1000;
        let Some((et, ip)) = ip_of(&frame) else {
            b.epb(0, us, &frame, len);
            n += 1;
            continue;
        };
        let mut pkt = Vec::new();
        let ts_iface = match iface {
            1 => ts,
            3 => ((ts / 1_000_000_000) << 20) | (((ts % 1_000_000_000) << 20) / 1_000_000_000),
            _ => us,
        };
        match iface {
            0 => pkt.extend_from_slice(&frame),
            1 => pkt.extend_from_slice(ip),
            2 => {
                pkt.extend_from_slice(&[0, 4, 0, 1, 0, 6]);
                pkt.extend_from_slice(&frame[6..12]);
                pkt.extend_from_slice(&[0, 0]);
                pkt.extend_from_slice(&et.to_be_bytes());
                pkt.extend_from_slice(ip);
            }
            3 => {
                pkt.extend_from_slice(&et.to_be_bytes());
                pkt.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 1, 0, 6]);
                pkt.extend_from_slice(&frame[6..12]);
                pkt.extend_from_slice(&[0, 0]);
                pkt.extend_from_slice(ip);
            }
            4 => {
                let af: u32 = if et == 0x0800 { 2 } else { 30 };
                pkt.extend_from_slice(&af.to_le_bytes());
                pkt.extend_from_slice(ip);
            }
            _ => {
                let af: u32 = if et == 0x0800 { 2 } else { 30 };
                pkt.extend_from_slice(&af.to_be_bytes());
                pkt.extend_from_slice(ip);
            }
        }
        let caplen = if iface == 2 {
            pkt.len().min(96)
        } else {
            pkt.len()
        };
        let wire = pkt.len() as u32;
        b.epb(iface, ts_iface, &pkt[..caplen], wire);
        n += 1;
    }
    let p = dir.join("mixed.pcapng");
    std::fs::write(&p, &b.bytes).unwrap();
    check(&[p]);
    drop(tmp);
}

/// The real captures in pcap-parser's sources (a dev-dependency, so cargo
/// has them in its registry).
fn pcap_parser_assets() -> Vec<PathBuf> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata json");
    let pkg = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "pcap-parser")
        .expect("pcap-parser is a dev-dependency");
    let dir = Path::new(pkg["manifest_path"].as_str().unwrap())
        .parent()
        .unwrap()
        .join("assets");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    v.sort();
    v
}

#[test]
fn pcap_parser_real_captures_match_tshark() {
    if !require_tshark() {
        return;
    }
    let assets = pcap_parser_assets();
    assert!(assets.len() >= 5, "{assets:?}");
    check(&assets);
}

/// An Ethernet/IPv4/TCP frame with the given flags and acknowledgment field.
fn tcp_frame(flags: u8, ack: u32) -> Vec<u8> {
    let mut p = vec![2, 0, 0, 0, 0, 0x0b, 2, 0, 0, 0, 0, 0x0a, 0x08, 0x00];
    let mut ip = vec![
        0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    let sum = ip
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum::<u32>();
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    p.extend(ip);
    p.extend([0x04, 0xd2, 0, 80]);
    p.extend(1000u32.to_be_bytes());
    p.extend(ack.to_be_bytes());
    p.extend([0x50, flags, 0x02, 0x00, 0, 0, 0, 0]);
    p
}

/// Regression: tshark 4.0 prints tcp.ack_raw with the ACK flag clear too
/// (SYN, RST, FIN, no flags; a nonzero value only adds an expert note), so
/// tcp_ack must be present for them, not empty.
#[test]
fn tcp_ack_without_ack_flag_matches_tshark() {
    if !require_tshark() {
        return;
    }
    let tmp = tmpdir("ack");
    let mut b = PcapBuilder::new(false, false, false, 65535, 1);
    for (i, (flags, ack)) in [
        (0x02, 0),
        (0x02, 777),
        (0x04, 555),
        (0x00, 99),
        (0x01, 5),
        (0x12, 2000),
    ]
    .into_iter()
    .enumerate()
    {
        b.record(1_700_000_000, i as u32, &tcp_frame(flags, ack));
    }
    let p = tmp.path().join("ack.pcap");
    std::fs::write(&p, &b.bytes).unwrap();
    check(std::slice::from_ref(&p));
    let acks: Vec<String> = ours(&p).iter().map(|r| r[20].clone()).collect();
    assert_eq!(acks, ["0", "777", "555", "99", "5", "2000"]);
    drop(tmp);
}

/// Regression (issue 13, item 5): a TCP header cut short by the IP total
/// length (the frame, with a trailer, fully captured) or by the snaplen,
/// at every length from 2 to 19 bytes: the fields we keep are the ones
/// tshark shows (ports from 4 bytes, seq/ack/flags/window from 16).
#[test]
fn tcp_header_cut_short_matches_tshark() {
    if !require_tshark() {
        return;
    }
    let tmp = tmpdir("tcpcut");
    let mut b = PcapBuilder::new(false, false, false, 65535, 1);
    for (i, tcp_bytes) in (2..20usize).enumerate() {
        // Cut by the IP length: total length 20 + tcp_bytes, 6 bytes of
        // Ethernet trailer after the whole TCP header.
        let mut p = tcp_frame(0x18, 5000 + i as u32);
        let total = (20 + tcp_bytes) as u16;
        p[16..18].copy_from_slice(&total.to_be_bytes());
        p[24..26].copy_from_slice(&[0, 0]);
        let sum = p[14..34]
            .chunks(2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
            .sum::<u32>();
        let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
        p[24..26].copy_from_slice(&sum.to_be_bytes());
        p.extend([0u8; 6]);
        b.record(1_700_000_000, i as u32, &p);
        // Cut by the snaplen.
        let p = tcp_frame(0x12, 7000 + i as u32);
        b.record_raw(
            1_700_000_001,
            i as u32,
            (34 + tcp_bytes) as u32,
            p.len() as u32,
            &p[..34 + tcp_bytes],
        );
    }
    let p = tmp.path().join("tcpcut.pcap");
    std::fs::write(&p, &b.bytes).unwrap();
    check(std::slice::from_ref(&p));
    let rows = ours(&p);
    // Frame 29 is cut by the IP length at 16 bytes: flags and window kept.
    assert_eq!(rows[28][18..22], ["0x018", "1000", "5014", "512"]);
    drop(tmp);
}

/// Regression (issue 13, item 5): tshark 4.0 numbers pcapng custom blocks
/// (0x00000BAD and 0x40000BAD, also one too large to buffer) as frames,
/// and not the other non-packet blocks (ISB, NRB, DSB, unknown types);
/// `number` follows it, so a packet's number is its tshark frame.number.
#[test]
fn pcapng_custom_blocks_are_numbered_as_tshark_does() {
    if !require_tshark() {
        return;
    }
    let tmp = tmpdir("custom");
    let mut b = PcapngBuilder::new();
    b.shb(false).idb(1, 0, None, None);
    let pen = 32473u32.to_le_bytes(); // the documentation PEN
    let body = |n: usize| [&pen[..], &vec![0x42u8; n]].concat();
    let frame = tcp_frame(0x10, 1);
    b.epb(0, 1, &frame, frame.len() as u32)
        .block(0x0000_0bad, &body(12))
        .epb(0, 2, &frame, frame.len() as u32)
        .block(0x4000_0bad, &body(12))
        .epb(0, 3, &frame, frame.len() as u32)
        .block(5, &[0u8; 12]) // ISB
        .block(4, &[0u8; 4]) // NRB, end of records only
        .block(0x0000_0101, b"unknown!")
        .epb(0, 4, &frame, frame.len() as u32)
        .block(0x0000_0bad, &body(400 << 10)) // streamed past, not buffered
        .epb(0, 5, &frame, frame.len() as u32);
    let p = tmp.path().join("custom.pcapng");
    std::fs::write(&p, &b.bytes).unwrap();
    check(std::slice::from_ref(&p));
    let numbers: Vec<String> = ours(&p).iter().map(|r| r[0].clone()).collect();
    assert_eq!(numbers, ["1", "3", "5", "6", "8"]);
    drop(tmp);
}
