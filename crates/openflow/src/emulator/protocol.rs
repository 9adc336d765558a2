//! What an emulated switch does with each message from the controller,
//! OpenFlow 1.0 and 1.3 as cbench's fakeswitch does: counting responses
//! (flow_mod ADD/MODIFY_STRICT, non-LLDP packet_out) and matching them to
//! probes, answering HELLO, ECHO, FEATURES, GET_CONFIG, BARRIER and DESC
//! requests, the latency-mode probe restarts, and the replies it sends
//! (`error_msg`, `features10`).
//!
//! Invariants: a message is handled only when whole (framed by the
//! worker); a malformed message or a version other than the negotiated
//! one is an error that closes this switch's connection alone; the
//! throughput-mode fast path (`flow_mod_run`) does the same accounting as
//! `response`.

use super::switch::{Answer, SwState};
use super::worker::Worker;
use super::SwitchError;
use crate::wire::common::field as f;
use crate::wire::frame::{self, is_lldp};
use crate::wire::of10::field as f10;
use crate::wire::of13::field as f13;
use crate::wire::{
    be16, be32, of10, of13, Header, WireError, NO_BUFFER, OFP10_VERSION, OFP13_VERSION,
};
use commbench_core::clock::now_ns;
use std::sync::atomic::Ordering;

impl Worker {
    /// Throughput mode, OpenFlow 1.0: counts and matches the leading run
    /// of flow_mod ADDs in `buf` (the reply to nearly every probe) with the
    /// counters in registers, and returns where the run ends; `handle`
    /// takes whatever follows. Same accounting as `response`, without its
    /// per-message dispatch: about a third of the emulator's user time.
    pub(super) fn flow_mod_run(&mut self, k: usize, buf: &[u8]) -> usize {
        let s = &mut self.sw[k];
        let (mut off, mut n, mut matched, mut duplicate, mut unmatched, mut far) =
            (0, 0u64, 0, 0, 0, 0);
        while let Some(m) = buf.get(off..off + of10::FLOW_MOD_LEN) {
            let len = be16(m, f::LENGTH) as usize;
            if m[f::VERSION] != OFP10_VERSION
                || m[f::TYPE] != of10::OFPT_FLOW_MOD
                || len < of10::FLOW_MOD_LEN
                || off + len > buf.len()
                || be16(m, f10::flow_mod::COMMAND) != of10::OFPFC_ADD
            {
                break;
            }
            off += len;
            n += 1;
            match s.answer(be32(m, f10::flow_mod::BUFFER_ID), be32(m, f::XID)) {
                Answer::Matched { far: f, .. } => {
                    matched += 1;
                    far += f as u64;
                }
                Answer::Duplicate => duplicate += 1,
                Answer::Unmatched => unmatched += 1,
            }
        }
        s.window_count += n;
        s.tp_in_flight = s.tp_in_flight.saturating_sub(matched);
        let t = &mut self.tally;
        t.responses += n;
        t.flow_mod_add += n;
        t.matched += matched;
        t.duplicate += duplicate;
        t.unmatched += unmatched;
        t.far_matches += far;
        off
    }

    fn response(&mut self, k: usize, buffer_id: u32, xid: u32, now: u64, kept: bool) {
        self.tally.responses += 1;
        let s = &mut self.sw[k];
        s.window_count += 1;
        match s.answer(buffer_id, xid) {
            Answer::Duplicate => self.tally.duplicate += 1,
            Answer::Unmatched => self.tally.unmatched += 1,
            Answer::Matched { seq, far } => {
                self.tally.matched += 1;
                self.tally.far_matches += far as u64;
                s.tp_in_flight = s.tp_in_flight.saturating_sub(1);
                if !self.throughput {
                    let m = s.sent_ns.len() as u64 - 1;
                    let oldest_in_flight = s.next_seq - (s.in_flight as u64).min(s.next_seq);
                    if seq >= oldest_in_flight && s.in_flight > 0 {
                        if kept {
                            let t = s.sent_ns[(seq & m) as usize];
                            self.hist.record_ns(now.saturating_sub(t));
                        }
                        s.in_flight -= 1;
                        self.top_up(k, now);
                    }
                }
            }
        }
    }

    fn reply(&mut self, k: usize, f: impl FnOnce(&mut Vec<u8>)) {
        f(&mut self.sw[k].out);
    }

