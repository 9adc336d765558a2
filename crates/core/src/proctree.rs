//! A process tree a run owns: everything a child starts — its threads,
//! its children, and the daemons it detaches with `setsid` and a double
//! fork — is counted with the child and ended with it, also when the run
//! itself dies.
//!
//! Serves `commbench ab`, whose trials run arbitrary programs (a server
//! that daemonizes, a script that leaves a job in the background). Four
//! mechanisms, each covering what the one before cannot:
//!
//! - **A cgroup of its own** ([`TreeGroup`]), made under the run's own
//!   cgroup so its limits still hold: on cgroup v2, membership, a sure
//!   kill (`cgroup.kill`) and the tree's CPU (`cpu.stat`, kept without any
//!   controller); on v1, `cpuacct` for CPU, `freezer` for a kill no fork
//!   can outrun, and `memory` for the tree's peak memory (v2's
//!   `memory.peak` where the memory controller is delegated). A host
//!   offering none (no permission) falls through to the rest.
//! - **The run is its children's subreaper** ([`become_subreaper`]): a
//!   process whose parent exits is reparented to the run, not to init, so
//!   a daemon comes back to be killed and reaped ([`reap_exited`]) and its
//!   CPU is counted through wait4.
//! - **The main child dies with the run** (`PR_SET_PDEATHSIG`, SIGKILL):
//!   a run killed with SIGKILL takes its trial with it.
//! - **A name in the environment** ([`TREE_ENV`]): every process of the
//!   tree inherits `COMMBENCH_TREE=<name>`, and the cgroup carries the same
//!   name, `commbench-<lab>-<pid>-<start>-<seq>` (`core::artifact`), so
//!   `commbench clean` finds the trees of a run that died by SIGKILL
//!   ([`clean_leftovers`]) and kills them.
//!
//! Invariants: a [`TreeGroup`] is removed (its processes killed first)
//! when dropped; only directories named by `core::artifact::name` under a
//! cgroup mount are ever removed, and only when their owner is dead.
#![allow(unsafe_code)]

use crate::artifact;
use crate::lab::Leftover;
use crate::rusage::{ChildExit, Usage};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The environment variable every process of a tree carries: the tree's
/// name.
pub const TREE_ENV: &str = "COMMBENCH_TREE";

/// Set (to anything), no cgroup is made: the subreaper, the death signal
/// and the name in the environment hold the tree alone (what a host
/// without cgroup permissions gets; the tests use it to check that path).
pub const NO_CGROUP_ENV: &str = "COMMBENCH_NO_CGROUP";

/// Makes this process the subreaper of its descendants
/// (`PR_SET_CHILD_SUBREAPER`): orphans are reparented here, not to init.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    unsafe { crate::syscall!(prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong)) }.map(|_| ())
}

/// Which cgroup hierarchy a part of a tree's group belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The unified hierarchy (cgroup v2).
    V2,
    /// v1 `cpuacct`.
    Cpuacct,
    /// v1 `memory`.
    Memory,
    /// v1 `freezer`.
    Freezer,
    /// v1 `cpu` (the CPU controller: `cpu.shares`), made only for a
    /// group that asks for a CPU weight.
    Cpu,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::V2 => "v2",
            Kind::Cpuacct => "v1 cpuacct",
            Kind::Memory => "v1 memory",
            Kind::Freezer => "v1 freezer",
            Kind::Cpu => "v1 cpu",
        }
    }
}

/// The cgroup folders this process belongs to, per hierarchy this module
/// uses: (kind, the mount point, the folder).
fn own_cgroups() -> Vec<(Kind, PathBuf, PathBuf)> {
    let mounts = cgroup_mounts();
    let Ok(own) = std::fs::read_to_string("/proc/self/cgroup") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in own.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let kinds: Vec<Kind> = if id == "0" && ctrls.is_empty() {
            vec![Kind::V2]
        } else {
            ctrls.split(',').filter_map(v1_kind).collect()
        };
        for kind in kinds {
            let Some(m) = mounts.iter().find(|m| m.kind == kind) else {
                continue;
            };
            let rel = Path::new(path)
                .strip_prefix(&m.root)
                .unwrap_or_else(|_| Path::new(path));
            let rel = rel.strip_prefix("/").unwrap_or(rel);
            out.push((kind, m.point.clone(), m.point.join(rel)));
        }
    }
    out
}

