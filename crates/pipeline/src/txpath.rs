//! Transmit paths behind one trait, beside the receive side's
//! [`crate::netns::RxPath`]: an AF_PACKET socket (`sendmmsg`), a
//! PACKET_TX_RING, an AF_XDP socket in copy mode. The tester's generator,
//! the forwarders (the tester's l2fwd and the netns lab's) and the
//! `pipeline io` roles all send through [`TxPath`] and the one send loop,
//! [`send_all`], so they share one retry policy.
//!
//! # The retry policy
//!
//! A path that takes no frame (its queue is full) is asked again, yielding
//! the CPU in between, for as long as it took some frame within the last
//! [`TX_STALL`]. After [`TX_STALL`] without one, or once Ctrl-C was
//! pressed, the send fails with `TimedOut`, naming the link's state (down,
//! no carrier, gone). A sender never drops a frame it was given: a frame
//! that cannot be sent is an error, not a loss, so every loss a trial
//! counts happened after the transmit path took the frame.

use crate::afpacket::{PacketSocket, TxRing};
use crate::afxdp::XdpTx;
use crate::netns::{interrupted, TxMethod};
use std::io;
use std::time::{Duration, Instant};

/// How long a transmit path may take no frame at all (the kernel takes
/// none, or an AF_XDP socket's frames never complete, as on a link that
/// went down) before a send gives up with an error.
pub const TX_STALL: Duration = Duration::from_secs(2);

/// Most frames [`send_staged`] hands to a path in one call (sendmmsg's
/// batch, referenced from the stack).
pub const BATCH: usize = 64;

/// One way of handing frames to the kernel.
pub trait TxPath: Send {
    /// Hands the first frames of `frames` to the kernel; returns how many
    /// it took (0: its queue is full now).
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize>;

    /// Waits up to `timeout` for the frames handed over to go out; returns
    /// how many of all the frames it took never did (rejected by the
    /// kernel, never completed).
    fn finish(&mut self, timeout: Duration) -> u64;

    /// What `n` frames that [`TxPath::finish`] found unsent were, in words.
    fn unsent(&self, n: u64) -> String;
}

impl TxPath for PacketSocket {
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        PacketSocket::send_batch(self, frames)
    }
    /// `sendmmsg` returns once the kernel has the frames.
    fn finish(&mut self, _timeout: Duration) -> u64 {
        0
    }
    fn unsent(&self, n: u64) -> String {
        format!("{n} frame(s) were not sent")
    }
}

impl TxPath for TxRing {
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        TxRing::send_batch(self, frames)
    }
    fn finish(&mut self, timeout: Duration) -> u64 {
        self.drain(timeout)
    }
    fn unsent(&self, n: u64) -> String {
        format!("the kernel rejected {n} frame(s) of the tx ring")
    }
}

impl TxPath for XdpTx {
    /// Copies the frames into free UMEM slots and posts them.
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        Ok(self.post_with(frames.len() as u32, |i, buf| {
            let f = frames[i];
            let l = f.len().min(buf.len());
            buf[..l].copy_from_slice(&f[..l]);
            l
        }) as usize)
    }
    fn finish(&mut self, timeout: Duration) -> u64 {
        XdpTx::finish(self, timeout);
        u64::from(self.in_flight())
    }
    fn unsent(&self, n: u64) -> String {
        format!("{n} AF_XDP frame(s) never completed")
    }
}

/// Opens `method` on `iface`. AF_XDP gets `slots` UMEM slots (frames in
/// flight at most), each first holding `template`; a socket asks for
/// PACKET_QDISC_BYPASS (where the kernel refuses, frames take the qdisc).
pub fn open(
    iface: &str,
    method: TxMethod,
    template: &[u8],
    slots: usize,
) -> io::Result<Box<dyn TxPath>> {
    Ok(match method {
        TxMethod::Sendmmsg => Box::new(open_socket(iface)?),
        TxMethod::TxRing => Box::new(TxRing::open(iface, 1024)?),
        TxMethod::AfXdp => {
            let fs: Vec<Vec<u8>> = (0..slots.max(1)).map(|_| template.to_vec()).collect();
            Box::new(XdpTx::open(iface, &fs)?)
        }
    })
}

