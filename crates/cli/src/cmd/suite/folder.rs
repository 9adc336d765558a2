//! The suite's output folder: who may have prepared it, its lock, the
//! step journal, and what `--resume` reads back. Every file is opened
//! without following a link and without blocking, must be a regular
//! file, and is read within a bound; a step counts as finished by the
//! records it left, and kept steps are handed to the store as the parts
//! they were stored as before (so a replay adds nothing).
use anyhow::{Context, Result};
use commbench_core::lab::Lab;
use commbench_core::record::Record;
use std::path::{Path, PathBuf};

/// Reads one of the folder's files whole, within `max` bytes: a regular
/// file only (opened without following a link and without blocking, so
/// a FIFO planted in its place is refused, never waited on). `Ok(None)`
/// when it does not exist.
fn read_regular(path: &Path, max: u64) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let m = f.metadata().map_err(|e| e.to_string())?;
    if !m.is_file() {
        return Err(format!(
            "{} is {}, not a regular file",
            path.display(),
            commbench_store::file_kind(m.file_type())
        ));
    }
    if m.len() > max {
        return Err(format!(
            "{} holds {} bytes, more than a suite writes ({} MiB at most)",
            path.display(),
            m.len(),
            max >> 20
        ));
    }
    let mut bytes = Vec::new();
    f.by_ref()
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "{} grew past {} MiB while read: not a suite's file",
            path.display(),
            max >> 20
        ));
    }
    Ok(Some(bytes))
}

/// The records of a suite folder's `results.jsonl`, read as the suite
/// appends it: one record per line, step by step, each with its line as
/// written (a resume writes kept records back byte for byte: their
/// environment is the run's that measured them, never the resume's). A
/// last line cut short by a kill (no newline, not JSON) is left out with
/// a warning; any other bad line is an error.
pub(super) fn read_results(path: &Path) -> Result<Vec<(Record, Vec<u8>)>, String> {
    let bytes = read_regular(path, MAX_RESULTS_BYTES)?
        .ok_or_else(|| format!("{} does not exist", path.display()))?;
    let complete = bytes.ends_with(b"\n");
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    let n = if complete {
        lines.len() - 1
    } else {
        lines.len()
    };
    let mut out = Vec::new();
    for (i, line) in lines[..n].iter().enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        match serde_json::from_slice::<Record>(line) {
            Ok(mut r) => {
                r.environment = None;
                let mut raw = line.to_vec();
                raw.push(b'\n');
                out.push((r, raw));
            }
            Err(_) if i + 1 == n && !complete => {
                eprintln!(
                    "suite: {}: the last line was cut short (the run was killed while writing it); left out",
                    path.display()
                );
            }
            Err(e) => return Err(format!("{} line {}: {e}", path.display(), i + 1)),
        }
    }
    Ok(out)
}

/// A suite's `results.jsonl` is bounded: resuming never reads more.
const MAX_RESULTS_BYTES: u64 = 256 << 20;
/// The journal holds a few lines per step.
const MAX_JOURNAL_BYTES: u64 = 1 << 20;

/// A string metric of a record.
fn metric_str<'a>(r: &'a Record, name: &str) -> Option<&'a str> {
    r.metrics.get(name).and_then(|v| v.as_str())
}

/// What a previous run of a folder left: the records of the steps it
/// finished, those steps, and the run id they were stored under.
pub(super) struct Resumed {
    pub kept: Vec<Record>,
    /// The kept records' lines as the folder holds them.
    pub kept_lines: Vec<u8>,
    pub done: Vec<String>,
    pub run_id: Option<String>,
}

