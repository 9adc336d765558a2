//! `commbench ab -L NAME A,B -- COMMAND...`: wiring for paired, interleaved
//! A/B trials (crates/ab). Parses the sides (hyperfine's `-L`), resolves the
//! command (a commbench subcommand runs this binary; anything else is a
//! program, such as another build of commbench), calls the library, and
//! writes the verdicts in the chosen format; `--fail-on-regression` exits 1.
use anyhow::{Context, Result};
use clap::{Args, CommandFactory, ValueEnum};
use commbench_ab::export::{self, GithubTool};
use commbench_ab::{AbSpec, Placement, Progress, Side, Status};
use commbench_core::placement::CpuList;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

mod exec;

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum AbFormat {
    /// The verdicts, one line per headline metric.
    Table,
    /// Records of lab `ab`, one per matched test and metric.
    Csv,
    Json,
    Jsonl,
    /// Bencher Metric Format (value, lower_value, upper_value).
    Bmf,
    /// github-action-benchmark's custom JSON (see --github-tool).
    GithubBenchmark,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum GithubToolArg {
    /// customSmallerIsBetter: CPU per operation, latencies, ticks.
    Smaller,
    /// customBiggerIsBetter: rates.
    Bigger,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  commbench ab -L d 0.01,0.02 -- 'sleep {d}'
  commbench ab -L bin ./old/app,./new/app --ops 100000 -- '{bin} --iterations 100000'
  commbench ab -L srv old,new --setup './start-{srv}' --cleanup './stop-{srv}' \\
      --metric 'rps:higher=Requests/sec:\\s*([0-9.]+)' -- 'wrk -t1 -c8 -d5s http://127.0.0.1:8080/'
  commbench ab -L work delay:1000,delay:1030 -- pipeline run --mode rtc --work {work} --repeat 1
  commbench ab -L bin ./old/commbench,./new/commbench -- '{bin} ipc reqres --transport pipe --count 20000 --repeat 1'
  commbench ab --duet -L bin ./old/commbench,./new/commbench -- '{bin} pcap extract f.pcap --threads 1'

A commbench command (a subcommand, or a program whose file name starts with `commbench`, or any
program with --records) runs once per trial with `--format jsonl --output FILE` appended, and its
records are matched by lab, test and their place among the test's records. Any other program (or
any command with --exec) is timed as a whole process tree: wall time, user and system CPU and peak
memory of it and everything it starts, daemons included.")]
pub struct AbArgs {
    /// The varied parameter and its values: `-L NAME A,B[,C...]`; `{NAME}` in the command becomes each; with more than two, each value is compared with the first.
    #[arg(short = 'L', long = "parameter-list", num_args = 2, value_names = ["NAME", "A,B"], required = true)]
    pub list: Vec<String>,
    /// Time the command as a process tree even if it is a commbench command (it writes no records).
    #[arg(long, conflicts_with = "records")]
    pub exec: bool,
    /// Read the command's records (`--format jsonl --output FILE` appended) although it is not a commbench binary.
    #[arg(long)]
    pub records: bool,
    /// Operations one run of the command does: adds per-operation figures (wall_ns_per_op, cpu_ns_per_op, ops_per_s), judged instead of the totals.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub ops: Option<u64>,
    /// A number the program prints, as a metric: `NAME=REGEX` (first group, else the whole match, of the last matching line of stdout); `NAME:higher=…` or `NAME:lower=…` says which way is better when the name does not (`…_per_s` is higher, `…_ms` lower). Repeatable.
    #[arg(long = "metric", value_name = "NAME=REGEX")]
    pub metric: Vec<String>,
    /// Run once per side before its first trial, not timed (hyperfine's --setup); `{NAME}` is substituted; what it leaves running lives until ab ends.
    #[arg(long, value_name = "CMD")]
    pub setup: Option<String>,
    /// Run before every trial, not timed (hyperfine's --prepare).
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,
    /// Run once per side after its last trial (hyperfine's --cleanup), also after an interrupt.
    #[arg(long, value_name = "CMD")]
    pub cleanup: Option<String>,
    /// The shell that runs a command line with shell syntax (pipes, `&`, `;`, redirections, `$`); `none` runs every command without one (its words split as a shell would). A plain command line never goes through a shell.
    #[arg(long, value_name = "SHELL", default_value = "sh")]
    pub shell: String,
    /// No shell: `--shell=none` (hyperfine's -N).
    #[arg(short = 'N')]
    pub no_shell: bool,
    /// Exactly N pairs (--min-pairs and --max-pairs N).
    #[arg(short = 'r', long, value_name = "N", value_parser = clap::value_parser!(u32).range(6..=10_000))]
    pub runs: Option<u32>,
    /// Also write hyperfine's JSON (results[] with times, mean, stddev, median, user, system, min, max, exit_codes, parameters) to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Also write hyperfine's Markdown table (Relative: the paired ratio with its 95% interval) to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// Pin every trial of both sides to these CPUs (e.g. 1 or 0-1); default: the CPUs ab may use.
    #[arg(long, value_name = "LIST", value_parser = parse_cpus, conflicts_with = "duet")]
    pub cpus: Option<CpuList>,
    /// Run A and B at the same time on two CPUs (swapped each pair), each side's processes confined to its CPU: for commands whose threads block rather than spin (pcap extract --threads 1, mux, openflow bench).
    #[arg(long)]
    pub duet: bool,
    /// The two CPUs of a duet.
    #[arg(long, value_name = "CPU,CPU", value_parser = parse_two_cpus, requires = "duet")]
    pub duet_cpus: Option<[usize; 2]>,
    /// A shared-CPU duet: A and B at the same time, both pinned to this one CPU, each side's processes in a cgroup of equal CPU weight, so each gets half the CPU in the same spell of the machine. For trials of a fixed duration (mux --rounds-for SECS); needs the cgroup CPU controller (refused without it).
    #[arg(long, value_name = "CPU", conflicts_with_all = ["duet", "cpus"])]
    pub shared_cpu: Option<usize>,
    /// Pairs before the first verdict.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(6..=10_000))]
    pub min_pairs: u32,
    /// Most pairs: while a headline metric is inconclusive, pairs are added up to this or --budget, whichever comes first (the budget, with short trials).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(6..=10_000))]
    pub max_pairs: u32,
    /// Most time to spend (e.g. 90s, 3m, 1h).
    #[arg(long, default_value = "3m", value_parser = parse_duration)]
    pub budget: Duration,
    /// Warm-up pairs, run first and not judged.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub warmup: u32,
    /// Seed of the shuffled, balanced order of the pairs (AB or BA).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Relative change (percent) below which a difference is "no change".
    #[arg(long, value_name = "PCT", default_value_t = 2.0, value_parser = parse_pct)]
    pub threshold: f64,
    /// Redo a pair whose two trials waited for a CPU (run-queue delay over runnable time, plus steal) for shares more than PCT points apart, and more apart than --contamination-scale times the run's median gap.
    #[arg(long, value_name = "PCT", default_value_t = 5.0, value_parser = parse_pct)]
    pub contamination: f64,
    /// Redo a pair only when its gap is also beyond K times the median gap of the run's pairs so far: on a host loaded by others, whose load falls on both sides alike, a pair is redone for a burst that hit one side, not for the load itself; 0: --contamination alone.
    #[arg(long, value_name = "K", default_value_t = commbench_ab::CONTAMINATION_SCALE, value_parser = parse_scale)]
    pub contamination_scale: f64,
    /// How much a change's size moves from run to run, as a percentage of the change (standard deviation): each interval holds it beside the pairs' own noise, so a change measured minutes later still falls inside; an A/A interval is not widened. 0: the pairs' noise alone.
    #[arg(long, value_name = "PCT", default_value_t = 100.0 * commbench_core::estimate::paired::CHANGE_SPREAD, value_parser = parse_pct)]
    pub change_spread: f64,
    /// A trial running longer than this is stopped and its pair redone.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub trial_timeout: Duration,
    /// Judge these metrics (comma-separated, dotted for nested: latency_ns.p99) instead of the labs' headline metrics.
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
    /// Show (and export) every metric, not only the headline ones.
    #[arg(long)]
    pub all: bool,
    /// Exit 1 when a headline metric is slower/worse with its whole interval beyond PCT percent.
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    pub fail_on_regression: Option<f64>,
    /// Output format (default: table; with -o FILE, the format its extension names: .txt, .csv, .json, .jsonl).
    #[arg(long, value_enum)]
    pub format: Option<AbFormat>,
    /// With --format github-benchmark: the direction of the metrics in the file (the action takes one per file).
    #[arg(long, value_enum, default_value = "smaller")]
    pub github_tool: GithubToolArg,
    /// Write the output to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The command (after `--`): a commbench subcommand with its arguments, or a program (one quoted word is split as a shell would).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

fn parse_cpus(s: &str) -> std::result::Result<CpuList, String> {
    CpuList::parse(s).map_err(|e| e.to_string())
}

fn parse_two_cpus(s: &str) -> std::result::Result<[usize; 2], String> {
    let v: Vec<&str> = s.split(',').collect();
    let cpu = |x: &str| {
        x.trim()
            .parse::<usize>()
            .map_err(|_| format!("{x:?} is not a CPU number"))
    };
    match v.as_slice() {
        [a, b] => Ok([cpu(a)?, cpu(b)?]),
        _ => Err("give two CPUs: A,B (e.g. 0,1)".into()),
    }
}

fn parse_pct(s: &str) -> std::result::Result<f64, String> {
    let x: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage"))?;
    if x.is_finite() && (0.0..100.0).contains(&x) {
        Ok(x)
    } else {
        Err(format!("{s} is outside 0..100 percent"))
    }
}

fn parse_scale(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..=1000.0).contains(&x) => Ok(x),
        _ => Err(format!(
            "{s:?} is not a factor from 0 to 1000 (4: four times the run's median gap; 0: off)"
        )),
    }
}

