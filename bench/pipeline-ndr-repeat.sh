#!/usr/bin/env bash
# How repeatable a black-box NDR is, and what sets it: interleaved RFC 2544
# (`--search rfc2544`; bench/pipeline-mlr-repeat.sh runs MLRsearch's defaults)
# NDR searches (one search per invocation, so each is a separate run) of
# commbench's forwarder with the default receive ring and a deep one
# (`l2fwd:delay:D` vs `l2fwd:delay:D,blocks=B`), as root. Per search: the
# NDR, whether it was confirmed or tester-limited, and where the frames of
# its lowest failing trial were lost (the device's ring, the host, the
# sink). Then per ring: the median NDR with its 95% interval and the
# coefficient of variation, and the ratio deep / default with its interval
# (commbench estimate).
# Usage: bench/pipeline-ndr-repeat.sh [ROUNDS] [DELAY_NS] [BLOCKS]
#   env: CPUS (0,0,1), TX (af-xdp), LAG_US (10000), DURATION_S (0.5)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
DELAY=${2:-100}
BLOCKS=${3:-256}
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, veths)"; exit 1; }
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'command: bash bench/pipeline-ndr-repeat.sh'; [ $# -eq 0 ] || printf ' %q' "$@"; echo
tgt=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p commbench
bin="$tgt/release/commbench"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq 1 "$ROUNDS"); do
  for ring in default deep; do
    dut="l2fwd:delay:$DELAY"
    [ "$ring" = deep ] && dut="$dut,blocks=$BLOCKS"
    "$bin" pipeline rfc2544 --search rfc2544 --dut "$dut" --tx "${TX:-af-xdp}" --burst 16 --cpus "${CPUS:-0,0,1}" \
      --duration-s "${DURATION_S:-0.5}" --max-rate 1.5M --resolution-pct 1 \
      --lag-bound-us "${LAG_US:-10000}" --no-bias --format json 2>/dev/null |
      python3 -c '
import json, sys
ring, rnd = sys.argv[1], sys.argv[2]
for r in json.load(sys.stdin)["records"]:
    if r["test"] == "rfc2544-ndr":
        m = r["metrics"]
        print(ring, rnd, m["rate_pps"], m["confirmed"], m["tester_limited"], (m.get("fail_loss_where") or "-").replace(" ", "_"))
' "$ring" "$i" | tee -a "$out"
  done
done
python3 - "$out" "$PWD/bench" <<'PY'
import statistics, sys
sys.path.insert(0, sys.argv[2])
from cbestimate import fmt_median, fmt_ratio, median_ci, ratio_ci
rows = [l.split() for l in open(sys.argv[1])]
rates = {k: [float(r[2]) for r in rows if r[0] == k] for k in ("default", "deep")}
for k, v in rates.items():
    if not v:
        continue
    med = fmt_median(median_ci(v))
    cv = statistics.pstdev(v) / statistics.mean(v) * 100 if statistics.mean(v) > 0 else float("nan")
    where = sorted({r[5].replace("_", " ") for r in rows if r[0] == k})
    print(f"{k:8} NDR pps {med}  CV {cv:.1f}%  losses above it in: {', '.join(where)}")
if rates["default"] and rates["deep"]:
    r = fmt_ratio(ratio_ci(rates["default"], rates["deep"]))
    print(f"deep / default: {r}")
PY
