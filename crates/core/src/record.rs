//! Results: one serde [`Record`] type (schema_version, lab, test, params,
//! metrics, environment) and the exporters that write it as a terminal
//! table, CSV, one JSON document or JSON Lines.
//!
//! Invariants: every format carries the same fields (nested metric objects
//! such as a latency [`Summary`](crate::stats::Summary) are flattened to
//! dotted column names in table and CSV); JSON never contains NaN or
//! infinity (serde_json writes them as `null`); the committed schema in
//! `schema/commbench.schema.json` describes both the document and the line
//! shape, and a test validates real output against it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::{self, Write};

/// Version of the record layout; bump on an incompatible change. 2: a
/// metric measured over repeats carries `<key>_lo`, `<key>_hi`, `<key>_n`
/// and `<key>_samples` beside its value (`core::estimate`); records of
/// version 1 still load, their intervals unknown.
pub const SCHEMA_VERSION: u32 = 2;

/// One measured result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// The record format's version ([`SCHEMA_VERSION`] when written).
    pub schema_version: u32,
    /// Which lab produced it (`ipc`, `pcap`, `timer`, ...).
    pub lab: String,
    /// Which test within the lab (`reqres`, `rdtsc`, ...).
    pub test: String,
    /// What was asked for.
    pub params: Map<String, Value>,
    /// What was measured.
    pub metrics: Map<String, Value>,
    /// The environment fingerprint, attached at export time (JSON, JSONL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Value>,
}

/// Converts to a JSON value, mapping non-finite floats to null.
pub fn to_value<T: Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

impl Record {
    /// An empty record of `lab`'s test `test`.
    pub fn new(lab: &str, test: &str) -> Self {
        Record {
            schema_version: SCHEMA_VERSION,
            lab: lab.to_owned(),
            test: test.to_owned(),
            params: Map::new(),
            metrics: Map::new(),
            environment: None,
        }
    }
    /// Adds a parameter (builder style).
    pub fn param<T: Serialize>(mut self, k: &str, v: T) -> Self {
        self.push_param(k, v);
        self
    }
    /// Adds a metric (builder style).
    pub fn metric<T: Serialize>(mut self, k: &str, v: T) -> Self {
        self.push_metric(k, v);
        self
    }
    /// Adds a parameter.
    pub fn push_param<T: Serialize>(&mut self, k: &str, v: T) {
        self.params.insert(k.to_owned(), to_value(v));
    }
    /// Adds a metric.
    pub fn push_metric<T: Serialize>(&mut self, k: &str, v: T) {
        self.metrics.insert(k.to_owned(), to_value(v));
    }
    /// A metric as f64, looked up by a dotted path (`latency_ns.p50`).
    pub fn metric_f64(&self, path: &str) -> Option<f64> {
        let mut parts = path.split('.');
        let mut v = self.metrics.get(parts.next()?)?;
        for p in parts {
            v = v.get(p)?;
        }
        v.as_f64()
    }
}

/// The leaves (numbers, strings, booleans, nulls) of the values, counted
/// up to just past `max` (nested objects and arrays count their leaves):
/// the bound on how many parameters and metrics a record read from a file
/// may hold.
pub fn count_leaves<'a>(values: impl IntoIterator<Item = &'a Value>, max: usize) -> usize {
    fn walk(v: &Value, n: &mut usize, max: usize) {
        if *n > max {
            return;
        }
        match v {
            Value::Object(m) => m.values().for_each(|x| walk(x, n, max)),
            Value::Array(a) => a.iter().for_each(|x| walk(x, n, max)),
            _ => *n += 1,
        }
    }
    let mut n = 0;
    for v in values {
        walk(v, &mut n, max);
    }
    n
}

/// Bytes `v` takes as JSON, without writing it anywhere.
pub fn json_len<T: Serialize + ?Sized>(v: &T) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// Receives progress messages.
pub type ProgressSink = Box<dyn FnMut(&str) + Send>;

