//! What travels on a connection. `raw`: the client's bytes are echoed as
//! they are (the seed's servers). `sockperf`: sockperf's own framing, so
//! that sockperf's client can drive our servers and our load generator can
//! drive sockperf's server: every message starts with a 14-byte header —
//! sequence number (u64), flags (u16: 1 client, 2 pong request, 4 warm-up)
//! and the whole message's length (u32, header included), all big-endian —
//! and a server answers a client message that asks for a pong, and is not a
//! warm-up, with the same bytes and the client flag cleared.
//!
//! The server side is a stream filter ([`Filter`]): it keeps at most one
//! header of state per connection, passes payload bytes through without
//! buffering them, and rejects a length outside 14 B..=16 MiB (bytes from
//! a peer: the connection is closed and counted, never a large allocation).

/// Which framing a run uses.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    #[default]
    Raw,
    Sockperf,
    /// HTTP/1.1 keep-alive requests and a fixed response ([`crate::http1`]).
    Http1,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Raw => "raw",
            Protocol::Sockperf => "sockperf",
            Protocol::Http1 => "http1",
        }
    }
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "raw" => Some(Protocol::Raw),
            "sockperf" => Some(Protocol::Sockperf),
            "http1" => Some(Protocol::Http1),
            _ => None,
        }
    }
}

/// sockperf's header size.
pub const HEADER: usize = 14;
pub const FLAG_CLIENT: u16 = 1;
pub const FLAG_PONG: u16 = 2;
pub const FLAG_WARMUP: u16 = 4;
/// Largest message length accepted from a peer.
pub const MAX_MESSAGE: u32 = 16 << 20;
/// Offset of the flags' low byte (where the client bit lives).
pub const FLAGS_LOW: usize = 9;

/// A checked view of a sockperf header.
#[derive(Debug, Clone, Copy)]
pub struct Header<T: AsRef<[u8]>> {
    buf: T,
}

/// Why a header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("sockperf header cut short ({0} of 14 bytes)")]
    Short(usize),
    #[error("sockperf message length {0} outside 14..=16777216")]
    BadLength(u32),
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Checks the size and the length field.
    pub fn new_checked(buf: T) -> Result<Self, HeaderError> {
        let b = buf.as_ref();
        if b.len() < HEADER {
            return Err(HeaderError::Short(b.len()));
        }
        let h = Header { buf };
        let len = h.length();
        if (len as usize) < HEADER || len > MAX_MESSAGE {
            return Err(HeaderError::BadLength(len));
        }
        Ok(h)
    }
    pub fn sequence(&self) -> u64 {
        let b = self.buf.as_ref();
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
    pub fn flags(&self) -> u16 {
        let b = self.buf.as_ref();
        u16::from_be_bytes([b[8], b[9]])
    }
    pub fn length(&self) -> u32 {
        let b = self.buf.as_ref();
        u32::from_be_bytes([b[10], b[11], b[12], b[13]])
    }
    /// A client message asking for a pong (and not a warm-up).
    pub fn wants_reply(&self) -> bool {
        let f = self.flags();
        f & FLAG_CLIENT != 0 && f & FLAG_PONG != 0 && f & FLAG_WARMUP == 0
    }
}

/// Writes a client ping header (client + pong request) for `len` bytes.
pub fn write_ping_header(out: &mut [u8], seq: u64, len: u32) {
    out[..8].copy_from_slice(&seq.to_be_bytes());
    out[8..10].copy_from_slice(&(FLAG_CLIENT | FLAG_PONG).to_be_bytes());
    out[10..14].copy_from_slice(&len.to_be_bytes());
}

/// The server's per-connection stream filter.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    hdr: [u8; HEADER],
    have: usize,
    /// Payload bytes of the current message still to pass (or drop).
    remaining: usize,
    reply: bool,
}

