#!/usr/bin/env python3
"""sockperf side by side with the mux lab, both directions, at the same
connection count, interleaved over repeats (medians with their 95%
intervals, commbench estimate; every ratio commbench / sockperf the
Hodges-Lehmann estimate over the interleaved repeats with its 95% interval,
so that a target such as "<= 1.05x" is met only when the upper bound is; a
median's interval needs >= 6 repeats, "n<6" below that, the default is 5;
a ratio's >= 2):

  load generators: sockperf ping-pong vs commbench mux load, each against
                   commbench's epoll server speaking sockperf's framing;
  servers:         sockperf server vs commbench mux serve --protocol sockperf,
                   each driven by commbench mux load (and by sockperf's client).

sockperf's client keeps one message in flight in total whatever the
connection count; ours keeps one per connection. CPU of every process comes
from wait4 (clients) or /proc/PID/stat (servers). Called by
bench/mux-compare.sh.
"""
import argparse, json, os, re, socket, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cbestimate import fmt_ratio, median_ci, ratio_ci  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ


def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def feed(port, n):
    f = tempfile.NamedTemporaryFile("w", suffix=".feed", delete=False)
    f.write("".join(f"T:127.0.0.1:{port}\n" for _ in range(n)))
    f.close()
    return f.name


def run_rusage(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        raise RuntimeError(f"{cmd[0]} failed ({status}): {out[-2000:]}")
    return out, ru.ru_utime + ru.ru_stime


def sockperf_client(port, conns, a):
    f = feed(port, conns)
    try:
        out, cpu = run_rusage(["taskset", "-c", a.load_cpu, "sockperf", "ping-pong", "-f", f, "-F", "e",
                               "-t", str(a.seconds), "-m", str(a.size)])
    finally:
        os.unlink(f)
    m = re.search(r"RunTime=([\d.]+) sec; Warm up time=\d+ msec; SentMessages=(\d+); ReceivedMessages=(\d+)", out)
    if not m:
        raise RuntimeError("unexpected sockperf output:\n" + out[-3000:])
    rt = int(m.group(3))
    return {"rt": rt, "rt_per_s": rt / float(m.group(1)), "client_us": cpu * 1e6 / rt}


def our_client(port, conns, a, rounds):
    out = subprocess.run(
        ["taskset", "-c", a.load_cpu, a.commbench, "mux", "load", "--target", f"127.0.0.1:{port}",
         "--control", "none", "--protocol", "sockperf", "--conns", str(conns), "--rounds", str(rounds),
         "--warmup-rounds", "1", "--connect-window", "4", "--timeout", "300", "--size", str(a.size), "--format", "json"],
        capture_output=True, text=True, check=True).stdout
    m = json.loads(out)["records"][0]["metrics"]
    return {"rt": m["round_trips"], "rt_per_s": m["rt_per_s"], "client_us": m["client_cpu_us_per_rt"]}


def server(kind, port, a):
    if kind == "sockperf server":
        f = feed(port, 1)
        cmd = ["sockperf", "server", "-F", "e", "-f", f]
    else:
        cmd = [a.commbench, "mux", "serve", "--engine", "epoll-lt", "--protocol", "sockperf",
               "--listen", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{port + 1}"]
    p = subprocess.Popen(["taskset", "-c", a.server_cpu] + cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    wait_port(port)
    time.sleep(0.2)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--commbench", required=True)
    ap.add_argument("--sp-conns", type=int, default=500,
                    help="connections (sockperf's server takes at most 1023 per port and accepts ~15 per second)")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3, help="sockperf client run time")
    ap.add_argument("--server-cpu", default="1")
    ap.add_argument("--load-cpu", default="0")
    a, _ = ap.parse_known_args()
    a.size = max(a.size, 14)
    port = 9300
    res = {}
    k = 0
    load0 = os.getloadavg()[0]
    for rep in range(a.repeat):
        for conns in (2, a.sp_conns):
            for sk in ("commbench server", "sockperf server"):
                for lk in ("sockperf client", "commbench load"):
                    # A fresh port pair per server (see compare.py's next_port).
                    k += 1
                    port = 9300 + (k * 2) % 600
                    p = server(sk, port, a)
                    try:
                        c0 = cpu_of(p.pid)
                        if lk == "sockperf client":
                            r = sockperf_client(port, conns, a)
                        else:
                            rounds = max(20, 200000 // conns)
                            r = our_client(port, conns, a, rounds)
                        time.sleep(0.2)
                        r["server_us"] = (cpu_of(p.pid) - c0) * 1e6 / r["rt"]
                    finally:
                        p.terminate()
                        try:
                            p.wait(10)
                        except subprocess.TimeoutExpired:
                            p.kill()
                            p.wait()
                    res.setdefault((conns, sk, lk), []).append(r)
                    print(f"[rep {rep+1}] {conns:5d} conns {lk:15s} -> {sk:16s} {r['rt_per_s']:9.0f} rt/s  "
                          f"client {r['client_us']:6.2f} us/rt  server {r['server_us']:6.2f} us/rt",
                          file=sys.stderr, flush=True)
    print(f"\n# sockperf side by side: K={a.size} B, {a.repeat} interleaved repeats, server CPU {a.server_cpu}, "
          f"load CPU {a.load_cpu}, load average {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    med = lambda rs, k: statistics.median(r[k] for r in rs)

    def iv(rs, k, d):
        _, lo, hi = median_ci([r[k] for r in rs])
        return "n<6" if lo is None else f"{lo:.{d}f}-{hi:.{d}f}"

    def rat(ours, theirs, k):
        return fmt_ratio(ratio_ci([r[k] for r in theirs], [r[k] for r in ours]))

    print("# medians; [95%] = the median's 95% interval (n<6: no interval)")
    print(f"{'conns':>5s} {'load':16s} {'server':17s} {'rt/s':>9s} {'[95%]':>17s} {'cli us/rt':>9s} {'[95%]':>11s} "
          f"{'srv us/rt':>9s} {'[95%]':>11s}")
    for (conns, sk, lk), rs in sorted(res.items()):
        print(f"{conns:5d} {lk:16s} {sk:17s} {med(rs, 'rt_per_s'):9.0f} {iv(rs, 'rt_per_s', 0):>17s} "
              f"{med(rs, 'client_us'):9.2f} {iv(rs, 'client_us', 2):>11s} "
              f"{med(rs, 'server_us'):9.2f} {iv(rs, 'server_us', 2):>11s}")
    print("# ratios: of the medians, then Hodges-Lehmann [95% interval] over the interleaved repeats")
    for conns in (2, a.sp_conns):
        ours = res[(conns, "commbench server", "commbench load")]
        theirs = res[(conns, "commbench server", "sockperf client")]
        print(f"  {conns} conns, load generators against our server: commbench/sockperf rt/s "
              f"{med(ours, 'rt_per_s') / med(theirs, 'rt_per_s'):.2f}x {rat(ours, theirs, 'rt_per_s')}, CPU per rt "
              f"{med(ours, 'client_us') / med(theirs, 'client_us'):.2f}x {rat(ours, theirs, 'client_us')}")
        so = res[(conns, "commbench server", "commbench load")]
        ss = res[(conns, "sockperf server", "commbench load")]
        print(f"  {conns} conns, servers under our load: commbench/sockperf server CPU per rt "
              f"{med(so, 'server_us') / med(ss, 'server_us'):.2f}x {rat(so, ss, 'server_us')}")
        so = res[(conns, "commbench server", "sockperf client")]
        ss = res[(conns, "sockperf server", "sockperf client")]
        print(f"  {conns} conns, servers under sockperf's client: commbench/sockperf server CPU per rt "
              f"{med(so, 'server_us') / med(ss, 'server_us'):.2f}x {rat(so, ss, 'server_us')}")

if __name__ == "__main__":
    main()
