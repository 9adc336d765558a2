//! `--format parquet` (cargo feature `parquet`): the extracted fields as one
//! Parquet file, written with the `parquet` crate's low-level column writers
//! (no arrow). Pages are dictionary/RLE encoded, then Snappy-compressed by
//! default ([`ParquetCompression`]).
//!
//! The columns come straight from the decoded [`Fields`]: the extraction
//! workers encode each chunk's packets into a [`ColumnBatch`] of typed values
//! ([`ParquetEncoder`], in parallel), and the calling thread appends the
//! batches, in input order, to the row group being built ([`ParquetSink`]).
//! Numbers never pass through text; the text columns are written by the CSV
//! formatter's own per-field code ([`Formatter::field_text`]), so they equal
//! the CSV cells by construction. Column types:
//! - `ts`: INT64 nanoseconds since the epoch, annotated `TIMESTAMP(NANOS,
//!   true)` (UTC), null for a packet without a timestamp;
//! - `number`, `caplen`, `len`, `tcp_seq`, `tcp_ack` (u32 range): INT64;
//! - the other integers (VLAN ids, ports, TTL, …, all u16 range): INT32;
//! - `frag`: BOOLEAN;
//! - `eth_src`, `eth_dst`, `ethertype`, `ip_src`, `ip_dst`, `tcp_flags`:
//!   UTF8 strings, exactly the CSV text (`0x0800`, RFC 5952 IPv6, …).
//!
//! `number`, `caplen` and `len` are REQUIRED; every other column is OPTIONAL
//! and null exactly where the CSV cell is empty (e.g. ports of ICMP).
//! Invariants: at most `row_group_rows` rows (default [`ROW_GROUP_ROWS`])
//! are buffered, then written as one row group, so memory is bounded for any
//! input size; the footer is written only by [`ParquetSink::finish`].

use std::io::{self, Write};
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::Compression;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use crate::decode::{has, Fields};
use crate::extract::{extract_with, Encoder, ExtractConfig, ExtractReport, Progress};
use crate::format::{Field, Formatter, OutBuf};
use crate::PcapError;

/// Rows buffered per column before a row group is written.
pub const ROW_GROUP_ROWS: usize = 64 * 1024;

/// Page compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ParquetCompression {
    /// Stored as encoded (dictionary/RLE) only.
    None,
    /// Snappy: cheap to write and read, what Spark, DuckDB and Polars default to.
    #[default]
    Snappy,
}

/// How the Parquet file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParquetOptions {
    pub compression: ParquetCompression,
    /// Rows per row group (at least 1).
    pub row_group_rows: usize,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        Self {
            compression: ParquetCompression::default(),
            row_group_rows: ROW_GROUP_ROWS,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ts,
    I64,
    I32,
    Bool,
    Text,
}

fn kind(f: Field) -> Kind {
    match f {
        Field::Ts => Kind::Ts,
        Field::Number | Field::Caplen | Field::Len | Field::TcpSeq | Field::TcpAck => Kind::I64,
        Field::Frag => Kind::Bool,
        Field::EthSrc
        | Field::EthDst
        | Field::Ethertype
        | Field::IpSrc
        | Field::IpDst
        | Field::TcpFlags => Kind::Text,
        Field::VlanOuter
        | Field::VlanInner
        | Field::IpVersion
        | Field::Proto
        | Field::Ttl
        | Field::IpLen
        | Field::SrcPort
        | Field::DstPort
        | Field::TcpWin
        | Field::IcmpType
        | Field::IcmpCode
        | Field::ArpOp => Kind::I32,
    }
}

/// Always present in every record.
fn required(f: Field) -> bool {
    matches!(f, Field::Number | Field::Caplen | Field::Len)
}

