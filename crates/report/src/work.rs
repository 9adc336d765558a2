//! Steps counted in the report's scans over records, so a test can tell a
//! cost that grows with its input from one that grows with its square by
//! counting, not by a clock.
//!
//! Each scan that once went quadratic (`varying`'s rescan of every change,
//! the floor learner's keying of every earlier record per series,
//! `history`'s search of every group and figure) counts one step per
//! element it visits. Outside tests [`step`] compiles to nothing.

#[cfg(test)]
thread_local! {
    static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `n` elements visited by a scan, in the calling thread's count.
#[inline(always)]
pub(crate) fn step(n: usize) {
    #[cfg(test)]
    STEPS.with(|s| s.set(s.get() + n as u64));
    #[cfg(not(test))]
    let _ = n;
}

/// The steps `f` takes in the calling thread.
#[cfg(test)]
pub(crate) fn steps_of(f: impl FnOnce()) -> u64 {
    let before = STEPS.with(std::cell::Cell::get);
    f();
    STEPS.with(std::cell::Cell::get) - before
}

/// The steps of `f` at 2n over those at n (`f(true)` and `f(false)`): a
/// linear cost gives 2, a quadratic one about 4. Exact: a count, not a
/// time, so another program on the machine cannot move it.
#[cfg(test)]
pub(crate) fn doubling_ratio(mut f: impl FnMut(bool)) -> f64 {
    let small = steps_of(|| f(false));
    let large = steps_of(|| f(true));
    assert!(small > 0, "the scan counted no steps: nothing was measured");
    large as f64 / small as f64
}
