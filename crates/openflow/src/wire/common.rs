//! What OpenFlow 1.0 and 1.3 share on the wire, stated once and used by
//! both codecs: the 8-byte `ofp_header` with its checked view and stream
//! framing, the message types both versions number alike (hello …
//! set_config), the bodies they lay out alike (error, echo, the vendor or
//! experimenter id, switch config, the stats/multipart header, hello
//! elements, `ofp_desc_stats`), and the walk over a list of
//! type-length records (actions, instructions) with its length rules.
//!
//! Invariants: every offset is named once, in [`field`]; a length read
//! from the peer is checked against the bytes left before anything
//! behind it is read, so a malformed message is a [`WireError`], never a
//! panic; each `parse_*` here returns what the matching `emit_*` wrote.
//! Seed: cbench-trema-speedup (both versions of the controller's codec).

use super::{
    be16, be32, cstr, need, put16, put_cstr, Result, WireError, HEADER_LEN, MAX_MESSAGE_LEN,
};

/// Byte offsets, each named once (smoltcp's `mod field`): from the start
/// of a message, or, for a type-length record, from the record's start.
pub(crate) mod field {
    // ofp_header
    pub const VERSION: usize = 0;
    pub const TYPE: usize = 1;
    pub const LENGTH: usize = 2;
    pub const XID: usize = 4;
    // ofp_error_msg
    pub const ERROR_TYPE: usize = 8;
    pub const ERROR_CODE: usize = 10;
    pub const ERROR_DATA: usize = 12;
    // ofp_vendor_header (1.0), ofp_experimenter_header (1.3)
    pub const VENDOR: usize = 8;
    // ofp_switch_config
    pub const CONFIG_FLAGS: usize = 8;
    pub const MISS_SEND_LEN: usize = 10;
    pub const SWITCH_CONFIG_LEN: usize = 12;
    // ofp_stats_request/reply (1.0), ofp_multipart_request/reply (1.3)
    pub const STATS_TYPE: usize = 8;
    pub const STATS_FLAGS: usize = 10;
    // ofp_switch_features, up to where the versions part
    pub const DATAPATH_ID: usize = 8;
    pub const N_BUFFERS: usize = 16;
    pub const N_TABLES: usize = 20;
    pub const CAPABILITIES: usize = 24;
    // ofp_packet_in and ofp_packet_out, up to where the versions part
    pub const BUFFER_ID: usize = 8;
    pub const TOTAL_LEN: usize = 12;
    // a type-length record: action, instruction, hello element
    pub const TLV_TYPE: usize = 0;
    pub const TLV_LEN: usize = 2;
    pub const TLV_BODY: usize = 4;
    // ofp_action_output: the port (its width is the version's)
    pub const OUTPUT_PORT: usize = 4;
    // ofp_desc_stats
    pub const MFR_DESC: core::ops::Range<usize> = 0..256;
    pub const HW_DESC: core::ops::Range<usize> = 256..512;
    pub const SW_DESC: core::ops::Range<usize> = 512..768;
    pub const SERIAL_NUM: core::ops::Range<usize> = 768..800;
    pub const DP_DESC: core::ops::Range<usize> = 800..1056;
}

/// The message types both versions number alike.
pub const OFPT_HELLO: u8 = 0;
pub const OFPT_ERROR: u8 = 1;
pub const OFPT_ECHO_REQUEST: u8 = 2;
pub const OFPT_ECHO_REPLY: u8 = 3;
pub const OFPT_FEATURES_REQUEST: u8 = 5;
pub const OFPT_FEATURES_REPLY: u8 = 6;
pub const OFPT_GET_CONFIG_REQUEST: u8 = 7;
pub const OFPT_GET_CONFIG_REPLY: u8 = 8;
pub const OFPT_SET_CONFIG: u8 = 9;
pub const OFPT_PACKET_IN: u8 = 10;
pub const OFPT_FLOW_REMOVED: u8 = 11;
pub const OFPT_PORT_STATUS: u8 = 12;
pub const OFPT_PACKET_OUT: u8 = 13;
pub const OFPT_FLOW_MOD: u8 = 14;

pub const OFPAT_OUTPUT: u16 = 0;

/// `OFPHET_VERSIONBITMAP`: a hello element listing the versions spoken.
pub const OFPHET_VERSIONBITMAP: u16 = 1;

