//! The between-run noise floor of a metric, learned from earlier runs of
//! the same test on the same host: two runs made minutes apart differ by
//! more than the repeats inside either run show, so `compare` widens every
//! interval by this floor before judging.
//!
//! Invariants: a floor is learned only from earlier records of the same
//! (lab, test, params) on one host, in start order, through
//! `core::estimate::floor_from_series` (consecutive runs of one build,
//! at least `MIN_FLOOR_RUNS` of them); without that history there is no
//! learned floor and the caller's default holds. Where the earlier records
//! come from (the results store) is the caller's: this module never opens
//! a store, so it is tested with records alone.

use crate::params_key;
use commbench_core::estimate::{floor_from_series, MIN_FLOOR_RUNS};
use commbench_core::record::Record;
use std::cell::RefCell;
use std::collections::HashMap;

/// An earlier record of a test: when its run started, the run's git SHA,
/// and the record.
#[derive(Debug, Clone)]
pub struct PastRecord {
    pub started_unix: i64,
    pub git_sha: String,
    pub record: Record,
}

/// The noise floor of `metric` for the records of `params` (a
/// [`params_key`]) among `past`, at `z` standard deviations, with the
/// number of runs it was learned from; None without enough history.
pub fn learn_floor(
    past: &[PastRecord],
    params: &str,
    metric: &str,
    z: f64,
) -> Option<(f64, usize)> {
    floor_of(
        past.iter().filter(|s| params_key(&s.record) == params),
        metric,
        z,
    )
}

/// [`learn_floor`] over records already of one params key.
fn floor_of<'p>(
    past: impl Iterator<Item = &'p PastRecord>,
    metric: &str,
    z: f64,
) -> Option<(f64, usize)> {
    let mut points: Vec<(i64, &str, f64)> = past
        .filter_map(|s| {
            Some((
                s.started_unix,
                s.git_sha.as_str(),
                s.record.metric_f64(metric)?,
            ))
        })
        .collect();
    points.sort_by_key(|p| p.0);
    let values: Vec<(String, f64)> = points.into_iter().map(|p| (p.1.to_owned(), p.2)).collect();
    let f = floor_from_series(&values, z)?;
    Some((f, values.len()))
}

/// A floor that was learned: of which metric (`lab/test metric`), how
/// wide (relative 95% half-width), from how many runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Learned {
    pub what: String,
    pub floor: f64,
    pub runs: usize,
}

/// The earlier records of a (lab, test) on the host being compared.
pub type PastLoader<'a> = dyn Fn(&str, &str) -> Vec<PastRecord> + 'a;

/// A test's earlier records by [`params_key`].
type ByParams = HashMap<String, Vec<PastRecord>>;

/// Learns floors one (lab, test) at a time through a loader, reading each
/// (lab, test) once, and keeps what it learned for [`FloorLearner::note`].
/// Its [`FloorLearner::floor`] is what `compare`'s `Options::noise_floor`
/// takes.
pub struct FloorLearner<'a> {
    load: Option<Box<PastLoader<'a>>>,
    z: f64,
    /// Each (lab, test)'s earlier records by params key, grouped once
    /// when loaded: a floor asked per series scanned (and keyed) every
    /// earlier record of the test each time, n² for n one-record series
    /// (`history` of a 10k-record run took 20 s, issue 50).
    series: RefCell<HashMap<(String, String), ByParams>>,
    learned: RefCell<Vec<Learned>>,
}

impl<'a> FloorLearner<'a> {
    /// A learner at `z` standard deviations (`core::estimate::familywise_z`
    /// over the metrics judged); without a loader it learns nothing.
    pub fn new(z: f64, load: Option<Box<PastLoader<'a>>>) -> Self {
        FloorLearner {
            load,
            z,
            series: RefCell::new(HashMap::new()),
            learned: RefCell::new(Vec::new()),
        }
    }

    /// The learned floor of `metric` for (lab, test, params), if any.
    pub fn floor(&self, lab: &str, test: &str, params: &str, metric: &str) -> Option<f64> {
        let load = self.load.as_ref()?;
        let mut cache = self.series.borrow_mut();
        let by_params = cache
            .entry((lab.to_owned(), test.to_owned()))
            .or_insert_with(|| {
                let mut m = ByParams::new();
                for p in load(lab, test) {
                    crate::work::step(1);
                    m.entry(params_key(&p.record)).or_default().push(p);
                }
                m
            });
        let mine = by_params.get(params)?;
        crate::work::step(mine.len());
        let (f, runs) = floor_of(mine.iter(), metric, self.z)?;
        self.learned.borrow_mut().push(Learned {
            what: format!("{lab}/{test} {metric}"),
            floor: f,
            runs,
        });
        Some(f)
    }

    /// Every floor learned so far, in the order asked.
    pub fn learned(&self) -> Vec<Learned> {
        self.learned.borrow().clone()
    }

