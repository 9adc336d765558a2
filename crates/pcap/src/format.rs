//! Field selection and the hand-written CSV / JSON Lines formatters.
//!
//! In a straightforward Rust baseline, CSV formatting was 55–60% of the CPU
//! (issue 5), so integers, timestamps, MACs and IP addresses are written
//! with lookup tables straight into the output buffer; `core::fmt` is never
//! used per packet. Invariants: a CSV line has exactly one column per
//! selected field (empty when absent) and ends with `\n`; a JSON line is one
//! valid object with `null` for absent fields; IPv6 text follows RFC 5952
//! (as tshark prints it); timestamps always carry nine fractional digits.

use crate::decode::{has, Fields};

/// One output column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Number,
    Ts,
    Caplen,
    Len,
    EthSrc,
    EthDst,
    Ethertype,
    VlanOuter,
    VlanInner,
    IpVersion,
    IpSrc,
    IpDst,
    Proto,
    Ttl,
    IpLen,
    Frag,
    SrcPort,
    DstPort,
    TcpFlags,
    TcpSeq,
    TcpAck,
    TcpWin,
    IcmpType,
    IcmpCode,
    ArpOp,
}

impl Field {
    pub const ALL: [Field; 25] = [
        Field::Number,
        Field::Ts,
        Field::Caplen,
        Field::Len,
        Field::EthSrc,
        Field::EthDst,
        Field::Ethertype,
        Field::VlanOuter,
        Field::VlanInner,
        Field::IpVersion,
        Field::IpSrc,
        Field::IpDst,
        Field::Proto,
        Field::Ttl,
        Field::IpLen,
        Field::Frag,
        Field::SrcPort,
        Field::DstPort,
        Field::TcpFlags,
        Field::TcpSeq,
        Field::TcpAck,
        Field::TcpWin,
        Field::IcmpType,
        Field::IcmpCode,
        Field::ArpOp,
    ];

    /// The default selection: every field but the record number.
    pub fn defaults() -> Vec<Field> {
        Field::ALL[1..].to_vec()
    }

    pub fn name(self) -> &'static str {
        match self {
            Field::Number => "number",
            Field::Ts => "ts",
            Field::Caplen => "caplen",
            Field::Len => "len",
            Field::EthSrc => "eth_src",
            Field::EthDst => "eth_dst",
            Field::Ethertype => "ethertype",
            Field::VlanOuter => "vlan_outer",
            Field::VlanInner => "vlan_inner",
            Field::IpVersion => "ip_version",
            Field::IpSrc => "ip_src",
            Field::IpDst => "ip_dst",
            Field::Proto => "proto",
            Field::Ttl => "ttl",
            Field::IpLen => "ip_len",
            Field::Frag => "frag",
            Field::SrcPort => "src_port",
            Field::DstPort => "dst_port",
            Field::TcpFlags => "tcp_flags",
            Field::TcpSeq => "tcp_seq",
            Field::TcpAck => "tcp_ack",
            Field::TcpWin => "tcp_win",
            Field::IcmpType => "icmp_type",
            Field::IcmpCode => "icmp_code",
            Field::ArpOp => "arp_op",
        }
    }

    /// Parses a comma-separated list of field names.
    pub fn parse_list(s: &str) -> Result<Vec<Field>, String> {
        let mut v = Vec::new();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match Field::ALL.iter().find(|f| f.name() == name) {
                Some(f) => v.push(*f),
                None => {
                    return Err(format!(
                        "unknown field '{name}'; fields: {}",
                        Field::ALL.map(Field::name).join(",")
                    ))
                }
            }
        }
        if v.is_empty() {
            return Err("--fields needs at least one field".into());
        }
        Ok(v)
    }
}

/// Output encoding of extracted fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Csv,
    Jsonl,
}

/// Writes records of the selected fields.
#[derive(Debug, Clone)]
pub struct Formatter {
    fields: Vec<Field>,
    format: OutputFormat,
    /// The default field list, written by straight-line code.
    all_default: bool,
}

