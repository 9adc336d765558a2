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
    unsafe { libc::localtime_r(&t, &mut tm) };
    (
        tm.tm_hour as u32,
        tm.tm_min as u32,
        tm.tm_sec as u32,
        (tv.tv_usec / 1000) as u32,
    )
}
