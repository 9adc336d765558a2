//! io_uring: completions instead of readiness. One multishot accept on the
//! listener; per connection one operation in flight at a time, recv → send
//! (repeated until the whole chunk is out) → recv, into the connection's
//! own buffer. `user_data` carries the state slot (`index`) or the
//! descriptor (`scan`, found by a linear search of the state array), and
//! the operation in its low bits. The ring is set up with SINGLE_ISSUER and
//! DEFER_TASKRUN where the kernel has them (completions run in this thread
//! at the next wait, not in interrupt context), and falls back without.
//!
//! Invariants: a connection's buffer is never touched while a recv or send
//! on it is in flight (one operation per connection); a connection is
//! closed only when its last operation has completed.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::{publish, Conns, Engine, Lookup, LoopCtx, LoopStats};
use crate::net;
use crate::protocol::Protocol;

const OP_ACCEPT: u64 = 0;
const OP_RECV: u64 = 1;
const OP_SEND: u64 = 2;
const OP_BITS: u64 = 2;
const ACCEPT_DATA: u64 = u64::MAX << OP_BITS;
const CANCEL_DATA: u64 = (u64::MAX << OP_BITS) | 3;

/// Whether io_uring can be used here, and why not.
pub fn probe() -> Result<(), String> {
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        match s.trim() {
            "2" => {
                return Err(
                    "io_uring is disabled on this machine (kernel.io_uring_disabled = 2)".into(),
                )
            }
            "1" if !is_root() => {
                return Err("io_uring is limited to privileged users here (kernel.io_uring_disabled = 1) and this process is not root".into())
            }
            _ => {}
        }
    }
    if std::env::var_os("COMMBENCH_MUX_FAIL_URING").is_some() {
        return Err("io_uring setup failed (injected by COMMBENCH_MUX_FAIL_URING)".into());
    }
    IoUring::new(8)
        .map(|_| ())
        .map_err(|e| format!("io_uring setup failed: {e}"))
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid() == 0
    }
}

/// Per connection: its buffer and the send in progress.
#[derive(Default)]
struct Io {
    buf: Vec<u8>,
    len: usize,
    sent: usize,
}

pub struct UringEngine {
    ring: IoUring,
    /// Whether SINGLE_ISSUER + DEFER_TASKRUN were accepted.
    pub deferred: bool,
    /// Operations submitted whose last completion has not arrived.
    inflight: u64,
}

impl UringEngine {
    pub fn new(max_conns: usize) -> io::Result<Self> {
        if let Err(msg) = probe() {
            return Err(io::Error::new(io::ErrorKind::Unsupported, msg));
        }
        let sq = 4096u32;
        // Room for one completion per connection plus the accepts.
        let cq = ((max_conns as u32 + 64).next_power_of_two()).clamp(2 * sq, 1 << 17);
        let deferred = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_cqsize(cq)
            .build(sq);
        let (ring, deferred) = match deferred {
            Ok(r) => (r, true),
            Err(_) => (IoUring::builder().setup_cqsize(cq).build(sq)?, false),
        };
        Ok(UringEngine {
            ring,
            deferred,
            inflight: 0,
        })
    }

    fn push(&mut self, e: squeue::Entry, stats: &mut LoopStats) -> io::Result<()> {
        stats.sqes += 1;
        self.inflight += 1;
        // SAFETY: every entry's buffer is a connection's Vec, which is
        // neither moved nor freed until the entry's completion arrives
        // (one operation in flight per connection; buffers are resized
        // only between operations).
        #[allow(unsafe_code)]
        loop {
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return Ok(());
            }
            stats.syscalls += 1;
            self.ring.submit()?;
        }
    }
}

fn recv_entry(fd: RawFd, io: &mut Io, data: u64) -> squeue::Entry {
    opcode::Recv::new(types::Fd(fd), io.buf.as_mut_ptr(), io.buf.len() as u32)
        .build()
        .user_data(data << OP_BITS | OP_RECV)
}

fn send_entry(fd: RawFd, io: &Io, data: u64) -> squeue::Entry {
    let rest = &io.buf[io.sent..io.len];
    opcode::Send::new(types::Fd(fd), rest.as_ptr(), rest.len() as u32)
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(data << OP_BITS | OP_SEND)
}

impl Engine for UringEngine {
    fn uring_deferred(&self) -> Option<bool> {
        Some(self.deferred)
    }

