//! One trial: a side's command run once as a child that writes its records
//! as JSON Lines to a file of ours, with what the machine did to it.
//!
//! The child runs as a process tree `ab` owns (`core::proctree`): in a
//! cgroup of its own where the host gives one (its CPU, peak memory and a
//! sure kill), in its own process group, killed by the kernel when the
//! thread that spawned it dies (`PR_SET_PDEATHSIG`; a duet's spawner
//! threads live until the trial ends), and with `ab` as the subreaper of
//! whatever it detaches (`setsid` and a double fork come back to `ab`).
//! When the child exits, everything it left running is killed and reaped,
//! and counted with it. It runs with the results store turned off
//! (`COMMBENCH_NO_STORE=1`: trials are not runs of their own), pinned to
//! the side's CPUs by inheriting the spawning thread's affinity, and with
//! its scheduler counters sampled every [`SAMPLE_EVERY`] until it exits
//! (read once more while it is an unreaped zombie); its exit is seen at
//! once through a pidfd.
//!
//! Invariants: a trial that did not exit 0, wrote no record, or wrote a
//! line that is not a record is an error, never a measurement; the records
//! file is read with a size bound ([`MAX_RECORDS_BYTES`]); only the last
//! [`STDERR_TAIL`] bytes of its stderr are kept, read as it writes; every
//! process of the tree is killed and reaped before the trial returns, also
//! on timeout and interrupt.

use commbench_core::placement::{current_affinity, CpuList};
use commbench_core::proctree::{self, TreeGroup};
use commbench_core::record::Record;
use commbench_core::rusage::{wait_child, ChildExit, Usage};
use commbench_core::sched::{
    exited_unreaped, kill_group, CpuTimes, StartBarrier, TaskTimes, TreeSampler,
};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often a running child's scheduler counters are read.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Largest records file read from one trial.
pub const MAX_RECORDS_BYTES: u64 = 64 << 20;

/// Stderr kept from a trial for its error message: the last bytes, kept
/// as the child writes (a trial that writes 50 MiB to stderr costs ab
/// 2 kB, not 50 MiB).
pub const STDERR_TAIL: usize = 2000;

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
    #[error("a shared-CPU duet needs each side in a cgroup of the CPU controller: {0}")]
    CpuWeight(String),
    #[error("`{command}` printed nothing that --metric {name} matches{}", tail_of(.stdout))]
    NoMetric {
        command: String,
        name: String,
        stdout: String,
    },
    #[error("--prepare `{command}` {how}{}", tail_of(.stderr))]
    Prepare {
        command: String,
        how: String,
        stderr: String,
    },
}

fn tail_of(s: &str) -> String {
    if s.trim().is_empty() {
        String::new()
    } else {
        format!("; its last output:\n{}", s.trim_end())
    }
}

/// What the whole process tree of a trial used: the child, everything it
/// started, and everything those left behind (daemons included).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TreeUsage {
    /// User CPU (s).
    pub user_s: f64,
    /// System CPU (s).
    pub sys_s: f64,
    /// The largest peak resident set of any one process of the tree (KiB;
    /// wait4's `ru_maxrss`, as hyperfine's memory figure).
    pub max_rss_kib: u64,
    /// The tree's peak memory as its cgroup counted it (bytes, page cache
    /// included), where a memory cgroup held it.
    pub memory_peak_bytes: Option<u64>,
    /// Processes that outlived the child and were killed and reaped (a
    /// daemon it detached, a job it left in the background).
    pub left_behind: usize,
}

impl TreeUsage {
    /// CPU seconds (user + sys).
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }
}

