//! io_uring: completions instead of readiness. One multishot accept on the
//! listener; per connection one multishot recv that takes its buffer from a
//! provided-buffer ring shared by the whole loop (IORING_REGISTER_PBUF_RING)
//! only when data arrives, and a send straight from that ring buffer, which
//! goes back to the ring when the send completes. An idle connection holds
//! no buffer: memory is the ring (fixed when the loop starts, its pages
//! resident only once data landed in them, given back with
//! MADV_DONTNEED when the loop's last connection leaves) plus a few dozen
//! bytes of state per connection. Kernels without multishot recv get a
//! single-shot recv with buffer selection instead (the first multishot recv
//! answering EINVAL switches the loop over). `user_data` carries the state
//! slot (`index`) or the descriptor (`scan`, found by a linear search of
//! the state array), and the operation in its low bits. The ring is set up
//! with SINGLE_ISSUER and DEFER_TASKRUN where the kernel has them
//! (completions run in this thread at the next wait, not in interrupt
//! context), and falls back without.
//!
//! Buffer exhaustion: a recv that finds the ring empty ends with ENOBUFS
//! (its data stays in the socket: nothing is lost); the connection waits in
//! a queue and is re-armed once buffers are back (at most as many as are
//! free per wake-up: no busy loop). A ring buffer is held only for one
//! non-blocking send (MSG_DONTWAIT): if the peer does not read and the send
//! would block, the bytes are copied out into the connection's own memory
//! and the buffer goes back, so slow peers cannot drain the ring.
//!
//! HTTPS (`--tls`): a receive's ciphertext goes through the connection's
//! rustls session and the HTTP filter (`super::tls::feed`) and its ring
//! buffer goes back at once; what the session has to send leaves from the
//! connection's own memory like any HTTP answer.
//!
//! Invariants: a ring buffer is written by the kernel only while it is in
//! the ring, and read by a send only while this loop holds it; echo bytes
//! leave in the order they arrived (at most one send in flight per
//! connection; what arrives meanwhile is copied to the connection's
//! backlog, and past one read buffer of backlog the recv is cancelled until
//! it drains: bounded memory per connection); a connection is closed only
//! when its last operation has completed.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};

use commbench_core::sys::is_root;
use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::{publish, Conn, Conns, Engine, Lookup, LoopCtx, LoopStats};
use crate::net;
use crate::protocol::Protocol;

const OP_ACCEPT: u64 = 0;
const OP_RECV: u64 = 1;
const OP_SEND: u64 = 2;
const OP_CANCEL: u64 = 3;
const OP_BITS: u64 = 2;
const ACCEPT_DATA: u64 = u64::MAX << OP_BITS;
/// A one-shot poll of the listener, armed instead of the accept while out
/// of descriptors (an io_uring accept takes a descriptor before it looks
/// for a connection, so re-armed then it fails at once, forever: a spin).
const LISTEN_POLL_DATA: u64 = (u64::MAX - 1) << OP_BITS;
const CANCEL_DATA: u64 = (u64::MAX << OP_BITS) | OP_CANCEL;
/// The loop's buffer group.
const BGID: u16 = 0;
/// Address space the buffer ring may reserve (its resident part is what
/// data touched).
pub const RING_BUDGET: usize = 256 << 20;
/// Fewest and most buffers in the ring (the kernel allows 32768). Tests
/// may set the count with COMMBENCH_MUX_URING_BUFS (a power of two, 1 or
/// more) to exhaust it on purpose.
const MIN_BUFS: usize = 64;
const MAX_BUFS: usize = 32768;

/// Why io_uring cannot be used here.
#[derive(Debug, thiserror::Error)]
pub enum UringUnavailable {
    /// kernel.io_uring_disabled = 2.
    #[error("io_uring is disabled on this machine (kernel.io_uring_disabled = 2)")]
    Disabled,
    /// kernel.io_uring_disabled = 1 and this process is not root.
    #[error("io_uring is limited to privileged users here (kernel.io_uring_disabled = 1) and this process is not root")]
    Privileged,
    /// COMMBENCH_MUX_FAIL_URING is set (a testing aid).
    #[error("io_uring setup failed (injected by COMMBENCH_MUX_FAIL_URING)")]
    Injected,
    /// Creating the ring or its buffers failed.
    #[error("io_uring setup failed: {0}")]
    Setup(std::io::Error),
    /// No provided-buffer rings (before Linux 5.19).
    #[error("io_uring setup failed: no provided-buffer rings (IORING_REGISTER_PBUF_RING, Linux 5.19+): {0}")]
    NoBufferRings(std::io::Error),
}

