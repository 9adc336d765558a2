//! Output-format and statistics tests for the emulator, checked against
//! the seed's own cbench output.

use super::*;

/// The seed's "after" run (cbench-trema-speedup): per-test totals per ms.
const SEED_PER_MS: [(u64, f64); 10] = [
    (17191, 1.713990),
    (16504, 1.650322),
    (17801, 1.780057),
    (16038, 1.603731),
    (17646, 1.759663),
    (15800, 1.579945),
    (17482, 1.748115),
    (15419, 1.541888),
    (15906, 1.590537),
    (15312, 1.531166),
];

fn seed_windows() -> Vec<Window> {
    SEED_PER_MS
        .iter()
        .enumerate()
        .map(|(j, &(c, x))| Window {
            time: "12:34:56.789".into(),
            counts: vec![c],
            elapsed_ms: c as f64 / x,
            per_ms: x,
            kept: j >= 1,
            emulator_cpu_s: 0.0,
            emulator_busy: 0.0,
            stall: Default::default(),
        })
        .collect()
}

#[test]
fn result_line_reproduces_the_seed() {
    let r = result_stats(&seed_windows());
    assert_eq!(
        format_result_line(1, &r),
        "RESULT: 1 switches 9 tests min/max/avg/stdev = 1531.17/1780.06/1642.82/90.98 responses/s"
    );
}

#[test]
fn legacy_line_matches_the_seed() {
    let w = &seed_windows()[0];
    assert_eq!(
        format_window_line(1, w, true),
        "1   switches: fmods/sec:  17191   total = 1.713990 per ms "
    );
}

#[test]
fn window_lines_exact() {
    let w = Window {
        time: "09:05:03.042".into(),
        counts: vec![123, 4567, 0, 89],
        elapsed_ms: 1000.5,
        per_ms: 4779.0 / 1000.5,
        kept: true,
        emulator_cpu_s: 0.0,
        emulator_busy: 0.0,
        stall: Default::default(),
    };
    insta::assert_snapshot!(format_window_line(4, &w, false), @"09:05:03.042 4   switches: flows/sec:  123  4567  0  89   total = 4.776612 per ms ");
    let w16 = Window {
        time: "23:59:59.999".into(),
        counts: vec![1; 16],
        elapsed_ms: 1000.0,
        per_ms: 0.016,
        kept: false,
        emulator_cpu_s: 0.0,
        emulator_busy: 0.0,
        stall: Default::default(),
    };
    insta::assert_snapshot!(format_window_line(16, &w16, false), @"23:59:59.999 16  switches: flows/sec:  1  1  1  1  1  1  1  1  1  1  1  1  1  1  1  1   total = 0.016000 per ms ");
    insta::assert_snapshot!(format_window_line(16, &w16, true), @"16  switches: fmods/sec:  1  1  1  1  1  1  1  1  1  1  1  1  1  1  1  1   total = 0.016000 per ms ");
}

#[test]
fn result_uses_population_stdev_and_kept_windows_only() {
    let mk = |x: f64, kept: bool| Window {
        time: String::new(),
        counts: vec![],
        elapsed_ms: 1.0,
        per_ms: x,
        kept,
        emulator_cpu_s: 0.0,
        emulator_busy: 0.0,
        stall: Default::default(),
    };
    let r = result_stats(&[mk(100.0, false), mk(1.0, true), mk(3.0, true)]);
    assert_eq!(r.tests, 2);
    assert_eq!(
        (r.min, r.max, r.avg, r.stdev),
        (1000.0, 3000.0, 2000.0, 1000.0)
    );
    assert_eq!(result_stats(&[mk(1.0, false)]).tests, 0);
}

#[test]
fn jain_index() {
    assert_eq!(jain(&[5, 5, 5]), 1.0);
    assert!((jain(&[10, 0]) - 0.5).abs() < 1e-12);
    assert!(jain(&[0, 0]).is_nan());
}

#[test]
fn a_window_in_which_the_machine_stalled_is_named_after_result() {
    use commbench_core::stall::StallWindow;
    let mk = |worst_ms: f64| Window {
        time: "10:00:00.000".into(),
        counts: vec![1],
        elapsed_ms: 1000.0,
        per_ms: 0.001,
        kept: true,
        emulator_cpu_s: 0.0,
        emulator_busy: 0.0,
        stall: StallWindow {
            worst_ms,
            mean_late_us: 80.0,
            stalls: u64::from(worst_ms >= 50.0),
            steal_ms: Some(0.0),
        },
    };
    let ws = vec![mk(0.2), mk(0.3), mk(9800.0), mk(1.0)];
    let lines = stall_lines(&ws, std::time::Duration::from_millis(50));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("stall: window 3"), "{}", lines[0]);
    assert!(lines[0].contains("stalled for 9800.0 ms"), "{}", lines[0]);
}
