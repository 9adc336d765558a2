"""The seed's cbench app on os-ken, for commbench's interoperability test
and for the os-ken figure in the benchmark notes.

Every packet_in is answered with exactly one flow_mod ADD: an exact match
built from the packet (in_port, dl_src, dl_dst, dl_type and, for IPv4,
nw_src, nw_dst, nw_proto), the packet's buffer_id, and one action output to
in_port + 1 — the same handler as `commbench controller --app cbench`.
With OpenFlow 1.3 the match is the same fields as OXMs and the output is an
apply-actions instruction.

When a switch connects the app also asks for its description, config, a
barrier and an echo, and prints one `osken-check:` line per reply it could
parse (and per ERROR it got) on stderr, so the interop test sees that
os-ken's parser accepts each of the emulator's replies.

Usage: python cbench_app.py PORT [1.0|1.3]   (listens on 127.0.0.1:PORT;
OpenFlow 1.0 unless 1.3 is given)
"""
from os_ken.lib import hub

hub.patch(thread=False)

import ipaddress  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402

from os_ken import cfg  # noqa: E402
from os_ken.base import app_manager  # noqa: E402
from os_ken.controller import ofp_event  # noqa: E402
from os_ken.controller.handler import (  # noqa: E402
    CONFIG_DISPATCHER,
    MAIN_DISPATCHER,
    set_ev_cls,
)
from os_ken.lib.packet import ethernet, ipv4, packet  # noqa: E402
from os_ken.lib.mac import haddr_to_bin  # noqa: E402
from os_ken.ofproto import ofproto_v1_0, ofproto_v1_3  # noqa: E402

OF13 = len(sys.argv) > 2 and sys.argv[2] == "1.3"


def check(what, msg):
    print(f"osken-check: {what} dpid {msg.datapath.id}", file=sys.stderr, flush=True)


class CbenchApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION if OF13 else ofproto_v1_0.OFP_VERSION]

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        parser = dp.ofproto_parser
        check(f"features_reply n_buffers {ev.msg.n_buffers}", ev.msg)
        dp.send_msg(parser.OFPDescStatsRequest(dp, 0))
        dp.send_msg(parser.OFPGetConfigRequest(dp))
        dp.send_msg(parser.OFPBarrierRequest(dp))
        dp.send_msg(parser.OFPEchoRequest(dp, data=b"osken"))

    @set_ev_cls(ofp_event.EventOFPDescStatsReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def desc(self, ev):
        check("desc_reply", ev.msg)

    @set_ev_cls(ofp_event.EventOFPGetConfigReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def get_config(self, ev):
        check(f"get_config_reply miss_send_len {ev.msg.miss_send_len}", ev.msg)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def barrier(self, ev):
        check("barrier_reply", ev.msg)

    @set_ev_cls(ofp_event.EventOFPEchoReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def echo(self, ev):
        check("echo_reply", ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def error(self, ev):
        check(f"ERROR type {ev.msg.type} code {ev.msg.code}", ev.msg)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        if ev.msg.datapath.ofproto.OFP_VERSION == ofproto_v1_3.OFP_VERSION:
            self.packet_in13(ev.msg)
        else:
            self.packet_in10(ev.msg)

    def packet_in13(self, msg):
        dp = msg.datapath
        ofp = dp.ofproto
        parser = dp.ofproto_parser
        in_port = msg.match["in_port"]
        pkt = packet.Packet(msg.data)
        eth = pkt.get_protocol(ethernet.ethernet)
        fields = {"in_port": in_port}
        if eth is not None:
            fields.update(eth_src=eth.src, eth_dst=eth.dst, eth_type=eth.ethertype)
            ip = pkt.get_protocol(ipv4.ipv4)
            if ip is not None:
                fields.update(ipv4_src=ip.src, ipv4_dst=ip.dst, ip_proto=ip.proto)
        mod = parser.OFPFlowMod(
            datapath=dp,
            match=parser.OFPMatch(**fields),
            cookie=0,
            command=ofp.OFPFC_ADD,
            idle_timeout=0,
            hard_timeout=0,
            priority=ofp.OFP_DEFAULT_PRIORITY,
            buffer_id=msg.buffer_id,
            instructions=[
                parser.OFPInstructionActions(
                    ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(in_port + 1)]
                )
            ],
        )
        dp.send_msg(mod)

    def packet_in10(self, msg):
        dp = msg.datapath
        ofp = dp.ofproto
        parser = dp.ofproto_parser
        pkt = packet.Packet(msg.data)
        eth = pkt.get_protocol(ethernet.ethernet)
        fields = {"in_port": msg.in_port}
        if eth is not None:
            fields.update(
                dl_src=haddr_to_bin(eth.src),
                dl_dst=haddr_to_bin(eth.dst),
                dl_type=eth.ethertype,
            )
            ip = pkt.get_protocol(ipv4.ipv4)
            if ip is not None:
                fields.update(
                    nw_src=int(ipaddress.IPv4Address(ip.src)),
                    nw_dst=int(ipaddress.IPv4Address(ip.dst)),
                    nw_proto=ip.proto,
                )
        mod = parser.OFPFlowMod(
            datapath=dp,
            match=parser.OFPMatch(**fields),
            cookie=0,
            command=ofp.OFPFC_ADD,
            idle_timeout=0,
            hard_timeout=0,
            priority=ofp.OFP_DEFAULT_PRIORITY,
            buffer_id=msg.buffer_id,
            actions=[parser.OFPActionOutput(msg.in_port + 1)],
        )
        dp.send_msg(mod)


def main():
    port = sys.argv[1] if len(sys.argv) > 1 else "6633"
    logging.basicConfig(level=logging.WARNING)
    cfg.CONF(
        args=["--ofp-tcp-listen-port", port, "--ofp-listen-host", "127.0.0.1"],
        project="os_ken",
    )
    version = "1.3" if OF13 else "1.0"
    print(f"os-ken cbench app (OpenFlow {version}) on 127.0.0.1:{port}", flush=True)
    app_manager.AppManager.run_apps([__name__])


if __name__ == "__main__":
    main()
