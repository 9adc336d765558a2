//! Which plots a lab's records get, and building them: the lab's declared
//! figures (line, grouped or stacked bars, percentile ladders from
//! [`FigureSpec`]), else a line plot guessed from the records' shape; then
//! a percentile ladder for every latency summary. Invariants: repeats are
//! drawn as their median; a figure is drawn only when its records fill it
//! (a line series needs two points, a ladder three quantiles); a lab that
//! declares figures never gets a guessed line; overlaid runs are told apart
//! by [`RUN_PARAM`], which prefixes their series names. Records are grouped
//! in one pass through hash maps (linear in the records, whatever a file
//! holds), and what a figure leaves out to stay drawable (values out of
//! range, series, categories and points past the bounds of
//! [`crate::plot`]) is said in its caption.

use crate::compare::headline_metric;
use crate::plot::{self, ladder_svg, line_svg, Plot, Series, MAX_CATEGORIES, MAX_SERIES};
use crate::ReportError;
use commbench_core::figure::{FigureKind, FigureSpec};
use commbench_core::record::Record;
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// A plot made from a group of records.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub title: String,
    pub svg: String,
    /// What the figure answers (declared figures only), and what it left
    /// out, if anything.
    pub caption: String,
}

impl Figure {
    fn new(title: String, caption: &str, plot: Plot) -> Figure {
        Figure {
            title,
            caption: format!("{caption}{}", plot.left_out.note()),
            svg: plot.svg,
        }
    }
}

/// Draws the declared figures of a lab that its records can fill (at
/// least one series with two points).
pub fn declared_figures(
    lab: &str,
    records: &[&Record],
    specs: &[FigureSpec],
) -> Result<Vec<Figure>, ReportError> {
    let mut figs = Vec::new();
    for spec in specs.iter().filter(|s| s.lab == lab) {
        let fig = match spec.kind {
            FigureKind::Line => line_figure(spec, records)?,
            FigureKind::Bar => bar_figure(spec, records, &[spec.y], false)?,
            FigureKind::Stacked(parts) => bar_figure(spec, records, parts, true)?,
            FigureKind::Ladder(qs) => ladder_figure(spec, records, qs)?,
        };
        figs.extend(fig);
    }
    Ok(figs)
}

/// A series name with the run it came from when several runs are overlaid.
fn run_series(spec: &FigureSpec, r: &Record) -> String {
    let name = spec.series_name(r);
    match r.params.get(RUN_PARAM).and_then(Value::as_str) {
        Some(run) => format!("{run}: {name}"),
        None => name,
    }
}

/// The parameter the report adds to records when it overlays several runs.
pub const RUN_PARAM: &str = "run";

fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    commbench_core::stats::percentile_sorted(&v, 0.5)
}

