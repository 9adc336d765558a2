//! The black-box tester: a paced generator offers stamped frames to a
//! device under test at a set rate; a sink counts exactly what comes back
//! (per flow: received, lost, duplicated, reordered with distance, late)
//! and the one-way latency of every frame; a trial is one offer at one
//! rate. RFC 2544 searches ([`rfc2544`]) and the white-box cross-check
//! are trials in a row on one set-up topology ([`Bench`]).
//!
//! Roles: the generator and the sink are threads of this process, each in
//! its own network namespace (setns), the device in a third, joined by
//! veth pairs (`netns::Topology`). Clocks: the generator paces on the TSC
//! (absolute schedule, see [`pace`]) and stamps each burst with
//! `CLOCK_REALTIME` just before handing it to the kernel; the sink takes
//! the kernel's receive timestamp (AF_PACKET; AF_XDP: the time of its
//! read), so one-way latency is one host clock minus itself.

//!
//! Parts: the spec of a trial and the roles' CPUs (here), the bench that
//! sets up the topology and runs a trial ([`Bench`], `bench.rs`), the
//! generator (`generator.rs`), the sink (`sink.rs`), a trial's outcome
//! ([`TrialResult`], `result.rs`) and the suite's step (`suite.rs`).

pub mod account;
mod bench;
pub mod crosscheck;
pub mod dut;
pub mod error;
mod generator;
pub mod identity;
pub mod mlrsearch;
pub mod pace;
pub mod replay;
#[cfg(test)]
mod replay_tests;
pub mod result;
pub mod rfc2544;
mod sink;
pub mod stamp;
mod suite;
pub mod trial;

pub use bench::{kernel_ticks_per_frame, Bench, NO_STALL_MONITOR_ENV, STALL_STEP};
pub use error::SpecError;
pub use generator::{GenOut, CATCH_UP, GEN_PRIORITY};
pub use result::TrialResult;
pub use sink::{count_arrivals, ArrivalCount};
pub use suite::{suite_blackbox, SUITE_DUT, SUITE_GOAL};

use crate::netns::{interrupted, RxMethod, TxMethod};
use commbench_core::placement::CpuList;
use pace::{Arrivals, GenPriority, Rate, Sizes};
use replay::Traffic;
use std::sync::Arc;
use std::time::Duration;

/// Version byte of the probe frames that check the path before a trial.
pub const PROBE_VERSION: u8 = 0xC2;
/// Most flows per trial (the flow id's high byte numbers the trial, so a
/// straggler of an earlier trial is never counted in a later one).
pub const MAX_FLOWS: u16 = 256;
/// Most frames per trial (the sink keeps a bit per frame: 32 MiB).
pub const MAX_FRAMES: u64 = 256_000_000;
/// Most bytes of the synthetic frames' templates (one per flow and
/// distinct size).
pub const MAX_TEMPLATE_BYTES: u64 = 64 << 20;
/// How long the generator probes the path before giving up.
pub const PROBE_PATIENCE: Duration = Duration::from_secs(5);

/// One trial: what to offer.
#[derive(Debug, Clone)]
pub struct TrialSpec {
    pub rate: Rate,
    pub arrivals: Arrivals,
    pub sizes: Sizes,
    /// Frames per burst (sent together at the burst's departure time).
    pub burst: u32,
    pub flows: u16,
    /// Offer for this long (frames = rate × duration).
    pub duration: Duration,
    /// Received frames with a one-way latency above this count as late.
    pub late_ns: u64,
    /// A generator whose schedule lag (p99 or at the end) exceeds this is
    /// behind schedule: the trial did not offer its rate.
    pub lag_bound_ns: u64,
    /// The sink keeps counting this long after the last departure.
    pub drain: Duration,
    pub tx: TxMethod,
    pub rx: RxMethod,
    /// Busy-wait at most this long before each departure (the learned
    /// guard's ceiling: see [`pace::SPIN_NS`]).
    pub spin_ns: u64,
    /// How the generator's thread is scheduled while it paces.
    pub gen_priority: GenPriority,
    pub seed: u64,
    /// Frames in the trial instead of rate × duration (the back-to-back
    /// test's burst length).
    pub count: Option<u64>,
    /// Send back to back, as fast as the transmit path takes the frames,
    /// with no schedule (RFC 2544 §26.4): the offered rate is then what
    /// the path achieved, and there is no schedule to fall behind.
    pub unpaced: bool,
    /// A capture's frames offered instead of synthetic ones (set with
    /// [`TrialSpec::with_traffic`]).
    pub traffic: Option<Arc<Traffic>>,
}

