//! Root tests of the tester: exact counts through each device kind, with
//! injected loss, duplication and reordering; the RFC 2544 search on a
//! device of known capacity. Counts and consistency only, never speed.

use super::dut::FwdSnapshot;
use super::dut::{DutSpec, FwdWork, Impair};
use super::generator::{catch_up, Pacer, Stager};
use super::pace::{Rate, Sizes};
use super::rfc2544::{self, SearchSpec};
use super::*;
use crate::netns::{self, RxPath};
use commbench_core::clock::{rdtsc, tsc};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn root() -> bool {
    commbench_core::testing::root_or_skip("the tester creates namespaces and veths")
}

fn spec(frames_per_s: f64, ms: u64, flows: u16) -> TrialSpec {
    TrialSpec {
        rate: Rate::Pps(frames_per_s),
        duration: Duration::from_millis(ms),
        flows,
        // Counts, not pacing, are under test: a loaded machine may lag.
        lag_bound_ns: u64::MAX,
        drain: Duration::from_millis(300),
        ..TrialSpec::default()
    }
}

/// Expected per-flow (received, lost, duplicated, reordered, max
/// distance) after `imp` acts on `n` frames sent round robin over `flows`.
fn expected(imp: &Impair, n: usize, flows: usize) -> Vec<(u64, u64, u64, u64, u64)> {
    let sent: Vec<(usize, u64)> = (0..n).map(|i| (i % flows, (i / flows) as u64)).collect();
    let out = imp.apply_model(n);
    (0..flows)
        .map(|f| {
            let mut seen = HashSet::new();
            let (mut dup, mut re, mut maxd, mut hi) = (0u64, 0u64, 0u64, None::<u64>);
            for &i in &out {
                let (fl, s) = sent[i];
                if fl != f {
                    continue;
                }
                if !seen.insert(s) {
                    dup += 1;
                    continue;
                }
                match hi {
                    Some(h) if s < h => {
                        re += 1;
                        maxd = maxd.max(h - s);
                    }
                    _ => hi = Some(s),
                }
            }
            let total = sent.iter().filter(|(fl, _)| *fl == f).count() as u64;
            let rcv = seen.len() as u64;
            (rcv, total - rcv, dup, re, maxd)
        })
        .collect()
}

fn check(r: &TrialResult, exp: &[(u64, u64, u64, u64, u64)]) {
    for (c, e) in r.per_flow.iter().zip(exp) {
        let got = (
            c.received,
            c.lost,
            c.duplicated,
            c.reordered,
            c.reorder_max_distance,
        );
        assert_eq!(got, *e, "flow {}: {r:?}", c.flow);
    }
    assert_eq!(r.per_flow.len(), exp.len());
    assert_eq!(r.stale, 0, "{r:?}");
    assert_eq!(r.out_of_range, 0, "{r:?}");
    // Every arrival's latency is recorded.
    assert_eq!(r.latency.n, r.received + r.duplicated, "{r:?}");
}

#[test]
fn exact_counts_through_l2fwd_with_drops_duplicates_and_swaps() {
    if !root() {
        return;
    }
    let imp = Impair {
        drop: 10,
        dup: 7,
        swap: 13,
    };
    let dut = DutSpec::L2fwd {
        work: FwdWork::Swap,
        rx: RxMethod::AfPacket,
        burst: 32,
        impair: imp,
        rx_blocks: netns::RX_BLOCKS,
    };
    // One flow: swaps reorder it; three flows: the swapped neighbour is
    // another flow's frame, so no flow sees reordering. A fresh forwarder
    // each (its impairment count runs on across trials).
    for flows in [1u16, 3] {
        let mut b = Bench::new(&dut, RoleCpus::default()).unwrap();
        let s = spec(20_000.0, 150, flows);
        let r = b.trial(&s).unwrap();
        assert_eq!(r.sent, 3000, "{r:?}");
        check(&r, &expected(&imp, 3000, usize::from(flows)));
        if flows == 1 {
            assert!(r.reordered > 0 && r.duplicated > 0 && r.lost == 300);
        }
        // The forwarder's white-box counters saw the same frames.
        let f = r.fwd.unwrap();
        assert_eq!(f.dropped, 300);
        assert!(f.rx >= 3000, "{f:?}");
        // No ring or queue overflowed: the device itself lost them.
        assert_eq!((f.rx_ring_drops, r.sink_drops), (0, 0), "{r:?}");
        assert_eq!(r.loss_where, "device", "{r:?}");
        let ns = b.namespaces();
        drop(b);
        for n in ns {
            assert!(
                !std::path::Path::new(&format!("/run/netns/{n}")).exists(),
                "{n} left"
            );
        }
    }
}

