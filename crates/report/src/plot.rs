//! SVG plots with plotters' SVG backend (text is emitted as `<text>`, so no
//! font files or C libraries are needed). Axes switch to a log scale when
//! the data span more than two decades (sessions 1…1000, delays 10 ns…10 µs).

use crate::ReportError;
use plotters::coord::Shift;
use plotters::prelude::*;

/// One named line of (x, y) points.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const W: u32 = 760;
const H: u32 = 420;

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
    if lo == hi {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return (lo - pad, hi + pad);
    }
    (lo, hi)
}

fn wants_log(lo: f64, hi: f64) -> bool {
    lo > 0.0 && hi / lo > 100.0
}

/// Axis tick text: 1.5k, 20M, 3G instead of 20000000.0.
pub fn si(v: &f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (*v, "")
    };
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

fn draw_series<'a, DB: DrawingBackend + 'a, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[Series],
) -> Result<(), ReportError>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
    DB::ErrorType: 'static,
{
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(perr)?
            .label(s.name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
            });
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(perr)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 12))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(perr)?;
    Ok(())
}

fn render(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    x_log: bool,
    y_log: bool,
) -> Result<String, ReportError> {
    let (xlo, xhi) = bounds(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let (ylo, yhi) = bounds(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let x_log = x_log && xlo > 0.0;
    let y_log = y_log && ylo > 0.0;
    let (ylo, yhi) = if y_log {
        (ylo * 0.8, yhi * 1.25)
    } else {
        (ylo.min(0.0), yhi * 1.1)
    };
    let mut buf = String::new();
    {
        let root: DrawingArea<SVGBackend, Shift> =
            SVGBackend::with_string(&mut buf, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        let mut b = ChartBuilder::on(&root);
        b.caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70);
        macro_rules! finish {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(perr)?;
                chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .label_style(("sans-serif", 11))
                    .x_label_formatter(&si)
                    .y_label_formatter(&si)
                    .draw()
                    .map_err(perr)?;
                draw_series(&mut chart, series)?;
            }};
        }
        match (x_log, y_log) {
            (true, true) => {
                finish!(b.build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale()))
            }
            (true, false) => finish!(b.build_cartesian_2d((xlo..xhi).log_scale(), ylo..yhi)),
            (false, true) => finish!(b.build_cartesian_2d(xlo..xhi, (ylo..yhi).log_scale())),
            (false, false) => finish!(b.build_cartesian_2d(xlo..xhi, ylo..yhi)),
        }
        root.present().map_err(perr)?;
    }
    checked(buf)
}

/// A line plot of y against x, log axes where the data span > 100×.
pub fn line_svg(title: &str, x: &str, y: &str, series: &[Series]) -> Result<String, ReportError> {
    let (xlo, xhi) = bounds(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let (ylo, yhi) = bounds(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    render(
        title,
        x,
        y,
        series,
        wants_log(xlo, xhi),
        wants_log(ylo, yhi),
    )
}

/// A percentile ladder: x = 1/(1−q) on a log axis (p50 → 2, p99 → 100,
/// p99.99 → 10⁴), y = latency in ns on a log axis — the tail made visible.
pub fn ladder_svg(title: &str, series: &[Series]) -> Result<String, ReportError> {
    let s: Vec<Series> = series
        .iter()
        .map(|s| Series {
            name: s.name.clone(),
            points: s
                .points
                .iter()
                .map(|&(q, v)| (1.0 / (1.0 - q), v))
                .collect(),
        })
        .collect();
    render(
        title,
        "1/(1-q): 2 = p50, 100 = p99, 10000 = p99.99",
        "ns",
        &s,
        true,
        true,
    )
}

/// Bars over categories: `values[s][c]` is series `s` at category `c`
/// (None: no bar). Grouped side by side, or stacked when `stacked` (the
/// series are then the parts of each bar). Log y when the values span more
/// than 100× (grouped only).
pub fn bar_svg(
    title: &str,
    y_desc: &str,
    cats: &[String],
    series: &[(String, Vec<Option<f64>>)],
    stacked: bool,
) -> Result<String, ReportError> {
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
    let (lo, hi) = bounds(tops.iter().copied());
    let log = !stacked && wants_log(lo, hi);
    let (ylo, yhi) = if log {
        (lo * 0.5, hi * 1.6)
    } else {
        (0.0, hi.max(0.0) * 1.15 + f64::MIN_POSITIVE)
    };
    let label = |x: &f64| {
        let r = x.round();
        if (x - r).abs() < 1e-6 && r >= 0.0 {
            cats.get(r as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let mut buf = String::new();
    {
        let root: DrawingArea<SVGBackend, Shift> =
            SVGBackend::with_string(&mut buf, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(perr)?;
        let mut b = ChartBuilder::on(&root);
        b.caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70);
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
                    .y_desc(y_desc)
                    .label_style(("sans-serif", 11))
                    .y_label_formatter(&si)
                    .draw()
                    .map_err(perr)?;
                let mut base = vec![if log { ylo } else { 0.0 }; ncat];
                for (j, (name, vals)) in series.iter().enumerate() {
                    let color = Palette99::pick(j).to_rgba();
                    let mut rects = Vec::new();
                    for (c, v) in vals.iter().enumerate().take(ncat) {
                        let Some(v) = v.filter(|v| v.is_finite() && (!log || *v > 0.0)) else {
                            continue;
                        };
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
                    chart
                        .draw_series(rects)
                        .map_err(perr)?
                        .label(name.clone())
                        .legend(move |(x, y)| {
                            Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                        });
                }
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.3))
                    .label_font(("sans-serif", 12))
                    .position(SeriesLabelPosition::UpperRight)
                    .draw()
                    .map_err(perr)?;
            }};
        }
        if log {
            draw!(b.build_cartesian_2d(xr, (ylo..yhi).log_scale()))
        } else {
            draw!(b.build_cartesian_2d(xr, ylo..yhi))
        }
        root.present().map_err(perr)?;
    }
    checked(buf)
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
            line_svg(S, IMG, S, &series).unwrap(),
            ladder_svg(IMG, &series).unwrap(),
            bar_svg(
                S,
                IMG,
                &[S.to_owned(), IMG.to_owned()],
                &[(IMG.to_owned(), vec![Some(1.0), Some(2.0)])],
                false,
            )
            .unwrap(),
        ];
        for svg in svgs {
            assert!(!svg.contains("<script") && !svg.contains("<img"), "{svg}");
            assert!(svg.contains("&lt;script&gt;") || svg.contains("&lt;img"));
        }
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
