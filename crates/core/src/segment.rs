//! Segments: one run's load split over standalone processes, on one host
//! or many (k6's execution segments), each taking a fixed share and
//! starting on one shared wall-clock instant, with no coordinator of our
//! own. Each writes its exact latency histograms to a segment file, which
//! `commbench merge` adds into the run's records.
//!
//! A segment file is an HdrHistogram interval log (`.hlog`, the format
//! Java's `HistogramLogReader`/`HistogramLogProcessor` and the Rust
//! `hdrhistogram` crate read): comment lines, `StartTime`/`BaseTime` set to
//! the shared start, and one line per histogram, tagged by name, in the
//! compressed V2 encoding (base64). One comment line,
//! `#[commbench-segment: {json}]`, holds the [`Header`]: which run (lab,
//! test, the whole run's parameters), which share (`index`/`count`), the
//! start instant, the counts that add across segments and the segment's
//! own record. Other tools skip that line as a comment.
//!
//! Invariants: a file is untrusted. It is read to at most
//! [`MAX_FILE_BYTES`], each histogram is inflated to at most
//! [`MAX_INFLATED`] and its V2 header checked (3 significant digits,
//! lowest value 1, a bounded highest value, a payload within the bytes
//! there) before the histogram crate sees it, so no field can make us
//! allocate beyond the bounds; every fault is an error naming the line,
//! never a panic. [`check_together`] refuses segments of different runs,
//! a missing or duplicated share, and start instants too far apart, and
//! names which.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::record::Record;
use crate::stats::LatencyHistogram;

/// What the header's `format` says.
pub const FORMAT: &str = "commbench-segment";
/// The header's `version`.
pub const VERSION: u32 = 1;
/// The largest segment file read.
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// The most histograms a file may hold.
pub const MAX_HISTOGRAMS: usize = 16;
/// The most segments one run may be split into.
pub const MAX_SEGMENTS: u32 = 4096;
/// The most bytes one histogram may inflate to.
pub const MAX_INFLATED: usize = 4 << 20;
/// The highest trackable value a histogram may declare (ns: 146 years).
pub const MAX_HIGHEST: u64 = 1 << 62;
/// The most parameters, metrics and counts (leaves) a header may hold.
const MAX_LEAVES: usize = 20_000;
/// How a header line starts (a comment to every other reader).
const HEADER_PREFIX: &str = "#[commbench-segment: ";

/// The V2 cookies with the word size bits (0x10) as every writer sets them.
const V2_COOKIE: u32 = 0x1c84_9313;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;
/// Bytes of a V2 histogram's header (cookie, payload length, normalizing
/// offset, digits, lowest, highest, integer-to-double ratio).
const V2_HEADER: usize = 40;

/// Which run a segment belongs to and what it counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// The record's lab (`mux`).
    pub lab: String,
    /// The record's test (`open`).
    pub test: String,
    /// This segment's share, from 0 (`--segment index/count`).
    pub index: u32,
    /// Segments in the run.
    pub count: u32,
    /// The shared start instant, ms since the Unix epoch (`--start-at`).
    pub start_at_ms: u64,
    /// The whole run's parameters (not this segment's share): equal in
    /// every segment of one run.
    pub run: Map<String, Value>,
    /// Counts that add across segments (requests scheduled, completed, ...).
    pub counts: BTreeMap<String, u64>,
    /// The first and last measured send, ns since the Unix epoch (this
    /// host's clock).
    pub first_send_unix_ns: Option<u64>,
    /// See `first_send_unix_ns`.
    pub last_send_unix_ns: Option<u64>,
    /// Where the measured window starts after the start instant, seconds.
    pub measured_from_s: f64,
    /// The measured window, seconds.
    pub measured_s: f64,
    /// The segment's own record (its share of the load).
    pub record: Record,
}

/// One segment: its header and its histograms by tag.
#[derive(Debug, Clone)]
pub struct Segment {
    /// Which run and which share.
    pub header: Header,
    /// Histograms by tag (`corrected_ns`, `raw_ns`, ...), in file order.
    pub histograms: Vec<(String, LatencyHistogram)>,
}

