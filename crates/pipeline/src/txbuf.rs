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
