//! `commbench openflow bench`: the seed's experiment in one command. For
//! each switch count and mode it starts our controller in-process, runs our
//! emulator against it, once per variant (naive general encoder, template
//! patching, and the trivial responder that measures the emulator's own
//! ceiling), and reports RESULT statistics, the median of the kept windows,
//! and the CPU time each side spent per response.
//!
//! Invariants: variants of one configuration run back to back, in an order
//! that alternates between configurations (A/B interleaving), each against
//! a fresh controller on an ephemeral loopback port; nothing here times
//! anything itself — windows come from the emulator, CPU from core's
//! rusage. Seed: cbench-trema-speedup (the 10x of caching the flow_mod).

use crate::controller::{App, Controller, ControllerConfig, ControllerError, ControllerStats};
use crate::emulator::{self, CbenchConfig, CbenchReport, CbenchRound, EmulatorError, Line};
use commbench_core::record::{Record, Recorder};
use commbench_core::stats::Summary;
use serde::Serialize;

/// A controller variant under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// cbench app through the general encoder.
    Naive,
    /// cbench app patching a prepared template.
    Template,
    /// Constant flow_mod, no parsing: the emulator's ceiling.
    Trivial,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Naive => "naive",
            Variant::Template => "template",
            Variant::Trivial => "trivial",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchConfig {
    pub switches: Vec<usize>,
    /// `false` = latency, `true` = throughput.
    pub modes: Vec<bool>,
    pub variants: Vec<Variant>,
    pub loops: usize,
    pub warmup: usize,
    pub ms_per_test: u64,
    pub of13: bool,
    pub controller_threads: usize,
    pub emulator_threads: usize,
    pub controller_cpus: Option<String>,
    pub emulator_cpus: Option<String>,
    /// Runs of every configuration, interleaved (A B C A B C): at least
    /// `repeats`, more up to `max_repeats` while a headline metric's
    /// interval is wider than ±2% (`max_repeats <= repeats`: exactly
    /// `repeats`). The windows of one run are not repeats; separate runs
    /// are, and each record carries their samples and interval.
    pub repeats: usize,
    pub max_repeats: usize,
    /// Start no configuration after this instant (the suite's time
    /// budget); the configurations left out are listed in
    /// [`BenchReport::skipped`].
    #[serde(skip)]
    pub deadline: Option<std::time::Instant>,
    /// The controller's busy-wait per packet_in (ns; 0: none), a
    /// calibration aid ([`ControllerConfig::extra_work_ns`]).
    pub extra_work_ns: u64,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            switches: vec![1, 16],
            modes: vec![true, false],
            variants: vec![Variant::Naive, Variant::Template, Variant::Trivial],
            loops: 6,
            warmup: 1,
            ms_per_test: 1000,
            of13: false,
            controller_threads: 1,
            emulator_threads: 1,
            controller_cpus: None,
            emulator_cpus: None,
            repeats: 1,
            max_repeats: 1,
            deadline: None,
            extra_work_ns: 0,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("controller: {0}")]
    Controller(#[from] ControllerError),
    #[error("emulator: {0}")]
    Emulator(#[from] EmulatorError),
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// One (switches, mode, variant) measurement.
#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    pub switches: usize,
    /// TCP congestion control both sides ran with (`auto`: never bbr).
    pub tcp_congestion: String,
    pub mode: &'static str,
    pub variant: &'static str,
    /// RESULT statistics (responses/s over kept windows).
    pub min: f64,
    pub max: f64,
    pub avg: f64,
    pub stdev: f64,
    /// Median responses/s over kept windows.
    pub median: f64,
    pub tests: usize,
    pub responses: u64,
    pub matched: u64,
    pub duplicate: u64,
    pub round_trip_ns: Option<Summary>,
    pub controller_cpu_s: f64,
    pub emulator_cpu_s: f64,
    pub wall_s: f64,
    /// Controller CPU ns per response (all windows).
    pub controller_ns_per_response: f64,
    pub emulator_ns_per_response: f64,
    pub emulator_busy: f64,
    pub backpressure_pauses: u64,
    pub closed_connections: usize,
    /// Switches that completed the handshake (fewer than `switches`: the
    /// row is partial and says so).
    pub switches_connected: usize,
    /// The machine's worst scheduling stall during the measured windows, ms.
    /// Responses per second of each kept window: the samples of
    /// `responses_per_s_median` (windows of one run: they see the noise
    /// within the run, not between runs).
    pub window_rates: Vec<f64>,
    pub stall_worst_ms: f64,
    /// The run's conditions as every record carries them (`load_start`,
    /// `load_end`, `oversubscribed`, `placement`: the Lab contract).
    #[serde(skip)]
    pub conditions: Record,
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub config: BenchConfig,
    /// One row per configuration: the run whose headline metric is the
    /// median of its repeats.
    pub rows: Vec<BenchRow>,
    /// Every run of each configuration, in the order of `rows`.
    pub runs: Vec<Vec<BenchRow>>,
    /// Configurations that got fewer runs than `repeats` because the
    /// deadline passed ("16 switches, latency, naive: 3 of 5 runs").
    pub short: Vec<String>,
    /// Configurations not started because the deadline had passed
    /// ("16 switches, latency, naive").
    pub skipped: Vec<String>,
}

impl BenchReport {
    /// The row for a configuration, if measured.
    pub fn row(&self, switches: usize, mode: &str, variant: Variant) -> Option<&BenchRow> {
        self.rows
            .iter()
            .find(|r| r.switches == switches && r.mode == mode && r.variant == variant.name())
    }

    /// A side-by-side table: one line per (switches, mode).
    pub fn side_by_side(&self) -> String {
        let mut s = format!(
            "{:>8} {:<10} {:>14} {:>14} {:>8} {:>14} {:>11} {:>11} {:>10} {:>9}\n",
            "switches",
            "mode",
            "naive r/s",
            "template r/s",
            "ratio",
            "ceiling r/s",
            "naive ns/r",
            "templ ns/r",
            "emu ns/r",
            "emu busy"
        );
        for &n in &self.config.switches {
            for &tp in &self.config.modes {
                let mode = mode_name(tp);
                let get = |v| self.row(n, mode, v);
                let f = |r: Option<&BenchRow>| {
                    r.map(|r| format!("{:.0}", r.median))
                        .unwrap_or_else(|| "-".into())
                };
                let ns = |r: Option<&BenchRow>| {
                    r.map(|r| format!("{:.0}", r.controller_ns_per_response))
                        .unwrap_or_else(|| "-".into())
                };
                let ratio = match (get(Variant::Naive), get(Variant::Template)) {
                    (Some(a), Some(b)) => commbench_core::lab::answer::ratio(b.median, a.median),
                    _ => "-".into(),
                };
                let templ = get(Variant::Template);
                s.push_str(&format!(
                    "{:>8} {:<10} {:>14} {:>14} {:>8} {:>14} {:>11} {:>11} {:>10} {:>9}\n",
                    n,
                    mode,
                    f(get(Variant::Naive)),
                    f(templ),
                    ratio,
                    f(get(Variant::Trivial)),
                    ns(get(Variant::Naive)),
                    ns(templ),
                    templ
                        .map(|r| format!("{:.0}", r.emulator_ns_per_response))
                        .unwrap_or_else(|| "-".into()),
                    templ
                        .map(|r| format!("{:.0}%", 100.0 * r.emulator_busy))
                        .unwrap_or_else(|| "-".into()),
                ));
            }
        }
        for r in self
            .rows
            .iter()
            .filter(|r| r.switches_connected < r.switches)
        {
            s.push_str(&format!(
                "partial: {} switches asked, {} completed the handshake ({}, {}): that row measures {} switches\n",
                r.switches, r.switches_connected, r.mode, r.variant, r.switches_connected
            ));
        }
        s.push_str(&self.above_ceiling());
        for k in &self.skipped {
            s.push_str(&format!("not run (time budget spent): {k}\n"));
        }
        for k in &self.short {
            s.push_str(&format!("fewer runs than asked (time budget spent): {k}\n"));
        }
        let conditions: Vec<&Record> = self.runs.iter().flatten().map(|r| &r.conditions).collect();
        s.push_str(&commbench_core::lab::answer::conditions_line(&conditions));
        s.push('\n');
        if let Some(n) = self.runs.iter().map(Vec::len).max().filter(|&n| n > 1) {
            let lo = self.runs.iter().map(Vec::len).min().unwrap_or(n);
            s.push_str(&format!(
                "each row is the median of {} separate runs, interleaved; the records carry every run's figures and the 95% intervals\n",
                if lo == n { n.to_string() } else { format!("{lo}-{n}") }
            ));
        }
        s
    }

    /// A line per row where a controller beat the ceiling, which is a
    /// bound only within one run: each variant runs in its own runs, and
    /// the emulator's rate follows the CPU the host leaves it (an A/A of
    /// two suites moved these rates 0.26-2.7×). It says whether the runs'
    /// ranges overlap (the spread between runs explains it) or not (the
    /// ceiling's runs were slower than every template run: a slow spell,
    /// or a ceiling that is not one here).
    fn above_ceiling(&self) -> String {
        let mut s = String::new();
        let range = |v: &[BenchRow]| {
            let lo = v.iter().map(|r| r.median).fold(f64::INFINITY, f64::min);
            let hi = v.iter().map(|r| r.median).fold(f64::NEG_INFINITY, f64::max);
            (lo, hi)
        };
        let runs_of = |row: &BenchRow| {
            self.runs
                .iter()
                .find(|v| {
                    v.first().is_some_and(|r| {
                        r.switches == row.switches && r.mode == row.mode && r.variant == row.variant
                    })
                })
                .map_or(&[][..], Vec::as_slice)
        };
        for t in self
            .rows
            .iter()
            .filter(|r| r.variant == Variant::Template.name())
        {
            let Some(c) = self.row(t.switches, t.mode, Variant::Trivial) else {
                continue;
            };
            if t.median <= c.median {
                continue;
            }
            let ((tl, th), (cl, ch)) = (range(runs_of(t)), range(runs_of(c)));
            let why = if tl <= ch {
                format!(
                    "within the spread between runs (template runs {tl:.0}-{th:.0}, ceiling runs {cl:.0}-{ch:.0})"
                )
            } else {
                format!(
                    "every ceiling run ({cl:.0}-{ch:.0}) was slower than every template run ({tl:.0}-{th:.0}): the emulator had less CPU in them, or the trivial responder is no ceiling at this placement"
                )
            };
            s.push_str(&format!(
                "above the ceiling: {} switches, {}: template {:.0} r/s > ceiling {:.0} r/s; the ceiling bounds a run, not another run's median: {why}\n",
                t.switches, t.mode, t.median, c.median
            ));
        }
        s
    }

    pub fn records(&self) -> Vec<Record> {
        self.runs
            .iter()
            .flat_map(|runs| {
                let recs = runs.iter().map(|r| self.record(r)).collect();
                commbench_core::lab::fold_repeats(&crate::lab::OpenflowLab, recs)
            })
            .collect()
    }

    fn record(&self, r: &BenchRow) -> Record {
        let mut rec = Record::new("openflow", "bench")
            .param("switches", r.switches)
            .param("mode", r.mode)
            .param("variant", r.variant)
            .param("ms_per_test", self.config.ms_per_test)
            .param("loops", self.config.loops)
            .param("of13", self.config.of13)
            .param("controller_threads", self.config.controller_threads)
            .param("emulator_threads", self.config.emulator_threads)
            .param("tcp_congestion", &r.tcp_congestion)
            .metric("responses_per_s_median", r.median)
            .metric("responses_per_s_avg", r.avg)
            .metric("responses_per_s_min", r.min)
            .metric("responses_per_s_max", r.max)
            .metric("responses_per_s_stdev", r.stdev)
            .metric("tests", r.tests)
            .metric("matched", r.matched)
            .metric("duplicate", r.duplicate)
            .metric("controller_cpu_s", r.controller_cpu_s)
            .metric("controller_ns_per_response", r.controller_ns_per_response)
            .metric("emulator_cpu_s", r.emulator_cpu_s)
            .metric("emulator_ns_per_response", r.emulator_ns_per_response)
            .metric("emulator_busy", r.emulator_busy)
            .metric("backpressure_pauses", r.backpressure_pauses)
            .metric("closed_connections", r.closed_connections)
            .metric("switches_ready", r.switches_connected)
            .metric("partial", r.switches_connected < r.switches)
            .metric("stall_worst_ms", r.stall_worst_ms);
        if self.config.extra_work_ns > 0 {
            rec.push_param("extra_work_ns", self.config.extra_work_ns);
        }
        // The windows of one run are not repeats: their spread is the
        // noise within the run, far below the noise between runs (an A/A
        // of two suites moved these rates 0.4-2.7x with window intervals
        // of +-10%), so they are recorded as windows; the samples of a
        // metric are separate runs (`repeats`).
        rec.push_metric("responses_per_s_windows", &r.window_rates);
        for (k, v) in &r.conditions.metrics {
            rec.metrics.insert(k.clone(), v.clone());
        }
        if let Some(rt) = &r.round_trip_ns {
            rec.push_metric("round_trip_ns", rt);
        }
        rec
    }
}

/// The trivial responder polls without sleeping when it has CPUs of its
/// own — one per thread, none shared with the emulator — so the emulator
/// does not pay a wake-up per write and the ceiling is the emulator's own.
/// Spinning on a shared CPU would starve the emulator instead.
pub fn responder_may_spin(cfg: &BenchConfig) -> bool {
    use commbench_core::placement::CpuList;
    let parse = |c: &Option<String>| c.as_deref().and_then(|c| CpuList::parse_online(c).ok());
    match (parse(&cfg.controller_cpus), parse(&cfg.emulator_cpus)) {
        (Some(c), Some(e)) => {
            c.cpus().len() >= cfg.controller_threads
                && c.cpus().iter().all(|x| !e.cpus().contains(x))
        }
        _ => false,
    }
}

pub fn mode_name(throughput: bool) -> &'static str {
    if throughput {
        "throughput"
    } else {
        "latency"
    }
}

