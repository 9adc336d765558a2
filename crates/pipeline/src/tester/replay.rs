//! Replayed traffic: the frames of a capture (pcap or pcapng, plain, gzip
//! or zstd, read with core's capture reader) made ready to offer through
//! the device in place of the synthetic frames, in the capture's order or
//! shuffled into its mix (`--traffic-mix`, reproducible with the seed),
//! looped for as many frames as a trial offers.
//!
//! What the device sees is the capture's frame but for two things:
//! - the MACs, rewritten to the tester's own (the veth path needs them,
//!   the synthetic frames carry the same), VLAN tags and every L3/L4 byte
//!   left as captured;
//! - the tester's stamp, carried as a trailer of [`stamp::TRAILER_LEN`]
//!   bytes right past the IP datagram (its IPv4 total length or IPv6
//!   payload length), where no IP stack reads: whatever Ethernet padding
//!   the capture had is left out, and checksums still hold. A frame that
//!   is not IP carries it at its end.
//!
//! Frames the topology cannot carry are counted by reason and left out,
//! never silently: a link type that is not Ethernet, a frame over the MTU
//! (1,500 B of payload, the stamp's bytes on top are the tester's room), a
//! record captured short of its length (snaplen) or shorter than an
//! Ethernet header, and frames past the [`MAX_FRAMES`] / [`MAX_BYTES`]
//! held in memory.
//!
//! A device that trims frames to their IP length (a router) removes the
//! trailer: [`Traffic::set_identity_table`] then sends the frames as
//! captured but for their MACs, and the sink tells them by their own
//! bytes ([`super::identity`]).
//!
//! Each frame has a class, carried in its trailer so the sink needs no
//! parse: its size bucket (RFC 2819's, on the frame's captured length with
//! FCS) and its protocol; loss and latency are counted per class. Each
//! frame also has a stream: the tester's flow id, one per flow (VLAN,
//! addresses, protocol, ports) up to [`MAX_FLOWS`] flows and a hash of the
//! flow beyond, so a flow's frames stay one sequence and reordering within
//! it is told.

use super::identity::IdIndex;
use super::pace::Sizes;
use super::stamp::{self, TRAILER_LEN};
use super::MAX_FLOWS;
use crate::wire::{ETH_HDR, FCS};
use bytes::FrameBytes;
use commbench_core::capture::issues::Issues;
use commbench_core::capture::reader::{self, Splitter};
use commbench_core::capture::CaptureError;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Payload bytes the path carries per frame, as an Ethernet link's MTU;
/// the tester's veths carry [`stamp::TRAILER_LEN`] bytes more for the stamp.
pub const MTU: usize = 1500;
/// The MTU the tester sets on its own veths when it replays: room for a
/// full-size frame and its trailer.
pub const PATH_MTU: usize = MTU + 32;
/// Most frames held in memory; the rest of a longer capture is counted
/// and left out.
pub const MAX_FRAMES: usize = 2_000_000;
/// Most bytes of frames held in memory.
pub const MAX_BYTES: usize = 256 << 20;
/// The MACs of the tester's frames (the synthetic frames' too).
pub const SRC_MAC: [u8; 6] = [0x02, 0xcb, 0, 0, 0, 1];
pub const DST_MAC: [u8; 6] = [0x02, 0xcb, 0, 0, 0, 2];

/// RFC 2819's frame-size buckets (etherStatsPkts64Octets …), by the
/// frame's length with FCS; the last one holds what a VLAN tag lengthens.
pub const SIZE_BUCKETS: [(&str, u32); 7] = [
    ("64", 64),
    ("65-127", 127),
    ("128-255", 255),
    ("256-511", 511),
    ("512-1023", 1023),
    ("1024-1518", 1518),
    (">1518", u32::MAX),
];

/// Protocol classes: what a forwarder, a firewall or an RSS spread tells
/// apart. A non-first fragment has no L4 header and is its own class.
pub const PROTOCOLS: [&str; 10] = [
    "tcp",
    "udp",
    "icmp",
    "icmpv6",
    "ipv4 fragment",
    "ipv6 fragment",
    "ipv4 other",
    "ipv6 other",
    "arp",
    "other",
];

/// How the capture's frames are offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Order {
    /// In the capture's order, looped.
    Capture,
    /// Shuffled once with the seed (its size and flow mix, not its
    /// order), looped.
    Mix { seed: u64 },
}