/// Records of a previous run in `dir` and the steps it finished. A step
/// counts as finished by what its records hold, not by its status line
/// alone: an "ok" step record with none of the step's lab records, or with
/// fewer than it says it wrote, is run again.
pub(super) fn resumed(dir: &Path, all: &[&dyn Lab]) -> Result<Resumed> {
    let path = dir.join(RESULTS);
    let records = read_results(&path).map_err(|e| {
        crate::usage(format!(
            "--resume {}: {e} (give the folder of a suite run)",
            dir.display()
        ))
    })?;
    let step_of = |lab: &str| {
        all.iter()
            .find(|s| s.record_labs().contains(&lab))
            .map(|s| s.name())
    };
    let mut held: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for (r, _) in records.iter().filter(|(r, _)| r.lab != "suite") {
        if let Some(s) = step_of(&r.lab) {
            *held.entry(s).or_default() += 1;
        }
    }
    let mut done: Vec<String> = Vec::new();
    for (r, _) in records.iter().filter(|(r, _)| {
        r.lab == "suite" && r.test == "step" && metric_str(r, "status") == Some("ok")
    }) {
        let Some(step) = r.params.get("step").and_then(|v| v.as_str()) else {
            continue;
        };
        let have = held.get(step).copied().unwrap_or(0);
        let said = r.metrics.get("records").and_then(|v| v.as_u64());
        if have == 0 || said.is_some_and(|n| n != have) {
            eprintln!(
                "suite: {step}: its step record says ok but {} holds {have} of its records{}; it runs again",
                path.display(),
                said.map(|n| format!(" (it wrote {n})")).unwrap_or_default()
            );
            continue;
        }
        if !done.iter().any(|d| d == step) {
            done.push(step.to_owned());
        }
    }
    let is_done = |step: Option<&str>| step.is_some_and(|s| done.iter().any(|d| d == s));
    let mut kept = Vec::new();
    let mut kept_lines = Vec::new();
    for (r, raw) in records {
        let keep = if r.lab == "suite" {
            is_done(r.params.get("step").and_then(|v| v.as_str()))
        } else {
            is_done(step_of(&r.lab))
        };
        if keep {
            kept.push(r);
            kept_lines.extend_from_slice(&raw);
        }
    }
    let run_id = kept
        .iter()
        .filter(|r| r.lab == "suite")
        .filter_map(|r| metric_str(r, "store_run"))
        .find(|id| !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned);
    Ok(Resumed {
        kept,
        kept_lines,
        done,
        run_id,
    })
}

/// What a folder's run asked for, from its journal's last `begin` (a
/// resume that added a step on purpose asked for it too): the preset and
/// the steps (its --only/--skip). `steps` is None for a folder written
/// before the journal recorded them.
pub(super) struct Asked {
    pub preset: Option<String>,
    pub steps: Option<Vec<String>>,
}

/// Reads [`Asked`] from `dir`'s journal (None: no journal, or no begin
/// line in it). A journal that is not a regular file is an error.
pub(super) fn asked(dir: &Path) -> Result<Option<Asked>> {
    let path = dir.join(JOURNAL);
    let bytes = read_regular(&path, MAX_JOURNAL_BYTES).map_err(|e| {
        crate::usage(format!(
            "--resume {}: {e} (give the folder of a suite run)",
            dir.display()
        ))
    })?;
    let Some(bytes) = bytes else { return Ok(None) };
    for line in bytes.rsplit(|&b| b == b'\n') {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if v.get("event").and_then(|e| e.as_str()) != Some("begin") {
            continue;
        }
        let steps = v.get("steps").and_then(|s| s.as_array()).map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        });
        return Ok(Some(Asked {
            preset: v.get("preset").and_then(|p| p.as_str()).map(str::to_owned),
            steps,
        }));
    }
    Ok(None)
}

/// Whether `dir` holds a suite run already (its results or journal as
/// regular files): `--out` there would overwrite it. A symlink planted
/// under those names is not a run (it is replaced, never followed).
pub(super) fn holds_a_run(dir: &Path) -> bool {
    [RESULTS, JOURNAL]
        .iter()
        .any(|f| std::fs::symlink_metadata(dir.join(f)).is_ok_and(|m| m.is_file() && m.len() > 0))
}

/// Removes a previous run's files for `--out DIR --force`.
pub(super) fn clear_run(dir: &Path) -> Result<()> {
    for f in [RESULTS, JOURNAL, "report.html"] {
        match std::fs::remove_file(dir.join(f)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| format!("cannot remove {}", dir.join(f).display()))
            }
        }
    }
    Ok(())
}

/// The folder's files.
pub(super) const RESULTS: &str = "results.jsonl";
const JOURNAL: &str = "suite.journal";
const LOCK: &str = ".commbench-suite.lock";

