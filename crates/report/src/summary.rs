//! The suite's summary: per lab, the question its seed experiment asked
//! and commbench's answer in one line, with the headline figure and its
//! ratio, and flags when the run was oversubscribed, partial, cut short by
//! its budget or failed. Computed from the records alone through each
//! lab's [`Lab::answer`], so `commbench report` and a resumed suite print
//! the same table.

use commbench_core::lab::answer::{is, metric as m, of, param as s};
use commbench_core::lab::Lab;
use commbench_core::record::Record;
use serde_json::Value;

/// One lab's line.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub lab: &'static str,
    pub question: &'static str,
    pub answer: String,
    pub flags: Vec<String>,
}

fn truthy(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(true)))
}

/// The rows of the labs present in `recs`.
pub fn rows(recs: &[Record], labs: &[&dyn Lab]) -> Vec<Row> {
    let step_rec = |name: &str| {
        recs.iter()
            .rev()
            .find(|r| r.lab == "suite" && r.test == "step" && is(r, "step", name))
    };
    let mut out = Vec::new();
    for lab in labs {
        let mine = of(recs, lab.record_labs());
        let st = step_rec(lab.name());
        if mine.is_empty() && st.is_none() {
            continue;
        }
        let mut flags = Vec::new();
        let status = st
            .and_then(|r| r.metrics.get("status"))
            .and_then(Value::as_str)
            .unwrap_or("ok");
        if status != "ok" {
            flags.push(status.to_owned());
        }
        if st.and_then(|r| r.metrics.get("cut_short")).is_some() {
            flags.push("cut short by its time budget".into());
        }
        let partial = mine
            .iter()
            .filter(|r| truthy(r.metrics.get("partial")))
            .count();
        if partial > 0 {
            flags.push(format!("{partial} partial run(s)"));
        }
        if mine.iter().any(|r| truthy(r.metrics.get("oversubscribed"))) {
            flags.push("oversubscribed".into());
        }
        let answer = lab
            .answer(recs)
            .unwrap_or_else(|| "no figure (the step produced no records for it)".into());
        out.push(Row {
            lab: lab.name(),
            question: lab.question(),
            answer,
            flags,
        });
    }
    out
}

/// The summary as printed: a header with the machine, one line per lab,
/// then the steps' times.
pub fn render(recs: &[Record], env: &Value, labs: &[&dyn Lab]) -> String {
    let e = |k: &str| {
        env.get(k)
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
    };
    let load = env
        .get("load_average")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_f64);
    let mut out = format!(
        "commbench suite · {} · {}, {} CPUs · kernel {} · load {} at start · {} build\n\n",
        e("started_utc").unwrap_or_default(),
        e("cpu_model").unwrap_or_default(),
        e("logical_cpus").unwrap_or_default(),
        e("kernel").unwrap_or_default(),
        load.map_or("?".into(), |l| format!("{l:.1}")),
        e("build_profile").unwrap_or_default(),
    );
    let rows = rows(recs, labs);
    let qw = rows
        .iter()
        .map(|r| r.question.chars().count())
        .max()
        .unwrap_or(8);
    out.push_str(&format!("{:<9} {:<qw$}  answer\n", "lab", "question"));
    for r in &rows {
        let flags = if r.flags.is_empty() {
            String::new()
        } else {
            format!("  [{}]", r.flags.join("; "))
        };
        out.push_str(&format!(
            "{:<9} {:<qw$}  {}{flags}\n",
            r.lab, r.question, r.answer
        ));
    }
    let steps: Vec<String> = recs
        .iter()
        .filter(|r| r.lab == "suite" && r.test == "step")
        .map(|r| {
            format!(
                "{} {:.1} s",
                s(r, "step").unwrap_or_default(),
                m(r, "seconds").unwrap_or(f64::NAN)
            )
        })
        .collect();
    if !steps.is_empty() {
        let total: f64 = recs
            .iter()
            .filter(|r| r.lab == "suite")
            .filter_map(|r| m(r, "seconds"))
            .sum();
        out.push_str(&format!(
            "\nsteps: {} (total {total:.0} s)\n",
            steps.join(", ")
        ));
    }
    out
}
