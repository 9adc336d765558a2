//! Resource usage around a run: user/sys CPU of this process and of its
//! waited-for children (getrusage, wait4), CPU time per operation, max RSS,
//! context switches, load average at start and end, and whether the run was
//! oversubscribed (more runnable threads than cores).
//!
//! CPU time per operation is the figure that survives a shared, noisy
//! machine: wall-clock rates swing 2–10× here, CPU time much less. Every lab
//! reports it next to its rates.

use crate::record::Record;
use serde::Serialize;
use std::time::Instant;

/// A getrusage snapshot.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Usage {
    /// User CPU time, s.
    pub user_s: f64,
    /// System CPU time, s.
    pub sys_s: f64,
    /// Peak resident set size, KiB.
    pub max_rss_kib: u64,
    /// Page faults served without I/O.
    pub minor_faults: u64,
    /// Page faults that needed I/O.
    pub major_faults: u64,
    /// Voluntary context switches (the thread blocked).
    pub voluntary_ctx: u64,
    /// Involuntary context switches (the thread was preempted).
    pub involuntary_ctx: u64,
}

impl Usage {
    fn from_raw(r: &libc::rusage) -> Self {
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        Usage {
            user_s: tv(r.ru_utime),
            sys_s: tv(r.ru_stime),
            max_rss_kib: r.ru_maxrss.max(0) as u64,
            minor_faults: r.ru_minflt.max(0) as u64,
            major_faults: r.ru_majflt.max(0) as u64,
            voluntary_ctx: r.ru_nvcsw.max(0) as u64,
            involuntary_ctx: r.ru_nivcsw.max(0) as u64,
        }
    }

    /// From a raw `rusage` (what wait4 or getrusage filled).
    pub fn from_rusage(r: &libc::rusage) -> Self {
        Self::from_raw(r)
    }

    #[allow(unsafe_code)]
    fn get(who: libc::c_int) -> Self {
        // SAFETY: zeroed rusage is a valid value; getrusage fills it.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: r is a live, writable rusage.
        unsafe { libc::getrusage(who, &mut r) };
        Self::from_raw(&r)
    }

    /// This process (all threads).
    pub fn process() -> Self {
        Self::get(libc::RUSAGE_SELF)
    }

    /// The calling thread only.
    pub fn thread() -> Self {
        Self::get(libc::RUSAGE_THREAD)
    }

    /// All waited-for children.
    pub fn children() -> Self {
        Self::get(libc::RUSAGE_CHILDREN)
    }

    /// CPU seconds (user + sys).
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }

    /// Counters since `earlier` (max RSS is kept as the later value: it is a
    /// high-water mark, not a counter).
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
            max_rss_kib: self.max_rss_kib,
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
            voluntary_ctx: self.voluntary_ctx.saturating_sub(earlier.voluntary_ctx),
            involuntary_ctx: self.involuntary_ctx.saturating_sub(earlier.involuntary_ctx),
        }
    }

    /// Adds another usage (children of several waits); RSS takes the max.
    pub fn add(&mut self, o: &Usage) {
        self.user_s += o.user_s;
        self.sys_s += o.sys_s;
        self.max_rss_kib = self.max_rss_kib.max(o.max_rss_kib);
        self.minor_faults += o.minor_faults;
        self.major_faults += o.major_faults;
        self.voluntary_ctx += o.voluntary_ctx;
        self.involuntary_ctx += o.involuntary_ctx;
    }
}

/// How a waited-for child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ChildExit {
    /// Exited with this status code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl ChildExit {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        *self == ChildExit::Code(0)
    }
}

/// Waits for child `pid` with wait4 and returns how it ended and its own
/// resource usage (exactly that child's, not all children's).
#[allow(unsafe_code)]
pub fn wait_child(pid: libc::pid_t) -> std::io::Result<(ChildExit, Usage)> {
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; wait4 fills status and rusage.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: status and r are live and writable for the call.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut r) };
        if rc == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let exit = if libc::WIFEXITED(status) {
        ChildExit::Code(libc::WEXITSTATUS(status))
    } else {
        ChildExit::Signal(libc::WTERMSIG(status))
    };
    Ok((exit, Usage::from_raw(&r)))
}

/// Load averages (1, 5, 15 min) from /proc/loadavg.
pub fn load_average() -> [f64; 3] {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = s
        .split_whitespace()
        .map(|x| x.parse::<f64>().unwrap_or(f64::NAN));
    [
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
    ]
}

