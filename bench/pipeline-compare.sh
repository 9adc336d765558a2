#!/usr/bin/env bash
# pipeline lab comparison: side by side in one run, interleaved A B C A B C,
# ROUNDS rounds, medians and min..max (the noise) per contender:
#   ours   commbench pipeline run --mode rtc --work swap --timing total (rx
#          burst 32 → MAC swap → tx buffer 32, two TSC reads per burst),
#          median TSC ticks per packet (ticks_total); the frames' writing by
#          the generator (the NIC's DMA) is timed apart, as in the C loop
#   split  the same with --timing split (four reads per burst): rx/work/tx
#   C      bench/pipeline-baseline/rtc.c, the same loop in plain C (gcc -O3
#          -march=native; bench/pipeline-rtc-compare.sh sets it against ours
#          built for the same instruction set)
#   dpdk   dpdk-testpmd macswap between two net_null vdevs (package dpdk-dev),
#          its own "CPU cycles/packet" (includes preempted time), if installed
#   rss    commbench pipeline rss: byte-table Toeplitz ticks per IPv4 4-tuple,
#          vs DPDK's rte_softrss (bench/pipeline-baseline/softrss.c, dpdk-dev)
#   afp    (root) frames per CPU-second of `commbench pipeline io --mode gen`
#          (sendmmsg, AF_XDP) vs bench/pipeline-baseline/afp_gen.c (C,
#          sendmmsg) on one veth pair in a namespace the script creates and
#          removes; and gen → fwd → sink over veth with AF_PACKET vs AF_XDP
#          receive (commbench pipeline netns --rx)
# Every median is also printed with its 95% interval (commbench estimate, order
# statistics) and every ratio with the Hodges-Lehmann estimate over the
# interleaved rounds and its 95% interval (Moses), beside the ratio of the
# medians: a target such as "<= 1.05x C" is met only when the interval's
# upper bound is. A median's interval needs >= 6 rounds ("n<6: no interval";
# the default ROUNDS is 5), a ratio's >= 2.
# Usage: bench/pipeline-compare.sh [ROUNDS] [PACKETS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
PACKETS=${2:-20000000}
OUT=${OUT:-/tmp/pipeline-compare}
mkdir -p "$OUT"
cargo build --release -q -p commbench
CB=$PWD/target/release/commbench
gcc -O3 -march=native -o "$OUT/rtc-c" bench/pipeline-baseline/rtc.c
gcc -O2 -o "$OUT/afp-gen" bench/pipeline-baseline/afp_gen.c
NS=cbcmp-$$
ROOT=0
if [ "$(id -u)" = 0 ]; then
  ROOT=1
  trap 'ip netns del "$NS" 2>/dev/null || true' EXIT INT TERM
  ip netns add "$NS"
  ip -n "$NS" link add cbxa type veth peer name cbxb
  ip -n "$NS" link set cbxa up
  ip -n "$NS" link set cbxb up
fi
TESTPMD=$(command -v dpdk-testpmd || true)
SOFTRSS=
if pkg-config --exists libdpdk 2>/dev/null &&
  gcc -O2 $(pkg-config --cflags libdpdk) -o "$OUT/softrss-bin" bench/pipeline-baseline/softrss.c; then
  SOFTRSS=$OUT/softrss-bin
fi

# ci FILE: median [95% interval] of the numbers in FILE.
# ratio BEFORE AFTER: AFTER / BEFORE, Hodges-Lehmann [95% interval].
# Both by commbench itself (`commbench estimate`).
nums() { tr -s ' \t' '\n\n' < "$1" | grep -E '^-?[0-9.]+([eE][-+]?[0-9]+)?$' | tr '\n' ' '; }
ci() {
  local n; n=$(nums "$1")
  if [ -n "$n" ]; then "$CB" --no-store estimate --digits 2 median $n 2>/dev/null; else echo "nan [no samples]"; fi
}
ratio() { "$CB" --no-store estimate ratio --before "$(nums "$1")" --after "$(nums "$2")" 2>/dev/null; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f %.2f %.2f\n", m, a[1], a[NR]}'; }

ours() {
  "$CB" pipeline run --mode rtc --work swap --ip v4 --packets "$PACKETS" --cpus 0 --timing "$1" --format jsonl 2>/dev/null |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.readline()); print(r["metrics"]["ticks_total"])'
}
AFP_FRAMES=${AFP_FRAMES:-2000000}
afp_ours() {
  ip netns exec "$NS" "$CB" pipeline io --mode gen --iface cbxa --frames "$AFP_FRAMES" --tx "$1" --format jsonl 2>/dev/null |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.readline()); print(r["metrics"]["pps_per_cpu_s"])'
}
afp_c() { ip netns exec "$NS" "$OUT/afp-gen" cbxa "$AFP_FRAMES" | awk '{print $10}'; }
netns_rx() {
  "$CB" pipeline netns --frames "$AFP_FRAMES" --window 1024 --rx "$1" --format jsonl 2>/dev/null |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.readline()); print(r["metrics"]["sink_pps"])'
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
echo "command: bench/pipeline-compare.sh $ROUNDS $PACKETS"
rss_ours() {
  "$CB" pipeline rss --format jsonl 2>/dev/null | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r["test"] == "rss-hash" and r["params"]["impl"] == "table" and r["params"]["input"] == "ipv4-l4":
        print(r["metrics"]["ticks_per_hash"])'
}
: > "$OUT/ours"; : > "$OUT/split"; : > "$OUT/c"; : > "$OUT/dpdk"; : > "$OUT/rss"; : > "$OUT/softrss"
: > "$OUT/afp-ours"; : > "$OUT/afp-c"; : > "$OUT/xdp-tx"; : > "$OUT/rx-afp"; : > "$OUT/rx-xdp"
for r in $(seq "$ROUNDS"); do
  ours total >> "$OUT/ours"
  ours split >> "$OUT/split"
  cloop >> "$OUT/c"
  if [ $ROOT = 1 ]; then
    afp_ours sendmmsg >> "$OUT/afp-ours"
    afp_c >> "$OUT/afp-c"
    afp_ours af-xdp >> "$OUT/xdp-tx"
    netns_rx af-packet >> "$OUT/rx-afp"
    netns_rx af-xdp >> "$OUT/rx-xdp"
  fi
  if [ -n "$TESTPMD" ]; then testpmd >> "$OUT/dpdk"; fi
  rss_ours >> "$OUT/rss"
  if [ -n "$SOFTRSS" ]; then "$SOFTRSS" | awk '{print $4}' >> "$OUT/softrss"; fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r om omin omax < <(median < "$OUT/ours")
