//! One trial: a side's command run once as a child that writes its records
//! as JSON Lines to a file of ours, with what the machine did to it.
//!
//! The child runs in its own process group (so a timeout or an interrupt
//! ends it and everything it started), with the results store turned off
//! (`COMMBENCH_NO_STORE=1`: trials are not runs of their own), pinned to
//! the side's CPUs by inheriting the spawning thread's affinity, and with
//! its scheduler counters sampled every [`SAMPLE_EVERY`] until it exits
//! (read once more while it is an unreaped zombie).
//!
//! Invariants: a trial that did not exit 0, wrote no record, or wrote a
//! line that is not a record is an error, never a measurement; the records
//! file is read with a size bound ([`MAX_RECORDS_BYTES`]); every child is
//! reaped before the trial returns, also on timeout and interrupt.

use commbench_core::placement::{current_affinity, CpuList};
use commbench_core::record::Record;
use commbench_core::rusage::{wait_child, ChildExit, Usage};
use commbench_core::sched::{
    exited_unreaped, kill_group, CpuTimes, StartBarrier, TaskTimes, TreeSampler,
};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often a running child's scheduler counters are read.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Largest records file read from one trial.
pub const MAX_RECORDS_BYTES: u64 = 64 << 20;

/// Stderr kept from a failed trial for its error message.
const STDERR_TAIL: usize = 2000;

/// What went wrong with one trial.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum TrialError {
    #[error("cannot start `{program}`: {err}")]
    Spawn { program: String, err: String },
    #[error("`{command}` {how}{}", tail_of(.stderr))]
    Exit {
        command: String,
        how: String,
        stderr: String,
    },
    #[error("`{command}` wrote no records (does it take --format jsonl --output FILE?){}", tail_of(.stderr))]
    NoRecords { command: String, stderr: String },
    #[error("`{command}` wrote a line that is not a record ({err})")]
    BadRecord { command: String, err: String },
    #[error("`{command}` ran longer than {limit_s:.0} s and was stopped")]
    Timeout { command: String, limit_s: f64 },
    #[error("interrupted")]
    Interrupted,
    #[error("the start barrier failed: {0}")]
    Barrier(String),
}

fn tail_of(s: &str) -> String {
    if s.trim().is_empty() {
        String::new()
    } else {
        format!("; its last output:\n{}", s.trim_end())
    }
}

/// One finished trial.
#[derive(Debug, Clone)]
pub struct Trial {
    /// The records it wrote, in order.
    pub records: Vec<Record>,
    /// Wall time from the start (or the barrier) to exit.
    pub wall_s: f64,
    /// The child's own resource usage (wait4).
    pub usage: Usage,
    /// Scheduler counters of its threads and descendants.
    pub sched: TaskTimes,
    /// Steal, softirq and irq time of the CPUs it could use.
    pub cpu: CpuTimes,
    /// The CPUs it could use.
    pub cpus: Vec<usize>,
}

impl Trial {
    /// How much the machine held the trial back, as a share in 0..=2: the
    /// share of its threads' runnable time spent waiting for a CPU
    /// (run-queue delay over run + wait, summed over threads and
    /// descendants), plus the share of its CPUs' time the hypervisor stole
    /// during the trial.
    pub fn interference(&self) -> f64 {
        let (run, wait) = (self.sched.run_ns as f64, self.sched.wait_ns as f64);
        let queued = if run + wait > 0.0 {
            wait / (run + wait)
        } else {
            0.0
        };
        let cpu_s = self.wall_s * self.cpus.len().max(1) as f64;
        let stolen = if cpu_s > 0.0 {
            (self.cpu.steal_s / cpu_s).min(1.0)
        } else {
            0.0
        };
        queued + stolen
    }
}

/// How to start one child.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Program and arguments (the records options are appended).
    pub argv: Vec<String>,
    /// Where it writes its records.
    pub records: PathBuf,
    /// Where its stderr goes (kept for error messages).
    pub stderr: PathBuf,
    /// Pinned to these CPUs (None: the CPUs `ab` itself may use).
    pub cpus: Option<CpuList>,
}

