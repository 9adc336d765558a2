//! `commbench ab`: is B slower than A on this machine? Both sides run as
//! paired, interleaved trials (one child run per trial: a commbench
//! command read through its records, or any program timed as a whole
//! process tree, [`trial::exec_record`]), and every headline metric gets
//! the paired ratio B/A with its 95% interval and a verdict.
//!
//! Why pairs: two runs made minutes apart differ by the machine's drift
//! (consecutive runs here correlate), which no number of repeats inside a
//! run removes. A pair's two trials run back to back and share the drift,
//! so the per-pair log ratio cancels it (Abedi & Brecht, ICPE 2017:
//! randomized multiple interleaved trials; Chromium Pinpoint's pairwise
//! mode). The design:
//!
//! - **Balanced, shuffled order.** Pairs come in blocks of two, one AB and
//!   one BA in a random order from a recorded seed, so a first-run or
//!   second-run effect hits both sides alike; the count of AB equals BA's
//!   whenever the run stops (it stops only at block boundaries).
//! - **Same placement.** Both sides are pinned to the same CPUs
//!   (`cpus`), or, in a duet, run at the same time on two CPUs swapped
//!   every pair (Bulej et al., ICPE 2020: duet benchmarking), for
//!   single-threaded commands only.
//! - **Contamination.** Each trial's run-queue delay and its CPUs' steal
//!   time are measured (`core::sched`); a pair whose sides lost shares of
//!   their wall time that differ by more than `contamination`, and by more
//!   than `contamination_scale` times the run's median gap (a host loaded
//!   by others loads both sides alike), is redone, as is a pair with a
//!   failed trial (Pinpoint drops a failed pair); at most as many redos as
//!   `max_pairs`.
//! - **Adaptive.** After `min_pairs`, pairs are added while a headline
//!   metric is inconclusive, up to `max_pairs` or the time `budget`; the
//!   run looks at its verdicts only at pair counts growing by 1.4× and
//!   stops early only on a 99% interval ([`INTERIM_CONFIDENCE`]); what it
//!   reports is the 95% verdict of every pair it kept.
//! - **Statistics.** The Hodges–Lehmann estimate of the per-pair log
//!   ratios with the Wilcoxon signed-rank interval
//!   (`core::estimate::paired`), each side of it widened by the run-to-run
//!   spread of the change's own size (`change_spread`, a share of the
//!   change: nothing for an A/A); verdicts as `compare` gives them, with no
//!   noise floor (pairing is what removes the between-run drift of the
//!   level).
//!
//! Invariants: a trial that failed or was contaminated never enters the
//! statistics; a warm-up pair is run and discarded first; everything a run
//! creates (records files, children, whatever they detach, what a
//! `--setup` left running) is removed, killed or reaped when it returns,
//! also on an interrupt (SIGINT, SIGTERM, SIGHUP), which ends the run with
//! the pairs done so far, marked as interrupted.

pub mod analysis;
pub mod export;
pub mod hyperfine;
pub mod trial;

use analysis::{
    judge_all, judge_all_at, shape_of, undecided, values_of, Decl, Judging, MetricResult,
    RecordKey, Values,
};
use commbench_core::artifact::TempDir;
use commbench_core::estimate::Rng;
use commbench_core::lab::Lab;
use commbench_core::lab::{Better, Quantity};
use commbench_core::placement::CpuList;
use commbench_core::proctree::TreeGroup;
use commbench_core::record::Record;
use serde_json::{Map, Value};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use trial::{run_aux, run_together, Launch, Mode, Trial, TrialError};
pub use trial::{Exec, OutputMetric};

/// One side of the comparison.
#[derive(Debug, Clone)]
pub struct Side {
    /// The value substituted for `{NAME}` (the side's label).
    pub value: String,
    /// The command line with the value substituted: program first.
    pub argv: Vec<String>,
    /// Run once before the side's first trial, not timed (`--setup`);
    /// what it leaves running lives until the run ends.
    pub setup: Option<Vec<String>>,
    /// Run before each of the side's trials, not timed (`--prepare`).
    pub prepare: Option<Vec<String>>,
    /// Run once after the side's last trial (`--cleanup`), also after an
    /// interrupt or an error.
    pub cleanup: Option<Vec<String>>,
}

impl Side {
    /// A side that runs `argv` alone (no setup, prepare or cleanup).
    pub fn new(value: impl Into<String>, argv: Vec<String>) -> Side {
        Side {
            value: value.into(),
            argv,
            setup: None,
            prepare: None,
            cleanup: None,
        }
    }

    /// The command as one line (words with spaces quoted; a command line
    /// that runs through a shell, `SHELL -c LINE`, as its LINE).
    pub fn command_line(&self) -> String {
        match self.argv.as_slice() {
            [_, c, line] if c == "-c" => line.clone(),
            argv => trial::command_line(argv),
        }
    }
}

