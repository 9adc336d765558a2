#!/usr/bin/env bash
# One question, one answer: the proof that every surface judges alike and
# that the black box reports a figure a shared host repeats (not a timed
# test; its figures go into docs/statistics.md §10).
#
#   bench/coherence.sh [PAIRS] [NDR_RUNS]      (defaults 10 and 5)
#
# Part 1, the cold A/A gate: PAIRS pairs of `suite --quick` of one release
# binary, each pair back to back with an empty results store; in every
# other pair a busy loop starts between the two suites (the machine
# changes under the second). Each pair is compared in both orders with
# `--fail-on-regression 10`; the exit codes, and whether compare(B, A) is
# the mirror of compare(A, B) verdict by verdict, are printed.
#
# Part 2, the black-box NDR: `pipeline rfc2544 --dut l2fwd:delay:5000
# --sizes 64` with defaults, NDR_RUNS times quiet and NDR_RUNS times beside
# a busy loop on the device's CPU (the last one: on two CPUs the tester
# puts the generator on CPU 0, alone and at real-time priority, and the
# sink and the device on CPU 1, so other work that comes and goes lands
# on the device's); per run the raw NDR,
# frames per device CPU-second, other work's share of the device's CPU and
# the "device CPU shared" flag; then each figure's spread about its median
# over all runs. Part 2 needs root (namespaces and veths).
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-10}
NDR_RUNS=${2:-5}
cargo build --release --locked -q -p commbench
bin=$PWD/target/release/commbench
work=$(mktemp -d /tmp/cb-coherence.XXXXXX)
busy_pid=
stop_busy() {
  if [ -n "$busy_pid" ]; then
    kill "$busy_pid" 2>/dev/null || true
    wait "$busy_pid" 2>/dev/null || true
    busy_pid=
  fi
}
trap 'stop_busy; rm -rf "$work"' EXIT
busy() { # a busy loop, optionally pinned
  if [ -n "${1:-}" ]; then
    taskset -c "$1" sh -c 'while :; do :; done' &
  else
    sh -c 'while :; do :; done' &
  fi
  busy_pid=$!
}

echo "# part 1: cold A/A gate, $PAIRS pairs ($(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
printf '%-5s %-6s %-9s %-9s %-8s %-22s\n' pair busy "gate A,B" "gate B,A" mirror "headline verdicts A,B"
gate_ok=0
mirror_ok=0
for p in $(seq 1 "$PAIRS"); do
  d=$work/pair$p
  mkdir -p "$d"
  with_busy=$((p % 2 == 0))
  "$bin" --store "$d/store.db" suite --quick --out "$d/a" >/dev/null 2>&1 || true
  [ "$with_busy" = 1 ] && busy
  "$bin" --store "$d/store.db" suite --quick --out "$d/b" >/dev/null 2>&1 || true
  stop_busy
  rm -f "$d/store.db" # cold: no floor learned from these runs
  a=$d/a/results.jsonl b=$d/b/results.jsonl
  set +e
  "$bin" --no-store compare "$a" "$b" --fail-on-regression 10 >/dev/null 2>&1
  g1=$?
  "$bin" --no-store compare "$b" "$a" --fail-on-regression 10 >/dev/null 2>&1
  g2=$?
  set -e
  "$bin" --no-store compare "$a" "$b" --format json -o "$d/ab.json" 2>/dev/null || true
  "$bin" --no-store compare "$b" "$a" --format json -o "$d/ba.json" 2>/dev/null || true
  read -r mirror counts < <(python3 - "$d/ab.json" "$d/ba.json" <<'EOF'
import json, sys, collections
def load(p):
    try:
        d = json.load(open(p))
    except Exception:
        return {}
    out = {}
    for r in d.get("records", []):
        m, q = r["metrics"], r["params"]
        out[(q["source"], q["params"], q["metric"])] = m["verdict"]
    return out
ab, ba = load(sys.argv[1]), load(sys.argv[2])
flip = {"faster": "slower", "slower": "faster", "better": "worse", "worse": "better"}
same = all(flip.get(v, v) == ba.get(k) for k, v in ab.items()) and len(ab) == len(ba)
c = collections.Counter(ab.values())
print("yes" if same and ab else "NO", ",".join(f"{n}:{v}" for v, n in sorted(c.items())) or "-")
EOF
  )
  [ "$g1" = 0 ] && [ "$g2" = 0 ] && gate_ok=$((gate_ok + 1))
  [ "$mirror" = yes ] && mirror_ok=$((mirror_ok + 1))
  printf '%-5s %-6s %-9s %-9s %-8s %s\n' "$p" "$([ "$with_busy" = 1 ] && echo yes || echo no)" "$g1" "$g2" "$mirror" "$counts"
done
echo "gate exit 0 in both orders: $gate_ok of $PAIRS pairs; compare(B, A) the mirror of compare(A, B): $mirror_ok of $PAIRS"

if [ "$(id -u)" != 0 ]; then
  echo "# part 2 skipped: needs root"
  exit 0
fi
echo
echo "# part 2: NDR through l2fwd:delay:5000, $NDR_RUNS quiet and $NDR_RUNS beside a busy loop"
"$bin" clean >/dev/null 2>&1 || true
: >"$work/ndr.tsv"
for i in $(seq 1 "$NDR_RUNS"); do
  for mode in quiet busy; do
    if [ "$mode" = busy ]; then busy "$(($(nproc) - 1))"; fi
    "$bin" --no-store pipeline rfc2544 --dut l2fwd:delay:5000 --sizes 64 --format json \
      -o "$work/ndr-$mode-$i.json" >/dev/null 2>&1 || true
    stop_busy
    python3 - "$work/ndr-$mode-$i.json" "$mode" >>"$work/ndr.tsv" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "nan", "nan", "nan", "not-measured"); sys.exit()
for r in d.get("records", []):
    if r["test"] == "rfc2544-ndr":
        m = r["metrics"]
        f = lambda k: m.get(k) if isinstance(m.get(k), (int, float)) else float("nan")
        print(sys.argv[2], f("rate_pps"), f("rate_per_device_cpu_s"),
              f("device_cpu_others_pct"), "shared" if m.get("device_cpu_shared") else "-")
        break
EOF
  done
done
python3 - "$work/ndr.tsv" <<'EOF'
import sys, statistics, math
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print(f"{'run':<6} {'NDR pps':>10} {'per dev CPU-s':>14} {'others %':>9}  flag")
for r in rows:
    print(f"{r[0]:<6} {float(r[1]):>10.0f} {float(r[2]):>14.0f} {float(r[3]):>9.1f}  {r[4]}")
def spread(i, name):
    v = [float(r[i]) for r in rows if not math.isnan(float(r[i]))]
    if not v:
        print(f"{name}: not measured"); return
    m = statistics.median(v)
    dev = max(abs(x / m - 1) for x in v) * 100
    print(f"{name}: median {m:.0f}, every run within ±{dev:.1f}% of it; max/min {max(v)/min(v):.2f}x over {len(v)} runs")
spread(1, "raw NDR")
spread(2, "NDR per device CPU-second")
flagged = sum(1 for r in rows if r[0] == "busy" and r[4] == "shared")
print(f"busy runs flagged 'device CPU shared': {flagged} of {sum(1 for r in rows if r[0] == 'busy')}")
EOF
