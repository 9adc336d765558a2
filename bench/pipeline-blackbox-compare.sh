#!/usr/bin/env bash
# The black-box tester's generator side by side with netsniff-ng's trafgen
# (Debian netsniff-ng, PACKET_TX_RING) on one veth pair in a namespace this
# script creates and removes, interleaved rounds (ours, trafgen, ours, ...),
# as root. The sink is commbench's for both, from the same kernel receive
# timestamps: ours is the trial's own sink; trafgen's frames carry
# commbench's magic in their payload and are counted by
# `commbench pipeline io --mode sink --pattern`.
#
#  1. 64 B frames delivered to the sink per generator CPU-second at the
#     highest rate each reaches (ours asked for more than it can send:
#     AF_XDP copy mode and PACKET_TX_RING, bursts of 32; trafgen unpaced,
#     -n FRAMES), generator on CPU 0, sink on CPU 1.
#  2. Rate accuracy at 10 kpps, 100 kpps and 1 Mpps for one second: the
#     sink's rate (arrivals over first-to-last) vs the target, the most
#     frames in any 100 µs over the target's share of 100 µs, and the
#     inter-arrival p99; ours (CBR, sendmmsg, bursts of 1; 16 at 1 Mpps) against trafgen
#     -b RATEpps (its 1-second token bursts) and -t GAP (sendto + nanosleep).
#
# Medians with 95% intervals and ratios with Hodges-Lehmann intervals come
# from commbench estimate (an interval needs >= 6 rounds; ratios >= 2).
# Usage: bench/pipeline-blackbox-compare.sh [ROUNDS] [FRAMES]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-6}
FRAMES=${2:-2000000}
OUT=${OUT:-/tmp/pipeline-blackbox-compare}
mkdir -p "$OUT"
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, veths)"; exit 1; }
command -v trafgen >/dev/null || { apt-get update -qq; apt-get install -y -qq netsniff-ng; }
CB=${CB:-}
if [ -z "$CB" ]; then
  cargo build --release -q -p commbench
  CB=${CARGO_TARGET_DIR:-$PWD/target}/release/commbench
fi
NS=cbbb-$$
trap 'ip netns del "$NS" 2>/dev/null || true' EXIT INT TERM
ip netns add "$NS"
ip -n "$NS" link add cbxa type veth peer name cbxb
ip -n "$NS" link set cbxa up
ip -n "$NS" link set cbxb up
ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true
MAC=$(ip -n "$NS" -br link show cbxb | awk '{print $3}')
# trafgen's frame: 64 B on the wire (60 + FCS), commbench's magic at
# offset 42 so the sink counts it.
cat >"$OUT/t64.cfg" <<CFG
{ eth(da=$MAC), ipv4(sa=10.0.0.1, da=192.168.0.1), udp(sp=9, dp=9), 'C', 'B', 'P', 'L', fill(0x00, 14) }
CFG
nx() { ip netns exec "$NS" "$@"; }
field() { python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l)
    if r["test"] == sys.argv[1]:
        print(" ".join(str(r["metrics"].get(k)) for k in sys.argv[2:]))' "$@"; }

