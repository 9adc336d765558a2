//! `commbench pcap` from the outside: formats, stdin, compression, exit
//! codes for bad input, usage errors and the strict mode.
use crate::util::{bin_path, cb};
use predicates::prelude::*;
use std::path::PathBuf;

/// A temp dir removed on drop, also when the test fails.
fn tmp(_tag: &str) -> commbench_core::artifact::TempDir {
    commbench_core::artifact::TempDir::new("pcap").unwrap()
}

fn gen(path: &PathBuf, extra: &[&str]) {
    cb().args(["pcap", "gen", "--size", "512K", "--seed", "3", "-o"])
        .arg(path)
        .args(extra)
        .assert()
        .success()
        .stderr(predicate::str::contains("gen:"));
}

#[test]
fn extract_plain_gzip_zstd_and_stdin_agree() {
    let guard = tmp("agree");
    let d = guard.path().to_path_buf();
    let plain = d.join("a.pcap");
    let gz = d.join("a.pcap.gz");
    let zs = d.join("a.pcap.zst");
    gen(&plain, &[]);
    gen(&gz, &["--gzip"]);
    gen(&zs, &["--zstd"]);
    let out = |args: &[&str], stdin: Option<Vec<u8>>| {
        let mut c = cb();
        c.args(["pcap", "extract", "-q"]).args(args);
        if let Some(s) = stdin {
            c.write_stdin(s);
        }
        let o = c.assert().success().get_output().stdout.clone();
        String::from_utf8(o).unwrap()
    };
    let a = out(&[plain.to_str().unwrap()], None);
    assert!(a.starts_with("ts,caplen,len,eth_src"));
    assert!(a.lines().count() > 100);
    assert_eq!(out(&[gz.to_str().unwrap(), "--threads", "2"], None), a);
    assert_eq!(out(&[zs.to_str().unwrap(), "--threads", "1"], None), a);
    assert_eq!(out(&["-"], Some(std::fs::read(&gz).unwrap())), a);
    assert_eq!(out(&["--mmap", plain.to_str().unwrap()], None), a);
    let j = out(
        &[
            "--format",
            "jsonl",
            "--fields",
            "number,ip_src,dst_port",
            plain.to_str().unwrap(),
        ],
        None,
    );
    let first: serde_json::Value = serde_json::from_str(j.lines().next().unwrap()).unwrap();
    assert_eq!(first["number"], 1);
    drop(guard);
}

/// `cat a.pcap b.pcap | commbench pcap extract -` and `cat a.gz b.gz`: one
/// stream, the same rows as the two files, no bad-input report.
#[test]
fn extract_concatenated_captures_from_stdin() {
    let guard = tmp("cat");
    let d = guard.path().to_path_buf();
    let (a, b) = (d.join("a.pcap"), d.join("b.pcap"));
    let (agz, bgz) = (d.join("a.pcap.gz"), d.join("b.pcap.gz"));
    gen(&a, &[]);
    gen(&b, &["--nsec", "--snaplen", "96"]);
    gen(&agz, &["--gzip"]);
    gen(&bgz, &["--gzip", "--nsec", "--snaplen", "96"]);
    let run = |args: &[&str], stdin: Option<Vec<u8>>| {
        let mut c = cb();
        c.args(["pcap", "extract"]).args(args);
        if let Some(s) = stdin {
            c.write_stdin(s);
        }
        let o = c.assert().success().get_output().clone();
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(!err.contains("bad input"), "{err}");
        String::from_utf8(o.stdout).unwrap()
    };
    let want = run(&[a.to_str().unwrap(), b.to_str().unwrap()], None);
    let cat = [std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap()].concat();
    let catgz = [std::fs::read(&agz).unwrap(), std::fs::read(&bgz).unwrap()].concat();
    assert_eq!(run(&["-"], Some(cat.clone())), want);
    assert_eq!(run(&["--threads", "2", "-"], Some(cat)), want);
    assert_eq!(run(&["--threads", "2", "-"], Some(catgz.clone())), want);
    assert_eq!(run(&["--threads", "1", "-"], Some(catgz)), want);
    drop(guard);
}

