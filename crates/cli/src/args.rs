//! Argument parsers every command shares: sizes with binary suffixes,
//! CPU placement by role. One parser per kind of value, so that every
//! size argument takes the same suffixes and says the same thing when it
//! cannot read one.

use anyhow::Result;
use commbench_core::placement::CpuList;

/// A size in bytes: a number with an optional binary suffix (K/KiB, M/MiB,
/// G/GiB); `64K` is 65536.
pub fn parse_size(s: &str) -> std::result::Result<usize, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("KiB").or_else(|| t.strip_suffix('K')) {
        (n, 1usize << 10)
    } else if let Some(n) = t.strip_suffix("MiB").or_else(|| t.strip_suffix('M')) {
        (n, 1 << 20)
    } else {
        (t, 1)
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("'{s}' is not a size (e.g. 128, 64K, 1MiB)"))
}

/// `--cpus server=LIST --cpus client=LIST`: the CPUs of each role.
pub fn placement(cpus: &[String]) -> Result<(Option<CpuList>, Option<CpuList>)> {
    let (mut server, mut client) = (None, None);
    for c in cpus {
        let Some((role, list)) = c.split_once('=') else {
            return Err(crate::usage(format!(
                "--cpus {c}: expected ROLE=LIST with ROLE server or client (e.g. server=0)"
            )));
        };
        let l = CpuList::parse(list).map_err(|e| crate::usage(format!("--cpus {c}: {e}")))?;
        match role {
            "server" => server = Some(l),
            "client" => client = Some(l),
            _ => {
                return Err(crate::usage(format!(
                    "--cpus {c}: unknown role '{role}' (server or client)"
                )))
            }
        }
    }
    Ok((server, client))
}