/// How the two sides are placed.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// One after the other, both pinned to these CPUs (None: inherited,
    /// the same for both).
    Sequential(Option<CpuList>),
    /// Both at once behind a start barrier, each on one of the two CPUs,
    /// swapped every pair.
    Duet([usize; 2]),
    /// A shared-CPU duet: both at once behind a start barrier, both
    /// pinned to this one CPU, each side's tree in a cgroup of the CPU
    /// controller with the same weight, so that over the window both run
    /// each gets half the CPU, in the same spell of the machine. For
    /// trials of a fixed duration (`mux --rounds-for`): a side that ends
    /// first leaves the other the whole CPU.
    Shared(usize),
}

impl Placement {
    /// As recorded: `sequential cpus 1`, `sequential (inherited 0-1)`,
    /// `duet cpus 0,1 (swapped each pair)`.
    pub fn describe(&self) -> String {
        match self {
            Placement::Sequential(Some(c)) => format!("sequential, pinned to cpus {c}"),
            Placement::Sequential(None) => format!(
                "sequential, unpinned (cpus {})",
                commbench_core::placement::current_affinity()
            ),
            Placement::Duet([a, b]) => format!("duet on cpus {a} and {b}, swapped each pair"),
            Placement::Shared(c) => format!(
                "shared-CPU duet: both at once on cpu {c}, each side in a cgroup of equal CPU weight"
            ),
        }
    }
}

/// What to run and how long.
#[derive(Debug, Clone)]
pub struct AbSpec {
    /// The varied parameter's name (`-L NAME`).
    pub name: String,
    /// A and B.
    pub sides: [Side; 2],
    /// The command as given, with `{NAME}` unsubstituted.
    pub template: String,
    /// Placement of the trials.
    pub placement: Placement,
    /// Pairs before the first verdict (rounded up to even).
    pub min_pairs: usize,
    /// Most pairs (rounded up to even).
    pub max_pairs: usize,
    /// Stop adding pairs when another block would end past this.
    pub budget: Duration,
    /// Warm-up pairs run first and discarded.
    pub warmup_pairs: usize,
    /// Seed of the order shuffle.
    pub seed: u64,
    /// Relative change below which a difference is "no change" (0.02).
    pub threshold: f64,
    /// How much a change's size moves between runs, as a share of the
    /// change (standard deviation; `core::estimate::paired::CHANGE_SPREAD`,
    /// 0.035): the intervals hold it beside the pairs' own noise.
    pub change_spread: f64,
    /// Largest difference between a pair's two sides in how much the
    /// machine held them back ([`trial::Trial::interference`]: the share
    /// of runnable time spent waiting for a CPU, plus the share of CPU time
    /// stolen) (0.05); a pair beyond is redone when its gap is also beyond
    /// `contamination_scale` times the median gap of the run's pairs.
    pub contamination: f64,
    /// A pair is redone only when its gap is more than this many times the
    /// median gap of the run's pairs so far ([`CONTAMINATION_SCALE`]; 0:
    /// `contamination` alone decides).
    pub contamination_scale: f64,
    /// Judge these metrics as headlines instead of the declared ones.
    pub metrics: Vec<String>,
    /// A trial running longer than this is stopped (a failed trial).
    pub trial_timeout: Duration,
    /// Any program, timed as a process tree (None: a commbench command,
    /// read through its records).
    pub exec: Option<Exec>,
}

impl AbSpec {
    /// The metrics judged as headlines: those asked for by name, else for
    /// an exec run the numbers the program prints and its CPU (per
    /// operation with `--ops`), else wall time and CPU (CPU alone in a
    /// shared-CPU duet: [`SHARED_WALL`]); else (records) the labs'
    /// declared headlines (empty here).
    pub fn headline_metrics(&self) -> Vec<String> {
        if !self.metrics.is_empty() {
            return self.metrics.clone();
        }
        let Some(e) = &self.exec else {
            return Vec::new();
        };
        let per_op = e.ops.is_some_and(|n| n > 0);
        let mut v: Vec<String> = e.outputs.iter().map(|o| o.name.clone()).collect();
        if v.is_empty() && !self.wall_is_shared() {
            v.push(if per_op { "wall_ns_per_op" } else { "wall_s" }.into());
        }
        v.push(if per_op { "cpu_ns_per_op" } else { "cpu_s" }.into());
        v
    }

    /// Whether a side's wall time holds the other side's turns: an exec
    /// run as a shared-CPU duet ([`SHARED_WALL`]).
    pub fn wall_is_shared(&self) -> bool {
        self.exec.is_some() && matches!(self.placement, Placement::Shared(_))
    }

