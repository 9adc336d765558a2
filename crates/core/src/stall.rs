//! A stall monitor: a background thread that sleeps in short steps and
//! records how late it wakes up — the machine's scheduling delay as any
//! thread of the run would feel it — together with the steal time the
//! hypervisor reports in /proc/stat. A lab attaches it to its measurement
//! windows, so a 10 s latency tail can say "the machine stalled for 9.8 s in
//! window 3" instead of leaving the reader to guess whether the code or the
//! machine was at fault.
//!
//! Cost: one wake-up per step (1 ms by default) on some core; the thread
//! does nothing else. Lateness is measured on the monotonic clock, with the
//! thread's timer slack at 1 ns, so a wake-up's lateness is the timer's and
//! the scheduler's delay, not the 50 µs of slack the kernel grants a
//! normal thread by default. Started [`StallMonitor::start_realtime`], the
//! thread runs SCHED_FIFO where allowed: it then wakes ahead of every
//! normal thread, so its lateness is the host's (the hypervisor, the
//! kernel with interrupts off), not the wait for a CPU that the run's own
//! busy threads hold.

use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The real-time monitor's SCHED_FIFO priority: above a lab's own
/// real-time thread (the pipeline tester's generator runs at 1), so a
/// spinning real-time thread never delays the monitor's wake-up and
/// reads as a stall of the host.
pub const MONITOR_PRIORITY: i32 = 2;

/// A wake-up later than this is counted as a stall by default.
pub const DEFAULT_THRESHOLD: Duration = Duration::from_millis(50);

struct Shared {
    stop: AtomicBool,
    /// Worst lateness in the current window, ns.
    worst_ns: AtomicU64,
    /// Sum of lateness in the current window, ns.
    late_sum_ns: AtomicU64,
    /// Wake-ups later than the threshold in the current window.
    stalls: AtomicU64,
    wakeups: AtomicU64,
    threshold_ns: u64,
}

/// What one window saw.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct StallWindow {
    /// The latest wake-up in the window beyond the sleep asked for, ms.
    pub worst_ms: f64,
    /// Mean lateness per wake-up, µs.
    pub mean_late_us: f64,
    /// Wake-ups later than the threshold.
    pub stalls: u64,
    /// CPU time the hypervisor gave to others while this machine wanted
    /// it (/proc/stat steal, all CPUs), ms; None where /proc/stat has no
    /// steal column.
    pub steal_ms: Option<f64>,
}

impl StallWindow {
    /// Whether the window holds a stall above `threshold`.
    pub fn stalled(&self, threshold: Duration) -> bool {
        self.worst_ms >= threshold.as_secs_f64() * 1e3
    }
}

/// Total steal time of all CPUs from /proc/stat, in clock ticks.
fn steal_ticks() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = s.lines().find(|l| l.starts_with("cpu "))?;
    // cpu user nice system idle iowait irq softirq steal ...
    cpu.split_whitespace().nth(8)?.parse().ok()
}

#[allow(unsafe_code)]
fn ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The running monitor; stops when dropped.
pub struct StallMonitor {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    steal_at: Option<u64>,
    tick_s: f64,
    realtime: Arc<AtomicBool>,
}

impl StallMonitor {
    /// Starts a monitor that sleeps `step` at a time and counts wake-ups
    /// later than `threshold` as stalls.
    pub fn start(step: Duration, threshold: Duration) -> StallMonitor {
        Self::start_as(step, threshold, false)
    }

    /// [`Self::start`] with the thread real-time (SCHED_FIFO,
    /// [`MONITOR_PRIORITY`])
    /// where the process may: its lateness is then the host's stall alone
    /// ([`Self::realtime`] says whether it is).
    pub fn start_realtime(step: Duration, threshold: Duration) -> StallMonitor {
        Self::start_as(step, threshold, true)
    }

