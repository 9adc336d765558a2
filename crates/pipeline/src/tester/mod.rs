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

pub mod account;
pub mod crosscheck;
pub mod dut;
pub mod error;
pub mod mlrsearch;
pub mod pace;
pub mod rfc2544;
pub mod stamp;
pub mod trial;

use crate::netns::{self, interrupted, realtime_ns, RxMethod, RxPath, TxMethod};
use crate::txpath::{self, TxPath};
use crate::wire::{FlowRepr, FCS, PROTO_UDP};
use account::{FlowCounts, SinkAccount};
use commbench_core::clock::{rdtsc, tsc};
use commbench_core::delay::{spin_until, GuardBounds, WakeGuard};
use commbench_core::placement::CpuList;
use commbench_core::record::Record;
use commbench_core::rusage::Usage;
use commbench_core::sched::CpuTimes;
use commbench_core::stall::{StallMonitor, StallWindow};
use commbench_core::stats::{LatencyHistogram, Summary};
use dut::{DutSpec, FwdCounters, FwdSnapshot, FwdSpec};
pub use error::SpecError;
use pace::{Arrivals, GenPriority, Rate, RtSpans, Schedule, Sizes};
use serde::Serialize;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Version byte of the probe frames that check the path before a trial.
pub const PROBE_VERSION: u8 = 0xC2;
/// Most flows per trial (the flow id's high byte numbers the trial, so a
/// straggler of an earlier trial is never counted in a later one).
pub const MAX_FLOWS: u16 = 256;
/// Most frames per trial (the sink keeps a bit per frame: 32 MiB).
pub const MAX_FRAMES: u64 = 256_000_000;
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
    /// Checks the settings and says what to change.
    pub fn validate(&self) -> Result<(), SpecError> {
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

enum RunningDut {
    Nothing,
    L2fwd {
        stop: Arc<AtomicBool>,
        counters: Arc<FwdCounters>,
        thread: Option<std::thread::JoinHandle<io::Result<()>>>,
        work: dut::FwdWork,
        /// The forwarder thread's id (0 until it has started), for its
        /// own CPU time.
        tid: Arc<AtomicU64>,
    },
    Cmd(std::process::Child),
}

/// A topology set up for trials: namespaces, veths and a running device;
/// everything is removed on drop (stop the device, delete the namespaces).
pub struct Bench {
    pub dut: DutSpec,
    topo: Option<netns::Topology>,
    gen_ns: Option<String>,
    sink_ns: Option<String>,
    pub gen_if: String,
    pub sink_if: String,
    running: RunningDut,
    trial_no: u16,
    pub cpus: RoleCpus,
    /// The host's scheduling delay and steal, a window per trial: a trial
    /// the host stalled is the host's, not the device's (None: switched
    /// off with [`NO_STALL_MONITOR_ENV`]).
    stalls: Option<StallMonitor>,
    /// The CPU the device's (or, with no device, the sink's) receive
    /// processing was steered to, away from the generator's CPU
    /// ([`netns::steer_receive`]); None when it was not.
    pub rx_steer: Option<usize>,
}

impl Bench {
    /// Creates what `dut` needs and starts it.
    #[allow(unsafe_code)]
    pub fn new(dut: &DutSpec, cpus: RoleCpus) -> io::Result<Bench> {
        if !netns::is_root() && !matches!(dut, DutSpec::Ifaces(..)) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the tester creates network namespaces and veth links: run it as root",
            ));
        }
        let mut b = Bench {
            dut: dut.clone(),
            topo: None,
            gen_ns: None,
            sink_ns: None,
            gen_if: String::new(),
            sink_if: String::new(),
            running: RunningDut::Nothing,
            trial_no: 0,
            cpus,
            stalls: stall_monitor(),
            rx_steer: None,
        };
        match dut {
            DutSpec::Ifaces(a, c) => {
                b.gen_if = a.clone();
                b.sink_if = c.clone();
                crate::afpacket::ifindex(a).map_err(|e| b.at_iface("generator", a, e))?;
                crate::afpacket::ifindex(c).map_err(|e| b.at_iface("sink", c, e))?;
                return Ok(b);
            }
            DutSpec::None => {
                let lab = netns::Topology::setup_pair()?;
                b.set_ends(&lab);
                b.steer_away_from_generator(&lab.sink_ns, &lab.sink_if, b.cpus.sink);
                b.topo = Some(lab);
                return Ok(b);
            }
            _ => {}
        }
        let lab = netns::Topology::setup()?;
        b.set_ends(&lab);
        b.steer_away_from_generator(&lab.fwd_ns, &lab.fwd_in, b.cpus.dut);
        let (fwd_ns, fwd_in, fwd_out) =
            (lab.fwd_ns.clone(), lab.fwd_in.clone(), lab.fwd_out.clone());
        b.topo = Some(lab);
        match dut {
            DutSpec::Bridge => {
                let br = "cbbr0";
                netns::ip_cmd(&[
                    "-n",
                    &fwd_ns,
                    "link",
                    "add",
                    br,
                    "type",
                    "bridge",
                    "stp_state",
                    "0",
                    "forward_delay",
                    "0",
                ])?;
                for i in [&fwd_in, &fwd_out] {
                    netns::ip_cmd(&["-n", &fwd_ns, "link", "set", i, "master", br])?;
                }
                netns::ip_cmd(&["-n", &fwd_ns, "link", "set", br, "up"])?;
            }
            DutSpec::L2fwd {
                work,
                rx,
                burst,
                impair,
                rx_blocks,
            } => {
                let spec = FwdSpec {
                    in_if: fwd_in,
                    out_if: fwd_out,
                    rx: *rx,
                    burst: *burst,
                    work: *work,
                    impair: *impair,
                    rx_blocks: *rx_blocks,
                };
                let stop = Arc::new(AtomicBool::new(false));
                let counters = Arc::new(FwdCounters::default());
                let ready = Arc::new(AtomicBool::new(false));
                let (s2, c2, r2, cpu) = (stop.clone(), counters.clone(), ready.clone(), b.cpus.dut);
                let tid = Arc::new(AtomicU64::new(0));
                let t2 = tid.clone();
                let thread =
                    std::thread::Builder::new()
                        .name("cb-l2fwd".into())
                        .spawn(move || {
                            t2.store(
                                commbench_core::sched::current_tid().map_or(0, u64::from),
                                Ordering::Release,
                            );
                            netns::enter(&fwd_ns)?;
                            pin(cpu);
                            let far = Instant::now() + Duration::from_secs(365 * 86_400);
                            let r = dut::l2fwd(&spec, &c2, &s2, &r2, None, far);
                            r2.store(true, Ordering::Release);
                            r.map(|_| ())
                        })?;
                let end = Instant::now() + Duration::from_secs(10);
                while !ready.load(Ordering::Acquire) && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(2));
                }
                b.running = RunningDut::L2fwd {
                    stop,
                    counters,
                    thread: Some(thread),
                    work: *work,
                    tid,
                };
                if thread_finished(&b.running) {
                    b.check_dut()?;
                }
            }
            DutSpec::Cmd(c) => {
                use std::os::unix::process::CommandExt;
                let path = format!("/run/netns/{fwd_ns}");
                let nsf = std::fs::File::open(&path)
                    .map_err(|e| io::Error::new(e.kind(), format!("cannot open {path}: {e}")))?;
                let mut cmd = std::process::Command::new("sh");
                cmd.arg("-c")
                    .arg(c)
                    .env("CB_IN_IF", &fwd_in)
                    .env("CB_OUT_IF", &fwd_out)
                    .env("CB_NETNS", &fwd_ns)
                    .stdin(std::process::Stdio::null());
                use std::os::fd::AsRawFd;
                let fd = nsf.as_raw_fd();
                // SAFETY: pre_exec runs in the child between fork and exec
                // and only makes async-signal-safe system calls.
                unsafe {
                    cmd.pre_exec(move || {
                        if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                            return Err(io::Error::last_os_error());
                        }
                        libc::setpgid(0, 0);
                        // Dies with us, even after SIGKILL.
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        Ok(())
                    });
                }
                let child = cmd.spawn().map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("--dut cmd: cannot start sh -c '{c}': {e}"),
                    )
                })?;
                if let Some(cpu) = b.cpus.dut {
                    let _ = CpuList::from_cpus(vec![cpu]).pin_pid(child.id() as i32);
                }
                b.running = RunningDut::Cmd(child);
            }
            DutSpec::None | DutSpec::Ifaces(..) => {}
        }
        Ok(b)
    }

    /// Steers the receive processing of the interface the generator sends
    /// to (`iface` in `ns`) onto `cpu`, when the generator has a CPU of
    /// its own and `cpu` is another: the receiving side's softirq work is
    /// then the device's (as a NIC's interrupts are the device's), not the
    /// generator's. Best effort: a kernel without RPS leaves it unsteered,
    /// and the records say so (no "rx on" in `cpus`).
    fn steer_away_from_generator(&mut self, ns: &str, iface: &str, cpu: Option<usize>) {
        let (Some(g), Some(c)) = (self.cpus.gen, cpu) else {
            return;
        };
        if g != c && netns::steer_receive(ns, iface, c).is_ok() {
            self.rx_steer = Some(c);
        }
    }

    /// The placement as the records name it: the roles' CPUs and where the
    /// device's receive was steered.
    pub fn placement(&self) -> String {
        match self.rx_steer {
            Some(c) => format!("{}, rx on {c}", self.cpus.describe()),
            None => self.cpus.describe(),
        }
    }

    fn set_ends(&mut self, lab: &netns::Topology) {
        self.gen_ns = Some(lab.gen_ns.clone());
        self.sink_ns = Some(lab.sink_ns.clone());
        self.gen_if = lab.gen_if.clone();
        self.sink_if = lab.sink_if.clone();
    }

    /// The namespaces this bench created.
    pub fn namespaces(&self) -> Vec<String> {
        self.topo
            .as_ref()
            .map(|l| l.namespaces().to_vec())
            .unwrap_or_default()
    }

    /// Errors when the device stopped (the forwarder failed, the program
    /// exited).
    fn check_dut(&mut self) -> io::Result<()> {
        match &mut self.running {
            RunningDut::Nothing => Ok(()),
            RunningDut::L2fwd { thread, .. } => {
                if thread.as_ref().is_some_and(|t| t.is_finished()) {
                    let r = thread.take().map(|t| t.join());
                    return match r {
                        Some(Ok(Err(e))) => {
                            Err(io::Error::new(e.kind(), format!("l2fwd stopped: {e}")))
                        }
                        Some(Err(_)) => Err(io::Error::other("l2fwd panicked")),
                        _ => Err(io::Error::other("l2fwd stopped")),
                    };
                }
                Ok(())
            }
            RunningDut::Cmd(child) => match child.try_wait()? {
                Some(st) => Err(io::Error::other(format!(
                    "the --dut cmd program exited ({st}) before or during the trial"
                ))),
                None => Ok(()),
            },
        }
    }

    fn fwd_snapshot(&self) -> Option<FwdSnapshot> {
        match &self.running {
            RunningDut::L2fwd { counters, .. } => Some(counters.snapshot()),
            _ => None,
        }
    }

    /// The CPU the device runs on (or its receive was steered to), when
    /// it has one and the device is one the tester started.
    fn dut_cpu(&self) -> Option<usize> {
        match self.dut {
            DutSpec::None | DutSpec::Ifaces(..) => None,
            _ => self.rx_steer.or(self.cpus.dut),
        }
    }

    /// CPU time the device's own tasks have run so far, ns (the l2fwd
    /// thread, or every task of a `cmd:` device's process tree), from the
    /// scheduler's `schedstat`; None when the device is not ours to
    /// measure or the kernel does not keep the figures.
    fn dut_task_ns(&self) -> Option<u64> {
        match &self.running {
            RunningDut::L2fwd { tid, .. } => {
                let tid = u32::try_from(tid.load(Ordering::Acquire)).ok()?;
                (tid != 0)
                    .then(|| commbench_core::sched::task_times(std::process::id(), tid))
                    .flatten()
                    .map(|t| t.run_ns)
            }
            RunningDut::Cmd(child) => {
                let t = commbench_core::sched::TreeSampler::new(child.id());
                t.available().then(|| t.totals().run_ns)
            }
            RunningDut::Nothing => None,
        }
    }

    /// The forwarder's injected delay, if the device is commbench's l2fwd.
    pub fn fwd_work(&self) -> Option<dut::FwdWork> {
        match &self.running {
            RunningDut::L2fwd { work, .. } => Some(*work),
            _ => None,
        }
    }

    /// A role's failure, named by the role and its interface: a bare
    /// "Network is down (os error 100)" from an interface deleted or set
    /// down under `--dut ifaces:` told neither which interface nor which
    /// end it was.
    fn at_iface(&self, role: &str, iface: &str, e: io::Error) -> io::Error {
        let what = match &self.dut {
            DutSpec::Ifaces(..) => {
                format!("--dut {}: the {role}'s interface {iface}", self.dut.name())
            }
            _ => format!("the {role}'s interface {iface}"),
        };
        io::Error::new(e.kind(), format!("{what}: {e}"))
    }

    /// Runs one trial.
    pub fn trial(&mut self, spec: &TrialSpec) -> io::Result<TrialResult> {
        spec.validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        self.check_dut()?;
        self.trial_no = self.trial_no.wrapping_add(1);
        let flow_base = (self.trial_no % 256) * 256;
        let frames = spec.frames();
        let flows = spec.flows;
        let cap: Vec<u64> = (0..flows)
            .map(|f| {
                frames / u64::from(flows) + u64::from(u64::from(f) < frames % u64::from(flows))
            })
            .collect();
        let epoch = realtime_ns();
        let probe_seen = AtomicBool::new(false);
        let sink_failed = AtomicBool::new(false);
        let gen_done_at = AtomicU64::new(0);
        // The tester's own threads' CPU time, for telling their share of
        // the device's CPU (when they are placed on it) from other work's.
        let (sink_run_ns, gen_run_ns) = (AtomicU64::new(0), AtomicU64::new(0));
        let fwd0 = self.fwd_snapshot();
        let host0 = netns::softnet_drops();
        // The device's CPU around the roles: what it was busy with that
        // the forwarder's own clock does not see (its receive in softirq).
        let dut_cpu = self.dut_cpu();
        let cpu0 = dut_cpu.map(|c| (Instant::now(), CpuTimes::read(&[c])));
        let dut_own0 = self.dut_task_ns();
        // A new window: what the host did between trials is not this one's.
        if let Some(m) = &mut self.stalls {
            let _ = m.take_window();
        }
        let deadline = Instant::now()
            + spec.duration * 3
            + spec.drain
            + PROBE_PATIENCE
            + Duration::from_secs(10);
        let (g, k) = std::thread::scope(|s| {
            let sink = s.spawn(|| -> io::Result<(SinkAccount, u64)> {
                let run0 = commbench_core::sched::this_thread();
                let r = (|| {
                    if let Some(ns) = &self.sink_ns {
                        netns::enter(ns)?;
                    }
                    pin(self.cpus.sink);
                    sink_run(
                        &self.sink_if,
                        spec,
                        &cap,
                        flow_base,
                        epoch,
                        &probe_seen,
                        &gen_done_at,
                        deadline,
                    )
                })();
                if r.is_err() {
                    sink_failed.store(true, Ordering::Release);
                }
                if let (Some(a), Some(b)) = (run0, commbench_core::sched::this_thread()) {
                    sink_run_ns.store(b.run_ns.saturating_sub(a.run_ns), Ordering::Release);
                }
                r
            });
            let gen = s.spawn(|| -> io::Result<GenOut> {
                let run0 = commbench_core::sched::this_thread();
                let r = (|| {
                    if let Some(ns) = &self.gen_ns {
                        netns::enter(ns)?;
                    }
                    pin(self.cpus.gen);
                    let realtime = match spec.gen_priority {
                        GenPriority::Auto => self.cpus.gen_alone(),
                        GenPriority::Realtime => true,
                        GenPriority::Normal => false,
                    };
                    gen_run(
                        &self.gen_if,
                        spec,
                        frames,
                        flow_base,
                        epoch,
                        (&probe_seen, &sink_failed),
                        deadline,
                        realtime,
                    )
                })();
                gen_done_at.store(realtime_ns().max(1), Ordering::Release);
                if let (Some(a), Some(b)) = (run0, commbench_core::sched::this_thread()) {
                    gen_run_ns.store(b.run_ns.saturating_sub(a.run_ns), Ordering::Release);
                }
                r
            });
            let g = gen.join();
            let k = sink.join();
            (g, k)
        });
        let k = k
            .map_err(|_| io::Error::other("the sink thread panicked"))?
            .map_err(|e| self.at_iface("sink", &self.sink_if, e));
        let g = g
            .map_err(|_| io::Error::other("the generator thread panicked"))?
            .map_err(|e| self.at_iface("generator", &self.gen_if, e));
        // A sink that failed is the cause: the generator's probes then
        // find nothing ("no probe frame came through the device"), which
        // hid an AF_XDP bind refused (issue 38).
        let (acct, sink_drops) = k?;
        let g = g?;
        let fwd = match (fwd0, self.fwd_snapshot()) {
            (Some(a), Some(b)) => Some(b.since(&a)),
            _ => None,
        };
        let host_backlog_drops = match (host0, netns::softnet_drops()) {
            (Some(a), Some(b)) => Some(b.0.saturating_sub(a.0)),
            _ => None,
        };
        let stall = self
            .stalls
            .as_mut()
            .filter(|m| m.running())
            .map(|m| m.take_window());
        let own_ns = |pinned: Option<usize>, ns: &AtomicU64| {
            if pinned.is_some() && pinned == dut_cpu {
                ns.load(Ordering::Acquire)
            } else {
                0
            }
        };
        let tester_on_dut_ns =
            own_ns(self.cpus.sink, &sink_run_ns) + own_ns(self.cpus.gen, &gen_run_ns);
        let dut_own_ns = dut_own0
            .zip(self.dut_task_ns())
            .map(|(a, b)| b.saturating_sub(a));
        let dut_cpu_window = cpu0.zip(dut_cpu).map(|((t0, c0), c)| DutCpuWindow {
            window_s: t0.elapsed().as_secs_f64(),
            times: CpuTimes::read(&[c]).since(&c0),
            own_s: dut_own_ns.map(|n| n as f64 / 1e9),
            tester_s: tester_on_dut_ns as f64 / 1e9,
        });
        let dut_ok = self.check_dut();
        let mut r = TrialResult::new(self, spec, frames, &g, &acct, sink_drops, fwd);
        r.host_backlog_drops = host_backlog_drops;
        r.set_stall(stall);
        r.set_dut_cpu(dut_cpu_window);
        r.loss_where = r.loss_where();
        dut_ok?;
        Ok(r)
    }
}