/// One finished trial.
#[derive(Debug, Clone)]
pub struct Trial {
    /// The records it wrote, in order.
    pub records: Vec<Record>,
    /// Wall time from the start (or the barrier) to the child's exit.
    pub wall_s: f64,
    /// The child's own resource usage (wait4).
    pub usage: Usage,
    /// The whole tree's.
    pub tree: TreeUsage,
    /// How the tree was held (`cgroup v2 (kill, cpu) + cgroup v1 memory`).
    pub containment: String,
    /// Scheduler counters of its threads and descendants.
    pub sched: TaskTimes,
    /// Steal, softirq and irq time of the CPUs it could use.
    pub cpu: CpuTimes,
    /// The CPUs it could use.
    pub cpus: Vec<usize>,
    /// Its tree's name (its cgroups' folder name).
    pub group: String,
    /// The CPU weight of its cgroup, read back (`v1 cpu.shares 1024`),
    /// when the launch asked for one ([`Launch::weighted`]).
    pub cpu_weight: Option<String>,
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

/// A number a program prints, taken from its standard output
/// (`--metric NAME=REGEX`): the regex's first group (else the whole
/// match) of the last line that matches, as a number.
#[derive(Debug, Clone)]
pub struct OutputMetric {
    /// The metric's name in the trial's record.
    pub name: String,
    /// What to look for, line by line.
    pub pattern: regex::Regex,
    /// Which way is better.
    pub better: commbench_core::lab::Better,
}

/// What a program that writes no records is measured by: its process
/// tree, timed whole.
#[derive(Debug, Clone, Default)]
pub struct Exec {
    /// Operations one run does (`--ops N`): per-operation figures.
    pub ops: Option<u64>,
    /// Numbers it prints.
    pub outputs: Vec<OutputMetric>,
}

/// How a trial's outcome is read.
#[derive(Debug, Clone)]
pub enum Mode {
    /// A commbench command: `--format jsonl --output FILE` appended, its
    /// records read back from FILE.
    Records(PathBuf),
    /// Any program: one record of lab `exec`, test `command`, made by ab
    /// from the tree's wall time, CPU and memory ([`exec_record`]).
    Exec(Exec),
}

impl Mode {
    /// Removes a records file once read (exec: nothing to remove).
    pub fn remove_file(&self) {
        if let Mode::Records(f) = self {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Words as one command line a shell would split back into them (words
/// with spaces or quotes in single quotes).
pub fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if w.is_empty() || w.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c)) {
                format!("'{}'", w.replace('\'', "'\\''"))
            } else {
                w.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// How to start one child.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Program and arguments (in records mode, the records options are
    /// appended).
    pub argv: Vec<String>,
    /// How its outcome is read.
    pub mode: Mode,
    /// Pinned to these CPUs (None: the CPUs `ab` itself may use).
    pub cpus: Option<CpuList>,
    /// Its tree in a cgroup of the CPU controller with the default weight
    /// (`core::proctree::TreeGroup::create_weighted`): two weighted
    /// launches run together on one CPU each get half of it.
    pub weighted: bool,
}

impl Launch {
    fn command_line(&self) -> String {
        command_line(&self.argv)
    }

    fn program(&self) -> String {
        self.argv.first().cloned().unwrap_or_default()
    }

    fn command(&self, group: &TreeGroup) -> Result<Command, TrialError> {
        let (program, args) = self.argv.split_first().ok_or_else(|| TrialError::Spawn {
            program: String::new(),
            err: "empty command".into(),
        })?;
        let mut cmd = Command::new(program);
        cmd.args(args);
        let mut stdout = Stdio::null();
        match &self.mode {
            Mode::Records(file) => {
                cmd.arg("--format").arg("jsonl").arg("--output").arg(file);
            }
            Mode::Exec(e) if !e.outputs.is_empty() => stdout = Stdio::piped(),
            Mode::Exec(_) => {}
        }
        cmd.env("COMMBENCH_NO_STORE", "1")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .process_group(0);
        group.arm(&mut cmd);
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
    pidfd: Option<OwnedFd>,
    stderr: Option<mpsc::Receiver<Vec<u8>>>,
    stdout: Option<mpsc::Receiver<Scanned>>,
    sampler: TreeSampler,
    cpu_before: CpuTimes,
    cpus: Vec<usize>,
    wall_s: f64,
    exited: bool,
}

/// Reads a child's stream to its end on a thread of its own, keeping the
/// last [`STDERR_TAIL`] bytes; the receiver gets them at the end.
fn tail_reader(mut r: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut tail: Vec<u8> = Vec::with_capacity(2 * STDERR_TAIL);
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    tail.extend_from_slice(&buf[..n]);
                    if tail.len() > 2 * STDERR_TAIL {
                        tail.drain(..tail.len() - STDERR_TAIL);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let keep = tail.len().saturating_sub(STDERR_TAIL);
        let _ = tx.send(tail.split_off(keep));
    });
    rx
}

/// What a child printed on stdout: its last [`STDERR_TAIL`] bytes, and
/// per [`OutputMetric`] the number of the last line that matched.
type Scanned = (Vec<u8>, Vec<Option<f64>>);

/// Longest line looked at by `--metric`: a longer one is cut there.
const MAX_LINE: usize = 64 << 10;

/// Reads a child's stdout on a thread of its own, line by line, keeping
/// each pattern's last number and the output's tail; memory stays bounded
/// by [`MAX_LINE`] whatever it prints.
fn scan_reader(
    mut r: impl Read + Send + 'static,
    patterns: Vec<regex::Regex>,
) -> mpsc::Receiver<Scanned> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut found: Vec<Option<f64>> = vec![None; patterns.len()];
        let mut tail: Vec<u8> = Vec::new();
        let mut line: Vec<u8> = Vec::new();
        let mut buf = [0u8; 8192];
        let look = |line: &[u8], found: &mut Vec<Option<f64>>| {
            let text = String::from_utf8_lossy(line);
            for (i, p) in patterns.iter().enumerate() {
                if let Some(v) = p.captures(&text).and_then(|c| {
                    let m = c.get(1).or_else(|| c.get(0))?;
                    number_in(m.as_str())
                }) {
                    found[i] = Some(v);
                }
            }
        };
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            tail.extend_from_slice(&buf[..n]);
            if tail.len() > 2 * STDERR_TAIL {
                tail.drain(..tail.len() - STDERR_TAIL);
            }
            for &b in &buf[..n] {
                if b == b'\n' {
                    look(&line, &mut found);
                    line.clear();
                } else if line.len() < MAX_LINE {
                    line.push(b);
                }
            }
        }
        if !line.is_empty() {
            look(&line, &mut found);
        }
        let keep = tail.len().saturating_sub(STDERR_TAIL);
        let _ = tx.send((tail.split_off(keep), found));
    });
    rx
}

