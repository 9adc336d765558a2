//! The mux lab's commands: `commbench mux` (servers on each engine against
//! our load generator, side by side), `commbench mux --reproduce-seed`
//! (the article's grid and its verdict), `commbench mux serve` (a server,
//! also the process the harness starts) and `commbench mux load` (the load
//! side against a server on another host).
use crate::output::OutputArgs;
use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use commbench_core::placement::CpuList;
use commbench_core::Recorder;
use commbench_mux::token::TOKEN_ENV;
use commbench_mux::{seed, ClientsKind, EngineKind, Lookup, MuxConfig, Protocol, Token};
use std::net::SocketAddr;
use std::time::Duration;
mod segment;
mod tls;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MuxArgs {
    #[command(subcommand)]
    pub cmd: Option<MuxCmd>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Subcommand)]
pub enum MuxCmd {
    /// Run one echo server (for a load generator on another host, or the harness).
    Serve(ServeArgs),
    /// Drive a server started elsewhere with `commbench mux serve`.
    Load(Box<LoadArgs>),
    /// The seed's question asked of real HTTP servers: lighttpd with poll vs epoll (and nginx,
    /// and our engines) at many keep-alive connections, a fraction of them active; server CPU
    /// per request from /proc.
    Httpd(HttpdArgs),
}

