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

use super::common::{self, emit_tlv, field as common_field, finish_len, push_header};
use super::frame::FlowKey;
use super::{
    be16, be32, be64, cstr, need, put16, put32, put_cstr, Header, Result, WireError, OFP10_VERSION,
};

pub use super::common::{
    DescStats, DESC_STATS_LEN, OFPAT_OUTPUT, OFPT_ECHO_REPLY, OFPT_ECHO_REQUEST, OFPT_ERROR,
    OFPT_FEATURES_REPLY, OFPT_FEATURES_REQUEST, OFPT_FLOW_MOD, OFPT_FLOW_REMOVED,
    OFPT_GET_CONFIG_REPLY, OFPT_GET_CONFIG_REQUEST, OFPT_HELLO, OFPT_PACKET_IN, OFPT_PACKET_OUT,
    OFPT_PORT_STATUS, OFPT_SET_CONFIG,
};

pub const OFPT_VENDOR: u8 = 4;
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
pub const ACTION_OUTPUT_LEN: usize = 8;
/// Size of a stats request or reply before its body.
pub const STATS_LEN: usize = 12;

/// Byte offsets of the 1.0 layouts, each named once: from the start of
/// the message, or of the match, port or action for those.
pub(crate) mod field {
    use core::ops::Range;

    pub mod packet_in {
        pub const IN_PORT: usize = 14;
        pub const REASON: usize = 16;
    }
    pub mod flow_mod {
        use super::Range;
        pub const MATCH: Range<usize> = 8..48;
        pub const COOKIE: usize = 48;
        pub const COMMAND: usize = 56;
        pub const IDLE_TIMEOUT: usize = 58;
        pub const HARD_TIMEOUT: usize = 60;
        pub const PRIORITY: usize = 62;
        pub const BUFFER_ID: usize = 64;
        pub const OUT_PORT: usize = 68;
        pub const FLAGS: usize = 70;
    }
    pub mod packet_out {
        pub const IN_PORT: usize = 12;
        pub const ACTIONS_LEN: usize = 14;
    }
    pub mod features {
        pub const ACTIONS: usize = 28;
    }
    pub mod vendor {
        pub const DATA: usize = 12;
    }
    /// `ofp_match`, from its start.
    pub mod matching {
        use super::Range;
        pub const WILDCARDS: usize = 0;
        pub const IN_PORT: usize = 4;
        pub const DL_SRC: Range<usize> = 6..12;
        pub const DL_DST: Range<usize> = 12..18;
        pub const DL_VLAN: usize = 18;
        pub const DL_VLAN_PCP: usize = 20;
        pub const DL_TYPE: usize = 22;
        pub const NW_TOS: usize = 24;
        pub const NW_PROTO: usize = 25;
        pub const NW_SRC: usize = 28;
        pub const NW_DST: usize = 32;
        pub const TP_SRC: usize = 36;
        pub const TP_DST: usize = 38;
    }
    /// `ofp_phy_port`, from its start.
    pub mod port {
        use super::Range;
        pub const PORT_NO: usize = 0;
        pub const HW_ADDR: Range<usize> = 2..8;
        pub const NAME: Range<usize> = 8..24;
        /// The first of six words: config, state, curr, advertised,
        /// supported, peer.
        pub const CONFIG: usize = 24;
    }
    /// `ofp_action_output`, from its start (the port is common).
    pub mod output {
        pub const MAX_LEN: usize = 6;
    }
}

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
        be32(self.buffer.as_ref(), common_field::XID)
    }
    pub fn buffer_id(&self) -> u32 {
        be32(self.buffer.as_ref(), common_field::BUFFER_ID)
    }
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), common_field::TOTAL_LEN)
    }
    pub fn in_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::packet_in::IN_PORT)
    }
    pub fn reason(&self) -> u8 {
        self.buffer.as_ref()[field::packet_in::REASON]
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
        be32(self.buffer.as_ref(), common_field::XID)
    }
    pub fn match_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[field::flow_mod::MATCH]
    }
    pub fn cookie(&self) -> u64 {
        be64(self.buffer.as_ref(), field::flow_mod::COOKIE)
    }
    pub fn command(&self) -> u16 {
        be16(self.buffer.as_ref(), field::flow_mod::COMMAND)
    }
    pub fn idle_timeout(&self) -> u16 {
        be16(self.buffer.as_ref(), field::flow_mod::IDLE_TIMEOUT)
    }
    pub fn hard_timeout(&self) -> u16 {
        be16(self.buffer.as_ref(), field::flow_mod::HARD_TIMEOUT)
    }
    pub fn priority(&self) -> u16 {
        be16(self.buffer.as_ref(), field::flow_mod::PRIORITY)
    }
    pub fn buffer_id(&self) -> u32 {
        be32(self.buffer.as_ref(), field::flow_mod::BUFFER_ID)
    }
    pub fn out_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::flow_mod::OUT_PORT)
    }
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), field::flow_mod::FLAGS)
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
        common::packet_out_actions_len(
            h.as_bytes(),
            PACKET_OUT_LEN,
            field::packet_out::ACTIONS_LEN,
        )?;
        Ok(PacketOutView { buffer })
    }
    pub fn xid(&self) -> u32 {
        be32(self.buffer.as_ref(), common_field::XID)
    }
    pub fn buffer_id(&self) -> u32 {
        be32(self.buffer.as_ref(), common_field::BUFFER_ID)
    }
    pub fn in_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::packet_out::IN_PORT)
    }
    fn actions_len(&self) -> usize {
        be16(self.buffer.as_ref(), field::packet_out::ACTIONS_LEN) as usize
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
        use field::matching as f;
        need("ofp_match", b, MATCH_LEN)?;
        let mut m = Match {
            wildcards: be32(b, f::WILDCARDS),
            in_port: be16(b, f::IN_PORT),
            ..Match::default()
        };
        m.dl_src.copy_from_slice(&b[f::DL_SRC]);
        m.dl_dst.copy_from_slice(&b[f::DL_DST]);
        m.dl_vlan = be16(b, f::DL_VLAN);
        m.dl_vlan_pcp = b[f::DL_VLAN_PCP];
        m.dl_type = be16(b, f::DL_TYPE);
        m.nw_tos = b[f::NW_TOS];
        m.nw_proto = b[f::NW_PROTO];
        m.nw_src = be32(b, f::NW_SRC);
        m.nw_dst = be32(b, f::NW_DST);
        m.tp_src = be16(b, f::TP_SRC);
        m.tp_dst = be16(b, f::TP_DST);
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
            Action::Other { body, .. } => common_field::TLV_BODY + body.len(),
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
            Action::Other { action_type, body } => emit_tlv(out, *action_type, body),
        }
    }
}

