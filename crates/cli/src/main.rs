//! The `commbench` binary: argument parsing and wiring only. Every lab's
//! logic lives in its library crate; commands here build a config, call the
//! lab's `run`, and hand the resulting records to an exporter.

fn main() {
    eprintln!("commbench: the command set is being built; see README.md");
    std::process::exit(2);
}
