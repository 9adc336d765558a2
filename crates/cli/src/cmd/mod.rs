//! One module per command.
pub mod budget;
pub mod clean;
pub mod compare;
pub mod delay;
pub mod env;
pub mod report;
pub mod ipc;
pub mod openflow;
pub mod suite;
pub mod timer;
