//! `gen`: a deterministic generator of realistic captures for tests and
//! benchmarks — interleaved TCP bulk and interactive flows, DNS, QUIC-like
//! and RTP-like UDP, ICMP / ICMPv6 (echo, neighbour solicitation), ARP,
//! fragmented UDP (IPv4 fragments and IPv6 fragment headers); IPv4 (a few
//! with options) and IPv6 (some with hop-by-hop, destination-options and
//! routing headers); 802.1Q on ~10% of flows and QinQ on ~1%.
//!
//! Invariants: the same seed and options give byte-identical output; packet
//! headers are well formed (IPv4 header checksums are right, lengths agree),
//! so any disagreement between `extract` and tshark on these files is a bug;
//! `zero_payload` makes payloads all zero, which compresses ~50:1 like the
//! seed's captures. Frames are built in one reused buffer.

use std::io::{self, BufWriter, Write};

use crate::reader::Compression;
use crate::wire::ip::ipv4_header_checksum;
use crate::writer::PcapWriter;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenConfig {
    /// Stop once the uncompressed pcap reaches this many bytes.
    pub size: u64,
    pub seed: u64,
    pub compression: Compression,
    pub nsec: bool,
    pub snaplen: u32,
    pub zero_payload: bool,
}

impl Default for GenConfig {
    fn default() -> Self {
        Self {
            size: 64 << 20,
            seed: 1,
            compression: Compression::None,
            nsec: false,
            snaplen: 262_144,
            zero_payload: false,
        }
    }
}

/// What was generated.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct GenReport {
    pub packets: u64,
    /// Uncompressed pcap bytes.
    pub pcap_bytes: u64,
    /// Packets per flow kind, in `Kind::ALL` order.
    pub per_kind: Vec<(&'static str, u64)>,
}

/// A capture size that cannot be read (the argument): not a number with
/// a unit, or zero or too large.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("bad size '{0}': use a number with K, M or G")]
    Syntax(String),
    #[error("bad size '{0}'")]
    Range(String),
}

/// Parses sizes like `1G`, `512M`, `64k`, `1000` (binary units).
pub fn parse_size(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (t, 1u64),
        Some((i, _)) => {
            let unit = t[i..].trim_end_matches(['b', 'B']).trim_end_matches(['i']);
            let mul = match unit.to_ascii_lowercase().as_str() {
                "" => 1,
                "k" => 1 << 10,
                "m" => 1 << 20,
                "g" => 1 << 30,
                "t" => 1 << 40,
                _ => return Err(SizeError::Syntax(s.to_owned())),
            };
            (&t[..i], mul)
        }
    };
    let n: u64 = num.parse().map_err(|_| SizeError::Syntax(s.to_owned()))?;
    n.checked_mul(mul)
        .filter(|v| *v > 0)
        .ok_or_else(|| SizeError::Range(s.to_owned()))
}

/// SplitMix64: small, fast, and the same everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(1000) < percent * 10
    }
    pub fn permille(&mut self, p: u64) -> bool {
        self.below(1000) < p
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    TcpBulk,
    TcpInteractive,
    Dns,
    Quic,
    Rtp,
    Icmp,
    Arp,
    FragUdp,
}

impl Kind {
    const ALL: [Kind; 8] = [
        Kind::TcpBulk,
        Kind::TcpInteractive,
        Kind::Dns,
        Kind::Quic,
        Kind::Rtp,
        Kind::Icmp,
        Kind::Arp,
        Kind::FragUdp,
    ];
    fn name(self) -> &'static str {
        match self {
            Kind::TcpBulk => "tcp_bulk",
            Kind::TcpInteractive => "tcp_interactive",
            Kind::Dns => "dns",
            Kind::Quic => "quic",
            Kind::Rtp => "rtp",
            Kind::Icmp => "icmp",
            Kind::Arp => "arp",
            Kind::FragUdp => "frag_udp",
        }
    }
    /// Picks the kind of a new flow; weights are per flow, chosen so the
    /// packet mix is dominated by bulk TCP and QUIC as on a real uplink.
    fn pick(r: &mut Rng) -> Kind {
        match r.below(100) {
            0..=21 => Kind::TcpBulk,
            22..=39 => Kind::TcpInteractive,
            40..=59 => Kind::Dns,
            60..=69 => Kind::Quic,
            70..=77 => Kind::Rtp,
            78..=86 => Kind::Icmp,
            87..=93 => Kind::Arp,
            _ => Kind::FragUdp,
        }
    }
}

