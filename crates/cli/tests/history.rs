//! The results store and `commbench history`: every run appended, runs of
//! several processes at once all kept, a bad store file a warning and never
//! touched, and the test harness itself never writing the user's store.

use assert_cmd::Command;
use commbench_store::{Filter, Store};
use std::path::{Path, PathBuf};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "commbench-history-test-{}-{name}-{}",
        std::process::id(),
        commbench_store::new_run_id().unwrap()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The binary with the store at `db` (the flag overrides the harness's
/// COMMBENCH_NO_STORE).
fn cb(db: &Path) -> Command {
    let mut c = Command::cargo_bin("commbench").unwrap();
    c.arg("--store").arg(db);
    c
}

fn budget(db: &Path, size: u32) {
    cb(db)
        .args(["budget", "--link", "10G", "--size", &size.to_string()])
        .assert()
        .success();
}

#[test]
fn the_test_harness_disables_the_user_store() {
    // .cargo/config.toml sets it for every process cargo test and nextest
    // start, and the binaries those tests spawn inherit it.
    assert_eq!(std::env::var("COMMBENCH_NO_STORE").as_deref(), Ok("1"));
}

#[test]
fn every_run_is_appended_with_its_environment() {
    let d = tmp("append");
    let db = d.join("results.db");
    budget(&db, 64);
    budget(&db, 128);
    let s = Store::open(&db).unwrap();
    let runs = s.runs(&Filter::default()).unwrap();
    assert_eq!(runs.len(), 2);
    assert_ne!(runs[0].run_id, runs[1].run_id);
    assert!(runs[0].command_line.iter().any(|a| a == "budget"));
    assert!(runs[0].environment.get("cpu_model").is_some());
    let recs = s.records(&Filter::default()).unwrap();
    assert!(recs.iter().all(|r| r.record.lab == "budget"));
    assert!(recs.iter().any(|r| r.run_id == runs[1].run_id));
}

#[test]
fn no_store_and_the_environment_choose_where_records_go() {
    let d = tmp("choice");
    let db = d.join("results.db");
    cb(&db)
        .args(["--no-store", "budget", "--link", "10G"])
        .assert()
        .failure(); // --store and --no-store conflict: a usage error
    Command::cargo_bin("commbench")
        .unwrap()
        .args(["budget", "--link", "10G", "--no-store"])
        .env("COMMBENCH_STORE", &db)
        .env_remove("COMMBENCH_NO_STORE")
        .assert()
        .success();
    assert!(!db.exists(), "--no-store wrote the store");
    Command::cargo_bin("commbench")
        .unwrap()
        .args(["budget", "--link", "10G"])
        .env("COMMBENCH_STORE", &db)
        .env_remove("COMMBENCH_NO_STORE")
        .assert()
        .success();
    assert_eq!(
        Store::open(&db)
            .unwrap()
            .runs(&Filter::default())
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn commands_that_measure_nothing_are_not_stored() {
    let d = tmp("nothing");
    let db = d.join("results.db");
    cb(&db).args(["env"]).assert().success();
    let n = if db.exists() {
        Store::open(&db)
            .unwrap()
            .runs(&Filter::default())
            .unwrap()
            .len()
    } else {
        0
    };
    assert_eq!(n, 0);
}

#[test]
fn a_store_that_is_not_a_database_warns_and_the_run_still_succeeds() {
    let d = tmp("foreign");
    let db = d.join("results.db");
    let text = "not a database\n".repeat(50);
    std::fs::write(&db, &text).unwrap();
    let out = cb(&db)
        .args(["budget", "--link", "10G", "--size", "64"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning: results not kept"), "{err}");
    assert!(err.contains("not an SQLite database"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).is_empty());
    assert_eq!(std::fs::read_to_string(&db).unwrap(), text);
}

#[test]
fn processes_appending_at_once_lose_nothing() {
    let d = tmp("concurrent");
    let db = d.join("results.db");
    let bin = assert_cmd::cargo::cargo_bin("commbench");
    let n = 6;
    let children: Vec<_> = (0..n)
        .map(|i| {
            std::process::Command::new(&bin)
                .arg("--store")
                .arg(&db)
                .args(["budget", "--link", "10G", "--size", &(64 + i).to_string()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("warning: results not kept"), "{err}");
    }
    let s = Store::open(&db).unwrap();
    assert_eq!(s.runs(&Filter::default()).unwrap().len(), n as usize);
    let mut sizes: Vec<String> = s
        .records(&Filter::default())
        .unwrap()
        .iter()
        .filter_map(|r| {
            r.record
                .params
                .get("frame_bytes")
                .or(r.record.params.get("size"))
                .map(|v| v.to_string())
        })
        .collect();
    sizes.sort();
    sizes.dedup();
    assert!(sizes.len() >= n as usize, "{sizes:?}");
}