impl Launch {
    fn command_line(&self) -> String {
        self.argv.join(" ")
    }

    fn command(&self) -> Result<Command, TrialError> {
        let (program, args) = self.argv.split_first().ok_or_else(|| TrialError::Spawn {
            program: String::new(),
            err: "empty command".into(),
        })?;
        let err = std::fs::File::create(&self.stderr).map_err(|e| TrialError::Spawn {
            program: program.clone(),
            err: format!("cannot create {}: {e}", self.stderr.display()),
        })?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .arg("--format")
            .arg("jsonl")
            .arg("--output")
            .arg(&self.records)
            .env("COMMBENCH_NO_STORE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .process_group(0);
        Ok(cmd)
    }
}

/// Spawns `cmd` from the calling thread pinned to `cpus` (the child
/// inherits the affinity), then restores the thread's own.
fn spawn_pinned(cmd: &mut Command, cpus: Option<&CpuList>) -> std::io::Result<Child> {
    let Some(cpus) = cpus else {
        return cmd.spawn();
    };
    let mine = current_affinity();
    cpus.pin_current_thread()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let child = cmd.spawn();
    if !mine.cpus().is_empty() {
        let _ = mine.pin_current_thread();
    }
    child
}

struct Running {
    child: Child,
    sampler: TreeSampler,
    cpu_before: CpuTimes,
    cpus: Vec<usize>,
    wall_s: f64,
    exited: bool,
}

/// Runs the launches at the same time (one for a sequential trial, two for
/// a duet behind a start barrier) and returns each one's outcome, in order.
pub fn run_together(
    launches: &[Launch],
    timeout: Duration,
    stop: &AtomicBool,
) -> Vec<Result<Trial, TrialError>> {
    let mut cmds = Vec::with_capacity(launches.len());
    for l in launches {
        match l.command() {
            Ok(c) => cmds.push(c),
            Err(e) => return launches.iter().map(|_| Err(e.clone())).collect(),
        }
    }
    let spawned = match spawn_all(cmds, launches) {
        Ok(s) => s,
        Err(e) => return launches.iter().map(|_| Err(e.clone())).collect(),
    };
    let t0 = Instant::now();
    let mut running: Vec<Result<Running, TrialError>> = spawned
        .into_iter()
        .zip(launches)
        .map(|(r, l)| {
            let cpus = l
                .cpus
                .as_ref()
                .map(|c| c.cpus().to_vec())
                .unwrap_or_else(|| current_affinity().cpus().to_vec());
            r.map(|child| Running {
                sampler: TreeSampler::new(child.id()),
                cpu_before: CpuTimes::read(&cpus),
                child,
                cpus,
                wall_s: 0.0,
                exited: false,
            })
            .map_err(|e| TrialError::Spawn {
                program: l.argv.first().cloned().unwrap_or_default(),
                err: e.to_string(),
            })
        })
        .collect();
    let killed = watch(&mut running, t0, timeout, stop);
    running
        .into_iter()
        .zip(launches)
        .map(|(r, l)| finish(r?, l, killed.as_ref()))
        .collect()
}

/// Spawns the commands: directly for one, from threads behind a start
/// barrier for several (spawn returns only after exec, which the barrier
/// holds). A barrier that fails stops whatever did start.
fn spawn_all(
    mut cmds: Vec<Command>,
    launches: &[Launch],
) -> Result<Vec<std::io::Result<Child>>, TrialError> {
    if cmds.len() == 1 {
        return Ok(vec![spawn_pinned(&mut cmds[0], launches[0].cpus.as_ref())]);
    }
    let barrier = StartBarrier::new().map_err(|e| TrialError::Barrier(e.to_string()))?;
    for c in cmds.iter_mut() {
        barrier.arm(c);
    }
    let n = cmds.len();
    Ok(std::thread::scope(|s| {
        let handles: Vec<_> = cmds
            .into_iter()
            .zip(launches)
            .map(|(mut c, l)| s.spawn(move || spawn_pinned(&mut c, l.cpus.as_ref())))
            .collect();
        let released = barrier.release(n, Duration::from_secs(30));
        let out: Vec<_> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("spawner panicked")))
            })
            .collect();
        let Err(e) = released else {
            return out;
        };
        // A duet is both or nothing.
        out.into_iter()
            .map(|r| {
                if let Ok(mut c) = r {
                    kill_group(c.id());
                    let _ = c.wait();
                }
                Err(std::io::Error::other(format!("start barrier: {e}")))
            })
            .collect()
    }))
}

