//! The suite keeps what it finished: records appended per step and synced,
//! a step journal, `--resume` after SIGINT and SIGKILL, one store entry per
//! suite across resumes, a lock against a second suite on the same folder,
//! and no writing through symlinks or into folders others control.
//!
//! The waits below are safety bounds on a child process (it is killed when
//! one runs out), never assertions on speed.

use crate::util::{bin_path, cb, fresh_dir, records_in_store, runs_in_store, suite_steps};
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

/// A finished `suite --quick --only core` in `out`, stored in `store`.
fn core_suite(out: &Path, store: &Path) -> std::process::Output {
    cb().args(["suite", "--quick", "--only", "core", "--out"])
        .arg(out)
        .arg("--store")
        .arg(store)
        .output()
        .unwrap()
}

fn resume_core(out: &Path, store: &Path) -> std::process::Output {
    let o = cb()
        .args(["suite", "--quick", "--only", "core", "--resume"])
        .arg(out)
        .arg("--store")
        .arg(store)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    o
}

#[test]
fn a_resume_stored_kept_records_again_when_the_stored_line_was_lost_or_the_journal_not_utf8() {
    let dir = fresh_dir("suite-replay");
    let (out, store) = (dir.join("out"), dir.join("store.db"));
    assert!(core_suite(&out, &store).status.success());
    let stored = records_in_store(&store);
    assert!(stored > 0);
    // Killed between the store's commit and the journal's "stored" line:
    // the line is missing, and resuming must not store the records again.
    let journal = out.join("suite.journal");
    let text = std::fs::read_to_string(&journal).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.contains("\"stored\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&journal, without).unwrap();
    resume_core(&out, &store);
    assert_eq!(
        records_in_store(&store),
        stored,
        "a replay duplicated records"
    );
    // A byte that is not UTF-8 in the journal changes nothing either.
    let mut bytes = std::fs::read(&journal).unwrap();
    bytes.extend_from_slice(b"{\"event\":\xff}\n");
    std::fs::write(&journal, bytes).unwrap();
    resume_core(&out, &store);
    assert_eq!(
        records_in_store(&store),
        stored,
        "a replay duplicated records"
    );
    assert_eq!(runs_in_store(&store), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_refused_store_was_journalled_as_stored_and_resume_kept_only_new_steps() {
    let dir = fresh_dir("suite-badstore");
    let out = dir.join("out");
    // A store that is not SQLite: refused, with a warning.
    let bad = dir.join("bad.db");
    std::fs::write(&bad, vec![b'x'; 8192]).unwrap();
    let o = core_suite(&out, &bad);
    assert!(o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not kept in the history store"),
        "{o:?}"
    );
    let journal = std::fs::read_to_string(out.join("suite.journal")).unwrap();
    assert!(
        !journal.contains("\"stored\""),
        "the journal says stored although the store refused: {journal}"
    );
    // Resuming with a sound store stores every kept record, once.
    let good = dir.join("good.db");
    resume_core(&out, &good);
    let measured = std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    assert_eq!(records_in_store(&good), measured);
    resume_core(&out, &good);
    assert_eq!(records_in_store(&good), measured);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[allow(unsafe_code)]
fn a_fifo_planted_as_results_or_journal_hung_resume() {
    let dir = fresh_dir("suite-fifo");
    let (out, store) = (dir.join("out"), dir.join("store.db"));
    assert!(core_suite(&out, &store).status.success());
    for f in ["suite.journal", "results.jsonl"] {
        let p = out.join(f);
        let saved = std::fs::read(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // The bound only ends a hung child; the test passes on the message.
        cb().args(["suite", "--quick", "--only", "core", "--resume"])
            .arg(&out)
            .arg("--store")
            .arg(&store)
            .timeout(Duration::from_secs(60))
            .assert()
            .code(2)
            .stderr(predicate::str::contains("a FIFO, not a regular file"));
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, saved).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sparse_two_gib_results_file_was_read_whole_on_resume() {
    let dir = fresh_dir("suite-sparse");
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    let f = std::fs::File::create(out.join("results.jsonl")).unwrap();
    f.set_len(2 << 30).unwrap();
    cb().args([
        "suite",
        "--quick",
        "--only",
        "core",
        "--no-store",
        "--resume",
    ])
    .arg(&out)
    .assert()
    .code(2)
    .stderr(predicate::str::contains("more than a suite writes"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn suite_refused_only_world_writable_folders_not_group_writable_ones() {
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("suite-group");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
    for how in ["--out", "--resume"] {
        cb().args(["suite", "--quick", "--only", "core", "--no-store", how])
            .arg(&dir)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("writable by its group"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_forged_ok_step_without_its_records_was_skipped_on_resume() {
    let dir = fresh_dir("suite-forged");
    let (out, store) = (dir.join("out"), dir.join("store.db"));
    assert!(core_suite(&out, &store).status.success());
    // Only the step's "ok" line stays; its records are gone.
    let results = out.join("results.jsonl");
    let forged: String = std::fs::read_to_string(&results)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"lab\":\"suite\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&results, forged).unwrap();
    let o = resume_core(&out, &store);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("core: its step record says ok"), "{err}");
    assert!(!err.contains("kept from"), "{err}");
    let text = std::fs::read_to_string(&results).unwrap();
    assert!(text.contains("\"lab\":\"timer\""), "core did not run again");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 50 (minor): when report.html could not be written (a full disk)
/// the suite exited before storing the run and did not say that
/// `--resume` would finish it. The run is stored first; the error says
/// how to get the page; resuming writes it.
#[test]
fn an_unwritable_report_cost_the_run_its_place_in_the_store() {
    let dir = fresh_dir("suite-report-unwritable");
    let out = dir.join("out");
    std::fs::create_dir_all(out.join("report.html")).unwrap();
    let store = dir.join("store.db");
    cb().args(["suite", "--quick", "--only", "core", "--out"])
        .arg(&out)
        .arg("--store")
        .arg(&store)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("is a folder"))
        .stderr(predicate::str::contains("--resume"));
    assert_eq!(runs_in_store(&store), 1, "the run was not stored");
    std::fs::remove_dir(out.join("report.html")).unwrap();
    cb().args(["suite", "--quick", "--only", "core", "--resume"])
        .arg(&out)
        .arg("--store")
        .arg(&store)
        .assert()
        .success();
    assert!(out.join("report.html").is_file());
    assert_eq!(runs_in_store(&store), 1, "stored twice");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `suite --only core --out D` then `suite --only pcap --out D`: exit 0,
/// and results.jsonl went from 12 core records to 9 pcap records without
/// a word. Now the second is refused and names what to do; --force
/// replaces the run.
#[test]
fn suite_out_on_a_folder_holding_another_run_was_overwritten_without_a_word() {
    let dir = fresh_dir("suite-overwrite");
    let (out, store) = (dir.join("out"), dir.join("store.db"));
    assert!(core_suite(&out, &store).status.success());
    let before = std::fs::read(out.join("results.jsonl")).unwrap();
    cb().args(["suite", "--quick", "--only", "pcap", "--no-store", "--out"])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("holds another suite run"))
        .stderr(predicate::str::contains("--resume"))
        .stderr(predicate::str::contains("new folder"))
        .stderr(predicate::str::contains("--force"));
    assert_eq!(std::fs::read(out.join("results.jsonl")).unwrap(), before);
    cb().args([
        "suite",
        "--quick",
        "--only",
        "core",
        "--no-store",
        "--force",
        "--out",
    ])
    .arg(&out)
    .assert()
    .success();
    let after = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    assert!(after.contains("\"lab\":\"timer\""), "{after}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--resume D` of a finished `--only core` folder ran the five other
/// steps; it accepted `--quick` on a default folder; and a resume that ran
/// nothing rewrote every record's environment as its own. Now the folder
/// says what its run asked for and a resume holds to it.
#[test]
fn a_resume_ran_steps_the_folder_never_asked_for_and_rewrote_their_provenance() {
    let dir = fresh_dir("suite-asked");
    let (out, store) = (dir.join("out"), dir.join("store.db"));
    assert!(core_suite(&out, &store).status.success());
    let before = std::fs::read(out.join("results.jsonl")).unwrap();
    // No --only, no --quick: the folder's own selection and preset (a
    // step added with --only on purpose would run).
    let o = cb()
        .args(["suite", "--no-store", "--resume"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("core: kept from"), "{err}");
    for other in ["ipc", "openflow", "mux", "pcap", "pipeline"] {
        assert!(!err.contains(&format!("] {other}")), "{other} ran: {err}");
    }
    // Byte for byte: every record's environment is the run's that measured it.
    assert_eq!(
        String::from_utf8_lossy(&std::fs::read(out.join("results.jsonl")).unwrap()),
        String::from_utf8_lossy(&before)
    );
    // Another preset is refused.
    cb().args(["suite", "--no-store", "--full", "--resume"])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "that run used the quick preset, not full",
        ));
    assert_eq!(std::fs::read(out.join("results.jsonl")).unwrap(), before);
    std::fs::remove_dir_all(&dir).unwrap();
}
