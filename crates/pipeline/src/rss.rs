//! Receive-side scaling: the Toeplitz hash a NIC computes over a packet's
//! addresses (and ports) to pick its receive queue, and the 128-entry
//! indirection table that maps the hash to a queue (the seed's unfinished
//! RSS study).
//!
//! Two implementations that must agree bit for bit: [`toeplitz_bitwise`],
//! the definition (for every set input bit, XOR in the 32-bit window of the
//! key that starts at that bit), and [`Toeplitz`], which folds the key into
//! one 256-entry table per input byte position so a hash is one load and
//! one XOR per input byte. Both are checked against Microsoft's published
//! RSS verification vectors and against each other by proptest.
//!
//! Input layout is the one the vectors use: source address, destination
//! address, then (4-tuple) source port and destination port, all in network
//! byte order — IPv4 2-tuple 8 B, 4-tuple 12 B; IPv6 32 B and 36 B.

use serde::Serialize;

/// Microsoft's standard 40-byte RSS key (the one in the verification
/// suite, and the default of most NIC drivers).
pub const STANDARD_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The symmetric key (0x6d5a repeated): the hash of (src, dst, sport,
/// dport) equals that of (dst, src, dport, sport), so both directions of a
/// flow land on one queue.
pub const SYMMETRIC_KEY: [u8; 40] = {
    let mut k = [0u8; 40];
    let mut i = 0;
    while i < 40 {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// Longest input a 40-byte key can hash (IPv6 4-tuple): 320 key bits cover
/// 288 input bits plus the 32-bit window.
pub const MAX_INPUT: usize = 36;

/// Entries of the indirection table (as on most 10/25 GbE NICs).
pub const RETA_SIZE: usize = 128;

/// The definition of the Toeplitz hash, one bit at a time. `input` longer
/// than [`MAX_INPUT`] bytes is truncated to it (the key has no more bits).
pub fn toeplitz_bitwise(key: &[u8; 40], input: &[u8]) -> u32 {
    let mut result = 0u32;
    // The 32-bit key window at the current bit, and the key bits after it.
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (i, &byte) in input.iter().take(MAX_INPUT).enumerate() {
        let next = key[i + 4];
        for bit in 0..8 {
            if byte & (0x80 >> bit) != 0 {
                result ^= window;
            }
            window = (window << 1) | u32::from((next >> (7 - bit)) & 1);
        }
    }
    result
}

/// Byte-table Toeplitz: `table[i][b]` is the hash contribution of byte `b`
/// at input position `i`, so a hash is `MAX_INPUT` loads at most.
#[derive(Clone)]
pub struct Toeplitz {
    table: Box<[[u32; 256]; MAX_INPUT]>,
}

impl std::fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Toeplitz { .. }")
    }
}

impl Toeplitz {
    /// Folds `key` into the per-position tables (36 KiB).
    pub fn new(key: &[u8; 40]) -> Self {
        let mut table = Box::new([[0u32; 256]; MAX_INPUT]);
        for (i, row) in table.iter_mut().enumerate() {
            // Windows for the eight bits of byte position i.
            let mut windows = [0u32; 8];
            for (bit, w) in windows.iter_mut().enumerate() {
                let start = i * 8 + bit;
                *w = key_window(key, start);
            }
            for (b, slot) in row.iter_mut().enumerate() {
                let mut h = 0u32;
                for (bit, w) in windows.iter().enumerate() {
                    if b & (0x80 >> bit) != 0 {
                        h ^= w;
                    }
                }
                *slot = h;
            }
        }
        Toeplitz { table }
    }

    /// Hash of `input` (truncated to [`MAX_INPUT`] bytes).
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        let mut h = 0u32;
        for (row, &b) in self.table.iter().zip(input) {
            h ^= row[b as usize];
        }
        h
    }

    /// Hash of an IPv4 4-tuple in its fixed 12-byte form (the hot path:
    /// fixed length, unrolled by the compiler).
    #[inline]
    pub fn hash_v4_l4(&self, input: &[u8; 12]) -> u32 {
        let t = &self.table;
        let mut h = 0u32;
        for i in 0..12 {
            h ^= t[i][input[i] as usize];
        }
        h
    }
}

/// The 32 key bits starting at bit `start` (bits past the key read as 0).
fn key_window(key: &[u8; 40], start: usize) -> u32 {
    let mut w = 0u32;
    for j in 0..32 {
        let bit = start + j;
        let v = key.get(bit / 8).map_or(0, |k| (k >> (7 - bit % 8)) & 1);
        w = (w << 1) | u32::from(v);
    }
    w
}

/// Which fields feed the hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HashFields {
    /// Addresses only (2-tuple): every packet of a host pair on one queue.
    L3,
    /// Addresses and TCP/UDP ports (4-tuple); packets without ports fall
    /// back to the 2-tuple, as NICs do.
    L4,
}

