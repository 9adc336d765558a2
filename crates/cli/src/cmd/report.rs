//! `commbench report RESULTS... -o report.html`: one self-contained HTML
//! page with SVG plots and tables.
use anyhow::{Context, Result};
use clap::Args;
use commbench_report::{load, render_html};
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result files (--format json or jsonl output, or a suite's results.jsonl).
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Where to write the page.
    #[arg(long, short = 'o', default_value = "report.html")]
    pub output: PathBuf,
    /// Page title.
    #[arg(long, default_value = "commbench report")]
    pub title: String,
}

/// Renders `results` into `output`.
pub fn write(results: &[PathBuf], output: &Path, title: &str) -> Result<()> {
    let runs = results
        .iter()
        .map(|p| load(p))
        .collect::<Result<Vec<_>, _>>()?;
    let all: Vec<commbench_core::record::Record> = runs
        .iter()
        .flat_map(|l| l.records.iter().cloned())
        .collect();
    let summary: Vec<commbench_report::SummaryLine> = crate::summary::rows(&all)
        .into_iter()
        .map(|r| commbench_report::SummaryLine {
            lab: r.lab.to_owned(),
            question: r.question.to_owned(),
            answer: r.answer,
            flags: r.flags.join("; "),
        })
        .collect();
    let html = render_html(&runs, title, &figures(), &summary)?;
    std::fs::write(output, html).with_context(|| format!("cannot write {}", output.display()))
}

/// Every lab's declared figures.
pub fn figures() -> Vec<commbench_core::figure::FigureSpec> {
    let mut f = core_figures();
    f.extend(commbench_ipc::figures());
    f.extend(commbench_openflow::figures());
    f.extend(commbench_mux::figures());
    f.extend(commbench_pcap::figures());
    f.extend(commbench_pipeline::figures());
    f
}

/// The measurement core's figures (its records come from `timer` and
/// `delay`): how close a requested delay lands, and what a clock read costs.
fn core_figures() -> Vec<commbench_core::figure::FigureSpec> {
    use commbench_core::figure::{FigureKind, FigureSpec};
    vec![
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "delay",
            test: "tsc_spin",
            title: "delay: measured median vs requested (TSC spin, ns)",
            caption: "How close a requested busy-wait lands: one bar per requested delay; the bar should reach its label.",
            x: "requested_ns",
            y: "median_ns",
            series: &[],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "delay",
            test: "nanosleep",
            title: "delay: nanosleep measured median (ns)",
            caption: "What sleeping costs instead: the kernel's timer slack and wake-up dwarf short requests.",
            x: "requested_ns",
            y: "median_ns",
            series: &[],
            filter: None,
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "timer",
            test: "read_cost",
            title: "timer: cost of one clock read (ns)",
            caption: "What timing itself costs per read: rdtsc against the fenced forms and clock_gettime.",
            x: "method",
            y: "ns_median",
            series: &[],
            filter: None,
        },
    ]
}

pub fn run(a: &ReportArgs) -> Result<()> {
    write(&a.results, &a.output, &a.title)?;
    eprintln!("report: {}", a.output.display());
    Ok(())
}
