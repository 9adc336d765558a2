//! OpenFlow 1.3 (wire version 0x04) messages: hello with version-bitmap
//! negotiation, features, get/set config, packet_in with an OXM match,
//! flow_mod with OXM match and instructions, packet_out, multipart desc and
//! port_desc, echo, barrier, error, experimenter. Layouts and constants
//! follow the OpenFlow Switch Specification 1.3.x (`openflow.h`).
//!
//! Invariants: as in [`super::of10`] — every nested length (hello elements,
//! `ofp_match.length` and its padding, OXM TLV lengths, instruction and
//! action lengths, `actions_len`, multipart bodies) is checked against what
//! is left before it is used. Seed: cbench-trema-speedup ("beyond cbench:
//! OpenFlow 1.3").

use super::common::{self, emit_tlv, exact_len, field as common_field, finish_len, push_header};
use super::frame::{FlowKey, ETH_TYPE_ARP, ETH_TYPE_IPV4, VLAN_NONE};
use super::{
    be16, be32, be64, cstr, need, put16, put32, put_cstr, Header, Result, WireError, HEADER_LEN,
    OFP13_VERSION,
};

pub use super::common::{
    parse_hello_elements, DescStats, HelloElement, OFPAT_OUTPUT, OFPHET_VERSIONBITMAP,
    OFPT_ECHO_REPLY, OFPT_ECHO_REQUEST, OFPT_ERROR, OFPT_FEATURES_REPLY, OFPT_FEATURES_REQUEST,
    OFPT_FLOW_MOD, OFPT_FLOW_REMOVED, OFPT_GET_CONFIG_REPLY, OFPT_GET_CONFIG_REQUEST, OFPT_HELLO,
    OFPT_PACKET_IN, OFPT_PACKET_OUT, OFPT_PORT_STATUS, OFPT_SET_CONFIG,
};

pub const OFPT_EXPERIMENTER: u8 = 4;
pub const OFPT_MULTIPART_REQUEST: u8 = 18;
pub const OFPT_MULTIPART_REPLY: u8 = 19;
pub const OFPT_BARRIER_REQUEST: u8 = 20;
pub const OFPT_BARRIER_REPLY: u8 = 21;

pub const OFPFC_ADD: u8 = 0;
pub const OFPFC_MODIFY: u8 = 1;
pub const OFPFC_MODIFY_STRICT: u8 = 2;
pub const OFPFC_DELETE: u8 = 3;
pub const OFPFC_DELETE_STRICT: u8 = 4;

pub const OFPP_MAX: u32 = 0xffff_ff00;
pub const OFPP_CONTROLLER: u32 = 0xffff_fffd;
pub const OFPP_ANY: u32 = 0xffff_ffff;
pub const OFPG_ANY: u32 = 0xffff_ffff;

pub const OFPMP_DESC: u16 = 0;
pub const OFPMP_PORT_DESC: u16 = 13;

pub const OFPMT_OXM: u16 = 1;
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;

pub const OFPIT_GOTO_TABLE: u16 = 1;
pub const OFPIT_WRITE_ACTIONS: u16 = 3;
pub const OFPIT_APPLY_ACTIONS: u16 = 4;
pub const OFPIT_CLEAR_ACTIONS: u16 = 5;

/// `OFPVID_PRESENT`: set in `vlan_vid` when the frame has a tag.
pub const OFPVID_PRESENT: u16 = 0x1000;
pub const OFPVID_NONE: u16 = 0x0000;

pub const FEATURES_REPLY_LEN: usize = 32;
pub const PACKET_IN_FIXED: usize = 24;
pub const FLOW_MOD_FIXED: usize = 48;
pub const PACKET_OUT_LEN: usize = 24;
pub const MULTIPART_LEN: usize = 16;
/// Zero bytes after a multipart message's type and flags.
const MULTIPART_PAD: usize = MULTIPART_LEN - common_field::STATS_FLAGS - 2;
pub const PORT_LEN: usize = 64;
pub const ACTION_OUTPUT_LEN: usize = 16;

/// Byte offsets of the 1.3 layouts, each named once: from the start of
/// the message, or of the match, OXM, port, action or instruction for
/// those.
pub(crate) mod field {
    use core::ops::Range;

