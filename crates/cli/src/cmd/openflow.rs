//! The OpenFlow lab's commands: `commbench cbench` (cbench's own argument
//! grammar, parsed by the library), `commbench controller`, and
//! `commbench openflow bench`.
use crate::output::OutputArgs;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use commbench_core::env::Fingerprint;
use commbench_core::record::{export, Format};
use commbench_openflow::bench::{self, BenchConfig, Variant};
use commbench_openflow::cbench_args;
use commbench_openflow::controller::{App, Controller, ControllerConfig};
use commbench_openflow::emulator::{self, CbenchConfig, Line};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// `commbench cbench [cbench's options]` — see `commbench cbench --help`.
#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct CbenchArgs {
    /// cbench's options (-c -p -s -l -m -M -t -w -C -D -i -I -L -o -r -d -h) and
    /// ours (--of13 --outstanding --threads --nodelay --sndbuf --max-in-flight
    /// --handshake-timeout --legacy-format --cpus --format --output).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

fn header(c: &CbenchConfig) -> String {
    format!(
        "cbench: controller benchmarking tool\n\
         \x20  running in mode '{}'\n\
         \x20  connecting to controller at {}:{} \n\
         \x20  faking{} {} switches offset {} :: {} tests each; {} ms per test\n\
         \x20  with {} unique source MACs per switch\n\
         \x20  {} destination mac addresses before the test\n\
         \x20  starting test with {} ms delay after features_reply\n\
         \x20  ignoring first {} \"warmup\" and last {} \"cooldown\" loops\n\
         \x20  connection delay of {}ms per {} switch(es)\n\
         \x20  debugging info is {}\n\
         \x20  OpenFlow {}, {} generator thread(s), {}",
        c.mode_name(),
        c.controller,
        c.port,
        if c.ranged { " from 1 to" } else { "" },
        c.switches,
        c.dpid_offset,
        c.loops,
        c.ms_per_test,
        c.mac_addresses,
        if c.learn_dst_macs {
            "learning"
        } else {
            "NOT learning"
        },
        c.delay_ms,
        c.warmup,
        c.cooldown,
        c.connect_delay_ms,
        c.connect_group_size,
        if c.debug { "on" } else { "off" },
        if c.of13 { "1.3" } else { "1.0" },
        c.threads,
        if c.throughput {
            match c.max_in_flight {
                0 => "no limit on unanswered probes (like cbench)".to_string(),
                n => format!("at most {n} unanswered probes per switch"),
            }
        } else {
            format!("{} probe(s) in flight per switch", c.outstanding)
        },
    )
}

/// "cubic (kernel default bbr)" or "cubic".
pub(crate) fn congestion_note(c: &commbench_core::sys::CongestionApplied) -> String {
    if c.applied == c.kernel {
        c.applied.clone()
    } else {
        format!("{} (kernel default {})", c.applied, c.kernel)
    }
}

/// One TCP connection (one descriptor) per emulated switch: a count the
/// process cannot hold is a usage error before any per-switch state exists.
fn check_switch_count(n: usize) -> Result<()> {
    const RESERVE: u64 = 64;
    let need = (n as u64).saturating_add(RESERVE);
    commbench_core::sys::ensure_nofile(need).map_err(|s| {
        crate::usage(format!(
            "cbench: -s {n} needs {n} connections, one file descriptor each, but this process may hold {} \
             (RLIMIT_NOFILE hard limit {}{}): use -s {} or fewer, or raise the limit",
            s.soft,
            s.hard,
            if s.nr_open < need {
                format!(", and the kernel's fs.nr_open is {}", s.nr_open)
            } else {
                String::new()
            },
            s.soft.saturating_sub(RESERVE)
        ))
    })?;
    Ok(())
}

