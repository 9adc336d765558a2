use super::*;
use serde_json::json;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "commbench-store-test-{}-{name}-{}",
        std::process::id(),
        new_run_id().unwrap()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d.join("results.db")
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
fn a_directory_is_refused() {
    let p = tmp("dir");
    std::fs::create_dir_all(&p).unwrap();
    assert!(Store::open(&p).is_err());
}

#[test]
fn two_writers_at_once_lose_nothing() {
    // Both open the fresh file at the same time (both may try to create the
    // schema) and append in small transactions, interleaved.
    let p = tmp("concurrent");
    let per = 40;
    let handles: Vec<_> = (0..2)
        .map(|w| {
            let p = p.clone();
            std::thread::spawn(move || {
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
    assert_eq!(s.runs(&Filter::default()).unwrap().len(), 2 * per);
    let recs = s.records(&Filter::default()).unwrap();
    assert_eq!(recs.len(), 2 * per * 3);
    let mut vals: Vec<i64> = recs
        .iter()
        .map(|r| r.record.metric_f64("msgs_per_s").unwrap() as i64)
        .collect();
    vals.sort_unstable();
    vals.dedup();
    assert_eq!(vals.len(), 2 * per * 3, "every record once");
}

#[test]
fn match_key_is_lab_test_and_params() {
    assert_eq!(match_key(&rec(1.0)), "ipc/reqres transport=shm msg_len=64");
}
