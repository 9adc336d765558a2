#!/usr/bin/env python3
"""io_uring server CPU per round trip, commbench against the C liburing
reference (bench/mux/c_echo.c, `uring`), interleaved under the same load,
and the io_uring server's resident memory with idle connections.

CPU: every server runs pinned to one CPU, the load (commbench mux load,
which verifies every byte) on the other; server CPU is utime+stime from
/proc/PID/stat from before the load connects to after it closed (accept
and close included), divided by the round trips. The servers run in turn
within each repeat (order reversed every other repeat). Reported: each
server's median with a distribution-free 95% interval (order statistics of
the binomial; its exact coverage is printed), and the ratio of each
commbench server to the C server as a Hodges-Lehmann estimate (median of
all pairwise log differences) with Moses' distribution-free 95% interval
(the same method as commbench_core::estimate::ratio).

RSS: a server with --max-conns N gets N idle connections (no data); VmRSS
of the server process (/proc/PID/status) before they connect, once all are
accepted, and a few seconds after they all closed.

Called by `bench/mux-compare.sh --uring` (which builds the programs and
runs it in a private network namespace when root).
"""
import argparse, math, os, resource, socket, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (measure, next_port, start_server, stop)
from cbestimate import fmt_median, fmt_ratio, median_ci, ratio_ci  # noqa: E402


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def idle_rss(cmd_of, conns, label):
    port = compare.next_port()
    p = compare.start_server(cmd_of(port), port)
    try:
        time.sleep(0.5)
        r0 = rss_kib(p.pid)
        socks = []
        for _ in range(conns):
            s = socket.socket()
            s.connect(("127.0.0.1", port))
            socks.append(s)
        # Every connection accepted: the server holds them all.
        end = time.time() + 30
        while time.time() < end and len(os.listdir(f"/proc/{p.pid}/fd")) < conns:
            time.sleep(0.1)
        time.sleep(1.0)
        r1 = rss_kib(p.pid)
        for s in socks:
            s.close()
        time.sleep(3.0)
        r2 = rss_kib(p.pid)
    finally:
        compare.stop(p)
    print(f"[rss] {label:28s} VmRSS {r0/1024:8.1f} MiB empty, {r1/1024:8.1f} MiB with {conns} idle, "
          f"{r2/1024:8.1f} MiB 3 s after they left", file=sys.stderr, flush=True)
    return r0, r1, r2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--commbench", required=True, help="commbench binary (after)")
    ap.add_argument("--before", help="a second commbench binary to measure as well (before)")
    ap.add_argument("--c-echo", required=True)
    ap.add_argument("--conns", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--idle", type=int, default=10000, help="idle connections for the RSS check (0: skip)")
    ap.add_argument("--server-cpu", default="1")
    ap.add_argument("--load-cpu", default="0")
    a = ap.parse_args()
    compare.SERVER_CPU, compare.LOAD_CPU = a.server_cpu, a.load_cpu
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    def ours(binary, max_conns):
        return lambda port: [binary, "mux", "serve", "--engine", "io-uring", "--listen",
                             f"127.0.0.1:{port}", "--control", f"127.0.0.1:{port + 1}",
                             "--max-conns", str(max_conns)]

    servers = [("C io_uring (liburing)", lambda port: [a.c_echo, "uring", str(port)]),
               ("commbench io-uring", ours(a.commbench, a.conns))]
    if a.before:
        servers.append(("commbench io-uring before", ours(a.before, a.conns)))
    res = {name: [] for name, _ in servers}
    load0 = os.getloadavg()
    t0 = time.time()
    for rep in range(a.repeat):
        order = servers if rep % 2 == 0 else list(reversed(servers))
        for name, cmd in order:
            r = compare.measure(cmd, "commbench", a)
            res[name].append(r["server_us"])
            print(f"[rep {rep+1}] {name:28s} server {r['server_us']:6.3f} us/rt "
                  f"(user {r['server_user_us']:.3f})  {r['rt_per_s']:9.0f} rt/s",
                  file=sys.stderr, flush=True)
    load1 = os.getloadavg()
    print(f"# io_uring servers: N={a.conns} R={a.rounds} K={a.size}, {a.repeat} interleaved repeats, "
          f"server on CPU {a.server_cpu}, load (commbench mux load) on CPU {a.load_cpu}; "
          f"load average {load0[0]:.2f}/{load0[1]:.2f} -> {load1[0]:.2f}/{load1[1]:.2f}; "
          f"{time.time()-t0:.0f} s; kernel {os.uname().release}")
    print("# server CPU per round trip, us: median [95% interval] (commbench estimate)")
    for name, _ in servers:
        print(f"  {name:28s} {fmt_median(median_ci(res[name]))}   all: "
              + " ".join(f"{x:.3f}" for x in res[name]))
    c = res[servers[0][0]]
    print("# ratio to the C server: Hodges-Lehmann [Moses 95% interval] (commbench estimate)")
    for name, _ in servers[1:]:
        print(f"  {name:28s} {fmt_ratio(ratio_ci(c, res[name]))}")
    if a.before:
        r = ratio_ci(res["commbench io-uring before"], res["commbench io-uring"])
        print(f"  after / before               {fmt_ratio(r)}")
    if a.idle:
        print(f"# VmRSS of the server with {a.idle} idle connections (--max-conns {a.idle}), MiB: "
              "empty / all connected / 3 s after they left")
        rows = [("C io_uring (liburing)", lambda port: [a.c_echo, "uring", str(port)]),
                ("commbench io-uring", ours(a.commbench, a.idle))]
        if a.before:
            rows.append(("commbench io-uring before", ours(a.before, a.idle)))
        for name, cmd in rows:
            r0, r1, r2 = idle_rss(cmd, a.idle, name)
            print(f"  {name:28s} {r0/1024:8.1f} / {r1/1024:8.1f} / {r2/1024:8.1f}")


if __name__ == "__main__":
    main()
