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
    /// Runs per configuration, interleaved: a ratio to poll needs at
    /// least two on each side for an interval, so the default is 3.
    pub repeat: u32,
    /// The configurations of the every-connection-active steps.
    pub configs: Vec<(EngineKind, Lookup)>,
    /// The quick plan (its 1%-active step runs once).
    pub quick: bool,
}

/// Runs per configuration when `--repeat` is not given: the fewest that
/// give every ratio to poll a 95% interval with a point to spare.
pub const DEFAULT_REPEAT: u32 = 3;

/// A connect (and its accept and close) costs about as much as this many
/// round trips: 10,000 connections took 0.8 s and 100,000 round trips
/// 1.3 s of the same run (debug build, 2026-11-28). The time-left estimate
/// weighs each step's connections and round trips by it.
const CONNECT_IN_ROUND_TRIPS: f64 = 6.0;

/// One step of the grid: a harness run of its configurations.
#[derive(Debug, Clone)]
pub struct SeedStep {
    pub conns: usize,
    /// Connections doing rounds (None: all).
    pub active: Option<usize>,
    pub rounds: u64,
    pub configs: Vec<(EngineKind, Lookup)>,
    /// Runs per configuration.
    pub repeat: u32,
    /// What progress lines call it.
    pub what: String,
}

impl SeedStep {
    /// Its work in round-trip equivalents (connects weighed by
    /// [`CONNECT_IN_ROUND_TRIPS`]), over every configuration and repeat:
    /// what the time-left estimate divides the time so far by.
    pub fn work(&self) -> f64 {
        let active = self.active.unwrap_or(self.conns) as f64;
        let one = self.conns as f64 * CONNECT_IN_ROUND_TRIPS + active * self.rounds as f64;
        one * self.configs.len() as f64 * f64::from(self.repeat.max(1))
    }
}

impl SeedPlan {
    /// The article's grid (R = 100, 500, 1,000 at N = 10,000, every
    /// engine and lookup). `quick` answers the same question in about a
    /// minute: R divided by 100 and at least 2 (2, 5, 10), only the three
    /// configurations the verdict compares (indexed poll, epoll-lt with
    /// the scan and indexed), each repeated for an interval, and the
    /// 1%-active step (a ~10× ratio, read without an interval) once.
    /// N stays 10,000: at 5,000 the scan's +2 µs per round trip drowned in
    /// the system time's noise (every interval "cannot tell", 40 s); at
    /// 10,000 with R = 1, 5, 10 it took 62 s, about half of it connecting
    /// (27 runs of 10,000 connects), and R = 1 (10,000 round trips, a few
    /// 4 ms CPU-time ticks) could not tell (release build, 2 vCPUs, load
    /// 1.1, 2026-11-28). `repeat` None is [`DEFAULT_REPEAT`].
    pub fn new(quick: bool, repeat: Option<u32>) -> Self {
        let (rounds, configs) = if quick {
            (
                vec![2, 5, 10],
                vec![
                    (EngineKind::Poll, Lookup::Index),
                    (EngineKind::EpollLt, Lookup::Scan),
                    (EngineKind::EpollLt, Lookup::Index),
                ],
            )
        } else {
            let mut c = Vec::new();
            for e in [EngineKind::Poll, EngineKind::EpollLt, EngineKind::EpollEt] {
                for l in [Lookup::Scan, Lookup::Index] {
                    c.push((e, l));
                }
            }
            (vec![100, 500, 1000], c)
        };
        SeedPlan {
            conns: 10_000,
            rounds,
            size: 1024,
            active: 100,
            small_conns: 1000,
            quick,
            repeat: repeat.unwrap_or(DEFAULT_REPEAT),
            configs,
        }
    }

