//! The ipc lab through the binary: the seed-compatible CSV and grammar, mp
//! clients, a killed client, signals and `commbench clean`. Small counts,
//! no time thresholds (deadlines below only guard against hangs).

use crate::util::{bin_path, cb};
use predicates::prelude::*;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn csv_reqres() -> predicates::str::RegexPredicate {
    predicate::str::is_match(
        r"^\d+,m[tp],(sync|async|nores),\d+,\d+,\d+\.\d{6},\d+\.\d{6},\d+\.\d{2}\n$",
    )
    .unwrap()
}

#[test]
fn reqres_loop_prints_one_csv_line_in_both_argument_orders() {
    cb().args(["reqres_loop", "mt", "2", "128", "100"])
        .assert()
        .success()
        .stdout(csv_reqres())
        .stdout(predicate::str::starts_with("2,mt,sync,128,100,"));
    cb().args(["reqres_loop", "2", "mt", "128", "100", "nores"])
        .assert()
        .success()
        .stdout(csv_reqres())
        .stdout(predicate::str::starts_with("2,mt,nores,128,100,"));
}

#[test]
fn no_arguments_runs_the_sweep_then_prints_resource_usage() {
    let out = cb()
        .arg("reqres_loop")
        .env("COMMBENCH_SWEEP_NLOOP", "3")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let csv: Vec<&&str> = lines.iter().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(csv.len(), 40, "{text}");
    assert!(csv[0].starts_with("1,mt,sync,0,3,"), "{text}");
    assert!(csv[39].starts_with("8,mp,sync,32768,3,"), "{text}");
    assert!(text.contains("# resource usage"), "{text}");
    assert!(text.contains("max RSS"), "{text}");
}

#[test]
fn data_channel_write_csv_shape() {
    cb().args(["data_channel_write", "mt", "2", "4096", "50"])
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(r"^2,mt,4096,50,\d+\.\d{6},\d+\.\d{6},\d+\.\d{2}\n$").unwrap(),
        );
}

