//! `commbench mux httpd`: the seed's question asked of HTTP servers
//! nobody here wrote. Debian's lighttpd with `server.event-handler`
//! poll, linux-sysepoll (and select where the build has it), nginx
//! (epoll), and our own four engines serving a fixed response, each
//! started fresh per measurement from a generated config in a temp dir,
//! pinned to one CPU, with descriptors for every connection; our HTTP/1.1
//! load holds N keep-alive connections of which a fraction do requests.
//! Server CPU per request comes from the server's own threads'
//! run time (/proc/PID/task/*/schedstat, nanoseconds) over the measured
//! requests only.
//!
//! Cleanup: servers are started with PR_SET_PDEATHSIG (they die with this
//! process, also on SIGKILL), stopped (SIGTERM, then SIGKILL) after each
//! measurement and on every error path (Drop); their temp dir (config,
//! document root, logs, `server.pid`) is removed on drop, on SIGINT/SIGTERM
//! and by `commbench clean`, which also kills a server whose run is dead
//! ([`clean_leftovers`]).

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use commbench_core::artifact::{self, TempDir};
use commbench_core::placement::CpuList;
use commbench_core::{Record, Recorder};

use crate::engine::EngineKind;
use crate::http1::HttpRequest;
use crate::load::{self, ClientsKind, LoadConfig};
use crate::open::OpenConfig;
use crate::{limits, MuxError, PartialConnect, Protocol, Result};

/// The artifact lab name of the temp dirs (`commbench-mux_httpd-…`).
pub const ARTIFACT: &str = "mux_httpd";
/// The pid file inside a run's temp dir.
pub const PID_FILE: &str = "server.pid";

/// A server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// lighttpd with this `server.event-handler`.
    Lighttpd(&'static str),
    /// nginx (epoll; Debian's build has no poll or select module).
    Nginx,
    /// `commbench mux serve --protocol http1` on this engine.
    Ours(EngineKind),
}

impl ServerKind {
    /// Every server kind by its command-line name.
    pub fn all() -> Vec<(&'static str, ServerKind)> {
        let mut v = vec![
            ("lighttpd-poll", ServerKind::Lighttpd("poll")),
            ("lighttpd-epoll", ServerKind::Lighttpd("linux-sysepoll")),
            ("lighttpd-select", ServerKind::Lighttpd("select")),
            ("nginx", ServerKind::Nginx),
        ];
        for e in EngineKind::ALL {
            v.push((
                match e {
                    EngineKind::Poll => "ours-poll",
                    EngineKind::EpollLt => "ours-epoll-lt",
                    EngineKind::EpollEt => "ours-epoll-et",
                    EngineKind::IoUring => "ours-io-uring",
                },
                ServerKind::Ours(e),
            ));
        }
        v
    }
    pub fn parse(s: &str) -> Option<ServerKind> {
        Self::all().into_iter().find(|(n, _)| *n == s).map(|x| x.1)
    }
    pub fn name(self) -> &'static str {
        Self::all()
            .into_iter()
            .find(|(_, k)| *k == self)
            .map(|x| x.0)
            .unwrap_or("?")
    }
    /// (server, multiplexer) as records carry them.
    pub fn parts(self) -> (&'static str, &'static str) {
        match self {
            ServerKind::Lighttpd(h) => (
                "lighttpd",
                match h {
                    "linux-sysepoll" => "epoll",
                    other => other,
                },
            ),
            ServerKind::Nginx => ("nginx", "epoll"),
            ServerKind::Ours(e) => ("commbench", e.as_str()),
        }
    }
}

/// What `mux httpd` measures.
#[derive(Debug, Clone)]
pub struct HttpdConfig {
    pub servers: Vec<ServerKind>,
    /// Connection counts (each a separate set of measurements).
    pub conns: Vec<usize>,
    /// Active fractions in percent of the connections.
    pub active_pct: Vec<f64>,
    /// Requests measured per point (spread over the active connections).
    pub requests: u64,
    /// Unmeasured requests per active connection first.
    pub warmup_rounds: u64,
    /// Response body bytes.
    pub body: usize,
    pub repeat: u32,
    /// The server's CPU and the load's CPUs.
    pub server_cpu: Option<usize>,
    pub client_cpus: Option<CpuList>,
    pub load_threads: usize,
    pub timeout: Duration,
    /// Open-loop rate per point (None: closed loop, one request in flight).
    pub rate: Option<f64>,
    /// This executable (for our servers).
    pub exe: Option<PathBuf>,
}

