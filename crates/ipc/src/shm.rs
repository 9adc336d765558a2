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
//! requests, ring `2s+1` its responses. Sleeping waiters (`block`, and
//! `adaptive` once its spin gives up) sleep on a doorbell pipe per ring and
//! direction ([`crate::bell`]); a client process gets its four doorbell
//! ends by inheritance, their numbers appended to the segment name in its
//! address (`name#a,b,c,d`).

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::bell::{self, Bell, RingBells};
use crate::error::{IpcError, Result};
use crate::frame::Header;
use crate::ring::{Backing, RingRef, RingRx, RingTx, RING_HEADER_BYTES};
use crate::transport::{Endpoint, ListenOptions, MsgRx, MsgTx, Transport, TransportKind};
use crate::wait::{Presence, SharedStats, WaitPolicy, WaitStats};

const MAGIC: u64 = 0x636f_6d6d_6970_6331; // "commipc1"
const VERSION: u32 = 2;
const SEG_HEADER_BYTES: usize = 4096;
/// Default ring size per direction.
pub const DEFAULT_RING_BYTES: usize = 1 << 20;
/// Largest ring chosen by message size ([`stream_ring_bytes`]).
pub const STREAM_RING_MAX: usize = 4 << 20;
/// Messages a stream's ring holds when chosen by message size.
pub const STREAM_RING_MESSAGES: usize = 64;

/// The ring a stream of `size`-byte messages gets when none is asked:
/// room for [`STREAM_RING_MESSAGES`] messages (a power of two), at least
/// [`DEFAULT_RING_BYTES`] and at most [`STREAM_RING_MAX`]; 64 KiB messages
/// get 4 MiB. Beside two busy loops, where each end holds its CPU half the
/// time, a ring that lets the running end go on while the other is
/// descheduled moved 64 KiB messages 1.12× [1.07, 1.18] and 1.07× [1.05,
/// 1.09] faster with 4 MiB than with 1 MiB (`commbench ab`, 20 and 40
/// pairs); 16 MiB was 0.81× [0.73, 0.93] of 4 MiB (its lines no longer
/// stay in cache), as 16 MiB socket buffers are for a Unix stream.
pub fn stream_ring_bytes(size: usize) -> usize {
    let want = STREAM_RING_MESSAGES.saturating_mul(size.saturating_add(crate::frame::HEADER_LEN));
    want.checked_next_power_of_two()
        .unwrap_or(STREAM_RING_MAX)
        .clamp(DEFAULT_RING_BYTES, STREAM_RING_MAX)
}

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
    cpus: AtomicU32,
    apart: AtomicU32,
    sleeping: Line<AtomicU32>,
    stats: Line<SharedStats>,
}

const _: () = assert!(std::mem::size_of::<SegHeader>() <= SEG_HEADER_BYTES);

/// A mapped segment.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all concurrent access goes
// through atomics or the SPSC ring protocol.
#[allow(unsafe_code)]
unsafe impl Send for Mapping {}
// SAFETY: as above.
#[allow(unsafe_code)]
unsafe impl Sync for Mapping {}

/// What one process sees of a segment: the header and a run of rings
/// (all of them in the server; a client maps only its session's two, so
/// `mt` client threads do not each add the whole segment to the RSS).
struct View {
    header: *const SegHeader,
    rings: *mut u8,
    first_ring: usize,
    ring_bytes: usize,
    _maps: Vec<Mapping>,
}

// SAFETY: as for Mapping; the pointers point into the owned mappings.
#[allow(unsafe_code)]
unsafe impl Send for View {}
// SAFETY: as above.
#[allow(unsafe_code)]
unsafe impl Sync for View {}
impl Backing for View {}

impl View {
    #[allow(unsafe_code)]
    fn header(&self) -> &SegHeader {
        // SAFETY: header points to a mapped, page-aligned SegHeader (all
        // atomics, valid for any bit pattern) kept alive by `_maps`.
        unsafe { &*self.header }
    }
}