/// `90s`, `3m`, `1h`, `500ms`, or plain seconds.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let t = s.trim();
    let (num, mult) = if let Some(x) = t.strip_suffix("ms") {
        (x, 1e-3)
    } else if let Some(x) = t.strip_suffix('s') {
        (x, 1.0)
    } else if let Some(x) = t.strip_suffix('m') {
        (x, 60.0)
    } else if let Some(x) = t.strip_suffix('h') {
        (x, 3600.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 90s, 3m, 1h)"))?;
    let secs = v * mult;
    if secs.is_finite() && secs > 0.0 && secs <= 7.0 * 86_400.0 {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(format!("{s} is outside 1 ms..7 days"))
    }
}

/// The command's words: one word with spaces is split as a shell would.
fn words(command: &[String]) -> Result<Vec<String>> {
    if let [one] = command {
        if one.contains(char::is_whitespace) {
            return shlex::split(one).ok_or_else(|| {
                crate::usage(format!(
                    "cannot split the command {one:?}: unbalanced quotes"
                ))
            });
        }
    }
    Ok(command.to_vec())
}

/// Whether `word` names one of this binary's subcommands.
fn is_subcommand(word: &str) -> bool {
    crate::Cli::command()
        .get_subcommands()
        .any(|c| c.get_name() == word || c.get_all_aliases().any(|a| a == word))
}

