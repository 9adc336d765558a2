//! commbench lab 1 — ipc: request/response and streaming between processes
//! over shared memory, Unix sockets, pipes and TCP loopback, with the seed's
//! `reqres_loop` / `data_channel_write` interface kept exactly
//! (seed: ipc-benchmark-tateyama.ja.md).
//!
//! The library is what the CLI and the tests call: build an [`IpcConfig`],
//! call [`run`] (or [`run_interleaved`] for several transports side by
//! side), get an [`IpcReport`] and a [`Record`] in the [`Recorder`]. Every
//! message is verified (sequence, length, optional checksum), memory is
//! bounded (rings and socket buffers give backpressure, buffers are
//! allocated once per session), and every file a run creates is removed at
//! exit, on SIGINT/SIGTERM, or by `commbench clean` after a SIGKILL.
//!
//! Module map: [`transport`] (the trait), [`shm`]/[`ring`]/[`wait`]/
//! [`futex`] (the shared-memory path), [`stream`] (uds, tcp), [`pipe`],
//! [`frame`] (header, checksum, checks), [`session`] (the loops), `bench`
//! (orchestration, mt/mp), [`child`] (the mp client process), [`compat`]
//! (the seed's grammar and CSV).

pub mod artifacts;
pub mod bell;
mod bench;
pub mod child;
pub mod compat;
pub mod error;
pub mod figures;
pub mod frame;
pub mod futex;
pub mod lab;
pub mod pipe;
pub mod ring;
pub mod session;
pub mod shm;
pub mod stream;
pub mod transport;
pub mod wait;

use std::path::PathBuf;

use commbench_core::placement::CpuList;
use commbench_core::rusage::RunUsage;
use commbench_core::stats::Summary;
use commbench_core::{Record, Recorder};

pub use bench::CHILD_SUBCOMMAND;
pub use child::child_main;
pub use error::{IpcError, Result};
pub use session::{Mode, Workload};
pub use transport::TransportKind;
pub use wait::WaitPolicy;

/// Client layout: threads in one process, or one process per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Clients {
    /// One client process (this one), a thread per session.
    #[default]
    Mt,
    /// One client process per session (re-executed `commbench`).
    Mp,
}

impl Clients {
    /// Seed spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Clients::Mt => "mt",
            Clients::Mp => "mp",
        }
    }
}

/// One benchmark configuration.
#[derive(Debug, Clone)]
pub struct IpcConfig {
    /// Which transport.
    pub transport: TransportKind,
    /// reqres (sync/async/nores) or stream.
    pub workload: Workload,
    /// mt or mp clients.
    pub clients: Clients,
    /// Sessions, 1..=[`compat::MAX_SESSIONS`].
    pub sessions: u32,
    /// Payload bytes per message, <= 16 MiB.
    pub size: usize,
    /// Loops per session, >= 1.
    pub count: u64,
    /// shm wait policy.
    pub wait: WaitPolicy,
    /// Checksum every payload.
    pub verify: bool,
    /// Record round-trip latency (sync only).
    pub latency: bool,
    /// shm ring bytes per direction (also the pipe capacity); None: chosen
    /// by the run ([`IpcConfig::ring`]).
    pub ring_bytes: Option<usize>,
    /// Pin server threads.
    pub server_cpus: Option<CpuList>,
    /// Pin client threads / processes.
    pub client_cpus: Option<CpuList>,
    /// Server corrupts (session, sequence) — for tests of verification.
    pub corrupt: Option<(u32, u64)>,
    /// Executable to re-run as the mp client (default: this one).
    pub client_exe: Option<PathBuf>,
    /// Calibration aid: the server busy-waits this many ns (TSC) on every
    /// request before it answers, a known extra cost per operation for
    /// checking that a comparison finds a change of a known size.
    pub extra_work_ns: u64,
}