/// A segment file that cannot be used, or segments that do not belong
/// together.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error("{path}: larger than {max} bytes: not a segment file", max = MAX_FILE_BYTES)]
    TooLarge {
        /// The file.
        path: String,
    },
    /// The file's content is not a segment.
    #[error("{}", malformed(path, *line, what))]
    Malformed {
        /// The file (empty: bytes parsed without a name).
        path: String,
        /// 1-based line number (0: the file as a whole).
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// Segments that are not one run's.
    #[error("{0}")]
    NotTogether(String),
}

fn malformed(path: &str, line: usize, what: &str) -> String {
    let at = if line > 0 {
        format!("line {line}: ")
    } else {
        String::new()
    };
    if path.is_empty() {
        format!("{at}{what}")
    } else {
        format!("{path}: {at}{what}")
    }
}

fn bad(line: usize, what: impl Into<String>) -> SegmentError {
    SegmentError::Malformed {
        path: String::new(),
        line,
        what: what.into(),
    }
}

/// Parses `I/N` (`--segment`): share I of N, I counted from 0 as
/// Kubernetes' `JOB_COMPLETION_INDEX` is.
pub fn parse_spec(s: &str) -> Result<(u32, u32), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("--segment {s}: expected INDEX/COUNT, e.g. 0/3"))?;
    let n: u32 = n
        .trim()
        .parse()
        .map_err(|_| format!("--segment {s}: COUNT must be a number"))?;
    let i: u32 = i
        .trim()
        .parse()
        .map_err(|_| format!("--segment {s}: INDEX must be a number"))?;
    if !(1..=MAX_SEGMENTS).contains(&n) {
        return Err(format!("--segment {s}: COUNT must be 1..={MAX_SEGMENTS}"));
    }
    if i >= n {
        return Err(format!(
            "--segment {s}: INDEX counts from 0 (0..={}), as JOB_COMPLETION_INDEX does",
            n - 1
        ));
    }
    Ok((i, n))
}

impl Segment {
    /// The histogram tagged `tag`.
    pub fn histogram(&self, tag: &str) -> Option<&LatencyHistogram> {
        self.histograms
            .iter()
            .find(|(t, _)| t == tag)
            .map(|(_, h)| h)
    }

    /// Writes the segment as an HdrHistogram interval log.
    pub fn write(&self, w: &mut impl Write) -> std::io::Result<()> {
        let h = &self.header;
        let json = serde_json::to_string(h).map_err(std::io::Error::other)?;
        let mut buf = Vec::new();
        writeln!(
            buf,
            "#commbench segment {}/{} of one {} {} run: an HdrHistogram V2 interval log, values in ns; add the segments with `commbench merge`",
            h.index, h.count, h.lab, h.test
        )?;
        writeln!(buf, "{HEADER_PREFIX}{json}]")?;
        let base = UNIX_EPOCH + Duration::from_millis(h.start_at_ms);
        let secs = |x: f64| {
            Duration::from_secs_f64(if x.is_finite() {
                x.clamp(0.0, 1e9)
            } else {
                0.0
            })
        };
        let mut ser = V2DeflateSerializer::new();
        let mut lw = IntervalLogWriterBuilder::new()
            .with_start_time(base)
            .with_base_time(base)
            .with_max_value_divisor(1e6)
            .begin_log_with(&mut buf, &mut ser)?;
        for (tag, hist) in &self.histograms {
            let t =
                Tag::new(tag).ok_or_else(|| std::io::Error::other(format!("bad tag {tag:?}")))?;
            lw.write_histogram(
                hist.hdr(),
                secs(h.measured_from_s),
                secs(h.measured_s),
                Some(t),
            )
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        w.write_all(&buf)
    }

    /// Parses a segment file's bytes (untrusted: bounded, never a panic).
    pub fn parse(bytes: &[u8]) -> Result<Segment, SegmentError> {
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(bad(0, format!("larger than {MAX_FILE_BYTES} bytes")));
        }
        let mut header: Option<Header> = None;
        let mut histograms: Vec<(String, LatencyHistogram)> = Vec::new();
        for (n, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = n + 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.is_empty() {
                continue;
            }
            let text = std::str::from_utf8(raw).map_err(|_| bad(line, "not UTF-8"))?;
            if let Some(json) = text.strip_prefix(HEADER_PREFIX) {
                if header.is_some() {
                    return Err(bad(line, "a second commbench-segment header"));
                }
                let json = json
                    .strip_suffix(']')
                    .ok_or_else(|| bad(line, "the header does not end with ']'"))?;
                header = Some(parse_header(json).map_err(|w| bad(line, w))?);
            } else if text.starts_with('#') || text.starts_with("\"StartTimestamp\"") {
                continue;
            } else {
                if histograms.len() >= MAX_HISTOGRAMS {
                    return Err(bad(line, format!("more than {MAX_HISTOGRAMS} histograms")));
                }
                let (tag, h) = parse_interval(text).map_err(|w| bad(line, w))?;
                if histograms.iter().any(|(t, _)| *t == tag) {
                    return Err(bad(line, format!("histogram {tag} given twice")));
                }
                histograms.push((tag, h));
            }
        }
        let header = header.ok_or_else(|| {
            bad(
                0,
                "no #[commbench-segment: ...] header: not a segment file of `mux load --segment`",
            )
        })?;
        Ok(Segment { header, histograms })
    }
}

