#!/usr/bin/env bash
# `commbench ab` on any program against hyperfine (issue 52's target): a
# CPU-bound awk loop of N and 1.03·N iterations, RUNS times each:
#   - ab on the known 3% change: how often the headline (CPU) is flagged
#     slower, and how often the truth 1.03 lies inside its 95% interval;
#   - ab A/A (N against N): how often a headline is flagged at all;
#   - hyperfine (-N, the same wall budget per run, --export-json): how
#     often its mean ± stddev of A and of B do not overlap.
# Every figure is ab's own (its records) or hyperfine's own JSON.
# Usage: bench/ab-exec-proof.sh [RUNS] [BUDGET_S] [N]
#   AB_ARGS="--contamination 99": more options for ab; HYPERFINE=0: ab only;
#   FIRST=K: start at run K (the summary still reads runs 1..RUNS from OUT);
#   LOCK=FILE: flock FILE around each measurement (other heavy work that
#   takes the same lock waits; between measurements it is let go).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-10}
BUDGET=${2:-60}
N=${3:-2000000}
N2=$((N * 103 / 100))
CB=${CB:-$PWD/target/release/commbench}
OUT=${OUT:-/tmp/ab-exec-proof}
mkdir -p "$OUT"
export COMMBENCH_NO_STORE=1
AWK="awk 'BEGIN{for(i=0;i<{n};i++)s+=i}'"
held() { if [ -n "${LOCK:-}" ]; then flock "$LOCK" "$@"; else "$@"; fi; }
echo "date: $(date -u +%FT%TZ)  load: $(cut -d' ' -f1-3 /proc/loadavg)  N=$N  budget ${BUDGET}s  runs $RUNS  ab options: ${AB_ARGS:-}"
for i in $(seq "${FIRST:-1}" "$RUNS"); do
  echo "run $i: $(date -u +%T)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
  for kind in known aa; do
    b=$N2; [ "$kind" = aa ] && b=$N
    held "$CB" ab -L n "$N,$b" --budget "${BUDGET}s" --threshold 1 --seed "$i" --format json ${AB_ARGS:-} \
      -o "$OUT/$kind-$i.json" -- "$AWK" 2>/dev/null || true
  done
  [ "${HYPERFINE:-1}" = 0 ] && continue
  # hyperfine with ab's wall time: as many runs as fit in it, A then B.
  # One run's time from five of hyperfine's own (not ab's wall median: in
  # a shared-CPU duet that is two programs' time on one CPU).
  secs=$(python3 -c "import json;print(json.load(open('$OUT/known-$i.json'))['records'][0]['metrics']['elapsed_s'])")
  held hyperfine -N --runs 5 --export-json "$OUT/hf-size-$i.json" "awk 'BEGIN{for(i=0;i<$N;i++)s+=i}'" >/dev/null 2>&1 || true
  per=$(python3 -c "import json;print(json.load(open('$OUT/hf-size-$i.json'))['results'][0]['mean'])")
  k=$(python3 -c "print(max(2, int($secs / 2 / $per)))")
  echo "run $i: hyperfine $k runs a side"
  held hyperfine -N --runs "$k" --export-json "$OUT/hf-$i.json" \
    "awk 'BEGIN{for(i=0;i<$N;i++)s+=i}'" "awk 'BEGIN{for(i=0;i<$N2;i++)s+=i}'" >/dev/null 2>&1 || true
done
python3 - "$OUT" "$RUNS" <<'PY'
import json, os, sys
out, runs = sys.argv[1], int(sys.argv[2])
def ab(path, metric):
    if not os.path.exists(path):
        return None
    for r in json.load(open(path))["records"]:
        if r["params"]["metric"] == metric:
            return r["metrics"]
for metric in ("cpu_s", "wall_s"):
    k = [ab(f"{out}/known-{i}.json", metric) for i in range(1, runs + 1)]
    a = [ab(f"{out}/aa-{i}.json", metric) for i in range(1, runs + 1)]
    k = [m for m in k if m]; a = [m for m in a if m]
    flagged = sum(m["verdict"] in ("slower", "worse") for m in k)
    inside = sum(m["ratio_lo"] <= 1.03 <= m["ratio_hi"] for m in k)
    aa = sum(m["verdict"] in ("slower", "faster", "worse", "better") for m in a)
    print(f"ab {metric}: known 3% flagged (slower or worse) in {flagged}/{len(k)}, 1.03 inside the interval {inside}/{len(k)}; "
          f"A/A flagged {aa}/{len(a)}; pairs (median) {sorted(m['pairs'] for m in k)[len(k)//2] if k else '-'}")
    hw = lambda ms: sorted((m["ratio_hi"] - m["ratio_lo"]) / 2 for m in ms)[len(ms) // 2] if ms else float("nan")
    decided = sum(m["verdict"] == "no change" for m in a)
    print(f"   interval half-width (median): known ±{100 * hw(k):.2f}%, A/A ±{100 * hw(a):.2f}%; "
          f"A/A decided no change {decided}/{len(a)}, 1.0 inside {sum(m['ratio_lo'] <= 1 <= m['ratio_hi'] for m in a)}/{len(a)}")
    for kind, ms in (("known", k), ("A/A", a)):
        for m in ms:
            print(f"   {kind}: {m['verdict']} {m['ratio']:.4f} [{m['ratio_lo']:.4f}, {m['ratio_hi']:.4f}] "
                  f"{m['pairs']} pairs (+{m['redone_contaminated']} redone) {m['elapsed_s']:.0f} s")
sep = 0; n = 0
for i in range(1, runs + 1):
    p = f"{out}/hf-{i}.json"
    if not os.path.exists(p):
        continue
    r = json.load(open(p))["results"]
    n += 1
    a, b = r[0], r[1]
    s = (a["mean"] + a["stddev"] < b["mean"] - b["stddev"]) or (b["mean"] + b["stddev"] < a["mean"] - a["stddev"])
    sep += s
    print(f"   hyperfine {i}: A {a['mean']:.4f} ± {a['stddev']:.4f}, B {b['mean']:.4f} ± {b['stddev']:.4f}, {len(a['times'])} runs each: {'separate' if s else 'overlap'}")
print(f"hyperfine: mean ± stddev of A and B separate in {sep}/{n}")
# The change each can resolve in the same time: ab's interval half-width on
# CPU time against hyperfine's (sdA + sdB) / mean A, the gap its ± needs.
res = []
for i in range(1, runs + 1):
    p, m = f"{out}/hf-{i}.json", ab(f"{out}/known-{i}.json", "cpu_s")
    if os.path.exists(p) and m:
        a, b = json.load(open(p))["results"][:2]
        res.append(((m["ratio_hi"] - m["ratio_lo"]) / 2, (a["stddev"] + b["stddev"]) / a["mean"]))
if res:
    r = sorted(x / y for x, y in res)
    print(f"resolvable change, ab cpu_s half-width / hyperfine (sdA+sdB)/meanA: median {r[len(r)//2]:.3f} "
          f"(ab ±{100 * sorted(x for x, _ in res)[len(res)//2]:.2f}%, hyperfine {100 * sorted(y for _, y in res)[len(res)//2]:.1f}%)")
PY
