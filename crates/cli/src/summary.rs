//! The suite's summary: per lab, the question its seed experiment asked
//! and commbench's answer in one line, with the headline figure and its
//! ratio, and flags when the run was oversubscribed, partial, cut short by
//! its budget or failed. Computed from the records alone, so
//! `commbench report` and a resumed suite print the same table.

use commbench_core::record::{human_number, Record};
use commbench_core::stats::percentile_sorted;
use serde_json::Value;

/// One lab's line.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub lab: &'static str,
    pub question: &'static str,
    pub answer: String,
    pub flags: Vec<String>,
}

fn s(r: &Record, k: &str) -> Option<String> {
    r.params
        .get(k)
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
}

fn m(r: &Record, k: &str) -> Option<f64> {
    r.metric_f64(k).filter(|x| x.is_finite())
}

/// Median of a metric over the records `pick` accepts.
fn med<'a>(
    recs: impl Iterator<Item = &'a Record>,
    pick: impl Fn(&Record) -> bool,
    k: &str,
) -> Option<f64> {
    let mut v: Vec<f64> = recs.filter(|r| pick(r)).filter_map(|r| m(r, k)).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(percentile_sorted(&v, 0.5))
}

fn is(r: &Record, k: &str, v: &str) -> bool {
    s(r, k).as_deref() == Some(v)
}

/// A rate: 150k, 16.2M.
fn n(x: f64) -> String {
    let (v, u) = if x >= 1e9 {
        (x / 1e9, "G")
    } else if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        return human_number(x);
    };
    let t = format!("{v:.1}");
    format!("{}{u}", t.trim_end_matches(".0"))
}

/// `a / b` as "3.2×".
fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() {
        format!("{:.1}×", a / b)
    } else {
        "-".into()
    }
}

fn ns(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} ms", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} µs", x / 1e3)
    } else {
        format!("{x:.0} ns")
    }
}

fn of<'a>(recs: &'a [Record], labs: &[&str]) -> Vec<&'a Record> {
    recs.iter()
        .filter(|r| labs.contains(&r.lab.as_str()))
        .collect()
}

fn core(recs: &[Record]) -> Option<String> {
    let r = of(recs, &["delay", "timer"]);
    let spin = med(
        r.iter().copied(),
        |x| {
            x.test == "tsc_spin"
                && x.params.get("requested_ns").and_then(Value::as_f64) == Some(1000.0)
        },
        "median_ns",
    )?;
    let mut a = format!(
        "TSC spin 1 µs → {} ({:+.1}%)",
        ns(spin),
        (spin / 1000.0 - 1.0) * 100.0
    );
    if let Some(sl) = med(
        r.iter().copied(),
        |x| {
            x.test == "nanosleep"
                && x.params.get("requested_ns").and_then(Value::as_f64) == Some(10_000.0)
        },
        "median_ns",
    ) {
        a.push_str(&format!(
            "; nanosleep 10 µs → {} ({} asked)",
            ns(sl),
            ratio(sl, 10_000.0)
        ));
    }
    let read = |method: &str| {
        med(
            r.iter().copied(),
            |x| x.test == "read_cost" && is(x, "method", method),
            "ns_median",
        )
    };
    if let (Some(t), Some(c)) = (read("rdtsc"), read("clock_gettime_monotonic")) {
        a.push_str(&format!(
            "; clock read: rdtsc {t:.1} ns, clock_gettime {c:.1} ns"
        ));
    }
    Some(a)
}

