//! `commbench clean`: remove what dead runs left in /dev/shm and the temp
//! dir (named by `commbench_core::artifact::name`); live runs are left alone.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::artifact;
use commbench_core::record::Record;

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Only list what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run(a: &CleanArgs) -> Result<()> {
    let entries = artifact::clean(a.dry_run);
    let records: Vec<Record> = entries
        .iter()
        .map(|e| {
            Record::new("clean", "artifact")
                .param("path", &e.path)
                .param("lab", &e.lab)
                .param("pid", e.pid)
                .metric("action", &e.action)
        })
        .collect();
    let removed = entries.iter().filter(|e| e.action == "removed").count();
    let live = entries.iter().filter(|e| e.action == "live").count();
    let errors = entries
        .iter()
        .filter(|e| e.action.starts_with("error"))
        .count();
    eprintln!(
        "commbench clean: {removed} removed, {live} of live runs left alone, {errors} errors"
    );
    if !records.is_empty() {
        a.out.emit(&records)?;
    }
    if errors > 0 {
        anyhow::bail!("{errors} entries could not be removed (see the list above)");
    }
    Ok(())
}
