//! The OpenFlow lab from the command line: `commbench controller` and
//! `commbench cbench` as two processes over loopback, cbench's exact
//! output lines, option parsing and usage errors.

use crate::util::{assert_valid, bin_path, cb};
use predicates::prelude::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

/// A `commbench controller` child on an ephemeral port; killed on drop.
struct Ctl {
    child: Child,
    port: u16,
}

impl Ctl {
    fn start(extra: &[&str]) -> Ctl {
        let mut child = std::process::Command::new(bin_path())
            .args([
                "controller",
                "--port",
                "0",
                "--quiet",
                "--duration",
                "120",
                "--format",
                "json",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut port = None;
        let mut line = String::new();
        for _ in 0..20 {
            line.clear();
            if err.read_line(&mut line).unwrap() == 0 {
                break;
            }
            if let Some(rest) = line.split("listening on ").nth(1) {
                let addr = rest.split(',').next().unwrap();
                port = Some(addr.rsplit(':').next().unwrap().parse().unwrap());
                break;
            }
        }
        // Keep draining stderr so the child never blocks on it.
        std::thread::spawn(move || for _ in err.lines() {});
        Ctl {
            child,
            port: port.expect("controller printed its address"),
        }
    }

    /// SIGTERM, then the controller's JSON report.
    #[allow(unsafe_code)]
    fn stop(mut self) -> Value {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut out = String::new();
        use std::io::Read;
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let st = self.child.wait().unwrap();
        assert!(st.success(), "controller exit {st:?}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_valid(&v);
        v
    }
}

impl Drop for Ctl {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cbench(port: u16, args: &[&str]) -> (String, String) {
    let p = port.to_string();
    let out = cb()
        .args([
            "cbench",
            "-c",
            "127.0.0.1",
            "-p",
            &p,
            "-l",
            "3",
            "-m",
            "300",
            "-M",
            "1000",
        ])
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "cbench failed: {stderr}");
    (stdout, stderr)
}

/// `HH:MM:SS.mmm N   switches: flows/sec:  c1  c2 ...   total = X per ms `
fn check_window_line(l: &str, switches: usize) {
    let b = l.as_bytes();
    assert!(
        b.len() > 13 && b[2] == b':' && b[5] == b':' && b[8] == b'.' && b[12] == b' ',
        "{l:?}"
    );
    assert!(
        l[..12].chars().filter(|c| c.is_ascii_digit()).count() == 9,
        "{l:?}"
    );
    let rest = &l[13..];
    let head = format!("{switches:<3} switches: flows/sec:  ");
    assert!(rest.starts_with(&head), "{l:?}");
    let (counts, total) = rest[head.len()..].split_once(" total = ").expect("total");
    let counts: Vec<u64> = counts
        .split_whitespace()
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(counts.len(), switches);
    // Each count is followed by two spaces, then " total".
    let expect: String = counts.iter().map(|c| format!("{c}  ")).collect();
    assert!(
        rest[head.len()..].starts_with(&format!("{expect} total = ")),
        "{l:?}"
    );
    assert!(total.ends_with(" per ms "), "{l:?}");
    let x = total.trim_end_matches(" per ms ");
    assert_eq!(
        x.split('.').nth(1).unwrap().len(),
        6,
        "%lf: six decimals: {x}"
    );
}

fn result_values(l: &str, switches: usize, tests: usize) -> [f64; 4] {
    let prefix = format!("RESULT: {switches} switches {tests} tests min/max/avg/stdev = ");
    assert!(l.starts_with(&prefix), "{l:?}");
    let v = l[prefix.len()..]
        .strip_suffix(" responses/s")
        .expect("suffix");
    let v: Vec<f64> = v
        .split('/')
        .map(|x| {
            assert_eq!(x.split('.').nth(1).unwrap().len(), 2, "two decimals");
            x.parse().unwrap()
        })
        .collect();
    [v[0], v[1], v[2], v[3]]
}

#[test]
fn cbench_against_controller_both_modes_exact_lines() {
    let ctl = Ctl::start(&[]);
    for (switches, mode) in [(1, None), (16, Some("-t"))] {
        let s = switches.to_string();
        let mut args = vec!["-s", s.as_str()];
        args.extend(mode);
        let (out, err) = cbench(ctl.port, &args);
        // After RESULT the stall monitor names each window in which the
        // machine stalled (a loaded or descheduled VM): part of the
        // output, not of cbench's lines.
        let (stalls, lines): (Vec<&str>, Vec<&str>) =
            out.lines().partition(|l| l.starts_with("stall: window "));
        for l in &stalls {
            assert!(l.contains("the machine stalled for"), "{l}");
        }
        for l in &lines[..3] {
            check_window_line(l, switches);
        }
        let v = result_values(lines[3], switches, 2);
        // Not every window must see responses on a loaded 2-core machine;
        // some must, and min <= avg <= max.
        assert!(v[1] > 0.0 && v[0] <= v[2] && v[2] <= v[1], "{}", lines[3]);
        assert!(
            lines[4].starts_with("emulator: ") && lines[4].contains("s CPU"),
            "{}",
            lines[4]
        );
        assert!(lines[5].starts_with("responses: "), "{}", lines[5]);
        assert!(err.contains("cbench: controller benchmarking tool"));
        let mode_name = if mode.is_some() {
            "'throughput'"
        } else {
            "'latency'"
        };
        assert!(
            err.contains(&format!("running in mode {mode_name}")),
            "{err}"
        );
    }
    let report = ctl.stop();
    let m = &report["records"][0]["metrics"];
    assert!(m["packet_in"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(m["protocol_errors"].as_u64(), Some(0));
}

#[test]
fn legacy_format_and_json_output() {
    let ctl = Ctl::start(&[]);
    let (out, _) = cbench(ctl.port, &["-s", "2", "--legacy-format"]);
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("2   switches: fmods/sec:  "), "{first:?}");
    assert!(first.ends_with(" per ms "));
    let (out, err) = cbench(ctl.port, &["-s", "2", "--format", "json"]);
    let v: Value = serde_json::from_str(&out).expect("stdout is one JSON document");
    assert_valid(&v);
    let rec = &v["records"][0];
    assert_eq!(rec["lab"], "openflow");
    assert_eq!(rec["test"], "cbench");
    assert_eq!(rec["params"]["switches"], 2);
    assert!(rec["metrics"]["result"]["avg"].as_f64().unwrap() > 0.0);
    assert!(rec["metrics"]["tally"]["matched"].as_u64().unwrap() > 0);
    assert!(rec["metrics"]["round_trip_ns"]["p99"].as_f64().unwrap() > 0.0);
    assert!(rec["metrics"]["emulator_cpu_s"].as_f64().unwrap() > 0.0);
    assert!(
        err.contains("RESULT: 2 switches 2 tests"),
        "cbench lines go to stderr with --format json"
    );
    ctl.stop();
}

#[test]
fn learn_dst_macs_off_changes_what_a_learning_switch_answers() {
    let ctl = Ctl::start(&["--app", "learning"]);
    let tally = |extra: &[&str]| {
        let mut a = vec!["-s", "1", "--format", "json"];
        a.extend_from_slice(extra);
        let (out, _) = cbench(ctl.port, &a);
        let v: Value = serde_json::from_str(&out).unwrap();
        v["records"][0]["metrics"]["tally"].clone()
    };
    // On (cbench's default): the ARP teaches the destination MAC, so the
    // probes get flow_mods.
    let on = tally(&[]);
    assert!(on["flow_mod_add"].as_u64().unwrap() > 0, "{on}");
    // Off: the destination stays unknown, every probe is flooded.
    let off = tally(&["--learn-dst-macs=off"]);
    assert_eq!(off["flow_mod_add"].as_u64(), Some(0), "{off}");
    assert!(off["packet_out"].as_u64().unwrap() > 0, "{off}");
    assert!(
        off["matched"].as_u64().unwrap() > 0,
        "packet_outs carry the probe's buffer_id"
    );
    ctl.stop();
}

#[test]
fn of13_end_to_end() {
    let ctl = Ctl::start(&["--of13"]);
    let (out, _) = cbench(ctl.port, &["-s", "2", "-t", "--of13"]);
    let l = out.lines().nth(3).unwrap();
    let v = result_values(l, 2, 2);
    assert!(v[2] > 0.0);
    ctl.stop();
}

#[test]
fn cbench_usage_errors_exit_2() {
    for (args, msg) in [
        (
            &["-s", "abc"][..],
            "--switches expects a non-negative number",
        ),
        (
            &["-w", "5", "-l", "5"][..],
            "warmup (5) + cooldown (0) must be less than loops (5)",
        ),
        (&["--bogus"][..], "unrecognized option '--bogus'"),
        (&["-x"][..], "invalid option -- 'x'"),
        (&["-s"][..], "option requires an argument -- 's'"),
        (&["stray"][..], "unexpected argument 'stray'"),
        (&["--format", "xml"][..], "unknown format 'xml'"),
        (&["--cpus", "9999"][..], "--cpus: "),
    ] {
        cb().arg("cbench")
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(msg));
    }
}

#[test]
fn cbench_help_lists_cbench_options() {
    cb().args(["cbench", "-h"]).assert().success().stdout(
        predicate::str::contains("--learn-dst-macs")
            .and(predicate::str::contains("--ms-per-test"))
            .and(predicate::str::contains("--of13")),
    );
}

#[test]
fn no_controller_is_a_run_error() {
    // Bind then drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    cb().args([
        "cbench",
        "-c",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-s",
        "1",
        "-l",
        "2",
        "-m",
        "50",
    ])
    .assert()
    .code(1)
    .stderr(predicate::str::contains("cannot connect"));
}

#[test]
fn openflow_bench_quick_runs_side_by_side() {
    let out = cb()
        .args([
            "openflow",
            "bench",
            "--switches",
            "1",
            "--modes",
            "latency",
            "--variants",
            "naive,template",
            "--loops",
            "2",
            "--ms-per-test",
            "100",
            "--repeat",
            "3",
            "--format",
            "json",
        ])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v);
    let recs = v["records"].as_array().unwrap();
    assert_eq!(recs.len(), 2);
    for r in recs {
        assert!(
            r["metrics"]["responses_per_s_median"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        assert!(r["metrics"]["controller_cpu_s"].as_f64().unwrap() > 0.0);
        // Three separate runs, folded into one record with their samples
        // and the interval around the median run's figure.
        let m = &r["metrics"];
        for k in ["controller_ns_per_response", "responses_per_s_median"] {
            assert_eq!(m[format!("{k}_n")].as_u64(), Some(3), "{k}: {r}");
            assert_eq!(
                m[format!("{k}_samples")].as_array().map(Vec::len),
                Some(3),
                "{k}: {r}"
            );
            let (lo, v, hi) = (
                m[format!("{k}_lo")].as_f64().unwrap(),
                m[k].as_f64().unwrap(),
                m[format!("{k}_hi")].as_f64().unwrap(),
            );
            assert!(lo <= v && v <= hi, "{k}: {lo} {v} {hi}");
        }
    }
}

#[test]
fn cbench_switch_count_above_the_descriptor_limit_exits_2_without_allocating() {
    for s in ["99999999", "4294967296"] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v 8000000; exec {} cbench -p 1 -s {s} -l 3 -m 1",
                bin_path().display()
            ))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "-s {s}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        // Past the 65535 local ports the count is refused before the
        // descriptor limit is even looked at.
        assert!(
            err.contains("--switches must be 1..=65535")
                || err.contains("one file descriptor each"),
            "{err}"
        );
        assert!(!err.contains("memory allocation"), "{err}");
    }
}

