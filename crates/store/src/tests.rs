use super::*;
use crate::db::{io_error, sql_error, SQLITE_MAGIC};
use rusqlite::Connection;
use serde_json::json;
use std::path::{Path, PathBuf};

/// A store path in a fresh directory that is removed when the guard drops
/// (named so that `commbench clean` finds it after a SIGKILL).
struct Tmp {
    _dir: commbench_core::artifact::TempDir,
    db: PathBuf,
}

impl std::ops::Deref for Tmp {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.db
    }
}

impl AsRef<std::path::Path> for Tmp {
    fn as_ref(&self) -> &std::path::Path {
        &self.db
    }
}

fn tmp(name: &str) -> Tmp {
    let dir = commbench_core::artifact::TempDir::new(&format!("storetest-{name}")).unwrap();
    let db = dir.path().join("results.db");
    Tmp { _dir: dir, db }
}

fn run(host: &str, started_unix: i64) -> RunMeta {
    let env = json!({
        "hostname": host,
        "git_sha": "abc123def456",
        "build_profile": "release",
        "command_line": ["commbench", "timer"],
        "started_utc": commbench_core::env::utc_rfc3339(started_unix, 0),
    });
    RunMeta::from_environment(&env).unwrap()
}

fn rec(x: f64) -> Record {
    Record::new("ipc", "reqres")
        .param("transport", "shm")
        .param("msg_len", 64)
        .metric("msgs_per_s", x)
}

#[test]
fn run_ids_are_128_bit_hex_and_differ() {
    let a = new_run_id().unwrap();
    let b = new_run_id().unwrap();
    assert_eq!(a.len(), 32);
    assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a, b);
}

#[test]
fn dates_parse_and_bad_dates_do_not() {
    assert_eq!(parse_utc("1970-01-02"), Some(86_400));
    assert_eq!(parse_utc("2026-11-24T10:52:06.123Z"), Some(1_795_517_526));
    assert_eq!(
        parse_utc(&commbench_core::env::utc_rfc3339(1_700_000_000, 5)),
        Some(1_700_000_000)
    );
    for bad in ["", "yesterday", "2026-13-01", "2026-01-01T25:00", "2026-01"] {
        assert_eq!(parse_utc(bad), None, "{bad}");
    }
}

#[test]
fn append_and_read_back_a_run() {
    let p = tmp("roundtrip");
    let mut s = Store::open(&p).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let r = run("hostA", 1_700_000_000);
    assert!(s.append(&r, &[rec(1.0), rec(2.0)]).unwrap());
    // The same run id again is a duplicate, not a second run.
    assert!(!s.append(&r, &[rec(3.0)]).unwrap());
    let runs = s.runs(&Filter::default()).unwrap();
    assert_eq!(runs, vec![r.clone()]);
    let recs = s.records(&Filter::default()).unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[1].record, rec(2.0));
    assert_eq!(recs[0].host, "hostA");
    assert_eq!(s.resolve("last", None).unwrap(), Some(r.run_id.clone()));
    assert_eq!(
        s.resolve(&r.run_id[..8], None).unwrap(),
        Some(r.run_id.clone())
    );
    assert_eq!(s.resolve("abc123", None).unwrap(), Some(r.run_id.clone()));
    assert_eq!(s.resolve("nope", None).unwrap(), None);
    s.save_baseline("before", &r.run_id).unwrap();
    assert_eq!(s.resolve("before", None).unwrap(), Some(r.run_id.clone()));
    assert!(s.save_baseline("last", &r.run_id).is_err());
    // A baseline must name a stored run.
    assert!(s.save_baseline("ghost", "0000").is_err());
}

#[test]
fn filters_select_by_host_lab_and_time() {
    let p = tmp("filters");
    let mut s = Store::open(&p).unwrap();
    s.append(&run("a", 100), &[rec(1.0)]).unwrap();
    s.append(
        &run("b", 200),
        &[Record::new("timer", "rdtsc").metric("ns", 9)],
    )
    .unwrap();
    let f = |host: Option<&str>, lab: Option<&str>, since: Option<i64>| Filter {
        host: host.map(str::to_owned),
        lab: lab.map(str::to_owned),
        since_unix: since,
        ..Filter::default()
    };
    assert_eq!(s.runs(&f(Some("a"), None, None)).unwrap().len(), 1);
    assert_eq!(s.runs(&f(None, Some("timer"), None)).unwrap()[0].host, "b");
    assert_eq!(s.runs(&f(None, None, Some(150))).unwrap().len(), 1);
    assert_eq!(s.records(&f(None, Some("ipc"), None)).unwrap().len(), 1);
    assert_eq!(
        s.resolve("last", Some("a")).unwrap(),
        s.runs(&f(Some("a"), None, None))
            .unwrap()
            .first()
            .map(|r| r.run_id.clone())
    );
}

#[test]
fn a_part_stored_again_by_a_replaying_suite_was_duplicated() {
    let p = tmp("parts");
    let mut s = Store::open(&p).unwrap();
    let r = run("hostA", 1_700_000_000);
    assert!(s.append_part(&r, "core#1", &[rec(1.0), rec(2.0)]).unwrap());
    // The same part again (a resume that cannot tell whether its last
    // store went through) adds nothing; another part joins the same run.
    assert!(!s.append_part(&r, "core#1", &[rec(1.0), rec(2.0)]).unwrap());
    let later = RunMeta {
        started_utc: "2030-01-01T00:00:00.000Z".into(),
        ..r.clone()
    };
    assert!(s.append_part(&later, "ipc#2", &[rec(3.0)]).unwrap());
    assert_eq!(s.runs(&Filter::default()).unwrap(), vec![r.clone()]);
    let recs = s.records(&Filter::default()).unwrap();
    let values: Vec<f64> = recs
        .iter()
        .map(|x| x.record.metric_f64("msgs_per_s").unwrap())
        .collect();
    assert_eq!(values, vec![1.0, 2.0, 3.0]);
}

#[test]
fn a_v1_store_written_by_the_migration_path_opens_with_its_data() {
    // Build a v1 file by hand, the way a v1 commbench left it: the v1
    // migration, its version and the application id, and one run.
    let p = tmp("v1");
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.execute_batch(&format!(
            "PRAGMA user_version = 1; PRAGMA application_id = {APPLICATION_ID};
             INSERT INTO runs VALUES ('00ff', '1970-01-01T00:01:40.000Z', 100, 'h', 's', 'release', '[]', '{{}}');
             INSERT INTO records (run_id, seq, lab, test, params, metrics, match_key)
                VALUES ('00ff', 0, 'timer', 'rdtsc', '{{}}', '{{\"ns\": 9}}', 'timer/rdtsc ');"
        ))
        .unwrap();
    }
    let s = Store::open(&p).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let recs = s.records(&Filter::default()).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].record.metric_f64("ns"), Some(9.0));
}

