//! Which plots a lab's records get, and building them: the lab's declared
//! figures (line, grouped or stacked bars, percentile ladders from
//! [`FigureSpec`]), else a line plot guessed from the records' shape; then
//! a percentile ladder for every latency summary.
//!
//! Invariants: axes are labelled from the labs' declared metrics (label
//! and unit, [`commbench_core::lab::MetricSpec`]) and the figure's named x
//! axis; a series is named in words by the parameters that vary within
//! the figure (those that do not are said once in the caption); repeats
//! are drawn as their median, with the 95% interval a record carries as an
//! error bar or a band, and a caption that says when records carry none;
//! every number a caption quotes is computed from the values drawn, which
//! the figure also carries as its [`DataTable`]; a figure is drawn only
//! when its records fill it (a line series needs two points, a ladder
//! three quantiles); a lab that declares figures never gets a guessed
//! line; overlaid runs are told apart by [`RUN_PARAM`], which prefixes
//! their series names. Records are grouped in one pass through hash maps
//! (linear in the records, whatever a file holds), and what a figure
//! leaves out to stay drawable (values out of range, series, categories
//! and points past the bounds of [`crate::plot`]) is said in its caption.

use crate::compare::headline_metric;
use crate::plot::{
    self, ladder_plot, line_plot, Axes, Band, LegendItem, Plot, RefLine, Series, MAX_CATEGORIES,
    MAX_SERIES,
};
use crate::ReportError;
use commbench_core::figure::{FigureKind, FigureSpec};
use commbench_core::lab::{Lab, MetricSpec};
use commbench_core::record::Record;
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// One cell of a figure's numbers: the text shown and, for a value, the
/// number drawn.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DataCell {
    pub text: String,
    pub raw: Option<f64>,
}

impl DataCell {
    fn text(t: impl Into<String>) -> DataCell {
        DataCell {
            text: t.into(),
            raw: None,
        }
    }
    fn value(v: f64, unit: &str) -> DataCell {
        DataCell {
            text: value(v, unit),
            raw: Some(v),
        }
    }
}

/// The numbers a figure draws, as the page shows them under it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DataTable {
    /// The parameters every record drawn shares (`size 128, sessions 1`).
    pub fixed: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<DataCell>>,
}

/// A plot made from a group of records.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub title: String,
    pub svg: String,
    /// What the figure is and answers: the lab's fixed sentence.
    pub caption: String,
    /// What the data drawn say, computed from them: every number in it is
    /// in [`Figure::data`] (a value, a parameter, a count of runs), or a
    /// ratio of two of its values.
    pub computed: String,
    /// What the figure left out to stay drawable ("" when nothing).
    pub left_out: String,
    /// Set beside the plot, never over it.
    pub legend: Vec<LegendItem>,
    /// The axis labels as drawn.
    pub x_label: String,
    pub y_label: String,
    pub data: DataTable,
}

impl Figure {
    /// A figure with a caption and its plot's legend, without computed
    /// sentences or numbers (the history page).
    pub fn plain(title: String, caption: String, plot: Plot) -> Figure {
        Figure {
            title,
            caption,
            computed: String::new(),
            left_out: plot.left_out.note(),
            legend: plot.legend,
            svg: plot.svg,
            x_label: plot.x_desc,
            y_label: plot.y_desc,
            data: DataTable::default(),
        }
    }
}

/// How a metric is looked up: (test, key) to its declaration.
type Meta<'a> = &'a dyn Fn(&str, &str) -> Option<&'static MetricSpec>;

/// Time units a value may be moved between for reading.
const TIME_UNITS: [(&str, f64); 4] = [("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)];

/// Three significant digits (2.00, 8.90, 148, 0.283).
fn sig3(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (2 - mag).clamp(0, 6) as usize;
    format!("{x:.decimals$}")
}

/// A value with its unit as a reader reads it: times in the unit that
/// suits them (85.0 µs, not 85000 ns), other quantities with k/M/G
/// (2.00M msg/s). Captions and the numbers tables use this one format.
pub fn value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if let Some(&(_, scale)) = TIME_UNITS.iter().find(|(u, _)| *u == unit) {
        let ns = v * scale;
        let (u, s) = TIME_UNITS
            .iter()
            .rev()
            .find(|(_, s)| ns.abs() >= *s)
            .copied()
            .unwrap_or(TIME_UNITS[0]);
        return format!("{} {u}", sig3(ns / s));
    }
    let a = v.abs();
    let (x, suffix) = if a >= 1e12 {
        return format!("{v:.3e} {unit}").trim_end().to_owned();
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if unit == "×" {
        return format!("{}{suffix}×", sig3(x));
    }
    format!("{}{suffix} {unit}", sig3(x)).trim_end().to_owned()
}

/// A ratio as a caption prints it: 4.0×, 66×.
fn ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.1}×")
    }
}

/// A parameter value in words: text as it is, a number after the
/// parameter's name (`threads 2`).
fn in_words(key: &str, v: &str) -> String {
    if v.parse::<f64>().is_ok() || v == "true" || v == "false" || v == "null" {
        format!("{} {v}", key.replace('_', " "))
    } else {
        v.to_owned()
    }
}

/// "label (unit)" of a declared metric, else its key.
fn axis_of(meta: Meta, test: &str, key: &str, label: &str) -> String {
    match meta(test, key) {
        Some(m) => {
            let l = if label.is_empty() { m.label } else { label };
            format!("{l} ({})", m.unit)
        }
        None if label.is_empty() => key.to_owned(),
        None => label.to_owned(),
    }
}

fn unit_of(meta: Meta, test: &str, key: &str) -> &'static str {
    meta(test, key).map_or("", |m| m.unit)
}

/// A part's name in a stacked caption: its declared label up to the first
/// comma or parenthesis (`rx burst`, `user CPU`).
fn part_name(meta: Meta, test: &str, key: &str) -> String {
    meta(test, key).map_or_else(
        || key.to_owned(),
        |m| {
            m.label
                .split([',', '('])
                .next()
                .unwrap_or(m.label)
                .trim()
                .to_owned()
        },
    )
}

