#!/usr/bin/env python3
"""Side-by-side server and load-generator comparison for the mux lab.

Every server runs pinned to one CPU and is measured the same way from the
outside (utime/stime in /proc/PID/stat before it accepts and after the load
closed its connections: server CPU per round trip including accept and
close); the load runs pinned to the other CPU. Servers are interleaved
(A B C A B C) over the repeats and summarised as medians with min-max and
their 95% intervals (commbench estimate, order statistics); every ratio
commbench / peer is the Hodges-Lehmann estimate over the interleaved
repeats with its 95% interval (Moses), beside the ratio of the medians: a
target such as "<= 1.05x" is met only when the interval's upper bound is.
A median's interval needs >= 6 repeats ("n<6" below that; the default is
5), a ratio's >= 2.

Servers: C reference (poll, epoll LT with index, io_uring via liburing),
commbench mux serve (each engine, index lookup), a current-thread tokio
server. Loads: commbench mux load (verifies every byte) and the C epoll
client, each against the C epoll server and commbench's epoll server.

Called by bench/mux-compare.sh, which builds the programs first.
"""
import argparse, json, os, socket, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cbestimate import fmt_ratio, median_ci, ratio_ci  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / HZ, int(fields[12]) / HZ  # utime, stime


def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


_port = [9100]


def next_port():
    """A fresh port per server: a stopped io_uring server's listener can
    outlive its process for a moment (the ring is torn down asynchronously),
    so the next server must not need the same port."""
    _port[0] = 9100 + (_port[0] - 9100 + 2) % 800
    return _port[0]


def start_server(cmd, port):
    p = subprocess.Popen(["taskset", "-c", SERVER_CPU] + cmd, stderr=subprocess.DEVNULL)
    wait_port(port)
    time.sleep(0.1)
    return p


