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
    /// y against a numeric x, one dot per record and one colour per
    /// series, not joined: every trial of a search as it was measured
    /// (a line through the median at each x would hide the spread).
    Scatter,
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
    /// How the figure is drawn.
    pub kind: FigureKind,
    /// The lab whose records it draws.
    pub lab: &'static str,
    /// The test whose records it draws.
    pub test: &'static str,
    /// The figure's title.
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
    /// The x axis in words with its unit (`message size (B)`; a
    /// categorical axis is named: `transport`, `threads`).
    pub x_label: &'static str,
    /// The y axis in words when it is not one declared metric (a stacked
    /// figure's whole: `CPU time`); empty: the declared label of `y`. The
    /// unit always comes from the declared metrics.
    pub y_label: &'static str,
    /// Reference lines computed from the figure's records (a link's
    /// budget, a peer's figure) when the caption refers to them.
    pub reference: Option<References>,
    /// For a line: a command that measures it at more x values (three or
    /// more make a curve: `commbench ipc reqres --sessions 1,2,4,8`). The
    /// report cites it when the records hold fewer than three, and draws
    /// dots instead of a line; empty: it says only how many it needs.
    pub more_x: &'static str,
}

/// Computes a figure's reference lines from the records it draws.
pub type References = fn(&[&Record]) -> Vec<Reference>;

/// A horizontal reference line: its name and its value in the unit of
/// the figure's y axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// What the line is (`line rate`, `cbench`).
    pub label: String,
    /// Where it is drawn, in the unit of the y axis.
    pub y: f64,
}

impl FigureSpec {
    /// Whether a record belongs in this figure.
    pub fn accepts(&self, r: &Record) -> bool {
        r.lab == self.lab && r.test == self.test && self.filter.is_none_or(|f| f(r))
    }

    /// The series name of a record in words (`epoll-lt, index`,
    /// `switches 16, throughput`): a text value as it is, a number or a
    /// flag after its parameter's name.
    pub fn series_name(&self, r: &Record) -> String {
        self.series_name_of(r, self.series)
    }

    /// [`Self::series_name`] from the parameters `keys` only (the report
    /// leaves out those that do not vary within a figure).
    pub fn series_name_of(&self, r: &Record, keys: &[&str]) -> String {
        let parts: Vec<String> = keys
            .iter()
            .filter_map(|k| r.params.get(*k).map(|v| (k, v)))
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => format!("{} none", k.replace('_', " ")),
                v => format!("{} {v}", k.replace('_', " ")),
            })
            .collect();
        if parts.is_empty() {
            r.test.clone()
        } else {
            parts.join(", ")
        }
    }
}
