//! Single-producer single-consumer byte ring living in shared memory.
//!
//! Layout (one ring): a 4 KiB header page holding three 128-byte lines —
//! the producer's `head`, the consumer's `tail` (both monotonically growing
//! byte counts, never wrapped), and a rarely written control line (sleep
//! flags, close flags, pids) — followed by `cap` data bytes (a power of
//! two). Keeping `head` and `tail` on separate 128-byte lines (the adjacent
//! line prefetcher pairs 64-byte lines) means each side writes only its own
//! line; the peer pulls it only when its cached copy of the index says the
//! ring is empty or full.
//!
//! Invariants: `tail <= head <= tail + cap`; only the producer stores
//! `head` (Release, after the bytes are copied), only the consumer stores
//! `tail` (Release, after the bytes are read). A message is a frame header
//! plus payload streamed through the ring in pieces, so a 16 MiB message
//! passes through a 1 MiB ring with no allocation: the producer publishes
//! every `cap / 4` bytes and at the end of each message, the consumer
//! releases space at the same points, so both sides overlap on big
//! messages. A producer that finds the ring full waits until half of it
//! is free ([`space_want`]), and the consumer rings a sleeping producer's
//! doorbell only then: one wake-up per half ring, never one per message.
//! Payloads of [`STREAMING_MIN`] and more are copied in with plain or
//! non-temporal stores, whichever the producer measured to stream faster
//! ([`StoreChoice`]). A consumer that only reads a payload of
//! [`IN_PLACE_MIN`] and more is lent it where it lies
//! ([`RingRx::recv_with`]) instead of copying it out.
//! Serves the seed's reqres_loop / data_channel_write rings.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{IpcError, Result};
use crate::frame::{Header, HEADER_LEN};
use crate::transport::Lent;
use crate::wait::{self, Adapt, Awake, Beat, Parties, Presence, SharedStats, WaitPolicy, Waited};

/// Bytes reserved for a ring's header (one page so the data is page aligned).
pub const RING_HEADER_BYTES: usize = 4096;

/// Close flag bits.
const PRODUCER_CLOSED: u32 = 1;
const CONSUMER_CLOSED: u32 = 2;
const ABORTED: u32 = 4;

#[repr(C, align(128))]
struct Line<T>(T);

/// Control fields: written rarely, read on every publish / release.
#[repr(C)]
pub struct Control {
    /// 1 while the consumer sleeps waiting for data.
    data_sleep: AtomicU32,
    /// 1 while the producer sleeps waiting for space.
    space_sleep: AtomicU32,
    /// While `space_sleep` is set: the `tail` the producer waits for (half
    /// the ring free),
    /// so the consumer rings its doorbell once per half ring, not once
    /// per message it releases.
    space_want: AtomicU64,
    /// PRODUCER_CLOSED | CONSUMER_CLOSED | ABORTED.
    closed: AtomicU32,
    /// Process ids of both ends (0 until attached).
    producer_pid: AtomicU32,
    consumer_pid: AtomicU32,
}

/// The shared header of one ring.
#[repr(C)]
pub struct RingHeader {
    head: Line<AtomicU64>,
    tail: Line<AtomicU64>,
    ctl: Line<Control>,
    /// The producer's and the consumer's beats ([`crate::wait`]), each on
    /// its own line: written only while its owner waits.
    prod_beat: Line<Beat>,
    cons_beat: Line<Beat>,
}

const _: () = assert!(std::mem::size_of::<RingHeader>() <= RING_HEADER_BYTES);
const _: () = assert!(std::mem::size_of::<RingHeader>() == 640);

/// Something that keeps the shared memory mapped (the segment).
pub trait Backing: Send + Sync {}

/// Where a ring lives: header, data and the run-wide awake counter.
#[derive(Clone)]
pub struct RingRef {
    pub(crate) hdr: *const RingHeader,
    pub(crate) data: *mut u8,
    pub(crate) cap: u64,
    pub(crate) sleeping: *const AtomicU32,
    pub(crate) threads: u32,
    pub(crate) cpus: u32,
    /// The run placed each session's two ends on different CPUs.
    pub(crate) apart: bool,
    /// The run's wait counters (segment header).
    pub(crate) stats: *const SharedStats,
    pub(crate) policy: WaitPolicy,
    /// Doorbells for sleeping (absent in `spin` mode).
    pub(crate) bells: Option<Arc<crate::bell::RingBells>>,
    /// Keeps the mapping alive as long as any endpoint uses it.
    pub(crate) _backing: Arc<dyn Backing>,
}

// SAFETY: the raw pointers point into a shared mapping kept alive by
// `backing`; all cross-thread access to the header goes through atomics, and
// the data bytes are accessed under the SPSC protocol (producer writes only
// [head, tail+cap), consumer reads only [tail, head)).
#[allow(unsafe_code)]
unsafe impl Send for RingRef {}

