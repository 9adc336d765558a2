//! Thin, safe wrappers over the few Linux event and socket calls the
//! network labs need beyond std: epoll (level- or edge-triggered), poll(2),
//! eventfd (to wake an event loop from another thread), TCP_NODELAY /
//! SO_SNDBUF / FIONREAD, RLIMIT_NOFILE, and SIGINT/SIGTERM as a flag. One
//! copy for every lab (openflow's emulator and controller, mux's engines).
//!
//! Every lab turns a libc return value into `io::Result` here, once:
//! [`cvt`], and [`syscall!`](crate::syscall) for a `libc::` call (mio's
//! `syscall!`). The macro keeps the call's unsafety where the lints see
//! it: the caller writes `unsafe { syscall!(read(fd, p, n)) }` in an item
//! that allows `unsafe_code`, with a `// SAFETY:` comment.
//!
//! Invariants: every `unsafe` block is a single libc call on a file
//! descriptor this module owns or that the caller lends for the call's
//! duration, with pointers to live, correctly sized buffers.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Readable (`EPOLLIN`).
pub const IN: u32 = libc::EPOLLIN as u32;
/// Writable (`EPOLLOUT`).
pub const OUT: u32 = libc::EPOLLOUT as u32;
/// Edge-triggered (`EPOLLET`).
pub const ET: u32 = libc::EPOLLET as u32;
/// Error or hang-up on either side (`EPOLLERR | EPOLLHUP | EPOLLRDHUP`).
pub const ERR: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;

/// The return types of libc calls that report failure as a negative
/// value with the reason in `errno`: `c_int`, `ssize_t` and `c_long`
/// (`libc::syscall`).
pub trait SyscallReturn: Copy {
    /// Whether the call failed (the value is negative).
    fn failed(self) -> bool;
}

macro_rules! syscall_return {
    ($($t:ty),*) => {$(
        impl SyscallReturn for $t {
            #[inline]
            fn failed(self) -> bool {
                self < 0
            }
        }
    )*};
}
syscall_return!(i32, i64, isize);

/// A libc return value as `io::Result`: a negative value is the error in
/// `errno` (read right away, before anything else can change it).
#[inline]
pub fn cvt<T: SyscallReturn>(r: T) -> io::Result<T> {
    if r.failed() {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

#[doc(hidden)]
pub use libc as __libc;

/// `syscall!(name(args…))` calls `libc::name(args…)` and converts the
/// result with [`cvt`](crate::sys::cvt). The call stays unsafe: write it as
/// `unsafe { syscall!(…) }` with a `// SAFETY:` comment, so `unsafe_code`
/// and `clippy::undocumented_unsafe_blocks` see it in the calling crate.
///
/// ```
/// # #![allow(unsafe_code)]
/// use commbench_core::syscall;
/// // SAFETY: getpid has no preconditions.
/// let pid = unsafe { syscall!(getpid()) }.unwrap();
/// assert!(pid > 0);
/// ```
#[macro_export]
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)? )) => {
        $crate::sys::cvt($crate::sys::__libc::$fn($($arg),*))
    };
}

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// One ready event: the token given at registration and the event bits.
pub type Event = libc::epoll_event;

/// The token an event was registered with.
pub fn event_token(e: &Event) -> u64 {
    e.u64
}
/// The event bits of a ready event ([`IN`], [`OUT`], [`ERR`]).
pub fn event_bits(e: &Event) -> u32 {
    e.events
}

impl Epoll {
    /// A new epoll instance (close-on-exec).
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall returning a new fd we take ownership of.
        let fd = unsafe { syscall!(epoll_create1(libc::EPOLL_CLOEXEC))? };
        Ok(Epoll {
            // SAFETY: fd is a fresh, valid descriptor owned by nobody else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Registers `fd` with `token` for `events`.
    pub fn add(&self, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a valid epoll_event for the duration of the call.
        unsafe {
            syscall!(epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd,
                &mut ev
            ))?
        };
        Ok(())
    }

    /// Changes the events (and token) of a registered descriptor.
    pub fn modify(&self, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a valid epoll_event for the duration of the call.
        unsafe {
            syscall!(epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_MOD,
                fd,
                &mut ev
            ))?
        };
        Ok(())
    }

