//! The machine's limits on connection count, handled for the user: file
//! descriptors (RLIMIT_NOFILE raised to the hard limit, and the hard limit
//! itself when root), local ports (a listen port below
//! `ip_local_port_range`, several 127.x source addresses when one address
//! would run out of ports) and a private network namespace (`--netns`,
//! root) with its own somaxconn and port range, which disappears with the
//! process, so nothing is left behind even after SIGKILL.
#![allow(unsafe_code)]

use commbench_core::syscall;
use std::net::{Ipv4Addr, SocketAddr};

use crate::{MuxError, Result};

/// Descriptors a process keeps besides its connections (std streams,
/// epoll, listeners, control pipes, ...).
pub const FD_RESERVE: u64 = 64;

/// Makes room for `conns` sockets in this process (and the server child,
/// which inherits the limit); returns the soft limit now in force.
pub fn ensure_nofile(conns: usize) -> Result<u64> {
    let need = conns as u64 + FD_RESERVE;
    commbench_core::sys::ensure_nofile(need).map_err(|s| {
        MuxError::usage(format!(
            "{conns} connections need {need} file descriptors in one process, but RLIMIT_NOFILE allows {} (hard limit {}), \
             so at most {} connections fit here: lower --conns, or raise the hard limit (as root: `ulimit -Hn {need}`, \
             or run commbench as root, which raises it itself up to fs.nr_open = {})",
            s.soft,
            s.hard,
            s.soft.saturating_sub(FD_RESERVE),
            s.nr_open
        ))
    })
}

/// The kernel's ephemeral port range (`net.ipv4.ip_local_port_range`).
pub fn port_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|x| x.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999))
}

/// Source addresses for `conns` connections to `target`: none (the
/// kernel's choice) when one address has ports enough, otherwise
/// 127.0.0.1, 127.0.0.2, ... (loopback targets only: any 127.x address is
/// local), each given at most 90% of the port range.
pub fn sources_for(conns: usize, target: SocketAddr) -> Result<Vec<Ipv4Addr>> {
    let (lo, hi) = port_range();
    let per = ((hi.saturating_sub(lo) as usize + 1) * 9 / 10).max(1);
    if conns <= per {
        return Ok(Vec::new());
    }
    let k = conns.div_ceil(per);
    match target {
        SocketAddr::V4(a) if a.ip().is_loopback() && k < 250 => {
            Ok((1..=k as u8).map(|i| Ipv4Addr::new(127, 0, 0, i)).collect())
        }
        _ => Err(MuxError::usage(format!(
            "{conns} connections to {target} need {k} source addresses ({per} ports each in \
             ip_local_port_range {lo}-{hi}); give them with --sources A,B,... or widen the port range"
        ))),
    }
}

/// A listen port below the ephemeral range (so client connections never
/// compete with it for a port), free on `ip`; 0 (the kernel's choice) if
/// none is found.
pub fn pick_listen_port(ip: Ipv4Addr) -> u16 {
    let (lo, _) = port_range();
    let span = 2000u16.min(lo.saturating_sub(1024));
    if span == 0 {
        return 0;
    }
    let start = std::process::id() as u16 % span;
    for k in 0..span {
        let p = lo - 1 - ((start + k) % span);
        if std::net::TcpListener::bind((ip, p)).is_ok() {
            return p;
        }
    }
    0
}

/// Moves this thread (and every thread and process it starts afterwards)
/// into a new, private network namespace with loopback up, somaxconn
/// 65535 and ephemeral ports 10000–65535 (listen ports stay below them). Needs root (CAP_SYS_ADMIN). The
/// namespace disappears when its last process exits.
pub fn enter_private_netns() -> Result<()> {
    // SAFETY: unshare with a flag, no pointers.
    if let Err(e) = unsafe { syscall!(unshare(libc::CLONE_NEWNET)) } {
        return Err(MuxError::usage(format!(
            "--netns needs root (unshare(CLONE_NEWNET): {e}); run as root or drop --netns"
        )));
    }
    loopback_up()?;
    // Per-namespace settings; failures only lose headroom, so they are warnings.
    for (path, v) in [
        ("/proc/sys/net/core/somaxconn", "65535"),
        ("/proc/sys/net/ipv4/ip_local_port_range", "10000 65535"),
        ("/proc/sys/net/ipv4/tcp_max_syn_backlog", "65535"),
        ("/proc/sys/net/ipv4/tcp_tw_reuse", "1"),
    ] {
        if let Err(e) = std::fs::write(path, v) {
            eprintln!(
                "commbench mux: warning: cannot set {path} = {v} in the private namespace: {e}"
            );
        }
    }
    Ok(())
}

fn loopback_up() -> Result<()> {
    commbench_core::sys::iface_up("lo")
        .map_err(|e| MuxError::io("bringing up loopback in the private namespace".into(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_connections_need_no_extra_source_addresses() {
        let t: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert!(sources_for(100, t).unwrap().is_empty());
    }

    #[test]
    fn many_connections_spread_over_loopback_addresses() {
        let t: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let (lo, hi) = port_range();
        let per = (hi - lo) as usize * 9 / 10;
        let s = sources_for(per * 2 + 10, t).unwrap();
        assert!(s.len() >= 2);
        assert_eq!(s[0], Ipv4Addr::new(127, 0, 0, 1));
        let remote: SocketAddr = "10.0.0.1:9".parse().unwrap();
        assert!(sources_for(per * 2 + 10, remote).is_err());
    }

    #[test]
    fn listen_port_is_below_the_ephemeral_range() {
        let p = pick_listen_port(Ipv4Addr::LOCALHOST);
        let (lo, _) = port_range();
        assert!(
            p == 0 || p < lo,
            "port {p} in the ephemeral range from {lo}"
        );
    }
}
