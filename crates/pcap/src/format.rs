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
    pub fn parse_list(s: &str) -> Result<Vec<Field>, FieldListError> {
        let mut v = Vec::new();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match Field::ALL.iter().find(|f| f.name() == name) {
                Some(f) if v.contains(f) => return Err(FieldListError::Twice(name.to_owned())),
                Some(f) => v.push(*f),
                None => return Err(FieldListError::Unknown(name.to_owned())),
            }
        }
        if v.is_empty() {
            return Err(FieldListError::Empty);
        }
        Ok(v)
    }
}

/// A `--fields` list that cannot be extracted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldListError {
    #[error("field '{0}' is listed twice in --fields; give each field once")]
    Twice(String),
    #[error("unknown field '{0}'; fields: {all}", all = Field::ALL.map(Field::name).join(","))]
    Unknown(String),
    #[error("--fields needs at least one field")]
    Empty,
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
/// 10-digit number takes two dependent divisions instead of five. Used for
/// values wider than 32 bits (record numbers, far-future seconds).
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

/// The eight decimal digits of `v` (< 10^8, leading zeros kept) as digit
/// values 0..=9, first digit in the lowest byte, computed in one register:
/// the value is split into two 4-digit lanes, each lane into two 2-digit
/// lanes and each of those into digits with multiply-shift divisions
/// (`x * 5243 >> 19 == x / 100` for x < 43699, `x * 103 >> 10 == x / 10`
/// for x < 179). One 8-byte store then replaces eight table loads and byte
/// stores; on the 1 GiB benchmark capture this cut formatting CPU by about
/// a fifth (see `put_u32`).
#[inline(always)]
fn swar8(v: u32) -> u64 {
    let x = (v / 10_000) as u64 | (((v % 10_000) as u64) << 32);
    let q = ((x * 5243) >> 19) & 0x0000_007f_0000_007f;
    let x = q | ((x - q * 100) << 16);
    let t = ((x * 103) >> 10) & 0x000f_000f_000f_000f;
    t | ((x - t * 10) << 8)
}

const ASCII_ZEROS: u64 = 0x3030_3030_3030_3030;

/// Appends `v` (< 10^8) without leading zeros.
#[inline(always)]
fn put_below_1e8(out: &mut Line<'_>, v: u32) {
    let n = digit_count(v);
    *out.slot::<8>() = ((swar8(v) | ASCII_ZEROS) >> (8 * (8 - n))).to_le_bytes();
    out.advance(n as usize);
}

/// `(v + DIGITS[log2 v]) >> 32` is the decimal digit count of `v`: each
/// entry holds the count for the smallest value of its power-of-two bucket
/// plus a bias that carries into the next count at the bucket's power of
/// ten (Lemire's table-driven digit count). Taken apart from the digits
/// themselves so the next field's position does not wait for them.
static DIGITS: [u64; 32] = {
    let mut t = [0u64; 32];
    let mut i = 0;
    while i < 32 {
        let (mut d, mut p) = (1u64, 10u64);
        while p <= (1u64 << i) {
            d += 1;
            p *= 10;
        }
        t[i] = if d < 10 {
            (d << 32) + (1u64 << 32) - p
        } else {
            d << 32
        };
        i += 1;
    }
    t
};

#[inline(always)]
fn digit_count(v: u32) -> u32 {
    ((v as u64 + DIGITS[31 - (v | 1).leading_zeros() as usize]) >> 32) as u32
}

/// Appends the decimal text of a byte: one table load, one 4-byte store.
#[inline(always)]
pub fn put_u8(out: &mut Line<'_>, v: u8) {
    let (w, l) = OCTET_DOT[v as usize];
    *out.slot::<4>() = w.to_le_bytes();
    out.advance(l as usize);
}