/// Draws the declared figures of a lab that its records can fill (at
/// least one series with two points), labelled from `labs`' metrics.
pub fn declared_figures(
    lab: &str,
    records: &[&Record],
    specs: &[FigureSpec],
    labs: &[&dyn Lab],
) -> Result<Vec<Figure>, ReportError> {
    let meta = |test: &str, key: &str| commbench_core::lab::spec_of(labs, lab, test, key);
    let mut figs = Vec::new();
    for spec in specs.iter().filter(|s| s.lab == lab) {
        let fig = match spec.kind {
            FigureKind::Line => line_figure(spec, records, &meta)?,
            FigureKind::Bar => bar_figure(spec, records, &[spec.y], false, &meta)?,
            FigureKind::Stacked(parts) => bar_figure(spec, records, parts, true, &meta)?,
            FigureKind::Ladder(qs) => ladder_figure(spec, records, qs, &meta)?,
        };
        figs.extend(fig);
    }
    Ok(figs)
}

/// The parameters among `keys` whose values differ between the records
/// (the ones worth naming a series by), and the others with their one
/// value ("size 128").
fn split_series<'a>(keys: &'a [&'a str], records: &[&Record]) -> (Vec<&'a str>, Vec<String>) {
    let mut vary = Vec::new();
    let mut fixed = Vec::new();
    for k in keys {
        let first = records.first().and_then(|r| r.params.get(*k));
        if records.iter().any(|r| r.params.get(*k) != first) {
            vary.push(*k);
        } else if let Some(v) = first {
            fixed.push(format!("{} {}", k.replace('_', " "), text_of(v)));
        }
    }
    (vary, fixed)
}

/// A series name with the run it came from when several runs are overlaid.
fn run_series(spec: &FigureSpec, keys: &[&str], r: &Record) -> String {
    let name = if keys.is_empty() {
        String::new()
    } else {
        spec.series_name_of(r, keys)
    };
    match (
        r.params.get(RUN_PARAM).and_then(Value::as_str),
        name.is_empty(),
    ) {
        (Some(run), false) => format!("{run}: {name}"),
        (Some(run), true) => run.to_owned(),
        (None, false) => name,
        (None, true) => r.test.clone(),
    }
}

/// The parameter the report adds to records when it overlays several runs.
pub const RUN_PARAM: &str = "run";

fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    commbench_core::stats::percentile_sorted(&v, 0.5)
}