impl Filter {
    /// Feeds received bytes; appends the reply bytes to `out`. A bad header
    /// is an error (close the connection).
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), HeaderError> {
        while !input.is_empty() {
            if self.remaining > 0 {
                let n = self.remaining.min(input.len());
                if self.reply {
                    out.extend_from_slice(&input[..n]);
                }
                self.remaining -= n;
                input = &input[n..];
                continue;
            }
            let n = (HEADER - self.have).min(input.len());
            self.hdr[self.have..self.have + n].copy_from_slice(&input[..n]);
            self.have += n;
            input = &input[n..];
            if self.have < HEADER {
                break;
            }
            self.have = 0;
            let h = Header::new_checked(&self.hdr[..])?;
            self.reply = h.wants_reply();
            self.remaining = h.length() as usize - HEADER;
            if self.reply {
                let mut reply = self.hdr;
                reply[FLAGS_LOW] &= !(FLAG_CLIENT as u8);
                out.extend_from_slice(&reply);
            }
        }
        Ok(())
    }
}

/// The first byte where `got` (received at `at` of the reply) differs from
/// the reply expected to `sent` under `proto`.
pub fn mismatch(proto: Protocol, sent: &[u8], at: usize, got: &[u8]) -> Option<usize> {
    let want = &sent[at..at + got.len()];
    if want == got {
        return None;
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let pos = at + i;
        let w = if proto == Protocol::Sockperf && pos == FLAGS_LOW {
            w & !(FLAG_CLIENT as u8)
        } else {
            *w
        };
        if w != *g {
            return Some(pos);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ping(seq: u64, len: usize, flags: u16) -> Vec<u8> {
        let mut m = vec![0xAB; len];
        write_ping_header(&mut m, seq, len as u32);
        m[8..10].copy_from_slice(&flags.to_be_bytes());
        m
    }

    #[test]
    fn pong_requests_are_answered_with_the_client_flag_cleared() {
        let m = ping(7, 64, FLAG_CLIENT | FLAG_PONG);
        let mut f = Filter::default();
        let mut out = Vec::new();
        f.feed(&m, &mut out).unwrap();
        assert_eq!(out.len(), 64);
        assert_eq!(Header::new_checked(&out[..]).unwrap().flags(), FLAG_PONG);
        assert_eq!(Header::new_checked(&out[..]).unwrap().sequence(), 7);
        assert_eq!(mismatch(Protocol::Sockperf, &m, 0, &out), None);
        assert_eq!(mismatch(Protocol::Raw, &m, 0, &out), Some(FLAGS_LOW));
    }

    #[test]
    fn warmups_and_messages_without_pong_get_no_reply() {
        let mut f = Filter::default();
        let mut out = Vec::new();
        f.feed(
            &ping(1, 30, FLAG_CLIENT | FLAG_PONG | FLAG_WARMUP),
            &mut out,
        )
        .unwrap();
        f.feed(&ping(2, 30, FLAG_CLIENT), &mut out).unwrap();
        f.feed(&ping(3, 30, FLAG_PONG), &mut out).unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn bad_lengths_are_refused_without_allocating() {
        let mut m = ping(1, 14, FLAG_CLIENT | FLAG_PONG);
        m[10..14].copy_from_slice(&u32::MAX.to_be_bytes());
        let mut out = Vec::new();
        assert_eq!(
            Filter::default().feed(&m, &mut out),
            Err(HeaderError::BadLength(u32::MAX))
        );
        m[10..14].copy_from_slice(&3u32.to_be_bytes());
        assert!(Filter::default().feed(&m, &mut out).is_err());
        assert!(out.is_empty());
    }

    proptest! {
        #[test]
        fn any_split_of_a_stream_gives_the_same_replies(
            sizes in proptest::collection::vec(14usize..300, 1..20),
            cuts in proptest::collection::vec(1usize..50, 1..40),
        ) {
            let mut stream = Vec::new();
            let mut want = Vec::new();
            for (i, &s) in sizes.iter().enumerate() {
                let flags = if i % 3 == 2 { FLAG_CLIENT } else { FLAG_CLIENT | FLAG_PONG };
                let m = ping(i as u64, s, flags);
                if i % 3 != 2 {
                    let mut r = m.clone();
                    r[FLAGS_LOW] &= !1;
                    want.extend_from_slice(&r);
                }
                stream.extend_from_slice(&m);
            }
            let mut f = Filter::default();
            let mut out = Vec::new();
            let mut rest = &stream[..];
            let mut k = 0;
            while !rest.is_empty() {
                let n = cuts[k % cuts.len()].min(rest.len());
                f.feed(&rest[..n], &mut out).unwrap();
                rest = &rest[n..];
                k += 1;
            }
            prop_assert_eq!(out, want);
        }
    }
}
