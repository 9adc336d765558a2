//! `commbench pipeline rfc2544`: per frame size, the searches, the
//! latency ladder, the back-to-back test and the frame-loss ladder on one
//! device, into records and a table.

use super::{
    b2b_record, b2b_table, back_to_back, fold_repeats, ladder, latency_ladder, mlr_search, search,
    search_record, table, B2bResult, B2bSpec, Method, SearchResult, SearchSpec, MLR_BUDGET_S,
    MLR_MAX_TRIALS,
};
use crate::netns::interrupted;
use crate::tester::mlrsearch::{Goal, DEFAULT_GOALS};
use crate::tester::pace::Rate;
use crate::tester::pace::{self, Sizes};
use crate::tester::trial::Offer;
use crate::tester::trial::{bias_metrics, offer_bias};
use crate::tester::{Bench, SpecError};
use crate::PipelineError;
use commbench_core::estimate::Estimate;
use commbench_core::record::Record;
use commbench_core::record::Recorder;
use std::io;

/// `commbench pipeline rfc2544`: per frame size, the NDR (and PDR)
/// searches, the latency at and below the NDR, the back-to-back test and
/// the frame-loss ladder, on one device.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub offer: Offer,
    /// Frame sizes, one pass each.
    pub sizes: Vec<Sizes>,
    /// Highest rate tried.
    pub max_rate: Rate,
    pub resolution_pct: f64,
    /// Also search the PDR with this loss, %.
    pub pdr_loss_pct: Option<f64>,
    pub max_trials: usize,
    /// Frame-loss ladder steps (0: none).
    pub ladder: usize,
    /// Searches per frame size and kind.
    pub repeat: usize,
    /// Latency ladder steps below the NDR (0: at the NDR only).
    pub latency_ladder: usize,
    /// Back-to-back test up to this many frames (None: not run).
    pub back_to_back: Option<u64>,
    /// Back-to-back searches per frame size.
    pub b2b_repeat: usize,
    /// MLRsearch (the default) or RFC 2544's binary search.
    pub method: Method,
    /// MLRsearch's goals (empty: [`DEFAULT_GOALS`]).
    pub goals: Vec<Goal>,
}

impl RunSpec {
    /// The goals MLRsearch searches for.
    pub fn goals(&self) -> Vec<Goal> {
        if self.goals.is_empty() {
            DEFAULT_GOALS.to_vec()
        } else {
            self.goals.clone()
        }
    }

    /// Refuses settings of the other search.
    pub fn validate(&self) -> Result<(), SpecError> {
        match (self.method, self.pdr_loss_pct) {
            (Method::Rfc2544, _) if !self.goals.is_empty() => Err(SpecError::GoalsNeedMlr),
            (Method::Mlr, Some(p)) => Err(SpecError::PdrNeedsRfc2544(p)),
            _ => Ok(()),
        }
    }
}

/// What an RFC 2544 run found, for its table.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    /// Every search, by frame size.
    pub searches: Vec<(String, SearchResult)>,
    /// Every back-to-back test, by frame size.
    pub b2b: Vec<(String, B2bResult)>,
    /// Ctrl-C cut the run: its records are partial.
    pub interrupted: bool,
}

/// Runs `s` into `rec`: per frame size the trials of every search
/// (`rfc2544-trial`), each search (`rfc2544-ndr`/`-pdr`, folded into one
/// record when repeated), the latency ladder (`rfc2544-latency`), the
/// back-to-back test (`rfc2544-b2b`) and the loss ladder (`rfc2544-loss`);
/// the loopback bias last.
pub fn run(s: &RunSpec, rec: &mut Recorder) -> Result<RunReport, PipelineError> {
    s.validate()
        .map_err(|e| PipelineError::Config(e.to_string()))?;
    let conditions = commbench_core::rusage::Conditions::begin();
    let start = rec.records().len();
    let r = run_sizes(s, rec);
    s.offer.cpus.stamp(&conditions, rec, start);
    r
}

