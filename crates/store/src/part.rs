//! One row of an export part, from its bytes: the checks a row of either
//! format passes (start time, run id, JSON columns, the record bounds of
//! [`ImportLimits`]) and the bounded Parquet reader.
//!
//! Invariants: nothing read from a file is trusted for a size, and no
//! bytes make the reader panic. A Parquet file's footer is parsed by the
//! parquet crate and checked (`declared`) before a page is read; its
//! pages are decoded here (`pages`). It is bounded before decoding by what
//! the footer declares (rows, and the column chunks' decoded size, which
//! every page is held to) and then row by row by what it decoded, against
//! what is left of the import's bytes; a JSON column that does not parse
//! is refused, never stored as `{}`.
//!
//! No SQLite here: this module builds without the `sqlite` feature, so the
//! `store_parquet` fuzz target (`fuzz/`) compiles only this and the
//! parquet crate. `export` reads files into it and merges into the store.

use crate::{parse_utc, RunMeta, StoreError};
use commbench_core::record::Record;
use serde_json::{Map, Value};

#[cfg(feature = "parquet")]
mod declared;
#[cfg(feature = "parquet")]
mod pages;

/// The text columns of a Parquet export part, in schema order after
/// `started_unix` (an INT64).
#[cfg(feature = "parquet")]
pub(crate) const TEXT_COLUMNS: [&str; 10] = [
    "run_id",
    "started_utc",
    "git_sha",
    "build_profile",
    "command_line",
    "environment",
    "test",
    "params",
    "metrics",
    "match_key",
];

/// One exported row: a record with the run it belongs to.
#[derive(Debug, Clone)]
pub struct Row {
    pub run: RunMeta,
    pub record: Record,
}

/// Bounds on what one import reads: a hostile or mistaken file (a
/// gigabyte line, `/dev/zero`, millions of metric keys) is refused before
/// it costs more memory or time than these allow. `history` raises them
/// with `--import-max-bytes`, `--import-max-line-bytes`,
/// `--import-max-record-bytes` and `--import-max-metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportLimits {
    /// All files of one import together, in bytes as stored on disk.
    pub max_bytes: u64,
    /// One line of a file.
    pub max_line_bytes: usize,
    /// One record as JSON (parameters, metrics and environment).
    pub max_record_bytes: usize,
    /// Parameters and metrics of one record, nested values counted each.
    pub max_metrics: usize,
}

impl Default for ImportLimits {
    fn default() -> Self {
        ImportLimits {
            max_bytes: 256 << 20,
            max_line_bytes: 4 << 20,
            max_record_bytes: 4 << 20,
            max_metrics: 10_000,
        }
    }
}

pub(crate) fn input(msg: String) -> StoreError {
    StoreError::Input(msg)
}

/// A value from an input file, for a message: control characters escaped
/// and at most 60 characters.
pub(crate) fn shown(s: &str) -> String {
    shown_at_most(s, 60)
}

/// `s` for a message: control characters escaped and at most `n`
/// characters.
fn shown_at_most(s: &str, n: usize) -> String {
    let cut: String = s.chars().take(n).collect();
    let more = if cut.len() < s.len() { "…" } else { "" };
    format!("{}{more}", commbench_core::record::escape_control(&cut))
}

/// A Parquet error for a message, cut to a line: the parquet crate quotes
/// what it could not read (a cell that is not UTF-8 as the list of its
/// bytes, so a 4 MB cell made a 16 MB message).
#[cfg(feature = "parquet")]
fn parquet_error(at: &str, e: parquet::errors::ParquetError) -> StoreError {
    input(format!("{at}: {}", shown_at_most(&e.to_string(), 200)))
}

/// The earliest and latest start time an import takes (1970 to 2100).
const UTC_RANGE: std::ops::Range<i64> = 0..4_102_444_800;

