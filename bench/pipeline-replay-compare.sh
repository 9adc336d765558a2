#!/usr/bin/env bash
# A capture replayed through the black-box tester (`--traffic FILE`) beside
# synthetic frames of the capture's exact size mix (`--sizes-from FILE`)
# and beside tcpreplay (Debian tcpreplay, `--pps=R`), as root. The
# captures: one of the pcap lab's (`commbench pcap gen --size 4M`) and a
# public one from the repository's test data (fuzz/seeds/pcap_reader/
# ntp.pcap: 12 NTP frames of 90 B).
#
#  1. Generator CPU per delivered frame, replay vs synthetic of the same
#     size mix: both ask 5 Mpps in bursts of 32 (more than the generator
#     sends here, so it runs flat out) for FRAMES frames on one veth pair
#     (`--dut ifaces:`, MTU 1532 for the replay's trailer), generator on
#     CPU 0, sink on CPU 1, interleaved rounds (replay, synthetic, ...).
#     Frames delivered per generator CPU-second, medians with 95%
#     intervals and the paired ratio replay / synthetic (target >= 1/1.1).
#  2. Against tcpreplay on the same veth pair at the same rates (RATES,
#     1 s each, interleaved): frames delivered per CPU-second of the
#     sender (ours: the generator thread; tcpreplay: its process, user +
#     sys) and pacing (the sink's rate over the asked one, and the
#     inter-arrival p99 over the asked gap). tcpreplay sends a copy of
#     the capture cut to the frames ours replays, with commbench's magic
#     at offset 42 so `commbench pipeline io --mode sink --pattern` (the
#     same kernel receive timestamps as our sink) counts its frames.
#     Ours: bursts of 1 (of 16 at 1 Mpps and above).
#  3. MLRsearch NDR (defaults: two goals, loss 0 and 0.5%) through
#     `l2fwd:delay:2000`, RUNS runs per capture, interleaved: the capture
#     replayed, then synthetic frames of its size mix. Per capture and
#     kind: the median NDR with its 95% interval, the worst run's distance
#     from the median (target: every run within ±10%), the NDR per device
#     CPU-second the record carries, and synthetic / replay (target
#     within 10%); how many searches measured, the trials not counted and
#     of them the host's (spoiled), with the seconds the searches backed
#     off for a quiet host. Each search's records are kept in
#     OUT/ndr-RUN-CAPTURE-KIND.json.
#
# Every figure has the 1-minute load average beside it (median over its
# runs). Medians, intervals and ratios come from commbench estimate
# (bench/cbestimate.py): an interval needs >= 6 samples, a paired ratio
# >= 6 pairs. Each measured step holds `flock LOCK` when LOCK is set, so
# builds of other sessions on the host take turns between steps.
#  4. Part 1's first two KINDS at once, each on its own veth pair, both
#     generators on CPU 0 (the shared-CPU duet): one ratio per round.
# Usage: bench/pipeline-replay-compare.sh [ROUNDS] [RUNS] [PARTS]
#   default: 8 5 123
#   env: BIN (a built commbench instead of building the release one),
#        SINK_RX=thread (the sink's receive off the sender's CPU, both parts),
#        LOCK (a file to flock per step), FRAMES (1000000),
#        CAPTURE (the capture parts 1 and 4 replay: the generated one),
#        RATES ("10000 100000 1000000"), OUT (/tmp/pipeline-replay-compare),
#        KINDS (part 1's, interleaved in this order: "replay synthetic";
#        replay-table is the replay told by the identity table, no trailer),
#        REPORT=1 (measure nothing: summarize the parts' files in OUT)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-8}
RUNS=${2:-5}
PARTS=${3:-123}
FRAMES=${FRAMES:-1000000}
RATES=${RATES:-10000 100000 1000000}
KINDS=${KINDS:-replay synthetic}
OUT=${OUT:-/tmp/pipeline-replay-compare}
PUBLIC=$PWD/fuzz/seeds/pcap_reader/ntp.pcap
mkdir -p "$OUT"
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, veths)"; exit 1; }
command -v tcpreplay >/dev/null || { apt-get update -qq; apt-get install -y -qq tcpreplay; }
echo "date: $(date -u +%FT%TZ)  machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'command: bash bench/pipeline-replay-compare.sh'; [ $# -eq 0 ] || printf ' %q' "$@"; echo
echo "tcpreplay: $(tcpreplay --version 2>&1 | head -1)"
locked=()
[ -n "${LOCK:-}" ] && locked=(flock "$LOCK")
if [ -n "${BIN:-}" ]; then
  CB=$BIN
