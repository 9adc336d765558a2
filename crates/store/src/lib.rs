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

#![deny(unsafe_code)]

use commbench_core::record::Record;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// `PRAGMA application_id` of a commbench store ("CMB1"), so that another
/// program's SQLite file is recognised as foreign.
pub const APPLICATION_ID: i32 = 0x434d_4231;

/// Forward migrations: `MIGRATIONS[i]` takes a store from version `i` to
/// `i + 1`. Append only; never edit a released step.
pub const MIGRATIONS: &[&str] = &[
    // v1: runs, their records, and named baselines.
    "CREATE TABLE runs (
        run_id        TEXT PRIMARY KEY,
        started_utc   TEXT NOT NULL,
        started_unix  INTEGER NOT NULL,
        host          TEXT NOT NULL,
        git_sha       TEXT NOT NULL,
        build_profile TEXT NOT NULL,
        command_line  TEXT NOT NULL,
        environment   TEXT NOT NULL
    );
    CREATE TABLE records (
        id        INTEGER PRIMARY KEY,
        run_id    TEXT NOT NULL REFERENCES runs(run_id),
        seq       INTEGER NOT NULL,
        lab       TEXT NOT NULL,
        test      TEXT NOT NULL,
        params    TEXT NOT NULL,
        metrics   TEXT NOT NULL,
        match_key TEXT NOT NULL
    );
    CREATE INDEX records_run ON records(run_id);
    CREATE INDEX records_key ON records(lab, test, match_key);
    CREATE INDEX runs_started ON runs(started_unix);
    CREATE TABLE baselines (
        name      TEXT PRIMARY KEY,
        run_id    TEXT NOT NULL REFERENCES runs(run_id),
        saved_utc TEXT NOT NULL
    );",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// How long a writer waits for another one (busy time-out and retries).
const BUSY_WAIT: Duration = Duration::from_secs(30);

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Runs `f` again while another connection holds a lock SQLite does not
/// wait for itself (the switch to WAL, and reads racing it on a new file,
/// return SQLITE_BUSY without calling the busy handler).
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + BUSY_WAIT;
    loop {
        match f() {
            Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot open the results store {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("{path} is not a commbench results store ({reason}); it was left untouched — give another path with --store PATH or disable the store with --no-store")]
    Foreign { path: String, reason: String },
    #[error("{path} has schema version {found}, newer than this commbench understands ({supported}); it was left untouched — use a newer commbench or another --store PATH")]
    Newer {
        path: String,
        found: i64,
        supported: i64,
    },
    #[error("results store {path}: {err}")]
    Sql { path: String, err: rusqlite::Error },
    #[error("{0}")]
    Invalid(String),
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

/// Where the store lives when no path is given:
/// `$XDG_DATA_HOME/commbench/results.db`, else
/// `~/.local/share/commbench/results.db`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        })?;
    Some(base.join("commbench").join("results.db"))
}

/// An open results store.
pub struct Store {
    conn: Connection,
    path: String,
}

/// Which runs a query covers.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub lab: Option<String>,
    pub test: Option<String>,
    pub host: Option<String>,
    /// Runs started at or after this time (seconds since the epoch).
    pub since_unix: Option<i64>,
    pub run_id: Option<String>,
}

