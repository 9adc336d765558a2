//! The socket calls of the mux lab's hot paths, as thin wrappers over libc
//! returning `io::Result`: non-blocking read/write/accept on raw
//! descriptors (the engines keep descriptors in plain arrays, as the seed's
//! servers do), listener and client socket setup (SO_REUSEPORT listeners,
//! non-blocking connect, source-address binding without port reservation).
//!
//! Errors come through core's one conversion (`commbench_core::syscall!`),
//! TCP_NODELAY and integer options through `commbench_core::sys`.
//!
//! Invariants: every `unsafe` block is one libc call on a descriptor the
//! caller owns for the call's duration, with pointers to live buffers of
//! the stated length.
#![allow(unsafe_code)]

pub use commbench_core::sys::set_nodelay;
use commbench_core::sys::setsockopt_int as setsockopt;
use commbench_core::syscall;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::os::fd::{FromRawFd, IntoRawFd, RawFd};

/// read(2): `Ok(0)` is end of stream; `WouldBlock` when nothing is there.
#[inline]
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is a live, writable slice of buf.len() bytes.
    unsafe { syscall!(read(fd, buf.as_mut_ptr().cast(), buf.len())) }.map(|n| n as usize)
}

/// write(2) without SIGPIPE (send with MSG_NOSIGNAL).
#[inline]
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is a live slice of buf.len() bytes.
    unsafe { syscall!(send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL)) }
        .map(|n| n as usize)
}

/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC; `WouldBlock` when the queue
/// is empty.
#[inline]
pub fn accept(listener: RawFd) -> io::Result<RawFd> {
    // SAFETY: null address pointers are allowed (the peer address is not wanted).
    unsafe {
        syscall!(accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        ))
    }
}

/// Ends the sending direction (a FIN after what is queued); receiving
/// goes on. Errors are ignored: the connection is closed next anyway.
pub fn shutdown_write(fd: RawFd) {
    // SAFETY: shutdown(2) on a descriptor this process owns; it touches no
    // memory of ours.
    let _ = unsafe { libc::shutdown(fd, libc::SHUT_WR) };
}

/// close(2) of a descriptor the caller owns and forgets afterwards.
#[inline]
pub fn close(fd: RawFd) {
    // SAFETY: the caller owns fd and never uses it again.
    unsafe { libc::close(fd) };
}

/// Moves the socket `new` onto the descriptor number `old` (dup2, which
/// closes what `old` held) and closes `new`: a replacement connection
/// keeps the number its owner knows it by.
pub fn replace(new: RawFd, old: RawFd) -> std::io::Result<()> {
    // SAFETY: both descriptors belong to the caller; dup2 swaps what
    // `old` refers to atomically, and `new` is not used afterwards.
    let r = unsafe { syscall!(dup2(new, old)) };
    close(new);
    r.map(|_| ())
}

fn sockaddr_in(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn v4(addr: SocketAddr) -> io::Result<SocketAddrV4> {
    match addr {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the mux lab speaks IPv4 only; give an IPv4 address",
        )),
    }
}

/// A non-blocking IPv4 TCP listener with SO_REUSEADDR (and SO_REUSEPORT
/// when several event loops share the port) and the given backlog.
pub fn listener(addr: SocketAddr, backlog: i32, reuseport: bool) -> io::Result<TcpListener> {
    let a = v4(addr)?;
    // SAFETY: plain syscall returning a new descriptor we own.
    let fd = unsafe {
        syscall!(socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        ))?
    };
    // SAFETY: fd is fresh and owned by nobody else; the listener closes it.
    let l = unsafe { TcpListener::from_raw_fd(fd) };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if reuseport {
        setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    let sa = sockaddr_in(a);
    // SAFETY: sa is a live sockaddr_in of the stated size.
    unsafe {
        syscall!(bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ))?
    };
    // SAFETY: fd is a bound socket.
    unsafe { syscall!(listen(fd, backlog))? };
    Ok(l)
}

/// Starts a non-blocking connect to `target`, optionally from `source`
/// (bound with IP_BIND_ADDRESS_NO_PORT so the port is chosen per 4-tuple,
/// which lets more than one port range of connections share a target).
/// Returns the descriptor; completion is signalled by writability.
pub fn connect_start(target: SocketAddr, source: Option<Ipv4Addr>) -> io::Result<RawFd> {
    let t = v4(target)?;
    // SAFETY: plain syscall returning a new descriptor the caller owns.
    let fd = unsafe {
        syscall!(socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        ))?
    };
    let fail = |e: io::Error| {
        close(fd);
        e
    };
    if let Some(src) = source {
        setsockopt(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1).map_err(fail)?;
        let sa = sockaddr_in(SocketAddrV4::new(src, 0));
        // SAFETY: sa is a live sockaddr_in of the stated size.
        unsafe {
            syscall!(bind(
                fd,
                (&sa as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ))
        }
        .map_err(fail)?;
    }
    let sa = sockaddr_in(t);
    // SAFETY: sa is a live sockaddr_in of the stated size.
    let r = unsafe {
        syscall!(connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ))
    };
    if let Err(e) = r {
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(fail(e));
        }
    }
    Ok(fd)
}

/// The pending error of a socket (SO_ERROR): `Ok(())` once a non-blocking
/// connect has succeeded.
pub fn take_error(fd: RawFd) -> io::Result<()> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are live and sized for SO_ERROR.
    unsafe {
        syscall!(getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        ))?
    };
    if v != 0 {
        return Err(io::Error::from_raw_os_error(v));
    }
    Ok(())
}

/// Makes a descriptor blocking (the thread-per-connection clients).
pub fn set_blocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns.
    let fl = unsafe { syscall!(fcntl(fd, libc::F_GETFL))? };
    // SAFETY: as above.
    unsafe { syscall!(fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK))? };
    Ok(())
}

/// Whether an accept failed for want of descriptors (process or system).
pub fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// One descriptor held in reserve (the classic EMFILE trick): when accept
/// fails for want of descriptors, the reserve is closed, the waiting
/// connections are accepted and closed at once (shed: the peer sees the
/// close instead of hanging in the queue, and the listener stops being
/// ready), and the reserve is reopened.
pub struct Reserve {
    fd: RawFd,
}

fn open_reserve() -> RawFd {
    // Read-only and close-on-exec (std's default); -1 when none is free.
    std::fs::File::open("/dev/null").map_or(-1, IntoRawFd::into_raw_fd)
}

impl Reserve {
    pub fn new() -> Reserve {
        Reserve { fd: open_reserve() }
    }

    /// Accepts and closes what waits on `listener` (at most `max`),
    /// through the reserve's slot; returns how many were shed.
    pub fn shed(&mut self, listener: RawFd, max: usize) -> u64 {
        if self.fd >= 0 {
            close(self.fd);
            self.fd = -1;
        }
        let mut n = 0;
        while (n as usize) < max {
            match accept(listener) {
                Ok(fd) => {
                    close(fd);
                    n += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.fd = open_reserve();
        n
    }
}

impl Default for Reserve {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        if self.fd >= 0 {
            close(self.fd);
        }
    }
}
