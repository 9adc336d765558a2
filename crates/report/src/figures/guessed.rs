//! The plots a lab did not declare: a line guessed from the records'
//! shape (the first numeric parameter that varies, against the headline
//! metric) for a lab that declares no figure, and a percentile ladder of
//! every latency summary (p50 … p99.99) the records carry.
//!
//! Invariants: a series is named by the parameters that vary over the
//! lab's records, in first-seen order, with the test first when tests
//! differ; the parameters are gone through once, whatever a file holds;
//! only the first [`MAX_SERIES`] ladders are drawn and the others counted.

use super::frame::{axis_of, num, text_of};
use super::line::group_series;
use super::words::in_words;
use super::{Figure, Meta};
use crate::compare::headline_metric;
use crate::plot::{ladder_plot, line_plot, Axes, Series, MAX_SERIES};
use crate::ReportError;
use commbench_core::record::Record;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// What names a series among a lab's records: its parameters in
/// first-seen order, those whose value differs between records (with
/// their place in that order), and whether the test names differ.
pub(super) struct Naming {
    keys: Vec<String>,
    vary: HashMap<String, usize>,
    tests_differ: bool,
}

impl Naming {
    /// One pass over the records' parameters.
    pub(super) fn of(records: &[&Record]) -> Naming {
        let mut keys: Vec<String> = Vec::new();
        let mut pos: HashMap<&str, usize> = HashMap::new();
        let mut differs: HashSet<&str> = HashSet::new();
        let first = records.first();
        let mut tests_differ = false;
        for r in records {
            tests_differ |= Some(&r.test) != first.map(|f| &f.test);
            for (k, v) in &r.params {
                if !pos.contains_key(k.as_str()) {
                    pos.insert(k, keys.len());
                    keys.push(k.clone());
                }
                if first.and_then(|f| f.params.get(k)) != Some(v) {
                    differs.insert(k);
                }
            }
            if let Some(f) = first {
                // Keys of the first record that this one lacks.
                differs.extend(
                    f.params
                        .keys()
                        .filter(|k| !r.params.contains_key(*k))
                        .map(String::as_str),
                );
            }
        }
        let vary = differs
            .into_iter()
            .map(|k| (k.to_owned(), pos[k]))
            .collect();
        Naming {
            keys,
            vary,
            tests_differ,
        }
    }

    /// A record's series name in words from its varying parameters (in
    /// first-seen order), `skip` left out; the test first when tests
    /// differ.
    fn name(&self, r: &Record, skip: &str) -> String {
        let mut parts = Vec::new();
        if self.tests_differ {
            parts.push(r.test.clone());
        }
        let mut own: Vec<(usize, &String, &Value)> = r
            .params
            .iter()
            .filter(|(k, _)| *k != skip)
            .filter_map(|(k, v)| self.vary.get(k).map(|&p| (p, k, v)))
            .collect();
        own.sort_by_key(|(p, ..)| *p);
        for (_, k, v) in own {
            parts.push(in_words(k, &text_of(v)));
        }
        if parts.is_empty() {
            r.test.clone()
        } else {
            parts.join(", ")
        }
    }
}

/// The line guessed from the records' shape: the first numeric parameter
/// with two distinct values over the lab on x, the headline metric on y.
pub(super) fn guessed_line(
    lab: &str,
    records: &[&Record],
    naming: &Naming,
    meta: Meta,
) -> Result<Option<Figure>, ReportError> {
    // One pass: each key's first value, and whether another followed.
    let mut firsts: HashMap<&str, (f64, bool)> = HashMap::new();
    for r in records {
        for (k, v) in &r.params {
            if let Some(x) = num(v) {
                let e = firsts.entry(k).or_insert((x, false));
                e.1 |= e.0 != x;
            }
        }
    }
    let Some(x_key) = naming
        .keys
        .iter()
        .find(|k| firsts.get(k.as_str()).is_some_and(|e| e.1))
    else {
        return Ok(None);
    };
    let owned: Vec<Record> = records.iter().map(|r| (*r).clone()).collect();
    let Some(y_key) = headline_metric(&owned, &[]) else {
        return Ok(None);
    };
    let series = group_series(records.iter().filter_map(|r| {
        let x = r.params.get(x_key).and_then(num)?;
        let y = r.metric_f64(&y_key)?;
        Some((naming.name(r, x_key), x, y))
    }));
    if series.is_empty() {
        return Ok(None);
    }
    let title = format!("{lab}: {y_key} vs {x_key}");
    let test = records.first().map_or("", |r| r.test.as_str());
    let y_label = axis_of(meta, test, &y_key, "");
    let x_label = x_key.replace('_', " ");
    let plot = line_plot(
        &Axes {
            title: &title,
            x: &x_label,
            y: &y_label,
        },
        &series,
        &[],
        &[],
    )?;
    Ok(Some(Figure::plain(
        title,
        "Guessed from the records' shape (the lab declares no figure): the first numeric parameter that varies against the headline metric.".into(),
        plot,
    )))
}

/// Percentile ladders: every metric object with p50 … p99.99; the first
/// [`MAX_SERIES`] are drawn, the others counted.
pub(super) fn latency_ladders(
    lab: &str,
    records: &[&Record],
    naming: &Naming,
) -> Result<Option<Figure>, ReportError> {
    const QUANTILES: [(&str, f64); 5] = [
        ("p50", 0.5),
        ("p90", 0.9),
        ("p99", 0.99),
        ("p999", 0.999),
        ("p9999", 0.9999),
    ];
    let mut ladders: Vec<Series> = Vec::new();
    let mut more = 0;
    for r in records {
        for (k, v) in &r.metrics {
            let Some(o) = v.as_object() else { continue };
            let pts: Vec<(f64, f64)> = QUANTILES
                .iter()
                .filter_map(|(name, q)| o.get(*name).and_then(num).map(|v| (*q, v)))
                .collect();
            if pts.len() < 3 {
                continue;
            }
            if ladders.len() < MAX_SERIES {
                ladders.push(Series {
                    name: format!("{}: {}", naming.name(r, ""), k.replace('_', " ")),
                    points: pts,
                });
            } else {
                more += 1;
            }
        }
    }
    if ladders.is_empty() {
        return Ok(None);
    }
    let title = format!("{lab}: latency percentiles");
    let mut plot = ladder_plot(&title, "latency (ns)", &ladders)?;
    plot.left_out.series += more;
    Ok(Some(Figure::plain(
        title,
        "Every latency summary the records carry (p50 to p99.99 of one run's histogram; no interval), one line per record.".into(),
        plot,
    )))
}