/// Median responses/s over the kept windows of a round.
pub fn kept_median(round: &CbenchRound) -> f64 {
    let v: Vec<f64> = round
        .windows
        .iter()
        .filter(|w| w.kept)
        .map(|w| 1000.0 * w.per_ms)
        .collect();
    if v.is_empty() {
        return f64::NAN;
    }
    Summary::from_samples(&v).median
}

fn one(
    cfg: &BenchConfig,
    switches: usize,
    throughput: bool,
    variant: Variant,
) -> Result<(CbenchReport, ControllerStats), BenchError> {
    let ctl = Controller::start(&ControllerConfig {
        app: if variant == Variant::Trivial {
            App::Trivial
        } else {
            App::Cbench
        },
        naive: variant == Variant::Naive,
        of13: cfg.of13,
        listen: "127.0.0.1:0".parse().expect("literal address"),
        threads: cfg.controller_threads,
        log_connections: false,
        cpus: cfg.controller_cpus.clone(),
        busy_poll: variant == Variant::Trivial && responder_may_spin(cfg),
        extra_work_ns: cfg.extra_work_ns,
        ..Default::default()
    })?;
    let ecfg = CbenchConfig {
        controller: "127.0.0.1".into(),
        port: ctl.local_addr().port(),
        switches,
        loops: cfg.loops,
        warmup: cfg.warmup,
        ms_per_test: cfg.ms_per_test,
        throughput,
        of13: cfg.of13,
        threads: cfg.emulator_threads,
        cpus: cfg.emulator_cpus.clone(),
        ..Default::default()
    };
    let r = emulator::run_with(&ecfg, &mut |l| {
        if let Line::Notice(n) = l {
            eprintln!("{n}");
        }
    });
    let stats = ctl.stop();
    Ok((r?, stats))
}

