//! The store out to the engines people use for fleets, and back in.
//!
//! [`export`] writes every record as one row of Hive-partitioned files,
//! `DIR/lab=<lab>/host=<host>/part-0.{jsonl,parquet}`, which DuckDB
//! (`read_parquet('DIR/**/*.parquet', hive_partitioning = true)`), Polars
//! and Spark read directly. As Hive requires, `lab` and `host` live in the
//! path only, never as columns (Spark refuses a column that is also a
//! partition). [`import`] reads such a folder or file back, or a plain
//! `results.jsonl` / `--format json|jsonl` output, and merges it,
//! deduplicating by run id (and by host and start time, so that a result
//! file of a run already kept is not kept twice).
//!
//! Row columns: run_id, started_utc, started_unix, git_sha, build_profile,
//! command_line, environment, test, params, metrics, match_key. In JSON
//! Lines the last JSON-valued ones are objects; in Parquet they are UTF8
//! JSON text (DuckDB's `json` functions read them).

use crate::part::{check_record, check_started, input, row_from_json, shown, Budget};
pub use crate::part::{parse_rfc3339_utc, ImportLimits, Row};
use crate::{Filter, RunMeta, Store, StoreError};
use commbench_core::record::Record;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// File format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Jsonl,
    Parquet,
}

impl ExportFormat {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "jsonl" => Some(Self::Jsonl),
            "parquet" => Some(Self::Parquet),
            _ => None,
        }
    }
    fn ext(self) -> &'static str {
        match self {
            Self::Jsonl => "jsonl",
            Self::Parquet => "parquet",
        }
    }
}

/// Whether this build can write and read Parquet (the `parquet` feature).
pub const PARQUET: bool = cfg!(feature = "parquet");

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportSummary {
    pub files: usize,
    pub rows: usize,
}

/// What an import merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportSummary {
    pub runs_added: usize,
    pub runs_skipped: usize,
    pub records_added: usize,
}

fn invalid(msg: String) -> StoreError {
    StoreError::Invalid(msg)
}

/// A partition value as Hive escapes it: anything but `[A-Za-z0-9._-]`
/// becomes `%XX`.
pub fn escape_partition(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if v.is_empty() {
        // Hive's name for an empty or null partition value.
        return EMPTY_PARTITION.to_owned();
    }
    if out == "." || out == ".." {
        out = v.bytes().map(|b| format!("%{b:02X}")).collect();
    }
    out
}