#[derive(Debug, Clone)]
struct Flow {
    kind: Kind,
    v6: bool,
    /// IPv6 extension headers: 0 none, 1 hop-by-hop, 2 dst-opts + routing.
    ext: u8,
    /// IPv4 options (router alert).
    v4_opts: bool,
    vlan: [Option<u16>; 2],
    mac: [[u8; 6]; 2],
    ip: [[u8; 16]; 2],
    port: [u16; 2],
    seq: [u32; 2],
    ttl: [u8; 2],
    win: [u16; 2],
    /// Packets left in the flow.
    left: u32,
    step: u32,
    /// Fragmented datagram state: bytes of UDP datagram, bytes sent, id.
    frag_total: usize,
    frag_sent: usize,
    frag_id: u32,
}

const POOL: usize = 1 << 16;

/// Generator state.
pub struct Generator {
    rng: Rng,
    flows: Vec<Flow>,
    frame: Vec<u8>,
    pool: Vec<u8>,
    zero: bool,
    ts_ns: u64,
    per_kind: [u64; 8],
}

fn mac_for(r: &mut Rng) -> [u8; 6] {
    let v = r.next_u64().to_be_bytes();
    [v[0] & 0xfe | 0x02, v[1], v[2], v[3], v[4], v[5]]
}

impl Generator {
    pub fn new(seed: u64, zero_payload: bool) -> Self {
        let mut rng = Rng::new(seed);
        let mut pool = vec![0u8; POOL + 2048];
        if !zero_payload {
            for c in pool.chunks_mut(8) {
                let v = rng.next_u64().to_le_bytes();
                c.copy_from_slice(&v[..c.len()]);
            }
        }
        let mut g = Self {
            rng,
            flows: Vec::new(),
            frame: Vec::with_capacity(16 << 10),
            pool,
            zero: zero_payload,
            ts_ns: 1_700_000_000_000_000_000,
            per_kind: [0; 8],
        };
        for _ in 0..48 {
            let f = g.new_flow();
            g.flows.push(f);
        }
        g
    }

    fn new_flow(&mut self) -> Flow {
        let r = &mut self.rng;
        let kind = Kind::pick(r);
        let v6 = kind != Kind::Arp && r.chance(30);
        let vlan = if r.permille(10) {
            [Some(r.range(1, 4094) as u16), Some(r.range(1, 4094) as u16)]
        } else if r.permille(100) {
            [Some(r.range(1, 4094) as u16), None]
        } else {
            [None, None]
        };
        let mut ip = [[0u8; 16]; 2];
        for a in ip.iter_mut() {
            if v6 {
                a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
                let sub = r.below(4) as u8;
                a[7] = sub;
                if r.chance(50) {
                    a[15] = r.range(1, 250) as u8; // short, compressible form
                } else {
                    a[8..16].copy_from_slice(&r.next_u64().to_be_bytes());
                }
            } else {
                let v = r.next_u64().to_be_bytes();
                let first = [10u8, 172, 192, 100, 203][r.below(5) as usize];
                a[..4].copy_from_slice(&[first, v[1], v[2], v[3].max(1)]);
            }
        }
        let server_port = match kind {
            Kind::TcpBulk => [443u16, 80, 8080, 22, 445][r.below(5) as usize],
            Kind::TcpInteractive => [22u16, 23, 3306, 6379, 5432][r.below(5) as usize],
            Kind::Dns => 53,
            Kind::Quic => 443,
            Kind::Rtp => (r.range(8192, 16383) * 2) as u16,
            Kind::FragUdp => [2049u16, 7777, 9000][r.below(3) as usize],
            Kind::Icmp | Kind::Arp => 0,
        };
        let client_port = if kind == Kind::Rtp {
            (r.range(8192, 16383) * 2) as u16
        } else {
            r.range(32768, 60999) as u16
        };
        let left = match kind {
            Kind::TcpBulk => r.range(200, 3000),
            Kind::TcpInteractive => r.range(10, 200),
            Kind::Dns => 2,
            Kind::Quic => r.range(50, 1500),
            Kind::Rtp => r.range(100, 2000),
            Kind::Icmp => r.range(2, 10),
            Kind::Arp => 2,
            Kind::FragUdp => r.range(3, 30),
        } as u32;
        Flow {
            kind,
            v6,
            ext: if v6 && r.chance(20) {
                1 + r.below(2) as u8
            } else {
                0
            },
            v4_opts: !v6 && r.chance(3),
            vlan,
            mac: [mac_for(r), mac_for(r)],
            ip,
            port: [client_port, server_port],
            seq: [r.next_u64() as u32, r.next_u64() as u32],
            ttl: [
                [64u8, 128, 255, 63][r.below(4) as usize],
                [64u8, 128, 57, 255][r.below(4) as usize],
            ],
            win: [r.range(1024, 65535) as u16, r.range(1024, 65535) as u16],
            left,
            step: 0,
            frag_total: 0,
            frag_sent: 0,
            frag_id: r.next_u64() as u32,
        }
    }

