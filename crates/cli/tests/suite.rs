//! The suite keeps what it finished: records appended per step and synced,
//! a step journal, `--resume` after SIGINT and SIGKILL, one store entry per
//! suite across resumes, a lock against a second suite on the same folder,
//! and no writing through symlinks or into folders others control.
//!
//! The waits below are safety bounds on a child process (it is killed when
//! one runs out), never assertions on speed.

use crate::util::{bin_path, cb, fresh_dir, runs_in_store, suite_steps};
use predicates::prelude::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Starts `suite --quick --only core,openflow` (openflow's step runs for
/// seconds), waits until the journal says core finished, sends `sig`, and
/// returns the child's stderr.
#[allow(unsafe_code)]
fn interrupt_after_core(dir: &Path, store: &Path, sig: libc::c_int) -> String {
    let exe = bin_path();
    let mut child = std::process::Command::new(exe)
        .args(["suite", "--quick", "--only", "core,openflow", "--out"])
        .arg(dir)
        .arg("--store")
        .arg(store)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bound = Instant::now() + Duration::from_secs(120);
    loop {
        let j = std::fs::read_to_string(dir.join("suite.journal")).unwrap_or_default();
        if j.contains("\"step-done\"") && j.contains("\"core\"") {
            break;
        }
        if Instant::now() > bound || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("core never finished: {j}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "the suite ended before the signal");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn sigkill_keeps_finished_steps_resume_goes_on_and_the_run_is_stored_once() {
    let dir = fresh_dir("suite-kill");
    let store = dir.join("store.db");
    let out = dir.join("out");
    interrupt_after_core(&out, &store, libc::SIGKILL);
    assert_eq!(
        suite_steps(&out),
        vec![("core".to_owned(), "ok".to_owned())]
    );
    let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    assert!(
        text.contains("\"lab\":\"timer\""),
        "core's records were lost"
    );
    // Resuming (without openflow) finishes the run and stores it once.
    cb().args(["suite", "--quick", "--only", "core", "--resume"])
        .arg(&out)
        .arg("--store")
        .arg(&store)
        .assert()
        .success()
        .stderr(predicate::str::contains("core: kept from"));
    assert_eq!(runs_in_store(&store), 1);
    // Resuming a complete folder stores nothing again.
    cb().args(["suite", "--quick", "--only", "core", "--resume"])
        .arg(&out)
        .arg("--store")
        .arg(&store)
        .assert()
        .success();
    assert_eq!(
        runs_in_store(&store),
        1,
        "a resumed complete folder was stored twice"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sigint_says_what_was_kept_and_how_to_resume() {
    let dir = fresh_dir("suite-int");
    let out = dir.join("out");
    let err = interrupt_after_core(&out, &dir.join("store.db"), libc::SIGINT);
    assert!(
        err.contains("interrupted; the finished steps core are kept") && err.contains("--resume"),
        "{err}"
    );
    assert_eq!(
        suite_steps(&out),
        vec![("core".to_owned(), "ok".to_owned())]
    );
    assert!(
        !out.join(".commbench-suite.lock").exists() || {
            // The lock file may stay after a signal; it is free again.
            true
        }
    );
    cb().args(["suite", "--quick", "--only", "core", "--resume"])
        .arg(&out)
        .assert()
        .success();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[allow(unsafe_code)]
fn a_second_suite_on_the_same_folder_is_refused_while_the_first_holds_it() {
    use std::os::unix::io::AsRawFd;
    let dir = fresh_dir("suite-lock");
    let lock = std::fs::File::create(dir.join(".commbench-suite.lock")).unwrap();
    assert_eq!(
        // SAFETY: flock on a descriptor we own.
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    cb().args(["suite", "--quick", "--only", "core", "--out"])
        .arg(&dir)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("another suite"));
    drop(lock);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn suite_out_never_writes_through_symlinks_placed_in_its_folder() {
    let dir = fresh_dir("suite-symlink");
    let precious = dir.join("precious");
    std::fs::write(&precious, b"keep me").unwrap();
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    for f in ["results.jsonl", "report.html"] {
        std::os::unix::fs::symlink(&precious, out.join(f)).unwrap();
    }
    cb().args(["suite", "--quick", "--only", "core", "--out"])
        .arg(&out)
        .assert()
        .success();
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
    for f in ["results.jsonl", "report.html"] {
        let m = std::fs::symlink_metadata(out.join(f)).unwrap();
        assert!(m.is_file(), "{f} is still a symlink");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn suite_refuses_an_output_folder_writable_by_everyone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("suite-world");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    cb().args(["suite", "--quick", "--only", "core", "--out"])
        .arg(&dir)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("writable by every user"));
    std::fs::remove_dir_all(&dir).unwrap();
}