/// The device's CPU over one trial: the window's length and its times.
#[derive(Debug, Clone, Copy)]
struct DutCpuWindow {
    window_s: f64,
    times: CpuTimes,
    /// The device's own tasks' CPU time in the window (None: not known).
    own_s: Option<f64>,
    /// The tester's threads placed on the device's CPU: their CPU time.
    tester_s: f64,
}

impl DutCpuWindow {
    /// The window less the CPU's idle time: exact on a tickless idle CPU,
    /// where the busy kinds are only the tick's samples.
    fn busy_s(&self) -> f64 {
        (self.window_s - self.times.idle_s).max(0.0)
    }
}

/// Ticks per frame the device's CPU was busy outside the forwarder's own
/// timed sections (`busy_s` of the CPU over the trial, the forwarder's
/// section ticks in `f`, per frame it received): what its TSC reads do
/// not see — the kernel's copy of each frame into its receive ring runs
/// in softirq on that CPU, mostly while the forwarder waits. Interrupts
/// that land inside a section are in the section's ticks already, so the
/// two add up to the CPU's busy time and never count a tick twice. None
/// without frames; never negative (the busy time is sampled at 10 ms).
pub fn kernel_ticks_per_frame(busy_s: f64, hz: f64, f: &FwdSnapshot) -> Option<f64> {
    if f.rx == 0 || !busy_s.is_finite() || hz.is_nan() || hz <= 0.0 {
        return None;
    }
    let sections = (f.ticks_rx + f.ticks_work + f.ticks_tx) as f64;
    Some(((busy_s * hz - sections) / f.rx as f64).max(0.0))
}

