//! `mux load --protocol http1` against servers that misbehave the way
//! real ones do: one that closes every connection after a number of
//! requests with `Connection: close` (nginx's `keepalive_requests`), one
//! that sends a malformed response once, and one that never answers. The
//! load side counts, reconnects and goes on, as wrk does; the run says
//! how much failed and is bounded by its schedule, not by `--timeout`.
//! The fake servers are threads on loopback, stopped when the test ends
//! (also when it fails).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use commbench_mux::load::{self, ClientsKind, LoadConfig};
use commbench_mux::open::{Arrivals, OpenConfig};
use commbench_mux::Protocol;

/// How the fake server misbehaves.
#[derive(Clone, Copy, Default)]
struct Habits {
    /// Answer the n-th request of each connection with `Connection:
    /// close`, then close it.
    close_every: Option<usize>,
    /// Answer this request (of the first connection to reach it) with a
    /// malformed response, then close.
    garbage_at: Option<usize>,
    /// Never answer.
    silent: bool,
}

struct FakeServer {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeServer {
    fn start(h: Habits) -> FakeServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let garbage_sent = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => {
                        let (st, g) = (st.clone(), garbage_sent.clone());
                        conns.push(std::thread::spawn(move || serve(s, h, &st, &g)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        FakeServer {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut s: TcpStream, h: Habits, stop: &AtomicBool, garbage_sent: &AtomicBool) {
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        match s.read(&mut b) {
            Ok(0) => return,
            Ok(k) => buf.extend_from_slice(&b[..k]),
            Err(_) => continue,
        }
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            n += 1;
            if h.silent {
                continue;
            }
            if h.garbage_at == Some(n) && !garbage_sent.swap(true, Ordering::Relaxed) {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: zz\r\n\r\n");
                return;
            }
            if h.close_every.is_some_and(|k| n.is_multiple_of(k)) {
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
                );
                return;
            }
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    }
}

fn load_cfg(port: u16, conns: usize, open: OpenConfig) -> LoadConfig {
    LoadConfig {
        target: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)),
        conns,
        active: conns,
        rounds: 55,
        rounds_for: None,
        size: 64,
        protocol: Protocol::Http1,
        clients: ClientsKind::Loop,
        load_threads: 1,
        sources: Vec::new(),
        timeout: Duration::from_secs(60),
        cpus: None,
        connect_window: load::CONNECT_WINDOW,
        open,
        http: Default::default(),
        tls: None,
    }
}

#[test]
fn a_server_closing_after_keepalive_requests_threw_the_run_away() {
    let srv = FakeServer::start(Habits {
        close_every: Some(10),
        ..Habits::default()
    });
    let cfg = load_cfg(srv.port, 2, OpenConfig::closed(1));
    let c = load::connect_all(&cfg).unwrap();
    let r = load::run_rounds(&cfg, &c.fds).unwrap();
    let o = r.open.as_ref().unwrap();
    // 55 requests a connection, a close after every 10th: 5 new
    // connections each, no request lost, nothing counted as failed.
    assert_eq!(r.round_trips, 2 * 55);
    assert_eq!(o.http.s2xx, 2 * 55);
    assert_eq!(o.http.reconnects, 2 * 5);
    assert_eq!(o.http.failed(), 0, "{:?}", o.http);
    assert_eq!(o.http.too_many_failures(), None);
}

#[test]
fn one_malformed_response_threw_the_whole_load_run_away() {
    let srv = FakeServer::start(Habits {
        garbage_at: Some(5),
        ..Habits::default()
    });
    let mut cfg = load_cfg(srv.port, 2, OpenConfig::closed(1));
    cfg.rounds = 40;
    let c = load::connect_all(&cfg).unwrap();
    let r = load::run_rounds(&cfg, &c.fds).unwrap();
    let o = r.open.as_ref().unwrap();
    // The bad response is counted, its request sent again on a new
    // connection: every request is answered once.
    assert_eq!(o.http.errors, 1, "{:?}", o.http);
    assert_eq!(o.http.reconnects, 1);
    assert_eq!(o.http.s2xx, 2 * 40);
    // 1 failure in 81 requests is more than 1%: the run is partial.
    let why = o.http.too_many_failures().unwrap();
    assert!(why.contains("1 malformed"), "{why}");
}

#[test]
fn a_silent_server_held_a_short_run_for_the_whole_timeout() {
    let srv = FakeServer::start(Habits {
        silent: true,
        ..Habits::default()
    });
    let open = OpenConfig {
        rate: Some(100.0),
        arrivals: Arrivals::Cbr,
        in_flight: 4,
        warmup: Duration::ZERO,
        duration: Duration::from_millis(300),
        max_lag: Duration::from_millis(1),
        split: None,
        start_at_unix_ns: None,
    };
    // --timeout 300 s: the wait after the schedule is bounded by the
    // schedule's own length, and the unanswered requests are counted.
    let mut cfg = load_cfg(srv.port, 2, open);
    cfg.timeout = Duration::from_secs(300);
    let c = load::connect_all(&cfg).unwrap();
    let r = load::run_rounds(&cfg, &c.fds).unwrap();
    let o = r.open.as_ref().unwrap();
    assert_eq!(r.round_trips, 0);
    assert!(o.http.timeouts > 0, "{:?}", o.http);
    assert_eq!(o.http.timeouts, o.scheduled, "{:?}", o.http);
    assert!(o.http.too_many_failures().is_some());
}
