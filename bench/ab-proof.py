#!/usr/bin/env python3
"""The proof of `commbench ab` on this machine (a benchmark, not a test).

usage: bench/ab-proof.py [--runs 10] [--lab-runs LAB=N] [--labs LIST] [--parts aa,known,suites]
                         [--budget 3m] [--bin target/release/commbench] [--out DIR]
                         [--lock FILE]

aa      For each lab's headline test, RUNS runs of `commbench ab` of one
        binary against itself (empty store: --no-store): how many runs
        flagged a headline (slower/faster/worse/better), the share of
        headline verdicts that were decisive ("no change"), and the time.
        Target: no headline flagged in >= 19 of 20 runs overall, >= 90% of
        headline metrics decisive within the budget (3 minutes per lab).
known   For each lab, RUNS runs of a known change of 3% injected into the
        measured path (pipeline --work delay:N vs 1.03 N; ipc and mux
        --extra-work-ns N vs 1.03 N; openflow the controller's
        --extra-work-ns): flagged in >= 9 of 10 runs with the true ratio
        inside the interval. The truth is the ratio of the pooled medians of
        every B trial over every A trial of all runs (the per-pair values
        each ab record carries as a_median_samples / b_median_samples);
        beside it the pooled paired ratio, the median of every pair's ratio
        (of the runs of at most 64 pairs, whose records keep the pairs),
        each with its own 95% range (a bootstrap over those pairs: a
        truth whose level moves between trials is uncertain too).
        Every run's verdicts follow (ratio, 95% interval, pairs, time), with
        each lab's pooled truth checked against every lab's intervals: the
        shared-CPU duet (mux-shared) beside the two-CPU duet (mux-epoll, an
        alternate since) answers whether sharing one CPU biases the ratio.
b2b     Today's way, side by side: per lab, the A/A and the known change
        run once per side back to back with --repeat 5, then `compare`
        from an empty store: how many headline verdicts were decisive.
suites  RUNS pairs of two back-to-back `commbench suite --quick` with an
        empty store, then `commbench compare --no-store
        --fail-on-regression 10`: how many exit 0 (target >= 9 of 10), and
        how many headline comparisons were decisive, side by side with ab.

Prints one table per part and writes every ab record to DIR.
"""
import argparse
import contextlib
import fcntl
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time