/// Appends the decimal text of `v` (room for 20 bytes must exist).
#[inline(always)]
pub fn put_u64(out: &mut Line<'_>, v: u64) {
    if v <= u32::MAX as u64 {
        return put_u32(out, v as u32);
    }
    let n = wide_digits(out.slot::<20>(), v);
    out.advance(n);
}

/// The digits of a value wider than 32 bits (rare: record numbers past 4
/// billion, far-future seconds). Out of line and given only the slot, so
/// the caller's `Line` stays in registers.
#[inline(never)]
fn wide_digits(t: &mut [u8; 20], v: u64) -> usize {
    let n = v.checked_ilog10().unwrap_or(0) as usize + 1;
    digits(t, n, v);
    n
}

/// Appends the decimal text of a 32-bit value.
#[inline(always)]
pub fn put_u32(out: &mut Line<'_>, v: u32) {
    if v < 100_000_000 {
        put_below_1e8(out, v);
    } else {
        // 9 or 10 digits: one or two leading digits, then eight.
        let (hi, lo) = (v / 100_000_000, v % 100_000_000);
        let t = out.slot::<10>();
        let n = if hi >= 10 {
            t[0] = DEC2[hi as usize * 2];
            t[1] = DEC2[hi as usize * 2 + 1];
            2
        } else {
            t[0] = b'0' + hi as u8;
            1
        };
        out.advance(n);
        *out.slot::<8>() = (swar8(lo) | ASCII_ZEROS).to_le_bytes();
        out.advance(8);
    }
}

/// Appends `sec.nnnnnnnnn`.
#[inline(always)]
pub fn put_ts(out: &mut Line<'_>, sec: u64, nsec: u32) {
    put_u64(out, sec);
    let frac = nsec.min(999_999_999);
    let t = out.slot::<10>();
    t[0] = b'.';
    t[1] = b'0' + (frac / 100_000_000) as u8;
    out.advance(2);
    *out.slot::<8>() = (swar8(frac % 100_000_000) | ASCII_ZEROS).to_le_bytes();
    out.advance(8);
}

/// Two lower-case hex digits per byte value, first digit in the low byte.
static HEX2: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = HEX[i >> 4] as u16 | (HEX[i & 15] as u16) << 8;
        i += 1;
    }
    t
};

#[inline(always)]
fn hex2(b: u8) -> u64 {
    HEX2[b as usize] as u64
}

/// The four hex digits of `v`, first digit in the low byte.
#[inline(always)]
fn hex4(v: u16) -> u32 {
    HEX2[(v >> 8) as usize] as u32 | (HEX2[(v & 0xff) as usize] as u32) << 16
}

/// Appends `aa:bb:cc:dd:ee:ff` with three stores: `aa:bb:cc`, `:dd:ee:f`
/// and the last two digits.
#[inline(always)]
pub fn put_mac(out: &mut Line<'_>, m: &[u8; 6]) {
    const C: u64 = b':' as u64;
    let t = out.slot::<17>();
    let w1 = hex2(m[0]) | C << 16 | hex2(m[1]) << 24 | C << 40 | hex2(m[2]) << 48;
    let w2 = C | hex2(m[3]) << 8 | C << 24 | hex2(m[4]) << 32 | C << 48;
    t[..8].copy_from_slice(&w1.to_le_bytes());
    t[8..16].copy_from_slice(&w2.to_le_bytes());
    t[15..17].copy_from_slice(&HEX2[m[5] as usize].to_le_bytes());
    out.advance(17);
}

/// Decimal text of every octet followed by a dot, as one little-endian
/// word, and its length without the dot.
static OCTET_DOT: [(u32, u8); 256] = {
    let mut t = [(0u32, 0u8); 256];
    let mut i = 0;
    while i < 256 {
        // Digits from the most significant, then the dot.
        let (mut w, mut l, mut p) = (0u32, 0u8, 100);
        while p > 0 {
            if i >= p || p == 1 {
                w |= (b'0' as u32 + ((i / p) % 10) as u32) << (8 * l);
                l += 1;
            }
            p /= 10;
        }
        w |= (b'.' as u32) << (8 * l);
        t[i] = (w, l);
        i += 1;
    }
    t
};

