#!/usr/bin/env python3
"""Byte-for-byte cross-check of two OpenFlow 1.0 controllers running the
cbench app, e.g. `commbench controller` and bench/openflow/c_controller.c:
connects to each as a switch, says HELLO, sends the same packet_ins (a
cbench probe, TCP, a UDP fragment, ICMP behind IPv4 options, 802.1Q, ARP,
LLDP, a frame shorter than Ethernet, an empty frame) and an ECHO_REQUEST,
and compares the replies: flow_mod bytes (exact match, xid and buffer_id
echoed, output to in_port+1) and the echo reply. Exit 0 when identical.

usage: bench/openflow/xcheck.py PORT_A PORT_B
"""
import socket
import struct
import sys


def packet_in(xid, buffer_id, port, frame):
    return struct.pack("!BBHIIHHBx", 1, 10, 18 + len(frame), xid, buffer_id, len(frame), port, 0) + frame


def eth(dst, src, ty, rest):
    return dst + src + struct.pack("!H", ty) + rest


def ipv4(proto, frag=0, ihl=5):
    return (bytes([0x40 | ihl, 0xff]) + struct.pack("!HHH", 50, 0, frag) + bytes([64, proto, 0, 0])
            + bytes([10, 0, 0, 1, 10, 0, 0, 2]) + b"\0" * (ihl * 4 - 20))


D, S = bytes([0x80, 0, 0, 0, 0, 1]), bytes([0, 1, 2, 3, 4, 1])
FRAMES = [
    eth(D, S, 0x0800, ipv4(255) + b"x" * 30),
    eth(D, S, 0x0800, ipv4(6) + struct.pack("!HH", 1234, 80) + b"y" * 10),
    eth(D, S, 0x0800, ipv4(17, frag=5) + struct.pack("!HH", 1, 2) + b"y" * 10),
    eth(D, S, 0x0800, ipv4(1, ihl=6) + bytes([8, 3]) + b"zz"),
    eth(D, S, 0x8100, struct.pack("!HH", 0xa00b, 0x0800) + ipv4(17) + struct.pack("!HH", 53, 5353)),
    eth(D, S, 0x0806, struct.pack("!HHBBH", 1, 0x800, 6, 4, 2) + S + bytes([1, 2, 3, 4]) + D + bytes([5, 6, 7, 8])),
    eth(D, S, 0x88cc, b""),
    D + S[:3],
    b"",
]


def replies(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(struct.pack("!BBHI", 1, 0, 8, 1))  # HELLO
    got = b""
    while len(got) < 16:  # HELLO and FEATURES_REQUEST
        got += s.recv(100)
    msgs = b"".join(packet_in(100 + i, 0x10000 + i, 3 + i, f) for i, f in enumerate(FRAMES))
    msgs += struct.pack("!BBHI", 1, 2, 12, 77) + b"echo"
    s.sendall(msgs)
    want = 80 * len(FRAMES) + 12
    got = b""
    s.settimeout(3)
    while len(got) < want:
        got += s.recv(65536)
    s.close()
    return got


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    a, b = replies(int(sys.argv[1])), replies(int(sys.argv[2]))
    print(f"replies: {len(a)} and {len(b)} bytes, {'identical' if a == b else 'DIFFERENT'}")
    for i in range(0, max(len(a), len(b)), 80):
        if a[i:i + 80] != b[i:i + 80]:
            print(f"message {i // 80}:\n  {a[i:i + 80].hex()}\n  {b[i:i + 80].hex()}")
    return 0 if a == b else 1


if __name__ == "__main__":
    sys.exit(main())
