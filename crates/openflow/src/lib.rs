//! commbench's OpenFlow lab (seed: cbench-trema-speedup): an OpenFlow
//! 1.0/1.3 codec ([`wire`]), a cbench-compatible switch emulator
//! ([`emulator`]), a controller with a template fast path and a naive
//! general-encoder path ([`controller`]), and the one-command benchmark
//! that runs both side by side ([`bench`]).
//!
//! Invariants: untrusted bytes are decoded only through checked views;
//! a misbehaving peer loses its own connection and nothing else.

pub mod cbench_args;
pub mod controller;
pub mod emulator;
pub mod figures;
pub mod lab;
mod sys;

pub use sys::stop_on_signal;
pub mod bench;
pub mod wire;

pub use figures::figures;
pub use lab::OpenflowLab;