    /// The directions and units of the metrics ab makes itself (exec).
    pub fn decls(&self) -> Vec<Decl> {
        let Some(e) = &self.exec else {
            return Vec::new();
        };
        let d = |m: &str, better, quantity, unit: &str| Decl {
            metric: m.into(),
            better,
            quantity,
            unit: unit.into(),
        };
        let mut v = vec![
            d("wall_s", Better::Lower, Quantity::Time, "s"),
            d("cpu_s", Better::Lower, Quantity::Cost, "s"),
            d("user_s", Better::Lower, Quantity::Cost, "s"),
            d("sys_s", Better::Lower, Quantity::Cost, "s"),
            d("max_rss_kib", Better::Lower, Quantity::Cost, "KiB"),
            d("memory_peak_kib", Better::Lower, Quantity::Cost, "KiB"),
            d("wall_ns_per_op", Better::Lower, Quantity::Time, "ns"),
            d("cpu_ns_per_op", Better::Lower, Quantity::Cost, "ns"),
            d("ops_per_s", Better::Higher, Quantity::Time, "ops/s"),
        ];
        for o in &e.outputs {
            v.retain(|x| x.metric != o.name);
            v.push(d(&o.name, o.better, Quantity::Time, ""));
        }
        v
    }
}

/// Why a shared-CPU duet of any program judges its CPU time and not its
/// wall time unless asked (`--metrics wall_s`). Both sides share the one
/// CPU, so a side's wall time holds the other side's turns on it; and for
/// a fixed amount of work the faster side ends first and leaves the other
/// the whole CPU, so a change in wall time reads at about half its size.
/// Measured (docs/statistics.md §9): an awk loop of N against 1.03·N
/// iterations as a shared duet held 1.03 inside its CPU interval in 20 of
/// 20 runs, while its wall time read 1.001-1.013 (four runs called it "no
/// change" at ±1%). Its CPU time is the program's own (each side's
/// cgroup), and both sides meet the same spell of a vCPU whose speed comes
/// and goes: a pair's CPU log-ratio spread fell from 20-28% one side after
/// the other (pinned to one CPU or not) to 1-2%.
pub const SHARED_WALL: &str = "wall time is not judged in a shared-CPU duet: a side's wall time holds the other side's turns on the CPU, and the faster side ends first and leaves the other the whole CPU, which halves a change (judge it anyway with --metrics wall_s)";

/// Which side ran first in a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// A, then B (in a duet: A on the first CPU).
    AB,
    /// B, then A (in a duet: B on the first CPU).
    BA,
}

/// One pair that was run, kept or redone.
#[derive(Debug, Clone)]
pub struct PairLog {
    /// The order it ran in.
    pub order: Order,
    /// Whether it entered the statistics.
    pub kept: bool,
    /// Why it was redone, when it was.
    pub redone_because: Option<String>,
    /// Wall seconds of A's and B's trial.
    pub wall_s: [f64; 2],
    /// How much the machine held A's and B's trial back
    /// ([`trial::Trial::interference`]).
    pub interference: [f64; 2],
    /// CPU seconds (user + sys) of A's and B's trial, whole tree.
    pub cpu_s: [f64; 2],
    /// User CPU seconds of A's and B's trial, whole tree.
    pub user_s: [f64; 2],
    /// System CPU seconds of A's and B's trial, whole tree.
    pub sys_s: [f64; 2],
    /// The largest peak RSS of any process of A's and B's trial (KiB).
    pub max_rss_kib: [u64; 2],
    /// Involuntary context switches of A's and B's trial.
    pub involuntary_ctx: [u64; 2],
    /// CPU migrations of A's and B's trial.
    pub migrations: [u64; 2],
    /// Steal and softirq seconds on A's and B's CPUs.
    pub steal_s: [f64; 2],
    /// In a shared-CPU duet, the share of the longer trial's wall time
    /// during which both ran (both start at the barrier: the shorter's
    /// wall over the longer's); NaN otherwise.
    pub overlap: f64,
    /// In a shared-CPU duet, A's and B's CPU cgroup weight as read back,
    /// and their groups' names.
    pub cpu_groups: Option<[(String, String); 2]>,
    /// Softirq seconds on A's and B's CPUs.
    pub softirq_s: [f64; 2],
}

/// Why the run stopped adding pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Every headline metric has a decisive verdict.
    Decided,
    /// `max_pairs` reached.
    MaxPairs,
    /// Another block would have ended past the budget (also before
    /// `min_pairs`).
    Budget,
    /// SIGINT or SIGTERM.
    Interrupted,
    /// Trials kept failing.
    Failed(String),
}

impl Stop {
    /// In words.
    pub fn describe(&self) -> String {
        match self {
            Stop::Decided => "every headline metric decided".into(),
            Stop::MaxPairs => "the most pairs allowed (--max-pairs)".into(),
            Stop::Budget => "the time budget (--budget)".into(),
            Stop::Interrupted => "interrupted".into(),
            Stop::Failed(e) => format!("trials kept failing: {e}"),
        }
    }
    /// A short machine-readable tag (`decided`, `budget`, ...).
    pub fn tag(&self) -> &'static str {
        match self {
            Stop::Decided => "decided",
            Stop::MaxPairs => "max_pairs",
            Stop::Budget => "budget",
            Stop::Interrupted => "interrupted",
            Stop::Failed(_) => "failed",
        }
    }
}

/// A parameter that differs between A's and B's record: (name, A's
/// value, B's value; null where a side lacks it).
pub type ParamDiff = (String, Value, Value);

