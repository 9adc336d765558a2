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

use super::frame::{FlowKey, ETH_TYPE_ARP, ETH_TYPE_IPV4, VLAN_NONE};
use super::of10::DescStats;
use super::{
    be16, be32, be64, cstr, finish_len, need, push_header, put_cstr, Header, Result, WireError,
    HEADER_LEN, OFP13_VERSION,
};

pub const OFPT_HELLO: u8 = 0;
pub const OFPT_ERROR: u8 = 1;
pub const OFPT_ECHO_REQUEST: u8 = 2;
pub const OFPT_ECHO_REPLY: u8 = 3;
pub const OFPT_EXPERIMENTER: u8 = 4;
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

pub const OFPHET_VERSIONBITMAP: u16 = 1;
pub const OFPMT_OXM: u16 = 1;
pub const OFPXMC_OPENFLOW_BASIC: u16 = 0x8000;

pub const OFPIT_GOTO_TABLE: u16 = 1;
pub const OFPIT_WRITE_ACTIONS: u16 = 3;
pub const OFPIT_APPLY_ACTIONS: u16 = 4;
pub const OFPIT_CLEAR_ACTIONS: u16 = 5;
pub const OFPAT_OUTPUT: u16 = 0;

/// `OFPVID_PRESENT`: set in `vlan_vid` when the frame has a tag.
pub const OFPVID_PRESENT: u16 = 0x1000;
pub const OFPVID_NONE: u16 = 0x0000;

pub const FEATURES_REPLY_LEN: usize = 32;
pub const PACKET_IN_FIXED: usize = 24;
pub const FLOW_MOD_FIXED: usize = 48;
pub const PACKET_OUT_LEN: usize = 24;
pub const MULTIPART_LEN: usize = 16;
pub const PORT_LEN: usize = 64;

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
        4 + self.fields.iter().map(|f| 4 + f.value.len()).sum::<usize>()
    }

    /// Parse a match at the start of `b`; returns it and its padded length.
    pub fn parse(b: &[u8]) -> Result<(Match, usize)> {
        need("ofp_match", b, 4)?;
        if be16(b, 0) != OFPMT_OXM {
            return Err(WireError::Malformed {
                what: "ofp_match",
                why: "type is not OFPMT_OXM",
            });
        }
        let len = be16(b, 2) as usize;
        let padded = len.div_ceil(8) * 8;
        if len < 4 || padded > b.len() {
            return Err(WireError::BadLength {
                what: "ofp_match",
                length: len,
                have: b.len(),
            });
        }
        let mut fields = Vec::new();
        let mut rest = &b[4..len];
        while !rest.is_empty() {
            need("oxm header", rest, 4)?;
            let class = be16(rest, 0);
            let field = rest[2] >> 1;
            let has_mask = rest[2] & 1 == 1;
            let plen = rest[3] as usize;
            if 4 + plen > rest.len() {
                return Err(WireError::BadLength {
                    what: "oxm",
                    length: plen,
                    have: rest.len() - 4,
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
                value: rest[4..4 + plen].to_vec(),
            });
            rest = &rest[4 + plen..];
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
            Action::Output { .. } => 16,
            Action::Other { body, .. } => 4 + body.len(),
        }
    }
    fn emit(&self, out: &mut Vec<u8>) {
        match self {
            Action::Output { port, max_len } => {
                out.extend_from_slice(&OFPAT_OUTPUT.to_be_bytes());
                out.extend_from_slice(&16u16.to_be_bytes());
                out.extend_from_slice(&port.to_be_bytes());
                out.extend_from_slice(&max_len.to_be_bytes());
                out.extend_from_slice(&[0; 6]);
            }
            Action::Other { action_type, body } => {
                out.extend_from_slice(&action_type.to_be_bytes());
                out.extend_from_slice(&((4 + body.len()) as u16).to_be_bytes());
                out.extend_from_slice(body);
            }
        }
    }
}

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
            if len != 16 {
                return Err(WireError::BadLength {
                    what: "ofp_action_output",
                    length: len,
                    have: b.len(),
                });
            }
            v.push(Action::Output {
                port: be32(b, 4),
                max_len: be16(b, 8),
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
            Instruction::GotoTable(t) => {
                out.extend_from_slice(&OFPIT_GOTO_TABLE.to_be_bytes());
                out.extend_from_slice(&8u16.to_be_bytes());
                out.extend_from_slice(&[*t, 0, 0, 0]);
                return;
            }
            Instruction::Other { inst_type, body } => {
                out.extend_from_slice(&inst_type.to_be_bytes());
                out.extend_from_slice(&((4 + body.len()) as u16).to_be_bytes());
                out.extend_from_slice(body);
                return;
            }
            Instruction::ClearActions => (OFPIT_CLEAR_ACTIONS, None),
            Instruction::WriteActions(a) => (OFPIT_WRITE_ACTIONS, Some(a)),
            Instruction::ApplyActions(a) => (OFPIT_APPLY_ACTIONS, Some(a)),
        };
        let alen: usize = acts.map(|a| a.iter().map(Action::len).sum()).unwrap_or(0);
        out.extend_from_slice(&ty.to_be_bytes());
        out.extend_from_slice(&((8 + alen) as u16).to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        if let Some(a) = acts {
            for x in a {
                x.emit(out);
            }
        }
        debug_assert_eq!(out.len() - start, 8 + alen);
    }
}

