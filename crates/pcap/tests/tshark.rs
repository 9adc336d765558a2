//! Cross-check against a real peer: every field `extract` prints is compared
//! with `tshark -T fields` on generated captures (plain, nanosecond, snaplen
//! 128, and a multi-interface pcapng with every supported link type) and on
//! the real captures shipped in the pcap-parser crate's sources. tshark's
//! semantics are normalised as follows: defragmentation off,
//! the final IPv6 protocol taken from the extension-header chain, the inner
//! EtherType from `vlan.etype`, first occurrence elsewhere.
//!
//! Without tshark the test is skipped, except under CI (CI=true), where
//! .ci/run installs it and a missing tshark is a failure.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use commbench_pcap::decode::linktype;
use commbench_pcap::extract::{extract, ExtractConfig};
use commbench_pcap::format::{Field, OutputFormat};
use commbench_pcap::gen::{generate, GenConfig, Generator};
use commbench_pcap::issues::Issues;
use commbench_pcap::reader;
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
    "ah.next_header",
    "mip6.proto",
    "sll.gretype",
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

/// tshark rows: one map per frame, field -> list of occurrences, and why
/// tshark stopped early (a damaged capture) if it did.
fn tshark_read(path: &Path) -> (Vec<Vec<Vec<String>>>, Option<String>) {
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
    let err = (!out.status.success()).then(|| {
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| !l.contains("Running as user"))
            .collect::<Vec<_>>()
            .join(" ")
    });
    let rows = String::from_utf8_lossy(&out.stdout)
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
        .collect();
    (rows, err)
}

/// Our rows (number, then the default fields), or why the file could not
/// be read.
fn ours_read(path: &Path) -> Result<Vec<Vec<String>>, String> {
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
    let rep = extract(&cfg, &mut out, &mut |_| {}).map_err(|e| e.to_string())?;
    if let Some(f) = rep.failed_files().first() {
        return Err(f.error.clone().unwrap_or_default());
    }
    Ok(String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect())
}

