//! One `Transport` trait, four implementations (like mio's selector
//! backends): `shm` (rings in one /dev/shm segment, the default), `uds`
//! (Unix stream sockets), `pipe` (a pair of FIFOs per session) and `tcp`
//! (loopback, TCP_NODELAY).
//!
//! A transport is created by the server for a fixed number of sessions; it
//! hands out an `address` string (segment name, socket path, FIFO directory
//! or host:port) that a client thread or a re-executed client process passes
//! to [`connect`]. Each session is a pair of byte streams carrying framed
//! messages ([`crate::frame`]); its two directions are separate objects so an
//! `async` client can send from one thread and receive on another.

use std::str::FromStr;

use crate::error::{IpcError, Result};
use crate::frame::Header;
use crate::wait::WaitPolicy;

/// Sending half of a session.
pub trait MsgTx: Send {
    /// Send one framed message (header + payload), blocking on backpressure.
    fn send(&mut self, h: &Header, payload: &[u8]) -> Result<()>;
}

/// Receiving half of a session.
pub trait MsgRx: Send {
    /// Receive one message into `buf` (which must be large enough); returns
    /// its header, the payload is `buf[..header.len]`.
    fn recv(&mut self, buf: &mut [u8]) -> Result<Header>;

    /// Receive one message and hand it to `read` where it lies: a shm
    /// ring lends the bytes in the ring and frees them when `read`
    /// returns, so the consumer reads them without a copy; the other
    /// transports receive into `buf` first, the copy a socket or a pipe
    /// cannot avoid ([`Lent::in_place`] says which).
    fn recv_with(
        &mut self,
        buf: &mut [u8],
        read: &mut dyn FnMut(&Header, Lent<'_>) -> Result<()>,
    ) -> Result<Header> {
        let h = self.recv(buf)?;
        read(&h, Lent::copied(&buf[..h.len as usize]))?;
        Ok(h)
    }
}

/// A received payload as a consumer is handed it: where it lies (the
/// second part is empty unless it wraps at a ring's end).
#[derive(Debug, Clone, Copy)]
pub struct Lent<'a> {
    pub parts: [&'a [u8]; 2],
    /// The bytes lie where the producer wrote them (a ring): the
    /// consumer's reading is their only pass. False: they were received
    /// into the consumer's buffer, and that copy read them.
    pub in_place: bool,
}

impl<'a> Lent<'a> {
    /// Bytes received into the consumer's buffer.
    pub fn copied(b: &'a [u8]) -> Lent<'a> {
        Lent {
            parts: [b, &[]],
            in_place: false,
        }
    }

    pub fn len(&self) -> usize {
        self.parts[0].len() + self.parts[1].len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Both halves of one session's connection.
pub struct Endpoint {
    /// Sending half.
    pub tx: Box<dyn MsgTx>,
    /// Receiving half.
    pub rx: Box<dyn MsgRx>,
}

/// Server side of a transport, created for a fixed number of sessions.
pub trait Transport: Send + Sync {
    /// Which transport this is.
    fn kind(&self) -> TransportKind;
    /// What a client passes to [`connect`].
    fn address(&self) -> String;
    /// What the client of `session` passes to [`connect`] (defaults to
    /// [`Transport::address`]; shm appends the session's doorbells).
    fn client_address(&self, _session: u32) -> String {
        self.address()
    }
    /// Let (or stop letting) a client process about to be spawned inherit
    /// the descriptors its session needs.
    fn share_with_child(&self, _session: u32, _share: bool) {}
    /// Server ends of every session, in session order. Waits (bounded) for
    /// the clients to connect where the transport needs it.
    fn accept_all(&mut self) -> Result<Vec<Endpoint>>;
    /// How the run's endpoints waited (shm: counts summed over every
    /// endpoint that has been dropped, clients' processes included).
    fn wait_stats(&self) -> Option<crate::wait::WaitStats> {
        None
    }
    /// A session's client is known dead: make its server end fail promptly.
    fn abort_session(&self, session: u32);
    /// The run's secret a client must present (tcp), hex; None when the
    /// transport needs none. Child processes get it in [`TOKEN_ENV`], never
    /// in their arguments.
    fn client_token(&self) -> Option<String> {
        None
    }
}

/// Environment variable carrying the run's token to its client processes
/// (readable only by the same user, unlike arguments).
pub const TOKEN_ENV: &str = "COMMBENCH_IPC_TOKEN";

/// Options a server needs to open a transport.
#[derive(Debug, Clone, Copy)]
pub struct ListenOptions {
    /// Number of sessions.
    pub sessions: u32,
    /// shm ring size per direction, bytes (power of two).
    pub ring_bytes: usize,
    /// shm wait policy.
    pub wait: WaitPolicy,
    /// Threads the whole run uses (server and clients), for the adaptive
    /// policy's "is a core free for the peer" test.
    pub threads: u32,
    /// CPUs the run may use (for the same test).
    pub cpus: u32,
    /// The run places each session's server and client on different CPUs
    /// (the adaptive policy may then spin while it wakes its peer).
    pub apart: bool,
}

/// The four transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// Shared-memory rings in /dev/shm.
    #[default]
    Shm,
    /// Unix domain stream sockets.
    Uds,
    /// A pair of named pipes per session.
    Pipe,
    /// TCP over loopback with TCP_NODELAY.
    Tcp,
}

impl TransportKind {
    /// Every transport, in display order.
    pub const ALL: [TransportKind; 4] = [
        TransportKind::Shm,
        TransportKind::Uds,
        TransportKind::Pipe,
        TransportKind::Tcp,
    ];

    /// Command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Shm => "shm",
            TransportKind::Uds => "uds",
            TransportKind::Pipe => "pipe",
            TransportKind::Tcp => "tcp",
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TransportKind {
    type Err = IpcError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "shm" => Ok(TransportKind::Shm),
            "uds" | "unix" => Ok(TransportKind::Uds),
            "pipe" => Ok(TransportKind::Pipe),
            "tcp" => Ok(TransportKind::Tcp),
            _ => Err(IpcError::usage(format!(
                "unknown transport '{s}' (expected shm, uds, pipe or tcp)"
            ))),
        }
    }
}

/// Open the server side of a transport.
pub fn listen(kind: TransportKind, opts: &ListenOptions) -> Result<Box<dyn Transport>> {
    Ok(match kind {
        TransportKind::Shm => Box::new(crate::shm::ShmTransport::create(opts)?),
        TransportKind::Uds => Box::new(crate::stream::SocketTransport::listen_uds(opts)?),
        TransportKind::Tcp => Box::new(crate::stream::SocketTransport::listen_tcp(opts)?),
        TransportKind::Pipe => Box::new(crate::pipe::PipeTransport::create(opts)?),
    })
}

/// Connect the client side of `session` to a transport's `address`,
/// presenting the run's `token` where the transport needs one (tcp).
pub fn connect(
    kind: TransportKind,
    address: &str,
    session: u32,
    token: Option<&str>,
) -> Result<Endpoint> {
    match kind {
        TransportKind::Shm => crate::shm::connect(address, session),
        TransportKind::Uds => crate::stream::connect_uds(address, session),
        TransportKind::Tcp => crate::stream::connect_tcp(address, session, token),
        TransportKind::Pipe => crate::pipe::connect(address, session),
    }
}
