//! Where the results store is and how records reach it. `main` decides
//! once per process ([`configure`]); [`keep`] is called where records are
//! emitted ([`crate::output::OutputArgs::emit_with`], and the suite and
//! cbench writers that bypass it). A store failure is a warning on stderr,
//! never a failed run: the measurement is worth more than its history.
//!
//! Precedence: `--no-store`, then `--store PATH`, then the environment
//! (`COMMBENCH_NO_STORE=1`, `COMMBENCH_STORE=PATH`), then
//! `$XDG_DATA_HOME/commbench/results.db`.

use commbench_core::record::Record;
use commbench_store::{RunMeta, Store};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Whether and where this process keeps its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Off,
    At(PathBuf),
}

static CHOICE: OnceLock<Choice> = OnceLock::new();

/// Labs whose records describe the tool or other runs, not a measurement:
/// they are never stored.
const NOT_MEASURED: [&str; 4] = ["compare", "clean", "env", "history"];

fn env_on(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The store the flags and environment ask for.
pub fn choose(flag_path: Option<&Path>, flag_off: bool) -> Choice {
    if flag_off {
        return Choice::Off;
    }
    if let Some(p) = flag_path {
        return Choice::At(p.to_owned());
    }
    if env_on("COMMBENCH_NO_STORE") {
        return Choice::Off;
    }
    if let Some(p) = std::env::var_os("COMMBENCH_STORE").filter(|v| !v.is_empty()) {
        return Choice::At(PathBuf::from(p));
    }
    commbench_store::default_path().map_or(Choice::Off, Choice::At)
}

/// Sets the process's choice (once, from `main`).
pub fn configure(c: Choice) {
    let _ = CHOICE.set(c);
}

/// The process's choice (off when `main` did not decide).
pub fn choice() -> Choice {
    CHOICE.get().cloned().unwrap_or(Choice::Off)
}

/// Opens the configured store for a command that reads it (history,
/// compare --baseline): here a missing or unusable store is an error.
pub fn open_for_reading() -> anyhow::Result<Store> {
    match choice() {
        Choice::Off => Err(crate::usage(
            "the results store is disabled (--no-store or COMMBENCH_NO_STORE); give --store PATH",
        )),
        Choice::At(p) => Ok(Store::open(&p)?),
    }
}

/// The configured store if it already exists (reading never creates
/// one): where `compare` learns noise floors. A store that cannot be
/// opened is a warning, and compare goes on without it.
pub fn open_existing() -> Option<Store> {
    let Choice::At(p) = choice() else {
        return None;
    };
    if !p.exists() {
        return None;
    }
    match Store::open(&p) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("commbench: warning: results store not read for noise floors: {e}");
            None
        }
    }
}

/// Stores a run part by part (a suite's steps: `(part id, records)`),
/// each part once: a part the store already holds for `run_id` is skipped,
/// so a suite that replays what it kept never duplicates it. `Ok(None)`
/// when storing is off, else the number of records added.
pub fn keep_parts(
    run_id: &str,
    parts: &[(String, Vec<Record>)],
    environment: &Value,
) -> Result<Option<usize>, commbench_store::StoreError> {
    let Choice::At(path) = choice() else {
        return Ok(None);
    };
    let mut meta = RunMeta::from_environment(environment)?;
    meta.run_id = run_id.to_owned();
    let mut store: Option<Store> = None;
    let mut added = 0;
    for (part, records) in parts {
        let measured = measured(records);
        if measured.is_empty() {
            continue;
        }
        let s = match &mut store {
            Some(s) => s,
            None => store.insert(Store::open(&path)?),
        };
        if s.append_part(&meta, part, &measured)? {
            added += measured.len();
        }
    }
    Ok(Some(added))
}

/// The records that measured something (not the bookkeeping labs).
fn measured(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(|r| !NOT_MEASURED.contains(&r.lab.as_str()))
        .cloned()
        .collect()
}

/// Appends the measured records of this run, with its environment, to
/// the store; warns on stderr when that fails.
pub fn keep(records: &[Record], environment: &Value) {
    let Choice::At(path) = choice() else {
        return;
    };
    let measured = measured(records);
    if measured.is_empty() {
        return;
    }
    let res = RunMeta::from_environment(environment)
        .and_then(|meta| Store::open(&path)?.append(&meta, &measured));
    if let Err(e) = res {
        eprintln!("commbench: warning: results not kept in the history store: {e}");
    }
}

/// The earlier records of a (lab, test) on `host` in the results store,
/// for learning noise floors: only those of series with at least
/// `MIN_FLOOR_RUNS` records, the fewest a floor is learned from.
pub fn past_records(
    store: &Store,
    host: &str,
    lab: &str,
    test: &str,
) -> Vec<commbench_report::PastRecord> {
    store
        .records_of_series_with(host, lab, test, commbench_core::estimate::MIN_FLOOR_RUNS)
        .unwrap_or_default()
        .into_iter()
        .map(|s| commbench_report::PastRecord {
            started_unix: s.started_unix,
            git_sha: s.git_sha,
            record: s.record,
        })
        .collect()
}
