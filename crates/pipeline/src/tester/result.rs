//! One trial's outcome from the generator's and the sink's counts, the
//! device's counters and CPU, and the host's stalls; its record.

use super::account::{ClassAccount, FlowCounts, SinkAccount};
use super::bench::{kernel_ticks_per_frame, Bench, DutCpuWindow};
use super::dut::FwdSnapshot;
use super::generator::GenOut;
use super::pace::Arrivals;
use super::replay::{Mix, Order, Traffic, PROTOCOLS, SIZE_BUCKETS};
use super::TrialSpec;
use crate::netns::{interrupted, RxMethod, TxMethod};
use commbench_core::clock::tsc;
use commbench_core::record::Record;
use commbench_core::stall::StallWindow;
use commbench_core::stats::{LatencyHistogram, Summary};
use serde::Serialize;

/// One trial's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct TrialResult {
    pub dut: String,
    pub size: String,
    pub arrivals: Arrivals,
    pub burst: u32,
    pub flows: u16,
    pub tx: TxMethod,
    pub rx: RxMethod,
    pub duration_s: f64,
    /// The rate asked for.
    pub offered_pps: f64,
    /// What the generator achieved: sent / its span.
    pub achieved_pps: f64,
    pub rate_error_pct: f64,
    pub lag_p50_ns: f64,
    pub lag_p99_ns: f64,
    pub lag_max_ns: f64,
    pub lag_last_ns: u64,
    pub lag_bound_ns: u64,
    /// The generator fell behind its schedule beyond the bound: the
    /// offered rate was not offered.
    pub behind_schedule: bool,
    pub planned: u64,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub loss_pct: f64,
    pub duplicated: u64,
    pub reordered: u64,
    pub reorder_max_distance: u64,
    pub late: u64,
    pub late_ns: u64,
    pub out_of_range: u64,
    pub foreign: u64,
    pub other_version: u64,
    pub stale: u64,
    pub probes: u64,
    pub sink_drops: u64,
    /// Frames the host's per-CPU input queues dropped during the trial
    /// (host-wide: see [`crate::netns::softnet_drops`]).
    pub host_backlog_drops: Option<u64>,
    /// The host's longest scheduling delay during the trial, ms: the stall
    /// monitor's latest wake-up beyond its 1 ms sleep (None: no monitor).
    pub host_stall_ms: Option<f64>,
    /// CPU time the hypervisor gave to others during the trial (all CPUs,
    /// /proc/stat steal), ms (None: not reported).
    pub steal_ms: Option<f64>,
    /// The device's CPU during the trial (from just before the probes to
    /// the end of the drain): busy = the window less its idle time, ms.
    pub dut_cpu_busy_ms: Option<f64>,
    /// Of it, softirq and system time, ms (sampled at the scheduler tick:
    /// a share, not an exact sum, on a kernel without IRQ time accounting).
    pub dut_cpu_softirq_ms: Option<f64>,
    pub dut_cpu_system_ms: Option<f64>,
    /// Busy time of the device's CPU per frame the device received, ns.
    pub dut_cpu_ns_per_frame: Option<f64>,
    /// The device's own CPU time in the trial: its tasks' run time and
    /// the interrupt and softirq time of its CPU (its receive), ms.
    pub dut_own_cpu_ms: Option<f64>,
    /// The share of the device CPU's window that other work took: busy
    /// time less the device's own and the tester's threads placed there,
    /// % (a lower bound where a tick of softirq lands in a task's time).
    pub dut_cpu_others_pct: Option<f64>,
    /// The device's own CPU time per frame it received, ns.
    pub dut_own_ns_per_frame: Option<f64>,
    /// The length of the device CPU's window, ms.
    pub dut_cpu_window_ms: Option<f64>,
    /// (l2fwd) TSC ticks per frame the device's CPU was busy outside the
    /// forwarder's own rx, work and tx sections: the kernel's receive
    /// into its ring (softirq), and whatever else ran on that CPU (with
    /// the default placement the sink's thread and its receive).
    pub fwd_ticks_kernel: Option<f64>,
    /// Where the lost frames were lost, as far as the counters tell:
    /// see [`TrialResult::loss_where`].
    pub loss_where: String,
    pub latency: Summary,
    /// Latency recorded for this share of received frames (every arrival
    /// that is not a duplicate… and duplicates too: all arrivals).
    pub latency_recorded_pct: f64,
    pub negative_latency: u64,
    pub window_100us_max: u64,
    /// The most frames in any 100 µs over the target's share of 100 µs.
    pub window_100us_over_share: f64,
    pub gap_p99_ns: f64,
    pub delivered_pps: f64,
    /// Bytes of the frames sent, without FCS (a replayed frame's with its
    /// stamp trailer): with `sent`, the mean size actually offered.
    pub sent_bytes: u64,
    pub gen_cpu_s: f64,
    pub delivered_per_gen_cpu_s: f64,
    /// The generator's run-queue delay during the trial, ms: time it
    /// wanted its CPU and something else had it.
    pub gen_wait_ms: Option<f64>,
    /// Times the generator was preempted during the trial.
    pub gen_preempted: u64,
    pub fwd: Option<FwdSnapshot>,
    pub fwd_ticks_rx: Option<f64>,
    pub fwd_ticks_work: Option<f64>,
    pub fwd_ticks_tx: Option<f64>,
    pub per_flow: Vec<FlowCounts>,
    pub partial: bool,
    /// How the generator was scheduled while it paced.
    pub gen_sched: String,
    pub cpus: String,
    /// The replayed capture, when the frames were a capture's.
    pub traffic: Option<TrafficInfo>,
    /// Loss and latency per frame-size bucket of a replayed capture.
    pub per_size: Vec<ClassCounts>,
    /// Loss and latency per protocol of a replayed capture.
    pub per_protocol: Vec<ClassCounts>,
}

