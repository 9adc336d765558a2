//! The message handling and the apps: version negotiation (HELLO, then
//! FEATURES_REQUEST), echo, FEATURES_REPLY and OFPT_ERROR from switches,
//! and each app's answer to a packet_in (the cbench template fast path,
//! `--naive` through the general encoder, the learning switch, the
//! trivial responder), for OpenFlow 1.0 and 1.3.
//!
//! Invariants: `handle` gets exactly one whole message (framed by `conn`)
//! and appends only whole messages to the output; a malformed message, a
//! first message other than HELLO or a version other than the negotiated
//! one is an error, and the caller closes that connection alone (after
//! sending the error reply); the learning table is bounded (cleared at
//! 2^20 entries) and never learns a multicast source.

use super::log::{Logger, PeerLog};
use super::{ControllerConfig, ControllerStats};
use crate::wire::common::field as f;
use crate::wire::frame::FlowKey;
use crate::wire::{
    be16, be32, be64, of10, of13, put32, Header, WireError, NO_BUFFER, OFP10_VERSION, OFP13_VERSION,
};
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;

/// Which application answers packet_ins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum App {
    Cbench,
    Learning,
    Trivial,
}

/// A name that is not one of the apps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown app '{0}': use cbench, learning or trivial")]
pub struct UnknownApp(pub String);

impl commbench_core::error::IsUsage for UnknownApp {
    fn is_usage(&self) -> bool {
        true
    }
}

impl std::str::FromStr for App {
    type Err = UnknownApp;
    fn from_str(s: &str) -> Result<App, UnknownApp> {
        match s {
            "cbench" => Ok(App::Cbench),
            "learning" => Ok(App::Learning),
            "trivial" => Ok(App::Trivial),
            _ => Err(UnknownApp(s.to_owned())),
        }
    }
}

/// Why the controller closes one switch's connection (the others
/// continue): what the switch sent that the controller cannot answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    /// The byte stream cannot be framed, or a message's header is bad.
    #[error("malformed message: {0}")]
    Malformed(WireError),
    #[error("first message is type {0}, not HELLO")]
    NotHello(u8),
    #[error("version negotiation failed: peer hello {peer:#04x}, {ours:#04x} not offered (sent HELLO_FAILED)")]
    Negotiation { peer: u8, ours: u8 },
    #[error(
        "message with version {got:#04x} after negotiating {negotiated:#04x} (sent BAD_VERSION)"
    )]
    VersionChanged { got: u8, negotiated: u8 },
    #[error("malformed packet_in: {0}")]
    PacketIn(WireError),
    /// A message of the packet_in type that the general decoder reads as
    /// another message.
    #[error("not a packet_in")]
    NotPacketIn,
}

/// Precomputed replies shared by a worker's connections.
pub(super) struct Templates {
    pub(super) fm10: of10::FlowModTemplate,
    pub(super) trivial10: Vec<u8>,
    pub(super) trivial13: Vec<u8>,
}

