//! `mux serve --tls` and `mux load --tls` through the binary: the
//! generated certificate written with `--cert-out` and trusted through
//! `--cacert` (TLS 1.3 and 1.2 recorded, a connection per request
//! resumed), refused without `--insecure` (exit 1, "not measured" and
//! what to do), `--tls` without HTTP a usage error (exit 2), io_uring
//! serving it, over `--load-procs`, in segments that merge exactly, and
//! `--repeat` giving the load CPU's user/sys split intervals. Loopback, small counts; deadlines only guard
//! against hangs.

use crate::util::{assert_valid, bin_path, cb};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

struct KillOnDrop(Child);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `mux serve --tls` writing its certificate to `cert`; its port.
fn tls_server(engine: &str, cert: &Path) -> (KillOnDrop, u16) {
    let port = free_port();
    let ctl = free_port();
    let server = KillOnDrop(
        std::process::Command::new(bin_path())
            .args([
                "mux",
                "serve",
                "--protocol",
                "http1",
                "--tls",
                "--engine",
                engine,
            ])
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--control")
            .arg(format!("127.0.0.1:{ctl}"))
            .env("COMMBENCH_MUX_TOKEN", "00112233445566778899aabbccddeeff")
            .arg("--cert-out")
            .arg(cert)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server never listened on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (server, port)
}

fn load(port: u16, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(bin_path())
        .args(["mux", "load", "--control", "none", "--protocol", "http1"])
        .arg("--target")
        .arg(format!("127.0.0.1:{port}"))
        .args(["--conns", "3", "--rounds", "4", "--tls", "--format", "json"])
        .args(extra)
        .output()
        .unwrap()
}

fn tls_of(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v);
    assert!(v["records"][0]["params"]["tls"].is_string(), "{v}");
    let m = &v["records"][0]["metrics"];
    assert!(m["client_user_us_per_rt"].is_number(), "{m}");
    m["tls"].clone()
}

