#!/usr/bin/env python3
"""One open-loop run split into --segments standalone `commbench mux load
--segment I/N` processes (same --start-at, each given the whole run's
--conns and --rate) against one nginx, added by `commbench merge`, over
--repeat runs.

Per run: the merged achieved rate against the asked rate (the target:
within 1%), the merged corrected p50/p99, the generator's CPU per request
(the merged record's client_cpu_us_per_rt), and every merged count
checked against the segments' sum: scheduled, completed, held,
round_trips, connected, connect_failures, the HTTP classes, the
histograms' sample counts, and with --tls the handshakes (full, resumed,
failed) and handshake samples. A count that differs stops the run with
an error. nginx (keep-alive, epoll; with --tls over TLS 1.3, a P-256
certificate generated for the run) is pinned to --server-cpu and the
segments to --client-cpu. With --one-process, each run also measures the
same load from one unsegmented `mux load` process, interleaved (order
flipped every other run). Medians with 95% intervals (commbench estimate).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from http_compare import Server, make_cert  # noqa: E402
from cbestimate import median_ci  # noqa: E402

COUNTS = ["scheduled", "completed", "held", "round_trips", "connected", "connect_failures"]
HISTS = ["corrected_ns", "raw_ns", "lag_ns"]


def one_run(a, srv, work, run):
    n = a.segments
    start_at = int(time.time() * 1000) + a.lead_ms
    kids = []
    for i in range(n):
        out = f"{work}/r{run}-seg{i}.json"
        cmd = [a.commbench, "--no-store", "mux", "load", "--target", f"127.0.0.1:{srv.port}",
               "--control", "none", "--protocol", "http1", "--path", "/index.txt",
               "--conns", str(a.conns), "--rate", str(a.rate), "--warmup", str(a.warmup),
               "--duration", str(a.seconds), "--segment", f"{i}/{n}", "--start-at", str(start_at),
               "--format", "json", "-o", out]
        if a.tls:
            cmd += ["--tls", "--tls-version", "1.3", "--insecure"]
        kids.append((out, subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: os.sched_setaffinity(0, {a.client_cpu}))))
    segs = []
    for out, p in kids:
        _, err = p.communicate(timeout=a.lead_ms / 1000 + a.warmup + a.seconds + 120)
        if p.returncode != 0:
            raise SystemExit(f"segment {out} failed ({p.returncode}): {err[-2000:]}")
        with open(out) as f:
            segs.append(json.load(f)["records"][0]["metrics"])
    merged = subprocess.run([a.commbench, "--no-store", "merge", "--format", "json"]
                            + [f"{o}.hlog" for o, _ in kids],
                            capture_output=True, text=True, timeout=120)
    if merged.returncode != 0:
        raise SystemExit(f"merge failed: {merged.stderr[-2000:]}")
    m = json.loads(merged.stdout)["records"][0]["metrics"]
    checked = 0
    for k in COUNTS:
        want = sum(s[k] for s in segs)
        if m[k] != want:
            raise SystemExit(f"run {run}: merged {k} = {m[k]}, the segments' sum {want}")
        checked += 1
    for k in HISTS:
        want = sum(s[k]["n"] for s in segs)
        if m[k]["n"] != want:
            raise SystemExit(f"run {run}: merged {k} has {m[k]['n']} samples, the segments {want}")
        checked += 1
    for k in m["http"]:
        want = sum(s["http"][k] for s in segs)
        if m["http"][k] != want:
            raise SystemExit(f"run {run}: merged http.{k} = {m['http'][k]}, the segments' sum {want}")
        checked += 1
    if a.tls:
        for k in ["handshakes", "full", "resumed", "failed"]:
            want = sum(s["tls"][k] for s in segs)
            if m["tls"][k] != want:
                raise SystemExit(f"run {run}: merged tls.{k} = {m['tls'][k]}, the segments' sum {want}")
            checked += 1
        want = sum(s["tls"]["handshake_ns"]["n"] for s in segs)
        if m["tls"]["handshake_ns"]["n"] != want:
            raise SystemExit(f"run {run}: merged handshake samples {m['tls']['handshake_ns']['n']}, segments {want}")
        checked += 1
    return {"achieved": m["rate_achieved"], "ratio": m["rate_achieved"] / a.rate,
            "status": m["status"], "completed": m["completed"], "counts_checked": checked,
            "corr_p50_us": m["corrected_ns"]["p50"] / 1e3, "corr_p99_us": m["corrected_ns"]["p99"] / 1e3,
            "lag_p99_us": m["lag_ns"]["p99"] / 1e3, "cpu_us": m["client_cpu_us_per_rt"],
            "seg_achieved": [s["rate_achieved"] for s in segs]}


def one_process(a, srv, work, run):
    """The same run from one `mux load` process (no segments)."""
    out = f"{work}/r{run}-one.json"
    cmd = [a.commbench, "--no-store", "mux", "load", "--target", f"127.0.0.1:{srv.port}",
           "--control", "none", "--protocol", "http1", "--path", "/index.txt",
           "--conns", str(a.conns), "--rate", str(a.rate), "--warmup", str(a.warmup),
           "--duration", str(a.seconds), "--format", "json", "-o", out]
    if a.tls:
        cmd += ["--tls", "--tls-version", "1.3", "--insecure"]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       timeout=a.warmup + a.seconds + 120,
                       preexec_fn=lambda: os.sched_setaffinity(0, {a.client_cpu}))
    if p.returncode != 0:
        raise SystemExit(f"one process failed ({p.returncode}): {p.stderr[-2000:]}")
    with open(out) as f:
        m = json.load(f)["records"][0]["metrics"]
    return {"achieved": m["rate_achieved"], "ratio": m["rate_achieved"] / a.rate,
            "status": m["status"], "completed": m["completed"],
            "corr_p50_us": m["corrected_ns"]["p50"] / 1e3, "corr_p99_us": m["corrected_ns"]["p99"] / 1e3,
            "lag_p99_us": m["lag_ns"]["p99"] / 1e3, "cpu_us": m["client_cpu_us_per_rt"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--commbench", required=True)
    ap.add_argument("--segments", type=int, default=4)
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=20000)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--lead-ms", type=int, default=3000)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--one-process", action="store_true",
                    help="also the same run from one process, interleaved (order flipped every other run)")
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    a = ap.parse_args()
    cert = make_cert() if a.tls else None
    work = tempfile.mkdtemp(prefix="mux-segments-")
    live = []

    def cleanup(*_):
        for s in live:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
        if cert:
            shutil.rmtree(cert, ignore_errors=True)
        sys.exit(130)
    signal.signal(signal.SIGINT, cleanup)
    signal.signal(signal.SIGTERM, cleanup)
    results = []
    ones = []
    try:
        for run in range(a.repeat):
            order = ["segments", "one"] if run % 2 == 0 else ["one", "segments"]
            for kind in order if a.one_process else ["segments"]:
                srv = Server("nginx", a.conns, a.server_cpu, tls=cert)
                live.append(srv)
                try:
                    if kind == "segments":
                        r = one_run(a, srv, work, run)
                        results.append(r)
                    else:
                        r = one_process(a, srv, work, run)
                        ones.append(r)
                finally:
                    srv.stop()
                    live.remove(srv)
                print(f"run {run} {kind}: {r}", flush=True)
    finally:
        for s in live:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
        if cert:
            shutil.rmtree(cert, ignore_errors=True)

    def med(field, fmt="{:.4g}", rs=None):
        rs = results if rs is None else rs
        xs = [r[field] for r in rs if isinstance(r.get(field), (int, float))]
        m, lo, hi = median_ci(xs)
        if lo is None:
            return f"{fmt.format(m)} (n={len(xs)}: {fmt.format(min(xs))}-{fmt.format(max(xs))})"
        return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]"
    print()
    print(f"{a.segments} segments of --rate {a.rate:.0f} --conns {a.conns} "
          f"({'HTTPS, TLS 1.3' if a.tls else 'HTTP/1.1 keep-alive'}) against one nginx, "
          f"{a.repeat} runs; medians [95% interval]")
    print(f"merged achieved rate {med('achieved', '{:.1f}')} req/s; achieved / asked "
          f"{med('ratio', '{:.4f}')} (worst {min(r['ratio'] for r in results):.4f}); "
          f"status {','.join(sorted({r['status'] for r in results}))}")
    print(f"merged corrected p50 {med('corr_p50_us')} µs, p99 {med('corr_p99_us')} µs; lag p99 "
          f"{med('lag_p99_us')} µs; generator CPU per request {med('cpu_us', '{:.2f}')} µs")
    print(f"merged counts equal the segments' sums exactly in every run "
          f"({results[0]['counts_checked']} counts per run checked)")
    if ones:
        print(f"one process, same run: achieved {med('achieved', '{:.1f}', ones)} req/s "
              f"(achieved / asked {med('ratio', '{:.4f}', ones)}); corrected p50 "
              f"{med('corr_p50_us', rs=ones)} µs, p99 {med('corr_p99_us', rs=ones)} µs; lag p99 "
              f"{med('lag_p99_us', rs=ones)} µs; generator CPU per request "
              f"{med('cpu_us', '{:.2f}', ones)} µs; status {','.join(sorted({r['status'] for r in ones}))}")


if __name__ == "__main__":
    main()