const DEC2: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Decimal text of every octet, for dotted quads: (bytes, length).
static OCTET: [([u8; 3], u8); 256] = {
    let mut t = [([0u8; 3], 0u8); 256];
    let mut i = 0;
    while i < 256 {
        let (a, b, c) = ((i / 100) as u8, ((i / 10) % 10) as u8, (i % 10) as u8);
        t[i] = if i >= 100 {
            ([b'0' + a, b'0' + b, b'0' + c], 3)
        } else if i >= 10 {
            ([b'0' + b, b'0' + c, 0], 2)
        } else {
            ([b'0' + c, 0, 0], 1)
        };
        i += 1;
    }
    t
};

/// An output buffer written with fixed-size stores: `data` is always
/// initialised up to its length and `len` is the logical end. Copying a
/// fixed-size array compiles to a few moves, where `Vec::extend_from_slice`
/// of a variable-length slice calls `memcpy` — that was 13% of extraction.
#[derive(Debug, Default, Clone)]
pub struct OutBuf {
    data: Vec<u8>,
    len: usize,
}

impl OutBuf {
    pub fn new() -> Self {
        Self::default()
    }
    /// The bytes written.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn clear(&mut self) {
        self.len = 0;
    }
    /// Makes room for at least `n` more bytes.
    #[inline]
    pub fn ensure(&mut self, n: usize) {
        if self.data.len() - self.len < n {
            let want = (self.data.len() * 2).max(self.len + n).max(64 << 10);
            self.data.resize(want, 0);
        }
    }
    /// Writes `used` bytes of a fixed-size array (room for N must exist).
    #[inline(always)]
    pub fn put<const N: usize>(&mut self, bytes: &[u8; N], used: usize) {
        self.data[self.len..self.len + N].copy_from_slice(bytes);
        self.len += used.min(N);
    }
    /// The next N bytes of the buffer, to be filled in place and then
    /// committed with `advance`. Writing digits straight into the output
    /// (instead of into a stack array copied afterwards) avoids a
    /// store-forwarding stall that cost 60% of integer formatting.
    #[inline(always)]
    pub fn slot<const N: usize>(&mut self) -> &mut [u8; N] {
        let s = &mut self.data[self.len..self.len + N];
        s.try_into().expect("slot within ensured room")
    }
    #[inline(always)]
    pub fn advance(&mut self, n: usize) {
        self.len += n;
    }
    #[inline(always)]
    pub fn push(&mut self, b: u8) {
        self.data[self.len] = b;
        self.len += 1;
    }
    /// Variable-length copy (cold paths).
    pub fn put_slice(&mut self, s: &[u8]) {
        self.ensure(s.len());
        self.data[self.len..self.len + s.len()].copy_from_slice(s);
        self.len += s.len();
    }
}

/// One line being written into an `OutBuf`'s room: the position lives in
/// a register instead of being stored back to the buffer after every field
/// (that store/reload chain was the largest cost of CSV formatting).
pub struct Line<'a> {
    b: &'a mut [u8],
    pos: usize,
}

impl<'a> Line<'a> {
    #[inline(always)]
    pub fn slot<const N: usize>(&mut self) -> &mut [u8; N] {
        let s = &mut self.b[self.pos..self.pos + N];
        s.try_into().expect("slot within the line's room")
    }
    #[inline(always)]
    pub fn advance(&mut self, n: usize) {
        self.pos += n;
    }
    #[inline(always)]
    pub fn push(&mut self, c: u8) {
        self.b[self.pos] = c;
        self.pos += 1;
    }
    #[inline(always)]
    pub fn put<const N: usize>(&mut self, bytes: &[u8; N], used: usize) {
        self.b[self.pos..self.pos + N].copy_from_slice(bytes);
        self.pos += used.min(N);
    }
    pub fn put_slice(&mut self, s: &[u8]) {
        self.b[self.pos..self.pos + s.len()].copy_from_slice(s);
        self.pos += s.len();
    }
}

