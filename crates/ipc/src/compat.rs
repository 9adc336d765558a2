//! The seed's command grammar and CSV, kept exactly so scripts written for
//! tateyama's `reqres_loop` and `data_channel_write` keep working:
//!
//! ```text
//! reqres_loop [{mt|mp} nsession msg_len nloop] [sync|async|nores]
//! reqres_loop [nsession {mt|mp} msg_len nloop] [sync|async|nores]   (the real tool's order)
//! data_channel_write [{mt|mp} nsession msg_len nloop]
//! ```
//!
//! `help` prints a short help; no arguments (or only a mode) runs the sweep.
//! Unlike the seed, arguments are checked strictly: 1 <= nsession <=
//! [`MAX_SESSIONS`], msg_len <= 16 MiB, nloop >= 1, and any other word is a
//! usage error. CSV arithmetic: elapsed is printed with microsecond
//! precision but the rates come from the nanosecond elapsed (as the seed's
//! did: its line `4,mt,sync,128,100000,0.507651,1575884.389323,0.19` is
//! exactly 800000 messages in 507651453 ns); a round trip counts as two
//! messages (nores and data_channel_write: one); GB is 2^30 bytes, two
//! decimals.

use crate::error::{IpcError, Result};
use crate::frame::MAX_MSG_LEN;
use crate::session::{Mode, Workload};
use crate::Clients;

/// Most sessions a run may have (each has its own server thread, and its
/// own 2 × 1 MiB of rings on shm by default).
pub const MAX_SESSIONS: u32 = 64;

/// Usage line of reqres_loop.
pub const REQRES_USAGE: &str =
    "usage: commbench reqres_loop [{mt|mp} nsession msg_len nloop] [sync|async|nores]";
/// Usage line of data_channel_write.
pub const DCW_USAGE: &str = "usage: commbench data_channel_write [{mt|mp} nsession msg_len nloop]";

/// Short help of reqres_loop.
pub const REQRES_HELP: &str = "\
usage: commbench reqres_loop [{mt|mp} nsession msg_len nloop] [sync|async|nores]
       (nsession {mt|mp} msg_len nloop is accepted too)
  mt|mp     one client process with a thread per session | one client process per session
  nsession  sessions, 1..=64
  msg_len   payload bytes per message, 0..=16777216 (header not included)
  nloop     round trips per session (nores: requests per session), >= 1
  sync      send, wait for the echo (default); async: sender and receiver threads;
            nores: requests only, the server reads and discards
  no arguments (or only a mode): sweep sessions 1,2,4,8 x sizes 0,128,1024,4096,32768
  x mt/mp, then print resource usage.
output: nsession,mt|mp,mode,msg_len,nloop,elapsed_s,msgs_per_s,GB_per_s
  (a round trip counts as 2 messages; GB = 2^30 bytes)";

/// Short help of data_channel_write.
pub const DCW_HELP: &str = "\
usage: commbench data_channel_write [{mt|mp} nsession msg_len nloop]
       (nsession {mt|mp} msg_len nloop is accepted too)
  the server streams nloop messages of msg_len bytes to each session;
  clients read and discard. Limits as reqres_loop (commbench reqres_loop help).
  no arguments: sweep sessions 1,2,4,8 x sizes 0,128,1024,4096,32768 x mt/mp.
output: nsession,mt|mp,msg_len,nloop,elapsed_s,msgs_per_s,GB_per_s";

/// One seed-style run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedRun {
    /// mt or mp.
    pub clients: Clients,
    /// Sessions.
    pub sessions: u32,
    /// Payload bytes.
    pub msg_len: usize,
    /// Loops per session.
    pub nloop: u64,
    /// What runs.
    pub workload: Workload,
}

/// What a seed command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedCommand {
    /// Print the short help.
    Help,
    /// The developer sweep (with this workload).
    Sweep(Workload),
    /// One run.
    Run(SeedRun),
}

fn usage(usage: &str, what: String) -> IpcError {
    IpcError::usage(format!("{what}\n{usage}"))
}

fn parse_clients(s: &str) -> Option<Clients> {
    match s {
        "mt" => Some(Clients::Mt),
        "mp" => Some(Clients::Mp),
        _ => None,
    }
}

fn parse_num(word: &str, name: &str, usage_line: &str) -> Result<u64> {
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_digit()) {
        return Err(usage(
            usage_line,
            format!("{name} must be a non-negative integer, got '{word}'"),
        ));
    }
    word.parse::<u64>()
        .map_err(|_| usage(usage_line, format!("{name} '{word}' is too large")))
}

