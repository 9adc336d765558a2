//! The controller's log: worker threads hand lines to a bounded in-memory
//! queue and never touch stderr; one logger thread drains the queue to
//! stderr. When stderr stops taking bytes (a pipe nobody reads, a paused
//! terminal) the queue fills and further lines are dropped and counted, so
//! a worker never blocks on its log, and shutdown waits for the log only
//! for a bounded time.
//!
//! Per peer, [`PeerLog`] keeps repeated per-message lines (OFPT_ERROR from
//! a switch) to the first [`PEER_BURST`]; the rest are counted and
//! summarised once per [`SUMMARY_INTERVAL`] and when the peer leaves.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Lines waiting for stderr at most; beyond this, lines are dropped.
pub const QUEUE_LINES: usize = 4096;
/// Longest line written (longer ones are cut): one pipe page per write.
const MAX_LINE: usize = 1024;
/// Per-message lines printed per peer before they are only counted.
pub const PEER_BURST: u32 = 5;
/// How often a peer's suppressed lines are summarised.
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(10);
/// How long `close` waits for stderr to take the last lines.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Queue {
    lines: VecDeque<String>,
    /// A line taken by the logger thread and not yet fully written.
    writing: bool,
    closing: bool,
    /// The logger thread has ended.
    done: bool,
}

struct Shared {
    q: Mutex<Queue>,
    /// Signalled when a line is queued or closing starts.
    more: Condvar,
    /// Signalled when the queue drains or the logger ends.
    drained: Condvar,
    dropped: AtomicU64,
    written: AtomicU64,
}

/// Lines written and dropped over the logger's life.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogCounts {
    pub written: u64,
    pub dropped: u64,
}

/// A handle on the log queue; cheap to clone, shared by the workers.
#[derive(Clone)]
pub struct Logger {
    s: Arc<Shared>,
}

impl Logger {
    /// Start the logger thread.
    pub fn start() -> std::io::Result<Logger> {
        let s = Arc::new(Shared {
            q: Mutex::new(Queue::default()),
            more: Condvar::new(),
            drained: Condvar::new(),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
        });
        let t = s.clone();
        // Detached: a logger stuck on stderr must not hold up the process.
        std::thread::Builder::new()
            .name("ofctl-log".into())
            .spawn(move || drain(&t))?;
        Ok(Logger { s })
    }

