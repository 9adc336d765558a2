//! What `ab` writes: records of lab `ab` (one per matched record and
//! metric, kept in the results store like any run's), the terminal view
//! (verdict and ratio first, the direction stated once), Bencher Metric
//! Format, and github-action-benchmark's custom JSON.
//!
//! Invariants: every output says how many pairs it rests on, in which
//! orders, how many were redone and why the run stopped; a run that
//! stopped before deciding (budget, interrupt, failures) says so in every
//! format; numbers that were not measured are null (JSON) or absent, never
//! 0.

use crate::analysis::MetricResult;
use crate::{AbReport, Stop};
use commbench_core::estimate::{Estimate, Verdict};
use commbench_core::record::Record;
use serde_json::{json, Map, Value};
use std::fmt::Write;

/// The records of lab `ab`: test `LAB/TEST`, params naming the varied
/// parameter, both values, the metric and the placement; metrics the ratio
/// with its interval, both medians, the verdict and the run's bookkeeping.
pub fn to_records(r: &AbReport) -> Vec<Record> {
    let (ab, ba) = r.orders();
    let (contaminated, failed) = r.redone();
    let common: std::collections::HashMap<_, _> =
        r.common_params.iter().map(|(k, p)| (k, p)).collect();
    r.results
        .iter()
        .map(|m| {
            let mut rec = Record::new("ab", &m.key.name())
                .param("name", &r.spec.name)
                .param("a", &r.spec.sides[0].value)
                .param("b", &r.spec.sides[1].value)
                .param("metric", &m.metric)
                .param("command", &r.spec.template)
                .param("placement", r.spec.placement.describe())
                .param("seed", r.spec.seed)
                .param("threshold_pct", 100.0 * r.spec.threshold)
                .param("change_spread_pct", 100.0 * r.spec.change_spread)
                .param("contamination_pct", 100.0 * r.spec.contamination)
                .param("contamination_scale", r.spec.contamination_scale)
                .param("containment", &r.containment);
            if let Some(sc) = r.shared_cpu() {
                rec.push_param("cpu_weight", &sc.weights);
                rec.push_metric("separate_cpu_groups", sc.separate_groups);
                rec.push_metric("window_overlap_median", sc.overlap_median);
                rec.push_metric("window_overlap_min", sc.overlap_min);
            }
            if let Some(p) = common.get(&m.key) {
                let shown: Vec<String> =
                    p.iter().map(|(k, v)| format!("{k}={}", show(v))).collect();
                rec.push_param("params", shown.join(" "));
            }
            let ea = Estimate::from_samples(&m.a);
            let eb = Estimate::from_samples(&m.b);
            rec.push_metric("ratio", m.ratio.ratio);
            rec.push_metric("ratio_lo", m.ratio.lo);
            rec.push_metric("ratio_hi", m.ratio.hi);
            rec.push_metric("p_value", m.ratio.p_value);
            // Each side's median with its interval and the per-pair values
            // (`_samples`, in pair order), so that runs can be pooled.
            commbench_core::estimate::attach(&mut rec.metrics, "a_median", &ea);
            commbench_core::estimate::attach(&mut rec.metrics, "b_median", &eb);
            rec.push_metric("verdict", m.word());
            rec.push_metric("headline", m.headline);
            rec.push_metric("pairs", m.ratio.n_before);
            rec.push_metric("pairs_ab", ab);
            rec.push_metric("pairs_ba", ba);
            rec.push_metric("settle_pairs", m.settle);
            rec.push_metric("redone_contaminated", contaminated);
            rec.push_metric("redone_failed", failed);
            rec.push_metric("stopped", r.stop.tag());
            rec.push_metric("decided", r.stop == Stop::Decided);
            rec.push_metric("elapsed_s", r.elapsed_s);
            rec
        })
        .collect()
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// A number with four significant digits and its unit.
pub use commbench_core::lab::answer::num;

fn ratio_text(m: &MetricResult) -> (String, String) {
    let r = &m.ratio;
    let (ratio, iv) = commbench_core::estimate::ratio_cells(r.ratio, r.lo, r.hi);
    if iv == "no interval" {
        (ratio, "[no interval]".into())
    } else {
        (ratio, iv)
    }
}

/// The terminal view: a header with the sides, the pairs and the
/// placement; one line per metric (headlines, or all with `all`), verdict
/// and ratio B/A first; then what stayed undecided and what would settle
/// it.
pub fn table(r: &AbReport, all: bool) -> String {
    let mut o = String::new();
    let (ab, ba) = r.orders();
    let (contaminated, failed) = r.redone();
    let _ = writeln!(
        o,
        "commbench ab · {}: A = {}, B = {} · ratio = B / A · threshold ±{}%",
        r.spec.name,
        r.spec.sides[0].value,
        r.spec.sides[1].value,
        num(100.0 * r.spec.threshold, "")
    );
    let _ = writeln!(
        o,
        "{} pairs ({ab} AB, {ba} BA; seed {}) in {:.0} s · {} · stopped: {}",
        r.kept(),
        r.spec.seed,
        r.elapsed_s,
        r.spec.placement.describe(),
        r.stop.describe()
    );
    if r.kept() < r.spec.min_pairs {
        let _ = writeln!(
            o,
            "cut short: {} pairs of the {} asked (--min-pairs) fit in the budget; the verdicts rest on them{}",
            r.kept(),
            r.spec.min_pairs,
            if r.kept() < commbench_core::estimate::paired::MIN_PAIRS {
                " (no interval exists below 6 pairs: raise --budget)"
            } else {
                ""
            }
        );
    }
    if contaminated + failed > 0 {
        let _ = writeln!(
            o,
            "redone: {contaminated} contaminated (the two trials waited for a CPU, or lost it to steal, for shares of their runnable time more than {} points apart{}), {failed} failed",
            num(100.0 * r.spec.contamination, ""),
            if r.spec.contamination_scale > 0.0 {
                format!(
                    " and more than {}× the run's median gap",
                    num(r.spec.contamination_scale, "")
                )
            } else {
                String::new()
            }
        );
        if let Some(w) = r
            .pairs
            .iter()
            .rev()
            .find_map(|p| p.redone_because.as_deref())
        {
            let _ = writeln!(o, "  last: {w}");
        }
    }
    let _ = writeln!(o, "trials held by: {}", r.containment);
    if let Some(sc) = r.shared_cpu() {
        let _ = writeln!(
            o,
            "shared CPU: {} cgroups, CPU weight {}; both sides ran together for {}% of the longer trial (median; least {}%)",
            if sc.separate_groups { "each side in its own" } else { "NOT always separate" },
            sc.weights,
            num(100.0 * sc.overlap_median, ""),
            num(100.0 * sc.overlap_min, "")
        );
    }
    if r.spec.wall_is_shared() && r.spec.metrics.is_empty() {
        let _ = writeln!(o, "note: {}", crate::SHARED_WALL);
    }
    if !r.sched_available {
        let _ = writeln!(
            o,
            "note: this kernel reports no per-thread scheduler statistics: contamination is judged by steal time only"
        );
    }
    for (k, diff) in &r.varied_params {
        if !diff.is_empty() {
            let d: Vec<String> = diff
                .iter()
                .map(|(n, a, b)| format!("{n}: {} → {}", show(a), show(b)))
                .collect();
            let _ = writeln!(o, "{} differs in {}", k.name(), d.join(", "));
        }
    }
    let rows: Vec<&MetricResult> = r.results.iter().filter(|m| all || m.headline).collect();
    if r.kept() == 0 {
        let _ = writeln!(
            o,
            "\nno pair was kept before the run stopped ({}): nothing to judge",
            r.stop.describe()
        );
        return o;
    }
    if rows.is_empty() {
        let _ = writeln!(
            o,
            "\nno headline metric in these records: name the metrics to judge with --metrics, or show every metric with --all"
        );
        return o;
    }
    let _ = writeln!(o);
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|m| {
            let (ratio, iv) = ratio_text(m);
            let what = format!("{} {}", m.key.name(), m.metric);
            let mut verdict = m.word().to_owned();
            if let Some(n) = m.settle {
                verdict = format!("{verdict} ({})", settle_text(n, m.ratio.n_before));
            }
            [
                verdict,
                ratio,
                iv,
                num(m.ratio.before_median, &m.unit),
                num(m.ratio.after_median, &m.unit),
                what,
            ]
        })
        .collect();
    let head = [
        "verdict",
        "paired B/A",
        "95% interval",
        "A median",
        "B median",
        "test metric",
    ];
    let mut w = head.map(|h| h.chars().count());
    for c in &cells {
        for (i, x) in c.iter().enumerate() {
            w[i] = w[i].max(x.chars().count());
        }
    }
    let line = |c: &[String; 6]| {
        let mut s = String::new();
        for (i, x) in c.iter().enumerate() {
            if i == 5 {
                s.push_str(x);
            } else {
                let pad = w[i] - x.chars().count();
                if (1..=4).contains(&i) {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(x);
                } else {
                    s.push_str(x);
                    s.push_str(&" ".repeat(pad));
                }
                s.push_str("  ");
            }
        }
        s.trim_end().to_owned()
    };
    let _ = writeln!(o, "{}", line(&head.map(String::from)));
    for c in &cells {
        let _ = writeln!(o, "{}", line(c));
    }
    // An A/A line read "A median 10.28 ns / B median 10.28 ns, 0.977×":
    // which figure is the paired ratio, and why it need not be the
    // medians' quotient, is said under the table.
    let _ = writeln!(
        o,
        "paired B/A: the pairs' B/A ratios' Hodges–Lehmann median, with its signed-rank 95% interval;\n\
         A median, B median: each side's own median (not a ratio: equal medians can pair to 0.98×)"
    );
    let heads: Vec<&MetricResult> = r.headlines().collect();
    let undecided: Vec<&&MetricResult> = heads
        .iter()
        .filter(|m| matches!(m.verdict, Verdict::Inconclusive | Verdict::NoSamples))
        .collect();
    let _ = writeln!(
        o,
        "\n{} of {} headline metrics decided",
        heads.len() - undecided.len(),
        heads.len()
    );
    for m in undecided {
        let more = match m.settle {
            Some(n) => format!(
                "{} would settle it (--max-pairs, --budget)",
                settle_text(n, m.ratio.n_before)
            ),
            None => "no number of pairs would settle it: the estimate sits on the threshold".into(),
        };
        let bound = match equivalence_bound(m.ratio.lo, m.ratio.hi) {
            Some(b) => format!("; what it shows: no change beyond ±{b}"),
            None => String::new(),
        };
        let _ = writeln!(
            o,
            "  {} {}: inconclusive; {more}{bound}",
            m.key.name(),
            m.metric
        );
    }
    if let Some(h) = shared_cpu_hint(r) {
        let _ = writeln!(o, "{h}");
    }
    o
}