    fn payload(&mut self, n: usize) -> (usize, usize) {
        let off = if self.zero {
            0
        } else {
            self.rng.below(POOL as u64) as usize
        };
        (off, n)
    }

    /// Ethernet + VLAN tags + IP header for `dir` (0 client→server).
    /// `l4_len` is the IP payload length after extension headers;
    /// `frag` = Some((offset_bytes, more)) makes an IPv4 fragment or adds an
    /// IPv6 fragment header. Returns the frame length so far.
    fn push_l2_l3(
        &mut self,
        f: &Flow,
        dir: usize,
        proto: u8,
        l4_len: usize,
        frag: Option<(usize, bool)>,
    ) {
        let b = &mut self.frame;
        b.clear();
        b.extend_from_slice(&f.mac[1 - dir]);
        b.extend_from_slice(&f.mac[dir]);
        match f.vlan {
            [Some(o), Some(i)] => {
                b.extend_from_slice(&0x88a8u16.to_be_bytes());
                b.extend_from_slice(&o.to_be_bytes());
                b.extend_from_slice(&0x8100u16.to_be_bytes());
                b.extend_from_slice(&((3u16 << 13) | i).to_be_bytes());
            }
            [Some(o), None] => {
                b.extend_from_slice(&0x8100u16.to_be_bytes());
                b.extend_from_slice(&o.to_be_bytes());
            }
            _ => {}
        }
        let (src, dst) = (&f.ip[dir], &f.ip[1 - dir]);
        if f.v6 {
            b.extend_from_slice(&0x86ddu16.to_be_bytes());
            let mut ext: Vec<(u8, Vec<u8>)> = Vec::new();
            match f.ext {
                1 => ext.push((0, vec![0, 0, 5, 2, 0, 0, 1, 0])), // hop-by-hop, router alert
                2 => {
                    ext.push((60, vec![0, 0, 1, 4, 0, 0, 0, 0])); // dst opts, PadN
                    let mut rh = vec![0, 2, 0, 0, 0, 0, 0, 0]; // routing type 0, 0 segs left
                    rh.extend_from_slice(&[
                        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x99,
                    ]);
                    ext.push((43, rh));
                }
                _ => {}
            }
            if let Some((off, more)) = frag {
                let mut fh = vec![0, 0];
                fh.extend_from_slice(&(((off / 8) as u16) << 3 | more as u16).to_be_bytes());
                fh.extend_from_slice(&f.frag_id.to_be_bytes());
                ext.push((44, fh));
            }
            let ext_len: usize = ext.iter().map(|e| e.1.len()).sum();
            let first_nh = ext.first().map(|e| e.0).unwrap_or(proto);
            b.extend_from_slice(&[0x60, 0, 0, 0]);
            b.extend_from_slice(&((ext_len + l4_len) as u16).to_be_bytes());
            b.push(first_nh);
            b.push(f.ttl[dir]);
            b.extend_from_slice(src);
            b.extend_from_slice(dst);
            for k in 0..ext.len() {
                let nh = ext.get(k + 1).map(|e| e.0).unwrap_or(proto);
                let mut h = ext[k].1.clone();
                h[0] = nh;
                b.extend_from_slice(&h);
            }
        } else {
            b.extend_from_slice(&0x0800u16.to_be_bytes());
            let start = b.len();
            let opt_len = if f.v4_opts { 4 } else { 0 };
            let total = 20 + opt_len + l4_len;
            let (foff, more) = frag.unwrap_or((0, false));
            let flags_off: u16 = if frag.is_some() {
                ((foff / 8) as u16) | if more { 0x2000 } else { 0 }
            } else {
                0x4000 // DF
            };
            b.push(0x45 + (opt_len / 4) as u8);
            b.push(0);
            b.extend_from_slice(&(total as u16).to_be_bytes());
            b.extend_from_slice(&(f.frag_id as u16).to_be_bytes());
            b.extend_from_slice(&flags_off.to_be_bytes());
            b.push(f.ttl[dir]);
            b.push(proto);
            b.extend_from_slice(&[0, 0]);
            b.extend_from_slice(&src[..4]);
            b.extend_from_slice(&dst[..4]);
            if f.v4_opts {
                b.extend_from_slice(&[0x94, 0x04, 0, 0]);
            }
            let c = ipv4_header_checksum(&b[start..]);
            b[start + 10..start + 12].copy_from_slice(&c.to_be_bytes());
        }
    }

