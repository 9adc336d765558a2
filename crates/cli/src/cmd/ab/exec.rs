//! `commbench ab` for any program: whether a command is read through its
//! records or timed as a process tree, how a command line becomes words
//! (a shell only where its syntax needs one), and `--metric NAME=REGEX`.
use super::AbArgs;
use anyhow::Result;
use commbench_ab::{Exec, OutputMetric};
use commbench_core::lab::{guess_better, Better};

/// The shell for command lines with shell syntax (None: `-N`,
/// `--shell=none`).
pub fn shell(a: &AbArgs) -> Option<&str> {
    (!a.no_shell && a.shell != "none").then_some(a.shell.as_str())
}

/// Whether a command line needs a shell: pipes, lists, background jobs,
/// redirections, expansions, globs, or a leading `VAR=value`.
fn has_shell_syntax(line: &str) -> bool {
    line.contains(|c: char| "|&;<>()$`*?~\n".contains(c))
        || line
            .split_whitespace()
            .next()
            .is_some_and(|w| w.split_once('=').is_some_and(|(k, _)| !k.contains('/')))
}

/// The words of a command: one line with shell syntax runs through
/// `SHELL -c LINE`; one plain line is split as a shell would; several
/// words (already split by the caller's shell) are taken as they are.
pub fn command_words(command: &[String], shell: Option<&str>) -> Result<Vec<String>> {
    let [one] = command else {
        return Ok(command.to_vec());
    };
    match shell {
        Some(sh) if has_shell_syntax(one) => Ok(vec![sh.to_owned(), "-c".into(), one.clone()]),
        _ => shlex::split(one).ok_or_else(|| {
            crate::usage(format!(
                "cannot split the command {one:?}: unbalanced quotes"
            ))
        }),
    }
}

/// Records (None) or exec (Some): `--exec`, `--records`, else records
/// only for commbench itself (a subcommand, or a program whose file name
/// starts with `commbench`).
pub fn mode(a: &AbArgs) -> Result<Option<Exec>> {
    let exec = if a.exec {
        true
    } else if a.records {
        false
    } else {
        let w = super::words(&a.command)?;
        let first_value = a
            .list
            .get(1)
            .and_then(|v| v.split(',').next())
            .unwrap_or_default();
        let name = a.list.first().map(String::as_str).unwrap_or_default();
        let first = commbench_ab::substitute(&w, name, first_value)
            .into_iter()
            .next()
            .unwrap_or_default();
        let file = std::path::Path::new(&first)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        !(super::is_subcommand(&first) || file.starts_with("commbench"))
    };
    if !exec {
        if a.ops.is_some() || !a.metric.is_empty() {
            return Err(crate::usage(
                "--ops and --metric time a program as a process tree: add --exec (this command is read through its records)",
            ));
        }
        return Ok(None);
    }
    let outputs = a
        .metric
        .iter()
        .map(|m| parse_metric(m))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(Exec {
        ops: a.ops,
        outputs,
    }))
}

/// The metrics ab itself makes of an exec trial: a `--metric` may not
/// take their names.
const OWN: [&str; 9] = [
    "wall_s",
    "cpu_s",
    "user_s",
    "sys_s",
    "max_rss_kib",
    "memory_peak_kib",
    "wall_ns_per_op",
    "cpu_ns_per_op",
    "ops_per_s",
];

/// `NAME[:higher|:lower]=REGEX`.
fn parse_metric(s: &str) -> Result<OutputMetric> {
    let Some((head, re)) = s.split_once('=') else {
        return Err(crate::usage(format!(
            "--metric {s:?}: give NAME=REGEX, e.g. --metric 'rps:higher=Requests/sec:\\s*([0-9.]+)'"
        )));
    };
    let (name, dir) = match head.split_once(':') {
        Some((n, d)) => (n, Some(d)),
        None => (head, None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(crate::usage(format!(
            "--metric {s:?}: a name is letters, digits and _"
        )));
    }
    if OWN.contains(&name) {
        return Err(crate::usage(format!(
            "--metric {name}: ab measures {name} itself; give the printed number another name"
        )));
    }
    let better = match dir {
        Some("higher") => Better::Higher,
        Some("lower") => Better::Lower,
        Some(d) => {
            return Err(crate::usage(format!(
            "--metric {s:?}: {d:?} is not a direction; give NAME:higher=REGEX or NAME:lower=REGEX"
        )))
        }
        None => match guess_better(name).0 {
            Better::Unknown => {
                return Err(crate::usage(format!(
                    "--metric {name}: say which way is better: {name}:higher=… or {name}:lower=…"
                )))
            }
            b => b,
        },
    };
    let pattern = regex::Regex::new(re)
        .map_err(|e| crate::usage(format!("--metric {name}: {re:?} is not a regex: {e}")))?;
    Ok(OutputMetric {
        name: name.to_owned(),
        pattern,
        better,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_only_where_its_syntax_is_used() {
        let w = command_words(&["sleep {d}".into()], Some("sh")).unwrap();
        assert_eq!(w, ["sleep", "{d}"]);
        let w = command_words(&["setsid sleep 9 & echo x".into()], Some("sh")).unwrap();
        assert_eq!(w, ["sh", "-c", "setsid sleep 9 & echo x"]);
        let w = command_words(&["A=1 env".into()], Some("bash")).unwrap();
        assert_eq!(w[0], "bash");
        let w = command_words(&["a | b".into()], None).unwrap();
        assert_eq!(w, ["a", "|", "b"]);
        let w = command_words(&["x".into(), "a b".into()], Some("sh")).unwrap();
        assert_eq!(w, ["x", "a b"]);
    }

    #[test]
    fn metrics_parse_with_a_direction_and_refuse_nonsense() {
        let m = parse_metric(r"rps:higher=Requests/sec:\s*([0-9.]+)").unwrap();
        assert_eq!((m.name.as_str(), m.better), ("rps", Better::Higher));
        let m = parse_metric(r"req_per_s=([0-9]+) req/s").unwrap();
        assert_eq!(m.better, Better::Higher);
        assert!(parse_metric("rps=([0-9]+)").is_err());
        assert!(parse_metric("wall_s:lower=x").is_err());
        assert!(parse_metric("x:up=1").is_err());
        assert!(parse_metric("lat_ms=([").is_err());
        assert!(parse_metric("no regex").is_err());
    }
}
