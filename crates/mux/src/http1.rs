//! HTTP/1.1 as a load protocol: the keep-alive GET our load generator
//! sends, the response reader that takes the server's bytes apart
//! (status line and headers by the `httparse` crate; Content-Length and
//! chunked bodies here), and the fixed-response filter our own servers run
//! with `mux serve --protocol http1`.
//!
//! Invariants: the reader never holds more than `max_header` bytes of an
//! unfinished header, never allocates for a body (bodies are counted, not
//! kept), and answers every malformed or oversized response with an
//! [`HttpError`] naming what was wrong — bytes from a peer never panic or
//! wait without bound (the caller's deadline bounds the wait).

use std::fmt::Write as _;
use std::sync::OnceLock;

/// Most headers in one response or request.
pub const MAX_HEADERS: usize = 64;
/// Default bound on a response's header bytes.
pub const DEFAULT_MAX_HEADER: usize = 64 * 1024;
/// Default bound on a response's body bytes.
pub const DEFAULT_MAX_BODY: u64 = 64 << 20;
/// Longest chunk-size or trailer line accepted.
pub const MAX_LINE: usize = 4096;

/// The request a connection sends, again and again (keep-alive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    pub host: String,
    /// Extra headers, in order.
    pub headers: Vec<(String, String)>,
    /// A body (sent with Content-Length).
    pub body: Vec<u8>,
    pub max_header: usize,
    pub max_body: u64,
    /// Ask the server to close after each response (`--conn-per-request`):
    /// a new connection, and with TLS a new handshake, per request.
    pub close: bool,
}

impl Default for HttpRequest {
    fn default() -> Self {
        HttpRequest {
            method: "GET".into(),
            path: "/".into(),
            host: "localhost".into(),
            headers: Vec::new(),
            body: Vec::new(),
            max_header: DEFAULT_MAX_HEADER,
            max_body: DEFAULT_MAX_BODY,
            close: false,
        }
    }
}

/// A request setting from the command line that cannot go on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestArgError {
    /// A method, host or path that is empty or holds spaces or control
    /// characters (the option, the value).
    #[error("{0} {1:?} must be non-empty, without spaces or control characters")]
    Token(String, String),
    /// A `--header` without a colon.
    #[error("--header {0:?}: expected 'Name: value'")]
    NoColon(String),
    /// A `--header` whose name is not an HTTP token (the argument, the name).
    #[error("--header {0:?}: {1:?} is not a header name")]
    Name(String, String),
    /// A `--header` value with CR, LF or NUL.
    #[error("--header {0:?}: the value holds a line break")]
    LineBreak(String),
}

/// Checks a request setting given on the command line.
pub fn check_token(what: &str, s: &str) -> Result<(), RequestArgError> {
    if s.is_empty() || s.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(RequestArgError::Token(what.to_owned(), s.to_owned()));
    }
    Ok(())
}

/// Parses a `--header 'Name: value'` argument.
pub fn parse_header(s: &str) -> Result<(String, String), RequestArgError> {
    let (n, v) = s
        .split_once(':')
        .ok_or_else(|| RequestArgError::NoColon(s.to_owned()))?;
    let n = n.trim();
    let v = v.trim();
    if n.is_empty()
        || !n
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    {
        return Err(RequestArgError::Name(s.to_owned(), n.to_owned()));
    }
    if v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(RequestArgError::LineBreak(s.to_owned()));
    }
    Ok((n.to_owned(), v.to_owned()))
}

impl HttpRequest {
    /// The bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let mut h = String::new();
        let _ = write!(
            h,
            "{} {} HTTP/1.1\r\nHost: {}\r\n",
            self.method, self.path, self.host
        );
        let has = |name: &str| {
            self.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        for (n, v) in &self.headers {
            let _ = write!(h, "{n}: {v}\r\n");
        }
        if self.close && !has("connection") {
            h.push_str("Connection: close\r\n");
        }
        if !self.body.is_empty() && !has("content-length") {
            let _ = write!(h, "Content-Length: {}\r\n", self.body.len());
        }
        h.push_str("\r\n");
        let mut out = h.into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
    pub fn limits(&self) -> Limits {
        Limits {
            max_header: self.max_header,
            max_body: self.max_body,
        }
    }
}

/// Bounds on what a response may be.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_header: usize,
    pub max_body: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_header: DEFAULT_MAX_HEADER,
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

/// Why a response was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("malformed response header: {0}")]
    Header(String),
    #[error("response header larger than {0} bytes")]
    HeaderTooLarge(usize),
    #[error("response body of {0} bytes is over the {1}-byte limit")]
    BodyTooLarge(u64, u64),
    #[error("bad Content-Length {0:?}")]
    BadLength(String),
    #[error("bad chunk: {0}")]
    Chunk(String),
    #[error("response without Content-Length or chunked encoding (read to close) cannot be used on a keep-alive connection")]
    NoLength,
}

