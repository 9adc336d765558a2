//! Our emulator against our controller over loopback: both modes, 1 and 16
//! switches, every app/variant, OpenFlow 1.0 and 1.3. Checks behaviour
//! (counts, matching, RESULT line shape), never speed.

use commbench_openflow::controller::{App, Controller, ControllerConfig};
use commbench_openflow::emulator::{self, CbenchConfig, CbenchReport, Line};

fn controller(app: App, naive: bool, of13: bool) -> Controller {
    Controller::start(&ControllerConfig {
        app,
        naive,
        of13,
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        log_connections: false,
        ..Default::default()
    })
    .expect("controller starts")
}

fn cbench(port: u16, switches: usize, throughput: bool, of13: bool) -> (CbenchReport, Vec<String>) {
    let cfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port,
        switches,
        loops: 3,
        ms_per_test: 300,
        throughput,
        of13,
        mac_addresses: 1000,
        ..Default::default()
    };
    let mut lines = Vec::new();
    let r = emulator::run_with(&cfg, &mut |l| match l {
        Line::Window { switches, window } => {
            lines.push(emulator::format_window_line(switches, window, false))
        }
        Line::Result { switches, result } => {
            lines.push(emulator::format_result_line(switches, result))
        }
        Line::Notice(n) => eprintln!("{n}"),
    })
    .expect("cbench run");
    (r, lines)
}

fn parse_result(line: &str) -> (usize, usize, [f64; 4]) {
    // The way cbench-parsing scripts read it.
    let w: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(w[0], "RESULT:");
    assert_eq!(w[2], "switches");
    assert_eq!(w[4], "tests");
    assert_eq!(w[5], "min/max/avg/stdev");
    assert_eq!(w[8], "responses/s");
    let v: Vec<f64> = w[7].split('/').map(|x| x.parse().unwrap()).collect();
    (
        w[1].parse().unwrap(),
        w[3].parse().unwrap(),
        [v[0], v[1], v[2], v[3]],
    )
}

fn check(r: &CbenchReport, lines: &[String], switches: usize, throughput: bool) {
    let round = &r.rounds[0];
    for l in lines {
        eprintln!("{l}");
    }
    eprintln!("{:?}", round.tally);
    assert_eq!(lines.len(), 4, "3 windows + RESULT: {lines:?}");
    let (n, tests, v) = parse_result(&lines[3]);
    assert_eq!((n, tests), (switches, 2));
    // A single 150 ms window can see no response when the shared 2-core
    // machine deschedules the controller (seen at load 13): require that
    // responses flowed, not that every window had some.
    assert!(
        v[1] > 0.0 && v[0] >= 0.0 && v[1] >= v[0] && v[2] >= v[0] && v[3] >= 0.0,
        "{}",
        lines[3]
    );
    for l in &lines[..3] {
        assert!(l.contains(" switches: flows/sec:  "), "{l}");
        assert!(l.ends_with(" per ms "), "{l:?}");
        assert_eq!(l.as_bytes()[2], b':');
        assert_eq!(l.as_bytes()[8], b'.');
    }
    let t = &round.tally;
    assert!(t.probes_sent > 0);
    assert!(t.flow_mod_add > 0);
    assert!(t.matched > 0, "responses matched to probes: {t:?}");
    assert_eq!(t.duplicate, 0, "one flow_mod per probe: {t:?}");
    assert!(round.closed.is_empty(), "{:?}", round.closed);
    assert_eq!(round.per_switch_total.len(), switches);
    if !throughput {
        // Closed loop: every switch makes progress. (Open loop in a debug
        // build may serve some switches' backlogs only in later windows.)
        assert!(
            round.per_switch_total.iter().all(|&c| c > 0),
            "every switch answered: {:?}",
            round.per_switch_total
        );
    }
    assert!(round.emulator_cpu_s > 0.0);
}

