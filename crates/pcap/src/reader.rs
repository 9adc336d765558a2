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

use std::fs::File;
use std::io::{self, BufReader, Cursor, Read};
use std::sync::Arc;

use crate::issues::{IssueKind, Issues};
use crate::mapped::Mapping;
use crate::PcapError;

/// Largest captured length accepted for one record.
pub const MAX_RECORD: u32 = 256 * 1024;
/// Size of each reused read buffer. Small enough that a chunk the kernel
/// just copied is still in L2 (512 KiB per core here) when the record
/// headers are framed and then decoded — with 4 MiB chunks, 84% of the
/// framing time was one cache miss per record header.
pub const CHUNK_CAPACITY: usize = 320 << 10;
/// Interfaces kept per pcapng section.
pub const MAX_INTERFACES: usize = 4096;
/// Largest pcapng block carried between buffers; larger ones are skipped.
const MAX_BUFFERED_BLOCK: usize = 288 << 10;

const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;
const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
const PCAP_MAGIC_MODIFIED: u32 = 0xa1b2_cd34;
const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
const PCAPNG_BOM: u32 = 0x1a2b_3c4d;
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

/// Compression of an input stream, detected by magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// An opened input: the decompressed byte stream plus what we know of it.
pub struct Input {
    pub name: String,
    pub compression: Compression,
    /// On-disk size when it is a regular file.
    pub size: Option<u64>,
    pub reader: Box<dyn Read + Send>,
    /// The whole file mapped, for plain regular files opened with mmap.
    pub map: Option<Arc<Mapping>>,
}

fn io_err(path: &str, e: io::Error) -> PcapError {
    PcapError::Io {
        path: path.to_string(),
        source: e,
    }
}

fn read_up_to(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Opens a path (`-` is standard input) and wraps it in a decompressor when
/// its first bytes are a gzip or zstd magic.
pub fn open(path: &str) -> Result<Input, PcapError> {
    open_with(path, false)
}

/// Like `open`; with `mmap`, a plain (uncompressed) regular file is mapped
/// instead of read through buffers.
pub fn open_with(path: &str, mmap: bool) -> Result<Input, PcapError> {
    if path == "-" {
        return open_reader(path, Box::new(io::stdin()), None);
    }
    let waiting = fifo_notice(path);
    let f = File::open(path).map_err(|e| io_err(path, e))?;
    let size = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    let map = match size {
        Some(n) if mmap && n >= PcapHeader::LEN as u64 && n <= usize::MAX as u64 => {
            Mapping::new(&f, n as usize).ok().map(Arc::new)
        }
        _ => None,
    };
    let input = open_reader(path, Box::new(f), size);
    if let Some(w) = waiting {
        w.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let mut input = input?;
    if input.compression == Compression::None {
        input.map = map;
    }
    Ok(input)
}

/// For a named pipe: opening it blocks until a writer comes, and reading
/// until it writes. Says so on stderr after a second (instead of a silent
/// hang); Ctrl-C ends the wait as usual. Returns the flag that, once set,
/// cancels the notice.
fn fifo_notice(path: &str) -> Option<Arc<std::sync::atomic::AtomicBool>> {
    use std::os::unix::fs::FileTypeExt;
    let is_fifo = std::fs::metadata(path)
        .map(|m| m.file_type().is_fifo())
        .unwrap_or(false);
    if !is_fifo {
        return None;
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    let name = path.to_owned();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(1));
        if !d.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!(
                "commbench pcap: waiting for data on FIFO {name} (nothing written yet; Ctrl-C to stop)"
            );
        }
    });
    Some(done)
}

