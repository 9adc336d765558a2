//! The pcap lab as the suite, the summary and `compare` see it: the seed's
//! question (how fast can headers be pulled from a capture, and is it I/O
//! bound?), the declared metrics, the suite step and the answer line.

use crate::{
    bench, gen, measure_extract, reader, BenchConfig, CacheState, ExtractConfig, GenConfig,
    PcapError,
};
use commbench_core::figure::FigureSpec;
use commbench_core::lab::answer::{is, median, of, ratio};
use commbench_core::lab::{
    Better, Lab, LabError, MetricSpec, Quantity, StepOutcome, SuiteBudget, SuiteCtx,
};
use commbench_core::{Record, Recorder};
use serde_json::Value;

/// The pcap lab.
pub struct PcapLab;

/// Repeats of each extraction configuration in the suite.
const REPEATS: usize = 5;

const EXTRACT: &[&str] = &["extract", "extract_gzip"];
const BENCH: &[&str] = &["bench"];

static METRICS: [MetricSpec; 10] = [
    MetricSpec::headline(
        "cpu_mb_s",
        "capture read per CPU-second",
        "MB/s",
        Better::Higher,
        Quantity::Cost,
        &[],
    ),
    MetricSpec::headline(
        "mb_s",
        "capture read per second (wall)",
        "MB/s",
        Better::Higher,
        Quantity::Time,
        &[],
    ),
    MetricSpec::other(
        "pkt_s",
        "packets per second (wall)",
        "pkt/s",
        Better::Higher,
        Quantity::Time,
        &[],
    ),
    MetricSpec::other(
        "cpu_ns_per_op",
        "CPU per packet",
        "ns",
        Better::Lower,
        Quantity::Cost,
        EXTRACT,
    ),
    MetricSpec::other(
        "cpu_ns_per_packet",
        "CPU per packet",
        "ns",
        Better::Lower,
        Quantity::Cost,
        BENCH,
    ),
    MetricSpec::other(
        "real_s_median",
        "elapsed (median run)",
        "s",
        Better::Lower,
        Quantity::Time,
        BENCH,
    ),
    MetricSpec::other(
        "user_s_median",
        "user CPU (median run)",
        "s",
        Better::Lower,
        Quantity::Cost,
        BENCH,
    ),
    MetricSpec::other(
        "sys_s_median",
        "system CPU (median run)",
        "s",
        Better::Lower,
        Quantity::Cost,
        BENCH,
    ),
    MetricSpec::other(
        "cpu_s_median",
        "CPU (median run)",
        "s",
        Better::Lower,
        Quantity::Cost,
        BENCH,
    ),
    MetricSpec::other(
        "wall_s",
        "elapsed",
        "s",
        Better::Lower,
        Quantity::Time,
        EXTRACT,
    ),
];

fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> PcapError + '_ {
    move |e| PcapError::Io {
        path: path.display().to_string(),
        source: e,
    }
}