/// Seconds since the epoch of an RFC 3339 UTC time
/// (`2026-11-24T10:52:06Z`, with an optional fraction, `Z` or `+00:00`)
/// between 1970 and 2100; `None` otherwise.
pub fn parse_rfc3339_utc(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .is_some_and(|x| x.iter().all(u8::is_ascii_digit))
    };
    let shape = digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10)
        && matches!(b.get(10), Some(b'T' | b't'))
        && digits(11..13)
        && b.get(13) == Some(&b':')
        && digits(14..16)
        && b.get(16) == Some(&b':')
        && digits(17..19);
    if !shape {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(f) = rest.strip_prefix('.') {
        let n = f.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 || n > 9 {
            return None;
        }
        rest = &f[n..];
    }
    if !matches!(rest, "Z" | "z" | "+00:00" | "-00:00") {
        return None;
    }
    let (y, m, d): (i64, u32, u32) = (
        s[0..4].parse().ok()?,
        s[5..7].parse().ok()?,
        s[8..10].parse().ok()?,
    );
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&m) || d == 0 || d > days_in[m as usize - 1] {
        return None;
    }
    let t = parse_utc(&s[..19])?;
    UTC_RANGE.contains(&t).then_some(t)
}

pub(crate) fn check_started(at: &str, utc: &str) -> Result<i64, StoreError> {
    parse_rfc3339_utc(utc).ok_or_else(|| {
        input(format!(
            "{at}: started_utc '{}' is not an RFC 3339 UTC time between 1970 and 2100 (like 2026-11-24T10:52:06.123Z)",
            shown(utc)
        ))
    })
}

pub(crate) fn check_record(
    r: &Record,
    env: &Value,
    at: &str,
    lim: &ImportLimits,
) -> Result<(), StoreError> {
    let n = commbench_core::record::count_leaves(
        r.params.values().chain(r.metrics.values()),
        lim.max_metrics,
    );
    if n > lim.max_metrics {
        return Err(input(format!(
            "{at}: a record with more than {} parameters and metrics (--import-max-metrics raises the bound)",
            lim.max_metrics
        )));
    }
    let bytes = commbench_core::record::json_len(r) + commbench_core::record::json_len(env);
    if bytes > lim.max_record_bytes {
        return Err(input(format!(
            "{at}: a record of {bytes} bytes, more than {} (--import-max-record-bytes raises the bound)",
            lim.max_record_bytes
        )));
    }
    Ok(())
}

/// What an import has read so far, against its bounds.
pub(crate) struct Budget {
    pub(crate) lim: ImportLimits,
    pub(crate) used: u64,
}

/// Bytes a decoded Parquet row is counted for besides its text: the heap
/// the smallest export row holds as Rust values (run metadata, record,
/// JSON maps, its share of the decoded columns), measured at 1,010 bytes
/// by `tests/parquet_import_heap.rs`. Counted as 64 (what its JSON Lines
/// text takes) an import held ten times its bound.
#[cfg(feature = "parquet")]
const MIN_ROW_BYTES: u64 = 1024;

impl Budget {
    /// Bytes the import may still read (or decode).
    pub(crate) fn left(&self) -> u64 {
        self.lim.max_bytes.saturating_sub(self.used)
    }

    /// Counts `n` more bytes read from `at`, refused past the bound.
    pub(crate) fn count(&mut self, at: &str, n: u64) -> Result<(), StoreError> {
        if n > self.left() {
            return Err(input(format!(
                "{at}: the import is larger than {} bytes (--import-max-bytes raises the bound)",
                self.lim.max_bytes
            )));
        }
        self.used += n;
        Ok(())
    }
}

