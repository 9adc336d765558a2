//! Reading a result file back: a JSON document (`--format json`, its
//! records under `records`) or JSON Lines (`--format jsonl`, a suite's
//! results.jsonl). Invariants: records keep their file order; in JSON Lines
//! the first record's environment becomes the run's and every record's own
//! copy is dropped; anything else is a [`ReportError::Format`] naming the
//! file, never an empty run.

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

/// Reads a JSON document (`--format json`) or JSON Lines (`--format jsonl`).
pub fn load(path: &Path) -> Result<Loaded, ReportError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| ReportError::Io {
        path: p.clone(),
        err,
    })?;
    let fmt_err = |reason: String| ReportError::Format {
        path: p.clone(),
        reason,
    };
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(fmt_err("the file is empty".into()));
    }
    // A JSON document spans lines; JSON Lines has one record per line.
    if let Ok(doc) = serde_json::from_str::<Value>(trimmed) {
        if let Some(recs) = doc.get("records") {
            let records: Vec<Record> = serde_json::from_value(recs.clone())
                .map_err(|e| fmt_err(format!("records: {e}")))?;
            return Ok(Loaded {
                path: p,
                records,
                environment: doc.get("environment").cloned(),
            });
        }
    }
    let mut records = Vec::new();
    let mut environment = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut r: Record =
            serde_json::from_str(line).map_err(|e| fmt_err(format!("line {}: {e}", i + 1)))?;
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

    #[test]
    fn load_rejects_non_results() {
        let dir = std::env::temp_dir().join(format!("cbreport-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.json");
        std::fs::write(&p, "{\"hello\": 1}\n").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("not commbench output"), "{e}");
        std::fs::write(&p, "").unwrap();
        assert!(load(&p).unwrap_err().to_string().contains("empty"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
