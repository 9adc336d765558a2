//! The engine against fake commands: shell scripts that write one record
//! whose value drifts from pair to pair (as a machine does) and carries a
//! known factor per side.

use super::*;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// A side whose metric `cost_ns` is `factor` × a level that changes every
/// pair (both trials of a pair share it) plus up to 255 of noise.
fn side(dir: &Path, value: &str, factor: u32) -> Side {
    let cnt = dir.join("counter");
    let script = format!(
        r#"n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}
level=$(( ((n+1)/2) % 5 + 10 ))
r=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')
v=$(( level * {factor} + r ))
echo '{{"schema_version":2,"lab":"fake","test":"t","params":{{"x":1,"side":"{value}"}},"metrics":{{"cost_ns":'$v',"other_per_s":5}}}}' > "$4""#,
        c = cnt.display()
    );
    Side::new(value, vec!["sh".into(), "-c".into(), script, "sh".into()])
}

fn spec(a: Side, b: Side) -> AbSpec {
    AbSpec {
        name: "v".into(),
        sides: [a, b],
        template: "fake {v}".into(),
        placement: Placement::Sequential(None),
        min_pairs: 10,
        max_pairs: 40,
        budget: Duration::from_secs(600),
        warmup_pairs: 1,
        seed: 1,
        threshold: 0.05,
        // The fake commands' few-ms trials of several short processes
        // would make any bound a coin toss; contamination has its own test.
        contamination: f64::INFINITY,
        contamination_scale: 0.0,
        change_spread: 0.0,
        metrics: vec!["cost_ns".into()],
        trial_timeout: Duration::from_secs(60),
        exec: None,
    }
}

#[test]
fn aa_is_no_change_and_the_orders_are_balanced() {
    let dir = TempDir::new("abtest").unwrap();
    let s = spec(side(dir.path(), "a", 1000), side(dir.path(), "a2", 1000));
    let r = run(&s, &[], &AtomicBool::new(false), &mut ()).unwrap();
    let m = r.headlines().next().unwrap();
    assert_eq!(m.metric, "cost_ns");
    assert_eq!(m.word(), "no change", "{}", export::table(&r, false));
    let (ab, ba) = r.orders();
    assert_eq!(ab, ba);
    assert_eq!(r.stop, Stop::Decided);
    // The side label is a parameter that differs; x is shared.
    let (_, diff) = &r.varied_params[0];
    assert_eq!(diff.len(), 1);
    assert_eq!(diff[0].0, "side");
}

