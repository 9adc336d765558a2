//! From pairs of trials to a verdict per metric: records matched by lab,
//! test and their place among that test's records; per metric, the paired
//! log ratios B/A judged with the signed-rank interval
//! (`core::estimate::paired`).
//!
//! Invariants: a metric is judged only on pairs in which both sides carry
//! it as a finite number; interval siblings (`<key>_lo`, `_hi`, `_n`,
//! `_samples`) and environment readings (`load_start`, `load_end`) are not
//! metrics of their own; directions and headlines come from the labs'
//! declarations (a metric no lab declares has a guessed direction and is
//! never a headline unless asked for by name).

use commbench_core::estimate::paired::{pairs_to_settle, ratio_paired_spread};
use commbench_core::estimate::{judge, RatioEstimate, Verdict};
use commbench_core::lab::{direction, find, Better, Lab, Quantity};
use commbench_core::record::Record;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Which record of a trial: its lab, its test, and its place among the
/// trial's records of that lab and test (0 for the first).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordKey {
    /// The record's lab.
    pub lab: String,
    /// The record's test.
    pub test: String,
    /// Its place among the records of that lab and test.
    pub ordinal: usize,
}

impl RecordKey {
    /// `lab/test`, with `#n` for a second or later record of the test.
    pub fn name(&self) -> String {
        if self.ordinal == 0 {
            format!("{}/{}", self.lab, self.test)
        } else {
            format!("{}/{}#{}", self.lab, self.test, self.ordinal + 1)
        }
    }
}

/// The numeric metrics of one trial, by record and metric path.
pub type Values = BTreeMap<(RecordKey, String), f64>;

const NOT_METRICS: [&str; 2] = ["load_start", "load_end"];
const SIBLINGS: [&str; 4] = ["_lo", "_hi", "_n", "_samples"];

fn flatten(prefix: &str, m: &Map<String, Value>, out: &mut Vec<(String, f64)>) {
    for (k, v) in m {
        if NOT_METRICS.contains(&k.as_str()) {
            continue;
        }
        if SIBLINGS
            .iter()
            .any(|s| k.strip_suffix(s).is_some_and(|base| m.contains_key(base)))
        {
            continue;
        }
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Number(n) => {
                if let Some(x) = n.as_f64() {
                    out.push((path, x));
                }
            }
            Value::Object(o) if prefix.is_empty() => flatten(&path, o, out),
            _ => {}
        }
    }
}

/// Each record's place, and its numeric metrics.
pub fn values_of(records: &[Record]) -> Values {
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut out = Values::new();
    for r in records {
        let n = seen.entry((r.lab.clone(), r.test.clone())).or_insert(0);
        let key = RecordKey {
            lab: r.lab.clone(),
            test: r.test.clone(),
            ordinal: *n,
        };
        *n += 1;
        let mut flat = Vec::new();
        flatten("", &r.metrics, &mut flat);
        for (m, x) in flat {
            out.insert((key.clone(), m), x);
        }
    }
    out
}

/// The records' keys in order (a trial's shape).
pub fn shape_of(records: &[Record]) -> Vec<RecordKey> {
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    records
        .iter()
        .map(|r| {
            let n = seen.entry((r.lab.clone(), r.test.clone())).or_insert(0);
            let k = RecordKey {
                lab: r.lab.clone(),
                test: r.test.clone(),
                ordinal: *n,
            };
            *n += 1;
            k
        })
        .collect()
}

/// One metric of one matched record, judged over the pairs.
#[derive(Debug, Clone)]
pub struct MetricResult {
    /// Which record.
    pub key: RecordKey,
    /// The metric path (`latency_ns.p99`).
    pub metric: String,
    /// A headline metric of its test (declared, or asked for by name).
    pub headline: bool,
    /// Which way is better.
    pub better: Better,
    /// Time/rate (faster, slower) or cost (better, worse).
    pub quantity: Quantity,
    /// The label and unit its lab declares (empty when undeclared).
    pub label: String,
    /// The unit its lab declares.
    pub unit: String,
    /// B / A with the signed-rank interval; `before_median` is A's median.
    pub ratio: RatioEstimate,
    /// The verdict against the threshold.
    pub verdict: Verdict,
    /// Pairs that would settle an inconclusive verdict.
    pub settle: Option<usize>,
    /// A's values, pair by pair.
    pub a: Vec<f64>,
    /// B's values, pair by pair.
    pub b: Vec<f64>,
}