/// What `ab` found.
#[derive(Debug, Clone)]
pub struct AbReport {
    /// What was asked.
    pub spec: AbSpec,
    /// Every pair run after the warm-up, kept or redone, in order.
    pub pairs: Vec<PairLog>,
    /// Per metric, the paired verdict over the kept pairs.
    pub results: Vec<MetricResult>,
    /// Why it stopped.
    pub stop: Stop,
    /// Seconds from the warm-up's start to the last trial's end.
    pub elapsed_s: f64,
    /// Parameters of each matched record that A and B share.
    pub common_params: Vec<(RecordKey, Map<String, Value>)>,
    /// Parameters of each matched record that differ between A and B:
    /// (name, A's value, B's value).
    pub varied_params: Vec<(RecordKey, Vec<ParamDiff>)>,
    /// Whether scheduler counters could be read (a kernel with schedstats).
    pub sched_available: bool,
    /// How the trials' process trees were held (`core::proctree`): the
    /// cgroups used, or why none was, beside the subreaper and the death
    /// signal that always hold.
    pub containment: String,
}

impl AbReport {
    /// Pairs that entered the statistics.
    pub fn kept(&self) -> usize {
        self.pairs.iter().filter(|p| p.kept).count()
    }
    /// Kept pairs in each order: (AB, BA).
    pub fn orders(&self) -> (usize, usize) {
        let ab = self
            .pairs
            .iter()
            .filter(|p| p.kept && p.order == Order::AB)
            .count();
        (ab, self.kept() - ab)
    }
    /// Pairs redone, by reason (`contaminated`, `failed`).
    pub fn redone(&self) -> (usize, usize) {
        let c = self
            .pairs
            .iter()
            .filter(|p| {
                p.redone_because
                    .as_deref()
                    .is_some_and(|w| w.starts_with("contaminated"))
            })
            .count();
        let f = self.pairs.iter().filter(|p| !p.kept).count() - c;
        (c, f)
    }
    /// In a shared-CPU duet, what held its kept pairs: the CPU weight of
    /// each side's cgroup (both, when the same), whether every pair's two
    /// sides were in separate groups, and the share of the longer trial
    /// both sides ran for (median, least over the kept pairs).
    pub fn shared_cpu(&self) -> Option<SharedCpu> {
        let kept: Vec<&PairLog> = self
            .pairs
            .iter()
            .filter(|p| p.kept && p.cpu_groups.is_some())
            .collect();
        if kept.is_empty() {
            return None;
        }
        let mut weights: Vec<String> = kept
            .iter()
            .flat_map(|p| p.cpu_groups.iter().flatten().map(|(_, w)| w.clone()))
            .collect();
        weights.sort();
        weights.dedup();
        let separate = kept.iter().all(|p| {
            p.cpu_groups
                .as_ref()
                .is_some_and(|[(ga, _), (gb, _)]| ga != gb)
        });
        let mut o: Vec<f64> = kept.iter().map(|p| p.overlap).collect();
        o.sort_by(f64::total_cmp);
        Some(SharedCpu {
            weights: weights.join(" / "),
            equal_weights: weights.len() == 1,
            separate_groups: separate,
            overlap_median: o[o.len() / 2],
            overlap_min: o[0],
        })
    }

    /// The headline results.
    pub fn headlines(&self) -> impl Iterator<Item = &MetricResult> {
        self.results.iter().filter(|m| m.headline)
    }
}

/// How a shared-CPU duet's kept pairs were held ([`AbReport::shared_cpu`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SharedCpu {
    /// The CPU weight of the sides' cgroups as read back (`v1 cpu.shares
    /// 1024`; two values joined by ` / ` if they ever differed).
    pub weights: String,
    /// Every side of every kept pair had the same weight.
    pub equal_weights: bool,
    /// Every kept pair's two sides ran in cgroups of their own.
    pub separate_groups: bool,
    /// The share of the longer trial during which both ran: median.
    pub overlap_median: f64,
    /// The same, least over the kept pairs.
    pub overlap_min: f64,
}

/// What went wrong before any verdict could be given.
#[derive(Debug, thiserror::Error)]
pub enum AbError {
    #[error("cannot make a folder for the trials' records: {0}")]
    TempDir(std::io::Error),
    #[error("side {side} ({value}) failed in the warm-up pair: {err}")]
    Warmup {
        side: char,
        value: String,
        err: TrialError,
    },
    #[error(
        "no metric of side A's records is also in side B's: they ran different tests ({a} vs {b})"
    )]
    NothingInCommon { a: String, b: String },
    #[error("interrupted in the warm-up, before any pair was kept")]
    Interrupted,
    #[error("cannot make ab the subreaper of its trials (PR_SET_CHILD_SUBREAPER): {0}")]
    Subreaper(std::io::Error),
    #[error("--shared-cpu puts each side in a cgroup of equal CPU weight, and this host gives none: {0}; run a duet on two CPUs (--duet) or one side after the other (--cpus) instead")]
    SharedCpu(String),
    #[error("side {side} ({value}): --setup failed: {err}")]
    Setup {
        side: char,
        value: String,
        err: TrialError,
    },
}