    pub mod packet_in {
        pub const REASON: usize = 14;
        pub const TABLE_ID: usize = 15;
        pub const COOKIE: usize = 16;
    }
    pub mod flow_mod {
        pub const COOKIE: usize = 8;
        pub const COOKIE_MASK: usize = 16;
        pub const TABLE_ID: usize = 24;
        pub const COMMAND: usize = 25;
        pub const IDLE_TIMEOUT: usize = 26;
        pub const HARD_TIMEOUT: usize = 28;
        pub const PRIORITY: usize = 30;
        pub const BUFFER_ID: usize = 32;
        pub const OUT_PORT: usize = 36;
        pub const OUT_GROUP: usize = 40;
        pub const FLAGS: usize = 44;
    }
    pub mod packet_out {
        pub const IN_PORT: usize = 12;
        pub const ACTIONS_LEN: usize = 16;
    }
    pub mod features {
        pub const AUXILIARY_ID: usize = 21;
    }
    pub mod experimenter {
        pub const EXP_TYPE: usize = 12;
        pub const DATA: usize = 16;
    }
    /// `ofp_match`, from its start.
    pub mod matching {
        pub const TYPE: usize = 0;
        pub const LENGTH: usize = 2;
        pub const OXMS: usize = 4;
    }
    /// An OXM TLV, from its start.
    pub mod oxm {
        pub const CLASS: usize = 0;
        pub const FIELD: usize = 2;
        pub const LENGTH: usize = 3;
        pub const VALUE: usize = 4;
    }
    /// `ofp_port`, from its start.
    pub mod port {
        use super::Range;
        pub const PORT_NO: usize = 0;
        pub const HW_ADDR: Range<usize> = 8..14;
        pub const NAME: Range<usize> = 16..32;
        /// The first of six words: config, state, curr, advertised,
        /// supported, peer.
        pub const CONFIG: usize = 32;
        pub const CURR_SPEED: usize = 56;
        pub const MAX_SPEED: usize = 60;
    }
    /// `ofp_action_output`, from its start (the port is common).
    pub mod output {
        pub const MAX_LEN: usize = 8;
    }
    /// An instruction, from its start.
    pub mod instruction {
        pub const TABLE_ID: usize = 4;
        pub const ACTIONS: usize = 8;
    }
}

// OXM field numbers (OFPXMT_OFB_*).
pub const OXM_IN_PORT: u8 = 0;
pub const OXM_ETH_DST: u8 = 3;
pub const OXM_ETH_SRC: u8 = 4;
pub const OXM_ETH_TYPE: u8 = 5;
pub const OXM_VLAN_VID: u8 = 6;
pub const OXM_VLAN_PCP: u8 = 7;
pub const OXM_IP_DSCP: u8 = 8;
pub const OXM_IP_PROTO: u8 = 10;
pub const OXM_IPV4_SRC: u8 = 11;
pub const OXM_IPV4_DST: u8 = 12;
pub const OXM_TCP_SRC: u8 = 13;
pub const OXM_TCP_DST: u8 = 14;
pub const OXM_UDP_SRC: u8 = 15;
pub const OXM_UDP_DST: u8 = 16;
pub const OXM_ICMPV4_TYPE: u8 = 19;
pub const OXM_ICMPV4_CODE: u8 = 20;
pub const OXM_ARP_OP: u8 = 21;
pub const OXM_ARP_SPA: u8 = 22;
pub const OXM_ARP_TPA: u8 = 23;

/// Payload length of a known OpenFlow-basic OXM field (without mask).
fn oxm_len(field: u8) -> Option<usize> {
    Some(match field {
        OXM_IN_PORT | 1 => 4,
        2 => 8,
        OXM_ETH_DST | OXM_ETH_SRC => 6,
        OXM_ETH_TYPE | OXM_VLAN_VID => 2,
        OXM_VLAN_PCP | OXM_IP_DSCP | 9 | OXM_IP_PROTO => 1,
        OXM_IPV4_SRC | OXM_IPV4_DST => 4,
        OXM_TCP_SRC..=18 => 2,
        OXM_ICMPV4_TYPE | OXM_ICMPV4_CODE => 1,
        OXM_ARP_OP => 2,
        OXM_ARP_SPA | OXM_ARP_TPA => 4,
        _ => return None,
    })
}

/// One OXM TLV. Known OpenFlow-basic fields without mask are checked for
/// their exact payload size; everything else is kept as bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oxm {
    pub class: u16,
    pub field: u8,
    pub has_mask: bool,
    /// Value followed by the mask when `has_mask`.
    pub value: Vec<u8>,
}

impl Oxm {
    pub fn basic(field: u8, value: &[u8]) -> Oxm {
        Oxm {
            class: OFPXMC_OPENFLOW_BASIC,
            field,
            has_mask: false,
            value: value.to_vec(),
        }
    }
    fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.class.to_be_bytes());
        out.push((self.field << 1) | self.has_mask as u8);
        out.push(self.value.len() as u8);
        out.extend_from_slice(&self.value);
    }
    /// The value as a big-endian integer (for fields up to 8 bytes).
    pub fn as_u64(&self) -> u64 {
        self.value
            .iter()
            .take(8)
            .fold(0u64, |a, &b| (a << 8) | b as u64)
    }
}

/// `ofp_match` of type OXM.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Match {
    pub fields: Vec<Oxm>,
}