/// Hive's folder value for an empty partition value.
pub const EMPTY_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// The inverse of [`escape_partition`]; `None` for a malformed escape.
pub fn unescape_partition(v: &str) -> Option<String> {
    if v == EMPTY_PARTITION {
        return Some(String::new());
    }
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = v.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Writes the whole store (or the runs `f` selects) into `dir`, which must
/// be absent or empty: an export never overwrites files.
pub fn export(
    store: &Store,
    f: &Filter,
    dir: &Path,
    format: ExportFormat,
) -> Result<ExportSummary, StoreError> {
    if format == ExportFormat::Parquet && !PARQUET {
        return Err(invalid(
            "this commbench was built without Parquet (--no-default-features): use jsonl, or rebuild with the default features"
                .into(),
        ));
    }
    let io = |what: &str, p: &Path, e: std::io::Error| {
        invalid(format!("cannot {what} {}: {e}", p.display()))
    };
    // Never into a folder reached through another user's link; each file
    // is written through the checked writer too.
    commbench_core::userfile::check_folder(dir).map_err(|e| invalid(e.to_string()))?;
    if let Ok(mut it) = std::fs::read_dir(dir) {
        if it.next().is_some() {
            return Err(invalid(format!(
                "{} is not empty: an export writes into a new or empty folder",
                dir.display()
            )));
        }
    }
    let runs: BTreeMap<String, RunMeta> = store
        .runs(f)?
        .into_iter()
        .map(|r| (r.run_id.clone(), r))
        .collect();
    let mut parts: BTreeMap<(String, String), Vec<Row>> = BTreeMap::new();
    for s in store.records(f)? {
        let Some(run) = runs.get(&s.run_id) else {
            continue;
        };
        parts
            .entry((s.record.lab.clone(), run.host.clone()))
            .or_default()
            .push(Row {
                run: run.clone(),
                record: s.record,
            });
    }
    let mut sum = ExportSummary::default();
    for ((lab, host), rows) in &parts {
        let d = dir
            .join(format!("lab={}", escape_partition(lab)))
            .join(format!("host={}", escape_partition(host)));
        std::fs::create_dir_all(&d).map_err(|e| io("create", &d, e))?;
        let path = d.join(format!("part-0.{}", format.ext()));
        let mut parquet_err = None;
        commbench_core::artifact::write_atomic(&path, |f| match format {
            ExportFormat::Jsonl => write_jsonl(f.try_clone()?, rows),
            ExportFormat::Parquet => write_parquet(f.try_clone()?, rows, &path).map_err(|e| {
                let io = std::io::Error::other(e.to_string());
                parquet_err = Some(e);
                io
            }),
        })
        .map_err(|e| parquet_err.take().unwrap_or_else(|| io("write", &path, e)))?;
        sum.files += 1;
        sum.rows += rows.len();
    }
    Ok(sum)
}

fn row_json(r: &Row) -> Value {
    json!({
        "run_id": r.run.run_id,
        "started_utc": r.run.started_utc,
        "started_unix": r.run.started_unix,
        "git_sha": r.run.git_sha,
        "build_profile": r.run.build_profile,
        "command_line": r.run.command_line,
        "environment": r.run.environment,
        "test": r.record.test,
        "params": r.record.params,
        "metrics": r.record.metrics,
        "match_key": crate::match_key(&r.record),
    })
}

fn write_jsonl(file: std::fs::File, rows: &[Row]) -> std::io::Result<()> {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(file);
    for r in rows {
        serde_json::to_writer(&mut w, &row_json(r))?;
        writeln!(w)?;
    }
    w.flush()
}

#[cfg(feature = "parquet")]
fn write_parquet(file: std::fs::File, rows: &[Row], path: &Path) -> Result<(), StoreError> {
    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    use std::sync::Arc;
    let perr = |e: parquet::errors::ParquetError| invalid(format!("{}: {e}", path.display()));
    let mut schema = String::from("message history {\n  required int64 started_unix;\n");
    for c in crate::part::TEXT_COLUMNS {
        schema.push_str(&format!("  required binary {c} (UTF8);\n"));
    }
    schema.push('}');
    let schema = parse_message_type(&schema).map_err(perr)?;
    let props = WriterProperties::builder()
        .set_created_by("commbench history --export".into())
        .set_compression(Compression::SNAPPY)
        .build();
    let mut w = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props)).map_err(perr)?;
    let text = |r: &Row, c: &str| -> String {
        match row_json(r).get(c) {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        }
    };
    let mut rg = w.next_row_group().map_err(perr)?;
    let missing = || {
        invalid(format!(
            "{}: parquet schema has fewer columns",
            path.display()
        ))
    };
    {
        let mut cw = rg.next_column().map_err(perr)?.ok_or_else(missing)?;
        let v: Vec<i64> = rows.iter().map(|r| r.run.started_unix).collect();
        cw.typed::<Int64Type>()
            .write_batch(&v, None, None)
            .map_err(perr)?;
        cw.close().map_err(perr)?;
    }
    for c in crate::part::TEXT_COLUMNS {
        let mut cw = rg.next_column().map_err(perr)?.ok_or_else(missing)?;
        let v: Vec<ByteArray> = rows
            .iter()
            .map(|r| ByteArray::from(text(r, c).into_bytes()))
            .collect();
        cw.typed::<ByteArrayType>()
            .write_batch(&v, None, None)
            .map_err(perr)?;
        cw.close().map_err(perr)?;
    }
    rg.close().map_err(perr)?;
    w.close().map_err(perr)?;
    Ok(())
}

#[cfg(not(feature = "parquet"))]
fn write_parquet(_: std::fs::File, _: &[Row], _: &Path) -> Result<(), StoreError> {
    Err(invalid(
        "this commbench was built without Parquet (--no-default-features): rebuild with the default features".into(),
    ))
}

/// Most folders an import walks into (nesting).
const MAX_DEPTH: usize = 64;

fn shown_path(p: &Path) -> String {
    shown(&p.display().to_string())
}

