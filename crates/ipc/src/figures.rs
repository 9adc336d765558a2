//! The figures this lab declares for the report: the seed's question —
//! is shared memory faster than the kernel's paths? — as bars per
//! transport (rate and CPU per message), and throughput against message
//! size when a size sweep was run.

use commbench_core::figure::{FigureKind, FigureSpec};

pub fn figures() -> Vec<FigureSpec> {
    vec![
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "ipc",
            test: "reqres",
            title: "ipc: request/response messages per second by transport",
            caption: "Is shared memory faster than the kernel's paths (Unix socket, pipe, TCP loopback)? Higher is better; one bar per message size and session count.",
            x: "transport",
            y: "msgs_per_s",
            series: &["size", "sessions"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "ipc",
            test: "reqres",
            title: "ipc: CPU per message by transport (ns)",
            caption: "CPU time of both processes per message (getrusage): the figure that survives a noisy machine. Lower is better.",
            x: "transport",
            y: "cpu_ns_per_op",
            series: &["size", "sessions"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "ipc",
            test: "reqres",
            title: "ipc: round-trip p99 by transport (ns)",
            caption: "The tail a client sees: 99th percentile round trip. Lower is better.",
            x: "transport",
            y: "rt_p99_ns",
            series: &["size", "sessions"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Ladder(&[
                (0.5, "rt_p50_ns"),
                (0.9, "rt_p90_ns"),
                (0.99, "rt_p99_ns"),
                (0.999, "rt_p999_ns"),
                (0.9999, "rt_p9999_ns"),
            ]),
            lab: "ipc",
            test: "reqres",
            title: "ipc: round-trip latency percentiles by transport",
            caption: "The whole distribution a client sees, p50 to p99.99 (log axes: the tail made visible). Lower is better.",
            x: "",
            y: "",
            series: &["transport", "size"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "ipc",
            test: "stream",
            title: "ipc: streaming GiB/s by transport",
            caption: "One-way streaming of large messages (data_channel_write): how fast bytes cross.",
            x: "transport",
            y: "gib_per_s",
            series: &["size"],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "ipc",
            test: "reqres",
            title: "ipc: messages per second vs message size",
            caption: "Where copying starts to dominate: rate against message size, one line per transport.",
            x: "size",
            y: "msgs_per_s",
            series: &["transport"],
            filter: None,
        },
    ]
}
