#!/usr/bin/env bash
# The seed-compatible commands against the plainest C programs for the same
# job (bench/ipc-baseline/), interleaved in balanced shuffled order (as many
# AB rounds as BA, fixed seed), ROUNDS rounds per set:
#   reqres quiet   commbench reqres_loop mt 1 128 COUNT        vs  pipe_rt 128 COUNT
#   reqres loaded  the same, beside two bounded busy loops     (both cores taken)
#   stream quiet   commbench data_channel_write mt 1 65532 N   vs  uds_stream 65536 N
#   stream loaded  the same, beside two bounded busy loops     (both cores taken)
#   stream 1 KiB   commbench data_channel_write mt 1 1024 N    vs  uds_stream 1024 N
# For each side: messages/s (the seed's CSV for commbench; 2 per round trip)
# and CPU per operation (round trip or message, both ends, getrusage: the
# C programs over their loop, commbench's threads over the run from its
# stderr line), medians with their 95% intervals; the ratio commbench / C
# is the Hodges-Lehmann estimate with its 95% interval (commbench estimate); a
# target such as ">= 1.0x" is met when the interval's lower bound is. The
# wait strategy each commbench run reported (stderr) is counted per set.
# Placement: none asked (commbench chooses its own and says which). The
# busy loops are `timeout`-bounded and killed after their set, also on
# Ctrl-C.
# Usage: bench/ipc-seed-compare.sh [ROUNDS] [COUNT] [STREAM_COUNT] [SETS]
#   COMMBENCH=/path/to/commbench measures that binary instead of building one.
#   SETS: comma list of reqres-quiet,reqres-loaded,stream-64k,stream-64k-loaded,stream-1k
#   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
COUNT=${2:-20000}
SCOUNT=${3:-30000}
SETS=${4:-reqres-quiet,reqres-loaded,stream-64k,stream-64k-loaded,stream-1k}
TGT=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${COMMBENCH:-}" ]; then
    cargo build --release -q -p commbench
fi
mkdir -p "$TGT/ipc-baseline"
cc -O2 -Wall -o "$TGT/ipc-baseline/pipe_rt" bench/ipc-baseline/pipe_rt.c -lpthread
cc -O2 -Wall -o "$TGT/ipc-baseline/uds_stream" bench/ipc-baseline/uds_stream.c
export CB=${COMMBENCH:-$TGT/release/commbench} C=$TGT/ipc-baseline BENCH=$PWD/bench ROUNDS COUNT SCOUNT SETS
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "command: bench/ipc-seed-compare.sh $ROUNDS $COUNT $SCOUNT $SETS  (binary $CB)"
python3 - <<'PY'
import json, os, random, re, signal, subprocess, sys, time
sys.path.insert(0, os.environ["BENCH"])
from cbestimate import fmt_median, fmt_ratio, median_ci, ratio_ci

CB, C = os.environ["CB"], os.environ["C"]
ROUNDS, COUNT, SCOUNT = int(os.environ["ROUNDS"]), os.environ["COUNT"], os.environ["SCOUNT"]
SETS = os.environ["SETS"].split(",")

def ours(args, per):
    """Run a seed command: (msgs/s, CPU ns per operation, strategy)."""
    p = subprocess.run([CB, "--no-store"] + args, capture_output=True, text=True, check=True)
    rate = float(p.stdout.strip().split(",")[-2])
    m = re.search(r"# shm wait: (\S+): .*CPU per message: server (\d+) ns, client (\d+) ns", p.stderr)
    cpu = (int(m.group(2)) + int(m.group(3))) * per if m else float("nan")
    return rate, cpu, m.group(1) if m else "?"

def theirs(args, key):
    p = subprocess.run([f"{C}/{args[0]}"] + args[1:], capture_output=True, text=True, check=True)
    r = json.loads(p.stdout)
    return r["msgs_per_s"], r[key], ""

