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
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use commbench_core::clock;
use commbench_core::placement::CpuList;
use commbench_core::rusage::{self, RunMeter, Usage};
use commbench_core::stats::LatencyHistogram;

use crate::error::{IpcError, Result};
use crate::session::{self, ClientOutcome, SessionSpec, Workload};
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
    }
}

/// Rank errors so the most telling one is reported.
fn rank(e: &IpcError) -> u8 {
    match e {
        IpcError::Verify { .. } | IpcError::TooLarge { .. } => 0,
        IpcError::Client { .. } => 1,
        IpcError::Io { .. } | IpcError::Usage(_) | IpcError::Timeout(_) => 2,
        IpcError::PeerClosed { .. } | IpcError::Closed => 3,
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
            .map_err(|e| IpcError::Usage(format!("cannot apply CPU placement: {e}")))?;
    }
    Ok(())
}

fn threads_of(cfg: &IpcConfig) -> u32 {
    cfg.sessions * (1 + cfg.workload.client_threads())
}

type ServerJoin = std::thread::JoinHandle<(Result<u64>, Usage)>;

fn spawn_servers(cfg: &IpcConfig, eps: Vec<transport::Endpoint>) -> Result<Vec<ServerJoin>> {
    let mut v = Vec::with_capacity(eps.len());
    for (s, ep) in eps.into_iter().enumerate() {
        let spec = spec_for(cfg, s as u32);
        let cpus = cfg.server_cpus.clone();
        let h = std::thread::Builder::new()
            .name(format!("ipc-server-{s}"))
            .spawn(move || {
                let r = pin(&cpus).and_then(|_| session::serve(ep, &spec));
                (r, Usage::thread())
            })
            .map_err(|e| IpcError::io("spawn server thread", e))?;
        v.push(h);
    }
    Ok(v)
}

/// Run one configuration (already validated).
pub(crate) fn run_once(cfg: &IpcConfig) -> Result<RunResult> {
    let meter = RunMeter::start();
    let opts = ListenOptions {
        sessions: cfg.sessions,
        ring_bytes: cfg.ring_bytes,
        wait: cfg.wait,
        threads: threads_of(cfg),
    };
    let mut t = transport::listen(cfg.transport, &opts)?;
    match cfg.clients {
        Clients::Mt => run_mt(cfg, t.as_mut(), meter),
        Clients::Mp => run_mp(cfg, t.as_mut(), meter),
    }
}