impl RingRef {
    #[inline]
    #[allow(unsafe_code)]
    fn h(&self) -> &RingHeader {
        // SAFETY: hdr points to an initialised RingHeader inside the mapping
        // held alive by `backing`.
        unsafe { &*self.hdr }
    }

    #[inline]
    #[allow(unsafe_code)]
    fn awake(&self) -> Awake<'_> {
        Awake {
            // SAFETY: points into the segment header held alive by `backing`.
            sleeping: unsafe { &*self.sleeping },
            threads: self.threads,
            cpus: self.cpus,
            apart: self.apart,
        }
    }

    /// The producer's beat (written by the producer's thread).
    pub(crate) fn prod_beat(&self) -> *const Beat {
        &self.h().prod_beat.0
    }

    /// The consumer's beat (written by the consumer's thread).
    pub(crate) fn cons_beat(&self) -> *const Beat {
        &self.h().cons_beat.0
    }

    /// Add an endpoint half's wait counts to the run's.
    #[allow(unsafe_code)]
    fn flush_stats(&self, adapt: &mut Adapt) {
        // SAFETY: points into the segment header held alive by `backing`.
        unsafe { &*self.stats }.add(&adapt.stats);
        adapt.stats = Default::default();
    }

    /// Initialise a fresh (zeroed) ring header.
    pub(crate) fn init(&self) {
        let h = self.h();
        h.head.0.store(0, Ordering::Relaxed);
        h.tail.0.store(0, Ordering::Relaxed);
        h.ctl.0.closed.store(0, Ordering::Relaxed);
        h.ctl.0.data_sleep.store(0, Ordering::Relaxed);
        h.ctl.0.space_sleep.store(0, Ordering::Relaxed);
        h.ctl.0.space_want.store(0, Ordering::Relaxed);
        h.ctl.0.producer_pid.store(0, Ordering::Relaxed);
        h.ctl.0.consumer_pid.store(0, Ordering::Relaxed);
        h.prod_beat.0.reset();
        h.cons_beat.0.reset();
        std::sync::atomic::fence(Ordering::Release);
    }

    /// Mark the ring aborted (its client died) and wake both sides.
    pub(crate) fn abort(&self) {
        self.close(ABORTED);
    }

    fn close(&self, bit: u32) {
        let c = &self.h().ctl.0;
        c.closed.fetch_or(bit, Ordering::SeqCst);
        crate::futex::wake(&c.data_sleep, i32::MAX);
        crate::futex::wake(&c.space_sleep, i32::MAX);
        if let Some(b) = &self.bells {
            for w in [&b.data.w, &b.space.w].into_iter().flatten() {
                crate::bell::ring(w);
            }
        }
    }

    #[inline]
    fn data_bell_r(&self) -> Option<&std::os::fd::OwnedFd> {
        self.bells.as_ref().and_then(|b| b.data.r.as_ref())
    }
    #[inline]
    fn data_bell_w(&self) -> Option<&std::os::fd::OwnedFd> {
        self.bells.as_ref().and_then(|b| b.data.w.as_ref())
    }
    #[inline]
    fn space_bell_r(&self) -> Option<&std::os::fd::OwnedFd> {
        self.bells.as_ref().and_then(|b| b.space.r.as_ref())
    }
    #[inline]
    fn space_bell_w(&self) -> Option<&std::os::fd::OwnedFd> {
        self.bells.as_ref().and_then(|b| b.space.w.as_ref())
    }

    /// Was the run aborted (a session failed elsewhere)?
    #[inline]
    fn aborted(&self) -> bool {
        self.h().ctl.0.closed.load(Ordering::Relaxed) & ABORTED != 0
    }

    /// Is the peer gone: closed its end, aborted, or its process died?
    fn peer_gone(&self, peer_closed_bit: u32, peer_pid: &AtomicU32) -> bool {
        let c = self.h().ctl.0.closed.load(Ordering::Acquire);
        if c & (peer_closed_bit | ABORTED) != 0 {
            return true;
        }
        let pid = peer_pid.load(Ordering::Relaxed);
        pid != 0 && pid != std::process::id() && !crate::shm::process_alive(pid)
    }

    /// Copy `src` into the data area at byte offset `pos` (wrapping);
    /// `streaming`: with non-temporal stores ([`copy_streaming`]).
    #[inline]
    #[allow(unsafe_code)]
    fn copy_in(&self, pos: u64, src: &[u8], streaming: bool) {
        let mask = self.cap - 1;
        let off = (pos & mask) as usize;
        let first = src.len().min(self.cap as usize - off);
        let copy = if streaming {
            copy_streaming
        } else {
            std::ptr::copy_nonoverlapping::<u8>
        };
        // SAFETY: off < cap and first <= cap - off, so both copies stay in
        // the data area; the SPSC protocol guarantees the consumer is not
        // reading these bytes (they lie in [head, tail + cap)).
        unsafe {
            copy(src.as_ptr(), self.data.add(off), first);
            if first < src.len() {
                copy(src.as_ptr().add(first), self.data, src.len() - first);
            }
        }
    }

    /// Copy from the data area at byte offset `pos` (wrapping) into `dst`.
    #[inline]
    #[allow(unsafe_code)]
    fn copy_out(&self, pos: u64, dst: &mut [u8]) {
        let mask = self.cap - 1;
        let off = (pos & mask) as usize;
        let first = dst.len().min(self.cap as usize - off);
        // SAFETY: as in copy_in; these bytes lie in [tail, head), published
        // by the producer with a Release store we observed with Acquire.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data.add(off), dst.as_mut_ptr(), first);
            if first < dst.len() {
                std::ptr::copy_nonoverlapping(
                    self.data,
                    dst.as_mut_ptr().add(first),
                    dst.len() - first,
                );
            }
        }
    }
}