else
  "${locked[@]}" cargo build --release -q -p commbench
  CB=${CARGO_TARGET_DIR:-$PWD/target}/release/commbench
fi
export CB
echo "build: $CB ($("$CB" --version 2>/dev/null || echo '?'))"
GEN=$OUT/gen.pcap
[ -s "$GEN" ] || "$CB" --no-store pcap gen --size 4M -o "$GEN" >/dev/null
# CAPTURE: the capture parts 1 and 4 replay (default the generated one).
CAP1=${CAPTURE:-$GEN}
echo "parts 1 and 4 replay: $CAP1"
load() { cut -d' ' -f1 /proc/loadavg; }
field() { python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l)
    if r["test"] == sys.argv[1]:
        print(" ".join(str(r["metrics"].get(k)) for k in sys.argv[2:]))' "$@"; }

NS=cbrp-$$
trap 'ip netns del "$NS" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
ip netns add "$NS"
ip -n "$NS" link add cbxa type veth peer name cbxb
ip -n "$NS" link add cbxc type veth peer name cbxd
for i in cbxa cbxb cbxc cbxd; do
  ip -n "$NS" link set "$i" mtu 1532
  ip -n "$NS" link set "$i" up
done
ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true
# SINK_RX=thread: the sink's kernel receive in a NAPI thread on CPU 1
# (TSO off on the sending end, GRO and threaded NAPI on the receiving
# one, the thread pinned and SCHED_FIFO, as the tester does for its own
# veths), so the generator's CPU time is its own. Otherwise (the
# default, as measured before 2026-11-29) veth hands each frame to
# netif_rx on the sending CPU and the sink's receive runs in the
# generator's send calls. Flat out (part 1), the generator then also
# waits whenever veth's ring to the sink's thread is full: its CPU per
# frame holds the sink's pace, not only its own work.
if [ "${SINK_RX:-}" = thread ]; then
  for pair in "cbxa cbxb" "cbxc cbxd"; do
    set -- $pair
    ip netns exec "$NS" ethtool -K "$1" tso off >/dev/null
    ip netns exec "$NS" ethtool -K "$2" gro on >/dev/null
    ip netns exec "$NS" sh -c "echo 1 > /sys/class/net/$2/threaded"
    for p in $(pgrep "^napi/$2"); do taskset -pc 1 "$p" >/dev/null; chrt -f -p 1 "$p"; done
  done
fi
echo "sink receive: ${SINK_RX:-softirq on the sending CPU}"
nx() { ip netns exec "$NS" "$@"; }

# ours KIND CAP RATE BURST FRAMES_OR_DURATION...: one trial on the veth
# pair; prints "delivered_per_gen_cpu_s delivered_pps gap_p99_ns sent
# sent_bytes behind load".
ours() {
  local kind=$1 cap=$2 rate=$3 burst=$4 dur=$5 l
  local src=(--traffic "$cap")
  [ "$kind" = synthetic ] && src=(--sizes-from "$cap")
  [ "$kind" = replay-table ] && src=(--traffic "$cap" --stamp table)
  l=$(load)
  echo "$("${locked[@]}" ip netns exec "$NS" "$CB" --no-store pipeline trial --dut "ifaces:${PAIR:-cbxa,cbxb}" "${src[@]}" \
    --rate "$rate" --burst "$burst" --duration-s "$dur" --lag-bound-us 60000000 --cpus 0,1 --no-bias \
    --format jsonl 2>/dev/null | field trial delivered_per_gen_cpu_s delivered_pps gap_p99_ns sent sent_bytes behind_schedule) $l"
}

M=${REPORT:-0}
if [[ $PARTS == *1* && $M != 1 ]]; then
  : >"$OUT/cpu.txt"
  dur=$(python3 -c "print($FRAMES/5e6)")
  for r in $(seq "$ROUNDS"); do
    echo "part 1, round $r/$ROUNDS" >&2
    for kind in $KINDS; do
      echo "$r $kind $(ours $kind "$CAP1" 5M 32 "$dur")" >>"$OUT/cpu.txt"
    done
  done
fi

