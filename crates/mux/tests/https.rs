//! HTTPS on loopback, in-process: our load generator over rustls against
//! `mux serve --tls` on every engine (keep-alive and pipelined, counts
//! exact; io_uring also a connection per request), TLS 1.2 and 1.3 each negotiated and
//! recorded, sessions resumed when a connection is made per request, a
//! self-signed certificate refused without `--insecure` (a counted,
//! named failure and a run that says it measured nothing) and trusted
//! through `--cacert`, a plain server answering a ClientHello counted as
//! a failed handshake — and nginx with a generated certificate when it is
//! installed. Every run is bounded in requests and by its timeout.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use commbench_mux::engine::{EngineKind, Lookup};
use commbench_mux::http1::HttpRequest;
use commbench_mux::load::{self, ClientsKind, LoadConfig};
use commbench_mux::open::{OpenConfig, OpenOut};
use commbench_mux::server::{self, ServeConfig};
use commbench_mux::tls::{self, ClientTls, ClientTlsSpec, ServerTlsSpec, TlsVersion};
use commbench_mux::Protocol;

const READINESS: [EngineKind; 3] = [EngineKind::Poll, EngineKind::EpollLt, EngineKind::EpollEt];

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cb-https-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn serve(engine: EngineKind, tls: Option<ServerTlsSpec>) -> server::Server {
    server::start(&ServeConfig {
        engine,
        lookup: Lookup::Index,
        protocol: Protocol::Http1,
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        buf_size: 4096,
        max_conns: 64,
        cpus: None,
        extra_work_ns: 0,
        tls: tls.map(|s| tls::server_config(&s, "127.0.0.1").unwrap()),
    })
    .unwrap()
}

fn client(spec: ClientTlsSpec) -> Arc<ClientTls> {
    Arc::new(ClientTls::new(&spec, "localhost").unwrap())
}

fn insecure(version: TlsVersion) -> Arc<ClientTls> {
    client(ClientTlsSpec {
        version,
        insecure: true,
        ..Default::default()
    })
}

fn load_cfg(port: u16, conns: usize, rounds: u64, tls: Arc<ClientTls>) -> LoadConfig {
    LoadConfig {
        target: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)),
        conns,
        active: conns,
        rounds,
        rounds_for: None,
        size: 64,
        protocol: Protocol::Http1,
        clients: ClientsKind::Loop,
        load_threads: 1,
        sources: Vec::new(),
        timeout: Duration::from_secs(60),
        cpus: None,
        connect_window: load::CONNECT_WINDOW,
        open: OpenConfig::closed(1),
        http: HttpRequest::default(),
        tls: Some(tls),
    }
}

fn run(cfg: &LoadConfig) -> (u64, OpenOut) {
    let c = load::connect_all(cfg).unwrap();
    assert_eq!(c.fds.len(), cfg.conns, "{:?}", c.first_error);
    let r = load::run_rounds(cfg, &c.fds).unwrap();
    (r.round_trips, r.open.unwrap())
}

#[test]
fn every_readiness_engine_serves_https_keep_alive_and_pipelined() {
    for e in READINESS {
        let srv = serve(e, Some(ServerTlsSpec::default()));
        let mut cfg = load_cfg(srv.port, 10, 23, insecure(TlsVersion::Any));
        cfg.open = OpenConfig::closed(4);
        let (n, o) = run(&cfg);
        assert_eq!(n, 10 * 23, "{e:?}");
        assert_eq!(o.http.s2xx, 10 * 23, "{e:?}: {:?}", o.http);
        assert_eq!(
            o.http.failed() + o.http.reconnects,
            0,
            "{e:?}: {:?}",
            o.http
        );
        // One handshake per connection, each measured from its first
        // request's intended start.
        assert_eq!(o.tls.full + o.tls.resumed, 10, "{e:?}: {:?}", o.tls);
        assert_eq!(o.tls.failed, 0, "{e:?}");
        assert_eq!(o.tls.handshake.len(), 10, "{e:?}");
        assert_eq!(o.tls.version.as_deref(), Some("TLSv1.3"), "{e:?}");
        assert_eq!(o.tls.alpn.as_deref(), Some("http/1.1"), "{e:?}");
        assert!(o.tls.cipher.as_deref().unwrap().starts_with("TLS13_"));
        let s = srv.stop().unwrap();
        assert_eq!(s.loops.protocol_errors, 0, "{e:?}");
    }
}