/// Collects the records of a run and relays progress messages.
#[derive(Default)]
pub struct Recorder {
    records: Vec<Record>,
    sink: Option<ProgressSink>,
}

impl Recorder {
    /// An empty recorder whose progress messages go nowhere.
    pub fn new() -> Self {
        Self::default()
    }
    /// Where progress messages go (the CLI installs a progress bar; the
    /// default discards them).
    pub fn set_progress_sink(&mut self, f: ProgressSink) {
        self.sink = Some(f);
    }
    /// A short progress message ("ipc: shm 128 B").
    pub fn progress(&mut self, msg: &str) {
        if let Some(f) = self.sink.as_mut() {
            f(msg);
        }
    }
    /// Keeps a record.
    pub fn push(&mut self, r: Record) {
        self.records.push(r);
    }
    /// The records kept so far.
    pub fn records(&self) -> &[Record] {
        &self.records
    }
    /// The records kept from index `start` on, to complete (a run's
    /// conditions written once it has ended: `rusage::Conditions::stamp`).
    pub fn records_since_mut(&mut self, start: usize) -> &mut [Record] {
        let start = start.min(self.records.len());
        &mut self.records[start..]
    }
    /// Takes the records kept so far, leaving none.
    pub fn take(&mut self) -> Vec<Record> {
        std::mem::take(&mut self.records)
    }
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// An aligned text table (the default).
    #[default]
    Table,
    /// CSV, one row per record.
    Csv,
    /// One JSON document with the environment and every record.
    Json,
    /// JSON Lines: one record per line, each with the environment.
    Jsonl,
}

/// A format name [`Format`] does not know (the name given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format '{0}': use table, csv, json or jsonl")]
pub struct UnknownFormat(pub String);

impl std::str::FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, UnknownFormat> {
        match s {
            "table" => Ok(Format::Table),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            "jsonl" => Ok(Format::Jsonl),
            _ => Err(UnknownFormat(s.to_owned())),
        }
    }
}

/// What every exporter receives.
pub struct Document<'a> {
    /// The records to write.
    pub records: &'a [Record],
    /// Environment fingerprint (JSON value of [`crate::env::Fingerprint`]).
    pub environment: &'a Value,
}

/// Writes a document in one format (hyperfine's `Exporter`).
pub trait Exporter {
    /// Writes `doc` to `out`.
    fn export(&self, doc: &Document, out: &mut dyn Write) -> io::Result<()>;
}

/// The exporter for a format.
pub fn exporter(format: Format) -> Box<dyn Exporter> {
    match format {
        Format::Table => Box::new(TableExporter),
        Format::Csv => Box::new(CsvExporter),
        Format::Json => Box::new(JsonExporter),
        Format::Jsonl => Box::new(JsonlExporter),
    }
}

/// Convenience: export `records` in `format`.
pub fn export(
    records: &[Record],
    format: Format,
    environment: &Value,
    out: &mut dyn Write,
) -> io::Result<()> {
    exporter(format).export(
        &Document {
            records,
            environment,
        },
        out,
    )
}

/// Flattens nested objects into dotted keys, in order.
pub fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        _ => out.push((prefix.to_owned(), v.clone())),
    }
}

fn flat_row(r: &Record) -> Vec<(String, Value)> {
    let mut out = vec![
        ("lab".to_owned(), Value::from(r.lab.clone())),
        ("test".to_owned(), Value::from(r.test.clone())),
    ];
    for (k, v) in &r.params {
        flatten(k, v, &mut out);
    }
    for (k, v) in &r.metrics {
        flatten(k, v, &mut out);
    }
    out
}

/// Union of columns over rows, in first-seen order.
fn columns(rows: &[Vec<(String, Value)>]) -> Vec<String> {
    let mut cols: Vec<String> = Vec::new();
    for row in rows {
        for (k, _) in row {
            if !cols.iter().any(|c| c == k) {
                cols.push(k.clone());
            }
        }
    }
    cols
}

