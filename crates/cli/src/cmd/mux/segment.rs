//! `mux load --segment I/N --start-at EPOCH_MS`: one standalone share of
//! an open-loop run (the lab's `segment` module cuts the share and builds
//! the segment file); this file parses the options, runs the share and
//! writes its records and its segment file.
use crate::output::OutputArgs;
use anyhow::{Context, Result};
use clap::Args;
use commbench_core::Recorder;
use commbench_mux::MuxConfig;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SegmentArgs {
    /// Run share I of N of the load (I from 0, as Kubernetes' JOB_COMPLETION_INDEX): this
    /// process takes its share of --conns, --active and --rate (give the whole run's), every
    /// connection keeping its place in the one schedule. Writes the segment file, an
    /// HdrHistogram V2 interval log, to FILE.hlog beside `-o FILE` (else segment-I-of-N.hlog);
    /// copy the N files to one place and add them with `commbench merge *.hlog`
    /// (docs/fleet.md).
    #[arg(
        long,
        value_name = "I/N",
        requires = "start_at",
        help_heading = "Segments"
    )]
    pub segment: Option<String>,
    /// With --segment: the instant every segment starts its schedule, ms since the Unix epoch,
    /// the same for all (e.g. `$(( $(date +%s%3N) + 30000 ))`); read on each host's clock,
    /// so keep the clocks synchronised (NTP).
    #[arg(
        long,
        value_name = "EPOCH_MS",
        requires = "segment",
        help_heading = "Segments"
    )]
    pub start_at: Option<u64>,
    /// With --segment: where to write the segment file instead.
    #[arg(
        long,
        value_name = "PATH",
        requires = "segment",
        help_heading = "Segments"
    )]
    pub segment_file: Option<PathBuf>,
}

/// Cuts `cfg` to the share --segment asks for (nothing without it).
pub fn apply(cfg: &mut MuxConfig, a: &SegmentArgs, sweep: bool) -> Result<bool> {
    let (Some(spec), Some(at)) = (&a.segment, a.start_at) else {
        return Ok(false);
    };
    if sweep {
        return Err(crate::usage(
            "--segment runs one rate: give --rate, not --rate-sweep",
        ));
    }
    let (i, n) = commbench_core::segment::parse_spec(spec).map_err(crate::usage)?;
    commbench_mux::segment::apply(cfg, i, n, at).map_err(crate::lab_err)?;
    Ok(true)
}

/// Runs the share, then writes its segment file and its records.
pub fn run(cfg: &MuxConfig, a: &SegmentArgs, out: &OutputArgs, rec: &mut Recorder) -> Result<()> {
    let report = commbench_mux::run(cfg, rec).map_err(crate::lab_err);
    crate::progress::finish();
    let report = match report {
        Ok(r) => r,
        Err(e) => return Err(super::kept(rec, e)),
    };
    let last = rec.records().last().context("the run wrote no record")?;
    let seg = commbench_mux::segment::segment_file(cfg, &report, last).map_err(crate::lab_err)?;
    let path = match (&a.segment_file, &out.output) {
        (Some(p), _) => p.clone(),
        (None, Some(o)) => PathBuf::from(format!("{}.hlog", o.display())),
        (None, None) => PathBuf::from(format!(
            "segment-{}-of-{}.hlog",
            seg.header.index, seg.header.count
        )),
    };
    commbench_core::artifact::write_atomic(&path, |f| seg.write(f))
        .with_context(|| format!("cannot write the segment file {}", path.display()))?;
    eprintln!(
        "commbench mux load: segment {}/{} written to {} (commbench merge adds the {} files)",
        seg.header.index,
        seg.header.count,
        path.display(),
        seg.header.count
    );
    out.emit_or_show(rec.records(), || commbench_mux::summary_table(&report))
}
