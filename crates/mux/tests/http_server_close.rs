//! Issue 38 item 10: `mux serve --protocol http1` took conflicting
//! duplicate Content-Length (the last won, so a pipelined request was
//! swallowed as body), took `+3` as a length, kept HTTP/1.0 and
//! `Connection: close` connections open, and closed on a malformed request
//! without a word. Now every engine answers a refused request with a
//! minimal 400 and closes, and answers a request that asks to close with
//! `Connection: close` and closes; requests after that last answer are
//! not answered. Loopback only; reads are bounded by a generous timeout
//! that only guards against a hang, nothing is timed.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use commbench_mux::engine::{EngineKind, Lookup};
use commbench_mux::http1::{
    closing_response, response, BAD_REQUEST, CONTENT_TOO_LARGE, HEADER_TOO_LARGE, NOT_IMPLEMENTED,
    SERVER_MAX_BODY, SERVER_MAX_HEADER,
};
use commbench_mux::server::{self, ServeConfig, Server};
use commbench_mux::Protocol;

fn engines() -> Vec<EngineKind> {
    EngineKind::runnable_here(|e, why| {
        commbench_core::testing::skip_part(e.as_str(), "io_uring", why)
    })
}

fn serve(engine: EngineKind) -> Server {
    server::start(&ServeConfig {
        engine,
        lookup: Lookup::Index,
        protocol: Protocol::Http1,
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        buf_size: 16 << 10,
        max_conns: 16,
        cpus: None,
        extra_work_ns: 0,
        tls: None,
    })
    .unwrap()
}

fn connect(srv: &Server) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    // Guards against a hang only: the server answers at once.
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