impl Default for TrialSpec {
    fn default() -> Self {
        TrialSpec {
            rate: Rate::Pps(100_000.0),
            arrivals: Arrivals::Cbr,
            sizes: Sizes::fixed(64),
            burst: 1,
            flows: 1,
            duration: Duration::from_secs(1),
            late_ns: 10_000_000,
            lag_bound_ns: 100_000,
            drain: Duration::from_millis(300),
            tx: TxMethod::Sendmmsg,
            rx: RxMethod::AfPacket,
            spin_ns: pace::SPIN_NS,
            gen_priority: GenPriority::Auto,
            seed: 1,
            count: None,
            unpaced: false,
            traffic: None,
        }
    }
}

impl TrialSpec {
    pub fn pps(&self) -> f64 {
        self.rate.pps(self.sizes.mean())
    }
    pub fn frames(&self) -> u64 {
        self.count
            .unwrap_or_else(|| (self.pps() * self.duration.as_secs_f64()).round().max(1.0) as u64)
    }
    /// Offers the frames of `t` (its streams as the flows, its mean frame
    /// size for a rate given as a share of the link).
    pub fn with_traffic(mut self, t: Arc<Traffic>) -> TrialSpec {
        self.flows = t.streams;
        self.sizes = Sizes {
            name: format!("capture {}", t.name()),
            pattern: vec![t.mix.size_mean.round().clamp(64.0, 1518.0) as u32],
        };
        self.traffic = Some(t);
        self
    }

    /// Checks the settings and says what to change.
    pub fn validate(&self) -> Result<(), SpecError> {
        if let Some(t) = &self.traffic {
            if self.tx == TxMethod::AfXdp || self.rx == RxMethod::AfXdp {
                return Err(SpecError::TrafficXdp);
            }
            if self.flows != t.streams {
                return Err(SpecError::TrafficFlows(t.streams));
            }
        }
        if !(1..=1024).contains(&self.burst) {
            return Err(SpecError::Burst(self.burst));
        }
        if !(1..=MAX_FLOWS).contains(&self.flows) {
            return Err(SpecError::Flows(self.flows));
        }
        let f = self.frames();
        if f == 0 {
            return Err(SpecError::NoFrames);
        }
        if f > MAX_FRAMES {
            return Err(SpecError::TooManyFrames(f));
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(3600) {
            return Err(SpecError::Duration);
        }
        if self.traffic.is_none() {
            // The generator holds a template per (flow, size): a capture's
            // sizes (`--sizes-from`) have up to ~1,450 distinct ones.
            let bytes = u64::from(self.flows)
                * self
                    .sizes
                    .distinct()
                    .iter()
                    .map(|&s| u64::from(s))
                    .sum::<u64>();
            if bytes > MAX_TEMPLATE_BYTES {
                return Err(SpecError::Templates {
                    flows: self.flows,
                    sizes: self.sizes.distinct().len(),
                    mib: bytes >> 20,
                });
            }
        }
        if self.tx == TxMethod::AfXdp && self.sizes.pattern.iter().any(|&s| s > 1518) {
            return Err(SpecError::XdpFrameSize);
        }
        Ok(())
    }
}

/// CPUs for the roles: generator, sink, device (each optional).
#[derive(Debug, Clone, Default)]
pub struct RoleCpus {
    pub gen: Option<usize>,
    pub sink: Option<usize>,
    pub dut: Option<usize>,
}

impl RoleCpus {
    /// `GEN,SINK,DUT` (any may be empty: `0,,1`).
    pub fn parse(s: &str) -> Result<RoleCpus, SpecError> {
        let p: Vec<&str> = s.split(',').collect();
        if p.len() > 3 {
            return Err(SpecError::CpusTooMany(s.to_owned()));
        }
        let online = commbench_core::placement::online();
        let one = |x: Option<&&str>| -> Result<Option<usize>, SpecError> {
            match x.map(|x| x.trim()).filter(|x| !x.is_empty()) {
                None => Ok(None),
                Some(x) => {
                    let c: usize = x.parse().map_err(|_| SpecError::CpuNotANumber {
                        cpus: s.to_owned(),
                        cpu: x.to_owned(),
                    })?;
                    if !online.cpus().contains(&c) {
                        return Err(SpecError::CpuOffline {
                            cpus: s.to_owned(),
                            cpu: c,
                            online: online.cpus().to_vec(),
                        });
                    }
                    Ok(Some(c))
                }
            }
        };
        Ok(RoleCpus {
            gen: one(p.first())?,
            sink: one(p.get(1))?,
            dut: one(p.get(2))?,
        })
    }
    /// The placement when none is given, from the CPUs this process may
    /// run on: the generator alone on the first, the sink and the device
    /// on the others (one each from three CPUs up); with one CPU, none.
    /// Sharing a CPU with the forwarder or the sink is where the
    /// generator's schedule lag came from on two vCPUs (lag p99 0.3-11 ms
    /// unpinned against 25-30 µs alone, docs/pipeline.md).
    pub fn for_host() -> RoleCpus {
        Self::for_cpus(commbench_core::placement::current_affinity().cpus())
    }

