//! Fuzz the tester's sink: the stamp parser, the identity table's key and
//! matcher, and the per-flow accounting fed with arbitrary frames (a DUT
//! or the wire can deliver any bytes). The first 8 bytes are the receive
//! time, the rest the frame.
#![no_main]
use commbench_pipeline::tester::account::SinkAccount;
use commbench_pipeline::tester::identity::{self, IdResolver, IdSlots};
use commbench_pipeline::tester::replay::{Order, Traffic};
use commbench_pipeline::tester::stamp;
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

/// A classic pcap (Ethernet) of `frames`.
fn pcap_of(frames: &[&[u8]]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for f in frames {
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    b
}

fuzz_target!(|data: &[u8]| {
    let _ = stamp::parse(data);
    let _ = identity::key(data);
    if data.len() < 8 {
        return;
    }
    let rx = u64::from_le_bytes(data[..8].try_into().unwrap());
    let frame = &data[8..];
    let mut acct = SinkAccount::new(&[64, 64, 1], 1000, 100_000);
    // The same frame as is, and split in two at every 61st byte.
    acct.frame(frame, rx);
    for chunk in frame.chunks(61) {
        acct.frame(chunk, rx / 2);
    }
    let c = acct.counts(&[64, 0, 1]);
    for f in &c {
        assert!(f.received <= 64 && f.received + f.lost >= f.received);
    }
    // The identity table of a capture of the frame and its first 61
    // bytes, three loops departed, matched against the same pieces.
    let first = &frame[..frame.len().min(61)];
    let Ok(mut t) = Traffic::from_bytes("f.pcap", pcap_of(&[frame, first]), Order::Capture) else {
        return;
    };
    t.set_identity_table();
    let history = t.id_index().map_or(1, |i| i.history);
    let t = Arc::new(t);
    let slots = Arc::new(IdSlots::new(t.len(), history));
    let n = 3 * t.len() as u64;
    for i in 0..n {
        slots.depart(i, rx.wrapping_add(i) & 0xffff_ffff);
    }
    slots.stamped_up_to(n);
    let mut acct = SinkAccount::new(&vec![64; usize::from(t.streams)], 1000, 100_000);
    acct.classes = Some(Box::default());
    acct.table = IdResolver::new(t.clone(), slots, 1000).map(Box::new);
    for _ in 0..4 {
        acct.frame(frame, rx);
        acct.frame(first, rx / 2);
    }
    for f in acct.counts(&vec![3; usize::from(t.streams)]) {
        assert!(f.received <= 3 * t.len() as u64, "{f:?}");
    }
});