/// The stall monitor's sleep: a wake-up every millisecond, so a pause of
/// the host's longer than a millisecond shows as one late wake-up.
pub const STALL_STEP: Duration = Duration::from_millis(1);

/// Set to `0` in the environment, the tester runs no stall monitor: the
/// way to check that its wake-ups cost the generator nothing on a small
/// host (trials then have no `host_stall_ms`, and a host stall is not
/// told from the device's loss).
pub const NO_STALL_MONITOR_ENV: &str = "COMMBENCH_STALL_MONITOR";

/// The bench's stall monitor, unless [`NO_STALL_MONITOR_ENV`] is `0`.
fn stall_monitor() -> Option<StallMonitor> {
    if std::env::var(NO_STALL_MONITOR_ENV).is_ok_and(|v| v.trim() == "0") {
        return None;
    }
    // Real-time, so its lateness is the host's stall, not the wait for a
    // CPU the roles' own busy threads hold (a normal thread waited 3-4 ms
    // on two CPUs with the forwarder busy).
    Some(StallMonitor::start_realtime(
        STALL_STEP,
        commbench_core::stall::DEFAULT_THRESHOLD,
    ))
}

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

fn thread_finished(r: &RunningDut) -> bool {
    matches!(r, RunningDut::L2fwd { thread: Some(t), .. } if t.is_finished())
}

