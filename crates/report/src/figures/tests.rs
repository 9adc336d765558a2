//! The figures' unit tests: declared figures, bars, stacks, lines, reference
//! lines and colours, checked through the public functions.

use super::*;
use crate::testutil::rec;

#[test]
fn declared_figures_replace_the_guessed_plot() {
    let spec = FigureSpec {
        kind: FigureKind::Line,
        lab: "ipc",
        test: "reqres",
        title: "declared: rate over sessions",
        caption: "what it answers",
        x: "sessions",
        y: "msgs_per_s",
        series: &["transport"],
        filter: Some(|r| r.params.get("sessions").and_then(|v| v.as_u64()) != Some(99)),
        x_label: "",
        y_label: "",
        reference: None,
        more_x: "",
    };
    let recs: Vec<Record> = (1..=4)
        .map(|s| rec("reqres", s, 1000.0 * s as f64))
        .collect();
    let refs: Vec<&Record> = recs.iter().collect();
    let figs = figures_for_lab("ipc", &refs, &[spec], &[]).unwrap();
    assert_eq!(figs[0].title, "declared: rate over sessions");
    assert_eq!(figs[0].caption, "what it answers");
    assert!(!figs.iter().any(|f| f.title.contains("vs sessions")));
    // A lab that declares figures gets no guessed line, even when its
    // records fill none of them; a lab that declares none does.
    let other = FigureSpec {
        x: "nothing",
        ..spec
    };
    let figs = figures_for_lab("ipc", &refs, &[other], &[]).unwrap();
    assert!(!figs.iter().any(|f| f.title.contains("vs sessions")));
    let figs = figures_for_lab("ipc", &refs, &[], &[]).unwrap();
    assert!(figs.iter().any(|f| f.title.contains("vs sessions")));
}

#[test]
fn bars_of_repeated_runs_carry_error_bars_and_say_so() {
    let bar = FigureSpec {
        kind: FigureKind::Bar,
        lab: "ipc",
        test: "reqres",
        title: "bars",
        caption: "Rates.",
        x: "transport",
        y: "msgs_per_s",
        series: &[],
        filter: None,
        x_label: "",
        y_label: "",
        reference: None,
        more_x: "",
    };
    let with = |t: &str, v: f64, iv: Option<(f64, f64)>| {
        let mut r = Record::new("ipc", "reqres")
            .param("transport", t)
            .metric("msgs_per_s", v);
        if let Some((lo, hi)) = iv {
            r.push_metric("msgs_per_s_lo", lo);
            r.push_metric("msgs_per_s_hi", hi);
        }
        r
    };
    let recs = [
        with("shm", 100.0, Some((90.0, 120.0))),
        with("uds", 50.0, Some((45.0, 52.0))),
    ];
    let refs: Vec<&Record> = recs.iter().collect();
    let figs = declared_figures("ipc", &refs, &[bar], &[]).unwrap();
    assert!(
        figs[0].computed.contains("Error bars"),
        "{}",
        figs[0].computed
    );
    // Three strokes (whisker and two caps) per bar.
    let paths = |svg: &str| svg.matches("<polyline").count() + svg.matches("<path").count();
    let plain = [with("shm", 100.0, None), with("uds", 50.0, None)];
    let refs2: Vec<&Record> = plain.iter().collect();
    let figs2 = declared_figures("ipc", &refs2, &[bar], &[]).unwrap();
    assert!(
        figs2[0].computed.contains("No error bars"),
        "{}",
        figs2[0].computed
    );
    assert_eq!(
        paths(&figs[0].svg),
        paths(&figs2[0].svg) + 6,
        "one whisker and two caps per bar"
    );
}

