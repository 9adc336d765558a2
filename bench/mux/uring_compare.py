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


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def median_ci(v, level=0.95):
    """Median with the largest order-statistic interval [x(k), x(n+1-k)]
    whose binomial coverage is at least `level`; returns (median, lo, hi,
    coverage)."""
    v = sorted(v)
    n = len(v)
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    best = (v[0], v[-1], 1 - 2 * 0.5 ** n)
    for k in range(1, n // 2 + 1):
        cov = 1 - 2 * sum(math.comb(n, i) for i in range(k)) * 0.5 ** n
        if cov >= level:
            best = (v[k - 1], v[n - k], cov)
    return med, best[0], best[1], best[2]


def mw_counts(m, n):
    """Null distribution of the Mann-Whitney U for sizes m, n (counts)."""
    # f[i][j] = list of counts of U for i, j
    from functools import lru_cache

    @lru_cache(None)
    def f(i, j):
        if i == 0 or j == 0:
            return (1,)
        a = f(i - 1, j)  # largest is from the first sample: adds j
        b = f(i, j - 1)
        out = [0] * (i * j + 1)
        for u, c in enumerate(a):
            out[u + j] += c
        for u, c in enumerate(b):
            out[u] += c
        return tuple(out)
    return f(m, n)


def hl_ratio(before, after, level=0.95):
    """Hodges-Lehmann ratio after/before with Moses' interval."""
    m, n = len(before), len(after)
    d = sorted(math.log(a) - math.log(b) for a in after for b in before)
    mid = d[len(d) // 2] if len(d) % 2 else (d[len(d) // 2 - 1] + d[len(d) // 2]) / 2
    counts = mw_counts(m, n)
    total = sum(counts)
    k, cum = 0, 0
    for u, c in enumerate(counts):
        if 2 * (cum + c) / total > 1 - level:
            break
        cum += c
        k = u + 1
    if k == 0:
        return math.exp(mid), float("nan"), float("nan")
    return math.exp(mid), math.exp(min(d[k - 1], mid)), math.exp(max(d[m * n - k], mid))


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
    print("# server CPU per round trip, us: median [distribution-free 95% interval] (coverage)")
    for name, _ in servers:
        med, lo, hi, cov = median_ci(res[name])
        print(f"  {name:28s} {med:7.3f} [{lo:.3f}, {hi:.3f}] ({cov*100:.1f}%)   all: "
              + " ".join(f"{x:.3f}" for x in res[name]))
    c = res[servers[0][0]]
    print("# ratio to the C server: Hodges-Lehmann [Moses 95% interval]")
    for name, _ in servers[1:]:
        r, lo, hi = hl_ratio(c, res[name])
        print(f"  {name:28s} {r:.3f} [{lo:.3f}, {hi:.3f}]")
    if a.before:
        r, lo, hi = hl_ratio(res["commbench io-uring before"], res["commbench io-uring"])
        print(f"  after / before               {r:.3f} [{lo:.3f}, {hi:.3f}]")
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