/// Parse an action list; each action's length must be a non-zero multiple
/// of 8 that fits in what is left.
pub fn parse_actions(b: &[u8]) -> Result<Vec<Action>> {
    common::parse_action_list(
        b,
        ACTION_OUTPUT_LEN,
        |a| Action::Output {
            port: be16(a, common_field::OUTPUT_PORT),
            max_len: be16(a, field::output::MAX_LEN),
        },
        |action_type, body| Action::Other { action_type, body },
    )
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
        use field::port as f;
        let mut hw = [0u8; 6];
        hw.copy_from_slice(&b[f::HW_ADDR]);
        let [config, state, curr, advertised, supported, peer] =
            common::parse_port_words(b, f::CONFIG);
        PhyPort {
            port_no: be16(b, f::PORT_NO),
            hw_addr: hw,
            name: cstr(&b[f::NAME]),
            config,
            state,
            curr,
            advertised,
            supported,
            peer,
        }
    }
    fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.port_no.to_be_bytes());
        out.extend_from_slice(&self.hw_addr);
        put_cstr(out, &self.name, field::port::NAME.len());
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

impl SwitchFeatures {
    fn parse(b: &[u8]) -> Result<SwitchFeatures> {
        need("features_reply", b, FEATURES_REPLY_LEN)?;
        Ok(SwitchFeatures {
            datapath_id: be64(b, common_field::DATAPATH_ID),
            n_buffers: be32(b, common_field::N_BUFFERS),
            n_tables: b[common_field::N_TABLES],
            capabilities: be32(b, common_field::CAPABILITIES),
            actions: be32(b, field::features::ACTIONS),
            ports: common::parse_records(
                "features_reply ports",
                &b[FEATURES_REPLY_LEN..],
                PHY_PORT_LEN,
                PhyPort::parse,
            )?,
        })
    }
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

impl PacketIn {
    fn parse(b: &[u8]) -> Result<PacketIn> {
        let v = PacketInView::new_checked(b)?;
        Ok(PacketIn {
            buffer_id: v.buffer_id(),
            total_len: v.total_len(),
            in_port: v.in_port(),
            reason: v.reason(),
            data: v.data().to_vec(),
        })
    }
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

impl FlowMod {
    fn parse(b: &[u8]) -> Result<FlowMod> {
        let v = FlowModView::new_checked(b)?;
        Ok(FlowMod {
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
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u16,
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
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

impl Repr {
    pub fn new(xid: u32, msg: Message) -> Repr {
        Repr { xid, msg }
    }

    /// Decode one framed message (`bytes.len()` == header length).
    pub fn parse(bytes: &[u8]) -> Result<Repr> {
        let h = Header::new_versioned(bytes, OFP10_VERSION)?;
        let b = bytes;
        let body = h.body();
        let msg = match h.msg_type() {
            OFPT_HELLO => Message::Hello(body.to_vec()),
            OFPT_ERROR => {
                let (err_type, code, data) = common::parse_error(b)?;
                Message::Error {
                    err_type,
                    code,
                    data,
                }
            }
            OFPT_ECHO_REQUEST => Message::EchoRequest(body.to_vec()),
            OFPT_ECHO_REPLY => Message::EchoReply(body.to_vec()),
            OFPT_VENDOR => {
                need("vendor", b, field::vendor::DATA)?;
                Message::Vendor {
                    vendor: be32(b, common_field::VENDOR),
                    data: b[field::vendor::DATA..].to_vec(),
                }
            }
            OFPT_FEATURES_REQUEST => {
                common::header_only("features_request", b, Message::FeaturesRequest)?
            }
            OFPT_FEATURES_REPLY => Message::FeaturesReply(SwitchFeatures::parse(b)?),
            OFPT_GET_CONFIG_REQUEST => {
                common::header_only("get_config_request", b, Message::GetConfigRequest)?
            }
            t @ (OFPT_GET_CONFIG_REPLY | OFPT_SET_CONFIG) => {
                let (flags, miss_send_len) = common::parse_switch_config(b)?;
                let c = SwitchConfig {
                    flags,
                    miss_send_len,
                };
                if t == OFPT_SET_CONFIG {
                    Message::SetConfig(c)
                } else {
                    Message::GetConfigReply(c)
                }
            }
            OFPT_PACKET_IN => Message::PacketIn(PacketIn::parse(b)?),
            OFPT_FLOW_MOD => Message::FlowMod(FlowMod::parse(b)?),
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
                common::header_only("barrier_request", b, Message::BarrierRequest)?
            }
            OFPT_BARRIER_REPLY => common::header_only("barrier_reply", b, Message::BarrierReply)?,
            OFPT_STATS_REQUEST => {
                let (stats_type, flags, rest) =
                    common::parse_stats_header("stats_request", b, STATS_LEN)?;
                let desc = stats_type == OFPST_DESC;
                common::empty_request("desc stats_request", b, STATS_LEN, desc)?;
                Message::StatsRequest {
                    stats_type,
                    flags,
                    body: rest.to_vec(),
                }
            }
            OFPT_STATS_REPLY => {
                let (stats_type, flags, rest) =
                    common::parse_stats_header("stats_reply", b, STATS_LEN)?;
                let body = if stats_type == OFPST_DESC {
                    StatsBody::Desc(DescStats::parse(rest)?)
                } else {
                    StatsBody::Other {
                        stats_type,
                        body: rest.to_vec(),
                    }
                };
                Message::StatsReply { flags, body }
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
            } => common::emit_error(out, *err_type, *code, data),
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
                common::emit_switch_config(out, c.flags, c.miss_send_len)
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
                common::emit_stats_header(out, *stats_type, *flags, 0);
                out.extend_from_slice(body);
            }
            Message::StatsReply { flags, body } => match body {
                StatsBody::Desc(d) => {
                    common::emit_stats_header(out, OFPST_DESC, *flags, 0);
                    d.emit(out);
                }
                StatsBody::Other { stats_type, body } => {
                    common::emit_stats_header(out, *stats_type, *flags, 0);
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
        Self::patch(o, xid, pi);
    }

    /// Append the exact-match flow_mod answering `pi` to `out`: the
    /// template is copied to the end of `out` and patched there. Building
    /// it in a local buffer and copying that cost ~9 ns per flow_mod, the
    /// controller's largest user-space cost: the copy's 16-byte loads
    /// read back bytes the patch had just stored 1, 2 and 4 at a time,
    /// which store-to-load forwarding cannot serve, so every load waited
    /// for the stores to reach the cache.
    #[inline(always)]
    pub fn append(&self, out: &mut Vec<u8>, xid: u32, pi: &PacketInView<&[u8]>) {
        let s = out.len();
        out.extend_from_slice(&self.bytes);
        Self::patch(&mut out[s..], xid, pi);
    }

    /// The template's bytes (xid, match, buffer_id and output port zero).
    #[inline(always)]
    pub fn bytes(&self) -> &[u8; FLOW_MOD_TEMPLATE_LEN] {
        &self.bytes
    }

    /// Patch a copy of the template (`o[..80]`) for `pi`.
    #[inline(always)]
    fn patch(o: &mut [u8], xid: u32, pi: &PacketInView<&[u8]>) {
        let o = o
            .first_chunk_mut::<FLOW_MOD_TEMPLATE_LEN>()
            .expect("a flow_mod's room: callers give the template's length");
        Self::patch_with(o, xid, pi.buffer_id(), pi.in_port(), pi.data());
    }

    /// [`patch`](Self::patch) for a packet_in given as its fixed part
    /// (`PACKET_IN_LEN` bytes, whose length and type the caller checked)
    /// and its frame: no view to build and no check to repeat per message.
    #[inline(always)]
    pub fn patch_fixed(o: &mut [u8; FLOW_MOD_TEMPLATE_LEN], pi: &[u8; PACKET_IN_LEN], data: &[u8]) {
        Self::patch_with(
            o,
            be32(pi, common_field::XID),
            be32(pi, common_field::BUFFER_ID),
            be16(pi, field::packet_in::IN_PORT),
            data,
        );
    }

    /// Writes a packet_in's xid, buffer_id, in_port (and in_port + 1 as the
    /// output port) and the exact match of its frame `data` into a copy
    /// of the template.
    #[inline(always)]
    fn patch_with(
        o: &mut [u8; FLOW_MOD_TEMPLATE_LEN],
        xid: u32,
        buffer_id: u32,
        in_port: u16,
        data: &[u8],
    ) {
        const M: usize = field::flow_mod::MATCH.start;
        put32(o, common_field::XID, xid);
        put16(o, M + field::matching::IN_PORT, in_port);
        put32(o, field::flow_mod::BUFFER_ID, buffer_id);
        put16(
            o,
            FLOW_MOD_LEN + common_field::OUTPUT_PORT,
            in_port.wrapping_add(1),
        );
        exact_match_fields(&mut o[M..M + MATCH_LEN], data);
    }
}

/// Write the frame's exact-match fields into a zeroed `ofp_match` (all
/// but wildcards and in_port): the same fields [`FlowKey::extract`] reads
/// and [`Match::exact`] encodes, copied from the frame as they lie on the
/// wire (both big-endian) instead of through a [`FlowKey`]. The template
/// path's own copy of that logic, to spare the hot loop the byte swaps
/// there and back; a property test holds the two to the same bytes.
#[inline(always)]
fn exact_match_fields(m: &mut [u8], f: &[u8]) {
    use super::frame::{ETH_TYPE_ARP, ETH_TYPE_IPV4, ETH_TYPE_VLAN, VLAN_NONE};
    use field::matching as mf;
    let Some(eth) = f.first_chunk::<14>() else {
        return;
    };
    m[mf::DL_SRC].copy_from_slice(&eth[6..12]);
    m[mf::DL_DST].copy_from_slice(&eth[0..6]);
    put16(m, mf::DL_VLAN, VLAN_NONE);
    let mut ty = u16::from_be_bytes([eth[12], eth[13]]);
    let mut off = 14;
    if ty == ETH_TYPE_VLAN {
        let Some(tag) = f.get(14..18) else {
            return;
        };
        let tci = u16::from_be_bytes([tag[0], tag[1]]);
        put16(m, mf::DL_VLAN, tci & 0x0fff);
        m[mf::DL_VLAN_PCP] = (tci >> 13) as u8;
        ty = u16::from_be_bytes([tag[2], tag[3]]);
        off = 18;
    }
    put16(m, mf::DL_TYPE, ty);
    let l3 = &f[off..];
    match ty {
        ETH_TYPE_IPV4 => {
            let Some(ip) = l3.first_chunk::<20>() else {
                return;
            };
            m[mf::NW_TOS] = ip[1] & 0xfc;
            let proto = ip[9];
            m[mf::NW_PROTO] = proto;
            // nw_src and nw_dst lie side by side in both.
            m[mf::NW_SRC..mf::NW_DST + 4].copy_from_slice(&ip[12..20]);
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
            if ihl < 20 || frag != 0 {
                return;
            }
            let Some(l4) = l3.get(ihl..ihl + 4) else {
                return;
            };
            match proto {
                // tp_src and tp_dst too.
                6 | 17 => m[mf::TP_SRC..mf::TP_DST + 2].copy_from_slice(l4),
                1 => {
                    put16(m, mf::TP_SRC, l4[0] as u16);
                    put16(m, mf::TP_DST, l4[1] as u16);
                }
                _ => {}
            }
        }
        ETH_TYPE_ARP => {
            let Some(arp) = l3.first_chunk::<28>() else {
                return;
            };
            if arp[6] == 0 {
                m[mf::NW_PROTO] = arp[7]; // the opcode, when it fits
            }
            m[mf::NW_SRC..mf::NW_SRC + 4].copy_from_slice(&arp[14..18]);
            m[mf::NW_DST..mf::NW_DST + 4].copy_from_slice(&arp[24..28]);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