# ours_max TX: "delivered_per_gen_cpu_s delivered_pps"
ours_max() {
  nx "$CB" pipeline trial --dut ifaces:cbxa,cbxb --rate 5M --burst 32 --tx "$1" \
    --duration-s $(python3 -c "print($FRAMES/5e6)") --cpus 0,1 --no-bias --format jsonl 2>/dev/null |
    field trial delivered_per_gen_cpu_s delivered_pps
}
# trafgen_run ARGS...: runs trafgen on CPU 0 with the sink on CPU 1;
# prints "rx cpu_s pps window_100us_max gap_p99_ns"
trafgen_run() {
  nx taskset -c 1 "$CB" pipeline io --mode sink --pattern --iface cbxb --idle-ms 700 \
    --duration-s 60 --format jsonl >"$OUT/sink.json" 2>/dev/null &
  local sink=$!
  sleep 0.3
  /usr/bin/time -f "%U %S" -o "$OUT/time" \
    ip netns exec "$NS" taskset -c 0 timeout 60 trafgen -o cbxa -P 1 -S 16MiB --no-sock-mem -Q -C \
    -i "$OUT/t64.cfg" "$@" >/dev/null 2>&1 || true
  wait "$sink" || true
  local cpu
  cpu=$(awk '{print $1 + $2}' "$OUT/time")
  echo "$(field io-sink rx <"$OUT/sink.json") $cpu $(field io-sink pps window_100us_max gap_p99_ns <"$OUT/sink.json" | cut -d' ' -f1-)"
}
# ours_rate PPS: "delivered_pps window_100us_max gap_p99_ns behind"; bursts
# of 1 up to 100 kpps, of 16 at 1 Mpps (one sendmmsg per frame cannot keep
# 1 µs gaps here; 16 frames every 16 µs keeps the 100 µs share).
ours_rate() {
  local b=1
  [ "$1" -ge 1000000 ] && b=16
  nx "$CB" pipeline trial --dut ifaces:cbxa,cbxb --rate "$1" --burst $b --duration-s 1 \
    --cpus 0,1 --no-bias --format jsonl 2>/dev/null |
    field trial delivered_pps window_100us_max gap_p99_ns behind_schedule
}

: >"$OUT/max.txt"
: >"$OUT/rate.txt"
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  for tx in af-xdp tx-ring; do
    echo "ours-$tx $(ours_max $tx)" >>"$OUT/max.txt"
  done
  read -r rx cpu pps _ <<<"$(trafgen_run -n "$FRAMES")"
  echo "trafgen $(python3 -c "print($rx/$cpu if $cpu > 0 else 'nan')") $pps" >>"$OUT/max.txt"
  for rate in 10000 100000 1000000; do
    echo "ours $rate $(ours_rate $rate)" >>"$OUT/rate.txt"
    read -r rx cpu pps win gap <<<"$(trafgen_run -b ${rate}pps -n $rate)"
    echo "trafgen-b $rate $pps $win $gap x" >>"$OUT/rate.txt"
    gap_ns=$((1000000000 / rate))
    read -r rx cpu pps win gap <<<"$(trafgen_run -t ${gap_ns}ns -n $rate)"
    echo "trafgen-t $rate $pps $win $gap x" >>"$OUT/rate.txt"
  done
done

python3 - "$OUT" "$PWD/bench" <<'PY'
import sys, collections
sys.path.insert(0, sys.argv[2])
from cbestimate import median_ci, ratio_ci, fmt_median, fmt_ratio
out = sys.argv[1]
def num(x):
    try: return float(x)
    except ValueError: return float("nan")
mx = collections.defaultdict(lambda: ([], []))
for l in open(f"{out}/max.txt"):
    p = l.split()
    if len(p) >= 3:
        mx[p[0]][0].append(num(p[1])); mx[p[0]][1].append(num(p[2]))
print("64 B frames delivered per generator CPU-second (highest rate each reaches), median [95% CI]:")
for k, (per_cpu, pps) in mx.items():
    print(f"  {k:14} {fmt_median(median_ci(per_cpu), 0)} per CPU-s at {fmt_median(median_ci(pps), 0)} pps")
for k in [k for k in mx if k.startswith("ours")]:
    print(f"  {k} / trafgen: {fmt_ratio(ratio_ci(mx['trafgen'][0], mx[k][0]))}")
rt = collections.defaultdict(lambda: ([], [], []))
for l in open(f"{out}/rate.txt"):
    p = l.split()
    if len(p) >= 5:
        rate = float(p[1])
        rt[(p[0], p[1])][0].append((num(p[2]) / rate - 1) * 100)
        rt[(p[0], p[1])][1].append(num(p[3]) / max(rate * 100e-6, 1))
        rt[(p[0], p[1])][2].append(num(p[4]))
print("rate accuracy at the sink, median [95% CI]: rate error %, most frames in 100 µs / share, inter-arrival p99 ns")
for (k, rate), (err, win, gap) in sorted(rt.items(), key=lambda x: (int(x[0][1]), x[0][0])):
    print(f"  {rate:>8} pps {k:10} err {fmt_median(median_ci(err), 3)}%  window {fmt_median(median_ci(win), 2)}x  gap p99 {fmt_median(median_ci(gap), 0)}")
PY
