//! The ipc lab's commands: the native `commbench ipc reqres|stream`, the
//! seed-compatible `commbench reqres_loop` / `commbench data_channel_write`
//! (exact grammar and CSV), and the hidden `__ipc-client` an `mp` run
//! re-executes for each client process.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use commbench_core::rusage::Usage;
use commbench_ipc::compat::{self, SeedCommand};
use commbench_ipc::{Clients, IpcConfig, Mode, TransportKind, WaitPolicy, Workload};

#[derive(Debug, Args)]
pub struct IpcArgs {
    #[command(subcommand)]
    pub cmd: IpcCmd,
}

#[derive(Debug, Subcommand)]
pub enum IpcCmd {
    /// Request/response (echo server): round-trip latency percentiles, rates, CPU per message.
    Reqres(NativeArgs),
    /// Server streams messages to the clients (data_channel_write's path).
    Stream(NativeArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TransportArg {
    Shm,
    Uds,
    Pipe,
    Tcp,
    /// Every transport, interleaved, side by side.
    All,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum WaitArg {
    Spin,
    Block,
    Adaptive,
    /// Every policy (shm), interleaved.
    All,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ClientsArg {
    Mt,
    Mp,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ModeArg {
    Sync,
    Async,
    Nores,
}

#[derive(Debug, Args)]
pub struct NativeArgs {
    /// Transport (shm = rings in /dev/shm).
    #[arg(long, value_enum, default_value = "shm")]
    pub transport: TransportArg,
    /// Sessions (each a server thread and a client thread or process), 1..=64;
    /// a list (`1,2,4,8,16,32`) runs a sweep, interleaved.
    #[arg(long, default_value = "1", value_delimiter = ',')]
    pub sessions: Vec<u32>,
    /// Payload bytes per message (suffixes B, K/KiB, M/MiB, G/GiB), at most 16 MiB.
    #[arg(long, default_value = "128", value_parser = crate::args::parse_size)]
    pub size: usize,
    /// Messages (round trips for reqres) per session.
    #[arg(long, default_value_t = 100_000)]
    pub count: u64,
    /// Client layout: threads in this process, or a process per session; `mt,mp` runs both.
    #[arg(long, value_enum, default_value = "mt", value_delimiter = ',')]
    pub clients: Vec<ClientsArg>,
    /// Request/response mode (reqres only).
    #[arg(long, value_enum, default_value = "sync")]
    pub mode: ModeArg,
    /// How shm endpoints wait for each other.
    #[arg(long, value_enum, default_value = "adaptive")]
    pub wait: WaitArg,
    /// CPU placement per role, taskset syntax: `--cpus server=0 --cpus client=1`.
    #[arg(long, value_name = "ROLE=LIST")]
    pub cpus: Vec<String>,
    /// Checksum every payload (corruption ends the run with exit 1).
    #[arg(long)]
    pub verify: bool,
    /// Interleaved rounds per configuration; the median run is reported
    /// (default: 3 when several configurations are compared, else 1).
    #[arg(long)]
    pub repeat: Option<u32>,
    /// shm ring bytes per direction (power of two; also the pipe capacity). Default: 1M, and for a shm stream room for 64 messages up to 4M (64 KiB messages: 4M).
    #[arg(long, value_parser = crate::args::parse_size)]
    pub ring: Option<usize>,
    /// Calibration aid: the server busy-waits NS nanoseconds (TSC) on every request before answering — a known extra cost per operation, to check that `commbench ab` finds a change of known size.
    #[arg(long, value_name = "NS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub extra_work_ns: u64,
    /// Testing aid: the server corrupts message SESSION:SEQ.
    #[arg(long, hide = true, value_name = "SESSION:SEQ")]
    pub inject_corruption: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run(a: &IpcArgs) -> Result<()> {
    let (args, workload) = match &a.cmd {
        IpcCmd::Reqres(n) => (
            n,
            Workload::Reqres(match n.mode {
                ModeArg::Sync => Mode::Sync,
                ModeArg::Async => Mode::Async,
                ModeArg::Nores => Mode::Nores,
            }),
        ),
        IpcCmd::Stream(n) => (n, Workload::Stream),
    };
    let (server_cpus, client_cpus) = crate::args::placement(&args.cpus)?;
    let corrupt = match &args.inject_corruption {
        None => None,
        Some(s) => {
            let p = s
                .split_once(':')
                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
            Some(p.ok_or_else(|| crate::usage("--inject-corruption expects SESSION:SEQ"))?)
        }
    };
    let base = IpcConfig {
        workload,
        size: args.size,
        count: args.count,
        verify: args.verify,
        latency: true,
        ring_bytes: args.ring,
        server_cpus,
        client_cpus,
        corrupt,
        extra_work_ns: args.extra_work_ns,
        ..IpcConfig::default()
    };
    let transports: Vec<TransportKind> = match args.transport {
        TransportArg::Shm => vec![TransportKind::Shm],
        TransportArg::Uds => vec![TransportKind::Uds],
        TransportArg::Pipe => vec![TransportKind::Pipe],
        TransportArg::Tcp => vec![TransportKind::Tcp],
        TransportArg::All => TransportKind::ALL.to_vec(),
    };
    let waits: Vec<WaitPolicy> = match args.wait {
        WaitArg::Spin => vec![WaitPolicy::Spin],
        WaitArg::Block => vec![WaitPolicy::Block],
        WaitArg::Adaptive => vec![WaitPolicy::Adaptive],
        WaitArg::All => vec![WaitPolicy::Spin, WaitPolicy::Block, WaitPolicy::Adaptive],
    };
    let mut cfgs = Vec::new();
    let mut sessions = args.sessions.clone();
    sessions.dedup();
    let mut clients = args.clients.clone();
    clients.dedup();
    for &n in &sessions {
        for &cl in &clients {
            let base = IpcConfig {
                sessions: n,
                clients: match cl {
                    ClientsArg::Mt => Clients::Mt,
                    ClientsArg::Mp => Clients::Mp,
                },
                ..base.clone()
            };
            for &t in &transports {
                if t == TransportKind::Shm {
                    for &w in &waits {
                        cfgs.push(IpcConfig {
                            transport: t,
                            wait: w,
                            ..base.clone()
                        });
                    }
                } else {
                    cfgs.push(IpcConfig {
                        transport: t,
                        ..base.clone()
                    });
                }
            }
        }
    }
    commbench_core::artifact::install_signal_cleanup();
    let mut rec = crate::progress::recorder();
    let repeat = args.repeat.unwrap_or(if cfgs.len() > 1 { 3 } else { 1 });
    if repeat == 0 {
        return Err(crate::usage("--repeat must be at least 1"));
    }
    let r = if cfgs.len() == 1 && repeat == 1 {
        commbench_ipc::run(&cfgs[0], &mut rec).map(|_| ())
    } else {
        commbench_ipc::run_interleaved(&cfgs, repeat, &mut rec).map(|_| ())
    };
    crate::progress::finish();
    r.map_err(crate::lab_err)?;
    let records = rec.take();
    if records.len() > 1 {
        return args.out.emit_or_show(&records, || side_by_side(&records));
    }
    args.out.emit(&records)
}

/// The compact comparison printed for several configurations: one line per
/// transport / wait policy, rates relative to the Unix socket.
fn side_by_side(records: &[commbench_core::Record]) -> String {
    use commbench_core::record::human_number as h;
    let p = |r: &commbench_core::Record, k: &str| {
        r.params
            .get(k)
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string())
            })
            .unwrap_or_default()
    };
    let m = |r: &commbench_core::Record, k: &str| r.metric_f64(k).unwrap_or(f64::NAN);
    // The Unix socket of the same sessions and clients is the yardstick.
    let uds = |r: &commbench_core::Record| {
        records
            .iter()
            .find(|u| {
                p(u, "transport") == "uds"
                    && p(u, "sessions") == p(r, "sessions")
                    && p(u, "clients") == p(r, "clients")
            })
            .map(|u| m(u, "msgs_per_s"))
    };
    let sweep = records.iter().any(|r| {
        p(r, "sessions") != p(&records[0], "sessions")
            || p(r, "clients") != p(&records[0], "clients")
    });
    let mut out = String::new();
    let first = &records[0];
    let who = if sweep {
        "sweep over sessions and clients".to_owned()
    } else {
        format!("{} x{} sessions", p(first, "clients"), p(first, "sessions"))
    };
    out.push_str(&format!(
        "ipc {} {who}, {} B, {} per session, median of {} interleaved rounds\n",
        p(first, "mode"),
        p(first, "size"),
        p(first, "count"),
        p(first, "repeat"),
    ));
    let head = [
        "sessions",
        "clients",
        "transport",
        "wait",
        "msgs/s",
        "(min-max)",
        "GiB/s",
        "rt p50 ns",
        "rt p99 ns",
        "rt p99.9 ns",
        "srv cpu ns/msg",
        "cli cpu ns/msg",
        "ctx/msg",
        "x uds",
        "placement",
    ];
    let mut rows = vec![head.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    for r in records {
        let rate = m(r, "msgs_per_s");
        rows.push(vec![
            p(r, "sessions"),
            p(r, "clients"),
            p(r, "transport"),
            p(r, "wait"),
            h(rate.round()),
            format!(
                "{}-{}",
                h(m(r, "msgs_per_s_min").round()),
                h(m(r, "msgs_per_s_max").round())
            ),
            format!("{:.3}", m(r, "gib_per_s")),
            h(m(r, "rt_p50_ns")),
            h(m(r, "rt_p99_ns")),
            h(m(r, "rt_p999_ns")),
            h(m(r, "server_cpu_ns_per_msg").round()),
            h(m(r, "client_cpu_ns_per_msg").round()),
            format!("{:.2}", m(r, "ctx_per_op")),
            uds(r)
                .map(|u| format!("{:.2}", rate / u))
                .unwrap_or_else(|| "-".into()),
            {
                let (sc, cc) = (p(r, "server_cpus"), p(r, "client_cpus"));
                if sc == cc {
                    sc
                } else {
                    format!("server={sc} client={cc}")
                }
            },
        ]);
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < 2 || i + 1 == head.len() {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for r in records.iter().filter(|r| p(r, "transport") == "shm") {
        let w = |k: &str| {
            r.metrics
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("-")
                .to_owned()
        };
        out.push_str(&format!(
            "shm {} x{} {}: wait {}: {}\n",
            p(r, "clients"),
            p(r, "sessions"),
            p(r, "wait"),
            w("wait_strategy"),
            w("wait_why")
        ));
    }
    let loads: Vec<f64> = records.iter().map(|r| m(r, "load_start")).collect();
    let over = records
        .iter()
        .any(|r| r.metrics.get("oversubscribed").and_then(|v| v.as_bool()) == Some(true));
    out.push_str(&format!(
        "load average {}..{} (placement pair:L = each session's two ends on one CPU of L){}\n",
        h(loads.iter().cloned().fold(f64::INFINITY, f64::min)),
        h(loads.iter().cloned().fold(f64::NEG_INFINITY, f64::max)),
        if over {
            "; OVERSUBSCRIBED (more runnable threads than CPUs): rates are suspect"
        } else {
            ""
        }
    ));
    out
}

/// Raw arguments of a seed-compatible command.
#[derive(Debug, Args)]
pub struct SeedArgs {
    /// {mt|mp} nsession msg_len nloop [sync|async|nores], or `help`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    pub args: Vec<String>,
}

fn seed(args: &[String], reqres: bool) -> Result<()> {
    let parsed = if reqres {
        compat::parse_reqres_loop(args)
    } else {
        compat::parse_data_channel_write(args)
    }
    .map_err(crate::lab_err)?;
    commbench_core::artifact::install_signal_cleanup();
    let base = IpcConfig::default();
    match parsed {
        SeedCommand::Help => {
            println!(
                "{}",
                if reqres {
                    compat::REQRES_HELP
                } else {
                    compat::DCW_HELP
                }
            );
            Ok(())
        }
        SeedCommand::Run(run) => {
            let (line, rep) = commbench_ipc::run_seed(&run, &base).map_err(crate::lab_err)?;
            println!("{line}");
            // Which wait strategy the run used and why: on stderr, so the
            // seed's stdout stays one CSV line.
            if rep.transport == TransportKind::Shm {
                let per = |s: f64| s * 1e9 / rep.messages.max(1) as f64;
                eprintln!(
                    "# shm wait: {}: {}; CPU per message: server {:.0} ns, client {:.0} ns",
                    rep.wait_strategy,
                    rep.wait_why,
                    per(rep.server_cpu_s),
                    per(rep.client_cpu_s)
                );
            }
            // The seed's CSV line is the output; the record goes to the store.
            keep_seed(&[rep.record(&[])]);
            Ok(())
        }
        SeedCommand::Sweep(workload) => {
            let before = Usage::process();
            let children_before = Usage::children();
            // COMMBENCH_SWEEP_NLOOP shortens the sweep (tests).
            let nloop = std::env::var("COMMBENCH_SWEEP_NLOOP")
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&n| n >= 1)
                .unwrap_or(compat::SWEEP_NLOOP);
            let mut records = Vec::new();
            for run in compat::sweep(workload, nloop) {
                let res = commbench_ipc::run_seed(&run, &base).map_err(crate::lab_err);
                let (line, rep) = match res {
                    Ok(x) => x,
                    Err(e) => {
                        // What was measured before the failure is kept.
                        keep_seed(&records);
                        return Err(e);
                    }
                };
                println!("{line}");
                records.push(rep.record(&[]));
            }
            keep_seed(&records);
            let me = Usage::process().since(&before);
            let ch = Usage::children().since(&children_before);
            println!(
                "# resource usage: server+mt clients user {:.3} s sys {:.3} s, max RSS {} KiB, \
                 context switches {} voluntary {} involuntary",
                me.user_s, me.sys_s, me.max_rss_kib, me.voluntary_ctx, me.involuntary_ctx
            );
            println!(
                "# resource usage: mp client processes user {:.3} s sys {:.3} s, max RSS {} KiB, \
                 context switches {} voluntary {} involuntary",
                ch.user_s, ch.sys_s, ch.max_rss_kib, ch.voluntary_ctx, ch.involuntary_ctx
            );
            Ok(())
        }
    }
}

/// The records of a seed-compatible run, kept in the results store (its
/// stdout is the seed's format, so they are not printed).
fn keep_seed(records: &[commbench_core::Record]) {
    crate::store::keep(
        records,
        &commbench_core::env::Fingerprint::collect().to_value(),
    );
}

pub fn run_reqres_loop(a: &SeedArgs) -> Result<()> {
    seed(&a.args, true)
}

pub fn run_data_channel_write(a: &SeedArgs) -> Result<()> {
    seed(&a.args, false)
}

/// The hidden mp client process.
pub fn run_client(a: &SeedArgs) -> i32 {
    commbench_ipc::child_main(&a.args)
}