/// Where a run is, for a progress line.
#[derive(Debug, Clone)]
pub struct Status {
    /// Pairs kept so far.
    pub kept: usize,
    /// Pairs redone so far.
    pub redone: usize,
    /// Pairs before the first verdict.
    pub min_pairs: usize,
    /// Headline metrics judged (0 before the first verdict).
    pub headlines: usize,
    /// Of those, decided (not inconclusive).
    pub decided: usize,
    /// Seconds since the first trial.
    pub elapsed_s: f64,
    /// Seconds left at most (the budget or max pairs, whichever is nearer).
    pub left_s: f64,
}

/// Receives progress.
pub trait Progress {
    /// After each pair.
    fn pair_done(&mut self, status: &Status);
}

impl Progress for () {
    fn pair_done(&mut self, _: &Status) {}
}

struct Runner<'a> {
    spec: &'a AbSpec,
    dir: TempDir,
    stop: &'a AtomicBool,
    trial_no: usize,
    /// What the sides' --setup commands left running (a server for every
    /// trial): held until the run ends, and not killed after each trial.
    setup_group: Option<TreeGroup>,
    keep: Vec<u32>,
}

impl Runner<'_> {
    fn launch(&mut self, side: usize, cpus: Option<CpuList>) -> Launch {
        self.trial_no += 1;
        let n = self.trial_no;
        let label = if side == 0 { 'a' } else { 'b' };
        Launch {
            argv: self.spec.sides[side].argv.clone(),
            mode: match &self.spec.exec {
                Some(e) => Mode::Exec(e.clone()),
                None => Mode::Records(self.dir.path().join(format!("{n:05}-{label}.jsonl"))),
            },
            cpus,
            weighted: matches!(self.spec.placement, Placement::Shared(_)),
        }
    }

    /// Each side's --setup, once, before anything else.
    fn setup(&mut self) -> Result<(), AbError> {
        let group = TreeGroup::create("ab");
        for (i, side) in self.spec.sides.iter().enumerate() {
            if let Some(argv) = &side.setup {
                run_aux(argv, &group, self.spec.trial_timeout, self.stop).map_err(|err| {
                    if err == TrialError::Interrupted {
                        return AbError::Interrupted;
                    }
                    AbError::Setup {
                        side: if i == 0 { 'A' } else { 'B' },
                        value: side.value.clone(),
                        err,
                    }
                })?;
            }
        }
        self.keep = commbench_core::proctree::children();
        self.setup_group = Some(group);
        Ok(())
    }

    /// Each side's --cleanup (errors said on stderr: the run's verdicts
    /// stand), then whatever the setups left running is ended.
    fn cleanup(&mut self) {
        let group = TreeGroup::create("ab");
        for side in &self.spec.sides {
            if let Some(argv) = &side.cleanup {
                let never = AtomicBool::new(false);
                if let Err(e) = run_aux(argv, &group, self.spec.trial_timeout, &never) {
                    eprintln!("ab: side {}: --cleanup: {e}", side.value);
                }
            }
        }
        drop(group);
        self.setup_group = None;
        self.keep.clear();
        commbench_core::proctree::kill_other_children(&[]);
    }

    /// A side's --prepare before one of its trials.
    fn prepare(&self, side: usize) -> Result<(), (usize, TrialError)> {
        if let Some(argv) = &self.spec.sides[side].prepare {
            let group = TreeGroup::create("ab");
            run_aux(argv, &group, self.spec.trial_timeout, self.stop).map_err(|e| (side, e))?;
        }
        Ok(())
    }

    /// Runs one pair; returns A's and B's trials, or which side (0: A,
    /// 1: B) failed and how.
    fn pair(&mut self, order: Order) -> Result<(Trial, Trial), (usize, TrialError)> {
        let first = if order == Order::AB { 0 } else { 1 };
        let (t_first, t_second) = match self.spec.placement.clone() {
            Placement::Sequential(cpus) => {
                let t1 = self.alone(first, cpus.clone())?;
                (t1, self.alone(1 - first, cpus)?)
            }
            Placement::Duet(cpus) => self.at_once(first, cpus)?,
            Placement::Shared(cpu) => self.at_once(first, [cpu, cpu])?,
        };
        Ok(if order == Order::AB {
            (t_first, t_second)
        } else {
            (t_second, t_first)
        })
    }

    /// One side's trial alone, on `cpus`.
    fn alone(&mut self, side: usize, cpus: Option<CpuList>) -> Result<Trial, (usize, TrialError)> {
        self.prepare(side)?;
        let l = [self.launch(side, cpus)];
        let [t] = run_together(&l, self.spec.trial_timeout, self.stop, &self.keep);
        l[0].mode.remove_file();
        t.map_err(|e| (side, e))
    }

    /// Both sides' trials at once behind the start barrier, `first` on
    /// `cpus[0]` and the other on `cpus[1]` (the same CPU for a shared
    /// duet); returns them as (first, second).
    fn at_once(
        &mut self,
        first: usize,
        [c0, c1]: [usize; 2],
    ) -> Result<(Trial, Trial), (usize, TrialError)> {
        self.prepare(first)?;
        self.prepare(1 - first)?;
        let l = [
            self.launch(first, Some(CpuList::from_cpus(vec![c0]))),
            self.launch(1 - first, Some(CpuList::from_cpus(vec![c1]))),
        ];
        let [t1, t2] = run_together(&l, self.spec.trial_timeout, self.stop, &self.keep);
        for x in &l {
            x.mode.remove_file();
        }
        Ok((t1.map_err(|e| (first, e))?, t2.map_err(|e| (1 - first, e))?))
    }
}