impl Default for IpcConfig {
    fn default() -> Self {
        IpcConfig {
            transport: TransportKind::Shm,
            workload: Workload::Reqres(Mode::Sync),
            clients: Clients::Mt,
            sessions: 1,
            size: 128,
            count: 100_000,
            wait: WaitPolicy::Adaptive,
            verify: false,
            latency: true,
            ring_bytes: None,
            server_cpus: None,
            client_cpus: None,
            corrupt: None,
            client_exe: None,
            extra_work_ns: 0,
        }
    }
}

impl IpcConfig {
    /// Check the limits (usage errors).
    pub fn validate(&self) -> Result<()> {
        let line = match self.workload {
            Workload::Stream => compat::DCW_USAGE,
            Workload::Reqres(_) => compat::REQRES_USAGE,
        };
        compat::check_limits(self.sessions as u64, self.size as u64, self.count, line)
            .map_err(|e| IpcError::usage(e.to_string().lines().next().unwrap_or("").into()))?;
        let ring = self.ring();
        if !ring.is_power_of_two() || ring < 4096 {
            return Err(IpcError::usage(format!(
                "ring size must be a power of two of at least 4096 bytes, got {ring}"
            )));
        }
        if ring > shm::MAX_RING_BYTES {
            return Err(IpcError::usage(format!(
                "ring size {ring} is above the limit of {} MiB per direction",
                shm::MAX_RING_BYTES >> 20
            )));
        }
        if self.transport == TransportKind::Shm {
            shm::check_space(self.sessions, ring)?;
        }
        Ok(())
    }

    /// The ring bytes per direction the run uses: as asked, else for a shm
    /// stream room for its messages ([`shm::stream_ring_bytes`]) when
    /// /dev/shm has the space, else [`shm::DEFAULT_RING_BYTES`] (a round
    /// trip holds one message at a time; the pipe capacity stays 1 MiB,
    /// the most an unprivileged pipe may have by default).
    pub fn ring(&self) -> usize {
        if let Some(n) = self.ring_bytes {
            return n;
        }
        if self.transport == TransportKind::Shm && self.workload == Workload::Stream {
            let n = shm::stream_ring_bytes(self.size);
            if n > shm::DEFAULT_RING_BYTES && shm::check_space(self.sessions, n).is_ok() {
                return n;
            }
        }
        shm::DEFAULT_RING_BYTES
    }

    /// Messages the run counts (a round trip is two).
    pub fn messages(&self) -> u64 {
        self.workload.messages_per_session(self.count) * self.sessions as u64
    }
}

/// Result of one run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IpcReport {
    /// Transport.
    pub transport: TransportKind,
    /// Workload.
    pub workload: Workload,
    /// mt/mp.
    pub clients: Clients,
    /// Sessions.
    pub sessions: u32,
    /// Payload bytes.
    pub size: usize,
    /// Loops per session.
    pub count: u64,
    /// Wait policy (shm only).
    pub wait: WaitPolicy,
    /// Server ready → all done, ns.
    pub elapsed_ns: u64,
    /// Messages counted (round trip = 2).
    pub messages: u64,
    /// Messages per second.
    pub msgs_per_s: f64,
    /// Payload GiB per second.
    pub gib_per_s: f64,
    /// Round-trip latency in ns (sync).
    pub latency: Option<Summary>,
    /// Server threads' CPU seconds.
    pub server_cpu_s: f64,
    /// Client threads' / processes' CPU seconds.
    pub client_cpu_s: f64,
    /// Process resource usage of the whole run.
    pub usage: RunUsage,
    /// Placement actually applied (taskset syntax), "-" for none, or
    /// "pair:LIST" when shm/block co-located each session's two ends on one
    /// CPU of LIST (round robin).
    pub server_cpus: String,
    /// Placement actually applied to clients, or "-".
    pub client_cpus: String,
    /// The server's busy-wait per request (ns; 0: none).
    pub extra_work_ns: u64,
    /// Ring bytes per direction (shm; the pipe's capacity for pipe).
    pub ring_bytes: usize,
    /// The ring size was asked (`--ring`), not chosen by the run.
    pub ring_asked: bool,
    /// How the shm endpoints waited: counts by outcome (None for the
    /// kernel transports).
    pub wait_stats: Option<wait::WaitStats>,
    /// The wait strategy the run used, in a word ("spin", "sleep",
    /// "spin+sleep"; "-" for the kernel transports).
    pub wait_strategy: String,
    /// Why: the placement decision and the waits' outcomes.
    pub wait_why: String,
}

