//! Integration tests of the `commbench` binary: help texts, usage errors,
//! exact figures, output validity against the committed JSON schema.

use crate::util::{assert_valid, bin_path, cb, fresh_dir, suite_steps};
use predicates::prelude::*;
use serde_json::Value;
use std::process::Stdio;

fn subcommands() -> Vec<String> {
    let out = cb().arg("--help").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let section = text.split("Commands:").nth(1).unwrap();
    section
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn every_subcommand_has_help() {
    let subs = subcommands();
    assert!(subs.len() >= 6, "{subs:?}");
    for s in subs {
        cb().args([s.as_str(), "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Usage:"));
    }
}

#[test]
fn unknown_subcommand_exits_2() {
    cb().arg("frobnicate")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unrecognized subcommand"));
}

#[test]
fn bad_arguments_exit_2_with_a_message() {
    let cases: &[(&[&str], &str)] = &[
        (&["budget", "--link", "10X"], "bad link speed '10X'"),
        (&["budget", "--size", "10"], "frame size 10 B is outside"),
        (&["budget", "--ghz=-1"], "is not a CPU clock"),
        (&["delay", "--samples", "0"], "--samples 0 is outside"),
        (&["delay", "--requests", "0"], "requested delay 0 ns"),
        (
            &["delay", "--methods", "sundial"],
            "invalid value 'sundial'",
        ),
        (&["timer", "--batches", "1"], "invalid value '1'"),
        (&["env", "--format", "xml"], "invalid value 'xml'"),
        (
            &["suite", "--only", "nope"],
            "--only/--skip nope: no such step",
        ),
        (
            &["suite", "--skip", "nope"],
            "--only/--skip nope: no such step",
        ),
        (&["suite", "--quick", "--full"], "cannot be used with"),
    ];
    for (args, msg) in cases {
        cb().args(*args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(*msg));
    }
}

#[test]
fn budget_reproduces_the_seed_figures() {
    cb().args(["budget", "--link", "10G", "--size", "64", "--ghz", "2.0"])
        .assert()
        .success()
        .stdout(predicate::str::is_match(r"mpps\s+14\.88\n").unwrap())
        .stdout(predicate::str::is_match(r"ns_per_packet\s+67\.2\n").unwrap())
        .stdout(predicate::str::is_match(r"cycles_per_packet\s+134\.4\n").unwrap());
}

#[test]
fn budget_table_covers_sizes_and_links() {
    let out = cb().args(["budget", "--format", "csv"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 6 * 5, "{text}");
    assert!(lines[0].starts_with("lab,test,link_gbps,frame_bytes,cpu_ghz,cpu_hz_source"));
    // 1518 B at 100 GbE: 100e9 / (1538 * 8) = 8.13 Mpps
    assert!(text.contains(",100.0,1518,"), "{text}");
    assert!(text.contains(",8.13,"), "{text}");
}

#[test]
fn env_json_is_complete_and_valid() {
    let out = cb().args(["env", "--format", "json"]).output().unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v);
    let env = &v["environment"];
    assert_eq!(env["command_line"][1], "env");
    assert!(env["tsc_hz"].as_f64().unwrap() > 0.0);
    assert_eq!(
        env["build_profile"],
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    // The record carries the same fingerprint, flattened.
    assert!(v["records"][0]["metrics"]["cpu_affinity"].is_string());
}

#[test]
fn debug_build_warns_loudly() {
    if cfg!(debug_assertions) {
        cb().args(["budget", "--size", "64", "--link", "1G"])
            .assert()
            .success()
            .stderr(predicate::str::contains("DEBUG build"));
    }
}

#[test]
fn jsonl_lines_validate() {
    for args in [
        &["budget", "--format", "jsonl"][..],
        &["timer", "--batches", "20", "--format", "jsonl"][..],
        &[
            "delay",
            "--requests",
            "1000",
            "--samples",
            "50",
            "--methods",
            "tsc-spin,volatile-loop",
            "--format",
            "jsonl",
        ][..],
    ] {
        let out = cb().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains("NaN"));
        for line in text.lines() {
            assert_valid(&serde_json::from_str(line).unwrap());
        }
    }
}

#[test]
fn output_file_is_written() {
    let dir = fresh_dir("out");
    let path = dir.join("b.json");
    cb().args(["budget", "--format", "json", "--output"])
        .arg(&path)
        .assert()
        .success()
        .stdout("");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_valid(&v);
    assert_eq!(v["records"].as_array().unwrap().len(), 30);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn output_to_unwritable_path_is_a_run_error() {
    cb().args(["budget", "--output", "/nonexistent-dir/x.csv"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cannot create output file"));
}

#[test]
fn timer_reports_every_read_method() {
    let out = cb()
        .args(["timer", "--batches", "20", "--format", "csv"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for m in [
        "rdtsc",
        "rdtscp",
        "lfence_rdtsc",
        "clock_gettime_monotonic_raw",
        "granularity_ns",
    ] {
        assert!(text.contains(m), "{m} missing:\n{text}");
    }
}

#[test]
fn delay_reports_median_p99_and_preemption() {
    let out = cb()
        .args([
            "delay",
            "--requests",
            "1000,2000",
            "--samples",
            "100",
            "--methods",
            "tsc-spin,nanosleep",
            "--format",
            "csv",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[0].contains("median_ns")
            && lines[0].contains("p99_ns")
            && lines[0].contains("preempted_pct")
    );
}

#[test]
fn suite_writes_results_jsonl() {
    let dir = fresh_dir("suite");
    cb().args(["suite", "--quick", "--only", "core", "--out"])
        .arg(&dir)
        .assert()
        .success()
        .stdout(predicate::str::contains("all records:"))
        .stdout(predicate::str::contains("how exactly can a loop wait"));
    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 5);
    assert!(dir.join("report.html").exists());
    for l in lines {
        assert_valid(&serde_json::from_str(l).unwrap());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn completions_and_man_page_cover_the_subcommands() {
    let out = cb().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for sub in ["suite", "pipeline", "mux", "pcap", "cbench"] {
        assert!(text.contains(sub), "bash completion lacks {sub}");
    }
    let out = cb().arg("man").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(".ie") || text.contains(".TH commbench"),
        "{}",
        &text[..200.min(text.len())]
    );
    assert!(
        text.contains("commbench\\-suite") || text.contains("commbench-suite"),
        "no suite page"
    );
    cb().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn suite_skip_leaves_steps_out_and_resume_keeps_finished_steps() {
    let dir = fresh_dir("suite-resume");
    cb().args([
        "suite",
        "--quick",
        "--skip",
        "ipc,openflow,mux,pcap,pipeline",
        "--out",
    ])
    .arg(&dir)
    .assert()
    .success();
    assert_eq!(
        suite_steps(&dir),
        vec![("core".to_owned(), "ok".to_owned())]
    );
    // Resuming with pipeline added keeps core's records and runs pipeline.
    cb().args(["suite", "--quick", "--only", "core,pipeline", "--resume"])
        .arg(&dir)
        .assert()
        .success()
        .stderr(predicate::str::contains("core: kept from"))
        .stdout(predicate::str::contains("ticks per packet"));
    let steps = suite_steps(&dir);
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert!(steps.iter().all(|(_, s)| s == "ok"), "{steps:?}");
    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
    assert!(text.contains("\"lab\":\"delay\"") && text.contains("\"lab\":\"pipeline\""));
    std::fs::remove_dir_all(&dir).unwrap();
    // A folder that holds no suite run is a usage error.
    cb().args(["suite", "--resume", "/nonexistent-commbench-dir"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--resume"));
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn clean_removes_dead_runs_and_keeps_live_ones() {
    // Dead: a pid above the kernel's hard pid_max limit (2^22).
    let dead = std::path::Path::new("/dev/shm")
        .join(format!("commbench-clitest-4194305-{}-0", rand_suffix()));
    let live_name = commbench_core::artifact::name("clitest");
    let live = std::path::Path::new("/dev/shm").join(&live_name);
    std::fs::write(&dead, b"x").unwrap();
    std::fs::write(&live, b"x").unwrap();
    let out = cb().args(["clean", "--format", "csv"]).output().unwrap();
    let dead_gone = !dead.exists();
    let live_kept = live.exists();
    let _ = std::fs::remove_file(&dead);
    let _ = std::fs::remove_file(&live);
    assert!(out.status.success(), "{out:?}");
    assert!(dead_gone, "dead run's file was not removed");
    assert!(live_kept, "live run's file was removed");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("removed") && text.contains("live"), "{text}");
}

#[test]
fn closed_stdout_exits_quietly() {
    let mut child = std::process::Command::new(bin_path())
        .args(["timer", "--batches", "10"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("error") && !err.contains("panicked"), "{err}");
}

#[test]
fn compare_gives_ratio_and_verdict() {
    let dir = fresh_dir("compare");
    let a = dir.join("a.jsonl");
    let b = dir.join("b.json");
    cb().args([
        "budget", "--link", "10G", "--format", "jsonl", "--ghz", "2", "--output",
    ])
    .arg(&a)
    .assert()
    .success();
    cb().args([
        "budget", "--link", "10G", "--format", "json", "--ghz", "2", "--output",
    ])
    .arg(&b)
    .assert()
    .success();
    let out = cb()
        .args(["compare", "--metrics", "mpps", "--format", "csv"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 7, "{text}");
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let row: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row[col("ratio")], "1.0", "{text}");
    assert_eq!(row[col("better")], "higher", "{text}");
    assert_eq!(row[col("verdict")], "no change", "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compare_rejects_files_that_are_not_results() {
    let dir = fresh_dir("compare-bad");
    let a = dir.join("a.json");
    std::fs::write(&a, "{\"x\": 1}").unwrap();
    // Not results: bad input, exit 2 (as `report` and `history --import`).
    cb().arg("compare")
        .arg(&a)
        .arg(&a)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not commbench output"));
    let b = dir.join("b.json");
    std::fs::write(&b, "{\"records\": {}}").unwrap();
    cb().arg("compare").arg(&b).arg(&b).assert().code(2);
    cb().args(["compare", "--threshold=-3"])
        .arg(&a)
        .arg(&a)
        .assert()
        .code(2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_writes_self_contained_html_with_plots() {
    let dir = fresh_dir("report");
    let a = dir.join("d.jsonl");
    cb().args([
        "delay",
        "--requests",
        "1000,2000,4000",
        "--samples",
        "50",
        "--methods",
        "tsc-spin",
        "--format",
        "jsonl",
        "--output",
    ])
    .arg(&a)
    .assert()
    .success();
    let html = dir.join("r.html");
    cb().arg("report")
        .arg(&a)
        .arg("-o")
        .arg(&html)
        .assert()
        .success();
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        text.contains("<svg")
            // The title's unit is its axis's: 1-4 µs are drawn in µs.
            && text.contains("delay: measured median vs requested (TSC spin, µs)")
    );
    assert!(!text.contains("<script src") && !text.contains("href=\"http"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn budget_rejects_links_and_clocks_out_of_range_with_short_messages() {
    for args in [
        vec!["budget", "--link", "18446744073709551616G"],
        vec!["budget", "--link", "0.5M"],
        vec!["budget", "--ghz", "1e-300"],
        vec!["budget", "--ghz", "1e308"],
        vec!["budget", "--ghz", "0"],
    ] {
        let out = cb().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.len() < 600, "message too long: {err}");
        assert!(!err.contains("00000000000000000000"), "{err}");
    }
}

/// Directions come from the labs' declared metrics: pcap's `pkt_s` and
/// `mb_s` are rates (the old name guess read `_s` as seconds, so 3.61M →
/// 7.04M packets/s was "slower" and `--fail-on-regression` was inverted),
/// pipeline's ticks per packet are costs.
#[test]
fn compare_judges_rates_and_costs_by_their_declared_direction() {
    let dir = fresh_dir("direction");
    let write = |name: &str, pkt_s: f64, ticks: f64| {
        let p = dir.join(name);
        // Five repeats each, ±1%: judged by the interval of the ratio.
        let s = |x: f64| serde_json::json!([x * 0.99, x, x * 1.01, x * 0.995, x * 1.005]);
        let recs = [
            serde_json::json!({"schema_version": 2, "lab": "pcap", "test": "extract",
                "params": {"threads": 1}, "metrics": {"pkt_s": pkt_s, "pkt_s_samples": s(pkt_s),
                "mb_s": pkt_s / 1e4, "mb_s_samples": s(pkt_s / 1e4)}}),
            serde_json::json!({"schema_version": 2, "lab": "pipeline", "test": "run",
                "params": {"mode": "rtc"}, "metrics": {"ticks_total": ticks, "ticks_total_samples": s(ticks),
                "mpps": 1e3 / ticks, "mpps_samples": s(1e3 / ticks)}}),
        ];
        let text: String = recs.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&p, text).unwrap();
        p
    };
    let slow = write("slow.jsonl", 3.61e6, 9.0);
    let fast = write("fast.jsonl", 7.04e6, 8.0);
    // A warm floor of 5% (the cold-start floor would call a 1.12× change
    // inconclusive: see compare_from_a_cold_start_never_cries_wolf).
    let verdicts = |a: &std::path::Path, b: &std::path::Path| {
        let out = cb()
            .args(["compare", "--all", "--format", "json", "--noise-floor", "5"])
            .arg(a)
            .arg(b)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["params"]["metric"].as_str().unwrap().to_owned(),
                    r["metrics"]["verdict"].as_str().unwrap().to_owned(),
                )
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let up = verdicts(&slow, &fast);
    assert_eq!(up["pkt_s"], "faster", "{up:?}");
    assert_eq!(up["mb_s"], "faster", "{up:?}");
    assert_eq!(up["mpps"], "faster", "{up:?}");
    assert_eq!(up["ticks_total"], "better", "{up:?}");
    let down = verdicts(&fast, &slow);
    assert_eq!(down["pkt_s"], "slower", "{down:?}");
    assert_eq!(down["ticks_total"], "worse", "{down:?}");
    // The gate: faster passes, slower fails.
    cb().args([
        "compare",
        "--fail-on-regression",
        "10",
        "--noise-floor",
        "5",
    ])
    .arg(&slow)
    .arg(&fast)
    .assert()
    .success();
    cb().args([
        "compare",
        "--fail-on-regression",
        "10",
        "--noise-floor",
        "5",
    ])
    .arg(&fast)
    .arg(&slow)
    .assert()
    .code(1);
    std::fs::remove_dir_all(&dir).ok();
}

/// `timer -o out.json` wrote the terminal table (and `compare` then
/// refused it as "not commbench output"); `report -o rep.pdf` wrote HTML
/// under that name; `suite -o summary.txt` wrote record dumps and no
/// answers. Each extension now writes its format, and any other is
/// refused with the list before anything runs.
#[test]
fn o_file_ignored_its_extension_on_most_commands() {
    let dir = fresh_dir("o-ext");
    for (ext, check) in [
        (
            "json",
            (|t: &str| {
                let v: Value = serde_json::from_str(t).expect("one JSON document");
                assert_valid(&v);
            }) as fn(&str),
        ),
        ("jsonl", |t: &str| {
            for l in t.lines() {
                assert_valid(&serde_json::from_str(l).expect("a JSON line"));
            }
        }),
        ("csv", |t: &str| {
            assert!(t.lines().next().unwrap().starts_with("lab,test"), "{t}")
        }),
        ("txt", |t: &str| {
            assert!(
                !t.trim_start().starts_with('{') && !t.starts_with("lab,"),
                "{t}"
            );
            assert!(t.contains("rdtsc"), "{t}");
        }),
    ] {
        let p = dir.join(format!("out.{ext}"));
        cb().args(["--no-store", "timer", "--batches", "20", "-o"])
            .arg(&p)
            .assert()
            .success()
            .stdout("");
        check(&std::fs::read_to_string(&p).unwrap());
    }
    // What timer wrote as JSON, compare reads.
    let j = dir.join("out.json");
    cb().args(["--no-store", "compare"])
        .arg(&j)
        .arg(&j)
        .assert()
        .success();
    for (args, bad) in [
        (vec!["timer", "--batches", "20"], "out.pdf"),
        (vec!["report", "x.json"], "rep.pdf"),
        (vec!["report", "x.json"], "rep.png"),
        (vec!["suite", "--quick", "--only", "core"], "summary.md"),
    ] {
        let p = dir.join(bad);
        cb().arg("--no-store")
            .args(&args)
            .arg("-o")
            .arg(&p)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!(
                ".{} is not a format",
                bad.rsplit('.').next().unwrap()
            )))
            .stderr(predicate::str::contains(".html").or(predicate::str::contains(".jsonl")));
        assert!(!p.exists(), "{bad} was written");
    }
    // The suite's answers, not its records, in summary.txt.
    let s = dir.join("summary.txt");
    cb().args(["--no-store", "suite", "--quick", "--only", "core", "--out"])
        .arg(dir.join("suite"))
        .arg("-o")
        .arg(&s)
        .assert()
        .success();
    let text = std::fs::read_to_string(&s).unwrap();
    assert!(text.contains("how exactly can a loop wait"), "{text}");
    assert!(text.contains("report:"), "{text}");
    assert!(!text.contains("lab: timer"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `merge seg-0.json` (the records file `mux load --segment -o` wrote)
/// said "an interval line without a Tag=" instead of naming the segment
/// file beside it.
#[test]
fn merge_of_a_records_file_did_not_point_at_its_segment_file() {
    let dir = fresh_dir("merge-json");
    let json = dir.join("seg-0.json");
    std::fs::write(&json, "{\"schema_version\": 2, \"records\": []}\n").unwrap();
    std::fs::write(dir.join("seg-0.json.hlog"), "#[commbench segment]\n").unwrap();
    cb().args(["--no-store", "merge"])
        .arg(&json)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("seg-0.json.hlog"))
        .stderr(predicate::str::contains("Tag=").not());
    std::fs::remove_dir_all(&dir).unwrap();
}
