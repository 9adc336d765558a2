//! The plots a lab did not declare: a line guessed from the records'
//! shape (the first numeric parameter that varies, against the headline
//! metric) for a lab that declares no figure, and a percentile ladder of
//! every latency summary (p50 … p99.99) the records carry.
//!
//! Invariants: a series is named by the parameters that vary over the
//! records it is drawn among, in first-seen order, with the test first
//! when tests differ (the others are said once, "All lines: conns 1000.");
//! the parameters are gone through once, whatever a file holds; more
//! series than a legend holds are drawn as panels on the same axes
//! (`panels`), a ladder figure's panels split by latency summary and by
//! what varies, so that no ladder is dropped; a ladder figure carries its
//! numbers (every percentile drawn).

use super::frame::{axis_of, num, text_of};
use super::line::group_series;
use super::panels::{Group, PanelOf, Planner, MAX_PANELS, PANEL_SENTENCE, PANEL_SERIES};
use super::words::{in_words, quantile_name};
use super::{DataCell, DataTable, Figure, Meta, RUN_PARAM};
use crate::compare::headline_metric;
use crate::plot::{ladder_plot, line_plot, Axes, Plot, Series, Span};
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

    /// The parameters that vary, in first-seen order.
    fn varying(&self) -> Vec<String> {
        let mut v: Vec<(&String, usize)> = self.vary.iter().map(|(k, p)| (k, *p)).collect();
        v.sort_by_key(|(_, p)| *p);
        v.into_iter().map(|(k, _)| k.clone()).collect()
    }

    /// The parameters every record shares, in words (`conns 1000`), from
    /// `first`, one of the records.
    fn fixed(&self, first: &Record) -> Vec<String> {
        self.keys
            .iter()
            .filter(|k| !self.vary.contains_key(*k))
            .filter_map(|k| {
                first
                    .params
                    .get(k)
                    .map(|v| format!("{} {}", k.replace('_', " "), text_of(v)))
            })
            .collect()
    }

    /// A record's series name in words from its varying parameters (in
    /// first-seen order), `skip` left out; the test first when tests
    /// differ; its run before a colon when runs are overlaid, as declared
    /// figures name it (`host 2026-11-26T10:00: poll`).
    fn name(&self, r: &Record, skip: &str) -> String {
        let mut parts = Vec::new();
        if self.tests_differ {
            parts.push(r.test.clone());
        }
        let mut own: Vec<(usize, &String, &Value)> = r
            .params
            .iter()
            .filter(|(k, _)| *k != skip && *k != RUN_PARAM)
            .filter_map(|(k, v)| self.vary.get(k).map(|&p| (p, k, v)))
            .collect();
        own.sort_by_key(|(p, ..)| *p);
        for (_, k, v) in own {
            parts.push(in_words(k, &text_of(v)));
        }
        let run = r
            .params
            .get(RUN_PARAM)
            .filter(|_| self.vary.contains_key(RUN_PARAM))
            .map(text_of);
        match (run, parts.is_empty()) {
            (Some(run), true) => run,
            (Some(run), false) => format!("{run}: {}", parts.join(", ")),
            (None, true) => r.test.clone(),
            (None, false) => parts.join(", "),
        }
    }
}

/// Draws `panels` of one figure on shared axes: `draw(panel, span)` once
/// to learn what each spans, then again within their union.
fn on_shared_axes<T>(
    panels: &[T],
    draw: impl Fn(&T, Span) -> Result<Plot, ReportError>,
) -> Result<Vec<Plot>, ReportError> {
    if panels.len() <= 1 {
        return panels.iter().map(|p| draw(p, Span::default())).collect();
    }
    let mut span = Span::default();
    for p in panels {
        span = span.union(draw(p, Span::default())?.extent);
    }
    panels.iter().map(|p| draw(p, span)).collect()
}

/// Where a panel is among `count`, with a label; None for a figure of one.
fn panel_of(label: String, index: usize, count: usize) -> Option<PanelOf> {
    (count > 1).then_some(PanelOf {
        label,
        index,
        count,
    })
}

