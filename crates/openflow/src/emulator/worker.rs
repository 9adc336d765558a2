//! The worker threads: each owns a share of the switches and one epoll
//! instance, connects its switches when their group is due, follows the
//! run driver's phases (run, pause, drain, stop), tops up probes, and
//! reads and writes with edge-triggered epoll, handing complete messages
//! to `protocol`.
//!
//! Invariants: every read and write stops at `IO_BUDGET` calls per switch
//! per turn and the switch is revisited (at most once per turn, `Revisit`),
//! so no switch starves the others; input is bounded by the switch's
//! buffer and unsent replies by `MAX_REPLY_BACKLOG` per switch and
//! `MAX_TOTAL_REPLY_BACKLOG` over the run; a connection that fails or sends
//! a malformed message is closed alone and reported; output ends on a
//! message boundary.

use super::switch::{SwState, Switch};
use super::{
    CbenchConfig, ClosedSwitch, Shared, SwitchError, Tally, WorkerResult, COUNTED_BACKLOG,
    MAX_KEPT_OUT, MAX_REPLY_BACKLOG, MAX_TOTAL_REPLY_BACKLOG, PH_DRAIN, PH_PAUSE, PH_RUN, PH_STOP,
};
use crate::sys::{self, Epoll};
use crate::wire::{frame_len, of10, of13, OFP10_VERSION, OFP13_VERSION};
use commbench_core::clock::now_ns;
use commbench_core::placement::CpuList;
use commbench_core::rusage::Usage;
use commbench_core::stats::LatencyHistogram;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

pub(super) struct Worker {
    pub(super) sh: Arc<Shared>,
    ep: Epoll,
    pub(super) sw: Vec<Switch>,
    pub(super) tally: Tally,
    pub(super) hist: LatencyHistogram,
    pub(super) throughput: bool,
    pub(super) outstanding: usize,
    mac_mod: u32,
    max_in_flight: u64,
    probes_on: bool,
    /// Switches whose read or write stopped at the per-call budget before
    /// EAGAIN: edge-triggered epoll will not report them again, so the
    /// loop revisits them (fairness between switches).
    again_read: Revisit,
    again_write: Revisit,
}

/// Switches to revisit on the next turn, each at most once. A plain list
/// grew without bound under load (80 reads and 688 writes queued for 16
/// switches): a switch read from both its epoll event and the list went in
/// twice, each of its 4 reads flushed and queued it again, and the
/// duplicates fed back, so a few switches took every turn while the others
/// starved — whole windows with 0 responses for some switches.
#[derive(Default)]
struct Revisit {
    list: Vec<usize>,
    queued: Vec<bool>,
}

impl Revisit {
    fn push(&mut self, k: usize) {
        if k >= self.queued.len() {
            self.queued.resize(k + 1, false);
        }
        if !self.queued[k] {
            self.queued[k] = true;
            self.list.push(k);
        }
    }

    /// The switches queued so far; pushes from now on start a new turn.
    fn take(&mut self) -> Vec<usize> {
        let v = std::mem::take(&mut self.list);
        for &k in &v {
            self.queued[k] = false;
        }
        v
    }

    fn len(&self) -> usize {
        self.list.len()
    }

    fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// Reads or writes per switch per turn before moving on to the others.
const IO_BUDGET: usize = 4;

pub(super) fn worker(sh: Arc<Shared>, id: usize, mine: Vec<usize>) -> WorkerResult {
    if let Some(c) = sh
        .cfg
        .cpus
        .as_deref()
        .and_then(|c| CpuList::parse_online(c).ok())
    {
        if let Err(e) = c.pin_current_thread() {
            sh.notice(format!("cbench: cannot pin generator thread: {e}"));
        }
    }
    let cpu0 = Usage::thread();
    let ep = Epoll::new().expect("epoll_create1");
    let cfg = sh.cfg.clone();
    let mut w = Worker {
        sh: sh.clone(),
        ep,
        sw: Vec::with_capacity(mine.len()),
        tally: Tally::default(),
        hist: LatencyHistogram::new(),
        throughput: cfg.throughput,
        outstanding: cfg.outstanding,
        mac_mod: cfg.mac_addresses,
        max_in_flight: if cfg.max_in_flight == 0 {
            u64::MAX
        } else {
            cfg.max_in_flight
        },
        probes_on: false,
        again_read: Revisit::default(),
        again_write: Revisit::default(),
    };
    let mut events = sys::new_events(1024);
    let mut pending: std::collections::VecDeque<usize> = mine.into_iter().collect();
    let mut seen_epoch = 0u64;
    let mut finished_connecting = false;
    loop {
        // Connect switches whose group is due.
        while let Some(&i) = pending.front() {
            let due = sh.start_ns
                + (i / cfg.connect_group_size) as u64 * cfg.connect_delay_ms * 1_000_000;
            if now_ns() < due {
                break;
            }
            pending.pop_front();
            w.connect(i, &cfg);
        }
        if pending.is_empty() && !finished_connecting {
            finished_connecting = true;
            sh.finished_connecting.fetch_add(1, Ordering::SeqCst);
        }
        let ep_now = sh.epoch.load(Ordering::SeqCst);
        if ep_now != seen_epoch {
            seen_epoch = ep_now;
            let used = Usage::thread().since(&cpu0).cpu_s();
            sh.worker_cpu_ns[id].store((used * 1e9) as u64, Ordering::SeqCst);
            match sh.phase.load(Ordering::SeqCst) {
                PH_RUN => {
                    w.probes_on = false;
                    for s in &mut w.sw {
                        s.window_count = 0;
                    }
                }
                PH_PAUSE => {
                    w.publish_counts();
                    if cfg.debug {
                        let blocked = w.sw.iter().filter(|s| s.blocked).count();
                        let tp: u64 = w.sw.iter().map(|s| s.tp_in_flight).sum();
                        let pend: usize = w.sw.iter().map(|s| s.pending_out()).sum();
                        let inl: usize = w.sw.iter().map(|s| s.in_len).sum();
                        sh.notice(format!(
                            "cbench debug: worker: blocked {blocked}, tp_in_flight {tp}, pending out {pend}, in_len {inl}, again r/w {}/{}, probes_on {}",
                            w.again_read.len(),
                            w.again_write.len(),
                            w.probes_on
                        ));
                    }
                }
                PH_DRAIN => w.drain(),
                PH_STOP => {
                    w.finish_writes();
                    sh.acks.fetch_add(1, Ordering::SeqCst);
                    break;
                }
                _ => {}
            }
            sh.acks.fetch_add(1, Ordering::SeqCst);
        }
        let phase = sh.phase.load(Ordering::SeqCst);
        if phase == PH_PAUSE || phase == PH_DRAIN {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        let now = now_ns();
        if phase == PH_RUN && !w.probes_on && now >= sh.probe_start_ns.load(Ordering::SeqCst) {
            w.probes_on = true;
            for k in 0..w.sw.len() {
                w.top_up(k, now);
                w.flush(k);
            }
        }
        let timeout = if !w.again_read.is_empty() || !w.again_write.is_empty() {
            0
        } else if !pending.is_empty() || (phase == PH_RUN && !w.probes_on) {
            1
        } else {
            5
        };
        let evs = match w.ep.wait(&mut events, timeout) {
            Ok(e) => e,
            Err(e) => {
                sh.notice(format!("cbench: epoll_wait failed: {e}"));
                break;
            }
        };
        for e in evs {
            let k = sys::event_token(e) as usize;
            let bits = sys::event_bits(e);
            if k >= w.sw.len() || w.sw[k].state == SwState::Closed {
                continue;
            }
            if bits & sys::OUT != 0 {
                w.sw[k].blocked = false;
                let now = now_ns();
                w.top_up(k, now);
                w.flush(k);
            }
            if bits & (sys::IN | sys::ERR) != 0 {
                w.read(k);
            }
        }
        let again = w.again_write.take();
        for k in again {
            w.flush(k);
        }
        let again = w.again_read.take();
        for k in again {
            w.read(k);
        }
        // Count publishing is cheap and keeps the window totals fresh.
        if phase == PH_RUN {
            w.publish_counts();
        }
    }
    w.publish_counts();
    let cpu = Usage::thread().since(&cpu0);
    WorkerResult {
        tally: w.tally,
        hist: w.hist,
        cpu,
    }
}

impl Worker {
    fn connect(&mut self, i: usize, cfg: &CbenchConfig) {
        let dpid = cfg.dpid_offset + i as u64;
        let stream = match TcpStream::connect_timeout(&self.sh.addr, Duration::from_secs(3)) {
            Ok(s) => s,
            Err(e) => {
                let msg = format!(
                    "cbench: switch {} (dpid {dpid:#x}) cannot connect to {}: {e}",
                    i + 1,
                    self.sh.addr
                );
                self.sh.connect_errors.lock().unwrap().push(msg.clone());
                self.sh.notice(msg);
                return;
            }
        };
        let _ = sys::set_nodelay(stream.as_raw_fd(), cfg.nodelay_on());
        // cbench sets no socket buffer size (`--sndbuf 0`); by default a
        // 64 KiB one bounds the probes queued in the kernel, so that the
        // buffer_id sequence (wrapping at 100000) stays unambiguous.
        if cfg.sndbuf > 0 {
            let _ = sys::set_sndbuf(stream.as_raw_fd(), cfg.sndbuf as i32);
        }
        // Checked by `run_with` on a probe socket before any switch
        // connects; every switch gets the same.
        let _ = sys::apply_congestion(stream.as_raw_fd(), &cfg.tcp_congestion);
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let k = self.sw.len();
        if let Err(e) = self.ep.add(
            stream.as_raw_fd(),
            k as u64,
            sys::IN | sys::OUT | sys::ET | sys::ERR,
        ) {
            self.sh.notice(format!("cbench: epoll_ctl: {e}"));
            return;
        }
        let mut s = Switch::new(i, dpid, stream, cfg);
        // HELLO, xid 1 (1.3: with a version bitmap offering only 1.3).
        if cfg.of13 {
            of13::Repr::new(
                1,
                of13::Message::Hello(vec![of13::HelloElement::VersionBitmap(vec![
                    1 << OFP13_VERSION,
                ])]),
            )
            .emit(&mut s.out);
        } else {
            of10::Repr::new(1, of10::Message::Hello(vec![])).emit(&mut s.out);
        }
        self.sw.push(s);
        self.sh.connected.fetch_add(1, Ordering::SeqCst);
        self.flush(k);
    }

    /// End every connection at a message boundary: the output buffer only
    /// ever holds whole messages, so writing what is left (bounded by a
    /// short timeout) means the controller never sees a torn message.
    fn finish_writes(&mut self) {
        for s in &mut self.sw {
            if s.state == SwState::Closed || s.pending_out() == 0 {
                continue;
            }
            let _ = s.stream.set_nonblocking(false);
            let _ = s.stream.set_write_timeout(Some(Duration::from_millis(200)));
            let (a, b) = s.probe_slices();
            let mut w = &s.stream;
            let _ = w.write_all(a).and_then(|_| w.write_all(b));
            let _ = s.stream.write_all(&s.out[s.out_pos..]);
            s.pb_pos = 0;
            s.pb_len = 0;
            s.out_pos = s.out.len();
        }
    }

    fn publish_counts(&mut self) {
        for s in &mut self.sw {
            if s.window_count != 0 {
                self.sh.counts[s.idx].fetch_add(s.window_count, Ordering::Relaxed);
                s.window_count = 0;
            }
        }
    }

    /// cbench's get_count: read and discard pending input message by
    /// message (framing is kept: a partial message stays buffered), and
    /// forget probes in flight so latency mode restarts with a fresh probe.
    fn drain(&mut self) {
        for k in 0..self.sw.len() {
            let s = &mut self.sw[k];
            if s.state == SwState::Closed {
                continue;
            }
            s.in_flight = 0;
            s.tp_in_flight = 0;
            // Discard what is pending now (FIONREAD), not what the
            // controller keeps producing from its backlog meanwhile.
            let mut left = sys::readable_bytes(s.stream.as_raw_fd());
            while left > 0 {
                let s = &mut self.sw[k];
                let end = (s.in_len + left).min(s.inbuf.len());
                match s.stream.read(&mut s.inbuf[s.in_len..end]) {
                    Ok(0) => {
                        self.close(k, "connection closed by controller".into());
                        break;
                    }
                    Ok(n) => {
                        left = left.saturating_sub(n);
                        self.tally.bytes_in += n as u64;
                        s.in_len += n;
                        let mut off = 0;
                        loop {
                            match frame_len(&s.inbuf[off..s.in_len]) {
                                Ok(Some(m)) => off += m,
                                Ok(None) => break,
                                Err(e) => {
                                    let why = format!("malformed message from controller: {e}");
                                    self.close(k, why);
                                    break;
                                }
                            }
                        }
                        let s = &mut self.sw[k];
                        if s.state == SwState::Closed {
                            break;
                        }
                        s.inbuf.copy_within(off..s.in_len, 0);
                        s.in_len -= off;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        self.close(k, io_close_reason("read", &e));
                        break;
                    }
                }
            }
        }
    }

    fn close(&mut self, k: usize, reason: String) {
        let s = &mut self.sw[k];
        if s.state == SwState::Closed {
            return;
        }
        let was_ready = s.state == SwState::Ready;
        s.state = SwState::Closed;
        let _ = self.ep.delete(s.stream.as_raw_fd());
        let _ = s.stream.shutdown(std::net::Shutdown::Both);
        let msg = format!(
            "cbench: switch {} (dpid {:#x}): {reason}; the other switches go on",
            s.idx + 1,
            s.dpid
        );
        self.sh.notice(msg.clone());
        self.sh.closed.lock().unwrap().push(ClosedSwitch {
            switch: s.idx + 1,
            dpid: s.dpid,
            reason,
        });
        if !was_ready {
            // Let the handshake wait finish without this switch.
            self.sh.connected.fetch_sub(1, Ordering::SeqCst);
        }
        self.sh
            .reply_backlog
            .fetch_sub(s.counted, Ordering::Relaxed);
        s.counted = 0;
        // A closed switch keeps no reply memory.
        s.out = Vec::new();
        s.out_pos = 0;
        s.pb_pos = 0;
        s.pb_len = 0;
    }

    /// Queue probes: throughput mode fills the 64 KiB buffer, latency mode
    /// keeps `outstanding` probes in flight.
    #[inline]
    pub(super) fn top_up(&mut self, k: usize, now: u64) {
        if !self.probes_on {
            return;
        }
        let mac_mod = self.mac_mod;
        let s = &mut self.sw[k];
        if s.state != SwState::Ready {
            return;
        }
        if self.throughput {
            // No probes while replies wait (they go first, see `flush`):
            // the ring tops up behind its unsent probes, which are never
            // moved or copied per probe.
            if s.out_pos < s.out.len() {
                return;
            }
            let room = self.max_in_flight.saturating_sub(s.tp_in_flight);
            let n = s.top_up_ring(mac_mod, room);
            s.tp_in_flight += n;
            self.tally.probes_sent += n;
        } else {
            while s.in_flight < self.outstanding {
                s.push_probe(mac_mod, now);
                s.in_flight += 1;
                self.tally.probes_sent += 1;
            }
        }
    }

    /// Write until EAGAIN or empty; throughput mode tops the probes up to
    /// 64 KiB before every write, so the rest of a short write and fresh
    /// probes leave in one call, as cbench writes once per switch per poll
    /// turn. The probes are always written up to their end before `out`
    /// (both end on message boundaries), and `out` before they are
    /// topped up again.
    pub(super) fn flush(&mut self, k: usize) {
        let mut budget = IO_BUDGET;
        loop {
            if budget == 0 {
                self.again_write.push(k);
                return;
            }
            budget -= 1;
            let s = &mut self.sw[k];
            if s.state == SwState::Closed || s.blocked {
                return;
            }
            if s.out_pos >= s.out.len() {
                if s.counted > 0 {
                    self.sh
                        .reply_backlog
                        .fetch_sub(s.counted, Ordering::Relaxed);
                    s.counted = 0;
                }
                if s.out.capacity() > MAX_KEPT_OUT {
                    s.out = Vec::new();
                } else {
                    s.out.clear();
                }
                s.out_pos = 0;
                if self.throughput && self.probes_on && s.state == SwState::Ready {
                    self.top_up(k, 0);
                }
            }
            let s = &mut self.sw[k];
            let from_block = s.pb_len > 0;
            let (r, want) = if from_block {
                let (a, b) = s.probe_slices();
                let want = a.len() + b.len();
                let r = if b.is_empty() {
                    (&s.stream).write(a)
                } else {
                    (&s.stream).write_vectored(&[io::IoSlice::new(a), io::IoSlice::new(b)])
                };
                (r, want)
            } else if s.out_pos < s.out.len() {
                (s.stream.write(&s.out[s.out_pos..]), s.out.len() - s.out_pos)
            } else {
                return;
            };
            match r {
                Ok(0) => {
                    self.close(k, "write returned 0".into());
                    return;
                }
                Ok(n) => {
                    let s = &mut self.sw[k];
                    if from_block {
                        s.probes_sent(n);
                    } else {
                        s.out_pos += n;
                    }
                    self.tally.bytes_out += n as u64;
                    if n < want {
                        // A short write on a non-blocking TCP socket means
                        // its send buffer is full, and the kernel has noted
                        // a writer waiting (SOCK_NOSPACE): EPOLLOUT comes
                        // when room frees. Writing again now would only
                        // return EAGAIN, one wasted system call per short
                        // write: half of all writes in throughput mode.
                        s.blocked = true;
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.sw[k].blocked = true;
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.close(k, io_close_reason("write", &e));
                    return;
                }
            }
        }
    }

    /// Read until EAGAIN (edge-triggered), handling messages as they come.
    fn read(&mut self, k: usize) {
        for _ in 0..IO_BUDGET {
            let s = &mut self.sw[k];
            if s.state == SwState::Closed {
                return;
            }
            let room = s.inbuf.len() - s.in_len;
            match s.stream.read(&mut s.inbuf[s.in_len..]) {
                Ok(0) => {
                    let why = if s.in_len > 0 {
                        format!(
                            "connection closed by controller in the middle of a message ({} bytes pending)",
                            s.in_len
                        )
                    } else {
                        "connection closed by controller".into()
                    };
                    self.close(k, why);
                    return;
                }
                Ok(n) => {
                    s.in_len += n;
                    self.tally.bytes_in += n as u64;
                    if let Err(e) = self.process(k) {
                        self.close(k, e.to_string());
                        return;
                    }
                    self.flush(k);
                    if n < room {
                        // The receive queue was empty when this read
                        // returned: data arriving later raises a new
                        // edge-triggered EPOLLIN, so reading again now
                        // would only return EAGAIN.
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.close(k, io_close_reason("read", &e));
                    return;
                }
            }
        }
        self.again_read.push(k);
    }

    /// Handle every complete message in the input buffer.
    fn process(&mut self, k: usize) -> Result<(), SwitchError> {
        let now = now_ns();
        let mut off = 0;
        let kept = self.sh.kept.load(Ordering::Relaxed);
        let in_len = self.sw[k].in_len;
        let mut inbuf = std::mem::take(&mut self.sw[k].inbuf);
        if self.throughput && self.sw[k].version == OFP10_VERSION {
            off = self.flow_mod_run(k, &inbuf[..in_len]);
        }
        let res = (|| {
            while off < in_len {
                let n = match frame_len(&inbuf[off..in_len]) {
                    Ok(Some(n)) => n,
                    Ok(None) => break,
                    Err(e) => return Err(SwitchError::Framing(e)),
                };
                let msg = &inbuf[off..off + n];
                off += n;
                self.handle(k, msg, now, kept)?;
                let s = &mut self.sw[k];
                let backlog = s.out.len() - s.out_pos;
                if backlog > MAX_REPLY_BACKLOG {
                    return Err(SwitchError::Backlog { backlog });
                }
                if backlog > COUNTED_BACKLOG || s.counted > 0 {
                    let now_counted = backlog.saturating_sub(COUNTED_BACKLOG);
                    let total = if now_counted >= s.counted {
                        let d = now_counted - s.counted;
                        self.sh.reply_backlog.fetch_add(d, Ordering::Relaxed) + d
                    } else {
                        let d = s.counted - now_counted;
                        self.sh.reply_backlog.fetch_sub(d, Ordering::Relaxed) - d
                    };
                    s.counted = now_counted;
                    self.sh
                        .reply_backlog_peak
                        .fetch_max(total, Ordering::Relaxed);
                    if total > MAX_TOTAL_REPLY_BACKLOG {
                        return Err(SwitchError::TotalBacklog { backlog, total });
                    }
                }
            }
            Ok(())
        })();
        if off > 0 && off < in_len {
            inbuf.copy_within(off..in_len, 0);
        }
        let s = &mut self.sw[k];
        s.inbuf = inbuf;
        s.in_len = in_len - off.min(in_len);
        res
    }
}

/// Why a switch's connection ended, from a read or write error. A reset
/// or broken pipe is the controller closing (with our data still unread,
/// so its kernel answered with RST): say so plainly.
fn io_close_reason(op: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionAborted => {
            format!("connection closed by controller ({op}: {e})")
        }
        _ => format!("{op} error: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisit_lists_hold_each_switch_once() {
        // Regression: a switch pushed from several paths in one turn went in
        // the list once per push, and the duplicates multiplied turn by turn.
        let mut r = Revisit::default();
        for _ in 0..4 {
            r.push(3);
            r.push(0);
            r.push(3);
        }
        assert_eq!(r.len(), 2);
        assert_eq!(r.take(), vec![3, 0]);
        assert!(r.is_empty());
        // Taken switches can be queued again for the next turn.
        r.push(3);
        r.push(3);
        assert_eq!(r.take(), vec![3]);
    }

    #[test]
    fn a_reset_reads_as_the_controller_closing() {
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(io_close_reason("read", &reset).starts_with("connection closed by controller"));
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(io_close_reason("write", &pipe).contains("closed by controller"));
        let other = std::io::Error::from(std::io::ErrorKind::InvalidInput);
        assert!(io_close_reason("read", &other).starts_with("read error"));
    }
}
