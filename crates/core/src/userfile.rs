//! Files at paths the user named: the one walk every write takes
//! ([`crate::artifact::write_atomic`]) and the one open every read of a
//! user-given input takes ([`read_input`]).
//!
//! Writing: a path is resolved one component at a time from a folder
//! held open (`openat`, `O_NOFOLLOW`), so a folder swapped for a link
//! after it was looked at is never entered. A symbolic link met on the
//! way, a folder component or the file itself, is followed only when it
//! is trusted: it belongs to the caller or to root, or it lies in a
//! folder only the caller or root can change (owned by one of them, not
//! sticky, not writable by group or others). A link another user placed
//! in a shared folder (`/tmp`, a 1777 drop folder, their own home) is
//! refused with its owner named: this is the kernel's
//! `fs.protected_symlinks` kept where the sysctl is off (containers,
//! many VMs), widened to every folder another user can write and to
//! folder components (`-o shared/out/report.html` with `shared/out` a
//! stranger's link). Root's and the caller's own links (`/dev/stdout`,
//! `/dev/fd/1`, a link in one's home) are followed as before.
//!
//! Reading: [`read_input`] opens without blocking (a FIFO with no writer
//! cannot hang the open), reads regular files only (a device or FIFO is
//! an error that says what it is) and at most a bound the caller gives
//! (`/dev/zero` as a PEM file was a 2 GiB allocation).

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The most symbolic links one path may lead through (the kernel's
/// `MAXSYMLINKS`): a loop is an error, not a hang.
const MAX_FOLLOWS: u32 = 40;
/// procfs's `f_type` (`PROC_SUPER_MAGIC`): its fd links are "magic",
/// naming an open file rather than a path.
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: a path with a NUL byte", name.to_string_lossy()),
        )
    })
}

/// `openat(dir, name, flags, mode)` with `O_CLOEXEC`.
#[allow(unsafe_code)]
pub(crate) fn open_at(dir: RawFd, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: name is a valid C string for the call; openat returns a new
    // descriptor that nothing else owns, which OwnedFd takes over.
    unsafe {
        let fd = crate::syscall!(openat(
            dir,
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint
        ))?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// `fstatat`; `follow` follows a final symbolic link.
#[allow(unsafe_code)]
pub(crate) fn stat_at(dir: RawFd, name: &CStr, follow: bool) -> io::Result<libc::stat> {
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    // SAFETY: an all-zero stat is a valid value of the plain C struct;
    // fstatat writes it whole on success and reads only the C string.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        crate::syscall!(fstatat(dir, name.as_ptr(), &mut st, flags))?;
        Ok(st)
    }
}

/// `fstat` of an open descriptor (an `O_PATH` one included).
#[allow(unsafe_code)]
pub(crate) fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: as in stat_at; fd is a descriptor the caller holds open.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        crate::syscall!(fstat(fd, &mut st))?;
        Ok(st)
    }
}

#[allow(unsafe_code)]
fn readlink_at(dir: RawFd, name: &CStr) -> io::Result<OsString> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: buf is writable for buf.len() bytes; readlinkat writes at
    // most that many and returns how many.
    let n = unsafe {
        crate::syscall!(readlinkat(
            dir,
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len()
        ))?
    } as usize;
    buf.truncate(n);
    Ok(OsStr::from_bytes(&buf).to_owned())
}

#[allow(unsafe_code)]
fn on_procfs(fd: RawFd) -> bool {
    // SAFETY: an all-zero statfs is valid; fstatfs writes it on success.
    unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        libc::fstatfs(fd, &mut s) == 0 && s.f_type as i64 == PROC_SUPER_MAGIC
    }
}

fn kind_of(mode: u32) -> u32 {
    mode & libc::S_IFMT
}

/// What a file type is, in words (for errors).
pub fn kind_name(mode: u32) -> &'static str {
    match kind_of(mode) {
        libc::S_IFDIR => "a folder",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFSOCK => "a socket",
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFREG => "a regular file",
        _ => "not a regular file",
    }
}

/// A device, FIFO or socket: written in place, never replaced.
pub(crate) fn is_special(mode: u32) -> bool {
    matches!(
        kind_of(mode),
        libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO | libc::S_IFSOCK
    )
}