/// What traffic a trial offered when it replayed a capture: the file,
/// the order, where the stamp rode, the mix and what was left out.
#[derive(Debug, Clone, Serialize)]
pub struct TrafficInfo {
    pub file: String,
    /// `capture` (its order) or `mix seed N` (shuffled).
    pub order: String,
    /// Where the tester's stamp was carried.
    pub stamp: &'static str,
    /// With the identity table: frames that share their L3/L4 bytes with
    /// another of the capture (told apart by their order).
    pub twins: Option<u64>,
    /// With the identity table: departures passed over as lost (older
    /// than the late bound when a later twin had arrived), and arrivals
    /// counted with no latency (their departure no longer kept).
    pub passed_over: Option<u64>,
    pub no_latency: Option<u64>,
    pub mix: Mix,
    /// Frames left out, by reason.
    pub refused: Vec<(String, u64)>,
    pub refused_total: u64,
    /// Records the capture reader found wrong and skipped.
    pub bad_records: u64,
}

/// The stamp's place in a replayed frame, as the records name it.
pub const TRAILER_STAMP: &str = super::replay::Stamping::Trailer.describe();

impl TrafficInfo {
    /// The traffic's params (file, order) and its mix, the stamp's place
    /// and what was left out as metrics of `r`.
    pub fn add_to(&self, r: &mut Record) {
        let (t, m) = (self, &self.mix);
        r.push_param("traffic", &t.file);
        r.push_param("traffic_order", &t.order);
        r.push_metric("traffic_stamp", t.stamp);
        for (k, v) in [
            ("traffic_twins", t.twins),
            ("traffic_passed_over", t.passed_over),
            ("traffic_no_latency", t.no_latency),
        ] {
            if let Some(v) = v {
                r.push_metric(k, v);
            }
        }
        r.push_metric("traffic_frames", m.frames);
        r.push_metric("traffic_size_min", m.size_min);
        r.push_metric("traffic_size_median", m.size_median);
        r.push_metric("traffic_size_max", m.size_max);
        r.push_metric("traffic_size_mean", m.size_mean);
        r.push_metric("traffic_imix", &m.imix);
        r.push_metric("traffic_flows", m.flows);
        r.push_metric("traffic_top_flow_pct", m.top_flow_pct);
        r.push_metric("traffic_vlan_frames", m.vlan_frames);
        r.push_metric("traffic_vlans", m.vlans);
        r.push_metric("traffic_ipv6_frames", m.ipv6_frames);
        r.push_metric("traffic_fragments", m.fragments);
        r.push_metric(
            "traffic_size_buckets",
            serde_json::to_value(&m.size_buckets).unwrap_or(serde_json::Value::Null),
        );
        r.push_metric(
            "traffic_protocols",
            serde_json::to_value(&m.protocols).unwrap_or(serde_json::Value::Null),
        );
        r.push_metric("traffic_left_out", t.refused_total);
        r.push_metric(
            "traffic_left_out_why",
            serde_json::to_value(&t.refused).unwrap_or(serde_json::Value::Null),
        );
        r.push_metric("traffic_bad_records", t.bad_records);
    }

