#!/usr/bin/env bash
# The proof of `commbench ab` on this machine: A/A and known-change runs per
# lab, and two cold-store suites through compare. Builds the release binary
# first. Arguments go to bench/ab-proof.py (see its --help).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p commbench >&2
exec python3 bench/ab-proof.py "$@"
