//! Issue 38: a Parquet import held about ten times its bound in memory,
//! because a decoded row was counted as 64 bytes besides its text while a
//! row as Rust values (run metadata, record, JSON maps) takes several
//! hundred. This test binary counts live heap with its own allocator and
//! reads parts of small repeated rows (dictionary-encoded: a few KB of
//! file) up to and past the import's bound: the heap the reader holds
//! stays within a small multiple of the bound either way.
#![cfg(feature = "parquet")]

use commbench_store::part::{parquet_rows, ImportLimits};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, keeping the live heap and its peak.
struct Counting;

#[allow(unsafe_code)]
// SAFETY: every method hands the caller's layout and pointer to `System`
// unchanged; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, as `alloc` requires.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `alloc` with layout `l`.
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Relaxed);
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The tests in this binary measure one at a time.
static ONE: Mutex<()> = Mutex::new(());

/// An export part of `rows` identical small rows.
fn part(rows: usize) -> Vec<u8> {
    let cells: [(&str, &str); 10] = [
        ("run_id", "00ff"),
        ("started_utc", "2026-01-01T00:00:00Z"),
        ("git_sha", ""),
        ("build_profile", ""),
        ("command_line", "[]"),
        ("environment", "{}"),
        ("test", "t"),
        ("params", "{}"),
        ("metrics", r#"{"m":1}"#),
        ("match_key", ""),
    ];
    let mut schema = String::from("message history {\n  required int64 started_unix;\n");
    for (c, _) in &cells {
        schema.push_str(&format!("  required binary {c} (UTF8);\n"));
    }
    schema.push('}');
    let schema = parquet::schema::parser::parse_message_type(&schema).unwrap();
    let props = WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .build();
    let mut out = Vec::new();
    let mut w = SerializedFileWriter::new(&mut out, Arc::new(schema), Arc::new(props)).unwrap();
    let mut rg = w.next_row_group().unwrap();
    let mut cw = rg.next_column().unwrap().unwrap();
    cw.typed::<Int64Type>()
        .write_batch(&vec![1_767_225_600; rows], None, None)
        .unwrap();
    cw.close().unwrap();
    for (_, v) in &cells {
        let mut cw = rg.next_column().unwrap().unwrap();
        cw.typed::<ByteArrayType>()
            .write_batch(&vec![ByteArray::from(*v); rows], None, None)
            .unwrap();
        cw.close().unwrap();
    }
    rg.close().unwrap();
    w.close().unwrap();
    out
}

/// The heap the reader held at its peak beyond what was live before, and
/// the rows it gave (None: refused).
fn read(rows: usize, lim: &ImportLimits) -> (usize, Option<usize>) {
    let data = part(rows);
    let before = LIVE.load(Relaxed);
    PEAK.store(before, Relaxed);
    let got = parquet_rows(data, "part", "ipc", "h", lim);
    let peak = PEAK.load(Relaxed) - before;
    (peak, got.ok().map(|r| r.len()))
}

#[test]
fn a_parquet_import_held_ten_times_its_bound_in_memory() {
    let _one = ONE.lock().unwrap();
    let bound = 4u64 << 20;
    let lim = ImportLimits {
        max_bytes: bound,
        ..ImportLimits::default()
    };
    let mut most_read = 0;
    for rows in [1_000, 3_000, 8_000, 16_000, 64_000, 1_000_000] {
        let (peak, got) = read(rows, &lim);
        eprintln!(
            "{rows} rows: {got:?} read, peak heap {peak} bytes ({:.2}x the bound)",
            peak as f64 / bound as f64
        );
        if let Some(n) = got {
            assert_eq!(n, rows);
            most_read = most_read.max(n);
        }
        assert!(
            peak as u64 <= 2 * bound,
            "{rows} rows: the reader held {peak} bytes for a bound of {bound}"
        );
    }
    assert!(
        most_read >= 3_000,
        "parts within the bound import: {most_read}"
    );
}