/// An AF_PACKET socket for sending on `iface`, bypassing the qdisc where
/// the kernel allows it.
pub fn open_socket(iface: &str) -> io::Result<PacketSocket> {
    let s = PacketSocket::open(iface, false)?;
    let _ = s.qdisc_bypass();
    Ok(s)
}

/// Sends every frame of `frames` on `tx`, by the retry policy of this
/// module (see the module documentation): a full queue is retried while
/// the path makes progress; [`TX_STALL`] without any, or Ctrl-C, is an
/// error naming the state of `iface`.
pub fn send_all<T: TxPath + ?Sized>(tx: &mut T, iface: &str, frames: &[&[u8]]) -> io::Result<()> {
    let mut off = 0;
    let mut progress = Instant::now();
    while off < frames.len() {
        let k = tx.send_batch(&frames[off..])?;
        if k > 0 {
            off += k;
            progress = Instant::now();
            continue;
        }
        if progress.elapsed() > TX_STALL || interrupted() {
            return Err(stalled(iface));
        }
        std::thread::yield_now();
    }
    Ok(())
}

/// [`send_all`] of frames staged in fixed buffers (`lens[i]` bytes of
/// `stage[i]`), [`BATCH`] at a time, referenced from the stack: no
/// allocation per burst.
pub fn send_staged<T: TxPath + ?Sized>(
    tx: &mut T,
    iface: &str,
    stage: &[[u8; 2048]],
    lens: &[usize],
) -> io::Result<()> {
    for (st, ls) in stage.chunks(BATCH).zip(lens.chunks(BATCH)) {
        let mut refs: [&[u8]; BATCH] = [&[]; BATCH];
        for ((r, b), &l) in refs.iter_mut().zip(st).zip(ls) {
            *r = &b[..l];
        }
        send_all(tx, iface, &refs[..ls.len()])?;
    }
    Ok(())
}

/// The error of a send that made no progress for [`TX_STALL`].
fn stalled(iface: &str) -> io::Error {
    let why = match crate::afpacket::check_link_up(iface) {
        Err(e) => e.to_string(),
        Ok(()) => "the link reports up".to_string(),
    };
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "no frame could be sent on '{iface}' for {} s: {why}",
            TX_STALL.as_secs()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that takes at most `room` frames per call and records them.
    struct Fake {
        room: usize,
        took: Vec<Vec<u8>>,
        calls: usize,
    }

    impl TxPath for Fake {
        fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
            self.calls += 1;
            let n = frames.len().min(self.room);
            self.took.extend(frames[..n].iter().map(|f| f.to_vec()));
            Ok(n)
        }
        fn finish(&mut self, _timeout: Duration) -> u64 {
            0
        }
        fn unsent(&self, n: u64) -> String {
            format!("{n}")
        }
    }

    #[test]
    fn send_all_sends_every_frame_in_order_however_few_the_path_takes_at_once() {
        let frames: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 3]).collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let mut t = Fake {
            room: 3,
            took: Vec::new(),
            calls: 0,
        };
        send_all(&mut t, "lo", &refs).unwrap();
        assert_eq!(t.took, frames);
        assert_eq!(t.calls, 4);
    }

    #[test]
    fn staged_frames_go_in_batches_of_at_most_64_with_their_lengths() {
        let mut stage = vec![[0u8; 2048]; 100];
        let lens: Vec<usize> = (0..100).map(|i| 60 + i).collect();
        for (i, b) in stage.iter_mut().enumerate() {
            b[0] = i as u8;
        }
        let mut t = Fake {
            room: usize::MAX,
            took: Vec::new(),
            calls: 0,
        };
        send_staged(&mut t, "lo", &stage, &lens).unwrap();
        assert_eq!(t.calls, 2, "64 + 36");
        assert_eq!(t.took.len(), 100);
        for (i, f) in t.took.iter().enumerate() {
            assert_eq!((f[0], f.len()), (i as u8, 60 + i));
        }
    }
}
