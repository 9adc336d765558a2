//! `commbench pipeline io`: one role of the netns lab (generator,
//! forwarder, sink) on an interface that already exists, so the roles can
//! run on two hosts, or against another tool (a sink that counts the
//! arrival pattern of frames carrying commbench's magic from a generator
//! that does not stamp them).

use crate::netns::{self, RxMethod, TxMethod};
use crate::tester::dut::{self, FwdCounters, FwdWork, Impair};
use crate::PipelineError;
use commbench_core::record::{Record, Recorder};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

/// Which role runs, with what only it takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Role {
    /// Sends `frames` frames on the interface.
    Gen { frames: u64, tx: TxMethod },
    /// Forwards from the interface to `out_iface`, with per-frame work
    /// and impairments.
    Fwd {
        out_iface: String,
        work: FwdWork,
        impair: Impair,
    },
    /// Counts commbench's frames; with `pattern`, every frame with the
    /// magic (stamped or not) and its arrival pattern from kernel
    /// timestamps.
    Sink { pattern: bool },
}

/// One role on one interface.
#[derive(Debug, Clone)]
pub struct IoSpec {
    pub role: Role,
    /// Interface to send on (gen) or receive from (fwd, sink).
    pub iface: String,
    /// Receive path; AF_XDP also makes the generator transmit with AF_XDP.
    pub engine: RxMethod,
    /// Frame size with FCS.
    pub size: u32,
    pub burst: usize,
    /// Stop after this long.
    pub duration: Duration,
    /// Forwarder and sink: stop after this long without a frame.
    pub idle: Duration,
}

/// Runs the role and pushes its one record (`io-gen`, `io-fwd`,
/// `io-sink`) into `rec`.
pub fn run(s: &IoSpec, rec: &mut Recorder) -> Result<(), PipelineError> {
    let deadline = Instant::now() + s.duration;
    let r = match &s.role {
        Role::Gen { frames, tx } => gen(s, *frames, *tx)?,
        Role::Fwd {
            out_iface,
            work,
            impair,
        } => fwd(s, out_iface, *work, *impair, deadline)?,
        Role::Sink { pattern: true } => sink_pattern(s, deadline)?,
        Role::Sink { pattern: false } => sink(s, deadline)?,
    };
    rec.push(r);
    Ok(())
}

/// The transmit path of a generator: AF_XDP with `--engine af-xdp`,
/// otherwise the one asked for.
pub fn gen_tx(engine: RxMethod, tx: TxMethod) -> TxMethod {
    match engine {
        RxMethod::AfXdp => TxMethod::AfXdp,
        RxMethod::AfPacket => tx,
    }
}

fn gen(s: &IoSpec, frames: u64, tx: TxMethod) -> Result<Record, PipelineError> {
    let tx = gen_tx(s.engine, tx);
    let cfg = netns::NetnsConfig {
        frames,
        size: s.size,
        burst: s.burst,
        window: 0,
        timeout: s.duration,
        tx,
        rx: s.engine,
    };
    // A down link (or one without a carrier) is said at once, not after
    // --duration-s of spinning (with exit 0 and partial).
    netns::wait_link_up(&s.iface, Duration::from_secs(1))
        .map_err(|e| std::io::Error::new(e.kind(), format!("pipeline io --mode gen: {e}")))?;
    let seen = AtomicU64::new(0);
    let (sent, wall, cpu) = netns::gen_role(&s.iface, &cfg, &seen, &AtomicBool::new(false))?;
    Ok(Record::new("pipeline", "io-gen")
        .param("engine", s.engine.name())
        .param("iface", &s.iface)
        .param("size", s.size)
        .param("burst", s.burst)
        .param("tx", tx.name())
        .metric("sent", sent)
        .metric("pps", sent as f64 / wall)
        .metric("cpu_s", cpu)
        .metric("pps_per_cpu_s", sent as f64 / cpu)
        .metric("partial", sent < frames))
}