    pub fn of(t: &Traffic) -> TrafficInfo {
        TrafficInfo {
            file: t.name().to_owned(),
            order: match t.order {
                Order::Capture => "capture".to_owned(),
                Order::Mix { seed } => format!("mix seed {seed}"),
            },
            stamp: t.stamping().describe(),
            twins: t.id_index().map(|i| i.twins),
            passed_over: None,
            no_latency: None,
            mix: t.mix.clone(),
            refused: t.refused.iter().map(|(r, n)| (r.to_string(), *n)).collect(),
            refused_total: t.refused_total(),
            bad_records: t.bad_records,
        }
    }
}

/// Loss and latency of one class of a replayed capture's frames.
#[derive(Debug, Clone, Serialize)]
pub struct ClassCounts {
    /// The size bucket (`1024-1518`) or the protocol (`udp`).
    pub class: String,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub loss_pct: f64,
    pub latency_p50_ns: f64,
    pub latency_p99_ns: f64,
    pub latency_max_ns: f64,
}

/// Per size bucket and per protocol, from the frames sent per class byte
/// and the sink's class account; classes never sent are left out.
fn per_class(sent: &[u64; 256], c: &ClassAccount) -> (Vec<ClassCounts>, Vec<ClassCounts>) {
    let group = |names: &[&str], key: fn(u8) -> usize| -> Vec<ClassCounts> {
        let mut out = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let (mut s, mut r) = (0u64, 0u64);
            let mut h = LatencyHistogram::new();
            for k in 0..=255u8 {
                if key(k) != i {
                    continue;
                }
                s += sent[usize::from(k)];
                r += c.received[usize::from(k)];
                if let Some(l) = &c.latency[usize::from(k)] {
                    h.merge(l);
                }
            }
            if s == 0 {
                continue;
            }
            let l = h.summary();
            let lost = s.saturating_sub(r);
            out.push(ClassCounts {
                class: (*name).to_owned(),
                sent: s,
                received: r,
                lost,
                loss_pct: lost as f64 * 100.0 / s as f64,
                latency_p50_ns: l.p50,
                latency_p99_ns: l.p99,
                latency_max_ns: l.max,
            });
        }
        out
    };
    let sizes: Vec<&str> = SIZE_BUCKETS.iter().map(|b| b.0).collect();
    (
        group(&sizes, |k| usize::from(k >> 4)),
        group(&PROTOCOLS, |k| usize::from(k & 0x0f)),
    )
}

/// The per-class counts as one JSON value of a record.
pub fn classes_json(v: &[ClassCounts]) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