    fn serve(&mut self, ctx: &LoopCtx<'_>) -> io::Result<LoopStats> {
        let mut stats = LoopStats::default();
        let mut conns = Conns::default();
        let mut ios: Vec<Io> = Vec::new();
        let mut scratch: Vec<u8> = Vec::new();
        let lfd = ctx.listener.as_raw_fd();
        let accept = opcode::AcceptMulti::new(types::Fd(lfd))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(ACCEPT_DATA | OP_ACCEPT);
        self.push(accept.clone(), &mut stats)?;
        let mut reserve = net::Reserve::new();
        let mut fresh: Vec<RawFd> = Vec::new();
        let key = |slot: usize, fd: RawFd| match ctx.lookup {
            Lookup::Index => slot as u64,
            Lookup::Scan => fd as u64,
        };
        let ts = types::Timespec::new().nsec(super::WAIT_TIMEOUT_MS as u32 * 1_000_000);
        let args = types::SubmitArgs::new().timespec(&ts);
        let mut done: Vec<(u64, i32, u32)> = Vec::with_capacity(4096);

        let result = (|| -> io::Result<()> {
            while !ctx.stop.load(std::sync::atomic::Ordering::Relaxed) {
                stats.waits += 1;
                stats.syscalls += 1;
                match self.ring.submitter().submit_with_args(1, &args) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ETIME) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                    Err(e) => return Err(e),
                }
                done.clear();
                done.extend(
                    self.ring
                        .completion()
                        .map(|c| (c.user_data(), c.result(), c.flags())),
                );
                stats.events += done.len() as u64;
                for &(ud, res, flags) in &done {
                    let op = ud & ((1 << OP_BITS) - 1);
                    let data = ud >> OP_BITS;
                    if !(op == OP_ACCEPT && cqueue::more(flags)) {
                        self.inflight = self.inflight.saturating_sub(1);
                    }
                    if op == OP_ACCEPT {
                        fresh.clear();
                        if res >= 0 {
                            if ctx.admit() {
                                let fd = res as RawFd;
                                let _ = net::set_nodelay(fd);
                                stats.syscalls += 1;
                                stats.accepted += 1;
                                fresh.push(fd);
                            } else {
                                // At the connection limit: closed at once.
                                net::close(res as RawFd);
                                stats.syscalls += 1;
                                stats.refused += 1;
                            }
                        } else if res == -libc::EMFILE || res == -libc::ENFILE {
                            // Out of descriptors (maybe no longer: this
                            // completion may be old): accept what waits
                            // here, shedding through the reserve what
                            // finds no descriptor; keep serving.
                            stats.accept_errors += 1;
                            super::accept_all(lfd, ctx, &mut reserve, &mut stats, |fd, _| {
                                fresh.push(fd)
                            });
                        } else if res != -libc::ECONNABORTED && res != -libc::EINTR {
                            stats.accept_errors += 1;
                        }
                        for &fd in &fresh {
                            let slot = conns.insert(fd);
                            if slot >= ios.len() {
                                ios.resize_with(slot + 1, Io::default);
                            }
                            let io = &mut ios[slot];
                            io.buf.resize(ctx.buf_size, 0);
                            let e = recv_entry(fd, io, key(slot, fd));
                            self.push(e, &mut stats)?;
                        }
                        if !cqueue::more(flags) {
                            self.push(accept.clone(), &mut stats)?;
                        }
                        continue;
                    }
                    let slot = match ctx.lookup {
                        Lookup::Index => data as usize,
                        Lookup::Scan => match conns.scan(data as RawFd, &mut stats.scan_steps) {
                            Some(s) => s,
                            None => continue,
                        },
                    };
                    let fd = conns.slots[slot].fd;
                    if fd < 0 {
                        continue;
                    }
                    let io = &mut ios[slot];
                    let close = match op {
                        OP_RECV if res > 0 => {
                            let mut len = res as usize;
                            let mut bad = false;
                            if ctx.protocol == Protocol::Sockperf {
                                scratch.clear();
                                bad = conns.slots[slot]
                                    .filter
                                    .feed(&io.buf[..len], &mut scratch)
                                    .is_err();
                                if !bad {
                                    if io.buf.len() < scratch.len() {
                                        io.buf.resize(scratch.len(), 0);
                                    }
                                    io.buf[..scratch.len()].copy_from_slice(&scratch);
                                    len = scratch.len();
                                }
                            }
                            if bad {
                                stats.protocol_errors += 1;
                                true
                            } else {
                                io.len = len;
                                io.sent = 0;
                                let e = if len == 0 {
                                    recv_entry(fd, io, key(slot, fd))
                                } else {
                                    send_entry(fd, io, key(slot, fd))
                                };
                                self.push(e, &mut stats)?;
                                false
                            }
                        }
                        OP_SEND if res > 0 => {
                            io.sent += res as usize;
                            stats.bytes += res as u64;
                            let e = if io.sent < io.len {
                                send_entry(fd, io, key(slot, fd))
                            } else {
                                recv_entry(fd, io, key(slot, fd))
                            };
                            self.push(e, &mut stats)?;
                            false
                        }
                        _ if res == -libc::EINTR || res == -libc::EAGAIN => {
                            let e = if op == OP_RECV {
                                recv_entry(fd, io, key(slot, fd))
                            } else {
                                send_entry(fd, io, key(slot, fd))
                            };
                            self.push(e, &mut stats)?;
                            false
                        }
                        // 0 from recv: the peer closed; errors: it failed.
                        _ => true,
                    };
                    if close {
                        net::close(fd);
                        stats.syscalls += 1;
                        stats.closed += 1;
                        conns.remove(slot);
                        ctx.release(1);
                    }
                }
                publish(ctx, &stats, conns.live);
            }
            Ok(())
        })();
        // Cancel what is in flight and wait for every completion before
        // the buffers go: a recv on a descriptor is not ended by close().
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(CANCEL_DATA);
        if self.push(cancel, &mut stats).is_ok() {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while self.inflight > 0 && std::time::Instant::now() < deadline {
                let _ = self.ring.submitter().submit_with_args(1, &args);
                let mut ended = 0;
                for c in self.ring.completion() {
                    let accept_more = c.user_data() & ((1 << OP_BITS) - 1) == OP_ACCEPT
                        && c.user_data() != CANCEL_DATA
                        && cqueue::more(c.flags());
                    if !accept_more {
                        ended += 1;
                    }
                }
                self.inflight = self.inflight.saturating_sub(ended);
            }
            if self.inflight > 0 {
                // Buffers could still be written to: keep them for the
                // ring's lifetime rather than free them.
                std::mem::forget(std::mem::take(&mut ios));
            }
        }
        ctx.release(conns.close_all(&mut stats));
        drop(ios);
        publish(ctx, &stats, 0);
        result.map(|_| stats)
    }
}