/// A JSON field of an export row: a value, or (Parquet keeps JSON as
/// text) text holding one. Missing or unparsable is refused, as a result
/// file's line is: storing `{}` instead would lose the record silently.
fn json_value(v: &Value, k: &str, at: &str) -> Result<Value, StoreError> {
    match v.get(k) {
        Some(Value::String(t)) => serde_json::from_str(t).map_err(|e| {
            input(format!(
                "{at}: '{k}' is not JSON ({e}); the file is damaged or not a commbench export"
            ))
        }),
        Some(x) => Ok(x.clone()),
        None => Err(input(format!(
            "{at}: no '{k}' field; the file is damaged or not a commbench export"
        ))),
    }
}

fn json_object(v: &Value, k: &str, at: &str) -> Result<Map<String, Value>, StoreError> {
    match json_value(v, k, at)? {
        Value::Object(m) => Ok(m),
        _ => Err(input(format!("{at}: '{k}' is not a JSON object"))),
    }
}

/// A row of an export file, given the partition values of its folder.
pub(crate) fn row_from_json(
    v: &Value,
    lab: &str,
    host: &str,
    at: &str,
    lim: &ImportLimits,
) -> Result<Row, StoreError> {
    let s = |k: &str| -> Result<String, StoreError> {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| input(format!("{at}: no text field '{k}'")))
    };
    let run_id = s("run_id")?;
    if run_id.is_empty() || run_id.len() > 64 || !run_id.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(input(format!(
            "{at}: run_id '{}' is not hex",
            shown(&run_id)
        )));
    }
    let command_line = match json_value(v, "command_line", at)? {
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().unwrap_or_default().to_owned())
            .collect(),
        _ => return Err(input(format!("{at}: 'command_line' is not a JSON array"))),
    };
    let mut record = Record::new(lab, &s("test")?);
    record.params = json_object(v, "params", at)?;
    record.metrics = json_object(v, "metrics", at)?;
    let started_utc = s("started_utc")?;
    let parsed = check_started(at, &started_utc)?;
    let started_unix = v
        .get("started_unix")
        .and_then(Value::as_i64)
        .ok_or_else(|| input(format!("{at}: no integer 'started_unix'")))?;
    if started_unix != parsed {
        return Err(input(format!(
            "{at}: started_unix {started_unix} is not started_utc {}",
            shown(&started_utc)
        )));
    }
    let environment = json_value(v, "environment", at)?;
    check_record(&record, &environment, at, lim)?;
    Ok(Row {
        run: RunMeta {
            run_id: run_id.to_ascii_lowercase(),
            started_utc,
            started_unix,
            host: host.to_owned(),
            git_sha: s("git_sha")?,
            build_profile: s("build_profile")?,
            command_line,
            environment,
        },
        record,
    })
}

/// The rows of one Parquet export part held in memory, `lab` and `host`
/// from its folder names and `at` naming it in messages (escaped, as
/// [`shown`] does): the bounds of `lim` as an import of that file keeps
/// them, its bytes counted first and then what they decode to.
#[cfg(feature = "parquet")]
pub fn parquet_rows(
    data: Vec<u8>,
    at: &str,
    lab: &str,
    host: &str,
    lim: &ImportLimits,
) -> Result<Vec<Row>, StoreError> {
    let mut budget = Budget { lim: *lim, used: 0 };
    budget.count(at, data.len() as u64)?;
    read_parquet(bytes::Bytes::from(data), at, lab, host, &mut budget)
}

