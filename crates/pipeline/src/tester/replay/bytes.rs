//! The capture's frames in memory the generator reads a burst at a time,
//! all of it once per loop: an anonymous mapping the kernel is asked to
//! back with 2 MB pages (`MADV_HUGEPAGE`), so walking a capture of a few
//! MB does not also walk a page table for every 4 KB of it.

use std::ops::Deref;
use std::ptr::NonNull;

/// 2 MB, the size of a transparent huge page on x86-64 and arm64.
const HUGE: usize = 2 << 20;

/// Bytes in a mapping of their own when the kernel gives one, else in a
/// `Vec` (never an error: the advice is only a hint).
pub(super) enum FrameBytes {
    Heap(Vec<u8>),
    Mapped {
        ptr: NonNull<u8>,
        len: usize,
        cap: usize,
    },
}

// SAFETY: the mapping is private to this value, written once before it
// is shared and read-only after; it is unmapped only in `drop`.
#[allow(unsafe_code)]
unsafe impl Send for FrameBytes {}
// SAFETY: as for `Send`: no `&self` method writes.
#[allow(unsafe_code)]
unsafe impl Sync for FrameBytes {}

impl FrameBytes {
    /// `data` moved into a mapping advised for huge pages, when the
    /// kernel grants one; `data` itself otherwise. Captures under one
    /// huge page stay on the heap: a page of their own would only cost.
    #[allow(unsafe_code)]
    pub(super) fn new(data: Vec<u8>) -> FrameBytes {
        if data.len() < HUGE {
            return FrameBytes::Heap(data);
        }
        let cap = data.len().div_ceil(HUGE) * HUGE;
        let Some(ptr) = commbench_core::sys::mmap(
            cap,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
        .ok()
        .and_then(NonNull::new) else {
            return FrameBytes::Heap(data);
        };
        // SAFETY: `ptr..ptr + cap` is the mapping just made; the advice is
        // a hint whose failure (THP off) leaves ordinary pages.
        unsafe { libc::madvise(ptr.as_ptr().cast(), cap, libc::MADV_HUGEPAGE) };
        // SAFETY: the mapping holds `cap >= data.len()` writable bytes and
        // does not overlap `data`'s allocation.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.as_ptr(), data.len()) };
        FrameBytes::Mapped {
            ptr,
            len: data.len(),
            cap,
        }
    }
}

impl Deref for FrameBytes {
    type Target = [u8];

    #[allow(unsafe_code)]
    fn deref(&self) -> &[u8] {
        match self {
            FrameBytes::Heap(v) => v,
            // SAFETY: the first `len` bytes of the mapping were written in
            // `new` and live until `drop`.
            FrameBytes::Mapped { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
        }
    }
}

impl Drop for FrameBytes {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if let FrameBytes::Mapped { ptr, cap, .. } = self {
            // SAFETY: the mapping made in `new`, unmapped once; no slice
            // of it outlives `self`.
            unsafe { libc::munmap(ptr.as_ptr().cast(), *cap) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_read_back_as_given_in_a_mapping_or_on_the_heap() {
        for n in [0, 100, HUGE - 1, HUGE, HUGE + 4097] {
            let data: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
            let b = FrameBytes::new(data.clone());
            assert_eq!(&*b, &data[..], "{n} bytes");
            assert_eq!(matches!(b, FrameBytes::Heap(_)), n < HUGE, "{n} bytes");
        }
    }
}