/// The Parquet schema (message type text) for a field selection.
pub fn schema_text(fields: &[Field]) -> String {
    let mut s = String::from("message packet {\n");
    for &f in fields {
        let rep = if required(f) { "REQUIRED" } else { "OPTIONAL" };
        let ty = match kind(f) {
            Kind::Ts => "INT64",
            Kind::I64 => "INT64",
            Kind::I32 => "INT32",
            Kind::Bool => "BOOLEAN",
            Kind::Text => "BYTE_ARRAY",
        };
        let ann = match kind(f) {
            Kind::Ts => " (TIMESTAMP(NANOS,true))",
            Kind::Text => " (UTF8)",
            _ => "",
        };
        s.push_str(&format!("  {rep} {ty} {}{ann};\n", f.name()));
    }
    s.push('}');
    s
}

/// A numeric field's value (booleans as 0/1), `None` when absent. The
/// presence rules are the CSV formatter's (`Formatter::value`); the tests
/// compare every Parquet cell with the CSV cell.
#[inline]
fn int_value(field: Field, number: u64, f: &Fields) -> Option<u64> {
    let when = |bit: u32, v: u64| f.has(bit).then_some(v);
    match field {
        Field::Number => Some(number),
        Field::Caplen => Some(f.caplen as u64),
        Field::Len => Some(f.len as u64),
        Field::VlanOuter => when(has::VLAN_OUTER, f.vlan_outer as u64),
        Field::VlanInner => when(has::VLAN_INNER, f.vlan_inner as u64),
        Field::IpVersion => when(has::IP, f.ip_version as u64),
        Field::Ttl => when(has::IP, f.ttl as u64),
        Field::IpLen => when(has::IP, f.ip_len as u64),
        Field::Proto => when(has::PROTO, f.proto as u64),
        Field::Frag => when(has::IP, f.has(has::FRAG) as u64),
        Field::SrcPort => when(has::PORTS, f.src_port as u64),
        Field::DstPort => when(has::PORTS, f.dst_port as u64),
        Field::TcpSeq => when(has::TCP_SEQ, f.tcp_seq as u64),
        Field::TcpAck => when(has::TCP_ACK, f.tcp_ack as u64),
        Field::TcpWin => when(has::TCP_WIN, f.tcp_win as u64),
        Field::IcmpType => when(has::ICMP, f.icmp_type as u64),
        Field::IcmpCode => when(has::ICMP, f.icmp_code as u64),
        Field::ArpOp => when(has::ARP, f.arp_op as u64),
        Field::Ts
        | Field::EthSrc
        | Field::EthDst
        | Field::Ethertype
        | Field::IpSrc
        | Field::IpDst
        | Field::TcpFlags => None,
    }
}

/// A timestamp beyond INT64 nanoseconds (its seconds and nanoseconds).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parquet: cannot convert ts value '{0}.{1:09}' (beyond INT64 nanoseconds)")]
struct TsOutOfRange(u64, u64);

/// The timestamp in nanoseconds; `Err` when it does not fit an INT64.
fn ts_nanos(f: &Fields) -> Result<i64, TsOutOfRange> {
    let nsec = f.ts_nsec.min(999_999_999) as u64;
    f.ts_sec
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(nsec))
        .and_then(|ns| i64::try_from(ns).ok())
        .ok_or(TsOutOfRange(f.ts_sec, nsec))
}

/// One column's values for the rows of a batch.
enum BatchValues {
    I64(Vec<i64>),
    I32(Vec<i32>),
    Bool(Vec<bool>),
    /// The present values' text back to back; `ends[k]` ends value k.
    Text {
        bytes: OutBuf,
        ends: Vec<u32>,
    },
}

struct BatchColumn {
    field: Field,
    kind: Kind,
    values: BatchValues,
    /// Definition level per row: 1 present, 0 null.
    def: Vec<i16>,
}

impl BatchColumn {
    fn new(field: Field) -> Self {
        let kind = kind(field);
        let values = match kind {
            Kind::Ts | Kind::I64 => BatchValues::I64(Vec::new()),
            Kind::I32 => BatchValues::I32(Vec::new()),
            Kind::Bool => BatchValues::Bool(Vec::new()),
            Kind::Text => BatchValues::Text {
                bytes: OutBuf::new(),
                ends: Vec::new(),
            },
        };
        Self {
            field,
            kind,
            values,
            def: Vec::new(),
        }
    }