/// The number in a matched text: `12,345.6`, `1.2e6`, `  42 `; commas
/// between digits are thousands separators.
pub fn number_in(s: &str) -> Option<f64> {
    let t: String = s
        .trim()
        .chars()
        .filter(|c| *c != ',' && *c != '_')
        .collect();
    let start = t.find(|c: char| c.is_ascii_digit() || c == '-' || c == '+' || c == '.')?;
    let body = &t[start..];
    let end = body
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || ((c == '-' || c == '+') && (i == 0 || body[..i].ends_with(['e', 'E'])))
                || ((c == 'e' || c == 'E') && i > 0))
        })
        .map_or(body.len(), |(i, _)| i);
    body[..end].parse::<f64>().ok().filter(|v| v.is_finite())
}

/// The record ab makes of an exec trial: lab `exec`, test `command`, the
/// tree's wall time, CPU (user, system, both), the largest process's peak
/// RSS, the cgroup's memory peak where one was counted, per-operation
/// figures with `ops`, and the numbers the program printed.
pub fn exec_record(
    wall_s: f64,
    tree: &TreeUsage,
    exec: &Exec,
    printed: &[(String, f64)],
) -> Record {
    let mut r = Record::new("exec", "command");
    r.push_metric("wall_s", wall_s);
    r.push_metric("cpu_s", tree.cpu_s());
    r.push_metric("user_s", tree.user_s);
    r.push_metric("sys_s", tree.sys_s);
    r.push_metric("max_rss_kib", tree.max_rss_kib);
    if let Some(b) = tree.memory_peak_bytes {
        r.push_metric("memory_peak_kib", b / 1024);
    }
    if let Some(n) = exec.ops.filter(|&n| n > 0) {
        let n = n as f64;
        r.push_metric("wall_ns_per_op", wall_s * 1e9 / n);
        r.push_metric("cpu_ns_per_op", tree.cpu_s() * 1e9 / n);
        if wall_s > 0.0 {
            r.push_metric("ops_per_s", n / wall_s);
        }
    }
    for (name, v) in printed {
        r.push_metric(name, *v);
    }
    r
}

