#!/usr/bin/env bash
# pipeline lab comparison: side by side in one run, interleaved A B C A B C,
# ROUNDS rounds, medians and min..max (the noise) per contender:
#   ours   commbench pipeline run --mode rtc --work swap (rx burst 32 → MAC
#          swap → tx buffer 32), median TSC ticks per packet (ticks_total)
#   C      bench/pipeline-baseline/rtc.c, the same loop in plain C (gcc -O2)
#   dpdk   dpdk-testpmd macswap between two net_null vdevs (package dpdk-dev),
#          its own "CPU cycles/packet" (includes preempted time), if installed
#   rss    commbench pipeline rss: byte-table Toeplitz ticks per IPv4 4-tuple,
#          vs DPDK's rte_softrss (bench/pipeline-baseline/softrss.c, dpdk-dev)
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
SOFTRSS=
if pkg-config --exists libdpdk 2>/dev/null &&
  gcc -O2 $(pkg-config --cflags libdpdk) -o "$OUT/softrss-bin" bench/pipeline-baseline/softrss.c; then
  SOFTRSS=$OUT/softrss-bin
fi

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
rss_ours() {
  "$CB" pipeline rss --format jsonl 2>/dev/null | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r["test"] == "rss-hash" and r["params"]["impl"] == "table" and r["params"]["input"] == "ipv4-l4":
        print(r["metrics"]["ticks_per_hash"])'
}
: > "$OUT/ours"; : > "$OUT/c"; : > "$OUT/dpdk"; : > "$OUT/rss"; : > "$OUT/softrss"
for r in $(seq "$ROUNDS"); do
  ours >> "$OUT/ours"
  cloop >> "$OUT/c"
  if [ -n "$TESTPMD" ]; then testpmd >> "$OUT/dpdk"; fi
  rss_ours >> "$OUT/rss"
  if [ -n "$SOFTRSS" ]; then "$SOFTRSS" | awk '{print $4}' >> "$OUT/softrss"; fi
done
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
read -r rm rmin rmax < <(median < "$OUT/rss")
echo "| Toeplitz IPv4 4-tuple, commbench byte table (ticks per hash) | $rm | $rmin..$rmax |"
if [ -s "$OUT/softrss" ]; then
  read -r sm smin smax < <(median < "$OUT/softrss")
  echo "| Toeplitz IPv4 4-tuple, DPDK rte_softrss | $sm | $smin..$smax |"
  echo
  echo "rte_softrss / ours: $(awk -v a="$sm" -v b="$rm" 'BEGIN {printf "%.1f", a / b}')x"
fi
echo
echo "ratio ours / C: $(awk -v a="$om" -v b="$cm" 'BEGIN {printf "%.2f", a / b}')"
echo "command: bench/pipeline-compare.sh $ROUNDS $PACKETS"
