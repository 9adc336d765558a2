//! `mux serve --tls` and `mux load --tls` through the binary: the
//! generated certificate written with `--cert-out` and trusted through
//! `--cacert` (TLS 1.3 and 1.2 recorded, a connection per request
//! resumed), refused without `--insecure` (exit 1, "not measured" and
//! what to do), io_uring refusing `--tls` and `--tls` without HTTP as
//! usage errors (exit 2). Loopback, small counts; deadlines only guard
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

#[test]
fn tls_where_it_cannot_run_is_a_usage_error() {
    cb().args([
        "mux",
        "serve",
        "--protocol",
        "http1",
        "--tls",
        "--engine",
        "io-uring",
    ])
    .args(["--listen", "127.0.0.1:0", "--control", "none"])
    .assert()
    .code(2);
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