/// Runs a `--setup`, `--prepare` or `--cleanup` command to its end (not
/// timed), in `group` (whatever it leaves running stays there: a server a
/// setup started lives until the group is dropped); stopped past
/// `timeout` or on an interrupt.
pub fn run_aux(
    argv: &[String],
    group: &TreeGroup,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<(), TrialError> {
    let (program, args) = argv.split_first().ok_or_else(|| TrialError::Spawn {
        program: String::new(),
        err: "empty command".into(),
    })?;
    let command = command_line(argv);
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("COMMBENCH_NO_STORE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    group.arm(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| TrialError::Spawn {
        program: program.clone(),
        err: e.to_string(),
    })?;
    let err = child.stderr.take().map(tail_reader);
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) if stop.load(Ordering::Relaxed) => break Err(TrialError::Interrupted),
            Ok(None) if t0.elapsed() > timeout => {
                break Err(TrialError::Prepare {
                    command: command.clone(),
                    how: format!(
                        "ran longer than {:.0} s and was stopped",
                        timeout.as_secs_f64()
                    ),
                    stderr: String::new(),
                })
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => {
                break Err(TrialError::Spawn {
                    program: program.clone(),
                    err: e.to_string(),
                })
            }
        }
    };
    if status.is_err() {
        kill_group(child.id());
        let _ = child.wait();
    }
    let status = status?;
    if status.success() {
        return Ok(());
    }
    // Its output pipe may be held by what it left running: not waited for.
    let stderr = err
        .and_then(|rx| rx.recv_timeout(Duration::from_millis(200)).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    Err(TrialError::Prepare {
        command,
        how: match (status.code(), status.signal()) {
            (Some(c), _) => format!("exited {c}"),
            (_, Some(s)) => format!("was killed by signal {s}"),
            _ => "failed".into(),
        },
        stderr,
    })
}

/// Runs the launches at the same time (one for a sequential trial, two for
/// a duet behind a start barrier) and returns each one's outcome, in order:
/// as many outcomes as launches, by its type.
pub fn run_together<const N: usize>(
    launches: &[Launch; N],
    timeout: Duration,
    stop: &AtomicBool,
    keep: &[u32],
) -> [Result<Trial, TrialError>; N] {
    let out = run_launches(launches, timeout, stop, keep);
    // One outcome per launch (each stage maps launch by launch); were one
    // lost, every launch fails with why rather than a panic.
    match <[_; N]>::try_from(out) {
        Ok(each) => each,
        Err(got) => std::array::from_fn(|i| {
            Err(TrialError::Spawn {
                program: launches[i].program(),
                err: format!("ab lost its outcome: {} outcomes for {N} trials", got.len()),
            })
        }),
    }
}