    fn start_as(step: Duration, threshold: Duration, realtime: bool) -> StallMonitor {
        let rt = Arc::new(AtomicBool::new(false));
        let rt2 = Arc::clone(&rt);
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            worst_ns: AtomicU64::new(0),
            late_sum_ns: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            wakeups: AtomicU64::new(0),
            threshold_ns: threshold.as_nanos().min(u128::from(u64::MAX)) as u64,
        });
        let s = Arc::clone(&shared);
        let step = step.max(Duration::from_micros(100));
        let thread = std::thread::Builder::new()
            .name("stall-monitor".into())
            .spawn(move || {
                crate::sys::set_timer_slack_ns(1);
                if realtime && crate::sys::set_fifo_priority(MONITOR_PRIORITY).is_ok() {
                    rt2.store(true, Ordering::Release);
                }
                while !s.stop.load(Ordering::Relaxed) {
                    let t0 = Instant::now();
                    std::thread::sleep(step);
                    let late = t0.elapsed().saturating_sub(step);
                    let ns = late.as_nanos().min(u128::from(u64::MAX)) as u64;
                    s.worst_ns.fetch_max(ns, Ordering::Relaxed);
                    s.late_sum_ns.fetch_add(ns, Ordering::Relaxed);
                    s.wakeups.fetch_add(1, Ordering::Relaxed);
                    if ns >= s.threshold_ns {
                        s.stalls.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .ok();
        StallMonitor {
            shared,
            thread,
            steal_at: steal_ticks(),
            tick_s: ticks_per_s(),
            realtime: rt,
        }
    }

    /// Whether the thread runs real-time (it may not have got there yet
    /// right after the start).
    pub fn realtime(&self) -> bool {
        self.realtime.load(Ordering::Acquire)
    }

    /// A monitor with a 1 ms step and the default threshold.
    pub fn start_default() -> StallMonitor {
        Self::start(Duration::from_millis(1), DEFAULT_THRESHOLD)
    }

    /// Whether the thread is running (it may fail to start under a
    /// thread limit; the windows are then empty).
    pub fn running(&self) -> bool {
        self.thread.is_some()
    }

    /// What the machine did since the last call (or the start), and starts
    /// a new window.
    pub fn take_window(&mut self) -> StallWindow {
        let s = &self.shared;
        let worst = s.worst_ns.swap(0, Ordering::Relaxed);
        let sum = s.late_sum_ns.swap(0, Ordering::Relaxed);
        let n = s.wakeups.swap(0, Ordering::Relaxed);
        let stalls = s.stalls.swap(0, Ordering::Relaxed);
        let now = steal_ticks();
        let steal_ms = match (self.steal_at, now) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / self.tick_s * 1e3),
            _ => None,
        };
        self.steal_at = now;
        StallWindow {
            worst_ms: worst as f64 / 1e6,
            mean_late_us: if n > 0 {
                sum as f64 / n as f64 / 1e3
            } else {
                0.0
            },
            stalls,
            steal_ms,
        }
    }
}

/// How long [`StallMonitor::wait_quiet`] watches and waits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuietSpec {
    /// One window's length: the monitor is read this often.
    pub poll: Duration,
    /// Quiet windows in a row for this long end the wait.
    pub quiet_for: Duration,
    /// The wait ends here, quiet or not.
    pub max: Duration,
}

/// How a wait for a quiet host ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuietWait {
    /// How long the wait took.
    pub waited: Duration,
    /// A quiet stretch of `quiet_for` was seen (false: the wait reached
    /// `max`, or was stopped, first).
    pub quiet: bool,
    /// Windows that were not quiet.
    pub noisy_windows: u32,
}

impl StallMonitor {
    /// Waits until the windows of `q.poll` read quiet (`is_quiet`) for
    /// `q.quiet_for` in a row, at most `q.max`, or until `stop` says so
    /// (checked every window). The monitor's wake-ups go on while the
    /// caller waits, so a host that holds the machine's CPUs back shows
    /// as late wake-ups (and steal) even when nothing else runs.
    pub fn wait_quiet(
        &mut self,
        q: QuietSpec,
        is_quiet: impl Fn(&StallWindow) -> bool,
        stop: impl Fn() -> bool,
    ) -> QuietWait {
        let start = Instant::now();
        let _ = self.take_window();
        let mut quiet_since = start;
        let mut noisy_windows = 0u32;
        let poll = q.poll.max(Duration::from_millis(1));
        loop {
            let now = Instant::now();
            let waited = now - start;
            if self.running() && now - quiet_since >= q.quiet_for {
                return QuietWait {
                    waited,
                    quiet: true,
                    noisy_windows,
                };
            }
            if waited >= q.max || stop() || !self.running() {
                return QuietWait {
                    waited,
                    quiet: false,
                    noisy_windows,
                };
            }
            std::thread::sleep(poll.min(q.max - waited));
            if !is_quiet(&self.take_window()) {
                noisy_windows += 1;
                quiet_since = Instant::now();
            }
        }
    }
}