    #[inline]
    fn push(&mut self, number: u64, f: &Fields, bad: &mut Option<String>) {
        let field = self.field;
        let present = match &mut self.values {
            BatchValues::I64(v) if self.kind == Kind::Ts => {
                if f.has(has::NO_TS) {
                    false
                } else {
                    match ts_nanos(f) {
                        Ok(ns) => {
                            v.push(ns);
                            true
                        }
                        Err(e) => {
                            bad.get_or_insert(e.to_string());
                            false
                        }
                    }
                }
            }
            BatchValues::I64(v) => match int_value(field, number, f) {
                Some(x) => match i64::try_from(x) {
                    Ok(x) => {
                        v.push(x);
                        true
                    }
                    Err(_) => {
                        bad.get_or_insert(format!(
                            "parquet: cannot convert {} value '{x}'",
                            field.name()
                        ));
                        false
                    }
                },
                None => false,
            },
            // Every INT32 column holds a u8 or u16.
            BatchValues::I32(v) => int_value(field, number, f)
                .map(|x| v.push(x as i32))
                .is_some(),
            BatchValues::Bool(v) => int_value(field, number, f)
                .map(|x| v.push(x != 0))
                .is_some(),
            BatchValues::Text { bytes, ends } => {
                let present = Formatter::field_text(field, number, f, bytes);
                if present {
                    ends.push(bytes.len() as u32);
                }
                present
            }
        };
        self.def.push(present as i16);
    }

    fn clear(&mut self) {
        self.def.clear();
        match &mut self.values {
            BatchValues::I64(x) => x.clear(),
            BatchValues::I32(x) => x.clear(),
            BatchValues::Bool(x) => x.clear(),
            BatchValues::Text { bytes, ends } => {
                bytes.clear();
                ends.clear();
            }
        }
    }
}

/// The column values of one chunk's packets, built on a worker thread.
pub struct ColumnBatch {
    rows: usize,
    cols: Vec<BatchColumn>,
    /// The first value that does not fit its column type.
    bad: Option<String>,
}

impl ColumnBatch {
    pub fn rows(&self) -> usize {
        self.rows
    }
}

/// Encodes decoded packets into [`ColumnBatch`]es for a field selection.
#[derive(Debug, Clone)]
pub struct ParquetEncoder {
    fields: Vec<Field>,
}

impl ParquetEncoder {
    pub fn new(fields: Vec<Field>) -> Self {
        Self { fields }
    }
}

impl Encoder for ParquetEncoder {
    type Batch = ColumnBatch;

    fn new_batch(&self) -> ColumnBatch {
        ColumnBatch {
            rows: 0,
            cols: self.fields.iter().map(|&f| BatchColumn::new(f)).collect(),
            bad: None,
        }
    }

    fn clear(&self, batch: &mut ColumnBatch) {
        batch.rows = 0;
        batch.bad = None;
        batch.cols.iter_mut().for_each(BatchColumn::clear);
    }

    #[inline]
    fn encode(&self, number: u64, f: &Fields, batch: &mut ColumnBatch) {
        for col in &mut batch.cols {
            col.push(number, f, &mut batch.bad);
        }
        batch.rows += 1;
    }
}

/// One column of the row group being built.
enum Values {
    I64(Vec<i64>),
    I32(Vec<i32>),
    Bool(Vec<bool>),
    Text(Vec<ByteArray>),
}

struct Column {
    field: Field,
    values: Values,
    /// Definition levels (1 = present, 0 = null); unused when required.
    def: Vec<i16>,
}

