//! Issue item 13, buffer exhaustion: with a provided-buffer ring smaller
//! than the number of connections sending at once, recvs end with ENOBUFS,
//! wait, and are re-armed when buffers come back; every byte is echoed, in
//! order. Its own test binary: the ring size is set through the
//! environment (COMMBENCH_MUX_URING_BUFS), which is process-wide.

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

#[test]
fn io_uring_buffer_exhaustion_loses_no_data_and_rearms() {
    // Multishot recv, then the single-shot fallback (kernels without it).
    exhaust(false);
    std::env::set_var("COMMBENCH_MUX_URING_SINGLESHOT", "1");
    exhaust(true);
}

fn exhaust(single_shot: bool) {
    // More connections sending at once than the ring has buffers: recvs
    // end with ENOBUFS, wait, and are re-armed when buffers come back;
    // every byte is echoed, in order.
    if !uring_or_skip() {
        return;
    }
    const CONNS: usize = 300;
    std::env::set_var("COMMBENCH_MUX_URING_BUFS", "4");
    let srv = start(CONNS, 4096);
    let ring = wait_for(&srv, "loop started", |s| s.loops.bufs > 0)
        .loops
        .bufs as usize;
    assert!(ring < CONNS, "ring of {ring} buffers");
    let mut conns: Vec<TcpStream> = (0..CONNS)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s
        })
        .collect();
    wait_for(&srv, "accepted", |s| s.loops.live == CONNS as u64);
    for round in 0..5u8 {
        // Everyone writes before anyone reads: more messages wait at once
        // than the ring has buffers when CONNS > ring.
        let msgs: Vec<Vec<u8>> = (0..CONNS)
            .map(|i| {
                (0..3000)
                    .map(|j| (i as u32 * 31 + j as u32 * 7 + round as u32) as u8)
                    .collect()
            })
            .collect();
        for (s, m) in conns.iter_mut().zip(&msgs) {
            s.write_all(m).unwrap();
        }
        for (s, m) in conns.iter_mut().zip(&msgs) {
            let mut back = vec![0u8; m.len()];
            s.read_exact(&mut back).unwrap();
            assert_eq!(&back, m, "round {round}");
        }
    }
    let st = wait_for(&srv, "buffers back", |s| s.loops.bufs_in_use == 0);
    assert_eq!(st.loops.bufs as usize, ring);
    assert_eq!(st.loops.bytes, CONNS as u64 * 5 * 3000);
    eprintln!(
        "single-shot {single_shot}: ring {ring} buffers, {} ENOBUFS",
        st.loops.enobufs
    );
    assert!(st.loops.enobufs > 0, "the ring was never exhausted");
    conns.clear();
    wait_for(&srv, "closes seen", |s| s.loops.closed == CONNS as u64);
    srv.stop().unwrap();
}
