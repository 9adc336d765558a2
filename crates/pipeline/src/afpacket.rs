//! Real packet I/O with AF_PACKET: a TPACKET_V3 receive ring (blocks of
//! frames the kernel fills and hands over whole, polled without a syscall
//! per packet) and transmission by `sendmmsg` in bursts, with
//! PACKET_QDISC_BYPASS so frames skip the qdisc layer as DPDK's do.
//!
//! The ring's layout (`tpacket_block_desc`, `tpacket3_hdr`) is read at the
//! fixed offsets of the kernel UAPI (linux/if_packet.h); every offset the
//! kernel hands over is checked against the block before it is followed,
//! so a corrupt ring is an error, never a read outside the mapping.

#![allow(unsafe_code)]

use commbench_core::{sys, syscall};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const ETH_P_ALL: u16 = 0x0003;

/// `struct tpacket_req3`.
#[repr(C)]
struct TpacketReq3 {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
    tp_retire_blk_tov: u32,
    tp_sizeof_priv: u32,
    tp_feature_req_word: u32,
}

/// `struct tpacket_stats_v3`.
#[repr(C)]
#[derive(Default)]
struct TpacketStatsV3 {
    tp_packets: u32,
    tp_drops: u32,
    tp_freeze_q_cnt: u32,
}

// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then
// `tpacket_hdr_v1`: block_status, num_pkts, offset_to_first_pkt, ...).
const BD_BLOCK_STATUS: usize = 8;
const BD_NUM_PKTS: usize = 12;
const BD_OFFSET_TO_FIRST: usize = 16;
const BD_BLK_LEN: usize = 20;
// Offsets in `struct tpacket3_hdr`.
const H_NEXT_OFFSET: usize = 0;
const H_SEC: usize = 4;
const H_NSEC: usize = 8;
const H_SNAPLEN: usize = 12;
const H_MAC: usize = 24;

fn setsockopt<T>(fd: &OwnedFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live T of the size passed.
    unsafe {
        syscall!(setsockopt(
            fd.as_raw_fd(),
            SOL_PACKET,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        ))
    }
    .map(|_| ())
}

/// The index of interface `name` in the calling thread's network namespace.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
    // SAFETY: c is a valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface '{name}' here: {}", io::Error::last_os_error()),
        ))
    } else {
        Ok(i)
    }
}

/// The flags of interface `name` (SIOCGIFFLAGS) in the calling thread's
/// network namespace; NotFound when there is no such interface.
pub use commbench_core::sys::iface_flags as if_flags;

/// Why interface `name` cannot carry frames, as an error naming it: not
/// found, administratively down, or up without a carrier (not
/// IFF_RUNNING: for a veth, its peer is down or gone).
pub fn check_link_up(name: &str) -> io::Result<()> {
    let flags = if_flags(name)?;
    if flags & libc::IFF_UP as u32 == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NetworkDown,
            format!("interface '{name}' is down (ip link set {name} up)"),
        ));
    }
    if flags & libc::IFF_RUNNING as u32 == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NetworkDown,
            format!(
                "interface '{name}' is up but has no carrier (operstate not up; \
                 for a veth: its peer is down)"
            ),
        ));
    }
    Ok(())
}

