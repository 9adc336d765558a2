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
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: FormatArg,
    /// Write the output to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

impl OutputArgs {
    /// Writes records with the environment fingerprint in the chosen format.
    pub fn emit(&self, records: &[Record]) -> Result<()> {
        self.emit_with(records, &Fingerprint::collect())
    }

    /// Like [`OutputArgs::emit`], but a terminal table is the command's own
    /// view (`table`) instead of the record table. The records are kept in
    /// the results store in both cases, before anything is printed.
    pub fn emit_or_show(&self, records: &[Record], table: impl FnOnce() -> String) -> Result<()> {
        if self.format == FormatArg::Table && self.output.is_none() {
            crate::store::keep(records, &Fingerprint::collect().to_value());
            let mut out = std::io::stdout().lock();
            out.write_all(table().as_bytes())?;
            out.flush()?;
            Ok(())
        } else {
            self.emit(records)
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
        self.emit_or_show(records, || {
            let mut buf = summary(records).into_bytes();
            if !buf.is_empty() {
                buf.push(b'\n');
            }
            let _ = export(records, Format::Table, &serde_json::Value::Null, &mut buf);
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
                    export(records, self.format.into(), &env, f)
                })
                .with_context(|| format!("cannot create output file {}", path.display()))?;
            }
            None => {
                let stdout = std::io::stdout();
                let mut lock = stdout.lock();
                export(records, self.format.into(), &env, &mut lock)?;
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