/// Whether io_uring (with provided-buffer rings) can be used here, and why
/// not.
pub fn probe() -> Result<(), UringUnavailable> {
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        match s.trim() {
            "2" => return Err(UringUnavailable::Disabled),
            "1" if !is_root() => return Err(UringUnavailable::Privileged),
            _ => {}
        }
    }
    if std::env::var_os("COMMBENCH_MUX_FAIL_URING").is_some() {
        return Err(UringUnavailable::Injected);
    }
    let ring = IoUring::new(8).map_err(UringUnavailable::Setup)?;
    let pool = Pool::new(1, 4096).map_err(UringUnavailable::Setup)?;
    pool.register(&ring)
        .map_err(UringUnavailable::NoBufferRings)?;
    let _ = ring.submitter().unregister_buf_ring(BGID);
    drop(ring);
    drop(pool);
    Ok(())
}

/// Buffers in the ring for a loop of `max_conns` connections and buffers
/// of `size` bytes: one per connection, within [`RING_BUDGET`] and the
/// kernel's limits, a power of two.
pub fn ring_entries(max_conns: usize, size: usize) -> usize {
    let want = max_conns.max(1).next_power_of_two();
    let budget = (RING_BUDGET / size.max(1)).max(1);
    // Largest power of two within the budget.
    let cap = 1usize << (usize::BITS - 1 - budget.leading_zeros());
    want.min(cap).clamp(MIN_BUFS, MAX_BUFS)
}

/// Anonymous private memory, reserved without commitment.
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    fn new(len: usize) -> io::Result<Map> {
        let p = commbench_core::sys::mmap(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )?;
        Ok(Map { ptr: p, len })
    }

    /// Gives the pages back (they read as zeros when touched again).
    fn release(&self) {
        // SAFETY: the range is this mapping; no Rust reference into it is
        // live (buffers are only borrowed inside one completion's handling).
        #[allow(unsafe_code)]
        unsafe {
            libc::madvise(self.ptr.cast(), self.len, libc::MADV_DONTNEED);
        }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped.
        #[allow(unsafe_code)]
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// The provided-buffer ring: `entries` buffers of `size` bytes, buffer
/// `bid` at `bid * size`. The kernel takes buffers from the head; this
/// loop gives them back at the tail.
struct Pool {
    ring: Map,
    bufs: Map,
    entries: u16,
    size: usize,
    tail: u16,
    /// Buffers taken by a recv completion and not given back yet.
    in_use: usize,
}

impl Pool {
    fn new(entries: usize, size: usize) -> io::Result<Pool> {
        assert!(entries.is_power_of_two() && entries <= MAX_BUFS);
        let ring = Map::new((entries * std::mem::size_of::<types::BufRingEntry>()).max(4096))?;
        let bufs = Map::new(entries * size)?;
        let mut p = Pool {
            ring,
            bufs,
            entries: entries as u16,
            size,
            tail: 0,
            in_use: entries,
        };
        for bid in 0..entries {
            p.put(bid as u16);
        }
        Ok(p)
    }

    fn register(&self, ring: &IoUring) -> io::Result<()> {
        // SAFETY: the ring memory is page-aligned, `entries` long, and
        // outlives the registration (unregistered, or the io_uring closed,
        // before the pool is dropped; see `serve`).
        #[allow(unsafe_code)]
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                self.ring.ptr as u64,
                self.entries,
                BGID,
                0,
            )
        }
    }

    fn entry(&self, i: u16) -> *mut types::BufRingEntry {
        let i = (i & (self.entries - 1)) as usize;
        // SAFETY: within the ring mapping (i < entries).
        #[allow(unsafe_code)]
        unsafe {
            self.ring.ptr.cast::<types::BufRingEntry>().add(i)
        }
    }

    /// Gives buffer `bid` back to the kernel.
    fn put(&mut self, bid: u16) {
        debug_assert!((bid as usize) < self.entries as usize && self.in_use > 0);
        let e = self.entry(self.tail);
        // SAFETY: the slot at the tail is not the kernel's (the ring never
        // holds more than `entries` buffers: only taken ones come back);
        // the tail is published with release ordering after the entry is
        // written, as the kernel expects.
        #[allow(unsafe_code)]
        unsafe {
            (*e).set_addr(self.bufs.ptr.add(bid as usize * self.size) as u64);
            (*e).set_len(self.size as u32);
            (*e).set_bid(bid);
            self.tail = self.tail.wrapping_add(1);
            let tail = types::BufRingEntry::tail(self.ring.ptr.cast()) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
        self.in_use -= 1;
    }

    /// The first `len` bytes of buffer `bid`, which the kernel filled and
    /// this loop holds.
    fn data(&self, bid: u16, len: usize) -> &[u8] {
        assert!((bid as usize) < self.entries as usize && len <= self.size);
        // SAFETY: a held buffer is not written by the kernel until `put`.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.bufs.ptr.add(bid as usize * self.size), len)
        }
    }

    fn free(&self) -> usize {
        self.entries as usize - self.in_use
    }
}

