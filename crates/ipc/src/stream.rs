//! Kernel byte-stream transports: Unix domain stream sockets (`uds`) and
//! TCP over loopback (`tcp`, TCP_NODELAY), plus the buffered framing used by
//! them and by `pipe`.
//!
//! A client connects and first sends its session number (4 bytes, LE) and,
//! over tcp, the run's random token (16 bytes, from /dev/urandom, handed to
//! the run's own clients only). The server accepts (bounded wait) until
//! every session has connected; a connection that does not complete that
//! greeting within [`HANDSHAKE_TIMEOUT`], or presents a wrong token, an
//! unknown or an already connected session, is dropped and the run goes on
//! (a stranger on the port cannot fail or hijack a run). A frame
//! goes out as one `writev` of header + payload; the receiver reads through
//! a 64 KiB buffer allocated once per connection, and reads large payloads
//! straight into the destination, so there is no allocation per message.
//! The kernel's own socket buffers give backpressure.

use std::io::{IoSlice, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use crate::error::{IpcError, Result};
use crate::frame::{Header, HEADER_LEN};
use crate::transport::{Endpoint, ListenOptions, MsgRx, MsgTx, Transport, TransportKind};

/// How long the server waits for every client to connect.
pub const ACCEPT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one connection may take to send its greeting.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections waiting for their greeting at most; more are dropped.
const MAX_PENDING: usize = 256;
const TOKEN_LEN: usize = 16;
const RX_BUF: usize = 64 << 10;

/// Sending half over any `Write` (socket or pipe).
pub struct FdTx<W: Write + Send>(pub W);

impl<W: Write + Send> MsgTx for FdTx<W> {
    fn send(&mut self, h: &Header, payload: &[u8]) -> Result<()> {
        let hb = h.encode();
        let total = HEADER_LEN + payload.len();
        let mut done = 0usize;
        while done < total {
            let r = if done < HEADER_LEN {
                let bufs = [IoSlice::new(&hb[done..]), IoSlice::new(payload)];
                self.0.write_vectored(&bufs)
            } else {
                self.0.write(&payload[done - HEADER_LEN..])
            };
            match r {
                Ok(0) => return Err(IpcError::Closed),
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if is_peer_gone(&e) => return Err(IpcError::Closed),
                Err(e) => return Err(IpcError::io("send", e)),
            }
        }
        Ok(())
    }
}

fn is_peer_gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::UnexpectedEof
    )
}