fn ours(path: &Path) -> Vec<Vec<String>> {
    ours_read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What our reader knows of a capture's records that tshark's fields do
/// not say.
#[derive(Debug, Default)]
struct RecordNotes {
    /// Records of link types we do not decode.
    undecoded: HashSet<u64>,
    /// pcap records whose sub-second field is out of range (µs ≥ 10^6,
    /// ns ≥ 10^9).
    bad_subsecond: HashSet<u64>,
}

fn record_notes(path: &Path) -> RecordNotes {
    let mut notes = RecordNotes::default();
    let Ok(input) = reader::open(&path.display().to_string()) else {
        return notes;
    };
    let Ok(mut sp) = reader::Splitter::new(input, 0) else {
        return notes;
    };
    let mut issues = Issues::default();
    let mut buf = Vec::new();
    while let Ok(Some(c)) = sp.next_chunk(std::mem::take(&mut buf)) {
        let bytes = c.bytes();
        c.for_each_packet(&mut issues, |p| {
            if !linktype::is_supported(p.linktype) {
                notes.undecoded.insert(p.number);
            }
            if let reader::ChunkFormat::Pcap(h) = &c.format {
                let at = (p.offset - c.base_offset) as usize + 4;
                let w: [u8; 4] = bytes[at..at + 4].try_into().unwrap();
                let frac = if h.big_endian {
                    u32::from_be_bytes(w)
                } else {
                    u32::from_le_bytes(w)
                };
                if frac >= if h.nsec { 1_000_000_000 } else { 1_000_000 } {
                    notes.bad_subsecond.insert(p.number);
                }
            }
        });
        buf = c.buf;
    }
    notes
}

fn hex_or_dec(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

const EXT: [u64; 6] = [0, 43, 44, 60, 51, 135];

/// What tshark says, normalised to our columns (None = absent). Tunnels
/// and ICMP errors carry a second IP header: we report the outer one, so
/// the network layer is the first `ip`/`ipv6` in `frame.protocols`, and
/// transport fields are taken from the protocol the outer header names.
fn expected(t: &[Vec<String>]) -> Vec<Option<String>> {
    let col = |name: &str| -> &[String] {
        let i = TSHARK_FIELDS.iter().position(|f| *f == name).unwrap();
        t.get(i).map(|v| v.as_slice()).unwrap_or(&[])
    };
    let first = |name: &str| col(name).first().cloned();
    let protocols = first("frame.protocols").unwrap_or_default();
    let layers: Vec<&str> = protocols.split(':').collect();
    let link = layers.first().copied().unwrap_or("").to_string();
    let num = |name: &str| {
        first(name)
            .and_then(|v| hex_or_dec(&v))
            .map(|v| v.to_string())
    };
    let net = layers.iter().find(|l| matches!(**l, "ip" | "ipv6"));
    let v4 = net == Some(&"ip") && first("ip.src").is_some();
    let v6 = net == Some(&"ipv6") && first("ipv6.src").is_some();
    let is_arp = layers.iter().find(|l| matches!(**l, "ip" | "ipv6" | "arp")) == Some(&"arp");
    // The outer frame's tags: the VLAN layers before anything else (a
    // tunnel's inner frame may carry more).
    let outer: Vec<&str> = layers
        .iter()
        .skip(1)
        .copied()
        .take_while(|l| matches!(*l, "ethertype" | "vlan" | "ieee8021ad"))
        .filter(|l| *l != "ethertype")
        .collect();
    let c_tags = outer.iter().filter(|l| **l == "vlan").count();
    let ethertype = if outer.is_empty() {
        first("eth.type")
            .or_else(|| first("sll.etype"))
            .or_else(|| first("sll.gretype"))
    } else {
        // None after the tags: an 802.3 length, not an EtherType (tshark
        // 4.0 has no field for the type after a lone 802.1ad tag).
        c_tags
            .checked_sub(1)
            .and_then(|i| col("vlan.etype").get(i).cloned())
    }
    .and_then(|v| hex_or_dec(&v))
    .map(|v| format!("0x{v:04x}"));
    let proto = if v4 {
        num("ip.proto")
    } else if v6 {
        // Walk the outer header's chain: each extension header's next
        // header is the next occurrence of that header's field (a tunnel's
        // inner chain comes later in every column).
        let mut used: HashMap<&str, usize> = HashMap::new();
        let mut next = |field: &'static str| {
            let i = used.entry(field).or_default();
            let v = col(field).get(*i).and_then(|v| hex_or_dec(v));
            *i += 1;
            v
        };
        let mut p = next("ipv6.nxt");
        for _ in 0..512 {
            let field = match p {
                Some(0) => "ipv6.hopopts.nxt",
                Some(43) => "ipv6.routing.nxt",
                Some(44) => "ipv6.fraghdr.nxt",
                Some(60) => "ipv6.dstopts.nxt",
                Some(51) => "ah.next_header",
                Some(135) => "mip6.proto",
                _ => break,
            };
            match next(field) {
                Some(v) => p = Some(v),
                None => {
                    p = None;
                    break;
                }
            }
        }
        p.filter(|v| !EXT.contains(v)).map(|v| v.to_string())
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
    let is_tcp = proto.as_deref() == Some("6");
    let tcp = |name: &str| if is_tcp { num(name) } else { None };
    let port = |tcp_f: &str, udp_f: &str| match proto.as_deref() {
        Some("6") => num(tcp_f),
        Some("17") => num(udp_f),
        _ => None,
    };
    let icmp = |v4_f: &str, v6_f: &str| match proto.as_deref() {
        Some("1") => num(v4_f),
        Some("58") => num(v6_f),
        _ => None,
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
    // 802.1ad S-tags are dissected as ieee8021ad, C-tags as vlan; only
    // the outer frame's count.
    let mut ids: Vec<String> = Vec::new();
    if outer.first() == Some(&"ieee8021ad") {
        ids.extend(first("ieee8021ad.id"));
    }
    ids.extend(col("vlan.id").iter().take(c_tags).cloned());
    ids.truncate(outer.len());
    let (vlan_outer, vlan_inner) = (ids.first().cloned(), ids.get(1).cloned());
    let tcp_flags = tcp("tcp.flags").map(|v| format!("0x{:03x}", v.parse::<u64>().unwrap()));
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
        tcp("tcp.seq_raw"),
        tcp("tcp.ack_raw"),
        tcp("tcp.window_size_value"),
        icmp("icmp.type", "icmpv6.type"),
        icmp("icmp.code", "icmpv6.code"),
        if is_arp { num("arp.opcode") } else { None },
    ]
}

/// Column names of our rows.
fn names() -> Vec<&'static str> {
    let mut names = vec!["number"];
    names.extend(Field::defaults().iter().map(|f| f.name()));
    names
}

/// One capture compared field by field with tshark.
#[derive(Debug, Default)]
struct Comparison {
    /// Frames numbered by both and of a link type we decode.
    frames: usize,
    /// (equal, compared) per column of `names()`.
    fields: Vec<(usize, usize)>,
    /// Frames only tshark numbers (besides custom blocks), and the reverse.
    only_tshark: usize,
    only_ours: usize,
    /// Frames of link types we do not decode (not compared).
    undecoded: usize,
    /// Fields that differ in a documented way, per kind (not compared).
    documented: BTreeMap<&'static str, usize>,
    mismatches: Vec<String>,
    /// tshark stopped early on a damaged capture.
    tshark_error: Option<String>,
}

/// Whether tshark printed an out-of-range fraction of a second.
fn invalid_fraction(t: &str) -> bool {
    t.starts_with('-') || t.split('.').nth(1).is_some_and(|f| f.len() > 9)
}

/// Kinds of documented differences (docs/pcap.md).
const DOC_SUBSECOND: &str =
    "invalid sub-second time field (tshark prints it as is or wraps it in 32 bits; we carry it into the seconds)";
const DOC_ISL: &str =
    "ISL / FabricPath frame: we report the outer header's MACs, tshark the inner frame's";
const DOC_TSO_LEN: &str =
    "IPv4 total length 0 (TSO / BIG TCP): ip_len is the header's 0, tshark shows the length it took from the frame";

/// Why a field that differs from tshark's differs in a documented way.
fn documented(
    name: &str,
    want: Option<&str>,
    row: &[String],
    bad_subsecond: bool,
    layers: &str,
) -> Option<&'static str> {
    // tshark 4.0 shows ISL as a second `eth` layer right after the first.
    let isl = layers.starts_with("eth:eth:") || layers.split(':').any(|l| l == "isl" || l == "cfp");
    match name {
        "eth_src" | "eth_dst" if isl => Some(DOC_ISL),
        "ts" if bad_subsecond || want.is_some_and(invalid_fraction) => Some(DOC_SUBSECOND),
        "ip_len"
            if row.get(14).is_some_and(|v| v == "0") && row.get(9).is_some_and(|v| v == "4") =>
        {
            Some(DOC_TSO_LEN)
        }
        _ => None,
    }
}

