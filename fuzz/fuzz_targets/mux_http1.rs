//! Arbitrary bytes from an HTTP server: the load generator's response
//! reader (split at arbitrary points, the first byte choosing the chunk
//! size and the header bound) must give statuses or an error, never
//! panic, never use more bytes than it was fed, and never keep more than
//! its header bound. The server's request splitter gets the same bytes:
//! responses or an error, never a panic (pipelining and its output
//! bound: `mux_http1_server`).
#![no_main]
use commbench_mux::http1::{Limits, ResponseReader, ServerFilter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let chunk = (k as usize % 64) + 1;
    let mut r = ResponseReader::new(Limits {
        max_header: 64 + (k as usize) * 16,
        max_body: 1 << 20,
    });
    'outer: for part in rest.chunks(chunk) {
        let mut p = part;
        while !p.is_empty() {
            match r.feed(p) {
                Ok((used, status)) => {
                    assert!(used <= p.len());
                    if let Some(s) = status {
                        assert!((100..1000).contains(&s));
                    }
                    if used == 0 {
                        break 'outer;
                    }
                    p = &p[used..];
                }
                Err(_) => break 'outer,
            }
        }
    }
    let mut f = ServerFilter::default();
    let mut out = Vec::new();
    for part in rest.chunks(chunk) {
        out.clear();
        if f.feed(part, &mut out, usize::MAX).is_err() {
            break;
        }
    }
});