impl Drop for Bench {
    fn drop(&mut self) {
        match &mut self.running {
            RunningDut::Nothing => {}
            RunningDut::L2fwd { stop, thread, .. } => {
                stop.store(true, Ordering::Release);
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
            RunningDut::Cmd(child) => {
                let pg = child.id() as i32;
                // Signalling the process group we created.
                let _ = commbench_core::sys::kill(-pg, libc::SIGTERM);
                let end = Instant::now() + Duration::from_secs(2);
                while Instant::now() < end {
                    if let Ok(Some(_)) = child.try_wait() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = commbench_core::sys::kill(-pg, libc::SIGKILL);
                let _ = child.wait();
            }
        }
        // The topology's drop kills what is left in the namespaces and deletes them.
        self.topo.take();
    }
}

/// What the generator did.
#[derive(Debug, Clone)]
pub struct GenOut {
    pub sent: Vec<u64>,
    pub lag: LatencyHistogram,
    pub last_lag_ns: u64,
    /// From the first departure's due time to one gap after the last one's.
    pub span_s: f64,
    pub cpu_s: f64,
    pub wall_s: f64,
    /// Time the generator's thread was runnable but not running (its
    /// run-queue delay, `/proc/thread-self/schedstat`), ms; None without
    /// schedstats.
    pub wait_ms: Option<f64>,
    /// Times the generator's thread was preempted (involuntary context
    /// switches).
    pub preempted: u64,
    pub probes: u64,
    pub stopped_early: bool,
    /// How the generator was scheduled while it paced, in words.
    pub sched: String,
}

/// The frames of each (flow, size): Ethernet + IPv4 + UDP, zero payload.
fn templates(flows: u16, sizes: &[u32]) -> Vec<Vec<Vec<u8>>> {
    (0..flows)
        .map(|f| {
            sizes
                .iter()
                .map(|&s| {
                    let len = s as usize - FCS;
                    let mut b = vec![0u8; len];
                    let r = FlowRepr {
                        src_mac: [0x02, 0xcb, 0, 0, 0, 1],
                        dst_mac: [0x02, 0xcb, 0, 0, 0, 2],
                        tuple: crate::gen::flow_tuple(usize::from(f), false),
                        proto: PROTO_UDP,
                    };
                    let _ = r.emit(&mut b, len);
                    b
                })
                .collect()
        })
        .collect()
}

/// The generator's frames: a template per (flow, size), staged a burst at
/// a time with each frame's flow id and sequence number (flows round
/// robin, sizes in the pattern's order), and stamped just before they go.
struct Stager {
    tmpl: Vec<Vec<Vec<u8>>>,
    /// The sizes' pattern as indices into each flow's templates.
    pattern: Vec<usize>,
    stage: Vec<[u8; 2048]>,
    lens: Vec<usize>,
    /// Next sequence number per flow: after the run, frames sent per flow.
    seq: Vec<u64>,
    flow_rr: usize,
    size_i: usize,
    flow_base: u16,
}

impl Stager {
    fn new(spec: &TrialSpec, flow_base: u16) -> Stager {
        let distinct = spec.sizes.distinct();
        let burst = spec.burst as usize;
        Stager {
            tmpl: templates(spec.flows, &distinct),
            pattern: spec
                .sizes
                .pattern
                .iter()
                .map(|s| distinct.iter().position(|d| d == s).unwrap_or(0))
                .collect(),
            stage: vec![[0u8; 2048]; burst.max(CATCH_UP)],
            lens: vec![0usize; burst.max(CATCH_UP)],
            seq: vec![0u64; usize::from(spec.flows)],
            flow_rr: 0,
            size_i: 0,
            flow_base,
        }
    }

    /// Stages the next `n` frames in the first slots.
    fn fill(&mut self, n: usize) {
        self.fill_at(0, n);
    }

    /// Stages the next `n` frames from slot `at` on (`at + n` at most the
    /// slots: a burst, or [`CATCH_UP`] frames if more).
    fn fill_at(&mut self, at: usize, n: usize) {
        let flows = self.seq.len();
        for i in at..at + n {
            let f = self.flow_rr;
            self.flow_rr = if f + 1 == flows { 0 } else { f + 1 };
            let src = &self.tmpl[f][self.pattern[self.size_i]];
            self.size_i = if self.size_i + 1 == self.pattern.len() {
                0
            } else {
                self.size_i + 1
            };
            self.stage[i][..src.len()].copy_from_slice(src);
            self.lens[i] = src.len();
            stamp::write_id(&mut self.stage[i], self.flow_base + f as u16, self.seq[f]);
            self.seq[f] += 1;
        }
    }

    /// Stages one probe frame (the first flow's, sequence 0, the probe
    /// version) alone.
    fn probe(&mut self) {
        let l = self.tmpl[0][0].len();
        self.stage[0][..l].copy_from_slice(&self.tmpl[0][0]);
        stamp::write_id(&mut self.stage[0], self.flow_base, 0);
        self.stage[0][stamp::STAMP_OFF + 4] = PROBE_VERSION;
        self.lens[0] = l;
    }

    /// Stamps the first `n` staged frames with their departure time.
    fn stamp(&mut self, n: usize, ts: u64) {
        for b in self.stage.iter_mut().take(n) {
            stamp::write_ts(b, ts);
        }
    }

    fn send(&self, tx: &mut dyn TxPath, iface: &str, n: usize) -> io::Result<()> {
        txpath::send_staged(tx, iface, &self.stage[..n], &self.lens[..n])
    }
}

/// Probes the path until a frame comes back (the device and the sink are
/// ready), every 5 ms for at most [`PROBE_PATIENCE`]; returns the probes
/// sent. Ctrl-C ends the probing without an error (the trial stops early);
/// a sink that failed ends it with an error (the sink's is the one
/// reported).
fn probe_path(
    tx: &mut dyn TxPath,
    iface: &str,
    st: &mut Stager,
    probe_seen: &AtomicBool,
    sink_failed: &AtomicBool,
) -> io::Result<u64> {
    let mut probes = 0u64;
    let t_probe = Instant::now();
    st.probe();
    while !probe_seen.load(Ordering::Acquire) {
        if interrupted() {
            break;
        }
        if sink_failed.load(Ordering::Acquire) {
            return Err(io::Error::other("the sink failed before a probe came"));
        }
        if t_probe.elapsed() > PROBE_PATIENCE {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "no probe frame came through the device in {} s: is it forwarding from the generator's link to the sink's?",
                    PROBE_PATIENCE.as_secs()
                ),
            ));
        }
        st.send(tx, iface, 1)?;
        probes += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    // Let the probes in flight land before the trial.
    std::thread::sleep(Duration::from_millis(20));
    tx.finish(Duration::from_millis(100));
    Ok(probes)
}