#[test]
fn not_a_capture_exits_1_and_usage_errors_exit_2() {
    let guard = tmp("errors");
    let d = guard.path().to_path_buf();
    let txt = d.join("notes.txt");
    std::fs::write(&txt, "hello").unwrap();
    cb().args(["pcap", "extract"])
        .arg(&txt)
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("not a capture file"));
    cb().args(["pcap", "extract", "--fields", "ts,nonsense"])
        .arg(&txt)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown field 'nonsense'"));
    cb().args(["pcap", "extract", "--threads", "0"])
        .arg(&txt)
        .assert()
        .code(2);
    cb().args(["pcap", "extract", "--format", "parquet"])
        .arg(&txt)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("parquet"));
    cb().args(["pcap", "gen", "--size", "lots"])
        .assert()
        .code(2);
    cb().args(["pcap", "bench", "--compare-cmd", "tcpdump -r"])
        .arg(&txt)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("{}"));
    drop(guard);
}

#[test]
fn truncated_capture_is_counted_and_strict_fails() {
    let guard = tmp("trunc");
    let d = guard.path().to_path_buf();
    let p = d.join("t.pcap");
    gen(&p, &[]);
    let bytes = std::fs::read(&p).unwrap();
    let cut = d.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    cb().args(["pcap", "extract", "-o", "/dev/null"])
        .arg(&cut)
        .assert()
        .success()
        .stderr(predicate::str::contains("truncated_record=1"))
        .stderr(predicate::str::contains("byte offset"));
    cb().args(["pcap", "extract", "--strict", "-o", "/dev/null"])
        .arg(&cut)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("truncated_record"));
    drop(guard);
}

#[test]
fn bench_reports_cold_and_warm_runs() {
    let guard = tmp("bench");
    let d = guard.path().to_path_buf();
    let p = d.join("b.pcap");
    gen(&p, &[]);
    let out = cb()
        .args([
            "pcap",
            "bench",
            "--runs",
            "1",
            "--format",
            "json",
            "--compare-cmd",
            "cat {}",
        ])
        .arg(&p)
        .assert()
        .success()
        // A 512 KiB capture is under the CPU floor: said, not judged.
        .stderr(predicate::str::contains("-> too short to measure"))
        .stderr(predicate::str::contains("under the floor of 40 ms of CPU"))
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let schema_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schema/commbench.schema.json"
    );
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "schema errors: {errors:?}");
    let recs = v["records"].as_array().unwrap();
    let summaries: Vec<_> = recs.iter().filter(|r| r["test"] == "bench").collect();
    assert_eq!(summaries.len(), 4, "2 tools x 2 cache states");
    assert!(recs
        .iter()
        .any(|r| r["params"]["cache"] == "cold" && r["params"]["tool"] == "cat"));
    drop(guard);
}

/// `--format parquet` with the feature: a Parquet file, and `--output` is required.
#[cfg(feature = "parquet")]
#[test]
fn extract_parquet_file() {
    let dir = tmp("parquet");
    let cap = dir.path().join("gen.pcap");
    let out = dir.path().join("out.parquet");
    cb().args(["pcap", "gen", "--size", "256K", "-o"])
        .arg(&cap)
        .assert()
        .success();
    cb().args(["pcap", "extract", "-q", "--format", "parquet", "-o"])
        .arg(&out)
        .arg(&cap)
        .assert()
        .success();
    let bytes = std::fs::read(&out).unwrap();
    assert!(bytes.len() > 8);
    assert_eq!(&bytes[..4], b"PAR1");
    assert_eq!(&bytes[bytes.len() - 4..], b"PAR1");
    // Snappy is the default; uncompressed pages are larger.
    let plain = dir.path().join("plain.parquet");
    cb().args(["pcap", "extract", "-q", "--format", "parquet"])
        .args(["--parquet-compression", "none", "-o"])
        .arg(&plain)
        .arg(&cap)
        .assert()
        .success();
    assert!(std::fs::metadata(&plain).unwrap().len() > bytes.len() as u64);
    cb().args(["pcap", "extract", "--format", "parquet"])
        .arg(&cap)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--output FILE"));
}

/// `-o g.parquet` wrote CSV bytes into a file named .parquet: the
/// extension now names the format, and a --format that contradicts it is
/// refused.
#[cfg(feature = "parquet")]
#[test]
fn extract_to_a_parquet_name_writes_parquet_not_csv() {
    let dir = tmp("ext");
    let cap = dir.path().join("x.pcap");
    gen(&cap, &[]);
    let out = dir.path().join("g.parquet");
    cb().args(["pcap", "extract", "-q", "-o"])
        .arg(&out)
        .arg(&cap)
        .assert()
        .success();
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(&bytes[..4], b"PAR1");
    let jl = dir.path().join("g.jsonl");
    cb().args(["pcap", "extract", "-q", "-o"])
        .arg(&jl)
        .arg(&cap)
        .assert()
        .success();
    assert!(std::fs::read_to_string(&jl).unwrap().starts_with('{'));
    let bad = dir.path().join("h.parquet");
    cb().args(["pcap", "extract", "-q", "--format", "csv", "-o"])
        .arg(&bad)
        .arg(&cap)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--format csv but -o"));
    assert!(!bad.exists());
    cb().args(["pcap", "extract", "-q", "-o"])
        .arg(dir.path().join("h.json"))
        .arg(&cap)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(".jsonl"));
}

