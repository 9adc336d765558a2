//! commbench pcap lab (seed: pcap-ruby-extension): capture readers, header
//! decoders, fast field extraction, a capture generator and an honest
//! cold/warm-cache benchmark.
#![deny(unsafe_code)]

pub mod decode;
pub mod wire;
