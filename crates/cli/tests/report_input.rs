//! `commbench report` (and `history --plot`) against hostile result files:
//! values plotters cannot draw, files past the load bounds, special files,
//! documents that hold no records. Each command runs under a timeout, so
//! that a hang fails the test instead of the suite.

use assert_cmd::Command;
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
    let mut c = Command::cargo_bin("commbench").unwrap();
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
