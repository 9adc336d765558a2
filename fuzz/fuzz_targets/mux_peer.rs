//! Arbitrary bytes from a mux peer: the sockperf framing filter (split at
//! arbitrary points, the first byte choosing the chunk size) and the
//! server's control-line reader must answer with replies or an error,
//! never panic, and never emit more than they were fed plus one header.
#![no_main]
use commbench_mux::protocol::{Filter, HEADER};
use commbench_mux::server::read_command;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let chunk = (k as usize % 64) + 1;
    let mut f = Filter::default();
    let mut out = Vec::new();
    for part in rest.chunks(chunk) {
        if f.feed(part, &mut out).is_err() {
            break;
        }
    }
    assert!(out.len() <= rest.len() + HEADER);
    let mut r = std::io::Cursor::new(rest);
    while let Ok(Some(_)) = read_command(&mut r) {}
});
