//! What a person reads of a comparison: benchstat's shape. The direction
//! of the ratio is stated once, in the header; then one block per (lab,
//! test, metric), headed by the metric's label, unit and better direction
//! and the parameters every row shares; then one short line per test:
//! verdict, ratio and interval first, both values with their unit, and
//! only the parameters that vary between the block's tests. What a row
//! cannot say in its cells (why it is not judged, what would settle it)
//! follows on an indented line.
//!
//! Invariants: every value carries its unit; a ratio is never shown for a
//! metric compared by difference; a "no samples" row whose values differ
//! twofold or more says that the difference is unjudged; the repeats that
//! would settle an inconclusive verdict are quoted only up to
//! [`SETTLE_CAP`], beyond it the line says no practical number would.
//! The HTML report's "what changed" table uses the same cells.

use crate::compare::{difference_text, Change};
use commbench_core::lab::{answer::num, spec_of, Better, Lab};
use commbench_core::record::escape_control;
use std::collections::HashMap;
use std::fmt::Write;

/// Runs per side beyond which "~N would settle it" is no advice: a suite
/// repeats at most 20 times, and a hundred runs of each side is an
/// afternoon on this machine. Beyond it, pairing (`commbench ab`) is.
pub const SETTLE_CAP: usize = 100;

/// The longest parameter cell; the rest is cut with `…` (CSV and JSON
/// keep every parameter).
const PARAMS_CELL: usize = 60;

/// The parameters that vary between the changes of each (lab, test), in
/// first-seen order.
pub fn varying(changes: &[&Change]) -> HashMap<(String, String), Vec<String>> {
    let mut seen: HashMap<(String, String), Vec<&Change>> = HashMap::new();
    for c in changes {
        crate::work::step(1);
        seen.entry((c.lab.clone(), c.test.clone()))
            .or_default()
            .push(c);
    }
    seen.into_iter()
        .map(|(k, cs)| (k, varying_in(&cs)))
        .collect()
}

