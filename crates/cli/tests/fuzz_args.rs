//! Every subcommand with random argument values: the command tree and each
//! command's options are read from the binary's own clap help (`--help` of
//! each level), then each command is run from a short, valid base
//! invocation (the smallest counts and durations it has, small fixture
//! files) with random values (numbers including 0, negative and huge,
//! random strings, missing values) put in for one or two of its options or
//! positional arguments. Exit code 0, 1 or 2 and no panic message; never
//! killed by a signal, except by this test's own time bound on a run that
//! the values made long (counted, not a failure). Commands that need root,
//! touch other runs' leftovers, serve until stopped or run the whole suite
//! are skipped. PROPTEST_CASES sets the cases per command (default 3).

use crate::util::{bin_path, fresh_dir};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(3);
const SKIP: &[&str] = &[
    "suite",
    "clean",
    "pipeline netns",
    "pipeline io",
    // Root, namespaces and trials of seconds each: argument errors are in
    // tests/pipeline.rs.
    "pipeline trial",
    "pipeline rfc2544",
    "pipeline crosscheck",
    "mux serve",
    "help",
];

/// A short valid run of each command: positionals and `(option, value)`.
/// `{cap}` and `{res}` are fixture files (a small capture, a result file).
fn base(path: &str) -> (Vec<&'static str>, Vec<(&'static str, Option<&'static str>)>) {
    match path {
        "timer" => (vec![], vec![("--batches", Some("10"))]),
        "budget" => (
            vec![],
            vec![("--link", Some("10G")), ("--size", Some("64"))],
        ),
        "delay" => (
            vec![],
            vec![("--samples", Some("5")), ("--requests", Some("100"))],
        ),
        "compare" => (vec!["{res}", "{res}"], vec![]),
        "report" => (vec!["{res}"], vec![("--output", Some("r.html"))]),
        "ipc reqres" | "ipc stream" => (
            vec![],
            vec![
                ("--count", Some("50")),
                ("--size", Some("64")),
                ("--sessions", Some("1")),
                ("--repeat", Some("1")),
            ],
        ),
        "reqres_loop" | "data_channel_write" => (vec!["mt", "1", "64", "50"], vec![]),
        "mux" => (
            vec![],
            vec![
                ("--quick", None),
                ("--conns", Some("2")),
                ("--rounds", Some("5")),
                ("--warmup-rounds", Some("1")),
                ("--repeat", Some("1")),
                ("--timeout", Some("2")),
            ],
        ),
        "mux load" => (
            vec![],
            vec![
                ("--target", Some("127.0.0.1:9")),
                ("--conns", Some("1")),
                ("--rounds", Some("5")),
                ("--timeout", Some("1")),
            ],
        ),
        "cbench" => (
            vec![],
            vec![
                ("--port", Some("9")),
                ("--loops", Some("2")),
                ("--ms-per-test", Some("50")),
                ("--switches", Some("1")),
                ("--mac-addresses", Some("10")),
                ("--handshake-timeout", Some("500")),
            ],
        ),
        "controller" => (
            vec![],
            vec![("--port", Some("0")), ("--duration", Some("0.3"))],
        ),
        "openflow bench" => (
            vec![],
            vec![
                ("--switches", Some("1")),
                ("--modes", Some("latency")),
                ("--variants", Some("template")),
                ("--loops", Some("2")),
                ("--ms-per-test", Some("10")),
            ],
        ),
        "pcap extract" => (vec!["{cap}"], vec![("--output", Some("x.csv"))]),
        "pcap gen" => (
            vec![],
            vec![("--size", Some("16K")), ("--output", Some("g.pcap"))],
        ),
        "pcap bench" => (
            vec!["{cap}"],
            vec![("--runs", Some("1")), ("--cache", Some("warm"))],
        ),
        "pipeline run" => (
            vec![],
            vec![("--packets", Some("1000")), ("--repeat", Some("1"))],
        ),
        "pipeline rss" => (vec![], vec![("--flows", Some("64"))]),
        _ => (vec![], vec![]),
    }
}

fn help(path: &[String]) -> String {
    let out = Command::new(bin_path())
        .args(path)
        .arg("--help")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Names listed in a help text's `Commands:` section.
fn subcommands(text: &str) -> Vec<String> {
    let Some(sec) = text.split("Commands:").nth(1) else {
        return Vec::new();
    };
    sec.lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help" && !n.starts_with('-'))
        .map(String::from)
        .collect()
}

/// `(--long, takes a value)` for each option in `Options:`.
fn options(text: &str) -> Vec<(String, bool)> {
    let Some(sec) = text.split("Options:").nth(1) else {
        return Vec::new();
    };
    sec.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            if !l.starts_with('-') {
                return None;
            }
            let words: Vec<&str> = l.split_whitespace().collect();
            let i = words.iter().position(|w| w.starts_with("--"))?;
            let name = words[i].trim_end_matches(',');
            if name == "--help" || name == "--version" {
                return None;
            }
            let takes = words.get(i + 1).is_some_and(|w| w.starts_with('<'));
            Some((name.to_string(), takes))
        })
        .collect()
}

