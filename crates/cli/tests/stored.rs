//! Every measuring command keeps its run in the results store, whatever
//! its output format: the command tree is read from the binary's own help
//! (as `fuzz_args.rs` does), every command must be classified below (a new
//! command fails the test until it is), and each measuring one is run with
//! short arguments against a fresh `--store` and must leave one run there.
//! (The table views of `ipc --transport all` and `openflow bench` used to
//! return before the store was reached.)

use crate::util::{cb, runs_in_store};

/// Subcommand paths of the binary, from `--help` at each level.
fn tree(prefix: &[String], out: &mut Vec<String>) {
    let mut c = cb();
    c.args(prefix).arg("--help");
    let text = String::from_utf8(c.output().unwrap().stdout).unwrap();
    let Some(start) = text.find("Commands:") else {
        return;
    };
    for line in text[start..].lines().skip(1) {
        if line.trim().is_empty() || !line.starts_with("  ") {
            break;
        }
        let name = line.split_whitespace().next().unwrap().to_owned();
        if name == "help" {
            continue;
        }
        let mut p = prefix.to_vec();
        p.push(name);
        out.push(p.join(" "));
        tree(&p, out);
    }
}

enum Kind {
    /// Measures: run with these arguments, expect one stored run.
    Stored(&'static [&'static str]),
    /// Describes the tool or other runs, or writes a file: nothing to store.
    NotMeasuring,
    /// Measures, but needs a peer, a server or root namespaces: covered by
    /// its own tests (named here).
    Elsewhere(&'static str),
}

fn kind(path: &str) -> Option<Kind> {
    use Kind::*;
    Some(match path {
        "timer" => Stored(&["--batches", "10"]),
        "budget" => Stored(&["--link", "10G", "--size", "64"]),
        "delay" => Stored(&["--samples", "5", "--requests", "100"]),
        "ipc" => NotMeasuring, // a group: its subcommands measure
        "ipc reqres" => Stored(&["--transport", "all", "--count", "50", "--size", "64"]),
        "ipc stream" => Stored(&["--transport", "all", "--count", "50", "--size", "64"]),
        "reqres_loop" | "data_channel_write" => Stored(&["mt", "1", "64", "50"]),
        "mux" => Stored(&[
            "--quick",
            "--conns",
            "2",
            "--rounds",
            "5",
            "--warmup-rounds",
            "1",
            "--repeat",
            "1",
            "--timeout",
            "10",
        ]),
        "mux serve" => NotMeasuring, // a server; its load generator stores
        "mux httpd" => Stored(&[
            "--servers",
            "ours-epoll-lt",
            "--conns",
            "20",
            "--active-pct",
            "100",
            "--requests",
            "100",
            "--repeat",
            "1",
        ]),
        "mux load" => Elsewhere("tests/mux.rs split serve/load"),
        "cbench" => Elsewhere("tests/openflow.rs (needs a controller)"),
        "controller" => NotMeasuring, // a server
        "openflow" => NotMeasuring,
        "openflow bench" => Stored(&[
            "--switches",
            "1",
            "--modes",
            "throughput",
            "--loops",
            "2",
            "--ms-per-test",
            "50",
        ]),
        "pcap" => NotMeasuring,
        "pcap extract" => NotMeasuring, // its output is the fields
        "pcap gen" => NotMeasuring,
        "pcap bench" => Elsewhere("tests/pcap.rs (drops the page cache: root)"),
        "pipeline" => NotMeasuring,
        "pipeline run" => Stored(&["--packets", "20000"]),
        "pipeline rss" => Stored(&[]),
        "pipeline netns"
        | "pipeline io"
        | "pipeline trial"
        | "pipeline rfc2544"
        | "pipeline crosscheck" => Elsewhere("tests/pipeline.rs (root, namespaces it creates)"),
        "env" | "clean" | "compare" | "history" | "report" | "completions" | "man" => NotMeasuring,
        // Numbers in, an estimate out: nothing measured.
        "estimate" | "estimate median" | "estimate ratio" | "estimate paired" => NotMeasuring,
        "suite" => Elsewhere("tests/suite.rs and tests/history.rs"),
        // Adds the segment files of a run; it needs those files first.
        "merge" => {
            Elsewhere("tests/mux.rs three_segments_against_one_server_merge_into_the_exact_sums")
        }
        // Its own options end at `--`: a --format appended after the
        // command would go to the trials.
        "ab" => Elsewhere("tests/ab.rs ab_keeps_its_verdicts_in_the_store"),
        _ => return None,
    })
}

#[test]
fn every_measuring_command_stores_a_run_in_every_output_format() {
    let mut paths = Vec::new();
    tree(&[], &mut paths);
    assert!(paths.len() > 20, "{paths:?}");
    let dir = std::env::temp_dir().join(format!("cbtest-stored-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut unclassified = Vec::new();
    for path in &paths {
        let Some(k) = kind(path) else {
            unclassified.push(path.clone());
            continue;
        };
        let args = match k {
            Kind::Stored(args) => args,
            Kind::NotMeasuring => continue,
            Kind::Elsewhere(tests) => {
                assert!(!tests.is_empty(), "{path}: say where it is tested");
                continue;
            }
        };
        // The table (the command's own view) and JSON both store.
        for format in [None, Some("json")] {
            let store = dir.join(format!(
                "{}-{}.db",
                path.replace(' ', "-"),
                format.unwrap_or("table")
            ));
            let mut c = cb();
            // Before the command: the seed-compatible ones take raw arguments.
            c.arg("--store").arg(&store);
            c.args(path.split(' ')).args(args);
            if let Some(f) = format {
                if !["reqres_loop", "data_channel_write"].contains(&path.as_str()) {
                    c.args(["--format", f]);
                }
            }
            let out = c.output().unwrap();
            assert!(
                out.status.success(),
                "{path} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                runs_in_store(&store),
                1,
                "{path} ({format:?}) stored no run"
            );
            if format.is_some() && !["reqres_loop", "data_channel_write"].contains(&path.as_str()) {
                // The Lab contract: every record says the load it ran under,
                // whether it was oversubscribed and where its roles ran.
                let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
                    .unwrap_or_else(|e| panic!("{path}: not JSON: {e}"));
                let recs = doc["records"].as_array().cloned().unwrap_or_default();
                assert!(!recs.is_empty(), "{path}: no records in {doc}");
                for r in recs {
                    let missing: Vec<&str> = commbench_core::lab::ENVIRONMENT
                        .iter()
                        .copied()
                        .filter(|k| r["metrics"].get(*k).is_none())
                        .collect();
                    assert!(
                        missing.is_empty(),
                        "{path}: a {}/{} record lacks {missing:?}",
                        r["lab"],
                        r["test"]
                    );
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        unclassified.is_empty(),
        "classify these commands in tests/stored.rs: {unclassified:?}"
    );
}