/// Run the benchmark matrix; progress goes to `rec`, records are pushed.
///
/// Every configuration runs `repeats` times or more (see
/// [`BenchConfig::repeats`]), interleaved over configurations, so that a
/// slow spell of the machine lands on every variant alike.
pub fn run(cfg: &BenchConfig, rec: &mut Recorder) -> Result<BenchReport, BenchError> {
    if cfg.warmup >= cfg.loops {
        return Err(BenchError::Config("warmup must be less than loops".into()));
    }
    if cfg.switches.is_empty() || cfg.modes.is_empty() || cfg.variants.is_empty() {
        return Err(BenchError::Config(
            "need at least one switch count, mode and variant".into(),
        ));
    }
    if cfg.repeats == 0 {
        return Err(BenchError::Config("repeats must be at least 1".into()));
    }
    let plan = commbench_core::estimate::Repeats {
        min: cfg.repeats,
        max: cfg.max_repeats.max(cfg.repeats),
        ..Default::default()
    };
    // Configuration order; the variants alternate direction between
    // (switches, mode) groups so that no variant always runs first.
    let mut order = Vec::new();
    let mut flip = false;
    for &n in &cfg.switches {
        for &tp in &cfg.modes {
            let mut vs = cfg.variants.clone();
            if flip {
                vs.reverse();
            }
            flip = !flip;
            order.extend(vs.into_iter().map(|v| (n, tp, v)));
        }
    }
    let mut runs: Vec<Vec<BenchRow>> = vec![Vec::new(); order.len()];
    let past = || cfg.deadline.is_some_and(|d| std::time::Instant::now() >= d);
    let mut round = 0;
    loop {
        let wanted: Vec<bool> = runs
            .iter()
            .map(|v| {
                if v.len() < plan.min {
                    return true;
                }
                let recs: Vec<Record> = v.iter().map(row_record).collect();
                commbench_core::lab::wants_more(&crate::lab::OpenflowLab, &recs, &plan)
            })
            .collect();
        if round >= plan.max || !wanted.iter().any(|&w| w) || (round > 0 && past()) {
            break;
        }
        round += 1;
        for (i, &(n, tp, v)) in order.iter().enumerate() {
            if !wanted[i] || past() {
                continue;
            }
            rec.progress(&format!(
                "openflow: {n} switches, {}, {} (run {round} of {})",
                mode_name(tp),
                v.name(),
                plan.min
            ));
            let conditions = commbench_core::rusage::Conditions::begin();
            let (mut report, mut ctl) = one(cfg, n, tp, v)?;
            if report.rounds[0].partial() {
                // A slow start on a loaded machine: try once more
                // before recording the configuration as partial.
                rec.progress(&format!(
                    "openflow: {n} switches, {}: only {} ready, retrying",
                    mode_name(tp),
                    report.rounds[0].switches_ready
                ));
                (report, ctl) = one(cfg, n, tp, v)?;
            }
            let mut row = bench_row(&report, &ctl, n, tp, v);
            conditions.stamp(
                &mut row.conditions,
                (cfg.controller_threads + cfg.emulator_threads) as u64,
                Some(&placement_of(cfg)),
            );
            runs[i].push(row);
        }
    }
    let mut skipped = Vec::new();
    let mut short = Vec::new();
    for (i, &(n, tp, v)) in order.iter().enumerate() {
        let name = format!("{n} switches, {}, {}", mode_name(tp), v.name());
        match runs[i].len() {
            0 => skipped.push(name),
            k if k < plan.min => short.push(format!("{name}: {k} of {} runs", plan.min)),
            _ => {}
        }
    }
    // Present configurations in their declared order regardless of run
    // order; each row is the run with the median headline figure.
    let idx = |&(n, tp, v): &(usize, bool, Variant)| {
        (
            cfg.switches.iter().position(|&s| s == n),
            cfg.modes.iter().position(|&m| m == tp),
            cfg.variants.iter().position(|&x| x == v),
        )
    };
    let mut measured: Vec<(usize, Vec<BenchRow>)> = runs
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .collect();
    measured.sort_by_key(|(i, _)| idx(&order[*i]));
    let runs: Vec<Vec<BenchRow>> = measured.into_iter().map(|(_, v)| v).collect();
    let rows = runs.iter().map(|v| median_run(v).clone()).collect();
    let report = BenchReport {
        config: cfg.clone(),
        rows,
        runs,
        skipped,
        short,
    };
    for r in report.records() {
        rec.push(r);
    }
    Ok(report)
}

