//! The XDP program behind AF_XDP receive: a filter that redirects
//! commbench's own frames to the AF_XDP socket of their rx queue and lets
//! everything else through to the kernel stack, so a run on a real NIC
//! never steals the host's traffic.
//!
//! ```text
//!   if data + 46 > data_end            -> XDP_PASS   (too short to carry the magic)
//!   if *(u32 *)(data + 42) != "CBPL"   -> XDP_PASS   (not ours)
//!   return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)
//! ```
//!
//! Why fourteen hand-assembled instructions and the bpf(2) syscall rather
//! than a loader crate: `aya` needs a BPF toolchain (bpf-linker, a nightly
//! Rust) to build the program, and libbpf/libxdp need clang at build time
//! and C libraries at run time; the program is small enough to check by
//! eye and the kernel verifier checks it again at load. It is attached
//! with a BPF link (`BPF_LINK_CREATE`, Linux >= 5.9), which the kernel
//! detaches by itself when the last descriptor closes: a killed run leaves
//! no program behind on the interface.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_PASS: i32 = 2;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;

/// Where the magic sits in a generated frame: Ethernet + IPv4 + UDP.
pub const MAGIC_OFF: i16 = 14 + 20 + 8;

/// One `struct bpf_insn`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    regs: u8, // dst in the low nibble, src in the high one
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | dst,
        off,
        imm,
    }
}

/// The program, with `map_fd` as the XSKMAP and `magic` (the four bytes
/// read as a little-endian u32 in the packet) as the mark.
pub fn program(map_fd: RawFd, magic: [u8; 4]) -> [Insn; 14] {
    // Opcodes (linux/bpf_common.h, linux/bpf.h).
    const LDXW: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
    const MOV64_REG: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
    const ADD64_IMM: u8 = 0x07; // BPF_ALU64 | BPF_ADD | BPF_K
    const JGT_REG: u8 = 0x2d; // BPF_JMP | BPF_JGT | BPF_X
    const JNE32_IMM: u8 = 0x56; // BPF_JMP32 | BPF_JNE | BPF_K
    const LD_IMM64: u8 = 0x18; // BPF_LD | BPF_DW | BPF_IMM
    const MOV64_IMM: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
    const CALL: u8 = 0x85;
    const EXIT: u8 = 0x95;
    const PSEUDO_MAP_FD: u8 = 1;
    let mark = i32::from_le_bytes(magic);
    [
        insn(MOV64_IMM, 0, 0, 0, XDP_PASS),             // 0: r0 = XDP_PASS
        insn(LDXW, 2, 1, 0, 0),                         // 1: r2 = ctx->data
        insn(LDXW, 3, 1, 4, 0),                         // 2: r3 = ctx->data_end
        insn(MOV64_REG, 4, 2, 0, 0),                    // 3: r4 = r2
        insn(ADD64_IMM, 4, 0, 0, MAGIC_OFF as i32 + 4), // 4: r4 += 46
        insn(JGT_REG, 4, 3, 7, 0),                      // 5: if r4 > r3 goto 13
        insn(LDXW, 5, 2, MAGIC_OFF, 0),                 // 6: r5 = *(u32 *)(r2 + 42)
        insn(JNE32_IMM, 5, 0, 5, mark),                 // 7: if (u32)r5 != mark goto 13
        insn(LDXW, 2, 1, 16, 0),                        // 8: r2 = ctx->rx_queue_index
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd),    // 9: r1 = &xsks
        insn(0, 0, 0, 0, 0),                            // 10: (upper half of the imm64)
        insn(MOV64_IMM, 3, 0, 0, XDP_PASS),             // 11: r3 = XDP_PASS when no socket
        insn(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),     // 12: r0 = bpf_redirect_map(r1, r2, r3)
        insn(EXIT, 0, 0, 0, 0),                         // 13: return r0
    ]
}

#[allow(unsafe_code)]
fn bpf(cmd: libc::c_long, attr: &mut [u64; 16]) -> io::Result<i64> {
    // SAFETY: attr is a zeroed 128-byte union bpf_attr with the fields of
    // `cmd` set; the kernel reads at most its size.
    unsafe {
        commbench_core::syscall!(syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr() as *mut libc::c_void,
            std::mem::size_of::<[u64; 16]>() as u32,
        ))
    }
}

fn put_u32(attr: &mut [u64; 16], byte_off: usize, v: u32) {
    let w = &mut attr[byte_off / 8];
    let shift = (byte_off % 8) * 8;
    *w = (*w & !(0xffff_ffffu64 << shift)) | (u64::from(v) << shift);
}

#[allow(unsafe_code)]
fn fd_of(r: i64) -> OwnedFd {
    // SAFETY: bpf(2) returned a new descriptor we now own.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// How the program runs on the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (veth has native XDP).
    Native,
    /// Generic XDP on the skb (any interface, slower).
    Generic,
}

