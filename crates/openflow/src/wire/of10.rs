//! OpenFlow 1.0 (wire version 0x01) messages: zero-copy checked views for
//! the hot messages (packet_in, flow_mod, packet_out) and a plain [`Repr`]
//! for every message the lab speaks (hello, error, echo, vendor, features,
//! get/set config, packet_in, flow_mod with `ofp_match`, packet_out,
//! barrier, stats desc). Layouts and constants follow the OpenFlow Switch
//! Specification 1.0.0 (`openflow.h`).
//!
//! Invariants: `Repr::parse` takes exactly one framed message and checks
//! the header length, the per-type fixed size and every nested length
//! (actions, ports, stats bodies) before reading behind it; `Repr::emit`
//! produces bytes that `parse` returns unchanged. Seed: cbench-trema-speedup.

use super::frame::FlowKey;
use super::{
    be16, be32, be64, cstr, finish_len, need, push_header, put16, put32, put_cstr, Header, Result,
    WireError, HEADER_LEN, OFP10_VERSION,
};

pub const OFPT_HELLO: u8 = 0;
pub const OFPT_ERROR: u8 = 1;
pub const OFPT_ECHO_REQUEST: u8 = 2;
pub const OFPT_ECHO_REPLY: u8 = 3;
pub const OFPT_VENDOR: u8 = 4;
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
pub const OFPT_PORT_MOD: u8 = 15;
pub const OFPT_STATS_REQUEST: u8 = 16;
pub const OFPT_STATS_REPLY: u8 = 17;
pub const OFPT_BARRIER_REQUEST: u8 = 18;
pub const OFPT_BARRIER_REPLY: u8 = 19;

pub const OFPFC_ADD: u16 = 0;
pub const OFPFC_MODIFY: u16 = 1;
pub const OFPFC_MODIFY_STRICT: u16 = 2;
pub const OFPFC_DELETE: u16 = 3;
pub const OFPFC_DELETE_STRICT: u16 = 4;

pub const OFPAT_OUTPUT: u16 = 0;
pub const OFPP_MAX: u16 = 0xff00;
pub const OFPP_FLOOD: u16 = 0xfffb;
pub const OFPP_ALL: u16 = 0xfffc;
pub const OFPP_CONTROLLER: u16 = 0xfffd;
pub const OFPP_NONE: u16 = 0xffff;

pub const OFPR_NO_MATCH: u8 = 0;
pub const OFPR_ACTION: u8 = 1;

pub const OFPST_DESC: u16 = 0;

pub const OFPET_HELLO_FAILED: u16 = 0;
pub const OFPHFC_INCOMPATIBLE: u16 = 0;
pub const OFPET_BAD_REQUEST: u16 = 1;
pub const OFPBRC_BAD_VERSION: u16 = 0;
pub const OFPBRC_BAD_TYPE: u16 = 1;
pub const OFPBRC_BAD_VENDOR: u16 = 3;
pub const OFPBRC_BAD_LEN: u16 = 6;

/// Match-everything wildcard bits (`OFPFW_ALL`).
pub const OFPFW_ALL: u32 = (1 << 22) - 1;

pub const MATCH_LEN: usize = 40;
pub const PHY_PORT_LEN: usize = 48;
pub const FEATURES_REPLY_LEN: usize = 32;
pub const PACKET_IN_LEN: usize = 18;
pub const FLOW_MOD_LEN: usize = 72;
pub const PACKET_OUT_LEN: usize = 16;
pub const DESC_STATS_LEN: usize = 1056;
pub const ACTION_OUTPUT_LEN: usize = 8;

// ---------------------------------------------------------------- views

/// Checked zero-copy view of a packet_in.
#[derive(Debug, Clone, Copy)]
pub struct PacketInView<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PacketInView<T> {
    /// `buffer` is one whole message (header length == buffer length).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Header::new_checked(buffer.as_ref())?;
        check_type(&h, OFPT_PACKET_IN)?;
        need("packet_in", h.as_bytes(), PACKET_IN_LEN)?;
        Ok(PacketInView { buffer })
    }
    pub fn xid(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }
    pub fn buffer_id(&self) -> u32 {
        be32(self.buffer.as_ref(), 8)
    }
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), 12)
    }
    pub fn in_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 14)
    }
    pub fn reason(&self) -> u8 {
        self.buffer.as_ref()[16]
    }
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[PACKET_IN_LEN..]
    }
}