fn text_of(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// The index of `key` in `order`, added at the end when new.
fn index_of(order: &mut Vec<String>, index: &mut HashMap<String, usize>, key: String) -> usize {
    if let Some(&i) = index.get(&key) {
        return i;
    }
    order.push(key.clone());
    index.insert(key, order.len() - 1);
    order.len() - 1
}

/// A record's 95% interval of a metric, when it carries one.
type Interval = Option<(f64, f64)>;

fn interval_of(r: &Record, m: &str) -> Interval {
    r.metric_f64(&format!("{m}_lo"))
        .zip(r.metric_f64(&format!("{m}_hi")))
}

/// The repeats behind a record's value of `m` (its `_n`), 1 without.
fn repeats_of(r: &Record, m: &str) -> usize {
    r.metric_f64(&format!("{m}_n"))
        .filter(|n| n.is_finite() && *n >= 1.0)
        .map_or(1, |n| n as usize)
}

/// The sentence about intervals: drawn (from how many repeats), or why
/// not.
fn interval_sentence(drawn: usize, total: usize, repeats: (usize, usize), what: &str) -> String {
    let runs = if repeats.0 == repeats.1 {
        format!("{} runs", repeats.0)
    } else {
        format!("{}–{} runs", repeats.0, repeats.1)
    };
    if drawn == 0 {
        format!(
            "No {}: these records carry no repeats (one run each), so no interval.",
            what.to_lowercase()
        )
    } else if drawn < total {
        format!("{what}: the 95% interval of the median over {runs}, where the records carry repeats; the others are one run each.")
    } else {
        format!("{what}: the 95% interval of the median over {runs}.")
    }
}

/// A category or x value in words: a number after the axis name, with
/// the axis unit after it (`threads 2`, `requested delay 100 ns`); text as
/// it is (`shm`).
fn x_words(x_label: &str, v: &str) -> String {
    if v.parse::<f64>().is_err() && !v.ends_with(['k', 'M', 'G']) {
        return v.to_owned();
    }
    match x_label.rsplit_once(" (") {
        Some((name, unit)) => format!("{name} {v} {}", unit.trim_end_matches(')')),
        None => format!("{x_label} {v}"),
    }
}

/// The caption's sentence for one series of bars or a stacked figure's
/// totals: each category's value, then the highest over the lowest.
fn values_sentence(entries: &[(String, f64, String)]) -> String {
    const SHOWN: usize = 8;
    let mut parts: Vec<String> = entries
        .iter()
        .take(SHOWN)
        .map(|(c, _, v)| format!("{c}: {v}"))
        .collect();
    if entries.len() > SHOWN {
        parts.push(format!("{} more below", entries.len() - SHOWN));
    }
    let mut s = parts.join(", ");
    let pos: Vec<&(String, f64, String)> = entries.iter().filter(|e| e.1 > 0.0).collect();
    if pos.len() >= 2 {
        let hi = pos.iter().max_by(|a, b| a.1.total_cmp(&b.1)).expect("two");
        let lo = pos.iter().min_by(|a, b| a.1.total_cmp(&b.1)).expect("two");
        if hi.1 > lo.1 {
            s.push_str(&format!("; {} / {} = {}", hi.0, lo.0, ratio(hi.1 / lo.1)));
        }
    }
    s
}

/// Grouped bars: categories are the values of `spec.x`, one bar per
/// series (y = `metrics[0]`), the median over repeats with the interval
/// its one record carries; stacked bars: one per category and series,
/// with `metrics` as the parts.
fn bar_figure(
    spec: &FigureSpec,
    records: &[&Record],
    metrics: &[&str],
    stacked: bool,
    meta: Meta,
) -> Result<Option<Figure>, ReportError> {
    let mine: Vec<&Record> = records
        .iter()
        .copied()
        .filter(|r| spec.accepts(r))
        .collect();
    let (vary, fixed) = split_series(spec.series, &mine);
    let (mut cats, mut cat_ix) = (Vec::new(), HashMap::new());
    let (mut names, mut name_ix) = (Vec::new(), HashMap::new());
    // (category, series name, metric) -> samples, for the drawn ones only.
    let mut samples: HashMap<(usize, usize, usize), Vec<f64>> = HashMap::new();
    // The same key -> the 95% interval each contributing record carries
    // (its repeats'), when it carries one, and how many repeats.
    let mut intervals: HashMap<(usize, usize, usize), Vec<(Interval, usize)>> = HashMap::new();
    let overlaid = mine.iter().any(|r| r.params.contains_key(RUN_PARAM));
    for r in &mine {
        let Some(x) = r.params.get(spec.x) else {
            continue;
        };
        let (cat_name, series) = if stacked {
            let c = if vary.is_empty() && !overlaid {
                text_of(x)
            } else {
                format!("{} {}", text_of(x), run_series(spec, &vary, r))
            };
            (c, None)
        } else {
            (text_of(x), Some(run_series(spec, &vary, r)))
        };
        for (mi, m) in metrics.iter().enumerate() {
            let Some(y) = r.metric_f64(m).filter(|y| y.is_finite()) else {
                continue;
            };
            let ci = index_of(&mut cats, &mut cat_ix, cat_name.clone());
            let sname = series
                .clone()
                .unwrap_or_else(|| part_name(meta, &r.test, m));
            let si = index_of(&mut names, &mut name_ix, sname);
            if ci < MAX_CATEGORIES && si < MAX_SERIES {
                samples.entry((ci, si, mi)).or_default().push(y);
                intervals
                    .entry((ci, si, mi))
                    .or_default()
                    .push((interval_of(r, m), repeats_of(r, m)));
            }
        }
    }
    if cats.is_empty() || names.is_empty() {
        return Ok(None);
    }
    let (all_cats, all_names) = (cats.len(), names.len());
    cats.truncate(MAX_CATEGORIES);
    names.truncate(MAX_SERIES);
    let cell = |ci: usize, si: usize| {
        (0..metrics.len()).find_map(|mi| samples.get(&(ci, si, mi)).map(|v| (mi, v)))
    };
    let series: Vec<(String, Vec<Option<f64>>)> = names
        .iter()
        .enumerate()
        .map(|(si, n)| {
            let vals = (0..cats.len())
                .map(|ci| cell(ci, si).map(|(_, v)| median_of(v.clone())))
                .collect();
            (n.clone(), vals)
        })
        .collect();
    // A bar drawn from one record with an interval gets an error bar; a
    // bar that is the median of several records (overlaid runs) does not.
    let one = |ci: usize, si: usize| {
        (0..metrics.len())
            .find_map(|mi| intervals.get(&(ci, si, mi)))
            .and_then(|v| match v.as_slice() {
                [one] => Some(*one),
                _ => None,
            })
    };
    // Records behind a bar (overlaid runs: one each).
    let samples_at = |ci: usize, si: usize| cell(ci, si).map_or(0, |(_, v)| v.len());
    let bars: Vec<Vec<Option<(f64, f64)>>> = (0..names.len())
        .map(|si| {
            (0..cats.len())
                .map(|ci| one(ci, si).and_then(|(iv, _)| iv))
                .collect()
        })
        .collect();
    let test = mine.first().map_or(spec.test, |r| r.test.as_str());
    let unit = unit_of(meta, test, metrics[0]);
    let y_label = axis_of(meta, test, metrics[0], spec.y_label);
    let x_label = if spec.x_label.is_empty() {
        spec.x.replace('_', " ")
    } else {
        spec.x_label.to_owned()
    };
    let refs: Vec<RefLine> = spec
        .reference
        .map(|f| f(&mine))
        .unwrap_or_default()
        .into_iter()
        .map(|r| RefLine {
            label: r.label,
            y: r.y,
        })
        .collect();
    let axes = Axes {
        title: spec.title,
        x: &x_label,
        y: &y_label,
    };
    let mut plot = plot::bar_plot(
        &axes,
        &cats,
        &series,
        stacked,
        if stacked { &[] } else { &bars },
        &refs,
    )?;
    plot.left_out.categories += all_cats - cats.len();
    plot.left_out.series += all_names - names.len();
    // The caption, from the values drawn.
    let cat_word = |c: &str| x_words(&x_label, c);
    let mut sentences = Vec::new();
    if !fixed.is_empty() {
        sentences.push(format!("All bars: {}.", fixed.join(", ")));
    }
    let mut data = DataTable {
        fixed: fixed.join(", "),
        ..DataTable::default()
    };
    if stacked {
        data.columns = vec![x_label.clone(), "part".into(), y_label.clone()];
        let mut entries = Vec::new();
        let mut parts_text = Vec::new();
        for (ci, c) in cats.iter().enumerate() {
            let mut total = 0.0;
            let mut parts = Vec::new();
            for (si, (n, vals)) in series.iter().enumerate() {
                let _ = si;
                if let Some(v) = vals.get(ci).copied().flatten() {
                    total += v.max(0.0);
                    parts.push(format!("{n} {}", value(v, unit)));
                    data.rows.push(vec![
                        DataCell::text(c.clone()),
                        DataCell::text(n.clone()),
                        DataCell::value(v, unit),
                    ]);
                }
            }
            data.rows.push(vec![
                DataCell::text(c.clone()),
                DataCell::text("total"),
                DataCell::value(total, unit),
            ]);
            entries.push((cat_word(c), total, value(total, unit)));
            parts_text.push(parts.join(" + "));
        }
        let mut s = String::new();
        for (i, (c, _, v)) in entries.iter().enumerate().take(8) {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&format!("{c}: {v} ({})", parts_text[i]));
        }
        let ratio_part = values_sentence(&entries);
        if let Some((_, r)) = ratio_part.rsplit_once("; ") {
            s.push_str(&format!("; {r}"));
        }
        sentences.push(format!("{s}."));
        let with = mine
            .iter()
            .filter(|r| metrics.iter().any(|m| interval_of(r, m).is_some()))
            .count();
        sentences.push(if with == 0 {
            "One run each: these records carry no repeats, so no interval.".to_owned()
        } else {
            "Each part is the median over the repeated runs; the stacked parts carry no error bars (their intervals are in the table below).".to_owned()
        });
    } else {
        data.columns = vec![
            x_label.clone(),
            "series".into(),
            y_label.clone(),
            "95% interval".into(),
            "runs".into(),
        ];
        let shown = series.len().min(4);
        for (si, (n, vals)) in series.iter().enumerate() {
            let mut entries = Vec::new();
            for (ci, c) in cats.iter().enumerate() {
                let Some(v) = vals.get(ci).copied().flatten() else {
                    continue;
                };
                let iv = bars[si][ci];
                let runs = one(ci, si).map_or_else(
                    || format!("{} records", samples_at(ci, si)),
                    |(_, n)| n.to_string(),
                );
                data.rows.push(vec![
                    DataCell::text(c.clone()),
                    DataCell::text(n.clone()),
                    DataCell::value(v, unit),
                    iv.map_or_else(
                        || DataCell::text(""),
                        |(lo, hi)| {
                            DataCell::text(format!("{} – {}", value(lo, unit), value(hi, unit)))
                        },
                    ),
                    DataCell::text(runs),
                ]);
                entries.push((cat_word(c), v, value(v, unit)));
            }
            if si < shown && !entries.is_empty() {
                let body = values_sentence(&entries);
                sentences.push(if series.len() == 1 {
                    format!("{body}.")
                } else {
                    format!("{n} — {body}.")
                });
            }
        }
        if series.len() > shown {
            sentences.push(format!(
                "{} more series in the numbers below.",
                series.len() - shown
            ));
        }
        let total: usize = bars.iter().flatten().filter(|_| true).count();
        let drawn = bars.iter().flatten().filter(|b| b.is_some()).count();
        let reps: Vec<usize> = (0..names.len())
            .flat_map(|si| (0..cats.len()).map(move |ci| (ci, si)))
            .filter_map(|(ci, si)| one(ci, si).filter(|(iv, _)| iv.is_some()).map(|(_, n)| n))
            .collect();
        let span = (
            reps.iter().copied().min().unwrap_or(1),
            reps.iter().copied().max().unwrap_or(1),
        );
        sentences.push(interval_sentence(drawn, total, span, "Error bars"));
    }
    push_refs(&mut sentences, &mut data, &refs, unit);
    Ok(Some(finish(spec, plot, sentences, data)))
}

