//! `mux load --target`: which control channel the load side uses for a
//! server someone else started. A server that is not commbench's (nginx,
//! lighttpd) has no control channel: when nothing answers on the default
//! control port (the echo port + 1), or something answers that is not a
//! commbench control channel, the run goes on with the server's CPU
//! unknown and says why in its table and records. A token is asked for
//! only when a commbench control channel answers; a token given means a
//! commbench server, and its control channel is used without a probe.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::token::{Token, TOKEN_ENV};
use crate::{MuxError, Remote, Result};

/// How long the probe waits to connect and for an answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Which control channel `mux load` was told to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlChoice {
    /// `--control none`: server CPU unknown by request.
    None,
    /// `--control ADDR:PORT`: a commbench control channel is expected there.
    Given(SocketAddr),
    /// No `--control`: the echo port + 1, used if a commbench control
    /// channel answers there.
    Default(SocketAddr),
}

/// What answered on a control address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Nothing listens (or nothing answered the connect): why.
    Nothing(String),
    /// A commbench control channel (it asked for its token).
    Commbench,
    /// Something else: what it said.
    Other(String),
}

/// Connects to `addr`, sends `STATS` without a token and reads one line:
/// a commbench control channel refuses it with `ERR ...control...`.
pub fn probe(addr: SocketAddr) -> Probe {
    let s = match TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) {
        Ok(s) => s,
        Err(e) => return Probe::Nothing(format!("nothing answers on {addr} ({})", e.kind())),
    };
    let _ = s.set_read_timeout(Some(PROBE_TIMEOUT));
    let _ = s.set_write_timeout(Some(PROBE_TIMEOUT));
    let _ = (&s).write_all(b"STATS\n");
    let mut line = String::new();
    let got = BufReader::new((&s).take(256)).read_line(&mut line);
    let line = line.trim_end();
    if line.starts_with("ERR ") && line.contains("control") {
        return Probe::Commbench;
    }
    let said = match got {
        Ok(_) if !line.is_empty() => {
            let cut: String = line.chars().take(40).collect();
            format!("it answered {cut:?}")
        }
        _ => format!("it said nothing in {} s", PROBE_TIMEOUT.as_secs()),
    };
    Probe::Other(format!(
        "{addr} accepts connections but is not a commbench control channel ({said})"
    ))
}

/// The server `mux load` talks to: a control channel with its token, or
/// none and why the server's CPU is unknown. A usage error when a
/// commbench control channel needs a token and none was given.
pub fn resolve(target: SocketAddr, choice: ControlChoice, token: Option<Token>) -> Result<Remote> {
    let unknown = |why: String| Remote {
        target,
        control: None,
        token: None,
        unknown: Some(why),
    };
    let control = match choice {
        ControlChoice::None => return Ok(unknown("--control none".into())),
        ControlChoice::Given(a) => a,
        // A token given says a commbench server is meant: its control
        // channel is used (a server still starting gets the run retried
        // by its caller, not a run with its CPU unknown).
        ControlChoice::Default(a) if token.is_some() => a,
        ControlChoice::Default(a) => match probe(a) {
            Probe::Nothing(why) | Probe::Other(why) => return Ok(unknown(why)),
            Probe::Commbench => a,
        },
    };
    match token {
        Some(t) => Ok(Remote {
            target,
            control: Some(control),
            token: Some(t),
            unknown: None,
        }),
        None => Err(MuxError::usage(format!(
            "the server's control channel {control} needs its token: give --control-token-file PATH \
             (written by mux serve --control-token-file PATH), {TOKEN_ENV} or --control-token; \
             or --control none (server CPU unknown)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn closed_port() -> SocketAddr {
        // Bound then dropped: nothing listens there now.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    }

    #[test]
    fn load_against_a_server_without_a_control_port_goes_on_with_server_cpu_unknown() {
        let target: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let r = resolve(target, ControlChoice::Default(closed_port()), None).unwrap();
        assert!(r.control.is_none());
        let why = r.unknown.unwrap();
        assert!(why.starts_with("nothing answers on 127.0.0.1:"), "{why}");
    }

    #[test]
    fn something_else_on_the_control_port_is_not_asked_for_a_token() {
        // An HTTP server (nginx's shape): reads the line, answers 400.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 16];
            let _ = s.read(&mut b);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        });
        let r = resolve(
            "127.0.0.1:9".parse().unwrap(),
            ControlChoice::Default(addr),
            None,
        )
        .unwrap();
        t.join().unwrap();
        assert!(r.control.is_none());
        let why = r.unknown.unwrap();
        assert!(why.contains("not a commbench control channel"), "{why}");
        assert!(why.contains("400 Bad Request"), "{why}");
    }

    #[test]
    fn a_commbench_control_channel_without_a_token_asks_for_it() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let _ = s.write_all(
                b"ERR send the control token first (TOKEN <hex>; mux load: --control-token-file)\n",
            );
        });
        let e = resolve(
            "127.0.0.1:9".parse().unwrap(),
            ControlChoice::Default(addr),
            None,
        )
        .unwrap_err();
        t.join().unwrap();
        assert!(matches!(e, MuxError::Usage(_)), "{e}");
        assert!(e.to_string().contains("needs its token"), "{e}");
        // A token given means a commbench server: its default control
        // port is used, not probed (a server still binding it must not
        // turn the run into one with its CPU unknown).
        let t = Token::parse_or_usage("00112233445566778899aabbccddeeff", "t").unwrap();
        let closed = closed_port();
        let r = resolve(
            "127.0.0.1:9".parse().unwrap(),
            ControlChoice::Default(closed),
            Some(t),
        )
        .unwrap();
        assert_eq!(r.control, Some(closed));
        assert!(r.unknown.is_none());
        // A control address given explicitly is trusted without a probe.
        let e = resolve(
            "127.0.0.1:9".parse().unwrap(),
            ControlChoice::Given(closed_port()),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("needs its token"), "{e}");
    }
}
