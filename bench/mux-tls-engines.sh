#!/usr/bin/env bash
# `commbench mux serve --protocol http1 --tls` on epoll-lt and io_uring under
# the same `commbench mux load --tls`, interleaved: server CPU per request
# for keep-alive and for a connection (a TLS 1.3 handshake) per request,
# with 95% intervals and the io_uring / epoll-lt ratio (bench/mux/tls_engines.py).
# Runs in a private network namespace when root; server on CPU 1, load on CPU 0.
#
#   bash bench/mux-tls-engines.sh [--conns 1000] [--rounds 100] [--close-conns 50]
#                                 [--close-rounds 200] [--repeat 6] [--engines epoll-lt,io-uring]
#
# MUX_HTTP_COMMBENCH=PATH: measure that binary instead of building this
# checkout's release build.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && [ -z "${MUX_TLS_NS:-}" ]; then
  exec env MUX_TLS_NS=1 unshare --net -- bash "$0" "$@"
fi
if [ -n "${MUX_TLS_NS:-}" ]; then
  ip link set lo up
  echo 65535 > /proc/sys/net/core/somaxconn
  echo "10000 65535" > /proc/sys/net/ipv4/ip_local_port_range
fi
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'command: bash bench/mux-tls-engines.sh'; [ $# -eq 0 ] || printf ' %q' "$@"; echo
if [ -n "${MUX_HTTP_COMMBENCH:-}" ]; then
  cb=$MUX_HTTP_COMMBENCH
else
  tgt=${CARGO_TARGET_DIR:-target}
  cargo build --release -q -p commbench
  cb=$tgt/release/commbench
fi
exec python3 bench/mux/tls_engines.py --commbench "$cb" "$@"