/// Checked zero-copy view of a flow_mod.
#[derive(Debug, Clone, Copy)]
pub struct FlowModView<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FlowModView<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Header::new_checked(buffer.as_ref())?;
        check_type(&h, OFPT_FLOW_MOD)?;
        need("flow_mod", h.as_bytes(), FLOW_MOD_LEN)?;
        Ok(FlowModView { buffer })
    }
    pub fn xid(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }
    pub fn match_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[8..48]
    }
    pub fn cookie(&self) -> u64 {
        be64(self.buffer.as_ref(), 48)
    }
    pub fn command(&self) -> u16 {
        be16(self.buffer.as_ref(), 56)
    }
    pub fn idle_timeout(&self) -> u16 {
        be16(self.buffer.as_ref(), 58)
    }
    pub fn hard_timeout(&self) -> u16 {
        be16(self.buffer.as_ref(), 60)
    }
    pub fn priority(&self) -> u16 {
        be16(self.buffer.as_ref(), 62)
    }
    pub fn buffer_id(&self) -> u32 {
        be32(self.buffer.as_ref(), 64)
    }
    pub fn out_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 68)
    }
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), 70)
    }
    pub fn actions(&self) -> &[u8] {
        &self.buffer.as_ref()[FLOW_MOD_LEN..]
    }
}

/// Checked zero-copy view of a packet_out (`actions_len` validated).
#[derive(Debug, Clone, Copy)]
pub struct PacketOutView<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PacketOutView<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Header::new_checked(buffer.as_ref())?;
        check_type(&h, OFPT_PACKET_OUT)?;
        let b = h.as_bytes();
        need("packet_out", b, PACKET_OUT_LEN)?;
        let alen = be16(b, 14) as usize;
        if PACKET_OUT_LEN + alen > b.len() {
            return Err(WireError::BadLength {
                what: "packet_out actions_len",
                length: alen,
                have: b.len() - PACKET_OUT_LEN,
            });
        }
        Ok(PacketOutView { buffer })
    }
    pub fn xid(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }
    pub fn buffer_id(&self) -> u32 {
        be32(self.buffer.as_ref(), 8)
    }
    pub fn in_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 12)
    }
    fn actions_len(&self) -> usize {
        be16(self.buffer.as_ref(), 14) as usize
    }
    pub fn actions(&self) -> &[u8] {
        &self.buffer.as_ref()[PACKET_OUT_LEN..PACKET_OUT_LEN + self.actions_len()]
    }
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[PACKET_OUT_LEN + self.actions_len()..]
    }
}

fn check_type<T: AsRef<[u8]>>(h: &Header<T>, ty: u8) -> Result<()> {
    if h.version() != OFP10_VERSION {
        return Err(WireError::BadVersion(h.version()));
    }
    if h.msg_type() != ty {
        return Err(WireError::Malformed {
            what: "ofp_header",
            why: "unexpected message type for this view",
        });
    }
    Ok(())
}

// ---------------------------------------------------------------- reprs

/// `ofp_match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Match {
    pub wildcards: u32,
    pub in_port: u16,
    pub dl_src: [u8; 6],
    pub dl_dst: [u8; 6],
    pub dl_vlan: u16,
    pub dl_vlan_pcp: u8,
    pub dl_type: u16,
    pub nw_tos: u8,
    pub nw_proto: u8,
    pub nw_src: u32,
    pub nw_dst: u32,
    pub tp_src: u16,
    pub tp_dst: u16,
}

impl Match {
    /// Match everything.
    pub fn all() -> Match {
        Match {
            wildcards: OFPFW_ALL,
            ..Match::default()
        }
    }

    /// Exact match (no wildcards) on every header field of a packet
    /// received on `in_port` — Trema's `ExactMatch.new(packet_in)`.
    pub fn exact(in_port: u16, k: &FlowKey) -> Match {
        Match {
            wildcards: 0,
            in_port,
            dl_src: k.dl_src,
            dl_dst: k.dl_dst,
            dl_vlan: k.dl_vlan,
            dl_vlan_pcp: k.dl_vlan_pcp,
            dl_type: k.dl_type,
            nw_tos: k.nw_tos,
            nw_proto: k.nw_proto,
            nw_src: k.nw_src,
            nw_dst: k.nw_dst,
            tp_src: k.tp_src,
            tp_dst: k.tp_dst,
        }
    }

