//! The seed's experiment in one command (`commbench mux --reproduce-seed`):
//! N = 10,000 connections, R = 100, 500 and 1,000 rounds of K = 1,024 bytes,
//! servers on poll, epoll level- and edge-triggered, each with the seed's
//! scan lookup and with direct indexing; then the same N with 1% of the
//! connections active, and the scan at a tenth of N (is its cost linear in
//! N?). Answers in words: does the scanning epoll server lose to poll as R
//! grows, does indexing fix it, what the scan costs, and what the active
//! fraction does.

use commbench_core::{Record, Recorder};

use crate::engine::{EngineKind, Lookup};
use crate::harness::{self, ConfigResult};
use crate::{MuxConfig, Result};

/// The grid.
#[derive(Debug, Clone)]
pub struct SeedPlan {
    pub conns: usize,
    pub rounds: Vec<u64>,
    pub size: usize,
    /// Connections active in the 1%-active step.
    pub active: usize,
    /// Connections of the scan-vs-N step (a tenth of conns).
    pub small_conns: usize,
}

impl SeedPlan {
    /// The article's grid; `quick` divides the rounds by 10.
    pub fn new(quick: bool) -> Self {
        let rounds = if quick {
            vec![10, 50, 100]
        } else {
            vec![100, 500, 1000]
        };
        SeedPlan {
            conns: 10_000,
            rounds,
            size: 1024,
            active: 100,
            small_conns: 1000,
        }
    }
}

/// One grid point's results.
#[derive(Debug, Clone)]
pub struct SeedPoint {
    pub rounds: u64,
    pub conns: usize,
    pub active: usize,
    pub results: Vec<ConfigResult>,
}

impl SeedPlan {
    /// The grid's steps: one per round count, then the 1%-active step and
    /// the scan at a tenth of N.
    pub fn steps(&self) -> usize {
        self.rounds.len() + 2
    }
}

/// Runs the grid with `base`'s placement, threads, timeout and netns
/// settings; `on_step(done, steps, what)` is called before each step
/// starts (`done` of `steps` finished) and once at the end, so a caller
/// can say how far it is and how long the rest will take.
pub fn run(
    base: &MuxConfig,
    plan: &SeedPlan,
    rec: &mut Recorder,
    on_step: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<SeedPoint>> {
    let mut points = Vec::new();
    let steps = plan.steps();
    for &r in &plan.rounds {
        on_step(
            points.len(),
            steps,
            &format!("N={} R={r}, every connection active", plan.conns),
        );
        let cfg = MuxConfig {
            engines: vec![EngineKind::Poll, EngineKind::EpollLt, EngineKind::EpollEt],
            lookups: vec![Lookup::Scan, Lookup::Index],
            conns: plan.conns,
            active: None,
            rounds: r,
            size: plan.size,
            ..base.clone()
        };
        let rep = harness::run(&cfg, rec)?;
        points.push(SeedPoint {
            rounds: r,
            conns: plan.conns,
            active: plan.conns,
            results: rep.results,
        });
    }
    let r = *plan.rounds.last().unwrap_or(&100);
    on_step(
        points.len(),
        steps,
        &format!("N={} R={r}, {} active", plan.conns, plan.active),
    );
    let cfg = MuxConfig {
        engines: vec![EngineKind::Poll, EngineKind::EpollLt],
        lookups: vec![Lookup::Index],
        conns: plan.conns,
        active: Some(plan.active),
        rounds: r,
        size: plan.size,
        ..base.clone()
    };
    let rep = harness::run(&cfg, rec)?;
    points.push(SeedPoint {
        rounds: r,
        conns: plan.conns,
        active: plan.active,
        results: rep.results,
    });
    on_step(
        points.len(),
        steps,
        &format!("N={} R={r}, the scan at a tenth of N", plan.small_conns),
    );
    let cfg = MuxConfig {
        engines: vec![EngineKind::EpollLt],
        lookups: vec![Lookup::Scan, Lookup::Index],
        conns: plan.small_conns,
        active: None,
        rounds: r,
        size: plan.size,
        ..base.clone()
    };
    let rep = harness::run(&cfg, rec)?;
    points.push(SeedPoint {
        rounds: r,
        conns: plan.small_conns,
        active: plan.small_conns,
        results: rep.results,
    });
    on_step(points.len(), steps, "done");
    Ok(points)
}

/// What `--reproduce-seed` says before each step and at the end: which
/// step of how many, and from the steps so far how long the rest will
/// take (even `--quick` runs 10,000 connections per server for minutes).
pub fn progress_line(done: usize, steps: usize, what: &str, elapsed_s: f64) -> String {
    if done >= steps {
        format!("mux --reproduce-seed: {steps} steps in {elapsed_s:.0} s")
    } else if done == 0 {
        format!("mux --reproduce-seed: step 1 of {steps} ({what}); each step's time will say how long the rest takes")
    } else {
        let left = elapsed_s / done as f64 * (steps - done) as f64;
        format!(
            "mux --reproduce-seed: step {} of {steps} ({what}); {elapsed_s:.0} s so far, about {left:.0} s left",
            done + 1
        )
    }
}

/// The server CPU per round trip of each run of a configuration.
fn cpu_runs(p: &SeedPoint, e: EngineKind, l: Lookup) -> Vec<f64> {
    p.results
        .iter()
        .find(|r| r.engine == e && r.lookup == l)
        .map(|r| {
            r.per_run
                .iter()
                .filter_map(|x| x.metric_f64("server_cpu_us_per_rt"))
                .filter(|x| x.is_finite() && *x > 0.0)
                .collect()
        })
        .unwrap_or_default()
}

/// Where a ratio to poll stands, judged by its 95% interval against ±5%
/// as `compare` judges: wholly above, wholly below, wholly within, or
/// none of these ("cannot tell"); a point of one run has no interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    More,
    Less,
    Level,
    CannotTell,
}