fn compare_rows(
    path: &Path,
    tshark: Vec<Vec<Vec<String>>>,
    ours: &[Vec<String>],
    notes: &RecordNotes,
) -> Comparison {
    let proto_col = TSHARK_FIELDS
        .iter()
        .position(|f| *f == "frame.protocols")
        .unwrap();
    let iface_col = TSHARK_FIELDS
        .iter()
        .position(|f| *f == "frame.interface_id")
        .unwrap();
    let num_col = TSHARK_FIELDS
        .iter()
        .position(|f| *f == "frame.number")
        .unwrap();
    let names = names();
    let mut c = Comparison {
        fields: vec![(0, 0); names.len()],
        ..Default::default()
    };
    // tshark lists pcapng custom blocks as frames with no packet fields;
    // we number them too but print no line for them.
    let mut by_number: HashMap<u64, Vec<Vec<String>>> = tshark
        .into_iter()
        .filter(|r| !(r.get(proto_col).is_some_and(|p| p == &["data"]) && r[iface_col].is_empty()))
        .filter_map(|r| {
            let n = r.get(num_col)?.first()?.parse().ok()?;
            Some((n, r))
        })
        .collect();
    for or in ours {
        let Some(n) = or.first().and_then(|v| v.parse::<u64>().ok()) else {
            continue;
        };
        let Some(tr) = by_number.remove(&n) else {
            c.only_ours += 1;
            continue;
        };
        if notes.undecoded.contains(&n) {
            c.undecoded += 1;
            continue;
        }
        c.frames += 1;
        let want = expected(&tr);
        for (k, w) in want.iter().enumerate() {
            let got = or.get(k).map(String::as_str).unwrap_or("");
            let name = names[k];
            let ok = match w {
                Some(w) => got == w,
                None => got.is_empty(),
            };
            if !ok {
                let bad_ts = notes.bad_subsecond.contains(&n);
                let layers = tr[proto_col].first().map(String::as_str).unwrap_or("");
                if let Some(kind) = documented(name, w.as_deref(), or, bad_ts, layers) {
                    *c.documented.entry(kind).or_default() += 1;
                    continue;
                }
            }
            c.fields[k].1 += 1;
            if ok {
                c.fields[k].0 += 1;
            } else {
                c.mismatches.push(format!(
                    "{} frame {n}: {name}: tshark {:?}, ours {:?}",
                    path.display(),
                    w.as_deref().unwrap_or(""),
                    got
                ));
            }
        }
    }
    c.only_tshark = by_number.len();
    c
}