/// io_uring serves HTTPS from completions: keep-alive with four
/// requests in flight per connection, TLS 1.2 and 1.3, and a connection
/// per request (close_notify after the last answer, sessions resumed),
/// every count exact, no protocol error, and every ring buffer back.
#[test]
fn io_uring_serves_https_keep_alive_pipelined_and_a_connection_per_request() {
    if let Err(why) = commbench_mux::engine::uring::probe() {
        commbench_core::testing::skip("io_uring", why);
        return;
    }
    for v in [TlsVersion::V13, TlsVersion::V12] {
        let srv = serve(EngineKind::IoUring, Some(ServerTlsSpec::default()));
        let mut cfg = load_cfg(srv.port, 10, 23, insecure(v));
        cfg.open = OpenConfig::closed(4);
        let (n, o) = run(&cfg);
        assert_eq!(n, 10 * 23, "{v:?}");
        assert_eq!(o.http.s2xx, 10 * 23, "{v:?}: {:?}", o.http);
        assert_eq!(
            o.http.failed() + o.http.reconnects,
            0,
            "{v:?}: {:?}",
            o.http
        );
        assert_eq!(o.tls.full + o.tls.resumed, 10, "{v:?}: {:?}", o.tls);
        assert_eq!(o.tls.failed, 0, "{v:?}");
        assert_eq!(o.tls.alpn.as_deref(), Some("http/1.1"), "{v:?}");
        let s = srv.stop().unwrap();
        assert_eq!(s.loops.protocol_errors, 0, "{v:?}");
        assert_eq!(s.loops.bufs_in_use, 0, "{v:?}: {:?}", s.loops);
    }
    let srv = serve(EngineKind::IoUring, Some(ServerTlsSpec::default()));
    let mut cfg = load_cfg(srv.port, 2, 10, insecure(TlsVersion::V13));
    cfg.http.close = true;
    let (n, o) = run(&cfg);
    assert_eq!((n, o.http.s2xx), (20, 20), "{:?}", o.http);
    assert_eq!(o.tls.full + o.tls.resumed, 20, "{:?}", o.tls);
    assert!(o.tls.full <= 2, "{:?}", o.tls);
    assert_eq!(o.http.reconnects, 20);
    assert_eq!(o.http.failed(), 0);
    let s = srv.stop().unwrap();
    assert_eq!(s.loops.protocol_errors, 0);
    assert_eq!(s.loops.bufs_in_use, 0, "{:?}", s.loops);
}

#[test]
fn tls_12_and_13_are_each_negotiated_and_recorded() {
    for (v, name, suite) in [
        (TlsVersion::V12, "TLSv1.2", "TLS_ECDHE_"),
        (TlsVersion::V13, "TLSv1.3", "TLS13_"),
    ] {
        let srv = serve(EngineKind::EpollLt, Some(ServerTlsSpec::default()));
        let (n, o) = run(&load_cfg(srv.port, 3, 5, insecure(v)));
        assert_eq!((n, o.http.s2xx), (15, 15), "{name}");
        assert_eq!(o.tls.version.as_deref(), Some(name));
        assert!(
            o.tls.cipher.as_deref().unwrap().starts_with(suite),
            "{:?}",
            o.tls.cipher
        );
        srv.stop().unwrap();
    }
    // A server that allows only 1.2 and a client only 1.3: every
    // handshake fails, counted and named.
    let srv = serve(
        EngineKind::Poll,
        Some(ServerTlsSpec {
            version: TlsVersion::V12,
            ..Default::default()
        }),
    );
    let (_, o) = run(&load_cfg(srv.port, 2, 3, insecure(TlsVersion::V13)));
    assert_eq!((o.tls.failed, o.tls.full + o.tls.resumed), (2, 0));
    let why = o.tls.none_completed().unwrap();
    assert!(
        why.starts_with("not measured, because every TLS handshake failed"),
        "{why}"
    );
    srv.stop().unwrap();
}

