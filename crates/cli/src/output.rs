//! Output options shared by every command and the one place records are
//! written: `--format table|csv|json|jsonl` and `--output FILE`; and the
//! HTML page of result files that `report` and `suite` write.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use commbench_core::env::Fingerprint;
use commbench_core::record::{export, Format, Record};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum FormatArg {
    Table,
    Csv,
    Json,
    Jsonl,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Table => Format::Table,
            FormatArg::Csv => Format::Csv,
            FormatArg::Json => Format::Json,
            FormatArg::Jsonl => Format::Jsonl,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Output format (default: table; with -o FILE, the format its extension names).
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Write the output to FILE instead of standard output; its extension chooses the format: .txt (what the terminal shows), .csv, .json, .jsonl.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// What one command writes with `-o FILE`: each format (named as its
/// `--format` takes it, with what it is) and the extensions that choose
/// it. One rule for every command ([`Rule::choose`]): a known extension
/// chooses its format (a `--format` that says otherwise is refused), a
/// file without an extension (`/dev/stdout`) takes `--format` or the
/// default, and any other extension is refused with the list, before
/// anything runs: `timer -o out.json` once wrote the terminal table, and
/// `report -o rep.pdf` HTML under that name.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub formats: &'static [(&'static str, &'static str, &'static [&'static str])],
    pub default: &'static str,
}

/// Commands that write records (`--format table|csv|json|jsonl`).
pub const RECORDS: Rule = Rule {
    formats: &[
        ("table", "what the terminal shows", &["txt"]),
        ("csv", "records, CSV", &["csv"]),
        ("json", "one JSON document", &["json"]),
        ("jsonl", "JSON Lines, a record a line", &["jsonl", "ndjson"]),
    ],
    default: "table",
};

/// `report`: the page.
pub const HTML: Rule = Rule {
    formats: &[("html", "the HTML page", &["html", "htm"])],
    default: "html",
};

/// `history`: records, or with --plot the trend page.
pub const HISTORY: Rule = Rule {
    formats: &[
        ("table", "what the terminal shows", &["txt"]),
        ("csv", "records, CSV", &["csv"]),
        ("json", "one JSON document", &["json"]),
        ("jsonl", "JSON Lines, a record a line", &["jsonl", "ndjson"]),
        ("html", "the trend page, with --plot", &["html", "htm"]),
    ],
    default: "table",
};

/// `ab`: the verdicts or the records; three JSON shapes share `.json`.
pub const AB: Rule = Rule {
    formats: &[
        ("table", "the verdicts as the terminal shows them", &["txt"]),
        ("csv", "records, CSV", &["csv"]),
        ("json", "one JSON document", &["json"]),
        ("bmf", "Bencher Metric Format", &["json"]),
        (
            "github-benchmark",
            "github-action-benchmark's JSON",
            &["json"],
        ),
        ("jsonl", "JSON Lines, a record a line", &["jsonl", "ndjson"]),
    ],
    default: "table",
};

/// `pcap extract`: the header fields.
pub const EXTRACT: Rule = Rule {
    formats: &[
        ("csv", "CSV", &["csv"]),
        ("jsonl", "JSON Lines", &["jsonl", "ndjson"]),
        ("parquet", "Parquet", &["parquet", "pq"]),
    ],
    default: "csv",
};

/// `pcap gen`: a capture, compressed as its extension says.
pub const CAPTURE: Rule = Rule {
    formats: &[
        ("pcap", "a pcap capture", &["pcap", "cap"]),
        ("gzip", "a gzip-compressed capture (--gzip)", &["gz"]),
        (
            "zstd",
            "a zstd-compressed capture (--zstd)",
            &["zst", "zstd"],
        ),
    ],
    default: "pcap",
};

/// Each command with `-o FILE` and its rule (a command not named here
/// writes records, [`RECORDS`]). The `-o` test walks every command and
/// checks each of these.
pub const RULES: &[(&str, Rule)] = &[
    ("report", HTML),
    ("history", HISTORY),
    ("ab", AB),
    ("pcap extract", EXTRACT),
    ("pcap gen", CAPTURE),
];

