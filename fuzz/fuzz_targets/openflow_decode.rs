//! Fuzz the OpenFlow decoder: stream framing, both versions' `Repr::parse`
//! and checked views, hello negotiation, the frame key extractor and the
//! template writers (see `commbench_openflow::wire::fuzz_decode`). A panic
//! or an abort (huge allocation) is a bug. Seeds: `fuzz/seeds/openflow_decode`
//! (`cargo fuzz run openflow_decode fuzz/seeds/openflow_decode`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    commbench_openflow::wire::fuzz_decode(data);
});
