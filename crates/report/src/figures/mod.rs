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
//! when its records fill it (a ladder needs three quantiles; a line with
//! fewer than three x values is drawn as bars and says what would measure
//! more); a figure of more series than a legend holds is drawn as panels
//! on the same axes, never by dropping series; a lab that declares figures
//! never gets a guessed line; overlaid runs are told apart by
//! [`RUN_PARAM`], which prefixes their series names. Records are grouped
//! in one pass through hash maps (linear in the records, whatever a file
//! holds), and what a figure still leaves out to stay drawable (values out
//! of range, points past the bounds of [`crate::plot`]) is said, by name
//! where it is a series or a category, in its caption.
//!
//! By kind, around one frame: `frame` works out what every declared
//! figure shares (its records, what varies among them, the axes in words,
//! the reference lines, the finished figure with its numbers), `panels`
//! splits one that a legend cannot hold, `bar`, `line`, `scatter` and
//! `ladder` draw one kind each (a scatter whose records hold nothing to
//! draw is shown with a sentence saying why), `guessed` the plots a lab
//! did not declare, and `words` says numbers and names as captions do.

mod bar;
mod frame;
mod guessed;
mod ladder;
mod line;
mod panels;
mod scatter;
#[cfg(test)]
mod tests;
mod words;

use crate::plot::{LegendItem, Plot, Span};
use crate::ReportError;
use commbench_core::figure::{FigureKind, FigureSpec};
use commbench_core::lab::{Lab, MetricSpec};
use commbench_core::record::Record;
use serde::Serialize;

pub use words::value;

/// One cell of a figure's numbers: the text shown and, for a value, the
/// number drawn.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DataCell {
    pub text: String,
    pub raw: Option<f64>,
}

impl DataCell {
    pub(crate) fn text(t: impl Into<String>) -> DataCell {
        DataCell {
            text: t.into(),
            raw: None,
        }
    }
    pub(crate) fn value(v: f64, unit: &str) -> DataCell {
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
    /// A command that measures a line at more x values, when the records
    /// hold too few for a curve and it is drawn as bars ("" otherwise).
    pub more_x: String,
    /// What the plot spans (the axes of the panels beside it).
    #[serde(skip)]
    pub extent: Span,
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
            more_x: String::new(),
            extent: plot.extent,
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

/// The declared metrics of `lab` as its figures look them up.
fn metric_lookup<'a>(
    labs: &'a [&'a dyn Lab],
    lab: &'a str,
) -> impl Fn(&str, &str) -> Option<&'static MetricSpec> + 'a {
    move |test, key| commbench_core::lab::spec_of(labs, lab, test, key)
}

/// The parameter the report adds to records when it overlays several runs.
pub const RUN_PARAM: &str = "run";

/// Draws the declared figures of a lab that its records can fill (at
/// least one series with two points), labelled from `labs`' metrics.
pub fn declared_figures(
    lab: &str,
    records: &[&Record],
    specs: &[FigureSpec],
    labs: &[&dyn Lab],
) -> Result<Vec<Figure>, ReportError> {
    let meta = metric_lookup(labs, lab);
    let mut figs = Vec::new();
    for spec in specs.iter().filter(|s| s.lab == lab) {
        let whole = frame::Frame::new(spec, records);
        let draw = |f: &frame::Frame| draw_kind(f, &meta);
        let drawn = panels::draw_declared(&whole, &draw, &|recs| not_drawn(spec, recs))?;
        if drawn.is_empty() {
            figs.extend(not_drawn(spec, records));
        } else {
            figs.extend(drawn);
        }
    }
    Ok(figs)
}

/// One declared figure, or one panel of it, by its kind.
fn draw_kind(frame: &frame::Frame, meta: Meta) -> Result<Option<Figure>, ReportError> {
    match frame.spec.kind {
        FigureKind::Line => line::line_figure(frame, meta),
        FigureKind::Scatter => scatter::scatter_figure(frame, meta),
        FigureKind::Bar => bar::bar_figure(frame, &[frame.spec.y], false, meta),
        FigureKind::Stacked(parts) => bar::bar_figure(frame, parts, true, meta),
        FigureKind::Ladder(qs) => ladder::ladder_figure(frame, qs, meta),
    }
}

/// In place of a declared figure whose test has records but nothing to
/// draw (an RFC 2544 search that measured no rate): its title and why,
/// never an empty plot. None when the figure's test has no records.
fn not_drawn(spec: &FigureSpec, records: &[&Record]) -> Option<Figure> {
    let mine: Vec<&&Record> = records
        .iter()
        .filter(|r| r.lab == spec.lab && r.test == spec.test)
        .collect();
    if mine.is_empty() {
        return None;
    }
    let what = match spec.kind {
        FigureKind::Stacked(parts) => parts.join(", "),
        FigureKind::Ladder(_) => "a latency percentile".to_owned(),
        _ => spec.y.to_owned(),
    };
    let mut why = format!(
        "Not drawn: none of the {} {}/{} record{} carries a number for {what}",
        mine.len(),
        spec.lab,
        spec.test,
        if mine.len() == 1 { "" } else { "s" }
    );
    let mut notes: Vec<&str> = mine
        .iter()
        .filter_map(|r| r.metrics.get("note").and_then(|v| v.as_str()))
        .filter(|n| !n.is_empty())
        .collect();
    notes.dedup();
    if let Some(n) = notes.first() {
        why.push_str(&format!(" ({n})"));
    }
    why.push('.');
    Some(Figure {
        title: spec.title.to_owned(),
        svg: String::new(),
        caption: spec.caption.to_owned(),
        computed: why,
        left_out: String::new(),
        more_x: String::new(),
        extent: Span::default(),
        legend: Vec::new(),
        x_label: String::new(),
        y_label: String::new(),
        data: DataTable::default(),
    })
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
    let mut figs = declared_figures(lab, records, specs, labs)?;
    // A lab that declares figures gets those only: no line guessed
    // through its categories.
    let declared = !figs.is_empty() || specs.iter().any(|s| s.lab == lab);
    if !declared {
        let meta = metric_lookup(labs, lab);
        let naming = guessed::Naming::of(records);
        figs.extend(guessed::guessed_line(lab, records, &naming, &meta)?);
    }
    figs.extend(guessed::latency_ladders(lab, records)?);
    Ok(figs)
}