fn run_mt(cfg: &IpcConfig, t: &mut dyn transport::Transport, meter: RunMeter) -> Result<RunResult> {
    let gate = Arc::new(Gate::new());
    let addr = t.address();
    let kind = t.kind();
    let mut clients = Vec::new();
    for s in 0..cfg.sessions {
        let spec = spec_for(cfg, s);
        let cpus = cfg.client_cpus.clone();
        let gate = gate.clone();
        let addr = addr.clone();
        let h = std::thread::Builder::new()
            .name(format!("ipc-client-{s}"))
            .spawn(move || -> (Result<ClientOutcome>, Usage) {
                let ep = pin(&cpus).and_then(|_| transport::connect(kind, &addr, s));
                let go = gate.ready_and_wait();
                let r = match ep {
                    Err(e) => Err(e),
                    Ok(_) if !go => Err(IpcError::Closed),
                    Ok(ep) => session::client(ep, &spec),
                };
                (r, Usage::thread())
            })
            .map_err(|e| IpcError::io("spawn client thread", e))?;
        clients.push(h);
    }
    let eps = match t.accept_all() {
        Ok(eps) => eps,
        Err(e) => {
            gate.open(false);
            return Err(e);
        }
    };
    let servers = spawn_servers(cfg, eps)?;
    if !gate.wait_ready(cfg.sessions, crate::stream::ACCEPT_TIMEOUT) {
        gate.open(false);
        return Err(IpcError::Timeout("client threads did not get ready".into()));
    }
    let t0 = clock::now_ns();
    gate.open(true);
    let mut err = None;
    let mut server_cpu = 0.0;
    let mut client_cpu = 0.0;
    let mut hist: Option<LatencyHistogram> = None;
    for h in servers {
        let (r, u) = h
            .join()
            .unwrap_or((Err(IpcError::Closed), Usage::default()));
        server_cpu += u.cpu_s();
        if let Err(e) = r {
            keep_best(&mut err, e);
        }
    }
    for h in clients {
        let (r, u) = h
            .join()
            .unwrap_or((Err(IpcError::Closed), Usage::default()));
        client_cpu += u.cpu_s();
        match r {
            Ok(o) => {
                client_cpu += o.helper_cpu_s;
                if let Some(l) = o.latency {
                    hist.get_or_insert_with(LatencyHistogram::new).merge(&l);
                }
            }
            Err(e) => keep_best(&mut err, e),
        }
    }
    let elapsed_ns = clock::now_ns().saturating_sub(t0);
    if let Some(e) = err {
        return Err(e);
    }
    let total = cfg.workload.messages_per_session(cfg.count) * cfg.sessions as u64;
    Ok(RunResult {
        elapsed_ns,
        latency: hist,
        server_cpu_s: server_cpu,
        client_cpu_s: client_cpu,
        usage: meter.finish_with_threads(total, threads_of(cfg) as u64),
    })
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

fn child_command(cfg: &IpcConfig, kind: TransportKind, addr: &str, s: u32) -> Result<Command> {
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
    if spec.verify {
        c.arg("--verify");
    }
    if spec.latency {
        c.arg("--latency");
    }
    if let Some(cpus) = &cfg.client_cpus {
        c.args(["--cpus", &cpus.to_string()]);
    }
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    Ok(c)
}

fn run_mp(cfg: &IpcConfig, t: &mut dyn transport::Transport, meter: RunMeter) -> Result<RunResult> {
    let addr = t.address();
    let kind = t.kind();
    let mut children = Children(Vec::new());
    for s in 0..cfg.sessions {
        let c = child_command(cfg, kind, &addr, s)?
            .spawn()
            .map_err(|e| IpcError::io("start client process", e))?;
        children.0.push(Some(c));
    }
    let eps = t.accept_all()?;
    let servers = spawn_servers(cfg, eps)?;
    // Wait for every child's "ready".
    let mut readers = Vec::new();
    for (s, c) in children.0.iter_mut().enumerate() {
        let c = c.as_mut().expect("child");
        let mut rd = BufReader::new(c.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        let _ = rd.read_line(&mut line);
        if line.trim() != "ready" {
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
    // One waiter per child: read its result line, reap it, abort its
    // session if it failed so the server thread cannot wait forever.
    let t_shared: &dyn transport::Transport = t;
    let mut err = None;
    let mut hist: Option<LatencyHistogram> = None;
    let mut client_cpu = 0.0;
    let mut server_cpu = 0.0;
    std::thread::scope(|scope| {
        let mut waiters = Vec::new();
        for (s, (c, mut rd)) in children.0.iter_mut().zip(readers).enumerate() {
            let child = c.take().expect("child");
            waiters.push(
                scope.spawn(move || -> (Result<Option<LatencyHistogram>>, Usage) {
                    let mut line = String::new();
                    let _ = rd.read_line(&mut line);
                    let pid = child.id() as libc::pid_t;
                    let waited = rusage::wait_child(pid);
                    drop(child);
                    let (exit, usage) = match waited {
                        Ok(x) => x,
                        Err(e) => {
                            return (Err(IpcError::io("wait for client", e)), Usage::default())
                        }
                    };
                    if !exit.success() {
                        t_shared.abort_session(s as u32);
                        let what = match exit {
                            rusage::ChildExit::Code(c) => format!("exit status {c}"),
                            rusage::ChildExit::Signal(sig) => format!("killed by signal {sig}"),
                        };
                        return (
                            Err(IpcError::Client {
                                session: s as u32,
                                what,
                            }),
                            usage,
                        );
                    }
                    (
                        crate::child::parse_result(&line).map_err(|what| IpcError::Client {
                            session: s as u32,
                            what,
                        }),
                        usage,
                    )
                }),
            );
        }
        for h in servers {
            let (r, u) = h
                .join()
                .unwrap_or((Err(IpcError::Closed), Usage::default()));
            server_cpu += u.cpu_s();
            if let Err(e) = r {
                keep_best(&mut err, e);
            }
        }
        for w in waiters {
            let (r, u) = w
                .join()
                .unwrap_or((Err(IpcError::Closed), Usage::default()));
            client_cpu += u.cpu_s();
            match r {
                Ok(Some(l)) => hist.get_or_insert_with(LatencyHistogram::new).merge(&l),
                Ok(None) => {}
                Err(e) => keep_best(&mut err, e),
            }
        }
    });
    let elapsed_ns = clock::now_ns().saturating_sub(t0);
    if let Some(e) = err {
        return Err(e);
    }
    let total = cfg.workload.messages_per_session(cfg.count) * cfg.sessions as u64;
    Ok(RunResult {
        elapsed_ns,
        latency: hist,
        server_cpu_s: server_cpu,
        client_cpu_s: client_cpu,
        usage: meter.finish_with_threads(total, threads_of(cfg) as u64),
    })
}