/// The reference lines as a sentence and as rows of the numbers.
fn push_refs(sentences: &mut Vec<String>, data: &mut DataTable, refs: &[RefLine], unit: &str) {
    if refs.is_empty() {
        return;
    }
    let list: Vec<String> = refs
        .iter()
        .map(|r| format!("{} {}", r.label, value(r.y, unit)))
        .collect();
    sentences.push(format!("Dashed lines: {}.", list.join(", ")));
    for r in refs {
        let mut row = vec![
            DataCell::text("reference"),
            DataCell::text(r.label.clone()),
            DataCell::value(r.y, unit),
        ];
        row.resize(data.columns.len().max(3), DataCell::text(""));
        data.rows.push(row);
    }
}

fn finish(spec: &FigureSpec, plot: Plot, sentences: Vec<String>, data: DataTable) -> Figure {
    Figure {
        title: spec.title.to_owned(),
        caption: spec.caption.to_owned(),
        computed: sentences.join(" "),
        left_out: plot.left_out.note(),
        legend: plot.legend,
        svg: plot.svg,
        x_label: plot.x_desc,
        y_label: plot.y_desc,
        data,
    }
}

/// One percentile ladder per series (the median of each quantile over
/// repeats).
fn ladder_figure(
    spec: &FigureSpec,
    records: &[&Record],
    qs: &[(f64, &str)],
    meta: Meta,
) -> Result<Option<Figure>, ReportError> {
    let mine: Vec<&Record> = records
        .iter()
        .copied()
        .filter(|r| spec.accepts(r))
        .collect();
    let (vary, fixed) = split_series(spec.series, &mine);
    let mut by_series: Vec<(String, Vec<Vec<f64>>)> = Vec::new();
    let mut ix: HashMap<String, usize> = HashMap::new();
    for r in &mine {
        let name = run_series(spec, &vary, r);
        let i = match ix.get(&name) {
            Some(&i) => i,
            None => {
                ix.insert(name.clone(), by_series.len());
                by_series.push((name, vec![Vec::new(); qs.len()]));
                by_series.len() - 1
            }
        };
        for (k, (_, m)) in qs.iter().enumerate() {
            if let Some(v) = r.metric_f64(m).filter(|v| v.is_finite() && *v > 0.0) {
                by_series[i].1[k].push(v);
            }
        }
    }
    let series: Vec<Series> = by_series
        .into_iter()
        .map(|(name, cols)| Series {
            name,
            points: qs
                .iter()
                .zip(cols)
                .filter(|(_, v)| !v.is_empty())
                .map(|((q, _), v)| (*q, median_of(v)))
                .collect(),
        })
        .filter(|s| s.points.len() >= 3)
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    let test = mine.first().map_or(spec.test, |r| r.test.as_str());
    let first = qs.first().map_or("", |q| q.1);
    let unit = unit_of(meta, test, first);
    let y_label = format!(
        "{} ({})",
        if spec.y_label.is_empty() {
            "latency"
        } else {
            spec.y_label
        },
        if unit.is_empty() { "ns" } else { unit }
    );
    let unit = if unit.is_empty() { "ns" } else { unit };
    let plot = ladder_plot(spec.title, &y_label, &series)?;
    let mut data = DataTable {
        fixed: fixed.join(", "),
        columns: vec!["series".into(), "percentile".into(), y_label.clone()],
        rows: Vec::new(),
    };
    let mut sentences = Vec::new();
    if !fixed.is_empty() {
        sentences.push(format!("All lines: {}.", fixed.join(", ")));
    }
    for (i, s) in series.iter().enumerate() {
        for &(q, v) in &s.points {
            data.rows.push(vec![
                DataCell::text(s.name.clone()),
                DataCell::text(quantile_name(q)),
                DataCell::value(v, unit),
            ]);
        }
        if i < 4 {
            let (q0, v0) = s.points[0];
            let (q1, v1) = s.points[s.points.len() - 1];
            sentences.push(format!(
                "{}: {} {} → {} {} ({}).",
                s.name,
                quantile_name(q0),
                value(v0, unit),
                quantile_name(q1),
                value(v1, unit),
                ratio(v1 / v0)
            ));
        }
    }
    if series.len() > 4 {
        sentences.push(format!(
            "{} more series in the numbers below.",
            series.len() - 4
        ));
    }
    sentences.push("Percentiles of one run's histogram each: no interval.".into());
    Ok(Some(finish(spec, plot, sentences, data)))
}

