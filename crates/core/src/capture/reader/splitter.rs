//! The splitter: reads the (decompressed) stream into large reused buffers
//! and cuts them into `Chunk`s of whole records, touching only the record
//! headers, so that the records can be walked on any thread
//! (`Chunk::for_each_packet`). A mapped file is framed in place, without a
//! copy. The format-specific framers are `Splitter::frame_pcap` (`pcap`)
//! and `Splitter::frame_pcapng` (`pcapng`); a capture file header at a
//! record boundary switches `framing` (`concat`).
//!
//! Invariants: the bytes of a record cut by a buffer's end are carried to
//! the next buffer (`tail`), never lost or read twice; a block larger than
//! a buffer is skipped by streaming (`skip`); chunks come in stream order,
//! their records numbered on from `base_record`; a cut or corrupt
//! compressed stream ends the input with what was decoded, counted as
//! `TruncatedRecord`.

use std::io::{self, Read};
use std::sync::Arc;

use super::decompress::{io_err, read_up_to, Compression, Input};
use super::pcap::{NoVisit, PcapHeader, RecordVisitor, Visit};
use super::pcapng::{NgSection, PCAPNG_BOM, PCAPNG_SHB};
use super::{rd16, CHUNK_CAPACITY};
use crate::capture::issues::{IssueKind, Issues};
use crate::capture::mapped::Mapping;
use crate::capture::CaptureError;

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
}

pub(super) enum Framing {
    Pcap {
        header: PcapHeader,
        /// Searching for a plausible record after a corrupt one.
        resync: bool,
        last_ts: Option<u32>,
    },
    Pcapng(Arc<NgSection>),
}

/// Cuts a capture stream into chunks of whole records.
pub struct Splitter {
    input: Box<dyn Read + Send>,
    name: String,
    pub(super) file: u32,
    pub(super) framing: Framing,
    tail: Vec<u8>,
    /// Stream offset of `tail[0]`.
    offset: u64,
    pub(super) next_record: u64,
    /// Bytes still to discard from the input (an oversized block).
    pub(super) skip: u64,
    /// Stream offset of a bad pcapng block: scanning for the next
    /// plausible one.
    pub(super) ng_resync: Option<u64>,
    /// Length of the stream when known (a plain regular file).
    pub(super) stream_len: Option<u64>,
    /// pcapng custom blocks numbered so far (numbered records that are
    /// not packets).
    pub(super) custom_frames: u64,
    pub(super) eof: bool,
    pub(super) done: bool,
    /// Mapped file and the offset of the next unframed byte.
    map: Option<Arc<Mapping>>,
    /// Bytes per chunk (at least `CHUNK_CAPACITY`).
    chunk: usize,
}

/// The format version of the pcapng SHB at the start of `b`, when its
/// byte-order magic is readable. Only the first section's is checked (as
/// tshark refuses the file at open); a later section is read as it comes.
fn shb_version(b: &[u8]) -> Option<(u16, u16)> {
    if b.len() < 16 {
        return None;
    }
    let be = match u32::from_le_bytes([b[8], b[9], b[10], b[11]]) {
        PCAPNG_BOM => false,
        v if v.swap_bytes() == PCAPNG_BOM => true,
        _ => return None,
    };
    Some((rd16(b, 12, be), rd16(b, 14, be)))
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
    pub fn new(mut input: Input, file: u32) -> Result<Self, CaptureError> {
        let mut head = [0u8; PcapHeader::LEN];
        let n = read_up_to(&mut input.reader, &mut head).map_err(|e| io_err(&input.name, e))?;
        let not_capture = |n: usize| CaptureError::NotACapture {
            path: input.name.clone(),
            magic: head[..n.min(4)]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let unsupported = |format, (major, minor)| CaptureError::UnsupportedVersion {
            path: input.name.clone(),
            format,
            major,
            minor,
        };
        let (framing, tail, offset) = if n >= 4 && head[..4] == PCAPNG_SHB.to_be_bytes() {
            if let Some(version) = shb_version(&head[..n]) {
                if !matches!(version, (1, 0) | (1, 2)) {
                    return Err(unsupported("pcapng", version));
                }
            }
            (
                Framing::Pcapng(Arc::new(NgSection::default())),
                head[..n].to_vec(),
                0,
            )
        } else if let Some(h) = PcapHeader::parse(&head[..n]) {
            if !h.version_supported() {
                return Err(unsupported("pcap", h.version));
            }
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
    ) -> Result<usize, CaptureError> {
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

    fn discard(&mut self, buf: &mut [u8], issues: &mut Issues) -> Result<(), CaptureError> {
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
    pub fn next_chunk(&mut self, buf: Vec<u8>) -> Result<Option<Chunk>, CaptureError> {
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
    ) -> Result<Option<Chunk>, CaptureError> {
        self.next_chunk_inner(buf, &mut Visit { issues, f })
    }

    fn next_chunk_inner<V: RecordVisitor>(
        &mut self,
        mut buf: Vec<u8>,
        visit: &mut V,
    ) -> Result<Option<Chunk>, CaptureError> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::reader::testutil::{collect, pkt};
    use crate::capture::writer::PcapBuilder;

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
    fn not_a_capture() {
        for junk in [&b""[..], b"hello world, this is text\n", &[0xd4, 0xc3]] {
            match collect(junk.to_vec()) {
                Err(CaptureError::NotACapture { .. }) => {}
                other => panic!("expected NotACapture, got {:?}", other.map(|r| r.0.len())),
            }
        }
    }
}

#[cfg(test)]
mod fuzz_like {
    //! The fuzz targets' property in the ordinary test run: arbitrary bytes
    //! behind a valid file header never panic and always make progress.
    use super::*;
    use crate::capture::reader::open_reader;
    use crate::capture::writer::{pcap_global_header, PcapBuilder, PcapngBuilder};
    use proptest::prelude::*;
    use std::io::Cursor;

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
            c.for_each_packet(&mut issues, |p| {
                // Every record's bytes are within its chunk.
                assert!(p.data.len() <= c.buf.len());
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