#[test]
fn categorical_x_draws_bars_and_stacked_parts_add_up() {
    let bar = FigureSpec {
        kind: FigureKind::Bar,
        lab: "ipc",
        test: "reqres",
        title: "bars",
        caption: "",
        x: "transport",
        y: "msgs_per_s",
        series: &[],
        filter: None,
        x_label: "",
        y_label: "",
        reference: None,
        more_x: "",
    };
    let recs: Vec<Record> = ["shm", "uds", "shm"]
        .iter()
        .zip([100.0, 50.0, 300.0])
        .map(|(t, v)| {
            Record::new("ipc", "reqres")
                .param("transport", *t)
                .metric("msgs_per_s", v)
                .metric("cpu_a", 1.0)
                .metric("cpu_b", 2.0)
        })
        .collect();
    let refs: Vec<&Record> = recs.iter().collect();
    let figs = declared_figures("ipc", &refs, &[bar], &[]).unwrap();
    assert_eq!(figs.len(), 1);
    // Two categories, two bars, no line through them; labels drawn.
    let svg = &figs[0].svg;
    let texts: Vec<String> = svg
        .split("<text")
        .skip(1)
        .filter_map(|t| {
            t.split_once('>')
                .map(|(_, rest)| rest.split('<').next().unwrap_or("").trim().to_owned())
        })
        .collect();
    assert!(
        texts.iter().any(|t| t == "shm") && texts.iter().any(|t| t == "uds"),
        "{texts:?}"
    );
    assert!(svg.matches("<rect").count() >= 3, "{svg}");
    let stacked = FigureSpec {
        kind: FigureKind::Stacked(&["cpu_a", "cpu_b"]),
        ..bar
    };
    let figs = declared_figures("ipc", &refs, &[stacked], &[]).unwrap();
    // Parts are named in the legend and the caption, each with its value.
    let names: Vec<&str> = figs[0].legend.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["cpu_a", "cpu_b"]);
    assert!(
        figs[0]
            .computed
            .contains("shm: 3.00 (cpu_a 1.00 + cpu_b 2.00)"),
        "{}",
        figs[0].computed
    );
}

fn spec(kind: FigureKind, lab: &'static str, test: &'static str, x: &'static str) -> FigureSpec {
    FigureSpec {
        kind,
        lab,
        test,
        title: "t",
        caption: "What the figure is.",
        x,
        y: "",
        series: &[],
        filter: None,
        x_label: "",
        y_label: "",
        reference: None,
        more_x: "",
    }
}

/// The pcap CPU figure's fixed caption said "nearly the same cold and
/// warm" over bars of 0.28 s and 0.07 s; the caption now says what the
/// bars are.
#[test]
fn pcap_cpu_caption_says_the_cold_and_warm_cpu_drawn_instead_of_nearly_the_same() {
    let lab = crate::testutil::TestLab(Vec::new());
    let s = FigureSpec {
        y_label: "CPU time",
        series: &["tool"],
        ..spec(
            FigureKind::Stacked(&["user_s_median", "sys_s_median"]),
            "pcap",
            "bench",
            "cache",
        )
    };
    let r = |cache: &str, u: f64, sy: f64| {
        Record::new("pcap", "bench")
            .param("cache", cache)
            .param("tool", "commbench")
            .metric("user_s_median", u)
            .metric("sys_s_median", sy)
    };
    let recs = [r("cold", 0.2, 0.08), r("warm", 0.05, 0.02)];
    let refs: Vec<&Record> = recs.iter().collect();
    let figs = declared_figures("pcap", &refs, &[s], &[&lab]).unwrap();
    let c = &figs[0].computed;
    assert!(
        c.contains("cold: 280 ms (user CPU 200 ms + system CPU 80.0 ms)"),
        "{c}"
    );
    assert!(c.contains("cold / warm = 4.0×"), "{c}");
    assert!(c.contains("All bars: tool commbench."), "{c}");
    assert!(c.contains("no repeats"), "{c}");
    assert_eq!(figs[0].y_label, "CPU time (s)");
    assert_eq!(figs[0].x_label, "cache");
    // The numbers drawn are under the figure: the parts and the totals.
    let texts: Vec<&str> = figs[0]
        .data
        .rows
        .iter()
        .flat_map(|row| row.iter().map(|c| c.text.as_str()))
        .collect();
    assert!(
        texts.contains(&"280 ms") && texts.contains(&"70.0 ms"),
        "{texts:?}"
    );
}