fn text_of(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// The index of `key` in `order`, added at the end when new.
fn index_of(order: &mut Vec<String>, index: &mut HashMap<String, usize>, key: String) -> usize {
    if let Some(&i) = index.get(&key) {
        return i;
    }
    order.push(key.clone());
    index.insert(key, order.len() - 1);
    order.len() - 1
}

/// Bars: categories are the values of `spec.x`; grouped bars are one per
/// series (y = `metrics[0]`), stacked bars one per category and series
/// with `metrics` as the parts; medians over repeats.
/// A record's 95% interval of a metric, when it carries one.
type Interval = Option<(f64, f64)>;

fn bar_figure(
    spec: &FigureSpec,
    records: &[&Record],
    metrics: &[&str],
    stacked: bool,
) -> Result<Option<Figure>, ReportError> {
    let (mut cats, mut cat_ix) = (Vec::new(), HashMap::new());
    let (mut names, mut name_ix) = (Vec::new(), HashMap::new());
    // (category, series name, metric) -> samples, for the drawn ones only.
    let mut samples: HashMap<(usize, usize, usize), Vec<f64>> = HashMap::new();
    // The same key -> the 95% interval each contributing record carries
    // (its repeats'), when it carries one.
    let mut intervals: HashMap<(usize, usize, usize), Vec<Interval>> = HashMap::new();
    for r in records.iter().filter(|r| spec.accepts(r)) {
        let Some(x) = r.params.get(spec.x) else {
            continue;
        };
        let (cat_name, series) = if stacked {
            let s = run_series(spec, r);
            let c = if spec.series.is_empty() && r.params.get(RUN_PARAM).is_none() {
                text_of(x)
            } else {
                format!("{} {s}", text_of(x))
            };
            (c, None)
        } else {
            (text_of(x), Some(run_series(spec, r)))
        };
        for (mi, m) in metrics.iter().enumerate() {
            let Some(y) = r.metric_f64(m).filter(|y| y.is_finite()) else {
                continue;
            };
            let ci = index_of(&mut cats, &mut cat_ix, cat_name.clone());
            let sname = series.clone().unwrap_or_else(|| (*m).to_owned());
            let si = index_of(&mut names, &mut name_ix, sname);
            if ci < MAX_CATEGORIES && si < MAX_SERIES {
                samples.entry((ci, si, mi)).or_default().push(y);
                let iv = r
                    .metric_f64(&format!("{m}_lo"))
                    .zip(r.metric_f64(&format!("{m}_hi")));
                intervals.entry((ci, si, mi)).or_default().push(iv);
            }
        }
    }
    if cats.is_empty() || names.is_empty() {
        return Ok(None);
    }
    let (all_cats, all_names) = (cats.len(), names.len());
    cats.truncate(MAX_CATEGORIES);
    names.truncate(MAX_SERIES);
    let series: Vec<(String, Vec<Option<f64>>)> = names
        .iter()
        .enumerate()
        .map(|(si, n)| {
            let vals = (0..cats.len())
                .map(|ci| {
                    // The first metric with samples (grouped bars have one).
                    (0..metrics.len())
                        .find_map(|mi| samples.get(&(ci, si, mi)))
                        .map(|v| median_of(v.clone()))
                })
                .collect();
            (n.clone(), vals)
        })
        .collect();
    // A bar drawn from one record with an interval gets an error bar; a
    // bar that is the median of several records (overlaid runs) does not.
    let bars: Vec<Vec<Option<(f64, f64)>>> = (0..names.len())
        .map(|si| {
            (0..cats.len())
                .map(|ci| {
                    (0..metrics.len())
                        .find_map(|mi| intervals.get(&(ci, si, mi)))
                        .and_then(|v| match v.as_slice() {
                            [one] => *one,
                            _ => None,
                        })
                })
                .collect()
        })
        .collect();
    let with_intervals = !stacked && bars.iter().flatten().any(Option::is_some);
    let y_desc = if stacked { "" } else { spec.y };
    let mut plot =
        plot::bar_svg_with_intervals(spec.title, y_desc, &cats, &series, stacked, &bars)?;
    plot.left_out.categories += all_cats - cats.len();
    plot.left_out.series += all_names - names.len();
    let caption = if stacked {
        spec.caption.to_owned()
    } else if with_intervals {
        format!(
            "{} Error bars: the 95% interval of the median over the repeated runs.",
            spec.caption
        )
    } else {
        format!(
            "{} No error bars: these records carry no repeats (one run each).",
            spec.caption
        )
    };
    Ok(Some(Figure::new(spec.title.to_owned(), &caption, plot)))
}

/// One percentile ladder per series (the median of each quantile over
/// repeats).
fn ladder_figure(
    spec: &FigureSpec,
    records: &[&Record],
    qs: &[(f64, &str)],
) -> Result<Option<Figure>, ReportError> {
    let mut by_series: Vec<(String, Vec<Vec<f64>>)> = Vec::new();
    let mut ix: HashMap<String, usize> = HashMap::new();
    for r in records.iter().filter(|r| spec.accepts(r)) {
        let name = run_series(spec, r);
        let i = match ix.get(&name) {
            Some(&i) => i,
            None => {
                ix.insert(name.clone(), by_series.len());
                by_series.push((name, vec![Vec::new(); qs.len()]));
                by_series.len() - 1
            }
        };
        for (k, (_, m)) in qs.iter().enumerate() {
            if let Some(v) = r.metric_f64(m).filter(|v| v.is_finite() && *v > 0.0) {
                by_series[i].1[k].push(v);
            }
        }
    }
    let series: Vec<Series> = by_series
        .into_iter()
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
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    let plot = ladder_svg(spec.title, &series)?;
    Ok(Some(Figure::new(spec.title.to_owned(), spec.caption, plot)))
}

fn line_figure(spec: &FigureSpec, records: &[&Record]) -> Result<Option<Figure>, ReportError> {
    // (series, x) -> y samples (repeats, several runs): the median is drawn.
    let mut samples: Vec<(String, f64, Vec<f64>)> = Vec::new();
    let mut ix: HashMap<(String, u64), usize> = HashMap::new();
    for r in records.iter().filter(|r| spec.accepts(r)) {
        let (Some(x), Some(y)) = (r.params.get(spec.x).and_then(num), r.metric_f64(spec.y)) else {
            continue;
        };
        let name = run_series(spec, r);
        // -0.0 and 0.0 are one x.
        let key = (name, (x + 0.0).to_bits());
        match ix.get(&key) {
            Some(&i) => samples[i].2.push(y),
            None => {
                ix.insert(key.clone(), samples.len());
                samples.push((key.0, x, vec![y]));
            }
        }
    }
    let series = group_series(samples.into_iter().map(|(n, x, ys)| (n, x, median_of(ys))));
    if series.is_empty() {
        return Ok(None);
    }
    let plot = line_svg(spec.title, spec.x, spec.y, &series)?;
    Ok(Some(Figure::new(spec.title.to_owned(), spec.caption, plot)))
}

/// (series name, x, y) points as series in first-seen order, each sorted
/// by x; series of fewer than two points are dropped.
fn group_series(points: impl Iterator<Item = (String, f64, f64)>) -> Vec<Series> {
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
    series.retain(|s| s.points.len() >= 2);
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// Parameter names in first-seen order; those whose value differs
/// between records (the ones worth naming a series by), each with its
/// place in that order; and whether the test names differ. One pass over
/// the records' parameters.
fn varying(records: &[&Record]) -> (Vec<String>, HashMap<String, usize>, bool) {
    let mut keys: Vec<String> = Vec::new();
    let mut pos: HashMap<&str, usize> = HashMap::new();
    let mut differs: HashSet<&str> = HashSet::new();
    let first = records.first();
    let mut tests_differ = false;
    for r in records {
        tests_differ |= Some(&r.test) != first.map(|f| &f.test);
        for (k, v) in &r.params {
            if !pos.contains_key(k.as_str()) {
                pos.insert(k, keys.len());
                keys.push(k.clone());
            }
            if first.and_then(|f| f.params.get(k)) != Some(v) {
                differs.insert(k);
            }
        }
        if let Some(f) = first {
            // Keys of the first record that this one lacks.
            differs.extend(
                f.params
                    .keys()
                    .filter(|k| !r.params.contains_key(*k))
                    .map(String::as_str),
            );
        }
    }
    let vary = differs
        .into_iter()
        .map(|k| (k.to_owned(), pos[k]))
        .collect();
    (keys, vary, tests_differ)
}

/// A record's series name from its varying parameters (in first-seen
/// order), `skip` left out; the test first when tests differ.
fn series_name(
    r: &Record,
    vary: &HashMap<String, usize>,
    tests_differ: bool,
    skip: &str,
) -> String {
    let mut parts = Vec::new();
    if tests_differ {
        parts.push(r.test.clone());
    }
    let mut own: Vec<(usize, &String, &Value)> = r
        .params
        .iter()
        .filter(|(k, _)| *k != skip)
        .filter_map(|(k, v)| vary.get(k).map(|&p| (p, k, v)))
        .collect();
    own.sort_by_key(|(p, ..)| *p);
    for (_, k, v) in own {
        parts.push(format!("{k}={}", v.to_string().trim_matches('"')));
    }
    if parts.is_empty() {
        r.test.clone()
    } else {
        parts.join(" ")
    }
}

/// Plots of one lab's records: the lab's declared figures, or, when it
/// declares none that its records fill, a line plot guessed from the
/// records; then the latency percentile ladders.
pub fn figures_for_lab(
    lab: &str,
    records: &[&Record],
    specs: &[FigureSpec],
) -> Result<Vec<Figure>, ReportError> {
    let mut figs = declared_figures(lab, records, specs)?;
    // A lab that declares figures gets those only: no line guessed
    // through its categories.
    let declared = !figs.is_empty() || specs.iter().any(|s| s.lab == lab);
    let (keys, vary, tests_differ) = varying(records);
    // x axis: the first numeric parameter with ≥ 2 distinct values over the
    // lab (one pass: each key's first value, and whether another followed).
    let mut firsts: HashMap<&str, (f64, bool)> = HashMap::new();
    for r in records {
        for (k, v) in &r.params {
            if let Some(x) = num(v) {
                let e = firsts.entry(k).or_insert((x, false));
                e.1 |= e.0 != x;
            }
        }
    }
    let x_key = keys
        .iter()
        .find(|k| firsts.get(k.as_str()).is_some_and(|e| e.1));
    let y_key = if declared || x_key.is_none() {
        None
    } else {
        let owned: Vec<Record> = records.iter().map(|r| (*r).clone()).collect();
        headline_metric(&owned, &[])
    };
    if let (Some(x_key), Some(y_key)) = (x_key, y_key) {
        let series = group_series(records.iter().filter_map(|r| {
            let x = r.params.get(x_key).and_then(num)?;
            let y = r.metric_f64(&y_key)?;
            Some((series_name(r, &vary, tests_differ, x_key), x, y))
        }));
        if !series.is_empty() {
            let title = format!("{lab}: {y_key} vs {x_key}");
            let plot = line_svg(&title, x_key, &y_key, &series)?;
            figs.push(Figure::new(title, "", plot));
        }
    }
    // Percentile ladders: every metric object with p50 … max; the first
    // MAX_SERIES are drawn, the others counted.
    let mut ladders: Vec<Series> = Vec::new();
    let mut more = 0;
    for r in records {
        for (k, v) in &r.metrics {
            let Some(o) = v.as_object() else { continue };
            let qs = [
                ("p50", 0.5),
                ("p90", 0.9),
                ("p99", 0.99),
                ("p999", 0.999),
                ("p9999", 0.9999),
            ];
            let pts: Vec<(f64, f64)> = qs
                .iter()
                .filter_map(|(name, q)| o.get(*name).and_then(num).map(|v| (*q, v)))
                .collect();
            if pts.len() >= 3 {
                if ladders.len() < MAX_SERIES {
                    ladders.push(Series {
                        name: format!("{} {k}", series_name(r, &vary, tests_differ, "")),
                        points: pts,
                    });
                } else {
                    more += 1;
                }
            }
        }
    }
    if !ladders.is_empty() {
        let title = format!("{lab}: latency percentiles");
        let mut plot = ladder_svg(&title, &ladders)?;
        plot.left_out.series += more;
        figs.push(Figure::new(title, "", plot));
    }
    Ok(figs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::rec;

    #[test]
    fn declared_figures_replace_the_guessed_plot() {
        let spec = FigureSpec {
            kind: FigureKind::Line,
            lab: "ipc",
            test: "reqres",
            title: "declared: rate over sessions",
            caption: "what it answers",
            x: "sessions",
            y: "msgs_per_s",
            series: &["transport"],
            filter: Some(|r| r.params.get("sessions").and_then(|v| v.as_u64()) != Some(99)),
        };
        let recs: Vec<Record> = (1..=4)
            .map(|s| rec("reqres", s, 1000.0 * s as f64))
            .collect();
        let refs: Vec<&Record> = recs.iter().collect();
        let figs = figures_for_lab("ipc", &refs, &[spec]).unwrap();
        assert_eq!(figs[0].title, "declared: rate over sessions");
        assert_eq!(figs[0].caption, "what it answers");
        assert!(!figs.iter().any(|f| f.title.contains("vs sessions")));
        // A lab that declares figures gets no guessed line, even when its
        // records fill none of them; a lab that declares none does.
        let other = FigureSpec {
            x: "nothing",
            ..spec
        };
        let figs = figures_for_lab("ipc", &refs, &[other]).unwrap();
        assert!(!figs.iter().any(|f| f.title.contains("vs sessions")));
        let figs = figures_for_lab("ipc", &refs, &[]).unwrap();
        assert!(figs.iter().any(|f| f.title.contains("vs sessions")));
    }

    #[test]
    fn bars_of_repeated_runs_carry_error_bars_and_say_so() {
        let bar = FigureSpec {
            kind: FigureKind::Bar,
            lab: "ipc",
            test: "reqres",
            title: "bars",
            caption: "Rates.",
            x: "transport",
            y: "msgs_per_s",
            series: &[],
            filter: None,
        };
        let with = |t: &str, v: f64, iv: Option<(f64, f64)>| {
            let mut r = Record::new("ipc", "reqres")
                .param("transport", t)
                .metric("msgs_per_s", v);
            if let Some((lo, hi)) = iv {
                r.push_metric("msgs_per_s_lo", lo);
                r.push_metric("msgs_per_s_hi", hi);
            }
            r
        };
        let recs = [
            with("shm", 100.0, Some((90.0, 120.0))),
            with("uds", 50.0, Some((45.0, 52.0))),
        ];
        let refs: Vec<&Record> = recs.iter().collect();
        let figs = declared_figures("ipc", &refs, &[bar]).unwrap();
        assert!(
            figs[0].caption.contains("Error bars"),
            "{}",
            figs[0].caption
        );
        // Three strokes (whisker and two caps) per bar.
        let paths = |svg: &str| svg.matches("<polyline").count() + svg.matches("<path").count();
        let plain = [with("shm", 100.0, None), with("uds", 50.0, None)];
        let refs2: Vec<&Record> = plain.iter().collect();
        let figs2 = declared_figures("ipc", &refs2, &[bar]).unwrap();
        assert!(
            figs2[0].caption.contains("No error bars"),
            "{}",
            figs2[0].caption
        );
        assert_eq!(
            paths(&figs[0].svg),
            paths(&figs2[0].svg) + 6,
            "one whisker and two caps per bar"
        );
    }

    #[test]
    fn categorical_x_draws_bars_and_stacked_parts_add_up() {
        let bar = FigureSpec {
            kind: FigureKind::Bar,
            lab: "ipc",
            test: "reqres",
            title: "bars",
            caption: "",
            x: "transport",
            y: "msgs_per_s",
            series: &[],
            filter: None,
        };
        let recs: Vec<Record> = ["shm", "uds", "shm"]
            .iter()
            .zip([100.0, 50.0, 300.0])
            .map(|(t, v)| {
                Record::new("ipc", "reqres")
                    .param("transport", *t)
                    .metric("msgs_per_s", v)
                    .metric("cpu_a", 1.0)
                    .metric("cpu_b", 2.0)
            })
            .collect();
        let refs: Vec<&Record> = recs.iter().collect();
        let figs = declared_figures("ipc", &refs, &[bar]).unwrap();
        assert_eq!(figs.len(), 1);
        // Two categories, two bars, no line through them; labels drawn.
        let svg = &figs[0].svg;
        let texts: Vec<String> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| {
                t.split_once('>')
                    .map(|(_, rest)| rest.split('<').next().unwrap_or("").trim().to_owned())
            })
            .collect();
        assert!(
            texts.iter().any(|t| t == "shm") && texts.iter().any(|t| t == "uds"),
            "{texts:?}"
        );
        assert!(svg.matches("<rect").count() >= 3, "{svg}");
        let stacked = FigureSpec {
            kind: FigureKind::Stacked(&["cpu_a", "cpu_b"]),
            ..bar
        };
        let figs = declared_figures("ipc", &refs, &[stacked]).unwrap();
        assert!(figs[0].svg.contains("cpu_a") && figs[0].svg.contains("cpu_b"));
    }
}
