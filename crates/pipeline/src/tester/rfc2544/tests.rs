use super::table::or_dash;
use super::*;
use crate::tester::mlrsearch::DEFAULT_GOALS;

#[test]
fn the_cost_model_reproduces_the_seed_budget() {
    // 134 cycles per packet at 2 GHz is 14.9 Mpps (the seed's figure).
    let p = predict_pps(2e9, 134.0, 0.0);
    assert!((p - 14.925e6).abs() < 1e4, "{p}");
    // 67.2 ns of delay on top of 0 ticks: 1 / 67.2 ns.
    assert!((predict_pps(2e9, 0.0, 67.2) - 14.88e6).abs() < 1e4);
}

#[test]
fn points_are_told_device_or_tester_bound() {
    // The device (1 Mpps) is far below the tester (5 Mpps).
    let (b, v) = classify(1e6, 0.97e6, 5e6, "device", 0.1, 2.0);
    assert_eq!(b, "device");
    assert!(v.contains("trusted"), "{v}");
    let (b, v) = classify(1e6, 0.5e6, 5e6, "device rx ring", 0.1, 2.0);
    assert_eq!(b, "device");
    assert!(v.contains("off the model"), "{v}");
    // The device could do 20 Mpps, the tester delivers 1.
    let (b, v) = classify(20e6, 1e6, 1e6, "device", 0.1, 2.0);
    assert_eq!(b, "tester");
    assert!(v.contains("measures the tester"), "{v}");
    assert_eq!(classify(1e6, 1e6, 1.1e6, "", 0.1, 2.0).0, "close");
    // Nothing measured for the tester alone, or at the point: said in
    // words, never "close" of a NaN.
    let (b, v) = classify(1e6, 0.97e6, f64::NAN, "device", 0.1, 2.0);
    assert_eq!(b, "unknown");
    assert!(v.starts_with("not judged"), "{v}");
    let (b, v) = classify(1e6, f64::NAN, 5e6, "", 0.1, 2.0);
    assert_eq!(b, "none");
    assert!(v.starts_with("not measured"), "{v}");
    // Where the frames were lost overrides the capacities.
    let (b, v) = classify(1e6, 0.5e6, 5e6, "sink ring", 0.1, 2.0);
    assert_eq!(b, "tester");
    assert!(v.contains("sink's receive ring"), "{v}");
    assert_eq!(
        classify(1e6, 0.5e6, 5e6, "host backlog", 0.1, 2.0).0,
        "host"
    );
    // 1.5x the model, but frames waited 250 ms of a 0.5 s trial: the
    // buffer's figure, and trials of 9 s would do.
    let (b, v) = classify(1e6, 1.5e6, 5e6, "device", 50.0, 0.5);
    assert_eq!(b, "device");
    assert!(v.contains("buffer carried the trial"), "{v}");
    assert!(v.contains("250.0 ms of 0.50 s"), "{v}");
    assert!(v.contains("trials of 9 s"), "{v}");
}

#[test]
fn buffer_inflation_is_the_waits_spread_over_the_trial() {
    // Capacity 1 Mpps offered 1.5 Mpps for 1 s: the last frame waits
    // 0.5 s, the NDR trial says only C >= 1.5 / 1.5.
    let p = buffer_inflation_pct(20e3, 0.5e9 + 20e3, 1.0);
    assert!((p - 50.0).abs() < 1e-9, "{p}");
    assert_eq!(buffer_inflation_pct(30e3, 10e3, 1.0), 0.0);
    assert!(buffer_inflation_pct(1.0, 2.0, 0.0).is_nan());
    assert!(buffer_inflation_pct(f64::NAN, 2.0, 1.0).is_nan());
}

#[test]
fn only_a_ceiling_below_the_devices_failure_limits_the_search() {
    // Behind at 1.5 Mpps, the device lost frames at 0.5: the device's.
    assert!(!limited_by_tester(true, 1.5e6, 0.5e6));
    // Behind at 0.4 Mpps, the device never failed: the tester's.
    assert!(limited_by_tester(true, 0.4e6, f64::INFINITY));
    // Behind at 0.4, device failed at 0.45: the NDR between is unknown.
    assert!(limited_by_tester(true, 0.4e6, 0.45e6));
    // Never behind.
    assert!(!limited_by_tester(false, 1e6, f64::INFINITY));
}

#[test]
fn rfc9004_buffer_times() {
    // 10,000 frames arriving at 1 Mpps last 10 ms (implied); a device
    // forwarding 0.4 Mpps meanwhile sent 4,000 of them, so 6,000 were
    // held: 6 ms at the burst rate (corrected).
    let (i, c) = buffer_times(10_000.0, 1e6, Some(0.4e6));
    assert!((i - 0.010).abs() < 1e-12, "{i}");
    assert!((c - 0.006).abs() < 1e-12, "{c}");
    // A device as fast as the burst holds nothing.
    assert_eq!(buffer_times(10_000.0, 1e6, Some(2e6)).1, 0.0);
    assert!(buffer_times(10_000.0, 1e6, None).1.is_nan());
}