#[test]
fn a_known_change_is_found_through_the_drift() {
    let dir = TempDir::new("abtest").unwrap();
    let mut s = spec(side(dir.path(), "old", 1000), side(dir.path(), "new", 1050));
    s.threshold = 0.01;
    let r = run(&s, &[], &AtomicBool::new(false), &mut ()).unwrap();
    let m = r.headlines().next().unwrap();
    assert_eq!(m.word(), "slower", "{}", export::table(&r, false));
    // Near the factor (a 95% interval misses the truth one run in twenty:
    // coverage is tested over many runs in core::estimate::paired).
    assert!((1.03..=1.07).contains(&m.ratio.ratio), "{:?}", m.ratio);
    assert!(m.regressed_beyond(1.0));
    // The records say the same, with the pairs they rest on.
    let recs = export::to_records(&r);
    let rec = recs
        .iter()
        .find(|x| x.params["metric"] == "cost_ns")
        .unwrap();
    assert_eq!(rec.lab, "ab");
    assert_eq!(rec.test, "fake/t");
    assert_eq!(rec.metrics["verdict"], "slower");
    assert_eq!(rec.metric_f64("pairs"), Some(r.kept() as f64));
    // BMF and github-action-benchmark carry the same interval.
    let b = export::bmf(&r, false);
    assert_eq!(
        b["fake/t"]["cost_ns.ratio"]["lower_value"].as_f64(),
        Some(m.ratio.lo)
    );
    let g = export::github(&r, export::GithubTool::Smaller, false);
    assert_eq!(g.as_array().unwrap().len(), 1);
    assert!(g[0]["extra"].as_str().unwrap().contains("slower"));
    assert_eq!(
        export::github(&r, export::GithubTool::Bigger, false)
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn a_side_that_cannot_run_is_named_in_the_warm_up() {
    let dir = TempDir::new("abtest").unwrap();
    let bad = Side::new(
        "broken",
        vec![
            "sh".into(),
            "-c".into(),
            "echo no such test >&2; exit 2".into(),
        ],
    );
    let s = spec(side(dir.path(), "a", 1000), bad);
    let e = run(&s, &[], &AtomicBool::new(false), &mut ()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("side B (broken)"), "{msg}");
    assert!(msg.contains("no such test"), "{msg}");
}

#[test]
fn a_flaky_trial_is_redone_and_counted_not_judged() {
    let dir = TempDir::new("abtest").unwrap();
    let a = side(dir.path(), "a", 1000);
    // B fails on its 4th start (after the warm-up), once.
    let flag = dir.path().join("b-starts");
    let mut b = side(dir.path(), "b", 1000);
    b.argv[2] = format!(
        "m=$(cat {f} 2>/dev/null || echo 0); m=$((m+1)); echo $m > {f}; [ $m -eq 4 ] && exit 1; {}",
        b.argv[2],
        f = flag.display()
    );
    let r = run(&spec(a, b), &[], &AtomicBool::new(false), &mut ()).unwrap();
    let (contaminated, failed) = r.redone();
    assert_eq!((contaminated, failed), (0, 1));
    let (ab, ba) = r.orders();
    assert_eq!(ab, ba);
    assert!(r.kept() >= 10);
}

#[test]
fn contaminated_pairs_are_redone_up_to_the_bound_and_said() {
    // A bound below zero calls every pair contaminated: the run redoes
    // pairs until it has redone as many as --max-pairs allows, then keeps
    // the rest, and says how many it redid.
    let dir = TempDir::new("abtest").unwrap();
    let mut s = spec(side(dir.path(), "a", 1000), side(dir.path(), "b", 1000));
    s.contamination = -1.0;
    s.min_pairs = 4;
    s.max_pairs = 4;
    let r = run(&s, &[], &AtomicBool::new(false), &mut ()).unwrap();
    assert_eq!(r.redone(), (4, 0));
    assert_eq!(r.kept(), 4);
    let t = export::table(&r, false);
    assert!(t.contains("redone: 4 contaminated"), "{t}");
}

/// Issue 51, item 8: an A/A line read "A median 10.28 ns / B median
/// 10.28 ns, 0.977× [0.951, 0.999]" with no word on which figure was the
/// paired ratio; the table names its ratio column paired and says under
/// it what each figure is, every line within 100 columns.
#[test]
fn the_aa_line_did_not_say_which_figure_is_the_paired_ratio() {
    let dir = TempDir::new("abtest").unwrap();
    let mut s = spec(side(dir.path(), "a", 1000), side(dir.path(), "b", 1000));
    s.min_pairs = 6;
    s.max_pairs = 6;
    let r = run(&s, &[], &AtomicBool::new(false), &mut ()).unwrap();
    let t = export::table(&r, true);
    assert!(t.contains("verdict") && t.contains("paired B/A"), "{t}");
    assert!(
        t.contains("paired B/A: the pairs' B/A ratios' Hodges–Lehmann median"),
        "{t}"
    );
    assert!(
        t.contains("A median, B median: each side's own median"),
        "{t}"
    );
    for l in t
        .lines()
        .filter(|l| l.starts_with("paired") || l.starts_with("A median"))
    {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
}

#[test]
fn an_interrupt_ends_the_run_with_what_it_has() {
    let dir = TempDir::new("abtest").unwrap();
    let s = spec(side(dir.path(), "a", 1000), side(dir.path(), "b", 1000));
    let stop = AtomicBool::new(true);
    let r = run(&s, &[], &stop, &mut ()).unwrap_err();
    // Interrupted before the warm-up finished: no pair, an error.
    assert!(r.to_string().contains("interrupted"), "{r}");
}

#[test]
fn a_duet_pairs_two_concurrent_trials() {
    let dir = TempDir::new("abtest").unwrap();
    let mut s = spec(side(dir.path(), "a", 1000), side(dir.path(), "b", 1000));
    s.placement = Placement::Duet([0, 0]);
    s.min_pairs = 4;
    s.max_pairs = 4;
    let r = run(&s, &[], &AtomicBool::new(false), &mut ()).unwrap();
    assert_eq!(r.kept(), 4);
    assert!(r.spec.placement.describe().starts_with("duet"));
}

#[test]
fn substitute_replaces_every_occurrence() {
    let t = vec!["{bin}".to_owned(), "--work".into(), "x{w}y{w}".into()];
    assert_eq!(substitute(&t, "w", "1"), ["{bin}", "--work", "x1y1"]);
}

/// A side of a shared-CPU duet: says it arrived (one line appended to a
/// file both sides share), waits until the other side of its pair has
/// arrived too (an even count: at most 10 s, else it fails, as a side run
/// alone would), then writes a record naming the CPUs it may use and its
/// cgroup in the CPU controller.
fn shared_side(dir: &Path, value: &str) -> Side {
    let arrivals = dir.join("arrivals");
    let script = format!(
        r#"echo {value} >> {f}
i=0; while [ $(( $(wc -l < {f}) % 2 )) -ne 0 ]; do i=$((i+1)); [ $i -gt 1000 ] && exit 1; sleep 0.01; done
cpus=$(awk '/^Cpus_allowed_list/{{print $2}}' /proc/self/status)
cg=$(grep -E '^[0-9]+:([a-z,]*,)?cpu(,[a-z,]*)?:|^0::' /proc/self/cgroup | head -1 | cut -d: -f3)
echo '{{"schema_version":2,"lab":"fake","test":"t","params":{{"cpus":"'$cpus'","cg":"'$cg'"}},"metrics":{{"cost_ns":1000}}}}' > "$4""#,
        f = arrivals.display()
    );
    Side::new(value, vec!["sh".into(), "-c".into(), script, "sh".into()])
}

#[test]
fn a_shared_duet_runs_both_sides_at_once_on_one_cpu_in_groups_of_equal_weight() {
    if let Err(e) = TreeGroup::create_weighted("abtest") {
        commbench_core::testing::skip("cgroup CPU controller", e);
        return;
    }
    let dir = TempDir::new("abtest").unwrap();
    let mut s = spec(shared_side(dir.path(), "a"), shared_side(dir.path(), "b"));
    let cpu = *commbench_core::placement::current_affinity()
        .cpus()
        .last()
        .unwrap();
    s.placement = Placement::Shared(cpu);
    s.min_pairs = 4;
    s.max_pairs = 4;
    let r = run(&s, &[], &AtomicBool::new(false), &mut ()).unwrap();
    // Every pair kept: neither side ran alone (it would have waited in
    // vain for the other and failed).
    assert_eq!(r.kept(), 4, "{}", export::table(&r, false));
    assert_eq!(r.redone(), (0, 0));
    // One CPU: both sides may use exactly it.
    let (_, common) = &r.common_params[0];
    assert_eq!(common["cpus"], serde_json::json!(cpu.to_string()));
    // Separate CPU cgroups: the children's own /proc/self/cgroup differ.
    let (_, diff) = &r.varied_params[0];
    let cg = diff.iter().find(|(n, _, _)| n == "cg").expect("cg differs");
    assert_ne!(cg.1, cg.2);
    // Equal weights, read back, on every pair; and the record says so.
    let sc = r.shared_cpu().unwrap();
    assert!(sc.separate_groups && sc.equal_weights, "{sc:?}");
    assert!(
        sc.weights == "v1 cpu.shares 1024" || sc.weights == "v2 cpu.weight 100",
        "{sc:?}"
    );
    assert!(sc.overlap_min > 0.0 && sc.overlap_min <= 1.0, "{sc:?}");
    let recs = export::to_records(&r);
    let p = &recs[0].params;
    assert!(
        p["placement"]
            .as_str()
            .unwrap()
            .starts_with(&format!("shared-CPU duet: both at once on cpu {cpu}")),
        "{p:?}"
    );
    assert_eq!(p["cpu_weight"], serde_json::json!(sc.weights));
    assert_eq!(
        recs[0].metrics["separate_cpu_groups"],
        serde_json::json!(true)
    );
    assert!(r.containment.contains("CPU weight"), "{}", r.containment);
    let t = export::table(&r, false);
    assert!(t.contains("each side in its own cgroups"), "{t}");
}

#[test]
fn a_loaded_host_keeps_its_pairs_and_a_one_sided_burst_is_still_redone() {
    let mut s = spec(Side::new("a", vec![]), Side::new("b", vec![]));
    s.contamination = 0.05;
    s.contamination_scale = CONTAMINATION_SCALE;
    // A quiet host: gaps of a fraction of a point, the absolute bound
    // decides (a 20-point burst is redone).
    let quiet = [0.001, 0.002, 0.0, 0.003, 0.001, 0.002, 0.2];
    assert_eq!(contamination_bound(&s, &quiet), 0.05);
    // A host loaded by others: every pair 6-12 points apart, the median 8;
    // a pair is redone only beyond 4 × 8 = 32 points.
    let loaded = [0.08, 0.06, 0.1, 0.07, 0.09, 0.08, 0.12, f64::NAN];
    assert!((contamination_bound(&s, &loaded) - 0.32).abs() < 1e-12);
    // Too few gaps to know the level, or the scale off: the absolute bound.
    assert_eq!(contamination_bound(&s, &loaded[..5]), 0.05);
    s.contamination_scale = 0.0;
    assert_eq!(contamination_bound(&s, &loaded), 0.05);
}

/// An exec run judges wall time and CPU one side after the other, CPU
/// alone as a shared-CPU duet (a side's wall time there holds the other's
/// turns, and a change in it reads at half its size: [`SHARED_WALL`]);
/// a printed number and a metric named with --metrics stay headlines.
#[test]
fn a_shared_duet_of_any_program_judges_its_cpu_time_not_its_wall_time() {
    let mut s = spec(Side::new("a", vec![]), Side::new("b", vec![]));
    s.metrics.clear();
    s.exec = Some(Exec::default());
    assert_eq!(s.headline_metrics(), ["wall_s", "cpu_s"]);
    s.placement = Placement::Duet([0, 1]);
    assert_eq!(s.headline_metrics(), ["wall_s", "cpu_s"]);
    s.placement = Placement::Shared(0);
    assert!(s.wall_is_shared());
    assert_eq!(s.headline_metrics(), ["cpu_s"]);
    s.exec = Some(Exec {
        ops: Some(1000),
        outputs: Vec::new(),
    });
    assert_eq!(s.headline_metrics(), ["cpu_ns_per_op"]);
    s.exec = Some(Exec {
        ops: None,
        outputs: vec![OutputMetric {
            name: "rps".into(),
            pattern: regex::Regex::new("rps=([0-9]+)").unwrap(),
            better: Better::Higher,
        }],
    });
    assert_eq!(s.headline_metrics(), ["rps", "cpu_s"]);
    s.metrics = vec!["wall_s".into()];
    assert_eq!(s.headline_metrics(), ["wall_s"]);
    // A commbench lab's records keep their own headlines in a shared duet.
    s.metrics.clear();
    s.exec = None;
    assert!(!s.wall_is_shared());
    assert!(s.headline_metrics().is_empty());
}
