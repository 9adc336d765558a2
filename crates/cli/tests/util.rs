//! What every module of the integration tests shares: the binary under
//! test, the committed JSON schema, fresh folders, and what a suite folder
//! and a results store hold. One copy each; a module keeps a helper of its
//! own only when it does something the others do not.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The `commbench` binary under test.
pub fn cb() -> Command {
    Command::cargo_bin("commbench").unwrap()
}

/// The binary's path, for children the test spawns, signals or kills
/// itself (`std::process::Command`).
pub fn bin_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin("commbench")
}

/// The committed JSON schema (`schema/commbench.schema.json`).
pub fn schema() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schema/commbench.schema.json"
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::validator_for(&s).unwrap()
}

/// Fails with every schema error and the document when `v` does not
/// validate.
pub fn assert_valid(v: &Value) {
    let errors: Vec<String> = schema().iter_errors(v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "schema errors: {errors:?}\n{v:#}");
}

/// A new, empty folder in the temp dir named after `tag`, unique within
/// this process and across processes (pid, clock and a counter). Not
/// removed on drop: the tests that use it remove it when they pass.
pub fn fresh_dir(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let d = std::env::temp_dir().join(format!(
        "cbtest-{tag}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The suite's step records in `dir/results.jsonl` as (step, status), in
/// file order; none when the file is missing, and a line still being
/// written is skipped.
pub fn suite_steps(dir: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["lab"] == "suite")
        .map(|r| {
            (
                r["params"]["step"].as_str().unwrap().to_owned(),
                r["metrics"]["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// How many runs the results store at `store` holds (`history`'s `run`
/// records).
/// How many records the store at `store` holds, over all its runs.
pub fn records_in_store(store: &Path) -> u64 {
    let out = cb()
        .args(["history", "--format", "json", "--store"])
        .arg(store)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["test"] == "run")
        .map(|r| r["metrics"]["records"].as_u64().unwrap())
        .sum()
}

pub fn runs_in_store(store: &Path) -> usize {
    let out = cb()
        .args(["history", "--format", "json", "--store"])
        .arg(store)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["test"] == "run")
        .count()
}
