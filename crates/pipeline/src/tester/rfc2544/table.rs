//! The tables of a run: one line per frame size and kind (RFC 2544's
//! search), MLRsearch's goals with their bounds, the repeats, the
//! device's CPU line and the back-to-back bursts.

use super::{cv_pct, B2bResult, SearchResult};
use crate::tester::mlrsearch::controller::GoalResult;
use commbench_core::estimate::Estimate;

/// The table of a run's searches: [`mlr_table`] for MLRsearch, else one
/// line per frame size and kind (RFC 2544's), a rate nothing passed at
/// saying so in words.
pub fn table(rows: &[(String, SearchResult)]) -> String {
    if rows.iter().any(|(_, r)| r.goal.is_some()) {
        return mlr_table(rows);
    }
    let mut s = String::from(
        "frame size  kind  loss allowed  rate (pps)     Mpps    confirmed  tester-limited  losses above it in  latency p50 / p99 / max (µs)\n",
    );
    let mut notes = String::new();
    for (size, r) in rows {
        let u = unit(size);
        let lat = latency_cell(r);
        let (rate, mpps) = if r.rate_pps > 0.0 {
            (
                format!("{:.0}", r.rate_pps),
                format!("{:.4}", r.rate_pps / 1e6),
            )
        } else {
            notes.push_str(&format!(
                "{size}{u} {}: not measured: {}\n",
                r.kind,
                if r.tester_limited {
                    format!(
                        "the generator could not keep {:.0} pps on schedule",
                        r.tester_ceiling_pps
                    )
                } else {
                    format!("no trial passed, down to {:.0} pps", r.fail_pps)
                }
            ));
            ("not measured".to_owned(), "-".to_owned())
        };
        s.push_str(&format!(
            "{:>10}  {:4}  {:>11}%  {:>12}  {:>7}  {:9}  {:14}  {:18}  {}\n",
            size,
            r.kind,
            r.loss_allowed_pct,
            rate,
            mpps,
            if r.confirmed { "yes" } else { "NO" },
            if r.tester_limited { "yes" } else { "no" },
            if r.fail_loss_where.is_empty() {
                "-"
            } else {
                &r.fail_loss_where
            },
            lat
        ));
        notes.push_str(&device_line(&format!("{size}{u} {}", r.kind), r));
    }
    s.push_str(&notes);
    s
}

/// A search's device CPU in a line (CSIT's clocks per packet beside the
/// rate): its own CPU per frame at the found rate with the interval over
/// those trials, its share of its CPU there, the rate per device
/// CPU-second, and other work's share of its CPU, flagged over 5%.
pub fn device_line(label: &str, r: &SearchResult) -> String {
    let d = &r.device;
    if !d.measured() {
        return format!(
            "{label}: device CPU not measured (the device is not one the tester started here)\n"
        );
    }
    let mut parts = Vec::new();
    if !d.ns_per_frame.is_empty() {
        let e = Estimate::from_samples(&d.ns_per_frame);
        let iv = if e.n >= 2 {
            format!(" [{}, {}]", or_dash(e.lo, 0), or_dash(e.hi, 0))
        } else {
            String::new()
        };
        parts.push(format!(
            "device CPU {} ns per frame{iv}",
            or_dash(e.median, 0)
        ));
    }
    if !d.ns_per_frame.is_empty() && r.rate_pps.is_finite() && r.rate_pps > 0.0 {
        let per: Vec<f64> = d
            .ns_per_frame
            .iter()
            .filter(|x| **x > 0.0)
            .map(|x| 1e9 / x)
            .collect();
        let e = Estimate::from_samples(&per);
        let share = if d.share.is_empty() {
            String::new()
        } else {
            let mut v = d.share.clone();
            format!(
                ", {:.0}% of its CPU's window",
                commbench_core::stats::median(&mut v) * 100.0
            )
        };
        parts.push(format!(
            "at {:.0} pps{share}: {:.0} frames per device CPU-second",
            r.rate_pps, e.median
        ));
    }
    if let Some(o) = d.others_median() {
        parts.push(format!("other work took {o:.1}% of its CPU"));
    }
    let flag = if d.shared() {
        " — DEVICE CPU SHARED: the rate measures what the host's other work left the device; \
         compare the rate per device CPU-second"
    } else {
        ""
    };
    format!("{label}: {}{flag}\n", parts.join("; "))
}

