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

/// A segment's handshakes: its counts and handshake histogram, with what
/// its own record says was negotiated (`tls` in its metrics).
fn tls_of(s: &Segment) -> std::result::Result<crate::tls::TlsOut, SegmentError> {
    let h = &s.header;
    let handshake = s.histogram(HANDSHAKE_TAG).cloned().ok_or_else(|| {
        not(format!(
            "segment {}/{} ran with --tls but carries no {HANDSHAKE_TAG} histogram",
            h.index, h.count
        ))
    })?;
    let c = |k: &str| h.counts.get(k).copied().unwrap_or(0);
    let t = h.record.metrics.get("tls");
    let text = |k: &str| {
        t.and_then(|t| t.get(k))
            .and_then(Value::as_str)
            .map(String::from)
    };
    Ok(crate::tls::TlsOut {
        full: c(TLS_COUNTS[0]),
        resumed: c(TLS_COUNTS[1]),
        failed: c(TLS_COUNTS[2]),
        first_error: text("first_error"),
        version: text("version"),
        cipher: text("cipher"),
        alpn: text("alpn"),
        handshake,
    })
}

/// Refuses HTTPS segments mixed with plain ones (`commbench merge` finds
/// it first, as a parameter that differs; this says it for callers of
/// [`merge`] that did not check).
fn same_tls(segs: &[&Segment]) -> std::result::Result<bool, SegmentError> {
    let is_tls =
        |s: &Segment| s.header.run.contains_key("tls") || s.histogram(HANDSHAKE_TAG).is_some();
    let Some(first) = segs.first() else {
        return Ok(false);
    };
    let tls = is_tls(first);
    if let Some(other) = segs.iter().find(|s| is_tls(s) != tls) {
        let (a, b) = if tls { (first, other) } else { (other, first) };
        return Err(not(format!(
            "cannot merge HTTPS and plain segments: segment {}/{} ran with --tls and segment {}/{} without; merge the segments of one command",
            a.header.index, a.header.count, b.header.index, b.header.count
        )));
    }
    Ok(tls)
}

/// Adds segments (already checked to be every share of one run,
/// [`commbench_core::segment::check_together`]) into the run's record.
pub fn merge(segs: &[Segment]) -> std::result::Result<Vec<Record>, SegmentError> {
    let mut segs: Vec<&Segment> = segs.iter().collect();
    segs.sort_by_key(|s| s.header.index);
    let first = segs.first().ok_or_else(|| not("no segments".into()))?;
    let tls = same_tls(&segs)?;
    let h0 = &first.header;
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
    let mut outs = Vec::new();
    for s in &segs {
        let h = &s.header;
        let hist = |tag: &str| -> std::result::Result<LatencyHistogram, SegmentError> {
            s.histogram(tag).cloned().ok_or_else(|| {
                not(format!(
                    "segment {}/{} has no {tag} histogram",
                    h.index, h.count
                ))
            })
        };
        let c = |k: &str| h.counts.get(k).copied().unwrap_or(0);
        let mut http = serde_json::Map::new();
        for (k, v) in &h.counts {
            if let Some(name) = k.strip_prefix("http.") {
                http.insert(name.into(), (*v).into());
            }
        }
        outs.push(OpenOut {
            corrected: hist(TAGS[0])?,
            raw: hist(TAGS[1])?,
            lag: hist(TAGS[2])?,
            scheduled: c("scheduled"),
            completed: c("completed"),
            held: c("held"),
            measured_s: h.measured_s,
            sent: c("sent"),
            first_send: 0,
            last_send: 0,
            http: serde_json::from_value(Value::Object(http)).unwrap_or_default(),
            tls: if tls { tls_of(s)? } else { Default::default() },
        });
    }
    let sum = |k: &str| -> std::result::Result<u64, SegmentError> {
        segs.iter().try_fold(0u64, |a, s| {
            a.checked_add(s.header.counts.get(k).copied().unwrap_or(0))
                .ok_or_else(|| not(format!("{k} overflows")))
        })
    };
    let sent = sum("sent")?;
    let first_send = segs
        .iter()
        .filter_map(|s| s.header.first_send_unix_ns)
        .min();
    let last_send = segs.iter().filter_map(|s| s.header.last_send_unix_ns).max();
    let achieved = match (first_send, last_send) {
        (Some(a), Some(b)) if b > a && sent >= 2 => {
            vec![(sent - 1) as f64 / ((b - a) as f64 / 1e9)]
        }
        _ => Vec::new(),
    };
    // The histograms add without loss or overflow, or the merge stops.
    for tag in TAGS.into_iter().chain(tls.then_some(HANDSHAKE_TAG)) {
        let mut all = LatencyHistogram::new();
        for s in &segs {
            if let Some(h) = s.histogram(tag) {
                all.try_merge(h).map_err(|e| not(format!("{tag}: {e}")))?;
            }
        }
    }
    let refs: Vec<&OpenOut> = outs.iter().collect();
    let open = harness::open_figures(&cfg, &refs, achieved, tls)
        .ok_or_else(|| not("no open-loop figures in the segments".into()))?;
    let metric = |s: &Segment, k: &str| s.header.record.metrics.get(k).and_then(Value::as_f64);
    let connected = sum("connected")?;
    let round_trips = sum("round_trips")?;
    let partial = connected < num("conns").unwrap_or(0.0) as u64
        || segs
            .iter()
            .any(|s| s.header.record.metrics.get("partial") == Some(&Value::Bool(true)));
    let rt_per_s: f64 = segs.iter().filter_map(|s| metric(s, "rt_per_s")).sum();
    let client_cpu_us: f64 = segs
        .iter()
        .map(|s| {
            metric(s, "client_cpu_us_per_rt").unwrap_or(0.0)
                * s.header.counts.get("round_trips").copied().unwrap_or(0) as f64
        })
        .sum();
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
    rec.push_metric("connect_failures", sum("connect_failures")?);
    rec.push_metric("partial", partial);
    rec.push_metric("round_trips", round_trips);
    for k in ["rt_per_s", "rt_per_s_min", "rt_per_s_max"] {
        rec.push_metric(k, rt_per_s);
    }
    rec.push_metric(
        "client_cpu_us_per_rt",
        client_cpu_us / round_trips.max(1) as f64,
    );
    rec.push_metric(
        "connect_s",
        segs.iter()
            .filter_map(|s| metric(s, "connect_s"))
            .fold(0.0, f64::max),
    );
    rec.push_metric(
        "connects_per_s",
        segs.iter()
            .filter_map(|s| metric(s, "connects_per_s"))
            .sum::<f64>(),
    );
    rec.push_metric(
        "oversubscribed",
        segs.iter()
            .any(|s| s.header.record.metrics.get("oversubscribed") == Some(&Value::Bool(true))),
    );
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
