//! `-o FILE` everywhere: every command that takes `-o` follows the one rule
//! of [`crate::output::Rule`]: each extension its rule lists chooses that
//! format, and any other is refused (exit 2) with the list, before the
//! command runs. `timer -o out.json` once wrote the terminal table, and
//! `report -o rep.pdf` HTML under that name.

use crate::output::{check_matches, rule_for, RULES};
use crate::Cli;
use clap::CommandFactory;

/// Every (command path, clap command) with an `--output` argument.
fn commands_with_output() -> Vec<(Vec<String>, clap::Command)> {
    fn walk(
        c: &clap::Command,
        path: &mut Vec<String>,
        out: &mut Vec<(Vec<String>, clap::Command)>,
    ) {
        if c.get_arguments().any(|a| a.get_id() == "output") {
            out.push((path.clone(), c.clone()));
        }
        for s in c.get_subcommands() {
            path.push(s.get_name().to_owned());
            walk(s, path, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(&Cli::command(), &mut Vec::new(), &mut out);
    out
}

/// A command line for `path` with `-o file`: its required arguments
/// filled with a value each parses.
fn argv(path: &[String], c: &clap::Command, file: &str) -> Vec<String> {
    let mut v = vec!["commbench".to_owned()];
    v.extend(path.iter().cloned());
    let mut last = Vec::new();
    for a in c.get_arguments().filter(|a| a.is_required_set()) {
        if a.get_id() == "output" {
            continue;
        }
        let value = match a.get_id().as_str() {
            "command" => "true".to_owned(),
            "target" => "127.0.0.1:1".to_owned(),
            _ => a
                .get_possible_values()
                .first()
                .map_or_else(|| "x".to_owned(), |p| p.get_name().to_owned()),
        };
        // As many values as it takes (`--parameter-list NAME A,B`).
        let n = a.get_num_args().map_or(1, |r| r.min_values()).max(1);
        let values: Vec<String> = std::iter::once(value)
            .chain(std::iter::repeat("a,b".to_owned()))
            .take(n)
            .collect();
        if a.is_last_set() {
            last.extend(values);
        } else if a.is_positional() {
            v.extend(values);
        } else if let Some(l) = a.get_long() {
            v.push(format!("--{l}"));
            v.extend(values);
        }
    }
    v.push("-o".into());
    v.push(file.into());
    if !last.is_empty() {
        v.push("--".into());
        v.extend(last);
    }
    v
}

#[test]
fn every_command_with_o_takes_its_listed_extensions_and_refuses_any_other_with_the_list() {
    let cmds = commands_with_output();
    let names: Vec<String> = cmds.iter().map(|(p, _)| p.join(" ")).collect();
    // Every rule belongs to a command that takes -o, and the records
    // commands are many.
    for (c, _) in RULES {
        assert!(
            names.iter().any(|n| n == c),
            "{c} has a rule but no -o: {names:?}"
        );
    }
    assert!(names.len() >= 20, "{names:?}");
    for (path, c) in &cmds {
        let name = path.join(" ");
        let rule = rule_for(&name);
        for (format, _, exts) in rule.formats {
            for ext in *exts {
                let file = format!("out.{ext}");
                // The format the extension names (formats sharing an
                // extension: the first, unless --format picks another).
                let chosen = rule
                    .choose(&name, None, Some(std::path::Path::new(&file)))
                    .unwrap_or_else(|e| panic!("{name} -o {file}: {e}"));
                let first = rule
                    .formats
                    .iter()
                    .find(|f| f.2.contains(ext))
                    .map(|f| f.0)
                    .unwrap();
                assert_eq!(chosen, first, "{name} -o {file}");
                if name != "pcap gen" {
                    assert_eq!(
                        rule.choose(&name, Some(format), Some(std::path::Path::new(&file)))
                            .unwrap(),
                        *format,
                        "{name} --format {format} -o {file}"
                    );
                }
                let m = Cli::command()
                    .try_get_matches_from(argv(path, c, &file))
                    .unwrap_or_else(|e| panic!("{name} -o {file}: {e}"));
                check_matches(&m).unwrap_or_else(|e| panic!("{name} -o {file}: {e}"));
            }
        }
        for bad in ["rep.pdf", "rep.png", "out.xyz"] {
            let m = Cli::command()
                .try_get_matches_from(argv(path, c, bad))
                .unwrap_or_else(|e| panic!("{name} -o {bad}: {e}"));
            let e = check_matches(&m)
                .expect_err(&format!("{name} -o {bad} was accepted"))
                .to_string();
            assert!(
                crate::error::is_usage(&check_matches(&m).unwrap_err()),
                "{e}"
            );
            for (_, _, exts) in rule.formats {
                for ext in *exts {
                    assert!(e.contains(&format!(".{ext}")), "{name}: {e}");
                }
            }
            assert!(e.contains(&name), "{e}");
        }
    }
}

#[test]
fn a_format_that_contradicts_the_extension_is_refused_and_a_name_without_one_takes_format() {
    let m = Cli::command()
        .try_get_matches_from(["commbench", "timer", "--format", "csv", "-o", "t.json"])
        .unwrap();
    let e = check_matches(&m).unwrap_err().to_string();
    assert!(e.contains("--format csv but -o t.json"), "{e}");
    let m = Cli::command()
        .try_get_matches_from(["commbench", "timer", "--format", "json", "-o", "/dev/null"])
        .unwrap();
    check_matches(&m).unwrap();
    let rule = rule_for("timer");
    assert_eq!(
        rule.choose("timer", Some("json"), Some("/dev/null".as_ref()))
            .unwrap(),
        "json"
    );
    assert_eq!(
        rule.choose("timer", None, Some("-".as_ref())).unwrap(),
        "table"
    );
    assert_eq!(
        rule.choose("timer", None, Some("OUT.JSON".as_ref()))
            .unwrap(),
        "json"
    );
    // ab's three JSON shapes share .json; --format picks one.
    let ab = rule_for("ab");
    assert_eq!(
        ab.choose("ab", Some("bmf"), Some("x.json".as_ref()))
            .unwrap(),
        "bmf"
    );
    assert!(ab
        .choose("ab", Some("csv"), Some("x.json".as_ref()))
        .is_err());
    // pcap gen compresses as the name says; a flag saying otherwise is refused.
    let g = rule_for("pcap gen");
    assert_eq!(
        g.choose("pcap gen", None, Some("c.pcap.gz".as_ref()))
            .unwrap(),
        "gzip"
    );
    assert!(g
        .choose("pcap gen", Some("zstd"), Some("c.pcap.gz".as_ref()))
        .is_err());
}
