//! The bench: a topology set up for trials (namespaces, veths, the
//! running device) and one trial on it, the generator and the sink each a
//! thread in its own namespace; the device's CPU and the host's stalls
//! measured around each trial. Everything it set up is removed on drop.

use super::account::SinkAccount;
use super::dut::{self, DutSpec, FwdCounters, FwdSnapshot, FwdSpec};
use super::generator::{gen_run, GenOut};
use super::identity::IdSlots;
use super::pace::GenPriority;
use super::result::TrialResult;
use super::sink::sink_run;
use super::{pin, replay, stamp, RoleCpus, SpecError, TrialSpec, PROBE_PATIENCE};
use crate::netns::{self, realtime_ns, RxMethod};
use commbench_core::placement::CpuList;
use commbench_core::sched::CpuTimes;
use commbench_core::stall::StallMonitor;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    pub(super) topo: Option<netns::Topology>,
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
    /// Whether the veths carry a replayed frame's trailer
    /// ([`Self::ready_for_replay`]).
    replay_mtu: bool,
    /// The kernel thread (pid, CPU) that runs the device's receive
    /// ([`netns::thread_receive`]), instead of [`Self::rx_steer`].
    pub rx_thread: Option<(u32, usize)>,
    /// The same for the sink's receive, a tester role: what the device's
    /// transmit hands the sink is the sink's work, not the device's.
    sink_rx_thread: Option<(u32, usize)>,
    /// XDP pass programs that keep the receive threads with GRO off
    /// ([`netns::receive_without_gro`]), for the identity table.
    pub(super) no_gro: Vec<crate::xdpprog::XdpPass>,
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
            replay_mtu: false,
            rx_thread: None,
            sink_rx_thread: None,
            no_gro: Vec::new(),
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
        b.thread_receives(&lab);
        if b.rx_thread.is_none() {
            b.steer_away_from_generator(&lab.fwd_ns, &lab.fwd_in, b.cpus.dut);
        }
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
            DutSpec::Router => {
                let t = b
                    .topo
                    .as_ref()
                    .ok_or_else(|| io::Error::other("no topology"))?;
                route_through(t)?;
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

    /// Runs the device's receive, and the sink's, in kernel threads of
    /// their own pinned to their roles' CPUs ([`netns::thread_receive`]),
    /// so that the device's CPU time is its tasks' to the nanosecond and
    /// the sink's receive is not counted as the device's. Best effort:
    /// without threaded NAPI (no `ethtool`, an old kernel) receive is
    /// steered as before and the device's CPU adds its CPU's softirq.
    fn thread_receives(&mut self, lab: &netns::Topology) {
        let (Some(d), Some(sink)) = (self.cpus.dut, self.cpus.sink) else {
            return;
        };
        if std::env::var(RX_THREAD_ENV).is_ok_and(|v| v == "0") {
            return;
        }
        let gen = (lab.gen_ns.as_str(), lab.gen_if.as_str());
        let Ok(pid) = netns::thread_receive(&lab.fwd_ns, &lab.fwd_in, d, gen) else {
            return;
        };
        self.rx_thread = Some((pid, d));
        let fwd = (lab.fwd_ns.as_str(), lab.fwd_out.as_str());
        match netns::thread_receive(&lab.sink_ns, &lab.sink_if, sink, fwd) {
            Ok(p) => self.sink_rx_thread = Some((p, sink)),
            Err(_) => self.unthread_receives(),
        }
    }

    /// Back to receive in softirq, steered away from the generator.
    fn unthread_receives(&mut self) {
        let Some(t) = &self.topo else { return };
        let (fwd_ns, fwd_in) = (t.fwd_ns.clone(), t.fwd_in.clone());
        if self.rx_thread.take().is_some() {
            let _ = netns::unthread_receive(&fwd_ns, &fwd_in, (&t.gen_ns, &t.gen_if));
        }
        if self.sink_rx_thread.take().is_some() {
            let _ = netns::unthread_receive(&t.sink_ns, &t.sink_if, (&t.fwd_ns, &t.fwd_out));
        }
        self.steer_away_from_generator(&fwd_ns, &fwd_in, self.cpus.dut);
    }

    /// The placement as the records name it: the roles' CPUs and where the
    /// device's receive ran.
    pub fn placement(&self) -> String {
        match (self.rx_thread, self.rx_steer) {
            (Some((_, c)), _) => format!("{}, rx napi thread on {c}", self.cpus.describe()),
            (None, Some(c)) => format!("{}, rx on {c}", self.cpus.describe()),
            (None, None) => self.cpus.describe(),
        }
    }

    fn set_ends(&mut self, lab: &netns::Topology) {
        self.gen_ns = Some(lab.gen_ns.clone());
        self.sink_ns = Some(lab.sink_ns.clone());
        self.gen_if = lab.gen_if.clone();
        self.sink_if = lab.sink_if.clone();
    }

    /// The running stall monitor, for a search's back-off between trials
    /// (None: switched off, or it did not start).
    pub(super) fn stall_monitor_mut(&mut self) -> Option<&mut StallMonitor> {
        self.stalls.as_mut().filter(|m| m.running())
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
            _ => self
                .rx_thread
                .map(|(_, c)| c)
                .or(self.rx_steer)
                .or(self.cpus.dut),
        }
    }

    /// CPU time the device's own tasks have run so far, ns (the l2fwd
    /// thread, or every task of a `cmd:` device's process tree), from the
    /// scheduler's `schedstat`; None when the device is not ours to
    /// measure or the kernel does not keep the figures.
    fn dut_task_ns(&self) -> Option<u64> {
        let rx = match self.rx_thread {
            Some((pid, _)) => commbench_core::sched::task_times(pid, pid)?.run_ns,
            None => 0,
        };
        let own = match &self.running {
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
        };
        own.map(|n| n + rx)
    }

    /// The CPU time so far of the sink's receive thread, when it runs on
    /// the device's CPU (a tester role there, like the sink itself).
    fn sink_rx_ns_on_dut(&self) -> u64 {
        match self.sink_rx_thread {
            Some((pid, c)) if Some(c) == self.dut_cpu() => {
                commbench_core::sched::task_times(pid, pid).map_or(0, |t| t.run_ns)
            }
            _ => 0,
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

    /// Makes the path carry a replayed capture's frames with their
    /// trailer: the tester's own veths get [`replay::PATH_MTU`] (once);
    /// interfaces given with `ifaces:` must carry it already, and a
    /// forwarder reading with AF_XDP cannot find the stamp.
    fn ready_for_replay(&mut self, trailer: bool) -> io::Result<()> {
        let need = replay::MTU + if trailer { stamp::TRAILER_LEN } else { 0 };
        match &self.dut {
            DutSpec::L2fwd {
                rx: RxMethod::AfXdp,
                ..
            } => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    SpecError::TrafficXdp,
                ))
            }
            DutSpec::Ifaces(a, c) => {
                for i in [a, c] {
                    let mtu = std::fs::read_to_string(format!("/sys/class/net/{i}/mtu"))
                        .ok()
                        .and_then(|m| m.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if mtu < need {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!(
                                "--traffic through --dut ifaces: {i} has MTU {mtu}; a replayed frame carries the tester's {} B stamp past its datagram: set it to {need} or more (ip link set {i} mtu {})",
                                stamp::TRAILER_LEN,
                                replay::PATH_MTU
                            ),
                        ));
                    }
                }
                return Ok(());
            }
            _ => {}
        }
        if !trailer && self.no_gro.is_empty() {
            self.receive_without_gro()?;
        }
        if self.replay_mtu {
            return Ok(());
        }
        // The receive threads stay: GRO, which they need on a veth, does
        // not merge a replayed TCP segment, whose IP length stops short
        // of the frame (the trailer) — see [`netns::thread_receive`].
        if let (DutSpec::Bridge, Some(t)) = (&self.dut, &self.topo) {
            // br_netfilter (where the kernel has it) trims every IPv4
            // frame a bridge forwards to its IP total length, and with it
            // the trailer: the tester's bridge is an L2 device, so its
            // namespace does not hand frames to iptables (best effort: a
            // kernel without br_netfilter has nothing to switch off).
            let _ = std::process::Command::new("ip")
                .args(["netns", "exec", &t.fwd_ns, "sysctl", "-q", "-w"])
                .args([
                    "net.bridge.bridge-nf-call-iptables=0",
                    "net.bridge.bridge-nf-call-ip6tables=0",
                    "net.bridge.bridge-nf-call-arptables=0",
                ])
                .stderr(std::process::Stdio::null())
                .status();
        }
        if let Some(t) = &self.topo {
            let mtu = replay::PATH_MTU.to_string();
            for (ns, i) in [
                (&t.gen_ns, &t.gen_if),
                (&t.fwd_ns, &t.fwd_in),
                (&t.fwd_ns, &t.fwd_out),
                (&t.sink_ns, &t.sink_if),
            ] {
                if !i.is_empty() {
                    netns::ip_cmd(&["-n", ns, "link", "set", i, "mtu", &mtu])?;
                }
            }
        }
        self.replay_mtu = true;
        Ok(())
    }

    /// For the identity table: GRO off where the tester's receive runs in
    /// NAPI threads (the device's first link, the sink's), so no replayed
    /// TCP segments are merged on the way; the threads stay. Where it
    /// cannot, the threads go and the receive runs in softirq (where
    /// veth merges nothing), and the placement says so.
    fn receive_without_gro(&mut self) -> io::Result<()> {
        let Some(t) = &self.topo else { return Ok(()) };
        let mut ends = Vec::new();
        if self.rx_thread.is_some() {
            ends.push((t.fwd_ns.clone(), t.fwd_in.clone()));
        }
        if self.sink_rx_thread.is_some() {
            ends.push((t.sink_ns.clone(), t.sink_if.clone()));
        }
        for (ns, i) in ends {
            match netns::receive_without_gro(&ns, &i) {
                Ok(p) => self.no_gro.push(p),
                Err(_) => {
                    self.unthread_receives();
                    return Ok(());
                }
            }
        }
        Ok(())
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
        let cap: Vec<u64> = match &spec.traffic {
            Some(t) => {
                self.ready_for_replay(t.id_index().is_none())?;
                t.plan(frames).0
            }
            None => (0..flows)
                .map(|f| {
                    frames / u64::from(flows) + u64::from(u64::from(f) < frames % u64::from(flows))
                })
                .collect(),
        };
        // The identity table's departures, when the frames carry no stamp.
        let departures = spec.traffic.as_ref().and_then(|t| {
            let ix = t.id_index()?;
            Some(Arc::new(IdSlots::new(t.len(), ix.history)))
        });
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
        let sink_rx0 = self.sink_rx_ns_on_dut();
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
                        departures.as_ref(),
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
                        departures.clone(),
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
        let tester_on_dut_ns = own_ns(self.cpus.sink, &sink_run_ns)
            + own_ns(self.cpus.gen, &gen_run_ns)
            + self.sink_rx_ns_on_dut().saturating_sub(sink_rx0);
        let dut_own_ns = dut_own0
            .zip(self.dut_task_ns())
            .map(|(a, b)| b.saturating_sub(a));
        let dut_cpu_window = cpu0.zip(dut_cpu).map(|((t0, c0), c)| DutCpuWindow {
            window_s: t0.elapsed().as_secs_f64(),
            times: CpuTimes::read(&[c]).since(&c0),
            own_s: dut_own_ns.map(|n| n as f64 / 1e9),
            own_has_receive: self.rx_thread.is_some(),
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

/// The sink's MAC behind `--dut router` (the router's next hop).
pub const ROUTER_NEXT_HOP_MAC: &str = "02:cb:00:00:00:03";

/// Makes the device's namespace of `t` an IP router from its first link
/// to its second: the first link answers the generator's destination MAC
/// ([`replay::DST_MAC`]), IPv4 and IPv6 forward with reverse-path
/// filtering off, and one default route each leads to the sink's MAC, a
/// permanent neighbour (no ARP or ND on the path).
fn route_through(t: &netns::Topology) -> io::Result<()> {
    let (ns, i, o) = (&t.fwd_ns, &t.fwd_in, &t.fwd_out);
    let mac = |m: [u8; 6]| {
        m.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    netns::ip_cmd(&[
        "-n",
        &t.sink_ns,
        "link",
        "set",
        &t.sink_if,
        "address",
        ROUTER_NEXT_HOP_MAC,
    ])?;
    netns::ip_cmd(&["-n", ns, "link", "set", i, "address", &mac(replay::DST_MAC)])?;
    let mut sysctl: Vec<String> = [
        "net.ipv4.ip_forward=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        "net.ipv4.conf.all.send_redirects=0",
        "net.ipv4.conf.all.log_martians=0",
        "net.ipv6.conf.all.accept_dad=0",
        "net.ipv6.conf.default.accept_dad=0",
    ]
    .map(str::to_owned)
    .to_vec();
    for x in [i, o] {
        sysctl.push(format!("net.ipv4.conf.{x}.rp_filter=0"));
        sysctl.push(format!("net.ipv6.conf.{x}.accept_dad=0"));
        sysctl.push(format!("net.ipv6.conf.{x}.disable_ipv6=0"));
    }
    sysctl.push("net.ipv6.conf.all.disable_ipv6=0".to_owned());
    sysctl.push("net.ipv6.conf.all.forwarding=1".to_owned());
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-q", "-w"])
        .args(&sysctl)
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "--dut router: sysctl in {ns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    // The next hop's address: link-local, so no frame of a capture is
    // addressed to that link (a router forwards no link-local packet).
    let (v4, v6) = ("169.254.203.2", "fe80::cb:3");
    netns::ip_cmd(&["-n", ns, "addr", "add", "169.254.203.1/30", "dev", o])?;
    for (family, via) in [("-4", v4), ("-6", v6)] {
        netns::ip_cmd(&[
            "-n", ns, family, "route", "add", "default", "via", via, "dev", o,
        ])?;
        netns::ip_cmd(&[
            "-n",
            ns,
            family,
            "neigh",
            "replace",
            via,
            "lladdr",
            ROUTER_NEXT_HOP_MAC,
            "dev",
            o,
            "nud",
            "permanent",
        ])?;
    }
    Ok(())
}

/// The device's CPU over one trial: the window's length and its times.
#[derive(Debug, Clone, Copy)]
pub(super) struct DutCpuWindow {
    pub(super) window_s: f64,
    pub(super) times: CpuTimes,
    /// The device's own tasks' CPU time in the window (None: not known).
    pub(super) own_s: Option<f64>,
    /// Whether `own_s` holds the device's receive too (its receive ran in
    /// a thread of its own); else its CPU's softirq is added.
    pub(super) own_has_receive: bool,
    /// The tester's threads placed on the device's CPU: their CPU time.
    pub(super) tester_s: f64,
}

impl DutCpuWindow {
    /// The window less the CPU's idle time: exact on a tickless idle CPU,
    /// where the busy kinds are only the tick's samples.
    pub(super) fn busy_s(&self) -> f64 {
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

/// `0` keeps receive in softirq, steered (no threaded NAPI): to compare
/// the two ways of receiving on one host.
pub const RX_THREAD_ENV: &str = "COMMBENCH_RX_THREAD";

/// The bench's stall monitor, unless [`NO_STALL_MONITOR_ENV`] is `0`.
pub(super) fn stall_monitor() -> Option<StallMonitor> {
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
