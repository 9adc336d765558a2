//! cbench's command-line grammar (getopt_long as cbench's `myargs.c` sets
//! it up): short options with attached or separate values (`-s16`,
//! `-s 16`), clustered flags (`-td`), long options with `=` or a separate
//! value, unique long-option prefixes, and cbench's optional-argument
//! flags (`-L`/`--learn-dst-macs[=off|false|0]`, `-d`, `-r`) whose value is
//! only taken when attached. Plus this tool's own long options.
//!
//! Invariants: unlike cbench's `atoi`, a number that does not parse, a
//! missing value, an unknown option or a stray argument is a
//! [`UsageError`] naming the problem (the CLI exits 2). Seed:
//! cbench-trema-speedup — existing cbench command lines must run unchanged.

use crate::emulator::{CbenchConfig, Nodelay};

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct CbenchArgs {
    pub config: CbenchConfig,
    /// `--format table|csv|json|jsonl`, as given.
    pub format: Option<String>,
    /// `--output FILE`.
    pub output: Option<String>,
    /// `-h/--help` was given: print [`usage`] and exit 0.
    pub help: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Takes a value (`-s 16`, `-s16`, `--switches=16`, `--switches 16`).
    Value,
    /// No value.
    None,
    /// Optional value, attached only (`-Loff`, `--learn-dst-macs=off`).
    Flag,
}

struct Opt {
    long: &'static str,
    short: Option<char>,
    kind: Kind,
    help: &'static str,
}

const OPTS: &[Opt] = &[
    Opt {
        long: "controller",
        short: Some('c'),
        kind: Kind::Value,
        help: "hostname of controller to connect to (localhost)",
    },
    Opt {
        long: "debug",
        short: Some('d'),
        kind: Kind::Flag,
        help: "enable debugging (off)",
    },
    Opt {
        long: "help",
        short: Some('h'),
        kind: Kind::None,
        help: "print this message",
    },
    Opt {
        long: "loops",
        short: Some('l'),
        kind: Kind::Value,
        help: "loops per test (16)",
    },
    Opt {
        long: "mac-addresses",
        short: Some('M'),
        kind: Kind::Value,
        help: "unique source MAC addresses per switch (100000)",
    },
    Opt {
        long: "ms-per-test",
        short: Some('m'),
        kind: Kind::Value,
        help: "test length in ms (1000)",
    },
    Opt {
        long: "port",
        short: Some('p'),
        kind: Kind::Value,
        help: "controller port (6633)",
    },
    Opt {
        long: "ranged-test",
        short: Some('r'),
        kind: Kind::Flag,
        help: "test range of 1..$n switches (off)",
    },
    Opt {
        long: "switches",
        short: Some('s'),
        kind: Kind::Value,
        help: "fake $n switches (16)",
    },
    Opt {
        long: "throughput",
        short: Some('t'),
        kind: Kind::None,
        help: "test throughput instead of latency",
    },
    Opt {
        long: "warmup",
        short: Some('w'),
        kind: Kind::Value,
        help: "loops to be disregarded on test start (warmup) (1)",
    },
    Opt {
        long: "cooldown",
        short: Some('C'),
        kind: Kind::Value,
        help: "loops to be disregarded at test end (cooldown) (0)",
    },
    Opt {
        long: "delay",
        short: Some('D'),
        kind: Kind::Value,
        help: "delay starting testing after features_reply is received (in ms) (0)",
    },
    Opt {
        long: "connect-delay",
        short: Some('i'),
        kind: Kind::Value,
        help: "delay between groups of switches connecting to the controller (in ms) (0)",
    },
    Opt {
        long: "connect-group-size",
        short: Some('I'),
        kind: Kind::Value,
        help: "number of switches in a connection delay group (1)",
    },
    Opt {
        long: "learn-dst-macs",
        short: Some('L'),
        kind: Kind::Flag,
        help: "learn destination mac addresses before the test (on)",
    },
    Opt {
        long: "dpid-offset",
        short: Some('o'),
        kind: Kind::Value,
        help: "datapath id offset (0: the controller will get 0x0 as DPID, 1: 0x1 ...) (1)",
    },
    // Beyond cbench.
    Opt {
        long: "of13",
        short: None,
        kind: Kind::None,
        help: "speak OpenFlow 1.3 instead of 1.0",
    },
    Opt {
        long: "outstanding",
        short: None,
        kind: Kind::Value,
        help: "latency mode: probes in flight per switch (1)",
    },
    Opt {
        long: "threads",
        short: None,
        kind: Kind::Value,
        help: "generator threads, switches spread over them (1)",
    },
    Opt {
        long: "nodelay",
        short: None,
        kind: Kind::Flag,
        help: "TCP_NODELAY on|off (default: off like cbench; on with --outstanding > 1)",
    },
    Opt {
        long: "allow-partial",
        short: None,
        kind: Kind::None,
        help: "exit 0 even when fewer switches than asked completed the handshake (the run is still marked partial)",
    },
    Opt {
        long: "legacy-format",
        short: None,
        kind: Kind::None,
        help: "print the old 'fmods/sec' per-test line without the time",
    },
    Opt {
        long: "handshake-timeout",
        short: None,
        kind: Kind::Value,
        help: "ms to wait for every switch's handshake (10000)",
    },
    Opt {
        long: "max-in-flight",
        short: None,
        kind: Kind::Value,
        help: "throughput mode: unanswered probes per switch, 0 = unlimited like cbench (40000)",
    },
    Opt {
        long: "sndbuf",
        short: None,
        kind: Kind::Value,
        help: "SO_SNDBUF bytes per switch, 0 = kernel default like cbench (65536)",
    },
    Opt {
        long: "tcp-congestion",
        short: None,
        kind: Kind::Value,
        help: "TCP congestion control per switch: auto (cubic or reno instead of a pacing bbr), kernel (as cbench), or a name (auto)",
    },
    Opt {
        long: "cpus",
        short: None,
        kind: Kind::Value,
        help: "pin the generator threads to these CPUs (taskset list, e.g. 0 or 0-3:2)",
    },
    Opt {
        long: "format",
        short: None,
        kind: Kind::Value,
        help: "table|csv|json|jsonl (table prints cbench's lines)",
    },
    Opt {
        long: "output",
        short: None,
        kind: Kind::Value,
        help: "write the report to FILE",
    },
];

