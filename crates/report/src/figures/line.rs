//! Lines: the figure's metric over a numeric parameter, one line per
//! series, each point the median of the records at that x, with a band
//! where every point of the series is one record carrying an interval.
//!
//! Invariants: a curve needs [`CURVE_X`] distinct x values: with fewer
//! (the suite's two offered rates made a "hockey stick" of two points;
//! seven default-suite figures drew one dot on an empty 0.9–1.1 axis)
//! the medians are drawn as bars, one group per x value, side by side,
//! with their error bars, and the caption says so and what would measure
//! more (the figure's `more_x`); every series with a
//! point is drawn, one of a single point as a dot; -0.0 and 0.0 are one
//! x; a point that is the median of several records (overlaid runs) has
//! no interval, so its series gets no band.

use super::frame::{interval_cell, median_of, num, Frame, Spread};
use super::words::{interval_sentence, more_series, ratio, value, x_words, SHOWN_SERIES};
use super::{DataCell, Figure, Meta};
use crate::plot::{bar_plot, line_plot, si, Band, Series};
use crate::ReportError;
use std::collections::{HashMap, HashSet};

/// Distinct x values a line needs to be drawn as a curve.
pub(crate) const CURVE_X: usize = 3;

/// A point of a series: its name and its x (as bits, -0.0 folded into
/// 0.0).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PointKey {
    series: String,
    x: u64,
}

impl PointKey {
    fn new(series: String, x: f64) -> PointKey {
        PointKey {
            series,
            x: (x + 0.0).to_bits(),
        }
    }
}

/// The records at one point: their values and spreads.
struct Point {
    series: String,
    x: f64,
    ys: Vec<f64>,
    spreads: Vec<Spread>,
}

/// The points in first-seen order, and the spread of each point drawn
/// from one record.
fn collect(frame: &Frame) -> (Vec<Point>, HashMap<PointKey, Spread>) {
    let spec = frame.spec;
    let mut points: Vec<Point> = Vec::new();
    let mut ix: HashMap<PointKey, usize> = HashMap::new();
    for r in &frame.mine {
        let (Some(x), Some(y)) = (r.params.get(spec.x).and_then(num), r.metric_f64(spec.y)) else {
            continue;
        };
        let key = PointKey::new(frame.series_of(r), x);
        let spread = Spread::of(r, spec.y);
        match ix.get(&key) {
            Some(&i) => {
                points[i].ys.push(y);
                points[i].spreads.push(spread);
            }
            None => {
                ix.insert(key.clone(), points.len());
                points.push(Point {
                    series: key.series,
                    x,
                    ys: vec![y],
                    spreads: vec![spread],
                });
            }
        }
    }
    let mut ones = HashMap::new();
    for p in &points {
        if let [one] = p.spreads.as_slice() {
            ones.insert(PointKey::new(p.series.clone(), p.x), *one);
        }
    }
    (points, ones)
}

