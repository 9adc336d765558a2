//! Runs one benchmark: starts the server (one thread per session), starts
//! the clients (`mt`: a thread per session in this process; `mp`: one
//! re-executed client process per session), opens the start gate once every
//! client is connected, and measures from that moment ("server ready") until
//! every server and client end is done.
//!
//! Invariants: the transport's files are removed when this returns, also on
//! error; an `mp` child that dies makes its session fail (its rings are
//! aborted, its sockets shut down) so the run ends with exit 1, never a
//! hang; the first error reported is the most telling one (a verification
//! failure before "peer closed"). CPU time is split by role: server threads
//! report their own RUSAGE_THREAD, `mt` client threads likewise, `mp`
//! children come from wait4.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use commbench_core::clock;
use commbench_core::placement::CpuList;
use commbench_core::rusage::{self, RunMeter, Usage};
use commbench_core::stats::LatencyHistogram;

use crate::error::{IpcError, Result};
use crate::session::{self, SessionSpec, Workload};
use crate::transport::{self, ListenOptions, TransportKind};
use crate::{Clients, IpcConfig};

/// Name of the hidden subcommand an `mp` client process runs.
pub const CHILD_SUBCOMMAND: &str = "__ipc-client";

/// Raw result of one run, before it becomes a report.
pub(crate) struct RunResult {
    pub elapsed_ns: u64,
    pub latency: Option<LatencyHistogram>,
    pub server_cpu_s: f64,
    pub client_cpu_s: f64,
    pub usage: rusage::RunUsage,
    /// The placement chosen for the run.
    pub plan: Plan,
    /// How the shm endpoints waited.
    pub wait: Option<crate::wait::WaitStats>,
}

/// A start gate: clients report ready, the main thread opens it (or aborts).
struct Gate {
    state: Mutex<(u32, Option<bool>)>,
    cv: Condvar,
}

impl Gate {
    fn new() -> Self {
        Gate {
            state: Mutex::new((0, None)),
            cv: Condvar::new(),
        }
    }
    fn ready_and_wait(&self) -> bool {
        let mut g = self.state.lock().expect("gate");
        g.0 += 1;
        self.cv.notify_all();
        while g.1.is_none() {
            g = self.cv.wait(g).expect("gate");
        }
        g.1 == Some(true)
    }
    fn wait_ready(&self, n: u32, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.state.lock().expect("gate");
        while g.0 < n {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self.cv.wait_timeout(g, deadline - now).expect("gate").0;
        }
        true
    }
    fn open(&self, go: bool) {
        let mut g = self.state.lock().expect("gate");
        g.1 = Some(go);
        self.cv.notify_all();
    }
}

fn spec_for(cfg: &IpcConfig, session: u32) -> SessionSpec {
    SessionSpec {
        session,
        workload: cfg.workload,
        size: cfg.size,
        count: cfg.count,
        verify: cfg.verify,
        latency: cfg.latency && cfg.workload == Workload::Reqres(crate::Mode::Sync),
        corrupt_at: cfg
            .corrupt
            .and_then(|(s, seq)| (s == session).then_some(seq)),
        extra_work_ticks: if cfg.extra_work_ns > 0 {
            commbench_core::clock::tsc().ns_to_ticks(cfg.extra_work_ns as f64)
        } else {
            0
        },
    }
}

/// Rank errors so the most telling one is reported (ties: the earliest).
fn rank(e: &IpcError) -> u8 {
    match e {
        IpcError::Verify { .. } | IpcError::TooLarge { .. } => 0,
        IpcError::Client { .. } => 1,
        IpcError::Io { .. } | IpcError::Usage(_) | IpcError::Timeout(_) => 2,
        IpcError::PeerClosed { .. } | IpcError::Closed => 3,
        IpcError::Aborted => 4,
    }
}

fn keep_best(slot: &mut Option<IpcError>, e: IpcError) {
    match slot {
        Some(old) if rank(old) <= rank(&e) => {}
        _ => *slot = Some(e),
    }
}