/// Responses by status class, and failures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub s1xx: u64,
    pub s2xx: u64,
    pub s3xx: u64,
    pub s4xx: u64,
    pub s5xx: u64,
    /// Malformed or oversized responses, and responses whose status is
    /// outside 100..=599.
    pub errors: u64,
    /// Connections closed or reset by the server mid-run.
    pub resets: u64,
    /// New connections made in place of broken or closed ones (a server
    /// saying `Connection: close`, a reset, a malformed response), as wrk
    /// does.
    #[serde(default)]
    pub reconnects: u64,
    /// Requests still unanswered when the run's wait ran out.
    #[serde(default)]
    pub timeouts: u64,
}

impl Counts {
    pub fn count(&mut self, status: u16) {
        match status {
            100..=199 => self.s1xx += 1,
            200..=299 => self.s2xx += 1,
            300..=399 => self.s3xx += 1,
            400..=499 => self.s4xx += 1,
            500..=599 => self.s5xx += 1,
            // 600..=999 is no HTTP status (RFC 9110 §15): a bad response,
            // not a server error.
            _ => self.errors += 1,
        }
    }
    pub fn merge(&mut self, o: &Counts) {
        self.s1xx += o.s1xx;
        self.s2xx += o.s2xx;
        self.s3xx += o.s3xx;
        self.s4xx += o.s4xx;
        self.s5xx += o.s5xx;
        self.errors += o.errors;
        self.resets += o.resets;
        self.reconnects += o.reconnects;
        self.timeouts += o.timeouts;
    }
    /// Requests that failed: malformed responses, connections reset with
    /// requests outstanding, and requests never answered.
    pub fn failed(&self) -> u64 {
        self.errors + self.resets + self.timeouts
    }
    /// Why the run should be marked partial: more than
    /// [`MAX_FAILED_SHARE`] of its requests failed (None: within it).
    pub fn too_many_failures(&self) -> Option<String> {
        let failed = self.failed();
        let answered = self.s1xx + self.s2xx + self.s3xx + self.s4xx + self.s5xx;
        let total = answered + failed;
        if failed == 0 || (failed as f64) <= MAX_FAILED_SHARE * total as f64 {
            return None;
        }
        Some(format!(
            "{failed} of {total} requests failed ({} malformed responses, {} connections reset, {} unanswered; {} reconnects), more than {}%",
            self.errors,
            self.resets,
            self.timeouts,
            self.reconnects,
            MAX_FAILED_SHARE * 100.0
        ))
    }
    /// Responses other than 2xx.
    pub fn non_2xx(&self) -> u64 {
        self.s1xx + self.s3xx + self.s4xx + self.s5xx
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Header,
    /// Body bytes still to skip.
    Body(u64),
    /// Reading a chunk-size line.
    ChunkSize,
    /// Chunk data bytes still to skip, then CRLF.
    ChunkData(u64),
    /// The CRLF after a chunk's data (bytes of it seen).
    ChunkEnd(u8),
    /// Trailer lines after the last chunk, until an empty one.
    Trailer,
}

/// The share of a run's requests that may fail before the run is marked
/// partial (1%, wrk's errors would be a footnote below it).
pub const MAX_FAILED_SHARE: f64 = 0.01;

/// Takes a stream of HTTP/1.1 responses apart, one at a time.
#[derive(Debug)]
pub struct ResponseReader {
    limits: Limits,
    state: State,
    buf: Vec<u8>,
    status: u16,
    /// Body bytes of the current (chunked) response so far.
    body_seen: u64,
    /// The current response says `Connection: close`.
    closing: bool,
}

impl ResponseReader {
    pub fn new(limits: Limits) -> Self {
        ResponseReader {
            limits,
            state: State::Header,
            buf: Vec::new(),
            status: 0,
            body_seen: 0,
            closing: false,
        }
    }

    /// Whether the response `feed` just ended said `Connection: close`:
    /// the server answers nothing more on this connection.
    pub fn closes_after(&self) -> bool {
        self.closing
    }