fn parse_header(json: &str) -> Result<Header, String> {
    let h: Header = serde_json::from_str(json).map_err(|e| format!("bad header: {e}"))?;
    if h.format != FORMAT || h.version != VERSION {
        return Err(format!(
            "header says {} version {}; this commbench reads {FORMAT} version {VERSION}",
            h.format, h.version
        ));
    }
    if !(1..=MAX_SEGMENTS).contains(&h.count) || h.index >= h.count {
        return Err(format!(
            "segment {}/{} is not a share of a run",
            h.index, h.count
        ));
    }
    let leaves = crate::record::count_leaves(
        h.run
            .values()
            .chain(h.record.params.values())
            .chain(h.record.metrics.values()),
        MAX_LEAVES,
    ) + h.counts.len();
    if leaves > MAX_LEAVES {
        return Err(format!("the header holds more than {MAX_LEAVES} values"));
    }
    Ok(h)
}

/// `Tag=NAME,start,length,max,BASE64` → the tag and its histogram.
fn parse_interval(text: &str) -> Result<(String, LatencyHistogram), String> {
    let rest = text
        .strip_prefix("Tag=")
        .ok_or("an interval line without a Tag= (every segment histogram is named)")?;
    let mut f = rest.split(',');
    let tag = f.next().unwrap_or_default();
    if tag.is_empty() || tag.len() > 64 || tag.contains(' ') {
        return Err(format!("bad tag {tag:?}"));
    }
    for what in ["start timestamp", "interval length", "interval max"] {
        let v = f.next().ok_or(format!("no {what}"))?;
        v.trim()
            .parse::<f64>()
            .map_err(|_| format!("bad {what} {v:?}"))?;
    }
    let b64 = f.next().ok_or("no histogram")?;
    if f.next().is_some() {
        return Err("more than five fields".into());
    }
    let h = decode_histogram(b64.trim()).map_err(|e| format!("histogram {tag}: {e}"))?;
    Ok((tag.to_owned(), h))
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A base64 V2 histogram (compressed or not), its header checked before
/// the histogram crate allocates for it.
pub fn decode_histogram(b64: &str) -> Result<LatencyHistogram, String> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("not base64: {e}"))?;
    let inflated;
    let v2: &[u8] = match be_u32(&raw, 0) {
        Some(V2_COMPRESSED_COOKIE) => {
            let len = be_u32(&raw, 4).ok_or("truncated")? as usize;
            let body = raw
                .get(8..8 + len)
                .ok_or("compressed length past the end")?;
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(body)
                .take(MAX_INFLATED as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("does not inflate: {e}"))?;
            if out.len() > MAX_INFLATED {
                return Err(format!("inflates to more than {MAX_INFLATED} bytes"));
            }
            inflated = out;
            &inflated
        }
        Some(V2_COOKIE) => &raw,
        _ => return Err("not an HdrHistogram V2 encoding (cookie)".into()),
    };
    if be_u32(v2, 0) != Some(V2_COOKIE) || v2.len() < V2_HEADER {
        return Err("not an HdrHistogram V2 encoding (inner header)".into());
    }
    let payload = be_u32(v2, 4).ok_or("truncated")? as usize;
    let digits = be_u32(v2, 12).ok_or("truncated")?;
    let low = be_u64(v2, 16).ok_or("truncated")?;
    let high = be_u64(v2, 24).ok_or("truncated")?;
    if payload > v2.len() - V2_HEADER {
        return Err("payload length past the end".into());
    }
    if digits != 3 || low != 1 {
        return Err(format!(
            "{digits} significant digits from {low}: commbench adds only histograms of 3 digits from 1 ns, as it records them"
        ));
    }
    if !(2..=MAX_HIGHEST).contains(&high) {
        return Err(format!("highest trackable value {high} out of bounds"));
    }
    let h: hdrhistogram::Histogram<u64> = Deserializer::new()
        .deserialize(&mut &v2[..V2_HEADER + payload])
        .map_err(|e| format!("does not decode: {e:?}"))?;
    LatencyHistogram::from_hdr(&h)
}