    pub fn parse(b: &[u8]) -> Result<Match> {
        need("ofp_match", b, MATCH_LEN)?;
        let mut m = Match {
            wildcards: be32(b, 0),
            in_port: be16(b, 4),
            ..Match::default()
        };
        m.dl_src.copy_from_slice(&b[6..12]);
        m.dl_dst.copy_from_slice(&b[12..18]);
        m.dl_vlan = be16(b, 18);
        m.dl_vlan_pcp = b[20];
        m.dl_type = be16(b, 22);
        m.nw_tos = b[24];
        m.nw_proto = b[25];
        m.nw_src = be32(b, 28);
        m.nw_dst = be32(b, 32);
        m.tp_src = be16(b, 36);
        m.tp_dst = be16(b, 38);
        Ok(m)
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.wildcards.to_be_bytes());
        out.extend_from_slice(&self.in_port.to_be_bytes());
        out.extend_from_slice(&self.dl_src);
        out.extend_from_slice(&self.dl_dst);
        out.extend_from_slice(&self.dl_vlan.to_be_bytes());
        out.push(self.dl_vlan_pcp);
        out.push(0);
        out.extend_from_slice(&self.dl_type.to_be_bytes());
        out.push(self.nw_tos);
        out.push(self.nw_proto);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.nw_src.to_be_bytes());
        out.extend_from_slice(&self.nw_dst.to_be_bytes());
        out.extend_from_slice(&self.tp_src.to_be_bytes());
        out.extend_from_slice(&self.tp_dst.to_be_bytes());
    }
}

/// One action of an action list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `OFPAT_OUTPUT`.
    Output { port: u16, max_len: u16 },
    /// Any other action, kept as the bytes after its 4-byte header.
    Other { action_type: u16, body: Vec<u8> },
}

impl Action {
    pub fn len(&self) -> usize {
        match self {
            Action::Output { .. } => ACTION_OUTPUT_LEN,
            Action::Other { body, .. } => 4 + body.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        false
    }
    pub fn emit(&self, out: &mut Vec<u8>) {
        match self {
            Action::Output { port, max_len } => {
                out.extend_from_slice(&OFPAT_OUTPUT.to_be_bytes());
                out.extend_from_slice(&(ACTION_OUTPUT_LEN as u16).to_be_bytes());
                out.extend_from_slice(&port.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
            }
            Action::Other { action_type, body } => {
                out.extend_from_slice(&action_type.to_be_bytes());
                out.extend_from_slice(&((4 + body.len()) as u16).to_be_bytes());
                out.extend_from_slice(body);
            }
        }
    }
}

/// Parse an action list; each action's length must be a non-zero multiple
/// of 8 that fits in what is left.
pub fn parse_actions(mut b: &[u8]) -> Result<Vec<Action>> {
    let mut v = Vec::new();
    while !b.is_empty() {
        need("ofp_action_header", b, 4)?;
        let ty = be16(b, 0);
        let len = be16(b, 2) as usize;
        if len < 8 || !len.is_multiple_of(8) || len > b.len() {
            return Err(WireError::BadLength {
                what: "ofp_action_header",
                length: len,
                have: b.len(),
            });
        }
        if ty == OFPAT_OUTPUT {
            if len != ACTION_OUTPUT_LEN {
                return Err(WireError::BadLength {
                    what: "ofp_action_output",
                    length: len,
                    have: b.len(),
                });
            }
            v.push(Action::Output {
                port: be16(b, 4),
                max_len: be16(b, 6),
            });
        } else {
            v.push(Action::Other {
                action_type: ty,
                body: b[4..len].to_vec(),
            });
        }
        b = &b[len..];
    }
    Ok(v)
}

fn emit_actions(actions: &[Action], out: &mut Vec<u8>) {
    for a in actions {
        a.emit(out);
    }
}

/// `ofp_phy_port`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PhyPort {
    pub port_no: u16,
    pub hw_addr: [u8; 6],
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
}

impl PhyPort {
    fn parse(b: &[u8]) -> PhyPort {
        let mut hw = [0u8; 6];
        hw.copy_from_slice(&b[2..8]);
        PhyPort {
            port_no: be16(b, 0),
            hw_addr: hw,
            name: cstr(&b[8..24]),
            config: be32(b, 24),
            state: be32(b, 28),
            curr: be32(b, 32),
            advertised: be32(b, 36),
            supported: be32(b, 40),
            peer: be32(b, 44),
        }
    }
    fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.port_no.to_be_bytes());
        out.extend_from_slice(&self.hw_addr);
        put_cstr(out, &self.name, 16);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

/// `ofp_switch_features`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwitchFeatures {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub capabilities: u32,
    pub actions: u32,
    pub ports: Vec<PhyPort>,
}