/// The end whose index the other end waits on.
#[derive(Debug, Clone, Copy)]
enum Peer {
    /// The consumer waits for the producer's `head`.
    Producer,
    /// The producer waits for the consumer's `tail`.
    Consumer,
}

impl RingRef {
    /// The `len` bytes of the data area from byte offset `pos` (wrapping),
    /// as they lie: the first part up to the ring's end, the rest from its
    /// start.
    #[inline]
    #[allow(unsafe_code)]
    fn view(&self, pos: u64, len: usize) -> Lent<'_> {
        let off = (pos & (self.cap - 1)) as usize;
        let first = len.min(self.cap as usize - off);
        // SAFETY: off < cap, first <= cap - off and len - first <= cap, so
        // both parts lie in the data area. Their bytes lie in [tail, head):
        // published by the producer with a Release store we observed with
        // Acquire, and not written again until the consumer stores a tail
        // past them, which it does only after the borrow ends (recv_with).
        let parts = unsafe {
            [
                std::slice::from_raw_parts(self.data.add(off), first),
                std::slice::from_raw_parts(self.data, len - first),
            ]
        };
        Lent {
            parts,
            in_place: true,
        }
    }

    /// Waits, by the run's policy, until `peer`'s index reaches `want`;
    /// returns the index it saw then, or `Closed` once the peer is gone.
    fn wait_index(&self, peer: Peer, want: u64, adapt: &mut Adapt, me: &Presence) -> Result<u64> {
        let h = self.h();
        let c = &h.ctl.0;
        let (index, sleep_flag, bell, beat, closed_bit, pid) = match peer {
            Peer::Producer => (
                &h.head.0,
                &c.data_sleep,
                self.data_bell_r(),
                &h.prod_beat.0,
                PRODUCER_CLOSED,
                &c.producer_pid,
            ),
            Peer::Consumer => (
                &h.tail.0,
                &c.space_sleep,
                self.space_bell_r(),
                &h.cons_beat.0,
                CONSUMER_CLOSED,
                &c.consumer_pid,
            ),
        };
        let parties = Parties {
            awake: self.awake(),
            sleep_flag,
            bell,
            peer: beat,
            me,
        };
        let mut seen = 0;
        let w = wait::wait_for(
            self.policy,
            &parties,
            adapt,
            || {
                seen = index.load(Ordering::Acquire);
                seen >= want
            },
            || index.load(Ordering::Relaxed),
            || self.peer_gone(closed_bit, pid),
        );
        match w {
            Waited::Closed => Err(IpcError::Closed),
            _ => Ok(seen),
        }
    }
}

/// Which stores copy large payloads into the ring: the producer times
/// windows of [`StoreChoice::WINDOW`] large messages (TSC from one
/// window's first message to the next's, waits for space included, so
/// a window's time is the stream's rate, not the copy's), one window
/// with plain stores and one with streaming stores, keeps the faster for
/// [`StoreChoice::EXPLOIT`] windows, then measures both again. Neither
/// is faster everywhere: streaming stores lift a 64 KiB stream 2.6× when
/// moving cache lines between the vCPUs is slow and cost it ~18% when
/// it is fast (docs/ipc.md), and the host switches between the two
/// within minutes.
#[derive(Debug, Default, Clone)]
pub(crate) struct StoreChoice {
    /// Large messages sent in the current window.
    n: u32,
    /// TSC at the current window's first message.
    start: u64,
    /// 0: measuring plain, 1: measuring streaming, 2..: exploiting.
    phase: u32,
    /// Ticks of the last plain window.
    plain: u64,
    /// Use streaming stores while exploiting.
    chosen: bool,
}