#[test]
fn exact_counts_with_no_device_a_bridge_and_af_xdp_paths() {
    if !root() {
        return;
    }
    let none = Impair::default();
    for (dut, tx, rx) in [
        (DutSpec::None, TxMethod::Sendmmsg, RxMethod::AfPacket),
        (DutSpec::None, TxMethod::AfXdp, RxMethod::AfXdp),
        (DutSpec::Bridge, TxMethod::TxRing, RxMethod::AfPacket),
        (
            DutSpec::L2fwd {
                work: FwdWork::Delay(500),
                rx: RxMethod::AfXdp,
                burst: 32,
                impair: none,
                rx_blocks: netns::RX_BLOCKS,
            },
            TxMethod::Sendmmsg,
            RxMethod::AfPacket,
        ),
    ] {
        let mut b = Bench::new(&dut, RoleCpus::default()).unwrap();
        let mut s = spec(20_000.0, 100, 4);
        s.tx = tx;
        s.rx = rx;
        s.sizes = Sizes::imix();
        s.burst = 4;
        let r = b.trial(&s).unwrap();
        assert_eq!(r.sent, 2000, "{dut:?} {r:?}");
        check(&r, &expected(&none, 2000, 4));
        assert_eq!(r.received, 2000, "{dut:?}");
        // The stall monitor watched the trial, and its record says so.
        let w = r.host_stall_ms.expect("a stall window per trial");
        assert!(w.is_finite() && w >= 0.0, "{w}");
        let x = r.record("trial");
        assert!(x.metric_f64("host_stall_ms").is_some(), "{x:?}");
        assert!(x.metrics.contains_key("steal_ms"), "{x:?}");
    }
}

#[test]
fn the_kernel_ticks_are_the_cpu_s_busy_time_less_the_forwarder_s_sections() {
    let f = FwdSnapshot {
        rx: 1000,
        ticks_rx: 100_000,
        ticks_work: 2_000_000,
        ticks_tx: 900_000,
        ..FwdSnapshot::default()
    };
    // 1 GHz: 4 ms busy = 4,000,000 ticks, 3,000,000 in the sections:
    // 1,000 ticks per frame outside them.
    assert_eq!(kernel_ticks_per_frame(0.004, 1e9, &f), Some(1000.0));
    // The busy time is sampled; a window that reads less than the
    // sections is 0 outside them, never negative.
    assert_eq!(kernel_ticks_per_frame(0.002, 1e9, &f), Some(0.0));
    // No frames, no per-frame figure.
    let none = FwdSnapshot::default();
    assert_eq!(kernel_ticks_per_frame(0.004, 1e9, &none), None);
    assert_eq!(kernel_ticks_per_frame(f64::NAN, 1e9, &f), None);
}