/// Compares every field of one capture.
fn compare(path: &Path) -> Comparison {
    let (t, err) = tshark_read(path);
    let mut c = compare_rows(path, t, &ours(path), &record_notes(path));
    c.tshark_error = err;
    c
}

fn check(paths: &[PathBuf]) {
    let mut all_bad = Vec::new();
    for p in paths {
        let c = compare(p);
        eprintln!(
            "{}: {} frames, {} mismatching fields",
            p.display(),
            c.frames,
            c.mismatches.len()
        );
        assert!(
            c.tshark_error.is_none(),
            "{}: {:?}",
            p.display(),
            c.tshark_error
        );
        if c.only_tshark + c.only_ours > 0 {
            all_bad.push(format!(
                "{}: {} frames only tshark numbers, {} only ours",
                p.display(),
                c.only_tshark,
                c.only_ours
            ));
        }
        all_bad.extend(c.mismatches);
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
    commbench_core::testing::skip("tshark", "not installed (apt-get install tshark)");
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

/// The captures committed under `tests/data` (see its README.md).
fn data_captures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut v = captures_under(&dir);
    v.sort();
    v
}

/// Capture files (`.pcap`, `.pcapng`, `.cap`, `.dmp`) under `dir`, recursively.
fn captures_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(captures_under(&p));
        } else if p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| matches!(x, "pcap" | "pcapng" | "cap" | "dmp"))
        {
            out.push(p);
        }
    }
    out
}

/// Real SLL2 and DLT_LOOP captures (issue 13, item 5: the 1,503-capture
/// corpus had no packet of either): every field agrees with tshark.
#[test]
fn committed_captures_match_tshark() {
    if !require_tshark() {
        return;
    }
    let files = data_captures();
    let lts: Vec<(String, u32)> = files
        .iter()
        .map(|p| {
            let b = std::fs::read(p).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            (name, u32::from_le_bytes([b[20], b[21], b[22], b[23]]))
        })
        .collect();
    assert!(lts.contains(&("sll2-loopback.pcap".into(), 276)), "{lts:?}");
    assert!(lts.contains(&("loop-loopback.pcap".into(), 108)), "{lts:?}");
    check(&files);
    for p in &files {
        assert_eq!(ours(p).len(), 23, "{}", p.display());
    }
}

