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
//!
//! Nothing finished is lost: each step's records are appended to
//! `results.jsonl` and synced as the step ends, and `suite.journal` notes
//! each step's start and end, so SIGINT or SIGKILL at any moment leaves
//! every finished step on disk and `--resume` goes on from there (SIGINT
//! says so). A folder owned by another user or writable by others is
//! refused; files are never written through a symlink; a second suite on
//! the same folder is refused while the first holds its lock (see
//! [`folder`]). The run goes into the results store once, also across
//! resumes: each step is one part of one stored run, and the store skips a
//! part it holds, so the journal's "stored" line is a note, not a guard.
use crate::output::OutputArgs;
use anyhow::{Context, Result};
use clap::Args;
use commbench_core::env::{now_utc, Fingerprint};
use commbench_core::lab::{Lab, Preset, SuiteCtx};
use commbench_core::record::{export, Format, Record, Recorder};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod folder;
use folder::{
    append_synced, asked, check_dir, clear_run, holds_a_run, journal, kept_parts, resumed,
    FolderLock, RESULTS,
};

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
    /// Continue an interrupted suite in DIR: steps it finished are kept, the others of what that run asked for (its --only/--skip and preset, kept in DIR) run.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// With --out: replace the run the folder holds (without it, such a folder is refused).
    #[arg(long, conflicts_with = "resume")]
    pub force: bool,
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

