//! Fuzz the OpenFlow decoder: stream framing, both versions' `Repr::parse`
//! and checked views, hello negotiation, the frame key extractor and the
//! template writer. A panic or an abort (huge allocation) is a bug; every
//! successful parse must re-encode to a fixed point.
#![no_main]

use commbench_openflow::wire::{frame, frame_len, of10, of13};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some(n)) = frame_len(rest) {
        let msg = &rest[..n];
        if let Ok(r) = of10::Repr::parse(msg) {
            let r2 = of10::Repr::parse(&r.to_bytes()).expect("re-encoded 1.0 parses");
            assert_eq!(of10::Repr::parse(&r2.to_bytes()).unwrap(), r2);
        }
        if let Ok(r) = of13::Repr::parse(msg) {
            let r2 = of13::Repr::parse(&r.to_bytes()).expect("re-encoded 1.3 parses");
            assert_eq!(of13::Repr::parse(&r2.to_bytes()).unwrap(), r2);
        }
        if let Ok(pi) = of10::PacketInView::new_checked(msg) {
            let t = of10::FlowModTemplate::new(0, 0, 0x8000);
            let mut out = [0u8; of10::FLOW_MOD_TEMPLATE_LEN];
            t.write(&mut out, pi.xid(), &pi);
            assert!(of10::Repr::parse(&out).is_ok());
        }
        if let Ok(pi) = of13::PacketInView::new_checked(msg) {
            let _ = pi.in_port();
            let _ = frame::FlowKey::extract(pi.data());
        }
        let _ = of13::negotiate(msg, &[1, 4]);
        rest = &rest[n..];
    }
    let _ = frame::FlowKey::extract(data);
});
