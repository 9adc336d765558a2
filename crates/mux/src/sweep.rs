//! `--rate-sweep`: the open-loop rate stepped up until the latency
//! objective breaks (tcpkali's `-r@latency`), one record per step (the
//! latency-vs-throughput curve, the "hockey stick") and one `sweep`
//! record per configuration with the highest rate that met the objective.
//!
//! A step meets the objective when its corrected latency at the asked
//! quantile is within the bound, the achieved rate is within 1% of the
//! asked one, and the generator kept its schedule (a generator-limited
//! step says nothing about the server). The sweep stops after two
//! consecutive steps where no configuration met it.

use commbench_core::{Record, Recorder};

use crate::harness::{self, ConfigResult, MuxReport};
use crate::{MuxConfig, MuxError, Result};

/// Most steps one sweep may take.
pub const MAX_STEPS: usize = 200;

/// A latency objective on the corrected latency: `p99=2ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    /// The quantile's name as given (`p99`, `p99.9`).
    pub label: String,
    pub bound_ns: f64,
}

/// A `--slo` that is not `pNN=DURATION` (the argument).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--slo {0:?}: expected pNN=DURATION, e.g. p99=2ms (p50, p90, p99, p99.9, p99.99; ns, us, ms, s)")]
pub struct SloError(pub String);

/// A `--rate-sweep` that cannot be swept: the argument and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--rate-sweep {spec:?}: {why} (give FROM:TO:STEP, e.g. 1000:20000:1000, or a list 1000,5000,10000)")]
pub struct RateSweepError {
    pub spec: String,
    pub why: SweepProblem,
}

/// What is wrong with a `--rate-sweep`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SweepProblem {
    #[error("{0:?} is not a number")]
    NotANumber(String),
    #[error("{0} is outside 0 < rate <= 1e8")]
    OutOfRange(String),
    #[error("three fields wanted")]
    Fields,
    #[error("TO is below FROM")]
    Backwards,
    #[error("{0} steps, more than {max}", max = MAX_STEPS)]
    TooManySteps(usize),
    #[error("1..={max} rates wanted", max = MAX_STEPS)]
    Count,
    #[error("rates must rise")]
    NotRising,
}

impl Slo {
    pub fn parse(s: &str) -> std::result::Result<Slo, SloError> {
        let bad = || SloError(s.to_owned());
        let (q, d) = s.split_once('=').ok_or_else(bad)?;
        let label = q.trim().to_ascii_lowercase();
        if !["p50", "p90", "p99", "p99.9", "p99.99"].contains(&label.as_str()) {
            return Err(bad());
        }
        let d = d.trim();
        let split = d
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, unit) = d.split_at(split);
        let v: f64 = num.parse().map_err(|_| bad())?;
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            _ => return Err(bad()),
        };
        let bound_ns = v * scale;
        if !(bound_ns.is_finite() && bound_ns > 0.0 && bound_ns <= 3600e9) {
            return Err(bad());
        }
        Ok(Slo { label, bound_ns })
    }

    /// The figure of a latency summary this objective looks at.
    pub fn value(&self, s: &commbench_core::stats::Summary) -> f64 {
        match self.label.as_str() {
            "p50" => s.p50,
            "p90" => s.p90,
            "p99" => s.p99,
            "p99.9" => s.p999,
            _ => s.p9999,
        }
    }
}

/// Parses `FROM:TO:STEP` (linear) or a comma list of rates.
pub fn parse_rates(s: &str) -> std::result::Result<Vec<f64>, RateSweepError> {
    let bad = |why: SweepProblem| RateSweepError {
        spec: s.to_owned(),
        why,
    };
    let num = |x: &str| -> std::result::Result<f64, RateSweepError> {
        let v: f64 = x
            .trim()
            .parse()
            .map_err(|_| bad(SweepProblem::NotANumber(x.to_owned())))?;
        if v.is_finite() && v > 0.0 && v <= crate::open::MAX_RATE {
            Ok(v)
        } else {
            Err(bad(SweepProblem::OutOfRange(x.to_owned())))
        }
    };
    let rates: Vec<f64> = if s.contains(':') {
        let p: Vec<&str> = s.split(':').collect();
        if p.len() != 3 {
            return Err(bad(SweepProblem::Fields));
        }
        let (a, b, st) = (num(p[0])?, num(p[1])?, num(p[2])?);
        if b < a {
            return Err(bad(SweepProblem::Backwards));
        }
        let n = ((b - a) / st).floor() as usize + 1;
        if n > MAX_STEPS {
            return Err(bad(SweepProblem::TooManySteps(n)));
        }
        (0..n).map(|i| a + i as f64 * st).collect()
    } else {
        s.split(',')
            .map(num)
            .collect::<std::result::Result<_, _>>()?
    };
    if rates.is_empty() || rates.len() > MAX_STEPS {
        return Err(bad(SweepProblem::Count));
    }
    if rates.windows(2).any(|w| w[1] <= w[0]) {
        return Err(bad(SweepProblem::NotRising));
    }
    Ok(rates)
}