#[test]
fn an_empty_file_is_initialised_through_every_migration() {
    let p = tmp("empty");
    std::fs::write(&p, b"").unwrap();
    let s = Store::open(&p).unwrap();
    assert_eq!(s.schema_version().unwrap(), MIGRATIONS.len() as i64);
    let app: i32 = s
        .conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .unwrap();
    assert_eq!(app, APPLICATION_ID);
}

fn assert_refused_and_untouched(p: &Path, want: &str) {
    let before = std::fs::read(p).unwrap();
    let err = Store::open(p).err().expect("must be refused");
    let msg = err.to_string();
    assert!(msg.contains(want), "{msg}");
    assert!(msg.contains("left untouched"), "{msg}");
    assert_eq!(std::fs::read(p).unwrap(), before, "the file was modified");
    // No journal or WAL file left beside it either.
    let wal = PathBuf::from(format!("{}-wal", p.display()));
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0);
}

#[test]
fn a_newer_store_is_refused_and_never_written() {
    let p = tmp("newer");
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch(MIGRATIONS[0]).unwrap();
        c.execute_batch(&format!(
            "PRAGMA user_version = {}; PRAGMA application_id = {APPLICATION_ID};",
            SCHEMA_VERSION + 1
        ))
        .unwrap();
    }
    assert_refused_and_untouched(&p, "newer than this commbench");
}

#[test]
fn another_applications_sqlite_file_is_refused_and_never_written() {
    let p = tmp("foreign");
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT); INSERT INTO moz_places (url) VALUES ('x');")
            .unwrap();
    }
    assert_refused_and_untouched(&p, "another application");
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_never_written() {
    let p = tmp("text");
    std::fs::write(&p, "my precious notes, not a database\n".repeat(100)).unwrap();
    assert_refused_and_untouched(&p, "not an SQLite database");
    // Short garbage too (shorter than the SQLite header).
    std::fs::write(&p, b"x").unwrap();
    assert_refused_and_untouched(&p, "not an SQLite database");
}