impl Column {
    fn new(field: Field) -> Self {
        let values = match kind(field) {
            Kind::Ts | Kind::I64 => Values::I64(Vec::new()),
            Kind::I32 => Values::I32(Vec::new()),
            Kind::Bool => Values::Bool(Vec::new()),
            Kind::Text => Values::Text(Vec::new()),
        };
        Self {
            field,
            values,
            def: Vec::new(),
        }
    }

    fn clear(&mut self) {
        self.def.clear();
        match &mut self.values {
            Values::I64(x) => x.clear(),
            Values::I32(x) => x.clear(),
            Values::Bool(x) => x.clear(),
            Values::Text(x) => x.clear(),
        }
    }
}

/// Counts the bytes that reach the real output.
struct Counted<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn pq_err(e: parquet::errors::ParquetError) -> io::Error {
    io::Error::other(format!("parquet: {e}"))
}

/// Takes [`ColumnBatch`]es in order and writes them as Parquet row groups.
pub struct ParquetSink<W: Write + Send> {
    writer: SerializedFileWriter<Counted<W>>,
    cols: Vec<Column>,
    /// Rows buffered in `cols`.
    rows: usize,
    row_group_rows: usize,
    total_rows: u64,
    /// Per text column of the batch being appended: its bytes, shared by
    /// the values sliced from it (one copy per batch, no allocation per value).
    shared: Vec<Bytes>,
}

/// What [`ParquetSink::finish`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParquetSummary {
    pub rows: u64,
    pub row_groups: usize,
    pub bytes: u64,
}

impl<W: Write + Send> ParquetSink<W> {
    pub fn new(out: W, fields: &[Field], opts: &ParquetOptions) -> Result<Self, PcapError> {
        if fields.is_empty() {
            return Err(PcapError::Config("no fields selected".into()));
        }
        let schema = parse_message_type(&schema_text(fields))
            .map_err(|e| PcapError::Config(format!("parquet schema: {e}")))?;
        let compression = match opts.compression {
            ParquetCompression::None => Compression::UNCOMPRESSED,
            ParquetCompression::Snappy => Compression::SNAPPY,
        };
        let props = WriterProperties::builder()
            .set_created_by("commbench pcap extract".into())
            .set_compression(compression)
            .build();
        let writer = SerializedFileWriter::new(
            Counted {
                inner: out,
                bytes: 0,
            },
            Arc::new(schema),
            Arc::new(props),
        )
        .map_err(|e| PcapError::Output(pq_err(e)))?;
        Ok(Self {
            writer,
            cols: fields.iter().map(|&f| Column::new(f)).collect(),
            rows: 0,
            row_group_rows: opts.row_group_rows.max(1),
            total_rows: 0,
            shared: Vec::new(),
        })
    }

    /// Appends a batch's rows (in order), writing a row group whenever
    /// `row_group_rows` rows are buffered.
    pub fn append(&mut self, batch: &ColumnBatch) -> io::Result<()> {
        if let Some(e) = &batch.bad {
            return Err(io::Error::new(io::ErrorKind::InvalidData, e.clone()));
        }
        if batch.cols.len() != self.cols.len()
            || batch
                .cols
                .iter()
                .zip(&self.cols)
                .any(|(b, c)| b.field != c.field)
        {
            return Err(io::Error::other("parquet: batch of other fields"));
        }
        self.shared.clear();
        for bc in &batch.cols {
            if let BatchValues::Text { bytes, .. } = &bc.values {
                self.shared.push(Bytes::copy_from_slice(bytes.as_bytes()));
            }
        }
        // Per column: the next value of the batch to take.
        let mut next = vec![0usize; batch.cols.len()];
        let mut row = 0;
        while row < batch.rows {
            let take = (batch.rows - row).min(self.row_group_rows - self.rows);
            let mut text = 0;
            for ((col, bc), v0) in self.cols.iter_mut().zip(&batch.cols).zip(&mut next) {
                let defs = &bc.def[row..row + take];
                let n = defs.iter().filter(|&&d| d != 0).count();
                col.def.extend_from_slice(defs);
                let vals = *v0..*v0 + n;
                match (&mut col.values, &bc.values) {
                    (Values::I64(d), BatchValues::I64(s)) => d.extend_from_slice(&s[vals]),
                    (Values::I32(d), BatchValues::I32(s)) => d.extend_from_slice(&s[vals]),
                    (Values::Bool(d), BatchValues::Bool(s)) => d.extend_from_slice(&s[vals]),
                    (Values::Text(d), BatchValues::Text { ends, .. }) => {
                        let all = &self.shared[text];
                        text += 1;
                        d.extend(vals.map(|k| {
                            let start = if k == 0 { 0 } else { ends[k - 1] as usize };
                            ByteArray::from(all.slice(start..ends[k] as usize))
                        }));
                    }
                    _ => return Err(io::Error::other("parquet: column type mismatch")),
                }
                *v0 += n;
            }
            self.rows += take;
            row += take;
            if self.rows >= self.row_group_rows {
                self.flush_row_group()?;
            }
        }
        Ok(())
    }