impl Budget {
    /// The text of a regular file, within what is left of the import's
    /// bytes; anything but a regular file is refused before it is read.
    fn read(&mut self, path: &Path) -> Result<String, StoreError> {
        let bytes = self.read_bytes(path)?;
        String::from_utf8(bytes)
            .map_err(|e| input(format!("{}: not UTF-8 text ({e})", shown_path(path))))
    }

    /// A regular file opened for reading, its size counted against the
    /// import's bytes.
    fn open(&mut self, path: &Path) -> Result<std::fs::File, StoreError> {
        use std::os::unix::fs::OpenOptionsExt;
        let at = shown_path(path);
        let io = |e: std::io::Error| input(format!("{at}: {e}"));
        regular(path, &std::fs::metadata(path).map_err(io)?.file_type())?;
        // Non-blocking, so that a FIFO swapped in after the check does not
        // hang the open; checked again on the open file.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(io)?;
        let m = f.metadata().map_err(io)?;
        regular(path, &m.file_type())?;
        self.count(&at, m.len())?;
        Ok(f)
    }

    fn read_bytes(&mut self, path: &Path) -> Result<Vec<u8>, StoreError> {
        use std::io::Read;
        let f = self.open(path)?;
        let len = f.metadata().map_or(0, |m| m.len());
        let left = self.left();
        let mut buf = Vec::with_capacity(len as usize);
        // The file may grow while it is read: never past the bound.
        f.take(left + len + 1)
            .read_to_end(&mut buf)
            .map_err(|e| input(format!("{}: {e}", shown_path(path))))?;
        if buf.len() as u64 > len {
            self.count(&shown_path(path), buf.len() as u64 - len)?;
        }
        Ok(buf)
    }

    /// Every line within the line bound (before any is parsed).
    fn check_lines(&self, text: &str, at: &str) -> Result<(), StoreError> {
        for (i, line) in text.split('\n').enumerate() {
            if line.len() > self.lim.max_line_bytes {
                return Err(input(format!(
                    "{at} line {}: {} bytes, more than {} in a line (--import-max-line-bytes raises the bound)",
                    i + 1,
                    line.len(),
                    self.lim.max_line_bytes
                )));
            }
        }
        Ok(())
    }
}

/// Refuses anything but a regular file: a FIFO or socket would block, a
/// device (`/dev/zero`) never ends.
fn regular(path: &Path, t: &std::fs::FileType) -> Result<(), StoreError> {
    if t.is_file() {
        return Ok(());
    }
    Err(input(format!(
        "{} is {}: an import reads regular files and folders only",
        shown_path(path),
        crate::file_kind(*t)
    )))
}

/// The `lab=` and `host=` values of the folders above `path`.
fn partitions(path: &Path) -> (Option<String>, Option<String>) {
    let (mut lab, mut host) = (None, None);
    for c in path.components() {
        let s = c.as_os_str().to_string_lossy();
        if let Some(v) = s.strip_prefix("lab=") {
            lab = unescape_partition(v);
        } else if let Some(v) = s.strip_prefix("host=") {
            host = unescape_partition(v);
        }
    }
    (lab, host)
}

/// The rows of a Parquet export part, its size counted against the
/// import's bytes before it is read.
#[cfg(feature = "parquet")]
fn read_parquet(
    path: &Path,
    lab: &str,
    host: &str,
    budget: &mut Budget,
) -> Result<Vec<Row>, StoreError> {
    let data = budget.read_bytes(path)?;
    crate::part::read_parquet(data.into(), &shown_path(path), lab, host, budget)
}

#[cfg(not(feature = "parquet"))]
fn read_parquet(path: &Path, _: &str, _: &str, _: &mut Budget) -> Result<Vec<Row>, StoreError> {
    Err(input(format!(
        "{}: this commbench was built without Parquet (--no-default-features): rebuild with the default features",
        shown_path(path)
    )))
}

