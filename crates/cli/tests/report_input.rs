//! `commbench report` (and `history --plot`) against hostile result files:
//! values plotters cannot draw, files past the load bounds, special files,
//! documents that hold no records. Each command runs under a timeout, so
//! that a hang fails the test instead of the suite.

use crate::util;
use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// A fresh directory, removed when the guard drops (named so that
/// `commbench clean` finds it after a SIGKILL).
fn tmp(name: &str) -> commbench_core::artifact::TempDir {
    commbench_core::artifact::TempDir::new(&format!("reportinput-{name}")).unwrap()
}

/// The binary, bounded to 120 s, with the store off unless a test gives one.
fn cb() -> Command {
    let mut c = util::cb();
    c.timeout(Duration::from_secs(120));
    c
}

/// A `--format json` document of ipc reqres records over 1…4 sessions,
/// the last with `last_rate` as its rate, CPU cost and p99, started at
/// `utc`.
fn results(utc: &str, last_rate: f64) -> Value {
    let records: Vec<Value> = (1..=4u64)
        .map(|s| {
            json!({
                "schema_version": 1,
                "lab": "ipc",
                "test": "reqres",
                "params": {"transport": "shm", "size": 64, "sessions": s},
                "metrics": {
                    "msgs_per_s": if s == 4 { last_rate } else { 1000.0 * s as f64 },
                    "cpu_ns_per_op": if s == 4 { last_rate } else { 100.0 },
                    "rt_p50_ns": 300.0, "rt_p90_ns": 400.0, "rt_p99_ns": last_rate, "rt_p999_ns": 900.0,
                },
            })
        })
        .collect();
    json!({
        "environment": {
            "tool": "commbench",
            "git_sha": "abcdef",
            "build_profile": "release",
            "command_line": ["commbench", "ipc"],
            "started_utc": utc,
            "hostname": "alpha",
            "cpu_model": "Test CPU",
            "logical_cpus": 2,
        },
        "records": records,
    })
}

fn write(p: &Path, v: &Value) {
    std::fs::write(p, v.to_string()).unwrap();
}

/// 1.7e308 made plotters' log-axis tick code spin: `report` hung forever.
#[test]
fn report_of_a_metric_of_1_7e308_finishes_and_says_what_it_left_out() {
    let d = tmp("huge");
    let f = d.path().join("a.json");
    write(&f, &results("2026-11-24T10:00:00Z", 1.7e308));
    let page = d.path().join("report.html");
    cb().args(["--no-store", "report"])
        .arg(&f)
        .arg("-o")
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg"));
    assert!(html.contains("out of range"), "the caption says so");
}

/// After importing such a run, `history --plot` hung the same way.
#[test]
fn history_plot_after_importing_a_metric_of_1_7e308_finishes() {
    let d = tmp("huge-history");
    let db = d.path().join("results.db");
    for (i, (utc, rate)) in [
        ("2026-11-24T10:00:00Z", 4000.0),
        ("2026-11-24T11:00:00Z", 1.7e308),
        ("2026-11-24T12:00:00Z", 4100.0),
    ]
    .iter()
    .enumerate()
    {
        let f = d.path().join(format!("run{i}.json"));
        write(&f, &results(utc, *rate));
        cb().arg("--store")
            .arg(&db)
            .args(["history", "--import"])
            .arg(&f)
            .assert()
            .success();
    }
    let page = d.path().join("trend.html");
    cb().arg("--store")
        .arg(&db)
        .args(["history", "--plot", "-o"])
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg"));
}

/// `report` on `path`: exit 2 (bad input), saying `says`, and no page.
fn refused(d: &Path, path: &Path, says: &str) {
    let page = d.join("refused.html");
    cb().args(["--no-store", "report"])
        .arg(path)
        .arg("-o")
        .arg(&page)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(says));
    assert!(!page.exists());
}

/// `"records": {}` was reported as a failed run (exit 1) with serde's
/// words; a document without records rendered an empty page.
#[test]
fn report_refuses_a_document_without_an_array_of_records_with_exit_2() {
    let d = tmp("records");
    let f = d.path().join("x.json");
    for (doc, says) in [
        (
            r#"{"records": {}}"#,
            "\"records\" is an object, not an array of records",
        ),
        (r#"{"records": []}"#, "no records in it"),
        ("", "the file is empty"),
        ("{\"hello\": 1}", "not commbench output"),
    ] {
        std::fs::write(&f, doc).unwrap();
        refused(d.path(), &f, says);
    }
}

/// A FIFO hung `report` in its open; /dev/zero was read until memory ran
/// out; a 5 MiB line and a record of 20,000 metrics were taken whole.
#[test]
fn report_refuses_special_files_and_files_past_the_bounds_with_exit_2() {
    let d = tmp("bounds");
    let fifo = d.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    refused(
        d.path(),
        &fifo,
        "it is a FIFO: report reads regular files only",
    );
    refused(
        d.path(),
        Path::new("/dev/zero"),
        "it is a character device: report reads regular files only",
    );
    refused(d.path(), d.path(), "it is a directory");
    let mut rec = results("2026-11-24T10:00:00Z", 1.0)["records"][0].clone();
    rec["params"]["note"] = Value::from("x".repeat(5 << 20));
    let f = d.path().join("long.jsonl");
    std::fs::write(&f, rec.to_string()).unwrap();
    refused(d.path(), &f, "more than 4194304 in a line");
    let mut rec = results("2026-11-24T10:00:00Z", 1.0)["records"][0].clone();
    rec["metrics"] = (0..20_000)
        .map(|i| (format!("m{i}"), Value::from(i)))
        .collect::<serde_json::Map<_, _>>()
        .into();
    std::fs::write(&f, rec.to_string()).unwrap();
    refused(d.path(), &f, "more than 10000 parameters and metrics");
}