/// Why a server program cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    /// Not installed (the program, its Debian package).
    #[error("{0} is not installed: apt-get install -y {1} (Debian), then run again")]
    NotInstalled(&'static str, &'static str),
    /// This executable's own path is unknown.
    #[error("{0}")]
    NoExe(std::io::Error),
    /// `lighttpd -V` could not be run (the program).
    #[error("{} -V: {err}", .prog.display())]
    Version { prog: PathBuf, err: std::io::Error },
    /// This lighttpd lacks the multiplexer (its name, the `-V` line, the
    /// handler asked for).
    #[error("this lighttpd build has no {0} (lighttpd -V lists \"{1}\"); it would run another multiplexer under server.event-handler = \"{2}\"")]
    Missing(String, String, String),
    /// `lighttpd -V` does not name the multiplexer.
    #[error("lighttpd -V does not list {0}")]
    Unlisted(String),
}

/// Where a server's program is, or how to get it.
fn program(kind: ServerKind, exe: &Option<PathBuf>) -> std::result::Result<PathBuf, ProgramError> {
    let find = |name: &'static str, pkg: &'static str| {
        for d in [
            "/usr/sbin",
            "/usr/bin",
            "/usr/local/sbin",
            "/usr/local/bin",
            "/sbin",
        ] {
            let p = Path::new(d).join(name);
            if p.exists() {
                return Ok(p);
            }
        }
        Err(ProgramError::NotInstalled(name, pkg))
    };
    match kind {
        ServerKind::Lighttpd(_) => find("lighttpd", "lighttpd"),
        ServerKind::Nginx => find("nginx", "nginx"),
        ServerKind::Ours(_) => match exe {
            Some(p) => Ok(p.clone()),
            None => std::env::current_exe().map_err(ProgramError::NoExe),
        },
    }
}

/// Whether this lighttpd build has the multiplexer behind `handler`,
/// from `lighttpd -V` ("+ poll (Unix)", "- select (generic)"). Debian's
/// 1.4.69 lists select as missing, yet accepts `server.event-handler =
/// "select"` and runs poll (strace shows poll calls only), so the list is
/// what counts.
pub fn lighttpd_has(prog: &Path, handler: &str) -> std::result::Result<(), ProgramError> {
    let name = match handler {
        "linux-sysepoll" => "epoll",
        h => h,
    };
    let out = Command::new(prog)
        .arg("-V")
        .output()
        .map_err(|err| ProgramError::Version {
            prog: prog.to_owned(),
            err,
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    for l in text.lines() {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix("+ ") {
            if rest.split_whitespace().next() == Some(name) {
                return Ok(());
            }
        }
        if let Some(rest) = t.strip_prefix("- ") {
            if rest.split_whitespace().next() == Some(name) {
                return Err(ProgramError::Missing(
                    name.to_owned(),
                    t.to_owned(),
                    handler.to_owned(),
                ));
            }
        }
    }
    Err(ProgramError::Unlisted(name.to_owned()))
}

/// A started server: its process, port and temp dir; stopped on drop.
pub struct RunningServer {
    child: Option<Child>,
    pub pid: u32,
    pub port: u16,
    conns: usize,
    /// Kept for its Drop (removes the dir).
    dir: TempDir,
    _guards: Vec<artifact::CleanupGuard>,
}

impl RunningServer {
    /// SIGTERM, up to 5 s, then SIGKILL; reaps it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // A signal to our own child, not yet reaped.
            let _ = commbench_core::sys::kill(c.id() as libc::pid_t, libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match c.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                }
            }
        }
    }
    /// Whether the process is still running.
    fn alive(&mut self) -> Option<String> {
        let c = self.child.as_mut()?;
        match c.try_wait() {
            Ok(None) => None,
            Ok(Some(st)) => Some(st.to_string()),
            Err(e) => Some(e.to_string()),
        }
    }
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
    fn log_tail(&self) -> String {
        let p = self.dir.path().join("error.log");
        let s = std::fs::read_to_string(p).unwrap_or_default();
        let lines: Vec<&str> = s.lines().rev().take(5).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lighttpd_conf(dir: &Path, port: u16, handler: &str, conns: usize) -> String {
    let d = dir.display();
    let fds = conns * 2 + 256;
    format!(
        r#"server.document-root = "{d}/www"
server.bind = "127.0.0.1"
server.port = {port}
server.event-handler = "{handler}"
server.max-fds = {fds}
server.max-connections = {max}
server.listen-backlog = 4096
server.max-keep-alive-requests = 65535
server.max-keep-alive-idle = 3600
server.max-read-idle = 3600
server.max-write-idle = 3600
server.errorlog = "{d}/error.log"
server.upload-dirs = ( "{d}" )
server.modules = ( )
index-file.names = ( "index.txt" )
mimetype.assign = ( ".txt" => "text/plain" )
"#,
        max = conns + 64
    )
}

fn nginx_conf(dir: &Path, port: u16, conns: usize) -> String {
    let d = dir.display();
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile {fds};
error_log {d}/error.log warn;
pid {d}/nginx.pid;
events {{
    worker_connections {wc};
    use epoll;
    multi_accept on;
}}
http {{
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 3600s;
    client_header_timeout 3600s;
{temps}    types {{ text/plain txt; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        root {d}/www;
        index index.txt;
    }}
}}
"#,
        fds = conns * 2 + 256,
        wc = conns * 2 + 64,
        temps = NGINX_TEMP_DIRS
            .iter()
            .map(|(directive, sub)| format!("    {directive} {d}/{sub};\n"))
            .collect::<String>()
    )
}