/// `bench/pcap-xcheck.sh`: compares every capture under `tests/data` and
/// the directories in PCAP_XCHECK_DIRS (separated by `:`) with tshark and
/// prints per-field agreement and the disagreements. Reports, never fails
/// on a disagreement (run with `--ignored --nocapture`).
#[test]
#[ignore = "run by bench/pcap-xcheck.sh"]
fn xcheck() {
    if !require_tshark() {
        return;
    }
    let mut files = data_captures();
    let dirs = std::env::var("PCAP_XCHECK_DIRS").unwrap_or_default();
    for d in dirs.split(':').filter(|d| !d.is_empty()) {
        let mut v = captures_under(Path::new(d));
        v.sort();
        files.extend(v);
    }
    let names = names();
    let mut total = Comparison {
        fields: vec![(0, 0); names.len()],
        ..Default::default()
    };
    let (mut read, mut not_ours, mut tshark_stopped) = (0, Vec::new(), 0);
    for p in &files {
        let rows = match ours_read(p) {
            Ok(r) => r,
            Err(e) => {
                not_ours.push(format!("{}: {e}", p.display()));
                continue;
            }
        };
        read += 1;
        let (t, err) = tshark_read(p);
        let c = compare_rows(p, t, &rows, &record_notes(p));
        if err.is_some() {
            tshark_stopped += 1;
        }
        total.frames += c.frames;
        total.only_tshark += c.only_tshark;
        total.only_ours += c.only_ours;
        total.undecoded += c.undecoded;
        for (k, n) in c.documented {
            *total.documented.entry(k).or_default() += n;
        }
        for (a, b) in total.fields.iter_mut().zip(&c.fields) {
            a.0 += b.0;
            a.1 += b.1;
        }
        total.mismatches.extend(c.mismatches);
    }
    let tshark_v = Command::new("tshark")
        .arg("-v")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_default();
    println!("pcap-xcheck: commbench vs {tshark_v}");
    println!(
        "captures: {} found, {read} read by both sides ({} not read by commbench), {tshark_stopped} where tshark stopped early on damaged data",
        files.len(),
        not_ours.len()
    );
    println!(
        "packets compared: {} (left out: {} of link types commbench does not decode, {} numbered only by tshark, {} only by commbench)",
        total.frames, total.undecoded, total.only_tshark, total.only_ours
    );
    println!(
        "{:<12} {:>22} {:>10}",
        "field", "equal / compared", "agreement"
    );
    let (mut eq, mut all) = (0usize, 0usize);
    for (k, (e, n)) in total.fields.iter().enumerate() {
        eq += e;
        all += n;
        let pct = if *n == 0 {
            100.0
        } else {
            *e as f64 * 100.0 / *n as f64
        };
        println!(
            "{:<12} {:>22} {:>9.3}%",
            names[k],
            format!("{e} / {n}"),
            pct
        );
    }
    let pct = if all == 0 {
        100.0
    } else {
        eq as f64 * 100.0 / all as f64
    };
    println!(
        "{:<12} {:>22} {:>9.3}%",
        "all fields",
        format!("{eq} / {all}"),
        pct
    );
    println!("documented differences (not counted above):");
    if total.documented.is_empty() {
        println!("  none");
    }
    for (k, n) in &total.documented {
        println!("  {n} x {k}");
    }
    let mut per_field: Vec<(&str, usize)> = names
        .iter()
        .zip(&total.fields)
        .map(|(n, (e, t))| (*n, t - e))
        .filter(|(_, d)| *d > 0)
        .collect();
    per_field.sort_by_key(|x| std::cmp::Reverse(x.1));
    let by_field = per_field
        .iter()
        .map(|(n, d)| format!("{n} {d}"))
        .collect::<Vec<_>>()
        .join(", ");
    if by_field.is_empty() {
        println!("disagreements: none");
    } else {
        println!("disagreements: {} ({by_field})", total.mismatches.len());
    }
    let list = std::env::var("PCAP_XCHECK_LIST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    for m in total.mismatches.iter().take(list) {
        println!("  {m}");
    }
    if total.mismatches.len() > list {
        println!(
            "  ... {} more (PCAP_XCHECK_LIST=N lists N)",
            total.mismatches.len() - list
        );
    }
    for m in not_ours.iter().take(10) {
        println!("not read: {m}");
    }
}