    /// Feeds bytes; returns how many were used and, when a response
    /// ended within them, its status. Bytes after the end of a response
    /// are left for the next call.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<u16>), HttpError> {
        let mut used = 0;
        while used < input.len() {
            let rest = &input[used..];
            match self.state {
                State::Header => {
                    // Look for the end of the header in what is kept plus
                    // this input, without keeping more than the bound.
                    let keep = self.buf.len();
                    let room = self.limits.max_header.saturating_sub(keep);
                    let take = rest.len().min(room + 1);
                    self.buf.extend_from_slice(&rest[..take]);
                    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                    let mut resp = httparse::Response::new(&mut headers);
                    match resp.parse(&self.buf) {
                        Ok(httparse::Status::Complete(n)) => {
                            let status = resp.code.unwrap_or(0);
                            if !(100..=999).contains(&status) {
                                return Err(HttpError::Header(format!(
                                    "status code {status} outside 100..=999"
                                )));
                            }
                            let (framing, closing) = framing(status, resp.headers)?;
                            self.closing = closing;
                            used += n - keep;
                            self.buf.clear();
                            self.body_seen = 0;
                            if (100..200).contains(&status) {
                                // Interim (100 Continue): the real one follows.
                                continue;
                            }
                            self.status = status;
                            match framing {
                                Framing::Length(0) => return Ok((used, Some(status))),
                                Framing::Length(len) => {
                                    if len > self.limits.max_body {
                                        return Err(HttpError::BodyTooLarge(
                                            len,
                                            self.limits.max_body,
                                        ));
                                    }
                                    self.state = State::Body(len);
                                }
                                Framing::Chunked => self.state = State::ChunkSize,
                            }
                        }
                        Ok(httparse::Status::Partial) => {
                            if self.buf.len() > self.limits.max_header {
                                return Err(HttpError::HeaderTooLarge(self.limits.max_header));
                            }
                            used += take;
                        }
                        Err(e) => return Err(HttpError::Header(e.to_string())),
                    }
                }
                State::Body(left) => {
                    let n = (rest.len() as u64).min(left);
                    used += n as usize;
                    if n == left {
                        self.state = State::Header;
                        return Ok((used, Some(self.status)));
                    }
                    self.state = State::Body(left - n);
                }
                State::ChunkSize | State::Trailer => {
                    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
                        if self.buf.len() + rest.len() > MAX_LINE {
                            return Err(HttpError::Chunk(format!(
                                "line longer than {MAX_LINE} bytes"
                            )));
                        }
                        self.buf.extend_from_slice(rest);
                        used += rest.len();
                        continue;
                    };
                    if self.buf.len() + nl > MAX_LINE {
                        return Err(HttpError::Chunk(format!(
                            "line longer than {MAX_LINE} bytes"
                        )));
                    }
                    self.buf.extend_from_slice(&rest[..nl]);
                    used += nl + 1;
                    let line = std::mem::take(&mut self.buf);
                    let line = line.strip_suffix(b"\r").unwrap_or(&line);
                    if self.state == State::Trailer {
                        if line.is_empty() {
                            self.state = State::Header;
                            return Ok((used, Some(self.status)));
                        }
                        continue;
                    }
                    let size = chunk_size(line)?;
                    self.body_seen = self.body_seen.saturating_add(size);
                    if self.body_seen > self.limits.max_body {
                        return Err(HttpError::BodyTooLarge(
                            self.body_seen,
                            self.limits.max_body,
                        ));
                    }
                    self.state = if size == 0 {
                        State::Trailer
                    } else {
                        State::ChunkData(size)
                    };
                }
                State::ChunkData(left) => {
                    let n = (rest.len() as u64).min(left);
                    used += n as usize;
                    self.state = if n == left {
                        State::ChunkEnd(0)
                    } else {
                        State::ChunkData(left - n)
                    };
                }
                State::ChunkEnd(seen) => {
                    let want: &[u8] = b"\r\n";
                    if rest[0] != want[seen as usize] {
                        return Err(HttpError::Chunk("chunk data not followed by CRLF".into()));
                    }
                    used += 1;
                    self.state = if seen == 1 {
                        State::ChunkSize
                    } else {
                        State::ChunkEnd(1)
                    };
                }
            }
        }
        Ok((used, None))
    }
}

enum Framing {
    Length(u64),
    Chunked,
}

/// How a response's body ends, and whether the server closes after it.
fn framing(status: u16, headers: &[httparse::Header<'_>]) -> Result<(Framing, bool), HttpError> {
    let mut closing = false;
    let mut len: Option<u64> = None;
    let mut chunked = false;
    for h in headers {
        if h.name.eq_ignore_ascii_case("content-length") {
            let s = std::str::from_utf8(h.value)
                .map_err(|_| HttpError::BadLength(String::from_utf8_lossy(h.value).into()))?
                .trim();
            let v: u64 = s
                .parse()
                .ok()
                .filter(|_| s.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| HttpError::BadLength(s.into()))?;
            if len.is_some_and(|l| l != v) {
                return Err(HttpError::BadLength(format!(
                    "{s} (differs from an earlier one)"
                )));
            }
            len = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if h.value
                .split(|&b| b == b',')
                .next_back()
                .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"))
            {
                chunked = true;
            }
        } else if h.name.eq_ignore_ascii_case("connection") {
            // Byte-wise: every keep-alive response carries this header,
            // so no allocation here.
            if h.value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
            {
                closing = true;
            }
        }
    }
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok((Framing::Length(0), closing));
    }
    if chunked {
        return Ok((Framing::Chunked, closing));
    }
    len.map(|l| (Framing::Length(l), closing))
        .ok_or(HttpError::NoLength)
}

