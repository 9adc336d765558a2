//! SVG plots with plotters' SVG backend (text is emitted as `<text>`, so no
//! font files or C libraries are needed).
//!
//! Conventions every figure keeps (Grafana's panels, Brendan Gregg's
//! latency plots): both axes carry a label in words with the unit, in type
//! a reader can read at the page's width; an axis switches to a log scale
//! when the data span more than [`LOG_SPAN`]× and says so in its label; a
//! series keeps its colour across figures ([`colours`]: a transport,
//! engine or variant has one colour everywhere); the legend is not drawn
//! inside the plot but returned as [`LegendItem`]s for the page to set
//! beside it, so it can never cover a mark; intervals are drawn as error
//! bars on bars and as bands around lines; reference lines (a link's
//! budget, a peer's value) are dashed and named in the right margin.

use crate::ReportError;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;

/// One named line of (x, y) points.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A horizontal reference line (a link budget, a peer's figure).
#[derive(Debug, Clone, PartialEq)]
pub struct RefLine {
    pub label: String,
    pub y: f64,
}

/// One entry of a figure's legend, set by the page beside the plot.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LegendItem {
    pub name: String,
    /// `#rrggbb`, from [`PALETTE`] or the reference grey only.
    pub colour: String,
    /// `line`, `dot`, `bar` or `ref` (dashed).
    pub mark: &'static str,
}

/// A figure's title and axis labels (words with the unit; the plot adds
/// "log scale" when it chooses one), and the range its axes must at least
/// span (panels of one figure drawn on the same axes).
#[derive(Debug, Clone, Copy)]
pub struct Axes<'a> {
    pub title: &'a str,
    pub x: &'a str,
    pub y: &'a str,
    pub span: Span,
}

impl<'a> Axes<'a> {
    /// Axes spanning what their data span.
    pub fn new(title: &'a str, x: &'a str, y: &'a str) -> Axes<'a> {
        Axes {
            title,
            x,
            y,
            span: Span::default(),
        }
    }
}

/// The lowest and highest value along each axis: what a plot drew (its
/// [`Plot::extent`]), or what its axes must at least reach ([`Axes::span`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Span {
    pub x: Option<(f64, f64)>,
    pub y: Option<(f64, f64)>,
}

impl Span {
    /// The smallest span holding both.
    pub fn union(self, other: Span) -> Span {
        let join = |a: Option<(f64, f64)>, b: Option<(f64, f64)>| match (a, b) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
        Span {
            x: join(self.x, other.x),
            y: join(self.y, other.y),
        }
    }
}