/// A folder someone besides the caller and root may change: sticky (a
/// shared drop folder, /tmp), writable by group or others, or another
/// user's. Why, in words, or None.
fn shared_folder(d: &libc::stat, me: u32) -> Option<String> {
    if d.st_uid != me && d.st_uid != 0 {
        Some(format!("a folder of user {}", d.st_uid))
    } else if d.st_mode & 0o1000 != 0 {
        Some("a sticky folder every user may write to".into())
    } else if d.st_mode & 0o022 != 0 {
        Some("a folder other users may write to".into())
    } else {
        None
    }
}

/// A folder held open while a path is resolved, and the path that led
/// to it (for messages).
pub(crate) struct Dir {
    pub(crate) fd: OwnedFd,
    pub(crate) shown: PathBuf,
}

impl Dir {
    fn open(path: &Path) -> io::Result<Dir> {
        let c = cstr(path.as_os_str())?;
        let fd = open_at(libc::AT_FDCWD, &c, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok(Dir {
            fd,
            shown: path.to_owned(),
        })
    }
    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Components of `p` as names to walk (`..` kept, `.` and `/` dropped).
fn parts(p: &Path) -> Vec<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

/// The walk's state: the path as given (for messages) and how many links
/// it followed.
pub(crate) struct Walk<'a> {
    pub(crate) path: &'a Path,
    follows: u32,
    me: u32,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(path: &'a Path) -> Self {
        Walk {
            path,
            follows: 0,
            me: crate::sys::euid(),
        }
    }

    fn count_follow(&mut self) -> io::Result<()> {
        self.follows += 1;
        if self.follows > MAX_FOLLOWS {
            return Err(io::Error::other(format!(
                "{}: more than {MAX_FOLLOWS} symbolic links on the way (a loop?)",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// Whether the link `name` in `dir` (its metadata `link`) may be
    /// followed; the error names it, its owner and why.
    pub(crate) fn trust(&self, dir: &Dir, name: &OsStr, link: &libc::stat) -> io::Result<()> {
        if link.st_uid == self.me || link.st_uid == 0 {
            return Ok(());
        }
        let d = fstat(dir.raw())?;
        let Some(why) = shared_folder(&d, self.me) else {
            return Ok(());
        };
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} leads through the symbolic link {} of user {}, in {why}; not followed \
                 (another user's link could send what commbench writes anywhere, as \
                 fs.protected_symlinks refuses): give a path without that link",
                self.path.display(),
                dir.shown.join(name).display(),
                link.st_uid
            ),
        ))
    }

    /// Resolves all but the last component of `rel` from `start` (a
    /// trusted link's folder, or where `rel` starts), following trusted
    /// links only; gives the folder reached, held open, and the last
    /// component (None: `rel` names a folder, `/`, `.` or `..`).
    pub(crate) fn parent(&mut self, start: Dir, rel: &Path) -> io::Result<(Dir, Option<OsString>)> {
        let mut dir = if rel.is_absolute() {
            Dir::open(Path::new("/"))?
        } else {
            start
        };
        let mut rest = parts(rel);
        rest.reverse();
        let last_is_name = matches!(rel.components().next_back(), Some(Component::Normal(_)));
        loop {
            let Some(c) = rest.pop() else {
                return Ok((dir, None));
            };
            if rest.is_empty() && last_is_name {
                return Ok((dir, Some(c)));
            }
            let cc = cstr(&c)?;
            if c == ".." {
                let fd = open_at(dir.raw(), &cc, libc::O_PATH | libc::O_DIRECTORY, 0)?;
                let mut shown = dir.shown.clone();
                shown.push("..");
                dir = Dir { fd, shown };
                continue;
            }
            let st = stat_at(dir.raw(), &cc, false).map_err(|e| self.at(&dir, &c, e))?;
            if kind_of(st.st_mode) == libc::S_IFLNK {
                self.trust(&dir, &c, &st)?;
                self.count_follow()?;
                let target = readlink_at(dir.raw(), &cc)?;
                let target = PathBuf::from(target);
                if target.is_absolute() {
                    dir = Dir::open(Path::new("/"))?;
                }
                let mut more = parts(&target);
                if more.is_empty() && !target.is_absolute() {
                    more.push(".".into());
                }
                more.reverse();
                // The link's target is walked before what followed the link.
                rest.extend(more);
                continue;
            }
            if c == "." {
                continue;
            }
            // O_NOFOLLOW with O_DIRECTORY: a link swapped in since the
            // look above fails (ENOTDIR) instead of being entered.
            let fd = open_at(
                dir.raw(),
                &cc,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )
            .map_err(|e| self.at(&dir, &c, e))?;
            let shown = dir.shown.join(&c);
            dir = Dir { fd, shown };
        }
    }

    fn at(&self, dir: &Dir, name: &OsStr, e: io::Error) -> io::Error {
        io::Error::new(
            e.kind(),
            format!(
                "{}: {}: {e}",
                self.path.display(),
                dir.shown.join(name).display()
            ),
        )
    }
}

/// Where a write goes: a file to create or replace (`name` in `dir`), or
/// a device, FIFO or socket opened for writing in place.
pub(crate) enum Dest {
    /// Write a new file and rename it over `name` in `dir`.
    Replace { dir: Dir, name: OsString },
    /// Write into this open device, FIFO or socket.
    InPlace(std::fs::File),
}

/// Decides where a write to `path` goes, following only trusted links
/// (see the module's text).
pub(crate) fn destination(path: &Path) -> io::Result<Dest> {
    let mut walk = Walk::new(path);
    let start = Dir::open(Path::new("."))?;
    let (dir, name) = walk.parent(start, path)?;
    let Some(name) = name else {
        return Err(io::Error::other(format!("{} is a folder", path.display())));
    };
    // What the name is, following the links on it while they are trusted
    // and lead on to something to write in place; otherwise the name
    // itself is replaced (a link to a regular file or nowhere is replaced,
    // never followed).
    let (mut at, mut at_name) = (
        Dir {
            fd: dir.fd.try_clone()?,
            shown: dir.shown.clone(),
        },
        name.clone(),
    );
    loop {
        let c = cstr(&at_name)?;
        let st = match stat_at(at.raw(), &c, false) {
            Ok(st) => st,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Dest::Replace { dir, name })
            }
            Err(e) => return Err(walk.at(&at, &at_name, e)),
        };
        match kind_of(st.st_mode) {
            libc::S_IFDIR => {
                return Err(io::Error::other(format!("{} is a folder", path.display())))
            }
            libc::S_IFREG => return Ok(Dest::Replace { dir, name }),
            libc::S_IFLNK => {
                let target = stat_at(at.raw(), &c, true).ok();
                let special = target.as_ref().is_some_and(|t| is_special(t.st_mode));
                let magic = on_procfs(at.raw());
                if !special && !magic && walk.trust(&at, &at_name, &st).is_err() {
                    // Another user's link to a file: replaced, not followed.
                    return Ok(Dest::Replace { dir, name });
                }
                walk.trust(&at, &at_name, &st)?;
                if magic {
                    // /proc/self/fd/1 behind /dev/stdout: it names one of
                    // the process's own open files, and its text
                    // ("pipe:[123]") is no path to walk.
                    let Some(t) = target else {
                        return Ok(Dest::Replace { dir, name });
                    };
                    if kind_of(t.st_mode) == libc::S_IFDIR {
                        return Err(io::Error::other(format!("{} is a folder", path.display())));
                    }
                    return open_in_place(path, &at, &c, &t, true).map(Dest::InPlace);
                }
                walk.count_follow()?;
                let target = PathBuf::from(readlink_at(at.raw(), &c)?);
                match walk.parent(at, &target) {
                    Ok((d, Some(n))) => (at, at_name) = (d, n),
                    // A link to a device that cannot be reached but
                    // through an untrusted link: refused.
                    Err(e) if special => return Err(e),
                    // A link to a folder, or one that cannot be walked:
                    // the link itself is replaced, as before.
                    _ => return Ok(Dest::Replace { dir, name }),
                }
            }
            _ => {
                protected_fifo(&walk, &at, &st)?;
                return open_in_place(path, &at, &c, &st, false).map(Dest::InPlace);
            }
        }
    }
}

/// Checks that a folder the user named (a suite's `--out`, an export's
/// folder) is reached through trusted links only, itself included (see
/// the module's text); a part that does not exist yet is fine (it will
/// be a folder of the caller's making). Call it before writing into the
/// folder by other means than [`crate::artifact::write_atomic`], which
/// checks on its own.
pub fn check_folder(path: &Path) -> io::Result<()> {
    let not_found = |r: io::Result<()>| match r {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    };
    not_found((|| {
        let mut walk = Walk::new(path);
        let (mut dir, mut name) = walk.parent(Dir::open(Path::new("."))?, path)?;
        while let Some(n) = name {
            let c = cstr(&n)?;
            let st = stat_at(dir.raw(), &c, false)?;
            if kind_of(st.st_mode) != libc::S_IFLNK {
                return Ok(());
            }
            walk.trust(&dir, &n, &st)?;
            walk.count_follow()?;
            let target = PathBuf::from(readlink_at(dir.raw(), &c)?);
            (dir, name) = walk.parent(dir, &target)?;
        }
        Ok(())
    })())
}

/// A FIFO (or socket) another user made in a sticky world-writable
/// folder: a planted trap to read what we write (`protected_fifos`).
fn protected_fifo(walk: &Walk, dir: &Dir, st: &libc::stat) -> io::Result<()> {
    let k = kind_of(st.st_mode);
    if k == libc::S_IFCHR || k == libc::S_IFBLK || st.st_uid == walk.me {
        return Ok(());
    }
    let d = fstat(dir.raw())?;
    if d.st_mode & 0o1000 != 0 && d.st_mode & 0o002 != 0 && d.st_uid != st.st_uid {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is {} of user {} in a folder every user may write to; not written \
                 (another user's trap?): give a path to a file",
                walk.path.display(),
                kind_name(st.st_mode),
                st.st_uid
            ),
        ));
    }
    Ok(())
}