# Each lab's headline test as an ab command: the A/A form (with {bin}) and
# the known-change form (with {x} taking N and 1.03 N), and the placement
# flags for ab. Sizes keep one trial at 0.5-3 s on a 2-vCPU VM.
LABS = {
    # Pinned to one CPU (ab --cpus 1): unpinned, the two spinning endpoints
    # share two vCPUs with everything else and a pair's log-ratio varied by
    # 40-55% here; pinned, 12%.
    "ipc-shm": {
        "aa": "{bin} ipc reqres --transport shm --count 50000 --repeat 1",
        "known": "{bin} ipc reqres --transport shm --count 10000 --repeat 1 --extra-work-ns {x}",
        "n": 100000,
        "param": "extra_work_ns",
        "ab": ["--cpus", "1"],
    },
    "ipc-pipe": {
        "aa": "{bin} ipc reqres --transport pipe --count 80000 --repeat 1",
        "known": "{bin} ipc reqres --transport pipe --count 10000 --repeat 1 --extra-work-ns {x}",
        "n": 100000,
        "param": "extra_work_ns",
        "ab": ["--cpus", "1"],
    },
    # A duet (A and B at once, each on one of the two CPUs, swapped each
    # pair) for the labs whose trials spread by 10-20% even a second apart:
    # run one after the other, a pair's log-ratio spread by 9-14% (mux),
    # 5-56% (openflow, by placement) and 10-20% (pcap); at once, both sides
    # meet the same interference and the spread of their CPU per operation
    # fell to 3-7% (mux), 2.5% (openflow) and ~3% (pcap), 16 pairs each
    # here. Each side's client and server share its CPU: they block, they
    # do not spin. Openflow's windows are 0.5 s: with 1 s windows its rate's
    # interval ended at +-1.1-1.3% after the budget's 74 pairs; with 0.5 s
    # one try decided both headlines (125 pairs).
    "mux-epoll": {
        "aa": "{bin} mux --engine epoll-lt --conns 200 --rounds 100 --repeat 1",
        "known": "{bin} mux --engine epoll-lt --conns 200 --rounds 100 --repeat 1 --extra-work-ns {x}",
        "n": 100000,
        "param": "extra_work_ns",
        "ab": ["--duet"],
    },
    # The same mux trial three times as long (300 rounds): more of a
    # trial's time is measured rather than spent connecting 200 clients.
    # On a host whose vCPUs ran in fast and slow spells its pairs spread
    # as much as the 100-round trial's (21-22%; docs/statistics.md §9).
    "mux-epoll-r300": {
        "aa": "{bin} mux --engine epoll-lt --conns 200 --rounds 300 --repeat 1",
        "known": "{bin} mux --engine epoll-lt --conns 200 --rounds 300 --repeat 1 --extra-work-ns {x}",
        "n": 100000,
        "param": "extra_work_ns",
        "ab": ["--duet"],
    },
    # The shared-CPU duet (ab --shared-cpu): A and B at once on one CPU,
    # each side in a cgroup of equal CPU weight, each trial a fixed 1 s
    # window of rounds (--rounds-for 1), so both sides get half the CPU over
    # the same spell. On this host the vCPUs run in fast and slow spells of
    # about a second that no two trials a second apart share, nor the two
    # vCPUs (docs/statistics.md §9): a pair's spread was 16-23% in the
    # duet above, 1-1.5% with both sides on one CPU.
    "mux-shared": {
        "aa": "{bin} mux --engine epoll-lt --conns 200 --rounds 1000000000 --rounds-for 1 --repeat 1",
        "known": "{bin} mux --engine epoll-lt --conns 200 --rounds 1000000000 --rounds-for 1 "
                 "--repeat 1 --extra-work-ns {x}",
        "n": 100000,
        "param": "extra_work_ns",
        "ab": ["--shared-cpu", "1"],
    },
    "openflow-template": {
        "aa": "{bin} openflow bench --variants template --switches 16 --modes throughput "
              "-l 2 -m 500 --repeat 1",
        "known": "{bin} openflow bench --variants template --switches 16 --modes throughput "
                 "-l 2 -m 500 --repeat 1 --extra-work-ns {x}",
        "n": 10000,
        "param": "extra_work_ns",
        "ab": ["--duet"],
    },
    "pcap": {
        "aa": "{bin} pcap bench {pcap} --cache warm --runs 1 --threads 1",
        "known": None,
        "n": 0,
        "param": None,
        "ab": ["--duet"],
    },
    # The same pcap trial one side after the other, pinned to one CPU: the
    # design the duet replaced (not in the default list).
    "pcap-seq": {
        "aa": "{bin} pcap bench {pcap} --cache warm --runs 1 --threads 1",
        "known": None,
        "n": 0,
        "param": None,
        "ab": ["--cpus", "1"],
    },
    "pipeline-rtc": {
        "aa": "{bin} pipeline run --mode rtc --work delay:1000 --repeat 1",
        "known": "{bin} pipeline run --mode rtc --work delay:{x} --repeat 1",
        "n": 1000,
        "param": "work,delay_ns",
        "ab": ["--cpus", "1"],
    },
}

# Variants measured beside a lab's default trial, not in the default list.
# The two-CPU mux duet is an alternate since the shared-CPU duet decided
# every A/A in 14-36 s on a host where it decided none in 3 minutes
# (docs/statistics.md §9, "The shared-CPU duet").
ALTERNATES = ("pcap-seq", "mux-epoll-r300", "mux-epoll")

# Every ab run's headline rows, for the per-run table (--detail).
DETAIL = []
# The pooled true ratio per (lab, metric) of the known change.
TRUTH = {}

CHANGE = ("slower", "faster", "worse", "better", "changed")


