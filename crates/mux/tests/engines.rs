//! Every engine × lookup echoes correctly, in-process (server loops on
//! threads, the load generator on others): more connections than select's
//! FD_SETSIZE, messages from 1 B to 64 KiB, and a message larger than the
//! socket buffers (partial writes, the edge-triggered drain). The load
//! side checks every echoed byte; counts are exact. No time thresholds.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use commbench_mux::engine::{EngineKind, Lookup};
use commbench_mux::load::{self, ClientsKind, LoadConfig};
use commbench_mux::server::{self, ServeConfig};
use commbench_mux::Protocol;

fn engines() -> Vec<EngineKind> {
    EngineKind::runnable_here(|e, why| {
        commbench_core::testing::skip_part(e.as_str(), "io_uring", why)
    })
}

fn echo(engine: EngineKind, lookup: Lookup, conns: usize, rounds: u64, size: usize) {
    echo_with(engine, lookup, Protocol::Raw, conns, rounds, size)
}

fn echo_with(
    engine: EngineKind,
    lookup: Lookup,
    protocol: Protocol,
    conns: usize,
    rounds: u64,
    size: usize,
) {
    commbench_mux::limits::ensure_nofile(2 * conns + 64).unwrap();
    let srv = server::start(&ServeConfig {
        engine,
        lookup,
        protocol,
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        buf_size: commbench_mux::harness::buf_size(size, conns),
        max_conns: conns,
        cpus: None,
        extra_work_ns: 0,
        tls: None,
    })
    .unwrap();
    let cfg = LoadConfig {
        target: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, srv.port)),
        conns,
        active: conns,
        rounds,
        rounds_for: None,
        size,
        protocol,
        clients: ClientsKind::Loop,
        load_threads: 2,
        sources: Vec::new(),
        timeout: Duration::from_secs(120),
        cpus: None,
        connect_window: load::CONNECT_WINDOW,
        open: commbench_mux::open::OpenConfig::closed(1),
        http: Default::default(),
        tls: None,
    };
    let mut c = load::connect_all(&cfg).unwrap();
    assert_eq!(c.fds.len(), conns, "{:?}", c.first_error);
    let r = load::run_rounds(&cfg, &c.fds).unwrap();
    assert_eq!(r.round_trips, conns as u64 * rounds);
    assert_eq!(r.latency.len(), conns as u64 * rounds);
    assert_eq!(r.bytes, conns as u64 * rounds * size as u64);
    c.close();
    // The server sees every close.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = srv.stats();
        if s.loops.closed >= conns as u64 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = srv.stop().unwrap();
    assert_eq!(s.loops.accepted, conns as u64, "{engine:?} {lookup:?}");
    assert_eq!(s.loops.closed, conns as u64, "{engine:?} {lookup:?}");
    assert_eq!(
        s.loops.bytes,
        conns as u64 * rounds * size as u64,
        "{engine:?} {lookup:?}"
    );
    if lookup == Lookup::Scan {
        assert!(s.loops.scan_steps > 0);
    } else {
        assert_eq!(s.loops.scan_steps, 0);
    }
}

#[test]
fn every_engine_and_lookup_echoes_past_fd_setsize() {
    for e in engines() {
        for l in [Lookup::Scan, Lookup::Index] {
            echo(e, l, 1100, 3, 100);
        }
    }
}

#[test]
fn every_engine_echoes_one_byte_to_64_kib() {
    for e in engines() {
        for size in [1, 1024, 4096, 65536] {
            echo(e, Lookup::Index, 8, 4, size);
        }
    }
}

#[test]
fn a_message_larger_than_the_socket_buffers_arrives_whole() {
    // 8 MiB does not fit in loopback's default socket buffers: the server's
    // writes come back short and the edge-triggered loop must drain.
    for e in engines() {
        echo(e, Lookup::Index, 2, 2, 8 << 20);
    }
}

#[test]
fn injected_io_uring_failure_is_a_clear_error() {
    std::env::set_var("COMMBENCH_MUX_FAIL_URING", "1");
    let r = server::start(&ServeConfig {
        engine: EngineKind::IoUring,
        lookup: Lookup::Index,
        protocol: Protocol::Raw,
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        buf_size: 4096,
        max_conns: 10,
        cpus: None,
        extra_work_ns: 0,
        tls: None,
    });
    std::env::remove_var("COMMBENCH_MUX_FAIL_URING");
    let e = r.err().expect("io_uring start must fail").to_string();
    assert!(e.contains("io_uring setup failed"), "{e}");
}

