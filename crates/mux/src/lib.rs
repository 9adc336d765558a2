//! commbench lab 2 — mux: many-connection echo servers on poll, epoll
//! (level- and edge-triggered) and io_uring, and the per-descriptor state
//! lookup that decides which wins (seed: poll-epoll-c10k.ja.txt, whose
//! epoll server found each ready descriptor's state by a linear scan and
//! lost to poll as the rounds grew).
//!
//! The library is what the CLI and the tests call: build a [`MuxConfig`],
//! call [`run`], get a [`MuxReport`] and one [`Record`] per configuration
//! in the [`Recorder`]. Each configuration runs against a fresh server
//! process (`commbench mux serve`, re-executed), so the server's CPU time is
//! its own and nothing of one engine's state leaks into the next;
//! configurations are interleaved across repeats (A B C A B C).
//!
//! Module map: [`engine`] (the trait and the poll/epoll/io_uring loops),
//! [`server`] (the server process and its control channel), [`load`] (the
//! load generator), [`harness`] (one measured run, aggregation, records),
//! [`limits`] (descriptors, ports, private namespace), [`token`] (the
//! control channel's secret), [`remote`] (which control channel `mux
//! load` uses, probed), [`seed`] (the
//! article's grid and its verdict), [`open`] (open-loop load: the absolute
//! schedule, corrected and raw latency, schedule lag; also the windowed
//! closed loop), [`sweep`] (`--rate-sweep` against a latency objective),
//! [`http1`] (the HTTP/1.1 request, response reader and fixed-response
//! server filter), [`httpd`] (lighttpd, nginx and our engines as HTTP
//! servers under the same load), [`segment`] (one share of a run split
//! over hosts, its segment file, and `commbench merge`), [`tls`] (HTTPS
//! with rustls on both sides: client and server configs, certificates,
//! what a run's handshakes did), `net` (socket calls).

mod child;
pub mod engine;
pub mod error;
pub mod harness;
pub mod http1;
pub mod httpd;
pub mod lab;
pub mod limits;
pub mod load;
mod net;
pub mod open;
pub mod procs;
pub mod protocol;
pub mod remote;
pub mod seed;
pub mod segment;
pub mod server;
pub mod sweep;
pub mod tls;
pub mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use commbench_core::placement::CpuList;

pub use engine::{EngineKind, Lookup};
pub use error::{MuxError, PartialConnect, Result};
pub use harness::{run, summary_table, MuxReport};
pub use lab::MuxLab;
pub use load::ClientsKind;
pub use protocol::Protocol;
pub use server::{ServeConfig, ServerStats};
pub use token::Token;

/// Whether every connection of a record did rounds (the seed's figures);
/// a record without `active` (hand-made, older) had every one active.
fn all_active(r: &commbench_core::Record) -> bool {
    r.params
        .get("active")
        .is_none_or(|a| Some(a) == r.params.get("conns"))
}

