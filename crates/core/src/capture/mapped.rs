//! Read-only memory mapping of a plain capture file, so a warm-cache
//! extraction does not pay the kernel's copy into a user buffer (that copy
//! was a quarter of all CPU time of a single-threaded extraction here).
//!
//! Invariant and caveat: the mapping is private to this module and only
//! handed out as `&[u8]`; like ripgrep's mmap search, a file truncated by
//! another process while mapped can raise SIGBUS, so mapping is used only
//! for regular files and can be turned off (`--no-mmap`).
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::unix::io::AsRawFd;

/// A read-only shared mapping of a whole file.
pub struct Mapping {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the mapping is read-only and owned; sharing `&[u8]` views across
// threads is as safe as sharing any immutable byte slice.
unsafe impl Send for Mapping {}
// SAFETY: see above; no interior mutability.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file` (must be > 0).
    pub fn new(file: &File, len: usize) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty file"));
        }
        // A fresh read-only shared mapping of an open file; it is unmapped
        // exactly once in Drop and never written through.
        let ptr = crate::sys::mmap(len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0)?;
        // Sequential access: larger readahead on a cold cache. Advice only.
        // SAFETY: advising on the mapping created above.
        unsafe { libc::madvise(ptr.cast(), len, libc::MADV_SEQUENTIAL) };
        Ok(Self {
            ptr: ptr as *const u8,
            len,
        })
    }
}

impl Deref for Mapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr/len describe a live mapping of `len` readable bytes
        // that lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping created in `new`, once.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mapping({} bytes)", self.len)
    }
}