/// nginx's temp folders (directive, folder in the run's temp dir): nginx
/// makes them at start, so they are registered for signal cleanup with
/// the rest (left behind on Ctrl-C, they kept the run's dir).
const NGINX_TEMP_DIRS: [(&str, &str); 5] = [
    ("client_body_temp_path", "tmp/body"),
    ("proxy_temp_path", "tmp/proxy"),
    ("fastcgi_temp_path", "tmp/fastcgi"),
    ("uwsgi_temp_path", "tmp/uwsgi"),
    ("scgi_temp_path", "tmp/scgi"),
];

/// Starts a server for `conns` connections (checks its config first).
pub fn start(
    kind: ServerKind,
    conns: usize,
    body: usize,
    cpu: Option<usize>,
    exe: &Option<PathBuf>,
) -> Result<RunningServer> {
    let prog = program(kind, exe).map_err(|e| MuxError::Unavailable(e.to_string()))?;
    let dir = TempDir::new(ARTIFACT)
        .map_err(|e| MuxError::io("cannot make the server's temp dir".into(), e))?;
    // On SIGINT/SIGTERM the handler unlinks registered files, then
    // removes registered directories once empty, deepest first. Every
    // path a server makes in the dir is here: one left out keeps the dir.
    let guards: Vec<artifact::CleanupGuard> = [
        "www/index.txt",
        "lighttpd.conf",
        "nginx.conf",
        "error.log",
        "stderr.log",
        PID_FILE,
        "nginx.pid",
        "www",
    ]
    .into_iter()
    .chain(NGINX_TEMP_DIRS.iter().map(|(_, sub)| *sub))
    .chain(["tmp", ""])
    .map(|f| {
        artifact::register_cleanup(&if f.is_empty() {
            dir.path().to_path_buf()
        } else {
            dir.path().join(f)
        })
    })
    .collect();
    let io = |what: &str| {
        let w = what.to_owned();
        move |e| MuxError::io(w, e)
    };
    std::fs::create_dir_all(dir.path().join("www")).map_err(io("document root"))?;
    std::fs::create_dir_all(dir.path().join("tmp")).map_err(io("temp dir"))?;
    let content: Vec<u8> = (0..body).map(|i| b"hello, world\n"[i % 13]).collect();
    std::fs::write(dir.path().join("www/index.txt"), &content).map_err(io("index.txt"))?;
    let port = limits::pick_listen_port(Ipv4Addr::LOCALHOST);
    let mut cmd = Command::new(&prog);
    match kind {
        ServerKind::Lighttpd(h) => {
            lighttpd_has(&prog, h).map_err(|e| MuxError::Unavailable(e.to_string()))?;
            let conf = dir.path().join("lighttpd.conf");
            std::fs::write(&conf, lighttpd_conf(dir.path(), port, h, conns))
                .map_err(io("lighttpd.conf"))?;
            // Check the config (and the handler: a build without it says so).
            let t = Command::new(&prog)
                .arg("-tt")
                .arg("-f")
                .arg(&conf)
                .output()
                .map_err(io("lighttpd -tt"))?;
            if !t.status.success() {
                let msg = String::from_utf8_lossy(&t.stderr).trim().to_owned();
                return Err(MuxError::Unavailable(format!(
                    "lighttpd refuses server.event-handler = \"{h}\": {msg}"
                )));
            }
            cmd.arg("-D").arg("-f").arg(&conf);
        }
        ServerKind::Nginx => {
            let conf = dir.path().join("nginx.conf");
            std::fs::write(&conf, nginx_conf(dir.path(), port, conns)).map_err(io("nginx.conf"))?;
            cmd.arg("-p").arg(dir.path()).arg("-c").arg(&conf);
        }
        ServerKind::Ours(e) => {
            cmd.args(crate::SERVE_SUBCOMMAND)
                .arg("--engine")
                .arg(e.as_str())
                .arg("--protocol")
                .arg("http1")
                .arg("--response-size")
                .arg(body.to_string())
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                // Headroom over the load's connections: the readiness
                // probe's connection may not have been reaped yet when the
                // load's last one arrives (seen: "connection 19 closed by
                // the server" at --conns 20 under CI load).
                .arg("--max-conns")
                .arg((conns + 64).to_string())
                .arg("--buf")
                .arg("4096")
                .arg("--control")
                .arg("stdio");
        }
    }
    cmd.current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(dir.path().join("stderr.log")).map_err(io("stderr.log"))?,
        ));
    #[allow(unsafe_code)]
    // SAFETY: prctl and setrlimit are async-signal-safe; nothing else runs
    // in the child before exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        let nofile = (conns * 2 + 512) as libc::rlim_t;
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            let mut cur = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut cur) == 0 && cur.rlim_cur < nofile {
                let want = libc::rlimit {
                    rlim_cur: nofile.max(cur.rlim_cur),
                    rlim_max: nofile.max(cur.rlim_max),
                };
                libc::setrlimit(libc::RLIMIT_NOFILE, &want);
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| MuxError::io(format!("cannot start {}", prog.display()), e))?;
    let pid = child.id();
    let _ = std::fs::write(dir.path().join(PID_FILE), pid.to_string());
    let mut s = RunningServer {
        child: Some(child),
        pid,
        port,
        conns,
        dir,
        _guards: guards,
    };
    if let Some(c) = cpu {
        CpuList::from_cpus(vec![c])
            .pin_pid(pid as libc::pid_t)
            .map_err(|e| MuxError::usage(format!("cannot pin the server to CPU {c}: {e}")))?;
    }
    // Wait until it accepts.
    let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(st) = s.alive() {
            return Err(MuxError::Server(format!(
                "{} exited at start ({st}): {}",
                kind.name(),
                s.log_tail()
            )));
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            break;
        }
        if Instant::now() > deadline {
            return Err(MuxError::Server(format!(
                "{} does not accept on {addr} after 15 s: {}",
                kind.name(),
                s.log_tail()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(s)
}

/// Run time of every thread of `pid` so far (ns, from schedstat).
pub fn cpu_ns(pid: u32) -> Option<u64> {
    let rd = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut sum = 0u64;
    for t in rd.flatten() {
        let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
        sum += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(sum)
}

/// Open descriptors of `pid`.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|r| r.count())
        .unwrap_or(0)
}

/// One measurement.
#[derive(Debug, Clone)]
pub struct Point {
    pub kind: ServerKind,
    pub conns: usize,
    pub active: usize,
    pub requests: u64,
    pub server_cpu_us_per_req: f64,
    pub client_cpu_us_per_req: f64,
    pub req_per_s: f64,
    pub latency: commbench_core::stats::Summary,
    pub non_2xx: u64,
}

fn measure(cfg: &HttpdConfig, kind: ServerKind, conns: usize, active: usize) -> Result<Point> {
    let mut srv = start(kind, conns, cfg.body, cfg.server_cpu, &cfg.exe)?;
    let target = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, srv.port));
    let rounds = cfg.requests.div_ceil(active as u64).max(1);
    let open = match cfg.rate {
        Some(r) => OpenConfig {
            rate: Some(r),
            warmup: Duration::from_millis(500),
            duration: Duration::from_secs_f64((cfg.requests as f64 / r).clamp(0.5, 60.0)),
            ..OpenConfig::closed(1)
        },
        None => OpenConfig::closed(1),
    };
    let lcfg = LoadConfig {
        target,
        conns,
        active,
        rounds,
        rounds_for: None,
        size: cfg.body,
        protocol: Protocol::Http1,
        clients: ClientsKind::Loop,
        load_threads: cfg.load_threads,
        sources: limits::sources_for(conns, target)?,
        timeout: cfg.timeout,
        cpus: cfg.client_cpus.clone(),
        connect_window: load::CONNECT_WINDOW,
        open,
        http: HttpRequest {
            path: "/index.txt".into(),
            ..Default::default()
        },
        tls: None,
    };
    let c = load::connect_all(&lcfg)?;
    if c.fds.len() < conns {
        return Err(MuxError::Partial(PartialConnect::Server {
            server: kind.name(),
            connected: c.fds.len(),
            asked: conns,
            first: c.first_error.clone().unwrap_or_default(),
        }));
    }
    // Every connection accepted (the server holds a descriptor for each).
    let deadline = Instant::now() + Duration::from_secs(30);
    while fd_count(srv.pid) < conns && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if cfg.warmup_rounds > 0 {
        let warm = LoadConfig {
            rounds: cfg.warmup_rounds,
            rounds_for: None,
            open: OpenConfig::closed(1),
            ..lcfg.clone()
        };
        load::run_rounds(&warm, &c.fds).map_err(|e| died(&mut srv, kind, e))?;
    }
    let cpu0 = cpu_ns(srv.pid);
    let r = load::run_rounds(&lcfg, &c.fds).map_err(|e| died(&mut srv, kind, e))?;
    let cpu1 = cpu_ns(srv.pid);
    if let Some(st) = srv.alive() {
        return Err(MuxError::Server(format!("{} died ({st})", kind.name())));
    }
    drop(c);
    srv.stop();
    let o = r.open.as_ref();
    let n = r.round_trips.max(1) as f64;
    let srv_ns = match (cpu0, cpu1) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64,
        _ => f64::NAN,
    };
    Ok(Point {
        kind,
        conns,
        active,
        requests: r.round_trips,
        server_cpu_us_per_req: srv_ns / 1e3 / n,
        client_cpu_us_per_req: r.usage.cpu_s() * 1e6 / n,
        req_per_s: n / r.wall_s.max(1e-9),
        latency: o
            .map(|o| o.corrected.summary())
            .unwrap_or_else(|| r.latency.summary()),
        non_2xx: o.map_or(0, |o| o.http.non_2xx() + o.http.errors),
    })
}

