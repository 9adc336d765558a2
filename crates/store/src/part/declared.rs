//! What a Parquet file's footer declares, checked before a page is read:
//! the export's columns with their types, flat; column chunks inside the
//! file, at offsets and sizes that are not negative, compressed in a way
//! this import reads. The parquet crate parses the footer; it asserts on
//! a negative chunk offset rather than refusing it, so nothing of the
//! footer reaches it unchecked past that parse.

use super::{input, shown, TEXT_COLUMNS};
use crate::StoreError;
use parquet::basic::{Compression, ConvertedType, Repetition, Type as Physical};
use parquet::file::metadata::RowGroupMetaData;
use parquet::schema::types::SchemaDescriptor;

pub(super) fn damaged(at: &str, what: String) -> StoreError {
    input(format!(
        "{at}: {what}; the file is damaged or not a commbench export"
    ))
}

/// One of the export's columns as the file stores it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Column {
    pub name: &'static str,
    /// Its leaf index in the schema (and its chunk's in a row group).
    pub leaf: usize,
    /// `started_unix`'s 8-byte integers, or the text columns' byte arrays.
    pub int64: bool,
    /// Optional (may hold nulls, one definition level) or required.
    pub optional: bool,
}

/// The export's columns in the export's order: `started_unix` a plain
/// INT64 and the text columns UTF-8 BYTE_ARRAYs, each once, at the top
/// level, required or optional. Other columns are left unread.
pub(super) fn columns(schema: &SchemaDescriptor, at: &str) -> Result<Vec<Column>, StoreError> {
    let mut out = Vec::with_capacity(1 + TEXT_COLUMNS.len());
    for name in std::iter::once("started_unix").chain(TEXT_COLUMNS) {
        let mut same = schema
            .columns()
            .iter()
            .enumerate()
            .filter(|(_, c)| c.path().parts().first().is_some_and(|p| p == name));
        let (leaf, c) = match (same.next(), same.next()) {
            (Some(one), None) => one,
            (None, _) => return Err(damaged(at, format!("no '{name}' column"))),
            (Some(_), Some(_)) => return Err(damaged(at, format!("two '{name}' columns"))),
        };
        let int64 = name == "started_unix";
        let info = c.self_type().get_basic_info();
        let typed = c.path().parts().len() == 1
            && info.has_repetition()
            && info.repetition() != Repetition::REPEATED
            && c.max_rep_level() == 0
            && if int64 {
                c.physical_type() == Physical::INT64
                    && matches!(
                        c.converted_type(),
                        ConvertedType::NONE | ConvertedType::INT_64
                    )
            } else {
                c.physical_type() == Physical::BYTE_ARRAY
                    && c.converted_type() == ConvertedType::UTF8
            };
        if !typed {
            let want = if int64 {
                "a plain INT64"
            } else {
                "UTF-8 text (BYTE_ARRAY, UTF8)"
            };
            return Err(damaged(
                at,
                format!("column '{name}' is not {want}, required or optional, at the top level"),
            ));
        }
        out.push(Column {
            name,
            leaf,
            int64,
            optional: info.repetition() == Repetition::OPTIONAL,
        });
    }
    Ok(out)
}

/// How a column chunk's pages are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Codec {
    None,
    Snappy,
    Zstd,
}

/// Where a column chunk lies in the file, and how its pages are
/// compressed, once its offsets and sizes are checked.
pub(super) struct Chunk {
    pub range: std::ops::Range<usize>,
    pub codec: Codec,
    /// What its pages decode to, at most (headers included).
    pub decoded: u64,
}

/// Column `c`'s chunk in row group `rg`, refused when it lies outside a
/// file of `file_len` bytes, at negative offsets or sizes, or compressed
/// other than with Snappy (what the export writes), Zstandard (what other
/// writers often choose: Polars by default, DuckDB and pyarrow when asked)
/// or not at all.
pub(super) fn chunk(
    rg: &RowGroupMetaData,
    c: &Column,
    file_len: usize,
    at: &str,
) -> Result<Chunk, StoreError> {
    let Some(m) = rg.columns().get(c.leaf) else {
        return Err(damaged(at, format!("no column chunk for '{}'", c.name)));
    };
    let start = m.dictionary_page_offset().unwrap_or(m.data_page_offset());
    let inside = || {
        if m.data_page_offset() < 0 || m.uncompressed_size() < 0 {
            return None;
        }
        let start = usize::try_from(start).ok()?;
        let end = start.checked_add(usize::try_from(m.compressed_size()).ok()?)?;
        (end <= file_len).then_some(start..end)
    };
    let Some(range) = inside() else {
        return Err(damaged(
            at,
            format!(
                "column '{}' declares bytes at {start} (+{}) outside the file's {file_len}, or {} once decoded",
                c.name,
                m.compressed_size(),
                m.uncompressed_size()
            ),
        ));
    };
    let codec = match m.compression() {
        Compression::SNAPPY => Codec::Snappy,
        Compression::ZSTD(_) => Codec::Zstd,
        Compression::UNCOMPRESSED => Codec::None,
        other => {
            return Err(input(format!(
                "{at}: column '{}' is compressed with {}; an import reads Snappy (what the export writes), Zstandard or uncompressed parts: rewrite it with one of those",
                c.name,
                shown(&other.to_string())
            )))
        }
    };
    Ok(Chunk {
        range,
        codec,
        decoded: m.uncompressed_size() as u64,
    })
}