/// Pipeline's run-to-completion bar (8.9 ticks) was a sliver beside
/// pipeline mode's 148 on a linear axis: past 10× the axis is
/// logarithmic and says so.
#[test]
fn bars_spanning_more_than_10x_go_on_a_log_axis_that_says_so() {
    let lab = crate::testutil::TestLab(Vec::new());
    let s = FigureSpec {
        y: "ticks_total",
        ..spec(FigureKind::Bar, "pipeline", "run", "mode")
    };
    let r = |mode: &str, t: f64| {
        Record::new("pipeline", "run")
            .param("mode", mode)
            .metric("ticks_total", t)
    };
    let recs = [r("rtc", 8.9), r("pipeline", 148.0)];
    let refs: Vec<&Record> = recs.iter().collect();
    let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
    assert_eq!(f.y_label, "TSC ticks per packet (ticks) — log scale");
    assert!(f.svg.contains("TSC ticks per packet (ticks) — log scale"));
    assert!(
        f.computed.contains("pipeline / rtc = 17×"),
        "{}",
        f.computed
    );
    let recs = [r("rtc", 20.0), r("pipeline", 148.0)];
    let refs: Vec<&Record> = recs.iter().collect();
    let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
    assert_eq!(f.y_label, "TSC ticks per packet (ticks)");
}

/// The pipeline's ticks were stacked on a log axis, where a segment's
/// height is no longer its part: stacked parts stay on a linear axis,
/// whatever the totals span.
#[test]
fn stacked_parts_are_never_drawn_on_a_log_axis() {
    let lab = crate::testutil::TestLab(Vec::new());
    let s = spec(
        FigureKind::Stacked(&["ticks_rx", "ticks_work", "ticks_tx"]),
        "pipeline",
        "run",
        "mode",
    );
    let r = |mode: &str, rx: f64, w: f64, tx: f64| {
        Record::new("pipeline", "run")
            .param("mode", mode)
            .metric("ticks_rx", rx)
            .metric("ticks_work", w)
            .metric("ticks_tx", tx)
    };
    let recs = [r("rtc", 0.8, 3.6, 4.1), r("pipeline", 50.0, 60.0, 38.0)];
    let refs: Vec<&Record> = recs.iter().collect();
    let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
    assert!(!f.y_label.contains("log scale"), "{}", f.y_label);
    assert!(!f.svg.contains("log scale"));
}

/// The RFC 2544 chart was drawn empty (an axis of -1…1 Mpps) when the
/// search measured no rate: a figure with nothing to draw says why in its
/// place.
#[test]
fn a_figure_with_nothing_to_draw_says_why_in_its_place() {
    let lab = crate::testutil::TestLab(Vec::new());
    let s = FigureSpec {
        y: "rate_mpps",
        ..spec(FigureKind::Bar, "pipeline", "rfc2544-ndr", "size")
    };
    let r = Record::new("pipeline", "rfc2544-ndr")
        .param("size", "64")
        .metric("rate_mpps", f64::NAN)
        .metric(
            "note",
            "not measured: the generator fell behind its schedule",
        );
    let figs = declared_figures("pipeline", &[&r], &[s], &[&lab]).unwrap();
    assert_eq!(figs.len(), 1);
    assert!(figs[0].svg.is_empty(), "no empty plot");
    assert_eq!(
        figs[0].computed,
        "Not drawn: none of the 1 pipeline/rfc2544-ndr record carries a number for rate_mpps \
         (not measured: the generator fell behind its schedule)."
    );
    // No record of the test at all: nothing in its place either.
    let other = Record::new("pipeline", "run").param("size", "64");
    assert!(declared_figures("pipeline", &[&other], &[s], &[&lab])
        .unwrap()
        .is_empty());
}

