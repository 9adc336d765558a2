//! How the binary classifies errors: a usage error (exit 2) is one with a
//! [`Usage`] marker in its chain (`commbench_core::error`), a closed
//! stdout pipe ends quietly, anything else is a run error (exit 1).
//! Commands mark their own argument errors with [`usage`] and hand lab
//! errors on through [`lab_err`], which marks those the lab calls usage
//! errors.

use commbench_core::error::{IsUsage, Usage};

/// Wraps a message as a usage error.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    Usage::msg(msg).into()
}

/// A typed error in an argument, marked as a usage error, its message
/// unchanged.
pub fn usage_err(e: impl std::error::Error + Send + Sync + 'static) -> anyhow::Error {
    Usage::new(e).into()
}

/// A lab's error as the CLI hands it on: marked as a usage error when the
/// lab says it is one, its message unchanged.
pub fn lab_err<E: IsUsage>(e: E) -> anyhow::Error {
    if e.is_usage() {
        Usage::new(e).into()
    } else {
        e.into()
    }
}

/// True when the error, or one of its causes, is a usage error.
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Usage>())
}

/// True when the error comes from writing into a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_errors_are_marked_as_the_lab_says() {
        let e = lab_err(commbench_core::linerate::LineRateError::Size(3));
        assert!(is_usage(&e));
        let msg = e.to_string();
        assert!(msg.starts_with("frame size 3 B"), "{msg}");
        let e = lab_err(commbench_report::ReportError::Template("x".into()));
        assert!(!is_usage(&e));
        let e = usage("give two files").context("compare");
        assert!(is_usage(&e), "a marker under context still counts");
        assert_eq!(format!("{e:#}"), "compare: give two files");
    }
}