/// Opens the device, FIFO or socket `name` in `dir` (metadata `seen`)
/// for writing in place. A FIFO is opened non-blocking (no reader: ENXIO
/// at once, not a hang), then made blocking again for the writes. What
/// was opened must be what was looked at (device and inode), or a swap
/// in between is refused.
#[allow(unsafe_code)]
fn open_in_place(
    path: &Path,
    dir: &Dir,
    name: &CStr,
    seen: &libc::stat,
    follow: bool,
) -> io::Result<std::fs::File> {
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    // A regular file behind /proc/self/fd/1 (stdout redirected to a
    // file) is appended to: what was printed before stays.
    let append = if kind_of(seen.st_mode) == libc::S_IFREG {
        libc::O_APPEND
    } else {
        0
    };
    let fd = open_at(
        dir.raw(),
        name,
        libc::O_WRONLY | libc::O_NONBLOCK | libc::O_NOCTTY | nofollow | append,
        0,
    )
    .map_err(|e| {
        if e.raw_os_error() == Some(libc::ENXIO) {
            io::Error::other(format!(
                "{}: nothing reads from this FIFO or socket; start the reader first, \
                 or give a path to a file",
                path.display()
            ))
        } else {
            io::Error::new(e.kind(), format!("{}: {e}", path.display()))
        }
    })?;
    let got = fstat(fd.as_raw_fd())?;
    if (got.st_dev, got.st_ino) != (seen.st_dev, seen.st_ino) {
        return Err(io::Error::other(format!(
            "{} changed while it was opened; not written",
            path.display()
        )));
    }
    let raw = fd.as_raw_fd();
    // SAFETY: raw is open (owned by fd) for the whole call; F_GETFL and
    // F_SETFL only read and set its status flags.
    unsafe {
        let flags = crate::syscall!(fcntl(raw, libc::F_GETFL))?;
        crate::syscall!(fcntl(raw, libc::F_SETFL, flags & !libc::O_NONBLOCK))?;
    }
    Ok(std::fs::File::from(fd))
}

