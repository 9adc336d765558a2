#!/usr/bin/env python3
"""commbench's HTTP/1.1 load generator against wrk and h2load, on the same
nginx and lighttpd (epoll), side by side, interleaved over repeats.

For every server and connection count:
  - closed loop, one request in flight per connection, as fast as the
    server answers: requests per second and requests per load-generator
    CPU-second (the generator's user+sys CPU from getrusage of the child,
    connect phase included for all three) for `commbench mux load
    --protocol http1`, `wrk -t1` and `h2load --h1 -t1`;
  - at a fixed rate: commbench's corrected p99 (from the intended send
    time) and raw p99 (from the write), and h2load's p99 from its
    per-request log in its rate mode (`-r`: a connection rate; each
    connection then sends its requests closed-loop, so its latency is the
    uncorrected kind); wrk's closed-loop p99 beside them.
Servers are pinned to --server-cpu, generators to --client-cpu. Medians
with 95% intervals and ratios (Hodges-Lehmann, Moses) from bench/stats.py.
Servers are stopped and their temp dirs removed at the end, on error and
on Ctrl-C.
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from stats import median_ci, ratio_ci, fmt_ratio  # noqa: E402

BODY = b"hello, world\n"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, kind, conns, cpu):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix="mux-http-compare-")
        os.makedirs(f"{self.dir}/www")
        os.makedirs(f"{self.dir}/tmp")
        with open(f"{self.dir}/www/index.txt", "wb") as f:
            f.write(BODY)
        self.port = free_port()
        fds = conns * 2 + 256
        d = self.dir
        if kind == "nginx":
            conf = f"{d}/nginx.conf"
            with open(conf, "w") as f:
                f.write(f"""daemon off; master_process off; worker_processes 1;
worker_rlimit_nofile {fds}; error_log {d}/error.log warn; pid {d}/nginx.pid;
events {{ worker_connections {conns * 2 + 64}; use epoll; multi_accept on; }}
http {{ access_log off; keepalive_requests 100000000; keepalive_timeout 3600s;
  client_header_timeout 3600s; client_body_temp_path {d}/tmp/b; proxy_temp_path {d}/tmp/p;
  fastcgi_temp_path {d}/tmp/f; uwsgi_temp_path {d}/tmp/u; scgi_temp_path {d}/tmp/s;
  types {{ text/plain txt; }}
  server {{ listen 127.0.0.1:{self.port} backlog=4096; root {d}/www; }} }}
""")
            cmd = ["nginx", "-p", d, "-c", conf]
        else:
            conf = f"{d}/lighttpd.conf"
            with open(conf, "w") as f:
                f.write(f"""server.document-root = "{d}/www"
server.bind = "127.0.0.1"
server.port = {self.port}
server.event-handler = "linux-sysepoll"
server.max-fds = {fds}
server.max-connections = {conns + 64}
server.listen-backlog = 4096
server.max-keep-alive-requests = 65535
server.max-keep-alive-idle = 3600
server.max-read-idle = 3600
server.errorlog = "{d}/error.log"
mimetype.assign = ( ".txt" => "text/plain" )
""")
            cmd = ["lighttpd", "-D", "-f", conf]

        def pre():
            os.sched_setaffinity(0, {cpu})
        self.p = subprocess.Popen(cmd, preexec_fn=pre, stdout=subprocess.DEVNULL,
                                  stderr=open(f"{d}/stderr.log", "w"))
        deadline = time.time() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if self.p.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise SystemExit(f"{kind} did not start: see {d}/error.log")
                time.sleep(0.02)

    def url(self):
        return f"http://127.0.0.1:{self.port}/index.txt"

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_timed(cmd, cpu, timeout):
    """Runs cmd pinned to cpu; returns (stdout, wall s, child CPU s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    wall = time.time() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p.stdout, wall, cpu_s


def ours_closed(cb, srv, conns, requests, cpu):
    rounds = max(1, requests // conns)
    out, _, cpu_s = run_timed([cb, "mux", "load", "--target", f"127.0.0.1:{srv.port}",
                               "--control", "none", "--protocol", "http1", "--path", "/index.txt",
                               "--conns", str(conns), "--rounds", str(rounds), "--format", "json"],
                              cpu, 600)
    m = json.loads(out)["records"][0]["metrics"]
    n = m["round_trips"]
    return {"rps": m["rt_per_s"], "req_per_cpu_s": n / cpu_s, "p99_us": m["raw_ns"]["p99"] / 1e3}


def wrk_closed(srv, conns, seconds, cpu):
    out, _, cpu_s = run_timed(["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency",
                               "--timeout", "30s", srv.url()], cpu, seconds + 120)
    n = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    p99 = float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)] if m else float("nan")
    if "Non-2xx" in out or "Socket errors" in out:
        print(f"  wrk reported errors: {out.strip().splitlines()[-4:]}")
    return {"rps": rps, "req_per_cpu_s": n / cpu_s, "p99_us": p99}


