//! What `commbench history` makes of the runs kept in the results store:
//! per (lab, test, params, host) a metric over the runs with its trend
//! (first → last ratio and `compare`'s verdict), the change points of each
//! series (`core::changepoint`), and the series the trend page draws.
//!
//! Invariants: runs are numbered from 1 in start order, as the caller
//! lists them; a run's value is the median of its records' values; the
//! trend's verdict comes from the first and the last run's own records (by
//! the interval of the ratio when they carry repeats, "no samples" when
//! not, "changed" when no verdict could be formed), never from the worst
//! point. The store itself is the caller's: this module reads records.

use crate::verdicts::{compare_runs, Judge, Run};
use crate::{headline_metric, params_key, RunRow, Series, Trend};
use commbench_core::changepoint::{detect, Config, Point};
use commbench_core::estimate::Verdict;
use commbench_core::lab::{direction, Better, Lab, Quantity};
use commbench_core::record::Record;

/// A record of a stored run: the run's id and host, and the record.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub run_id: String,
    pub host: String,
    pub record: Record,
}

/// The records of one (lab, test, params, host) over the runs.
#[derive(Debug, Clone)]
pub struct Group<'a> {
    pub lab: String,
    pub test: String,
    pub params: String,
    pub host: String,
    /// (run index from 1, records of that run), in the order first seen;
    /// borrowed from the caller's records (copying each record into its
    /// group, and again per trend, was a fifth of `history`'s time).
    pub points: Vec<(usize, Vec<&'a Record>)>,
}

/// What `history` asks for.
#[derive(Debug, Clone, Copy)]
pub struct HistoryOptions<'a> {
    /// The metric to follow; None: each test's headline metric.
    pub metric: Option<&'a str>,
    /// Relative change of a trend below which it is noise (0.05).
    pub threshold: f64,
    /// Also list each series' change points.
    pub regressions: bool,
    /// Also mark change points on the drawn series.
    pub plot: bool,
    /// How the first run is judged against the last: `compare`'s floor
    /// and load gap ([`crate::verdicts::compare_runs`]).
    pub judge: &'a Judge<'a>,
}

/// Everything `history` reports: a `history trend` record per series, the
/// figures of the trend page, the change points and how many series were
/// searched for them.
#[derive(Debug, Default)]
pub struct History {
    pub trends: Vec<Record>,
    pub figures: Vec<Trend>,
    pub change_points: Vec<Record>,
    pub series_checked: usize,
}

/// The records grouped by (lab, test, params, host), each run's records
/// under its index (`run_index` of its run id).
///
/// Groups and each group's runs are indexed as they are made, so grouping
/// is linear in records (a search of every group per record took over
/// 300 s at 134,000 records).
pub fn groups<'a>(recs: &'a [RunRecord], run_index: &dyn Fn(&str) -> usize) -> Vec<Group<'a>> {
    use std::collections::HashMap;
    let mut out: Vec<Group> = Vec::new();
    let mut group_of: HashMap<(String, String, String, String), usize> = HashMap::new();
    // Per group: run index -> position in its points.
    let mut point_of: Vec<HashMap<usize, usize>> = Vec::new();
    for s in recs {
        crate::work::step(1);
        let r = &s.record;
        let key = params_key(r);
        let i = run_index(&s.run_id);
        let gk = (r.lab.clone(), r.test.clone(), key, s.host.clone());
        let p = match group_of.get(&gk) {
            Some(&p) => p,
            None => {
                let (lab, test, params, host) = gk.clone();
                out.push(Group {
                    lab,
                    test,
                    params,
                    host,
                    points: Vec::new(),
                });
                point_of.push(HashMap::new());
                group_of.insert(gk, out.len() - 1);
                out.len() - 1
            }
        };
        let g = &mut out[p];
        match point_of[p].get(&i) {
            Some(&k) => g.points[k].1.push(r),
            None => {
                point_of[p].insert(i, g.points.len());
                g.points.push((i, vec![r]));
            }
        }
    }
    out
}

