//! The HTML report: one self-contained page (no external resources) for
//! one or several runs, rendered through the minijinja template
//! `templates/report.html`: each lab's question and answer (one line per
//! run when several are overlaid), the machine, compare's verdicts between
//! runs of the same preset, per-lab figures and tables, and every run's
//! environment.
//!
//! Invariants: a section is a registry lab (`core` holds the `timer`,
//! `budget` and `delay` records), so the summary's link to it resolves;
//! several runs are overlaid in the same figures, each record tagged with
//! its run under [`RUN_PARAM`], while answers and verdicts are computed
//! per run, never over a mix; "what changed" compares only runs of the
//! same preset and lists the others as not comparable; each test's table
//! shows the parameters that vary and the declared headline metrics with
//! units, every other field in a collapsed block; `suite` records get no
//! section.

use crate::compare::Change;
use crate::figures::{figures_for_lab, value, Figure, RUN_PARAM};
use crate::load::Loaded;
use crate::summary;
use crate::verdicts::{Comparison, Past, Policy, Run};
use crate::ReportError;
use commbench_core::figure::FigureSpec;
use commbench_core::lab::Lab;
use commbench_core::record::Record;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// A table cell: the text shown (long text cut, the whole of it on
/// hover) and whether it is a number (right-aligned).
#[derive(Debug, Clone, Serialize)]
struct Cell {
    text: String,
    /// The whole text when `text` was cut, else empty.
    full: String,
    n: bool,
}

/// Characters a cell shows before it is cut (the rest on hover).
const CELL_CHARS: usize = 28;

impl Cell {
    fn new(text: String, n: bool) -> Cell {
        if text.chars().count() > CELL_CHARS {
            let cut: String = text.chars().take(CELL_CHARS - 1).collect();
            Cell {
                text: format!("{cut}…"),
                full: text,
                n,
            }
        } else {
            Cell {
                text,
                full: String::new(),
                n,
            }
        }
    }
}

/// One test's table: the columns that matter, and every field collapsed.
#[derive(Serialize)]
struct TestTable {
    name: String,
    columns: Vec<String>,
    rows: Vec<Vec<Cell>>,
    all_columns: Vec<String>,
    all_rows: Vec<Vec<Cell>>,
    /// What the table leaves out ("" when nothing).
    note: String,
    /// Codes among its parameters' values spelt out ("goal 1f4d0l50e1w:
    /// final trial 1 s, …"; empty when none).
    legend: Vec<String>,
}

#[derive(Serialize)]
struct LabSection {
    lab: String,
    figures: Vec<Figure>,
    tables: Vec<TestTable>,
    /// What the section leaves out ("" when nothing).
    note: String,
}

/// Figures on one page (each lab's figures until this many are drawn).
pub const MAX_PAGE_FIGURES: usize = 200;
/// Rows of one test's table shown on the page.
pub const MAX_TABLE_ROWS: usize = 5_000;
/// Columns of one test's "all fields" table shown on the page.
pub const MAX_TABLE_COLUMNS: usize = 300;

/// Every field of a test's records: one row per record (at most
/// [`MAX_TABLE_ROWS`]), one column per flattened parameter or metric in
/// first-seen order (at most [`MAX_TABLE_COLUMNS`]), and a note of what
/// was left out.
fn all_fields(records: &[&Record]) -> (Vec<String>, Vec<Vec<Cell>>, String) {
    let mut cols: Vec<String> = Vec::new();
    let mut col_ix: HashMap<String, usize> = HashMap::new();
    let mut more_cols = 0usize;
    let mut rows = Vec::new();
    for r in records.iter().take(MAX_TABLE_ROWS) {
        let mut v = Vec::new();
        for (k, x) in &r.params {
            commbench_core::record::flatten(k, x, &mut v);
        }
        for (k, x) in &r.metrics {
            commbench_core::record::flatten(k, x, &mut v);
        }
        let mut row: Vec<Option<Cell>> = vec![None; cols.len()];
        for (k, x) in v {
            let i = match col_ix.get(&k) {
                Some(&i) => i,
                None if cols.len() < MAX_TABLE_COLUMNS => {
                    col_ix.insert(k.clone(), cols.len());
                    cols.push(k);
                    row.push(None);
                    cols.len() - 1
                }
                None => {
                    more_cols += 1;
                    continue;
                }
            };
            row[i] = Some(Cell::new(cell(&x), x.is_number()));
        }
        rows.push(row);
    }
    let rows = rows
        .into_iter()
        .map(|mut row| {
            row.resize(cols.len(), None);
            row.into_iter()
                .map(|c| c.unwrap_or_else(|| Cell::new(String::new(), false)))
                .collect()
        })
        .collect();
    let mut note = Vec::new();
    if records.len() > MAX_TABLE_ROWS {
        note.push(format!(
            "the first {MAX_TABLE_ROWS} of {} records are shown",
            records.len()
        ));
    }
    if more_cols > 0 {
        note.push(format!(
            "{more_cols} values in columns past the first {MAX_TABLE_COLUMNS} are not shown"
        ));
    }
    let note = if note.is_empty() {
        String::new()
    } else {
        format!("{}; the results file has them all.", note.join("; "))
    };
    (cols, rows, note)
}