/// A stable run id for a result file's run (no id of its own): 128 bits
/// of FNV-1a over host, start time and command line.
fn derived_run_id(env: &Value) -> String {
    let text = format!(
        "{}|{}|{}",
        env.get("hostname").unwrap_or(&Value::Null),
        env.get("started_utc").unwrap_or(&Value::Null),
        env.get("command_line").unwrap_or(&Value::Null)
    );
    let fnv = |offset: u64| {
        let mut h = offset;
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    format!(
        "{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x6c62_272e_07bb_0142)
    )
}

/// The rows of a plain result file (`--format json`, `--format jsonl`,
/// a suite's `results.jsonl`): one run per distinct environment.
fn rows_of_results(text: &str, at: &str, lim: &ImportLimits) -> Result<Vec<Row>, StoreError> {
    // (record, its own environment or None for the document's)
    let mut recs: Vec<(Record, Option<Value>)> = Vec::new();
    let trimmed = text.trim_start();
    let doc = serde_json::from_str::<Value>(trimmed).ok();
    let doc_env = doc
        .as_ref()
        .and_then(|d| d.get("environment"))
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(records) = doc.as_ref().and_then(|d| d.get("records")) {
        let Some(list) = records.as_array() else {
            return Err(input(format!(
                "{at}: \"records\" is {}, not an array of records",
                match records {
                    Value::Object(_) => "an object",
                    Value::String(_) => "a string",
                    Value::Number(_) => "a number",
                    Value::Bool(_) => "a boolean",
                    Value::Null => "null",
                    Value::Array(_) => "an array",
                }
            )));
        };
        for (i, r) in list.iter().enumerate() {
            let mut r: Record = serde_json::from_value(r.clone())
                .map_err(|e| input(format!("{at}: records[{i}]: {e}")))?;
            let own = r.environment.take();
            recs.push((r, own));
        }
    } else {
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let mut r: Record = serde_json::from_str(line)
                .map_err(|e| input(format!("{at} line {}: {e}", i + 1)))?;
            let own = r.environment.take();
            recs.push((r, own));
        }
    }
    if recs.is_empty() {
        return Err(input(format!("{at}: no records in it")));
    }
    // Runs by environment, keyed by its JSON text: linear in the records.
    let mut metas: std::collections::HashMap<String, RunMeta> = std::collections::HashMap::new();
    let mut rows = Vec::with_capacity(recs.len());
    for (i, (r, own)) in recs.into_iter().enumerate() {
        let env = own.as_ref().unwrap_or(&doc_env);
        let rat = format!("{at} record {}", i + 1);
        check_record(&r, env, &rat, lim)?;
        let key = env.to_string();
        let run = match metas.get(&key) {
            Some(m) => m.clone(),
            None => {
                let Some(utc) = env.get("started_utc") else {
                    return Err(input(format!(
                        "{rat}: a record without its environment (start time, host): export with --format json or jsonl"
                    )));
                };
                let utc = utc.as_str().unwrap_or_default();
                let started_unix = check_started(&rat, utc)?;
                let mut m = RunMeta::from_environment(env)?;
                m.run_id = derived_run_id(env);
                m.started_unix = started_unix;
                metas.insert(key, m.clone());
                m
            }
        };
        rows.push(Row { run, record: r });
    }
    Ok(rows)
}

/// The rows of one file: an export part (its folder names lab and host),
/// or a plain result file.
fn rows_of_file(path: &Path, budget: &mut Budget) -> Result<Vec<Row>, StoreError> {
    let at = shown_path(path);
    let (lab, host) = partitions(path);
    let is_parquet = path.extension().is_some_and(|e| e == "parquet");
    if is_parquet {
        let (Some(lab), Some(host)) = (lab, host) else {
            return Err(input(format!(
                "{at}: a Parquet file outside lab=…/host=… folders (import the export's folder)"
            )));
        };
        return read_parquet(path, &lab, &host, budget);
    }
    let text = budget.read(path)?;
    budget.check_lines(&text, &at)?;
    let lim = budget.lim;
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let is_export_row = serde_json::from_str::<Value>(first)
        .ok()
        .is_some_and(|v| v.get("run_id").is_some() && v.get("lab").is_none());
    if !is_export_row {
        return rows_of_results(&text, &at, &lim);
    }
    let (Some(lab), Some(host)) = (lab, host) else {
        return Err(input(format!(
            "{at}: an export part outside lab=…/host=… folders (import the export's folder)"
        )));
    };
    let mut rows = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: Value =
            serde_json::from_str(line).map_err(|e| input(format!("{at} line {}: {e}", i + 1)))?;
        rows.push(row_from_json(
            &v,
            &lab,
            &host,
            &format!("{at} line {}", i + 1),
            &lim,
        )?);
    }
    Ok(rows)
}