/// A leaf command's path and its options.
type Leaf = (Vec<String>, Vec<(String, bool)>);

fn leaves(path: Vec<String>, out: &mut Vec<Leaf>) {
    if SKIP.contains(&path.join(" ").as_str()) {
        return;
    }
    let text = help(&path);
    let subs = subcommands(&text);
    let opts = options(&text);
    // A command with subcommands may also run itself (mux's harness).
    if !path.is_empty() && (subs.is_empty() || !opts.is_empty()) {
        out.push((path.clone(), opts));
    }
    for s in subs {
        if s.starts_with("__") {
            continue;
        }
        let mut p = path.clone();
        p.push(s);
        leaves(p, out);
    }
}

fn value() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        // Small valid-looking numbers, so that runs happen too.
        (1u32..8).prop_map(|v| Some(v.to_string())),
        (1u32..8).prop_map(|v| Some(v.to_string())),
        any::<i64>().prop_map(|v| Some(v.to_string())),
        prop_oneof![Just(0u64), Just(1), Just(u64::MAX), Just(1 << 40)]
            .prop_map(|v| Some(v.to_string())),
        Just(Some("18446744073709551616".to_string())),
        Just(Some("-1".to_string())),
        Just(Some("1e308".to_string())),
        "[a-z0-9,:.%-]{0,12}".prop_map(Some),
        "\\PC{0,8}".prop_map(Some),
    ]
}

/// Runs one invocation within BOUND; None when this test had to kill it.
fn run(args: &[String]) -> Option<(std::process::ExitStatus, String)> {
    let dir = fresh_dir("fuzz-args");
    run_in(args, &dir)
}

