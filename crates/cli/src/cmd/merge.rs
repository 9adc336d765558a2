//! `commbench merge FILES...`: adds the segment files of one run (`mux
//! load --segment I/N` on several processes or hosts) into the run's
//! records. The files are checked to be every share of one run, each
//! once, started together (core's `segment::check_together`); the lab
//! that wrote them adds them (`Lab::merge_segments`), found through the
//! registry.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::segment::{self, Segment};
use commbench_core::Record;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Segment files, one per share of the run (`mux load --segment I/N` wrote them:
    /// FILE.hlog beside `-o FILE`, or segment-I-of-N.hlog).
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// Refuse segments whose start instants (--start-at) lie further apart than this, ms.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub max_skew_ms: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(a: &MergeArgs) -> Result<()> {
    let mut segs: Vec<(String, Segment)> = Vec::with_capacity(a.files.len());
    for f in &a.files {
        let s = segment::read_file(f).map_err(crate::usage_err)?;
        segs.push((f.display().to_string(), s));
    }
    segment::check_together(&segs, a.max_skew_ms).map_err(crate::usage_err)?;
    let lab_name = segs[0].1.header.lab.clone();
    let lab = commbench_core::lab::find(crate::labs::labs(), &lab_name)
        .ok_or_else(|| crate::usage(format!("no lab here writes {lab_name} records")))?;
    let segments: Vec<Segment> = segs.into_iter().map(|(_, s)| s).collect();
    let records = lab
        .merge_segments(&segments)
        .ok_or_else(|| crate::usage(format!("the {lab_name} lab writes no segments")))?
        .map_err(crate::usage_err)?;
    a.output.emit_summarized(&records, summary)
}

fn summary(records: &[Record]) -> String {
    records
        .iter()
        .map(|r| {
            let n = r.params.get("segments").map(|v| v.to_string());
            format!(
                "{} {}: {} segments added\n",
                r.lab,
                r.test,
                n.unwrap_or_else(|| "?".into())
            )
        })
        .collect()
}