/// Reads and parses a segment file, at most [`MAX_FILE_BYTES`] of it: a
/// regular file only, opened without blocking (a FIFO among the files of
/// a shared gather folder is an error at once, not a hang).
pub fn read_file(path: &Path) -> Result<Segment, SegmentError> {
    let name = path.display().to_string();
    let bytes =
        crate::userfile::read_input(path, MAX_FILE_BYTES, "segment file").map_err(|e| match e {
            crate::userfile::InputError::TooLarge { .. } => {
                SegmentError::TooLarge { path: name.clone() }
            }
            other => SegmentError::Io {
                path: name.clone(),
                source: std::io::Error::other(other.to_string()),
            },
        })?;
    Segment::parse(&bytes).map_err(|e| match e {
        SegmentError::Malformed { line, what, .. } => SegmentError::Malformed {
            path: name,
            line,
            what,
        },
        other => other,
    })
}

/// Adds segments of one run into its records one at a time, each file
/// dropped once added (`commbench merge` holds one file and the sums,
/// however many shares): what a lab that writes segments gives
/// ([`crate::lab::Lab::segment_merger`]).
pub trait SegmentMerger {
    /// Adds one segment (already checked by [`Together::add`]).
    fn add(&mut self, segment: Segment) -> Result<(), SegmentError>;
    /// The run's records, once every segment was added.
    fn finish(self: Box<Self>) -> Result<Vec<Record>, SegmentError>;
}

/// The first segment's identity, which every other must share.
#[derive(Debug)]
struct First {
    name: String,
    index: u32,
    count: u32,
    lab: String,
    test: String,
    run: Map<String, Value>,
}

/// Checks, one segment at a time, that segments are every share of one
/// run, each once, started within `max_skew_ms` of each other
/// ([`Together::add`] each, then [`Together::finish`]); keeps the first
/// header's identity and one name per share, never the segments.
#[derive(Debug)]
pub struct Together {
    max_skew_ms: u64,
    first: Option<First>,
    by_index: Vec<Option<String>>,
    /// The earliest and latest start instant: (ms, name, index).
    lo: Option<(u64, String, u32)>,
    hi: Option<(u64, String, u32)>,
}

impl Together {
    /// A check of segments started within `max_skew_ms` of each other.
    pub fn new(max_skew_ms: u64) -> Self {
        Together {
            max_skew_ms,
            first: None,
            by_index: Vec::new(),
            lo: None,
            hi: None,
        }
    }

