#!/usr/bin/env bash
# ipc under load: shared memory (default wait policy) against a pipe, side
# by side and interleaved, while BUSY busy loops (default: one per CPU) keep
# every core taken — the situation most users benchmark in. For each size,
# client layout and session count: msgs/s, CPU per message (both ends) and
# context switches per message, medians of REPEAT interleaved rounds with
# their 95% intervals (commbench estimate, from the per-round samples commbench
# records), and every shm / pipe ratio with its 95% interval (Hodges-Lehmann
# over the interleaved rounds, Moses' interval): a target such as
# "<= 1.05x" is met only when the interval's upper bound is. A median's
# interval needs >= 6 rounds ("n<6: no interval" below that; the default is
# 5), a ratio's >= 2. CPU per message is the median of each round's
# server + client CPU. The busy loops are killed on exit, also on Ctrl-C.
# Usage: bench/ipc-load.sh [REPEAT] [BUSY] [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${1:-5}
BUSY=${2:-$(nproc)}
COUNT=${3:-20000}
cargo build --release -q -p commbench
CB=${CARGO_TARGET_DIR:-$PWD/target}/release/commbench
BENCH=$PWD/bench
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM
for _ in $(seq "$BUSY"); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
sleep 1
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs  busy loops: $BUSY  load: $(cut -d' ' -f1 /proc/loadavg)"
echo "command: bench/ipc-load.sh $REPEAT $BUSY $COUNT"
echo "each cell: median [95% interval] over $REPEAT interleaved rounds; ratios: Hodges-Lehmann shm / pipe [95% interval]"
echo "| size | clients | sessions | shm msgs/s | pipe msgs/s | shm / pipe | shm CPU ns/msg | pipe CPU ns/msg | shm / pipe CPU | shm ctx/msg | pipe ctx/msg | shm / pipe ctx |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for size in 0 128 1K; do
  "$CB" --no-store ipc reqres --transport all --size "$size" --sessions 1,4 --clients mt,mp \
    --count "$COUNT" --repeat "$REPEAT" --format jsonl 2>/dev/null |
    python3 -c '
import json, math, sys
sys.path.insert(0, sys.argv[2])
from cbestimate import fmt_median, fmt_ratio, median_ci, ratio_ci

def samples(m, k):
    # Per-round values (commbench --repeat records them as KEY_samples);
    # a record without them gives its one value.
    v = m.get(k + "_samples")
    if isinstance(v, list) and v:
        return [x for x in v if isinstance(x, (int, float))]
    x = m.get(k)
    return [x] if isinstance(x, (int, float)) else []

rows = {}
for l in sys.stdin:
    r = json.loads(l)
    p, m = r["params"], r["metrics"]
    if p["transport"] not in ("shm", "pipe"):
        continue
    k = (p["clients"], p["sessions"])
    srv, cli = samples(m, "server_cpu_ns_per_msg"), samples(m, "client_cpu_ns_per_msg")
    # The two sample lists come from the same rounds in the same order.
    cpu = [a + b for a, b in zip(srv, cli)] if len(srv) == len(cli) else []
    if not cpu:
        cpu = [m["server_cpu_ns_per_msg"] + m["client_cpu_ns_per_msg"]]
    rows.setdefault(k, {})[p["transport"]] = (samples(m, "msgs_per_s"), cpu, samples(m, "ctx_per_op") or [math.nan])
size = sys.argv[1]
for (cl, s), t in sorted(rows.items()):
    if "shm" in t and "pipe" in t:
        a, b = t["shm"], t["pipe"]
        med = lambda v, d: fmt_median(median_ci(v), d)
        rat = lambda i: fmt_ratio(ratio_ci(b[i], a[i]))
        print(f"| {size} | {cl} | {s} | {med(a[0], 0)} | {med(b[0], 0)} | {rat(0)} | {med(a[1], 0)} | {med(b[1], 0)} | {rat(1)} | "
              f"{med(a[2], 2)} | {med(b[2], 2)} | {rat(2)} |")
' "$size" "$BENCH"
done
echo "command: bench/ipc-load.sh $REPEAT $BUSY $COUNT"
