//! The shared-memory transport: one /dev/shm segment per run holding two
//! SPSC byte rings per session (requests client→server, responses
//! server→client).
//!
//! The segment is created by the server with O_CREAT|O_EXCL and mode 0600,
//! named `commbench-ipc-<pid>-<nonce>` (core's artifact naming, so
//! `commbench clean` can tell a dead run's leftovers from a live run's), and
//! registered for removal on SIGINT/SIGTERM; the server unlinks it when the
//! transport is dropped. Pages are pre-faulted (MAP_POPULATE) so the first
//! messages do not pay ~10 µs per fresh page. Layout: a 4 KiB segment
//! header (magic, version, sessions, ring size, wait policy, thread count,
//! the run-wide sleeper counter on its own line), then per ring a 4 KiB ring
//! header page and `ring_bytes` of data; ring `2s` carries session `s`'s
//! requests, ring `2s+1` its responses.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{IpcError, Result};
use crate::frame::Header;
use crate::ring::{Backing, RingRef, RingRx, RingTx, RING_HEADER_BYTES};
use crate::transport::{Endpoint, ListenOptions, MsgRx, MsgTx, Transport, TransportKind};
use crate::wait::{affinity_cpus, WaitPolicy};

const MAGIC: u64 = 0x636f_6d6d_6970_6331; // "commipc1"
const VERSION: u32 = 1;
const SEG_HEADER_BYTES: usize = 4096;
/// Default ring size per direction.
pub const DEFAULT_RING_BYTES: usize = 256 << 10;

#[repr(C, align(128))]
struct Line<T>(T);

#[repr(C)]
struct SegHeader {
    magic: AtomicU64,
    version: AtomicU32,
    sessions: AtomicU32,
    ring_bytes: AtomicU64,
    owner_pid: AtomicU32,
    policy: AtomicU32,
    threads: AtomicU32,
    sleeping: Line<AtomicU32>,
}

const _: () = assert!(std::mem::size_of::<SegHeader>() <= SEG_HEADER_BYTES);

/// A mapped segment.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all concurrent access goes
// through atomics or the SPSC ring protocol.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}
impl Backing for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from a successful mmap and nobody uses the
        // mapping any more (every RingRef holds an Arc to it).
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

impl Mapping {
    fn map(file: &File, len: usize) -> Result<Mapping> {
        // SAFETY: mapping a file we opened read-write, length equal to its
        // size; the result is checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(IpcError::io(
                "mmap shm segment",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(Mapping {
            ptr: ptr as *mut u8,
            len,
        })
    }

    fn header(&self) -> &SegHeader {
        // SAFETY: the mapping is at least SEG_HEADER_BYTES long and page
        // aligned; SegHeader is all atomics, valid for any bit pattern.
        unsafe { &*(self.ptr as *const SegHeader) }
    }
}

fn segment_len(sessions: u32, ring_bytes: usize) -> usize {
    SEG_HEADER_BYTES + 2 * sessions as usize * (RING_HEADER_BYTES + ring_bytes)
}

fn ring_ref(map: &Arc<Mapping>, index: usize) -> RingRef {
    let h = map.header();
    let ring_bytes = h.ring_bytes.load(Ordering::Relaxed) as usize;
    let off = SEG_HEADER_BYTES + index * (RING_HEADER_BYTES + ring_bytes);
    let backing: Arc<dyn Backing> = map.clone();
    RingRef {
        // SAFETY (pointer arithmetic): off + RING_HEADER_BYTES + ring_bytes
        // <= segment length, checked when the segment was created/opened.
        hdr: unsafe { map.ptr.add(off) } as *const _,
        data: unsafe { map.ptr.add(off + RING_HEADER_BYTES) },
        cap: ring_bytes as u64,
        sleeping: &h.sleeping.0 as *const AtomicU32,
        threads: h.threads.load(Ordering::Relaxed),
        cpus: affinity_cpus(),
        policy: WaitPolicy::from_code(h.policy.load(Ordering::Relaxed)).unwrap_or_default(),
        _backing: backing,
    }
}

/// Is process `pid` alive (and not a zombie)?
pub fn process_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence/permission.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            // state is the first field after the parenthesised command name
            let state = s
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z') | Some('X'))
        }
        Err(_) => false,
    }
}

/// Server side of the shm transport.
pub struct ShmTransport {
    map: Arc<Mapping>,
    name: String,
    path: PathBuf,
    sessions: u32,
    _guard: commbench_core::artifact::CleanupGuard,
}