/// What SIGINT prints: the steps kept and how to go on.
fn interrupt_note(dir: &Path, kept: &[&str]) -> String {
    let kept = if kept.is_empty() {
        "no finished step yet".to_owned()
    } else {
        format!("the finished steps {} are kept", kept.join(", "))
    };
    format!(
        "\nsuite: interrupted; {kept} in {}/{RESULTS}; `commbench suite --resume {}` runs the rest\n",
        dir.display(),
        dir.display()
    )
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
    let given_preset = if a.quick {
        Some(Preset::Quick)
    } else if a.full {
        Some(Preset::Full)
    } else {
        None
    };
    let mut preset = given_preset.unwrap_or(Preset::Default);
    let selected = |only: &[String], skip: &[String]| -> Vec<&'static str> {
        all.iter()
            .map(|s| s.name())
            .filter(|n| only.is_empty() || only.iter().any(|o| o == n))
            .filter(|n| !skip.iter().any(|o| o == n))
            .collect()
    };
    let mut chosen_names = selected(&a.only, &a.skip);
    // The folder is checked before anything in it is read: a folder
    // another user could have prepared is refused first.
    let mut replace = false;
    let (dir, resumed) = match &a.resume {
        Some(d) => {
            if let Err(e) = std::fs::metadata(d) {
                return Err(crate::usage(format!(
                    "--resume {}: {e} (give the folder of a suite run)",
                    d.display()
                )));
            }
            check_dir(d)?;
            // The folder's run said what it was: a resume runs what it
            // asked for, never more (a finished `--only core` folder ran
            // the five other steps), and with its preset.
            if let Some(asked) = asked(d)? {
                if let Some(p) = asked.preset.as_deref() {
                    let theirs = [Preset::Quick, Preset::Default, Preset::Full]
                        .into_iter()
                        .find(|x| x.name() == p);
                    if let Some(theirs) = theirs {
                        if given_preset.is_some_and(|g| g != theirs) {
                            return Err(crate::usage(format!(
                                "--resume {}: that run used the {p} preset, not {}; resume it as it was (drop --quick/--full{}) or give a new folder with --out",
                                d.display(),
                                preset.name(),
                                match theirs {
                                    Preset::Quick => ", add --quick",
                                    Preset::Full => ", add --full",
                                    Preset::Default => "",
                                }
                            )));
                        }
                        preset = theirs;
                    }
                }
                // Without --only/--skip, the steps it asked for; with
                // them, what they say (a step added on purpose runs).
                if let Some(steps) = asked.steps {
                    if a.only.is_empty() && a.skip.is_empty() {
                        chosen_names = all
                            .iter()
                            .map(|s| s.name())
                            .filter(|n| steps.iter().any(|s| s == n))
                            .collect();
                    }
                }
            }
            (d.clone(), Some(resumed(d, all)?))
        }
        None => {
            let d = a.out.clone().unwrap_or_else(default_dir);
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(&d)
                .with_context(|| format!("cannot create output folder {}", d.display()))?;
            check_dir(&d)?;
            // Another run's records are never overwritten without a word.
            if holds_a_run(&d) {
                if !a.force {
                    return Err(crate::usage(format!(
                        "--out {}: the folder holds another suite run ({RESULTS}); `--resume {}` goes on with it, or give a new folder, or add --force to replace it",
                        d.display(),
                        d.display()
                    )));
                }
                replace = true;
            }
            (d, None)
        }
    };
    let _lock = FolderLock::take(&dir)?;
    if replace {
        clear_run(&dir)?;
    }
    // The id the run has in the results store, kept in every step record
    // so that a resumed suite adds its steps to the same run.
    let run_id = match resumed.as_ref().and_then(|r| r.run_id.clone()) {
        Some(id) => id,
        None => commbench_store::new_run_id()?,
    };
    let (kept, kept_lines, done) = resumed.map_or((Vec::new(), Vec::new(), Vec::new()), |r| {
        (r.kept, r.kept_lines, r.done)
    });
    let chosen: Vec<&dyn Lab> = all
        .iter()
        .copied()
        .filter(|s| chosen_names.contains(&s.name()))
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
    let env = fp.to_value();
    let path = dir.join(RESULTS);
    // The folder's results start as what is kept (nothing for a new run),
    // line for line as the run that measured them wrote them (a resume
    // that ran nothing rewrote every record's environment as its own);
    // every finished step is appended to it, synced, as it ends.
    commbench_core::artifact::write_atomic(&path, |f| std::io::Write::write_all(f, &kept_lines))
        .with_context(|| format!("cannot write {}", path.display()))?;
    journal(
        &dir,
        serde_json::json!({"event": "begin", "at": now_utc(), "pid": std::process::id(),
            "preset": preset.name(), "steps": chosen_names,
            "todo": todo.iter().map(|s| s.name()).collect::<Vec<_>>()}),
    )?;
    let mut finished: Vec<&str> = chosen
        .iter()
        .map(|s| s.name())
        .filter(|n| done.iter().any(|d| d == n))
        .collect();
    commbench_core::artifact::set_signal_note(&interrupt_note(&dir, &finished));
    commbench_core::artifact::install_signal_cleanup();
    let mut rec = Recorder::new();
    let progress = Progress::new(todo.iter().map(|s| budget(*s)).sum(), &mut rec);
    let mut failed = Vec::new();
    let mut fresh: Vec<Record> = Vec::new();
    let mut fresh_parts: Vec<(String, Vec<Record>)> = Vec::new();
    for (i, step) in todo.iter().enumerate() {
        let b = budget(*step);
        progress.start(i + 1, todo.len(), step.name(), b);
        journal(
            &dir,
            serde_json::json!({"event": "step-start", "step": step.name(), "at": now_utc()}),
        )?;
        let t0 = Instant::now();
        let ctx = SuiteCtx {
            preset,
            deadline: t0 + Duration::from_secs(b),
        };
        let conditions = commbench_core::rusage::Conditions::begin();
        let res = step.suite_step(&ctx, &mut rec);
        let secs = t0.elapsed().as_secs_f64();
        // A step is stored as one part of the run, under an id of its own
        // (a failed step run again is another part).
        let part = format!("{}#{}", step.name(), commbench_store::new_run_id()?);
        let mut s = Record::new("suite", "step")
            .param("step", step.name())
            .param("preset", preset.name())
            .metric("seconds", secs)
            .metric("budget_s", b)
            .metric("records", rec.records().len())
            .metric("store_run", run_id.as_str())
            .metric("store_part", part.as_str());
        conditions.stamp(&mut s, 0, None);
        let status = match res {
            Ok(out) => {
                if !out.cut_short.is_empty() {
                    s.push_metric("cut_short", out.cut_short.join("; "));
                }
                s.push_metric("status", "ok");
                finished.push(step.name());
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
        rec.push(s);
        let step_records = rec.take();
        let mut lines = Vec::new();
        export(&step_records, Format::Jsonl, &env, &mut lines)?;
        append_synced(&path, &lines)?;
        // The records are on disk: from here a signal says the step was
        // kept (the note first, so that no one who reads the journal's
        // step-done can interrupt before the note says so).
        commbench_core::artifact::set_signal_note(&interrupt_note(&dir, &finished));
        journal(
            &dir,
            serde_json::json!({"event": "step-done", "step": step.name(), "at": now_utc(),
                "status": if failed.last() == Some(&step.name()) { "failed" } else { "ok" },
                "records": step_records.len()}),
        )?;
        progress.done(step.name(), secs, &status, b);
        fresh.extend(step_records.iter().cloned());
        fresh_parts.push((part, step_records));
    }
    progress.finish();
    let mut records = kept;
    records.extend(fresh.iter().cloned());
    // Into the store once, step by step: every step is one part of the
    // run, and a part the store holds already is skipped, so a resume
    // that replays kept steps (the journal lost, the last store
    // interrupted or refused) adds only what is missing. The journal says
    // "stored" only after the store committed.
    let mut parts = kept_parts(&records[..records.len() - fresh.len()], all, &dir);
    parts.extend(fresh_parts);
    match crate::store::keep_parts(&run_id, &parts, &env) {
        Ok(Some(added)) => journal(
            &dir,
            serde_json::json!({"event": "stored", "at": now_utc(), "run_id": run_id,
                "records": added}),
        )?,
        Ok(None) => {}
        Err(e) => eprintln!(
            "commbench: warning: results not kept in the history store: {e}; `commbench suite --resume {}` stores them later",
            dir.display()
        ),
    }
    // The page last: a page that cannot be written (a full disk) must not
    // cost the run its place in the store, and resuming writes it.
    let report = dir.join("report.html");
    let report_failed =
        crate::output::write_report(std::slice::from_ref(&path), &report, "commbench suite").err();
    if a.output.is_table() {
        // The answers, on the terminal or in `-o summary.txt`.
        a.output.write_text(&format!(
            "{}\nall records: {}\nreport:      {}\n",
            commbench_report::summary::render(&records, &env, crate::labs::labs()),
            path.display(),
            if report_failed.is_some() {
                "not written (see below)".to_string()
            } else {
                report.display().to_string()
            }
        ))?;
    } else {
        a.output.write_with(&records, &env)?;
    }
    if let Some(e) = report_failed {
        anyhow::bail!(
            "{e:#}; the run's records are in {} and the store: `commbench suite --resume {}` writes the page once it can be written",
            path.display(),
            dir.display()
        );
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