impl Match {
    /// Bytes the match occupies on the wire, padding included.
    pub fn wire_len(&self) -> usize {
        self.unpadded_len().div_ceil(8) * 8
    }
    fn unpadded_len(&self) -> usize {
        field::matching::OXMS
            + self
                .fields
                .iter()
                .map(|f| field::oxm::VALUE + f.value.len())
                .sum::<usize>()
    }

    /// Parse a match at the start of `b`; returns it and its padded length.
    pub fn parse(b: &[u8]) -> Result<(Match, usize)> {
        use field::{matching as m, oxm as o};
        need("ofp_match", b, m::OXMS)?;
        if be16(b, m::TYPE) != OFPMT_OXM {
            return Err(WireError::Malformed {
                what: "ofp_match",
                why: "type is not OFPMT_OXM",
            });
        }
        let len = be16(b, m::LENGTH) as usize;
        let padded = len.div_ceil(8) * 8;
        if len < m::OXMS || padded > b.len() {
            return Err(WireError::BadLength {
                what: "ofp_match",
                length: len,
                have: b.len(),
            });
        }
        let mut fields = Vec::new();
        let mut rest = &b[m::OXMS..len];
        while !rest.is_empty() {
            need("oxm header", rest, o::VALUE)?;
            let class = be16(rest, o::CLASS);
            let field = rest[o::FIELD] >> 1;
            let has_mask = rest[o::FIELD] & 1 == 1;
            let plen = rest[o::LENGTH] as usize;
            if o::VALUE + plen > rest.len() {
                return Err(WireError::BadLength {
                    what: "oxm",
                    length: plen,
                    have: rest.len() - o::VALUE,
                });
            }
            if class == OFPXMC_OPENFLOW_BASIC {
                if let Some(n) = oxm_len(field) {
                    let want = if has_mask { 2 * n } else { n };
                    if plen != want {
                        return Err(WireError::BadLength {
                            what: "oxm payload",
                            length: plen,
                            have: want,
                        });
                    }
                }
            }
            fields.push(Oxm {
                class,
                field,
                has_mask,
                value: rest[o::VALUE..o::VALUE + plen].to_vec(),
            });
            rest = &rest[o::VALUE + plen..];
        }
        Ok((Match { fields }, padded))
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&OFPMT_OXM.to_be_bytes());
        out.extend_from_slice(&(self.unpadded_len() as u16).to_be_bytes());
        for f in &self.fields {
            f.emit(out);
        }
        let padded = start + self.wire_len();
        out.resize(padded, 0);
    }

    pub fn get(&self, field: u8) -> Option<&Oxm> {
        self.fields
            .iter()
            .find(|f| f.class == OFPXMC_OPENFLOW_BASIC && f.field == field && !f.has_mask)
    }

    /// The packet's `in_port` OXM, if present.
    pub fn in_port(&self) -> Option<u32> {
        self.get(OXM_IN_PORT).map(|f| f.as_u64() as u32)
    }

    /// Exact match on the packet's headers with OXM prerequisites kept
    /// (ip fields only for IPv4, ports only for TCP/UDP, ...).
    pub fn exact(in_port: u32, k: &FlowKey) -> Match {
        let mut f = vec![
            Oxm::basic(OXM_IN_PORT, &in_port.to_be_bytes()),
            Oxm::basic(OXM_ETH_DST, &k.dl_dst),
            Oxm::basic(OXM_ETH_SRC, &k.dl_src),
            Oxm::basic(OXM_ETH_TYPE, &k.dl_type.to_be_bytes()),
            Oxm::basic(OXM_VLAN_VID, &vlan_vid(k).to_be_bytes()),
        ];
        match k.dl_type {
            ETH_TYPE_IPV4 => {
                f.push(Oxm::basic(OXM_IP_PROTO, &[k.nw_proto]));
                f.push(Oxm::basic(OXM_IPV4_SRC, &k.nw_src.to_be_bytes()));
                f.push(Oxm::basic(OXM_IPV4_DST, &k.nw_dst.to_be_bytes()));
                let ports = match k.nw_proto {
                    6 => Some((OXM_TCP_SRC, OXM_TCP_DST)),
                    17 => Some((OXM_UDP_SRC, OXM_UDP_DST)),
                    _ => None,
                };
                if let Some((s, d)) = ports {
                    f.push(Oxm::basic(s, &k.tp_src.to_be_bytes()));
                    f.push(Oxm::basic(d, &k.tp_dst.to_be_bytes()));
                } else if k.nw_proto == 1 {
                    f.push(Oxm::basic(OXM_ICMPV4_TYPE, &[k.tp_src as u8]));
                    f.push(Oxm::basic(OXM_ICMPV4_CODE, &[k.tp_dst as u8]));
                }
            }
            ETH_TYPE_ARP => {
                f.push(Oxm::basic(OXM_ARP_OP, &(k.nw_proto as u16).to_be_bytes()));
                f.push(Oxm::basic(OXM_ARP_SPA, &k.nw_src.to_be_bytes()));
                f.push(Oxm::basic(OXM_ARP_TPA, &k.nw_dst.to_be_bytes()));
            }
            _ => {}
        }
        Match { fields: f }
    }
}

