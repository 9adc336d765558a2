//! The frame every declared figure is drawn in, whatever its kind: the
//! records it accepts, the series parameters that vary among them (the
//! others are said once, "All bars: size 128."), the axes in words with
//! the metric's unit, the reference lines, and the finished [`Figure`]
//! with its legend beside the plot and its numbers table. Also the record
//! look-ups every kind shares (a record's series name, its interval and
//! repeats of a metric, the median of repeats).
//!
//! Invariant: a figure's axes, reference lines and fixed parameters are
//! worked out here once, so a bar and a line of the same records are
//! labelled alike.

use super::panels::{PanelOf, PANEL_SENTENCE};
use super::words::value;
use super::{DataCell, DataTable, Figure, Meta, RUN_PARAM};
use crate::plot::{Axes, Plot, RefLine, Span};
use commbench_core::figure::FigureSpec;
use commbench_core::record::Record;
use serde_json::Value;
use std::collections::HashMap;

/// A declared figure's records and what does and does not vary among
/// them.
pub(super) struct Frame<'a> {
    pub(super) spec: &'a FigureSpec,
    /// The records the figure accepts.
    pub(super) mine: Vec<&'a Record>,
    /// The series parameters whose values differ between the records.
    pub(super) vary: Vec<&'static str>,
    /// The others, with their one value (`size 128`).
    pub(super) fixed: Vec<String>,
    /// Which panel of the figure this is, when it is drawn as several.
    pub(super) panel: Option<PanelOf>,
    /// The range the axes reach at least: the figure's other panels'.
    pub(super) span: Span,
}

impl<'a> Frame<'a> {
    pub(super) fn new(spec: &'a FigureSpec, records: &[&'a Record]) -> Frame<'a> {
        let mine: Vec<&Record> = records
            .iter()
            .copied()
            .filter(|r| spec.accepts(r))
            .collect();
        let (vary, fixed) = split_series(spec.series, &mine);
        Frame {
            spec,
            mine,
            vary,
            fixed,
            panel: None,
            span: Span::default(),
        }
    }

    /// The frame of one panel of this figure: `records` (some of this
    /// frame's), their series named by what varies among them.
    pub(super) fn panel(&self, records: Vec<&'a Record>, at: PanelOf) -> Frame<'a> {
        let (vary, fixed) = split_series(self.spec.series, &records);
        Frame {
            spec: self.spec,
            mine: records,
            vary,
            fixed,
            panel: Some(at),
            span: self.span,
        }
    }

    /// This frame with axes reaching at least `span`.
    pub(super) fn within(self, span: Span) -> Frame<'a> {
        Frame { span, ..self }
    }

    /// The figure's title, with the panel's place when it is one.
    pub(super) fn title(&self) -> String {
        match &self.panel {
            Some(p) => p.title(self.spec.title),
            None => self.spec.title.to_owned(),
        }
    }

    /// The test the metrics are declared under.
    pub(super) fn test(&self) -> &str {
        self.mine
            .first()
            .map_or(self.spec.test, |r| r.test.as_str())
    }

    /// A record's series name, with its run when runs are overlaid.
    pub(super) fn series_of(&self, r: &Record) -> String {
        run_series(self.spec, &self.vary, r)
    }

    /// The sentence naming the fixed parameters (`All bars: size 128.`),
    /// when there are any; `marks` is what the figure draws.
    pub(super) fn fixed_sentence(&self, marks: &str) -> Option<String> {
        (!self.fixed.is_empty()).then(|| format!("All {marks}: {}.", self.fixed.join(", ")))
    }

    /// An empty numbers table with these columns.
    pub(super) fn table(&self, columns: Vec<String>) -> DataTable {
        DataTable {
            fixed: self.fixed.join(", "),
            columns,
            rows: Vec::new(),
        }
    }

    /// The axes of a figure whose y axis is the declared `metric`, and the
    /// reference lines the spec computes from the records.
    pub(super) fn labels(&self, meta: Meta, metric: &str) -> Labels {
        let spec = self.spec;
        let test = self.test();
        let x = if spec.x_label.is_empty() {
            spec.x.replace('_', " ")
        } else {
            spec.x_label.to_owned()
        };
        let refs = spec
            .reference
            .map(|f| f(&self.mine))
            .unwrap_or_default()
            .into_iter()
            .map(|r| RefLine {
                label: r.label,
                y: r.y,
            })
            .collect();
        Labels {
            title: self.title(),
            span: self.span,
            unit: unit_of(meta, test, metric),
            x,
            y: axis_of(meta, test, metric, spec.y_label),
            refs,
        }
    }
}

/// A figure's axes in words, the unit of its values, and its reference
/// lines.
pub(super) struct Labels {
    title: String,
    span: Span,
    pub(super) unit: &'static str,
    pub(super) x: String,
    pub(super) y: String,
    pub(super) refs: Vec<RefLine>,
}

