//! Every transport round-trips and streams the sizes the issue lists, in
//! `mt` mode through the library (the `mp` paths are tested through the
//! binary in crates/cli). Small counts, no time thresholds.

use commbench_ipc::{run_report, IpcConfig, IpcError, Mode, TransportKind, WaitPolicy, Workload};

const SIZES: [usize; 8] = [0, 1, 4095, 4096, 65532, 65536, 1 << 20, 16 << 20];

fn count_for(size: usize) -> u64 {
    if size >= 1 << 20 {
        3
    } else {
        40
    }
}

fn round_trip_all_sizes(t: TransportKind) {
    for &size in &SIZES {
        for workload in [Workload::Reqres(Mode::Sync), Workload::Stream] {
            let cfg = IpcConfig {
                transport: t,
                workload,
                size,
                count: count_for(size),
                verify: true,
                ..IpcConfig::default()
            };
            let r = run_report(&cfg).unwrap_or_else(|e| panic!("{t} {size} {workload:?}: {e}"));
            assert_eq!(r.messages, cfg.messages());
        }
    }
}

#[test]
fn shm_round_trips_every_size() {
    round_trip_all_sizes(TransportKind::Shm);
}

#[test]
fn uds_round_trips_every_size() {
    round_trip_all_sizes(TransportKind::Uds);
}

#[test]
fn pipe_round_trips_every_size() {
    round_trip_all_sizes(TransportKind::Pipe);
}

#[test]
fn tcp_round_trips_every_size() {
    round_trip_all_sizes(TransportKind::Tcp);
}

#[test]
fn every_mode_and_wait_policy_with_several_sessions() {
    for wait in [WaitPolicy::Spin, WaitPolicy::Block, WaitPolicy::Adaptive] {
        for mode in [Mode::Sync, Mode::Async, Mode::Nores] {
            let cfg = IpcConfig {
                workload: Workload::Reqres(mode),
                wait,
                sessions: 3,
                size: 300,
                count: 2_000,
                // A small ring makes async/nores hit backpressure.
                ring_bytes: Some(4096),
                verify: true,
                ..IpcConfig::default()
            };
            let r = run_report(&cfg).unwrap_or_else(|e| panic!("{wait} {mode:?}: {e}"));
            assert_eq!(r.messages, cfg.messages());
            if mode == Mode::Sync {
                assert_eq!(r.latency.as_ref().unwrap().n, 3 * 2_000);
            }
        }
    }
}

#[test]
fn injected_corruption_is_caught_on_every_transport() {
    // 40,000 bytes: a stream's shm client reads it where it lies in the
    // ring (on CPUs with 64-byte loads), 1000 bytes it copies out.
    for t in TransportKind::ALL {
        for workload in [Workload::Reqres(Mode::Sync), Workload::Stream] {
            for size in [1000, 40_000] {
                let cfg = IpcConfig {
                    transport: t,
                    workload,
                    sessions: 2,
                    size,
                    count: 50,
                    verify: true,
                    corrupt: Some((1, 17)),
                    ..IpcConfig::default()
                };
                match run_report(&cfg) {
                    Err(IpcError::Verify { session, seq, what }) => {
                        assert_eq!((session, seq), (1, 17), "{t}: {what}");
                        assert!(what.contains("checksum"), "{what}");
                    }
                    other => panic!(
                        "{t} {workload:?} {size}: expected a verification error, got {other:?}"
                    ),
                }
            }
        }
    }
}

#[test]
fn message_larger_than_16_mib_is_refused() {
    let cfg = IpcConfig {
        size: (16 << 20) + 1,
        count: 1,
        ..IpcConfig::default()
    };
    assert!(run_report(&cfg).unwrap_err().is_usage());
}

#[test]
fn extra_work_makes_the_server_wait_on_every_request_and_is_recorded() {
    // 50 requests with 200 µs of server busy-wait each take at least 10 ms
    // whatever the load (a lower bound: a loaded machine only adds time).
    let cfg = IpcConfig {
        transport: TransportKind::Pipe,
        count: 50,
        extra_work_ns: 200_000,
        ..IpcConfig::default()
    };
    let r = run_report(&cfg).unwrap();
    assert!(
        r.elapsed_ns as f64 >= 0.9 * 50.0 * 200_000.0,
        "{} ns for 50 requests with 200 µs each",
        r.elapsed_ns
    );
    let rec = r.record(&[]);
    assert_eq!(rec.params["extra_work_ns"], 200_000);
    // Without it the parameter is absent, so existing series keep their key.
    let plain = IpcConfig {
        extra_work_ns: 0,
        ..cfg
    };
    let r = run_report(&plain).unwrap();
    assert!(!r.record(&[]).params.contains_key("extra_work_ns"));
}

#[test]
fn a_placement_the_run_chose_is_not_part_of_the_tests_identity() {
    // shm in block mode co-locates each session's two ends by itself
    // (`pair:LIST`): that depends on the machine, so it is recorded with
    // the metrics and the parameters read "-" — one series across runs.
    let cfg = IpcConfig {
        transport: TransportKind::Shm,
        wait: WaitPolicy::Block,
        count: 200,
        ..IpcConfig::default()
    };
    let r = run_report(&cfg).unwrap();
    assert!(r.server_cpus.starts_with("pair:"), "{}", r.server_cpus);
    let rec = r.record(&[]);
    assert_eq!(rec.params["server_cpus"], "-");
    assert_eq!(rec.params["client_cpus"], "-");
    assert_eq!(
        rec.metrics["server_cpus_applied"].as_str(),
        Some(r.server_cpus.as_str())
    );
    // A placement asked for is identity.
    let pinned = IpcConfig {
        server_cpus: Some(commbench_core::placement::CpuList::from_cpus(vec![0])),
        client_cpus: Some(commbench_core::placement::CpuList::from_cpus(vec![0])),
        ..cfg
    };
    let rec = run_report(&pinned).unwrap().record(&[]);
    assert_eq!(rec.params["server_cpus"], "0");
    assert!(!rec.metrics.contains_key("server_cpus_applied"));
}
