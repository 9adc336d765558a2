//! The classic pcap format: the global header (µs and ns magic, both byte
//! orders, the modified "Kuznetzov" format with 24-byte record headers),
//! the framer that cuts a pcap stream into whole records, the walk over a
//! chunk's records, and the resynchronisation after a corrupt record.
//!
//! Invariants: a record is framed only when its header and all `caplen`
//! bytes are in the buffer and `caplen` is at most `MAX_RECORD`; a record
//! header that could be a capture file header goes through
//! `concat::file_header_at` first; after an oversized record the framer
//! goes on only where a plausible record is followed by another (or by a
//! capture file header, or the end of the stream), and counts one `Resync`.

use std::sync::Arc;

use super::concat::{file_header_at, maybe_pcap_magic, NextFile};
use super::pcapng::NgSection;
use super::splitter::{Chunk, ChunkFormat, Framing, Packet, Splitter};
use super::{check_lengths, rd32, MAX_RECORD};
use crate::capture::issues::{IssueKind, Issues};

pub(super) const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;
pub(super) const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
pub(super) const PCAP_MAGIC_MODIFIED: u32 = 0xa1b2_cd34;

/// The global header of a pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapHeader {
    pub big_endian: bool,
    pub nsec: bool,
    /// Modified (Kuznetzov) format: 24-byte record headers.
    pub modified: bool,
    pub version: (u16, u16),
    pub snaplen: u32,
    pub linktype: u32,
    /// How the record header's caplen and len fields are ordered (from
    /// the version, as libpcap and Wireshark read them).
    pub lengths: LengthOrder,
}

/// Order of a pcap record header's two length fields. Files written by
/// libpcap before format 2.3 stored caplen and len swapped; libpcap's
/// `sf-pcap.c` and Wireshark's `libpcap.c` swap them back: always for
/// versions 2.0-2.2 and 543.0 (DG/UX tcpdump), and for 2.3 (written by
/// both old and new libpcaps) when the first field is larger than the
/// second (a captured length cannot exceed the wire length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthOrder {
    /// caplen then len (2.4 and later).
    Normal,
    /// len then caplen (2.0-2.2, 543.0).
    Swapped,
    /// Version 2.3: swapped when the first exceeds the second.
    MaybeSwapped,
}

impl LengthOrder {
    /// The order of `version`'s record lengths (libpcap's rule).
    pub fn of(version: (u16, u16)) -> Self {
        match version {
            (2, minor) if minor < 3 => LengthOrder::Swapped,
            (2, 3) => LengthOrder::MaybeSwapped,
            (543, 0) => LengthOrder::Swapped,
            _ => LengthOrder::Normal,
        }
    }

    /// (caplen, len) from the two fields in file order.
    #[inline(always)]
    pub fn apply(self, first: u32, second: u32) -> (u32, u32) {
        match self {
            LengthOrder::Normal => (first, second),
            LengthOrder::Swapped => (second, first),
            LengthOrder::MaybeSwapped if first > second => (second, first),
            LengthOrder::MaybeSwapped => (first, second),
        }
    }
}

impl PcapHeader {
    pub const LEN: usize = 24;

    /// Parses a global header; `None` if the magic is not a pcap magic.
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < Self::LEN {
            return None;
        }
        let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let be = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let (big_endian, magic) = match (le, be) {
            (PCAP_MAGIC_US | PCAP_MAGIC_NS | PCAP_MAGIC_MODIFIED, _) => (false, le),
            (_, PCAP_MAGIC_US | PCAP_MAGIC_NS | PCAP_MAGIC_MODIFIED) => (true, be),
            _ => return None,
        };
        let r16 = |at: usize| {
            let v = [b[at], b[at + 1]];
            if big_endian {
                u16::from_be_bytes(v)
            } else {
                u16::from_le_bytes(v)
            }
        };
        let version = (r16(4), r16(6));
        Some(Self {
            big_endian,
            nsec: magic == PCAP_MAGIC_NS,
            modified: magic == PCAP_MAGIC_MODIFIED,
            version,
            lengths: LengthOrder::of(version),
            snaplen: rd32(b, 16, big_endian),
            linktype: rd32(b, 20, big_endian) & 0xffff,
        })
    }

    /// A version we read: major 2 (any minor, as tshark) or 543.0 (DG/UX
    /// tcpdump, read by libpcap and tshark). libpcap refuses every other
    /// version and tshark refuses major versions below 2.
    pub fn version_supported(&self) -> bool {
        matches!(self.version, (2, _) | (543, 0))
    }

    /// (caplen, len) of the record header at `b[pos..]`.
    #[inline(always)]
    pub(super) fn record_lengths(&self, b: &[u8], pos: usize) -> (u32, u32) {
        self.lengths.apply(
            rd32(b, pos + 8, self.big_endian),
            rd32(b, pos + 12, self.big_endian),
        )
    }

    /// Record header length: 16, or 24 for the modified format.
    pub fn record_header_len(&self) -> usize {
        if self.modified {
            24
        } else {
            16
        }
    }
}