read -r cm cmin cmax < <(median < "$OUT/c")
echo
echo "| path | ticks per packet, median | min..max over $ROUNDS rounds | median [95% interval] |"
echo "|---|---|---|---|"
read -r sm2 smin2 smax2 < <(median < "$OUT/split")
echo "| commbench rtc: rx burst 32 → swap → tx buffer 32 (--timing total) | $om | $omin..$omax | $(ci "$OUT/ours") |"
echo "| the same, --timing split (rx/work/tx, four reads per burst) | $sm2 | $smin2..$smax2 | $(ci "$OUT/split") |"
echo "| plain C, same loop (gcc -O2) | $cm | $cmin..$cmax | $(ci "$OUT/c") |"
if [ -s "$OUT/dpdk" ]; then
  read -r dm dmin dmax < <(median < "$OUT/dpdk")
  echo "| dpdk-testpmd macswap, net_null (its CPU cycles/packet) | $dm | $dmin..$dmax | $(ci "$OUT/dpdk") |"
else
  echo "| dpdk-testpmd | not installed (apt-get install dpdk-dev) | | |"
fi
read -r rm rmin rmax < <(median < "$OUT/rss")
echo "| Toeplitz IPv4 4-tuple, commbench byte table (ticks per hash) | $rm | $rmin..$rmax | $(ci "$OUT/rss") |"
if [ -s "$OUT/softrss" ]; then
  read -r sm smin smax < <(median < "$OUT/softrss")
  echo "| Toeplitz IPv4 4-tuple, DPDK rte_softrss | $sm | $smin..$smax | $(ci "$OUT/softrss") |"
  echo
  echo "rte_softrss / ours: $(awk -v a="$sm" -v b="$rm" 'BEGIN {printf "%.1f", a / b}')x (of the medians); Hodges-Lehmann $(ratio "$OUT/rss" "$OUT/softrss")"
fi
echo
echo "ratio ours / C: $(awk -v a="$om" -v b="$cm" 'BEGIN {printf "%.2f", a / b}') (of the medians); Hodges-Lehmann $(ratio "$OUT/c" "$OUT/ours")"
if [ $ROOT = 1 ]; then
  read -r am amin amax < <(median < "$OUT/afp-ours")
  read -r bm bmin bmax < <(median < "$OUT/afp-c")
  read -r xm xmin xmax < <(median < "$OUT/xdp-tx")
  read -r pm pmin pmax < <(median < "$OUT/rx-afp")
  read -r qm qmin qmax < <(median < "$OUT/rx-xdp")
  echo
  echo "| veth, $AFP_FRAMES frames of 64 B | median | min..max | median [95% interval] |"
  echo "|---|---|---|---|"
  echo "| commbench gen, AF_PACKET sendmmsg: frames per CPU-second | $am | $amin..$amax | $(ci "$OUT/afp-ours") |"
  echo "| C gen (afp_gen.c), AF_PACKET sendmmsg: frames per CPU-second | $bm | $bmin..$bmax | $(ci "$OUT/afp-c") |"
  echo "| commbench gen, AF_XDP copy mode: frames per CPU-second | $xm | $xmin..$xmax | $(ci "$OUT/xdp-tx") |"
  echo "| gen → fwd → sink, AF_PACKET receive: sink frames/s | $pm | $pmin..$pmax | $(ci "$OUT/rx-afp") |"
  echo "| gen → fwd → sink, AF_XDP receive (copy, native XDP): sink frames/s | $qm | $qmin..$qmax | $(ci "$OUT/rx-xdp") |"
  echo
  echo "AF_PACKET gen ours / C per CPU-second: $(awk -v a="$am" -v b="$bm" 'BEGIN {printf "%.2f", a / b}') (of the medians); Hodges-Lehmann $(ratio "$OUT/afp-c" "$OUT/afp-ours")"
  echo "AF_XDP / AF_PACKET tx per CPU-second: $(awk -v a="$xm" -v b="$am" 'BEGIN {printf "%.2f", a / b}') (of the medians); Hodges-Lehmann $(ratio "$OUT/afp-ours" "$OUT/xdp-tx")"
  echo "AF_XDP / AF_PACKET receive, sink frames/s: $(awk -v a="$qm" -v b="$pm" 'BEGIN {printf "%.2f", a / b}') (of the medians); Hodges-Lehmann $(ratio "$OUT/rx-afp" "$OUT/rx-xdp")"
else
  echo "(not root: the veth rows were skipped)"
fi
echo "command: bench/pipeline-compare.sh $ROUNDS $PACKETS"