    pub(super) fn handle(
        &mut self,
        k: usize,
        msg: &[u8],
        now: u64,
        kept: bool,
    ) -> Result<(), SwitchError> {
        // Fast path for the message that dominates: an OpenFlow 1.0 flow_mod
        // ADD (frame_len already checked that msg is exactly one message).
        if msg.len() >= of10::FLOW_MOD_LEN
            && msg[f::VERSION] == OFP10_VERSION
            && msg[f::TYPE] == of10::OFPT_FLOW_MOD
            && self.sw[k].version == OFP10_VERSION
            && be16(msg, f10::flow_mod::COMMAND) == of10::OFPFC_ADD
        {
            self.tally.flow_mod_add += 1;
            let buffer_id = be32(msg, f10::flow_mod::BUFFER_ID);
            self.response(k, buffer_id, be32(msg, f::XID), now, kept);
            return Ok(());
        }
        let h = Header::new_checked(msg).map_err(SwitchError::Header)?;
        let (ty, xid, ver) = (h.msg_type(), h.xid(), h.version());
        let sv = self.sw[k].version;
        if ty == 0 {
            // HELLO: cbench does no negotiation; we check the peer can
            // speak our version and otherwise fail the hello.
            self.tally.hello += 1;
            if of13::negotiate(msg, &[sv]).is_none() {
                let e = error_msg(sv, xid, 0, 0, msg);
                self.reply(k, |o| o.extend_from_slice(&e));
                self.flush(k);
                return Err(SwitchError::HelloFailed {
                    peer: ver,
                    ours: sv,
                });
            }
            return Ok(());
        }
        if ver != sv {
            let e = error_msg(sv, xid, 1, 0, msg);
            self.reply(k, |o| o.extend_from_slice(&e));
            self.flush(k);
            return Err(SwitchError::BadVersion {
                got: ver,
                negotiated: sv,
            });
        }
        if sv == OFP10_VERSION {
            self.handle10(k, ty, xid, msg, now, kept)
        } else {
            self.handle13(k, ty, xid, msg, now, kept)
        }
    }

    /// An ERROR from the controller (same layout in 1.0 and 1.3): counted
    /// and reported.
    /// A SET_CONFIG (same layout in 1.0 and 1.3): counted, and its flags
    /// and miss_send_len kept for GET_CONFIG_REPLY.
    fn set_config(&mut self, k: usize, msg: &[u8]) {
        self.tally.set_config += 1;
        if msg.len() >= f::SWITCH_CONFIG_LEN {
            let s = &mut self.sw[k];
            s.config_flags = be16(msg, f::CONFIG_FLAGS);
            s.miss_send_len = be16(msg, f::MISS_SEND_LEN);
        }
    }

    fn controller_error(&mut self, k: usize, msg: &[u8]) {
        self.tally.error += 1;
        if msg.len() >= f::ERROR_DATA {
            let m = format!(
                "cbench: switch {} got ERROR type {} code {} from the controller",
                self.sw[k].idx + 1,
                be16(msg, f::ERROR_TYPE),
                be16(msg, f::ERROR_CODE)
            );
            self.sh.notice(m);
        }
    }

    fn features_done(&mut self, k: usize) {
        let s = &mut self.sw[k];
        if s.state == SwState::Handshake {
            s.state = SwState::Ready;
            self.sh.ready.fetch_add(1, Ordering::SeqCst);
            if self.sh.cfg.learn_dst_macs {
                // xid 1 (probes then count from 2), buffer_id none,
                // in_port 2. cbench sizes the 1.0 message as
                // sizeof(struct ofp_packet_in) (20, with its 2 bytes of
                // tail padding) + the 64-byte frame: 84 bytes whose last
                // two are zero, total_len 64.
                let arp = frame::gratuitous_arp(s.dpid);
                let v = s.version;
                if v == OFP10_VERSION {
                    let mut data = arp.to_vec();
                    data.extend_from_slice(&[0, 0]);
                    of10::Repr::new(
                        1,
                        of10::Message::PacketIn(of10::PacketIn {
                            buffer_id: NO_BUFFER,
                            total_len: arp.len() as u16,
                            in_port: 2,
                            reason: of10::OFPR_NO_MATCH,
                            data,
                        }),
                    )
                    .emit(&mut s.out);
                } else {
                    of13::Repr::new(
                        1,
                        of13::Message::PacketIn(of13::PacketIn {
                            buffer_id: NO_BUFFER,
                            total_len: arp.len() as u16,
                            reason: 0,
                            table_id: 0,
                            cookie: 0,
                            match_: of13::Match {
                                fields: vec![of13::Oxm::basic(
                                    of13::OXM_IN_PORT,
                                    &2u32.to_be_bytes(),
                                )],
                            },
                            data: arp.to_vec(),
                        }),
                    )
                    .emit(&mut s.out);
                }
            }
            let now = now_ns();
            self.top_up(k, now);
        }
    }