/// Formats a number for humans: integers as integers, others with four
/// significant digits (at least one decimal below 1000).
pub fn human_number(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    if x == x.trunc() && x.abs() < 1e15 {
        return format!("{}", x as i64);
    }
    let a = x.abs();
    let decimals = if a >= 1000.0 {
        1
    } else if a >= 100.0 {
        2
    } else if a >= 10.0 {
        3
    } else if a >= 1.0 {
        4
    } else if a >= 0.01 {
        5
    } else {
        return format!("{x:.3e}");
    };
    let s = format!("{x:.decimals$}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// Text that is safe to print on a terminal: control characters (C0, DEL
/// and C1, which start escape sequences) become `\u{1b}`-style escapes, so
/// that a host name or parameter taken from an imported file cannot move
/// the cursor, retitle the window or hide output. Borrowed when clean.
pub fn escape_control(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn cell_text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.to_string(),
            (_, Some(u)) => u.to_string(),
            _ => human_number(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => escape_control(s).into_owned(),
        other => escape_control(&other.to_string()).into_owned(),
    }
}

/// Aligned text: a key/value list for one record, a table for several.
pub struct TableExporter;

impl Exporter for TableExporter {
    fn export(&self, doc: &Document, out: &mut dyn Write) -> io::Result<()> {
        // One table per run of records with the same (lab, test), so that
        // records of different shapes do not share a sparse, wide table.
        let mut first = true;
        let mut i = 0;
        while i < doc.records.len() {
            let (lab, test) = (&doc.records[i].lab, &doc.records[i].test);
            let mut j = i;
            while j < doc.records.len()
                && &doc.records[j].lab == lab
                && &doc.records[j].test == test
            {
                j += 1;
            }
            if !first {
                writeln!(out)?;
            }
            first = false;
            write_table(&doc.records[i..j], out)?;
            i = j;
        }
        Ok(())
    }
}

/// The most characters a table cell shows; longer text is cut with `…`
/// (a stored string of any length must not break the layout, and
/// formatting widths past 65,535 panicked). CSV and JSON keep every byte.
pub const MAX_CELL_CHARS: usize = 120;

/// A cell as shown in a table: control characters escaped, then cut to
/// [`MAX_CELL_CHARS`] characters (never splitting one).
fn display_cell(s: &str) -> String {
    let s = escape_control(s);
    if s.char_indices().nth(MAX_CELL_CHARS).is_none() {
        return s.into_owned();
    }
    let cut = s
        .char_indices()
        .nth(MAX_CELL_CHARS - 1)
        .map_or(s.len(), |(i, _)| i);
    format!("{}…", &s[..cut])
}

/// Lays out a borderless table: columns two spaces apart, each aligned as
/// `aligns` says, then written without trailing blanks.
fn write_borderless(
    mut t: comfy_table::Table,
    aligns: &[comfy_table::CellAlignment],
    out: &mut dyn Write,
) -> io::Result<()> {
    t.load_preset(comfy_table::presets::NOTHING)
        .set_content_arrangement(comfy_table::ContentArrangement::Disabled);
    let last = aligns.len().saturating_sub(1);
    for (i, c) in t.column_iter_mut().enumerate() {
        c.set_padding((0, if i >= last { 0 } else { 2 }));
        if let Some(a) = aligns.get(i) {
            c.set_cell_alignment(*a);
        }
    }
    for line in t.lines() {
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn write_table(records: &[Record], out: &mut dyn Write) -> io::Result<()> {
    write_rows(records.iter().map(flat_row).collect(), true, out)
}

/// A titled table of records whose `lab` and `test` are a command's own
/// (`history`'s runs and trends), not a lab's: the title names what the
/// rows are and the columns start with their parameters, never with "lab
/// test" above "history run".
pub fn write_titled_table(title: &str, records: &[Record], out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{title}")?;
    let rows: Vec<_> = records
        .iter()
        .map(|r| flat_row(r).into_iter().skip(2).collect())
        .collect();
    write_rows(rows, false, out)
}

/// Rows as a table (one row as a key/value list when `one_as_list`).
fn write_rows(
    rows: Vec<Vec<(String, Value)>>,
    one_as_list: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    use comfy_table::CellAlignment::{Left, Right};
    if rows.is_empty() {
        return Ok(());
    }
    let mut t = comfy_table::Table::new();
    if rows.len() == 1 && one_as_list {
        // One record: a key/value list.
        t.add_rows(
            rows[0]
                .iter()
                .map(|(k, v)| vec![display_cell(k), display_cell(&cell_text(v))]),
        );
        return write_borderless(t, &[Left, Left], out);
    }
    let cols = columns(&rows);
    let cells: Vec<Vec<(String, bool)>> = rows
        .iter()
        .map(|row| {
            cols.iter()
                .map(|c| {
                    row.iter()
                        .find(|(k, _)| k == c)
                        .map(|(_, v)| (display_cell(&cell_text(v)), v.is_string()))
                        .unwrap_or_default()
                })
                .collect()
        })
        .collect();
    // Text columns align left, numbers right.
    let aligns: Vec<_> = (0..cols.len())
        .map(|i| {
            if cells.iter().any(|r| r[i].1) {
                Left
            } else {
                Right
            }
        })
        .collect();
    t.set_header(cols.iter().map(|c| display_cell(c)));
    t.add_rows(
        cells
            .into_iter()
            .map(|r| r.into_iter().map(|(s, _)| s).collect::<Vec<_>>()),
    );
    write_borderless(t, &aligns, out)
}

/// A CSV field as written: control characters escaped (the file may be
/// printed on a terminal); quoting is the csv crate's (RFC 4180).
fn csv_text(s: &str) -> String {
    escape_control(s).into_owned()
}

/// CSV with a header of flattened column names; numbers unrounded, null empty.
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn export(&self, doc: &Document, out: &mut dyn Write) -> io::Result<()> {
        let rows: Vec<_> = doc.records.iter().map(flat_row).collect();
        let cols = columns(&rows);
        let mut w = csv::WriterBuilder::new()
            .flexible(false)
            .from_writer(&mut *out);
        w.write_record(cols.iter().map(|c| csv_text(c)))?;
        for row in &rows {
            w.write_record(cols.iter().map(|c| {
                match row.iter().find(|(k, _)| k == c).map(|(_, v)| v) {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => csv_text(s),
                    Some(v) => csv_text(&v.to_string()),
                }
            }))?;
        }
        w.flush()
    }
}

/// One JSON document: `{schema_version, tool, environment, records}`.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn export(&self, doc: &Document, out: &mut dyn Write) -> io::Result<()> {
        let v = serde_json::json!({
            "schema_version": SCHEMA_VERSION,
            "tool": "commbench",
            "environment": doc.environment,
            "records": doc.records,
        });
        serde_json::to_writer_pretty(&mut *out, &v)?;
        writeln!(out)
    }
}

/// One self-contained record per line, each with the environment.
pub struct JsonlExporter;

impl Exporter for JsonlExporter {
    fn export(&self, doc: &Document, out: &mut dyn Write) -> io::Result<()> {
        for r in doc.records {
            let mut r = r.clone();
            r.environment = Some(doc.environment.clone());
            serde_json::to_writer(&mut *out, &r)?;
            writeln!(out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record> {
        vec![
            Record::new("timer", "rdtsc")
                .param("samples", 1000)
                .metric("ns", 9.123456)
                .metric("ticks", 1.0)
                .metric("nan", f64::NAN)
                .metric("lat", serde_json::json!({"p50": 1.5, "p99": 3})),
            Record::new("timer", "clock_gettime, raw")
                .param("samples", 1000)
                .metric("ns", 21.0),
        ]
    }

    fn render(f: Format) -> String {
        let mut out = Vec::new();
        let env = serde_json::json!({"cpu_model": "test"});
        export(&sample(), f, &env, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn nan_is_null() {
        let j = render(Format::Json);
        assert!(!j.contains("NaN"));
        assert!(j.contains("\"nan\": null"));
    }

    #[test]
    fn snapshot_table() {
        insta::assert_snapshot!(render(Format::Table));
    }

    #[test]
    fn snapshot_csv() {
        insta::assert_snapshot!(render(Format::Csv));
    }

    #[test]
    fn snapshot_jsonl() {
        insta::assert_snapshot!(render(Format::Jsonl));
    }

    #[test]
    fn snapshot_json() {
        insta::assert_snapshot!(render(Format::Json));
    }

    #[test]
    fn snapshot_table_rows() {
        // Several records of one test: one aligned table, text left,
        // numbers right, a long cell cut.
        let recs = vec![
            Record::new("ipc", "reqres")
                .param("transport", "shm")
                .param("msg_len", 64)
                .metric("msgs_per_s", 1234567.891)
                .metric("note", "ok"),
            Record::new("ipc", "reqres")
                .param("transport", "unix-stream")
                .param("msg_len", 65536)
                .metric("msgs_per_s", 98.7)
                .metric("note", "x".repeat(200)),
        ];
        let mut out = Vec::new();
        export(&recs, Format::Table, &Value::Null, &mut out).unwrap();
        insta::assert_snapshot!(String::from_utf8(out).unwrap());
    }

    #[test]
    fn long_table_cells_are_cut_and_never_panic() {
        // Regression: a string cell of 65,536 characters or more made
        // `history` and `compare --all` abort ("Formatting argument out of
        // range"), at every later call too.
        let long = "é".repeat(70_000);
        let one = Record::new("l", "t").param("s", &long);
        let two = [one.clone(), one.clone().param("n", 1)];
        for recs in [&[one.clone()][..], &two[..]] {
            let mut out = Vec::new();
            export(recs, Format::Table, &Value::Null, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(text.contains('…'), "{text}");
            assert!(text.lines().all(|l| l.chars().count() < 400), "{text}");
        }
        // CSV and JSON keep it whole.
        let mut out = Vec::new();
        export(&two, Format::Csv, &Value::Null, &mut out).unwrap();
        assert!(String::from_utf8(out).unwrap().contains(&long));
        // Very wide tables too (thousands of columns).
        let wide: Vec<Record> = (0..2)
            .map(|k| {
                let mut r = Record::new("w", "t");
                for i in 0..2000 {
                    r.push_metric(&format!("m{i}"), "y".repeat(150 + k));
                }
                r
            })
            .collect();
        let mut out = Vec::new();
        export(&wide, Format::Table, &Value::Null, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 3);
    }

    #[test]
    fn control_characters_are_escaped_in_table_and_csv() {
        let recs = vec![
            Record::new("h", "run").param("host", "a\u{1b}]0;x\u{7}\n\u{9b}"),
            Record::new("h", "run").param("host", "b"),
        ];
        for f in [Format::Table, Format::Csv] {
            let mut out = Vec::new();
            export(&recs, f, &Value::Null, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(
                !text.chars().any(|c| c.is_control() && c != '\n'),
                "{text:?}"
            );
            assert!(text.contains("a\\u{1b}]0;x\\u{7}\\u{a}\\u{9b}"), "{text}");
        }
        let mut out = Vec::new();
        export(&recs, Format::Json, &Value::Null, &mut out).unwrap();
        let back: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            back["records"][0]["params"]["host"],
            "a\u{1b}]0;x\u{7}\n\u{9b}"
        );
    }

    #[test]
    fn metric_path_lookup() {
        let r = &sample()[0];
        assert_eq!(r.metric_f64("lat.p50"), Some(1.5));
        assert_eq!(r.metric_f64("lat.p75"), None);
    }

    #[test]
    fn human_numbers() {
        assert_eq!(human_number(14880952.38), "14880952.4");
        assert_eq!(human_number(67.2), "67.2");
        assert_eq!(human_number(134.4), "134.4");
        assert_eq!(human_number(14.88), "14.88");
        assert_eq!(human_number(3.0), "3");
        assert_eq!(human_number(f64::NAN), "-");
    }
}