/// An AF_PACKET socket bound to one interface.
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// A socket on `iface`; `rx` decides whether it receives (ETH_P_ALL) or
    /// only sends (protocol 0: the kernel queues nothing to it).
    pub fn open(iface: &str, rx: bool) -> io::Result<Self> {
        let ifindex = ifindex(iface)?;
        let proto = if rx { ETH_P_ALL.to_be() } else { 0 };
        // SAFETY: plain socket(2) call.
        let raw = unsafe {
            syscall!(socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::c_int::from(proto),
            ))?
        };
        // SAFETY: raw is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: zeroed sockaddr_ll is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: sll is a valid sockaddr_ll of the size passed.
        unsafe {
            syscall!(bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            ))?
        };
        Ok(PacketSocket { fd })
    }

    /// Frames skip the qdisc (and its drops) on transmit.
    pub fn qdisc_bypass(&self) -> io::Result<()> {
        setsockopt(&self.fd, PACKET_QDISC_BYPASS, &1i32)
    }

    /// Sends up to 64 of `frames` with one `sendmmsg`; returns how many
    /// the kernel took. The socket is bound to its interface, so the
    /// messages carry no address (one per message made the kernel look the
    /// device up per frame: 0.94x a C generator's frames per CPU-second,
    /// 1.0x without), and the headers live on the stack (no allocation per
    /// call).
    pub fn send_batch(&self, frames: &[&[u8]]) -> io::Result<usize> {
        const MAX: usize = 64;
        let n = frames.len().min(MAX);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: all-zero iovec and mmsghdr are valid values.
        let mut iov: [libc::iovec; MAX] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; MAX] = unsafe { std::mem::zeroed() };
        for ((f, io), h) in frames[..n].iter().zip(iov.iter_mut()).zip(msgs.iter_mut()) {
            io.iov_base = f.as_ptr() as *mut libc::c_void;
            io.iov_len = f.len();
            h.msg_hdr.msg_iov = io as *mut libc::iovec;
            h.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: msgs points to n initialised headers whose iovecs stay
        // alive for the call.
        let r = unsafe {
            syscall!(sendmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                0
            ))
        };
        match r {
            Ok(r) => Ok(r as usize),
            Err(e)
                if e.raw_os_error() == Some(libc::ENOBUFS)
                    || e.kind() == io::ErrorKind::WouldBlock =>
            {
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }

    /// (packets received, packets dropped) since the last call, as the
    /// kernel counts them for this socket (PACKET_STATISTICS resets them).
    pub fn stats(&self) -> io::Result<(u64, u64)> {
        let mut st = TpacketStatsV3::default();
        let mut len = std::mem::size_of::<TpacketStatsV3>() as libc::socklen_t;
        // SAFETY: st is writable for len bytes.
        unsafe {
            syscall!(getsockopt(
                self.fd.as_raw_fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                &mut st as *mut TpacketStatsV3 as *mut libc::c_void,
                &mut len,
            ))?
        };
        let _ = st.tp_freeze_q_cnt;
        Ok((u64::from(st.tp_packets), u64::from(st.tp_drops)))
    }
}

/// A TPACKET_V3 receive ring on a socket.
pub struct RxRing {
    sock: PacketSocket,
    map: *mut u8,
    map_len: usize,
    block_size: usize,
    blocks: usize,
    next: usize,
}

// SAFETY: the mapping is owned by this value and used by one thread at a time.
unsafe impl Send for RxRing {}