/// The numbers under a figure printed intervals "a – b" while every
/// command prints "[a, b]".
#[test]
fn interval_cells_read_as_brackets_like_every_command() {
    let c = super::frame::interval_cell(Some((10.26, 13.02)), "µs");
    assert!(
        c.text.starts_with('[') && c.text.ends_with(']'),
        "{}",
        c.text
    );
    assert!(c.text.contains(", ") && !c.text.contains('–'), "{}", c.text);
}

/// Reference lines a figure declares are drawn, named beside the plot
/// and in the caption, with their values among the numbers drawn.
#[test]
fn reference_lines_are_drawn_named_and_listed() {
    let lab = crate::testutil::TestLab(Vec::new());
    fn budget(_: &[&Record]) -> Vec<commbench_core::figure::Reference> {
        vec![commbench_core::figure::Reference {
            label: "10 GbE".into(),
            y: 174.0,
        }]
    }
    let s = FigureSpec {
        y: "ticks_total",
        reference: Some(budget),
        more_x: "",
        ..spec(FigureKind::Bar, "pipeline", "run", "mode")
    };
    let recs = [Record::new("pipeline", "run")
        .param("mode", "rtc")
        .metric("ticks_total", 9.0)];
    let refs: Vec<&Record> = recs.iter().collect();
    let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
    assert!(f
        .legend
        .iter()
        .any(|l| l.name == "10 GbE" && l.mark == "ref"));
    assert!(
        f.computed.contains("Dashed lines: 10 GbE 174 ticks."),
        "{}",
        f.computed
    );
    let svg_texts: Vec<&str> = f
        .svg
        .split("<text")
        .skip(1)
        .filter_map(|t| {
            t.split_once('>')
                .map(|(_, r)| r.split('<').next().unwrap_or("").trim())
        })
        .collect();
    assert!(
        svg_texts.contains(&"10 GbE"),
        "named in the margin: {svg_texts:?}"
    );
}

/// A line whose points carry intervals gets a band and says over how
/// many runs; series are named in words by what varies only.
#[test]
fn lines_with_intervals_get_bands_and_series_named_by_what_varies() {
    let lab = crate::testutil::TestLab(Vec::new());
    let s = FigureSpec {
        y: "mpps",
        series: &["mode", "size"],
        ..spec(FigureKind::Line, "pipeline", "sweep-tx-bulk", "tx_bulk")
    };
    let r = |mode: &str, b: u64, v: f64| {
        let mut r = Record::new("pipeline", "sweep-tx-bulk")
            .param("mode", mode)
            .param("size", 64)
            .param("tx_bulk", b)
            .metric("mpps", v);
        r.push_metric("mpps_lo", v * 0.9);
        r.push_metric("mpps_hi", v * 1.1);
        r.push_metric("mpps_n", 5);
        r
    };
    let recs = [
        r("rtc", 1, 10.0),
        r("rtc", 8, 15.0),
        r("rtc", 32, 20.0),
        r("pipeline", 1, 5.0),
        r("pipeline", 8, 5.5),
        r("pipeline", 32, 6.0),
    ];
    let refs: Vec<&Record> = recs.iter().collect();
    let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
    let names: Vec<&str> = f.legend.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["rtc", "pipeline"]);
    assert!(f.computed.contains("All lines: size 64."), "{}", f.computed);
    assert!(
        f.computed
            .contains("rtc: 10.0 Mpps at tx bulk 1 → 20.0 Mpps at tx bulk 32 (2.0×)"),
        "{}",
        f.computed
    );
    assert!(
        f.computed
            .contains("Bands: the 95% interval of the median over 5 runs."),
        "{}",
        f.computed
    );
    assert_eq!(f.svg.matches("<polygon").count(), 2, "one band per series");
}

