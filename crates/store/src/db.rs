//! The SQLite file (the `sqlite` feature, on by default): opening it
//! with its ownership and kind checks, forward migrations, appends in one
//! transaction per run, and the queries `history`, `compare` and the
//! export read.

use crate::{file_kind, match_key, RunMeta, StoreError, StoredRecord};
use commbench_core::record::Record;
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    // v2: the parts of a run stored one at a time (a suite's steps), so
    // that storing a part again (a resumed suite replaying what it kept)
    // adds nothing.
    "CREATE TABLE run_parts (
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        part   TEXT NOT NULL,
        PRIMARY KEY (run_id, part)
    );",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub(crate) const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

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

/// A user's name for messages: `name (uid N)` from /etc/passwd, else `uid N`.
fn user_name(uid: u32) -> String {
    let name = std::fs::read_to_string("/etc/passwd").ok().and_then(|t| {
        t.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let id: u32 = f.nth(1)?.parse().ok()?;
            (id == uid).then(|| name.to_owned())
        })
    });
    match name {
        Some(n) => format!(
            "user {} (uid {uid})",
            commbench_core::record::escape_control(&n)
        ),
        None => format!("uid {uid}"),
    }
}

/// An SQLite error as the user should read it: permission denied and a
/// full disk say so; a damaged or foreign file is refused as such.
pub(crate) fn sql_error(path: &str, err: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode as C;
    let reason = err.to_string();
    match err.sqlite_error_code() {
        Some(C::PermissionDenied | C::ReadOnly | C::CannotOpen) => StoreError::Denied {
            path: path.to_owned(),
            reason,
        },
        Some(C::DiskFull) => StoreError::Full {
            path: path.to_owned(),
            reason,
        },
        Some(C::NotADatabase) => StoreError::Foreign {
            path: path.to_owned(),
            reason: format!("unreadable: {reason}"),
        },
        Some(C::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_owned(),
            detail: reason,
        },
        _ => StoreError::Sql {
            path: path.to_owned(),
            err,
        },
    }
}