if [[ $PARTS == *4* && $M != 1 ]]; then
  # Part 4, the duet: part 1's two kinds at once, each on its own veth
  # pair, both generators on CPU 0 and both sinks on CPU 1, so the two
  # see the same spells of this vCPU's speed (issue 52's shared-CPU duet:
  # the SD of a pair's ratio fell from ~25% to ~2% that way). Each
  # round's pair is one sample of the ratio.
  : >"$OUT/duet.txt"
  dur=$(python3 -c "print($FRAMES/5e6)")
  read -r ka kb _ <<<"$KINDS"
  kb=${kb:-synthetic}
  for r in $(seq "$ROUNDS"); do
    echo "part 4, round $r/$ROUNDS" >&2
    (
      [ -n "${LOCK:-}" ] && exec 9>"$LOCK" && flock 9
      locked=()
      PAIR=cbxa,cbxb ours "$ka" "$CAP1" 5M 32 "$dur" >"$OUT/duet.a" &
      PAIR=cbxc,cbxd ours "$kb" "$CAP1" 5M 32 "$dur" >"$OUT/duet.b" &
      wait
    )
    echo "$r $ka $(cat "$OUT/duet.a")" >>"$OUT/duet.txt"
    echo "$r $kb $(cat "$OUT/duet.b")" >>"$OUT/duet.txt"
  done
fi

if [[ $PARTS == *2* && $M != 1 ]]; then
  # tcpreplay's copy: the frames ours replays (Ethernet, captured whole,
  # IP datagram within the 1500 B MTU), as captured, the tester's MACs,
  # commbench's magic at offset 42 as the sink sees the frame (a frame
  # shorter than 46 B padded to 60 B as a NIC would). The receiving
  # kernel takes a frame's outer VLAN tag out of its bytes (into the
  # packet socket's metadata), so a tagged frame carries the magic 4 B
  # further in. Each frame also carries 19 bytes past its IP datagram
  # (its Ethernet padding left out), as ours carries its stamp there: the
  # same bytes on the wire, and GRO, on with SINK_RX=thread, flushes such
  # a TCP segment alone instead of merging a flow's segments, which would
  # undercount tcpreplay's frames at the sink. Prints the copy's mean
  # frame size.
  python3 - "$GEN" "$OUT/tcpreplay.pcap" >"$OUT/tcpreplay.mean" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
end = "<" if d[:4] == b"\xd4\xc3\xb2\xa1" else ">"
out = [d[:24]]
o, n, tot = 24, 0, 0
while o + 16 <= len(d):
    ts, us, cl, ln = struct.unpack(end + "IIII", d[o:o + 16])
    f = bytearray(d[o + 16:o + 16 + cl])
    o += 16 + cl
    if cl < ln or cl < 14:
        continue
    at, et = 12, int.from_bytes(f[12:14], "big")
    tagged = et in (0x8100, 0x88a8)
    while et in (0x8100, 0x88a8, 0x9100) and len(f) >= at + 8:
        at += 4
        et = int.from_bytes(f[at:at + 2], "big")
    l3 = at + 2
    if et == 0x0800 and len(f) >= l3 + 20:
        size = int.from_bytes(f[l3 + 2:l3 + 4], "big")
    elif et == 0x86dd and len(f) >= l3 + 40:
        size = 40 + int.from_bytes(f[l3 + 4:l3 + 6], "big")
    else:
        size = len(f) - l3
    if size > 1500:
        continue
    f = f[:l3 + size] + bytes(19)
    f[0:6] = bytes([2, 0xcb, 0, 0, 0, 2])
    f[6:12] = bytes([2, 0xcb, 0, 0, 0, 1])
    need = 64 if tagged else 60
    if len(f) < need:
        f += bytes(need - len(f))
    m = 46 if tagged else 42
    f[m:m + 4] = b"CBPL"
    out.append(struct.pack(end + "IIII", ts, us, len(f), len(f)) + bytes(f))
    n += 1
    tot += len(f)