LOCK = None
ARGS = None


@contextlib.contextmanager
def heavy():
    """Holds --lock (flock) for one measurement, so that other heavy work
    on the machine that takes the same lock waits; between measurements it
    is let go for a moment."""
    if LOCK is None:
        yield
        return
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
    time.sleep(3)


def sh(cmd, **kw):
    with heavy():
        return subprocess.run(cmd, text=True, capture_output=True, **kw)


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def run_ab(binary, name, values, command, extra, budget, out):
    if ARGS.reread:
        # The records of an earlier run of this script (--out), judged
        # again: the time is the run's own (elapsed_s).
        if not os.path.exists(out):
            return None, 0.0
        recs = load(out)
        return recs, max((r["metrics"].get("elapsed_s") or 0.0) for r in recs) if recs else 0.0
    cmd = [binary, "--no-store", "ab", "-L", name, ",".join(values), "--budget", budget,
           "--threshold", str(ARGS.threshold), "--max-pairs", str(ARGS.max_pairs),
           "--format", "jsonl", "-o", out] + extra + ["--", command]
    with heavy():
        t0 = time.monotonic()
        r = subprocess.run(cmd, text=True, capture_output=True)
        dt = time.monotonic() - t0
    print(f"ab-proof: {os.path.basename(out)} exit {r.returncode} in {dt:.0f} s", file=sys.stderr,
          flush=True)
    if r.returncode != 0:
        print(f"ab-proof: ab failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}",
              file=sys.stderr)
        return None, dt
    return load(out), dt


def lab_runs(args, lab):
    for kv in args.lab_runs:
        k, _, v = kv.partition("=")
        if k == lab:
            return int(v)
    return args.runs


def headline(recs):
    return [r for r in recs if r["metrics"].get("headline")]


def note(lab, case, i, recs, dt):
    for r in headline(recs or []):
        m = r["metrics"]
        DETAIL.append((lab, case, i, r["params"]["metric"], m["verdict"], m["ratio"],
                       m["ratio_lo"], m["ratio_hi"], m["pairs"], dt, m.get("decided")))


def part_aa(args, labs):
    print("\n## A/A: one binary against itself, empty store\n")
    print("| lab | runs | runs flagging a headline | headline decisive | pairs (median) | time (median s) |")
    print("|---|---:|---:|---:|---:|---:|")
    total_runs = total_flagged = 0
    for lab in labs:
        spec = LABS[lab]
        flagged = decisive = judged = 0
        pairs, times = [], []
        for i in range(lab_runs(args, lab)):
            cmd = spec["aa"].replace("{pcap}", args.pcap)
            out = os.path.join(args.out, f"{lab}-aa-{i}.jsonl")
            recs, dt = run_ab(args.bin, "bin", [args.bin, args.bin], cmd, spec["ab"], args.budget, out)
            if recs is None:
                continue
            note(lab, "A/A", i, recs, dt)
            h = headline(recs)
            total_runs += 1
            if any(r["metrics"]["verdict"] in CHANGE for r in h):
                flagged += 1
                total_flagged += 1
            decisive += sum(r["metrics"]["verdict"] == "no change" for r in h)
            judged += len(h)
            pairs.append(h[0]["metrics"]["pairs"] if h else 0)
            times.append(dt)
        share = f"{100 * decisive / judged:.0f}%" if judged else "-"
        print(f"| {lab} | {len(times)} | {flagged} | {share} ({decisive}/{judged}) | "
              f"{statistics.median(pairs) if pairs else '-'} | "
              f"{statistics.median(times) if times else float('nan'):.0f} |", flush=True)
    print(f"\nA/A overall: {total_runs - total_flagged} of {total_runs} runs flagged no headline")