impl MetricResult {
    /// The verdict as `compare` prints it (faster/slower for times and
    /// rates, better/worse otherwise).
    pub fn word(&self) -> &'static str {
        self.verdict.word(self.quantity == Quantity::Time)
    }

    /// A regression beyond `pct` percent: the whole interval the wrong way.
    pub fn regressed_beyond(&self, pct: f64) -> bool {
        let t = pct / 100.0;
        match self.better {
            Better::Lower => self.ratio.lo > 1.0 + t,
            // The mirror of 1 + t on the log scale, as `estimate::judge`.
            Better::Higher => self.ratio.hi < 1.0 / (1.0 + t),
            Better::Unknown => false,
        }
    }
}

/// A metric ab itself declares (an exec trial's wall time, CPU, memory,
/// and the numbers `--metric` takes from a program's output): its
/// direction, kind and unit, ahead of the labs' declarations and the
/// name guess.
#[derive(Debug, Clone)]
pub struct Decl {
    /// The metric's name.
    pub metric: String,
    /// Which way is better.
    pub better: Better,
    /// Time/rate or cost.
    pub quantity: Quantity,
    /// Its unit.
    pub unit: String,
}

/// How a run's metrics are judged: the threshold of "no change", the
/// run-to-run spread of a change's size the intervals hold
/// (`core::estimate::paired::ratio_paired_spread`), and the confidence.
#[derive(Debug, Clone, Copy)]
pub struct Judging {
    /// Relative change below which a difference is "no change".
    pub threshold: f64,
    /// The change's run-to-run standard deviation, as a share of it.
    pub spread: f64,
    /// Two-sided confidence of the intervals.
    pub confidence: f64,
}

/// Judges every metric both sides carry in every pair, with 95%
/// intervals (the verdicts a run reports).
pub fn judge_all(
    pairs: &[(Values, Values)],
    labs: &[&dyn Lab],
    decls: &[Decl],
    only: &[String],
    threshold: f64,
    spread: f64,
) -> Vec<MetricResult> {
    judge_all_at(
        pairs,
        labs,
        decls,
        only,
        Judging {
            threshold,
            spread,
            confidence: commbench_core::estimate::CONFIDENCE,
        },
    )
}

/// [`judge_all`] with intervals at `how.confidence`: an interim look,
/// which decides whether to stop early, uses a stricter level (see
/// [`crate::INTERIM_CONFIDENCE`]).
pub fn judge_all_at(
    pairs: &[(Values, Values)],
    labs: &[&dyn Lab],
    decls: &[Decl],
    only: &[String],
    how: Judging,
) -> Vec<MetricResult> {
    let Judging {
        threshold,
        spread,
        confidence,
    } = how;
    let Some((first_a, _)) = pairs.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, metric) in first_a.keys() {
        let k = (key.clone(), metric.clone());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for (pa, pb) in pairs {
            if let (Some(&x), Some(&y)) = (pa.get(&k), pb.get(&k)) {
                a.push(x);
                b.push(y);
            }
        }
        if a.is_empty() {
            continue;
        }
        let decl = decls.iter().find(|d| d.metric == *metric);
        let (better, quantity) = match decl {
            Some(d) => (d.better, d.quantity),
            None => direction(labs, &key.lab, &key.test, metric),
        };
        let spec = find(labs, &key.lab).and_then(|l| l.metric(&key.test, metric));
        let headline = if only.is_empty() {
            spec.is_some_and(|s| s.headline)
        } else {
            only.iter().any(|m| m == metric)
        };
        let ratio = ratio_paired_spread(&a, &b, confidence, spread);
        let verdict = judge(&ratio, threshold, 0.0, better);
        let settle = (verdict == Verdict::Inconclusive)
            .then(|| pairs_to_settle(&ratio, threshold))
            .flatten();
        out.push(MetricResult {
            key: key.clone(),
            metric: metric.clone(),
            headline,
            better,
            quantity,
            label: spec.map(|s| s.label.to_owned()).unwrap_or_default(),
            unit: match decl {
                Some(d) => d.unit.clone(),
                None => spec.map(|s| s.unit.to_owned()).unwrap_or_default(),
            },
            ratio,
            verdict,
            settle,
            a,
            b,
        });
    }
    // Headlines first, in record order; then the rest.
    out.sort_by(|x, y| y.headline.cmp(&x.headline).then(x.key.cmp(&y.key)));
    out
}