impl Lab for PcapLab {
    fn name(&self) -> &'static str {
        "pcap"
    }
    fn record_labs(&self) -> &'static [&'static str] {
        &["pcap"]
    }
    fn question(&self) -> &'static str {
        "how fast can headers be pulled from a capture; is it I/O bound?"
    }
    fn figures(&self) -> Vec<FigureSpec> {
        crate::figures()
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        &METRICS
    }
    fn budget(&self) -> SuiteBudget {
        SuiteBudget {
            quick_s: 9,
            default_s: 25,
        }
    }
    /// Generates a capture (plain and gzip), extracts it with one thread
    /// and with all threads, and (when running as the commbench binary)
    /// benches it cold and warm once.
    fn suite_step(&self, ctx: &SuiteCtx, rec: &mut Recorder) -> Result<StepOutcome, LabError> {
        let mut out = StepOutcome::default();
        if out.cut_if_over(ctx, "pcap extract and bench") {
            return Ok(out);
        }
        let dir = commbench_core::artifact::TempDir::new("pcap")
            .map_err(io_err(&std::env::temp_dir()))?;
        let size: u64 = if ctx.quick() { 32 << 20 } else { 256 << 20 };
        let plain = dir.path().join("suite.pcap");
        let gz = dir.path().join("suite.pcap.gz");
        for (path, compression) in [
            (&plain, reader::Compression::None),
            (&gz, reader::Compression::Gzip),
        ] {
            rec.progress(&format!("pcap: generating {}", path.display()));
            let mut f = std::fs::File::create(path).map_err(io_err(path))?;
            let cfg = GenConfig {
                size,
                compression,
                zero_payload: compression != reader::Compression::None,
                ..Default::default()
            };
            gen::generate(&cfg, &mut f).map_err(io_err(path))?;
        }
        let all = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        // Every extraction configuration five times, interleaved; one
        // record per configuration (the run of median CPU throughput) with
        // each declared metric's samples and interval.
        let mut cfgs = Vec::new();
        for (path, test) in [(&plain, "extract"), (&gz, "extract_gzip")] {
            for threads in [1, all] {
                cfgs.push((path.display().to_string(), test, threads));
            }
        }
        let mut rounds: Vec<Record> = Vec::new();
        'rounds: for round in 0..REPEATS {
            for (path, test, threads) in &cfgs {
                if round == 0
                    && out.cut_if_over(ctx, format!("pcap {test} with {threads} thread(s)"))
                {
                    continue;
                }
                if round > 0 && ctx.over() {
                    break 'rounds;
                }
                rec.progress(&format!(
                    "pcap: {test} with {threads} thread(s) ({}/{REPEATS})",
                    round + 1
                ));
                let cfg = ExtractConfig {
                    inputs: vec![path.clone()],
                    threads: *threads,
                    ..Default::default()
                };
                let mut one = Recorder::new();
                measure_extract(&cfg, test, &mut one)?;
                rounds.extend(one.take());
            }
        }
        for r in commbench_core::lab::fold_repeats(self, rounds) {
            rec.push(r);
        }
        let exe = std::env::current_exe().ok();
        if let Some(exe) = exe.filter(|e| {
            e.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("commbench"))
        }) {
            if out.cut_if_over(ctx, "pcap bench cold/warm") {
                return Ok(out);
            }
            let cfg = BenchConfig {
                file: plain.clone(),
                caches: vec![CacheState::Cold, CacheState::Warm],
                runs: 1,
                ours: vec![
                    exe.display().to_string(),
                    "pcap".into(),
                    "extract".into(),
                    "-q".into(),
                    "-o".into(),
                    "/dev/null".into(),
                ],
                compare_cmd: None,
            };
            bench::run(&cfg, rec)?;
        }
        Ok(out)
    }
    fn answer(&self, recs: &[Record]) -> Option<String> {
        let r = of(recs, self.record_labs());
        let cpu = median(
            r.iter().copied(),
            |x| x.test == "extract" && x.params.get("threads").and_then(Value::as_u64) == Some(1),
            "cpu_mb_s",
        )?;
        let mut a = format!("extraction {:.1} GB/s per CPU-second", cpu / 1000.0);
        let real = |c: &str| {
            median(
                r.iter().copied(),
                |x| x.test == "bench" && is(x, "cache", c),
                "real_s_median",
            )
        };
        if let (Some(cold), Some(warm)) = (real("cold"), real("warm")) {
            let verdict = r
                .iter()
                .find(|x| x.test == "bench" && is(x, "cache", "cold"))
                .and_then(|x| x.metrics.get("verdict"))
                .and_then(Value::as_str)
                .map(|v| format!(" ({v})"))
                .unwrap_or_default();
            a.push_str(&format!(
                "; cold cache {} slower than warm{verdict}",
                ratio(cold, warm)
            ));
        }
        Some(a)
    }
}
