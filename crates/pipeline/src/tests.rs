//! Whole-run tests: conservation per queue in every mode and sweep, the
//! tick split, configuration errors. Counts only, never speed.

use super::*;

fn small(mode: Mode) -> PipelineConfig {
    PipelineConfig {
        mode,
        packets: 20_000,
        flows: 256,
        ..PipelineConfig::default()
    }
}

fn check(rep: &PipelineReport, packets: u64) {
    assert!(!rep.runs.is_empty());
    for r in &rep.runs {
        assert!(r.conserved, "{r:?}");
        assert_eq!(r.generated, packets);
        assert_eq!(r.per_queue.len(), r.queues);
        for q in &r.per_queue {
            assert_eq!(q.generated, q.transmitted + q.dropped, "{r:?}");
        }
        assert_eq!(r.parse_errors, 0);
        assert!(r.ticks.rx.batches > 0);
    }
}

#[test]
fn every_mode_and_work_conserves_packets_per_queue() {
    for mode in [Mode::Rtc, Mode::Pipeline] {
        for work in [Work::None, Work::Parse, Work::Swap, Work::Delay(50)] {
            for queues in [1, 3] {
                let c = PipelineConfig {
                    work,
                    queues,
                    sizes: vec![64, 128],
                    ..small(mode)
                };
                let mut rec = Recorder::new();
                let rep = run(&c, &mut rec).unwrap();
                check(&rep, c.packets);
                assert_eq!(rep.runs.len(), 2);
                assert_eq!(rec.records().len(), 2);
                if mode == Mode::Rtc {
                    // One thread, no rings: nothing can be dropped.
                    assert!(rep.runs.iter().all(|r| r.dropped == 0));
                }
                // The io thread hands packets to its workers on whatever
                // CPUs this thread may use (unpinned); run to completion
                // hands nothing over. compare floors the first kind wider.
                let crossed = mode == Mode::Pipeline
                    && commbench_core::placement::current_affinity().cpus().len() > 1;
                for r in rec.records() {
                    assert_eq!(
                        r.metrics.get(commbench_core::lab::CROSS_CPU),
                        Some(&serde_json::Value::Bool(crossed)),
                        "{mode:?} {r:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn sweeps_conserve_packets_and_record_each_point() {
    let sweeps = [
        Sweep::TxBulk(vec![1, 2, 64]),
        Sweep::Queues(vec![1, 2, 4]),
        Sweep::Delay(vec![0, 10, 200]),
    ];
    for mode in [Mode::Rtc, Mode::Pipeline] {
        for s in &sweeps {
            let c = PipelineConfig {
                sweep: Some(s.clone()),
                packets: 5_000,
                ..small(mode)
            };
            let mut rec = Recorder::new();
            let rep = run(&c, &mut rec).unwrap();
            check(&rep, c.packets);
            assert_eq!(rep.runs.len(), 3);
            let test = format!("sweep-{}", s.name());
            assert!(rec.records().iter().all(|r| r.test == test));
            match s {
                Sweep::TxBulk(v) => {
                    let got: Vec<usize> = rep.runs.iter().map(|r| r.tx_bulk).collect();
                    assert_eq!(&got, v);
                }
                Sweep::Queues(v) => {
                    let got: Vec<usize> = rep.runs.iter().map(|r| r.queues).collect();
                    assert_eq!(&got, v);
                }
                Sweep::Delay(v) => {
                    let got: Vec<u64> = rep.runs.iter().map(|r| r.delay_ns.unwrap()).collect();
                    assert_eq!(&got, v);
                    let d10 = rep.runs[1].delay.as_ref().unwrap();
                    assert!(!d10.trustworthy);
                    assert!(rep.runs[2].delay.as_ref().unwrap().trustworthy);
                    assert!(rep.notes.iter().any(|n| n.contains("not trustworthy")));
                }
            }
        }
    }
}

#[test]
fn a_full_rx_ring_drops_and_the_drops_are_counted_per_queue() {
    // Tiny rings and slow workers: the generator must drop, and every
    // dropped packet is accounted for on its queue.
    let c = PipelineConfig {
        mode: Mode::Pipeline,
        queues: 2,
        ring_size: 16,
        burst: 8,
        tx_bulk: 8,
        pool_size: 4096,
        work: Work::Delay(2_000),
        packets: 20_000,
        rx_full: RxFull::Drop,
        ..PipelineConfig::default()
    };
    let rep = run(&c, &mut Recorder::new()).unwrap();
    check(&rep, c.packets);
    let r = &rep.runs[0];
    assert!(r.dropped > 0, "{r:?}");
    assert!(r.transmitted > 0);
}

#[test]
fn rss_spreads_flows_over_every_queue() {
    let c = PipelineConfig {
        queues: 4,
        flows: 4096,
        packets: 40_960,
        ..small(Mode::Rtc)
    };
    let rep = run(&c, &mut Recorder::new()).unwrap();
    let r = &rep.runs[0];
    assert!(r.per_queue.iter().all(|q| q.generated > 0), "{r:?}");
    assert!(r.balance.max_over_mean >= 1.0);
    // Symmetric key and CPU-side hashing are the same pipeline.
    let c = PipelineConfig {
        symmetric: true,
        rss_at: RssAt::Cpu,
        hash: HashFields::L3,
        ..c
    };
    check(&run(&c, &mut Recorder::new()).unwrap(), c.packets);
}

#[test]
fn rtc_sections_chain_into_the_batch_total() {
    // Each batch's rx + work + tx ticks equal its total up to the read
    // overhead each timer subtracts once — a constant, the same for every
    // full batch. Anything else would mean a section was missed or counted
    // twice.
    let spec = LoopSpec {
        burst: 32,
        tx_bulk: 32,
        queues: 2,
        work: Work::Swap,
        packets: 256 * 200,
        ring_size: 1024,
        pool_size: 1024,
        drain_ticks: 1_000_000,
        cpus: None,
        spin_limit: 0,
        rx_full: RxFull::Wait,
        split: true,
    };
    let rss = Rss::new(&STANDARD_KEY, HashFields::L4, 2);
    let gen = Generator::new(512, 64, IpMix::V4, rss, RssAt::Nic);
    let out = engine::run_rtc(&spec, gen, SpinDelay::calibrate());
    let t = &out.timers;
    let total = t.total.as_ref().unwrap();
    assert_eq!(total.len(), 200);
    let diffs: Vec<f64> = (0..total.len())
        .filter(|&i| t.rx[i] > 0.0 && t.work[i] > 0.0 && t.tx[i] > 0.0)
        .map(|i| t.rx[i] + t.work[i] + t.tx[i] - total[i])
        .collect();
    assert!(diffs.len() > 150, "{}", diffs.len());
    let d0 = diffs[0];
    for d in &diffs {
        assert!((d - d0).abs() < 1e-6, "{d} vs {d0}");
    }
    assert!(out.per_queue.iter().all(QueueCounts::conserved));
}

#[test]
fn bad_configurations_say_what_to_change() {
    let base = PipelineConfig::default();
    let cases: Vec<(PipelineConfig, &str)> = vec![
        (
            PipelineConfig {
                burst: 0,
                ..base.clone()
            },
            "--burst",
        ),
        (
            PipelineConfig {
                tx_bulk: 5000,
                ..base.clone()
            },
            "--tx-bulk",
        ),
        (
            PipelineConfig {
                queues: 0,
                ..base.clone()
            },
            "--queues",
        ),
        (
            PipelineConfig {
                packets: 0,
                ..base.clone()
            },
            "--packets",
        ),
        (
            PipelineConfig {
                sizes: vec![63],
                ..base.clone()
            },
            "frame size 63",
        ),
        (
            PipelineConfig {
                sizes: vec![],
                ..base.clone()
            },
            "--sizes",
        ),
        (
            PipelineConfig {
                ring_size: 1000,
                ..base.clone()
            },
            "--ring-size",
        ),
        (
            PipelineConfig {
                pool_size: 10,
                ..base.clone()
            },
            "--pool-size 10",
        ),
        (
            PipelineConfig {
                repeat: 0,
                ..base.clone()
            },
            "--repeat",
        ),
        (
            PipelineConfig {
                sweep: Some(Sweep::Queues(vec![1, 500])),
                ..base.clone()
            },
            "--queues 500",
        ),
        (
            PipelineConfig {
                sweep: Some(Sweep::TxBulk(vec![])),
                ..base.clone()
            },
            "--sweep",
        ),
    ];
    for (c, want) in cases {
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains(want), "{e} should mention {want}");
    }
}

/// Issue 51, item 2: the pipeline-mode row of the report's "pipeline:
/// run" table had an empty ticks cell while its stacked bar drew the
/// parts: a pipeline-mode record's ticks per packet are its parts summed
/// over its threads (rx + work + tx + tx completion), the bar's total.
#[test]
fn the_pipeline_modes_ticks_cell_was_empty_while_its_figure_drew_the_parts() {
    let mut rec = Recorder::new();
    run(&small(Mode::Pipeline), &mut rec).unwrap();
    let r = &rec.records()[0];
    let part = |k: &str| r.metric_f64(k).unwrap_or_else(|| panic!("no {k}: {r:?}"));
    let parts = part("ticks_rx") + part("ticks_work") + part("ticks_tx") + part("ticks_sink");
    let total = part("ticks_total");
    assert!(
        (total - parts).abs() <= 1e-9 * parts.max(1.0),
        "{total} vs {parts}"
    );
    assert_eq!(total, part("ticks_sum_of_medians"));
    // Run to completion keeps its chained total, without a sink.
    let mut rec = Recorder::new();
    run(&small(Mode::Rtc), &mut rec).unwrap();
    assert!(rec.records()[0].metric_f64("ticks_sink").is_none());
}

#[test]
fn records_carry_the_split_budget_and_conservation() {
    let c = PipelineConfig {
        packets: 4096,
        ..small(Mode::Rtc)
    };
    let mut rec = Recorder::new();
    run(&c, &mut rec).unwrap();
    let r = &rec.records()[0];
    assert_eq!(r.lab, "pipeline");
    assert_eq!(r.test, "run");
    for m in [
        "mpps",
        "ticks_rx",
        "ticks_work",
        "ticks_tx",
        "ticks_total",
        "left_ticks_10G",
        "left_ticks_100G",
        "conserved",
        "load_start",
        "oversubscribed",
        "cpu_ns_per_packet",
    ] {
        assert!(r.metrics.contains_key(m), "missing {m}");
    }
    assert_eq!(r.metrics["generated"], 4096);
    assert_eq!(r.metrics["partial"], false);
}

#[test]
fn rss_bench_times_both_implementations_and_reports_balance() {
    let v = rss_bench(4, 1000, &mut Recorder::new()).unwrap();
    assert_eq!(v.iter().filter(|r| r.test == "rss-hash").count(), 8);
    let bal: Vec<_> = v.iter().filter(|r| r.test == "rss-balance").collect();
    assert_eq!(bal.len(), 2);
    for r in bal {
        let total: u64 = r.metrics["flows_per_queue"]
            .as_str()
            .unwrap()
            .split(' ')
            .map(|x| x.parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, 1000);
    }
    assert!(rss_bench(0, 10, &mut Recorder::new()).is_err());
}

#[test]
fn backpressure_waits_instead_of_dropping() {
    // The same slow workers and tiny rings as the drop test: with the
    // default policy nothing is dropped and everything arrives.
    let c = PipelineConfig {
        mode: Mode::Pipeline,
        queues: 2,
        ring_size: 16,
        burst: 8,
        tx_bulk: 8,
        work: Work::Delay(2_000),
        packets: 5_000,
        ..PipelineConfig::default()
    };
    let rep = run(&c, &mut Recorder::new()).unwrap();
    check(&rep, c.packets);
    assert_eq!(rep.runs[0].dropped, 0);
    assert_eq!(rep.runs[0].transmitted, 5_000);
}

#[test]
fn work_kinds_parse_and_say_what_is_wrong() {
    assert_eq!(Work::parse("none"), Ok(Work::None));
    assert_eq!(Work::parse("parse"), Ok(Work::Parse));
    assert_eq!(Work::parse("swap"), Ok(Work::Swap));
    assert_eq!(Work::parse("delay:100"), Ok(Work::Delay(100)));
    assert!(Work::parse("delay:1.5")
        .unwrap_err()
        .contains("whole nanoseconds"));
    assert!(Work::parse("fast").unwrap_err().contains("not a work kind"));
}

#[test]
fn sweeps_parse_lists_and_bounded_ranges() {
    assert_eq!(
        Sweep::parse("tx-bulk=1,2,4"),
        Ok(Sweep::TxBulk(vec![1, 2, 4]))
    );
    assert_eq!(
        Sweep::parse("queues=1..3"),
        Ok(Sweep::Queues(vec![1, 2, 3]))
    );
    assert_eq!(Sweep::parse("delay=0, 10"), Ok(Sweep::Delay(vec![0, 10])));
    assert!(Sweep::parse("queues=1..100")
        .unwrap_err()
        .contains("at most 64"));
    assert!(Sweep::parse("queues=3..1")
        .unwrap_err()
        .contains("start <= end"));
    assert!(Sweep::parse("burst=1")
        .unwrap_err()
        .contains("cannot be swept"));
    assert!(Sweep::parse("tx-bulk").unwrap_err().contains("NAME=VALUES"));
    assert!(Sweep::parse("delay=x").unwrap_err().contains("'x'"));
}
