//! Names and cleanup of the files a run leaves in /dev/shm and the temp dir.
//!
//! Every lab names its shared-memory segments, sockets and temp dirs with
//! [`name`]: `commbench-<lab>-<pid>-<start>-<seq>`, where `<start>` is the
//! owning process's start time in clock ticks since boot (from
//! /proc/PID/stat). That is the naming scheme `commbench clean` knows: an
//! entry is removed only when no process with that pid *and* that start
//! time is alive, so a live run is never touched, even after pid reuse
//! (seed: ipc-benchmark, which left `/dev/shm` files and `/tmp/tateyama-test-*`
//! dirs behind after every forced stop and told users to delete them by hand).
//!
//! Paths registered with [`register_cleanup`] are unlinked (empty registered
//! directories removed, nested ones deepest first) on SIGINT and
//! SIGTERM by a handler that only calls async-signal-safe functions, then
//! the signal is re-raised with its default action.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// Prefix of every artifact name.
pub const PREFIX: &str = "commbench-";

/// Where artifacts may live.
pub fn roots() -> Vec<PathBuf> {
    let mut v = vec![PathBuf::from("/dev/shm")];
    let t = std::env::temp_dir();
    if !v.contains(&t) {
        v.push(t);
    }
    v
}

/// Start time (ticks since boot, field 22 of /proc/PID/stat) of `pid`.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and ')': skip past the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh artifact name for `lab` (letters, digits and '_' only).
pub fn name(lab: &str) -> String {
    let lab: String = lab
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let pid = std::process::id();
    let start = process_start_ticks(pid).unwrap_or(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("{PREFIX}{lab}-{pid}-{start}-{seq}")
}

/// /dev/shm/<name>.
pub fn shm_path(name: &str) -> PathBuf {
    Path::new("/dev/shm").join(name)
}

/// The parts of an artifact name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The lab that made it (`ipc`, `pcap`, ...).
    pub lab: String,
    /// The process that made it.
    pub pid: u32,
    /// That process's start time (clock ticks since boot, `/proc/PID/stat`
    /// field 22), so a reused pid is not taken for the owner.
    pub start: u64,
    /// Sequence number within the process.
    pub seq: u32,
}

fn leading_digits(s: &str) -> Option<&str> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

/// Parses `commbench-<lab>-<pid>-<start>-<seq>[suffix]`; anything after
/// the seq digits (".sock", "-1") is allowed.
pub fn parse_name(file_name: &str) -> Option<Parsed> {
    let rest = file_name.strip_prefix(PREFIX)?;
    let parts: Vec<&str> = rest.split('-').collect();
    if parts.len() < 4 {
        return None;
    }
    let lab = parts[0];
    if lab.is_empty() || !lab.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let pid = parts[1].parse().ok()?;
    let start = parts[2].parse().ok()?;
    let seq = leading_digits(parts[3])?.parse().ok()?;
    Some(Parsed {
        lab: lab.to_owned(),
        pid,
        start,
        seq,
    })
}

/// True when the process that created an artifact still runs.
pub fn owner_alive(p: &Parsed) -> bool {
    match process_start_ticks(p.pid) {
        None => false,
        // start 0 means "unknown at creation": trust the pid alone.
        Some(start) => p.start == 0 || start == p.start,
    }
}

/// What `clean` did to one entry.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CleanEntry {
    /// The path of the entry.
    pub path: String,
    /// The lab whose name it carries.
    pub lab: String,
    /// The process that made it.
    pub pid: u32,
    /// `removed`, `live` (owner running: left alone), `would_remove`
    /// (dry run) or `error: ...`.
    pub action: String,
}

/// Removes artifacts of dead runs under the roots; live runs are left
/// alone and reported.
pub fn clean(dry_run: bool) -> Vec<CleanEntry> {
    clean_in(&roots(), dry_run)
}