impl Labels {
    pub(super) fn axes(&self) -> Axes<'_> {
        Axes {
            title: &self.title,
            x: &self.x,
            y: &self.y,
            span: self.span,
        }
    }

    /// The figure, its caption closed by the reference lines (a sentence,
    /// and rows of the numbers).
    pub(super) fn finish(
        &self,
        frame: &Frame,
        plot: Plot,
        mut sentences: Vec<String>,
        mut data: DataTable,
    ) -> Figure {
        push_refs(&mut sentences, &mut data, &self.refs, self.unit);
        finish(frame, plot, sentences, data)
    }
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

/// A declared figure from its plot, caption sentences and numbers; a
/// panel's caption says it is one.
pub(super) fn finish(
    frame: &Frame,
    plot: Plot,
    mut sentences: Vec<String>,
    data: DataTable,
) -> Figure {
    if frame.panel.is_some() {
        sentences.push(PANEL_SENTENCE.to_owned());
    }
    Figure {
        // The title as the plot drew it (its unit the axis's).
        title: if plot.title.is_empty() {
            frame.title()
        } else {
            plot.title.clone()
        },
        caption: frame.spec.caption.to_owned(),
        computed: sentences.join(" "),
        more_x: String::new(),
        extent: plot.extent,
        left_out: plot.left_out.note(),
        legend: plot.legend,
        svg: plot.svg,
        x_label: plot.x_desc,
        y_label: plot.y_desc,
        data,
    }
}

/// "label (unit)" of a declared metric, else its key.
pub(super) fn axis_of(meta: Meta, test: &str, key: &str, label: &str) -> String {
    match meta(test, key) {
        Some(m) => {
            let l = if label.is_empty() { m.label } else { label };
            format!("{l} ({})", m.unit)
        }
        None if label.is_empty() => key.to_owned(),
        None => label.to_owned(),
    }
}

pub(super) fn unit_of(meta: Meta, test: &str, key: &str) -> &'static str {
    meta(test, key).map_or("", |m| m.unit)
}

/// A part's name in a stacked caption: its declared label up to the first
/// comma or parenthesis (`rx burst`, `user CPU`).
pub(super) fn part_name(meta: Meta, test: &str, key: &str) -> String {
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

/// The parameters among `keys` whose values differ between the records
/// (the ones worth naming a series by), and the others with their one
/// value ("size 128").
fn split_series(
    keys: &'static [&'static str],
    records: &[&Record],
) -> (Vec<&'static str>, Vec<String>) {
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

pub(super) fn median_of(mut v: Vec<f64>) -> f64 {
    commbench_core::stats::median(&mut v)
}

pub(super) fn text_of(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

pub(super) fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// Names in first-seen order, each with its place: the categories or
/// series of a figure as its records name them.
#[derive(Default)]
pub(super) struct Order {
    pub(super) names: Vec<String>,
    index: HashMap<String, usize>,
}

impl Order {
    /// The place of `name`, added at the end when new.
    pub(super) fn place(&mut self, name: String) -> usize {
        if let Some(&i) = self.index.get(&name) {
            return i;
        }
        self.names.push(name.clone());
        self.index.insert(name, self.names.len() - 1);
        self.names.len() - 1
    }
}

/// A record's 95% interval of a metric, when it carries one.
pub(super) type Interval = Option<(f64, f64)>;

/// What one record says of a value's spread: its interval, and the
/// repeats behind the value (its `_n`, 1 without).
#[derive(Debug, Clone, Copy)]
pub(super) struct Spread {
    pub(super) interval: Interval,
    pub(super) repeats: usize,
}

impl Spread {
    pub(super) fn of(r: &Record, m: &str) -> Spread {
        Spread {
            interval: interval_of(r, m),
            repeats: repeats_of(r, m),
        }
    }
}

pub(super) fn interval_of(r: &Record, m: &str) -> Interval {
    r.metric_f64(&format!("{m}_lo"))
        .zip(r.metric_f64(&format!("{m}_hi")))
}

/// The repeats behind a record's value of `m` (its `_n`), 1 without.
fn repeats_of(r: &Record, m: &str) -> usize {
    r.metric_f64(&format!("{m}_n"))
        .filter(|n| n.is_finite() && *n >= 1.0)
        .map_or(1, |n| n as usize)
}

/// An interval as the numbers table prints it, empty without one.
pub(super) fn interval_cell(iv: Interval, unit: &str) -> DataCell {
    iv.map_or_else(
        || DataCell::text(""),
        |(lo, hi)| DataCell::text(format!("[{}, {}]", value(lo, unit), value(hi, unit))),
    )
}