/// Like `open` over any reader.
pub fn open_reader(
    name: &str,
    mut raw: Box<dyn Read + Send>,
    size: Option<u64>,
) -> Result<Input, PcapError> {
    let mut magic = [0u8; 4];
    let n = read_up_to(&mut raw, &mut magic).map_err(|e| io_err(name, e))?;
    let prefix = Cursor::new(magic[..n].to_vec());
    let chained = prefix.chain(raw);
    let (compression, reader): (Compression, Box<dyn Read + Send>) = match magic {
        [0x1f, 0x8b, ..] if n >= 2 => (
            Compression::Gzip,
            Box::new(flate2::bufread::MultiGzDecoder::new(
                BufReader::with_capacity(256 << 10, chained),
            )),
        ),
        [0x28, 0xb5, 0x2f, 0xfd] => (
            Compression::Zstd,
            Box::new(
                zstd::stream::read::Decoder::with_buffer(BufReader::with_capacity(
                    256 << 10,
                    chained,
                ))
                .map_err(|e| io_err(name, e))?,
            ),
        ),
        _ => (Compression::None, Box::new(chained)),
    };
    Ok(Input {
        name: name.to_string(),
        compression,
        size,
        reader,
        map: None,
    })
}

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
        Some(Self {
            big_endian,
            nsec: magic == PCAP_MAGIC_NS,
            modified: magic == PCAP_MAGIC_MODIFIED,
            version: (r16(4), r16(6)),
            snaplen: rd32(b, 16, big_endian),
            linktype: rd32(b, 20, big_endian) & 0xffff,
        })
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

/// Largest snaplen accepted in a pcap header found inside a stream (64 MiB;
/// libpcap never writes more than 256 KiB).
const MAX_CONCAT_SNAPLEN: u32 = 64 << 20;