impl TrialResult {
    pub(super) fn new(
        b: &Bench,
        spec: &TrialSpec,
        planned: u64,
        g: &GenOut,
        a: &SinkAccount,
        sink_drops: u64,
        fwd: Option<FwdSnapshot>,
    ) -> Self {
        let per_flow = a.counts(&g.sent);
        let sum = |f: fn(&FlowCounts) -> u64| per_flow.iter().map(f).sum::<u64>();
        let sent = sum(|c| c.sent);
        let received = sum(|c| c.received);
        let lost = sum(|c| c.lost);
        let achieved = if g.span_s > 0.0 {
            sent as f64 / g.span_s
        } else {
            f64::NAN
        };
        // Back to back offers what the path took.
        let offered = if spec.unpaced { achieved } else { spec.pps() };
        let lag = g.lag.summary();
        let behind = g.stopped_early
            || lag.p99 > spec.lag_bound_ns as f64
            || g.last_lag_ns > spec.lag_bound_ns;
        let arrivals_total = received + sum(|c| c.duplicated);
        let rx_span = a.arrivals.span_s();
        let share = offered * 100e-6;
        let (fr, fw, ft) = fwd.map_or((None, None, None), |f| {
            let (r, w, t) = f.per_packet();
            (Some(r), Some(w), Some(t))
        });
        TrialResult {
            dut: b.dut.name(),
            size: spec.sizes.name.clone(),
            arrivals: spec.arrivals,
            burst: spec.burst,
            flows: spec.flows,
            tx: spec.tx,
            rx: spec.rx,
            duration_s: spec.duration.as_secs_f64(),
            offered_pps: offered,
            achieved_pps: achieved,
            rate_error_pct: (achieved / offered - 1.0) * 100.0,
            lag_p50_ns: lag.p50,
            lag_p99_ns: lag.p99,
            lag_max_ns: lag.max,
            lag_last_ns: g.last_lag_ns,
            lag_bound_ns: spec.lag_bound_ns,
            behind_schedule: behind,
            planned,
            sent,
            received,
            lost,
            loss_pct: if sent > 0 {
                lost as f64 * 100.0 / sent as f64
            } else {
                0.0
            },
            duplicated: sum(|c| c.duplicated),
            reordered: sum(|c| c.reordered),
            reorder_max_distance: per_flow
                .iter()
                .map(|c| c.reorder_max_distance)
                .max()
                .unwrap_or(0),
            late: sum(|c| c.late),
            late_ns: spec.late_ns,
            out_of_range: sum(|c| c.out_of_range),
            foreign: a.foreign + a.short,
            other_version: a.other_version,
            stale: a.unknown_flow,
            probes: g.probes,
            sink_drops,
            host_backlog_drops: None,
            host_stall_ms: None,
            steal_ms: None,
            dut_cpu_busy_ms: None,
            dut_cpu_softirq_ms: None,
            dut_cpu_system_ms: None,
            dut_cpu_ns_per_frame: None,
            dut_own_cpu_ms: None,
            dut_cpu_others_pct: None,
            dut_own_ns_per_frame: None,
            dut_cpu_window_ms: None,
            fwd_ticks_kernel: None,
            loss_where: String::new(),
            latency: a.latency.summary(),
            latency_recorded_pct: if arrivals_total > 0 {
                a.latency.len() as f64 * 100.0 / arrivals_total as f64
            } else {
                f64::NAN
            },
            negative_latency: a.negative_latency,
            window_100us_max: a.arrivals.window_max,
            window_100us_over_share: a.arrivals.window_max as f64 / share.max(1.0),
            gap_p99_ns: if a.arrivals.gaps.is_empty() {
                f64::NAN
            } else {
                a.arrivals.gaps.quantile(0.99)
            },
            delivered_pps: if rx_span > 0.0 {
                received as f64 / rx_span
            } else {
                f64::NAN
            },
            sent_bytes: g.bytes,
            gen_cpu_s: g.cpu_s,
            delivered_per_gen_cpu_s: if g.cpu_s > 0.0 {
                received as f64 / g.cpu_s
            } else {
                f64::NAN
            },
            gen_wait_ms: g.wait_ms,
            gen_preempted: g.preempted,
            fwd,
            fwd_ticks_rx: fr,
            fwd_ticks_work: fw,
            fwd_ticks_tx: ft,
            per_flow,
            partial: g.stopped_early || interrupted(),
            cpus: b.placement(),
            gen_sched: g.sched.clone(),
            traffic: None,
            per_size: Vec::new(),
            per_protocol: Vec::new(),
        }
        .with_traffic(spec, sent, a)
    }