/// What to try when a program's CPU time stayed inconclusive one side
/// after the other: the shared-CPU duet, where an awk loop's pairs spread
/// 1-2% against 20-28% sequentially (pinned to one CPU or not) on a VM
/// whose vCPUs change speed in spells shorter than a pair (statistics.md
/// §9). Only for sequential exec runs: a commbench lab's placement is its
/// own, and a duet already shares the spell or chose not to.
fn shared_cpu_hint(r: &AbReport) -> Option<&'static str> {
    let sequential = matches!(r.spec.placement, crate::Placement::Sequential(_));
    let cpu_open = r.headlines().any(|m| {
        matches!(m.metric.as_str(), "cpu_s" | "cpu_ns_per_op")
            && matches!(m.verdict, Verdict::Inconclusive)
    });
    (r.spec.exec.is_some() && sequential && cpu_open).then_some(
        "  a single-threaded, CPU-bound program decides sooner as a shared-CPU duet (--shared-cpu CPU): \
         both sides at once on one CPU, each in a cgroup of equal weight, meet the same spells of the machine \
         and are judged on their CPU time",
    )
}

/// How many pairs would settle a verdict, in words: a count within reach,
/// or "far more than" when the estimate sits so close to the threshold
/// that the count means nothing (tens of millions were printed).
fn settle_text(need: usize, done: usize) -> String {
    let reach = 20 * done.max(1);
    if need > reach {
        format!("far more than {reach} pairs")
    } else {
        format!("~{need} pairs")
    }
}