/// Appends a dotted quad: one 4-byte store per octet (digits and dot; the
/// last dot is overwritten by whatever follows).
#[inline(always)]
pub fn put_ipv4(out: &mut Line<'_>, a: &[u8]) {
    let t = out.slot::<20>();
    let mut n = 0;
    for (k, b) in a[..4].iter().enumerate() {
        let (w, l) = OCTET_DOT[*b as usize];
        t[n..n + 4].copy_from_slice(&w.to_le_bytes());
        n += l as usize + (k < 3) as usize;
    }
    out.advance(n);
}

/// Appends an IPv6 address in RFC 5952 form (lower case, longest run of
/// two or more zero groups compressed, first run on ties, IPv4-mapped
/// addresses with a dotted tail).
#[inline(always)]
pub fn put_ipv6(out: &mut Line<'_>, a: &[u8; 16]) {
    let n = ipv6_text(out.slot::<48>(), a);
    out.advance(n);
}

/// The RFC 5952 text of `a` written into `t`; returns its length. Out of
/// line (it is large) and given only the slot, so the caller's `Line`
/// stays in registers: passing the `Line` itself to a call forced it onto
/// the stack for the whole CSV line.
#[inline(never)]
fn ipv6_text(t: &mut [u8; 48], a: &[u8; 16]) -> usize {
    let g: [u16; 8] = std::array::from_fn(|i| u16::from_be_bytes([a[2 * i], a[2 * i + 1]]));
    if g[..5] == [0; 5] && g[5] == 0xffff {
        t[..7].copy_from_slice(b"::ffff:");
        let mut n = 7;
        for (k, b) in a[12..16].iter().enumerate() {
            let (w, l) = OCTET_DOT[*b as usize];
            t[n..n + 4].copy_from_slice(&w.to_le_bytes());
            n += l as usize + (k < 3) as usize;
        }
        return n;
    }
    let mut zeros = 0usize;
    for (i, v) in g.iter().enumerate() {
        zeros |= ((*v == 0) as usize) << i;
    }
    let (best, run) = ZERO_RUN[zeros];
    let (best, end) = (best as usize, best as usize + run as usize);
    // Every group is written as a word — `::` where the run starts, the
    // digits (with a leading `:` unless first or right after the run)
    // elsewhere — and the position advances by that word's length, zero
    // inside the run: no branch depends on where the run is.
    let mut n = 0;
    for (k, &v) in g.iter().enumerate() {
        let skip = (v.leading_zeros() / 4).min(3);
        let digits = hex4(v) >> (8 * skip);
        let nd = 4 - skip as usize;
        let sep = (k > 0 && k != end) as usize;
        let word = if sep == 1 {
            (digits as u64) << 8 | b':' as u64
        } else {
            digits as u64
        };
        let (word, len) = if k == best {
            (0x3a3a, 2)
        } else if k > best && k < end {
            (0, 0)
        } else {
            (word, sep + nd)
        };
        t[n..n + 8].copy_from_slice(&word.to_le_bytes());
        n += len;
    }
    n
}

/// For each mask of zero groups (bit i set when group i is zero): where the
/// longest run of two or more zero groups starts and its length, the first
/// run on ties; (8, 0) when there is none (RFC 5952 section 4.2).
static ZERO_RUN: [(u8, u8); 256] = {
    let mut t = [(8u8, 0u8); 256];
    let mut m = 0;
    while m < 256 {
        let (mut best, mut best_len, mut k) = (8u8, 0u8, 0);
        while k < 8 {
            let mut len = 0;
            while k + len < 8 && m & (1 << (k + len)) != 0 {
                len += 1;
            }
            if len >= 2 && len as u8 > best_len {
                best = k as u8;
                best_len = len as u8;
            }
            k += if len == 0 { 1 } else { len };
        }
        t[m] = (best, best_len);
        m += 1;
    }
    t
};

