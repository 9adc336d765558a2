//! `commbench ab` end to end: sides from `-L`, the command's records read
//! back, verdicts, exports, the gate, usage errors, and the CI recipe in
//! docs/ci.md run as written. The measured command is `budget` with a fixed
//! clock rate: its figures are arithmetic, so the verdicts are exact.

use crate::util::{self, bin_path, fresh_dir};
use assert_cmd::Command;
use serde_json::Value;

fn cb() -> Command {
    let mut c = util::cb();
    c.env("COMMBENCH_NO_STORE", "1");
    c
}

const QUICK: [&str; 6] = ["--min-pairs", "6", "--max-pairs", "6", "--warmup", "0"];

/// `ab ARGS` (six pairs, no warm-up) of A/A `budget` runs at 64 B on a
/// 10G link with a fixed clock: must succeed; returns the table.
fn ab_aa_budget(args: &[&str]) -> String {
    let out = cb()
        .arg("ab")
        .args(args)
        .args(["-L", "link", "10G,10G"])
        .args(QUICK)
        .args([
            "--", "budget", "--link", "{link}", "--size", "64", "--ghz", "2.5",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn ab_of_one_command_against_itself_is_no_change() {
    let text = ab_aa_budget(&[]);
    assert!(text.contains("ratio = B / A"), "{text}");
    assert!(text.contains("6 pairs (3 AB, 3 BA; seed 1)"), "{text}");
    assert!(text.contains("no change"), "{text}");
    assert!(
        !text.contains("slower") && !text.contains("faster"),
        "{text}"
    );
}

/// A fake build: a script that writes one `ipc reqres` record (whose
/// metrics the ipc lab declares: CPU per message lower is better, messages
/// per second higher) with the given figures, to the file named after
/// `--output` (ab appends `--format jsonl --output FILE`).
fn fake_build(dir: &std::path::Path, name: &str, cpu_ns: f64, msgs_per_s: f64) -> String {
    let p = dir.join(name);
    let rec = format!(
        r#"{{"schema_version":2,"lab":"ipc","test":"reqres","params":{{"transport":"pipe"}},"metrics":{{"cpu_ns_per_op":{cpu_ns},"msgs_per_s":{msgs_per_s}}}}}"#
    );
    std::fs::write(
        &p,
        format!("#!/bin/sh\nwhile [ $# -gt 1 ]; do [ \"$1\" = --output ] && out=$2; shift; done\necho '{rec}' > \"$out\"\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

#[test]
fn ab_finds_a_known_change_and_the_gate_fails_on_it() {
    let dir = fresh_dir("ab");
    let old = fake_build(&dir, "old", 1000.0, 50_000.0);
    let new = fake_build(&dir, "new", 1100.0, 45_000.0);
    let out = cb()
        .args([
            "ab",
            "--records",
            "-L",
            "bin",
            &format!("{old},{new}"),
            "--format",
            "jsonl",
        ])
        .args(QUICK)
        .args(["--", "{bin} ipc reqres"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let cpu = recs
        .iter()
        .find(|r| r["params"]["metric"] == "cpu_ns_per_op")
        .expect("cpu_ns_per_op judged");
    assert_eq!(cpu["lab"], "ab");
    assert_eq!(cpu["test"], "ipc/reqres");
    assert_eq!(cpu["params"]["a"], old.as_str());
    let r = cpu["metrics"]["ratio"].as_f64().unwrap();
    assert!((r - 1.1).abs() < 1e-9, "{r}");
    assert_eq!(cpu["metrics"]["verdict"], "worse");
    assert_eq!(cpu["metrics"]["headline"], true);
    assert_eq!(cpu["metrics"]["pairs"], 6);
    assert_eq!(cpu["metrics"]["pairs_ab"], 3);
    let rate = recs
        .iter()
        .find(|r| r["params"]["metric"] == "msgs_per_s")
        .unwrap();
    assert_eq!(rate["metrics"]["verdict"], "slower");
    // The gate: 10% worse CPU and 10% fewer messages are regressions
    // beyond 5%, not beyond 20%.
    let gate = |pct: &str| {
        cb().args([
            "ab",
            "--records",
            "-L",
            "bin",
            &format!("{old},{new}"),
            "--fail-on-regression",
            pct,
        ])
        .args(QUICK)
        .args(["--", "{bin} ipc reqres"])
        .output()
        .unwrap()
    };
    let out = gate("5");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("regression beyond 5%"), "{err}");
    assert!(err.contains("ipc/reqres cpu_ns_per_op"), "{err}");
    assert_eq!(gate("20").status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ab_writes_bencher_and_github_benchmark_json() {
    let dir = fresh_dir("ab");
    let old = fake_build(&dir, "old", 1000.0, 50_000.0);
    let new = fake_build(&dir, "new", 900.0, 55_000.0);
    let sides = format!("{old},{new}");
    let bmf = dir.join("ab.bmf.json");
    cb().args([
        "ab",
        "--records",
        "-L",
        "bin",
        &sides,
        "--format",
        "bmf",
        "-o",
    ])
    .arg(&bmf)
    .args(QUICK)
    .args(["--", "{bin} ipc reqres"])
    .assert()
    .success();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&bmf).unwrap()).unwrap();
    let m = &v["ipc/reqres"]["cpu_ns_per_op"];
    assert_eq!(m["value"].as_f64(), Some(900.0), "{v}");
    assert_eq!(m["lower_value"].as_f64(), Some(900.0), "{v}");
    assert_eq!(m["upper_value"].as_f64(), Some(900.0), "{v}");
    let r = &v["ipc/reqres"]["cpu_ns_per_op.ratio"];
    assert!((r["value"].as_f64().unwrap() - 0.9).abs() < 1e-9, "{v}");
    for (tool, metric, word) in [
        ("smaller", "cpu_ns_per_op", "better"),
        ("bigger", "msgs_per_s", "faster"),
    ] {
        let gh = dir.join(format!("ab.{tool}.json"));
        cb().args([
            "ab",
            "--records",
            "-L",
            "bin",
            &sides,
            "--format",
            "github-benchmark",
        ])
        .args(["--github-tool", tool, "-o"])
        .arg(&gh)
        .args(QUICK)
        .args(["--", "{bin} ipc reqres"])
        .assert()
        .success();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&gh).unwrap()).unwrap();
        let list = v.as_array().unwrap();
        assert_eq!(list.len(), 1, "{v}");
        assert_eq!(list[0]["name"], format!("ipc/reqres {metric}"));
        assert!(
            list[0]["extra"].as_str().unwrap().contains("6 pairs"),
            "{v}"
        );
        assert!(list[0]["extra"].as_str().unwrap().contains(word), "{v}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ab_runs_another_binary_named_by_the_side() {
    let me = bin_path();
    let sides = format!("{},{}", me.display(), me.display());
    cb().args(["ab", "-L", "bin", &sides])
        .args(QUICK)
        .args(["--", "{bin} budget --link 10G --size 64 --ghz 2.5"])
        .assert()
        .success();
}

#[test]
fn ab_refuses_what_it_cannot_compare() {
    let usage = |args: &[&str], needle: &str| {
        let out = cb().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    };
    usage(
        &["ab", "-L", "x", "1", "--", "budget", "--size", "{x}"],
        "at least two values",
    );
    usage(&["ab", "-L", "x", "1,2", "--", "budget"], "never uses {x}");
    usage(
        &[
            "ab",
            "-L",
            "x",
            "1,2",
            "--min-pairs",
            "20",
            "--max-pairs",
            "10",
            "--",
            "budget",
            "{x}",
        ],
        "below --min-pairs",
    );
    usage(
        &[
            "ab", "-L", "x", "1,2", "--budget", "soon", "--", "budget", "{x}",
        ],
        "not a duration",
    );
    usage(
        &["ab", "-L", "x", "1,2", "--", "budget '{x}"],
        "unbalanced quotes",
    );
    // A side whose command fails is named, with what it said (exit 1).
    let out = cb()
        .args(["ab", "-L", "size", "64,7"])
        .args(QUICK)
        .args(["--", "budget", "--size", "{size}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("side B (7)"), "{err}");
}

/// The `sh ci-ab` block of docs/ci.md, run as written with both builds
/// being this binary and small sizes: the recipe's commands parse, run,
/// write both files and pass the gate on an A/A.
#[test]
fn ci_recipe_in_docs_runs() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ci.md")).unwrap();
    let start = doc
        .find("```sh ci-ab\n")
        .expect("a ```sh ci-ab block in docs/ci.md")
        + 12;
    let script = &doc[start..start + doc[start..].find("```").unwrap()];
    let dir = fresh_dir("ab").join("ci");
    std::fs::create_dir_all(&dir).unwrap();
    let me = bin_path();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .env("BASE", &me)
        .env("HEAD", &me)
        .env("OUT", dir.join("out"))
        .env("MIN_PAIRS", "6")
        .env("MAX_PAIRS", "6")
        .env("PACKETS", "20000")
        .env("GATE_PCT", "50")
        .env("COMMBENCH_NO_STORE", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for f in ["pipeline-rtc.bmf.json", "pipeline-rtc.github.json"] {
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("out").join(f)).unwrap())
                .unwrap();
        assert!(v.is_object() || v.is_array(), "{f}: {v}");
    }
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

/// Two runs of one binary on a quiet 2-vCPU VM, empty store, differed by
/// up to 0.62× (pipeline ticks) and 1.43× (CPU per round trip): from a cold
/// start compare must call such swings inconclusive (and point at ab),
/// not fail a 10% gate; a change far beyond them is still a change.
#[test]
fn compare_from_a_cold_start_never_cries_wolf() {
    let dir = fresh_dir("ab");
    let s = |v: f64| -> Vec<f64> { (0..5).map(|i| v * (1.0 + 0.002 * i as f64)).collect() };
    let write = |name: &str, ticks: f64, cpu: f64| {
        let p = dir.join(name);
        let recs = [
            serde_json::json!({"schema_version": 2, "lab": "pipeline", "test": "run",
                "params": {"mode": "rtc"}, "metrics": {"ticks_total": ticks, "ticks_total_samples": s(ticks)}}),
            serde_json::json!({"schema_version": 2, "lab": "ipc", "test": "reqres",
                "params": {"transport": "pipe"}, "metrics": {"cpu_ns_per_op": cpu, "cpu_ns_per_op_samples": s(cpu)}}),
        ];
        let text: String = recs.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&p, text).unwrap();
        p
    };
    let a = write("a.jsonl", 1000.0, 2000.0);
    let swing = write("b.jsonl", 620.0, 2860.0);
    let out = cb()
        .args(["compare", "--fail-on-regression", "10"])
        .arg(&a)
        .arg(&swing)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("cold start"), "{err}");
    assert!(err.contains("commbench ab"), "{err}");
    // With a warm floor of 5% the same files fail the gate (the 1.43× CPU).
    cb().args([
        "compare",
        "--fail-on-regression",
        "10",
        "--noise-floor",
        "5",
    ])
    .arg(&a)
    .arg(&swing)
    .assert()
    .code(1);
    // A change far beyond any swing seen between runs is one, cold or not.
    let big = write("c.jsonl", 1000.0, 8000.0);
    cb().args(["compare", "--fail-on-regression", "10"])
        .arg(&a)
        .arg(&big)
        .assert()
        .code(1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ab_duet_runs_both_sides_at_once_on_two_cpus() {
    let online: Vec<usize> = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| {
            let s = s.trim().to_owned();
            let (a, b) = s.split_once('-')?;
            Some((a.parse().ok()?..=b.parse().ok()?).collect())
        })
        .unwrap_or_default();
    if !(online.contains(&0) && online.contains(&1)) {
        commbench_core::testing::skip("CPUs 0 and 1", "a duet needs CPUs 0 and 1 online");
        return;
    }
    let text = ab_aa_budget(&["--duet", "--duet-cpus", "0,1"]);
    assert!(
        text.contains("duet on cpus 0 and 1, swapped each pair"),
        "{text}"
    );
    assert!(text.contains("no change"), "{text}");
    // A duet on one CPU is refused.
    let out = cb()
        .args([
            "ab",
            "--duet",
            "--duet-cpus",
            "1,1",
            "-L",
            "link",
            "10G,10G",
        ])
        .args(["--", "budget", "--link", "{link}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn ab_keeps_its_verdicts_in_the_store() {
    // The verdicts are a run of lab `ab` in the store (the trials are
    // not: each child runs with the store off), in table and JSON alike.
    let dir = fresh_dir("ab-store");
    for format in ["table", "json"] {
        let store = dir.join(format!("{format}.db"));
        util::cb()
            .arg("--store")
            .arg(&store)
            .args(["ab", "--format", format, "-L", "link", "10G,10G"])
            .args(QUICK)
            .args([
                "--", "budget", "--link", "{link}", "--size", "64", "--ghz", "2.5",
            ])
            .assert()
            .success();
        assert_eq!(util::runs_in_store(&store), 1, "{format}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fake build that writes one record (ab's records mode) and first runs
/// `body` (shell), e.g. a daemon it detaches.
fn fake_build_doing(dir: &std::path::Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    let rec = r#"{"schema_version":2,"lab":"ipc","test":"reqres","params":{},"metrics":{"cpu_ns_per_op":1000,"msgs_per_s":5000}}"#;
    std::fs::write(
        &p,
        format!("#!/bin/sh\nwhile [ $# -gt 1 ]; do [ \"$1\" = --output ] && out=$2; shift; done\n{body}\necho '{rec}' > \"$out\"\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

/// Processes whose command line holds `needle` (a `sleep` of a duration
/// no other test uses).
fn processes_with(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            out.push(pid);
        }
    }
    out
}

/// A `sleep` duration unique to this test process and `tag`.
fn marker(tag: u32) -> String {
    format!("{}.{}{tag}", 4000 + tag, std::process::id())
}

fn ab_leftovers_in(tmp: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("commbench-ab-"))
        .collect()
}

/// Six pairs of a trial that detaches a daemon (`setsid … &`, as nginx
/// does) left two processes per pair running after ab returned (21 after
/// six pairs); with and without a cgroup, none is left.
#[test]
fn ab_trial_that_daemonizes_leaves_no_process() {
    for (i, no_cgroup) in [false, true].into_iter().enumerate() {
        let dir = fresh_dir("ab-daemon");
        let m = marker(10 + i as u32);
        let side = fake_build_doing(
            &dir,
            "srv",
            &format!("setsid sleep {m} &\n(setsid sleep {m} &) &\nsleep 0.01"),
        );
        let mut c = cb();
        if no_cgroup {
            c.env("COMMBENCH_NO_CGROUP", "1");
        }
        let out = c
            .env("TMPDIR", &dir)
            .args(["ab", "--records", "-L", "bin", &format!("{side},{side}")])
            .args(QUICK)
            .args(["--", "{bin}"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if no_cgroup {
            assert!(text.contains("no cgroup (turned off"), "{text}");
        }
        assert!(text.contains("subreaper"), "{text}");
        let left = processes_with(&format!("sleep {m}"));
        assert!(left.is_empty(), "no_cgroup {no_cgroup}: left {left:?}");
        assert!(
            ab_leftovers_in(&dir).is_empty(),
            "{:?}",
            ab_leftovers_in(&dir)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Starts ab on a trial that never ends (a daemon beside a long sleep)
/// and waits until both run; returns ab's child and the marker.
fn ab_stuck_in_a_trial(
    dir: &std::path::Path,
    tag: u32,
    no_cgroup: bool,
) -> (std::process::Child, String) {
    let m = marker(tag);
    let side = fake_build_doing(dir, "stuck", &format!("setsid sleep {m} &\nsleep {m}"));
    let mut c = std::process::Command::new(bin_path());
    if no_cgroup {
        c.env("COMMBENCH_NO_CGROUP", "1");
    }
    let child = c
        .env("COMMBENCH_NO_STORE", "1")
        .env("TMPDIR", dir)
        .args(["ab", "--records", "-L", "bin", &format!("{side},{side}")])
        .args(QUICK)
        .args(["--", "{bin}"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while processes_with(&format!("sleep {m}")).len() < 2 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "the trial did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    (child, m)
}

fn gone_within(m: &str, secs: u64) -> Vec<u32> {
    let t0 = std::time::Instant::now();
    loop {
        let left = processes_with(&format!("sleep {m}"));
        if left.is_empty() || t0.elapsed() > std::time::Duration::from_secs(secs) {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A closed terminal (SIGHUP) ended ab with 129 and left its running
/// trial reparented to init and its temp dir behind: now ab cleans up as
/// on SIGINT, and exits 129.
#[test]
fn ab_sighup_leaves_no_trial_and_no_temp_dir() {
    let dir = fresh_dir("ab-hup");
    let (child, m) = ab_stuck_in_a_trial(&dir, 20, false);
    commbench_core::sys::kill(child.id() as i32, libc::SIGHUP).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(129),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = gone_within(&m, 5);
    assert!(left.is_empty(), "left {left:?}");
    assert!(
        ab_leftovers_in(&dir).is_empty(),
        "{:?}",
        ab_leftovers_in(&dir)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGKILL of ab left its trial running (and, without a death signal,
/// every daemon it had detached); the main child now dies with ab, and
/// `commbench clean` kills what remains (found by cgroup, or by the name
/// in its environment) and removes the temp dir.
#[test]
fn ab_sigkill_leaves_nothing_after_clean() {
    for (i, no_cgroup) in [false, true].into_iter().enumerate() {
        let dir = fresh_dir("ab-kill");
        let (mut child, m) = ab_stuck_in_a_trial(&dir, 30 + i as u32, no_cgroup);
        commbench_core::sys::kill(child.id() as i32, libc::SIGKILL).unwrap();
        child.wait().unwrap();
        cb().env("TMPDIR", &dir).arg("clean").assert().success();
        let left = gone_within(&m, 5);
        assert!(left.is_empty(), "no_cgroup {no_cgroup}: left {left:?}");
        assert!(
            ab_leftovers_in(&dir).is_empty(),
            "{:?}",
            ab_leftovers_in(&dir)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `ab` of a program that writes no records: the new user's first try,
/// `sleep {d}`, failed with "sleep: unrecognized option '--format'". Now
/// it is timed as a process tree, and three values give two comparisons
/// against the first, exported in hyperfine's JSON and Markdown.
#[test]
fn ab_times_any_program_and_exports_hyperfine_json() {
    let dir = fresh_dir("ab-exec");
    let json = dir.join("h.json");
    let md = dir.join("h.md");
    let out = cb()
        .args([
            "ab",
            "-L",
            "d",
            "0.01,0.02,0.03",
            "-r",
            "6",
            "--warmup",
            "0",
        ])
        .args(["--contamination", "99", "--export-json"])
        .arg(&json)
        .arg("--export-markdown")
        .arg(&md)
        .args(["--", "sleep {d}"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.matches("commbench ab · d: A = 0.01").count(),
        2,
        "{text}"
    );
    assert!(text.contains("A = 0.01, B = 0.03"), "{text}");
    // hyperfine's schema, as a script reading hyperfine's file checks it.
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let results = v["results"].as_array().expect("results[]");
    assert_eq!(results.len(), 3);
    let number = |x: &Value| x.is_number();
    for (i, r) in results.iter().enumerate() {
        assert!(r["command"].is_string(), "{r}");
        for k in ["mean", "median", "user", "system", "min", "max"] {
            assert!(number(&r[k]), "{k}: {r}");
        }
        assert!(number(&r["stddev"]) || r["stddev"].is_null(), "{r}");
        let times = r["times"].as_array().unwrap();
        assert!(times.iter().all(number));
        let codes = r["exit_codes"].as_array().unwrap();
        assert_eq!(codes.len(), times.len());
        assert!(codes.iter().all(|c| c.as_i64() == Some(0)));
        assert!(r["memory_usage_byte"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m.as_u64().is_some()));
        let params = r["parameters"].as_object().unwrap();
        assert!(params["d"].is_string());
        // The baseline's runs pooled over both comparisons.
        assert_eq!(times.len(), if i == 0 { 12 } else { 6 }, "{r}");
        let (mean, min, max) = (
            r["mean"].as_f64().unwrap(),
            r["min"].as_f64().unwrap(),
            r["max"].as_f64().unwrap(),
        );
        assert!(min <= mean && mean <= max, "{r}");
    }
    assert_eq!(results[2]["command"], "sleep 0.03");
    assert_eq!(results[1]["parameters"]["d"], "0.02");
    let table = std::fs::read_to_string(&md).unwrap();
    assert!(
        table.starts_with("| Command | Mean [ms] | Min [ms] | Max [ms] | Relative |\n|:---|---:|---:|---:|---:|\n"),
        "{table}"
    );
    assert_eq!(table.lines().count(), 5, "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An external program on both sides with a number it prints
/// (`--metric`), per-operation figures (`--ops`), and hyperfine's
/// --setup, --prepare and --cleanup, each run as often as it should be.
#[test]
fn ab_reads_a_number_the_program_prints_and_runs_setup_prepare_cleanup() {
    let dir = fresh_dir("ab-exec");
    let d = dir.display();
    let out = cb()
        .args(["ab", "-L", "v", "100,200", "-r", "6", "--warmup", "1"])
        .args(["--contamination", "99", "--ops", "1000", "--format", "json"])
        .args(["--metric", "got:higher=value=([0-9]+)"])
        .args(["--setup", &format!("echo s >> {d}/setup-{{v}}")])
        .args(["--prepare", &format!("echo p >> {d}/prepare-{{v}}")])
        .args(["--cleanup", &format!("echo c >> {d}/cleanup-{{v}}")])
        .args(["--", "echo", "value={v}"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    let recs = v["records"].as_array().unwrap();
    let got = recs
        .iter()
        .find(|r| r["params"]["metric"] == "got")
        .expect("got");
    assert_eq!(got["metrics"]["ratio"], 2.0, "{got}");
    assert_eq!(got["metrics"]["verdict"], "faster", "{got}");
    assert_eq!(got["metrics"]["headline"], true, "{got}");
    let metrics: Vec<&str> = recs
        .iter()
        .map(|r| r["params"]["metric"].as_str().unwrap())
        .collect();
    for m in [
        "wall_s",
        "cpu_s",
        "user_s",
        "sys_s",
        "max_rss_kib",
        "cpu_ns_per_op",
        "ops_per_s",
    ] {
        assert!(metrics.contains(&m), "{m} not in {metrics:?}");
    }
    let lines = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    // A pair a loaded host contaminated, or one that failed, is redone
    // (with its own prepare): the record counts them.
    let redone = ["redone_contaminated", "redone_failed"]
        .iter()
        .map(|k| got["metrics"][*k].as_u64().unwrap_or(0) as usize)
        .sum::<usize>();
    for side in ["100", "200"] {
        assert_eq!(lines(&format!("setup-{side}")), 1);
        assert_eq!(lines(&format!("cleanup-{side}")), 1);
        // Six kept pairs, one warm-up pair and the redone ones: a prepare
        // before each trial.
        assert_eq!(lines(&format!("prepare-{side}")), 7 + redone, "{got}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A daemonizing command timed as a process tree: the daemon is killed
/// with its trial, with and without a cgroup, and counted in its tree.
#[test]
fn ab_exec_of_a_daemonizing_command_leaves_no_process() {
    for (i, no_cgroup) in [false, true].into_iter().enumerate() {
        let m = marker(40 + i as u32);
        let mut c = cb();
        if no_cgroup {
            c.env("COMMBENCH_NO_CGROUP", "1");
        }
        let out = c
            .args([
                "ab",
                "-L",
                "x",
                "1,2",
                "-r",
                "6",
                "--warmup",
                "0",
                "--contamination",
                "99",
            ])
            .args(["--", &format!("setsid sleep {m} & : {{x}}")])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let left = processes_with(&format!("sleep {m}"));
        assert!(left.is_empty(), "no_cgroup {no_cgroup}: left {left:?}");
    }
}

/// `commbench estimate`: the statistics bench/'s scripts print, from
/// core::estimate (their own copy, bench/stats.py, is gone).
#[test]
fn estimate_prints_what_core_computes() {
    let run = |args: &[&str]| {
        let out = cb().arg("estimate").args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        )
    };
    let (code, text) = run(&["median", "10.2", "10.4", "9.9", "10.1", "10.3", "10.0"]);
    assert_eq!(code, Some(0));
    let e = commbench_core::estimate::Estimate::from_samples(&[10.2, 10.4, 9.9, 10.1, 10.3, 10.0]);
    assert_eq!(text, format!("{:.3} [{:.3}, {:.3}]", e.median, e.lo, e.hi));
    let (_, text) = run(&[
        "ratio",
        "--before",
        "1 1.1 0.9 1",
        "--after",
        "2,2.2,1.8,2",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!((v["estimate"].as_f64().unwrap() - 2.0).abs() < 1e-9, "{v}");
    let (_, text) = run(&[
        "paired",
        "--before",
        "1 2 3 4 5 6",
        "--after",
        "2 4 6 8 10 12",
    ]);
    assert_eq!(text, "2.00× [2.00, 2.00]");
    assert_eq!(run(&["median", "ten"]).0, Some(2));
    assert_eq!(
        run(&["paired", "--before", "1 2", "--after", "1"]).0,
        Some(2)
    );
}

/// `--shared-cpu` needs each side in a cgroup of the CPU controller: where
/// there is none (here: cgroups turned off), ab refuses before any trial
/// and says what to use instead.
#[test]
fn a_shared_cpu_duet_is_refused_without_the_cgroup_cpu_controller() {
    let cpu = commbench_core::placement::current_affinity().cpus()[0].to_string();
    let out = cb()
        .env(commbench_core::proctree::NO_CGROUP_ENV, "1")
        .args(["ab", "--shared-cpu", &cpu, "-L", "d", "0.01,0.02"])
        .args(QUICK)
        .args(["--", "sleep {d}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--shared-cpu puts each side in a cgroup of equal CPU weight")
            && err.contains(commbench_core::proctree::NO_CGROUP_ENV)
            && err.contains("--duet"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn a_shared_cpu_duet_takes_one_cpu_this_process_may_use() {
    let out = cb()
        .args(["ab", "--shared-cpu", "4096", "-L", "d", "0.01,0.02"])
        .args(QUICK)
        .args(["--", "sleep {d}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--shared-cpu: CPU 4096"), "{err}");
}

/// A CPU-bound program's CPU time that stays inconclusive one side after
/// the other gets the shared-CPU duet suggested; as a shared duet it is
/// judged on CPU time alone, and the table says why not on wall time.
#[test]
fn an_exec_run_suggests_the_shared_duet_and_judges_cpu_time_there() {
    // A threshold of 0.01% leaves an A/A's CPU interval inconclusive,
    // unless (one run in twenty, more on a loaded host) the interval
    // misses 1 by chance and calls it faster or slower: then no hint is
    // due, and the A/A is run again, at most three times.
    let mut inconclusive = false;
    for _ in 0..3 {
        let out = cb()
            .args(["ab", "-L", "d", "0.01,0.01", "--threshold", "0.01"])
            .args(["--contamination", "99"])
            .args(QUICK)
            .args(["--", "sleep {d}"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        inconclusive = text.contains("exec/command cpu_s: inconclusive");
        assert_eq!(text.contains("(--shared-cpu CPU)"), inconclusive, "{text}");
        if inconclusive {
            break;
        }
    }
    assert!(inconclusive, "three A/As in a row were decided");
    if let Err(e) = commbench_core::proctree::TreeGroup::create_weighted("abtest") {
        commbench_core::testing::skip("cgroup CPU controller", e);
        return;
    }
    let cpu = commbench_core::placement::current_affinity().cpus()[0].to_string();
    let out = cb()
        .args(["ab", "--shared-cpu", &cpu, "-L", "n", "2000,4000"])
        .args(["--contamination", "99", "--threshold", "0.01"])
        .args(QUICK)
        .args(["--", "awk 'BEGIN{for(i=0;i<{n};i++)s+=i}'"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("note: wall time is not judged in a shared-CPU duet"),
        "{text}"
    );
    // The headlines: CPU time, not wall time; and no hint to do what it does.
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.ends_with(" exec/command cpu_s") || l.ends_with(" exec/command wall_s"))
        .collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].ends_with("cpu_s"), "{text}");
    assert!(!text.contains("(--shared-cpu CPU)"), "{text}");
}
