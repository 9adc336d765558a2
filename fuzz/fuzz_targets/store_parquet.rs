//! Arbitrary bytes as a Parquet export part, as `history --import` reads
//! one (`commbench_store::part`, built without SQLite): the reader must
//! never panic and never hold more heap than a bound set by the import's
//! limits (the allocator below refuses past it, which aborts), whatever the
//! footer, page headers, dictionaries or compressed pages claim. It either
//! refuses the bytes with an input error, one short line of printable text,
//! or gives rows that keep every bound: no more rows than the decoded-bytes
//! bound allows, each record within its byte and metric bounds, a hex run
//! id, a start time between 1970 and 2100, and the folder's lab and host.
//! Seeds: parts written by `commbench history --export --format parquet`
//! (`fuzz/seeds/store_parquet/`).
#![no_main]
use commbench_core::record::{count_leaves, json_len};
use commbench_store::part::{parquet_rows, ImportLimits};
use commbench_store::StoreError;
use libfuzzer_sys::fuzz_target;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Small bounds, so that a file that escapes them shows within the heap
/// bound below.
const LIMITS: ImportLimits = ImportLimits {
    max_bytes: 1 << 20,
    max_line_bytes: 64 << 10,
    max_record_bytes: 64 << 10,
    max_metrics: 1_000,
};

/// The most heap the reader may hold at once for `LIMITS` (64 times its
/// decoded-bytes bound: rows as Rust values, parquet's page buffers).
const HEAP_BOUND: usize = 64 << 20;

/// Heap bytes held by Rust code now (libFuzzer's own are C++ and not
/// counted).
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, refusing any allocation that would take the
/// live heap past [`HEAP_BOUND`]: Rust then aborts with "memory
/// allocation of N bytes failed", a crash libFuzzer keeps.
struct Bounded;

impl Bounded {
    fn take(n: usize) -> bool {
        if LIVE.fetch_add(n, Relaxed).saturating_add(n) > HEAP_BOUND {
            LIVE.fetch_sub(n, Relaxed);
            return false;
        }
        true
    }
}

#[allow(unsafe_code)]
// SAFETY: every method hands the caller's layout and pointer to `System`
// unchanged, so `System`'s guarantees are the caller's; refusing with a
// null pointer is what `GlobalAlloc` allows for an allocation it cannot
// make.
unsafe impl GlobalAlloc for Bounded {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if !Self::take(l.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, non-zero-sized as `alloc` requires.
        let p = unsafe { System.alloc(l) };
        if p.is_null() {
            LIVE.fetch_sub(l.size(), Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if !Self::take(l.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(l) };
        if p.is_null() {
            LIVE.fetch_sub(l.size(), Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        // SAFETY: `p` came from this allocator (so from `System`) with `l`.
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() && !Self::take(new - l.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: `p` came from `System` with `l`; `new` is the caller's
        // non-zero size.
        let q = unsafe { System.realloc(p, l, new) };
        if q.is_null() {
            if new > l.size() {
                LIVE.fetch_sub(new - l.size(), Relaxed);
            }
        } else if new < l.size() {
            LIVE.fetch_sub(l.size() - new, Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Bounded = Bounded;

fuzz_target!(|data: &[u8]| {
    match parquet_rows(data.to_vec(), "part-0.parquet", "ipc", "h", &LIMITS) {
        Ok(rows) => {
            // Each row is counted for at least 64 bytes against max_bytes.
            assert!(rows.len() as u64 * 64 <= LIMITS.max_bytes, "{} rows", rows.len());
            for r in &rows {
                assert_eq!((r.record.lab.as_str(), r.run.host.as_str()), ("ipc", "h"));
                let id = &r.run.run_id;
                assert!(!id.is_empty() && id.len() <= 64);
                assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "run id {id:?}");
                assert!((0..4_102_444_800).contains(&r.run.started_unix));
                let bytes = json_len(&r.record) + json_len(&r.run.environment);
                assert!(bytes <= LIMITS.max_record_bytes, "a record of {bytes} bytes");
                let leaves = count_leaves(
                    r.record.params.values().chain(r.record.metrics.values()),
                    LIMITS.max_metrics,
                );
                assert!(leaves <= LIMITS.max_metrics, "{leaves} metrics");
            }
        }
        Err(StoreError::Input(msg)) => {
            assert!(msg.len() < 2_000, "a message of {} bytes: {msg}", msg.len());
            assert!(!msg.chars().any(char::is_control), "control characters: {msg:?}");
        }
        Err(e) => panic!("not an input error: {e:?}"),
    }
});