/// Receiving half over any `Read`, buffered.
pub struct FdRx<R: Read + Send> {
    inner: R,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl<R: Read + Send> FdRx<R> {
    /// Wrap a reader.
    pub fn new(inner: R) -> Self {
        FdRx {
            inner,
            buf: vec![0u8; RX_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    fn fill(&mut self) -> Result<()> {
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(0) => return Err(IpcError::Closed),
                Ok(n) => {
                    self.start = 0;
                    self.end = n;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if is_peer_gone(&e) => return Err(IpcError::Closed),
                Err(e) => return Err(IpcError::io("receive", e)),
            }
        }
    }

    fn read_exact(&mut self, mut dst: &mut [u8]) -> Result<()> {
        while !dst.is_empty() {
            if self.start == self.end {
                if dst.len() >= self.buf.len() {
                    match self.inner.read(dst) {
                        Ok(0) => return Err(IpcError::Closed),
                        Ok(n) => {
                            dst = &mut dst[n..];
                            continue;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) if is_peer_gone(&e) => return Err(IpcError::Closed),
                        Err(e) => return Err(IpcError::io("receive", e)),
                    }
                }
                self.fill()?;
            }
            let n = (self.end - self.start).min(dst.len());
            dst[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
            self.start += n;
            dst = &mut dst[n..];
        }
        Ok(())
    }
}

impl<R: Read + Send> MsgRx for FdRx<R> {
    fn recv(&mut self, buf: &mut [u8]) -> Result<Header> {
        let mut hb = [0u8; HEADER_LEN];
        self.read_exact(&mut hb)?;
        let h = Header::decode(&hb)?;
        let len = h.len as usize;
        if len > buf.len() {
            return Err(IpcError::TooLarge {
                len: len as u64,
                max: buf.len() as u64,
            });
        }
        self.read_exact(&mut buf[..len])?;
        Ok(h)
    }
}

enum Listener {
    /// The temp dir holding the socket lives as long as the listener.
    Unix(UnixListener, #[allow(dead_code)] crate::artifacts::TempDir),
    Tcp(TcpListener),
}

enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

/// Server side of `uds` and `tcp`.
pub struct SocketTransport {
    listener: Listener,
    address: String,
    sessions: u32,
    conns: Vec<Option<Conn>>,
    /// The greeting's secret (tcp only).
    token: Option<[u8; TOKEN_LEN]>,
    /// Connections dropped for a missing or wrong greeting.
    strangers: u64,
}

impl SocketTransport {
    /// Listen on a Unix socket in a private temp dir.
    pub fn listen_uds(opts: &ListenOptions) -> Result<SocketTransport> {
        let mut dir = crate::artifacts::TempDir::new()?;
        let path = dir.path().join("sock");
        dir.register(&path);
        let l = UnixListener::bind(&path)
            .map_err(|e| IpcError::io(format!("bind {}", path.display()), e))?;
        Ok(SocketTransport {
            address: path.display().to_string(),
            listener: Listener::Unix(l, dir),
            sessions: opts.sessions,
            conns: Vec::new(),
            token: None,
            strangers: 0,
        })
    }

    /// Listen on 127.0.0.1, an ephemeral port.
    pub fn listen_tcp(opts: &ListenOptions) -> Result<SocketTransport> {
        let l =
            TcpListener::bind("127.0.0.1:0").map_err(|e| IpcError::io("bind 127.0.0.1:0", e))?;
        let addr = l.local_addr().map_err(|e| IpcError::io("local_addr", e))?;
        Ok(SocketTransport {
            address: addr.to_string(),
            listener: Listener::Tcp(l),
            sessions: opts.sessions,
            conns: Vec::new(),
            token: Some(random_token()?),
            strangers: 0,
        })
    }

    /// Connections dropped so far for a missing or wrong greeting.
    pub fn strangers(&self) -> u64 {
        self.strangers
    }

    fn accept_one(&self) -> std::io::Result<Option<Conn>> {
        let r = match &self.listener {
            Listener::Unix(l, _) => l.accept().map(|(s, _)| Conn::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| Conn::Tcp(s)),
        };
        match r {
            Ok(c) => Ok(Some(c)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn random_token() -> Result<[u8; TOKEN_LEN]> {
    let mut t = [0u8; TOKEN_LEN];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut t))
        .map_err(|e| IpcError::io("read /dev/urandom for the run's token", e))?;
    Ok(t)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; TOKEN_LEN]> {
    let b = s.as_bytes();
    if b.len() != 2 * TOKEN_LEN {
        return None;
    }
    let mut t = [0u8; TOKEN_LEN];
    for (i, pair) in b.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        t[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(t)
}

/// A connection whose greeting has not fully arrived.
struct Pending {
    conn: Conn,
    buf: [u8; 4 + TOKEN_LEN],
    got: usize,
    deadline: Instant,
}

impl Conn {
    fn prepare(&self) -> std::io::Result<()> {
        match self {
            Conn::Unix(s) => s.set_nonblocking(true),
            Conn::Tcp(s) => {
                s.set_nodelay(true)?;
                s.set_nonblocking(true)
            }
        }
    }

    fn read_some(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(b),
            Conn::Tcp(s) => s.read(b),
        }
    }

    fn into_blocking(self) -> std::io::Result<Conn> {
        match &self {
            Conn::Unix(s) => s.set_nonblocking(false)?,
            Conn::Tcp(s) => s.set_nonblocking(false)?,
        }
        Ok(self)
    }
}

/// What became of a pending greeting.
enum Greeting {
    Waiting,
    Session(u32),
    Stranger,
}

fn advance(
    p: &mut Pending,
    need: usize,
    token: Option<&[u8; TOKEN_LEN]>,
    now: Instant,
) -> Greeting {
    while p.got < need {
        match p.conn.read_some(&mut p.buf[p.got..need]) {
            Ok(0) => return Greeting::Stranger,
            Ok(n) => p.got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                return if now > p.deadline {
                    Greeting::Stranger
                } else {
                    Greeting::Waiting
                };
            }
            Err(_) => return Greeting::Stranger,
        }
    }
    if let Some(t) = token {
        // Compare every byte (no early exit on the first difference).
        let diff = t
            .iter()
            .zip(&p.buf[4..need])
            .fold(0u8, |d, (a, b)| d | (a ^ b));
        if diff != 0 {
            return Greeting::Stranger;
        }
    }
    Greeting::Session(u32::from_le_bytes([p.buf[0], p.buf[1], p.buf[2], p.buf[3]]))
}

fn endpoint_of(c: &Conn) -> std::io::Result<Endpoint> {
    Ok(match c {
        Conn::Unix(s) => Endpoint {
            tx: Box::new(FdTx(s.try_clone()?)),
            rx: Box::new(FdRx::new(s.try_clone()?)),
        },
        Conn::Tcp(s) => Endpoint {
            tx: Box::new(FdTx(s.try_clone()?)),
            rx: Box::new(FdRx::new(s.try_clone()?)),
        },
    })
}

impl Transport for SocketTransport {
    fn kind(&self) -> TransportKind {
        match self.listener {
            Listener::Unix(..) => TransportKind::Uds,
            Listener::Tcp(_) => TransportKind::Tcp,
        }
    }

    fn address(&self) -> String {
        self.address.clone()
    }

    fn accept_all(&mut self) -> Result<Vec<Endpoint>> {
        let n = self.sessions as usize;
        self.conns = (0..n).map(|_| None).collect();
        match &self.listener {
            Listener::Unix(l, _) => l.set_nonblocking(true),
            Listener::Tcp(l) => l.set_nonblocking(true),
        }
        .map_err(|e| IpcError::io("listener", e))?;
        let need = 4 + if self.token.is_some() { TOKEN_LEN } else { 0 };
        let deadline = Instant::now() + ACCEPT_TIMEOUT;
        let mut pending: Vec<Pending> = Vec::new();
        let mut got = 0;
        while got < n {
            let now = Instant::now();
            while let Some(c) = self.accept_one().map_err(|e| IpcError::io("accept", e))? {
                if pending.len() >= MAX_PENDING || c.prepare().is_err() {
                    self.strangers += 1;
                    continue;
                }
                pending.push(Pending {
                    conn: c,
                    buf: [0u8; 4 + TOKEN_LEN],
                    got: 0,
                    deadline: now + HANDSHAKE_TIMEOUT,
                });
            }
            let mut i = 0;
            while i < pending.len() {
                match advance(&mut pending[i], need, self.token.as_ref(), now) {
                    Greeting::Waiting => i += 1,
                    Greeting::Stranger => {
                        pending.swap_remove(i);
                        self.strangers += 1;
                    }
                    Greeting::Session(id) => {
                        let p = pending.swap_remove(i);
                        match self.conns.get_mut(id as usize) {
                            Some(slot @ None) => {
                                let c = p
                                    .conn
                                    .into_blocking()
                                    .map_err(|e| IpcError::io("handshake", e))?;
                                *slot = Some(c);
                                got += 1;
                            }
                            // Unknown or already connected: not ours.
                            _ => self.strangers += 1,
                        }
                    }
                }
            }
            if got < n {
                if now > deadline {
                    return Err(IpcError::Timeout(format!(
                        "only {got} of {n} clients connected within {ACCEPT_TIMEOUT:?}"
                    )));
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        self.conns
            .iter()
            .map(|c| endpoint_of(c.as_ref().expect("all connected")))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| IpcError::io("clone socket", e))
    }

    fn client_token(&self) -> Option<String> {
        self.token.as_ref().map(|t| hex(t))
    }

    fn abort_session(&self, session: u32) {
        if let Some(Some(c)) = self.conns.get(session as usize) {
            let _ = match c {
                Conn::Unix(s) => s.shutdown(Shutdown::Both),
                Conn::Tcp(s) => s.shutdown(Shutdown::Both),
            };
        }
    }
}

/// Client side of `uds`.
pub fn connect_uds(path: &str, session: u32) -> Result<Endpoint> {
    let mut s =
        UnixStream::connect(path).map_err(|e| IpcError::io(format!("connect {path}"), e))?;
    s.write_all(&session.to_le_bytes())
        .map_err(|e| IpcError::io("handshake", e))?;
    endpoint_of(&Conn::Unix(s)).map_err(|e| IpcError::io("clone socket", e))
}

/// Client side of `tcp`: `token` is the run's secret, hex (see
/// [`crate::transport::TOKEN_ENV`]).
pub fn connect_tcp(addr: &str, session: u32, token: Option<&str>) -> Result<Endpoint> {
    let token = token.and_then(unhex).ok_or_else(|| {
        IpcError::usage(format!(
            "tcp client needs the run's token ({} hex digits in {})",
            2 * TOKEN_LEN,
            crate::transport::TOKEN_ENV
        ))
    })?;
    let mut s = TcpStream::connect(addr).map_err(|e| IpcError::io(format!("connect {addr}"), e))?;
    s.set_nodelay(true)
        .map_err(|e| IpcError::io("TCP_NODELAY", e))?;
    let mut hello = [0u8; 4 + TOKEN_LEN];
    hello[..4].copy_from_slice(&session.to_le_bytes());
    hello[4..].copy_from_slice(&token);
    s.write_all(&hello)
        .map_err(|e| IpcError::io("handshake", e))?;
    endpoint_of(&Conn::Tcp(s)).map_err(|e| IpcError::io("clone socket", e))
}