/// Echo bytes being sent: in a ring buffer this loop holds, or copied out.
enum Out {
    Ring { bid: u16, off: usize, len: usize },
    Own { buf: Vec<u8>, off: usize },
}

/// Per connection: what is being sent, what waits behind it, which
/// operations are in flight.
#[derive(Default)]
struct Io {
    /// The send in flight (or about to be re-sent).
    cur: Option<Out>,
    /// Echo bytes that arrived while a send was in flight.
    backlog: Vec<u8>,
    recv_armed: bool,
    sending: bool,
    /// A cancel of the recv was submitted (backlog full, or closing).
    cancelling: bool,
    /// The last recv ended with ENOBUFS: waiting for buffers.
    starved: bool,
    closing: bool,
}

impl Io {
    fn own_bytes(&self) -> usize {
        self.backlog.capacity()
            + match &self.cur {
                Some(Out::Own { buf, .. }) => buf.capacity(),
                _ => 0,
            }
    }
}

pub struct UringEngine {
    ring: IoUring,
    /// Whether SINGLE_ISSUER + DEFER_TASKRUN were accepted.
    pub deferred: bool,
    /// Operations submitted whose last completion has not arrived.
    inflight: u64,
    max_conns: usize,
    /// Multishot recv works here (cleared on the first EINVAL).
    multishot: bool,
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
            max_conns,
            multishot: std::env::var_os("COMMBENCH_MUX_URING_SINGLESHOT").is_none(),
        })
    }

    fn push(&mut self, e: squeue::Entry, stats: &mut LoopStats) -> io::Result<()> {
        stats.sqes += 1;
        self.inflight += 1;
        #[allow(unsafe_code)]
        loop {
            // SAFETY: every entry's buffer is either a ring buffer this loop
            // holds until the send's completion, or a connection's Vec that is
            // neither moved, grown nor freed until the completion arrives
            // (one send in flight per connection).
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return Ok(());
            }
            stats.syscalls += 1;
            self.ring.submit()?;
        }
    }
}

/// State of one loop's connections and buffers.
struct Loop<'a, 'c> {
    ctx: &'a LoopCtx<'c>,
    conns: Conns,
    ios: Vec<Io>,
    pool: Pool,
    /// Connections waiting for buffers (ENOBUFS), oldest first.
    starved: std::collections::VecDeque<usize>,
    scratch: Vec<u8>,
    /// HTTPS: decrypted bytes of one receive, and a session's output.
    plain: Vec<u8>,
    tls_out: Vec<u8>,
    /// Sum of the connections' `own_bytes`.
    own: usize,
}

impl Loop<'_, '_> {
    fn key(&self, slot: usize) -> u64 {
        match self.ctx.lookup {
            Lookup::Index => slot as u64,
            Lookup::Scan => self.conns.slots[slot].fd as u64,
        }
    }

