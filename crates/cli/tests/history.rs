//! The results store and `commbench history`: every run appended, runs of
//! several processes at once all kept, a bad store file a warning and never
//! touched, and the test harness itself never writing the user's store.

use crate::util::{self, bin_path};
use assert_cmd::Command;
use commbench_store::{Filter, Store};
use predicates::prelude::PredicateBooleanExt;
use std::path::Path;

/// A fresh directory, removed when the guard drops (named so that
/// `commbench clean` finds it after a SIGKILL).
fn tmp(name: &str) -> commbench_core::artifact::TempDir {
    commbench_core::artifact::TempDir::new(&format!("historytest-{name}")).unwrap()
}

/// The binary with the store at `db` (the flag overrides the harness's
/// COMMBENCH_NO_STORE).
fn cb(db: &Path) -> Command {
    let mut c = util::cb();
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
    let db = d.path().join("results.db");
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
    let db = d.path().join("results.db");
    cb(&db)
        .args(["--no-store", "budget", "--link", "10G"])
        .assert()
        .failure(); // --store and --no-store conflict: a usage error
    util::cb()
        .args(["budget", "--link", "10G", "--no-store"])
        .env("COMMBENCH_STORE", &db)
        .env_remove("COMMBENCH_NO_STORE")
        .assert()
        .success();
    assert!(!db.exists(), "--no-store wrote the store");
    util::cb()
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
    let db = d.path().join("results.db");
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
    let db = d.path().join("results.db");
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
    let db = d.path().join("results.db");
    let bin = bin_path();
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

fn synthetic_run(db: &Path, host: &str, started_unix: i64, sha: &str, rate: f64) -> String {
    let mut s = Store::open(db).unwrap();
    let meta = commbench_store::RunMeta {
        run_id: commbench_store::new_run_id().unwrap(),
        started_utc: commbench_core::env::utc_rfc3339(started_unix, 0),
        started_unix,
        host: host.into(),
        git_sha: sha.into(),
        build_profile: "release".into(),
        command_line: vec!["commbench".into(), "ipc".into()],
        environment: serde_json::json!({"hostname": host}),
    };
    let recs = [
        {
            // msgs_per_s measured over five repeats (±1%): judged by its
            // interval; the latency has no samples.
            let mut r = commbench_core::record::Record::new("ipc", "reqres")
                .param("transport", "shm")
                .param("msg_len", 64)
                .metric("latency_ns", serde_json::json!({"p50": 1e9 / rate}));
            let xs: Vec<f64> = [0.99, 1.0, 1.01, 0.995, 1.005]
                .iter()
                .map(|k| k * rate)
                .collect();
            commbench_core::estimate::attach(
                &mut r.metrics,
                "msgs_per_s",
                &commbench_core::estimate::Estimate::from_samples(&xs),
            );
            r
        },
        commbench_core::record::Record::new("timer", "tsc").metric("hz", 1e9),
    ];
    assert!(s.append(&meta, &recs).unwrap());
    meta.run_id
}

fn json_records(c: &mut Command) -> Vec<serde_json::Value> {
    let out = c.args(["--format", "json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["records"].as_array().unwrap().clone()
}

fn of<'a>(recs: &'a [serde_json::Value], test: &str) -> Vec<&'a serde_json::Value> {
    recs.iter().filter(|r| r["test"] == test).collect()
}

#[test]
fn history_lists_the_runs_and_the_trend_per_host() {
    let d = tmp("trend");
    let db = d.path().join("results.db");
    synthetic_run(&db, "alpha", 1_000, "aaaa1111", 100.0);
    synthetic_run(&db, "beta", 2_000, "bbbb2222", 50.0);
    synthetic_run(&db, "alpha", 3_000, "cccc3333", 80.0);
    let recs = json_records(cb(&db).args(["history", "--lab", "ipc"]));
    assert_eq!(of(&recs, "run").len(), 3);
    let trends = of(&recs, "trend");
    assert_eq!(trends.len(), 2, "one trend per host");
    let alpha = trends
        .iter()
        .find(|t| t["params"]["host"] == "alpha")
        .unwrap();
    assert_eq!(alpha["params"]["metric"], "msgs_per_s");
    assert_eq!(alpha["metrics"]["runs"], 2);
    assert_eq!(alpha["metrics"]["first"], 100.0);
    assert_eq!(alpha["metrics"]["last"], 80.0);
    assert_eq!(alpha["metrics"]["ratio"], 0.8);
    // Judged as compare judges it: a 0.8× step from a store too young to
    // have learned a floor is within the cold-start floor.
    assert_eq!(alpha["metrics"]["verdict"], "inconclusive");
    // A chosen metric, a host and a date select.
    let recs = json_records(cb(&db).args([
        "history",
        "--lab",
        "ipc",
        "--metric",
        "latency_ns.p50",
        "--host",
        "alpha",
    ]));
    let t = of(&recs, "trend");
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["metrics"]["first"], 1e7);
    // The latency has no samples: its trend is not judged.
    assert_eq!(
        t[0]["metrics"]["verdict"], "no samples",
        "a latency without repeats"
    );
    let recs = json_records(cb(&db).args(["history", "--since", "1970-01-01T00:40"]));
    assert_eq!(of(&recs, "run").len(), 1, "only the run at 3000 s");
    cb(&db)
        .args(["history", "--since", "last tuesday"])
        .assert()
        .code(2);
}

