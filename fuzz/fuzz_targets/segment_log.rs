//! Arbitrary bytes as a segment file (`mux load --segment`'s HdrHistogram
//! V2 interval log, read by `commbench merge`): a segment or an error,
//! never a panic or an allocation past the parser's bounds; a segment
//! that parses writes and parses again to the same header.
#![no_main]
use commbench_core::segment::{decode_histogram, Segment};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Segment::parse(data) {
        let mut out = Vec::new();
        if s.write(&mut out).is_ok() {
            let back = Segment::parse(&out).expect("a written segment parses");
            assert_eq!(back.header, s.header);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = decode_histogram(text);
    }
});
