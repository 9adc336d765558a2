//! `mux load --segment I/N --start-at MS`: one standalone share of an
//! open-loop run split over processes or hosts (k6's execution segments;
//! started by a Kubernetes Indexed Job or ssh, never by a master of our
//! own), and `commbench merge`, which adds the shares back into the run's
//! record.
//!
//! A segment takes the connections, active connections and rate that
//! `--load-procs` would give its I-th worker ([`crate::procs::shares`],
//! [`crate::procs::rate_share`]); every connection keeps its global index,
//! so its phase and Poisson seed are the ones it has in one process, and
//! the segments interleave. Every segment's schedule starts on the same
//! wall-clock instant (`--start-at`, ms since the Unix epoch, read on each
//! host's clock). The segment file ([`commbench_core::segment`]) carries
//! the exact corrected, raw and lag histograms and the counts; the merge
//! adds them — counts exactly, percentiles from the added histograms —
//! and the achieved rate is all measured sends over the span from the
//! earliest first send to the latest last one. With `--tls` the file
//! also carries the handshake counts and the handshake histogram, added
//! the same way; HTTPS and plain segments are not merged together. The
//! server's CPU is not merged: each segment saw the whole server over its
//! own window.

use std::collections::BTreeMap;
use std::time::Duration;

use commbench_core::clock;
use commbench_core::segment::{Header, Segment, SegmentError, FORMAT, VERSION};
use commbench_core::stats::LatencyHistogram;
use commbench_core::Record;
use serde_json::Value;

use crate::harness::{self, MuxReport};
use crate::open::{OpenOut, Split};
use crate::{procs, MuxConfig, MuxError, Result};

/// This run's place in a run split into segments, and the whole run's
/// figures its own were cut from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SegmentSpec {
    /// Its share, from 0.
    pub index: u32,
    /// Segments in the run.
    pub count: u32,
    /// The shared start, ms since the Unix epoch.
    pub start_at_ms: u64,
    /// The whole run's connections, active connections and rate.
    pub conns: usize,
    pub active: usize,
    pub rate: f64,
}

/// The latest `--start-at` accepted, ahead of now.
pub const MAX_START_AHEAD_MS: u64 = 24 * 3600 * 1000;

/// The histograms a segment file carries.
const TAGS: [&str; 3] = ["corrected_ns", "raw_ns", "lag_ns"];
/// With `--tls`, also the handshake latency from the intended start.
const HANDSHAKE_TAG: &str = "handshake_ns";
/// With `--tls`, the handshake counts (full, resumed, failed).
const TLS_COUNTS: [&str; 3] = ["tls.full", "tls.resumed", "tls.failed"];

/// Cuts `cfg` (the whole run, as every segment is given it) down to share
/// `index` of `count`, starting at `start_at_ms`.
pub fn apply(cfg: &mut MuxConfig, index: u32, count: u32, start_at_ms: u64) -> Result<()> {
    let bad = |m: String| Err(MuxError::usage(m));
    let Some(rate) = cfg.open.rate else {
        return bad(
            "--segment shares one open-loop schedule: give --rate (the whole run's)".into(),
        );
    };
    if cfg.load_procs > 1 {
        return bad(
            "--segment is one load process: run more segments instead of --load-procs".into(),
        );
    }
    if cfg.repeat != 1 {
        return bad("--segment runs once, from one start instant: drop --repeat".into());
    }
    let active = cfg.active();
    if count as usize > active || index >= count {
        return bad(format!(
            "--segment {index}/{count}: {count} segments need at least {count} active connections; the run has {active}"
        ));
    }
    let now_ms = clock::realtime_ns() / 1_000_000;
    if start_at_ms > now_ms + MAX_START_AHEAD_MS {
        return bad(format!(
            "--start-at {start_at_ms} is more than a day ahead (now {now_ms} ms since the epoch)"
        ));
    }
    if start_at_ms <= now_ms {
        return bad(format!(
            "--start-at {start_at_ms} has passed (now {now_ms} ms since the epoch): give an instant a little ahead, the same to every segment, e.g. $(( $(date +%s%3N) + 30000 ))"
        ));
    }
    let s = procs::shares(cfg.conns, active, count as usize)[index as usize];
    cfg.segment = Some(SegmentSpec {
        index,
        count,
        start_at_ms,
        conns: cfg.conns,
        active,
        rate,
    });
    cfg.conns = s.conns;
    cfg.active = Some(s.active);
    cfg.open.rate = Some(procs::rate_share(rate, s.active, active));
    cfg.open.split = Some(Split {
        first_conn: s.first_active,
        active_total: active,
    });
    cfg.open.start_at_unix_ns = Some(start_at_ms * 1_000_000);
    Ok(())
}