/// Why a frame was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Refusal {
    /// Its interface's link type is not Ethernet (1).
    LinkType(u32),
    /// Its payload is over the MTU.
    OverMtu,
    /// Captured short of its length (the capture's snaplen), or of its IP
    /// datagram's length.
    Truncated,
    /// Shorter than an Ethernet header.
    Runt,
    /// Past the frames or bytes held in memory.
    PastLimit,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::LinkType(l) => write!(f, "link type {l} is not Ethernet"),
            Refusal::OverMtu => write!(f, "over the {MTU} B MTU"),
            Refusal::Truncated => write!(f, "captured short of their length"),
            Refusal::Runt => write!(f, "shorter than an Ethernet header"),
            Refusal::PastLimit => write!(
                f,
                "past the first {MAX_FRAMES} frames or {} MiB held",
                MAX_BYTES >> 20
            ),
        }
    }
}

/// One kept frame: where its bytes are, its stream and its class.
#[derive(Debug, Clone, Copy)]
struct Frame {
    off: u32,
    /// Bytes up to the end of its datagram (the trailer goes here).
    len: u16,
    stream: u8,
    class: u8,
}

/// A class byte: the size bucket in the high nibble, the protocol in
/// the low one.
pub fn class_byte(bucket: usize, proto: usize) -> u8 {
    ((bucket as u8) << 4) | (proto as u8 & 0x0f)
}

/// The name of a class byte's size bucket and protocol.
pub fn class_names(class: u8) -> (&'static str, &'static str) {
    let b = SIZE_BUCKETS
        .get(usize::from(class >> 4))
        .map_or("?", |b| b.0);
    let p = PROTOCOLS
        .get(usize::from(class & 0x0f))
        .copied()
        .unwrap_or("?");
    (b, p)
}

/// The size bucket of a frame of `size` bytes with FCS.
pub fn size_bucket(size: u32) -> usize {
    SIZE_BUCKETS
        .iter()
        .position(|b| size <= b.1)
        .unwrap_or(SIZE_BUCKETS.len() - 1)
}

/// The capture's mix: what the traffic was, so two results say what they
/// were measured with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mix {
    /// Frames kept (offered in a loop).
    pub frames: u64,
    /// Their bytes with FCS, as captured (without the stamp).
    pub bytes: u64,
    pub size_min: u32,
    pub size_median: u32,
    pub size_max: u32,
    pub size_mean: f64,
    /// The IMIX-like summary: the most common sizes with their shares of
    /// frames (`64 B 58%, 1518 B 33%, 590 B 7%`), at most four.
    pub imix: String,
    /// Frames per size bucket ([`SIZE_BUCKETS`]' names).
    pub size_buckets: Vec<(String, u64)>,
    /// Distinct flows (VLAN, addresses, protocol, ports).
    pub flows: u64,
    /// The busiest flow's share of frames, %: the flow skew.
    pub top_flow_pct: f64,
    /// Frames per protocol ([`PROTOCOLS`]' names).
    pub protocols: Vec<(String, u64)>,
    /// Frames with at least one VLAN tag, and the distinct outer VLAN ids.
    pub vlan_frames: u64,
    pub vlans: u64,
    pub ipv6_frames: u64,
    /// IP fragments (first ones too).
    pub fragments: u64,
}

impl Mix {
    /// The mix in one line, for the answer and the table.
    pub fn line(&self) -> String {
        let top = |v: &[(String, u64)], n: usize| {
            let mut v: Vec<&(String, u64)> = v.iter().filter(|x| x.1 > 0).collect();
            v.sort_by_key(|x| std::cmp::Reverse(x.1));
            v.iter()
                .take(n)
                .map(|(k, c)| format!("{k} {:.0}%", 100.0 * *c as f64 / self.frames.max(1) as f64))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{} frames, {}/{}/{} B (min/median/max, mean {:.0} B; {}), {} flows (top {:.1}%), {}{}{}",
            self.frames,
            self.size_min,
            self.size_median,
            self.size_max,
            self.size_mean,
            self.imix,
            self.flows,
            self.top_flow_pct,
            top(&self.protocols, 4),
            if self.vlan_frames > 0 {
                format!(", {} VLAN-tagged on {} VLANs", self.vlan_frames, self.vlans)
            } else {
                String::new()
            },
            if self.fragments > 0 {
                format!(", {} fragments", self.fragments)
            } else {
                String::new()
            },
        )
    }
}

