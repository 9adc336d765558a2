//! The mux lab through the binary: every engine × lookup side by side with
//! exact counts and valid JSON, argument errors, io_uring unavailable, a
//! server that dies or runs out of descriptors, `mux serve` / `mux load`
//! split across two network namespaces joined by a veth pair (root).
//! Small counts; deadlines only guard against hangs.

use crate::util::{bin_path, cb, schema};
use predicates::prelude::*;
use serde_json::Value;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn every_engine_and_lookup_side_by_side_as_valid_json() {
    let out = cb()
        .args([
            "mux", "--engine", "all", "--lookup", "both", "--conns", "40", "--rounds", "5",
            "--size", "200", "--format", "json",
        ])
        .env_remove("COMMBENCH_MUX_FAIL_URING")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let errors: Vec<String> = schema().iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let recs = v["records"].as_array().unwrap();
    assert!(recs.len() >= 6, "{v:#}");
    for r in recs {
        assert_eq!(r["lab"], "mux");
        assert_eq!(r["metrics"]["round_trips"], 200);
        assert_eq!(r["metrics"]["connected"], 40);
        assert_eq!(r["metrics"]["status"], "ok");
        assert!(r["metrics"]["server_cpu_us_per_rt"].as_f64().unwrap() > 0.0);
        assert!(r["metrics"]["latency_ns"]["p50"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn table_output_is_the_side_by_side_summary() {
    cb().args([
        "mux",
        "--engine",
        "poll,epoll-et",
        "--conns",
        "10",
        "--rounds",
        "3",
    ])
    .assert()
    .success()
    .stdout(predicate::str::contains("srv us/rt"))
    .stdout(predicate::str::contains("poll"))
    .stdout(predicate::str::contains("epoll-et"));
}

#[test]
fn argument_errors_exit_2() {
    for args in [
        vec!["mux", "--conns", "0"],
        vec!["mux", "--conns", "10", "--active", "11"],
        vec!["mux", "--active", "0"],
        vec!["mux", "--size", "0"],
        vec!["mux", "--size", "17M"],
        vec!["mux", "--rounds", "0"],
        vec!["mux", "--engine", "select"],
        vec!["mux", "--lookup", "hash"],
        vec!["mux", "--timeout", "0"],
        vec!["mux", "--repeat", "0"],
        vec!["mux", "--server-threads", "65"],
        vec!["mux", "--cpus", "server=99999"],
        vec!["mux", "serve", "--engine", "all"],
        vec!["mux", "serve", "--buf", "1"],
        vec!["mux", "load", "--target", "nowhere"],
        // Was an allocation of 203636787729094710 B and an abort.
        vec!["mux", "httpd", "--body", "203636787729094710"],
        vec!["mux", "httpd", "--body", "17MiB"],
    ] {
        cb().args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::is_empty().not());
    }
}

#[test]
fn more_connections_than_descriptors_is_a_usage_error_saying_the_limit() {
    // A hard limit the process cannot raise (not root: otherwise it may).
    if is_root() {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n 300; exec setpriv --reuid=65534 --regid=65534 --clear-groups {} mux --conns 1000 --rounds 1",
                bin_path().display()
            ))
            .output()
            .unwrap();
        if out.status.code() == Some(127)
            || String::from_utf8_lossy(&out.stderr).contains("setpriv:")
        {
            commbench_core::testing::skip(
                "setpriv",
                "drops root to test a limit a user cannot raise (util-linux)",
            );
            return;
        }
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("RLIMIT_NOFILE allows 300"), "{e}");
        assert!(e.contains("at most 236 connections"), "{e}");
    } else {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n 300; exec {} mux --conns 1000 --rounds 1",
                bin_path().display()
            ))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("RLIMIT_NOFILE"));
    }
}

#[test]
fn io_uring_unavailable_is_skipped_with_a_message_and_the_others_run() {
    cb().args(["mux", "--engine", "all", "--conns", "5", "--rounds", "2"])
        .env("COMMBENCH_MUX_FAIL_URING", "1")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "io-uring: skipped: io_uring setup failed",
        ))
        .stdout(predicate::str::contains("epoll-lt"));
    cb().args([
        "mux", "--engine", "io-uring", "--conns", "5", "--rounds", "2",
    ])
    .env("COMMBENCH_MUX_FAIL_URING", "1")
    .assert()
    .code(1)
    .stderr(predicate::str::contains("no engine can run here"));
}

