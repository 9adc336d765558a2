//! The pipelining bound of issue 38 item 2, over TLS: one client
//! pipelining 10,000 × `GET / HTTP/1.1` inside its TLS session and never
//! reading must not make `mux serve --protocol http1 --tls` queue a
//! response per request in the connection's rustls session (4 KiB bodies:
//! 41 MB unbounded). The server's memory (this process's VmRSS, the
//! server runs in it) grows by a few read buffers at most while the client
//! does not read, and every request is answered exactly once when it
//! does. Loopback only; the waits are bounded, nothing is timed.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use commbench_mux::engine::{EngineKind, Lookup};
use commbench_mux::http1::{response, set_response_body};
use commbench_mux::server::{self, ServeConfig};
use commbench_mux::tls::{self, ClientTls, ClientTlsSpec, ServerTlsSpec};
use commbench_mux::Protocol;

const REQUESTS: usize = 10_000;
const BUF: usize = 16 << 10;
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\n\r\n";
/// What the server may add while the client does not read: far under the
/// 41 MB of unbounded responses.
const MAX_GROWTH_KIB: u64 = 12 * 1024;

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Writes what the session has to send, as far as the socket takes it.
fn push(c: &mut rustls::ClientConnection, s: &mut TcpStream) {
    while c.wants_write() {
        match c.write_tls(s) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => panic!("write: {e}"),
        }
    }
}

#[test]
fn pipelined_https_requests_from_a_client_that_never_reads_stay_bounded() {
    set_response_body(4096);
    let resp = response().to_vec();
    let tls_cfg = tls::server_config(&ServerTlsSpec::default(), "127.0.0.1").unwrap();
    let client = ClientTls::new(
        &ClientTlsSpec {
            insecure: true,
            ..Default::default()
        },
        "localhost",
    )
    .unwrap();
    for engine in [
        EngineKind::Poll,
        EngineKind::EpollLt,
        EngineKind::EpollEt,
        EngineKind::IoUring,
    ] {
        if engine == EngineKind::IoUring {
            if let Err(why) = commbench_mux::engine::uring::probe() {
                commbench_core::testing::skip("io_uring", why);
                continue;
            }
        }
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
            tls: Some(tls_cfg.clone()),
        })
        .unwrap();
        let mut sock = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        sock.set_nonblocking(true).unwrap();
        let mut c = client.connect().unwrap();
        c.set_buffer_limit(None);
        c.writer().write_all(&REQUEST.repeat(REQUESTS)).unwrap();
        let before = rss_kib();
        // Send until the server stops taking them: nothing more goes out
        // for a while.
        let deadline = Instant::now() + Duration::from_secs(120);
        let (mut last, mut still) = (u64::MAX, 0);
        let mut most = 0;
        let mut handshake = [0u8; 16 << 10];
        while still < 30 {
            push(&mut c, &mut sock);
            // The handshake's answer must be read for the requests to go.
            if c.is_handshaking() {
                match sock.read(&mut handshake) {
                    Ok(n) => {
                        c.read_tls(&mut &handshake[..n]).unwrap();
                        c.process_new_packets().unwrap();
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("{engine:?}: {e}"),
                }
            }
            let s = srv.stats();
            if s.loops.bytes == last && !c.is_handshaking() {
                still += 1;
            } else {
                still = 0;
            }
            last = s.loops.bytes;
            most = most.max(rss_kib().saturating_sub(before));
            assert!(
                Instant::now() < deadline,
                "{engine:?}: never stalled: {s:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            most <= MAX_GROWTH_KIB,
            "{engine:?}: the server grew by {most} KiB for a client that does not read"
        );
        // Read at last: every request answered exactly once.
        let want = resp.len() * REQUESTS;
        let mut got = 0usize;
        let mut raw = vec![0u8; 64 << 10];
        let mut plain = vec![0u8; 64 << 10];
        let mut carry: Vec<u8> = Vec::new();
        while got < want {
            assert!(
                Instant::now() < deadline,
                "{engine:?}: {got} of {want} bytes"
            );
            push(&mut c, &mut sock);
            let n = match sock.read(&mut raw) {
                Ok(0) => panic!("{engine:?}: closed after {got} of {want} bytes"),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Err(e) => panic!("{engine:?}: {e}"),
            };
            let mut rd = &raw[..n];
            while !rd.is_empty() {
                c.read_tls(&mut rd).unwrap();
                c.process_new_packets().unwrap();
                loop {
                    match c.reader().read(&mut plain) {
                        Ok(0) => panic!("{engine:?}: close_notify after {got} bytes"),
                        Ok(m) => {
                            carry.extend_from_slice(&plain[..m]);
                            got += m;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => panic!("{engine:?}: {e}"),
                    }
                }
                while carry.len() >= resp.len() {
                    assert_eq!(&carry[..resp.len()], &resp[..], "{engine:?}");
                    carry.drain(..resp.len());
                }
            }
        }
        assert_eq!(got, want, "{engine:?}");
        assert!(carry.is_empty());
        drop(sock);
        let s = srv.stop().unwrap();
        assert_eq!(s.loops.protocol_errors, 0, "{engine:?}");
    }
}