fn vlan_vid(k: &FlowKey) -> u16 {
    if k.dl_vlan == VLAN_NONE {
        OFPVID_NONE
    } else {
        k.dl_vlan | OFPVID_PRESENT
    }
}

/// One action (OpenFlow 1.3 layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Output { port: u32, max_len: u16 },
    Other { action_type: u16, body: Vec<u8> },
}

impl Action {
    fn len(&self) -> usize {
        match self {
            Action::Output { .. } => ACTION_OUTPUT_LEN,
            Action::Other { body, .. } => common_field::TLV_BODY + body.len(),
        }
    }
    fn emit(&self, out: &mut Vec<u8>) {
        match self {
            Action::Output { port, max_len } => {
                out.extend_from_slice(&OFPAT_OUTPUT.to_be_bytes());
                out.extend_from_slice(&(ACTION_OUTPUT_LEN as u16).to_be_bytes());
                out.extend_from_slice(&port.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
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
            port: be32(a, common_field::OUTPUT_PORT),
            max_len: be16(a, field::output::MAX_LEN),
        },
        |action_type, body| Action::Other { action_type, body },
    )
}

/// One instruction of a flow_mod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    GotoTable(u8),
    WriteActions(Vec<Action>),
    ApplyActions(Vec<Action>),
    ClearActions,
    Other { inst_type: u16, body: Vec<u8> },
}

impl Instruction {
    fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let (ty, acts): (u16, Option<&Vec<Action>>) = match self {
            Instruction::GotoTable(t) => return emit_tlv(out, OFPIT_GOTO_TABLE, &[*t, 0, 0, 0]),
            Instruction::Other { inst_type, body } => return emit_tlv(out, *inst_type, body),
            Instruction::ClearActions => (OFPIT_CLEAR_ACTIONS, None),
            Instruction::WriteActions(a) => (OFPIT_WRITE_ACTIONS, Some(a)),
            Instruction::ApplyActions(a) => (OFPIT_APPLY_ACTIONS, Some(a)),
        };
        let alen: usize = acts.map(|a| a.iter().map(Action::len).sum()).unwrap_or(0);
        let len = field::instruction::ACTIONS + alen;
        out.extend_from_slice(&ty.to_be_bytes());
        out.extend_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        if let Some(a) = acts {
            for x in a {
                x.emit(out);
            }
        }
        debug_assert_eq!(out.len() - start, len);
    }
}

pub fn parse_instructions(b: &[u8]) -> Result<Vec<Instruction>> {
    use field::instruction as f;
    common::walk_tlvs("ofp_instruction", b)
        .map(|t| {
            let t = t?;
            let (bytes, bare) = (t.bytes, t.bytes.len() == f::ACTIONS);
            Ok(match t.tlv_type {
                OFPIT_GOTO_TABLE if bare => Instruction::GotoTable(bytes[f::TABLE_ID]),
                OFPIT_WRITE_ACTIONS => {
                    Instruction::WriteActions(parse_actions(&bytes[f::ACTIONS..])?)
                }
                OFPIT_APPLY_ACTIONS => {
                    Instruction::ApplyActions(parse_actions(&bytes[f::ACTIONS..])?)
                }
                OFPIT_CLEAR_ACTIONS if bare => Instruction::ClearActions,
                inst_type => Instruction::Other {
                    inst_type,
                    body: t.body().to_vec(),
                },
            })
        })
        .collect()
}

/// Version negotiation (OpenFlow 1.3.1 §6.3.1): given the peer's hello
/// (a whole message of any version) and the versions we support, the
/// version both sides will speak, or `None` (send HELLO_FAILED and close).
pub fn negotiate(peer_hello: &[u8], ours: &[u8]) -> Option<u8> {
    let h = Header::new_checked(peer_hello).ok()?;
    let peer_bitmap = parse_hello_elements(h.body()).ok().and_then(|els| {
        els.into_iter().find_map(|e| match e {
            HelloElement::VersionBitmap(b) => Some(b),
            _ => None,
        })
    });
    match peer_bitmap {
        Some(bm) => ours
            .iter()
            .copied()
            .filter(|&v| {
                let (w, bit) = (v as usize / 32, v as u32 % 32);
                bm.get(w).is_some_and(|word| word & (1 << bit) != 0)
            })
            .max(),
        None => {
            // Without a bitmap: the lower of the two highest versions,
            // if we support it.
            let our_max = ours.iter().copied().max()?;
            let v = h.version().min(our_max);
            ours.contains(&v).then_some(v)
        }
    }
}

/// `ofp_port` (1.3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Port {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
    pub curr_speed: u32,
    pub max_speed: u32,
}