impl OutBuf {
    /// Runs `f` on a line with `room` bytes reserved and commits what it wrote.
    #[inline(always)]
    pub fn line(&mut self, room: usize, f: impl FnOnce(&mut Line<'_>)) {
        self.ensure(room);
        let start = self.len;
        let mut line = Line {
            b: &mut self.data[start..start + room],
            pos: 0,
        };
        f(&mut line);
        self.len = start + line.pos;
    }
}

/// Writes exactly four digits of `v` (< 10000, leading zeros kept) at `t[at..at + 4]`.
#[inline(always)]
fn put4(t: &mut [u8], at: usize, v: u32) {
    let hi = (v / 100) as usize * 2;
    let lo = (v % 100) as usize * 2;
    t[at] = DEC2[hi];
    t[at + 1] = DEC2[hi + 1];
    t[at + 2] = DEC2[lo];
    t[at + 3] = DEC2[lo + 1];
}

/// Writes the `n` decimal digits of `v` into `t[..n]` (`n` is the digit
/// count of `v`). Four-digit blocks keep the division chain short: a
/// 10-digit number takes two dependent divisions instead of five.
#[inline(always)]
fn digits(t: &mut [u8], n: usize, mut v: u64) {
    let mut i = n;
    while i >= 4 {
        let r = (v % 10_000) as u32;
        v /= 10_000;
        i -= 4;
        put4(t, i, r);
    }
    match i {
        1 => t[0] = b'0' + v as u8,
        2 => {
            let r = v as usize * 2;
            t[0] = DEC2[r];
            t[1] = DEC2[r + 1];
        }
        3 => {
            t[0] = b'0' + (v / 100) as u8;
            let r = (v % 100) as usize * 2;
            t[1] = DEC2[r];
            t[2] = DEC2[r + 1];
        }
        _ => {}
    }
}

/// Appends the decimal text of `v` (room for 20 bytes must exist).
#[inline]
pub fn put_u64(out: &mut Line<'_>, v: u64) {
    let n = v.checked_ilog10().unwrap_or(0) as usize + 1;
    digits(out.slot::<20>(), n, v);
    out.advance(n);
}

/// Appends the decimal text of a 32-bit value.
#[inline(always)]
pub fn put_u32(out: &mut Line<'_>, v: u32) {
    let n = v.checked_ilog10().unwrap_or(0) as usize + 1;
    digits(out.slot::<10>(), n, v as u64);
    out.advance(n);
}

/// Appends `sec.nnnnnnnnn`.
#[inline(always)]
pub fn put_ts(out: &mut Line<'_>, sec: u64, nsec: u32) {
    let n = sec.checked_ilog10().unwrap_or(0) as usize + 1;
    let t = out.slot::<32>();
    digits(t, n, sec);
    t[n] = b'.';
    let frac = nsec.min(999_999_999);
    let rest = frac % 100_000_000;
    t[n + 1] = b'0' + (frac / 100_000_000) as u8;
    put4(t, n + 2, rest / 10_000);
    put4(t, n + 6, rest % 10_000);
    out.advance(n + 10);
}

/// Appends `aa:bb:cc:dd:ee:ff`.
#[inline(always)]
pub fn put_mac(out: &mut Line<'_>, m: &[u8; 6]) {
    let t = out.slot::<17>();
    for (k, b) in m.iter().enumerate() {
        t[k * 3] = HEX[(b >> 4) as usize];
        t[k * 3 + 1] = HEX[(b & 15) as usize];
        if k < 5 {
            t[k * 3 + 2] = b':';
        }
    }
    out.advance(17);
}

/// Appends a dotted quad.
#[inline(always)]
pub fn put_ipv4(out: &mut Line<'_>, a: &[u8]) {
    let t = out.slot::<19>();
    let mut n = 0;
    for (k, b) in a[..4].iter().enumerate() {
        if k > 0 {
            t[n] = b'.';
            n += 1;
        }
        let (d, l) = OCTET[*b as usize];
        t[n..n + 3].copy_from_slice(&d);
        n += l as usize;
    }
    out.advance(n);
}

/// Appends an IPv6 address in RFC 5952 form (lower case, longest run of
/// two or more zero groups compressed, first run on ties, IPv4-mapped
/// addresses with a dotted tail).
pub fn put_ipv6(out: &mut Line<'_>, a: &[u8; 16]) {
    let g: [u16; 8] = std::array::from_fn(|i| u16::from_be_bytes([a[2 * i], a[2 * i + 1]]));
    if g[..5] == [0; 5] && g[5] == 0xffff {
        out.put(b"::ffff:", 7);
        put_ipv4(out, &a[12..16]);
        return;
    }
    // Longest run (>= 2) of zero groups, first on ties, from a bit mask.
    let mut zeros = 0u32;
    for (i, v) in g.iter().enumerate() {
        zeros |= ((*v == 0) as u32) << i;
    }
    let (mut best, mut best_len) = (8usize, 0usize);
    let mut m = zeros;
    while m != 0 {
        let start = m.trailing_zeros() as usize;
        let len = (!(m >> start)).trailing_zeros() as usize;
        if len > best_len && len >= 2 {
            best = start;
            best_len = len;
        }
        m &= !(((1u32 << len) - 1) << start);
    }
    let t = out.slot::<48>();
    let mut n = 0;
    let mut k = 0;
    while k < 8 {
        if k == best {
            t[n] = b':';
            t[n + 1] = b':';
            n += 2;
            k += best_len;
            continue;
        }
        if k > 0 && k != best + best_len {
            t[n] = b':';
            n += 1;
        }
        let v = g[k];
        let nd = ((16 - v.leading_zeros() as usize).div_ceil(4)).max(1);
        for d in 0..nd {
            t[n + d] = HEX[((v >> (4 * (nd - 1 - d))) & 15) as usize];
        }
        n += nd;
        k += 1;
    }
    out.advance(n);
}

#[inline]
fn put_hex(out: &mut Line<'_>, v: u16, digits: usize) {
    let t = out.slot::<6>();
    t[0] = b'0';
    t[1] = b'x';
    for k in 0..digits.min(4) {
        t[2 + k] = HEX[((v >> (4 * (digits - 1 - k))) & 15) as usize];
    }
    out.advance(2 + digits.min(4));
}

#[inline]
fn put_ip(out: &mut Line<'_>, f: &Fields, a: &[u8; 16]) {
    if f.ip_version == 4 {
        put_ipv4(out, &a[..4]);
    } else {
        put_ipv6(out, a);
    }
}

impl Formatter {
    pub fn new(fields: Vec<Field>, format: OutputFormat) -> Self {
        let all_default = fields == Field::defaults();
        Self {
            fields,
            format,
            all_default,
        }
    }

    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The CSV header line (empty for JSON Lines).
    pub fn header(&self) -> Vec<u8> {
        match self.format {
            OutputFormat::Csv => {
                let mut s = self
                    .fields
                    .iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(",");
                s.push('\n');
                s.into_bytes()
            }
            OutputFormat::Jsonl => Vec::new(),
        }
    }