    fn push_payload(&mut self, n: usize) {
        let (off, n) = self.payload(n);
        let mut left = n;
        let mut at = off;
        while left > 0 {
            let take = left.min(self.pool.len() - at);
            let (frame, pool) = (&mut self.frame, &self.pool);
            frame.extend_from_slice(&pool[at..at + take]);
            left -= take;
            at = 0;
        }
    }

    fn tcp(&mut self, f: &mut Flow, dir: usize, flags: u16, payload: usize) {
        self.push_l2_l3(f, dir, 6, 20 + payload, None);
        let ack = if flags & 0x10 != 0 { f.seq[1 - dir] } else { 0 };
        let b = &mut self.frame;
        b.extend_from_slice(&f.port[dir].to_be_bytes());
        b.extend_from_slice(&f.port[1 - dir].to_be_bytes());
        b.extend_from_slice(&f.seq[dir].to_be_bytes());
        b.extend_from_slice(&ack.to_be_bytes());
        b.push(0x50);
        b.push(flags as u8);
        b.extend_from_slice(&f.win[dir].to_be_bytes());
        b.extend_from_slice(&[0x5a, 0xa5, 0, 0]);
        let adv = payload as u32 + (flags & 0x03 != 0) as u32; // SYN/FIN take one
        f.seq[dir] = f.seq[dir].wrapping_add(adv);
        self.push_payload(payload);
    }

    fn udp(&mut self, f: &Flow, dir: usize, payload: usize) {
        self.push_l2_l3(f, dir, 17, 8 + payload, None);
        let b = &mut self.frame;
        b.extend_from_slice(&f.port[dir].to_be_bytes());
        b.extend_from_slice(&f.port[1 - dir].to_be_bytes());
        b.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
        b.extend_from_slice(&[0x12, 0x34]);
        self.push_payload(payload);
    }

    fn icmp(&mut self, f: &Flow, dir: usize, ty: u8, code: u8, payload: usize) {
        let proto = if f.v6 { 58 } else { 1 };
        self.push_l2_l3(f, dir, proto, 8 + payload, None);
        let b = &mut self.frame;
        b.extend_from_slice(&[ty, code, 0xab, 0xcd]);
        b.extend_from_slice(&(f.frag_id as u16).to_be_bytes());
        b.extend_from_slice(&(f.step as u16).to_be_bytes());
        self.push_payload(payload);
    }

    fn arp(&mut self, f: &Flow, dir: usize, op: u16) {
        let b = &mut self.frame;
        b.clear();
        let broadcast = op == 1;
        b.extend_from_slice(if broadcast {
            &[0xff; 6]
        } else {
            &f.mac[1 - dir]
        });
        b.extend_from_slice(&f.mac[dir]);
        if let [Some(o), _] = f.vlan {
            b.extend_from_slice(&0x8100u16.to_be_bytes());
            b.extend_from_slice(&o.to_be_bytes());
        }
        b.extend_from_slice(&0x0806u16.to_be_bytes());
        b.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
        b.extend_from_slice(&op.to_be_bytes());
        b.extend_from_slice(&f.mac[dir]);
        b.extend_from_slice(&f.ip[dir][..4]);
        b.extend_from_slice(if broadcast { &[0; 6] } else { &f.mac[1 - dir] });
        b.extend_from_slice(&f.ip[1 - dir][..4]);
        b.extend_from_slice(&[0; 18]); // pad to 60 bytes
    }