    /// Checks the segment of file `name` against those added before;
    /// the error names the files and what differs.
    pub fn add(&mut self, name: &str, h: &Header) -> Result<(), SegmentError> {
        let not = |m: String| Err(SegmentError::NotTogether(m));
        let who = |name: &str, index: u32, count: u32| format!("{name} (segment {index}/{count})");
        let Some(f) = &self.first else {
            self.first = Some(First {
                name: name.to_owned(),
                index: h.index,
                count: h.count,
                lab: h.lab.clone(),
                test: h.test.clone(),
                run: h.run.clone(),
            });
            self.by_index = vec![None; h.count as usize];
            return self.place(name, h);
        };
        let first = who(&f.name, f.index, f.count);
        if (h.lab.as_str(), h.test.as_str()) != (f.lab.as_str(), f.test.as_str()) {
            return not(format!(
                "not one run: {first} is a {} {} segment, {} a {} {} one",
                f.lab,
                f.test,
                who(name, h.index, h.count),
                h.lab,
                h.test
            ));
        }
        if h.count != f.count {
            return not(format!(
                "not one run: {first} splits it in {} and {} in {} (different N)",
                f.count,
                who(name, h.index, h.count),
                h.count
            ));
        }
        let keys: std::collections::BTreeSet<&String> = f.run.keys().chain(h.run.keys()).collect();
        for k in keys {
            let (a, b) = (f.run.get(k), h.run.get(k));
            if a != b {
                // A parameter only some runs carry (mux's `tls`) reads
                // "has tls = ... and ... has no tls".
                let show =
                    |v: Option<&Value>| v.map_or(format!("no {k}"), |v| format!("{k} = {v}"));
                return not(format!(
                    "not one run: {first} has {} and {} has {} (different command or parameters)",
                    show(a),
                    who(name, h.index, h.count),
                    show(b)
                ));
            }
        }
        self.place(name, h)
    }

    fn place(&mut self, name: &str, h: &Header) -> Result<(), SegmentError> {
        let (i, n) = (h.index as usize, h.count);
        // parse_header keeps index < count.
        let Some(slot) = self.by_index.get_mut(i) else {
            return Err(SegmentError::NotTogether(format!(
                "{name}: segment {i}/{n} is not a share of the run"
            )));
        };
        if let Some(other) = slot {
            return Err(SegmentError::NotTogether(format!(
                "segment {i}/{n} given twice: {other} and {name}"
            )));
        }
        *slot = Some(name.to_owned());
        let at = (h.start_at_ms, name.to_owned(), h.index);
        if self.lo.as_ref().is_none_or(|l| at.0 < l.0) {
            self.lo = Some(at.clone());
        }
        if self.hi.as_ref().is_none_or(|l| at.0 > l.0) {
            self.hi = Some(at);
        }
        Ok(())
    }

    /// Checks that no share is missing and that the start instants lie
    /// within the skew.
    pub fn finish(self) -> Result<(), SegmentError> {
        let not = |m: String| Err(SegmentError::NotTogether(m));
        let Some(f) = &self.first else {
            return not("no segment files given".into());
        };
        let n = f.count as usize;
        let missing: Vec<String> = (0..n)
            .filter(|&i| self.by_index[i].is_none())
            .map(|i| format!("{i}/{n}"))
            .collect();
        if !missing.is_empty() {
            let have: Vec<String> = self
                .by_index
                .iter()
                .enumerate()
                .filter_map(|(i, name)| Some(format!("{i}/{n} in {}", name.as_ref()?)))
                .collect();
            return not(format!(
                "segment{} {} missing: a merge needs all {n} shares of the run (have {})",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", "),
                have.join(", ")
            ));
        }
        if let (Some((l, ln, li)), Some((h, hn, hi))) = (&self.lo, &self.hi) {
            let skew = h - l;
            if skew > self.max_skew_ms {
                return not(format!(
                    "start times too far apart: {ln} (segment {li}/{n}) started at {l} ms and {hn} (segment {hi}/{n}) at {h} ms since the epoch, {skew} ms apart (more than --max-skew-ms {}): give every segment the same --start-at",
                    self.max_skew_ms
                ));
            }
        }
        Ok(())
    }
}

