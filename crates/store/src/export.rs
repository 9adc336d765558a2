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

use crate::{Filter, RunMeta, Store, StoreError};
use commbench_core::record::Record;
use serde_json::{json, Map, Value};
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

/// One exported row: a record with the run it belongs to.
#[derive(Debug, Clone)]
pub struct Row {
    pub run: RunMeta,
    pub record: Record,
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
            "this commbench was built without Parquet: use jsonl, or build with `--features parquet`"
                .into(),
        ));
    }
    let io = |what: &str, p: &Path, e: std::io::Error| {
        invalid(format!("cannot {what} {}: {e}", p.display()))
    };
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
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io("create", &path, e))?;
        match format {
            ExportFormat::Jsonl => write_jsonl(file, rows).map_err(|e| io("write", &path, e))?,
            ExportFormat::Parquet => write_parquet(file, rows, &path)?,
        }
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

/// The text columns of a Parquet row, in schema order after
/// `started_unix` (an INT64).
#[cfg(feature = "parquet")]
const TEXT_COLUMNS: [&str; 10] = [
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
    for c in TEXT_COLUMNS {
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
    for c in TEXT_COLUMNS {
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
        "this commbench was built without Parquet: build with `--features parquet`".into(),
    ))
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

fn obj(v: Option<&Value>) -> Map<String, Value> {
    match v {
        Some(Value::Object(m)) => m.clone(),
        // Parquet keeps JSON as text.
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_default(),
        _ => Map::new(),
    }
}

/// A row of an export file, given the partition values of its folder.
fn row_from_json(v: &Value, lab: &str, host: &str, at: &str) -> Result<Row, StoreError> {
    let s = |k: &str| -> Result<String, StoreError> {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| invalid(format!("{at}: no text field '{k}'")))
    };
    let run_id = s("run_id")?;
    if run_id.is_empty() || !run_id.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(invalid(format!("{at}: run_id '{run_id}' is not hex")));
    }
    let json_field = |k: &str| match v.get(k) {
        Some(Value::String(t)) => serde_json::from_str(t).unwrap_or(Value::Null),
        Some(x) => x.clone(),
        None => Value::Null,
    };
    let command_line = json_field("command_line")
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut record = Record::new(lab, &s("test")?);
    record.params = obj(v.get("params"));
    record.metrics = obj(v.get("metrics"));
    Ok(Row {
        run: RunMeta {
            run_id: run_id.to_ascii_lowercase(),
            started_utc: s("started_utc")?,
            started_unix: v
                .get("started_unix")
                .and_then(Value::as_i64)
                .ok_or_else(|| invalid(format!("{at}: no integer 'started_unix'")))?,
            host: host.to_owned(),
            git_sha: s("git_sha")?,
            build_profile: s("build_profile")?,
            command_line,
            environment: json_field("environment"),
        },
        record,
    })
}

#[cfg(feature = "parquet")]
fn read_parquet(path: &Path, lab: &str, host: &str) -> Result<Vec<Row>, StoreError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let at = path.display().to_string();
    let perr = |e: parquet::errors::ParquetError| invalid(format!("{at}: {e}"));
    let file = std::fs::File::open(path).map_err(|e| invalid(format!("{at}: {e}")))?;
    let reader = SerializedFileReader::new(file).map_err(perr)?;
    let mut out = Vec::new();
    for (i, row) in reader.get_row_iter(None).map_err(perr)?.enumerate() {
        let row = row.map_err(perr)?;
        let mut m = Map::new();
        for (name, field) in row.get_column_iter() {
            let v = match field {
                Field::Str(s) => Value::from(s.clone()),
                Field::Long(x) => Value::from(*x),
                Field::Int(x) => Value::from(*x),
                _ => Value::Null,
            };
            m.insert(name.clone(), v);
        }
        out.push(row_from_json(
            &Value::Object(m),
            lab,
            host,
            &format!("{at} row {}", i + 1),
        )?);
    }
    Ok(out)
}