fn fwd(
    s: &IoSpec,
    out: &str,
    work: FwdWork,
    impair: Impair,
    deadline: Instant,
) -> Result<Record, PipelineError> {
    let spec = dut::FwdSpec {
        in_if: s.iface.clone(),
        out_if: out.to_owned(),
        rx: s.engine,
        burst: s.burst,
        work,
        impair,
        rx_blocks: netns::RX_BLOCKS,
    };
    let c = FwdCounters::default();
    let (drops, xdp_mode) = dut::l2fwd(
        &spec,
        &c,
        &AtomicBool::new(false),
        &AtomicBool::new(false),
        Some(s.idle),
        deadline,
    )?;
    let f = c.snapshot();
    let (r, w, t) = f.per_packet();
    Ok(Record::new("pipeline", "io-fwd")
        .param("engine", s.engine.name())
        .param("xdp_mode", xdp_mode.unwrap_or("-"))
        .param("iface", &s.iface)
        .param("out_iface", out)
        .param("work", work.name())
        .metric("rx", f.rx)
        .metric("tx", f.tx)
        .metric("foreign", f.foreign)
        .metric("dropped", f.dropped)
        .metric("ring_drops", drops)
        .metric("ticks_rx", r)
        .metric("ticks_work", w)
        .metric("ticks_tx", t)
        .metric("ticks_per_packet", r + w + t))
}

fn sink_pattern(s: &IoSpec, deadline: Instant) -> Result<Record, PipelineError> {
    let k = crate::tester::count_arrivals(&s.iface, s.engine, s.idle, deadline)?;
    let st = &k.stats;
    let gap = |q: f64| {
        if st.gaps.is_empty() {
            f64::NAN
        } else {
            st.gaps.quantile(q)
        }
    };
    Ok(Record::new("pipeline", "io-sink")
        .param("engine", s.engine.name())
        .param("iface", &s.iface)
        .metric("rx", k.ours)
        .metric("foreign", k.foreign)
        .metric("ring_drops", k.drops)
        .metric("pps", st.rate())
        .metric("span_s", st.span_s())
        .metric("window_100us_max", st.window_max)
        .metric("gap_p50_ns", gap(0.5))
        .metric("gap_p99_ns", gap(0.99)))
}

fn sink(s: &IoSpec, deadline: Instant) -> Result<Record, PipelineError> {
    // Nothing upstream to wait for: the sink stops when idle.
    let done = AtomicBool::new(true);
    let seen = AtomicU64::new(0);
    let k = netns::sink_role(&s.iface, s.engine, &done, &seen, s.idle, deadline, None)?;
    Ok(Record::new("pipeline", "io-sink")
        .param("engine", s.engine.name())
        .param("xdp_mode", k.xdp_mode.unwrap_or("-"))
        .param("iface", &s.iface)
        .metric("rx", k.rx)
        .metric("foreign", k.foreign)
        .metric("ring_drops", k.drops)
        .metric("pps", rate(k.rx, k.wall_s)))
}

/// Frames per second over `wall_s` (NaN when no time passed).
fn rate(n: u64, wall_s: f64) -> f64 {
    if wall_s > 0.0 {
        n as f64 / wall_s
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_af_xdp_engine_makes_the_generator_transmit_with_af_xdp() {
        assert_eq!(gen_tx(RxMethod::AfXdp, TxMethod::Sendmmsg), TxMethod::AfXdp);
        assert_eq!(
            gen_tx(RxMethod::AfPacket, TxMethod::TxRing),
            TxMethod::TxRing
        );
    }

    #[test]
    fn a_sink_that_saw_no_time_pass_has_no_rate() {
        assert!(rate(10, 0.0).is_nan());
        assert_eq!(rate(10, 2.0), 5.0);
    }

    #[test]
    fn a_missing_interface_is_an_io_error_not_a_usage_error() {
        let s = IoSpec {
            role: Role::Sink { pattern: false },
            iface: "cbnope0".into(),
            engine: RxMethod::AfPacket,
            size: 64,
            burst: 32,
            duration: Duration::from_secs(1),
            idle: Duration::from_millis(10),
        };
        let e = run(&s, &mut Recorder::new()).unwrap_err();
        assert!(matches!(e, PipelineError::Io(_)), "{e}");
    }
}