#[test]
fn a_connection_per_request_resumes_the_session() {
    for v in [TlsVersion::V13, TlsVersion::V12] {
        let srv = serve(EngineKind::EpollEt, Some(ServerTlsSpec::default()));
        let mut cfg = load_cfg(srv.port, 2, 10, insecure(v));
        cfg.http.close = true;
        let (n, o) = run(&cfg);
        assert_eq!((n, o.http.s2xx), (20, 20), "{v:?}: {:?}", o.http);
        // A new connection (and handshake) per request; only the first
        // of each connection could find no session to resume.
        assert_eq!(o.tls.full + o.tls.resumed, 20, "{v:?}: {:?}", o.tls);
        assert!(o.tls.full <= 2, "{v:?}: {:?}", o.tls);
        assert_eq!(o.tls.handshake.len(), 20);
        assert_eq!(o.http.reconnects, 20, "{v:?}");
        assert_eq!(o.http.failed(), 0, "{v:?}");
        srv.stop().unwrap();
    }
}

#[test]
fn a_self_signed_certificate_needs_insecure_or_cacert() {
    let d = dir("cacert");
    let cert = d.join("cert.pem");
    let srv = serve(
        EngineKind::EpollLt,
        Some(ServerTlsSpec {
            cert_out: Some(cert.clone()),
            ..Default::default()
        }),
    );
    // Trusting another certificate: a certificate error, every handshake.
    let other = d.join("other.pem");
    std::fs::write(
        &other,
        tls::generate_pem(vec!["localhost".into()]).unwrap().0,
    )
    .unwrap();
    let (_, o) = run(&load_cfg(
        srv.port,
        3,
        4,
        client(ClientTlsSpec {
            cacert: Some(other),
            ..Default::default()
        }),
    ));
    assert_eq!(o.tls.failed, 3, "{:?}", o.tls);
    assert_eq!(o.http.s2xx, 0);
    let why = o.tls.none_completed().unwrap();
    assert!(
        why.contains("certificate") && why.contains("--insecure"),
        "{why}"
    );
    // The written certificate through --cacert: no --insecure needed.
    let trusted = client(ClientTlsSpec {
        cacert: Some(cert.clone()),
        ..Default::default()
    });
    let (n, o) = run(&load_cfg(srv.port, 3, 4, trusted));
    assert_eq!((n, o.tls.failed), (12, 0));
    // The right certificate under another name (SNI) is refused.
    let (_, o) = run(&load_cfg(
        srv.port,
        1,
        2,
        client(ClientTlsSpec {
            cacert: Some(cert),
            sni: Some("elsewhere.example".into()),
            ..Default::default()
        }),
    ));
    assert_eq!(o.tls.failed, 1);
    assert!(
        o.tls
            .first_error
            .as_deref()
            .unwrap()
            .contains("not valid for name"),
        "{:?}",
        o.tls.first_error
    );
    srv.stop().unwrap();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_plain_server_answering_a_client_hello_is_a_failed_handshake() {
    let srv = serve(EngineKind::Poll, None);
    let (_, o) = run(&load_cfg(srv.port, 2, 3, insecure(TlsVersion::Any)));
    assert_eq!(o.tls.failed, 2, "{:?}", o.tls);
    assert!(o.tls.none_completed().is_some());
    srv.stop().unwrap();
}

/// nginx, TLS 1.3, with a generated certificate (in `d`).
fn nginx_conf(d: &Path, port: u16) -> String {
    let d = d.display();
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
error_log {d}/error.log warn;
pid {d}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        ssl_protocols TLSv1.3;
        root {d};
    }}
}}
"#
    )
}