impl StoreChoice {
    /// Large messages per measured window.
    pub const WINDOW: u32 = 32;
    /// Windows spent on the faster choice before measuring again.
    pub const EXPLOIT: u32 = 32;

    /// Called before each large message at TSC `now`: use streaming
    /// stores for it?
    pub(crate) fn next(&mut self, now: u64) -> bool {
        if self.n == 0 {
            self.start = now;
        }
        self.n += 1;
        if self.n > Self::WINDOW {
            // The window ended with the previous message.
            let ticks = now.wrapping_sub(self.start);
            match self.phase {
                0 => self.plain = ticks,
                1 => self.chosen = ticks < self.plain,
                _ => {}
            }
            self.phase = if self.phase > Self::EXPLOIT {
                0
            } else {
                self.phase + 1
            };
            self.start = now;
            self.n = 1;
        }
        match self.phase {
            0 => false,
            1 => true,
            _ => self.chosen,
        }
    }
}

/// Payloads from this size on may be copied into the ring with
/// non-temporal stores ([`StoreChoice`]). Moving a 64 KiB message from the producer's cache to the
/// consumer's took 2.1–2.5 µs of CPU per side here in some periods and
/// 5.5–5.9 µs in others (the host's cost of moving cache lines between
/// the two vCPUs); written past the producer's cache, the same stream
/// ran at 290–313k msgs/s in a slow period, against 102–137k with memcpy
/// (docs/ipc.md). Small messages keep plain stores: they are read back
/// at once, from cache.
pub const STREAMING_MIN: usize = 32 << 10;

/// Payloads from this size on are lent to a consumer where they lie in
/// the ring ([`RingRx::recv_with`]). A 64 KiB stream ran 1.20× [1.13,
/// 1.28] as fast read in place as copied out; a 1 KiB one 0.96× [0.95,
/// 0.98] and 0.99× [0.97, 1.03] in two runs (docs/ipc.md), so small
/// payloads are copied out as before.
pub const IN_PLACE_MIN: usize = STREAMING_MIN;

/// Copy `len` bytes from `src` to `dst` with non-temporal (streaming)
/// stores, which write past the cache, then fence them.
///
/// # Safety
/// As `ptr::copy_nonoverlapping`: both ranges valid for `len` bytes and
/// disjoint.
#[allow(unsafe_code)]
#[inline]
unsafe fn copy_streaming(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        let lead = dst.align_offset(16).min(len);
        // SAFETY: the caller's ranges; lead <= len.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, lead) };
        let mut i = lead;
        while i + 64 <= len {
            // SAFETY: i + 64 <= len keeps every access in the caller's
            // ranges; dst + i is 16-byte aligned (lead aligned it and i
            // moves by 64), as _mm_stream_si128 requires; SSE2 is part of
            // x86_64.
            unsafe {
                let s = src.add(i) as *const __m128i;
                let d = dst.add(i) as *mut __m128i;
                let (a, b, c, e) = (
                    _mm_loadu_si128(s),
                    _mm_loadu_si128(s.add(1)),
                    _mm_loadu_si128(s.add(2)),
                    _mm_loadu_si128(s.add(3)),
                );
                _mm_stream_si128(d, a);
                _mm_stream_si128(d.add(1), b);
                _mm_stream_si128(d.add(2), c);
                _mm_stream_si128(d.add(3), e);
            }
            i += 64;
        }
        // SAFETY: the rest of the caller's ranges. The fence orders the
        // streaming stores before the Release store that publishes them
        // (a plain store does not order non-temporal ones).
        unsafe {
            std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
            _mm_sfence();
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    }
}

/// The `tail` a producer whose ring is full at `head` waits for: half
/// the ring free. The consumer rings a sleeping producer's doorbell only
/// once `tail` reaches it, so a slower consumer wakes the producer once
/// per half ring — which it then fills with whole messages — instead of
/// once per message it releases. The wait always ends: a consumer that
/// waits for data has drained the ring up to `head`.
#[inline]
pub(crate) fn space_want(head: u64, cap: u64) -> u64 {
    head.saturating_sub(cap - (cap / 2).max(1))
}

/// Producer end of a ring.
pub struct RingTx {
    r: RingRef,
    head: u64,
    published: u64,
    cached_tail: u64,
    chunk: u64,
    adapt: Adapt,
    /// Shared with the endpoint's other half: our beats and "we just
    /// woke our peer".
    me: Arc<Presence>,
    /// Plain or streaming stores for large payloads, by measured rate.
    stores: StoreChoice,
}

