//! A server out of descriptors (RLIMIT_NOFILE lowered in this test's own
//! process: this file holds one test, so nothing else shares the limit)
//! sheds the connections it cannot take through its reserve descriptor,
//! keeps serving the ones it has, and accepts again once descriptors are
//! free — every engine. (It used to stop watching its listener, or exit.)
#![allow(unsafe_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

use commbench_mux::engine::{EngineKind, Lookup};
use commbench_mux::server::{self, ServeConfig};
use commbench_mux::Protocol;

/// Writes one byte and reads it back; says what happened instead. A read
/// interrupted is retried: this thread made an io_uring (the probe), and
/// the kernel's teardown of a ring signals each task that used it
/// (TWA_SIGNAL), which ends a socket read with a timeout in EINTR.
fn echo(s: &mut TcpStream) -> Result<(), String> {
    s.write_all(b"x").map_err(|e| format!("write: {e}"))?;
    let mut b = [0u8; 1];
    loop {
        match s.read(&mut b) {
            Ok(1) => return Ok(()),
            Ok(n) => return Err(format!("read {n} bytes")),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

fn echoes(s: &mut TcpStream) -> bool {
    echo(s).is_ok()
}

/// A TCP socket not yet connected (so connecting it later needs no descriptor).
fn socket() -> i32 {
    // SAFETY: plain syscall returning a new descriptor.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0);
    fd
}

fn connect(fd: i32, port: u16) -> TcpStream {
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: fd is our socket; sa is a live sockaddr_in of the stated size.
    let r = unsafe {
        libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
    // SAFETY: fd is ours and connected; the stream owns it from here.
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Opens descriptors until the table is full; returns them.
fn fill() -> Vec<std::fs::File> {
    let mut v = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        v.push(f);
        assert!(v.len() < 10_000, "the descriptor limit did not hold");
    }
    v
}

#[test]
fn a_server_out_of_descriptors_sheds_new_connections_and_keeps_serving() {
    let lim = libc::rlimit {
        rlim_cur: 256,
        rlim_max: 256,
    };
    // SAFETY: setrlimit with a live struct; lowers both limits for this process.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    for e in EngineKind::ALL {
        if e == EngineKind::IoUring {
            if let Err(why) = commbench_mux::engine::uring::probe() {
                commbench_core::testing::skip_part("io-uring", "io_uring", why);
                continue;
            }
        }
        let srv = server::start(&ServeConfig {
            engine: e,
            lookup: Lookup::Index,
            protocol: Protocol::Raw,
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            buf_size: 4096,
            max_conns: 1000,
            cpus: None,
            extra_work_ns: 0,
            tls: None,
        })
        .unwrap();
        let mut kept: Vec<TcpStream> = (0..4).map(|_| connect(socket(), srv.port)).collect();
        for s in &mut kept {
            assert!(echoes(s), "{e:?}");
        }
        let pending: Vec<i32> = (0..6).map(|_| socket()).collect();
        let filler = fill();
        // The server has no descriptor for these: each is shed (closed).
        let mut shed: Vec<TcpStream> = pending
            .into_iter()
            .map(|fd| connect(fd, srv.port))
            .collect();
        for s in &mut shed {
            assert!(!echoes(s), "{e:?}: a connection past the limit was served");
        }
        // The server is alive and still serves what it had.
        for s in &mut kept {
            if let Err(why) = echo(s) {
                panic!(
                    "{e:?}: an old connection stopped being served ({why}); {:?}",
                    srv.stats()
                );
            }
        }
        let st = srv.stats();
        assert!(st.loops.refused >= 6, "{e:?}: {st:?}");
        assert_eq!(st.loops.accepted, 4, "{e:?}");
        // One failed accept per connection shed, give or take: not a loop
        // that spins on the full table until a descriptor is free.
        assert!(
            st.loops.accept_errors <= 20,
            "{e:?}: the loop spun on a full descriptor table: {st:?}"
        );
        // Descriptors free again: it accepts again.
        drop(filler);
        drop(shed);
        let mut again = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        again
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        assert!(
            echoes(&mut again),
            "{e:?}: no accept after descriptors came back"
        );
        assert!(Instant::now() < deadline);
        drop((kept, again));
        srv.stop().unwrap();
    }
}