/// The lowest and highest finite value, if any.
fn extent_of(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    vals.filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// The ends of a span as values for [`bounds`].
fn ends(span: Option<(f64, f64)>) -> impl Iterator<Item = f64> {
    span.into_iter().flat_map(|(lo, hi)| [lo, hi])
}

const W: u32 = 760;
const H: u32 = 440;
const TITLE_PX: u32 = 18;
const DESC_PX: u32 = 16;
const TICK_PX: u32 = 14;

/// An axis is drawn on a log scale when its values span more than this
/// ratio and are all positive: a decade (pipeline's 8.9 ticks beside 148
/// was a sliver on a linear axis).
pub const LOG_SPAN: f64 = 10.0;

/// The largest magnitude a plot takes: plotters' axis code spins forever
/// near `f64::MAX` (1.7e308) once a range is padded past it.
pub const MAX_ABS: f64 = 1e300;
/// The smallest non-zero magnitude a plot takes: a log axis down to a
/// subnormal number spins too.
pub const MIN_ABS: f64 = 1e-300;
/// Series drawn in one figure (the legend holds no more).
pub const MAX_SERIES: usize = 12;
/// Points drawn per series; a longer series is thinned evenly.
pub const MAX_POINTS: usize = 2_000;
/// Bar categories drawn in one figure.
pub const MAX_CATEGORIES: usize = 24;

/// Twelve colours told apart on screen and in print (Tableau's ten and two
/// darker ones).
pub const PALETTE: [(u8, u8, u8); 12] = [
    (0x4e, 0x79, 0xa7),
    (0xf2, 0x8e, 0x2b),
    (0xe1, 0x57, 0x59),
    (0x76, 0xb7, 0xb2),
    (0x59, 0xa1, 0x4f),
    (0xed, 0xc9, 0x48),
    (0xb0, 0x7a, 0xa1),
    (0xff, 0x9d, 0xa7),
    (0x9c, 0x75, 0x5f),
    (0xba, 0xb0, 0xac),
    (0x1f, 0x4e, 0x79),
    (0x8c, 0x2d, 0x04),
];
const REF_GREY: (u8, u8, u8) = (0x44, 0x44, 0x44);

/// The colour a name always gets when it is free: the labs' transports,
/// engines, variants, cache states and parts of a packet's cost.
fn known_colour(word: &str) -> Option<usize> {
    Some(match word {
        "shm" | "cold" | "rx" | "user" | "user_s_median" | "ticks_rx" | "table" | "rtc" => 0,
        "uds" | "warm" | "work" | "sys" | "sys_s_median" | "ticks_work" | "poll" | "bitwise" => 1,
        "tcp" | "naive" | "scan" => 2,
        "epoll-et" | "index" => 3,
        "pipe" | "template" | "tx" | "ticks_tx" | "epoll-lt" => 4,
        "mt" | "commbench" => 5,
        "io-uring" | "pipeline" | "mp" => 6,
        "trivial" | "peer" => 9,
        _ => return None,
    })
}

/// FNV-1a: a hash that is the same in every build (std's is not).
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The colour index a series name asks for: its first known word (so
/// `shm, size 128` is shm's colour in every figure), else a hash of the
/// whole name. A run prefix (`host time: shm`) makes the whole name count,
/// so overlaid runs do not share a colour.
fn preferred(name: &str) -> usize {
    if !name.contains(": ") {
        for w in name.split([',', ' ']).filter(|w| !w.is_empty()) {
            if let Some(i) = known_colour(w) {
                return i;
            }
        }
    }
    (fnv(name) % PALETTE.len() as u64) as usize
}

/// Colours for the series of one figure: each its preferred colour, or
/// the next free one when an earlier series took it.
pub fn colours(names: &[String]) -> Vec<RGBColor> {
    let mut used = [false; PALETTE.len()];
    names
        .iter()
        .map(|n| {
            let p = preferred(n);
            let i = (0..PALETTE.len())
                .map(|k| (p + k) % PALETTE.len())
                .find(|&i| !used[i])
                .unwrap_or(p);
            used[i] = true;
            let (r, g, b) = PALETTE[i];
            RGBColor(r, g, b)
        })
        .collect()
}

fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// Whether a value can be drawn: finite, at most [`MAX_ABS`] and zero or at
/// least [`MIN_ABS`] in magnitude.
pub fn plottable(v: f64) -> bool {
    v.is_finite() && v.abs() <= MAX_ABS && (v == 0.0 || v.abs() >= MIN_ABS)
}

/// What a figure left out to stay drawable and bounded. Series and
/// categories are kept by name, so that the caption says which.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// Values that are not [`plottable`].
    pub out_of_range: usize,
    /// The names of the series past [`MAX_SERIES`].
    pub series: Vec<String>,
    /// Points not drawn when a series was thinned to [`MAX_POINTS`].
    pub points: usize,
    /// The names of the categories past [`MAX_CATEGORIES`].
    pub categories: Vec<String>,
}

/// Names a caption lists before it counts the rest (a file of ten
/// thousand series must not make a caption of them).
const LISTED: usize = 40;

/// Names as a caption lists them, in order: the first [`LISTED`], then
/// how many more.
fn listed(names: &[String]) -> String {
    let mut s = names
        .iter()
        .take(LISTED)
        .map(|n| format!("“{n}”"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > LISTED {
        s.push_str(&format!(" and {} more", names.len() - LISTED));
    }
    s
}

impl LeftOut {
    /// A sentence for the caption ("" when nothing was left out).
    pub fn note(&self) -> String {
        let mut parts = Vec::new();
        if self.out_of_range > 0 {
            parts.push(format!(
                "{} value{} out of range (not finite, beyond ±{MAX_ABS:e} or non-zero below {MIN_ABS:e} in magnitude)",
                self.out_of_range,
                if self.out_of_range == 1 { "" } else { "s" }
            ));
        }
        if !self.series.is_empty() {
            parts.push(format!(
                "{} series past the first {MAX_SERIES} ({})",
                self.series.len(),
                listed(&self.series)
            ));
        }
        if !self.categories.is_empty() {
            parts.push(format!(
                "{} categories past the first {MAX_CATEGORIES} ({})",
                self.categories.len(),
                listed(&self.categories)
            ));
        }
        if self.points > 0 {
            parts.push(format!(
                "{} points (series thinned evenly to {MAX_POINTS} points)",
                self.points
            ));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(
                " Not drawn: {}; their records are in the lab's table of records below.",
                parts.join("; ")
            )
        }
    }
}

/// A drawn figure, its legend and what it left out.
#[derive(Debug, Clone)]
pub struct Plot {
    pub svg: String,
    pub left_out: LeftOut,
    /// The values drawn, from lowest to highest along each axis (x: none
    /// for bars); [`Axes::span`] of a panel drawn beside this one.
    pub extent: Span,
    pub legend: Vec<LegendItem>,
    /// Whether the y axis is on a log scale.
    pub y_log: bool,
    /// The axis labels as drawn (with "log scale" when it is one).
    pub x_desc: String,
    pub y_desc: String,
    /// The title as drawn: its unit is the y axis's ("" when none drawn).
    pub title: String,
}

/// The series as they will be drawn: points that are not [`plottable`]
/// dropped, at most [`MAX_SERIES`] series of at most [`MAX_POINTS`]
/// points (thinned evenly, first and last kept).
fn prepared(series: &[Series]) -> (Vec<Series>, LeftOut) {
    let mut left = LeftOut {
        series: series
            .iter()
            .skip(MAX_SERIES)
            .map(|s| s.name.clone())
            .collect(),
        ..LeftOut::default()
    };
    let out = series
        .iter()
        .take(MAX_SERIES)
        .map(|s| {
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|&(x, y)| plottable(x) && plottable(y))
                .collect();
            left.out_of_range += s.points.len() - pts.len();
            let n = pts.len();
            let points = if n > MAX_POINTS {
                left.points += n - MAX_POINTS;
                (0..MAX_POINTS)
                    .map(|i| pts[i * (n - 1) / (MAX_POINTS - 1)])
                    .collect()
            } else {
                pts
            };
            Series {
                name: s.name.clone(),
                points,
            }
        })
        .collect();
    (out, left)
}

fn perr(e: impl std::fmt::Display) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// The elements a plot may contain. The page prints a figure's SVG raw,
/// so anything else (a `<script>`, an `<img>`, a `<foreignObject>`) would
/// be markup from the data: plotters escapes the text it draws (titles,
/// axis labels, series names), and this check makes sure of it.
const SVG_ELEMENTS: &[&str] = &[
    "svg", "g", "rect", "circle", "line", "polyline", "polygon", "path", "text",
];

/// The SVG as drawn, or an error when it holds an element other than
/// [`SVG_ELEMENTS`] or an unescaped `<`.
fn checked(svg: String) -> Result<String, ReportError> {
    for (i, _) in svg.match_indices('<') {
        let rest = svg[i + 1..].strip_prefix('/').unwrap_or(&svg[i + 1..]);
        let name: String = rest
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        let ends = rest[name.len()..].starts_with([' ', '>', '/', '\n']);
        if !(ends && SVG_ELEMENTS.contains(&name.as_str())) {
            return Err(ReportError::Plot(format!(
                "the drawn SVG holds markup other than drawing elements (at byte {i}); refusing to embed it in the page"
            )));
        }
    }
    Ok(svg)
}

fn bounds(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    // A range too narrow to tell apart at f64 precision counts as one
    // value: ticks a few ulps apart never advance.
    if hi - lo <= lo.abs().max(hi.abs()) * 1e-9 {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return (lo - pad, hi + pad);
    }
    (lo, hi)
}

fn wants_log(lo: f64, hi: f64) -> bool {
    lo > 0.0 && hi / lo > LOG_SPAN
}

/// Whether a log axis can span `lo..hi` once padded (by at most 2× at
/// each end): plotters divides the ends, and a ratio past `f64::MAX`
/// (1e-155..1e155) makes its tick code spin. A wider span is drawn on a
/// linear axis.
fn log_fits(lo: f64, hi: f64) -> bool {
    lo > 0.0 && hi / lo <= 1e300
}

/// Ticks of a log axis over `lo..hi`: 1, 2 and 5 times each power of ten
/// when that gives no more than a dozen, else the powers of ten (every
/// n-th one past a dozen decades): a short span keeps labelled ticks.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo) {
        return Vec::new();
    }
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let within = |v: f64| v >= lo * 0.999_999 && v <= hi * 1.000_001;
    let fine: Vec<f64> = (a..=b)
        .flat_map(|k| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(k)))
        .filter(|v| within(*v))
        .collect();
    if (2..=12).contains(&fine.len()) {
        return fine;
    }
    let step = ((b - a) / 12 + 1).max(1);
    (a..=b)
        .step_by(step as usize)
        .map(|k| 10f64.powi(k))
        .filter(|v| within(*v))
        .collect()
}