impl ShmTransport {
    /// Create the segment for `opts.sessions` sessions.
    pub fn create(opts: &ListenOptions) -> Result<ShmTransport> {
        let ring_bytes = opts.ring_bytes;
        if !ring_bytes.is_power_of_two() || ring_bytes < 4096 {
            return Err(IpcError::Usage(format!(
                "ring size {ring_bytes} must be a power of two >= 4096"
            )));
        }
        let name = crate::artifacts::segment_name();
        let path = crate::artifacts::shm_path(&name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| IpcError::io(format!("create {}", path.display()), e))?;
        let guard = crate::artifacts::register(&path);
        let len = segment_len(opts.sessions, ring_bytes);
        let remove = |e: IpcError| {
            let _ = std::fs::remove_file(&path);
            e
        };
        file.set_len(len as u64)
            .map_err(|e| remove(IpcError::io(format!("size {}", path.display()), e)))?;
        let map = Arc::new(Mapping::map(&file, len).map_err(remove)?);
        let h = map.header();
        h.version.store(VERSION, Ordering::Relaxed);
        h.sessions.store(opts.sessions, Ordering::Relaxed);
        h.ring_bytes.store(ring_bytes as u64, Ordering::Relaxed);
        h.owner_pid.store(std::process::id(), Ordering::Relaxed);
        h.policy.store(opts.wait.code(), Ordering::Relaxed);
        h.threads.store(opts.threads.max(1), Ordering::Relaxed);
        h.sleeping.0.store(0, Ordering::Relaxed);
        for i in 0..2 * opts.sessions as usize {
            ring_ref(&map, i).init();
        }
        h.magic.store(MAGIC, Ordering::Release);
        Ok(ShmTransport {
            map,
            name,
            path,
            sessions: opts.sessions,
            _guard: guard,
        })
    }

    /// The segment's file name in /dev/shm.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for ShmTransport {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

struct ShmTx(RingTx);
struct ShmRx(RingRx);

impl MsgTx for ShmTx {
    #[inline]
    fn send(&mut self, h: &Header, payload: &[u8]) -> Result<()> {
        self.0.send(h, payload)
    }
}

impl MsgRx for ShmRx {
    #[inline]
    fn recv(&mut self, buf: &mut [u8]) -> Result<Header> {
        self.0.recv(buf)
    }
}

impl Transport for ShmTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Shm
    }

    fn address(&self) -> String {
        self.name.clone()
    }

    fn accept_all(&mut self) -> Result<Vec<Endpoint>> {
        Ok((0..self.sessions as usize)
            .map(|s| {
                let woke = Arc::new(AtomicBool::new(false));
                Endpoint {
                    tx: Box::new(ShmTx(RingTx::new(
                        ring_ref(&self.map, 2 * s + 1),
                        woke.clone(),
                    ))),
                    rx: Box::new(ShmRx(RingRx::new(ring_ref(&self.map, 2 * s), woke))),
                }
            })
            .collect())
    }

    fn abort_session(&self, session: u32) {
        if session < self.sessions {
            ring_ref(&self.map, 2 * session as usize).abort();
            ring_ref(&self.map, 2 * session as usize + 1).abort();
        }
    }
}

/// Client side: open the segment `name` and attach to `session`'s rings.
pub fn connect(name: &str, session: u32) -> Result<Endpoint> {
    if name.is_empty() || name.contains('/') || !name.starts_with("commbench-ipc-") {
        return Err(IpcError::Usage(format!(
            "'{name}' is not a commbench shm segment name"
        )));
    }
    let path = crate::artifacts::shm_path(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| IpcError::io(format!("open {}", path.display()), e))?;
    let len = file
        .metadata()
        .map_err(|e| IpcError::io(format!("stat {}", path.display()), e))?
        .len() as usize;
    if len < SEG_HEADER_BYTES {
        return Err(IpcError::io(
            format!("{} is too short", path.display()),
            std::io::Error::from(std::io::ErrorKind::InvalidData),
        ));
    }
    let map = Arc::new(Mapping::map(&file, len)?);
    let h = map.header();
    let bad = |what: &str| {
        IpcError::io(
            format!("{}: {what}", path.display()),
            std::io::Error::from(std::io::ErrorKind::InvalidData),
        )
    };
    if h.magic.load(Ordering::Acquire) != MAGIC || h.version.load(Ordering::Relaxed) != VERSION {
        return Err(bad("not a commbench ipc segment (bad magic or version)"));
    }
    let sessions = h.sessions.load(Ordering::Relaxed);
    let ring_bytes = h.ring_bytes.load(Ordering::Relaxed) as usize;
    if !ring_bytes.is_power_of_two() || segment_len(sessions, ring_bytes) != len {
        return Err(bad("inconsistent segment header"));
    }
    if session >= sessions {
        return Err(IpcError::Usage(format!(
            "session {session} does not exist (segment has {sessions})"
        )));
    }
    let s = session as usize;
    let woke = Arc::new(AtomicBool::new(false));
    Ok(Endpoint {
        tx: Box::new(ShmTx(RingTx::new(ring_ref(&map, 2 * s), woke.clone()))),
        rx: Box::new(ShmRx(RingRx::new(ring_ref(&map, 2 * s + 1), woke))),
    })
}