fn run_launches(
    launches: &[Launch],
    timeout: Duration,
    stop: &AtomicBool,
    keep: &[u32],
) -> Vec<Result<Trial, TrialError>> {
    let mut groups: Vec<TreeGroup> = Vec::with_capacity(launches.len());
    for l in launches {
        if l.weighted {
            match TreeGroup::create_weighted("ab") {
                Ok(g) => groups.push(g),
                Err(e) => {
                    let e = TrialError::CpuWeight(e);
                    return launches.iter().map(|_| Err(e.clone())).collect();
                }
            }
        } else {
            groups.push(TreeGroup::create("ab"));
        }
    }
    let mut cmds = Vec::with_capacity(launches.len());
    for (l, g) in launches.iter().zip(&groups) {
        match l.command(g) {
            Ok(c) => cmds.push(c),
            Err(e) => return launches.iter().map(|_| Err(e.clone())).collect(),
        }
    }
    if cmds.len() == 1 {
        // The clock starts before the spawn: spawn returns only once the
        // child has exec'd, and on a busy machine this thread may wake
        // milliseconds after the child began (`sleep 0.01` timed 7.5 ms).
        let t0 = Instant::now();
        let child = spawn_pinned(&mut cmds[0], launches[0].cpus.as_ref());
        return supervise(vec![child], launches, &mut groups, t0, timeout, stop, keep);
    }
    let barrier = match StartBarrier::new() {
        Ok(b) => b,
        Err(e) => {
            let e = TrialError::Barrier(e.to_string());
            return launches.iter().map(|_| Err(e.clone())).collect();
        }
    };
    for c in cmds.iter_mut() {
        barrier.arm(c);
    }
    let n = cmds.len();
    // The spawner threads live until the trials end: a child's death
    // signal fires when the thread that forked it exits.
    let end = std::sync::Barrier::new(n + 1);
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        for (i, (mut c, l)) in cmds.into_iter().zip(launches).enumerate() {
            let (tx, end) = (tx.clone(), &end);
            s.spawn(move || {
                let _ = tx.send((i, spawn_pinned(&mut c, l.cpus.as_ref())));
                end.wait();
            });
        }
        let released = barrier.release(n, Duration::from_secs(30));
        let t0 = Instant::now();
        let mut spawned: Vec<Option<std::io::Result<Child>>> = (0..n).map(|_| None).collect();
        for _ in 0..n {
            if let Ok((i, r)) = rx.recv() {
                spawned[i] = Some(r);
            }
        }
        let mut spawned: Vec<std::io::Result<Child>> = spawned
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(std::io::Error::other("spawner lost"))))
            .collect();
        if let Err(e) = released {
            // A duet is both or nothing.
            for r in spawned.iter_mut() {
                if let Ok(c) = r {
                    kill_group(c.id());
                    let _ = c.wait();
                }
                *r = Err(std::io::Error::other(format!("start barrier: {e}")));
            }
        }
        let out = supervise(spawned, launches, &mut groups, t0, timeout, stop, keep);
        end.wait();
        out
    })
}