impl Drop for StallMonitor {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_late_wake_up_counts_against_a_tiny_threshold() {
        let mut m = StallMonitor::start(Duration::from_millis(1), Duration::from_nanos(1));
        assert!(m.running());
        std::thread::sleep(Duration::from_millis(50));
        let w = m.take_window();
        // Every wake-up is at least a little late (the kernel's timer
        // slack), so with a 1 ns threshold each one counts.
        assert!(w.stalls > 0, "{w:?}");
        assert!(w.worst_ms > 0.0 && w.mean_late_us > 0.0, "{w:?}");
        assert!(w.stalled(Duration::from_nanos(1)));
        // A fresh window starts from zero.
        let w2 = m.take_window();
        assert!(w2.worst_ms <= w.worst_ms + 50.0);
    }

    #[test]
    fn a_realtime_monitor_is_realtime_where_allowed_and_measures_alike() {
        let mut m = StallMonitor::start_realtime(Duration::from_millis(1), DEFAULT_THRESHOLD);
        std::thread::sleep(Duration::from_millis(30));
        // Root (or CAP_SYS_NICE) may; anyone else gets a normal thread.
        let root = crate::sys::is_root();
        if root {
            assert!(m.realtime());
        }
        let w = m.take_window();
        assert!(w.worst_ms.is_finite() && w.worst_ms >= 0.0, "{w:?}");
        assert!(!StallMonitor::start_default().realtime());
    }

    #[test]
    fn a_wait_for_quiet_ends_quiet_on_a_quiet_host_and_at_its_bound_on_a_noisy_one() {
        let mut m = StallMonitor::start(Duration::from_millis(1), DEFAULT_THRESHOLD);
        let q = QuietSpec {
            poll: Duration::from_millis(5),
            quiet_for: Duration::from_millis(20),
            max: Duration::from_secs(5),
        };
        // Every window quiet: the wait ends quiet, with no noisy window.
        let w = m.wait_quiet(q, |_| true, || false);
        assert!(w.quiet && w.noisy_windows == 0, "{w:?}");
        assert!(w.waited >= q.quiet_for, "{w:?}");
        // No window quiet: the wait ends at its bound, not quiet, every
        // window counted.
        let q = QuietSpec {
            max: Duration::from_millis(30),
            ..q
        };
        let w = m.wait_quiet(q, |_| false, || false);
        assert!(!w.quiet && w.noisy_windows >= 1, "{w:?}");
        assert!(w.waited >= q.max, "{w:?}");
        // Stopped: ends at once, not quiet.
        let w = m.wait_quiet(q, |_| false, || true);
        assert!(!w.quiet && w.noisy_windows == 0, "{w:?}");
    }

    #[test]
    fn a_frozen_process_shows_as_one_long_stall() {
        // Freeze the whole process (the monitor thread with it) by
        // stopping it from a helper process, as a hypervisor pause or a
        // SIGSTOP would: the next wake-up is as late as the freeze.
        let mut m = StallMonitor::start(Duration::from_millis(1), DEFAULT_THRESHOLD);
        let _ = m.take_window();
        let pid = std::process::id().to_string();
        let status = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("kill -STOP {pid}; sleep 0.3; kill -CONT {pid}"),
            ])
            .status();
        if status.is_err() {
            crate::testing::skip("sh", "no sh to stop and continue this process");
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
        let w = m.take_window();
        assert!(w.worst_ms >= 200.0, "{w:?}");
        assert!(w.stalls >= 1 && w.stalled(DEFAULT_THRESHOLD), "{w:?}");
    }
}
