//! epoll, level-triggered (one read per report: the kernel reports the
//! descriptor again while data is left) or edge-triggered (each report is
//! drained to EAGAIN, since no second report comes). The event's data
//! carries the state slot (`index`) or the descriptor (`scan`, found by a
//! linear search of the state array, the seed's `epoll_*_performance_2`).

use std::io;
use std::os::fd::AsRawFd;

use super::{accept_all, echo_ready, publish, Conns, Engine, Lookup, LoopCtx, LoopStats, Next};
use crate::net;
use commbench_core::sys::{self, Epoll};

const LISTENER: u64 = u64::MAX;
/// Events fetched per epoll_wait.
const BATCH: usize = 1024;

pub struct EpollEngine {
    edge: bool,
    ep: Epoll,
}

impl EpollEngine {
    pub fn new(edge: bool) -> io::Result<Self> {
        Ok(EpollEngine {
            edge,
            ep: Epoll::new()?,
        })
    }
}

impl Engine for EpollEngine {
    fn serve(&mut self, ctx: &LoopCtx<'_>) -> io::Result<LoopStats> {
        let mut stats = LoopStats::default();
        let mut conns = Conns {
            tls: ctx.tls.clone(),
            ..Conns::default()
        };
        let mut buf = vec![0u8; ctx.buf_size];
        let mut scratch = Vec::new();
        let mut events = sys::new_events(BATCH);
        let lfd = ctx.listener.as_raw_fd();
        let et = if self.edge { sys::ET } else { 0 };
        // Edge-triggered sockets stay registered for both directions (a
        // report comes only on a change); level-triggered ones ask for
        // writability only while echo bytes are pending.
        let base = if self.edge {
            sys::IN | sys::OUT
        } else {
            sys::IN
        };
        self.ep.add(lfd, LISTENER, sys::IN)?;
        let mut reserve = net::Reserve::new();
        let key = |slot: usize, fd: i32| match ctx.lookup {
            Lookup::Index => slot as u64,
            Lookup::Scan => fd as u64,
        };
        let result = (|| -> io::Result<()> {
            while !ctx.stop.load(std::sync::atomic::Ordering::Relaxed) {
                stats.waits += 1;
                stats.syscalls += 1;
                let ready = self.ep.wait(&mut events, super::WAIT_TIMEOUT_MS)?;
                stats.events += ready.len() as u64;
                for e in ready {
                    let tok = sys::event_token(e);
                    if tok == LISTENER {
                        let ep = &self.ep;
                        accept_all(lfd, ctx, &mut reserve, &mut stats, |fd, st| {
                            let slot = conns.insert(fd);
                            st.syscalls += 1;
                            if ep.add(fd, key(slot, fd), base | et).is_err() {
                                net::close(fd);
                                conns.remove(slot);
                                ctx.release(1);
                                st.closed += 1;
                            }
                        });
                        continue;
                    }
                    let slot = match ctx.lookup {
                        Lookup::Index => tok as usize,
                        Lookup::Scan => match conns.scan(tok as i32, &mut stats.scan_steps) {
                            Some(s) => s,
                            None => continue,
                        },
                    };
                    let fd = conns.slots[slot].fd;
                    if fd < 0 {
                        continue;
                    }
                    let had_pending = !conns.slots[slot].pending.is_empty();
                    match echo_ready(
                        &mut conns.slots[slot],
                        &mut buf,
                        &mut scratch,
                        ctx.protocol,
                        self.edge,
                        ctx.extra_work_ticks,
                        &mut stats,
                    ) {
                        Next::Read => {
                            if had_pending && !self.edge {
                                stats.syscalls += 1;
                                self.ep.modify(fd, key(slot, fd), sys::IN)?;
                            }
                        }
                        Next::Write => {
                            if !had_pending && !self.edge {
                                stats.syscalls += 1;
                                self.ep.modify(fd, key(slot, fd), sys::OUT)?;
                            }
                        }
                        Next::Close => {
                            // close() removes the descriptor from the epoll set.
                            net::close(fd);
                            stats.syscalls += 1;
                            stats.closed += 1;
                            conns.remove(slot);
                            ctx.release(1);
                        }
                    }
                }
                publish(ctx, &stats, conns.live);
            }
            Ok(())
        })();
        ctx.release(conns.close_all(&mut stats));
        publish(ctx, &stats, 0);
        result.map(|_| stats)
    }
}
