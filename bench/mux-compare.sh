#!/usr/bin/env bash
# Side by side on this machine, in one run: commbench's mux servers against a
# C reference server (poll, epoll, io_uring) and a current-thread tokio
# server, under the same load; commbench's load generator against a C epoll
# client; and, with sockperf installed, sockperf's client and server against
# ours in both directions. Runs in a private network namespace when root.
# Every median is printed with its 95% interval and every ratio commbench /
# peer with its 95% interval over the interleaved repeats (commbench estimate:
# Hodges-Lehmann, Moses' interval); a target such as "<= 1.05x" is met only
# when the interval's upper bound is. A median's interval needs >= 6 repeats
# ("n<6" below that; the default --repeat is 5, 7 with --uring), a
# ratio's >= 2.
#
#   bash bench/mux-compare.sh [--conns N] [--rounds R] [--size K] [--repeat N]
#
# With --uring first: only the io_uring servers, commbench against the C
# liburing server, interleaved, with medians, 95% intervals and the ratio
# (Hodges-Lehmann, Moses interval), then VmRSS with --idle N idle
# connections (default 10000) and after they left (bench/mux/uring_compare.py):
#
#   bash bench/mux-compare.sh --uring [--conns N] [--rounds R] [--size K] [--repeat N] [--idle N]
#
# MUX_COMPARE_BEFORE=/path/to/older/commbench adds that binary's io_uring
# server to the --uring comparison (before/after). MUX_COMPARE_COMMBENCH=PATH
# measures that commbench binary instead of this checkout's release build.
#
# Needs: gcc, liburing-dev (apt-get install liburing-dev), cargo; sockperf
# (apt-get install sockperf) for the sockperf part.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && [ -z "${MUX_COMPARE_NS:-}" ]; then
  exec env MUX_COMPARE_NS=1 unshare --net -- bash "$0" "$@"
fi
if [ -n "${MUX_COMPARE_NS:-}" ]; then
  ip link set lo up
  echo 65535 > /proc/sys/net/core/somaxconn
  # Ephemeral ports above the fixed listen ports (9100, 9300) the scripts use:
  # a connect to a port inside the range can connect to itself before the
  # server listens (TCP simultaneous open).
  echo "10000 65535" > /proc/sys/net/ipv4/ip_local_port_range
fi
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'command: bash bench/mux-compare.sh'; [ $# -eq 0 ] || printf ' %q' "$@"; echo
tgt=${CARGO_TARGET_DIR:-target}
out=$tgt/mux-compare
mkdir -p "$out"
# MUX_COMPARE_COMMBENCH=PATH: measure that commbench binary instead of
# building this checkout's release build.
if [ -n "${MUX_COMPARE_COMMBENCH:-}" ]; then
  cb=$MUX_COMPARE_COMMBENCH
else
  cargo build --release -q -p commbench
  cb=$tgt/release/commbench
fi
gcc -O2 -DHAVE_URING -o "$out/c_echo" bench/mux/c_echo.c -luring
if [ "${1:-}" = --uring ]; then
  shift
  exec python3 bench/mux/uring_compare.py --commbench "$cb" \
    ${MUX_COMPARE_BEFORE:+--before "$MUX_COMPARE_BEFORE"} --c-echo "$out/c_echo" "$@"
fi
gcc -O2 -o "$out/c_client" bench/mux/c_client.c
cargo build --release -q --manifest-path bench/mux/tokio-echo/Cargo.toml
python3 bench/mux/compare.py \
  --commbench "$cb" \
  --c-echo "$out/c_echo" --c-client "$out/c_client" \
  --tokio bench/mux/tokio-echo/target/release/tokio-echo "$@"
if command -v sockperf >/dev/null && [ -z "${MUX_COMPARE_NO_SOCKPERF:-}" ]; then
  python3 bench/mux/sockperf_compare.py --commbench "$cb" "$@"
fi