open(sys.argv[2], "wb").write(b"".join(out))
print(f"{tot / n:.1f}")
PY
  # theirs RATE: "frames_per_cpu_s pps gap_p99_ns rx cpu_s ring_drops load"
  theirs() {
    local rate=$1 l
    l=$(load)
    "${locked[@]}" bash -c '
      ip netns exec "$0" taskset -c 1 "$CB" --no-store pipeline io --mode sink --pattern --iface cbxb --idle-ms 700 \
        --duration-s 60 --format jsonl >"$1/sink.json" 2>/dev/null &
      sink=$!
      sleep 0.3
      /usr/bin/time -f "%U %S" -o "$1/time" ip netns exec "$0" taskset -c 0 \
        tcpreplay -q -i cbxa --pps="$2" --loop=0 --limit="$2" "$1/tcpreplay.pcap" >/dev/null 2>&1 || true
      wait "$sink" || true' "$NS" "$OUT" "$rate"
    local cpu rx
    cpu=$(awk 'END {print $1 + $2}' "$OUT/time")
    read -r rx pps gap drops <<<"$(field io-sink rx pps gap_p99_ns ring_drops <"$OUT/sink.json")"
    echo "$(python3 -c "print($rx/$cpu if $cpu > 0 else 'nan')") $pps $gap $rx $cpu $drops $l"
  }
  : >"$OUT/rate.txt"
  for r in $(seq "$ROUNDS"); do
    echo "part 2, round $r/$ROUNDS" >&2
    for rate in $RATES; do
      b=1
      [ "$rate" -ge 1000000 ] && b=16
      read -r per pps gap sent bytes behind l <<<"$(ours replay "$GEN" "$rate" $b 1)"
      echo "ours $rate $r $per $pps $gap $sent - - $l" >>"$OUT/rate.txt"
      echo "tcpreplay $rate $r $(theirs "$rate")" >>"$OUT/rate.txt"
    done
  done
fi

if [[ $PARTS == *3* && $M != 1 ]]; then
  : >"$OUT/ndr.txt"
  for r in $(seq "$RUNS"); do
    for cap in "$GEN" "$PUBLIC"; do
      for kind in replay synthetic; do
        echo "part 3, run $r/$RUNS: $(basename "$cap") $kind" >&2
        src=(--traffic "$cap")
        [ "$kind" = synthetic ] && src=(--sizes-from "$cap")
        l=$(load)
        t0=$(date +%s.%N)
        "${locked[@]}" "$CB" --no-store pipeline rfc2544 --dut l2fwd:delay:2000 "${src[@]}" --format json \
          >"$OUT/ndr.json" 2>/dev/null || true
        t1=$(date +%s.%N)
        python3 - "$OUT/ndr.json" "$(basename "$cap")" "$kind" "$r" "$l" "$t0" "$t1" >>"$OUT/ndr.txt" <<'PY'
import json, sys
path, cap, kind, run, load, t0, t1 = sys.argv[1:]
try:
    recs = json.load(open(path))["records"]
except Exception:
    print(cap, kind, run, "nan nan failed -", load, f"{float(t1) - float(t0):.0f}")
    sys.exit()
for r in recs:
    if r["test"] == "rfc2544-ndr":
        m = r["metrics"]
        num = lambda x: "nan" if x is None else str(x)
        # What the host cost the search: trials not counted, of them the
        # host's (spoiled), and the seconds its back-offs waited (a build
        # before back-offs reports neither: "-").
        print(cap, kind, run, num(m.get("rate_pps")), num(m.get("rate_per_device_cpu_s")),
              m.get("decided") or "-", "limited" if m.get("tester_limited") else "-", load,
              f"{float(t1) - float(t0):.0f}", m.get("troubled_trials", "-"),
              m.get("host_spoiled_trials", "-"), m.get("host_backoff_wait_s", "-"))
        break
PY
        cp "$OUT/ndr.json" "$OUT/ndr-$r-$(basename "$cap")-$kind.json" 2>/dev/null || true
        tail -1 "$OUT/ndr.txt" >&2
      done
    done
  done
fi

python3 - "$OUT" "$PWD/bench" "$PARTS" <<'PY'
import os, sys, collections
sys.path.insert(0, sys.argv[2])
from cbestimate import median_ci, paired_ratio_ci, ratio_ci, fmt_median, fmt_ratio
out, parts = sys.argv[1], sys.argv[3]
def num(x):
    try: return float(x)
    except ValueError: return float("nan")
