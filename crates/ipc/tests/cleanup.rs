//! The shm segment and temp dirs are removed after a normal run and after a
//! failed one (own test binary, so no other test's live files interfere).

use commbench_ipc::{run_report, IpcConfig, Mode, TransportKind, Workload};

fn leftovers() -> Vec<String> {
    let me = format!("commbench-ipc-{}-", std::process::id());
    let mut v = Vec::new();
    for dir in ["/dev/shm".into(), std::env::temp_dir()] {
        if let Ok(rd) = std::fs::read_dir(dir) {
            v.extend(
                rd.flatten()
                    .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                    .filter(|n| n.starts_with(&me)),
            );
        }
    }
    v
}

#[test]
fn files_are_removed_after_success_and_failure() {
    for t in TransportKind::ALL {
        let ok = IpcConfig {
            transport: t,
            count: 10,
            ..IpcConfig::default()
        };
        run_report(&ok).unwrap();
        assert_eq!(leftovers(), Vec::<String>::new(), "{t} after success");
        let bad = IpcConfig {
            transport: t,
            workload: Workload::Reqres(Mode::Sync),
            count: 10,
            verify: true,
            corrupt: Some((0, 3)),
            ..IpcConfig::default()
        };
        assert!(run_report(&bad).is_err());
        assert_eq!(leftovers(), Vec::<String>::new(), "{t} after failure");
    }
}