/// A band per series, empty unless every point has an interval; and
/// the repeats behind each interval drawn.
fn bands(series: &[Series], ones: &HashMap<PointKey, Spread>) -> (Vec<Band>, Vec<usize>) {
    let mut repeats = Vec::new();
    let bands = series
        .iter()
        .map(|s| {
            let b: Vec<(f64, f64, f64)> = s
                .points
                .iter()
                .filter_map(|&(x, _)| {
                    let one = ones.get(&PointKey::new(s.name.clone(), x))?;
                    let (lo, hi) = one.interval?;
                    repeats.push(one.repeats);
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
    (bands, repeats)
}

/// The distinct x values of the series, lowest first.
fn distinct_x(series: &[Series]) -> Vec<f64> {
    let mut seen = HashSet::new();
    let mut xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .filter(|x| seen.insert((x + 0.0).to_bits()))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs
}

/// The sentence of a line drawn as bars: why, and the x values it has.
fn bars_sentence(xs: &[f64], x_label: &str) -> String {
    let have = match xs {
        [one] => format!("one ({})", si(one)),
        [a, b] => format!("two ({} and {})", si(a), si(b)),
        _ => format!("{}", xs.len()),
    };
    format!(
        "Bars, not lines: a curve needs at least three values of {x_label}, and these records have {have}."
    )
}

pub(super) fn line_figure(frame: &Frame, meta: Meta) -> Result<Option<Figure>, ReportError> {
    let spec = frame.spec;
    let (points, ones) = collect(frame);
    let series = group_series(
        points.into_iter().map(|p| (p.series, p.x, median_of(p.ys))),
        1,
    );
    if series.is_empty() {
        return Ok(None);
    }
    let xs = distinct_x(&series);
    let curve = xs.len() >= CURVE_X;
    let (bands, repeats) = if curve {
        bands(&series, &ones)
    } else {
        (Vec::new(), Vec::new())
    };
    let labels = frame.labels(meta, spec.y);
    let unit = labels.unit;
    let plot = if curve {
        line_plot(&labels.axes(), &series, &bands, &labels.refs)?
    } else {
        // One group of bars per x value, a bar per series in it.
        let cats: Vec<String> = xs.iter().map(si).collect();
        let at = |s: &Series, x: f64| {
            s.points
                .iter()
                .find(|p| (p.0 + 0.0).to_bits() == (x + 0.0).to_bits())
                .map(|p| p.1)
        };
        let vals: Vec<(String, Vec<Option<f64>>)> = series
            .iter()
            .map(|s| (s.name.clone(), xs.iter().map(|&x| at(s, x)).collect()))
            .collect();
        let errs: Vec<Vec<Option<(f64, f64)>>> = series
            .iter()
            .map(|s| {
                xs.iter()
                    .map(|&x| {
                        at(s, x)?;
                        ones.get(&PointKey::new(s.name.clone(), x))?.interval
                    })
                    .collect()
            })
            .collect();
        bar_plot(&labels.axes(), &cats, &vals, false, &errs, &labels.refs)?
    };
    let mut data = frame.table(vec![
        "series".into(),
        labels.x.clone(),
        labels.y.clone(),
        "95% interval".into(),
        "runs".into(),
    ]);
    let mut sentences: Vec<String> = frame
        .fixed_sentence(if curve { "lines" } else { "bars" })
        .into_iter()
        .collect();
    let xw = |x: f64| x_words(&labels.x, &crate::plot::si(&x));
    for (i, s) in series.iter().enumerate() {
        for &(x, y) in &s.points {
            let one = ones.get(&PointKey::new(s.name.clone(), x));
            let runs = one.map_or_else(|| "several records".to_owned(), |o| o.repeats.to_string());
            data.rows.push(vec![
                DataCell::text(s.name.clone()),
                DataCell {
                    text: crate::plot::si(&x),
                    raw: Some(x),
                },
                DataCell::value(y, unit),
                interval_cell(one.and_then(|o| o.interval), unit),
                DataCell::text(runs),
            ]);
        }
        if i < SHOWN_SERIES && s.points.len() == 1 {
            let (x, y) = s.points[0];
            sentences.push(format!("{}: {} at {}.", s.name, value(y, unit), xw(x)));
        } else if i < SHOWN_SERIES {
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
    sentences.extend(more_series(series.len()));
    let total: usize = series.iter().map(|s| s.points.len()).sum();
    if curve {
        let drawn: usize = bands.iter().map(Vec::len).sum();
        sentences.push(interval_sentence(drawn, total, &repeats, "Bands"));
    } else {
        sentences.push(bars_sentence(&xs, &labels.x));
        let with: Vec<usize> = series
            .iter()
            .flat_map(|s| s.points.iter().map(move |p| (s, p.0)))
            .filter_map(|(s, x)| {
                let o = ones.get(&PointKey::new(s.name.clone(), x))?;
                o.interval.map(|_| o.repeats)
            })
            .collect();
        sentences.push(interval_sentence(with.len(), total, &with, "Error bars"));
    }
    let mut fig = labels.finish(frame, plot, sentences, data);
    if !curve {
        fig.more_x = spec.more_x.to_owned();
    }
    Ok(Some(fig))
}

/// (series name, x, y) points as series in first-seen order, each sorted
/// by x; series of fewer than `min_points` points are dropped.
pub(super) fn group_series(
    points: impl Iterator<Item = (String, f64, f64)>,
    min_points: usize,
) -> Vec<Series> {
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
    series.retain(|s| s.points.len() >= min_points);
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}
