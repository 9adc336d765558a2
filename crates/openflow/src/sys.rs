//! The OpenFlow lab's system calls: the shared event and socket wrappers
//! from `commbench_core::sys`, plus local wall-clock time for cbench's
//! `HH:MM:SS.mmm` prefix.
#![allow(unsafe_code)]

pub use commbench_core::sys::*;

/// Local time of day `(hour, minute, second, millisecond)` now.
pub fn local_hms_ms() -> (u32, u32, u32, u32) {
    let mut tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    // SAFETY: tv is a valid timeval; a null timezone is allowed.
    unsafe { libc::gettimeofday(&mut tv, std::ptr::null_mut()) };
    // SAFETY: tm is plain old data; localtime_r fills it from a valid time_t.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = tv.tv_sec;
    // SAFETY: t and tm are live locals for the call.
    unsafe { libc::localtime_r(&t, &mut tm) };
    (
        tm.tm_hour as u32,
        tm.tm_min as u32,
        tm.tm_sec as u32,
        (tv.tv_usec / 1000) as u32,
    )
}

/// Wait up to `timeout_ms` for stderr to take at least one pipe page
/// (POLLOUT), so that a write of at most 4096 bytes does not block.
pub fn stderr_writable(timeout_ms: i32) -> bool {
    let mut fds = [libc::pollfd {
        fd: 2,
        events: libc::POLLOUT,
        revents: 0,
    }];
    match poll(&mut fds, timeout_ms) {
        // POLLERR/POLLHUP count as ready: the write then fails and the
        // line is dropped instead of waiting for a reader that is gone.
        Ok(n) => n > 0 && fds[0].revents != 0,
        // Not pollable: treat as writable (writes will say what is wrong).
        Err(_) => true,
    }
}

/// One write(2) to stderr, without std's stderr lock (another thread may
/// hold it while blocked on a pipe nobody reads).
pub fn write_stderr(buf: &[u8]) -> std::io::Result<usize> {
    // SAFETY: buf is a live slice; fd 2 is only written, never closed here.
    unsafe { commbench_core::syscall!(write(2, buf.as_ptr().cast(), buf.len())) }
        .map(|n| n as usize)
}

/// Give freed heap memory back to the kernel (glibc keeps freed chunks
/// below the top of the heap otherwise).
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
