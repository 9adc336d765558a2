//! Reading a result file back: a JSON document (`--format json`, its
//! records under `records`) or JSON Lines (`--format jsonl`, a suite's
//! results.jsonl). Invariants: records keep their file order; in JSON Lines
//! the first record's environment becomes the run's and every record's own
//! copy is dropped; anything else is a [`ReportError::Format`] naming the
//! file, never an empty run.
//!
//! Result files travel between hosts, so a file is read within
//! [`LoadLimits`] — the bounds and numbers `history --import` applies
//! (`commbench_store::ImportLimits`): the whole file, one line, one record
//! and the parameters and metrics of one record. Anything but a regular
//! file (a FIFO, a device such as `/dev/zero`, a socket, a folder) is
//! refused before it is read, and the file is opened without blocking, so
//! that a FIFO swapped in after the check cannot hang the open.

use crate::ReportError;
use commbench_core::record::Record;
use serde_json::Value;
use std::path::Path;

/// A loaded result file: its records and the environment it was measured in.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: String,
    pub records: Vec<Record>,
    pub environment: Option<Value>,
}

/// Bounds on what [`load_with`] reads; the defaults are those of the
/// store's imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadLimits {
    /// The whole file, in bytes.
    pub max_bytes: u64,
    /// One line of the file.
    pub max_line_bytes: usize,
    /// One record as JSON (parameters, metrics and environment).
    pub max_record_bytes: usize,
    /// Parameters and metrics of one record, nested values counted each.
    pub max_metrics: usize,
}

impl Default for LoadLimits {
    fn default() -> Self {
        LoadLimits {
            max_bytes: 256 << 20,
            max_line_bytes: 4 << 20,
            max_record_bytes: 4 << 20,
            max_metrics: 10_000,
        }
    }
}

/// Reads a JSON document (`--format json`) or JSON Lines (`--format jsonl`)
/// within the default [`LoadLimits`].
pub fn load(path: &Path) -> Result<Loaded, ReportError> {
    load_with(path, &LoadLimits::default())
}

/// What a file type is, for a message.
fn file_kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The text of a regular file of at most `lim.max_bytes`.
fn read_bounded(path: &Path, p: &str, lim: &LoadLimits) -> Result<String, ReportError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |err: std::io::Error| ReportError::Io {
        path: p.to_owned(),
        err,
    };
    let regular = |t: std::fs::FileType| {
        if t.is_file() {
            Ok(())
        } else {
            Err(ReportError::Input {
                path: p.to_owned(),
                reason: format!(
                    "it is {}: report reads regular files only (give a result file written with --format json or jsonl, or a suite's results.jsonl)",
                    file_kind(t)
                ),
            })
        }
    };
    regular(std::fs::metadata(path).map_err(io)?.file_type())?;
    // Non-blocking, so that a FIFO swapped in after the check does not
    // hang the open; checked again on the open file.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let m = f.metadata().map_err(io)?;
    regular(m.file_type())?;
    let too_large = || {
        ReportError::Input {
        path: p.to_owned(),
        reason: format!(
            "larger than {} bytes, more than a result file holds (split it, or give one run's file)",
            lim.max_bytes
        ),
    }
    };
    if m.len() > lim.max_bytes {
        return Err(too_large());
    }
    let mut buf = Vec::with_capacity(m.len() as usize);
    // The file may grow while it is read: never past the bound.
    f.take(lim.max_bytes + 1)
        .read_to_end(&mut buf)
        .map_err(io)?;
    if buf.len() as u64 > lim.max_bytes {
        return Err(too_large());
    }
    String::from_utf8(buf).map_err(|e| ReportError::Format {
        path: p.to_owned(),
        reason: format!("not UTF-8 text ({e})"),
    })
}

/// A record within the metric and size bounds (`at` names it).
fn check_record(r: &Record, at: &str, p: &str, lim: &LoadLimits) -> Result<(), ReportError> {
    let n = commbench_core::record::count_leaves(
        r.params.values().chain(r.metrics.values()),
        lim.max_metrics,
    );
    let bound = |reason: String| ReportError::Input {
        path: p.to_owned(),
        reason,
    };
    if n > lim.max_metrics {
        return Err(bound(format!(
            "{at}: more than {} parameters and metrics in one record (commbench writes far fewer; is this a result file?)",
            lim.max_metrics
        )));
    }
    let bytes = commbench_core::record::json_len(r);
    if bytes > lim.max_record_bytes {
        return Err(bound(format!(
            "{at}: a record of {bytes} bytes, more than {} (commbench writes far smaller ones; is this a result file?)",
            lim.max_record_bytes
        )));
    }
    Ok(())
}

/// A result document (`--format json`) as it is written.
#[derive(serde::Deserialize)]
struct Document {
    records: Vec<Record>,
    /// Present, even as null, is Some (as the document's value would
    /// give it).
    #[serde(default, deserialize_with = "present")]
    environment: Option<Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(d).map(Some)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "an object",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
        Value::Array(_) => "an array",
    }
}

