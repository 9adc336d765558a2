//! Docs = CLI: every default a document states for a flag (`--repeat`, 3
//! by default; `--threshold` (default 5%)) in docs/*.md and README.md is
//! a default the flag has: clap's, or the one its help text states for a
//! flag whose default depends on other flags. docs/mux.md said `--repeat`
//! was 3 by default while `mux --help` said `[default: 1]`.

use crate::Cli;
use clap::CommandFactory;
use std::collections::{HashMap, HashSet};

/// Each command's (path "mux", "mux load") long flags and their defaults:
/// clap's default values, and the values its help text calls the default
/// ("default: 1; with --reproduce-seed 3").
type Defaults = HashMap<String, HashMap<String, HashSet<String>>>;

fn defaults() -> Defaults {
    fn walk(c: &clap::Command, path: &str, out: &mut Defaults) {
        let mine = out.entry(path.to_owned()).or_default();
        for a in c.get_arguments() {
            let Some(long) = a.get_long() else { continue };
            let e = mine.entry(long.to_owned()).or_default();
            for d in a.get_default_values() {
                for v in d.to_string_lossy().split(',') {
                    e.insert(norm(v));
                }
            }
            let help = a
                .get_long_help()
                .or(a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            for (i, _) in help.match_indices("default") {
                // The words after "default" up to the closing bracket.
                let rest: String = help[i..].chars().take(80).collect();
                let rest = rest.split(')').next().unwrap_or("");
                for w in rest.split(|c: char| c.is_whitespace() || c == ';' || c == ':') {
                    if !w.is_empty() {
                        e.insert(norm(w));
                    }
                }
            }
        }
        for s in c.get_subcommands() {
            let p = if path.is_empty() {
                s.get_name().to_owned()
            } else {
                format!("{path} {}", s.get_name())
            };
            walk(s, &p, out);
        }
    }
    let mut out = HashMap::new();
    walk(&Cli::command(), "", &mut out);
    out
}

/// A value as documents and clap write it: without backticks, quotes, a
/// trailing % or comma, sizes in bytes (`64 KiB`, `4M`).
fn norm(v: &str) -> String {
    let v = v
        .trim()
        .trim_matches(|c| c == '`' || c == '"' || c == '\'' || c == ',' || c == '.')
        .trim_end_matches('%')
        .replace(' ', "")
        .to_ascii_lowercase();
    for (suffix, mult) in [
        ("kib", 1u64 << 10),
        ("mib", 1 << 20),
        ("gib", 1 << 30),
        ("k", 1 << 10),
        ("m", 1 << 20),
        ("g", 1 << 30),
    ] {
        if let Some(n) = v.strip_suffix(suffix).and_then(|n| n.parse::<u64>().ok()) {
            return (n * mult).to_string();
        }
    }
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() => format!("{x}"),
        _ => v,
    }
}

/// One default a document states: its file, the command last named
/// before it (`commbench mux load`: "mux load"), the flag and the value.
struct Stated {
    file: String,
    command: String,
    flag: String,
    value: String,
}

/// The command a text last names (`commbench mux --reproduce-seed`:
/// "mux"; `commbench mux load --target`: "mux load").
fn last_command(text: &str) -> String {
    let Some(i) = text.rfind("commbench ") else {
        return String::new();
    };
    let words: Vec<&str> = text[i + "commbench ".len()..]
        .split(|c: char| c.is_whitespace() || c == '`')
        .take(2)
        .filter(|w| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '-' || c == '_')
        })
        .take_while(|w| !w.starts_with('-'))
        .collect();
    words.join(" ")
}

