#!/usr/bin/env bash
# The device's receive in NAPI threads (the tester's default where
# threaded NAPI and ethtool exist) against receive in the device CPU's
# softirq (COMMBENCH_RX_THREAD=0), as root: ROUNDS rounds of one trial
# each, interleaved (thread, softirq, thread, ...),
#   commbench pipeline trial --dut DUT --rate RATE --duration-s 1
# each holding `flock LOCK` when LOCK is set. Per side: the device's own
# CPU per frame (dut_own_ns_per_frame: its thread and receive thread's
# run time; in softirq, the tick-sampled softirq column added), the
# device CPU's busy time per frame (dut_cpu_ns_per_frame, exact on a
# tickless idle CPU), frames lost, medians with 95% intervals and the
# paired ratio thread / softirq from commbench estimate.
# Usage: bench/pipeline-rx-mode.sh [ROUNDS] [RATE] [DUT]
#   default: 6 50k l2fwd:delay:2000
#   env: BIN (the release build in CARGO_TARGET_DIR), LOCK
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-6}
RATE=${2:-50k}
DUT=${3:-l2fwd:delay:2000}
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, veths)"; exit 1; }
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release/commbench}
locked=()
[ -n "${LOCK:-}" ] && locked=(flock "$LOCK")
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'command: bash bench/pipeline-rx-mode.sh'; printf ' %q' "$ROUNDS" "$RATE" "$DUT"; echo
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq "$ROUNDS"); do
  for mode in thread softirq; do
    envs=()
    [ "$mode" = softirq ] && envs=(COMMBENCH_RX_THREAD=0)
    l=$(cut -d' ' -f1 /proc/loadavg)
    line=$("${locked[@]}" env "${envs[@]}" "$bin" --no-store pipeline trial --dut "$DUT" --rate "$RATE" \
      --duration-s 1 --format jsonl 2>/dev/null | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r["test"] == "trial":
        m = r["metrics"]
        print(m.get("dut_own_ns_per_frame"), m.get("dut_cpu_ns_per_frame"), m.get("lost"),
              r["params"]["cpus"].replace(" ", "_"))')
    echo "$r $mode $line $l" | tee -a "$out" >&2
  done
done
col() { awk -v m="$1" -v c="$2" '$2 == m {printf "%s ", $c}' "$out"; }
for c in 3 4; do
  [ "$c" = 3 ] && what="device's own CPU per frame (ns)" || what="device CPU busy per frame (ns)"
  echo "$what:"
  for mode in thread softirq; do
    # shellcheck disable=SC2046
    echo "  $mode: $("$bin" --no-store estimate --digits 0 median $(col $mode $c))"
  done
  echo "  thread / softirq, paired: $("$bin" --no-store estimate paired --before "$(col softirq $c)" --after "$(col thread $c)")"
done
echo "frames lost per trial: thread $(col thread 5)| softirq $(col softirq 5)"
echo "placements: $(awk '{print $6}' "$out" | sort -u | tr '\n' ' ')"
echo "load: $(awk '{print $7}' "$out" | sort -n | sed -n '1p;$p' | tr '\n' ' ')"