pub fn run_cbench(a: &CbenchArgs) -> Result<()> {
    let parsed = cbench_args::parse(&a.args).map_err(|e| crate::usage(e.0))?;
    if parsed.help {
        print!("{}", cbench_args::usage());
        return Ok(());
    }
    let format: Format = match parsed.format.as_deref() {
        None => Format::Table,
        Some(f) => f.parse().map_err(crate::usage_err)?,
    };
    let cfg = parsed.config;
    check_switch_count(cfg.switches)?;
    let table = format == Format::Table;
    eprintln!("{}", header(&cfg));
    let stdout = std::io::stdout();
    let mut io_err: Option<std::io::Error> = None;
    let legacy = cfg.legacy_format;
    let report = emulator::run_with(&cfg, &mut |l| {
        let line = match l {
            Line::Window { switches, window } => {
                emulator::format_window_line(switches, window, legacy)
            }
            Line::Result { switches, result } => emulator::format_result_line(switches, result),
            Line::Notice(n) => {
                eprintln!("{n}");
                return;
            }
        };
        if table {
            let mut o = stdout.lock();
            if let Err(e) = writeln!(o, "{line}").and_then(|_| o.flush()) {
                io_err.get_or_insert(e);
            }
        } else {
            eprintln!("{line}");
        }
    })
    .context("cbench run failed")?;
    if let Some(e) = io_err {
        return Err(e.into());
    }
    let records = bench::cbench_records(&report);
    let fp = Fingerprint::collect();
    // After RESULT: the windows in which the machine itself stalled.
    for round in &report.rounds {
        for l in round.stall_lines(commbench_core::stall::DEFAULT_THRESHOLD) {
            if table {
                println!("{l}");
            } else {
                eprintln!("{l}");
            }
        }
    }
    let partial: Vec<String> = report
        .rounds
        .iter()
        .filter(|r| r.partial())
        .map(|r| format!("{} of {} switches", r.switches_ready, r.switches))
        .collect();
    if table {
        let mut o = stdout.lock();
        for round in &report.rounds {
            let t = &round.tally;
            writeln!(
                o,
                "emulator: {:.3} s CPU (user {:.3} + sys {:.3}) over {:.3} s wall, {} thread(s), busy {:.1}% of the kept windows (max {:.1}%), {:.0} ns CPU per response, TCP {}",
                round.emulator_cpu_s,
                round.emulator_user_s,
                round.emulator_sys_s,
                round.wall_s,
                cfg.threads.min(round.switches),
                100.0 * round.emulator_busy,
                100.0 * round.emulator_busy_max,
                round.emulator_cpu_s * 1e9 / t.responses.max(1) as f64,
                congestion_note(&report.tcp_congestion)
            )?;
            writeln!(
                o,
                "responses: {} (flow_mod add {} modify_strict {}, packet_out {}); probes sent {}, matched {}, duplicate {}, unmatched {}{}; closed connections {}",
                t.responses,
                t.flow_mod_add,
                t.flow_mod_modify_strict,
                t.packet_out,
                t.probes_sent,
                t.matched,
                t.duplicate,
                t.unmatched,
                if t.far_matches > 0 {
                    format!(", {} matches near the 100000 buffer_id wrap (uncertain)", t.far_matches)
                } else {
                    String::new()
                },
                round.closed.len()
            )?;
            if round.emulator_busy_max > 0.9 {
                writeln!(
                    o,
                    "warning: the emulator was saturated ({:.0}% busy) in a kept window: the rate may be the emulator's, not the controller's; try --threads",
                    100.0 * round.emulator_busy_max
                )?;
            }
            if let Some(rt) = &round.round_trip_ns {
                writeln!(
                    o,
                    "round trip: n {} p50 {:.1} us p90 {:.1} us p99 {:.1} us p99.9 {:.1} us max {:.1} us",
                    rt.n,
                    rt.p50 / 1e3,
                    rt.p90 / 1e3,
                    rt.p99 / 1e3,
                    rt.p999 / 1e3,
                    rt.max / 1e3
                )?;
            }
        }
        o.flush()?;
        if let Some(path) = &parsed.output {
            write_file(path.as_ref(), &records, Format::Table, &fp)?;
        }
    } else {
        match &parsed.output {
            Some(path) => write_file(path.as_ref(), &records, format, &fp)?,
            None => {
                let mut o = stdout.lock();
                export(&records, format, &fp.to_value(), &mut o)?;
                o.flush()?;
            }
        }
    }
    failed_run(&report)?;
    // A run that measured something is kept (a partial one is marked so in
    // its records); cbench writes its own output, so it stores here.
    crate::store::keep(&records, &fp.to_value());
    if !partial.is_empty() && !cfg.allow_partial {
        anyhow::bail!(
            "partial run: only {} completed the handshake (marked partial in every output; --allow-partial exits 0)",
            partial.join(", ")
        );
    }
    Ok(())
}