/// The record of one run, for deciding whether more runs are wanted (the
/// parameters do not matter there, only the headline metrics).
fn row_record(r: &BenchRow) -> Record {
    Record::new("openflow", "bench")
        .metric("controller_ns_per_response", r.controller_ns_per_response)
        .metric("responses_per_s_median", r.median)
}

/// The run whose controller CPU per response is the median of the runs
/// (its rate when the controller's CPU is not known).
fn median_run(v: &[BenchRow]) -> &BenchRow {
    let key = |r: &BenchRow| {
        if r.controller_ns_per_response.is_finite() && r.controller_ns_per_response > 0.0 {
            r.controller_ns_per_response
        } else {
            r.median
        }
    };
    let mut order: Vec<&BenchRow> = v.iter().collect();
    order.sort_by(|a, b| key(a).total_cmp(&key(b)));
    order[(order.len() - 1) / 2]
}

fn bench_row(
    report: &CbenchReport,
    ctl: &ControllerStats,
    n: usize,
    tp: bool,
    v: Variant,
) -> BenchRow {
    let round = &report.rounds[0];
    let responses = round.tally.responses.max(1);
    BenchRow {
        switches: n,
        tcp_congestion: report.tcp_congestion.applied.clone(),
        mode: mode_name(tp),
        variant: v.name(),
        min: round.result.min,
        max: round.result.max,
        avg: round.result.avg,
        stdev: round.result.stdev,
        median: kept_median(round),
        window_rates: round
            .windows
            .iter()
            .filter(|w| w.kept)
            .map(|w| 1000.0 * w.per_ms)
            .collect(),
        tests: round.result.tests,
        responses: round.tally.responses,
        matched: round.tally.matched,
        duplicate: round.tally.duplicate,
        round_trip_ns: round.round_trip_ns.clone(),
        controller_cpu_s: ctl.cpu_s(),
        emulator_cpu_s: round.emulator_cpu_s,
        wall_s: round.wall_s,
        controller_ns_per_response: ctl.cpu_s() * 1e9 / ctl.flow_mod_sent.max(1) as f64,
        emulator_ns_per_response: round.emulator_cpu_s * 1e9 / responses as f64,
        emulator_busy: round.emulator_busy_max,
        backpressure_pauses: ctl.backpressure_pauses,
        closed_connections: round.closed.len(),
        switches_connected: round.switches_ready,
        stall_worst_ms: round
            .windows
            .iter()
            .map(|w| w.stall.worst_ms)
            .fold(0.0, f64::max),
        conditions: Record::new("openflow", "conditions"),
    }
}

