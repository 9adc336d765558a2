//! Bad-input accounting: every problem found in a capture is counted per
//! kind, and the first few of each kind keep their file, record number and
//! byte offset. Extraction goes on; `--strict` turns the first one into an
//! error. Merging in stream order keeps "first" meaning first in the file.

use serde::Serialize;

/// Kinds of bad input, in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueKind {
    /// The file ends in the middle of a record or block.
    TruncatedRecord,
    /// A record's captured length exceeds 256 KiB (the largest we accept).
    RecordTooLong,
    /// A record's captured length exceeds the file's or interface's snaplen.
    CaplenOverSnaplen,
    /// A record's captured length exceeds its original (wire) length.
    CaplenOverLen,
    /// A pcapng block length is impossible (too small, unaligned, past the
    /// end of the stream, or the trailing copy differs); the reader skips to
    /// the next plausible block and reports the bytes skipped.
    BadBlockLength,
    /// A pcapng packet names an interface that was never described.
    UnknownInterface,
    /// Bytes skipped while looking for the next plausible pcap record.
    Resync,
    /// A protocol header is cut short although the whole frame was captured.
    HeaderCutShort,
    /// A protocol header holds an impossible value (bad IHL, version, ...).
    MalformedHeader,
    /// A record's sub-second timestamp field is a second or more (µs ≥
    /// 10^6, ns ≥ 10^9); the excess is carried into the seconds.
    BadSubsecond,
}

impl IssueKind {
    pub const ALL: [IssueKind; 10] = [
        IssueKind::TruncatedRecord,
        IssueKind::RecordTooLong,
        IssueKind::CaplenOverSnaplen,
        IssueKind::CaplenOverLen,
        IssueKind::BadBlockLength,
        IssueKind::UnknownInterface,
        IssueKind::Resync,
        IssueKind::HeaderCutShort,
        IssueKind::MalformedHeader,
        IssueKind::BadSubsecond,
    ];

    pub fn name(self) -> &'static str {
        match self {
            IssueKind::TruncatedRecord => "truncated_record",
            IssueKind::RecordTooLong => "record_too_long",
            IssueKind::CaplenOverSnaplen => "caplen_over_snaplen",
            IssueKind::CaplenOverLen => "caplen_over_len",
            IssueKind::BadBlockLength => "bad_block_length",
            IssueKind::UnknownInterface => "unknown_interface",
            IssueKind::Resync => "resync",
            IssueKind::HeaderCutShort => "header_cut_short",
            IssueKind::MalformedHeader => "malformed_header",
            IssueKind::BadSubsecond => "bad_subsecond",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Where one problem was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IssueAt {
    pub kind: IssueKind,
    /// Index of the input file in the command line.
    pub file: u32,
    /// 1-based record (packet) number in that file, as tshark numbers frames.
    pub record: u64,
    /// Byte offset of the record in the (decompressed) stream.
    pub offset: u64,
}

/// How many of each kind keep their location.
pub const FIRST_PER_KIND: usize = 3;

/// Distinct undecoded link types remembered (more are counted under the
/// last entry's neighbour `u32::MAX`).
pub const MAX_UNDECODED_LINKTYPES: usize = 16;

/// Ranges of abandoned bytes that keep their location (more are counted).
pub const MAX_SKIPPED_RANGES: usize = 16;

/// Bytes abandoned after a bad pcapng block: from the bad block's first
/// byte up to the next plausible block (or the end of the stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Index of the input file in the command line.
    pub file: u32,
    /// Stream offset of the first byte skipped.
    pub from: u64,
    /// Stream offset just past the last byte skipped.
    pub to: u64,
}

impl Skipped {
    pub fn bytes(&self) -> u64 {
        self.to - self.from
    }
}

/// Counts per kind plus the first few locations of each, the records of
/// link types we do not decode (valid input, not bad input: they are listed
/// with their capture fields only), and the byte ranges abandoned while
/// resynchronising after a bad pcapng block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Issues {
    counts: [u64; IssueKind::ALL.len()],
    first: Vec<IssueAt>,
    undecoded: Vec<(u32, u64)>,
    skipped: Vec<Skipped>,
    skipped_ranges: u64,
    skipped_bytes: u64,
}

