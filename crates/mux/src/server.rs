//! The echo server process (`commbench mux serve`): one event loop per
//! server thread (each with its own SO_REUSEPORT listener on the shared
//! port when there are several), and a control channel that answers
//! `STATS` with the process's CPU time and the loops' counters as one JSON
//! line, and `QUIT` by stopping. The local harness talks to it over the
//! child's stdin/stdout; a load generator on another host over TCP
//! (`--control ADDR:PORT`).
//!
//! Control lines are at most [`MAX_LINE`] bytes; anything else gets an
//! `ERR` line and the control connection is closed (bytes from a peer).
//! Over TCP every connection first presents the run's token (`TOKEN
//! <hex>`, answered `OK`; see [`crate::token`]); a wrong or missing token
//! gets `ERR` and is closed. Control peers are served each on its own
//! thread (at most [`MAX_CONTROL_PEERS`] at once), and one silent for
//! [`CONTROL_IDLE`] is closed: an idle or hostile peer can neither block
//! the real client nor delay shutdown (the server stops without waiting
//! for its peers).

use std::io::{self, BufRead, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use commbench_core::placement::CpuList;
use commbench_core::rusage::Usage;

use crate::engine::{self, EngineKind, Lookup, LoopCtx, LoopStats};
use crate::net;
use crate::token::Token;
use crate::{MuxError, Result};

/// Longest control line accepted.
pub const MAX_LINE: usize = 64;
/// How long a control peer may stay silent (before its token or between
/// commands) before it is closed.
pub const CONTROL_IDLE: Duration = Duration::from_secs(3);
/// Control connections served at once; more are answered `ERR` and closed.
pub const MAX_CONTROL_PEERS: usize = 16;

/// What `mux serve` runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub engine: EngineKind,
    pub lookup: Lookup,
    pub protocol: crate::Protocol,
    pub listen: SocketAddr,
    pub threads: usize,
    /// Bytes per read / per io_uring connection buffer.
    pub buf_size: usize,
    /// Connections the server expects (sizes the io_uring completion queue
    /// and the listen backlog).
    pub max_conns: usize,
    /// Pin the loop threads.
    pub cpus: Option<CpuList>,
    /// Calibration aid: busy-wait this many ns (TSC) for every read that
    /// carried data, before echoing it — a known extra cost per round trip
    /// for checking that a comparison finds a change of a known size.
    pub extra_work_ns: u64,
    /// HTTPS (`--tls`, with `--protocol http1`): every connection speaks
    /// TLS with this config.
    pub tls: Option<crate::tls::ServerTls>,
}

/// The server's answer to `STATS`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerStats {
    pub engine: String,
    pub lookup: String,
    #[serde(default)]
    pub protocol: String,
    pub threads: usize,
    /// User and system CPU seconds of the whole server process so far.
    pub user_s: f64,
    pub sys_s: f64,
    pub voluntary_ctx: u64,
    pub involuntary_ctx: u64,
    #[serde(flatten)]
    pub loops: LoopStats,
    /// io_uring with SINGLE_ISSUER + DEFER_TASKRUN (null for the others).
    pub uring_deferred: Option<bool>,
    /// The soft RLIMIT_NOFILE the server runs with.
    pub nofile: u64,
    /// Most connections the server holds at once: --max-conns, or fewer
    /// when its descriptors allow fewer (more are refused).
    #[serde(default)]
    pub conn_limit: u64,
    /// Control connections refused (too many at once, out of descriptors).
    #[serde(default)]
    pub control_refused: u64,
    /// Resident memory of the whole server process now (VmRSS, KiB; 0
    /// where /proc is not readable).
    #[serde(default)]
    pub rss_kib: u64,
}

/// A running server: its port and the handle to stop it.
pub struct Server {
    pub port: u16,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<io::Result<LoopStats>>>,
    info: StatsHandle,
}

/// What STATS reads: shared with the control threads, which may outlive
/// the loops by a moment (they are never waited for).
#[derive(Clone)]
pub struct StatsHandle(Arc<Info>);

struct Info {
    shared: Vec<Arc<Mutex<LoopStats>>>,
    cfg: ServeConfig,
    deferred: Option<bool>,
    nofile: u64,
    conn_limit: usize,
    /// Control connections refused (too many at once, out of descriptors).
    control_refused: AtomicU64,
}