impl Drop for Mapping {
    #[allow(unsafe_code)]
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
        Self::map_at(file, 0, len)
    }

    fn map_at(file: &File, offset: usize, len: usize) -> Result<Mapping> {
        // A file we opened read-write, length equal to its size.
        let ptr = commbench_core::sys::mmap(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            file.as_raw_fd(),
            offset as libc::off_t,
        )
        .map_err(|e| IpcError::io("mmap shm segment", e))?;
        Ok(Mapping { ptr, len })
    }
}

fn segment_len(sessions: u32, ring_bytes: usize) -> usize {
    SEG_HEADER_BYTES + 2 * sessions as usize * (RING_HEADER_BYTES + ring_bytes)
}

/// Largest ring per direction (`--ring`): 1 GiB.
pub const MAX_RING_BYTES: usize = 1 << 30;

/// Bytes free for an unprivileged writer in the file system holding `dir`.
#[allow(unsafe_code)]
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: zeroed statvfs is a valid value; statvfs fills it from a
    // NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is NUL-terminated and st a live, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Checks, before anything is created, that a segment for `sessions` ×
/// two rings of `ring_bytes` fits in the free space of /dev/shm (with a
/// margin): a tmpfs that runs out under a mapping kills the process with
/// SIGBUS, so this must be a usage error instead.
pub fn check_space(sessions: u32, ring_bytes: usize) -> Result<()> {
    let need = (ring_bytes as u64 + RING_HEADER_BYTES as u64)
        .saturating_mul(2 * sessions as u64)
        .saturating_add(SEG_HEADER_BYTES as u64);
    let dir = crate::artifacts::shm_path("x");
    let dir = dir.parent().unwrap_or(std::path::Path::new("/dev/shm"));
    if let Some(free) = free_bytes(dir) {
        // Leave a quarter of what is free to everybody else.
        let usable = free / 4 * 3;
        if need > usable {
            let per_ring = (usable / (2 * sessions as u64))
                .saturating_sub(RING_HEADER_BYTES as u64)
                .max(1);
            let fit = 1u64 << (63 - per_ring.leading_zeros());
            return Err(IpcError::usage(format!(
                "{sessions} sessions x 2 rings of {ring_bytes} bytes need {} MiB in {}, which has {} MiB free: use --ring {} or less (or fewer sessions)",
                need >> 20,
                dir.display(),
                free >> 20,
                if fit >= 1 << 20 {
                    format!("{}M", fit >> 20)
                } else if fit >= 4096 {
                    format!("{}K", fit >> 10)
                } else {
                    "4K (not enough space even for that)".into()
                }
            )));
        }
    }
    Ok(())
}

#[allow(unsafe_code)]
fn ring_ref(view: &Arc<View>, index: usize, bells: Option<Arc<RingBells>>) -> RingRef {
    let h = view.header();
    let ring_bytes = view.ring_bytes;
    let off = (index - view.first_ring) * (RING_HEADER_BYTES + ring_bytes);
    let backing: Arc<dyn Backing> = view.clone();
    RingRef {
        // SAFETY: (pointer arithmetic) the view maps ring `index` (callers
        // only ask for rings of the mapped run), so off + RING_HEADER_BYTES
        // + ring_bytes stays inside the rings mapping.
        hdr: unsafe { view.rings.add(off) } as *const _,
        // SAFETY: as for hdr.
        data: unsafe { view.rings.add(off + RING_HEADER_BYTES) },
        cap: ring_bytes as u64,
        sleeping: &h.sleeping.0 as *const AtomicU32,
        threads: h.threads.load(Ordering::Relaxed),
        cpus: h.cpus.load(Ordering::Relaxed).max(1),
        apart: h.apart.load(Ordering::Relaxed) != 0,
        stats: &h.stats.0 as *const SharedStats,
        policy: WaitPolicy::from_code(h.policy.load(Ordering::Relaxed)).unwrap_or_default(),
        bells,
        _backing: backing,
    }
}