#[test]
fn template_latency_and_throughput_1_and_16_switches() {
    let c = controller(App::Cbench, false, false);
    let port = c.local_addr().port();
    for switches in [1, 16] {
        for throughput in [false, true] {
            let (r, lines) = cbench(port, switches, throughput, false);
            check(&r, &lines, switches, throughput);
            if !throughput {
                let rt = r.rounds[0]
                    .round_trip_ns
                    .as_ref()
                    .expect("latency mode records round trips");
                assert!(rt.n > 0 && rt.p50 > 0.0);
            }
        }
    }
    let s = c.stop();
    assert!(s.packet_in > 0 && s.flow_mod_sent > 0);
    assert_eq!(s.protocol_errors, 0);
    // Every switch's HELLO was read and ours written; the loop waited.
    assert!(
        s.reads >= s.connections && s.writes >= s.connections && s.waits > 0,
        "{s:?}"
    );
}

#[test]
fn naive_latency_and_throughput() {
    let c = controller(App::Cbench, true, false);
    let port = c.local_addr().port();
    for (switches, throughput) in [(1, false), (16, true)] {
        let (r, lines) = cbench(port, switches, throughput, false);
        check(&r, &lines, switches, throughput);
    }
    c.stop();
}

#[test]
fn of13_template_and_naive() {
    for naive in [false, true] {
        let c = controller(App::Cbench, naive, true);
        let port = c.local_addr().port();
        let (r, lines) = cbench(port, 4, true, true);
        check(&r, &lines, 4, true);
        c.stop();
    }
}

#[test]
fn learning_switch_answers_probes_with_flow_mods() {
    let c = controller(App::Learning, false, false);
    let port = c.local_addr().port();
    let (r, lines) = cbench(port, 2, false, false);
    check(&r, &lines, 2, false);
    // The learn-dst-mac ARP is flooded with a packet_out.
    assert!(r.rounds[0].tally.packet_out >= 2);
    c.stop();
}

#[test]
fn version_mismatch_closes_with_error() {
    // Controller speaks only 1.3; a 1.0 emulator cannot complete the handshake.
    let c = controller(App::Cbench, false, true);
    let port = c.local_addr().port();
    let cfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port,
        switches: 1,
        loops: 2,
        ms_per_test: 50,
        handshake_timeout_ms: 2000,
        ..Default::default()
    };
    let mut notices = Vec::new();
    let r = emulator::run_with(&cfg, &mut |l| {
        if let Line::Notice(n) = l {
            notices.push(n)
        }
    });
    assert!(r.is_err(), "no handshake possible");
    assert!(
        notices
            .iter()
            .any(|n| n.contains("HELLO_FAILED") || n.contains("incompatible")),
        "{notices:?}"
    );
    let s = c.stop();
    assert_eq!(s.protocol_errors, 1);
}

#[test]
fn garbage_and_torn_messages_drop_only_that_peer() {
    use std::io::{Read, Write};
    let c = controller(App::Cbench, false, false);
    let addr = c.local_addr();
    // Peer 1: a valid hello, then a header whose length is below 8.
    let mut g = std::net::TcpStream::connect(addr).unwrap();
    g.write_all(&[1, 0, 0, 8, 0, 0, 0, 1]).unwrap();
    g.write_all(&[1, 10, 0, 2, 0, 0, 0, 9]).unwrap();
    // The controller closes it: read until EOF (bounded by a timeout).
    g.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 256];
    let mut got = 0;
    loop {
        match g.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => panic!("controller kept the garbage peer open: {e}"),
        }
    }
    assert!(got >= 16, "hello + features_request before the close");
    // Peer 2: half a packet_in, then close.
    let mut t = std::net::TcpStream::connect(addr).unwrap();
    t.write_all(&[1, 0, 0, 8, 0, 0, 0, 1]).unwrap();
    t.write_all(&[1, 10, 0, 82, 0, 0, 0, 2, 0, 0]).unwrap();
    drop(t);
    // A well-behaved switch population is still served.
    let (r, lines) = cbench(addr.port(), 2, false, false);
    check(&r, &lines, 2, false);
    let s = c.stop();
    assert_eq!(s.protocol_errors, 1, "{s:?}");
    assert!(s.disconnections >= 2);
}