/// [`clean`] over the given directories.
pub fn clean_in(dirs: &[PathBuf], dry_run: bool) -> Vec<CleanEntry> {
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let fname = e.file_name();
            let Some(p) = fname.to_str().and_then(parse_name) else {
                continue;
            };
            let path = e.path();
            let action = if owner_alive(&p) {
                "live".to_owned()
            } else if dry_run {
                "would_remove".to_owned()
            } else {
                let r = match e.file_type() {
                    Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
                    _ => std::fs::remove_file(&path),
                };
                match r {
                    Ok(()) => "removed".to_owned(),
                    Err(err) => format!("error: {err}"),
                }
            };
            out.push(CleanEntry {
                path: path.display().to_string(),
                lab: p.lab,
                pid: p.pid,
                action,
            });
        }
    }
    out
}

/// A temp dir named by [`name`], mode 0700, removed with its contents on
/// drop (and its path registered for signal cleanup while it lives).
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates a fresh private (0700) folder for `lab` under the temp dir.
    pub fn new(lab: &str) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let path = std::env::temp_dir().join(name(lab));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(TempDir { path })
    }
    /// The folder's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

const SLOTS: usize = 256;
static CLEANUP: [AtomicPtr<libc::c_char>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

/// A registration made by [`register_cleanup`]; dropping it unregisters
/// (without removing the file).
#[derive(Debug)]
pub struct CleanupGuard {
    slot: Option<usize>,
}

impl Drop for CleanupGuard {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            let p = CLEANUP[i].swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                // SAFETY: p came from CString::into_raw in register_cleanup.
                drop(unsafe { CString::from_raw(p) });
            }
        }
    }
}

/// Registers a file to be unlinked if the process gets SIGINT or SIGTERM
/// (call [`install_signal_cleanup`] once). Returns a guard that unregisters.
/// When all slots are taken the path is not registered (the guard is inert)
/// and `commbench clean` remains the way to remove it.
#[allow(unsafe_code)]
pub fn register_cleanup(path: &Path) -> CleanupGuard {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return CleanupGuard { slot: None };
    };
    let raw = c.into_raw();
    for (i, slot) in CLEANUP.iter().enumerate() {
        if slot
            .compare_exchange(
                std::ptr::null_mut(),
                raw,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            return CleanupGuard { slot: Some(i) };
        }
    }
    // SAFETY: raw came from into_raw above and was not stored.
    drop(unsafe { CString::from_raw(raw) });
    CleanupGuard { slot: None }
}