impl RingTx {
    /// Attach as the producer.
    pub(crate) fn new(r: RingRef, me: Arc<Presence>) -> RingTx {
        let h = r.h();
        h.ctl
            .0
            .producer_pid
            .store(std::process::id(), Ordering::Release);
        let head = h.head.0.load(Ordering::Acquire);
        let tail = h.tail.0.load(Ordering::Acquire);
        let chunk = (r.cap / 4).max(1);
        RingTx {
            r,
            head,
            published: head,
            cached_tail: tail,
            chunk,
            adapt: Adapt::default(),
            me,
            stores: StoreChoice::default(),
        }
    }

    #[inline]
    fn publish(&mut self) {
        if self.head != self.published {
            let h = self.r.h();
            h.head.0.store(self.head, Ordering::Release);
            self.published = self.head;
            if wait::notify(self.r.policy, &h.ctl.0.data_sleep, self.r.data_bell_w()) {
                self.me.woke.store(true, Ordering::Relaxed);
            }
        }
    }

    fn write_bytes(&mut self, mut src: &[u8], streaming: bool) -> Result<()> {
        let cap = self.r.cap;
        while !src.is_empty() {
            let mut free = cap - (self.head - self.cached_tail);
            if free == 0 {
                self.cached_tail = self.r.h().tail.0.load(Ordering::Acquire);
                free = cap - (self.head - self.cached_tail);
                if free == 0 {
                    self.publish();
                    let h = self.r.h();
                    let head = self.head;
                    // Wait for half the ring free: a sleeping producer is
                    // woken once per half ring, not per message released.
                    let want = space_want(head, cap);
                    h.ctl.0.space_want.store(want, Ordering::Relaxed);
                    self.cached_tail =
                        self.r
                            .wait_index(Peer::Consumer, want, &mut self.adapt, &self.me)?;
                    continue;
                }
            }
            let n = (free as usize).min(src.len());
            self.r.copy_in(self.head, &src[..n], streaming);
            self.head += n as u64;
            src = &src[n..];
            if self.head - self.published >= self.chunk {
                self.publish();
            }
        }
        Ok(())
    }

    /// Send one message: header then payload, published at the end (and
    /// every `cap / 4` bytes on the way for large payloads).
    #[inline]
    pub fn send(&mut self, h: &Header, payload: &[u8]) -> Result<()> {
        if self.r.aborted() {
            return Err(IpcError::Aborted);
        }
        let streaming = payload.len() >= STREAMING_MIN && self.stores.next(crate::wait::tsc_now());
        self.write_bytes(&h.encode(), false)?;
        self.write_bytes(payload, streaming)?;
        self.publish();
        Ok(())
    }
}

impl Drop for RingTx {
    fn drop(&mut self) {
        self.publish();
        self.r.flush_stats(&mut self.adapt);
        self.r.close(PRODUCER_CLOSED);
    }
}

/// Consumer end of a ring.
pub struct RingRx {
    r: RingRef,
    tail: u64,
    released: u64,
    cached_head: u64,
    chunk: u64,
    adapt: Adapt,
    /// Shared with the endpoint's other half: our beats and "we just
    /// woke our peer".
    me: Arc<Presence>,
}

impl RingRx {
    /// Attach as the consumer.
    pub(crate) fn new(r: RingRef, me: Arc<Presence>) -> RingRx {
        let h = r.h();
        h.ctl
            .0
            .consumer_pid
            .store(std::process::id(), Ordering::Release);
        let tail = h.tail.0.load(Ordering::Acquire);
        let head = h.head.0.load(Ordering::Acquire);
        let chunk = (r.cap / 4).max(1);
        RingRx {
            r,
            tail,
            released: tail,
            cached_head: head,
            chunk,
            adapt: Adapt::default(),
            me,
        }
    }

    #[inline]
    fn release(&mut self) {
        if self.tail != self.released {
            let h = self.r.h();
            h.tail.0.store(self.tail, Ordering::Release);
            self.released = self.tail;
            let c = &h.ctl.0;
            let tail = self.tail;
            if wait::notify_when(
                self.r.policy,
                &c.space_sleep,
                || tail >= c.space_want.load(Ordering::Relaxed),
                self.r.space_bell_w(),
            ) {
                self.me.woke.store(true, Ordering::Relaxed);
                self.adapt.bells_rung += 1;
            }
        }
    }

    /// Waits until at least `need` bytes past `tail` are published
    /// (releasing what was read before it sleeps); returns how many are.
    fn wait_data(&mut self, need: u64) -> Result<u64> {
        loop {
            let mut avail = self.cached_head - self.tail;
            if avail >= need {
                return Ok(avail);
            }
            self.cached_head = self.r.h().head.0.load(Ordering::Acquire);
            avail = self.cached_head - self.tail;
            if avail >= need {
                return Ok(avail);
            }
            self.release();
            let want = self.tail + need;
            self.cached_head =
                self.r
                    .wait_index(Peer::Producer, want, &mut self.adapt, &self.me)?;
        }
    }

