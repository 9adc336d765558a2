//! The lab's errors: usage (exit 2) versus run failures (exit 1), each
//! saying what happened and what to do.

use commbench_core::error::Usage;
use std::io;

#[derive(Debug, thiserror::Error)]
pub enum MuxError {
    /// What the user asked for cannot be done (exit 2): core's usage
    /// marker, displayed as what it holds.
    #[error(transparent)]
    Usage(Usage),
    /// An engine this kernel or process cannot use.
    #[error("{0}")]
    Unavailable(String),
    /// (The io::Error is part of the message, not a `source`, so that
    /// anyhow's chain does not print it twice.)
    #[error("{what}: {err}")]
    Io {
        /// What was being done (`cannot listen on 0.0.0.0:7000`).
        what: String,
        /// The OS error.
        err: io::Error,
    },
    /// The server closed or reset a connection mid-run (it died or failed).
    #[error("server failure: connection {conn} {what}")]
    ServerClosed {
        /// The connection's index.
        conn: usize,
        /// What happened to it (`closed by the server in round 3 of 10 …`).
        what: String,
    },
    /// The server's answer is not what the protocol expects (an echo
    /// that differs from what was sent, bytes nobody asked for). Worded
    /// for any server: a remote one may be no echo server of ours.
    #[error("wrong answer from the server: {0}")]
    Corrupt(String),
    /// Nothing moved before the deadline.
    #[error("run stalled: {0}")]
    Stalled(String),
    /// The server process: failed to start, exited or answered nonsense.
    #[error("server process: {0}")]
    Server(String),
    #[error("load: {0}")]
    Load(String),
    /// Fewer connections than asked (and --allow-partial not given).
    #[error(transparent)]
    Partial(PartialConnect),
}

/// Fewer connections than a run asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartialConnect {
    /// Some connections could not be made.
    #[error("only {connected} of {asked} connections could be made ({failed} failed; first: {first}); fix the cause or pass --allow-partial to measure with fewer (marked partial)")]
    Fewer {
        connected: usize,
        asked: usize,
        failed: u64,
        /// The first connect error, as reported.
        first: String,
    },
    /// Not one connection could be made.
    #[error("no connection could be made to {target}: {first}")]
    NoneMade {
        target: std::net::SocketAddr,
        /// The first connect error, as reported.
        first: String,
    },
    /// An HTTP server took fewer connections than asked.
    #[error("{server}: only {connected} of {asked} connections made (first error: {first})")]
    Server {
        server: &'static str,
        connected: usize,
        asked: usize,
        /// The first connect error, empty when none was reported.
        first: String,
    },
}

impl MuxError {
    /// A usage error saying `msg`.
    pub fn usage(msg: String) -> Self {
        MuxError::Usage(Usage::msg(msg))
    }

    /// An I/O error while doing `what`.
    pub fn io(what: String, err: io::Error) -> Self {
        MuxError::Io { what, err }
    }

    /// True for errors in what the user asked for (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, MuxError::Usage(_))
    }
}

impl commbench_core::error::IsUsage for MuxError {
    fn is_usage(&self) -> bool {
        MuxError::is_usage(self)
    }
}

pub type Result<T> = std::result::Result<T, MuxError>;