#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) fn handle(
    st: &mut ControllerStats,
    t: &Templates,
    cfg: &ControllerConfig,
    ours: u8,
    out: &mut Vec<u8>,
    version: &mut u8,
    dpid: &mut Option<u64>,
    macs: &mut HashMap<[u8; 6], u32>,
    pc: &mut PeerCtx,
    msg: &[u8],
) -> Result<(), PeerError> {
    let h = Header::new_checked(msg).map_err(PeerError::Malformed)?;
    let (ty, xid, ver) = (h.msg_type(), h.xid(), h.version());
    if *version == 0 {
        if ty != 0 {
            return Err(PeerError::NotHello(ty));
        }
        match of13::negotiate(msg, &[ours]) {
            Some(v) => {
                *version = v;
                // FEATURES_REQUEST, xid 2.
                out.extend_from_slice(&[v, 5, 0, 8, 0, 0, 0, 2]);
                return Ok(());
            }
            None => {
                // HELLO_FAILED / INCOMPATIBLE, then close.
                let text = format!("we speak only version {ours:#04x}");
                let mut e = of10::Repr::new(
                    xid,
                    of10::Message::Error {
                        err_type: of10::OFPET_HELLO_FAILED,
                        code: of10::OFPHFC_INCOMPATIBLE,
                        data: text.into_bytes(),
                    },
                )
                .to_bytes();
                e[0] = ours;
                out.extend_from_slice(&e);
                return Err(PeerError::Negotiation { peer: ver, ours });
            }
        }
    }
    if ver != *version {
        let mut e = of10::Repr::new(
            xid,
            of10::Message::Error {
                err_type: of10::OFPET_BAD_REQUEST,
                code: of10::OFPBRC_BAD_VERSION,
                data: msg[..msg.len().min(64)].to_vec(),
            },
        )
        .to_bytes();
        e[0] = *version;
        out.extend_from_slice(&e);
        return Err(PeerError::VersionChanged {
            got: ver,
            negotiated: *version,
        });
    }
    // Types with the same number in 1.0 and 1.3: hello 0, error 1, echo 2/3,
    // features 5/6, packet_in 10.
    match ty {
        10 => {
            st.packet_in += 1;
            if cfg.extra_work_ns > 0 {
                let ticks = commbench_core::clock::tsc().ns_to_ticks(cfg.extra_work_ns as f64);
                commbench_core::delay::tsc_delay_ticks(ticks);
            }
            if *version == OFP10_VERSION {
                packet_in10(st, t, cfg, out, macs, xid, msg)
            } else {
                packet_in13(st, t, cfg, out, macs, xid, msg)
            }
        }
        2 => {
            st.echo_request += 1;
            let s = out.len();
            out.extend_from_slice(msg);
            out[s + 1] = 3;
            Ok(())
        }
        6 => {
            if msg.len() >= f::DATAPATH_ID + 8 {
                *dpid = Some(be64(msg, f::DATAPATH_ID));
                if cfg.log_connections {
                    pc.log.line(format!(
                        "controller: {}: datapath {:#x} ready",
                        pc.peer,
                        dpid.unwrap_or(0)
                    ));
                }
            }
            Ok(())
        }
        1 => {
            st.error_msgs += 1;
            if msg.len() >= f::ERROR_DATA && cfg.log_connections && pc.plog.allow() {
                pc.log.line(format!(
                    "controller: {}: OFPT_ERROR type {} code {} from the switch",
                    pc.peer,
                    be16(msg, f::ERROR_TYPE),
                    be16(msg, f::ERROR_CODE)
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The cbench app's template path over a run of messages: answers each
/// whole OpenFlow 1.0 packet_in at the front of `buf` with its flow_mod,
/// appended to `out`, and returns the bytes consumed. It stops at the
/// first message that is not a whole 1.0 packet_in of valid length (or at
/// a started one), which the caller hands to [`handle`]. Only for a
/// connection that negotiated 1.0, under `--app cbench` without `--naive`
/// or `extra_work_ns`.
///
/// This is the controller's hot loop, the same work [`handle`] does for a
/// packet_in with the per-message decisions (negotiated version, app,
/// variant, calibration delay, the type dispatch) taken once per run: in
/// the general path they cost about as much user time as building the
/// flow_mod itself.
#[inline(never)]
#[allow(unsafe_code)]
pub(super) fn packet_in_run10(
    st: &mut ControllerStats,
    t: &Templates,
    out: &mut Vec<u8>,
    buf: &[u8],
) -> usize {
    const FM: usize = of10::FLOW_MOD_TEMPLATE_LEN;
    let tmpl = *t.fm10.bytes();
    let mut off = 0;
    let mut n = 0u64;
    loop {
        if buf.len() - off < of10::PACKET_IN_LEN {
            break;
        }
        let room = (out.capacity() - out.len()) / FM;
        if room == 0 {
            // A flow_mod is no longer than a full-size probe (cbench's),
            // so this is room for the rest of a run of probes in one go;
            // shorter packet_ins take another turn of this loop.
            out.reserve(buf.len() - off + FM);
            continue;
        }
        // The output's length is kept here, not in the vector, while the
        // run fills the room it has: no capacity check per flow_mod.
        let base = out.as_mut_ptr();
        let mut len = out.len();
        let mut i = 0;
        let mut stopped = true;
        while i < room {
            let rest = &buf[off..];
            let Some(fixed) = rest.first_chunk::<{ of10::PACKET_IN_LEN }>() else {
                break;
            };
            let n_msg = be16(fixed, f::LENGTH) as usize;
            if fixed[0] != OFP10_VERSION
                || fixed[1] != of10::OFPT_PACKET_IN
                || n_msg < of10::PACKET_IN_LEN
                || n_msg > rest.len()
            {
                break;
            }
            let data = &rest[of10::PACKET_IN_LEN..n_msg];
            // SAFETY: `len + FM <= out.capacity()` (`i < room`, and
            // `room` flow_mods fit in the capacity past the length this
            // run started from), so `dst..dst + FM` lies inside the
            // vector's allocation and does not overlap `tmpl` (a local)
            // or `buf` (borrowed apart from `out`); the copy initialises
            // those FM bytes before the reference to them is made.
            unsafe {
                let dst = base.add(len);
                std::ptr::copy_nonoverlapping(tmpl.as_ptr(), dst, FM);
                of10::FlowModTemplate::patch_fixed(&mut *dst.cast::<[u8; FM]>(), fixed, data);
            }
            len += FM;
            off += n_msg;
            i += 1;
            if i == room {
                stopped = false;
            }
        }
        // SAFETY: every byte below `len` is initialised: the vector's
        // own up to its old length, each flow_mod's written above.
        unsafe { out.set_len(len) };
        n += i as u64;
        if stopped {
            break;
        }
    }
    st.packet_in += n;
    st.flow_mod_sent += n;
    off
}

/// What `handle` needs to log for one peer.
pub(super) struct PeerCtx<'a> {
    pub(super) log: &'a Logger,
    pub(super) plog: &'a mut PeerLog,
    pub(super) peer: SocketAddr,
}

/// Append a prepared flow_mod with this xid and the buffer_id (read at
/// `buffer_id_at`, which differs between versions).
fn push_prepared(
    out: &mut Vec<u8>,
    prepared: &[u8],
    xid: u32,
    buffer_id_at: usize,
    buffer_id: u32,
) {
    let s = out.len();
    out.extend_from_slice(prepared);
    put32(&mut out[s..], f::XID, xid);
    put32(&mut out[s..], buffer_id_at, buffer_id);
}

fn bad(e: WireError) -> PeerError {
    PeerError::PacketIn(e)
}

fn packet_in10(
    st: &mut ControllerStats,
    t: &Templates,
    cfg: &ControllerConfig,
    out: &mut Vec<u8>,
    macs: &mut HashMap<[u8; 6], u32>,
    xid: u32,
    msg: &[u8],
) -> Result<(), PeerError> {
    match (cfg.app, cfg.naive) {
        (App::Cbench, false) => {
            let v = of10::PacketInView::new_checked(msg).map_err(bad)?;
            t.fm10.append(out, xid, &v);
            st.flow_mod_sent += 1;
        }
        (App::Cbench, true) => {
            let r = of10::Repr::parse(msg).map_err(bad)?;
            let of10::Message::PacketIn(pi) = r.msg else {
                return Err(PeerError::NotPacketIn);
            };
            let key = FlowKey::extract(&pi.data).unwrap_or_default();
            let fm = of10::Repr::new(
                r.xid,
                of10::Message::FlowMod(of10::FlowMod {
                    match_: of10::Match::exact(pi.in_port, &key),
                    cookie: 0,
                    command: of10::OFPFC_ADD,
                    idle_timeout: 0,
                    hard_timeout: 0,
                    priority: 0x8000,
                    buffer_id: pi.buffer_id,
                    out_port: of10::OFPP_NONE,
                    flags: 0,
                    actions: vec![of10::Action::Output {
                        port: pi.in_port.wrapping_add(1),
                        max_len: 0,
                    }],
                }),
            );
            let bytes = fm.to_bytes();
            out.extend_from_slice(&bytes);
            st.flow_mod_sent += 1;
        }
        (App::Trivial, _) => {
            let v = of10::PacketInView::new_checked(msg).map_err(bad)?;
            let at = of10::field::flow_mod::BUFFER_ID;
            push_prepared(out, &t.trivial10, xid, at, v.buffer_id());
            st.flow_mod_sent += 1;
        }
        (App::Learning, _) => {
            let v = of10::PacketInView::new_checked(msg).map_err(bad)?;
            let Some(key) = FlowKey::extract(v.data()) else {
                return Ok(());
            };
            let in_port = v.in_port();
            learn(macs, key.dl_src, in_port as u32);
            let dst = (key.dl_dst[0] & 1 == 0)
                .then(|| macs.get(&key.dl_dst).copied())
                .flatten();
            match dst {
                Some(p) if p != in_port as u32 => {
                    of10::Repr::new(
                        xid,
                        of10::Message::FlowMod(of10::FlowMod {
                            match_: of10::Match::exact(in_port, &key),
                            cookie: 0,
                            command: of10::OFPFC_ADD,
                            idle_timeout: 60,
                            hard_timeout: 0,
                            priority: 0x8000,
                            buffer_id: v.buffer_id(),
                            out_port: of10::OFPP_NONE,
                            flags: 0,
                            actions: vec![of10::Action::Output {
                                port: p as u16,
                                max_len: 0,
                            }],
                        }),
                    )
                    .emit(out);
                    st.flow_mod_sent += 1;
                }
                _ => {
                    let data = if v.buffer_id() == NO_BUFFER {
                        v.data().to_vec()
                    } else {
                        vec![]
                    };
                    of10::Repr::new(
                        xid,
                        of10::Message::PacketOut(of10::PacketOut {
                            buffer_id: v.buffer_id(),
                            in_port,
                            actions: vec![of10::Action::Output {
                                port: of10::OFPP_FLOOD,
                                max_len: 0,
                            }],
                            data,
                        }),
                    )
                    .emit(out);
                    st.packet_out_sent += 1;
                }
            }
        }
    }
    Ok(())
}

fn learn(macs: &mut HashMap<[u8; 6], u32>, src: [u8; 6], port: u32) {
    if src[0] & 1 != 0 {
        return; // never learn a multicast source
    }
    if macs.len() >= 1 << 20 && !macs.contains_key(&src) {
        macs.clear(); // bounded: a peer cannot grow the table without limit
    }
    macs.insert(src, port);
}

fn packet_in13(
    st: &mut ControllerStats,
    t: &Templates,
    cfg: &ControllerConfig,
    out: &mut Vec<u8>,
    macs: &mut HashMap<[u8; 6], u32>,
    xid: u32,
    msg: &[u8],
) -> Result<(), PeerError> {
    match (cfg.app, cfg.naive) {
        (App::Cbench, false) => {
            let v = of13::PacketInView::new_checked(msg).map_err(bad)?;
            let key = FlowKey::extract(v.data()).unwrap_or_default();
            of13::write_exact_flow_mod(out, xid, v.in_port().unwrap_or(0), &key, v.buffer_id());
            st.flow_mod_sent += 1;
        }
        (App::Cbench, true) => {
            let r = of13::Repr::parse(msg).map_err(bad)?;
            let of13::Message::PacketIn(pi) = r.msg else {
                return Err(PeerError::NotPacketIn);
            };
            let key = FlowKey::extract(&pi.data).unwrap_or_default();
            let in_port = pi.match_.in_port().unwrap_or(0);
            let bytes = of13::Repr::new(
                r.xid,
                of13::Message::FlowMod(of13::exact_flow_mod(in_port, &key, pi.buffer_id)),
            )
            .to_bytes();
            out.extend_from_slice(&bytes);
            st.flow_mod_sent += 1;
        }
        (App::Trivial, _) => {
            let v = of13::PacketInView::new_checked(msg).map_err(bad)?;
            let at = of13::field::flow_mod::BUFFER_ID;
            push_prepared(out, &t.trivial13, xid, at, v.buffer_id());
            st.flow_mod_sent += 1;
        }
        (App::Learning, _) => {
            let v = of13::PacketInView::new_checked(msg).map_err(bad)?;
            let Some(key) = FlowKey::extract(v.data()) else {
                return Ok(());
            };
            let in_port = v.in_port().unwrap_or(0);
            learn(macs, key.dl_src, in_port);
            let dst = (key.dl_dst[0] & 1 == 0)
                .then(|| macs.get(&key.dl_dst).copied())
                .flatten();
            match dst {
                Some(p) if p != in_port => {
                    let mut fm = of13::exact_flow_mod(in_port, &key, v.buffer_id());
                    fm.idle_timeout = 60;
                    fm.instructions = vec![of13::Instruction::ApplyActions(vec![
                        of13::Action::Output {
                            port: p,
                            max_len: 0,
                        },
                    ])];
                    of13::Repr::new(xid, of13::Message::FlowMod(fm)).emit(out);
                    st.flow_mod_sent += 1;
                }
                _ => {
                    let data = if v.buffer_id() == NO_BUFFER {
                        v.data().to_vec()
                    } else {
                        vec![]
                    };
                    of13::Repr::new(
                        xid,
                        of13::Message::PacketOut(of13::PacketOut {
                            buffer_id: v.buffer_id(),
                            in_port,
                            actions: vec![of13::Action::Output {
                                port: 0xffff_fffb,
                                max_len: 0,
                            }],
                            data,
                        }),
                    )
                    .emit(out);
                    st.packet_out_sent += 1;
                }
            }
        }
    }
    Ok(())
}

/// Read a flow_mod's buffer_id (1.0 or 1.3), for tests and tools.
pub fn flow_mod_buffer_id(msg: &[u8]) -> Option<u32> {
    match *msg.first()? {
        OFP10_VERSION if msg.len() >= of10::field::flow_mod::BUFFER_ID + 4 => {
            Some(be32(msg, of10::field::flow_mod::BUFFER_ID))
        }
        OFP13_VERSION if msg.len() >= of13::field::flow_mod::BUFFER_ID + 4 => {
            Some(be32(msg, of13::field::flow_mod::BUFFER_ID))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::probe_frame;

    fn templates() -> Templates {
        Templates {
            fm10: of10::FlowModTemplate::new(0, 0, 0x8000),
            trivial10: vec![],
            trivial13: vec![],
        }
    }

    fn packet_in(xid: u32, buffer_id: u32, in_port: u16) -> Vec<u8> {
        let data = probe_frame(1, xid).to_vec();
        of10::Repr::new(
            xid,
            of10::Message::PacketIn(of10::PacketIn {
                buffer_id,
                total_len: data.len() as u16,
                in_port,
                reason: 0,
                data,
            }),
        )
        .to_bytes()
    }

    #[test]
    fn packet_in_run_answers_each_packet_in_and_stops_at_other_messages() {
        let t = templates();
        let mut buf = packet_in(7, 100, 1);
        buf.extend(packet_in(8, 0xffff_ffff, 3));
        let answered = buf.len();
        buf.extend([1, 2, 0, 8, 0, 0, 0, 9]); // ECHO_REQUEST: for `handle`
        buf.extend(packet_in(10, 5, 1));
        let mut st = ControllerStats::default();
        let mut out = vec![0xaa];
        assert_eq!(packet_in_run10(&mut st, &t, &mut out, &buf), answered);
        assert_eq!((st.packet_in, st.flow_mod_sent), (2, 2));
        assert_eq!(out.len(), 1 + 2 * of10::FLOW_MOD_TEMPLATE_LEN);
        for (fm, (xid, buffer_id, out_port)) in out[1..]
            .chunks(of10::FLOW_MOD_TEMPLATE_LEN)
            .zip([(7, 100, 2), (8, 0xffff_ffff, 4)])
        {
            let r = of10::Repr::parse(fm).unwrap();
            assert_eq!(r.xid, xid);
            let of10::Message::FlowMod(m) = r.msg else {
                panic!("not a flow_mod: {r:?}");
            };
            assert_eq!(m.buffer_id, buffer_id);
            assert_eq!(
                m.actions,
                vec![of10::Action::Output {
                    port: out_port,
                    max_len: 0
                }]
            );
        }
    }

    #[test]
    fn packet_in_run_fills_any_spare_capacity_like_the_template() {
        // Runs of packet_ins of several sizes (a probe, frames cut short,
        // an empty frame) into outputs whose spare room ends anywhere: the
        // bytes are the template's, written one flow_mod at a time.
        let t = templates();
        let mut buf = Vec::new();
        let mut want = Vec::new();
        for i in 0..300u32 {
            let mut pi = packet_in(i, i.wrapping_mul(7), (i % 5) as u16);
            let cut = [pi.len(), 18, 18 + 14, 18 + 30, 18 + 13][i as usize % 5];
            pi.truncate(cut);
            pi[2..4].copy_from_slice(&(cut as u16).to_be_bytes());
            let v = of10::PacketInView::new_checked(&pi[..]).unwrap();
            let mut fm = [0u8; of10::FLOW_MOD_TEMPLATE_LEN];
            t.fm10.write(&mut fm, i, &v);
            want.extend_from_slice(&fm);
            buf.extend_from_slice(&pi);
        }
        let whole = buf.len();
        buf.extend_from_slice(&packet_in(9, 9, 9)[..30]); // started
        for (prefix, spare) in [
            (0, 0),
            (3, 0),
            (0, 80),
            (1, 79),
            (5, 81),
            (0, 4000),
            (2, 1 << 16),
        ] {
            let mut out = Vec::with_capacity(prefix + spare);
            out.resize(prefix, 0xee);
            let mut st = ControllerStats::default();
            assert_eq!(packet_in_run10(&mut st, &t, &mut out, &buf), whole);
            assert_eq!(st.flow_mod_sent, 300);
            assert_eq!(&out[..prefix], &vec![0xee; prefix][..]);
            assert!(out[prefix..] == want[..], "prefix {prefix} spare {spare}");
        }
    }

    #[test]
    fn packet_in_run_leaves_started_short_and_foreign_messages() {
        let t = templates();
        let mut st = ControllerStats::default();
        let mut out = Vec::new();
        let pi = packet_in(1, 1, 1);
        // Started: the header says more than has arrived.
        assert_eq!(packet_in_run10(&mut st, &t, &mut out, &pi[..40]), 0);
        // A packet_in shorter than its fixed part is `handle`'s error.
        assert_eq!(
            packet_in_run10(&mut st, &t, &mut out, &[1, 10, 0, 10, 0, 0, 0, 1, 0, 0]),
            0
        );
        // Another version.
        let mut v13 = pi.clone();
        v13[0] = OFP13_VERSION;
        assert_eq!(packet_in_run10(&mut st, &t, &mut out, &v13), 0);
        assert!(out.is_empty());
        assert_eq!(st.packet_in, 0);
    }
}