impl IpcReport {
    /// The record for exporters (one row).
    pub fn record(&self, extra: &[(&str, serde_json::Value)]) -> Record {
        let test = match self.workload {
            Workload::Stream => "stream",
            Workload::Reqres(_) => "reqres",
        };
        let mut r = Record::new("ipc", test)
            .param("transport", self.transport.as_str())
            .param("mode", self.workload.as_str())
            .param("clients", self.clients.as_str())
            .param("sessions", self.sessions)
            .param("size", self.size)
            .param("count", self.count)
            .param(
                "wait",
                if self.transport == TransportKind::Shm {
                    self.wait.as_str()
                } else {
                    "-"
                },
            )
            .param("server_cpus", identity_cpus(&self.server_cpus))
            .param("client_cpus", identity_cpus(&self.client_cpus));
        // A placement chosen by the run itself (from the machine's load) is
        // environment, not identity: it goes with the metrics, so that two
        // runs of one command stay one series.
        for (k, v) in [
            ("server_cpus_applied", &self.server_cpus),
            ("client_cpus_applied", &self.client_cpus),
        ] {
            if identity_cpus(v) != v.as_str() {
                r.push_metric(k, v.as_str());
            }
        }
        if self.extra_work_ns > 0 {
            r.push_param("extra_work_ns", self.extra_work_ns);
        }
        // An asked ring is identity; one the run chose from the message
        // size goes with the metrics, so default runs stay one series.
        if self.ring_asked {
            r.push_param("ring_bytes", self.ring_bytes);
        } else if matches!(self.transport, TransportKind::Shm | TransportKind::Pipe) {
            r.push_metric("ring_bytes_applied", self.ring_bytes.to_string());
        }
        if self.transport == TransportKind::Shm {
            r.push_metric("wait_strategy", self.wait_strategy.as_str());
            r.push_metric("wait_why", self.wait_why.as_str());
            if let Some(w) = &self.wait_stats {
                r.push_metric("wait_waits", w.waits);
                r.push_metric("wait_spun", w.spun);
                r.push_metric("wait_slept", w.sleeps());
            }
        }
        for (k, v) in extra {
            r.push_param(k, v.clone());
        }
        r.push_metric("elapsed_s", self.elapsed_ns as f64 / 1e9);
        r.push_metric("messages", self.messages);
        r.push_metric("msgs_per_s", self.msgs_per_s);
        r.push_metric("gib_per_s", self.gib_per_s);
        if let Some(l) = &self.latency {
            r.push_metric("rt_p50_ns", l.p50);
            r.push_metric("rt_p90_ns", l.p90);
            r.push_metric("rt_p99_ns", l.p99);
            r.push_metric("rt_p999_ns", l.p999);
            r.push_metric("rt_p9999_ns", l.p9999);
            r.push_metric("rt_max_ns", l.max);
        }
        let per = |s: f64| s * 1e9 / self.messages.max(1) as f64;
        r.push_metric("server_cpu_ns_per_msg", per(self.server_cpu_s));
        r.push_metric("client_cpu_ns_per_msg", per(self.client_cpu_s));
        self.usage.add_to(&mut r);
        r.push_metric(
            "placement",
            placement_words(&self.server_cpus, &self.client_cpus),
        );
        r.push_metric(
            commbench_core::lab::CROSS_CPU,
            crosses_cpus(&self.server_cpus, &self.client_cpus),
        );
        r
    }
}

/// Whether the two ends could hand messages between CPUs (the
/// [`commbench_core::lab::CROSS_CPU`] flag): false only for both ends on
/// one CPU (`pair:` placements, or both pinned to the same single CPU).
fn crosses_cpus(server: &str, client: &str) -> bool {
    let parse = |applied: &str| match applied {
        "-" | "" => None,
        cpus => CpuList::parse(cpus).ok(),
    };
    if server.starts_with("pair:") || client.starts_with("pair:") {
        return false;
    }
    if server.starts_with("apart:") || client.starts_with("apart:") {
        return true;
    }
    let (s, c) = (parse(server), parse(client));
    commbench_core::placement::crosses_cpus(&[s.as_ref(), c.as_ref()])
}

