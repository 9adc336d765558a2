//! The section timer: the seed's rdtsc pattern (dpdk-vnf-evaluation: sum of
//! TSC deltas over 10 M samples, printed as one mean) done so that one
//! preemption cannot wreck the figure.
//!
//! An operation is timed in short batches (`batch` back-to-back calls
//! between two fenced TSC reads, so the read cost and the 10 ns TSC step are
//! amortised), and every batch's per-operation time is kept. The summary's
//! median and p99 describe the operation; a batch hit by an interrupt or a
//! context switch lands in the tail, visible as p99/max and counted as
//! "preempted", instead of inflating a single mean. The seed's plain mean is
//! still available as [`SectionTimer::mean_ns`] for comparison.

use crate::clock::{rdtsc_fenced, tsc};
use crate::stats::Summary;

/// Times an operation in batches and keeps one per-op figure per batch.
#[derive(Debug, Clone)]
pub struct SectionTimer {
    batch: u32,
    per_op_ticks: Vec<f64>,
    overhead_ticks: f64,
}

impl SectionTimer {
    /// A timer that runs `batch` operations per timed section and keeps up
    /// to `max_batches` batches (allocated up front; recording never
    /// allocates).
    pub fn new(batch: u32, max_batches: usize) -> Self {
        let batch = batch.max(1);
        let mut t = SectionTimer {
            batch,
            per_op_ticks: Vec::with_capacity(max_batches),
            overhead_ticks: 0.0,
        };
        t.overhead_ticks = measure_overhead();
        t
    }

    /// Operations per batch.
    pub fn batch(&self) -> u32 {
        self.batch
    }

    /// Runs `op` `batch` times inside one timed section. The cost of the two
    /// TSC reads is subtracted (measured once at construction).
    #[inline]
    pub fn time_batch<F: FnMut()>(&mut self, mut op: F) {
        let t0 = rdtsc_fenced();
        for _ in 0..self.batch {
            op();
        }
        let t1 = rdtsc_fenced();
        self.record_batch_ticks(t1.wrapping_sub(t0), self.batch);
    }

    /// Records an externally timed batch of `ops` operations.
    #[inline]
    pub fn record_batch_ticks(&mut self, ticks: u64, ops: u32) {
        if self.per_op_ticks.len() == self.per_op_ticks.capacity() {
            return; // full: never reallocate while timing
        }
        let net = (ticks as f64 - self.overhead_ticks).max(0.0);
        self.per_op_ticks.push(net / ops.max(1) as f64);
    }

    /// Number of recorded batches.
    pub fn batches(&self) -> usize {
        self.per_op_ticks.len()
    }

    /// Per-operation nanoseconds of each batch.
    pub fn per_op_ns(&self) -> Vec<f64> {
        let t = tsc();
        self.per_op_ticks.iter().map(|x| x * 1e9 / t.hz()).collect()
    }

    /// Summary of per-operation ns over batches.
    pub fn summary_ns(&self) -> Summary {
        Summary::from_samples(&self.per_op_ns())
    }

    /// The seed's figure: total ns over total operations.
    pub fn mean_ns(&self) -> f64 {
        let v = self.per_op_ns();
        if v.is_empty() {
            return f64::NAN;
        }
        v.iter().sum::<f64>() / v.len() as f64
    }

    /// Share of batches that look preempted (see [`is_preempted`]).
    pub fn preempted_share(&self) -> f64 {
        preempted_share(&self.per_op_ns())
    }
}

/// Cost of an empty timed section (two fenced reads), median of 1000.
fn measure_overhead() -> f64 {
    let mut v: Vec<u64> = (0..1000)
        .map(|_| {
            let a = rdtsc_fenced();
            let b = rdtsc_fenced();
            b.wrapping_sub(a)
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2] as f64
}

/// A sample is taken as preempted when it exceeds the median by more than
/// 5 µs and by more than 2× — a context switch or a timer interrupt on this
/// kind of VM costs several µs, far more than the jitter of a busy loop.
pub fn is_preempted(sample_ns: f64, median_ns: f64) -> bool {
    sample_ns > median_ns * 2.0 && sample_ns - median_ns > 5_000.0
}

/// Share of samples that [`is_preempted`] flags.
pub fn preempted_share(samples_ns: &[f64]) -> f64 {
    if samples_ns.is_empty() {
        return f64::NAN;
    }
    let med = Summary::from_samples(samples_ns).median;
    samples_ns.iter().filter(|&&x| is_preempted(x, med)).count() as f64 / samples_ns.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_every_batch_up_to_capacity() {
        let mut t = SectionTimer::new(100, 50);
        let mut x = 0u64;
        for _ in 0..60 {
            t.time_batch(|| x = std::hint::black_box(x + 1));
        }
        assert_eq!(t.batches(), 50);
        assert_eq!(x, 6000);
        let s = t.summary_ns();
        assert_eq!(s.n, 50);
        assert!(s.min >= 0.0);
    }

    #[test]
    fn preemption_rule() {
        assert!(!is_preempted(1100.0, 1000.0));
        assert!(is_preempted(20_000.0, 1000.0));
        assert!(!is_preempted(9_000.0, 5000.0));
        let v = [10.0, 10.0, 10.0, 50_000.0];
        assert_eq!(preempted_share(&v), 0.25);
    }
}
