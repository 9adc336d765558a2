//! The results history: every run's records, with the environment
//! fingerprint, the git SHA of the build and a random run id, appended to
//! one local SQLite file (`$XDG_DATA_HOME/commbench/results.db`).
//!
//! Why SQLite (rusqlite, `bundled`): appends are small transactions from
//! separate processes, and SQLite's WAL mode with a busy time-out lets two
//! suites append at once without losing a row; the file is one portable
//! database that `sqlite3` opens directly. Analytics over many hosts go
//! through the Parquet/JSONL export instead of an embedded column engine.
//!
//! Invariants: the schema version lives in `PRAGMA user_version` and is only
//! ever migrated forward ([`MIGRATIONS`]); a file written by a newer
//! commbench, a SQLite database of another application, or a file that is
//! not SQLite at all is refused with [`StoreError`] and never written to;
//! one run's records go in in one transaction, so a reader sees all of a
//! run or none of it.
//!
//! Layout: the SQLite file is `db` (the `sqlite` feature, on by default),
//! the export and import `export`; one row of an export part from its
//! bytes is `part`, which builds without SQLite (the Parquet fuzz target
//! compiles only that, with the `parquet` feature).

#![deny(unsafe_code)]

use commbench_core::record::Record;
use serde_json::Value;
use thiserror::Error;

#[cfg(feature = "sqlite")]
mod db;
#[cfg(feature = "sqlite")]
pub use db::{default_path, Filter, Store, APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION};

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot open the results store {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("permission denied on the results store {path} ({reason}); it was left untouched — fix the permissions (the store and its folder must be yours and writable), or give another --store PATH, or --no-store")]
    Denied { path: String, reason: String },
    #[error("the disk holding the results store {path} is full ({reason}); nothing was written — free some space, or give another --store PATH, or --no-store")]
    Full { path: String, reason: String },
    #[error("{path} belongs to {owner}, not to you ({me}): another user could have written every run in it, so it was left untouched — use a store of your own (--store PATH, or remove or chown it if you trust it)")]
    NotOwned {
        path: String,
        owner: String,
        me: String,
    },
    #[error("the results store {path} is damaged (SQLite integrity check: {detail}); it was left untouched — keep a copy, recover what is left with `sqlite3 {path} .recover | sqlite3 new.db`, or give another --store PATH")]
    Corrupt { path: String, detail: String },
    #[error("{path} is not a commbench results store ({reason}); it was left untouched — give another path with --store PATH or disable the store with --no-store")]
    Foreign { path: String, reason: String },
    #[error("{path} has schema version {found}, newer than this commbench understands ({supported}); it was left untouched — use a newer commbench or another --store PATH")]
    Newer {
        path: String,
        found: i64,
        supported: i64,
    },
    #[cfg(feature = "sqlite")]
    #[error("results store {path}: {err}")]
    Sql { path: String, err: rusqlite::Error },
    #[error("{0}")]
    Invalid(String),
    /// Something wrong with what an import was given (a usage error: the
    /// CLI exits 2).
    #[error("{0}")]
    Input(String),
}

/// What a file that is neither absent nor regular is, for messages.
pub fn file_kind(t: std::fs::FileType) -> &'static str {
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

/// What is known about a run besides its records.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunMeta {
    pub run_id: String,
    pub started_utc: String,
    pub started_unix: i64,
    pub host: String,
    pub git_sha: String,
    pub build_profile: String,
    pub command_line: Vec<String>,
    pub environment: Value,
}

impl RunMeta {
    /// A new run (fresh id) described by an environment fingerprint value
    /// (`Fingerprint::to_value`): host, SHA, profile and command line are
    /// read from it.
    pub fn from_environment(environment: &Value) -> Result<Self, StoreError> {
        let s = |k: &str| {
            environment
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_owned()
        };
        let started_utc = s("started_utc");
        let command_line = environment
            .get("command_line")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        Ok(RunMeta {
            run_id: new_run_id()?,
            started_unix: parse_utc(&started_utc).unwrap_or_else(now_unix),
            started_utc,
            host: s("hostname"),
            git_sha: s("git_sha"),
            build_profile: s("build_profile"),
            command_line,
            environment: environment.clone(),
        })
    }
}

/// A record read back with the run it belongs to.
#[derive(Debug, Clone)]
pub struct StoredRecord {
    pub run_id: String,
    pub started_unix: i64,
    pub host: String,
    pub git_sha: String,
    pub record: Record,
}

/// A random 128-bit run id as 32 lowercase hex digits.
pub fn new_run_id() -> Result<String, StoreError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)
        .map_err(|e| StoreError::Invalid(format!("no random bytes for a run id: {e}")))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since the epoch of `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM[:SS[.fff]][Z]`
/// (UTC); `None` when it is neither.
pub fn parse_utc(s: &str) -> Option<i64> {
    let s = s.trim().trim_end_matches('Z');
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (s, None),
    };
    let mut dp = date.split('-');
    let y: i64 = dp.next()?.parse().ok()?;
    let m: u32 = dp.next()?.parse().ok()?;
    let d: u32 = dp.next()?.parse().ok()?;
    if dp.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let mut secs = days_from_civil(y, m, d) * 86_400;
    if let Some(t) = time {
        let t = t.split('.').next()?;
        let mut tp = t.split(':');
        let h: i64 = tp.next()?.parse().ok()?;
        let mi: i64 = tp.next()?.parse().ok()?;
        let se: i64 = tp.next().map_or(Some(0), |x| x.parse().ok())?;
        if tp.next().is_some() || h > 23 || mi > 59 || se > 60 {
            return None;
        }
        secs += h * 3600 + mi * 60 + se;
    }
    Some(secs)
}

/// The key records are matched by across runs: lab, test and the
/// parameters as `k=v` pairs (the same pairs `compare` matches on).
pub fn match_key(r: &Record) -> String {
    let params = r
        .params
        .iter()
        .map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"')))
        .collect::<Vec<_>>()
        .join(" ");
    format!("{}/{} {params}", r.lab, r.test)
}

#[cfg(all(test, feature = "sqlite"))]
mod tests;

#[cfg(feature = "sqlite")]
pub mod export;
#[cfg(any(feature = "sqlite", feature = "parquet"))]
pub mod part;