#[test]
fn nginx_over_tls_13_with_a_generated_certificate() {
    let Some(nginx) = ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
    else {
        commbench_core::testing::skip("nginx", "nginx is not installed (apt-get install nginx)");
        return;
    };
    let d = dir("nginx");
    let (cert, key) = tls::generate_pem(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    std::fs::write(d.join("cert.pem"), &cert).unwrap();
    std::fs::write(d.join("key.pem"), &key).unwrap();
    std::fs::write(d.join("index.html"), "hello over TLS\n").unwrap();
    let port = commbench_mux::limits::pick_listen_port(Ipv4Addr::LOCALHOST);
    std::fs::write(d.join("nginx.conf"), nginx_conf(&d, port)).unwrap();
    let mut child = std::process::Command::new(&nginx)
        .arg("-c")
        .arg(d.join("nginx.conf"))
        .arg("-p")
        .arg(&d)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nginx did not start: see {}",
            d.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let trusted = client(ClientTlsSpec {
        cacert: Some(d.join("cert.pem")),
        ..Default::default()
    });
    let (n, o) = run(&load_cfg(port, 4, 10, trusted.clone()));
    assert_eq!((n, o.http.s2xx), (40, 40), "{:?}", o.http);
    assert_eq!(o.tls.version.as_deref(), Some("TLSv1.3"));
    assert_eq!(o.tls.alpn.as_deref(), Some("http/1.1"));
    // A connection per request: nginx's tickets resume the sessions.
    let mut cfg = load_cfg(port, 2, 10, trusted);
    cfg.http.close = true;
    let (n, o) = run(&cfg);
    assert_eq!((n, o.http.s2xx), (20, 20), "{:?}", o.http);
    assert_eq!(o.tls.full + o.tls.resumed, 20, "{:?}", o.tls);
    assert!(o.tls.resumed > 0, "{:?}", o.tls);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_socket_made_again_while_sending_carried_the_requests_in_plaintext() {
    use std::io::Read;
    use std::sync::{Arc as SArc, Mutex};
    // A peer that resets the first connection once the load side holds
    // it (so its first write fails and the socket is made again in the
    // middle of sending a window of requests), then notes the first byte
    // every later connection sends (a TLS handshake record starts with
    // 0x16; plaintext HTTP with 'G') and closes it.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let firsts = SArc::new(Mutex::new(Vec::new()));
    let seen = firsts.clone();
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (n, s) in l.incoming().enumerate() {
            let Ok(mut s) = s else { return };
            if n == 0 {
                let _ = first_tx.send(s);
                continue;
            }
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut b = [0u8; 1];
            if s.read_exact(&mut b).is_ok() {
                seen.lock().unwrap().push(b[0]);
            }
        }
    });
    let mut cfg = load_cfg(port, 1, 8, insecure(TlsVersion::Any));
    cfg.open = OpenConfig::closed(4);
    cfg.timeout = Duration::from_secs(20);
    let c = load::connect_all(&cfg).unwrap();
    assert_eq!(c.fds.len(), 1, "{:?}", c.first_error);
    // The reset only after connect_all took the connection (one that
    // arrives while it checks the connection would leave no connection to
    // run on); SO_LINGER 0: close sends a reset.
    let first = first_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&first);
    let lg = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: lg is a live linger of the stated size; fd is open.
    #[allow(unsafe_code)]
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&lg as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    drop(first);
    // Wait until the reset has reached the load side's socket.
    let mut pfd = libc::pollfd {
        fd: c.fds[0],
        events: 0,
        revents: 0,
    };
    // SAFETY: pfd is one live pollfd; the descriptor is open.
    #[allow(unsafe_code)]
    let ready = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    assert_eq!(ready, 1, "the reset did not arrive");
    // The peer answers no handshake: the run ends in an error or with
    // every handshake failed; what matters is what went on the wire.
    let _ = load::run_rounds(&cfg, &c.fds);
    let firsts = firsts.lock().unwrap().clone();
    assert!(!firsts.is_empty(), "no connection was made again");
    assert!(
        firsts.iter().all(|&b| b == 0x16),
        "a socket made again sent plaintext: first bytes {firsts:?}"
    );
}