#[test]
fn a_series_keeps_its_colour_across_figures() {
    let a = crate::plot::colours(&["shm".into(), "uds".into(), "tcp".into()]);
    let b = crate::plot::colours(&["tcp".into(), "uds".into()]);
    assert_eq!(a[1], b[1]);
    assert_eq!(a[2], b[0]);
    let c = crate::plot::colours(&["shm, size 128".into()]);
    assert_eq!(a[0], c[0], "the known word decides");
    let d = crate::plot::colours(&["x".into(), "x".into()]);
    assert_ne!(d[0], d[1], "two series never share a colour");
}

/// A scatter draws every record as a dot, two at one load included, with
/// no median and no line; a scatter with nothing to draw says why.
#[test]
fn a_scatter_draws_every_trial_and_says_why_when_it_has_nothing() {
    let lab = crate::testutil::TestLab(Vec::new());
    let s = FigureSpec {
        y: "loss_pct",
        series: &["dut", "size"],
        y_label: "loss ratio",
        ..spec(
            FigureKind::Scatter,
            "pipeline",
            "rfc2544-trial",
            "offered_pps",
        )
    };
    let r = |dut: &str, pps: f64, loss: f64| {
        Record::new("pipeline", "rfc2544-trial")
            .param("dut", dut)
            .param("size", "64")
            .param("offered_pps", pps)
            .metric("loss_pct", loss)
    };
    // Two trials at 100 kpps (one lost frames in a host pause), one each
    // at 50 and 200 kpps, and one of another device alone.
    let recs = [
        r("l2fwd", 100e3, 0.0),
        r("l2fwd", 100e3, 0.4),
        r("l2fwd", 50e3, 0.0),
        r("l2fwd", 200e3, 38.0),
        r("bridge", 80e3, 0.0),
    ];
    let refs: Vec<&Record> = recs.iter().collect();
    let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
    assert_eq!(f.data.rows.len(), 5, "one row per trial, no median");
    assert_eq!(f.svg.matches("<circle").count(), 5, "one dot per trial");
    let joined = FigureSpec {
        kind: FigureKind::Line,
        ..s
    };
    let l = &declared_figures("pipeline", &refs, &[joined], &[&lab]).unwrap()[0];
    assert_eq!(
        l.svg.matches("<polyline").count(),
        f.svg.matches("<polyline").count() + 1,
        "dots are not joined (the line joins l2fwd's medians)"
    );
    assert!(f.legend.iter().all(|l| l.mark == "dot"), "{:?}", f.legend);
    assert!(f.computed.contains("All dots: size 64."), "{}", f.computed);
    assert!(f.computed.contains("l2fwd: 4 trials"), "{}", f.computed);
    assert!(f.computed.contains("bridge: 1 trial at"), "{}", f.computed);
    // Records with nothing to draw: no chart, a sentence why.
    let empty = [Record::new("pipeline", "rfc2544-trial").param("dut", "l2fwd")];
    let refs: Vec<&Record> = empty.iter().collect();
    let f = &declared_figures("pipeline", &refs, &[s], &[&lab]).unwrap()[0];
    assert!(f.svg.is_empty());
    assert!(
        f.computed
            .starts_with("Nothing to draw: none of the 1 rfc2544-trial records"),
        "{}",
        f.computed
    );
    // No records of the test at all: no figure.
    assert!(declared_figures("pipeline", &[], &[s], &[&lab])
        .unwrap()
        .is_empty());
}

/// The texts an SVG draws, in order.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            t.split_once('>')
                .map(|(_, rest)| rest.split('<').next().unwrap_or("").trim().to_owned())
        })
        .collect()
}

/// The open-loop records of the mux suite: two engines at the offered
/// rates given.
fn open_loop(rates: &[f64]) -> Vec<Record> {
    let mut recs = Vec::new();
    for rate in rates {
        for (engine, base) in [("poll", 50e3), ("epoll-lt", 40e3)] {
            recs.push(
                Record::new("mux", "open")
                    .param("engine", engine)
                    .param("conns", 1000)
                    .param("rate", *rate)
                    .metric("corrected_p99_ns", base * rate / 1000.0),
            );
        }
    }
    recs
}

