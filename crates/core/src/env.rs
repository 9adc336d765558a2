//! The environment fingerprint attached to every result: what machine, what
//! kernel and clock, what build, what command, when, and where the process
//! was actually allowed to run. Without it no two runs can be compared (every
//! seed's numbers lack half of this).
//!
//! Everything is read from /proc, /sys and uname; a value that cannot be read
//! is `null`, never a guess.

use crate::clock;
use crate::placement;
use serde::Serialize;

/// One CPU cache level as sysfs describes it.
#[derive(Debug, Clone, Serialize)]
pub struct Cache {
    /// Cache level (1, 2, 3).
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Size in KiB.
    pub size_kib: u64,
    /// The CPUs sharing this cache (sysfs `shared_cpu_list`).
    pub shared_with_cpus: Option<String>,
}

/// What a run ran on and how it was built: attached to every record on output,
/// so a number is never separated from the machine that made it.
#[derive(Debug, Clone, Serialize)]
pub struct Fingerprint {
    /// The tool's name (`commbench`).
    pub tool: String,
    /// The tool's version (Cargo package version).
    pub tool_version: String,
    /// The commit it was built from (`unknown` outside a git checkout).
    pub git_sha: String,
    /// `release` or `debug`; debug numbers are not representative.
    pub build_profile: String,
    /// The command line the run was started with.
    pub command_line: Vec<String>,
    /// When the run started (UTC, RFC 3339).
    pub started_utc: String,
    /// The host's name.
    pub hostname: Option<String>,
    /// The distribution (`PRETTY_NAME` of os-release).
    pub os: Option<String>,
    /// The kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// The CPU architecture (`x86_64`).
    pub arch: String,
    /// The CPU model name.
    pub cpu_model: Option<String>,
    /// Logical CPUs this process may run on ([`crate::rusage::online_cpus`]).
    pub logical_cpus: usize,
    /// Physical cores.
    pub physical_cores: Option<usize>,
    /// CPU sockets.
    pub sockets: Option<usize>,
    /// Whether simultaneous multithreading is on.
    pub smt: Option<bool>,
    /// The CPU caches of CPU 0.
    pub caches: Vec<Cache>,
    /// Total memory, KiB.
    pub memory_total_kib: Option<u64>,
    /// The kernel's clock source (`tsc`, `kvm-clock`, ...).
    pub clocksource: Option<String>,
    /// TSC frequency, Hz.
    pub tsc_hz: f64,
    /// How the TSC frequency was found.
    pub tsc_hz_source: clock::HzSource,
    /// Whether the TSC runs at a constant rate in every power state.
    pub tsc_invariant: bool,
    /// The CPU flags the invariance verdict rests on.
    pub tsc_flags: clock::Invariance,
    /// The smallest non-zero step seen between back-to-back TSC reads, ns.
    pub tsc_granularity_ns: f64,
    /// The CPU frequency governor of CPU 0.
    pub governor: Option<String>,
    /// CPU affinity of the process as applied (taskset list form).
    pub cpu_affinity: String,
    /// Load average (1, 5, 15 min) when the fingerprint was taken.
    pub load_average: [f64; 3],
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

#[allow(unsafe_code)]
fn utsname() -> (Option<String>, Option<String>) {
    // SAFETY: zeroed utsname is valid; uname fills NUL-terminated fields.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a live, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return (None, None);
    }
    let s = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        Some(String::from_utf8_lossy(&bytes).into_owned())
    };
    (s(&u.release), s(&u.nodename))
}

fn cpuinfo_field(info: &str, key: &str) -> Option<String> {
    info.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_owned())
    })
}

/// (physical cores, sockets) from the (physical id, core id) pairs.
fn topology(info: &str) -> (Option<usize>, Option<usize>) {
    let mut pairs = std::collections::BTreeSet::new();
    let mut sockets = std::collections::BTreeSet::new();
    let mut phys = None;
    for block in info.split("\n\n") {
        let p = cpuinfo_field(block, "physical id");
        let c = cpuinfo_field(block, "core id");
        if let (Some(p), Some(c)) = (p, c) {
            sockets.insert(p.clone());
            pairs.insert((p, c));
            phys = Some(());
        }
    }
    match phys {
        Some(()) => (Some(pairs.len()), Some(sockets.len())),
        None => (None, None),
    }
}