#[cfg(not(feature = "parquet"))]
fn read_parquet(path: &Path, _: &str, _: &str) -> Result<Vec<Row>, StoreError> {
    Err(invalid(format!(
        "{}: this commbench was built without Parquet: build with `--features parquet`",
        path.display()
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
fn rows_of_results(text: &str, at: &str) -> Result<Vec<Row>, StoreError> {
    let mut recs: Vec<Record> = Vec::new();
    let trimmed = text.trim_start();
    let doc = serde_json::from_str::<Value>(trimmed).ok();
    if let Some(records) = doc.as_ref().and_then(|d| d.get("records")) {
        let env = doc.as_ref().and_then(|d| d.get("environment")).cloned();
        for r in records.as_array().into_iter().flatten() {
            let mut r: Record = serde_json::from_value(r.clone())
                .map_err(|e| invalid(format!("{at}: records: {e}")))?;
            r.environment = r.environment.or_else(|| env.clone());
            recs.push(r);
        }
    } else {
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            recs.push(
                serde_json::from_str(line)
                    .map_err(|e| invalid(format!("{at} line {}: {e}", i + 1)))?,
            );
        }
    }
    let mut metas: Vec<(Value, RunMeta)> = Vec::new();
    let mut rows = Vec::new();
    for mut r in recs {
        let env = r.environment.take().unwrap_or(Value::Null);
        if env.get("started_utc").is_none() {
            return Err(invalid(format!(
                "{at}: a record without its environment (start time, host): export with --format json or jsonl"
            )));
        }
        let run = match metas.iter().find(|(e, _)| *e == env) {
            Some((_, m)) => m.clone(),
            None => {
                let mut m = RunMeta::from_environment(&env)?;
                m.run_id = derived_run_id(&env);
                metas.push((env, m.clone()));
                m
            }
        };
        rows.push(Row { run, record: r });
    }
    Ok(rows)
}

/// The rows of one file: an export part (its folder names lab and host),
/// or a plain result file.
fn rows_of_file(path: &Path) -> Result<Vec<Row>, StoreError> {
    let at = path.display().to_string();
    let (lab, host) = partitions(path);
    let is_parquet = path.extension().is_some_and(|e| e == "parquet");
    if is_parquet {
        let (Some(lab), Some(host)) = (lab, host) else {
            return Err(invalid(format!(
                "{at}: a Parquet file outside lab=…/host=… folders (import the export's folder)"
            )));
        };
        return read_parquet(path, &lab, &host);
    }
    let text = std::fs::read_to_string(path).map_err(|e| invalid(format!("{at}: {e}")))?;
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let is_export_row = serde_json::from_str::<Value>(first)
        .ok()
        .is_some_and(|v| v.get("run_id").is_some() && v.get("lab").is_none());
    if !is_export_row {
        return rows_of_results(&text, &at);
    }
    let (Some(lab), Some(host)) = (lab, host) else {
        return Err(invalid(format!(
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
            serde_json::from_str(line).map_err(|e| invalid(format!("{at} line {}: {e}", i + 1)))?;
        rows.push(row_from_json(
            &v,
            &lab,
            &host,
            &format!("{at} line {}", i + 1),
        )?);
    }
    Ok(rows)
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), StoreError> {
    let rd = std::fs::read_dir(dir).map_err(|e| invalid(format!("{}: {e}", dir.display())))?;
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, out)?;
        } else if p
            .extension()
            .is_some_and(|e| e == "jsonl" || e == "json" || e == "parquet")
        {
            out.push(p);
        }
    }
    Ok(())
}

/// Merges a folder (an export, or folders of result files) or one file
/// into the store. Every file is read before anything is written, so a
/// bad file leaves the store as it was.
pub fn import(store: &mut Store, path: &Path) -> Result<ImportSummary, StoreError> {
    let mut files = Vec::new();
    if path.is_dir() {
        files_under(path, &mut files)?;
        if files.is_empty() {
            return Err(invalid(format!(
                "{}: no .jsonl, .json or .parquet file in it",
                path.display()
            )));
        }
    } else {
        files.push(path.to_owned());
    }
    let mut runs: Vec<(RunMeta, Vec<Record>)> = Vec::new();
    for f in &files {
        for row in rows_of_file(f)? {
            match runs.iter_mut().find(|(m, _)| m.run_id == row.run.run_id) {
                Some((_, v)) => v.push(row.record),
                None => runs.push((row.run, vec![row.record])),
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