/// How the sink tells a replayed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stamping {
    /// The tester's stamp rides in a trailer past the IP datagram.
    Trailer,
    /// Nothing is added: the frame's L3/L4 bytes are its identity
    /// ([`super::identity`]).
    IdentityTable,
}

impl Stamping {
    /// The stamp's place, as the records name it.
    pub const fn describe(self) -> &'static str {
        match self {
            Stamping::Trailer => "trailer past the IP datagram",
            Stamping::IdentityTable => {
                "identity table of the L3/L4 bytes (less ToS, TTL and checksum)"
            }
        }
    }
}

/// A capture ready to replay.
pub struct Traffic {
    /// The file's name as given.
    pub path: String,
    pub order: Order,
    data: FrameBytes,
    frames: Vec<Frame>,
    /// Indices into `frames` in the order offered (one loop).
    offer: Vec<u32>,
    /// Streams (the tester's flow ids) the frames are spread over.
    pub streams: u16,
    pub mix: Mix,
    /// Frames left out, by reason, in the order of [`Refusal`].
    pub refused: Vec<(Refusal, u64)>,
    /// What the reader found wrong in the file (records it skipped).
    pub bad_records: u64,
    /// The identity table's index, when the frames carry no stamp.
    id_index: Option<IdIndex>,
}

impl fmt::Debug for Traffic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Traffic")
            .field("path", &self.path)
            .field("order", &self.order)
            .field("frames", &self.frames.len())
            .field("streams", &self.streams)
            .field("refused", &self.refused)
            .field("stamping", &self.stamping())
            .finish()
    }
}

/// Why a capture cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum TrafficError {
    #[error("--traffic {0}")]
    Read(#[from] CaptureError),
    #[error("--traffic {path}: no frame to replay ({why}); give a capture of Ethernet frames of at most {MTU} B of payload")]
    Empty { path: String, why: String },
}

/// What one frame is, read from its bytes.
struct Parsed {
    /// Where the L3 header starts (past the VLAN tags).
    l3: usize,
    /// End of the datagram (or of the frame, not IP).
    end: usize,
    proto: usize,
    vlan: Option<u16>,
    ipv6: bool,
    fragment: bool,
    flow: u64,
}

/// Reads the headers the mix and the class need; `data` is at least an
/// Ethernet header. None: the IP header says more bytes than were captured.
fn parse(data: &[u8]) -> Option<Parsed> {
    let mut h = DefaultHasher::new();
    let mut at = 12;
    let mut ethertype = u16::from_be_bytes([data[12], data[13]]);
    let mut vlan = None;
    for _ in 0..4 {
        if !matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) || data.len() < at + 8 {
            break;
        }
        let tci = u16::from_be_bytes([data[at + 2], data[at + 3]]) & 0x0fff;
        vlan.get_or_insert(tci);
        tci.hash(&mut h);
        at += 4;
        ethertype = u16::from_be_bytes([data[at], data[at + 1]]);
    }
    ethertype.hash(&mut h);
    let l3 = at + 2;
    let ports = |l4: usize, h: &mut DefaultHasher| {
        if let Some(p) = data.get(l4..l4 + 4) {
            p.hash(h);
        }
    };
    let mut p = Parsed {
        l3,
        end: data.len(),
        proto: 9,
        vlan,
        ipv6: false,
        fragment: false,
        flow: 0,
    };
    match ethertype {
        0x0800 if data.len() >= l3 + 20 => {
            let ihl = usize::from(data[l3] & 0x0f) * 4;
            let tl = usize::from(u16::from_be_bytes([data[l3 + 2], data[l3 + 3]]));
            if tl < 20 || l3 + tl > data.len() {
                return None;
            }
            p.end = l3 + tl;
            let frag = u16::from_be_bytes([data[l3 + 6], data[l3 + 7]]);
            let (more, offset) = (frag & 0x2000 != 0, frag & 0x1fff);
            p.fragment = more || offset != 0;
            let proto = data[l3 + 9];
            data[l3 + 12..l3 + 20].hash(&mut h);
            proto.hash(&mut h);
            p.proto = if offset != 0 {
                4
            } else {
                match proto {
                    6 | 17 => {
                        ports(l3 + ihl, &mut h);
                        if proto == 6 {
                            0
                        } else {
                            1
                        }
                    }
                    1 => 2,
                    _ => 6,
                }
            };
        }
        0x86dd if data.len() >= l3 + 40 => {
            p.ipv6 = true;
            let pl = usize::from(u16::from_be_bytes([data[l3 + 4], data[l3 + 5]]));
            if pl > 0 {
                if l3 + 40 + pl > data.len() {
                    return None;
                }
                p.end = l3 + 40 + pl;
            }
            data[l3 + 8..l3 + 40].hash(&mut h);
            // Walk the extension headers a forwarder walks (hop-by-hop,
            // routing, destination options, fragment), at most four.
            let (mut nh, mut off) = (data[l3 + 6], l3 + 40);
            let mut later_fragment = false;
            for _ in 0..4 {
                match nh {
                    0 | 43 | 60 if data.len() >= off + 8 => {
                        nh = data[off];
                        off += (usize::from(data[off + 1]) + 1) * 8;
                    }
                    44 if data.len() >= off + 8 => {
                        p.fragment = true;
                        let fo = u16::from_be_bytes([data[off + 2], data[off + 3]]) >> 3;
                        later_fragment = fo != 0;
                        nh = data[off];
                        off += 8;
                    }
                    _ => break,
                }
            }
            nh.hash(&mut h);
            p.proto = if later_fragment {
                5
            } else {
                match nh {
                    6 | 17 => {
                        ports(off, &mut h);
                        if nh == 6 {
                            0
                        } else {
                            1
                        }
                    }
                    58 => 3,
                    _ => 7,
                }
            };
        }
        0x0806 => p.proto = 8,
        _ => {}
    }
    p.flow = h.finish();
    Some(p)
}

