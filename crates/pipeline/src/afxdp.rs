//! AF_XDP in copy mode (veth has no zero-copy support: the kernel copies
//! each frame between the UMEM and an skb).
//!
//! Transmit ([`XdpTx`]): frames written once into the UMEM are posted as
//! descriptors on the tx ring, the kernel is woken when it asks for it, and
//! completions hand the descriptors back. No XDP program is involved.
//!
//! Receive ([`XdpRx`]): our redirect program ([`crate::xdpprog`]) sends
//! frames carrying commbench's mark to the socket bound to their rx queue;
//! the fill ring is kept stocked with UMEM frames, received descriptors
//! point into the UMEM, and each frame goes back on the fill ring once
//! handled.
//!
//! Crate choice: `xdpilone` maps the UMEM and the four rings itself in pure
//! Rust (no libbpf / libxdp C libraries to build or install); the program
//! is loaded with the bpf(2) syscall (see `xdpprog` for why).

#![allow(unsafe_code)]

use std::io;
use std::num::NonZeroU32;
use std::ptr::NonNull;
use xdpilone::xdp::XdpDesc;
use xdpilone::{
    BufIdx, DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig,
};

const UMEM_BYTES: usize = 1 << 22;

fn err(what: &str, e: xdpilone::Errno) -> io::Error {
    io::Error::other(format!(
        "AF_XDP {what}: {e} (needs Linux >= 5.4 with CONFIG_XDP_SOCKETS and root)"
    ))
}

/// How long a bind waits for the queue to be free: the kernel clears a
/// closed socket's claim on its queue later, from a work queue that takes
/// the RTNL lock (`xp_release_deferred`), so a socket opened right after
/// the last one closed can find the queue still bound (EBUSY). Namespace
/// and link changes elsewhere on the host hold that lock too.
const QUEUE_RELEASE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Binds `user` to its interface queue, waiting (at most
/// [`QUEUE_RELEASE_PATIENCE`]) while the queue is still bound: the tester
/// opens a socket per trial, and the previous trial's release may not
/// have run yet (issue 38: every trial after the first lost its sink to
/// EBUSY). The socket is made close-on-exec first: a child started
/// meanwhile would keep it, and its queue, bound.
fn bind_when_free(umem: &Umem, user: &xdpilone::User, iface: &str, queue: u32) -> io::Result<()> {
    let fd = user.as_raw_fd();
    // SAFETY: fcntl on a descriptor this socket owns; FD_CLOEXEC changes
    // nothing but exec's inheritance.
    unsafe { commbench_core::syscall!(fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC)) }?;
    let end = std::time::Instant::now() + QUEUE_RELEASE_PATIENCE;
    loop {
        match umem.bind(user) {
            Ok(()) => return Ok(()),
            Err(e) if e.get_raw() == libc::EBUSY && std::time::Instant::now() < end => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(e) if e.get_raw() == libc::EBUSY => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!(
                        "AF_XDP bind: queue {queue} of '{iface}' is still bound to another AF_XDP socket after {} s \
                         (another program's, or a closed one's release the kernel has not run)",
                        QUEUE_RELEASE_PATIENCE.as_secs()
                    ),
                ))
            }
            Err(e) => return Err(err("bind (copy mode)", e)),
        }
    }
}

/// A transmit-only AF_XDP socket on queue 0 of an interface.
pub struct XdpTx {
    // Declared before `area`: the rings and the UMEM registration go away
    // before the memory they point into.
    tx: RingTx,
    device: DeviceQueue,
    _umem: Umem,
    frames: Vec<XdpDesc>,
    /// Each frame's UMEM slot (for [`XdpTx::post_with`]).
    slots: Vec<(NonNull<[u8]>, u64)>,
    next: usize,
    in_flight: u32,
    /// The UMEM memory: registered with the kernel, freed last.
    _area: AreaGuard,
}

// SAFETY: every ring and the UMEM are used by one thread at a time; the
// memory is owned by this value.
unsafe impl Send for XdpTx {}

