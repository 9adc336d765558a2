"""The seed's cbench app on os-ken, for commbench's interoperability test
and for the os-ken figure in the benchmark notes.

Every packet_in is answered with exactly one flow_mod ADD: an exact match
built from the packet (in_port, dl_src, dl_dst, dl_type and, for IPv4,
nw_src, nw_dst, nw_proto), the packet's buffer_id, and one action output to
in_port + 1 — the same handler as `commbench controller --app cbench`.

Usage: python cbench_app.py PORT   (listens on 127.0.0.1:PORT, OpenFlow 1.0)
"""
from os_ken.lib import hub

hub.patch(thread=False)

import ipaddress  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402

from os_ken import cfg  # noqa: E402
from os_ken.base import app_manager  # noqa: E402
from os_ken.controller import ofp_event  # noqa: E402
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls  # noqa: E402
from os_ken.lib.packet import ethernet, ipv4, packet  # noqa: E402
from os_ken.lib.mac import haddr_to_bin  # noqa: E402
from os_ken.ofproto import ofproto_v1_0  # noqa: E402


class CbenchApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_0.OFP_VERSION]

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
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
    print(f"os-ken cbench app listening on 127.0.0.1:{port}", flush=True)
    app_manager.AppManager.run_apps([__name__])


if __name__ == "__main__":
    main()
