//! The pcapng format: sections (either byte order), interface descriptions
//! (link type, snaplen, `if_tsresol`, `if_tsoffset`), EPB, SPB and the
//! obsolete PB; custom blocks numbered as tshark numbers them; unknown
//! blocks skipped. Holds the block framer, the walk over a chunk's blocks
//! and the forward scan for the next plausible block after a bad one.
//!
//! Invariants: a block is buffered only up to `MAX_BUFFERED_BLOCK`
//! (larger ones are skipped by streaming, never allocated); a new section
//! or a new interface after packets starts a new chunk, so every chunk has
//! one `NgSection`; at most `MAX_INTERFACES` interfaces are kept per
//! section; the resynchronising scan probes each offset in O(1) and
//! reports exactly the bytes it abandoned.

use std::sync::Arc;

use super::concat::{file_header_at, maybe_pcap_magic, NextFile};
use super::pcap::PcapHeader;
use super::splitter::{Chunk, ChunkFormat, Framing, Packet, Splitter};
use super::{check_lengths, rd16, rd32, CHUNK_CAPACITY, MAX_RECORD};
use crate::capture::issues::{IssueKind, Issues};

/// Interfaces kept per pcapng section.
pub const MAX_INTERFACES: usize = 4096;
/// Largest pcapng block carried between buffers; larger ones are skipped.
const MAX_BUFFERED_BLOCK: usize = 288 << 10;

pub(super) const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
pub(super) const PCAPNG_BOM: u32 = 0x1a2b_3c4d;
const BT_IDB: u32 = 1;
const BT_PB: u32 = 2;
const BT_SPB: u32 = 3;
const BT_NRB: u32 = 4;
const BT_ISB: u32 = 5;
const BT_EPB: u32 = 6;
const BT_DSB: u32 = 10;
const BT_CUSTOM: u32 = 0x0000_0bad;
const BT_CUSTOM_NOCOPY: u32 = 0x4000_0bad;
/// Largest pcapng block taken as real when it is too large to buffer (it
/// is then skipped by streaming): far above any block a capture tool
/// writes, whose snaplens stop at 256 KiB.
const MAX_BLOCK: usize = 16 << 20;

/// One pcapng interface description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NgInterface {
    pub linktype: u32,
    pub snaplen: u32,
    /// Raw `if_tsresol` byte (default 6: microseconds).
    pub tsresol: u8,
    /// `if_tsoffset` in seconds.
    pub tsoffset: i64,
}

impl NgInterface {
    /// Converts a raw 64-bit timestamp to seconds and nanoseconds.
    #[inline]
    pub fn timestamp(&self, ticks: u64) -> (u64, u32) {
        let (sec, nsec) = if self.tsresol == 6 {
            (ticks / 1_000_000, (ticks % 1_000_000) as u32 * 1000)
        } else if self.tsresol == 9 {
            (ticks / 1_000_000_000, (ticks % 1_000_000_000) as u32)
        } else if self.tsresol & 0x80 == 0 {
            let units = 10u128.pow(self.tsresol.min(38) as u32);
            let t = ticks as u128;
            let frac = t % units;
            let nsec = if self.tsresol <= 9 {
                frac * 10u128.pow(9 - self.tsresol as u32)
            } else {
                frac / 10u128.pow(self.tsresol.min(38) as u32 - 9)
            };
            ((t / units) as u64, nsec as u32)
        } else {
            let k = (self.tsresol & 0x7f) as u32;
            if k >= 64 {
                (0, ((ticks as u128 * 1_000_000_000) >> k.min(127)) as u32)
            } else {
                let frac = ticks & ((1u64 << k) - 1);
                (ticks >> k, ((frac as u128 * 1_000_000_000) >> k) as u32)
            }
        };
        (sec.wrapping_add(self.tsoffset as u64), nsec)
    }
}

/// State of one pcapng section, shared by the chunks that use it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NgSection {
    pub big_endian: bool,
    pub interfaces: Vec<NgInterface>,
}