/// Threads runnable right now, system-wide (`procs_running` in /proc/stat;
/// includes the caller).
pub fn runnable_threads() -> u64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("procs_running "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Online logical CPUs.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The scheduler tick getrusage's user/system split is sampled at, at its
/// coarsest in common kernels: 4 ms (HZ=250; HZ=1000 gives 1 ms). The
/// total (user + sys) comes from the scheduler's runtime and is exact to
/// the microsecond; how it splits into user and sys is decided by which
/// mode each tick found the task in.
pub const TICK_S: f64 = 0.004;

/// Fewer ticks than this in a measured window and the user/sys split (and
/// anything read from it: "CPU bound", a cold/warm ratio of CPU) is too
/// short to measure: one tick more or less moves it by 10% or more.
pub const MIN_TICKS: u32 = 10;

/// The floor in seconds of CPU: [`MIN_TICKS`] × [`TICK_S`] = 40 ms.
pub const MIN_CPU_S: f64 = MIN_TICKS as f64 * TICK_S;

/// The stated floor, for notes: "40 ms of CPU (10 scheduler ticks of 4 ms)".
pub fn floor_text() -> String {
    format!(
        "{:.0} ms of CPU ({MIN_TICKS} scheduler ticks of {:.0} ms)",
        MIN_CPU_S * 1e3,
        TICK_S * 1e3
    )
}

/// "too short to measure" when `cpu_s` of CPU is under the floor: what was
/// measured, the floor, and what to raise (`raise`, e.g. "raise --rounds").
/// None when the window is long enough. NaN or negative counts as short.
pub fn too_short(what: &str, cpu_s: f64, raise: &str) -> Option<String> {
    if cpu_s >= MIN_CPU_S {
        return None;
    }
    Some(format!(
        "too short to measure {what}: {:.1} ms of CPU, under the floor of {}; {raise}",
        cpu_s.max(0.0) * 1e3,
        floor_text()
    ))
}

/// Measures one run: start it, do the work, `finish(ops)`.
#[derive(Debug, Clone)]
pub struct RunMeter {
    start: Instant,
    process0: Usage,
    children0: Usage,
    load_start: [f64; 3],
    runnable_max: u64,
    pressure0: Option<u64>,
}

/// The kernel's CPU pressure so far: microseconds in which at least one
/// runnable task waited for a CPU (`/proc/pressure/cpu`, "some total");
/// None without PSI.
pub fn cpu_pressure_us() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    s.lines()
        .find(|l| l.starts_with("some "))?
        .split_ascii_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// The share of a run's wall time in which some task waited for a CPU
/// beyond which the run is called oversubscribed. Sampling the runnable
/// threads at a run's two ends missed a busy loop that came between two
/// suites (ipc and the 64 KiB stream ran at 0.43× of the other suite's
/// rate, runnable never above the CPUs at the two samples); the kernel's
/// pressure stall information counts every such moment. A quiet two-vCPU
/// host here showed 4-10% while other sessions compiled.
pub const PRESSURE_OVERSUBSCRIBED: f64 = 0.25;

/// The share of `wall_s` some task waited for a CPU since `p0`.
fn pressure_share(p0: Option<u64>, wall_s: f64) -> Option<f64> {
    let d = cpu_pressure_us()?.checked_sub(p0?)?;
    (wall_s > 0.0).then(|| (d as f64 / 1e6 / wall_s).min(1.0))
}

/// What a run used.
#[derive(Debug, Clone, Serialize)]
pub struct RunUsage {
    /// Wall-clock time of the run, s.
    pub wall_s: f64,
    /// This process, during the run.
    pub process: Usage,
    /// Children waited for during the run (RUSAGE_CHILDREN delta), plus any
    /// added with [`RunUsage::add_children`].
    pub children: Usage,
    /// Operations the run counted.
    pub ops: u64,
    /// (process + children CPU) / ops, in ns.
    pub cpu_ns_per_op: f64,
    /// Load average (1, 5, 15 min) at the start.
    pub load_start: [f64; 3],
    /// Load average (1, 5, 15 min) at the end.
    pub load_end: [f64; 3],
    /// Highest `procs_running` seen at start, end or by [`RunMeter::sample`].
    pub runnable_max: u64,
    /// CPUs this process may run on ([`online_cpus`]).
    pub cpus: usize,
    /// Threads the run itself declared it keeps busy (0 if unknown).
    pub declared_threads: u64,
    /// More runnable threads than cores at some sample, or more busy threads
    /// declared than cores, or some task waiting for a CPU more than
    /// [`PRESSURE_OVERSUBSCRIBED`] of the run: spin-waiting and rates
    /// are suspect.
    pub oversubscribed: bool,
    /// The share of the run some task waited for a CPU, % (None: no PSI).
    pub cpu_pressure_pct: Option<f64>,
}

impl Default for RunMeter {
    fn default() -> Self {
        Self::start()
    }
}

impl RunMeter {
    /// Starts metering: takes the usage and load now.
    pub fn start() -> Self {
        RunMeter {
            load_start: load_average(),
            runnable_max: runnable_threads(),
            process0: Usage::process(),
            children0: Usage::children(),
            start: Instant::now(),
            pressure0: cpu_pressure_us(),
        }
    }

    /// Samples the system's runnable thread count (call mid-run to catch
    /// oversubscription that start and end would miss).
    pub fn sample(&mut self) {
        self.runnable_max = self.runnable_max.max(runnable_threads());
    }

    /// Ends the run.
    pub fn finish(&self, ops: u64) -> RunUsage {
        self.finish_with_threads(ops, 0)
    }

    /// Ends the run, declaring how many threads it kept busy.
    pub fn finish_with_threads(&self, ops: u64, declared_threads: u64) -> RunUsage {
        let wall_s = self.start.elapsed().as_secs_f64();
        let process = Usage::process().since(&self.process0);
        let children = Usage::children().since(&self.children0);
        let runnable_max = self.runnable_max.max(runnable_threads());
        let cpus = online_cpus();
        let mut u = RunUsage {
            wall_s,
            process,
            children,
            ops,
            cpu_ns_per_op: f64::NAN,
            load_start: self.load_start,
            load_end: load_average(),
            runnable_max,
            cpus,
            declared_threads,
            cpu_pressure_pct: pressure_share(self.pressure0, wall_s).map(|x| x * 100.0),
            oversubscribed: runnable_max as usize > cpus
                || declared_threads as usize > cpus
                || pressure_share(self.pressure0, wall_s)
                    .is_some_and(|x| x > PRESSURE_OVERSUBSCRIBED),
        };
        u.recompute();
        u
    }
}

/// The conditions a measurement ran under, for a lab without a
/// [`RunMeter`] of its own: the load average at its start and end,
/// whether more threads were runnable than CPUs (sampled at the start, at
/// [`Conditions::sample`] and at the end), and the CPUs its threads were
/// seen on. [`Conditions::stamp`] writes what the Lab contract asks of
/// every record (`lab::ENVIRONMENT`), leaving what a lab wrote itself.
#[derive(Debug, Clone)]
pub struct Conditions {
    load_start: f64,
    runnable_max: u64,
    seen: Vec<usize>,
    /// The calling thread's scheduler figures at the start.
    thread0: Option<crate::sched::TaskTimes>,
    /// The CPU pressure and the time at the start.
    pressure0: Option<u64>,
    start: Instant,
}

/// The share of its time a measuring thread may wait for a CPU before its
/// record is called oversubscribed. Two runnable threads on two CPUs
/// (a busy loop beside a single-threaded measurement) never counted as
/// more than the CPUs, yet the RSS hash's ticks per hash doubled beside
/// one (1.91× [1.09, 3.35], a 10% gate failed on an A/A): the thread had
/// waited for its CPU, and its own `schedstat` says how long.
pub const WAIT_SHARE_OVERSUBSCRIBED: f64 = 0.05;

impl Conditions {
    /// Starts watching: the load and runnable threads now.
    pub fn begin() -> Self {
        Conditions {
            load_start: load_average()[0],
            runnable_max: runnable_threads(),
            seen: Vec::new(),
            thread0: crate::sched::this_thread(),
            pressure0: cpu_pressure_us(),
            start: Instant::now(),
        }
    }

    /// One more sample of the runnable threads and the CPUs seen (a lab
    /// calls it while its threads run).
    pub fn sample(&mut self) {
        self.runnable_max = self.runnable_max.max(runnable_threads());
        self.seen.extend(crate::placement::seen_cpus());
        self.seen.sort_unstable();
        self.seen.dedup();
    }

    /// Writes `load_start`, `load_end`, `oversubscribed` (more runnable
    /// threads than CPUs, `threads` busy ones declared beyond them, or the
    /// calling thread waiting for a CPU more than
    /// [`WAIT_SHARE_OVERSUBSCRIBED`] of the time; `cpu_wait_pct` says how
    /// much) and
    /// `placement` (`placement`, else unpinned and the CPUs seen at
    /// [`Conditions::sample`], or allowed) into `r`
    /// where it does not carry them yet.
    pub fn stamp(&self, r: &mut Record, threads: u64, placement: Option<&str>) {
        let cpus = online_cpus() as u64;
        let runnable = self.runnable_max.max(runnable_threads());
        let set = |r: &mut Record, k: &str, v: serde_json::Value| {
            if !r.metrics.contains_key(k) {
                r.metrics.insert(k.to_owned(), v);
            }
        };
        set(r, "load_start", self.load_start.into());
        set(r, "load_end", load_average()[0].into());
        // How long the calling thread (the one that measured, for a
        // single-threaded lab) waited for a CPU since `begin`.
        let waited = self
            .thread0
            .zip(crate::sched::this_thread())
            .and_then(|(a, b)| {
                let run = b.run_ns.saturating_sub(a.run_ns) as f64;
                let wait = b.wait_ns.saturating_sub(a.wait_ns) as f64;
                (run + wait > 0.0).then(|| wait / (run + wait))
            });
        if let Some(w) = waited {
            set(r, "cpu_wait_pct", (w * 100.0).into());
        }
        let pressure = pressure_share(self.pressure0, self.start.elapsed().as_secs_f64());
        if let Some(p) = pressure {
            set(r, "cpu_pressure_pct", (p * 100.0).into());
        }
        set(
            r,
            "oversubscribed",
            (runnable > cpus
                || threads > cpus
                || waited.is_some_and(|w| w > WAIT_SHARE_OVERSUBSCRIBED)
                || pressure.is_some_and(|p| p > PRESSURE_OVERSUBSCRIBED))
            .into(),
        );
        let p = placement
            .map(str::to_owned)
            .unwrap_or_else(|| crate::placement::describe(&[("process", None)], &self.seen));
        set(r, "placement", p.into());
        // Threads the lab declared busy hand work to each other; on more
        // than one CPU that is a cross-CPU figure (lab::CROSS_CPU).
        set(
            r,
            crate::lab::CROSS_CPU,
            (threads > 1 && crate::placement::crosses_cpus(&[None])).into(),
        );
    }
}

impl RunUsage {
    fn recompute(&mut self) {
        self.cpu_ns_per_op = if self.ops == 0 {
            f64::NAN
        } else {
            (self.process.cpu_s() + self.children.cpu_s()) * 1e9 / self.ops as f64
        };
    }

    /// Adds usage of children reaped with [`wait_child`] outside the
    /// RUSAGE_CHILDREN window (e.g. by another thread before finish).
    pub fn add_children(&mut self, u: &Usage) {
        self.children.add(u);
        self.recompute();
    }

    /// Total CPU seconds, process and children.
    pub fn cpu_s(&self) -> f64 {
        self.process.cpu_s() + self.children.cpu_s()
    }

    /// Appends the standard usage metrics to a record.
    pub fn add_to(&self, r: &mut Record) {
        r.push_metric("wall_s", self.wall_s);
        r.push_metric("user_s", self.process.user_s);
        r.push_metric("sys_s", self.process.sys_s);
        r.push_metric("children_user_s", self.children.user_s);
        r.push_metric("children_sys_s", self.children.sys_s);
        r.push_metric("cpu_ns_per_op", self.cpu_ns_per_op);
        r.push_metric("max_rss_kib", self.process.max_rss_kib);
        r.push_metric("children_max_rss_kib", self.children.max_rss_kib);
        r.push_metric(
            "voluntary_ctx",
            self.process.voluntary_ctx + self.children.voluntary_ctx,
        );
        r.push_metric(
            "involuntary_ctx",
            self.process.involuntary_ctx + self.children.involuntary_ctx,
        );
        // Context switches per operation: how often a message had to wake
        // (or lost its CPU to) another thread.
        let ctx = self.process.voluntary_ctx
            + self.children.voluntary_ctx
            + self.process.involuntary_ctx
            + self.children.involuntary_ctx;
        r.push_metric(
            "ctx_per_op",
            if self.ops > 0 {
                ctx as f64 / self.ops as f64
            } else {
                f64::NAN
            },
        );
        r.push_metric("load_start", self.load_start[0]);
        r.push_metric("load_end", self.load_end[0]);
        if let Some(p) = self.cpu_pressure_pct {
            r.push_metric("cpu_pressure_pct", p);
        }
        r.push_metric("oversubscribed", self.oversubscribed);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_window_under_ten_ticks_is_too_short_to_measure() {
        assert_eq!(super::MIN_CPU_S, 0.04);
        let n = super::too_short("the user/sys split", 0.012, "raise --rounds").unwrap();
        assert_eq!(
            n,
            "too short to measure the user/sys split: 12.0 ms of CPU, under the floor of \
             40 ms of CPU (10 scheduler ticks of 4 ms); raise --rounds"
        );
        assert!(super::too_short("x", f64::NAN, "y").is_some());
        assert!(super::too_short("x", 0.04, "y").is_none());
    }

    use super::*;

    /// A single-threaded measurement beside a busy loop on its CPU: two
    /// runnable threads on two CPUs never counted as more than the CPUs,
    /// yet the measuring thread waited for its CPU half the time. Its
    /// record now says so.
    #[test]
    fn a_thread_that_waited_for_its_cpu_is_called_oversubscribed() {
        let allowed = crate::placement::current_affinity();
        let Some(cpu) = allowed.cpus().first().copied() else {
            return;
        };
        if crate::sched::this_thread().is_none() {
            crate::testing::skip("schedstat", "no /proc/thread-self/schedstat on this kernel");
            return;
        }
        let one = crate::placement::CpuList::from_cpus(vec![cpu]);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s2, l2) = (stop.clone(), one.clone());
        let hog = std::thread::spawn(move || {
            let _ = l2.pin_current_thread();
            let t = Instant::now();
            while !s2.load(std::sync::atomic::Ordering::Relaxed) && t.elapsed().as_secs() < 10 {
                std::hint::spin_loop();
            }
        });
        let _ = one.pin_current_thread();
        let c = Conditions::begin();
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 300 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let mut r = Record::new("t", "x");
        c.stamp(&mut r, 1, Some("cpu"));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        hog.join().unwrap();
        let _ = allowed.pin_current_thread();
        let waited = r.metric_f64("cpu_wait_pct").unwrap();
        assert!(waited > 5.0, "{waited}");
        assert_eq!(r.metrics["oversubscribed"], serde_json::json!(true));
        for k in crate::lab::ENVIRONMENT {
            assert!(r.metrics.contains_key(k), "{k}");
        }
    }

    /// More spinning threads than CPUs for a moment: the kernel's CPU
    /// pressure says some task waited, and the run is oversubscribed
    /// whatever the runnable count showed at its two ends.
    #[test]
    fn cpu_pressure_marks_a_run_that_others_kept_waiting() {
        if cpu_pressure_us().is_none() {
            crate::testing::skip("PSI", "no /proc/pressure/cpu on this kernel");
            return;
        }
        let m = RunMeter::start();
        let n = online_cpus() + 2;
        let hogs: Vec<_> = (0..n)
            .map(|_| {
                std::thread::spawn(|| {
                    let t = Instant::now();
                    while t.elapsed().as_millis() < 400 {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        for h in hogs {
            h.join().unwrap();
        }
        let u = m.finish(1);
        let p = u.cpu_pressure_pct.unwrap();
        assert!(p > 25.0, "{p}");
        assert!(u.oversubscribed);
    }

    #[test]
    fn meter_counts_cpu_of_busy_work() {
        let m = RunMeter::start();
        let mut x = 0u64;
        let t = Instant::now();
        while t.elapsed().as_millis() < 30 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let u = m.finish(1000);
        assert!(u.wall_s > 0.0);
        assert!(u.process.cpu_s() > 0.0, "{:?}", u.process);
        assert!(u.cpu_ns_per_op.is_finite());
        assert!(u.cpus >= 1);
    }

    #[test]
    #[allow(clippy::zombie_processes)] // reaped by wait_child (wait4)
    fn wait_child_reports_exit_and_usage() {
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let (exit, usage) = wait_child(child.id() as i32).unwrap();
        assert_eq!(exit, ChildExit::Code(3));
        assert!(usage.max_rss_kib > 0);
    }

    #[test]
    fn zero_ops_gives_null_per_op() {
        let u = RunMeter::start().finish(0);
        assert!(u.cpu_ns_per_op.is_nan());
        let j = serde_json::to_string(&u).unwrap();
        assert!(j.contains("\"cpu_ns_per_op\":null"));
    }
}