/// The parameters of one (lab, test)'s changes that differ from the first
/// change's (or that some change lacks), in first-seen order: one pass,
/// each change's parameters looked up once. (It rescanned every change
/// for each parameter of each change while that parameter had not been
/// found to vary, so a constant one — `samples` of 10,000 delay records,
/// each its own series — cost n² comparisons: 10 s at 10k, issue 50.)
fn varying_in(cs: &[&Change]) -> Vec<String> {
    let Some(first) = cs.first() else {
        return Vec::new();
    };
    // A name given twice counts with its first value, as a lookup finds it.
    fn values(c: &Change) -> HashMap<&str, &str> {
        let mut m: HashMap<&str, &str> = HashMap::with_capacity(c.param_list.len());
        for (n, v) in &c.param_list {
            m.entry(n.as_str()).or_insert(v.as_str());
        }
        m
    }
    let first_values = values(first);
    let mut order: Vec<&str> = Vec::new();
    let mut varies: HashMap<&str, bool> = HashMap::new();
    for c in cs {
        let mine = values(c);
        crate::work::step(2 * c.param_list.len() + mine.len() + first_values.len());
        for (n, _) in &c.param_list {
            if !varies.contains_key(n.as_str()) {
                varies.insert(n, false);
                order.push(n);
            }
        }
        for (n, v) in &mine {
            if first_values.get(n) != Some(v) {
                varies.insert(n, true);
            }
        }
        for n in first_values.keys().filter(|n| !mine.contains_key(*n)) {
            varies.insert(n, true);
        }
    }
    order
        .into_iter()
        .filter(|n| varies.get(n) == Some(&true))
        .map(String::from)
        .collect()
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// The parameters of `c` named in `names` (`transport=shm size=64`), or
/// those not named when `!among`.
fn params_of(c: &Change, names: &[String], among: bool) -> String {
    let parts: Vec<String> = c
        .param_list
        .iter()
        .filter(|(n, _)| names.contains(n) == among)
        .map(|(n, v)| format!("{n}={}", escape_control(v)))
        .collect();
    parts.join(" ")
}

/// The varying parameters of `c` as one cell, cut at 60 characters.
pub fn varying_cell(c: &Change, names: &[String]) -> String {
    cut(&params_of(c, names, true), PARAMS_CELL)
}

/// The ratio and its interval as cells (`0.75×`, `[0.65, 0.90]`): three
/// decimals when the interval is narrower than 0.05; the difference and
/// "by difference" for a metric compared that way.
pub fn ratio_cells(c: &Change) -> (String, String) {
    if c.by_difference() {
        return (
            difference_text(c.difference, &c.unit),
            "by difference".into(),
        );
    }
    commbench_core::estimate::ratio_cells(c.ratio, c.lo, c.hi)
}

/// What would settle an inconclusive verdict, in words.
pub fn settle_text(c: &Change) -> Option<String> {
    if c.verdict != "inconclusive" || !c.note.is_empty() {
        return None;
    }
    Some(match c.settle {
        Some(n) if n <= c.n_before.min(c.n_after) => return None,
        Some(n) if n <= SETTLE_CAP => format!("~{n} runs per side would settle it"),
        Some(_) => format!(
            "no practical number of runs settles it (over {SETTLE_CAP} per side): the noise between runs is wider than the threshold; pair the two builds with commbench ab"
        ),
        None => "the estimate lies within the noise floor of the threshold: more runs will not settle it; commbench ab runs both side by side in pairs, which takes out the drift between runs that sets this floor".into(),
    })
}

/// Why a row says what it says, when its cells cannot: the note compare
/// gave (load, oversubscription), a signed metric compared by
/// difference, a large difference without samples, what would settle an
/// inconclusive verdict.
pub fn row_note(c: &Change) -> Option<String> {
    if !c.note.is_empty() {
        return Some(escape_control(&c.note).into_owned());
    }
    if c.by_difference() {
        return Some(BY_DIFFERENCE.to_owned());
    }
    if c.verdict == "no samples" {
        let fold = if c.ratio >= 1.0 {
            c.ratio
        } else {
            1.0 / c.ratio
        };
        let one = "one run per side, so no interval";
        return Some(if fold.is_finite() && fold >= 2.0 {
            format!(
                "{one}: a {}× {} value that nothing here can confirm; rerun both sides with repeats to judge it",
                num(fold, ""),
                if c.ratio >= 1.0 { "higher" } else { "lower" }
            )
        } else {
            format!("{one}: rerun both sides with repeats to judge it")
        });
    }
    settle_text(c)
}

/// Why a metric is compared by difference.
const BY_DIFFERENCE: &str =
    "a signed or zero-crossing quantity: compared by difference, not judged (a ratio of it means nothing)";

/// The header: the two sides, the direction of the ratio and the rule of
/// the verdict, once.
pub fn header(before: &str, after: &str, threshold: f64) -> String {
    format!(
        "before: {}\nafter:  {}\nratio = after / before (below 1: the value went down)\nverdict: a change only when the whole 95% interval, noise floor included, lies beyond ±{}%\n",
        escape_control(before),
        escape_control(after),
        num(threshold * 100.0, "")
    )
}

fn direction_words(b: Better) -> &'static str {
    match b {
        Better::Higher => "higher is better",
        Better::Lower => "lower is better",
        Better::Unknown => "no better direction",
    }
}