    /// Removes `fd` from the interest list.
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: as above; the event argument is ignored for DEL.
        unsafe {
            syscall!(epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                &mut ev
            ))?
        };
        Ok(())
    }

    /// Wait up to `timeout_ms` (-1: forever); returns the ready events.
    pub fn wait<'a>(&self, buf: &'a mut [Event], timeout_ms: i32) -> io::Result<&'a [Event]> {
        // SAFETY: buf is a valid, writable array of buf.len() events.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len().min(i32::MAX as usize) as i32,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(&buf[..0]);
            }
            return Err(e);
        }
        Ok(&buf[..n as usize])
    }

    /// Wait up to `timeout_ns` nanoseconds (epoll_pwait2, Linux 5.11;
    /// where it is missing, epoll_wait rounded down to whole ms). For
    /// schedules that must wake within microseconds: lower the thread's
    /// timer slack too ([`set_timer_slack_ns`]).
    pub fn wait_ns<'a>(&self, buf: &'a mut [Event], timeout_ns: u64) -> io::Result<&'a [Event]> {
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: buf is a valid, writable array of buf.len() events; ts
        // lives for the call; a null signal mask of size 0.
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.fd.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len().min(i32::MAX as usize) as libc::c_int,
                &ts as *const libc::timespec,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EINTR) => Ok(&buf[..0]),
                Some(libc::ENOSYS) => {
                    self.wait(buf, (timeout_ns / 1_000_000).min(i32::MAX as u64) as i32)
                }
                _ => Err(e),
            };
        }
        Ok(&buf[..n as usize])
    }
}

/// Whether this process runs as root (effective uid 0): what namespaces,
/// interfaces and raised descriptor limits need.
pub fn is_root() -> bool {
    euid() == 0
}

/// This process's effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and touches no memory.
    unsafe { libc::geteuid() }
}

/// Sends signal `sig` to `pid` (kill(2): a negative pid is a process
/// group; signal 0 only checks that the process exists).
pub fn kill(pid: libc::pid_t, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: kill takes integers only and touches no memory of ours.
    unsafe { syscall!(kill(pid, sig)) }.map(|_| ())
}

/// Maps `len` bytes of `fd` at `offset` (mmap(2); `fd` -1 with
/// `MAP_ANONYMOUS`) and returns the mapping's start. There is no address
/// hint and `MAP_FIXED` is refused, so the kernel picks an unused range and
/// no memory the program already uses changes. Reading or writing through
/// the pointer, and unmapping it once (`libc::munmap`), stay the caller's
/// `unsafe`.
pub fn mmap(
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
    fd: RawFd,
    offset: libc::off_t,
) -> io::Result<*mut u8> {
    if flags & libc::MAP_FIXED != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "mmap with MAP_FIXED would replace memory in use",
        ));
    }
    // SAFETY: a null hint without MAP_FIXED maps a fresh range; the call
    // reads and writes no memory of ours.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, offset) };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

/// An interface request (`struct ifreq`) naming `name`, and a datagram
/// socket to send it on; InvalidInput unless the name is 1 to 15 bytes
/// without NUL.
fn ifreq(name: &str) -> io::Result<(OwnedFd, libc::ifreq)> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{name}' is not an interface name (1 to 15 bytes, no NUL)"),
        ));
    }
    // SAFETY: plain socket(2); the fd is owned below.
    let fd = unsafe {
        syscall!(socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0
        ))?
    };
    // SAFETY: fd is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; all zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok((fd, req))
}

/// The flags of network interface `name` (SIOCGIFFLAGS) in the calling
/// thread's network namespace; NotFound when there is no such interface.
pub fn iface_flags(name: &str) -> io::Result<u32> {
    let (fd, mut req) = ifreq(name)?;
    // SAFETY: SIOCGIFFLAGS reads the NUL-terminated name (the rest of the
    // zeroed array) and writes the flags into `req`.
    let r = unsafe { syscall!(ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req)) };
    if let Err(e) = r {
        if e.raw_os_error() == Some(libc::ENODEV) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface '{name}' here: {e}"),
            ));
        }
        return Err(io::Error::new(e.kind(), format!("interface '{name}': {e}")));
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_flags } as u16 as u32)
}

