//! Captures: the reader of pcap and pcapng files (plain, gzip or zstd;
//! see [`reader`]), the counts of what was wrong in one ([`issues`]), the
//! read-only mapping of a plain file ([`mapped`]) and a writer
//! ([`writer`]). The pcap lab extracts fields with it and the pipeline lab
//! replays captures through a device with it: one reader, so a capture
//! either lab accepts the other accepts too.

use std::io;

pub mod issues;
pub mod mapped;
pub mod reader;
pub mod writer;

/// Errors of reading a capture (and of the pcap lab, which names this
/// type `PcapError`).
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The reason is in the message and not a `source` as well: with both,
    /// `pcap extract nope.pcap` said "No such file or directory (os error
    /// 2): No such file or directory (os error 2)".
    #[error("{path}: {error}")]
    Io { path: String, error: io::Error },
    #[error("{path}: not a capture file (first bytes: {magic}); expected pcap or pcapng, plain or gzip/zstd-compressed")]
    NotACapture { path: String, magic: String },
    #[error("{path}: unsupported {format} format version {major}.{minor} (pcap: 2.x; pcapng: 1.0 or 1.2); tshark and libpcap refuse it too")]
    UnsupportedVersion {
        path: String,
        format: &'static str,
        major: u16,
        minor: u16,
    },
    #[error("{path}: bad input (--strict): {kind} at record {record}, byte offset {offset}")]
    Strict {
        path: String,
        kind: &'static str,
        record: u64,
        offset: u64,
    },
    #[error("writing output: {0}")]
    Output(#[source] io::Error),
    #[error("{0}")]
    Config(String),
}