#[test]
fn a_corrupt_sqlite_file_is_refused_and_never_written() {
    // The SQLite header, then garbage where the pages should be.
    let p = tmp("corrupt");
    let mut bytes = SQLITE_MAGIC.to_vec();
    bytes.extend((0..8192u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    std::fs::write(&p, &bytes).unwrap();
    let before = std::fs::read(&p).unwrap();
    let err = Store::open(&p).err().expect("must be refused").to_string();
    assert!(
        err.contains("not a commbench results store") || err.contains("cannot open"),
        "{err}"
    );
    assert_eq!(std::fs::read(&p).unwrap(), before, "the file was modified");
}

#[test]
fn a_directory_is_refused() {
    let p = tmp("dir");
    std::fs::create_dir_all(&p).unwrap();
    assert!(Store::open(&p).is_err());
}

#[test]
fn two_writers_at_once_lose_nothing() {
    // Writers open the fresh file at the same moment (each may try to create
    // the schema and switch it to WAL) and append in small transactions,
    // interleaved. Regression: a reader saw the schema half created (tables
    // but no application id yet) and called the file foreign; the switch to
    // WAL returned SQLITE_BUSY without waiting.
    let p = tmp("concurrent");
    let (writers, per) = (4, 25);
    let start = std::sync::Arc::new(std::sync::Barrier::new(writers));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let p = p.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let mut s = Store::open(&p).unwrap();
                for i in 0..per {
                    let recs: Vec<Record> = (0..3)
                        .map(|k| rec((w * 1000 + i * 10 + k) as f64))
                        .collect();
                    assert!(s
                        .append(&run(&format!("w{w}"), 1000 + i as i64), &recs)
                        .unwrap());
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = Store::open(&p).unwrap();
    assert_eq!(s.runs(&Filter::default()).unwrap().len(), writers * per);
    let recs = s.records(&Filter::default()).unwrap();
    assert_eq!(recs.len(), writers * per * 3);
    let mut vals: Vec<i64> = recs
        .iter()
        .map(|r| r.record.metric_f64("msgs_per_s").unwrap() as i64)
        .collect();
    vals.sort_unstable();
    vals.dedup();
    assert_eq!(vals.len(), writers * per * 3, "every record once");
}

/// Issue 50, item 5: the noise-floor learner read every earlier record
/// of a test, though a floor needs a series of at least
/// `MIN_FLOOR_RUNS` records; a run of 100,000 one-record series read
/// them all for nothing. Only series with enough records come back, of
/// the host asked for, in run order.
#[test]
fn the_floor_loader_read_every_one_record_series() {
    let p = tmp("series-with");
    let mut s = Store::open(&p).unwrap();
    let one = |len: u64| {
        Record::new("ipc", "reqres")
            .param("msg_len", len)
            .metric("msgs_per_s", 1.0)
    };
    for t in 0..4 {
        // msg_len=64 in four runs; 1..=3 once each, in the first run.
        let mut recs = vec![one(64).metric("msgs_per_s", t as f64)];
        if t == 0 {
            recs.extend((1..=3).map(one));
        }
        s.append(&run("a", 100 + t), &recs).unwrap();
    }
    // Another host's records of the same series never count.
    s.append(&run("b", 50), &[one(1), one(1), one(1), one(1)])
        .unwrap();
    let got = s.records_of_series_with("a", "ipc", "reqres", 4).unwrap();
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(got
        .iter()
        .all(|r| r.host == "a" && r.record.params["msg_len"] == 64));
    let order: Vec<f64> = got
        .iter()
        .filter_map(|r| r.record.metric_f64("msgs_per_s"))
        .collect();
    assert_eq!(order, vec![0.0, 1.0, 2.0, 3.0]);
    assert_eq!(
        s.records_of_series_with("a", "ipc", "reqres", 1)
            .unwrap()
            .len(),
        7
    );
    assert!(s
        .records_of_series_with("a", "ipc", "other", 1)
        .unwrap()
        .is_empty());
}

#[test]
fn match_key_is_lab_test_and_params() {
    assert_eq!(match_key(&rec(1.0)), "ipc/reqres transport=shm msg_len=64");
}

mod exports {
    use super::*;
    use crate::export::{escape_partition, export, import, unescape_partition, ExportFormat};

    fn two_hosts(p: &Path) -> Store {
        let mut s = Store::open(p).unwrap();
        s.append(
            &run("alpha", 100),
            &[rec(1.0), Record::new("timer", "tsc").metric("hz", 2e9)],
        )
        .unwrap();
        // A host name that needs escaping in a folder name.
        s.append(&run("beta/2 x", 200), &[rec(2.0)]).unwrap();
        s
    }

    fn count(s: &Store) -> (usize, usize) {
        (
            s.runs(&Filter::default()).unwrap().len(),
            s.records(&Filter::default()).unwrap().len(),
        )
    }

    #[test]
    fn partition_values_round_trip() {
        for v in ["alpha", "beta/2 x", "a=b%c", "", "..", "héllo"] {
            assert_eq!(unescape_partition(&escape_partition(v)).as_deref(), Some(v));
        }
        assert_eq!(escape_partition("beta/2 x"), "beta%2F2%20x");
        assert_eq!(unescape_partition("%zz"), None);
    }

    #[test]
    fn a_jsonl_export_is_hive_partitioned_and_imports_once() {
        let tmp_1 = tmp("exp-src");
        let s = two_hosts(&tmp_1);
        let tmp_2 = tmp("exp-out");
        let dir = tmp_2.with_file_name("export");
        let sum = export(&s, &Filter::default(), &dir, ExportFormat::Jsonl).unwrap();
        assert_eq!((sum.files, sum.rows), (3, 3));
        let part = dir.join("lab=ipc/host=beta%2F2%20x/part-0.jsonl");
        let text = std::fs::read_to_string(&part).unwrap();
        let row: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert!(
            row.get("lab").is_none() && row.get("host").is_none(),
            "partition columns live in the path"
        );
        assert_eq!(row["metrics"]["msgs_per_s"], 2.0);
        assert_eq!(row["params"]["transport"], "shm");
        // An export never writes into a folder with files.
        assert!(export(&s, &Filter::default(), &dir, ExportFormat::Jsonl).is_err());

        let tmp_3 = tmp("imp");
        let mut t = Store::open(&tmp_3).unwrap();
        let got = import(&mut t, &dir).unwrap();
        assert_eq!((got.runs_added, got.records_added), (2, 3));
        assert_eq!(count(&t), (2, 3));
        let mut a = s.runs(&Filter::default()).unwrap();
        let mut b = t.runs(&Filter::default()).unwrap();
        a.sort_by(|x, y| x.run_id.cmp(&y.run_id));
        b.sort_by(|x, y| x.run_id.cmp(&y.run_id));
        assert_eq!(
            a, b,
            "runs come back whole: id, host, time, build, environment"
        );
        let again = import(&mut t, &dir).unwrap();
        assert_eq!((again.runs_added, again.runs_skipped), (0, 2));
        assert_eq!(count(&t), (2, 3));
    }

    #[test]
    fn a_result_file_imports_as_one_run_and_not_twice() {
        let env = json!({"hostname": "gamma", "started_utc": "2026-01-02T03:04:05.000Z",
                         "git_sha": "s", "build_profile": "release", "command_line": ["commbench", "ipc"]});
        let mut out = Vec::new();
        commbench_core::record::export(
            &[rec(5.0), rec(6.0)],
            commbench_core::record::Format::Jsonl,
            &env,
            &mut out,
        )
        .unwrap();
        let tmp_4 = tmp("results");
        let f = tmp_4.with_file_name("results.jsonl");
        std::fs::write(&f, &out).unwrap();
        let tmp_5 = tmp("imp-results");
        let mut t = Store::open(&tmp_5).unwrap();
        let got = import(&mut t, &f).unwrap();
        assert_eq!((got.runs_added, got.records_added), (1, 2));
        let r = &t.runs(&Filter::default()).unwrap()[0];
        assert_eq!(
            (r.host.as_str(), r.started_unix),
            ("gamma", parse_utc("2026-01-02T03:04:05Z").unwrap())
        );
        assert_eq!(import(&mut t, &f).unwrap().runs_skipped, 1);
        assert_eq!(count(&t), (1, 2));
    }

    #[test]
    fn a_bad_file_is_an_error_and_imports_nothing() {
        let tmp_6 = tmp("bad");
        let dir = tmp_6.with_file_name("bad");
        std::fs::create_dir_all(dir.join("lab=ipc/host=a")).unwrap();
        std::fs::write(
            dir.join("lab=ipc/host=a/part-0.jsonl"),
            "{\"run_id\": \"zz\", \"test\": \"t\"}\n",
        )
        .unwrap();
        let tmp_7 = tmp("imp-bad");
        let mut t = Store::open(&tmp_7).unwrap();
        assert!(import(&mut t, &dir).is_err());
        std::fs::write(dir.join("lab=ipc/host=a/part-0.jsonl"), "not json\n").unwrap();
        assert!(import(&mut t, &dir).is_err());
        assert_eq!(count(&t), (0, 0));
        assert!(import(&mut t, &dir.join("absent.jsonl")).is_err());
    }

    #[cfg(feature = "parquet")]
    #[test]
    fn a_parquet_export_reads_back_with_the_parquet_crate_and_imports() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        use parquet::record::Field;
        let tmp_8 = tmp("pq-src");
        let s = two_hosts(&tmp_8);
        let tmp_9 = tmp("pq-out");
        let dir = tmp_9.with_file_name("export");
        let sum = export(&s, &Filter::default(), &dir, ExportFormat::Parquet).unwrap();
        assert_eq!((sum.files, sum.rows), (3, 3));
        // Read independently of the importer.
        let f = std::fs::File::open(dir.join("lab=ipc/host=alpha/part-0.parquet")).unwrap();
        let r = SerializedFileReader::new(f).unwrap();
        assert_eq!(r.metadata().file_metadata().num_rows(), 1);
        let row = r.get_row_iter(None).unwrap().next().unwrap().unwrap();
        let get = |name: &str| {
            row.get_column_iter()
                .find(|(n, _)| n.as_str() == name)
                .map(|(_, f)| f.clone())
                .unwrap()
        };
        assert_eq!(get("started_unix"), Field::Long(100));
        assert_eq!(get("test"), Field::Str("reqres".into()));
        let Field::Str(m) = get("metrics") else {
            panic!("metrics is text")
        };
        assert_eq!(
            serde_json::from_str::<Value>(&m).unwrap()["msgs_per_s"],
            1.0
        );
        assert!(row
            .get_column_iter()
            .all(|(n, _)| n != "lab" && n != "host"));

        let tmp_10 = tmp("pq-imp");
        let mut t = Store::open(&tmp_10).unwrap();
        let got = import(&mut t, &dir).unwrap();
        assert_eq!((got.runs_added, got.records_added), (2, 3));
        let recs = t
            .records(&Filter {
                host: Some("beta/2 x".into()),
                ..Filter::default()
            })
            .unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].record, rec(2.0));
        assert_eq!(import(&mut t, &dir).unwrap().runs_skipped, 2);

        // DuckDB, when installed, reads the same files with Hive partitions.
        if let Ok(out) = std::process::Command::new("duckdb")
            .arg("-csv")
            .arg("-noheader")
            .arg("-c")
            .arg(format!(
                "SELECT count(*), count(DISTINCT host) FROM read_parquet('{}/**/*.parquet', hive_partitioning = true)",
                dir.display()
            ))
            .output()
        {
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "3,2");
        }
    }
}