impl RxRing {
    /// A ring of `blocks` blocks of `block_size` bytes (a power of two, a
    /// multiple of the page size) on a receiving socket on `iface`. A block
    /// is handed over when full or after `retire_ms`.
    pub fn open(iface: &str, block_size: usize, blocks: usize, retire_ms: u32) -> io::Result<Self> {
        let sock = PacketSocket::open(iface, true)?;
        setsockopt(&sock.fd, PACKET_VERSION, &TPACKET_V3)?;
        let frame_size = 2048u32;
        let req = TpacketReq3 {
            tp_block_size: block_size as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame_size,
            tp_frame_nr: (block_size * blocks / frame_size as usize) as u32,
            tp_retire_blk_tov: retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(&sock.fd, PACKET_RX_RING, &req)?;
        let map_len = block_size * blocks;
        // Mapping the ring the kernel just allocated for this fd.
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let fd = sock.fd.as_raw_fd();
        let map = match sys::mmap(map_len, rw, libc::MAP_SHARED | libc::MAP_LOCKED, fd, 0) {
            Ok(m) => m,
            // MAP_LOCKED can fail under RLIMIT_MEMLOCK; retry without it.
            Err(_) => sys::mmap(map_len, rw, libc::MAP_SHARED, fd, 0)?,
        };
        Ok(RxRing {
            sock,
            map,
            map_len,
            block_size,
            blocks,
            next: 0,
        })
    }

    pub fn socket(&self) -> &PacketSocket {
        &self.sock
    }

    fn read_u32(&self, off: usize) -> u32 {
        debug_assert!(off + 4 <= self.map_len);
        // SAFETY: off + 4 is inside the mapping (callers check), and the
        // kernel writes these words; volatile because it does so
        // concurrently.
        unsafe { std::ptr::read_volatile(self.map.add(off) as *const u32) }
    }

    fn read_u16(&self, off: usize) -> u16 {
        // SAFETY: as read_u32.
        unsafe { std::ptr::read_volatile(self.map.add(off) as *const u16) }
    }

    /// Waits up to `timeout_ms` for the socket to become readable.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut p = [libc::pollfd {
            fd: self.sock.fd.as_raw_fd(),
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        }];
        Ok(commbench_core::sys::poll(&mut p, timeout_ms)? > 0)
    }

    /// Hands every frame of the next ready block to `f`, returns the block
    /// to the kernel, and returns the number of frames (0: no block ready).
    /// Errors when the kernel's offsets point outside the block.
    pub fn next_block<F: FnMut(&mut [u8])>(&mut self, mut f: F) -> io::Result<usize> {
        self.next_block_ts(|fr, _| f(fr))
    }

    /// [`RxRing::next_block`] with each frame's kernel receive timestamp
    /// (`CLOCK_REALTIME` ns, from the frame's `tpacket3_hdr`).
    pub fn next_block_ts<F: FnMut(&mut [u8], u64)>(&mut self, mut f: F) -> io::Result<usize> {
        let base = self.next * self.block_size;
        let status = self.read_u32(base + BD_BLOCK_STATUS);
        if status & TP_STATUS_USER == 0 {
            return Ok(0);
        }
        fence(Ordering::Acquire);
        let n = self.read_u32(base + BD_NUM_PKTS) as usize;
        let blk_len = (self.read_u32(base + BD_BLK_LEN) as usize).min(self.block_size);
        let mut off = self.read_u32(base + BD_OFFSET_TO_FIRST) as usize;
        let bad = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "TPACKET_V3 block offsets point outside the block",
            )
        };
        for i in 0..n {
            if off + 32 > blk_len {
                return Err(bad());
            }
            let h = base + off;
            let snap = self.read_u32(h + H_SNAPLEN) as usize;
            let mac = usize::from(self.read_u16(h + H_MAC));
            if off + mac + snap > self.block_size {
                return Err(bad());
            }
            // SAFETY: [h + mac, h + mac + snap) was checked to lie inside
            // this block, which the kernel handed to us (TP_STATUS_USER)
            // and does not touch until we return it below.
            let frame = unsafe { std::slice::from_raw_parts_mut(self.map.add(h + mac), snap) };
            let ts = u64::from(self.read_u32(h + H_SEC)) * 1_000_000_000
                + u64::from(self.read_u32(h + H_NSEC));
            f(frame, ts);
            let next = self.read_u32(h + H_NEXT_OFFSET) as usize;
            if i + 1 < n {
                if next == 0 {
                    return Err(bad());
                }
                off += next;
            }
        }
        fence(Ordering::Release);
        // SAFETY: the status word is inside the mapping; writing KERNEL
        // returns the block.
        unsafe {
            std::ptr::write_volatile(
                self.map.add(base + BD_BLOCK_STATUS) as *mut u32,
                TP_STATUS_KERNEL,
            )
        };
        self.next = (self.next + 1) % self.blocks;
        Ok(n)
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.map_len);
        }
    }
}

const PACKET_TX_RING: libc::c_int = 13;
const TPACKET_V2: libc::c_int = 1;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
/// Frame data starts after the aligned `tpacket2_hdr` (TPACKET2_HDRLEN −
/// sizeof(sockaddr_ll)).
const TX_DATA_OFF: usize = 32;
const TX_FRAME: usize = 2048;

/// `struct tpacket_req`.
#[repr(C)]
struct TpacketReq {
    tp_block_size: u32,
    tp_block_nr: u32,
    tp_frame_size: u32,
    tp_frame_nr: u32,
}

/// A PACKET_TX_RING (TPACKET_V2) transmit ring: frames are written into
/// the shared mapping and one `send` call hands every queued frame to the
/// kernel, instead of one iovec per frame through `sendmmsg`.
pub struct TxRing {
    sock: PacketSocket,
    map: *mut u8,
    map_len: usize,
    frames: usize,
    next: usize,
    /// Frames the kernel rejected (TP_STATUS_WRONG_FORMAT).
    pub rejected: u64,
}

// SAFETY: the mapping is owned by this value and used by one thread at a time.
unsafe impl Send for TxRing {}