/// The comparison as a person reads it: [`header`], then a block per
/// (lab, test, metric) with one line per test (see the module docs).
pub fn text(
    shown: &[&Change],
    before: &str,
    after: &str,
    threshold: f64,
    labs: &[&dyn Lab],
) -> String {
    let mut o = header(before, after, threshold);
    let vary = varying(shown);
    // Blocks in first-seen order.
    let mut blocks: Vec<(&str, &str, &str, Vec<&Change>)> = Vec::new();
    for c in shown {
        match blocks
            .iter_mut()
            .find(|b| b.0 == c.lab && b.1 == c.test && b.2 == c.metric)
        {
            Some(b) => b.3.push(c),
            None => blocks.push((&c.lab, &c.test, &c.metric, vec![c])),
        }
    }
    for (lab, test, metric, rows) in blocks {
        let names = vary
            .get(&(lab.to_owned(), test.to_owned()))
            .cloned()
            .unwrap_or_default();
        let first = rows[0];
        let label = spec_of(labs, lab, test, metric).map(|s| s.label);
        let unit = if first.unit.is_empty() {
            String::new()
        } else {
            format!("{}; ", first.unit)
        };
        let _ = write!(
            o,
            "\n{}/{} · {}{} ({unit}{})\n",
            escape_control(lab),
            escape_control(test),
            escape_control(metric),
            label.map(|l| format!(": {l}")).unwrap_or_default(),
            direction_words(first.better)
        );
        if rows.iter().all(|c| c.by_difference()) {
            let _ = writeln!(o, "  {BY_DIFFERENCE}");
        }
        let same = params_of(first, &names, false);
        if !same.is_empty() {
            let _ = writeln!(o, "  in every row: {}", cut(&same, 100));
        }
        let cells: Vec<[String; 6]> = rows
            .iter()
            .map(|c| {
                let (ratio, iv) = ratio_cells(c);
                [
                    c.verdict.clone(),
                    ratio,
                    iv,
                    num(c.before, &c.unit),
                    num(c.after, &c.unit),
                    varying_cell(c, &names),
                ]
            })
            .collect();
        let head = [
            "verdict",
            "ratio",
            "95% interval",
            "before",
            "after",
            if names.is_empty() { "" } else { "test" },
        ]
        .map(String::from);
        let mut w = [0usize; 6];
        for c in std::iter::once(&head).chain(&cells) {
            for (i, x) in c.iter().enumerate() {
                w[i] = w[i].max(x.chars().count());
            }
        }
        let line = |c: &[String; 6]| {
            let mut s = String::from("  ");
            for (i, x) in c.iter().enumerate() {
                let pad = " ".repeat(w[i] - x.chars().count());
                if i == 5 {
                    s.push_str(x);
                } else if (1..=4).contains(&i) && i != 2 {
                    s.push_str(&pad);
                    s.push_str(x);
                    s.push_str("  ");
                } else {
                    s.push_str(x);
                    s.push_str(&pad);
                    s.push_str("  ");
                }
            }
            s.trim_end().to_owned()
        };
        let _ = writeln!(o, "{}", line(&head));
        for (c, cell) in rows.iter().zip(&cells) {
            let _ = writeln!(o, "{}", line(cell));
            if let Some(n) = row_note(c).filter(|_| !c.by_difference()) {
                let _ = writeln!(o, "      ↳ {n}");
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TestLab;
    use crate::{compare, Change};
    use commbench_core::estimate::{attach, Estimate};
    use commbench_core::record::Record;

    fn sampled(params: &[(&str, &str)], metric: &str, xs: &[f64]) -> Record {
        let mut r = Record::new("pipeline", "run");
        for (k, v) in params {
            r.push_param(k, *v);
        }
        attach(&mut r.metrics, metric, &Estimate::from_samples(xs));
        r
    }

    const BASE: [f64; 7] = [100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8];

    fn scaled(f: f64) -> Vec<f64> {
        BASE.iter().map(|x| x * f).collect()
    }

    fn show(changes: &[Change]) -> String {
        let lab = TestLab(Vec::new());
        let shown: Vec<&Change> = changes.iter().collect();
        text(&shown, "a.jsonl", "b.jsonl", 0.05, &[&lab])
    }

    /// 68 of compare's 354 lines ended "…commbench ab pairs the runs and
    /// can": the sentence in the source was cut off.
    #[test]
    fn an_inconclusive_note_ended_mid_sentence() {
        let a = vec![sampled(&[("mode", "rtc")], "ticks_total", &BASE)];
        let b = vec![sampled(&[("mode", "rtc")], "ticks_total", &scaled(1.01))];
        let lab = TestLab(Vec::new());
        let mut c = compare(&a, &b, 0.05, &[], &[&lab]).remove(0);
        c.verdict = "inconclusive".into();
        c.note.clear();
        c.settle = None;
        let t = settle_text(&c).unwrap();
        assert!(t.ends_with("that sets this floor"), "{t}");
        assert!(!t.ends_with(" can"), "{t}");
    }

    /// compare printed every parameter of every test on one line (422
    /// characters with a suite's records) and never said which way a
    /// ratio goes.
    #[test]
    fn compare_shows_one_short_line_per_test_with_only_the_parameters_that_vary() {
        let long = "x".repeat(300);
        let p = |burst: &'static str| -> Vec<(&'static str, &str)> {
            vec![("mode", "rtc"), ("burst", burst), ("work", long.as_str())]
        };
        let a = vec![
            sampled(&p("1"), "ticks_total", &BASE),
            sampled(&p("32"), "ticks_total", &BASE),
        ];
        let b = vec![
            sampled(&p("1"), "ticks_total", &scaled(1.3)),
            sampled(&p("32"), "ticks_total", &scaled(1.0)),
        ];
        let lab = TestLab(Vec::new());
        let t = show(&compare(&a, &b, 0.05, &[], &[&lab]));
        assert!(t.contains("ratio = after / before"), "{t}");
        assert_eq!(t.matches("ratio = after / before").count(), 1, "{t}");
        let rows: Vec<&str> = t.lines().filter(|l| l.contains("burst=")).collect();
        assert_eq!(rows.len(), 2, "{t}");
        assert!(rows[0].trim_start().starts_with("worse"), "{t}");
        assert!(rows[0].contains("1.30") && rows[0].contains("ticks"), "{t}");
        assert!(rows[1].trim_start().starts_with("no change"), "{t}");
        // The shared parameters once, cut; never on a row.
        assert!(
            rows.iter()
                .all(|r| !r.contains("mode=") && !r.contains("xxx")),
            "{t}"
        );
        assert_eq!(t.matches("mode=rtc").count(), 1, "{t}");
        assert!(t.lines().all(|l| l.chars().count() <= 130), "{t}");
        assert!(
            t.contains("ticks_total: TSC ticks per packet (ticks; lower is better)"),
            "{t}"
        );
    }

    /// `median_error_pct 1.00× [0.01, 68.55]`: a ratio of signed
    /// percentages near zero.
    #[test]
    fn a_signed_percentage_is_compared_by_difference_not_by_ratio() {
        let a = vec![sampled(&[], "err_pct", &[0.1, -0.2, 0.3, 0.05, -0.1])];
        let b = vec![sampled(&[], "err_pct", &[0.4, 0.2, 0.6, 0.3, 0.5])];
        let c = compare(&a, &b, 0.05, &[], &[]);
        assert_eq!(c[0].verdict, crate::NOT_JUDGED, "{c:?}");
        assert!(c[0].ratio.is_nan() && c[0].lo.is_nan());
        let t = show(&c);
        assert!(!t.contains('×'), "{t}");
        assert!(t.contains("+0.35 pp") && t.contains("by difference"), "{t}");
        assert!(t.contains("0.05%") && t.contains("0.4%"), "{t}");
        assert_eq!(t.matches("compared by difference").count(), 1, "{t}");
        assert!(!c[0].verdict_is_change() && !c[0].is_regression());
    }

    /// `corrected_p99_ns … no samples 0.02×`: a 50× change with no word.
    #[test]
    fn a_fifty_fold_change_without_samples_says_it_is_unjudged() {
        let a = vec![Record::new("mux", "x").metric("p99_ns", 50_000.0)];
        let b = vec![Record::new("mux", "x").metric("p99_ns", 1_000.0)];
        let t = show(&compare(&a, &b, 0.05, &[], &[]));
        assert!(t.contains("no samples") && t.contains("0.0200×"), "{t}");
        assert!(
            t.contains("a 50× lower value that nothing here can confirm"),
            "{t}"
        );
        assert!(t.contains("50k ns") && t.contains("1000 ns"), "{t}");
    }

    /// "(~8498 repeats would settle it)".
    #[test]
    fn repeats_beyond_reach_are_not_quoted_as_a_count() {
        let mut c = compare(
            &[sampled(&[], "ticks_total", &BASE)],
            &[sampled(&[], "ticks_total", &scaled(1.05))],
            0.05,
            &[],
            &[],
        );
        assert_eq!(c[0].verdict, "inconclusive");
        c[0].settle = Some(8498);
        let t = settle_text(&c[0]).unwrap();
        assert!(!t.contains("8498") && t.contains("commbench ab"), "{t}");
        c[0].settle = Some(40);
        assert_eq!(
            settle_text(&c[0]).unwrap(),
            "~40 runs per side would settle it"
        );
    }
}

#[cfg(test)]
mod scaling_tests {
    use super::*;
    use crate::compare;
    use commbench_core::record::Record;

    /// `n` changes of one (lab, test), each its own series (`requested_ns`
    /// differs) with a parameter that never varies (`samples`), as delay
    /// records are.
    fn one_record_series(n: usize) -> Vec<Change> {
        let a = vec![Record::new("delay", "tsc_spin")
            .param("requested_ns", 0)
            .param("samples", 100_000)
            .metric("median_ns", 100.0)];
        let b = vec![Record::new("delay", "tsc_spin")
            .param("requested_ns", 0)
            .param("samples", 100_000)
            .metric("median_ns", 101.0)];
        let one = compare(&a, &b, 0.05, &[], &[]).remove(0);
        (0..n)
            .map(|i| {
                let mut c = one.clone();
                c.param_list = vec![
                    ("requested_ns".into(), i.to_string()),
                    ("samples".into(), "100000".into()),
                ];
                c
            })
            .collect()
    }

    /// Issue 50, item 5: compare's table was quadratic in one-record
    /// series with a constant parameter (2.5k 0.6 s, 5k 2.65 s, 10k
    /// 10 s): `varying` rescanned every change for `samples`. Doubling
    /// the changes must double the parameters it visits, not quadruple
    /// them (a count, not a time).
    #[test]
    fn varying_was_quadratic_in_one_record_series() {
        let n = 4_000;
        let (small, large) = (one_record_series(n), one_record_series(2 * n));
        let (small, large): (Vec<&Change>, Vec<&Change>) =
            (small.iter().collect(), large.iter().collect());
        let v = varying(&small);
        assert_eq!(
            v[&("delay".to_string(), "tsc_spin".to_string())],
            vec!["requested_ns".to_string()]
        );
        let ratio = crate::work::doubling_ratio(|double| {
            let cs = if double { &large } else { &small };
            std::hint::black_box(varying(cs));
        });
        assert!(
            ratio <= 2.05,
            "doubling the changes took {ratio:.2}× the steps"
        );
    }

    #[test]
    fn a_parameter_some_changes_lack_varies() {
        let mut cs = one_record_series(3);
        cs[2].param_list.pop();
        cs[1].param_list.push(("extra".into(), "1".into()));
        let refs: Vec<&Change> = cs.iter().collect();
        let v = varying(&refs);
        assert_eq!(
            v[&("delay".to_string(), "tsc_spin".to_string())],
            vec!["requested_ns", "samples", "extra"]
        );
    }
}
