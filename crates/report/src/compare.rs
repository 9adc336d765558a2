//! Comparing two runs: records are matched by (lab, test, params) and each
//! metric both carry gets a ratio, a change and a verdict; plus which metric
//! heads a group of records. Invariants: a change below the threshold is
//! "no change"; which way is better comes from the labs' declared metrics,
//! guessed only for metrics no lab declares; records without a partner in
//! the other run are skipped, not reported.

use commbench_core::lab::{direction, Better, Lab, Quantity};
use commbench_core::record::Record;
use serde::Serialize;

/// One metric of one matched record pair.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub lab: String,
    pub test: String,
    pub params: String,
    pub metric: String,
    pub before: f64,
    pub after: f64,
    /// after / before.
    pub ratio: f64,
    pub change_pct: f64,
    pub better: Better,
    /// `faster`/`slower` (or `better`/`worse` for non-time metrics),
    /// `no change` within the threshold, `changed` when direction is unknown.
    pub verdict: String,
}

fn flat_metrics(r: &Record) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for (k, v) in &r.metrics {
        let mut flat = Vec::new();
        commbench_core::record::flatten(k, v, &mut flat);
        for (k, v) in flat {
            if let Some(x) = v.as_f64() {
                if x.is_finite() {
                    out.push((k, x));
                }
            }
        }
    }
    out
}

/// The parameters as `k=v` pairs: what records are matched by.
pub fn params_key(r: &Record) -> String {
    r.params
        .iter()
        .map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"')))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Compares matching records of two runs. `threshold` is the relative change
/// below which a difference is noise (0.05 = 5%); `only` restricts metrics.
/// Which way is better comes from the labs' declared metrics (`labs`),
/// falling back to [`commbench_core::lab::guess_better`] for metrics no lab
/// declares.
pub fn compare(
    a: &[Record],
    b: &[Record],
    threshold: f64,
    only: &[String],
    labs: &[&dyn Lab],
) -> Vec<Change> {
    let mut out = Vec::new();
    for ra in a {
        let key = params_key(ra);
        let Some(rb) = b
            .iter()
            .find(|rb| rb.lab == ra.lab && rb.test == ra.test && params_key(rb) == key)
        else {
            continue;
        };
        let mb = flat_metrics(rb);
        for (m, before) in flat_metrics(ra) {
            if !only.is_empty() && !only.iter().any(|o| o == &m) {
                continue;
            }
            let Some(&(_, after)) = mb.iter().find(|(k, _)| k == &m) else {
                continue;
            };
            let ratio = if before != 0.0 {
                after / before
            } else {
                f64::NAN
            };
            let change = ratio - 1.0;
            let (dir, quantity) = direction(labs, &ra.lab, &ra.test, &m);
            let timeish = quantity == Quantity::Time;
            let verdict = if before == after {
                "no change"
            } else if !ratio.is_finite() {
                "changed"
            } else if change.abs() < threshold {
                "no change"
            } else {
                let improved = match dir {
                    Better::Higher => Some(change > 0.0),
                    Better::Lower => Some(change < 0.0),
                    Better::Unknown => None,
                };
                match (improved, timeish) {
                    (Some(true), true) => "faster",
                    (Some(false), true) => "slower",
                    (Some(true), false) => "better",
                    (Some(false), false) => "worse",
                    (None, _) => "changed",
                }
            };
            out.push(Change {
                lab: ra.lab.clone(),
                test: ra.test.clone(),
                params: key.clone(),
                metric: m,
                before,
                after,
                ratio,
                change_pct: change * 100.0,
                better: dir,
                verdict: verdict.to_owned(),
            });
        }
    }
    out
}

/// The headline metric of a group of records: the first headline metric
/// their lab declares for their test that the records carry; for records
/// no lab declares, the first rate or time they carry, else the first
/// number.
pub fn headline_metric(records: &[Record], labs: &[&dyn Lab]) -> Option<String> {
    const PREFERRED: [&str; 16] = [
        "msgs_per_s",
        "responses_per_s",
        "mpps",
        "pps",
        "gb_per_s",
        "mb_per_s",
        "packets_per_s",
        "flows_per_s",
        "rate",
        "median_ns",
        "p50_ns",
        "latency_ns.p50",
        "ns_median",
        "elapsed_s",
        "wall_s",
        "ns_per_packet",
    ];
    let first = records.first()?;
    let flat = flat_metrics(first);
    if let Some(lab) = commbench_core::lab::find(labs, &first.lab) {
        for h in lab.headlines(&first.test) {
            if flat.iter().any(|(k, _)| k == h.key) {
                return Some(h.key.to_owned());
            }
        }
    }
    for p in PREFERRED {
        if flat.iter().any(|(k, _)| k == p) {
            return Some(p.to_owned());
        }
    }
    flat.first().map(|(k, _)| k.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::rec;

    #[test]
    fn verdicts_respect_threshold() {
        let a = vec![rec("reqres", 1, 1000.0), rec("reqres", 2, 1000.0)];
        let b = vec![rec("reqres", 1, 1030.0), rec("reqres", 2, 2000.0)];
        let c = compare(&a, &b, 0.05, &["msgs_per_s".into()], &[]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].verdict, "no change");
        assert_eq!(c[1].verdict, "faster");
        assert!((c[1].ratio - 2.0).abs() < 1e-12);
        let slower = compare(&b, &a, 0.05, &["msgs_per_s".into()], &[]);
        assert_eq!(slower[1].verdict, "slower");
        let lat = compare(&a, &a, 0.05, &["latency_ns.p99".into()], &[]);
        assert_eq!(lat[0].verdict, "no change");
    }

    #[test]
    fn unmatched_records_are_skipped() {
        let a = vec![rec("reqres", 1, 1000.0)];
        let b = vec![rec("stream", 1, 1000.0)];
        assert!(compare(&a, &b, 0.05, &[], &[]).is_empty());
    }
}
