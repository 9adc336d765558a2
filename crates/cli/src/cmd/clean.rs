//! `commbench clean`: remove what dead runs left in /dev/shm and the temp
//! dir (named by `commbench_core::artifact::name`), the network
//! namespaces of `pipeline netns` runs, and the trials (cgroups and
//! processes) of `ab` runs killed by SIGKILL; live runs are left alone.
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
    // What each lab's dead runs left elsewhere (network namespaces and
    // their veths of `pipeline netns` runs, servers of `mux httpd` runs) —
    // first, since a leftover server is found through its temp dir.
    // The process trees of `ab` runs that died by SIGKILL (their cgroups
    // and the processes that carry their name) go first of all.
    let trees = commbench_core::proctree::clean_leftovers(a.dry_run);
    let netns: Vec<_> = trees
        .into_iter()
        .map(|e| ("ab", e))
        .chain(crate::labs::labs().iter().flat_map(|l| {
            l.clean_leftovers(a.dry_run)
                .into_iter()
                .map(move |e| (l.name(), e))
        }))
        .collect();
    let entries = artifact::clean(a.dry_run);
    let mut records: Vec<Record> = entries
        .iter()
        .map(|e| {
            Record::new("clean", "artifact")
                .param("path", &e.path)
                .param("lab", &e.lab)
                .param("pid", e.pid)
                .metric("action", &e.action)
        })
        .collect();
    records.extend(netns.iter().map(|(lab, e)| {
        Record::new("clean", e.kind)
            .param("path", &e.name)
            .param("lab", *lab)
            .param("pid", e.pid)
            .metric("action", &e.action)
    }));
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e.action.as_str())
        .chain(netns.iter().map(|(_, e)| e.action.as_str()))
        .collect();
    let removed = actions
        .iter()
        .filter(|a| **a == "removed" || **a == "killed")
        .count();
    let live = actions.iter().filter(|a| **a == "live").count();
    let errors = actions.iter().filter(|a| a.starts_with("error")).count();
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