/// One configuration's sweep.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SweepLine {
    pub engine: String,
    pub lookup: String,
    /// (asked, achieved, corrected latency at the objective's quantile ns, met).
    pub points: Vec<(f64, Option<f64>, f64, bool)>,
    pub best: Option<f64>,
}

/// Whether a step of one configuration met the objective.
pub fn meets(r: &ConfigResult, slo: &Slo) -> bool {
    let Some(o) = &r.open else { return false };
    harness::status(r) == "ok" && slo.value(&o.corrected_ns) <= slo.bound_ns
}

/// Runs the sweep; every step's records and one `sweep` record per
/// configuration go to `rec`.
pub fn run(
    cfg: &MuxConfig,
    rates: &[f64],
    slo: &Slo,
    rec: &mut Recorder,
) -> Result<(Vec<MuxReport>, Vec<SweepLine>)> {
    let mut reports = Vec::new();
    let mut lines: Vec<SweepLine> = Vec::new();
    let mut misses = 0;
    for &rate in rates {
        let mut c = cfg.clone();
        c.open.rate = Some(rate);
        rec.progress(&format!("mux: rate sweep step {rate:.0} req/s"));
        let rep = harness::run(&c, rec)?;
        let mut any = false;
        for r in &rep.results {
            let (e, l) = if cfg.server_unknown() {
                ("unknown".to_owned(), "unknown".to_owned())
            } else {
                (r.engine.as_str().to_owned(), r.lookup.as_str().to_owned())
            };
            let idx = match lines.iter().position(|x| x.engine == e && x.lookup == l) {
                Some(i) => i,
                None => {
                    lines.push(SweepLine {
                        engine: e,
                        lookup: l,
                        points: Vec::new(),
                        best: None,
                    });
                    lines.len() - 1
                }
            };
            let ok = meets(r, slo);
            any |= ok;
            let o = r.open.as_ref();
            lines[idx].points.push((
                rate,
                o.and_then(|o| o.rate_achieved),
                o.map_or(f64::NAN, |o| slo.value(&o.corrected_ns)),
                ok,
            ));
            if ok {
                // Rates rise: the last step met is the highest.
                lines[idx].best = Some(rate);
            }
        }
        reports.push(rep);
        misses = if any { 0 } else { misses + 1 };
        if misses >= 2 {
            break;
        }
    }
    if lines.is_empty() {
        return Err(MuxError::Load("the sweep measured nothing".into()));
    }
    for l in &lines {
        rec.push(
            Record::new("mux", "sweep")
                .param("engine", &l.engine)
                .param("lookup", &l.lookup)
                .param("conns", cfg.conns)
                .param("protocol", cfg.protocol.as_str())
                .param("in_flight", cfg.open.in_flight)
                .param("arrivals", cfg.open.arrivals.as_str())
                .param("slo", format!("{}<={}ns", slo.label, slo.bound_ns))
                .metric("max_rate_meeting_slo", l.best)
                .metric("sweep_points", l.points.len())
                .metric(
                    "curve",
                    l.points
                        .iter()
                        .map(|p| serde_json::json!({"rate": p.0, "achieved": p.1, "latency_ns": p.2, "met": p.3}))
                        .collect::<Vec<_>>(),
                )
                .metric(
                    "status",
                    if l.best.is_some() { "ok" } else { "slo-never-met" },
                ),
        );
    }
    Ok((reports, lines))
}

/// The words under a sweep's tables.
pub fn summary(lines: &[SweepLine], slo: &Slo) -> String {
    let mut out = String::new();
    for l in lines {
        let curve: Vec<String> = l
            .points
            .iter()
            .map(|p| {
                format!(
                    "{:.0}→{:.0} µs{}",
                    p.0,
                    p.2 / 1e3,
                    if p.3 { "" } else { " ✗" }
                )
            })
            .collect();
        out.push_str(&format!(
            "{} {}: highest rate meeting {} <= {:.0} µs: {}; curve (rate → corrected {}): {}\n",
            l.engine,
            l.lookup,
            slo.label,
            slo.bound_ns / 1e3,
            l.best
                .map(|b| format!("{b:.0} req/s"))
                .unwrap_or_else(|| "none (the first step already missed it)".into()),
            slo.label,
            curve.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objectives_and_rate_lists_parse_or_say_why_not() {
        assert_eq!(
            Slo::parse("p99=2ms").unwrap(),
            Slo {
                label: "p99".into(),
                bound_ns: 2e6
            }
        );
        assert_eq!(Slo::parse("p99.9=500us").unwrap().bound_ns, 5e5);
        for bad in ["p98=1ms", "p99", "p99=2", "p99=-1ms", "p99=2 parsecs"] {
            assert!(Slo::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_rates("1000:3000:1000").unwrap(),
            vec![1000.0, 2000.0, 3000.0]
        );
        assert_eq!(parse_rates("5,10").unwrap(), vec![5.0, 10.0]);
        for bad in ["1:2", "3000:1000:10", "1:1000000:1", "10,5", "x", "0,1"] {
            assert!(parse_rates(bad).is_err(), "{bad}");
        }
    }
}
