//! CPU placement: the taskset list syntax (`0-14:2`, `1,3`, `0-3`), pinning
//! threads and processes with sched_setaffinity, and reading back what was
//! actually applied (seed: ipc-benchmark, which ran `taskset --cpu-list
//! 0-14:2` by hand and never recorded it).
//!
//! Invariants: a parsed [`CpuList`] is sorted, de-duplicated, non-empty and
//! names only CPUs below `CPU_SETSIZE`; [`CpuList::parse_online`]
//! additionally rejects CPUs that are not online, with a message naming the
//! online set.

use serde::Serialize;
use std::fmt;
use thiserror::Error;

/// Highest CPU number + 1 that a `cpu_set_t` can hold.
pub const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;

/// A CPU list that does not parse, names a CPU that is not there, or cannot be
/// applied.
#[derive(Debug, Error, PartialEq)]
pub enum PlacementError {
    /// The list does not parse.
    #[error(
        "bad CPU list '{input}': {reason} (expected taskset syntax such as 0-3, 1,3 or 0-14:2)"
    )]
    Syntax {
        /// The list as given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The list names a CPU that is not there.
    #[error("CPU {cpu} does not exist or is offline (online CPUs: {online})")]
    NoSuchCpu {
        /// The CPU asked for.
        cpu: usize,
        /// The online CPUs, in list form.
        online: String,
    },
    /// The system refused the placement.
    #[error("sched_setaffinity to {cpus} failed: {err}")]
    Apply {
        /// The CPU list that was to be applied.
        cpus: String,
        /// The system's error.
        err: String,
    },
}

/// Every placement error is the user's to fix, a refused sched_setaffinity
/// included (a CPU list the process may not use).
impl crate::error::IsUsage for PlacementError {
    fn is_usage(&self) -> bool {
        true
    }
}

/// A set of CPUs, sorted and unique.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub struct CpuList(Vec<usize>);

impl From<CpuList> for String {
    fn from(c: CpuList) -> String {
        c.to_string()
    }
}

impl CpuList {
    /// Parses taskset list syntax without checking which CPUs exist.
    pub fn parse(input: &str) -> Result<Self, PlacementError> {
        let err = |reason: &str| PlacementError::Syntax {
            input: input.to_owned(),
            reason: reason.to_owned(),
        };
        let num = |s: &str| -> Result<usize, PlacementError> {
            let s = s.trim();
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err(&format!("'{s}' is not a CPU number")));
            }
            let n: usize = s.parse().map_err(|_| err(&format!("'{s}' is too large")))?;
            if n >= MAX_CPUS {
                return Err(err(&format!("CPU {n} is beyond the limit of {MAX_CPUS}")));
            }
            Ok(n)
        };
        if input.trim().is_empty() {
            return Err(err("empty list"));
        }
        let mut cpus = Vec::new();
        for item in input.split(',') {
            let (range, stride) = match item.split_once(':') {
                Some((r, s)) => {
                    let s = num(s)?;
                    if s == 0 {
                        return Err(err("stride must be at least 1"));
                    }
                    (r, s)
                }
                None => (item, 1),
            };
            let (a, b) = match range.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => {
                    if stride != 1 {
                        return Err(err("a stride needs a range (a-b:s)"));
                    }
                    let n = num(range)?;
                    (n, n)
                }
            };
            if a > b {
                return Err(err(&format!("range {a}-{b} runs backwards")));
            }
            cpus.extend((a..=b).step_by(stride));
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }

    /// Parses and checks that every CPU is online.
    pub fn parse_online(input: &str) -> Result<Self, PlacementError> {
        let l = Self::parse(input)?;
        let online = online();
        if let Some(&cpu) = l.0.iter().find(|c| !online.0.contains(c)) {
            return Err(PlacementError::NoSuchCpu {
                cpu,
                online: online.to_string(),
            });
        }
        Ok(l)
    }

    /// The CPUs, ascending, without duplicates.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    /// A list of the given CPUs (sorted, duplicates and CPUs past [`MAX_CPUS`]
    /// dropped).
    pub fn from_cpus(mut v: Vec<usize>) -> Self {
        v.retain(|&c| c < MAX_CPUS);
        v.sort_unstable();
        v.dedup();
        CpuList(v)
    }

    #[allow(unsafe_code)]
    fn to_set(&self) -> libc::cpu_set_t {
        // SAFETY: cpu_set_t is plain bits; zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in &self.0 {
            // SAFETY: c < CPU_SETSIZE by construction.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        set
    }

    /// Pins the calling thread.
    pub fn pin_current_thread(&self) -> Result<(), PlacementError> {
        self.pin_pid(0)
    }

    /// Pins thread or process `pid` (0 = calling thread).
    #[allow(unsafe_code)]
    pub fn pin_pid(&self, pid: libc::pid_t) -> Result<(), PlacementError> {
        let set = self.to_set();
        // SAFETY: set is a valid cpu_set_t of the size passed.
        let rc =
            unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc != 0 {
            return Err(PlacementError::Apply {
                cpus: self.to_string(),
                err: std::io::Error::last_os_error().to_string(),
            });
        }
        Ok(())
    }
}

