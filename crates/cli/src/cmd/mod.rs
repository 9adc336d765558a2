//! One module per command.
pub mod ab;
pub mod budget;
pub mod clean;
pub mod compare;
pub mod delay;
pub mod env;
pub mod estimate;
pub mod history;
pub mod ipc;
pub mod merge;
pub mod mux;
pub mod openflow;
pub mod pcap;
pub mod pipeline;
pub mod report;
pub mod suite;
pub mod timer;
