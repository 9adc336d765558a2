//! commbench core: the clock, statistics, resource usage, environment
//! fingerprint, CPU placement, result records and artifact naming that every
//! lab measures and reports through. No lab keeps private timing or
//! statistics code: what is measured here is measured the same way
//! everywhere.
#![warn(missing_docs)]

pub mod artifact;
// The pcap lab's reader, moved down as it was so the pipeline lab can
// replay captures (labs never depend on each other); its items are
// documented where the pcap lab documented them.
#[allow(missing_docs)]
pub mod capture;
pub mod changepoint;
pub mod checksum;
pub mod clock;
pub mod corelab;
pub mod delay;
pub mod env;
pub mod error;
pub mod estimate;
pub mod figure;
pub mod lab;
pub mod linerate;
pub mod placement;
pub mod proctree;
pub mod record;
pub mod rusage;
pub mod sched;
pub mod segment;
pub mod stall;
pub mod stats;
pub mod sys;
pub mod testing;
pub mod timer;
pub mod userfile;

pub use record::{Format, Record, Recorder};
