#!/usr/bin/env python3
"""`commbench mux serve --protocol http1 --tls` on two engines (default
epoll-lt and io-uring) under the same `commbench mux load --tls`,
interleaved over --repeat (order flipped every other repeat, a fresh
server per run): keep-alive at --conns, and a connection per request
(`--conn-per-request`, a TLS handshake each, resumed from the server's
session cache) at --close-conns. Per run: the server's CPU per request
(read by the load side through the control channel, accept and close of
the window included), requests/s, and the load side's CPU per request.
Medians with 95% intervals, the ratio second / first engine as a
Hodges-Lehmann estimate with Moses' 95% interval (commbench estimate).
Server on --server-cpu, load on --client-cpu."""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from cbestimate import median_ci, ratio_ci, fmt_ratio  # noqa: E402

TOKEN = "00112233445566778899aabbccddeeff"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def one(a, engine, conns, rounds, close):
    port, ctl = free_port(), free_port()
    env = dict(os.environ, COMMBENCH_MUX_TOKEN=TOKEN)
    srv = subprocess.Popen(
        [a.commbench, "--no-store", "mux", "serve", "--protocol", "http1", "--tls", "--engine", engine,
         "--listen", f"127.0.0.1:{port}", "--control", f"127.0.0.1:{ctl}",
         "--max-conns", str(max(conns, 64) * 2)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.sched_setaffinity(0, {a.server_cpu}))
    try:
        deadline = time.time() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", ctl), timeout=0.2).close()
                break
            except OSError:
                if srv.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"mux serve --engine {engine} did not start")
                time.sleep(0.02)
        cmd = [a.commbench, "--no-store", "mux", "load", "--target", f"127.0.0.1:{port}",
               "--control", f"127.0.0.1:{ctl}", "--protocol", "http1", "--tls", "--tls-version", "1.3",
               "--insecure", "--conns", str(conns), "--rounds", str(rounds), "--format", "json"]
        if close:
            cmd.append("--conn-per-request")
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600,
                           preexec_fn=lambda: os.sched_setaffinity(0, {a.client_cpu}))
        if p.returncode != 0:
            raise SystemExit(f"mux load against {engine} failed: {p.stderr[-2000:]}")
        m = json.loads(p.stdout)["records"][0]["metrics"]
        t = m["tls"]
        if t["failed"] or m["http"]["s2xx"] != conns * rounds:
            raise SystemExit(f"{engine}: {t['failed']} failed handshakes, {m['http']}")
        return {"srv_us": m["server_cpu_us_per_rt"], "rps": m["rt_per_s"],
                "cli_us": m["client_cpu_us_per_rt"], "handshakes": t["handshakes"],
                "resumed": t["resumed"]}
    finally:
        srv.terminate()
        try:
            srv.wait(5)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--commbench", required=True)
    ap.add_argument("--engines", default="epoll-lt,io-uring")
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--close-conns", type=int, default=50)
    ap.add_argument("--close-rounds", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    a = ap.parse_args()
    engines = a.engines.split(",")
    res = {}
    for rep in range(a.repeat):
        order = engines if rep % 2 == 0 else engines[::-1]
        for mode, conns, rounds in (("keepalive", a.conns, a.rounds),
                                    ("close", a.close_conns, a.close_rounds)):
            for e in order:
                r = one(a, e, conns, rounds, mode == "close")
                res.setdefault((mode, e), []).append(r)
                print(f"[rep {rep + 1}] {mode} {e}: {r}", flush=True)

    def med(xs, fmt="{:.4g}"):
        m, lo, hi = median_ci(xs)
        if lo is None:
            return f"{fmt.format(m)} (n={len(xs)}: {fmt.format(min(xs))}-{fmt.format(max(xs))})"
        return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]"
    print()
    print(f"mux serve --tls (TLS 1.3), {a.repeat} interleaved repeats; medians [95% interval]")
    print("| mode | conns | engine | server CPU µs/req | req/s | load CPU µs/req |")
    print("|---|---:|---|---:|---:|---:|")
    for mode, conns in (("keepalive", a.conns), ("close", a.close_conns)):
        for e in engines:
            rs = res[(mode, e)]
            print(f"| {mode} | {conns} | {e} | {med([r['srv_us'] for r in rs], '{:.2f}')} | "
                  f"{med([r['rps'] for r in rs])} | {med([r['cli_us'] for r in rs], '{:.2f}')} |")
        b = [r["srv_us"] for r in res[(mode, engines[0])]]
        x = [r["srv_us"] for r in res[(mode, engines[1])]]
        print(f"{mode}: server CPU per request, {engines[1]} / {engines[0]} = {fmt_ratio(ratio_ci(b, x))}")


if __name__ == "__main__":
    main()