/// The latency of a search's final trial, µs.
fn latency_cell(r: &SearchResult) -> String {
    r.final_trial.as_ref().map_or("-".to_owned(), |t| {
        format!(
            "{:.1} / {:.1} / {:.1}",
            t.latency.p50 / 1e3,
            t.latency.p99 / 1e3,
            t.latency.max / 1e3
        )
    })
}

/// MLRsearch's table: per frame size and goal the relevant lower and upper
/// bound, the conditional throughput, the trials at each bound and how
/// the goal was decided; then per frame size the search's trials, its
/// troubled ones and the generator's ceiling, and every goal's note
/// ("not measured: …" where nothing was).
pub fn mlr_table(rows: &[(String, SearchResult)]) -> String {
    let mut s = String::from(
        "frame size  kind  goal                lower (pps)   upper (pps)   conditional (pps)  trials lower/upper  decided         losses above it in  latency p50 / p99 / max (µs)\n",
    );
    let pps = |x: Option<f64>| x.map_or("not measured".to_owned(), |x| format!("{x:.0}"));
    let mut notes = String::new();
    let mut last_size: Option<&str> = None;
    for (size, r) in rows {
        let u = unit(size);
        let Some(g) = &r.goal else { continue };
        s.push_str(&format!(
            "{:>10}  {:4}  {:18}  {:>12}  {:>12}  {:>17}  {:>8} / {:<7}  {:14}  {:18}  {}\n",
            size,
            r.kind,
            g.goal.code(),
            pps(g.lower_pps),
            g.upper_pps.map_or("-".to_owned(), |x| format!("{x:.0}")),
            pps(g.conditional_pps),
            g.lower_trials,
            g.upper_trials,
            g.decided.name(),
            if r.fail_loss_where.is_empty() {
                "-"
            } else {
                &r.fail_loss_where
            },
            latency_cell(r)
        ));
        if last_size != Some(size.as_str()) {
            last_size = Some(size);
            let h = &r.host;
            notes.push_str(&format!(
                "{size}{u}: MLRsearch, {} trials ({} not counted: the tester's or the host's trouble{}) in {:.1} s; the generator kept {} on schedule\n",
                r.trials,
                r.troubled,
                if h.spoiled > 0 {
                    format!(
                        "; the host spoiled {}, re-run after {} back-offs of {:.1} s",
                        h.spoiled, h.backoffs, h.waited_s
                    )
                } else {
                    String::new()
                },
                r.search_s,
                if r.tester_ceiling_pps.is_finite() {
                    format!("up to {:.0} pps", r.tester_ceiling_pps)
                } else {
                    "no rate".to_owned()
                }
            ));
        }
        if !g.note.is_empty() {
            notes.push_str(&format!("{size}{u} {}: {}\n", g.goal.code(), g.note));
        }
        notes.push_str(&device_line(&format!("{size}{u} {}", g.goal.code()), r));
    }
    s.push_str(&goal_legend(rows));
    s.push_str(&notes);
    s.push_str(&repeats_summary(rows));
    s
}

/// What each goal code in `rows` means, once per code: the codes
/// (`1f4d0l50e1w`, RFC 9475's dense form) meant nothing to a reader
/// without a legend.
fn goal_legend(rows: &[(String, SearchResult)]) -> String {
    let mut seen: Vec<String> = Vec::new();
    let mut s = String::new();
    for g in rows.iter().filter_map(|(_, r)| r.goal.as_ref()) {
        let code = g.goal.code();
        if seen.contains(&code) {
            continue;
        }
        if seen.is_empty() {
            s.push_str("goal codes (MLRsearch, RFC 9475): Nf final trial N s, Nd trials at a bound summing to N s, Nl loss ratio N%, Ne exceed ratio N%, Nw width N%\n");
        }
        s.push_str(&format!("  {code}: {}\n", g.goal.spelt_out()));
        seen.push(code);
    }
    s
}