/// Affinity of thread/process `pid` (0 = calling thread).
#[allow(unsafe_code)]
pub fn affinity_of(pid: libc::pid_t) -> CpuList {
    // SAFETY: zeroed cpu_set_t is valid; getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is a live cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return CpuList(Vec::new());
    }
    CpuList(
        (0..MAX_CPUS)
            // SAFETY: i < CPU_SETSIZE.
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect(),
    )
}

/// Affinity of the calling thread, as actually applied.
pub fn current_affinity() -> CpuList {
    affinity_of(0)
}

/// Online CPUs (/sys/devices/system/cpu/online, or 0..available_parallelism).
pub fn online() -> CpuList {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| CpuList::parse(s.trim()).ok())
        .unwrap_or_else(|| CpuList((0..crate::rusage::online_cpus()).collect()))
}

/// The CPUs the threads of this process last ran on, now (field 39 of
/// `/proc/self/task/*/stat`): where an unpinned run was seen.
pub fn seen_cpus() -> Vec<usize> {
    let mut seen = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return seen;
    };
    for t in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        // The fields after the command name, which may hold spaces.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if let Some(cpu) = rest
            .split_whitespace()
            .nth(36)
            .and_then(|f| f.parse::<usize>().ok())
        {
            seen.push(cpu);
        }
    }
    seen.sort_unstable();
    seen.dedup();
    seen
}

/// The placement of a run's roles in words, as every record carries it
/// (`server cpu 1, client cpu 0`; `unpinned (seen on 0-1)`): a role pinned
/// to its CPUs, or unpinned and the CPUs its threads were `seen` on while
/// they ran, or, when nobody looked, the CPUs it was allowed
/// (`unpinned (allowed 0-1)`).
pub fn describe(roles: &[(&str, Option<&CpuList>)], seen: &[usize]) -> String {
    let unpinned = || {
        if seen.is_empty() {
            format!("unpinned (allowed {})", current_affinity())
        } else {
            format!("unpinned (seen on {})", CpuList::from_cpus(seen.to_vec()))
        }
    };
    if roles.iter().all(|(_, c)| c.is_none()) {
        return unpinned();
    }
    roles
        .iter()
        .map(|(role, cpus)| match cpus {
            Some(c) => format!("{role} cpu {c}"),
            None => format!("{role} {}", unpinned()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether roles placed so (`None`: unpinned) can hand work between
/// CPUs, the [`crate::lab::CROSS_CPU`] flag: false only when every role
/// is held to one and the same CPU (an unpinned role counts the CPUs
/// this thread may use).
pub fn crosses_cpus(roles: &[Option<&CpuList>]) -> bool {
    let mut all: Vec<usize> = Vec::new();
    for r in roles {
        match r {
            Some(c) => all.extend_from_slice(c.cpus()),
            None => all.extend_from_slice(current_affinity().cpus()),
        }
    }
    all.sort_unstable();
    all.dedup();
    all.len() > 1
}

impl fmt::Display for CpuList {
    /// Compact taskset form: runs of consecutive CPUs as ranges.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let mut i = 0;
        while i < self.0.len() {
            let mut j = i;
            while j + 1 < self.0.len() && self.0[j + 1] == self.0[j] + 1 {
                j += 1;
            }
            if j > i {
                parts.push(format!("{}-{}", self.0[i], self.0[j]));
            } else {
                parts.push(self.0[i].to_string());
            }
            i = j + 1;
        }
        write!(f, "{}", parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn good_lists() {
        assert_eq!(CpuList::parse("0-3").unwrap().cpus(), &[0, 1, 2, 3]);
        assert_eq!(CpuList::parse("1,3").unwrap().cpus(), &[1, 3]);
        assert_eq!(
            CpuList::parse("0-14:2").unwrap().cpus(),
            &[0, 2, 4, 6, 8, 10, 12, 14]
        );
        assert_eq!(CpuList::parse("3,1,1-2").unwrap().cpus(), &[1, 2, 3]);
        assert_eq!(CpuList::parse(" 5 ").unwrap().cpus(), &[5]);
    }

    #[test]
    fn bad_lists() {
        for bad in [
            "", "a", "1-", "-1", "3-1", "0-4:0", "1:2", "1,,2", "99999", "1.5",
        ] {
            let e = CpuList::parse(bad).unwrap_err();
            assert!(matches!(e, PlacementError::Syntax { .. }), "{bad}: {e}");
            assert!(e.to_string().contains("taskset syntax"));
        }
    }

    #[test]
    fn offline_cpu_is_named() {
        let e = CpuList::parse_online("1000").unwrap_err();
        assert!(
            matches!(e, PlacementError::NoSuchCpu { cpu: 1000, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("online CPUs"));
    }

    #[test]
    fn pin_and_read_back() {
        std::thread::spawn(|| {
            let l = CpuList::parse_online("0").unwrap();
            l.pin_current_thread().unwrap();
            assert_eq!(current_affinity(), l);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn display_round_trips() {
        let l = CpuList::parse("0-3,5,7-8,10-12").unwrap();
        assert_eq!(l.to_string(), "0-3,5,7-8,10-12");
        assert_eq!(CpuList::parse(&l.to_string()).unwrap(), l);
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(v in prop::collection::vec(0usize..200, 1..40)) {
            let l = CpuList::from_cpus(v);
            prop_assert_eq!(CpuList::parse(&l.to_string()).unwrap(), l);
        }

        #[test]
        fn never_panics(s in ".{0,20}") {
            let _ = CpuList::parse(&s);
        }
    }
}