/// A minimal OpenFlow 1.0 controller that answers packet_ins with a
/// flow_mod carrying the probe's buffer_id, and closes the connection of
/// the second switch after a few answers.
fn closing_controller() -> (u16, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let mut handles = Vec::new();
        for i in 0..2 {
            let (mut s, _) = l.accept().unwrap();
            handles.push(std::thread::spawn(move || {
                s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                    .unwrap();
                s.write_all(&[1, 0, 0, 8, 0, 0, 0, 1, 1, 5, 0, 8, 0, 0, 0, 2])
                    .unwrap();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let mut answered = 0;
                loop {
                    let n = match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    while buf.len() >= 8 {
                        let len = u16::from_be_bytes([buf[2], buf[3]]) as usize;
                        if buf.len() < len {
                            break;
                        }
                        let msg: Vec<u8> = buf.drain(..len).collect();
                        if msg[1] == 10 {
                            let mut fm = vec![0u8; 72];
                            fm[..8]
                                .copy_from_slice(&[1, 14, 0, 72, msg[4], msg[5], msg[6], msg[7]]);
                            fm[64..68].copy_from_slice(&msg[8..12]);
                            if s.write_all(&fm).is_err() {
                                return;
                            }
                            answered += 1;
                            if i == 1 && answered == 20 {
                                return; // drops the connection
                            }
                        }
                    }
                }
            }));
        }
        for h in handles {
            let _ = h.join();
        }
    });
    (port, h)
}

#[test]
fn closed_connection_is_reported_and_others_go_on() {
    let (port, h) = closing_controller();
    let cfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port,
        switches: 2,
        loops: 3,
        ms_per_test: 150,
        ..Default::default()
    };
    let mut notices = Vec::new();
    let mut result = None;
    let r = emulator::run_with(&cfg, &mut |l| match l {
        Line::Notice(n) => notices.push(n),
        Line::Result {
            switches,
            result: res,
        } => result = Some(emulator::format_result_line(switches, res)),
        _ => {}
    })
    .expect("the run completes despite the closed switch");
    let round = &r.rounds[0];
    assert_eq!(round.closed.len(), 1, "{:?}", round.closed);
    assert_eq!(round.closed[0].switch, 2);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("switch 2") && n.contains("closed")),
        "{notices:?}"
    );
    assert!(round.per_switch_total[0] > 0, "switch 1 kept going");
    assert!(result.unwrap().starts_with("RESULT: 2 switches 2 tests"));
    h.join().unwrap();
}

#[test]
fn backpressure_bounds_a_switch_that_never_reads() {
    use std::io::Write;
    let max = 65536;
    let c = Controller::start(&ControllerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        log_connections: false,
        max_pending_out: max,
        ..Default::default()
    })
    .unwrap();
    let mut s = std::net::TcpStream::connect(c.local_addr()).unwrap();
    s.set_write_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    s.write_all(&[1, 0, 0, 8, 0, 0, 0, 1]).unwrap();
    let frame = commbench_openflow::wire::frame::probe_frame(1, 0);
    let mut probe = vec![1, 10, 0, 82, 0, 0, 0, 1, 0, 0, 0, 1, 0, 64, 0, 1, 0, 0];
    probe.extend_from_slice(&frame);
    let batch: Vec<u8> = probe.iter().copied().cycle().take(82 * 1000).collect();
    // Open loop, never reading: 100 MB offered; the kernel buffers fill,
    // the controller pauses reading, and our writes time out.
    let mut sent = 0usize;
    for _ in 0..1220 {
        match s.write(&batch) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    assert!(
        sent < 100_000_000,
        "the controller must stop reading at some point"
    );
    let st = c.stop();
    assert!(st.backpressure_pauses >= 1, "{st:?}");
    // One read chunk (64 KiB of packet_ins since the controller's
    // READ_CHUNK grew; their flow_mods are a little smaller) may be
    // answered past the limit.
    assert!(st.max_pending_out as usize <= max + 65536, "{st:?}");
    drop(s);
}

