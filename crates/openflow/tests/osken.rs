//! Interoperability with a real controller: our emulator against os-ken
//! running `tests/osken/cbench_app.py` (one flow_mod per packet_in), over
//! OpenFlow 1.0 and 1.3. The tests check cbench's RESULT line, that the
//! responses were matched to probes by buffer_id, and that os-ken's parser
//! accepted each of the emulator's replies (the app's `osken-check:` lines).
//!
//! os-ken comes from `.ci/run` (a venv at /opt/commbench-venv, or the
//! interpreter named by COMMBENCH_OSKEN_PYTHON). Without it the test is
//! skipped with a message — except under CI=true, where it must run.

use commbench_openflow::emulator::{self, CbenchConfig, Line};
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn python() -> Option<String> {
    let candidates = [
        std::env::var("COMMBENCH_OSKEN_PYTHON").ok(),
        Some("/opt/commbench-venv/bin/python".to_string()),
    ];
    candidates.into_iter().flatten().find(|p| {
        Command::new(p)
            .args(["-c", "import os_ken"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn against_osken(of13: bool) {
    let name = if of13 {
        "our_emulator_against_osken_of13"
    } else {
        "our_emulator_against_osken"
    };
    let Some(py) = python() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("os-ken is not installed but CI=true: .ci/run must create /opt/commbench-venv with `pip install os-ken`");
        }
        commbench_core::testing::skip(
            "os-ken",
            format!("{name}: not installed (run .ci/run, or set COMMBENCH_OSKEN_PYTHON)"),
        );
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let app = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/osken/cbench_app.py");
    let version = if of13 { "1.3" } else { "1.0" };
    let mut child = Kill(
        Command::new(&py)
            .args([app, &port.to_string(), version])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start os-ken"),
    );
    // os-ken's stderr: forwarded, and its `osken-check:` lines kept.
    let checks = Arc::new(Mutex::new(Vec::<String>::new()));
    let stderr = child.0.stderr.take().unwrap();
    let keep = checks.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            eprintln!("os-ken: {line}");
            if let Some(c) = line.strip_prefix("osken-check: ") {
                keep.lock().unwrap().push(c.to_string());
            }
        }
    });
    // Wait (bounded) until os-ken listens.
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "os-ken did not start listening"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for throughput in [false, true] {
        let cfg = CbenchConfig {
            controller: "127.0.0.1".into(),
            port,
            switches: 2,
            loops: 3,
            ms_per_test: 500,
            throughput,
            of13,
            mac_addresses: 1000,
            ..Default::default()
        };
        let mut result = None;
        let report = emulator::run_with(&cfg, &mut |l| match l {
            Line::Result {
                switches,
                result: r,
            } => result = Some(emulator::format_result_line(switches, r)),
            Line::Window { switches, window } => {
                eprintln!("{}", emulator::format_window_line(switches, window, false))
            }
            Line::Notice(n) => eprintln!("{n}"),
        })
        .expect("cbench against os-ken");
        let line = result.expect("a RESULT line");
        eprintln!("{line}");
        let w: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            &w[..6],
            &[
                "RESULT:",
                "2",
                "switches",
                "2",
                "tests",
                "min/max/avg/stdev"
            ]
        );
        let avg: f64 = w[7].split('/').nth(2).unwrap().parse().unwrap();
        assert!(avg > 0.0, "{line}");
        let t = &report.rounds[0].tally;
        eprintln!("{t:?}");
        assert!(t.flow_mod_add > 0);
        assert!(
            t.matched > 0,
            "os-ken's flow_mods carry the probes' buffer_ids"
        );
        // os-ken numbers its own xids, so only its answers to the ARP
        // (no buffer_id) name no probe: at most one per switch.
        assert!(t.unmatched <= 2, "{t:?}");
        assert_eq!(t.duplicate, 0, "one flow_mod per packet_in");
        assert_eq!(t.error, 0, "os-ken sent no ERROR");
        assert!(report.rounds[0].closed.is_empty());
        if !throughput {
            // os-ken parsed each switch's replies to its requests. (Checked
            // after the latency run only: in throughput mode the replies
            // queue behind thousands of probes os-ken has yet to read.)
            let want: Vec<String> = [
                "features_reply n_buffers 256",
                "desc_reply",
                "get_config_reply miss_send_len 0",
                "barrier_reply",
                "echo_reply",
            ]
            .iter()
            .flat_map(|w| [1, 2].map(|dpid| format!("{w} dpid {dpid}")))
            .collect();
            let t0 = Instant::now();
            loop {
                let got = checks.lock().unwrap().clone();
                assert!(
                    !got.iter().any(|c| c.starts_with("ERROR")),
                    "os-ken got an ERROR: {got:?}"
                );
                let missing: Vec<&String> = want.iter().filter(|w| !got.contains(w)).collect();
                if missing.is_empty() {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(20),
                    "os-ken never parsed {missing:?}: {got:?}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    drop(child);
}

#[test]
fn our_emulator_against_osken() {
    against_osken(false);
}

#[test]
fn our_emulator_against_osken_of13() {
    against_osken(true);
}
