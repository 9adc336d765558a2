#!/usr/bin/env bash
# The run-to-completion loop against the strongest C loop we have, side by
# side in one run, interleaved, ROUNDS rounds, on CPU 0 (pinned):
#   ours         commbench pipeline run --mode rtc --work swap --timing total
#                (the release build, generic x86-64), median ticks per packet
#   C            bench/pipeline-baseline/rtc.c, gcc -O3 (generic x86-64)
#   ours-native  the same build with RUSTFLAGS='-C target-cpu=native'
#                (its own target dir, $NATIVE_TARGET)
#   C-native     rtc.c with gcc -O3 -march=native
# Same instruction set on both sides of each ratio. Medians with their 95%
# interval, ratios as Hodges-Lehmann estimates with Moses' 95% interval
# (commbench estimate); a target such as "<= 1.0x C" is met when the interval's
# upper bound is.
# Usage: bench/pipeline-rtc-compare.sh [ROUNDS] [PACKETS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-9}
PACKETS=${2:-20000000}
OUT=${OUT:-/tmp/pipeline-rtc-compare}
NATIVE_TARGET=${NATIVE_TARGET:-$OUT/target-native}
mkdir -p "$OUT"
cargo build --release -q -p commbench
CB=${CARGO_TARGET_DIR:-$PWD/target}/release/commbench
RUSTFLAGS='-C target-cpu=native' CARGO_TARGET_DIR=$NATIVE_TARGET cargo build --release -q -p commbench
CBN=$NATIVE_TARGET/release/commbench
gcc -O3 -o "$OUT/rtc-c" bench/pipeline-baseline/rtc.c
gcc -O3 -march=native -o "$OUT/rtc-c-native" bench/pipeline-baseline/rtc.c
ours() {
  "$1" pipeline run --mode rtc --work swap --ip v4 --packets "$PACKETS" --cpus 0 --timing total --format jsonl 2>/dev/null |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.readline()); print(r["metrics"]["ticks_total"])'
}
c() { taskset -c 0 "$1" "$PACKETS" | awk '{print $6}'; }
echo "# $(date -u +%FT%TZ) $(uname -r) load $(cut -d' ' -f1-3 /proc/loadavg); ticks per packet: ours C ours-native C-native"
: >"$OUT/rounds"
for r in $(seq "$ROUNDS"); do
  line="$(ours "$CB") $(c "$OUT/rtc-c") $(ours "$CBN") $(c "$OUT/rtc-c-native")"
  echo "$line" | tee -a "$OUT/rounds"
done
python3 - "$PWD/bench" "$OUT/rounds" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from cbestimate import fmt_median, median_ci, fmt_ratio, ratio_ci
rows = [list(map(float, l.split())) for l in open(sys.argv[2]) if l.strip()]
cols = [list(c) for c in zip(*rows)]
for name, c in zip(["ours", "C (gcc -O3)", "ours native", "C native (gcc -O3 -march=native)"], cols):
    print(f"{name:34} {fmt_median(median_ci(c), 2)} ticks per packet")
print(f"{'ours / C':34} {fmt_ratio(ratio_ci(cols[1], cols[0]))}")
print(f"{'ours native / C native':34} {fmt_ratio(ratio_ci(cols[3], cols[2]))}")
print(f"{'ours (generic) / C native':34} {fmt_ratio(ratio_ci(cols[3], cols[0]))}")
PY
