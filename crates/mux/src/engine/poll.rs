//! poll(2): the whole pollfd array goes to the kernel on every call and
//! comes back with `revents` set; the loop walks it from the start (the
//! seed's `poll_performance_2`). Position `i + 1` of the array is state
//! slot `i` (position 0 is the listener), so `index` lookup is free;
//! `scan` searches the state array for the descriptor instead.

use std::io;
use std::os::fd::AsRawFd;

use super::{accept_all, echo_ready, publish, Conns, Engine, Lookup, LoopCtx, LoopStats, Next};
use crate::net;
use commbench_core::sys;

pub struct PollEngine {
    pfds: Vec<libc::pollfd>,
}

impl PollEngine {
    pub fn new() -> Self {
        PollEngine { pfds: Vec::new() }
    }
}

impl Default for PollEngine {
    fn default() -> Self {
        Self::new()
    }
}

fn pfd(fd: i32, events: i16) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

impl Engine for PollEngine {
    fn serve(&mut self, ctx: &LoopCtx<'_>) -> io::Result<LoopStats> {
        let mut stats = LoopStats::default();
        let mut conns = Conns {
            tls: ctx.tls.clone(),
            ..Conns::default()
        };
        let mut buf = vec![0u8; ctx.buf_size];
        let mut scratch = Vec::new();
        let lfd = ctx.listener.as_raw_fd();
        self.pfds.clear();
        self.pfds.push(pfd(lfd, libc::POLLIN));
        let mut reserve = net::Reserve::new();
        let result = (|| -> io::Result<()> {
            while !ctx.stop.load(std::sync::atomic::Ordering::Relaxed) {
                stats.waits += 1;
                stats.syscalls += 1;
                let mut ready = sys::poll(&mut self.pfds, super::WAIT_TIMEOUT_MS)?;
                stats.events += ready as u64;
                if ready > 0 && self.pfds[0].revents != 0 {
                    ready -= 1;
                    let pfds = &mut self.pfds;
                    accept_all(lfd, ctx, &mut reserve, &mut stats, |fd, _| {
                        let slot = conns.insert(fd);
                        let p = pfd(fd, libc::POLLIN);
                        if slot + 1 < pfds.len() {
                            pfds[slot + 1] = p;
                        } else {
                            pfds.push(p);
                        }
                    });
                }
                let mut i = 1;
                while ready > 0 && i < self.pfds.len() {
                    let re = self.pfds[i].revents;
                    if re == 0 {
                        i += 1;
                        continue;
                    }
                    ready -= 1;
                    self.pfds[i].revents = 0;
                    let fd = self.pfds[i].fd;
                    let slot = match ctx.lookup {
                        Lookup::Index => i - 1,
                        Lookup::Scan => match conns.scan(fd, &mut stats.scan_steps) {
                            Some(s) => s,
                            None => {
                                i += 1;
                                continue;
                            }
                        },
                    };
                    match echo_ready(
                        &mut conns.slots[slot],
                        &mut buf,
                        &mut scratch,
                        ctx.protocol,
                        false,
                        ctx.extra_work_ticks,
                        &mut stats,
                    ) {
                        Next::Read => self.pfds[i].events = libc::POLLIN,
                        Next::Write => self.pfds[i].events = libc::POLLOUT,
                        Next::Close => {
                            net::close(fd);
                            stats.syscalls += 1;
                            stats.closed += 1;
                            conns.remove(slot);
                            ctx.release(1);
                            self.pfds[i] = pfd(-1, 0);
                        }
                    }
                    i += 1;
                }
                publish(ctx, &stats, conns.live);
            }
            Ok(())
        })();
        ctx.release(conns.close_all(&mut stats));
        stats.live = 0;
        publish(ctx, &stats, 0);
        result.map(|_| stats)
    }
}