/// The ratio of `(e, l)` to indexed poll at one point: the point
/// estimate, its interval when both sides ran at least twice, and where
/// it stands.
/// A ratio to poll: the estimate, its 95% interval (None for one run),
/// and where it stands.
type Judged = (f64, Option<(f64, f64)>, Side);

fn judged(p: &SeedPoint, e: EngineKind, l: Lookup) -> Option<Judged> {
    let (a, b) = (
        cpu_runs(p, EngineKind::Poll, Lookup::Index),
        cpu_runs(p, e, l),
    );
    if a.len() >= 2 && b.len() >= 2 {
        let r = commbench_core::estimate::ratio(&a, &b);
        if r.lo.is_finite() && r.hi.is_finite() {
            let side = if r.lo > 1.05 {
                Side::More
            } else if r.hi < 0.95 {
                Side::Less
            } else if r.lo >= 0.95 && r.hi <= 1.05 {
                Side::Level
            } else {
                Side::CannotTell
            };
            return Some((r.ratio, Some((r.lo, r.hi)), side));
        }
    }
    let x = cpu(p, e, l)? / cpu(p, EngineKind::Poll, Lookup::Index)?;
    Some((x, None, Side::CannotTell))
}

fn cpu(p: &SeedPoint, e: EngineKind, l: Lookup) -> Option<f64> {
    p.results
        .iter()
        .find(|r| r.engine == e && r.lookup == l)
        .and_then(|r| r.server_cpu_us_per_rt)
}

/// User CPU only: the scan is user-space work, and the kernel's share
/// moves more with the machine's noise than the scan itself costs at small N.
fn user(p: &SeedPoint, e: EngineKind, l: Lookup) -> Option<f64> {
    p.results
        .iter()
        .find(|r| r.engine == e && r.lookup == l)
        .and_then(|r| r.server_user_us_per_rt)
}