/// The line guessed from the records' shape: the first numeric parameter
/// with two distinct values over the lab on x, the headline metric on y;
/// panels of at most [`PANEL_SERIES`] series in first-seen order.
pub(super) fn guessed_line(
    lab: &str,
    records: &[&Record],
    naming: &Naming,
    meta: Meta,
) -> Result<Vec<Figure>, ReportError> {
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
        return Ok(Vec::new());
    };
    let owned: Vec<Record> = records.iter().map(|r| (*r).clone()).collect();
    let Some(y_key) = headline_metric(&owned, &[]) else {
        return Ok(Vec::new());
    };
    let series = group_series(
        records.iter().filter_map(|r| {
            let x = r.params.get(x_key).and_then(num)?;
            let y = r.metric_f64(&y_key)?;
            Some((naming.name(r, x_key), x, y))
        }),
        2,
    );
    if series.is_empty() {
        return Ok(Vec::new());
    }
    let title = format!("{lab}: {y_key} vs {x_key}");
    let test = records.first().map_or("", |r| r.test.as_str());
    let y_label = axis_of(meta, test, &y_key, "");
    let x_label = x_key.replace('_', " ");
    let panels: Vec<&[Series]> = series.chunks(PANEL_SERIES).collect();
    let count = panels.len();
    let titles: Vec<String> = (0..count)
        .map(
            |i| match panel_of(format!("part {} of {count}", i + 1), i, count) {
                Some(p) => p.title(&title),
                None => title.clone(),
            },
        )
        .collect();
    let plots = on_shared_axes(&(0..count).collect::<Vec<_>>(), |&i, span| {
        let mut axes = Axes::new(&titles[i], &x_label, &y_label);
        axes.span = span;
        line_plot(&axes, panels[i], &[], &[])
    })?;
    Ok(plots
        .into_iter()
        .zip(titles)
        .map(|(plot, t)| {
            let mut caption = "Guessed from the records' shape (the lab declares no figure): the first numeric parameter that varies against the headline metric.".to_owned();
            if count > 1 {
                caption.push(' ');
                caption.push_str(PANEL_SENTENCE);
            }
            Figure::plain(t, caption, plot)
        })
        .collect())
}

/// The quantiles a latency summary is drawn at.
const QUANTILES: [(&str, f64); 5] = [
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p999", 0.999),
    ("p9999", 0.9999),
];

/// One latency summary of one record: its metric and its points.
struct Ladder<'a> {
    record: &'a Record,
    metric: String,
    points: Vec<(f64, f64)>,
}

/// The key a ladder figure's panels may split by the latency summary.
const SUMMARY: &str = "\u{1f}summary";

/// Percentile ladders: every metric object with p50 … p99.99, in panels
/// of at most [`PANEL_SERIES`] on the same axes, each named by what varies
/// among its own records, with its numbers.
pub(super) fn latency_ladders(lab: &str, records: &[&Record]) -> Result<Vec<Figure>, ReportError> {
    let mut ladders: Vec<Ladder> = Vec::new();
    for r in records {
        for (k, v) in &r.metrics {
            let Some(o) = v.as_object() else { continue };
            let pts: Vec<(f64, f64)> = QUANTILES
                .iter()
                .filter_map(|(name, q)| o.get(*name).and_then(num).map(|v| (*q, v)))
                .collect();
            if pts.len() >= 3 {
                ladders.push(Ladder {
                    record: r,
                    metric: k.replace('_', " "),
                    points: pts,
                });
            }
        }
    }
    if ladders.is_empty() {
        return Ok(Vec::new());
    }
    let title = format!("{lab}: latency percentiles");
    let groups = ladder_panels(&ladders);
    let count = groups.len();
    let panels: Vec<(String, Vec<Series>, DataTable, Vec<String>)> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let t = match panel_of(g.label.join(", "), i, count) {
                Some(p) => p.title(&title),
                None => title.clone(),
            };
            let (series, data, sentences) = ladder_series(&ladders, &g.members);
            (t, series, data, sentences)
        })
        .collect();
    let plots = on_shared_axes(&panels, |(t, series, ..), span| {
        ladder_plot(t, "latency (ns)", series, span.y)
    })?;
    Ok(panels
        .into_iter()
        .zip(plots)
        .map(|((t, _, data, mut sentences), plot)| {
            if count > 1 {
                sentences.push(PANEL_SENTENCE.to_owned());
            }
            let mut f = Figure::plain(
                t,
                "Every latency summary the records carry (p50 to p99.99 of one run's histogram; no interval), one line per record and summary.".into(),
                plot,
            );
            f.computed = sentences.join(" ");
            f.data = data;
            f
        })
        .collect())
}

