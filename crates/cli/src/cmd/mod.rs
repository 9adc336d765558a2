//! One module per command.
pub mod budget;
pub mod clean;
pub mod delay;
pub mod env;
pub mod openflow;
pub mod suite;
pub mod timer;