/// The paced generator's clock: sleeps until a guard before each
/// departure, then busy-waits on the TSC; records how late each departure
/// left (the lag).
struct Pacer {
    sched: Schedule,
    /// Follows how late this host's timer wakes (the worst of the last 32
    /// sleeps plus 2 µs), at most --spin-us.
    guard: WakeGuard,
    lag: LatencyHistogram,
    last_lag: u64,
}

impl Pacer {
    fn new(spec: &TrialSpec, hz: f64) -> Pacer {
        Pacer {
            sched: Schedule::new(spec.arrivals, spec.pps(), spec.burst, hz, spec.seed),
            guard: WakeGuard::new(
                hz / 1e9,
                GuardBounds {
                    initial_ns: (spec.spin_ns as f64).min(pace::SPIN_INITIAL_NS),
                    margin_ns: 2_000.0,
                    min_ns: 5_000.0_f64.min(spec.spin_ns as f64),
                    max_ns: spec.spin_ns as f64,
                },
            ),
            lag: LatencyHistogram::new(),
            last_lag: 0,
        }
    }

    /// Whether the next departure of the schedule that starts at TSC
    /// `start` is already due at `now`.
    #[inline]
    fn next_is_due(&self, start: u64, now: u64) -> bool {
        start + self.sched.peek_offset() <= now
    }

    /// Takes the next departure, already due at `now`, recording its lag.
    #[inline]
    fn take_due(&mut self, start: u64, now: u64) {
        let due = start + self.sched.next_offset();
        let l = tsc().ticks_to_ns(now.saturating_sub(due)) as u64;
        self.lag.record_ns(l);
        self.last_lag = l;
    }

    /// Waits for the next departure of the schedule that starts at TSC
    /// `start`: sleeps while far, busy-waits the rest.
    fn wait_next(&mut self, start: u64) {
        let t = tsc();
        let due = start + self.sched.next_offset();
        loop {
            let now = rdtsc();
            if now + self.guard.ticks() >= due {
                break;
            }
            let wake = due - self.guard.ticks();
            std::thread::sleep(Duration::from_nanos(t.ticks_to_ns(wake - now) as u64));
            self.guard.record(rdtsc().saturating_sub(wake));
        }
        spin_until(due);
        let l = t.ticks_to_ns(rdtsc().saturating_sub(due)) as u64;
        self.lag.record_ns(l);
        self.last_lag = l;
    }
}

/// The generator's scheduling policy over its paced run: real-time in
/// the spans of [`RtSpans`] when asked and allowed, normal otherwise, and
/// normal again when dropped (whatever path leaves the run).
struct GenSched {
    spans: Option<RtSpans>,
    /// Whether the thread is real-time now.
    on: bool,
    /// In words, for the records.
    what: String,
}

impl GenSched {
    /// Tries real-time for the first span when `realtime`; says why not
    /// when the kernel refuses.
    fn start(realtime: bool, hz: f64) -> GenSched {
        if !realtime {
            return GenSched {
                spans: None,
                on: false,
                what: "normal".to_owned(),
            };
        }
        let ticks = |d: Duration| (d.as_secs_f64() * hz) as u64;
        match commbench_core::sys::set_fifo_priority(GEN_PRIORITY) {
            Ok(()) => GenSched {
                spans: Some(RtSpans::new(ticks(pace::RT_ON), ticks(pace::RT_OFF))),
                on: true,
                what: format!(
                    "fifo {GEN_PRIORITY} ({} ms of each {} ms)",
                    pace::RT_ON.as_millis(),
                    (pace::RT_ON + pace::RT_OFF).as_millis()
                ),
            },
            Err(e) => GenSched {
                spans: None,
                on: false,
                what: format!("normal (real-time refused: {e})"),
            },
        }
    }

    /// Steps up or down at a span's edge, `elapsed` ticks into the run.
    #[inline]
    fn at(&mut self, elapsed: u64) {
        if let Some(s) = self.spans {
            let want = s.realtime_at(elapsed);
            if want != self.on {
                let r = if want {
                    commbench_core::sys::set_fifo_priority(GEN_PRIORITY)
                } else {
                    commbench_core::sys::set_normal_priority()
                };
                if r.is_ok() {
                    self.on = want;
                }
            }
        }
    }
}

impl Drop for GenSched {
    fn drop(&mut self) {
        if self.on {
            let _ = commbench_core::sys::set_normal_priority();
        }
    }
}

/// Behind schedule (the thread was held up), stages the bursts that are
/// already due after the `n` frames staged, up to [`CATCH_UP`] frames
/// (or a burst) and `left` frames in all, so what is overdue goes in one
/// send and not a system call per burst; returns the frames staged.
fn catch_up(
    pacer: &mut Pacer,
    st: &mut Stager,
    start: u64,
    mut n: usize,
    left: u64,
    burst: usize,
) -> usize {
    loop {
        let rest = left.saturating_sub(n as u64) as usize;
        let now = rdtsc();
        if rest == 0 || n + burst > st.stage.len() || !pacer.next_is_due(start, now) {
            return n;
        }
        let m = rest.min(burst);
        st.fill_at(n, m);
        pacer.take_due(start, now);
        n += m;
    }
}

/// Frames at most that a generator behind its schedule sends in one
/// system call to catch up: [`txpath::BATCH`], one `sendmmsg`. A frame
/// alone costs ~2.5 µs of the generator's CPU on a two-vCPU VM (its own
/// send and the softirq that hands it to the device's CPU), so after a
/// pause of S at 150 kpps, caught up a burst at a time, bursts stayed
/// late for about 1.6 S.
pub const CATCH_UP: usize = txpath::BATCH;

/// The paced generator's SCHED_FIFO priority: below the stall monitor's
/// ([`commbench_core::stall::MONITOR_PRIORITY`]), which must wake on time
/// beside it.
pub const GEN_PRIORITY: i32 = 1;

