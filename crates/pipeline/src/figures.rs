//! The figures this lab declares for the report: the seed's two unfinished
//! studies and its delay injection, one figure per sweep — Mpps over tx
//! bulk size (TxBuffer), over RSS queues, over injected delay per packet —
//! one series per mode, frame size and work, the median over repeats.

use commbench_core::figure::{FigureKind, FigureSpec};

pub fn figures() -> Vec<FigureSpec> {
    vec![
        FigureSpec {
            kind: FigureKind::Stacked(&["ticks_rx", "ticks_work", "ticks_tx"]),
            lab: "pipeline",
            test: "run",
            title: "pipeline: TSC ticks per packet, rx burst + work + tx",
            caption: "What each part of a DPDK-style loop costs per packet (the seed's three parts); compare with the ticks a link speed allows per packet.",
            x: "mode",
            y: "",
            series: &["size", "work"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "pipeline",
            test: "rss-hash",
            title: "pipeline: Toeplitz ticks per hash, byte table vs bitwise",
            caption: "The RSS hash in software: the byte-table form against the bit-by-bit definition, per input kind. Lower is better.",
            x: "input",
            y: "ticks_per_hash",
            series: &["impl"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "pipeline",
            test: "sweep-tx-bulk",
            title: "pipeline: Mpps vs tx bulk size (TxBuffer)",
            caption: "How much does buffering transmissions into bulks of B packets buy? The seed's TxBuffer study.",
            x: "tx_bulk",
            y: "mpps",
            series: &["mode", "size", "work"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "pipeline",
            test: "sweep-queues",
            title: "pipeline: Mpps vs RSS queues",
            caption: "How does throughput scale with RSS queues (one worker each)? The seed's missing rss_result graph; queues beyond the CPU count share cores.",
            x: "queues",
            y: "mpps",
            series: &["mode", "size", "work"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "pipeline",
            test: "sweep-delay",
            title: "pipeline: Mpps vs injected delay per packet (ns)",
            caption: "Throughput against injected per-packet work (the seed's delay injection).",
            x: "delay_ns",
            y: "mpps",
            series: &["mode", "size"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "pipeline",
            test: "rfc2544-ndr",
            title: "pipeline: RFC 2544 throughput (NDR) per frame size, Mpps",
            caption: "The highest rate the device forwarded without losing a frame, per frame size (median over repeated searches with its 95% interval).",
            x: "size",
            y: "rate_mpps",
            series: &["dut"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "pipeline",
            test: "rfc2544-loss",
            title: "pipeline: frame loss (%) vs offered load (% of the maximum rate)",
            caption: "RFC 2544's frame-loss rate: what share of the frames is lost at each offered load.",
            x: "load_pct",
            y: "loss_pct",
            series: &["dut", "size"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "pipeline",
            test: "rfc2544-loss",
            title: "pipeline: one-way latency p99 (ns) vs offered load (%)",
            caption: "The latency ladder: how the tail grows as the offered load nears the device's capacity.",
            x: "load_pct",
            y: "latency_p99_ns",
            series: &["dut", "size"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "pipeline",
            test: "crosscheck",
            title: "pipeline: black-box NDR of l2fwd vs injected delay (pps)",
            caption: "The seed's question: the measured NDR against the delay injected per packet; compare with predicted_pps in the records (the white-box cost model).",
            x: "delay_ns",
            y: "measured_pps",
            series: &["size", "rx"],
            filter: None,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use commbench_core::Record;

    #[test]
    fn each_sweep_has_a_figure_that_takes_its_records() {
        let f = figures();
        let r = Record::new("pipeline", "sweep-queues")
            .param("mode", "rtc")
            .param("size", 64)
            .param("work", "swap")
            .param("queues", 2);
        assert!(f.iter().any(|s| s.accepts(&r) && s.x == "queues"));
        assert!(f
            .iter()
            .any(|s| s.accepts(&r) && s.series_name(&r) == "rtc 64 swap"));
        assert!(!f
            .iter()
            .any(|s| s.kind == FigureKind::Line && s.accepts(&Record::new("pipeline", "run"))));
    }
}