fn caches() -> Vec<Cache> {
    let mut out = Vec::new();
    for i in 0..8 {
        let base = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let Some(level) = read_trim(&format!("{base}/level")).and_then(|s| s.parse().ok()) else {
            break;
        };
        let kind = read_trim(&format!("{base}/type")).unwrap_or_default();
        let size_kib = read_trim(&format!("{base}/size"))
            .and_then(|s| {
                let s = s.trim_end_matches('K');
                if let Some(m) = s.strip_suffix('M') {
                    m.parse::<u64>().ok().map(|x| x * 1024)
                } else {
                    s.parse().ok()
                }
            })
            .unwrap_or(0);
        out.push(Cache {
            level,
            kind,
            size_kib,
            shared_with_cpus: read_trim(&format!("{base}/shared_cpu_list")),
        });
    }
    out
}

fn meminfo_total() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn os_name() -> Option<String> {
    let s = std::fs::read_to_string("/etc/os-release").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_owned())
}

/// Formats seconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn utc_rfc3339(secs: i64, millis: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-from-civil inverse: days since 1970-01-01 → (y, m, d).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Now, as RFC 3339 UTC.
pub fn now_utc() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    utc_rfc3339(d.as_secs() as i64, d.subsec_millis())
}

/// True when this code was compiled without optimisation.
pub const fn is_debug_build() -> bool {
    cfg!(debug_assertions)
}

/// The loud warning a debug build prints (the tateyama IPC benchmark report: release was
/// 2–5× faster than debug).
pub const DEBUG_WARNING: &str = "WARNING: this is a DEBUG build of commbench; its numbers are not representative \
(release builds run 2-5x faster). Build with `cargo build --release` or run `cargo run --release -- ...`.";

impl Fingerprint {
    /// Reads the fingerprint now.
    pub fn collect() -> Self {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let (kernel, hostname) = utsname();
        let (physical_cores, sockets) = topology(&info);
        let logical_cpus = crate::rusage::online_cpus();
        let tsc = clock::tsc();
        Fingerprint {
            tool: "commbench".into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            git_sha: option_env!("COMMBENCH_GIT_SHA").unwrap_or("unknown").into(),
            build_profile: if is_debug_build() { "debug" } else { "release" }.into(),
            command_line: std::env::args().collect(),
            started_utc: now_utc(),
            hostname,
            os: os_name(),
            kernel,
            arch: std::env::consts::ARCH.into(),
            cpu_model: cpuinfo_field(&info, "model name"),
            logical_cpus,
            physical_cores,
            sockets,
            smt: read_trim("/sys/devices/system/cpu/smt/active")
                .map(|s| s == "1")
                .or_else(|| physical_cores.map(|p| logical_cpus > p)),
            caches: caches(),
            memory_total_kib: meminfo_total(),
            clocksource: read_trim(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            ),
            tsc_hz: tsc.hz(),
            tsc_hz_source: tsc.source,
            tsc_invariant: tsc.invariance.usable(),
            tsc_flags: tsc.invariance.clone(),
            tsc_granularity_ns: tsc.granularity_ns(),
            governor: read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            cpu_affinity: placement::current_affinity().to_string(),
            load_average: crate::rusage::load_average(),
        }
    }

    /// As a JSON value (for [`crate::record::Document`]).
    pub fn to_value(&self) -> serde_json::Value {
        crate::record::to_value(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(utc_rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(utc_rfc3339(1_795_219_200, 0), "2026-11-21T00:00:00.000Z");
    }

    #[test]
    fn fingerprint_is_filled() {
        let f = Fingerprint::collect();
        assert!(f.logical_cpus >= 1);
        assert!(f.kernel.is_some());
        assert!(!f.cpu_affinity.is_empty());
        assert!(f.tsc_hz > 0.0);
        let j = serde_json::to_string(&f).unwrap();
        assert!(!j.contains("NaN"));
    }
}
