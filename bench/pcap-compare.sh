#!/usr/bin/env bash
# pcap lab comparison (issue 5): on a 1 GiB generated capture, warm cache,
# CSV output to /dev/null, CPU time (user+sys) as the figure, measured side
# by side with `commbench pcap bench` (interleaved runs, wait4 rusage):
#   ours single thread and all threads vs a plain pcap-parser + etherparse +
#   CSV program (bench/pcap-baseline), vs `tcpdump -nn -e -v -S -tt -r`,
#   vs `tshark -T fields`, and gzip input vs `zcat file | commbench pcap extract -`.
# After each pair: CPU and real time per tool as median [95% interval]
# (commbench estimate, from the per-run records) and ours / peer for both as
# the Hodges-Lehmann estimate with its 95% interval over the interleaved
# runs; a target such as "<= 1.05x" is met only when the interval's upper
# bound is. A median's interval needs >= 6 runs ("n<6: no interval"; the
# default RUNS is 5), a ratio's >= 2.
# Usage: bench/pcap-compare.sh [DIR] [RUNS]   (DIR holds the captures; default /tmp/pcap-compare)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/tmp/pcap-compare}
RUNS=${2:-5}
SIZE=${SIZE:-1G}
mkdir -p "$DIR/results"
cargo build --release -q -p commbench
(cd bench/pcap-baseline && cargo build --release -q)
CB=$PWD/target/release/commbench
BASE=$PWD/bench/pcap-baseline/target/release/pcap-baseline
CAP=$DIR/gen-$SIZE.pcap
GZ=$DIR/gen-$SIZE-zero.pcap.gz
[ -s "$CAP" ] || "$CB" pcap gen --size "$SIZE" --seed 1 -o "$CAP"
[ -s "$GZ" ] || "$CB" pcap gen --size "$SIZE" --seed 1 --zero-payload --gzip -o "$GZ"
NPROC=$(nproc)
TSHARK_FIELDS="-e frame.time_epoch -e frame.cap_len -e frame.len -e eth.src -e eth.dst -e eth.type -e vlan.id -e ip.src -e ip.dst -e ip.proto -e ip.ttl -e ip.len -e ipv6.src -e ipv6.dst -e ipv6.nxt -e ipv6.hlim -e tcp.srcport -e tcp.dstport -e udp.srcport -e udp.dstport -e tcp.flags -e tcp.seq_raw -e tcp.ack_raw -e tcp.window_size_value -e icmp.type -e icmp.code -e arp.opcode"

echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $NPROC CPUs, kernel $(uname -r)"
echo "command: bench/pcap-compare.sh $DIR $RUNS  (SIZE=$SIZE)"
echo "load average before: $(cat /proc/loadavg)"
summary() { # jsonl: per tool median [95%], ours / peer [95%]
  python3 - "$PWD/bench" "$1" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[1])
from cbestimate import fmt_median, fmt_ratio, median_ci, ratio_ci
runs = {}
for line in open(sys.argv[2]):
    r = json.loads(line)
    if r.get("test") != "bench_run":
        continue
    p, m = r["params"], r["metrics"]
    v = runs.setdefault((p["cache"], p["tool"]), {"cpu_s": [], "real_s": [], "failed": 0})
    v["cpu_s"].append(m["cpu_s"])
    v["real_s"].append(m["real_s"])
    v["failed"] += not m.get("exit_ok", True)
for (cache, tool), v in runs.items():
    bad = f", {v['failed']} failed" if v["failed"] else ""
    print(f"   {tool} {cache}: CPU (user+sys) {fmt_median(median_ci(v['cpu_s']))} s, real {fmt_median(median_ci(v['real_s']))} s"
          f" ({len(v['cpu_s'])} runs{bad})")
for (cache, tool), v in runs.items():
    ours = runs.get((cache, "commbench"))
    if tool == "commbench" or not ours:
        continue
    print(f"   commbench / {tool} {cache} (Hodges-Lehmann [95%]): CPU {fmt_ratio(ratio_ci(v['cpu_s'], ours['cpu_s']))},"
          f" real {fmt_ratio(ratio_ci(v['real_s'], ours['real_s']))}")
EOF
}
run() { # name threads file peer
  local name=$1 threads=$2 file=$3 peer=$4
  echo "== $name (ours --threads $threads vs: $peer)"
  "$CB" pcap bench "$file" --cache warm --runs "$RUNS" --threads "$threads" \
    --compare-cmd "$peer" --format jsonl -o "$DIR/results/$name.jsonl"
  summary "$DIR/results/$name.jsonl"
}
run baseline-1t 1 "$CAP" "$BASE {} > /dev/null"
run baseline-all "$NPROC" "$CAP" "$BASE {} > /dev/null"
run tcpdump 1 "$CAP" "tcpdump -nn -e -v -S -tt -r {} > /dev/null 2>&1"
run tshark 1 "$CAP" "tshark -n -r {} -T fields $TSHARK_FIELDS > /dev/null 2>&1"
run gzip "$NPROC" "$GZ" "zcat {} | $CB pcap extract -q -o /dev/null -"
echo "load average after: $(cat /proc/loadavg)"
echo "records: $DIR/results/*.jsonl"