/// A missing input left an empty output file after "extract: 0 packets":
/// now the run fails before the output is created.
#[test]
fn a_missing_input_leaves_no_output_file() {
    let dir = tmp("missing");
    let out = dir.path().join("y.csv");
    cb().args(["pcap", "extract", "-o"])
        .arg(&out)
        .arg(dir.path().join("x.pcap"))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("x.pcap"))
        .stderr(predicate::str::contains("0 packets").not());
    assert!(!out.exists());
    // Nothing readable among the inputs (not a capture): no output either.
    let txt = dir.path().join("notes.txt");
    std::fs::write(&txt, "hello").unwrap();
    cb().args(["pcap", "extract", "-o"])
        .arg(&out)
        .arg(&txt)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("not a capture file"));
    assert!(!out.exists());
}

#[test]
fn extract_from_a_fifo_without_writer_says_it_waits_and_stops_on_ctrl_c() {
    let dir = std::env::temp_dir().join(format!("cbfifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("in.pcap");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        commbench_core::testing::skip("mkfifo", "coreutils' mkfifo did not run");
        return;
    }
    let child = std::process::Command::new(bin_path())
        .args(["pcap", "extract"])
        .arg(&fifo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // Ctrl-C.
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGINT), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("waiting for data on FIFO"), "{err}");
}

