//! The rules of `docs/architecture.md`, checked against the source tree so
//! that the page and the code cannot drift apart (rust-analyzer's
//! "invariants are tested"):
//!
//! - the dependency rules: no lab crate depends on another lab, the report,
//!   the store or the CLI; the report never on a lab or the store; the store
//!   never on a lab or the report; a command's own library (`crates/ab`) on
//!   core alone, as a lab; core on no other crate of the workspace
//!   (every manifest's `[dependencies]`, `[dev-dependencies]`,
//!   `[build-dependencies]` and target tables, read with the small parser
//!   below: the workspace has no TOML crate and these checks need none);
//! - a lab's crate is named in `crates/cli/src` only by that lab's command
//!   file (`cmd/ipc.rs` for `commbench_ipc`) and the registry (`labs.rs`),
//!   a command library only by its command file (`cmd/ab.rs`);
//! - command modules do not import each other (today's exceptions listed);
//! - a command file stays under [`COMMAND_FILE_CEILING`] lines (today's
//!   larger files listed, each at most its size of today).
//!
//! A lab is every workspace crate that is not core, the report, the store,
//! the CLI or in [`COMMAND_LIBRARIES`]; the registry test below checks that
//! each one is in `LABS`, so a new crate is classified before it passes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace root (this file is in `crates/cli/tests`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const CORE: &str = "commbench-core";
const REPORT: &str = "commbench-report";
const STORE: &str = "commbench-store";
const CLI: &str = "commbench";

/// One dependency a manifest declares: the table it sits in
/// (`dependencies`, `dev-dependencies`, `target.'cfg(unix)'.dependencies`
/// …) and the package it names (after `package = ` renames and
/// `workspace = true` lookups).
#[derive(Debug, PartialEq)]
struct Dep {
    table: String,
    key: String,
    package: String,
}

/// Drops a `#` comment that is not inside a string.
fn strip_comment(line: &str) -> &str {
    let mut in_str: Option<char> = None;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        match in_str {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q == '"' {
                    escaped = true;
                } else if c == q {
                    in_str = None;
                }
            }
            None => match c {
                '"' | '\'' => in_str = Some(c),
                '#' => return &line[..i],
                _ => {}
            },
        }
    }
    line
}

/// `[`/`{` minus `]`/`}` outside strings: a value that opens more than it
/// closes (a features array over several lines) continues on the next
/// line.
fn depth(line: &str) -> i32 {
    let mut d = 0;
    let mut in_str: Option<char> = None;
    for c in line.chars() {
        match in_str {
            Some(q) if c == q => in_str = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' => in_str = Some(c),
                '[' | '{' => d += 1,
                ']' | '}' => d -= 1,
                _ => {}
            },
        }
    }
    d
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(s)
}

/// The string value of `key = "…"` inside an inline table or a line.
fn string_field(text: &str, key: &str) -> Option<String> {
    let mut rest = text;
    while let Some(i) = rest.find(key) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + key.len()..].trim_start();
        if matches!(before, None | Some(' ' | '{' | ',' | '.')) {
            if let Some(v) = after.strip_prefix('=') {
                let v = v.trim_start();
                let q = v.chars().next()?;
                if q == '"' || q == '\'' {
                    let end = v[1..].find(q)?;
                    return Some(v[1..1 + end].to_owned());
                }
            }
        }
        rest = &rest[i + key.len()..];
    }
    None
}

/// Whether `key = true` (or `key.x = …`) appears in `text`.
fn flag_true(text: &str, key: &str) -> bool {
    text.split([',', '{', '}'])
        .map(str::trim)
        .any(|kv| kv.replace(' ', "") == format!("{key}=true"))
}

/// A dependency table's header: `dependencies`, `dev-dependencies`,
/// `build-dependencies`, `workspace.dependencies`, `target.X.dependencies`.
fn is_dep_table(header: &str) -> bool {
    header == "dependencies"
        || header.ends_with(".dependencies")
        || header.ends_with("-dependencies")
}