/// A capture file header found at a record boundary (a concatenated file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NextFile {
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
fn maybe_pcap_magic(ts: u32) -> bool {
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
fn file_header_at(b: &[u8], eof: bool) -> Option<NextFile> {
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

/// The file format a chunk's records are in.
#[derive(Debug, Clone)]
pub enum ChunkFormat {
    Pcap(PcapHeader),
    Pcapng(Arc<NgSection>),
}

/// A run of whole records cut from the stream, in a reused buffer.
#[derive(Debug)]
pub struct Chunk {
    pub file: u32,
    pub format: ChunkFormat,
    /// Reused buffer; records occupy `bytes()[start..end]`.
    pub buf: Vec<u8>,
    /// For a mapped file, the whole mapping (then `buf` is unused and
    /// `start`/`end`/`base_offset` are file offsets).
    pub map: Option<Arc<Mapping>>,
    pub start: usize,
    pub end: usize,
    /// Stream offset of `buf[0]`.
    pub base_offset: u64,
    /// Number (1-based) of the first record in the chunk.
    pub base_record: u64,
    /// Packet records in the chunk (pcapng custom blocks are numbered,
    /// as tshark numbers them, but not counted here).
    pub records: u64,
    /// Problems found while framing this part of the stream.
    pub issues: Issues,
    /// Bytes of decompressed stream consumed up to the end of this chunk.
    pub stream_pos: u64,
    /// Its records were already visited while it was framed
    /// (`Splitter::next_chunk_visiting`): do not walk them again.
    pub visited: bool,
}

/// One captured packet, borrowed from a chunk.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    pub number: u64,
    pub offset: u64,
    pub ts_sec: u64,
    pub ts_nsec: u32,
    pub caplen: u32,
    pub len: u32,
    pub linktype: u32,
    /// False for pcapng simple packet blocks, which carry no timestamp.
    pub has_ts: bool,
    pub data: &'a [u8],
}

impl Chunk {
    /// The bytes `start..end` index into.
    pub fn bytes(&self) -> &[u8] {
        match &self.map {
            Some(m) => m,
            None => &self.buf,
        }
    }

    /// Calls `f` for every packet record, in order, and counts per-record
    /// problems (caplen above snaplen or wire length, unknown interface).
    /// Nothing for a chunk whose records were visited while it was framed.
    pub fn for_each_packet(&self, issues: &mut Issues, mut f: impl FnMut(&Packet<'_>)) {
        if self.visited {
            return;
        }
        let b = &self.bytes()[..self.end];
        match &self.format {
            ChunkFormat::Pcap(h) => self.pcap_records(b, h, issues, &mut f),
            ChunkFormat::Pcapng(s) => self.pcapng_records(b, s, issues, &mut f),
        }
    }

    fn pcap_records(
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

    fn pcapng_records(
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

enum Framing {
    Pcap {
        header: PcapHeader,
        /// Searching for a plausible record after a corrupt one.
        resync: bool,
        last_ts: Option<u32>,
    },
    Pcapng(Arc<NgSection>),
}

/// Cuts a capture stream into chunks of whole records.
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
    let caplen = rd32(b, pos + 8, be);
    let len = rd32(b, pos + 12, be);
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
trait RecordVisitor {
    const VISITS: bool;
    fn record(&mut self, b: &[u8], pos: usize, h: &PcapHeader, file: u32, number: u64, base: u64);
}

struct NoVisit;

impl RecordVisitor for NoVisit {
    const VISITS: bool = false;
    #[inline(always)]
    fn record(&mut self, _: &[u8], _: usize, _: &PcapHeader, _: u32, _: u64, _: u64) {}
}

struct Visit<'a, F> {
    issues: &'a mut Issues,
    f: F,
}

impl<F: FnMut(&Packet<'_>)> RecordVisitor for Visit<'_, F> {
    const VISITS: bool = true;
    #[inline(always)]
    fn record(&mut self, b: &[u8], pos: usize, h: &PcapHeader, file: u32, number: u64, base: u64) {
        pcap_record(b, pos, h, file, number, base, self.issues, &mut self.f);
    }
}

pub struct Splitter {
    input: Box<dyn Read + Send>,
    name: String,
    file: u32,
    framing: Framing,
    tail: Vec<u8>,
    /// Stream offset of `tail[0]`.
    offset: u64,
    next_record: u64,
    /// Bytes still to discard from the input (an oversized block).
    skip: u64,
    /// Stream offset of a bad pcapng block: scanning for the next
    /// plausible one.
    ng_resync: Option<u64>,
    /// Length of the stream when known (a plain regular file).
    stream_len: Option<u64>,
    /// pcapng custom blocks numbered so far (numbered records that are
    /// not packets).
    custom_frames: u64,
    eof: bool,
    done: bool,
    /// Mapped file and the offset of the next unframed byte.
    map: Option<Arc<Mapping>>,
    /// Bytes per chunk (at least `CHUNK_CAPACITY`).
    chunk: usize,
}

impl Splitter {
    /// Chunks of `bytes` (never below `CHUNK_CAPACITY`). The inline path
    /// keeps the default, sized for L2; the parallel path takes larger ones
    /// to hand fewer chunks between threads.
    pub fn set_chunk_capacity(&mut self, bytes: usize) {
        self.chunk = bytes.max(CHUNK_CAPACITY);
    }

    /// Reads the file header; fails with `NotACapture` if the stream is not
    /// pcap or pcapng.
    pub fn new(mut input: Input, file: u32) -> Result<Self, PcapError> {
        let mut head = [0u8; PcapHeader::LEN];
        let n = read_up_to(&mut input.reader, &mut head).map_err(|e| io_err(&input.name, e))?;
        let not_capture = |n: usize| PcapError::NotACapture {
            path: input.name.clone(),
            magic: head[..n.min(4)]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let (framing, tail, offset) = if n >= 4 && head[..4] == PCAPNG_SHB.to_be_bytes() {
            (
                Framing::Pcapng(Arc::new(NgSection::default())),
                head[..n].to_vec(),
                0,
            )
        } else if let Some(h) = PcapHeader::parse(&head[..n]) {
            (
                Framing::Pcap {
                    header: h,
                    resync: false,
                    last_ts: None,
                },
                Vec::new(),
                PcapHeader::LEN as u64,
            )
        } else {
            return Err(not_capture(n));
        };
        let stream_len = match input.compression {
            Compression::None => input.size,
            _ => None,
        };
        Ok(Self {
            input: input.reader,
            name: input.name,
            file,
            framing,
            tail,
            offset,
            next_record: 1,
            skip: 0,
            ng_resync: None,
            stream_len,
            custom_frames: 0,
            eof: false,
            done: false,
            map: input.map,
            chunk: CHUNK_CAPACITY,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pcap global header, for pcap files.
    pub fn pcap_header(&self) -> Option<PcapHeader> {
        match &self.framing {
            Framing::Pcap { header, .. } => Some(*header),
            Framing::Pcapng(_) => None,
        }
    }

    /// Stream bytes consumed so far (decompressed).
    pub fn position(&self) -> u64 {
        self.offset
    }

    fn read_fill(
        &mut self,
        buf: &mut [u8],
        mut filled: usize,
        issues: &mut Issues,
    ) -> Result<usize, PcapError> {
        while !self.eof && filled < buf.len() {
            match self.input.read(&mut buf[filled..]) {
                Ok(0) => self.eof = true,
                Ok(k) => filled += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::UnexpectedEof
                            | io::ErrorKind::InvalidData
                            | io::ErrorKind::InvalidInput
                    ) =>
                {
                    // A cut or corrupt compressed stream: keep what decoded.
                    self.eof = true;
                    issues.add(
                        IssueKind::TruncatedRecord,
                        self.file,
                        self.next_record,
                        self.offset + filled as u64,
                    );
                }
                Err(e) => return Err(io_err(&self.name, e)),
            }
        }
        Ok(filled)
    }

    fn discard(&mut self, buf: &mut [u8], issues: &mut Issues) -> Result<(), PcapError> {
        while self.skip > 0 && !self.eof {
            let want = (self.skip as usize).min(buf.len());
            let got = self.read_fill(&mut buf[..want], 0, issues)?;
            self.skip -= got as u64;
            self.offset += got as u64;
            if got < want {
                self.eof = true;
            }
        }
        if self.skip > 0 {
            issues.add(
                IssueKind::TruncatedRecord,
                self.file,
                self.next_record,
                self.offset,
            );
            self.done = true;
        }
        Ok(())
    }

    /// Fills `buf` (a reused buffer) and returns the next chunk, or `None`
    /// at the end of the stream.
    pub fn next_chunk(&mut self, buf: Vec<u8>) -> Result<Option<Chunk>, PcapError> {
        self.next_chunk_inner(buf, &mut NoVisit)
    }

    /// `next_chunk` for a single-threaded consumer: the records of a pcap
    /// chunk are handed to `f` (and their snaplen/caplen problems counted in
    /// `issues`) as they are framed, in one walk instead of two — the
    /// separate framing walk was ~8% of single-thread extraction's user
    /// time. The chunk comes back with `visited` set; pcapng and mapped
    /// chunks are not visited (walk them with `for_each_packet`).
    pub fn next_chunk_visiting(
        &mut self,
        buf: Vec<u8>,
        issues: &mut Issues,
        f: impl FnMut(&Packet<'_>),
    ) -> Result<Option<Chunk>, PcapError> {
        self.next_chunk_inner(buf, &mut Visit { issues, f })
    }

    fn next_chunk_inner<V: RecordVisitor>(
        &mut self,
        mut buf: Vec<u8>,
        visit: &mut V,
    ) -> Result<Option<Chunk>, PcapError> {
        if self.done {
            return Ok(None);
        }
        if let Some(map) = self.map.clone() {
            return Ok(Some(self.next_mapped(&map, buf)));
        }
        if buf.len() < self.chunk {
            buf.resize(self.chunk, 0);
        }
        let mut issues = Issues::default();
        if self.skip > 0 {
            self.discard(&mut buf, &mut issues)?;
            if self.done {
                return Ok(Some(self.empty_chunk(buf, issues)));
            }
        }
        let carried = self.tail.len();
        buf[..carried].copy_from_slice(&self.tail);
        self.tail.clear();
        let filled = self.read_fill(&mut buf, carried, &mut issues)?;
        let base_offset = self.offset;
        let base_record = self.next_record;
        let base_custom = self.custom_frames;
        let visited = V::VISITS && matches!(self.framing, Framing::Pcap { .. });
        let (start, end, tail_from, format) = match &mut self.framing {
            Framing::Pcap { .. } => {
                self.frame_pcap(&buf[..filled], base_offset, &mut issues, visit)
            }
            Framing::Pcapng(_) => self.frame_pcapng(&buf[..filled], base_offset, &mut issues),
        };
        let records = self.next_record - base_record - (self.custom_frames - base_custom);
        self.tail.extend_from_slice(&buf[tail_from..filled]);
        self.offset = base_offset + tail_from as u64;
        if self.eof && !self.done && tail_from == filled && self.skip == 0 {
            self.done = true;
        }
        Ok(Some(Chunk {
            file: self.file,
            format,
            buf,
            map: None,
            start,
            end,
            base_offset,
            base_record,
            records,
            issues,
            stream_pos: self.offset,
            visited,
        }))
    }

    /// Frames the next part of a mapped file (no copy, no read).
    fn next_mapped(&mut self, map: &Arc<Mapping>, buf: Vec<u8>) -> Chunk {
        let mut issues = Issues::default();
        let from = (self.offset as usize).min(map.len());
        let mut to = (from + self.chunk).min(map.len());
        if self.skip > 0 {
            let s = (self.skip as usize).min(map.len() - from);
            self.skip -= s as u64;
            self.offset += s as u64;
            if self.skip > 0 {
                issues.add(
                    IssueKind::TruncatedRecord,
                    self.file,
                    self.next_record,
                    self.offset,
                );
                self.done = true;
            }
            let mut c = self.empty_chunk(buf, issues);
            c.map = Some(map.clone());
            c.start = self.offset as usize;
            c.end = self.offset as usize;
            c.base_offset = 0;
            return c;
        }
        self.eof = to == map.len();
        if !self.eof {
            to = to.min(map.len());
        }
        let base_record = self.next_record;
        let base_custom = self.custom_frames;
        let slice = &map[from..to];
        let (start, end, tail_from, format) = match &self.framing {
            Framing::Pcap { .. } => self.frame_pcap(slice, from as u64, &mut issues, &mut NoVisit),
            Framing::Pcapng(_) => self.frame_pcapng(slice, from as u64, &mut issues),
        };
        self.offset = (from + tail_from) as u64;
        if self.eof && !self.done && tail_from == slice.len() && self.skip == 0 {
            self.done = true;
        }
        Chunk {
            file: self.file,
            format,
            buf,
            map: Some(map.clone()),
            start: from + start,
            end: from + end,
            base_offset: 0,
            base_record,
            records: self.next_record - base_record - (self.custom_frames - base_custom),
            issues,
            stream_pos: self.offset,
            visited: false,
        }
    }

    fn empty_chunk(&self, buf: Vec<u8>, issues: Issues) -> Chunk {
        let format = match &self.framing {
            Framing::Pcap { header, .. } => ChunkFormat::Pcap(*header),
            Framing::Pcapng(s) => ChunkFormat::Pcapng(s.clone()),
        };
        Chunk {
            file: self.file,
            format,
            buf,
            map: None,
            start: 0,
            end: 0,
            base_offset: self.offset,
            base_record: self.next_record,
            records: 0,
            issues,
            stream_pos: self.offset,
            visited: false,
        }
    }

    /// Returns (start, end, tail_from, format) for a pcap buffer.
    fn frame_pcap<V: RecordVisitor>(
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
            let caplen = rd32(b, pos + 8, be);
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

    /// Returns (start, end, tail_from, format) for a pcapng buffer.
    ///
    /// A block whose length cannot be right (too small, unaligned, an SHB
    /// or IDB too large to buffer, past the end of the stream, a trailing
    /// copy that differs) is counted as `bad_block_length` and ends the
    /// chunk; the next calls scan forward byte by byte for the next
    /// plausible block (`find_ng_block`) and report the bytes abandoned.
    /// Each offset is probed once in O(1) (twice for the one a buffer
    /// boundary cuts), so the scan is linear in the bytes skipped.
    fn frame_pcapng(
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

enum Resync {
    Found(usize),
    NeedMore(usize),
    Nothing,
}

fn plausible(b: &[u8], at: usize, h: &PcapHeader, last_ts: Option<u32>) -> Option<usize> {
    let be = h.big_endian;
    let ts = rd32(b, at, be);
    let frac = rd32(b, at + 4, be);
    let caplen = rd32(b, at + 8, be);
    let len = rd32(b, at + 12, be);
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
    use crate::writer::{PcapBuilder, PcapngBuilder};
    use std::io::Write;

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Rec {
        number: u64,
        ts: (u64, u32),
        caplen: u32,
        len: u32,
        linktype: u32,
        data: Vec<u8>,
    }

    fn collect(bytes: Vec<u8>) -> Result<(Vec<Rec>, Issues, Compression), PcapError> {
        let input = open_reader("mem", Box::new(Cursor::new(bytes.clone())), None)?;
        let comp = input.compression;
        let got = collect_input(input)?;
        // The same bytes through a mapped file must give the same result.
        // Removed on drop, also when the test fails.
        let tmp = commbench_core::artifact::TempDir::new("pcap").unwrap();
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

    fn collect_input(input: Input) -> Result<(Vec<Rec>, Issues), PcapError> {
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

    fn pkt(i: usize, n: usize) -> Vec<u8> {
        (0..n).map(|k| (i * 7 + k) as u8).collect()
    }

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
        let h = PcapHeader::parse(&crate::writer::pcap_global_header(
            true, true, false, 128, 113,
        ))
        .unwrap();
        assert!(h.big_endian && h.nsec && !h.modified);
        assert_eq!((h.snaplen, h.linktype, h.version), (128, 113, (2, 4)));
        assert!(PcapHeader::parse(&[0u8; 24]).is_none());
        assert!(PcapHeader::parse(&[0xd4, 0xc3, 0xb2]).is_none());
    }

    #[test]
    fn records_across_many_chunks_stay_in_order() {
        let mut b = PcapBuilder::new(false, false, false, 262144, 1);
        let mut expect = Vec::new();
        let mut i = 0;
        while b.bytes.len() < 3 * CHUNK_CAPACITY + 12345 {
            let n = 40 + (i * 131) % 9000;
            b.record(i as u32, 0, &pkt(i, n));
            expect.push(n as u32);
            i += 1;
        }
        let (recs, issues, _) = collect(b.bytes).unwrap();
        assert!(issues.is_empty());
        assert_eq!(recs.len(), expect.len());
        for (k, r) in recs.iter().enumerate() {
            assert_eq!(r.number, k as u64 + 1);
            assert_eq!(r.caplen, expect[k]);
            assert_eq!(r.data, pkt(k, expect[k] as usize));
        }
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
    fn not_a_capture() {
        for junk in [&b""[..], b"hello world, this is text\n", &[0xd4, 0xc3]] {
            match collect(junk.to_vec()) {
                Err(PcapError::NotACapture { .. }) => {}
                other => panic!("expected NotACapture, got {:?}", other.map(|r| r.0.len())),
            }
        }
    }

    fn ng_image() -> Vec<u8> {
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

    /// A pcapng of `n` EPBs of varied sizes and the offset of each EPB.
    fn ng_many(n: usize) -> (Vec<u8>, Vec<usize>) {
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

    fn set32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
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
                    [crate::issues::Skipped { file: 0, from, to }],
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
            [crate::issues::Skipped {
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
            [crate::issues::Skipped {
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
                [crate::issues::Skipped {
                    file: 0,
                    from: 0,
                    to: 28
                }]
            );
        }
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
    fn gzip_and_zstd_inputs() {
        let plain = ng_image();
        let (want, _, _) = collect(plain.clone()).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain).unwrap();
        let gz = gz.finish().unwrap();
        let (got, issues, comp) = collect(gz.clone()).unwrap();
        assert_eq!(comp, Compression::Gzip);
        assert!(issues.is_empty());
        assert_eq!(got, want);

        let zs = zstd::stream::encode_all(&plain[..], 3).unwrap();
        let (got, _, comp) = collect(zs).unwrap();
        assert_eq!(comp, Compression::Zstd);
        assert_eq!(got, want);

        // A gzip stream cut in the middle keeps what decoded and says so.
        let (got, issues, _) = collect(gz[..gz.len() / 2].to_vec()).unwrap();
        assert!(got.len() < want.len());
        assert!(issues.count(IssueKind::TruncatedRecord) >= 1);
    }

    fn gz(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    /// (number, ts, linktype, data) of every record, for comparisons.
    type Row = (u64, (u64, u32), u32, Vec<u8>);

    fn rows(recs: &[Rec]) -> Vec<Row> {
        recs.iter()
            .map(|r| (r.number, r.ts, r.linktype, r.data.clone()))
            .collect()
    }

    /// Two pcaps of every variant, `n` records each, and the rows expected
    /// from their concatenation.
    fn two_pcaps(n: usize) -> (Vec<u8>, Vec<u8>, Vec<Row>) {
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
        let empty = crate::writer::pcap_global_header(true, false, false, 0, 1).to_vec();
        let (recs, issues, _) = collect([a, empty.clone(), b, empty].concat()).unwrap();
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(rows(&recs), want);
    }

    #[test]
    fn concatenated_gzip_members() {
        // `cat a.pcap.gz b.pcap.gz`: a multi-member gzip stream.
        let (a, b, want) = two_pcaps(7);
        let (recs, issues, comp) = collect([gz(&a), gz(&b)].concat()).unwrap();
        assert_eq!(comp, Compression::Gzip);
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(rows(&recs), want);
        // Zstd frames concatenate the same way.
        let zs = |x: &[u8]| zstd::stream::encode_all(x, 1).unwrap();
        let (recs, issues, _) = collect([zs(&a), zs(&b)].concat()).unwrap();
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
        use crate::writer::pcap_global_header;
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
}

#[cfg(test)]
mod fuzz_like {
    //! The fuzz targets' property in the ordinary test run: arbitrary bytes
    //! behind a valid file header never panic and always make progress.
    use super::*;
    use crate::writer::{pcap_global_header, PcapBuilder, PcapngBuilder};
    use proptest::prelude::*;

    fn drain(bytes: Vec<u8>) -> u64 {
        let Ok(input) = open_reader("p", Box::new(Cursor::new(bytes)), None) else {
            return 0;
        };
        let Ok(mut sp) = Splitter::new(input, 0) else {
            return 0;
        };
        let mut issues = Issues::default();
        let mut n = 0;
        let mut guard = 0;
        let mut buf = Vec::new();
        while let Ok(Some(c)) = sp.next_chunk(std::mem::take(&mut buf)) {
            let mut f = crate::decode::Fields::default();
            c.for_each_packet(&mut issues, |p| {
                crate::decode::decode(p.linktype, p.data, &mut f);
                n += 1;
            });
            buf = c.buf;
            guard += 1;
            assert!(guard < 10_000, "no progress");
        }
        n
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn junk_after_pcap_header(be in any::<bool>(), lt in 0u32..300, body in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let mut b = pcap_global_header(be, false, false, 65535, lt).to_vec();
            b.extend(body);
            drain(b);
        }

        #[test]
        fn junk_after_pcapng_shb(be in any::<bool>(), body in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let mut b = PcapngBuilder::new();
            b.shb(be).idb(1, 0, None, None);
            let mut bytes = b.bytes;
            bytes.extend(body);
            drain(bytes);
        }

        #[test]
        fn flipped_bytes_in_a_valid_capture(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..16)) {
            let mut b = PcapBuilder::new(false, false, false, 65535, 1);
            for i in 0..40u32 {
                b.record(i, 0, &vec![i as u8; 60 + i as usize * 7]);
            }
            let mut bytes = b.bytes;
            for (at, v) in flips {
                let n = bytes.len();
                bytes[at % n] ^= v;
            }
            drain(bytes);
        }

        #[test]
        fn flipped_bytes_in_a_valid_pcapng(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..16)) {
            // Bad block lengths send the reader scanning for the next block.
            let mut b = PcapngBuilder::new();
            b.shb(false).idb(1, 0, None, None);
            for i in 0..40u32 {
                b.epb(0, i as u64, &vec![i as u8; 60 + i as usize * 7], 60 + i * 7);
            }
            let mut bytes = b.bytes;
            for (at, v) in flips {
                let n = bytes.len();
                bytes[at % n] ^= v;
            }
            drain(bytes);
        }
    }
}
