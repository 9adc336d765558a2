//! `commbench compare A B`: before/after ratios with a noise threshold.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::record::Record;
use commbench_report::{compare, load};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The "before" results (--format json or jsonl output, or results.jsonl).
    pub before: PathBuf,
    /// The "after" results.
    pub after: PathBuf,
    /// Relative change below which a difference is noise, in percent.
    #[arg(long, default_value_t = 5.0)]
    pub threshold: f64,
    /// Compare only these metrics (comma-separated, dotted for nested: latency_ns.p99).
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Show every metric, including those without change.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run(a: &CompareArgs) -> Result<()> {
    if !(a.threshold.is_finite() && (0.0..1000.0).contains(&a.threshold)) {
        return Err(crate::usage(format!(
            "--threshold {} is not a percentage in 0..1000",
            a.threshold
        )));
    }
    let before = load(&a.before)?;
    let after = load(&a.after)?;
    let changes = compare(
        &before.records,
        &after.records,
        a.threshold / 100.0,
        &a.metrics,
    );
    if changes.is_empty() {
        anyhow::bail!(
            "no record of {} matches one of {} by lab, test and parameters (or no common metric)",
            a.before.display(),
            a.after.display()
        );
    }
    let shown: Vec<Record> = changes
        .iter()
        .filter(|c| a.all || !a.metrics.is_empty() || c.verdict != "no change")
        .map(|c| {
            Record::new("compare", "change")
                .param("source", format!("{}/{}", c.lab, c.test))
                .param("params", &c.params)
                .param("metric", &c.metric)
                .metric("before", c.before)
                .metric("after", c.after)
                .metric("ratio", c.ratio)
                .metric("change_pct", c.change_pct)
                .metric("better", c.better)
                .metric("verdict", &c.verdict)
        })
        .collect();
    let n = |v: &str| changes.iter().filter(|c| c.verdict == v).count();
    eprintln!(
        "compare: {} metrics; {} faster, {} slower, {} better, {} worse, {} changed, {} within ±{}% (noise)",
        changes.len(),
        n("faster"),
        n("slower"),
        n("better"),
        n("worse"),
        n("changed"),
        n("no change"),
        a.threshold
    );
    a.out.emit(&shown)
}