fn pair_log(order: Order, a: &Trial, b: &Trial) -> PairLog {
    PairLog {
        order,
        kept: true,
        redone_because: None,
        wall_s: [a.wall_s, b.wall_s],
        interference: [a.interference(), b.interference()],
        cpu_s: [a.tree.cpu_s(), b.tree.cpu_s()],
        user_s: [a.tree.user_s, b.tree.user_s],
        sys_s: [a.tree.sys_s, b.tree.sys_s],
        max_rss_kib: [a.tree.max_rss_kib, b.tree.max_rss_kib],
        involuntary_ctx: [a.usage.involuntary_ctx, b.usage.involuntary_ctx],
        migrations: [a.sched.migrations, b.sched.migrations],
        steal_s: [a.cpu.steal_s, b.cpu.steal_s],
        softirq_s: [a.cpu.softirq_s, b.cpu.softirq_s],
        overlap: match (&a.cpu_weight, &b.cpu_weight) {
            (Some(_), Some(_)) => a.wall_s.min(b.wall_s) / a.wall_s.max(b.wall_s).max(1e-12),
            _ => f64::NAN,
        },
        cpu_groups: match (&a.cpu_weight, &b.cpu_weight) {
            (Some(wa), Some(wb)) => {
                Some([(a.group.clone(), wa.clone()), (b.group.clone(), wb.clone())])
            }
            _ => None,
        },
    }
}

fn even(n: usize) -> usize {
    n.div_ceil(2) * 2
}

/// The parameters of the records A and B share and the ones they differ
/// in, per matched record.
type ParamsSplit = (
    Vec<(RecordKey, Map<String, Value>)>,
    Vec<(RecordKey, Vec<ParamDiff>)>,
);

fn params_split(a: &[Record], b: &[Record]) -> ParamsSplit {
    let (ka, kb) = (shape_of(a), shape_of(b));
    // An index, not a search per record: a trial of 40k records took 10 s
    // of ab's CPU here when B's place of each of A's records was searched.
    let where_b: std::collections::HashMap<&RecordKey, usize> =
        kb.iter().enumerate().map(|(j, k)| (k, j)).collect();
    let mut common = Vec::new();
    let mut varied = Vec::new();
    for (i, k) in ka.iter().enumerate() {
        let Some(&j) = where_b.get(k) else {
            continue;
        };
        let (pa, pb) = (&a[i].params, &b[j].params);
        let mut same = Map::new();
        let mut diff = Vec::new();
        for (name, va) in pa {
            match pb.get(name) {
                Some(vb) if vb == va => {
                    same.insert(name.clone(), va.clone());
                }
                Some(vb) => diff.push((name.clone(), va.clone(), vb.clone())),
                None => diff.push((name.clone(), va.clone(), Value::Null)),
            }
        }
        for (name, vb) in pb {
            if !pa.contains_key(name) {
                diff.push((name.clone(), Value::Null, vb.clone()));
            }
        }
        common.push((k.clone(), same));
        varied.push((k.clone(), diff));
    }
    (common, varied)
}