/// Check the numbers of a run against the documented limits.
pub fn check_limits(sessions: u64, msg_len: u64, nloop: u64, usage_line: &str) -> Result<()> {
    if sessions == 0 || sessions > MAX_SESSIONS as u64 {
        return Err(usage(
            usage_line,
            format!("nsession must be between 1 and {MAX_SESSIONS}, got {sessions}"),
        ));
    }
    if msg_len > MAX_MSG_LEN as u64 {
        return Err(usage(
            usage_line,
            format!("msg_len must be at most {MAX_MSG_LEN} (16 MiB), got {msg_len}"),
        ));
    }
    if nloop == 0 {
        return Err(usage(usage_line, "nloop must be at least 1".into()));
    }
    Ok(())
}

fn parse_run(words: &[&str], usage_line: &str, workload: Workload) -> Result<SeedRun> {
    let (clients, sessions) = match (parse_clients(words[0]), parse_clients(words[1])) {
        (Some(c), _) => (c, parse_num(words[1], "nsession", usage_line)?),
        (None, Some(c)) => (c, parse_num(words[0], "nsession", usage_line)?),
        (None, None) => {
            return Err(usage(
                usage_line,
                format!(
                    "expected mt or mp as the first or second argument, got '{}' and '{}'",
                    words[0], words[1]
                ),
            ))
        }
    };
    let msg_len = parse_num(words[2], "msg_len", usage_line)?;
    let nloop = parse_num(words[3], "nloop", usage_line)?;
    check_limits(sessions, msg_len, nloop, usage_line)?;
    Ok(SeedRun {
        clients,
        sessions: sessions as u32,
        msg_len: msg_len as usize,
        nloop,
        workload,
    })
}

fn is_help(w: &str) -> bool {
    matches!(w, "help" | "-h" | "--help")
}

/// Parse `reqres_loop`'s arguments.
pub fn parse_reqres_loop(args: &[String]) -> Result<SeedCommand> {
    let w: Vec<&str> = args.iter().map(String::as_str).collect();
    let mode = |s: &str| {
        Mode::parse(s).ok_or_else(|| {
            usage(
                REQRES_USAGE,
                format!("unknown mode '{s}' (expected sync, async or nores)"),
            )
        })
    };
    match w.as_slice() {
        [] => Ok(SeedCommand::Sweep(Workload::Reqres(Mode::Sync))),
        [h] if is_help(h) => Ok(SeedCommand::Help),
        [m] => Ok(SeedCommand::Sweep(Workload::Reqres(mode(m)?))),
        [a, b, c, d] => Ok(SeedCommand::Run(parse_run(
            &[a, b, c, d],
            REQRES_USAGE,
            Workload::Reqres(Mode::Sync),
        )?)),
        [a, b, c, d, m] => Ok(SeedCommand::Run(parse_run(
            &[a, b, c, d],
            REQRES_USAGE,
            Workload::Reqres(mode(m)?),
        )?)),
        _ => Err(usage(
            REQRES_USAGE,
            format!("expected 0, 1, 4 or 5 arguments, got {}", w.len()),
        )),
    }
}

/// Parse `data_channel_write`'s arguments.
pub fn parse_data_channel_write(args: &[String]) -> Result<SeedCommand> {
    let w: Vec<&str> = args.iter().map(String::as_str).collect();
    match w.as_slice() {
        [] => Ok(SeedCommand::Sweep(Workload::Stream)),
        [h] if is_help(h) => Ok(SeedCommand::Help),
        [a, b, c, d] => Ok(SeedCommand::Run(parse_run(
            &[a, b, c, d],
            DCW_USAGE,
            Workload::Stream,
        )?)),
        _ => Err(usage(
            DCW_USAGE,
            format!("expected 0 or 4 arguments, got {}", w.len()),
        )),
    }
}

/// Rates as the seed prints them, from nanoseconds of elapsed time.
/// Returns (elapsed_s, msgs_per_s, gib_per_s).
pub fn rates(messages: u64, msg_len: usize, elapsed_ns: u64) -> (f64, f64, f64) {
    let elapsed_s = elapsed_ns.max(1) as f64 / 1e9;
    let msgs = messages as f64 / elapsed_s;
    let gib = msgs * msg_len as f64 / (1u64 << 30) as f64;
    (elapsed_s, msgs, gib)
}

/// One CSV line of a run (no newline), in the seed's format for its
/// workload: with the mode column for reqres_loop, without for
/// data_channel_write.
pub fn csv_line(run: &SeedRun, elapsed_ns: u64) -> String {
    let messages = run.workload.messages_per_session(run.nloop) * run.sessions as u64;
    let (e, m, g) = rates(messages, run.msg_len, elapsed_ns);
    let clients = run.clients.as_str();
    match run.workload {
        Workload::Reqres(mode) => format!(
            "{},{},{},{},{},{:.6},{:.6},{:.2}",
            run.sessions,
            clients,
            mode.as_str(),
            run.msg_len,
            run.nloop,
            e,
            m,
            g
        ),
        Workload::Stream => format!(
            "{},{},{},{},{:.6},{:.6},{:.2}",
            run.sessions, clients, run.msg_len, run.nloop, e, m, g
        ),
    }
}