#[test]
fn history_plot_draws_one_series_per_host() {
    let d = tmp("plot");
    let db = d.path().join("results.db");
    for (i, h) in ["alpha", "beta", "alpha", "beta"].iter().enumerate() {
        synthetic_run(&db, h, 1_000 * i as i64, "s", 100.0 + i as f64);
    }
    let html = d.path().join("trend.html");
    cb(&db)
        .args(["history", "--lab", "ipc", "--plot", "-o"])
        .arg(&html)
        .assert()
        .success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("<figure>").count(), 1, "ipc/reqres only");
    assert!(page.contains("<svg") && page.contains("alpha") && page.contains("beta"));
    cb(&db).args(["history", "--plot"]).assert().code(2);
}

#[test]
fn compare_with_the_last_run_gives_verdicts_and_fails_on_a_regression() {
    let d = tmp("baseline");
    let db = d.path().join("results.db");
    let first = synthetic_run(&db, "ci", 1_000, "aaaa1111", 100.0);
    synthetic_run(&db, "other", 1_500, "ffff0000", 10.0);
    synthetic_run(&db, "ci", 2_000, "bbbb2222", 80.0);
    // Two stored runs of host ci: no floor can be learned yet, so the
    // warm 5% floor is given (the cold-start floor would call 0.8×
    // inconclusive).
    let out = cb(&db)
        .args(["compare", "--baseline", "last", "--format", "json"])
        .args(["--noise-floor", "5"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&first),
        "the previous run of host ci"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rate = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["params"]["metric"] == "msgs_per_s")
        .unwrap()
        .clone();
    assert_eq!(rate["metrics"]["before"], 100.0);
    assert_eq!(rate["metrics"]["after"], 80.0);
    assert_eq!(rate["metrics"]["verdict"], "slower");
    // -20% is beyond 10% (exit 1) and within 30% (exit 0).
    cb(&db)
        .args([
            "compare",
            "--baseline",
            "last",
            "--fail-on-regression",
            "10",
            "--noise-floor",
            "5",
        ])
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "regressed beyond 10% with their whole interval",
        ));
    cb(&db)
        .args([
            "compare",
            "--baseline",
            "last",
            "--fail-on-regression",
            "30",
            "--noise-floor",
            "5",
        ])
        .assert()
        .success();
    // The same build's SHA names the run too.
    cb(&db)
        .args([
            "compare",
            "--baseline",
            "aaaa11",
            "--fail-on-regression",
            "10",
            "--noise-floor",
            "5",
        ])
        .assert()
        .code(1);
}

