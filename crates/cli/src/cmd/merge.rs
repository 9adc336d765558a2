//! `commbench merge FILES...`: adds the segment files of one run (`mux
//! load --segment I/N` on several processes or hosts) into the run's
//! records. The files are read one at a time and dropped once added
//! (memory: one file and the running sums, however many shares; a
//! 4,096-way merge of files of 16 histograms at 2^60 ns peaked at the
//! figure docs/reliability.md gives): each is checked to be a share of
//! the same run as the others, none twice, started together (core's
//! `segment::Together`), and added by the lab that wrote them
//! (`Lab::segment_merger`), found through the registry. A file given
//! twice (the same device and inode, under any name) and anything but a
//! regular file (a FIFO in a shared gather folder) are refused before a
//! byte is read.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::segment::{self, SegmentMerger};
use commbench_core::Record;
use std::collections::HashMap;
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
    use std::os::unix::fs::MetadataExt;
    // Every name looked at first (no file read): the same file under two
    // names, and anything that is no regular file, are refused at once.
    let mut seen: HashMap<(u64, u64), &PathBuf> = HashMap::with_capacity(a.files.len());
    for f in &a.files {
        let m = std::fs::metadata(f)
            .map_err(|e| crate::usage(format!("cannot read {}: {e}", f.display())))?;
        if !m.is_file() {
            return Err(crate::usage(format!(
                "{} is {}, not a regular file: give the segment files themselves (a FIFO or device never ends, or waits for a writer)",
                f.display(),
                commbench_core::userfile::kind_name(m.mode())
            )));
        }
        if let Some(other) = seen.insert((m.dev(), m.ino()), f) {
            return Err(crate::usage(format!(
                "{} and {} are the same file, given twice: give each segment once",
                other.display(),
                f.display()
            )));
        }
        // `merge seg-0.json` (the records `-o` wrote) said "an interval
        // line without a Tag=": the segment file is beside it.
        let beside = PathBuf::from(format!("{}.hlog", f.display()));
        if f.extension().is_none_or(|e| e != "hlog") && beside.is_file() {
            return Err(crate::usage(format!(
                "{} is the records file of a segment; merge reads the segment file beside it: {}",
                f.display(),
                beside.display()
            )));
        }
    }
    drop(seen);
    let mut together = segment::Together::new(a.max_skew_ms);
    let mut merger: Option<Box<dyn SegmentMerger>> = None;
    for f in &a.files {
        let name = f.display().to_string();
        let s = segment::read_file(f).map_err(crate::usage_err)?;
        together.add(&name, &s.header).map_err(crate::usage_err)?;
        let m = match &mut merger {
            Some(m) => m,
            None => {
                let lab_name = &s.header.lab;
                let lab =
                    commbench_core::lab::find(crate::labs::labs(), lab_name).ok_or_else(|| {
                        crate::usage(format!("no lab here writes {lab_name} records"))
                    })?;
                merger.insert(lab.segment_merger().ok_or_else(|| {
                    crate::usage(format!("the {lab_name} lab writes no segments"))
                })?)
            }
        };
        m.add(s).map_err(crate::usage_err)?;
    }
    together.finish().map_err(crate::usage_err)?;
    let merger = merger.ok_or_else(|| crate::usage("no segment files given"))?;
    let records = merger.finish().map_err(crate::usage_err)?;
    a.output.emit_or_show(&records, || summary(&records))
}

/// The terminal view: per merged record, the segments added and each
/// metric its lab declares, in words with its unit, one a line within 100
/// columns. The record's every field as a key/value list was 190 lines of
/// raw nanoseconds; `--format json` keeps them all.
fn summary(records: &[Record]) -> String {
    use commbench_core::lab::answer::num;
    let mut out = String::new();
    for r in records {
        let n = r.params.get("segments").map(|v| v.to_string());
        out.push_str(&format!(
            "{} {}: {} segments added\n",
            r.lab,
            r.test,
            n.unwrap_or_else(|| "?".into())
        ));
        let Some(lab) = commbench_core::lab::find(crate::labs::labs(), &r.lab) else {
            continue;
        };
        for m in lab.metrics().iter().filter(|m| m.applies_to(&r.test)) {
            let Some(v) = r.metric_f64(m.key).filter(|v| v.is_finite()) else {
                continue;
            };
            let (v, unit) = match m.unit {
                "ns" if v.abs() >= 1e6 => (v / 1e6, "ms"),
                "ns" if v.abs() >= 1e4 => (v / 1e3, "µs"),
                u => (v, u),
            };
            let line = format!("  {}: {}", m.label, num(v, unit));
            out.push_str(&commbench_core::record::escape_control(&line));
            out.push('\n');
        }
    }
    out.push_str("(every field: --format json, or -o FILE.json)\n");
    out
}