/// The sweep of the no-argument form, `nloop` loops per run
/// ([`SWEEP_NLOOP`] unless overridden).
pub fn sweep(workload: Workload, nloop: u64) -> Vec<SeedRun> {
    let mut v = Vec::new();
    for clients in [Clients::Mt, Clients::Mp] {
        for sessions in [1u32, 2, 4, 8] {
            for msg_len in [0usize, 128, 1024, 4096, 32768] {
                v.push(SeedRun {
                    clients,
                    sessions,
                    msg_len,
                    nloop,
                    workload,
                });
            }
        }
    }
    v
}

/// Loops per session in the sweep (kept short: 40 runs on 2 cores).
pub const SWEEP_NLOOP: u64 = 10_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn seed_example_arithmetic_is_reproduced() {
        let run = SeedRun {
            clients: Clients::Mt,
            sessions: 4,
            msg_len: 128,
            nloop: 100_000,
            workload: Workload::Reqres(Mode::Sync),
        };
        assert_eq!(
            csv_line(&run, 507_651_453),
            "4,mt,sync,128,100000,0.507651,1575884.389323,0.19"
        );
    }

    #[test]
    fn data_channel_example_arithmetic() {
        let run = SeedRun {
            clients: Clients::Mt,
            sessions: 4,
            msg_len: 1024,
            nloop: 1_000_000,
            workload: Workload::Stream,
        };
        // The seed printed 4,mt,1024,1000000,0.556,7192080.3,6.86 (elapsed
        // shortened by hand); 0.5561673 s is the elapsed those rates imply.
        let line = csv_line(&run, 556_167_316);
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 7);
        assert_eq!(&f[..5], &["4", "mt", "1024", "1000000", "0.556167"]);
        let msgs: f64 = f[5].parse().unwrap();
        assert!((msgs - 7_192_080.3).abs() < 5.0, "{msgs}");
        assert_eq!(f[6], "6.86");
    }

    #[test]
    fn nores_counts_one_message_per_loop() {
        let run = SeedRun {
            clients: Clients::Mp,
            sessions: 8,
            msg_len: 1024,
            nloop: 100_000,
            workload: Workload::Reqres(Mode::Nores),
        };
        assert_eq!(
            csv_line(&run, 1_000_000_000),
            "8,mp,nores,1024,100000,1.000000,800000.000000,0.76"
        );
    }

    #[test]
    fn both_argument_orders() {
        let a = parse_reqres_loop(&s(&["mt", "4", "128", "100000"])).unwrap();
        let b = parse_reqres_loop(&s(&["4", "mt", "128", "100000"])).unwrap();
        assert_eq!(a, b);
        let c = parse_reqres_loop(&s(&["8", "mp", "1024", "10", "nores"])).unwrap();
        match c {
            SeedCommand::Run(r) => {
                assert_eq!(r.clients, Clients::Mp);
                assert_eq!(r.sessions, 8);
                assert_eq!(r.workload, Workload::Reqres(Mode::Nores));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_data_channel_write(&s(&["2", "mp", "4096", "7"])).unwrap(),
            parse_data_channel_write(&s(&["mp", "2", "4096", "7"])).unwrap()
        );
    }

    #[test]
    fn help_sweep_and_mode_only() {
        assert_eq!(parse_reqres_loop(&s(&["help"])).unwrap(), SeedCommand::Help);
        assert_eq!(
            parse_reqres_loop(&[]).unwrap(),
            SeedCommand::Sweep(Workload::Reqres(Mode::Sync))
        );
        assert_eq!(
            parse_reqres_loop(&s(&["async"])).unwrap(),
            SeedCommand::Sweep(Workload::Reqres(Mode::Async))
        );
        assert_eq!(sweep(Workload::Stream, 5).len(), 40);
    }

    #[test]
    fn strict_argument_errors() {
        for bad in [
            &["mt", "0", "128", "10"][..],
            &["mt", "65", "128", "10"],
            &["mt", "1", "16777217", "10"],
            &["mt", "1", "128", "0"],
            &["mt", "1", "-5", "10"],
            &["xx", "1", "128", "10"],
            &["mt", "1", "128", "10", "fast"],
            &["mt", "1", "128"],
            &["bogus"],
            &["mt", "1", "1e3", "10"],
        ] {
            let e = parse_reqres_loop(&s(bad)).unwrap_err();
            assert!(e.is_usage(), "{bad:?}");
            assert!(
                e.to_string().contains("usage: commbench reqres_loop"),
                "{e}"
            );
        }
        assert!(parse_data_channel_write(&s(&["mt", "1", "128", "10", "sync"])).is_err());
        assert!(parse_reqres_loop(&s(&["mt", "1", "16777216", "1"])).is_ok());
    }
}