    fn flush_row_group(&mut self) -> io::Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut rg = self.writer.next_row_group().map_err(pq_err)?;
        for col in &mut self.cols {
            let mut cw = rg
                .next_column()
                .map_err(pq_err)?
                .ok_or_else(|| io::Error::other("parquet: schema has fewer columns"))?;
            let def = (!required(col.field)).then_some(&col.def[..]);
            match &col.values {
                Values::I64(v) => cw.typed::<Int64Type>().write_batch(v, def, None),
                Values::I32(v) => cw.typed::<Int32Type>().write_batch(v, def, None),
                Values::Bool(v) => cw.typed::<BoolType>().write_batch(v, def, None),
                Values::Text(v) => cw.typed::<ByteArrayType>().write_batch(v, def, None),
            }
            .map_err(pq_err)?;
            cw.close().map_err(pq_err)?;
            col.clear();
        }
        rg.close().map_err(pq_err)?;
        self.total_rows += self.rows as u64;
        self.rows = 0;
        Ok(())
    }

    /// Writes the buffered rows and the footer.
    pub fn finish(mut self) -> Result<ParquetSummary, PcapError> {
        self.flush_row_group().map_err(PcapError::Output)?;
        let row_groups = self.writer.flushed_row_groups().len();
        let mut out = self
            .writer
            .into_inner()
            .map_err(|e| PcapError::Output(pq_err(e)))?;
        out.flush().map_err(PcapError::Output)?;
        Ok(ParquetSummary {
            rows: self.total_rows,
            row_groups,
            bytes: out.bytes,
        })
    }
}

/// Extracts `cfg.inputs` into `sink` (`cfg.format` and `cfg.header` are
/// ignored); call [`ParquetSink::finish`] afterwards.
pub fn extract_to_sink<W: Write + Send>(
    cfg: &ExtractConfig,
    sink: &mut ParquetSink<W>,
    progress: &mut dyn FnMut(Progress),
) -> Result<ExtractReport, PcapError> {
    let enc = ParquetEncoder::new(cfg.fields.clone());
    extract_with(
        cfg,
        &enc,
        &mut |b: &ColumnBatch| sink.append(b).map(|_| 0),
        progress,
    )
}