#[test]
fn the_device_cpu_is_measured_beside_the_forwarder_s_own_ticks() {
    if !root() {
        return;
    }
    // The device on a CPU of its own (CPU 0 when the host has one only:
    // the window is then the CPU every role shares, still one CPU's).
    let online = commbench_core::placement::online();
    let c = *online.cpus().last().unwrap();
    let cpus = RoleCpus {
        gen: None,
        sink: None,
        dut: Some(c),
    };
    let dut = DutSpec::parse("l2fwd:delay:2000").unwrap();
    let mut b = Bench::new(&dut, cpus).unwrap();
    let r = b.trial(&spec(20_000.0, 200, 1)).unwrap();
    assert_eq!(r.received, 4000, "{r:?}");
    // The CPU's busy time, per frame the forwarder received (the probes
    // too: they cost the device as much).
    let busy = r.dut_cpu_busy_ms.expect("the device CPU's window");
    assert!(busy >= 0.0 && busy.is_finite(), "{busy}");
    let frames = r.fwd.expect("the forwarder's counters").rx;
    assert!(frames >= 4000, "{frames}");
    let per = r.dut_cpu_ns_per_frame.expect("per frame");
    assert!(
        (per - busy * 1e6 / frames as f64).abs() <= per * 1e-9 + 1e-9,
        "{per} {busy} {frames}"
    );
    let k = r.fwd_ticks_kernel.expect("the forwarder's outside ticks");
    assert!(k >= 0.0 && k.is_finite(), "{k}");
    let x = r.record("trial");
    for m in [
        "dut_cpu_busy_ms",
        "dut_cpu_softirq_ms",
        "dut_cpu_system_ms",
        "fwd_ticks_kernel",
    ] {
        assert!(x.metric_f64(m).is_some(), "{m}: {x:?}");
    }
    // A device with no CPU of its own (unpinned) has no window, and says
    // so with nulls, not zeros.
    let mut b = Bench::new(&dut, RoleCpus::default()).unwrap();
    let r = b.trial(&spec(20_000.0, 50, 1)).unwrap();
    assert_eq!(r.dut_cpu_busy_ms, None);
    assert_eq!(r.fwd_ticks_kernel, None);
    assert!(r.record("trial").metric_f64("dut_cpu_busy_ms").is_none());
}

#[test]
fn exact_counts_through_real_interfaces() {
    if !root() {
        return;
    }
    // A veth pair in a namespace of the test's own: the generator sends on
    // one end, the sink listens on the other (`ifaces:A,B` with A ↔ B).
    let veth = netns::TestVeth::new(format!("cbif-{}", std::process::id()), "cbifa", "cbifb");
    veth.up("cbifa");
    veth.up("cbifb");
    let ns = veth.ns.clone();
    let ns2 = ns.clone();
    let r = std::thread::spawn(move || {
        netns::enter(&ns2).unwrap();
        let dut = DutSpec::Ifaces("cbifa".into(), "cbifb".into());
        let mut b = Bench::new(&dut, RoleCpus::default()).unwrap();
        b.trial(&spec(20_000.0, 100, 2)).unwrap()
    })
    .join()
    .unwrap();
    check(&r, &expected(&Impair::default(), 2000, 2));
}

#[test]
fn a_deleted_interface_under_dut_ifaces_was_not_named() {
    if !root() {
        return;
    }
    // An interface deleted during a trial ended it with a bare "Network is
    // down (os error 100)"; the error now names the interface and its role,
    // during a trial and in the next one.
    let veth = netns::TestVeth::new(format!("cbdel-{}", std::process::id()), "cbdla", "cbdlb");
    veth.up("cbdla");
    veth.up("cbdlb");
    let ns = veth.ns.clone();
    let ns2 = ns.clone();
    let ended = Arc::new(AtomicBool::new(false));
    let ended2 = ended.clone();
    let trials = std::thread::spawn(move || {
        netns::enter(&ns2).unwrap();
        let dut = DutSpec::Ifaces("cbdla".into(), "cbdlb".into());
        let mut b = Bench::new(&dut, RoleCpus::default()).unwrap();
        // Long enough that the interface goes while frames flow.
        let during = b.trial(&spec(1_000.0, 600_000, 1));
        ended2.store(true, Ordering::Release);
        let next = b.trial(&spec(1_000.0, 100, 1));
        (during.unwrap_err(), next.unwrap_err())
    });
    // Delete the link once frames reach the sink's end (its receive count,
    // read in the namespace), i.e. in the middle of the trial.
    let ns3 = ns.clone();
    std::thread::spawn(move || {
        netns::enter(&ns3).unwrap();
        let rx_packets = || -> u64 {
            let dev = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap_or_default();
            dev.lines()
                .find_map(|l| l.trim_start().strip_prefix("cbdlb:"))
                .and_then(|r| r.split_whitespace().nth(1)?.parse().ok())
                .unwrap_or(0)
        };
        while rx_packets() < 20 && !ended.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(10));
        }
        netns::ip_cmd(&["-n", &ns3, "link", "del", "cbdla"]).unwrap();
    })
    .join()
    .unwrap();
    let (during, next) = trials.join().unwrap();
    for e in [during, next] {
        let m = e.to_string();
        assert!(
            m.starts_with("--dut ifaces:cbdla,cbdlb: the generator's interface cbdla: ")
                || m.starts_with("--dut ifaces:cbdla,cbdlb: the sink's interface cbdlb: "),
            "{m}"
        );
    }
}

