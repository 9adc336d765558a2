//! `commbench pipeline trial`: trials at one rate through one device, one
//! record each (and one per flow when asked), after the loopback bias
//! (the path's own latency with no device in it) that every black-box
//! command measures first, so a device's latency can be read net of the
//! tester's.
//!
//! [`Offer`] is what every black-box command offers (the device, the
//! trial's settings, the CPUs, the bias); the RFC 2544 and cross-check
//! runs take one too.

use super::account::FlowCounts;
use super::dut::DutSpec;
use super::pace::Rate;
use super::{interrupted, Bench, RoleCpus, TrialSpec};
use crate::PipelineError;
use commbench_core::record::{Record, Recorder};
use std::time::Duration;

/// What a black-box command offers: to which device, how, on which CPUs.
#[derive(Debug, Clone)]
pub struct Offer {
    pub dut: DutSpec,
    /// Every trial's settings (a search sets the rate and the sizes).
    pub trial: TrialSpec,
    pub cpus: RoleCpus,
    /// Measure the path's latency with no device first ([`loopback_bias`]).
    pub bias: bool,
}

/// Rate of the loopback bias trial at most, pps.
pub const BIAS_MAX_PPS: f64 = 100_000.0;
/// Length of the loopback bias trial.
pub const BIAS_DURATION: Duration = Duration::from_millis(500);

/// The path's latency with no device: a short trial at up to 100 kpps
/// over one veth pair, recorded as `loopback`.
pub fn loopback_bias(
    spec: &TrialSpec,
    cpus: &RoleCpus,
    rec: &mut Recorder,
) -> Result<Record, PipelineError> {
    let mut s = spec.clone();
    s.rate = Rate::Pps(spec.pps().min(BIAS_MAX_PPS));
    s.duration = BIAS_DURATION;
    rec.progress("pipeline: loopback bias (no device)");
    let mut b = Bench::new(&DutSpec::None, cpus.clone())?;
    let r = b.trial(&s)?;
    drop(b);
    Ok(r.record("loopback"))
}

/// The bias record of `offer`, when it asks for one.
pub fn offer_bias(offer: &Offer, rec: &mut Recorder) -> Result<Option<Record>, PipelineError> {
    if offer.bias {
        loopback_bias(&offer.trial, &offer.cpus, rec).map(Some)
    } else {
        Ok(None)
    }
}

/// Adds the loopback bias's p50 and p99 latency to `rec` as
/// `loopback_latency_p50_ns` and `loopback_latency_p99_ns`.
pub fn bias_metrics(rec: &mut Record, bias: &Option<Record>) {
    if let Some(b) = bias {
        for k in ["latency_p50_ns", "latency_p99_ns"] {
            if let Some(v) = b.metric_f64(k) {
                rec.push_metric(&format!("loopback_{k}"), v);
            }
        }
    }
}

/// Trials at one rate.
#[derive(Debug, Clone)]
pub struct Spec {
    pub offer: Offer,
    /// Trials (each one record).
    pub repeat: usize,
    /// Also one record per flow.
    pub per_flow: bool,
}

/// What a trial run did beyond its records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub trials: usize,
    /// Trials whose generator fell behind its schedule.
    pub behind: usize,
    /// Ctrl-C cut the run: its records are partial.
    pub interrupted: bool,
}

/// Runs the trials into `rec`: one `trial` record each (with the bias's
/// latency), `trial-flow` records when asked, and the `loopback` record
/// last.
pub fn run(s: &Spec, rec: &mut Recorder) -> Result<Report, PipelineError> {
    let conditions = commbench_core::rusage::Conditions::begin();
    let start = rec.records().len();
    let r = run_trials(s, rec);
    s.offer.cpus.stamp(&conditions, rec, start);
    r
}

fn run_trials(s: &Spec, rec: &mut Recorder) -> Result<Report, PipelineError> {
    let o = &s.offer;
    let bias = offer_bias(o, rec)?;
    let mut rep = Report::default();
    {
        let mut b = Bench::new(&o.dut, o.cpus.clone())?;
        for i in 0..s.repeat {
            if interrupted() {
                break;
            }
            rec.progress(&format!(
                "pipeline trial: {} at {:.0} pps ({}/{})",
                o.dut.name(),
                o.trial.pps(),
                i + 1,
                s.repeat
            ));
            let r = b.trial(&o.trial)?;
            rep.trials += 1;
            if r.behind_schedule {
                rep.behind += 1;
            }
            let mut x = r.record("trial");
            x.push_param("repeat", i);
            bias_metrics(&mut x, &bias);
            if let Some(n) = block_timeout_note(&o.dut) {
                x.push_metric("latency_note", n);
            }
            rec.push(x);
            if s.per_flow {
                for f in flow_records(&r.per_flow, &o.dut.name(), i) {
                    rec.push(f);
                }
            }
        }
    }
    if let Some(b) = bias {
        rec.push(b);
    }
    rep.interrupted = interrupted();
    Ok(rep)
}

