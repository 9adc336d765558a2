//! Reading results back, comparing two runs, and rendering the HTML report.
//!
//! Every seed reports a speed-up ("10x faster", "2.8x faster than zcat")
//! without saying how noisy the machine was. [`compare`] matches the records
//! of two runs by (lab, test, params) and gives, per metric, the ratio, the
//! change and a verdict (faster / slower / no change) that only calls a
//! change when it exceeds the noise threshold — criterion's approach with a
//! threshold the user can widen on a shared machine.
//!
//! [`render_html`] turns any set of records into one self-contained page:
//! SVG plots drawn with plotters (no fonts, no C libraries: the SVG carries
//! `<text>` for the browser to render) embedded in a minijinja template,
//! plus the tables and the environment. Labs declare their figures through
//! [`commbench_core::lab::Lab::figures`]: line, grouped or stacked bar and
//! percentile-ladder [`FigureSpec`](commbench_core::figure::FigureSpec)s
//! naming the parameter on the x axis, the metric on the y axis and the
//! parameters that name the series, each with the question it answers. A
//! lab that declares none still gets a line plot guessed from its records
//! (a numeric parameter that varies on the x axis, its headline metric on
//! the y axis), and every latency summary (p50…max) becomes a
//! percentile-ladder plot.
//!
//! By concern: `load` reads result files, `compare` matches records and
//! gives verdicts, `floor` learns the between-run noise floor from earlier
//! runs, [`verdicts`] decides what `compare` shows and gates on, `figures`
//! picks and builds a lab's plots, `html` renders the page, `plot` draws
//! the SVG, `history` gives the trends and change points over stored runs,
//! `trend` draws the history page and [`summary`] the question-and-answer
//! lines. Everything public is re-exported here.

use thiserror::Error;

mod compare;
pub mod compare_text;
mod figures;
mod floor;
mod history;
pub mod history_text;
mod html;
mod load;
mod plot;
pub mod summary;
#[cfg(test)]
mod testutil;
mod trend;
pub mod verdicts;
mod work;

pub use commbench_core::lab::Better;
pub use compare::{
    compare, compare_with, difference_text, guess_unit, headline_metric, no_floor, params_key,
    params_key_without, Change, Options, NOT_JUDGED,
};
pub use figures::{
    declared_figures, figures_for_lab, value, DataCell, DataTable, Figure, RUN_PARAM,
};
pub use floor::{learn_floor, FloorLearner, Learned, PastLoader, PastRecord};
pub use history::{
    change_point_records, groups, history, Group, History, HistoryOptions, RunRecord,
};
pub use html::{render_html, SummaryLine};
pub use load::{load, load_with, LoadLimits, Loaded};
pub use plot::{
    bar_plot, colours, ladder_plot, ladder_svg, line_plot, line_svg, plottable, Axes, Band,
    LeftOut, LegendItem, Plot, RefLine, Series, LOG_SPAN, MAX_ABS, MAX_CATEGORIES, MAX_POINTS,
    MAX_SERIES, MIN_ABS,
};
pub use trend::{render_trends_html, RunRow, Trend};

/// Everything that can go wrong reading, plotting or rendering.
#[derive(Debug, Error)]
pub enum ReportError {
    #[error("cannot read {path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path}: not commbench output ({reason}); give a file written with --format json or jsonl, or a suite's results.jsonl")]
    Format { path: String, reason: String },
    /// A file refused before or while it is read: not a regular file, or
    /// past one of the [`LoadLimits`].
    #[error("{path}: {reason}")]
    Input { path: String, reason: String },
    #[error("template error: {0}")]
    Template(String),
    #[error("plot error: {0}")]
    Plot(String),
}

/// A results file that is not one (bad JSON, `"records": {}`, no records)
/// or is refused by the load bounds (a FIFO, a device, a 5 MiB line) is
/// bad input: exit 2, as `history --import` does; a read error stays a
/// run error (exit 1).
impl commbench_core::error::IsUsage for ReportError {
    fn is_usage(&self) -> bool {
        matches!(self, ReportError::Format { .. } | ReportError::Input { .. })
    }
}