impl XdpTx {
    /// Opens the socket on `iface` (copy mode) with `frames` as the frames it
    /// will send, each written once into its own UMEM slot.
    pub fn open(iface: &str, frames: &[Vec<u8>]) -> io::Result<Self> {
        // Freed by the guard, on error too.
        let guard = AreaGuard::new(UMEM_BYTES)?;
        let mem = guard.slice();
        type Built = (
            Umem,
            DeviceQueue,
            RingTx,
            Vec<XdpDesc>,
            Vec<(NonNull<[u8]>, u64)>,
        );
        let built = (|| -> io::Result<Built> {
            // SAFETY: the area is page aligned and outlives the UMEM (Drop
            // order above).
            let umem =
                unsafe { Umem::new(UmemConfig::default(), mem) }.map_err(|e| err("umem", e))?;
            let name = std::ffi::CString::new(iface).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL")
            })?;
            let mut info = IfInfo::invalid();
            info.from_name(&name)
                .map_err(|e| err(&format!("interface '{iface}'"), e))?;
            info.set_queue(0);
            let sock = Socket::with_shared(&info, &umem).map_err(|e| err("socket", e))?;
            let device = umem
                .fq_cq(&sock)
                .map_err(|e| err("fill/completion rings", e))?;
            let rxtx = umem
                .rx_tx(
                    &sock,
                    &SocketConfig {
                        rx_size: None,
                        tx_size: NonZeroU32::new(2048),
                        bind_flags: SocketConfig::XDP_BIND_NEED_WAKEUP
                            | SocketConfig::XDP_BIND_COPY,
                    },
                )
                .map_err(|e| err("tx ring", e))?;
            let tx = rxtx.map_tx().map_err(|e| err("tx ring map", e))?;
            bind_when_free(&umem, &rxtx, iface, 0)?;
            let mut descs = Vec::with_capacity(frames.len());
            let mut slots = Vec::with_capacity(frames.len());
            for (i, f) in frames.iter().enumerate() {
                let mut chunk = umem
                    .frame(BufIdx(i as u32))
                    .ok_or_else(|| io::Error::other("AF_XDP: more frames than UMEM slots"))?;
                // SAFETY: nothing has been posted yet; we are the only user.
                let buf = unsafe { chunk.addr.as_mut() };
                let n = f.len().min(buf.len());
                buf[..n].copy_from_slice(&f[..n]);
                slots.push((chunk.addr, chunk.offset));
                descs.push(XdpDesc {
                    addr: chunk.offset,
                    len: n as u32,
                    options: 0,
                });
            }
            Ok((umem, device, tx, descs, slots))
        })();
        match built {
            Ok((umem, device, tx, frames, slots)) => Ok(XdpTx {
                tx,
                device,
                _umem: umem,
                frames,
                slots,
                next: 0,
                in_flight: 0,
                _area: guard,
            }),
            Err(e) => Err(e),
        }
    }

    /// Posts up to `n` frames (cycling through the prepared ones), wakes the
    /// kernel if it asks, and reaps completions; returns frames completed
    /// (handed to the device) by this call.
    pub fn send(&mut self, n: u32) -> u32 {
        let frames = &self.frames;
        let mut next = self.next;
        let posted = {
            let mut w = self.tx.transmit(n);
            let k = w.insert((0..n).map(|_| {
                let d = frames[next];
                next = (next + 1) % frames.len();
                d
            }));
            w.commit();
            k
        };
        // Only the descriptors actually inserted advance the cursor.
        self.next = (self.next + posted as usize) % frames.len();
        self.in_flight += posted;
        if self.tx.needs_wakeup() {
            self.tx.wake();
        }
        self.reap()
    }

    fn reap(&mut self) -> u32 {
        let mut r = self.device.complete(self.in_flight);
        let mut done = 0;
        while r.read().is_some() {
            done += 1;
        }
        r.release();
        self.in_flight -= done;
        done
    }

    /// Posts up to `n` frames, each written by `fill` into a free UMEM
    /// slot of its own (`fill` returns the frame's length), wakes the
    /// kernel if it asks, and reaps completions. A slot is rewritten only
    /// once the kernel has completed it: at most as many frames are in
    /// flight as [`XdpTx::open`] was given (copy mode completes in order).
    /// Returns how many were posted.
    pub fn post_with<F: FnMut(usize, &mut [u8]) -> usize>(&mut self, n: u32, mut fill: F) -> u32 {
        self.reap();
        let room = (self.frames.len() as u32).saturating_sub(self.in_flight);
        let n = n.min(room);
        if n == 0 {
            if self.tx.needs_wakeup() {
                self.tx.wake();
            }
            return 0;
        }
        let slots = self.slots.len();
        let mut next = self.next;
        let mut descs = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            let (ptr, off) = self.slots[next];
            // SAFETY: the slot lies inside the UMEM area we own; it is not
            // in flight (at most frames.len() are, completed in order), so
            // the kernel does not read it now.
            let buf = unsafe { &mut *ptr.as_ptr() };
            let len = fill(i, buf).min(buf.len());
            descs.push(XdpDesc {
                addr: off,
                len: len as u32,
                options: 0,
            });
            next = (next + 1) % slots;
        }
        let posted = {
            let mut w = self.tx.transmit(n);
            let k = w.insert(descs.into_iter());
            w.commit();
            k
        };
        self.next = (self.next + posted as usize) % slots;
        self.in_flight += posted;
        if self.tx.needs_wakeup() {
            self.tx.wake();
        }
        posted
    }

    /// Frames posted and not yet completed.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Waits (bounded) for the outstanding completions; returns how many came.
    pub fn finish(&mut self, timeout: std::time::Duration) -> u32 {
        let end = std::time::Instant::now() + timeout;
        let mut total = 0;
        while self.in_flight > 0 && std::time::Instant::now() < end {
            if self.tx.needs_wakeup() {
                self.tx.wake();
            }
            total += self.reap();
            std::thread::yield_now();
        }
        total
    }
}