/// The help text, in cbench's layout.
pub fn usage() -> String {
    let mut s = String::from(
        "Usage: commbench cbench [options]\n\
         cbench-compatible OpenFlow switch emulator (controller benchmarking)\n\n",
    );
    for o in OPTS {
        let short = o
            .short
            .map(|c| format!("-{c}"))
            .unwrap_or_else(|| "  ".into());
        let arg = match o.kind {
            Kind::Value => " <arg>",
            Kind::Flag => " [=on|off]",
            Kind::None => "",
        };
        s.push_str(&format!("  {short} --{:<20}{arg:<10} {}\n", o.long, o.help));
    }
    s
}

fn find_long(name: &str) -> Result<&'static Opt, UsageError> {
    if let Some(o) = OPTS.iter().find(|o| o.long == name) {
        return Ok(o);
    }
    let cands: Vec<&Opt> = OPTS.iter().filter(|o| o.long.starts_with(name)).collect();
    match cands.len() {
        1 => Ok(cands[0]),
        0 => Err(UsageError(format!(
            "unrecognized option '--{name}' (see --help)"
        ))),
        _ => Err(UsageError(format!(
            "option '--{name}' is ambiguous: {}",
            cands
                .iter()
                .map(|o| format!("--{}", o.long))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

fn num<T: std::str::FromStr>(opt: &Opt, v: &str) -> Result<T, UsageError> {
    v.trim().parse::<T>().map_err(|_| {
        UsageError(format!(
            "option --{} expects a non-negative number, got '{v}'",
            opt.long
        ))
    })
}

/// cbench's rule for its flags: `true`, `on` or `1` (any case) is on,
/// anything else off... except that the appendix only documents turning
/// it off with off/false/0, so any other value keeps it on.
fn flag_value(v: Option<&str>) -> bool {
    match v {
        None => true,
        Some(s) => !matches!(
            s.to_ascii_lowercase().as_str(),
            "off" | "false" | "0" | "no"
        ),
    }
}

fn apply(a: &mut CbenchArgs, o: &Opt, v: Option<&str>) -> Result<(), UsageError> {
    let c = &mut a.config;
    let val = || v.ok_or_else(|| UsageError(format!("option --{} requires a value", o.long)));
    match o.long {
        "controller" => c.controller = val()?.to_string(),
        "debug" => c.debug = flag_value(v),
        "help" => a.help = true,
        "loops" => c.loops = num(o, val()?)?,
        "mac-addresses" => c.mac_addresses = num(o, val()?)?,
        "ms-per-test" => c.ms_per_test = num(o, val()?)?,
        "port" => c.port = num(o, val()?)?,
        "ranged-test" => c.ranged = flag_value(v),
        "switches" => c.switches = num(o, val()?)?,
        "throughput" => c.throughput = true,
        "warmup" => c.warmup = num(o, val()?)?,
        "cooldown" => c.cooldown = num(o, val()?)?,
        "delay" => c.delay_ms = num(o, val()?)?,
        "connect-delay" => c.connect_delay_ms = num(o, val()?)?,
        "connect-group-size" => c.connect_group_size = num(o, val()?)?,
        "learn-dst-macs" => c.learn_dst_macs = flag_value(v),
        "dpid-offset" => c.dpid_offset = num(o, val()?)?,
        "of13" => c.of13 = true,
        "outstanding" => c.outstanding = num(o, val()?)?,
        "threads" => c.threads = num(o, val()?)?,
        "nodelay" => {
            c.nodelay = if flag_value(v) {
                Nodelay::On
            } else {
                Nodelay::Off
            }
        }
        "legacy-format" => c.legacy_format = true,
        "allow-partial" => c.allow_partial = true,
        "handshake-timeout" => c.handshake_timeout_ms = num(o, val()?)?,
        "cpus" => c.cpus = Some(val()?.to_string()),
        "max-in-flight" => c.max_in_flight = num(o, val()?)?,
        "sndbuf" => c.sndbuf = num(o, val()?)?,
        "tcp-congestion" => c.tcp_congestion = val()?.to_string(),
        "format" => a.format = Some(val()?.to_string()),
        "output" => a.output = Some(val()?.to_string()),
        _ => unreachable!("every option in OPTS is handled"),
    }
    Ok(())
}

/// Parse cbench's arguments (without the program/subcommand name).
pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<CbenchArgs, UsageError> {
    let mut a = CbenchArgs {
        config: CbenchConfig::default(),
        format: None,
        output: None,
        help: false,
    };
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_ref();
        i += 1;
        if arg == "--" {
            if i < args.len() {
                return Err(UsageError(format!(
                    "unexpected argument '{}'",
                    args[i].as_ref()
                )));
            }
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let o = find_long(name)?;
            let v = match o.kind {
                Kind::None => {
                    if attached.is_some() {
                        return Err(UsageError(format!(
                            "option '--{}' doesn't allow an argument",
                            o.long
                        )));
                    }
                    None
                }
                Kind::Flag => attached,
                Kind::Value => match attached {
                    Some(v) => Some(v),
                    None => {
                        if i >= args.len() {
                            return Err(UsageError(format!(
                                "option '--{}' requires an argument",
                                o.long
                            )));
                        }
                        i += 1;
                        Some(args[i - 1].as_ref())
                    }
                },
            };
            apply(&mut a, o, v)?;
        } else if let Some(shorts) = arg.strip_prefix('-').filter(|s| !s.is_empty()) {
            let chars: Vec<(usize, char)> = shorts.char_indices().collect();
            let mut k = 0;
            while k < chars.len() {
                let (pos, ch) = chars[k];
                let o = OPTS
                    .iter()
                    .find(|o| o.short == Some(ch))
                    .ok_or_else(|| UsageError(format!("invalid option -- '{ch}' (see --help)")))?;
                let rest = &shorts[pos + ch.len_utf8()..];
                match o.kind {
                    Kind::None => {
                        apply(&mut a, o, None)?;
                        k += 1;
                    }
                    Kind::Flag => {
                        apply(&mut a, o, (!rest.is_empty()).then_some(rest))?;
                        break;
                    }
                    Kind::Value => {
                        let v = if !rest.is_empty() {
                            rest
                        } else if i < args.len() {
                            i += 1;
                            args[i - 1].as_ref()
                        } else {
                            return Err(UsageError(format!(
                                "option requires an argument -- '{ch}'"
                            )));
                        };
                        apply(&mut a, o, Some(v))?;
                        break;
                    }
                }
            }
        } else {
            return Err(UsageError(format!(
                "unexpected argument '{arg}' (see --help)"
            )));
        }
    }
    a.config.validate().map_err(|e| UsageError(e.to_string()))?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<CbenchArgs, UsageError> {
        parse(&s.split_whitespace().collect::<Vec<_>>())
    }

    #[test]
    fn defaults_are_cbench_defaults() {
        let c = p("").unwrap().config;
        assert_eq!(c.controller, "localhost");
        assert_eq!(c.port, 6633);
        assert_eq!(c.switches, 16);
        assert_eq!(c.loops, 16);
        assert_eq!(c.ms_per_test, 1000);
        assert_eq!(c.mac_addresses, 100000);
        assert!(!c.throughput, "latency mode is the default");
        assert_eq!((c.warmup, c.cooldown), (1, 0));
        assert_eq!(
            (c.delay_ms, c.connect_delay_ms, c.connect_group_size),
            (0, 0, 1)
        );
        assert!(c.learn_dst_macs);
        assert_eq!(c.dpid_offset, 1);
        assert!(!c.ranged && !c.debug && !c.of13);
    }

    #[test]
    fn short_long_attached_separate() {
        let c = p("-c 127.0.0.1 -p6653 -s 1 -l10 -m 10000 -M 5 -t -w 2 -C1 -D 50 -i 3 -I 4 -o 0")
            .unwrap()
            .config;
        assert_eq!(c.controller, "127.0.0.1");
        assert_eq!(c.port, 6653);
        assert_eq!(
            (c.switches, c.loops, c.ms_per_test, c.mac_addresses),
            (1, 10, 10000, 5)
        );
        assert!(c.throughput);
        assert_eq!((c.warmup, c.cooldown, c.delay_ms), (2, 1, 50));
        assert_eq!(
            (c.connect_delay_ms, c.connect_group_size, c.dpid_offset),
            (3, 4, 0)
        );
        let c = p("--controller=::1 --port 6653 --switches=4 --throughput --ms-per=200")
            .unwrap()
            .config;
        assert_eq!(
            (c.controller.as_str(), c.port, c.switches),
            ("::1", 6653, 4)
        );
        assert!(c.throughput);
        assert_eq!(
            c.ms_per_test, 200,
            "unique prefix accepted like getopt_long"
        );
    }

    #[test]
    fn clustered_flags() {
        let a = p("-td -s2").unwrap();
        assert!(a.config.throughput && a.config.debug);
        assert_eq!(a.config.switches, 2);
    }

    #[test]
    fn learn_dst_macs_off_forms() {
        for off in [
            "--learn-dst-macs=off",
            "--learn-dst-macs=false",
            "--learn-dst-macs=0",
            "--learn-dst-macs=OFF",
            "-Loff",
            "-L0",
        ] {
            assert!(!p(off).unwrap().config.learn_dst_macs, "{off}");
        }
        for on in [
            "--learn-dst-macs",
            "--learn-dst-macs=on",
            "--learn-dst-macs=1",
            "-L",
            "--learn-dst-macs=true",
        ] {
            assert!(p(on).unwrap().config.learn_dst_macs, "{on}");
        }
        // getopt: an optional argument is never taken from the next word.
        assert!(p("-L off").is_err(), "'off' is a stray argument");
    }

    #[test]
    fn beyond_cbench_options() {
        let a = p("--of13 --outstanding 8 --threads 2 --nodelay=off --legacy-format --format json --output r.json --cpus 0").unwrap();
        assert_eq!(a.config.cpus.as_deref(), Some("0"));
        assert_eq!(p("").unwrap().config.max_in_flight, 40000);
        assert_eq!(p("--max-in-flight 0").unwrap().config.max_in_flight, 0);
        assert_eq!(p("").unwrap().config.sndbuf, 65536);
        // A switch is a connection from its own local port: a count past
        // the ports is a usage error, not an allocation of that size.
        assert!(p("-s 65535").is_ok());
        let e = p("-s 5935867549118362").unwrap_err().to_string();
        assert!(e.contains("1..=65535"), "{e}");
        assert_eq!(p("").unwrap().config.tcp_congestion, "auto");
        assert_eq!(
            p("--tcp-congestion kernel").unwrap().config.tcp_congestion,
            "kernel"
        );
        assert!(p("--tcp-congestion").is_err(), "needs a value");
        assert_eq!(
            p("--sndbuf 0").unwrap().config.sndbuf,
            0,
            "kernel default, as cbench"
        );
        assert!(
            p("--max-in-flight 100000").is_err(),
            "beyond the buffer_id wrap"
        );
        assert!(a.config.of13 && a.config.legacy_format);
        assert_eq!((a.config.outstanding, a.config.threads), (8, 2));
        assert_eq!(a.config.nodelay, Nodelay::Off);
        assert_eq!(a.format.as_deref(), Some("json"));
        assert_eq!(a.output.as_deref(), Some("r.json"));
        assert!(p("-h").unwrap().help);
    }

    #[test]
    fn usage_errors() {
        for bad in [
            "-s",
            "-s abc",
            "--switches",
            "--switches=-1",
            "-x",
            "--bogus",
            "--t",
            "stray",
            "-w 16 -l 16",
            "-w 10 -C 6 -l 16",
            "-s 0",
            "-m 0",
            "--throughput=yes",
            "-M 0",
            "--outstanding 0",
            "--threads 0",
            "-p 70000",
        ] {
            assert!(p(bad).is_err(), "{bad} must be rejected");
        }
        let e = p("-w 16 -l 16").unwrap_err();
        assert!(e.0.contains("warmup"), "{e}");
    }

    #[test]
    fn usage_lists_every_option() {
        let u = usage();
        for o in OPTS {
            assert!(u.contains(o.long));
        }
    }
}