fn side_argv(template: &[String], name: &str, value: &str) -> Result<Vec<String>> {
    let mut argv = commbench_ab::substitute(template, name, value);
    let Some(first) = argv.first() else {
        return Err(crate::usage("give the command to compare after --"));
    };
    if first == "ab" {
        return Err(crate::usage("ab cannot compare ab runs"));
    }
    if is_subcommand(first) {
        let me = std::env::current_exe().context("cannot find this binary's path")?;
        argv.insert(0, me.display().to_string());
    }
    Ok(argv)
}

/// Builds the spec from the arguments (usage errors for bad sides).
pub fn specs(a: &AbArgs) -> Result<Vec<AbSpec>> {
    let [name, values] = a.list.as_slice() else {
        return Err(crate::usage("-L takes a name and its values: -L NAME A,B"));
    };
    if name.is_empty() || name.contains(['{', '}']) {
        return Err(crate::usage(format!("-L {name:?}: give a plain name")));
    }
    let vals: Vec<&str> = values.split(',').collect();
    if vals.len() < 2 {
        return Err(crate::usage(format!(
            "-L {name} {values}: give at least two values, A,B (each further value is compared with A)"
        )));
    }
    let exec = exec::mode(a)?;
    let template = match &exec {
        Some(_) => exec::command_words(&a.command, exec::shell(a))?,
        None => words(&a.command)?,
    };
    let pat = format!("{{{name}}}");
    if !template.iter().any(|w| w.contains(&pat)) {
        return Err(crate::usage(format!(
            "the command never uses {pat}, so both sides would run the same command; for an A/A check give one value twice: -L bin ./commbench,./commbench -- '{{bin}} pipeline run'"
        )));
    }
    let side = |v: &str| -> Result<Side> {
        let aux = |c: &Option<String>| -> Result<Option<Vec<String>>> {
            c.as_ref()
                .map(|c| {
                    let w = exec::command_words(std::slice::from_ref(c), exec::shell(a))?;
                    Ok(commbench_ab::substitute(&w, name, v))
                })
                .transpose()
        };
        Ok(Side {
            value: v.to_owned(),
            argv: if exec.is_some() {
                let mut w = commbench_ab::substitute(&template, name, v);
                if w.first().is_some_and(|f| f != "ab" && is_subcommand(f)) {
                    let me = std::env::current_exe().context("cannot find this binary's path")?;
                    w.insert(0, me.display().to_string());
                }
                w
            } else {
                side_argv(&template, name, v)?
            },
            setup: aux(&a.setup)?,
            prepare: aux(&a.prepare)?,
            cleanup: aux(&a.cleanup)?,
        })
    };
    let placement = if a.duet {
        let [c0, c1] = a.duet_cpus.unwrap_or_else(|| {
            let on = commbench_core::placement::current_affinity();
            let c = on.cpus();
            [
                c.first().copied().unwrap_or(0),
                c.get(1).copied().unwrap_or(0),
            ]
        });
        if c0 == c1 {
            return Err(crate::usage(
                "a duet needs two different CPUs (--duet-cpus A,B); this process may use only one",
            ));
        }
        // A CPU ab may not use would make its trial fail to start, which
        // the start barrier then waited 30 s for.
        let may = commbench_core::placement::current_affinity();
        if let Some(c) = [c0, c1].into_iter().find(|c| !may.cpus().contains(c)) {
            return Err(crate::usage(format!(
                "--duet-cpus: CPU {c} is not one this process may use ({may}); give two of those"
            )));
        }
        Placement::Duet([c0, c1])
    } else if let Some(c) = a.shared_cpu {
        let may = commbench_core::placement::current_affinity();
        if !may.cpus().contains(&c) {
            return Err(crate::usage(format!(
                "--shared-cpu: CPU {c} is not one this process may use ({may}); give one of those"
            )));
        }
        Placement::Shared(c)
    } else {
        Placement::Sequential(Some(
            a.cpus
                .clone()
                .unwrap_or_else(commbench_core::placement::current_affinity),
        ))
    };
    let (min_pairs, max_pairs) = match a.runs {
        Some(n) => (n, n),
        None => (a.min_pairs, a.max_pairs),
    };
    if max_pairs < min_pairs {
        return Err(crate::usage(format!(
            "--max-pairs {max_pairs} is below --min-pairs {min_pairs}"
        )));
    }
    let base = side(vals[0])?;
    vals[1..]
        .iter()
        .map(|v| {
            Ok(AbSpec {
                name: name.clone(),
                sides: [base.clone(), side(v)?],
                template: template.join(" "),
                placement: placement.clone(),
                min_pairs: min_pairs as usize,
                max_pairs: max_pairs as usize,
                budget: a.budget,
                warmup_pairs: a.warmup as usize,
                seed: a.seed,
                threshold: a.threshold / 100.0,
                contamination: a.contamination / 100.0,
                contamination_scale: a.contamination_scale,
                change_spread: a.change_spread / 100.0,
                metrics: a.metrics.clone(),
                trial_timeout: a.trial_timeout,
                exec: exec.clone(),
            })
        })
        .collect()
}

