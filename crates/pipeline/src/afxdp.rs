//! AF_XDP transmission in copy mode (veth has no zero-copy support: the
//! kernel copies each frame from the UMEM into an skb). Transmit-only, so no
//! XDP program is needed: frames written once into the UMEM are posted as
//! descriptors on the tx ring, the kernel is woken when it asks for it, and
//! completions hand the descriptors back.
//!
//! Crate choice: `xdpilone` maps the UMEM and the four rings itself in pure
//! Rust (no libbpf / libxdp C libraries to build or install), which is all a
//! transmit-only socket needs; receiving would also need an XDP redirect
//! program and a loader (aya or libbpf), not built here.

use std::io;
use std::num::NonZeroU32;
use std::ptr::NonNull;
use xdpilone::xdp::XdpDesc;
use xdpilone::{BufIdx, DeviceQueue, IfInfo, RingTx, Socket, SocketConfig, Umem, UmemConfig};

const UMEM_BYTES: usize = 1 << 22;

#[repr(C, align(4096))]
struct Area([u8; UMEM_BYTES]);

fn err(what: &str, e: xdpilone::Errno) -> io::Error {
    io::Error::other(format!(
        "AF_XDP {what}: {e} (needs Linux >= 5.4 with CONFIG_XDP_SOCKETS and root)"
    ))
}

/// A transmit-only AF_XDP socket on queue 0 of an interface.
pub struct XdpTx {
    // Declared before `area`: the rings and the UMEM registration go away
    // before the memory they point into.
    tx: RingTx,
    device: DeviceQueue,
    _umem: Umem,
    frames: Vec<XdpDesc>,
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
        // Zeroed on the heap directly (a 4 MiB array must not pass the stack).
        let layout = std::alloc::Layout::new::<Area>();
        // SAFETY: Area has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) } as *mut Area;
        let area =
            NonNull::new(raw).ok_or_else(|| io::Error::other("out of memory for the UMEM"))?;
        // Freed by the guard, on error too.
        let guard = AreaGuard(area);
        let mem: NonNull<[u8]> = NonNull::slice_from_raw_parts(area.cast::<u8>(), UMEM_BYTES);
        let built = (|| -> io::Result<(Umem, DeviceQueue, RingTx, Vec<XdpDesc>)> {
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
            umem.bind(&rxtx).map_err(|e| err("bind (copy mode)", e))?;
            let mut descs = Vec::with_capacity(frames.len());
            for (i, f) in frames.iter().enumerate() {
                let mut chunk = umem
                    .frame(BufIdx(i as u32))
                    .ok_or_else(|| io::Error::other("AF_XDP: more frames than UMEM slots"))?;
                // SAFETY: nothing has been posted yet; we are the only user.
                let buf = unsafe { chunk.addr.as_mut() };
                let n = f.len().min(buf.len());
                buf[..n].copy_from_slice(&f[..n]);
                descs.push(XdpDesc {
                    addr: chunk.offset,
                    len: n as u32,
                    options: 0,
                });
            }
            Ok((umem, device, tx, descs))
        })();
        match built {
            Ok((umem, device, tx, frames)) => Ok(XdpTx {
                tx,
                device,
                _umem: umem,
                frames,
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

/// Owns the UMEM memory; declared last in [`XdpTx`], so it is freed after
/// the rings and the UMEM registration (fields drop in declaration order).
struct AreaGuard(NonNull<Area>);

impl Drop for AreaGuard {
    fn drop(&mut self) {
        // SAFETY: allocated with the global allocator for an Area (the layout
        // Box uses); nothing uses it after
        // the socket fields (dropped before this one) are gone; the kernel
        // keeps its own references to pages it still holds.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}
