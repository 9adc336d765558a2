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
