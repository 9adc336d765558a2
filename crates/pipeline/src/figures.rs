//! The figures this lab declares for the report: the seed's two unfinished
//! studies and its delay injection, one figure per sweep — Mpps over tx
//! bulk size (TxBuffer), over RSS queues, over injected delay per packet —
//! one series per mode, frame size and work, the median over repeats.

use commbench_core::figure::{FigureKind, FigureSpec, Reference};
use commbench_core::Record;

/// Link speeds whose per-packet budget the stacked figure draws (Gb/s).
const LINKS_GBPS: [f64; 4] = [10.0, 25.0, 40.0, 100.0];

/// The ticks per packet each link of [`LINKS_GBPS`] allows at the frame
/// size of the records drawn, from the records themselves: a run records
/// its ticks and what is left of the 10 GbE budget, so the budget is their
/// sum (the median over the records of the most common frame size), and
/// a link N times faster allows 1/N of it.
fn link_budgets(records: &[&Record]) -> Vec<Reference> {
    let size = |r: &Record| r.params.get("size").and_then(|v| v.as_u64());
    let mut sizes: Vec<u64> = records.iter().filter_map(|r| size(r)).collect();
    sizes.sort_unstable();
    let Some(common) = sizes
        .chunk_by(|a, b| a == b)
        .max_by_key(|c| c.len())
        .map(|c| c[0])
    else {
        return Vec::new();
    };
    let mut at_10g: Vec<f64> = records
        .iter()
        .filter(|r| size(r) == Some(common))
        .filter_map(|r| Some(r.metric_f64("ticks_total")? + r.metric_f64("left_ticks_10G")?))
        .filter(|b| b.is_finite() && *b > 0.0)
        .collect();
    if at_10g.is_empty() {
        return Vec::new();
    }
    at_10g.sort_by(f64::total_cmp);
    let b10 = at_10g[at_10g.len() / 2];
    LINKS_GBPS
        .iter()
        .map(|g| Reference {
            label: format!("{g} GbE at {common} B"),
            y: b10 * 10.0 / g,
        })
        .collect()
}

pub fn figures() -> Vec<FigureSpec> {
    vec![
        FigureSpec {
            kind: FigureKind::Stacked(&["ticks_rx", "ticks_work", "ticks_tx", "ticks_sink"]),
            lab: "pipeline",
            test: "run",
            title: "pipeline: TSC ticks per packet, rx burst + work + tx",
            caption: "What each part of a DPDK-style loop costs per packet (the seed's three parts; pipeline mode adds the tx completion on its I/O thread, and its bar is the ticks over both threads). Dashed lines: the ticks per packet a 10, 25, 40 and 100 GbE link allows at the frame size drawn; a bar below a line keeps up with that link.",
            x: "mode",
            y: "",
            series: &["size", "work"],
            filter: None,
            x_label: "mode",
            y_label: "TSC ticks per packet",
            reference: Some(link_budgets),
            more_x: "",
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
            x_label: "hash input",
            y_label: "",
            reference: None,
            more_x: "",
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
            x_label: "tx bulk (packets)",
            y_label: "",
            reference: None,
            more_x: "commbench pipeline run --sweep tx-bulk=1,2,4,8,16,32",
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
            x_label: "RSS queues",
            y_label: "",
            reference: None,
            more_x: "commbench pipeline run --sweep queues=1..4",
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
            x_label: "injected delay per packet (ns)",
            y_label: "",
            reference: None,
            more_x: "commbench pipeline run --sweep delay=0,10,50,100,500",
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
            x_label: "frame size (B)",
            y_label: "",
            reference: None,
            more_x: "",
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
            x_label: "offered load (% of the maximum rate)",
            y_label: "",
            reference: None,
            more_x: "sudo commbench pipeline rfc2544 --ladder 10",
        },
        FigureSpec {
            kind: FigureKind::Scatter,
            lab: "pipeline",
            test: "rfc2544-trial",
            title: "pipeline: loss ratio (%) of every search trial vs offered load (pps)",
            caption: "Every trial of the throughput searches, as measured: the share of frames lost at the load offered (an MLRsearch trial counts for every goal at once). The goals' bounds lie where the trials turn from no loss to loss; loss below a bound is a host pause the exceed ratio absorbed or a trial not counted (the tester's or the host's trouble, `counted false` in the records).",
            x: "offered_pps",
            y: "loss_pct",
            series: &["dut", "size", "method"],
            filter: None,
            x_label: "offered load (pps)",
            y_label: "loss ratio",
            reference: None,
            more_x: "",
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "pipeline",
            test: "rfc2544-latency",
            title: "pipeline: one-way latency p99 (ns) vs offered load (% of the NDR)",
            caption: "The latency ladder: how the tail grows as the offered load nears the highest rate the device forwards without loss.",
            x: "load_pct",
            y: "latency_p99_ns",
            series: &["dut", "size"],
            filter: None,
            x_label: "offered load (% of the NDR)",
            y_label: "",
            reference: None,
            more_x: "sudo commbench pipeline rfc2544 --latency-ladder 5",
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
            x_label: "injected delay per packet (ns)",
            y_label: "",
            reference: None,
            more_x: "sudo commbench pipeline crosscheck --delays 0,50,100,500,1000",
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_budgets_come_from_the_records_ticks_and_what_is_left() {
        let r = Record::new("pipeline", "run")
            .param("size", 64)
            .metric("ticks_total", 9.0)
            .metric("left_ticks_10G", 165.0);
        let refs = link_budgets(&[&r]);
        assert_eq!(refs.len(), 4);
        assert_eq!(refs[0].y, 174.0);
        assert_eq!(refs[3].y, 17.4);
        assert_eq!(refs[3].label, "100 GbE at 64 B");
        assert!(link_budgets(&[&Record::new("pipeline", "run")]).is_empty());
    }

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
            .any(|s| s.accepts(&r) && s.series_name(&r) == "rtc, size 64, swap"));
        assert!(!f
            .iter()
            .any(|s| s.kind == FigureKind::Line && s.accepts(&Record::new("pipeline", "run"))));
    }
}