/// Where the two ends ran, in words: `server cpu 1, client cpu 0`
/// (pinned as asked), `server and client on one CPU of 0-1` (the run's
/// own choice), or unpinned.
fn placement_words(server: &str, client: &str) -> String {
    let role = |name: &str, applied: &str| match applied {
        "-" | "" => format!(
            "{name} unpinned (allowed {})",
            commbench_core::placement::current_affinity()
        ),
        cpus => format!("{name} cpu {cpus}"),
    };
    match (server.split_once(':'), client.split_once(':')) {
        (Some(("pair", l)), _) | (_, Some(("pair", l))) => {
            format!("each session's server and client on one CPU of {l}")
        }
        (Some(("apart", l)), _) | (_, Some(("apart", l))) => {
            format!("each session's server and client on different CPUs of {l}")
        }
        _ => format!("{}, {}", role("server", server), role("client", client)),
    }
}

/// The placement that identifies a test: the one asked for, "-" when the
/// run chose it (`pair:LIST`, `apart:LIST`).
fn identity_cpus(applied: &str) -> &str {
    if applied.starts_with("pair:") || applied.starts_with("apart:") {
        "-"
    } else {
        applied
    }
}

/// The strategy in a word and why, from the run's placement and its
/// endpoints' wait counts.
fn strategy(cfg: &IpcConfig, plan: &bench::Plan, w: Option<&wait::WaitStats>) -> (String, String) {
    if cfg.transport != TransportKind::Shm {
        return ("-".into(), String::new());
    }
    let Some(w) = w.filter(|w| w.waits > 0 || cfg.wait != WaitPolicy::Adaptive) else {
        return (cfg.wait.as_str().into(), format!("{}; no waits", plan.why));
    };
    match cfg.wait {
        WaitPolicy::Spin => (
            "spin".into(),
            "--wait spin: busy-polls, never sleeps".into(),
        ),
        WaitPolicy::Block => (
            "sleep".into(),
            format!("--wait block: sleeps at once; {}", plan.why),
        ),
        WaitPolicy::Adaptive => {
            let share = w.spun as f64 / w.waits.max(1) as f64;
            let word = if share >= 0.9 {
                "spin"
            } else if share <= 0.1 {
                "sleep"
            } else {
                "spin+sleep"
            };
            (
                format!("adaptive:{word}"),
                format!("{}; {}", plan.why, w.describe()),
            )
        }
    }
}

/// Run one configuration without recording it.
pub fn run_report(cfg: &IpcConfig) -> Result<IpcReport> {
    // The ring is chosen once (it depends on /dev/shm's free space), so
    // the check, the run and the record all see the same size.
    let ring_asked = cfg.ring_bytes.is_some();
    let cfg = &IpcConfig {
        ring_bytes: Some(cfg.ring()),
        ..cfg.clone()
    };
    cfg.validate()?;
    let r = bench::run_once(cfg)?;
    let (wait_strategy, wait_why) = strategy(cfg, &r.plan, r.wait.as_ref());
    let messages = cfg.messages();
    let (_, msgs_per_s, gib_per_s) = compat::rates(messages, cfg.size, r.elapsed_ns);
    Ok(IpcReport {
        transport: cfg.transport,
        workload: cfg.workload,
        clients: cfg.clients,
        sessions: cfg.sessions,
        size: cfg.size,
        count: cfg.count,
        wait: cfg.wait,
        elapsed_ns: r.elapsed_ns,
        messages,
        msgs_per_s,
        gib_per_s,
        latency: r.latency.map(|h| h.summary()),
        server_cpu_s: r.server_cpu_s,
        client_cpu_s: r.client_cpu_s,
        usage: r.usage,
        server_cpus: bench::applied(&r.plan, &cfg.server_cpus),
        client_cpus: bench::applied(&r.plan, &cfg.client_cpus),
        extra_work_ns: cfg.extra_work_ns,
        ring_bytes: cfg.ring(),
        ring_asked,
        wait_stats: r.wait,
        wait_strategy,
        wait_why,
    })
}