/// The change points of one series (a group's runs in order) of
/// `metric`: each run's value with its interval when its record carries
/// repeats, through `core::changepoint::detect`; `runs` are the runs in
/// index order (index 1 first).
pub fn change_point_records(
    g: &Group,
    metric: &str,
    runs: &[RunRow],
    labs: &[&dyn Lab],
) -> Vec<Record> {
    let mut at: Vec<usize> = Vec::new();
    let mut points: Vec<Point> = Vec::new();
    for (i, v) in &g.points {
        let Some(r) = v.iter().find(|r| r.metric_f64(metric).is_some()) else {
            continue;
        };
        let p = if metric.contains('.') {
            r.metric_f64(metric).map(Point::from)
        } else {
            commbench_core::estimate::read(&r.metrics, metric).map(|e| Point::from(&e))
        };
        if let Some(p) = p {
            at.push(*i);
            points.push(p);
        }
    }
    let (better, quantity) = direction(labs, &g.lab, &g.test, metric);
    detect(&points, &Config::default())
        .into_iter()
        .filter_map(|cp| {
            let run_index = *at.get(cp.index)?;
            let run = runs.get(run_index.checked_sub(1)?)?;
            let up = cp.ratio > 1.0;
            let verdict = match better {
                Better::Unknown => Verdict::Changed,
                Better::Higher if up => Verdict::Improved,
                Better::Lower if !up => Verdict::Improved,
                _ => Verdict::Regressed,
            };
            Some(
                Record::new("history", "change_point")
                    .param("source", format!("{}/{}", g.lab, g.test))
                    .param("params", &g.params)
                    .param("host", &g.host)
                    .param("metric", metric)
                    .param("run", run_index)
                    .param("run_id", &run.run_id)
                    .param("git_sha", &run.git_sha)
                    .param("started_utc", &run.started_utc)
                    .metric("before_median", cp.before_median)
                    .metric("after_median", cp.after_median)
                    .metric("ratio", cp.ratio)
                    .metric("ratio_lo", cp.lo)
                    .metric("ratio_hi", cp.hi)
                    .metric("p_value", cp.p_value)
                    .metric("runs_before", cp.n_before)
                    .metric("runs_after", cp.n_after)
                    .metric("verdict", verdict.word(quantity == Quantity::Time)),
            )
        })
        .collect()
}

/// The first record carrying `metric` of the first and of the last run
/// of `g` that carry it, each with its run index.
/// A run index and (at most) one of its records.
type End<'a> = (usize, &'a [Record]);

fn ends<'a>(g: &Group<'a>, metric: &str) -> (End<'a>, End<'a>) {
    let carrying = |(i, v): &(usize, Vec<&'a Record>)| {
        v.iter()
            .find(|r| r.metric_f64(metric).is_some())
            .map(|r| (*i, std::slice::from_ref(*r)))
    };
    let first = g.points.iter().find_map(carrying).unwrap_or((0, &[]));
    let last = g.points.iter().rev().find_map(carrying).unwrap_or((0, &[]));
    (first, last)
}

/// The trend of one group: its `history trend` record and the drawn
/// series (with the change points as vertical marks when plotting), or
/// None when no run carries the metric.
fn trend(
    g: &Group,
    metric: &str,
    runs: &[RunRow],
    o: &HistoryOptions,
    labs: &[&dyn Lab],
) -> Option<(Record, Vec<Series>)> {
    let pts: Vec<(usize, f64)> = g
        .points
        .iter()
        .filter_map(|(i, v)| {
            let mut ys: Vec<f64> = v
                .iter()
                .filter_map(|r| r.metric_f64(metric))
                .filter(|y| y.is_finite())
                .collect();
            (!ys.is_empty()).then(|| (*i, commbench_core::stats::median(&mut ys)))
        })
        .collect();
    let (&(_, first), &(_, last)) = (pts.first()?, pts.last()?);
    // The verdict from the first and the last run's own records, judged
    // as `compare` judges them (the same function, floor and load gap,
    // with each run's environment): with their repeats' samples by the
    // interval of the ratio; without, "no samples".
    let ((fi, first_recs), (li, last_recs)) = ends(g, metric);
    let env = |i: usize| {
        i.checked_sub(1)
            .and_then(|k| runs.get(k))
            .map_or(&serde_json::Value::Null, |r| &r.environment)
    };
    let verdict = compare_runs(
        Run {
            records: first_recs,
            env: env(fi),
        },
        Run {
            records: last_recs,
            env: env(li),
        },
        o.judge,
        o.threshold,
        &[metric.to_owned()],
        &[],
        labs,
    )
    .into_iter()
    .next();
    let (verdict, lo, hi, note) = verdict.map_or(
        ("changed".to_owned(), f64::NAN, f64::NAN, String::new()),
        |c| (c.verdict, c.lo, c.hi, c.note),
    );
    let ratio = if first != 0.0 { last / first } else { f64::NAN };
    let rec = Record::new("history", "trend")
        .param("source", format!("{}/{}", g.lab, g.test))
        .param("params", &g.params)
        .param("host", &g.host)
        .param("metric", metric)
        .metric("runs", pts.len())
        .metric("first", first)
        .metric("last", last)
        .metric("ratio", ratio)
        .metric("ratio_lo", lo)
        .metric("ratio_hi", hi)
        .metric("change_pct", (ratio - 1.0) * 100.0)
        .metric("verdict", verdict)
        .metric("note", note);
    let mut series = vec![Series {
        name: g.host.clone(),
        points: pts.iter().map(|&(i, y)| (i as f64, y)).collect(),
    }];
    if o.plot {
        // Each change point as a vertical mark across the series' range,
        // named with its step and interval.
        let (ylo, yhi) = pts
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
                (lo.min(p.1), hi.max(p.1))
            });
        for cp in change_point_records(g, metric, runs, labs) {
            let (Some(run), Some(r), Some(lo), Some(hi)) = (
                cp.params.get("run").and_then(serde_json::Value::as_f64),
                cp.metric_f64("ratio"),
                cp.metric_f64("ratio_lo"),
                cp.metric_f64("ratio_hi"),
            ) else {
                continue;
            };
            series.push(Series {
                name: format!(
                    "{}: change point at run {run} ({})",
                    g.host,
                    commbench_core::estimate::ratio_text(r, lo, hi)
                ),
                points: vec![(run - 0.5, ylo), (run - 0.5, yhi)],
            });
        }
    }
    Some((rec, series))
}

