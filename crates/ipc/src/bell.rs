//! Doorbells for the shm transport's sleeping waiters: a non-blocking pipe
//! per ring and direction. A waiter that must sleep polls the read end; the
//! peer writes one byte only when the waiter's sleep flag says it sleeps.
//!
//! Why a pipe and not a futex (measured on this 2-vCPU VM under load): a
//! pipe write wakes the reader with the scheduler's "sync" hint (the waker
//! is about to block), so the reader is run on the waker's CPU at once; a
//! FUTEX_WAKE carries no such hint, the sleeper is woken on its previous,
//! often idle or busy, vCPU (~28 µs across vCPUs here against ~4 µs on the
//! same one). With doorbells the shm transport's sleeping path costs what a
//! pipe round trip costs, while the data itself never enters the kernel.
//!
//! Invariants: every fd is non-blocking and close-on-exec except while a
//! client process is being spawned with its four ends; stale bytes only
//! cause a spurious wake-up (the waiter re-checks the ring), never a missed
//! one; a sleep lasts at most the given slice so liveness is re-checked.

use commbench_core::syscall;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::error::{IpcError, Result};

/// One doorbell: read end (the sleeper) and write end (the ringer); either
/// may be absent in a process that only plays one role.
#[derive(Debug, Default)]
pub struct Bell {
    pub(crate) r: Option<OwnedFd>,
    pub(crate) w: Option<OwnedFd>,
}

/// The two doorbells of a ring: `data` (the consumer sleeps on it) and
/// `space` (the producer sleeps on it).
#[derive(Debug, Default)]
pub struct RingBells {
    pub(crate) data: Bell,
    pub(crate) space: Bell,
}

#[allow(unsafe_code)]
fn pipe() -> Result<Bell> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid 2-element array for pipe2 to fill.
    unsafe { syscall!(pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC)) }
        .map_err(|e| IpcError::io("pipe2 (doorbell)", e))?;
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    unsafe {
        Ok(Bell {
            r: Some(OwnedFd::from_raw_fd(fds[0])),
            w: Some(OwnedFd::from_raw_fd(fds[1])),
        })
    }
}

impl RingBells {
    /// Fresh doorbells with both ends.
    pub fn new() -> Result<RingBells> {
        Ok(RingBells {
            data: pipe()?,
            space: pipe()?,
        })
    }
}

/// Duplicate a descriptor number handed over in an address (close-on-exec).
#[allow(unsafe_code)]
pub(crate) fn dup_fd(fd: RawFd) -> Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor number; failure is checked.
    let n = unsafe { syscall!(fcntl(fd, libc::F_DUPFD_CLOEXEC, 3)) }
        .map_err(|e| IpcError::io(format!("doorbell descriptor {fd}"), e))?;
    // SAFETY: n is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Set or clear close-on-exec (to hand a descriptor to a client process).
#[allow(unsafe_code)]
pub(crate) fn set_cloexec(fd: &OwnedFd, on: bool) {
    // SAFETY: F_GETFD/F_SETFD on a descriptor we own.
    unsafe {
        let f = libc::fcntl(fd.as_raw_fd(), libc::F_GETFD);
        if f >= 0 {
            let f = if on {
                f | libc::FD_CLOEXEC
            } else {
                f & !libc::FD_CLOEXEC
            };
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, f);
        }
    }
}

/// Sleep until the bell rings or `timeout` passes; drains stale rings.
#[allow(unsafe_code)]
pub(crate) fn sleep(fd: &OwnedFd, timeout: Duration) {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a negative return (EINTR) just ends the
    // sleep early, which the caller handles by re-checking.
    let n = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as libc::c_int) };
    if n > 0 {
        let mut buf = [0u8; 64];
        // SAFETY: reading into a local buffer from a non-blocking pipe.
        unsafe {
            libc::read(
                fd.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
            );
        }
    }
}

/// Ring the bell (one byte; a full pipe already means "wake up").
#[allow(unsafe_code)]
pub(crate) fn ring(fd: &OwnedFd) {
    let b = 1u8;
    // SAFETY: writing one byte from a local to a non-blocking pipe; EAGAIN
    // (pipe full of earlier rings) is fine.
    unsafe {
        libc::write(fd.as_raw_fd(), &b as *const u8 as *const libc::c_void, 1);
    }
}