def h2load_closed(srv, conns, requests, cpu):
    n = max(conns, requests // conns * conns)
    out, _, cpu_s = run_timed(["h2load", "--h1", "-t1", f"-c{conns}", f"-n{n}", srv.url()],
                              cpu, 600)
    done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
    rps = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out).group(1))
    return {"rps": rps, "req_per_cpu_s": done / cpu_s}


def ours_rate(cb, srv, conns, rate, seconds, cpu):
    out, _, _ = run_timed([cb, "mux", "load", "--target", f"127.0.0.1:{srv.port}",
                           "--control", "none", "--protocol", "http1", "--path", "/index.txt",
                           "--conns", str(conns), "--rate", str(rate), "--warmup", "1",
                           "--duration", str(seconds), "--format", "json"], cpu, 600)
    m = json.loads(out)["records"][0]["metrics"]
    return {"corrected_p99_us": m["corrected_ns"]["p99"] / 1e3, "raw_p99_us": m["raw_ns"]["p99"] / 1e3,
            "lag_p99_us": m["lag_ns"]["p99"] / 1e3, "achieved": m.get("rate_achieved"),
            "status": m["status"]}


def h2load_rate(srv, conns, rate, seconds, cpu):
    # -r: connections started per period (1 s); each sends n/c requests
    # closed-loop. Spread the connections over the run so the request rate
    # is about `rate`.
    per_conn = max(1, int(rate * seconds / conns))
    log = tempfile.mktemp(prefix="h2load-log-")
    try:
        run_timed(["h2load", "--h1", "-t1", f"-c{conns}", f"-n{per_conn * conns}",
                   f"-r{max(1, conns // max(1, seconds))}", f"--log-file={log}", srv.url()],
                  cpu, seconds * 10 + 120)
        lat = sorted(int(l.split("\t")[2]) for l in open(log) if l.count("\t") >= 2)
    finally:
        if os.path.exists(log):
            os.unlink(log)
    return {"p99_us": lat[int(0.99 * (len(lat) - 1))] if lat else float("nan")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--commbench", required=True)
    ap.add_argument("--conns", default="1000,10000")
    ap.add_argument("--servers", default="nginx,lighttpd")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rate", type=int, default=20000)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--peers", default="wrk,h2load",
                    help="the other generators to run (a subset of wrk,h2load)")
    ap.add_argument("--no-rate", action="store_true",
                    help="skip the fixed-rate runs (closed loop only)")
    a = ap.parse_args()
    servers = [s for s in a.servers.split(",") if shutil.which(s) or os.path.exists(f"/usr/sbin/{s}")]
    for s in a.servers.split(","):
        if s not in servers:
            print(f"{s}: not installed (apt-get install -y {s}); skipped")
    asked = [g for g in ("wrk", "h2load") if g in a.peers.split(",")]
    gens = [g for g in asked if shutil.which(g)]
    for g in asked:
        if g not in gens:
            print(f"{g}: not installed (apt-get install -y {'wrk' if g == 'wrk' else 'nghttp2-client'}); skipped")
    live = []

    def cleanup(*_):
        for s in live:
            s.stop()
        sys.exit(130)
    signal.signal(signal.SIGINT, cleanup)
    signal.signal(signal.SIGTERM, cleanup)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    try:
        want = int(open("/proc/sys/fs/nr_open").read())
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
    except (OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results = {}
    try:
        for conns in [int(c) for c in a.conns.split(",")]:
            for sname in servers:
                for rep in range(a.repeat):
                    order = ["ours"] + gens
                    if rep % 2:
                        order.reverse()
                    for g in order:
                        srv = Server(sname, conns, a.server_cpu)
                        live.append(srv)
                        try:
                            if g == "ours":
                                r = ours_closed(a.commbench, srv, conns, a.requests, a.client_cpu)
                            elif g == "wrk":
                                r = wrk_closed(srv, conns, a.seconds, a.client_cpu)
                            else:
                                r = h2load_closed(srv, conns, a.requests, a.client_cpu)
                        finally:
                            srv.stop()
                            live.remove(srv)
                        results.setdefault((sname, conns, g, "closed"), []).append(r)
                        print(f"{sname} N={conns} {g} closed: {r}", flush=True)
                    # Fixed rate.
                    for g in ([] if a.no_rate else ["ours"] + (["h2load"] if "h2load" in gens else [])):
                        srv = Server(sname, conns, a.server_cpu)
                        live.append(srv)
                        try:
                            if g == "ours":
                                r = ours_rate(a.commbench, srv, conns, a.rate, a.seconds, a.client_cpu)
                            else:
                                r = h2load_rate(srv, conns, a.rate, a.seconds, a.client_cpu)
                        finally:
                            srv.stop()
                            live.remove(srv)
                        results.setdefault((sname, conns, g, "rate"), []).append(r)
                        print(f"{sname} N={conns} {g} rate {a.rate}/s: {r}", flush=True)
    finally:
        for s in live:
            s.stop()

    def med(key, field):
        xs = [r[field] for r in results.get(key, []) if r.get(field) is not None]
        m, lo, hi = median_ci(xs)
        ci = f"[{lo:.4g}, {hi:.4g}]" if lo is not None else f"(n={len(xs)}<6: min-max {min(xs):.4g}-{max(xs):.4g})" if xs else ""
        return f"{m:.4g} {ci}"

    print()
    print(f"| server | conns | generator | req/s | req per generator CPU-s | p99 µs (closed) |")
    print("|---|---:|---|---:|---:|---:|")
    for (sname, conns, g, mode) in sorted(k for k in results if k[3] == "closed"):
        key = (sname, conns, g, mode)
        p99 = med(key, "p99_us") if g != "h2load" else "-"
        print(f"| {sname} | {conns} | {g} | {med(key, 'rps')} | {med(key, 'req_per_cpu_s')} | {p99} |")
    print()
    for sname in servers:
        for conns in sorted({k[1] for k in results}):
            ours = [r["req_per_cpu_s"] for r in results.get((sname, conns, "ours", "closed"), [])]
            for g in gens:
                other = [r["req_per_cpu_s"] for r in results.get((sname, conns, g, "closed"), [])]
                if ours and other:
                    print(f"{sname} N={conns}: requests per generator CPU-s, ours / {g} = {fmt_ratio(ratio_ci(other, ours))}")
    print()
    print(f"at {a.rate} req/s: | server | conns | ours corrected p99 µs | ours raw p99 µs | ours lag p99 µs | h2load -r p99 µs |")
    for (sname, conns, g, mode) in sorted(k for k in results if k[3] == "rate" and k[2] == "ours"):
        key = (sname, conns, "ours", "rate")
        h = (sname, conns, "h2load", "rate")
        st = ",".join(sorted({r["status"] for r in results[key]}))
        print(f"| {sname} | {conns} | {med(key, 'corrected_p99_us')} | {med(key, 'raw_p99_us')} | "
              f"{med(key, 'lag_p99_us')} | {med(h, 'p99_us') if h in results else '-'} | status {st}")


if __name__ == "__main__":
    main()