/// A run that measured nothing is a failure (exit 1), not a 0.00
/// responses/s result: every connection closed by the controller, or no
/// response in any kept window.
fn failed_run(report: &emulator::CbenchReport) -> Result<()> {
    for round in &report.rounds {
        let n = round.switches_connected;
        if n > 0 && round.closed.len() >= n {
            let why = round
                .closed
                .first()
                .map(|c| c.reason.clone())
                .unwrap_or_default();
            anyhow::bail!(
                "the controller closed all {n} connections (first: {why}); the figures above measure nothing"
            );
        }
        let kept: u64 = round
            .windows
            .iter()
            .filter(|w| w.kept)
            .map(|w| w.counts.iter().sum::<u64>())
            .sum();
        if kept == 0 {
            anyhow::bail!(
                "the controller answered no probe in any kept window ({} switches, 0 responses): it stalled after the handshake or does not answer packet_in with flow_mod/packet_out",
                round.switches
            );
        }
    }
    Ok(())
}

fn write_file(
    path: &std::path::Path,
    records: &[commbench_core::record::Record],
    format: Format,
    fp: &Fingerprint,
) -> Result<()> {
    // Whole or not at all (a temp file renamed into place).
    commbench_core::artifact::write_atomic(path, |f| export(records, format, &fp.to_value(), f))
        .with_context(|| format!("cannot write output file {}", path.display()))
}

#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum AppArg {
    /// Answer each packet_in with an exact-match flow_mod (the seed's app).
    Cbench,
    /// MAC-learning switch.
    Learning,
    /// Constant flow_mod, no parsing (to measure an emulator's ceiling).
    Trivial,
}