/// Samples the running children every [`SAMPLE_EVERY`] until all have
/// exited (left unreaped); on an interrupt or past `timeout`, kills their
/// groups and returns why.
fn watch(
    running: &mut [Result<Running, TrialError>],
    t0: Instant,
    timeout: Duration,
    stop: &AtomicBool,
) -> Option<TrialError> {
    loop {
        let mut all = true;
        for r in running.iter_mut().flatten().filter(|r| !r.exited) {
            r.sampler.sample();
            if exited_unreaped(r.child.id() as libc::pid_t, false).unwrap_or(true) {
                r.sampler.sample();
                r.exited = true;
                r.wall_s = t0.elapsed().as_secs_f64();
            } else {
                all = false;
            }
        }
        if all {
            return None;
        }
        let why = if stop.load(Ordering::Relaxed) {
            TrialError::Interrupted
        } else if t0.elapsed() > timeout {
            TrialError::Timeout {
                command: String::new(),
                limit_s: timeout.as_secs_f64(),
            }
        } else {
            std::thread::sleep(SAMPLE_EVERY);
            continue;
        };
        for r in running.iter_mut().flatten().filter(|r| !r.exited) {
            kill_group(r.child.id());
            // SIGKILL cannot be ignored: this wait ends.
            let _ = exited_unreaped(r.child.id() as libc::pid_t, true);
            r.exited = true;
            r.wall_s = t0.elapsed().as_secs_f64();
        }
        return Some(why);
    }
}

/// Reaps an exited child and reads what it wrote: its records, or why it
/// is not a measurement.
fn finish(r: Running, l: &Launch, killed: Option<&TrialError>) -> Result<Trial, TrialError> {
    let cpu = CpuTimes::read(&r.cpus).since(&r.cpu_before);
    let (exit, usage) = wait_child(r.child.id() as libc::pid_t).map_err(|e| TrialError::Spawn {
        program: l.argv.first().cloned().unwrap_or_default(),
        err: format!("cannot wait for it: {e}"),
    })?;
    // The group may have stragglers (a server the command started).
    kill_group(r.child.id());
    match killed {
        Some(TrialError::Timeout { limit_s, .. }) => {
            return Err(TrialError::Timeout {
                command: l.command_line(),
                limit_s: *limit_s,
            })
        }
        Some(e) => return Err(e.clone()),
        None => {}
    }
    let stderr = read_tail(&l.stderr);
    if exit != ChildExit::Code(0) {
        let how = match exit {
            ChildExit::Code(c) => format!("exited {c}"),
            ChildExit::Signal(s) => format!("was killed by signal {s}"),
        };
        return Err(TrialError::Exit {
            command: l.command_line(),
            how,
            stderr,
        });
    }
    let records = read_records(&l.records).map_err(|err| TrialError::BadRecord {
        command: l.command_line(),
        err,
    })?;
    if records.is_empty() {
        return Err(TrialError::NoRecords {
            command: l.command_line(),
            stderr,
        });
    }
    Ok(Trial {
        records,
        wall_s: r.wall_s,
        usage,
        sched: r.sampler.totals(),
        cpu,
        cpus: r.cpus,
    })
}

/// The last [`STDERR_TAIL`] bytes of a file, as text.
fn read_tail(p: &Path) -> String {
    use std::io::{Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(p) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(STDERR_TAIL as u64)));
    let mut buf = Vec::new();
    let _ = f.take(STDERR_TAIL as u64).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The records of a JSON Lines file (blank lines skipped), at most
