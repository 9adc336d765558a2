//! Every subcommand with random argument values: the command tree and each
//! command's options are read from the binary's own clap help (`--help` of
//! each level), then each leaf is run with random values (numbers
//! including 0, negative and huge, random strings, missing values) for one
//! or two of its options. Exit code 0, 1 or 2 and no panic message; never
//! killed by a signal, except by this test's own time bound on a run that
//! the values made long (counted, not a failure). Commands that need root,
//! touch other runs' leftovers or run the whole suite are skipped.
//! PROPTEST_CASES sets the cases per command (default 2).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(3);
const SKIP: &[&str] = &["suite", "clean", "pipeline netns", "pipeline io", "help"];

fn bin() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("commbench")
}

fn help(path: &[String]) -> String {
    let out = Command::new(bin())
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
    if subs.is_empty() {
        if !path.is_empty() {
            out.push((path, options(&text)));
        }
        return;
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
    let dir = tempfile_dir();
    let mut child = Command::new(bin())
        .args(args)
        .current_dir(&dir)
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
    let _ = std::fs::remove_dir_all(&dir);
    st.map(|s| (s, text))
}

fn tempfile_dir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "commbench-fuzz-args-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn every_subcommand_with_random_arguments_exits_0_1_or_2_without_a_panic() {
    let mut all = Vec::new();
    leaves(Vec::new(), &mut all);
    assert!(all.len() >= 10, "found {} commands", all.len());
    let cases: u32 = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let killed = std::cell::Cell::new(0u32);
    for (path, opts) in &all {
        if opts.is_empty() {
            continue;
        }
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let n = opts.len();
        let strat = (0..n, value(), 0..n, value());
        let r = runner.run(&strat, |(i, v, j, w)| {
            let mut args = path.clone();
            for (k, val) in [(i, &v), (j, &w)] {
                let (name, takes) = &opts[k];
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
                prop_assert!(
                    matches!(st.code(), Some(0..=2)),
                    "{args:?}: exit {:?}\n{err}",
                    st.code()
                );
                prop_assert!(!err.contains("panicked"), "{args:?}: panic\n{err}");
            } else {
                killed.set(killed.get() + 1);
            }
            Ok(())
        });
        if let Err(e) = r {
            panic!("{}: {e}", path.join(" "));
        }
    }
    eprintln!(
        "{} commands; {} runs bounded by the test's time limit",
        all.len(),
        killed.get()
    );
}