#[test]
fn outstanding_and_threads() {
    let c = controller(App::Cbench, false, false);
    let cfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port: c.local_addr().port(),
        switches: 4,
        loops: 3,
        ms_per_test: 150,
        outstanding: 8,
        threads: 2,
        mac_addresses: 1000,
        ..Default::default()
    };
    let r = emulator::run_with(&cfg, &mut |_| {}).unwrap();
    let round = &r.rounds[0];
    assert!(round.tally.matched > 0);
    assert!(
        round.per_switch_total.iter().all(|&x| x > 0),
        "{:?}",
        round.per_switch_total
    );
    assert!(round.round_trip_ns.as_ref().unwrap().n > 0);
    assert_eq!(round.tally.duplicate, 0);
    c.stop();
}

#[test]
fn ranged_test_prints_one_result_per_switch_count() {
    let c = controller(App::Cbench, false, false);
    let cfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port: c.local_addr().port(),
        switches: 3,
        loops: 2,
        ms_per_test: 60,
        ranged: true,
        ..Default::default()
    };
    let mut results = Vec::new();
    emulator::run_with(&cfg, &mut |l| {
        if let Line::Result { switches, result } = l {
            results.push(emulator::format_result_line(switches, result));
        }
    })
    .unwrap();
    assert_eq!(results.len(), 3);
    for (i, r) in results.iter().enumerate() {
        assert!(
            r.starts_with(&format!("RESULT: {} switches 1 tests", i + 1)),
            "{r}"
        );
    }
    c.stop();
}

#[test]
fn threaded_controller_serves_every_switch() {
    let c = Controller::start(&ControllerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 3,
        log_connections: false,
        ..Default::default()
    })
    .unwrap();
    let (r, lines) = cbench(c.local_addr().port(), 16, false, false);
    check(&r, &lines, 16, false);
    let s = c.stop();
    assert_eq!(s.connections, 16);
    assert!(s.packet_in > 0);
}

#[test]
fn busy_poll_needs_a_cpu_per_worker_and_still_answers() {
    let base = ControllerConfig {
        app: App::Trivial,
        listen: "127.0.0.1:0".parse().unwrap(),
        log_connections: false,
        busy_poll: true,
        ..Default::default()
    };
    let err = Controller::start(&base)
        .err()
        .expect("refused without --cpus");
    assert!(err.to_string().contains("--cpus"), "{err}");
    let two_threads_one_cpu = ControllerConfig {
        threads: 2,
        cpus: Some("0".into()),
        ..base.clone()
    };
    assert!(Controller::start(&two_threads_one_cpu).is_err());
    // With a CPU of its own it runs and answers like the sleeping responder.
    let c = Controller::start(&ControllerConfig {
        cpus: Some("0".into()),
        ..base
    })
    .expect("busy-poll controller starts");
    let (r, _) = cbench(c.local_addr().port(), 1, true, false);
    c.stop();
    assert!(r.rounds[0].tally.matched > 0);
    assert_eq!(r.rounds[0].tally.duplicate, 0);
}