    fn arm_recv(
        &mut self,
        eng: &mut UringEngine,
        slot: usize,
        st: &mut LoopStats,
    ) -> io::Result<()> {
        let fd = self.conns.slots[slot].fd;
        let ud = self.key(slot) << OP_BITS | OP_RECV;
        let e = if eng.multishot {
            opcode::RecvMulti::new(types::Fd(fd), BGID).build()
        } else {
            opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), self.pool.size as u32)
                .buf_group(BGID)
                .build()
                .flags(squeue::Flags::BUFFER_SELECT)
        };
        let io = &mut self.ios[slot];
        io.recv_armed = true;
        io.starved = false;
        eng.push(e.user_data(ud), st)
    }

    fn send(&mut self, eng: &mut UringEngine, slot: usize, st: &mut LoopStats) -> io::Result<()> {
        let fd = self.conns.slots[slot].fd;
        let ud = self.key(slot) << OP_BITS | OP_SEND;
        let io = &mut self.ios[slot];
        let e = match io.cur.as_ref().expect("a send needs bytes") {
            Out::Ring { bid, off, len } => {
                let b = &self.pool.data(*bid, *len)[*off..];
                opcode::Send::new(types::Fd(fd), b.as_ptr(), b.len() as u32)
                    .flags(libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
            }
            Out::Own { buf, off } => {
                let b = &buf[*off..];
                opcode::Send::new(types::Fd(fd), b.as_ptr(), b.len() as u32)
                    .flags(libc::MSG_NOSIGNAL)
            }
        };
        io.sending = true;
        eng.push(e.build().user_data(ud), st)
    }

    fn cancel_recv(
        &mut self,
        eng: &mut UringEngine,
        slot: usize,
        st: &mut LoopStats,
    ) -> io::Result<()> {
        let io = &mut self.ios[slot];
        if !io.recv_armed || io.cancelling {
            return Ok(());
        }
        io.cancelling = true;
        let target = self.key(slot) << OP_BITS | OP_RECV;
        let e = opcode::AsyncCancel::new(target)
            .build()
            .user_data(self.key(slot) << OP_BITS | OP_CANCEL);
        eng.push(e, st)
    }

    /// Ends a connection: nothing more is echoed; closed once its
    /// operations are done.
    fn start_close(
        &mut self,
        eng: &mut UringEngine,
        slot: usize,
        st: &mut LoopStats,
    ) -> io::Result<()> {
        let io = &mut self.ios[slot];
        io.closing = true;
        self.own -= io.backlog.capacity();
        io.backlog = Vec::new();
        self.cancel_recv(eng, slot, st)
    }

    /// Arms the recv if the connection wants one, closes it if it is done.
    fn settle(&mut self, eng: &mut UringEngine, slot: usize, st: &mut LoopStats) -> io::Result<()> {
        let limit = self.ctx.buf_size;
        let io = &self.ios[slot];
        if io.closing {
            if !io.recv_armed && !io.sending {
                if let Some(Out::Ring { bid, .. }) = io.cur {
                    self.pool.put(bid);
                }
                self.own -= io.own_bytes();
                self.own = self
                    .own
                    .saturating_sub(self.conns.slots[slot].http.own_bytes());
                self.ios[slot] = Io::default();
                net::close(self.conns.slots[slot].fd);
                st.syscalls += 1;
                st.closed += 1;
                self.conns.remove(slot);
                self.ctx.release(1);
            }
            return Ok(());
        }
        // Requests held unparsed (their responses reached the bound): read
        // nothing more until they are answered; after the last answer,
        // nothing more at all.
        let conn = &self.conns.slots[slot];
        let held = conn.holds_input() || (conn.closes_after_output() && conn.lingering.is_none());
        if io.recv_armed || io.starved {
            if io.recv_armed && eng.multishot && (io.backlog.len() >= limit || held) {
                return self.cancel_recv(eng, slot, st);
            }
            return Ok(());
        }
        let want = !held
            && if eng.multishot {
                io.backlog.len() < limit
            } else {
                io.cur.is_none() && io.backlog.is_empty()
            };
        if want {
            if self.pool.free() == 0 {
                // Armed when buffers come back.
                self.ios[slot].starved = true;
                self.starved.push_back(slot);
                return Ok(());
            }
            self.arm_recv(eng, slot, st)?;
        }
        Ok(())
    }

    /// Queues echo bytes: sent now if nothing is in flight, else kept in
    /// the backlog.
    fn echo_owned(
        &mut self,
        eng: &mut UringEngine,
        slot: usize,
        bytes: &[u8],
        st: &mut LoopStats,
    ) -> io::Result<()> {
        let io = &mut self.ios[slot];
        let before = io.own_bytes();
        if io.cur.is_none() {
            io.cur = Some(Out::Own {
                buf: bytes.to_vec(),
                off: 0,
            });
            self.own = self.own + io.own_bytes() - before;
            return self.send(eng, slot, st);
        }
        io.backlog.extend_from_slice(bytes);
        self.own = self.own + io.own_bytes() - before;
        Ok(())
    }

    fn on_recv(
        &mut self,
        eng: &mut UringEngine,
        slot: usize,
        res: i32,
        flags: u32,
        st: &mut LoopStats,
    ) -> io::Result<()> {
        let bid = cqueue::buffer_select(flags);
        if bid.is_some() {
            self.pool.in_use += 1;
        }
        if !cqueue::more(flags) {
            let io = &mut self.ios[slot];
            io.recv_armed = false;
            io.cancelling = false;
        }
        if res > 0 {
            let len = res as usize;
            if self.ctx.extra_work_ticks > 0 {
                commbench_core::delay::tsc_delay_ticks(self.ctx.extra_work_ticks);
            }
            let Some(bid) = bid else {
                // Cannot happen with buffer selection; treat as a failure.
                return self.start_close(eng, slot, st);
            };
            if self.ios[slot].closing {
                self.pool.put(bid);
            } else if let Some(dropped) = self.conns.slots[slot].lingering {
                // After its last answer and FIN: read and dropped until the
                // peer closes (`super::linger`).
                self.pool.put(bid);
                let dropped = dropped.saturating_add(len as u64);
                self.conns.slots[slot].lingering = Some(dropped);
                if dropped > super::LINGER_MAX_BYTES {
                    self.start_close(eng, slot, st)?;
                }
            } else if self.conns.slots[slot].secure {
                self.on_recv_tls(eng, slot, bid, len, st)?;
            } else if self.ctx.protocol != Protocol::Raw {
                self.scratch.clear();
                // Responses stop at one buffer of output queued in all.
                let max_out = self
                    .ctx
                    .buf_size
                    .saturating_sub(self.ios[slot].backlog.len());
                let conn = &mut self.conns.slots[slot];
                let held_before = conn.http.own_bytes();
                let bad = !conn.filter_into(
                    self.ctx.protocol,
                    self.pool.data(bid, len),
                    &mut self.scratch,
                    max_out,
                );
                self.own = (self.own + conn.http.own_bytes()).saturating_sub(held_before);
                let last = conn.closes_after_output();
                self.pool.put(bid);
                if bad {
                    st.protocol_errors += 1;
                }
                if bad && !last {
                    self.start_close(eng, slot, st)?;
                } else if !self.scratch.is_empty() {
                    // With a 400 or a closing response last: closed when
                    // its send completes (`on_send`).
                    let out = std::mem::take(&mut self.scratch);
                    let r = self.echo_owned(eng, slot, &out, st);
                    self.scratch = out;
                    r?;
                } else if last {
                    // Input after the last answer: dropped; lingering now
                    // if that answer is already sent.
                    let io = &self.ios[slot];
                    if io.cur.is_none() && io.backlog.is_empty() && !io.sending {
                        self.begin_linger(slot, st);
                    }
                } else {
                    self.answer_held(eng, slot, st)?;
                }
            } else if self.ios[slot].cur.is_none() {
                // Zero copy: sent straight from the ring buffer.
                self.ios[slot].cur = Some(Out::Ring { bid, off: 0, len });
                self.send(eng, slot, st)?;
            } else {
                let io = &mut self.ios[slot];
                let before = io.backlog.capacity();
                io.backlog.extend_from_slice(self.pool.data(bid, len));
                self.own = self.own + io.backlog.capacity() - before;
                self.pool.put(bid);
            }
        } else if res == -libc::ENOBUFS {
            st.enobufs += 1;
            if let Some(b) = bid {
                self.pool.put(b);
            }
            let io = &mut self.ios[slot];
            if !io.closing && !io.recv_armed && !io.starved {
                io.starved = true;
                self.starved.push_back(slot);
            }
        } else if res == -libc::EINVAL && eng.multishot && !self.ios[slot].recv_armed {
            // No multishot recv on this kernel: single-shot from now on.
            eng.multishot = false;
        } else if res == -libc::EINTR || res == -libc::EAGAIN || res == -libc::ECANCELED {
            // Re-armed by `settle` unless closing (ECANCELED: the
            // backlog was full; it is armed again once it drained).
        } else if res <= 0 {
            // 0: the peer closed; errors: it failed.
            if let Some(b) = bid {
                self.pool.put(b);
            }
            self.start_close(eng, slot, st)?;
        }
        self.settle(eng, slot, st)
    }

    /// HTTPS: a receive's ciphertext through the connection's session
    /// (`super::tls::feed`); what the session has to send leaves from the
    /// connection's own memory (a ring buffer holds ciphertext, never what
    /// is sent back), and the ring buffer goes back at once.
    fn on_recv_tls(
        &mut self,
        eng: &mut UringEngine,
        slot: usize,
        bid: u16,
        len: usize,
        st: &mut LoopStats,
    ) -> io::Result<()> {
        if self.conns.slots[slot].closes_after_output() {
            // Input after the last answer: dropped; lingering now if that
            // answer is already sent.
            self.pool.put(bid);
            let io = &self.ios[slot];
            if io.cur.is_none() && io.backlog.is_empty() && !io.sending {
                self.begin_linger(slot, st);
            }
            return Ok(());
        }
        // Responses stop at one buffer of output queued in all.
        let max_out = self
            .ctx
            .buf_size
            .saturating_sub(self.ios[slot].backlog.len());
        if self.plain.is_empty() {
            self.plain = vec![0; self.ctx.buf_size.clamp(4096, 1 << 16)];
        }
        let mut out = std::mem::take(&mut self.tls_out);
        out.clear();
        let conn = &mut self.conns.slots[slot];
        let held_before = conn.http.own_bytes();
        let fed = super::tls::feed(
            conn,
            self.pool.data(bid, len),
            &mut self.plain,
            &mut self.scratch,
            max_out,
            &mut out,
            st,
        );
        self.own = (self.own + conn.http.own_bytes()).saturating_sub(held_before);
        self.pool.put(bid);
        let sent = !out.is_empty();
        let r = if sent {
            self.echo_owned(eng, slot, &out, st)
        } else {
            Ok(())
        };
        self.tls_out = out;
        r?;
        match fed {
            // Closed once what was queued is sent (`on_send`, `settle`).
            super::tls::Fed::PeerClosed | super::tls::Fed::Failed => {
                self.start_close(eng, slot, st)
            }
            super::tls::Fed::Open if sent => Ok(()),
            super::tls::Fed::Open => self.answer_held(eng, slot, st),
        }
    }

    fn on_send(
        &mut self,
        eng: &mut UringEngine,
        slot: usize,
        res: i32,
        st: &mut LoopStats,
    ) -> io::Result<()> {
        let io = &mut self.ios[slot];
        io.sending = false;
        let before = io.own_bytes();
        let mut resend = false;
        let mut fail = false;
        match io.cur.as_mut() {
            None => {}
            Some(out) => {
                let (off, len) = match &mut *out {
                    Out::Ring { off, len, .. } => (off, *len),
                    Out::Own { buf, off } => (off, buf.len()),
                };
                if res > 0 {
                    st.bytes += res as u64;
                    *off += res as usize;
                    resend = *off < len;
                } else if res == -libc::EAGAIN || res == -libc::EINTR {
                    resend = true;
                    if let Out::Ring { bid, off, len } = *out {
                        // The peer is not reading: the bytes leave the
                        // ring, the buffer goes back.
                        let rest = self.pool.data(bid, len)[off..].to_vec();
                        self.pool.put(bid);
                        *out = Out::Own { buf: rest, off: 0 };
                    }
                } else {
                    fail = true;
                }
            }
        }
        if io.closing || fail {
            if let Some(Out::Ring { bid, .. }) = io.cur.take() {
                self.pool.put(bid);
            }
            self.own = self.own + io.own_bytes() - before;
            if !io.closing {
                self.start_close(eng, slot, st)?;
            }
            return self.settle(eng, slot, st);
        }
        if !resend {
            if let Some(Out::Ring { bid, .. }) = io.cur.take() {
                self.pool.put(bid);
            }
            if !io.backlog.is_empty() {
                io.cur = Some(Out::Own {
                    buf: std::mem::take(&mut io.backlog),
                    off: 0,
                });
                resend = true;
            }
        }
        self.own = self.own + io.own_bytes() - before;
        if resend {
            self.send(eng, slot, st)?;
        } else if self.conns.slots[slot].closes_after_output() {
            // Its last answer (a refusal, or the response to a request
            // that asked to close) is sent: closed once the peer closes.
            self.begin_linger(slot, st);
        } else {
            self.answer_held(eng, slot, st)?;
        }
        self.settle(eng, slot, st)
    }

    /// Its last answer sent: the FIN follows it, and the connection reads
    /// and drops what the peer still sends until the peer closes (as
    /// [`super::linger`] does for the readiness engines; `settle` arms the
    /// receive again).
    fn begin_linger(&mut self, slot: usize, st: &mut LoopStats) {
        self.conns.slots[slot].start_linger(st);
    }

    /// With nothing left to send: answers requests held unparsed (at most
    /// one buffer of responses) and sends them.
    fn answer_held(
        &mut self,
        eng: &mut UringEngine,
        slot: usize,
        st: &mut LoopStats,
    ) -> io::Result<()> {
        let io = &self.ios[slot];
        let conn = &mut self.conns.slots[slot];
        if io.closing || io.cur.is_some() || !io.backlog.is_empty() || !conn.holds_input() {
            return Ok(());
        }
        self.scratch.clear();
        let held_before = conn.http.own_bytes();
        let ok = conn.resume_into(&mut self.scratch, self.ctx.buf_size);
        self.own = (self.own + conn.http.own_bytes()).saturating_sub(held_before);
        if !ok {
            st.protocol_errors += 1;
            return self.start_close(eng, slot, st);
        }
        if self.scratch.is_empty() {
            return Ok(());
        }
        let mut out = std::mem::take(&mut self.scratch);
        if conn.secure {
            let mut sealed = std::mem::take(&mut self.tls_out);
            sealed.clear();
            super::tls::seal(conn, &out, &mut sealed);
            std::mem::swap(&mut out, &mut sealed);
            self.tls_out = sealed;
        }
        let r = self.echo_owned(eng, slot, &out, st);
        self.scratch = out;
        r
    }

    /// Re-arms waiting connections, at most as many as buffers are free.
    fn feed_starved(&mut self, eng: &mut UringEngine, st: &mut LoopStats) -> io::Result<()> {
        let mut budget = self.pool.free();
        while budget > 0 {
            let Some(slot) = self.starved.pop_front() else {
                break;
            };
            let io = &self.ios[slot];
            if !io.starved || io.closing || io.recv_armed {
                continue;
            }
            self.ios[slot].starved = false;
            self.settle(eng, slot, st)?;
            budget -= 1;
        }
        Ok(())
    }

    fn gauges(&self, st: &mut LoopStats) {
        st.bufs = self.pool.entries as u64;
        st.bufs_in_use = self.pool.in_use as u64;
        st.buf_bytes = (self.pool.entries as usize * self.pool.size) as u64;
        st.conn_bytes = (self.conns.slots.capacity() * std::mem::size_of::<Conn>()
            + self.ios.capacity() * std::mem::size_of::<Io>()
            + self.starved.capacity() * std::mem::size_of::<usize>()
            + self.own) as u64;
    }

    /// With no connection left: the state arrays and the ring's resident
    /// pages go back.
    fn shrink(&mut self) {
        if self.conns.live == 0 && !self.conns.slots.is_empty() {
            self.conns = Conns {
                tls: self.conns.tls.take(),
                ..Conns::default()
            };
            self.plain = Vec::new();
            self.tls_out = Vec::new();
            self.ios = Vec::new();
            self.starved = Default::default();
            self.scratch = Vec::new();
            if self.pool.in_use == 0 {
                self.pool.bufs.release();
            }
        }
    }
}