/// Owns the UMEM memory (zeroed, page aligned); declared last in the
/// socket structs, so it is freed after the rings and the UMEM
/// registration (fields drop in declaration order).
struct AreaGuard {
    ptr: NonNull<u8>,
    layout: std::alloc::Layout,
}

impl AreaGuard {
    fn new(bytes: usize) -> io::Result<Self> {
        let layout = std::alloc::Layout::from_size_align(bytes.max(4096), 4096)
            .map_err(|_| io::Error::other("UMEM size"))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            NonNull::new(raw).ok_or_else(|| io::Error::other("out of memory for the UMEM"))?;
        Ok(AreaGuard { ptr, layout })
    }

    fn slice(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.ptr, self.layout.size())
    }
}

impl Drop for AreaGuard {
    fn drop(&mut self) {
        // SAFETY: allocated above with this layout; the socket fields that
        // point into it are dropped before this one; the kernel keeps its
        // own references to pages it still holds.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// UMEM frames of the receiver: a full fill ring plus a full rx ring.
const RX_RING: u32 = 4096;
const RX_FRAME: u32 = 2048;

/// Counters of an AF_XDP receiver.
#[derive(Debug, Clone, Copy, Default)]
pub struct XdpRxStats {
    /// Dropped by the kernel for lack of room (rx ring full, no fill
    /// buffer): the socket's own drops.
    pub dropped: u64,
    pub rx_ring_full: u64,
    pub fill_ring_empty: u64,
}

/// An AF_XDP receiver on one rx queue of an interface, with the redirect
/// program attached (it is detached when this is dropped).
pub struct XdpRx {
    // Drop order: program and rings, then the UMEM, then its memory.
    prog: crate::xdpprog::XdpRedirect,
    rx: RingRx,
    device: DeviceQueue,
    user: xdpilone::User,
    _umem: Umem,
    recycle: Vec<u64>,
    base: NonNull<u8>,
    area_len: usize,
    _area: AreaGuard,
}

// SAFETY: as XdpTx: one thread at a time, the memory is owned.
unsafe impl Send for XdpRx {}

impl XdpRx {
    /// Attaches the redirect program to `iface` and opens a copy-mode
    /// socket on rx queue `queue` (`queues` is the interface's rx queue
    /// count, the size of the program's socket map).
    pub fn open(iface: &str, queue: u32, queues: u32) -> io::Result<Self> {
        let frames = RX_RING * 2;
        let guard = AreaGuard::new((frames * RX_FRAME) as usize)?;
        let mem = guard.slice();
        let cfg = UmemConfig {
            fill_size: RX_RING,
            complete_size: RX_RING,
            frame_size: RX_FRAME,
            headroom: 0,
            flags: 0,
        };
        // SAFETY: the area is page aligned and outlives the UMEM (Drop
        // order above).
        let umem = unsafe { Umem::new(cfg, mem) }.map_err(|e| err("umem", e))?;
        let name = std::ffi::CString::new(iface)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
        let mut info = IfInfo::invalid();
        info.from_name(&name)
            .map_err(|e| err(&format!("interface '{iface}'"), e))?;
        info.set_queue(queue);
        let sock = Socket::with_shared(&info, &umem).map_err(|e| err("socket", e))?;
        let mut device = umem
            .fq_cq(&sock)
            .map_err(|e| err("fill/completion rings", e))?;
        let user = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: NonZeroU32::new(RX_RING),
                    tx_size: None,
                    bind_flags: SocketConfig::XDP_BIND_NEED_WAKEUP | SocketConfig::XDP_BIND_COPY,
                },
            )
            .map_err(|e| err("rx ring", e))?;
        let rx = user.map_rx().map_err(|e| err("rx ring map", e))?;
        bind_when_free(&umem, &user, iface, queue)?;
        // Stock the fill ring before any frame is redirected here.
        {
            let mut w = device.fill(RX_RING);
            let offsets: Vec<u64> = (0..RX_RING)
                .filter_map(|i| umem.frame(BufIdx(i)).map(|c| c.offset))
                .collect();
            w.insert(offsets.into_iter());
            w.commit();
        }
        let ifindex = info.ifindex();
        let prog = crate::xdpprog::XdpRedirect::attach(ifindex, queues)?;
        prog.insert(queue, rx.as_raw_fd())?;
        let base = guard.ptr;
        let area_len = guard.layout.size();
        Ok(XdpRx {
            prog,
            rx,
            device,
            user,
            _umem: umem,
            recycle: Vec::with_capacity(RX_RING as usize),
            base,
            area_len,
            _area: guard,
        })
    }

