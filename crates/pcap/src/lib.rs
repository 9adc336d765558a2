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

pub mod bench;
pub mod cache;
pub mod decode;
pub mod extract;
pub mod figures;
pub mod format;
pub mod gen;
pub mod issues;
pub mod mapped;
#[cfg(feature = "parquet")]
pub mod parquet_out;
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

pub use bench::{BenchConfig, BenchReport, CacheState};
pub use extract::{ExtractConfig, ExtractReport};
pub use gen::GenConfig;

use commbench_core::record::{Record, Recorder};
use commbench_core::rusage::RunMeter;

/// Extracts `cfg` to a sink and records MB/s, packets/s and CPU per packet.
pub fn measure_extract(
    cfg: &ExtractConfig,
    test: &str,
    rec: &mut Recorder,
) -> Result<ExtractReport, PcapError> {
    let meter = RunMeter::start();
    let rep = extract::extract(cfg, &mut io::sink(), &mut |_| {})?;
    let u = meter.finish_with_threads(rep.packets, cfg.threads as u64 + 1);
    let mut r = Record::new("pcap", test)
        .param("inputs", cfg.inputs.len())
        .param("threads", cfg.threads)
        .param("fields", cfg.fields.len())
        .metric("packets", rep.packets)
        .metric("stream_bytes", rep.stream_bytes)
        .metric("mb_s", rep.stream_bytes as f64 / 1e6 / u.wall_s)
        .metric("pkt_s", rep.packets as f64 / u.wall_s)
        .metric("cpu_mb_s", rep.stream_bytes as f64 / 1e6 / u.cpu_s())
        .metric("bad_input", rep.issues.total())
        .metric(
            "undecoded_linktypes",
            rep.issues
                .undecoded()
                .iter()
                .map(|(lt, n)| serde_json::json!({"linktype": lt, "records": n}))
                .collect::<Vec<_>>(),
        )
        .metric("skipped_bytes", rep.issues.skipped_bytes())
        .metric(
            "skipped",
            rep.issues
                .skipped()
                .iter()
                .map(|s| {
                    serde_json::json!({"file": s.file, "from": s.from, "to": s.to, "bytes": s.bytes()})
                })
                .collect::<Vec<_>>(),
        );
    u.add_to(&mut r);
    rec.push(r);
    Ok(rep)
}

/// A quick pass for `commbench suite`: generate a capture (plain and gzip),
/// extract it with one thread and with all threads, and (when running as
/// the commbench binary) bench it cold and warm once.
pub fn suite(quick: bool, rec: &mut Recorder) -> Result<(), PcapError> {
    let dir = commbench_core::artifact::TempDir::new("pcap").map_err(|e| PcapError::Io {
        path: std::env::temp_dir().display().to_string(),
        source: e,
    })?;
    let size: u64 = if quick { 32 << 20 } else { 256 << 20 };
    let plain = dir.path().join("suite.pcap");
    let gz = dir.path().join("suite.pcap.gz");
    for (path, compression) in [
        (&plain, reader::Compression::None),
        (&gz, reader::Compression::Gzip),
    ] {
        rec.progress(&format!("pcap: generating {}", path.display()));
        let mut f = std::fs::File::create(path).map_err(|e| PcapError::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        let cfg = GenConfig {
            size,
            compression,
            zero_payload: compression != reader::Compression::None,
            ..Default::default()
        };
        gen::generate(&cfg, &mut f).map_err(|e| PcapError::Io {
            path: path.display().to_string(),
            source: e,
        })?;
    }
    let all = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    for (path, test) in [(&plain, "extract"), (&gz, "extract_gzip")] {
        for threads in [1, all] {
            rec.progress(&format!("pcap: {test} with {threads} thread(s)"));
            let cfg = ExtractConfig {
                inputs: vec![path.display().to_string()],
                threads,
                ..Default::default()
            };
            measure_extract(&cfg, test, rec)?;
        }
    }
    let exe = std::env::current_exe().ok();
    if let Some(exe) = exe.filter(|e| {
        e.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("commbench"))
    }) {
        let cfg = BenchConfig {
            file: plain.clone(),
            caches: vec![CacheState::Cold, CacheState::Warm],
            runs: 1,
            ours: vec![
                exe.display().to_string(),
                "pcap".into(),
                "extract".into(),
                "-q".into(),
                "-o".into(),
                "/dev/null".into(),
            ],
            compare_cmd: None,
        };
        bench::run(&cfg, rec)?;
    }
    Ok(())
}

pub use figures::figures;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::PcapngBuilder;

    #[test]
    fn json_record_lists_the_bytes_skipped_after_a_bad_block() {
        let mut b = PcapngBuilder::new();
        b.shb(false).idb(1, 0, None, None);
        let mut at = Vec::new();
        for i in 0..6u8 {
            at.push(b.bytes.len());
            b.epb(0, i as u64, &[i; 60], 60);
        }
        b.bytes[at[3] + 4] ^= 0x10; // EPB 4's length: 92 -> 76
        let tmp = commbench_core::artifact::TempDir::new("pcap").unwrap();
        let p = tmp.path().join("bad.pcapng");
        std::fs::write(&p, &b.bytes).unwrap();
        let cfg = ExtractConfig {
            inputs: vec![p.display().to_string()],
            ..Default::default()
        };
        let mut rec = Recorder::new();
        let rep = measure_extract(&cfg, "t", &mut rec).unwrap();
        assert_eq!(rep.packets, 5);
        let m = &rec.records()[0].metrics;
        assert_eq!(m["bad_input"], 1);
        assert_eq!(m["skipped_bytes"], 92);
        let (from, to) = (at[3] as u64, at[4] as u64);
        assert_eq!(
            m["skipped"],
            serde_json::json!([{"file": 0, "from": from, "to": to, "bytes": 92}])
        );
    }
}
