//! Arbitrary bytes from an HTTP client, pipelined: the server's request
//! splitter, fed in chunks (the first byte choosing the chunk size and the
//! output bound), must never make more than its bound plus one response
//! per round, must hold at most one chunk of unparsed input (plus a
//! partial header), must never panic, and must answer exactly as many
//! requests as the same bytes fed whole without a bound (bounding output
//! only delays responses, never loses or adds one). After the last answer
//! (a 400, or the response to a request asking to close) nothing more is
//! answered and nothing is held.
#![no_main]
use commbench_mux::http1::{max_answer_len, Limits, ResponseReader, ServerFilter, SERVER_MAX_HEADER};
use libfuzzer_sys::fuzz_target;

/// Answers in `out` (our answers differ in length: counted by reading
/// them as a client does).
fn count(out: &[u8]) -> usize {
    let mut r = ResponseReader::new(Limits::default());
    let (mut rest, mut n) = (out, 0);
    while !rest.is_empty() {
        let (used, status) = r.feed(rest).expect("the server's answers are well formed");
        n += usize::from(status.is_some());
        rest = &rest[used..];
    }
    n
}

/// Responses for `data` in `chunk`-byte reads, at most `bound` bytes of
/// responses a round; `None` on a refused request.
fn answered(data: &[u8], chunk: usize, bound: usize) -> Option<usize> {
    let mut f = ServerFilter::default();
    let mut out = Vec::new();
    let mut n = 0;
    for part in data.chunks(chunk) {
        out.clear();
        f.feed(part, &mut out, bound).ok()?;
        assert!(out.len() < bound.saturating_add(max_answer_len()));
        n += count(&out);
        if f.closes() {
            assert!(!f.holds_input());
        }
        assert!(f.own_bytes() <= 2 * (chunk + SERVER_MAX_HEADER + 1));
        while f.holds_input() {
            out.clear();
            f.resume(&mut out, bound).ok()?;
            // Progress: responses made, or all held input taken in.
            assert!(!out.is_empty() || !f.holds_input(), "held input, no progress");
            assert!(out.len() < bound.saturating_add(max_answer_len()));
            n += count(&out);
        }
    }
    Some(n)
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let chunk = (k as usize % 64) * 64 + 1;
    let bound = 1 + (k as usize / 64) * max_answer_len();
    let bounded = answered(rest, chunk, bound);
    let whole = answered(rest, rest.len().max(1), usize::MAX);
    if let (Some(a), Some(b)) = (bounded, whole) {
        assert_eq!(a, b, "the bound lost or added responses");
    }
});