/// The figures this lab declares for the report: the seed's figures 6–8
/// (server CPU per round trip over rounds, per engine and lookup) and the
/// round-trip rate over rounds.
pub fn figures() -> Vec<commbench_core::figure::FigureSpec> {
    use commbench_core::figure::{FigureKind, FigureSpec};
    vec![
        FigureSpec {
            kind: FigureKind::Line,
            lab: "mux",
            test: "echo",
            title: "mux: server CPU per round trip vs active connections",
            caption: "What idle connections cost each engine: poll pays for every descriptor on every call, epoll and io_uring only for the ready ones. Lower is better.",
            x: "active",
            y: "server_cpu_us_per_rt",
            series: &["engine", "lookup", "conns"],
            filter: None,
            x_label: "active connections",
            y_label: "",
            reference: None,
            more_x: "for a in 10 100 1000; do commbench mux --engine all --conns 1000 --active $a --format jsonl -o active-$a.jsonl; done; cat active-*.jsonl > active.jsonl; commbench report active.jsonl",
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "mux",
            test: "echo",
            title: "mux: server CPU per round trip by engine (µs)",
            caption: "Who wins at this connection count, and what the per-descriptor lookup costs: one bar per lookup (scan = the seed's linear search, index = the slot the event carries). Lower is better.",
            x: "engine",
            y: "server_cpu_us_per_rt",
            series: &["lookup", "conns", "active"],
            filter: None,
            x_label: "engine",
            y_label: "",
            reference: None,
            more_x: "",
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "mux",
            test: "echo",
            title: "mux: server CPU per round trip vs rounds",
            caption: "Does the epoll server that scans its state array lose to poll as the rounds grow, and does indexing fix it? Lower is better; every connection active.",
            x: "rounds",
            y: "server_cpu_us_per_rt",
            series: &["engine", "lookup", "conns"],
            filter: Some(all_active),
            x_label: "rounds per connection",
            y_label: "",
            reference: None,
            more_x: "commbench mux --reproduce-seed --quick --format jsonl -o seed.jsonl; commbench report seed.jsonl",
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "mux",
            test: "echo",
            title: "mux: round trips per second vs rounds",
            caption: "Wall-clock rate (moves with the machine's load; the CPU figure above does not).",
            x: "rounds",
            y: "rt_per_s",
            series: &["engine", "lookup", "conns"],
            filter: Some(all_active),
            x_label: "rounds per connection",
            y_label: "",
            reference: None,
            more_x: "commbench mux --reproduce-seed --quick --format jsonl -o seed.jsonl; commbench report seed.jsonl",
        },
        FigureSpec {
            kind: FigureKind::Line,
            lab: "mux",
            test: "open",
            title: "mux: corrected p99 latency vs offered rate (the hockey stick)",
            caption: "Open-loop load: each point a rate step of --rate-sweep (or a --rate run); latency counted from each request's intended send time, so a server that falls behind shows at once. Lower is better; where the line turns up is the highest usable rate.",
            x: "rate",
            y: "corrected_p99_ns",
            series: &["engine", "lookup", "conns", "protocol"],
            filter: None,
            x_label: "offered rate (requests/s)",
            y_label: "",
            reference: None,
            more_x: "commbench mux --engine poll,epoll-lt --protocol http1 --active 100 --rate-sweep 1000:16000:1000 --slo p99=2ms",
        },
    ]
}

/// The subcommand (after the executable) that starts a server process.
pub const SERVE_SUBCOMMAND: [&str; 2] = ["mux", "serve"];

/// Largest message size accepted.
pub const MAX_SIZE: usize = 16 << 20;
/// Most connections one run may ask for.
pub const MAX_CONNS: usize = 1_000_000;

/// One mux invocation: every engine × lookup, interleaved over repeats.
#[derive(Debug, Clone)]
pub struct MuxConfig {
    pub engines: Vec<EngineKind>,
    pub lookups: Vec<Lookup>,
    pub conns: usize,
    /// Connections doing rounds (the rest connect and stay idle); None = all.
    pub active: Option<usize>,
    pub rounds: u64,
    /// Closed loop for a fixed time (`--rounds-for`): each active
    /// connection does rounds until this long after the rounds began (at
    /// most `rounds`), so two runs sharing a CPU overlap for their whole
    /// measured window (`commbench ab --shared-cpu`). None: `rounds` each.
    pub rounds_for: Option<Duration>,
    /// Unmeasured rounds on every active connection before the measured
    /// ones (reported as omitted, like iperf3's --omit).
    pub warmup_rounds: u64,
    pub size: usize,
    /// raw echo or sockperf's framing.
    pub protocol: Protocol,
    pub clients: ClientsKind,
    pub server_threads: usize,
    pub load_threads: usize,
    /// Load worker processes (1: the load runs in this process).
    pub load_procs: usize,
    pub repeat: u32,
    pub server_cpus: Option<CpuList>,
    pub client_cpus: Option<CpuList>,
    /// Bound on each phase of each run (connect, rounds, close).
    pub timeout: Duration,
    /// Connects in progress at once.
    pub connect_window: usize,
    /// Report a run with fewer connections than asked instead of failing.
    pub allow_partial: bool,
    /// Run in a private network namespace (root).
    pub netns: bool,
    /// A server already running elsewhere (`mux load --target`): its echo
    /// address and control address. None: start one per configuration.
    pub remote: Option<Remote>,
    /// Executable to start as the server (default: this one).
    pub server_exe: Option<PathBuf>,
    /// Open-loop load (`--rate`, `--arrivals`, `--in-flight`, phases).
    pub open: open::OpenConfig,
    /// The request `--protocol http1` sends.
    pub http: http1::HttpRequest,
    /// Calibration aid: the server started for each configuration
    /// busy-waits this many ns per read that carried data
    /// (`ServeConfig::extra_work_ns`).
    pub extra_work_ns: u64,
    /// This run is one segment of a run split over processes or hosts
    /// (`mux load --segment I/N --start-at MS`); `conns`, `active` and the
    /// rate above are already its share ([`segment::apply`]).
    pub segment: Option<segment::SegmentSpec>,
    /// HTTPS (`mux load --tls`): the load process's shared client config
    /// (one session cache for every connection).
    pub tls: Option<std::sync::Arc<tls::ClientTls>>,
}

