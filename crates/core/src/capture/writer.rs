//! Capture writers: a streaming pcap writer (used by `gen`) and a small
//! in-memory builder for pcap and pcapng byte images in any byte order and
//! variant (used by tests, fuzz seeds and the reader's own checks).
//!
//! Invariant: the builder writes exactly what the formats' specifications
//! say, including the odd parts (big-endian sections, the modified pcap
//! record header, SPB without a timestamp), so the readers are tested
//! against every variant they claim to read.

use std::io::{self, Write};

/// Streaming little-endian pcap writer.
pub struct PcapWriter<W: Write> {
    w: W,
    snaplen: u32,
    nsec: bool,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut w: W, linktype: u32, snaplen: u32, nsec: bool) -> io::Result<Self> {
        w.write_all(&pcap_global_header(false, nsec, false, snaplen, linktype))?;
        Ok(Self { w, snaplen, nsec })
    }

    /// Writes one record; `frac_ns` is the sub-second part in nanoseconds
    /// (rounded down to microseconds for a microsecond file). The data is
    /// cut to the snaplen; `orig_len` is the wire length.
    pub fn write_packet(
        &mut self,
        ts_sec: u32,
        frac_ns: u32,
        data: &[u8],
        orig_len: u32,
    ) -> io::Result<usize> {
        let caplen = data.len().min(self.snaplen as usize);
        let frac = if self.nsec { frac_ns } else { frac_ns / 1000 };
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&ts_sec.to_le_bytes());
        h[4..8].copy_from_slice(&frac.to_le_bytes());
        h[8..12].copy_from_slice(&(caplen as u32).to_le_bytes());
        h[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.w.write_all(&h)?;
        self.w.write_all(&data[..caplen])?;
        Ok(16 + caplen)
    }

    pub fn into_inner(self) -> W {
        self.w
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.w
    }
}

/// A pcap global header.
pub fn pcap_global_header(
    big_endian: bool,
    nsec: bool,
    modified: bool,
    snaplen: u32,
    linktype: u32,
) -> [u8; 24] {
    let magic: u32 = if modified {
        0xa1b2_cd34
    } else if nsec {
        0xa1b2_3c4d
    } else {
        0xa1b2_c3d4
    };
    let mut h = [0u8; 24];
    let w32 = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    h[0..4].copy_from_slice(&w32(magic));
    h[4..6].copy_from_slice(&w16(2));
    h[6..8].copy_from_slice(&w16(4));
    h[16..20].copy_from_slice(&w32(snaplen));
    h[20..24].copy_from_slice(&w32(linktype));
    h
}

/// Builds a pcap image in memory.
pub struct PcapBuilder {
    pub bytes: Vec<u8>,
    big_endian: bool,
    modified: bool,
}

impl PcapBuilder {
    pub fn new(big_endian: bool, nsec: bool, modified: bool, snaplen: u32, linktype: u32) -> Self {
        Self {
            bytes: pcap_global_header(big_endian, nsec, modified, snaplen, linktype).to_vec(),
            big_endian,
            modified,
        }
    }

    fn w32(&mut self, v: u32) {
        let b = if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.bytes.extend_from_slice(&b);
    }

    /// Appends a record with explicit caplen (may lie) and wire length.
    pub fn record_raw(
        &mut self,
        ts_sec: u32,
        frac: u32,
        caplen: u32,
        len: u32,
        data: &[u8],
    ) -> &mut Self {
        self.w32(ts_sec);
        self.w32(frac);
        self.w32(caplen);
        self.w32(len);
        if self.modified {
            self.w32(1); // ifindex
            self.bytes.extend_from_slice(&[0x08, 0x00, 0, 0]); // protocol, pkt_type, pad
        }
        self.bytes.extend_from_slice(data);
        self
    }

    pub fn record(&mut self, ts_sec: u32, frac: u32, data: &[u8]) -> &mut Self {
        self.record_raw(ts_sec, frac, data.len() as u32, data.len() as u32, data)
    }

    /// Rewrites the global header's format version (2.4 by default), for
    /// files as old libpcaps wrote them (2.2: caplen and len swapped) or
    /// versions nobody reads.
    pub fn version(&mut self, major: u16, minor: u16) -> &mut Self {
        for (at, v) in [(4, major), (6, minor)] {
            let b = if self.big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            };
            self.bytes[at..at + 2].copy_from_slice(&b);
        }
        self
    }
}

