//! `history`'s terminal view: the runs, then the trends grouped by
//! (source, metric, host), every line within [`WIDTH`] columns. The record
//! table it replaces printed every field of a trend on one line (274
//! characters in a new user's store, 172 for a delay run); the machine
//! formats (`--format csv|json|jsonl`) still carry every field.
//!
//! Invariants: each trend is one row under its group's header; the
//! parameters all rows of a group share are said once in the header, the
//! others in the row; a note goes on its own indented line; text from the
//! store is shown with control characters escaped.

use commbench_core::estimate::ratio_cells;
use commbench_core::lab::answer::num;
use commbench_core::record::{escape_control, Record};
use serde_json::Value;
use std::fmt::Write;

/// The widest line the view prints.
pub const WIDTH: usize = 100;

fn param(r: &Record, k: &str) -> String {
    match r.params.get(k) {
        Some(Value::String(s)) => escape_control(s).into_owned(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

fn metric_text(r: &Record, k: &str) -> String {
    match r.metrics.get(k) {
        Some(Value::String(s)) => escape_control(s).into_owned(),
        _ => String::new(),
    }
}

/// `s` cut to `max` characters, the cut marked.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// `text` after `first` in lines of at most [`WIDTH`] columns, broken at
/// spaces, the lines after the first starting with `indent`.
fn wrap(first: &str, text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_owned();
    let mut fresh = first.is_empty();
    for w in text.split(' ').filter(|w| !w.is_empty()) {
        let w = cut(w, WIDTH - indent.chars().count());
        if !fresh && line.chars().count() + 1 + w.chars().count() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_owned();
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(&w);
        fresh = false;
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// Columns aligned (`right[i]`: right-aligned), each line cut to
/// [`WIDTH`].
fn table(head: &[&str], rows: &[Vec<String>], right: &[bool], indent: &str) -> String {
    let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if right[i] {
                    format!("{c:>width$}", width = w[i])
                } else {
                    format!("{c:<width$}", width = w[i])
                }
            })
            .collect();
        cut(&format!("{indent}{}", parts.join("  ").trim_end()), WIDTH)
    };
    let mut out = line(head.to_vec());
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// The runs (`history run` records) and the trends (`history trend`
/// records), in the order given.
pub fn history_text(runs: &[Record], trends: &[Record]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "runs ({}):", runs.len());
    if !runs.is_empty() {
        let rows: Vec<Vec<String>> = runs
            .iter()
            .map(|r| {
                vec![
                    param(r, "run"),
                    // A prefix names a run as well (`--run`, `--baseline`).
                    param(r, "run_id").chars().take(12).collect(),
                    param(r, "started_utc"),
                    cut(&param(r, "host"), 16),
                    cut(&param(r, "git_sha"), 18),
                    param(r, "build_profile"),
                    r.metric_f64("records")
                        .map_or("-".into(), |x| format!("{x:.0}")),
                ]
            })
            .collect();
        o.push_str(&table(
            &[
                "run",
                "run_id",
                "started_utc",
                "host",
                "git_sha",
                "profile",
                "records",
            ],
            &rows,
            &[true, false, false, false, false, false, true],
            "",
        ));
    }
    if trends.is_empty() {
        return o;
    }
    let _ = writeln!(
        o,
        "\ntrends (each series's first run against its last, ratio = last / first):"
    );
    // Groups by (source, metric, host), in first-seen order.
    let mut order: Vec<(String, String, String)> = Vec::new();
    let mut members: std::collections::HashMap<(String, String, String), Vec<&Record>> =
        std::collections::HashMap::new();
    for t in trends {
        let k = (param(t, "source"), param(t, "metric"), param(t, "host"));
        let e = members.entry(k.clone()).or_default();
        if e.is_empty() {
            order.push(k);
        }
        e.push(t);
    }
    for k in order {
        let rows = &members[&k];
        let split = |t: &Record| -> Vec<(String, String)> {
            param(t, "params")
                .split(' ')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((a, b)) => (a.to_owned(), b.to_owned()),
                    None => (p.to_owned(), String::new()),
                })
                .collect()
        };
        let lists: Vec<Vec<(String, String)>> = rows.iter().map(|t| split(t)).collect();
        // Shared: in every row with one value (a one-row group shares all).
        let shared: Vec<(String, String)> = lists[0]
            .iter()
            .filter(|p| lists.iter().all(|l| l.contains(p)))
            .cloned()
            .collect();
        let shared_text: Vec<String> = shared.iter().map(|(a, b)| format!("{a}={b}")).collect();
        let mut header = format!("{} · {} · host {}", k.0, k.1, k.2);
        if !shared_text.is_empty() && rows.len() > 1 {
            let _ = write!(header, " · in every row: {}", shared_text.join(" "));
        } else if !shared_text.is_empty() {
            let _ = write!(header, " · {}", shared_text.join(" "));
        }
        o.push_str(&wrap("", &header, "    "));
        let own = |l: &Vec<(String, String)>| -> String {
            let v: Vec<String> = l
                .iter()
                .filter(|p| rows.len() == 1 || !shared.contains(p))
                .map(|(a, b)| format!("{a}={b}"))
                .collect();
            cut(&v.join(" "), 40)
        };
        let cells: Vec<Vec<String>> = rows
            .iter()
            .zip(&lists)
            .map(|(t, l)| {
                let m = |key: &str| t.metric_f64(key).unwrap_or(f64::NAN);
                let (ratio, iv) = ratio_cells(m("ratio"), m("ratio_lo"), m("ratio_hi"));
                vec![
                    if rows.len() == 1 {
                        String::new()
                    } else {
                        own(l)
                    },
                    t.metric_f64("runs")
                        .map_or("-".into(), |x| format!("{x:.0}")),
                    num(m("first"), ""),
                    num(m("last"), ""),
                    ratio,
                    iv,
                    metric_text(t, "verdict"),
                ]
            })
            .collect();
        let head = [
            "params",
            "runs",
            "first",
            "last",
            "ratio",
            "95% interval",
            "verdict",
        ];
        let right = [false, true, true, true, true, false, false];
        // One series: its parameters are in the header, no params column.
        let from = usize::from(rows.len() == 1);
        let cells: Vec<Vec<String>> = cells.into_iter().map(|c| c[from..].to_vec()).collect();
        let text = table(&head[from..], &cells, &right[from..], "  ");
        let mut lines = text.lines();
        let _ = writeln!(o, "{}", lines.next().unwrap_or_default());
        for (line, t) in lines.zip(rows.iter()) {
            let _ = writeln!(o, "{line}");
            let note = metric_text(t, "note");
            if !note.is_empty() {
                o.push_str(&wrap("    note:", &note, "      "));
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trend(params: &str, ratio: f64, note: &str) -> Record {
        Record::new("history", "trend")
            .param("source", "timer/read_cost")
            .param("params", params)
            .param("host", "vm")
            .param("metric", "ns_median")
            .metric("runs", 2)
            .metric("first", 14.908)
            .metric("last", 14.898)
            .metric("ratio", ratio)
            .metric("ratio_lo", 0.57141)
            .metric("ratio_hi", 1.75)
            .metric("change_pct", (ratio - 1.0) * 100.0)
            .metric("verdict", "inconclusive")
            .metric("note", note)
    }

    /// Issue 51, item 6: `history` printed a trend's every field on one
    /// line, 274 characters; a delay run's 172. Every line is within 100
    /// columns, the shared parameters said once per group, the varying
    /// ones per row, a long note on its own wrapped lines.
    #[test]
    fn history_lines_were_274_characters() {
        let run = Record::new("history", "run")
            .param("run", 1)
            .param("run_id", "ef375d545f113a5862829893fd98e7f8")
            .param("started_utc", "2026-11-27T06:35:55.581Z")
            .param("host", "vm")
            .param("git_sha", "555e9008ca67-dirty")
            .param("build_profile", "debug")
            .metric("records", 5);
        let long = "load 1.1 vs 2.6: the machine changed; ".repeat(5);
        let trends = vec![
            trend("method=rdtsc batch=1000 batches=200", 0.99934, ""),
            trend("method=rdtscp batch=1000 batches=200", 1.0, &long),
        ];
        let t = history_text(&[run], &trends);
        for l in t.lines() {
            assert!(
                l.chars().count() <= WIDTH,
                "{} columns: {l}\n{t}",
                l.chars().count()
            );
        }
        assert!(t.starts_with("runs (1):\nrun  run_id"), "{t}");
        assert!(t.contains("  ef375d545f11  2026-11-27"), "{t}");
        assert!(
            t.contains(
                "timer/read_cost · ns_median · host vm · in every row: batch=1000 batches=200"
            ),
            "{t}"
        );
        let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("  method=")).collect();
        assert_eq!(rows.len(), 2, "{t}");
        assert!(
            rows[0].contains("inconclusive") && rows[0].contains("1.75"),
            "{t}"
        );
        assert!(t.contains("    note: load 1.1 vs 2.6"), "{t}");
    }
}
