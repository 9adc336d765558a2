//! `--format parquet` (cargo feature `parquet`): the extracted fields as one
//! Parquet file, written with the `parquet` crate's low-level column writers
//! (no arrow, no compression codecs: pages are dictionary/RLE encoded and
//! stored uncompressed).
//!
//! The rows come from the CSV formatter: [`ParquetSink`] is an
//! [`std::io::Write`] that takes the header-less CSV lines the extraction
//! pipeline produces (in input order, from any number of parse threads),
//! splits them into columns and converts each value. So there is one
//! formatting path, and every Parquet value equals the CSV text by
//! construction. Column types:
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

use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use crate::extract::{extract, ExtractConfig, ExtractReport, Progress};
use crate::format::{Field, OutputFormat};
use crate::PcapError;

/// Rows buffered per column before a row group is written.
pub const ROW_GROUP_ROWS: usize = 64 * 1024;

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

enum Values {
    I64(Vec<i64>),
    I32(Vec<i32>),
    Bool(Vec<bool>),
    Text(Vec<ByteArray>),
}

struct Column {
    field: Field,
    kind: Kind,
    values: Values,
    /// Definition levels (1 = present, 0 = null); unused when required.
    def: Vec<i16>,
}

fn bad(field: Field, v: &[u8]) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "parquet: cannot convert {} value '{}'",
            field.name(),
            String::from_utf8_lossy(v)
        ),
    )
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    let mut n = 0u64;
    for &c in v {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (c - b'0') as u64;
    }
    Some(n)
}

/// `sec.nnnnnnnnn` → nanoseconds.
fn parse_ts(v: &[u8]) -> Option<i64> {
    let dot = v.iter().position(|&c| c == b'.')?;
    let sec = parse_u64(&v[..dot])?;
    let frac = &v[dot + 1..];
    if frac.len() > 9 {
        return None;
    }
    let mut ns = parse_u64(frac)?;
    for _ in frac.len()..9 {
        ns *= 10;
    }
    i64::try_from(sec.checked_mul(1_000_000_000)?.checked_add(ns)?).ok()
}

impl Column {
    fn new(field: Field) -> Self {
        let kind = kind(field);
        let values = match kind {
            Kind::Ts | Kind::I64 => Values::I64(Vec::new()),
            Kind::I32 => Values::I32(Vec::new()),
            Kind::Bool => Values::Bool(Vec::new()),
            Kind::Text => Values::Text(Vec::new()),
        };
        Self {
            field,
            kind,
            values,
            def: Vec::new(),
        }
    }

    fn push(&mut self, v: &[u8]) -> io::Result<()> {
        if v.is_empty() {
            if required(self.field) {
                return Err(bad(self.field, v));
            }
            self.def.push(0);
            return Ok(());
        }
        let f = self.field;
        match &mut self.values {
            Values::I64(x) => x.push(if self.kind == Kind::Ts {
                parse_ts(v).ok_or_else(|| bad(f, v))?
            } else {
                parse_u64(v)
                    .and_then(|n| i64::try_from(n).ok())
                    .ok_or_else(|| bad(f, v))?
            }),
            Values::I32(x) => x.push(
                parse_u64(v)
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| bad(f, v))?,
            ),
            Values::Bool(x) => x.push(match v {
                b"1" => true,
                b"0" => false,
                _ => return Err(bad(f, v)),
            }),
            Values::Text(x) => {
                std::str::from_utf8(v).map_err(|_| bad(f, v))?;
                x.push(ByteArray::from(v.to_vec()))
            }
        }
        self.def.push(1);
        Ok(())
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

/// Takes header-less CSV lines of `fields` and writes them as Parquet.
pub struct ParquetSink<W: Write + Send> {
    writer: SerializedFileWriter<Counted<W>>,
    cols: Vec<Column>,
    /// Rows buffered in `cols`.
    rows: usize,
    row_group_rows: usize,
    total_rows: u64,
    /// An incomplete line carried over from the previous `write`.
    partial: Vec<u8>,
}

/// What [`ParquetSink::finish`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParquetSummary {
    pub rows: u64,
    pub row_groups: usize,
    pub bytes: u64,
}

impl<W: Write + Send> ParquetSink<W> {
    pub fn new(out: W, fields: &[Field]) -> Result<Self, PcapError> {
        Self::with_row_group_rows(out, fields, ROW_GROUP_ROWS)
    }