/// The v1 controller a mount option or `/proc/self/cgroup` entry names,
/// among those this module uses.
fn v1_kind(c: &str) -> Option<Kind> {
    match c {
        "cpuacct" => Some(Kind::Cpuacct),
        "memory" => Some(Kind::Memory),
        "freezer" => Some(Kind::Freezer),
        "cpu" => Some(Kind::Cpu),
        _ => None,
    }
}

#[derive(Debug)]
struct Mount {
    kind: Kind,
    /// Where it is mounted.
    point: PathBuf,
    /// The hierarchy's folder at the mount point.
    root: PathBuf,
}

/// The cgroup mounts of this process's mount namespace
/// (`/proc/self/mountinfo`): v2, and v1 mounts holding cpuacct, memory or
/// freezer.
fn cgroup_mounts() -> Vec<Mount> {
    let Ok(s) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in s.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if l.len() < 5 || r.len() < 3 {
            continue;
        }
        let (root, point) = (unescape(l[3]), unescape(l[4]));
        let kinds: Vec<Kind> = match r[0] {
            "cgroup2" => vec![Kind::V2],
            "cgroup" => r[2].split(',').filter_map(v1_kind).collect(),
            _ => continue,
        };
        for kind in kinds {
            if !out.iter().any(|m: &Mount| m.kind == kind) {
                out.push(Mount {
                    kind,
                    point: PathBuf::from(&point),
                    root: PathBuf::from(&root),
                });
            }
        }
    }
    out
}

/// mountinfo escapes spaces, tabs, newlines and backslashes as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[derive(Debug)]
struct Part {
    kind: Kind,
    dir: PathBuf,
    /// `cgroup.procs`, opened before the spawn: the child writes "0" to it
    /// between fork and exec.
    procs: OwnedFd,
}

/// The cgroups of one tree (none where the host gives no cgroup), named
/// like every artifact so that `commbench clean` can find them.
#[derive(Debug)]
pub struct TreeGroup {
    name: String,
    parts: Vec<Part>,
    /// Why a cgroup could not be used, when none was.
    why_not: Option<String>,
    /// The CPU weight file written ([`TreeGroup::create_weighted`]), in
    /// the folder of the part that holds it.
    weight_file: Option<PathBuf>,
}

/// The CPU weight every weighted group gets: the kernel's default, so
/// that two such groups, siblings under one parent, split a CPU they both
/// want in halves (v1 `cpu.shares`, v2 `cpu.weight`).
pub const CPU_SHARES_V1: u64 = 1024;
/// v2's default `cpu.weight`.
pub const CPU_WEIGHT_V2: u64 = 100;

/// What a tree's cgroup measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GroupUsage {
    /// User CPU of every process that was in the group (s).
    pub user_s: Option<f64>,
    /// System CPU of every process that was in the group (s).
    pub sys_s: Option<f64>,
    /// Peak memory charged to the group (bytes; page cache included).
    pub memory_peak_bytes: Option<u64>,
}

fn open_procs(dir: &Path) -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(dir.join("cgroup.procs"))?;
    Ok(OwnedFd::from(f))
}