/// `ofp_switch_config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchConfig {
    pub flags: u16,
    pub miss_send_len: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    pub buffer_id: u32,
    pub total_len: u16,
    pub in_port: u16,
    pub reason: u8,
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod {
    pub match_: Match,
    pub cookie: u64,
    pub command: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u16,
    pub flags: u16,
    pub actions: Vec<Action>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u16,
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
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
        if b.len() != DESC_STATS_LEN {
            return Err(WireError::BadLength {
                what: "ofp_desc_stats",
                length: b.len(),
                have: DESC_STATS_LEN,
            });
        }
        Ok(DescStats {
            mfr_desc: cstr(&b[0..256]),
            hw_desc: cstr(&b[256..512]),
            sw_desc: cstr(&b[512..768]),
            serial_num: cstr(&b[768..800]),
            dp_desc: cstr(&b[800..1056]),
        })
    }
    pub(crate) fn emit(&self, out: &mut Vec<u8>) {
        put_cstr(out, &self.mfr_desc, 256);
        put_cstr(out, &self.hw_desc, 256);
        put_cstr(out, &self.sw_desc, 256);
        put_cstr(out, &self.serial_num, 32);
        put_cstr(out, &self.dp_desc, 256);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsBody {
    Desc(DescStats),
    /// A stats type this codec does not interpret; body kept as bytes.
    Other {
        stats_type: u16,
        body: Vec<u8>,
    },
}

/// Every OpenFlow 1.0 message body the lab handles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Hello(Vec<u8>),
    Error {
        err_type: u16,
        code: u16,
        data: Vec<u8>,
    },
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    Vendor {
        vendor: u32,
        data: Vec<u8>,
    },
    FeaturesRequest,
    FeaturesReply(SwitchFeatures),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    PacketIn(PacketIn),
    FlowMod(FlowMod),
    PacketOut(PacketOut),
    BarrierRequest,
    BarrierReply,
    /// Stats request: `desc` has an empty body; other types keep the bytes.
    StatsRequest {
        flags: u16,
        stats_type: u16,
        body: Vec<u8>,
    },
    StatsReply {
        flags: u16,
        body: StatsBody,
    },
    /// A type this codec does not interpret (flow_removed, port_status, ...).
    Other {
        msg_type: u8,
        body: Vec<u8>,
    },
}

impl Message {
    pub fn msg_type(&self) -> u8 {
        match self {
            Message::Hello(_) => OFPT_HELLO,
            Message::Error { .. } => OFPT_ERROR,
            Message::EchoRequest(_) => OFPT_ECHO_REQUEST,
            Message::EchoReply(_) => OFPT_ECHO_REPLY,
            Message::Vendor { .. } => OFPT_VENDOR,
            Message::FeaturesRequest => OFPT_FEATURES_REQUEST,
            Message::FeaturesReply(_) => OFPT_FEATURES_REPLY,
            Message::GetConfigRequest => OFPT_GET_CONFIG_REQUEST,
            Message::GetConfigReply(_) => OFPT_GET_CONFIG_REPLY,
            Message::SetConfig(_) => OFPT_SET_CONFIG,
            Message::PacketIn(_) => OFPT_PACKET_IN,
            Message::FlowMod(_) => OFPT_FLOW_MOD,
            Message::PacketOut(_) => OFPT_PACKET_OUT,
            Message::BarrierRequest => OFPT_BARRIER_REQUEST,
            Message::BarrierReply => OFPT_BARRIER_REPLY,
            Message::StatsRequest { .. } => OFPT_STATS_REQUEST,
            Message::StatsReply { .. } => OFPT_STATS_REPLY,
            Message::Other { msg_type, .. } => *msg_type,
        }
    }
}