/// The dependencies a manifest declares. `workspace` maps a
/// `[workspace.dependencies]` key to the package it names (for
/// `x.workspace = true`); pass an empty map to read the workspace
/// manifest itself.
fn dependencies(manifest: &str, workspace: &BTreeMap<String, String>) -> Vec<Dep> {
    // Logical lines: comments dropped, a value over several lines joined.
    let mut lines = Vec::new();
    let mut open = String::new();
    for raw in manifest.lines() {
        let l = strip_comment(raw).trim();
        if l.is_empty() {
            continue;
        }
        if open.is_empty() {
            open = l.to_owned();
        } else {
            open.push(' ');
            open.push_str(l);
        }
        if depth(&open) <= 0 {
            lines.push(std::mem::take(&mut open));
        }
    }
    assert!(open.is_empty(), "unbalanced brackets: {open}");

    enum Section {
        Other,
        /// `[dependencies]`: one dependency per key.
        Deps(String),
        /// `[dependencies.NAME]`: one dependency, its fields as keys.
        One,
    }
    let mut out: Vec<Dep> = Vec::new();
    let mut one: Option<(String, String, String)> = None; // table, key, package
    let mut one_ws = false;
    let mut section = Section::Other;
    let finish = |one: &mut Option<(String, String, String)>, ws: bool, out: &mut Vec<Dep>| {
        if let Some((table, key, package)) = one.take() {
            let package = if ws {
                workspace.get(&key).cloned().unwrap_or(package)
            } else {
                package
            };
            out.push(Dep {
                table,
                key,
                package,
            });
        }
    };
    for line in lines {
        if line.starts_with('[') {
            finish(&mut one, one_ws, &mut out);
            one_ws = false;
            let header = line.trim_matches(|c| c == '[' || c == ']').trim();
            section = if is_dep_table(header) {
                Section::Deps(header.to_owned())
            } else if let Some((table, name)) =
                header.rsplit_once('.').filter(|(t, _)| is_dep_table(t))
            {
                let name = unquote(name).to_owned();
                one = Some((table.to_owned(), name.clone(), name));
                Section::One
            } else {
                Section::Other
            };
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match &section {
            Section::Other => {}
            Section::One => {
                let key = key.trim();
                if key == "package" {
                    if let Some((_, _, p)) = one.as_mut() {
                        *p = unquote(value).to_owned();
                    }
                } else if key == "workspace" && value.trim() == "true" {
                    one_ws = true;
                }
            }
            Section::Deps(table) => {
                // `name = …`, `"name" = …` or a dotted `name.workspace = true`.
                let key = key.trim();
                let (name, field) = match key.split_once('.') {
                    Some((n, f)) => (unquote(n), Some(f.trim())),
                    None => (unquote(key), None),
                };
                let package = match field {
                    Some("package") => unquote(value).to_owned(),
                    Some("workspace") if value.trim() == "true" => {
                        workspace.get(name).cloned().unwrap_or(name.to_owned())
                    }
                    Some(_) => name.to_owned(),
                    None => {
                        if let Some(p) = string_field(value, "package") {
                            p
                        } else if flag_true(value, "workspace") {
                            workspace.get(name).cloned().unwrap_or(name.to_owned())
                        } else {
                            name.to_owned()
                        }
                    }
                };
                let dep = Dep {
                    table: table.clone(),
                    key: name.to_owned(),
                    package,
                };
                if !out.contains(&dep) {
                    out.push(dep);
                }
            }
        }
    }
    finish(&mut one, one_ws, &mut out);
    out
}

/// `[package] name` of a manifest.
fn package_name(manifest: &str) -> String {
    let mut in_package = false;
    for l in manifest.lines().map(|l| strip_comment(l).trim()) {
        if l.starts_with('[') {
            in_package = l == "[package]";
        } else if in_package {
            if let Some((k, v)) = l.split_once('=') {
                if k.trim() == "name" {
                    return unquote(v).to_owned();
                }
            }
        }
    }
    panic!("a manifest without [package] name")
}

/// Every workspace crate (`crates/*`) by package name, with the workspace
/// packages it depends on (any table).
fn workspace_graph() -> BTreeMap<String, (PathBuf, BTreeSet<String>)> {
    let root_manifest = read(&root().join("Cargo.toml"));
    assert!(
        root_manifest.contains(r#"members = ["crates/*"]"#),
        "the workspace members moved: teach tests/architecture.rs where the crates are"
    );
    let ws: BTreeMap<String, String> = dependencies(&root_manifest, &BTreeMap::new())
        .into_iter()
        .filter(|d| d.table == "workspace.dependencies")
        .map(|d| (d.key, d.package))
        .collect();
    let mut crates = BTreeMap::new();
    for e in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = e.unwrap().path();
        let m = dir.join("Cargo.toml");
        if !m.exists() {
            continue;
        }
        let text = read(&m);
        crates.insert(package_name(&text), (m, dependencies(&text, &ws)));
    }
    let names: BTreeSet<String> = crates.keys().cloned().collect();
    crates
        .into_iter()
        .map(|(n, (m, deps))| {
            let inner = deps
                .into_iter()
                .map(|d| d.package)
                .filter(|p| names.contains(p))
                .collect();
            (n, (m, inner))
        })
        .collect()
}

/// Libraries of one command that are not labs (`commbench ab` runs other
/// commands' trials; it learns the labs through `&[&dyn Lab]`): on core
/// alone, like a lab, and named only by their command file.
const COMMAND_LIBRARIES: &[&str] = &["commbench-ab"];

fn is_lab(name: &str) -> bool {
    ![CORE, REPORT, STORE, CLI].contains(&name) && !COMMAND_LIBRARIES.contains(&name)
}

#[test]
fn the_manifest_reader_finds_every_form_of_a_dependency() {
    let ws: BTreeMap<String, String> = [("commbench-core".to_owned(), "commbench-core".to_owned())]
        .into_iter()
        .collect();
    let m = r#"
[package]
name = "x" # a comment
description = "not [a] table"

[dependencies]
commbench-core.workspace = true
"commbench-ipc" = { path = "../ipc" }
mux = { package = "commbench-mux", path = "../mux", features = [
    "a", # one
    "b",
] }
libc = "0.2"

[dev-dependencies.ofl]
package = "commbench-openflow"
path = "../openflow"

[dev-dependencies.commbench-store]
workspace = true

[target.'cfg(unix)'.dependencies]
commbench-pcap = { path = "../pcap" }

[build-dependencies]
# commbench-report = { path = "../report" }

[features]
dependencies = ["commbench-pipeline/x"]
"#;
    let got: Vec<(String, String)> = dependencies(m, &ws)
        .into_iter()
        .map(|d| (d.table, d.package))
        .collect();
    let want: Vec<(String, String)> = [
        ("dependencies", "commbench-core"),
        ("dependencies", "commbench-ipc"),
        ("dependencies", "commbench-mux"),
        ("dependencies", "libc"),
        ("dev-dependencies", "commbench-openflow"),
        ("dev-dependencies", "commbench-store"),
        ("target.'cfg(unix)'.dependencies", "commbench-pcap"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    assert_eq!(got, want);
    assert_eq!(package_name(m), "x");
}

#[test]
fn labs_depend_on_core_alone_and_report_store_and_core_on_no_lab() {
    let graph = workspace_graph();
    for c in [CORE, REPORT, STORE, CLI] {
        assert!(graph.contains_key(c), "no crate {c} in crates/");
    }
    let mut broken = Vec::new();
    for (name, (manifest, deps)) in &graph {
        let allowed = |d: &str| -> bool {
            match name.as_str() {
                // The CLI wires everything.
                CLI => true,
                CORE => false,
                // The report, the store, a lab or a command library.
                _ => d == CORE,
            }
        };
        for d in deps.iter().filter(|d| !allowed(d)) {
            broken.push(format!("{name} depends on {d} ({})", manifest.display()));
        }
    }
    assert!(
        broken.is_empty(),
        "docs/architecture.md's dependency rules are broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_lab_crate_is_in_the_registry() {
    let labs_rs = read(&root().join("crates/cli/src/labs.rs"));
    for name in workspace_graph().keys().filter(|n| is_lab(n)) {
        let ident = name.replace('-', "_");
        assert!(
            labs_rs.contains(&format!("&{ident}::")),
            "{name} is not core, report, store, the CLI nor in COMMAND_LIBRARIES, \
             so it is a lab, but crates/cli/src/labs.rs does not register it"
        );
    }
}

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Whether `ident` occurs in `line` as a whole identifier.
fn names(line: &str, ident: &str) -> bool {
    let is_id = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(ident).any(|(i, _)| {
        !line[..i].chars().next_back().is_some_and(is_id)
            && !line[i + ident.len()..].chars().next().is_some_and(is_id)
    })
}

#[test]
fn a_lab_is_named_only_in_its_command_file_and_the_registry() {
    let src = root().join("crates/cli/src");
    let graph = workspace_graph();
    let labs: Vec<&String> = graph.keys().filter(|n| is_lab(n)).collect();
    assert!(!labs.is_empty());
    let owned = labs
        .iter()
        .map(|l| (l.as_str(), true))
        .chain(COMMAND_LIBRARIES.iter().map(|c| (*c, false)));
    let mut broken = Vec::new();
    for file in rust_files(&src) {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = read(&file);
        for (lab, registered) in owned.clone() {
            let ident = lab.replace('-', "_");
            // Its command file, and the files of that command's own
            // submodules (`cmd/pipeline/args.rs`).
            let cmd = lab.trim_start_matches("commbench-");
            let own = rel == format!("cmd/{cmd}.rs") || rel.starts_with(&format!("cmd/{cmd}/"));
            if own || (registered && rel == "labs.rs") {
                continue;
            }
            for (n, line) in text.lines().enumerate() {
                if !line.trim_start().starts_with("//") && names(line, &ident) {
                    broken.push(format!("src/{rel}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "a lab's crate named outside its command file and labs.rs (move the code \
         into that command file or into the lab):\n{}",
        broken.join("\n")
    );
}

/// The command files (`crates/cli/src/cmd/**.rs` but `cmd/mod.rs`) by
/// their path under `cmd/` without `.rs`: `ipc`, and `pipeline/args` for a
/// submodule `cmd/pipeline/args.rs` of the pipeline command.
fn command_files() -> Vec<(String, PathBuf)> {
    let dir = root().join("crates/cli/src/cmd");
    let mut out: Vec<(String, PathBuf)> = rust_files(&dir)
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&dir).unwrap().with_extension("");
            (rel.to_string_lossy().into_owned(), p)
        })
        .filter(|(n, _)| n != "mod")
        .collect();
    out.sort();
    out
}

/// The command a command file belongs to: `pipeline` for `pipeline/args`.
fn command_of(name: &str) -> &str {
    name.split('/').next().unwrap_or(name)
}

/// Command modules that may use another command module: (user, used).
/// None: what `report`, `compare` and `suite` share is in `output.rs` and
/// the report library.
const COMMAND_IMPORTS_TODAY: &[(&str, &str)] = &[];

#[test]
fn command_modules_do_not_import_each_other() {
    let files = command_files();
    let commands: BTreeSet<&str> = files.iter().map(|(n, _)| command_of(n)).collect();
    let mut broken = Vec::new();
    for (name, path) in &files {
        let text = read(path);
        let name = command_of(name);
        for other in commands.iter().filter(|o| **o != name) {
            let used = [format!("super::{other}::"), format!("cmd::{other}::")]
                .iter()
                .any(|p| {
                    text.lines()
                        .filter(|l| !l.trim_start().starts_with("//"))
                        .any(|l| l.contains(p.as_str()))
                });
            if used && !COMMAND_IMPORTS_TODAY.contains(&(name, *other)) {
                broken.push(format!("cmd/{name}.rs uses cmd/{other}.rs"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "command modules import each other (move what they share into a library \
         or args.rs/output.rs):\n{}",
        broken.join("\n")
    );
}

/// A command file parses arguments, calls its lab and hands records to an
/// exporter; past this many lines it is running an experiment of its own,
/// which belongs in the lab (`docs/architecture.md`).
const COMMAND_FILE_CEILING: usize = 700;

/// Command files over the ceiling today, each held at most at its size
/// of today so it can only shrink. Remove an entry when its file is under
/// the ceiling; never add one (move the code into the lab instead).
const OVER_THE_CEILING_TODAY: &[(&str, usize)] = &[
    // Its experiments moved into commbench_pipeline::tester (issue 33,
    // item 1: 1,321 lines before); its clap definitions are what is left.
    ("pipeline", 716),
    // The serve/load split, the rate sweep and the httpd comparison.
    ("mux", 839),
];

#[test]
fn command_files_stay_under_the_line_ceiling() {
    let mut broken = Vec::new();
    for (name, path) in command_files() {
        let lines = read(&path).lines().count();
        let ceiling = OVER_THE_CEILING_TODAY
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(COMMAND_FILE_CEILING, |&(_, c)| c);
        if lines > ceiling {
            broken.push(format!("cmd/{name}.rs: {lines} lines, ceiling {ceiling}"));
        }
    }
    assert!(
        broken.is_empty(),
        "command files past their ceiling (an experiment growing in a command file \
         moves into its lab with a run(&Spec, &mut Recorder)):\n{}",
        broken.join("\n")
    );
}

/// With `autotests = false` a file in `crates/cli/tests` that `tests.rs`
/// does not declare would never be compiled or run: every one is a module
/// of the one test binary.
#[test]
fn every_test_file_is_a_module_of_the_one_test_binary() {
    let dir = root().join("crates/cli/tests");
    let declared = read(&dir.join("tests.rs"));
    let mut missing = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "rs") {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            if stem != "tests" && !declared.lines().any(|l| l.trim() == format!("mod {stem};")) {
                missing.push(stem);
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "crates/cli/tests files not declared in tests.rs (add `mod NAME;` there): {missing:?}"
    );
}

/// bench/ held a second implementation of the statistics (`stats.py`,
/// "computed the way commbench's compare computes them", and a private
/// `median_ci` with a Mann-Whitney table in `mux/uring_compare.py`), which
/// drifts from crates/core's. Its scripts now ask `commbench estimate` or
/// run `commbench ab`: no interval, rank or Hodges-Lehmann code of their
/// own.
#[test]
fn bench_holds_no_statistics_of_its_own() {
    let mut found = Vec::new();
    let mut stack = vec![root().join("bench")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if name != "target" {
                    stack.push(p);
                }
                continue;
            }
            if !(name.ends_with(".py") || name.ends_with(".sh")) {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let shim = name == "cbestimate.py";
            for needle in [
                "def median_ci",
                "def ratio_ci",
                "def paired_ratio_ci",
                "def hl_ratio",
                "def signed_rank",
                "math.comb(",
                "Z95",
                "from stats import",
                "stats.py",
            ] {
                // The shim's functions only call `commbench estimate`.
                let allowed = shim && needle.starts_with("def ");
                if text.contains(needle) && !allowed {
                    found.push(format!("{} holds {needle:?}", p.display()));
                }
            }
            if shim && !text.contains(r#""estimate""#) {
                found.push(format!(
                    "{} no longer calls `commbench estimate`",
                    p.display()
                ));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