/// Extracts `cfg.inputs` to one Parquet file. `output_bytes` in the report
/// is the size of the Parquet file.
pub fn extract_parquet<W: Write + Send>(
    cfg: &ExtractConfig,
    out: W,
    opts: &ParquetOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<(ExtractReport, ParquetSummary), PcapError> {
    let mut sink = ParquetSink::new(out, &cfg.fields, opts)?;
    let mut report = extract_to_sink(cfg, &mut sink, progress)?;
    let summary = sink.finish()?;
    report.output_bytes = summary.bytes;
    Ok((report, summary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::extract;
    use crate::format::OutputFormat;
    use crate::gen::{generate, GenConfig};
    use crate::reader::Compression as Input;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field as PqField;

    fn capture(dir: &std::path::Path) -> String {
        let path = dir.join("gen.pcap");
        let mut f = std::fs::File::create(&path).unwrap();
        let cfg = GenConfig {
            size: 1 << 20,
            seed: 7,
            compression: Input::None,
            nsec: true,
            ..GenConfig::default()
        };
        generate(&cfg, &mut f).unwrap();
        path.display().to_string()
    }

    fn csv_of(cfg: &ExtractConfig) -> Vec<Vec<String>> {
        let mut c = cfg.clone();
        c.header = false;
        c.format = OutputFormat::Csv;
        let mut out = Vec::new();
        extract(&c, &mut out, &mut |_| {}).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect()
    }

    /// The CSV text of one Parquet cell (empty for null).
    fn text(f: &PqField, field: Field) -> String {
        match f {
            PqField::Null => String::new(),
            PqField::Bool(b) => if *b { "1" } else { "0" }.into(),
            PqField::Int(i) => i.to_string(),
            // TIMESTAMP(NANOS) has no converted type: the row API gives i64.
            PqField::Long(ns) if field == Field::Ts => {
                format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
            }
            PqField::Long(i) => i.to_string(),
            PqField::Str(s) => s.clone(),
            other => panic!("unexpected parquet value {other:?} for {}", field.name()),
        }
    }

    fn check(
        fields: Vec<Field>,
        threads: usize,
        row_group_rows: usize,
        compression: ParquetCompression,
    ) {
        let dir = commbench_core::artifact::TempDir::new("pcap").unwrap();
        let input = capture(dir.path());
        let cfg = ExtractConfig {
            inputs: vec![input],
            fields: fields.clone(),
            threads,
            ..ExtractConfig::default()
        };
        let csv = csv_of(&cfg);
        assert!(csv.len() > row_group_rows, "capture too small");
        let out = dir.path().join("out.parquet");
        let opts = ParquetOptions {
            compression,
            row_group_rows,
        };
        let mut sink =
            ParquetSink::new(std::fs::File::create(&out).unwrap(), &fields, &opts).unwrap();
        let rep = extract_to_sink(&cfg, &mut sink, &mut |_| {}).unwrap();
        let sum = sink.finish().unwrap();
        assert_eq!(sum.rows, csv.len() as u64);
        assert_eq!(sum.rows, rep.packets);
        assert_eq!(sum.row_groups, csv.len().div_ceil(row_group_rows));
        assert_eq!(sum.bytes, std::fs::metadata(&out).unwrap().len());

        let reader = SerializedFileReader::new(std::fs::File::open(&out).unwrap()).unwrap();
        let md = reader.metadata();
        assert_eq!(md.file_metadata().num_rows(), csv.len() as i64);
        assert_eq!(md.num_row_groups(), sum.row_groups);
        let codec = match compression {
            ParquetCompression::None => parquet::basic::Compression::UNCOMPRESSED,
            ParquetCompression::Snappy => parquet::basic::Compression::SNAPPY,
        };
        assert_eq!(md.row_group(0).column(0).compression(), codec);
        let mut nulls = 0usize;
        for (i, row) in reader.get_row_iter(None).unwrap().enumerate() {
            let row = row.unwrap();
            let cells: Vec<String> = row
                .get_column_iter()
                .zip(&fields)
                .map(|((name, v), &f)| {
                    assert_eq!(name, f.name());
                    text(v, f)
                })
                .collect();
            nulls += cells.iter().filter(|c| c.is_empty()).count();
            assert_eq!(cells, csv[i], "row {i}");
        }
        assert!(nulls > 0, "the capture should have absent fields");
    }

    #[test]
    fn parquet_equals_csv_default_fields() {
        check(Field::defaults(), 1, 500, ParquetCompression::Snappy);
    }

    #[test]
    fn parquet_equals_csv_all_fields_parallel() {
        check(Field::ALL.to_vec(), 2, 499, ParquetCompression::None);
    }

    #[test]
    fn parquet_equals_csv_large_row_groups() {
        // Row groups larger than a chunk's batch (~500 rows): batches are
        // joined, and split where a row group ends.
        check(Field::ALL.to_vec(), 2, 1000, ParquetCompression::Snappy);
    }

    #[test]
    fn timestamp_beyond_int64_nanos_is_an_error() {
        // A pcapng if_tsoffset can put a time past 2262: CSV prints it, an
        // INT64 TIMESTAMP(NANOS) cannot hold it, so the export says so.
        let dir = commbench_core::artifact::TempDir::new("pcap").unwrap();
        let path = dir.path().join("far.pcapng");
        let mut b = crate::writer::PcapngBuilder::new();
        b.shb(false)
            .idb(1, 0, None, Some(1 << 40))
            .epb(0, 0, &[0u8; 60], 60);
        std::fs::write(&path, &b.bytes).unwrap();
        let cfg = ExtractConfig {
            inputs: vec![path.display().to_string()],
            ..ExtractConfig::default()
        };
        let csv = csv_of(&cfg);
        assert_eq!(csv[0][0], format!("{}.000000000", 1u64 << 40));
        for threads in [1, 2] {
            let cfg = ExtractConfig {
                threads,
                ..cfg.clone()
            };
            match extract_parquet(&cfg, Vec::new(), &ParquetOptions::default(), &mut |_| {}) {
                Err(PcapError::Output(e)) => {
                    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
                    assert!(e.to_string().contains("ts"), "{e}");
                }
                other => panic!("expected an output error, got {:?}", other.map(|r| r.1)),
            }
        }
    }

    #[test]
    fn parquet_selected_fields_and_api() {
        let dir = commbench_core::artifact::TempDir::new("pcap").unwrap();
        let input = capture(dir.path());
        let fields = Field::parse_list("src_port,ip_src,ts").unwrap();
        let cfg = ExtractConfig {
            inputs: vec![input],
            fields: fields.clone(),
            ..ExtractConfig::default()
        };
        let csv = csv_of(&cfg);
        let mut buf = Vec::new();
        let (rep, sum) =
            extract_parquet(&cfg, &mut buf, &ParquetOptions::default(), &mut |_| {}).unwrap();
        assert_eq!(sum.rows, csv.len() as u64);
        assert_eq!(rep.output_bytes, buf.len() as u64);
        assert_eq!(&buf[..4], b"PAR1");
        let out = dir.path().join("sel.parquet");
        std::fs::write(&out, &buf).unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(&out).unwrap()).unwrap();
        let schema = reader.metadata().file_metadata().schema_descr();
        let names: Vec<&str> = schema.columns().iter().map(|c| c.name()).collect();
        assert_eq!(names, ["src_port", "ip_src", "ts"]);
        let ts = schema.column(2);
        assert_eq!(ts.physical_type(), parquet::basic::Type::INT64);
        assert_eq!(
            ts.logical_type_ref(),
            Some(&parquet::basic::LogicalType::timestamp(
                true,
                parquet::basic::TimeUnit::NANOS
            ))
        );
        let first = reader.get_row_iter(None).unwrap().next().unwrap().unwrap();
        let got: Vec<String> = first
            .get_column_iter()
            .zip(&fields)
            .map(|((_, v), &f)| text(v, f))
            .collect();
        assert_eq!(got, csv[0]);
    }

    #[test]
    fn schema_nullability() {
        let s = schema_text(&[Field::Number, Field::Ts, Field::SrcPort, Field::IpSrc]);
        assert!(s.contains("REQUIRED INT64 number;"));
        assert!(s.contains("OPTIONAL INT64 ts (TIMESTAMP(NANOS,true));"));
        assert!(s.contains("OPTIONAL INT32 src_port;"));
        assert!(s.contains("OPTIONAL BYTE_ARRAY ip_src (UTF8);"));
        parse_message_type(&s).unwrap();
    }
}