/// Builds a pcapng image in memory, one block at a time.
#[derive(Default)]
pub struct PcapngBuilder {
    pub bytes: Vec<u8>,
    big_endian: bool,
}

impl PcapngBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    fn v32(&self, v: u32) -> [u8; 4] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn v16(&self, v: u16) -> [u8; 2] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    /// Appends a block with `body` (padded to 4) and both length fields.
    pub fn block(&mut self, btype: u32, body: &[u8]) -> &mut Self {
        let padded = body.len().div_ceil(4) * 4;
        let total = (12 + padded) as u32;
        let t = self.v32(btype);
        let l = self.v32(total);
        self.bytes.extend_from_slice(&t);
        self.bytes.extend_from_slice(&l);
        self.bytes.extend_from_slice(body);
        self.bytes
            .extend(std::iter::repeat_n(0u8, padded - body.len()));
        self.bytes.extend_from_slice(&l);
        self
    }

    /// Section header block; switches the byte order of what follows.
    pub fn shb(&mut self, big_endian: bool) -> &mut Self {
        self.shb_version(big_endian, 1, 0)
    }

    /// Section header block with an explicit format version (1.0 is the
    /// only one written; 1.2 is read as well).
    pub fn shb_version(&mut self, big_endian: bool, major: u16, minor: u16) -> &mut Self {
        self.big_endian = big_endian;
        let mut body = Vec::new();
        body.extend_from_slice(&self.v32(0x1a2b_3c4d));
        body.extend_from_slice(&self.v16(major));
        body.extend_from_slice(&self.v16(minor));
        body.extend_from_slice(&[0xff; 8]); // section length unknown
        self.block(0x0a0d_0d0a, &body)
    }

    /// Interface description block with optional `if_tsresol`/`if_tsoffset`.
    pub fn idb(
        &mut self,
        linktype: u16,
        snaplen: u32,
        tsresol: Option<u8>,
        tsoffset: Option<i64>,
    ) -> &mut Self {
        let mut body = Vec::new();
        body.extend_from_slice(&self.v16(linktype));
        body.extend_from_slice(&self.v16(0));
        body.extend_from_slice(&self.v32(snaplen));
        if let Some(r) = tsresol {
            body.extend_from_slice(&self.v16(9));
            body.extend_from_slice(&self.v16(1));
            body.extend_from_slice(&[r, 0, 0, 0]);
        }
        if let Some(o) = tsoffset {
            body.extend_from_slice(&self.v16(14));
            body.extend_from_slice(&self.v16(8));
            let o = o as u64;
            let (first, second) = if self.big_endian {
                ((o >> 32) as u32, o as u32)
            } else {
                (o as u32, (o >> 32) as u32)
            };
            body.extend_from_slice(&self.v32(first));
            body.extend_from_slice(&self.v32(second));
        }
        if tsresol.is_some() || tsoffset.is_some() {
            body.extend_from_slice(&[0; 4]); // opt_endofopt
        }
        self.block(1, &body)
    }

    /// Enhanced packet block.
    pub fn epb(&mut self, iface: u32, ts: u64, data: &[u8], orig_len: u32) -> &mut Self {
        let mut body = Vec::new();
        body.extend_from_slice(&self.v32(iface));
        body.extend_from_slice(&self.v32((ts >> 32) as u32));
        body.extend_from_slice(&self.v32(ts as u32));
        body.extend_from_slice(&self.v32(data.len() as u32));
        body.extend_from_slice(&self.v32(orig_len));
        body.extend_from_slice(data);
        self.block(6, &body)
    }

    /// Simple packet block (no timestamp, interface 0).
    pub fn spb(&mut self, data: &[u8], orig_len: u32) -> &mut Self {
        let mut body = Vec::new();
        body.extend_from_slice(&self.v32(orig_len));
        body.extend_from_slice(data);
        self.block(3, &body)
    }

    /// Obsolete packet block.
    pub fn pb(&mut self, iface: u16, ts: u64, data: &[u8], orig_len: u32) -> &mut Self {
        let mut body = Vec::new();
        body.extend_from_slice(&self.v16(iface));
        body.extend_from_slice(&self.v16(0));
        body.extend_from_slice(&self.v32((ts >> 32) as u32));
        body.extend_from_slice(&self.v32(ts as u32));
        body.extend_from_slice(&self.v32(data.len() as u32));
        body.extend_from_slice(&self.v32(orig_len));
        body.extend_from_slice(data);
        self.block(2, &body)
    }
}
