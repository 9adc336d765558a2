//! Line-rate arithmetic (seed: dpdk-vnf-evaluation): how many packets per
//! second a link carries at a frame size, and how many ns and CPU cycles
//! that leaves per packet. Every frame costs 20 bytes more on the wire than
//! its length: 7 B preamble + 1 B start-of-frame delimiter + 12 B minimum
//! inter-frame gap. So 64 B at 10 GbE is 10e9 / (84 × 8) = 14.88 Mpps,
//! 67.2 ns per packet, 134.4 cycles at 2 GHz.

use serde::Serialize;
use thiserror::Error;

/// Preamble (7) + SFD (1) + minimum IFG (12).
pub const WIRE_OVERHEAD_BYTES: u32 = 20;
/// Frame sizes of the default table (bytes, including FCS).
pub const TABLE_SIZES: [u32; 6] = [64, 128, 256, 512, 1024, 1518];
/// Link speeds of the default table (Gbit/s).
pub const TABLE_LINKS_GBPS: [f64; 5] = [1.0, 10.0, 25.0, 40.0, 100.0];

/// A link speed or frame size outside what the line-rate arithmetic takes.
#[derive(Debug, Error, PartialEq)]
pub enum LineRateError {
    #[error(
        "bad link speed '{0}': give bits per second with a unit, e.g. 1G, 10G, 25G, 100G, 400M"
    )]
    /// A link speed that does not parse.
    Link(String),
    /// A link speed outside 1 Mbit/s..=10 Tbit/s.
    #[error("link speed '{0}' is outside 1M..=10T (1 Mbit/s to 10 Tbit/s)")]
    LinkRange(String),
    /// A frame size outside 64..=9216 B.
    #[error("frame size {0} B is outside 64..=9216 (an Ethernet frame with FCS is 64-1518 B, jumbo up to 9216 B)")]
    Size(u32),
}

/// Every line-rate error is in what the user asked for.
impl crate::error::IsUsage for LineRateError {
    fn is_usage(&self) -> bool {
        true
    }
}

/// Slowest link `budget` accepts: 1 Mbit/s.
pub const MIN_LINK_BPS: f64 = 1e6;
/// Fastest link `budget` accepts: 10 Tbit/s.
pub const MAX_LINK_BPS: f64 = 1e13;

/// Parses a link speed: `10G`, `10GbE`, `10Gbps`, `400M`, `2.5G`; returns bits/s.
pub fn parse_link(s: &str) -> Result<f64, LineRateError> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower
        .strip_suffix("gbe")
        .map(|b| (b, 1e9))
        .or_else(|| lower.strip_suffix("gbps").map(|b| (b, 1e9)))
        .or_else(|| lower.strip_suffix('g').map(|b| (b, 1e9)))
        .or_else(|| lower.strip_suffix("mbps").map(|b| (b, 1e6)))
        .or_else(|| lower.strip_suffix('m').map(|b| (b, 1e6)))
        .or_else(|| lower.strip_suffix('t').map(|b| (b, 1e12)));
    let (num, unit) = body.ok_or_else(|| LineRateError::Link(s.to_owned()))?;
    let v: f64 = num.parse().map_err(|_| LineRateError::Link(s.to_owned()))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(LineRateError::Link(s.to_owned()));
    }
    let bps = v * unit;
    if !(MIN_LINK_BPS..=MAX_LINK_BPS).contains(&bps) {
        return Err(LineRateError::LinkRange(s.to_owned()));
    }
    Ok(bps)
}

/// What a link leaves one packet of a frame size: packets per second, and
/// the time and CPU cycles per packet at line rate.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PacketBudget {
    /// Link speed, bit/s.
    pub link_bps: f64,
    /// Frame size, B (with FCS).
    pub frame_bytes: u32,
    /// Bytes on the wire per frame (the frame plus preamble, start delimiter
    /// and inter-frame gap).
    pub wire_bytes: u32,
    /// Packets per second at line rate.
    pub pps: f64,
    /// Time budget per packet, ns.
    pub ns_per_packet: f64,
    /// The clock the cycles are counted in, Hz.
    pub cpu_hz: f64,
    /// Cycle budget per packet.
    pub cycles_per_packet: f64,
}

/// Computes the budget; `cpu_hz` is the clock the cycles are counted in.
pub fn budget(link_bps: f64, frame_bytes: u32, cpu_hz: f64) -> Result<PacketBudget, LineRateError> {
    if !(64..=9216).contains(&frame_bytes) {
        return Err(LineRateError::Size(frame_bytes));
    }
    let wire_bytes = frame_bytes + WIRE_OVERHEAD_BYTES;
    let pps = link_bps / (wire_bytes as f64 * 8.0);
    let ns_per_packet = 1e9 / pps;
    Ok(PacketBudget {
        link_bps,
        frame_bytes,
        wire_bytes,
        pps,
        ns_per_packet,
        cpu_hz,
        cycles_per_packet: ns_per_packet * cpu_hz / 1e9,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_figures() {
        let b = budget(parse_link("10G").unwrap(), 64, 2e9).unwrap();
        assert_eq!(format!("{:.2}", b.pps / 1e6), "14.88");
        assert_eq!(format!("{:.1}", b.ns_per_packet), "67.2");
        assert_eq!(format!("{:.1}", b.cycles_per_packet), "134.4");
        // The seed's 140 Mpps row: 100 GbE is 148.8 Mpps, 13.4 cycles.
        let b = budget(100e9, 64, 2e9).unwrap();
        assert_eq!(format!("{:.1}", b.pps / 1e6), "148.8");
        assert_eq!(format!("{:.1}", b.cycles_per_packet), "13.4");
    }

    #[test]
    fn link_parsing() {
        assert_eq!(parse_link("10G").unwrap(), 10e9);
        assert_eq!(parse_link("10GbE").unwrap(), 10e9);
        assert_eq!(parse_link("2.5g").unwrap(), 2.5e9);
        assert_eq!(parse_link("400M").unwrap(), 400e6);
        for bad in ["", "10", "G", "-1G", "fastG", "0G"] {
            assert!(parse_link(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn size_bounds() {
        assert_eq!(budget(10e9, 63, 2e9), Err(LineRateError::Size(63)));
        assert_eq!(
            parse_link("18446744073709551616G"),
            Err(LineRateError::LinkRange("18446744073709551616G".into()))
        );
        assert!(parse_link("0.5M").is_err());
        assert!(parse_link("10T").is_ok());
        assert!(budget(10e9, 9216, 2e9).is_ok());
        assert!(budget(10e9, 9217, 2e9).is_err());
    }
}