/// Refuses an output folder that someone else could have prepared: owned
/// by another user, or writable by others (where they could swap a file
/// for a symlink between two of our writes).
pub(super) fn check_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    // Reached through another user's link (`--out shared/out`, `shared/out`
    // theirs): refused, as every write refuses it.
    commbench_core::userfile::check_folder(dir).map_err(|e| crate::usage(e.to_string()))?;
    let m = std::fs::metadata(dir)
        .with_context(|| format!("cannot read output folder {}", dir.display()))?;
    if !m.is_dir() {
        return Err(crate::usage(format!("{} is not a folder", dir.display())));
    }
    let me = commbench_core::sys::euid();
    if m.uid() != me {
        return Err(crate::usage(format!(
            "output folder {} belongs to user {}, not to you (uid {me}): give a folder of your own",
            dir.display(),
            m.uid()
        )));
    }
    if m.mode() & 0o002 != 0 {
        return Err(crate::usage(format!(
            "output folder {} is writable by every user (mode {:o}): give a folder only you can write, or `chmod o-w` it",
            dir.display(),
            m.mode() & 0o7777
        )));
    }
    if m.mode() & 0o020 != 0 {
        return Err(crate::usage(format!(
            "output folder {} is writable by its group (mode {:o}), whose members could plant files in it: give a folder only you can write, or `chmod g-w` it",
            dir.display(),
            m.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Holds the folder's lock for the run: a second suite writing into the
/// same folder would interleave its records with ours.
pub(super) struct FolderLock {
    file: std::fs::File,
    path: PathBuf,
}

impl FolderLock {
    pub(super) fn take(dir: &Path) -> Result<Self> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let path = dir.join(LOCK);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .with_context(|| format!("cannot create the lock {}", path.display()))?;
        regular(&file, &path)?;
        if commbench_core::sys::try_lock_exclusive(file.as_raw_fd()).is_err() {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(crate::usage(format!(
                "another suite{} is writing into {}: wait for it to end, or give another --out",
                if holder.trim().is_empty() {
                    String::new()
                } else {
                    format!(" (pid {})", holder.trim())
                },
                dir.display()
            )));
        }
        file.set_len(0)?;
        write!(file, "{}", std::process::id())?;
        Ok(FolderLock { file, path })
    }
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = &self.file;
    }
}

/// Refuses a folder file that is not a regular file (a FIFO or device
/// planted in its place).
fn regular(f: &std::fs::File, path: &Path) -> Result<()> {
    let m = f
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !m.is_file() {
        return Err(crate::usage(format!(
            "{} is {}, not a regular file: remove it (a suite folder holds only its own files)",
            path.display(),
            commbench_store::file_kind(m.file_type())
        )));
    }
    Ok(())
}

/// Appends lines to one of the folder's files (never through a symlink,
/// never into a FIFO) and syncs them: what a finished step measured
/// survives a kill.
pub(super) fn append_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // A FIFO or device in the file's place is named before it is opened
    // (a FIFO without a reader would fail with a bare ENXIO).
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.is_file() && !m.file_type().is_symlink() {
            return Err(crate::usage(format!(
                "{} is {}, not a regular file: remove it (a suite folder holds only its own files)",
                path.display(),
                commbench_store::file_kind(m.file_type())
            )));
        }
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    regular(&f, path)?;
    f.write_all(bytes)
        .and_then(|()| f.sync_data())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// One line of the step journal.
pub(super) fn journal(dir: &Path, event: serde_json::Value) -> Result<()> {
    let mut line = event.to_string();
    line.push('\n');
    append_synced(&dir.join(JOURNAL), line.as_bytes())
}

/// Whether the journal says this folder's records went to the store (only
/// asked of folders written before steps carried their store part). Read
/// line by line within a bound: a line that is not JSON (a byte of
/// garbage, a line cut by a kill) is reported and skipped.
fn journal_stored(dir: &Path) -> bool {
    let path = dir.join(JOURNAL);
    let bytes = match read_regular(&path, MAX_JOURNAL_BYTES) {
        Ok(b) => b.unwrap_or_default(),
        Err(e) => {
            eprintln!("suite: warning: {e}; the journal is left unread");
            return false;
        }
    };
    let mut stored = false;
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(v) => stored |= v.get("event").and_then(|e| e.as_str()) == Some("stored"),
            Err(e) => eprintln!(
                "suite: warning: {} line {}: not a journal entry ({e}); skipped",
                path.display(),
                i + 1
            ),
        }
    }
    stored
}

/// The kept records of a resumed folder as store parts, one per step,
/// under the part id its step record carries. Steps of a folder written
/// before step records carried one are stored only when the journal does
/// not say the folder was stored already.
pub(super) fn kept_parts(
    kept: &[Record],
    all: &[&dyn Lab],
    dir: &Path,
) -> Vec<(String, Vec<Record>)> {
    let step_of = |r: &Record| -> Option<String> {
        if r.lab == "suite" {
            r.params
                .get("step")
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        } else {
            all.iter()
                .find(|s| s.record_labs().contains(&r.lab.as_str()))
                .map(|s| s.name().to_owned())
        }
    };
    let mut by_step: Vec<(String, Vec<Record>)> = Vec::new();
    for r in kept {
        let Some(step) = step_of(r) else { continue };
        match by_step.iter_mut().find(|(s, _)| *s == step) {
            Some((_, v)) => v.push(r.clone()),
            None => by_step.push((step, vec![r.clone()])),
        }
    }
    let mut legacy_stored: Option<bool> = None;
    let mut parts = Vec::new();
    for (step, records) in by_step {
        let part = records
            .iter()
            .filter(|r| r.lab == "suite")
            .find_map(|r| metric_str(r, "store_part"))
            .map(str::to_owned);
        match part {
            Some(p) => parts.push((p, records)),
            None => {
                if !*legacy_stored.get_or_insert_with(|| journal_stored(dir)) {
                    parts.push((format!("{step}#kept"), records));
                }
            }
        }
    }
    parts
}