fn pin(cpus: &Option<CpuList>) -> Result<()> {
    if let Some(c) = cpus {
        c.pin_current_thread()
            .map_err(|e| IpcError::usage(format!("cannot apply CPU placement: {e}")))?;
    }
    Ok(())
}

/// Where a run without `--cpus` puts its threads, decided once per run.
#[derive(Debug, Clone)]
pub(crate) enum Layout {
    /// `--cpus` as given.
    Asked,
    /// Not pinned.
    Free,
    /// Each session's two ends on one CPU of the list (round robin).
    Pair(CpuList),
    /// Each session's server and client on different CPUs of the list.
    Apart(CpuList),
}

/// A run's placement and why it was chosen.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub layout: Layout,
    pub why: String,
}

/// Load samples taken before a run to choose its placement, and their
/// spacing: a majority of five over a millisecond, not one sample (one
/// sample taken while other threads start up decided whole runs before).
const PLAN_SAMPLES: u32 = 5;
const PLAN_SAMPLE_GAP: Duration = Duration::from_micros(200);

/// Choose the run's placement. `block` shares a CPU per session: a
/// wake-up on the other, idle vCPU costs ~28 µs here against ~4 µs on the
/// waker's own. `adaptive` shares a CPU per session when the run has more
/// threads than CPUs (it then never spins; measured with 4 sessions here,
/// co-located ~210k msgs/s against ~60-95k unplaced); when other work
/// fills the machine it puts each session's server and client on
/// different CPUs, where they spin while both hold their CPUs and sleep
/// while one is descheduled (one session beside two busy loops on 2
/// vCPUs: see docs/ipc.md; sharing a CPU there left it at a pipe's rate,
/// since every message then costs a sleep and a wake-up); otherwise it
/// leaves placement to the scheduler.
pub(crate) fn plan(cfg: &IpcConfig) -> Plan {
    let free = |why: &str| Plan {
        layout: Layout::Free,
        why: why.into(),
    };
    if cfg.server_cpus.is_some() || cfg.client_cpus.is_some() {
        return Plan {
            layout: Layout::Asked,
            why: "placement as asked".into(),
        };
    }
    if cfg.transport != TransportKind::Shm || cfg.wait == crate::WaitPolicy::Spin {
        return free("placement left to the scheduler");
    }
    let allowed = commbench_core::placement::current_affinity();
    let n = allowed.cpus().len().max(1) as u32;
    let threads = threads_of(cfg);
    if cfg.wait == crate::WaitPolicy::Block {
        return Plan {
            layout: Layout::Pair(allowed),
            why: "each session's two ends on one CPU".into(),
        };
    }
    if threads > n {
        return Plan {
            layout: Layout::Pair(allowed),
            why: format!(
                "{threads} threads on {n} CPUs: each session's two ends on one CPU, sleeping"
            ),
        };
    }
    let mut h = crate::wait::LoadHistory::default();
    for i in 0..PLAN_SAMPLES {
        if i > 0 {
            std::thread::sleep(PLAN_SAMPLE_GAP);
        }
        h.push(crate::wait::machine_full(threads));
    }
    let seen = format!(
        "runnable threads above the CPUs in {} of {} samples",
        h.busy_samples(),
        h.len()
    );
    if h.busy() && n >= 2 {
        Plan {
            layout: Layout::Apart(allowed),
            why: format!("machine busy ({seen}): server and client on different CPUs"),
        }
    } else {
        free(&format!("machine has room ({seen})"))
    }
}

/// Placement of one role of session `s` under `plan`.
pub(crate) fn placement_for(cfg: &IpcConfig, plan: &Plan, s: u32, server: bool) -> Option<CpuList> {
    let one = |cpus: &[usize], i: usize| {
        (!cpus.is_empty()).then(|| CpuList::from_cpus(vec![cpus[i % cpus.len()]]))
    };
    match &plan.layout {
        Layout::Asked => {
            if server {
                cfg.server_cpus.clone()
            } else {
                cfg.client_cpus.clone()
            }
        }
        Layout::Free => None,
        Layout::Pair(allowed) => one(allowed.cpus(), s as usize),
        Layout::Apart(allowed) => one(allowed.cpus(), 2 * s as usize + usize::from(!server)),
    }
}

