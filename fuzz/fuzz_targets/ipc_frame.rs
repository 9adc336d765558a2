//! Arbitrary bytes as a received ipc byte stream: framing and verification
//! must reject garbage with an error, never panic or allocate by a length
//! field (the receive buffer is fixed; larger frames are TooLarge).
#![no_main]
use commbench_ipc::frame::check_frame;
use commbench_ipc::stream::FdRx;
use commbench_ipc::transport::MsgRx;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rx = FdRx::new(std::io::Cursor::new(data.to_vec()));
    let mut buf = vec![0u8; 4096];
    let mut seq = 0u64;
    while let Ok(h) = rx.recv(&mut buf) {
        let len = h.len as usize;
        let _ = check_frame(0, seq, len, &h, &buf[..len], true);
        seq += 1;
    }
});