/// Starts the loops; returns once every listener is bound.
pub fn start(cfg: &ServeConfig) -> Result<Server> {
    let nofile = commbench_core::sys::raise_nofile();
    let backlog = (cfg.max_conns.clamp(128, 65535)) as i32;
    let threads = cfg.threads.max(1);
    let reuse = threads > 1;
    let first = net::listener(cfg.listen, backlog, reuse)
        .map_err(|e| MuxError::io(format!("cannot listen on {}", cfg.listen), e))?;
    let port = first
        .local_addr()
        .map_err(|e| MuxError::io("listener address".into(), e))?
        .port();
    let mut listeners = vec![first];
    for _ in 1..threads {
        let mut a = cfg.listen;
        a.set_port(port);
        listeners.push(
            net::listener(a, backlog, true)
                .map_err(|e| MuxError::io(format!("cannot listen on {a} (SO_REUSEPORT)"), e))?,
        );
    }
    // Fail early and clearly when io_uring is not available.
    let mut deferred = None;
    // --tls where it cannot run is the user's to fix (before the probe).
    if cfg.tls.is_some() && cfg.protocol != crate::Protocol::Http1 {
        return Err(MuxError::usage("--tls needs --protocol http1".into()));
    }
    if cfg.engine == EngineKind::IoUring {
        engine::uring::probe().map_err(|e| MuxError::Unavailable(e.to_string()))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let conn_limit = conn_limit(cfg.max_conns, threads, nofile);
    let live_total = Arc::new(AtomicUsize::new(0));
    let mut shared = Vec::new();
    let mut handles = Vec::new();
    let per_loop = cfg.max_conns.div_ceil(threads) + 16;
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, l) in listeners.into_iter().enumerate() {
        let s = Arc::new(Mutex::new(LoopStats::default()));
        shared.push(s.clone());
        let stop = stop.clone();
        let c = cfg.clone();
        let tx = tx.clone();
        let live_total = live_total.clone();
        let h = std::thread::Builder::new()
            .name(format!("mux-loop-{i}"))
            .spawn(move || -> io::Result<LoopStats> {
                if let Some(cpus) = &c.cpus {
                    let cpu = cpus.cpus()[i % cpus.cpus().len()];
                    let _ = CpuList::from_cpus(vec![cpu]).pin_current_thread();
                }
                let mut eng = match engine::new_engine(c.engine, per_loop) {
                    Ok(e) => e,
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return Err(e);
                    }
                };
                let _ = tx.send(Ok(eng_deferred(&*eng)));
                let ctx = LoopCtx {
                    tls: c.tls.as_ref().map(|t| t.config.clone()),
                    listener: &l,
                    lookup: c.lookup,
                    protocol: c.protocol,
                    stop: &stop,
                    buf_size: c.buf_size,
                    shared: &s,
                    live_total: &live_total,
                    max_conns: conn_limit,
                    extra_work_ticks: if c.extra_work_ns > 0 {
                        commbench_core::clock::tsc().ns_to_ticks(c.extra_work_ns as f64)
                    } else {
                        0
                    },
                };
                eng.serve(&ctx)
            })
            .map_err(|e| MuxError::io("cannot start a server thread".into(), e))?;
        handles.push(h);
    }
    drop(tx);
    for r in rx.iter().take(threads) {
        match r {
            Ok(d) => deferred = deferred.or(d),
            Err(msg) => {
                stop.store(true, Ordering::SeqCst);
                return Err(MuxError::Unavailable(format!(
                    "{} engine: {msg}",
                    cfg.engine.as_str()
                )));
            }
        }
    }
    Ok(Server {
        port,
        stop,
        threads: handles,
        info: StatsHandle(Arc::new(Info {
            shared,
            cfg: cfg.clone(),
            deferred,
            nofile,
            conn_limit,
            control_refused: AtomicU64::new(0),
        })),
    })
}

/// Descriptors the server keeps besides its connections: std streams,
/// per loop a listener, an epoll or io_uring descriptor and a reserve, the
/// control listener, its reserve and its peers, and some slack.
pub fn fd_headroom(threads: usize) -> u64 {
    24 + 3 * threads as u64 + MAX_CONTROL_PEERS as u64
}

/// Connections the server holds at most: `max_conns`, or what `nofile`
/// descriptors leave room for (so that the control channel and the loops
/// never run out; at least one).
pub fn conn_limit(max_conns: usize, threads: usize, nofile: u64) -> usize {
    let room = nofile.saturating_sub(fd_headroom(threads)).max(1);
    max_conns.min(usize::try_from(room).unwrap_or(usize::MAX))
}

fn eng_deferred(e: &dyn engine::Engine) -> Option<bool> {
    e.uring_deferred()
}

