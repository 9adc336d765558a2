#!/usr/bin/env python3
"""Two commbench builds side by side on the open loop's schedule: at each
rate, runs A and B in turn (order flipped every other repeat) with
`commbench mux --engine epoll-lt --conns 100 --rate R --size 64
--cpus server=1 --cpus client=0` and prints, per rate, the load
generator's CPU per request and the schedule lag p99 of each build as
medians with 95% intervals, and B / A as a Hodges-Lehmann ratio with its
interval (bench/stats.py).

    python3 bench/mux/open_ab.py --a OLD_BINARY --b NEW_BINARY \\
        [--rates 1000,10000,100000] [--repeat 6] [--duration 3]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from stats import median_ci, ratio_ci, fmt_ratio  # noqa: E402


def run(binary, rate, warmup, duration):
    out = subprocess.run(
        [binary, "mux", "--engine", "epoll-lt", "--conns", "100", "--rate", str(rate),
         "--warmup", str(warmup), "--duration", str(duration), "--size", "64",
         "--cpus", "server=1", "--cpus", "client=0", "--format", "json"],
        capture_output=True, text=True, timeout=120 + warmup + duration)
    if out.returncode != 0:
        raise SystemExit(f"{binary} failed at {rate}/s: {out.stderr[-1500:]}")
    m = json.loads(out.stdout)["records"][0]["metrics"]
    lag = (m.get("lag_ns") or {}).get("p99")
    return {"cpu_us": m["client_cpu_us_per_rt"], "lag_p99_us": lag / 1e3 if lag is not None else float("nan"),
            "achieved": m["rate_achieved"], "status": m["status"]}


def fmt(xs):
    m, lo, hi = median_ci(xs)
    if lo is None:
        return f"{m:.3g} (n={len(xs)}, min-max {min(xs):.3g}-{max(xs):.3g})"
    return f"{m:.3g} [{lo:.3g}, {hi:.3g}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the before build")
    ap.add_argument("--b", required=True, help="the after build")
    ap.add_argument("--rates", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--warmup", type=float, default=0.5)
    ap.add_argument("--duration", type=float, default=3)
    a = ap.parse_args()
    print(f"load: {open('/proc/loadavg').read().split()[:3]}", flush=True)
    for rate in [int(r) for r in a.rates.split(",")]:
        res = {"A": [], "B": []}
        for rep in range(a.repeat):
            order = ["A", "B"] if rep % 2 == 0 else ["B", "A"]
            for k in order:
                r = run(a.a if k == "A" else a.b, rate, a.warmup, a.duration)
                res[k].append(r)
                print(f"{rate}/s rep {rep} {k}: {r}", flush=True)
        for field, label in (("cpu_us", "generator CPU µs/request"), ("lag_p99_us", "lag p99 µs")):
            xa = [r[field] for r in res["A"] if r[field] == r[field]]
            xb = [r[field] for r in res["B"] if r[field] == r[field]]
            print(f"{rate}/s {label}: A {fmt(xa)}  B {fmt(xb)}  B/A {fmt_ratio(ratio_ci(xa, xb))}")
        st = sorted({r['status'] for k in res for r in res[k]})
        print(f"{rate}/s statuses: {st}; load now {open('/proc/loadavg').read().split()[:3]}", flush=True)


if __name__ == "__main__":
    main()