    fn read_bytes(&mut self, mut dst: &mut [u8]) -> Result<()> {
        while !dst.is_empty() {
            let avail = self.wait_data(1)?;
            let n = (avail as usize).min(dst.len());
            let (now, rest) = std::mem::take(&mut dst).split_at_mut(n);
            self.r.copy_out(self.tail, now);
            self.tail += n as u64;
            dst = rest;
            if self.tail - self.released >= self.chunk {
                self.release();
            }
        }
        Ok(())
    }

    /// Receive one message and hand it to `read` where it lies in the
    /// ring: in two parts when it wraps at the ring's end, freed for the
    /// producer when `read` returns. No copy: the consumer's own reading
    /// is the only pass over the bytes. A payload larger than half the
    /// ring (which could not lie whole in it while the producer goes on
    /// writing) is copied into `buf` and lent from there (`in_place`
    /// false), and so is every payload below [`IN_PLACE_MIN`] or on a CPU
    /// without 64-byte loads, where memmove reads faster
    /// ([`crate::frame::wide_loads`]). A payload longer than `buf` is an
    /// error.
    pub fn recv_with(
        &mut self,
        buf: &mut [u8],
        read: &mut dyn FnMut(&Header, Lent<'_>) -> Result<()>,
    ) -> Result<Header> {
        let h = self.next_header(buf.len())?;
        let len = h.len as usize;
        if len < IN_PLACE_MIN || len as u64 > self.r.cap / 2 || !crate::frame::wide_loads() {
            self.read_bytes(&mut buf[..len])?;
            self.release();
            read(&h, Lent::copied(&buf[..len]))?;
            return Ok(h);
        }
        self.wait_data(len as u64)?;
        let res = read(&h, self.r.view(self.tail, len));
        self.tail += len as u64;
        self.release();
        res.map(|()| h)
    }

    /// The next message's header; an error when the run was aborted or
    /// its payload is longer than `max`.
    #[inline]
    fn next_header(&mut self, max: usize) -> Result<Header> {
        if self.r.aborted() {
            return Err(IpcError::Aborted);
        }
        let mut hb = [0u8; HEADER_LEN];
        self.read_bytes(&mut hb)?;
        let h = Header::decode(&hb)?;
        if h.len as usize > max {
            return Err(IpcError::TooLarge {
                len: h.len as u64,
                max: max as u64,
            });
        }
        Ok(h)
    }

    /// Receive one message into `buf`; returns its header. The payload is
    /// `buf[..header.len]`. A payload longer than `buf` is an error.
    #[inline]
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<Header> {
        let h = self.next_header(buf.len())?;
        let len = h.len as usize;
        self.read_bytes(&mut buf[..len])?;
        self.release();
        Ok(h)
    }
}

impl Drop for RingRx {
    fn drop(&mut self) {
        self.release();
        self.r.flush_stats(&mut self.adapt);
        self.r.close(CONSUMER_CLOSED);
    }
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;
    use crate::wait::Presence;
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::sync::atomic::AtomicBool;

    /// One ring in process memory, laid out as in a segment.
    struct HeapRing {
        ptr: *mut u8,
        layout: Layout,
        sleeping: AtomicU32,
        stats: SharedStats,
    }
    // SAFETY: plain memory; the ring protocol and atomics order access.
    unsafe impl Send for HeapRing {}
    // SAFETY: as above.
    unsafe impl Sync for HeapRing {}
    impl Backing for HeapRing {}
    impl Drop for HeapRing {
        fn drop(&mut self) {
            // SAFETY: allocated in `ring` with this layout.
            unsafe { dealloc(self.ptr, self.layout) }
        }
    }

    fn ring(cap: usize, policy: WaitPolicy) -> (RingTx, RingRx) {
        let layout = Layout::from_size_align(RING_HEADER_BYTES + cap, 4096).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        let b = Arc::new(HeapRing {
            ptr,
            layout,
            sleeping: AtomicU32::new(0),
            stats: SharedStats::default(),
        });
        let r = RingRef {
            hdr: ptr as *const RingHeader,
            // SAFETY: inside the allocation.
            data: unsafe { ptr.add(RING_HEADER_BYTES) },
            cap: cap as u64,
            sleeping: &b.sleeping,
            threads: 2,
            cpus: 2,
            apart: false,
            stats: &b.stats,
            policy,
            bells: None,
            _backing: b.clone(),
        };
        r.init();
        let tx_me = Arc::new(Presence::new([r.prod_beat(), r.prod_beat()], b.clone()));
        let rx_me = Arc::new(Presence::new([r.cons_beat(), r.cons_beat()], b));
        (RingTx::new(r.clone(), tx_me), RingRx::new(r, rx_me))
    }

