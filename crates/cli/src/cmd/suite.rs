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
//! the same folder is refused while the first holds its lock. The run goes
//! into the results store once, also across resumes.
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

/// The records of a suite folder's `results.jsonl`, read as the suite
/// appends it: one record per line, step by step. A last line cut short by
/// a kill (no newline, not JSON) is left out with a warning; any other bad
/// line is an error.
fn read_results(path: &Path) -> Result<Vec<Record>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !f.metadata().map_err(|e| e.to_string())?.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mut text = String::new();
    f.by_ref()
        .take(MAX_RESULTS_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_RESULTS_BYTES {
        return Err(format!(
            "{} is larger than {} MiB: not a suite's results",
            path.display(),
            MAX_RESULTS_BYTES >> 20
        ));
    }
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(mut r) => {
                r.environment = None;
                out.push(r);
            }
            Err(_) if i + 1 == lines.len() && !complete => {
                eprintln!(
                    "suite: {}: the last line was cut short (the run was killed while writing it); left out",
                    path.display()
                );
            }
            Err(e) => return Err(format!("{} line {}: {e}", path.display(), i + 1)),
        }
    }
    Ok(out)
}

/// A suite's `results.jsonl` is bounded: resuming never reads more.
const MAX_RESULTS_BYTES: u64 = 256 << 20;

/// Records of a previous run in `dir` and the steps it finished.
fn resumed(dir: &Path, all: &[&dyn Lab]) -> Result<(Vec<Record>, Vec<String>)> {
    let path = dir.join(RESULTS);
    let records = read_results(&path).map_err(|e| {
        crate::usage(format!(
            "--resume {}: {e} (give the folder of a suite run)",
            dir.display()
        ))
    })?;
    let done: Vec<String> = records
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
    let kept = records
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

/// The folder's files.
const RESULTS: &str = "results.jsonl";
const JOURNAL: &str = "suite.journal";
const LOCK: &str = ".commbench-suite.lock";

/// Refuses an output folder that someone else could have prepared: owned
/// by another user, or writable by others (where they could swap a file
/// for a symlink between two of our writes).
fn check_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir)
        .with_context(|| format!("cannot read output folder {}", dir.display()))?;
    if !m.is_dir() {
        return Err(crate::usage(format!("{} is not a folder", dir.display())));
    }
    let me = commbench_core::sys::euid();
    if m.uid() != me {
        return Err(crate::usage(format!(
            "output folder {} belongs to user {}, not to you (uid {me}): give a folder of your own",
            dir.display(),
            m.uid()
        )));
    }
    if m.mode() & 0o002 != 0 {
        return Err(crate::usage(format!(
            "output folder {} is writable by every user (mode {:o}): give a folder only you can write, or `chmod o-w` it",
            dir.display(),
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Holds the folder's lock for the run: a second suite writing into the
/// same folder would interleave its records with ours.
struct FolderLock {
    file: std::fs::File,
    path: PathBuf,
}

impl FolderLock {
    fn take(dir: &Path) -> Result<Self> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let path = dir.join(LOCK);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .with_context(|| format!("cannot create the lock {}", path.display()))?;
        if commbench_core::sys::try_lock_exclusive(file.as_raw_fd()).is_err() {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(crate::usage(format!(
                "another suite{} is writing into {}: wait for it to end, or give another --out",
                if holder.trim().is_empty() {
                    String::new()
                } else {
                    format!(" (pid {})", holder.trim())
                },
                dir.display()
            )));
        }
        file.set_len(0)?;
        write!(file, "{}", std::process::id())?;
        Ok(FolderLock { file, path })
    }
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = &self.file;
    }
}

/// Appends lines to one of the folder's files (never through a symlink)
/// and syncs them: what a finished step measured survives a kill.
fn append_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_data())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// One line of the step journal.
fn journal(dir: &Path, event: serde_json::Value) -> Result<()> {
    let mut line = event.to_string();
    line.push('\n');
    append_synced(&dir.join(JOURNAL), line.as_bytes())
}

/// Whether the journal says this folder's records went to the store.
fn journal_stored(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(JOURNAL)).is_ok_and(|t| {
        t.lines().any(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .is_ok_and(|v| v.get("event").and_then(|e| e.as_str()) == Some("stored"))
        })
    })
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
    let preset = if a.quick {
        Preset::Quick
    } else if a.full {
        Preset::Full
    } else {
        Preset::Default
    };
    let (dir, kept, done) = match &a.resume {
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
    check_dir(&dir)?;
    let _lock = FolderLock::take(&dir)?;
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
    let env = fp.to_value();
    let path = dir.join(RESULTS);
    let stored_before = a.resume.is_some() && journal_stored(&dir);
    // The folder's results start as what is kept (nothing for a new run);
    // every finished step is appended to it, synced, as it ends.
    commbench_core::artifact::write_atomic(&path, |f| export(&kept, Format::Jsonl, &env, f))
        .with_context(|| format!("cannot write {}", path.display()))?;
    journal(
        &dir,
        serde_json::json!({"event": "begin", "at": now_utc(), "pid": std::process::id(),
            "preset": preset.name(), "todo": todo.iter().map(|s| s.name()).collect::<Vec<_>>()}),
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
        fresh.extend(step_records);
    }
    progress.finish();
    let mut records = kept;
    records.extend(fresh.iter().cloned());
    let report = dir.join("report.html");
    crate::output::write_report(std::slice::from_ref(&path), &report, "commbench suite")?;

    // Into the store once: a resumed folder whose earlier records were
    // stored already adds only what it measured now (nothing, when nothing
    // was left to run); one that was interrupted before storing adds all.
    let to_store: &[Record] = if stored_before { &fresh } else { &records };
    if !to_store.is_empty() {
        crate::store::keep(to_store, &env);
        journal(
            &dir,
            serde_json::json!({"event": "stored", "at": now_utc(), "records": to_store.len()}),
        )?;
    }
    if a.output.format == crate::output::FormatArg::Table && a.output.output.is_none() {
        print!(
            "{}",
            commbench_report::summary::render(&records, &env, crate::labs::labs())
        );
        println!(
            "\nall records: {}\nreport:      {}",
            path.display(),
            report.display()
        );
    } else {
        a.output.write_with(&records, &env)?;
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