/// Brings network interface `name` up (adds IFF_UP to its flags) in the
/// calling thread's network namespace; needs CAP_NET_ADMIN there.
pub fn iface_up(name: &str) -> io::Result<()> {
    let flags = iface_flags(name)?;
    let (fd, mut req) = ifreq(name)?;
    req.ifr_ifru.ifru_flags = (flags | libc::IFF_UP as u32) as u16 as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads the name and the flags from a live ifreq.
    unsafe { syscall!(ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &req))? };
    Ok(())
}

/// Takes an exclusive advisory lock on `fd` without waiting (flock(2)
/// `LOCK_EX | LOCK_NB`): `WouldBlock` while another open file holds it. The
/// lock lasts until the file is closed.
pub fn try_lock_exclusive(fd: RawFd) -> io::Result<()> {
    // SAFETY: flock takes integers only and touches no memory of ours.
    unsafe { syscall!(flock(fd, libc::LOCK_EX | libc::LOCK_NB)) }.map(|_| ())
}

/// Has the kernel send SIGKILL to this process when its parent exits
/// (PR_SET_PDEATHSIG), so a child process never outlives the run that
/// started it. One prctl: also usable between fork and exec.
pub fn die_with_parent() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        syscall!(prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong
        ))
    }
    .map(|_| ())
}

/// Makes this thread a real-time one (SCHED_FIFO at `priority`, 1..=99):
/// it runs as soon as it wakes, ahead of every normal thread. Needs root
/// or CAP_SYS_NICE (EPERM otherwise).
pub fn set_fifo_priority(priority: i32) -> io::Result<()> {
    // Task 0 is the calling thread.
    set_fifo_priority_of(0, priority)
}

/// Makes task `tid` (a thread of any process, a kernel thread) a
/// real-time one, as [`set_fifo_priority`] does for the calling thread.
pub fn set_fifo_priority_of(tid: i32, priority: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: p lives for the call; the kernel checks tid.
    unsafe { syscall!(sched_setscheduler(tid, libc::SCHED_FIFO, &p)) }.map(|_| ())
}

/// Makes this thread a normal one again (SCHED_OTHER, the default
/// policy), after [`set_fifo_priority`].
pub fn set_normal_priority() -> io::Result<()> {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: p lives for the call; pid 0 is the calling thread.
    unsafe { syscall!(sched_setscheduler(0, libc::SCHED_OTHER, &p)) }.map(|_| ())
}

/// Sets this thread's timer slack (how late the kernel may wake a timed
/// wait to batch wake-ups; 50 µs by default).
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0);
    }
}

/// A buffer of `n` events for [`Epoll::wait`].
pub fn new_events(n: usize) -> Vec<Event> {
    vec![libc::epoll_event { events: 0, u64: 0 }; n]
}

/// A non-blocking eventfd used to wake a worker thread.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A new non-blocking, close-on-exec eventfd.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall returning a new fd we take ownership of.
        let fd = unsafe { syscall!(eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC))? };
        Ok(EventFd {
            // SAFETY: fresh descriptor.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }
    /// The descriptor, to register with an event loop.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    /// Wakes the waiter (adds 1 to the counter).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64.
        unsafe { libc::write(self.fd.as_raw_fd(), &one as *const u64 as *const _, 8) };
    }
    /// Resets the counter after a wake-up.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64.
        unsafe { libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut _, 8) };
    }
}

/// Sets an integer socket option (`setsockopt` with a `c_int` value).
pub fn setsockopt_int(fd: RawFd, level: i32, opt: i32, v: i32) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    unsafe {
        syscall!(setsockopt(
            fd,
            level,
            opt,
            &v as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        ))?
    };
    Ok(())
}

/// Turns TCP_NODELAY on or off (on: a small message is sent at once, not held
/// back to coalesce).
pub fn set_nodelay(fd: RawFd, on: bool) -> io::Result<()> {
    setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, on as i32)
}

static STOP_SIGNAL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP_SIGNAL.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Make SIGINT/SIGTERM set a flag instead of killing the process, so a
/// long-running server can stop cleanly and report; returns the flag.
pub fn stop_on_signal() -> &'static std::sync::atomic::AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { libc::signal(sig, on_stop_signal as *const () as libc::sighandler_t) };
    }
    &STOP_SIGNAL
}

