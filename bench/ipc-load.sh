#!/usr/bin/env bash
# ipc under load: shared memory (default wait policy) against a pipe, side
# by side and interleaved, while BUSY busy loops (default: one per CPU) keep
# every core taken — the situation most users benchmark in. For each size,
# client layout and session count: msgs/s, CPU per message (both ends) and
# context switches per message, medians of REPEAT interleaved rounds, and
# the shm / pipe ratio. The busy loops are killed on exit, also on Ctrl-C.
# Usage: bench/ipc-load.sh [REPEAT] [BUSY] [COUNT]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${1:-3}
BUSY=${2:-$(nproc)}
COUNT=${3:-20000}
cargo build --release -q -p commbench
CB=$PWD/target/release/commbench
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM
for _ in $(seq "$BUSY"); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
sleep 1
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs  busy loops: $BUSY  load: $(cut -d' ' -f1 /proc/loadavg)"
echo "| size | clients | sessions | shm msgs/s | pipe msgs/s | shm / pipe | shm CPU ns/msg | pipe CPU ns/msg | shm ctx/msg | pipe ctx/msg |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
for size in 0 128 1K; do
  "$CB" --no-store ipc reqres --transport all --size "$size" --sessions 1,4 --clients mt,mp \
    --count "$COUNT" --repeat "$REPEAT" --format jsonl 2>/dev/null |
    python3 -c '
import json, sys
rows = {}
for l in sys.stdin:
    r = json.loads(l)
    p, m = r["params"], r["metrics"]
    if p["transport"] not in ("shm", "pipe"):
        continue
    k = (p["clients"], p["sessions"])
    cpu = m["server_cpu_ns_per_msg"] + m["client_cpu_ns_per_msg"]
    rows.setdefault(k, {})[p["transport"]] = (m["msgs_per_s"], cpu, m.get("ctx_per_op") or float("nan"))
size = sys.argv[1]
for (cl, s), t in sorted(rows.items()):
    if "shm" in t and "pipe" in t:
        a, b = t["shm"], t["pipe"]
        print(f"| {size} | {cl} | {s} | {a[0]:.0f} | {b[0]:.0f} | {a[0]/b[0]:.2f} | {a[1]:.0f} | {b[1]:.0f} | {a[2]:.2f} | {b[2]:.2f} |")
' "$size"
done
echo "command: bench/ipc-load.sh $REPEAT $BUSY $COUNT"
