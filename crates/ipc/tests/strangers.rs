//! A stranger on a tcp run's port — silent, sending garbage, or guessing
//! the greeting with a wrong token — is dropped after its own short
//! handshake timeout, and the run's own clients connect and exchange every
//! message. Timeouts here are safety bounds.

use commbench_ipc::session::{self, SessionSpec, Workload};
use commbench_ipc::stream::SocketTransport;
use commbench_ipc::transport::{self, ListenOptions, Transport, TransportKind};
use commbench_ipc::{Mode, WaitPolicy};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[test]
fn a_stranger_on_the_tcp_port_is_dropped_and_the_run_completes() {
    let sessions = 2;
    let mut t = SocketTransport::listen_tcp(&ListenOptions {
        sessions,
        ring_bytes: 1 << 16,
        wait: WaitPolicy::default(),
        threads: 4,
        cpus: 2,
        apart: false,
    })
    .unwrap();
    let addr = t.address();
    let token = t.client_token().expect("tcp has a token");
    // Strangers first: silent, garbage, and a well-formed greeting for
    // session 0 with a wrong token. Kept open for the whole run.
    let silent = TcpStream::connect(&addr).unwrap();
    let mut garbage = TcpStream::connect(&addr).unwrap();
    garbage
        .write_all(b"GET / HTTP/1.0\r\n\r\nxxxxxxxxxx")
        .unwrap();
    let mut guess = TcpStream::connect(&addr).unwrap();
    let mut g = [0u8; 20];
    g[4..].copy_from_slice(&[0x55; 16]);
    guess.write_all(&g).unwrap();
    let spec = |s: u32| SessionSpec {
        session: s,
        workload: Workload::Reqres(Mode::Sync),
        size: 64,
        count: 1000,
        verify: true,
        latency: false,
        corrupt_at: None,
        extra_work_ticks: 0,
    };
    let clients: Vec<_> = (0..sessions)
        .map(|s| {
            let (addr, token) = (addr.clone(), token.clone());
            std::thread::spawn(move || {
                let ep = transport::connect(TransportKind::Tcp, &addr, s, Some(&token)).unwrap();
                session::client(ep, &spec(s), &Arc::new(AtomicBool::new(false))).unwrap()
            })
        })
        .collect();
    let eps = t.accept_all().expect("the run's clients are accepted");
    let servers: Vec<_> = eps
        .into_iter()
        .enumerate()
        .map(|(s, ep)| {
            let sp = spec(s as u32);
            std::thread::spawn(move || session::serve(ep, &sp, &AtomicBool::new(false)).unwrap())
        })
        .collect();
    for s in servers {
        assert_eq!(s.join().unwrap(), 1000);
    }
    for c in clients {
        assert_eq!(c.join().unwrap().received, 1000);
    }
    // The garbage and the wrong token were dropped (the silent one may
    // still have been waiting for its timeout when the run's clients
    // were all in: it is closed with the listener).
    assert!(t.strangers() >= 2, "{}", t.strangers());
    drop((silent, garbage, guess));
}

#[test]
fn a_tcp_client_without_the_token_is_a_usage_error() {
    let e = transport::connect(TransportKind::Tcp, "127.0.0.1:9", 0, None)
        .err()
        .expect("refused");
    assert!(e.is_usage(), "{e}");
}
