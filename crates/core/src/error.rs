//! One marker for errors in what the user asked for (exit 2), as opposed to
//! errors of a run (exit 1), shared by every lab and the CLI.
//!
//! A lab's error type says which of its errors are the user's to fix by
//! implementing [`IsUsage`]; the CLI wraps those in [`Usage`] when it hands
//! them on, and finds a [`Usage`] anywhere in an error's chain to choose
//! the exit code. The wrapper is transparent: it displays as, and has the
//! sources of, what it wraps, so marking an error never changes its
//! message.

use std::error::Error;
use std::fmt;

/// An error in what the user asked for (exit 2). Displays as the error or
/// message it wraps.
#[derive(Debug)]
pub struct Usage(Box<dyn Error + Send + Sync + 'static>);

/// A plain message marked as a usage error.
#[derive(Debug)]
struct Message(String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Message {}

impl Usage {
    /// A usage error saying `msg`.
    pub fn msg(msg: impl Into<String>) -> Self {
        Usage(Box::new(Message(msg.into())))
    }

    /// Marks `e` as a usage error, keeping its message and sources.
    pub fn new(e: impl Error + Send + Sync + 'static) -> Self {
        Usage(Box::new(e))
    }

    /// The marked error.
    pub fn inner(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.0
    }

    /// True when `e` or one of its sources is a [`Usage`].
    pub fn in_chain(e: &(dyn Error + 'static)) -> bool {
        let mut cur = Some(e);
        while let Some(c) = cur {
            if c.is::<Usage>() {
                return true;
            }
            cur = c.source();
        }
        false
    }
}

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl Error for Usage {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

/// An error type that knows which of its values are the user's to fix.
pub trait IsUsage: Error + Send + Sync + Sized + 'static {
    /// True for an error in what the user asked for (exit 2).
    fn is_usage(&self) -> bool;
}

impl IsUsage for Usage {
    fn is_usage(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum LabError {
        #[error("bad --size 3")]
        Config,
        #[error("reading the ring: {0}")]
        Io(#[source] std::io::Error),
    }

    impl IsUsage for LabError {
        fn is_usage(&self) -> bool {
            matches!(self, LabError::Config)
        }
    }

    #[test]
    fn a_marked_error_keeps_its_message_and_sources() {
        let e = Usage::new(LabError::Io(std::io::Error::other("gone")));
        assert_eq!(e.to_string(), "reading the ring: gone");
        assert_eq!(e.source().unwrap().to_string(), "gone");
        assert!(Usage::in_chain(&e));
        assert_eq!(Usage::msg("no such run").to_string(), "no such run");
    }

    #[test]
    fn a_lab_error_says_which_are_usage_errors() {
        assert!(LabError::Config.is_usage());
        assert!(!LabError::Io(std::io::Error::other("gone")).is_usage());
        assert!(Usage::msg("x").is_usage());
        assert!(!Usage::in_chain(&LabError::Config));
    }
}