/// The segment file of a finished segment run: its record, histograms
/// and counts.
pub fn segment_file(cfg: &MuxConfig, report: &MuxReport, record: &Record) -> Result<Segment> {
    let missing = || MuxError::Load("no open-loop figures to write a segment file from".into());
    let spec = cfg.segment.ok_or_else(missing)?;
    let r = report.results.first().ok_or_else(missing)?;
    let o = r.open_runs.first().ok_or_else(missing)?;
    // TSC ticks to this host's wall clock, anchored now (drift over a run
    // is parts per million).
    let tsc = clock::tsc();
    let (t_now, u_now) = (clock::rdtsc(), clock::realtime_ns());
    let unix = |t: u64| u_now.saturating_sub(tsc.ticks_to_ns(t_now.saturating_sub(t)) as u64);
    let mut run = record.params.clone();
    run.remove("segment");
    run.insert("conns".into(), spec.conns.into());
    run.insert("active".into(), spec.active.into());
    run.insert("rate".into(), spec.rate.into());
    let mut counts = BTreeMap::from([
        ("scheduled".to_string(), o.scheduled),
        ("completed".to_string(), o.completed),
        ("held".to_string(), o.held),
        ("sent".to_string(), o.sent),
        ("connected".to_string(), r.connected as u64),
        ("connect_failures".to_string(), r.connect_failures),
        ("round_trips".to_string(), r.round_trips),
    ]);
    if let Ok(Value::Object(m)) = serde_json::to_value(o.http) {
        for (k, v) in m {
            counts.insert(format!("http.{k}"), v.as_u64().unwrap_or(0));
        }
    }
    let mut histograms = vec![
        (TAGS[0].into(), o.corrected.clone()),
        (TAGS[1].into(), o.raw.clone()),
        (TAGS[2].into(), o.lag.clone()),
    ];
    if cfg.tls.is_some() {
        let t = &o.tls;
        for (k, v) in TLS_COUNTS.iter().zip([t.full, t.resumed, t.failed]) {
            counts.insert((*k).into(), v);
        }
        histograms.push((HANDSHAKE_TAG.into(), t.handshake.clone()));
    }
    Ok(Segment {
        header: Header {
            format: FORMAT.into(),
            version: VERSION,
            lab: record.lab.clone(),
            test: record.test.clone(),
            index: spec.index,
            count: spec.count,
            start_at_ms: spec.start_at_ms,
            run,
            counts,
            first_send_unix_ns: (o.sent > 0).then(|| unix(o.first_send)),
            last_send_unix_ns: (o.sent > 0).then(|| unix(o.last_send)),
            measured_from_s: cfg.open.warmup.as_secs_f64(),
            measured_s: o.measured_s,
            record: record.clone(),
        },
        histograms,
    })
}

fn not(m: String) -> SegmentError {
    SegmentError::NotTogether(m)
}

/// The counts a merge adds (the rest of a header's counts are not read,
/// so a forged file's thousands of made-up names cost nothing).
fn added_count(k: &str) -> bool {
    matches!(
        k,
        "scheduled"
            | "completed"
            | "held"
            | "sent"
            | "connected"
            | "connect_failures"
            | "round_trips"
    ) || TLS_COUNTS.contains(&k)
        || k.strip_prefix("http.")
            .is_some_and(|f| HTTP_FIELDS.contains(&f))
}

/// The fields of [`crate::http1::Counts`], as `http.NAME` counts carry them.
const HTTP_FIELDS: [&str; 9] = [
    "s1xx",
    "s2xx",
    "s3xx",
    "s4xx",
    "s5xx",
    "errors",
    "resets",
    "reconnects",
    "timeouts",
];

