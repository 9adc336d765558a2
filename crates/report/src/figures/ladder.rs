//! Percentile ladders: one line per series over the quantiles a figure
//! declares (p50 … p99.99), each quantile the median over the series'
//! records.
//!
//! Invariants: a series needs three quantiles to be drawn; a quantile is
//! drawn only from positive finite values; a ladder is one run's
//! histogram, so it says it carries no interval.

use super::frame::{finish, median_of, unit_of, Frame, Order};
use super::words::{more_series, quantile_name, ratio, value, SHOWN_SERIES};
use super::{DataCell, Figure, Meta};
use crate::plot::{ladder_plot, Series};
use crate::ReportError;

/// One percentile ladder per series (the median of each quantile over
/// repeats).
pub(super) fn ladder_figure(
    frame: &Frame,
    qs: &[(f64, &str)],
    meta: Meta,
) -> Result<Option<Figure>, ReportError> {
    let spec = frame.spec;
    let series = ladders(frame, qs);
    if series.is_empty() {
        return Ok(None);
    }
    let first = qs.first().map_or("", |q| q.1);
    let unit = match unit_of(meta, frame.test(), first) {
        "" => "ns",
        u => u,
    };
    let y_label = format!(
        "{} ({unit})",
        if spec.y_label.is_empty() {
            "latency"
        } else {
            spec.y_label
        },
    );
    let plot = ladder_plot(&frame.title(), &y_label, &series, frame.span.y)?;
    let mut data = frame.table(vec!["series".into(), "percentile".into(), y_label.clone()]);
    let mut sentences: Vec<String> = frame.fixed_sentence("lines").into_iter().collect();
    for (i, s) in series.iter().enumerate() {
        for &(q, v) in &s.points {
            data.rows.push(vec![
                DataCell::text(s.name.clone()),
                DataCell::text(quantile_name(q)),
                DataCell::value(v, unit),
            ]);
        }
        if i < SHOWN_SERIES {
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
    sentences.extend(more_series(series.len()));
    sentences.push("Percentiles of one run's histogram each: no interval.".into());
    Ok(Some(finish(frame, plot, sentences, data)))
}

/// The series in first-seen order, each with the median of every
/// quantile its records carry; those with fewer than three dropped.
fn ladders(frame: &Frame, qs: &[(f64, &str)]) -> Vec<Series> {
    let mut names = Order::default();
    let mut values: Vec<Vec<Vec<f64>>> = Vec::new();
    for r in &frame.mine {
        let i = names.place(frame.series_of(r));
        if i == values.len() {
            values.push(vec![Vec::new(); qs.len()]);
        }
        for (k, (_, m)) in qs.iter().enumerate() {
            if let Some(v) = r.metric_f64(m).filter(|v| v.is_finite() && *v > 0.0) {
                values[i][k].push(v);
            }
        }
    }
    names
        .names
        .into_iter()
        .zip(values)
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
        .collect()
}
