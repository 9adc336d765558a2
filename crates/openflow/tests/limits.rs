//! The controller's input limits against hostile peers: a started message
//! not finished in time and a silent connection are closed (only that
//! peer), input held for started messages is given back when peers leave,
//! and the global bound on held input holds under many peers without
//! losing a byte. Timeouts in these tests are safety bounds, not speed
//! assertions.

use commbench_openflow::controller::{Controller, ControllerConfig, MIN_BUFFERED_IN};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const SAFETY: Duration = Duration::from_secs(60);

fn start(cfg: ControllerConfig) -> Controller {
    Controller::start(&ControllerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        log_connections: false,
        ..cfg
    })
    .expect("controller starts")
}

/// Connect and say HELLO; the controller's HELLO + FEATURES_REQUEST are
/// left unread unless `read_greeting`.
fn peer(c: &Controller, read_greeting: bool) -> TcpStream {
    let mut s = TcpStream::connect(c.local_addr()).unwrap();
    s.set_read_timeout(Some(SAFETY)).unwrap();
    s.set_write_timeout(Some(SAFETY)).unwrap();
    s.write_all(&[1, 0, 0, 8, 0, 0, 0, 1]).unwrap();
    if read_greeting {
        let mut g = [0u8; 16];
        s.read_exact(&mut g).unwrap();
    }
    s
}

/// Reads until the controller closes the connection.
fn until_closed(s: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("the controller did not close the connection: {e}"),
        }
    }
}