/// The placement a report shows for one role: as asked, "-", or the
/// run's own choice ("pair:LIST", "apart:LIST").
pub(crate) fn applied(plan: &Plan, asked: &Option<CpuList>) -> String {
    match &plan.layout {
        Layout::Pair(l) => format!("pair:{l}"),
        Layout::Apart(l) => format!("apart:{l}"),
        _ => asked
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_else(|| "-".into()),
    }
}

fn threads_of(cfg: &IpcConfig) -> u32 {
    cfg.sessions * (1 + cfg.workload.client_threads())
}

/// What a finished server or client end reports to the main thread.
enum Done {
    Server(Result<u64>, Usage),
    Client(Result<Option<LatencyHistogram>>, f64),
}

fn spawn_servers(
    cfg: &IpcConfig,
    plan: &Plan,
    eps: Vec<transport::Endpoint>,
    abort: &Arc<AtomicBool>,
    events: &mpsc::Sender<Done>,
) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let mut v = Vec::with_capacity(eps.len());
    for (s, ep) in eps.into_iter().enumerate() {
        let spec = spec_for(cfg, s as u32);
        let cpus = placement_for(cfg, plan, s as u32, true);
        let abort = abort.clone();
        let events = events.clone();
        let h = std::thread::Builder::new()
            .name(format!("ipc-server-{s}"))
            .spawn(move || {
                let r = pin(&cpus).and_then(|_| session::serve(ep, &spec, &abort));
                let _ = events.send(Done::Server(r, Usage::thread()));
            })
            .map_err(|e| IpcError::io("spawn server thread", e))?;
        v.push(h);
    }
    Ok(v)
}

/// Stop every session of the run: the flag stops in-process loops at the
/// next message, abort_session wakes or disconnects whatever is blocked.
fn abort_all(abort: &AtomicBool, t: &dyn transport::Transport, sessions: u32) {
    abort.store(true, Ordering::SeqCst);
    for s in 0..sessions {
        t.abort_session(s);
    }
}

struct Collected {
    err: Option<IpcError>,
    server_cpu: f64,
    client_cpu: f64,
    hist: Option<LatencyHistogram>,
}

/// Receive `n` completion events; on the first failure abort the run.
fn collect(
    n: usize,
    events: &mpsc::Receiver<Done>,
    abort: &AtomicBool,
    t: &dyn transport::Transport,
    sessions: u32,
) -> Collected {
    let mut c = Collected {
        err: None,
        server_cpu: 0.0,
        client_cpu: 0.0,
        hist: None,
    };
    for _ in 0..n {
        let Ok(ev) = events.recv() else { break };
        let failed = match ev {
            Done::Server(r, u) => {
                c.server_cpu += u.cpu_s();
                r.err()
            }
            Done::Client(r, cpu) => {
                c.client_cpu += cpu;
                match r {
                    Ok(Some(h)) => {
                        c.hist.get_or_insert_with(LatencyHistogram::new).merge(&h);
                        None
                    }
                    Ok(None) => None,
                    Err(e) => Some(e),
                }
            }
        };
        if let Some(e) = failed {
            if !abort.load(Ordering::SeqCst) {
                abort_all(abort, t, sessions);
            }
            keep_best(&mut c.err, e);
        }
    }
    c
}

/// Run one configuration (already validated).
pub(crate) fn run_once(cfg: &IpcConfig) -> Result<RunResult> {
    // The clock calibrates on first use (~50 ms of sleeps): here, not in
    // the first client's measured run while its server spins (it added
    // ~50 ms and the server's spinning to every run's time and CPU).
    let _ = clock::tsc();
    let plan = plan(cfg);
    let meter = RunMeter::start();
    let opts = ListenOptions {
        sessions: cfg.sessions,
        ring_bytes: cfg.ring(),
        wait: cfg.wait,
        threads: threads_of(cfg),
        cpus: crate::wait::affinity_cpus(),
        apart: matches!(plan.layout, Layout::Apart(_)),
    };
    let t = transport::listen(cfg.transport, &opts)?;
    match cfg.clients {
        Clients::Mt => run_mt(cfg, plan, t, meter),
        Clients::Mp => run_mp(cfg, plan, t, meter),
    }
}

