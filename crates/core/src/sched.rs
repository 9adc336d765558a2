//! What the scheduler and the hypervisor did to a process tree while it
//! ran: run-queue delay (time runnable but not running), CPU migrations
//! and time on CPU of every thread of a process and its descendants
//! (`/proc/PID/task/TID/schedstat` and `sched`), and steal, softirq and
//! irq time of a set of CPUs (`/proc/stat`).
//!
//! Serves `commbench ab`: a paired trial whose two sides were treated
//! differently by the machine (one waited behind another program, or lost
//! time to the hypervisor) is contaminated, and is redone rather than
//! judged (as Chromium Pinpoint drops a failed pair).
//!
//! Invariants: a [`TreeSampler`] only reads `/proc` and never blocks on
//! the tree; a thread that exits between two samples keeps the counts of
//! its last sample (the loss is at most one sampling interval of that
//! thread); counters are cumulative per thread, so a sample never lowers a
//! total. Without `/proc/…/schedstat` (a kernel without schedstats) the
//! totals stay 0 and [`TreeSampler::available`] says so.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::fs;

/// Scheduler counters of a set of threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskTimes {
    /// Time on CPU (ns).
    pub run_ns: u64,
    /// Time runnable but waiting for a CPU: run-queue delay (ns).
    pub wait_ns: u64,
    /// Times a thread moved to another CPU.
    pub migrations: u64,
    /// Threads seen.
    pub threads: u64,
}

/// Samples the threads of a process and of its descendants.
#[derive(Debug)]
pub struct TreeSampler {
    root: u32,
    /// Per (pid, tid): the last counters seen.
    seen: HashMap<(u32, u32), TaskTimes>,
    /// Processes of the tree (the root first).
    pids: Vec<u32>,
    /// Samples taken since the last descendant scan.
    since_scan: u32,
    available: bool,
}

/// How often (in samples) the whole of `/proc` is scanned for new
/// descendants; the tree's own threads are read every sample.
const SCAN_EVERY: u32 = 5;

/// The scheduler's figures of task `tid` of process `pid` now (its
/// `schedstat`: time on a CPU and waiting for one), None when it is gone.
pub fn task_times(pid: u32, tid: u32) -> Option<TaskTimes> {
    read_task(pid, tid)
}

/// The calling thread's id (from `/proc/thread-self`), for
/// [`task_times`] read by another thread.
pub fn current_tid() -> Option<u32> {
    std::fs::read_link("/proc/thread-self")
        .ok()?
        .file_name()?
        .to_str()?
        .parse()
        .ok()
}

fn read_task(pid: u32, tid: u32) -> Option<TaskTimes> {
    read_task_at(&format!("/proc/{pid}/task/{tid}"))
}

/// The calling thread's own counters (`/proc/thread-self`); None without
/// schedstats.
pub fn this_thread() -> Option<TaskTimes> {
    read_task_at("/proc/thread-self")
}

fn read_task_at(dir: &str) -> Option<TaskTimes> {
    let s = fs::read_to_string(format!("{dir}/schedstat")).ok()?;
    let mut it = s.split_ascii_whitespace().map(|x| x.parse::<u64>().ok());
    let run_ns = it.next()??;
    let wait_ns = it.next()??;
    let migrations = fs::read_to_string(format!("{dir}/sched"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("se.nr_migrations"))
                .and_then(|l| l.rsplit(':').next())
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0);
    Some(TaskTimes {
        run_ns,
        wait_ns,
        migrations,
        threads: 1,
    })
}

/// The parent pid of `pid` from `/proc/PID/stat` (the field after the
/// command name, which may itself hold spaces and parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(1)?.parse().ok()
}

impl TreeSampler {
    /// A sampler of process `root` and its descendants; takes a first
    /// sample.
    pub fn new(root: u32) -> Self {
        let mut s = TreeSampler {
            root,
            seen: HashMap::new(),
            pids: vec![root],
            since_scan: 0,
            available: fs::metadata("/proc/self/schedstat").is_ok(),
        };
        s.sample();
        s
    }

