//! hyperfine's export formats, so that a script written against hyperfine
//! reads `ab`'s results unchanged: `--export-json` (an object with
//! `results`, one per command: `command`, `mean`, `stddev`, `median`,
//! `user`, `system`, `min`, `max`, `times`, `memory_usage_byte`,
//! `exit_codes`, `parameters`) and `--export-markdown` (hyperfine's table;
//! its `Relative` column holds the paired ratio with its 95% interval).
//!
//! Invariants: only kept pairs' trials are exported (a failed or
//! contaminated pair's are not measurements); the baseline (A of the first
//! comparison) is one result, its runs pooled over every comparison, each
//! other value one result; numbers that cannot be computed are null.

use crate::AbReport;
use commbench_core::estimate::paired::ratio_paired;
use serde_json::{json, Value};

/// One command's kept runs.
struct Runs {
    command: String,
    value: String,
    wall: Vec<f64>,
    user: Vec<f64>,
    sys: Vec<f64>,
    rss_kib: Vec<u64>,
}

fn side_runs(r: &AbReport, side: usize) -> Runs {
    let kept = r.pairs.iter().filter(|p| p.kept);
    let mut out = Runs {
        command: r.spec.sides[side].command_line(),
        value: r.spec.sides[side].value.clone(),
        wall: Vec::new(),
        user: Vec::new(),
        sys: Vec::new(),
        rss_kib: Vec::new(),
    };
    for p in kept {
        out.wall.push(p.wall_s[side]);
        out.user.push(p.user_s[side]);
        out.sys.push(p.sys_s[side]);
        out.rss_kib.push(p.max_rss_kib[side]);
    }
    out
}

/// The baseline's runs (pooled over the comparisons) and each other
/// value's.
fn all_runs(reports: &[AbReport]) -> Vec<Runs> {
    let mut out: Vec<Runs> = Vec::new();
    for r in reports {
        let a = side_runs(r, 0);
        match out.first_mut() {
            Some(base) => {
                base.wall.extend(a.wall);
                base.user.extend(a.user);
                base.sys.extend(a.sys);
                base.rss_kib.extend(a.rss_kib);
            }
            None => out.push(a),
        }
        out.push(side_runs(r, 1));
    }
    out
}

fn mean(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| x.iter().sum::<f64>() / x.len() as f64)
}

fn stddev(x: &[f64]) -> Option<f64> {
    let m = mean(x)?;
    (x.len() > 1)
        .then(|| (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64).sqrt())
}

fn median(x: &[f64]) -> Option<f64> {
    let mut v = x.to_vec();
    (!v.is_empty()).then(|| commbench_core::stats::median(&mut v))
}

fn finite(x: Option<f64>) -> Value {
    match x {
        Some(v) if v.is_finite() => json!(v),
        _ => Value::Null,
    }
}

/// hyperfine's `--export-json` document.
pub fn json(reports: &[AbReport]) -> Value {
    let name = reports
        .first()
        .map(|r| r.spec.name.clone())
        .unwrap_or_default();
    let results: Vec<Value> = all_runs(reports)
        .into_iter()
        .map(|r| {
            let min = r.wall.iter().copied().fold(f64::INFINITY, f64::min);
            let max = r.wall.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            json!({
                "command": r.command,
                "mean": finite(mean(&r.wall)),
                "stddev": finite(stddev(&r.wall)),
                "median": finite(median(&r.wall)),
                "user": finite(mean(&r.user)),
                "system": finite(mean(&r.sys)),
                "min": finite(Some(min)),
                "max": finite(Some(max)),
                "times": r.wall,
                "memory_usage_byte": r.rss_kib.iter().map(|k| k * 1024).collect::<Vec<u64>>(),
                "exit_codes": vec![0; r.wall.len()],
                "parameters": { name.clone(): r.value },
            })
        })
        .collect();
    json!({ "results": results })
}

/// hyperfine's `--export-markdown` table: mean ± standard deviation, min,
/// max, and each value relative to the baseline (the paired ratio of wall
/// times with its 95% interval, from the pairs of its own comparison).
pub fn markdown(reports: &[AbReport]) -> String {
    let runs = all_runs(reports);
    let base_mean = runs.first().and_then(|r| mean(&r.wall)).unwrap_or(1.0);
    let (unit, scale) = if base_mean < 1.0 {
        ("ms", 1e3)
    } else {
        ("s", 1.0)
    };
    let mut o = format!(
        "| Command | Mean [{unit}] | Min [{unit}] | Max [{unit}] | Relative |\n|:---|---:|---:|---:|---:|\n"
    );
    let f = |x: Option<f64>| match x {
        Some(v) if v.is_finite() => format!("{:.1}", v * scale),
        _ => "-".into(),
    };
    for (i, r) in runs.iter().enumerate() {
        let min = r.wall.iter().copied().fold(f64::INFINITY, f64::min);
        let max = r.wall.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let relative = if i == 0 {
            "1.00".to_owned()
        } else {
            let rep = &reports[i - 1];
            let a = side_runs(rep, 0);
            let q = ratio_paired(&a.wall, &r.wall);
            if q.lo.is_finite() && q.hi.is_finite() {
                format!("{:.2} [{:.2}, {:.2}]", q.ratio, q.lo, q.hi)
            } else {
                format!("{:.2}", q.ratio)
            }
        };
        o.push_str(&format!(
            "| `{}` | {} ± {} | {} | {} | {} |\n",
            r.command.replace('|', "\\|"),
            f(mean(&r.wall)),
            f(stddev(&r.wall)),
            f(Some(min)),
            f(Some(max)),
            relative
        ));
    }
    o
}
