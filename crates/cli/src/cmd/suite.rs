//! `commbench suite`: one pass over every lab within a time budget, with
//! progress on stderr, a summary on stdout that answers each lab's
//! question in a line, and `results.jsonl` plus `report.html` in an output
//! folder. Each lab of the registry ([`crate::labs::labs`]) is one step:
//! its [`Lab::suite_step`] records, its [`Lab::answer`] makes its summary
//! line.
//!
//! Budgets: each step gets a share of the preset's total and starts no new
//! configuration once its share is spent; what it left out is recorded
//! (`cut_short`) and shown, never passed off as the full run. A failed step
//! is recorded and the suite goes on; the exit code is 1 at the end.
//! `--resume DIR` keeps the steps a previous run of that folder finished
//! and runs the rest.
use crate::output::OutputArgs;
use anyhow::{Context, Result};
use clap::Args;
use commbench_core::env::{now_utc, Fingerprint};
use commbench_core::lab::{Lab, Preset, SuiteCtx};
use commbench_core::record::{export, Format, Record, Recorder};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// About a minute: short runs everywhere.
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// The long, thorough preset (minutes per lab, no time budget).
    #[arg(long)]
    pub full: bool,
    /// Folder for results.jsonl and report.html (default: commbench-results-<UTC time>).
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub out: Option<PathBuf>,
    /// Run only these steps (comma-separated: core, ipc, openflow, mux, pcap, pipeline).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Leave these steps out (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub skip: Vec<String>,
    /// Continue an interrupted suite in DIR: steps it finished are kept, the others run.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// A lab's budget under a preset, in seconds (the full preset has none:
/// its deadline is far off and [`SuiteCtx::over`] never cuts it).
fn budget_s(lab: &dyn Lab, preset: Preset) -> u64 {
    let b = lab.budget();
    match preset {
        Preset::Quick => b.quick_s,
        Preset::Default => b.default_s,
        Preset::Full => b.default_s * 20,
    }
}

fn default_dir() -> PathBuf {
    let t: String = now_utc()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(15)
        .collect();
    PathBuf::from(format!("commbench-results-{t}Z"))
}

/// Records of a previous run in `dir` and the steps it finished.
fn resumed(dir: &Path, all: &[&dyn Lab]) -> Result<(Vec<Record>, Vec<String>)> {
    let path = dir.join("results.jsonl");
    let loaded = commbench_report::load(&path).map_err(|e| {
        crate::usage(format!(
            "--resume {}: {e} (give the folder of a suite run)",
            dir.display()
        ))
    })?;
    let done: Vec<String> = loaded
        .records
        .iter()
        .filter(|r| r.lab == "suite" && r.test == "step")
        .filter(|r| r.metrics.get("status").and_then(|v| v.as_str()) == Some("ok"))
        .filter_map(|r| {
            r.params
                .get("step")
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        })
        .collect();
    let keep_lab = |lab: &str| {
        all.iter()
            .any(|s| done.iter().any(|d| d == s.name()) && s.record_labs().contains(&lab))
    };
    let kept = loaded
        .records
        .into_iter()
        .filter(|r| {
            if r.lab == "suite" {
                r.params
                    .get("step")
                    .and_then(|v| v.as_str())
                    .is_some_and(|s| done.iter().any(|d| d == s))
            } else {
                keep_lab(&r.lab)
            }
        })
        .collect();
    Ok((kept, done))
}

/// Progress: a bar weighted by the steps' budgets with an ETA on a
/// terminal, one line per step otherwise.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(total_s: u64, rec: &mut Recorder) -> Self {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let pb = indicatif::ProgressBar::new(total_s.max(1));
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:24} ETA {eta:>4} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        pb.enable_steady_tick(Duration::from_millis(150));
        let sink = pb.clone();
        rec.set_progress_sink(Box::new(move |m: &str| sink.set_message(m.to_owned())));
        Progress { bar: Some(pb) }
    }

    fn start(&self, i: usize, n: usize, name: &str, budget_s: u64) {
        match &self.bar {
            Some(pb) => pb.set_message(format!("[{i}/{n}] {name}")),
            None => eprintln!("suite: [{i}/{n}] {name} (budget {budget_s} s)"),
        }
    }

    fn done(&self, name: &str, secs: f64, status: &str, budget_s: u64) {
        match &self.bar {
            Some(pb) => {
                pb.inc(budget_s);
                pb.println(format!("  {name}: {status} in {secs:.1} s"));
            }
            None => eprintln!("suite: {name}: {status} in {secs:.1} s"),
        }
    }

    fn finish(self) {
        if let Some(pb) = self.bar {
            pb.finish_and_clear();
        }
    }
}