impl Engine for UringEngine {
    fn uring_deferred(&self) -> Option<bool> {
        Some(self.deferred)
    }

    fn serve(&mut self, ctx: &LoopCtx<'_>) -> io::Result<LoopStats> {
        let mut stats = LoopStats::default();
        let size = ctx.buf_size.clamp(512, 1 << 20);
        let entries = std::env::var("COMMBENCH_MUX_URING_BUFS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| n.is_power_of_two() && *n <= MAX_BUFS)
            .unwrap_or_else(|| ring_entries(self.max_conns, size));
        let pool = Pool::new(entries, size)?;
        pool.register(&self.ring)?;
        let mut lp = Loop {
            ctx,
            conns: Conns {
                tls: ctx.tls.clone(),
                ..Conns::default()
            },
            ios: Vec::new(),
            pool,
            starved: Default::default(),
            scratch: Vec::new(),
            plain: Vec::new(),
            tls_out: Vec::new(),
            own: 0,
        };
        let lfd = ctx.listener.as_raw_fd();
        let accept = opcode::AcceptMulti::new(types::Fd(lfd))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(ACCEPT_DATA | OP_ACCEPT);
        let listen_poll = opcode::PollAdd::new(types::Fd(lfd), libc::POLLIN as u32)
            .build()
            .user_data(LISTEN_POLL_DATA | OP_ACCEPT);
        self.push(accept.clone(), &mut stats)?;
        let mut reserve = net::Reserve::new();
        let mut fresh: Vec<RawFd> = Vec::new();
        let ts = types::Timespec::new().nsec(super::WAIT_TIMEOUT_MS as u32 * 1_000_000);
        let args = types::SubmitArgs::new().timespec(&ts);
        let mut done: Vec<(u64, i32, u32)> = Vec::with_capacity(4096);
        lp.gauges(&mut stats);
        publish(ctx, &stats, 0);

        let result = (|| -> io::Result<()> {
            while !ctx.stop.load(Ordering::Relaxed) {
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
                    if !cqueue::more(flags) {
                        self.inflight = self.inflight.saturating_sub(1);
                    }
                    if op == OP_CANCEL {
                        continue;
                    }
                    if op == OP_ACCEPT {
                        fresh.clear();
                        // Out of descriptors: the listener is polled, and
                        // what waits is accepted or shed by plain accept(2)
                        // through the reserve, until a descriptor is free
                        // again and the io_uring accept comes back.
                        let mut starved = false;
                        if ud == LISTEN_POLL_DATA | OP_ACCEPT {
                            starved =
                                super::accept_all(lfd, ctx, &mut reserve, &mut stats, |fd, _| {
                                    fresh.push(fd)
                                });
                        } else if res >= 0 {
                            if ctx.admit() {
                                let fd = res as RawFd;
                                let _ = net::set_nodelay(fd, true);
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
                            // Maybe no longer out (this completion may be
                            // old): accept_all says.
                            stats.accept_errors += 1;
                            starved =
                                super::accept_all(lfd, ctx, &mut reserve, &mut stats, |fd, _| {
                                    fresh.push(fd)
                                });
                        } else if res != -libc::ECONNABORTED && res != -libc::EINTR {
                            stats.accept_errors += 1;
                        }
                        for &fd in &fresh {
                            let slot = lp.conns.insert(fd);
                            if slot >= lp.ios.len() {
                                lp.ios.resize_with(slot + 1, Io::default);
                            }
                            lp.settle(self, slot, &mut stats)?;
                        }
                        if !cqueue::more(flags) {
                            let next = if starved {
                                listen_poll.clone()
                            } else {
                                accept.clone()
                            };
                            self.push(next, &mut stats)?;
                        }
                        continue;
                    }
                    let slot = match ctx.lookup {
                        Lookup::Index => data as usize,
                        Lookup::Scan => match lp.conns.scan(data as RawFd, &mut stats.scan_steps) {
                            Some(s) => s,
                            None => continue,
                        },
                    };
                    if slot >= lp.ios.len() || lp.conns.slots[slot].fd < 0 {
                        continue;
                    }
                    match op {
                        OP_RECV => lp.on_recv(self, slot, res, flags, &mut stats)?,
                        _ => lp.on_send(self, slot, res, &mut stats)?,
                    }
                }
                if !lp.starved.is_empty() {
                    lp.feed_starved(self, &mut stats)?;
                }
                lp.shrink();
                lp.gauges(&mut stats);
                publish(ctx, &stats, lp.conns.live);
            }
            Ok(())
        })();
        // Cancel what is in flight and wait for every completion before
        // the buffers go: a recv on a descriptor is not ended by close().
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(CANCEL_DATA);
        let mut settled = false;
        if self.push(cancel, &mut stats).is_ok() {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while self.inflight > 0 && std::time::Instant::now() < deadline {
                let _ = self.ring.submitter().submit_with_args(1, &args);
                let mut ended = 0;
                for c in self.ring.completion() {
                    if !cqueue::more(c.flags()) {
                        ended += 1;
                    }
                }
                self.inflight = self.inflight.saturating_sub(ended);
            }
            settled = self.inflight == 0;
        }
        ctx.release(lp.conns.close_all(&mut stats));
        lp.gauges(&mut stats);
        if settled && self.ring.submitter().unregister_buf_ring(BGID).is_ok() {
            drop(lp);
        } else {
            // The kernel could still write to the buffers: keep them for
            // the process's lifetime rather than unmap them.
            std::mem::forget(lp.pool);
        }
        publish(ctx, &stats, 0);
        result.map(|_| stats)
    }
}
