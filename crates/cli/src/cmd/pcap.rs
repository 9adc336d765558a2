//! `commbench pcap extract|gen|bench`: wiring for the pcap lab
//! (crates/pcap). Extraction writes packet fields (CSV / JSON Lines) to
//! stdout or `--output`, or Parquet to `--output` with the cargo feature
//! `parquet`; the bad-input summary goes to stderr.
use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use commbench_pcap::extract::{extract, ExtractConfig, ExtractReport, Progress};
use commbench_pcap::format::{Field, OutputFormat};
use commbench_pcap::gen::{generate, parse_size, GenConfig};
use commbench_pcap::reader::Compression;
use commbench_pcap::PcapError;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct PcapArgs {
    #[command(subcommand)]
    pub cmd: PcapCmd,
}

#[derive(Debug, Subcommand)]
pub enum PcapCmd {
    /// Extract header fields of every packet (pcap, pcapng; plain, gzip or zstd; `-` = stdin).
    Extract(ExtractArgs),
    /// Generate a deterministic, realistic capture.
    Gen(GenArgs),
    /// Time extraction with a cold and/or warm page cache, optionally against a peer command.
    Bench(BenchArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CacheArg {
    Cold,
    Warm,
    Both,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Capture file to extract (a regular file: the cache state is per file).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Page-cache state before each run.
    #[arg(long, value_enum, default_value = "both")]
    pub cache: CacheArg,
    /// Runs per tool and cache state.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// Peer command, `{}` is replaced by the file, e.g. 'tcpdump -nn -r {}'.
    #[arg(long, value_name = "CMD")]
    pub compare_cmd: Option<String>,
    /// Threads for our extraction (default: all CPUs; see `pcap extract --threads`).
    #[arg(long, value_name = "N", value_parser = crate::args::number_in(1usize, 256, "--threads must be between 1 and 256"))]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub out: crate::output::OutputArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum DataFormat {
    Csv,
    Jsonl,
    /// Parquet file (needs --output; in the default build).
    Parquet,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ParquetCompressionArg {
    /// Pages stored dictionary/RLE-encoded only.
    None,
    /// Snappy-compressed pages (what Spark, DuckDB and Polars write by default).
    Snappy,
}

#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// Capture files; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Output encoding (default: from --output's extension, .csv, .jsonl or
    /// .parquet; csv for a name without one; any other extension is refused).
    #[arg(long, value_enum)]
    pub format: Option<DataFormat>,
    /// Page compression of `--format parquet`.
    #[arg(long, value_enum, default_value = "snappy", value_name = "CODEC")]
    pub parquet_compression: ParquetCompressionArg,
    /// Comma-separated fields (default: all but `number`).
    #[arg(long, value_name = "LIST")]
    pub fields: Option<String>,
    /// Write to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Threads (default: all CPUs; 1 = one thread does everything; N > 1 = a
    /// reader/decompressor and N-1 workers for CSV, N for JSON Lines/Parquet).
    #[arg(long, value_name = "N", value_parser = crate::args::number_in(1usize, 256, "--threads must be between 1 and 256"))]
    pub threads: Option<usize>,
    /// Treat the first bad record as an error (exit 1).
    #[arg(long)]
    pub strict: bool,
    /// Omit the CSV header line.
    #[arg(long)]
    pub no_header: bool,
    /// Print no summary on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Map plain files instead of reading them into reused buffers (measured
    /// slower here: read() leaves each chunk in L2, mapped pages come from DRAM).
    #[arg(long)]
    pub mmap: bool,
}

#[derive(Debug, Args)]
pub struct GenArgs {
    /// Uncompressed capture size (e.g. 64M, 1G).
    #[arg(long, default_value = "64M")]
    pub size: String,
    /// Random seed (same seed, same bytes).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Compress with gzip.
    #[arg(long, conflicts_with = "zstd")]
    pub gzip: bool,
    /// Compress with zstd.
    #[arg(long)]
    pub zstd: bool,
    /// Nanosecond timestamps.
    #[arg(long)]
    pub nsec: bool,
    /// Snap length (bytes captured per packet).
    #[arg(long, default_value_t = 262_144, value_parser = clap::value_parser!(u32).range(14..=262_144))]
    pub snaplen: u32,
    /// All-zero payloads (compress ~50:1).
    #[arg(long)]
    pub zero_payload: bool,
    /// Write the capture to FILE (default or `-`: standard output, never a terminal); .pcap, .pcap.gz (as --gzip) or .pcap.zst (as --zstd).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(a: &PcapArgs) -> Result<()> {
    match &a.cmd {
        PcapCmd::Extract(x) => run_extract(x),
        PcapCmd::Gen(g) => run_gen(g),
        PcapCmd::Bench(b) => run_bench(b),
    }
}

/// One thread per CPU, at most 256 (what --threads takes).
fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(256)
}

/// The output encoding by the one `-o` rule ([`crate::output::EXTRACT`]):
/// the extension's format (`.csv`, `.jsonl`/`.ndjson`, `.parquet`/`.pq`),
/// `--format` for a name without one, else CSV; a --format that
/// contradicts the extension, or any other extension (`.json`: one JSON
/// document, which extract does not write), is a usage error: never CSV
/// bytes in a file named `.parquet`.
fn data_format(given: Option<DataFormat>, output: Option<&std::path::Path>) -> Result<DataFormat> {
    let given = given.map(|g| crate::output::value_name(&g));
    let chosen = crate::output::EXTRACT.choose("pcap extract", given.as_deref(), output)?;
    Ok(DataFormat::from_str(chosen, true).unwrap_or(DataFormat::Csv))
}

fn run_extract(a: &ExtractArgs) -> Result<()> {
    let data = data_format(a.format, a.output.as_deref())?;
    let format = match data {
        DataFormat::Csv => OutputFormat::Csv,
        DataFormat::Jsonl => OutputFormat::Jsonl,
        DataFormat::Parquet => parquet_check(a)?,
    };
    let fields = match &a.fields {
        Some(s) => Field::parse_list(s).map_err(crate::usage_err)?,
        None => Field::defaults(),
    };
    let threads = a.threads.unwrap_or_else(default_threads);
    if a.files.iter().filter(|f| *f == "-").count() > 1 {
        return Err(crate::usage("standard input (-) can be given only once"));
    }
    let cfg = ExtractConfig {
        inputs: a.files.clone(),
        fields,
        format,
        threads,
        strict: a.strict,
        header: !a.no_header,
        mmap: a.mmap,
    };
    cfg.check_inputs()?;
    let total: u64 = a
        .files
        .iter()
        .filter(|f| *f != "-")
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    let bar = (!a.quiet && std::io::stderr().is_terminal() && total > 64 << 20).then(|| {
        let pb = indicatif::ProgressBar::new_spinner();
        pb.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        pb.enable_steady_tick(std::time::Duration::from_millis(200));
        pb
    });
    let t0 = std::time::Instant::now();
    let mut progress = |p: Progress| {
        if let Some(pb) = &bar {
            let s = t0.elapsed().as_secs_f64().max(1e-9);
            pb.set_message(format!(
                "{:.0} MiB, {} packets, {:.0} MB/s",
                p.stream_bytes as f64 / (1u64 << 20) as f64,
                p.packets,
                p.stream_bytes as f64 / 1e6 / s
            ));
        }
    };
    // A file output is written whole or not at all: into a temp file in
    // its folder, renamed into place when the extraction ended (devices
    // and pipes such as /dev/null are written in place).
    let into_file = |path: &std::path::Path,
                     run: &mut dyn FnMut(
        &mut std::fs::File,
    )
        -> Result<commbench_pcap::ExtractReport, PcapError>|
     -> Result<commbench_pcap::ExtractReport, PcapError> {
        let mut out = None;
        let mut none_read = false;
        let io = commbench_core::artifact::write_atomic(path, |f| match run(f) {
            // Not one input could be read: no output file (the failures
            // are reported below).
            Ok(r) if !r.files.is_empty() && r.failed_files().len() == r.files.len() => {
                out = Some(Ok(r));
                none_read = true;
                Err(std::io::Error::other("no input could be read"))
            }
            Ok(r) => {
                out = Some(Ok(r));
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                out = Some(Err(e));
                Err(std::io::Error::other(msg))
            }
        });
        match (out, io) {
            (Some(r), Ok(())) => r,
            (Some(r), Err(_)) if none_read => r,
            (Some(Err(e)), Err(_)) => Err(e),
            (_, Err(e)) => Err(PcapError::Output(e)),
            (None, Ok(())) => Err(PcapError::Output(std::io::Error::other(
                "the extraction did not run",
            ))),
        }
    };
    let res = match &a.output {
        #[cfg(feature = "parquet")]
        Some(path) if data == DataFormat::Parquet => {
            use commbench_pcap::parquet_out::{
                extract_parquet, ParquetCompression, ParquetOptions,
            };
            let opts = ParquetOptions {
                compression: match a.parquet_compression {
                    ParquetCompressionArg::None => ParquetCompression::None,
                    ParquetCompressionArg::Snappy => ParquetCompression::Snappy,
                },
                ..ParquetOptions::default()
            };
            into_file(path, &mut |f| {
                extract_parquet(
                    &cfg,
                    std::io::BufWriter::with_capacity(1 << 20, f),
                    &opts,
                    &mut progress,
                )
                .map(|(report, _)| report)
            })
        }
        Some(path) => into_file(path, &mut |f| extract(&cfg, f, &mut progress)),
        None => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            extract(&cfg, &mut lock, &mut progress)
        }
    };
    if let Some(pb) = &bar {
        pb.finish_and_clear();
    }
    let report = match res {
        Ok(r) => r,
        Err(PcapError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Err(PcapError::Output(e)) => return Err(anyhow::Error::new(e).context("writing output")),
        Err(e) => return Err(e.into()),
    };
    let failed = report.failed_files();
    if !a.quiet && failed.len() < report.files.len() {
        print_summary(&cfg, &report, t0.elapsed().as_secs_f64());
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "{} of {} input(s) could not be read: {}",
            failed.len(),
            report.files.len(),
            failed
                .iter()
                .map(|f| f.error.clone().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(())
}

/// `--format parquet`: a usage error without the feature or without
/// `--output` (the Parquet writer encodes the decoded fields itself).
fn parquet_check(a: &ExtractArgs) -> Result<OutputFormat> {
    if !cfg!(feature = "parquet") {
        return Err(crate::usage(
            "--format parquet is not built into this binary (built with \
             --no-default-features); rebuild with the default features \
             (`cargo build --release`), or use --format csv and convert it",
        ));
    }
    if a.output.is_none() {
        return Err(crate::usage(
            "--format parquet needs --output FILE (Parquet is not written to standard output)",
        ));
    }
    Ok(OutputFormat::Csv)
}

fn print_summary(cfg: &ExtractConfig, r: &ExtractReport, secs: f64) {
    let mut e = std::io::stderr().lock();
    let _ = writeln!(
        e,
        "extract: {} packets from {} file(s), {:.1} MB in {:.3} s ({:.0} MB/s){}",
        r.packets,
        r.files.len(),
        r.stream_bytes as f64 / 1e6,
        secs,
        r.stream_bytes as f64 / 1e6 / secs.max(1e-9),
        if r.snaplen_cut > 0 {
            format!(
                "; {} packets cut by the snaplen inside their headers",
                r.snaplen_cut
            )
        } else {
            String::new()
        }
    );
    for (lt, n) in r.issues.undecoded() {
        let lt = if *lt == u32::MAX {
            "(several others)".to_string()
        } else {
            lt.to_string()
        };
        let _ = writeln!(
            e,
            "link type {lt} not decoded: {n} records, fields after caplen left empty"
        );
    }
    for s in r.issues.skipped() {
        let _ = writeln!(
            e,
            "{}: skipped {} bytes at offsets {}..{} after a bad block length",
            cfg.inputs
                .get(s.file as usize)
                .map(String::as_str)
                .unwrap_or("?"),
            s.bytes(),
            s.from,
            s.to
        );
    }
    let shown = r.issues.skipped().len() as u64;
    if r.issues.skipped_ranges() > shown {
        let _ = writeln!(
            e,
            "skipped {} bytes in {} ranges after bad block lengths in all",
            r.issues.skipped_bytes(),
            r.issues.skipped_ranges()
        );
    }
    if r.issues.is_empty() {
        return;
    }
    let counts: Vec<String> = r
        .issues
        .counts()
        .iter()
        .map(|(k, n)| format!("{}={n}", k.name()))
        .collect();
    let _ = writeln!(e, "bad input: {} ({})", r.issues.total(), counts.join(", "));
    let mut first = r.issues.first().to_vec();
    first.sort_by_key(|a| (a.file, a.record, a.offset));
    for at in first.iter().take(10) {
        let _ = writeln!(
            e,
            "  {}: record {} at byte offset {}: {}",
            cfg.inputs
                .get(at.file as usize)
                .map(String::as_str)
                .unwrap_or("?"),
            at.record,
            at.offset,
            at.kind.name()
        );
    }
}

/// A binary capture is never written to a terminal (as gzip refuses to):
/// usage error, exit 2. A pipe, a file or `-o -` into a pipe is fine.
fn refuse_terminal(is_terminal: bool) -> Result<()> {
    if is_terminal {
        return Err(crate::usage(
            "refusing to write a binary capture to a terminal; use --output FILE or a pipe",
        ));
    }
    Ok(())
}

fn run_gen(a: &GenArgs) -> Result<()> {
    let size = parse_size(&a.size).map_err(crate::usage_err)?;
    let cfg = GenConfig {
        size,
        seed: a.seed,
        // `-o x.pcap.gz` compresses as --gzip does; a flag that
        // contradicts the name, or another extension, is refused.
        compression: match crate::output::CAPTURE.choose(
            "pcap gen",
            if a.gzip {
                Some("gzip")
            } else if a.zstd {
                Some("zstd")
            } else {
                None
            },
            a.output.as_deref(),
        )? {
            "gzip" => Compression::Gzip,
            "zstd" => Compression::Zstd,
            _ => Compression::None,
        },
        nsec: a.nsec,
        snaplen: a.snaplen,
        zero_payload: a.zero_payload,
    };
    let to_stdout = a
        .output
        .as_deref()
        .is_none_or(|p| p == std::path::Path::new("-"));
    let rep = if to_stdout {
        refuse_terminal(std::io::stdout().is_terminal())?;
        let stdout = std::io::stdout();
        let mut lock = stdout.lock();
        match generate(&cfg, &mut lock) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r.context("writing standard output")?,
        }
    } else {
        let path = a.output.as_deref().unwrap_or(std::path::Path::new("-"));
        // Through the checked writer, as every output (a new file renamed
        // into place; never through another user's link). `-o /dev/stdout`
        // or `-o /dev/tty` reach a terminal too: the check needs the
        // opened file, so it is made inside, before a byte is written.
        let mut terminal = false;
        let mut rep = None;
        let written = commbench_core::artifact::write_atomic(path, |f| {
            if f.is_terminal() {
                terminal = true;
                return Err(std::io::Error::other("a terminal"));
            }
            rep = Some(generate(&cfg, f)?);
            Ok(())
        });
        refuse_terminal(terminal)?;
        written.with_context(|| format!("writing {}", path.display()))?;
        rep.context("the capture was not generated")?
    };
    let mix: Vec<String> = rep
        .per_kind
        .iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    eprintln!(
        "gen: {} packets, {} bytes of pcap ({}), seed {}",
        rep.packets,
        rep.pcap_bytes,
        mix.join(" "),
        a.seed
    );
    Ok(())
}

fn run_bench(a: &BenchArgs) -> Result<()> {
    use commbench_pcap::bench::{BenchConfig, CacheState};
    if !a.file.is_file() {
        return Err(crate::usage(format!(
            "{}: not a regular file",
            a.file.display()
        )));
    }
    if let Some(c) = &a.compare_cmd {
        if !c.contains("{}") {
            return Err(crate::usage(
                "--compare-cmd needs {} where the file goes, e.g. 'tcpdump -nn -r {}'",
            ));
        }
    }
    let threads = a.threads.unwrap_or_else(default_threads);
    let exe = std::env::current_exe().context("cannot find the commbench binary")?;
    let cfg = BenchConfig {
        file: a.file.clone(),
        caches: match a.cache {
            CacheArg::Cold => vec![CacheState::Cold],
            CacheArg::Warm => vec![CacheState::Warm],
            CacheArg::Both => vec![CacheState::Cold, CacheState::Warm],
        },
        runs: a.runs as usize,
        ours: vec![
            exe.display().to_string(),
            "pcap".into(),
            "extract".into(),
            "-q".into(),
            "--threads".into(),
            threads.to_string(),
            "-o".into(),
            "/dev/null".into(),
        ],
        compare_cmd: a.compare_cmd.clone(),
    };
    let mut rec = crate::progress::recorder();
    let res = commbench_pcap::bench::run(&cfg, &mut rec);
    crate::progress::finish();
    let report = res?;
    for s in &report.summaries {
        let split = match &s.too_short {
            Some(_) => "user/sys too short".to_owned(),
            None => format!("user {:.3} s, sys {:.3} s", s.user_s, s.sys_s),
        };
        eprintln!(
            "{} {}: median real {:.3} s, CPU {:.3} s ({split}), {:.0} MB/s -> {}",
            s.tool,
            s.cache.name(),
            s.real_s,
            s.cpu_s,
            s.mb_s,
            s.verdict
        );
        if let Some(n) = &s.too_short {
            eprintln!("  {n}");
        }
    }
    if report.runs.iter().any(|r| !r.exit_ok) {
        eprintln!("warning: some runs exited with an error; check the command");
    }
    a.out.emit(&rec.take())
}

#[cfg(test)]
mod tests {
    use super::refuse_terminal;

    #[test]
    fn gen_refuses_a_terminal_and_accepts_anything_else() {
        let e = refuse_terminal(true).unwrap_err();
        assert!(e
            .to_string()
            .contains("refusing to write a binary capture to a terminal"));
        assert!(crate::error::is_usage(&e), "exit 2");
        assert!(refuse_terminal(false).is_ok());
    }
}
