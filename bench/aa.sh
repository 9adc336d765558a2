#!/usr/bin/env bash
# The proof that compare's verdicts survive this machine's noise (see
# docs/statistics.md). Not a test: it takes tens of minutes and measures.
#
#   A/A: PAIRS pairs of back-to-back `suite --quick` runs of one binary,
#   with the machine as it is. Per pair: how many headline metrics compare
#   flags (faster/slower/better/worse/changed), and the exit code of
#   `compare --fail-on-regression 10`. Target: no headline flagged and the
#   gate at 0 in at least 9 of 10 pairs.
#
#   Known change: PAIRS pairs of `pipeline run --work delay:1000` against
#   `--work delay:1100` (the same binary; ~10% more ticks per packet; at
#   100 vs 110 ns the delay's per-process calibration wanders by as much as
#   the change, at 1000 ns by about 1%),
#   compared with `--ignore-param work,delay_ns`. Target: ticks_total called slower
#   ("worse") with the true ratio inside the printed interval in at least 9
#   of 10 pairs; the true ratio is the pooled median of all B runs over the
#   pooled median of all A runs.
#
# Every run goes into one results store of its own (a temp dir), so the
# noise floor compare learns from the history builds up as the pairs go.
# WARMUP runs (default 3) go into the store first, the history a CI job
# has after its first runs: compare learns a test's floor from 4 stored
# runs of it, and uses the cold-start floor (75%) before that. WARMUP=0 shows the
# first comparisons of an empty store.
#
# Usage: [WARMUP=N] bench/aa.sh [PAIRS] [aa|known|both] [BIN]
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-10}
WHAT=${2:-both}
CB=${3:-}
if [ -z "$CB" ]; then
  cargo build --release -q -p commbench
  CB=$PWD/target/release/commbench
fi
WORK=$(mktemp -d /tmp/commbench-aa.XXXXXX)
trap 'rm -rf "$WORK"' EXIT INT TERM
STORE=$WORK/store.db
WARMUP=${WARMUP:-3}
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs  load: $(cut -d' ' -f1-3 /proc/loadavg)  binary: $CB"

headline_flags() { # compare output (JSON records of the headline metrics) -> count of changes
  python3 -c '
import json, sys
d = json.load(sys.stdin)
bad = [r for r in d["records"] if r["metrics"]["verdict"] in ("faster", "slower", "better", "worse", "changed")]
for r in bad:
    m = r["metrics"]
    print("  flagged:", r["params"]["source"], r["params"]["params"][:60], r["params"]["metric"], m["verdict"],
          "%.3f [%.3f, %.3f]" % (m["ratio"], m["ratio_lo"] or float("nan"), m["ratio_hi"] or float("nan")), file=sys.stderr)
v = [r["metrics"]["verdict"] for r in d["records"]]
print(len(bad), len(v), v.count("no change"), v.count("inconclusive"), v.count("no samples"))
'
}

if [ "$WHAT" = aa ] || [ "$WHAT" = both ]; then
  echo
  echo "## A/A: $PAIRS pairs of suite --quick"
  echo "| pair | load before | flagged headline | headline compared | no change | inconclusive | no samples | gate exit (10%) |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
  for w in $(seq "$WARMUP"); do
    "$CB" --store "$STORE" suite --quick --out "$WORK/w$w" >/dev/null 2>&1 || true
  done
  echo "($WARMUP suite runs stored first)"
  ok_flag=0
  ok_gate=0
  for i in $(seq "$PAIRS"); do
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$CB" --store "$STORE" suite --quick --out "$WORK/a$i" >/dev/null 2>"$WORK/a$i.err" || true
    "$CB" --store "$STORE" suite --quick --out "$WORK/b$i" >/dev/null 2>"$WORK/b$i.err" || true
    read -r flagged n nochange inconc nosamp < <("$CB" --store "$STORE" compare --format json \
      "$WORK/a$i/results.jsonl" "$WORK/b$i/results.jsonl" 2>>"$WORK/cmp$i.err" | headline_flags 2>>"$WORK/cmp$i.err")
    set +e
    "$CB" --store "$STORE" compare --fail-on-regression 10 \
      "$WORK/a$i/results.jsonl" "$WORK/b$i/results.jsonl" >/dev/null 2>>"$WORK/gate$i.err"
    gate=$?
    set -e
    [ "$flagged" -eq 0 ] && ok_flag=$((ok_flag + 1))
    [ "$gate" -eq 0 ] && ok_gate=$((ok_gate + 1))
    echo "| $i | $load | $flagged | $n | $nochange | $inconc | $nosamp | $gate |"
    grep -h "flagged:" "$WORK/cmp$i.err" | sed 's/^/    /' >&2 || true
    grep -h "regressed" "$WORK/gate$i.err" | sed 's/^/    gate: /' >&2 || true
  done
  echo
  echo "A/A: no headline flagged in $ok_flag of $PAIRS pairs; --fail-on-regression 10 exited 0 in $ok_gate of $PAIRS"
fi

if [ "$WHAT" = known ] || [ "$WHAT" = both ]; then
  echo
  echo "## Known change: pipeline run --work delay:1000 vs delay:1100, $PAIRS pairs"
  run() { # work out
    "$CB" --store "$STORE" pipeline run --mode rtc --work "$1" --packets 300000 --repeat 7 \
      --format jsonl -o "$2" 2>/dev/null
  }
  for w in $(seq "$WARMUP"); do
    run delay:1000 "$WORK/kw$w.jsonl"
  done
  for i in $(seq "$PAIRS"); do
    run delay:1000 "$WORK/ka$i.jsonl"
    run delay:1100 "$WORK/kb$i.jsonl"
    "$CB" --store "$STORE" compare --ignore-param work,delay_ns --metrics ticks_total --format json \
      "$WORK/ka$i.jsonl" "$WORK/kb$i.jsonl" 2>/dev/null >"$WORK/kc$i.json"
  done
  python3 - "$WORK" "$PAIRS" <<'EOF'
import json, statistics, sys
work, pairs = sys.argv[1], int(sys.argv[2])
def samples(path):
    r = json.loads(open(path).readline())
    return r["metrics"]["ticks_total_samples"]
a = [x for i in range(1, pairs + 1) for x in samples(f"{work}/ka{i}.jsonl")]
b = [x for i in range(1, pairs + 1) for x in samples(f"{work}/kb{i}.jsonl")]
truth = statistics.median(b) / statistics.median(a)
print(f"true ratio (pooled medians of {len(b)} and {len(a)} runs): {truth:.4f}")
print("| pair | verdict | ratio | 95% interval | truth inside |")
print("|---:|---|---:|---|---|")
hits = 0
for i in range(1, pairs + 1):
    d = json.load(open(f"{work}/kc{i}.json"))
    m = d["records"][0]["metrics"]
    lo, hi = m["ratio_lo"], m["ratio_hi"]
    inside = lo is not None and hi is not None and lo <= truth <= hi
    ok = m["verdict"] in ("slower", "worse") and inside
    hits += ok
    print(f"| {i} | {m['verdict']} | {m['ratio']:.4f} | [{lo:.4f}, {hi:.4f}] | {'yes' if inside else 'no'} |")
print()
print(f"known change: flagged slower/worse with the truth inside in {hits} of {pairs} pairs")
EOF
fi