#[test]
fn several_server_threads_share_the_port() {
    commbench_mux::limits::ensure_nofile(1000).unwrap();
    let srv = server::start(&ServeConfig {
        engine: EngineKind::EpollLt,
        lookup: Lookup::Index,
        protocol: Protocol::Raw,
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 3,
        buf_size: 4096,
        max_conns: 300,
        cpus: None,
        extra_work_ns: 0,
        tls: None,
    })
    .unwrap();
    let cfg = LoadConfig {
        target: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, srv.port)),
        conns: 300,
        active: 300,
        rounds: 5,
        rounds_for: None,
        size: 64,
        protocol: Protocol::Raw,
        clients: ClientsKind::Loop,
        load_threads: 1,
        sources: Vec::new(),
        timeout: Duration::from_secs(60),
        cpus: None,
        connect_window: load::CONNECT_WINDOW,
        open: commbench_mux::open::OpenConfig::closed(1),
        http: Default::default(),
        tls: None,
    };
    let c = load::connect_all(&cfg).unwrap();
    let r = load::run_rounds(&cfg, &c.fds).unwrap();
    assert_eq!(r.round_trips, 1500);
    drop(c);
    let s = srv.stop().unwrap();
    assert_eq!(s.threads, 3);
    assert_eq!(s.loops.accepted, 300);
}

#[test]
fn thread_per_connection_clients_echo_too() {
    commbench_mux::limits::ensure_nofile(1000).unwrap();
    let srv = server::start(&ServeConfig {
        engine: EngineKind::Poll,
        lookup: Lookup::Index,
        protocol: Protocol::Raw,
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        buf_size: 4096,
        max_conns: 200,
        cpus: None,
        extra_work_ns: 0,
        tls: None,
    })
    .unwrap();
    let cfg = LoadConfig {
        target: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, srv.port)),
        conns: 200,
        active: 150,
        rounds: 4,
        rounds_for: None,
        size: 300,
        protocol: Protocol::Raw,
        clients: ClientsKind::Threads,
        load_threads: 1,
        sources: Vec::new(),
        timeout: Duration::from_secs(60),
        cpus: None,
        connect_window: load::CONNECT_WINDOW,
        open: commbench_mux::open::OpenConfig::closed(1),
        http: Default::default(),
        tls: None,
    };
    let c = load::connect_all(&cfg).unwrap();
    let r = load::run_rounds(&cfg, &c.fds).unwrap();
    assert_eq!(r.round_trips, 600);
    assert_eq!(r.latency.len(), 600);
    drop(c);
    srv.stop().unwrap();
}

#[test]
fn every_engine_speaks_sockperf_framing() {
    for e in engines() {
        for l in [Lookup::Scan, Lookup::Index] {
            echo_with(e, l, Protocol::Sockperf, 50, 5, 14);
            echo_with(e, l, Protocol::Sockperf, 20, 3, 70_000);
        }
    }
}

/// Connects `n` clients to `port`; each says "x" and reads: `Ok(true)` for
/// an echo, `Ok(false)` for a close (refused).
fn probe(port: u16, n: usize) -> Vec<std::net::TcpStream> {
    (0..n)
        .map(|_| {
            let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s
        })
        .collect()
}

fn echoes(s: &mut std::net::TcpStream) -> bool {
    use std::io::{Read, Write};
    if s.write_all(b"x").is_err() {
        return false;
    }
    let mut b = [0u8; 1];
    // Interrupted is retried: the kernel's teardown of an io_uring this
    // thread used (the probe) signals it, ending a timed read in EINTR.
    loop {
        match s.read(&mut b) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            r => return matches!(r, Ok(1)),
        }
    }
}