/// A load error, with the server's last words when it died.
fn died(srv: &mut RunningServer, kind: ServerKind, e: MuxError) -> MuxError {
    match srv.alive() {
        Some(st) => MuxError::Server(format!(
            "{} died ({st}) during the load: {} ({e})",
            kind.name(),
            srv.log_tail()
        )),
        None => MuxError::Load(format!("{} (N={}): {e}", kind.name(), srv.conns)),
    }
}

fn record(cfg: &HttpdConfig, runs: &[Point]) -> Record {
    let p = &runs[0];
    let (server, mux) = p.kind.parts();
    let per_run: Vec<Record> = runs
        .iter()
        .map(|x| {
            Record::new("mux", "httpd")
                .metric("server_cpu_us_per_rt", x.server_cpu_us_per_req)
                .metric("client_cpu_us_per_rt", x.client_cpu_us_per_req)
                .metric("rt_per_s", x.req_per_s)
        })
        .collect();
    let med = |f: &dyn Fn(&Point) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let mut rec = Record::new("mux", "httpd")
        .param("server", server)
        .param("engine", mux)
        .param("conns", p.conns)
        .param("active", p.active)
        .param("active_pct", 100.0 * p.active as f64 / p.conns as f64)
        .param("requests", cfg.requests)
        .param("body", cfg.body)
        .param("rate", cfg.rate)
        .param("repeat", cfg.repeat)
        .param("server_cpu", cfg.server_cpu)
        .metric("server_cpu_us_per_rt", med(&|x| x.server_cpu_us_per_req))
        .metric("client_cpu_us_per_rt", med(&|x| x.client_cpu_us_per_req))
        .metric("rt_per_s", med(&|x| x.req_per_s))
        .metric("round_trips", runs.iter().map(|x| x.requests).sum::<u64>())
        .metric("latency_ns", &p.latency)
        .metric("non_2xx", runs.iter().map(|x| x.non_2xx).sum::<u64>())
        .metric(
            "status",
            if runs.iter().any(|x| x.non_2xx > 0) {
                "errors"
            } else {
                "ok"
            },
        );
    if per_run.len() > 1 {
        commbench_core::lab::attach_repeats(&crate::lab::MuxLab, &mut rec, &per_run);
    }
    rec
}