/// What the first completed handshake negotiated, or the first failure,
/// from the segment of the lowest index that has it (as the order of
/// the shares, whatever the order of the files).
#[derive(Default)]
struct TlsText {
    first_error: Option<(u32, String)>,
    negotiated: Option<(u32, [Option<String>; 3])>,
}

/// Adds one run's segments as they come (`commbench merge` streams): the
/// histograms and counts into running sums, the lowest share's header
/// kept for the run's parameters; each segment is dropped once added.
/// Counts add with checked arithmetic: an overflow is an error naming the
/// count, never a wrapped figure.
pub struct Merger {
    /// The header of the lowest share added (the record's metrics and
    /// the run's parameters).
    first: Option<Header>,
    /// Whether the first segment added ran with --tls, and its share.
    tls: Option<(bool, u32)>,
    counts: BTreeMap<String, u64>,
    hists: Vec<LatencyHistogram>,
    tls_text: TlsText,
    first_send: Option<u64>,
    last_send: Option<u64>,
    partial: bool,
    oversubscribed: bool,
    rt_per_s: f64,
    client_cpu_us: f64,
    connect_s: f64,
    connects_per_s: f64,
}

impl Default for Merger {
    fn default() -> Self {
        Merger {
            first: None,
            tls: None,
            counts: BTreeMap::new(),
            hists: (0..=TAGS.len()).map(|_| LatencyHistogram::new()).collect(),
            tls_text: TlsText::default(),
            first_send: None,
            last_send: None,
            partial: false,
            oversubscribed: false,
            rt_per_s: 0.0,
            client_cpu_us: 0.0,
            connect_s: 0.0,
            connects_per_s: 0.0,
        }
    }
}

