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
pub mod lab;
#[cfg(feature = "parquet")]
pub mod parquet_out;
pub mod wire;

/// Errors of the pcap lab: the capture reader's, which lives in core so
/// the pipeline lab's replay reads captures with the same reader.
pub use commbench_core::capture::CaptureError as PcapError;
/// The capture reader, its issue counts, the file mapping and the writer,
/// in core (`commbench_core::capture`), named here as they always were.
pub use commbench_core::capture::{issues, mapped, reader, writer};

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
    // The extraction's threads are left to the scheduler.
    r.push_metric(
        "placement",
        commbench_core::placement::describe(&[("process", None)], &[]),
    );
    rec.push(r);
    Ok(rep)
}

pub use figures::figures;
pub use lab::PcapLab;

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