/// Appends `0x` and the low `digits` (3 or 4) hex digits of `v`.
#[inline(always)]
fn put_hex(out: &mut Line<'_>, v: u16, digits: usize) {
    let d = digits.clamp(1, 4);
    let w = (b'0' as u64) | (b'x' as u64) << 8 | ((hex4(v) >> (8 * (4 - d))) as u64) << 16;
    *out.slot::<8>() = w.to_le_bytes();
    out.advance(2 + d);
}

#[inline(always)]
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

    pub fn output_format(&self) -> OutputFormat {
        self.format
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
                match field {
                    Field::IpVersion => put_u8(out, f.ip_version),
                    Field::Ttl => put_u8(out, f.ttl),
                    _ => put_u32(out, f.ip_len as u32),
                }
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
                put_u8(out, f.proto);
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
                put_u8(
                    out,
                    if field == Field::IcmpType {
                        f.icmp_type
                    } else {
                        f.icmp_code
                    },
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

    /// One field's text written into `t`; None when the field is absent.
    /// Used by the chosen-fields and JSON Lines paths. Out of line on
    /// purpose: with `value` inlined into a loop over runtime fields, LLVM
    /// hoisted every field's loads and conversions in front of the loop,
    /// and a one-field CSV line cost 35–50 ns instead of a few.
    #[inline(never)]
    fn value_text(
        field: Field,
        number: u64,
        f: &Fields,
        t: &mut [u8; 64],
        quote: bool,
    ) -> Option<usize> {
        let mut line = Line { b: t, pos: 0 };
        Self::value(field, number, f, &mut line, quote).then_some(line.pos)
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
                if let Some(n) = Self::value_text(field, number, f, line.slot::<64>(), false) {
                    line.advance(n);
                }
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
            match Self::value_text(field, number, f, out.slot::<64>(), true) {
                Some(n) => out.advance(n),
                None => out.put(b"null", 4),
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
            if let Some(n) = Self::value_text(field, number, f, line.slot::<64>(), false) {
                line.advance(n);
                present = true;
            }
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

    #[test]
    fn integers_at_every_digit_count_boundary() {
        let mut p = 1u64;
        for _ in 0..20 {
            for v in [
                p.saturating_sub(1),
                p,
                p + 1,
                p.saturating_mul(10).saturating_sub(1),
            ] {
                assert_eq!(s(|o| put_u64(o, v)), v.to_string());
                if let Ok(w) = u32::try_from(v) {
                    assert_eq!(s(|o| put_u32(o, w)), w.to_string());
                }
            }
            p = p.saturating_mul(10);
        }
        assert_eq!(s(|o| put_u32(o, u32::MAX)), u32::MAX.to_string());
        for b in 0..=255u8 {
            assert_eq!(s(|o| put_u8(o, b)), b.to_string());
        }
        assert_eq!(s(|o| put_u64(o, u64::MAX)), u64::MAX.to_string());
        for g in [0u16, 1, 0xf, 0x10, 0xff, 0x100, 0xfff, 0x1000, 0xffff] {
            let mut a = [0u8; 16];
            a[..2].copy_from_slice(&g.to_be_bytes());
            a[15] = 1;
            let v6 = std::net::Ipv6Addr::from(a);
            assert_eq!(s(|o| put_ipv6(o, &a)), v6.to_string());
        }
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
        assert!(Field::parse_list("ts,bogus")
            .unwrap_err()
            .to_string()
            .contains("bogus"));
        assert!(Field::parse_list("").is_err());
        // Regression: `--fields ts,ts,ts` used to exit 0 with three ts columns.
        assert!(Field::parse_list("ts,ts,ts")
            .unwrap_err()
            .to_string()
            .contains("listed twice"));
    }
}