/// The ladders' panels: by latency summary or by a parameter that varies,
/// whichever needs fewer, each within one legend.
fn ladder_panels(ladders: &[Ladder]) -> Vec<Group> {
    let recs: Vec<&Record> = ladders.iter().map(|l| l.record).collect();
    let naming = Naming::of(&recs);
    let unit = |i: usize| {
        format!(
            "{}\u{1f}{}",
            naming.name(ladders[i].record, ""),
            ladders[i].metric
        )
    };
    let value = |i: usize, key: &str| {
        if key == SUMMARY {
            return Some(ladders[i].metric.clone());
        }
        ladders[i]
            .record
            .params
            .get(key)
            .map(|v| format!("{} {}", key.replace('_', " "), text_of(v)))
    };
    // Overlaid runs stay together in a panel, where they can be compared.
    let mut keys = vec![SUMMARY.to_owned()];
    keys.extend(naming.varying().into_iter().filter(|k| k != RUN_PARAM));
    let mut groups = Planner {
        unit: &unit,
        value: &value,
        keys,
        limit: PANEL_SERIES,
    }
    .plan((0..ladders.len()).collect());
    if groups.len() > MAX_PANELS {
        let rest = groups.split_off(MAX_PANELS - 1);
        groups.push(Group {
            label: vec![format!("the other {} groups", rest.len())],
            members: rest.into_iter().flat_map(|g| g.members).collect(),
        });
    }
    groups
}

/// A panel's ladders named by what varies among them (the summary too
/// when there are several), its numbers, and the sentence of what they
/// share.
fn ladder_series(ladders: &[Ladder], members: &[usize]) -> (Vec<Series>, DataTable, Vec<String>) {
    let mine: Vec<&Ladder> = members.iter().map(|&i| &ladders[i]).collect();
    let recs: Vec<&Record> = mine.iter().map(|l| l.record).collect();
    let naming = Naming::of(&recs);
    let one_summary = mine.iter().all(|l| l.metric == mine[0].metric);
    let name = |l: &Ladder| {
        let own = naming.name(l.record, "");
        if one_summary {
            own
        } else {
            format!("{own}: {}", l.metric)
        }
    };
    let mut fixed = naming.fixed(recs[0]);
    if one_summary {
        fixed.insert(0, mine[0].metric.clone());
    }
    let mut columns = vec!["series".to_owned()];
    columns.extend(
        QUANTILES
            .iter()
            .map(|(_, q)| format!("{} (ns)", quantile_name(*q))),
    );
    let mut data = DataTable {
        fixed: fixed.join(", "),
        columns,
        rows: Vec::new(),
    };
    let series: Vec<Series> = mine
        .iter()
        .map(|l| Series {
            name: name(l),
            points: l.points.clone(),
        })
        .collect();
    for s in &series {
        let mut row = vec![DataCell::text(s.name.clone())];
        row.extend(QUANTILES.iter().map(|(_, q)| {
            s.points
                .iter()
                .find(|p| p.0 == *q)
                .map_or_else(|| DataCell::text(""), |p| DataCell::value(p.1, "ns"))
        }));
        data.rows.push(row);
    }
    let sentences = if fixed.is_empty() {
        Vec::new()
    } else {
        vec![format!("All lines: {}.", fixed.join(", "))]
    };
    (series, data, sentences)
}