/// An echo round trip on a connection past its handshake.
fn echo(s: &mut TcpStream, xid: u8) {
    s.write_all(&[1, 2, 0, 8, 0, 0, 0, xid]).unwrap();
    let mut r = [0u8; 8];
    s.read_exact(&mut r).unwrap();
    assert_eq!(r, [1, 3, 0, 8, 0, 0, 0, xid]);
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < SAFETY, "{what}: not within {SAFETY:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// First `n` bytes of a 65,535-byte ECHO_REQUEST whose payload is a
/// pattern of `seed`; the rest is `echo_body(seed)[n..]`.
fn big_echo(seed: u8) -> Vec<u8> {
    let mut m = vec![1, 2, 0xff, 0xff, 0, 0, 0, seed];
    m.extend((8..65535usize).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    m
}

fn vm_rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_message_not_finished_in_time_closes_only_that_peer() {
    let c = start(ControllerConfig {
        partial_timeout: Duration::from_secs(1),
        idle_timeout: None,
        ..Default::default()
    });
    let mut good = peer(&c, true);
    let mut slow = peer(&c, true);
    // Half a packet_in, never finished.
    slow.write_all(&[1, 10, 0, 82, 0, 0, 0, 2, 0, 0]).unwrap();
    // The good switch keeps talking while the slow one is cut off.
    let t = std::thread::spawn(move || {
        until_closed(&mut slow);
    });
    let mut xid = 0u8;
    while !t.is_finished() {
        xid = xid.wrapping_add(1);
        echo(&mut good, xid);
        std::thread::sleep(Duration::from_millis(50));
    }
    t.join().unwrap();
    echo(&mut good, 200);
    let st = c.stop();
    assert_eq!(st.partial_timeouts, 1, "{st:?}");
    assert_eq!(st.idle_timeouts, 0, "{st:?}");
}

#[test]
fn a_silent_peer_is_closed_at_the_idle_timeout_and_a_talking_one_is_not() {
    let c = start(ControllerConfig {
        idle_timeout: Some(Duration::from_secs(1)),
        ..Default::default()
    });
    let mut talking = peer(&c, true);
    let mut silent = peer(&c, true);
    let t = std::thread::spawn(move || until_closed(&mut silent));
    let mut xid = 0u8;
    while !t.is_finished() {
        xid = xid.wrapping_add(1);
        echo(&mut talking, xid);
        std::thread::sleep(Duration::from_millis(50));
    }
    t.join().unwrap();
    echo(&mut talking, 200);
    let st = c.stop();
    assert_eq!(st.idle_timeouts, 1, "{st:?}");
    assert_eq!(st.partial_timeouts, 0, "{st:?}");
}

#[test]
fn buffered_input_returns_to_zero_after_1000_peers_holding_partial_messages_leave() {
    let c = start(ControllerConfig::default());
    let rss0 = vm_rss_kib();
    let msg = big_echo(7);
    let part = 60_000;
    let peers: Vec<TcpStream> = (0..1000)
        .map(|_| {
            let mut s = peer(&c, false);
            s.write_all(&msg[..part]).unwrap();
            s
        })
        .collect();
    wait_for("the controller holds every started message", || {
        c.buffered_in() >= 1000 * part
    });
    let held = c.buffered_in();
    let rss_held = vm_rss_kib();
    // Held is what the messages need, not a fixed buffer per connection.
    assert!(held <= 1000 * (part + 8), "{held}");
    drop(peers);
    wait_for("the controller gives the buffers back", || {
        c.buffered_in() == 0
    });
    // One sweep trims the heap after buffers are freed.
    std::thread::sleep(Duration::from_millis(600));
    let rss_after = vm_rss_kib();
    eprintln!(
        "VmRSS of the test process: {rss0} KiB before, {rss_held} KiB while 1000 peers hold {held} bytes, {rss_after} KiB after they left"
    );
    let st = c.stop();
    assert_eq!(st.disconnections, 1000, "{st:?}");
    assert!(st.max_buffered_in as usize >= 1000 * part, "{st:?}");
}

#[test]
fn the_global_input_bound_holds_under_many_peers_and_loses_nothing() {
    let bound = MIN_BUFFERED_IN;
    let c = start(ControllerConfig {
        max_buffered_in: bound,
        ..Default::default()
    });
    let part = 60_000;
    let n = 100u8;
    // 100 peers × 60,000 bytes of started messages: 6 MB offered against 1 MiB.
    let mut peers: Vec<(u8, TcpStream, Vec<u8>)> = (0..n)
        .map(|i| {
            let mut s = peer(&c, false);
            let m = big_echo(i);
            s.write_all(&m[..part]).unwrap();
            (i, s, m)
        })
        .collect();
    wait_for("the bound is reached", || c.buffered_in() + 65536 > bound);
    // Each finishes its message; every echo comes back whole.
    for (_, s, m) in &mut peers {
        s.write_all(&m[part..]).unwrap();
    }
    for (i, s, m) in &mut peers {
        let mut greeting = [0u8; 16];
        s.read_exact(&mut greeting).unwrap();
        let mut reply = vec![0u8; m.len()];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(reply[1], 3, "peer {i}: ECHO_REPLY");
        assert_eq!(reply[8..], m[8..], "peer {i}: payload intact");
    }
    let st = c.stop();
    assert!(st.max_buffered_in as usize <= bound, "{st:?}");
    assert!(st.buffered_in_waits > 0, "{st:?}");
    assert_eq!(st.echo_request, n as u64, "{st:?}");
    assert_eq!(st.protocol_errors, 0, "{st:?}");
}

#[test]
fn peers_that_leave_while_held_at_the_bound_free_their_buffers_at_once() {
    let bound = MIN_BUFFERED_IN;
    let c = start(ControllerConfig {
        max_buffered_in: bound,
        // Far beyond the safety bound: only noticing the close frees them.
        partial_timeout: Duration::from_secs(3600),
        idle_timeout: None,
        ..Default::default()
    });
    let part = 60_000;
    let peers: Vec<TcpStream> = (0..100u8)
        .map(|i| {
            let mut s = peer(&c, false);
            s.write_all(&big_echo(i)[..part]).unwrap();
            s
        })
        .collect();
    wait_for("the bound is reached", || c.buffered_in() + 65536 > bound);
    drop(peers);
    wait_for("every buffer is given back", || c.buffered_in() == 0);
    let st = c.stop();
    assert_eq!(st.disconnections, 100, "{st:?}");
    assert_eq!(st.partial_timeouts, 0, "{st:?}");
}