#[test]
fn a_failed_af_xdp_sink_was_hidden_behind_no_probe_frame() {
    if !root() {
        return;
    }
    // Issue 38 item 6: the second trial's AF_XDP sink could not bind its
    // queue, and the run said only "no probe frame came through the
    // device in 5 s" (the generator's error, after probing a sink that
    // was gone). Now the sink's error is the trial's, naming the queue.
    // Here another receiver holds the sink's queue for good.
    let veth = netns::TestVeth::new(format!("cbxs-{}", std::process::id()), "cbxsa", "cbxsb");
    veth.up("cbxsa");
    veth.up("cbxsb");
    let ns = veth.ns.clone();
    let ns2 = ns.clone();
    let e = std::thread::spawn(move || {
        netns::enter(&ns2).unwrap();
        let _holder = RxPath::open("cbxsb", RxMethod::AfXdp).unwrap();
        let dut = DutSpec::Ifaces("cbxsa".into(), "cbxsb".into());
        let mut b = Bench::new(&dut, RoleCpus::default()).unwrap();
        let mut s = spec(1_000.0, 100, 1);
        s.rx = RxMethod::AfXdp;
        b.trial(&s).unwrap_err()
    })
    .join()
    .unwrap();
    let m = e.to_string();
    assert!(
        m.starts_with("--dut ifaces:cbxsa,cbxsb: the sink's interface cbxsb: AF_XDP"),
        "{m}"
    );
    assert!(!m.contains("no probe frame"), "{m}");
}

/// commbench's forwarder with 20 µs of busy-wait per frame: it cannot
/// pass more than 50 kpps whatever the machine.
#[test]
fn the_default_placement_gives_the_generator_a_cpu_of_its_own() {
    let d = RoleCpus::for_cpus(&[0, 1]);
    assert_eq!((d.gen, d.sink, d.dut), (Some(0), Some(1), Some(1)));
    let d = RoleCpus::for_cpus(&[2, 5, 7, 9]);
    assert_eq!((d.gen, d.sink, d.dut), (Some(2), Some(5), Some(7)));
    let d = RoleCpus::for_cpus(&[3]);
    assert_eq!((d.gen, d.sink, d.dut), (None, None, None));
    assert_eq!(RoleCpus::for_cpus(&[0, 1]).describe(), "gen 0 sink 1 dut 1");
    // `,,` pins none (the placement before the default).
    let n = RoleCpus::parse(",,").unwrap();
    assert_eq!((n.gen, n.sink, n.dut), (None, None, None));
}

/// The CPUs this process may use, as root and with two at least (None:
/// the test is skipped, saying `what` needs two).
pub(super) fn root_with_two_cpus(what: &str) -> Option<Vec<usize>> {
    if !root() {
        return None;
    }
    let cpus = commbench_core::placement::current_affinity()
        .cpus()
        .to_vec();
    if cpus.len() < 2 {
        commbench_core::testing::skip(
            "two CPUs",
            format_args!("{what} needs two; this process may use {cpus:?}"),
        );
        return None;
    }
    Some(cpus)
}

/// The kernel's RPS mask as a number ("00000000,00000002" -> 2).
fn mask_value(s: &str) -> u128 {
    u128::from_str_radix(&s.replace(',', ""), 16).unwrap()
}

