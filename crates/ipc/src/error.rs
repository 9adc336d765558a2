//! Errors of the ipc lab. Every failure names what went wrong and, for
//! verification failures, the session and sequence number, so a lost,
//! reordered or corrupted message ends a run with a message instead of a
//! silent number.

use std::io;

/// Everything that can end an ipc run.
#[derive(Debug, thiserror::Error)]
pub enum IpcError {
    /// Bad arguments or configuration (exit 2): core's usage marker,
    /// displayed as what it holds.
    #[error(transparent)]
    Usage(commbench_core::error::Usage),
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What we were doing.
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The peer closed its end before the expected number of messages.
    #[error("session {session}: peer closed the connection after {done} of {expected} messages")]
    PeerClosed {
        /// Session index.
        session: u32,
        /// Messages completed.
        done: u64,
        /// Messages expected.
        expected: u64,
    },
    /// The peer closed or died (raised by the transport, before the session adds context).
    #[error("peer closed or died")]
    Closed,
    /// A message failed verification.
    #[error("session {session}: sequence {seq}: {what}")]
    Verify {
        /// Session index.
        session: u32,
        /// Sequence number expected at this point.
        seq: u64,
        /// What did not match.
        what: String,
    },
    /// A message larger than the supported maximum.
    #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Requested length.
        len: u64,
        /// Maximum supported length.
        max: u64,
    },
    /// A client process failed.
    #[error("client process for session {session} failed: {what}")]
    Client {
        /// Session index.
        session: u32,
        /// Exit status or message.
        what: String,
    },
    /// Stopped because another session of the run failed.
    #[error("stopped: another session failed")]
    Aborted,
    /// A setup step timed out (a client never connected).
    #[error("timed out: {0}")]
    Timeout(String),
}

impl IpcError {
    /// Wrap an io::Error with context.
    pub fn io(what: impl Into<String>, source: io::Error) -> Self {
        IpcError::Io {
            what: what.into(),
            source,
        }
    }

    /// A usage error saying `msg`.
    pub fn usage(msg: String) -> Self {
        IpcError::Usage(commbench_core::error::Usage::msg(msg))
    }

    /// True for argument errors (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, IpcError::Usage(_))
    }
}

impl commbench_core::error::IsUsage for IpcError {
    fn is_usage(&self) -> bool {
        IpcError::is_usage(self)
    }
}

/// Result alias for the lab.
pub type Result<T, E = IpcError> = std::result::Result<T, E>;