    /// Appends one record.
    #[inline]
    pub fn write(&self, number: u64, f: &Fields, out: &mut OutBuf) {
        match self.format {
            OutputFormat::Csv => self.write_csv(number, f, out),
            OutputFormat::Jsonl => self.write_jsonl(number, f, out),
        }
    }

    /// Writes one field's value; returns false (and writes nothing) when the
    /// field is absent for this packet. `quote` wraps text values for JSON.
    #[inline(always)]
    fn value(field: Field, number: u64, f: &Fields, out: &mut Line<'_>, quote: bool) -> bool {
        let q = |out: &mut Line<'_>| {
            if quote {
                out.push(b'"')
            }
        };
        match field {
            Field::Number => put_u64(out, number),
            Field::Ts => {
                if f.has(has::NO_TS) {
                    return false;
                }
                put_ts(out, f.ts_sec, f.ts_nsec)
            }
            Field::Caplen => put_u32(out, f.caplen),
            Field::Len => put_u32(out, f.len),
            Field::EthSrc | Field::EthDst => {
                let (bit, m) = if field == Field::EthSrc {
                    (has::ETH_SRC, &f.eth_src)
                } else {
                    (has::ETH_DST, &f.eth_dst)
                };
                if !f.has(bit) {
                    return false;
                }
                q(out);
                put_mac(out, m);
                q(out);
            }
            Field::Ethertype => {
                if !f.has(has::ETHERTYPE) {
                    return false;
                }
                q(out);
                put_hex(out, f.ethertype, 4);
                q(out);
            }
            Field::VlanOuter | Field::VlanInner => {
                let (bit, v) = if field == Field::VlanOuter {
                    (has::VLAN_OUTER, f.vlan_outer)
                } else {
                    (has::VLAN_INNER, f.vlan_inner)
                };
                if !f.has(bit) {
                    return false;
                }
                put_u32(out, v as u32);
            }
            Field::IpVersion | Field::Ttl | Field::IpLen => {
                if !f.has(has::IP) {
                    return false;
                }
                let v = match field {
                    Field::IpVersion => f.ip_version as u32,
                    Field::Ttl => f.ttl as u32,
                    _ => f.ip_len as u32,
                };
                put_u32(out, v);
            }
            Field::IpSrc | Field::IpDst => {
                if !f.has(has::IP) {
                    return false;
                }
                q(out);
                put_ip(
                    out,
                    f,
                    if field == Field::IpSrc {
                        &f.ip_src
                    } else {
                        &f.ip_dst
                    },
                );
                q(out);
            }
            Field::Proto => {
                if !f.has(has::PROTO) {
                    return false;
                }
                put_u32(out, f.proto as u32);
            }
            Field::Frag => {
                if !f.has(has::IP) {
                    return false;
                }
                out.push(if f.has(has::FRAG) { b'1' } else { b'0' });
            }
            Field::SrcPort | Field::DstPort => {
                if !f.has(has::PORTS) {
                    return false;
                }
                put_u32(
                    out,
                    if field == Field::SrcPort {
                        f.src_port
                    } else {
                        f.dst_port
                    } as u32,
                );
            }
            Field::TcpFlags => {
                if !f.has(has::TCP_FLAGS) {
                    return false;
                }
                q(out);
                put_hex(out, f.tcp_flags, 3);
                q(out);
            }
            Field::TcpSeq | Field::TcpAck | Field::TcpWin => {
                let (bit, v) = match field {
                    Field::TcpSeq => (has::TCP_SEQ, f.tcp_seq),
                    Field::TcpAck => (has::TCP_ACK, f.tcp_ack),
                    _ => (has::TCP_WIN, f.tcp_win as u32),
                };
                if !f.has(bit) {
                    return false;
                }
                put_u32(out, v);
            }
            Field::IcmpType | Field::IcmpCode => {
                if !f.has(has::ICMP) {
                    return false;
                }
                put_u32(
                    out,
                    if field == Field::IcmpType {
                        f.icmp_type
                    } else {
                        f.icmp_code
                    } as u32,
                );
            }
            Field::ArpOp => {
                if !f.has(has::ARP) {
                    return false;
                }
                put_u32(out, f.arp_op as u32);
            }
        }
        true
    }

