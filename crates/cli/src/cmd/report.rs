//! `commbench report RESULTS... -o report.html`: one self-contained HTML
//! page with SVG plots and tables.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result files (--format json or jsonl output, or a suite's results.jsonl).
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Where to write the page (.html or .htm: the page is HTML and nothing else).
    #[arg(long, short = 'o', default_value = "report.html")]
    pub output: PathBuf,
    /// Page title.
    #[arg(long, default_value = "commbench report")]
    pub title: String,
}

pub fn run(a: &ReportArgs) -> Result<()> {
    crate::output::HTML.choose("report", None, Some(&a.output))?;
    crate::output::write_report(&a.results, &a.output, &a.title)?;
    eprintln!("report: {}", a.output.display());
    Ok(())
}