/// An axis label with the scale said when it is a log one.
fn desc(label: &str, log: bool) -> String {
    if log {
        format!("{label} — log scale")
    } else {
        label.to_owned()
    }
}

/// Category names cut to `fits` characters with "…" at the end; when two
/// would then read the same (`clock_gettime_m…` twice), those are cut in
/// the middle instead, keeping the ends that tell them apart.
fn cut_labels(cats: &[String], fits: usize) -> Vec<String> {
    let end = |c: &String| -> String {
        if c.chars().count() > fits {
            let cut: String = c.chars().take(fits - 1).collect();
            format!("{cut}…")
        } else {
            c.clone()
        }
    };
    let middle = |c: &String| -> String {
        let n = c.chars().count();
        if n <= fits {
            return c.clone();
        }
        let head = (fits - 1) / 2;
        let tail = fits - 1 - head;
        let h: String = c.chars().take(head).collect();
        let t: String = c.chars().skip(n - tail).collect();
        format!("{h}…{t}")
    };
    let ends: Vec<String> = cats.iter().map(end).collect();
    cats.iter()
        .zip(&ends)
        .map(|(c, e)| {
            if ends.iter().filter(|x| *x == e).count() > 1 {
                middle(c)
            } else {
                e.clone()
            }
        })
        .collect()
}

/// A y axis of nanoseconds whose ticks would read "50M" or "20k": drawn
/// in ms or µs instead, its label's unit changed to match; the label and
/// the divisor of the tick values. Other axes as they are. A log axis
/// changes unit only while its lowest tick still reads (≥ 0.01).
fn time_unit(label: &str, lo: f64, hi: f64, log: bool) -> (String, f64) {
    let Some(stem) = label.strip_suffix("(ns)") else {
        return (label.to_owned(), 1.0);
    };
    for (unit, d) in [("ms", 1e6), ("µs", 1e3)] {
        if hi.abs() / d >= 1.0 && (!log || lo / d >= 0.01) {
            return (format!("{stem}({unit})"), d);
        }
    }
    (label.to_owned(), 1.0)
}

/// A title whose unit is the axis's: when [`time_unit`] drew the axis in
/// µs or ms (`scale` 1e3 or 1e6), the title's "ns" says so too ("CPU per
/// message (ns)" over an axis in µs; `(TSC spin, ns)`).
fn title_in(title: &str, scale: f64) -> String {
    let unit = if scale == 1e6 {
        "ms"
    } else if scale == 1e3 {
        "µs"
    } else {
        return title.to_owned();
    };
    title
        .replace("(ns)", &format!("({unit})"))
        .replace(", ns)", &format!(", {unit})"))
}

/// Axis tick text: 1.5k, 20M, 3G instead of 20000000.0.
pub fn si(v: &f64) -> String {
    let a = v.abs();
    // Far outside what SI prefixes name: scientific notation, so that an
    // axis tick of 1e300 stays a short label.
    if a >= 1e15 || (a > 0.0 && a < 1e-3) {
        return format!("{v:.1e}");
    }
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (*v, "")
    };
    // Two decimals, or below 1 enough for the first two significant
    // digits: a log axis in µs once ticked 5 ns and 10 ns both "0.01",
    // and 2 ns "0".
    let decimals = if a > 0.0 && a < 1.0 {
        ((-a.log10().floor()) as usize + 1).max(2)
    } else {
        2
    };
    let s = format!("{x:.decimals$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

/// A percentile ladder's x tick: 1/(1−q) as the percentile it stands for.
fn percentile_tick(x: &f64) -> String {
    let q = 1.0 - 1.0 / x;
    if !(q.is_finite() && q > 0.0) {
        return String::new();
    }
    let p = q * 100.0;
    let t = format!("{p:.2}");
    format!("p{}", t.trim_end_matches('0').trim_end_matches('.'))
}

/// Draws the dashed reference lines across the plot and names each in the
/// right margin.
fn draw_refs<'a, DB: DrawingBackend + 'a, X, Y>(
    root: &DrawingArea<DB, Shift>,
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    refs: &[RefLine],
    x_ends: (X::ValueType, X::ValueType),
) -> Result<(), ReportError>
where
    X: Ranged,
    X::ValueType: Clone,
    Y: Ranged<ValueType = f64>,
    DB::ErrorType: 'static,
{
    let (r, g, b) = REF_GREY;
    let grey = RGBColor(r, g, b);
    for rl in refs {
        let (x0, x1) = (x_ends.0.clone(), x_ends.1.clone());
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x0, rl.y), (x1.clone(), rl.y)],
                8,
                5,
                grey.stroke_width(1),
            ))
            .map_err(perr)?;
        let (px, py) = chart.backend_coord(&(x1, rl.y));
        root.draw(&Text::new(
            rl.label.clone(),
            (px + 6, py - 7),
            ("sans-serif", 13).into_font().color(&grey),
        ))
        .map_err(perr)?;
    }
    Ok(())
}