/// Where the controller and the emulator ran: their CPU lists as asked,
/// else unpinned and the CPUs they were allowed.
fn placement_of(cfg: &BenchConfig) -> String {
    use commbench_core::placement::{describe, CpuList};
    let parse = |c: &Option<String>| c.as_deref().and_then(|c| CpuList::parse(c).ok());
    let (c, e) = (parse(&cfg.controller_cpus), parse(&cfg.emulator_cpus));
    describe(&[("controller", c.as_ref()), ("emulator", e.as_ref())], &[])
}

/// The suite's openflow step: every configuration five runs or more,
/// interleaved, short windows (the variance lives between runs, so many
/// short runs say more than a few long ones). The quick preset measures
/// throughput only (the answer's figures); the default adds latency mode.
pub fn suite(
    quick: bool,
    deadline: Option<std::time::Instant>,
    rec: &mut Recorder,
) -> Result<BenchReport, BenchError> {
    run(&suite_config(quick, deadline), rec)
}

/// What one run costs beyond its windows and pauses: starting the
/// controller, connecting the switches and their handshake (~70 ms
/// measured on the 2-vCPU VM; rounded up).
pub const RUN_SETUP_S: f64 = 0.1;

/// The suite's plan: every configuration, five runs each, one warm-up
/// window and one kept window per run (the runs, not the windows, are
/// the samples), more runs while time is left. Its minimum must fit the
/// lab's budget with room to spare — three windows of 250 ms made 60
/// runs of 1.1 s, more than the 58 s budget, so every default suite was
/// "cut short by its time budget".
pub fn suite_config(quick: bool, deadline: Option<std::time::Instant>) -> BenchConfig {
    if quick {
        BenchConfig {
            modes: vec![true],
            loops: 2,
            ms_per_test: 100,
            repeats: 5,
            max_repeats: 8,
            deadline,
            ..Default::default()
        }
    } else {
        BenchConfig {
            loops: 2,
            ms_per_test: 200,
            repeats: 5,
            max_repeats: 10,
            deadline,
            ..Default::default()
        }
    }
}