/// A small seeded generator for the mix's shuffle (splitmix64).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Traffic {
    /// Reads the capture at `path` and makes its frames ready to offer.
    pub fn load(path: &str, order: Order) -> Result<Traffic, TrafficError> {
        let input = reader::open(path)?;
        Self::from_input(path, input, order)
    }

    /// [`Self::load`] from bytes already in memory (tests, stdin).
    pub fn from_bytes(name: &str, bytes: Vec<u8>, order: Order) -> Result<Traffic, TrafficError> {
        let input = reader::open_reader(name, Box::new(std::io::Cursor::new(bytes)), None)?;
        Self::from_input(name, input, order)
    }

    fn from_input(path: &str, input: reader::Input, order: Order) -> Result<Traffic, TrafficError> {
        let mut sp = Splitter::new(input, 0)?;
        let mut issues = Issues::default();
        let mut refused: HashMap<Refusal, u64> = HashMap::new();
        let mut data: Vec<u8> = Vec::new();
        let mut kept: Vec<(Frame, u64)> = Vec::new();
        let mut sizes: Vec<u32> = Vec::new();
        let mut flows: HashMap<u64, u64> = HashMap::new();
        let mut vlans: HashMap<u16, ()> = HashMap::new();
        let mut buckets = [0u64; SIZE_BUCKETS.len()];
        let mut protos = [0u64; PROTOCOLS.len()];
        let (mut vlan_frames, mut ipv6_frames, mut fragments) = (0u64, 0u64, 0u64);
        let mut buf = Vec::new();
        while let Some(c) = sp.next_chunk(std::mem::take(&mut buf))? {
            c.for_each_packet(&mut issues, |p| {
                let mut refuse = |r| *refused.entry(r).or_insert(0) += 1;
                if p.linktype != 1 {
                    return refuse(Refusal::LinkType(p.linktype));
                }
                if p.data.len() < ETH_HDR {
                    return refuse(Refusal::Runt);
                }
                if p.caplen < p.len {
                    return refuse(Refusal::Truncated);
                }
                let Some(f) = parse(p.data) else {
                    return refuse(Refusal::Truncated);
                };
                if f.end - f.l3 > MTU {
                    return refuse(Refusal::OverMtu);
                }
                if kept.len() >= MAX_FRAMES || data.len() + f.end > MAX_BYTES {
                    return refuse(Refusal::PastLimit);
                }
                let size = (f.end + FCS).max(64) as u32;
                let bucket = size_bucket(size);
                let off = data.len() as u32;
                data.extend_from_slice(&p.data[..f.end]);
                let o = off as usize;
                data[o..o + 6].copy_from_slice(&DST_MAC);
                data[o + 6..o + 12].copy_from_slice(&SRC_MAC);
                kept.push((
                    Frame {
                        off,
                        len: f.end as u16,
                        stream: 0,
                        class: class_byte(bucket, f.proto),
                    },
                    f.flow,
                ));
                sizes.push(size);
                *flows.entry(f.flow).or_insert(0) += 1;
                if let Some(v) = f.vlan {
                    vlan_frames += 1;
                    vlans.insert(v, ());
                }
                buckets[bucket] += 1;
                protos[f.proto] += 1;
                ipv6_frames += u64::from(f.ipv6);
                fragments += u64::from(f.fragment);
            });
            buf = c.buf;
        }
        let mut refused: Vec<(Refusal, u64)> = refused.into_iter().collect();
        refused.sort();
        if kept.is_empty() {
            let why = if refused.is_empty() {
                "the capture has no frames".to_owned()
            } else {
                refused
                    .iter()
                    .map(|(r, n)| format!("{n} {r}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(TrafficError::Empty {
                path: path.to_owned(),
                why,
            });
        }
        // Streams: one per flow, in the order flows first appear, when
        // they fit in MAX_FLOWS (no two flows share a sequence, so only a
        // flow's own frames can be reordered); past that, a hash spread.
        let streams = (flows.len() as u64).clamp(1, u64::from(MAX_FLOWS)) as u16;
        let mut first: HashMap<u64, u8> = HashMap::new();
        let frames: Vec<Frame> = kept
            .into_iter()
            .map(|(mut f, flow)| {
                f.stream = if flows.len() <= usize::from(MAX_FLOWS) {
                    let next = first.len() as u8;
                    *first.entry(flow).or_insert(next)
                } else {
                    (flow % u64::from(streams)) as u8
                };
                f
            })
            .collect();
        let mut offer: Vec<u32> = (0..frames.len() as u32).collect();
        if let Order::Mix { seed } = order {
            let mut st = seed;
            for i in (1..offer.len()).rev() {
                let j = (splitmix(&mut st) % (i as u64 + 1)) as usize;
                offer.swap(i, j);
            }
        }
        let mix = mix_of(
            &sizes,
            &flows,
            buckets,
            protos,
            (vlan_frames, vlans.len() as u64, ipv6_frames, fragments),
        );
        Ok(Traffic {
            path: path.to_owned(),
            order,
            data: FrameBytes::new(data),
            frames,
            offer,
            streams,
            mix,
            refused,
            bad_records: issues.total(),
            id_index: None,
        })
    }

    /// Sends the frames without a stamp and tells them at the sink by
    /// their bytes ([`super::identity`]): for a device that trims what
    /// lies past the IP datagram.
    pub fn set_identity_table(&mut self) {
        let idx = IdIndex::build(self.offer.len(), self.streams, |p| {
            let (b, s, _) = self.frame(p as u64);
            (b, s)
        });
        self.id_index = Some(idx);
    }

    /// How the sink tells the frames.
    pub fn stamping(&self) -> Stamping {
        match self.id_index {
            Some(_) => Stamping::IdentityTable,
            None => Stamping::Trailer,
        }
    }

    /// The identity table's index (None: the frames carry a trailer).
    pub fn id_index(&self) -> Option<&IdIndex> {
        self.id_index.as_ref()
    }

    /// The capture's file name, without its folders.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// Frames in one loop of the offer.
    pub fn len(&self) -> usize {
        self.offer.len()
    }

    /// Never: a Traffic holds at least one frame.
    pub fn is_empty(&self) -> bool {
        self.offer.is_empty()
    }

    /// The `i`-th frame offered (looped): its bytes up to the trailer,
    /// its stream and its class.
    #[inline]
    pub fn frame(&self, i: u64) -> (&[u8], u8, u8) {
        let f = self.frames[self.offer[(i % self.offer.len() as u64) as usize] as usize];
        let o = f.off as usize;
        (&self.data[o..o + usize::from(f.len)], f.stream, f.class)
    }

    /// Writes the `i`-th frame offered into `buf` with its trailer (flow
    /// id `flow_base + stream`, sequence `seq(stream)`); returns its
    /// length and where its trailer starts.
    #[inline]
    pub fn stage(&self, i: u64, buf: &mut [u8], flow_base: u16, seq: &mut [u64]) -> (usize, usize) {
        let (b, s, class) = self.frame(i);
        buf[..b.len()].copy_from_slice(b);
        let s = usize::from(s);
        stamp::write_trailer(buf, b.len(), flow_base + s as u16, seq[s], class);
        seq[s] += 1;
        (b.len() + TRAILER_LEN, b.len())
    }

    /// Counts the `i`-th frame offered, sent as captured (but for its
    /// MACs) with no stamp, in `seq` of its stream; returns its length.
    #[inline]
    pub fn count_bare(&self, i: u64, seq: &mut [u64]) -> usize {
        let (b, s, _) = self.frame(i);
        seq[usize::from(s)] += 1;
        b.len()
    }

    /// Frames per stream and per class among the first `n` offered.
    pub fn plan(&self, n: u64) -> (Vec<u64>, [u64; 256]) {
        let mut streams = vec![0u64; usize::from(self.streams)];
        let mut classes = [0u64; 256];
        let len = self.offer.len() as u64;
        let (loops, rest) = (n / len, n % len);
        for (k, &i) in self.offer.iter().enumerate() {
            let f = self.frames[i as usize];
            let c = loops + u64::from((k as u64) < rest);
            streams[usize::from(f.stream)] += c;
            classes[usize::from(f.class)] += c;
        }
        (streams, classes)
    }

    /// The frames left out, in one line ("12 frames left out: 10 over the
    /// 1500 B MTU, 2 link type 113 is not Ethernet"); None when none were.
    pub fn refused_line(&self) -> Option<String> {
        let n: u64 = self.refused.iter().map(|r| r.1).sum();
        (n > 0).then(|| {
            format!(
                "{n} frames of {} left out: {}",
                self.path,
                self.refused
                    .iter()
                    .map(|(r, c)| format!("{c} {r}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }

    /// Frames left out, all reasons.
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().map(|r| r.1).sum()
    }

    /// The capture's sizes for synthetic frames (`--sizes-from`): one
    /// size per frame in the offer's order (the capture's, or its
    /// shuffle), with FCS as the mix counts them, so a synthetic trial
    /// offers exactly the capture's size mix in the same sequence. A
    /// synthetic frame is untagged IPv4/UDP of at most
    /// [`crate::SIZE_RANGE`]'s 1518 B: a larger frame (a VLAN-tagged
    /// full-size one is 1522 B) is offered at 1518 B, and the second
    /// value says how many were.
    pub fn sizes(&self) -> (Sizes, u64) {
        let (lo, hi) = (*crate::SIZE_RANGE.start(), *crate::SIZE_RANGE.end());
        let mut cut = 0u64;
        let pattern = self
            .offer
            .iter()
            .map(|&i| {
                let s = (usize::from(self.frames[i as usize].len) + FCS) as u32;
                cut += u64::from(s > hi);
                s.clamp(lo, hi)
            })
            .collect();
        let name = match self.order {
            Order::Capture => format!("sizes of {}", self.name()),
            Order::Mix { seed } => format!("sizes of {}, shuffled (seed {seed})", self.name()),
        };
        (Sizes { name, pattern }, cut)
    }
}

fn mix_of(
    sizes: &[u32],
    flows: &HashMap<u64, u64>,
    buckets: [u64; SIZE_BUCKETS.len()],
    protos: [u64; PROTOCOLS.len()],
    (vlan_frames, vlans, ipv6_frames, fragments): (u64, u64, u64, u64),
) -> Mix {
    let n = sizes.len() as u64;
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    let mut counts: HashMap<u32, u64> = HashMap::new();
    for &s in sizes {
        *counts.entry(s).or_insert(0) += 1;
    }
    let mut common: Vec<(u32, u64)> = counts.into_iter().collect();
    common.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let imix = common
        .iter()
        .take(4)
        .map(|(s, c)| format!("{s} B {:.0}%", 100.0 * *c as f64 / n as f64))
        .collect::<Vec<_>>()
        .join(", ");
    let bytes: u64 = sizes.iter().map(|&s| u64::from(s)).sum();
    Mix {
        frames: n,
        bytes,
        size_min: sorted[0],
        size_median: sorted[sorted.len() / 2],
        size_max: sorted[sorted.len() - 1],
        size_mean: bytes as f64 / n as f64,
        imix,
        size_buckets: SIZE_BUCKETS
            .iter()
            .zip(buckets)
            .map(|(b, c)| (b.0.to_owned(), c))
            .collect(),
        flows: flows.len() as u64,
        top_flow_pct: 100.0 * flows.values().copied().max().unwrap_or(0) as f64 / n as f64,
        protocols: PROTOCOLS
            .iter()
            .zip(protos)
            .map(|(p, c)| ((*p).to_owned(), c))
            .collect(),
        vlan_frames,
        vlans,
        ipv6_frames,
        fragments,
    }
}

mod bytes;
#[cfg(test)]
pub(super) mod tests;
