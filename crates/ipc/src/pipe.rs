//! The `pipe` transport: two named pipes (FIFOs, mode 0600) per session in
//! a private temp dir, `s<N>.req` (client→server) and `s<N>.resp`
//! (server→client). Named rather than anonymous so a re-executed `mp`
//! client can open them by path. The pipe capacity is raised to the shm ring
//! size (F_SETPIPE_SZ, 1 MiB by default, the unprivileged maximum) so both paths get the same
//! buffering budget.
//!
//! Rendezvous without hangs: the server opens each request FIFO for reading
//! with O_NONBLOCK (which never blocks) and the response FIFO for writing
//! with O_NONBLOCK in a bounded retry loop (ENXIO until the client opened its
//! read end), then switches both to blocking I/O. A client that dies closes
//! its ends, which the server sees as EOF or EPIPE.

use commbench_core::syscall;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{IpcError, Result};
use crate::stream::{FdRx, FdTx, ACCEPT_TIMEOUT};
use crate::transport::{Endpoint, ListenOptions, Transport, TransportKind};

/// Server side of the pipe transport.
pub struct PipeTransport {
    dir: crate::artifacts::TempDir,
    sessions: u32,
    pipe_bytes: usize,
}

fn fifo_paths(dir: &Path, session: u32) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("s{session}.req")),
        dir.join(format!("s{session}.resp")),
    )
}

#[allow(unsafe_code)]
fn mkfifo(p: &Path) -> Result<()> {
    let c = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| IpcError::usage(format!("bad path {}", p.display())))?;
    // SAFETY: c is a valid NUL-terminated path.
    unsafe { syscall!(mkfifo(c.as_ptr(), 0o600)) }
        .map_err(|e| IpcError::io(format!("mkfifo {}", p.display()), e))?;
    Ok(())
}

#[allow(unsafe_code)]
fn set_blocking(f: &File) -> Result<()> {
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a file descriptor we own.
    let fl = unsafe { syscall!(fcntl(fd, libc::F_GETFL)) }.map_err(|e| IpcError::io("fcntl", e))?;
    // SAFETY: as above.
    unsafe { syscall!(fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK)) }
        .map_err(|e| IpcError::io("fcntl", e))?;
    Ok(())
}

#[allow(unsafe_code)]
fn set_pipe_size(f: &File, bytes: usize) {
    // SAFETY: fcntl on a file descriptor we own; failure (e.g. above
    // /proc/sys/fs/pipe-max-size) leaves the default size, which is fine.
    unsafe {
        libc::fcntl(f.as_raw_fd(), libc::F_SETPIPE_SZ, bytes as libc::c_int);
    }
}

impl PipeTransport {
    /// Create the FIFOs for `opts.sessions` sessions.
    pub fn create(opts: &ListenOptions) -> Result<PipeTransport> {
        let mut dir = crate::artifacts::TempDir::new()?;
        for s in 0..opts.sessions {
            let (req, resp) = fifo_paths(dir.path(), s);
            dir.register(&req);
            dir.register(&resp);
            mkfifo(&req)?;
            mkfifo(&resp)?;
        }
        Ok(PipeTransport {
            dir,
            sessions: opts.sessions,
            pipe_bytes: opts.ring_bytes,
        })
    }
}

impl Transport for PipeTransport {
    fn kind(&self) -> TransportKind {
        TransportKind::Pipe
    }

    fn address(&self) -> String {
        self.dir.path().display().to_string()
    }

    fn accept_all(&mut self) -> Result<Vec<Endpoint>> {
        let deadline = Instant::now() + ACCEPT_TIMEOUT;
        let mut eps = Vec::with_capacity(self.sessions as usize);
        for s in 0..self.sessions {
            let (req, resp) = fifo_paths(self.dir.path(), s);
            let rx = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&req)
                .map_err(|e| IpcError::io(format!("open {}", req.display()), e))?;
            let tx = loop {
                match OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                    .open(&resp)
                {
                    Ok(f) => break f,
                    Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                        if Instant::now() > deadline {
                            return Err(IpcError::Timeout(format!(
                                "client of session {s} never opened {}",
                                resp.display()
                            )));
                        }
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    Err(e) => return Err(IpcError::io(format!("open {}", resp.display()), e)),
                }
            };
            set_blocking(&rx)?;
            set_blocking(&tx)?;
            set_pipe_size(&tx, self.pipe_bytes);
            set_pipe_size(&rx, self.pipe_bytes);
            eps.push(Endpoint {
                tx: Box::new(FdTx(tx)),
                rx: Box::new(FdRx::new(rx)),
            });
        }
        Ok(eps)
    }

    fn abort_session(&self, _session: u32) {
        // A dead client's FIFO ends are closed by the kernel: the server sees
        // EOF on the request FIFO or EPIPE on the response FIFO.
    }
}

/// Client side: open session `session`'s FIFOs in directory `dir`.
pub fn connect(dir: &str, session: u32) -> Result<Endpoint> {
    let (req, resp) = fifo_paths(Path::new(dir), session);
    // Blocks until the server has opened the read end (it does so first).
    let tx = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&req)
        .map_err(|e| IpcError::io(format!("open {}", req.display()), e))?;
    let rx = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(&resp)
        .map_err(|e| IpcError::io(format!("open {}", resp.display()), e))?;
    Ok(Endpoint {
        tx: Box::new(FdTx(tx)),
        rx: Box::new(FdRx::new(rx)),
    })
}
