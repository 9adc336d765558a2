#!/usr/bin/env bash
# commbench's HTTP/1.1 load generator (`commbench mux load --protocol
# http1`) against wrk (closed loop) and h2load (--h1; closed loop and its
# connection-rate mode) on the same nginx and lighttpd (epoll), at 1,000
# and 10,000 keep-alive connections, interleaved over --repeat: requests per
# second, requests per load-generator CPU-second, and at a fixed rate
# commbench's corrected and raw p99 beside h2load's (bench/mux/http_compare.py;
# medians with 95% intervals, ratios with commbench estimate). Runs in a private
# network namespace when root; servers pinned to CPU 1, generators to CPU 0.
#
#   bash bench/mux-http-compare.sh [--conns 1000,10000] [--servers nginx,lighttpd]
#                                  [--repeat 3] [--requests 200000] [--seconds 5] [--rate 20000]
#                                  [--peers wrk,h2load] [--no-rate]
#   bash bench/mux-http-compare.sh --tls [--conns 1000] [--repeat 6] [--requests 200000]
#                                  [--seconds 5] [--rate 10000] [--close-conns 50]
#                                  [--close-requests 20000]
#
# --tls: nginx over HTTPS (TLS 1.3, a certificate generated for the run)
# under `commbench mux load --tls` and wrk (https URL), interleaved:
# keep-alive, a connection per request (Connection: close), and ours at a
# fixed rate (bench/mux/http_compare.py's docstring says what is measured).
#
# Needs: cargo, openssl; nginx, lighttpd, wrk, nghttp2-client (h2load) from Debian —
# installed here when missing (apt-get, root).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && [ -z "${MUX_HTTP_NS:-}" ]; then
  missing=()
  for p in nginx:nginx lighttpd:lighttpd wrk:wrk h2load:nghttp2-client; do
    command -v "${p%%:*}" >/dev/null || [ -x "/usr/sbin/${p%%:*}" ] || missing+=("${p##*:}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
  exec env MUX_HTTP_NS=1 unshare --net -- bash "$0" "$@"
fi
if [ -n "${MUX_HTTP_NS:-}" ]; then
  ip link set lo up
  echo 65535 > /proc/sys/net/core/somaxconn
  echo "10000 65535" > /proc/sys/net/ipv4/ip_local_port_range
fi
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'command: bash bench/mux-http-compare.sh'; [ $# -eq 0 ] || printf ' %q' "$@"; echo
echo "peers: $(nginx -v 2>&1), $(lighttpd -v 2>&1 | head -1), $(wrk -v 2>&1 | head -1), $(h2load --version 2>&1 | head -1)"
# MUX_HTTP_COMMBENCH=PATH: measure that commbench binary instead of
# building this checkout's release build.
if [ -n "${MUX_HTTP_COMMBENCH:-}" ]; then
  cb=$MUX_HTTP_COMMBENCH
else
  tgt=${CARGO_TARGET_DIR:-target}
  cargo build --release -q -p commbench
  cb=$tgt/release/commbench
fi
exec python3 bench/mux/http_compare.py --commbench "$cb" "$@"