    pub fn with_row_group_rows(
        out: W,
        fields: &[Field],
        row_group_rows: usize,
    ) -> Result<Self, PcapError> {
        if fields.is_empty() {
            return Err(PcapError::Config("no fields selected".into()));
        }
        let schema = parse_message_type(&schema_text(fields))
            .map_err(|e| PcapError::Config(format!("parquet schema: {e}")))?;
        let props = WriterProperties::builder()
            .set_created_by("commbench pcap extract".into())
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
            row_group_rows: row_group_rows.max(1),
            total_rows: 0,
            partial: Vec::new(),
        })
    }

    fn push_line(&mut self, line: &[u8]) -> io::Result<()> {
        let mut cells = line.split(|&c| c == b',');
        for col in &mut self.cols {
            let v = cells.next().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "parquet: short CSV line")
            })?;
            col.push(v)?;
        }
        if cells.next().is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "parquet: long CSV line",
            ));
        }
        self.rows += 1;
        if self.rows >= self.row_group_rows {
            self.flush_row_group()?;
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
        if !self.partial.is_empty() {
            return Err(PcapError::Output(io::Error::new(
                io::ErrorKind::InvalidData,
                "parquet: unterminated CSV line",
            )));
        }
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

impl<W: Write + Send> Write for ParquetSink<W> {
    fn write(&mut self, mut buf: &[u8]) -> io::Result<usize> {
        let n = buf.len();
        if !self.partial.is_empty() {
            match buf.iter().position(|&c| c == b'\n') {
                Some(i) => {
                    let mut line = std::mem::take(&mut self.partial);
                    line.extend_from_slice(&buf[..i]);
                    self.push_line(&line)?;
                    buf = &buf[i + 1..];
                }
                None => {
                    self.partial.extend_from_slice(buf);
                    return Ok(n);
                }
            }
        }
        while let Some(i) = buf.iter().position(|&c| c == b'\n') {
            self.push_line(&buf[..i])?;
            buf = &buf[i + 1..];
        }
        self.partial.extend_from_slice(buf);
        Ok(n)
    }

    /// Row groups are cut by size only; the footer comes from `finish`.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// [`extract`] to a Parquet file: `cfg.format` and `cfg.header` are ignored.
/// `output_bytes` in the report is the size of the Parquet file.
pub fn extract_parquet<W: Write + Send>(
    cfg: &ExtractConfig,
    out: W,
    progress: &mut dyn FnMut(Progress),
) -> Result<(ExtractReport, ParquetSummary), PcapError> {
    let mut csv = cfg.clone();
    csv.format = OutputFormat::Csv;
    csv.header = false;
    let mut sink = ParquetSink::new(out, &cfg.fields)?;
    let mut report = extract(&csv, &mut sink, progress)?;
    let summary = sink.finish()?;
    report.output_bytes = summary.bytes;
    Ok((report, summary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{generate, GenConfig};
    use crate::reader::Compression;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field as PqField;

    fn capture(dir: &std::path::Path) -> String {
        let path = dir.join("gen.pcap");
        let mut f = std::fs::File::create(&path).unwrap();
        let cfg = GenConfig {
            size: 1 << 20,
            seed: 7,
            compression: Compression::None,
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

    fn check(fields: Vec<Field>, threads: usize, row_group_rows: usize) {
        let dir = commbench_core::artifact::TempDir::new("pcap").unwrap();
        let input = capture(dir.path());
        let cfg = ExtractConfig {
            inputs: vec![input],
            fields: fields.clone(),
            threads,
            ..ExtractConfig::default()
        };
        let csv = csv_of(&cfg);
        assert!(csv.len() > 3 * row_group_rows, "capture too small");
        let out = dir.path().join("out.parquet");
        let mut sink = ParquetSink::with_row_group_rows(
            std::fs::File::create(&out).unwrap(),
            &fields,
            row_group_rows,
        )
        .unwrap();
        let mut c = cfg.clone();
        c.header = false;
        let rep = extract(&c, &mut sink, &mut |_| {}).unwrap();
        let sum = sink.finish().unwrap();
        assert_eq!(sum.rows, csv.len() as u64);
        assert_eq!(sum.rows, rep.packets);
        assert_eq!(sum.row_groups, csv.len().div_ceil(row_group_rows));
        assert_eq!(sum.bytes, std::fs::metadata(&out).unwrap().len());

        let reader = SerializedFileReader::new(std::fs::File::open(&out).unwrap()).unwrap();
        let md = reader.metadata();
        assert_eq!(md.file_metadata().num_rows(), csv.len() as i64);
        assert_eq!(md.num_row_groups(), sum.row_groups);
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
        check(Field::defaults(), 1, 500);
    }

    #[test]
    fn parquet_equals_csv_all_fields_parallel() {
        check(Field::ALL.to_vec(), 2, 499);
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
        let (rep, sum) = extract_parquet(&cfg, &mut buf, &mut |_| {}).unwrap();
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
    fn ts_parsing() {
        assert_eq!(parse_ts(b"1.000000001"), Some(1_000_000_001));
        assert_eq!(parse_ts(b"1700000000.5"), Some(1_700_000_000_500_000_000));
        assert_eq!(parse_ts(b"1"), None);
        assert_eq!(parse_ts(b"1.x"), None);
        assert_eq!(parse_u64(b""), None);
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