fn ipc(recs: &[Record]) -> Option<String> {
    let r = of(recs, &["ipc"]);
    let rate = |t: &str| {
        med(
            r.iter().copied(),
            |x| x.test == "reqres" && is(x, "transport", t),
            "msgs_per_s",
        )
    };
    let cpu = |t: &str| {
        let f = |k| {
            med(
                r.iter().copied(),
                |x| x.test == "reqres" && is(x, "transport", t),
                k,
            )
        };
        Some(f("server_cpu_ns_per_msg")? + f("client_cpu_ns_per_msg")?)
    };
    let shm = rate("shm")?;
    let (best, b) = ["uds", "pipe", "tcp"]
        .iter()
        .filter_map(|t| rate(t).map(|v| (*t, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let mut a = format!(
        "request/response: shm {} msg/s vs {best} (fastest kernel path) {} = {}",
        n(shm),
        n(b),
        ratio(shm, b)
    );
    if let (Some(c1), Some(c2)) = (cpu("shm"), cpu(best)) {
        a.push_str(&format!("; CPU per message {} vs {}", ns(c1), ns(c2)));
    }
    Some(a)
}

fn openflow(recs: &[Record]) -> Option<String> {
    let r = of(recs, &["openflow"]);
    let get = |v: &str, k: &str| {
        med(
            r.iter().copied(),
            |x| {
                x.test == "bench"
                    && is(x, "variant", v)
                    && is(x, "mode", "throughput")
                    && x.params.get("switches").and_then(Value::as_u64) == Some(1)
            },
            k,
        )
    };
    let t = get("template", "responses_per_s_median")?;
    let nv = get("naive", "responses_per_s_median")?;
    let mut a = format!(
        "template {}/s vs naive {}/s = {} (seed: ~10× in Ruby)",
        n(t),
        n(nv),
        ratio(t, nv)
    );
    if let (Some(ct), Some(cn)) = (
        get("template", "controller_ns_per_response"),
        get("naive", "controller_ns_per_response"),
    ) {
        a.push_str(&format!(
            "; controller CPU {} vs {} per response",
            ns(ct),
            ns(cn)
        ));
    }
    Some(a)
}

fn mux(recs: &[Record]) -> Option<String> {
    let r = of(recs, &["mux"]);
    let get = |e: &str, l: &str| {
        med(
            r.iter().copied(),
            |x| x.test == "echo" && is(x, "engine", e) && is(x, "lookup", l),
            "server_cpu_us_per_rt",
        )
    };
    let conns = r
        .iter()
        .find(|x| x.test == "echo")
        .and_then(|x| x.params.get("conns").and_then(Value::as_u64))?;
    let poll = get("poll", "index")?;
    let ep = get("epoll-lt", "index")?;
    let mut a = format!(
        "{conns} connections, server CPU per round trip: epoll {ep:.2} µs vs poll {poll:.2} µs = {}",
        ratio(ep, poll)
    );
    if let Some(scan) = get("epoll-lt", "scan") {
        a.push_str(&format!(
            "; epoll with the seed's linear state lookup {scan:.2} µs ({} of indexed)",
            ratio(scan, ep)
        ));
    }
    if let Some(u) = get("io-uring", "index") {
        a.push_str(&format!("; io_uring {u:.2} µs"));
    }
    Some(a)
}

fn pcap(recs: &[Record]) -> Option<String> {
    let r = of(recs, &["pcap"]);
    let cpu = med(
        r.iter().copied(),
        |x| x.test == "extract" && x.params.get("threads").and_then(Value::as_u64) == Some(1),
        "cpu_mb_s",
    )?;
    let mut a = format!("extraction {:.1} GB/s per CPU-second", cpu / 1000.0);
    let real = |c: &str| {
        med(
            r.iter().copied(),
            |x| x.test == "bench" && is(x, "cache", c),
            "real_s_median",
        )
    };
    if let (Some(cold), Some(warm)) = (real("cold"), real("warm")) {
        let verdict = r
            .iter()
            .find(|x| x.test == "bench" && is(x, "cache", "cold"))
            .and_then(|x| x.metrics.get("verdict"))
            .and_then(Value::as_str)
            .map(|v| format!(" ({v})"))
            .unwrap_or_default();
        a.push_str(&format!(
            "; cold cache {} slower than warm{verdict}",
            ratio(cold, warm)
        ));
    }
    Some(a)
}

fn pipeline(recs: &[Record]) -> Option<String> {
    let r = of(recs, &["pipeline"]);
    let rtc = |k: &str| {
        med(
            r.iter().copied(),
            |x| x.test == "run" && is(x, "mode", "rtc"),
            k,
        )
    };
    let total = rtc("ticks_total")?;
    let mut a = format!("run to completion at 64 B: {total:.1} ticks per packet");
    if let (Some(rx), Some(w), Some(tx)) = (rtc("ticks_rx"), rtc("ticks_work"), rtc("ticks_tx")) {
        a.push_str(&format!(" (rx {rx:.1} + swap {w:.1} + tx {tx:.1})"));
    }
    if let Some(left) = rtc("left_ticks_100G") {
        a.push_str(&format!(
            ", {} at 100 GbE ({:+.1} ticks)",
            if left >= 0.0 {
                "keeps up"
            } else {
                "falls short"
            },
            left
        ));
    }
    if let Some(t) = med(
        r.iter().copied(),
        |x| x.test == "rss-hash" && is(x, "impl", "table") && is(x, "input", "ipv4-l4"),
        "ticks_per_hash",
    ) {
        a.push_str(&format!("; Toeplitz {t:.1} ticks per IPv4 4-tuple"));
    }
    Some(a)
}

type Answer = fn(&[Record]) -> Option<String>;

/// (step, labs, question, answer)
const LABS: [(&str, &[&str], &str, Answer); 6] = [
    (
        "core",
        &["timer", "budget", "delay"],
        "how exactly can a loop wait, and what does a clock read cost?",
        core,
    ),
    (
        "ipc",
        &["ipc"],
        "is shared memory faster than the kernel's paths?",
        ipc,
    ),
    (
        "openflow",
        &["openflow"],
        "how much does a cached flow_mod template save?",
        openflow,
    ),
    (
        "mux",
        &["mux"],
        "poll or epoll at many connections, and does the lookup matter?",
        mux,
    ),
    (
        "pcap",
        &["pcap"],
        "how fast can headers be pulled from a capture; is it I/O bound?",
        pcap,
    ),
    (
        "pipeline",
        &["pipeline"],
        "what do rx burst, work and tx cost per packet?",
        pipeline,
    ),
];

fn truthy(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(true)))
}

/// The rows of the labs present in `recs`.
pub fn rows(recs: &[Record]) -> Vec<Row> {
    let step_rec = |name: &str| {
        recs.iter()
            .rev()
            .find(|r| r.lab == "suite" && r.test == "step" && is(r, "step", name))
    };
    let mut out = Vec::new();
    for (step, labs, question, answer) in LABS {
        let mine = of(recs, labs);
        let st = step_rec(step);
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
        let answer = answer(recs)
            .unwrap_or_else(|| "no figure (the step produced no records for it)".into());
        out.push(Row {
            lab: step,
            question,
            answer,
            flags,
        });
    }
    out
}

/// The summary as printed: a header with the machine, one line per lab,
/// then the steps' times.
pub fn render(recs: &[Record], env: &Value) -> String {
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
    let rows = rows(recs);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lab: &str, test: &str, params: &[(&str, Value)], metrics: &[(&str, Value)]) -> Record {
        let mut r = Record::new(lab, test);
        for (k, v) in params {
            r = r.param(k, v.clone());
        }
        for (k, v) in metrics {
            r = r.metric(k, v.clone());
        }
        r
    }

    fn sample() -> Vec<Record> {
        use serde_json::json;
        let mut v = vec![
            rec(
                "delay",
                "tsc_spin",
                &[("requested_ns", json!(1000))],
                &[("median_ns", json!(991.5))],
            ),
            rec(
                "delay",
                "nanosleep",
                &[("requested_ns", json!(10000))],
                &[("median_ns", json!(74615.7))],
            ),
            rec(
                "timer",
                "read_cost",
                &[("method", json!("rdtsc"))],
                &[("ns_median", json!(9.47))],
            ),
            rec(
                "timer",
                "read_cost",
                &[("method", json!("clock_gettime_monotonic"))],
                &[("ns_median", json!(24.9))],
            ),
        ];
        for (t, rate, sc, cc) in [
            ("shm", 150e3, 2000.0, 2100.0),
            ("uds", 180e3, 2500.0, 2600.0),
            ("tcp", 110e3, 4000.0, 4100.0),
        ] {
            v.push(rec(
                "ipc",
                "reqres",
                &[("transport", json!(t))],
                &[
                    ("msgs_per_s", json!(rate)),
                    ("server_cpu_ns_per_msg", json!(sc)),
                    ("client_cpu_ns_per_msg", json!(cc)),
                    ("oversubscribed", json!(true)),
                ],
            ));
        }
        for (var, rate, c) in [("naive", 4.5e6, 200.0), ("template", 16.2e6, 55.0)] {
            v.push(rec(
                "openflow",
                "bench",
                &[
                    ("switches", json!(1)),
                    ("mode", json!("throughput")),
                    ("variant", json!(var)),
                ],
                &[
                    ("responses_per_s_median", json!(rate)),
                    ("controller_ns_per_response", json!(c)),
                ],
            ));
        }
        v.push(rec(
            "openflow",
            "bench",
            &[
                ("switches", json!(16)),
                ("mode", json!("latency")),
                ("variant", json!("naive")),
            ],
            &[
                ("responses_per_s_median", json!(6e4)),
                ("partial", json!(true)),
            ],
        ));
        for (e, l, cpu) in [
            ("poll", "index", 9.5),
            ("epoll-lt", "index", 8.1),
            ("epoll-lt", "scan", 12.4),
            ("io-uring", "index", 7.9),
        ] {
            v.push(rec(
                "mux",
                "echo",
                &[
                    ("engine", json!(e)),
                    ("lookup", json!(l)),
                    ("conns", json!(1000)),
                ],
                &[("server_cpu_us_per_rt", json!(cpu))],
            ));
        }
        v.push(rec(
            "pcap",
            "extract",
            &[("threads", json!(1))],
            &[("cpu_mb_s", json!(4050.0))],
        ));
        v.push(rec(
            "pcap",
            "bench",
            &[("cache", json!("cold"))],
            &[
                ("real_s_median", json!(0.0506)),
                ("verdict", json!("I/O bound")),
            ],
        ));
        v.push(rec(
            "pcap",
            "bench",
            &[("cache", json!("warm"))],
            &[("real_s_median", json!(0.0142))],
        ));
        v.push(rec(
            "pipeline",
            "run",
            &[("mode", json!("rtc"))],
            &[
                ("ticks_total", json!(8.6)),
                ("ticks_rx", json!(0.8)),
                ("ticks_work", json!(3.6)),
                ("ticks_tx", json!(4.1)),
                ("left_ticks_100G", json!(8.8)),
            ],
        ));
        v.push(rec(
            "pipeline",
            "rss-hash",
            &[("impl", json!("table")), ("input", json!("ipv4-l4"))],
            &[("ticks_per_hash", json!(9.2))],
        ));
        for (step, secs, status) in [
            ("core", 1.2, "ok"),
            ("ipc", 3.4, "ok"),
            ("openflow", 55.1, "ok"),
            ("mux", 4.0, "failed: no io_uring"),
            ("pcap", 2.2, "ok"),
            ("pipeline", 3.0, "ok"),
        ] {
            let mut r = rec(
                "suite",
                "step",
                &[("step", json!(step))],
                &[("seconds", json!(secs)), ("status", json!(status))],
            );
            if step == "openflow" {
                r.push_metric("cut_short", "16 switches, latency, trivial");
            }
            v.push(r);
        }
        v
    }

    #[test]
    fn summary_answers_each_lab_in_a_line_with_its_ratio_and_flags() {
        use serde_json::json;
        let env = json!({"started_utc": "2026-11-24T10:00:00Z", "cpu_model": "AMD EPYC", "logical_cpus": 2,
                         "kernel": "6.18", "load_average": [2.1, 1.9, 1.7], "build_profile": "release"});
        insta::assert_snapshot!(render(&sample(), &env));
    }

    #[test]
    fn a_lab_without_its_figures_says_so_instead_of_inventing_one() {
        let v = vec![Record::new("ipc", "stream")];
        let r = rows(&v);
        assert_eq!(r.len(), 1);
        assert!(r[0].answer.starts_with("no figure"), "{r:?}");
    }
}
