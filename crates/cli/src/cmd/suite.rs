//! `commbench suite`: a quick pass over every lab that exists, with
//! progress on stderr, a summary table on stdout and `results.jsonl` plus
//! `report.html` in an output folder. Labs plug in by adding a step to [`steps`].
use crate::output::OutputArgs;
use anyhow::{Context, Result};
use clap::Args;
use commbench_core::delay::DelayMethod;
use commbench_core::env::{now_utc, Fingerprint};
use commbench_core::record::{export, Format, Record, Recorder};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// Shorter runs everywhere (seconds rather than minutes).
    #[arg(long)]
    pub quick: bool,
    /// Folder for results.jsonl (default: commbench-results-<UTC time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run only these steps (comma-separated: core, and each lab's name).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// A suite step: a name and a function adding records.
pub type Step = (&'static str, fn(bool, &mut Recorder) -> Result<()>);

/// Every step, in order. Labs add theirs here.
pub fn steps() -> Vec<Step> {
    vec![
        ("core", core_step),
        ("ipc", super::ipc::suite_step),
        ("openflow", super::openflow::suite_step),
        ("mux", super::mux::suite_step),
        ("pcap", pcap_step),
        ("pipeline", super::pipeline::suite_step),
    ]
}

fn core_step(quick: bool, rec: &mut Recorder) -> Result<()> {
    rec.progress("core: timer");
    for r in super::timer::records(if quick { 200 } else { 2000 }) {
        rec.push(r);
    }
    for r in super::budget::records(Some("10G"), Some(64), None)? {
        rec.push(r);
    }
    let requests = [100, 1_000, 10_000];
    let samples = if quick { Some(500) } else { None };
    for r in super::delay::records(&[DelayMethod::TscSpin], &requests, samples, rec)? {
        rec.push(r);
    }
    for r in super::delay::records(&[DelayMethod::Nanosleep], &[10_000], Some(50), rec)? {
        rec.push(r);
    }
    Ok(())
}

fn default_dir() -> PathBuf {
    let t: String = now_utc()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(15)
        .collect();
    PathBuf::from(format!("commbench-results-{t}Z"))
}

fn headline(r: &Record) -> String {
    let params: Vec<String> = r
        .params
        .iter()
        .take(4)
        .map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"')))
        .collect();
    let metrics: Vec<String> = r
        .metrics
        .iter()
        .filter(|(_, v)| v.is_number())
        .take(3)
        .map(|(k, v)| {
            format!(
                "{k}={}",
                commbench_core::record::human_number(v.as_f64().unwrap_or(f64::NAN))
            )
        })
        .collect();
    format!("{} | {}", params.join(" "), metrics.join(" "))
}

pub fn run(a: &SuiteArgs) -> Result<()> {
    let all = steps();
    for o in &a.only {
        if !all.iter().any(|(n, _)| n == o) {
            return Err(crate::usage(format!(
                "--only {o}: no such step (steps: {})",
                all.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            )));
        }
    }
    let dir = a.out.clone().unwrap_or_else(default_dir);
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create output folder {}", dir.display()))?;
    let fp = Fingerprint::collect();
    let mut rec = crate::progress::recorder();
    let mut summary = Vec::new();
    let mut failed = Vec::new();
    for (name, step) in all {
        if !a.only.is_empty() && !a.only.iter().any(|o| o == name) {
            continue;
        }
        rec.progress(&format!("{name}: starting"));
        let t0 = Instant::now();
        let before = rec.records().len();
        let res = step(a.quick, &mut rec);
        let secs = t0.elapsed().as_secs_f64();
        let mut s = Record::new("suite", "step")
            .param("step", name)
            .metric("records", rec.records().len() - before)
            .metric("seconds", secs);
        match res {
            Ok(()) => s.push_metric("status", "ok"),
            Err(e) => {
                s.push_metric("status", format!("failed: {e:#}"));
                failed.push(name);
            }
        }
        summary.push(s);
    }
    crate::progress::finish();
    let records = rec.take();
    let path = dir.join("results.jsonl");
    let mut f = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    export(&records, Format::Jsonl, &fp.to_value(), &mut f)?;
    drop(f);
    let report = dir.join("report.html");
    super::report::write(std::slice::from_ref(&path), &report, "commbench suite")?;

    if a.output.format == crate::output::FormatArg::Table && a.output.output.is_none() {
        println!("{:<8} {:<14} result", "lab", "test");
        for r in &records {
            println!("{:<8} {:<14} {}", r.lab, r.test, headline(r));
        }
        println!();
        a.output.emit_with(&summary, &fp)?;
        println!(
            "\nresults: {}\nreport:  {}",
            path.display(),
            report.display()
        );
    } else {
        a.output.emit_with(&records, &fp)?;
    }
    if !failed.is_empty() {
        anyhow::bail!("suite steps failed: {}", failed.join(", "));
    }
    Ok(())
}

fn pcap_step(quick: bool, rec: &mut Recorder) -> Result<()> {
    commbench_pcap::suite(quick, rec)?;
    Ok(())
}