fn ref_legend(refs: &[RefLine]) -> Vec<LegendItem> {
    let (r, g, b) = REF_GREY;
    refs.iter()
        .map(|rl| LegendItem {
            name: rl.label.clone(),
            colour: hex(RGBColor(r, g, b)),
            mark: "ref",
        })
        .collect()
}

/// Space for the reference lines' names right of the plot.
fn right_margin(refs: &[RefLine]) -> u32 {
    if refs.is_empty() {
        16
    } else {
        let longest = refs
            .iter()
            .map(|r| r.label.chars().count())
            .max()
            .unwrap_or(0);
        (longest as u32 * 7 + 14).clamp(40, 180)
    }
}

/// A band per series: (x, lo, hi) of each point's 95% interval.
pub type Band = Vec<(f64, f64, f64)>;

/// Lines of y against x, with a band around each series that has one and
/// dashed reference lines; log axes where the data span more than
/// [`LOG_SPAN`]×. Values that are not [`plottable`] are left out, and the
/// figure is bounded by [`MAX_SERIES`] and [`MAX_POINTS`].
pub fn line_plot(
    axes: &Axes,
    series: &[Series],
    bands: &[Band],
    refs: &[RefLine],
) -> Result<Plot, ReportError> {
    lines(axes, series, bands, refs, Marks::Line)
}

/// Points of y against x, one dot per point and one colour per series,
/// not joined (every trial of a search, where a line through them would
/// invent an order); axes and bounds as [`line_plot`]'s.
pub fn scatter_plot(axes: &Axes, series: &[Series], refs: &[RefLine]) -> Result<Plot, ReportError> {
    lines(axes, series, &[], refs, Marks::Dots)
}

/// How [`lines`] draws its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marks {
    /// Joined points.
    Line,
    /// Joined points over a percentile axis.
    Ladder,
    /// Points alone.
    Dots,
}

/// A line plot without bands or references (the history page).
pub fn line_svg(title: &str, x: &str, y: &str, series: &[Series]) -> Result<Plot, ReportError> {
    line_plot(&Axes::new(title, x, y), series, &[], &[])
}

fn lines(
    axes: &Axes,
    series: &[Series],
    bands: &[Band],
    refs: &[RefLine],
    marks: Marks,
) -> Result<Plot, ReportError> {
    let ladder = marks == Marks::Ladder;
    let (series, left_out) = prepared(series);
    // Bands of drawn, unthinned series only, within what a plot takes.
    let bands: Vec<Band> = series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            bands
                .get(i)
                .filter(|b| b.len() <= MAX_POINTS && s.points.len() == b.len())
                .map(|b| {
                    b.iter()
                        .copied()
                        .filter(|&(x, lo, hi)| {
                            plottable(x) && plottable(lo) && plottable(hi) && lo <= hi
                        })
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let refs: Vec<RefLine> = refs.iter().filter(|r| plottable(r.y)).cloned().collect();
    let xs = || series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (xlo, xhi) = bounds(xs().chain(ends(axes.span.x)));
    let ys = || {
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(bands.iter().flatten().flat_map(|&(_, lo, hi)| [lo, hi]))
            .chain(refs.iter().map(|r| r.y))
    };
    let extent = Span {
        x: extent_of(xs()),
        y: extent_of(ys()),
    };
    let (ylo, yhi) = bounds(ys().chain(ends(axes.span.y)));
    let x_log = (ladder || wants_log(xlo, xhi)) && log_fits(xlo, xhi);
    let y_log = (ladder || wants_log(ylo, yhi)) && log_fits(ylo, yhi);
    let (ylo, yhi) = if y_log {
        (ylo * 0.8, yhi * 1.25)
    } else {
        (ylo.min(0.0), yhi.max(0.0) * 1.1)
    };
    let names: Vec<String> = series.iter().map(|s| s.name.clone()).collect();
    let cols = colours(&names);
    let x_desc = if ladder {
        axes.x.to_owned()
    } else {
        desc(axes.x, x_log)
    };
    let (y_label, y_scale) = time_unit(axes.y, ylo, yhi, y_log);
    let y_desc = desc(&y_label, y_log);
    let title = title_in(axes.title, y_scale);
    let y_fmt = move |v: &f64| si(&(v / y_scale));
    let mut buf = String::new();
    {
        let root: DrawingArea<SVGBackend, Shift> =
            SVGBackend::with_string(&mut buf, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        let mut b = ChartBuilder::on(&root);
        b.caption(title.as_str(), ("sans-serif", TITLE_PX))
            .margin(12)
            .margin_right(if ladder { 36 } else { right_margin(&refs) })
            .x_label_area_size(52)
            .y_label_area_size(84);
        macro_rules! finish {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(perr)?;
                let fmt: &dyn Fn(&f64) -> String = if ladder { &percentile_tick } else { &si };
                chart
                    .configure_mesh()
                    .x_desc(x_desc.as_str())
                    .y_desc(y_desc.as_str())
                    .axis_desc_style(("sans-serif", DESC_PX))
                    .label_style(("sans-serif", TICK_PX))
                    .y_labels(8)
                    .x_label_formatter(fmt)
                    .y_label_formatter(&y_fmt)
                    .draw()
                    .map_err(perr)?;
                for (i, band) in bands.iter().enumerate() {
                    if band.len() < 2 {
                        continue;
                    }
                    let mut poly: Vec<(f64, f64)> =
                        band.iter().map(|&(x, lo, _)| (x, lo)).collect();
                    poly.extend(band.iter().rev().map(|&(x, _, hi)| (x, hi)));
                    let poly: Vec<(f64, f64)> = poly
                        .into_iter()
                        .map(|(x, y)| (x, y.clamp(ylo, yhi)))
                        .collect();
                    chart
                        .draw_series(std::iter::once(Polygon::new(
                            poly,
                            cols[i].mix(0.18).filled(),
                        )))
                        .map_err(perr)?;
                }
                for (s, c) in series.iter().zip(&cols) {
                    if marks != Marks::Dots && s.points.len() > 1 {
                        chart
                            .draw_series(LineSeries::new(
                                s.points.iter().copied(),
                                c.stroke_width(2),
                            ))
                            .map_err(perr)?;
                    }
                    chart
                        .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, c.filled())))
                        .map_err(perr)?;
                }
                draw_refs(&root, &mut chart, &refs, (xlo, xhi))?;
            }};
        }
        // A ladder's ticks sit on the percentiles drawn (p50 = 2 is no
        // power of ten, so a log axis would leave it unnamed).
        let x_ticks: Vec<f64> = if ladder {
            [2.0, 10.0, 100.0, 1e3, 1e4, 1e5]
                .into_iter()
                .filter(|t| *t >= xlo * 0.999 && *t <= xhi * 1.001)
                .collect()
        } else {
            log_ticks(xlo, xhi)
        };
        let y_ticks = log_ticks(ylo, yhi);
        match (x_log, y_log) {
            (true, true) => finish!(b.build_cartesian_2d(
                (xlo..xhi).log_scale().with_key_points(x_ticks),
                (ylo..yhi).log_scale().with_key_points(y_ticks)
            )),
            (true, false) => finish!(
                b.build_cartesian_2d((xlo..xhi).log_scale().with_key_points(x_ticks), ylo..yhi)
            ),
            (false, true) => finish!(
                b.build_cartesian_2d(xlo..xhi, (ylo..yhi).log_scale().with_key_points(y_ticks))
            ),
            (false, false) => finish!(b.build_cartesian_2d(xlo..xhi, ylo..yhi)),
        }
        root.present().map_err(perr)?;
    }
    let mut legend: Vec<LegendItem> = names
        .into_iter()
        .zip(&cols)
        .map(|(name, c)| LegendItem {
            name,
            colour: hex(*c),
            mark: if marks == Marks::Dots { "dot" } else { "line" },
        })
        .collect();
    legend.extend(ref_legend(&refs));
    checked(buf).map(|svg| Plot {
        svg,
        left_out,
        extent,
        legend,
        y_log,
        x_desc,
        y_desc,
        title,
    })
}