/// The smallest change the interval already rules out, as a percentage
/// ("3.2%"), when it holds 1: what an inconclusive A/A run does show.
fn equivalence_bound(lo: f64, hi: f64) -> Option<String> {
    if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && lo <= 1.0 && hi >= 1.0) {
        return None;
    }
    let b = (hi - 1.0).max(1.0 - lo) * 100.0;
    Some(format!("{:.1}%", (b * 10.0).ceil() / 10.0))
}

/// A benchmark's name in the exports: `LAB/TEST` of a matched record, or
/// for an exec run B's command.
fn bench_name(r: &AbReport, m: &MetricResult) -> String {
    if m.key.lab == "exec" {
        r.spec.sides[1].command_line()
    } else {
        m.key.name()
    }
}

/// Bencher Metric Format: per matched record (`LAB/TEST`), each metric's
/// B median with its 95% interval, and `<metric>.ratio`, the paired ratio
/// B/A with its interval.
pub fn bmf(r: &AbReport, all: bool) -> Value {
    let mut out = Map::new();
    for m in r.results.iter().filter(|m| all || m.headline) {
        let e = Estimate::from_samples(&m.b);
        let bench = out
            .entry(bench_name(r, m))
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(o) = bench {
            o.insert(
                m.metric.clone(),
                json!({"value": e.median, "lower_value": e.lo, "upper_value": e.hi}),
            );
            o.insert(
                format!("{}.ratio", m.metric),
                json!({"value": m.ratio.ratio, "lower_value": m.ratio.lo, "upper_value": m.ratio.hi}),
            );
        }
    }
    Value::Object(out)
}