    /// [`Self::for_host`] over the CPUs `cpus`.
    pub fn for_cpus(cpus: &[usize]) -> RoleCpus {
        match cpus {
            [] | [_] => RoleCpus::default(),
            [g, o] => RoleCpus {
                gen: Some(*g),
                sink: Some(*o),
                dut: Some(*o),
            },
            [g, s, d, ..] => RoleCpus {
                gen: Some(*g),
                sink: Some(*s),
                dut: Some(*d),
            },
        }
    }

    /// Whether the generator is pinned to a CPU no other role is placed on.
    pub fn gen_alone(&self) -> bool {
        self.gen
            .is_some_and(|g| self.sink != Some(g) && self.dut != Some(g))
    }

    /// The placement every record of the tester carries (the Lab
    /// contract): `generator cpu 0, sink cpu 1, device cpu 1`.
    pub fn placement(&self) -> String {
        let one = |c: Option<usize>| c.map(|c| CpuList::from_cpus(vec![c]));
        let (g, k, d) = (one(self.gen), one(self.sink), one(self.dut));
        commbench_core::placement::describe(
            &[
                ("generator", g.as_ref()),
                ("sink", k.as_ref()),
                ("device", d.as_ref()),
            ],
            &[],
        )
    }

    /// Writes the Lab contract's conditions into the records `rec` kept
    /// from `start` on: the load over the run, whether the host was
    /// oversubscribed, and the roles' placement.
    pub fn stamp(
        &self,
        conditions: &commbench_core::rusage::Conditions,
        rec: &mut commbench_core::Recorder,
        start: usize,
    ) {
        let placement = self.placement();
        for r in rec.records_since_mut(start) {
            conditions.stamp(r, 0, Some(&placement));
        }
    }

    pub fn describe(&self) -> String {
        let f = |c: Option<usize>| c.map_or("-".to_owned(), |c| c.to_string());
        format!(
            "gen {} sink {} dut {}",
            f(self.gen),
            f(self.sink),
            f(self.dut)
        )
    }
}

fn pin(cpu: Option<usize>) {
    if let Some(c) = cpu {
        let _ = CpuList::from_cpus(vec![c]).pin_current_thread();
    }
}

#[cfg(test)]
mod tests;