fn run_sizes(s: &RunSpec, rec: &mut Recorder) -> Result<RunReport, PipelineError> {
    let mut spec0 = s.offer.trial.clone();
    if let (Some(z), None) = (s.sizes.first(), &spec0.traffic) {
        spec0.sizes = z.clone();
    }
    let bias = offer_bias(
        &Offer {
            trial: spec0,
            ..s.offer.clone()
        },
        rec,
    )?;
    let mut rep = RunReport::default();
    {
        let mut b = Bench::new(&s.offer.dut, s.offer.cpus.clone())?;
        // A replayed capture is its own size mix: one pass.
        let sizes = match &s.offer.trial.traffic {
            Some(_) => std::slice::from_ref(&s.offer.trial.sizes),
            None => &s.sizes[..],
        };
        for sz in sizes {
            run_size(s, sz, &mut b, &bias, rec, &mut rep)?;
        }
    }
    if let Some(b) = bias {
        rec.push(b);
    }
    rep.interrupted = interrupted();
    Ok(rep)
}

/// One frame size of [`run`].
fn run_size(
    s: &RunSpec,
    sz: &Sizes,
    b: &mut Bench,
    bias: &Option<Record>,
    rec: &mut Recorder,
    rep: &mut RunReport,
) -> Result<(), PipelineError> {
    let dut = s.offer.dut.name();
    let mut trial = s.offer.trial.clone();
    trial.sizes = sz.clone();
    let ss = SearchSpec {
        max_pps: s.max_rate.pps(sz.mean()),
        trial,
        resolution_pct: s.resolution_pct,
        pdr_loss_pct: s.pdr_loss_pct,
        max_trials: s.max_trials,
        ladder_steps: s.ladder,
    };
    let groups = match s.method {
        Method::Rfc2544 => classic_runs(s, &ss, sz, b, rec)?,
        Method::Mlr => mlr_runs(s, &ss, sz, b, rec)?,
    };
    let mut ndr_pps = None;
    for mut reps in groups {
        for (r, x) in &mut reps {
            bias_metrics(x, bias);
            rep.searches.push((sz.name.clone(), r.clone()));
        }
        if ndr_pps.is_none() && reps.first().is_some_and(|(r, _)| r.kind == "ndr") {
            let rates: Vec<f64> = reps
                .iter()
                .map(|(r, _)| r.rate_pps)
                .filter(|x| x.is_finite())
                .collect();
            ndr_pps = (!rates.is_empty())
                .then(|| Estimate::from_samples(&rates).median)
                .filter(|x| *x > 0.0);
        }
        if s.repeat > 1 {
            if let Some(f) = fold_repeats(&reps) {
                rec.push(f);
            }
        } else {
            for (_, x) in reps {
                rec.push(x);
            }
        }
    }
    if let (Some(ndr), true) = (ndr_pps, s.latency_ladder > 0) {
        let l = latency_ladder(b, &ss, ndr, s.latency_ladder, |t| {
            rec.progress(&format!(
                "rfc2544 latency {} B: {:.0} pps → p99 {:.1} µs",
                sz.name,
                t.offered_pps,
                t.latency.p99 / 1e3
            ));
        })?;
        for (pct, t) in l {
            let mut x = t.record("rfc2544-latency");
            x.push_param("load_pct", pct);
            x.push_param("ndr_pps", ndr);
            bias_metrics(&mut x, bias);
            rec.push(x);
        }
    }
    if let Some(max_frames) = s.back_to_back {
        let bs = B2bSpec {
            trial: ss.trial.clone(),
            max_frames,
            repeats: s.b2b_repeat,
            resolution_pct: s.resolution_pct,
            max_trials: s.max_trials,
            throughput_pps: ndr_pps,
        };
        let r = back_to_back(b, &bs, |t| {
            rec.progress(&format!(
                "rfc2544 back-to-back {} B: burst of {} → lost {}",
                sz.name, t.sent, t.lost
            ));
        })?;
        rec.push(b2b_record(&r, &bs, &dut, &sz.name));
        rep.b2b.push((sz.name.clone(), r));
    }
    if s.ladder > 0 {
        let l = ladder(b, &ss, |t| {
            rec.progress(&format!(
                "rfc2544 frame loss {} B: {:.0} pps → {:.4}%",
                sz.name, t.offered_pps, t.loss_pct
            ));
        })?;
        for t in l {
            let mut x = t.record("rfc2544-loss");
            x.push_param("load_pct", t.offered_pps / ss.max_pps * 100.0);
            rec.push(x);
        }
    }
    Ok(())
}