    /// Where the floors came from, in a line: learned for how many metrics
    /// (their median, the family-wise level over `judged` metrics), else
    /// `default_pct` everywhere.
    pub fn note(&self, default_pct: f64, judged: usize) -> String {
        let l = self.learned.borrow();
        if l.is_empty() {
            return format!(
                "noise floor ±{default_pct}% (the results store holds fewer than {MIN_FLOOR_RUNS} runs of these tests on this host)"
            );
        }
        let mut f: Vec<f64> = l.iter().map(|x| x.floor).collect();
        format!(
            "noise floor learned from the results store for {} metric(s) (median ±{:.1}%, at the family-wise 95% level over {judged} metrics: z = {:.2}); elsewhere ±{default_pct}%",
            l.len(),
            commbench_core::stats::median(&mut f) * 100.0,
            self.z
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::rec;

    fn past(t: i64, sha: &str, sessions: u64, rate: f64) -> PastRecord {
        PastRecord {
            started_unix: t,
            git_sha: sha.into(),
            record: rec("reqres", sessions, rate),
        }
    }

    #[test]
    fn a_floor_needs_enough_runs_of_one_build_and_the_same_params() {
        let key = params_key(&rec("reqres", 1, 0.0));
        // Out of order on purpose: the floor reads them by start time.
        let mut v = vec![
            past(3, "a", 1, 1020.0),
            past(1, "a", 1, 1000.0),
            past(2, "a", 1, 990.0),
        ];
        assert_eq!(learn_floor(&v, &key, "msgs_per_s", 2.0), None, "3 runs");
        v.push(past(4, "a", 1, 1000.0));
        // Other params never count.
        v.push(past(5, "a", 2, 5000.0));
        let (f, runs) = learn_floor(&v, &key, "msgs_per_s", 0.5).unwrap();
        assert_eq!(runs, 4);
        // At a small z the widest swing between consecutive runs holds:
        // 990 → 1020.
        assert!((f - (1020.0f64 / 990.0 - 1.0)).abs() < 1e-9, "{f}");
        // Runs of different builds are not noise.
        let mixed: Vec<PastRecord> = ["a", "b", "c", "d"]
            .iter()
            .enumerate()
            .map(|(i, s)| past(i as i64, s, 1, 1000.0 + i as f64))
            .collect();
        assert_eq!(learn_floor(&mixed, &key, "msgs_per_s", 2.0), None);
    }

    /// Issue 50, item 5: `history` of one 10k-record run took 20 s: the
    /// learner keyed every earlier record of the test once per series.
    /// Doubling the one-record series must double the records the learner
    /// visits, not quadruple them (a count, not a time).
    #[test]
    fn floors_per_series_were_quadratic_in_one_record_series() {
        let series = |n: u64| -> Vec<PastRecord> {
            (0..n)
                .flat_map(|s| (0..4).map(move |i| past(i, "a", s, 1000.0 + i as f64)))
                .collect()
        };
        let n = 1_500u64;
        let keys = |n: u64| -> Vec<String> {
            (0..n).map(|s| params_key(&rec("reqres", s, 0.0))).collect()
        };
        let (small, large) = ((series(n), keys(n)), (series(2 * n), keys(2 * n)));
        let run = |(past, keys): &(Vec<PastRecord>, Vec<String>)| {
            let past = past.clone();
            let l = FloorLearner::new(2.0, Some(Box::new(move |_: &str, _: &str| past.clone())));
            let learned = keys
                .iter()
                .filter(|k| l.floor("ipc", "reqres", k, "msgs_per_s").is_some())
                .count();
            assert_eq!(learned, keys.len());
        };
        let ratio = crate::work::doubling_ratio(|double| run(if double { &large } else { &small }));
        assert!(
            ratio <= 2.05,
            "doubling the series took {ratio:.2}× the steps"
        );
    }

    #[test]
    fn the_learner_reads_each_test_once_and_says_where_floors_came_from() {
        let loads = std::cell::Cell::new(0);
        let load = |_: &str, test: &str| {
            loads.set(loads.get() + 1);
            if test == "reqres" {
                (0..4).map(|i| past(i, "a", 1, 1000.0 + i as f64)).collect()
            } else {
                Vec::new()
            }
        };
        let l = FloorLearner::new(2.0, Some(Box::new(load)));
        assert!(l
            .note(5.0, 3)
            .starts_with("noise floor ±5% (the results store holds fewer than 4 runs"));
        let key = params_key(&rec("reqres", 1, 0.0));
        assert!(l.floor("ipc", "reqres", &key, "msgs_per_s").is_some());
        assert!(l.floor("ipc", "reqres", &key, "cpu_ns_per_op").is_some());
        assert!(l.floor("ipc", "stream", &key, "msgs_per_s").is_none());
        assert_eq!(loads.get(), 2, "one read per (lab, test)");
        assert_eq!(l.learned().len(), 2);
        assert_eq!(l.learned()[0].what, "ipc/reqres msgs_per_s");
        let note = l.note(5.0, 3);
        assert!(
            note.starts_with(
                "noise floor learned from the results store for 2 metric(s) (median ±"
            ),
            "{note}"
        );
        assert!(
            note.ends_with("over 3 metrics: z = 2.00); elsewhere ±5%"),
            "{note}"
        );
        let none = FloorLearner::new(2.0, None);
        assert_eq!(none.floor("ipc", "reqres", &key, "msgs_per_s"), None);
    }
}
