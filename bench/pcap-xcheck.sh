#!/usr/bin/env bash
# pcap lab: do our fields agree with tshark's? (issue 13)
# Compares `commbench pcap extract` field by field with `tshark -T fields`
# on every capture (*.pcap, *.pcapng, *.cap, *.dmp) under
# crates/pcap/tests/data and under each DIR given (recursively), with the
# normalisation of crates/pcap/tests/tshark.rs (tunnels
# and ICMP errors compared on their outer header). Prints captures and
# packets compared, fields equal / compared per field and in all, the
# documented differences (not counted), and the first disagreements.
# Exit 0 whatever the agreement; non-zero only if it cannot run.
# Needs: a Rust toolchain (cargo) and tshark (Debian 12: apt-get install
# tshark; tested with 4.0.17).
# Usage: bench/pcap-xcheck.sh [DIR...]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v tshark >/dev/null || { echo "pcap-xcheck: tshark is not installed (apt-get install tshark)" >&2; exit 1; }
dirs=()
for d in "$@"; do
  [ -d "$d" ] || { echo "pcap-xcheck: not a directory: $d" >&2; exit 2; }
  dirs+=("$(cd "$d" && pwd)")
done
PCAP_XCHECK_DIRS=$(IFS=:; echo "${dirs[*]:-}") \
  cargo test -q -p commbench-pcap --test tshark -- --ignored --exact xcheck --nocapture --test-threads 1 2>&1 |
  grep -v -e '^running [0-9]* test' -e '^\.*$' -e '^test result:' -e '^test xcheck ... ok' -e '^$' -e 'Running as user'