/// The generator of a trial: probes the path, then offers `frames` frames
/// on the schedule (or back to back), stamping each burst just before it
/// goes; sends by the retry policy of [`crate::txpath`]. Paced and
/// `realtime`, it runs SCHED_FIFO in the spans of [`GenSched`].
#[allow(clippy::too_many_arguments)] // one role, its plumbing spelled out
fn gen_run(
    iface: &str,
    spec: &TrialSpec,
    frames: u64,
    flow_base: u16,
    epoch: u64,
    (probe_seen, sink_failed): (&AtomicBool, &AtomicBool),
    deadline: Instant,
    realtime: bool,
) -> io::Result<GenOut> {
    // Nanosleep's slack: 1 ns instead of 50 µs (this thread only).
    commbench_core::sys::set_timer_slack_ns(1);
    netns::wait_link_up(iface, Duration::from_secs(2))?;
    let mut st = Stager::new(spec, flow_base);
    let mut tx = txpath::open(iface, spec.tx, &st.tmpl[0][0], 1024)?;
    let probes = probe_path(tx.as_mut(), iface, &mut st, probe_seen, sink_failed)?;
    let t = tsc();
    let mut pacer = Pacer::new(spec, t.hz());
    let cpu0 = Usage::thread();
    let sched0 = commbench_core::sched::this_thread();
    let wall0 = Instant::now();
    // Paced: the schedule starts 1 ms ahead; back to back: now.
    let start = rdtsc() + if spec.unpaced { 0 } else { t.ns_to_ticks(1e6) };
    let burst = spec.burst as usize;
    let mut sent = 0u64;
    let mut stopped_early = false;
    let mut sched = GenSched::start(realtime && !spec.unpaced, t.hz());
    while sent < frames {
        if interrupted() || Instant::now() > deadline {
            stopped_early = true;
            break;
        }
        let mut n = ((frames - sent) as usize).min(burst);
        st.fill(n);
        if !spec.unpaced {
            sched.at(rdtsc().saturating_sub(start));
            pacer.wait_next(start);
            n = catch_up(&mut pacer, &mut st, start, n, frames - sent, burst);
        }
        st.stamp(n, realtime_ns().saturating_sub(epoch));
        st.send(tx.as_mut(), iface, n)?;
        sent += n as u64;
    }
    let end = rdtsc();
    let sched_what = std::mem::take(&mut sched.what);
    drop(sched);
    let cpu = Usage::thread().since(&cpu0);
    let wait_ms = sched0
        .zip(commbench_core::sched::this_thread())
        .map(|(a, b)| b.wait_ns.saturating_sub(a.wait_ns) as f64 / 1e6);
    let unsent = tx.finish(Duration::from_secs(1));
    if unsent > 0 {
        return Err(io::Error::other(tx.unsent(unsent)));
    }
    Ok(GenOut {
        sent: st.seq,
        lag: pacer.lag,
        last_lag_ns: pacer.last_lag,
        span_s: span_s(spec, start, end),
        cpu_s: cpu.cpu_s(),
        wall_s: wall0.elapsed().as_secs_f64(),
        wait_ms,
        preempted: cpu.involuntary_ctx,
        probes,
        stopped_early,
        sched: sched_what,
    })
}

/// The generator's span: the due time of the first burst to one mean gap
/// after the last departure (so a run exactly on schedule spans frames /
/// rate); back to back, first send to last.
fn span_s(spec: &TrialSpec, start: u64, end: u64) -> f64 {
    let t = tsc();
    let gap_ticks = if spec.unpaced {
        0.0
    } else {
        t.hz() * f64::from(spec.burst) / spec.pps()
    };
    (t.ticks_to_ns(end.saturating_sub(start)) + gap_ticks * 1e9 / t.hz()) / 1e9
}

#[allow(clippy::too_many_arguments)] // one role, its plumbing spelled out
fn sink_run(
    iface: &str,
    spec: &TrialSpec,
    cap: &[u64],
    flow_base: u16,
    epoch: u64,
    probe_seen: &AtomicBool,
    gen_done_at: &AtomicU64,
    deadline: Instant,
) -> io::Result<(SinkAccount, u64)> {
    let mut rx = RxPath::open(iface, spec.rx)?;
    let mut acct = SinkAccount::new(cap, spec.late_ns, 100_000);
    acct.flow_base = flow_base;
    let drain = spec.drain.as_nanos() as u64;
    loop {
        if interrupted() || Instant::now() > deadline {
            break;
        }
        let n = rx.next_ts(|f, ts| acct.frame(f, ts.saturating_sub(epoch)))?;
        if acct.probes > 0 && !probe_seen.load(Ordering::Relaxed) {
            probe_seen.store(true, Ordering::Release);
        }
        if n > 0 {
            continue;
        }
        let done = gen_done_at.load(Ordering::Acquire);
        if done != 0 && realtime_ns() > done + drain {
            break;
        }
        rx.wait(1)?;
    }
    let drops = rx.drops()?;
    Ok((acct, drops))
}

/// What [`count_arrivals`] saw.
#[derive(Debug, Clone)]
pub struct ArrivalCount {
    /// Frames with commbench's magic (any version, stamped or not).
    pub ours: u64,
    pub foreign: u64,
    pub drops: u64,
    pub stats: account::ArrivalStats,
}

/// Counts frames carrying commbench's magic on `iface` with their kernel
/// receive times until `idle` passes without one (after the first) or
/// `deadline`: the sink of a generator that does not stamp (another
/// tool's frames with the magic in their payload).
pub fn count_arrivals(
    iface: &str,
    rx: RxMethod,
    idle: Duration,
    deadline: Instant,
) -> io::Result<ArrivalCount> {
    let mut path = RxPath::open(iface, rx)?;
    let mut stats = account::ArrivalStats::new(100_000);
    let (mut ours, mut foreign) = (0u64, 0u64);
    let mut last = Instant::now();
    loop {
        if interrupted() || Instant::now() > deadline {
            break;
        }
        let n = path.next_ts(|f, ts| {
            if f.get(stamp::STAMP_OFF..stamp::STAMP_OFF + 4) == Some(&stamp::MAGIC[..]) {
                ours += 1;
                stats.arrive(ts);
            } else {
                foreign += 1;
            }
        })?;
        if n > 0 {
            last = Instant::now();
            continue;
        }
        if ours > 0 && last.elapsed() > idle {
            break;
        }
        path.wait(2)?;
    }
    Ok(ArrivalCount {
        ours,
        foreign,
        drops: path.drops()?,
        stats,
    })
}