    /// Whether this kernel reports per-thread schedstats.
    pub fn available(&self) -> bool {
        self.available
    }

    fn scan_descendants(&mut self) {
        let Ok(dir) = fs::read_dir("/proc") else {
            return;
        };
        let mut parent: HashMap<u32, u32> = HashMap::new();
        for e in dir.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                if let Some(pp) = parent_of(pid) {
                    parent.insert(pid, pp);
                }
            }
        }
        let mut tree = vec![self.root];
        let mut i = 0;
        while i < tree.len() && tree.len() < 4096 {
            let p = tree[i];
            tree.extend(parent.iter().filter(|(_, &pp)| pp == p).map(|(&c, _)| c));
            i += 1;
        }
        self.pids = tree;
    }

    /// Reads every thread of the tree once; returns how many were read.
    pub fn sample(&mut self) -> usize {
        if !self.available {
            return 0;
        }
        if self.since_scan == 0 {
            self.scan_descendants();
        }
        self.since_scan = (self.since_scan + 1) % SCAN_EVERY;
        let mut n = 0;
        for &pid in &self.pids {
            let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                if let Some(v) = read_task(pid, tid) {
                    self.seen.insert((pid, tid), v);
                    n += 1;
                }
            }
        }
        n
    }

    /// Every process of the tree seen so far (the root first).
    pub fn pids_seen(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.pids.clone();
        for (pid, _) in self.seen.keys() {
            if !v.contains(pid) {
                v.push(*pid);
            }
        }
        v
    }

    /// The counters of every thread seen, summed.
    pub fn totals(&self) -> TaskTimes {
        self.seen
            .values()
            .fold(TaskTimes::default(), |a, t| TaskTimes {
                run_ns: a.run_ns + t.run_ns,
                wait_ns: a.wait_ns + t.wait_ns,
                migrations: a.migrations + t.migrations,
                threads: a.threads + 1,
            })
    }
}