/// Metrics that mark a run that could not do what was asked.
const FLAGS: [&str; 4] = ["partial", "oversubscribed", "behind_schedule", "cut_short"];

/// One test's table: the run (when overlaid), the parameters whose value
/// differs between its records, the declared headline metrics the records
/// carry (with units and the 95% interval when a record has one), and the
/// flags; every field in the collapsed block.
fn test_table(name: String, recs: &[&Record], lab: Option<&dyn Lab>) -> TestTable {
    let test = recs.first().map_or("", |r| r.test.as_str());
    let mut params: Vec<&str> = Vec::new();
    for r in recs {
        for k in r.params.keys() {
            if k != RUN_PARAM && !params.contains(&k.as_str()) {
                params.push(k);
            }
        }
    }
    let first = recs.first();
    params.retain(|k| {
        recs.iter()
            .any(|r| r.params.get(*k) != first.and_then(|f| f.params.get(*k)))
    });
    let overlaid = recs.iter().any(|r| r.params.contains_key(RUN_PARAM));
    // (key, header, divisor): a column of nanoseconds reads in µs or ms
    // when its values are that large (the mux open table's p99 read
    // "2.46M" under "(ns)").
    let mut metrics: Vec<(&str, String, f64)> = Vec::new();
    if let Some(l) = lab {
        let mut heads: Vec<_> = l.headlines(test);
        if heads.is_empty() {
            heads = l
                .metrics()
                .iter()
                .filter(|m| m.applies_to(test))
                .take(4)
                .collect();
        }
        for m in heads {
            let top = recs
                .iter()
                .filter_map(|r| r.metric_f64(m.key))
                .filter(|v| v.is_finite())
                .map(f64::abs)
                .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
            let Some(top) = top else { continue };
            let (unit, d) = match m.unit {
                "ns" if top >= 1e6 => ("ms", 1e6),
                "ns" if top >= 1e4 => ("µs", 1e3),
                u => (u, 1.0),
            };
            metrics.push((m.key, format!("{} ({unit})", m.label), d));
        }
    }
    let flagged = |r: &Record| -> Vec<&str> {
        FLAGS
            .iter()
            .copied()
            .filter(|f| match r.metrics.get(*f) {
                Some(Value::Bool(b)) => *b,
                Some(Value::Null) | None => false,
                Some(Value::String(s)) => !s.is_empty(),
                Some(_) => true,
            })
            .collect()
    };
    let any_flag = recs.iter().any(|r| !flagged(r).is_empty());
    let mut columns = Vec::new();
    if overlaid {
        columns.push("run".to_owned());
    }
    columns.extend(params.iter().map(|p| p.replace('_', " ")));
    columns.extend(metrics.iter().map(|(_, h, _)| h.clone()));
    if any_flag {
        columns.push("flags".into());
    }
    let rows = recs
        .iter()
        .take(MAX_TABLE_ROWS)
        .map(|r| {
            let mut row = Vec::new();
            if overlaid {
                row.push(Cell::new(
                    r.params.get(RUN_PARAM).map(cell).unwrap_or_default(),
                    false,
                ));
            }
            for p in &params {
                let v = r.params.get(*p);
                row.push(Cell::new(
                    v.map(cell).unwrap_or_default(),
                    v.is_some_and(Value::is_number),
                ));
            }
            for (k, _, d) in &metrics {
                let text = match r.metric_f64(k) {
                    Some(v) => {
                        let iv = r
                            .metric_f64(&format!("{k}_lo"))
                            .zip(r.metric_f64(&format!("{k}_hi")));
                        match iv {
                            Some((lo, hi)) => format!(
                                "{} [{}, {}]",
                                value(v / d, ""),
                                value(lo / d, ""),
                                value(hi / d, "")
                            ),
                            None => value(v / d, ""),
                        }
                    }
                    None => String::new(),
                };
                row.push(Cell {
                    text,
                    full: String::new(),
                    n: true,
                });
            }
            if any_flag {
                row.push(Cell::new(flagged(r).join(", "), false));
            }
            row
        })
        .collect();
    let (all_columns, all_rows, note) = all_fields(recs);
    let mut legend: Vec<String> = Vec::new();
    if let Some(l) = lab {
        for r in recs {
            for (k, v) in &r.params {
                let Some(v) = v.as_str() else { continue };
                if let Some(words) = l.param_legend(k, v) {
                    let line = format!("{} {v}: {words}", k.replace('_', " "));
                    if !legend.contains(&line) {
                        legend.push(line);
                    }
                }
            }
        }
    }
    TestTable {
        name,
        columns,
        rows,
        all_columns,
        all_rows,
        note,
        legend,
    }
}

