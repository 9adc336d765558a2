//! What can be wrong with what the tester is asked to offer: the device,
//! the rate, the frame sizes, the CPUs, the impairments, a trial's
//! settings. Every value says what was wrong and what to give instead
//! (the CLI shows it as a usage error, exit 2).

use thiserror::Error;

/// An unusable black-box setting.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SpecError {
    #[error("rate '{rate}': '{pct}' is not a number of percent")]
    RatePercent { rate: String, pct: String },
    #[error("rate '{0}': a share of the link must be in (0, 100]%")]
    RateShare(String),
    #[error("rate '{0}' is not a rate: give frames per second (100000, 250k, 1.5M) or a share of the link (50%)")]
    NotARate(String),
    #[error("rate '{0}' is outside 1 pps..1 Gpps")]
    RateRange(String),
    #[error("frame size '{0}' is not a number of bytes or 'imix'")]
    NotASize(String),
    #[error("frame size {0} B is outside 64..=1518 (an Ethernet frame with FCS)")]
    SizeRange(u32),
    #[error("--sizes is empty")]
    NoSizes,
    #[error("--arrivals '{0}': give cbr or poisson")]
    Arrivals(String),
    #[error("--gen-priority '{0}': give auto, realtime or normal")]
    GenPriority(String),
    #[error("--burst {0} is outside 1..=1024")]
    Burst(u32),
    #[error("--flows {0} is outside 1..={max}", max = super::MAX_FLOWS)]
    Flows(u16),
    #[error("a trial needs at least one frame")]
    NoFrames,
    #[error("{0} frames in one trial (rate × duration) is above {max}: shorten --duration", max = super::MAX_FRAMES)]
    TooManyFrames(u64),
    #[error("--duration must be in (0, 3600] s")]
    Duration,
    #[error("AF_XDP frames are at most 1518 B")]
    XdpFrameSize,
    #[error("--cpus '{0}': give GEN,SINK,DUT (three CPUs at most)")]
    CpusTooMany(String),
    #[error("--cpus '{cpus}': '{cpu}' is not a CPU number")]
    CpuNotANumber { cpus: String, cpu: String },
    #[error("--cpus '{cpus}': CPU {cpu} is not online (online: {online:?})")]
    CpuOffline {
        cpus: String,
        cpu: usize,
        online: Vec<usize>,
    },
    #[error("--work {0}: give swap or delay:NS (whole ns, at most 1000000)")]
    Work(String),
    #[error("impairment '{0}' is not NAME=N (drop=, dup=, swap=)")]
    ImpairNotNameN(String),
    #[error("impairment '{part}': '{value}' is not a whole number")]
    ImpairNotANumber { part: String, value: String },
    #[error("impairment '{0}' is not drop, dup or swap")]
    ImpairUnknown(String),
    #[error("--dut cmd: needs a program: cmd:'PROGRAM ARGS'")]
    CmdNoProgram,
    #[error("--dut ifaces:{0}: give two interface names, IF1,IF2 (the generator sends on IF1, the sink listens on IF2)")]
    Ifaces(String),
    #[error("--dut l2fwd: delay:{0} is not whole nanoseconds")]
    DelayNotWhole(String),
    #[error("--dut l2fwd: delay:{0} is above 1000000 ns")]
    DelayRange(u64),
    #[error("--dut l2fwd: rx={0} is not af-packet or af-xdp")]
    FwdRx(String),
    #[error("--dut l2fwd: burst={0} is outside 1..=1024")]
    FwdBurst(String),
    #[error("--dut l2fwd: blocks={0} is outside 2..={max} (1 MiB each)", max = crate::netns::RX_BLOCKS_MAX)]
    FwdBlocks(String),
    #[error("--dut l2fwd: option '{0}' is not work=swap, work=delay:NS, rx=af-packet|af-xdp, burst=N, blocks=N, drop=N, dup=N or swap=N")]
    FwdOption(String),
    #[error("--dut '{0}' is not a device: none, l2fwd[:work=swap|delay:NS], bridge, router, cmd:'PROGRAM ARGS' or ifaces:IF1,IF2")]
    NotADevice(String),
    #[error(
        "--search '{0}' is not a search: mlr (RFC 9971, the default) or rfc2544 (binary search)"
    )]
    SearchMethod(String),
    #[error("--goal is MLRsearch's: drop it or use --search mlr")]
    GoalsNeedMlr,
    #[error("--traffic with AF_XDP: its filter finds the stamp at a fixed offset, a replayed frame carries it past its datagram; use --tx sendmmsg/af-packet and --rx af-packet (and l2fwd:rx=af-packet)")]
    TrafficXdp,
    #[error("--flows with --traffic: the capture's flows decide ({0} streams)")]
    TrafficFlows(u16),
    #[error("{flows} flows × {sizes} distinct frame sizes need {mib} MiB of frame templates, above {max} MiB: give fewer --flows", max = super::MAX_TEMPLATE_BYTES >> 20)]
    Templates { flows: u16, sizes: usize, mib: u64 },
    #[error("--pdr-loss-pct is RFC 2544's search: with --search mlr give a goal instead (--goal loss={0}%)")]
    PdrNeedsRfc2544(f64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_value_and_the_range() {
        assert_eq!(
            SpecError::Flows(0).to_string(),
            "--flows 0 is outside 1..=256"
        );
        assert_eq!(
            SpecError::TooManyFrames(300_000_000).to_string(),
            "300000000 frames in one trial (rate × duration) is above 256000000: shorten --duration"
        );
        assert_eq!(
            SpecError::FwdBlocks("1".into()).to_string(),
            "--dut l2fwd: blocks=1 is outside 2..=512 (1 MiB each)"
        );
        assert!(SpecError::CpuOffline {
            cpus: "0,99".into(),
            cpu: 99,
            online: vec![0, 1]
        }
        .to_string()
        .ends_with("CPU 99 is not online (online: [0, 1])"));
    }
}