/// Sends `request` and reads until the server closes (the test fails on
/// the hang guard if it never does); the client keeps its side open.
fn answer_then_close(srv: &Server, request: &[u8]) -> Vec<u8> {
    let mut s = connect(srv);
    s.write_all(request).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .unwrap_or_else(|e| panic!("{:?}: not closed: {e}", String::from_utf8_lossy(request)));
    got
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn a_conflicting_duplicate_content_length_gets_400_and_a_close() {
    for engine in engines() {
        let srv = serve(engine);
        // Last-wins would have taken 18 bytes of body: the GET behind it.
        let smuggle = b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 18\r\n\r\nhelloGET / HTTP/1.1\r\n\r\n";
        assert_eq!(answer_then_close(&srv, smuggle), BAD_REQUEST, "{engine:?}");
        // The same length twice is one length.
        let mut s = connect(&srv);
        s.write_all(b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nokGET / HTTP/1.1\r\n\r\n")
            .unwrap();
        let mut two = vec![0u8; 2 * response().len()];
        s.read_exact(&mut two).unwrap();
        assert_eq!(two, response().repeat(2), "{engine:?}");
        let st = srv.stop().unwrap();
        assert_eq!(st.loops.protocol_errors, 1, "{engine:?}");
    }
}

#[test]
fn a_signed_content_length_was_taken_as_a_length() {
    for engine in engines() {
        let srv = serve(engine);
        for bad in [
            &b"POST / HTTP/1.1\r\nContent-Length: +3\r\n\r\nabc"[..],
            b"POST / HTTP/1.1\r\nContent-Length: -0\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\nabc",
            b"POST / HTTP/1.1\r\nContent-Length: \r\n\r\n",
        ] {
            assert_eq!(answer_then_close(&srv, bad), BAD_REQUEST, "{engine:?}");
        }
        let st = srv.stop().unwrap();
        assert_eq!(st.loops.protocol_errors, 4, "{engine:?}");
    }
}

#[test]
fn http10_and_connection_close_requests_kept_their_connection_open() {
    for engine in engines() {
        let srv = serve(engine);
        assert_eq!(
            answer_then_close(&srv, b"GET / HTTP/1.0\r\n\r\n"),
            closing_response(),
            "{engine:?}"
        );
        // Pipelined after the request that asked to close: not answered.
        let close = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\nGET / HTTP/1.1\r\n\r\n";
        assert_eq!(
            answer_then_close(&srv, close),
            closing_response(),
            "{engine:?}"
        );
        // A body first, then the close.
        let body = b"POST / HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc";
        assert_eq!(
            answer_then_close(&srv, body),
            closing_response(),
            "{engine:?}"
        );
        // HTTP/1.0 with keep-alive stays open until the client closes.
        let mut s = connect(&srv);
        s.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let mut one = vec![0u8; response().len()];
        s.read_exact(&mut one).unwrap();
        assert_eq!(one, response(), "{engine:?}");
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        s.read_exact(&mut one).unwrap();
        assert_eq!(one, response(), "{engine:?}");
        s.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{engine:?}");
        let st = srv.stop().unwrap();
        assert_eq!(st.loops.protocol_errors, 0, "{engine:?}");
    }
}

#[test]
fn a_malformed_request_was_closed_without_a_400() {
    for engine in engines() {
        let srv = serve(engine);
        // The good request before it is answered, then the 400.
        let got = answer_then_close(&srv, b"GET / HTTP/1.1\r\n\r\nNOT HTTP AT ALL\r\n\r\n");
        assert_eq!(got, cat(&[response(), BAD_REQUEST]), "{engine:?}");
        let st = srv.stop().unwrap();
        assert_eq!(st.loops.protocol_errors, 1, "{engine:?}");
    }
}

/// Every refusal was a 400, where the status says more: 413 for a body
/// over the server's bound, 431 for a header over it, 501 for a chunked
/// body (a transfer coding the server does not decode).
#[test]
fn every_refusal_answered_400() {
    for engine in engines() {
        let srv = serve(engine);
        let chunked = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(
            answer_then_close(&srv, chunked),
            NOT_IMPLEMENTED,
            "{engine:?}"
        );
        let body = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            SERVER_MAX_BODY + 1
        );
        assert_eq!(
            answer_then_close(&srv, body.as_bytes()),
            CONTENT_TOO_LARGE,
            "{engine:?}"
        );
        let header = format!(
            "GET / HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(SERVER_MAX_HEADER)
        );
        assert_eq!(
            answer_then_close(&srv, header.as_bytes()),
            HEADER_TOO_LARGE,
            "{engine:?}"
        );
        let st = srv.stop().unwrap();
        assert_eq!(st.loops.protocol_errors, 3, "{engine:?}");
    }
}

/// Sends `request`, then `more` bytes of whatever, all before reading;
/// then reads until the server closes. A reset anywhere is the failure.
fn answer_while_sending(srv: &Server, request: &[u8], more: usize) -> Vec<u8> {
    let mut s = connect(srv);
    let mut all = request.to_vec();
    all.extend(std::iter::repeat_n(b'x', more));
    s.write_all(&all)
        .unwrap_or_else(|e| panic!("the server reset the connection while the client sent: {e}"));
    s.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .unwrap_or_else(|e| panic!("the answer was lost to {e} ({} bytes read)", got.len()));
    got
}

/// A server that closes at once after its last answer, with the client's
/// input still unread, makes the kernel send a reset instead of a FIN and
/// drop what it had not sent yet: a client still sending lost the 400 (and
/// a pipelining client the responses before a `Connection: close`). Every
/// engine now sends a FIN after the answer and reads and drops what still
/// comes until the client closes.
#[test]
fn a_refusal_was_lost_to_a_reset_while_the_client_was_still_sending() {
    for engine in engines() {
        let srv = serve(engine);
        let got = answer_while_sending(&srv, b"NOT HTTP AT ALL\r\n\r\n", 512 << 10);
        assert_eq!(got, BAD_REQUEST, "{engine:?}");
        let mut pipelined = b"GET / HTTP/1.1\r\n\r\n".repeat(200);
        pipelined.extend_from_slice(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
        let got = answer_while_sending(&srv, &pipelined, 512 << 10);
        let want = [response().repeat(200), closing_response().to_vec()].concat();
        assert!(
            got == want,
            "{engine:?}: {} bytes, want {}",
            got.len(),
            want.len()
        );
        let st = srv.stop().unwrap();
        assert_eq!(st.loops.protocol_errors, 1, "{engine:?}");
        assert_eq!(
            st.loops.live, 0,
            "{engine:?}: closed once the client closed"
        );
    }
}