/// A number for a table cell: as `human_number` writes it, but in
/// scientific notation from 1e15 up, so that 1.7e308 is not 309 digits.
fn number(x: f64) -> String {
    if x.is_finite() && x.abs() >= 1e15 {
        format!("{x:.3e}")
    } else {
        commbench_core::record::human_number(x)
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => number(n.as_f64().unwrap_or(f64::NAN)),
        },
        v => v.to_string(),
    }
}

const TEMPLATE: &str = include_str!("templates/report.html");

/// A template environment that HTML-escapes every value it prints,
/// whatever the template's name: strings from a results file (host name,
/// CPU model, command line, parameters, string metrics, the lab and test
/// names) and the page title are untrusted, since result files travel
/// between hosts. Only the SVG of a figure is printed raw (`|safe`), and
/// [`crate::plot`] checks that it holds nothing but drawing elements.
pub(crate) fn page_env(
    name: &'static str,
    template: &'static str,
) -> Result<minijinja::Environment<'static>, ReportError> {
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    env.add_template(name, template)
        .map_err(|e| ReportError::Template(e.to_string()))?;
    Ok(env)
}

/// One line of the summary at the top of the page (see [`summary`]: a
/// lab's question and the answer its records give).
#[derive(Debug, Clone, Serialize)]
pub struct SummaryLine {
    pub lab: String,
    pub question: String,
    /// The run the answer is of, when several runs are overlaid.
    pub run: String,
    pub answer: String,
    pub flags: String,
}

/// A short label for a run: host and start time, else the file name.
fn run_label(l: &Loaded) -> String {
    let env = l.environment.as_ref();
    let get = |k: &str| env.and_then(|e| e.get(k)).and_then(Value::as_str);
    match (get("hostname"), get("started_utc")) {
        (Some(h), Some(t)) => format!("{h} {}", t.get(..16).unwrap_or(t)),
        _ => Path::new(&l.path)
            .file_name()
            .map_or_else(|| l.path.clone(), |f| f.to_string_lossy().into_owned()),
    }
}

/// The suite preset a run was made with (`quick`, `default`, `full`), or
/// `none` for records that no suite wrote.
fn preset_of(l: &Loaded) -> String {
    l.records
        .iter()
        .find(|r| r.lab == "suite" && r.test == "step")
        .and_then(|r| r.params.get("preset"))
        .and_then(Value::as_str)
        .unwrap_or("none")
        .to_owned()
}

/// The machine in one line: CPU, cores, kernel, load, build.
fn machine_line(runs: &[Loaded], all: &[&Record]) -> String {
    let Some(env) = runs.iter().find_map(|l| l.environment.as_ref()) else {
        return String::new();
    };
    let g = |k: &str| {
        env.get(k)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_else(|| "?".into())
    };
    let load = env
        .get("load_average")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_f64)
        .map_or("?".into(), |l| format!("{l:.1}"));
    let over = all
        .iter()
        .any(|r| matches!(r.metrics.get("oversubscribed"), Some(Value::Bool(true))));
    format!(
        "{} · {} logical CPUs · kernel {} · load {load} at start · {} build · {}",
        g("cpu_model"),
        g("logical_cpus"),
        g("kernel"),
        g("build_profile"),
        if over {
            "some runs had more busy threads than CPUs (oversubscribed)"
        } else {
            "not oversubscribed"
        }
    )
}

/// The summary: each lab's answer from each run's own records (one line
/// per lab and run, never an answer over a mix of runs).
fn summary_lines(runs: &[Loaded], registry: &[&dyn Lab]) -> Vec<SummaryLine> {
    let per_run: Vec<(String, Vec<summary::Row>)> = runs
        .iter()
        .map(|l| {
            let label = if runs.len() > 1 {
                run_label(l)
            } else {
                String::new()
            };
            (label, summary::rows(&l.records, registry))
        })
        .collect();
    let mut out = Vec::new();
    for lab in registry {
        for (label, rows) in &per_run {
            if let Some(r) = rows.iter().find(|r| r.lab == lab.name()) {
                out.push(SummaryLine {
                    lab: r.lab.to_owned(),
                    question: r.question.to_owned(),
                    run: label.clone(),
                    answer: r.answer.clone(),
                    flags: r.flags.join("; "),
                });
            }
        }
    }
    out
}