/// Is process `pid` alive (and not a zombie)?
pub fn process_alive(pid: u32) -> bool {
    // Signal 0 only checks for existence/permission.
    let r = commbench_core::sys::kill(pid as libc::pid_t, 0);
    if r.is_err_and(|e| e.raw_os_error() == Some(libc::ESRCH)) {
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
    map: Arc<View>,
    /// Doorbells per ring (both ends), empty in `spin` mode.
    bells: Vec<Arc<RingBells>>,
    name: String,
    path: PathBuf,
    sessions: u32,
    _guard: commbench_core::artifact::CleanupGuard,
}

impl ShmTransport {
    /// Create the segment for `opts.sessions` sessions.
    #[allow(unsafe_code)]
    pub fn create(opts: &ListenOptions) -> Result<ShmTransport> {
        let ring_bytes = opts.ring_bytes;
        if !ring_bytes.is_power_of_two() || ring_bytes < 4096 {
            return Err(IpcError::usage(format!(
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
        // Reserve the pages now: a tmpfs that fills up later would kill the
        // process with SIGBUS on first touch; here it is an error (ENOSPC).
        // SAFETY: fallocate on a file we just created and own.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
        if rc != 0 {
            return Err(remove(IpcError::io(
                format!(
                    "reserve {} MiB for {} (is /dev/shm full?)",
                    len >> 20,
                    path.display()
                ),
                std::io::Error::from_raw_os_error(rc),
            )));
        }
        let whole = Mapping::map(&file, len).map_err(remove)?;
        let map = Arc::new(View {
            header: whole.ptr as *const SegHeader,
            // SAFETY: len > SEG_HEADER_BYTES.
            rings: unsafe { whole.ptr.add(SEG_HEADER_BYTES) },
            first_ring: 0,
            ring_bytes,
            _maps: vec![whole],
        });
        let h = map.header();
        h.version.store(VERSION, Ordering::Relaxed);
        h.sessions.store(opts.sessions, Ordering::Relaxed);
        h.ring_bytes.store(ring_bytes as u64, Ordering::Relaxed);
        h.owner_pid.store(std::process::id(), Ordering::Relaxed);
        h.policy.store(opts.wait.code(), Ordering::Relaxed);
        h.threads.store(opts.threads.max(1), Ordering::Relaxed);
        h.cpus.store(opts.cpus.max(1), Ordering::Relaxed);
        h.apart.store(opts.apart as u32, Ordering::Relaxed);
        h.sleeping.0.store(0, Ordering::Relaxed);
        for i in 0..2 * opts.sessions as usize {
            ring_ref(&map, i, None).init();
        }
        let bells = if opts.wait == WaitPolicy::Spin {
            Vec::new()
        } else {
            (0..2 * opts.sessions)
                .map(|_| RingBells::new().map(Arc::new))
                .collect::<Result<Vec<_>>>()?
        };
        h.magic.store(MAGIC, Ordering::Release);
        Ok(ShmTransport {
            map,
            bells,
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

    fn bells_of(&self, ring: usize) -> Option<Arc<RingBells>> {
        self.bells.get(ring).cloned()
    }

    /// The four doorbell ends session `s`'s client uses: the request ring's
    /// space bell (read) and data bell (write), the response ring's data
    /// bell (read) and space bell (write).
    fn client_fds(&self, s: usize) -> Option<[&OwnedFd; 4]> {
        let (req, resp) = (self.bells.get(2 * s)?, self.bells.get(2 * s + 1)?);
        Some([
            req.space.r.as_ref()?,
            req.data.w.as_ref()?,
            resp.data.r.as_ref()?,
            resp.space.w.as_ref()?,
        ])
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

    #[inline]
    fn recv_with(
        &mut self,
        buf: &mut [u8],
        read: &mut dyn FnMut(&Header, crate::transport::Lent<'_>) -> Result<()>,
    ) -> Result<Header> {
        self.0.recv_with(buf, read)
    }
}

impl Transport for ShmTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Shm
    }

    fn address(&self) -> String {
        self.name.clone()
    }

    fn client_address(&self, session: u32) -> String {
        match self.client_fds(session as usize) {
            Some(fds) => {
                let n: Vec<String> = fds.iter().map(|f| f.as_raw_fd().to_string()).collect();
                format!("{}#{}", self.name, n.join(","))
            }
            None => self.name.clone(),
        }
    }

    fn share_with_child(&self, session: u32, share: bool) {
        if let Some(fds) = self.client_fds(session as usize) {
            for f in fds {
                crate::bell::set_cloexec(f, !share);
            }
        }
    }

    fn accept_all(&mut self) -> Result<Vec<Endpoint>> {
        Ok((0..self.sessions as usize)
            .map(|s| {
                let req = ring_ref(&self.map, 2 * s, self.bells_of(2 * s));
                let resp = ring_ref(&self.map, 2 * s + 1, self.bells_of(2 * s + 1));
                // The server consumes requests and produces responses.
                let me = Arc::new(Presence::new(
                    [req.cons_beat(), resp.prod_beat()],
                    self.map.clone(),
                ));
                Endpoint {
                    tx: Box::new(ShmTx(RingTx::new(resp, me.clone()))),
                    rx: Box::new(ShmRx(RingRx::new(req, me))),
                }
            })
            .collect())
    }

    fn wait_stats(&self) -> Option<WaitStats> {
        Some(self.map.header().stats.0.read())
    }

    fn abort_session(&self, session: u32) {
        if session < self.sessions {
            let s = session as usize;
            ring_ref(&self.map, 2 * s, self.bells_of(2 * s)).abort();
            ring_ref(&self.map, 2 * s + 1, self.bells_of(2 * s + 1)).abort();
        }
    }
}

/// Client side: open the segment `address` (`name` or `name#fd,fd,fd,fd`
/// with the session's doorbell descriptors) and attach to `session`'s rings.
#[allow(unsafe_code)]
pub fn connect(address: &str, session: u32) -> Result<Endpoint> {
    let (name, fds) = match address.split_once('#') {
        None => (address, None),
        Some((n, f)) => {
            let v: Vec<RawFd> = f.split(',').filter_map(|x| x.parse().ok()).collect();
            if v.len() != 4 {
                return Err(IpcError::usage(format!("bad shm address '{address}'")));
            }
            (n, Some(v))
        }
    };
    if name.is_empty() || name.contains('/') || !name.starts_with("commbench-ipc-") {
        return Err(IpcError::usage(format!(
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
    let hmap = Mapping::map(&file, SEG_HEADER_BYTES)?;
    let hptr = hmap.ptr as *const SegHeader;
    // SAFETY: hmap maps SEG_HEADER_BYTES of the segment, page aligned; the
    // header is all atomics. The reference does not outlive hmap (moved into
    // the View below only after the last use of `h`).
    let h: &SegHeader = unsafe { &*hptr };
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
        return Err(IpcError::usage(format!(
            "session {session} does not exist (segment has {sessions})"
        )));
    }
    let policy = WaitPolicy::from_code(h.policy.load(Ordering::Relaxed)).unwrap_or_default();
    let (req_bells, resp_bells) = match (policy, fds) {
        (WaitPolicy::Spin, _) => (None, None),
        (_, None) => {
            return Err(IpcError::usage(format!(
                "shm address '{address}' lacks the doorbell descriptors of a {policy} run"
            )))
        }
        (_, Some(f)) => {
            let d = |i: usize| bell::dup_fd(f[i]).map(Some);
            let req = RingBells {
                space: Bell { r: d(0)?, w: None },
                data: Bell { r: None, w: d(1)? },
            };
            let resp = RingBells {
                data: Bell { r: d(2)?, w: None },
                space: Bell { r: None, w: d(3)? },
            };
            (Some(Arc::new(req)), Some(Arc::new(resp)))
        }
    };
    let s = session as usize;
    let stride = RING_HEADER_BYTES + ring_bytes;
    let rmap = Mapping::map_at(&file, SEG_HEADER_BYTES + 2 * s * stride, 2 * stride)?;
    let map = Arc::new(View {
        header: hptr,
        rings: rmap.ptr,
        first_ring: 2 * s,
        ring_bytes,
        _maps: vec![hmap, rmap],
    });
    let req = ring_ref(&map, 2 * s, req_bells);
    let resp = ring_ref(&map, 2 * s + 1, resp_bells);
    // The client produces requests and consumes responses.
    let me = Arc::new(Presence::new(
        [req.prod_beat(), resp.cons_beat()],
        map.clone(),
    ));
    Ok(Endpoint {
        tx: Box::new(ShmTx(RingTx::new(req, me.clone()))),
        rx: Box::new(ShmRx(RingRx::new(resp, me))),
    })
}