fn mlr_result(lower: Option<f64>, note: &str) -> SearchResult {
    let goal = DEFAULT_GOALS[0];
    SearchResult {
        kind: "ndr".into(),
        loss_allowed_pct: 0.0,
        rate_pps: lower.unwrap_or(f64::NAN),
        fail_pps: f64::NAN,
        confirmed: lower.is_some(),
        tester_limited: lower.is_none(),
        tester_ceiling_pps: 1e5,
        fail_loss_where: String::new(),
        trials: 20,
        final_trial: None,
        device: DeviceCpu::default(),
        method: Method::Mlr,
        goal: Some(GoalResult {
            goal,
            lower_pps: lower,
            upper_pps: lower.map(|l| l * 1.01),
            conditional_pps: lower,
            regular: lower.is_some(),
            decided: if lower.is_some() {
                Decided::Width
            } else {
                Decided::HostTrouble
            },
            lower_trials: 2,
            upper_trials: 2,
            note: note.into(),
        }),
        troubled: 0,
        host: HostCost::default(),
        search_s: 30.0,
    }
}

fn folded(v: Vec<SearchResult>) -> Record {
    let spec = SearchSpec {
        trial: TrialSpec::default(),
        max_pps: 1e6,
        resolution_pct: 1.0,
        pdr_loss_pct: None,
        max_trials: 20,
        ladder_steps: 0,
    };
    let v: Vec<(SearchResult, Record)> = v
        .into_iter()
        .map(|r| {
            let x = search_record(&r, &spec, "l2fwd", "64");
            (r, x)
        })
        .collect();
    fold_repeats(&v).unwrap()
}

#[test]
fn repeated_mlr_searches_fold_into_a_median_with_its_interval_and_cv() {
    let none = "not measured: the tester/host could not keep 50.0 kpps on schedule";
    let r = folded(vec![
        mlr_result(Some(100e3), ""),
        mlr_result(Some(102e3), ""),
        mlr_result(None, none),
    ]);
    assert_eq!(r.metric_f64("rate_pps"), Some(101e3));
    assert_eq!(r.metric_f64("conditional_throughput_pps"), Some(101e3));
    assert_eq!(r.metric_f64("measured_repeats"), Some(2.0));
    assert!((r.metric_f64("rate_cv_pct").unwrap() - 1.0 / 1.01).abs() < 1e-9);
    assert_eq!(r.metrics["decided"], "mixed");
    assert_eq!(r.metrics["regular"], false);
    let note = r.metrics["note"].as_str().unwrap();
    assert!(
        note.starts_with("1 of 3 searches measured nothing: not measured"),
        "{note}"
    );
    // None measured: null, never 0, and said so.
    let r = folded(vec![mlr_result(None, none), mlr_result(None, none)]);
    assert!(r.metrics["rate_pps"].is_null(), "{:?}", r.metrics);
    let note = r.metrics["note"].as_str().unwrap();
    assert!(
        note.starts_with("not measured in any of 2 searches"),
        "{note}"
    );
}

#[test]
fn the_mlr_table_says_not_measured_and_sums_up_repeats() {
    let rows: Vec<(String, SearchResult)> = vec![
        ("64".into(), mlr_result(Some(100e3), "")),
        ("64".into(), mlr_result(Some(102e3), "")),
        (
            "64".into(),
            mlr_result(None, "not measured: the host was busy"),
        ),
    ];
    let t = table(&rows);
    assert!(t.contains("not measured"), "{t}");
    // Issue 51, item 8: the goal codes meant nothing without a legend;
    // each code is spelt out once.
    assert_eq!(
        t.matches("  1f4d0l50e1w: final trial 1 s, sum 4 s, loss 0%, exceed 50%, width 1%")
            .count(),
        1,
        "{t}"
    );
    assert!(t.contains("Nf final trial N s"), "{t}");
    assert!(
        t.contains("64 B 1f4d0l50e1w: not measured: the host was busy"),
        "{t}"
    );
    assert!(
        t.contains(
            "64 B 1f4d0l50e1w over 3 searches (median [95% interval]): lower bound 101000 pps"
        ),
        "{t}"
    );
    assert!(
        t.contains("64 B: MLRsearch, 20 trials (0 not counted"),
        "{t}"
    );
}