/// One verdict of "what changed".
#[derive(Serialize)]
struct ChangeRow {
    verdict: String,
    ratio: String,
    interval: String,
    before: String,
    after: String,
    what: String,
    /// Only the parameters that vary between the tests of its lab and
    /// test (compare's rule); the rest are in the test's table.
    params: String,
    metric: String,
    /// Why the row says what it says, when its cells cannot.
    note: String,
    runs: String,
}

/// "What changed": per later run against the first, compare's verdicts
/// on the declared headline metrics of records with the same lab, test
/// and parameters, when both runs are of the same preset; otherwise the
/// pair is listed as not comparable. The verdicts are `compare`'s own
/// ([`crate::verdicts::Comparison`] at compare's defaults, with the floor
/// learned from `past`, the cold-start floor without): the overlay never
/// calls "faster" what compare calls inconclusive.
fn what_changed(
    runs: &[Loaded],
    registry: &[&dyn Lab],
    past: Option<&Past>,
) -> (Vec<ChangeRow>, Vec<String>, usize) {
    let mut rows: Vec<(f64, ChangeRow)> = Vec::new();
    let mut not_comparable = Vec::new();
    let mut unchanged = 0;
    let Some((first, rest)) = runs.split_first() else {
        return (Vec::new(), not_comparable, 0);
    };
    let null = Value::Null;
    for later in rest {
        let label = format!("{} → {}", run_label(first), run_label(later));
        let (pa, pb) = (preset_of(first), preset_of(later));
        if pa != pb {
            not_comparable.push(format!(
                "{label}: not comparable, the runs are of different presets ({pa} vs {pb})"
            ));
            continue;
        }
        let comparison = Comparison::new(
            Run {
                records: &first.records,
                env: first.environment.as_ref().unwrap_or(&null),
            },
            Run {
                records: &later.records,
                env: later.environment.as_ref().unwrap_or(&null),
            },
            Policy::default(),
            past,
            registry,
        );
        let changes: Vec<Change> = comparison
            .changes()
            .into_iter()
            .filter(|c| c.headline)
            .collect();
        let all: Vec<&Change> = changes.iter().collect();
        let vary = crate::compare_text::varying(&all);
        if changes.is_empty() {
            not_comparable.push(format!(
                "{label}: no record of one run has a partner with the same lab, test and parameters in the other"
            ));
        }
        for c in changes {
            if c.verdict == "no change" {
                unchanged += 1;
                continue;
            }
            let size = c.change_pct.abs();
            let names = vary
                .get(&(c.lab.clone(), c.test.clone()))
                .cloned()
                .unwrap_or_default();
            let (ratio, interval) = crate::compare_text::ratio_cells(&c);
            rows.push((
                if size.is_finite() { size } else { 0.0 },
                ChangeRow {
                    verdict: c.verdict.clone(),
                    ratio,
                    interval,
                    before: commbench_core::lab::answer::num(c.before, &c.unit),
                    after: commbench_core::lab::answer::num(c.after, &c.unit),
                    what: format!("{} {}", c.lab, c.test),
                    params: crate::compare_text::varying_cell(&c, &names),
                    metric: c.metric.clone(),
                    note: crate::compare_text::row_note(&c).unwrap_or_default(),
                    runs: label.clone(),
                },
            ));
        }
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    rows.truncate(60);
    (
        rows.into_iter().map(|(_, r)| r).collect(),
        not_comparable,
        unchanged,
    )
}

/// Renders a self-contained HTML page (no external resources) for the runs.
/// Several runs are overlaid in the same figures, their series named by
/// host and start time.
pub fn render_html(
    runs: &[Loaded],
    title: &str,
    registry: &[&dyn Lab],
    past: Option<&Past>,
) -> Result<String, ReportError> {
    let specs: Vec<FigureSpec> = registry.iter().flat_map(|l| l.figures()).collect();
    let specs = specs.as_slice();
    let summary = summary_lines(runs, registry);
    let labelled: Vec<Record> = if runs.len() > 1 {
        runs.iter()
            .flat_map(|l| {
                let label = run_label(l);
                l.records.iter().map(move |r| {
                    let mut r = r.clone();
                    r.params
                        .insert(RUN_PARAM.to_owned(), Value::from(label.clone()));
                    r
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let all: Vec<&Record> = if runs.len() > 1 {
        labelled.iter().collect()
    } else {
        runs.iter().flat_map(|l| l.records.iter()).collect()
    };
    // Sections by registry lab in first-seen order; inside, records by
    // record lab and test in first-seen order, in one pass.
    let mut sections_ix: HashMap<String, usize> = HashMap::new();
    // section -> record lab -> test -> records.
    type Tests<'a> = Vec<(String, Vec<&'a Record>)>;
    let mut grouped: Vec<(String, Vec<(String, Tests)>)> = Vec::new();
    for r in all.iter().copied().filter(|r| r.lab != "suite") {
        let sec = commbench_core::lab::find(registry, &r.lab)
            .map_or_else(|| r.lab.clone(), |l| l.name().to_owned());
        let si = *sections_ix.entry(sec.clone()).or_insert_with(|| {
            grouped.push((sec, Vec::new()));
            grouped.len() - 1
        });
        let labs = &mut grouped[si].1;
        let li = match labs.iter().position(|(l, _)| *l == r.lab) {
            Some(i) => i,
            None => {
                labs.push((r.lab.clone(), Vec::new()));
                labs.len() - 1
            }
        };
        let tests = &mut labs[li].1;
        let ti = match tests.iter().position(|(t, _)| *t == r.test) {
            Some(i) => i,
            None => {
                tests.push((r.test.clone(), Vec::new()));
                tests.len() - 1
            }
        };
        tests[ti].1.push(r);
    }
    let mut sections = Vec::new();
    let mut figures_left = MAX_PAGE_FIGURES;
    for (sec, labs) in grouped {
        let mut figures = Vec::new();
        let mut tables = Vec::new();
        let mut note = String::new();
        for (record_lab, tests) in labs {
            let recs: Vec<&Record> = tests.iter().flat_map(|(_, v)| v.iter().copied()).collect();
            if figures_left > 0 {
                let mut f = figures_for_lab(&record_lab, &recs, specs, registry)?;
                f.truncate(figures_left);
                figures_left -= f.len();
                figures.extend(f);
            } else if note.is_empty() {
                note = format!("No figures: the page already holds {MAX_PAGE_FIGURES}.");
            }
            let lab = commbench_core::lab::find(registry, &record_lab);
            for (test, v) in tests {
                let name = if record_lab == sec {
                    test
                } else {
                    format!("{record_lab} {test}")
                };
                tables.push(test_table(name, &v, lab));
            }
        }
        sections.push(LabSection {
            figures,
            lab: sec,
            tables,
            note,
        });
    }
    let envs: Vec<(String, Vec<(String, String)>)> = runs
        .iter()
        .filter_map(|l| {
            let env = l.environment.as_ref()?;
            let mut flat = Vec::new();
            commbench_core::record::flatten("", env, &mut flat);
            Some((
                l.path.clone(),
                flat.into_iter()
                    .map(|(k, v)| (k, v.to_string().trim_matches('"').to_owned()))
                    .collect(),
            ))
        })
        .collect();
    let env = page_env("report", TEMPLATE)?;
    let tmpl = env
        .get_template("report")
        .map_err(|e| ReportError::Template(e.to_string()))?;
    let (changes, not_comparable, unchanged) = what_changed(runs, registry, past);
    tmpl.render(minijinja::context! {
        title => title,
        generated => commbench_core::env::now_utc(),
        several => runs.len() > 1,
        changes => changes,
        not_comparable => not_comparable,
        unchanged => unchanged,
        machine => machine_line(runs, &all),
        summary => summary,
        sections => sections,
        environments => envs,
        sources => runs.iter().map(|l| l.path.clone()).collect::<Vec<_>>(),
    })
    .map_err(|e| ReportError::Template(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::rec;
    use commbench_core::figure::FigureKind;

    /// A lab that only declares figures.
    struct SpecLab(Vec<FigureSpec>);

    impl Lab for SpecLab {
        fn name(&self) -> &'static str {
            "ipc"
        }
        fn record_labs(&self) -> &'static [&'static str] {
            &["ipc"]
        }
        fn question(&self) -> &'static str {
            "?"
        }
        fn figures(&self) -> Vec<FigureSpec> {
            self.0.clone()
        }
        fn metrics(&self) -> &'static [commbench_core::lab::MetricSpec] {
            use commbench_core::lab::{Better, MetricSpec, Quantity};
            static M: [MetricSpec; 1] = [MetricSpec::headline(
                "msgs_per_s",
                "messages per second",
                "msg/s",
                Better::Higher,
                Quantity::Time,
                &[],
            )];
            &M
        }
        fn answer(&self, records: &[Record]) -> Option<String> {
            let r = records.iter().find(|r| r.lab == "ipc")?;
            Some(format!("rate {}", r.metric_f64("msgs_per_s")?))
        }
        fn budget(&self) -> commbench_core::lab::SuiteBudget {
            commbench_core::lab::SuiteBudget {
                quick_s: 1,
                default_s: 1,
            }
        }
        fn suite_step(
            &self,
            _: &commbench_core::lab::SuiteCtx,
            _: &mut commbench_core::Recorder,
        ) -> Result<commbench_core::lab::StepOutcome, commbench_core::lab::LabError> {
            Ok(Default::default())
        }
    }

    #[test]
    fn html_has_plots_and_tables() {
        let run = Loaded {
            path: "a.jsonl".into(),
            records: (1..=4)
                .map(|s| rec("reqres", s, 1000.0 * s as f64))
                .collect(),
            environment: Some(serde_json::json!({"cpu_model": "Test CPU"})),
        };
        let html = render_html(&[run], "t", &[], None).unwrap();
        assert!(html.contains("<svg"), "no svg");
        assert!(html.contains("msgs_per_s vs sessions"));
        assert!(html.contains("latency percentiles"));
        assert!(html.contains("Test CPU"));
        assert!(!html.contains("src=\"http"), "must be self-contained");
    }

    /// The MLRsearch goal codes (`1f4d0l50e1w`) meant nothing to a reader
    /// of the report's tables without a legend; the terminal table had one.
    #[test]
    fn a_table_spells_out_the_codes_among_its_parameters() {
        let labs: [&dyn Lab; 1] = [&crate::testutil::TestLab(vec![])];
        let mut r = Record::new("pipeline", "rfc2544-ndr").metric("mpps", 0.1);
        r.push_param("goal", "1f4d0l50e1w");
        let mut other = r.clone();
        other.push_param("goal", "<b>x</b>");
        let run = Loaded {
            path: "a.jsonl".into(),
            records: vec![r, other],
            environment: None,
        };
        let html = render_html(&[run], "t", &labs, None).unwrap();
        assert!(
            html.contains("goal 1f4d0l50e1w: final trial 1 s, loss 0%"),
            "no legend"
        );
        assert!(
            !html.contains("<b>x</b>"),
            "a value reached the page unescaped"
        );
    }

    /// Payloads a hostile results file can carry in any string.
    const PAYLOADS: [&str; 3] = [
        "<script>window.__pwned=1</script>",
        "\"><img src=x onerror=window.__pwned=2>",
        "'><svg onload=window.__pwned=3>",
    ];

    /// Strings from a results file and the title reach the page escaped:
    /// no payload leaves a tag of its own, every one is shown as text.
    #[test]
    fn hostile_strings_from_a_results_file_and_the_title_are_escaped() {
        let [s, img, svg] = PAYLOADS;
        let run = |host: &str| Loaded {
            path: format!("{svg}{host}.jsonl"),
            records: (1..=4)
                .map(|n| {
                    let mut r = rec("reqres", n, 1000.0 * n as f64)
                        .param("transport", format!("shm{s}{img}"))
                        .metric("note", format!("{svg}{s}"));
                    r.lab = format!("ipc{img}");
                    r.test = format!("reqres{s}");
                    r
                })
                .collect(),
            environment: Some(serde_json::json!({
                "hostname": format!("{host}{s}{img}"),
                "started_utc": "2026-11-24T10:00:00Z",
                "cpu_model": format!("{img}{s}"),
                "kernel": svg,
                "command_line": ["commbench", s, img, svg],
            })),
        };
        let html = render_html(&[run("a"), run("b")], &format!("{s}{img}"), &[], None).unwrap();
        assert!(!html.contains("<script"), "a script tag got through");
        assert!(!html.contains("<img"), "an img tag got through");
        assert!(!html.contains("<svg onload"), "an svg tag got through");
        assert!(html.contains("&lt;script&gt;window.__pwned=1&lt;"));
        assert!(html.contains("&lt;img src=x onerror=window.__pwned=2&gt;"));
        assert!(html.contains("<svg"), "the figures are still drawn");
    }

    /// A results file with a metric of 1.7e308 hung `report` forever in
    /// plotters' tick code; the value is now left out and the caption
    /// says so.
    #[test]
    fn a_metric_of_1_7e308_draws_and_the_caption_says_it_was_left_out() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut records: Vec<Record> = (1..=4)
                .map(|s| rec("reqres", s, 1000.0 * s as f64))
                .collect();
            records[3] = rec("reqres", 4, 1.7e308).metric(
                "latency_ns",
                serde_json::json!({"p50": 1.0, "p90": 2.0, "p99": 1.7e308, "p999": 3.0}),
            );
            let run = Loaded {
                path: "a.jsonl".into(),
                records,
                environment: None,
            };
            let _ = tx.send(render_html(&[run], "t", &[], None));
        });
        let html = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("report did not finish within 60 s")
            .unwrap();
        assert!(html.contains("<svg"));
        assert!(
            html.contains("1 value out of range (not finite, beyond ±1e300"),
            "the caption says what was left out"
        );
        assert!(html.contains(">1.700e308<"), "the table shows it short");
    }

    /// However many labs, records and columns a file holds, the page holds
    /// at most MAX_PAGE_FIGURES figures and each table at most
    /// MAX_TABLE_ROWS rows of MAX_TABLE_COLUMNS columns, and says so.
    #[test]
    fn a_page_is_bounded_in_figures_rows_and_columns() {
        let mut records = Vec::new();
        for lab in 0..(MAX_PAGE_FIGURES + 20) {
            for s in 1..=2 {
                let mut r = Record::new(&format!("lab{lab}"), "t")
                    .param("n", s)
                    .metric("rate", s as f64);
                r.lab = format!("lab{lab}");
                records.push(r);
            }
        }
        for i in 0..(MAX_TABLE_ROWS + 10) {
            let mut r = Record::new("wide", "t").metric("rate", i as f64);
            for c in 0..3 {
                r = r.metric(&format!("m{}", i * 3 + c), 1.0);
            }
            records.push(r);
        }
        let run = Loaded {
            path: "a.jsonl".into(),
            records,
            environment: None,
        };
        let html = render_html(&[run], "t", &[], None).unwrap();
        assert_eq!(html.matches("<figure ").count(), MAX_PAGE_FIGURES);
        assert!(html.contains("No figures: the page already holds 200."));
        assert!(html.contains(&format!(
            "the first {MAX_TABLE_ROWS} of {} records are shown",
            MAX_TABLE_ROWS + 10
        )));
        assert!(html.contains("columns past the first 300 are not shown"));
        let wide = html.split("id=\"lab-wide\"").nth(1).unwrap();
        let all = wide.split("<table class=\"all\">").nth(1).unwrap();
        let header = all.split("</tr>").next().unwrap();
        assert_eq!(header.matches("<th>").count(), MAX_TABLE_COLUMNS);
    }

    #[test]
    fn several_runs_overlay_with_series_named_by_host_and_time_and_compare_verdicts() {
        // Five repeats per record so that compare can judge; `preset`
        // from a suite step record.
        let run = |host: &str, t: &str, k: f64, preset: &str| {
            let mut records: Vec<Record> = (1..=4)
                .map(|s| {
                    let mut r = rec("reqres", s, k * 1000.0 * s as f64);
                    let xs: Vec<f64> = (0..5)
                        .map(|i| k * 1000.0 * s as f64 * (1.0 + 0.001 * (i as f64 - 2.0)))
                        .collect();
                    let e = commbench_core::estimate::Estimate::from_samples(&xs);
                    commbench_core::estimate::attach(&mut r.metrics, "msgs_per_s", &e);
                    r
                })
                .collect();
            records.push(
                Record::new("suite", "step")
                    .param("step", "ipc")
                    .param("preset", preset),
            );
            Loaded {
                path: format!("{host}.jsonl"),
                records,
                environment: Some(serde_json::json!({"hostname": host, "started_utc": t})),
            }
        };
        let spec = FigureSpec {
            kind: FigureKind::Line,
            lab: "ipc",
            test: "reqres",
            title: "rate over sessions",
            caption: "",
            x: "sessions",
            y: "msgs_per_s",
            series: &["transport"],
            filter: None,
            x_label: "",
            y_label: "",
            reference: None,
            more_x: "",
        };
        let lab = SpecLab(vec![spec]);
        let runs = [
            run("alpha", "2026-11-24T10:00:00Z", 1.0, "quick"),
            run("beta", "2026-11-24T11:00:00Z", 2.0, "quick"),
        ];
        let html = render_html(&runs, "t", &[&lab], None).unwrap();
        // Series named by run (the transport, the same everywhere, is said
        // once in the caption).
        assert!(
            html.contains(">alpha 2026-11-24T10:00</li>"),
            "series not named by run"
        );
        assert!(html.contains(">beta 2026-11-24T11:00</li>"));
        assert!(html.contains("All lines: transport shm."));
        // Each run's own answer, never their mean.
        assert!(html.contains("rate 1000<"), "alpha's answer");
        assert!(html.contains("rate 2000<"), "beta's answer");
        assert!(!html.contains("rate 1500"), "an answer over both runs");
        assert!(html.contains("What changed between the runs"));
        assert!(
            html.contains("<td class=\"t verdict\">faster</td><td class=\"n\">2.0"),
            "the doubled rate with its interval is not among the changes"
        );
        // Runs of different presets are listed, not compared.
        let runs = [
            run("alpha", "2026-11-24T10:00:00Z", 1.0, "quick"),
            run("beta", "2026-11-24T11:00:00Z", 2.0, "default"),
        ];
        let html = render_html(&runs, "t", &[&lab], None).unwrap();
        assert!(
            html.contains("not comparable, the runs are of different presets (quick vs default)")
        );
        assert!(!html.contains("verdict\">faster<"));
    }

    /// The summary's `core` link pointed to a missing anchor: sections are
    /// the registry's labs, so the core lab's `timer` records sit under
    /// `lab-core` and every summary link resolves.
    #[test]
    fn the_summary_links_to_the_section_of_each_lab_including_core() {
        let lab = crate::testutil::TestLab(Vec::new());
        let run = Loaded {
            path: "a.jsonl".into(),
            records: vec![Record::new("timer", "read_cost")
                .param("method", "rdtsc")
                .metric("ns_median", 9.0)],
            environment: None,
        };
        let html = render_html(&[run], "t", &[&lab], None).unwrap();
        assert!(html.contains("href=\"#lab-core\""));
        assert!(html.contains("id=\"lab-core\""));
        assert!(html.contains("core: timer read_cost"));
    }

    /// pcap rows were ~290 px tall (a temp path wrapped one character a
    /// line) and pipeline's rss-hash values sat 50 columns to the right:
    /// each test has its own table of the parameters that vary and the
    /// headline metrics with units, long values cut with the whole text on
    /// hover, every field collapsed below.
    #[test]
    fn each_test_has_a_table_of_what_varies_and_its_headlines_with_long_values_cut() {
        let lab = crate::testutil::TestLab(Vec::new());
        let path = "/tmp/commbench-pcap-13281-26262-15/suite.pcap";
        let r = |cache: &str, v: f64| {
            let mut r = Record::new("pipeline", "run")
                .param("mode", cache)
                .param("file", path)
                .param("burst", 32)
                .metric("ticks_total", v)
                .metric("mpps", 10.0)
                .metric("other_field", 1.0);
            r.push_metric("ticks_total_lo", v - 1.0);
            r.push_metric("ticks_total_hi", v + 1.0);
            r
        };
        let recs = [r("rtc", 8.9), r("pipeline", 148.0)];
        let t = test_table("run".into(), &recs.iter().collect::<Vec<_>>(), Some(&lab));
        assert_eq!(
            t.columns,
            [
                "mode",
                "TSC ticks per packet (ticks)",
                "packets per second (Mpps)"
            ]
        );
        assert_eq!(t.rows[0][1].text, "8.90 [7.90, 9.90]");
        assert!(t.rows[0][1].n && !t.rows[0][0].n);
        assert!(t.all_columns.contains(&"other_field".to_owned()));
        let file = t.all_columns.iter().position(|c| c == "file").unwrap();
        let cell = &t.all_rows[0][file];
        assert_eq!(cell.full, path);
        assert!(cell.text.ends_with('…') && cell.text.chars().count() == CELL_CHARS);
    }

    /// The overlay's verdict is compare's for every headline metric of
    /// every generated pair of runs, interval and all (it once skipped the
    /// between-run floor and called "faster 1.65× [1.60, 1.70]" what
    /// compare called "inconclusive 1.65× [0.94, 2.89]").
    #[test]
    fn the_overlay_gives_compares_verdict_for_every_metric() {
        let lab = crate::testutil::TestLab(Vec::new());
        let labs: [&dyn Lab; 1] = [&lab];
        let env = serde_json::json!({"logical_cpus": 2, "load_average": [1.0, 1.0, 1.0], "hostname": "h"});
        let mut changed = 0;
        for seed in 0..200 {
            let (a, b) = crate::testutil::generated_runs(seed);
            let loaded = |r: &Vec<Record>, p: &str| Loaded {
                path: p.into(),
                records: r.clone(),
                environment: Some(env.clone()),
            };
            let runs = [loaded(&a, "a.jsonl"), loaded(&b, "b.jsonl")];
            let (rows, _, unchanged) = what_changed(&runs, &labs, None);
            let compared = crate::verdicts::Comparison::new(
                crate::verdicts::Run {
                    records: &a,
                    env: &env,
                },
                crate::verdicts::Run {
                    records: &b,
                    env: &env,
                },
                crate::verdicts::Policy::default(),
                None,
                &labs,
            )
            .changes();
            let mut want: Vec<(String, String, String, String)> = compared
                .iter()
                .filter(|c| c.headline && c.verdict != "no change")
                .map(|c| {
                    let (r, iv) = crate::compare_text::ratio_cells(c);
                    (c.metric.clone(), c.verdict.clone(), r, iv)
                })
                .collect();
            let mut got: Vec<(String, String, String, String)> = rows
                .iter()
                .map(|r| {
                    (
                        r.metric.clone(),
                        r.verdict.clone(),
                        r.ratio.clone(),
                        r.interval.clone(),
                    )
                })
                .collect();
            want.sort();
            got.sort();
            assert_eq!(got, want, "seed {seed}");
            assert_eq!(
                unchanged,
                compared
                    .iter()
                    .filter(|c| c.headline && c.verdict == "no change")
                    .count()
            );
            changed += got.iter().filter(|g| g.1 != "inconclusive").count();
        }
        assert!(changed > 0, "the generator never made a change");
    }
}
