//! The open-loop load generator and HTTP/1.1, in-process: a fixed rate
//! sends exactly the scheduled requests; every engine serves keep-alive
//! HTTP/1.1 with pipelining (counts exact); a server that stalls for a set
//! time shows the stall in the corrected p99.9 and not in the raw one (the
//! relation to the stall's length is asserted, never a machine-speed
//! threshold); a server answering nonsense is an error, not a hang.
//! Every run is bounded in requests and by its timeout.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use commbench_mux::engine::{EngineKind, Lookup};
use commbench_mux::load::{self, ClientsKind, LoadConfig};
use commbench_mux::open::{Arrivals, OpenConfig};
use commbench_mux::server::{self, ServeConfig};
use commbench_mux::{MuxError, Protocol};

fn engines() -> Vec<EngineKind> {
    EngineKind::runnable_here(|e, why| {
        commbench_core::testing::skip_part(e.as_str(), "io_uring", why)
    })
}

fn load_cfg(port: u16, conns: usize, protocol: Protocol, open: OpenConfig) -> LoadConfig {
    LoadConfig {
        target: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)),
        conns,
        active: conns,
        rounds: 50,
        rounds_for: None,
        size: 64,
        protocol,
        clients: ClientsKind::Loop,
        load_threads: 1,
        sources: Vec::new(),
        timeout: Duration::from_secs(30),
        cpus: None,
        connect_window: load::CONNECT_WINDOW,
        open,
        http: Default::default(),
        tls: None,
    }
}

fn serve(engine: EngineKind, protocol: Protocol, conns: usize) -> server::Server {
    server::start(&ServeConfig {
        engine,
        lookup: Lookup::Index,
        protocol,
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        buf_size: 4096,
        max_conns: conns,
        cpus: None,
        extra_work_ns: 0,
        tls: None,
    })
    .unwrap()
}

fn rate(rate: f64, warmup_ms: u64, duration_ms: u64) -> OpenConfig {
    OpenConfig {
        rate: Some(rate),
        arrivals: Arrivals::Cbr,
        in_flight: 1,
        warmup: Duration::from_millis(warmup_ms),
        duration: Duration::from_millis(duration_ms),
        max_lag: Duration::from_millis(1),
        split: None,
        start_at_unix_ns: None,
    }
}

#[test]
fn every_engine_serves_pipelined_keep_alive_http() {
    for e in engines() {
        let srv = serve(e, Protocol::Http1, 20);
        let mut cfg = load_cfg(srv.port, 20, Protocol::Http1, OpenConfig::closed(4));
        cfg.rounds = 37;
        let c = load::connect_all(&cfg).unwrap();
        let r = load::run_rounds(&cfg, &c.fds).unwrap();
        let o = r.open.as_ref().unwrap();
        assert_eq!(r.round_trips, 20 * 37, "{e:?}");
        assert_eq!(o.http.s2xx, 20 * 37, "{e:?}");
        assert_eq!(o.http.non_2xx() + o.http.errors + o.http.resets, 0);
        assert_eq!(o.corrected.len(), 20 * 37);
        drop(c);
        srv.stop().unwrap();
    }
}

#[test]
fn a_fixed_rate_sends_exactly_the_scheduled_requests() {
    for arrivals in [Arrivals::Cbr, Arrivals::Poisson] {
        let srv = serve(EngineKind::EpollLt, Protocol::Raw, 8);
        let mut open = rate(4000.0, 100, 500);
        open.arrivals = arrivals;
        open.in_flight = 2;
        let cfg = load_cfg(srv.port, 8, Protocol::Raw, open);
        let c = load::connect_all(&cfg).unwrap();
        let r = load::run_rounds(&cfg, &c.fds).unwrap();
        let o = r.open.as_ref().unwrap();
        // Every request due in the window completed and was recorded.
        assert_eq!(o.completed, o.scheduled, "{arrivals:?}");
        assert_eq!(o.corrected.len(), o.scheduled);
        assert_eq!(o.raw.len(), o.scheduled);
        // 4000/s for 0.5 s: 2000 due (cbr: ±1 per connection at the edges).
        let want = 2000.0;
        let tol = if arrivals == Arrivals::Cbr {
            8.0
        } else {
            200.0
        };
        assert!(
            (o.scheduled as f64 - want).abs() <= tol,
            "{arrivals:?}: {} scheduled",
            o.scheduled
        );
        // Lag is recorded for requests sent when due, never more than sent.
        assert!(o.lag.len() + o.held == o.scheduled, "{arrivals:?}");
        // Corrected latency is never below raw (it adds the wait before the write).
        assert!(o.corrected.quantile(0.5) >= o.raw.quantile(0.5));
        drop(c);
        srv.stop().unwrap();
    }
}

