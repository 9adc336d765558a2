#!/usr/bin/env python3
"""Interleaved A/B timing of shell commands: CPU (user+sys of the children,
getrusage) and wall time per run, min and median over ROUNDS rounds of
A B C ... A B C. CPU time is the figure that survives a shared machine;
interleaving spreads the neighbours' noise over every variant alike.

usage: bench/ab.py ROUNDS NAME=COMMAND [NAME=COMMAND ...]
e.g.   bench/ab.py 9 "old=/tmp/cb-old pcap extract f.pcap --threads 1 -o /dev/null" \\
                     "new=target/release/commbench pcap extract f.pcap --threads 1 -o /dev/null"
"""
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import fmt_median, fmt_ratio, median_ci, ratio_ci  # noqa: E402


def main() -> int:
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rounds = int(sys.argv[1])
    cmds = {}
    for arg in sys.argv[2:]:
        name, sep, cmd = arg.partition("=")
        if not sep or not cmd:
            print(f"ab.py: expected NAME=COMMAND, got {arg!r}", file=sys.stderr)
            return 2
        cmds[name] = cmd
    runs = {n: [] for n in cmds}
    for _ in range(rounds):
        for name, cmd in cmds.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            r = subprocess.run(cmd, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode != 0:
                print(f"ab.py: {name} exited {r.returncode}: {cmd}", file=sys.stderr)
                return 1
            runs[name].append(
                (after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, wall)
            )
    for name, v in runs.items():
        cpu = [u + s for u, s, _ in v]
        med = statistics.median
        print(
            f"{name}: cpu min {min(cpu):.3f} med {med(cpu):.3f} max {max(cpu):.3f}"
            f"  user med {med(u for u, _, _ in v):.3f} sys med {med(s for _, s, _ in v):.3f}"
            f"  wall min {min(w for _, _, w in v):.3f} med {med(w for _, _, w in v):.3f}"
        )
    # Medians with their 95% intervals, and each variant against the first
    # (interleaved repeats: the Hodges-Lehmann ratio and its interval).
    names = list(runs)
    first = names[0]
    cpu0 = [u + s for u, s, _ in runs[first]]
    wall0 = [w for _, _, w in runs[first]]
    for name in names:
        cpu = [u + s for u, s, _ in runs[name]]
        wall = [w for _, _, w in runs[name]]
        line = f"{name}: cpu {fmt_median(median_ci(cpu))} s, wall {fmt_median(median_ci(wall))} s"
        if name != first:
            line += (
                f"; / {first}: cpu {fmt_ratio(ratio_ci(cpu0, cpu))},"
                f" wall {fmt_ratio(ratio_ci(wall0, wall))}"
            )
        print(line)
    with open("/proc/loadavg") as f:
        print("load average after:", f.read().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
