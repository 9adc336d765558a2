//! Grouped and stacked bars: categories are the values of the figure's
//! x parameter. Grouped, one bar per series (y = the figure's metric), the
//! median over the records behind it, with the interval its one record
//! carries as an error bar; stacked, one bar per category (and series,
//! named in the category), with the declared metrics as its parts.
//!
//! Invariants: a figure of more series than a legend holds is drawn as
//! panels (`panels`); within one, only the first [`MAX_CATEGORIES`]
//! categories and [`MAX_SERIES`] series are drawn and the others are
//! named as left out; a bar that is the median of several records (overlaid runs) gets
//! no error bar; a stack's total is the sum of its drawn parts, each
//! counted from zero.

use super::frame::{interval_of, median_of, part_name, text_of, Frame, Labels, Order, Spread};
use super::words::{extremes_ratio, interval_sentence, more_series, value, values_sentence};
use super::words::{x_words, Entry, SHOWN_SERIES, SHOWN_VALUES};
use super::{DataCell, DataTable, Figure, Meta, RUN_PARAM};
use crate::plot::{self, MAX_CATEGORIES, MAX_SERIES};
use crate::ReportError;
use std::collections::HashMap;

/// Where a sample goes: its category, its series (a stack's part) and
/// which of the figure's metrics it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Cell {
    category: usize,
    series: usize,
    metric: usize,
}

/// One record's value in a cell, with what it says of its spread.
struct Sample {
    y: f64,
    spread: Spread,
}

/// A bar figure's values as its records give them, before medians.
struct Bars {
    categories: Vec<String>,
    series: Vec<String>,
    /// The categories and series the records named beyond the drawable
    /// ones.
    more_categories: Vec<String>,
    more_series: Vec<String>,
    metrics: usize,
    /// The samples of the drawn cells only.
    cells: HashMap<Cell, Vec<Sample>>,
}

impl Bars {
    /// One pass over the records: each record's category (stacked: with
    /// its series in it) and series (stacked: the part's name).
    fn collect(frame: &Frame, metrics: &[&str], stacked: bool, meta: Meta) -> Option<Bars> {
        let overlaid = frame.mine.iter().any(|r| r.params.contains_key(RUN_PARAM));
        let mut categories = Order::default();
        let mut series = Order::default();
        let mut cells: HashMap<Cell, Vec<Sample>> = HashMap::new();
        for r in &frame.mine {
            let Some(x) = r.params.get(frame.spec.x) else {
                continue;
            };
            let (cat_name, series_name) = if stacked {
                let c = if frame.vary.is_empty() && !overlaid {
                    text_of(x)
                } else {
                    format!("{} {}", text_of(x), frame.series_of(r))
                };
                (c, None)
            } else {
                (text_of(x), Some(frame.series_of(r)))
            };
            for (metric, m) in metrics.iter().enumerate() {
                let Some(y) = r.metric_f64(m).filter(|y| y.is_finite()) else {
                    continue;
                };
                let category = categories.place(cat_name.clone());
                let name = series_name
                    .clone()
                    .unwrap_or_else(|| part_name(meta, &r.test, m));
                let series = series.place(name);
                if category < MAX_CATEGORIES && series < MAX_SERIES {
                    let cell = Cell {
                        category,
                        series,
                        metric,
                    };
                    cells.entry(cell).or_default().push(Sample {
                        y,
                        spread: Spread::of(r, m),
                    });
                }
            }
        }
        let (mut categories, mut series) = (categories.names, series.names);
        if categories.is_empty() || series.is_empty() {
            return None;
        }
        let more_categories = categories.split_off(categories.len().min(MAX_CATEGORIES));
        let more_series = series.split_off(series.len().min(MAX_SERIES));
        Some(Bars {
            more_categories,
            more_series,
            categories,
            series,
            metrics: metrics.len(),
            cells,
        })
    }

    /// The samples behind a bar: those of the first metric that has any.
    fn at(&self, category: usize, series: usize) -> Option<&[Sample]> {
        (0..self.metrics).find_map(|metric| {
            let cell = Cell {
                category,
                series,
                metric,
            };
            self.cells.get(&cell).map(Vec::as_slice)
        })
    }

    /// The spread of a bar drawn from one record; none for a median of
    /// several records (overlaid runs).
    fn one(&self, category: usize, series: usize) -> Option<Spread> {
        match self.at(category, series)? {
            [one] => Some(one.spread),
            _ => None,
        }
    }

    /// Each series with its median per category.
    fn medians(&self) -> Vec<(String, Vec<Option<f64>>)> {
        self.series
            .iter()
            .enumerate()
            .map(|(si, n)| {
                let vals = (0..self.categories.len())
                    .map(|ci| {
                        self.at(ci, si)
                            .map(|v| median_of(v.iter().map(|s| s.y).collect()))
                    })
                    .collect();
                (n.clone(), vals)
            })
            .collect()
    }

    /// Each series' error bar per category, where its one record carries
    /// an interval.
    fn error_bars(&self) -> Vec<Vec<Option<(f64, f64)>>> {
        (0..self.series.len())
            .map(|si| {
                (0..self.categories.len())
                    .map(|ci| self.one(ci, si).and_then(|s| s.interval))
                    .collect()
            })
            .collect()
    }
}