impl commbench_core::segment::SegmentMerger for Merger {
    fn add(&mut self, s: Segment) -> std::result::Result<(), SegmentError> {
        let h = &s.header;
        let who = format!("segment {}/{}", h.index, h.count);
        // HTTPS and plain segments are not merged (`commbench merge` finds
        // it first, as a parameter that differs; this says it for callers
        // that did not check).
        let is_tls = h.run.contains_key("tls") || s.histogram(HANDSHAKE_TAG).is_some();
        match self.tls {
            None => self.tls = Some((is_tls, h.index)),
            Some((tls, at)) if tls != is_tls => {
                let (a, b) = if tls { (at, h.index) } else { (h.index, at) };
                return Err(not(format!(
                    "cannot merge HTTPS and plain segments: segment {a}/{n} ran with --tls and segment {b}/{n} without; merge the segments of one command",
                    n = h.count
                )));
            }
            Some(_) => {}
        }
        let tags = TAGS.iter().chain(is_tls.then_some(&HANDSHAKE_TAG));
        for (i, tag) in tags.enumerate() {
            let one = s
                .histogram(tag)
                .ok_or_else(|| not(format!("{who} has no {tag} histogram")))?;
            // The histograms add without loss or overflow, or the merge stops.
            self.hists[i]
                .try_merge(one)
                .map_err(|e| not(format!("{tag}: {e}")))?;
        }
        for (k, v) in h.counts.iter().filter(|(k, _)| added_count(k)) {
            let sum = self.counts.entry(k.clone()).or_insert(0);
            *sum = sum.checked_add(*v).ok_or_else(|| {
                not(format!(
                    "the merged count {k} overflows a 64-bit count at {who} (adding {v} to {sum}): a segment file is damaged or forged"
                ))
            })?;
        }
        if is_tls {
            let t = h.record.metrics.get("tls");
            let text = |k: &str| {
                t.and_then(|t| t.get(k))
                    .and_then(Value::as_str)
                    .map(String::from)
            };
            let earlier = |at: Option<u32>| at.is_none_or(|at| h.index < at);
            if let Some(e) = text("first_error") {
                if earlier(self.tls_text.first_error.as_ref().map(|x| x.0)) {
                    self.tls_text.first_error = Some((h.index, e));
                }
            }
            let version = text("version");
            if version.is_some() && earlier(self.tls_text.negotiated.as_ref().map(|x| x.0)) {
                self.tls_text.negotiated = Some((h.index, [version, text("cipher"), text("alpn")]));
            }
        }
        if let Some(f) = h.first_send_unix_ns {
            self.first_send = Some(self.first_send.map_or(f, |x| x.min(f)));
        }
        if let Some(l) = h.last_send_unix_ns {
            self.last_send = Some(self.last_send.map_or(l, |x| x.max(l)));
        }
        let metric = |k: &str| h.record.metrics.get(k).and_then(Value::as_f64);
        self.partial |= h.record.metrics.get("partial") == Some(&Value::Bool(true));
        self.oversubscribed |= h.record.metrics.get("oversubscribed") == Some(&Value::Bool(true));
        self.rt_per_s += metric("rt_per_s").unwrap_or(0.0);
        self.client_cpu_us += metric("client_cpu_us_per_rt").unwrap_or(0.0)
            * h.counts.get("round_trips").copied().unwrap_or(0) as f64;
        self.connect_s = self.connect_s.max(metric("connect_s").unwrap_or(0.0));
        self.connects_per_s += metric("connects_per_s").unwrap_or(0.0);
        if self.first.as_ref().is_none_or(|f| h.index < f.index) {
            self.first = Some(s.header);
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> std::result::Result<Vec<Record>, SegmentError> {
        self.records()
    }
}

impl Merger {
    fn records(self) -> std::result::Result<Vec<Record>, SegmentError> {
        let h0 = self.first.ok_or_else(|| not("no segments".into()))?;
        let tls = self.tls.is_some_and(|t| t.0);
        let run = &h0.run;
        let num = |k: &str| run.get(k).and_then(Value::as_f64);
        let mut cfg = MuxConfig::default();
        cfg.open.rate = num("rate");
        cfg.open.max_lag =
            Duration::from_secs_f64(num("max_lag_us").unwrap_or(1000.0).clamp(0.0, 1e12) / 1e6);
        cfg.protocol = run
            .get("protocol")
            .and_then(Value::as_str)
            .and_then(crate::Protocol::parse)
            .unwrap_or(crate::Protocol::Raw);
        let c = |k: &str| self.counts.get(k).copied().unwrap_or(0);
        let mut http = serde_json::Map::new();
        for f in HTTP_FIELDS {
            http.insert(f.into(), c(&format!("http.{f}")).into());
        }
        let mut hists = self.hists.into_iter();
        let mut next = || hists.next().unwrap_or_default();
        let (corrected, raw, lag, handshake) = (next(), next(), next(), next());
        let tls_out = if tls {
            let [version, cipher, alpn] = self.tls_text.negotiated.map(|n| n.1).unwrap_or_default();
            crate::tls::TlsOut {
                full: c(TLS_COUNTS[0]),
                resumed: c(TLS_COUNTS[1]),
                failed: c(TLS_COUNTS[2]),
                first_error: self.tls_text.first_error.map(|e| e.1),
                version,
                cipher,
                alpn,
                handshake,
            }
        } else {
            Default::default()
        };
        let sent = c("sent");
        let all = OpenOut {
            corrected,
            raw,
            lag,
            scheduled: c("scheduled"),
            completed: c("completed"),
            held: c("held"),
            measured_s: h0.measured_s,
            sent,
            first_send: 0,
            last_send: 0,
            http: serde_json::from_value(Value::Object(http)).unwrap_or_default(),
            tls: tls_out,
        };
        let achieved = match (self.first_send, self.last_send) {
            (Some(a), Some(b)) if b > a && sent >= 2 => {
                vec![(sent - 1) as f64 / ((b - a) as f64 / 1e9)]
            }
            _ => Vec::new(),
        };
        let open = harness::open_figures(&cfg, &[&all], achieved, tls)
            .ok_or_else(|| not("no open-loop figures in the segments".into()))?;
        let connected = c("connected");
        let round_trips = c("round_trips");
        let partial = connected < num("conns").unwrap_or(0.0) as u64 || self.partial;
        let mut rec = Record::new(&h0.lab, &h0.test);
        rec.params = run.clone();
        rec.push_param("segments", h0.count);
        rec.push_param("start_at_ms", h0.start_at_ms);
        rec.metrics = h0.record.metrics.clone();
        for k in [
            "server_user_us_per_rt",
            "server_sys_us_per_rt",
            "server_cpu_us_per_rt",
            "server_cpu_us_per_rt_total",
            "server_refused",
            "events_per_wait",
            "waits_per_rt",
            "syscalls_per_rt",
            "scan_steps_per_rt",
            "uring_deferred",
            "client_user_us_per_rt",
            "client_sys_us_per_rt",
        ] {
            rec.push_metric(k, Value::Null);
        }
        rec.metrics.remove("too_short");
        rec.push_metric(
            "server_cpu_note",
            "not merged: each segment measured the whole server's CPU over its own window",
        );
        rec.push_metric("runs", 1);
        rec.push_metric("connected", connected);
        rec.push_metric("connect_failures", c("connect_failures"));
        rec.push_metric("partial", partial);
        rec.push_metric("round_trips", round_trips);
        for k in ["rt_per_s", "rt_per_s_min", "rt_per_s_max"] {
            rec.push_metric(k, self.rt_per_s);
        }
        rec.push_metric(
            "client_cpu_us_per_rt",
            self.client_cpu_us / round_trips.max(1) as f64,
        );
        rec.push_metric("connect_s", self.connect_s);
        rec.push_metric("connects_per_s", self.connects_per_s);
        rec.push_metric("oversubscribed", self.oversubscribed);
        rec.push_metric("latency_ns", &open.raw_ns);
        if let Ok(Value::Object(m)) = serde_json::to_value(&open) {
            for (k, v) in m {
                rec.metrics.insert(k, v);
            }
        }
        harness::push_flat(&mut rec, &open.corrected_ns, &open.raw_ns, &open.lag_ns);
        rec.push_metric("status", harness::status_of(partial, Some(&open)));
        Ok(vec![rec])
    }
}

/// Adds segments (already checked to be every share of one run,
/// [`commbench_core::segment::check_together`]) into the run's record:
/// [`Merger`] over a slice.
pub fn merge(segs: &[Segment]) -> std::result::Result<Vec<Record>, SegmentError> {
    use commbench_core::segment::SegmentMerger;
    let mut m = Box::<Merger>::default();
    for s in segs {
        m.add(s.clone())?;
    }
    m.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use commbench_core::segment::Header;

    /// A segment of a 3-way HTTPS run (or a plain one when `tls` is
    /// false) whose requests and handshakes took `values` ns, written to
    /// its file and read back.
    fn seg(index: u32, tls: bool, values: &[u64], counts: [u64; 3]) -> Segment {
        let mut h = LatencyHistogram::new();
        for &v in values {
            h.record_ns(v);
        }
        let mut run = serde_json::Map::new();
        run.insert("protocol".into(), "http1".into());
        run.insert("rate".into(), 3000.0.into());
        run.insert("conns".into(), 3.into());
        let mut record = Record::new("mux", "open");
        let mut histograms = TAGS
            .iter()
            .map(|t| (t.to_string(), h.clone()))
            .collect::<Vec<_>>();
        let mut c = BTreeMap::from([
            ("sent".to_string(), values.len() as u64),
            ("completed".to_string(), values.len() as u64),
            ("connected".to_string(), 1),
        ]);
        if tls {
            run.insert("tls".into(), "any".into());
            record.push_metric(
                "tls",
                serde_json::json!({"version": "TLSv1.3", "cipher": "TLS13_AES_128_GCM_SHA256", "alpn": "http/1.1"}),
            );
            histograms.push((HANDSHAKE_TAG.into(), h.clone()));
            for (k, v) in TLS_COUNTS.iter().zip(counts) {
                c.insert((*k).into(), v);
            }
        }
        let s = Segment {
            header: Header {
                format: commbench_core::segment::FORMAT.into(),
                version: commbench_core::segment::VERSION,
                lab: "mux".into(),
                test: "open".into(),
                index,
                count: 3,
                start_at_ms: 1_700_000_000_000,
                run,
                counts: c,
                first_send_unix_ns: Some(1_000_000_000 + u64::from(index)),
                last_send_unix_ns: Some(2_000_000_000 + u64::from(index)),
                measured_from_s: 0.5,
                measured_s: 1.0,
                record,
            },
            histograms,
        };
        let mut b = Vec::new();
        s.write(&mut b).unwrap();
        Segment::parse(&b).unwrap()
    }

    fn values(n: u64, salt: u64) -> Vec<u64> {
        // Tens of µs to tens of ms, spread over many buckets.
        (0..n)
            .map(|i| 20_000 + (i * 7_919 + salt * 104_729) % 30_000_000)
            .collect()
    }

    /// The handshake figures of segments add like their latencies: the
    /// counts are the sums, the percentiles those of one histogram that
    /// recorded every handshake.
    #[test]
    fn merged_handshakes_are_the_sums_and_one_histogram_of_all() {
        let parts = [values(5_000, 1), values(3_000, 2), values(4_000, 3)];
        let counts = [[10, 4_990, 1], [3, 2_997, 0], [7, 3_993, 2]];
        let segs: Vec<Segment> = (0..3)
            .map(|i| seg(i as u32, true, &parts[i], counts[i]))
            .collect();
        let rec = merge(&segs).unwrap().remove(0);
        let t = &rec.metrics["tls"];
        let sum = |j: usize| counts.iter().map(|c| c[j]).sum::<u64>();
        assert_eq!(t["full"], sum(0), "{t}");
        assert_eq!(t["resumed"], sum(1), "{t}");
        assert_eq!(t["failed"], sum(2), "{t}");
        assert_eq!(t["handshakes"], sum(0) + sum(1), "{t}");
        assert_eq!(t["version"], "TLSv1.3", "{t}");
        let mut all = LatencyHistogram::new();
        for v in parts.iter().flatten() {
            all.record_ns(*v);
        }
        let want = all.summary();
        let got = &t["handshake_ns"];
        assert_eq!(got["n"], want.n, "{got}");
        for (k, w) in [
            ("min", want.min),
            ("p50", want.p50),
            ("p90", want.p90),
            ("p99", want.p99),
            ("p999", want.p999),
            ("p9999", want.p9999),
            ("max", want.max),
        ] {
            assert_eq!(got[k].as_f64(), Some(w), "{k}: {got}");
        }
    }

    /// Issue 50, item 9: every added count is checked, not only `sent`
    /// (`completed`, `scheduled`, `held`, `http.*`, `tls.*` wrapped).
    #[test]
    fn merged_counts_wrapped_silently() {
        for k in [
            "scheduled",
            "held",
            "http.s2xx",
            "http.timeouts",
            "tls.full",
            "tls.failed",
        ] {
            let mut segs: Vec<Segment> = (0..3)
                .map(|i| seg(i, true, &values(10, u64::from(i)), [1, 9, 0]))
                .collect();
            segs[0].header.counts.insert(k.into(), u64::MAX);
            segs[2].header.counts.insert(k.into(), 2);
            let e = merge(&segs).unwrap_err().to_string();
            assert!(
                e.contains(&format!("the merged count {k} overflows")),
                "{k}: {e}"
            );
        }
    }

    #[test]
    fn the_http_counts_merge_adds_are_every_field_of_counts() {
        let v = serde_json::to_value(crate::http1::Counts::default()).unwrap();
        let fields: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(fields, HTTP_FIELDS);
    }

    #[test]
    fn https_and_plain_segments_are_not_merged() {
        let segs = vec![
            seg(0, true, &values(10, 1), [1, 9, 0]),
            seg(1, false, &values(10, 2), [0; 3]),
            seg(2, true, &values(10, 3), [1, 9, 0]),
        ];
        let e = merge(&segs).unwrap_err().to_string();
        assert!(
            e.contains("cannot merge HTTPS and plain segments")
                && e.contains("segment 0/3 ran with --tls and segment 1/3 without"),
            "{e}"
        );
        // An HTTPS segment without its handshake histogram is refused too.
        let mut bare = seg(1, true, &values(10, 2), [1, 9, 0]);
        bare.histograms.retain(|(t, _)| t != HANDSHAKE_TAG);
        let e = merge(&[segs[0].clone(), bare, segs[2].clone()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no handshake_ns histogram"), "{e}");
        // Plain segments carry no handshake figures.
        let plain: Vec<Segment> = (0..3)
            .map(|i| seg(i, false, &values(10, u64::from(i)), [0; 3]))
            .collect();
        let rec = merge(&plain).unwrap().remove(0);
        assert_eq!(rec.metrics["tls"], Value::Null);
    }
}