/// Checks that `segs` (file name, segment) are every share of one run,
/// each once, started within `max_skew_ms` of each other; the error
/// names the files and what differs ([`Together`] over a slice).
pub fn check_together(segs: &[(String, Segment)], max_skew_ms: u64) -> Result<(), SegmentError> {
    let mut t = Together::new(max_skew_ms);
    for (name, s) in segs {
        t.add(name, &s.header)?;
    }
    t.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(index: u32, count: u32, values: &[u64]) -> Segment {
        let mut h = LatencyHistogram::new();
        for &v in values {
            h.record_ns(v);
        }
        let mut run = Map::new();
        run.insert("rate".into(), Value::from(3000.0));
        Segment {
            header: Header {
                format: FORMAT.into(),
                version: VERSION,
                lab: "mux".into(),
                test: "open".into(),
                index,
                count,
                start_at_ms: 1_700_000_000_000,
                run,
                counts: BTreeMap::from([("completed".to_string(), values.len() as u64)]),
                first_send_unix_ns: Some(1),
                last_send_unix_ns: Some(2),
                measured_from_s: 0.5,
                measured_s: 2.0,
                record: Record::new("mux", "open"),
            },
            histograms: vec![("corrected_ns".into(), h)],
        }
    }

    fn roundtrip(s: &Segment) -> Segment {
        let mut b = Vec::new();
        s.write(&mut b).unwrap();
        Segment::parse(&b).unwrap()
    }

    /// The point of a segment file: histograms written by N segments and
    /// added give exactly the percentiles of one histogram that recorded
    /// every value.
    #[test]
    fn merged_percentiles_equal_those_of_one_histogram_of_all_values() {
        let mut rng = crate::estimate::Rng::new(36);
        let mut all = LatencyHistogram::new();
        let mut parts = [Vec::new(), Vec::new(), Vec::new()];
        for i in 0..30_000u64 {
            // Microseconds to a few hundred ms, heavy-tailed.
            let v = (1_000.0 * (-(1.0 - rng.next_f64()).ln() * 2.0).exp()).min(1e12) as u64 + i % 7;
            all.record_ns(v);
            parts[(i % 3) as usize].push(v);
        }
        let mut merged = LatencyHistogram::new();
        for (i, p) in parts.iter().enumerate() {
            let back = roundtrip(&seg(i as u32, 3, p));
            merged
                .try_merge(back.histogram("corrected_ns").unwrap())
                .unwrap();
        }
        assert_eq!(merged.len(), all.len());
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            assert_eq!(merged.quantile(q), all.quantile(q), "q = {q}");
        }
        assert_eq!(merged.summary().max, all.summary().max);
        assert_eq!(merged.recorded(), all.recorded());
    }

    #[test]
    fn a_segment_file_reads_back_as_written_and_is_an_interval_log() {
        let s = seg(1, 3, &[1_000, 2_000, 5_000_000]);
        let mut b = Vec::new();
        s.write(&mut b).unwrap();
        let text = String::from_utf8(b.clone()).unwrap();
        assert!(text.contains("#[StartTime: 1700000000.000"), "{text}");
        assert!(text.contains("\nTag=corrected_ns,0.500,2.000,"), "{text}");
        // The histogram crate's own reader sees one tagged interval.
        let n = hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&b)
            .filter(|e| {
                matches!(
                    e,
                    Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(_))
                )
            })
            .count();
        assert_eq!(n, 1);
        let back = Segment::parse(&b).unwrap();
        assert_eq!(back.header, s.header);
        assert_eq!(
            back.histogram("corrected_ns").unwrap().recorded(),
            s.histograms[0].1.recorded()
        );
    }

    fn names(v: Vec<Segment>) -> Vec<(String, Segment)> {
        v.into_iter()
            .map(|s| (format!("s{}.hlog", s.header.index), s))
            .collect()
    }

    #[test]
    fn segments_that_are_not_one_run_are_refused_naming_which() {
        let ok = names(vec![seg(0, 3, &[1]), seg(1, 3, &[1]), seg(2, 3, &[1])]);
        check_together(&ok, 100).unwrap();
        let e = check_together(&names(vec![seg(0, 3, &[1]), seg(2, 3, &[1])]), 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("segment 1/3 missing"), "{e}");
        let mut dup = names(vec![seg(0, 3, &[1]), seg(1, 3, &[1]), seg(2, 3, &[1])]);
        dup[2] = ("again.hlog".into(), seg(1, 3, &[1]));
        let e = check_together(&dup, 100).unwrap_err().to_string();
        assert!(
            e.contains("segment 1/3 given twice: s1.hlog and again.hlog"),
            "{e}"
        );
        let e = check_together(&names(vec![seg(0, 3, &[1]), seg(1, 4, &[1])]), 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("different N"), "{e}");
        let mut other = seg(1, 2, &[1]);
        other.header.run.insert("rate".into(), Value::from(9.0));
        let e = check_together(&names(vec![seg(0, 2, &[1]), other]), 100)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("rate = 3000.0") && e.contains("rate = 9.0"),
            "{e}"
        );
        let mut https = seg(1, 2, &[1]);
        https.header.run.insert("tls".into(), Value::from("any"));
        let e = check_together(&names(vec![seg(0, 2, &[1]), https]), 100)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("s0.hlog (segment 0/2) has no tls")
                && e.contains("s1.hlog (segment 1/2) has tls = \"any\""),
            "{e}"
        );
        let mut late = seg(1, 2, &[1]);
        late.header.start_at_ms += 101;
        let e = check_together(&names(vec![seg(0, 2, &[1]), late]), 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("start times too far apart"), "{e}");
    }

    #[test]
    fn bad_histograms_are_errors_not_allocations() {
        // A V2 header claiming a 4 GiB payload and an absurd range.
        let mut v2 = Vec::new();
        v2.extend_from_slice(&V2_COOKIE.to_be_bytes());
        v2.extend_from_slice(&u32::MAX.to_be_bytes());
        v2.extend_from_slice(&0u32.to_be_bytes());
        v2.extend_from_slice(&3u32.to_be_bytes());
        v2.extend_from_slice(&1u64.to_be_bytes());
        v2.extend_from_slice(&u64::MAX.to_be_bytes());
        v2.extend_from_slice(&1f64.to_be_bytes());
        let b64 = base64::engine::general_purpose::STANDARD.encode(&v2);
        assert!(decode_histogram(&b64).unwrap_err().contains("past the end"));
        assert!(decode_histogram("%%%").is_err());
        assert!(Segment::parse(b"Tag=x,0,0,0,AAAA\n").is_err());
        assert!(Segment::parse(b"# nothing\n").is_err());
    }

    #[test]
    fn segment_specs_count_from_zero() {
        assert_eq!(parse_spec("0/3"), Ok((0, 3)));
        assert_eq!(parse_spec("2/3"), Ok((2, 3)));
        assert!(parse_spec("3/3").unwrap_err().contains("counts from 0"));
        assert!(parse_spec("1/0").is_err());
        assert!(parse_spec("1").is_err());
    }
}

#[cfg(test)]
mod float_tests {
    /// The fuzz target `segment_log` found a header whose float
    /// 1010.9653794940081 came back 1010.965379494008 after a write and a
    /// read: serde_json's fast float parser is off by an ulp on some
    /// inputs. Records are re-read (merge, compare, history), so parsing
    /// is exact (`float_roundtrip`).
    #[test]
    fn a_float_read_from_a_segment_writes_and_reads_back_the_same() {
        let v: serde_json::Value = serde_json::from_str("1010.9653794940081").unwrap();
        let back: serde_json::Value = serde_json::from_str(&v.to_string()).unwrap();
        assert_eq!(v, back);
        assert_eq!(v.as_f64().unwrap(), 1010.9653794940081_f64);
    }
}
