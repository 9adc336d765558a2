#!/usr/bin/env bash
# Does the paced generator keep its schedule? Interleaved trials of
#   commbench pipeline trial --dut DUT --rate RATE --duration-s 1 --no-bias [SIDE's options]
# for two or more sides (placements, settings, environments), as root, one
# trial per invocation, the sides in turn (A B A B ...), so a slow stretch
# of the shared host touches every side alike. Per side: each trial's
# generator lag p99, how many trials stayed under the lag bound (issue 37:
# >= 19 of 20 at <= 150 kpps), the median lag p99 with its 95% interval
# (commbench estimate), the roles' CPUs the records name and the stall
# monitor's worst gap; then each side's median over the first side's with
# its Hodges-Lehmann 95% interval.
# Usage: bench/pipeline-lag.sh RUNS RATE 'LABEL|ENV|OPTIONS' 'LABEL|ENV|OPTIONS' ...
#   e.g. bench/pipeline-lag.sh 10 100k 'unpinned||--cpus ,,' 'default||'
#   env: DUT (l2fwd:delay:5000), BIN (the release build in CARGO_TARGET_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:?RUNS}
RATE=${2:?RATE}
shift 2
[ $# -ge 1 ] || { echo "give at least one side: 'LABEL|ENV|OPTIONS'"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, veths)"; exit 1; }
DUT=${DUT:-l2fwd:delay:5000}
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release/commbench}
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'command: DUT=%q bash bench/pipeline-lag.sh' "$DUT"; printf ' %q' "$RUNS" "$RATE" "$@"; echo
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq 1 "$RUNS"); do
  for side in "$@"; do
    IFS='|' read -r label envs opts <<<"$side"
    # shellcheck disable=SC2086
    json=$(env $envs "$bin" pipeline trial --dut "$DUT" --rate "$RATE" --duration-s 1 --no-bias $opts --format json 2>/dev/null || true)
    printf '%s' "$json" | python3 -c '
import json, sys
label = sys.argv[1]
try:
    recs = json.load(sys.stdin)["records"]
except Exception:
    print(label, "failed"); sys.exit()
for r in recs:
    if r["test"] != "trial":
        continue
    m, p = r["metrics"], r["params"]
    print(label, m.get("lag_p99_ns"), m.get("lag_bound_ns"), m.get("host_stall_ms"), m.get("lost"), p.get("cpus", "-").replace(" ", "_"))
' "$label" | tee -a "$out"
  done
done
echo "date: $(date -u +%FT%TZ)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$@" <<'EOF'
import sys
sys.path.insert(0, "bench")
from cbestimate import median_ci, ratio_ci, fmt_ratio
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
labels = [s.split("|")[0] for s in sys.argv[2:]]
def f(x):
    return "-" if x is None else f"{x / 1e3:.1f}"
lags = {}
for lab in labels:
    r = [x for x in rows if x[0] == lab and x[1] != "failed" and x[1] != "None"]
    v = [float(x[1]) for x in r]
    lags[lab] = v
    bound = float(r[0][2]) if r else float("nan")
    under = sum(1 for x in v if x <= bound)
    stall = sorted(float(x[3]) for x in r if x[3] != "None")
    cpus = sorted(set(x[5] for x in r))
    med, lo, hi = median_ci(v)
    print(f"{lab}: {len(v)} trials, lag p99 under the {bound / 1e3:.0f} us bound in {under} of {len(v)}; "
          f"median lag p99 {f(med)} us [{f(lo)}, {f(hi)}]; max {f(max(v) if v else None)} us; "
          f"stall monitor worst gap median {stall[len(stall) // 2] if stall else '-'} ms; cpus {','.join(cpus)}")
base = labels[0]
for lab in labels[1:]:
    if lags[base] and lags[lab]:
        print(f"{lab} / {base}, lag p99: {fmt_ratio(ratio_ci(lags[base], lags[lab]))}")
EOF