/// An I/O error on the store or its folder (`what` says which), with
/// permission denied and a full disk named as such.
pub(crate) fn io_error(path: &str, what: String, e: &std::io::Error) -> StoreError {
    use std::io::ErrorKind as K;
    let reason = format!("{what}: {e}");
    match e.kind() {
        K::PermissionDenied | K::ReadOnlyFilesystem => StoreError::Denied {
            path: path.to_owned(),
            reason,
        },
        K::StorageFull | K::QuotaExceeded => StoreError::Full {
            path: path.to_owned(),
            reason,
        },
        _ => StoreError::Open {
            path: path.to_owned(),
            reason,
        },
    }
}
/// The row of `run` in `runs` (`or_ignore`: kept as it is when stored).
fn insert_run(
    tx: &rusqlite::Transaction<'_>,
    run: &RunMeta,
    or_ignore: bool,
) -> rusqlite::Result<usize> {
    let verb = if or_ignore {
        "INSERT OR IGNORE"
    } else {
        "INSERT"
    };
    tx.execute(
        &format!(
            "{verb} INTO runs (run_id, started_utc, started_unix, host, git_sha, build_profile, command_line, environment)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        ),
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
}

/// `records` of `run`, numbered from `first`.
fn insert_records(
    tx: &rusqlite::Transaction<'_>,
    run: &RunMeta,
    first: i64,
    records: &[Record],
) -> rusqlite::Result<()> {
    let mut ins = tx.prepare(
        "INSERT INTO records (run_id, seq, lab, test, params, metrics, match_key)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (i, r) in records.iter().enumerate() {
        ins.execute(params![
            run.run_id,
            first + i as i64,
            r.lab,
            r.test,
            Value::Object(r.params.clone()).to_string(),
            Value::Object(r.metrics.clone()).to_string(),
            match_key(r),
        ])?;
    }
    Ok(())
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
    pub(crate) conn: Connection,
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
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
        let p = path.display().to_string();
        let foreign = |reason: &str| StoreError::Foreign {
            path: p.clone(),
            reason: reason.to_owned(),
        };
        let me = commbench_core::sys::euid();
        let not_owned = |owner: u32| StoreError::NotOwned {
            path: p.clone(),
            owner: user_name(owner),
            me: user_name(me),
        };
        // Never a store reached through another user's link (a folder on
        // the way included), as every file commbench writes.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            commbench_core::userfile::check_folder(dir).map_err(|e| StoreError::Open {
                path: p.clone(),
                reason: e.to_string(),
            })?;
        }
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => {
                return Err(foreign(&format!(
                    "it is {}, not a regular file",
                    file_kind(m.file_type())
                )))
            }
            Ok(m) if m.uid() != me => return Err(not_owned(m.uid())),
            Ok(m) => {
                if m.len() > 0 {
                    use std::io::Read;
                    let mut head = [0u8; 16];
                    let n = std::fs::File::open(path)
                        .and_then(|mut f| f.read(&mut head))
                        .map_err(|e| io_error(&p, "cannot read it".into(), &e))?;
                    if n < 16 || &head != SQLITE_MAGIC {
                        return Err(foreign("not an SQLite database"));
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // The folder and the file are the user's alone, whatever
                // the umask: results describe the machine, and a folder
                // others can write lets them swap in a forged store.
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(dir)
                        .map_err(|e| {
                            io_error(&p, format!("cannot create folder {}", dir.display()), &e)
                        })?;
                }
                match std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                {
                    Ok(f) => f
                        .set_permissions(std::fs::Permissions::from_mode(0o600))
                        .map_err(|e| io_error(&p, "cannot set its mode".into(), &e))?,
                    // Another process created it meanwhile: judged below.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(io_error(&p, "cannot create it".into(), &e)),
                }
                return Store::open_checked(path, p.clone(), me);
            }
            Err(e) => return Err(io_error(&p, "cannot look at it".into(), &e)),
        }
        Store::open_checked(path, p.clone(), me)
    }

    /// Opens a file that exists, after the ownership and kind checks of
    /// [`Store::open`] (done again here for a file created meanwhile).
    fn open_checked(path: &Path, p: String, me: u32) -> Result<Store, StoreError> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let m =
            std::fs::metadata(path).map_err(|e| io_error(&p, "cannot look at it".into(), &e))?;
        if !m.is_file() {
            return Err(StoreError::Foreign {
                path: p,
                reason: format!("it is {}, not a regular file", file_kind(m.file_type())),
            });
        }
        // SQLite's files beside it must be the user's too (a forged WAL
        // would be replayed into the store).
        for side in ["", "-wal", "-shm", "-journal"] {
            let sp = PathBuf::from(format!("{}{side}", path.display()));
            if let Ok(sm) = std::fs::symlink_metadata(&sp) {
                if sm.uid() != me {
                    return Err(StoreError::NotOwned {
                        path: sp.display().to_string(),
                        owner: user_name(sm.uid()),
                        me: user_name(me),
                    });
                }
            }
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| sql_error(&p, e))?;
        let mut store = Store {
            conn,
            path: p.clone(),
        };
        store
            .conn
            .busy_timeout(BUSY_WAIT)
            .map_err(|e| store.sql(e))?;
        store.check_and_migrate()?;
        // A store of an older commbench may be readable by others; SQLite
        // gives its -wal and -shm files the mode of the store.
        if m.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| io_error(&p, "cannot make it private (mode 0600)".into(), &e))?;
            for side in ["-wal", "-shm"] {
                let sp = PathBuf::from(format!("{}{side}", path.display()));
                if sp.is_file() {
                    std::fs::set_permissions(&sp, std::fs::Permissions::from_mode(0o600)).map_err(
                        |e| io_error(&p, format!("cannot make {} private", sp.display()), &e),
                    )?;
                }
            }
        }
        Ok(store)
    }

    fn sql(&self, err: rusqlite::Error) -> StoreError {
        sql_error(&self.path, err)
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

    /// `PRAGMA quick_check`: Ok when SQLite finds the file sound.
    fn quick_check(&self) -> Result<(), StoreError> {
        let conn = &self.conn;
        let problems: Vec<String> = retry_busy(|| {
            let mut st = conn.prepare("PRAGMA quick_check(5)")?;
            let rows = st.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect()
        })
        .map_err(|e| sql_error(&self.path, e))?;
        if problems.len() == 1 && problems[0] == "ok" {
            return Ok(());
        }
        Err(StoreError::Corrupt {
            path: self.path.clone(),
            detail: problems.join("; "),
        })
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
        let unreadable = |e: rusqlite::Error| match sql_error(&path, e) {
            StoreError::Sql { err, .. } if !is_busy(&err) => foreign(format!("unreadable: {err}")),
            other => other,
        };
        let state = retry_busy(|| read(&self.conn)).map_err(unreadable)?;
        let migrate = judge(state)?;
        // A damaged page is found before anything is written: SQLite would
        // take appends into the pages that are still sound, and the next
        // read would fail.
        self.quick_check().map_err(|e| match e {
            StoreError::Sql { err, .. } if !is_busy(&err) => StoreError::Corrupt {
                path: path.clone(),
                detail: err.to_string(),
            },
            other => other,
        })?;
        if migrate {
            // Migrate under the write lock; another process may have done it
            // meanwhile, so judge again inside.
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| sql_error(&path, e))?;
            let state = retry_busy(|| read(&tx)).map_err(unreadable)?;
            if judge(state)? {
                for (i, step) in MIGRATIONS.iter().enumerate().skip(state.0 as usize) {
                    tx.execute_batch(step).map_err(|e| sql_error(&path, e))?;
                    tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))
                        .map_err(|e| sql_error(&path, e))?;
                }
                tx.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))
                    .map_err(|e| sql_error(&path, e))?;
            }
            tx.commit().map_err(|e| sql_error(&path, e))?;
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
        let sql = |err| sql_error(&path, err);
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
        insert_run(&tx, run, false).map_err(sql)?;
        insert_records(&tx, run, 0, records).map_err(sql)?;
        tx.commit().map_err(sql)?;
        Ok(true)
    }

    /// Appends one part of a run (a suite's step) in one transaction: the
    /// run is created with `run`'s description when it is not stored yet,
    /// and a part already stored for that run is skipped (returns false),
    /// so storing the same part twice, from a resumed suite that cannot
    /// tell whether its last store went through, never duplicates it.
    pub fn append_part(
        &mut self,
        run: &RunMeta,
        part: &str,
        records: &[Record],
    ) -> Result<bool, StoreError> {
        let path = self.path.clone();
        let sql = |err| sql_error(&path, err);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        let have_part: Option<i64> = tx
            .query_row(
                "SELECT 1 FROM run_parts WHERE run_id = ?1 AND part = ?2",
                params![run.run_id, part],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql)?;
        if have_part.is_some() {
            return Ok(false);
        }
        insert_run(&tx, run, true).map_err(sql)?;
        let first: i64 = tx
            .query_row(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM records WHERE run_id = ?1",
                [&run.run_id],
                |r| r.get(0),
            )
            .map_err(sql)?;
        insert_records(&tx, run, first, records).map_err(sql)?;
        tx.execute(
            "INSERT INTO run_parts (run_id, part) VALUES (?1, ?2)",
            params![run.run_id, part],
        )
        .map_err(sql)?;
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
        self.records_where("", params![f.host, f.since_unix, f.run_id, f.lab, f.test])
    }

    /// The records of `host`'s (lab, test) whose series (lab, test and
    /// parameters: the match key) holds at least `min_records` records, in
    /// run order then record order: what a between-run floor can be
    /// learned from. A series with fewer records cannot give one, and a
    /// run of 100,000 one-record series read them all for nothing (a
    /// third of `history`'s time).
    pub fn records_of_series_with(
        &self,
        host: &str,
        lab: &str,
        test: &str,
        min_records: usize,
    ) -> Result<Vec<StoredRecord>, StoreError> {
        self.records_where(
            "AND x.match_key IN (
                 SELECT y.match_key FROM records y JOIN runs q ON q.run_id = y.run_id
                 WHERE q.host = ?1 AND y.lab = ?4 AND y.test = ?5
                 GROUP BY y.match_key HAVING COUNT(*) >= ?6)",
            params![
                host,
                Option::<i64>::None,
                Option::<String>::None,
                lab,
                test,
                min_records as i64
            ],
        )
    }

    /// Records under the filter's five parameters (?1 host, ?2 since,
    /// ?3 run id, ?4 lab, ?5 test) and the condition `extra`.
    fn records_where(
        &self,
        extra: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<StoredRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT x.run_id, r.started_unix, r.host, r.git_sha, x.lab, x.test, x.params, x.metrics
                 FROM records x JOIN runs r ON r.run_id = x.run_id
                 WHERE (?1 IS NULL OR r.host = ?1)
                   AND (?2 IS NULL OR r.started_unix >= ?2)
                   AND (?3 IS NULL OR x.run_id = ?3)
                   AND (?4 IS NULL OR x.lab = ?4)
                   AND (?5 IS NULL OR x.test = ?5)
                   {extra}
                 ORDER BY r.started_unix, r.rowid, x.seq"
            ))
            .map_err(|e| self.sql(e))?;
        let rows = stmt
            .query_map(args, |r| {
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
            })
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