SET_DEFS = {
    "reqres-quiet": ("reqres_loop mt 1 128 %s vs pipe_rt 128 %s, quiet" % (COUNT, COUNT), "round trip",
                     lambda: ours(["reqres_loop", "mt", "1", "128", COUNT], 2),
                     lambda: theirs(["pipe_rt", "128", COUNT], "cpu_ns_per_round_trip"), False),
    "reqres-loaded": ("reqres_loop mt 1 128 %s vs pipe_rt 128 %s, two busy loops" % (COUNT, COUNT), "round trip",
                      lambda: ours(["reqres_loop", "mt", "1", "128", COUNT], 2),
                      lambda: theirs(["pipe_rt", "128", COUNT], "cpu_ns_per_round_trip"), True),
    "stream-64k": ("data_channel_write mt 1 65532 %s vs uds_stream 65536 %s, quiet" % (SCOUNT, SCOUNT), "message",
                   lambda: ours(["data_channel_write", "mt", "1", "65532", SCOUNT], 1),
                   lambda: theirs(["uds_stream", "65536", SCOUNT], "cpu_ns_per_msg"), False),
    "stream-64k-loaded": ("data_channel_write mt 1 65532 %s vs uds_stream 65536 %s, two busy loops" % (SCOUNT, SCOUNT), "message",
                          lambda: ours(["data_channel_write", "mt", "1", "65532", SCOUNT], 1),
                          lambda: theirs(["uds_stream", "65536", SCOUNT], "cpu_ns_per_msg"), True),
    "stream-1k": ("data_channel_write mt 1 1024 %s vs uds_stream 1024 %s, quiet" % (int(SCOUNT) * 10, int(SCOUNT) * 10), "message",
                  lambda: ours(["data_channel_write", "mt", "1", "1024", str(int(SCOUNT) * 10)], 1),
                  lambda: theirs(["uds_stream", "1024", str(int(SCOUNT) * 10)], "cpu_ns_per_msg"), False),
}

rng = random.Random(35)
for name in SETS:
    title, unit, a, b, loaded = SET_DEFS[name]
    busy = []
    if loaded:
        busy = [subprocess.Popen(["timeout", "600", "sh", "-c", "while :; do :; done"]) for _ in range(2)]
        time.sleep(0.5)
    load0 = os.getloadavg()[0]
    # Balanced shuffled order: half the rounds AB, half BA.
    orders = [True] * ((ROUNDS + 1) // 2) + [False] * (ROUNDS // 2)
    rng.shuffle(orders)
    res = {"a": [], "b": []}
    try:
        for ab in orders:
            for side in (("a", "b") if ab else ("b", "a")):
                res[side].append((a if side == "a" else b)())
    finally:
        for p in busy:
            p.send_signal(signal.SIGTERM)
            p.wait()
    load1 = os.getloadavg()[0]
    print(f"\n## {title}\n")
    print(f"{ROUNDS} interleaved rounds (seed 35, {sum(orders)} AB / {ROUNDS - sum(orders)} BA), "
          f"load average {load0:.1f} → {load1:.1f}{', two busy loops running' if loaded else ''}\n")
    print(f"| side | msgs/s | CPU ns / {unit} |")
    print("|---|---:|---:|")
    for side, label in (("a", "commbench"), ("b", "C")):
        rates = [x[0] for x in res[side]]
        cpus = [x[1] for x in res[side]]
        print(f"| {label} | {fmt_median(median_ci(rates), 0)} | {fmt_median(median_ci(cpus), 0)} |")
    ra = [x[0] for x in res["a"]]
    rb = [x[0] for x in res["b"]]
    print(f"\ncommbench / C msgs/s: {fmt_ratio(ratio_ci(rb, ra))}  (per round: "
          + ", ".join(f"{x / y:.2f}" for x, y in zip(ra, rb)) + ")")
    print(f"commbench / C CPU per {unit}: {fmt_ratio(ratio_ci([x[1] for x in res['b']], [x[1] for x in res['a']]))}")
    strategies = {}
    for x in res["a"]:
        strategies[x[2]] = strategies.get(x[2], 0) + 1
    print("commbench wait strategy: " + ", ".join(f"{k} in {v}" for k, v in sorted(strategies.items())))
PY