/// Watches the spawned children until they exit (or the timeout or an
/// interrupt ends them), then kills and reaps what their trees left, and
/// reads each trial's outcome.
fn supervise(
    spawned: Vec<std::io::Result<Child>>,
    launches: &[Launch],
    groups: &mut [TreeGroup],
    t0: Instant,
    timeout: Duration,
    stop: &AtomicBool,
    keep: &[u32],
) -> Vec<Result<Trial, TrialError>> {
    let mut running: Vec<Result<Running, TrialError>> = spawned
        .into_iter()
        .zip(launches)
        .zip(groups.iter_mut())
        .map(|((r, l), g)| {
            let cpus = l
                .cpus
                .as_ref()
                .map(|c| c.cpus().to_vec())
                .unwrap_or_else(|| current_affinity().cpus().to_vec());
            r.map(|mut child| {
                g.keep_joined(child.id());
                Running {
                    pidfd: proctree::pidfd_open(child.id()).ok(),
                    stderr: child.stderr.take().map(tail_reader),
                    stdout: match (&l.mode, child.stdout.take()) {
                        (Mode::Exec(e), Some(out)) => Some(scan_reader(
                            out,
                            e.outputs.iter().map(|o| o.pattern.clone()).collect(),
                        )),
                        _ => None,
                    },
                    sampler: TreeSampler::new(child.id()),
                    cpu_before: CpuTimes::read(&cpus),
                    child,
                    cpus,
                    wall_s: 0.0,
                    exited: false,
                }
            })
            .map_err(|e| TrialError::Spawn {
                program: l.program(),
                err: e.to_string(),
            })
        })
        .collect();
    let killed = watch(&mut running, groups, t0, timeout, stop);
    // Everything the trees left (a daemon, a background job) is killed,
    // and the children reaped; then whatever came back to this subreaper.
    for (r, g) in running.iter().zip(groups.iter()) {
        if let Ok(r) = r {
            g.kill();
            kill_group(r.child.id());
        }
    }
    let mut mains: Vec<Option<(ChildExit, Usage)>> = running
        .iter()
        .map(|r| {
            r.as_ref()
                .ok()
                .and_then(|r| wait_child(r.child.id() as libc::pid_t).ok())
        })
        .collect();
    // (`keep`: what a --setup command left running for every trial.)
    let orphans = proctree::kill_other_children(keep);
    let seen: Vec<Vec<u32>> = running
        .iter()
        .map(|r| {
            r.as_ref()
                .map(|r| r.sampler.pids_seen())
                .unwrap_or_default()
        })
        .collect();
    let alone = running.len() == 1;
    running
        .into_iter()
        .zip(launches)
        .zip(groups.iter())
        .enumerate()
        .map(|(i, ((r, l), g))| {
            let r = r?;
            let main = mains[i].take().ok_or_else(|| TrialError::Spawn {
                program: l.program(),
                err: "cannot wait for it".into(),
            })?;
            // Orphans are this trial's when it ran alone, else those its
            // sampler saw in its tree.
            let mine: Vec<&(u32, ChildExit, Usage)> = orphans
                .iter()
                .filter(|(pid, _, _)| alone || seen[i].contains(pid))
                .collect();
            let mut tree = TreeUsage {
                user_s: main.1.user_s,
                sys_s: main.1.sys_s,
                max_rss_kib: main.1.max_rss_kib,
                memory_peak_bytes: None,
                left_behind: mine.len(),
            };
            for (_, _, u) in &mine {
                tree.user_s += u.user_s;
                tree.sys_s += u.sys_s;
                tree.max_rss_kib = tree.max_rss_kib.max(u.max_rss_kib);
            }
            let gu = g.usage();
            if let (Some(u), Some(s)) = (gu.user_s, gu.sys_s) {
                tree.user_s = u;
                tree.sys_s = s;
            }
            tree.memory_peak_bytes = gu.memory_peak_bytes;
            let weight = g.cpu_weight();
            if l.weighted && weight.is_none() {
                return Err(TrialError::CpuWeight(format!(
                    "`{}` did not join its CPU cgroup",
                    l.command_line()
                )));
            }
            finish(r, main, tree, g, l, killed.as_ref())
        })
        .collect()
}

