//! Concatenated captures (`cat a.pcap b.pcapng | …`): recognising, at a
//! record boundary, the pcap global header or pcapng section header block
//! of the next capture, so that the framer switches format, link type,
//! byte order and time resolution there and record numbers go on.
//!
//! Invariant: a real record (or pcapng block) is never taken for a header;
//! `file_header_at` says why. The check costs the record loops one shift
//! and one mask per record (`maybe_pcap_magic`).

use super::pcap::{PcapHeader, PCAP_MAGIC_MODIFIED, PCAP_MAGIC_NS, PCAP_MAGIC_US};
use super::pcapng::{PCAPNG_BOM, PCAPNG_SHB};
use super::rd32;

/// Largest snaplen accepted in a pcap header found inside a stream (64 MiB;
/// libpcap never writes more than 256 KiB).
const MAX_CONCAT_SNAPLEN: u32 = 64 << 20;

/// A capture file header found at a record boundary (a concatenated file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NextFile {
    Pcap(PcapHeader),
    /// A pcapng section header block; it stays in the stream for the
    /// pcapng framer.
    Pcapng,
    /// Could be a header, but fewer bytes than a header are buffered.
    NeedMore,
}

/// Whether `ts`, the first word of a pcap record header in the file's own
/// byte order, could be a pcap magic in either byte order: every pcap magic
/// is 0xa1b2xxxx. One shift and one mask, so the record loop pays nothing
/// measurable for it.
#[inline(always)]
pub(super) fn maybe_pcap_magic(ts: u32) -> bool {
    ts >> 16 == 0xa1b2 || ts & 0xffff == 0xb2a1
}

fn is_pcap_magic(m: u32) -> bool {
    matches!(m, PCAP_MAGIC_US | PCAP_MAGIC_NS | PCAP_MAGIC_MODIFIED)
}