/// The warm-up pairs: both sides run (page cache, the binaries' first
/// start) and are not judged; a side that cannot run at all is an error
/// here, before any pair, and so are two sides without a metric in
/// common. Returns the last warm-up's records of A and B.
fn warm_up(runner: &mut Runner<'_>) -> Result<([Vec<Record>; 2], String), AbError> {
    let spec = runner.spec;
    let mut first_records: [Vec<Record>; 2] = [Vec::new(), Vec::new()];
    let mut containment = String::new();
    for _ in 0..spec.warmup_pairs.max(1) {
        let (a, b) = runner.pair(Order::AB).map_err(|(side, err)| {
            if err == TrialError::Interrupted {
                return AbError::Interrupted;
            }
            AbError::Warmup {
                side: if side == 0 { 'A' } else { 'B' },
                value: spec.sides[side].value.clone(),
                err,
            }
        })?;
        containment = a.containment.clone();
        first_records = [a.records, b.records];
    }
    let va = values_of(&first_records[0]);
    let vb = values_of(&first_records[1]);
    if !va.keys().any(|k| vb.contains_key(k)) {
        let names = |r: &[Record]| {
            shape_of(r)
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(AbError::NothingInCommon {
            a: names(&first_records[0]),
            b: names(&first_records[1]),
        });
    }
    Ok((first_records, containment))
}

/// Runs the comparison. `labs` gives metric directions and headlines;
/// `stop` is checked between and during trials (SIGINT).
pub fn run(
    spec: &AbSpec,
    labs: &[&dyn Lab],
    stop: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<AbReport, AbError> {
    // Whatever a trial detaches (setsid, a double fork) is reparented
    // here, not to init, to be killed and reaped with its trial.
    commbench_core::proctree::become_subreaper().map_err(AbError::Subreaper)?;
    // Refused before any trial: without the CPU controller the two sides
    // would share the CPU by their thread counts, not in halves.
    if let Placement::Shared(_) = spec.placement {
        TreeGroup::create_weighted("ab").map_err(AbError::SharedCpu)?;
    }
    let dir = TempDir::new("ab").map_err(AbError::TempDir)?;
    let mut runner = Runner {
        spec,
        dir,
        stop,
        trial_no: 0,
        setup_group: None,
        keep: Vec::new(),
    };
    let out = runner
        .setup()
        .and_then(|()| run_pairs(&mut runner, labs, progress));
    runner.cleanup();
    out
}

/// The warm-up and the pairs (between the setups and the cleanups).
fn run_pairs(
    runner: &mut Runner<'_>,
    labs: &[&dyn Lab],
    progress: &mut dyn Progress,
) -> Result<AbReport, AbError> {
    let (spec, stop) = (runner.spec, runner.stop);
    let headline_metrics = spec.headline_metrics();
    let decls = spec.decls();
    let t0 = Instant::now();
    let min_pairs = even(spec.min_pairs.max(2));
    let max_pairs = even(spec.max_pairs.max(min_pairs));
    let (first_records, containment) = warm_up(runner)?;
    let shapes = [shape_of(&first_records[0]), shape_of(&first_records[1])];
    let (common_params, varied_params) = params_split(&first_records[0], &first_records[1]);

    let mut next_look = min_pairs;
    let mut rng = Rng::new(spec.seed);
    let mut block: Vec<Order> = Vec::new();
    let mut pairs: Vec<PairLog> = Vec::new();
    let mut values: Vec<(Values, Values)> = Vec::new();
    let mut results: Vec<MetricResult> = Vec::new();
    let mut consecutive_failures = 0;
    let mut sched_available = true;
    // Every pair's interference gap so far, kept or redone.
    let mut gaps: Vec<f64> = Vec::new();
    let stop_reason = loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break Stop::Interrupted;
        }
        if block.is_empty() {
            block = vec![Order::AB, Order::BA];
            rng.shuffle(&mut block);
        }
        let order = block.pop().unwrap_or(Order::AB);
        let redos = pairs.iter().filter(|p| !p.kept).count();
        match runner.pair(order) {
            Err((_, TrialError::Interrupted)) => break Stop::Interrupted,
            Err((side, e)) => {
                let e = format!("side {}: {e}", if side == 0 { 'A' } else { 'B' });
                consecutive_failures += 1;
                pairs.push(PairLog {
                    order,
                    kept: false,
                    redone_because: Some(format!("failed: {e}")),
                    wall_s: [f64::NAN; 2],
                    interference: [f64::NAN; 2],
                    cpu_s: [f64::NAN; 2],
                    user_s: [f64::NAN; 2],
                    sys_s: [f64::NAN; 2],
                    max_rss_kib: [0; 2],
                    involuntary_ctx: [0; 2],
                    migrations: [0; 2],
                    steal_s: [f64::NAN; 2],
                    softirq_s: [f64::NAN; 2],
                    overlap: f64::NAN,
                    cpu_groups: None,
                });
                block.push(order);
                if consecutive_failures >= 3 || redos + 1 > max_pairs {
                    break Stop::Failed(e);
                }
                continue;
            }
            Ok((a, b)) => {
                consecutive_failures = 0;
                sched_available &= a.sched.threads > 0 && b.sched.threads > 0;
                let mut log = pair_log(order, &a, &b);
                let shape_ok =
                    shapes[0] == shape_of(&a.records) && shapes[1] == shape_of(&b.records);
                let gap = (log.interference[0] - log.interference[1]).abs();
                gaps.push(gap);
                let bound = contamination_bound(spec, &gaps);
                let why = if !shape_ok {
                    Some("failed: a side wrote other records than in its first trial".to_owned())
                } else if gap > bound && redos < max_pairs {
                    Some(format!(
                        "contaminated: A's trial waited for a CPU (or lost it to steal) {:.1}% of its runnable time and B's {:.1}%, {:.1} points apart > {:.1}",
                        100.0 * log.interference[0],
                        100.0 * log.interference[1],
                        100.0 * gap,
                        100.0 * bound
                    ))
                } else {
                    None
                };
                if let Some(w) = why {
                    log.kept = false;
                    log.redone_because = Some(w);
                    pairs.push(log);
                    block.push(order);
                    continue;
                }
                pairs.push(log);
                values.push((values_of(&a.records), values_of(&b.records)));
            }
        }
        let kept = values.len();
        let balanced = block.is_empty();
        // Interim looks: at geometrically spaced pair counts, with 99%
        // intervals (each look is a chance to stop on noise; at every
        // block with 95% an A/A run stopped on "slower 0.885×" at its
        // first look here).
        let look = balanced && kept >= next_look.min(max_pairs);
        if look {
            results = judge_all_at(
                &values,
                labs,
                &decls,
                &headline_metrics,
                Judging {
                    threshold: spec.threshold,
                    spread: spec.change_spread,
                    confidence: INTERIM_CONFIDENCE,
                },
            );
            next_look = even(((kept as f64) * LOOK_GROWTH).ceil() as usize).max(kept + 2);
        }
        let elapsed = t0.elapsed().as_secs_f64();
        let per_pair = elapsed / pairs.len().max(1) as f64;
        let headlines = results.iter().filter(|m| m.headline).count();
        let decided = headlines - results.iter().filter(|m| undecided(m)).count();
        let left_pairs = max_pairs.saturating_sub(kept) as f64;
        progress.pair_done(&Status {
            kept,
            redone: pairs.len() - kept,
            min_pairs,
            headlines,
            decided,
            elapsed_s: elapsed,
            left_s: (left_pairs * per_pair).min((spec.budget.as_secs_f64() - elapsed).max(0.0)),
        });
        if !balanced {
            continue;
        }
        // The budget holds before --min-pairs too: a run that cannot reach
        // them in time stops and says so rather than overrun.
        if elapsed + 2.0 * per_pair > spec.budget.as_secs_f64() {
            break Stop::Budget;
        }
        if kept < min_pairs {
            continue;
        }
        if look && !results.is_empty() && !results.iter().any(undecided) {
            break Stop::Decided;
        }
        if kept >= max_pairs {
            break Stop::MaxPairs;
        }
    };
    // The verdicts reported: whatever was kept, at 95% (an interrupted
    // run too). A run stopped by a 99% look keeps its verdicts: the 95%
    // interval lies inside the 99% one.
    let balanced = values.len() - values.len() % 2;
    results = judge_all(
        &values[..balanced],
        labs,
        &decls,
        &headline_metrics,
        spec.threshold,
        spec.change_spread,
    );
    Ok(AbReport {
        spec: spec.clone(),
        pairs,
        results,
        stop: stop_reason,
        elapsed_s: t0.elapsed().as_secs_f64(),
        common_params,
        varied_params,
        sched_available,
        containment: format!(
            "{}; ab is the trials' subreaper, and each trial dies with ab (PR_SET_PDEATHSIG)",
            containment
        ),
    })
}