#[test]
fn the_repeats_line_printed_nan_for_an_interval_of_one_sample() {
    // Two searches, one measured: one sample has no interval and no
    // CV; the line said "[100000, 100000], CV NaN%".
    let rows: Vec<(String, SearchResult)> = vec![
        ("64".into(), mlr_result(Some(100e3), "")),
        (
            "64".into(),
            mlr_result(None, "not measured: the host was busy"),
        ),
    ];
    let t = table(&rows);
    assert!(!t.contains("NaN") && !t.contains("nan"), "{t}");
    assert!(t.contains("lower bound 100000 pps [-, -], CV -;"), "{t}");
    assert_eq!(or_dash(f64::NAN, 0), "-");
    assert_eq!(or_dash(f64::INFINITY, 1), "-");
    assert_eq!(or_dash(1.25, 1), "1.2");
}

#[test]
fn size_lists() {
    assert_eq!(parse_size_list("rfc2544").unwrap().len(), 7);
    assert_eq!(parse_size_list("64,imix").unwrap()[1].name, "imix");
    assert!(parse_size_list("64,x").is_err());
}

/// One device's NDR read 101k, 52k or 28k pps as other work came and
/// went, and said nothing of it: the search record now gives the
/// device's own CPU per frame, its share of its CPU, the rate per
/// device CPU-second (which stays put when the raw rate halves
/// because other work took half the CPU), other work's share and a
/// flag over 5%; and says when the device's CPU was not measured.
#[test]
fn a_search_record_gives_the_devices_cpu_and_flags_a_shared_one() {
    let trial = |own_ms: f64, window_ms: f64, frames: f64, others: f64| DeviceSample {
        own_cpu_ms: Some(own_ms),
        window_ms: Some(window_ms),
        own_ns_per_frame: Some(own_ms * 1e6 / frames),
        others_pct: Some(others),
    };
    // Quiet: 100k pps with the device's whole CPU.
    let quiet: Vec<DeviceSample> = (0..5).map(|_| trial(1000.0, 1000.0, 1e5, 0.5)).collect();
    // Shared: half the CPU taken, 50k pps in half the CPU time.
    let busy: Vec<DeviceSample> = (0..5).map(|_| trial(500.0, 1000.0, 5e4, 48.0)).collect();
    let rec = |trials: &[DeviceSample], rate: f64| {
        let d = DeviceCpu::from_samples(trials.iter().copied(), trials.iter().copied());
        let mut r = Record::new("pipeline", "rfc2544-ndr");
        d.add_to(&mut r, rate);
        r
    };
    let (q, b) = (rec(&quiet, 1e5), rec(&busy, 5e4));
    let per = |r: &Record| r.metric_f64("rate_per_device_cpu_s").unwrap();
    assert!((per(&q) - 1e5).abs() < 1.0 && (per(&b) - 1e5).abs() < 1.0);
    assert_eq!(q.metrics["device_cpu_shared"], serde_json::json!(false));
    assert_eq!(b.metrics["device_cpu_shared"], serde_json::json!(true));
    assert!((b.metric_f64("device_cpu_others_pct").unwrap() - 48.0).abs() < 1e-9);
    assert!((q.metric_f64("device_cpu_ns_per_frame").unwrap() - 10_000.0).abs() < 1e-6);
    assert!(q.metrics.contains_key("device_cpu_ns_per_frame_lo"));
    // A device on another host: said, never a 0.
    let none = rec(&[DeviceSample::default()], 1e5);
    assert!(none.metrics["device_cpu_note"]
        .as_str()
        .unwrap()
        .starts_with("device CPU not measured"));
    assert!(none.metric_f64("rate_per_device_cpu_s").is_none());
}

#[test]
fn a_search_the_host_spoiled_says_so_in_its_record_its_fold_and_the_table() {
    let host = HostCost {
        spoiled: 4,
        retries: 1,
        backoffs: 4,
        waited_s: 6.5,
        unquiet: 0,
        last_trouble: None,
    };
    let spoiled = |lower| SearchResult {
        troubled: 4,
        host: host.clone(),
        ..mlr_result(lower, &host.text())
    };
    let r = folded(vec![spoiled(Some(100e3)), mlr_result(Some(101e3), "")]);
    // Summed over the repeats, not the first search's.
    assert_eq!(r.metric_f64("host_spoiled_trials"), Some(4.0));
    assert_eq!(r.metric_f64("host_backoffs"), Some(4.0));
    assert_eq!(r.metric_f64("host_backoff_wait_s"), Some(6.5));
    let note = r.metrics["note"].as_str().unwrap();
    assert!(note.starts_with("the host spoiled 4 trials"), "{note}");
    let t = table(&[("64".into(), spoiled(Some(100e3)))]);
    assert!(
        t.contains("4 not counted: the tester's or the host's trouble; the host spoiled 4, re-run after 4 back-offs of 6.5 s"),
        "{t}"
    );
    // A search the host left alone says nothing of it.
    let t = table(&[("64".into(), mlr_result(Some(100e3), ""))]);
    assert!(!t.contains("spoiled"), "{t}");
}
