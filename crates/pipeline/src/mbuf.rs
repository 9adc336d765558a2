//! Packet buffers and their pool, in the manner of DPDK's `rte_mbuf` and
//! `rte_mempool`: every buffer is allocated once, before the run, and
//! travels between stages as an owned `Box` (a pointer move through the
//! rings, never a copy and never an allocation). A buffer is back in the
//! pool once the sink has "transmitted" it or a stage dropped it, so the
//! pool's size bounds the packets in flight.
//!
//! The pool is a LIFO stack like a mempool's per-core cache: the buffer
//! freed last is handed out next, while its cache lines are still warm.

/// Bytes of packet data per buffer (DPDK's default data room is 2048 B
/// after headroom); frames up to 1518 B with FCS fit.
pub const MBUF_DATA: usize = 2048;

/// One packet buffer.
pub struct Mbuf {
    /// Frame length in `data` (without FCS).
    pub len: u16,
    /// Receive queue the RSS indirection table chose.
    pub queue: u16,
    /// The RSS hash, as a NIC writes it into the rx descriptor.
    pub rss: u32,
    pub data: [u8; MBUF_DATA],
}

impl Mbuf {
    /// The frame bytes.
    #[inline(always)]
    pub fn frame(&self) -> &[u8] {
        &self.data[..usize::from(self.len)]
    }
    /// The frame bytes, writable.
    #[inline(always)]
    pub fn frame_mut(&mut self) -> &mut [u8] {
        &mut self.data[..usize::from(self.len)]
    }
}

/// A fixed set of buffers.
pub struct Pool {
    free: Vec<Box<Mbuf>>,
    size: usize,
}

impl Pool {
    /// Allocates `size` zeroed buffers up front.
    pub fn new(size: usize) -> Self {
        let mut free = Vec::with_capacity(size);
        for _ in 0..size {
            free.push(Box::new(Mbuf {
                len: 0,
                queue: 0,
                rss: 0,
                data: [0u8; MBUF_DATA],
            }));
        }
        Pool { free, size }
    }

    /// A free buffer, if any is left.
    #[inline(always)]
    pub fn get(&mut self) -> Option<Box<Mbuf>> {
        self.free.pop()
    }

    /// Returns a buffer. The free list was sized for every buffer, so this
    /// never allocates.
    #[inline(always)]
    pub fn put(&mut self, m: Box<Mbuf>) {
        debug_assert!(self.free.len() < self.size);
        self.free.push(m);
    }

    /// Moves up to `n` free buffers to the end of `into` (one copy of
    /// pointers, as `rte_mempool_get_bulk`); returns how many.
    #[inline(always)]
    pub fn get_bulk(&mut self, n: usize, into: &mut Vec<Box<Mbuf>>) -> usize {
        let k = n.min(self.free.len());
        let from = self.free.len() - k;
        into.extend(self.free.drain(from..));
        k
    }

    /// Returns every buffer of `from` (emptying it).
    #[inline(always)]
    pub fn put_bulk(&mut self, from: &mut Vec<Box<Mbuf>>) {
        debug_assert!(self.free.len() + from.len() <= self.size);
        self.free.append(from);
    }

    /// Free buffers.
    #[inline(always)]
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Buffers this pool owns (free or in flight).
    pub fn size(&self) -> usize {
        self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_recycles_the_same_buffers() {
        let mut p = Pool::new(2);
        let a = p.get().unwrap();
        let pa: *const Mbuf = &*a;
        let b = p.get().unwrap();
        assert!(p.get().is_none());
        assert_eq!(p.available(), 0);
        p.put(b);
        p.put(a);
        assert_eq!(p.available(), 2);
        // LIFO: the last one returned comes out first, same allocation.
        let again = p.get().unwrap();
        assert_eq!(&*again as *const Mbuf, pa);
        assert_eq!(p.size(), 2);
        // Bulk: as many as are free, then all back.
        let mut v = vec![again];
        assert_eq!(p.get_bulk(5, &mut v), 1);
        assert_eq!(v.len(), 2);
        assert_eq!(p.available(), 0);
        p.put_bulk(&mut v);
        assert!(v.is_empty());
        assert_eq!(p.available(), 2);
    }
}