#[test]
fn the_devices_receive_is_steered_off_the_generators_cpu() {
    let Some(cpus) = root_with_two_cpus("steering") else {
        return;
    };
    let b = Bench::new(&DutSpec::Bridge, RoleCpus::for_cpus(&cpus)).unwrap();
    let dut = b.cpus.dut.unwrap();
    let t = b.topo.as_ref().unwrap();
    let m = netns::receive_steering(&t.fwd_ns, &t.fwd_in).unwrap();
    match b.rx_thread {
        // Threaded NAPI (ethtool and a kernel that has it): the receive
        // runs in its own kernel thread held to the device's CPU, and is
        // not steered into that CPU's softirq as well.
        Some((pid, c)) => {
            assert_eq!(c, dut);
            assert_eq!(b.rx_steer, None);
            assert_eq!(mask_value(&m), 0, "{m}");
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
            assert!(comm.starts_with("napi/"), "{comm}");
            let allowed = commbench_core::placement::affinity_of(pid as i32);
            assert_eq!(allowed.cpus(), &[dut], "{comm}");
            // Real-time, as a receive in softirq was ahead of the tasks.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
            let policy = after_comm.split(' ').nth(38).unwrap();
            assert_eq!(policy, libc::SCHED_FIFO.to_string(), "{comm}: {stat}");
            assert!(
                b.placement()
                    .ends_with(&format!(", rx napi thread on {dut}")),
                "{}",
                b.placement()
            );
        }
        None => {
            assert_eq!(b.rx_steer, Some(dut));
            assert_eq!(mask_value(&m), 1u128 << dut, "{m}");
            assert!(
                b.placement().ends_with(&format!(", rx on {dut}")),
                "{}",
                b.placement()
            );
        }
    }
    // Nothing to steer the generator away from when nothing is pinned.
    let n = Bench::new(&DutSpec::None, RoleCpus::parse(",,").unwrap()).unwrap();
    assert_eq!(n.rx_steer, None);
    let t = n.topo.as_ref().unwrap();
    let m = netns::receive_steering(&t.sink_ns, &t.sink_if).unwrap();
    assert_eq!(mask_value(&m), 0, "{m}");
    assert_eq!(n.placement(), "gen - sink - dut -");
}

fn slow_forwarder() -> DutSpec {
    DutSpec::L2fwd {
        work: FwdWork::Delay(20_000),
        rx: RxMethod::AfPacket,
        burst: 32,
        impair: Impair::default(),
        rx_blocks: netns::RX_BLOCKS,
    }
}

#[test]
fn rfc2544_search_converges_below_a_known_capacity() {
    if !root() {
        return;
    }
    // 20 µs of busy-wait per frame: the forwarder cannot pass more than
    // 50 kpps whatever the machine; the search must settle below that and
    // be consistent with its own trials.
    let mut b = Bench::new(&slow_forwarder(), RoleCpus::default()).unwrap();
    let mut t = spec(1.0, 200, 1);
    t.lag_bound_ns = 100_000_000;
    let s = SearchSpec {
        trial: t,
        max_pps: 200_000.0,
        resolution_pct: 5.0,
        pdr_loss_pct: None,
        max_trials: 10,
        ladder_steps: 0,
    };
    // A pass above the result is the host's doing when a steal spell
    // cost the device frames in a later trial at the same or a lower
    // rate (150 ms of steal in a 0.2 s trial, seen beside a full test
    // run): such a search is run again, at most three times.
    let mut tries = 0;
    let (r, log) = loop {
        tries += 1;
        let mut log = Vec::new();
        let r = rfc2544::search(&mut b, &s, "ndr", 0.0, 0.0, |t| {
            log.push((t.offered_pps, t.lost, t.behind_schedule))
        })
        .unwrap();
        let consistent = log
            .iter()
            .all(|&(rate, lost, behind)| behind || lost > 0 || rate <= r.fail_pps);
        if consistent || tries == 3 {
            break (r, log);
        }
    };
    assert!(r.rate_pps <= 50_000.0 * 1.02, "{r:?} {log:?}");
    assert!(r.rate_pps < r.fail_pps, "{r:?}");
    assert!(r.trials <= 10 + 4 && r.trials == log.len(), "{r:?} {log:?}");
    // The first trial is at the maximum, which must fail (4x capacity).
    assert!(log[0].0 == 200_000.0 && log[0].1 > 0, "{log:?}");
    if r.confirmed {
        let f = r.final_trial.as_ref().unwrap();
        assert_eq!(f.lost, 0);
        assert!((f.offered_pps - r.rate_pps).abs() < 1e-6);
    }
    // Every failing trial above the result, every pass at or below it.
    for &(rate, lost, behind) in &log {
        if !behind && lost == 0 {
            assert!(rate <= r.fail_pps, "{log:?} {r:?}");
        }
    }
}

