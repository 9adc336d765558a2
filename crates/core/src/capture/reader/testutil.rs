//! Helpers shared by the reader's unit tests: every capture goes through
//! the whole path (open, split, walk), once from memory and once from a
//! mapped file, and both must give the same records and issues.

use std::io::{Cursor, Write};

use super::{open_reader, open_with, Compression, Input, Splitter};
use crate::capture::issues::Issues;
use crate::capture::writer::{PcapBuilder, PcapngBuilder};
use crate::capture::CaptureError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Rec {
    pub(super) number: u64,
    pub(super) ts: (u64, u32),
    pub(super) caplen: u32,
    pub(super) len: u32,
    pub(super) linktype: u32,
    pub(super) data: Vec<u8>,
}

pub(super) fn collect(bytes: Vec<u8>) -> Result<(Vec<Rec>, Issues, Compression), CaptureError> {
    let input = open_reader("mem", Box::new(Cursor::new(bytes.clone())), None)?;
    let comp = input.compression;
    let got = collect_input(input)?;
    // The same bytes through a mapped file must give the same result.
    // Removed on drop, also when the test fails.
    let tmp = crate::artifact::TempDir::new("pcap").unwrap();
    let dir = tmp.path().to_path_buf();
    let p = dir.join(format!(
        "{:x}.cap",
        bytes.len() as u64 ^ bytes.iter().fold(0u64, |h, b| h.rotate_left(5) ^ *b as u64)
    ));
    std::fs::write(&p, &bytes).unwrap();
    let mapped = open_with(p.to_str().unwrap(), true).and_then(collect_input);
    std::fs::remove_file(&p).unwrap();
    let mapped = mapped?;
    assert_eq!(mapped.0, got.0, "mapped records differ");
    assert_eq!(mapped.1.counts(), got.1.counts(), "mapped issues differ");
    Ok((got.0, got.1, comp))
}

fn collect_input(input: Input) -> Result<(Vec<Rec>, Issues), CaptureError> {
    let mut sp = Splitter::new(input, 0)?;
    let mut out = Vec::new();
    let mut issues = Issues::default();
    let mut buf = Vec::new();
    let mut guard = 0;
    while let Some(chunk) = sp.next_chunk(std::mem::take(&mut buf))? {
        chunk.for_each_packet(&mut issues, |p| {
            out.push(Rec {
                number: p.number,
                ts: (p.ts_sec, p.ts_nsec),
                caplen: p.caplen,
                len: p.len,
                linktype: p.linktype,
                data: p.data.to_vec(),
            })
        });
        issues.merge(&chunk.issues);
        buf = chunk.buf;
        guard += 1;
        assert!(guard < 100_000, "splitter made no progress");
    }
    Ok((out, issues))
}

pub(super) fn pkt(i: usize, n: usize) -> Vec<u8> {
    (0..n).map(|k| (i * 7 + k) as u8).collect()
}

pub(super) fn ng_image() -> Vec<u8> {
    let mut b = PcapngBuilder::new();
    b.shb(false)
        .idb(1, 65535, None, None)
        .idb(101, 128, Some(9), None)
        .block(0x0000_0bad, b"custom block payload")
        .epb(0, 1_700_000_000_123_456, &pkt(1, 60), 60)
        .epb(1, 1_700_000_000_123_456_789, &pkt(2, 128), 1500)
        .block(0x4242_4242, &[1, 2, 3, 4, 5])
        .spb(&pkt(3, 70), 70)
        .pb(0, 1_000_001, &pkt(4, 42), 42);
    // Second section, big-endian, 2^-10 resolution and an offset.
    b.shb(true)
        .idb(113, 0, Some(0x80 | 10), Some(100))
        .epb(0, (5 << 10) | 512, &pkt(5, 33), 33)
        .idb(1, 65535, None, None)
        .epb(1, 7, &pkt(6, 44), 44);
    b.bytes
}

/// A pcapng of `n` EPBs of varied sizes and the offset of each EPB.
pub(super) fn ng_many(n: usize) -> (Vec<u8>, Vec<usize>) {
    let mut b = PcapngBuilder::new();
    b.shb(false).idb(1, 0, None, None);
    let mut at = Vec::new();
    for i in 0..n {
        at.push(b.bytes.len());
        let d = pkt(i, 40 + (i * 37) % 900);
        b.epb(0, 1000 + i as u64, &d, d.len() as u32);
    }
    (b.bytes, at)
}

pub(super) fn set32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(super) fn gz(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// (number, ts, linktype, data) of every record, for comparisons.
pub(super) type Row = (u64, (u64, u32), u32, Vec<u8>);

pub(super) fn rows(recs: &[Rec]) -> Vec<Row> {
    recs.iter()
        .map(|r| (r.number, r.ts, r.linktype, r.data.clone()))
        .collect()
}

/// Two pcaps of every variant, `n` records each, and the rows expected
/// from their concatenation.
pub(super) fn two_pcaps(n: usize) -> (Vec<u8>, Vec<u8>, Vec<Row>) {
    let mut a = PcapBuilder::new(false, false, false, 65535, 1);
    let mut b = PcapBuilder::new(true, true, false, 128, 101);
    let mut want = Vec::new();
    for i in 0..n {
        a.record(1_700_000_000 + i as u32, 7, &pkt(i, 60 + i % 50));
        want.push((
            i as u64 + 1,
            (1_700_000_000 + i as u64, 7000),
            1,
            pkt(i, 60 + i % 50),
        ));
    }
    for i in 0..n {
        b.record(1_800_000_000, 123_456_789, &pkt(i + n, 40));
        let num = (n + i) as u64 + 1;
        want.push((num, (1_800_000_000, 123_456_789), 101, pkt(i + n, 40)));
    }
    (a.bytes, b.bytes, want)
}