fn chunk_size(line: &[u8]) -> Result<u64, HttpError> {
    let hex = line.split(|&b| b == b';').next().unwrap_or_default();
    let hex = std::str::from_utf8(hex)
        .map_err(|_| HttpError::Chunk("chunk size is not text".into()))?
        .trim();
    if hex.is_empty() || hex.len() > 15 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HttpError::Chunk(format!("bad chunk size {hex:?}")));
    }
    u64::from_str_radix(hex, 16).map_err(|_| HttpError::Chunk(format!("bad chunk size {hex:?}")))
}

// ------------------------------------------------------------- server side

/// The fixed responses: the keep-alive one, and the same with
/// `Connection: close` (the last on a connection).
static RESPONSES: OnceLock<(Vec<u8>, Vec<u8>)> = OnceLock::new();

/// The body size of the fixed response when none was set.
pub const DEFAULT_RESPONSE_BODY: usize = 13;
/// Largest fixed response body.
pub const MAX_RESPONSE_BODY: usize = 16 << 20;

/// What the server answers a request it refuses, before it closes (the
/// refusals with a more exact status have their own below).
pub const BAD_REQUEST: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nServer: commbench\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// A request body over [`SERVER_MAX_BODY`] (RFC 9110 §15.5.14).
pub const CONTENT_TOO_LARGE: &[u8] =
    b"HTTP/1.1 413 Content Too Large\r\nServer: commbench\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// A request header over [`SERVER_MAX_HEADER`] (RFC 6585 §5).
pub const HEADER_TOO_LARGE: &[u8] =
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nServer: commbench\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
/// A request with a transfer coding the server does not decode (RFC 9112
/// §6.1: 501).
pub const NOT_IMPLEMENTED: &[u8] =
    b"HTTP/1.1 501 Not Implemented\r\nServer: commbench\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Sets the fixed response's body size (once per process, before serving).
pub fn set_response_body(size: usize) {
    let _ = RESPONSES.set(build_responses(size));
}

fn build_responses(size: usize) -> (Vec<u8>, Vec<u8>) {
    let build = |extra: &str| {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nServer: commbench\r\nContent-Type: text/plain\r\n{extra}Content-Length: {size}\r\n\r\n"
        )
        .into_bytes();
        r.extend((0..size).map(|i| b"hello, world\n"[i % 13]));
        r
    };
    (build(""), build("Connection: close\r\n"))
}

fn responses() -> &'static (Vec<u8>, Vec<u8>) {
    RESPONSES.get_or_init(|| build_responses(DEFAULT_RESPONSE_BODY))
}

/// The fixed response our servers send to every request.
pub fn response() -> &'static [u8] {
    &responses().0
}

/// The fixed response with `Connection: close`: the answer to a request
/// that ends its connection (HTTP/1.0 without keep-alive, or
/// `Connection: close`).
pub fn closing_response() -> &'static [u8] {
    &responses().1
}

/// The longest single answer the server makes (one round's output may
/// pass its bound by this much).
pub fn max_answer_len() -> usize {
    [
        BAD_REQUEST,
        CONTENT_TOO_LARGE,
        HEADER_TOO_LARGE,
        NOT_IMPLEMENTED,
    ]
    .iter()
    .map(|a| a.len())
    .fold(closing_response().len(), usize::max)
}

/// Most bytes of one request header the server keeps.
pub const SERVER_MAX_HEADER: usize = 16 * 1024;
/// Largest request body the server skips.
pub const SERVER_MAX_BODY: u64 = 16 << 20;

/// Why the server refuses a request (it answers 400 and closes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A Content-Length that is not digits only (`+3`, `-1`, `3x`, empty,
    /// a list) or does not fit 64 bits.
    #[error("bad Content-Length")]
    BadLength,
    /// Content-Length given twice with different values: which one frames
    /// the body is ambiguous (a pipelined request could be taken as body).
    #[error("conflicting Content-Length headers")]
    ConflictingLength,
    /// Transfer-Encoding on a request.
    #[error("chunked request bodies are not served")]
    Chunked,
    /// A body over SERVER_MAX_BODY.
    #[error("request body too large")]
    BodyTooLarge,
    /// A header over SERVER_MAX_HEADER.
    #[error("request header too large")]
    HeaderTooLarge,
    /// What httparse refused.
    #[error("malformed request: {0}")]
    Malformed(httparse::Error),
}