/// A message the signal handler writes to stderr before it cleans up:
/// what an interrupted run kept and how to go on (a leaked C string; the
/// previous one is leaked too, since the handler may be reading it).
static SIGNAL_NOTE: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Sets the note printed on SIGINT/SIGTERM/SIGHUP (see
/// [`install_signal_cleanup`]). A handful of notes per run leak a few
/// hundred bytes each; that is the price of a handler that never frees.
pub fn set_signal_note(note: &str) {
    let Ok(c) = CString::new(note.replace('\0', " ")) else {
        return;
    };
    SIGNAL_NOTE.store(c.into_raw(), Ordering::Release);
}

#[allow(unsafe_code)]
extern "C" fn on_signal(sig: libc::c_int) {
    let note = SIGNAL_NOTE.load(Ordering::Acquire);
    if !note.is_null() {
        // SAFETY: strlen and write are async-signal-safe; note is a valid
        // C string that is never freed.
        unsafe {
            let n = libc::strlen(note);
            libc::write(2, note as *const libc::c_void, n);
        }
    }
    for slot in CLEANUP.iter() {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: unlink is async-signal-safe; p is a valid C string
            // owned by the slot until unregistered.
            unsafe { libc::unlink(p) };
        }
    }
    // Then registered directories, empty now that their registered files
    // are gone (unlink fails on a directory; rmdir is signal-safe). A
    // directory holding registered ones empties only once they went, and
    // slots are not in registration order (freed ones are reused): passes
    // until one removes nothing, so nesting of any depth goes.
    for _ in 0..SLOTS {
        let mut removed = false;
        for slot in CLEANUP.iter() {
            let p = slot.load(Ordering::Acquire);
            // SAFETY: as above; rmdir only succeeds on an empty directory.
            if !p.is_null() && unsafe { libc::rmdir(p) } == 0 {
                removed = true;
            }
        }
        if !removed {
            break;
        }
    }
    // SAFETY: restoring the default action and re-raising are
    // async-signal-safe; the process then dies of the same signal.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Writes `path` whole or not at all: the bytes go to a new temp file in
/// the same folder (created exclusively, never through a symlink), are
/// synced, and the temp file is renamed over `path` only when `fill`
/// succeeded. A full disk or an error leaves the previous file as it was;
/// a symlink placed at `path` that leads to a regular file (or nowhere) is
/// replaced, never followed. The new file's mode is 0644 (less the
/// umask); [`write_atomic_mode`] gives another.
///
/// The path is walked from a folder held open, one component at a time
/// ([`crate::userfile`]): a symbolic link anywhere on it — a folder on
/// the way (`shared/out` of `-o shared/out/report.html`) or the file
/// itself — is followed only when it belongs to the caller or to root or
/// lies in a folder only they can change. Another user's link in a
/// shared folder is refused naming its owner, as the kernel's
/// `protected_symlinks` does on hosts that enable it, and the folder the
/// temp file is made in is the one checked (a folder swapped for a link
/// meanwhile is not entered).
///
/// A path that is not a file to replace — a character or block device, a
/// FIFO, a socket (`/dev/null`, a pipe), or a trusted symlink to one
/// (`/dev/stdout`) — is opened and written in place: renaming over it would
/// replace the device. A FIFO another user made in a sticky
/// world-writable folder is refused (`protected_fifos`). A FIFO is opened
/// without blocking: with no reader the write fails at once with a
/// message instead of hanging.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    write_atomic_mode(path, 0o644, fill)
}

/// [`write_atomic`] with the new file's mode (0600 for a secret: a
/// token, a key); a device or FIFO written in place keeps its own.
pub fn write_atomic_mode(
    path: &Path,
    mode: u32,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use crate::userfile::{self, Dest};
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let (dir, name) = match userfile::destination(path)? {
        Dest::InPlace(mut f) => {
            fill(&mut f)?;
            return std::io::Write::flush(&mut f);
        }
        Dest::Replace { dir, name } => (dir, name),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = format!(
        ".{}.{}-{nanos}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let c_tmp = CString::new(tmp.as_bytes()).map_err(std::io::Error::other)?;
    let c_name = CString::new(name.as_bytes()).map_err(std::io::Error::other)?;
    let fd = userfile::open_at(
        dir.fd.as_raw_fd(),
        &c_tmp,
        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
        mode,
    )
    .map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot create a file in {}: {e}", dir.shown.display()),
        )
    })?;
    let mut f = std::fs::File::from(fd);
    // The signal handler unlinks by path: this one names the temp file in
    // the folder held open, whatever happens to the path meanwhile.
    let _guard = register_cleanup(Path::new(&format!(
        "/proc/self/fd/{}/{tmp}",
        dir.fd.as_raw_fd()
    )));
    let res = fill(&mut f)
        .and_then(|()| std::io::Write::flush(&mut f))
        .and_then(|()| f.sync_all())
        .and_then(|()| userfile::rename_in(&dir, &c_tmp, &c_name));
    if res.is_err() {
        let _ = userfile::unlink_in(&dir, &c_tmp);
    }
    res
}

