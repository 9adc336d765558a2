//! The integration tests of the `commbench` binary, one test binary for the
//! whole crate (as ripgrep's `tests/tests.rs`): one module per concern
//! below, each in its own file beside this one. Test names are the
//! module's path and the function, e.g. `mux::argument_errors_exit_2`, so
//! `cargo nextest run -p commbench -E 'test(/^mux::/)'` (or
//! `cargo test -p commbench --test integration mux::`) runs one module.
//! Helpers more than one module needs live in `util.rs`.

mod util;

mod ab;
mod architecture;
mod browser;
mod cli;
mod fuzz_args;
mod history;
mod ipc;
mod merge;
mod mux;
mod mux_tls;
mod openflow;
mod pcap;
mod pipeline;
mod report_input;
mod stored;
mod suite;
