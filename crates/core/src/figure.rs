//! Figures a lab declares next to its records (what criterion and oha do):
//! which records, which parameter on the x axis, which metric on the y
//! axis, which parameters name the series, and a caption saying what the
//! figure answers. The report draws declared figures; it does not guess a
//! plot from a record's shape when the lab has said what to draw.

use crate::record::Record;

/// How a figure is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FigureKind {
    /// y against a numeric x, one line per series.
    Line,
    /// One bar per (x value, series): for categorical x (transports,
    /// variants, engines) — never a line through categories.
    Bar,
    /// One bar per x value, stacked from these metrics (`y` unused): parts
    /// of a whole (rx + work + tx ticks, user + sys seconds).
    Stacked(&'static [&'static str]),
    /// A latency percentile ladder per record series: (quantile, metric)
    /// pairs such as (0.99, "rt_p99_ns"); `x` and `y` unused.
    Ladder(&'static [(f64, &'static str)]),
}

/// One declared figure.
#[derive(Debug, Clone, Copy)]
pub struct FigureSpec {
    pub kind: FigureKind,
    pub lab: &'static str,
    pub test: &'static str,
    pub title: &'static str,
    /// What the figure answers, shown under it.
    pub caption: &'static str,
    /// A parameter: numeric for lines, any for bars.
    pub x: &'static str,
    /// A metric path (`latency_ns.p50`).
    pub y: &'static str,
    /// Parameters whose values name a series (`engine`, `lookup`).
    pub series: &'static [&'static str],
    /// Only records this accepts (None: all of the lab's `test` records).
    pub filter: Option<fn(&Record) -> bool>,
}

impl FigureSpec {
    /// Whether a record belongs in this figure.
    pub fn accepts(&self, r: &Record) -> bool {
        r.lab == self.lab && r.test == self.test && self.filter.is_none_or(|f| f(r))
    }

    /// The series name of a record (`epoll-lt index`).
    pub fn series_name(&self, r: &Record) -> String {
        let parts: Vec<String> = self
            .series
            .iter()
            .filter_map(|k| r.params.get(*k))
            .map(|v| v.to_string().trim_matches('"').to_owned())
            .collect();
        if parts.is_empty() {
            r.test.clone()
        } else {
            parts.join(" ")
        }
    }
}