#[test]
fn undecoded_link_types_are_said_once_not_counted_as_bad_input() {
    // An 802.11 capture (link type 105): valid input we do not decode.
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0u8; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&105u32.to_le_bytes());
    for i in 0..3u32 {
        for v in [1000 + i, 0, 30, 30] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[0x80u8; 30]);
    }
    let dir = std::env::temp_dir().join(format!("cbwlan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("wlan.pcap");
    std::fs::write(&f, &b).unwrap();
    for strict in [false, true] {
        let mut cmd = std::process::Command::new(bin_path());
        cmd.args(["pcap", "extract"])
            .arg(&f)
            .args(["-o", "/dev/null"]);
        if strict {
            cmd.arg("--strict");
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(
            err.contains("link type 105 not decoded: 3 records, fields after caplen left empty"),
            "{err}"
        );
        assert!(!err.contains("bad input"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A pcapng of Ethernet frames, the offset of each EPB, and the bytes.
fn ng_capture(n: usize) -> (Vec<u8>, Vec<usize>) {
    let mut b = commbench_pcap::writer::PcapngBuilder::new();
    b.shb(false).idb(1, 0, None, None);
    let mut at = Vec::new();
    for i in 0..n {
        at.push(b.bytes.len());
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xb5];
        f.extend(std::iter::repeat_n(i as u8, 50));
        b.epb(0, 1_700_000_000_000_000 + i as u64, &f, f.len() as u32);
    }
    (b.bytes, at)
}

#[test]
fn pcapng_bad_block_length_is_skipped_reported_and_strict_stops() {
    // Regression (issue 13, item 4): one bad block length ended the
    // extraction with exit 0, saying nothing of what was lost.
    let guard = tmp("ngresync");
    let d = guard.path().to_path_buf();
    let (mut bytes, at) = ng_capture(40);
    bytes[at[20] + 4..at[20] + 8].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let p = d.join("bad.pcapng");
    std::fs::write(&p, &bytes).unwrap();
    let want = format!(
        "skipped {} bytes at offsets {}..{} after a bad block length",
        at[21] - at[20],
        at[20],
        at[21]
    );
    for args in [vec![], vec!["--mmap"], vec!["--threads", "2"]] {
        let out = cb()
            .args(["pcap", "extract", "--fields", "number,ts"])
            .args(&args)
            .arg(&p)
            .assert()
            .success()
            .stderr(predicate::str::contains(want.as_str()))
            .stderr(predicate::str::contains("bad_block_length=1"))
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1 + 39, "{args:?}");
        assert!(text.ends_with("39,1700000000.000039000\n"), "{text}");
    }
    // The same from standard input (length unknown).
    cb().args(["pcap", "extract", "-o", "/dev/null", "-"])
        .write_stdin(bytes.clone())
        .assert()
        .success()
        .stderr(predicate::str::contains("extract: 39 packets"))
        .stderr(predicate::str::contains(want.as_str()));
    cb().args(["pcap", "extract", "--strict", "-o", "/dev/null"])
        .arg(&p)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("bad_block_length"));
    drop(guard);
}

/// Regression (issue 25, item 15b/c): a pcap 2.2 file (caplen and len
/// swapped, as nDPI's fuzz-2021-10-13.pcap) gives every frame; unknown
/// format versions (libpcap's pcap-invalid-version-1.pcap,
/// pcapng-invalid-vers-1.pcapng) exit 1 with the version said, as tshark
/// refuses them, instead of being read with exit 0.
#[test]
fn old_versions_are_swapped_back_and_unknown_versions_exit_1() {
    use commbench_pcap::writer::{PcapBuilder, PcapngBuilder};
    let guard = tmp("versions");
    let d = guard.path().to_path_buf();
    let frame = vec![0u8; 60];
    let mut old = PcapBuilder::new(false, false, false, 65535, 1);
    old.version(2, 2);
    for i in 0..3 {
        old.record_raw(i, 0, 1000, 60, &frame);
    }
    let p = d.join("old.pcap");
    std::fs::write(&p, &old.bytes).unwrap();
    cb().args(["pcap", "extract", "-q", "--fields", "number,caplen,len"])
        .arg(&p)
        .assert()
        .success()
        .stdout("number,caplen,len\n1,60,1000\n2,60,1000\n3,60,1000\n");

    let mut v1 = PcapBuilder::new(false, false, false, 65535, 1);
    v1.version(1, 0).record(1, 0, &frame);
    let mut ng = PcapngBuilder::new();
    ng.shb_version(false, 2, 0)
        .idb(1, 65535, None, None)
        .epb(0, 1, &frame, 60);
    for (name, bytes, want) in [
        ("v1.pcap", v1.bytes, "unsupported pcap format version 1.0"),
        (
            "v2.pcapng",
            ng.bytes,
            "unsupported pcapng format version 2.0",
        ),
    ] {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        cb().args(["pcap", "extract"])
            .arg(&p)
            .assert()
            .code(1)
            .stdout(predicate::str::is_empty())
            .stderr(predicate::str::contains(want));
    }
    drop(guard);
}

/// Regression (issue 25, item 16): `pcap gen` never writes a binary capture
/// to a terminal — without `-o`, with `-o -` and with `-o /dev/stdout` under
/// a pseudo-terminal (`script` from util-linux) it is a usage error (exit
/// 2, nothing binary written); `-o -` into a pipe writes the capture to
/// standard output (it used to create a file named `-`).
#[test]
fn gen_refuses_a_terminal_stdout_and_writes_to_a_pipe() {
    let guard = tmp("gen-tty");
    let d = guard.path().to_path_buf();
    let out = cb()
        .current_dir(&d)
        .args(["pcap", "gen", "--size", "64K", "-o", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout.len() >= 64 * 1024, "{} bytes", out.stdout.len());
    assert_eq!(out.stdout[..4], [0xd4, 0xc3, 0xb2, 0xa1]);
    assert!(!d.join("-").exists(), "-o - created a file named -");

    let exe = bin_path();
    let has_script = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        commbench_core::testing::skip_part(
            "on a terminal",
            "script",
            "`script` (util-linux) is not installed",
        );
        return;
    }
    for extra in [&[][..], &["-o", "-"], &["-o", "/dev/stdout"]] {
        let cmd = format!("{} pcap gen --size 64K {}", exe.display(), extra.join(" "));
        // -e: script exits with the command's status; the pty's output
        // (stdout and stderr of the command) comes back on script's stdout.
        let o = std::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .current_dir(&d)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {text}");
        assert!(
            text.contains("refusing to write a binary capture to a terminal"),
            "{extra:?}: {text}"
        );
        assert!(
            !o.stdout.windows(4).any(|w| w == [0xd4, 0xc3, 0xb2, 0xa1]),
            "{extra:?}: a capture reached the terminal"
        );
        assert!(o.stdout.len() < 4096, "{extra:?}: {} bytes", o.stdout.len());
    }
    drop(guard);
}

/// `pcap extract nope.pcap` said "No such file or directory (os error 2):
/// No such file or directory (os error 2)": the reason once.
#[test]
fn a_missing_capture_said_its_reason_twice() {
    let o = cb()
        .args([
            "--no-store",
            "pcap",
            "extract",
            "/nonexistent-commbench/nope.pcap",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    assert!(err.contains("nope.pcap"), "{err}");
}
