//! Opening an input: a path (`-` is standard input; a named pipe with no
//! writer after a second gets a notice on stderr), a plain regular file
//! optionally memory-mapped, or any reader. A gzip (multi-member, so
//! `cat a.gz b.gz` works) or zstd stream (concatenated frames too) is
//! recognised by its first bytes and decompressed on the fly.
//!
//! Invariants: the magic bytes read for detection are put back in front of
//! the stream, so the reader sees every byte; only a plain regular file is
//! mapped (a compressed one is always read through the decoder).

use std::fs::File;
use std::io::{self, BufReader, Cursor, Read};
use std::sync::Arc;

use super::pcap::PcapHeader;
use crate::capture::mapped::Mapping;
use crate::capture::CaptureError;

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

pub(super) fn io_err(path: &str, e: io::Error) -> CaptureError {
    CaptureError::Io {
        path: path.to_string(),
        error: e,
    }
}

pub(super) fn read_up_to(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
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
pub fn open(path: &str) -> Result<Input, CaptureError> {
    open_with(path, false)
}

/// Like `open`; with `mmap`, a plain (uncompressed) regular file is mapped
/// instead of read through buffers.
pub fn open_with(path: &str, mmap: bool) -> Result<Input, CaptureError> {
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
) -> Result<Input, CaptureError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::issues::IssueKind;
    use crate::capture::reader::testutil::{collect, gz, ng_image, rows, two_pcaps};
    use std::io::Write;

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
}
