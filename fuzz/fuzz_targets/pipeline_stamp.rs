//! Fuzz the tester's sink: the stamp parser and the per-flow accounting
//! fed with arbitrary frames (a DUT or the wire can deliver any bytes).
//! The first 8 bytes are the receive time, the rest the frame.
#![no_main]
use commbench_pipeline::tester::account::SinkAccount;
use commbench_pipeline::tester::stamp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = stamp::parse(data);
    if data.len() < 8 {
        return;
    }
    let rx = u64::from_le_bytes(data[..8].try_into().unwrap());
    let mut acct = SinkAccount::new(&[64, 64, 1], 1000, 100_000);
    // The same frame as is, and split in two at every 61st byte.
    acct.frame(&data[8..], rx);
    for chunk in data[8..].chunks(61) {
        acct.frame(chunk, rx / 2);
    }
    let c = acct.counts(&[64, 0, 1]);
    for f in &c {
        assert!(f.received <= 64 && f.received + f.lost >= f.received);
    }
});