fn hockey_stick() -> FigureSpec {
    FigureSpec {
        y: "corrected_p99_ns",
        series: &["engine", "conns"],
        x_label: "offered rate (requests/s)",
        more_x: "commbench mux --rate-sweep 1000:16000:1000",
        ..spec(FigureKind::Line, "mux", "open", "rate")
    }
}

/// Issue 34: the C10K "hockey stick" was a line through two offered
/// rates; issue 51: seven default-suite figures drew one dot on an empty
/// 0.9–1.1 axis. Fewer than three x values make bars side by side (one
/// group per x value), with a sentence saying a curve needs three and
/// the command that measures more; three make the line again.
#[test]
fn a_line_of_fewer_than_three_x_values_is_bars_side_by_side_not_dots() {
    let two = open_loop(&[2000.0, 8000.0]);
    let refs: Vec<&Record> = two.iter().collect();
    let f = &declared_figures("mux", &refs, &[hockey_stick()], &[]).unwrap()[0];
    assert!(f.legend.iter().all(|l| l.mark == "bar"), "{:?}", f.legend);
    assert_eq!(f.svg.matches("<circle").count(), 0, "no dots");
    assert!(
        f.computed.contains(
            "Bars, not lines: a curve needs at least three values of offered rate (requests/s), \
             and these records have two (2k and 8k)."
        ),
        "{}",
        f.computed
    );
    assert!(
        f.computed.contains("All bars: conns 1000."),
        "{}",
        f.computed
    );
    assert_eq!(f.more_x, "commbench mux --rate-sweep 1000:16000:1000");
    assert_eq!(f.data.rows.len(), 4, "every point in the numbers");

    let three = open_loop(&[2000.0, 8000.0, 16000.0]);
    let refs3: Vec<&Record> = three.iter().collect();
    let l = &declared_figures("mux", &refs3, &[hockey_stick()], &[]).unwrap()[0];
    assert!(l.legend.iter().all(|l| l.mark == "line"), "{:?}", l.legend);
    assert!(!l.computed.contains("Bars, not"), "{}", l.computed);
    assert!(l.more_x.is_empty());
    // A line in a series' colour: one per engine in the line, none
    // among the dots.
    let joined = |f: &Figure| {
        f.legend
            .iter()
            .map(|l| {
                f.svg
                    .split("<polyline")
                    .skip(1)
                    .filter(|p| {
                        p.to_lowercase()
                            .contains(&format!("stroke=\"{}\"", l.colour))
                    })
                    .count()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(joined(f), [0, 0], "the bars are not joined");
    assert_eq!(joined(l), [1, 1], "one line per engine");

    // One offered rate: a bar per engine, not "nothing to draw".
    let one = open_loop(&[2000.0]);
    let refs1: Vec<&Record> = one.iter().collect();
    let d = &declared_figures("mux", &refs1, &[hockey_stick()], &[]).unwrap()[0];
    assert_eq!(d.svg.matches("<circle").count(), 0);
    assert_eq!(d.legend.len(), 2, "{:?}", d.legend);
    assert!(d.legend.iter().all(|l| l.mark == "bar"), "{:?}", d.legend);
    assert!(
        d.computed.contains("these records have one (2k)"),
        "{}",
        d.computed
    );
}

/// A line series measured at one x only used to vanish from a line
/// figure (a series needed two points); it is drawn as a single point and listed.
#[test]
fn a_line_series_of_one_point_is_drawn_not_dropped() {
    let mut recs = open_loop(&[2000.0, 8000.0, 16000.0]);
    recs.push(
        Record::new("mux", "open")
            .param("engine", "io-uring")
            .param("conns", 1000)
            .param("rate", 8000.0)
            .metric("corrected_p99_ns", 30e3),
    );
    let refs: Vec<&Record> = recs.iter().collect();
    let f = &declared_figures("mux", &refs, &[hockey_stick()], &[]).unwrap()[0];
    let names: Vec<&str> = f.legend.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["poll", "epoll-lt", "io-uring"]);
    assert!(
        f.computed
            .contains("io-uring: 30.0k at offered rate 8k requests/s."),
        "{}",
        f.computed
    );
    assert_eq!(f.data.rows.len(), 7);
}

/// The mux echo records of two overlaid runs: four engines × two lookups
/// × two runs at three round counts (sixteen series).
fn two_runs_of_mux() -> Vec<Record> {
    let mut recs = Vec::new();
    for run in ["host-a 2026-11-26T10:00", "host-a 2026-11-27T09:00"] {
        for (e, engine) in ["poll", "epoll-lt", "epoll-et", "io-uring"]
            .iter()
            .enumerate()
        {
            for (l, lookup) in ["scan", "index"].iter().enumerate() {
                for rounds in [10, 50, 100] {
                    recs.push(
                        Record::new("mux", "echo")
                            .param("engine", *engine)
                            .param("lookup", *lookup)
                            .param("conns", 1000)
                            .param("rounds", rounds)
                            .param(RUN_PARAM, run)
                            .metric(
                                "server_cpu_us_per_rt",
                                5.0 + e as f64 + l as f64 * 0.5 + f64::from(rounds) / 100.0,
                            ),
                    );
                }
            }
        }
    }
    recs
}

/// Issue 34: a twelve-entry legend of two-line names and "12 series not
/// drawn". Sixteen series are drawn as two panels of eight on the same
/// axes, split by the parameter needing the fewest panels; every series
/// is in a legend and every point in a panel's numbers; nothing is left
/// out.
#[test]
fn sixteen_series_are_panels_on_the_same_axes_not_twelve_and_series_not_drawn() {
    let s = FigureSpec {
        y: "server_cpu_us_per_rt",
        series: &["engine", "lookup", "conns"],
        title: "mux: server CPU per round trip vs rounds",
        ..spec(FigureKind::Line, "mux", "echo", "rounds")
    };
    let recs = two_runs_of_mux();
    let refs: Vec<&Record> = recs.iter().collect();
    let figs = declared_figures("mux", &refs, &[s], &[]).unwrap();
    let titles: Vec<&str> = figs.iter().map(|f| f.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "mux: server CPU per round trip vs rounds — lookup scan (panel 1 of 2)",
            "mux: server CPU per round trip vs rounds — lookup index (panel 2 of 2)"
        ]
    );
    let mut names = Vec::new();
    for f in &figs {
        assert!(f.left_out.is_empty(), "{}", f.left_out);
        assert!(f.legend.len() <= panels::PANEL_SERIES, "{:?}", f.legend);
        assert!(f.computed.contains("lookup s") || f.computed.contains("lookup i"));
        assert!(f.computed.contains("conns 1000."), "{}", f.computed);
        assert!(f.computed.contains("Drawn as panels"), "{}", f.computed);
        names.extend(f.legend.iter().map(|l| l.name.clone()));
    }
    assert_eq!(names.len(), 16, "{names:?}");
    // Named by what varies within the panel: the run and the engine, not
    // the lookup the panel is of, nor the fixed connection count.
    assert_eq!(names[0], "host-a 2026-11-26T10:00: poll");
    assert!(names
        .iter()
        .all(|n| !n.contains("scan") && !n.contains("conns")));
    let rows: usize = figs.iter().map(|f| f.data.rows.len()).sum();
    assert_eq!(rows, 48, "every point in a panel's numbers");
    // The same axes: every tick and axis label is the same in both panels.
    let ticks = |f: &Figure| {
        svg_texts(&f.svg)
            .into_iter()
            .filter(|t| !t.starts_with("mux:"))
            .collect::<Vec<_>>()
    };
    assert_eq!(ticks(&figs[0]), ticks(&figs[1]));
    assert_eq!(figs[0].y_label, figs[1].y_label);
}

/// Issue 34's twelve-entry legend was the latency ladders: one line per
/// record and summary, named by every parameter that varies anywhere in
/// the lab, the first twelve drawn. Every ladder is drawn now, in panels
/// of at most eight split by summary and by what varies, named by what
/// varies within the panel, with its numbers.
#[test]
fn latency_ladders_are_panels_with_short_names_and_never_series_not_drawn() {
    let ladder = |base: f64| serde_json::json!({"p50": base, "p90": base * 2.0, "p99": base * 5.0, "p999": base * 9.0, "p9999": base * 20.0});
    let mut recs = Vec::new();
    for rate in [2000, 4000, 8000] {
        for engine in ["poll", "epoll-lt", "epoll-et", "io-uring"] {
            for lookup in ["scan", "index"] {
                recs.push(
                    Record::new("mux", "open")
                        .param("engine", engine)
                        .param("lookup", lookup)
                        .param("conns", 1000)
                        .param("rate", rate)
                        .metric("corrected_ns", ladder(f64::from(rate)))
                        .metric("raw_ns", ladder(f64::from(rate) / 2.0)),
                );
            }
        }
    }
    // Other records of the lab, whose parameters must not name a ladder.
    recs.push(
        Record::new("mux", "echo")
            .param("engine", "poll")
            .param("rounds", 10)
            .metric("server_cpu_us_per_rt", 5.0),
    );
    let refs: Vec<&Record> = recs.iter().collect();
    let figs = figures_for_lab("mux", &refs, &[], &[]).unwrap();
    let ladders: Vec<&Figure> = figs
        .iter()
        .filter(|f| f.title.starts_with("mux: latency percentiles"))
        .collect();
    assert_eq!(
        ladders.len(),
        6,
        "{:?}",
        figs.iter().map(|f| &f.title).collect::<Vec<_>>()
    );
    assert_eq!(
        ladders[0].title,
        "mux: latency percentiles — corrected ns, rate 2000 (panel 1 of 6)"
    );
    let mut drawn = 0;
    for f in &ladders {
        assert!(f.left_out.is_empty(), "{}", f.left_out);
        assert_eq!(f.legend.len(), 8, "{:?}", f.legend);
        for l in &f.legend {
            // engine and lookup only: short enough for one line.
            assert!(l.name.len() <= 20, "{}", l.name);
            assert!(
                !l.name.contains("conns") && !l.name.contains("rounds"),
                "{}",
                l.name
            );
        }
        assert!(f.computed.contains("conns 1000"), "{}", f.computed);
        assert_eq!(f.data.rows.len(), 8);
        drawn += f.legend.len();
    }
    assert_eq!(drawn, 48, "every ladder of every record drawn");
    assert_eq!(ladders[0].legend[0].name, "poll, scan");
}

/// A caption computed "requested delay 10000 ns / requested delay 100 ns
/// = 91×": a ratio of the measured values at two requested delays, read
/// as a ratio of the requests. Bars over levels of a number get their
/// values, and no highest-over-lowest ratio.
#[test]
fn a_caption_divided_two_requested_delays() {
    let recs: Vec<Record> = [100.0_f64, 10_000.0]
        .iter()
        .map(|d| {
            Record::new("delay", "nanosleep")
                .param("requested_ns", *d)
                .metric("median_ns", d + 60_000.0 * (d / 10_000.0).max(0.01))
        })
        .collect();
    let refs: Vec<&Record> = recs.iter().collect();
    let s = FigureSpec {
        y: "median_ns",
        x_label: "requested delay (ns)",
        ..spec(FigureKind::Bar, "delay", "nanosleep", "requested_ns")
    };
    let f = &declared_figures("delay", &refs, &[s], &[]).unwrap()[0];
    assert!(!f.computed.contains(" / "), "{}", f.computed);
    assert!(f.computed.contains("requested delay"), "{}", f.computed);
}