/// 0.999 as `p99.9`.
fn quantile_name(q: f64) -> String {
    let t = format!("{:.2}", q * 100.0);
    format!("p{}", t.trim_end_matches('0').trim_end_matches('.'))
}

fn line_figure(
    spec: &FigureSpec,
    records: &[&Record],
    meta: Meta,
) -> Result<Option<Figure>, ReportError> {
    let mine: Vec<&Record> = records
        .iter()
        .copied()
        .filter(|r| spec.accepts(r))
        .collect();
    let (vary, fixed) = split_series(spec.series, &mine);
    // (series, x) -> y samples (repeats, several runs): the median is
    // drawn, with the interval of its one record when it carries one.
    // (series, x, values, (interval, repeats) of each record).
    type Point = (String, f64, Vec<f64>, Vec<(Interval, usize)>);
    let mut samples: Vec<Point> = Vec::new();
    let mut ix: HashMap<(String, u64), usize> = HashMap::new();
    for r in &mine {
        let (Some(x), Some(y)) = (r.params.get(spec.x).and_then(num), r.metric_f64(spec.y)) else {
            continue;
        };
        let name = run_series(spec, &vary, r);
        // -0.0 and 0.0 are one x.
        let key = (name, (x + 0.0).to_bits());
        let iv = (interval_of(r, spec.y), repeats_of(r, spec.y));
        match ix.get(&key) {
            Some(&i) => {
                samples[i].2.push(y);
                samples[i].3.push(iv);
            }
            None => {
                ix.insert(key.clone(), samples.len());
                samples.push((key.0, x, vec![y], vec![iv]));
            }
        }
    }
    let mut ivs: HashMap<(String, u64), (Interval, usize)> = HashMap::new();
    for (n, x, _, iv) in &samples {
        if let [one] = iv.as_slice() {
            ivs.insert((n.clone(), x.to_bits()), *one);
        }
    }
    let series = group_series(
        samples
            .into_iter()
            .map(|(n, x, ys, _)| (n, x, median_of(ys))),
    );
    if series.is_empty() {
        return Ok(None);
    }
    // A band only where every point of the series has an interval.
    let mut reps = Vec::new();
    let bands: Vec<Band> = series
        .iter()
        .map(|s| {
            let b: Vec<(f64, f64, f64)> = s
                .points
                .iter()
                .filter_map(|&(x, _)| {
                    let (iv, n) = ivs.get(&(s.name.clone(), x.to_bits()))?;
                    let (lo, hi) = (*iv)?;
                    reps.push(*n);
                    Some((x, lo, hi))
                })
                .collect();
            if b.len() == s.points.len() {
                b
            } else {
                Vec::new()
            }
        })
        .collect();
    let test = mine.first().map_or(spec.test, |r| r.test.as_str());
    let unit = unit_of(meta, test, spec.y);
    let y_label = axis_of(meta, test, spec.y, spec.y_label);
    let x_label = if spec.x_label.is_empty() {
        spec.x.replace('_', " ")
    } else {
        spec.x_label.to_owned()
    };
    let refs: Vec<RefLine> = spec
        .reference
        .map(|f| f(&mine))
        .unwrap_or_default()
        .into_iter()
        .map(|r| RefLine {
            label: r.label,
            y: r.y,
        })
        .collect();
    let axes = Axes {
        title: spec.title,
        x: &x_label,
        y: &y_label,
    };
    let plot = line_plot(&axes, &series, &bands, &refs)?;
    let mut data = DataTable {
        fixed: fixed.join(", "),
        columns: vec![
            "series".into(),
            x_label.clone(),
            y_label.clone(),
            "95% interval".into(),
            "runs".into(),
        ],
        rows: Vec::new(),
    };
    let mut sentences = Vec::new();
    if !fixed.is_empty() {
        sentences.push(format!("All lines: {}.", fixed.join(", ")));
    }
    let xw = |x: f64| x_words(&x_label, &crate::plot::si(&x));
    for (i, s) in series.iter().enumerate() {
        for &(x, y) in &s.points {
            let one = ivs.get(&(s.name.clone(), x.to_bits()));
            let iv = one.and_then(|(iv, _)| *iv);
            let runs = one.map_or_else(|| "several records".to_owned(), |(_, n)| n.to_string());
            data.rows.push(vec![
                DataCell::text(s.name.clone()),
                DataCell {
                    text: crate::plot::si(&x),
                    raw: Some(x),
                },
                DataCell::value(y, unit),
                iv.map_or_else(
                    || DataCell::text(""),
                    |(lo, hi)| DataCell::text(format!("{} – {}", value(lo, unit), value(hi, unit))),
                ),
                DataCell::text(runs),
            ]);
        }
        if i < 4 {
            let (x0, y0) = s.points[0];
            let (x1, y1) = s.points[s.points.len() - 1];
            let r = if y0 > 0.0 && y1 > 0.0 {
                format!(" ({})", ratio(y1 / y0))
            } else {
                String::new()
            };
            sentences.push(format!(
                "{}: {} at {} → {} at {}{r}.",
                s.name,
                value(y0, unit),
                xw(x0),
                value(y1, unit),
                xw(x1)
            ));
        }
    }
    if series.len() > 4 {
        sentences.push(format!(
            "{} more series in the numbers below.",
            series.len() - 4
        ));
    }
    let total: usize = series.iter().map(|s| s.points.len()).sum();
    let drawn: usize = bands.iter().map(Vec::len).sum();
    let span = (
        reps.iter().copied().min().unwrap_or(1),
        reps.iter().copied().max().unwrap_or(1),
    );
    sentences.push(interval_sentence(drawn, total, span, "Bands"));
    push_refs(&mut sentences, &mut data, &refs, unit);
    Ok(Some(finish(spec, plot, sentences, data)))
}