def part_known(args, labs):
    print("\n## Known change of 3%\n")
    print("| lab | metric | true ratio (pooled medians) | its own 95% range | runs flagged with it inside | "
          "pooled paired ratio [its own 95% range] | runs flagged with it inside | runs flagged |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for lab in labs:
        spec = LABS[lab]
        if not spec["known"]:
            print(f"| {lab} | - | not measured: no calibration aid in this lab's command | - | - | - | - | - |")
            continue
        n = spec["n"]
        values = [str(n), str(round(n * 1.03))]
        runs = []
        for i in range(lab_runs(args, lab)):
            out = os.path.join(args.out, f"{lab}-known-{i}.jsonl")
            cmd = spec["known"].replace("{bin}", args.bin)
            recs, dt = run_ab(args.bin, "x", values, cmd, spec["ab"], args.budget, out)
            if recs is not None:
                runs.append(headline(recs))
                note(lab, "+3%", i, recs, dt)
        if not runs:
            continue
        for metric in sorted({r["params"]["metric"] for rs in runs for r in rs}):
            a_all, b_all, rows, ratios, kept = [], [], [], [], []
            for rs in runs:
                for r in rs:
                    if r["params"]["metric"] == metric:
                        m = r["metrics"]
                        a, b = m.get("a_median_samples") or [], m.get("b_median_samples") or []
                        a_all += a
                        b_all += b
                        rows.append(m)
                        # Up to 64 pairs a record keeps each pair's values in
                        # pair order; beyond, each side's quantile sketch
                        # (core::estimate::MAX_SAMPLES), which pairs nothing.
                        if len(a) == len(b) == m["pairs"]:
                            ratios += [math.log(y / x) for x, y in zip(a, b) if x > 0 and y > 0]
                            kept += list(zip(a, b))
            if not a_all or not b_all:
                continue
            truth = statistics.median(b_all) / statistics.median(a_all)
            # The same pool judged pair by pair: the median of every pair's
            # ratio. The ratio of the two sides' medians carries the spread
            # of the machine's level between pairs (within one 40-pair mux
            # run it stood 0.15% from the pairs' own estimate), the pairs'
            # ratio does not.
            paired = math.exp(statistics.median(ratios)) if ratios else float("nan")
            # The truth is an estimate too: the ratio of two medians over
            # trials whose level moved with the machine (mux's rate: a
            # coefficient of variation of 18% between trials, deciles 2,855
            # to 4,169 round trips/s) is uncertain by more than the
            # intervals it judges (its bootstrap range over the pooled
            # pairs was [0.9696, 0.9805] against the runs' ±0.46%).
            rng = random.Random(1)
            boots = sorted(
                statistics.median([y for _, y in d]) / statistics.median([x for x, _ in d])
                for d in ([rng.choice(kept) for _ in kept] for _ in range(2000))
            ) if kept else []
            own = f"[{boots[50]:.4f}, {boots[1949]:.4f}]" if boots else "-"
            pboots = sorted(
                math.exp(statistics.median(d))
                for d in ([rng.choice(ratios) for _ in ratios] for _ in range(2000))
            ) if ratios else []
            pown = f" [{pboots[50]:.4f}, {pboots[1949]:.4f}]" if pboots else ""
            TRUTH[(lab, metric)] = (truth, rows)
            flagged = [m for m in rows if m["verdict"] in CHANGE]

            def inside(t):
                return sum(1 for m in flagged
                           if m["ratio_lo"] is not None and m["ratio_lo"] <= t <= m["ratio_hi"])
            print(f"| {lab} | {metric} | {truth:.4f} | {own} | {inside(truth)} of {len(rows)} | "
                  f"{paired:.4f}{pown} | {inside(paired)} of {len(rows)} | {len(flagged)} |", flush=True)


def part_detail():
    """Every run's headline verdicts with ratio and interval; for the known
    change, whether each lab's pooled truth lies inside (the truth a design
    measures beside the one another design measures: a design biased by
    its placement would miss the other's)."""
    print("\n## Every run\n")
    labs_truth = sorted({lab for lab, _ in TRUTH})
    cols = "".join(f" {l} truth inside |" for l in labs_truth)
    print(f"| lab | case | run | metric | verdict | B/A [95%] | pairs | s |{cols}")
    print("|---|---|---:|---|---|---|---:|---:|" + "---|" * len(labs_truth))
    for lab, case, i, metric, verdict, ratio, lo, hi, pairs, dt, _ in DETAIL:
        iv = f"{ratio:.4f} [{lo:.4f}, {hi:.4f}]" if lo is not None else f"{ratio} [none]"
        cells = ""
        for l in labs_truth:
            t = TRUTH.get((l, metric))
            cells += (f" {'yes' if case != 'A/A' and lo is not None and lo <= t[0] <= hi else ('-' if case == 'A/A' else 'no')} |"
                      if t else " - |")
        print(f"| {lab} | {case} | {i + 1} | {metric} | {verdict} | {iv} | {pairs} | {dt:.0f} |{cells}")
    print("\n## Summary per lab and case\n")
    print("| lab | case | runs | every headline decided | headlines decided | flagged |")
    print("|---|---|---:|---:|---:|---:|")
    keys = sorted({(d[0], d[1]) for d in DETAIL})
    for lab, case in keys:
        rows = [d for d in DETAIL if d[0] == lab and d[1] == case]
        runs = sorted({d[2] for d in rows})
        all_dec = sum(all(d[4] != "inconclusive" for d in rows if d[2] == i) for i in runs)
        dec = sum(d[4] != "inconclusive" for d in rows)
        fl = sum(d[4] in CHANGE for d in rows)
        print(f"| {lab} | {case} | {len(runs)} | {all_dec} of {len(runs)} | {dec} of {len(rows)} | {fl} |")
    for (lab, metric), (t, _) in sorted(TRUTH.items()):
        print(f"\npooled truth {lab} {metric}: {t:.4f}", end="")
    print()


def part_b2b(args, labs):
    """Today's way, for the side-by-side: each side run once, back to back,
    with --repeat 5 inside the run, then `compare` (empty store: the cold
    floor) — for the A/A and the known change."""
    print("\n## Back to back, --repeat 5 per side, compare (empty store)\n")
    print("| lab | case | runs | headline no change | inconclusive | flagged |")
    print("|---|---|---:|---:|---:|---:|")
    for lab in labs:
        spec = LABS[lab]
        cases = [("A/A", "aa", spec["aa"], None)]
        if spec["known"]:
            n = spec["n"]
            cases.append(("+3%", "known", spec["known"], (str(n), str(round(n * 1.03)))))
        for case, slug, template, xs in cases:
            nc = inc = fl = runs = 0
            for i in range(args.runs):
                files = []
                for side in range(2):
                    cmd = template.replace("{bin}", args.bin).replace("{pcap}", args.pcap)
                    if xs:
                        cmd = cmd.replace("{x}", xs[side])
                    cmd = cmd.replace("--repeat 1", "--repeat 5").replace("--runs 1", "--runs 5")
                    out = os.path.join(args.out, f"{lab}-b2b-{slug}-{i}-{side}.jsonl")
                    argv = cmd.split() + ["--no-store", "--format", "jsonl", "-o", out]
                    if spec["ab"][:1] == ["--cpus"]:
                        argv = ["taskset", "-c", spec["ab"][1]] + argv
                    sh(argv)
                    files.append(out)
                # The known change differs in the varied parameter: compare
                # matches the two sides' records without it.
                ignore = ["--ignore-param", spec["param"]] if xs else []
                r = sh([args.bin, "--no-store", "compare", files[0], files[1],
                        "--threshold", str(args.threshold), "--format", "jsonl"] + ignore)
                if r.returncode not in (0, 1):
                    print(f"ab-proof: compare failed: {r.stderr[-500:]}", file=sys.stderr)
                heads = [json.loads(l)["metrics"] for l in r.stdout.splitlines() if l.strip()]
                if not heads:
                    continue
                runs += 1
                nc += sum(c.get("verdict") == "no change" for c in heads)
                inc += sum(c.get("verdict") == "inconclusive" for c in heads)
                fl += sum(c.get("verdict") in CHANGE for c in heads)
            print(f"| {lab} | {case} | {runs} | {nc} | {inc} | {fl} |", flush=True)


def part_suites(args):
    print("\n## Two quick suites, empty store, compare --fail-on-regression 10\n")
    print("| pair | exit | headline compared | no change | inconclusive | flagged |")
    print("|---:|---:|---:|---:|---:|---:|")
    ok = 0
    for i in range(args.runs):
        dirs = []
        for side in "ab":
            d = os.path.join(args.out, f"suite-{i}-{side}")
            r = sh([args.bin, "--no-store", "suite", "--quick", "--out", d])
            if r.returncode not in (0, 1):
                print(f"ab-proof: suite failed: {r.stderr[-1000:]}", file=sys.stderr)
            dirs.append(d)
        r = sh([args.bin, "--no-store", "compare", f"{dirs[0]}/results.jsonl",
                f"{dirs[1]}/results.jsonl", "--fail-on-regression", "10", "--format", "jsonl"])
        ok += r.returncode == 0
        # The records shown are the headline comparisons, one per line.
        heads = [json.loads(l)["metrics"] for l in r.stdout.splitlines() if l.strip()]
        if heads:
            nc = sum(c.get("verdict") == "no change" for c in heads)
            inc = sum(c.get("verdict") == "inconclusive" for c in heads)
            fl = sum(c.get("verdict") in CHANGE for c in heads)
            print(f"| {i + 1} | {r.returncode} | {len(heads)} | {nc} | {inc} | {fl} |", flush=True)
        else:
            print(f"| {i + 1} | {r.returncode} | - | - | - | - |", flush=True)
    print(f"\ncompare from a cold store: exit 0 in {ok} of {args.runs} pairs")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--lab-runs", action="append", default=[], metavar="LAB=N",
                    help="runs of one lab instead of --runs (a design already known to use "
                         "the whole budget, measured fewer times)")
    ap.add_argument("--labs", default=",".join(l for l in LABS if l not in ALTERNATES))
    ap.add_argument("--parts", default="aa,known,suites")
    ap.add_argument("--budget", default="3m")
    ap.add_argument("--bin", default="target/release/commbench")
    ap.add_argument("--out", default="/tmp/ab-proof")
    ap.add_argument("--lock", help="flock this file around each measurement")
    ap.add_argument("--threshold", type=float, default=1.5,
                    help="ab --threshold: half the change to catch (3%% -> 1.5)")
    ap.add_argument("--max-pairs", type=int, default=1000,
                    help="ab --max-pairs (the budget is the bound that acts)")
    ap.add_argument("--pcap-size", default="512M")
    ap.add_argument("--reread", action="store_true",
                    help="run nothing: judge again the ab records an earlier run left in --out")
    args = ap.parse_args()
    global LOCK, ARGS
    LOCK = args.lock
    ARGS = args
    labs = [l for l in args.labs.split(",") if l]
    for l in labs:
        if l not in LABS:
            sys.exit(f"ab-proof: unknown lab {l!r}; known: {', '.join(LABS)}")
    os.makedirs(args.out, exist_ok=True)
    args.pcap = os.path.join(args.out, "proof.pcap")
    if any(l.startswith("pcap") for l in labs) and not os.path.exists(args.pcap):
        sh([args.bin, "--no-store", "pcap", "gen", "--size", args.pcap_size, "-o", args.pcap],
           check=True)
    load1 = os.getloadavg()[0]
    print(f"# commbench ab proof · {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · "
          f"load {load1:.2f} · {os.cpu_count()} CPUs · {args.bin} · threshold {args.threshold}% · "
          f"budget {args.budget} · max pairs {args.max_pairs}")
    parts = args.parts.split(",")
    if "aa" in parts:
        part_aa(args, labs)
    if "known" in parts:
        part_known(args, labs)
    if DETAIL:
        part_detail()
    if "b2b" in parts:
        part_b2b(args, labs)
    if "suites" in parts:
        part_suites(args)
    print(f"\nload at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