/// Whether child `pid` has exited, leaving it unreaped (a zombie,
/// `waitid(WNOWAIT)`), so that its last counters can still be read; with
/// `block`, waits until it has. Reap it afterwards with
/// [`crate::rusage::wait_child`].
pub fn exited_unreaped(pid: libc::pid_t, block: bool) -> std::io::Result<bool> {
    let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter; waitid
        // only writes into it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: plain system call with a live out-pointer.
        let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
        if rc == 0 {
            // With WNOHANG and nothing to report, si_pid stays 0.
            // SAFETY: waitid filled (or left zeroed) the siginfo.
            return Ok(block || unsafe { info.si_pid() } == pid);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Sends SIGKILL to every process of process group `pgid` (a child
/// started with `process_group(0)` leads its own group).
pub fn kill_group(pgid: u32) {
    if pgid > 1 {
        // SAFETY: plain system call; a group that is gone gives ESRCH.
        unsafe { libc::kill(-(pgid as libc::pid_t), libc::SIGKILL) };
    }
}

/// A start barrier for child processes: each armed child, between fork
/// and exec, says it is ready and waits for the word to go; the parent
/// waits until all are ready and releases them together, so that
/// programs meant to run side by side start within microseconds of each
/// other. Spawn armed children from separate threads: `spawn` returns
/// only after the child's exec.
#[derive(Debug)]
pub struct StartBarrier {
    ready: [std::os::fd::OwnedFd; 2],
    go: [std::os::fd::OwnedFd; 2],
}

fn pipe_cloexec() -> std::io::Result<[std::os::fd::OwnedFd; 2]> {
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a live array of two ints for the kernel to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe {
        [
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        ]
    })
}

impl StartBarrier {
    /// Two pipes: children write "ready", the parent writes "go".
    pub fn new() -> std::io::Result<Self> {
        Ok(StartBarrier {
            ready: pipe_cloexec()?,
            go: pipe_cloexec()?,
        })
    }

    /// Makes `cmd`'s child wait at the barrier before its exec.
    pub fn arm(&self, cmd: &mut std::process::Command) {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let ready = self.ready[1].as_raw_fd();
        let go = self.go[0].as_raw_fd();
        // The child's copies of the parent's ends: closed in the child, so
        // that a parent that gives up (drops the barrier) ends its read.
        let parent_ends = [self.ready[0].as_raw_fd(), self.go[1].as_raw_fd()];
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only close(2), write(2) and read(2) on descriptors inherited from the
        // parent, which are async-signal-safe; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                for fd in parent_ends {
                    libc::close(fd);
                }
                let b = [1u8];
                if libc::write(ready, b.as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                let mut r = [0u8];
                loop {
                    let n = libc::read(go, r.as_mut_ptr().cast(), 1);
                    if n == 1 {
                        return Ok(());
                    }
                    let e = std::io::Error::last_os_error();
                    if n == 0 || e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(std::io::Error::other("start barrier closed"));
                    }
                }
            });
        }
    }

    /// Waits until `n` armed children are ready (at most `timeout`), then
    /// lets them all go. Err when fewer became ready in time (the parent
    /// then closes the barrier, and the waiting children fail to start).
    pub fn release(self, n: usize, timeout: std::time::Duration) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let deadline = std::time::Instant::now() + timeout;
        let mut got = 0;
        while got < n {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let mut p = libc::pollfd {
                fd: self.ready[0].as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: p is one live pollfd.
            let rc = unsafe { libc::poll(&mut p, 1, left.as_millis().min(60_000) as libc::c_int) };
            if rc == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("{got} of {n} children reached the start barrier"),
                ));
            }
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let mut buf = [0u8; 16];
            let want = (n - got).min(buf.len());
            // SAFETY: buf is live and at least `want` bytes long.
            let r = unsafe { libc::read(self.ready[0].as_raw_fd(), buf.as_mut_ptr().cast(), want) };
            if r <= 0 {
                return Err(std::io::Error::last_os_error());
            }
            got += r as usize;
        }
        let go = vec![1u8; n];
        // SAFETY: go is live and n bytes long; a pipe takes n ≤ 4096 bytes
        // at once.
        let w = unsafe { libc::write(self.go[1].as_raw_fd(), go.as_ptr().cast(), n) };
        if w as usize != n {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Time a set of CPUs spent in steal, softirq, irq, the kernel, user
/// space and idle, from `/proc/stat` (seconds; USER_HZ ticks). Without
/// `CONFIG_IRQ_TIME_ACCOUNTING` the busy kinds are sampled at the
/// scheduler tick (each tick counts wholly as what it interrupted), while
/// a tickless CPU's idle time is exact: the busy time of a window is best
/// taken as its length minus `idle_s`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// Time the hypervisor ran something else while a vCPU wanted to run.
    pub steal_s: f64,
    /// Time in softirq handlers (network receive, timers).
    pub softirq_s: f64,
    /// Time in hard interrupt handlers.
    pub irq_s: f64,
    /// Time in the kernel on behalf of tasks (system calls, faults).
    pub system_s: f64,
    /// Time in user space (nice included).
    pub user_s: f64,
    /// Time idle (I/O wait included).
    pub idle_s: f64,
}

impl CpuTimes {
    /// The sums over `cpus` (all CPUs when empty) now.
    pub fn read(cpus: &[usize]) -> CpuTimes {
        let hz = clock_ticks_per_s();
        let Ok(s) = fs::read_to_string("/proc/stat") else {
            return CpuTimes::default();
        };
        let mut out = CpuTimes::default();
        for line in s.lines() {
            let mut f = line.split_ascii_whitespace();
            let Some(name) = f.next() else { continue };
            let Some(n) = name.strip_prefix("cpu") else {
                continue;
            };
            let Ok(cpu) = n.parse::<usize>() else {
                continue; // the "cpu" total line
            };
            if !cpus.is_empty() && !cpus.contains(&cpu) {
                continue;
            }
            let v: Vec<f64> = f.filter_map(|x| x.parse().ok()).collect();
            // user nice system idle iowait irq softirq steal ...
            if v.len() >= 8 {
                out.user_s += (v[0] + v[1]) / hz;
                out.system_s += v[2] / hz;
                out.idle_s += (v[3] + v[4]) / hz;
                out.irq_s += v[5] / hz;
                out.softirq_s += v[6] / hz;
                out.steal_s += v[7] / hz;
            }
        }
        out
    }