/// One OpenFlow 1.0 message: transaction id plus body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr {
    pub xid: u32,
    pub msg: Message,
}

fn exact_len(what: &'static str, b: &[u8], n: usize) -> Result<()> {
    if b.len() != n {
        return Err(WireError::BadLength {
            what,
            length: b.len(),
            have: n,
        });
    }
    Ok(())
}

impl Repr {
    pub fn new(xid: u32, msg: Message) -> Repr {
        Repr { xid, msg }
    }

    /// Decode one framed message (`bytes.len()` == header length).
    pub fn parse(bytes: &[u8]) -> Result<Repr> {
        let h = Header::new_checked(bytes)?;
        if h.version() != OFP10_VERSION {
            return Err(WireError::BadVersion(h.version()));
        }
        let b = bytes;
        let body = h.body();
        let msg = match h.msg_type() {
            OFPT_HELLO => Message::Hello(body.to_vec()),
            OFPT_ERROR => {
                need("error", b, 12)?;
                Message::Error {
                    err_type: be16(b, 8),
                    code: be16(b, 10),
                    data: b[12..].to_vec(),
                }
            }
            OFPT_ECHO_REQUEST => Message::EchoRequest(body.to_vec()),
            OFPT_ECHO_REPLY => Message::EchoReply(body.to_vec()),
            OFPT_VENDOR => {
                need("vendor", b, 12)?;
                Message::Vendor {
                    vendor: be32(b, 8),
                    data: b[12..].to_vec(),
                }
            }
            OFPT_FEATURES_REQUEST => {
                exact_len("features_request", b, HEADER_LEN)?;
                Message::FeaturesRequest
            }
            OFPT_FEATURES_REPLY => {
                need("features_reply", b, FEATURES_REPLY_LEN)?;
                let ports_bytes = &b[FEATURES_REPLY_LEN..];
                if !ports_bytes.len().is_multiple_of(PHY_PORT_LEN) {
                    return Err(WireError::BadLength {
                        what: "features_reply ports",
                        length: ports_bytes.len(),
                        have: ports_bytes.len(),
                    });
                }
                Message::FeaturesReply(SwitchFeatures {
                    datapath_id: be64(b, 8),
                    n_buffers: be32(b, 16),
                    n_tables: b[20],
                    capabilities: be32(b, 24),
                    actions: be32(b, 28),
                    ports: ports_bytes
                        .chunks_exact(PHY_PORT_LEN)
                        .map(PhyPort::parse)
                        .collect(),
                })
            }
            OFPT_GET_CONFIG_REQUEST => {
                exact_len("get_config_request", b, HEADER_LEN)?;
                Message::GetConfigRequest
            }
            t @ (OFPT_GET_CONFIG_REPLY | OFPT_SET_CONFIG) => {
                exact_len("switch_config", b, 12)?;
                let c = SwitchConfig {
                    flags: be16(b, 8),
                    miss_send_len: be16(b, 10),
                };
                if t == OFPT_SET_CONFIG {
                    Message::SetConfig(c)
                } else {
                    Message::GetConfigReply(c)
                }
            }
            OFPT_PACKET_IN => {
                let v = PacketInView::new_checked(b)?;
                Message::PacketIn(PacketIn {
                    buffer_id: v.buffer_id(),
                    total_len: v.total_len(),
                    in_port: v.in_port(),
                    reason: v.reason(),
                    data: v.data().to_vec(),
                })
            }
            OFPT_FLOW_MOD => {
                let v = FlowModView::new_checked(b)?;
                Message::FlowMod(FlowMod {
                    match_: Match::parse(v.match_bytes())?,
                    cookie: v.cookie(),
                    command: v.command(),
                    idle_timeout: v.idle_timeout(),
                    hard_timeout: v.hard_timeout(),
                    priority: v.priority(),
                    buffer_id: v.buffer_id(),
                    out_port: v.out_port(),
                    flags: v.flags(),
                    actions: parse_actions(v.actions())?,
                })
            }
            OFPT_PACKET_OUT => {
                let v = PacketOutView::new_checked(b)?;
                Message::PacketOut(PacketOut {
                    buffer_id: v.buffer_id(),
                    in_port: v.in_port(),
                    actions: parse_actions(v.actions())?,
                    data: v.data().to_vec(),
                })
            }
            OFPT_BARRIER_REQUEST => {
                exact_len("barrier_request", b, HEADER_LEN)?;
                Message::BarrierRequest
            }
            OFPT_BARRIER_REPLY => {
                exact_len("barrier_reply", b, HEADER_LEN)?;
                Message::BarrierReply
            }
            OFPT_STATS_REQUEST => {
                need("stats_request", b, 12)?;
                let stats_type = be16(b, 8);
                if stats_type == OFPST_DESC && b.len() != 12 {
                    return Err(WireError::BadLength {
                        what: "desc stats_request",
                        length: b.len(),
                        have: 12,
                    });
                }
                Message::StatsRequest {
                    stats_type,
                    flags: be16(b, 10),
                    body: b[12..].to_vec(),
                }
            }
            OFPT_STATS_REPLY => {
                need("stats_reply", b, 12)?;
                let stats_type = be16(b, 8);
                let body = if stats_type == OFPST_DESC {
                    StatsBody::Desc(DescStats::parse(&b[12..])?)
                } else {
                    StatsBody::Other {
                        stats_type,
                        body: b[12..].to_vec(),
                    }
                };
                Message::StatsReply {
                    flags: be16(b, 10),
                    body,
                }
            }
            t => Message::Other {
                msg_type: t,
                body: body.to_vec(),
            },
        };
        Ok(Repr { xid: h.xid(), msg })
    }

