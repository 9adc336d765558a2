//! `commbench env`: the environment fingerprint.
use crate::output::OutputArgs;
use anyhow::Result;
use clap::Args;
use commbench_core::env::Fingerprint;
use commbench_core::record::{flatten, Record};

#[derive(Debug, Args)]
pub struct EnvArgs {
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn run(a: &EnvArgs) -> Result<()> {
    let fp = Fingerprint::collect();
    let mut r = Record::new("env", "fingerprint");
    let mut flat = Vec::new();
    flatten("", &fp.to_value(), &mut flat);
    for (k, v) in flat {
        r.metrics.insert(k, v);
    }
    a.out.emit_with(&[r], &fp)
}