    /// A replayed capture's part: what it was, and loss and latency per
    /// class from what the generator sent (the first `sent` frames of the
    /// offer) and what the sink counted.
    fn with_traffic(mut self, spec: &TrialSpec, sent: u64, a: &SinkAccount) -> Self {
        if let (Some(t), Some(c)) = (&spec.traffic, &a.classes) {
            let (_, classes) = t.plan(sent);
            (self.per_size, self.per_protocol) = per_class(&classes, c);
            let mut ti = TrafficInfo::of(t);
            if let Some(r) = &a.table {
                ti.passed_over = Some(r.passed_over);
                ti.no_latency = Some(a.no_latency);
            }
            self.traffic = Some(ti);
        }
        self
    }

    /// Takes the stall monitor's window of the trial.
    pub(super) fn set_stall(&mut self, w: Option<StallWindow>) {
        self.host_stall_ms = w.map(|w| w.worst_ms);
        self.steal_ms = w.and_then(|w| w.steal_ms);
    }

    /// Takes the device CPU's window of the trial: its busy time, per
    /// frame the device received, and (l2fwd) the part of it outside the
    /// forwarder's own timed sections, in TSC ticks.
    pub(super) fn set_dut_cpu(&mut self, w: Option<DutCpuWindow>) {
        let Some(w) = w else { return };
        let busy_s = w.busy_s();
        self.dut_cpu_busy_ms = Some(busy_s * 1e3);
        self.dut_cpu_softirq_ms = Some(w.times.softirq_s * 1e3);
        self.dut_cpu_system_ms = Some(w.times.system_s * 1e3);
        self.dut_cpu_window_ms = Some(w.window_s * 1e3);
        if let Some(own) = w.own_s {
            // Receive in softirq is counted in the CPU's softirq column
            // (sampled by the tick); in a thread of its own it is in
            // `own_s` already, and the softirq column is other work's.
            let own = if w.own_has_receive {
                own
            } else {
                own + w.times.softirq_s + w.times.irq_s
            };
            self.dut_own_cpu_ms = Some(own * 1e3);
            if w.window_s > 0.0 {
                let others = (busy_s - own - w.tester_s).max(0.0);
                self.dut_cpu_others_pct = Some(100.0 * others / w.window_s);
            }
        }
        let frames = self.fwd.map_or(self.received, |f| f.rx);
        if frames == 0 {
            return;
        }
        self.dut_cpu_ns_per_frame = Some(busy_s * 1e9 / frames as f64);
        self.dut_own_ns_per_frame = self.dut_own_cpu_ms.map(|ms| ms * 1e6 / frames as f64);
        if let Some(f) = &self.fwd {
            let hz = tsc().hz();
            self.fwd_ticks_kernel = kernel_ticks_per_frame(busy_s, hz, f);
        }
    }

    /// Names the hop that lost the most of the lost frames, from the
    /// counters each hop keeps: `sink ring` (the tester's receive ring was
    /// full), `host backlog` (the kernel's per-CPU input queue overflowed:
    /// the host, not the device), `device rx ring` (commbench's forwarder's
    /// receive ring was full: the device's own buffer), and `device` for
    /// what no counter explains (the device or the path inside it: a
    /// bridge, a program, a wire). Empty when nothing was lost.
    pub fn loss_where(&self) -> String {
        if self.lost == 0 {
            return String::new();
        }
        let dut_ring = self.fwd.map_or(0, |f| f.rx_ring_drops);
        let host = self.host_backlog_drops.unwrap_or(0);
        let known = self.sink_drops + host + dut_ring;
        let hops = [
            ("sink ring", self.sink_drops),
            ("host backlog", host),
            ("device rx ring", dut_ring),
            ("device", self.lost.saturating_sub(known)),
        ];
        hops.iter()
            .max_by_key(|h| h.1)
            .map(|h| h.0.to_owned())
            .unwrap_or_default()
    }

