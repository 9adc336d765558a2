#!/usr/bin/env bash
# One open-loop run as N `commbench mux load --segment I/N` processes on this
# host (one --start-at, each given the whole run's --conns and --rate)
# against one nginx, added with `commbench merge`, over --repeat runs: the
# merged achieved rate against the asked one, and every merged count checked
# against the segments' sum (bench/mux/segments.py). Runs in a private
# network namespace when root; nginx pinned to CPU 1, segments to CPU 0.
#
#   bash bench/mux-segments.sh [--segments 4] [--rate 20000] [--conns 1000]
#                              [--seconds 10] [--warmup 2] [--repeat 6] [--tls] [--one-process]
#
# MUX_HTTP_COMMBENCH=PATH: measure that binary instead of building this
# checkout's release build. Needs: nginx (and openssl for --tls).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && [ -z "${MUX_SEG_NS:-}" ]; then
  command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx
  }
  exec env MUX_SEG_NS=1 unshare --net -- bash "$0" "$@"
fi
if [ -n "${MUX_SEG_NS:-}" ]; then
  ip link set lo up
  echo 65535 > /proc/sys/net/core/somaxconn
  echo "10000 65535" > /proc/sys/net/ipv4/ip_local_port_range
fi
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'command: bash bench/mux-segments.sh'; [ $# -eq 0 ] || printf ' %q' "$@"; echo
echo "peer: $(nginx -v 2>&1)"
if [ -n "${MUX_HTTP_COMMBENCH:-}" ]; then
  cb=$MUX_HTTP_COMMBENCH
else
  tgt=${CARGO_TARGET_DIR:-target}
  cargo build --release -q -p commbench
  cb=$tgt/release/commbench
fi
echo "build: $("$cb" --version 2>&1 | head -1)"
exec python3 bench/mux/segments.py --commbench "$cb" "$@"