    /// cbench's latency-mode restart: a controller that blocks on its
    /// config exchange may have dropped the probe in flight, so after a
    /// GET_CONFIG_REQUEST or DESC stats request with the window full
    /// (`only_if_full`), or any VENDOR message, the switch forgets its
    /// probes in flight and sends fresh ones (fakeswitch.c:412-417,
    /// 427, 454-459). A late answer to a forgotten probe still counts.
    fn restart_latency_probes(&mut self, k: usize, only_if_full: bool) {
        if self.throughput {
            return;
        }
        let s = &mut self.sw[k];
        if s.state != SwState::Ready || s.in_flight == 0 {
            return;
        }
        if only_if_full && s.in_flight < self.outstanding {
            return;
        }
        s.in_flight = 0;
        let now = now_ns();
        self.top_up(k, now);
    }

    fn warn_once(&mut self, k: usize, ty: u8) {
        let s = &mut self.sw[k];
        let bit = 1u32 << (ty % 32);
        if self.sh.cfg.debug || s.warned_types & bit == 0 {
            s.warned_types |= bit;
            let m = format!(
                "cbench: switch {} ignoring OpenFlow message type {ty}",
                s.idx + 1
            );
            self.sh.notice(m);
        }
    }

    fn handle10(
        &mut self,
        k: usize,
        ty: u8,
        xid: u32,
        msg: &[u8],
        now: u64,
        kept: bool,
    ) -> Result<(), SwitchError> {
        let bad = |err: WireError| SwitchError::Malformed { msg_type: ty, err };
        match ty {
            of10::OFPT_FLOW_MOD => {
                let v = of10::FlowModView::new_checked(msg).map_err(bad)?;
                match v.command() {
                    of10::OFPFC_ADD => self.tally.flow_mod_add += 1,
                    of10::OFPFC_MODIFY_STRICT => self.tally.flow_mod_modify_strict += 1,
                    _ => {
                        self.tally.flow_mod_other += 1;
                        return Ok(());
                    }
                }
                self.response(k, v.buffer_id(), xid, now, kept);
            }
            of10::OFPT_PACKET_OUT => {
                let v = of10::PacketOutView::new_checked(msg).map_err(bad)?;
                if is_lldp(v.data()) {
                    self.tally.packet_out_lldp += 1;
                } else {
                    self.tally.packet_out += 1;
                    self.response(k, v.buffer_id(), xid, now, kept);
                }
            }
            of10::OFPT_ECHO_REQUEST => {
                // cbench answers with a bare 8-byte header, never echoing
                // the request's data (fakeswitch.c:433-440).
                self.tally.echo_request += 1;
                self.reply(k, |o| {
                    o.extend_from_slice(&[OFP10_VERSION, of10::OFPT_ECHO_REPLY, 0, 8]);
                    o.extend_from_slice(&xid.to_be_bytes());
                });
            }
            of10::OFPT_ECHO_REPLY => self.tally.echo_reply += 1,
            of10::OFPT_FEATURES_REQUEST => {
                self.tally.features_request += 1;
                let s = &self.sw[k];
                let r = of10::Repr::new(xid, of10::Message::FeaturesReply(features10(s.dpid)));
                self.reply(k, |o| r.emit(o));
                self.features_done(k);
            }
            of10::OFPT_SET_CONFIG => self.set_config(k, msg),
            of10::OFPT_GET_CONFIG_REQUEST => {
                self.tally.get_config_request += 1;
                let s = &self.sw[k];
                let r = of10::Repr::new(
                    xid,
                    of10::Message::GetConfigReply(of10::SwitchConfig {
                        flags: s.config_flags,
                        miss_send_len: s.miss_send_len,
                    }),
                );
                self.reply(k, |o| r.emit(o));
                self.restart_latency_probes(k, true);
            }
            of10::OFPT_BARRIER_REQUEST => {
                self.tally.barrier_request += 1;
                self.reply(k, |o| {
                    of10::Repr::new(xid, of10::Message::BarrierReply).emit(o)
                });
            }
            of10::OFPT_STATS_REQUEST => {
                self.tally.stats_request += 1;
                if msg.len() >= of10::STATS_LEN && be16(msg, f::STATS_TYPE) == of10::OFPST_DESC {
                    let d = desc(self.sw[k].dpid);
                    self.reply(k, |o| {
                        of10::Repr::new(
                            xid,
                            of10::Message::StatsReply {
                                flags: 0,
                                body: of10::StatsBody::Desc(d),
                            },
                        )
                        .emit(o)
                    });
                    self.restart_latency_probes(k, true);
                } else if self.sh.cfg.debug {
                    // cbench ignores other stats requests silently.
                    self.warn_once(k, ty);
                }
            }
            of10::OFPT_VENDOR => {
                // A 12-byte BAD_REQUEST/BAD_VENDOR without the offending
                // message, as cbench sends (fakeswitch.c:257-268), and
                // its "nox hack": a controller that ignores packet_ins until
                // it has sent a vendor message gets a fresh probe.
                self.tally.vendor += 1;
                let e = of10::Repr::new(
                    xid,
                    of10::Message::Error {
                        err_type: of10::OFPET_BAD_REQUEST,
                        code: of10::OFPBRC_BAD_VENDOR,
                        data: Vec::new(),
                    },
                );
                self.reply(k, |o| e.emit(o));
                self.restart_latency_probes(k, false);
            }
            of10::OFPT_ERROR => {
                self.controller_error(k, msg);
            }
            _ => {
                self.tally.other += 1;
                self.warn_once(k, ty);
            }
        }
        Ok(())
    }