/// A server started by someone else (`commbench mux serve` on another host).
#[derive(Debug, Clone)]
pub struct Remote {
    pub target: SocketAddr,
    /// Its control address; None: server CPU is reported as unknown.
    pub control: Option<SocketAddr>,
    /// The token its control channel wants (`mux serve` made it).
    pub token: Option<token::Token>,
    /// Without a control channel: why the server's CPU is unknown
    /// (`--control none`, nothing answers on the control port, ...).
    pub unknown: Option<String>,
}

impl Default for MuxConfig {
    fn default() -> Self {
        MuxConfig {
            engines: vec![EngineKind::EpollLt],
            lookups: vec![Lookup::Index],
            conns: 1000,
            active: None,
            rounds: 100,
            rounds_for: None,
            warmup_rounds: 0,
            size: 1024,
            protocol: Protocol::Raw,
            clients: ClientsKind::Loop,
            server_threads: 1,
            load_threads: 1,
            load_procs: 1,
            repeat: 1,
            server_cpus: None,
            client_cpus: None,
            timeout: Duration::from_secs(300),
            connect_window: load::CONNECT_WINDOW,
            allow_partial: false,
            netns: false,
            remote: None,
            server_exe: None,
            open: open::OpenConfig::closed(1),
            http: http1::HttpRequest::default(),
            extra_work_ns: 0,
            segment: None,
            tls: None,
        }
    }
}

impl MuxConfig {
    /// A remote server without a control channel (`mux load --control
    /// none`): its engine and lookup are unknown, and nothing may name
    /// them.
    pub fn server_unknown(&self) -> bool {
        self.remote.as_ref().is_some_and(|r| r.control.is_none())
    }

    /// Connections doing rounds.
    pub fn active(&self) -> usize {
        self.active.unwrap_or(self.conns).min(self.conns)
    }

    /// The load side's settings against `target`.
    pub fn load_config(&self, target: SocketAddr) -> Result<load::LoadConfig> {
        Ok(load::LoadConfig {
            target,
            conns: self.conns,
            active: self.active(),
            rounds: self.rounds,
            rounds_for: self.rounds_for,
            size: self.size,
            protocol: self.protocol,
            clients: self.clients,
            load_threads: self.load_threads,
            sources: limits::sources_for(self.conns, target)?,
            timeout: self.timeout,
            cpus: self.client_cpus.clone(),
            connect_window: self.connect_window,
            open: self.open.clone(),
            http: self.http.clone(),
            tls: self.tls.clone(),
        })
    }