/// `commbench controller`: an OpenFlow controller for cbench-style tests.
#[derive(Debug, Args)]
pub struct ControllerArgs {
    /// Application answering packet_ins.
    #[arg(long, value_enum, default_value = "cbench")]
    pub app: AppArg,
    /// Build every reply through the general encoder with fresh allocations
    /// (the seed's slow path) instead of patching a template.
    #[arg(long)]
    pub naive: bool,
    /// Speak OpenFlow 1.3 instead of 1.0.
    #[arg(long)]
    pub of13: bool,
    /// TCP port to listen on.
    #[arg(long, short = 'p', default_value_t = 6653)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Worker threads (switches are spread over them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,
    /// Stop after this many seconds, 0 < SECS <= 2592000 (default: run until Ctrl-C / SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Pin the worker threads to these CPUs (taskset list syntax).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Stop reading from a switch whose unsent replies exceed this many bytes (suffixes K, M, G).
    #[arg(long, default_value = "1MiB", value_name = "BYTES", value_parser = crate::args::parse_size)]
    pub max_pending_out: usize,
    /// Do not log connections or OFPT_ERROR messages from switches (a
    /// connection closed for an error is still logged).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Poll without sleeping (needs --cpus with one CPU per thread, none
    /// shared with the emulator): spares the emulator a wake-up per write.
    #[arg(long)]
    pub busy_poll: bool,
    /// Close a connection that sent no complete message for this long (0: never).
    #[arg(long, default_value_t = 300, value_name = "SECS", value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub idle_timeout: u64,
    /// Close a connection whose started message is not finished within this.
    #[arg(long, default_value_t = 10, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub partial_timeout: u64,
    /// Bound on input bytes held across all connections (started, unfinished
    /// messages); at the bound new data waits in the kernel, nothing is dropped.
    #[arg(long, default_value = "64MiB", value_name = "BYTES", value_parser = crate::args::size_in(1 << 20, 64 << 30))]
    pub max_buffered_in: u64,
    /// TCP congestion control of each connection: auto (cubic, else reno,
    /// instead of a pacing bbr, which arms a timer per write), kernel (the
    /// kernel's default), or an algorithm name.
    #[arg(long, default_value = "auto", value_name = "NAME")]
    pub tcp_congestion: String,
    /// Calibration aid: busy-wait NS nanoseconds (TSC) on every packet_in before answering — a known extra cost per response, to check that `commbench ab` finds a change of known size.
    #[arg(long, value_name = "NS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub extra_work_ns: u64,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run_controller(a: &ControllerArgs) -> Result<()> {
    if let Some(d) = a.duration {
        // Up to 30 days (run without --duration for longer).
        if !(d > 0.0 && d <= 2_592_000.0) {
            return Err(crate::usage(format!(
                "--duration must be 0 < seconds <= 2592000 (30 days; omit it to run until Ctrl-C), got {d}"
            )));
        }
    }
    let cfg = ControllerConfig {
        app: match a.app {
            AppArg::Cbench => App::Cbench,
            AppArg::Learning => App::Learning,
            AppArg::Trivial => App::Trivial,
        },
        naive: a.naive,
        of13: a.of13,
        listen: SocketAddr::new(a.bind, a.port),
        threads: a.threads as usize,
        max_pending_out: a.max_pending_out,
        log_connections: !a.quiet,
        cpus: a.cpus.clone(),
        busy_poll: a.busy_poll,
        idle_timeout: (a.idle_timeout > 0).then(|| Duration::from_secs(a.idle_timeout)),
        partial_timeout: Duration::from_secs(a.partial_timeout),
        max_buffered_in: usize::try_from(a.max_buffered_in).unwrap_or(usize::MAX),
        tcp_congestion: a.tcp_congestion.clone(),
        extra_work_ns: a.extra_work_ns,
    };
    let stop = commbench_openflow::stop_on_signal();
    let ctl = Controller::start(&cfg).map_err(|e| match e {
        commbench_openflow::controller::ControllerError::Config(m) => crate::usage(m),
        e => anyhow::Error::new(e),
    })?;
    // Through the controller's log queue: from here on nothing in this
    // process waits on stderr (it may be a pipe nobody reads).
    ctl.log_line(format!(
        "controller: {} app ({}), OpenFlow {}, listening on {}, {} thread(s), TCP {}; Ctrl-C to stop",
        match cfg.app {
            App::Cbench => "cbench",
            App::Learning => "learning",
            App::Trivial => "trivial",
        },
        if cfg.naive {
            "naive general encoder"
        } else {
            "template"
        },
        if cfg.of13 { "1.3" } else { "1.0" },
        ctl.local_addr(),
        cfg.threads,
        congestion_note(ctl.tcp_congestion())
    ));
    let t0 = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if let Some(d) = a.duration {
            if t0.elapsed().as_secs_f64() >= d {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let wall = t0.elapsed().as_secs_f64();
    let ctl_congestion = ctl.tcp_congestion().clone();
    let s = ctl.stop();
    let rec = commbench_core::record::Record::new("openflow", "controller")
        .param("app", cfg.app)
        .param("naive", cfg.naive)
        .param("of13", cfg.of13)
        .param("threads", cfg.threads)
        .param("listen", cfg.listen.to_string())
        .param("tcp_congestion", &ctl_congestion.applied)
        .param("tcp_congestion_kernel", &ctl_congestion.kernel)
        .metric("wall_s", wall)
        .metric("connections", s.connections)
        .metric("disconnections", s.disconnections)
        .metric("protocol_errors", s.protocol_errors)
        .metric("packet_in", s.packet_in)
        .metric("flow_mod_sent", s.flow_mod_sent)
        .metric("packet_out_sent", s.packet_out_sent)
        .metric("cpu_user_s", s.cpu_user_s)
        .metric("cpu_sys_s", s.cpu_sys_s)
        .metric(
            "cpu_ns_per_packet_in",
            s.cpu_s() * 1e9 / s.packet_in.max(1) as f64,
        )
        .metric("reads", s.reads)
        .metric("writes", s.writes)
        .metric("waits", s.waits)
        .metric(
            "reads_per_1000_packet_in",
            s.reads as f64 * 1000.0 / s.packet_in.max(1) as f64,
        )
        .metric(
            "writes_per_1000_packet_in",
            s.writes as f64 * 1000.0 / s.packet_in.max(1) as f64,
        )
        .metric(
            "waits_per_1000_packet_in",
            s.waits as f64 * 1000.0 / s.packet_in.max(1) as f64,
        )
        .metric("backpressure_pauses", s.backpressure_pauses)
        .metric("max_pending_out", s.max_pending_out)
        .metric("error_msgs", s.error_msgs)
        .metric("log_lines_suppressed", s.log_lines_suppressed)
        .metric("log_lines_dropped", s.log_lines_dropped)
        .metric("idle_timeouts", s.idle_timeouts)
        .metric("partial_timeouts", s.partial_timeouts)
        .metric("max_buffered_in", s.max_buffered_in)
        .metric("buffered_in_waits", s.buffered_in_waits);
    a.out.emit(&[rec])
}

/// `commbench openflow ...`
#[derive(Debug, Args)]
pub struct OpenflowArgs {
    #[command(subcommand)]
    pub cmd: OpenflowCmd,
}

#[derive(Debug, Subcommand)]
pub enum OpenflowCmd {
    /// Controller + emulator in one command: naive vs template side by side,
    /// throughput and latency mode, plus the emulator's ceiling.
    Bench(BenchArgs),
}

#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum ModeArg {
    Throughput,
    Latency,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum VariantArg {
    Naive,
    Template,
    Trivial,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Switch counts to test.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    pub switches: Vec<usize>,
    /// Modes to test.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "throughput,latency"
    )]
    pub modes: Vec<ModeArg>,
    /// Controller variants (trivial = the emulator's ceiling).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "naive,template,trivial"
    )]
    pub variants: Vec<VariantArg>,
    /// Windows per run (the first is warm-up).
    #[arg(long, short = 'l', default_value_t = 6, value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub loops: u32,
    /// Window length in ms.
    #[arg(long, short = 'm', default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub ms_per_test: u64,
    /// Short runs (3 windows of 300 ms).
    #[arg(long)]
    pub quick: bool,
    /// Separate runs per configuration, interleaved (A B C A B C), 1..=100:
    /// the records carry their samples and 95% intervals.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Calibration aid: the controller busy-waits NS nanoseconds (TSC) on every packet_in — a known extra cost per response, to check that `commbench ab` finds a change of known size.
    #[arg(long, value_name = "NS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub extra_work_ns: u64,
    /// OpenFlow 1.3 instead of 1.0.
    #[arg(long)]
    pub of13: bool,
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub controller_threads: u16,
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub emulator_threads: u16,
    /// Pin the controller's threads (taskset list syntax).
    #[arg(long, value_name = "LIST")]
    pub controller_cpus: Option<String>,
    /// Pin the emulator's threads (taskset list syntax).
    #[arg(long, value_name = "LIST")]
    pub emulator_cpus: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run_openflow(a: &OpenflowArgs) -> Result<()> {
    match &a.cmd {
        OpenflowCmd::Bench(b) => run_bench(b),
    }
}