impl TreeGroup {
    /// A fresh group for one tree of `lab`: a cgroup folder under this
    /// process's own in each hierarchy that gives something the others do
    /// not (v2 first; v1 cpuacct and freezer only without v2; memory where
    /// v2 has no `memory.peak`). Never fails: without cgroups the group is
    /// empty and says why ([`TreeGroup::mechanism`]).
    pub fn create(lab: &str) -> TreeGroup {
        let name = artifact::name(lab);
        if std::env::var_os(NO_CGROUP_ENV).is_some() {
            return TreeGroup {
                name,
                parts: Vec::new(),
                why_not: Some(format!("turned off by {NO_CGROUP_ENV}")),
                weight_file: None,
            };
        }
        let mut parts: Vec<Part> = Vec::new();
        let mut errors = Vec::new();
        let own = own_cgroups();
        let mut try_make = |kind: Kind, parent: &Path, parts: &mut Vec<Part>| {
            let dir = parent.join(&name);
            let made = std::fs::create_dir(&dir).and_then(|()| match open_procs(&dir) {
                Ok(fd) => Ok(fd),
                Err(e) => {
                    let _ = std::fs::remove_dir(&dir);
                    Err(e)
                }
            });
            match made {
                Ok(procs) => parts.push(Part { kind, dir, procs }),
                Err(e) => errors.push(format!("{} ({}): {e}", kind.word(), parent.display())),
            }
        };
        if let Some((_, _, dir)) = own.iter().find(|(k, _, _)| *k == Kind::V2) {
            try_make(Kind::V2, dir, &mut parts);
        }
        let v2 = parts.first().map(|p| p.dir.clone());
        let v2_kill = v2.as_ref().is_some_and(|d| d.join("cgroup.kill").exists());
        let v2_memory = v2.as_ref().is_some_and(|d| d.join("memory.peak").exists());
        for (kind, _, dir) in &own {
            let wanted = match kind {
                Kind::V2 | Kind::Cpu => false,
                Kind::Cpuacct => v2.is_none(),
                Kind::Freezer => !v2_kill,
                Kind::Memory => !v2_memory,
            };
            if wanted && !parts.iter().any(|p| p.kind == *kind) {
                try_make(*kind, dir, &mut parts);
            }
        }
        let why_not = parts.is_empty().then(|| {
            if own.is_empty() {
                "no cgroup hierarchy is mounted here".to_owned()
            } else {
                format!("no cgroup could be made: {}", errors.join("; "))
            }
        });
        TreeGroup {
            name,
            parts,
            why_not,
            weight_file: None,
        }
    }

