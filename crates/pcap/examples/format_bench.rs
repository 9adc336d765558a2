//! Formatting micro-benchmark: decodes the first 8,000 packets of a capture
//! (small enough to stay in L2), then formats them as CSV many times and
//! prints the best time per packet — for the default columns, then for each
//! field alone (the chosen-fields path). The best of many short passes
//! survives a shared, noisy machine far better than end-to-end wall time.
//!
//! `cargo run --release -p commbench-pcap --example format_bench -- FILE`

use commbench_pcap::decode::{decode, has, Fields};
use commbench_pcap::format::{Field, Formatter, OutBuf, OutputFormat};
use commbench_pcap::issues::Issues;
use commbench_pcap::reader::{open, Splitter};
use std::time::Instant;

const PACKETS: usize = 8_000;

fn best_ns_per_packet(passes: usize, fields: &[Fields], fmt: &Formatter, out: &mut OutBuf) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..passes {
        let t = Instant::now();
        for chunk in fields.chunks(400) {
            out.clear();
            for (i, f) in chunk.iter().enumerate() {
                fmt.write(i as u64, f, out);
            }
            std::hint::black_box(out.as_bytes());
        }
        best = best.min(t.elapsed().as_nanos() as f64 / fields.len() as f64);
    }
    best
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: format_bench CAPTURE")?;
    let mut sp = Splitter::new(open(&path)?, 0)?;
    let mut all = Vec::with_capacity(PACKETS);
    let mut buf = Vec::new();
    let mut issues = Issues::default();
    while all.len() < PACKETS {
        let Some(c) = sp.next_chunk(std::mem::take(&mut buf))? else {
            break;
        };
        c.for_each_packet(&mut issues, |p| {
            let mut f = Fields {
                ts_sec: p.ts_sec,
                ts_nsec: p.ts_nsec,
                caplen: p.caplen,
                len: p.len,
                ..Default::default()
            };
            if !p.has_ts {
                f.present = has::NO_TS;
            }
            decode(p.linktype, p.data, &mut f);
            if all.len() < PACKETS {
                all.push(f);
            }
        });
        buf = c.buf;
    }
    if all.is_empty() {
        return Err("no packets in the capture".into());
    }
    let mut out = OutBuf::new();
    let fmt = Formatter::new(Field::defaults(), OutputFormat::Csv);
    println!(
        "{} packets; default columns: {:.1} ns/packet",
        all.len(),
        best_ns_per_packet(300, &all, &fmt, &mut out)
    );
    for field in Field::ALL {
        let fmt = Formatter::new(vec![field], OutputFormat::Csv);
        let ns = best_ns_per_packet(100, &all, &fmt, &mut out);
        println!("{:>10}: {ns:.1} ns/packet", field.name());
    }
    Ok(())
}