impl Store {
    /// Opens (creating when absent) the store at `path` and migrates it
    /// forward. A file that is not a commbench store, or one of a newer
    /// schema, is refused and left as it was.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let p = path.display().to_string();
        let open_err = |reason: String| StoreError::Open {
            path: p.clone(),
            reason,
        };
        let foreign = |reason: &str| StoreError::Foreign {
            path: p.clone(),
            reason: reason.to_owned(),
        };
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => return Err(foreign("it is a directory")),
            Ok(m) if m.len() > 0 => {
                use std::io::Read;
                let mut head = [0u8; 16];
                let n = std::fs::File::open(path)
                    .and_then(|mut f| f.read(&mut head))
                    .map_err(|e| open_err(e.to_string()))?;
                if n < 16 || &head != SQLITE_MAGIC {
                    return Err(foreign("not an SQLite database"));
                }
            }
            Ok(_) => {}
            Err(_) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(|e| {
                        open_err(format!("cannot create folder {}: {e}", dir.display()))
                    })?;
                }
            }
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| open_err(e.to_string()))?;
        let mut store = Store {
            conn,
            path: p.clone(),
        };
        store
            .conn
            .busy_timeout(BUSY_WAIT)
            .map_err(|e| store.sql(e))?;
        store.check_and_migrate()?;
        Ok(store)
    }

    fn sql(&self, err: rusqlite::Error) -> StoreError {
        StoreError::Sql {
            path: self.path.clone(),
            err,
        }
    }

    /// The path the store was opened at.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.sql(e))
    }

    fn check_and_migrate(&mut self) -> Result<(), StoreError> {
        let path = self.path.clone();
        let foreign = |reason: String| StoreError::Foreign {
            path: path.clone(),
            reason,
        };
        // The header was checked; a damaged file still fails here.
        // One statement, so one snapshot: another process may be creating
        // the schema right now, and separate reads could see half of it.
        let read = |conn: &Connection| -> rusqlite::Result<(i64, i32, i64)> {
            conn.query_row(
                "SELECT (SELECT user_version FROM pragma_user_version),
                        (SELECT application_id FROM pragma_application_id),
                        (SELECT count(*) FROM sqlite_master)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        };
        let judge = |(v, app, tables): (i64, i32, i64)| -> Result<bool, StoreError> {
            if app != APPLICATION_ID && (tables > 0 || v != 0 || app != 0) {
                return Err(foreign(format!(
                    "an SQLite database of another application (application_id {app:#x}, {tables} schema objects)"
                )));
            }
            if v > SCHEMA_VERSION {
                return Err(StoreError::Newer {
                    path: path.clone(),
                    found: v,
                    supported: SCHEMA_VERSION,
                });
            }
            Ok(v < SCHEMA_VERSION)
        };
        let unreadable = |e: rusqlite::Error| {
            if is_busy(&e) {
                StoreError::Sql {
                    path: path.clone(),
                    err: e,
                }
            } else {
                foreign(format!("unreadable: {e}"))
            }
        };
        let state = retry_busy(|| read(&self.conn)).map_err(unreadable)?;
        if judge(state)? {
            // Migrate under the write lock; another process may have done it
            // meanwhile, so judge again inside.
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| StoreError::Sql {
                    path: path.clone(),
                    err: e,
                })?;
            let state = retry_busy(|| read(&tx)).map_err(unreadable)?;
            if judge(state)? {
                for (i, step) in MIGRATIONS.iter().enumerate().skip(state.0 as usize) {
                    tx.execute_batch(step).map_err(|e| StoreError::Sql {
                        path: path.clone(),
                        err: e,
                    })?;
                    tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))
                        .map_err(|e| StoreError::Sql {
                            path: path.clone(),
                            err: e,
                        })?;
                }
                tx.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))
                    .map_err(|e| StoreError::Sql {
                        path: path.clone(),
                        err: e,
                    })?;
            }
            tx.commit().map_err(|e| StoreError::Sql {
                path: path.clone(),
                err: e,
            })?;
        }
        // WAL lets readers and one writer work at once; the mode is stored
        // in the file, so setting it again is a no-op. A file system without
        // shared memory keeps the rollback journal, and appends are still
        // serialised by SQLite's lock and the busy time-out.
        let conn = &self.conn;
        let mode: String = retry_busy(|| conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)))
            .map_err(|e| self.sql(e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            let _now: String =
                retry_busy(|| conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)))
                    .map_err(|e| self.sql(e))?;
        }
        self.conn
            .execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// Appends one run and its records in one transaction. A run id that
    /// is already stored is skipped (returns false): imports deduplicate.
    pub fn append(&mut self, run: &RunMeta, records: &[Record]) -> Result<bool, StoreError> {
        let path = self.path.clone();
        let sql = |err| StoreError::Sql {
            path: path.clone(),
            err,
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let exists: Option<i64> = tx
            .query_row("SELECT 1 FROM runs WHERE run_id = ?1", [&run.run_id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(sql)?;
        if exists.is_some() {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO runs (run_id, started_utc, started_unix, host, git_sha, build_profile, command_line, environment)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                run.run_id,
                run.started_utc,
                run.started_unix,
                run.host,
                run.git_sha,
                run.build_profile,
                Value::from(run.command_line.clone()).to_string(),
                run.environment.to_string(),
            ],
        )
        .map_err(sql)?;
        {
            let mut ins = tx
                .prepare(
                    "INSERT INTO records (run_id, seq, lab, test, params, metrics, match_key)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(sql)?;
            for (i, r) in records.iter().enumerate() {
                ins.execute(params![
                    run.run_id,
                    i as i64,
                    r.lab,
                    r.test,
                    Value::Object(r.params.clone()).to_string(),
                    Value::Object(r.metrics.clone()).to_string(),
                    match_key(r),
                ])
                .map_err(sql)?;
            }
        }
        tx.commit().map_err(sql)?;
        Ok(true)
    }

    /// Runs matching `f` (the lab/test filters keep runs that hold such a
    /// record), oldest first.
    pub fn runs(&self, f: &Filter) -> Result<Vec<RunMeta>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT run_id, started_utc, started_unix, host, git_sha, build_profile, command_line, environment
                 FROM runs r
                 WHERE (?1 IS NULL OR host = ?1)
                   AND (?2 IS NULL OR started_unix >= ?2)
                   AND (?3 IS NULL OR run_id = ?3)
                   AND (?4 IS NULL AND ?5 IS NULL OR EXISTS (
                        SELECT 1 FROM records x WHERE x.run_id = r.run_id
                          AND (?4 IS NULL OR x.lab = ?4) AND (?5 IS NULL OR x.test = ?5)))
                 ORDER BY started_unix, rowid",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(
                params![f.host, f.since_unix, f.run_id, f.lab, f.test],
                |r| {
                    let cl: String = r.get(6)?;
                    let env: String = r.get(7)?;
                    Ok(RunMeta {
                        run_id: r.get(0)?,
                        started_utc: r.get(1)?,
                        started_unix: r.get(2)?,
                        host: r.get(3)?,
                        git_sha: r.get(4)?,
                        build_profile: r.get(5)?,
                        command_line: serde_json::from_str(&cl).unwrap_or_default(),
                        environment: serde_json::from_str(&env).unwrap_or(Value::Null),
                    })
                },
            )
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }

    /// Records matching `f`, in run order then record order.
    pub fn records(&self, f: &Filter) -> Result<Vec<StoredRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT x.run_id, r.started_unix, r.host, r.git_sha, x.lab, x.test, x.params, x.metrics
                 FROM records x JOIN runs r ON r.run_id = x.run_id
                 WHERE (?1 IS NULL OR r.host = ?1)
                   AND (?2 IS NULL OR r.started_unix >= ?2)
                   AND (?3 IS NULL OR x.run_id = ?3)
                   AND (?4 IS NULL OR x.lab = ?4)
                   AND (?5 IS NULL OR x.test = ?5)
                 ORDER BY r.started_unix, r.rowid, x.seq",
            )
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(
                params![f.host, f.since_unix, f.run_id, f.lab, f.test],
                |r| {
                    let params: String = r.get(6)?;
                    let metrics: String = r.get(7)?;
                    let mut rec = Record::new(&r.get::<_, String>(4)?, &r.get::<_, String>(5)?);
                    rec.params =
                        serde_json::from_str::<Map<String, Value>>(&params).unwrap_or_default();
                    rec.metrics =
                        serde_json::from_str::<Map<String, Value>>(&metrics).unwrap_or_default();
                    Ok(StoredRecord {
                        run_id: r.get(0)?,
                        started_unix: r.get(1)?,
                        host: r.get(2)?,
                        git_sha: r.get(3)?,
                        record: rec,
                    })
                },
            )
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }

    /// Whether a run of `host` that started at `started_utc` is kept (a
    /// result file imported after its run was stored has no run id).
    pub fn has_run_at(&self, host: &str, started_utc: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT 1 FROM runs WHERE host = ?1 AND started_utc = ?2 LIMIT 1",
                params![host, started_utc],
                |_| Ok(()),
            )
            .optional()
            .map(|o| o.is_some())
            .map_err(|e| self.sql(e))
    }

    /// Names a run (replacing an earlier run of that name).
    pub fn save_baseline(&mut self, name: &str, run_id: &str) -> Result<(), StoreError> {
        if name.is_empty() || name == "last" {
            return Err(StoreError::Invalid(format!(
                "'{name}' cannot name a baseline (it is empty or reserved)"
            )));
        }
        self.conn
            .execute(
                "INSERT INTO baselines (name, run_id, saved_utc) VALUES (?1, ?2, ?3)
                 ON CONFLICT(name) DO UPDATE SET run_id = excluded.run_id, saved_utc = excluded.saved_utc",
                params![name, run_id, commbench_core::env::now_utc()],
            )
            .map_err(|e| self.sql(e))?;
        Ok(())
    }

    /// The run a user names: `last` (the latest run, on `host` when given),
    /// a baseline name, a run id or its prefix, or a git SHA (prefix) — the
    /// latest run of that build. `None` when nothing matches.
    pub fn resolve(&self, spec: &str, host: Option<&str>) -> Result<Option<String>, StoreError> {
        let q = |sql: &str, arg: &str| -> Result<Option<String>, StoreError> {
            self.conn
                .query_row(sql, params![arg, host], |r| r.get(0))
                .optional()
                .map_err(|e| self.sql(e))
        };
        if spec == "last" {
            return q(
                "SELECT run_id FROM runs WHERE ?1 = ?1 AND (?2 IS NULL OR host = ?2)
                 ORDER BY started_unix DESC, rowid DESC LIMIT 1",
                spec,
            );
        }
        if spec.is_empty() {
            return Ok(None);
        }
        if let Some(id) = q(
            "SELECT run_id FROM baselines WHERE name = ?1 AND (?2 IS NULL OR ?2 = ?2)",
            spec,
        )? {
            return Ok(Some(id));
        }
        if !spec.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Ok(None);
        }
        let prefix = format!("{}%", spec.to_ascii_lowercase());
        if let Some(id) = q(
            "SELECT run_id FROM runs WHERE run_id LIKE ?1 AND (?2 IS NULL OR ?2 = ?2)
             ORDER BY started_unix DESC, rowid DESC LIMIT 1",
            &prefix,
        )? {
            return Ok(Some(id));
        }
        q(
            "SELECT run_id FROM runs WHERE git_sha LIKE ?1 AND (?2 IS NULL OR host = ?2)
             ORDER BY started_unix DESC, rowid DESC LIMIT 1",
            &prefix,
        )
    }

    /// Baseline names and the runs they point at.
    pub fn baselines(&self) -> Result<Vec<(String, String, String)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT name, run_id, saved_utc FROM baselines ORDER BY name")
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.sql(e))
    }
}

#[cfg(test)]
mod tests;

pub mod export;
