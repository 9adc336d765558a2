//! The figures this lab declares for the report: the seed's lesson — a
//! cold page cache, not the parser, decides how long extraction takes — as
//! stacked user/sys seconds beside the wall time for cold and warm runs,
//! and the extraction rate per thread count and input kind.

use commbench_core::figure::{FigureKind, FigureSpec};

pub fn figures() -> Vec<FigureSpec> {
    vec![
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "pcap",
            test: "bench",
            title: "pcap: wall seconds, cold vs warm page cache",
            caption: "Is extraction I/O bound? Wall seconds of one extraction of the same capture with the file evicted from the page cache (cold) and cached (warm). Lower is better.",
            x: "cache",
            y: "real_s_median",
            series: &["tool"],
            filter: None,
            x_label: "page cache",
            y_label: "",
            reference: None,
            more_x: "",
        },
        FigureSpec {
            kind: FigureKind::Stacked(&["user_s_median", "sys_s_median"]),
            lab: "pcap",
            test: "bench",
            title: "pcap: CPU seconds (user + sys), cold vs warm",
            caption: "The CPU time (user + system) of the same runs: where cold costs more wall time than CPU time, the run waited for the disk.",
            x: "cache",
            y: "",
            series: &["tool"],
            filter: None,
            x_label: "page cache",
            y_label: "CPU time",
            reference: None,
            more_x: "",
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "pcap",
            test: "extract",
            title: "pcap: MB/s per CPU-second by threads",
            caption: "Extraction rate per CPU-second (the machine-independent figure), plain and gzip input.",
            x: "threads",
            y: "cpu_mb_s",
            series: &["inputs"],
            filter: None,
            x_label: "threads",
            y_label: "",
            reference: None,
            more_x: "",
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "pcap",
            test: "extract_gzip",
            title: "pcap: gzip input, MB/s per CPU-second by threads",
            caption: "The same with gzip input: decompression's share.",
            x: "threads",
            y: "cpu_mb_s",
            series: &["inputs"],
            filter: None,
            x_label: "threads",
            y_label: "",
            reference: None,
            more_x: "",
        },
    ]
}
