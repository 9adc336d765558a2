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
        .map(|p| load(p).map_err(crate::lab_err))
        .collect::<Result<Vec<_>, _>>()?;
    let html = render_html(&runs, title, crate::labs::labs())?;
    // Whole or not at all: a full disk keeps the previous report.
    commbench_core::artifact::write_atomic(output, |f| {
        std::io::Write::write_all(f, html.as_bytes())
    })
    .with_context(|| format!("cannot write {}", output.display()))
}

pub fn run(a: &ReportArgs) -> Result<()> {
    write(&a.results, &a.output, &a.title)?;
    eprintln!("report: {}", a.output.display());
    Ok(())
}