fn run_bench(a: &BenchArgs) -> Result<()> {
    let max = commbench_openflow::emulator::MAX_SWITCHES;
    if a.switches.is_empty() || a.switches.iter().any(|&n| n == 0 || n > max) {
        return Err(crate::usage(format!(
            "--switches needs counts of 1..={max} (each switch is a TCP connection from its own local port)"
        )));
    }
    for c in [&a.controller_cpus, &a.emulator_cpus].into_iter().flatten() {
        commbench_core::placement::CpuList::parse_online(c).map_err(crate::lab_err)?;
    }
    let (loops, ms) = if a.quick {
        (3, 300)
    } else {
        (a.loops as usize, a.ms_per_test)
    };
    let cfg = BenchConfig {
        switches: a.switches.clone(),
        modes: a.modes.iter().map(|m| *m == ModeArg::Throughput).collect(),
        variants: a
            .variants
            .iter()
            .map(|v| match v {
                VariantArg::Naive => Variant::Naive,
                VariantArg::Template => Variant::Template,
                VariantArg::Trivial => Variant::Trivial,
            })
            .collect(),
        loops,
        warmup: 1,
        ms_per_test: ms,
        of13: a.of13,
        controller_threads: a.controller_threads as usize,
        emulator_threads: a.emulator_threads as usize,
        controller_cpus: a.controller_cpus.clone(),
        emulator_cpus: a.emulator_cpus.clone(),
        repeats: a.repeat as usize,
        max_repeats: a.repeat as usize,
        deadline: None,
        extra_work_ns: a.extra_work_ns,
    };
    let mut rec = crate::progress::recorder();
    let report = bench::run(&cfg, &mut rec);
    crate::progress::finish();
    let report = report?;
    a.out.emit_or_show(&report.records(), || {
        format!(
            "{}{}\n",
            report.side_by_side(),
            format_args!(
                "(medians of the kept windows, responses/s; ratio = template / naive; ceiling = emulator against the trivial responder{}; ns/r = controller CPU per response; emu ns/r and emu busy = the emulator's CPU per response and busiest kept window in the template run: busy near 100% means the emulator, not the controller, set the rate)",
                if bench::responder_may_spin(&cfg) {
                    ", which polls without sleeping on its own CPUs"
                } else {
                    ""
                }
            )
        )
    })
}
