//! The line a person reads first: one per `run` and `trial` record, above
//! the record's full key/value table (the shape every other lab's output
//! has: the answer, then the detail).

use commbench_core::lab::answer::num;
use commbench_core::Record;

/// Summary lines of the `run` and `trial` records among `recs` (other
/// records get none); empty when there are none.
pub fn summary_lines(recs: &[Record]) -> String {
    let mut out = String::new();
    let sweep: Vec<&Record> = recs
        .iter()
        .filter(|r| r.test.starts_with("sweep-"))
        .collect();
    out.push_str(&sweep_table(&sweep));
    for r in recs {
        let line = match r.test.as_str() {
            "run" => run_line(r),
            "trial" => trial_line(r),
            _ => None,
        };
        if let Some(l) = line {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

fn p(r: &Record, k: &str) -> String {
    match r.params.get(k) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "-".into(),
    }
}

fn m(r: &Record, k: &str) -> Option<f64> {
    r.metric_f64(k).filter(|x| x.is_finite())
}

/// "rtc, 64 B, 1 queue, burst 32, tx bulk 32: 91.9 Mpps, 17.5 ticks per
/// packet (rx 2.2 + swap 7.7 + tx 7.0 + other 0.6); keeps up at 40 GbE,
/// falls short at 100 GbE (-1.1 ticks)".
fn run_line(r: &Record) -> Option<String> {
    let queues = p(r, "queues");
    let mut l = format!(
        "{}, {} B, {queues} queue{}, burst {}, tx bulk {}: {} Mpps",
        p(r, "mode"),
        p(r, "size"),
        if queues == "1" { "" } else { "s" },
        p(r, "burst"),
        p(r, "tx_bulk"),
        m(r, "mpps").map_or("-".into(), |x| format!("{x:.1}")),
    );
    let work = p(r, "work");
    let (rx, w, tx) = (m(r, "ticks_rx"), m(r, "ticks_work"), m(r, "ticks_tx"));
    let sink = m(r, "ticks_sink");
    match (m(r, "ticks_total"), rx, w, tx) {
        // Pipeline mode: the total is its parts over its threads; said as
        // their sum, as printed, so the line adds up.
        (_, Some(rx), Some(w), Some(tx)) if sink.is_some() => {
            let s = sink.unwrap_or_default();
            let r1 = |x: f64| format!("{x:.1}").parse::<f64>().unwrap_or(x);
            l.push_str(&format!(
                ", rx {rx:.1} + {work} {w:.1} + tx {tx:.1} + sink {s:.1} = {:.1} ticks per packet over its threads",
                r1(rx) + r1(w) + r1(tx) + r1(s)
            ));
        }
        (Some(t), Some(rx), Some(w), Some(tx)) => {
            l.push_str(&format!(
                ", {t:.1} ticks per packet{}",
                crate::lab::parts_text(t, rx, &work, w, tx)
            ));
        }
        (Some(t), ..) => l.push_str(&format!(", {t:.1} ticks per packet")),
        (None, Some(rx), Some(w), Some(tx)) => {
            l.push_str(&format!(
                ", rx {rx:.1} + {work} {w:.1} + tx {tx:.1}{} ticks per packet over its threads",
                sink.map_or(String::new(), |s| format!(" + sink {s:.1}"))
            ));
        }
        _ => {}
    }
    let links = ["10G", "25G", "40G", "100G"];
    let left: Vec<(&str, f64)> = links
        .iter()
        .filter_map(|k| Some((*k, m(r, &format!("left_ticks_{k}"))?)))
        .collect();
    let kept = left.iter().rev().find(|(_, x)| *x >= 0.0);
    let short = left.iter().find(|(_, x)| *x < 0.0);
    let gbe = |k: &str| format!("{} GbE", k.trim_end_matches('G'));
    match (kept, short) {
        (Some((k, _)), Some((s, x))) => l.push_str(&format!(
            "; keeps up at {}, falls short at {} ({x:+.1} ticks)",
            gbe(k),
            gbe(s)
        )),
        (Some((k, x)), None) => l.push_str(&format!("; keeps up at {} ({x:+.1} ticks)", gbe(k))),
        (None, Some((s, x))) => l.push_str(&format!("; falls short at {} ({x:+.1} ticks)", gbe(s))),
        (None, None) => {}
    }
    if r.metrics.get("partial").and_then(|v| v.as_bool()) == Some(true) {
        l.push_str("  [partial]");
    }
    Some(l)
}

/// Whether `recs` hold a sweep (its terminal view is [`sweep_table`]).
pub fn is_sweep(recs: &[Record]) -> bool {
    recs.iter().any(|r| r.test.starts_with("sweep-"))
}

/// A sweep's points in a table a terminal holds (under 100 columns): what
/// every point shares in one line, then per value of the swept parameter
/// the rate, the ticks per packet and their parts, what is left of the
/// 100 GbE budget and the flags. The record table of a sweep was ~60
/// columns, 781 characters a line.
pub fn sweep_table(recs: &[&Record]) -> String {
    let Some(first) = recs.first() else {
        return String::new();
    };
    let name = first.test.trim_start_matches("sweep-").replace('-', "_");
    let key = if first.params.contains_key(&name) {
        name.clone()
    } else {
        format!("{name}_ns")
    };
    let shared: Vec<String> = [
        ("mode", ""),
        ("size", " B"),
        ("burst", ""),
        ("tx_bulk", ""),
        ("queues", ""),
        ("work", ""),
    ]
    .iter()
    .filter(|(k, _)| *k != key)
    .map(|(k, unit)| match *k {
        "mode" | "size" => format!("{}{unit}", p(first, k)),
        _ => format!("{} {}", k.replace('_', " "), p(first, k)),
    })
    .collect();
    let mut out = format!("sweep of {key}: {}\n", shared.join(", "));
    let f = |r: &Record, k: &str| m(r, k).map_or("-".to_owned(), |x| format!("{x:.1}"));
    let head = [
        key.as_str(),
        "Mpps",
        "ticks/pkt",
        "rx",
        "work",
        "tx",
        "sink",
        "left@100G",
    ];
    let rows: Vec<[String; 8]> = recs
        .iter()
        .map(|r| {
            [
                p(r, &key),
                f(r, "mpps"),
                f(r, "ticks_total"),
                f(r, "ticks_rx"),
                f(r, "ticks_work"),
                f(r, "ticks_tx"),
                f(r, "ticks_sink"),
                m(r, "left_ticks_100G").map_or("-".to_owned(), |x| format!("{x:+.1}")),
            ]
        })
        .collect();
    let mut w = head.map(|h| h.chars().count());
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>, flags: &str| {
        let mut l: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:>width$}", width = w[i]))
            .collect();
        if !flags.is_empty() {
            l.push(flags.to_owned());
        }
        l.join("  ")
    };
    out.push_str(&line(head.to_vec(), "flags"));
    out.push('\n');
    for (r, cells) in recs.iter().zip(&rows) {
        let flags: Vec<&str> = ["partial", "oversubscribed"]
            .into_iter()
            .filter(|k| r.metrics.get(*k).and_then(|v| v.as_bool()) == Some(true))
            .collect();
        out.push_str(&line(
            cells.iter().map(String::as_str).collect(),
            &flags.join(", "),
        ));
        out.push('\n');
    }
    out.push_str("(every field of each point: --format csv or json, or -o FILE.csv)\n");
    out
}

/// "l2fwd:swap at 50k pps, 64 B: 100000 of 100000 received (loss 0%),
/// latency p50 600.2 µs, p99 1.0 ms (loopback p50 1.7 µs)", and the
/// record's latency note on the next line.
fn trial_line(r: &Record) -> Option<String> {
    let us = |ns: f64| {
        if ns >= 1e6 {
            format!("{:.1} ms", ns / 1e6)
        } else {
            format!("{:.1} µs", ns / 1e3)
        }
    };
    let size = p(r, "size");
    // A replayed capture's "size" is its name.
    let unit = if r.params.contains_key("traffic") {
        ""
    } else {
        " B"
    };
    let mut l = format!(
        "{} at {} pps, {size}{unit}: {} of {} received (loss {}%)",
        p(r, "dut"),
        r.params
            .get("offered_pps")
            .and_then(|v| v.as_f64())
            .map_or("-".into(), |x| num(x, "")),
        m(r, "received").map_or("-".into(), |x| format!("{x:.0}")),
        m(r, "sent").map_or("-".into(), |x| format!("{x:.0}")),
        m(r, "loss_pct").map_or("-".into(), |x| format!("{x:.3}")),
    );
    if let (Some(p50), Some(p99)) = (m(r, "latency_p50_ns"), m(r, "latency_p99_ns")) {
        l.push_str(&format!(", latency p50 {}, p99 {}", us(p50), us(p99)));
    }
    if let Some(b) = m(r, "loopback_latency_p50_ns") {
        l.push_str(&format!(" (loopback p50 {})", us(b)));
    }
    if r.metrics.get("partial").and_then(|v| v.as_bool()) == Some(true) {
        l.push_str("  [partial]");
    }
    for k in ["per_size", "per_protocol"] {
        if let Some(c) = class_line(r, k) {
            l.push_str(&format!("\n  {c}"));
        }
    }
    if let Some(n) = r.metrics.get("latency_note").and_then(|v| v.as_str()) {
        l.push_str(&format!("\n  note: {n}"));
    }
    Some(l)
}

/// A replayed capture's loss and latency per class (`per_size` or
/// `per_protocol`), one line: "by size: 64 0/989 lost, p99 52.4 µs; …".
fn class_line(r: &Record, key: &str) -> Option<String> {
    let v = r.metrics.get(key)?.as_array()?;
    let parts: Vec<String> = v
        .iter()
        .map(|c| {
            let f = |k: &str| c.get(k).and_then(|x| x.as_f64()).unwrap_or(f64::NAN);
            format!(
                "{} {:.0}/{:.0} lost, p99 {:.1} µs",
                c.get("class").and_then(|x| x.as_str()).unwrap_or("?"),
                f("lost"),
                f("sent"),
                f("latency_p99_ns") / 1e3
            )
        })
        .collect();
    let what = if key == "per_size" {
        "size"
    } else {
        "protocol"
    };
    (!parts.is_empty()).then(|| format!("by {what}: {}", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pipeline run` printed ~60 key/value rows and no line saying what
    /// they add up to: a summary line now comes first.
    #[test]
    fn pipeline_run_and_trial_start_with_a_summary_line() {
        let run = Record::new("pipeline", "run")
            .param("mode", "rtc")
            .param("size", 64)
            .param("burst", 32)
            .param("tx_bulk", 32)
            .param("queues", 1)
            .param("work", "swap")
            .metric("mpps", 91.874)
            .metric("ticks_rx", 2.1992)
            .metric("ticks_work", 7.6563)
            .metric("ticks_tx", 6.9883)
            .metric("ticks_total", 17.516)
            .metric("left_ticks_10G", 146.82)
            .metric("left_ticks_25G", 48.218)
            .metric("left_ticks_40G", 23.568)
            .metric("left_ticks_100G", -1.0823)
            .metric("partial", false);
        let trial = Record::new("pipeline", "trial")
            .param("dut", "l2fwd:swap")
            .param("size", "64")
            .param("offered_pps", 50_000.0)
            .metric("sent", 100_000)
            .metric("received", 100_000)
            .metric("loss_pct", 0.0)
            .metric("latency_p50_ns", 600_200.0)
            .metric("latency_p99_ns", 1_003_000.0)
            .metric("loopback_latency_p50_ns", 1_700.0)
            .metric(
                "latency_note",
                "latency includes up to 1 ms of the device's receive block timeout",
            )
            .metric("partial", false);
        let s = summary_lines(&[run, trial, Record::new("pipeline", "loopback")]);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines[0],
            "rtc, 64 B, 1 queue, burst 32, tx bulk 32: 91.9 Mpps, 17.5 ticks per packet \
             (rx 2.2 + swap 7.7 + tx 7.0 + other 0.6); keeps up at 40 GbE, falls short at 100 GbE (-1.1 ticks)"
        );
        assert_eq!(
            lines[1],
            "l2fwd:swap at 50k pps, 64 B: 100000 of 100000 received (loss 0.000%), \
             latency p50 600.2 µs, p99 1.0 ms (loopback p50 1.7 µs)"
        );
        assert!(
            lines[2].starts_with("  note: latency includes up to 1 ms"),
            "{s}"
        );
        assert_eq!(lines.len(), 3, "{s}");
    }
}