/// [`MAX_RECORDS_BYTES`] of it.
pub fn read_records(p: &Path) -> Result<Vec<Record>, String> {
    let f = match std::fs::File::open(p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", p.display())),
    };
    let mut text = String::new();
    f.take(MAX_RECORDS_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
    if text.len() as u64 > MAX_RECORDS_BYTES {
        return Err(format!(
            "{} is larger than {} MiB",
            p.display(),
            MAX_RECORDS_BYTES >> 20
        ));
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str::<Record>(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(dir: &Path, name: &str, script: &str) -> Launch {
        // `sh -c SCRIPT sh --format jsonl --output FILE`: $4 is the file.
        Launch {
            argv: vec!["sh".into(), "-c".into(), script.into(), "sh".into()],
            records: dir.join(format!("{name}.jsonl")),
            stderr: dir.join(format!("{name}.err")),
            cpus: None,
        }
    }

    const ONE_RECORD: &str =
        r#"echo '{"schema_version":2,"lab":"x","test":"t","params":{},"metrics":{"v":1}}' > "$4""#;

    #[test]
    fn a_trial_reads_the_records_the_child_wrote() {
        let dir = commbench_core::artifact::TempDir::new("abtest").unwrap();
        let stop = AtomicBool::new(false);
        let r = run_together(
            &[launch(dir.path(), "a", ONE_RECORD)],
            Duration::from_secs(60),
            &stop,
        );
        let t = r[0].as_ref().unwrap();
        assert_eq!(t.records.len(), 1);
        assert_eq!(t.records[0].metric_f64("v"), Some(1.0));
        assert!(t.wall_s > 0.0);
    }

    #[test]
    fn a_failing_child_is_an_error_with_its_output() {
        let dir = commbench_core::artifact::TempDir::new("abtest").unwrap();
        let stop = AtomicBool::new(false);
        let r = run_together(
            &[launch(dir.path(), "a", "echo boom >&2; exit 3")],
            Duration::from_secs(60),
            &stop,
        );
        let e = r[0].as_ref().unwrap_err();
        assert!(matches!(e, TrialError::Exit { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("exited 3") && msg.contains("boom"), "{msg}");
    }

    #[test]
    fn a_child_without_records_or_with_garbage_is_not_a_measurement() {
        let dir = commbench_core::artifact::TempDir::new("abtest").unwrap();
        let stop = AtomicBool::new(false);
        let r = run_together(
            &[launch(dir.path(), "a", "true")],
            Duration::from_secs(60),
            &stop,
        );
        assert!(matches!(r[0], Err(TrialError::NoRecords { .. })));
        let r = run_together(
            &[launch(dir.path(), "b", r#"echo 'not json' > "$4""#)],
            Duration::from_secs(60),
            &stop,
        );
        assert!(matches!(r[0], Err(TrialError::BadRecord { .. })), "{r:?}");
    }

    #[test]
    fn a_trial_past_its_timeout_is_stopped_with_its_children() {
        let dir = commbench_core::artifact::TempDir::new("abtest").unwrap();
        let stop = AtomicBool::new(false);
        // The shell starts a grandchild; both belong to the group.
        let r = run_together(
            &[launch(dir.path(), "a", "sleep 60 & sleep 60")],
            Duration::from_millis(300),
            &stop,
        );
        assert!(matches!(r[0], Err(TrialError::Timeout { .. })), "{r:?}");
    }

    #[test]
    fn a_duet_starts_both_and_reads_both() {
        let dir = commbench_core::artifact::TempDir::new("abtest").unwrap();
        let stop = AtomicBool::new(false);
        let r = run_together(
            &[
                launch(dir.path(), "a", ONE_RECORD),
                launch(dir.path(), "b", ONE_RECORD),
            ],
            Duration::from_secs(60),
            &stop,
        );
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|t| t.as_ref().unwrap().records.len() == 1));
    }
}