impl Server {
    /// The counters now.
    pub fn stats(&self) -> ServerStats {
        self.info.stats()
    }

    /// A handle that reads the counters (for control threads).
    pub fn stats_handle(&self) -> StatsHandle {
        self.info.clone()
    }

    /// Stops the loops (they close every connection) and returns the final
    /// counters.
    pub fn stop(self) -> Result<ServerStats> {
        self.stop.store(true, Ordering::SeqCst);
        let mut first_err = None;
        for h in self.threads {
            match h.join() {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => {
                    first_err =
                        first_err.or(Some(io::Error::other("a server loop thread panicked")))
                }
            }
        }
        let s = self.info.stats();
        match first_err {
            Some(e) => Err(MuxError::io("server loop failed".into(), e)),
            None => Ok(s),
        }
    }
}

impl StatsHandle {
    /// The counters now.
    pub fn stats(&self) -> ServerStats {
        let i = &*self.0;
        let u = Usage::process();
        let mut loops = LoopStats::default();
        for s in &i.shared {
            if let Ok(s) = s.lock() {
                loops.add(&s);
            }
        }
        ServerStats {
            engine: i.cfg.engine.as_str().into(),
            lookup: i.cfg.lookup.as_str().into(),
            protocol: i.cfg.protocol.as_str().into(),
            threads: i.shared.len(),
            user_s: u.user_s,
            sys_s: u.sys_s,
            voluntary_ctx: u.voluntary_ctx,
            involuntary_ctx: u.involuntary_ctx,
            loops,
            uring_deferred: i.deferred,
            nofile: i.nofile,
            conn_limit: i.conn_limit as u64,
            control_refused: i.control_refused.load(Ordering::Relaxed),
            rss_kib: rss_kib(),
        }
    }
}

/// This process's VmRSS in KiB (0 when unknown).
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One control command read from a peer.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Stats,
    Quit,
    /// `TOKEN <hex>`: the run's secret (its bytes as sent).
    Token(Vec<u8>),
}

/// Reads one bounded control line: `Ok(None)` at end of input.
pub fn read_command<R: BufRead>(r: &mut R) -> io::Result<Option<Command>> {
    let mut line = Vec::with_capacity(MAX_LINE);
    let n = io::Read::take(&mut *r, MAX_LINE as u64 + 1).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("control line longer than {MAX_LINE} bytes or cut short"),
        ));
    }
    match line.trim_ascii() {
        b"STATS" => Ok(Some(Command::Stats)),
        b"QUIT" => Ok(Some(Command::Quit)),
        l if l.starts_with(b"TOKEN ") => Ok(Some(Command::Token(l[6..].trim_ascii().to_vec()))),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "unknown control command {:?} (expected TOKEN, STATS or QUIT)",
                String::from_utf8_lossy(other)
            ),
        )),
    }
}

/// Serves control commands from one channel until QUIT or end of input;
/// returns `true` when the server should stop. With `token`, nothing but a
/// matching `TOKEN` line is accepted first.
pub fn control_session(
    server: &StatsHandle,
    input: &mut impl BufRead,
    output: &mut impl Write,
    token: Option<&Token>,
) -> io::Result<bool> {
    let mut authed = token.is_none();
    let refuse = |output: &mut dyn Write, msg: &str| {
        let _ = writeln!(output, "ERR {msg}");
        let _ = output.flush();
        Ok(false)
    };
    loop {
        match read_command(input) {
            Ok(Some(Command::Token(t))) => {
                if token.is_some_and(|k| !k.matches(&t)) {
                    return refuse(output, "wrong control token");
                }
                authed = true;
                writeln!(output, "OK")?;
                output.flush()?;
            }
            Ok(Some(_)) if !authed => {
                return refuse(
                    output,
                    "send the control token first (TOKEN <hex>; mux load: --control-token-file)",
                )
            }
            Ok(Some(Command::Stats)) => {
                let s = serde_json::to_string(&server.stats()).map_err(io::Error::other)?;
                writeln!(output, "{s}")?;
                output.flush()?;
            }
            Ok(Some(Command::Quit)) => return Ok(true),
            Ok(None) => return Ok(false),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return refuse(
                    output,
                    &format!("idle for {} s: closed", CONTROL_IDLE.as_secs()),
                )
            }
            Err(e) => return refuse(output, &e.to_string()),
        }
    }
}

