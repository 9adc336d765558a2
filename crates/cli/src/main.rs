//! The `commbench` binary: argument parsing and wiring only. Every lab's
//! logic lives in its library crate; commands here build a config, call the
//! library, and hand the resulting records to an exporter.

mod args;
mod cmd;
#[cfg(test)]
mod docs_cli_tests;
mod error;
mod labs;
mod output;
#[cfg(test)]
mod output_rule_tests;
mod progress;
mod store;

use clap::{Parser, Subcommand};
use error::{is_broken_pipe, is_usage};
pub use error::{lab_err, usage, usage_err};
use std::process::ExitCode;

/// One fast, honest laboratory for the communication paths of a Linux host.
#[derive(Debug, Parser)]
#[command(name = "commbench", version, about, long_about = None)]
struct Cli {
    /// Keep this run's records in the results store at PATH (default
    /// $XDG_DATA_HOME/commbench/results.db; env COMMBENCH_STORE).
    #[arg(long, global = true, value_name = "PATH")]
    store: Option<std::path::PathBuf>,
    /// Do not keep this run in the results store (env COMMBENCH_NO_STORE=1).
    #[arg(long, global = true, conflicts_with = "store")]
    no_store: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the environment fingerprint (CPU, kernel, clock, build, affinity).
    Env(cmd::env::EnvArgs),
    /// TSC frequency, invariance, granularity and the cost of reading clocks.
    Timer(cmd::timer::TimerArgs),
    /// Line-rate arithmetic: packets/s, ns and cycles per packet.
    Budget(cmd::budget::BudgetArgs),
    /// Requested vs measured delay for busy-wait, empty loop and nanosleep.
    Delay(cmd::delay::DelayArgs),
    /// Remove leftovers (shm files, temp dirs) of runs whose process is dead.
    Clean(cmd::clean::CleanArgs),
    /// Run every lab with quick defaults; results.jsonl and report.html in an output folder.
    Suite(cmd::suite::SuiteArgs),
    /// Is B slower than A here? Paired, interleaved trials of a command with a verdict per headline metric.
    Ab(Box<cmd::ab::AbArgs>),
    /// Compare two result files: ratios, change and a verdict beyond a noise threshold.
    Compare(cmd::compare::CompareArgs),
    /// A median or a ratio with its 95% interval, from numbers given here (the statistics bench/'s scripts print).
    Estimate(cmd::estimate::EstimateArgs),
    /// Add the segment files of one run split over processes or hosts (`mux load --segment`) into its records.
    Merge(cmd::merge::MergeArgs),
    /// Runs kept in the results store and the trend of each test's headline metric; baselines.
    History(cmd::history::HistoryArgs),
    /// Render result files into one self-contained HTML page with SVG plots.
    Report(cmd::report::ReportArgs),
    /// IPC lab: request/response and streaming over shm, uds, pipe, tcp.
    Ipc(cmd::ipc::IpcArgs),
    /// Seed-compatible: `reqres_loop [{mt|mp} nsession msg_len nloop] [sync|async|nores]`.
    #[command(name = "reqres_loop")]
    ReqresLoop(cmd::ipc::SeedArgs),
    /// Seed-compatible: `data_channel_write [{mt|mp} nsession msg_len nloop]`.
    #[command(name = "data_channel_write")]
    DataChannelWrite(cmd::ipc::SeedArgs),
    /// Internal: one mp client process of an ipc run.
    #[command(name = "__ipc-client", hide = true)]
    IpcClient(cmd::ipc::SeedArgs),
    /// Many-connection lab: echo servers on poll, epoll LT/ET and io_uring, scan vs index lookup.
    Mux(Box<cmd::mux::MuxArgs>),
    /// cbench-compatible OpenFlow switch emulator (cbench's options; -h for help).
    Cbench(cmd::openflow::CbenchArgs),
    /// OpenFlow controller: cbench app (template or --naive) or learning switch.
    Controller(cmd::openflow::ControllerArgs),
    /// OpenFlow lab: `openflow bench` runs controller + emulator side by side.
    Openflow(cmd::openflow::OpenflowArgs),
    /// Packet captures: extract header fields, generate captures, benchmark cold vs warm cache.
    Pcap(cmd::pcap::PcapArgs),
    /// Packet pipeline lab: rx burst, RSS queues, per-packet work, tx buffering (DPDK-style).
    Pipeline(cmd::pipeline::PipelineArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout: `commbench man | man -l -`.
    Man,
}

fn dispatch(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Env(a) => cmd::env::run(&a),
        Command::Timer(a) => cmd::timer::run(&a),
        Command::Budget(a) => cmd::budget::run(&a),
        Command::Delay(a) => cmd::delay::run(&a),
        Command::Clean(a) => cmd::clean::run(&a),
        Command::Suite(a) => cmd::suite::run(&a),
        Command::Ab(a) => cmd::ab::run(&a),
        Command::Compare(a) => cmd::compare::run(&a),
        Command::Estimate(a) => cmd::estimate::run(&a),
        Command::Report(a) => cmd::report::run(&a),
        Command::History(a) => cmd::history::run(&a),
        Command::Merge(a) => cmd::merge::run(&a),
        Command::Ipc(a) => cmd::ipc::run(&a),
        Command::ReqresLoop(a) => cmd::ipc::run_reqres_loop(&a),
        Command::DataChannelWrite(a) => cmd::ipc::run_data_channel_write(&a),
        Command::IpcClient(a) => std::process::exit(cmd::ipc::run_client(&a)),
        Command::Mux(a) => cmd::mux::run(&a),
        Command::Cbench(a) => cmd::openflow::run_cbench(&a),
        Command::Controller(a) => cmd::openflow::run_controller(&a),
        Command::Openflow(a) => cmd::openflow::run_openflow(&a),
        Command::Pcap(a) => cmd::pcap::run(&a),
        Command::Pipeline(a) => cmd::pipeline::run(&a),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut c = Cli::command();
            clap_complete::generate(shell, &mut c, "commbench", &mut std::io::stdout());
            Ok(())
        }
        Command::Man => {
            use clap::CommandFactory;
            let mut out = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut out)?;
            // Every subcommand's page after the main one.
            for sub in Cli::command()
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
            {
                // clap keeps command names as 'static strings; a man page is
                // rendered once per process, so leaking these few is fine.
                let name: &'static str =
                    Box::leak(format!("commbench-{}", sub.get_name()).into_boxed_str());
                let sub = sub.clone().name(name);
                clap_mangen::Man::new(sub).render(&mut out)?;
            }
            use std::io::Write;
            std::io::stdout().write_all(&out)?;
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches();
    // `-o FILE` is checked against the command's formats before anything
    // runs (see output::Rule).
    if let Err(e) = output::check_matches(&matches) {
        eprintln!("commbench: {e:#}");
        return ExitCode::from(2);
    }
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let internal = match &cli.command {
        Command::IpcClient(_) => true,
        Command::Mux(a) => cmd::mux::is_harness_child(a),
        _ => false,
    };
    // Helper processes of a run report to their parent, which stores.
    store::configure(if internal {
        store::Choice::Off
    } else {
        store::choose(cli.store.as_deref(), cli.no_store)
    });
    // Processes this run starts (mp clients, load workers, `pcap extract`
    // under `pcap bench`) are parts of it: only this process stores. Set
    // before any thread exists.
    std::env::set_var("COMMBENCH_NO_STORE", "1");
    if commbench_core::env::is_debug_build() && !internal {
        eprintln!("{}", commbench_core::env::DEBUG_WARNING);
    }
    match dispatch(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) if is_usage(&e) => {
            eprintln!("commbench: {e:#}");
            eprintln!("Try 'commbench --help' or 'commbench <command> --help'.");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("commbench: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