/// One trial's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct TrialResult {
    pub dut: String,
    pub size: String,
    pub arrivals: Arrivals,
    pub burst: u32,
    pub flows: u16,
    pub tx: TxMethod,
    pub rx: RxMethod,
    pub duration_s: f64,
    /// The rate asked for.
    pub offered_pps: f64,
    /// What the generator achieved: sent / its span.
    pub achieved_pps: f64,
    pub rate_error_pct: f64,
    pub lag_p50_ns: f64,
    pub lag_p99_ns: f64,
    pub lag_max_ns: f64,
    pub lag_last_ns: u64,
    pub lag_bound_ns: u64,
    /// The generator fell behind its schedule beyond the bound: the
    /// offered rate was not offered.
    pub behind_schedule: bool,
    pub planned: u64,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub loss_pct: f64,
    pub duplicated: u64,
    pub reordered: u64,
    pub reorder_max_distance: u64,
    pub late: u64,
    pub late_ns: u64,
    pub out_of_range: u64,
    pub foreign: u64,
    pub other_version: u64,
    pub stale: u64,
    pub probes: u64,
    pub sink_drops: u64,
    /// Frames the host's per-CPU input queues dropped during the trial
    /// (host-wide: see [`netns::softnet_drops`]).
    pub host_backlog_drops: Option<u64>,
    /// The host's longest scheduling delay during the trial, ms: the stall
    /// monitor's latest wake-up beyond its 1 ms sleep (None: no monitor).
    pub host_stall_ms: Option<f64>,
    /// CPU time the hypervisor gave to others during the trial (all CPUs,
    /// /proc/stat steal), ms (None: not reported).
    pub steal_ms: Option<f64>,
    /// The device's CPU during the trial (from just before the probes to
    /// the end of the drain): busy = the window less its idle time, ms.
    pub dut_cpu_busy_ms: Option<f64>,
    /// Of it, softirq and system time, ms (sampled at the scheduler tick:
    /// a share, not an exact sum, on a kernel without IRQ time accounting).
    pub dut_cpu_softirq_ms: Option<f64>,
    pub dut_cpu_system_ms: Option<f64>,
    /// Busy time of the device's CPU per frame the device received, ns.
    pub dut_cpu_ns_per_frame: Option<f64>,
    /// The device's own CPU time in the trial: its tasks' run time and
    /// the interrupt and softirq time of its CPU (its receive), ms.
    pub dut_own_cpu_ms: Option<f64>,
    /// The share of the device CPU's window that other work took: busy
    /// time less the device's own and the tester's threads placed there,
    /// % (a lower bound where a tick of softirq lands in a task's time).
    pub dut_cpu_others_pct: Option<f64>,
    /// The device's own CPU time per frame it received, ns.
    pub dut_own_ns_per_frame: Option<f64>,
    /// The length of the device CPU's window, ms.
    pub dut_cpu_window_ms: Option<f64>,
    /// (l2fwd) TSC ticks per frame the device's CPU was busy outside the
    /// forwarder's own rx, work and tx sections: the kernel's receive
    /// into its ring (softirq), and whatever else ran on that CPU (with
    /// the default placement the sink's thread and its receive).
    pub fwd_ticks_kernel: Option<f64>,
    /// Where the lost frames were lost, as far as the counters tell:
    /// see [`TrialResult::loss_where`].
    pub loss_where: String,
    pub latency: Summary,
    /// Latency recorded for this share of received frames (every arrival
    /// that is not a duplicate… and duplicates too: all arrivals).
    pub latency_recorded_pct: f64,
    pub negative_latency: u64,
    pub window_100us_max: u64,
    /// The most frames in any 100 µs over the target's share of 100 µs.
    pub window_100us_over_share: f64,
    pub gap_p99_ns: f64,
    pub delivered_pps: f64,
    pub gen_cpu_s: f64,
    pub delivered_per_gen_cpu_s: f64,
    /// The generator's run-queue delay during the trial, ms: time it
    /// wanted its CPU and something else had it.
    pub gen_wait_ms: Option<f64>,
    /// Times the generator was preempted during the trial.
    pub gen_preempted: u64,
    pub fwd: Option<FwdSnapshot>,
    pub fwd_ticks_rx: Option<f64>,
    pub fwd_ticks_work: Option<f64>,
    pub fwd_ticks_tx: Option<f64>,
    pub per_flow: Vec<FlowCounts>,
    pub partial: bool,
    /// How the generator was scheduled while it paced.
    pub gen_sched: String,
    pub cpus: String,
}

impl TrialResult {
    fn new(
        b: &Bench,
        spec: &TrialSpec,
        planned: u64,
        g: &GenOut,
        a: &SinkAccount,
        sink_drops: u64,
        fwd: Option<FwdSnapshot>,
    ) -> Self {
        let per_flow = a.counts(&g.sent);
        let sum = |f: fn(&FlowCounts) -> u64| per_flow.iter().map(f).sum::<u64>();
        let sent = sum(|c| c.sent);
        let received = sum(|c| c.received);
        let lost = sum(|c| c.lost);
        let achieved = if g.span_s > 0.0 {
            sent as f64 / g.span_s
        } else {
            f64::NAN
        };
        // Back to back offers what the path took.
        let offered = if spec.unpaced { achieved } else { spec.pps() };
        let lag = g.lag.summary();
        let behind = g.stopped_early
            || lag.p99 > spec.lag_bound_ns as f64
            || g.last_lag_ns > spec.lag_bound_ns;
        let arrivals_total = received + sum(|c| c.duplicated);
        let rx_span = a.arrivals.span_s();
        let share = offered * 100e-6;
        let (fr, fw, ft) = fwd.map_or((None, None, None), |f| {
            let (r, w, t) = f.per_packet();
            (Some(r), Some(w), Some(t))
        });
        TrialResult {
            dut: b.dut.name(),
            size: spec.sizes.name.clone(),
            arrivals: spec.arrivals,
            burst: spec.burst,
            flows: spec.flows,
            tx: spec.tx,
            rx: spec.rx,
            duration_s: spec.duration.as_secs_f64(),
            offered_pps: offered,
            achieved_pps: achieved,
            rate_error_pct: (achieved / offered - 1.0) * 100.0,
            lag_p50_ns: lag.p50,
            lag_p99_ns: lag.p99,
            lag_max_ns: lag.max,
            lag_last_ns: g.last_lag_ns,
            lag_bound_ns: spec.lag_bound_ns,
            behind_schedule: behind,
            planned,
            sent,
            received,
            lost,
            loss_pct: if sent > 0 {
                lost as f64 * 100.0 / sent as f64
            } else {
                0.0
            },
            duplicated: sum(|c| c.duplicated),
            reordered: sum(|c| c.reordered),
            reorder_max_distance: per_flow
                .iter()
                .map(|c| c.reorder_max_distance)
                .max()
                .unwrap_or(0),
            late: sum(|c| c.late),
            late_ns: spec.late_ns,
            out_of_range: sum(|c| c.out_of_range),
            foreign: a.foreign + a.short,
            other_version: a.other_version,
            stale: a.unknown_flow,
            probes: g.probes,
            sink_drops,
            host_backlog_drops: None,
            host_stall_ms: None,
            steal_ms: None,
            dut_cpu_busy_ms: None,
            dut_cpu_softirq_ms: None,
            dut_cpu_system_ms: None,
            dut_cpu_ns_per_frame: None,
            dut_own_cpu_ms: None,
            dut_cpu_others_pct: None,
            dut_own_ns_per_frame: None,
            dut_cpu_window_ms: None,
            fwd_ticks_kernel: None,
            loss_where: String::new(),
            latency: a.latency.summary(),
            latency_recorded_pct: if arrivals_total > 0 {
                a.latency.len() as f64 * 100.0 / arrivals_total as f64
            } else {
                f64::NAN
            },
            negative_latency: a.negative_latency,
            window_100us_max: a.arrivals.window_max,
            window_100us_over_share: a.arrivals.window_max as f64 / share.max(1.0),
            gap_p99_ns: if a.arrivals.gaps.is_empty() {
                f64::NAN
            } else {
                a.arrivals.gaps.quantile(0.99)
            },
            delivered_pps: if rx_span > 0.0 {
                received as f64 / rx_span
            } else {
                f64::NAN
            },
            gen_cpu_s: g.cpu_s,
            delivered_per_gen_cpu_s: if g.cpu_s > 0.0 {
                received as f64 / g.cpu_s
            } else {
                f64::NAN
            },
            gen_wait_ms: g.wait_ms,
            gen_preempted: g.preempted,
            fwd,
            fwd_ticks_rx: fr,
            fwd_ticks_work: fw,
            fwd_ticks_tx: ft,
            per_flow,
            partial: g.stopped_early || interrupted(),
            cpus: b.placement(),
            gen_sched: g.sched.clone(),
        }
    }

