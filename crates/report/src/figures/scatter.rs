//! Scatters: the figure's metric over a numeric parameter, one dot per
//! record and one colour per series, never joined and never a median: a
//! search's trials as they were measured, so the spread at one load (a
//! host pause's lossy trial beside three clean ones) stays visible.
//!
//! Invariants: every record with a numeric x and y is one dot (a series
//! of one dot is drawn too); a figure whose records hold no such point is
//! still shown, with a sentence saying why it has nothing to draw, never
//! as an empty chart.

use super::frame::{finish, num, Frame};
use super::words::{more_series, value, x_words, SHOWN_SERIES};
use super::{DataCell, DataTable, Figure, Meta};
use crate::plot::{scatter_plot, Plot, Series};
use crate::ReportError;
use std::collections::HashMap;

/// The dots by series, in first-seen order; and how many records had no
/// numeric x or y.
fn collect(frame: &Frame) -> (Vec<Series>, usize) {
    let spec = frame.spec;
    let mut series: Vec<Series> = Vec::new();
    let mut ix: HashMap<String, usize> = HashMap::new();
    let mut missing = 0;
    for r in &frame.mine {
        let x = r.params.get(spec.x).and_then(num);
        let y = r.metric_f64(spec.y).filter(|y| y.is_finite());
        let (Some(x), Some(y)) = (x, y) else {
            missing += 1;
            continue;
        };
        let name = frame.series_of(r);
        let i = *ix.entry(name.clone()).or_insert_with(|| {
            series.push(Series {
                name,
                points: Vec::new(),
            });
            series.len() - 1
        });
        series[i].points.push((x, y));
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    (series, missing)
}

pub(super) fn scatter_figure(frame: &Frame, meta: Meta) -> Result<Option<Figure>, ReportError> {
    let spec = frame.spec;
    if frame.mine.is_empty() {
        return Ok(None);
    }
    let (series, missing) = collect(frame);
    let labels = frame.labels(meta, spec.y);
    let unit = labels.unit;
    if series.is_empty() {
        return Ok(Some(nothing_to_draw(frame, missing, &labels.x, &labels.y)));
    }
    let plot = scatter_plot(&labels.axes(), &series, &labels.refs)?;
    let mut data = frame.table(vec!["series".into(), labels.x.clone(), labels.y.clone()]);
    let mut sentences: Vec<String> = frame.fixed_sentence("dots").into_iter().collect();
    let xw = |x: f64| x_words(&labels.x, &crate::plot::si(&x));
    for (i, s) in series.iter().enumerate() {
        for &(x, y) in &s.points {
            data.rows.push(vec![
                DataCell::text(s.name.clone()),
                DataCell {
                    text: crate::plot::si(&x),
                    raw: Some(x),
                },
                DataCell::value(y, unit),
            ]);
        }
        if i < SHOWN_SERIES {
            let (x0, _) = s.points[0];
            let (x1, _) = s.points[s.points.len() - 1];
            let (ylo, yhi) = s
                .points
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                    (a.min(p.1), b.max(p.1))
                });
            let n = s.points.len();
            sentences.push(if n == 1 {
                format!("{}: 1 trial at {}: {}.", s.name, xw(x0), value(ylo, unit))
            } else {
                format!(
                    "{}: {n} trials from {} to {}, {} to {}.",
                    s.name,
                    xw(x0),
                    xw(x1),
                    value(ylo, unit),
                    value(yhi, unit)
                )
            });
        }
    }
    sentences.extend(more_series(series.len()));
    if missing > 0 {
        sentences.push(format!(
            "{missing} of {} records had no {} or no {} and are not drawn.",
            frame.mine.len(),
            labels.x,
            labels.y
        ));
    }
    Ok(Some(labels.finish(frame, plot, sentences, data)))
}

/// A figure whose records hold nothing to draw: no plot, and a sentence
/// saying why in its place.
fn nothing_to_draw(frame: &Frame, missing: usize, x: &str, y: &str) -> Figure {
    let why = format!(
        "Nothing to draw: none of the {missing} {} records has both a {x} and a {y} (a search that measured nothing writes no loss).",
        frame.test()
    );
    let plot = Plot {
        svg: String::new(),
        left_out: Default::default(),
        extent: Default::default(),
        legend: Vec::new(),
        y_log: false,
        x_desc: x.to_owned(),
        y_desc: y.to_owned(),
        title: String::new(),
    };
    let data = DataTable {
        fixed: String::new(),
        columns: Vec::new(),
        rows: Vec::new(),
    };
    finish(frame, plot, vec![why], data)
}
