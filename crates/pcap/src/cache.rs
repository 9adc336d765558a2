//! Page-cache control for one file, without root and without touching the
//! rest of the machine (drop_caches is global, so we never use it):
//! `evict` asks the kernel to drop the file's pages with
//! posix_fadvise(POSIX_FADV_DONTNEED) after writing back dirty ones;
//! `warm` reads the file through a reused buffer; `resident` counts the
//! file's pages in memory with mincore over a read-only mapping. The seed's
//! author measured a cold cache with `vm.drop_caches`; this is the per-file
//! equivalent, checked rather than assumed.
#![allow(unsafe_code)]

use commbench_core::syscall;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Pages of a file in the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Residency {
    pub resident_pages: u64,
    pub total_pages: u64,
}

impl Residency {
    pub fn fraction(&self) -> f64 {
        if self.total_pages == 0 {
            1.0
        } else {
            self.resident_pages as f64 / self.total_pages as f64
        }
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// Counts the file's resident pages with mincore.
pub fn resident(path: &Path) -> io::Result<Residency> {
    let f = File::open(path)?;
    let len = f.metadata()?.len();
    let ps = page_size();
    let total = len.div_ceil(ps);
    if len == 0 {
        return Ok(Residency {
            resident_pages: 0,
            total_pages: 0,
        });
    }
    let mut resident = 0u64;
    // Map and query in windows so the vector stays small for huge files.
    let window: u64 = 1 << 30;
    let mut off = 0u64;
    let mut vec = vec![0u8; (window / ps) as usize];
    while off < len {
        let n = (len - off).min(window);
        // A fresh read-only shared mapping of a file we opened; it is only
        // passed to mincore (never dereferenced) and unmapped below.
        let addr = commbench_core::sys::mmap(
            n as usize,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            off as libc::off_t,
        )?
        .cast();
        let pages = n.div_ceil(ps) as usize;
        // SAFETY: `vec` holds at least `pages` bytes, one per page of the
        // mapping, as mincore requires.
        let rc = unsafe { syscall!(mincore(addr, n as usize, vec.as_mut_ptr())) };
        // SAFETY: unmapping exactly the mapping created above.
        unsafe { libc::munmap(addr, n as usize) };
        rc?;
        resident += vec[..pages].iter().filter(|b| **b & 1 != 0).count() as u64;
        off += n;
    }
    Ok(Residency {
        resident_pages: resident,
        total_pages: total,
    })
}

/// Drops the file's pages from the page cache (dirty pages are written
/// back first, or the kernel would keep them).
pub fn evict(path: &Path) -> io::Result<Residency> {
    let f = File::open(path)?;
    // fdatasync works on a read-only descriptor on Linux.
    f.sync_data()?;
    // SAFETY: plain syscall on a descriptor we own.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    resident(path)
}

/// Reads the whole file so its pages are cached.
pub fn warm(path: &Path) -> io::Result<Residency> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf)? > 0 {}
    resident(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_then_evict_changes_residency() {
        // Removed on drop, also when the test fails.
        let tmp = commbench_core::artifact::TempDir::new("pcap").unwrap();
        let dir = tmp.path().to_path_buf();
        let p = dir.join("f.bin");
        std::fs::write(&p, vec![7u8; 4 << 20]).unwrap();
        let w = warm(&p).unwrap();
        assert_eq!(w.total_pages, (4u64 << 20).div_ceil(page_size()));
        assert!(w.fraction() > 0.99, "{w:?}");
        let e = evict(&p).unwrap();
        // Some filesystems (tmpfs) cannot drop pages; only check we got an answer.
        assert_eq!(e.total_pages, w.total_pages);
        drop(tmp);
    }
}