/// Run one configuration and push its record.
pub fn run(cfg: &IpcConfig, rec: &mut Recorder) -> Result<IpcReport> {
    rec.progress(&format!(
        "ipc: {} {} {} x{} {} B",
        cfg.transport,
        cfg.workload.as_str(),
        cfg.clients.as_str(),
        cfg.sessions,
        cfg.size
    ));
    let r = run_report(cfg)?;
    rec.push(r.record(&[]));
    Ok(r)
}

/// Run several configurations interleaved (A B C A B C ...) `repeat` times
/// and record, per configuration, the run with the median message rate
/// (with the min and max rate of all its runs, and every declared metric's
/// samples and 95% interval over the runs), so drift on a shared machine
/// hits every configuration alike.
pub fn run_interleaved(
    cfgs: &[IpcConfig],
    repeat: u32,
    rec: &mut Recorder,
) -> Result<Vec<IpcReport>> {
    let plan = commbench_core::estimate::Repeats {
        min: repeat.max(1) as usize,
        max: repeat.max(1) as usize,
        target_rel_half_width: 0.0,
    };
    run_interleaved_repeats(cfgs, &plan, None, rec)
}

/// Like [`run_interleaved`], with adaptive repeats: at least `plan.min`
/// rounds, then more while a configuration's headline metric (CPU per
/// message) has a 95% interval wider than the plan's target, up to
/// `plan.max` rounds, and no round started after `deadline`.
pub fn run_interleaved_repeats(
    cfgs: &[IpcConfig],
    plan: &commbench_core::estimate::Repeats,
    deadline: Option<std::time::Instant>,
    rec: &mut Recorder,
) -> Result<Vec<IpcReport>> {
    for c in cfgs {
        c.validate()?;
    }
    let repeat = plan.min.max(1);
    let mut runs: Vec<Vec<IpcReport>> = cfgs.iter().map(|_| Vec::new()).collect();
    let mut round = 0;
    loop {
        let enough = round >= repeat
            && (round >= plan.max
                || deadline.is_some_and(|d| std::time::Instant::now() >= d)
                || !runs.iter().any(|v| {
                    let recs: Vec<Record> = v.iter().map(|r| r.record(&[])).collect();
                    commbench_core::lab::wants_more(&lab::IpcLab, &recs, plan)
                }));
        if enough {
            break;
        }
        round += 1;
        for (i, c) in cfgs.iter().enumerate() {
            rec.progress(&format!(
                "ipc: round {round}/{repeat}: {} {} {} B",
                c.transport,
                c.workload.as_str(),
                c.size
            ));
            runs[i].push(run_report(c)?);
        }
    }
    let mut out = Vec::new();
    for mut v in runs {
        v.sort_by(|a, b| a.msgs_per_s.total_cmp(&b.msgs_per_s));
        let min = v.first().map(|r| r.msgs_per_s).unwrap_or(f64::NAN);
        let max = v.last().map(|r| r.msgs_per_s).unwrap_or(f64::NAN);
        let p50s: Vec<f64> = v
            .iter()
            .filter_map(|r| r.latency.as_ref().map(|l| l.p50))
            .collect();
        let n = v.len();
        let each: Vec<Record> = v.iter().map(|r| r.record(&[])).collect();
        let median = v.swap_remove(n / 2);
        let mut rcd = median.record(&[("repeat", serde_json::json!(repeat))]);
        // Every declared metric over the repeats: samples, median, 95%
        // interval (the repeats are separate runs, interleaved).
        commbench_core::lab::attach_repeats(&lab::IpcLab, &mut rcd, &each);
        rcd.push_metric("msgs_per_s_min", min);
        rcd.push_metric("msgs_per_s_max", max);
        if !p50s.is_empty() {
            rcd.push_metric("rt_p50_ns_median", Summary::from_samples(&p50s).median);
        }
        rec.push(rcd);
        out.push(median);
    }
    Ok(out)
}

