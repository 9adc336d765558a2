//! The per-session loops of both ends: echo server, request/response client
//! (`sync`, `async`, `nores`) and the data-channel stream (server writes,
//! client reads and discards). The same loops run in a client thread (`mt`)
//! or in a re-executed client process (`mp`).
//!
//! Invariants: each loop runs exactly `count` messages and checks every
//! received one (length, sequence in header and payload, checksum with
//! `verify`); buffers are allocated once per session, never per message;
//! a peer that closes early becomes [`IpcError::PeerClosed`] naming the
//! session and how far it got. Serves the seed's reqres_loop and
//! data_channel_write.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use commbench_core::clock;
use commbench_core::rusage::Usage;
use commbench_core::stats::LatencyHistogram;

use crate::error::{IpcError, Result};
use crate::frame::{check_frame, check_lent, fill_pattern, header_for, stamp};
use crate::transport::{Endpoint, MsgRx, MsgTx};

/// Request/response modes of the seed's reqres_loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Send, wait for the echo, repeat.
    #[default]
    Sync,
    /// A sender and a receiver thread per session, independent.
    Async,
    /// Requests only; the server reads and discards.
    Nores,
}

impl Mode {
    /// Name as in the seed's CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sync => "sync",
            Mode::Async => "async",
            Mode::Nores => "nores",
        }
    }

    /// Parse a seed word.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "sync" => Some(Mode::Sync),
            "async" => Some(Mode::Async),
            "nores" => Some(Mode::Nores),
            _ => None,
        }
    }
}

/// What runs over a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// reqres_loop in the given mode.
    Reqres(Mode),
    /// data_channel_write: the server streams to the client.
    Stream,
}

impl Workload {
    /// Messages counted per session for `count` loops (a round trip is 2).
    pub fn messages_per_session(self, count: u64) -> u64 {
        match self {
            Workload::Reqres(Mode::Sync) | Workload::Reqres(Mode::Async) => 2 * count,
            Workload::Reqres(Mode::Nores) | Workload::Stream => count,
        }
    }

    /// Client threads per session.
    pub fn client_threads(self) -> u32 {
        match self {
            Workload::Reqres(Mode::Async) => 2,
            _ => 1,
        }
    }

    /// Name used in child arguments.
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Reqres(m) => m.as_str(),
            Workload::Stream => "stream",
        }
    }

    /// Parse a child-argument name.
    pub fn parse(s: &str) -> Option<Workload> {
        if s == "stream" {
            Some(Workload::Stream)
        } else {
            Mode::parse(s).map(Workload::Reqres)
        }
    }
}

/// One session's parameters.
#[derive(Debug, Clone, Copy)]
pub struct SessionSpec {
    /// Session index.
    pub session: u32,
    /// What runs.
    pub workload: Workload,
    /// Payload bytes per message.
    pub size: usize,
    /// Loops (round trips, requests or stream messages).
    pub count: u64,
    /// Checksum every payload.
    pub verify: bool,
    /// Record per-round-trip latency (sync only).
    pub latency: bool,
    /// Server flips a payload byte of this sequence number (tests).
    pub corrupt_at: Option<u64>,
    /// TSC ticks the server busy-waits per request before answering
    /// (a calibration aid; 0: none).
    pub extra_work_ticks: u64,
}

/// What a client end saw.
#[derive(Debug, Default)]
pub struct ClientOutcome {
    /// Messages received and checked by the client (echoes or stream).
    pub received: u64,
    /// Messages sent by the client.
    pub sent: u64,
    /// Payload bytes received.
    pub bytes: u64,
    /// Round-trip latencies in ns (sync with latency on).
    pub latency: Option<LatencyHistogram>,
    /// CPU seconds of helper threads (the `async` receiver).
    pub helper_cpu_s: f64,
}

fn closed(spec: &SessionSpec, done: u64) -> impl FnOnce(IpcError) -> IpcError {
    let (session, expected) = (spec.session, spec.count);
    move |e| match e {
        IpcError::Closed => IpcError::PeerClosed {
            session,
            done,
            expected,
        },
        e => e,
    }
}

#[inline]
fn check_abort(abort: &AtomicBool) -> Result<()> {
    if abort.load(Ordering::Relaxed) {
        Err(IpcError::Aborted)
    } else {
        Ok(())
    }
}

/// Server end of one session. `abort` is set when another session of the
/// run failed; every loop checks it once per message.
pub fn serve(ep: Endpoint, spec: &SessionSpec, abort: &AtomicBool) -> Result<u64> {
    let Endpoint { mut tx, mut rx } = ep;
    let mut buf = vec![0u8; spec.size];
    let mut done = 0u64;
    match spec.workload {
        Workload::Reqres(Mode::Nores) => {
            // The server reads and discards.
            let mut scratch = Vec::new();
            for seq in 0..spec.count {
                check_abort(abort)?;
                recv_discard(rx.as_mut(), &mut buf, &mut scratch, spec, seq, true)?;
                done += 1;
            }
        }
        Workload::Reqres(Mode::Sync | Mode::Async) => {
            for seq in 0..spec.count {
                check_abort(abort)?;
                let h = rx.recv(&mut buf).map_err(closed(spec, done))?;
                let payload = &mut buf[..h.len as usize];
                check_frame(spec.session, seq, spec.size, &h, payload, spec.verify)?;
                if spec.extra_work_ticks > 0 {
                    commbench_core::delay::tsc_delay_ticks(spec.extra_work_ticks);
                }
                if spec.corrupt_at == Some(seq) {
                    if let Some(b) = payload.last_mut() {
                        *b ^= 0x5a;
                    }
                }
                tx.send(&h, payload).map_err(closed(spec, done))?;
                done += 1;
            }
        }
        Workload::Stream => {
            fill_pattern(&mut buf, spec.session);
            for seq in 0..spec.count {
                check_abort(abort)?;
                stamp(&mut buf, seq);
                let h = header_for(&buf, seq, spec.verify);
                if spec.corrupt_at == Some(seq) {
                    if let Some(b) = buf.last_mut() {
                        *b ^= 0x5a;
                    }
                }
                tx.send(&h, &buf).map_err(closed(spec, done))?;
                done += 1;
            }
        }
    }
    Ok(done)
}