/// RFC 2544's searches of one frame size: per kind (NDR, PDR) its
/// repeats, each with its record; the trials recorded as they go.
fn classic_runs(
    s: &RunSpec,
    ss: &SearchSpec,
    sz: &Sizes,
    b: &mut Bench,
    rec: &mut Recorder,
) -> io::Result<Vec<Vec<(SearchResult, Record)>>> {
    let dut = s.offer.dut.name();
    let mut kinds: Vec<(&str, f64)> = vec![("ndr", 0.0)];
    if let Some(p) = s.pdr_loss_pct {
        kinds.push(("pdr", p));
    }
    let mut groups = Vec::new();
    for (kind, loss) in kinds {
        let mut reps = Vec::new();
        for i in 0..s.repeat {
            if interrupted() {
                break;
            }
            let mut trials = Vec::new();
            let r = search(b, ss, kind, loss, 0.0, |t| {
                rec.progress(&format!(
                    "rfc2544 {kind} {} B: {:.0} pps → loss {:.4}%{}",
                    sz.name,
                    t.offered_pps,
                    t.loss_pct,
                    if t.behind_schedule {
                        " (generator behind)"
                    } else {
                        ""
                    }
                ));
                trials.push(t.record("rfc2544-trial"));
            })?;
            for mut x in trials {
                x.push_param("search", kind);
                x.push_param("repeat", i);
                rec.push(x);
            }
            let x = search_record(&r, ss, &dut, &sz.name);
            reps.push((r, x));
        }
        groups.push(reps);
    }
    Ok(groups)
}

/// MLRsearch of one frame size: `repeat` searches of every goal at once;
/// per goal its repeats, each with its record; every trial recorded with
/// `method: mlr`, whether it counted and its trouble.
fn mlr_runs(
    s: &RunSpec,
    ss: &SearchSpec,
    sz: &Sizes,
    b: &mut Bench,
    rec: &mut Recorder,
) -> io::Result<Vec<Vec<(SearchResult, Record)>>> {
    let dut = s.offer.dut.name();
    let goals = s.goals();
    let mut groups: Vec<Vec<(SearchResult, Record)>> = vec![Vec::new(); goals.len()];
    for i in 0..s.repeat {
        if interrupted() {
            break;
        }
        let mut trials = Vec::new();
        let (_, results) = mlr_search(
            b,
            &ss.trial,
            &goals,
            ss.max_pps,
            MLR_BUDGET_S,
            MLR_MAX_TRIALS,
            |t, trouble| {
                rec.progress(&format!(
                    "mlrsearch {} B: {:.0} pps for {:.2} s → loss {:.4}%{}",
                    sz.name,
                    t.offered_pps,
                    t.duration_s,
                    t.loss_pct,
                    trouble.map_or(String::new(), |w| format!(" (not counted: {w})"))
                ));
                let mut x = t.record("rfc2544-trial");
                x.push_metric("counted", trouble.is_none());
                x.push_metric("trouble", trouble);
                trials.push(x);
            },
        )?;
        for mut x in trials {
            x.push_param("method", "mlr");
            x.push_param("repeat", i);
            rec.push(x);
        }
        for (g, r) in groups.iter_mut().zip(results) {
            let x = search_record(&r, ss, &dut, &sz.name);
            g.push((r, x));
        }
    }
    Ok(groups)
}

/// The table of a run: the searches, then the back-to-back tests.
pub fn run_table(r: &RunReport) -> String {
    let mut t = table(&r.searches);
    if !r.b2b.is_empty() {
        t.push('\n');
        t.push_str(&b2b_table(&r.b2b));
    }
    t
}

/// The frame-size list of RFC 2544 for Ethernet.
pub const RFC2544_SIZES: [u32; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// Parses `64,128` or `rfc2544` (all seven) or `imix`.
pub fn parse_size_list(s: &str) -> Result<Vec<Sizes>, SpecError> {
    if s == "rfc2544" {
        return Ok(RFC2544_SIZES.iter().map(|&z| Sizes::fixed(z)).collect());
    }
    s.split(',')
        .filter(|x| !x.is_empty())
        .map(pace::parse_sizes)
        .collect()
}

/// The frame sizes of an RFC 2544 run: at least one.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeList(pub Vec<Sizes>);

impl SizeList {
    /// [`parse_size_list`], refusing an empty list.
    pub fn parse(s: &str) -> Result<SizeList, SpecError> {
        let v = parse_size_list(s)?;
        if v.is_empty() {
            return Err(SpecError::NoSizes);
        }
        Ok(SizeList(v))
    }
}