/// Samples the running children every [`SAMPLE_EVERY`] until all have
/// exited (left unreaped), waking at once on an exit (pidfd); on an
/// interrupt or past `timeout`, kills their trees and returns why.
fn watch(
    running: &mut [Result<Running, TrialError>],
    groups: &[TreeGroup],
    t0: Instant,
    timeout: Duration,
    stop: &AtomicBool,
) -> Option<TrialError> {
    let mut last_sample = Instant::now();
    loop {
        let sample = last_sample.elapsed() >= SAMPLE_EVERY;
        if sample {
            last_sample = Instant::now();
        }
        let mut all = true;
        for r in running.iter_mut().flatten().filter(|r| !r.exited) {
            if sample {
                r.sampler.sample();
            }
            if exited_unreaped(r.child.id() as libc::pid_t, false).unwrap_or(true) {
                r.wall_s = t0.elapsed().as_secs_f64();
                r.sampler.sample();
                r.exited = true;
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
            let wait = SAMPLE_EVERY
                .saturating_sub(last_sample.elapsed())
                .min(timeout.saturating_sub(t0.elapsed()))
                .max(Duration::from_millis(1));
            let mut fds: Vec<libc::pollfd> = running
                .iter()
                .flatten()
                .filter(|r| !r.exited)
                .filter_map(|r| r.pidfd.as_ref())
                .map(|fd| libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            if fds.len() == running.iter().flatten().filter(|r| !r.exited).count() {
                // A signal ends the poll early (EINTR: 0), as an exit does.
                let _ = commbench_core::sys::poll(&mut fds, wait.as_millis() as i32);
            } else {
                // No pidfd (a kernel before 5.3): look again soon.
                std::thread::sleep(wait.min(Duration::from_millis(2)));
            }
            continue;
        };
        for (r, g) in running.iter_mut().zip(groups) {
            let Ok(r) = r else { continue };
            if r.exited {
                continue;
            }
            g.kill();
            kill_group(r.child.id());
            // SIGKILL cannot be ignored: this wait ends.
            let _ = exited_unreaped(r.child.id() as libc::pid_t, true);
            r.exited = true;
            r.wall_s = t0.elapsed().as_secs_f64();
        }
        return Some(why);
    }
}

/// Reads what an exited (and reaped) child wrote: its records, or why it
/// is not a measurement.
fn finish(
    r: Running,
    (exit, usage): (ChildExit, Usage),
    tree: TreeUsage,
    group: &TreeGroup,
    l: &Launch,
    killed: Option<&TrialError>,
) -> Result<Trial, TrialError> {
    let cpu = CpuTimes::read(&r.cpus).since(&r.cpu_before);
    // The tree is dead: the pipe's last writer is gone. A writer that
    // escaped (no cgroup, a process that left the tree's reach) is not
    // waited for past a second.
    let stderr = r
        .stderr
        .and_then(|rx| rx.recv_timeout(Duration::from_secs(1)).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
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
    let records = match &l.mode {
        Mode::Records(file) => {
            let records = read_records(file).map_err(|err| TrialError::BadRecord {
                command: l.command_line(),
                err,
            })?;
            if records.is_empty() {
                return Err(TrialError::NoRecords {
                    command: l.command_line(),
                    stderr,
                });
            }
            records
        }
        Mode::Exec(e) => {
            let (tail, found) = r
                .stdout
                .and_then(|rx| rx.recv_timeout(Duration::from_secs(1)).ok())
                .unwrap_or_default();
            let mut printed = Vec::new();
            for (i, o) in e.outputs.iter().enumerate() {
                match found.get(i).copied().flatten() {
                    Some(v) => printed.push((o.name.clone(), v)),
                    None => {
                        return Err(TrialError::NoMetric {
                            command: l.command_line(),
                            name: o.name.clone(),
                            stdout: String::from_utf8_lossy(&tail).into_owned(),
                        })
                    }
                }
            }
            vec![exec_record(r.wall_s, &tree, e, &printed)]
        }
    };
    Ok(Trial {
        records,
        wall_s: r.wall_s,
        usage,
        tree,
        containment: group.mechanism(),
        sched: r.sampler.totals(),
        cpu,
        cpus: r.cpus,
        group: group.name().to_owned(),
        cpu_weight: group.cpu_weight(),
    })
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
            mode: Mode::Records(dir.join(format!("{name}.jsonl"))),
            cpus: None,
            weighted: false,
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
            &[],
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
            &[],
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
            &[],
        );
        assert!(matches!(r[0], Err(TrialError::NoRecords { .. })));
        let r = run_together(
            &[launch(dir.path(), "b", r#"echo 'not json' > "$4""#)],
            Duration::from_secs(60),
            &stop,
            &[],
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
            &[],
        );
        assert!(matches!(r[0], Err(TrialError::Timeout { .. })), "{r:?}");
    }

    #[test]
    fn printed_numbers_are_read_with_separators_and_exponents() {
        assert_eq!(number_in("  12,345.5 "), Some(12345.5));
        assert_eq!(number_in("1.5e6"), Some(1.5e6));
        assert_eq!(number_in("-3"), Some(-3.0));
        assert_eq!(number_in("42req"), Some(42.0));
        assert_eq!(number_in("none"), None);
        assert_eq!(number_in("inf"), None);
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
            &[],
        );
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|t| t.as_ref().unwrap().records.len() == 1));
    }
}