pub fn parse_instructions(mut b: &[u8]) -> Result<Vec<Instruction>> {
    let mut v = Vec::new();
    while !b.is_empty() {
        need("ofp_instruction", b, 4)?;
        let ty = be16(b, 0);
        let len = be16(b, 2) as usize;
        if len < 8 || !len.is_multiple_of(8) || len > b.len() {
            return Err(WireError::BadLength {
                what: "ofp_instruction",
                length: len,
                have: b.len(),
            });
        }
        let body = &b[..len];
        v.push(match ty {
            OFPIT_GOTO_TABLE if len == 8 => Instruction::GotoTable(body[4]),
            OFPIT_WRITE_ACTIONS => Instruction::WriteActions(parse_actions(&body[8..])?),
            OFPIT_APPLY_ACTIONS => Instruction::ApplyActions(parse_actions(&body[8..])?),
            OFPIT_CLEAR_ACTIONS if len == 8 => Instruction::ClearActions,
            _ => Instruction::Other {
                inst_type: ty,
                body: body[4..].to_vec(),
            },
        });
        b = &b[len..];
    }
    Ok(v)
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
        need("ofp_hello_elem_header", b, 4)?;
        let ty = be16(b, 0);
        let len = be16(b, 2) as usize;
        if len < 4 || len > b.len() {
            return Err(WireError::BadLength {
                what: "ofp_hello_elem_header",
                length: len,
                have: b.len(),
            });
        }
        let body = &b[4..len];
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
        let mut hw = [0u8; 6];
        hw.copy_from_slice(&b[8..14]);
        Port {
            port_no: be32(b, 0),
            hw_addr: hw,
            name: cstr(&b[16..32]),
            config: be32(b, 32),
            state: be32(b, 36),
            curr: be32(b, 40),
            advertised: be32(b, 44),
            supported: be32(b, 48),
            peer: be32(b, 52),
            curr_speed: be32(b, 56),
            max_speed: be32(b, 60),
        }
    }
    fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.port_no.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.hw_addr);
        out.extend_from_slice(&[0; 2]);
        put_cstr(out, &self.name, 16);
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u32,
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultipartBody {
    Desc(DescStats),
    PortDesc(Vec<Port>),
    Other { mp_type: u16, body: Vec<u8> },
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
        let h = Header::new_checked(b)?;
        if h.version() != OFP13_VERSION {
            return Err(WireError::BadVersion(h.version()));
        }
        need("packet_in", b, PACKET_IN_FIXED + 8)?;
        let mlen = be16(b, PACKET_IN_FIXED + 2) as usize;
        let padded = mlen.div_ceil(8) * 8;
        let data_off = PACKET_IN_FIXED + padded + 2;
        if mlen < 4 || data_off > b.len() {
            return Err(WireError::BadLength {
                what: "packet_in match",
                length: mlen,
                have: b.len() - PACKET_IN_FIXED,
            });
        }
        Ok(PacketInView { buffer, data_off })
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
    pub fn reason(&self) -> u8 {
        self.buffer.as_ref()[14]
    }
    pub fn table_id(&self) -> u8 {
        self.buffer.as_ref()[15]
    }
    pub fn cookie(&self) -> u64 {
        be64(self.buffer.as_ref(), 16)
    }
    pub fn match_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[PACKET_IN_FIXED..self.data_off - 2]
    }
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[self.data_off..]
    }
    /// The `in_port` OXM, found without allocating.
    pub fn in_port(&self) -> Option<u32> {
        let m = self.match_bytes();
        let len = (be16(m, 2) as usize).min(m.len());
        let mut off = 4;
        while off + 4 <= len {
            let plen = m[off + 3] as usize;
            if off + 4 + plen > len {
                return None;
            }
            if be16(m, off) == OFPXMC_OPENFLOW_BASIC && m[off + 2] == OXM_IN_PORT << 1 && plen == 4
            {
                return Some(be32(m, off + 4));
            }
            off += 4 + plen;
        }
        None
    }
}