fn importable(p: &Path) -> bool {
    p.extension()
        .is_some_and(|e| e == "jsonl" || e == "json" || e == "parquet")
}

/// The files to import under `dir` (canonical `root`): symbolic links are
/// followed only when they stay inside the folder, each folder is walked
/// once, each file is read once, and special files with an importable
/// name are refused.
fn files_under(
    root: &Path,
    dir: &Path,
    depth: usize,
    seen: &mut std::collections::HashSet<PathBuf>,
    out: &mut Vec<PathBuf>,
) -> Result<(), StoreError> {
    let io = |p: &Path, e: std::io::Error| input(format!("{}: {e}", shown_path(p)));
    if depth > MAX_DEPTH {
        return Err(input(format!(
            "{}: folders nested more than {MAX_DEPTH} deep",
            shown_path(dir)
        )));
    }
    let canon = dir.canonicalize().map_err(|e| io(dir, e))?;
    if !seen.insert(canon) {
        return Ok(());
    }
    let rd = std::fs::read_dir(dir).map_err(|e| io(dir, e))?;
    let mut entries = Vec::new();
    for e in rd {
        let e = e.map_err(|e| io(dir, e))?;
        let t = e.file_type().map_err(|err| io(&e.path(), err))?;
        entries.push((e.path(), t));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (p, t) in entries {
        let t = if t.is_symlink() {
            let target = p.canonicalize().map_err(|e| io(&p, e))?;
            if !target.starts_with(root) {
                return Err(input(format!(
                    "{} is a symbolic link to {}, outside {}: an import does not follow links out of its folder (import the target itself, or remove the link)",
                    shown_path(&p),
                    shown_path(&target),
                    shown_path(root)
                )));
            }
            std::fs::metadata(&target)
                .map_err(|e| io(&p, e))?
                .file_type()
        } else {
            t
        };
        if t.is_dir() {
            files_under(root, &p, depth + 1, seen, out)?;
        } else if importable(&p) {
            regular(&p, &t)?;
            // A file reached twice (through a link) is read once.
            if seen.insert(p.canonicalize().map_err(|e| io(&p, e))?) {
                out.push(p);
            }
        }
    }
    Ok(())
}

/// Merges a folder (an export, or folders of result files) or one file
/// into the store, within the default [`ImportLimits`].
pub fn import(store: &mut Store, path: &Path) -> Result<ImportSummary, StoreError> {
    import_with(store, path, &ImportLimits::default())
}

/// Merges a folder (an export, or folders of result files) or one file
/// into the store. Every file is read and checked (against `lim`, the
/// start times, the shape of the records) before anything is written, so
/// a bad file leaves the store as it was. Problems with the input are
/// [`StoreError::Input`].
pub fn import_with(
    store: &mut Store,
    path: &Path,
    lim: &ImportLimits,
) -> Result<ImportSummary, StoreError> {
    let meta = std::fs::metadata(path).map_err(|e| input(format!("{}: {e}", shown_path(path))))?;
    let mut files = Vec::new();
    if meta.is_dir() {
        let root = path
            .canonicalize()
            .map_err(|e| input(format!("{}: {e}", shown_path(path))))?;
        files_under(&root, path, 0, &mut Default::default(), &mut files)?;
        if files.is_empty() {
            return Err(input(format!(
                "{}: no .jsonl, .json or .parquet file in it",
                shown_path(path)
            )));
        }
    } else {
        regular(path, &meta.file_type())?;
        files.push(path.to_owned());
    }
    let mut budget = Budget { lim: *lim, used: 0 };
    let mut runs: Vec<(RunMeta, Vec<Record>)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for f in &files {
        for row in rows_of_file(f, &mut budget)? {
            match index.get(&row.run.run_id) {
                Some(&i) => runs[i].1.push(row.record),
                None => {
                    index.insert(row.run.run_id.clone(), runs.len());
                    runs.push((row.run, vec![row.record]));
                }
            }
        }
    }
    let mut sum = ImportSummary::default();
    for (meta, recs) in runs {
        if store.has_run_at(&meta.host, &meta.started_utc)? || !store.append(&meta, &recs)? {
            sum.runs_skipped += 1;
        } else {
            sum.runs_added += 1;
            sum.records_added += recs.len();
        }
    }
    Ok(sum)
}