def stop(p):
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def run_load(kind, port, a):
    if kind == "commbench":
        out = subprocess.run(
            ["taskset", "-c", LOAD_CPU, a.commbench, "mux", "load", "--target", f"127.0.0.1:{port}",
             "--control", "none", "--conns", str(a.conns), "--rounds", str(a.rounds),
             "--size", str(a.size), "--format", "json"],
            capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"commbench mux load failed: {out.stderr[-2000:]}")
        m = json.loads(out.stdout)["records"][0]["metrics"]
        rt = m["round_trips"]
        return {"rt": rt, "rt_per_s": m["rt_per_s"], "client_us": m["client_cpu_us_per_rt"]}
    out = subprocess.run(
        ["taskset", "-c", LOAD_CPU, a.c_client, "127.0.0.1", str(port), str(a.conns),
         str(a.rounds), str(a.size)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"c_client failed: {out.stderr[-2000:]}")
    out = out.stdout
    kv = dict(x.split("=") for x in out.split())
    rt = int(kv["rt"])
    return {"rt": rt, "rt_per_s": rt / float(kv["wall_s"]),
            "client_us": (float(kv["user_s"]) + float(kv["sys_s"])) * 1e6 / rt}


def measure(make_cmd, load, a):
    port = next_port()
    p = start_server(make_cmd(port), port)
    try:
        u0, s0 = cpu_of(p.pid)
        r = run_load(load, port, a)
        time.sleep(0.3)  # let the server see every close
        u1, s1 = cpu_of(p.pid)
    finally:
        stop(p)
    rt = r["rt"]
    r["server_us"] = (u1 - u0 + s1 - s0) * 1e6 / rt
    r["server_user_us"] = (u1 - u0) * 1e6 / rt
    return r


def main():
    global SERVER_CPU, LOAD_CPU
    ap = argparse.ArgumentParser()
    ap.add_argument("--commbench", required=True)
    ap.add_argument("--c-echo", required=True)
    ap.add_argument("--c-client", required=True)
    ap.add_argument("--tokio", required=True)
    ap.add_argument("--conns", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--server-cpu", default="1")
    ap.add_argument("--load-cpu", default="0")
    a = ap.parse_args()
    SERVER_CPU, LOAD_CPU = a.server_cpu, a.load_cpu
    def ours(engine):
        return lambda port: [a.commbench, "mux", "serve", "--engine", engine, "--listen",
                             f"127.0.0.1:{port}", "--control", f"127.0.0.1:{port + 1}",
                             "--max-conns", str(a.conns)]
    servers = [
        ("C poll", lambda port: [a.c_echo, "poll", str(port)]),
        ("C epoll-lt index", lambda port: [a.c_echo, "epoll", str(port)]),
        ("C io_uring", lambda port: [a.c_echo, "uring", str(port)]),
        ("commbench poll", ours("poll")),
        ("commbench epoll-lt index", ours("epoll-lt")),
        ("commbench epoll-et index", ours("epoll-et")),
        ("commbench io-uring index", ours("io-uring")),
        ("tokio current-thread", lambda port: [a.tokio, str(port)]),
    ]
    loads = [("commbench load", "commbench"), ("C epoll client", "c")]
    load_servers = ["C epoll-lt index", "commbench epoll-lt index"]
    res = {}
    t0 = time.time()
    load0 = os.getloadavg()[0]
    for rep in range(a.repeat):
        for name, cmd in servers:
            r = measure(cmd, "commbench", a)
            res.setdefault(("commbench load", name), []).append(r)
            print(f"[rep {rep+1}] {name:26s} server {r['server_us']:6.2f} us/rt (user {r['server_user_us']:.2f})  "
                  f"{r['rt_per_s']:9.0f} rt/s", file=sys.stderr, flush=True)
        for sname in load_servers:
            cmd = dict(servers)[sname]
            r = measure(cmd, "c", a)
            res.setdefault(("C epoll client", sname), []).append(r)
            print(f"[rep {rep+1}] C client -> {sname:26s} client {r['client_us']:6.2f} us/rt",
                  file=sys.stderr, flush=True)
    load1 = os.getloadavg()[0]

    def med(rs, k):
        v = [r[k] for r in rs]
        return statistics.median(v), min(v), max(v)

    print(f"# mux-compare: N={a.conns} R={a.rounds} K={a.size}, {a.repeat} interleaved repeats, "
          f"server on CPU {SERVER_CPU}, load on CPU {LOAD_CPU}, load average {load0:.2f} -> {load1:.2f}, "
          f"{time.time()-t0:.0f} s")
    def iv(rs, k, d):
        _, lo, hi = median_ci([r[k] for r in rs])
        return "n<6" if lo is None else f"{lo:.{d}f}-{hi:.{d}f}"

    def rat(ours, theirs, k):
        return fmt_ratio(ratio_ci([r[k] for r in theirs], [r[k] for r in ours]))

    print("# medians; [95%] = the median's 95% interval (n<6: no interval)")
    print(f"{'load':16s} {'server':26s} {'srv us/rt':>10s} {'(min-max)':>13s} {'[95%]':>13s} {'user us/rt':>10s} "
          f"{'[95%]':>11s} {'cli us/rt':>9s} {'[95%]':>11s} {'rt/s':>9s} {'[95%]':>15s}")
    for (lname, sname), rs in res.items():
        s, smin, smax = med(rs, "server_us")
        print(f"{lname:16s} {sname:26s} {s:10.2f} {smin:6.2f}-{smax:<6.2f} {iv(rs, 'server_us', 2):>13s} "
              f"{med(rs, 'server_user_us')[0]:10.2f} {iv(rs, 'server_user_us', 2):>11s} "
              f"{med(rs, 'client_us')[0]:9.2f} {iv(rs, 'client_us', 2):>11s} "
              f"{med(rs, 'rt_per_s')[0]:9.0f} {iv(rs, 'rt_per_s', 0):>15s}")
    ref = {"poll": "C poll", "epoll-lt index": "C epoll-lt index", "epoll-et index": "C epoll-lt index",
           "io-uring index": "C io_uring"}
    print("\n# commbench server CPU per round trip / C reference (same load): ratio of the medians, then the\n"
          "# Hodges-Lehmann ratio [95% interval] over the interleaved repeats:")
    for k, c in ref.items():
        ours = res.get(("commbench load", f"commbench {k}"))
        theirs = res.get(("commbench load", c))
        if ours and theirs:
            print(f"  {k:16s} {med(ours, 'server_us')[0] / med(theirs, 'server_us')[0]:.3f} (vs {c})  "
                  f"{rat(ours, theirs, 'server_us')}")
    tok = res.get(("commbench load", "tokio current-thread"))
    ours = res.get(("commbench load", "commbench epoll-lt index"))
    if tok and ours:
        print(f"  epoll-lt index / tokio: {med(ours, 'server_us')[0] / med(tok, 'server_us')[0]:.3f}  "
              f"{rat(ours, tok, 'server_us')}")
    cl = res.get(("commbench load", "C epoll-lt index"))
    cc = res.get(("C epoll client", "C epoll-lt index"))
    if cl and cc:
        print(f"  load generator client CPU per rt, commbench / C client (vs C epoll server): "
              f"{med(cl, 'client_us')[0]:.2f} / {med(cc, 'client_us')[0]:.2f} = "
              f"{med(cl, 'client_us')[0] / med(cc, 'client_us')[0]:.3f}  {rat(cl, cc, 'client_us')}")

if __name__ == "__main__":
    main()