impl Chunk {
    pub(super) fn pcapng_records(
        &self,
        b: &[u8],
        s: &NgSection,
        issues: &mut Issues,
        f: &mut impl FnMut(&Packet<'_>),
    ) {
        let be = s.big_endian;
        let mut pos = self.start;
        let mut number = self.base_record;
        while pos + 12 <= b.len() {
            let bt = rd32(b, pos, be);
            let blen = rd32(b, pos + 4, be) as usize;
            if blen < 12 || pos + blen > b.len() {
                break;
            }
            let blk = &b[pos..pos + blen];
            let offset = self.base_offset + pos as u64;
            pos += blen;
            let (iface, ts, caplen, len, data_at) = match bt {
                BT_EPB | BT_PB => {
                    if blen < 32 {
                        issues.add(IssueKind::BadBlockLength, self.file, number, offset);
                        number += 1;
                        continue;
                    }
                    let iface = if bt == BT_EPB {
                        rd32(blk, 8, be)
                    } else {
                        rd16(blk, 8, be) as u32
                    };
                    let ts = ((rd32(blk, 12, be) as u64) << 32) | rd32(blk, 16, be) as u64;
                    (iface, Some(ts), rd32(blk, 20, be), rd32(blk, 24, be), 28)
                }
                BT_SPB => {
                    if blen < 16 {
                        issues.add(IssueKind::BadBlockLength, self.file, number, offset);
                        number += 1;
                        continue;
                    }
                    let len = rd32(blk, 8, be);
                    let mut caplen = len.min((blen - 16) as u32);
                    if let Some(i) = s.interfaces.first() {
                        if i.snaplen != 0 {
                            caplen = caplen.min(i.snaplen);
                        }
                    }
                    (0, None, caplen, len, 12)
                }
                // tshark numbers custom blocks as frames (with no packet
                // fields): so do we, to keep `number` equal to its
                // frame.number; they are not packets.
                BT_CUSTOM | BT_CUSTOM_NOCOPY => {
                    number += 1;
                    continue;
                }
                _ => continue,
            };
            let Some(ifc) = s.interfaces.get(iface as usize) else {
                issues.add(IssueKind::UnknownInterface, self.file, number, offset);
                number += 1;
                continue;
            };
            if caplen > MAX_RECORD {
                issues.add(IssueKind::RecordTooLong, self.file, number, offset);
                number += 1;
                continue;
            }
            if data_at + caplen as usize + 4 > blen {
                issues.add(IssueKind::BadBlockLength, self.file, number, offset);
                number += 1;
                continue;
            }
            check_lengths(issues, ifc.snaplen, caplen, len, self.file, number, offset);
            let (ts_sec, ts_nsec) = match ts {
                Some(t) => ifc.timestamp(t),
                None => (0, 0),
            };
            f(&Packet {
                number,
                offset,
                ts_sec,
                ts_nsec,
                caplen,
                len,
                linktype: ifc.linktype,
                has_ts: ts.is_some(),
                data: &blk[data_at..data_at + caplen as usize],
            });
            number += 1;
        }
    }
}

impl Splitter {
    /// Returns (start, end, tail_from, format) for a pcapng buffer.
    ///
    /// A block whose length cannot be right (too small, unaligned, an SHB
    /// or IDB too large to buffer, past the end of the stream, a trailing
    /// copy that differs) is counted as `bad_block_length` and ends the
    /// chunk; the next calls scan forward byte by byte for the next
    /// plausible block (`find_ng_block`) and report the bytes abandoned.
    /// Each offset is probed once in O(1) (twice for the one a buffer
    /// boundary cuts), so the scan is linear in the bytes skipped.
    pub(super) fn frame_pcapng(
        &mut self,
        b: &[u8],
        base: u64,
        issues: &mut Issues,
    ) -> (usize, usize, usize, ChunkFormat) {
        let Framing::Pcapng(section) = &mut self.framing else {
            unreachable!("frame_pcapng on pcap")
        };
        let mut start = 0;
        if let Some(from) = self.ng_resync {
            match find_ng_block(b, 0, section.big_endian, self.eof) {
                NgResync::Found(o) => {
                    issues.add_skipped(self.file, from, base + o as u64);
                    self.ng_resync = None;
                    start = o;
                }
                NgResync::NeedMore(o) => return (o, o, o, ChunkFormat::Pcapng(section.clone())),
                NgResync::Nothing => {
                    issues.add_skipped(self.file, from, base + b.len() as u64);
                    self.ng_resync = None;
                    self.done = true;
                    let n = b.len();
                    return (n, n, n, ChunkFormat::Pcapng(section.clone()));
                }
            }
        }
        let mut pos = start;
        let mut packets = 0u64;
        let mut tail_from = None;
        let mut cut = false;
        // A concatenated pcap file's header at `pos`.
        let mut next_pcap = None;
        // A block at `pos` whose length is impossible, and for an SHB the
        // byte order its magic gives (if any).
        let mut bad: Option<Option<bool>> = None;
        while pos + 12 <= b.len() {
            let mut be = section.big_endian;
            let raw_type = u32::from_be_bytes([b[pos], b[pos + 1], b[pos + 2], b[pos + 3]]);
            let is_shb = raw_type == PCAPNG_SHB;
            if is_shb {
                if pos > start {
                    // A new section always starts a new chunk.
                    cut = true;
                    break;
                }
                be = match rd32(&b[pos + 8..pos + 12], 0, false) {
                    v if v == PCAPNG_BOM => false,
                    v if v.swap_bytes() == PCAPNG_BOM => true,
                    _ => {
                        bad = Some(None);
                        break;
                    }
                };
            }
            let bt = if is_shb { PCAPNG_SHB } else { rd32(b, pos, be) };
            let blen = rd32(b, pos + 4, be) as usize;
            let shb_be = is_shb.then_some(be);
            let is_packet = matches!(bt, BT_EPB | BT_SPB | BT_PB);
            if !is_shb && !is_packet && bt != BT_IDB && maybe_pcap_magic(bt) {
                match file_header_at(&b[pos..], self.eof) {
                    Some(NextFile::NeedMore) => break,
                    Some(NextFile::Pcap(h)) => {
                        next_pcap = Some(h);
                        cut = true;
                        break;
                    }
                    _ => {}
                }
            }
            if blen < 12 || !blen.is_multiple_of(4) || (is_shb && blen < 28) {
                bad = Some(shb_be);
                break;
            }
            if blen > MAX_BUFFERED_BLOCK {
                // An EPB or PB this large holds a packet above MAX_RECORD
                // (else its options would fill over 32 KiB: its length is
                // wrong); the caplen is at offset 20.
                if matches!(bt, BT_EPB | BT_PB) && pos + 24 > b.len() && !self.eof {
                    break;
                }
                let small_packet = matches!(bt, BT_EPB | BT_PB)
                    && pos + 24 <= b.len()
                    && rd32(b, pos + 20, be) <= MAX_RECORD;
                let past_end = self
                    .stream_len
                    .is_some_and(|n| base + (pos + blen) as u64 > n);
                if is_shb || bt == BT_IDB || small_packet || past_end || blen > MAX_BLOCK {
                    bad = Some(shb_be);
                    break;
                }
                if is_packet {
                    issues.add(
                        IssueKind::RecordTooLong,
                        self.file,
                        self.next_record,
                        base + pos as u64,
                    );
                    self.next_record += 1;
                } else if matches!(bt, BT_CUSTOM | BT_CUSTOM_NOCOPY) {
                    self.next_record += 1;
                    self.custom_frames += 1;
                }
                // Skip the block by streaming; it never enters a buffer.
                cut = true;
                let have = b.len() - pos;
                if blen <= have {
                    tail_from = Some(pos + blen);
                } else {
                    self.skip = (blen - have) as u64;
                    tail_from = Some(b.len());
                }
                break;
            }
            if pos + blen > b.len() {
                // At the end of the stream: a length that runs past it is
                // wrong if a plausible block follows (else the capture was
                // cut short: truncated_record below).
                if self.eof && matches!(find_ng_block(b, pos + 1, be, true), NgResync::Found(_)) {
                    bad = Some(shb_be);
                }
                break;
            }
            if rd32(b, pos + blen - 4, be) as usize != blen {
                bad = Some(shb_be);
                break;
            }
            if is_shb {
                *section = Arc::new(NgSection {
                    big_endian: be,
                    interfaces: Vec::new(),
                });
            } else if bt == BT_IDB {
                if packets > 0 {
                    cut = true; // interfaces change: new chunk
                    break;
                }
                // Bounded: a section with absurdly many interfaces cannot
                // grow memory (or the copy-on-write cost) without limit;
                // packets naming the ignored ones count as unknown_interface.
                if blen >= 20 && section.interfaces.len() < MAX_INTERFACES {
                    Arc::make_mut(section)
                        .interfaces
                        .push(parse_idb(&b[pos..pos + blen], be));
                }
            } else if is_packet {
                packets += 1;
                self.next_record += 1;
            } else if matches!(bt, BT_CUSTOM | BT_CUSTOM_NOCOPY) {
                // Numbered like a frame, as tshark does (see pcapng_records).
                self.next_record += 1;
                self.custom_frames += 1;
            }
            pos += blen;
        }
        let format = ChunkFormat::Pcapng(section.clone());
        if let Some(shb_be) = bad {
            issues.add(
                IssueKind::BadBlockLength,
                self.file,
                self.next_record,
                base + pos as u64,
            );
            self.ng_resync = Some(base + pos as u64);
            if raw_type_at(b, pos) == PCAPNG_SHB {
                // The section it began is gone: its IDBs, found by the
                // scan, describe a new interface list.
                *section = Arc::new(NgSection {
                    big_endian: shb_be.unwrap_or(section.big_endian),
                    interfaces: Vec::new(),
                });
            }
            // The scan starts one byte further on.
            return (start, pos, pos + 1, format);
        }
        let end = pos;
        let tail_from = tail_from.unwrap_or(pos);
        if self.eof && !cut && tail_from < b.len() {
            issues.add(
                IssueKind::TruncatedRecord,
                self.file,
                self.next_record,
                base + tail_from as u64,
            );
            self.done = true;
        }
        if let Some(header) = next_pcap {
            self.framing = Framing::Pcap {
                header,
                resync: false,
                last_ts: None,
            };
            return (start, end, end + PcapHeader::LEN, format);
        }
        (start, end, tail_from, format)
    }
}

fn raw_type_at(b: &[u8], pos: usize) -> u32 {
    u32::from_be_bytes([b[pos], b[pos + 1], b[pos + 2], b[pos + 3]])
}

/// Smallest length of a block of a type the resynchronising scan accepts:
/// the block types of the pcapng specification (IDB, PB, SPB, NRB, ISB,
/// EPB, DSB, custom copiable and not), `None` for any other.
fn min_block_len(bt: u32) -> Option<usize> {
    match bt {
        BT_IDB => Some(20),
        BT_PB | BT_EPB => Some(32),
        BT_SPB => Some(16),
        BT_NRB | BT_ISB | BT_DSB => Some(12),
        BT_CUSTOM | BT_CUSTOM_NOCOPY => Some(16),
        _ => None,
    }
}

/// Whether a block header of a known type with a possible length starts at
/// `b[0..]` (at least 8 bytes).
fn ng_header_ok(b: &[u8], be: bool) -> bool {
    let blen = rd32(b, 4, be) as usize;
    min_block_len(rd32(b, 0, be)).is_some_and(|m| blen >= m && blen.is_multiple_of(4))
}

enum Probe {
    Yes,
    No,
    NeedMore,
}

/// Whether a plausible pcapng block starts at `b[o..]`, for the scan after
/// a bad block: an SHB with a byte-order magic, a block of a known type, or
/// a pcap file header (a concatenated capture); a length that is a multiple
/// of 4, at least the type's minimum, at most `MAX_BUFFERED_BLOCK` and
/// within the bytes; a trailing length copy equal to it; and after it the
/// end of the stream or the header of another such block. O(1).
fn ng_block_at(b: &[u8], o: usize, be: bool, eof: bool) -> Probe {
    let more = if eof { Probe::No } else { Probe::NeedMore };
    let rest = &b[o..];
    if rest.len() < 12 {
        return more;
    }
    let (blen, be) = match file_header_at(rest, eof) {
        Some(NextFile::NeedMore) => return Probe::NeedMore,
        Some(NextFile::Pcap(_)) => return Probe::Yes,
        Some(NextFile::Pcapng) => {
            let be = u32::from_le_bytes([rest[8], rest[9], rest[10], rest[11]]) != PCAPNG_BOM;
            (rd32(rest, 4, be) as usize, be)
        }
        None if ng_header_ok(rest, be) => (rd32(rest, 4, be) as usize, be),
        None => return Probe::No,
    };
    if blen > MAX_BUFFERED_BLOCK {
        return Probe::No;
    }
    if rest.len() < blen {
        return more;
    }
    if rd32(rest, blen - 4, be) as usize != blen {
        return Probe::No;
    }
    let next = &rest[blen..];
    if next.len() < 12 {
        // The end of the stream (or a cut block, reported as truncated).
        return if eof { Probe::Yes } else { Probe::NeedMore };
    }
    match file_header_at(next, eof) {
        Some(NextFile::NeedMore) => Probe::NeedMore,
        Some(_) => Probe::Yes,
        None if ng_header_ok(next, be) => Probe::Yes,
        None => Probe::No,
    }
}

enum NgResync {
    /// A plausible block starts at this offset.
    Found(usize),
    /// Nothing before this offset; it needs more bytes to decide.
    NeedMore(usize),
    /// Nothing up to the end of the stream.
    Nothing,
}

/// Scans `b[from..]` for the first plausible pcapng block (`ng_block_at`).
/// A probe never needs more than `MAX_BUFFERED_BLOCK` + 36 bytes, less
/// than a chunk, so a scan that starts a buffer always decides its first
/// offset.
fn find_ng_block(b: &[u8], from: usize, be: bool, eof: bool) -> NgResync {
    for o in from..b.len() {
        match ng_block_at(b, o, be, eof) {
            Probe::Yes => return NgResync::Found(o),
            Probe::NeedMore => return NgResync::NeedMore(o),
            Probe::No => {}
        }
    }
    if eof {
        NgResync::Nothing
    } else {
        NgResync::NeedMore(b.len())
    }
}

const _: () = assert!(MAX_BUFFERED_BLOCK + 64 < CHUNK_CAPACITY);

fn parse_idb(blk: &[u8], be: bool) -> NgInterface {
    let mut i = NgInterface {
        linktype: rd16(blk, 8, be) as u32,
        snaplen: rd32(blk, 12, be),
        tsresol: 6,
        tsoffset: 0,
    };
    let end = blk.len() - 4;
    let mut p = 16;
    while p + 4 <= end {
        let code = rd16(blk, p, be);
        let len = rd16(blk, p + 2, be) as usize;
        let v = p + 4;
        if code == 0 || v + len > end {
            break;
        }
        match (code, len) {
            (9, 1) => i.tsresol = blk[v],
            (14, 8) => {
                let hi = rd32(blk, v, be) as u64;
                let lo = rd32(blk, v + 4, be) as u64;
                i.tsoffset = if be { (hi << 32) | lo } else { (lo << 32) | hi } as i64;
            }
            _ => {}
        }
        p = v + len.div_ceil(4) * 4;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::reader::testutil::{collect, gz, ng_image, ng_many, pkt, set32};
    use crate::capture::reader::Compression;
    use crate::capture::writer::PcapngBuilder;

    #[test]
    fn pcapng_sections_interfaces_and_blocks() {
        let (recs, issues, _) = collect(ng_image()).unwrap();
        assert!(issues.is_empty(), "{issues:?}");
        type Row = (u64, (u64, u32), u32, u32, u32);
        let got: Vec<Row> = recs
            .iter()
            .map(|r| (r.number, r.ts, r.caplen, r.len, r.linktype))
            .collect();
        // The custom block before the first EPB is frame 1, as in tshark.
        assert_eq!(
            got,
            vec![
                (2, (1_700_000_000, 123_456_000), 60, 60, 1),
                (3, (1_700_000_000, 123_456_789), 128, 1500, 101),
                (4, (0, 0), 70, 70, 1),
                (5, (1, 1000), 42, 42, 1),
                (6, (105, 500_000_000), 33, 33, 113),
                (7, (0, 7000), 44, 44, 1),
            ]
        );
        assert_eq!(recs[3].data, pkt(4, 42));
    }

    #[test]
    fn pcapng_unknown_interface_and_bad_length() {
        let mut b = PcapngBuilder::new();
        b.shb(false)
            .idb(1, 0, None, None)
            .epb(3, 0, &pkt(1, 10), 10)
            .epb(0, 0, &pkt(2, 10), 10);
        let (recs, issues, _) = collect(b.bytes.clone()).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(issues.count(IssueKind::UnknownInterface), 1);

        let mut bad = b.bytes.clone();
        let n = bad.len();
        bad[n - 4] ^= 0x40; // trailing length differs
        let (recs, issues, _) = collect(bad).unwrap();
        assert_eq!(recs.len(), 0);
        assert_eq!(issues.count(IssueKind::BadBlockLength), 1);

        let cut = b.bytes[..b.bytes.len() - 8].to_vec();
        let (recs, issues, _) = collect(cut).unwrap();
        assert_eq!(recs.len(), 0);
        assert_eq!(issues.count(IssueKind::TruncatedRecord), 1);
    }

    #[test]
    fn pcapng_interfaces_are_bounded() {
        let mut b = PcapngBuilder::new();
        b.shb(false);
        for _ in 0..MAX_INTERFACES + 10 {
            b.idb(1, 0, None, None);
        }
        b.epb(0, 0, &pkt(1, 10), 10)
            .epb((MAX_INTERFACES + 5) as u32, 0, &pkt(2, 10), 10);
        let (recs, issues, _) = collect(b.bytes).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(issues.count(IssueKind::UnknownInterface), 1);
    }

    #[test]
    fn pcapng_huge_block_is_skipped_without_buffering() {
        let mut b = PcapngBuilder::new();
        b.shb(false).idb(1, 0, None, None);
        b.block(0x0000_0bad, &vec![0u8; 3 << 20]);
        b.epb(0, 0, &pkt(1, 10), 10);
        let (recs, issues, _) = collect(b.bytes).unwrap();
        assert!(issues.is_empty());
        assert_eq!(recs.len(), 1);
        // Skipped by streaming, the custom block is still frame 1.
        assert_eq!(recs[0].number, 2);
    }

    #[test]
    fn pcapng_bad_block_length_skips_to_the_next_block() {
        // Regression (issue 13, item 4): one corrupted block length in the
        // middle of a pcapng ended extraction there. Every EPB after it is
        // extracted; exactly the bad block's bytes are reported skipped.
        let n = 1500;
        let (good, at) = ng_many(n);
        assert!(good.len() > 2 * CHUNK_CAPACITY);
        // A block just before a read-buffer boundary, so the scan spans two.
        let near_boundary = at.iter().position(|&o| o + 600 > CHUNK_CAPACITY).unwrap();
        for k in [1, 100, near_boundary, n - 2, n - 1] {
            let blen = (at.get(k + 1).copied().unwrap_or(good.len()) - at[k]) as u32;
            for (what, lead, trail) in [
                ("longer, aligned", blen + 8, blen),
                ("unaligned", 0x13, blen),
                ("below the minimum", 8, blen),
                ("huge", 0x7fff_fff0, blen),
                ("large, buffered", 0x0003_0000, blen),
                ("trailing copy differs", blen, blen ^ 0x40),
            ] {
                let mut bad = good.clone();
                set32(&mut bad, at[k] + 4, lead);
                set32(&mut bad, at[k] + blen as usize - 4, trail);
                let (recs, issues, _) = collect(bad).unwrap();
                let ctx = format!("block {k}, {what}");
                assert_eq!(recs.len(), n - 1, "{ctx}: {issues:?}");
                assert_eq!(issues.total(), 1, "{ctx}: {issues:?}");
                if k == n - 1 && issues.count(IssueKind::TruncatedRecord) == 1 {
                    // The last block running past the end with nothing
                    // after it is a capture cut short.
                    assert!(issues.skipped().is_empty(), "{ctx}");
                    continue;
                }
                assert_eq!(issues.count(IssueKind::BadBlockLength), 1, "{ctx}");
                let from = at[k] as u64;
                let to = from + blen as u64;
                assert_eq!(
                    issues.skipped(),
                    [crate::capture::issues::Skipped { file: 0, from, to }],
                    "{ctx}"
                );
                assert_eq!(issues.skipped_bytes(), blen as u64, "{ctx}");
                // The skipped block gets no number; the rest are all there.
                for (j, r) in recs.iter().enumerate() {
                    let i = if j < k { j } else { j + 1 };
                    assert_eq!(r.number, j as u64 + 1, "{ctx}");
                    assert_eq!(r.data, pkt(i, 40 + (i * 37) % 900), "{ctx}");
                }
            }
        }
        // Several bad blocks, read from a gzip stream (unknown length).
        let mut bad = good.clone();
        for k in [10, 700, 1400] {
            set32(&mut bad, at[k] + 4, 0x7fff_fff0);
        }
        let (recs, issues, comp) = collect(gz(&bad)).unwrap();
        assert_eq!(comp, Compression::Gzip);
        assert_eq!(recs.len(), n - 3);
        assert_eq!(issues.count(IssueKind::BadBlockLength), 3);
        assert_eq!(issues.skipped_ranges(), 3);
        let froms: Vec<u64> = issues.skipped().iter().map(|s| s.from).collect();
        assert_eq!(froms, [at[10] as u64, at[700] as u64, at[1400] as u64]);
    }

    #[test]
    fn pcapng_junk_after_a_bad_block_is_skipped_to_the_next_block() {
        // 3 MiB of bytes that are no block (repeated EPB headers whose
        // trailing copy never matches) between two good parts: the scan
        // goes through them once and resumes at the next block.
        let (good, at) = ng_many(20);
        let mut junk = Vec::new();
        while junk.len() < 3 << 20 {
            junk.extend_from_slice(&6u32.to_le_bytes());
            junk.extend_from_slice(&64u32.to_le_bytes());
            junk.extend_from_slice(&[0x55; 56]);
        }
        let mut bytes = good[..at[10]].to_vec();
        bytes.extend_from_slice(&junk);
        bytes.extend_from_slice(&good[at[10]..]);
        let (recs, issues, _) = collect(bytes.clone()).unwrap();
        assert_eq!(recs.len(), 20, "{issues:?}");
        assert_eq!(issues.count(IssueKind::BadBlockLength), 1);
        assert_eq!(
            issues.skipped(),
            [crate::capture::issues::Skipped {
                file: 0,
                from: at[10] as u64,
                to: (at[10] + junk.len()) as u64
            }]
        );
        let zs = zstd::stream::encode_all(&bytes[..], 1).unwrap();
        let (recs, issues2, _) = collect(zs).unwrap();
        assert_eq!(recs.len(), 20);
        assert_eq!(issues2, issues);
        // Junk up to the end of the stream is skipped to the end.
        let mut tail = good[..at[10]].to_vec();
        tail.extend_from_slice(&junk);
        let (recs, issues, _) = collect(tail.clone()).unwrap();
        assert_eq!(recs.len(), 10);
        assert_eq!(issues.skipped_bytes(), junk.len() as u64);
        assert_eq!(issues.count(IssueKind::TruncatedRecord), 0);
    }

    #[test]
    fn pcapng_cut_short_is_still_truncated_not_skipped() {
        // A capture cut in the middle of its last block: nothing plausible
        // follows, so it is truncated_record (no bytes reported skipped).
        let (good, at) = ng_many(30);
        for cut in [at[29] + 10, good.len() - 4] {
            let (recs, issues, _) = collect(good[..cut].to_vec()).unwrap();
            assert_eq!(recs.len(), 29);
            assert_eq!(issues.count(IssueKind::TruncatedRecord), 1, "{issues:?}");
            assert_eq!(issues.count(IssueKind::BadBlockLength), 0);
            assert!(issues.skipped().is_empty());
        }
    }

    #[test]
    fn tsresol_conversions() {
        let i = |r| NgInterface {
            linktype: 1,
            snaplen: 0,
            tsresol: r,
            tsoffset: 0,
        };
        assert_eq!(i(3).timestamp(1_500), (1, 500_000_000));
        assert_eq!(i(12).timestamp(2_000_000_123_000), (2, 123));
        assert_eq!(i(0x80 | 20).timestamp(3 << 20), (3, 0));
        assert_eq!(i(0x80).timestamp(9), (9, 0));
        assert_eq!(i(0xff).timestamp(u64::MAX), (0, 0));
        assert_eq!(i(200).timestamp(u64::MAX).0, 0);
    }

    #[test]
    fn unknown_pcapng_versions_are_refused() {
        // libpcap's pcapng-invalid-vers-1.pcapng was read with exit 0;
        // tshark: "pcapng: unknown SHB version 2.0" (1.1 too).
        for be in [false, true] {
            for (major, minor) in [(2, 0), (0, 1), (1, 1), (1, 3), (0xffff, 0)] {
                let mut b = PcapngBuilder::new();
                b.shb_version(be, major, minor)
                    .idb(1, 65535, None, None)
                    .epb(0, 1, &pkt(1, 60), 60);
                match collect(b.bytes) {
                    Err(crate::capture::CaptureError::UnsupportedVersion {
                        format,
                        major: m,
                        minor: n,
                        ..
                    }) => assert_eq!((format, m, n), ("pcapng", major, minor)),
                    other => panic!("{major}.{minor}: {:?}", other.map(|r| r.0.len())),
                }
            }
            for (major, minor) in [(1, 0), (1, 2)] {
                let mut b = PcapngBuilder::new();
                b.shb_version(be, major, minor)
                    .idb(1, 65535, None, None)
                    .epb(0, 1, &pkt(1, 60), 60);
                assert_eq!(collect(b.bytes).unwrap().0.len(), 1, "{major}.{minor}");
            }
        }
    }
}