#[test]
fn back_to_back_finds_a_burst_the_device_holds_and_one_it_does_not() {
    if !root() {
        return;
    }
    // 20 µs per frame: the forwarder passes at most 50 kpps, so a burst
    // sent back to back (hundreds of kpps) piles up in its receive ring,
    // and a long enough one overflows it.
    let mut b = Bench::new(&slow_forwarder(), RoleCpus::default()).unwrap();
    let s = rfc2544::B2bSpec {
        trial: spec(1.0, 100, 1),
        max_frames: 200_000,
        repeats: 2,
        resolution_pct: 10.0,
        max_trials: 12,
        throughput_pps: Some(50_000.0),
    };
    let mut log = Vec::new();
    let mut wheres = Vec::new();
    let r = rfc2544::back_to_back(&mut b, &s, |t| {
        log.push((t.sent, t.lost, t.sink_drops, t.behind_schedule));
        if t.lost > 0 {
            wheres.push(t.loss_where.clone());
        }
    })
    .unwrap();
    eprintln!("back-to-back losses were in: {wheres:?}");
    assert_eq!(r.lengths.len(), 2, "{r:?}");
    assert_eq!(r.trials, log.len());
    // 200,000 frames at up to 50 kpps would take 4 s to forward; no ring
    // of this forwarder holds them.
    assert!(!r.at_max, "{r:?} {log:?}");
    for &(sent, _, _, behind) in &log {
        // Back to back has no schedule to fall behind.
        assert!(!behind, "{log:?}");
        assert!(sent > 0);
    }
    // Each search's result is a burst that passed, and a longer one
    // failed (searches are separate trials: one may pass what another
    // failed, so the bracket is per search).
    for &l in &r.lengths {
        assert!(
            l == 0 || log.iter().any(|&(sent, lost, _, _)| sent == l && lost == 0),
            "{r:?} {log:?}"
        );
        assert!(
            log.iter().any(|&(sent, lost, _, _)| sent > l && lost > 0),
            "{r:?} {log:?}"
        );
    }
    // How fast the bursts left is the host's doing, not the tester's logic:
    // on a loaded two-core VM the generator sent them at 34 kpps, slower
    // than the forwarder drains. Say so rather than fail on a speed.
    if r.burst_pps <= 50_000.0 {
        eprintln!(
            "note: the bursts left at {:.0} pps, no faster than the forwarder drains (a loaded host)",
            r.burst_pps
        );
    }
    for w in &wheres {
        assert!(
            ["sink ring", "host backlog", "device rx ring", "device"].contains(&w.as_str()),
            "{wheres:?}"
        );
    }
    let (i, c) = rfc2544::buffer_times(r.mean_frames, r.burst_pps, Some(50_000.0));
    assert_eq!((r.implied_buffer_s, r.corrected_buffer_s), (i, c));
    assert!(c <= i, "{r:?}");
}