    /// Builds the next packet; returns (frame, wire length).
    pub fn next_packet(&mut self) -> (&[u8], u32, u64) {
        let gap = match self.rng.below(16) {
            0 => self.rng.range(100_000, 2_000_000),
            _ => self.rng.range(50, 20_000),
        };
        self.ts_ns += gap;
        let i = self.rng.below(self.flows.len() as u64) as usize;
        let mut f = self.flows[i].clone();
        self.per_kind[Kind::ALL.iter().position(|k| *k == f.kind).unwrap_or(0)] += 1;
        self.step(&mut f);
        f.step += 1;
        f.left = f.left.saturating_sub(1);
        if f.left == 0 && f.frag_sent >= f.frag_total {
            self.flows[i] = self.new_flow();
        } else {
            self.flows[i] = f;
        }
        let len = self.frame.len() as u32;
        (&self.frame, len, self.ts_ns)
    }

    fn step(&mut self, f: &mut Flow) {
        let s = f.step;
        let r = self.rng.below(1000);
        match f.kind {
            Kind::TcpBulk => match s {
                0 => self.tcp(f, 0, 0x002, 0),
                1 => self.tcp(f, 1, 0x012, 0),
                2 => self.tcp(f, 0, 0x010, 0),
                _ if f.left == 1 => self.tcp(f, 1, 0x011, 0),
                _ if r < 330 => self.tcp(f, 0, 0x010, 0),
                _ => {
                    let mss = if f.v6 { 1428 } else { 1448 };
                    let n = if r < 960 {
                        mss
                    } else {
                        self.rng.range(1, mss as u64) as usize
                    };
                    self.tcp(f, 1, 0x018, n)
                }
            },
            Kind::TcpInteractive => {
                let dir = (s % 2) as usize;
                if s == 0 {
                    self.tcp(f, 0, 0x002, 0)
                } else if s == 1 {
                    self.tcp(f, 1, 0x012, 0)
                } else if r < 20 {
                    self.tcp(f, dir, 0x014, 0) // RST|ACK
                } else {
                    let n = self.rng.range(1, 200) as usize;
                    self.tcp(f, dir, 0x018, n)
                }
            }
            Kind::Dns => {
                if s == 0 {
                    let n = self.rng.range(28, 60) as usize;
                    self.udp(f, 0, n)
                } else {
                    let n = self.rng.range(60, 400) as usize;
                    self.udp(f, 1, n)
                }
            }
            Kind::Quic => {
                if r < 150 {
                    let n = self.rng.range(30, 80) as usize;
                    self.udp(f, 0, n)
                } else {
                    let n = self.rng.range(1200, 1350) as usize;
                    self.udp(f, 1, n)
                }
            }
            Kind::Rtp => self.udp(f, (s % 2) as usize, 172),
            Kind::Icmp => {
                let dir = (s % 2) as usize;
                if f.v6 && s == 0 && r < 500 {
                    self.icmp(f, 0, 135, 0, 24) // neighbour solicitation
                } else if f.v6 {
                    self.icmp(f, dir, if dir == 0 { 128 } else { 129 }, 0, 56)
                } else {
                    self.icmp(f, dir, if dir == 0 { 8 } else { 0 }, 0, 56)
                }
            }
            Kind::Arp => self.arp(f, (s % 2) as usize, if s.is_multiple_of(2) { 1 } else { 2 }),
            Kind::FragUdp => self.frag_udp(f),
        }
    }

    fn frag_udp(&mut self, f: &mut Flow) {
        if f.frag_sent >= f.frag_total {
            f.frag_total = 8 + self.rng.range(2000, 8000) as usize;
            f.frag_sent = 0;
            f.frag_id = f.frag_id.wrapping_add(1);
        }
        // Fragment payload per packet: 1480 for IPv4, 1448 for IPv6 (multiples of 8).
        let per = if f.v6 {
            1448 - 8 * f.ext as usize * 2
        } else {
            1480 - if f.v4_opts { 8 } else { 0 }
        };
        let off = f.frag_sent;
        let n = per.min(f.frag_total - off);
        let more = off + n < f.frag_total;
        let proto = 17;
        self.push_l2_l3(f, 0, proto, n, Some((off, more)));
        if off == 0 {
            let b = &mut self.frame;
            b.extend_from_slice(&f.port[0].to_be_bytes());
            b.extend_from_slice(&f.port[1].to_be_bytes());
            b.extend_from_slice(&(f.frag_total as u16).to_be_bytes());
            b.extend_from_slice(&[0, 0]);
            self.push_payload(n - 8);
        } else {
            self.push_payload(n);
        }
        f.frag_sent += n;
    }