fn eth_frame(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![2, 0, 0, 0, 0, 0x0b, 2, 0, 0, 0, 0, 0x0a];
    p.extend(ethertype.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

fn ipv4_header(total_len: u16, proto: u8) -> Vec<u8> {
    let mut ip = vec![
        0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip[2..4].copy_from_slice(&total_len.to_be_bytes());
    let sum = ip
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum::<u32>();
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip
}

fn tcp_header(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend(sport.to_be_bytes());
    t.extend(dport.to_be_bytes());
    t.extend(3_000_000_000u32.to_be_bytes());
    t.extend(123_456u32.to_be_bytes());
    t.extend([0x50, flags, 0x01, 0xf6, 0, 0, 0, 0]);
    t
}

/// An IPv6 header with payload length `plen`, then the hop-by-hop jumbo
/// payload option (RFC 2675) carrying `jumbo`, naming `next`.
fn ipv6_jumbo(next: u8, jumbo: u32) -> Vec<u8> {
    let mut ip = vec![0x60, 0, 0, 0, 0, 0, 0, 64];
    ip.extend(
        [0x20, 0x01, 0x0d, 0xb8]
            .iter()
            .chain([0u8; 11].iter())
            .chain([1u8].iter()),
    );
    ip.extend(
        [0x20, 0x01, 0x0d, 0xb8]
            .iter()
            .chain([0u8; 11].iter())
            .chain([2u8].iter()),
    );
    ip.extend([next, 0, 0xc2, 4]);
    ip.extend(jumbo.to_be_bytes());
    ip
}

/// Crafted equivalents of the tcpdump captures issue 13 names (items 1, 2,
/// 3 and RARP): TSO / BIG TCP IPv4 with total length 0
/// (ipv4_tcp_http_xml_tso.pcap, bigtcp-ipv4.pcap), IPv6 payload length 0
/// with the jumbo option (bigtcp-ipv6-hbh.pcap, ipv6_jumbogram_1.pcap), a
/// µs field of 2,216,213,376 (rx_serviceid_oobr.pcap) and RARP
/// (rarp_req_reply.pcapng): every field agrees with tshark but for the two
/// documented differences (the wrapped time, the TSO frames' ip_len).
#[test]
fn issue_13_crafted_captures_match_tshark() {
    if !require_tshark() {
        return;
    }
    let tmp = tmpdir("issue13");
    let mut b = PcapBuilder::new(false, false, false, 262_144, 1);
    // TSO and BIG TCP: IPv4 total length 0.
    for size in [1448usize, 70_000] {
        let mut l3 = ipv4_header(0, 6);
        l3.extend(tcp_header(39556, 8080, 0x18));
        l3.extend(std::iter::repeat_n(b'x', size));
        b.record(1_700_000_000, 1, &eth_frame(0x0800, &l3));
    }
    // IPv6 BIG TCP (hop-by-hop jumbo) and an ICMPv6 jumbogram.
    let mut l3 = ipv6_jumbo(6, 8 + 20 + 70_000);
    l3.extend(tcp_header(41851, 5201, 0x10));
    l3.extend(std::iter::repeat_n(b'y', 70_000));
    b.record(1_700_000_000, 2, &eth_frame(0x86dd, &l3));
    let mut l3 = ipv6_jumbo(58, 8 + 8 + 65_600);
    l3.extend([128, 0, 0, 0, 0, 1, 0, 1]);
    l3.extend(std::iter::repeat_n(0u8, 65_600));
    b.record(1_700_000_000, 3, &eth_frame(0x86dd, &l3));
    // A µs field of 2,216,213,376 (about 2216 s).
    let mut l3 = ipv4_header(20 + 8 + 4, 17);
    l3.extend([0x1b, 0x58, 0x1b, 0x58, 0, 12, 0, 0, 1, 2, 3, 4]);
    b.record(1_700_000_001, 2_216_213_376, &eth_frame(0x0800, &l3));
    // RARP request and reply.
    for op in [3u8, 4] {
        let mut arp = vec![0, 1, 8, 0, 6, 4, 0, op];
        arp.extend([0u8; 20]);
        b.record(1_700_000_002, op as u32, &eth_frame(0x8035, &arp));
    }
    let p = tmp.path().join("issue13.pcap");
    std::fs::write(&p, &b.bytes).unwrap();
    check(std::slice::from_ref(&p));
    let c = compare(&p);
    assert_eq!(c.frames, 7);
    let doc: Vec<(&str, usize)> = c.documented.into_iter().collect();
    assert_eq!(doc, [(DOC_TSO_LEN, 2), (DOC_SUBSECOND, 1)]);
    let rows = ours(&p);
    // Ports and TCP fields of the TSO frame, proto of the jumbograms.
    assert_eq!(rows[0][16..18], ["39556", "8080"]);
    assert_eq!((rows[2][12].as_str(), rows[3][12].as_str()), ("6", "58"));
    drop(tmp);
}

/// Regression (issue 25, item 15a): IPv6 packets with 15 to 100 extension
/// headers (destination options and routing, as in libpcap's
/// tests/filter/ipv6_ext_headers.pcap) before UDP or TCP: 16 or more used to
/// be counted malformed with an extension header as `proto` (43 where
/// tshark shows 17).
#[test]
fn long_ipv6_extension_header_chains_match_tshark() {
    if !require_tshark() {
        return;
    }
    let tmp = tmpdir("ext");
    let mut b = PcapBuilder::new(false, false, false, 65535, 1);
    let mut want = Vec::new();
    for (i, n) in [15usize, 16, 17, 20, 40, 100].into_iter().enumerate() {
        let last = if i % 2 == 0 { 17u8 } else { 6 };
        let mut ext = Vec::new();
        for k in 0..n {
            let next = if k + 1 == n {
                last
            } else if k % 2 == 0 {
                60
            } else {
                43
            };
            if k % 2 == 1 {
                // Routing type 0, no segments left, one address.
                ext.extend([next, 2, 0, 0, 0, 0, 0, 0]);
                ext.extend([0u8; 16]);
            } else {
                // Destination options: one PadN.
                ext.extend([next, 0, 1, 4, 0, 0, 0, 0]);
            }
        }
        let l4 = if last == 17 {
            vec![0x14, 0xe9, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4]
        } else {
            tcp_header(40000 + i as u16, 443, 0x10)
        };
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend(((ext.len() + l4.len()) as u16).to_be_bytes());
        ip.extend([60, 64]);
        ip.extend(
            [0x20, 0x01, 0x0d, 0xb8]
                .iter()
                .chain([0u8; 11].iter())
                .chain([1u8].iter()),
        );
        ip.extend(
            [0x20, 0x01, 0x0d, 0xb8]
                .iter()
                .chain([0u8; 11].iter())
                .chain([2u8].iter()),
        );
        ip.extend(ext);
        ip.extend(l4);
        b.record(1_700_000_000, i as u32, &eth_frame(0x86dd, &ip));
        want.push(last.to_string());
    }
    let p = tmp.path().join("ext.pcap");
    std::fs::write(&p, &b.bytes).unwrap();
    check(std::slice::from_ref(&p));
    let protos: Vec<String> = ours(&p).iter().map(|r| r[12].clone()).collect();
    assert_eq!(protos, want);
    drop(tmp);
}

/// Regression (issue 25, item 15b): pcap 2.0-2.2 files store caplen and len
/// swapped, 2.3 files sometimes; tshark swaps them back (libpcap's rule),
/// and so do we: every frame, with the same lengths.
#[test]
fn old_pcap_versions_with_swapped_lengths_match_tshark() {
    if !require_tshark() {
        return;
    }
    let tmp = tmpdir("swapped");
    let mut paths = Vec::new();
    for (major, minor) in [(2u16, 0u16), (2, 2), (2, 3)] {
        let mut b = PcapBuilder::new(false, false, false, 65535, 1);
        b.version(major, minor);
        for i in 0..4u32 {
            let mut l3 = ipv4_header(20 + 20, 6);
            l3.extend(tcp_header(1000 + i as u16, 80, 0x10));
            let f = eth_frame(0x0800, &l3);
            let wire = f.len() as u32 + 100 * i;
            if minor == 3 && i % 2 == 1 {
                b.record_raw(1_700_000_000, i, f.len() as u32, wire, &f);
            } else {
                b.record_raw(1_700_000_000, i, wire, f.len() as u32, &f);
            }
        }
        let p = tmp.path().join(format!("v{major}_{minor}.pcap"));
        std::fs::write(&p, &b.bytes).unwrap();
        assert_eq!(compare(&p).frames, 4, "{}", p.display());
        paths.push(p);
    }
    check(&paths);
    drop(tmp);
}
