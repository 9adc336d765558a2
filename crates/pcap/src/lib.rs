//! commbench pcap lab (seed: pcap-ruby-extension): capture readers, header
//! decoders, fast field extraction, a capture generator and an honest
//! cold/warm-cache benchmark.
//!
//! The seed's author rewrote a Ruby header parser in C, got 2× with a warm
//! page cache, and found that with a cold cache the disk dominated. This
//! crate keeps both lessons in the tool: extraction is fast enough that the
//! parser is rarely the bottleneck, and `bench` says when the run was I/O
//! bound instead of leaving it to a footnote.
#![deny(unsafe_code)]

use std::io;

pub mod decode;
pub mod issues;
pub mod reader;
pub mod wire;
pub mod writer;

/// Errors of the pcap lab.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not a capture file (first bytes: {magic}); expected pcap or pcapng, plain or gzip/zstd-compressed")]
    NotACapture { path: String, magic: String },
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