pub fn run(a: &SuiteArgs) -> Result<()> {
    let all = crate::labs::labs();
    let names = || all.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ");
    for o in a.only.iter().chain(&a.skip) {
        if !all.iter().any(|s| s.name() == o) {
            return Err(crate::usage(format!(
                "--only/--skip {o}: no such step (steps: {})",
                names()
            )));
        }
    }
    let preset = if a.quick {
        Preset::Quick
    } else if a.full {
        Preset::Full
    } else {
        Preset::Default
    };
    let (dir, mut kept, done) = match &a.resume {
        Some(d) => {
            let (k, done) = resumed(d, all)?;
            (d.clone(), k, done)
        }
        None => (
            a.out.clone().unwrap_or_else(default_dir),
            Vec::new(),
            Vec::new(),
        ),
    };
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create output folder {}", dir.display()))?;
    let chosen: Vec<&dyn Lab> = all
        .iter()
        .copied()
        .filter(|s| a.only.is_empty() || a.only.iter().any(|o| o == s.name()))
        .filter(|s| !a.skip.iter().any(|o| o == s.name()))
        .collect();
    let todo: Vec<&dyn Lab> = chosen
        .iter()
        .copied()
        .filter(|s| !done.iter().any(|d| d == s.name()))
        .collect();
    for s in chosen.iter().filter(|s| done.iter().any(|d| d == s.name())) {
        eprintln!("suite: {}: kept from {}", s.name(), dir.display());
    }
    let budget = |s: &dyn Lab| budget_s(s, preset);
    let fp = Fingerprint::collect();
    let mut rec = Recorder::new();
    let progress = Progress::new(todo.iter().map(|s| budget(*s)).sum(), &mut rec);
    let mut failed = Vec::new();
    for (i, step) in todo.iter().enumerate() {
        let b = budget(*step);
        progress.start(i + 1, todo.len(), step.name(), b);
        let t0 = Instant::now();
        let ctx = SuiteCtx {
            preset,
            deadline: t0 + Duration::from_secs(b),
        };
        let res = step.suite_step(&ctx, &mut rec);
        let secs = t0.elapsed().as_secs_f64();
        let mut s = Record::new("suite", "step")
            .param("step", step.name())
            .param("preset", preset.name())
            .metric("seconds", secs)
            .metric("budget_s", b);
        let status = match res {
            Ok(out) => {
                if !out.cut_short.is_empty() {
                    s.push_metric("cut_short", out.cut_short.join("; "));
                }
                s.push_metric("status", "ok");
                if out.cut_short.is_empty() {
                    "ok".to_owned()
                } else {
                    format!("ok, cut short by its budget: {}", out.cut_short.join("; "))
                }
            }
            Err(e) => {
                let e = anyhow::anyhow!(e);
                s.push_metric("status", format!("failed: {e:#}"));
                failed.push(step.name());
                format!("FAILED: {e:#}")
            }
        };
        progress.done(step.name(), secs, &status, b);
        rec.push(s);
    }
    progress.finish();
    kept.extend(rec.take());
    let records = kept;
    let path = dir.join("results.jsonl");
    let mut f = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    export(&records, Format::Jsonl, &fp.to_value(), &mut f)?;
    drop(f);
    let report = dir.join("report.html");
    super::report::write(std::slice::from_ref(&path), &report, "commbench suite")?;

    crate::store::keep(&records, &fp.to_value());
    if a.output.format == crate::output::FormatArg::Table && a.output.output.is_none() {
        print!(
            "{}",
            commbench_report::summary::render(&records, &fp.to_value(), crate::labs::labs())
        );
        println!(
            "\nall records: {}\nreport:      {}",
            path.display(),
            report.display()
        );
    } else {
        a.output.write_with(&records, &fp.to_value())?;
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "suite steps failed: {} (the others ran; `commbench suite --resume {}` reruns the failed ones)",
            failed.join(", "),
            dir.display()
        );
    }
    Ok(())
}
