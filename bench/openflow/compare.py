#!/usr/bin/env python3
"""Side by side, interleaved: CPU per response of each side of an OpenFlow
throughput run, for the four pairs

    real cbench      -> commbench controller
    real cbench      -> C controller (bench/openflow/c_controller.c)
    commbench cbench -> commbench controller
    commbench cbench -> C controller

Controller on one CPU, generator on the other (taskset). CPU of each side
from /proc/PID/stat (utime + stime, split user / sys) around the run;
responses counted by the generator (commbench cbench: its 'responses:'
line; real cbench: the sum of its per-window 'total = X per ms' lines times
the window length). Prints the medians over the repeats with their 95%
intervals (commbench estimate, order statistics) and ranges, and the ratios the
issue asks for (ours / peer), each the Hodges-Lehmann estimate over the
interleaved repeats with its 95% interval, for the total and for user and
sys time apart: a target such as "<= 1.05x" is met only when the
interval's upper bound is. It also prints the controller ratio paired by
round (the two controllers run one after the other under one generator in
each round, so the drift between rounds drops out of each round's ratio;
Hodges-Lehmann with the signed-rank interval). A median's interval needs >= 6
repeats ("n<6: no interval" below that), a ratio's >= 2.

TCP congestion control (--cc): real cbench always gets the kernel's
default. With --cc auto (the default) both commbench sides run with their
default `--tcp-congestion auto` (cubic, else reno, instead of a pacing bbr)
and the C controller is given the same algorithm, so that the controller
comparison is about the code; with --cc kernel every program keeps the
kernel's default; with --cc cubic (root) the kernel's default is set to
cubic for the run and restored after it, so that every program, real
cbench too, runs the same algorithm and the generators' kernel times are
for the same bytes under the same rules (under a bbr default, real
cbench's sys time per response is 1.3-1.8x what it is under cubic).

Run as root, the kernel's cached TCP metrics for 127.0.0.1 are flushed
before every run, so that no run starts from the RTT and window a previous
one left behind.

usage: compare.py CBENCH_REAL C_CONTROLLER COMMBENCH [--repeat 5] [--switches 16] [--ms 1000] [--loops 4] [--cc auto|kernel]
"""
import argparse, os, re, signal, socket, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cbestimate import fmt_median, fmt_ratio, median_ci, paired_ratio_ci, ratio_ci  # noqa: E402

TCK = os.sysconf("SC_CLK_TCK")


def cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TCK, int(fields[12]) / TCK  # utime, stime


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_controller(kind, args, port):
    cmd = {
        "commbench": [args.commbench, "--no-store", "controller", "--port", str(port), "-q", "--tcp-congestion", args.ours_cc],
        "c": [args.c_controller, str(port)] + ([args.c_cc] if args.c_cc else []),
    }[kind]
    p = subprocess.Popen(["taskset", "-c", args.ctl_cpu] + cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return p


def run_gen(kind, args, port):
    common = ["-c", "127.0.0.1", "-p", str(port), "-s", str(args.switches), "-l", str(args.loops), "-m", str(args.ms), "-t"]
    if kind == "commbench":
        cmd = ["taskset", "-c", args.gen_cpu, args.commbench, "--no-store", "cbench"] + common + ["--tcp-congestion", args.ours_cc]
    else:
        cmd = ["taskset", "-c", args.gen_cpu, args.cbench] + common
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Bounded: real cbench can spin forever in its handshake with a peer
    # it dislikes; such a run is killed and counted as failed.
    import threading
    limit = 30 + 3 * args.loops * args.ms / 1000
    watchdog = threading.Timer(limit, p.kill)
    watchdog.start()
    # Sample the generator's CPU just before it exits: wait, reading output.
    out = []
    last = (0.0, 0.0)
    while True:
        line = p.stdout.readline()
        if not line:
            break
        out.append(line)
        try:
            last = cpu_of(p.pid)
        except OSError:
            pass
    p.wait()
    watchdog.cancel()
    text = "".join(out)
    if time.time() - t0 >= limit:
        text += f"\n(killed after {limit:.0f} s: the generator did not finish)\n"
    if kind == "commbench":
        m = re.search(r"responses: (\d+)", text)
        responses = int(m.group(1)) if m else 0
    else:
        totals = [float(x) for x in re.findall(r"total = ([\d.]+) per ms", text)]
        responses = int(sum(totals) * args.ms)
    # Whole-process CPU for both generators (ours: all threads, not only
    # the workers its 'emulator:' line counts).
    gen_user, gen_sys = last
    m = re.search(r"RESULT: .* min/max/avg/stdev = [\d.]+/[\d.]+/([\d.]+)/", text)
    ok = m is not None and responses > 0
    rate = float(m.group(1)) if m else 0.0
    return responses, gen_user, gen_sys, ok, rate, text


def one(gen, ctl, args):
    if os.geteuid() == 0:
        subprocess.run(["ip", "tcp_metrics", "delete", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port = free_port()
    c = start_controller(ctl, args, port)
    c0 = cpu_of(c.pid)
    responses, gu, gs, ok, rate, text = run_gen(gen, args, port)
    c1 = cpu_of(c.pid)
    c.send_signal(signal.SIGTERM)
    try:
        c.wait(timeout=5)
    except subprocess.TimeoutExpired:
        c.kill()
    cu, cs = c1[0] - c0[0], c1[1] - c0[1]
    if not ok:
        print(f"  {gen} -> {ctl}: run failed:\n{text[-800:]}", file=sys.stderr)
        return None
    n = responses
    return {
        "gen_ns": (gu + gs) * 1e9 / n, "gen_user_ns": gu * 1e9 / n, "gen_sys_ns": gs * 1e9 / n,
        "ctl_ns": (cu + cs) * 1e9 / n, "ctl_user_ns": cu * 1e9 / n, "ctl_sys_ns": cs * 1e9 / n,
        "rate": rate,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cbench")
    ap.add_argument("c_controller")
    ap.add_argument("commbench")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--switches", type=int, default=16)
    ap.add_argument("--ms", type=int, default=1000)
    ap.add_argument("--loops", type=int, default=4)
    ap.add_argument("--ctl-cpu", default="1")
    ap.add_argument("--gen-cpu", default="0")
    ap.add_argument("--cc", choices=["auto", "kernel", "cubic"], default="auto")
    args = ap.parse_args()
    cc_path = "/proc/sys/net/ipv4/tcp_congestion_control"
    kernel_cc = open(cc_path).read().strip()
    args.ours_cc = "kernel" if args.cc == "cubic" else args.cc
    if args.cc == "cubic" and kernel_cc != "cubic":
        if os.geteuid() != 0:
            sys.exit("--cc cubic sets the kernel's default congestion control: run as root, or use --cc auto")
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped"))
        with open(cc_path, "w") as f:
            f.write("cubic")
        try:
            run(args, "cubic", f"TCP: cubic for every program (the kernel's default {kernel_cc} restored after the run)")
        finally:
            with open(cc_path, "w") as f:
                f.write(kernel_cc)
        return
    run(args, kernel_cc, None)


def run(args, kernel_cc, tcp):
    # What `--tcp-congestion auto` puts in force, for the C controller.
    args.c_cc = None
    if args.cc == "auto" and kernel_cc.startswith("bbr"):
        avail = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
        args.c_cc = "cubic" if "cubic" in avail else "reno"
    tcp = tcp or f"TCP: kernel default {kernel_cc}"
    if args.c_cc:
        tcp += f"; commbench and the C controller {args.c_cc}, real cbench {kernel_cc}"
    pairs = [("cbench", "commbench"), ("cbench", "c"), ("commbench", "commbench"), ("commbench", "c")]
    res = {p: [] for p in pairs}
    print(f"command: {' '.join(sys.argv)}")
    print(f"date {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}  load before {os.getloadavg()[0]:.1f}  "
          f"switches {args.switches}  loops {args.loops} x {args.ms} ms  controller cpu {args.ctl_cpu}, generator cpu {args.gen_cpu}  {tcp}")
    for r in range(args.repeat):
        order = pairs if r % 2 == 0 else list(reversed(pairs))
        for p in order:
            x = one(p[0], p[1], args)
            if x:
                x["round"] = r
                res[p].append(x)
                print(f"  round {r + 1} {p[0]} -> {p[1]}: controller {x['ctl_ns']:.1f} ns/response "
                      f"(user {x['ctl_user_ns']:.1f} + sys {x['ctl_sys_ns']:.1f}), generator {x['gen_ns']:.1f}, "
                      f"{x['rate'] / 1e6:.2f} M responses/s", flush=True)
    print(f"load after {os.getloadavg()[0]:.1f}")
    name = {"cbench": "real cbench", "commbench": "commbench", "c": "C controller"}
    med = lambda v, k: statistics.median([x[k] for x in v]) if v else float("nan")
    rng = lambda v, k: f"{min(x[k] for x in v):.0f}-{max(x[k] for x in v):.0f}" if v else "-"
    print()
    ci = lambda v, k: fmt_median(median_ci([x[k] for x in v]), 1) if v else "-"
    col = lambda p, k: [x[k] for x in res[p]]
    print("each CPU cell: median (user+sys medians) [range]; 95% interval of the median on the next column")
    print()
    print("| generator -> controller | generator CPU ns/response (user+sys) | generator median [95% interval] "
          "| controller CPU ns/response (user+sys) | controller median [95% interval] | runs |")
    print("|---|---:|---:|---:|---:|---:|")
    for p in pairs:
        v = res[p]
        print(f"| {name[p[0]]} -> {name[p[1]] if p[1] != 'commbench' else 'commbench controller'} | "
              f"{med(v,'gen_ns'):.1f} ({med(v,'gen_user_ns'):.1f}+{med(v,'gen_sys_ns'):.1f}) [{rng(v,'gen_ns')}] | {ci(v,'gen_ns')} | "
              f"{med(v,'ctl_ns'):.1f} ({med(v,'ctl_user_ns'):.1f}+{med(v,'ctl_sys_ns'):.1f}) [{rng(v,'ctl_ns')}] | {ci(v,'ctl_ns')} | {len(v)} |")
    print()
    print("responses per second (the generator's RESULT line: the average over the kept windows; "
          "median [95% interval], M/s):")
    for p in pairs:
        v = [x["rate"] / 1e6 for x in res[p]]
        print(f"  {name[p[0]]} -> {name[p[1]] if p[1] != 'commbench' else 'commbench controller'}: "
              f"{fmt_median(median_ci(v), 2) if v else '-'}")
    print()
    print("ratios of CPU per response: Hodges-Lehmann estimate [95% interval] over the interleaved repeats "
          "(ratio of the medians in parentheses); total, then user and sys apart")
    rat = lambda peer, ours, k: fmt_ratio(ratio_ci(col(peer, k), col(ours, k)))
    mr = lambda peer, ours, k: med(res[ours], k) / med(res[peer], k)
    for g in ["cbench", "commbench"]:
        peer, ours = (g, "c"), (g, "commbench")
        print(f"controller, ours / C, under {name[g]}: {rat(peer, ours, 'ctl_ns')} ({mr(peer, ours, 'ctl_ns'):.2f}); "
              f"user {rat(peer, ours, 'ctl_user_ns')}; sys {rat(peer, ours, 'ctl_sys_ns')}")
    print()
    print("paired: within a round the two controllers ran one after the other under the same generator "
          "(order alternating round by round), so each round gives one ratio that the drift between rounds "
          "does not enter; Hodges-Lehmann estimate of those ratios [95% signed-rank interval], >= 6 rounds")
    def paired(peer, ours, k):
        by = {x["round"]: x[k] for x in res[peer]}
        return fmt_ratio(paired_ratio_ci([(by[x["round"]], x[k]) for x in res[ours] if x["round"] in by]))
    for g in ["cbench", "commbench"]:
        peer, ours = (g, "c"), (g, "commbench")
        print(f"controller, ours / C, under {name[g]}, paired: {paired(peer, ours, 'ctl_ns')}; "
              f"user {paired(peer, ours, 'ctl_user_ns')}; sys {paired(peer, ours, 'ctl_sys_ns')}")
    for c in ["commbench", "c"]:
        peer, ours = ("cbench", c), ("commbench", c)
        print(f"generator, ours / real cbench, against the {name[c] if c == 'c' else 'commbench controller'}: "
              f"{rat(peer, ours, 'gen_ns')} ({mr(peer, ours, 'gen_ns'):.2f}); "
              f"user {rat(peer, ours, 'gen_user_ns')}; sys {rat(peer, ours, 'gen_sys_ns')}")
    if any(len(v) < args.repeat for v in res.values()):
        print("NOTE: some runs failed (see stderr); the figures above are over the runs that completed")

if __name__ == "__main__":
    main()