/// The answers, one sentence each, from the measured figures only.
pub fn verdict(points: &[SeedPoint], conns: usize) -> Vec<String> {
    let full: Vec<&SeedPoint> = points
        .iter()
        .filter(|p| p.active == conns && p.conns == conns)
        .collect();
    let mut out = Vec::new();
    let ratio = |p: &SeedPoint, e: EngineKind, l: Lookup| -> Option<f64> {
        Some(cpu(p, e, l)? / cpu(p, EngineKind::Poll, Lookup::Index)?)
    };
    let fmt_series = |e: EngineKind, l: Lookup| -> String {
        full.iter()
            .map(|p| {
                format!(
                    "R={}: {}",
                    p.rounds,
                    match judged(p, e, l) {
                        Some((x, Some((lo, hi)), _)) => format!("{x:.2}x [{lo:.2}, {hi:.2}]"),
                        Some((x, None, _)) => format!("{x:.2}x (one run: no interval)"),
                        None => "-".into(),
                    }
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let sides = |e: EngineKind, l: Lookup| -> Vec<(u64, Side)> {
        full.iter()
            .filter_map(|p| Some((p.rounds, judged(p, e, l)?.2)))
            .collect()
    };
    // "cannot tell at R=10, 50: why": the points whose interval decides
    // nothing, named, and why (no interval, or one that reaches the
    // band around poll's cost).
    let unsure = |e: EngineKind, l: Lookup, v: &[(u64, Side)]| -> Option<String> {
        let r: Vec<String> = v
            .iter()
            .filter(|s| s.1 == Side::CannotTell)
            .map(|s| s.0.to_string())
            .collect();
        let no_interval = full
            .iter()
            .all(|p| judged(p, e, l).is_none_or(|j| j.1.is_none()));
        (!r.is_empty()).then(|| {
            format!(
                "cannot tell at R={}: {}",
                r.join(", "),
                if no_interval {
                    "one run per point has no interval (rerun with --repeat 3 or more)"
                } else {
                    "the interval reaches within 5% of poll's cost (more --repeat narrows it)"
                }
            )
        })
    };
    let scan: Vec<f64> = full
        .iter()
        .filter_map(|p| ratio(p, EngineKind::EpollLt, Lookup::Scan))
        .collect();
    if let (Some(first), Some(last)) = (scan.first(), scan.last()) {
        let s = sides(EngineKind::EpollLt, Lookup::Scan);
        let loses_all = s.iter().all(|x| x.1 == Side::More);
        let loses_last = s.last().is_some_and(|x| x.1 == Side::More);
        let never = s.iter().all(|x| matches!(x.1, Side::Less | Side::Level));
        let steady = scan.windows(2).all(|w| w[1] >= w[0] * 0.97) && *last > first * 1.05;
        let words = if loses_all && steady {
            "It loses to poll, and by more as the rounds grow: the seed's finding reproduced."
                .to_owned()
        } else if loses_all {
            "It loses to poll at every round count, as the seed found; the gap does not grow steadily with the rounds here, because the scan costs the same per round trip at every R (below).".to_owned()
        } else if never {
            "It does not lose to poll here: the seed's finding is not reproduced on this machine."
                .to_owned()
        } else {
            let mut w = if loses_last {
                "It loses to poll at the most rounds".to_owned()
            } else {
                "It does not clearly lose to poll".to_owned()
            };
            if let Some(u) = unsure(EngineKind::EpollLt, Lookup::Scan, &s) {
                w.push_str(&format!("; {u}"));
            }
            w.push('.');
            w
        };
        out.push(format!(
            "Scanning epoll (level-triggered) vs poll, server CPU per round trip (epoll / poll, 95% interval): {}. {words}",
            fmt_series(EngineKind::EpollLt, Lookup::Scan),
        ));
    }
    let idx: Vec<f64> = full
        .iter()
        .filter_map(|p| ratio(p, EngineKind::EpollLt, Lookup::Index))
        .collect();
    if !idx.is_empty() {
        // From the intervals, never from the worst point: a verdict only
        // where every point's interval decides it, "cannot tell" where one
        // does not.
        let s = sides(EngineKind::EpollLt, Lookup::Index);
        let words = if s.iter().all(|x| matches!(x.1, Side::Less | Side::Level)) {
            "Finding the state by the index the event carries removes the loss: epoll is at least level with poll at every round count.".to_owned()
        } else if s.iter().all(|x| x.1 == Side::More) {
            "Even indexed, epoll costs more than poll here when every connection is busy (each round wakes every descriptor, so poll's array walk is not wasted).".to_owned()
        } else {
            let at = |want: Side| -> Vec<String> {
                s.iter()
                    .filter(|x| x.1 == want)
                    .map(|x| x.0.to_string())
                    .collect()
            };
            let mut parts = Vec::new();
            for (side, what) in [
                (Side::More, "costs more than poll"),
                (Side::Less, "costs less than poll"),
                (Side::Level, "is level with poll"),
            ] {
                let r = at(side);
                if !r.is_empty() {
                    parts.push(format!("it {what} at R={}", r.join(", ")));
                }
            }
            if let Some(u) = unsure(EngineKind::EpollLt, Lookup::Index, &s) {
                parts.push(u);
            }
            format!("Indexed, {}.", parts.join("; "))
        };
        out.push(format!(
            "Indexed epoll vs poll (epoll / poll, 95% interval): {}. {words}",
            fmt_series(EngineKind::EpollLt, Lookup::Index),
        ));
    }
    let gap = |p: &SeedPoint| -> Option<f64> {
        Some(
            user(p, EngineKind::EpollLt, Lookup::Scan)?
                - user(p, EngineKind::EpollLt, Lookup::Index)?,
        )
    };
    let scan_gap: Vec<String> = full
        .iter()
        .filter_map(|p| Some(format!("R={}: +{:.2} us", p.rounds, gap(p)?)))
        .collect();
    if !scan_gap.is_empty() {
        out.push(format!(
            "The scan itself costs (epoll-lt scan minus index, server user CPU per round trip): {}.",
            scan_gap.join(", ")
        ));
    }
    if let (Some(small), Some(big)) = (
        points.iter().find(|p| p.conns < conns),
        full.iter()
            .rev()
            .find(|p| Some(p.rounds) == points.iter().find(|q| q.conns < conns).map(|q| q.rounds)),
    ) {
        let steps = |p: &SeedPoint| {
            p.results
                .iter()
                .find(|r| r.engine == EngineKind::EpollLt && r.lookup == Lookup::Scan)
                .and_then(|r| r.scan_steps_per_rt)
        };
        if let (Some(gs), Some(gb), Some(ss), Some(sb)) =
            (gap(small), gap(big), steps(small), steps(big))
        {
            let follows = gs > 0.0 && (gb / gs) > 0.5 * sb / ss.max(1.0);
            out.push(format!(
                "The scan compared {ss:.0} state entries per round trip at N={} and {sb:.0} at N={conns} (linear in N by construction); its server user CPU per round trip was +{gs:.2} us and +{gb:.2} us{}",
                small.conns,
                if follows {
                    ": the cost follows the comparisons (user-time figures below ~0.5 us are coarse: the kernel splits user and system time by sampling)."
                } else {
                    " (user-time figures below ~0.5 us are coarse: the kernel splits user and system time by sampling)."
                }
            ));
        }
    }
    if let Some(p) = points.iter().find(|p| p.active < p.conns) {
        if let (Some(pc), Some(ec)) = (
            cpu(p, EngineKind::Poll, Lookup::Index),
            cpu(p, EngineKind::EpollLt, Lookup::Index),
        ) {
            out.push(format!(
                "With {} of {conns} connections active, poll costs {:.1} us of server CPU per round trip and epoll {:.1} us ({:.1}x): poll pays for every idle descriptor on every call, epoll only for the ready ones.",
                p.active,
                pc,
                ec,
                pc / ec
            ));
        }
    }
    out
}

/// The verdict as a record (for JSON and the report).
pub fn verdict_record(lines: &[String], plan: &SeedPlan) -> Record {
    Record::new("mux", "seed-verdict")
        .param("conns", plan.conns)
        .param("rounds", &plan.rounds)
        .param("size", plan.size)
        .param("active", plan.active)
        .metric("verdict", lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use commbench_core::stats::Summary;

    fn res(e: EngineKind, l: Lookup, cpu: f64) -> ConfigResult {
        ConfigResult {
            per_run: Vec::new(),
            engine: e,
            lookup: l,
            server_known: true,
            server_unknown: None,
            too_short: None,
            runs: 1,
            connected: 1,
            connect_failures: 0,
            server_refused: None,
            partial: false,
            round_trips: 1,
            rt_per_s: 1.0,
            rt_per_s_min: 1.0,
            rt_per_s_max: 1.0,
            server_user_us_per_rt: Some(cpu / 2.0),
            server_sys_us_per_rt: Some(cpu / 2.0),
            server_cpu_us_per_rt: Some(cpu),
            server_cpu_us_per_rt_total: Some(cpu),
            client_cpu_us_per_rt: 1.0,
            client_user_us_per_rt: None,
            client_sys_us_per_rt: None,
            events_per_wait: None,
            waits_per_rt: None,
            syscalls_per_rt: None,
            scan_steps_per_rt: if l == Lookup::Scan {
                Some(cpu * 100.0)
            } else {
                None
            },
            connect_s: 1.0,
            connects_per_s: 1.0,
            latency_ns: Summary::empty(),
            uring_deferred: None,
            oversubscribed: false,
            open: None,
            open_runs: Vec::new(),
        }
    }

    fn point(
        rounds: u64,
        conns: usize,
        active: usize,
        poll: f64,
        scan: f64,
        index: f64,
    ) -> SeedPoint {
        SeedPoint {
            rounds,
            conns,
            active,
            results: vec![
                res(EngineKind::Poll, Lookup::Index, poll),
                res(EngineKind::EpollLt, Lookup::Scan, scan),
                res(EngineKind::EpollLt, Lookup::Index, index),
            ],
        }
    }

    /// Runs of `(e, l)` at `cpu` ×(0.98…1.02), or `spread` wider.
    fn with_runs(mut p: SeedPoint, e: EngineKind, l: Lookup, spread: f64) -> SeedPoint {
        for r in p
            .results
            .iter_mut()
            .filter(|r| r.engine == e && r.lookup == l)
        {
            let c = r.server_cpu_us_per_rt.unwrap();
            r.per_run = [-1.0, -0.5, 0.0, 0.5, 1.0]
                .iter()
                .map(|k| {
                    Record::new("mux", "x").metric("server_cpu_us_per_rt", c * (1.0 + k * spread))
                })
                .collect();
        }
        p
    }

    fn repeated(rounds: u64, poll: f64, index: f64, spread: f64) -> SeedPoint {
        let p = point(rounds, 10_000, 10_000, poll, poll * 1.2, index);
        let p = with_runs(p, EngineKind::Poll, Lookup::Index, 0.02);
        let p = with_runs(p, EngineKind::EpollLt, Lookup::Scan, 0.02);
        with_runs(p, EngineKind::EpollLt, Lookup::Index, spread)
    }

    /// "R=10: 1.07x, R=50: 0.99x, R=100: 0.83x. Even indexed, epoll costs
    /// more than poll here": the sentence came from the worst point alone,
    /// every point one run without an interval.
    #[test]
    fn the_seed_verdict_follows_the_intervals_and_says_cannot_tell() {
        let pts = vec![
            repeated(10, 10.0, 11.5, 0.02),
            repeated(50, 10.0, 9.9, 0.02),
            repeated(100, 10.0, 8.3, 0.02),
        ];
        let v = verdict(&pts, 10_000).join("\n");
        assert!(!v.contains("Even indexed"), "{v}");
        assert!(v.contains("it costs more than poll at R=10"), "{v}");
        assert!(v.contains("it costs less than poll at R=100"), "{v}");
        assert!(v.contains("it is level with poll at R=50"), "{v}");
        assert!(v.contains("R=10: 1.15x ["), "{v}");
        // One run per point: no interval, so nothing is decided.
        let one = vec![
            point(10, 10_000, 10_000, 10.0, 11.0, 10.7),
            point(50, 10_000, 10_000, 10.0, 11.0, 9.9),
            point(100, 10_000, 10_000, 10.0, 11.0, 8.3),
        ];
        let v = verdict(&one, 10_000).join("\n");
        assert!(
            !v.contains("Even indexed") && !v.contains("removes the loss"),
            "{v}"
        );
        assert!(v.contains("cannot tell at R=10, 50, 100"), "{v}");
        assert!(v.contains("one run per point has no interval"), "{v}");
        assert!(v.contains("R=10: 1.07x (one run: no interval)"), "{v}");
        // Wide intervals at every point: cannot tell anywhere.
        let wide = vec![
            repeated(10, 10.0, 10.7, 0.5),
            repeated(100, 10.0, 10.7, 0.5),
        ];
        let v = verdict(&wide, 10_000).join("\n");
        assert!(
            v.contains("cannot tell at R=10, 100: the interval reaches within 5%"),
            "{v}"
        );
        // Every interval above 1.05: epoll costs more, said once.
        let more = vec![
            repeated(10, 10.0, 12.0, 0.02),
            repeated(100, 10.0, 12.5, 0.02),
        ];
        let v = verdict(&more, 10_000).join("\n");
        assert!(v.contains("Even indexed, epoll costs more"), "{v}");
    }

    /// The quick run took 163 s with no word on a non-terminal.
    #[test]
    fn the_seed_run_says_which_step_it_is_at_and_how_long_the_rest_takes() {
        assert!(progress_line(0, 5, "N=10000 R=10", 0.0).contains("step 1 of 5 (N=10000 R=10)"));
        assert_eq!(
            progress_line(2, 5, "x", 60.0),
            "mux --reproduce-seed: step 3 of 5 (x); 60 s so far, about 90 s left"
        );
        assert!(progress_line(5, 5, "done", 150.0).ends_with("5 steps in 150 s"));
    }

    #[test]
    fn verdict_says_what_the_figures_show() {
        let runs = |p: SeedPoint| {
            let p = with_runs(p, EngineKind::Poll, Lookup::Index, 0.02);
            let p = with_runs(p, EngineKind::EpollLt, Lookup::Scan, 0.02);
            with_runs(p, EngineKind::EpollLt, Lookup::Index, 0.02)
        };
        let pts = vec![
            runs(point(100, 10_000, 10_000, 10.0, 11.5, 8.0)),
            runs(point(500, 10_000, 10_000, 10.0, 13.0, 8.0)),
            runs(point(1000, 10_000, 10_000, 10.0, 15.0, 8.0)),
            point(1000, 10_000, 100, 80.0, 0.0, 8.0),
            point(1000, 1000, 1000, 9.0, 8.7, 8.0),
        ];
        let v = verdict(&pts, 10_000).join("\n");
        assert!(v.contains("by more as the rounds grow"), "{v}");
        assert!(v.contains("removes the loss"), "{v}");
        assert!(
            v.contains("compared 870 state entries per round trip at N=1000 and 1500 at N=10000"),
            "{v}"
        );
        assert!(
            v.contains("was +0.35 us and +3.50 us: the cost follows"),
            "{v}"
        );
        assert!(v.contains("(10.0x)"), "{v}");
        let flat = vec![
            runs(point(100, 10_000, 10_000, 10.0, 9.0, 8.0)),
            runs(point(1000, 10_000, 10_000, 10.0, 8.5, 8.0)),
        ];
        let v = verdict(&flat, 10_000).join("\n");
        assert!(v.contains("does not lose to poll"), "{v}");
    }
}