#[test]
fn a_saved_baseline_names_a_run_and_unknown_or_foreign_ones_are_usage_errors() {
    let d = tmp("named");
    let db = d.path().join("results.db");
    let first = synthetic_run(&db, "ci", 1_000, "aaaa1111", 100.0);
    let other = synthetic_run(&db, "other", 1_500, "ffff0000", 10.0);
    cb(&db)
        .args(["history", "--save-baseline", "v1.0", "--run", &first[..10]])
        .assert()
        .success();
    cb(&db)
        .args(["history", "--save-baseline", "theirs", "--run", &other])
        .assert()
        .success();
    synthetic_run(&db, "ci", 2_000, "bbbb2222", 100.0);
    synthetic_run(&db, "ci", 3_000, "cccc3333", 120.0);
    // Against v1.0 (100 → 120 msgs/s, five repeats each): faster, no
    // regression (the latency has no samples: not judged).
    cb(&db)
        .args(["compare", "--baseline", "v1.0", "--fail-on-regression", "1"])
        .args(["--noise-floor", "5"])
        .assert()
        .success()
        .stderr(predicates::str::contains(&first))
        .stderr(predicates::str::contains("1 faster"));
    cb(&db)
        .args(["compare", "--baseline", "theirs"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("of host other"));
    cb(&db)
        .args(["compare", "--baseline", "nope"])
        .assert()
        .code(2);
    cb(&db)
        .args(["history", "--save-baseline", "x", "--run", "0123456789"])
        .assert()
        .code(2);
}

#[test]
fn compare_a_result_file_with_the_run_before_it() {
    // Two real runs; the second's file is compared with the first stored
    // run, not with its own stored copy.
    let d = tmp("file");
    let db = d.path().join("results.db");
    let f1 = d.path().join("one.jsonl");
    let f2 = d.path().join("two.jsonl");
    for f in [&f1, &f2] {
        cb(&db)
            .args(["timer", "--batches", "20", "--format", "jsonl", "-o"])
            .arg(f)
            .assert()
            .success();
    }
    let runs = Store::open(&db).unwrap().runs(&Filter::default()).unwrap();
    assert_eq!(runs.len(), 2);
    cb(&db)
        .args(["compare", "--baseline", "last", "--all"])
        .arg(&f2)
        .assert()
        .success()
        .stderr(predicates::str::contains(&runs[0].run_id));
    // Nothing stored before the first run: a usage error.
    cb(&db)
        .args(["compare", "--baseline", "last"])
        .arg(&f1)
        .assert()
        .code(2);
}

#[test]
fn merging_another_hosts_export_shows_both_hosts() {
    let d = tmp("merge");
    let here = d.path().join("here.db");
    let there = d.path().join("there.db");
    synthetic_run(&here, "alpha", 1_000, "aaaa", 100.0);
    synthetic_run(&there, "beta", 1_100, "bbbb", 90.0);
    synthetic_run(&there, "beta", 1_200, "cccc", 95.0);
    let out = d.path().join("export");
    cb(&there)
        .args(["history", "--export", "jsonl"])
        .arg(&out)
        .assert()
        .success();
    assert!(out.join("lab=ipc/host=beta/part-0.jsonl").is_file());
    assert!(out.join("lab=timer/host=beta/part-0.jsonl").is_file());
    for expect in ["imported 2 runs", "imported 0 runs"] {
        cb(&here)
            .args(["history", "--import"])
            .arg(&out)
            .assert()
            .success()
            .stderr(predicates::str::contains(expect));
    }
    let recs = json_records(cb(&here).args(["history", "--lab", "ipc"]));
    assert_eq!(of(&recs, "run").len(), 3);
    let hosts: Vec<&str> = of(&recs, "trend")
        .iter()
        .map(|t| t["params"]["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["alpha", "beta"]);
    // An export never writes into a folder with files; a bad format is a usage error.
    cb(&there)
        .args(["history", "--export", "jsonl"])
        .arg(&out)
        .assert()
        .code(1)
        .stderr(predicates::str::contains("not empty"));
    cb(&there)
        .args(["history", "--export", "xlsx"])
        .arg(d.path().join("x"))
        .assert()
        .code(2);
}

#[test]
fn two_suites_then_history_shows_two_runs_and_compare_gives_verdicts() {
    let d = tmp("suite");
    let db = d.path().join("results.db");
    for out in ["one", "two"] {
        cb(&db)
            .args(["suite", "--quick", "--only", "core", "--out"])
            .arg(d.path().join(out))
            .assert()
            .success();
    }
    let recs = json_records(cb(&db).args(["history"]));
    let runs = of(&recs, "run");
    assert_eq!(runs.len(), 2);
    assert!(runs
        .iter()
        .all(|r| r["metrics"]["records"].as_u64().unwrap() > 0));
    let trends = of(&recs, "trend");
    assert!(trends
        .iter()
        .any(|t| t["params"]["source"] == "timer/read_cost"
            && t["metrics"]["runs"] == 2
            && t["metrics"]["verdict"].is_string()));
    let out = cb(&db)
        .args(["compare", "--baseline", "last", "--all", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let changes = v["records"].as_array().unwrap();
    assert!(!changes.is_empty());
    assert!(changes.iter().all(|c| c["metrics"]["verdict"].is_string()));
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn the_default_store_is_private_even_under_umask_000() {
    // Regression: under umask 000 the folders were 0777 (another user
    // swapped in a forged store) and under 022 the store was 0644.
    for umask in ["000", "022"] {
        let d = tmp(&format!("umask{umask}"));
        let xdg = d.path().join("xdg");
        let bin = bin_path();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
            .arg(&bin)
            .args(["budget", "--link", "10G", "--size", "64"])
            .env("XDG_DATA_HOME", &xdg)
            .env_remove("COMMBENCH_NO_STORE")
            .env_remove("COMMBENCH_STORE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let db = xdg.join("commbench/results.db");
        assert_eq!(mode(&db), 0o600, "umask {umask}: the store");
        assert_eq!(mode(&xdg.join("commbench")), 0o700, "umask {umask}");
        assert_eq!(mode(&xdg), 0o700, "umask {umask}: created for the store");
        for side in ["-wal", "-shm"] {
            let sp = xdg.join(format!("commbench/results.db{side}"));
            if sp.exists() {
                assert_eq!(mode(&sp), 0o600, "umask {umask}: {}", sp.display());
            }
        }
    }
}

#[test]
fn a_store_of_another_user_or_with_a_corrupt_page_is_refused_with_a_message() {
    let d = tmp("refused");
    let db = d.path().join("results.db");
    synthetic_run(&db, "alpha", 1_000, "aaaa", 100.0);
    let mut bytes = std::fs::read(&db).unwrap();
    // Damage every page but the first (header and schema stay sound).
    assert!(bytes.len() > 4096);
    bytes[4096..].iter_mut().for_each(|b| *b = 0x5a);
    std::fs::write(&db, &bytes).unwrap();
    let out = cb(&db)
        .args(["budget", "--link", "10G", "--size", "64"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: results not kept") && err.contains("damaged"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        bytes,
        "appended to a damaged store"
    );
    cb(&db)
        .args(["history"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("damaged"));
    // Another user's store (root can give one away; others skip).
    let theirs = d.path().join("theirs.db");
    synthetic_run(&theirs, "forged", 1_000, "ffff", 1.0);
    if std::os::unix::fs::chown(&theirs, Some(65_534), Some(65_534)).is_ok() {
        cb(&theirs)
            .args(["history"])
            .assert()
            .code(1)
            .stderr(predicates::str::contains("belongs to"))
            .stderr(predicates::str::contains("forged").not());
    }
}

/// A `--format jsonl` result file of one run on `host` started at `utc`.
fn result_file(path: &Path, host: &str, utc: &str) {
    let env = serde_json::json!({"hostname": host, "started_utc": utc, "git_sha": "s",
        "build_profile": "release", "command_line": ["commbench", "ipc"]});
    let mut out = Vec::new();
    commbench_core::record::export(
        &[commbench_core::record::Record::new("ipc", "reqres")
            .param("transport", "shm")
            .metric("msgs_per_s", 1.0)],
        commbench_core::record::Format::Jsonl,
        &env,
        &mut out,
    )
    .unwrap();
    std::fs::write(path, out).unwrap();
}

#[test]
fn hostile_imports_are_refused_with_exit_2_and_their_bounds_have_flags() {
    // Regression: /dev/zero read on past 2 GB; `"records": {}` imported 0
    // runs with exit 0; `started_utc: 12` went in as it was.
    let d = tmp("hostile-import");
    let db = d.path().join("results.db");
    let import = |p: &Path| {
        let mut c = cb(&db);
        c.args(["history", "--import"]).arg(p);
        c
    };
    import(Path::new("/dev/zero"))
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("character device"));
    let doc = d.path().join("doc.json");
    std::fs::write(
        &doc,
        r#"{"schema_version": 1, "environment": {}, "records": {}}"#,
    )
    .unwrap();
    import(&doc)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("not an array"));
    let f = d.path().join("r.jsonl");
    result_file(&f, "h", "12");
    import(&f)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("not an RFC 3339 UTC time"));
    result_file(&f, "h", "2026-01-02T03:04:05.000Z");
    import(&f)
        .args(["--import-max-bytes", "100"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--import-max-bytes"));
    import(&f)
        .args(["--import-max-line-bytes", "100"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--import-max-line-bytes"));
    import(&f)
        .args(["--import-max-metrics", "1"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--import-max-metrics"));
    import(&f)
        .args([
            "--import-max-bytes",
            "1M",
            "--import-max-record-bytes",
            "64K",
        ])
        .assert()
        .success()
        .stderr(predicates::str::contains("imported 1 runs"));
    // The bounds belong to --import.
    cb(&db)
        .args(["history", "--import-max-bytes", "1M"])
        .assert()
        .code(2);
}

#[test]
fn history_escapes_control_characters_of_imported_host_names() {
    // Regression: a host name with escape sequences retitled the terminal
    // and hid lines when `history` printed it.
    let d = tmp("escapes");
    let db = d.path().join("results.db");
    let f = d.path().join("r.jsonl");
    let evil = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m";
    result_file(&f, evil, "2026-01-02T03:04:05.000Z");
    cb(&db)
        .args(["history", "--import"])
        .arg(&f)
        .assert()
        .success();
    for format in ["table", "csv"] {
        let out = cb(&db)
            .args(["history", "--format", format])
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{format}: {text:?}"
        );
        assert!(
            text.contains("evil\\u{1b}]0;pwned\\u{7}"),
            "{format}: {text}"
        );
    }
    // JSON keeps the name exactly (escaped by JSON itself).
    let recs = json_records(cb(&db).args(["history"]));
    assert_eq!(of(&recs, "run")[0]["params"]["host"], evil);
}

#[test]
fn history_and_compare_show_a_stored_string_of_70000_characters() {
    // Regression: a string cell of 65,536 characters or more aborted
    // `history` (and every later call) and `compare --all`.
    let d = tmp("longcell");
    let db = d.path().join("results.db");
    let long = "p".repeat(70_000);
    for (t, rate) in [(1_000, 10.0), (2_000, 20.0)] {
        let mut s = Store::open(&db).unwrap();
        let meta = commbench_store::RunMeta {
            run_id: commbench_store::new_run_id().unwrap(),
            started_utc: commbench_core::env::utc_rfc3339(t, 0),
            started_unix: t,
            host: "h".into(),
            git_sha: "s".into(),
            build_profile: "release".into(),
            command_line: vec![],
            environment: serde_json::json!({"hostname": "h"}),
        };
        let r = commbench_core::record::Record::new("ipc", "reqres")
            .param("label", &long)
            .metric("msgs_per_s", rate);
        assert!(s.append(&meta, &[r]).unwrap());
    }
    for args in [
        &["history"][..],
        &["compare", "--baseline", "last", "--all"][..],
    ] {
        let out = cb(&db).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains('…'), "{args:?}: cut for display");
        assert!(text.lines().all(|l| l.len() < 2_000), "{args:?}");
    }
}

#[test]
fn regressions_lists_the_run_where_a_step_began_with_its_sha_and_interval() {
    let d = tmp("changepoint");
    let db = d.path().join("results.db");
    // Eight runs before the step and eight after: fewer cannot reach the
    // permutation test's 1% level with segments of at least five.
    let rates = [
        100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 80.0, 81.0, 79.0, 80.5, 79.5, 80.0,
        80.2, 79.8,
    ];
    let mut shas = Vec::new();
    for (i, r) in rates.iter().enumerate() {
        let sha = format!("{:08x}", 0xa000 + i);
        synthetic_run(&db, "ci", 1_000 + 100 * i as i64, &sha, *r);
        shas.push(sha);
    }
    // A flat series on another host: no change point.
    for i in 0..16 {
        let r = 50.0 + [0.0, 0.4, -0.3, 0.2, -0.1][i % 5];
        synthetic_run(&db, "flat", 1_050 + 100 * i as i64, "ffff", r);
    }
    let out = cb(&db)
        .args([
            "history",
            "--regressions",
            "--lab",
            "ipc",
            "--metric",
            "msgs_per_s",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let recs = v["records"].as_array().unwrap().clone();
    assert_eq!(
        recs.len(),
        1,
        "{recs:#?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cp = &recs[0];
    assert_eq!(cp["params"]["host"], "ci");
    assert_eq!(cp["params"]["git_sha"], shas[8], "{cp:#?}");
    assert_eq!(cp["metrics"]["verdict"], "slower");
    let (lo, hi) = (
        cp["metrics"]["ratio_lo"].as_f64().unwrap(),
        cp["metrics"]["ratio_hi"].as_f64().unwrap(),
    );
    assert!(lo <= 0.8 && (0.8..0.9).contains(&hi), "{cp:#?}");
    // The trend plot marks it.
    let page = d.path().join("trend.html");
    cb(&db)
        .args([
            "history",
            "--plot",
            "--lab",
            "ipc",
            "--metric",
            "msgs_per_s",
            "-o",
        ])
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(&format!("change point at run {}", cp["params"]["run"])),
        "no change-point mark on the trend plot"
    );
}

/// A run of `ipc reqres` whose `msgs_per_s` was measured five times
/// (±1%), started under load `load` on a two-CPU host.
fn loaded_run(db: &Path, started_unix: i64, rate: f64, load: f64) {
    let mut s = Store::open(db).unwrap();
    let meta = commbench_store::RunMeta {
        run_id: commbench_store::new_run_id().unwrap(),
        started_utc: commbench_core::env::utc_rfc3339(started_unix, 0),
        started_unix,
        host: "h".into(),
        git_sha: "s".into(),
        build_profile: "release".into(),
        command_line: vec!["commbench".into(), "ipc".into()],
        environment: serde_json::json!({"hostname": "h", "logical_cpus": 2, "load_average": [load, load, load]}),
    };
    let mut r = commbench_core::record::Record::new("ipc", "reqres").param("transport", "shm");
    let xs: Vec<f64> = [0.99, 1.0, 1.01, 0.995, 1.005]
        .iter()
        .map(|k| k * rate)
        .collect();
    commbench_core::estimate::attach(
        &mut r.metrics,
        "msgs_per_s",
        &commbench_core::estimate::Estimate::from_samples(&xs),
    );
    assert!(s.append(&meta, &[r]).unwrap());
}

/// history said "better" where compare said "inconclusive (load 3.5 vs
/// 1.9: the machine changed)" for the same two runs: history judged with
/// no floor and no load gap. Both now judge through one function.
#[test]
fn history_and_compare_give_the_same_verdict_on_one_pair_of_runs() {
    for (load_after, verdict) in [(1.9, "inconclusive"), (3.4, "faster")] {
        let d = tmp("same-verdict");
        let db = d.path().join("results.db");
        // Three times the rate: beyond even the cold-start floor.
        loaded_run(&db, 1_000, 100.0, 3.5);
        loaded_run(&db, 2_000, 300.0, load_after);
        let cmp = json_records(cb(&db).args(["compare", "--baseline", "last", "--all"]));
        let c = cmp
            .iter()
            .find(|r| r["params"]["metric"] == "msgs_per_s")
            .unwrap();
        let hist = json_records(cb(&db).args(["history", "--metric", "msgs_per_s"]));
        let t = hist.iter().find(|r| r["test"] == "trend").unwrap();
        assert_eq!(c["metrics"]["verdict"], verdict, "{c}");
        assert_eq!(
            t["metrics"]["verdict"], c["metrics"]["verdict"],
            "{t} vs {c}"
        );
        assert_eq!(t["metrics"]["note"], c["metrics"]["note"], "{t} vs {c}");
        assert_eq!(
            t["metrics"]["ratio_lo"], c["metrics"]["ratio_lo"],
            "{t} vs {c}"
        );
    }
}

/// `history` printed its runs as "history run 1 ..." under the record
/// table's "lab test" columns: the terminal view titles its two tables and
/// starts their columns with what the rows are.
#[test]
fn history_rows_do_not_read_history_run_under_lab_test() {
    let d = tmp("titles");
    let db = d.path().join("results.db");
    synthetic_run(&db, "h", 1_000, "aaaa", 100.0);
    synthetic_run(&db, "h", 2_000, "bbbb", 101.0);
    let out = cb(&db).args(["history"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains("history  run"), "{text}");
    assert!(!text.contains("history  trend"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "runs (2):", "{text}");
    assert!(lines[1].starts_with("run  run_id"), "{text}");
    let t = lines.iter().position(|l| l.starts_with("trends")).unwrap();
    assert!(lines[t + 1].starts_with("ipc/reqres · "), "{text}");
    assert!(
        lines[t + 2].contains("runs") && lines[t + 2].contains("verdict"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    // Machine formats keep every field, lab and test included.
    let recs = json_records(cb(&db).args(["history"]));
    assert_eq!(recs[0]["lab"], "history");
}
