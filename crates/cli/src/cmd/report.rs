//! `commbench report RESULTS... -o report.html`: one self-contained HTML
//! page with SVG plots and tables.
use anyhow::{Context, Result};
use clap::Args;
use commbench_report::{load, render_html, ReportError};
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
        .map(|p| load(p).map_err(input_error))
        .collect::<Result<Vec<_>, _>>()?;
    let html = render_html(&runs, title, crate::labs::labs())?;
    // Whole or not at all: a full disk keeps the previous report.
    commbench_core::artifact::write_atomic(output, |f| {
        std::io::Write::write_all(f, html.as_bytes())
    })
    .with_context(|| format!("cannot write {}", output.display()))
}

/// A results file that is not one (bad JSON, `"records": {}`, no records)
/// or is refused by the load bounds (a FIFO, a device, a 5 MiB line) is
/// bad input: exit 2, as `history --import` does; a read error stays a
/// run error (exit 1).
pub fn input_error(e: ReportError) -> anyhow::Error {
    match e {
        ReportError::Format { .. } | ReportError::Input { .. } => crate::usage(e.to_string()),
        e => e.into(),
    }
}

pub fn run(a: &ReportArgs) -> Result<()> {
    write(&a.results, &a.output, &a.title)?;
    eprintln!("report: {}", a.output.display());
    Ok(())
}