/// Throughput mode: a controller answering each packet_in with the right
/// flow_mod, the same flow_mod again and one naming no probe of ours has
/// every response counted, the repeats shown as duplicates and the stranger
/// as unmatched — the emulator's fast flow_mod run keeps exact accounting.
#[test]
fn throughput_counts_duplicate_and_unmatched_flow_mods() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        s.write_all(&[1, 0, 0, 8, 0, 0, 0, 1, 1, 5, 0, 8, 0, 0, 0, 2])
            .unwrap();
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        let mut replies = Vec::new();
        loop {
            let n = match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            let mut off = 0;
            replies.clear();
            while buf.len() - off >= 8 {
                let len = u16::from_be_bytes([buf[off + 2], buf[off + 3]]) as usize;
                if buf.len() - off < len {
                    break;
                }
                let msg = &buf[off..off + len];
                off += len;
                // Probes only (82 bytes); the learn-dst-mac ARP is left alone.
                if msg[1] == 10 && len == 82 {
                    let mut fm = vec![0u8; 80];
                    fm[..8].copy_from_slice(&[1, 14, 0, 80, msg[4], msg[5], msg[6], msg[7]]);
                    fm[64..68].copy_from_slice(&msg[8..12]);
                    replies.extend_from_slice(&fm);
                    replies.extend_from_slice(&fm);
                    fm[64..68].copy_from_slice(&999_999u32.to_be_bytes());
                    replies.extend_from_slice(&fm);
                }
            }
            buf.drain(..off);
            if s.write_all(&replies).is_err() {
                return;
            }
        }
    });
    let cfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port,
        switches: 1,
        loops: 2,
        ms_per_test: 200,
        throughput: true,
        max_in_flight: 2000,
        ..Default::default()
    };
    let r = emulator::run_with(&cfg, &mut |_| {}).unwrap();
    let t = &r.rounds[0].tally;
    assert!(t.matched > 100, "{t:?}");
    assert_eq!(t.flow_mod_add, t.responses, "{t:?}");
    assert_eq!(t.matched + t.duplicate + t.unmatched, t.responses, "{t:?}");
    // Every matched probe was answered three times in one write; the drain
    // between windows (and the stop) can split a triple, hence a little slack.
    assert!(t.duplicate.abs_diff(t.matched) <= 4, "{t:?}");
    assert!(t.unmatched.abs_diff(t.matched) <= 4, "{t:?}");
    drop(r);
    h.join().unwrap();
}

/// A controller that floods echo requests and never reads the replies
/// loses its connection once 16 MiB of replies are queued: the emulator's
/// memory stays bounded and the run goes on.
#[test]
fn a_controller_that_never_reads_replies_is_cut_off() {
    use std::io::Write;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_write_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let _ = s.write_all(&[1, 0, 0, 8, 0, 0, 0, 1, 1, 5, 0, 8, 0, 0, 0, 2]);
        let echo: Vec<u8> = [1u8, 2, 0, 8, 0, 0, 0, 9]
            .iter()
            .copied()
            .cycle()
            .take(8 << 16)
            .collect();
        // 64 MiB of echo requests at most, or until the emulator hangs up.
        for _ in 0..128 {
            if s.write_all(&echo).is_err() {
                return true;
            }
        }
        false
    });
    let cfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port,
        switches: 1,
        // Enough windows for 16 MiB to be read on a loaded machine: the
        // cut-off is looked for in every window, not within a time.
        loops: 8,
        ms_per_test: 1000,
        ..Default::default()
    };
    let mut notices = Vec::new();
    let r = emulator::run_with(&cfg, &mut |l| {
        if let Line::Notice(n) = l {
            notices.push(n)
        }
    })
    .unwrap();
    let hung_up = h.join().unwrap();
    assert!(hung_up, "the emulator kept reading requests: {notices:?}");
    let closed: Vec<_> = r.rounds.iter().flat_map(|round| &round.closed).collect();
    assert_eq!(closed.len(), 1, "{notices:?}");
    assert!(
        closed[0].reason.contains("does not read the replies"),
        "{closed:?}"
    );
}

