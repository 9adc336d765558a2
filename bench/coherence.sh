#!/usr/bin/env bash
# One question, one answer: the proof that every surface judges alike and
# that the black box reports a figure a shared host repeats (not a timed
# test; its figures go into docs/statistics.md §10).
#
#   bench/coherence.sh [PAIRS] [NDR_RUNS] [IPC_ROUNDS]   (defaults 10, 5, 5)
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
#
# Part 3, the ipc answer against the command a user runs alone:
# IPC_ROUNDS rounds, each a `suite --quick --only ipc` and then `ipc reqres
# --transport uds` alone at each placement (both ends on one CPU, and
# unpinned; 20,000 round trips, 3 runs), taking uds at its best placement
# on each side; per round the ratio suite / alone, and how many rounds were
# within ±20%.
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-10}
NDR_RUNS=${2:-5}
IPC_ROUNDS=${3:-5}
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
  "$bin" --no-store compare "$a" "$b" --fail-on-regression 10 >"$d/gate-ab.txt" 2>&1
  g1=$?
  "$bin" --no-store compare "$b" "$a" --fail-on-regression 10 >"$d/gate-ba.txt" 2>&1
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
  # What crossed a failing gate, in the gate's own words.
  for o in ab ba; do
    grep -h "regressed beyond" "$d/gate-$o.txt" 2>/dev/null | sed "s/^/      gate $o: /" || true
  done
done
echo "gate exit 0 in both orders: $gate_ok of $PAIRS pairs; compare(B, A) the mirror of compare(A, B): $mirror_ok of $PAIRS"

part2() {
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
COMMBENCH_BIN=$bin python3 - "$work/ndr.tsv" "$PWD/bench" <<'EOF'
import sys, math
sys.path.insert(0, sys.argv[2])
from cbestimate import median_ci, fmt_median
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print(f"{'run':<6} {'NDR pps':>10} {'per dev CPU-s':>14} {'others %':>9}  flag")
for r in rows:
    print(f"{r[0]:<6} {float(r[1]):>10.0f} {float(r[2]):>14.0f} {float(r[3]):>9.1f}  {r[4]}")
def spread(i, name):
    v = [float(r[i]) for r in rows if not math.isnan(float(r[i]))]
    if not v:
        print(f"{name}: not measured"); return
    est = median_ci(v)
    dev = max(abs(x / est[0] - 1) for x in v) * 100
    print(f"{name}: median {fmt_median(est, 0)}, every run within ±{dev:.1f}% of it; max/min {max(v)/min(v):.2f}x over {len(v)} runs")
spread(1, "raw NDR")
spread(2, "NDR per device CPU-second")
flagged = sum(1 for r in rows if r[0] == "busy" and r[4] == "shared")
print(f"busy runs flagged 'device CPU shared': {flagged} of {sum(1 for r in rows if r[0] == 'busy')}")
EOF
}
if [ "$NDR_RUNS" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "# part 2 skipped: needs root"
  else
    part2
  fi
fi

[ "$IPC_ROUNDS" -gt 0 ] || exit 0
echo
echo "# part 3: the ipc answer's uds figure vs ipc reqres --transport uds alone, $IPC_ROUNDS rounds ($(date -u +%FT%TZ), load $(cut -d' ' -f1 /proc/loadavg))"
: >"$work/ipc.tsv"
for i in $(seq 1 "$IPC_ROUNDS"); do
  "$bin" --no-store suite --quick --only ipc --out "$work/ipc-suite-$i" >/dev/null 2>&1 || true
  for placed in together unpinned; do
    cpus=()
    [ "$placed" = together ] && cpus=(--cpus server=0 --cpus client=0)
    "$bin" --no-store ipc reqres --transport uds --count 20000 --repeat 3 "${cpus[@]}" \
      --format jsonl -o "$work/ipc-alone-$i-$placed.jsonl" >/dev/null 2>&1 || true
  done
  python3 - "$work/ipc-suite-$i/results.jsonl" "$work"/ipc-alone-"$i"-*.jsonl >>"$work/ipc.tsv" <<'EOF'
import json, sys
def uds(path):
    best = None
    try:
        lines = open(path).read().splitlines()
    except OSError:
        return None
    for l in lines:
        try:
            r = json.loads(l)
        except ValueError:
            continue
        if not isinstance(r, dict) or r.get("test") != "reqres":
            continue
        if r.get("params", {}).get("transport") != "uds":
            continue
        v = r.get("metrics", {}).get("msgs_per_s")
        if isinstance(v, (int, float)) and (best is None or v > best[0]):
            best = (v, r["metrics"].get("placement", "?"))
    return best
s = uds(sys.argv[1])
alone = [a for a in (uds(p) for p in sys.argv[2:]) if a]
a = max(alone) if alone else None
if s and a:
    print(f"{s[0]:.0f}\t{a[0]:.0f}\t{s[0] / a[0]:.4f}\t{s[1]}\t{a[1]}")
else:
    print("nan\tnan\tnan\tnot measured\t-")
EOF
done
COMMBENCH_BIN=$bin python3 - "$work/ipc.tsv" "$PWD/bench" <<'EOF'
import sys, math
sys.path.insert(0, sys.argv[2])
from cbestimate import paired_ratio_ci, fmt_ratio
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
print(f"{'round':<6} {'suite uds msg/s':>16} {'alone msg/s':>12} {'ratio':>7}  suite placement | alone placement")
for i, r in enumerate(rows, 1):
    print(f"{i:<6} {float(r[0]):>16.0f} {float(r[1]):>12.0f} {float(r[2]):>7.3f}  {r[3]} | {r[4]}")
v = [float(r[2]) for r in rows if not math.isnan(float(r[2]))]
if v:
    within = sum(1 for x in v if 1 / 1.2 <= x <= 1.2)
    # Each round ran the suite and then uds alone: pairs, judged by
    # commbench's own paired estimate.
    r = paired_ratio_ci([(float(r[1]), float(r[0])) for r in rows if not math.isnan(float(r[2]))])
    print(f"suite / alone: {fmt_ratio(r)} (min {min(v):.3f}, max {max(v):.3f}); within ±20%: {within} of {len(v)} rounds")
else:
    print("suite / alone: not measured")
EOF