impl Chunk {
    pub(super) fn pcap_records(
        &self,
        b: &[u8],
        h: &PcapHeader,
        issues: &mut Issues,
        f: &mut impl FnMut(&Packet<'_>),
    ) {
        let hl = h.record_header_len();
        let mut pos = self.start;
        let mut number = self.base_record;
        while pos + hl <= b.len() {
            let Some(data_end) =
                pcap_record(b, pos, h, self.file, number, self.base_offset, issues, f)
            else {
                // The splitter never emits such a record; stop defensively.
                break;
            };
            pos = data_end;
            number += 1;
        }
    }
}

/// Visits the pcap record at `b[pos..]` (its header is in `b`): builds
/// the packet, counts snaplen/caplen problems, calls `f`; returns where the
/// record ends, or None if it is not complete in `b` (or oversized).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pcap_record(
    b: &[u8],
    pos: usize,
    h: &PcapHeader,
    file: u32,
    number: u64,
    base_offset: u64,
    issues: &mut Issues,
    f: &mut impl FnMut(&Packet<'_>),
) -> Option<usize> {
    let hl = h.record_header_len();
    let be = h.big_endian;
    let (caplen, len) = h.record_lengths(b, pos);
    let data_end = pos + hl + caplen as usize;
    if caplen > MAX_RECORD || data_end > b.len() {
        return None;
    }
    let (units, mul) = if h.nsec {
        (1_000_000_000u64, 1u64)
    } else {
        (1_000_000, 1000)
    };
    let frac = rd32(b, pos + 4, be) as u64;
    let mut ts_sec = rd32(b, pos, be) as u64;
    // In 64 bits: a µs field times 1000 does not fit in 32 (it wrapped
    // silently for any value >= 4,294,968).
    let mut ts_nsec = frac * mul;
    let offset = base_offset + pos as u64;
    if frac >= units {
        issues.add(IssueKind::BadSubsecond, file, number, offset);
        ts_sec += ts_nsec / 1_000_000_000;
        ts_nsec %= 1_000_000_000;
    }
    let ts_nsec = ts_nsec as u32;
    check_lengths(issues, h.snaplen, caplen, len, file, number, offset);
    f(&Packet {
        number,
        offset,
        ts_sec,
        ts_nsec,
        caplen,
        len,
        linktype: h.linktype,
        has_ts: true,
        data: &b[pos + hl..data_end],
    });
    Some(data_end)
}

/// What `frame_pcap` does with each record it frames: nothing (the chunk
/// walks them later), or visit it at once (`Splitter::next_chunk_visiting`).
pub(super) trait RecordVisitor {
    const VISITS: bool;
    fn record(&mut self, b: &[u8], pos: usize, h: &PcapHeader, file: u32, number: u64, base: u64);
}

pub(super) struct NoVisit;

impl RecordVisitor for NoVisit {
    const VISITS: bool = false;
    #[inline(always)]
    fn record(&mut self, _: &[u8], _: usize, _: &PcapHeader, _: u32, _: u64, _: u64) {}
}

pub(super) struct Visit<'a, F> {
    pub(super) issues: &'a mut Issues,
    pub(super) f: F,
}

