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
with 95% intervals and ratios (Hodges-Lehmann, Moses) from commbench estimate.
Servers are stopped and their temp dirs removed at the end, on error and
on Ctrl-C.

With --tls: nginx over HTTPS (TLS 1.3, a P-256 certificate generated for
the run, session tickets on), `commbench mux load --tls --insecure` (the
chain unchecked, as wrk's SSL_VERIFY_NONE) against `wrk` on the https URL, interleaved: keep-alive closed loop at --conns
(requests/s, requests per generator CPU-second, p99), a connection per
request (`--conn-per-request` against wrk's `-H "Connection: close"`:
handshakes per generator CPU-second, and the share nginx resumed from its
$ssl_session_reused log), and ours alone at --rate on keep-alive
(achieved rate, corrected percentiles, handshake latency, CPU per request
split into user and system).
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
from cbestimate import median_ci, ratio_ci, fmt_ratio  # noqa: E402

BODY = b"hello, world\n"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, kind, conns, cpu, tls=None, reuse_log=False):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix="mux-http-compare-")
        os.makedirs(f"{self.dir}/www")
        os.makedirs(f"{self.dir}/tmp")
        with open(f"{self.dir}/www/index.txt", "wb") as f:
            f.write(BODY)
        self.port = free_port()
        fds = conns * 2 + 256
        d = self.dir
        self.scheme = "https" if tls else "http"
        listen = f"127.0.0.1:{self.port} backlog=4096"
        extra = ""
        if tls:
            listen += " ssl"
            extra = (f"ssl_certificate {tls}/cert.pem; ssl_certificate_key {tls}/key.pem; "
                     "ssl_protocols TLSv1.3; ")
        log = "access_log off;"
        if reuse_log:
            # One letter per request: r (resumed) or . (a full handshake).
            log = f"log_format reuse '$ssl_session_reused'; access_log {d}/reuse.log reuse buffer=64k;"
        if kind == "nginx":
            conf = f"{d}/nginx.conf"
            with open(conf, "w") as f:
                f.write(f"""daemon off; master_process off; worker_processes 1;
worker_rlimit_nofile {fds}; error_log {d}/error.log warn; pid {d}/nginx.pid;
events {{ worker_connections {conns * 2 + 64}; use epoll; multi_accept on; }}
http {{ {log} keepalive_requests 100000000; keepalive_timeout 3600s;
  client_header_timeout 3600s; client_body_temp_path {d}/tmp/b; proxy_temp_path {d}/tmp/p;
  fastcgi_temp_path {d}/tmp/f; uwsgi_temp_path {d}/tmp/u; scgi_temp_path {d}/tmp/s;
  types {{ text/plain txt; }}
  server {{ listen {listen}; {extra}root {d}/www; }} }}
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
        return f"{self.scheme}://127.0.0.1:{self.port}/index.txt"

    def resumed_share(self):
        """Of the requests nginx logged, the share on resumed sessions
        (after it stopped, the log flushed)."""
        try:
            with open(f"{self.dir}/reuse.log") as f:
                v = [l.strip() for l in f if l.strip()]
        except OSError:
            return None
        return sum(1 for x in v if x == "r") / len(v) if v else None

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def stop_keep(self):
        """Stops the server (its log flushed) and returns the resumed share."""
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        share = self.resumed_share()
        shutil.rmtree(self.dir, ignore_errors=True)
        return share


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


def make_cert():
    """A P-256 certificate for localhost and 127.0.0.1 (what `mux serve
    --tls` generates), in a temp dir."""
    d = tempfile.mkdtemp(prefix="mux-https-cert-")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", f"{d}/key.pem",
                    "-out", f"{d}/cert.pem", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return d


def ours_tls(cb, srv, conns, cpu, rounds=None, rate=None, seconds=5, close=False):
    cmd = [cb, "mux", "load", "--target", f"127.0.0.1:{srv.port}", "--control", "none",
           "--protocol", "http1", "--path", "/index.txt", "--tls", "--tls-version", "1.3",
           # As wrk (SSL_VERIFY_NONE): the chain is not checked, the
           # handshake's signatures are.
           "--insecure", "--conns", str(conns), "--format", "json"]
    if close:
        cmd.append("--conn-per-request")
    if rate:
        cmd += ["--rate", str(rate), "--warmup", "1", "--duration", str(seconds)]
    else:
        cmd += ["--rounds", str(rounds)]
    out, _, cpu_s = run_timed(cmd, cpu, 600)
    m = json.loads(out)["records"][0]["metrics"]
    n = m["round_trips"]
    t = m["tls"]
    r = {"rps": m["rt_per_s"], "req_per_cpu_s": n / cpu_s, "p99_us": m["raw_ns"]["p99"] / 1e3,
         "handshakes": t["handshakes"], "resumed": t["resumed"], "failed": t["failed"],
         "version": t["version"], "cipher": t["cipher"],
         "user_us": m["client_user_us_per_rt"], "sys_us": m["client_sys_us_per_rt"]}
    if rate:
        c = m["corrected_ns"]
        h = t["handshake_ns"]
        r.update({"achieved": m.get("rate_achieved"), "status": m["status"],
                  "corr_p50_us": c["p50"] / 1e3, "corr_p99_us": c["p99"] / 1e3,
                  "corr_p999_us": c["p999"] / 1e3, "cpu_us": m["client_cpu_us_per_rt"],
                  "hs_p50_us": h["p50"] / 1e3 if h["n"] else None,
                  "hs_p99_us": h["p99"] / 1e3 if h["n"] else None})
    return r


def wrk_tls(srv, conns, seconds, cpu, close=False):
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency", "--timeout", "30s"]
    if close:
        cmd += ["-H", "Connection: close"]
    out, _, cpu_s = run_timed(cmd + [srv.url()], cpu, seconds + 120)
    n = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    p99 = float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)] if m else float("nan")
    errs = re.search(r"Socket errors: (.*)", out)
    return {"rps": rps, "req_per_cpu_s": n / cpu_s, "p99_us": p99,
            "errors": errs.group(1) if errs else None}


def tls_main(a):
    """The --tls comparison (see the module's docstring)."""
    if not shutil.which("wrk"):
        raise SystemExit("wrk: not installed (apt-get install -y wrk)")
    cert = make_cert()
    conns = int(a.conns.split(",")[0])
    close_conns = a.close_conns
    rounds = max(1, a.requests // conns)
    close_rounds = max(1, a.close_requests // close_conns)
    results = {}
    live = []

    def cleanup(*_):
        for s in live:
            s.stop()
        shutil.rmtree(cert, ignore_errors=True)
        sys.exit(130)
    signal.signal(signal.SIGINT, cleanup)
    signal.signal(signal.SIGTERM, cleanup)

    def one(mode, g, fn):
        srv = Server("nginx", max(conns, close_conns), a.server_cpu, tls=cert,
                     reuse_log=(mode == "close"))
        live.append(srv)
        try:
            r = fn(srv)
        finally:
            share = srv.stop_keep()
            live.remove(srv)
        if mode == "close":
            r["nginx_resumed_share"] = share
        results.setdefault((mode, g), []).append(r)
        print(f"{mode} {g}: {r}", flush=True)

    try:
        for rep in range(a.repeat):
            order = ["ours", "wrk"] if rep % 2 == 0 else ["wrk", "ours"]
            for g in order:
                if g == "ours":
                    one("keepalive", g, lambda s: ours_tls(a.commbench, s, conns, a.client_cpu,
                                                           rounds=rounds))
                else:
                    one("keepalive", g, lambda s: wrk_tls(s, conns, a.seconds, a.client_cpu))
            for g in order:
                if g == "ours":
                    one("close", g, lambda s: ours_tls(a.commbench, s, close_conns, a.client_cpu,
                                                       rounds=close_rounds, close=True))
                else:
                    one("close", g, lambda s: wrk_tls(s, close_conns, a.seconds, a.client_cpu,
                                                      close=True))
            if not a.no_rate:
                one("rate", "ours", lambda s: ours_tls(a.commbench, s, conns, a.client_cpu,
                                                       rate=a.rate, seconds=a.seconds))
    finally:
        for s in live:
            s.stop()
        shutil.rmtree(cert, ignore_errors=True)

    def med(key, field, fmt="{:.4g}"):
        xs = [r[field] for r in results.get(key, []) if isinstance(r.get(field), (int, float))]
        if not xs:
            return "-"
        m, lo, hi = median_ci(xs)
        if lo is None:
            return f"{fmt.format(m)} (n={len(xs)}: {fmt.format(min(xs))}-{fmt.format(max(xs))})"
        return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]"

    print()
    print(f"nginx over TLS 1.3, {a.repeat} interleaved repeats; medians [95% interval]")
    print("| mode | conns | generator | req/s | req per generator CPU-s | p99 µs | nginx resumed share |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for mode, n in (("keepalive", conns), ("close", close_conns)):
        for g in ("ours", "wrk"):
            key = (mode, g)
            if key in results:
                print(f"| {mode} | {n} | {g} | {med(key, 'rps')} | {med(key, 'req_per_cpu_s')} | "
                      f"{med(key, 'p99_us')} | {med(key, 'nginx_resumed_share', '{:.2f}') if mode == 'close' else '-'} |")
    for mode in ("keepalive", "close"):
        ours = [r["req_per_cpu_s"] for r in results.get((mode, "ours"), [])]
        other = [r["req_per_cpu_s"] for r in results.get((mode, "wrk"), [])]
        if ours and other:
            print(f"{mode}: requests per generator CPU-s, ours / wrk = {fmt_ratio(ratio_ci(other, ours))}")
        ours = [r["rps"] for r in results.get((mode, "ours"), [])]
        other = [r["rps"] for r in results.get((mode, "wrk"), [])]
        if ours and other:
            print(f"{mode}: requests/s, ours / wrk = {fmt_ratio(ratio_ci(other, ours))}")
    for mode in ("keepalive", "close"):
        key = (mode, "ours")
        if key in results:
            r0 = results[key][0]
            print(f"ours {mode}: {r0['version']} {r0['cipher']}; handshakes per run {med(key, 'handshakes')}, "
                  f"resumed {med(key, 'resumed')}, failed {med(key, 'failed')}; CPU per request user "
                  f"{med(key, 'user_us', '{:.2f}')} µs, sys {med(key, 'sys_us', '{:.2f}')} µs")
    key = ("rate", "ours")
    if key in results:
        st = ",".join(sorted({r["status"] for r in results[key]}))
        print(f"ours at {a.rate} req/s keep-alive, {conns} conns: achieved {med(key, 'achieved')}, corrected p50 "
              f"{med(key, 'corr_p50_us')} µs, p99 {med(key, 'corr_p99_us')} µs, p99.9 {med(key, 'corr_p999_us')} µs; "
              f"handshake p50 {med(key, 'hs_p50_us')} µs p99 {med(key, 'hs_p99_us')} µs (warm-up: none measured "
              f"unless a connection reconnected); CPU per request {med(key, 'cpu_us', '{:.2f}')} µs "
              f"(user {med(key, 'user_us', '{:.2f}')}, sys {med(key, 'sys_us', '{:.2f}')}); status {st}")


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
    ap.add_argument("--tls", action="store_true",
                    help="HTTPS: nginx over TLS 1.3, ours against wrk (see the docstring)")
    ap.add_argument("--close-conns", type=int, default=50,
                    help="--tls: connections of the connection-per-request runs")
    ap.add_argument("--close-requests", type=int, default=20000,
                    help="--tls: requests of our connection-per-request runs")
    a = ap.parse_args()
    if a.tls:
        return tls_main(a)
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