static STOP_SIGNAL_NUMBER: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_stop_or_hangup(sig: libc::c_int) {
    STOP_SIGNAL_NUMBER.store(sig, std::sync::atomic::Ordering::SeqCst);
    STOP_SIGNAL.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// [`stop_on_signal`], and SIGHUP too (the terminal closed): the flag is
/// set, [`stop_signal`] says which signal came, and the caller cleans up
/// and exits 128 + that number, as the signal itself would have ended it.
pub fn stop_on_signal_or_hangup() -> &'static std::sync::atomic::AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to atomics (async-signal-safe).
        unsafe { libc::signal(sig, on_stop_or_hangup as *const () as libc::sighandler_t) };
    }
    &STOP_SIGNAL
}

/// The signal that set the flag of [`stop_on_signal_or_hangup`] (0: none
/// yet).
pub fn stop_signal() -> i32 {
    STOP_SIGNAL_NUMBER.load(std::sync::atomic::Ordering::SeqCst)
}

/// The TCP congestion control algorithm of a socket (TCP_CONGESTION).
pub fn tcp_congestion(fd: RawFd) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf` and updates len.
    unsafe {
        syscall!(getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        ))?
    };
    let b = &buf[..(len as usize).min(buf.len())];
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    Ok(String::from_utf8_lossy(&b[..end]).into_owned())
}

/// Set a socket's TCP congestion control algorithm (TCP_CONGESTION).
pub fn set_tcp_congestion(fd: RawFd, name: &str) -> io::Result<()> {
    // SAFETY: passes a pointer to the live name bytes and their length.
    unsafe {
        syscall!(setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        ))?
    };
    Ok(())
}

/// Whether `name` is a well-formed congestion control name (the kernel's
/// TCP_CA_NAME_MAX is 16 with the terminating NUL).
pub fn valid_congestion_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 16
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// Congestion controls that pace every transmit themselves: without an fq
/// qdisc the kernel then arms a per-socket hrtimer for each burst. On
/// loopback there is nothing to pace, and on a virtual machine each timer
/// reprogramming is a VM exit: with bbr (a common distribution default)
/// a cbench-style generator spent 14% of its CPU there (perf, 16 switches,
/// throughput mode) and 20% less CPU per response with cubic.
pub fn congestion_paces(name: &str) -> bool {
    name.starts_with("bbr")
}

/// What a socket's congestion control was and what it is now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CongestionApplied {
    /// The kernel's choice for the socket before any change.
    pub kernel: String,
    /// The algorithm in force after the policy ran.
    pub applied: String,
}

/// The policy for a socket's congestion control: `"kernel"` leaves the
/// kernel's choice, `"auto"` replaces a pacing one ([`congestion_paces`])
/// by cubic, else reno (reno is always built in and allowed to every
/// user), and any other value is set as given (an error if the kernel
/// refuses it).
pub fn apply_congestion(fd: RawFd, policy: &str) -> io::Result<CongestionApplied> {
    let kernel = tcp_congestion(fd)?;
    match policy {
        "kernel" => {}
        "auto" => {
            if congestion_paces(&kernel) && set_tcp_congestion(fd, "cubic").is_err() {
                set_tcp_congestion(fd, "reno")?;
            }
        }
        name => set_tcp_congestion(fd, name).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "TCP congestion control '{name}': {e} (available: {}; allowed without CAP_NET_ADMIN: {})",
                    read_sysctl("net/ipv4/tcp_available_congestion_control"),
                    read_sysctl("net/ipv4/tcp_allowed_congestion_control")
                ),
            )
        })?,
    }
    let applied = tcp_congestion(fd)?;
    Ok(CongestionApplied { kernel, applied })
}

/// Check a congestion policy on a fresh, unconnected TCP socket: what
/// [`apply_congestion`] will do to every connection, or why it cannot.
pub fn probe_congestion(policy: &str) -> io::Result<CongestionApplied> {
    if !matches!(policy, "auto" | "kernel") && !valid_congestion_name(policy) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("TCP congestion control '{policy}': expected auto, kernel or an algorithm name such as cubic or reno"),
        ));
    }
    // SAFETY: socket(2) with constant arguments; the fd is owned below.
    let fd = unsafe {
        syscall!(socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0
        ))?
    };
    // SAFETY: fd was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    apply_congestion(fd.as_raw_fd(), policy)
}

fn read_sysctl(path: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{path}"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Sets a socket's send buffer size (SO_SNDBUF; the kernel doubles it).
pub fn set_sndbuf(fd: RawFd, bytes: i32) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, bytes)
}

/// Bytes waiting in a socket's receive queue (FIONREAD).
pub fn readable_bytes(fd: RawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through a valid pointer.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    if r < 0 {
        0
    } else {
        n.max(0) as usize
    }
}

/// Raise the soft RLIMIT_NOFILE to the hard limit (one fd per switch);
/// returns the soft limit now in force.
pub fn raise_nofile() -> u64 {
    // SAFETY: getrlimit/setrlimit with a valid, live rlimit struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return want.rlim_cur;
            }
        }
        r.rlim_cur
    }
}

/// One poll(2) call over `fds`; returns how many have events (0 on
/// timeout or EINTR).
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: fds is a valid, writable array of fds.len() pollfd structs.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}

/// SO_REUSEPORT on a socket (several event loops sharing one listen port).
pub fn set_reuseport(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)
}

/// SO_REUSEADDR on a socket.
pub fn set_reuseaddr(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)
}

/// The soft and hard RLIMIT_NOFILE now in force.
pub fn nofile_limits() -> (u64, u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit with a valid, live rlimit struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return (0, 0);
    }
    (r.rlim_cur, r.rlim_max)
}

/// Why a process cannot have the descriptors it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NofileShortage {
    /// The soft limit in force after trying.
    pub soft: u64,
    /// The hard limit.
    pub hard: u64,
    /// `fs.nr_open`: how far root could raise the hard limit.
    pub nr_open: u64,
}

/// Makes room for `need` descriptors in this process (and the children it
/// starts afterwards): raises the soft RLIMIT_NOFILE to the hard limit and,
/// when that is not enough and the process may (root), the hard limit
/// itself up to `fs.nr_open`. Returns the soft limit now in force.
pub fn ensure_nofile(need: u64) -> Result<u64, NofileShortage> {
    let soft = raise_nofile();
    if soft >= need {
        return Ok(soft);
    }
    let (_, hard) = nofile_limits();
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(hard);
    if need <= nr_open {
        let r = libc::rlimit {
            rlim_cur: need,
            rlim_max: need.max(hard),
        };
        // SAFETY: setrlimit with a valid, live rlimit struct.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0 {
            return Ok(need);
        }
    }
    Err(NofileShortage {
        soft,
        hard,
        nr_open,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn congestion_policies() {
        // "kernel" changes nothing.
        let k = probe_congestion("kernel").unwrap();
        assert_eq!(k.kernel, k.applied);
        // "auto" never leaves a pacing algorithm in force.
        let a = probe_congestion("auto").unwrap();
        assert!(!congestion_paces(&a.applied), "{a:?}");
        if !congestion_paces(&a.kernel) {
            assert_eq!(a.applied, a.kernel);
        }
        // reno is always built in and allowed.
        assert_eq!(probe_congestion("reno").unwrap().applied, "reno");
        // An unknown algorithm is refused with the lists to choose from.
        let e = probe_congestion("nosuchcc").unwrap_err().to_string();
        assert!(e.contains("nosuchcc") && e.contains("available:"), "{e}");
        // A malformed name never reaches the kernel.
        for bad in ["", "bbr!", "a-very-long-name-x"] {
            let e = probe_congestion(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
        assert!(congestion_paces("bbr") && !congestion_paces("cubic"));
    }

    #[test]
    fn interface_flags_and_bringing_loopback_up() {
        let e = iface_flags("cbnope0").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("no interface 'cbnope0'"), "{e}");
        let e = iface_flags("").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        if !is_root() {
            return;
        }
        // A fresh namespace for this thread only: its loopback starts down.
        // SAFETY: unshare with a flag, no pointers.
        unsafe { syscall!(unshare(libc::CLONE_NEWNET)) }.unwrap();
        assert_eq!(iface_flags("lo").unwrap() & libc::IFF_UP as u32, 0);
        iface_up("lo").unwrap();
        assert_ne!(iface_flags("lo").unwrap() & libc::IFF_UP as u32, 0);
    }

    #[test]
    fn congestion_applies_to_a_connected_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        for s in [c.as_raw_fd(), a.as_raw_fd()] {
            let r = apply_congestion(s, "reno").unwrap();
            assert_eq!(r.applied, "reno");
            assert_eq!(tcp_congestion(s).unwrap(), "reno");
        }
    }
}