/// Renames `from` over `to`, both in the folder `dir`.
#[allow(unsafe_code)]
pub(crate) fn rename_in(dir: &Dir, from: &CStr, to: &CStr) -> io::Result<()> {
    // SAFETY: both names are valid C strings; renameat touches no memory
    // of ours beyond them.
    unsafe { crate::syscall!(renameat(dir.raw(), from.as_ptr(), dir.raw(), to.as_ptr())) }
        .map(|_| ())
}

/// Unlinks `name` in the folder `dir`.
#[allow(unsafe_code)]
pub(crate) fn unlink_in(dir: &Dir, name: &CStr) -> io::Result<()> {
    // SAFETY: name is a valid C string.
    unsafe { crate::syscall!(unlinkat(dir.raw(), name.as_ptr(), 0)) }.map(|_| ())
}

/// Why a user-given input cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// It could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// Why.
        source: io::Error,
    },
    /// It is not a regular file.
    #[error("{path} is {kind}, not a regular file: give the {what} itself (a device or FIFO never ends, or waits for a writer)")]
    NotRegular {
        /// The path as given.
        path: String,
        /// What it is ("a FIFO").
        kind: &'static str,
        /// What was expected ("PEM file").
        what: String,
    },
    /// It holds more than the bound.
    #[error(
        "{path} holds more than {max} bytes, more than a {what} holds: give the {what} itself"
    )]
    TooLarge {
        /// The path as given.
        path: String,
        /// The bound.
        max: u64,
        /// What was expected.
        what: String,
    },
}