/// A progress line on stderr: a live line on a terminal, else a line at
/// most every 15 s.
struct Line {
    tty: bool,
    last: Option<std::time::Instant>,
}

impl Progress for Line {
    fn pair_done(&mut self, s: &Status) {
        let redone = if s.redone > 0 {
            format!(" ({} redone)", s.redone)
        } else {
            String::new()
        };
        let text = if s.headlines == 0 {
            format!(
                "ab: {} of {} pairs before the first verdict{redone} · ≤ {:.0} s left",
                s.kept, s.min_pairs, s.left_s
            )
        } else {
            format!(
                "ab: {} pairs{redone} · {} of {} headline metrics decided · ≤ {:.0} s left",
                s.kept, s.decided, s.headlines, s.left_s
            )
        };
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{text}");
        } else if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(15))
        {
            let _ = writeln!(err, "{text}");
            self.last = Some(std::time::Instant::now());
        }
        let _ = err.flush();
    }
}

/// Runs `commbench ab`: one comparison per value after the first.
pub fn run(a: &AbArgs) -> Result<()> {
    let specs = specs(a)?;
    // SIGHUP (a closed terminal) as SIGINT: the running trial's tree is
    // killed, the temp dir removed, and ab exits 128 + the signal.
    let stop = commbench_core::sys::stop_on_signal_or_hangup();
    let tty = std::io::stderr().is_terminal();
    let mut reports = Vec::new();
    for spec in &specs {
        if specs.len() > 1 {
            eprintln!(
                "ab: {} = {} against {}",
                spec.name, spec.sides[1].value, spec.sides[0].value
            );
        }
        let mut line = Line { tty, last: None };
        let report = match commbench_ab::run(spec, crate::labs::labs(), stop, &mut line) {
            Err(commbench_ab::AbError::Interrupted) if reports.is_empty() => {
                if tty {
                    eprintln!();
                }
                eprintln!(
                    "ab: interrupted in the warm-up, before any pair was kept; nothing to report"
                );
                std::process::exit(interrupted_code());
            }
            Err(commbench_ab::AbError::Interrupted) => break,
            r => r?,
        };
        if tty {
            eprintln!();
        }
        let interrupted = report.stop == commbench_ab::Stop::Interrupted;
        reports.push(report);
        if interrupted {
            break;
        }
    }
    let records: Vec<_> = reports.iter().flat_map(export::to_records).collect();
    // Kept in the store first: a measured result is written before
    // anything else can go wrong.
    let fp = commbench_core::env::Fingerprint::collect();
    crate::store::keep(&records, &fp.to_value());
    let given = a.format.map(|f| crate::output::value_name(&f));
    let chosen = crate::output::AB.choose("ab", given.as_deref(), a.output.as_deref())?;
    let format = AbFormat::from_str(chosen, true).unwrap_or(AbFormat::Table);
    let tables = || {
        reports
            .iter()
            .map(|r| export::table(r, a.all))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let text = match format {
        AbFormat::Table => Some(tables()),
        AbFormat::Bmf => Some(pretty(&merged(
            reports.iter().map(|r| export::bmf(r, a.all)),
        ))),
        AbFormat::GithubBenchmark => {
            let tool = match a.github_tool {
                GithubToolArg::Smaller => GithubTool::Smaller,
                GithubToolArg::Bigger => GithubTool::Bigger,
            };
            Some(pretty(&merged(
                reports.iter().map(|r| export::github(r, tool, a.all)),
            )))
        }
        AbFormat::Csv | AbFormat::Json | AbFormat::Jsonl => None,
    };
    match text {
        Some(t) => write_text(a.output.as_ref(), &t)?,
        None => {
            let out = crate::output::OutputArgs {
                format: Some(match format {
                    AbFormat::Csv => crate::output::FormatArg::Csv,
                    AbFormat::Json => crate::output::FormatArg::Json,
                    _ => crate::output::FormatArg::Jsonl,
                }),
                output: a.output.clone(),
            };
            out.write_with(&records, &fp.to_value())?;
        }
    }
    if let Some(p) = &a.export_json {
        write_text(Some(p), &pretty(&commbench_ab::hyperfine::json(&reports)))?;
    }
    if let Some(p) = &a.export_markdown {
        write_text(Some(p), &commbench_ab::hyperfine::markdown(&reports))?;
    }
    if format != AbFormat::Table || a.output.is_some() {
        // The verdicts on stderr when stdout carries data.
        eprint!(
            "{}",
            reports
                .iter()
                .map(|r| export::table(r, false))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    if let Some(pct) = a.fail_on_regression {
        let bad: Vec<String> = reports
            .iter()
            .flat_map(|r| {
                r.headlines().filter(|m| m.regressed_beyond(pct)).map(|m| {
                    format!(
                        "{} = {}: {} {}",
                        r.spec.name,
                        r.spec.sides[1].value,
                        m.key.name(),
                        m.metric
                    )
                })
            })
            .collect();
        if !bad.is_empty() {
            eprintln!(
                "ab: regression beyond {pct}% (whole interval): {}",
                bad.join(", ")
            );
            std::process::exit(1);
        }
    }
    if reports.len() < specs.len()
        || reports
            .iter()
            .any(|r| r.stop == commbench_ab::Stop::Interrupted)
    {
        std::process::exit(interrupted_code());
    }
    Ok(())
}

/// Several comparisons' exports as one: objects merged (a name taken
/// twice gets the comparison's value appended), arrays concatenated.
fn merged(parts: impl Iterator<Item = serde_json::Value>) -> serde_json::Value {
    use serde_json::Value;
    let mut obj = serde_json::Map::new();
    let mut arr = Vec::new();
    let mut is_obj = true;
    for (i, p) in parts.enumerate() {
        match p {
            Value::Object(o) => {
                for (k, v) in o {
                    let k = if obj.contains_key(&k) {
                        format!("{k} #{}", i + 1)
                    } else {
                        k
                    };
                    obj.insert(k, v);
                }
            }
            Value::Array(v) => {
                is_obj = false;
                arr.extend(v);
            }
            _ => {}
        }
    }
    if is_obj {
        Value::Object(obj)
    } else {
        Value::Array(arr)
    }
}

/// 128 + the signal that stopped the run (130 for SIGINT, 129 for
/// SIGHUP, 143 for SIGTERM), as the signal itself would have ended it.
fn interrupted_code() -> i32 {
    match commbench_core::sys::stop_signal() {
        0 => 130,
        s => 128 + s,
    }
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

fn write_text(path: Option<&PathBuf>, text: &str) -> Result<()> {
    match path {
        Some(p) => commbench_core::artifact::write_atomic(p, |f| f.write_all(text.as_bytes()))
            .with_context(|| format!("cannot create output file {}", p.display())),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_refuse_nonsense() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("3m").unwrap(), Duration::from_secs(180));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-1m").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("1e300h").is_err());
    }

    #[test]
    fn one_quoted_command_is_split_like_a_shell() {
        let w = words(&["{bin} pipeline run --work 'delay:1 000'".into()]).unwrap();
        assert_eq!(w, ["{bin}", "pipeline", "run", "--work", "delay:1 000"]);
        let w = words(&["pipeline".into(), "run".into()]).unwrap();
        assert_eq!(w, ["pipeline", "run"]);
        assert!(words(&["'unbalanced".into(), "x y".into()]).is_ok());
        assert!(words(&["a 'unbalanced".into()]).is_err());
    }

    #[test]
    fn a_subcommand_runs_this_binary_and_a_path_runs_itself() {
        let t = vec!["{bin}".to_owned(), "timer".into()];
        let a = side_argv(&t, "bin", "./old/commbench").unwrap();
        assert_eq!(a[0], "./old/commbench");
        let t = vec![
            "pipeline".to_owned(),
            "run".into(),
            "--work".into(),
            "{w}".into(),
        ];
        let b = side_argv(&t, "w", "delay:10").unwrap();
        assert!(
            b[0].ends_with("commbench") || b[0].contains("commbench-"),
            "{b:?}"
        );
        assert_eq!(&b[1..], ["pipeline", "run", "--work", "delay:10"]);
    }
}