/// A flow's hash input: addresses and ports in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowTuple {
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
        ports: Option<(u16, u16)>,
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        ports: Option<(u16, u16)>,
    },
}

impl FlowTuple {
    /// Writes the hash input for `fields` into `out`; returns its length.
    pub fn hash_input(&self, fields: HashFields, out: &mut [u8; MAX_INPUT]) -> usize {
        let (addr_len, ports) = match self {
            FlowTuple::V4 { src, dst, ports } => {
                out[..4].copy_from_slice(src);
                out[4..8].copy_from_slice(dst);
                (8, ports)
            }
            FlowTuple::V6 { src, dst, ports } => {
                out[..16].copy_from_slice(src);
                out[16..32].copy_from_slice(dst);
                (32, ports)
            }
        };
        match (fields, ports) {
            (HashFields::L4, Some((s, d))) => {
                out[addr_len..addr_len + 2].copy_from_slice(&s.to_be_bytes());
                out[addr_len + 2..addr_len + 4].copy_from_slice(&d.to_be_bytes());
                addr_len + 4
            }
            _ => addr_len,
        }
    }
}

/// RSS as a NIC configures it: key, fields and indirection table.
#[derive(Debug, Clone)]
pub struct Rss {
    toeplitz: Toeplitz,
    fields: HashFields,
    reta: [u16; RETA_SIZE],
}

impl Rss {
    /// `queues` (1..=RETA_SIZE) spread round-robin over the table, like
    /// `rte_eth_dev_rss_reta_update` with the default layout.
    pub fn new(key: &[u8; 40], fields: HashFields, queues: usize) -> Self {
        let q = queues.clamp(1, RETA_SIZE);
        let mut reta = [0u16; RETA_SIZE];
        for (i, e) in reta.iter_mut().enumerate() {
            *e = (i % q) as u16;
        }
        Rss {
            toeplitz: Toeplitz::new(key),
            fields,
            reta,
        }
    }

    /// The hash of a flow.
    #[inline]
    pub fn hash(&self, t: &FlowTuple) -> u32 {
        let mut buf = [0u8; MAX_INPUT];
        let n = t.hash_input(self.fields, &mut buf);
        if n == 12 {
            let mut b12 = [0u8; 12];
            b12.copy_from_slice(&buf[..12]);
            self.toeplitz.hash_v4_l4(&b12)
        } else {
            self.toeplitz.hash(&buf[..n])
        }
    }

    /// The queue for a hash: the table entry its low 7 bits select.
    #[inline]
    pub fn queue_of(&self, hash: u32) -> usize {
        self.reta[hash as usize % RETA_SIZE] as usize
    }

    pub fn toeplitz(&self) -> &Toeplitz {
        &self.toeplitz
    }
}

/// Packets per queue and how even they are.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Balance {
    pub per_queue: Vec<u64>,
    /// Largest queue over the mean (1.0 is perfectly even).
    pub max_over_mean: f64,
}