/// Installs the SIGINT/SIGTERM handler that unlinks registered paths.
#[allow(unsafe_code)]
pub fn install_signal_cleanup() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: on_signal only calls async-signal-safe functions.
            unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_a_symlink_instead_of_writing_through_it() {
        let dir = TempDir::new("atomic").unwrap();
        let target = dir.path().join("precious");
        std::fs::write(&target, b"keep me").unwrap();
        let out = dir.path().join("results.jsonl");
        std::os::unix::fs::symlink(&target, &out).unwrap();
        write_atomic(&out, |f| std::io::Write::write_all(f, b"new")).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        assert!(!std::fs::symlink_metadata(&out)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn write_atomic_writes_into_devices_instead_of_replacing_them() {
        use std::os::unix::fs::FileTypeExt;
        write_atomic(Path::new("/dev/null"), |f| {
            std::io::Write::write_all(f, b"discarded")
        })
        .unwrap();
        let m = std::fs::symlink_metadata("/dev/null").unwrap();
        assert!(m.file_type().is_char_device(), "/dev/null was replaced");
        // A symlink to a device is written through, not replaced.
        let dir = TempDir::new("atomic").unwrap();
        let link = dir.path().join("out");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        write_atomic(&link, |f| std::io::Write::write_all(f, b"x")).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    fn mkfifo(p: &Path) {
        let st = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success(), "mkfifo {}", p.display());
    }

    /// The read end of a FIFO, opened without waiting for a writer.
    fn fifo_reader(p: &Path) -> std::fs::File {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(p)
            .unwrap()
    }

    #[test]
    fn write_atomic_wrote_through_another_users_symlink_to_a_device_or_fifo() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new("atomic").unwrap();
        // A shared drop folder: sticky and writable by every user, as /tmp.
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let fifo = dir.path().join("trap");
        mkfifo(&fifo);
        let mut reader = fifo_reader(&fifo);
        let link = shared.join("report.html");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        if let Err(e) = std::os::unix::fs::lchown(&link, Some(65534), Some(65534)) {
            crate::testing::skip(
                "root",
                format!("cannot give the link to another user ({e})"),
            );
            return;
        }
        let err = write_atomic(&link, |f| std::io::Write::write_all(f, b"<html>secret"))
            .expect_err("written through another user's link");
        assert!(err.to_string().contains("user 65534"), "{err}");
        let mut got = Vec::new();
        let _ = std::io::Read::read_to_end(&mut reader, &mut got);
        assert!(got.is_empty(), "the trap got {got:?}");
        // The same through a device: refused, the link left as it was.
        let dev = shared.join("cmp.txt");
        std::os::unix::fs::symlink("/dev/null", &dev).unwrap();
        std::os::unix::fs::lchown(&dev, Some(65534), Some(65534)).unwrap();
        assert!(write_atomic(&dev, |f| std::io::Write::write_all(f, b"x")).is_err());
        assert!(std::fs::symlink_metadata(&dev)
            .unwrap()
            .file_type()
            .is_symlink());
        // A FIFO another user planted in the shared folder, named directly.
        let planted = shared.join("out.txt");
        mkfifo(&planted);
        let mut r2 = fifo_reader(&planted);
        std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).unwrap();
        assert!(write_atomic(&planted, |f| std::io::Write::write_all(f, b"x")).is_err());
        let mut got = Vec::new();
        let _ = std::io::Read::read_to_end(&mut r2, &mut got);
        assert!(got.is_empty(), "the planted FIFO got {got:?}");
        // The caller's own link to its own FIFO is still written through.
        let mine = dir.path().join("mine");
        std::os::unix::fs::symlink(&fifo, &mine).unwrap();
        write_atomic(&mine, |f| std::io::Write::write_all(f, b"ok")).unwrap();
        let mut got = Vec::new();
        let _ = std::io::Read::read_to_end(&mut reader, &mut got);
        assert_eq!(got, b"ok");
    }

    /// A folder of the test owned by another user (65534, `nobody`), or
    /// None (skipped) when this process cannot give files away.
    fn give_away(p: &Path) -> Option<()> {
        match std::os::unix::fs::lchown(p, Some(65534), Some(65534)) {
            Ok(()) => Some(()),
            Err(e) => {
                crate::testing::skip("root", format!("cannot give a file to another user ({e})"));
                None
            }
        }
    }

    /// Issue 50, item 2: `-o shared/out/report.html` with `shared/out`
    /// another user's link to a root-only folder replaced that folder's
    /// report.html (the link was a folder on the way, which the writer
    /// did not look at).
    #[test]
    fn write_atomic_followed_another_users_folder_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new("atomic").unwrap();
        let private = dir.path().join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(private.join("report.html"), b"root's own").unwrap();
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let out = shared.join("out");
        std::os::unix::fs::symlink(&private, &out).unwrap();
        if give_away(&out).is_none() {
            return;
        }
        let err = write_atomic(&out.join("report.html"), |f| {
            std::io::Write::write_all(f, b"<html>")
        })
        .expect_err("written through another user's folder link");
        let msg = err.to_string();
        assert!(
            msg.contains("user 65534") && msg.contains("shared/out"),
            "{msg}"
        );
        assert_eq!(
            std::fs::read(private.join("report.html")).unwrap(),
            b"root's own"
        );
        // Deeper, with the link in the middle, and `..` after it.
        let err = write_atomic(&out.join("../private/report.html"), |f| {
            std::io::Write::write_all(f, b"<html>")
        });
        assert!(err.is_err());
        assert_eq!(
            std::fs::read(private.join("report.html")).unwrap(),
            b"root's own"
        );
        // The same link in a folder of that user (their home), not sticky.
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).unwrap();
        let link = home.join("out");
        std::os::unix::fs::symlink(&private, &link).unwrap();
        give_away(&link).unwrap();
        give_away(&home).unwrap();
        let err = write_atomic(&link.join("report.html"), |f| {
            std::io::Write::write_all(f, b"<html>")
        })
        .expect_err("written through a link in another user's folder");
        assert!(err.to_string().contains("a folder of user 65534"), "{err}");
        assert_eq!(
            std::fs::read(private.join("report.html")).unwrap(),
            b"root's own"
        );
        // The caller's own link, and another user's link in a folder only
        // the caller can change (it was put there by the caller), are
        // followed.
        let mine = dir.path().join("mine");
        std::os::unix::fs::symlink(&private, &mine).unwrap();
        write_atomic(&mine.join("report.html"), |f| {
            std::io::Write::write_all(f, b"new")
        })
        .unwrap();
        assert_eq!(std::fs::read(private.join("report.html")).unwrap(), b"new");
        let given = dir.path().join("given");
        std::os::unix::fs::symlink(&private, &given).unwrap();
        give_away(&given).unwrap();
        write_atomic(&given.join("a.txt"), |f| std::io::Write::write_all(f, b"a")).unwrap();
        assert_eq!(std::fs::read(private.join("a.txt")).unwrap(), b"a");
    }

    #[test]
    fn write_atomic_refuses_a_link_loop_instead_of_spinning() {
        let dir = TempDir::new("atomic").unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let err = write_atomic(&a.join("out.txt"), |f| std::io::Write::write_all(f, b"x"))
            .expect_err("a loop was walked");
        assert!(
            err.to_string().contains("symbolic links on the way"),
            "{err}"
        );
    }

    #[test]
    fn write_atomic_writes_in_place_through_dev_fd() {
        // /dev/fd -> /proc/self/fd: a folder link of root, then a magic
        // link of the process to an open file (stdout redirected to a
        // file): written after what it holds, the file not replaced.
        use std::os::unix::fs::MetadataExt;
        let dir = TempDir::new("atomic").unwrap();
        let file = dir.path().join("stdout.txt");
        std::fs::write(&file, b"table\n").unwrap();
        let ino = std::fs::metadata(&file).unwrap().ino();
        let open = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        let path = PathBuf::from(format!(
            "/dev/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&open)
        ));
        write_atomic(&path, |f| std::io::Write::write_all(f, b"json\n")).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"table\njson\n");
        assert_eq!(std::fs::metadata(&file).unwrap().ino(), ino);
        assert!(std::fs::symlink_metadata("/dev/fd").is_ok());
    }

    #[test]
    fn write_atomic_hung_on_a_fifo_without_a_reader() {
        let dir = TempDir::new("atomic").unwrap();
        let fifo = dir.path().join("out");
        mkfifo(&fifo);
        let err = write_atomic(&fifo, |f| std::io::Write::write_all(f, b"x"))
            .expect_err("a FIFO without a reader was written");
        assert!(err.to_string().contains("reads from this FIFO"), "{err}");
        // With a reader it is written (and blocking again for the writes).
        let mut reader = fifo_reader(&fifo);
        write_atomic(&fifo, |f| std::io::Write::write_all(f, b"hello")).unwrap();
        let mut got = Vec::new();
        let _ = std::io::Read::read_to_end(&mut reader, &mut got);
        assert_eq!(got, b"hello");
    }

    #[test]
    fn write_atomic_writes_to_dev_stdout() {
        // /dev/stdout -> /proc/self/fd/1 -> a pipe or terminal: links of root
        // and of the process itself.
        write_atomic(Path::new("/dev/stdout"), |f| {
            std::io::Write::write_all(f, b"")
        })
        .unwrap();
    }

    #[test]
    fn write_atomic_that_fails_leaves_the_previous_file_and_no_temp() {
        let dir = TempDir::new("atomic").unwrap();
        let out = dir.path().join("report.html");
        std::fs::write(&out, b"<html>old</html>").unwrap();
        let err = write_atomic(&out, |f| {
            std::io::Write::write_all(f, b"<html>half")?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read(&out).unwrap(), b"<html>old</html>");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "the temp file was left behind");
    }

    #[test]
    fn names_parse_back() {
        let n = name("ipc");
        let p = parse_name(&n).unwrap();
        assert_eq!(p.lab, "ipc");
        assert_eq!(p.pid, std::process::id());
        assert!(owner_alive(&p));
        let with_suffix = format!("{n}.sock");
        assert_eq!(parse_name(&with_suffix).unwrap().pid, p.pid);
        assert!(parse_name("commbench-").is_none());
        assert!(parse_name("other-ipc-1-2-3").is_none());
        assert!(parse_name("commbench-ipc-x-2-3").is_none());
    }

    #[test]
    fn clean_removes_dead_and_keeps_live() {
        let dir = std::env::temp_dir().join(format!("cbclean-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let live = dir.join(name("test"));
        // A pid that cannot exist (above pid_max's hard limit of 2^22).
        let dead = dir.join("commbench-test-4194305-1-0");
        let dead_dir = dir.join("commbench-test-4194305-1-1");
        std::fs::write(&live, b"x").unwrap();
        std::fs::write(&dead, b"x").unwrap();
        std::fs::create_dir(&dead_dir).unwrap();
        std::fs::write(dead_dir.join("f"), b"x").unwrap();
        let unrelated = dir.join("not-ours");
        std::fs::write(&unrelated, b"x").unwrap();

        let dry = clean_in(std::slice::from_ref(&dir), true);
        assert_eq!(dry.iter().filter(|e| e.action == "would_remove").count(), 2);
        assert!(dead.exists());

        let r = clean_in(std::slice::from_ref(&dir), false);
        assert_eq!(r.len(), 3);
        assert!(live.exists() && unrelated.exists());
        assert!(!dead.exists() && !dead_dir.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tempdir_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let p;
        {
            let t = TempDir::new("test").unwrap();
            p = t.path().to_owned();
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        assert!(!p.exists());
    }

    #[test]
    fn register_and_unregister() {
        let g = register_cleanup(Path::new("/dev/shm/commbench-test-1-1-1"));
        assert!(g.slot.is_some());
        drop(g);
    }
}
