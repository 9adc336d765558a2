//! Issue 38 item 2: one client pipelining 10,000 × `GET / HTTP/1.1` and
//! never reading made `mux serve --protocol http1` queue a response per
//! request from one read (epoll-lt and poll tried to allocate 2.5 GB and
//! aborted; io-uring pinned 803 MB). Now every engine stops parsing a
//! connection's requests while a read buffer of responses waits: its
//! memory (the `conn_bytes` gauge) stays within a few buffers, the other
//! clients are served, and every request is still answered once the
//! client reads. io-uring's multishot receive may deliver more of the
//! requests before its cancel lands: raw request bytes (no responses made
//! of them), at most what its receive ring holds, so its bound adds the
//! ring's bytes. Loopback only; the waits are bounded, nothing is timed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use commbench_mux::engine::{EngineKind, Lookup};
use commbench_mux::http1::{response, set_response_body, SERVER_MAX_HEADER};
use commbench_mux::server::{self, ServeConfig};
use commbench_mux::Protocol;

const REQUESTS: usize = 10_000;
const BUF: usize = 16 << 10;
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\n\r\n";

fn engines() -> Vec<EngineKind> {
    EngineKind::runnable_here(|e, why| {
        commbench_core::testing::skip_part(e.as_str(), "io_uring", why)
    })
}

#[test]
fn pipelined_requests_from_a_client_that_never_reads_took_unbounded_memory() {
    // 4 KiB bodies: unbounded, the 10,000 responses are 42 MB.
    set_response_body(4096);
    let resp = response().len();
    // Two read buffers of responses and input, a partial header, and the
    // state arrays of a couple of connections (io-uring counts those).
    let base_bound = (4 * BUF + 2 * resp + 2 * (SERVER_MAX_HEADER + 1) + 64 * 1024) as u64;
    for engine in engines() {
        let bound = base_bound;
        let srv = server::start(&ServeConfig {
            engine,
            lookup: Lookup::Index,
            protocol: Protocol::Http1,
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            buf_size: BUF,
            max_conns: 16,
            cpus: None,
            extra_work_ns: 0,
            tls: None,
        })
        .unwrap();
        let mut hog = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        let mut w = hog.try_clone().unwrap();
        // The writes block once the server stops reading: on their own thread.
        let writer = std::thread::spawn(move || w.write_all(&REQUEST.repeat(REQUESTS)));
        // Until the server is stuck on the unread responses: output waits
        // and nothing more goes out for a while.
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut most = 0u64;
        let (mut last, mut still) = (u64::MAX, 0);
        let mut bound = bound;
        while still < 20 {
            let s = srv.stats();
            if engine == EngineKind::IoUring {
                bound = bound.max(base_bound + s.loops.buf_bytes);
            }
            most = most.max(s.loops.conn_bytes);
            if s.loops.bytes == last && s.loops.conn_bytes > 0 {
                still += 1;
            } else {
                still = 0;
            }
            last = s.loops.bytes;
            assert!(
                Instant::now() < deadline,
                "{engine:?}: server never stalled: {s:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            most <= bound,
            "{engine:?}: {most} bytes held for a client that does not read (bound {bound})"
        );
        // Another client is served meanwhile.
        let mut other = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        other
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        other.write_all(REQUEST).unwrap();
        let mut one = vec![0u8; resp];
        other.read_exact(&mut one).unwrap();
        assert_eq!(one, response(), "{engine:?}");
        // The hog reads at last: every request answered exactly once.
        hog.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut got = vec![0u8; resp];
        for i in 0..REQUESTS {
            hog.read_exact(&mut got)
                .unwrap_or_else(|e| panic!("{engine:?}: response {i}: {e}"));
            assert_eq!(got, response(), "{engine:?}: response {i}");
            if i % 1000 == 0 {
                most = most.max(srv.stats().loops.conn_bytes);
            }
        }
        writer.join().unwrap().unwrap();
        assert!(
            most <= bound,
            "{engine:?}: {most} bytes held (bound {bound})"
        );
        drop((hog, other));
        let s = srv.stop().unwrap();
        assert_eq!(s.loops.protocol_errors, 0, "{engine:?}");
    }
}