def med(xs):
    xs = sorted(x for x in xs if x == x)
    return xs[len(xs) // 2] if xs else float("nan")
for part, name, title in (("1", "cpu.txt", "1. frames delivered per generator CPU-second, flat out (5 Mpps asked, bursts of 32), interleaved, median [95% CI]:"),
                          ("4", "duet.txt", "4. the same, the two kinds at once on one CPU (the duet), median [95% CI]:")):
    if part not in parts or not os.path.exists(f"{out}/{name}"):
        continue
    rows = [l.split() for l in open(f"{out}/{name}")]
    by = collections.defaultdict(dict)
    for p in rows:
        if len(p) >= 9:
            by[p[0]][p[1]] = p[2:]
    print(title)
    kinds = [k for k in ("replay", "replay-table", "synthetic") if any(k in r for r in by.values())]
    for k in kinds:
        v = [num(r[k][0]) for r in by.values() if k in r]
        pps = [num(r[k][1]) for r in by.values() if k in r]
        size = [num(r[k][4]) / max(num(r[k][3]), 1) for r in by.values() if k in r]
        load = [num(r[k][6]) for r in by.values() if k in r]
        print(f"  {k:10} {fmt_median(median_ci(v), 0)} per CPU-s at {fmt_median(median_ci(pps), 0)} pps, "
              f"mean frame {med(size):.0f} B sent, load {med(load):.2f}")
    for k in (k for k in kinds if k != "synthetic"):
        pairs = [(num(r["synthetic"][0]), num(r[k][0])) for r in by.values() if k in r and "synthetic" in r]
        print(f"  {k} / synthetic (paired by round; target >= 0.91, i.e. cost <= 1.1x): {fmt_ratio(paired_ratio_ci(pairs))}")
if "2" in parts and os.path.exists(f"{out}/rate.txt"):
    mean = open(f"{out}/tcpreplay.mean").read().strip()
    rt = collections.defaultdict(list)
    for l in open(f"{out}/rate.txt"):
        p = l.split()
        if len(p) >= 8:
            rt[(p[0], int(p[1]))].append(p[2:])
    print(f"2. at the same rates on one veth pair (tcpreplay's copy: mean frame {mean} B), median [95% CI]:")
    print("   frames delivered per sender CPU-second; sink rate / asked - 1, %; inter-arrival p99 / asked gap")
    for rate in sorted({k[1] for k in rt}):
        per = {}
        for tool in ("ours", "tcpreplay"):
            v = rt.get((tool, rate), [])
            per[tool] = [num(x[1]) for x in v]
            err = [(num(x[2]) / rate - 1) * 100 for x in v]
            gap = [num(x[3]) * rate / 1e9 for x in v]
            load = [num(x[7]) for x in v]
            print(f"  {rate:>8} pps {tool:9} {fmt_median(median_ci(per[tool]), 0)} per CPU-s  err {fmt_median(median_ci(err), 2)}%  "
                  f"gap p99 {fmt_median(median_ci(gap), 2)}x  load {med(load):.2f}")
        print(f"  {rate:>8} pps ours / tcpreplay frames per CPU-s (target >= 2): {fmt_ratio(ratio_ci(per['tcpreplay'], per['ours']))}")
if "3" in parts and os.path.exists(f"{out}/ndr.txt"):
    rows = [l.split() for l in open(f"{out}/ndr.txt")]
    print("3. MLRsearch NDR through l2fwd:delay:2000 (defaults), median [95% CI]:")
    for cap in sorted({r[0] for r in rows}):
        v = {}
        for kind in ("replay", "synthetic"):
            rs = [r for r in rows if r[0] == cap and r[1] == kind]
            v[kind] = [num(r[3]) for r in rs]
            m = med(v[kind])
            worst = max((abs(x / m - 1) * 100 for x in v[kind] if x == x), default=float("nan"))
            within = sum(1 for x in v[kind] if x == x and abs(x / m - 1) <= 0.10)
            dev = [num(r[4]) for r in rs]
            measured = sum(1 for x in v[kind] if x == x)
            host = ""
            if rs and all(len(r) >= 12 for r in rs):
                host = (f"; {measured}/{len(rs)} measured; trials not counted {sum(int(num(r[9])) for r in rs if num(r[9]) == num(r[9]))}, "
                        f"the host's {sum(int(num(r[10])) for r in rs if num(r[10]) == num(r[10]))} "
                        f"(back-offs {sum(num(r[11]) for r in rs if num(r[11]) == num(r[11])):.0f} s)")
            print(f"  {cap:12} {kind:9} NDR {fmt_median(median_ci(v[kind]), 0)} pps; worst run {worst:.1f}% from the median, "
                  f"{within}/{len(v[kind])} within ±10%; per device CPU-s {fmt_median(median_ci(dev), 0)}; "
                  f"load {med([num(r[7]) for r in rs]):.2f}; {med([num(r[8]) for r in rs]):.0f} s a search; "
                  f"decided: {', '.join(sorted({r[5] for r in rs}))}{host}")
        print(f"  {cap:12} synthetic / replay NDR (target within 10%): {fmt_ratio(ratio_ci(v['replay'], v['synthetic']))}")
PY