mod hostile_stores {
    //! Stores that others could have written, damaged files and paths that
    //! are not files: refused with a message that says so, never written.
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_store_and_its_folders_are_private_to_the_user() {
        // The test process's umask (022 or 002 usually) no longer decides:
        // results describe the machine, and a folder others can write lets
        // them swap in a forged store.
        let t = tmp("private");
        let db = t.parent().unwrap().join("a/b/results.db");
        let mut s = Store::open(&db).unwrap();
        s.append(&run("h", 1_700_000_000), &[rec(1.0)]).unwrap();
        assert_eq!(mode(&db), 0o600, "the store");
        for d in [db.parent().unwrap(), db.parent().unwrap().parent().unwrap()] {
            assert_eq!(mode(d), 0o700, "{}", d.display());
        }
        for side in ["-wal", "-shm"] {
            let sp = PathBuf::from(format!("{}{side}", db.display()));
            if sp.exists() {
                assert_eq!(mode(&sp), 0o600, "{}", sp.display());
            }
        }
        drop(s);
        // A store an older commbench left readable by all is made private.
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(Store::open(&db).unwrap());
        assert_eq!(mode(&db), 0o600);
    }

    #[test]
    fn a_store_owned_by_another_user_is_refused_and_left_untouched() {
        let t = tmp("owner");
        drop(Store::open(&t).unwrap());
        // Only root can give a file away; others skip.
        if let Err(e) = std::os::unix::fs::chown(&*t, Some(65_534), None) {
            commbench_core::testing::skip("root", format!("cannot chown as this user ({e})"));
            return;
        }
        let before = std::fs::read(&*t).unwrap();
        let err = Store::open(&t).err().expect("must be refused").to_string();
        assert!(err.contains("belongs to") && err.contains("65534"), "{err}");
        assert!(
            err.contains("left untouched") && err.contains("--store"),
            "{err}"
        );
        assert_eq!(std::fs::read(&*t).unwrap(), before);
    }

    #[test]
    fn a_store_with_a_corrupt_page_is_refused_and_left_untouched() {
        // Regression: the header was sound, so appends went into the pages
        // that still were (exit 0, no warning) and `history` failed later.
        let p = tmp("badpage");
        {
            let mut s = Store::open(&p).unwrap();
            for i in 0..60 {
                let recs: Vec<Record> = (0..20).map(|k| rec((i * 100 + k) as f64)).collect();
                s.append(&run("h", 1_700_000_000 + i), &recs).unwrap();
            }
        }
        let mut bytes = std::fs::read(&*p).unwrap();
        let page = 4096;
        assert!(bytes.len() > 20 * page, "{} bytes", bytes.len());
        // Garbage over a page in the middle (a b-tree page of records).
        let at = (bytes.len() / page / 2) * page;
        for (i, b) in bytes[at..at + page].iter_mut().enumerate() {
            *b = (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] | 0x0d;
        }
        std::fs::write(&*p, &bytes).unwrap();
        let err = Store::open(&p).err().expect("must be refused").to_string();
        assert!(
            err.contains("damaged") && err.contains("left untouched"),
            "{err}"
        );
        assert!(err.contains(".recover"), "says what to do: {err}");
        assert_eq!(std::fs::read(&*p).unwrap(), bytes, "the file was modified");
    }

    #[test]
    fn a_character_device_as_store_is_refused_before_sqlite_opens_it() {
        // Regression: SQLite opened /dev/null and left /dev/null-journal.
        let journal = Path::new("/dev/null-journal");
        let existed = journal.exists();
        let res = Store::open(Path::new("/dev/null")).err();
        let left = !existed && journal.exists();
        if left {
            let _ = std::fs::remove_file(journal);
        }
        assert!(!left, "SQLite left /dev/null-journal");
        let err = res.expect("must be refused").to_string();
        assert!(
            err.contains("character device") && err.contains("not a regular file"),
            "{err}"
        );
        // A FIFO too (SQLite would block reading it).
        let t = tmp("fifo");
        let fifo = t.with_file_name("fifo.db");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let err = Store::open(&fifo)
                .err()
                .expect("must be refused")
                .to_string();
            assert!(err.contains("a FIFO"), "{err}");
        }
    }

    #[test]
    fn permission_denied_and_a_full_disk_say_so() {
        // Regression: both read "is not a commbench results store".
        let sqlite = |code| {
            sql_error(
                "/s.db",
                rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None),
            )
            .to_string()
        };
        for code in [
            rusqlite::ffi::SQLITE_CANTOPEN,
            rusqlite::ffi::SQLITE_PERM,
            rusqlite::ffi::SQLITE_READONLY,
        ] {
            let m = sqlite(code);
            assert!(m.contains("permission denied"), "{m}");
            assert!(!m.contains("not a commbench"), "{m}");
        }
        let m = sqlite(rusqlite::ffi::SQLITE_FULL);
        assert!(m.contains("disk") && m.contains("is full"), "{m}");
        let io =
            |k| io_error("/s.db", "cannot create it".into(), &std::io::Error::from(k)).to_string();
        assert!(io(std::io::ErrorKind::PermissionDenied).contains("permission denied"));
        assert!(io(std::io::ErrorKind::StorageFull).contains("is full"));
        // Through the store: a file that cannot be read.
        let t = tmp("denied");
        drop(Store::open(&t).unwrap());
        std::fs::set_permissions(&*t, std::fs::Permissions::from_mode(0o000)).unwrap();
        if std::fs::read(&*t).is_err() {
            let m = Store::open(&t).err().expect("must be refused").to_string();
            assert!(m.contains("permission denied"), "{m}");
        }
    }
}