/// What a device's latency holds besides the device's work: l2fwd on
/// AF_PACKET receive (the default) forwards a TPACKET_V3 block when it is
/// full or 1 ms after its first frame, so at the rates a veth carries
/// frames wait up to 1 ms for it (a p50 of ~600 µs against a loopback of
/// ~2 µs). None for devices without it.
pub fn block_timeout_note(dut: &DutSpec) -> Option<String> {
    match dut {
        DutSpec::L2fwd {
            rx: crate::netns::RxMethod::AfPacket,
            ..
        } => Some(format!(
            "latency includes up to {} ms of the device's receive block timeout (AF_PACKET TPACKET_V3: a block is handed over when full or {} ms after its first frame); l2fwd:rx=af-xdp has none",
            crate::netns::RX_BLOCK_TIMEOUT_MS,
            crate::netns::RX_BLOCK_TIMEOUT_MS
        )),
        _ => None,
    }
}

/// One `trial-flow` record per flow of trial `repeat`.
pub fn flow_records(flows: &[FlowCounts], dut: &str, repeat: usize) -> Vec<Record> {
    flows
        .iter()
        .map(|f| {
            Record::new("pipeline", "trial-flow")
                .param("dut", dut)
                .param("repeat", repeat)
                .param("flow", f.flow)
                .metric("sent", f.sent)
                .metric("received", f.received)
                .metric("lost", f.lost)
                .metric("duplicated", f.duplicated)
                .metric("reordered", f.reordered)
                .metric("reorder_max_distance", f.reorder_max_distance)
                .metric("reorder_mean_distance", f.reorder_mean_distance)
                .metric("late", f.late)
                .metric("out_of_range", f.out_of_range)
        })
        .collect()
}

/// The note a run whose generator fell behind prints (None: it kept up).
pub fn behind_note(r: &Report) -> Option<String> {
    (r.behind > 0).then(|| format!(
        "the generator fell behind its schedule in {} trial(s) (lag above --lag-bound-us): their offered rate was not offered (behind_schedule, partial)",
        r.behind
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pipeline trial --dut l2fwd --rate 50k` showed latency p50 600 µs
    /// against 1.7 µs loopback with nothing saying why: the device's
    /// TPACKET_V3 block timeout. Its records and summary now say so.
    #[test]
    fn an_af_packet_device_flags_its_block_timeout_in_the_latency() {
        let n = block_timeout_note(&DutSpec::parse("l2fwd").unwrap()).unwrap();
        assert!(n.contains("up to 1 ms"), "{n}");
        assert!(n.contains("TPACKET_V3"), "{n}");
        assert_eq!(
            block_timeout_note(&DutSpec::parse("l2fwd:rx=af-xdp").unwrap()),
            None
        );
        assert_eq!(block_timeout_note(&DutSpec::parse("bridge").unwrap()), None);
    }

    #[test]
    fn bias_metrics_copy_the_loopback_latency_under_their_own_names() {
        let bias = Record::new("pipeline", "loopback")
            .metric("latency_p50_ns", 1500.0)
            .metric("latency_p99_ns", 4000.0);
        let mut r = Record::new("pipeline", "trial");
        bias_metrics(&mut r, &Some(bias));
        assert_eq!(r.metric_f64("loopback_latency_p50_ns"), Some(1500.0));
        assert_eq!(r.metric_f64("loopback_latency_p99_ns"), Some(4000.0));
        let mut none = Record::new("pipeline", "trial");
        bias_metrics(&mut none, &None);
        assert_eq!(none.metric_f64("loopback_latency_p50_ns"), None);
    }

    #[test]
    fn the_behind_note_counts_the_trials_and_is_absent_when_none_fell_behind() {
        assert_eq!(behind_note(&Report::default()), None);
        let n = behind_note(&Report {
            trials: 3,
            behind: 2,
            interrupted: false,
        })
        .unwrap();
        assert!(n.contains("in 2 trial(s)"), "{n}");
    }

    #[test]
    fn a_flow_record_carries_its_flow_and_counts() {
        let f = FlowCounts {
            flow: 3,
            sent: 10,
            received: 9,
            lost: 1,
            duplicated: 0,
            reordered: 0,
            reorder_max_distance: 0,
            reorder_mean_distance: 0.0,
            late: 0,
            out_of_range: 0,
        };
        let v = flow_records(&[f], "l2fwd:swap", 2);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].test, "trial-flow");
        assert_eq!(v[0].metric_f64("lost"), Some(1.0));
        assert_eq!(v[0].params["flow"], serde_json::json!(3));
    }
}
