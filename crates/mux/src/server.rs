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

use std::io::{self, BufRead, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use commbench_core::placement::CpuList;
use commbench_core::rusage::Usage;

use crate::engine::{self, EngineKind, Lookup, LoopCtx, LoopStats};
use crate::net;
use crate::{MuxError, Result};

/// Longest control line accepted.
pub const MAX_LINE: usize = 64;

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
}

/// A running server: its port and the handle to stop it.
pub struct Server {
    pub port: u16,
    stop: Arc<AtomicBool>,
    shared: Vec<Arc<Mutex<LoopStats>>>,
    threads: Vec<std::thread::JoinHandle<io::Result<LoopStats>>>,
    cfg: ServeConfig,
    deferred: Option<bool>,
    nofile: u64,
}

/// Starts the loops; returns once every listener is bound.
pub fn start(cfg: &ServeConfig) -> Result<Server> {
    let nofile = commbench_core::sys::raise_nofile();
    let backlog = (cfg.max_conns.clamp(128, 65535)) as i32;
    let threads = cfg.threads.max(1);
    let reuse = threads > 1;
    let first = net::listener(cfg.listen, backlog, reuse)
        .map_err(|e| MuxError::Io(format!("cannot listen on {}", cfg.listen), e))?;
    let port = first
        .local_addr()
        .map_err(|e| MuxError::Io("listener address".into(), e))?
        .port();
    let mut listeners = vec![first];
    for _ in 1..threads {
        let mut a = cfg.listen;
        a.set_port(port);
        listeners.push(
            net::listener(a, backlog, true)
                .map_err(|e| MuxError::Io(format!("cannot listen on {a} (SO_REUSEPORT)"), e))?,
        );
    }
    // Fail early and clearly when io_uring is not available.
    let mut deferred = None;
    if cfg.engine == EngineKind::IoUring {
        engine::uring::probe().map_err(MuxError::Unavailable)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
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
                    listener: &l,
                    lookup: c.lookup,
                    protocol: c.protocol,
                    stop: &stop,
                    buf_size: c.buf_size,
                    shared: &s,
                };
                eng.serve(&ctx)
            })
            .map_err(|e| MuxError::Io("cannot start a server thread".into(), e))?;
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
        shared,
        threads: handles,
        cfg: cfg.clone(),
        deferred,
        nofile,
    })
}

fn eng_deferred(e: &dyn engine::Engine) -> Option<bool> {
    e.uring_deferred()
}

impl Server {
    /// The counters now.
    pub fn stats(&self) -> ServerStats {
        Server::stats_of(&self.shared, &self.cfg, self.deferred, self.nofile)
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
        let s = Server::stats_of(&self.shared, &self.cfg, self.deferred, self.nofile);
        match first_err {
            Some(e) => Err(MuxError::Io("server loop failed".into(), e)),
            None => Ok(s),
        }
    }

    fn stats_of(
        shared: &[Arc<Mutex<LoopStats>>],
        cfg: &ServeConfig,
        deferred: Option<bool>,
        nofile: u64,
    ) -> ServerStats {
        let u = Usage::process();
        let mut loops = LoopStats::default();
        for s in shared {
            if let Ok(s) = s.lock() {
                loops.add(&s);
            }
        }
        ServerStats {
            engine: cfg.engine.as_str().into(),
            lookup: cfg.lookup.as_str().into(),
            protocol: cfg.protocol.as_str().into(),
            threads: shared.len(),
            user_s: u.user_s,
            sys_s: u.sys_s,
            voluntary_ctx: u.voluntary_ctx,
            involuntary_ctx: u.involuntary_ctx,
            loops,
            uring_deferred: deferred,
            nofile,
        }
    }
}

/// One control command read from a peer.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Stats,
    Quit,
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
        other => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "unknown control command {:?} (expected STATS or QUIT)",
                String::from_utf8_lossy(other)
            ),
        )),
    }
}

/// Serves control commands from one channel until QUIT or end of input;
/// returns `true` when the server should stop.
pub fn control_session(
    server: &Server,
    input: &mut impl BufRead,
    output: &mut impl Write,
) -> io::Result<bool> {
    loop {
        match read_command(input) {
            Ok(Some(Command::Stats)) => {
                let s = serde_json::to_string(&server.stats()).map_err(io::Error::other)?;
                writeln!(output, "{s}")?;
                output.flush()?;
            }
            Ok(Some(Command::Quit)) => return Ok(true),
            Ok(None) => return Ok(false),
            Err(e) => {
                let _ = writeln!(output, "ERR {e}");
                let _ = output.flush();
                return Ok(false);
            }
        }
    }
}

/// `mux serve` with the control channel on stdin/stdout (the local
/// harness's child): prints `READY <port>`, answers commands, stops at QUIT
/// or when stdin closes (the parent died), then prints the final stats.
pub fn serve_stdio(cfg: &ServeConfig) -> Result<()> {
    let server = start(cfg)?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let ready = |out: &mut io::StdoutLock| -> io::Result<()> {
        writeln!(out, "READY {}", server.port)?;
        out.flush()
    };
    ready(&mut out).map_err(|e| MuxError::Io("control output".into(), e))?;
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let _ = control_session(&server, &mut input, &mut out);
    let s = server.stop()?;
    let line = serde_json::to_string(&s).unwrap_or_default();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    Ok(())
}

/// `mux serve --control ADDR:PORT`: control connections over TCP, one at a
/// time, until `stop` is set (Ctrl-C / SIGTERM) or a peer sends QUIT.
pub fn serve_tcp(cfg: &ServeConfig, control: SocketAddr, stop: &AtomicBool) -> Result<Server> {
    let server = start(cfg)?;
    let l = TcpListener::bind(control)
        .map_err(|e| MuxError::Io(format!("cannot listen for control on {control}"), e))?;
    l.set_nonblocking(true)
        .map_err(|e| MuxError::Io("control listener".into(), e))?;
    eprintln!(
        "commbench mux serve: {} ({}), echo on port {}, control on {}",
        cfg.engine.as_str(),
        cfg.lookup.as_str(),
        server.port,
        l.local_addr().map(|a| a.to_string()).unwrap_or_default()
    );
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(600)));
                let mut w = match s.try_clone() {
                    Ok(w) => w,
                    Err(_) => continue,
                };
                let mut r = io::BufReader::new(s);
                if control_session(&server, &mut r, &mut w).unwrap_or(false) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => return Err(MuxError::Io("control accept".into(), e)),
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
    }
}
