//! Thin wrappers over the Linux futex system call on shared (not private)
//! futex words, so the server and client processes of an `mp` run can wait
//! on words in the same /dev/shm segment. Only the shm transport uses them:
//! as the sleep/wake path of an endpoint without doorbells, and to wake
//! every sleeper when a ring is closed or aborted. Normal sleeps go through
//! [`crate::bell`] (pipe wakes carry the scheduler's sync hint; futex wakes
//! do not, and cost ~28 µs across the two vCPUs here).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleep while `*word == expected`, at most `timeout`. Returns on wake,
/// timeout, signal or when the value already differs; the caller re-checks.
#[allow(unsafe_code)]
pub fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned 32-bit atomic for the duration of
    // the call (it lives in a mapping that outlives every endpoint), and
    // FUTEX_WAIT only reads it. Errors (EAGAIN, ETIMEDOUT, EINTR) all mean
    // "re-check the condition", which every caller does.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wake up to `n` waiters on `word`.
#[allow(unsafe_code)]
pub fn wake(word: &AtomicU32, n: i32) {
    // SAFETY: as in `wait`; FUTEX_WAKE does not access the word's value.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            n,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}