impl TxRing {
    /// A ring of `frames` 2 KiB slots (a multiple of 2) on `iface`.
    pub fn open(iface: &str, frames: usize) -> io::Result<Self> {
        let sock = PacketSocket::open(iface, false)?;
        setsockopt(&sock.fd, PACKET_VERSION, &TPACKET_V2)?;
        let _ = sock.qdisc_bypass();
        let block = 4096usize;
        let frames = frames.max(2) & !1;
        let req = TpacketReq {
            tp_block_size: block as u32,
            tp_block_nr: (frames * TX_FRAME / block) as u32,
            tp_frame_size: TX_FRAME as u32,
            tp_frame_nr: frames as u32,
        };
        setsockopt(&sock.fd, PACKET_TX_RING, &req)?;
        let map_len = frames * TX_FRAME;
        // Mapping the ring the kernel allocated for this fd.
        let map = sys::mmap(
            map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            sock.fd.as_raw_fd(),
            0,
        )?;
        Ok(TxRing {
            sock,
            map,
            map_len,
            frames,
            next: 0,
            rejected: 0,
        })
    }

    fn status(&self, slot: usize) -> u32 {
        // SAFETY: slot < frames, so the word is inside the mapping; the
        // kernel updates it concurrently (volatile).
        unsafe { std::ptr::read_volatile(self.map.add(slot * TX_FRAME) as *const u32) }
    }

    /// Queues as many of `frames` as there are free slots and kicks the
    /// kernel once; returns how many were queued.
    pub fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        let mut queued = 0;
        for f in frames {
            let slot = self.next;
            let st = self.status(slot);
            if st & TP_STATUS_WRONG_FORMAT != 0 {
                self.rejected += 1;
            } else if st != TP_STATUS_AVAILABLE {
                break; // the ring is full: the kernel still owns this slot
            }
            let len = f.len().min(TX_FRAME - TX_DATA_OFF);
            let base = slot * TX_FRAME;
            debug_assert!(base + TX_DATA_OFF + len <= self.map_len);
            // SAFETY: the slot is ours (AVAILABLE or rejected) and the copy
            // stays inside it; the header words are inside it too.
            unsafe {
                std::ptr::copy_nonoverlapping(f.as_ptr(), self.map.add(base + TX_DATA_OFF), len);
                std::ptr::write_volatile(self.map.add(base + 4) as *mut u32, len as u32);
                fence(Ordering::Release);
                std::ptr::write_volatile(self.map.add(base) as *mut u32, TP_STATUS_SEND_REQUEST);
            }
            self.next = (self.next + 1) % self.frames;
            queued += 1;
        }
        if queued > 0 {
            // SAFETY: a zero-length send on our socket: the kernel walks the ring.
            let r = unsafe { syscall!(send(self.sock.fd.as_raw_fd(), std::ptr::null(), 0, 0)) };
            if let Err(e) = r {
                if e.raw_os_error() != Some(libc::ENOBUFS) && e.kind() != io::ErrorKind::WouldBlock
                {
                    return Err(e);
                }
            }
        }
        Ok(queued)
    }

    /// Waits (bounded) until the kernel has finished with every slot; returns
    /// how many it rejected in total.
    pub fn drain(&mut self, timeout: std::time::Duration) -> u64 {
        let end = std::time::Instant::now() + timeout;
        for slot in 0..self.frames {
            loop {
                let st = self.status(slot);
                if st & TP_STATUS_WRONG_FORMAT != 0 {
                    self.rejected += 1;
                    // SAFETY: returning a rejected slot to AVAILABLE.
                    unsafe {
                        std::ptr::write_volatile(
                            self.map.add(slot * TX_FRAME) as *mut u32,
                            TP_STATUS_AVAILABLE,
                        )
                    };
                    break;
                }
                if st == TP_STATUS_AVAILABLE || std::time::Instant::now() > end {
                    break;
                }
                // SAFETY: kick again in case the slot was queued after a send.
                unsafe { libc::send(self.sock.fd.as_raw_fd(), std::ptr::null(), 0, 0) };
                std::thread::yield_now();
            }
        }
        self.rejected
    }
}

impl Drop for TxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.map_len);
        }
    }
}