#[test]
fn max_conns_caps_connections_in_every_engine() {
    commbench_mux::limits::ensure_nofile(1000).unwrap();
    for e in engines() {
        let srv = server::start(&ServeConfig {
            engine: e,
            lookup: Lookup::Index,
            protocol: Protocol::Raw,
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            buf_size: 4096,
            max_conns: 5,
            cpus: None,
            extra_work_ns: 0,
            tls: None,
        })
        .unwrap();
        let mut first = probe(srv.port, 5);
        for s in &mut first {
            assert!(echoes(s), "{e:?}: one of the first 5 not served");
        }
        let mut extra = probe(srv.port, 3);
        for s in &mut extra {
            assert!(!echoes(s), "{e:?}: a 6th connection was served");
        }
        // The ones it has are still served; a place freed is taken again.
        for s in &mut first {
            assert!(echoes(s), "{e:?}");
        }
        drop(first.pop());
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while srv.stats().loops.live > 4 {
            assert!(
                std::time::Instant::now() < deadline,
                "{e:?}: close not seen"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut again = probe(srv.port, 1);
        assert!(echoes(&mut again[0]), "{e:?}: a freed place was not reused");
        let st = srv.stats();
        assert_eq!(st.conn_limit, 5);
        assert_eq!(st.loops.accepted, 6, "{e:?}");
        assert_eq!(st.loops.refused, 3, "{e:?}");
        drop((first, extra, again));
        srv.stop().unwrap();
    }
}

#[test]
fn extra_work_holds_every_echo_on_every_engine() {
    // 200 µs of server busy-wait per read that carried data: every round
    // trip of one connection takes at least that (a lower bound; load only
    // adds time).
    use std::io::{Read, Write};
    for engine in engines() {
        let srv = server::start(&ServeConfig {
            engine,
            lookup: Lookup::Index,
            protocol: Protocol::Raw,
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            buf_size: 4096,
            max_conns: 4,
            cpus: None,
            extra_work_ns: 200_000,
            tls: None,
        })
        .unwrap();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_nodelay(true).unwrap();
        let mut buf = [0u8; 64];
        for _ in 0..10 {
            let t = std::time::Instant::now();
            s.write_all(&[7u8; 64]).unwrap();
            s.read_exact(&mut buf).unwrap();
            let rt = t.elapsed();
            assert!(
                rt >= Duration::from_micros(180),
                "{engine:?}: a round trip of {rt:?} with 200 µs of server work"
            );
            assert_eq!(buf, [7u8; 64]);
        }
        drop(s);
        srv.stop().unwrap();
    }
}

/// `--rounds-for`: the rounds end when the time is up, far below the
/// round cap, every connection stopping at a round's end — so the round
/// trips counted are exactly the latencies recorded and every echoed byte
/// was checked. (The window's length is not asserted: no time thresholds.)
#[test]
fn rounds_for_ends_the_closed_loop_at_a_round_boundary() {
    let conns = 20;
    let size = 64;
    let srv = server::start(&ServeConfig {
        engine: EngineKind::EpollLt,
        lookup: Lookup::Index,
        protocol: Protocol::Raw,
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        buf_size: commbench_mux::harness::buf_size(size, conns),
        max_conns: conns,
        cpus: None,
        extra_work_ns: 0,
        tls: None,
    })
    .unwrap();
    let rounds = 1_000_000_000;
    let cfg = LoadConfig {
        target: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, srv.port)),
        conns,
        active: conns,
        rounds,
        rounds_for: Some(Duration::from_millis(200)),
        size,
        protocol: Protocol::Raw,
        clients: ClientsKind::Loop,
        load_threads: 1,
        sources: Vec::new(),
        timeout: Duration::from_secs(120),
        cpus: None,
        connect_window: load::CONNECT_WINDOW,
        open: commbench_mux::open::OpenConfig::closed(1),
        http: Default::default(),
        tls: None,
    };
    let mut c = load::connect_all(&cfg).unwrap();
    let r = load::run_rounds(&cfg, &c.fds).unwrap();
    assert!(r.round_trips > 0 && r.round_trips < conns as u64 * rounds);
    assert_eq!(r.latency.len(), r.round_trips);
    assert_eq!(r.bytes, r.round_trips * size as u64);
    c.close();
}

#[test]
fn rounds_for_is_refused_where_the_rounds_do_not_run_on_the_closed_loop() {
    let cfg = commbench_mux::MuxConfig {
        rounds_for: Some(Duration::from_secs(1)),
        clients: ClientsKind::Threads,
        conns: 10,
        ..Default::default()
    };
    let e = cfg.validate().unwrap_err().to_string();
    assert!(
        e.contains("--rounds-for") && e.contains("--clients loop"),
        "{e}"
    );
}