/// Size of `ofp_desc_stats`.
pub const DESC_STATS_LEN: usize = 1056;

/// Where the next message in a byte stream ends.
///
/// `Ok(None)`: fewer bytes than the message needs are buffered (read more);
/// `Ok(Some(n))`: the first message is `buf[..n]`; `Err`: the length field
/// is below the header size, so the stream cannot be framed any more and the
/// connection must be closed.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = be16(buf, field::LENGTH) as usize;
    if len < HEADER_LEN {
        return Err(WireError::BadLength {
            what: "ofp_header",
            length: len,
            have: buf.len(),
        });
    }
    Ok(if buf.len() >= len { Some(len) } else { None })
}

/// Checked view of one complete OpenFlow message (any version).
#[derive(Debug, Clone, Copy)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wrap without checks; field accessors may panic on short input.
    pub const fn new_unchecked(buffer: T) -> Self {
        Header { buffer }
    }

    /// Wrap a buffer that must hold exactly one message: at least 8 bytes
    /// and a length field equal to the buffer's length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        need("ofp_header", b, HEADER_LEN)?;
        let len = be16(b, field::LENGTH) as usize;
        if len < HEADER_LEN || len != b.len() {
            return Err(WireError::BadLength {
                what: "ofp_header",
                length: len,
                have: b.len(),
            });
        }
        Ok(Header { buffer })
    }

    /// Like [`Header::new_checked`], and the message is of `version`.
    pub(crate) fn new_versioned(buffer: T, version: u8) -> Result<Self> {
        let h = Header::new_checked(buffer)?;
        if h.version() != version {
            return Err(WireError::BadVersion(h.version()));
        }
        Ok(h)
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    pub fn length(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }
    pub fn xid(&self) -> u32 {
        be32(self.buffer.as_ref(), field::XID)
    }
    /// Bytes after the header.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
}

/// Append an `ofp_header` with a zero length; [`finish_len`] fills it in.
#[inline]
pub(crate) fn push_header(out: &mut Vec<u8>, version: u8, msg_type: u8, xid: u32) -> usize {
    let start = out.len();
    out.extend_from_slice(&[version, msg_type, 0, 0]);
    out.extend_from_slice(&xid.to_be_bytes());
    start
}

/// Patch the length field of the message that starts at `start`.
#[inline]
pub(crate) fn finish_len(out: &mut [u8], start: usize) {
    let len = out.len() - start;
    debug_assert!(len <= MAX_MESSAGE_LEN, "message longer than 65535 bytes");
    put16(out, start + field::LENGTH, len as u16);
}

/// `b` is exactly `n` bytes long.
pub(crate) fn exact_len(what: &'static str, b: &[u8], n: usize) -> Result<()> {
    if b.len() != n {
        return Err(WireError::BadLength {
            what,
            length: b.len(),
            have: n,
        });
    }
    Ok(())
}

/// A message that is its header alone (features_request,
/// get_config_request, barrier): `msg` when `b` is just a header.
pub(crate) fn header_only<M>(what: &'static str, b: &[u8], msg: M) -> Result<M> {
    exact_len(what, b, HEADER_LEN)?;
    Ok(msg)
}

/// The six 32-bit words both versions' port descriptions carry in this
/// order, read at `at`: config, state, curr, advertised, supported, peer.
pub(crate) fn parse_port_words(b: &[u8], at: usize) -> [u32; 6] {
    core::array::from_fn(|i| be32(b, at + 4 * i))
}

/// An `ofp_error_msg`: its type, code and data.
pub(crate) fn parse_error(b: &[u8]) -> Result<(u16, u16, Vec<u8>)> {
    need("error", b, field::ERROR_DATA)?;
    Ok((
        be16(b, field::ERROR_TYPE),
        be16(b, field::ERROR_CODE),
        b[field::ERROR_DATA..].to_vec(),
    ))
}

pub(crate) fn emit_error(out: &mut Vec<u8>, err_type: u16, code: u16, data: &[u8]) {
    out.extend_from_slice(&err_type.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(data);
}

/// An `ofp_switch_config`: flags and miss_send_len.
pub(crate) fn parse_switch_config(b: &[u8]) -> Result<(u16, u16)> {
    exact_len("switch_config", b, field::SWITCH_CONFIG_LEN)?;
    Ok((be16(b, field::CONFIG_FLAGS), be16(b, field::MISS_SEND_LEN)))
}

pub(crate) fn emit_switch_config(out: &mut Vec<u8>, flags: u16, miss_send_len: u16) {
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&miss_send_len.to_be_bytes());
}