    /// Checks what can be checked before anything starts (usage errors).
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(MuxError::usage(m));
        if self.engines.is_empty() || self.lookups.is_empty() {
            return bad("give at least one engine and one lookup".into());
        }
        if self.conns == 0 || self.conns > MAX_CONNS {
            return bad(format!(
                "--conns must be 1..={MAX_CONNS}, got {}",
                self.conns
            ));
        }
        if let Some(a) = self.active {
            if a == 0 || a > self.conns {
                return bad(format!(
                    "--active must be 1..=--conns ({}), got {a}",
                    self.conns
                ));
            }
        }
        if self.warmup_rounds > 1_000_000_000 {
            return bad(format!(
                "--warmup-rounds must be 0..=1000000000, got {}",
                self.warmup_rounds
            ));
        }
        if self.rounds == 0 || self.rounds > 1_000_000_000 {
            return bad(format!(
                "--rounds must be 1..=1000000000, got {}",
                self.rounds
            ));
        }
        if let Some(d) = self.rounds_for {
            if d.is_zero() || d > Duration::from_secs(86_400) {
                return bad(format!(
                    "--rounds-for must be 0 < seconds <= 86400, got {}",
                    d.as_secs_f64()
                ));
            }
            let open_loop = self.open.rate.is_some()
                || self.open.in_flight > 1
                || self.protocol == Protocol::Http1;
            if self.clients != ClientsKind::Loop || self.load_procs != 1 || open_loop {
                return bad("--rounds-for runs on the closed-loop event-loop client in one process: use it with --clients loop, --load-procs 1, no --rate or --in-flight, --protocol raw or sockperf".into());
            }
        }
        if self.size == 0 || self.size > MAX_SIZE {
            return bad(format!("--size must be 1 B..=16 MiB, got {} B", self.size));
        }
        if self.protocol == Protocol::Sockperf && self.size < protocol::HEADER {
            return bad(format!(
                "--protocol sockperf needs --size of at least 14 B (its header), got {} B",
                self.size
            ));
        }
        if !(1..=64).contains(&self.server_threads) || !(1..=64).contains(&self.load_threads) {
            return bad("--server-threads and --load-threads must be 1..=64".into());
        }
        if !(1..=64).contains(&self.load_procs) || self.load_procs > self.active() {
            return bad(format!(
                "--load-procs must be 1..=64 and at most the active connections ({}), got {}",
                self.active(),
                self.load_procs
            ));
        }
        if !(1..=100).contains(&self.repeat) {
            return bad(format!("--repeat must be 1..=100, got {}", self.repeat));
        }
        if !(1..=65535).contains(&self.connect_window) {
            return bad(format!(
                "--connect-window must be 1..=65535, got {}",
                self.connect_window
            ));
        }
        self.open
            .validate(self.active())
            .map_err(|e| MuxError::Usage(commbench_core::error::Usage::new(e)))?;
        let open_loop =
            self.open.rate.is_some() || self.open.in_flight > 1 || self.protocol == Protocol::Http1;
        if open_loop && self.clients == ClientsKind::Threads {
            return bad("--rate, --in-flight and --protocol http1 run on the event-loop client: use --clients loop".into());
        }
        if self.tls.is_some() && self.protocol != Protocol::Http1 {
            return bad("--tls needs --protocol http1".into());
        }
        if self.timeout.is_zero() {
            return bad("--timeout must be positive".into());
        }
        if self.clients == ClientsKind::Threads && self.active() > 32_000 {
            return bad(format!(
                "--clients threads starts one thread per active connection; {} is more than the 32000 allowed: use --clients loop",
                self.active()
            ));
        }
        // Memory the run would need: the io_uring server keeps a buffer per
        // connection, the load side a pattern and a read buffer per thread.
        let per_conn = harness::buf_size(self.size, self.conns) as u64;
        if self.engines.contains(&EngineKind::IoUring)
            && per_conn * self.conns as u64 > harness::URING_BUF_BUDGET
        {
            return bad(format!(
                "io_uring would need {} MiB of connection buffers; lower --conns or --size",
                (per_conn * self.conns as u64) >> 20
            ));
        }
        Ok(())
    }
}