mod hostile_imports {
    //! Imports of files made to hurt: bounded in bytes, lines, records and
    //! metrics; special files and links out of the folder refused; start
    //! times and the document's shape checked. Nothing is written then.
    use super::*;
    use crate::export::{import, import_with, parse_rfc3339_utc, ImportLimits};

    fn env(host: &str, utc: &str) -> Value {
        json!({"hostname": host, "started_utc": utc, "git_sha": "s",
               "build_profile": "release", "command_line": ["commbench", "ipc"]})
    }

    fn line(r: &Record, env: &Value) -> String {
        let mut r = r.clone();
        r.environment = Some(env.clone());
        serde_json::to_string(&r).unwrap() + "\n"
    }

    fn refused(s: &mut Store, p: &Path, lim: &ImportLimits, want: &str) {
        let err = import_with(s, p, lim).expect_err("must be refused");
        assert!(matches!(err, StoreError::Input(_)), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(want), "{msg}");
        assert!(msg.len() < 2000, "a short message: {} bytes", msg.len());
        assert_eq!(
            s.runs(&Filter::default()).unwrap().len(),
            0,
            "nothing written"
        );
    }

    #[test]
    fn a_long_line_a_big_record_and_many_metrics_are_bounded() {
        // Regression: a 200 MB line took 1.85 GB and grew the store by
        // 630 MB; a line of metric keys took 3.7 GB and 42 s.
        let t = tmp("bounds");
        let mut s = Store::open(&t).unwrap();
        let e = env("h", "2026-01-02T03:04:05.000Z");
        let f = t.with_file_name("big.jsonl");
        let big = rec(1.0).param("blob", "x".repeat(5 << 20));
        std::fs::write(&f, line(&big, &e)).unwrap();
        let d = ImportLimits::default();
        refused(&mut s, &f, &d, "--import-max-line-bytes");
        let long_lines = ImportLimits {
            max_line_bytes: 16 << 20,
            ..d
        };
        refused(&mut s, &f, &long_lines, "--import-max-record-bytes");
        let both = ImportLimits {
            max_record_bytes: 16 << 20,
            ..long_lines
        };
        assert_eq!(import_with(&mut s, &f, &both).unwrap().runs_added, 1);

        let t2 = tmp("metrics");
        let mut s2 = Store::open(&t2).unwrap();
        let mut many = rec(1.0);
        for k in 0..20_000 {
            many.push_metric(&format!("m{k}"), k);
        }
        std::fs::write(&f, line(&many, &e)).unwrap();
        refused(&mut s2, &f, &d, "--import-max-metrics");
        // Nested values count each.
        let nested = rec(1.0).metric("h", (0..20_000).collect::<Vec<_>>());
        std::fs::write(&f, line(&nested, &e)).unwrap();
        refused(&mut s2, &f, &d, "--import-max-metrics");
    }

    #[test]
    fn a_whole_import_is_bounded_in_bytes() {
        let t = tmp("total");
        let mut s = Store::open(&t).unwrap();
        let dir = t.with_file_name("many");
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..3 {
            let e = env("h", &format!("2026-01-0{}T00:00:00Z", i + 1));
            std::fs::write(dir.join(format!("r{i}.jsonl")), line(&rec(1.0), &e)).unwrap();
        }
        let one = std::fs::metadata(dir.join("r0.jsonl")).unwrap().len();
        let lim = ImportLimits {
            max_bytes: one * 2 + 1,
            ..ImportLimits::default()
        };
        refused(&mut s, &dir, &lim, "--import-max-bytes");
        let lim = ImportLimits {
            max_bytes: one * 3,
            ..lim
        };
        assert_eq!(import_with(&mut s, &dir, &lim).unwrap().runs_added, 3);
    }