    /// The grid's steps: one per round count, then the 1%-active step and
    /// the scan at a tenth of N.
    pub fn steps(&self) -> Vec<SeedStep> {
        let mut out: Vec<SeedStep> = self
            .rounds
            .iter()
            .map(|&r| SeedStep {
                conns: self.conns,
                active: None,
                rounds: r,
                configs: self.configs.clone(),
                repeat: self.repeat,
                what: format!("N={} R={r}, every connection active", self.conns),
            })
            .collect();
        let r = *self.rounds.last().unwrap_or(&100);
        out.push(SeedStep {
            conns: self.conns,
            active: Some(self.active),
            rounds: r,
            configs: vec![
                (EngineKind::Poll, Lookup::Index),
                (EngineKind::EpollLt, Lookup::Index),
            ],
            repeat: if self.quick { 1 } else { self.repeat },
            what: format!("N={} R={r}, {} active", self.conns, self.active),
        });
        out.push(SeedStep {
            conns: self.small_conns,
            active: None,
            rounds: r,
            configs: vec![
                (EngineKind::EpollLt, Lookup::Scan),
                (EngineKind::EpollLt, Lookup::Index),
            ],
            repeat: self.repeat,
            what: format!("N={} R={r}, the scan at a tenth of N", self.small_conns),
        });
        out
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

/// Where a run of the grid is: the step about to start (`done` of the
/// plan's steps finished, `work_done` of `work_total` round-trip
/// equivalents, see [`SeedStep::work`]).
#[derive(Debug, Clone, Copy)]
pub struct SeedProgress<'a> {
    pub done: usize,
    pub steps: usize,
    pub what: &'a str,
    pub work_done: f64,
    pub work_total: f64,
}

/// Runs the grid with `base`'s placement, threads, timeout and netns
/// settings; `on_step` is called before each step starts and once at the
/// end, so a caller can say how far it is and how long the rest will take.
pub fn run(
    base: &MuxConfig,
    plan: &SeedPlan,
    rec: &mut Recorder,
    on_step: &mut dyn FnMut(SeedProgress<'_>),
) -> Result<Vec<SeedPoint>> {
    let steps = plan.steps();
    let work_total: f64 = steps.iter().map(SeedStep::work).sum();
    let mut work_done = 0.0;
    let mut points = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        on_step(SeedProgress {
            done: i,
            steps: steps.len(),
            what: &step.what,
            work_done,
            work_total,
        });
        let mut engines: Vec<EngineKind> = step.configs.iter().map(|c| c.0).collect();
        engines.dedup();
        let mut lookups: Vec<Lookup> = Vec::new();
        for c in &step.configs {
            if !lookups.contains(&c.1) {
                lookups.push(c.1);
            }
        }
        let cfg = MuxConfig {
            engines,
            lookups,
            conns: step.conns,
            active: step.active,
            rounds: step.rounds,
            size: plan.size,
            repeat: step.repeat,
            ..base.clone()
        };
        let rep = harness::run_configs(&cfg, &step.configs, rec)?;
        points.push(SeedPoint {
            rounds: step.rounds,
            conns: step.conns,
            active: step.active.unwrap_or(step.conns),
            results: rep.results,
        });
        work_done += step.work();
    }
    on_step(SeedProgress {
        done: steps.len(),
        steps: steps.len(),
        what: "done",
        work_done,
        work_total,
    });
    Ok(points)
}

/// What `--reproduce-seed` says before each step and at the end: which
/// step of how many, and how long the rest will take — the time so far
/// per unit of work done times the work left, because the steps differ
/// tenfold (R = 1 against R = 10): "about 81 s left" from equal steps
/// was followed by 217 s more.
pub fn progress_line(p: SeedProgress<'_>, elapsed_s: f64) -> String {
    let SeedProgress {
        done,
        steps,
        what,
        work_done,
        work_total,
    } = p;
    if done >= steps {
        format!("mux --reproduce-seed: {steps} steps in {elapsed_s:.0} s")
    } else if done == 0 || work_done <= 0.0 {
        format!("mux --reproduce-seed: step 1 of {steps} ({what}); the first step's time will say how long the rest takes")
    } else {
        let left = elapsed_s / work_done * (work_total - work_done).max(0.0);
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
            // Where it loses, where not, and where the intervals cannot
            // tell, each named by its round counts.
            let at = |want: &[Side]| -> Vec<String> {
                s.iter()
                    .filter(|x| want.contains(&x.1))
                    .map(|x| x.0.to_string())
                    .collect()
            };
            let mut parts = Vec::new();
            let more = at(&[Side::More]);
            if !more.is_empty() {
                parts.push(format!(
                    "{} to poll at R={}",
                    if loses_last {
                        "It loses"
                    } else {
                        "It loses only"
                    },
                    more.join(", ")
                ));
            }
            let not = at(&[Side::Less, Side::Level]);
            if !not.is_empty() {
                parts.push(format!("it does not lose at R={}", not.join(", ")));
            }
            if let Some(u) = unsure(EngineKind::EpollLt, Lookup::Scan, &s) {
                parts.push(u);
            }
            let mut w = parts.join("; ");
            if let Some(first) = w.get(..1) {
                w = first.to_uppercase() + &w[1..];
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
        .param("repeat", plan.repeat)
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
        let at = |done, what, work_done, work_total| SeedProgress {
            done,
            steps: 5,
            what,
            work_done,
            work_total,
        };
        assert!(progress_line(at(0, "N=10000 R=10", 0.0, 10.0), 0.0)
            .contains("step 1 of 5 (N=10000 R=10)"));
        assert_eq!(
            progress_line(at(2, "x", 40.0, 100.0), 60.0),
            "mux --reproduce-seed: step 3 of 5 (x); 60 s so far, about 90 s left"
        );
        assert!(progress_line(at(5, "done", 100.0, 100.0), 150.0).ends_with("5 steps in 150 s"));
    }

    /// "About 81 s left" at 20 s, and the run ended at 237 s: the estimate
    /// took every step to cost what the first (the fewest rounds) did.
    /// Here each step's time follows its work, so the estimate after any
    /// step is the rest's time exactly.
    #[test]
    fn the_seed_time_left_is_weighed_by_each_steps_work_not_its_count() {
        for quick in [true, false] {
            let plan = SeedPlan::new(quick, None);
            let steps = plan.steps();
            let work: Vec<f64> = steps.iter().map(SeedStep::work).collect();
            let total: f64 = work.iter().sum();
            // The steps differ: equal shares would be far off.
            let max = work.iter().cloned().fold(0.0, f64::max);
            let min = work.iter().cloned().fold(f64::INFINITY, f64::min);
            assert!(max > 3.0 * min, "{work:?}");
            let secs_per_work = 2e-5;
            let mut done_work = 0.0;
            for (i, w) in work.iter().enumerate().skip(1) {
                done_work += work[i - 1];
                let elapsed = done_work * secs_per_work;
                let line = progress_line(
                    SeedProgress {
                        done: i,
                        steps: steps.len(),
                        what: "x",
                        work_done: done_work,
                        work_total: total,
                    },
                    elapsed,
                );
                let want = (total - done_work) * secs_per_work;
                assert!(line.ends_with(&format!("about {want:.0} s left")), "{line}");
                let _ = w;
            }
        }
    }

    /// `mux --reproduce-seed --quick` ran 3 min 57 s and answered nothing:
    /// one run per point, no interval. The quick plan repeats every
    /// configuration the verdict compares (an interval needs two runs a
    /// side) and runs only those.
    #[test]
    fn the_quick_seed_plan_repeats_for_an_interval_and_runs_what_the_verdict_compares() {
        let q = SeedPlan::new(true, None);
        assert!(q.repeat >= 3, "{}", q.repeat);
        assert_eq!(q.rounds, vec![2, 5, 10]);
        assert_eq!(
            q.configs,
            vec![
                (EngineKind::Poll, Lookup::Index),
                (EngineKind::EpollLt, Lookup::Scan),
                (EngineKind::EpollLt, Lookup::Index),
            ]
        );
        // Every pair a verdict sentence reads runs at every full-N step.
        for s in q.steps().iter().take(q.rounds.len()) {
            for c in [
                (EngineKind::Poll, Lookup::Index),
                (EngineKind::EpollLt, Lookup::Scan),
                (EngineKind::EpollLt, Lookup::Index),
            ] {
                assert!(s.configs.contains(&c), "{s:?}");
            }
        }
        // The quick run's work is a small share of the full one's.
        let w = |p: &SeedPlan| -> f64 { p.steps().iter().map(SeedStep::work).sum() };
        let full = SeedPlan::new(false, None);
        assert_eq!(full.configs.len(), 6);
        assert!(w(&q) * 50.0 < w(&full), "{} vs {}", w(&q), w(&full));
        assert_eq!(SeedPlan::new(true, Some(1)).repeat, 1);
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