/// The trends, figures and change points of `recs`, the records of
/// `runs` (in start order, index 1 first).
pub fn history(
    recs: &[RunRecord],
    runs: &[RunRow],
    o: &HistoryOptions,
    labs: &[&dyn Lab],
) -> History {
    // Run id -> index from 1, the first run of an id winning (as a search
    // from the start would); looked up once per record.
    let mut by_id: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(runs.len());
    for (p, r) in runs.iter().enumerate() {
        by_id.entry(r.run_id.as_str()).or_insert(p + 1);
    }
    let index = |id: &str| by_id.get(id).copied().unwrap_or(0);
    let mut h = History::default();
    // Figure by (title, metric), looked up once per group: a search of
    // every figure per group was quadratic in one-record series (46% of
    // the time in memcmp; 100,000 such series took 117 s, issue 50).
    let mut figure_of: std::collections::HashMap<(String, String), usize> =
        std::collections::HashMap::new();
    for g in groups(recs, &index) {
        crate::work::step(g.points.iter().map(|(_, v)| v.len()).sum());
        // The headline metric is read off the group's first record.
        let first = g.points.iter().flat_map(|(_, v)| v.iter()).next();
        let Some(metric) = o
            .metric
            .map(str::to_owned)
            .or_else(|| first.and_then(|r| headline_metric(std::slice::from_ref(*r), labs)))
        else {
            continue;
        };
        let Some((rec, series)) = trend(&g, &metric, runs, o, labs) else {
            continue;
        };
        h.trends.push(rec);
        if o.regressions {
            h.series_checked += 1;
            h.change_points
                .extend(change_point_records(&g, &metric, runs, labs));
        }
        let title = format!("{}/{} {}", g.lab, g.test, g.params);
        match figure_of.entry((title, metric)) {
            std::collections::hash_map::Entry::Occupied(e) => {
                h.figures[*e.get()].series.extend(series)
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                let (title, metric) = e.key().clone();
                e.insert(h.figures.len());
                h.figures.push(Trend {
                    title,
                    metric,
                    series,
                });
            }
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::rec;

    fn row(i: usize) -> RunRow {
        RunRow {
            index: i,
            run_id: format!("r{i}"),
            started_utc: format!("2026-11-0{i}T00:00:00Z"),
            host: "h".into(),
            git_sha: format!("sha{i}"),
            environment: serde_json::Value::Null,
        }
    }

    fn at(run: usize, host: &str, sessions: u64, rate: f64) -> RunRecord {
        RunRecord {
            run_id: format!("r{run}"),
            host: host.into(),
            record: rec("reqres", sessions, rate),
        }
    }

    #[test]
    fn history_of_many_records_was_quadratic() {
        // 100,000 records: 1,000 runs of 100 configurations on one host
        // (a search of every group per record took over 300 s at 134,000).
        // Counts only; no time is asserted.
        let recs: Vec<RunRecord> = (0..100_000usize)
            .map(|k| at(k / 100 + 1, "h", (k % 100) as u64, k as f64))
            .collect();
        let index = |id: &str| id[1..].parse::<usize>().unwrap();
        let g = groups(&recs, &index);
        assert_eq!(g.len(), 100);
        assert!(g.iter().all(|g| g.points.len() == 1_000));
        assert!(g.iter().all(|g| g
            .points
            .iter()
            .enumerate()
            .all(|(i, (k, v))| *k == i + 1 && v.len() == 1)));
        let runs: Vec<RunRow> = (1..=1000).map(row).collect();
        let h = history(
            &recs,
            &runs,
            &HistoryOptions {
                metric: Some("msgs_per_s"),
                threshold: 0.05,
                regressions: false,
                plot: false,
                judge: &crate::verdicts::PLAIN_JUDGE,
            },
            &[],
        );
        assert_eq!(h.trends.len(), 100);
    }

    /// Issue 50, item 5: `history` of one run whose every record is its
    /// own series took 20 s at 10k records (a search of every figure per
    /// series, and the floor learner's per-series scan). Doubling such
    /// records must about double the time (within 2.5×, best of five
    /// interleaved), not quadruple it.
    #[test]
    fn history_of_one_record_series_was_quadratic() {
        let runs: Vec<RunRow> = (1..=2).map(row).collect();
        let input = |n: u64| -> Vec<RunRecord> {
            (0..n)
                .flat_map(|s| [at(1, "h", s, 1000.0), at(2, "h", s, 1010.0)])
                .collect()
        };
        let (small, large) = (input(2_000), input(4_000));
        let o = HistoryOptions {
            metric: Some("msgs_per_s"),
            threshold: 0.05,
            regressions: false,
            plot: false,
            judge: &crate::verdicts::PLAIN_JUDGE,
        };
        assert_eq!(history(&small, &runs, &o, &[]).trends.len(), 2_000);
        let ratio = crate::work::doubling_ratio(|double| {
            let recs = if double { &large } else { &small };
            std::hint::black_box(history(recs, &runs, &o, &[]));
        });
        assert!(
            ratio <= 2.05,
            "doubling the series took {ratio:.2}× the steps"
        );
    }

    #[test]
    fn a_trend_per_params_and_host_with_its_first_and_last_run() {
        let runs: Vec<RunRow> = (1..=3).map(row).collect();
        let recs = vec![
            at(1, "h", 1, 100.0),
            at(1, "h", 1, 300.0),
            at(2, "h", 1, 150.0),
            at(3, "h", 1, 400.0),
            at(3, "g", 1, 50.0),
            at(2, "h", 2, 10.0),
        ];
        let o = HistoryOptions {
            metric: Some("msgs_per_s"),
            threshold: 0.05,
            regressions: true,
            plot: false,
            judge: &crate::verdicts::PLAIN_JUDGE,
        };
        let h = history(&recs, &runs, &o, &[]);
        assert_eq!(h.trends.len(), 3);
        let t = &h.trends[0];
        assert_eq!(t.metric_f64("runs"), Some(3.0));
        // Run 1's value is the median of its two records.
        assert_eq!(t.metric_f64("first"), Some(200.0));
        assert_eq!(t.metric_f64("last"), Some(400.0));
        assert_eq!(t.metric_f64("ratio"), Some(2.0));
        assert_eq!(t.metrics["verdict"], "no samples");
        assert_eq!(h.series_checked, 3);
        // The two hosts of one (lab, test, params) share a figure.
        assert_eq!(h.figures.len(), 2);
        assert_eq!(h.figures[0].series.len(), 2);
        assert_eq!(h.figures[0].series[1].name, "g");
        assert_eq!(
            h.figures[0].series[0].points,
            [(1.0, 200.0), (2.0, 150.0), (3.0, 400.0)]
        );
        let none = history(
            &recs,
            &runs,
            &HistoryOptions {
                metric: Some("no_such_metric"),
                ..o
            },
            &[],
        );
        assert!(none.trends.is_empty() && none.figures.is_empty());
    }

    #[test]
    fn a_step_in_a_series_is_a_change_point_at_the_run_where_it_began() {
        // Eight runs a side: fewer cannot reach the permutation test's 1%
        // level with segments of at least five.
        let runs: Vec<RunRow> = (1..=16).map(row).collect();
        let recs: Vec<RunRecord> = (1..=16)
            .map(|i| {
                at(
                    i,
                    "h",
                    1,
                    if i < 9 {
                        1000.0 + i as f64
                    } else {
                        2000.0 + i as f64
                    },
                )
            })
            .collect();
        let g = &groups(&recs, &|id: &str| id[1..].parse().unwrap())[0];
        let cps = change_point_records(g, "msgs_per_s", &runs, &[]);
        assert_eq!(cps.len(), 1, "{cps:?}");
        assert_eq!(cps[0].params["run"], 9);
        assert_eq!(cps[0].params["git_sha"], "sha9");
        assert!(cps[0].metric_f64("ratio").unwrap() > 1.9);
        let h = history(
            &recs,
            &runs,
            &HistoryOptions {
                metric: Some("msgs_per_s"),
                threshold: 0.05,
                regressions: false,
                plot: true,
                judge: &crate::verdicts::PLAIN_JUDGE,
            },
            &[],
        );
        assert!(h.change_points.is_empty(), "listed only with regressions");
        let marks = &h.figures[0].series;
        assert_eq!(marks.len(), 2);
        assert!(
            marks[1].name.starts_with("h: change point at run 9 ("),
            "{}",
            marks[1].name
        );
        assert_eq!(marks[1].points[0].0, 8.5);
    }
}