impl BenchConfig {
    /// Seconds the minimum plan takes: every configuration `repeats`
    /// times, each run its windows with cbench's pause after each, plus
    /// [`RUN_SETUP_S`].
    pub fn planned_min_s(&self) -> f64 {
        let configs = self.switches.len() * self.modes.len() * self.variants.len();
        let window = self.ms_per_test as f64 / 1000.0 + crate::emulator::WINDOW_PAUSE.as_secs_f64();
        (configs * self.repeats) as f64 * (self.loops as f64 * window + RUN_SETUP_S)
    }
}

/// Records for a `commbench cbench` report: one per round (RESULT line).
pub fn cbench_records(r: &CbenchReport) -> Vec<Record> {
    let c = &r.config;
    r.rounds
        .iter()
        .map(|round| {
            let mut rec = Record::new("openflow", "cbench")
                .param("controller", format!("{}:{}", c.controller, c.port))
                .param("switches", round.switches)
                .param("mode", c.mode_name())
                .param("loops", c.loops)
                .param("ms_per_test", c.ms_per_test)
                .param("warmup", c.warmup)
                .param("cooldown", c.cooldown)
                .param("mac_addresses", c.mac_addresses)
                .param("learn_dst_macs", c.learn_dst_macs)
                .param("of13", c.of13)
                .param("outstanding", c.outstanding)
                .param("threads", c.threads)
                .param("tcp_congestion", &r.tcp_congestion.applied)
                .param("tcp_congestion_kernel", &r.tcp_congestion.kernel)
                .metric("result", round.result)
                .metric("responses_per_s_median", kept_median(round))
                .metric(
                    "windows_per_ms",
                    round.windows.iter().map(|w| w.per_ms).collect::<Vec<_>>(),
                )
                .metric("tally", round.tally)
                .metric("per_switch_total", &round.per_switch_total)
                .metric("fairness", round.fairness)
                .metric("closed", &round.closed)
                .metric("switches_connected", round.switches_connected)
                .metric("switches_ready", round.switches_ready)
                .metric("partial", round.partial())
                .metric("handshake_timeout_ms", round.handshake_timeout_ms)
                .metric(
                    "windows_stall_worst_ms",
                    round
                        .windows
                        .iter()
                        .map(|w| w.stall.worst_ms)
                        .collect::<Vec<_>>(),
                )
                .metric(
                    "stall_worst_ms",
                    round
                        .windows
                        .iter()
                        .map(|w| w.stall.worst_ms)
                        .fold(0.0, f64::max),
                )
                .metric("emulator_cpu_s", round.emulator_cpu_s)
                .metric("emulator_user_s", round.emulator_user_s)
                .metric("emulator_sys_s", round.emulator_sys_s)
                .metric("emulator_busy", round.emulator_busy)
                .metric("emulator_busy_max", round.emulator_busy_max)
                .metric(
                    "windows_emulator_busy",
                    round
                        .windows
                        .iter()
                        .map(|w| w.emulator_busy)
                        .collect::<Vec<_>>(),
                )
                .metric(
                    "emulator_ns_per_response",
                    round.emulator_cpu_s * 1e9 / round.tally.responses.max(1) as f64,
                )
                .metric("wall_s", round.wall_s);
            if let Some(rt) = &round.round_trip_ns {
                rec.push_metric("round_trip_ns", rt);
            }
            rec
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(variant: Variant, median: f64, over: bool) -> BenchRow {
        let mut conditions = Record::new("openflow", "conditions");
        conditions.push_metric("load_start", 4.6);
        conditions.push_metric("load_end", 4.8);
        conditions.push_metric("oversubscribed", over);
        conditions.push_metric("placement", "unpinned (allowed 0-1)");
        BenchRow {
            switches: 1,
            tcp_congestion: "cubic".into(),
            mode: "throughput",
            variant: variant.name(),
            min: median,
            max: median,
            avg: median,
            stdev: 0.0,
            median,
            tests: 1,
            responses: 1,
            matched: 1,
            duplicate: 0,
            round_trip_ns: None,
            controller_cpu_s: 0.1,
            emulator_cpu_s: 0.1,
            wall_s: 1.0,
            controller_ns_per_response: 100.0,
            emulator_ns_per_response: 100.0,
            emulator_busy: 0.5,
            backpressure_pauses: 0,
            closed_connections: 0,
            switches_connected: 1,
            stall_worst_ms: 0.0,
            window_rates: vec![median],
            conditions,
        }
    }

    fn report(runs: Vec<Vec<BenchRow>>) -> BenchReport {
        BenchReport {
            config: BenchConfig {
                switches: vec![1],
                modes: vec![true],
                ..BenchConfig::default()
            },
            rows: runs.iter().map(|v| median_run(v).clone()).collect(),
            runs,
            short: vec![],
            skipped: vec![],
        }
    }

    /// `openflow bench` at load 4.6 showed no load or oversubscription,
    /// and "template 23,989,304 r/s" above "ceiling 16,269,303" without a
    /// word on how a rate beat its ceiling.
    #[test]
    fn the_table_gives_its_conditions_and_says_why_a_rate_beat_its_ceiling() {
        let r = report(vec![
            vec![
                row(Variant::Naive, 2.0e6, false),
                row(Variant::Naive, 2.2e6, true),
            ],
            vec![
                row(Variant::Template, 23.0e6, false),
                row(Variant::Template, 24.0e6, false),
            ],
            vec![
                row(Variant::Trivial, 16.0e6, false),
                row(Variant::Trivial, 16.3e6, false),
            ],
        ]);
        let t = r.side_by_side();
        assert!(t.contains("conditions: load 4.6-4.8"), "{t}");
        assert!(t.contains("OVERSUBSCRIBED in 1 of 6 runs"), "{t}");
        assert!(
            t.contains("above the ceiling: 1 switches, throughput"),
            "{t}"
        );
        assert!(t.contains("every ceiling run"), "{t}");
        // Overlapping runs: the spread between runs explains it.
        let r = report(vec![
            vec![
                row(Variant::Template, 15.0e6, false),
                row(Variant::Template, 17.0e6, false),
                row(Variant::Template, 18.0e6, false),
            ],
            vec![
                row(Variant::Trivial, 16.0e6, false),
                row(Variant::Trivial, 16.2e6, false),
            ],
        ]);
        let t = r.side_by_side();
        assert!(t.contains("within the spread between runs"), "{t}");
        // Below the ceiling: no line.
        let r = report(vec![
            vec![row(Variant::Template, 10.0e6, false)],
            vec![row(Variant::Trivial, 16.0e6, false)],
        ]);
        assert!(!r.side_by_side().contains("above the ceiling"));
    }
}