/// A fake OpenFlow 1.0 controller: HELLO + FEATURES_REQUEST to each switch,
/// then `after_handshake` (close mid-message, or read and never answer).
fn fake_controller(close_mid_message: bool) -> (u16, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    l.set_nonblocking(true).unwrap();
    let h = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut held = Vec::new();
        while std::time::Instant::now() < deadline {
            match l.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    let hello = [1u8, 0, 0, 8, 0, 0, 0, 1];
                    let feat = [1u8, 5, 0, 8, 0, 0, 0, 2];
                    let _ = s.write_all(&hello);
                    let _ = s.write_all(&feat);
                    if close_mid_message {
                        std::thread::sleep(std::time::Duration::from_millis(300));
                        // Half an OpenFlow header, then close.
                        let _ = s.write_all(&[1u8, 14, 0]);
                        drop(s);
                    } else {
                        // Read and discard everything, answer nothing.
                        std::thread::spawn(move || {
                            let mut buf = [0u8; 65536];
                            while let Ok(n) = s.read(&mut buf) {
                                if n == 0 {
                                    break;
                                }
                            }
                        });
                        held.push(());
                    }
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    });
    (port, h)
}

/// Runs a short cbench against `port`; expects exit 1 and returns stderr.
fn cbench_fails_against(port: u16) -> String {
    let port = port.to_string();
    let out = std::process::Command::new(bin_path())
        .args([
            "cbench", "-p", &port, "-s", "2", "-l", "2", "-m", "300", "-w", "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn cbench_against_a_controller_that_closes_mid_message_fails_with_the_reason() {
    let (port, _h) = fake_controller(true);
    let err = cbench_fails_against(port);
    assert!(
        err.contains("closed all 2 connections") || err.contains("no probe"),
        "{err}"
    );
}

#[test]
fn cbench_against_a_controller_that_stalls_after_the_handshake_fails() {
    let (port, _h) = fake_controller(false);
    let err = cbench_fails_against(port);
    assert!(err.contains("answered no probe"), "{err}");
}

/// Waits for a child to exit, polling; `bound` is a safety bound against a
/// hang, not a speed assertion. Kills the child and panics past it.
fn wait_bounded(
    child: &mut Child,
    bound: std::time::Duration,
    what: &str,
) -> std::process::ExitStatus {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t0.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {bound:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
#[allow(unsafe_code)]
fn a_peer_flooding_errors_cannot_stall_the_controller_through_its_log() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;
    // Not --quiet: every connection and OFPT_ERROR is a log candidate.
    let mut child = std::process::Command::new(bin_path())
        .args([
            "controller",
            "--port",
            "0",
            "--duration",
            "600",
            "--format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut port: Option<u16> = None;
    let mut line = String::new();
    for _ in 0..20 {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(rest) = line.split("listening on ").nth(1) {
            let addr = rest.split(',').next().unwrap();
            port = Some(addr.rsplit(':').next().unwrap().parse().unwrap());
            break;
        }
    }
    let addr = format!(
        "127.0.0.1:{}",
        port.expect("controller printed its address")
    );
    // From here on nobody reads the controller's stderr until it has exited.
    // Peers that connect and leave: two log lines each, far more than the
    // pipe holds.
    for _ in 0..2000 {
        drop(TcpStream::connect(&addr).unwrap());
    }
    // The flooding peer: HELLO, then 100,000 OFPT_ERROR messages.
    let mut flood = TcpStream::connect(&addr).unwrap();
    flood
        .set_write_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    flood.write_all(&[1, 0, 0, 8, 0, 0, 0, 1]).unwrap();
    let error = [1u8, 1, 0, 12, 0, 0, 0, 7, 0, 1, 0, 2];
    let batch: Vec<u8> = error.iter().copied().cycle().take(12 * 10_000).collect();
    for _ in 0..10 {
        flood
            .write_all(&batch)
            .expect("the controller kept reading the flooding peer");
    }
    // A second switch still completes the handshake: HELLO and
    // FEATURES_REQUEST from the controller, our FEATURES_REPLY accepted.
    let mut sw = TcpStream::connect(&addr).unwrap();
    sw.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    sw.write_all(&[1, 0, 0, 8, 0, 0, 0, 1]).unwrap();
    let mut got = [0u8; 16];
    sw.read_exact(&mut got)
        .expect("a new switch gets HELLO and FEATURES_REQUEST while stderr is blocked");
    assert_eq!(got[1], 0, "HELLO");
    assert_eq!(got[9], 5, "FEATURES_REQUEST");
    let mut reply = vec![0u8; 32];
    reply[..8].copy_from_slice(&[1, 6, 0, 32, 0, 0, 0, 2]);
    reply[15] = 0x42;
    sw.write_all(&reply).unwrap();
    // Echo after the handshake: the worker still answers.
    sw.write_all(&[1, 2, 0, 8, 0, 0, 0, 9]).unwrap();
    let mut echo = [0u8; 8];
    sw.read_exact(&mut echo).unwrap();
    assert_eq!(echo, [1, 3, 0, 8, 0, 0, 0, 9]);
    // SIGTERM ends it although stderr is still not being read.
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = wait_bounded(
        &mut child,
        Duration::from_secs(60),
        "controller after SIGTERM",
    );
    assert!(st.success(), "controller exit {st:?}");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    let m = &v["records"][0]["metrics"];
    assert_eq!(m["error_msgs"], 100_000, "{m}");
    assert!(m["log_lines_suppressed"].as_u64().unwrap() >= 99_000, "{m}");
    assert!(m["log_lines_dropped"].as_u64().unwrap() > 0, "{m}");
    let lines = rest.lines().count();
    assert!(lines < 10_000, "{lines} stderr lines for 100,000 messages");
    drop((flood, sw));
}

/// A fake controller that completes the handshake with the first switch
/// only (and answers its packet_ins with flow_mods); later switches are
/// accepted and never greeted.
fn half_controller() -> (u16, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    l.set_nonblocking(true).unwrap();
    let h = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut silent = Vec::new();
        let mut first = true;
        while std::time::Instant::now() < deadline {
            match l.accept() {
                Ok((mut s, _)) if first => {
                    first = false;
                    s.set_nonblocking(false).unwrap();
                    let _ = s.write_all(&[1u8, 0, 0, 8, 0, 0, 0, 1]);
                    let _ = s.write_all(&[1u8, 5, 0, 8, 0, 0, 0, 2]);
                    std::thread::spawn(move || {
                        let mut buf: Vec<u8> = Vec::new();
                        let mut tmp = [0u8; 65536];
                        while let Ok(n) = s.read(&mut tmp) {
                            if n == 0 {
                                break;
                            }
                            buf.extend_from_slice(&tmp[..n]);
                            let mut off = 0;
                            let mut out = Vec::new();
                            while buf.len() - off >= 8 {
                                let len = u16::from_be_bytes([buf[off + 2], buf[off + 3]]) as usize;
                                if len < 8 || buf.len() - off < len {
                                    break;
                                }
                                let m = &buf[off..off + len];
                                match m[1] {
                                    2 => {
                                        out.extend_from_slice(&[1, 3, 0, 8]);
                                        out.extend_from_slice(&m[4..8]);
                                    }
                                    10 if len >= 18 => {
                                        let mut f = [0u8; 80];
                                        f[..4].copy_from_slice(&[1, 14, 0, 80]);
                                        f[4..8].copy_from_slice(&m[4..8]);
                                        f[62..64].copy_from_slice(&0x8000u16.to_be_bytes());
                                        f[64..68].copy_from_slice(&m[8..12]);
                                        f[68..70].copy_from_slice(&0xffffu16.to_be_bytes());
                                        f[74..76].copy_from_slice(&8u16.to_be_bytes());
                                        f[76..78].copy_from_slice(&2u16.to_be_bytes());
                                        out.extend_from_slice(&f);
                                    }
                                    _ => {}
                                }
                                off += len;
                            }
                            buf.drain(..off);
                            if s.write_all(&out).is_err() {
                                break;
                            }
                        }
                    });
                }
                Ok((s, _)) => silent.push(s),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    });
    (port, h)
}

#[test]
fn cbench_with_fewer_switches_ready_than_asked_is_partial_and_exits_1_unless_allowed() {
    for allow in [false, true] {
        let (port, _h) = half_controller();
        let port = port.to_string();
        let mut args = vec![
            "cbench",
            "-p",
            &port,
            "-s",
            "2",
            "-l",
            "3",
            "-m",
            "300",
            "-w",
            "1",
            "--handshake-timeout",
            "1000",
            "--format",
            "json",
        ];
        if allow {
            args.push("--allow-partial");
        }
        let out = std::process::Command::new(bin_path())
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(if allow { 0 } else { 1 }), "{err}");
        assert!(
            err.contains("only 1 of 2 switches completed the handshake"),
            "{err}"
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let m = &v["records"][0]["metrics"];
        assert_eq!(m["partial"], true, "{m}");
        assert_eq!(m["switches_ready"], 1, "{m}");
        assert_eq!(m["handshake_timeout_ms"], 1000, "{m}");
        assert!(
            m["windows_stall_worst_ms"].as_array().unwrap().len() == 3,
            "{m}"
        );
    }
}