    /// The trial's record (`test`: `trial` or the caller's).
    pub fn record(&self, test: &str) -> Record {
        let l = &self.latency;
        let mut r = Record::new("pipeline", test)
            .param("dut", &self.dut)
            .param("size", &self.size)
            .param("arrivals", self.arrivals)
            .param("burst", self.burst)
            .param("flows", self.flows)
            .param("tx", self.tx.name())
            .param("rx", self.rx.name())
            .param("duration_s", self.duration_s)
            .param("offered_pps", self.offered_pps)
            .param("cpus", &self.cpus)
            .metric("achieved_pps", self.achieved_pps)
            .metric("rate_error_pct", self.rate_error_pct)
            .metric("lag_p50_ns", self.lag_p50_ns)
            .metric("lag_p99_ns", self.lag_p99_ns)
            .metric("lag_max_ns", self.lag_max_ns)
            .metric("lag_bound_ns", self.lag_bound_ns)
            .metric("behind_schedule", self.behind_schedule)
            .metric("sent", self.sent)
            .metric("received", self.received)
            .metric("lost", self.lost)
            .metric("loss_pct", self.loss_pct)
            .metric("duplicated", self.duplicated)
            .metric("reordered", self.reordered)
            .metric("reorder_max_distance", self.reorder_max_distance)
            .metric("late", self.late)
            .metric("late_bound_ns", self.late_ns)
            .metric("foreign", self.foreign)
            .metric("stale", self.stale)
            .metric("sink_drops", self.sink_drops)
            .metric("host_backlog_drops", self.host_backlog_drops)
            .metric("host_stall_ms", self.host_stall_ms)
            .metric("steal_ms", self.steal_ms)
            .metric("dut_cpu_busy_ms", self.dut_cpu_busy_ms)
            .metric("dut_cpu_softirq_ms", self.dut_cpu_softirq_ms)
            .metric("dut_cpu_system_ms", self.dut_cpu_system_ms)
            .metric("dut_cpu_ns_per_frame", self.dut_cpu_ns_per_frame)
            .metric("dut_own_cpu_ms", self.dut_own_cpu_ms)
            .metric("dut_cpu_others_pct", self.dut_cpu_others_pct)
            .metric("dut_own_ns_per_frame", self.dut_own_ns_per_frame)
            .metric("loss_where", &self.loss_where)
            .metric("latency_p50_ns", l.p50)
            .metric("latency_p90_ns", l.p90)
            .metric("latency_p99_ns", l.p99)
            .metric("latency_p999_ns", l.p999)
            .metric("latency_p9999_ns", l.p9999)
            .metric("latency_max_ns", l.max)
            .metric("latency_recorded_pct", self.latency_recorded_pct)
            .metric("window_100us_max", self.window_100us_max)
            .metric("window_100us_over_share", self.window_100us_over_share)
            .metric("gap_p99_ns", self.gap_p99_ns)
            .metric("delivered_pps", self.delivered_pps)
            .metric("sent_bytes", self.sent_bytes)
            .metric("gen_cpu_s", self.gen_cpu_s)
            .metric("delivered_per_gen_cpu_s", self.delivered_per_gen_cpu_s)
            .metric("gen_wait_ms", self.gen_wait_ms)
            .metric("gen_preempted", self.gen_preempted)
            .metric("gen_sched", &self.gen_sched);
        if let Some(f) = &self.fwd {
            r.push_metric("fwd_rx", f.rx);
            r.push_metric("fwd_tx", f.tx);
            r.push_metric("fwd_rx_ring_drops", f.rx_ring_drops);
            r.push_metric("fwd_ticks_rx", self.fwd_ticks_rx);
            r.push_metric("fwd_ticks_work", self.fwd_ticks_work);
            r.push_metric("fwd_ticks_tx", self.fwd_ticks_tx);
            r.push_metric("fwd_ticks_kernel", self.fwd_ticks_kernel);
        }
        if let Some(t) = &self.traffic {
            t.add_to(&mut r);
            r.push_metric("per_size", classes_json(&self.per_size));
            r.push_metric("per_protocol", classes_json(&self.per_protocol));
        }
        r.push_metric("partial", self.partial || self.behind_schedule);
        r
    }
}