#[derive(Debug, Args)]
pub struct HttpdArgs {
    /// Servers, comma-separated: lighttpd-poll, lighttpd-epoll, lighttpd-select, nginx,
    /// ours-poll, ours-epoll-lt, ours-epoll-et, ours-io-uring.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "lighttpd-poll,lighttpd-epoll,lighttpd-select,nginx,ours-poll,ours-epoll-lt"
    )]
    pub servers: Vec<String>,
    /// Keep-alive connections, comma-separated (each a set of points).
    #[arg(long, value_delimiter = ',', default_value = "1000", value_parser = crate::args::number_in(1usize, 200_000, "--conns must be 1..=200000 each"))]
    pub conns: Vec<usize>,
    /// Active connections in percent of --conns, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,10,1", value_parser = crate::args::positive_up_to(100.0, "--active-pct must be 0 < percent <= 100 each"))]
    pub active_pct: Vec<f64>,
    /// Requests measured per point, spread over the active connections.
    #[arg(long, default_value_t = 20000, value_parser = crate::args::number_in(1u64, 100_000_000, "--requests must be 1..=100000000"))]
    pub requests: u64,
    /// Unmeasured requests per active connection first.
    #[arg(long, default_value_t = 2)]
    pub warmup_rounds: u64,
    /// Response body bytes (a static file; our servers send the same bytes).
    #[arg(long, default_value = "13", value_parser = crate::args::parse_size)]
    pub body: usize,
    /// Measurements per point, interleaved (A B C A B C), 1..=100.
    #[arg(long, default_value_t = 3, value_parser = crate::args::number_in(1u32, 100, "--repeat must be 1..=100"))]
    pub repeat: u32,
    /// The CPU the server is pinned to (default: CPU 0 when there are two or more; `none`: not pinned).
    #[arg(long)]
    pub server_cpu: Option<String>,
    /// The load side's CPUs (taskset list; default: every other CPU).
    #[arg(long)]
    pub client_cpus: Option<String>,
    /// Load event loops (threads), 1..=64.
    #[arg(long, default_value_t = 1, value_parser = crate::args::number_in(1usize, 64, "--load-threads must be 1..=64"))]
    pub load_threads: usize,
    /// Open loop at this many requests/s per point (default: closed loop, one request in flight per active connection).
    #[arg(long, value_parser = crate::args::positive_up_to(commbench_mux::open::MAX_RATE, "--rate must be 0 < requests/s <= 1e8"))]
    pub rate: Option<f64>,
    /// Bound on each phase, seconds.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum EngineArg {
    Poll,
    EpollLt,
    EpollEt,
    IoUring,
    /// Every engine, interleaved.
    All,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum LookupArg {
    /// Linear search of the state array for the ready descriptor (the article's epoll server).
    Scan,
    /// The slot index carried by the event (epoll data, user_data, pollfd position).
    Index,
    /// Both, side by side.
    Both,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ProtocolArg {
    /// The client's bytes echoed as they are.
    Raw,
    /// sockperf's framing (14-byte header, pong requests), to drive or be driven by sockperf.
    Sockperf,
    /// HTTP/1.1 keep-alive requests (--path, --header, --body); servers answer a fixed response.
    Http1,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ArrivalsArg {
    /// Evenly spaced.
    Cbr,
    /// A Poisson process (exponential gaps).
    Poisson,
}

impl ProtocolArg {
    fn kind(self) -> Protocol {
        match self {
            ProtocolArg::Raw => Protocol::Raw,
            ProtocolArg::Sockperf => Protocol::Sockperf,
            ProtocolArg::Http1 => Protocol::Http1,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ClientsArg {
    /// Event loops (epoll), --load-threads of them.
    Loop,
    /// A thread per connection with blocking calls (the article's client).
    Threads,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Server engines, comma-separated, or all.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    pub engine: Vec<EngineArg>,
    /// How the server finds a ready descriptor's state.
    #[arg(long, value_enum, default_value = "index")]
    pub lookup: LookupArg,
    #[command(flatten)]
    pub load: LoadOpts,
    /// Server event loops (SO_REUSEPORT listeners on one port), 1..=64.
    #[arg(long, default_value_t = 1)]
    pub server_threads: usize,
    /// Run in a private network namespace the tool creates (root), with its own somaxconn and port range.
    #[arg(long)]
    pub netns: bool,
    /// Run the article's grid (N=10000; R=100,500,1000; K=1024; poll, epoll-lt, epoll-et; scan and index; then 1% active), each configuration --repeat times (default 3), and print a verdict with 95% intervals.
    #[arg(long)]
    pub reproduce_seed: bool,
    /// With --reproduce-seed: under a minute — N = 5000, R = 2, 10, 20 (the article's spacing) and only the three configurations the verdict compares.
    #[arg(long)]
    pub quick: bool,
    /// Calibration aid: the server busy-waits NS nanoseconds (TSC) for every read that carried data, before echoing — a known extra cost per round trip, to check that `commbench ab` finds a change of known size.
    #[arg(long, value_name = "NS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub extra_work_ns: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct LoadOpts {
    /// Connections, 1..=1000000 (one process holds them: RLIMIT_NOFILE is raised to its hard limit, and a run needing more says what to do; docs/mux.md, "Limits, handled").
    #[arg(long, default_value_t = 1000)]
    pub conns: usize,
    /// Closed-loop rounds (send, receive the echo) per active connection.
    #[arg(long, default_value_t = 100)]
    pub rounds: u64,
    /// Closed loop for a fixed time: each active connection does rounds until SECS after the rounds began (--rounds is then a cap: set it high). Two runs sharing a CPU then overlap for their whole measured window (`commbench ab --shared-cpu`).
    #[arg(long, value_name = "SECS", value_parser = crate::args::positive_up_to(86_400.0, "--rounds-for must be 0 < seconds <= 86400"))]
    pub rounds_for: Option<f64>,
    /// Unmeasured rounds first (every connection served once before timing), reported as omitted.
    #[arg(long, default_value_t = 0)]
    pub warmup_rounds: u64,
    /// Bytes per message (suffixes B, K/KiB, M/MiB, G/GiB), 1 B..=16 MiB.
    #[arg(long, default_value = "1024", value_parser = crate::args::parse_size)]
    pub size: usize,
    /// Connections doing rounds; the rest connect and stay idle (default: all).
    #[arg(long)]
    pub active: Option<usize>,
    /// How the load side drives its connections.
    #[arg(long, value_enum, default_value = "loop")]
    pub clients: ClientsArg,
    /// What travels on a connection.
    #[arg(long, value_enum, default_value = "raw")]
    pub protocol: ProtocolArg,
    /// Load event loops (threads), 1..=64.
    #[arg(long, default_value_t = 1)]
    pub load_threads: usize,
    /// Load worker processes, 1..=64: splits the connections (for more than one process's descriptors).
    #[arg(long, default_value_t = 1)]
    pub load_procs: usize,
    /// Runs per configuration, interleaved (A B C A B C), 1..=100 (default: 1; with --reproduce-seed 3, the fewest that give each ratio an interval).
    #[arg(long, value_parser = crate::args::number_in(1u32, 100, "--repeat must be 1..=100"))]
    pub repeat: Option<u32>,
    /// CPU placement per role, taskset syntax: `--cpus server=0 --cpus client=1`.
    #[arg(long, value_name = "ROLE=LIST")]
    pub cpus: Vec<String>,
    /// Bound on each phase of a run (connect, rounds), seconds.
    #[arg(long, default_value_t = 300.0)]
    pub timeout: f64,
    /// Connects in progress at once (lower it for servers with a tiny listen backlog, e.g. 8 for sockperf's 10).
    #[arg(long, default_value_t = 256)]
    pub connect_window: usize,
    /// Measure with fewer connections than asked when some fail (marked partial) instead of failing.
    #[arg(long)]
    pub allow_partial: bool,
    /// Open loop: total requests per second over the active connections, on an absolute
    /// schedule (latency counted from each request's intended send time). Replaces --rounds
    /// with --warmup and --duration.
    #[arg(long, help_heading = "Open loop")]
    pub rate: Option<f64>,
    /// How requests arrive under --rate.
    #[arg(long, value_enum, default_value = "cbr", help_heading = "Open loop")]
    pub arrivals: ArrivalsArg,
    /// Requests outstanding per connection at most (pipelining); 1 = one at a time.
    #[arg(long, default_value_t = 1, help_heading = "Open loop")]
    pub in_flight: usize,
    /// Seconds of unrecorded load before the measured window (with --rate).
    #[arg(long, default_value_t = 1.0, help_heading = "Open loop")]
    pub warmup: f64,
    /// Seconds of the measured window (with --rate).
    #[arg(long, default_value_t = 5.0, help_heading = "Open loop")]
    pub duration: f64,
    /// Bound on the schedule lag's p99 in µs; over it the run is marked generator-limited.
    #[arg(long, default_value_t = 1000.0, help_heading = "Open loop")]
    pub max_lag_us: f64,
    /// Step the rate (FROM:TO:STEP or a comma list of rates) and find the highest meeting --slo.
    #[arg(long, value_name = "FROM:TO:STEP", help_heading = "Open loop")]
    pub rate_sweep: Option<String>,
    /// The latency objective of --rate-sweep on the corrected latency, e.g. p99=2ms (p50, p90, p99, p99.9, p99.99; ns, us, ms, s).
    #[arg(long, default_value = "p99=2ms", help_heading = "Open loop")]
    pub slo: String,
    /// HTTP request path (--protocol http1).
    #[arg(long, default_value = "/", help_heading = "HTTP/1.1")]
    pub path: String,
    /// HTTP method (--protocol http1).
    #[arg(long, default_value = "GET", help_heading = "HTTP/1.1")]
    pub method: String,
    /// Host header (--protocol http1).
    #[arg(long, default_value = "localhost", help_heading = "HTTP/1.1")]
    pub host: String,
    /// Extra request header 'Name: value' (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE", help_heading = "HTTP/1.1")]
    pub headers: Vec<String>,
    /// Request body (sent with Content-Length).
    #[arg(long, help_heading = "HTTP/1.1")]
    pub body: Option<String>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Engine.
    #[arg(long, value_enum, default_value = "epoll-lt")]
    pub engine: EngineArg,
    /// Lookup.
    #[arg(long, value_enum, default_value = "index")]
    pub lookup: LookupArg,
    /// Echo address (IPv4). Loopback by default: give 0.0.0.0:PORT (or an
    /// interface's address) for a load generator on another host.
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub listen: SocketAddr,
    /// What travels on a connection.
    #[arg(long, value_enum, default_value = "raw")]
    pub protocol: ProtocolArg,
    /// Event loops (SO_REUSEPORT), 1..=64.
    #[arg(long, default_value_t = 1, value_parser = crate::args::number_in(1usize, 64, "--server-threads must be 1..=64"))]
    pub server_threads: usize,
    /// Bytes per read (and per io_uring connection buffer), 512 B..=1 MiB (suffixes K, M).
    #[arg(long, default_value = "64KiB", value_parser = crate::args::parse_size)]
    pub buf: usize,
    /// Connections expected (listen backlog, io_uring queue sizes).
    #[arg(long, default_value_t = 10000, value_parser = crate::args::number_in(1usize, commbench_mux::MAX_CONNS, "--max-conns must be 1..=1000000"))]
    pub max_conns: usize,
    /// Body bytes of the fixed response of --protocol http1 (suffixes K, M), 0..=16 MiB.
    #[arg(long, default_value = "13", value_parser = crate::args::parse_size)]
    pub response_size: usize,
    /// Calibration aid: the server busy-waits NS nanoseconds (TSC) for every read that carried data, before echoing — a known extra cost per round trip, to check that `commbench ab` finds a change of known size.
    #[arg(long, value_name = "NS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub extra_work_ns: u64,
    /// Control channel: `stdio`, or ADDR:PORT for TCP (default: the echo address, port + 1).
    /// Over TCP every connection must present the run's token.
    #[arg(long)]
    pub control: Option<String>,
    /// Write the control token to this file (mode 0600) for `mux load
    /// --control-token-file`; without it the token is printed on stderr. The
    /// token is random per run, or taken from COMMBENCH_MUX_TOKEN.
    #[arg(long, value_name = "PATH")]
    pub control_token_file: Option<std::path::PathBuf>,
    /// Pin the loop threads (taskset syntax).
    #[arg(long)]
    pub cpus: Option<String>,
    #[command(flatten)]
    pub tls: tls::TlsServeArgs,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The server's echo address.
    #[arg(long)]
    pub target: SocketAddr,
    /// The server's control address (default: the echo port + 1); `none`: server CPU unknown.
    #[arg(long)]
    pub control: Option<String>,
    /// File holding the server's control token (as `mux serve
    /// --control-token-file` wrote it; must be readable by this user only).
    /// Or set COMMBENCH_MUX_TOKEN.
    #[arg(long, value_name = "PATH")]
    pub control_token_file: Option<std::path::PathBuf>,
    /// The server's control token, 32 hex digits (visible to other users in
    /// the process list: prefer --control-token-file or COMMBENCH_MUX_TOKEN).
    #[arg(long, value_name = "HEX")]
    pub control_token: Option<String>,
    #[command(flatten)]
    pub load: LoadOpts,
    #[command(flatten)]
    pub segment: segment::SegmentArgs,
    #[command(flatten)]
    pub tls: tls::TlsLoadArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    /// Internal: one worker process of a --load-procs run.
    #[arg(long, hide = true)]
    pub worker: bool,
    /// Internal (--worker with --rate): the index of this worker's first
    /// active connection among all workers'.
    #[arg(long, hide = true, requires = "worker_active_total")]
    pub worker_first_conn: Option<usize>,
    /// Internal (--worker with --rate): active connections over all workers.
    #[arg(long, hide = true, requires = "worker_first_conn")]
    pub worker_active_total: Option<usize>,
}

fn engines(list: &[EngineArg]) -> Vec<EngineKind> {
    let mut out = Vec::new();
    for e in list {
        let add: &[EngineKind] = match e {
            EngineArg::Poll => &[EngineKind::Poll],
            EngineArg::EpollLt => &[EngineKind::EpollLt],
            EngineArg::EpollEt => &[EngineKind::EpollEt],
            EngineArg::IoUring => &[EngineKind::IoUring],
            EngineArg::All => &EngineKind::ALL,
        };
        for k in add {
            if !out.contains(k) {
                out.push(*k);
            }
        }
    }
    out
}

fn lookups(l: LookupArg) -> Vec<Lookup> {
    match l {
        LookupArg::Scan => vec![Lookup::Scan],
        LookupArg::Index => vec![Lookup::Index],
        LookupArg::Both => vec![Lookup::Scan, Lookup::Index],
    }
}

fn base_config(o: &LoadOpts) -> Result<MuxConfig> {
    let (server_cpus, client_cpus) = crate::args::placement(&o.cpus)?;
    let timeout = secs("--timeout", o.timeout, false)?;
    Ok(MuxConfig {
        conns: o.conns,
        active: o.active,
        rounds: o.rounds,
        rounds_for: o.rounds_for.map(Duration::from_secs_f64),
        warmup_rounds: o.warmup_rounds,
        size: o.size,
        protocol: o.protocol.kind(),
        clients: match o.clients {
            ClientsArg::Loop => ClientsKind::Loop,
            ClientsArg::Threads => ClientsKind::Threads,
        },
        load_threads: o.load_threads,
        load_procs: o.load_procs,
        repeat: o.repeat.unwrap_or(1),
        server_cpus,
        client_cpus,
        timeout,
        allow_partial: o.allow_partial,
        connect_window: o.connect_window,
        open: open_config(o)?,
        http: http_request(o)?,
        ..MuxConfig::default()
    })
}

fn secs(what: &str, v: f64, allow_zero: bool) -> Result<Duration> {
    if !(v.is_finite() && (v > 0.0 || (allow_zero && v == 0.0)) && v <= 86_400.0) {
        return Err(crate::usage(format!(
            "{what} must be {} seconds <= 86400, got {v}",
            if allow_zero { "0 <=" } else { "0 <" }
        )));
    }
    Ok(Duration::from_secs_f64(v))
}

fn open_config(o: &LoadOpts) -> Result<commbench_mux::open::OpenConfig> {
    if !(o.max_lag_us.is_finite() && o.max_lag_us > 0.0 && o.max_lag_us <= 60e6) {
        return Err(crate::usage(format!(
            "--max-lag-us must be 0 < µs <= 60000000, got {}",
            o.max_lag_us
        )));
    }
    Ok(commbench_mux::open::OpenConfig {
        rate: o.rate,
        arrivals: match o.arrivals {
            ArrivalsArg::Cbr => commbench_mux::open::Arrivals::Cbr,
            ArrivalsArg::Poisson => commbench_mux::open::Arrivals::Poisson,
        },
        in_flight: o.in_flight,
        warmup: secs("--warmup", o.warmup, true)?,
        duration: secs("--duration", o.duration, false)?,
        max_lag: Duration::from_secs_f64(o.max_lag_us / 1e6),
        ..commbench_mux::open::OpenConfig::closed(o.in_flight)
    })
}

fn http_request(o: &LoadOpts) -> Result<commbench_mux::http1::HttpRequest> {
    use commbench_mux::http1;
    let u = |e: http1::RequestArgError| crate::usage_err(e);
    http1::check_token("--method", &o.method).map_err(u)?;
    http1::check_token("--host", &o.host).map_err(u)?;
    http1::check_token("--path", &o.path).map_err(u)?;
    if !o.path.starts_with('/') {
        return Err(crate::usage(format!(
            "--path {:?} must start with /",
            o.path
        )));
    }
    let headers = o
        .headers
        .iter()
        .map(|h| http1::parse_header(h))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(u)?;
    Ok(http1::HttpRequest {
        method: o.method.clone(),
        path: o.path.clone(),
        host: o.host.clone(),
        headers,
        body: o.body.clone().unwrap_or_default().into_bytes(),
        ..Default::default()
    })
}

/// Writes a run's records (the summary table on a terminal) and keeps
/// them in the results store; a run that failed keeps what it measured
/// before the failure in the store, then reports the error.
fn emit(out: &OutputArgs, report: Result<commbench_mux::MuxReport>, rec: &Recorder) -> Result<()> {
    let report = match report {
        Ok(r) => r,
        Err(e) => return Err(kept(rec, e)),
    };
    out.emit_or_show(rec.records(), || commbench_mux::summary_table(&report))
}

/// Keeps what a failed run measured in the results store, then hands on
/// its error.
fn kept(rec: &Recorder, e: anyhow::Error) -> anyhow::Error {
    let env = commbench_core::env::Fingerprint::collect().to_value();
    crate::store::keep(rec.records(), &env);
    e
}

/// The server process a local run starts (its stderr is the parent's).
pub fn is_harness_child(a: &MuxArgs) -> bool {
    match &a.cmd {
        Some(MuxCmd::Serve(s)) => s.control.as_deref() == Some("stdio"),
        Some(MuxCmd::Load(l)) => l.worker,
        Some(MuxCmd::Httpd(_)) | None => false,
    }
}

pub fn run(a: &MuxArgs) -> Result<()> {
    match &a.cmd {
        Some(MuxCmd::Serve(s)) => return serve(s),
        Some(MuxCmd::Load(l)) => return load(l),
        Some(MuxCmd::Httpd(h)) => return httpd(h),
        None => {}
    }
    let r = &a.run;
    let mut cfg = base_config(&r.load)?;
    cfg.engines = engines(&r.engine);
    cfg.lookups = lookups(r.lookup);
    cfg.server_threads = r.server_threads;
    cfg.netns = r.netns;
    cfg.extra_work_ns = r.extra_work_ns;
    let mut rec = crate::progress::recorder();
    if r.reproduce_seed {
        let plan = seed::SeedPlan::new(r.quick, r.load.repeat);
        // A minute with --quick, an hour without: where it is and how
        // long the rest takes, on a terminal or not.
        let started = std::time::Instant::now();
        let mut on_step = |p: seed::SeedProgress<'_>| {
            eprintln!(
                "{}",
                seed::progress_line(p, started.elapsed().as_secs_f64())
            );
        };
        let points = seed::run(&cfg, &plan, &mut rec, &mut on_step).map_err(crate::lab_err);
        crate::progress::finish();
        let points = match points {
            Ok(p) => p,
            Err(e) => return Err(kept(&rec, e)),
        };
        let lines = seed::verdict(&points, plan.conns);
        rec.push(seed::verdict_record(&lines, &plan));
        return r.output.emit_or_show(rec.records(), || {
            let mut text = String::new();
            for p in &points {
                text.push_str(&format!(
                    "N={} R={} K={} active={}\n",
                    p.conns, p.rounds, plan.size, p.active
                ));
                let rep = commbench_mux::MuxReport {
                    results: p.results.clone(),
                    skipped: Vec::new(),
                    load_start: f64::NAN,
                    load_end: f64::NAN,
                };
                text.push_str(&format!("{}\n", commbench_mux::summary_table(&rep)));
            }
            for l in &lines {
                text.push_str(&format!("{l}\n"));
            }
            text
        });
    }
    run_or_sweep(&cfg, &r.load, &r.output, &mut rec)
}

/// One run, or with --rate-sweep the sweep; writes the records.
fn run_or_sweep(cfg: &MuxConfig, o: &LoadOpts, out: &OutputArgs, rec: &mut Recorder) -> Result<()> {
    let Some(spec) = &o.rate_sweep else {
        let report = commbench_mux::run(cfg, rec).map_err(crate::lab_err);
        crate::progress::finish();
        return emit(out, report, rec);
    };
    if o.rate.is_some() {
        return Err(crate::usage("give --rate or --rate-sweep, not both"));
    }
    let rates = commbench_mux::sweep::parse_rates(spec).map_err(crate::usage_err)?;
    let slo = commbench_mux::sweep::Slo::parse(&o.slo).map_err(crate::usage_err)?;
    let mut probe = cfg.clone();
    probe.open.rate = rates.last().copied();
    probe.validate().map_err(crate::lab_err)?;
    let res = commbench_mux::sweep::run(cfg, &rates, &slo, rec).map_err(crate::lab_err);
    crate::progress::finish();
    let (reports, lines) = match res {
        Ok(x) => x,
        Err(e) => return Err(kept(rec, e)),
    };
    out.emit_or_show(rec.records(), || {
        let mut text = String::new();
        for r in &reports {
            text.push_str(&commbench_mux::summary_table(r));
            text.push('\n');
        }
        text.push_str(&commbench_mux::sweep::summary(&lines, &slo));
        text
    })
}

fn serve_config(s: &ServeArgs) -> Result<commbench_mux::ServeConfig> {
    let engine = match s.engine {
        EngineArg::All => {
            return Err(crate::usage(
                "mux serve runs one engine: give poll, epoll-lt, epoll-et or io-uring",
            ))
        }
        e => engines(&[e])[0],
    };
    let lookup = match s.lookup {
        LookupArg::Both => return Err(crate::usage("mux serve runs one lookup: scan or index")),
        l => lookups(l)[0],
    };
    if !(512..=1 << 20).contains(&s.buf) {
        return Err(crate::usage(format!(
            "--buf must be 512 B..=1 MiB (512..=1048576), got {} B",
            s.buf
        )));
    }
    if s.response_size > commbench_mux::http1::MAX_RESPONSE_BODY {
        return Err(crate::usage(format!(
            "--response-size must be 0 B..=16 MiB, got {} B",
            s.response_size
        )));
    }
    commbench_mux::http1::set_response_body(s.response_size);
    let cpus = match &s.cpus {
        Some(c) => Some(CpuList::parse(c).map_err(|e| crate::usage(format!("--cpus {c}: {e}")))?),
        None => None,
    };
    Ok(commbench_mux::ServeConfig {
        engine,
        lookup,
        protocol: s.protocol.kind(),
        listen: s.listen,
        threads: s.server_threads,
        buf_size: s.buf,
        max_conns: s.max_conns,
        cpus,
        extra_work_ns: s.extra_work_ns,
        tls: tls::server(&s.tls, s.listen)?,
    })
}

fn serve(s: &ServeArgs) -> Result<()> {
    let cfg = serve_config(s)?;
    match s.control.as_deref() {
        Some("stdio") => commbench_mux::server::serve_stdio(&cfg).map_err(crate::lab_err),
        other => {
            let control: SocketAddr = match other {
                Some(a) => a.parse().map_err(|_| {
                    crate::usage(format!("--control {a}: expected stdio or ADDR:PORT"))
                })?,
                None => {
                    let mut c = s.listen;
                    c.set_port(s.listen.port().checked_add(1).ok_or_else(|| {
                        crate::usage("the echo port is 65535: give --control ADDR:PORT")
                    })?);
                    c
                }
            };
            let token = serve_token(s)?;
            let stop = commbench_core::sys::stop_on_signal();
            let server = commbench_mux::server::serve_tcp(&cfg, control, &token, stop)
                .map_err(crate::lab_err)?;
            let st = server.stop().map_err(crate::lab_err)?;
            eprintln!(
                "commbench mux serve: stopped after {} connections, {} bytes echoed, user {:.3} s, sys {:.3} s",
                st.loops.accepted, st.loops.bytes, st.user_s, st.sys_s
            );
            Ok(())
        }
    }
}

/// The control token `mux serve` wants: COMMBENCH_MUX_TOKEN or a fresh
/// one, handed out through --control-token-file (mode 0600) or stderr.
fn serve_token(s: &ServeArgs) -> Result<Token> {
    let token = match std::env::var(TOKEN_ENV) {
        Ok(v) => Token::parse_or_usage(&v, TOKEN_ENV).map_err(crate::lab_err)?,
        Err(_) => Token::random().map_err(crate::lab_err)?,
    };
    match &s.control_token_file {
        Some(p) => {
            token.write_file(p).map_err(crate::lab_err)?;
            eprintln!(
                "commbench mux serve: control token in {} (mux load --control-token-file {})",
                p.display(),
                p.display()
            );
        }
        None if std::env::var_os(TOKEN_ENV).is_some() => {
            eprintln!("commbench mux serve: control token from {TOKEN_ENV}");
        }
        None => eprintln!(
            "commbench mux serve: control token {} (give it to mux load in {TOKEN_ENV}, or use --control-token-file PATH to keep it off the terminal)",
            token.hex()
        ),
    }
    Ok(token)
}

/// The token `mux load` presents: --control-token, --control-token-file
/// or COMMBENCH_MUX_TOKEN (None: none given).
fn load_token(l: &LoadArgs) -> Result<Option<Token>> {
    if let Some(t) = &l.control_token {
        return Token::parse_or_usage(t, "--control-token")
            .map(Some)
            .map_err(crate::lab_err);
    }
    if let Some(p) = &l.control_token_file {
        return Token::from_file(p).map(Some).map_err(crate::lab_err);
    }
    match std::env::var(TOKEN_ENV) {
        Ok(v) => Token::parse_or_usage(&v, TOKEN_ENV)
            .map(Some)
            .map_err(crate::lab_err),
        Err(_) => Ok(None),
    }
}

fn load(l: &LoadArgs) -> Result<()> {
    let mut cfg = base_config(&l.load)?;
    tls::apply_load(&l.tls, &mut cfg)?;
    if l.worker {
        if let (Some(first_conn), Some(active_total)) = (l.worker_first_conn, l.worker_active_total)
        {
            if first_conn + cfg.active() > active_total {
                return Err(crate::usage(format!(
                    "--worker-first-conn {first_conn} with {} active connections is past --worker-active-total {active_total}",
                    cfg.active()
                )));
            }
            cfg.open.split = Some(commbench_mux::open::Split {
                first_conn,
                active_total,
            });
        }
        return worker(&cfg, l.target);
    }
    use commbench_mux::remote::{self, ControlChoice};
    let choice = match l.control.as_deref() {
        Some("none") => ControlChoice::None,
        Some(a) => ControlChoice::Given(
            a.parse::<SocketAddr>()
                .map_err(|_| crate::usage(format!("--control {a}: expected ADDR:PORT or none")))?,
        ),
        None => {
            let mut c = l.target;
            c.set_port(
                l.target.port().checked_add(1).ok_or_else(|| {
                    crate::usage("the echo port is 65535: give --control ADDR:PORT")
                })?,
            );
            ControlChoice::Default(c)
        }
    };
    let token = match choice {
        ControlChoice::None => None,
        _ => load_token(l)?,
    };
    let r = remote::resolve(l.target, choice, token).map_err(crate::lab_err)?;
    if let (Some(why), false) = (&r.unknown, choice == ControlChoice::None) {
        eprintln!("commbench mux load: {why}: going on with server CPU unknown");
    }
    cfg.remote = Some(r);
    let mut rec = crate::progress::recorder();
    if segment::apply(&mut cfg, &l.segment, l.load.rate_sweep.is_some())? {
        return segment::run(&cfg, &l.segment, &l.output, &mut rec);
    }
    run_or_sweep(&cfg, &l.load, &l.output, &mut rec)
}

/// One worker process of a --load-procs run (stdin/stdout speak to the parent).
fn worker(cfg: &MuxConfig, target: SocketAddr) -> Result<()> {
    let lcfg = cfg.load_config(target).map_err(crate::lab_err)?;
    commbench_mux::procs::worker_main(&lcfg, cfg.warmup_rounds).map_err(crate::lab_err)
}

fn httpd(h: &HttpdArgs) -> Result<()> {
    use commbench_mux::httpd::{self, HttpdConfig, ServerKind};
    let mut servers = Vec::new();
    for s in &h.servers {
        let k = ServerKind::parse(s.trim()).ok_or_else(|| {
            crate::usage(format!(
                "--servers: unknown server {s:?}; known: {}",
                ServerKind::all()
                    .iter()
                    .map(|x| x.0)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if !servers.contains(&k) {
            servers.push(k);
        }
    }
    let timeout = secs("--timeout", h.timeout, false)?;
    let online = commbench_core::placement::online();
    let server_cpu = match h.server_cpu.as_deref() {
        Some("none") => None,
        Some(c) => Some(c.parse::<usize>().map_err(|_| {
            crate::usage(format!("--server-cpu {c}: expected a CPU number or none"))
        })?),
        None if online.cpus().len() >= 2 => online.cpus().first().copied(),
        None => None,
    };
    let client_cpus = match &h.client_cpus {
        Some(c) => {
            Some(CpuList::parse(c).map_err(|e| crate::usage(format!("--client-cpus {c}: {e}")))?)
        }
        None => server_cpu.and_then(|s| {
            let rest: Vec<usize> = online.cpus().iter().copied().filter(|&c| c != s).collect();
            (!rest.is_empty()).then(|| CpuList::from_cpus(rest))
        }),
    };
    let cfg = HttpdConfig {
        servers,
        conns: h.conns.clone(),
        active_pct: h.active_pct.clone(),
        requests: h.requests,
        warmup_rounds: h.warmup_rounds,
        body: h.body,
        repeat: h.repeat,
        server_cpu,
        client_cpus,
        load_threads: h.load_threads,
        timeout,
        rate: h.rate,
        exe: None,
    };
    commbench_core::artifact::install_signal_cleanup();
    let mut rec = crate::progress::recorder();
    let res = httpd::run(&cfg, &mut rec).map_err(crate::lab_err);
    crate::progress::finish();
    let report = match res {
        Ok(r) => r,
        Err(e) => return Err(kept(&rec, e)),
    };
    let lines = httpd::verdict(rec.records());
    if !lines.is_empty() || !report.skipped.is_empty() {
        rec.push(
            commbench_core::Record::new("mux", "httpd-verdict")
                .metric("verdict", lines.join("\n"))
                .metric(
                    "skipped",
                    report
                        .skipped
                        .iter()
                        .map(|(k, why)| format!("{k}: {why}"))
                        .collect::<Vec<_>>(),
                ),
        );
    }
    h.output.emit_or_show(rec.records(), || {
        httpd::table(rec.records(), &report.skipped, &lines)
    })
}
