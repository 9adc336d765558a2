//! Issue item 13: the io_uring engine kept a 64 KiB buffer per connection,
//! idle ones included (19,800 idle peers: 1.28 GB of RSS, kept after they
//! left). Now receive buffers come from one provided-buffer ring per loop,
//! taken only when data arrives. Loopback only, bounded loops, no time
//! thresholds (the waits for the server to see connects and closes are
//! bounded by a generous deadline, not measured).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use commbench_mux::engine::{EngineKind, Lookup};
use commbench_mux::server::{self, ServeConfig, ServerStats};
use commbench_mux::Protocol;

fn uring_or_skip() -> bool {
    if let Err(why) = commbench_mux::engine::uring::probe() {
        commbench_core::testing::skip("io_uring", why);
        return false;
    }
    true
}

fn start(max_conns: usize, buf: usize) -> server::Server {
    commbench_mux::limits::ensure_nofile(2 * max_conns + 64).unwrap();
    server::start(&ServeConfig {
        engine: EngineKind::IoUring,
        lookup: Lookup::Index,
        protocol: Protocol::Raw,
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        buf_size: buf,
        max_conns,
        cpus: None,
        extra_work_ns: 0,
        tls: None,
    })
    .unwrap()
}

fn wait_for(srv: &server::Server, what: &str, ok: impl Fn(&ServerStats) -> bool) -> ServerStats {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = srv.stats();
        if ok(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: {s:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn echo(s: &mut TcpStream, msg: &[u8]) {
    s.write_all(msg).unwrap();
    let mut back = vec![0u8; msg.len()];
    s.read_exact(&mut back).unwrap();
    assert_eq!(back, msg);
}

#[test]
fn idle_io_uring_connections_take_no_receive_buffer() {
    if !uring_or_skip() {
        return;
    }
    const IDLE: usize = 400;
    let srv = start(2000, 64 << 10);
    let empty = wait_for(&srv, "loop started", |s| s.loops.bufs > 0);
    let ring = empty.loops.bufs;
    let reserved = empty.loops.buf_bytes;
    assert_eq!(reserved, ring * (64 << 10));
    assert_eq!(empty.loops.bufs_in_use, 0);

    let mut idle: Vec<TcpStream> = (0..IDLE)
        .map(|_| TcpStream::connect(("127.0.0.1", srv.port)).unwrap())
        .collect();
    let full = wait_for(&srv, "idle connections accepted", |s| {
        s.loops.live == IDLE as u64
    });
    // The ring does not grow with connections, and idle ones hold none of it.
    assert_eq!(full.loops.bufs, ring);
    assert_eq!(full.loops.buf_bytes, reserved);
    assert_eq!(full.loops.bufs_in_use, 0);
    // A connection's own state is small: far below one buffer each.
    assert!(
        full.loops.conn_bytes < IDLE as u64 * 1024,
        "{} bytes of connection state for {IDLE} idle connections",
        full.loops.conn_bytes
    );

    // They still echo (buffers are taken when data arrives and come back).
    for s in idle.iter_mut().step_by(7) {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        echo(s, b"hello, ring");
    }
    let after = wait_for(&srv, "buffers back", |s| s.loops.bufs_in_use == 0);
    assert_eq!(after.loops.bufs, ring);

    // They leave: connection memory falls back.
    idle.clear();
    let gone = wait_for(&srv, "closes seen", |s| s.loops.closed == IDLE as u64);
    assert_eq!(gone.loops.live, 0);
    assert_eq!(gone.loops.bufs_in_use, 0);
    assert!(
        gone.loops.conn_bytes < full.loops.conn_bytes,
        "connection memory did not fall: {} -> {}",
        full.loops.conn_bytes,
        gone.loops.conn_bytes
    );
    assert_eq!(gone.loops.conn_bytes, 0);
    let s = srv.stop().unwrap();
    assert_eq!(s.loops.accepted, IDLE as u64);
}