/// The rows of a Parquet export part whose bytes were counted against
/// `budget` (an import's file, or [`parquet_rows`]).
#[cfg(feature = "parquet")]
pub(crate) fn read_parquet(
    data: bytes::Bytes,
    at: &str,
    lab: &str,
    host: &str,
    budget: &mut Budget,
) -> Result<Vec<Row>, StoreError> {
    use parquet::file::metadata::ParquetMetaDataReader;
    // The parquet crate reads the footer; the pages are decoded here
    // (`pages`), each size they declare checked first.
    let md = ParquetMetaDataReader::new()
        .parse_and_finish(&data)
        .map_err(|e| parquet_error(at, e))?;
    let columns = declared::columns(md.file_metadata().schema_descr(), at)?;
    // The file's bytes bound nothing: a dictionary repeats one row for
    // free (192 KB held 1M rows) and a compressed page inflates (a 19.7 MB
    // file held a 400 MB cell). Bounded before decoding by what the footer
    // declares (rows, and the column chunks' decoded size, which their
    // pages are held to), then row by row by what was decoded, against
    // what is left of the import's bytes.
    let mut declared_rows = 0u64;
    let mut declared_bytes = 0u64;
    let mut chunks = Vec::with_capacity(md.num_row_groups());
    for (g, rg) in md.row_groups().iter().enumerate() {
        let group_at = format!("{at} row group {}", g + 1);
        let rows = u64::try_from(rg.num_rows())
            .map_err(|_| declared::damaged(&group_at, format!("{} rows", rg.num_rows())))?;
        declared_rows = declared_rows.saturating_add(rows);
        let mut group = Vec::with_capacity(columns.len());
        for c in &columns {
            let chunk = declared::chunk(rg, c, data.len(), &group_at)?;
            declared_bytes = declared_bytes.saturating_add(chunk.decoded);
            group.push(chunk);
        }
        chunks.push((group_at, rows, group));
    }
    let decoded_bound = |what: String| {
        input(format!(
            "{at}: {what}, more than the {} bytes an import reads (--import-max-bytes raises the bound)",
            budget.lim.max_bytes
        ))
    };
    if declared_rows.saturating_mul(MIN_ROW_BYTES) > budget.left() {
        return Err(decoded_bound(format!("{declared_rows} rows")));
    }
    if declared_bytes > budget.left() {
        return Err(decoded_bound(format!(
            "{declared_bytes} bytes once decompressed"
        )));
    }
    let mut out = Vec::new();
    for (group_at, rows, group) in chunks {
        // Within the declared rows, which the bound above allows.
        let rows = rows as usize;
        let mut decoded = Vec::with_capacity(columns.len());
        for (c, chunk) in columns.iter().zip(group) {
            let spec = pages::Spec {
                int64: c.int64,
                optional: c.optional,
                codec: chunk.codec,
                decoded: chunk.decoded,
                rows,
            };
            let col_at = format!("{group_at} column '{}'", c.name);
            decoded.push(pages::decode(data.slice(chunk.range), &spec, &col_at)?);
        }
        for r in 0..rows {
            let row_at = format!("{at} row {}", out.len() + 1);
            let mut m = Map::new();
            let mut size = MIN_ROW_BYTES;
            for (c, d) in columns.iter().zip(&decoded) {
                let v = match d.rows[r] {
                    pages::NULL => Value::Null,
                    i => {
                        let b = &d.values[i as usize];
                        if c.int64 {
                            let x: [u8; 8] = b[..].try_into().map_err(|_| {
                                declared::damaged(&row_at, format!("'{}' is not 8 bytes", c.name))
                            })?;
                            Value::from(i64::from_le_bytes(x))
                        } else {
                            if b.len() > budget.lim.max_record_bytes {
                                return Err(input(format!(
                                    "{row_at}: '{}' holds {} bytes, more than {} in a record (--import-max-record-bytes raises the bound)",
                                    c.name,
                                    b.len(),
                                    budget.lim.max_record_bytes
                                )));
                            }
                            let s = std::str::from_utf8(b).map_err(|e| {
                                input(format!("{row_at}: '{}' is not UTF-8 text ({e})", c.name))
                            })?;
                            size += s.len() as u64;
                            Value::from(s)
                        }
                    }
                };
                m.insert(c.name.to_owned(), v);
            }
            if size > budget.left() {
                return Err(decoded_bound(format!(
                    "{} rows decode to more",
                    out.len() + 1
                )));
            }
            budget.used += size;
            out.push(row_from_json(
                &Value::Object(m),
                lab,
                host,
                &row_at,
                &budget.lim,
            )?);
        }
    }
    Ok(out)
}