    /// A group as [`TreeGroup::create`] makes it, also in the CPU
    /// controller with the default weight written ([`CPU_SHARES_V1`],
    /// [`CPU_WEIGHT_V2`]): two such groups made by one process are
    /// siblings of equal weight, so the scheduler gives each half of a
    /// CPU both keep busy whatever their thread counts (`commbench ab
    /// --shared-cpu`). Where the CPU controller cannot be used, says why:
    /// not mounted (v1) or not enabled for this process's cgroup (v2's
    /// `cgroup.subtree_control`), no permission, or turned off by
    /// [`NO_CGROUP_ENV`].
    pub fn create_weighted(lab: &str) -> Result<TreeGroup, String> {
        let mut g = TreeGroup::create(lab);
        if let Some(w) = &g.why_not {
            return Err(format!("no cgroup for the trial: {w}"));
        }
        // v2: the controller is there when the parent enabled it for its
        // children; the new group then has cpu.weight.
        if let Some(p) = g.parts.iter().find(|p| p.kind == Kind::V2) {
            let f = p.dir.join("cpu.weight");
            if f.exists() {
                std::fs::write(&f, CPU_WEIGHT_V2.to_string())
                    .map_err(|e| format!("cannot write {}: {e}", f.display()))?;
                g.weight_file = Some(f);
                return Ok(g);
            }
        }
        let own = own_cgroups();
        let Some((_, _, parent)) = own.iter().find(|(k, _, _)| *k == Kind::Cpu) else {
            return Err(if g.parts.iter().any(|p| p.kind == Kind::V2) {
                "the cgroup v2 CPU controller is not enabled for this process's cgroup (no \"cpu\" in its parent's cgroup.subtree_control), and no v1 cpu hierarchy is mounted".to_owned()
            } else {
                "no cgroup CPU controller is mounted (neither v2 with \"cpu\" enabled nor v1 cpu)"
                    .to_owned()
            });
        };
        let dir = parent.join(&g.name);
        // cpu and cpuacct mounted together: the cpuacct part is the folder.
        if let Some(p) = g.parts.iter().find(|p| p.dir == dir) {
            let f = p.dir.join("cpu.shares");
            std::fs::write(&f, CPU_SHARES_V1.to_string())
                .map_err(|e| format!("cannot write {}: {e}", f.display()))?;
            g.weight_file = Some(f);
            return Ok(g);
        }
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot make a v1 cpu cgroup in {}: {e}", parent.display()))?;
        let procs = match open_procs(&dir) {
            Ok(fd) => fd,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(format!("cannot open {}/cgroup.procs: {e}", dir.display()));
            }
        };
        let f = dir.join("cpu.shares");
        g.parts.push(Part {
            kind: Kind::Cpu,
            dir,
            procs,
        });
        std::fs::write(&f, CPU_SHARES_V1.to_string())
            .map_err(|e| format!("cannot write {}: {e}", f.display()))?;
        g.weight_file = Some(f);
        Ok(g)
    }

    /// The CPU weight that holds the tree, as read back from its file
    /// (`v1 cpu.shares 1024`, `v2 cpu.weight 100`); None for a group made
    /// without one, or whose child did not join the CPU controller's
    /// group.
    pub fn cpu_weight(&self) -> Option<String> {
        let f = self.weight_file.as_ref()?;
        let dir = f.parent()?;
        let part = self.parts.iter().find(|p| p.dir == dir)?;
        let v = read_u64(f)?;
        let file = f.file_name()?.to_string_lossy();
        Some(match part.kind {
            Kind::V2 => format!("v2 {file} {v}"),
            _ => format!("v1 {file} {v}"),
        })
    }

    /// The folder of the group in the CPU controller's hierarchy, where
    /// one holds the tree.
    pub fn cpu_dir(&self) -> Option<&Path> {
        self.weight_file.as_ref()?.parent()
    }

    /// The tree's name (its cgroups' folder name and [`TREE_ENV`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which mechanisms hold the tree, in words: `cgroup v2 (kill, cpu) +
    /// v1 memory`, or `no cgroup (…)`.
    pub fn mechanism(&self) -> String {
        if let Some(w) = &self.why_not {
            return format!("no cgroup ({w})");
        }
        let mut v: Vec<String> = Vec::new();
        for p in &self.parts {
            v.push(match p.kind {
                Kind::V2 => {
                    let mut what = vec!["cpu"];
                    if p.dir.join("cgroup.kill").exists() {
                        what.insert(0, "kill");
                    }
                    if p.dir.join("memory.peak").exists() {
                        what.push("memory");
                    }
                    format!("cgroup v2 ({})", what.join(", "))
                }
                k => format!("cgroup {}", k.word()),
            });
        }
        let mut out = v.join(" + ");
        if let Some(w) = self.cpu_weight() {
            out.push_str(&format!(", CPU weight {w}"));
        }
        out
    }

    /// Whether any cgroup holds the tree.
    pub fn has_cgroup(&self) -> bool {
        !self.parts.is_empty()
    }

    /// Makes `cmd`'s child join the group between fork and exec, die when
    /// the spawning thread exits (`PR_SET_PDEATHSIG`, SIGKILL: spawn from
    /// a thread that lives as long as the trial), and carry [`TREE_ENV`].
    pub fn arm(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        cmd.env(TREE_ENV, &self.name);
        // The CPU weight's group must hold the child (a shared CPU split
        // by thread counts is not the measurement asked for): a failed
        // join there fails the spawn; elsewhere the child runs outside
        // that hierarchy.
        let weight_dir = self.cpu_dir().map(Path::to_path_buf);
        let fds: Vec<(libc::c_int, bool)> = self
            .parts
            .iter()
            .map(|p| (p.procs.as_raw_fd(), Some(&p.dir) == weight_dir.as_ref()))
            .collect();
        // SAFETY: getpid has no memory effects.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only write(2), prctl(2), getppid(2) on descriptors the
        // parent keeps open for the spawn; the descriptor list was built
        // before the fork and is only read, nothing is allocated.
        unsafe {
            cmd.pre_exec(move || {
                for &(fd, strict) in &fds {
                    // "0": the writing process. A failed join leaves the
                    // child outside that hierarchy; the parent sees it in
                    // `joined`.
                    if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 && strict {
                        return Err(io::Error::last_os_error());
                    }
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent died before the prctl: no signal will come.
                if libc::getppid() != parent {
                    return Err(io::Error::other("the parent exited"));
                }
                Ok(())
            });
        }
    }

    /// Keeps only the cgroups `pid` actually joined (after the spawn): a
    /// hierarchy that refused the join no longer counts as holding it.
    pub fn keep_joined(&mut self, pid: u32) {
        // A child that already exited has left every cgroup: nothing to
        // tell (a two-line script can be gone before this look).
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| !r.trim_start().starts_with(['Z', 'X']))
        });
        if !alive {
            return;
        }
        let before = self.parts.len();
        let mut dropped = Vec::new();
        self.parts.retain(|p| {
            let ok = read_pids(&p.dir).contains(&pid);
            if !ok {
                dropped.push(p.dir.clone());
            }
            ok
        });
        for d in dropped {
            let _ = std::fs::remove_dir(d);
        }
        if self.parts.is_empty() && before > 0 {
            self.why_not = Some("the child could not join the cgroups made for it".into());
        }
    }

    /// The processes in the group now (none without a cgroup).
    pub fn pids(&self) -> Vec<u32> {
        self.parts
            .first()
            .map(|p| read_pids(&p.dir))
            .unwrap_or_default()
    }

    /// Kills every process of the group: `cgroup.kill` on v2; on v1 with
    /// the freezer, frozen first so that no fork outruns the kill; else
    /// the listed processes, until none is left (at most 100 rounds).
    pub fn kill(&self) {
        kill_dir_set(
            &self
                .parts
                .iter()
                .map(|p| (p.kind, p.dir.clone()))
                .collect::<Vec<_>>(),
        );
    }

    /// What the group measured so far (after [`TreeGroup::kill`] and the
    /// reaping of its processes: everything they did).
    pub fn usage(&self) -> GroupUsage {
        let mut u = GroupUsage::default();
        for p in &self.parts {
            match p.kind {
                Kind::V2 => {
                    let s = std::fs::read_to_string(p.dir.join("cpu.stat")).unwrap_or_default();
                    let field = |k: &str| {
                        s.lines()
                            .find_map(|l| l.strip_prefix(k))
                            .and_then(|v| v.trim().parse::<f64>().ok())
                    };
                    u.user_s = field("user_usec ").map(|x| x * 1e-6);
                    u.sys_s = field("system_usec ").map(|x| x * 1e-6);
                    if let Some(m) = read_u64(&p.dir.join("memory.peak")) {
                        u.memory_peak_bytes = Some(m);
                    }
                }
                Kind::Cpuacct if u.user_s.is_none() => {
                    let user = read_u64(&p.dir.join("cpuacct.usage_user"));
                    let sys = read_u64(&p.dir.join("cpuacct.usage_sys"));
                    if let (Some(a), Some(b)) = (user, sys) {
                        u.user_s = Some(a as f64 * 1e-9);
                        u.sys_s = Some(b as f64 * 1e-9);
                    }
                }
                Kind::Memory => {
                    u.memory_peak_bytes = read_u64(&p.dir.join("memory.max_usage_in_bytes"));
                }
                _ => {}
            }
        }
        u
    }
}