/// Recognises the header of a concatenated capture at `b[0..]`, a record
/// boundary: a pcap global header (any magic, either byte order) or a pcapng
/// SHB. `None`: not a header, frame it as a record (or block).
///
/// Why a real record is never taken for a header:
/// - pcap header: the magic must match *and* the version must be 2.4, the
///   snaplen at most 64 MiB and the link type field a plausible LINKTYPE
///   (reserved bits 16–25 clear, type below 1024). Read as a record header
///   of the current file, a magic is its `ts_sec`: 0xa1b2xxxx is December
///   2055, the byte-swapped µs magic 0xd4c3b2a1 is 2083; only the swapped
///   ns and modified magics (0x4d3cb2a1, 2011-01-23 22:58:41 UTC, and
///   0x34cdb2a1, 1998-01-27 10:10:41 UTC) are past dates. The version words
///   are then its fraction: 262146 or 131076 (same byte order) or
///   67109376 / 33555456 (swapped, only valid in a nanosecond file). So a
///   real record must carry exactly one of those past seconds with exactly
///   that nanosecond, and the next record's timestamp must read as a valid
///   snaplen and link type. A record in a future second (2055, 2083) is not
///   a capture.
/// - pcapng SHB: 0x0a0d0d0a then the byte-order magic 0x1a2b3c4d (either
///   order) in bytes 8..12. In a pcap record that word is the caplen, and
///   0x1a2b3c4d / 0x4d3c2b1a are far above `MAX_RECORD`: no valid record
///   has it, so this check runs only where the record would be rejected.
/// - inside pcapng, a pcap magic as a block type is a reserved "local use"
///   type; with version 2.4 its length would be 0x00040002 (not a multiple
///   of 4, invalid) or 0x00020004 (a 128 KiB local block whose body starts
///   with a plausible snaplen and link type): checked only for block types
///   the reader does not know.
pub(super) fn file_header_at(b: &[u8], eof: bool) -> Option<NextFile> {
    let need =
        |n: usize| (b.len() < n).then_some(if eof { None } else { Some(NextFile::NeedMore) });
    if let Some(r) = need(4) {
        return r;
    }
    let m = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if m == PCAPNG_SHB {
        if let Some(r) = need(12) {
            return r;
        }
        let be = match u32::from_le_bytes([b[8], b[9], b[10], b[11]]) {
            PCAPNG_BOM => false,
            v if v.swap_bytes() == PCAPNG_BOM => true,
            _ => return None,
        };
        let blen = rd32(b, 4, be);
        return (blen >= 28 && blen.is_multiple_of(4)).then_some(NextFile::Pcapng);
    }
    if !is_pcap_magic(m) && !is_pcap_magic(m.swap_bytes()) {
        return None;
    }
    if let Some(r) = need(PcapHeader::LEN) {
        return r;
    }
    let h = PcapHeader::parse(b)?;
    let lt = rd32(b, 20, h.big_endian);
    let plausible = h.version == (2, 4)
        && h.snaplen <= MAX_CONCAT_SNAPLEN
        && lt & 0x03ff_0000 == 0
        && lt & 0xffff < 1024;
    plausible.then_some(NextFile::Pcap(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::issues::IssueKind;
    use crate::capture::reader::testutil::{
        collect, gz, ng_image, pkt, rows, set32, two_pcaps, Rec, Row,
    };
    use crate::capture::reader::CHUNK_CAPACITY;
    use crate::capture::writer::{PcapBuilder, PcapngBuilder};

    #[test]
    fn concatenated_pcaps_continue_with_the_new_header() {
        // `cat a.pcap b.pcap`: µs little-endian Ethernet, then ns big-endian
        // raw IP; the second global header is not a corrupt record.
        let (a, b, want) = two_pcaps(5);
        let (recs, issues, _) = collect([a.clone(), b.clone()].concat()).unwrap();
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(rows(&recs), want);
        // Three files, the modified format in the middle.
        let mut m = PcapBuilder::new(false, false, true, 65535, 113);
        m.record(5, 1, &pkt(9, 30));
        let (recs, issues, _) = collect([a, m.bytes, b].concat()).unwrap();
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(recs.len(), 11);
        assert_eq!(
            (recs[5].number, recs[5].linktype, recs[5].ts),
            (6, 113, (5, 1000))
        );
        assert_eq!(recs[10].number, 11);
        // An empty capture (header only) in the middle and at the end.
        let (a, b, want) = two_pcaps(3);
        let empty = crate::capture::writer::pcap_global_header(true, false, false, 0, 1).to_vec();
        let (recs, issues, _) = collect([a, empty.clone(), b, empty].concat()).unwrap();
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(rows(&recs), want);
    }

    #[test]
    fn concatenated_pcap_and_pcapng() {
        let (a, _, _) = two_pcaps(4);
        let (want_a, _, _) = collect(a.clone()).unwrap();
        let ng = ng_image();
        let (want_ng, _, _) = collect(ng.clone()).unwrap();
        // Numbers go on from the previous file's last frame (the pcapng's
        // custom block is a numbered frame too).
        let renumber = |v: &[Rec], after: u64| -> Vec<Row> {
            let mut r = rows(v);
            for x in r.iter_mut() {
                x.0 += after;
            }
            r
        };
        let (frames_a, frames_ng) = (4, 7);
        assert_eq!(want_ng.last().unwrap().number, frames_ng);
        // pcap, then pcapng, then pcap again.
        let (recs, issues, _) = collect([a.clone(), ng.clone(), a.clone()].concat()).unwrap();
        assert!(issues.is_empty(), "{issues:?}");
        let mut want = renumber(&want_a, 0);
        want.extend(renumber(&want_ng, frames_a));
        want.extend(renumber(&want_a, frames_a + frames_ng));
        assert_eq!(rows(&recs), want);
        // pcapng then pcap, gzip-compressed as two members.
        let (recs, issues, _) = collect([gz(&ng), gz(&a)].concat()).unwrap();
        assert!(issues.is_empty(), "{issues:?}");
        let mut want = renumber(&want_ng, 0);
        want.extend(renumber(&want_a, frames_ng));
        assert_eq!(rows(&recs), want);
    }

    #[test]
    fn concatenated_header_across_chunk_boundaries() {
        // The second header (and the first records after it) may straddle
        // the read buffers at any offset.
        let mut a = PcapBuilder::new(false, false, false, 65535, 1);
        let mut n = 0;
        while a.bytes.len() < CHUNK_CAPACITY - 200 {
            a.record(1, 0, &pkt(n, 1000));
            n += 1;
        }
        let mut b = PcapBuilder::new(true, true, false, 65535, 101);
        for i in 0..20 {
            b.record(2, 3, &pkt(i, 10));
        }
        for pad in (0..220).step_by(4) {
            let mut first = a.bytes.clone();
            let mut p = PcapBuilder::new(false, false, false, 65535, 1);
            p.record(1, 0, &vec![0u8; pad]);
            first.extend_from_slice(&p.bytes[24..]);
            let (recs, issues, _) = collect([first, b.bytes.clone()].concat()).unwrap();
            assert!(issues.is_empty(), "pad {pad}: {issues:?}");
            assert_eq!(recs.len(), n + 1 + 20, "pad {pad}");
            let last = recs.last().unwrap();
            assert_eq!(
                (last.number, last.linktype, last.ts),
                ((n + 21) as u64, 101, (2, 3))
            );
        }
    }

    #[test]
    fn record_with_a_magic_timestamp_is_still_a_record() {
        // A record whose ts_sec is a pcap magic but whose next fields are
        // not a plausible header (version, snaplen, link type) is framed as
        // a record, not as a new file.
        let mut b = PcapBuilder::new(false, false, false, 65535, 1);
        b.record(1, 0, &pkt(1, 60));
        b.record(PCAP_MAGIC_US, 5, &pkt(2, 60)); // version would be 5.0
        b.record(PCAP_MAGIC_US, 0x0004_0002, &pkt(3, 60)); // 2.4, snaplen 0x1a191817
        b.record(PCAP_MAGIC_NS.swap_bytes(), 9, &pkt(4, 60));
        let (recs, issues, _) = collect(b.bytes).unwrap();
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(recs.len(), 4);
        assert_eq!(recs[2].ts, (PCAP_MAGIC_US as u64, 262_146_000));
        // In pcapng, a local-use block typed like a magic stays a block.
        let mut g = PcapngBuilder::new();
        g.shb(false)
            .idb(1, 0, None, None)
            .epb(0, 0, &pkt(1, 10), 10);
        g.block(PCAP_MAGIC_US, &[0u8; 40]);
        g.epb(0, 0, &pkt(2, 10), 10);
        let (recs, issues, _) = collect(g.bytes).unwrap();
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(recs.len(), 2);
    }

    #[test]
    fn file_header_detection() {
        use crate::capture::writer::pcap_global_header;
        for be in [false, true] {
            for (nsec, modified) in [(false, false), (true, false), (false, true)] {
                let h = pcap_global_header(be, nsec, modified, 262_144, 1);
                let got = file_header_at(&h, true);
                assert!(
                    matches!(got, Some(NextFile::Pcap(p)) if p.big_endian == be && p.nsec == nsec)
                );
                assert_eq!(file_header_at(&h[..20], false), Some(NextFile::NeedMore));
                assert_eq!(file_header_at(&h[..20], true), None);
                let mut bad = h;
                bad[if be { 7 } else { 6 }] = 3; // version 2.3
                assert_eq!(file_header_at(&bad, true), None);
                let bad = pcap_global_header(be, nsec, modified, 1 << 30, 1);
                assert_eq!(file_header_at(&bad, true), None);
                let bad = pcap_global_header(be, nsec, modified, 65535, 1 << 16);
                assert_eq!(file_header_at(&bad, true), None);
            }
            let mut g = PcapngBuilder::new();
            g.shb(be);
            assert_eq!(file_header_at(&g.bytes, true), Some(NextFile::Pcapng));
            assert_eq!(
                file_header_at(&g.bytes[..8], false),
                Some(NextFile::NeedMore)
            );
        }
        assert_eq!(file_header_at(&[0u8; 24], true), None);
    }

    #[test]
    fn concatenation_with_a_bad_shb_keeps_what_follows() {
        // Regression (issue 13, item 4): `cat icmpv6.pcap
        // shb-option-too-long.pcapng icmpv6.pcap icmpv6.pcap` gave 5
        // packets of 18. Here the SHB's leading length counts an option
        // longer than the block (the trailing copy does not).
        let mut p = PcapBuilder::new(false, false, false, 65535, 1);
        for i in 0..5 {
            p.record(1_700_000_000, i, &pkt(i as usize, 70));
        }
        let mut g = PcapngBuilder::new();
        g.shb(false).idb(1, 0, None, None);
        for i in 0..3 {
            g.epb(0, 5, &pkt(50 + i, 60), 60);
        }
        let mut ng = g.bytes.clone();
        set32(&mut ng, 4, 28 + 200);
        let bytes = [
            p.bytes.clone(),
            ng.clone(),
            p.bytes.clone(),
            p.bytes.clone(),
        ]
        .concat();
        let (recs, issues, _) = collect(bytes).unwrap();
        assert_eq!(recs.len(), 18, "{issues:?}");
        let nums: Vec<u64> = recs.iter().map(|r| r.number).collect();
        assert_eq!(nums, (1..=18).collect::<Vec<_>>());
        assert_eq!(recs[5].data, pkt(50, 60));
        assert_eq!(recs[8].linktype, 1);
        assert_eq!(recs[17].data, pkt(4, 70));
        assert_eq!(issues.count(IssueKind::BadBlockLength), 1);
        let from = p.bytes.len() as u64;
        assert_eq!(
            issues.skipped(),
            [crate::capture::issues::Skipped {
                file: 0,
                from,
                to: from + 28
            }]
        );
        // A bad SHB at the start of a file, and one whose byte-order magic
        // is broken (after a pcap file that is no header: the pcap reader's
        // record resync handles it).
        let mut ng2 = g.bytes.clone();
        ng2[8] ^= 0xff;
        for first in [ng, ng2] {
            let (recs, issues, _) = collect([first, p.bytes.clone()].concat()).unwrap();
            assert_eq!(recs.len(), 8, "{issues:?}");
            assert_eq!(
                issues.skipped(),
                [crate::capture::issues::Skipped {
                    file: 0,
                    from: 0,
                    to: 28
                }]
            );
        }
    }
}