/// Confidence of an interim look, the one that may stop a run early. Looks
/// come only at pair counts growing by [`LOOK_GROWTH`] (10, 14, 20, 28,
/// 40, 56, 80, 112, … — 14 up to 1,000 pairs, 5-9 in a 3-minute run
/// here), each at 99%, and the verdict reported is the 95% one: Pocock's
/// constant boundary for about ten looks at a 5% overall level is ~1% per
/// look. Before, every block of two pairs was a 95% look, and each was a
/// chance for a run to stop on noise.
pub const INTERIM_CONFIDENCE: f64 = 0.99;

/// Growth of the pair count between interim looks.
pub const LOOK_GROWTH: f64 = 1.4;

/// Default of `--contamination-scale`: a pair is redone only when the gap
/// between its two trials' interference is beyond `--contamination` and
/// beyond this many times the run's median gap. On a quiet host the median
/// gap is a fraction of a point and `--contamination` decides alone; on a
/// host loaded by others every trial waits for a CPU, and since the sides
/// alternate in a balanced, shuffled order that load falls on both alike:
/// the awk proof (docs/statistics.md §9) redid 70% of its pairs there
/// with the absolute bound alone and decided its 3% change in 2 of 10
/// runs, where keeping them all decided 9 of 10 with no A/A flagged. With
/// this scale 2-30% of the pairs were redone on such a host (an hour
/// later, when the host's own noise decided 3 of 10: §9). What stays
/// redone is the burst that hits one side far beyond the rest.
pub const CONTAMINATION_SCALE: f64 = 4.0;

/// Gaps seen before the run's median is trusted as its level.
const GAPS_FOR_SCALE: usize = 6;

/// The gap beyond which the pair just run (the last of `gaps`) is redone:
/// `contamination`, or beyond that `contamination_scale` times the median
/// of the gaps so far once there are [`GAPS_FOR_SCALE`] of them.
fn contamination_bound(spec: &AbSpec, gaps: &[f64]) -> f64 {
    let finite: Vec<f64> = gaps.iter().copied().filter(|g| g.is_finite()).collect();
    if spec.contamination_scale <= 0.0 || finite.len() < GAPS_FOR_SCALE {
        return spec.contamination;
    }
    let mut v = finite;
    let level = commbench_core::stats::median(&mut v);
    spec.contamination.max(spec.contamination_scale * level)
}

/// Substitutes `{name}` with `value` in every word of `template`.
pub fn substitute(template: &[String], name: &str, value: &str) -> Vec<String> {
    let pat = format!("{{{name}}}");
    template.iter().map(|w| w.replace(&pat, value)).collect()
}

#[cfg(test)]
mod tests;