impl Drop for TreeGroup {
    fn drop(&mut self) {
        if self.parts.is_empty() {
            return;
        }
        self.kill();
        for p in &self.parts {
            remove_cgroup(&p.dir);
        }
    }
}

fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn read_pids(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn kill_pids(pids: &[u32]) {
    for &pid in pids {
        let _ = crate::sys::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

/// Kills every process in the cgroup folders (one tree, several
/// hierarchies).
fn kill_dir_set(parts: &[(Kind, PathBuf)]) {
    if let Some((_, d)) = parts.iter().find(|(k, _)| *k == Kind::V2) {
        if std::fs::write(d.join("cgroup.kill"), "1").is_ok() {
            return;
        }
    }
    if let Some((_, d)) = parts.iter().find(|(k, _)| *k == Kind::Freezer) {
        let state = d.join("freezer.state");
        if std::fs::write(&state, "FROZEN").is_ok() {
            let t0 = Instant::now();
            while std::fs::read_to_string(&state).is_ok_and(|s| s.trim() != "FROZEN")
                && t0.elapsed() < Duration::from_secs(1)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            // A frozen task takes SIGKILL and dies once thawed.
            kill_pids(&read_pids(d));
            let _ = std::fs::write(&state, "THAWED");
            return;
        }
    }
    for _ in 0..100 {
        let pids: Vec<u32> = parts.iter().flat_map(|(_, d)| read_pids(d)).collect();
        if pids.is_empty() {
            return;
        }
        kill_pids(&pids);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Removes a cgroup folder once its killed processes are gone (they
/// leave as their parent reaps them): tries for up to a second.
fn remove_cgroup(dir: &Path) -> bool {
    let t0 = Instant::now();
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return true,
            Err(_) if t0.elapsed() < Duration::from_secs(1) => {
                reap_exited(&[]);
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => return false,
        }
    }
}

/// This process's children (of every thread), from
/// `/proc/self/task/*/children`.
pub fn children() -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in tasks.flatten() {
        let s = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(
            s.split_ascii_whitespace()
                .filter_map(|x| x.parse::<u32>().ok()),
        );
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Reaps every child that has exited, except `keep` (children whose
/// caller reaps them itself): each one's pid, exit and own usage (its
/// waited-for descendants included). Orphans reparented to a subreaper
/// are children like any other.
pub fn reap_exited(keep: &[u32]) -> Vec<(u32, ChildExit, Usage)> {
    let mut out = Vec::new();
    for pid in children() {
        if keep.contains(&pid) {
            continue;
        }
        let mut status = 0;
        // SAFETY: zeroed rusage is valid; wait4 fills status and rusage.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: status and r are live and writable for the call.
        let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut r) };
        if rc == pid as libc::pid_t {
            let exit = if libc::WIFEXITED(status) {
                ChildExit::Code(libc::WEXITSTATUS(status))
            } else {
                ChildExit::Signal(libc::WTERMSIG(status))
            };
            out.push((pid, exit, Usage::from_rusage(&r)));
        }
    }
    out
}

/// Kills every child except `keep`, reaps them and whatever they leave
/// (their own children come back here when this process is a subreaper),
/// until no other child is left (at most 200 rounds); returns what was
/// reaped.
pub fn kill_other_children(keep: &[u32]) -> Vec<(u32, ChildExit, Usage)> {
    let mut out = Vec::new();
    for _ in 0..200 {
        let others: Vec<u32> = children()
            .into_iter()
            .filter(|p| !keep.contains(p))
            .collect();
        if others.is_empty() {
            break;
        }
        kill_pids(&others);
        std::thread::sleep(Duration::from_micros(500));
        out.extend(reap_exited(keep));
    }
    out
}

/// A descriptor that becomes readable when process `pid` exits
/// (`pidfd_open`, Linux 5.3): an exit seen within microseconds, not at
/// the next poll.
pub fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: a plain system call with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a fresh descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Processes whose environment names a tree ([`TREE_ENV`]): (pid, the
/// tree's name). Processes whose environment cannot be read (another
/// user's) are not listed.
pub fn tree_processes() -> Vec<(u32, String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    let key = format!("{TREE_ENV}=");
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if let Some(name) = env
            .split(|&b| b == 0)
            .find_map(|v| v.strip_prefix(key.as_bytes()))
        {
            out.push((pid, String::from_utf8_lossy(name).into_owned()));
        }
    }
    out
}

/// `commbench clean`: the trees of runs that died (a SIGKILLed `ab`):
/// their cgroups (killed, then removed) and their processes found by
/// [`TREE_ENV`] (killed). A tree whose run is alive is left alone.
pub fn clean_leftovers(dry_run: bool) -> Vec<Leftover> {
    let mut out = Vec::new();
    let mut dead: Vec<(Kind, PathBuf, artifact::Parsed)> = Vec::new();
    for m in cgroup_mounts() {
        let mut stack = vec![(m.point.clone(), 0)];
        let mut seen = 0;
        while let Some((dir, depth)) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                seen += 1;
                if seen > 50_000 {
                    break;
                }
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = e.file_name().to_string_lossy().into_owned();
                match artifact::parse_name(&name) {
                    Some(p) if !artifact::owner_alive(&p) => dead.push((m.kind, e.path(), p)),
                    Some(_) => {}
                    None if depth < 8 => stack.push((e.path(), depth + 1)),
                    None => {}
                }
            }
        }
    }
    // One tree may sit in several hierarchies: killed once with all its
    // folders (the freezer's with the rest).
    let mut names: Vec<String> = dead
        .iter()
        .filter_map(|(_, d, _)| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names.dedup();
    for n in &names {
        let set: Vec<(Kind, PathBuf)> = dead
            .iter()
            .filter(|(_, d, _)| d.file_name().is_some_and(|f| f.to_string_lossy() == *n))
            .map(|(k, d, _)| (*k, d.clone()))
            .collect();
        if !dry_run {
            kill_dir_set(&set);
        }
        for (_, d) in &set {
            let pid = dead
                .iter()
                .find(|(_, x, _)| x == d)
                .map_or(0, |(_, _, p)| p.pid);
            let action = if dry_run {
                "would remove".to_owned()
            } else if remove_cgroup(d) {
                "removed".to_owned()
            } else {
                format!("error: {} still holds processes", d.display())
            };
            out.push(Leftover {
                kind: "cgroup",
                name: d.display().to_string(),
                pid,
                action,
            });
        }
    }
    for (pid, tree) in tree_processes() {
        let Some(p) = artifact::parse_name(&tree) else {
            continue;
        };
        if artifact::owner_alive(&p) || pid == std::process::id() {
            continue;
        }
        let action = if dry_run {
            "would kill".to_owned()
        } else {
            match crate::sys::kill(pid as libc::pid_t, libc::SIGKILL) {
                Ok(()) => "killed".to_owned(),
                Err(e) => format!("error: {e}"),
            }
        };
        out.push(Leftover {
            kind: "process",
            name: format!("pid {pid} of {tree}"),
            pid: p.pid,
            action,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/sys/fs/cgroup"), "/sys/fs/cgroup");
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(unescape(r"/a\\"), r"/a\\");
    }

    #[test]
    fn a_group_holds_a_tree_and_kills_it_whole() {
        let g = TreeGroup::create("test");
        if !g.has_cgroup() {
            crate::testing::skip("cgroup", g.mechanism());
            return;
        }
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "sleep 60 & setsid sleep 60 & wait"]);
        g.arm(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let mut g = g;
        g.keep_joined(child.id());
        assert!(g.has_cgroup(), "{}", g.mechanism());
        let t0 = Instant::now();
        while g.pids().len() < 3 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(g.pids().len(), 3, "{:?}", g.pids());
        g.kill();
        child.wait().unwrap();
        let t0 = Instant::now();
        while !g.pids().is_empty() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(g.pids().is_empty(), "{:?}", g.pids());
        let dirs: Vec<PathBuf> = g.parts.iter().map(|p| p.dir.clone()).collect();
        drop(g);
        for d in dirs {
            assert!(!d.exists(), "{} left", d.display());
        }
    }

    #[test]
    fn pidfd_becomes_readable_at_exit() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let fd = match pidfd_open(child.id()) {
            Ok(fd) => fd,
            Err(e) => {
                crate::testing::skip("pidfd", format!("pidfd_open: {e}"));
                child.wait().unwrap();
                return;
            }
        };
        let mut p = [libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let n = crate::sys::poll(&mut p, 10_000).unwrap();
        assert_eq!(n, 1);
        child.wait().unwrap();
    }
}
