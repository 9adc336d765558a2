//! The global bound on buffered input: bytes of started, unfinished
//! messages held by the controller across all connections and workers.
//!
//! A worker reserves room before each read and settles the reservation
//! with what the connection really holds afterwards, so the total (held +
//! reserved) never exceeds the limit, also with several workers. When no
//! room is left a connection is read only to finish the message it has
//! started (which frees its buffer); new data waits in the kernel until the
//! total drops. Nothing is ever discarded.

use std::sync::atomic::{AtomicUsize, Ordering};

pub struct InputBudget {
    limit: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
}

impl InputBudget {
    pub fn new(limit: usize) -> InputBudget {
        InputBudget {
            limit,
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// Reserve up to `want` bytes; returns what was granted (0 when full).
    pub fn reserve(&self, want: usize) -> usize {
        let mut got = 0;
        let r = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                got = want.min(self.limit.saturating_sub(u));
                (got > 0).then_some(u + got)
            });
        match r {
            Ok(prev) => {
                self.peak.fetch_max(prev + got, Ordering::Relaxed);
                got
            }
            Err(_) => 0,
        }
    }

    /// Replace a reservation of `reserved` bytes by a change of `grown` /
    /// `shrunk` bytes in what a connection holds.
    pub fn settle(&self, reserved: usize, grown: usize, shrunk: usize) {
        let add = grown;
        let sub = reserved + shrunk;
        if add >= sub {
            let prev = self.used.fetch_add(add - sub, Ordering::AcqRel);
            self.peak.fetch_max(prev + add - sub, Ordering::Relaxed);
        } else {
            self.used.fetch_sub(sub - add, Ordering::AcqRel);
        }
    }

    /// Whether a reservation could be granted now.
    pub fn has_room(&self) -> bool {
        self.used.load(Ordering::Acquire) < self.limit
    }

    /// Bytes held (and reserved) now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The most ever held (and reserved) at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_never_pass_the_limit() {
        let b = InputBudget::new(100);
        assert_eq!(b.reserve(60), 60);
        assert_eq!(b.reserve(60), 40);
        assert_eq!(b.reserve(1), 0);
        assert!(!b.has_room());
        // The first read kept 10 bytes, the second none.
        b.settle(60, 10, 0);
        b.settle(40, 0, 0);
        assert_eq!(b.used(), 10);
        b.settle(0, 0, 10);
        assert_eq!(b.used(), 0);
        assert_eq!(b.peak(), 100);
    }
}