/// A stats (1.0) or multipart (1.3) message of at least `fixed` bytes:
/// its type and flags, and the body after the fixed part.
pub(crate) fn parse_stats_header<'a>(
    what: &'static str,
    b: &'a [u8],
    fixed: usize,
) -> Result<(u16, u16, &'a [u8])> {
    need(what, b, fixed)?;
    Ok((
        be16(b, field::STATS_TYPE),
        be16(b, field::STATS_FLAGS),
        &b[fixed..],
    ))
}

/// The stats/multipart header after `ofp_header`, with `pad` zero bytes.
pub(crate) fn emit_stats_header(out: &mut Vec<u8>, stats_type: u16, flags: u16, pad: usize) {
    out.extend_from_slice(&stats_type.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.resize(out.len() + pad, 0);
}

/// Whether a request of `stats_type` that must carry no body carries one.
pub(crate) fn empty_request(
    what: &'static str,
    b: &[u8],
    fixed: usize,
    bodiless: bool,
) -> Result<()> {
    if bodiless && b.len() != fixed {
        return Err(WireError::BadLength {
            what,
            length: b.len(),
            have: fixed,
        });
    }
    Ok(())
}

/// A list of fixed-size records (ports) filling `b` exactly.
pub(crate) fn parse_records<T>(
    what: &'static str,
    b: &[u8],
    size: usize,
    parse: impl Fn(&[u8]) -> T,
) -> Result<Vec<T>> {
    if !b.len().is_multiple_of(size) {
        return Err(WireError::BadLength {
            what,
            length: b.len(),
            have: b.len(),
        });
    }
    Ok(b.chunks_exact(size).map(parse).collect())
}

/// The `actions_len` of a packet_out whose fixed part is `fixed` bytes,
/// read at `at` and checked against what follows the fixed part.
pub(crate) fn packet_out_actions_len(b: &[u8], fixed: usize, at: usize) -> Result<usize> {
    need("packet_out", b, fixed)?;
    let alen = be16(b, at) as usize;
    if fixed + alen > b.len() {
        return Err(WireError::BadLength {
            what: "packet_out actions_len",
            length: alen,
            have: b.len() - fixed,
        });
    }
    Ok(alen)
}

/// One record of an action or instruction list: its type and all its
/// bytes (header included).
pub(crate) struct Tlv<'a> {
    pub(crate) tlv_type: u16,
    pub(crate) bytes: &'a [u8],
    /// The bytes left in the list from this record on.
    pub(crate) left: usize,
}

impl Tlv<'_> {
    /// The bytes after the record's 4-byte type and length.
    pub(crate) fn body(&self) -> &[u8] {
        &self.bytes[field::TLV_BODY..]
    }
}

/// The records of an action or instruction list: each one's length a
/// non-zero multiple of 8 that fits in what is left, else `what` is
/// malformed and the walk stops.
pub(crate) fn walk_tlvs<'a>(
    what: &'static str,
    mut b: &'a [u8],
) -> impl Iterator<Item = Result<Tlv<'a>>> {
    core::iter::from_fn(move || {
        if b.is_empty() {
            return None;
        }
        let next = (|| {
            need(what, b, field::TLV_BODY)?;
            let len = be16(b, field::TLV_LEN) as usize;
            if len < 8 || !len.is_multiple_of(8) || len > b.len() {
                return Err(WireError::BadLength {
                    what,
                    length: len,
                    have: b.len(),
                });
            }
            Ok(Tlv {
                tlv_type: be16(b, field::TLV_TYPE),
                bytes: &b[..len],
                left: b.len(),
            })
        })();
        match &next {
            Ok(t) => b = &b[t.bytes.len()..],
            Err(_) => b = &[],
        }
        Some(next)
    })
}