/// Run a seed-style command's single run and return its CSV line.
pub fn run_seed(run: &compat::SeedRun, base: &IpcConfig) -> Result<(String, IpcReport)> {
    let cfg = IpcConfig {
        workload: run.workload,
        clients: run.clients,
        sessions: run.sessions,
        size: run.msg_len,
        count: run.nloop,
        latency: false,
        ..base.clone()
    };
    let r = run_report(&cfg)?;
    Ok((compat::csv_line(run, r.elapsed_ns), r))
}

pub use figures::figures;
pub use lab::IpcLab;

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(size: usize) -> IpcConfig {
        IpcConfig {
            workload: Workload::Stream,
            size,
            ..IpcConfig::default()
        }
    }

    #[test]
    fn only_both_ends_on_one_cpu_is_not_a_cross_cpu_figure() {
        assert!(!crosses_cpus("pair:0-1", "pair:0-1"));
        assert!(crosses_cpus("apart:0-1", "apart:0-1"));
        assert!(!crosses_cpus("1", "1"));
        assert!(crosses_cpus("0", "1"));
        // Unpinned: as many CPUs as this thread may use.
        let many = commbench_core::placement::current_affinity().cpus().len() > 1;
        assert_eq!(crosses_cpus("-", "-"), many);
        assert_eq!(crosses_cpus("0", "-"), many);
    }

    #[test]
    fn a_stream_ring_holds_64_messages_between_1_and_4_mib() {
        assert_eq!(shm::stream_ring_bytes(65532), 4 << 20);
        assert_eq!(
            shm::stream_ring_bytes(32 << 10),
            4 << 20,
            "header pushes it past 2 MiB"
        );
        assert_eq!(shm::stream_ring_bytes((32 << 10) - 16), 2 << 20);
        assert_eq!(shm::stream_ring_bytes(1024), 1 << 20);
        assert_eq!(shm::stream_ring_bytes(0), 1 << 20);
        assert_eq!(shm::stream_ring_bytes(16 << 20), 4 << 20);
        assert_eq!(shm::stream_ring_bytes(usize::MAX / 2), 4 << 20);
        // `--size 18446744073709551615` overflowed the header's addition
        // before the size was checked (a panic, found by fuzz_args).
        assert_eq!(shm::stream_ring_bytes(usize::MAX), 4 << 20);
    }

    #[test]
    fn the_run_chooses_the_ring_only_when_none_is_asked() {
        assert_eq!(stream(65532).ring(), 4 << 20);
        assert_eq!(stream(128).ring(), shm::DEFAULT_RING_BYTES);
        let asked = IpcConfig {
            ring_bytes: Some(1 << 16),
            ..stream(65532)
        };
        assert_eq!(asked.ring(), 1 << 16);
        // A round trip holds one message: the default ring.
        let reqres = IpcConfig {
            size: 65532,
            ..IpcConfig::default()
        };
        assert_eq!(reqres.ring(), shm::DEFAULT_RING_BYTES);
        // The pipe's capacity is not scaled.
        let pipe = IpcConfig {
            transport: TransportKind::Pipe,
            ..stream(65532)
        };
        assert_eq!(pipe.ring(), shm::DEFAULT_RING_BYTES);
    }

    #[test]
    fn records_say_which_ring_and_whether_it_was_asked() {
        let cfg = stream(65532);
        let mut rep = run_report(&IpcConfig {
            count: 64,
            latency: false,
            ..cfg.clone()
        })
        .expect("a short stream runs");
        assert_eq!(rep.ring_bytes, 4 << 20);
        let rec = rep.record(&[]);
        assert!(!rec.params.contains_key("ring_bytes"));
        assert_eq!(rec.metrics["ring_bytes_applied"], "4194304");
        rep.ring_asked = true;
        let rec = rep.record(&[]);
        assert_eq!(rec.params["ring_bytes"], 4194304);
    }
}