    /// Native (in the driver) or generic XDP.
    pub fn mode(&self) -> crate::xdpprog::XdpMode {
        self.prog.mode
    }

    /// Hands up to `max` received frames to `f` (writable, in place in the
    /// UMEM), gives their buffers back to the fill ring, and returns how
    /// many there were (0: nothing ready).
    pub fn recv<F: FnMut(&mut [u8])>(&mut self, max: u32, mut f: F) -> usize {
        let mut n = 0;
        {
            let mut r = self.rx.receive(max);
            while let Some(d) = r.read() {
                let start = d.addr as usize;
                let end = start.saturating_add(d.len as usize);
                if end <= self.area_len {
                    // SAFETY: the kernel handed this frame to us (it is not
                    // on the fill ring until we recycle it below) and it
                    // lies inside the UMEM, checked just above.
                    let frame = unsafe {
                        std::slice::from_raw_parts_mut(self.base.as_ptr().add(start), end - start)
                    };
                    f(frame);
                }
                self.recycle.push(d.addr & !u64::from(RX_FRAME - 1));
                n += 1;
            }
            r.release();
        }
        if !self.recycle.is_empty() {
            let mut w = self.device.fill(self.recycle.len() as u32);
            let k = w.insert(self.recycle.iter().copied()) as usize;
            w.commit();
            self.recycle.drain(..k);
        }
        if self.device.needs_wakeup() {
            self.device.wake();
        }
        n
    }

    /// Waits up to `timeout_ms` for frames.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut p = [libc::pollfd {
            fd: self.rx.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        Ok(commbench_core::sys::poll(&mut p, timeout_ms)? > 0)
    }

    /// The socket's drop counters (XDP_STATISTICS).
    pub fn stats(&self) -> io::Result<XdpRxStats> {
        let s = self
            .user
            .statistics_v2()
            .map_err(|e| err("statistics", e))?;
        Ok(XdpRxStats {
            dropped: s.rx_dropped,
            rx_ring_full: s.rx_ring_full,
            fill_ring_empty: s.rx_fill_ring_empty_descs,
        })
    }
}