impl XdpMode {
    pub fn name(&self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

/// The loaded program, its XSKMAP and the link that attaches it; dropping
/// it detaches the program.
pub struct XdpRedirect {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    pub mode: XdpMode,
}

fn explain(what: &str, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("AF_XDP receive: {what}: {e} (needs root, Linux >= 5.9 with CONFIG_BPF_SYSCALL and CONFIG_XDP_SOCKETS, and no other XDP program on the interface)"),
    )
}

impl XdpRedirect {
    /// Loads the filter with an XSKMAP of `queues` entries and attaches it
    /// to `ifindex`, in the driver if it can, else generic.
    pub fn attach(ifindex: u32, queues: u32) -> io::Result<Self> {
        let mut a = [0u64; 16];
        put_u32(&mut a, 0, BPF_MAP_TYPE_XSKMAP);
        put_u32(&mut a, 4, 4); // key: queue index
        put_u32(&mut a, 8, 4); // value: socket fd
        put_u32(&mut a, 12, queues.max(1));
        let map = fd_of(bpf(BPF_MAP_CREATE, &mut a).map_err(|e| explain("XSKMAP", e))?);

        let insns = program(map.as_raw_fd(), crate::netns::MAGIC);
        let license = c"Dual BSD/GPL";
        let mut log = vec![0u8; 4096];
        let mut a = [0u64; 16];
        put_u32(&mut a, 0, BPF_PROG_TYPE_XDP);
        put_u32(&mut a, 4, insns.len() as u32);
        a[1] = insns.as_ptr() as u64;
        a[2] = license.as_ptr() as u64;
        put_u32(&mut a, 24, 1); // log_level
        put_u32(&mut a, 28, log.len() as u32);
        a[4] = log.as_mut_ptr() as u64;
        let prog = match bpf(BPF_PROG_LOAD, &mut a) {
            Ok(fd) => fd_of(fd),
            Err(e) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                return Err(explain(
                    &format!("loading the redirect program (verifier: {})", text.trim()),
                    e,
                ));
            }
        };

        let mut last = None;
        for (flags, mode) in [
            (XDP_FLAGS_DRV_MODE, XdpMode::Native),
            (XDP_FLAGS_SKB_MODE, XdpMode::Generic),
        ] {
            let mut a = [0u64; 16];
            put_u32(&mut a, 0, prog.as_raw_fd() as u32);
            put_u32(&mut a, 4, ifindex);
            put_u32(&mut a, 8, BPF_XDP);
            put_u32(&mut a, 12, flags);
            match bpf(BPF_LINK_CREATE, &mut a) {
                Ok(fd) => {
                    return Ok(XdpRedirect {
                        map,
                        _prog: prog,
                        _link: fd_of(fd),
                        mode,
                    })
                }
                Err(e) => last = Some(e),
            }
        }
        Err(explain(
            "attaching the program",
            last.unwrap_or_else(|| io::Error::other("no mode")),
        ))
    }

    /// Sends queue `queue`'s frames to the AF_XDP socket `xsk`.
    pub fn insert(&self, queue: u32, xsk: RawFd) -> io::Result<()> {
        let key = queue;
        let value = xsk as u32;
        let mut a = [0u64; 16];
        put_u32(&mut a, 0, self.map.as_raw_fd() as u32);
        a[1] = &key as *const u32 as u64;
        a[2] = &value as *const u32 as u64;
        a[3] = 0; // BPF_ANY
        bpf(BPF_MAP_UPDATE_ELEM, &mut a)
            .map(|_| ())
            .map_err(|e| explain("adding the socket to the XSKMAP", e))
    }
}

/// An XDP program that passes every frame (`r0 = XDP_PASS; exit`),
/// attached in the driver: on a veth it keeps the receive in NAPI (and so
/// in its NAPI thread) with GRO off, which a veth otherwise needs for
/// NAPI. The identity table needs GRO off: with no trailer, GRO would
/// merge a replayed TCP flow's segments into frames the capture does not
/// hold. Dropping it detaches the program.
pub struct XdpPass {
    _prog: OwnedFd,
    _link: OwnedFd,
}

impl XdpPass {
    /// Loads the program and attaches it to `ifindex` in the driver
    /// (generic XDP would not give a veth its NAPI).
    pub fn attach(ifindex: u32) -> io::Result<Self> {
        const MOV64_IMM: u8 = 0xb7;
        const EXIT: u8 = 0x95;
        let insns = [insn(MOV64_IMM, 0, 0, 0, XDP_PASS), insn(EXIT, 0, 0, 0, 0)];
        let license = c"Dual BSD/GPL";
        let mut a = [0u64; 16];
        put_u32(&mut a, 0, BPF_PROG_TYPE_XDP);
        put_u32(&mut a, 4, insns.len() as u32);
        a[1] = insns.as_ptr() as u64;
        a[2] = license.as_ptr() as u64;
        let what = |w: &str, e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("XDP pass program: {w}: {e} (needs root and native XDP on the interface)"),
            )
        };
        let prog = fd_of(bpf(BPF_PROG_LOAD, &mut a).map_err(|e| what("loading", e))?);
        let mut a = [0u64; 16];
        put_u32(&mut a, 0, prog.as_raw_fd() as u32);
        put_u32(&mut a, 4, ifindex);
        put_u32(&mut a, 8, BPF_XDP);
        put_u32(&mut a, 12, XDP_FLAGS_DRV_MODE);
        let link = fd_of(bpf(BPF_LINK_CREATE, &mut a).map_err(|e| what("attaching", e))?);
        Ok(XdpPass {
            _prog: prog,
            _link: link,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_jumps_land_on_the_exit_with_r0_already_pass() {
        let p = program(7, *b"CBPL");
        // Both filter jumps go to the last instruction.
        for (i, ins) in p.iter().enumerate() {
            if ins.code == 0x2d || ins.code == 0x56 {
                assert_eq!(i as i16 + 1 + ins.off, p.len() as i16 - 1, "jump at {i}");
            }
        }
        assert_eq!(p[9].imm, 7);
        assert_eq!(p[0].imm, XDP_PASS);
        assert_eq!(p[7].imm, i32::from_le_bytes(*b"CBPL"));
    }
}