impl RequestError {
    /// The answer the server sends before it closes: 413 for a body too
    /// large, 431 for a header too large, 501 for a chunked body, 400 for
    /// the rest.
    pub fn answer(&self) -> &'static [u8] {
        match self {
            RequestError::BodyTooLarge => CONTENT_TOO_LARGE,
            RequestError::HeaderTooLarge => HEADER_TOO_LARGE,
            RequestError::Chunked => NOT_IMPLEMENTED,
            _ => BAD_REQUEST,
        }
    }
}

/// The server's per-connection request splitter: answers every complete
/// request with the fixed response.
///
/// Output is bounded, not input: a pipelined read of N tiny requests would
/// make N responses (10,000 × `GET /` in 270 KB asked for 2.5 GB). Parsing
/// stops once a call's output reaches its bound; the rest of the input is
/// held ([`ServerFilter::holds_input`]) and parsed by
/// [`ServerFilter::resume`] after the engine sent what was made. While it
/// holds input the engine reads no more, so a connection keeps at most one
/// read of input and the bound plus one response of output.
///
/// A connection ends after its last answer ([`ServerFilter::closes`]): a
/// request that asks to close (HTTP/1.0 without `Connection: keep-alive`,
/// or `Connection: close`) gets the response with `Connection: close`; a
/// request the server refuses (malformed, conflicting or non-numeric
/// Content-Length, chunked, too large) gets its refusal
/// ([`RequestError::answer`]: 400, 413, 431 or 501). Input after
/// that answer is dropped unparsed; the engine closes the connection once
/// the output is sent.
#[derive(Debug, Clone, Default)]
pub struct ServerFilter {
    buf: Vec<u8>,
    body_left: u64,
    /// The request whose body is being skipped asked to close.
    close_after_body: bool,
    /// Input not parsed yet: this round's responses reached their bound.
    held: Vec<u8>,
    /// The connection's last answer was made.
    done: bool,
}

impl ServerFilter {
    /// Feeds received bytes; appends a response per complete request to
    /// `out` until `out` holds `max_out` bytes or more, and holds the rest
    /// of the input for [`ServerFilter::resume`]. While input is held, new
    /// input is only appended to it (the engine should not have read it).
    /// A refused request is an error, with its refusal (400, 413, 431,
    /// 501) appended to `out` after the responses before it: send `out`,
    /// then close.
    pub fn feed(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        max_out: usize,
    ) -> Result<(), RequestError> {
        if self.done {
            return Ok(());
        }
        if !self.held.is_empty() {
            self.held.extend_from_slice(input);
            return Ok(());
        }
        let used = self.parse(input, out, max_out)?;
        if !self.done {
            self.held.extend_from_slice(&input[used..]);
        }
        Ok(())
    }

    /// Parses held input, as [`ServerFilter::feed`] would have.
    pub fn resume(&mut self, out: &mut Vec<u8>, max_out: usize) -> Result<(), RequestError> {
        let mut held = std::mem::take(&mut self.held);
        let used = self.parse(&held, out, max_out)?;
        held.drain(..used);
        if !held.is_empty() && !self.done {
            self.held = held;
        }
        Ok(())
    }

    /// Whether input waits to be parsed (read nothing more until it is).
    pub fn holds_input(&self) -> bool {
        !self.held.is_empty()
    }

    /// Whether the connection's last answer was made: send what was made,
    /// read nothing more, and close.
    pub fn closes(&self) -> bool {
        self.done
    }

    /// Bytes this connection's request state holds (a partial header and
    /// held input).
    pub fn own_bytes(&self) -> usize {
        self.buf.capacity() + self.held.capacity()
    }

    /// Parses requests until the input ends, `out` reaches `max_out` or
    /// the connection's last answer is made; returns the input bytes
    /// used. A refused request: its answer ([`RequestError::answer`]) into `out`, the state
    /// dropped, the error returned.
    fn parse(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        max_out: usize,
    ) -> Result<usize, RequestError> {
        self.parse_requests(input, out, max_out).inspect_err(|e| {
            out.extend_from_slice(e.answer());
            self.done = true;
            self.buf = Vec::new();
            self.held = Vec::new();
            self.body_left = 0;
        })
    }