    /// Append the encoded message to `out` (the general encoder).
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = push_header(out, OFP10_VERSION, self.msg.msg_type(), self.xid);
        match &self.msg {
            Message::Hello(d) | Message::EchoRequest(d) | Message::EchoReply(d) => {
                out.extend_from_slice(d)
            }
            Message::Error {
                err_type,
                code,
                data,
            } => {
                out.extend_from_slice(&err_type.to_be_bytes());
                out.extend_from_slice(&code.to_be_bytes());
                out.extend_from_slice(data);
            }
            Message::Vendor { vendor, data } => {
                out.extend_from_slice(&vendor.to_be_bytes());
                out.extend_from_slice(data);
            }
            Message::FeaturesRequest
            | Message::GetConfigRequest
            | Message::BarrierRequest
            | Message::BarrierReply => {}
            Message::FeaturesReply(f) => {
                out.extend_from_slice(&f.datapath_id.to_be_bytes());
                out.extend_from_slice(&f.n_buffers.to_be_bytes());
                out.extend_from_slice(&[f.n_tables, 0, 0, 0]);
                out.extend_from_slice(&f.capabilities.to_be_bytes());
                out.extend_from_slice(&f.actions.to_be_bytes());
                for p in &f.ports {
                    p.emit(out);
                }
            }
            Message::GetConfigReply(c) | Message::SetConfig(c) => {
                out.extend_from_slice(&c.flags.to_be_bytes());
                out.extend_from_slice(&c.miss_send_len.to_be_bytes());
            }
            Message::PacketIn(p) => {
                out.extend_from_slice(&p.buffer_id.to_be_bytes());
                out.extend_from_slice(&p.total_len.to_be_bytes());
                out.extend_from_slice(&p.in_port.to_be_bytes());
                out.extend_from_slice(&[p.reason, 0]);
                out.extend_from_slice(&p.data);
            }
            Message::FlowMod(f) => {
                f.match_.emit(out);
                out.extend_from_slice(&f.cookie.to_be_bytes());
                out.extend_from_slice(&f.command.to_be_bytes());
                out.extend_from_slice(&f.idle_timeout.to_be_bytes());
                out.extend_from_slice(&f.hard_timeout.to_be_bytes());
                out.extend_from_slice(&f.priority.to_be_bytes());
                out.extend_from_slice(&f.buffer_id.to_be_bytes());
                out.extend_from_slice(&f.out_port.to_be_bytes());
                out.extend_from_slice(&f.flags.to_be_bytes());
                emit_actions(&f.actions, out);
            }
            Message::PacketOut(p) => {
                out.extend_from_slice(&p.buffer_id.to_be_bytes());
                out.extend_from_slice(&p.in_port.to_be_bytes());
                let alen: usize = p.actions.iter().map(Action::len).sum();
                out.extend_from_slice(&(alen as u16).to_be_bytes());
                emit_actions(&p.actions, out);
                out.extend_from_slice(&p.data);
            }
            Message::StatsRequest {
                flags,
                stats_type,
                body,
            } => {
                out.extend_from_slice(&stats_type.to_be_bytes());
                out.extend_from_slice(&flags.to_be_bytes());
                out.extend_from_slice(body);
            }
            Message::StatsReply { flags, body } => match body {
                StatsBody::Desc(d) => {
                    out.extend_from_slice(&OFPST_DESC.to_be_bytes());
                    out.extend_from_slice(&flags.to_be_bytes());
                    d.emit(out);
                }
                StatsBody::Other { stats_type, body } => {
                    out.extend_from_slice(&stats_type.to_be_bytes());
                    out.extend_from_slice(&flags.to_be_bytes());
                    out.extend_from_slice(body);
                }
            },
            Message::Other { body, .. } => out.extend_from_slice(body),
        }
        finish_len(out, start);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.emit(&mut v);
        v
    }
}