    /// Queue one line (without newline); never blocks on stderr. A full
    /// queue drops the line and counts it.
    pub fn line(&self, mut text: String) {
        if text.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        let Ok(mut q) = self.s.q.lock() else {
            self.s.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if q.lines.len() >= QUEUE_LINES || q.done {
            drop(q);
            self.s.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        text.push('\n');
        q.lines.push_back(text);
        drop(q);
        self.s.more.notify_one();
    }

    /// Lines written and dropped so far.
    pub fn counts(&self) -> LogCounts {
        LogCounts {
            written: self.s.written.load(Ordering::Relaxed),
            dropped: self.s.dropped.load(Ordering::Relaxed),
        }
    }

    /// Let the logger write what is queued (waiting at most a second for
    /// stderr), then end it; lines still queued after that are dropped.
    pub fn close(&self) -> LogCounts {
        let deadline = Instant::now() + CLOSE_WAIT;
        if let Ok(mut q) = self.s.q.lock() {
            q.closing = true;
            self.s.more.notify_all();
            while !q.done && (!q.lines.is_empty() || q.writing) {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                q = match self.s.drained.wait_timeout(q, deadline - now) {
                    Ok((q, _)) => q,
                    Err(_) => return self.counts(),
                };
            }
            // What stderr did not take in time is dropped, not waited for.
            let left = q.lines.len() as u64;
            q.lines.clear();
            q.done = true;
            self.s.dropped.fetch_add(left, Ordering::Relaxed);
            self.s.more.notify_all();
        }
        self.counts()
    }
}

/// The logger thread: take lines in batches of at most one pipe page and
/// write them when stderr can take them; while it cannot, the queue fills
/// and the workers' lines are dropped (counted). Reports drops once stderr
/// moves again.
fn drain(s: &Shared) {
    let mut batch: Vec<u8> = Vec::with_capacity(4096);
    let mut reported_drops = 0u64;
    loop {
        {
            let Ok(mut q) = s.q.lock() else { return };
            q.writing = false;
            if q.lines.is_empty() {
                s.drained.notify_all();
            }
            while q.lines.is_empty() && !q.closing && !q.done {
                q = match s.more.wait(q) {
                    Ok(q) => q,
                    Err(_) => return,
                };
            }
            if q.done || (q.closing && q.lines.is_empty()) {
                q.done = true;
                s.drained.notify_all();
                return;
            }
            let dropped = s.dropped.load(Ordering::Relaxed);
            if dropped > reported_drops {
                let line = format!(
                    "controller: {} log lines dropped: stderr was not taking them\n",
                    dropped - reported_drops
                );
                reported_drops = dropped;
                batch.extend_from_slice(line.as_bytes());
            }
            while let Some(l) = q.lines.front() {
                if !batch.is_empty() && batch.len() + l.len() > 4096 {
                    break;
                }
                batch.extend_from_slice(l.as_bytes());
                q.lines.pop_front();
                s.written.fetch_add(1, Ordering::Relaxed);
            }
            q.writing = true;
        }
        write_batch(s, &batch);
        batch.clear();
    }
}

/// Write one batch, polling stderr so a blocked reader never blocks us past
/// the point where the queue is closed.
fn write_batch(s: &Shared, mut buf: &[u8]) {
    while !buf.is_empty() {
        if !crate::sys::stderr_writable(100) {
            if s.q.lock().map(|q| q.done).unwrap_or(true) {
                return;
            }
            continue;
        }
        // At most one page per write: POLLOUT promises room for that much.
        let n = buf.len().min(4096);
        match crate::sys::write_stderr(&buf[..n]) {
            Ok(0) => return,
            Ok(w) => buf = &buf[w..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return, // stderr closed or broken: the lines are lost
        }
    }
}

/// Per-peer limiter for repeated per-message lines.
#[derive(Debug, Default)]
pub struct PeerLog {
    printed: u32,
    /// Lines counted since the last summary.
    suppressed: u64,
    since: Option<Instant>,
}

impl PeerLog {
    /// Whether to print the next per-message line; counts it if not.
    #[inline]
    pub fn allow(&mut self) -> bool {
        if self.printed < PEER_BURST {
            self.printed += 1;
            return true;
        }
        if self.suppressed == 0 {
            self.since = Some(Instant::now());
        }
        self.suppressed += 1;
        false
    }

    /// Lines suppressed since the last summary, if a summary is due at
    /// `now` (an interval passed) or `closing`; resets the count.
    pub fn take_summary(&mut self, now: Instant, closing: bool) -> Option<u64> {
        let due = closing
            || self
                .since
                .is_some_and(|t| now.duration_since(t) >= SUMMARY_INTERVAL);
        if self.suppressed > 0 && due {
            let n = self.suppressed;
            self.suppressed = 0;
            self.since = None;
            Some(n)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_prints_its_burst_then_is_counted_and_summarised() {
        let mut p = PeerLog::default();
        let printed = (0..1000).filter(|_| p.allow()).count();
        assert_eq!(printed, PEER_BURST as usize);
        let now = Instant::now();
        assert_eq!(p.take_summary(now, false), None, "interval not over");
        assert_eq!(p.take_summary(now, true), Some(1000 - PEER_BURST as u64));
        assert_eq!(p.take_summary(now, true), None, "count was reset");
        assert!(!p.allow(), "the burst is per peer, not per interval");
        let later = now + SUMMARY_INTERVAL + Duration::from_secs(1);
        assert_eq!(p.take_summary(later, false), Some(1));
    }
}