fn recv_checked(rx: &mut dyn MsgRx, buf: &mut [u8], spec: &SessionSpec, seq: u64) -> Result<()> {
    let h = rx.recv(buf).map_err(closed(spec, seq))?;
    check_frame(
        spec.session,
        seq,
        spec.size,
        &h,
        &buf[..h.len as usize],
        spec.verify,
    )
}

/// Receives message `seq` for a consumer that reads and discards: where
/// the transport lends it in place (shm) it is read there, without a
/// copy ([`check_lent`]). `work`: spend the server's extra work on it.
fn recv_discard(
    rx: &mut dyn MsgRx,
    buf: &mut [u8],
    scratch: &mut Vec<u8>,
    spec: &SessionSpec,
    seq: u64,
    work: bool,
) -> Result<()> {
    rx.recv_with(buf, &mut |h, lent| {
        check_lent(spec.session, seq, spec.size, h, lent, spec.verify, scratch)?;
        if work && spec.extra_work_ticks > 0 {
            commbench_core::delay::tsc_delay_ticks(spec.extra_work_ticks);
        }
        Ok(())
    })
    .map(|_| ())
    .map_err(closed(spec, seq))
}

fn send_loop(tx: &mut dyn MsgTx, spec: &SessionSpec, abort: &AtomicBool) -> Result<u64> {
    let mut buf = vec![0u8; spec.size];
    fill_pattern(&mut buf, spec.session);
    for seq in 0..spec.count {
        check_abort(abort)?;
        stamp(&mut buf, seq);
        let h = header_for(&buf, seq, spec.verify);
        tx.send(&h, &buf).map_err(closed(spec, seq))?;
    }
    Ok(spec.count)
}

/// Client end of one session. In `async` mode a receiver thread is spawned
/// next to the calling (sender) thread.
pub fn client(ep: Endpoint, spec: &SessionSpec, abort: &Arc<AtomicBool>) -> Result<ClientOutcome> {
    let Endpoint { mut tx, mut rx } = ep;
    let mut out = ClientOutcome::default();
    match spec.workload {
        Workload::Reqres(Mode::Sync) => {
            let mut sbuf = vec![0u8; spec.size];
            let mut rbuf = vec![0u8; spec.size];
            fill_pattern(&mut sbuf, spec.session);
            let mut hist = spec.latency.then(LatencyHistogram::new);
            let tsc = clock::tsc();
            for seq in 0..spec.count {
                check_abort(abort)?;
                stamp(&mut sbuf, seq);
                let h = header_for(&sbuf, seq, spec.verify);
                let t0 = clock::rdtsc();
                tx.send(&h, &sbuf).map_err(closed(spec, seq))?;
                recv_checked(rx.as_mut(), &mut rbuf, spec, seq)?;
                let t1 = clock::rdtsc();
                if let Some(hist) = hist.as_mut() {
                    hist.record_ns(tsc.ticks_to_ns(t1.wrapping_sub(t0)) as u64);
                }
            }
            out.sent = spec.count;
            out.received = spec.count;
            out.latency = hist;
        }
        Workload::Reqres(Mode::Async) => {
            let rspec = *spec;
            let rabort = abort.clone();
            let receiver = std::thread::Builder::new()
                .name(format!("ipc-rx-{}", spec.session))
                .spawn(move || -> (Result<u64>, f64) {
                    let mut rbuf = vec![0u8; rspec.size];
                    let mut r = Ok(rspec.count);
                    for seq in 0..rspec.count {
                        if let Err(e) = check_abort(&rabort)
                            .and_then(|_| recv_checked(rx.as_mut(), &mut rbuf, &rspec, seq))
                        {
                            r = Err(e);
                            break;
                        }
                    }
                    drop(rx);
                    (r, Usage::thread().cpu_s())
                })
                .map_err(|e| IpcError::io("spawn receiver thread", e))?;
            let sent = send_loop(tx.as_mut(), spec, abort);
            if sent.is_err() {
                drop(tx);
            }
            let (received, cpu) = receiver
                .join()
                .unwrap_or_else(|_| (Err(IpcError::Closed).map_err(closed(spec, 0)), 0.0));
            out.helper_cpu_s = cpu;
            // A receive error explains a send error (the server stopped).
            out.received = received?;
            out.sent = sent?;
        }
        Workload::Reqres(Mode::Nores) => {
            out.sent = send_loop(tx.as_mut(), spec, abort)?;
        }
        Workload::Stream => {
            // The client reads and discards.
            let mut rbuf = vec![0u8; spec.size];
            let mut scratch = Vec::new();
            for seq in 0..spec.count {
                check_abort(abort)?;
                recv_discard(rx.as_mut(), &mut rbuf, &mut scratch, spec, seq, false)?;
            }
            out.received = spec.count;
        }
    }
    out.bytes = out.received * spec.size as u64;
    Ok(out)
}
