//! Argument parsers every command shares: sizes with binary suffixes,
//! CPU placement by role. One parser per kind of value, so that every
//! size argument takes the same suffixes and says the same thing when it
//! cannot read one.

use anyhow::Result;
use commbench_core::placement::CpuList;

/// A size in bytes: a whole number with an optional binary suffix, in
/// upper or lower case: B, K/KiB, M/MiB, G/GiB (`64K` and `64kib` are
/// 65536, `512B` is 512). A size that does not fit is refused, saying so.
pub fn parse_size(s: &str) -> std::result::Result<usize, String> {
    let n = parse_size_u64(s)?;
    usize::try_from(n).map_err(|_| format!("'{s}' is too large: at most {} bytes", usize::MAX))
}

/// [`parse_size`] as a u64.
pub fn parse_size_u64(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let shift = match unit.trim_start().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => {
            return Err(format!(
                "'{s}' is not a size: a whole number of bytes with an optional suffix B, K/KiB, M/MiB or G/GiB (e.g. 128, 64K, 1MiB, 2G)"
            ))
        }
    };
    if num.is_empty() {
        return Err(format!("'{s}' is not a size: it needs a number (e.g. 64K)"));
    }
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| format!("'{s}' is too large: at most {} bytes", u64::MAX))
}

/// [`parse_size`] as a u32 (frame sizes).
pub fn parse_size_u32(s: &str) -> std::result::Result<u32, String> {
    let n = parse_size_u64(s)?;
    u32::try_from(n).map_err(|_| format!("'{s}' is too large: at most {} bytes", u32::MAX))
}

/// A size parser that also checks `min..=max` (bytes), naming the range.
pub fn size_in(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> std::result::Result<u64, String> + Clone + Send + Sync + 'static {
    move |s| {
        let n = parse_size_u64(s)?;
        if (min..=max).contains(&n) {
            Ok(n)
        } else {
            Err(format!(
                "{n} bytes is outside {}..={} ({min}..={max} bytes)",
                human(min),
                human(max)
            ))
        }
    }
}

/// A number in `min..=max`; anything else is refused with `msg`, which
/// names the option and its range (`--repeat must be 1..=100`).
pub fn number_in<T>(
    min: T,
    max: T,
    msg: &'static str,
) -> impl Fn(&str) -> std::result::Result<T, String> + Clone + Send + Sync + 'static
where
    T: std::str::FromStr + PartialOrd + Copy + Send + Sync + 'static,
{
    move |s| match s.trim().parse::<T>() {
        Ok(n) if n >= min && n <= max => Ok(n),
        _ => Err(msg.to_owned()),
    }
}

/// A number greater than 0 and at most `max` (a rate, a percentage),
/// finite; anything else is refused with `msg`.
pub fn positive_up_to(
    max: f64,
    msg: &'static str,
) -> impl Fn(&str) -> std::result::Result<f64, String> + Clone + Send + Sync + 'static {
    move |s| match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= max => Ok(x),
        _ => Err(msg.to_owned()),
    }
}

/// A percentage in 0..1000 (a threshold, a noise floor, a gate).
pub fn parse_pct(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (0.0..1000.0).contains(&x) => Ok(x),
        _ => Err(format!("{s} is not a percentage in 0..1000")),
    }
}

/// A load-average difference: 0 or more.
pub fn parse_load_gap(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s} is not a load average difference (0 or more)")),
    }
}

/// 1048576 as "1MiB", 1000 as "1000B".
fn human(n: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    format!("{n}B")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_every_suffix_in_either_case() {
        for (s, n) in [
            ("128", 128u64),
            ("512B", 512),
            ("512 b", 512),
            ("64K", 64 << 10),
            ("64k", 64 << 10),
            ("64KiB", 64 << 10),
            ("64kib", 64 << 10),
            ("1M", 1 << 20),
            ("1m", 1 << 20),
            ("1MiB", 1 << 20),
            ("64M", 64 << 20),
            ("2G", 2 << 30),
            ("2g", 2 << 30),
            ("2GiB", 2 << 30),
        ] {
            assert_eq!(parse_size_u64(s), Ok(n), "{s}");
        }
    }

    #[test]
    fn bad_and_overflowing_sizes_say_why() {
        for s in ["", "K", "1.5M", "-1", "12X", "1T", "0x10"] {
            let e = parse_size_u64(s).unwrap_err();
            assert!(e.contains("not a size"), "{s}: {e}");
        }
        let e = parse_size_u64("17179869184G").unwrap_err();
        assert!(e.contains("too large"), "{e}");
        let e = parse_size_u32("4G").unwrap_err();
        assert!(e.contains("too large"), "{e}");
        let e = size_in(1 << 20, 64 << 30)("64K").unwrap_err();
        assert!(e.contains("1MiB..=64GiB"), "{e}");
        assert_eq!(size_in(1 << 20, 64 << 30)("64M"), Ok(64 << 20));
    }

    #[test]
    fn ranges_refuse_with_the_message_that_names_the_option() {
        let p = number_in(1u32, 100, "--repeat must be 1..=100");
        assert_eq!(p("1"), Ok(1));
        assert_eq!(p(" 100"), Ok(100));
        for s in ["0", "101", "-1", "x", ""] {
            assert_eq!(p(s), Err("--repeat must be 1..=100".to_owned()), "{s}");
        }
        let r = positive_up_to(1e8, "--rate must be 0 < requests/s <= 1e8");
        assert_eq!(r("1000"), Ok(1000.0));
        for s in ["0", "-5", "inf", "NaN", "1e9"] {
            assert!(r(s).is_err(), "{s}");
        }
    }

    #[test]
    fn percentages_and_load_gaps_are_checked_before_a_command_runs() {
        assert_eq!(parse_pct("5"), Ok(5.0));
        assert_eq!(parse_pct("0"), Ok(0.0));
        for s in ["-3", "1000", "NaN", "inf", "five"] {
            let e = parse_pct(s).unwrap_err();
            assert_eq!(e, format!("{s} is not a percentage in 0..1000"));
        }
        assert_eq!(parse_load_gap("0"), Ok(0.0));
        assert_eq!(parse_load_gap("2.5"), Ok(2.5));
        for s in ["-0.1", "inf", "x"] {
            assert!(parse_load_gap(s)
                .unwrap_err()
                .contains("not a load average difference"));
        }
    }
}