// ------------------------------------------------------------ fast paths

/// A prepared flow_mod ADD (72-byte header+match+fields and one 8-byte
/// output action, 80 bytes) that [`FlowModTemplate::write`] patches in
/// place per packet_in: xid, match fields, buffer_id and output port. This
/// is the seed's "cache the flow_mod" lesson, without the per-message
/// allocation that remained in the Ruby version.
#[derive(Debug, Clone)]
pub struct FlowModTemplate {
    bytes: [u8; FLOW_MOD_TEMPLATE_LEN],
}

pub const FLOW_MOD_TEMPLATE_LEN: usize = FLOW_MOD_LEN + ACTION_OUTPUT_LEN;

impl FlowModTemplate {
    pub fn new(idle_timeout: u16, hard_timeout: u16, priority: u16) -> FlowModTemplate {
        let fm = Repr::new(
            0,
            Message::FlowMod(FlowMod {
                match_: Match::default(),
                cookie: 0,
                command: OFPFC_ADD,
                idle_timeout,
                hard_timeout,
                priority,
                buffer_id: super::NO_BUFFER,
                out_port: OFPP_NONE,
                flags: 0,
                actions: vec![Action::Output {
                    port: 0,
                    max_len: 0,
                }],
            }),
        );
        let v = fm.to_bytes();
        let mut bytes = [0u8; FLOW_MOD_TEMPLATE_LEN];
        bytes.copy_from_slice(&v);
        FlowModTemplate { bytes }
    }

    /// Write the exact-match flow_mod answering `pi` into `out[..80]`.
    #[inline]
    pub fn write(&self, out: &mut [u8], xid: u32, pi: &PacketInView<&[u8]>) {
        let o = &mut out[..FLOW_MOD_TEMPLATE_LEN];
        o.copy_from_slice(&self.bytes);
        put32(o, 4, xid);
        let in_port = pi.in_port();
        put16(o, 12, in_port);
        let k = FlowKey::extract(pi.data()).unwrap_or_default();
        o[14..20].copy_from_slice(&k.dl_src);
        o[20..26].copy_from_slice(&k.dl_dst);
        put16(o, 26, k.dl_vlan);
        o[28] = k.dl_vlan_pcp;
        put16(o, 30, k.dl_type);
        o[32] = k.nw_tos;
        o[33] = k.nw_proto;
        put32(o, 36, k.nw_src);
        put32(o, 40, k.nw_dst);
        put16(o, 44, k.tp_src);
        put16(o, 46, k.tp_dst);
        put32(o, 64, pi.buffer_id());
        put16(o, FLOW_MOD_LEN + 4, in_port.wrapping_add(1));
    }
}

#[cfg(test)]
mod tests;
