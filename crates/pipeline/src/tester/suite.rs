//! The suite's black-box step: one trial (quick) or MLRsearch's NDR
//! through commbench's forwarder.

use super::dut::DutSpec;
use super::pace::Rate;
use super::{mlrsearch, rfc2544, Bench, RoleCpus, TrialSpec};
use std::io;
use std::time::Duration;

/// The device of the suite's black-box step: commbench's forwarder with
/// 2 µs of work per frame (at most ~0.5 Mpps on a 2.0 GHz-class core),
/// slow enough that the device, not the tester, is the limit on most hosts.
pub const SUITE_DUT: &str = "l2fwd:delay:2000";

/// The suite's black-box step (root): quick, one 0.2 s trial at 50 kpps
/// through the forwarder (exact counts and latency of every frame);
/// default, MLRsearch's NDR on it ([`SUITE_GOAL`]).
pub fn suite_blackbox(quick: bool, rec: &mut commbench_core::Recorder) -> io::Result<()> {
    let conditions = commbench_core::rusage::Conditions::begin();
    let start = rec.records().len();
    let cpus = RoleCpus::for_host();
    let r = suite_blackbox_records(quick, &cpus, rec);
    cpus.stamp(&conditions, rec, start);
    r
}

fn suite_blackbox_records(
    quick: bool,
    cpus: &RoleCpus,
    rec: &mut commbench_core::Recorder,
) -> io::Result<()> {
    let dut = DutSpec::parse(SUITE_DUT).map_err(io::Error::other)?;
    let mut b = Bench::new(&dut, cpus.clone())?;
    let trial = TrialSpec {
        rate: Rate::Pps(50_000.0),
        duration: Duration::from_millis(200),
        drain: Duration::from_millis(200),
        ..TrialSpec::default()
    };
    if quick {
        rec.progress("pipeline black-box: one trial through l2fwd");
        let r = b.trial(&trial)?;
        rec.push(r.record("trial"));
        return Ok(());
    }
    let s = rfc2544::SearchSpec {
        trial,
        max_pps: 1e6,
        resolution_pct: 2.0,
        pdr_loss_pct: None,
        max_trials: rfc2544::MLR_MAX_TRIALS,
        ladder_steps: 0,
    };
    let (_, r) = rfc2544::mlr_search(
        &mut b,
        &s.trial,
        &[SUITE_GOAL],
        s.max_pps,
        20.0,
        s.max_trials,
        |t, w| {
            rec.progress(&format!(
                "pipeline black-box NDR (MLRsearch): {:.0} pps → loss {:.4}%{}",
                t.offered_pps,
                t.loss_pct,
                w.map_or(String::new(), |w| format!(" (not counted: {w})"))
            ))
        },
    )?;
    for r in &r {
        rec.push(rfc2544::search_record(r, &s, &dut.name(), "64"));
    }
    Ok(())
}

/// The suite's MLRsearch goal: zero loss with exceed ratio 0.5 (a host
/// pause in one trial of two does not decide), 0.2 s final trials, 0.8 s
/// sum, 2% width: about as many seconds of trials as RFC 2544's search
/// with 0.2 s trials took.
pub const SUITE_GOAL: mlrsearch::Goal = mlrsearch::Goal {
    loss_ratio: 0.0,
    exceed_ratio: 0.5,
    final_s: 0.2,
    sum_s: 0.8,
    width: 0.02,
    initial_s: 0.05,
};