/// Parse an action list (the walk both versions share): an
/// `OFPAT_OUTPUT` of `output_len` bytes becomes `output(record)`, any
/// other action `other(type, body)`.
pub(crate) fn parse_action_list<A>(
    b: &[u8],
    output_len: usize,
    output: impl Fn(&[u8]) -> A,
    other: impl Fn(u16, Vec<u8>) -> A,
) -> Result<Vec<A>> {
    walk_tlvs("ofp_action_header", b)
        .map(|t| {
            let t = t?;
            if t.tlv_type != OFPAT_OUTPUT {
                return Ok(other(t.tlv_type, t.body().to_vec()));
            }
            if t.bytes.len() != output_len {
                return Err(WireError::BadLength {
                    what: "ofp_action_output",
                    length: t.bytes.len(),
                    have: t.left,
                });
            }
            Ok(output(t.bytes))
        })
        .collect()
}

/// A record (action, instruction, hello element) kept as bytes: its
/// type, its length and its body.
pub(crate) fn emit_tlv(out: &mut Vec<u8>, tlv_type: u16, body: &[u8]) {
    out.extend_from_slice(&tlv_type.to_be_bytes());
    out.extend_from_slice(&((field::TLV_BODY + body.len()) as u16).to_be_bytes());
    out.extend_from_slice(body);
}

/// An element of a hello message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelloElement {
    /// Bitmaps of supported versions: bit n of word i = version 32*i+n.
    VersionBitmap(Vec<u32>),
    Other {
        elem_type: u16,
        body: Vec<u8>,
    },
}

/// Parse hello elements (the body after the header, any version).
pub fn parse_hello_elements(mut b: &[u8]) -> Result<Vec<HelloElement>> {
    let mut v = Vec::new();
    while !b.is_empty() {
        need("ofp_hello_elem_header", b, field::TLV_BODY)?;
        let ty = be16(b, field::TLV_TYPE);
        let len = be16(b, field::TLV_LEN) as usize;
        if len < field::TLV_BODY || len > b.len() {
            return Err(WireError::BadLength {
                what: "ofp_hello_elem_header",
                length: len,
                have: b.len(),
            });
        }
        let body = &b[field::TLV_BODY..len];
        v.push(if ty == OFPHET_VERSIONBITMAP {
            if !body.len().is_multiple_of(4) {
                return Err(WireError::BadLength {
                    what: "hello version bitmap",
                    length: body.len(),
                    have: body.len(),
                });
            }
            HelloElement::VersionBitmap(body.chunks_exact(4).map(|c| be32(c, 0)).collect())
        } else {
            HelloElement::Other {
                elem_type: ty,
                body: body.to_vec(),
            }
        });
        // Elements are padded to 8 bytes; tolerate a missing final pad.
        let padded = (len.div_ceil(8) * 8).min(b.len());
        b = &b[padded..];
    }
    Ok(v)
}

/// Hello elements, each padded to 8 bytes.
pub(crate) fn emit_hello_elements(out: &mut Vec<u8>, elements: &[HelloElement]) {
    for e in elements {
        let s = out.len();
        match e {
            HelloElement::VersionBitmap(bm) => {
                let words: Vec<u8> = bm.iter().flat_map(|w| w.to_be_bytes()).collect();
                emit_tlv(out, OFPHET_VERSIONBITMAP, &words);
            }
            HelloElement::Other { elem_type, body } => emit_tlv(out, *elem_type, body),
        }
        let padded = s + (out.len() - s).div_ceil(8) * 8;
        out.resize(padded, 0);
    }
}

/// `ofp_desc_stats`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescStats {
    pub mfr_desc: String,
    pub hw_desc: String,
    pub sw_desc: String,
    pub serial_num: String,
    pub dp_desc: String,
}

impl DescStats {
    pub(crate) fn parse(b: &[u8]) -> Result<DescStats> {
        exact_len("ofp_desc_stats", b, DESC_STATS_LEN)?;
        Ok(DescStats {
            mfr_desc: cstr(&b[field::MFR_DESC]),
            hw_desc: cstr(&b[field::HW_DESC]),
            sw_desc: cstr(&b[field::SW_DESC]),
            serial_num: cstr(&b[field::SERIAL_NUM]),
            dp_desc: cstr(&b[field::DP_DESC]),
        })
    }
    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        put_cstr(out, &self.mfr_desc, field::MFR_DESC.len());
        put_cstr(out, &self.hw_desc, field::HW_DESC.len());
        put_cstr(out, &self.sw_desc, field::SW_DESC.len());
        put_cstr(out, &self.serial_num, field::SERIAL_NUM.len());
        put_cstr(out, &self.dp_desc, field::DP_DESC.len());
    }
}
