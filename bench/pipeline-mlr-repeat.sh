#!/usr/bin/env bash
# Does `commbench pipeline rfc2544` give the same answer twice with its
# defaults (MLRsearch, RFC 9971)? Per device, RUNS consecutive runs of
#   commbench pipeline rfc2544 --dut DEVICE --sizes 64
# (defaults only, one run per invocation, so each is a separate run), as
# root. Per run and goal: the relevant lower bound (the NDR / PDR), the
# conditional throughput, how it was decided, tester_limited with the
# generator's ceiling, the troubled (uncounted) trials and the wall time.
# Per device and goal: the median with its 95% interval (commbench estimate),
# the CV, the worst run's distance from the median, how many runs lie
# within ±10% of it, and the longest run. For l2fwd:delay:NS devices also
# the white-box prediction (`crosscheck --delays NS`, CROSSCHECK=0 skips
# it) and the median's distance from it. Issue 37's targets: every run
# within ±10% of the median and the median within 10% of the prediction
# for l2fwd:delay:5000; CV <= 5% for l2fwd:delay:1000 and bridge; no
# tester_limited ceiling below a load the search kept; <= 60 s per run.
# With COMPARE=1 the same runs with `--search rfc2544` follow, for the
# before/after.
# Usage: bench/pipeline-mlr-repeat.sh [RUNS] [DEVICE...]
#   default: 10 l2fwd:delay:5000 l2fwd:delay:1000 bridge
#   env: COMPARE (0), CROSSCHECK (1), EXTRA (more options for every run),
#        BIN (a built commbench to measure instead of building the
#        release one into the shared target dir),
#        LOCK (a file: each run holds `flock LOCK` while it measures, so
#        other work on the host can take turns between runs)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-10}
shift || true
DEVICES=("$@")
[ ${#DEVICES[@]} -gt 0 ] || DEVICES=(l2fwd:delay:5000 l2fwd:delay:1000 bridge)
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, veths)"; exit 1; }
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'command: bash bench/pipeline-mlr-repeat.sh'; [ $# -eq 0 ] || printf ' %q' "$RUNS" "$@"; echo
tgt=${CARGO_TARGET_DIR:-target}
locked=()
[ -n "${LOCK:-}" ] && locked=(flock "$LOCK")
if [ -n "${BIN:-}" ]; then
  bin=$BIN
else
  "${locked[@]}" cargo build --release -q -p commbench
  bin="$tgt/release/commbench"
fi
echo "build: $bin ($("$bin" --version 2>/dev/null || echo '?'))"
out=$(mktemp)
pred=$(mktemp)
t0f=$(mktemp)
trap 'rm -f "$out" "$pred" "$t0f"' EXIT
methods=(mlr)
[ "${COMPARE:-0}" = 1 ] && methods+=(rfc2544)
for method in "${methods[@]}"; do
  for dut in "${DEVICES[@]}"; do
    for i in $(seq 1 "$RUNS"); do
      # The wall time starts once the lock is held (t0 written by the
      # locked shell), so a wait for the lock is not counted as search time.
      # shellcheck disable=SC2086
      json=$("${locked[@]}" sh -c 'date +%s.%N > "$0"; exec "$@"' "$t0f" "$bin" pipeline rfc2544 --dut "$dut" --sizes 64 --search "$method" ${EXTRA:-} --format json 2>/dev/null || true)
      t1=$(date +%s.%N)
      t0=$(cat "$t0f")
      printf '%s' "$json" | python3 -c '
import json, sys
method, dut, run, wall = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[5]) - float(sys.argv[4])
try:
    recs = json.load(sys.stdin)["records"]
except Exception:
    print(method, dut, run, "-", "nan", "nan", "failed", "-", "nan", "0", f"{wall:.1f}")
    sys.exit()
trials = [r for r in recs if r["test"] == "rfc2544-trial"]
troubled = sum(1 for t in trials if t["metrics"].get("counted") is False or t["metrics"].get("behind_schedule"))
for r in recs:
    if r["test"] not in ("rfc2544-ndr", "rfc2544-pdr"):
        continue
    m, p = r["metrics"], r["params"]
    num = lambda x: "nan" if x is None else str(x)
    goal = p.get("goal") or r["test"][8:]
    print(method, dut, run, goal, num(m.get("rate_pps")), num(m.get("conditional_throughput_pps")),
          m.get("decided") or ("confirmed" if m.get("confirmed") else "unconfirmed"),
          "limited" if m.get("tester_limited") else "-", num(m.get("tester_ceiling_pps")), troubled, f"{wall:.1f}")
' "$method" "$dut" "$i" "$t0" "$t1" | tee -a "$out"
    done
  done
done
if [ "${CROSSCHECK:-1}" = 1 ]; then
  for dut in "${DEVICES[@]}"; do
    case "$dut" in
      l2fwd:delay:*)
        ns=${dut#l2fwd:delay:}
        ns=${ns%%,*}
        "${locked[@]}" "$bin" pipeline crosscheck --delays "$ns" --size 64 --format json 2>/dev/null |
          python3 -c '
import json, sys
for r in json.load(sys.stdin)["records"]:
    m = r["metrics"]
    if r["test"] == "crosscheck" and "predicted_pps" in m:
        print(sys.argv[1], m["predicted_pps"], m.get("predicted_fwd_pps") or "nan",
              m.get("base_ticks") or "nan", m.get("kernel_ticks") or "nan", m.get("measured_pps") or "nan")
' "$dut" | tee -a "$pred" || true
        ;;
    esac
  done
fi
python3 - "$out" "$pred" <<'PY'
import math, statistics, sys
sys.path.insert(0, "bench")
from cbestimate import median_ci
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
pred, extra = {}, {}
for l in open(sys.argv[2]):
    f = l.split()
    if not f:
        continue
    pred[f[0]] = float(f[1])
    if len(f) >= 6:
        extra[f[0]] = [float(x) for x in f[2:6]]
keys = []
for r in rows:
    k = (r[0], r[1], r[3])
    if k not in keys and r[3] != "-":
        keys.append(k)
for method, dut, goal in keys:
    sel = [r for r in rows if (r[0], r[1], r[3]) == (method, dut, goal)]
    v = [float(r[4]) for r in sel if r[4] != "nan" and float(r[4]) > 0]
    walls = [float(r[10]) for r in sel]
    missing = len(sel) - len(v)
    line = f"{method:7} {dut:18} {goal:16} runs {len(sel):2}"
    if v:
        med, lo, hi = median_ci(v)
        cv = statistics.pstdev(v) / statistics.mean(v) * 100
        worst = max(abs(x / med - 1) * 100 for x in v)
        within = sum(1 for x in v if abs(x / med - 1) <= 0.10)
        ci = f"[{lo:.0f}, {hi:.0f}]" if lo is not None else "[n<6]"
        line += f"  median {med:.0f} pps {ci}  CV {cv:.1f}%  worst {worst:.1f}% off  within ±10%: {within}/{len(sel)}"
        if dut in pred:
            line += f"  prediction {pred[dut]:.0f} ({(med / pred[dut] - 1) * 100:+.1f}%)"
            if dut in extra:
                fwd, base, kern, xm = extra[dut]
                line += f" [forwarder's own ticks alone {fwd:.0f} ({(med / fwd - 1) * 100:+.1f}%); base {base:.0f} + kernel {kern:.0f} ticks; crosscheck's own NDR {xm:.0f}]"
    line += f"  not measured: {missing}  limited: {sum(1 for r in sel if r[7] == 'limited')}"
    line += f"  troubled trials: {sum(int(r[9]) for r in sel)}  longest run {max(walls):.1f} s"
    print(line)
PY
