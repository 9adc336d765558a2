//! Capture readers: pcap (µs and ns magic, both byte orders, the modified
//! "Kuznetzov" format) and pcapng (several sections, both byte orders, many
//! interfaces with their own link type, snaplen, `if_tsresol` and
//! `if_tsoffset`; EPB, SPB and the obsolete PB; unknown and custom blocks
//! skipped), from plain, gzip or zstd streams detected by magic — the seed's
//! "gunzip into /dev/shm first" step is not needed. Concatenated captures
//! (`cat a.pcap b.pcapng | …`, multi-member gzip) are read as one stream: a
//! pcap global header or a pcapng SHB at a record boundary switches format,
//! link type, byte order and time resolution, and record numbers go on (see
//! `file_header_at` for why a real record is never taken for a header).
//!
//! The reader is split in two so parsing can run in parallel with reading:
//! `Splitter` reads the (decompressed) stream into large reused buffers and
//! cuts them into `Chunk`s that hold whole records only, touching just the
//! record headers; `Chunk::for_each_packet` walks one chunk's records and can
//! run on any thread. Invariants: no allocation is ever sized by a length
//! read from the file (records above 256 KiB and pcapng blocks above 1 MiB
//! are skipped by streaming, not buffered); a chunk's records are in file
//! order and numbered from `base_record`; every problem is counted in
//! `Issues` and never panics. After a pcapng block whose length cannot be
//! right, the framer scans forward (linearly) for the next plausible block
//! and reports the bytes it abandoned, as it resynchronises on pcap records.
//!
//! One module per concern; the public items are re-exported here, so every
//! `reader::X` path is the same as before the split. `decompress` opens a
//! path or reader and undoes gzip or zstd; `splitter` cuts the stream into
//! `Chunk`s (and defines `Chunk` and `Packet`); `pcap` and `pcapng` hold
//! each format's header, framing, record walk and resynchronisation;
//! `concat` recognises the header of a concatenated capture at a record
//! boundary. The byte readers and the per-record length checks below are
//! shared by the formats.

mod concat;
mod decompress;
mod pcap;
mod pcapng;
mod splitter;
#[cfg(test)]
mod testutil;

pub use decompress::{open, open_reader, open_with, Compression, Input};
pub use pcap::{LengthOrder, PcapHeader};
pub use pcapng::{NgInterface, NgSection, MAX_INTERFACES};
pub use splitter::{Chunk, ChunkFormat, Packet, Splitter};

use crate::capture::issues::{IssueKind, Issues};

/// Largest captured length accepted for one record.
pub const MAX_RECORD: u32 = 256 * 1024;
/// Size of each reused read buffer. Small enough that a chunk the kernel
/// just copied is still in L2 (512 KiB per core here) when the record
/// headers are framed and then decoded — with 4 MiB chunks, 84% of the
/// framing time was one cache miss per record header.
pub const CHUNK_CAPACITY: usize = 320 << 10;

#[inline(always)]
fn rd32(b: &[u8], at: usize, big_endian: bool) -> u32 {
    let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
    if big_endian {
        u32::from_be_bytes(v)
    } else {
        u32::from_le_bytes(v)
    }
}

#[inline(always)]
fn rd16(b: &[u8], at: usize, big_endian: bool) -> u16 {
    let v = [b[at], b[at + 1]];
    if big_endian {
        u16::from_be_bytes(v)
    } else {
        u16::from_le_bytes(v)
    }
}

/// Counts a record whose captured length exceeds the snaplen (0 = none)
/// or its wire length.
#[inline(always)]
fn check_lengths(
    issues: &mut Issues,
    snaplen: u32,
    caplen: u32,
    len: u32,
    file: u32,
    number: u64,
    offset: u64,
) {
    if snaplen != 0 && caplen > snaplen {
        issues.add(IssueKind::CaplenOverSnaplen, file, number, offset);
    }
    if caplen > len {
        issues.add(IssueKind::CaplenOverLen, file, number, offset);
    }
}
