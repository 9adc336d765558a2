//! Child processes of a run (the server, load workers): started so that
//! they die with this process (PR_SET_PDEATHSIG, no orphan holding ports
//! or connections), with stdin piped for commands and stdout read line by
//! line (each line bounded at 64 MiB) on a thread into a channel, so that
//! every wait for an answer has a timeout.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;

use crate::{MuxError, Result};

/// Longest line read from a child.
const MAX_LINE: u64 = 64 << 20;

/// A started child: its stdin and its stdout's lines.
pub struct Piped {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: Receiver<String>,
}

/// Starts `cmd` (`what` names it in errors).
pub fn spawn_piped(cmd: &mut Command, what: &str) -> Result<Piped> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    #[allow(unsafe_code)]
    // SAFETY: prctl is async-signal-safe; nothing else runs in the child before exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| MuxError::io(format!("cannot start {what}"), e))?;
    let stdin = child.stdin.take();
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| MuxError::Load(format!("{what}: no stdout")))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        loop {
            let mut l = String::new();
            match std::io::Read::take(&mut r, MAX_LINE).read_line(&mut l) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.send(l.trim_end().to_owned()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    Ok(Piped {
        child,
        stdin,
        lines: rx,
    })
}