impl Issues {
    pub fn add(&mut self, kind: IssueKind, file: u32, record: u64, offset: u64) {
        let i = kind.index();
        if (self.counts[i] as usize) < FIRST_PER_KIND {
            self.first.push(IssueAt {
                kind,
                file,
                record,
                offset,
            });
        }
        self.counts[i] += 1;
    }

    /// Counts `n` records of a link type we do not decode.
    pub fn add_undecoded(&mut self, linktype: u32, n: u64) {
        if let Some(e) = self.undecoded.iter_mut().find(|e| e.0 == linktype) {
            e.1 += n;
        } else if self.undecoded.len() < MAX_UNDECODED_LINKTYPES {
            self.undecoded.push((linktype, n));
        } else if let Some(e) = self.undecoded.iter_mut().find(|e| e.0 == u32::MAX) {
            e.1 += n;
        } else if let Some(last) = self.undecoded.last_mut() {
            // Full: fold into a catch-all entry.
            *last = (u32::MAX, last.1 + n);
        }
    }

    /// (link type, records) of every link type seen that we do not decode
    /// (`u32::MAX`: several beyond the first 16).
    pub fn undecoded(&self) -> &[(u32, u64)] {
        &self.undecoded
    }

    /// Records that `from..to` of file `file` was abandoned (nothing for an
    /// empty range).
    pub fn add_skipped(&mut self, file: u32, from: u64, to: u64) {
        if to <= from {
            return;
        }
        if self.skipped.len() < MAX_SKIPPED_RANGES {
            self.skipped.push(Skipped { file, from, to });
        }
        self.skipped_ranges += 1;
        self.skipped_bytes += to - from;
    }

    /// The first `MAX_SKIPPED_RANGES` abandoned ranges, in stream order.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }

    /// Abandoned ranges in all (also those beyond the kept ones).
    pub fn skipped_ranges(&self) -> u64 {
        self.skipped_ranges
    }

    /// Abandoned bytes in all.
    pub fn skipped_bytes(&self) -> u64 {
        self.skipped_bytes
    }

    /// Appends `later` (which comes after `self` in the stream).
    pub fn merge(&mut self, later: &Issues) {
        for s in &later.skipped {
            if self.skipped.len() < MAX_SKIPPED_RANGES {
                self.skipped.push(*s);
            }
        }
        self.skipped_ranges += later.skipped_ranges;
        self.skipped_bytes += later.skipped_bytes;
        for &(lt, n) in &later.undecoded {
            self.add_undecoded(lt, n);
        }
        for at in &later.first {
            let kept = self.first.iter().filter(|x| x.kind == at.kind).count();
            if kept < FIRST_PER_KIND {
                self.first.push(*at);
            }
        }
        for (mine, theirs) in self.counts.iter_mut().zip(later.counts.iter()) {
            *mine += theirs;
        }
    }

    pub fn count(&self, kind: IssueKind) -> u64 {
        self.counts[kind.index()]
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// The first few locations, in stream order per kind.
    pub fn first(&self) -> &[IssueAt] {
        &self.first
    }

    /// (kind, count) for every kind seen.
    pub fn counts(&self) -> Vec<(IssueKind, u64)> {
        IssueKind::ALL
            .iter()
            .map(|k| (*k, self.count(*k)))
            .filter(|(_, c)| *c > 0)
            .collect()
    }

    pub fn clear(&mut self) {
        self.counts = [0; IssueKind::ALL.len()];
        self.first.clear();
        self.undecoded.clear();
        self.skipped.clear();
        self.skipped_ranges = 0;
        self.skipped_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_first_few_per_kind_across_merges() {
        let mut a = Issues::default();
        a.add(IssueKind::HeaderCutShort, 0, 1, 10);
        a.add(IssueKind::HeaderCutShort, 0, 2, 20);
        let mut b = Issues::default();
        for r in 3..10 {
            b.add(IssueKind::HeaderCutShort, 0, r, r * 10);
        }
        b.add(IssueKind::TruncatedRecord, 0, 10, 100);
        a.merge(&b);
        assert_eq!(a.count(IssueKind::HeaderCutShort), 9);
        assert_eq!(a.count(IssueKind::TruncatedRecord), 1);
        let recs: Vec<u64> = a
            .first()
            .iter()
            .filter(|x| x.kind == IssueKind::HeaderCutShort)
            .map(|x| x.record)
            .collect();
        assert_eq!(recs, vec![1, 2, 3]);
        assert_eq!(a.total(), 10);
    }
}
