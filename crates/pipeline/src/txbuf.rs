//! The tx buffer, as `rte_eth_tx_buffer` does it: packets collect until
//! `bulk` of them are waiting, then go out in one burst; a packet never
//! waits longer than the drain timeout, because the loop calls
//! [`TxBuffer::drain_if_due`] (l2fwd checks `BURST_TX_DRAIN_US` = 100 µs
//! each iteration). The seed's TxBuffer study is the sweep over `bulk`.
//!
//! Times are TSC ticks handed in by the caller (the loop already read the
//! clock for its section timer), so the buffer itself never reads a clock
//! and its behaviour is testable with made-up times.

use crate::mbuf::Mbuf;

/// Buffers packets for one tx queue.
pub struct TxBuffer {
    pkts: Vec<Box<Mbuf>>,
    bulk: usize,
    /// When the oldest buffered packet arrived.
    oldest: u64,
    /// Flushes because `bulk` packets were waiting.
    pub flushes_bulk: u64,
    /// Flushes because the oldest packet waited the drain timeout.
    pub flushes_drain: u64,
    /// Final flushes at the end of the run.
    pub flushes_final: u64,
}

impl TxBuffer {
    /// A buffer that flushes at `bulk` packets (at least 1).
    pub fn new(bulk: usize) -> Self {
        let bulk = bulk.max(1);
        TxBuffer {
            pkts: Vec::with_capacity(bulk),
            bulk,
            oldest: 0,
            flushes_bulk: 0,
            flushes_drain: 0,
            flushes_final: 0,
        }
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Adds a packet at time `now`; sends the burst through `send` when it
    /// reaches `bulk`. `send` must take every packet out of the vector.
    #[inline(always)]
    pub fn buffer<F: FnMut(&mut Vec<Box<Mbuf>>)>(&mut self, m: Box<Mbuf>, now: u64, send: &mut F) {
        if self.pkts.is_empty() {
            self.oldest = now;
        }
        self.pkts.push(m);
        if self.pkts.len() >= self.bulk {
            self.flushes_bulk += 1;
            send(&mut self.pkts);
            debug_assert!(self.pkts.is_empty());
        }
    }

    /// Flushes when the oldest packet has waited `drain_ticks` by `now`;
    /// returns whether it did.
    /// Buffers every packet of `from` (all on this buffer's queue), in
    /// order, as [`TxBuffer::buffer`] one by one would, flushing at each
    /// bulk; moved in runs (one copy of the pointers per run, not a push
    /// per packet: the run-to-completion loop on one queue spent ~1 tick
    /// per packet in the pushes).
    #[inline(always)]
    pub fn buffer_all<F: FnMut(&mut Vec<Box<Mbuf>>)>(
        &mut self,
        from: &mut Vec<Box<Mbuf>>,
        now: u64,
        send: &mut F,
    ) {
        while !from.is_empty() {
            if self.pkts.is_empty() {
                self.oldest = now;
            }
            let take = (self.bulk - self.pkts.len()).min(from.len());
            self.pkts.extend(from.drain(..take));
            if self.pkts.len() >= self.bulk {
                self.flushes_bulk += 1;
                send(&mut self.pkts);
                debug_assert!(self.pkts.is_empty());
            }
        }
    }

    #[inline(always)]
    pub fn drain_if_due<F: FnMut(&mut Vec<Box<Mbuf>>)>(
        &mut self,
        now: u64,
        drain_ticks: u64,
        send: &mut F,
    ) -> bool {
        if !self.pkts.is_empty() && now.wrapping_sub(self.oldest) >= drain_ticks {
            self.flushes_drain += 1;
            send(&mut self.pkts);
            debug_assert!(self.pkts.is_empty());
            true
        } else {
            false
        }
    }

    /// Sends whatever is waiting (end of run).
    pub fn flush<F: FnMut(&mut Vec<Box<Mbuf>>)>(&mut self, send: &mut F) {
        if !self.pkts.is_empty() {
            self.flushes_final += 1;
            send(&mut self.pkts);
            debug_assert!(self.pkts.is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mbuf::Pool;

    #[test]
    fn flushes_at_bulk() {
        let mut pool = Pool::new(10);
        let mut tx = TxBuffer::new(4);
        let mut sent: Vec<usize> = Vec::new();
        let mut back: Vec<Box<Mbuf>> = Vec::new();
        let mut send = |v: &mut Vec<Box<Mbuf>>| {
            sent.push(v.len());
            back.append(v);
        };
        for i in 0..9 {
            tx.buffer(pool.get().unwrap(), i, &mut send);
        }
        assert_eq!(tx.len(), 1);
        tx.flush(&mut send);
        assert_eq!(sent, vec![4, 4, 1]);
        assert_eq!(back.len(), 9);
        assert_eq!(
            (tx.flushes_bulk, tx.flushes_drain, tx.flushes_final),
            (2, 0, 1)
        );
    }

    #[test]
    fn buffering_a_burst_at_once_flushes_as_one_by_one() {
        for (bulk, bursts) in [
            (4, vec![9]),
            (32, vec![32, 32, 5]),
            (3, vec![2, 2, 2, 7]),
            (1, vec![3]),
        ] {
            let mut pool = Pool::new(64);
            let (mut one, mut all) = (TxBuffer::new(bulk), TxBuffer::new(bulk));
            let (mut sent_one, mut sent_all) = (Vec::new(), Vec::new());
            let mut back: Vec<Box<Mbuf>> = Vec::new();
            let mut tag = 0u32;
            for (t, &n) in bursts.iter().enumerate() {
                let mut burst = Vec::new();
                for _ in 0..n {
                    let mut m = pool.get().unwrap();
                    m.rss = tag;
                    tag += 1;
                    burst.push(m);
                }
                let mut copy: Vec<Box<Mbuf>> = Vec::new();
                for m in &burst {
                    let mut c = pool.get().unwrap();
                    c.rss = m.rss;
                    copy.push(c);
                }
                for m in copy {
                    one.buffer(m, t as u64, &mut |v: &mut Vec<Box<Mbuf>>| {
                        sent_one.push(v.iter().map(|m| m.rss).collect::<Vec<_>>());
                        back.append(v);
                    });
                }
                all.buffer_all(&mut burst, t as u64, &mut |v: &mut Vec<Box<Mbuf>>| {
                    sent_all.push(v.iter().map(|m| m.rss).collect::<Vec<_>>());
                    back.append(v);
                });
                assert!(burst.is_empty());
                pool.put_bulk(&mut back);
                assert_eq!(one.oldest, all.oldest, "bulk {bulk}, burst {t}");
            }
            assert_eq!(sent_one, sent_all, "bulk {bulk}");
            assert_eq!(one.len(), all.len());
            assert_eq!(one.flushes_bulk, all.flushes_bulk);
        }
    }

    #[test]
    fn flushes_on_drain_timeout_only_when_due() {
        let mut pool = Pool::new(10);
        let mut tx = TxBuffer::new(32);
        let mut sent: Vec<usize> = Vec::new();
        let mut back: Vec<Box<Mbuf>> = Vec::new();
        let mut send = |v: &mut Vec<Box<Mbuf>>| {
            sent.push(v.len());
            back.append(v);
        };
        // Nothing buffered: nothing to drain however late.
        assert!(!tx.drain_if_due(1_000_000, 100, &mut send));
        tx.buffer(pool.get().unwrap(), 1000, &mut send);
        tx.buffer(pool.get().unwrap(), 1050, &mut send);
        tx.buffer(pool.get().unwrap(), 1090, &mut send);
        // The oldest arrived at 1000: not due at 1099, due at 1100.
        assert!(!tx.drain_if_due(1099, 100, &mut send));
        assert!(tx.drain_if_due(1100, 100, &mut send));
        assert!(tx.is_empty());
        // The clock restarts with the next packet.
        tx.buffer(pool.get().unwrap(), 5000, &mut send);
        assert!(!tx.drain_if_due(5099, 100, &mut send));
        assert!(tx.drain_if_due(5100, 100, &mut send));
        assert_eq!(sent, vec![3, 1]);
        assert_eq!(back.len(), 4);
        assert_eq!((tx.flushes_bulk, tx.flushes_drain), (0, 2));
    }
}
