//! The `mp` client process: `commbench __ipc-client ...` (hidden). It
//! connects one session, prints `ready`, waits for `go` on stdin, runs the
//! client loop and prints one JSON result line (received count and, in sync
//! mode, the latency histogram as value/count pairs). It dies with its
//! parent (PR_SET_PDEATHSIG), so a killed server never leaves clients
//! behind. Exit 0 on success, 1 with a message on stderr otherwise.

use std::io::{BufRead, Write};

use commbench_core::placement::CpuList;
use commbench_core::stats::LatencyHistogram;

use crate::error::{IpcError, Result};
use crate::session::{self, SessionSpec, Workload};
use crate::transport::{self, TransportKind};

/// Exit status of a client process that stopped because the server side
/// closed or aborted (a consequence, not a cause, of a failed run).
pub const EXIT_PEER_GONE: i32 = 3;

struct ChildArgs {
    kind: TransportKind,
    address: String,
    spec: SessionSpec,
    parent: Option<u32>,
    cpus: Option<CpuList>,
}

fn parse(args: &[String]) -> Result<ChildArgs> {
    let mut kind = None;
    let mut address = None;
    let mut session = None;
    let mut workload = None;
    let mut size = None;
    let mut count = None;
    let mut parent = None;
    let mut cpus = None;
    let mut verify = false;
    let mut latency = false;
    let mut it = args.iter();
    let bad = |m: String| IpcError::usage(format!("{}: {m}", crate::bench::CHILD_SUBCOMMAND));
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| bad(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--transport" => kind = Some(val()?.parse::<TransportKind>()?),
            "--address" => address = Some(val()?),
            "--session" => session = val()?.parse::<u32>().ok(),
            "--mode" => workload = Workload::parse(&val()?),
            "--size" => size = val()?.parse::<usize>().ok(),
            "--count" => count = val()?.parse::<u64>().ok(),
            "--parent" => parent = val()?.parse::<u32>().ok(),
            "--cpus" => {
                cpus = Some(CpuList::parse(&val()?).map_err(|e| bad(format!("--cpus: {e}")))?)
            }
            "--verify" => verify = true,
            "--latency" => latency = true,
            other => return Err(bad(format!("unknown argument '{other}'"))),
        }
    }
    let missing = |n: &str| bad(format!("missing or invalid {n}"));
    Ok(ChildArgs {
        kind: kind.ok_or_else(|| missing("--transport"))?,
        address: address.ok_or_else(|| missing("--address"))?,
        spec: SessionSpec {
            session: session.ok_or_else(|| missing("--session"))?,
            workload: workload.ok_or_else(|| missing("--mode"))?,
            size: size
                .filter(|&s| s <= crate::frame::MAX_MSG_LEN)
                .ok_or_else(|| missing("--size"))?,
            count: count.ok_or_else(|| missing("--count"))?,
            verify,
            latency,
            corrupt_at: None,
            extra_work_ticks: 0,
        },
        parent,
        cpus,
    })
}

fn run(args: &[String]) -> Result<String> {
    let a = parse(args)?;
    let _ = commbench_core::sys::die_with_parent();
    if let Some(p) = a.parent {
        if std::os::unix::process::parent_id() != p {
            return Err(IpcError::Closed);
        }
    }
    if let Some(c) = &a.cpus {
        c.pin_current_thread()
            .map_err(|e| IpcError::usage(format!("cannot apply CPU placement: {e}")))?;
    }
    // The clock calibrates once per process (~50 ms of sleeps): before
    // `ready`, not inside the measured run while the server waits.
    let _ = commbench_core::clock::tsc();
    let token = std::env::var(transport::TOKEN_ENV).ok();
    let ep = transport::connect(a.kind, &a.address, a.spec.session, token.as_deref())?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")
        .and_then(|_| out.flush())
        .map_err(|e| IpcError::io("write to parent", e))?;
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    if line.trim() != "go" {
        return Err(IpcError::Closed);
    }
    let never = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let o = session::client(ep, &a.spec, &never)?;
    let lat: Vec<(u64, u64)> = o.latency.map(|h| h.recorded()).unwrap_or_default();
    Ok(serde_json::json!({
        "received": o.received,
        "sent": o.sent,
        "latency": if a.spec.latency { serde_json::to_value(lat).unwrap_or_default() } else { serde_json::Value::Null },
    })
    .to_string())
}

/// Entry point of the hidden subcommand; returns the process exit code.
pub fn child_main(args: &[String]) -> i32 {
    match run(args) {
        Ok(line) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}").and_then(|_| out.flush());
            0
        }
        Err(IpcError::Closed) => 1,
        // The parent reports the run's real cause.
        Err(IpcError::PeerClosed { .. } | IpcError::Aborted) => EXIT_PEER_GONE,
        Err(e) => {
            eprintln!("commbench {}: {e}", crate::bench::CHILD_SUBCOMMAND);
            if e.is_usage() {
                2
            } else {
                1
            }
        }
    }
}

/// What is wrong with a child's result line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum ResultLineError {
    /// Not JSON (the line, trimmed).
    #[error("unreadable result line '{0}'")]
    Unreadable(String),
    /// A latency entry that is not a (value, count) pair of integers.
    #[error("bad latency pair")]
    BadPair,
}

/// Parse a child's result line (in the parent).
pub(crate) fn parse_result(
    line: &str,
) -> std::result::Result<Option<LatencyHistogram>, ResultLineError> {
    let v: serde_json::Value = serde_json::from_str(line.trim())
        .map_err(|_| ResultLineError::Unreadable(line.trim().to_owned()))?;
    match v.get("latency") {
        Some(serde_json::Value::Array(pairs)) => {
            let mut h = LatencyHistogram::new();
            for p in pairs {
                let (Some(v), Some(c)) = (
                    p.get(0).and_then(|x| x.as_u64()),
                    p.get(1).and_then(|x| x.as_u64()),
                ) else {
                    return Err(ResultLineError::BadPair);
                };
                h.record_n_ns(v, c);
            }
            Ok(Some(h))
        }
        _ => Ok(None),
    }
}
