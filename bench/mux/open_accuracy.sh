#!/bin/bash
# Schedule accuracy of the open loop (achieved rate, schedule lag) at 1k, 10k and
# 100k requests/s against our epoll server, 3 runs each, then a 200 ms SIGSTOP
# of a `mux serve` process under 10k requests/s (corrected vs raw p99.9).
# Usage: bash bench/mux/open_accuracy.sh (after cargo build --release; R= the binary)
R=${R:-${CARGO_TARGET_DIR:-target}/release/commbench}
cd "$(dirname "$0")/../.."
echo "date: $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
for rate in 1000 10000 100000; do
  for rep in 1 2 3; do
    $R mux --engine epoll-lt --conns 100 --rate $rate --warmup 1 --duration 4 --size 64 --cpus server=1 --cpus client=0 --format json > ${OUT:-/tmp}/acc-$rate-$rep.json 2>/dev/null
    python3 -c "
import json;m=json.load(open('${OUT:-/tmp}/acc-$rate-$rep.json'))['records'][0]['metrics']
print($rate, $rep, 'achieved', round(m['rate_achieved'],1), 'lag p50/p99/max us', m['lag_ns']['p50']/1e3, m['lag_ns']['p99']/1e3, m['lag_ns']['max']/1e3, 'corr p99', m['corrected_ns']['p99']/1e3, 'raw p99', m['raw_ns']['p99']/1e3, m['status'], 'cli us/req', round(m['client_cpu_us_per_rt'],2))"
  done
done
# SIGSTOP stall: 200 ms at 10k req/s, 10 connections
$R mux serve --engine epoll-lt --listen 127.0.0.1:9500 --control 127.0.0.1:9501 --cpus 1 --control-token-file ${OUT:-/tmp}/tok 2>/dev/null &
spid=$!
sleep 0.5
( sleep 2.0; kill -STOP $spid; sleep 0.2; kill -CONT $spid ) &
taskset -c 0 $R mux load --target 127.0.0.1:9500 --control none --conns 10 --rate 10000 --warmup 0.5 --duration 4 --size 64 --format json > ${OUT:-/tmp}/stall.json 2>/dev/null
kill $spid; wait $spid 2>/dev/null
python3 -c "
import json;m=json.load(open('${OUT:-/tmp}/stall.json'))['records'][0]['metrics']
print('stall 200ms @10k/s 10 conns: corrected p99 %.1f p99.9 %.1f max %.1f ms; raw p99 %.3f p99.9 %.3f max %.1f ms; held %d; n %d; status %s' % (m['corrected_ns']['p99']/1e6, m['corrected_ns']['p999']/1e6, m['corrected_ns']['max']/1e6, m['raw_ns']['p99']/1e6, m['raw_ns']['p999']/1e6, m['raw_ns']['max']/1e6, m['held'], m['completed'], m['status']))"