/// Grouped bars (`metrics` is the figure's one y) or stacked bars
/// (`metrics` are the parts).
pub(super) fn bar_figure(
    frame: &Frame,
    metrics: &[&str],
    stacked: bool,
    meta: Meta,
) -> Result<Option<Figure>, ReportError> {
    let Some(bars) = Bars::collect(frame, metrics, stacked, meta) else {
        return Ok(None);
    };
    let series = bars.medians();
    let errors = bars.error_bars();
    let labels = frame.labels(meta, metrics[0]);
    let mut plot = plot::bar_plot(
        &labels.axes(),
        &bars.categories,
        &series,
        stacked,
        if stacked { &[] } else { &errors },
        &labels.refs,
    )?;
    plot.left_out
        .categories
        .extend(bars.more_categories.iter().cloned());
    plot.left_out
        .series
        .extend(bars.more_series.iter().cloned());
    // The caption, from the values drawn.
    let mut sentences: Vec<String> = frame.fixed_sentence("bars").into_iter().collect();
    let data = if stacked {
        stacked_numbers(frame, metrics, &bars, &series, &labels, &mut sentences)
    } else {
        grouped_numbers(frame, &bars, &series, &errors, &labels, &mut sentences)
    };
    Ok(Some(labels.finish(frame, plot, sentences, data)))
}

/// A stacked figure's numbers (each part and each total) and its
/// sentences: every category's total with its parts, the highest total
/// over the lowest, and why the parts carry no error bars.
fn stacked_numbers(
    frame: &Frame,
    metrics: &[&str],
    bars: &Bars,
    series: &[(String, Vec<Option<f64>>)],
    labels: &Labels,
    sentences: &mut Vec<String>,
) -> DataTable {
    let unit = labels.unit;
    let mut data = frame.table(vec![labels.x.clone(), "part".into(), labels.y.clone()]);
    let mut entries = Vec::new();
    let mut parts_text = Vec::new();
    for (ci, c) in bars.categories.iter().enumerate() {
        let mut total = 0.0;
        let mut parts = Vec::new();
        for (n, vals) in series {
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
        entries.push(Entry {
            name: x_words(&labels.x, c),
            value: total,
            text: value(total, unit),
        });
        parts_text.push(parts.join(" + "));
    }
    let mut s = entries
        .iter()
        .zip(&parts_text)
        .take(SHOWN_VALUES)
        .map(|(e, parts)| format!("{}: {} ({parts})", e.name, e.text))
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(r) = extremes_ratio(&entries) {
        s.push_str(&format!("; {r}"));
    }
    sentences.push(format!("{s}."));
    let with = frame
        .mine
        .iter()
        .filter(|r| metrics.iter().any(|m| interval_of(r, m).is_some()))
        .count();
    sentences.push(if with == 0 {
        "One run each: these records carry no repeats, so no interval.".to_owned()
    } else {
        "Each part is the median over the repeated runs; the stacked parts carry no error bars (their intervals are in the table below).".to_owned()
    });
    data
}

/// A grouped figure's numbers (each bar with its interval and runs) and
/// its sentences: each of the first series' values with the highest over
/// the lowest, and the error bars drawn.
fn grouped_numbers(
    frame: &Frame,
    bars: &Bars,
    series: &[(String, Vec<Option<f64>>)],
    errors: &[Vec<Option<(f64, f64)>>],
    labels: &Labels,
    sentences: &mut Vec<String>,
) -> DataTable {
    let unit = labels.unit;
    // Categories that are levels of a number (requested delays, sizes)
    // are not alternatives: no "highest / lowest" ratio between them.
    let numeric_x = frame
        .mine
        .iter()
        .filter_map(|r| r.params.get(frame.spec.x))
        .all(serde_json::Value::is_number);
    let mut data = frame.table(vec![
        labels.x.clone(),
        "series".into(),
        labels.y.clone(),
        "95% interval".into(),
        "runs".into(),
    ]);
    for (si, (n, vals)) in series.iter().enumerate() {
        let mut entries = Vec::new();
        for (ci, c) in bars.categories.iter().enumerate() {
            let Some(v) = vals.get(ci).copied().flatten() else {
                continue;
            };
            let runs = bars.one(ci, si).map_or_else(
                || format!("{} records", bars.at(ci, si).map_or(0, <[Sample]>::len)),
                |s| s.repeats.to_string(),
            );
            data.rows.push(vec![
                DataCell::text(c.clone()),
                DataCell::text(n.clone()),
                DataCell::value(v, unit),
                super::frame::interval_cell(errors[si][ci], unit),
                DataCell::text(runs),
            ]);
            entries.push(Entry {
                name: x_words(&labels.x, c),
                value: v,
                text: value(v, unit),
            });
        }
        if si < SHOWN_SERIES && !entries.is_empty() {
            let body = values_sentence(&entries, !numeric_x);
            sentences.push(if series.len() == 1 {
                format!("{body}.")
            } else {
                format!("{n} — {body}.")
            });
        }
    }
    sentences.extend(more_series(series.len()));
    let total = errors.iter().flatten().count();
    let drawn = errors.iter().flatten().filter(|b| b.is_some()).count();
    let repeats: Vec<usize> = (0..bars.series.len())
        .flat_map(|si| (0..bars.categories.len()).map(move |ci| (ci, si)))
        .filter_map(|(ci, si)| bars.one(ci, si).filter(|s| s.interval.is_some()))
        .map(|s| s.repeats)
        .collect();
    sentences.push(interval_sentence(drawn, total, &repeats, "Error bars"));
    data
}
