//! The control channel's per-run secret (as the ipc lab's TCP transport
//! does it): 16 random bytes from /dev/urandom, written as 32 hex digits.
//! `mux serve` makes one (or takes [`TOKEN_ENV`]) and hands it out of band:
//! a file only its owner can read (`--control-token-file`, mode 0600), or
//! its stderr; `mux load` presents it (`--control-token-file`,
//! [`TOKEN_ENV`] or `--control-token`) as the first line of every control
//! connection. The local harness needs none: its control channel is the
//! child's stdin/stdout, which no one else can reach.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::{MuxError, Result};

/// Bytes of a token (twice as many hex digits).
pub const TOKEN_LEN: usize = 16;
/// Environment variable carrying the token to `mux serve` and `mux load`.
pub const TOKEN_ENV: &str = "COMMBENCH_MUX_TOKEN";

/// The control channel's secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Token([u8; TOKEN_LEN]);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// A fresh random token.
    pub fn random() -> Result<Token> {
        let mut t = [0u8; TOKEN_LEN];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut t))
            .map_err(|e| MuxError::io("read /dev/urandom for the control token".into(), e))?;
        Ok(Token(t))
    }

    /// 32 hex digits (surrounding whitespace ignored).
    pub fn parse(s: &str) -> Option<Token> {
        let b = s.trim().as_bytes();
        if b.len() != 2 * TOKEN_LEN {
            return None;
        }
        let mut t = [0u8; TOKEN_LEN];
        for (i, pair) in b.chunks(2).enumerate() {
            t[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
        }
        Some(Token(t))
    }

    /// `s` parsed, or a usage error naming `what` it came from.
    pub fn parse_or_usage(s: &str, what: &str) -> Result<Token> {
        Token::parse(s).ok_or_else(|| {
            MuxError::usage(format!(
                "{what}: a control token is {} hex digits (as mux serve writes it)",
                2 * TOKEN_LEN
            ))
        })
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Whether `presented` (hex) is this token; compares every byte (no
    /// early exit on the first difference).
    pub fn matches(&self, presented: &[u8]) -> bool {
        let Some(p) = std::str::from_utf8(presented).ok().and_then(Token::parse) else {
            return false;
        };
        self.0.iter().zip(&p.0).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
    }

    /// Reads a token file, refusing one that others may read.
    pub fn from_file(path: &Path) -> Result<Token> {
        let what = format!("--control-token-file {}", path.display());
        let meta = std::fs::metadata(path)
            .map_err(|e| MuxError::usage(format!("{what}: cannot read it: {e}")))?;
        if !meta.is_file() {
            return Err(MuxError::usage(format!("{what}: not a regular file")));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(MuxError::usage(format!(
                "{what}: other users may read it (mode {mode:03o}): `chmod 600 {}`, or let mux serve write it",
                path.display()
            )));
        }
        let me = commbench_core::sys::euid();
        if meta.uid() != me {
            return Err(MuxError::usage(format!(
                "{what}: owned by uid {}, not by this user (uid {me})",
                meta.uid()
            )));
        }
        // The checked reader: a FIFO swapped in after the look above is
        // refused, not waited on.
        let bytes = commbench_core::userfile::read_input(path, 256, "token file")
            .map_err(|e| MuxError::usage(format!("{what}: cannot read it: {e}")))?;
        let s = String::from_utf8_lossy(&bytes);
        Token::parse_or_usage(&s, &what)
    }

    /// Writes the token to `path`, readable by this user only (mode 0600,
    /// a new file: an existing one is replaced, a symbolic link is not
    /// followed), through the checked writer (no other user's link on
    /// the way is followed either).
    pub fn write_file(&self, path: &Path) -> Result<()> {
        let err = |e| {
            MuxError::io(
                format!("cannot write the control token to {}", path.display()),
                e,
            )
        };
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_file() || m.file_type().is_symlink() => {
                // A link is removed, never followed: the token is only
                // ever written into a new file of its own.
                std::fs::remove_file(path).map_err(err)?
            }
            Ok(_) => {
                return Err(MuxError::usage(format!(
                    "--control-token-file {}: exists and is not a regular file",
                    path.display()
                )))
            }
            Err(_) => {}
        }
        let hex = self.hex();
        commbench_core::artifact::write_atomic_mode(path, 0o600, |f| writeln!(f, "{hex}"))
            .map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_compare_whole() {
        let t = Token::random().unwrap();
        assert_eq!(Token::parse(&t.hex()), Some(t.clone()));
        assert!(t.matches(t.hex().as_bytes()));
        let mut other = t.hex();
        other.replace_range(31.., if other.ends_with('0') { "1" } else { "0" });
        assert!(!t.matches(other.as_bytes()));
        assert!(!t.matches(b""));
        assert!(!t.matches(&t.hex().as_bytes()[..30]));
        assert!(Token::parse("xyz").is_none());
    }

    #[test]
    fn token_files_are_private_and_checked() {
        let dir = std::env::temp_dir().join(format!("cbmux-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t");
        let t = Token::random().unwrap();
        t.write_file(&p).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(Token::from_file(&p).unwrap(), t);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Token::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        // Rewriting replaces the file with a private one.
        t.write_file(&p).unwrap();
        assert_eq!(Token::from_file(&p).unwrap(), t);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
