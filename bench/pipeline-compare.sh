#!/usr/bin/env bash
# pipeline lab comparison: side by side in one run, interleaved A B C A B C,
# ROUNDS rounds, medians and min..max (the noise) per contender:
#   ours   commbench pipeline run --mode rtc --work swap (rx burst 32 → MAC
#          swap → tx buffer 32), median TSC ticks per packet (ticks_total)
#   C      bench/pipeline-baseline/rtc.c, the same loop in plain C (gcc -O2)
#   dpdk   dpdk-testpmd macswap between two net_null vdevs (package dpdk-dev),
#          its own "CPU cycles/packet" (includes preempted time), if installed
#   rss    commbench pipeline rss: byte-table Toeplitz ticks per IPv4 4-tuple
#          vs the bitwise definition
# Usage: bench/pipeline-compare.sh [ROUNDS] [PACKETS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
PACKETS=${2:-20000000}
OUT=${OUT:-/tmp/pipeline-compare}
mkdir -p "$OUT"
cargo build --release -q -p commbench
CB=$PWD/target/release/commbench
gcc -O2 -march=native -o "$OUT/rtc-c" bench/pipeline-baseline/rtc.c
TESTPMD=$(command -v dpdk-testpmd || true)

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f %.2f %.2f\n", m, a[1], a[NR]}'; }

ours() {
  "$CB" pipeline run --mode rtc --work swap --ip v4 --packets "$PACKETS" --cpus 0 --format jsonl 2>/dev/null |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.readline()); print(r["metrics"]["ticks_total"])'
}
cloop() { "$OUT/rtc-c" "$PACKETS" | awk '{print $6}'; }
testpmd() {
  # Stopped with SIGINT after 5 s; without --stats-period it exits at once
  # when stdin is not a terminal.
  timeout -s INT 5 "$TESTPMD" -l 0-1 --no-huge -m 512 --no-pci --vdev=net_null0 --vdev=net_null1 -- \
    --forward-mode=macswap --nb-cores=1 --total-num-mbufs=32768 --auto-start --stats-period=1 \
    --record-core-cycles > "$OUT/testpmd.log" 2>&1 || true
  grep -o 'CPU cycles/packet=[0-9.]*' "$OUT/testpmd.log" | tail -1 | cut -d= -f2
}

echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$OUT/ours"; : > "$OUT/c"; : > "$OUT/dpdk"
for r in $(seq "$ROUNDS"); do
  ours >> "$OUT/ours"
  cloop >> "$OUT/c"
  if [ -n "$TESTPMD" ]; then testpmd >> "$OUT/dpdk"; fi
done
"$CB" pipeline rss --format jsonl 2>/dev/null > "$OUT/rss.jsonl"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r om omin omax < <(median < "$OUT/ours")
read -r cm cmin cmax < <(median < "$OUT/c")
echo
echo "| path | ticks per packet, median | min..max over $ROUNDS rounds |"
echo "|---|---|---|"
echo "| commbench rtc: rx burst 32 → swap → tx buffer 32 | $om | $omin..$omax |"
echo "| plain C, same loop (gcc -O2) | $cm | $cmin..$cmax |"
if [ -s "$OUT/dpdk" ]; then
  read -r dm dmin dmax < <(median < "$OUT/dpdk")
  echo "| dpdk-testpmd macswap, net_null (its CPU cycles/packet) | $dm | $dmin..$dmax |"
else
  echo "| dpdk-testpmd | not installed (apt-get install dpdk-dev) | |"
fi
python3 - "$OUT/rss.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
t = {(r["params"].get("impl"), r["params"].get("input")): r["metrics"].get("ticks_per_hash") for r in rows if r["test"] == "rss-hash"}
a, b = t.get(("table", "ipv4-l4")), t.get(("bitwise", "ipv4-l4"))
print(f"| Toeplitz IPv4 4-tuple, byte table | {a:.2f} | bitwise {b:.2f}, {b / a:.1f}x |")
EOF
echo
echo "ratio ours / C: $(awk -v a="$om" -v b="$cm" 'BEGIN {printf "%.2f", a / b}')"
echo "command: bench/pipeline-compare.sh $ROUNDS $PACKETS"