fn finish(
    cfg: &IpcConfig,
    plan: Plan,
    t: &dyn transport::Transport,
    c: Collected,
    t0: u64,
    meter: RunMeter,
) -> Result<RunResult> {
    let elapsed_ns = clock::now_ns().saturating_sub(t0);
    if let Some(e) = c.err {
        return Err(e);
    }
    let total = cfg.workload.messages_per_session(cfg.count) * cfg.sessions as u64;
    Ok(RunResult {
        elapsed_ns,
        latency: c.hist,
        server_cpu_s: c.server_cpu,
        client_cpu_s: c.client_cpu,
        usage: meter.finish_with_threads(total, threads_of(cfg) as u64),
        plan,
        wait: t.wait_stats(),
    })
}

fn run_mt(
    cfg: &IpcConfig,
    plan: Plan,
    mut t: Box<dyn transport::Transport>,
    meter: RunMeter,
) -> Result<RunResult> {
    let gate = Arc::new(Gate::new());
    let abort = Arc::new(AtomicBool::new(false));
    let (etx, erx) = mpsc::channel();
    let kind = t.kind();
    let mut handles = Vec::new();
    for s in 0..cfg.sessions {
        let spec = spec_for(cfg, s);
        let cpus = placement_for(cfg, &plan, s, false);
        let gate = gate.clone();
        let addr = t.client_address(s);
        let token = t.client_token();
        let abort = abort.clone();
        let events = etx.clone();
        let h = std::thread::Builder::new()
            .name(format!("ipc-client-{s}"))
            .spawn(move || {
                let ep =
                    pin(&cpus).and_then(|_| transport::connect(kind, &addr, s, token.as_deref()));
                let go = gate.ready_and_wait();
                let r = match ep {
                    Err(e) => Err(e),
                    Ok(_) if !go => Err(IpcError::Aborted),
                    Ok(ep) => session::client(ep, &spec, &abort),
                };
                let (r, helper) = match r {
                    Ok(o) => (Ok(o.latency), o.helper_cpu_s),
                    Err(e) => (Err(e), 0.0),
                };
                let _ = events.send(Done::Client(r, Usage::thread().cpu_s() + helper));
            })
            .map_err(|e| IpcError::io("spawn client thread", e))?;
        handles.push(h);
    }
    let eps = match t.accept_all() {
        Ok(eps) => eps,
        Err(e) => {
            gate.open(false);
            return Err(e);
        }
    };
    let t: Arc<dyn transport::Transport> = Arc::from(t);
    handles.extend(spawn_servers(cfg, &plan, eps, &abort, &etx)?);
    drop(etx);
    if !gate.wait_ready(cfg.sessions, crate::stream::ACCEPT_TIMEOUT) {
        gate.open(false);
        abort_all(&abort, t.as_ref(), cfg.sessions);
        return Err(IpcError::Timeout("client threads did not get ready".into()));
    }
    let t0 = clock::now_ns();
    gate.open(true);
    let c = collect(handles.len(), &erx, &abort, t.as_ref(), cfg.sessions);
    for h in handles {
        let _ = h.join();
    }
    finish(cfg, plan, t.as_ref(), c, t0, meter)
}

/// Kills still-running children on early return.
struct Children(Vec<Option<Child>>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in self.0.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn child_command(
    cfg: &IpcConfig,
    plan: &Plan,
    kind: TransportKind,
    addr: &str,
    token: Option<&str>,
    s: u32,
) -> Result<Command> {
    let exe: PathBuf = match &cfg.client_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| IpcError::io("locate own executable", e))?,
    };
    let spec = spec_for(cfg, s);
    let mut c = Command::new(exe);
    c.arg(CHILD_SUBCOMMAND)
        .args(["--transport", kind.as_str()])
        .args(["--address", addr])
        .args(["--session", &s.to_string()])
        .args(["--mode", cfg.workload.as_str()])
        .args(["--size", &cfg.size.to_string()])
        .args(["--count", &cfg.count.to_string()])
        .args(["--parent", &std::process::id().to_string()]);
    if let Some(t) = token {
        c.env(transport::TOKEN_ENV, t);
    }
    if spec.verify {
        c.arg("--verify");
    }
    if spec.latency {
        c.arg("--latency");
    }
    if let Some(cpus) = &placement_for(cfg, plan, s, false) {
        c.args(["--cpus", &cpus.to_string()]);
    }
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    Ok(c)
}