/// The rule of a command, by its path (`pcap extract`).
pub fn rule_for(command: &str) -> Rule {
    RULES
        .iter()
        .find(|(c, _)| *c == command)
        .map_or(RECORDS, |(_, r)| *r)
}

impl Rule {
    /// The extensions that work, as a refusal lists them.
    pub fn listed(&self) -> String {
        self.formats
            .iter()
            .map(|(name, what, exts)| {
                let e: Vec<String> = exts.iter().map(|e| format!(".{e}")).collect();
                format!("{} ({name}: {what})", e.join("/"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The format `-o path` and `--format given` choose (see [`Rule`]);
    /// a usage error says what was wrong and lists what works.
    pub fn choose(
        &self,
        command: &str,
        given: Option<&str>,
        path: Option<&std::path::Path>,
    ) -> Result<&'static str> {
        if let Some(g) = given {
            if !self.formats.iter().any(|f| f.0 == g) {
                return Err(crate::usage(format!(
                    "{command} --format {g}: not a format it writes; it writes {}",
                    self.listed()
                )));
            }
        }
        let named = |g: &str| self.formats.iter().find(|f| f.0 == g).map(|f| f.0);
        let Some(path) = path else {
            return Ok(given.and_then(named).unwrap_or(self.default));
        };
        // `-o -` (standard output), `/dev/null` and other names without
        // an extension take --format or the default.
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        let Some(ext) = ext else {
            return Ok(given.and_then(named).unwrap_or(self.default));
        };
        let fits: Vec<&'static str> = self
            .formats
            .iter()
            .filter(|f| f.2.contains(&ext.as_str()))
            .map(|f| f.0)
            .collect();
        match (fits.first(), given) {
            (None, _) => Err(crate::usage(format!(
                "{command} -o {}: .{ext} is not a format {command} writes; name the file {}",
                path.display(),
                self.listed()
            ))),
            (Some(_), Some(g)) if fits.contains(&g) => Ok(named(g).unwrap_or(self.default)),
            (Some(f), Some(g)) => Err(crate::usage(format!(
                "{command} --format {g} but -o {} names a .{ext} file ({f}); give one or the other",
                path.display()
            ))),
            (Some(f), None) => Ok(f),
        }
    }
}

/// The `--format` value a command line gave for a `ValueEnum`.
pub fn value_name<T: ValueEnum>(v: &T) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_default()
}

/// Checks `-o FILE` of whatever command `m` holds against its rule,
/// before the command runs (a refusal after a four-minute run helps no
/// one). Commands without `-o` pass.
pub fn check_matches(m: &clap::ArgMatches) -> Result<()> {
    let mut path = Vec::new();
    let mut leaf = m;
    while let Some((name, sub)) = leaf.subcommand() {
        path.push(name.to_owned());
        leaf = sub;
    }
    let command = path.join(" ");
    let raw = |id: &str| -> Option<String> {
        match leaf.try_get_raw(id) {
            Ok(Some(mut v)) => v.next().map(|s| s.to_string_lossy().into_owned()),
            _ => None,
        }
    };
    let Some(out) = raw("output") else {
        return Ok(());
    };
    let from_line = |id: &str| {
        leaf.try_contains_id(id).unwrap_or(false)
            && leaf.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
    };
    let given = if command == "pcap gen" {
        let flag =
            |id: &str| from_line(id) && leaf.try_get_one::<bool>(id).ok().flatten() == Some(&true);
        if flag("gzip") {
            Some("gzip".to_owned())
        } else if flag("zstd") {
            Some("zstd".to_owned())
        } else {
            None
        }
    } else if from_line("format") {
        raw("format")
    } else {
        None
    };
    rule_for(&command).choose(&command, given.as_deref(), Some(std::path::Path::new(&out)))?;
    Ok(())
}

impl OutputArgs {
    /// The format chosen by `--format` and `-o FILE`'s extension ([`RECORDS`]).
    pub fn format(&self) -> FormatArg {
        let given = self.format.map(|f| value_name(&f));
        let name = RECORDS
            .choose("", given.as_deref(), self.output.as_deref())
            .unwrap_or(RECORDS.default);
        FormatArg::from_str(name, true).unwrap_or(FormatArg::Table)
    }

    /// Whether the output is the table the terminal shows (to stdout or
    /// a .txt file).
    pub fn is_table(&self) -> bool {
        self.format() == FormatArg::Table
    }

    /// Writes records with the environment fingerprint in the chosen format.
    pub fn emit(&self, records: &[Record]) -> Result<()> {
        self.emit_with(records, &Fingerprint::collect())
    }

    /// Like [`OutputArgs::emit`], but a terminal table is the command's own
    /// view (`table`) instead of the record table. The records are kept in
    /// the results store in both cases, before anything is printed.
    pub fn emit_or_show(&self, records: &[Record], table: impl FnOnce() -> String) -> Result<()> {
        if self.is_table() {
            crate::store::keep(records, &Fingerprint::collect().to_value());
            self.write_text(&table())
        } else {
            self.emit(records)
        }
    }

    /// Writes text (the terminal's view) to `-o FILE`, whole or not at
    /// all, or to standard output.
    pub fn write_text(&self, text: &str) -> Result<()> {
        match &self.output {
            Some(path) => {
                commbench_core::artifact::write_atomic(path, |f| f.write_all(text.as_bytes()))
                    .with_context(|| format!("cannot create output file {}", path.display()))
            }
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())?;
                out.flush()?;
                Ok(())
            }
        }
    }

    /// Like [`OutputArgs::emit`], but a terminal table starts with the
    /// lines `summary` makes of the records (a lab's answer for one run),
    /// then the record table.
    pub fn emit_summarized(
        &self,
        records: &[Record],
        summary: fn(&[Record]) -> String,
    ) -> Result<()> {
        self.emit_summary(records, summary, true)
    }

    /// [`OutputArgs::emit_summarized`], the record table after the
    /// summary only `with_table` (a view that is a table of its own, such
    /// as a sweep's, leaves it out).
    pub fn emit_summary(
        &self,
        records: &[Record],
        summary: fn(&[Record]) -> String,
        with_table: bool,
    ) -> Result<()> {
        self.emit_or_show(records, || {
            let mut buf = summary(records).into_bytes();
            if with_table {
                if !buf.is_empty() {
                    buf.push(b'\n');
                }
                let _ = export(records, Format::Table, &serde_json::Value::Null, &mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    }

    /// Writes records with a given fingerprint, and appends the measured
    /// ones to the results store (see [`crate::store`]).
    pub fn emit_with(&self, records: &[Record], fp: &Fingerprint) -> Result<()> {
        let env = fp.to_value();
        crate::store::keep(records, &env);
        self.write_with(records, &env)
    }

    /// Writes records without storing them (a command that already did).
    pub fn write_with(&self, records: &[Record], env: &serde_json::Value) -> Result<()> {
        let env = env.clone();
        match &self.output {
            Some(path) => {
                // Whole or not at all: a full disk keeps the previous file.
                commbench_core::artifact::write_atomic(path, |f| {
                    export(records, self.format().into(), &env, f)
                })
                .with_context(|| format!("cannot create output file {}", path.display()))?;
            }
            None => {
                let stdout = std::io::stdout();
                let mut lock = stdout.lock();
                export(records, self.format().into(), &env, &mut lock)?;
                lock.flush()?;
            }
        }
        Ok(())
    }
}

/// Renders the result files `results` into one HTML page at `output`,
/// whole or not at all (a full disk keeps the previous page). A file that
/// is not results is a usage error.
pub fn write_report(results: &[PathBuf], output: &std::path::Path, title: &str) -> Result<()> {
    let runs = results
        .iter()
        .map(|p| commbench_report::load(p).map_err(crate::lab_err))
        .collect::<Result<Vec<_>, _>>()?;
    // The overlay's verdicts are compare's: the same floors, learned from
    // the same store.
    let store = crate::store::open_existing();
    let past = store.map(|s| {
        move |host: &str, lab: &str, test: &str| crate::store::past_records(&s, host, lab, test)
    });
    let past_ref: Option<&commbench_report::verdicts::Past> = past
        .as_ref()
        .map(|p| p as &commbench_report::verdicts::Past);
    let html = commbench_report::render_html(&runs, title, crate::labs::labs(), past_ref)?;
    commbench_core::artifact::write_atomic(output, |f| f.write_all(html.as_bytes()))
        .with_context(|| format!("cannot write {}", output.display()))
}