    pub fn per_kind(&self) -> Vec<(&'static str, u64)> {
        Kind::ALL
            .iter()
            .zip(self.per_kind.iter())
            .map(|(k, n)| (k.name(), *n))
            .collect()
    }
}

/// Writes a capture of `cfg.size` bytes (uncompressed) to `out`.
pub fn generate(cfg: &GenConfig, out: &mut dyn Write) -> io::Result<GenReport> {
    let snaplen = cfg.snaplen.max(1);
    let mut sink: Box<dyn Write + '_> = match cfg.compression {
        Compression::None => Box::new(BufWriter::with_capacity(1 << 20, out)),
        Compression::Gzip => Box::new(BufWriter::with_capacity(
            1 << 20,
            flate2::write::GzEncoder::new(out, flate2::Compression::default()),
        )),
        Compression::Zstd => Box::new(BufWriter::with_capacity(
            1 << 20,
            zstd::stream::write::Encoder::new(out, 3)?.auto_finish(),
        )),
    };
    let mut w = PcapWriter::new(&mut sink, 1, snaplen, cfg.nsec)?;
    let mut g = Generator::new(cfg.seed, cfg.zero_payload);
    let mut rep = GenReport {
        pcap_bytes: 24,
        ..Default::default()
    };
    while rep.pcap_bytes < cfg.size {
        let (frame, len, ts) = g.next_packet();
        let sec = (ts / 1_000_000_000) as u32;
        let ns = (ts % 1_000_000_000) as u32;
        rep.pcap_bytes += w.write_packet(sec, ns, frame, len)? as u64;
        rep.packets += 1;
    }
    w.get_mut().flush()?;
    drop(sink);
    rep.per_kind = g.per_kind();
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::{extract, ExtractConfig};

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("99999999999G").is_err());
    }

    #[test]
    fn deterministic_and_well_formed() {
        let cfg = GenConfig {
            size: 4 << 20,
            seed: 7,
            ..Default::default()
        };
        let mut a = Vec::new();
        let ra = generate(&cfg, &mut a).unwrap();
        let mut b = Vec::new();
        generate(&cfg, &mut b).unwrap();
        assert!(a == b, "same seed must give the same bytes");
        assert!(ra.pcap_bytes as usize == a.len());
        assert!(ra.per_kind.iter().all(|(_, n)| *n > 0), "{:?}", ra.per_kind);

        // Removed on drop, also when the test fails.
        let tmp = commbench_core::artifact::TempDir::new("pcap").unwrap();
        let dir = tmp.path().to_path_buf();
        let p = dir.join("g.pcap");
        std::fs::write(&p, &a).unwrap();
        let mut out = Vec::new();
        let rep = extract(
            &ExtractConfig {
                inputs: vec![p.display().to_string()],
                ..Default::default()
            },
            &mut out,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(rep.packets, ra.packets);
        assert!(rep.issues.is_empty(), "{:?}", rep.issues);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(",0x8100,") || text.contains(",0x0800,"));
        let qinq = text
            .lines()
            .filter(|l| l.split(',').nth(7).is_some_and(|v| !v.is_empty()))
            .count();
        assert!(qinq > 0, "some QinQ packets");
        drop(tmp);
    }

    #[test]
    fn compressed_output_reads_back() {
        for c in [Compression::Gzip, Compression::Zstd] {
            let cfg = GenConfig {
                size: 256 << 10,
                zero_payload: true,
                compression: c,
                ..Default::default()
            };
            let mut z = Vec::new();
            let r = generate(&cfg, &mut z).unwrap();
            assert!(
                (z.len() as u64) < r.pcap_bytes / 5,
                "{c:?}: {} vs {}",
                z.len(),
                r.pcap_bytes
            );
            let input =
                crate::reader::open_reader("mem", Box::new(std::io::Cursor::new(z)), None).unwrap();
            assert_eq!(input.compression, c);
        }
    }
}