/// Whether a headline is still undecided (inconclusive, or without an
/// interval yet).
pub fn undecided(m: &MetricResult) -> bool {
    m.headline && matches!(m.verdict, Verdict::Inconclusive | Verdict::NoSamples)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lab: &str, test: &str, v: f64) -> Record {
        let mut r = Record::new(lab, test);
        r.push_metric("x_per_s", v);
        r.push_metric("x_per_s_lo", v * 0.9);
        r.push_metric("x_per_s_hi", v * 1.1);
        r.push_metric("load_start", 1.0);
        r.push_metric("latency_ns", serde_json::json!({"p50": v, "p99": 2.0 * v}));
        r.push_metric("name", "text");
        r
    }

    #[test]
    fn values_skip_siblings_and_environment_and_number_repeated_tests() {
        let v = values_of(&[rec("l", "t", 10.0), rec("l", "t", 20.0)]);
        let keys: Vec<String> = v.keys().map(|(k, m)| format!("{} {m}", k.name())).collect();
        assert_eq!(
            keys,
            [
                "l/t latency_ns.p50",
                "l/t latency_ns.p99",
                "l/t x_per_s",
                "l/t#2 latency_ns.p50",
                "l/t#2 latency_ns.p99",
                "l/t#2 x_per_s"
            ]
        );
    }

    #[test]
    fn judge_all_finds_a_paired_change_and_names_it_by_direction() {
        let pairs: Vec<(Values, Values)> = (0..10)
            .map(|i| {
                let level = 1.0 + (i % 3) as f64;
                (
                    values_of(&[rec("l", "t", 100.0 * level)]),
                    values_of(&[rec("l", "t", 90.0 * level * (1.0 + 0.001 * i as f64))]),
                )
            })
            .collect();
        let only = vec!["x_per_s".to_owned()];
        let r = judge_all(&pairs, &[], &[], &only, 0.02, 0.0);
        let m = r.iter().find(|m| m.metric == "x_per_s").unwrap();
        assert!(m.headline);
        assert_eq!(m.word(), "slower");
        assert!(m.regressed_beyond(5.0));
        assert!(!m.regressed_beyond(15.0));
        let p99 = r.iter().find(|m| m.metric == "latency_ns.p99").unwrap();
        assert!(!p99.headline);
        // Latency went down by ~10%: faster.
        assert_eq!(p99.word(), "faster");
    }

    #[test]
    fn an_aa_run_with_a_bimodal_trial_stopped_on_noise_at_a_95_percent_look() {
        // The proof's false alarm (pcap A/A, 12 pairs): four of B's trials
        // in a slow mode, none of A's. A 95% look called it slower; an
        // interim look at 99% does not stop on it.
        let a = [
            3786.0, 3483.0, 3906.0, 3972.0, 4021.0, 3994.0, 3720.0, 3571.0, 3823.0, 3787.0, 3826.0,
            3889.0,
        ];
        let b = [
            3670.0, 2762.0, 3926.0, 3925.0, 3948.0, 3883.0, 2725.0, 2780.0, 3737.0, 3756.0, 3655.0,
            2873.0,
        ];
        let pairs: Vec<(Values, Values)> = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| {
                (
                    values_of(&[rec("l", "t", x)]),
                    values_of(&[rec("l", "t", y)]),
                )
            })
            .collect();
        let only = vec!["x_per_s".to_owned()];
        let at = |c: f64| {
            let how = Judging {
                threshold: 0.015,
                spread: 0.0,
                confidence: c,
            };
            let r = judge_all_at(&pairs, &[], &[], &only, how);
            r.into_iter().find(|m| m.metric == "x_per_s").unwrap()
        };
        assert_eq!(at(0.95).word(), "slower");
        assert_eq!(at(crate::INTERIM_CONFIDENCE).word(), "inconclusive");
    }
}