/// What the run found, and what it could not run.
#[derive(Debug, Default)]
pub struct HttpdReport {
    pub skipped: Vec<(String, String)>,
}

/// Measures every server × connection count × active fraction,
/// interleaved over repeats; one record per point.
pub fn run(cfg: &HttpdConfig, rec: &mut Recorder) -> Result<HttpdReport> {
    if cfg.servers.is_empty() || cfg.conns.is_empty() || cfg.active_pct.is_empty() {
        return Err(MuxError::usage(
            "give at least one server, --conns and --active-pct".into(),
        ));
    }
    // Our servers answer with the same body, and it is built in memory.
    if cfg.body > crate::http1::MAX_RESPONSE_BODY {
        return Err(MuxError::usage(format!(
            "--body must be 0 B..=16 MiB (our servers send the same body from memory), got {} B",
            cfg.body
        )));
    }
    let max = cfg.conns.iter().copied().max().unwrap_or(0);
    // The load side holds every connection.
    limits::ensure_nofile(max + 64)?;
    let mut report = HttpdReport::default();
    let mut servers = Vec::new();
    for &k in &cfg.servers {
        // One start per kind up front: a missing program or handler is
        // skipped with its reason, not an error halfway through.
        match start(k, 16, cfg.body, None, &cfg.exe) {
            Ok(mut s) => {
                s.stop();
                servers.push(k);
            }
            Err(MuxError::Unavailable(why)) | Err(MuxError::Server(why)) => {
                rec.progress(&format!("mux httpd: {} skipped: {why}", k.name()));
                report.skipped.push((k.name().into(), why));
            }
            Err(e) => return Err(e),
        }
    }
    if servers.is_empty() {
        return Err(MuxError::Unavailable(format!(
            "no server can run here: {}",
            report
                .skipped
                .iter()
                .map(|(k, w)| format!("{k}: {w}"))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    let mut points: Vec<(ServerKind, usize, usize)> = Vec::new();
    for &n in &cfg.conns {
        for &pct in &cfg.active_pct {
            let active = ((n as f64 * pct / 100.0).round() as usize).clamp(1, n);
            for &k in &servers {
                points.push((k, n, active));
            }
        }
    }
    let mut runs: Vec<Vec<Point>> = points.iter().map(|_| Vec::new()).collect();
    let mut conditions = commbench_core::rusage::Conditions::begin();
    for rep in 0..cfg.repeat {
        for (i, &(k, n, a)) in points.iter().enumerate() {
            rec.progress(&format!(
                "mux httpd: {} N={n} active={a} (repeat {}/{})",
                k.name(),
                rep + 1,
                cfg.repeat
            ));
            runs[i].push(measure(cfg, k, n, a)?);
            conditions.sample();
        }
    }
    // The Lab contract's conditions: the server and the load generator's
    // threads (busy together), and where they ran.
    let placement = commbench_core::placement::describe(
        &[
            (
                "server",
                cfg.server_cpu
                    .map(|c| commbench_core::placement::CpuList::from_cpus(vec![c]))
                    .as_ref(),
            ),
            ("load", cfg.client_cpus.as_ref()),
        ],
        &[],
    );
    for r in &runs {
        let mut x = record(cfg, r);
        conditions.stamp(&mut x, 1 + cfg.load_threads as u64, Some(&placement));
        rec.push(x);
    }
    Ok(report)
}

/// The terminal table of `mux httpd` records, the skipped servers and the
/// verdict lines under it. Intervals read `[lo, hi]`, as everywhere else.
pub fn table(recs: &[Record], skipped: &[(String, String)], lines: &[String]) -> String {
    let mut t = String::from(
        "server     engine    conns  active  srv us/req [95% CI]        req/s  cli us/req  p99 us  status\n",
    );
    for r in recs.iter().filter(|r| r.test == "httpd") {
        let p = |k: &str| {
            r.params
                .get(k)
                .map(|v| v.to_string().trim_matches('"').to_owned())
                .unwrap_or_default()
        };
        let m = |k: &str| r.metric_f64(k).unwrap_or(f64::NAN);
        let ci = match (
            r.metric_f64("server_cpu_us_per_rt_lo"),
            r.metric_f64("server_cpu_us_per_rt_hi"),
        ) {
            (Some(lo), Some(hi)) if lo.is_finite() && hi.is_finite() => {
                format!("[{lo:.2}, {hi:.2}]")
            }
            _ => "(one run)".into(),
        };
        t.push_str(&format!(
            "{:<10} {:<8} {:>6} {:>6}%  {:>6.2} {:<16}  {:>9.0}  {:>10.2}  {:>6.1}  {}\n",
            p("server"),
            p("engine"),
            p("conns"),
            format!(
                "{:.0}",
                r.params
                    .get("active_pct")
                    .and_then(|v| v.as_f64())
                    .unwrap_or(f64::NAN)
            ),
            m("server_cpu_us_per_rt"),
            ci,
            m("rt_per_s"),
            m("client_cpu_us_per_rt"),
            m("latency_ns.p99") / 1e3,
            r.metrics
                .get("status")
                .and_then(|v| v.as_str())
                .unwrap_or("")
        ));
    }
    for (k, why) in skipped {
        t.push_str(&format!("{k}: skipped: {why}\n"));
    }
    for l in lines {
        t.push_str(&format!("{l}\n"));
    }
    t
}

/// The answer in words from `mux httpd` records: lighttpd's poll against
/// its epoll per connection count as the active fraction falls, and the
/// others beside them.
pub fn verdict(recs: &[Record]) -> Vec<String> {
    use commbench_core::lab::answer::{is, ratio_between};
    let httpd: Vec<&Record> = recs
        .iter()
        .filter(|r| r.lab == "mux" && r.test == "httpd")
        .collect();
    let num = |r: &Record, k: &str| r.params.get(k).and_then(|v| v.as_f64());
    let mut conns: Vec<u64> = httpd
        .iter()
        .filter_map(|r| r.params.get("conns").and_then(|v| v.as_u64()))
        .collect();
    conns.sort_unstable();
    conns.dedup();
    let mut out = Vec::new();
    for n in conns {
        let mut pcts: Vec<f64> = httpd
            .iter()
            .filter(|r| num(r, "conns") == Some(n as f64))
            .filter_map(|r| num(r, "active_pct"))
            .collect();
        pcts.sort_by(|a, b| b.total_cmp(a));
        pcts.dedup();
        let cpu = |server: &str, eng: &str, pct: f64| {
            httpd
                .iter()
                .find(|r| {
                    is(r, "server", server)
                        && is(r, "engine", eng)
                        && num(r, "conns") == Some(n as f64)
                        && num(r, "active_pct") == Some(pct)
                })
                .and_then(|r| r.metric_f64("server_cpu_us_per_rt"))
        };
        let mut ratios = Vec::new();
        let mut parts = Vec::new();
        for &pct in &pcts {
            let (Some(p), Some(e)) = (cpu("lighttpd", "poll", pct), cpu("lighttpd", "epoll", pct))
            else {
                continue;
            };
            let pick = |eng: &'static str| {
                move |r: &Record| {
                    is(r, "server", "lighttpd")
                        && is(r, "engine", eng)
                        && num(r, "conns") == Some(n as f64)
                        && num(r, "active_pct") == Some(pct)
                }
            };
            let rt = ratio_between(&httpd, pick("poll"), pick("epoll"), "server_cpu_us_per_rt")
                .unwrap_or_else(|| format!("{:.2}×", p / e));
            ratios.push((pct, p / e));
            let mut s =
                format!("{pct:.0}% active: poll {p:.1} µs vs epoll {e:.1} µs per request = {rt}");
            if let Some(x) = cpu("nginx", "epoll", pct) {
                s.push_str(&format!(", nginx {x:.1} µs"));
            }
            for eng in ["poll", "epoll-lt", "epoll-et", "io-uring"] {
                if let Some(x) = cpu("commbench", eng, pct) {
                    s.push_str(&format!(", ours {eng} {x:.1} µs"));
                }
            }
            parts.push(s);
        }
        if parts.is_empty() {
            continue;
        }
        let mut line = format!("lighttpd at {n} connections: {}", parts.join("; "));
        if ratios.len() >= 2 {
            let (hi_pct, hi) = ratios[0];
            let (lo_pct, lo) = ratios[ratios.len() - 1];
            line.push_str(&format!(
                ". From {hi_pct:.0}% to {lo_pct:.0}% active, poll's cost relative to epoll goes {hi:.2}× → {lo:.2}×: {}",
                if lo > hi * 1.1 && lo > 1.0 {
                    "yes, poll loses to epoll more as the active fraction falls (it scans every idle descriptor on every call)"
                } else if lo > 1.1 {
                    "poll costs more than epoll, but the gap does not grow as the active fraction falls"
                } else {
                    "no, poll does not lose to epoll here"
                }
            ));
        }
        out.push(line);
    }
    out
}

/// `commbench clean`: servers whose run died (their temp dir's owner is
/// gone) are killed; the dir itself is then removed by the artifact
/// cleanup. A pid is killed only if its command line names that dir.
pub fn clean_leftovers(dry_run: bool) -> Vec<commbench_core::lab::Leftover> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(p) = artifact::parse_name(&name) else {
            continue;
        };
        if p.lab != ARTIFACT || artifact::owner_alive(&p) {
            continue;
        }
        let Some(pid) = std::fs::read_to_string(e.path().join(PID_FILE))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let dir = e.path().to_string_lossy().into_owned();
        let ours = String::from_utf8_lossy(&cmdline).contains(&dir)
            || std::fs::read_link(format!("/proc/{pid}/cwd"))
                .map(|c| c == e.path())
                .unwrap_or(false);
        if !ours {
            continue;
        }
        let action = if dry_run {
            "would kill".to_owned()
        } else {
            // A signal to a process whose command line names our dir.
            match commbench_core::sys::kill(pid as libc::pid_t, libc::SIGKILL) {
                Ok(()) => "killed".to_owned(),
                Err(e) => format!("error: {e}"),
            }
        };
        out.push(commbench_core::lab::Leftover {
            kind: "server",
            name: format!("{dir} (pid {pid})"),
            pid: p.pid,
            action,
        });
    }
    let _ = std::io::stderr().flush();
    out
}

#[cfg(test)]
mod table_tests {
    use super::*;

    /// `mux httpd` printed intervals as "(10.26-13.02)" while every other
    /// command prints "[a, b]".
    #[test]
    fn httpd_table_prints_intervals_as_brackets_like_every_other_command() {
        let r = Record::new("mux", "httpd")
            .param("server", "lighttpd")
            .param("engine", "poll")
            .param("conns", 1000)
            .param("active_pct", 10.0)
            .metric("server_cpu_us_per_rt", 11.6)
            .metric("server_cpu_us_per_rt_lo", 10.26)
            .metric("server_cpu_us_per_rt_hi", 13.02)
            .metric("status", "ok");
        let t = table(&[r], &[], &[]);
        assert!(t.contains("11.60 [10.26, 13.02]"), "{t}");
        assert!(!t.contains("(10.26-13.02)"), "{t}");
        assert!(t.lines().next().unwrap().contains("[95% CI]"), "{t}");
    }
}
