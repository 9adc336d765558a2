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
  commbench ab -L work delay:1000,delay:1030 -- pipeline run --mode rtc --work {work} --repeat 1
  commbench ab -L bin ./old/commbench,./new/commbench -- '{bin} ipc reqres --transport pipe --count 20000 --repeat 1'
  commbench ab --duet -L bin ./old/commbench,./new/commbench -- '{bin} pcap extract f.pcap --threads 1'

Each trial runs the command once with `--format jsonl --output FILE` appended and reads its
records; records are matched by lab, test and their place among the test's records.")]
pub struct AbArgs {
    /// The varied parameter and its two values: `-L NAME A,B`; `{NAME}` in the command becomes A, then B.
    #[arg(short = 'L', long = "parameter-list", num_args = 2, value_names = ["NAME", "A,B"], required = true)]
    pub list: Vec<String>,
    /// Pin every trial of both sides to these CPUs (e.g. 1 or 0-1); default: the CPUs ab may use.
    #[arg(long, value_name = "LIST", value_parser = parse_cpus, conflicts_with = "duet")]
    pub cpus: Option<CpuList>,
    /// Run A and B at the same time on two CPUs (swapped each pair), each side's processes confined to its CPU: for commands whose threads block rather than spin (pcap extract --threads 1, mux, openflow bench).
    #[arg(long)]
    pub duet: bool,
    /// The two CPUs of a duet.
    #[arg(long, value_name = "CPU,CPU", value_parser = parse_two_cpus, requires = "duet")]
    pub duet_cpus: Option<[usize; 2]>,
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
    /// Redo a pair whose two trials waited for a CPU (run-queue delay over runnable time, plus steal) for shares more than PCT points apart.
    #[arg(long, value_name = "PCT", default_value_t = 5.0, value_parser = parse_pct)]
    pub contamination: f64,
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
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: AbFormat,
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
pub fn spec(a: &AbArgs) -> Result<AbSpec> {
    let [name, values] = a.list.as_slice() else {
        return Err(crate::usage("-L takes a name and two values: -L NAME A,B"));
    };
    if name.is_empty() || name.contains(['{', '}']) {
        return Err(crate::usage(format!("-L {name:?}: give a plain name")));
    }
    let vals: Vec<&str> = values.split(',').collect();
    let [va, vb] = vals.as_slice() else {
        return Err(crate::usage(format!(
            "-L {name} {values}: give exactly two values, A,B (got {})",
            vals.len()
        )));
    };
    let template = words(&a.command)?;
    let pat = format!("{{{name}}}");
    if !template.iter().any(|w| w.contains(&pat)) {
        return Err(crate::usage(format!(
            "the command never uses {pat}, so both sides would run the same command; for an A/A check give one value twice: -L bin ./commbench,./commbench -- '{{bin}} pipeline run'"
        )));
    }
    let sides = [
        Side {
            value: (*va).to_owned(),
            argv: side_argv(&template, name, va)?,
        },
        Side {
            value: (*vb).to_owned(),
            argv: side_argv(&template, name, vb)?,
        },
    ];
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
    } else {
        Placement::Sequential(Some(
            a.cpus
                .clone()
                .unwrap_or_else(commbench_core::placement::current_affinity),
        ))
    };
    if a.max_pairs < a.min_pairs {
        return Err(crate::usage(format!(
            "--max-pairs {} is below --min-pairs {}",
            a.max_pairs, a.min_pairs
        )));
    }
    Ok(AbSpec {
        name: name.clone(),
        sides,
        template: template.join(" "),
        placement,
        min_pairs: a.min_pairs as usize,
        max_pairs: a.max_pairs as usize,
        budget: a.budget,
        warmup_pairs: a.warmup as usize,
        seed: a.seed,
        threshold: a.threshold / 100.0,
        contamination: a.contamination / 100.0,
        metrics: a.metrics.clone(),
        trial_timeout: a.trial_timeout,
    })
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

/// Runs `commbench ab`.
pub fn run(a: &AbArgs) -> Result<()> {
    let spec = spec(a)?;
    // SIGHUP (a closed terminal) as SIGINT: the running trial's tree is
    // killed, the temp dir removed, and ab exits 128 + the signal.
    let stop = commbench_core::sys::stop_on_signal_or_hangup();
    let mut line = Line {
        tty: std::io::stderr().is_terminal(),
        last: None,
    };
    let report = match commbench_ab::run(&spec, crate::labs::labs(), stop, &mut line) {
        Err(commbench_ab::AbError::Interrupted) => {
            if line.tty {
                eprintln!();
            }
            eprintln!(
                "ab: interrupted in the warm-up, before any pair was kept; nothing to report"
            );
            std::process::exit(interrupted_code());
        }
        r => r?,
    };
    if line.tty {
        eprintln!();
    }
    let records = export::to_records(&report);
    // Kept in the store first: a measured result is written before
    // anything else can go wrong.
    let fp = commbench_core::env::Fingerprint::collect();
    crate::store::keep(&records, &fp.to_value());
    let text = match a.format {
        AbFormat::Table => Some(export::table(&report, a.all)),
        AbFormat::Bmf => Some(pretty(&export::bmf(&report, a.all))),
        AbFormat::GithubBenchmark => {
            let tool = match a.github_tool {
                GithubToolArg::Smaller => GithubTool::Smaller,
                GithubToolArg::Bigger => GithubTool::Bigger,
            };
            Some(pretty(&export::github(&report, tool, a.all)))
        }
        AbFormat::Csv | AbFormat::Json | AbFormat::Jsonl => None,
    };
    match text {
        Some(t) => write_text(a.output.as_ref(), &t)?,
        None => {
            let out = crate::output::OutputArgs {
                format: match a.format {
                    AbFormat::Csv => crate::output::FormatArg::Csv,
                    AbFormat::Json => crate::output::FormatArg::Json,
                    _ => crate::output::FormatArg::Jsonl,
                },
                output: a.output.clone(),
            };
            out.write_with(&records, &fp.to_value())?;
        }
    }
    if a.format != AbFormat::Table || a.output.is_some() {
        // The verdicts on stderr when stdout carries data.
        eprint!("{}", export::table(&report, false));
    }
    if let Some(pct) = a.fail_on_regression {
        let bad: Vec<String> = report
            .headlines()
            .filter(|m| m.regressed_beyond(pct))
            .map(|m| format!("{} {}", m.key.name(), m.metric))
            .collect();
        if !bad.is_empty() {
            eprintln!(
                "ab: regression beyond {pct}% (whole interval): {}",
                bad.join(", ")
            );
            std::process::exit(1);
        }
    }
    if report.stop == commbench_ab::Stop::Interrupted {
        std::process::exit(interrupted_code());
    }
    Ok(())
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