/// Per frame size and goal searched more than once: the lower bound's and
/// the conditional throughput's median with its 95% interval and CV over
/// the searches that measured one.
fn repeats_summary(rows: &[(String, SearchResult)]) -> String {
    let mut keys: Vec<(&str, String)> = Vec::new();
    for (size, r) in rows {
        let k = (
            size.as_str(),
            r.goal.as_ref().map_or(String::new(), |g| g.goal.code()),
        );
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut s = String::new();
    for (size, code) in keys {
        let u = unit(size);
        let of: Vec<&GoalResult> = rows
            .iter()
            .filter(|(z, _)| z == size)
            .filter_map(|(_, r)| r.goal.as_ref())
            .filter(|g| g.goal.code() == code)
            .collect();
        if of.len() < 2 {
            continue;
        }
        let line = |name: &str, x: Vec<f64>| {
            if x.is_empty() {
                return format!("{name} not measured");
            }
            let e = Estimate::from_samples(&x);
            // One sample has no interval and no spread: "-", never NaN
            // or a zero-width interval.
            let (lo, hi) = if e.n >= 2 {
                (e.lo, e.hi)
            } else {
                (f64::NAN, f64::NAN)
            };
            let cv = cv_pct(&x);
            format!(
                "{name} {} pps [{}, {}], CV {}",
                or_dash(e.median, 0),
                or_dash(lo, 0),
                or_dash(hi, 0),
                if cv.is_finite() {
                    format!("{cv:.1}%")
                } else {
                    "-".to_owned()
                }
            )
        };
        let lower = of.iter().filter_map(|g| g.lower_pps).collect();
        let ct = of.iter().filter_map(|g| g.conditional_pps).collect();
        s.push_str(&format!(
            "{size}{u} {code} over {} searches (median [95% interval]): {}; {}\n",
            of.len(),
            line("lower bound", lower),
            line("conditional throughput", ct)
        ));
    }
    s
}

/// `x` with `decimals`, or "-" when it is not a number (an interval or a
/// CV that too few samples cannot give).
/// The unit after a size's label: " B" after a frame size, none after a
/// replayed capture's name ("capture NAME").
fn unit(size: &str) -> &'static str {
    if size.starts_with("capture ") {
        ""
    } else {
        " B"
    }
}

pub(super) fn or_dash(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        "-".to_owned()
    }
}

/// The back-to-back table: one line per frame size.
pub fn b2b_table(rows: &[(String, B2bResult)]) -> String {
    let mut s = String::from(
        "frame size  back-to-back frames (mean / min / max)  searches  burst rate (pps)  buffer time implied / corrected (µs)  note\n",
    );
    for (size, r) in rows {
        let min = r.lengths.iter().min().copied().unwrap_or(0);
        let max = r.lengths.iter().max().copied().unwrap_or(0);
        let note = if r.corrected_buffer_s == 0.0 {
            "the device forwards as fast as the bursts arrive (NDR >= burst rate): RFC 9004 has no buffer to measure; the lengths are where the host paused it"
        } else if r.at_max {
            "every burst up to the maximum passed: the buffer is at least this"
        } else if r.tester_limited {
            "the sink's ring dropped frames: the tester's buffer was measured"
        } else {
            ""
        };
        s.push_str(&format!(
            "{:>10}  {:>14.1} / {} / {:<12}  {:>8}  {:>16.0}  {:>16.1} / {:<17.1}  {}\n",
            size,
            r.mean_frames,
            min,
            max,
            r.lengths.len(),
            r.burst_pps,
            r.implied_buffer_s * 1e6,
            r.corrected_buffer_s * 1e6,
            note
        ));
    }
    s
}