    fn handle13(
        &mut self,
        k: usize,
        ty: u8,
        xid: u32,
        msg: &[u8],
        now: u64,
        kept: bool,
    ) -> Result<(), SwitchError> {
        let short = SwitchError::TooShort;
        match ty {
            of13::OFPT_FLOW_MOD => {
                if msg.len() < of13::FLOW_MOD_FIXED + 8 {
                    return Err(short("flow_mod"));
                }
                match msg[f13::flow_mod::COMMAND] {
                    of13::OFPFC_ADD => self.tally.flow_mod_add += 1,
                    of13::OFPFC_MODIFY_STRICT => self.tally.flow_mod_modify_strict += 1,
                    _ => {
                        self.tally.flow_mod_other += 1;
                        return Ok(());
                    }
                }
                self.response(k, be32(msg, f13::flow_mod::BUFFER_ID), xid, now, kept);
            }
            of13::OFPT_PACKET_OUT => {
                if msg.len() < of13::PACKET_OUT_LEN {
                    return Err(short("packet_out"));
                }
                let alen = be16(msg, f13::packet_out::ACTIONS_LEN) as usize;
                if of13::PACKET_OUT_LEN + alen > msg.len() {
                    return Err(SwitchError::ActionsBeyondMessage);
                }
                if is_lldp(&msg[of13::PACKET_OUT_LEN + alen..]) {
                    self.tally.packet_out_lldp += 1;
                } else {
                    self.tally.packet_out += 1;
                    self.response(k, be32(msg, f::BUFFER_ID), xid, now, kept);
                }
            }
            of13::OFPT_ECHO_REQUEST => {
                self.tally.echo_request += 1;
                self.reply(k, |o| {
                    let s = o.len();
                    o.extend_from_slice(msg);
                    o[s + 1] = of13::OFPT_ECHO_REPLY;
                });
            }
            of13::OFPT_ECHO_REPLY => self.tally.echo_reply += 1,
            of13::OFPT_FEATURES_REQUEST => {
                self.tally.features_request += 1;
                let f = of13::SwitchFeatures {
                    datapath_id: self.sw[k].dpid,
                    n_buffers: 256,
                    n_tables: 2,
                    auxiliary_id: 0,
                    capabilities: 0,
                };
                self.reply(k, |o| {
                    of13::Repr::new(xid, of13::Message::FeaturesReply(f)).emit(o)
                });
                self.features_done(k);
            }
            of13::OFPT_SET_CONFIG => self.set_config(k, msg),
            of13::OFPT_GET_CONFIG_REQUEST => {
                self.tally.get_config_request += 1;
                let s = &self.sw[k];
                let r = of13::Repr::new(
                    xid,
                    of13::Message::GetConfigReply {
                        flags: s.config_flags,
                        miss_send_len: s.miss_send_len,
                    },
                );
                self.reply(k, |o| r.emit(o));
                self.restart_latency_probes(k, true);
            }
            of13::OFPT_BARRIER_REQUEST => {
                self.tally.barrier_request += 1;
                self.reply(k, |o| {
                    of13::Repr::new(xid, of13::Message::BarrierReply).emit(o)
                });
            }
            of13::OFPT_MULTIPART_REQUEST => {
                self.tally.stats_request += 1;
                let mp = if msg.len() >= of13::MULTIPART_LEN {
                    be16(msg, f::STATS_TYPE)
                } else {
                    u16::MAX
                };
                let dpid = self.sw[k].dpid;
                let body = match mp {
                    of13::OFPMP_DESC => Some(of13::MultipartBody::Desc(desc(dpid))),
                    of13::OFPMP_PORT_DESC => Some(of13::MultipartBody::PortDesc(
                        (1..=4u32)
                            .map(|p| of13::Port {
                                port_no: p,
                                hw_addr: [0, 0, 0, 0, dpid as u8, p as u8],
                                name: format!("s{dpid}-eth{p}"),
                                curr: 0x2000 | 0x800,
                                curr_speed: 10_000_000,
                                max_speed: 10_000_000,
                                ..Default::default()
                            })
                            .collect(),
                    )),
                    _ => None,
                };
                match body {
                    Some(body) => {
                        self.reply(k, |o| {
                            of13::Repr::new(xid, of13::Message::MultipartReply { flags: 0, body })
                                .emit(o)
                        });
                        if mp == of13::OFPMP_DESC {
                            self.restart_latency_probes(k, true);
                        }
                    }
                    None => {
                        // OFPET_BAD_REQUEST / OFPBRC_BAD_MULTIPART
                        let e = error_msg(OFP13_VERSION, xid, 1, 2, msg);
                        self.reply(k, |o| o.extend_from_slice(&e));
                    }
                }
            }
            of13::OFPT_EXPERIMENTER => {
                self.tally.vendor += 1;
                // OFPET_BAD_REQUEST / OFPBRC_BAD_EXPERIMENTER
                let e = error_msg(OFP13_VERSION, xid, 1, 3, msg);
                self.reply(k, |o| o.extend_from_slice(&e));
                self.restart_latency_probes(k, false);
            }
            of13::OFPT_ERROR => {
                self.controller_error(k, msg);
            }
            _ => {
                self.tally.other += 1;
                self.warn_once(k, ty);
            }
        }
        Ok(())
    }
}