impl Port {
    fn parse(b: &[u8]) -> Port {
        use field::port as f;
        let mut hw = [0u8; 6];
        hw.copy_from_slice(&b[f::HW_ADDR]);
        let [config, state, curr, advertised, supported, peer] =
            common::parse_port_words(b, f::CONFIG);
        Port {
            port_no: be32(b, f::PORT_NO),
            hw_addr: hw,
            name: cstr(&b[f::NAME]),
            config,
            state,
            curr,
            advertised,
            supported,
            peer,
            curr_speed: be32(b, f::CURR_SPEED),
            max_speed: be32(b, f::MAX_SPEED),
        }
    }
    fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.port_no.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.hw_addr);
        out.extend_from_slice(&[0; 2]);
        put_cstr(out, &self.name, field::port::NAME.len());
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchFeatures {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
}

impl SwitchFeatures {
    fn parse(b: &[u8]) -> Result<SwitchFeatures> {
        exact_len("features_reply", b, FEATURES_REPLY_LEN)?;
        Ok(SwitchFeatures {
            datapath_id: be64(b, common_field::DATAPATH_ID),
            n_buffers: be32(b, common_field::N_BUFFERS),
            n_tables: b[common_field::N_TABLES],
            auxiliary_id: b[field::features::AUXILIARY_ID],
            capabilities: be32(b, common_field::CAPABILITIES),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    pub buffer_id: u32,
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub match_: Match,
    pub data: Vec<u8>,
}

impl PacketIn {
    fn parse(b: &[u8]) -> Result<PacketIn> {
        let v = PacketInView::new_checked(b)?;
        let (m, _) = Match::parse(v.match_bytes())?;
        Ok(PacketIn {
            buffer_id: v.buffer_id(),
            total_len: v.total_len(),
            reason: v.reason(),
            table_id: v.table_id(),
            cookie: v.cookie(),
            match_: m,
            data: v.data().to_vec(),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: u8,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    pub match_: Match,
    pub instructions: Vec<Instruction>,
}

impl FlowMod {
    fn parse(b: &[u8]) -> Result<FlowMod> {
        use field::flow_mod as f;
        need("flow_mod", b, FLOW_MOD_FIXED + 8)?;
        let (m, mlen) = Match::parse(&b[FLOW_MOD_FIXED..])?;
        Ok(FlowMod {
            cookie: be64(b, f::COOKIE),
            cookie_mask: be64(b, f::COOKIE_MASK),
            table_id: b[f::TABLE_ID],
            command: b[f::COMMAND],
            idle_timeout: be16(b, f::IDLE_TIMEOUT),
            hard_timeout: be16(b, f::HARD_TIMEOUT),
            priority: be16(b, f::PRIORITY),
            buffer_id: be32(b, f::BUFFER_ID),
            out_port: be32(b, f::OUT_PORT),
            out_group: be32(b, f::OUT_GROUP),
            flags: be16(b, f::FLAGS),
            match_: m,
            instructions: parse_instructions(&b[FLOW_MOD_FIXED + mlen..])?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u32,
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
}

impl PacketOut {
    fn parse(b: &[u8]) -> Result<PacketOut> {
        let at = field::packet_out::ACTIONS_LEN;
        let alen = common::packet_out_actions_len(b, PACKET_OUT_LEN, at)?;
        let data = PACKET_OUT_LEN + alen;
        Ok(PacketOut {
            buffer_id: be32(b, common_field::BUFFER_ID),
            in_port: be32(b, field::packet_out::IN_PORT),
            actions: parse_actions(&b[PACKET_OUT_LEN..data])?,
            data: b[data..].to_vec(),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultipartBody {
    Desc(DescStats),
    PortDesc(Vec<Port>),
    Other { mp_type: u16, body: Vec<u8> },
}

impl MultipartBody {
    fn parse(mp_type: u16, rest: &[u8]) -> Result<MultipartBody> {
        Ok(match mp_type {
            OFPMP_DESC => MultipartBody::Desc(DescStats::parse(rest)?),
            OFPMP_PORT_DESC => MultipartBody::PortDesc(common::parse_records(
                "port_desc reply",
                rest,
                PORT_LEN,
                Port::parse,
            )?),
            _ => MultipartBody::Other {
                mp_type,
                body: rest.to_vec(),
            },
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Hello(Vec<HelloElement>),
    Error {
        err_type: u16,
        code: u16,
        data: Vec<u8>,
    },
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    Experimenter {
        experimenter: u32,
        exp_type: u32,
        data: Vec<u8>,
    },
    FeaturesRequest,
    FeaturesReply(SwitchFeatures),
    GetConfigRequest,
    GetConfigReply {
        flags: u16,
        miss_send_len: u16,
    },
    SetConfig {
        flags: u16,
        miss_send_len: u16,
    },
    PacketIn(PacketIn),
    FlowMod(FlowMod),
    PacketOut(PacketOut),
    MultipartRequest {
        mp_type: u16,
        flags: u16,
        body: Vec<u8>,
    },
    MultipartReply {
        flags: u16,
        body: MultipartBody,
    },
    BarrierRequest,
    BarrierReply,
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
            Message::Experimenter { .. } => OFPT_EXPERIMENTER,
            Message::FeaturesRequest => OFPT_FEATURES_REQUEST,
            Message::FeaturesReply(_) => OFPT_FEATURES_REPLY,
            Message::GetConfigRequest => OFPT_GET_CONFIG_REQUEST,
            Message::GetConfigReply { .. } => OFPT_GET_CONFIG_REPLY,
            Message::SetConfig { .. } => OFPT_SET_CONFIG,
            Message::PacketIn(_) => OFPT_PACKET_IN,
            Message::FlowMod(_) => OFPT_FLOW_MOD,
            Message::PacketOut(_) => OFPT_PACKET_OUT,
            Message::MultipartRequest { .. } => OFPT_MULTIPART_REQUEST,
            Message::MultipartReply { .. } => OFPT_MULTIPART_REPLY,
            Message::BarrierRequest => OFPT_BARRIER_REQUEST,
            Message::BarrierReply => OFPT_BARRIER_REPLY,
            Message::Other { msg_type, .. } => *msg_type,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repr {
    pub xid: u32,
    pub msg: Message,
}

/// Checked view of a 1.3 packet_in: the match length is validated, so
/// [`PacketInView::data`] and [`PacketInView::match_bytes`] are in range.
#[derive(Debug, Clone, Copy)]
pub struct PacketInView<T: AsRef<[u8]>> {
    buffer: T,
    data_off: usize,
}

impl<T: AsRef<[u8]>> PacketInView<T> {
    pub fn new_checked(buffer: T) -> Result<Self> {
        let b = buffer.as_ref();
        Header::new_versioned(b, OFP13_VERSION)?;
        need("packet_in", b, PACKET_IN_FIXED + 8)?;
        let mlen = be16(b, PACKET_IN_FIXED + field::matching::LENGTH) as usize;
        let padded = mlen.div_ceil(8) * 8;
        // Two bytes of padding follow the match.
        let data_off = PACKET_IN_FIXED + padded + 2;
        if mlen < field::matching::OXMS || data_off > b.len() {
            return Err(WireError::BadLength {
                what: "packet_in match",
                length: mlen,
                have: b.len() - PACKET_IN_FIXED,
            });
        }
        Ok(PacketInView { buffer, data_off })
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
    pub fn reason(&self) -> u8 {
        self.buffer.as_ref()[field::packet_in::REASON]
    }
    pub fn table_id(&self) -> u8 {
        self.buffer.as_ref()[field::packet_in::TABLE_ID]
    }
    pub fn cookie(&self) -> u64 {
        be64(self.buffer.as_ref(), field::packet_in::COOKIE)
    }
    pub fn match_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[PACKET_IN_FIXED..self.data_off - 2]
    }
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[self.data_off..]
    }
    /// The `in_port` OXM, found without allocating.
    pub fn in_port(&self) -> Option<u32> {
        use field::oxm as o;
        let m = self.match_bytes();
        let len = (be16(m, field::matching::LENGTH) as usize).min(m.len());
        let mut off = field::matching::OXMS;
        while off + o::VALUE <= len {
            let plen = m[off + o::LENGTH] as usize;
            if off + o::VALUE + plen > len {
                return None;
            }
            if be16(m, off + o::CLASS) == OFPXMC_OPENFLOW_BASIC
                && m[off + o::FIELD] == OXM_IN_PORT << 1
                && plen == 4
            {
                return Some(be32(m, off + o::VALUE));
            }
            off += o::VALUE + plen;
        }
        None
    }
}

impl Repr {
    pub fn new(xid: u32, msg: Message) -> Repr {
        Repr { xid, msg }
    }

    pub fn parse(bytes: &[u8]) -> Result<Repr> {
        let h = Header::new_versioned(bytes, OFP13_VERSION)?;
        let b = bytes;
        let body = h.body();
        let msg = match h.msg_type() {
            OFPT_HELLO => Message::Hello(parse_hello_elements(body)?),
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
            OFPT_EXPERIMENTER => {
                need("experimenter", b, field::experimenter::DATA)?;
                Message::Experimenter {
                    experimenter: be32(b, common_field::VENDOR),
                    exp_type: be32(b, field::experimenter::EXP_TYPE),
                    data: b[field::experimenter::DATA..].to_vec(),
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
                if t == OFPT_SET_CONFIG {
                    Message::SetConfig {
                        flags,
                        miss_send_len,
                    }
                } else {
                    Message::GetConfigReply {
                        flags,
                        miss_send_len,
                    }
                }
            }
            OFPT_PACKET_IN => Message::PacketIn(PacketIn::parse(b)?),
            OFPT_FLOW_MOD => Message::FlowMod(FlowMod::parse(b)?),
            OFPT_PACKET_OUT => Message::PacketOut(PacketOut::parse(b)?),
            OFPT_MULTIPART_REQUEST => {
                let (mp_type, flags, rest) =
                    common::parse_stats_header("multipart_request", b, MULTIPART_LEN)?;
                let bodiless = mp_type == OFPMP_DESC || mp_type == OFPMP_PORT_DESC;
                common::empty_request("multipart_request body", b, MULTIPART_LEN, bodiless)?;
                Message::MultipartRequest {
                    mp_type,
                    flags,
                    body: rest.to_vec(),
                }
            }
            OFPT_MULTIPART_REPLY => {
                let (mp_type, flags, rest) =
                    common::parse_stats_header("multipart_reply", b, MULTIPART_LEN)?;
                let body = MultipartBody::parse(mp_type, rest)?;
                Message::MultipartReply { flags, body }
            }
            OFPT_BARRIER_REQUEST => {
                common::header_only("barrier_request", b, Message::BarrierRequest)?
            }
            OFPT_BARRIER_REPLY => common::header_only("barrier_reply", b, Message::BarrierReply)?,
            t => Message::Other {
                msg_type: t,
                body: body.to_vec(),
            },
        };
        Ok(Repr { xid: h.xid(), msg })
    }

    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = push_header(out, OFP13_VERSION, self.msg.msg_type(), self.xid);
        match &self.msg {
            Message::Hello(els) => common::emit_hello_elements(out, els),
            Message::Error {
                err_type,
                code,
                data,
            } => common::emit_error(out, *err_type, *code, data),
            Message::EchoRequest(d) | Message::EchoReply(d) => out.extend_from_slice(d),
            Message::Experimenter {
                experimenter,
                exp_type,
                data,
            } => {
                out.extend_from_slice(&experimenter.to_be_bytes());
                out.extend_from_slice(&exp_type.to_be_bytes());
                out.extend_from_slice(data);
            }
            Message::FeaturesRequest
            | Message::GetConfigRequest
            | Message::BarrierRequest
            | Message::BarrierReply => {}
            Message::FeaturesReply(f) => {
                out.extend_from_slice(&f.datapath_id.to_be_bytes());
                out.extend_from_slice(&f.n_buffers.to_be_bytes());
                out.extend_from_slice(&[f.n_tables, f.auxiliary_id, 0, 0]);
                out.extend_from_slice(&f.capabilities.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            Message::GetConfigReply {
                flags,
                miss_send_len,
            }
            | Message::SetConfig {
                flags,
                miss_send_len,
            } => common::emit_switch_config(out, *flags, *miss_send_len),
            Message::PacketIn(p) => {
                out.extend_from_slice(&p.buffer_id.to_be_bytes());
                out.extend_from_slice(&p.total_len.to_be_bytes());
                out.extend_from_slice(&[p.reason, p.table_id]);
                out.extend_from_slice(&p.cookie.to_be_bytes());
                p.match_.emit(out);
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&p.data);
            }
            Message::FlowMod(f) => {
                out.extend_from_slice(&f.cookie.to_be_bytes());
                out.extend_from_slice(&f.cookie_mask.to_be_bytes());
                out.extend_from_slice(&[f.table_id, f.command]);
                out.extend_from_slice(&f.idle_timeout.to_be_bytes());
                out.extend_from_slice(&f.hard_timeout.to_be_bytes());
                out.extend_from_slice(&f.priority.to_be_bytes());
                out.extend_from_slice(&f.buffer_id.to_be_bytes());
                out.extend_from_slice(&f.out_port.to_be_bytes());
                out.extend_from_slice(&f.out_group.to_be_bytes());
                out.extend_from_slice(&f.flags.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                f.match_.emit(out);
                for i in &f.instructions {
                    i.emit(out);
                }
            }
            Message::PacketOut(p) => {
                out.extend_from_slice(&p.buffer_id.to_be_bytes());
                out.extend_from_slice(&p.in_port.to_be_bytes());
                let alen: usize = p.actions.iter().map(Action::len).sum();
                out.extend_from_slice(&(alen as u16).to_be_bytes());
                out.extend_from_slice(&[0; 6]);
                for a in &p.actions {
                    a.emit(out);
                }
                out.extend_from_slice(&p.data);
            }
            Message::MultipartRequest {
                mp_type,
                flags,
                body,
            } => {
                common::emit_stats_header(out, *mp_type, *flags, MULTIPART_PAD);
                out.extend_from_slice(body);
            }
            Message::MultipartReply { flags, body } => {
                let ty = match body {
                    MultipartBody::Desc(_) => OFPMP_DESC,
                    MultipartBody::PortDesc(_) => OFPMP_PORT_DESC,
                    MultipartBody::Other { mp_type, .. } => *mp_type,
                };
                common::emit_stats_header(out, ty, *flags, MULTIPART_PAD);
                match body {
                    MultipartBody::Desc(d) => d.emit(out),
                    MultipartBody::PortDesc(ps) => {
                        for p in ps {
                            p.emit(out);
                        }
                    }
                    MultipartBody::Other { body, .. } => out.extend_from_slice(body),
                }
            }
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

/// The cbench app's reply in 1.3, written straight into `out` without
/// building a [`Repr`]: flow_mod ADD, exact OXM match from the packet,
/// the packet's buffer_id, apply-actions output to `in_port + 1`. The bytes
/// equal the general encoder's (tested); only the allocations are gone.
pub fn write_exact_flow_mod(
    out: &mut Vec<u8>,
    xid: u32,
    in_port: u32,
    k: &FlowKey,
    buffer_id: u32,
) {
    use field::flow_mod as f;
    let start = push_header(out, OFP13_VERSION, OFPT_FLOW_MOD, xid);
    // cookie, cookie_mask, table 0, ADD, idle 0, hard 0, priority 0x8000
    let mut fixed = [0u8; FLOW_MOD_FIXED];
    put16(&mut fixed, f::PRIORITY, 0x8000);
    put32(&mut fixed, f::BUFFER_ID, buffer_id);
    put32(&mut fixed, f::OUT_PORT, OFPP_ANY);
    put32(&mut fixed, f::OUT_GROUP, OFPG_ANY);
    out.extend_from_slice(&fixed[HEADER_LEN..]);
    let m = out.len();
    // The match's type, and its length once its fields are written.
    out.extend_from_slice(&OFPMT_OXM.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    let oxm = |out: &mut Vec<u8>, field: u8, v: &[u8]| {
        out.extend_from_slice(&OFPXMC_OPENFLOW_BASIC.to_be_bytes());
        out.extend_from_slice(&[field << 1, v.len() as u8]);
        out.extend_from_slice(v);
    };
    oxm(out, OXM_IN_PORT, &in_port.to_be_bytes());
    oxm(out, OXM_ETH_DST, &k.dl_dst);
    oxm(out, OXM_ETH_SRC, &k.dl_src);
    oxm(out, OXM_ETH_TYPE, &k.dl_type.to_be_bytes());
    oxm(out, OXM_VLAN_VID, &vlan_vid(k).to_be_bytes());
    match k.dl_type {
        ETH_TYPE_IPV4 => {
            oxm(out, OXM_IP_PROTO, &[k.nw_proto]);
            oxm(out, OXM_IPV4_SRC, &k.nw_src.to_be_bytes());
            oxm(out, OXM_IPV4_DST, &k.nw_dst.to_be_bytes());
            match k.nw_proto {
                6 => {
                    oxm(out, OXM_TCP_SRC, &k.tp_src.to_be_bytes());
                    oxm(out, OXM_TCP_DST, &k.tp_dst.to_be_bytes());
                }
                17 => {
                    oxm(out, OXM_UDP_SRC, &k.tp_src.to_be_bytes());
                    oxm(out, OXM_UDP_DST, &k.tp_dst.to_be_bytes());
                }
                1 => {
                    oxm(out, OXM_ICMPV4_TYPE, &[k.tp_src as u8]);
                    oxm(out, OXM_ICMPV4_CODE, &[k.tp_dst as u8]);
                }
                _ => {}
            }
        }
        ETH_TYPE_ARP => {
            oxm(out, OXM_ARP_OP, &(k.nw_proto as u16).to_be_bytes());
            oxm(out, OXM_ARP_SPA, &k.nw_src.to_be_bytes());
            oxm(out, OXM_ARP_TPA, &k.nw_dst.to_be_bytes());
        }
        _ => {}
    }
    let mlen = out.len() - m;
    put16(out, m + field::matching::LENGTH, mlen as u16);
    out.resize(m + mlen.div_ceil(8) * 8, 0);
    // apply_actions(output in_port+1)
    let len = field::instruction::ACTIONS + ACTION_OUTPUT_LEN;
    out.extend_from_slice(&OFPIT_APPLY_ACTIONS.to_be_bytes());
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    Action::Output {
        port: in_port.wrapping_add(1),
        max_len: 0,
    }
    .emit(out);
    finish_len(out, start);
}

/// The general-encoder form of [`write_exact_flow_mod`].
pub fn exact_flow_mod(in_port: u32, k: &FlowKey, buffer_id: u32) -> FlowMod {
    FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: 0,
        command: OFPFC_ADD,
        idle_timeout: 0,
        hard_timeout: 0,
        priority: 0x8000,
        buffer_id,
        out_port: OFPP_ANY,
        out_group: OFPG_ANY,
        flags: 0,
        match_: Match::exact(in_port, k),
        instructions: vec![Instruction::ApplyActions(vec![Action::Output {
            port: in_port.wrapping_add(1),
            max_len: 0,
        }])],
    }
}

#[cfg(test)]
mod tests;