/// Opens the user-given input `path` for reading: a regular file only
/// (opened without blocking, so a FIFO with no writer cannot hang the
/// open), no longer than `max` bytes; `what` names what it should be in
/// the errors ("PEM file"). Gives the open file, its metadata checked.
pub fn open_input(path: &Path, max: u64, what: &str) -> Result<std::fs::File, InputError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let shown = path.display().to_string();
    let io = |source| InputError::Io {
        path: shown.clone(),
        source,
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let m = f.metadata().map_err(io)?;
    if !m.is_file() {
        return Err(InputError::NotRegular {
            path: shown,
            kind: kind_name(m.mode()),
            what: what.into(),
        });
    }
    if m.len() > max {
        return Err(InputError::TooLarge {
            path: shown,
            max,
            what: what.into(),
        });
    }
    Ok(f)
}

/// Reads the user-given input `path` whole: [`open_input`], then at most
/// `max` bytes (a file that grows while it is read is cut off at the
/// bound and refused).
pub fn read_input(path: &Path, max: u64, what: &str) -> Result<Vec<u8>, InputError> {
    use std::io::Read;
    let f = open_input(path, max, what)?;
    let len = f.metadata().map_or(0, |m| m.len());
    let mut buf = Vec::with_capacity(len.min(max) as usize);
    f.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|source| InputError::Io {
            path: path.display().to_string(),
            source,
        })?;
    if buf.len() as u64 > max {
        return Err(InputError::TooLarge {
            path: path.display().to_string(),
            max,
            what: what.into(),
        });
    }
    Ok(buf)
}

/// The bound on a PEM file read (`--cert`, `--key`, `--cacert`): a
/// certificate chain is a few KiB; a bundle of every public root CA is
/// about 250 KiB.
pub const MAX_PEM_BYTES: u64 = 4 << 20;

/// Reads a PEM file (certificate, key or CA bundle) the user named:
/// [`read_input`] within [`MAX_PEM_BYTES`].
pub fn read_pem(path: &Path) -> Result<Vec<u8>, InputError> {
    read_input(path, MAX_PEM_BYTES, "PEM file")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_behind_another_users_link_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::artifact::TempDir::new("userfile").unwrap();
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let out = shared.join("out");
        std::os::unix::fs::symlink(dir.path(), &out).unwrap();
        check_folder(&out).unwrap();
        check_folder(&out.join("not/yet/made")).unwrap();
        if let Err(e) = std::os::unix::fs::lchown(&out, Some(65534), Some(65534)) {
            crate::testing::skip("root", format!("cannot give the link away ({e})"));
            return;
        }
        for p in [out.clone(), out.join("sub"), out.join("not/yet")] {
            let e = check_folder(&p).unwrap_err().to_string();
            assert!(e.contains("user 65534"), "{e}");
        }
    }

    /// Issue 50, item 4: `--key /dev/zero` aborted on a 2 GiB allocation
    /// and a FIFO or `/dev/urandom` hung: inputs are regular files,
    /// bounded, opened without waiting for a writer.
    #[test]
    fn pem_files_that_were_devices_or_fifos_are_refused_at_once() {
        for dev in ["/dev/zero", "/dev/urandom", "/dev/null"] {
            let e = read_pem(Path::new(dev)).unwrap_err().to_string();
            assert!(e.contains("a character device, not a regular file"), "{e}");
        }
        let dir = crate::artifact::TempDir::new("userfile").unwrap();
        let fifo = dir.path().join("key.pem");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(st.success());
        // No writer: a blocking open would wait forever.
        let e = read_pem(&fifo).unwrap_err().to_string();
        assert!(e.contains("a FIFO, not a regular file"), "{e}");
        let big = dir.path().join("big.pem");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_PEM_BYTES + 1).unwrap();
        let e = read_pem(&big).unwrap_err().to_string();
        assert!(e.contains("more than 4194304 bytes"), "{e}");
        let ok = dir.path().join("ok.pem");
        std::fs::write(&ok, b"-----BEGIN X-----\n").unwrap();
        assert_eq!(read_pem(&ok).unwrap(), b"-----BEGIN X-----\n");
        let e = read_pem(dir.path()).unwrap_err().to_string();
        assert!(e.contains("a folder"), "{e}");
    }
}