    fn parse_requests(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
        max_out: usize,
    ) -> Result<usize, RequestError> {
        let total = input.len();
        while !input.is_empty() && out.len() < max_out && !self.done {
            if self.body_left > 0 {
                let n = (input.len() as u64).min(self.body_left);
                self.body_left -= n;
                input = &input[n as usize..];
                if self.body_left == 0 {
                    self.answer(out, self.close_after_body);
                }
                continue;
            }
            let keep = self.buf.len();
            let take = input
                .len()
                .min(SERVER_MAX_HEADER + 1 - keep.min(SERVER_MAX_HEADER));
            self.buf.extend_from_slice(&input[..take]);
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let (len, close) = request_framing(&req)?;
                    input = &input[n - keep..];
                    self.buf.clear();
                    if len == 0 {
                        self.answer(out, close);
                    } else {
                        self.body_left = len;
                        self.close_after_body = close;
                    }
                }
                Ok(httparse::Status::Partial) => {
                    if self.buf.len() > SERVER_MAX_HEADER {
                        return Err(RequestError::HeaderTooLarge);
                    }
                    input = &input[take..];
                }
                Err(e) => return Err(RequestError::Malformed(e)),
            }
        }
        Ok(total - input.len())
    }

    /// Appends the response to a complete request; the last one when the
    /// request asked to close.
    fn answer(&mut self, out: &mut Vec<u8>, close: bool) {
        if close {
            out.extend_from_slice(closing_response());
            self.done = true;
            self.buf = Vec::new();
            self.held = Vec::new();
        } else {
            out.extend_from_slice(response());
        }
    }
}