/// Which metrics a github-action-benchmark file holds: the action reads
/// one direction per file (`customSmallerIsBetter` or
/// `customBiggerIsBetter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GithubTool {
    /// Metrics where lower is better.
    Smaller,
    /// Metrics where higher is better.
    Bigger,
}

/// github-action-benchmark's custom format: the headline metrics of one
/// direction, each with B's median, its interval as `range`, and the
/// paired verdict in `extra`.
pub fn github(r: &AbReport, tool: GithubTool, all: bool) -> Value {
    use commbench_core::lab::Better;
    let want = match tool {
        GithubTool::Smaller => Better::Lower,
        GithubTool::Bigger => Better::Higher,
    };
    let list: Vec<Value> = r
        .results
        .iter()
        .filter(|m| (all || m.headline) && m.better == want)
        .map(|m| {
            let e = Estimate::from_samples(&m.b);
            let (ratio, iv) = ratio_text(m);
            let hw = (e.hi - e.lo) / 2.0;
            json!({
                "name": format!("{} {}", bench_name(r, m), m.metric),
                "unit": m.unit,
                "value": e.median,
                "range": if hw.is_finite() { format!("± {}", num(hw, "")) } else { String::new() },
                "extra": format!(
                    "{}: {} = {} vs {}: B/A {} {} {}, {} pairs",
                    r.spec.name,
                    r.spec.sides[1].value,
                    num(m.ratio.after_median, &m.unit),
                    num(m.ratio.before_median, &m.unit),
                    ratio,
                    iv,
                    m.word(),
                    m.ratio.n_before
                ),
            })
        })
        .collect();
    Value::Array(list)
}

#[cfg(test)]
mod tests {
    use super::{equivalence_bound, num, settle_text};

    #[test]
    fn numbers_keep_four_digits_and_their_unit() {
        assert_eq!(num(13.2, "ticks"), "13.2 ticks");
        assert_eq!(num(653_212.0, "msg/s"), "653.2k msg/s");
        assert_eq!(num(2_500_000.0, ""), "2.5M");
        assert_eq!(num(100.0, ""), "100");
        assert_eq!(num(0.5, ""), "0.5");
        assert_eq!(num(f64::NAN, "ns"), "-");
    }

    #[test]
    fn a_count_out_of_reach_is_not_printed_as_if_it_were_one() {
        assert_eq!(settle_text(300, 100), "~300 pairs");
        assert_eq!(settle_text(64_835_870, 120), "far more than 2400 pairs");
    }

    #[test]
    fn an_inconclusive_interval_around_1_says_what_it_rules_out() {
        assert_eq!(equivalence_bound(0.9616, 1.0238).as_deref(), Some("3.9%"));
        assert_eq!(equivalence_bound(0.99, 1.031).as_deref(), Some("3.1%"));
        // Not around 1, or not measured: nothing to say.
        assert_eq!(equivalence_bound(1.01, 1.05), None);
        assert_eq!(equivalence_bound(f64::NAN, 1.05), None);
    }
}