impl Repr {
    pub fn new(xid: u32, msg: Message) -> Repr {
        Repr { xid, msg }
    }

    pub fn parse(bytes: &[u8]) -> Result<Repr> {
        let h = Header::new_checked(bytes)?;
        if h.version() != OFP13_VERSION {
            return Err(WireError::BadVersion(h.version()));
        }
        let b = bytes;
        let body = h.body();
        let msg = match h.msg_type() {
            OFPT_HELLO => Message::Hello(parse_hello_elements(body)?),
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
            OFPT_EXPERIMENTER => {
                need("experimenter", b, 16)?;
                Message::Experimenter {
                    experimenter: be32(b, 8),
                    exp_type: be32(b, 12),
                    data: b[16..].to_vec(),
                }
            }
            OFPT_FEATURES_REQUEST => {
                exact_len("features_request", b, HEADER_LEN)?;
                Message::FeaturesRequest
            }
            OFPT_FEATURES_REPLY => {
                exact_len("features_reply", b, FEATURES_REPLY_LEN)?;
                Message::FeaturesReply(SwitchFeatures {
                    datapath_id: be64(b, 8),
                    n_buffers: be32(b, 16),
                    n_tables: b[20],
                    auxiliary_id: b[21],
                    capabilities: be32(b, 24),
                })
            }
            OFPT_GET_CONFIG_REQUEST => {
                exact_len("get_config_request", b, HEADER_LEN)?;
                Message::GetConfigRequest
            }
            t @ (OFPT_GET_CONFIG_REPLY | OFPT_SET_CONFIG) => {
                exact_len("switch_config", b, 12)?;
                let (flags, miss_send_len) = (be16(b, 8), be16(b, 10));
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
            OFPT_PACKET_IN => {
                let v = PacketInView::new_checked(b)?;
                let (m, _) = Match::parse(v.match_bytes())?;
                Message::PacketIn(PacketIn {
                    buffer_id: v.buffer_id(),
                    total_len: v.total_len(),
                    reason: v.reason(),
                    table_id: v.table_id(),
                    cookie: v.cookie(),
                    match_: m,
                    data: v.data().to_vec(),
                })
            }
            OFPT_FLOW_MOD => {
                need("flow_mod", b, FLOW_MOD_FIXED + 8)?;
                let (m, mlen) = Match::parse(&b[FLOW_MOD_FIXED..])?;
                Message::FlowMod(FlowMod {
                    cookie: be64(b, 8),
                    cookie_mask: be64(b, 16),
                    table_id: b[24],
                    command: b[25],
                    idle_timeout: be16(b, 26),
                    hard_timeout: be16(b, 28),
                    priority: be16(b, 30),
                    buffer_id: be32(b, 32),
                    out_port: be32(b, 36),
                    out_group: be32(b, 40),
                    flags: be16(b, 44),
                    match_: m,
                    instructions: parse_instructions(&b[FLOW_MOD_FIXED + mlen..])?,
                })
            }
            OFPT_PACKET_OUT => {
                need("packet_out", b, PACKET_OUT_LEN)?;
                let alen = be16(b, 16) as usize;
                if PACKET_OUT_LEN + alen > b.len() {
                    return Err(WireError::BadLength {
                        what: "packet_out actions_len",
                        length: alen,
                        have: b.len() - PACKET_OUT_LEN,
                    });
                }
                Message::PacketOut(PacketOut {
                    buffer_id: be32(b, 8),
                    in_port: be32(b, 12),
                    actions: parse_actions(&b[PACKET_OUT_LEN..PACKET_OUT_LEN + alen])?,
                    data: b[PACKET_OUT_LEN + alen..].to_vec(),
                })
            }
            OFPT_MULTIPART_REQUEST => {
                need("multipart_request", b, MULTIPART_LEN)?;
                let mp_type = be16(b, 8);
                if (mp_type == OFPMP_DESC || mp_type == OFPMP_PORT_DESC) && b.len() != MULTIPART_LEN
                {
                    return Err(WireError::BadLength {
                        what: "multipart_request body",
                        length: b.len(),
                        have: MULTIPART_LEN,
                    });
                }
                Message::MultipartRequest {
                    mp_type,
                    flags: be16(b, 10),
                    body: b[MULTIPART_LEN..].to_vec(),
                }
            }
            OFPT_MULTIPART_REPLY => {
                need("multipart_reply", b, MULTIPART_LEN)?;
                let mp_type = be16(b, 8);
                let rest = &b[MULTIPART_LEN..];
                let body = match mp_type {
                    OFPMP_DESC => MultipartBody::Desc(DescStats::parse(rest)?),
                    OFPMP_PORT_DESC => {
                        if !rest.len().is_multiple_of(PORT_LEN) {
                            return Err(WireError::BadLength {
                                what: "port_desc reply",
                                length: rest.len(),
                                have: rest.len(),
                            });
                        }
                        MultipartBody::PortDesc(
                            rest.chunks_exact(PORT_LEN).map(Port::parse).collect(),
                        )
                    }
                    _ => MultipartBody::Other {
                        mp_type,
                        body: rest.to_vec(),
                    },
                };
                Message::MultipartReply {
                    flags: be16(b, 10),
                    body,
                }
            }
            OFPT_BARRIER_REQUEST => {
                exact_len("barrier_request", b, HEADER_LEN)?;
                Message::BarrierRequest
            }
            OFPT_BARRIER_REPLY => {
                exact_len("barrier_reply", b, HEADER_LEN)?;
                Message::BarrierReply
            }
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
            Message::Hello(els) => {
                for e in els {
                    let s = out.len();
                    match e {
                        HelloElement::VersionBitmap(bm) => {
                            out.extend_from_slice(&OFPHET_VERSIONBITMAP.to_be_bytes());
                            out.extend_from_slice(&((4 + 4 * bm.len()) as u16).to_be_bytes());
                            for w in bm {
                                out.extend_from_slice(&w.to_be_bytes());
                            }
                        }
                        HelloElement::Other { elem_type, body } => {
                            out.extend_from_slice(&elem_type.to_be_bytes());
                            out.extend_from_slice(&((4 + body.len()) as u16).to_be_bytes());
                            out.extend_from_slice(body);
                        }
                    }
                    let padded = s + (out.len() - s).div_ceil(8) * 8;
                    out.resize(padded, 0);
                }
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
            } => {
                out.extend_from_slice(&flags.to_be_bytes());
                out.extend_from_slice(&miss_send_len.to_be_bytes());
            }
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
                out.extend_from_slice(&mp_type.to_be_bytes());
                out.extend_from_slice(&flags.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
                out.extend_from_slice(body);
            }
            Message::MultipartReply { flags, body } => {
                let ty = match body {
                    MultipartBody::Desc(_) => OFPMP_DESC,
                    MultipartBody::PortDesc(_) => OFPMP_PORT_DESC,
                    MultipartBody::Other { mp_type, .. } => *mp_type,
                };
                out.extend_from_slice(&ty.to_be_bytes());
                out.extend_from_slice(&flags.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
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
    let start = push_header(out, OFP13_VERSION, OFPT_FLOW_MOD, xid);
    // cookie, cookie_mask, table 0, ADD, idle 0, hard 0, priority 0x8000
    let mut fixed = [0u8; FLOW_MOD_FIXED - HEADER_LEN];
    fixed[22..24].copy_from_slice(&0x8000u16.to_be_bytes());
    fixed[24..28].copy_from_slice(&buffer_id.to_be_bytes());
    fixed[28..32].copy_from_slice(&OFPP_ANY.to_be_bytes());
    fixed[32..36].copy_from_slice(&OFPG_ANY.to_be_bytes());
    out.extend_from_slice(&fixed);
    let m = out.len();
    out.extend_from_slice(&[0, 1, 0, 0]);
    let oxm = |out: &mut Vec<u8>, field: u8, v: &[u8]| {
        out.extend_from_slice(&[0x80, 0x00, field << 1, v.len() as u8]);
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
    out[m + 2..m + 4].copy_from_slice(&(mlen as u16).to_be_bytes());
    out.resize(m + mlen.div_ceil(8) * 8, 0);
    // apply_actions(output in_port+1)
    out.extend_from_slice(&[0, 4, 0, 24, 0, 0, 0, 0, 0, 0, 0, 16]);
    out.extend_from_slice(&in_port.wrapping_add(1).to_be_bytes());
    out.extend_from_slice(&[0; 8]);
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