/// A request's body length and whether the connection ends after its
/// response. Content-Length is digits only (no sign, no list), and given
/// twice it must agree (RFC 9112 §6.3: otherwise the framing is
/// ambiguous, and a request smuggled in as body). HTTP/1.0 closes unless
/// it asks to keep alive; HTTP/1.1 keeps alive unless it asks to close.
fn request_framing(req: &httparse::Request<'_, '_>) -> Result<(u64, bool), RequestError> {
    let mut len: Option<u64> = None;
    let (mut close, mut keep_alive) = (false, false);
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = h.value.trim_ascii();
            if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
                return Err(RequestError::BadLength);
            }
            let v: u64 = std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(RequestError::BadLength)?;
            if len.is_some_and(|l| l != v) {
                return Err(RequestError::ConflictingLength);
            }
            len = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(RequestError::Chunked);
        } else if h.name.eq_ignore_ascii_case("connection") {
            for t in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                close |= t.eq_ignore_ascii_case(b"close");
                keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    let len = len.unwrap_or(0);
    if len > SERVER_MAX_BODY {
        return Err(RequestError::BodyTooLarge);
    }
    let http10 = req.version == Some(0);
    Ok((len, close || (http10 && !keep_alive)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_close_response_threw_the_run_away() {
        // A stock nginx closes after 1,000 requests with `Connection:
        // close`: the response is a good one, and the reader says the
        // connection ends after it.
        let mut r = ResponseReader::new(Limits::default());
        let close =
            b"HTTP/1.1 200 OK\r\nConnection: upgrade,  CLOSE \r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(r.feed(close).unwrap(), (close.len(), Some(200)));
        assert!(r.closes_after());
        let mut r = ResponseReader::new(Limits::default());
        let keep = b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(r.feed(keep).unwrap(), (keep.len(), Some(200)));
        assert!(!r.closes_after());
    }

    #[test]
    fn a_run_with_failures_past_the_share_is_partial() {
        let mut c = Counts {
            s2xx: 1000,
            ..Counts::default()
        };
        c.errors = 10;
        assert_eq!(c.too_many_failures(), None);
        c.timeouts = 1;
        let why = c.too_many_failures().unwrap();
        assert!(why.contains("11 of 1011 requests failed"), "{why}");
    }
    #[test]
    fn a_status_of_999_was_counted_as_5xx() {
        let mut r = ResponseReader::new(Limits::default());
        let odd = b"HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n";
        let (_, status) = r.feed(odd).unwrap();
        let mut c = Counts::default();
        c.count(status.unwrap());
        c.count(600);
        c.count(599);
        assert_eq!((c.s5xx, c.errors, c.failed()), (1, 2, 2));
    }

    /// What the server answers `input` fed whole, and whether it refused.
    fn serve(input: &[u8]) -> (Vec<u8>, Option<RequestError>, bool) {
        let mut f = ServerFilter::default();
        let mut out = Vec::new();
        let e = f.feed(input, &mut out, usize::MAX).err();
        (out, e, f.closes())
    }

    #[test]
    fn a_conflicting_duplicate_content_length_gets_400_and_a_close() {
        let smuggle = b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 18\r\n\r\nhelloGET / HTTP/1.1\r\n\r\n";
        assert_eq!(
            serve(smuggle),
            (
                BAD_REQUEST.to_vec(),
                Some(RequestError::ConflictingLength),
                true
            )
        );
        let same = b"POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\nhelloGET / HTTP/1.1\r\n\r\n";
        assert_eq!(serve(same), (response().repeat(2), None, false));
    }

    #[test]
    fn a_signed_content_length_was_taken_as_a_length() {
        for v in ["+3", "-3", "3 3", "3,3", "0x3", "", "99999999999999999999"] {
            let req = format!("POST / HTTP/1.1\r\nContent-Length: {v}\r\n\r\nabc");
            assert_eq!(
                serve(req.as_bytes()),
                (BAD_REQUEST.to_vec(), Some(RequestError::BadLength), true),
                "{v:?}"
            );
        }
        // Whitespace around the digits is not part of the value.
        let ok = b"POST / HTTP/1.1\r\nContent-Length:  3 \r\n\r\nabc";
        assert_eq!(serve(ok), (response().to_vec(), None, false));
    }

    #[test]
    fn http10_and_connection_close_requests_kept_their_connection_open() {
        let closing = (closing_response().to_vec(), None, true);
        assert_eq!(serve(b"GET / HTTP/1.0\r\n\r\n"), closing);
        // What follows the last request is not answered, even a bad one.
        assert_eq!(
            serve(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\n\r\nJUNK\r\n\r\n"),
            closing
        );
        assert_eq!(
            serve(b"POST / HTTP/1.1\r\nConnection: CLOSE\r\nContent-Length: 2\r\n\r\nokGET /"),
            closing
        );
        let kept = (response().repeat(2), None, false);
        assert_eq!(
            serve(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET / HTTP/1.1\r\n\r\n"),
            kept
        );
        // Split anywhere, the same.
        let mut f = ServerFilter::default();
        let mut out = Vec::new();
        for b in b"GET / HTTP/1.1\r\n\r\nGET / HTTP/1.0\r\n\r\nGET / HTTP/1.1\r\n\r\n".chunks(3) {
            f.feed(b, &mut out, usize::MAX).unwrap();
        }
        assert_eq!(out, [response(), closing_response()].concat());
        assert!(f.closes() && !f.holds_input() && f.own_bytes() == 0);
    }

    #[test]
    fn a_malformed_request_was_closed_without_a_400() {
        let (out, e, closes) = serve(b"GET / HTTP/1.1\r\n\r\nNOT HTTP\r\n\r\n");
        assert_eq!(out, [response(), BAD_REQUEST].concat());
        assert!(matches!(e, Some(RequestError::Malformed(_))) && closes);
        // Held input refused on resume: the answers before it, then a 400.
        let mut f = ServerFilter::default();
        let mut out = Vec::new();
        let mut reqs = b"GET / HTTP/1.1\r\n\r\n".repeat(3);
        reqs.extend_from_slice(b"GET / HTTP/1.1\r\nX: \x01\r\n\r\n");
        f.feed(&reqs, &mut out, 1).unwrap();
        assert_eq!(out, response());
        out.clear();
        while f.holds_input() {
            let _ = f.resume(&mut out, usize::MAX);
        }
        assert_eq!(out, [response(), response(), BAD_REQUEST].concat());
        assert!(f.closes());
        // Input after the 400 is dropped.
        out.clear();
        f.feed(b"GET / HTTP/1.1\r\n\r\n", &mut out, usize::MAX)
            .unwrap();
        assert!(out.is_empty() && !f.holds_input());
    }

    use proptest::prelude::*;

    fn read_all(r: &mut ResponseReader, mut b: &[u8]) -> Result<Vec<u16>, HttpError> {
        let mut out = Vec::new();
        while !b.is_empty() {
            let (n, s) = r.feed(b)?;
            out.extend(s);
            b = &b[n..];
        }
        Ok(out)
    }

    #[test]
    fn content_length_chunked_and_bodiless_responses() {
        let stream = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello\
HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nX-T: 1\r\n\r\n\
HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n\
HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n\
HTTP/1.1 201 Created\r\nConnection: Keep-Alive\r\nTransfer-Encoding: gzip, CHUNKED\r\n\r\n0\r\n\r\n";
        let mut r = ResponseReader::new(Limits::default());
        assert_eq!(
            read_all(&mut r, stream).unwrap(),
            vec![200, 404, 204, 503, 201]
        );
        let mut c = Counts::default();
        for s in [200, 404, 204, 503] {
            c.count(s);
        }
        assert_eq!((c.s2xx, c.s4xx, c.s5xx, c.non_2xx()), (2, 1, 1, 2));
    }

    #[test]
    fn bad_responses_get_clear_errors() {
        let cases: &[(&[u8], &str)] = &[
            (b"HTTP/1.1 200 OK\r\n\r\n", "read to close"),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
                "Content-Length",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                "differs",
            ),
            (b"HTTX/1.1 200 OK\r\n\r\n", "malformed"),
            (b"HTTP/1.1 004 NF\r\n\r\n", "status code 4"),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "chunk size",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naXY",
                "CRLF",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
                "limit",
            ),
        ];
        for (bytes, want) in cases {
            let mut r = ResponseReader::new(Limits::default());
            let e = read_all(&mut r, bytes).unwrap_err().to_string();
            assert!(
                e.contains(want),
                "{:?}: {e}",
                String::from_utf8_lossy(bytes)
            );
        }
        // A header that never ends is refused at the bound, not kept.
        let mut r = ResponseReader::new(Limits {
            max_header: 100,
            max_body: 10,
        });
        let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
        big.extend(std::iter::repeat_n(b'a', 500));
        assert_eq!(read_all(&mut r, &big), Err(HttpError::HeaderTooLarge(100)));
        assert!(r.buf.len() <= 101);
    }

    #[test]
    fn requests_encode_and_our_server_answers_each() {
        let req = HttpRequest {
            path: "/x".into(),
            headers: vec![parse_header("X-A: 1").unwrap()],
            body: b"abc".to_vec(),
            ..Default::default()
        };
        let wire = req.encode();
        assert_eq!(
            wire,
            b"GET /x HTTP/1.1\r\nHost: localhost\r\nX-A: 1\r\nContent-Length: 3\r\n\r\nabc"
        );
        let mut f = ServerFilter::default();
        let mut out = Vec::new();
        let mut twice = wire.clone();
        twice.extend_from_slice(&wire);
        for b in twice.chunks(5) {
            f.feed(b, &mut out, usize::MAX).unwrap();
        }
        let mut r = ResponseReader::new(Limits::default());
        assert_eq!(read_all(&mut r, &out).unwrap(), vec![200, 200]);
        assert!(parse_header("bad header: x").is_err());
        assert!(parse_header("X: a\r\nb").is_err());
        assert!(ServerFilter::default()
            .feed(b"NOT HTTP\r\n\r\n", &mut out, usize::MAX)
            .is_err());
    }

    #[test]
    fn pipelined_requests_made_unbounded_responses() {
        // 10,000 pipelined requests in one read: the responses stop at the
        // bound, the rest of the input waits, and resuming after each send
        // answers every request exactly once.
        let one = b"GET / HTTP/1.1\r\n\r\n";
        let reqs: Vec<u8> = one.repeat(10_000);
        let bound = 4096;
        let mut f = ServerFilter::default();
        let mut out = Vec::new();
        f.feed(&reqs, &mut out, bound).unwrap();
        assert!(out.len() < bound + response().len(), "{} bytes", out.len());
        assert!(f.holds_input());
        assert!(f.own_bytes() <= reqs.len() + SERVER_MAX_HEADER + 1);
        let mut answered = out.len() / response().len();
        // Input arriving while some is held is only kept.
        f.feed(one, &mut Vec::new(), bound).unwrap();
        while f.holds_input() {
            out.clear();
            f.resume(&mut out, bound).unwrap();
            assert!(!out.is_empty() && out.len() < bound + response().len());
            answered += out.len() / response().len();
        }
        assert_eq!(answered, 10_001);
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_responses(
            cuts in proptest::collection::vec(1usize..40, 1..30),
            chunks in proptest::collection::vec(0usize..50, 1..6),
        ) {
            let mut stream = Vec::new();
            let mut want = Vec::new();
            for (i, &c) in chunks.iter().enumerate() {
                if i % 2 == 0 {
                    stream.extend_from_slice(format!("HTTP/1.1 200 OK\r\nContent-Length: {c}\r\n\r\n").as_bytes());
                    stream.extend(std::iter::repeat_n(b'x', c));
                    want.push(200);
                } else {
                    stream.extend_from_slice(b"HTTP/1.1 302 Found\r\nTransfer-Encoding: chunked\r\n\r\n");
                    if c > 0 {
                        stream.extend_from_slice(format!("{c:x}\r\n").as_bytes());
                        stream.extend(std::iter::repeat_n(b'y', c));
                        stream.extend_from_slice(b"\r\n");
                    }
                    stream.extend_from_slice(b"0\r\n\r\n");
                    want.push(302);
                }
            }
            let mut r = ResponseReader::new(Limits::default());
            let mut got = Vec::new();
            let mut rest = &stream[..];
            let mut k = 0;
            while !rest.is_empty() {
                let n = cuts[k % cuts.len()].min(rest.len());
                let mut piece = &rest[..n];
                while !piece.is_empty() {
                    let (u, s) = r.feed(piece).unwrap();
                    got.extend(s);
                    piece = &piece[u..];
                }
                rest = &rest[n..];
                k += 1;
            }
            prop_assert_eq!(got, want);
        }
    }
}