    #[test]
    fn streaming_copy_copies_every_byte_at_every_alignment() {
        let src: Vec<u8> = (0..70_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut dst = vec![0u8; 70_100];
        for len in (0..200).chain([1000, 4096, 65_532, 65_548]) {
            for (so, d_off) in [(0, 0), (1, 0), (0, 3), (5, 17), (16, 15), (33, 64)] {
                dst.fill(0xee);
                // SAFETY: so + len <= src.len() and d_off + len <= dst.len().
                unsafe { copy_streaming(src.as_ptr().add(so), dst.as_mut_ptr().add(d_off), len) };
                assert_eq!(
                    &dst[d_off..d_off + len],
                    &src[so..so + len],
                    "len {len} at +{so}/+{d_off}"
                );
                assert!(
                    dst[..d_off].iter().all(|b| *b == 0xee),
                    "wrote before the range"
                );
                assert!(
                    dst[d_off + len..].iter().all(|b| *b == 0xee),
                    "wrote past the range"
                );
            }
        }
    }

    /// Feeds the chooser a clock in which each message takes `plain` or
    /// `streaming` ticks with the stores it chose; returns the choices.
    fn choices(plain: u64, streaming: u64, messages: u32) -> Vec<bool> {
        let mut c = StoreChoice::default();
        let mut now = 1_000u64;
        (0..messages)
            .map(|_| {
                let s = c.next(now);
                now += if s { streaming } else { plain };
                s
            })
            .collect()
    }

    #[test]
    fn the_producer_keeps_the_stores_that_streamed_faster_and_measures_again() {
        let w = StoreChoice::WINDOW as usize;
        let cycle = (2 + StoreChoice::EXPLOIT as usize) * w;
        for (plain, streaming, want) in [(300, 100, true), (100, 300, false)] {
            let c = choices(plain, streaming, 2 * cycle as u32);
            // A window of each, then the faster one, in every cycle.
            for start in [0, cycle] {
                assert!(c[start..start + w].iter().all(|s| !s), "plain window");
                assert!(
                    c[start + w..start + 2 * w].iter().all(|s| *s),
                    "streaming window"
                );
                assert!(
                    c[start + 2 * w..start + cycle].iter().all(|s| *s == want),
                    "exploiting {want} for plain {plain} / streaming {streaming}"
                );
            }
        }
        // A tie keeps plain stores.
        let c = choices(200, 200, cycle as u32);
        assert!(c[2 * w..cycle].iter().all(|s| !s));
    }

    #[test]
    fn a_full_producer_waits_for_half_the_ring() {
        let cap = 1 << 20;
        assert_eq!(space_want(3 * cap, cap), 2 * cap + cap / 2);
        assert_eq!(space_want(cap, cap), cap / 2);
        // Never below the tail of a fresh ring, always reached once the
        // consumer has drained the ring up to `head`.
        assert_eq!(space_want(10, cap), 0);
        for head in [0, 1, cap / 2, cap, 5 * cap + 7] {
            assert!(space_want(head, cap) <= head);
        }
        // A two-byte ring still waits for one byte.
        assert_eq!(space_want(9, 2), 8);
    }

    /// A consumer slower than its producer: before every message it lets
    /// the producer fill the ring and fall asleep. The producer must be
    /// woken once per half ring drained (bounded by the bytes moved), not
    /// once per message released; every message arrives in order.
    #[test]
    fn a_slow_consumer_wakes_a_sleeping_producer_once_per_half_ring() {
        const CAP: usize = 64 << 10;
        const LEN: usize = 4096;
        const N: u64 = 400;
        let (mut tx, mut rx) = ring(CAP, WaitPolicy::Block);
        let hdr = tx.r.hdr as usize;
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let producer = std::thread::spawn(move || {
            let payload = vec![7u8; LEN];
            for seq in 0..N {
                let h = Header {
                    len: LEN as u32,
                    check: 0,
                    seq,
                };
                tx.send(&h, &payload).unwrap();
            }
            d.store(true, Ordering::Release);
            tx
        });
        // SAFETY: the header outlives both threads (the rings hold it).
        let ctl = unsafe { &(*(hdr as *const RingHeader)).ctl.0 };
        let mut buf = vec![0u8; LEN];
        for seq in 0..N {
            // Bounded: the producer either sleeps on a full ring or is done.
            for _ in 0..10_000_000u32 {
                if ctl.space_sleep.load(Ordering::Acquire) != 0 || done.load(Ordering::Acquire) {
                    break;
                }
                std::thread::yield_now();
            }
            let h = rx.recv(&mut buf).unwrap();
            assert_eq!((h.seq, h.len as usize), (seq, LEN));
        }
        let tx = producer.join().unwrap();
        drop(tx);
        let moved = N as usize * (HEADER_LEN + LEN);
        let bound = (moved / (CAP / 2) + 1) as u64;
        assert!(rx.adapt.bells_rung >= 1, "the producer never slept");
        assert!(
            rx.adapt.bells_rung <= bound,
            "{} wake-ups for {N} messages ({moved} bytes through a {CAP}-byte ring): at most {bound}",
            rx.adapt.bells_rung
        );
    }

    /// Messages of every size up to the ring's, many wrapping at its end:
    /// each is lent whole, in order, with the bytes the producer wrote; in
    /// the ring (two parts where it wraps) on a CPU that reads in place,
    /// else from the buffer; one larger than half the ring from the
    /// buffer. The producer blocks on a full ring while the consumer holds
    /// a lent message, so a freed message is never overwritten early.
    #[test]
    fn messages_are_lent_where_they_lie_and_whole_across_the_wrap() {
        const CAP: usize = 256 << 10;
        let lens: Vec<usize> = (0..300)
            .map(|i| (i * 12_347) % (CAP / 2 + 1))
            .chain([CAP / 2 + 1, CAP - HEADER_LEN, 0, 1, 7])
            .collect();
        let (mut tx, mut rx) = ring(CAP, WaitPolicy::Block);
        let sent = lens.clone();
        let producer = std::thread::spawn(move || {
            for (seq, &len) in sent.iter().enumerate() {
                let payload: Vec<u8> = (0..len)
                    .map(|i| (i as u64 * 31 + seq as u64) as u8)
                    .collect();
                let h = Header {
                    len: len as u32,
                    check: 0,
                    seq: seq as u64,
                };
                tx.send(&h, &payload).unwrap();
            }
            tx
        });
        let mut buf = vec![0u8; CAP];
        let (mut wrapped, mut in_place, mut copied) = (0, 0, 0);
        for (seq, &len) in lens.iter().enumerate() {
            let mut got = Vec::new();
            let mut lent_in_place = false;
            let mut parts = 0;
            let h = rx
                .recv_with(&mut buf, &mut |h, lent| {
                    assert_eq!(h.len as usize, lent.len());
                    lent_in_place = lent.in_place;
                    parts = lent.parts.iter().filter(|p| !p.is_empty()).count();
                    got.extend_from_slice(lent.parts[0]);
                    got.extend_from_slice(lent.parts[1]);
                    // Held a while: the producer must not write over it.
                    std::thread::yield_now();
                    let again: Vec<u8> = lent.parts.concat();
                    assert_eq!(again, got, "message {seq} changed while lent");
                    Ok(())
                })
                .unwrap();
            assert_eq!((h.seq, h.len as usize), (seq as u64, len));
            let want: Vec<u8> = (0..len)
                .map(|i| (i as u64 * 31 + seq as u64) as u8)
                .collect();
            assert_eq!(got, want, "message {seq} of {len} bytes");
            let lendable = (IN_PLACE_MIN..=CAP / 2).contains(&len);
            assert_eq!(
                lent_in_place,
                lendable && crate::frame::wide_loads(),
                "message {seq}"
            );
            if parts == 2 {
                wrapped += 1;
            }
            if lent_in_place {
                in_place += 1;
            } else {
                copied += 1;
            }
        }
        drop(producer.join().unwrap());
        assert!(copied >= 1);
        if crate::frame::wide_loads() {
            assert!(
                wrapped >= 10,
                "{wrapped} of {} messages wrapped",
                lens.len()
            );
            assert!(in_place > 150, "{in_place} of {} lent in place", lens.len());
        }
    }

    /// A consumer's error is returned, and the message it was lent is
    /// freed all the same: the next message follows.
    #[test]
    fn an_error_reading_a_lent_message_is_returned_and_the_stream_goes_on() {
        const LEN: usize = IN_PLACE_MIN;
        let (mut tx, mut rx) = ring(4 * LEN, WaitPolicy::Spin);
        for seq in 0..2u64 {
            let h = Header {
                len: LEN as u32,
                check: 0,
                seq,
            };
            tx.send(&h, &[seq as u8; LEN]).unwrap();
        }
        let mut buf = vec![0u8; LEN];
        let e = rx
            .recv_with(&mut buf, &mut |_, _| Err(IpcError::Closed))
            .unwrap_err();
        assert!(matches!(e, IpcError::Closed), "{e}");
        let h = rx
            .recv_with(&mut buf, &mut |_, lent| {
                assert!(lent.parts.concat().iter().all(|&b| b == 1));
                Ok(())
            })
            .unwrap();
        assert_eq!(h.seq, 1);
    }
}
