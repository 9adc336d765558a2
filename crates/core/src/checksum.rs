//! The Internet checksum (RFC 1071), once for every lab: the OpenFlow
//! lab's probe frames and the pipeline lab's generated IPv4 headers both
//! checksum through here, so a frame built by one lab verifies in the
//! other.
//!
//! Invariants: words are big-endian; an odd trailing byte is the high
//! byte of a last word padded with zero (RFC 1071 §4.1); the carries are
//! folded back until the sum fits 16 bits, and the result is its one's
//! complement. Data with a correct checksum in it sums to zero.

/// Byte offset of the header checksum field in an IPv4 header.
pub const IPV4_CHECKSUM_OFFSET: usize = 10;

/// The one's-complement sum of `data` as big-endian 16-bit words, not yet
/// complemented and folded to 16 bits (an odd last byte is padded with a
/// zero byte).
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum = 0u64;
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u64::from(u16::from_be_bytes([*last, 0]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The RFC 1071 Internet checksum of `data`: the one's complement of its
/// one's-complement sum. Over data that carries a correct checksum it is 0.
pub fn internet_checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// The IPv4 header checksum of `hdr` with its checksum field (bytes
/// 10..12) taken as zero, whatever it holds now: the value to write into
/// that field. A header shorter than the field is summed as it is.
pub fn ipv4_header_checksum(hdr: &[u8]) -> u16 {
    let f = IPV4_CHECKSUM_OFFSET;
    if hdr.len() < f + 2 {
        return internet_checksum(hdr);
    }
    let before = u32::from(ones_complement_sum(&hdr[..f]));
    let after = u32::from(ones_complement_sum(&hdr[f + 2..]));
    let mut sum = before + after;
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
    #[test]
    fn the_rfc_1071_example_sums_to_ddf2() {
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_complement_sum(&d), 0xddf2);
        assert_eq!(internet_checksum(&d), !0xddf2);
    }

    #[test]
    fn an_odd_last_byte_is_the_high_byte_of_a_padded_word() {
        assert_eq!(internet_checksum(&[0xab]), !0xab00);
        assert_eq!(
            internet_checksum(&[0x12, 0x34, 0x56]),
            internet_checksum(&[0x12, 0x34, 0x56, 0x00])
        );
        assert_eq!(internet_checksum(&[]), 0xffff);
    }

    #[test]
    fn carries_fold_back_into_the_sum() {
        // 0xffff + 0x0001 = 0x1_0000, folded: 0x0001.
        assert_eq!(ones_complement_sum(&[0xff, 0xff, 0x00, 0x01]), 0x0001);
        // Long data cannot overflow the accumulator.
        let big = vec![0xffu8; 1 << 20];
        assert_eq!(ones_complement_sum(&big), 0xffff);
    }

    /// cbench's probe header (192.168.0.40 → 192.168.1.40, proto 255, 50
    /// bytes, TTL 64) checksums to the constant 0xf72c.
    #[test]
    fn an_ipv4_header_ignores_its_own_checksum_field_and_verifies_to_zero() {
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&50u16.to_be_bytes());
        h[8] = 64;
        h[9] = 0xff;
        h[12..16].copy_from_slice(&[192, 168, 0, 40]);
        h[16..20].copy_from_slice(&[192, 168, 1, 40]);
        let c = ipv4_header_checksum(&h);
        assert_eq!(c, 0xf72c);
        assert_eq!(internet_checksum(&h), c, "a zero field changes nothing");
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(ipv4_header_checksum(&h), c, "the field is skipped");
        assert_eq!(internet_checksum(&h), 0, "the header verifies");
    }

    #[test]
    fn a_header_too_short_for_the_field_is_summed_whole() {
        assert_eq!(
            ipv4_header_checksum(&[1, 2, 3]),
            internet_checksum(&[1, 2, 3])
        );
    }
}