/// `mux serve` with the control channel on stdin/stdout (the local
/// harness's child): prints `READY <port>`, answers commands, stops at QUIT
/// or when stdin closes (the parent died), then prints the final stats.
/// No token: only the parent holds the pipes.
pub fn serve_stdio(cfg: &ServeConfig) -> Result<()> {
    let server = start(cfg)?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let ready = |out: &mut io::StdoutLock| -> io::Result<()> {
        writeln!(out, "READY {}", server.port)?;
        out.flush()
    };
    ready(&mut out).map_err(|e| MuxError::io("control output".into(), e))?;
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let _ = control_session(&server.stats_handle(), &mut input, &mut out, None);
    let s = server.stop()?;
    let line = serde_json::to_string(&s).unwrap_or_default();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    Ok(())
}

/// Serves one TCP control peer on its own thread (never joined).
fn spawn_peer(
    s: std::net::TcpStream,
    info: StatsHandle,
    token: Token,
    quit: Arc<AtomicBool>,
    peers: Arc<AtomicUsize>,
) {
    let setup = s
        .set_nonblocking(false)
        .and_then(|_| s.set_read_timeout(Some(CONTROL_IDLE)))
        .and_then(|_| s.set_write_timeout(Some(CONTROL_IDLE)));
    if setup.is_err() {
        return;
    }
    peers.fetch_add(1, Ordering::SeqCst);
    let p = peers.clone();
    let r = std::thread::Builder::new()
        .name("mux-control".into())
        .spawn(move || {
            // One descriptor per peer (no clone): read and write through &s.
            let mut r = io::BufReader::new(&s);
            let mut w = &s;
            if control_session(&info, &mut r, &mut w, Some(&token)).unwrap_or(false) {
                quit.store(true, Ordering::SeqCst);
            }
            p.fetch_sub(1, Ordering::SeqCst);
        });
    if r.is_err() {
        peers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `mux serve --control ADDR:PORT`: control connections over TCP, each
/// presenting `token`, until `stop` is set (Ctrl-C / SIGTERM) or a peer
/// sends QUIT. Returns at once then: control peers are not waited for.
pub fn serve_tcp(
    cfg: &ServeConfig,
    control: SocketAddr,
    token: &Token,
    stop: &AtomicBool,
) -> Result<Server> {
    let server = start(cfg)?;
    let l = TcpListener::bind(control)
        .map_err(|e| MuxError::io(format!("cannot listen for control on {control}"), e))?;
    l.set_nonblocking(true)
        .map_err(|e| MuxError::io("control listener".into(), e))?;
    let mut echo = cfg.listen;
    echo.set_port(server.port);
    eprintln!(
        "commbench mux serve: {} ({}), echo on {echo}, control on {}",
        cfg.engine.as_str(),
        cfg.lookup.as_str(),
        l.local_addr().map(|a| a.to_string()).unwrap_or_default()
    );
    let quit = Arc::new(AtomicBool::new(false));
    let peers = Arc::new(AtomicUsize::new(0));
    let info = server.stats_handle();
    let mut reserve = net::Reserve::new();
    let refused = |n: u64| info.0.control_refused.fetch_add(n, Ordering::Relaxed);
    while !stop.load(Ordering::Relaxed) && !quit.load(Ordering::SeqCst) {
        match l.accept() {
            Ok((mut s, _)) => {
                if peers.load(Ordering::SeqCst) >= MAX_CONTROL_PEERS {
                    refused(1);
                    let _ = s.write_all(b"ERR too many control connections; try again\n");
                    continue;
                }
                spawn_peer(s, info.clone(), token.clone(), quit.clone(), peers.clone());
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) if net::out_of_descriptors(&e) => {
                // Never fatal: shed the waiting peers and go on.
                use std::os::fd::AsRawFd;
                refused(reserve.shed(l.as_raw_fd(), 64));
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_lines_are_bounded_and_checked() {
        let mut r = io::Cursor::new(b"STATS\nQUIT\n".to_vec());
        assert_eq!(read_command(&mut r).unwrap(), Some(Command::Stats));
        assert_eq!(read_command(&mut r).unwrap(), Some(Command::Quit));
        assert_eq!(read_command(&mut r).unwrap(), None);
        let mut long = io::Cursor::new(vec![b'A'; 10_000]);
        assert!(read_command(&mut long).is_err());
        let mut bad = io::Cursor::new(b"HELLO\n".to_vec());
        assert!(read_command(&mut bad).is_err());
        let mut t = io::Cursor::new(b"TOKEN abc\n".to_vec());
        assert_eq!(
            read_command(&mut t).unwrap(),
            Some(Command::Token(b"abc".to_vec()))
        );
    }
}
