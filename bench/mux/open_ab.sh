#!/usr/bin/env bash
# Two commbench builds side by side on the open loop's schedule, through
# `commbench ab` (paired, interleaved trials; the statistics are its own):
# at each rate, `commbench mux --engine epoll-lt --conns 100 --rate R
# --size 64 --cpus server=1 --cpus client=0`, judged on the load
# generator's CPU per request and the schedule lag p99, B / A with 95%
# intervals.
# Usage: bench/mux/open_ab.sh OLD_BINARY NEW_BINARY [RATES] [PAIRS] [DURATION_S]
set -euo pipefail
A=${1:?the before build}
B=${2:?the after build}
RATES=${3:-1000,10000,100000}
PAIRS=${4:-6}
DURATION=${5:-3}
CB=${CB:-$B}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for rate in ${RATES//,/ }; do
  "$CB" ab --records -L bin "$A,$B" -r "$PAIRS" --warmup 1 \
    --metrics client_cpu_us_per_rt,lag_ns.p99 -- \
    "{bin} mux --engine epoll-lt --conns 100 --rate $rate --warmup 0.5 --duration $DURATION --size 64 --cpus server=1 --cpus client=0"
done