/// Each default a document states: "`--flag …` (default X", "`--flag
/// …`, X by default".
fn stated() -> Vec<Stated> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    for e in std::fs::read_dir(root.join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("`--") {
            let after = &rest[i + 1..];
            let Some(end) = after.find('`') else { break };
            let flag: String = after[2..end]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            let tail = &after[end + 1..];
            // Within the same clause: up to 60 characters, not past a
            // sentence's end, a table cell or another flag.
            let clause: String = tail.chars().take(60).collect();
            let clause = clause
                .split(['|', '\n'])
                .next()
                .unwrap_or("")
                .split(". ")
                .next()
                .unwrap_or("")
                .split("`--")
                .next()
                .unwrap_or("");
            // Up to a bracket, semicolon or comma (not one that groups
            // digits, as in 10,000).
            let cut = |v: &str| {
                let b = v.as_bytes();
                let end = (0..b.len())
                    .find(|&j| {
                        matches!(b[j], b')' | b';')
                            || (b[j] == b','
                                && !(j > 0
                                    && b[j - 1].is_ascii_digit()
                                    && b.get(j + 1).is_some_and(u8::is_ascii_digit)))
                    })
                    .unwrap_or(b.len());
                Some(v[..end].to_owned())
            };
            let inner = &after[2..end];
            let value = if clause.starts_with(" by default") && inner.contains(' ') {
                // "`--tcp-congestion auto` by default": the value given.
                inner.split_once(' ').map(|(_, v)| v.to_owned())
            } else if let Some(k) = clause.find("(default ") {
                cut(&clause[k + "(default ".len()..])
            } else if let Some(k) = clause.find("default: ") {
                cut(&clause[k + "default: ".len()..])
            } else if let Some(k) = clause.find(" by default") {
                // "(64 KiB by default", ", 3 by default": what follows the
                // last bracket or comma, when it is a value (two words at
                // most, a digit or backticks in it).
                let head = &clause[..k];
                let v = head.rsplit(['(', ',']).next().unwrap_or(head).trim();
                (v.split_whitespace().count() <= 2
                    && (v.contains(|c: char| c.is_ascii_digit()) || v.contains('`')))
                .then(|| v.to_owned())
            } else {
                None
            };
            if let Some(v) = value {
                if !flag.is_empty() && !v.trim().is_empty() {
                    let before = &text[..text.len() - rest.len() + i];
                    out.push(Stated {
                        file: name.clone(),
                        command: last_command(before),
                        flag,
                        value: v.trim().to_owned(),
                    });
                }
            }
            rest = &after[end + 1..];
        }
    }
    out
}

#[test]
fn every_default_a_doc_states_for_a_flag_is_the_flags_default() {
    let d = defaults();
    let stated = stated();
    assert!(stated.len() >= 12, "{}", stated.len());
    let mut wrong = Vec::new();
    for st in &stated {
        // The flag of the command the text last named (or of its parent:
        // `mux` flattens its run flags), else of any command.
        let mut cmd = st.command.clone();
        let have: HashSet<String> = loop {
            if let Some(h) = d.get(&cmd).and_then(|m| m.get(&st.flag)) {
                break h.clone();
            }
            match cmd.rfind(' ') {
                Some(i) => cmd.truncate(i),
                None if !cmd.is_empty() => cmd.clear(),
                None => {
                    break d
                        .values()
                        .filter_map(|m| m.get(&st.flag))
                        .flatten()
                        .cloned()
                        .collect()
                }
            }
        };
        if have.is_empty() && !d.values().any(|m| m.contains_key(&st.flag)) {
            wrong.push(format!(
                "{}: --{} (default {}): no such flag",
                st.file, st.flag, st.value
            ));
            continue;
        }
        // "3 by default with --reproduce-seed", "itself `localhost`": a
        // word of it is the value.
        let v = st.value.trim_matches('`');
        let ok = have.contains(&norm(&v.replace(',', "")))
            || v.split_whitespace().any(|w| have.contains(&norm(w)))
            // A list (`100,10,1`): every value of it.
            || (v.contains(',') && v.split(',').all(|w| have.contains(&norm(w))));
        if !ok {
            let mut h: Vec<&String> = have.iter().collect();
            h.sort();
            wrong.push(format!(
                "{}: `commbench {}` --{} default {:?}; clap and --help say {h:?}",
                st.file, st.command, st.flag, st.value
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs and --help disagree:\n{}",
        wrong.join("\n")
    );
}

/// The check finds what it is for: docs/mux.md's "`--repeat`, 3 by
/// default" beside a `mux` whose --repeat defaulted to 1 in clap, with no
/// word of it in its help.
#[test]
fn the_docs_check_catches_a_default_the_help_does_not_have() {
    let d = defaults();
    let mux = &d["mux"]["repeat"];
    assert!(mux.contains("1") && mux.contains("3"), "{mux:?}");
    let timer = d["timer"].get("batches").cloned().unwrap_or_default();
    assert!(!timer.is_empty());
    assert_eq!(norm("64 KiB"), "65536");
    assert_eq!(norm("`5%`"), "5");
    assert_eq!(
        last_command("run `commbench mux load --target x` with"),
        "mux load"
    );
    assert_eq!(last_command("`commbench mux --reproduce-seed`"), "mux");
}