#[test]
fn a_generated_certificate_is_refused_without_insecure_and_trusted_through_cacert() {
    let dir = std::env::temp_dir().join(format!("cbmux-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = dir.join("cert.pem");
    let (_srv, port) = tls_server("epoll-et", &cert);
    // The system's roots do not know it: measured nothing, says why.
    let out = load(port, &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("not measured, because every TLS handshake failed") && e.contains("--insecure"),
        "{e}"
    );
    let c = cert.to_str().unwrap();
    for (v, name) in [("1.3", "TLSv1.3"), ("1.2", "TLSv1.2")] {
        let t = tls_of(&load(port, &["--cacert", c, "--tls-version", v]));
        assert_eq!(t["version"], name, "{t}");
        assert_eq!(t["handshakes"], 3, "{t}");
        assert_eq!(t["alpn"], "http/1.1", "{t}");
    }
    let out = load(port, &["--insecure", "--conn-per-request"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["records"][0]["params"]["conn_per_request"], true, "{v}");
    let t = tls_of(&out);
    assert_eq!(t["handshakes"], 12, "{t}");
    assert!(t["resumed"].as_u64().unwrap() >= 9, "{t}");
    assert_eq!(t["handshake_ns"]["n"], 12, "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--load-procs` with `--tls`: every worker process builds its own
/// client config and session cache from the same options; the parent adds
/// their handshakes, so the counts are the whole run's exactly.
#[test]
fn tls_over_load_procs_adds_every_workers_handshakes() {
    let dir = std::env::temp_dir().join(format!("cbmux-tls-procs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_srv, port) = tls_server("epoll-lt", &dir.join("cert.pem"));
    let out = load(
        port,
        &["--insecure", "--load-procs", "2", "--conn-per-request"],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["records"][0]["params"];
    assert_eq!(p["load_procs"], 2, "{v}");
    assert_eq!(p["conn_per_request"], true, "{v}");
    let t = tls_of(&out);
    // 3 connections (2 in one worker, 1 in the other) × 4 requests, a
    // handshake each; a worker's connections begin with full handshakes
    // and resume afterwards from their own process's cache.
    assert_eq!(t["handshakes"], 12, "{t}");
    assert_eq!(t["failed"], 0, "{t}");
    assert_eq!(t["handshake_ns"]["n"], 12, "{t}");
    let full = t["full"].as_u64().unwrap();
    assert!((2..=3).contains(&full), "{t}");
    assert_eq!(t["resumed"].as_u64().unwrap(), 12 - full, "{t}");
    assert_eq!(t["alpn"], "http/1.1", "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--repeat` gives the load side's user and system CPU per request a
/// median and 95% interval over the repeats, like its total.
#[test]
fn repeats_give_the_load_sides_user_and_system_cpu_intervals() {
    let dir = std::env::temp_dir().join(format!("cbmux-tls-rep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_srv, port) = tls_server("epoll-lt", &dir.join("cert.pem"));
    let out = load(port, &["--insecure", "--repeat", "3"]);
    let _ = tls_of(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &v["records"][0]["metrics"];
    for k in [
        "client_user_us_per_rt",
        "client_sys_us_per_rt",
        "client_cpu_us_per_rt",
    ] {
        assert_eq!(m[format!("{k}_n")], 3, "{k}: {m}");
        let samples = m[format!("{k}_samples")].as_array().unwrap();
        assert_eq!(samples.len(), 3, "{k}: {m}");
        let (lo, x, hi) = (
            m[format!("{k}_lo")].as_f64().unwrap(),
            m[k].as_f64().unwrap(),
            m[format!("{k}_hi")].as_f64().unwrap(),
        );
        assert!(lo <= x && x <= hi, "{k}: {lo} {x} {hi}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two HTTPS segments (a connection per request, so the measured window
/// has handshakes) against one server: `merge` adds their handshake
/// counts exactly and their handshake histograms.
#[test]
fn https_segments_merge_their_handshakes_exactly() {
    let dir = crate::util::fresh_dir("tls-segments");
    let (_srv, port) = tls_server("epoll-lt", &dir.join("cert.pem"));
    let start_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 8000;
    let kids: Vec<_> = (0..2)
        .map(|i| {
            std::process::Command::new(bin_path())
                .args(["mux", "load", "--control", "none", "--protocol", "http1"])
                .arg("--target")
                .arg(format!("127.0.0.1:{port}"))
                .args(["--tls", "--insecure", "--conn-per-request"])
                .args(["--conns", "4", "--rate", "100", "--warmup", "0.2"])
                .args(["--duration", "1", "--timeout", "60"])
                .arg("--segment")
                .arg(format!("{i}/2"))
                .arg("--start-at")
                .arg(start_at.to_string())
                .args(["--format", "json", "-o"])
                .arg(dir.join(format!("seg{i}.json")))
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
    let segs: Vec<Value> = (0..2)
        .map(|i| {
            let s = std::fs::read_to_string(dir.join(format!("seg{i}.json"))).unwrap();
            serde_json::from_str::<Value>(&s).unwrap()["records"][0]["metrics"]["tls"].clone()
        })
        .collect();
    let files: Vec<std::path::PathBuf> = (0..2)
        .map(|i| dir.join(format!("seg{i}.json.hlog")))
        .collect();
    let out = cb()
        .arg("merge")
        .args(&files)
        .args(["--format", "json"])
        .assert()
        .success();
    let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_valid(&v);
    let t = &v["records"][0]["metrics"]["tls"];
    for k in ["handshakes", "full", "resumed", "failed"] {
        let sum: u64 = segs.iter().map(|s| s[k].as_u64().unwrap()).sum();
        assert_eq!(t[k].as_u64(), Some(sum), "{k}: {t}");
    }
    let n: u64 = segs
        .iter()
        .map(|s| s["handshake_ns"]["n"].as_u64().unwrap())
        .sum();
    assert!(n > 0, "{segs:?}");
    assert_eq!(t["handshake_ns"]["n"].as_u64(), Some(n), "{t}");
    let max = segs
        .iter()
        .map(|s| s["handshake_ns"]["max"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(t["handshake_ns"]["max"].as_f64(), Some(max), "{t}");
    assert_eq!(t["version"], segs[0]["version"], "{t}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tls_where_it_cannot_run_is_a_usage_error() {
    // The timeout only guards a server that would wrongly start.
    cb().args(["mux", "serve", "--tls", "--engine", "epoll-lt"])
        .args(["--listen", "127.0.0.1:0", "--control", "127.0.0.1:0"])
        .timeout(Duration::from_secs(60))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--tls needs --protocol http1"));
    cb().args([
        "mux",
        "load",
        "--target",
        "127.0.0.1:9",
        "--control",
        "none",
        "--tls",
    ])
    .assert()
    .code(2);
    cb().args([
        "mux",
        "load",
        "--target",
        "127.0.0.1:9",
        "--control",
        "none",
    ])
    .args(["--protocol", "http1", "--insecure"])
    .assert()
    .code(2);
}