impl Balance {
    pub fn from_counts(per_queue: Vec<u64>) -> Self {
        let total: u64 = per_queue.iter().sum();
        let max = per_queue.iter().copied().max().unwrap_or(0);
        let mean = total as f64 / per_queue.len().max(1) as f64;
        Balance {
            max_over_mean: if mean > 0.0 {
                max as f64 / mean
            } else {
                f64::NAN
            },
            per_queue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(src: &str, sport: u16, dst: &str, dport: u16) -> FlowTuple {
        FlowTuple::V4 {
            src: src.parse::<Ipv4Addr>().unwrap().octets(),
            dst: dst.parse::<Ipv4Addr>().unwrap().octets(),
            ports: Some((sport, dport)),
        }
    }

    fn v6(src: &str, sport: u16, dst: &str, dport: u16) -> FlowTuple {
        FlowTuple::V6 {
            src: src.parse::<Ipv6Addr>().unwrap().octets(),
            dst: dst.parse::<Ipv6Addr>().unwrap().octets(),
            ports: Some((sport, dport)),
        }
    }

    /// Microsoft's "Verifying the RSS Hash Calculation" tables: every row,
    /// (tuple, IP-only hash, IP+TCP hash).
    fn vectors() -> Vec<(FlowTuple, u32, u32)> {
        vec![
            (
                v4("66.9.149.187", 2794, "161.142.100.80", 1766),
                0x323e8fc2,
                0x51ccc178,
            ),
            (
                v4("199.92.111.2", 14230, "65.69.140.83", 4739),
                0xd718262a,
                0xc626b0ea,
            ),
            (
                v4("24.19.198.95", 12898, "12.22.207.184", 38024),
                0xd2d0a5de,
                0x5c2b394a,
            ),
            (
                v4("38.27.205.30", 48228, "209.142.163.6", 2217),
                0x82989176,
                0xafc7327f,
            ),
            (
                v4("153.39.163.191", 44251, "202.188.127.2", 1303),
                0x5d1809c5,
                0x10e828a2,
            ),
            (
                v6("3ffe:2501:200:1fff::7", 2794, "3ffe:2501:200:3::1", 1766),
                0x2cc18cd5,
                0x40207d3d,
            ),
            (
                v6("3ffe:501:8::260:97ff:fe40:efab", 14230, "ff02::1", 4739),
                0x0f0c461c,
                0xdde51bbf,
            ),
            (
                v6(
                    "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
                    44251,
                    "fe80::200:f8ff:fe21:67cf",
                    38024,
                ),
                0x4b61e985,
                0x02d1feef,
            ),
        ]
    }

    #[test]
    fn microsoft_verification_vectors() {
        let t = Toeplitz::new(&STANDARD_KEY);
        let l3 = Rss::new(&STANDARD_KEY, HashFields::L3, 1);
        let l4 = Rss::new(&STANDARD_KEY, HashFields::L4, 1);
        for (tuple, ip_only, with_ports) in vectors() {
            let mut buf = [0u8; MAX_INPUT];
            let n = tuple.hash_input(HashFields::L3, &mut buf);
            assert_eq!(
                toeplitz_bitwise(&STANDARD_KEY, &buf[..n]),
                ip_only,
                "{tuple:?}"
            );
            assert_eq!(t.hash(&buf[..n]), ip_only, "{tuple:?}");
            assert_eq!(l3.hash(&tuple), ip_only, "{tuple:?}");
            let n = tuple.hash_input(HashFields::L4, &mut buf);
            assert_eq!(
                toeplitz_bitwise(&STANDARD_KEY, &buf[..n]),
                with_ports,
                "{tuple:?}"
            );
            assert_eq!(t.hash(&buf[..n]), with_ports, "{tuple:?}");
            assert_eq!(l4.hash(&tuple), with_ports, "{tuple:?}");
        }
    }

    #[test]
    fn symmetric_key_hashes_both_directions_alike() {
        let rss = Rss::new(&SYMMETRIC_KEY, HashFields::L4, 4);
        for (tuple, _, _) in vectors() {
            let rev = match tuple {
                FlowTuple::V4 { src, dst, ports } => FlowTuple::V4 {
                    src: dst,
                    dst: src,
                    ports: ports.map(|(s, d)| (d, s)),
                },
                FlowTuple::V6 { src, dst, ports } => FlowTuple::V6 {
                    src: dst,
                    dst: src,
                    ports: ports.map(|(s, d)| (d, s)),
                },
            };
            assert_eq!(rss.hash(&tuple), rss.hash(&rev));
        }
        // The standard key is not symmetric: the first vector reversed differs.
        let std = Rss::new(&STANDARD_KEY, HashFields::L4, 4);
        let (t, _, _) = vectors()[0];
        let r = v4("161.142.100.80", 1766, "66.9.149.187", 2794);
        assert_ne!(std.hash(&t), std.hash(&r));
    }

    #[test]
    fn reta_spreads_queues_round_robin() {
        let rss = Rss::new(&STANDARD_KEY, HashFields::L4, 3);
        assert_eq!(rss.queue_of(0), 0);
        assert_eq!(rss.queue_of(1), 1);
        assert_eq!(rss.queue_of(2), 2);
        assert_eq!(rss.queue_of(3), 0);
        assert_eq!(rss.queue_of(128), 0);
        assert_eq!(rss.queue_of(127), 127 % 3);
    }

    #[test]
    fn balance_figures() {
        let b = Balance::from_counts(vec![10, 30]);
        assert_eq!(b.max_over_mean, 1.5);
        assert!(Balance::from_counts(vec![0, 0]).max_over_mean.is_nan());
    }

    proptest! {
        #[test]
        fn table_equals_bitwise(key in proptest::array::uniform32(any::<u8>()),
                                tail in proptest::array::uniform8(any::<u8>()),
                                input in proptest::collection::vec(any::<u8>(), 0..=MAX_INPUT)) {
            let mut k = [0u8; 40];
            k[..32].copy_from_slice(&key);
            k[32..].copy_from_slice(&tail);
            let t = Toeplitz::new(&k);
            prop_assert_eq!(t.hash(&input), toeplitz_bitwise(&k, &input));
            if input.len() >= 12 {
                let mut b = [0u8; 12];
                b.copy_from_slice(&input[..12]);
                prop_assert_eq!(t.hash_v4_l4(&b), toeplitz_bitwise(&k, &b));
            }
        }
    }
}
