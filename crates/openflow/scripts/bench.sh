#!/usr/bin/env bash
# The OpenFlow lab's benchmark figures, as reported in the closing notes:
# our controller under our emulator (1 and 16 switches, throughput and
# latency, naive vs template, and the emulator's ceiling against the
# trivial responder), then os-ken with the same handler under the same
# emulator. Controller pinned to CPU 1, emulator to CPU 0.
#
# Usage: crates/openflow/scripts/bench.sh OUTDIR   (needs a release build
# and, for os-ken, /opt/commbench-venv from .ci/run)
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=${1:-/tmp/openflow-bench}
mkdir -p "$out"
B=target/release/commbench
PY=${COMMBENCH_OSKEN_PYTHON:-/opt/commbench-venv/bin/python}
load() { printf '%s %s\n' "$1" "$(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.txt"; }

load "start"
$B openflow bench --controller-cpus 1 --emulator-cpus 0 --format json --output "$out/ours.json" 2> "$out/ours.err"
$B openflow bench --controller-cpus 1 --emulator-cpus 0 > "$out/ours.txt" 2>> "$out/ours.err" || true
load "ours done"

if "$PY" -c 'import os_ken' 2>/dev/null; then
  port=16633
  taskset -c 1 "$PY" crates/openflow/tests/osken/cbench_app.py $port > "$out/osken.log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  ticks=$(getconf CLK_TCK)
  cpu() { awk '{print $14+$15}' "/proc/$pid/stat"; }
  for args in "-s 1" "-s 16" "-s 1 -t" "-s 16 -t"; do
    name=$(echo "$args" | tr -d ' -')
    c0=$(cpu)
    $B cbench -c 127.0.0.1 -p $port $args -l 6 -m 1000 --cpus 0 --format json --output "$out/osken-$name.json" 2> "$out/osken-$name.err"
    c1=$(cpu)
    echo "$args osken_cpu_s $(echo "($c1 - $c0) / $ticks" | bc -l)" >> "$out/osken-cpu.txt"
  done
  load "osken done"
fi
