//! The engines' steps for an HTTPS connection. The readiness engines'
//! ([`step`]): the plain HTTP step ([`super::echo_ready`]) with a rustls session between the socket
//! and the request filter. Same buffer discipline: what the session has
//! to send goes out before anything more is read (a connection with
//! output pending waits for writability and reads nothing), one read is
//! at most rustls's 4 KiB, and a round's responses stop at one read
//! buffer (the rest of the requests are held, unparsed, as on plain
//! connections) — so pipelined requests cannot make the session's output
//! grow past one read buffer plus one answer and TLS framing.
//!
//! io_uring ([`feed`], [`seal`]): a receive's ciphertext (in a ring
//! buffer, given back once the session has it) goes through the session
//! and the filter in one go, and everything the session has to send is
//! taken out into the connection's own memory, so the engine sends it as
//! it sends plain HTTP answers (one send in flight; past one buffer of
//! unsent output the receive is cancelled until it drains).

use std::io::{self, Read, Write};

use super::{Conn, LoopStats, Next};
use crate::protocol::Protocol;
use crate::tls::FdIo;

/// Sends what the session holds; `None` when all is out.
fn flush(c: &mut Conn, stats: &mut LoopStats) -> Option<Next> {
    let fd = c.fd;
    let t = c.tls.as_mut()?;
    while t.wants_write() {
        stats.syscalls += 1;
        match t.write_tls(&mut FdIo(fd)) {
            Ok(n) => stats.bytes += n as u64,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(Next::Write),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Some(Next::Close),
        }
    }
    None
}

/// Puts a round's responses into the session (and, after the last answer
/// of the connection, its close_notify).
fn answer(c: &mut Conn, out: &[u8]) {
    let closes = c.closes_after_output();
    if let Some(t) = c.tls.as_mut() {
        if !out.is_empty() {
            // No buffer limit on the session: it takes all of it.
            let _ = t.writer().write_all(out);
        }
        if closes {
            t.send_close_notify();
        }
    }
}

/// One readiness report of an HTTPS connection: flush, then read, answer
/// and flush — once (level-triggered) or until the socket is drained
/// (`drain`, edge-triggered).
pub fn step(
    c: &mut Conn,
    buf: &mut [u8],
    scratch: &mut Vec<u8>,
    drain: bool,
    extra_work_ticks: u64,
    stats: &mut LoopStats,
) -> Next {
    let max_out = buf.len();
    if c.tls.is_none() {
        return Next::Close;
    }
    loop {
        if let Some(next) = flush(c, stats) {
            return next;
        }
        if c.closes_after_output() {
            // Its last answer (and close_notify) is sent: closed once the
            // peer closes too (`super::linger`).
            return super::linger(c, buf, stats);
        }
        if c.holds_input() {
            scratch.clear();
            if !c.resume_into(scratch, max_out) {
                stats.protocol_errors += 1;
                if !c.closes_after_output() {
                    return Next::Close;
                }
            }
            answer(c, scratch);
            continue;
        }
        let fd = c.fd;
        let Some(t) = c.tls.as_mut() else {
            return Next::Close;
        };
        stats.syscalls += 1;
        let n = match t.read_tls(&mut FdIo(fd)) {
            Ok(0) => return Next::Close,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Next::Close,
        };
        if extra_work_ticks > 0 {
            commbench_core::delay::tsc_delay_ticks(extra_work_ticks);
        }
        if t.process_new_packets().is_err() {
            // A refused handshake or a broken record: send the alert
            // rustls prepared, then close.
            let _ = t.write_tls(&mut FdIo(fd));
            stats.protocol_errors += 1;
            return Next::Close;
        }
        scratch.clear();
        let mut peer_closed = false;
        loop {
            let Some(t) = c.tls.as_mut() else {
                return Next::Close;
            };
            let m = match t.reader().read(buf) {
                Ok(0) => {
                    // close_notify: answer what came before it, then close.
                    peer_closed = true;
                    break;
                }
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return Next::Close,
            };
            if !c.filter_into(Protocol::Http1, &buf[..m], scratch, max_out) {
                stats.protocol_errors += 1;
                if !c.closes_after_output() {
                    return Next::Close;
                }
            }
            if c.closes_after_output() {
                break;
            }
        }
        answer(c, scratch);
        if let Some(next) = flush(c, stats) {
            return next;
        }
        if peer_closed {
            return Next::Close;
        }
        if c.closes_after_output() {
            return super::linger(c, buf, stats);
        }
        // A read short of rustls's 4 KiB took what the socket held.
        if !drain && !c.holds_input() && n < 4096 {
            return Next::Read;
        }
    }
}

/// What [`feed`] leaves the completion engine to do once `out` is queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fed {
    /// The connection goes on.
    Open,
    /// The peer sent close_notify: `out` holds the answers to what came
    /// before it; close.
    PeerClosed,
    /// A refused handshake, a broken record or a malformed request that
    /// gets no answer: `out` holds the alert rustls prepared, if any;
    /// close.
    Failed,
}

/// The io_uring engine's step for an HTTPS connection: the ciphertext one
/// receive brought goes through the session, the requests it carried are
/// answered into the session (at most `max_out` bytes of responses; the
/// rest is held unparsed, as on plain connections) and everything the
/// session has to send — handshake, records, close_notify after the last
/// answer — is appended to `out`. `plain` is scratch for decrypted bytes,
/// `scratch` for responses. Input after the connection's last answer is
/// decrypted and dropped.
pub fn feed(
    c: &mut Conn,
    mut cipher: &[u8],
    plain: &mut [u8],
    scratch: &mut Vec<u8>,
    max_out: usize,
    out: &mut Vec<u8>,
    stats: &mut LoopStats,
) -> Fed {
    scratch.clear();
    let mut peer_closed = false;
    while !cipher.is_empty() && !peer_closed {
        let Some(t) = c.tls.as_mut() else {
            return Fed::Failed;
        };
        // Reading from a slice: rustls takes at most its own buffer's
        // room at a time, so this loops over a large receive.
        match t.read_tls(&mut cipher) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => {
                stats.protocol_errors += 1;
                return Fed::Failed;
            }
        }
        if t.process_new_packets().is_err() {
            // A refused handshake or a broken record: the alert rustls
            // prepared goes out, then the connection closes.
            let _ = t.write_tls(out);
            stats.protocol_errors += 1;
            return Fed::Failed;
        }
        loop {
            let Some(t) = c.tls.as_mut() else {
                return Fed::Failed;
            };
            let m = match t.reader().read(plain) {
                Ok(0) => {
                    peer_closed = true;
                    break;
                }
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return Fed::Failed,
            };
            if c.closes_after_output() {
                continue;
            }
            if !c.filter_into(Protocol::Http1, &plain[..m], scratch, max_out) {
                stats.protocol_errors += 1;
                if !c.closes_after_output() {
                    return Fed::Failed;
                }
            }
        }
    }
    seal(c, scratch, out);
    if peer_closed {
        Fed::PeerClosed
    } else {
        Fed::Open
    }
}

/// Puts responses into the session (with close_notify after the
/// connection's last answer) and appends what the session has to send
/// to `out`.
pub fn seal(c: &mut Conn, responses: &[u8], out: &mut Vec<u8>) {
    answer(c, responses);
    if let Some(t) = c.tls.as_mut() {
        while t.wants_write() {
            // Into memory: never blocks, never fails.
            if t.write_tls(out).is_err() {
                break;
            }
        }
    }
}