#[test]
fn a_generator_with_a_cpu_of_its_own_paces_real_time_and_one_sharing_paces_normal() {
    let Some(cpus) = root_with_two_cpus("the generator alone") else {
        return;
    };
    assert!(RoleCpus::for_cpus(&cpus).gen_alone());
    assert!(!RoleCpus::parse(",,").unwrap().gen_alone());
    let shared = RoleCpus {
        gen: Some(cpus[0]),
        sink: Some(cpus[1]),
        dut: Some(cpus[0]),
    };
    assert!(!shared.gen_alone());
    let mut b = Bench::new(&DutSpec::None, RoleCpus::for_cpus(&cpus)).unwrap();
    let r = b.trial(&spec(20_000.0, 100, 1)).unwrap();
    assert!(r.gen_sched.starts_with("fifo 1 "), "{}", r.gen_sched);
    assert_eq!(
        r.record("trial")
            .metrics
            .get("gen_sched")
            .and_then(|v| v.as_str()),
        Some(r.gen_sched.as_str())
    );
    // The generator's own scheduler figures are read, not left out.
    assert!(
        r.gen_wait_ms.is_some_and(|w| w >= 0.0),
        "{:?}",
        r.gen_wait_ms
    );
    // Asked for normal, or sharing its CPU with the sink: normal.
    let mut s = spec(20_000.0, 100, 1);
    s.gen_priority = GenPriority::Normal;
    assert_eq!(b.trial(&s).unwrap().gen_sched, "normal");
    drop(b);
    let mut b = Bench::new(&DutSpec::None, shared).unwrap();
    assert_eq!(
        b.trial(&spec(20_000.0, 100, 1)).unwrap().gen_sched,
        "normal"
    );
    // Back to back has no schedule to keep: normal.
    let mut s = spec(20_000.0, 100, 1);
    s.unpaced = true;
    s.count = Some(1000);
    assert_eq!(b.trial(&s).unwrap().gen_sched, "normal");
}

#[test]
fn a_generator_behind_its_schedule_sends_what_is_overdue_in_one_batch() {
    let t = tsc();
    let spec = TrialSpec {
        rate: Rate::Pps(100_000.0),
        ..TrialSpec::default()
    };
    let mut st = Stager::new(&spec, 0, None);
    // A schedule that started 10 ms ago: 1,000 bursts are due.
    let start = rdtsc() - t.ns_to_ticks(10e6) as u64;
    let mut p = Pacer::new(&spec, t.hz());
    p.take_due(start, rdtsc());
    st.fill(1);
    let n = catch_up(&mut p, &mut st, start, 1, 5_000, 1);
    assert_eq!(n, CATCH_UP);
    // Consecutive sequence numbers in the staged frames, each burst's lag
    // recorded (the first one's too).
    let seqs: Vec<u64> = st.stage[..n]
        .iter()
        .map(|f| stamp::parse(f).unwrap().seq)
        .collect();
    assert_eq!(seqs, (0..CATCH_UP as u64).collect::<Vec<_>>());
    assert_eq!(p.lag.hdr().len(), CATCH_UP as u64);
    assert!(p.last_lag > 9_000_000, "{}", p.last_lag);
    // Never more than the frames left.
    let n = catch_up(&mut p, &mut st, start, 1, 3, 1);
    assert_eq!(n, 3);
    // On schedule (the next burst is 1 s away): nothing added.
    let mut p = Pacer::new(&spec, t.hz());
    let start = rdtsc() + t.ns_to_ticks(1e9) as u64;
    assert_eq!(catch_up(&mut p, &mut st, start, 1, 5_000, 1), 1);
    assert_eq!(p.lag.hdr().len(), 0);
    // Bursts larger than the catch-up batch: one burst per send.
    let spec = TrialSpec { burst: 100, ..spec };
    let mut st = Stager::new(&spec, 0, None);
    let mut p = Pacer::new(&spec, t.hz());
    let start = rdtsc() - t.ns_to_ticks(1e9) as u64;
    assert_eq!(catch_up(&mut p, &mut st, start, 100, 5_000, 100), 100);
}

#[test]
fn a_capture_size_mix_over_many_flows_is_refused_before_its_templates_are_built() {
    // Every size 64..=1518 B once (a capture's sizes can be this mixed):
    // ~1.1 MB of templates per flow.
    let sizes = Sizes {
        name: "sizes of wide.pcap".to_owned(),
        pattern: (64..=1518).collect(),
    };
    let spec = |flows| TrialSpec {
        sizes: sizes.clone(),
        flows,
        ..TrialSpec::default()
    };
    assert!(spec(16).validate().is_ok());
    let e = spec(256).validate().unwrap_err().to_string();
    assert!(e.contains("256 flows × 1455 distinct frame sizes"), "{e}");
    assert!(e.contains("give fewer --flows"), "{e}");
    // The staged frames keep the pattern's sizes, in its order.
    let s = spec(2);
    let mut st = Stager::new(&s, 0, None);
    st.fill(4);
    assert_eq!(st.lens[..4], [60, 61, 62, 63]);
}