    /// Takes the stall monitor's window of the trial.
    fn set_stall(&mut self, w: Option<StallWindow>) {
        self.host_stall_ms = w.map(|w| w.worst_ms);
        self.steal_ms = w.and_then(|w| w.steal_ms);
    }

    /// Takes the device CPU's window of the trial: its busy time, per
    /// frame the device received, and (l2fwd) the part of it outside the
    /// forwarder's own timed sections, in TSC ticks.
    fn set_dut_cpu(&mut self, w: Option<DutCpuWindow>) {
        let Some(w) = w else { return };
        let busy_s = w.busy_s();
        self.dut_cpu_busy_ms = Some(busy_s * 1e3);
        self.dut_cpu_softirq_ms = Some(w.times.softirq_s * 1e3);
        self.dut_cpu_system_ms = Some(w.times.system_s * 1e3);
        self.dut_cpu_window_ms = Some(w.window_s * 1e3);
        if let Some(own) = w.own_s {
            let own = own + w.times.softirq_s + w.times.irq_s;
            self.dut_own_cpu_ms = Some(own * 1e3);
            if w.window_s > 0.0 {
                let others = (busy_s - own - w.tester_s).max(0.0);
                self.dut_cpu_others_pct = Some(100.0 * others / w.window_s);
            }
        }
        let frames = self.fwd.map_or(self.received, |f| f.rx);
        if frames == 0 {
            return;
        }
        self.dut_cpu_ns_per_frame = Some(busy_s * 1e9 / frames as f64);
        self.dut_own_ns_per_frame = self.dut_own_cpu_ms.map(|ms| ms * 1e6 / frames as f64);
        if let Some(f) = &self.fwd {
            let hz = tsc().hz();
            self.fwd_ticks_kernel = kernel_ticks_per_frame(busy_s, hz, f);
        }
    }

    /// Names the hop that lost the most of the lost frames, from the
    /// counters each hop keeps: `sink ring` (the tester's receive ring was
    /// full), `host backlog` (the kernel's per-CPU input queue overflowed:
    /// the host, not the device), `device rx ring` (commbench's forwarder's
    /// receive ring was full: the device's own buffer), and `device` for
    /// what no counter explains (the device or the path inside it: a
    /// bridge, a program, a wire). Empty when nothing was lost.
    pub fn loss_where(&self) -> String {
        if self.lost == 0 {
            return String::new();
        }
        let dut_ring = self.fwd.map_or(0, |f| f.rx_ring_drops);
        let host = self.host_backlog_drops.unwrap_or(0);
        let known = self.sink_drops + host + dut_ring;
        let hops = [
            ("sink ring", self.sink_drops),
            ("host backlog", host),
            ("device rx ring", dut_ring),
            ("device", self.lost.saturating_sub(known)),
        ];
        hops.iter()
            .max_by_key(|h| h.1)
            .map(|h| h.0.to_owned())
            .unwrap_or_default()
    }

    /// The trial's record (`test`: `trial` or the caller's).
    pub fn record(&self, test: &str) -> Record {
        let l = &self.latency;
        let mut r = Record::new("pipeline", test)
            .param("dut", &self.dut)
            .param("size", &self.size)
            .param("arrivals", self.arrivals)
            .param("burst", self.burst)
            .param("flows", self.flows)
            .param("tx", self.tx.name())
            .param("rx", self.rx.name())
            .param("duration_s", self.duration_s)
            .param("offered_pps", self.offered_pps)
            .param("cpus", &self.cpus)
            .metric("achieved_pps", self.achieved_pps)
            .metric("rate_error_pct", self.rate_error_pct)
            .metric("lag_p50_ns", self.lag_p50_ns)
            .metric("lag_p99_ns", self.lag_p99_ns)
            .metric("lag_max_ns", self.lag_max_ns)
            .metric("lag_bound_ns", self.lag_bound_ns)
            .metric("behind_schedule", self.behind_schedule)
            .metric("sent", self.sent)
            .metric("received", self.received)
            .metric("lost", self.lost)
            .metric("loss_pct", self.loss_pct)
            .metric("duplicated", self.duplicated)
            .metric("reordered", self.reordered)
            .metric("reorder_max_distance", self.reorder_max_distance)
            .metric("late", self.late)
            .metric("late_bound_ns", self.late_ns)
            .metric("foreign", self.foreign)
            .metric("stale", self.stale)
            .metric("sink_drops", self.sink_drops)
            .metric("host_backlog_drops", self.host_backlog_drops)
            .metric("host_stall_ms", self.host_stall_ms)
            .metric("steal_ms", self.steal_ms)
            .metric("dut_cpu_busy_ms", self.dut_cpu_busy_ms)
            .metric("dut_cpu_softirq_ms", self.dut_cpu_softirq_ms)
            .metric("dut_cpu_system_ms", self.dut_cpu_system_ms)
            .metric("dut_cpu_ns_per_frame", self.dut_cpu_ns_per_frame)
            .metric("dut_own_cpu_ms", self.dut_own_cpu_ms)
            .metric("dut_cpu_others_pct", self.dut_cpu_others_pct)
            .metric("dut_own_ns_per_frame", self.dut_own_ns_per_frame)
            .metric("loss_where", &self.loss_where)
            .metric("latency_p50_ns", l.p50)
            .metric("latency_p90_ns", l.p90)
            .metric("latency_p99_ns", l.p99)
            .metric("latency_p999_ns", l.p999)
            .metric("latency_p9999_ns", l.p9999)
            .metric("latency_max_ns", l.max)
            .metric("latency_recorded_pct", self.latency_recorded_pct)
            .metric("window_100us_max", self.window_100us_max)
            .metric("window_100us_over_share", self.window_100us_over_share)
            .metric("gap_p99_ns", self.gap_p99_ns)
            .metric("delivered_pps", self.delivered_pps)
            .metric("gen_cpu_s", self.gen_cpu_s)
            .metric("delivered_per_gen_cpu_s", self.delivered_per_gen_cpu_s)
            .metric("gen_wait_ms", self.gen_wait_ms)
            .metric("gen_preempted", self.gen_preempted)
            .metric("gen_sched", &self.gen_sched);
        if let Some(f) = &self.fwd {
            r.push_metric("fwd_rx", f.rx);
            r.push_metric("fwd_tx", f.tx);
            r.push_metric("fwd_rx_ring_drops", f.rx_ring_drops);
            r.push_metric("fwd_ticks_rx", self.fwd_ticks_rx);
            r.push_metric("fwd_ticks_work", self.fwd_ticks_work);
            r.push_metric("fwd_ticks_tx", self.fwd_ticks_tx);
            r.push_metric("fwd_ticks_kernel", self.fwd_ticks_kernel);
        }
        r.push_metric("partial", self.partial || self.behind_schedule);
        r
    }
}

#[cfg(test)]
mod tests;
