#!/usr/bin/env bash
# OpenFlow lab comparison: CPU per response of each side, side by side and
# interleaved, for real cbench and `commbench cbench` against
# `commbench controller` and a minimal C controller
# (bench/openflow/c_controller.c); see bench/openflow/compare.py. Prints
# every median with its 95% interval and every ratio ours / peer with its
# 95% interval over the interleaved repeats (commbench estimate). A median's
# interval needs >= 6 repeats ("n<6: no interval"; the default is 5), a
# ratio's >= 2.
#
# Real cbench is built from its source: give CBENCH_SRC=DIR holding
# mininet/oflops (cbench/, msgbuf.c) and OFSRC=DIR holding mininet/openflow
# (include/openflow/openflow.h), or let the script clone both into
# $OUT/src (needs network).
# Usage: bench/openflow-compare.sh [REPEAT] [SWITCHES] [auto|kernel|cubic]
# (the third: TCP congestion control, auto|kernel|cubic, see bench/openflow/compare.py)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${1:-5}
SWITCHES=${2:-16}
CC=${3:-auto}
OUT=${OUT:-/tmp/openflow-compare}
mkdir -p "$OUT"
cargo build --release -q -p commbench
gcc -O2 -march=native -Wall -Wextra -o "$OUT/c_controller" bench/openflow/c_controller.c
if [ -z "${CBENCH_SRC:-}" ]; then
  CBENCH_SRC=$OUT/src/oflops
  [ -d "$CBENCH_SRC" ] || git clone -q --depth 1 https://github.com/mininet/oflops "$CBENCH_SRC"
fi
if [ -z "${OFSRC:-}" ]; then
  OFSRC=$OUT/src/openflow
  [ -d "$OFSRC" ] || git clone -q --depth 1 https://github.com/mininet/openflow "$OFSRC"
fi
# oflops' autoconf writes config.h; only VERSION is used by cbench.
echo '#define VERSION "oflops-git"' > "$OUT/config.h"
gcc -O2 -D_GNU_SOURCE -I"$OFSRC/include" -I"$CBENCH_SRC" -I"$OUT" -o "$OUT/cbench" \
  "$CBENCH_SRC/cbench/cbench.c" "$CBENCH_SRC/cbench/fakeswitch.c" "$CBENCH_SRC/cbench/myargs.c" \
  "$CBENCH_SRC/msgbuf.c" -lm -lpthread
echo "command: bench/openflow-compare.sh $REPEAT $SWITCHES $CC"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
python3 bench/openflow/compare.py "$OUT/cbench" "$OUT/c_controller" "${CARGO_TARGET_DIR:-$PWD/target}/release/commbench" \
  --repeat "$REPEAT" --switches "$SWITCHES" --cc "$CC"
echo "command: bench/openflow-compare.sh $REPEAT $SWITCHES $CC"