/// [`load`] within the given bounds. Messages show the path and any text
/// taken from the file with control characters escaped, so that a file
/// name or value cannot drive the terminal.
pub fn load_with(path: &Path, lim: &LoadLimits) -> Result<Loaded, ReportError> {
    let shown = |s: String| commbench_core::record::escape_control(&s).into_owned();
    load_inner(path, lim).map_err(|e| match e {
        ReportError::Format { path, reason } => ReportError::Format {
            path: shown(path),
            reason: shown(reason),
        },
        ReportError::Input { path, reason } => ReportError::Input {
            path: shown(path),
            reason: shown(reason),
        },
        ReportError::Io { path, err } => ReportError::Io {
            path: shown(path),
            err,
        },
        e => e,
    })
}

fn load_inner(path: &Path, lim: &LoadLimits) -> Result<Loaded, ReportError> {
    let p = path.display().to_string();
    let text = read_bounded(path, &p, lim)?;
    let fmt_err = |reason: String| ReportError::Format {
        path: p.clone(),
        reason,
    };
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(fmt_err("the file is empty".into()));
    }
    for (i, line) in text.split('\n').enumerate() {
        if line.len() > lim.max_line_bytes {
            return Err(ReportError::Input {
                path: p.clone(),
                reason: format!(
                    "line {}: {} bytes, more than {} in a line (commbench writes one record per line, far shorter; is this a result file?)",
                    i + 1,
                    line.len(),
                    lim.max_line_bytes
                ),
            });
        }
    }
    // A JSON document spans lines; JSON Lines has one record per line.
    // A well-formed document is read straight into records; anything else
    // goes through a JSON value for the message that says what is wrong
    // (reading every document through a value first, then each record out
    // of it, was a third of compare's time at 100,000 records).
    if let Ok(d) = serde_json::from_str::<Document>(trimmed) {
        if !d.records.is_empty() {
            for (i, r) in d.records.iter().enumerate() {
                check_record(r, &format!("records[{i}]"), &p, lim)?;
            }
            return Ok(Loaded {
                path: p,
                records: d.records,
                environment: d.environment,
            });
        }
    }
    let mut doc = serde_json::from_str::<Value>(trimmed).ok();
    if let Some(recs) = doc.as_mut().and_then(|d| d.get_mut("records")) {
        let Some(list) = recs.as_array_mut() else {
            return Err(fmt_err(format!(
                "\"records\" is {}, not an array of records",
                kind_of(recs)
            )));
        };
        // Taken out of the document, not copied: a copy of each record
        // before reading it was a tenth of compare's time.
        let list = std::mem::take(list);
        let mut records = Vec::with_capacity(list.len());
        for (i, r) in list.into_iter().enumerate() {
            let r: Record =
                serde_json::from_value(r).map_err(|e| fmt_err(format!("records[{i}]: {e}")))?;
            check_record(&r, &format!("records[{i}]"), &p, lim)?;
            records.push(r);
        }
        if records.is_empty() {
            return Err(fmt_err("\"records\" is empty: no records in it".into()));
        }
        return Ok(Loaded {
            path: p,
            records,
            environment: doc
                .as_mut()
                .and_then(|d| d.get_mut("environment"))
                .map(Value::take),
        });
    }
    let mut records = Vec::new();
    let mut environment = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut r: Record =
            serde_json::from_str(line).map_err(|e| fmt_err(format!("line {}: {e}", i + 1)))?;
        check_record(&r, &format!("line {}", i + 1), &p, lim)?;
        if environment.is_none() {
            environment = r.environment.clone();
        }
        r.environment = None;
        records.push(r);
    }
    Ok(Loaded {
        path: p,
        records,
        environment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> commbench_core::artifact::TempDir {
        commbench_core::artifact::TempDir::new(&format!("cbreport-load-{name}")).unwrap()
    }

    /// `load` on a thread, failing the test if it takes more than 30 s (an
    /// open that blocks on a FIFO must fail, not hang the suite).
    fn load_within_30s(p: &Path) -> Result<Loaded, ReportError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let p = p.to_owned();
        std::thread::spawn(move || {
            let _ = tx.send(load(&p));
        });
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .expect("load did not finish within 30 s")
    }

    fn record(metrics: usize, text: &str) -> serde_json::Value {
        let m: serde_json::Map<String, Value> = (0..metrics)
            .map(|i| (format!("m{i}"), Value::from(i)))
            .collect();
        serde_json::json!({"schema_version": 1, "lab": "ipc", "test": "reqres",
            "params": {"note": text}, "metrics": m})
    }

    #[test]
    fn load_rejects_non_results() {
        let d = dir("non");
        let p = d.path().join("x.json");
        std::fs::write(&p, "{\"hello\": 1}\n").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("not commbench output"), "{e}");
        std::fs::write(&p, "").unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("empty"));
    }

    /// Issue 50, item 5: every document was read into a JSON value and
    /// each record copied out of it (a third of compare's time at 100,000
    /// records). Read straight into records now, a document must load as
    /// it did: its environment (null too), the records' order, and a bad
    /// record named by its index.
    #[test]
    fn a_document_was_read_through_a_value_and_each_record_copied() {
        let d = dir("doc");
        let p = d.path().join("x.json");
        let doc = |env: &str, second: &str| {
            format!(
                "{{\"schema_version\": 2, \"tool\": \"commbench\", \"environment\": {env},\n \"records\": [\n{},\n{second}]}}",
                record(2, "a")
            )
        };
        std::fs::write(
            &p,
            doc("{\"hostname\": \"h\"}", &record(3, "b").to_string()),
        )
        .unwrap();
        let l = load(&p).unwrap();
        assert_eq!(l.records.len(), 2);
        assert_eq!(l.records[1].params["note"], "b");
        assert_eq!(l.environment.unwrap()["hostname"], "h");
        std::fs::write(&p, doc("null", &record(3, "b").to_string())).unwrap();
        assert_eq!(load(&p).unwrap().environment, Some(Value::Null));
        std::fs::write(&p, doc("null", "{\"lab\": 1}")).unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("records[1]"), "{e}");
    }

    /// `"records": {}` was taken as a malformed array; `"records": []` as
    /// a run without records. Both are refused as `history --import` does.
    #[test]
    fn records_that_are_not_an_array_or_none_at_all_are_refused() {
        let d = dir("records");
        let p = d.path().join("x.json");
        for (doc, says) in [
            (
                "{\"records\": {}}",
                "\"records\" is an object, not an array of records",
            ),
            (
                "{\"records\": \"x\"}",
                "\"records\" is a string, not an array",
            ),
            ("{\"records\": []}", "no records in it"),
        ] {
            std::fs::write(&p, doc).unwrap();
            let e = load(&p).unwrap_err();
            assert!(matches!(e, ReportError::Format { .. }), "{e}");
            assert!(e.to_string().contains(says), "{doc}: {e}");
        }
    }

    /// A file name or a value with an escape sequence is shown escaped in
    /// the message, never sent to the terminal.
    #[test]
    fn messages_escape_control_characters_of_the_path_and_the_file() {
        let d = dir("control");
        let p = d.path().join("a\u{1b}]0;pwned\u{7}.json");
        std::fs::write(&p, "{\"records\": [{\"lab\": \"\u{1b}[2J\", \"test\": 1}]}").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
        assert!(e.contains("\\u{1b}"), "{e}");
    }

    /// A FIFO (no writer: the open used to block forever), a character
    /// device, a socket and a folder are refused before anything is read,
    /// saying what they are.
    #[test]
    #[allow(unsafe_code)]
    fn special_files_are_refused_before_reading() {
        let d = dir("special");
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let sock = d.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        for (p, kind) in [
            (fifo.as_path(), "a FIFO"),
            (Path::new("/dev/null"), "a character device"),
            (sock.as_path(), "a socket"),
            (d.path(), "a directory"),
        ] {
            let e = load_within_30s(p).unwrap_err();
            assert!(matches!(e, ReportError::Input { .. }), "{e}");
            let e = e.to_string();
            assert!(
                e.contains(&format!("it is {kind}: report reads regular files only")),
                "{e}"
            );
        }
    }

    /// The bounds `history --import` has: 256 MiB a file, 4 MiB a line,
    /// 4 MiB a record, 10,000 parameters and metrics a record; each
    /// refusal names the bound.
    #[test]
    fn a_file_is_read_within_the_import_bounds() {
        let d = dir("bounds");
        let p = d.path().join("x.jsonl");
        // A 5 MiB line (one record with a 5 MiB parameter).
        std::fs::write(&p, record(1, &"x".repeat(5 << 20)).to_string()).unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(
            e.contains("line 1: ") && e.contains("more than 4194304 in a line"),
            "{e}"
        );
        // 20,000 metrics, flat and nested.
        std::fs::write(&p, record(20_000, "").to_string()).unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(
            e.contains("line 1: more than 10000 parameters and metrics"),
            "{e}"
        );
        let mut nested = record(0, "");
        nested["metrics"]["deep"] = serde_json::json!({"a": vec![1; 6000], "b": vec![2; 6000]});
        std::fs::write(&p, nested.to_string()).unwrap();
        assert!(load(&p).is_err());
        // A JSON document: the same bounds per record.
        let doc = serde_json::json!({"records": [record(20_000, "")]});
        std::fs::write(&p, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("records[0]: more than 10000"), "{e}");
        // The whole file, and the record size, with smaller bounds.
        std::fs::write(&p, format!("{}\n", record(3, "abc")).repeat(10)).unwrap();
        let lim = LoadLimits {
            max_bytes: 100,
            ..LoadLimits::default()
        };
        let e = load_with(&p, &lim).unwrap_err().to_string();
        assert!(e.contains("larger than 100 bytes"), "{e}");
        let lim = LoadLimits {
            max_record_bytes: 50,
            ..LoadLimits::default()
        };
        let e = load_with(&p, &lim).unwrap_err().to_string();
        assert!(
            e.contains("line 1: a record of") && e.contains("more than 50"),
            "{e}"
        );
        assert_eq!(load(&p).unwrap().records.len(), 10);
    }
}