impl<F: FnMut(&Packet<'_>)> RecordVisitor for Visit<'_, F> {
    const VISITS: bool = true;
    #[inline(always)]
    fn record(&mut self, b: &[u8], pos: usize, h: &PcapHeader, file: u32, number: u64, base: u64) {
        pcap_record(b, pos, h, file, number, base, self.issues, &mut self.f);
    }
}

impl Splitter {
    /// Returns (start, end, tail_from, format) for a pcap buffer.
    pub(super) fn frame_pcap<V: RecordVisitor>(
        &mut self,
        b: &[u8],
        base: u64,
        issues: &mut Issues,
        visit: &mut V,
    ) -> (usize, usize, usize, ChunkFormat) {
        let Framing::Pcap {
            header,
            resync,
            last_ts,
        } = &mut self.framing
        else {
            unreachable!("frame_pcap on pcapng")
        };
        let h = *header;
        let hl = h.record_header_len();
        let be = h.big_endian;
        let mut start = 0;
        if *resync {
            match find_resync(b, &h, *last_ts, self.eof) {
                Resync::Found(o) => {
                    issues.add(IssueKind::Resync, self.file, self.next_record, base);
                    *resync = false;
                    start = o;
                }
                Resync::NeedMore(o) => return (o, o, o, ChunkFormat::Pcap(h)),
                Resync::Nothing => {
                    issues.add(IssueKind::Resync, self.file, self.next_record, base);
                    self.done = true;
                    return (0, 0, b.len(), ChunkFormat::Pcap(h));
                }
            }
        }
        let mut pos = start;
        while pos + hl <= b.len() {
            let ts = rd32(b, pos, be);
            let caplen = h.record_lengths(b, pos).0;
            if caplen > MAX_RECORD || maybe_pcap_magic(ts) {
                match file_header_at(&b[pos..], self.eof) {
                    Some(NextFile::NeedMore) => break,
                    Some(next) => {
                        // A concatenated capture: this chunk ends before its
                        // header, the next is framed with the new format.
                        let skip = match next {
                            NextFile::Pcap(header) => {
                                self.framing = Framing::Pcap {
                                    header,
                                    resync: false,
                                    last_ts: None,
                                };
                                PcapHeader::LEN
                            }
                            _ => {
                                self.framing = Framing::Pcapng(Arc::new(NgSection::default()));
                                0
                            }
                        };
                        return (start, pos, pos + skip, ChunkFormat::Pcap(h));
                    }
                    None => {}
                }
            }
            if caplen > MAX_RECORD {
                issues.add(
                    IssueKind::RecordTooLong,
                    self.file,
                    self.next_record,
                    base + pos as u64,
                );
                self.next_record += 1;
                *resync = true;
                // Cut here; the next call searches from just after `pos`.
                let end = pos;
                return (start, end, pos + 1, ChunkFormat::Pcap(h));
            }
            let next = pos + hl + caplen as usize;
            if next > b.len() {
                break;
            }
            visit.record(b, pos, &h, self.file, self.next_record, base);
            *last_ts = Some(ts);
            pos = next;
            self.next_record += 1;
        }
        if self.eof && pos < b.len() {
            issues.add(
                IssueKind::TruncatedRecord,
                self.file,
                self.next_record,
                base + pos as u64,
            );
            self.done = true;
        }
        (start, pos, pos, ChunkFormat::Pcap(h))
    }
}

enum Resync {
    Found(usize),
    NeedMore(usize),
    Nothing,
}

fn plausible(b: &[u8], at: usize, h: &PcapHeader, last_ts: Option<u32>) -> Option<usize> {
    let be = h.big_endian;
    let ts = rd32(b, at, be);
    let frac = rd32(b, at + 4, be);
    let (caplen, len) = h.record_lengths(b, at);
    let limit = if h.snaplen == 0 {
        MAX_RECORD
    } else {
        h.snaplen.min(MAX_RECORD)
    };
    let frac_ok = frac < if h.nsec { 1_000_000_000 } else { 1_000_000 };
    let ts_ok = last_ts.is_none_or(|l| ts.abs_diff(l) <= 86_400);
    if caplen <= limit && caplen <= len && len <= 1 << 24 && frac_ok && ts_ok {
        Some(at + h.record_header_len() + caplen as usize)
    } else {
        None
    }
}

/// Looks for a record header that is plausible and followed by another
/// plausible one (or by the end of the stream).
fn find_resync(b: &[u8], h: &PcapHeader, last_ts: Option<u32>, eof: bool) -> Resync {
    let hl = h.record_header_len();
    let mut o = 0;
    while o + hl <= b.len() {
        // A concatenated capture's header ends the search too.
        match file_header_at(&b[o..], eof) {
            Some(NextFile::NeedMore) => return Resync::NeedMore(o),
            Some(_) => return Resync::Found(o),
            None => {}
        }
        if let Some(next) = plausible(b, o, h, last_ts) {
            if next + hl <= b.len() {
                if plausible(b, next, h, last_ts).is_some() {
                    return Resync::Found(o);
                }
            } else if next == b.len() && eof {
                return Resync::Found(o);
            } else if !eof {
                return Resync::NeedMore(o);
            }
        }
        o += 1;
    }
    if eof {
        Resync::Nothing
    } else {
        Resync::NeedMore(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::reader::testutil::{collect, pkt};
    use crate::capture::reader::Compression;
    use crate::capture::writer::PcapBuilder;
    use crate::capture::CaptureError;

    #[test]
    fn pcap_variants() {
        for (be, nsec, modified) in [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (true, true, false),
            (false, false, true),
            (true, false, true),
        ] {
            let mut b = PcapBuilder::new(be, nsec, modified, 65535, 1);
            b.record(100, 999_999, &pkt(1, 60));
            b.record(101, 5, &pkt(2, 1514));
            b.record_raw(102, 7, 20, 1000, &pkt(3, 20));
            let (recs, issues, comp) = collect(b.bytes.clone()).unwrap();
            assert_eq!(comp, Compression::None);
            assert!(issues.is_empty(), "{be} {nsec} {modified}: {issues:?}");
            assert_eq!(recs.len(), 3);
            let mul = if nsec { 1 } else { 1000 };
            assert_eq!(recs[0].ts, (100, 999_999 * mul));
            assert_eq!(recs[1].ts, (101, 5 * mul));
            assert_eq!(recs[1].data, pkt(2, 1514));
            assert_eq!((recs[2].caplen, recs[2].len, recs[2].number), (20, 1000, 3));
            assert_eq!(recs[2].linktype, 1);
        }
    }

    #[test]
    fn microsecond_timestamps_of_a_second_or_more_do_not_wrap_and_are_counted() {
        // ts_usec 4,294,968 * 1000 overflows 32 bits (tcpdump's
        // rx_serviceid_oobr.pcap frame 2 came out as 2.216213376 s).
        for nsec in [false, true] {
            let mut b = PcapBuilder::new(false, nsec, false, 65535, 1);
            let (big, units) = if nsec {
                (4_000_000_007u32, 1_000_000_000u64)
            } else {
                (4_294_968u32, 1_000_000u64)
            };
            b.record(10, big, &pkt(1, 60));
            b.record(11, 5, &pkt(2, 60));
            let (recs, issues, _) = collect(b.bytes.clone()).unwrap();
            assert_eq!(recs.len(), 2);
            let ns = big as u64 * (1_000_000_000 / units);
            assert_eq!(
                recs[0].ts,
                (10 + ns / 1_000_000_000, (ns % 1_000_000_000) as u32),
                "nsec={nsec}"
            );
            assert_eq!(issues.count(IssueKind::BadSubsecond), 1, "nsec={nsec}");
            assert_eq!(recs[1].ts.0, 11);
        }
    }

    #[test]
    fn pcap_header_parse() {
        let h = PcapHeader::parse(&crate::capture::writer::pcap_global_header(
            true, true, false, 128, 113,
        ))
        .unwrap();
        assert!(h.big_endian && h.nsec && !h.modified);
        assert_eq!((h.snaplen, h.linktype, h.version), (128, 113, (2, 4)));
        assert!(PcapHeader::parse(&[0u8; 24]).is_none());
        assert!(PcapHeader::parse(&[0xd4, 0xc3, 0xb2]).is_none());
    }

    #[test]
    fn truncated_last_record_is_counted() {
        let mut b = PcapBuilder::new(false, false, false, 65535, 1);
        b.record(1, 0, &pkt(1, 100)).record(2, 0, &pkt(2, 100));
        let full = b.bytes.len();
        let bytes = b.bytes[..full - 30].to_vec();
        let (recs, issues, _) = collect(bytes).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(issues.count(IssueKind::TruncatedRecord), 1);
        let at = issues.first()[0];
        assert_eq!((at.record, at.offset), (2, 24 + 16 + 100));
    }

    #[test]
    fn oversized_record_resyncs() {
        let mut b = PcapBuilder::new(false, false, false, 65535, 1);
        b.record(1000, 0, &pkt(1, 100));
        b.record_raw(1000, 0, 0x7fff_ffff, 100, &pkt(9, 100)); // corrupt header
        b.record(1001, 0, &pkt(2, 200))
            .record(1002, 0, &pkt(3, 300));
        let (recs, issues, _) = collect(b.bytes).unwrap();
        assert_eq!(issues.count(IssueKind::RecordTooLong), 1);
        assert_eq!(issues.count(IssueKind::Resync), 1);
        let lens: Vec<u32> = recs.iter().map(|r| r.caplen).collect();
        assert_eq!(lens, vec![100, 200, 300]);
    }

    #[test]
    fn caplen_over_snaplen_and_len() {
        let mut b = PcapBuilder::new(false, false, false, 64, 1);
        b.record_raw(1, 0, 100, 90, &pkt(1, 100));
        let (recs, issues, _) = collect(b.bytes).unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(issues.count(IssueKind::CaplenOverSnaplen), 1);
        assert_eq!(issues.count(IssueKind::CaplenOverLen), 1);
    }

    #[test]
    fn files_older_than_2_3_have_caplen_and_len_swapped_back() {
        // nDPI's fuzz-2021-10-13.pcap: a 2.2 file stores len before caplen;
        // read as caplen, the first record's len swallowed the next records
        // (lost, exit 0). libpcap and Wireshark swap them back.
        for be in [false, true] {
            let mut b = PcapBuilder::new(be, false, false, 65535, 1);
            b.version(2, 2);
            // Fields in file order: len (wire) first, then caplen.
            b.record_raw(1, 0, 1000, 60, &pkt(1, 60));
            b.record_raw(2, 0, 60, 60, &pkt(2, 60));
            b.record_raw(3, 0, 1514, 100, &pkt(3, 100));
            let (recs, issues, _) = collect(b.bytes.clone()).unwrap();
            assert!(issues.is_empty(), "be={be}: {issues:?}");
            let lens: Vec<_> = recs.iter().map(|r| (r.caplen, r.len)).collect();
            assert_eq!(lens, [(60, 1000), (60, 60), (100, 1514)], "be={be}");
            assert_eq!(recs[2].data, pkt(3, 100));
        }
        // 543.0 (DG/UX tcpdump) is always swapped too.
        let mut b = PcapBuilder::new(false, false, false, 65535, 1);
        b.version(543, 0).record_raw(1, 0, 90, 40, &pkt(1, 40));
        let (recs, _, _) = collect(b.bytes).unwrap();
        assert_eq!((recs[0].caplen, recs[0].len), (40, 90));
    }

    #[test]
    fn version_2_3_swaps_only_when_caplen_exceeds_len() {
        let mut b = PcapBuilder::new(false, true, false, 65535, 1);
        b.version(2, 3);
        b.record_raw(1, 0, 1000, 60, &pkt(1, 60)); // swapped by its writer
        b.record_raw(2, 0, 80, 1500, &pkt(2, 80)); // already in order
        let (recs, issues, _) = collect(b.bytes).unwrap();
        assert!(issues.is_empty(), "{issues:?}");
        let lens: Vec<_> = recs.iter().map(|r| (r.caplen, r.len)).collect();
        assert_eq!(lens, [(60, 1000), (80, 1500)]);
        // 2.4 never swaps: a caplen above len is bad input, counted.
        let mut b = PcapBuilder::new(false, false, false, 65535, 1);
        b.record_raw(1, 0, 60, 40, &pkt(1, 60));
        let (recs, issues, _) = collect(b.bytes).unwrap();
        assert_eq!((recs[0].caplen, recs[0].len), (60, 40));
        assert_eq!(issues.count(IssueKind::CaplenOverLen), 1);
        assert_eq!(LengthOrder::of((2, 4)), LengthOrder::Normal);
        assert_eq!(LengthOrder::of((2, 0)), LengthOrder::Swapped);
    }

    #[test]
    fn unknown_pcap_versions_are_refused() {
        // libpcap's pcap-invalid-version-1.pcap was read with exit 0;
        // tshark: "pcap: major version 1 unsupported".
        for (major, minor) in [(1, 0), (0, 0), (3, 0), (0xffff, 4), (543, 1)] {
            let mut b = PcapBuilder::new(false, false, false, 65535, 1);
            b.version(major, minor).record(1, 0, &pkt(1, 60));
            match collect(b.bytes) {
                Err(CaptureError::UnsupportedVersion {
                    format,
                    major: m,
                    minor: n,
                    ..
                }) => assert_eq!((format, m, n), ("pcap", major, minor)),
                other => panic!("{major}.{minor}: {:?}", other.map(|r| r.0.len())),
            }
        }
        for (major, minor) in [(2, 0), (2, 1), (2, 2), (2, 3), (2, 4), (2, 5), (543, 0)] {
            let mut b = PcapBuilder::new(true, false, false, 65535, 1);
            b.version(major, minor).record(1, 0, &pkt(1, 60));
            assert_eq!(collect(b.bytes).unwrap().0.len(), 1, "{major}.{minor}");
        }
    }
}