/// A percentile ladder: x = 1/(1−q) on a log axis labelled by percentile
/// (p50, p90, p99, p99.9, p99.99), y on a log axis — the tail made
/// visible. Points are (q, value); the y axis reaches at least `y_span`.
pub fn ladder_plot(
    title: &str,
    y: &str,
    series: &[Series],
    y_span: Option<(f64, f64)>,
) -> Result<Plot, ReportError> {
    let s: Vec<Series> = series
        .iter()
        .take(MAX_SERIES)
        .map(|s| Series {
            name: s.name.clone(),
            points: s
                .points
                .iter()
                .map(|&(q, v)| (1.0 / (1.0 - q), v))
                .collect(),
        })
        .collect();
    let mut axes = Axes::new(title, "percentile (log scale of 1/(1−q))", y);
    axes.span.y = y_span;
    let mut p = lines(&axes, &s, &[], &[], Marks::Ladder)?;
    p.left_out
        .series
        .extend(series.iter().skip(MAX_SERIES).map(|s| s.name.clone()));
    Ok(p)
}

/// [`ladder_plot`] with the y axis in nanoseconds.
pub fn ladder_svg(title: &str, series: &[Series]) -> Result<Plot, ReportError> {
    ladder_plot(title, "latency (ns)", series, None)
}

/// Bars over categories: `values[s][c]` is series `s` at category `c`
/// (None: no bar). Grouped side by side, or stacked when `stacked` (the
/// series are then the parts of each bar). Log y when the values span more
/// than [`LOG_SPAN`]×.
#[cfg(test)]
pub fn bar_svg(
    title: &str,
    y_desc: &str,
    cats: &[String],
    series: &[(String, Vec<Option<f64>>)],
    stacked: bool,
) -> Result<Plot, ReportError> {
    bar_plot(
        &Axes::new(title, "category", y_desc),
        cats,
        series,
        stacked,
        &[],
        &[],
    )
}