    fn write_csv(&self, number: u64, f: &Fields, out: &mut OutBuf) {
        if self.all_default {
            // Straight-line code for the default columns: no per-field
            // dispatch (an indirect jump per field was 12% of formatting).
            macro_rules! columns {
                ($line:ident; $($field:ident),*) => {
                    $(
                        Self::value(Field::$field, number, f, $line, false);
                        $line.push(b',');
                    )*
                };
            }
            out.line(64 * 24 + 16, |line| {
                columns!(line; Ts, Caplen, Len, EthSrc, EthDst, Ethertype, VlanOuter, VlanInner,
                    IpVersion, IpSrc, IpDst, Proto, Ttl, IpLen, Frag, SrcPort, DstPort, TcpFlags,
                    TcpSeq, TcpAck, TcpWin, IcmpType, IcmpCode, ArpOp);
                line.pos -= 1;
                line.push(b'\n');
            });
            return;
        }
        out.line(64 * self.fields.len() + 16, |line| {
            for &field in &self.fields {
                Self::value(field, number, f, line, false);
                line.push(b',');
            }
            // The last separator becomes the line end.
            line.pos -= 1;
            line.push(b'\n');
        });
    }

    fn write_jsonl(&self, number: u64, f: &Fields, out: &mut OutBuf) {
        out.line(96 * self.fields.len() + 16, |out| {
            self.jsonl_line(number, f, out)
        });
    }