/// An echo server (a thread per connection) that answers nothing from
/// `stall_at` after its start for `stall` — every connection at once.
struct StallServer {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl StallServer {
    fn start(stall_at: Duration, stall: Duration, conns: usize) -> StallServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        std::thread::spawn(move || {
            let mut t0: Option<Instant> = None;
            for _ in 0..conns {
                let Ok((mut s, _)) = l.accept() else { return };
                let start = *t0.get_or_insert_with(Instant::now);
                let stop = st.clone();
                std::thread::spawn(move || {
                    let _ = s.set_nodelay(true);
                    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                    let mut buf = [0u8; 4096];
                    while !stop.load(Ordering::Relaxed) {
                        let n = match s.read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => n,
                            Err(e)
                                if e.kind() == std::io::ErrorKind::WouldBlock
                                    || e.kind() == std::io::ErrorKind::TimedOut
                                    || e.kind() == std::io::ErrorKind::Interrupted =>
                            {
                                continue
                            }
                            Err(_) => return,
                        };
                        let now = start.elapsed();
                        if now >= stall_at && now < stall_at + stall {
                            std::thread::sleep(stall_at + stall - now);
                        }
                        if s.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        StallServer { port, stop }
    }
}

impl Drop for StallServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_stall_shows_in_the_corrected_p999_and_not_in_the_raw() {
    // 4 connections, 5000 requests/s, one in flight each; the server
    // stops answering for 200 ms, 0.6 s after the connections are made
    // (inside the measured window: 0.2 s warm-up, 2 s measured).
    let stall = Duration::from_millis(200);
    let conns = 4;
    let srv = StallServer::start(Duration::from_millis(600), stall, conns);
    let cfg = load_cfg(srv.port, conns, Protocol::Raw, rate(5000.0, 200, 2000));
    let c = load::connect_all(&cfg).unwrap();
    let r = load::run_rounds(&cfg, &c.fds).unwrap();
    let o = r.open.as_ref().unwrap();
    assert_eq!(o.completed, o.scheduled);
    let stall_ns = stall.as_nanos() as f64;
    let corrected = o.corrected.quantile(0.999);
    let raw = o.raw.quantile(0.999);
    eprintln!(
        "stall {stall_ns} ns: corrected p99.9 {corrected} ns, raw p99.9 {raw} ns, raw max {} ns, held {}, {} requests",
        o.raw.quantile(1.0),
        o.held,
        o.completed
    );
    // During the stall ~1000 requests fall due; they wait for a window
    // slot and then for the server. Corrected: the 0.1% tail (10 of
    // ~10,000) sits near the start of the stall, so it is most of its
    // length. Raw: only the 4 requests written before the stall waited
    // through it; the rest were written after it ended.
    assert!(
        corrected >= 0.5 * stall_ns,
        "corrected p99.9 {corrected} ns does not show a {stall_ns} ns stall"
    );
    assert!(
        raw < 0.5 * stall_ns,
        "raw p99.9 {raw} ns should not show the stall (only {conns} requests waited through it)"
    );
    // The stall is in the raw maximum (the requests written before it).
    assert!(o.raw.quantile(1.0) >= 0.5 * stall_ns);
    // Requests that waited for the window were counted as held.
    assert!(o.held > 0);
}

#[test]
fn a_server_answering_nonsense_is_an_error_not_a_hang() {
    let cases: [&[u8]; 3] = [
        b"HTTP/1.1 200 OK\r\n\r\nno length",
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: zz\r\n\r\n",
    ];
    for answer in cases {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 1024];
            let _ = s.read(&mut b);
            let _ = s.write_all(answer);
            std::thread::sleep(Duration::from_millis(300));
        });
        let mut cfg = load_cfg(port, 1, Protocol::Http1, OpenConfig::closed(1));
        cfg.timeout = Duration::from_secs(20);
        let c = load::connect_all(&cfg).unwrap();
        let e = load::run_rounds(&cfg, &c.fds).unwrap_err();
        assert!(
            matches!(e, MuxError::Corrupt(_) | MuxError::ServerClosed { .. }),
            "{e}"
        );
        drop(c);
        t.join().unwrap();
    }
}