    #[test]
    fn special_files_are_refused_and_never_read() {
        // Regression: /dev/zero grew to 2.1 GB in 3 s; a FIFO blocked forever.
        let t = tmp("special");
        let mut s = Store::open(&t).unwrap();
        let d = ImportLimits::default();
        refused(&mut s, Path::new("/dev/zero"), &d, "a character device");
        let dir = t.with_file_name("with-fifo");
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("part-0.jsonl");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            refused(&mut s, &fifo, &d, "a FIFO");
            refused(&mut s, &dir, &d, "a FIFO");
        }
    }

    #[test]
    fn symbolic_links_out_of_an_import_folder_are_not_followed() {
        // Regression: a link to / walked the whole file system.
        let t = tmp("links");
        let mut s = Store::open(&t).unwrap();
        let dir = t.with_file_name("exp");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let e = env("h", "2026-01-02T03:04:05Z");
        std::fs::write(dir.join("sub/r.jsonl"), line(&rec(1.0), &e)).unwrap();
        // Links inside the folder are fine, loops included.
        std::os::unix::fs::symlink(&dir, dir.join("sub/loop")).unwrap();
        std::os::unix::fs::symlink(dir.join("sub/r.jsonl"), dir.join("same.jsonl")).unwrap();
        std::os::unix::fs::symlink("/", dir.join("root")).unwrap();
        refused(&mut s, &dir, &ImportLimits::default(), "outside");
        std::fs::remove_file(dir.join("root")).unwrap();
        let outside = t.with_file_name("outside.jsonl");
        std::fs::write(&outside, line(&rec(2.0), &env("o", "2026-01-03T00:00:00Z"))).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("o.jsonl")).unwrap();
        refused(&mut s, &dir, &ImportLimits::default(), "outside");
        std::fs::remove_file(dir.join("o.jsonl")).unwrap();
        let got = import(&mut s, &dir).unwrap();
        assert_eq!((got.runs_added, got.records_added), (1, 1), "{got:?}");
    }

    #[test]
    fn start_times_must_be_rfc3339_utc_in_a_sane_range() {
        // Regression: `12` and `9999-99-99…` were imported as they were.
        assert_eq!(
            parse_rfc3339_utc("2026-11-24T10:52:06.123Z"),
            Some(1_795_517_526)
        );
        assert_eq!(
            parse_rfc3339_utc("2026-11-24T10:52:06+00:00"),
            Some(1_795_517_526)
        );
        assert_eq!(parse_rfc3339_utc("1970-01-01T00:00:00Z"), Some(0));
        for bad in [
            "12",
            "",
            "9999-99-99T99:99:99Z",
            "9999-12-31T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-11-24",
            "2026-11-24T10:52:06",
            "2026-11-24T10:52:06+02:00",
            "2026-11-24T10:52Z",
            "1969-12-31T23:59:59Z",
            "2026-11-24T10:52:06.Z",
        ] {
            assert_eq!(parse_rfc3339_utc(bad), None, "{bad}");
        }
        let t = tmp("utc");
        let mut s = Store::open(&t).unwrap();
        let f = t.with_file_name("r.jsonl");
        for bad in ["12", "9999-99-99T00:00:00Z", "\u{1b}[31mred"] {
            std::fs::write(&f, line(&rec(1.0), &env("h", bad))).unwrap();
            refused(
                &mut s,
                &f,
                &ImportLimits::default(),
                "not an RFC 3339 UTC time",
            );
            let msg = import(&mut s, &f).unwrap_err().to_string();
            assert!(!msg.contains('\u{1b}'), "escaped in the message: {msg}");
        }
        // An export row whose two times disagree.
        let dir = t.with_file_name("exp");
        std::fs::create_dir_all(dir.join("lab=ipc/host=h")).unwrap();
        let row = json!({"run_id": "ab", "started_utc": "2026-01-02T03:04:05Z", "started_unix": 5,
            "git_sha": "s", "build_profile": "release", "command_line": [], "environment": {},
            "test": "reqres", "params": {}, "metrics": {}, "match_key": ""});
        std::fs::write(dir.join("lab=ipc/host=h/part-0.jsonl"), format!("{row}\n")).unwrap();
        refused(&mut s, &dir, &ImportLimits::default(), "started_unix 5");
    }

    #[test]
    fn a_document_whose_records_are_not_an_array_is_refused() {
        // Regression: `"records": {}` imported 0 runs with exit 0, while
        // report and compare refused it.
        let t = tmp("shape");
        let mut s = Store::open(&t).unwrap();
        let f = t.with_file_name("doc.json");
        let d = ImportLimits::default();
        let doc = json!({"schema_version": 1, "environment": env("h", "2026-01-02T03:04:05Z"), "records": {}});
        std::fs::write(&f, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        refused(&mut s, &f, &d, "\"records\" is an object, not an array");
        std::fs::write(&f, "").unwrap();
        refused(&mut s, &f, &d, "no records");
        let doc = json!({"schema_version": 1, "environment": env("h", "2026-01-02T03:04:05Z"), "records": [rec(1.0)]});
        std::fs::write(&f, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        assert_eq!(import(&mut s, &f).unwrap().records_added, 1);
    }
}

/// Issue 38 items 3 and 10: Parquet imports bounded by what they decode,
/// not by file bytes, and damaged JSON columns refused instead of stored
/// as `{}`.
#[cfg(feature = "parquet")]
mod hostile_parquet {
    use super::*;
    use crate::export::{import_with, ImportLimits};
    use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use std::sync::Arc;

    /// The export's text columns, in its order.
    const COLUMNS: [&str; 10] = crate::part::TEXT_COLUMNS;

    /// An export part of `rows` identical rows (dictionary-encoded, so the
    /// file stays small), with `cell` giving a column's text (None: the
    /// column is left out).
    fn part(dir: &Path, rows: usize, cell: impl Fn(&str) -> Option<String>) -> PathBuf {
        let d = dir.join("lab=ipc/host=h");
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("part-0.parquet");
        let bytes = part_bytes(rows, |c| cell(c).map(String::into_bytes));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// The bytes of such a part, a column's cell given as bytes (UTF-8 or
    /// not).
    fn part_bytes(rows: usize, cell: impl Fn(&str) -> Option<Vec<u8>>) -> Vec<u8> {
        let cols: Vec<(&str, Vec<u8>)> = COLUMNS
            .iter()
            .filter_map(|c| cell(c).map(|v| (*c, v)))
            .collect();
        let mut schema = String::from("message history {\n  required int64 started_unix;\n");
        for (c, _) in &cols {
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
        for (_, v) in &cols {
            let mut cw = rg.next_column().unwrap().unwrap();
            let one = ByteArray::from(v.clone());
            cw.typed::<ByteArrayType>()
                .write_batch(&vec![one; rows], None, None)
                .unwrap();
            cw.close().unwrap();
        }
        rg.close().unwrap();
        w.close().unwrap();
        out
    }

    fn cell(c: &str) -> Option<String> {
        Some(match c {
            "run_id" => "00ff".into(),
            "started_utc" => "2026-01-01T00:00:00Z".into(),
            "command_line" => r#"["commbench","ipc"]"#.into(),
            "environment" => format!(r#"{{"host":"h","pad":"{}"}}"#, "x".repeat(1000)),
            "test" => "reqres".into(),
            "params" => r#"{"size":64}"#.into(),
            "metrics" => r#"{"msgs_per_s":1.0}"#.into(),
            _ => String::new(),
        })
    }

    fn refused(dir: &Path, lim: &ImportLimits, want: &str) {
        let t = tmp(&format!(
            "pqs-{}",
            dir.file_name().unwrap().to_string_lossy()
        ));
        let mut s = Store::open(&t).unwrap();
        let err = import_with(&mut s, dir, lim).expect_err("must be refused");
        assert!(matches!(err, StoreError::Input(_)), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(want), "{msg}");
        assert!(msg.len() < 2000, "a short message: {} bytes", msg.len());
        assert!(
            s.runs(&Filter::default()).unwrap().is_empty(),
            "nothing written"
        );
    }

    #[test]
    fn a_small_parquet_file_of_repeated_rows_decoded_without_bound() {
        let lim = ImportLimits {
            max_bytes: 4 << 20,
            ..ImportLimits::default()
        };
        // 3,000 rows of ~1.1 KB: few enough for the footer check, 6.5 MB
        // decoded from a file of a few KB.
        let t = tmp("pq-repeat");
        let p = part(&t, 3_000, cell);
        let file = std::fs::metadata(&p).unwrap().len();
        assert!(file < 100_000, "{file} bytes: not the small file meant");
        refused(&t, &lim, "rows decode to more");
        // 1M rows: refused from the footer, before decoding.
        let t = tmp("pq-million");
        part(&t, 1_000_000, |c| {
            (c != "environment")
                .then(|| cell(c).unwrap())
                .or(Some("{}".into()))
        });
        refused(&t, &lim, "1000000 rows");
        // Within the bound the same file imports.
        let t = tmp("pq-fits");
        part(&t, 1_000, cell);
        let ts = tmp("pq-fits-store");
        let mut s = Store::open(&ts).unwrap();
        assert_eq!(import_with(&mut s, &t, &lim).unwrap().records_added, 1_000);
    }

    #[test]
    fn a_parquet_cell_that_inflates_past_the_bound_was_decoded() {
        // 8 MB of one letter compresses to a few hundred KB.
        let lim = ImportLimits {
            max_bytes: 4 << 20,
            ..ImportLimits::default()
        };
        let t = tmp("pq-inflate");
        part(&t, 1, |c| match c {
            "metrics" => Some(format!(r#"{{"m":"{}"}}"#, "a".repeat(8 << 20))),
            _ => cell(c),
        });
        refused(&t, &lim, "once decompressed");
    }

    #[test]
    fn unparsable_parquet_metrics_or_environment_were_stored_as_empty() {
        let d = ImportLimits::default();
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        let cases: Vec<(&str, Option<String>, &str)> = vec![
            (
                "metrics",
                Some(r#"{"msgs_per_s":1."#.into()),
                "'metrics' is not JSON",
            ),
            (
                "metrics",
                Some(r#"{"x":NaN}"#.into()),
                "'metrics' is not JSON",
            ),
            ("params", Some(deep.clone()), "'params' is not JSON"),
            (
                "environment",
                Some(r#"{"host":"#.into()),
                "'environment' is not JSON",
            ),
            (
                "metrics",
                Some("[1,2]".into()),
                "'metrics' is not a JSON object",
            ),
            (
                "command_line",
                Some("commbench".into()),
                "'command_line' is not JSON",
            ),
            ("metrics", None, "no 'metrics'"),
            ("environment", None, "no 'environment'"),
        ];
        for (i, (col, v, want)) in cases.into_iter().enumerate() {
            let t = tmp(&format!("pq-bad-{i}"));
            part(&t, 1, |c| if c == col { v.clone() } else { cell(c) });
            refused(&t, &d, want);
        }
    }

    /// Found by the `store_parquet` fuzz target: the parquet crate's error
    /// for a text cell that is not UTF-8 lists the cell's bytes, and the
    /// import printed it whole.
    #[test]
    fn a_parquet_error_message_held_the_whole_cell() {
        let mut bad = vec![0xff; 100_000];
        bad.extend_from_slice(b"\x1b[31m");
        let data = part_bytes(1, |c| match c {
            "metrics" => Some(bad.clone()),
            _ => cell(c).map(String::into_bytes),
        });
        let lim = ImportLimits::default();
        let err = crate::part::parquet_rows(data, "p.parquet", "ipc", "h", &lim)
            .expect_err("must be refused");
        let msg = err.to_string();
        assert!(matches!(err, StoreError::Input(_)), "{err:?}");
        assert!(msg.starts_with("p.parquet row 1: "), "{msg}");
        assert!(msg.len() < 1_000, "a message of {} bytes", msg.len());
        assert!(!msg.chars().any(char::is_control), "{msg:?}");
    }

    fn rows_of(data: Vec<u8>) -> Result<Vec<crate::part::Row>, StoreError> {
        crate::part::parquet_rows(data, "p.parquet", "ipc", "h", &ImportLimits::default())
    }

    /// Where the footer puts column `name`'s first page.
    fn chunk_start(data: &[u8], name: &str) -> i64 {
        let md = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&bytes::Bytes::from(data.to_vec()))
            .unwrap();
        let c = md
            .row_group(0)
            .columns()
            .iter()
            .find(|c| c.column_path().string() == name)
            .unwrap();
        c.dictionary_page_offset().unwrap_or(c.data_page_offset())
    }

    /// A part of `rows` rows laid out by `props`, its columns optional or
    /// required, `cell(column, row)` its text (None: null).
    fn part_layout(
        props: WriterProperties,
        optional: bool,
        rows: usize,
        cell: impl Fn(&str, usize) -> Option<String>,
    ) -> Vec<u8> {
        let rep = if optional { "optional" } else { "required" };
        let mut schema = format!("message history {{\n  {rep} int64 started_unix;\n");
        for c in COLUMNS {
            schema.push_str(&format!("  {rep} binary {c} (UTF8);\n"));
        }
        schema.push('}');
        let schema = parquet::schema::parser::parse_message_type(&schema).unwrap();
        let mut out = Vec::new();
        let mut w = SerializedFileWriter::new(&mut out, Arc::new(schema), Arc::new(props)).unwrap();
        let mut rg = w.next_row_group().unwrap();
        let mut cw = rg.next_column().unwrap().unwrap();
        let defs = optional.then(|| vec![1i16; rows]);
        cw.typed::<Int64Type>()
            .write_batch(&vec![1_767_225_600; rows], defs.as_deref(), None)
            .unwrap();
        cw.close().unwrap();
        for c in COLUMNS {
            let cells: Vec<Option<String>> = (0..rows).map(|r| cell(c, r)).collect();
            let values: Vec<ByteArray> = cells
                .iter()
                .flatten()
                .map(|v| ByteArray::from(v.clone().into_bytes()))
                .collect();
            let defs: Option<Vec<i16>> =
                optional.then(|| cells.iter().map(|v| i16::from(v.is_some())).collect());
            let mut cw = rg.next_column().unwrap().unwrap();
            cw.typed::<ByteArrayType>()
                .write_batch(&values, defs.as_deref(), None)
                .unwrap();
            cw.close().unwrap();
        }
        rg.close().unwrap();
        w.close().unwrap();
        out
    }

    /// The pages are decoded here, not by the parquet crate: every layout
    /// a writer may choose for an export's columns reads back as written.
    #[test]
    fn parts_in_every_layout_a_writer_may_choose_read_back() {
        use parquet::basic::Compression;
        use parquet::file::properties::WriterVersion;
        let base = || WriterProperties::builder().set_compression(Compression::SNAPPY);
        let layouts = [
            ("dictionary, snappy", base().build()),
            ("plain", base().set_dictionary_enabled(false).build()),
            (
                "v2 pages",
                base()
                    .set_writer_version(WriterVersion::PARQUET_2_0)
                    .build(),
            ),
            (
                "uncompressed",
                base().set_compression(Compression::UNCOMPRESSED).build(),
            ),
            (
                "pages of 7 rows, plain after the dictionary",
                base()
                    .set_data_page_row_count_limit(7)
                    .set_write_batch_size(7)
                    .set_dictionary_page_size_limit(64)
                    .build(),
            ),
        ];
        let text = |c: &str, r: usize| {
            Some(match c {
                "test" => format!("t{r}"),
                "params" => format!(r#"{{"i":{r}}}"#),
                _ => cell(c).unwrap(),
            })
        };
        for (name, props) in layouts {
            for optional in [false, true] {
                let data = part_layout(props.clone(), optional, 40, text);
                let rows = rows_of(data).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(rows.len(), 40, "{name}");
                for (r, row) in rows.iter().enumerate() {
                    assert_eq!(row.record.test, format!("t{r}"), "{name}");
                    assert_eq!(row.record.params["i"], r, "{name}");
                    assert_eq!(row.run.started_unix, 1_767_225_600, "{name}");
                }
            }
            // A null where a text is needed is refused, naming it.
            let data = part_layout(props, true, 5, |c, r| {
                if c == "git_sha" && r == 3 {
                    None
                } else {
                    text(c, r)
                }
            });
            let err = rows_of(data).expect_err(name).to_string();
            assert!(
                err.contains("row 4: no text field 'git_sha'"),
                "{name}: {err}"
            );
        }
    }

    /// Found by the `store_parquet` fuzz target: a footer giving a column
    /// chunk a negative offset made the parquet crate assert (a panic, and
    /// the release build aborts on one) instead of refusing the file.
    #[test]
    fn a_negative_column_offset_in_the_footer_panicked() {
        let mut data = part_bytes(1, |c| cell(c).map(String::into_bytes));
        // The footer's first dictionary_page_offset (field 11 after field
        // 9, an i64: 0x26) is 4, right after the magic (zigzag 0x08):
        // zigzag 0x07 is -4, the same length.
        let footer_len =
            u32::from_le_bytes(data[data.len() - 8..data.len() - 4].try_into().unwrap());
        let footer = data.len() - 8 - footer_len as usize;
        let at = footer
            + data[footer..]
                .windows(2)
                .position(|w| w == [0x26, 0x08])
                .unwrap();
        data[at + 1] = 0x07;
        assert_eq!(chunk_start(&data, "started_unix"), -4);
        let err = rows_of(data).expect_err("must be refused").to_string();
        assert!(
            err.contains("column 'started_unix' declares bytes at -4"),
            "{err}"
        );
    }

    /// Found by the `store_parquet` fuzz target: a dictionary page
    /// declaring more values than it holds made the parquet crate's
    /// decoder index past the page and panic.
    #[test]
    fn a_dictionary_page_declaring_more_values_than_it_holds_panicked() {
        let mut data = part_bytes(1, |c| cell(c).map(String::into_bytes));
        // The metrics chunk's dictionary page header: its dictionary
        // header (field 7, a struct, after field 3: 0x4c) declares 1 value
        // (zigzag 0x02), PLAIN (0): 2 values instead.
        let start = chunk_start(&data, "metrics") as usize;
        let at = start
            + data[start..]
                .windows(5)
                .position(|w| w == [0x4c, 0x15, 0x02, 0x15, 0x00])
                .unwrap();
        data[at + 2] = 0x04;
        let err = rows_of(data).expect_err("must be refused").to_string();
        assert!(err.contains("column 'metrics'"), "{err}");
        assert!(
            err.contains("page 1: fewer than the 2 values declared"),
            "{err}"
        );
    }

    /// A page header declaring more decoded bytes than its column chunk
    /// does (the chunk's size is what the import counts against its
    /// bound) was allocated whole before decompressing, up to 2 GiB a
    /// page; the pages are now held to their chunk's size first.
    #[test]
    fn a_page_header_declaring_more_than_its_chunk_was_allocated() {
        // One 2 MB cell: its dictionary page declares 2 MB in a 4-byte
        // varint, rewritten to 128 MiB - 1 in the same 4 bytes.
        let big = format!(r#"{{"m":"{}"}}"#, "a".repeat(2 << 20));
        let mut data = part_bytes(1, |c| match c {
            "metrics" => Some(big.clone().into_bytes()),
            _ => cell(c).map(String::into_bytes),
        });
        let start = chunk_start(&data, "metrics") as usize;
        // type DICTIONARY_PAGE (0x15 0x04), uncompressed_page_size (0x15 …).
        assert_eq!(data[start..start + 3], [0x15, 0x04, 0x15]);
        let v = &mut data[start + 3..start + 7];
        assert!(
            v[..3].iter().all(|b| b & 0x80 != 0) && v[3] & 0x80 == 0,
            "{v:?}"
        );
        v.copy_from_slice(&[0xfe, 0xff, 0xff, 0x7f]);
        let err = rows_of(data).expect_err("must be refused").to_string();
        assert!(err.contains("column 'metrics'"), "{err}");
        assert!(
            err.contains("134217727 bytes once decoded, more than the"),
            "{err}"
        );
    }
}

/// Issue 38: no test imported a Parquet file another program wrote, so the
/// import's own page decoder was checked against the export's writer only.
/// Parts DuckDB 2.0 wrote from an export (`COPY … TO … (FORMAT PARQUET,
/// PARTITION_BY (lab, host))`: every column nullable, its own page and
/// dictionary layout) import; with `COMPRESSION zstd` too; with
/// `PARQUET_VERSION v2` (delta encodings) the refusal says what to do.
#[cfg(feature = "parquet")]
mod foreign_parquet {
    use super::*;
    use crate::export::{import_with, ImportLimits};

    fn data(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name)
    }

    /// The records imported from the fixture folder `name`, and the hosts
    /// of the runs the store then holds.
    fn import_dir(name: &str) -> Result<(usize, Vec<String>), StoreError> {
        let t = tmp(&format!("foreign-{name}"));
        let mut s = Store::open(&t).unwrap();
        let n = import_with(&mut s, &data(name), &ImportLimits::default())?.records_added;
        let hosts = s.runs(&Filter::default()).unwrap();
        Ok((n, hosts.into_iter().map(|r| r.host).collect()))
    }

    #[test]
    fn a_part_duckdb_wrote_was_never_imported() {
        for name in ["duckdb-snappy", "duckdb-zstd"] {
            let (n, hosts) = import_dir(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(n, 6, "{name}: the timer run's six records");
            assert_eq!(hosts, ["vm"], "{name}: one run, its host from the folder");
        }
    }

    #[test]
    fn a_part_in_delta_encodings_read_as_damaged() {
        let err = import_dir("duckdb-v2").expect_err("delta encodings are not read");
        let msg = err.to_string();
        assert!(matches!(err, StoreError::Input(_)), "{err:?}");
        assert!(msg.contains("values in the DELTA_"), "{msg}");
        assert!(msg.contains("rewrite the file"), "{msg}");
        assert!(!msg.contains("damaged"), "{msg}");
    }
}