    /// Counters since `earlier` (never negative).
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes {
            steal_s: (self.steal_s - earlier.steal_s).max(0.0),
            softirq_s: (self.softirq_s - earlier.softirq_s).max(0.0),
            irq_s: (self.irq_s - earlier.irq_s).max(0.0),
            system_s: (self.system_s - earlier.system_s).max(0.0),
            user_s: (self.user_s - earlier.user_s).max(0.0),
            idle_s: (self.idle_s - earlier.idle_s).max(0.0),
        }
    }
}

fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn sampler_sees_a_busy_child_and_its_threads_after_exit() {
        // A child that burns a little CPU; the sampler must report run
        // time for it even though it is read after the child exited
        // (unreaped).
        // Reaped by wait_child below, not by Child::wait.
        #[allow(clippy::zombie_processes)]
        let mut child = Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut s = TreeSampler::new(pid);
        if !s.available() {
            crate::testing::skip("schedstats", "this kernel has no /proc/<pid>/schedstat");
            child.wait().unwrap();
            return;
        }
        assert!(exited_unreaped(pid as libc::pid_t, true).unwrap());
        s.sample();
        let t = s.totals();
        let (exit, _) = crate::rusage::wait_child(pid as libc::pid_t).unwrap();
        assert!(exit.success());
        assert!(t.run_ns > 0, "{t:?}");
        assert!(t.threads >= 1);
    }

    #[test]
    fn barrier_starts_two_children_together() {
        let barrier = StartBarrier::new().unwrap();
        let mut a = Command::new("true");
        let mut b = Command::new("true");
        barrier.arm(&mut a);
        barrier.arm(&mut b);
        let ta = std::thread::spawn(move || a.spawn().unwrap().wait().unwrap());
        let tb = std::thread::spawn(move || b.spawn().unwrap().wait().unwrap());
        barrier
            .release(2, std::time::Duration::from_secs(30))
            .unwrap();
        assert!(ta.join().unwrap().success());
        assert!(tb.join().unwrap().success());
    }

    #[test]
    fn a_barrier_released_for_too_many_says_how_many_came() {
        let barrier = StartBarrier::new().unwrap();
        let mut a = Command::new("true");
        barrier.arm(&mut a);
        let ta = std::thread::spawn(move || a.spawn().map(|mut c| c.wait()));
        let e = barrier
            .release(2, std::time::Duration::from_millis(300))
            .unwrap_err();
        assert!(e.to_string().contains("1 of 2"), "{e}");
        // Closing the barrier lets the waiting child fail to start.
        assert!(ta.join().unwrap().is_err());
    }

    #[test]
    fn parent_of_reads_past_a_command_with_parentheses() {
        let me = std::process::id();
        let pp = parent_of(me).unwrap();
        assert!(pp > 0);
    }

    #[test]
    fn cpu_times_are_monotonic() {
        let a = CpuTimes::read(&[]);
        let b = CpuTimes::read(&[]);
        let d = b.since(&a);
        assert!(d.steal_s >= 0.0 && d.softirq_s >= 0.0 && d.irq_s >= 0.0);
        assert!(d.system_s >= 0.0 && d.user_s >= 0.0 && d.idle_s >= 0.0);
    }

    #[test]
    fn cpu_times_of_one_cpu_are_part_of_all() {
        // The sums over every CPU hold each CPU's share: CPU 0's times
        // never exceed all CPUs', and a running host has spent time.
        let all = CpuTimes::read(&[]);
        let zero = CpuTimes::read(&[0]);
        assert!(all.user_s + all.system_s + all.idle_s > 0.0, "{all:?}");
        assert!(zero.idle_s <= all.idle_s + 0.02, "{zero:?} {all:?}");
        assert!(zero.user_s <= all.user_s + 0.02, "{zero:?} {all:?}");
        // A CPU that does not exist has no times.
        assert_eq!(CpuTimes::read(&[usize::MAX]), CpuTimes::default());
    }
}