    fn jsonl_line(&self, number: u64, f: &Fields, out: &mut Line<'_>) {
        out.push(b'{');
        for (k, &field) in self.fields.iter().enumerate() {
            if k > 0 {
                out.push(b',');
            }
            out.push(b'"');
            out.put_slice(field.name().as_bytes());
            out.put(b"\":", 2);
            if !Self::value(field, number, f, out, true) {
                out.put(b"null", 4);
            }
        }
        out.put(b"}\n", 2);
    }
}

impl Formatter {
    /// Appends one field's CSV text to `out` and says whether the field is
    /// present (nothing is written when it is not). The Parquet text columns
    /// use it, so their strings are the CSV cells by construction.
    pub fn field_text(field: Field, number: u64, f: &Fields, out: &mut OutBuf) -> bool {
        let mut present = false;
        out.line(64, |line| {
            present = Self::value(field, number, f, line, false)
        });
        present
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn s(f: impl FnOnce(&mut Line<'_>)) -> String {
        let mut v = OutBuf::new();
        v.line(256, f);
        String::from_utf8(v.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn timestamps_have_nine_digits() {
        assert_eq!(s(|o| put_ts(o, 0, 0)), "0.000000000");
        assert_eq!(
            s(|o| put_ts(o, 1_700_000_000, 123_456_789)),
            "1700000000.123456789"
        );
        assert_eq!(s(|o| put_ts(o, 5, 7000)), "5.000007000");
        assert_eq!(s(|o| put_ts(o, 12, 999_999_999)), "12.999999999");
        assert_eq!(
            s(|o| put_ts(o, u64::MAX, 100_000_000)),
            "18446744073709551615.100000000"
        );
    }

    #[test]
    fn ipv6_rfc5952() {
        let cases = [
            "::",
            "::1",
            "2001:db8::1",
            "2001:db8:0:1:1:1:1:1",
            "2001:0:0:1::1",
            "fe80::1:2:3:4",
            "1::",
            "::ffff:10.1.2.3",
            "2001:db8:85a3::8a2e:370:7334",
        ];
        for c in cases {
            let a: Ipv6Addr = c.parse().unwrap();
            assert_eq!(s(|o| put_ipv6(o, &a.octets())), a.to_string(), "{c}");
        }
    }

    #[test]
    fn mac_and_hex() {
        assert_eq!(
            s(|o| put_mac(o, &[0, 0x1b, 0xa0, 0xff, 1, 0xfe])),
            "00:1b:a0:ff:01:fe"
        );
        assert_eq!(s(|o| put_hex(o, 0x800, 4)), "0x0800");
        assert_eq!(s(|o| put_hex(o, 0x18, 3)), "0x018");
    }

    proptest! {
        #[test]
        fn integers_match_std(v in any::<u64>(), w in any::<u32>()) {
            prop_assert_eq!(s(|o| put_u64(o, v)), v.to_string());
            prop_assert_eq!(s(|o| put_u32(o, w)), w.to_string());
        }

        #[test]
        fn timestamps_match_std(sec in any::<u64>(), nsec in 0u32..1_000_000_000) {
            prop_assert_eq!(s(|o| put_ts(o, sec, nsec)), format!("{sec}.{nsec:09}"));
        }

        #[test]
        fn addresses_match_std(a in any::<[u8; 4]>(), b in any::<[u8; 16]>()) {
            prop_assert_eq!(s(|o| put_ipv4(o, &a)), Ipv4Addr::from(a).to_string());
            let v6 = Ipv6Addr::from(b);
            // std prints ::a.b.c.d for IPv4-compatible addresses; RFC 5952 and tshark do not.
            if v6.to_ipv4().is_none() || v6.to_ipv4_mapped().is_some() {
                prop_assert_eq!(s(|o| put_ipv6(o, &b)), v6.to_string());
            }
        }
    }

    #[test]
    fn csv_and_jsonl_lines() {
        let mut f = Fields {
            ts_sec: 10,
            ts_nsec: 5,
            caplen: 60,
            len: 60,
            ..Default::default()
        };
        f.present =
            has::ETH_SRC | has::ETH_DST | has::ETHERTYPE | has::IP | has::PROTO | has::PORTS;
        f.ethertype = 0x0800;
        f.ip_version = 4;
        f.ip_src[..4].copy_from_slice(&[10, 0, 0, 1]);
        f.ip_dst[..4].copy_from_slice(&[10, 0, 0, 2]);
        f.proto = 17;
        f.ttl = 64;
        f.ip_len = 46;
        f.src_port = 53;
        f.dst_port = 1000;
        let csv = Formatter::new(Field::defaults(), OutputFormat::Csv);
        let mut out = OutBuf::new();
        csv.write(1, &f, &mut out);
        assert_eq!(
            String::from_utf8(out.as_bytes().to_vec()).unwrap(),
            "10.000000005,60,60,00:00:00:00:00:00,00:00:00:00:00:00,0x0800,,,4,10.0.0.1,10.0.0.2,17,64,46,0,53,1000,,,,,,,\n"
        );
        assert_eq!(
            csv.header().iter().filter(|b| **b == b',').count(),
            Field::defaults().len() - 1
        );
        let j = Formatter::new(
            vec![Field::Number, Field::IpSrc, Field::TcpFlags, Field::DstPort],
            OutputFormat::Jsonl,
        );
        let mut out = OutBuf::new();
        j.write(7, &f, &mut out);
        let line = String::from_utf8(out.as_bytes().to_vec()).unwrap();
        assert_eq!(
            line,
            "{\"number\":7,\"ip_src\":\"10.0.0.1\",\"tcp_flags\":null,\"dst_port\":1000}\n"
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["dst_port"], 1000);
    }

    #[test]
    fn default_fast_path_equals_generic_loop() {
        let mut f = Fields {
            ts_sec: 1,
            ts_nsec: 2,
            caplen: 3,
            len: 4,
            present: !has::NO_TS,
            ip_version: 6,
            ..Default::default()
        };
        f.ip_src[15] = 1;
        let fast = Formatter::new(Field::defaults(), OutputFormat::Csv);
        let mut list = Field::defaults();
        list.push(Field::Number);
        list.pop();
        let mut slow = Formatter::new(list, OutputFormat::Csv);
        slow.all_default = false;
        let (mut a, mut b) = (OutBuf::new(), OutBuf::new());
        fast.write(9, &f, &mut a);
        slow.write(9, &f, &mut b);
        assert_eq!(a.as_bytes(), b.as_bytes());
        assert!(fast.all_default && !slow.all_default);
    }

    #[test]
    fn field_list_parsing() {
        assert_eq!(
            Field::parse_list("ts, ip_src").unwrap(),
            vec![Field::Ts, Field::IpSrc]
        );
        assert!(Field::parse_list("ts,bogus").unwrap_err().contains("bogus"));
        assert!(Field::parse_list("").is_err());
    }
}