/// (series name, x, y) points as series in first-seen order, each sorted
/// by x; series of fewer than two points are dropped.
fn group_series(points: impl Iterator<Item = (String, f64, f64)>) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    let mut ix: HashMap<String, usize> = HashMap::new();
    for (name, x, y) in points {
        match ix.get(&name) {
            Some(&i) => series[i].points.push((x, y)),
            None => {
                ix.insert(name.clone(), series.len());
                series.push(Series {
                    name,
                    points: vec![(x, y)],
                });
            }
        }
    }
    series.retain(|s| s.points.len() >= 2);
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// Parameter names in first-seen order; those whose value differs
/// between records (the ones worth naming a series by), each with its
/// place in that order; and whether the test names differ. One pass over
/// the records' parameters.
fn varying(records: &[&Record]) -> (Vec<String>, HashMap<String, usize>, bool) {
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
    (keys, vary, tests_differ)
}

/// A record's series name in words from its varying parameters (in
/// first-seen order), `skip` left out; the test first when tests differ.
fn series_name(
    r: &Record,
    vary: &HashMap<String, usize>,
    tests_differ: bool,
    skip: &str,
) -> String {
    let mut parts = Vec::new();
    if tests_differ {
        parts.push(r.test.clone());
    }
    let mut own: Vec<(usize, &String, &Value)> = r
        .params
        .iter()
        .filter(|(k, _)| *k != skip)
        .filter_map(|(k, v)| vary.get(k).map(|&p| (p, k, v)))
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

/// Plots of one lab's records: the lab's declared figures, or, when it
/// declares none that its records fill, a line plot guessed from the
/// records; then the latency percentile ladders.
pub fn figures_for_lab(
    lab: &str,
    records: &[&Record],
    specs: &[FigureSpec],
    labs: &[&dyn Lab],
) -> Result<Vec<Figure>, ReportError> {
    let meta = |test: &str, key: &str| commbench_core::lab::spec_of(labs, lab, test, key);
    let mut figs = declared_figures(lab, records, specs, labs)?;
    // A lab that declares figures gets those only: no line guessed
    // through its categories.
    let declared = !figs.is_empty() || specs.iter().any(|s| s.lab == lab);
    let (keys, vary, tests_differ) = varying(records);
    // x axis: the first numeric parameter with ≥ 2 distinct values over the
    // lab (one pass: each key's first value, and whether another followed).
    let mut firsts: HashMap<&str, (f64, bool)> = HashMap::new();
    for r in records {
        for (k, v) in &r.params {
            if let Some(x) = num(v) {
                let e = firsts.entry(k).or_insert((x, false));
                e.1 |= e.0 != x;
            }
        }
    }
    let x_key = keys
        .iter()
        .find(|k| firsts.get(k.as_str()).is_some_and(|e| e.1));
    let y_key = if declared || x_key.is_none() {
        None
    } else {
        let owned: Vec<Record> = records.iter().map(|r| (*r).clone()).collect();
        headline_metric(&owned, &[])
    };
    if let (Some(x_key), Some(y_key)) = (x_key, y_key) {
        let series = group_series(records.iter().filter_map(|r| {
            let x = r.params.get(x_key).and_then(num)?;
            let y = r.metric_f64(&y_key)?;
            Some((series_name(r, &vary, tests_differ, x_key), x, y))
        }));
        if !series.is_empty() {
            let title = format!("{lab}: {y_key} vs {x_key}");
            let test = records.first().map_or("", |r| r.test.as_str());
            let y_label = axis_of(&meta, test, &y_key, "");
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
            figs.push(Figure::plain(
                title,
                "Guessed from the records' shape (the lab declares no figure): the first numeric parameter that varies against the headline metric.".into(),
                plot,
            ));
        }
    }
    // Percentile ladders: every metric object with p50 … max; the first
    // MAX_SERIES are drawn, the others counted.
    let mut ladders: Vec<Series> = Vec::new();
    let mut more = 0;
    for r in records {
        for (k, v) in &r.metrics {
            let Some(o) = v.as_object() else { continue };
            let qs = [
                ("p50", 0.5),
                ("p90", 0.9),
                ("p99", 0.99),
                ("p999", 0.999),
                ("p9999", 0.9999),
            ];
            let pts: Vec<(f64, f64)> = qs
                .iter()
                .filter_map(|(name, q)| o.get(*name).and_then(num).map(|v| (*q, v)))
                .collect();
            if pts.len() >= 3 {
                if ladders.len() < MAX_SERIES {
                    ladders.push(Series {
                        name: format!(
                            "{}: {}",
                            series_name(r, &vary, tests_differ, ""),
                            k.replace('_', " ")
                        ),
                        points: pts,
                    });
                } else {
                    more += 1;
                }
            }
        }
    }
    if !ladders.is_empty() {
        let title = format!("{lab}: latency percentiles");
        let mut plot = ladder_plot(&title, "latency (ns)", &ladders)?;
        plot.left_out.series += more;
        figs.push(Figure::plain(
            title,
            "Every latency summary the records carry (p50 to p99.99 of one run's histogram; no interval), one line per record.".into(),
            plot,
        ));
    }
    Ok(figs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::rec;

    #[test]
    fn declared_figures_replace_the_guessed_plot() {
        let spec = FigureSpec {
            kind: FigureKind::Line,
            lab: "ipc",
            test: "reqres",
            title: "declared: rate over sessions",
            caption: "what it answers",
            x: "sessions",
            y: "msgs_per_s",
            series: &["transport"],
            filter: Some(|r| r.params.get("sessions").and_then(|v| v.as_u64()) != Some(99)),
            x_label: "",
            y_label: "",
            reference: None,
        };
        let recs: Vec<Record> = (1..=4)
            .map(|s| rec("reqres", s, 1000.0 * s as f64))
            .collect();
        let refs: Vec<&Record> = recs.iter().collect();
        let figs = figures_for_lab("ipc", &refs, &[spec], &[]).unwrap();
        assert_eq!(figs[0].title, "declared: rate over sessions");
        assert_eq!(figs[0].caption, "what it answers");
        assert!(!figs.iter().any(|f| f.title.contains("vs sessions")));
        // A lab that declares figures gets no guessed line, even when its
        // records fill none of them; a lab that declares none does.
        let other = FigureSpec {
            x: "nothing",
            ..spec
        };
        let figs = figures_for_lab("ipc", &refs, &[other], &[]).unwrap();
        assert!(!figs.iter().any(|f| f.title.contains("vs sessions")));
        let figs = figures_for_lab("ipc", &refs, &[], &[]).unwrap();
        assert!(figs.iter().any(|f| f.title.contains("vs sessions")));
    }

    #[test]
    fn bars_of_repeated_runs_carry_error_bars_and_say_so() {
        let bar = FigureSpec {
            kind: FigureKind::Bar,
            lab: "ipc",
            test: "reqres",
            title: "bars",
            caption: "Rates.",
            x: "transport",
            y: "msgs_per_s",
            series: &[],
            filter: None,
            x_label: "",
            y_label: "",
            reference: None,
        };
        let with = |t: &str, v: f64, iv: Option<(f64, f64)>| {
            let mut r = Record::new("ipc", "reqres")
                .param("transport", t)
                .metric("msgs_per_s", v);
            if let Some((lo, hi)) = iv {
                r.push_metric("msgs_per_s_lo", lo);
                r.push_metric("msgs_per_s_hi", hi);
            }
            r
        };
        let recs = [
            with("shm", 100.0, Some((90.0, 120.0))),
            with("uds", 50.0, Some((45.0, 52.0))),
        ];
        let refs: Vec<&Record> = recs.iter().collect();
        let figs = declared_figures("ipc", &refs, &[bar], &[]).unwrap();
        assert!(
            figs[0].computed.contains("Error bars"),
            "{}",
            figs[0].computed
        );
        // Three strokes (whisker and two caps) per bar.
        let paths = |svg: &str| svg.matches("<polyline").count() + svg.matches("<path").count();
        let plain = [with("shm", 100.0, None), with("uds", 50.0, None)];
        let refs2: Vec<&Record> = plain.iter().collect();
        let figs2 = declared_figures("ipc", &refs2, &[bar], &[]).unwrap();
        assert!(
            figs2[0].computed.contains("No error bars"),
            "{}",
            figs2[0].computed
        );
        assert_eq!(
            paths(&figs[0].svg),
            paths(&figs2[0].svg) + 6,
            "one whisker and two caps per bar"
        );
    }

    #[test]
    fn categorical_x_draws_bars_and_stacked_parts_add_up() {
        let bar = FigureSpec {
            kind: FigureKind::Bar,
            lab: "ipc",
            test: "reqres",
            title: "bars",
            caption: "",
            x: "transport",
            y: "msgs_per_s",
            series: &[],
            filter: None,
            x_label: "",
            y_label: "",
            reference: None,
        };
        let recs: Vec<Record> = ["shm", "uds", "shm"]
            .iter()
            .zip([100.0, 50.0, 300.0])
            .map(|(t, v)| {
                Record::new("ipc", "reqres")
                    .param("transport", *t)
                    .metric("msgs_per_s", v)
                    .metric("cpu_a", 1.0)
                    .metric("cpu_b", 2.0)
            })
            .collect();
        let refs: Vec<&Record> = recs.iter().collect();
        let figs = declared_figures("ipc", &refs, &[bar], &[]).unwrap();
        assert_eq!(figs.len(), 1);
        // Two categories, two bars, no line through them; labels drawn.
        let svg = &figs[0].svg;
        let texts: Vec<String> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| {
                t.split_once('>')
                    .map(|(_, rest)| rest.split('<').next().unwrap_or("").trim().to_owned())
            })
            .collect();
        assert!(
            texts.iter().any(|t| t == "shm") && texts.iter().any(|t| t == "uds"),
            "{texts:?}"
        );
        assert!(svg.matches("<rect").count() >= 3, "{svg}");
        let stacked = FigureSpec {
            kind: FigureKind::Stacked(&["cpu_a", "cpu_b"]),
            ..bar
        };
        let figs = declared_figures("ipc", &refs, &[stacked], &[]).unwrap();
        // Parts are named in the legend and the caption, each with its value.
        let names: Vec<&str> = figs[0].legend.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["cpu_a", "cpu_b"]);
        assert!(
            figs[0]
                .computed
                .contains("shm: 3.00 (cpu_a 1.00 + cpu_b 2.00)"),
            "{}",
            figs[0].computed
        );
    }

    fn spec(
        kind: FigureKind,
        lab: &'static str,
        test: &'static str,
        x: &'static str,
    ) -> FigureSpec {
        FigureSpec {
            kind,
            lab,
            test,
            title: "t",
            caption: "What the figure is.",
            x,
            y: "",
            series: &[],
            filter: None,
            x_label: "",
            y_label: "",
            reference: None,
        }
    }

    /// The pcap CPU figure's fixed caption said "nearly the same cold and
    /// warm" over bars of 0.28 s and 0.07 s; the caption now says what the
    /// bars are.
    #[test]
    fn pcap_cpu_caption_says_the_cold_and_warm_cpu_drawn_instead_of_nearly_the_same() {
        let lab = crate::testutil::TestLab(Vec::new());
        let s = FigureSpec {
            y_label: "CPU time",
            series: &["tool"],
            ..spec(
                FigureKind::Stacked(&["user_s_median", "sys_s_median"]),
                "pcap",
                "bench",
                "cache",
            )
        };
        let r = |cache: &str, u: f64, sy: f64| {
            Record::new("pcap", "bench")
                .param("cache", cache)
                .param("tool", "commbench")
                .metric("user_s_median", u)
                .metric("sys_s_median", sy)
        };
        let recs = [r("cold", 0.2, 0.08), r("warm", 0.05, 0.02)];
        let refs: Vec<&Record> = recs.iter().collect();
        let figs = declared_figures("pcap", &refs, &[s], &[&lab]).unwrap();
        let c = &figs[0].computed;
        assert!(
            c.contains("cold: 280 ms (user CPU 200 ms + system CPU 80.0 ms)"),
            "{c}"
        );
        assert!(c.contains("cold / warm = 4.0×"), "{c}");
        assert!(c.contains("All bars: tool commbench."), "{c}");
        assert!(c.contains("no repeats"), "{c}");
        assert_eq!(figs[0].y_label, "CPU time (s)");
        assert_eq!(figs[0].x_label, "cache");
        // The numbers drawn are under the figure: the parts and the totals.
        let texts: Vec<&str> = figs[0]
            .data
            .rows
            .iter()
            .flat_map(|row| row.iter().map(|c| c.text.as_str()))
            .collect();
        assert!(
            texts.contains(&"280 ms") && texts.contains(&"70.0 ms"),
            "{texts:?}"
        );
    }

    /// Pipeline's run-to-completion bar (8.9 ticks) was a sliver beside
    /// pipeline mode's 148 on a linear axis: past 10× the axis is
    /// logarithmic and says so.
    #[test]
    fn bars_spanning_more_than_10x_go_on_a_log_axis_that_says_so() {
        let lab = crate::testutil::TestLab(Vec::new());
        let s = FigureSpec {
            y: "ticks_total",
            ..spec(FigureKind::Bar, "pipeline", "run", "mode")
        };
        let r = |mode: &str, t: f64| {
            Record::new("pipeline", "run")
                .param("mode", mode)
                .metric("ticks_total", t)
        };
        let recs = [r("rtc", 8.9), r("pipeline", 148.0)];
        let refs: Vec<&Record> = recs.iter().collect();
        let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
        assert_eq!(f.y_label, "TSC ticks per packet (ticks) — log scale");
        assert!(f.svg.contains("TSC ticks per packet (ticks) — log scale"));
        assert!(
            f.computed.contains("pipeline / rtc = 17×"),
            "{}",
            f.computed
        );
        let recs = [r("rtc", 20.0), r("pipeline", 148.0)];
        let refs: Vec<&Record> = recs.iter().collect();
        let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
        assert_eq!(f.y_label, "TSC ticks per packet (ticks)");
    }

    /// Reference lines a figure declares are drawn, named beside the plot
    /// and in the caption, with their values among the numbers drawn.
    #[test]
    fn reference_lines_are_drawn_named_and_listed() {
        let lab = crate::testutil::TestLab(Vec::new());
        fn budget(_: &[&Record]) -> Vec<commbench_core::figure::Reference> {
            vec![commbench_core::figure::Reference {
                label: "10 GbE".into(),
                y: 174.0,
            }]
        }
        let s = FigureSpec {
            y: "ticks_total",
            reference: Some(budget),
            ..spec(FigureKind::Bar, "pipeline", "run", "mode")
        };
        let recs = [Record::new("pipeline", "run")
            .param("mode", "rtc")
            .metric("ticks_total", 9.0)];
        let refs: Vec<&Record> = recs.iter().collect();
        let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
        assert!(f
            .legend
            .iter()
            .any(|l| l.name == "10 GbE" && l.mark == "ref"));
        assert!(
            f.computed.contains("Dashed lines: 10 GbE 174 ticks."),
            "{}",
            f.computed
        );
        let svg_texts: Vec<&str> = f
            .svg
            .split("<text")
            .skip(1)
            .filter_map(|t| {
                t.split_once('>')
                    .map(|(_, r)| r.split('<').next().unwrap_or("").trim())
            })
            .collect();
        assert!(
            svg_texts.contains(&"10 GbE"),
            "named in the margin: {svg_texts:?}"
        );
    }

    /// A line whose points carry intervals gets a band and says over how
    /// many runs; series are named in words by what varies only.
    #[test]
    fn lines_with_intervals_get_bands_and_series_named_by_what_varies() {
        let lab = crate::testutil::TestLab(Vec::new());
        let s = FigureSpec {
            y: "mpps",
            series: &["mode", "size"],
            ..spec(FigureKind::Line, "pipeline", "sweep-tx-bulk", "tx_bulk")
        };
        let r = |mode: &str, b: u64, v: f64| {
            let mut r = Record::new("pipeline", "sweep-tx-bulk")
                .param("mode", mode)
                .param("size", 64)
                .param("tx_bulk", b)
                .metric("mpps", v);
            r.push_metric("mpps_lo", v * 0.9);
            r.push_metric("mpps_hi", v * 1.1);
            r.push_metric("mpps_n", 5);
            r
        };
        let recs = [
            r("rtc", 1, 10.0),
            r("rtc", 32, 20.0),
            r("pipeline", 1, 5.0),
            r("pipeline", 32, 6.0),
        ];
        let refs: Vec<&Record> = recs.iter().collect();
        let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
        let names: Vec<&str> = f.legend.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["rtc", "pipeline"]);
        assert!(f.computed.contains("All lines: size 64."), "{}", f.computed);
        assert!(
            f.computed
                .contains("rtc: 10.0 Mpps at tx bulk 1 → 20.0 Mpps at tx bulk 32 (2.0×)"),
            "{}",
            f.computed
        );
        assert!(
            f.computed
                .contains("Bands: the 95% interval of the median over 5 runs."),
            "{}",
            f.computed
        );
        assert_eq!(f.svg.matches("<polygon").count(), 2, "one band per series");
    }

    #[test]
    fn a_series_keeps_its_colour_across_figures() {
        let a = crate::plot::colours(&["shm".into(), "uds".into(), "tcp".into()]);
        let b = crate::plot::colours(&["tcp".into(), "uds".into()]);
        assert_eq!(a[1], b[1]);
        assert_eq!(a[2], b[0]);
        let c = crate::plot::colours(&["shm, size 128".into()]);
        assert_eq!(a[0], c[0], "the known word decides");
        let d = crate::plot::colours(&["x".into(), "x".into()]);
        assert_ne!(d[0], d[1], "two series never share a colour");
    }
}