const TOKEN_ENV: &str = "COMMBENCH_MUX_TOKEN";
const TOKEN: &str = "00112233445566778899aabbccddeeff";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct KillOnDrop(Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_listening(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server never listened on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_server_ends_the_load_with_exit_1() {
    let port = free_port();
    let ctl = free_port();
    let mut server = KillOnDrop(
        std::process::Command::new(bin_path())
            .args(["mux", "serve", "--engine", "epoll-lt", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--control")
            .arg(format!("127.0.0.1:{ctl}"))
            .env(TOKEN_ENV, TOKEN)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(ctl);
    let load = std::process::Command::new(bin_path())
        .args(["mux", "load", "--target"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--control")
        .arg(format!("127.0.0.1:{ctl}"))
        .args(["--conns", "20", "--rounds", "100000000", "--timeout", "120"])
        .env(TOKEN_ENV, TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    server.0.kill().unwrap();
    let out = load.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("server"), "{e}");
}

#[test]
fn a_load_without_control_blamed_echo_verification_of_a_named_engine() {
    // `--control none`: the server is not ours to know. A wrong answer
    // was "epoll-lt index: echo verification failed: …", naming an engine
    // the server may not run. Here a server that answers every byte with
    // 'X' (not an echo).
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || s.write_all(&vec![b'X'; n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    for extra in [&[][..], &["--rate", "100", "--duration", "1"][..]] {
        let out = cb()
            .args(["mux", "load", "--target"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--control", "none", "--conns", "2", "--rounds", "3"])
            .args(["--size", "16", "--timeout", "60", "--no-store"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(
            e.contains(&format!("the server at 127.0.0.1:{port}")),
            "{e}"
        );
        assert!(e.contains("wrong answer from the server"), "{e}");
        assert!(!e.contains("verification") && !e.contains("echo"), "{e}");
        for engine in ["poll", "epoll", "io-uring", "index", "scan"] {
            assert!(!e.contains(engine), "{engine} named: {e}");
        }
    }
}

#[test]
fn a_server_out_of_descriptors_is_an_error_not_a_smaller_run() {
    let port = free_port();
    let ctl = free_port();
    let _server = KillOnDrop(
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n 100; exec {} mux serve --engine poll --listen 127.0.0.1:{port} --control 127.0.0.1:{ctl}",
                bin_path().display()
            ))
            .env(TOKEN_ENV, TOKEN)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(ctl);
    let out = cb()
        .args(["mux", "load", "--target"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--control")
        .arg(format!("127.0.0.1:{ctl}"))
        .args(["--conns", "300", "--rounds", "2", "--timeout", "60"])
        .env(TOKEN_ENV, TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("accepted only"), "{e}");
}

/// Two namespaces joined by a veth pair, removed on drop.
struct Netns {
    a: String,
    b: String,
}

fn ip(args: &[&str]) -> bool {
    std::process::Command::new("ip")
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

impl Netns {
    fn new() -> Option<Netns> {
        let tag = std::process::id() % 100_000;
        let n = Netns {
            a: format!("cbmux-a-{tag}"),
            b: format!("cbmux-b-{tag}"),
        };
        let va = format!("cbmxa{tag}");
        let vb = format!("cbmxb{tag}");
        let ok = ip(&["netns", "add", &n.a])
            && ip(&["netns", "add", &n.b])
            && ip(&[
                "link", "add", &va, "netns", &n.a, "type", "veth", "peer", "name", &vb, "netns",
                &n.b,
            ])
            && ip(&["-n", &n.a, "addr", "add", "10.77.0.1/24", "dev", &va])
            && ip(&["-n", &n.b, "addr", "add", "10.77.0.2/24", "dev", &vb])
            && ip(&["-n", &n.a, "link", "set", &va, "up"])
            && ip(&["-n", &n.b, "link", "set", &vb, "up"])
            && ip(&["-n", &n.a, "link", "set", "lo", "up"])
            && ip(&["-n", &n.b, "link", "set", "lo", "up"]);
        if !ok {
            drop(n);
            return None;
        }
        Some(n)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting a namespace removes the veth end inside it, and its peer.
        ip(&["netns", "del", &self.a]);
        ip(&["netns", "del", &self.b]);
    }
}

#[test]
fn serve_and_load_split_across_two_network_namespaces() {
    if !commbench_core::testing::root_or_skip("creates network namespaces") {
        return;
    }
    let Some(ns) = Netns::new() else {
        commbench_core::testing::skip(
            "network namespaces",
            "could not create namespaces and a veth pair here",
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("cbmux-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");
    let _server = KillOnDrop(
        std::process::Command::new("ip")
            .args(["netns", "exec", &ns.a])
            .arg(bin_path())
            .args([
                "mux",
                "serve",
                "--engine",
                "epoll-et",
                "--listen",
                "10.77.0.1:7100",
                "--control-token-file",
            ])
            .arg(&token_file)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Wait for the control port from inside namespace b.
    let deadline = Instant::now() + Duration::from_secs(20);
    let out = loop {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &ns.b])
            .arg(bin_path())
            .args([
                "mux",
                "load",
                "--target",
                "10.77.0.1:7100",
                "--conns",
                "50",
                "--rounds",
                "4",
                "--size",
                "512",
                "--format",
                "json",
                "--control-token-file",
            ])
            .arg(&token_file)
            .env_remove(TOKEN_ENV)
            .output()
            .unwrap();
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["records"][0];
    assert_eq!(r["metrics"]["round_trips"], 200);
    assert_eq!(r["params"]["target"], "10.77.0.1:7100");
    assert_eq!(r["params"]["engine"], "epoll-et");
    assert!(r["metrics"]["server_cpu_us_per_rt"].as_f64().unwrap() > 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn netns_flag_runs_in_a_private_namespace() {
    if !commbench_core::testing::root_or_skip("--netns creates a network namespace") {
        return;
    }
    cb().args([
        "mux", "--netns", "--engine", "epoll-lt", "--conns", "30", "--rounds", "3", "--format",
        "json",
    ])
    .assert()
    .success()
    .stdout(predicate::str::contains("\"netns\": true"));
}

#[test]
fn load_procs_split_the_connections_and_add_up() {
    let out = cb()
        .args([
            "mux",
            "--engine",
            "epoll-et",
            "--conns",
            "301",
            "--rounds",
            "4",
            "--warmup-rounds",
            "1",
            "--load-procs",
            "3",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let r = &v["records"][0];
    assert_eq!(r["params"]["load_procs"], 3);
    assert_eq!(r["metrics"]["connected"], 301);
    assert_eq!(r["metrics"]["round_trips"], 1204);
    assert_eq!(r["metrics"]["latency_ns"]["n"], 1204);
    assert_eq!(r["metrics"]["status"], "ok");
    for bad in ["0", "65"] {
        cb().args(["mux", "--conns", "10", "--load-procs", bad])
            .assert()
            .code(2);
    }
}

/// A `mux serve` on loopback with the test token; (server, echo port, control port).
fn token_server(engine: &str) -> (KillOnDrop, u16, u16) {
    let port = free_port();
    let ctl = free_port();
    let server = KillOnDrop(
        std::process::Command::new(bin_path())
            .args(["mux", "serve", "--engine", engine, "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--control")
            .arg(format!("127.0.0.1:{ctl}"))
            .env(TOKEN_ENV, TOKEN)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(ctl);
    (server, port, ctl)
}

/// Sends `lines` on a fresh control connection; returns everything the
/// server answered until it closed the connection (guarded by a timeout).
fn control_exchange(ctl: u16, lines: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", ctl)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(lines.as_bytes()).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// `mux load --help` sent the reader to RLIMIT_NOFILE "in the README",
/// which does not mention it: the help names the page that explains it.
#[test]
fn load_help_points_to_where_rlimit_nofile_is_explained() {
    let out = cb().args(["mux", "load", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("RLIMIT_NOFILE"), "{help}");
    assert!(!help.contains("in the README"), "{help}");
    assert!(help.contains("docs/mux.md"), "{help}");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let page = std::fs::read_to_string(root.join("docs/mux.md")).unwrap();
    assert!(page.contains("**Limits, handled.** Descriptors: RLIMIT_NOFILE"));
}

#[test]
fn serve_binds_loopback_by_default() {
    cb().args(["mux", "serve", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("[default: 127.0.0.1:7000]"))
        .stdout(predicate::str::contains("0.0.0.0:7000").not());
}

#[test]
fn a_control_peer_without_the_token_can_neither_read_stats_nor_quit() {
    let (mut server, _, ctl) = token_server("epoll-lt");
    let out = control_exchange(ctl, "STATS\n");
    assert!(out.starts_with("ERR"), "{out}");
    assert!(!out.contains("user_s"), "{out}");
    let out = control_exchange(ctl, "QUIT\n");
    assert!(out.starts_with("ERR"), "{out}");
    let out = control_exchange(ctl, "TOKEN ffffffffffffffffffffffffffffffff\nQUIT\n");
    assert!(out.starts_with("ERR wrong control token"), "{out}");
    // Still there: the right token reads STATS.
    let out = control_exchange(ctl, &format!("TOKEN {TOKEN}\nSTATS\n"));
    assert!(out.starts_with("OK\n"), "{out}");
    assert!(out.contains("\"user_s\""), "{out}");
    assert!(server.0.try_wait().unwrap().is_none());
    // And QUIT with it stops the server.
    control_exchange(ctl, &format!("TOKEN {TOKEN}\nQUIT\n"));
    let st = server.0.wait().unwrap();
    assert!(st.success(), "{st:?}");
}

#[test]
#[allow(unsafe_code)]
fn an_idle_control_peer_is_closed_and_blocks_neither_the_load_nor_shutdown() {
    use std::io::Read;
    let (mut server, port, ctl) = token_server("epoll-et");
    // Connected and silent: the server closes it after a few seconds.
    let mut idle = std::net::TcpStream::connect(("127.0.0.1", ctl)).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut buf = String::new();
    let n = idle.read_to_string(&mut buf).unwrap();
    assert!(n > 0 && buf.starts_with("ERR idle"), "{buf}");
    // Another silent peer while the load runs: the load still gets its STATS.
    let _idle2 = std::net::TcpStream::connect(("127.0.0.1", ctl)).unwrap();
    let out = cb()
        .args(["mux", "load", "--target"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--control")
        .arg(format!("127.0.0.1:{ctl}"))
        .args(["--conns", "10", "--rounds", "3", "--format", "json"])
        .env(TOKEN_ENV, TOKEN)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["records"][0]["params"]["engine"], "epoll-et");
    assert_eq!(v["records"][0]["metrics"]["round_trips"], 30);
    // SIGTERM with a silent peer connected: the server does not wait for it.
    let _idle3 = std::net::TcpStream::connect(("127.0.0.1", ctl)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: kill with the pid of our own child.
    unsafe { libc::kill(server.0.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(60);
    let st = loop {
        if let Some(st) = server.0.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(st.success(), "{st:?}");
    // It was not closed by an idle timeout first: the peer is still open
    // from our side and sees the close only now.
    drop(_idle3);
}

#[test]
fn load_needs_the_control_token_and_a_private_token_file() {
    let (_server, port, ctl) = token_server("poll");
    cb().args(["mux", "load", "--target"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--control")
        .arg(format!("127.0.0.1:{ctl}"))
        .args(["--conns", "1"])
        .env_remove(TOKEN_ENV)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--control-token-file"));
    cb().args([
        "mux",
        "load",
        "--target",
        "127.0.0.1:9",
        "--conns",
        "1",
        "--control-token",
        "xyz",
    ])
    .assert()
    .code(2)
    .stderr(predicate::str::contains("32 hex digits"));
    let dir = std::env::temp_dir().join(format!("cbmux-tok-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("token");
    std::fs::write(&f, format!("{TOKEN}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    cb().args(["mux", "load", "--target", "127.0.0.1:9", "--conns", "1"])
        .arg("--control-token-file")
        .arg(&f)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("chmod 600"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server whose echo port + 1 is free (nothing answers on the default
/// control port): nginx's position. (server, echo port)
fn server_without_default_control() -> (KillOnDrop, u16) {
    let port = loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        if p < 65535 && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            break p;
        }
    };
    let ctl = free_port();
    let server = KillOnDrop(
        std::process::Command::new(bin_path())
            .args(["mux", "serve", "--engine", "epoll-lt", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--control")
            .arg(format!("127.0.0.1:{ctl}"))
            .env(TOKEN_ENV, TOKEN)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(ctl);
    (server, port)
}

#[test]
fn load_against_a_server_without_a_control_port_goes_on_with_server_cpu_unknown() {
    let (_server, port) = server_without_default_control();
    // Text: the run happens and says why the server CPU columns are empty.
    let out = cb()
        .args(["mux", "load", "--target"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--conns", "4", "--rounds", "2"])
        .env_remove(TOKEN_ENV)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let expect = format!(
        "server CPU unknown: nothing answers on 127.0.0.1:{}",
        port + 1
    );
    assert!(text.contains(&expect), "{text}");
    assert!(!text.contains("needs its token"), "{text}");
    // Records: the reason is there and no server CPU figure is.
    let out = cb()
        .args(["mux", "load", "--target"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--conns", "4", "--rounds", "2", "--format", "json"])
        .env_remove(TOKEN_ENV)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["records"][0];
    assert_eq!(r["params"]["engine"], "unknown");
    assert!(
        r["metrics"]["server_unknown"]
            .as_str()
            .unwrap()
            .starts_with("nothing answers on"),
        "{r}"
    );
    assert!(r["metrics"]["server_cpu_us_per_rt"].is_null(), "{r}");
    assert_eq!(r["metrics"]["round_trips"], 8);
}

#[test]
fn serve_writes_its_token_to_a_private_file_that_load_reads() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("cbmux-tokfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("token");
    let port = free_port();
    let ctl = free_port();
    let _server = KillOnDrop(
        std::process::Command::new(bin_path())
            .args(["mux", "serve", "--engine", "poll", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--control")
            .arg(format!("127.0.0.1:{ctl}"))
            .arg("--control-token-file")
            .arg(&f)
            .env_remove(TOKEN_ENV)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(ctl);
    let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    cb().args(["mux", "load", "--target"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--control")
        .arg(format!("127.0.0.1:{ctl}"))
        .args(["--conns", "4", "--rounds", "2"])
        .arg("--control-token-file")
        .arg(&f)
        .env_remove(TOKEN_ENV)
        .assert()
        .success();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_out_of_descriptors_sheds_connections_and_keeps_its_control_channel() {
    use std::io::Read;
    for engine in ["poll", "epoll-lt", "epoll-et", "io-uring"] {
        let port = free_port();
        let ctl = free_port();
        let mut server = KillOnDrop(
            std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "ulimit -n 100; exec {} mux serve --engine {engine} --listen 127.0.0.1:{port} --control 127.0.0.1:{ctl}",
                    bin_path().display()
                ))
                .env(TOKEN_ENV, TOKEN)
                .env_remove("COMMBENCH_MUX_FAIL_URING")
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", ctl)).is_err() {
            if let Some(st) = server.0.try_wait().unwrap() {
                let mut e = String::new();
                let _ = server.0.stderr.take().unwrap().read_to_string(&mut e);
                assert!(
                    engine == "io-uring" && e.contains("io_uring"),
                    "{engine}: {st:?} {e}"
                );
                commbench_core::testing::skip_part("io-uring", "io_uring", e.trim());
                break;
            }
            assert!(Instant::now() < deadline, "server never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        if server.0.try_wait().unwrap().is_some() {
            continue;
        }
        // More connections than its descriptors allow.
        let mut conns: Vec<std::net::TcpStream> = (0..120)
            .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
            .collect();
        let mut served = 0;
        for c in &mut conns {
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            if echoes_byte(c, b'x') {
                served += 1;
            }
        }
        assert!(served > 0 && served < 120, "{engine}: served {served}");
        // Still up, its control channel answers and counts the refused.
        assert!(
            server.0.try_wait().unwrap().is_none(),
            "{engine}: server exited"
        );
        let out = control_exchange(ctl, &format!("TOKEN {TOKEN}\nSTATS\n"));
        let json = out.lines().nth(1).unwrap_or_default();
        let v: Value = serde_json::from_str(json).unwrap_or_else(|_| panic!("{engine}: {out}"));
        assert_eq!(v["accepted"].as_u64(), Some(served), "{engine}: {v}");
        assert_eq!(v["refused"].as_u64(), Some(120 - served), "{engine}: {v}");
        // The ones it kept are still served.
        for c in conns.iter_mut().take(3) {
            assert!(echoes_byte(c, b'y'), "{engine}");
        }
        drop(conns);
        control_exchange(ctl, &format!("TOKEN {TOKEN}\nQUIT\n"));
        assert!(server.0.wait().unwrap().success(), "{engine}");
    }
}

#[test]
fn load_procs_share_the_rate_and_merge_the_open_loop_figures() {
    // 3000 req/s of HTTP over 12 connections split across 2 worker
    // processes for 0.5 s: each takes half the rate, and the merged
    // figures count every request once (with the whole rate in each
    // worker, twice as many would be scheduled).
    let out = cb()
        .args([
            "mux",
            "--engine",
            "epoll-lt",
            "--conns",
            "12",
            "--load-procs",
            "2",
            "--rate",
            "3000",
            "--warmup",
            "0.1",
            "--duration",
            "0.5",
            "--protocol",
            "http1",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let r = &v["records"][0];
    assert_eq!(r["params"]["load_procs"], 2);
    let m = &r["metrics"];
    let scheduled = m["scheduled"].as_u64().unwrap();
    // 1500 due in the window, ±1 per connection at its edges.
    assert!(
        scheduled.abs_diff(1500) <= 12,
        "{scheduled} scheduled: {m:#}"
    );
    assert_eq!(m["completed"], m["scheduled"]);
    assert_eq!(m["corrected_ns"]["n"].as_u64(), m["completed"].as_u64());
    assert_eq!(m["raw_ns"]["n"].as_u64(), m["completed"].as_u64());
    // Every response of both workers is counted, warm-up ones included.
    assert_eq!(
        m["http"]["s2xx"].as_u64().unwrap(),
        m["round_trips"].as_u64().unwrap()
    );
    assert!(m["rate_achieved"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_fixed_rate_run_reports_corrected_raw_and_lag_in_json() {
    let out = cb()
        .args([
            "mux",
            "--engine",
            "epoll-lt",
            "--conns",
            "10",
            "--rate",
            "2000",
            "--warmup",
            "0.1",
            "--duration",
            "0.5",
            "--protocol",
            "http1",
            "--in-flight",
            "2",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let errors: Vec<String> = schema().iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let r = &v["records"][0];
    assert_eq!(r["test"], "open");
    assert_eq!(r["params"]["rate"], 2000.0);
    assert_eq!(r["params"]["protocol"], "http1");
    let m = &r["metrics"];
    assert_eq!(m["completed"], m["scheduled"]);
    assert_eq!(
        m["http"]["s2xx"].as_u64().unwrap(),
        m["round_trips"].as_u64().unwrap()
    );
    for k in ["corrected_ns", "raw_ns", "lag_ns"] {
        for q in ["p50", "p99", "p999", "p9999", "max"] {
            assert!(m[k][q].as_f64().unwrap() >= 0.0, "{k}.{q}: {m:#}");
        }
    }
    assert!(m["corrected_p99_ns"].as_f64().unwrap() > 0.0);
    // Marked or not, the mark and its words are in the record.
    assert!(m["generator_limited"].is_boolean());
    let st = m["status"].as_str().unwrap();
    assert!(
        ["ok", "generator-limited", "rate-short"].contains(&st),
        "{st}"
    );
    assert_eq!(st != "ok", m["note"].is_string(), "{m:#}");
}

#[test]
fn an_impossible_lag_bound_marks_the_run_in_every_format() {
    // A 1 ns bound no generator keeps: the run is marked, with its words,
    // in the table, CSV and JSON.
    let args = [
        "mux",
        "--engine",
        "poll",
        "--conns",
        "4",
        "--rate",
        "1000",
        "--warmup",
        "0",
        "--duration",
        "0.3",
        "--max-lag-us",
        "0.001",
    ];
    cb().args(args)
        .args(["--format", "table"])
        .assert()
        .success()
        .stdout(predicate::str::contains("GENERATOR-LIMITED"))
        .stdout(predicate::str::contains(
            "the generator, not the server, was measured",
        ));
    for f in ["csv", "json"] {
        cb().args(args)
            .args(["--format", f])
            .assert()
            .success()
            .stdout(predicate::str::contains("generator-limited"))
            .stdout(predicate::str::contains(
                "the generator, not the server, was measured",
            ));
    }
}

#[test]
fn a_rate_sweep_records_every_step_and_the_highest_rate_meeting_the_slo() {
    let out = cb()
        .args([
            "mux",
            "--engine",
            "epoll-lt",
            "--conns",
            "4",
            "--rate-sweep",
            "500,1000",
            "--slo",
            "p99=10s",
            "--warmup",
            "0",
            "--duration",
            "0.3",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let recs = v["records"].as_array().unwrap();
    let steps: Vec<&Value> = recs.iter().filter(|r| r["test"] == "open").collect();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["params"]["rate"], 500.0);
    assert_eq!(steps[1]["params"]["rate"], 1000.0);
    let sweep: Vec<&Value> = recs.iter().filter(|r| r["test"] == "sweep").collect();
    assert_eq!(sweep.len(), 1);
    let m = &sweep[0]["metrics"];
    assert_eq!(m["sweep_points"], 2);
    assert_eq!(m["curve"].as_array().unwrap().len(), 2);
    // A 10 s objective is met unless a step was marked (generator late).
    let met: Vec<f64> = m["curve"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["met"] == true)
        .map(|p| p["rate"].as_f64().unwrap())
        .collect();
    assert_eq!(m["max_rate_meeting_slo"].as_f64(), met.last().copied());
    cb().args(["mux", "--rate-sweep", "5:1:1", "--conns", "2"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("TO is below FROM"));
    cb().args(["mux", "--rate-sweep", "5,10", "--slo", "p97=1ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("pNN=DURATION"));
}

fn httpd_dirs() -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("commbench-mux_httpd-"))
        .collect()
}

#[test]
fn httpd_measures_lighttpd_poll_and_epoll_and_leaves_nothing_behind() {
    if !std::path::Path::new("/usr/sbin/lighttpd").exists() {
        commbench_core::testing::skip("lighttpd", "not installed (apt-get install -y lighttpd)");
        return;
    }
    let out = cb()
        .args([
            "mux",
            "httpd",
            "--servers",
            "lighttpd-poll,lighttpd-epoll,ours-epoll-lt",
            "--conns",
            "60",
            "--active-pct",
            "100,10",
            "--requests",
            "600",
            "--repeat",
            "1",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let recs = v["records"].as_array().unwrap();
    let points: Vec<&Value> = recs.iter().filter(|r| r["test"] == "httpd").collect();
    assert_eq!(points.len(), 6, "{v:#}");
    for p in &points {
        assert_eq!(p["params"]["conns"], 60);
        assert!(p["metrics"]["round_trips"].as_u64().unwrap() >= 600);
        assert_eq!(p["metrics"]["non_2xx"], 0);
        assert!(
            p["metrics"]["server_cpu_us_per_rt"].as_f64().unwrap() > 0.0,
            "{p:#}"
        );
    }
    let engines: Vec<&str> = points
        .iter()
        .filter(|p| p["params"]["server"] == "lighttpd")
        .map(|p| p["params"]["engine"].as_str().unwrap())
        .collect();
    assert!(engines.contains(&"poll") && engines.contains(&"epoll"));
    let verdict = recs.iter().find(|r| r["test"] == "httpd-verdict").unwrap();
    let words = verdict["metrics"]["verdict"].as_str().unwrap();
    assert!(words.contains("lighttpd at 60 connections"), "{words}");
    assert!(words.contains("From 100% to 10% active"), "{words}");
    // Every server stopped, every temp dir removed.
    let dirs = httpd_dirs();
    let me = format!("-{}-", std::process::id());
    assert!(dirs.iter().all(|d| !d.contains(&me)), "{dirs:?}");
}

#[test]
#[allow(unsafe_code)]
fn httpd_with_nginx_left_its_temp_folder_on_sigint() {
    // nginx makes its own temp folders (client_body_temp_path, …) at
    // start; they were not registered for signal cleanup, so Ctrl-C left
    // the run's dir behind (only `commbench clean` removed it).
    if !std::path::Path::new("/usr/sbin/nginx").exists() {
        commbench_core::testing::skip("nginx", "not installed (apt-get install -y nginx)");
        return;
    }
    let mut child = std::process::Command::new(bin_path())
        .args([
            "mux",
            "httpd",
            "--servers",
            "nginx",
            "--conns",
            "20",
            "--requests",
            "100000000",
            "--repeat",
            "1",
            "--no-store",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let me = format!("commbench-mux_httpd-{}-", child.id());
    let ours = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&me))
            .map(|e| e.path())
            .collect()
    };
    // Until nginx has made its temp folders (the hang guard only).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ours().iter().any(|d| d.join("tmp/body").is_dir()) {
        assert!(
            Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "nginx never started: {:?}",
            child.wait_with_output().map(|o| o.stderr)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGINT), "{out:?}");
    assert!(ours().is_empty(), "left behind: {:?}", ours());
}

#[test]
fn clean_kills_a_server_whose_httpd_run_died() {
    // A run killed with SIGKILL leaves its temp dir; a server that outlived
    // it (here a stand-in with that dir as its working directory) is
    // killed by `commbench clean`, the dir removed.
    let dead = std::process::Command::new("true").spawn().unwrap();
    let mut dead = dead;
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let dir = std::env::temp_dir().join(format!("commbench-mux_httpd-{dead_pid}-1-0"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut server = std::process::Command::new("sleep")
        .arg("60")
        .current_dir(&dir)
        .spawn()
        .unwrap();
    std::fs::write(dir.join("server.pid"), server.id().to_string()).unwrap();
    cb().args(["clean"]).assert().success();
    let deadline = Instant::now() + Duration::from_secs(10);
    let st = loop {
        if let Some(st) = server.try_wait().unwrap() {
            break Some(st);
        }
        if Instant::now() > deadline {
            let _ = server.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(st.is_some(), "clean did not kill the leftover server");
    assert!(!dir.exists(), "clean left {}", dir.display());
}

/// Writes one byte and reads one back (an interrupted read is retried).
fn echoes_byte(c: &mut std::net::TcpStream, byte: u8) -> bool {
    use std::io::{Read, Write};
    if c.write_all(&[byte]).is_err() {
        return false;
    }
    let mut b = [0u8; 1];
    loop {
        match c.read(&mut b) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            r => return matches!(r, Ok(1)),
        }
    }
}

/// Issue 36: one open-loop run split into three segments, run as local
/// processes against one server, each starting on the same instant;
/// `merge` adds them into one record whose counts are exactly the sums of
/// the segments' and whose parameters are the whole run's. A missing and
/// a duplicated segment are refused, naming which.
#[test]
fn three_segments_against_one_server_merge_into_the_exact_sums() {
    let dir = crate::util::fresh_dir("segments");
    let port = free_port();
    let ctl = free_port();
    let _server = KillOnDrop(
        std::process::Command::new(bin_path())
            .args(["mux", "serve", "--engine", "epoll-lt", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .arg("--control")
            .arg(format!("127.0.0.1:{ctl}"))
            .env(TOKEN_ENV, TOKEN)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(ctl);
    // Far enough ahead for three processes to start and connect on a
    // busy machine; a segment ready after it fails the run (exit 1).
    let start_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 8000;
    let kids: Vec<_> = (0..3)
        .map(|i| {
            std::process::Command::new(bin_path())
                .args(["mux", "load", "--target"])
                .arg(format!("127.0.0.1:{port}"))
                .arg("--control")
                .arg(format!("127.0.0.1:{ctl}"))
                .args(["--conns", "7", "--rate", "700", "--warmup", "0.2"])
                .args(["--duration", "1", "--size", "64", "--timeout", "60"])
                .arg("--segment")
                .arg(format!("{i}/3"))
                .arg("--start-at")
                .arg(start_at.to_string())
                .args(["--format", "json", "-o"])
                .arg(dir.join(format!("seg{i}.json")))
                .env(TOKEN_ENV, TOKEN)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for k in kids {
        let out = k.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let seg = |i: usize| -> Value {
        let s = std::fs::read_to_string(dir.join(format!("seg{i}.json"))).unwrap();
        let v: Value = serde_json::from_str(&s).unwrap();
        v["records"][0].clone()
    };
    let segs: Vec<Value> = (0..3).map(seg).collect();
    // The --load-procs shares: 3, 2 and 2 connections.
    let conns: Vec<u64> = segs
        .iter()
        .map(|s| s["params"]["conns"].as_u64().unwrap())
        .collect();
    assert_eq!(conns, [3, 2, 2]);
    let files: Vec<std::path::PathBuf> = (0..3)
        .map(|i| dir.join(format!("seg{i}.json.hlog")))
        .collect();
    let out = cb()
        .arg("merge")
        .args(&files)
        .args(["--format", "json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    crate::util::assert_valid(&v);
    let merged = &v["records"][0];
    assert_eq!(merged["params"]["conns"], 7);
    assert_eq!(merged["params"]["rate"], 700.0);
    assert_eq!(merged["params"]["segments"], 3);
    let m = &merged["metrics"];
    for k in ["scheduled", "completed", "held", "round_trips", "connected"] {
        let sum: u64 = segs.iter().map(|s| s["metrics"][k].as_u64().unwrap()).sum();
        assert_eq!(m[k].as_u64(), Some(sum), "{k}");
    }
    for h in ["corrected_ns", "raw_ns", "lag_ns"] {
        let sum: u64 = segs
            .iter()
            .map(|s| s["metrics"][h]["n"].as_u64().unwrap())
            .sum();
        assert_eq!(m[h]["n"].as_u64(), Some(sum), "{h}");
    }
    assert!(m["completed"].as_u64().unwrap() > 0);
    cb().arg("merge")
        .arg(&files[0])
        .arg(&files[2])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("segment 1/3 missing"));
    cb().arg("merge")
        .args(&files)
        .arg(&files[1])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("given twice"));
    std::fs::remove_dir_all(&dir).unwrap();
}
