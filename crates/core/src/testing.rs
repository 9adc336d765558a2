//! What a test does when something it needs is missing on this machine
//! (root, a peer program such as tshark or nginx, a kernel feature such as
//! io_uring): it calls [`skip`] and returns. A skipped test counts as
//! passed in the test runner, so [`skip`] makes the skip visible: it
//! prints `SKIPPED <test>: needs <what> (<detail>)` and, when the
//! environment variable [`SKIP_LOG_ENV`] names a file, appends one line to
//! it, which `.ci/run` sums up after the tests ("N tests skipped at run
//! time: root 14, …") and `.ci/skipped FILE` prints for anyone.
//!
//! Invariants: every test that skips at run time, whole or in part, goes
//! through this module (one line a skip, written with one `write` on a
//! file opened for appending, so tests in parallel processes never
//! interleave a line); a line is `kind<TAB>test<TAB>needs<TAB>detail<TAB>
//! file:line`, tabs and newlines inside a field turned into spaces; the
//! test is named by its thread, which the test harness (libtest, nextest)
//! names after the test. Failing to write the log fails the test: a skip
//! that cannot be counted must not pass silently.

use std::fmt::Display;
use std::io::Write;
use std::panic::Location;

/// The environment variable naming the file that skips are appended to.
pub const SKIP_LOG_ENV: &str = "COMMBENCH_SKIP_LOG";

/// Says that the running test is skipped because `needs` is missing here
/// (`root`, `tshark`, `io_uring`: the word the summary counts by), with
/// `detail` saying why or how to get it; the caller then returns.
#[track_caller]
pub fn skip(needs: &str, detail: impl Display) {
    record("skipped", &test_name(), needs, &detail.to_string());
}

/// Says that `part` of the running test is skipped (one engine of four,
/// the terminal half) because `needs` is missing here; the rest of the
/// test runs.
#[track_caller]
pub fn skip_part(part: &str, needs: &str, detail: impl Display) {
    let test = format!("{} ({part})", test_name());
    record("part", &test, needs, &detail.to_string());
}

/// Whether this process runs as root; if not, the running test is
/// skipped ([`skip`]) with `why` it needs root.
#[track_caller]
pub fn root_or_skip(why: &str) -> bool {
    let root = crate::sys::is_root();
    if !root {
        skip("root", why);
    }
    root
}

/// The running test's name: its thread's, as the test harness names it
/// (`browser::report_in_headless_chromium_…`), or `unnamed test`.
pub fn test_name() -> String {
    match std::thread::current().name() {
        Some(n) if n != "main" => n.to_owned(),
        _ => "unnamed test".to_owned(),
    }
}

/// One field of a log line: no tab or newline inside.
fn field(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

#[track_caller]
fn record(kind: &str, test: &str, needs: &str, detail: &str) {
    let at = Location::caller();
    eprintln!("SKIPPED {test}: needs {needs} ({detail})");
    let Some(path) = std::env::var_os(SKIP_LOG_ENV).filter(|p| !p.is_empty()) else {
        return;
    };
    let line = format!(
        "{kind}\t{}\t{}\t{}\t{}:{}\n",
        field(test),
        field(needs),
        field(detail),
        at.file(),
        at.line()
    );
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!(
            "{test} was skipped but {SKIP_LOG_ENV}={} cannot be written: {e}",
            std::path::Path::new(&path).display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};

    // The tests below run children (ignored tests of this binary, run by
    // name) with the variable set, so that no test changes this process's
    // environment under another.

    fn log_file(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("cbskip-{name}-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    fn run_child(test: &str, log: &Path) -> Output {
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &format!("testing::tests::{test}"),
                "--ignored",
                "--nocapture",
            ])
            .env(SKIP_LOG_ENV, log)
            .output()
            .unwrap()
    }

    #[test]
    #[ignore = "a child of a_skip_appends_one_line_naming_the_test_and_what_it_needs"]
    fn child_skips_whole_and_in_part() {
        skip("tshark", "not installed\t(apt-get install tshark)");
        skip_part("io-uring", "io_uring", "setup failed: EPERM");
    }

    #[test]
    #[ignore = "a child of skips_from_many_threads_append_whole_lines"]
    fn child_skips_from_eight_threads() {
        let threads: Vec<_> = (0..8)
            .map(|i| {
                std::thread::Builder::new()
                    .name(format!("many-{i}"))
                    .spawn(|| {
                        for _ in 0..50 {
                            skip("root", "creates network namespaces");
                        }
                    })
                    .unwrap()
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    /// Issue 34, item 11: tests whose peer was missing printed SKIPPED and
    /// counted as passed, and nothing said how many. A skip prints and
    /// appends one line naming the test, what it needs, why, and where it
    /// was called.
    #[test]
    fn a_skip_appends_one_line_naming_the_test_and_what_it_needs() {
        let p = log_file("one");
        let out = run_child("child_skips_whole_and_in_part", &p);
        assert!(out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let me = "testing::tests::child_skips_whole_and_in_part";
        assert!(
            stderr.contains(&format!(
                "SKIPPED {me}: needs tshark (not installed\t(apt-get install tshark))"
            )),
            "{stderr}"
        );
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(
            lines[0][..4],
            [
                "skipped",
                me,
                "tshark",
                "not installed (apt-get install tshark)"
            ]
        );
        assert!(
            lines[0][4].starts_with("crates/core/src/testing.rs:"),
            "{text}"
        );
        assert_eq!(
            lines[1][..4],
            [
                "part",
                &format!("{me} (io-uring)"),
                "io_uring",
                "setup failed: EPERM"
            ]
        );
        std::fs::remove_file(&p).unwrap();
    }

    /// Tests skip from many processes and threads at once: each skip is
    /// one whole line, none lost or cut.
    #[test]
    fn skips_from_many_threads_append_whole_lines() {
        let p = log_file("many");
        let out = run_child("child_skips_from_eight_threads", &p);
        assert!(out.status.success(), "{out:?}");
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 400);
        for l in text.lines() {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 5, "{l}");
            assert!(f[1].starts_with("many-") && f[2] == "root", "{l}");
        }
        std::fs::remove_file(&p).unwrap();
    }

    /// A log that cannot be written fails the test instead of losing the
    /// skip.
    #[test]
    fn a_skip_that_cannot_be_logged_fails_the_test() {
        let out = run_child(
            "child_skips_whole_and_in_part",
            Path::new("/nonexistent-commbench-dir/skips.tsv"),
        );
        assert!(!out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("cannot be written"), "{stderr}");
    }

    #[test]
    fn the_test_is_named_by_its_thread() {
        assert_eq!(
            test_name(),
            "testing::tests::the_test_is_named_by_its_thread"
        );
        assert_eq!(field("a\tb\nc"), "a b c");
    }
}