fn run_mp(
    cfg: &IpcConfig,
    plan: Plan,
    mut t: Box<dyn transport::Transport>,
    meter: RunMeter,
) -> Result<RunResult> {
    let kind = t.kind();
    let abort = Arc::new(AtomicBool::new(false));
    let (etx, erx) = mpsc::channel();
    let mut children = Children(Vec::new());
    for s in 0..cfg.sessions {
        let mut cmd = child_command(
            cfg,
            &plan,
            kind,
            &t.client_address(s),
            t.client_token().as_deref(),
            s,
        )?;
        // Children are spawned one at a time from this thread, so only
        // session s's descriptors are inheritable while s is spawned.
        t.share_with_child(s, true);
        let c = cmd.spawn();
        t.share_with_child(s, false);
        let c = c.map_err(|e| IpcError::io("start client process", e))?;
        children.0.push(Some(c));
    }
    let eps = t.accept_all()?;
    let t: Arc<dyn transport::Transport> = Arc::from(t);
    let mut handles = spawn_servers(cfg, &plan, eps, &abort, &etx)?;
    // Every child says "ready" once connected.
    let mut readers = Vec::new();
    for (s, c) in children.0.iter_mut().enumerate() {
        let c = c.as_mut().expect("child");
        let mut rd = BufReader::new(c.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        let _ = rd.read_line(&mut line);
        if line.trim() != "ready" {
            abort_all(&abort, t.as_ref(), cfg.sessions);
            return Err(IpcError::Client {
                session: s as u32,
                what: "exited before connecting".into(),
            });
        }
        readers.push(rd);
    }
    let t0 = clock::now_ns();
    for c in children.0.iter_mut() {
        let c = c.as_mut().expect("child");
        if let Some(stdin) = c.stdin.as_mut() {
            let _ = stdin.write_all(b"go\n").and_then(|_| stdin.flush());
        }
    }
    // One waiter per child: read its result line, reap it (wait4: its own
    // rusage), report.
    for (s, (c, mut rd)) in children.0.iter_mut().zip(readers).enumerate() {
        let child = c.take().expect("child");
        let events = etx.clone();
        let h = std::thread::Builder::new()
            .name(format!("ipc-wait-{s}"))
            .spawn(move || {
                let mut line = String::new();
                let _ = rd.read_line(&mut line);
                let pid = child.id() as libc::pid_t;
                let waited = rusage::wait_child(pid);
                drop(child);
                let session = s as u32;
                let (r, cpu) = match waited {
                    Err(e) => (Err(IpcError::io("wait for client", e)), 0.0),
                    Ok((exit, usage)) => {
                        let r = match exit {
                            rusage::ChildExit::Code(0) => crate::child::parse_result(&line)
                                .map_err(|e| IpcError::Client {
                                    session,
                                    what: e.to_string(),
                                }),
                            rusage::ChildExit::Code(crate::child::EXIT_PEER_GONE) => {
                                Err(IpcError::Aborted)
                            }
                            rusage::ChildExit::Code(c) => Err(IpcError::Client {
                                session,
                                what: format!("exit status {c}"),
                            }),
                            rusage::ChildExit::Signal(sig) => Err(IpcError::Client {
                                session,
                                what: format!("killed by signal {sig}"),
                            }),
                        };
                        (r, usage.cpu_s())
                    }
                };
                let _ = events.send(Done::Client(r, cpu));
            })
            .map_err(|e| IpcError::io("spawn waiter thread", e))?;
        handles.push(h);
    }
    drop(etx);
    let c = collect(handles.len(), &erx, &abort, t.as_ref(), cfg.sessions);
    for h in handles {
        let _ = h.join();
    }
    finish(cfg, plan, t.as_ref(), c, t0, meter)
}