/// Bars with an error bar on each grouped bar that has an interval:
/// `intervals[s][c]` is the (lo, hi) of series `s` at category `c` (the
/// 95% interval of the median over repeats); stacked bars draw none. A
/// single series of grouped bars is coloured per category (a transport
/// keeps its colour) and needs no legend; otherwise each series has its
/// colour and a legend entry.
pub fn bar_plot(
    axes: &Axes,
    cats: &[String],
    series: &[(String, Vec<Option<f64>>)],
    stacked: bool,
    intervals: &[Vec<Option<(f64, f64)>>],
    refs: &[RefLine],
) -> Result<Plot, ReportError> {
    let mut left_out = LeftOut {
        series: series
            .iter()
            .skip(MAX_SERIES)
            .map(|(n, _)| n.clone())
            .collect(),
        categories: cats.iter().skip(MAX_CATEGORIES).cloned().collect(),
        ..LeftOut::default()
    };
    let cats = &cats[..cats.len().min(MAX_CATEGORIES)];
    let series: Vec<(String, Vec<Option<f64>>)> = series
        .iter()
        .take(MAX_SERIES)
        .map(|(name, vals)| {
            let vals = vals
                .iter()
                .take(cats.len())
                .map(|v| {
                    let keep = v.filter(|x| plottable(*x));
                    if v.is_some() && keep.is_none() {
                        left_out.out_of_range += 1;
                    }
                    keep
                })
                .collect();
            (name.clone(), vals)
        })
        .collect();
    let series = series.as_slice();
    let refs: Vec<RefLine> = refs.iter().filter(|r| plottable(r.y)).cloned().collect();
    let ncat = cats.len().max(1);
    let tops: Vec<f64> = if stacked {
        (0..ncat)
            .map(|c| {
                series
                    .iter()
                    .filter_map(|(_, v)| v.get(c).copied().flatten())
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .sum()
            })
            .collect()
    } else {
        series
            .iter()
            .flat_map(|(_, v)| v.iter().flatten().copied())
            .collect()
    };
    let drawn = || tops.iter().copied().chain(refs.iter().map(|r| r.y));
    let extent = Span {
        x: None,
        y: extent_of(drawn()),
    };
    let (lo, hi) = bounds(drawn().chain(ends(axes.span.y)));
    // Stacked parts only add up on a linear axis: on a log one each
    // segment's height is a ratio of sums, and the parts read wrong (the
    // pipeline's ticks were drawn so). The numbers under the figure give
    // a small stack its parts.
    let log = !stacked && wants_log(lo, hi) && log_fits(lo, hi);
    let (ylo, yhi) = if log {
        (lo * 0.5, hi * 1.6)
    } else {
        // From zero to the furthest bar either side; a range narrower
        // than MIN_ABS (no bar at all, or -1e-300 alone) spins the tick
        // code, so it becomes 0..1.
        let (bottom, top) = (lo.min(0.0) * 1.15, hi.max(0.0) * 1.15);
        if top - bottom < MIN_ABS {
            (0.0, 1.0)
        } else {
            (bottom, top)
        }
    };
    let by_category = !stacked && series.len() == 1;
    let cols = if by_category {
        colours(cats)
    } else {
        colours(&series.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>())
    };
    // A category name longer than its slot is cut (the numbers under
    // the figure have it whole).
    let fits = ((W as usize - 110) / ncat * 10 / 78).max(4);
    let shown = cut_labels(cats, fits);
    let label = |x: &f64| {
        let r = x.round();
        if (x - r).abs() < 1e-6 && r >= 0.0 {
            shown.get(r as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let (y_label, y_scale) = time_unit(axes.y, ylo, yhi, log);
    let y_desc = desc(&y_label, log);
    let title = title_in(axes.title, y_scale);
    let y_fmt = move |v: &f64| si(&(v / y_scale));
    let mut buf = String::new();
    {
        let root: DrawingArea<SVGBackend, Shift> =
            SVGBackend::with_string(&mut buf, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        let mut b = ChartBuilder::on(&root);
        b.caption(title.as_str(), ("sans-serif", TITLE_PX))
            .margin(12)
            .margin_right(right_margin(&refs))
            .x_label_area_size(52)
            .y_label_area_size(84);
        let xr = -0.5..(ncat as f64 - 0.5);
        let k = series.len().max(1) as f64;
        let w = 0.8 / if stacked { 1.0 } else { k };
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(perr)?;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .x_labels(ncat + 1)
                    .x_label_formatter(&label)
                    .x_desc(axes.x)
                    .y_desc(y_desc.as_str())
                    .axis_desc_style(("sans-serif", DESC_PX))
                    .label_style(("sans-serif", TICK_PX))
                    .y_labels(8)
                    .y_label_formatter(&y_fmt)
                    .draw()
                    .map_err(perr)?;
                let mut base = vec![if log { ylo } else { 0.0 }; ncat];
                for (j, (_, vals)) in series.iter().enumerate() {
                    let mut rects = Vec::new();
                    for (c, v) in vals.iter().enumerate().take(ncat) {
                        let Some(v) = v.filter(|v| v.is_finite() && (!log || *v > 0.0)) else {
                            continue;
                        };
                        let color = if by_category { cols[c] } else { cols[j] };
                        let (x0, y0, y1) = if stacked {
                            let y0 = base[c];
                            base[c] += v.max(0.0);
                            (c as f64 - w / 2.0, y0, base[c])
                        } else {
                            (
                                c as f64 - 0.4 + j as f64 * w,
                                if log { ylo } else { 0.0 },
                                v,
                            )
                        };
                        rects.push(Rectangle::new(
                            [(x0, y0), (x0 + w * 0.92, y1)],
                            color.filled(),
                        ));
                    }
                    chart.draw_series(rects).map_err(perr)?;
                    if !stacked {
                        // Error bars: the 95% interval of the median.
                        let mut whiskers = Vec::new();
                        for (c, iv) in intervals
                            .get(j)
                            .map(|v| v.as_slice())
                            .unwrap_or(&[])
                            .iter()
                            .enumerate()
                            .take(ncat)
                        {
                            let Some((lo, hi)) = iv.filter(|(lo, hi)| {
                                plottable(*lo) && plottable(*hi) && lo <= hi && (!log || *lo > 0.0)
                            }) else {
                                continue;
                            };
                            if vals.get(c).copied().flatten().is_none() {
                                continue;
                            }
                            let (lo, hi) = (lo.clamp(ylo, yhi), hi.clamp(ylo, yhi));
                            let xm = c as f64 - 0.4 + j as f64 * w + w * 0.46;
                            let cap = w * 0.2;
                            let ink = BLACK.stroke_width(1);
                            whiskers.push(PathElement::new(vec![(xm, lo), (xm, hi)], ink));
                            whiskers
                                .push(PathElement::new(vec![(xm - cap, lo), (xm + cap, lo)], ink));
                            whiskers
                                .push(PathElement::new(vec![(xm - cap, hi), (xm + cap, hi)], ink));
                        }
                        chart.draw_series(whiskers).map_err(perr)?;
                    }
                }
                draw_refs(&root, &mut chart, &refs, (-0.5, ncat as f64 - 0.5))?;
            }};
        }
        if log {
            let ticks = log_ticks(ylo, yhi);
            draw!(b.build_cartesian_2d(xr, (ylo..yhi).log_scale().with_key_points(ticks)))
        } else {
            draw!(b.build_cartesian_2d(xr, ylo..yhi))
        }
        root.present().map_err(perr)?;
    }
    let mut legend: Vec<LegendItem> = if by_category {
        Vec::new()
    } else {
        series
            .iter()
            .zip(&cols)
            .map(|((name, _), c)| LegendItem {
                name: name.clone(),
                colour: hex(*c),
                mark: "bar",
            })
            .collect()
    };
    legend.extend(ref_legend(&refs));
    checked(buf).map(|svg| Plot {
        svg,
        left_out,
        extent,
        legend,
        y_log: log,
        x_desc: axes.x.to_owned(),
        y_desc,
        title,
    })
}

#[cfg(test)]
mod tick_tests {
    use super::*;

    /// A log axis in µs ticked "0.01, 0.01" and "0" (5 ns, 10 ns and 2 ns
    /// over 1,000): every tick of a log axis now reads differently, and
    /// none reads 0.
    #[test]
    fn a_log_axis_had_duplicate_tick_labels_and_a_zero() {
        for (lo, hi) in [(2.0, 5_000.0), (1.5, 40_000.0), (0.3, 900.0), (8.0, 2e7)] {
            let (_, scale) = time_unit("latency (ns)", lo, hi, true);
            let ticks = log_ticks(lo, hi);
            let labels: Vec<String> = ticks.iter().map(|t| si(&(t / scale))).collect();
            let mut seen = std::collections::HashSet::new();
            for l in &labels {
                assert!(seen.insert(l.clone()), "{l} twice: {labels:?}");
                assert_ne!(l, "0", "{labels:?}");
            }
        }
        assert_eq!(si(&0.005), "0.005");
        assert_eq!(si(&0.01), "0.01");
        assert_eq!(si(&0.5), "0.5");
        assert_eq!(si(&12.345), "12.35");
        assert_eq!(si(&2000.0), "2k");
    }

    /// Titles said "(ns)" over axes drawn in µs (delay, ipc CPU per
    /// message, ipc p99): the title's unit is the axis's.
    #[test]
    fn a_title_said_ns_over_an_axis_in_microseconds() {
        let s = vec![Series {
            name: "a".into(),
            points: vec![(1.0, 5_000.0), (2.0, 9_000.0), (3.0, 12_000.0)],
        }];
        let p = line_plot(
            &Axes::new(
                "ipc: CPU per message vs sessions (ns)",
                "sessions",
                "CPU per message (ns)",
            ),
            &s,
            &[],
            &[],
        )
        .unwrap();
        assert!(p.y_desc.contains("(µs)"), "{}", p.y_desc);
        assert_eq!(p.title, "ipc: CPU per message vs sessions (µs)");
        assert!(
            p.svg.contains("(µs)</text>") || p.svg.contains("(µs)"),
            "title drawn"
        );
        assert!(!p.svg.contains("sessions (ns)"), "the drawn title");
        assert_eq!(
            title_in("delay: measured median vs requested (TSC spin, ns)", 1e3),
            "delay: measured median vs requested (TSC spin, µs)"
        );
        assert_eq!(title_in("a (ns)", 1.0), "a (ns)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = "<script>window.__pwned=1</script>";
    const IMG: &str = "\"><img src=x onerror=window.__pwned=2>";

    /// Titles, axis labels and series names are text inside `<text>`:
    /// escaped, and the drawn SVG holds drawing elements only.
    #[test]
    fn svg_text_of_titles_axes_and_series_names_is_escaped() {
        let series = [Series {
            name: format!("{S}{IMG}"),
            points: vec![(1.0, 2.0), (2.0, 3.0)],
        }];
        let svgs = [
            line_svg(S, IMG, S, &series).unwrap().svg,
            ladder_svg(IMG, &series).unwrap().svg,
            bar_svg(
                S,
                IMG,
                &[S.to_owned(), IMG.to_owned()],
                &[(IMG.to_owned(), vec![Some(1.0), Some(2.0)])],
                false,
            )
            .unwrap()
            .svg,
        ];
        for svg in svgs {
            assert!(!svg.contains("<script") && !svg.contains("<img"), "{svg}");
            assert!(svg.contains("&lt;script&gt;") || svg.contains("&lt;img"));
        }
    }

    /// Runs `f` on a thread and fails the test if it takes longer than
    /// 30 s (a plot that spins must fail, not hang the suite).
    fn within_30s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .expect("the plot did not finish within 30 s")
    }

    fn two(y0: f64, y1: f64) -> Vec<Series> {
        vec![Series {
            name: "s".into(),
            points: vec![(1.0, y0), (2.0, y1), (3.0, 3.0)],
        }]
    }

    /// 1.7e308 made plotters' log-axis tick code spin forever (1e307 did
    /// not); such values are left out and counted in the caption.
    #[test]
    fn a_metric_of_1_7e308_is_left_out_instead_of_hanging_the_plot() {
        let p = within_30s(|| line_svg("t", "x", "y", &two(1.0, 1.7e308)).unwrap());
        assert_eq!(p.left_out.out_of_range, 1);
        assert!(
            p.left_out.note().contains("1 value out of range"),
            "{}",
            p.left_out.note()
        );
        let p = within_30s(|| {
            ladder_svg(
                "t",
                &[Series {
                    name: "s".into(),
                    points: vec![(0.5, 1.0), (0.9, 2.0), (0.99, 1.7e308)],
                }],
            )
            .unwrap()
        });
        assert_eq!(p.left_out.out_of_range, 1);
        let p = within_30s(|| {
            bar_svg(
                "t",
                "y",
                &["a".into(), "b".into()],
                &[("s".into(), vec![Some(1.0), Some(1.7e308)])],
                false,
            )
            .unwrap()
        });
        assert_eq!(p.left_out.out_of_range, 1);
    }

    /// Other values that spun plotters: 1e308 in a bar (padded past
    /// f64::MAX), a subnormal against 1 on a log axis, a log span whose
    /// ratio overflows (1e-155..1e155), bars of -1e-300 only, NaN and
    /// infinities. Every one draws (or is left out) within the bound.
    #[test]
    fn extreme_values_draw_within_bounds() {
        let cases = [
            (1.0, 1e308),
            (5e-324, 1.0),
            (5e-324, 1e-320),
            (1e-155, 1e155),
            (1e-300, 1e300),
            (-1e300, -1e-300),
            (f64::NAN, f64::INFINITY),
            (1.0, 1.0 + f64::EPSILON),
        ];
        for (a, b) in cases {
            let p = within_30s(move || line_svg("t", "x", "y", &two(a, b)).unwrap());
            assert!(p.svg.contains("<svg"), "{a:e} {b:e}");
            within_30s(move || {
                ladder_svg(
                    "t",
                    &[Series {
                        name: "s".into(),
                        points: vec![(0.5, a), (0.9, b), (0.99, 3.0)],
                    }],
                )
                .unwrap()
            });
            for stacked in [false, true] {
                within_30s(move || {
                    bar_svg(
                        "t",
                        "y",
                        &["a".into(), "b".into()],
                        &[("s".into(), vec![Some(a), Some(b)])],
                        stacked,
                    )
                    .unwrap()
                });
            }
        }
        assert!(!plottable(1.7e308) && !plottable(5e-324) && !plottable(f64::NAN));
        assert!(plottable(0.0) && plottable(-1e300) && plottable(1e-300));
    }

    /// One figure draws at most MAX_SERIES series of MAX_POINTS points,
    /// whatever it is given, and says what it left out, naming the series
    /// (issue 34: "12 series not drawn" said neither which nor where).
    #[test]
    fn a_figure_is_bounded_in_series_and_points_and_names_the_series_left_out() {
        let series: Vec<Series> = (0..40)
            .map(|i| Series {
                name: format!("s{i}"),
                points: (0..10_000)
                    .map(|x| (f64::from(x), f64::from(x * i)))
                    .collect(),
            })
            .collect();
        let p = within_30s(move || line_svg("t", "x", "y", &series).unwrap());
        assert_eq!(p.left_out.series.len(), 40 - MAX_SERIES);
        assert_eq!(p.left_out.series[0], "s12");
        assert_eq!(p.left_out.points, MAX_SERIES * (10_000 - MAX_POINTS));
        assert!(p.svg.len() < 4 << 20, "{} bytes", p.svg.len());
        let note = p.left_out.note();
        assert!(
            note.contains("28 series past the first 12 (“s12”, “s13”,"),
            "{note}"
        );
        assert!(note.contains("“s39”)"), "{note}");
        assert!(note.contains("lab's table of records below"), "{note}");
        let cats: Vec<String> = (0..100).map(|i| format!("c{i}")).collect();
        let bars: Vec<(String, Vec<Option<f64>>)> = (0..30)
            .map(|i| (format!("b{i}"), vec![Some(1.0); 100]))
            .collect();
        let p = bar_svg("t", "y", &cats, &bars, false).unwrap();
        assert_eq!(
            (p.left_out.categories.len(), p.left_out.series.len()),
            (100 - MAX_CATEGORIES, 30 - MAX_SERIES)
        );
        assert_eq!(
            (
                p.left_out.categories[0].as_str(),
                p.left_out.series[0].as_str()
            ),
            ("c24", "b12")
        );
    }

    #[test]
    fn log_axes_keep_labelled_ticks_over_a_short_span() {
        assert_eq!(log_ticks(0.03, 0.6), vec![0.05, 0.1, 0.2, 0.5]);
        // Thirteen 1-2-5 ticks are too many: the powers of ten.
        assert_eq!(log_ticks(1.0, 1e4), vec![1.0, 10.0, 100.0, 1e3, 1e4]);
        assert!(log_ticks(1e-300, 1e300).len() <= 13);
    }

    #[test]
    fn two_long_category_names_are_not_cut_to_the_same_label() {
        // Issue 34: two `clock_gettime_m…` bars.
        let cats = vec![
            "clock_gettime_monotonic".to_owned(),
            "clock_gettime_monotonic_raw".to_owned(),
            "rdtsc".to_owned(),
            "a_long_name_of_its_own_kind".to_owned(),
        ];
        let shown = super::cut_labels(&cats, 16);
        assert_ne!(shown[0], shown[1], "{shown:?}");
        assert_eq!(shown[0], "clock_g…onotonic");
        assert_eq!(shown[1], "clock_g…onic_raw");
        assert_eq!(shown[2], "rdtsc");
        assert_eq!(shown[3], "a_long_name_of_…");
    }

    #[test]
    fn a_nanosecond_axis_reads_in_ms_or_us_not_50m() {
        // Issue 34: latency axes ticked "50M" under "(ns)".
        let (l, d) = super::time_unit("latency p99 (ns)", 0.0, 5.5e7, false);
        assert_eq!((l.as_str(), d), ("latency p99 (ms)", 1e6));
        assert_eq!(super::si(&(5e7 / d)), "50");
        let (l, d) = super::time_unit("latency p99 (ns)", 0.0, 20_000.0, false);
        assert_eq!((l.as_str(), d), ("latency p99 (µs)", 1e3));
        // A log axis from 100 ns keeps a unit its lowest tick reads in.
        let (l, _) = super::time_unit("latency (ns)", 100.0, 5e7, true);
        assert_eq!(l, "latency (µs)");
        assert_eq!(
            super::time_unit("latency (ns)", 0.0, 800.0, false),
            ("latency (ns)".to_owned(), 1.0)
        );
        assert_eq!(super::time_unit("rate (Mpps)", 0.0, 5e7, false).1, 1.0);
    }

    #[test]
    fn tick_labels_stay_short_at_extreme_values() {
        assert_eq!(si(&1e300), "1.0e300");
        assert_eq!(si(&-2.5e-200), "-2.5e-200");
        assert_eq!(si(&20_000_000.0), "20M");
        assert_eq!(si(&1500.0), "1.5k");
        assert_eq!(si(&0.0), "0");
        assert_eq!(si(&0.25), "0.25");
    }

    #[test]
    fn svg_with_markup_other_than_drawing_is_refused() {
        assert!(checked("<svg><text>a</text>\n<rect/></svg>".into()).is_ok());
        for bad in [
            "<svg><script>x</script></svg>",
            "<svg><foreignObject/></svg>",
            "<svg><textarea></svg>",
            "<svg>< script></svg>",
        ] {
            assert!(checked(bad.into()).is_err(), "{bad}");
        }
    }
}