fn run_in(args: &[String], dir: &std::path::Path) -> Option<(std::process::ExitStatus, String)> {
    let mut child = Command::new(bin_path())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let mut s = String::new();
        let _ = err.take(1 << 20).read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if t0.elapsed() > BOUND {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let text = reader.join().unwrap_or_default();
    let _ = std::fs::remove_dir_all(dir);
    st.map(|s| (s, text))
}

#[test]
fn every_subcommand_with_random_arguments_exits_0_1_or_2_without_a_panic() {
    let mut all = Vec::new();
    leaves(Vec::new(), &mut all);
    assert!(all.len() >= 15, "found {} commands", all.len());
    // Fixtures: a small capture and a result file.
    let fix = fresh_dir("fuzz-args");
    let cap = fix.join("cap.pcap").display().to_string();
    let res = fix.join("res.json").display().to_string();
    for args in [
        vec!["pcap", "gen", "--size", "16K", "-o", cap.as_str()],
        vec![
            "budget",
            "--link",
            "10G",
            "--size",
            "64",
            "--format",
            "json",
            "-o",
            res.as_str(),
        ],
    ] {
        let st = Command::new(bin_path()).args(&args).status().unwrap();
        assert!(st.success(), "fixture {args:?}");
    }
    let cases: u32 = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let killed = std::cell::Cell::new(0u32);
    let exits = std::cell::RefCell::new([0u32; 3]);
    for (path, opts) in &all {
        let (pos, base_opts) = base(&path.join(" "));
        let fill = |a: &str| a.replace("{cap}", &cap).replace("{res}", &res);
        let slots = opts.len() + pos.len();
        if slots == 0 {
            continue;
        }
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let strat = (0..slots, value(), 0..slots, value());
        let r = runner.run(&strat, |(i, v, j, w)| {
            // One or two distinct slots (a repeated option is only a usage error).
            let mut picks = vec![(i, v)];
            if j != i {
                picks.push((j, w));
            }
            let mut args = path.clone();
            // Positionals: random where picked, else the base value.
            for (p, word) in pos.iter().enumerate() {
                match picks.iter().find(|(k, _)| *k == opts.len() + p) {
                    Some((_, Some(val))) => args.push(val.clone()),
                    Some((_, None)) => {}
                    None => args.push(fill(word)),
                }
            }
            let random: Vec<&(String, bool)> = picks
                .iter()
                .filter(|(k, _)| *k < opts.len())
                .map(|(k, _)| &opts[*k])
                .collect();
            for (name, val) in &base_opts {
                if random.iter().any(|(n, _)| n == name) {
                    continue;
                }
                args.push(name.to_string());
                if let Some(v) = val {
                    args.push(fill(v));
                }
            }
            for (k, val) in &picks {
                if *k >= opts.len() {
                    continue;
                }
                let (name, takes) = &opts[*k];
                args.push(name.clone());
                if *takes {
                    if let Some(val) = val {
                        args.push(val.clone());
                    }
                }
            }
            if let Some((st, err)) = run(&args) {
                prop_assert!(
                    st.signal().is_none(),
                    "{args:?}: signal {:?}\n{err}",
                    st.signal()
                );
                let code = st.code();
                prop_assert!(
                    matches!(code, Some(0..=2)),
                    "{args:?}: exit {code:?}\n{err}"
                );
                prop_assert!(!err.contains("panicked"), "{args:?}: panic\n{err}");
                exits.borrow_mut()[code.unwrap_or(0) as usize] += 1;
                if std::env::var_os("FUZZ_ARGS_VERBOSE").is_some() {
                    eprintln!("{code:?} {args:?} {}", err.lines().last().unwrap_or(""));
                }
            } else {
                killed.set(killed.get() + 1);
            }
            Ok(())
        });
        if let Err(e) = r {
            panic!("{}: {e}", path.join(" "));
        }
    }
    let _ = std::fs::remove_dir_all(&fix);
    let e = exits.borrow();
    eprintln!(
        "{} commands; exits 0/1/2: {}/{}/{}; {} runs bounded by the test's time limit",
        all.len(),
        e[0],
        e[1],
        e[2],
        killed.get()
    );
}

/// Duration arguments beyond what a deadline can hold were an overflow
/// panic (`pipeline io --duration-s 18446744073709551615`): each is a usage
/// error (exit 2) that states the allowed range.
#[test]
fn huge_duration_arguments_are_usage_errors_stating_the_range() {
    let huge = "18446744073709551615";
    for (args, range) in [
        (
            vec![
                "pipeline",
                "io",
                "--mode",
                "sink",
                "--iface",
                "lo",
                "--duration-s",
                huge,
            ],
            "1..=86400",
        ),
        (
            vec![
                "pipeline",
                "io",
                "--mode",
                "sink",
                "--iface",
                "lo",
                "--idle-ms",
                huge,
            ],
            "1..=86400000",
        ),
        (vec!["pipeline", "netns", "--timeout-s", huge], "1..=86400"),
        (vec!["controller", "--duration", "1e300"], "2592000"),
        (vec!["controller", "--duration", "inf"], "2592000"),
        (vec!["mux", "--timeout", "1e300"], "86400"),
        (
            vec![
                "mux",
                "load",
                "--target",
                "127.0.0.1:9",
                "--timeout",
                "1e19",
            ],
            "86400",
        ),
    ] {
        let out = Command::new(bin_path())
            .args(&args)
            .env("COMMBENCH_NO_STORE", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(range), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Every size argument takes the one size syntax (`controller
/// --max-buffered-in 64M` was "invalid digit found in string" although its
/// help gives the default as 64 MiB): the size parses, so the error that
/// follows is about the next, invalid argument; and a bad size says what
/// a size is.
#[test]
fn every_size_argument_takes_binary_suffixes() {
    for (args, next) in [
        (
            vec!["controller", "--max-buffered-in", "64M", "--threads", "0"],
            "--threads",
        ),
        (
            vec!["controller", "--max-buffered-in", "1g", "--threads", "0"],
            "--threads",
        ),
        (
            vec!["controller", "--max-pending-out", "2MiB", "--threads", "0"],
            "--threads",
        ),
        (
            vec!["mux", "serve", "--buf", "64k", "--engine", "nope"],
            "--engine",
        ),
        (
            vec!["mux", "--size", "1KiB", "--engine", "nope"],
            "--engine",
        ),
        (
            vec![
                "ipc", "stream", "--size", "512B", "--ring", "1m", "--count", "x",
            ],
            "--count",
        ),
        (
            vec!["pipeline", "run", "--sizes", "64,1K", "--burst", "x"],
            "--burst",
        ),
        (
            vec!["pipeline", "netns", "--size", "1k", "--burst", "x"],
            "--burst",
        ),
        (vec!["budget", "--size", "1K", "--ghz", "x"], "--ghz"),
    ] {
        let out = Command::new(bin_path())
            .args(&args)
            .env("COMMBENCH_NO_STORE", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(next), "{args:?}: {err}");
        // No complaint about the sizes themselves.
        for size_flag in args.iter().filter(|a| a.starts_with("--") && **a != next) {
            assert!(!err.contains(&format!("'{size_flag} ")), "{args:?}: {err}");
        }
    }
    // Out of range or not a size: a clear message.
    for (args, msg) in [
        (
            vec!["controller", "--max-buffered-in", "64K"],
            "1MiB..=64GiB",
        ),
        (
            vec!["controller", "--max-buffered-in", "99999999999G"],
            "too large",
        ),
        (
            vec!["mux", "serve", "--buf", "2M"],
            "--buf must be 512 B..=1 MiB",
        ),
        (vec!["mux", "--size", "1.5M"], "not a size"),
    ] {
        let out = Command::new(bin_path())
            .args(&args)
            .env("COMMBENCH_NO_STORE", "1")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}