#[test]
fn mp_clients_for_every_mode_and_the_stream() {
    for mode in ["sync", "async", "nores"] {
        cb().args(["reqres_loop", "mp", "3", "1000", "200", mode])
            .assert()
            .success()
            .stdout(csv_reqres())
            .stdout(predicate::str::starts_with(format!(
                "3,mp,{mode},1000,200,"
            )));
    }
    cb().args(["data_channel_write", "2", "mp", "70000", "20"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("2,mp,70000,20,"));
}

#[test]
fn native_command_runs_every_transport_with_mp_clients_side_by_side() {
    let out = cb()
        .args([
            "ipc",
            "reqres",
            "--transport",
            "all",
            "--clients",
            "mp",
            "--sessions",
            "2",
            "--count",
            "100",
            "--size",
            "4K",
            "--verify",
            "--repeat",
            "1",
            "--format",
            "jsonl",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let transports: Vec<&str> = lines
        .iter()
        .map(|v| v["params"]["transport"].as_str().unwrap())
        .collect();
    assert_eq!(transports, ["shm", "uds", "pipe", "tcp"]);
    for v in &lines {
        assert_eq!(v["metrics"]["messages"], 400);
        assert!(v["metrics"]["rt_p50_ns"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn transport_all_prints_a_side_by_side_table() {
    cb().args([
        "ipc",
        "stream",
        "--transport",
        "all",
        "--count",
        "50",
        "--repeat",
        "1",
    ])
    .assert()
    .success()
    .stdout(predicate::str::contains("x uds"))
    .stdout(predicate::str::is_match(r"(?m)^1 +mt +shm +adaptive ").unwrap())
    .stdout(predicate::str::is_match(r"(?m)^1 +mt +tcp ").unwrap());
}

#[test]
fn help_and_argument_errors() {
    cb().args(["reqres_loop", "help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("usage: commbench reqres_loop"));
    cb().args(["data_channel_write", "help"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "usage: commbench data_channel_write",
        ));
    for bad in [
        &["reqres_loop", "mt", "0", "128", "10"][..],
        &["reqres_loop", "mt", "65", "128", "10"],
        &["reqres_loop", "mt", "1", "16777217", "10"],
        &["reqres_loop", "mt", "1", "128", "0"],
        &["reqres_loop", "mt", "1", "128", "10", "later"],
        &["reqres_loop", "xx", "1", "128", "10"],
        &["reqres_loop", "mt", "1"],
        &["data_channel_write", "mt", "1", "128", "10", "sync"],
    ] {
        cb().args(bad)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("usage: commbench"));
    }
    cb().args(["ipc", "reqres", "--size", "17M", "--count", "1"])
        .assert()
        .code(2);
    cb().args(["ipc", "reqres", "--cpus", "gpu=0", "--count", "1"])
        .assert()
        .code(2);
    cb().args(["ipc", "stream", "--sessions", "0"])
        .assert()
        .code(2);
}

#[test]
fn corruption_ends_the_run_with_exit_1_naming_session_and_sequence() {
    cb().args([
        "ipc",
        "reqres",
        "--count",
        "50",
        "--sessions",
        "2",
        "--verify",
        "--inject-corruption",
        "1:7",
    ])
    .assert()
    .code(1)
    .stderr(predicate::str::contains("session 1: sequence 7"));
}

fn shm_files_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("commbench-ipc-{pid}-");
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

fn tmp_dirs_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("commbench-ipc-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "hang guard: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn long_run(args: &[&str]) -> Child {
    std::process::Command::new(bin_path())
        .args(["ipc", "reqres", "--count", "1000000000", "--wait", "block"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_exit(c: &mut Child) -> std::process::ExitStatus {
    let mut st = None;
    wait_until("process exit", || {
        st = c.try_wait().unwrap();
        st.is_some()
    });
    st.unwrap()
}

fn children_of(pid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in rd.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
                v.extend(s.split_whitespace().filter_map(|x| x.parse::<u32>().ok()));
            }
        }
    }
    v
}

#[allow(unsafe_code)]
fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: sending a signal to a process this test started.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

#[test]
fn a_killed_mp_client_makes_the_server_fail_not_hang() {
    for transport in ["shm", "uds", "pipe", "tcp"] {
        let mut c = long_run(&[
            "--clients",
            "mp",
            "--sessions",
            "2",
            "--transport",
            transport,
        ]);
        let pid = c.id();
        wait_until("two clients", || children_of(pid).len() == 2);
        // Let the run get going, then kill one client.
        std::thread::sleep(Duration::from_millis(200));
        kill(children_of(pid)[1], libc::SIGKILL);
        let st = wait_exit(&mut c);
        let mut err = String::new();
        std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(st.code(), Some(1), "{transport}: {err}");
        assert!(err.contains("session"), "{transport}: {err}");
        assert!(shm_files_of(pid).is_empty(), "{transport}");
        assert!(tmp_dirs_of(pid).is_empty(), "{transport}");
    }
}

#[test]
fn sigterm_and_sigint_remove_the_files() {
    for (transport, sig) in [
        ("shm", libc::SIGTERM),
        ("uds", libc::SIGINT),
        ("pipe", libc::SIGTERM),
    ] {
        let mut c = long_run(&["--transport", transport]);
        let pid = c.id();
        if transport == "shm" {
            wait_until("segment", || !shm_files_of(pid).is_empty());
        } else {
            wait_until("temp dir", || !tmp_dirs_of(pid).is_empty());
        }
        std::thread::sleep(Duration::from_millis(100));
        kill(pid, sig);
        wait_exit(&mut c);
        assert!(shm_files_of(pid).is_empty(), "{transport}");
        assert!(tmp_dirs_of(pid).is_empty(), "{transport}");
    }
}

#[test]
fn after_sigkill_clean_removes_the_dead_run_and_keeps_the_live_one() {
    let mut dead = long_run(&["--transport", "shm"]);
    let mut live = long_run(&["--transport", "shm"]);
    let (dp, lp) = (dead.id(), live.id());
    wait_until("segments", || {
        !shm_files_of(dp).is_empty() && !shm_files_of(lp).is_empty()
    });
    kill(dp, libc::SIGKILL);
    wait_exit(&mut dead);
    assert!(!shm_files_of(dp).is_empty(), "SIGKILL leaves the segment");
    cb().args(["clean"]).assert().success();
    assert!(
        shm_files_of(dp).is_empty(),
        "clean removed the dead run's segment"
    );
    assert!(
        !shm_files_of(lp).is_empty(),
        "clean left the live run alone"
    );
    kill(lp, libc::SIGTERM);
    wait_exit(&mut live);
    assert!(shm_files_of(lp).is_empty());
}

/// Runs `commbench ARGS`; returns its exit code, stderr and the shm files
/// left with its pid.
fn run_ipc(args: &[&str]) -> (Option<i32>, String, Vec<String>) {
    let child = std::process::Command::new(bin_path())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        leftovers_of(pid),
    )
}

fn leftovers_of(pid: u32) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("commbench-ipc-{pid}-")))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ring_above_the_limit_exits_2_without_leftovers() {
    for ring in ["9223372036854775808", "4611686018427387904", "2048M"] {
        let (code, err, left) = run_ipc(&["ipc", "stream", "--ring", ring, "--count", "10"]);
        assert_eq!(code, Some(2), "--ring {ring}: {err}");
        assert!(err.contains("above the limit of 1024 MiB"), "{err}");
        assert!(left.is_empty());
    }
}

#[test]
fn ring_larger_than_free_dev_shm_is_a_usage_error_before_anything_is_created() {
    let (code, err, left) = run_ipc(&[
        "ipc",
        "stream",
        "--ring",
        "1024M",
        "--sessions",
        "64",
        "--count",
        "10",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("MiB free: use --ring"), "{err}");
    assert!(left.is_empty());
}

#[test]
fn a_sessions_and_clients_sweep_records_every_point_with_cpu_and_context_switches() {
    let out = cb()
        .args([
            "ipc",
            "reqres",
            "--sessions",
            "1,2",
            "--clients",
            "mt,mp",
            "--count",
            "500",
            "--transport",
            "uds",
            "--repeat",
            "1",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let recs = v["records"].as_array().unwrap();
    let mut points: Vec<(u64, String)> = recs
        .iter()
        .map(|r| {
            (
                r["params"]["sessions"].as_u64().unwrap(),
                r["params"]["clients"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    points.sort();
    assert_eq!(
        points,
        vec![
            (1, "mp".to_owned()),
            (1, "mt".to_owned()),
            (2, "mp".to_owned()),
            (2, "mt".to_owned())
        ]
    );
    let msgs = |s: u64, c: &str| {
        recs.iter()
            .find(|r| r["params"]["sessions"] == s && r["params"]["clients"] == c)
            .map(|r| r["metrics"]["messages"].as_u64().unwrap())
            .unwrap()
    };
    for c in ["mt", "mp"] {
        // Every session ran its whole count.
        assert_eq!(msgs(2, c), 2 * msgs(1, c), "{c}");
        assert!(msgs(1, c) >= 500, "{c}");
    }
    for r in recs {
        let m = &r["metrics"];
        assert!(m["ctx_per_op"].as_f64().unwrap() > 0.0, "{m}");
        assert!(m["cpu_ns_per_op"].as_f64().unwrap() > 0.0, "{m}");
    }
}

fn metrics_of(args: &[&str]) -> serde_json::Value {
    let out = cb()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let r = v.get("records").and_then(|r| r.get(0)).unwrap_or(&v);
    r["metrics"].clone()
}

#[test]
fn a_shm_run_says_which_wait_strategy_it_used_and_why() {
    for clients in ["mt", "mp"] {
        let m = metrics_of(&[
            "--no-store",
            "ipc",
            "reqres",
            "--count",
            "300",
            "--clients",
            clients,
            "--format",
            "json",
        ]);
        let strategy = m["wait_strategy"].as_str().unwrap();
        assert!(
            ["adaptive:spin", "adaptive:sleep", "adaptive:spin+sleep"].contains(&strategy),
            "{m}"
        );
        let why = m["wait_why"].as_str().unwrap();
        // The placement decision with its samples, then the waits' outcome.
        assert!(why.contains("samples"), "{why}");
        assert!(why.contains("waits"), "{why}");
        // Counted on both ends (the mp client through the segment).
        let waits = m["wait_waits"].as_u64().unwrap();
        assert!(waits > 0, "{m}");
        assert_eq!(
            m["wait_spun"].as_u64().unwrap() + m["wait_slept"].as_u64().unwrap(),
            waits,
            "{m}"
        );
    }
    let m = metrics_of(&[
        "--no-store",
        "ipc",
        "stream",
        "--wait",
        "block",
        "--count",
        "300",
        "--format",
        "json",
    ]);
    assert_eq!(m["wait_strategy"], "sleep", "{m}");
    assert!(
        m["wait_why"].as_str().unwrap().contains("--wait block"),
        "{m}"
    );
    // Kernel transports have no wait strategy.
    let m = metrics_of(&[
        "--no-store",
        "ipc",
        "reqres",
        "--transport",
        "pipe",
        "--count",
        "50",
        "--format",
        "json",
    ]);
    assert!(m.get("wait_strategy").is_none(), "{m}");
}

#[test]
fn seed_commands_say_their_wait_strategy_on_stderr_only() {
    // A stream whose ring never fills may not wait at all ("no waits").
    for cmd in ["reqres_loop", "data_channel_write"] {
        cb().args(["--no-store", cmd, "mt", "1", "128", "200"])
            .assert()
            .success()
            .stdout(predicate::str::is_match(r"^1,mt,[^\n]*\n$").unwrap())
            .stderr(
                predicate::str::is_match(
                    r"# shm wait: adaptive(:spin|:sleep|:spin\+sleep)?: .*waits",
                )
                .unwrap(),
            );
    }
}