/// A controller flooding echo requests on every connection and reading no
/// reply: the switches' unsent replies together stay under the run's bound
/// (not only each under its own), the switch that would pass it is closed
/// with the reason, and the run goes on.
#[test]
fn a_controller_flooding_every_switch_is_bounded_in_total() {
    use commbench_openflow::emulator::MAX_TOTAL_REPLY_BACKLOG;
    use std::io::Write;
    let switches = 8;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let floods: Vec<_> = (0..switches)
            .map(|_| {
                let (mut s, _) = l.accept().unwrap();
                std::thread::spawn(move || {
                    s.set_write_timeout(Some(std::time::Duration::from_secs(20)))
                        .unwrap();
                    let _ = s.write_all(&[1, 0, 0, 8, 0, 0, 0, 1, 1, 5, 0, 8, 0, 0, 0, 2]);
                    let echo: Vec<u8> = [1u8, 2, 0, 8, 0, 0, 0, 9]
                        .iter()
                        .copied()
                        .cycle()
                        .take(8 << 16)
                        .collect();
                    // 32 MiB of echo requests at most (twice the per-switch
                    // cut-off), or until the emulator hangs up.
                    for _ in 0..64 {
                        if s.write_all(&echo).is_err() {
                            return true;
                        }
                    }
                    false
                })
            })
            .collect();
        floods
            .into_iter()
            .map(|f| f.join().unwrap())
            .collect::<Vec<bool>>()
    });
    // The closure must come whenever the emulator has read enough, not
    // within a given time: on a loaded machine reading 64 MiB of echo
    // requests took longer than one 500 ms window, so every window is
    // looked at (a bounded count of windows, not a time threshold).
    let cfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port,
        switches,
        loops: 8,
        ms_per_test: 1000,
        ..Default::default()
    };
    let mut notices = Vec::new();
    let r = emulator::run_with(&cfg, &mut |l| {
        if let Line::Notice(n) = l {
            notices.push(n)
        }
    })
    .unwrap();
    let hung_up = h.join().unwrap();
    for round in &r.rounds {
        assert!(
            round.reply_backlog_peak as usize <= MAX_TOTAL_REPLY_BACKLOG + 65536,
            "peak {} {notices:?}",
            round.reply_backlog_peak
        );
    }
    let closed: Vec<_> = r.rounds.iter().flat_map(|round| &round.closed).collect();
    assert!(
        closed
            .iter()
            .any(|c| c.reason.contains("on all switches together")),
        "{closed:?}"
    );
    assert!(hung_up.iter().any(|&h| h), "{hung_up:?} {notices:?}");
}

#[test]
fn tcp_congestion_is_applied_on_both_sides_and_bad_names_are_refused() {
    let c = Controller::start(&ControllerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        log_connections: false,
        tcp_congestion: "reno".into(),
        ..Default::default()
    })
    .expect("controller starts");
    assert_eq!(c.tcp_congestion().applied, "reno");
    let cfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port: c.local_addr().port(),
        switches: 2,
        loops: 2,
        ms_per_test: 200,
        throughput: true,
        tcp_congestion: "reno".into(),
        ..Default::default()
    };
    let r = emulator::run_with(&cfg, &mut |_| {}).expect("cbench run");
    assert_eq!(r.tcp_congestion.applied, "reno");
    assert!(r.rounds[0].tally.responses > 0);
    let recs = commbench_openflow::bench::cbench_records(&r);
    assert_eq!(recs[0].params["tcp_congestion"], "reno");
    c.stop();
    // The default never leaves a pacing algorithm in force.
    let d = CbenchConfig::default();
    assert_eq!(d.tcp_congestion, "auto");
    // Unknown and malformed names: a clear error before any connection.
    let e = Controller::start(&ControllerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        tcp_congestion: "nosuchcc".into(),
        ..Default::default()
    })
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("nosuchcc") && e.contains("available"), "{e}");
    let e = emulator::run_with(
        &CbenchConfig {
            tcp_congestion: "no such".into(),
            ..cfg
        },
        &mut |_| {},
    )
    .expect_err("refused")
    .to_string();
    assert!(e.contains("--tcp-congestion"), "{e}");
}

#[test]
fn extra_work_delays_every_response_and_is_recorded() {
    // Latency mode: one packet_in in flight per switch, so every round trip
    // holds the controller's 200 µs busy-wait (a lower bound: load only
    // adds time).
    use commbench_openflow::bench::{self, BenchConfig, Variant};
    let cfg = BenchConfig {
        switches: vec![1],
        modes: vec![false],
        variants: vec![Variant::Template],
        loops: 2,
        ms_per_test: 200,
        extra_work_ns: 200_000,
        ..Default::default()
    };
    let mut rec = commbench_core::Recorder::new();
    let report = bench::run(&cfg, &mut rec).unwrap();
    let r = &report.rows[0];
    let rt = r
        .round_trip_ns
        .as_ref()
        .expect("latency mode measures round trips");
    assert!(rt.min >= 0.9 * 200_000.0, "{rt:?}");
    assert_eq!(rec.records()[0].params["extra_work_ns"], 200_000);
}