/// An ERROR message carrying up to 64 bytes of the offending message.
pub fn error_msg(version: u8, xid: u32, err_type: u16, code: u16, offending: &[u8]) -> Vec<u8> {
    let data = offending[..offending.len().min(64)].to_vec();
    if version == OFP13_VERSION {
        of13::Repr::new(
            xid,
            of13::Message::Error {
                err_type,
                code,
                data,
            },
        )
        .to_bytes()
    } else {
        let mut v = of10::Repr::new(
            xid,
            of10::Message::Error {
                err_type,
                code,
                data,
            },
        )
        .to_bytes();
        v[0] = version;
        v
    }
}

/// The 4 ports of cbench's FEATURES_REPLY (a captured reply,
/// fakeswitch.c:203-221): the same hardware addresses and names for every
/// switch, curr = 10GB_FD | COPPER, everything else zero.
const CBENCH_PORTS: [([u8; 6], &str); 4] = [
    ([0x1a, 0xc1, 0x51, 0xff, 0xef, 0x8a], "veth1"),
    ([0xce, 0x2f, 0xa2, 0x87, 0xf6, 0x70], "veth3"),
    ([0xca, 0x8a, 0x1e, 0xf3, 0x77, 0xef], "veth5"),
    ([0xfa, 0xbc, 0x77, 0x8d, 0x7e, 0x0b], "veth7"),
];

/// The emulated switch's FEATURES_REPLY body (224 bytes on the wire,
/// byte-for-byte cbench's apart from the datapath_id).
pub fn features10(dpid: u64) -> of10::SwitchFeatures {
    of10::SwitchFeatures {
        datapath_id: dpid,
        n_buffers: 256,
        n_tables: 2,
        capabilities: 0,
        actions: 0x7ff,
        ports: CBENCH_PORTS
            .iter()
            .zip(1u16..)
            .map(|(&(hw_addr, name), port_no)| of10::PhyPort {
                port_no,
                hw_addr,
                name: name.into(),
                curr: 0xc0,
                ..Default::default()
            })
            .collect(),
    }
}

fn desc(dpid: u64) -> of10::DescStats {
    of10::DescStats {
        mfr_desc: "commbench".into(),
        hw_desc: "cbench-compatible switch emulator".into(),
        sw_desc: env!("CARGO_PKG_VERSION").into(),
        serial_num: "None".into(),
        dp_desc: format!("dpid {dpid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_reply_is_224_bytes() {
        let r = of10::Repr::new(7, of10::Message::FeaturesReply(features10(1))).to_bytes();
        assert_eq!(r.len(), 224);
        assert_eq!(&r[..4], &[1, 6, 0, 224]);
    }
}
