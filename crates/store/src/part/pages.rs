//! The pages of one column chunk, decoded here rather than by the parquet
//! crate's page decoders: those trust a page's contents to agree with its
//! header (a dictionary page declaring more values than it holds made one
//! index past its buffer and panic, and the release build aborts on a
//! panic), and allocate what a header declares before decompressing.
//!
//! Only what an export holds is read: data pages (v1 and v2) and one
//! dictionary page, compressed with Snappy or Zstandard or not, values PLAIN or
//! dictionary-indexed (RLE/bit-packed hybrid), one optional definition
//! level. Invariants: every size a header declares is checked against the
//! bytes present and against the chunk's declared decoded size (which the
//! import counts against its bound) before anything is allocated; a page
//! gives at most as many values as its row group has rows left.

use super::declared::{damaged, Codec};
use crate::StoreError;
use bytes::Bytes;

/// A row's value missing (a null) in [`Decoded::rows`].
pub(super) const NULL: u32 = u32::MAX;

/// A column chunk's values, decoded.
pub(super) struct Decoded {
    /// Every value the chunk holds (the dictionary's first), as slices of
    /// its decoded pages.
    pub values: Vec<Bytes>,
    /// Per row, its index in `values`, or [`NULL`].
    pub rows: Vec<u32>,
}

/// How a chunk's values are stored.
pub(super) struct Spec {
    /// 8-byte integers, or length-prefixed byte arrays.
    pub int64: bool,
    /// One definition level (nulls allowed), or none.
    pub optional: bool,
    pub codec: Codec,
    /// What the chunk declares its pages decode to.
    pub decoded: u64,
    /// Rows of its row group: it holds exactly one value (or null) for each.
    pub rows: usize,
}

// Page types and encodings (parquet.thrift).
const DATA_PAGE: i32 = 0;
const INDEX_PAGE: i32 = 1;
const DICTIONARY_PAGE: i32 = 2;
const DATA_PAGE_V2: i32 = 3;
const PLAIN: i32 = 0;
const PLAIN_DICTIONARY: i32 = 2;
const RLE: i32 = 3;
const RLE_DICTIONARY: i32 = 8;

/// Decodes the chunk `bytes` as `spec` says, `at` naming it in messages.
pub(super) fn decode(bytes: Bytes, spec: &Spec, at: &str) -> Result<Decoded, StoreError> {
    let mut out = Decoded {
        values: Vec::new(),
        rows: Vec::new(),
    };
    let mut dictionary: Option<usize> = None;
    let mut decoded = 0u64;
    let mut pos = 0;
    let mut page = 0;
    while pos < bytes.len() {
        page += 1;
        let bad = |what: String| damaged(at, format!("page {page}: {what}"));
        let h = PageHeader::read(&bytes[pos..])
            .ok_or_else(|| bad("a header that does not parse".into()))?;
        let (Ok(size), Ok(stored)) = (
            usize::try_from(h.uncompressed),
            usize::try_from(h.compressed),
        ) else {
            return Err(bad("a negative size".into()));
        };
        decoded = decoded.saturating_add(size as u64);
        if decoded > spec.decoded {
            return Err(bad(format!(
                "the pages so far declare {decoded} bytes once decoded, more than the {} of their column chunk",
                spec.decoded
            )));
        }
        let start = pos + h.header_len;
        let Some(end) = start.checked_add(stored).filter(|&e| e <= bytes.len()) else {
            return Err(bad(format!("{stored} bytes past its column chunk's end")));
        };
        let body = bytes.slice(start..end);
        pos = end;
        match h.kind {
            INDEX_PAGE => {}
            DICTIONARY_PAGE => {
                if dictionary.is_some() || !out.rows.is_empty() {
                    return Err(bad("a dictionary that is not the chunk's first page".into()));
                }
                if !matches!(h.encoding, PLAIN | PLAIN_DICTIONARY) {
                    return Err(bad(format!("a dictionary of encoding {}", h.encoding)));
                }
                let data = inflate(body, size, spec.codec).map_err(bad)?;
                let n = count(h.num_values).map_err(bad)?;
                plain(&data, n, spec.int64, &mut out.values).map_err(bad)?;
                dictionary = Some(n);
            }
            DATA_PAGE | DATA_PAGE_V2 => {
                let n = count(h.num_values).map_err(bad)?;
                if n > spec.rows - out.rows.len() {
                    return Err(bad(format!(
                        "{n} values, more than the {} rows its row group has left",
                        spec.rows - out.rows.len()
                    )));
                }
                let (levels, values) = if let Some(v2) = &h.v2 {
                    if v2.rep_len != 0 {
                        return Err(bad("repetition levels in a flat column".into()));
                    }
                    if !spec.optional && v2.def_len != 0 {
                        return Err(bad("definition levels in a required column".into()));
                    }
                    let def_len = usize::try_from(v2.def_len)
                        .ok()
                        .filter(|&l| l <= body.len() && l <= size)
                        .ok_or_else(|| bad("definition levels past the page".into()))?;
                    let levels = body.slice(..def_len);
                    let rest = body.slice(def_len..);
                    let values = if v2.is_compressed {
                        inflate(rest, size - def_len, spec.codec).map_err(bad)?
                    } else {
                        rest
                    };
                    (levels, values)
                } else {
                    let data = inflate(body, size, spec.codec).map_err(bad)?;
                    if !spec.optional {
                        (Bytes::new(), data)
                    } else {
                        if h.def_encoding != RLE {
                            return Err(bad(format!(
                                "definition levels of encoding {}",
                                h.def_encoding
                            )));
                        }
                        let len = data
                            .get(..4)
                            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                            .filter(|&l| l <= data.len() - 4)
                            .ok_or_else(|| bad("definition levels past the page".into()))?;
                        (data.slice(4..4 + len), data.slice(4 + len..))
                    }
                };
                let present = if spec.optional {
                    let mut l = Vec::new();
                    rle_hybrid(&levels, 1, n, &mut l).map_err(bad)?;
                    if l.iter().any(|&x| x > 1) {
                        return Err(bad("a definition level above 1".into()));
                    }
                    Some(l)
                } else {
                    None
                };
                let non_null = present
                    .as_ref()
                    .map_or(n, |l| l.iter().filter(|&&x| x == 1).count());
                let mut index = Vec::new();
                match h.encoding {
                    PLAIN => {
                        let first = out.values.len();
                        plain(&values, non_null, spec.int64, &mut out.values).map_err(bad)?;
                        index.extend((first..out.values.len()).map(|i| i as u32));
                    }
                    PLAIN_DICTIONARY | RLE_DICTIONARY => {
                        let Some(entries) = dictionary else {
                            return Err(bad("dictionary indices without a dictionary".into()));
                        };
                        let (&width, rest) = values
                            .split_first()
                            .ok_or_else(|| bad("no index width".into()))?;
                        rle_hybrid(rest, width, non_null, &mut index).map_err(bad)?;
                        if let Some(i) = index.iter().find(|&&i| i as usize >= entries) {
                            return Err(bad(format!(
                                "index {i} into a dictionary of {entries} values"
                            )));
                        }
                    }
                    e => return Err(unread_encoding(&format!("{at} page {page}"), e)),
                }
                match present {
                    None => out.rows.extend(index),
                    Some(levels) => {
                        let mut next = index.into_iter();
                        for d in levels {
                            out.rows.push(if d == 1 {
                                next.next().unwrap_or(NULL)
                            } else {
                                NULL
                            });
                        }
                    }
                }
            }
            k => return Err(bad(format!("a page of type {k}"))),
        }
    }
    if out.rows.len() != spec.rows {
        return Err(damaged(
            at,
            format!(
                "{} values for the {} rows of its row group",
                out.rows.len(),
                spec.rows
            ),
        ));
    }
    Ok(out)
}

/// A data page's values in an encoding the import does not decode: said
/// as what it is, not as damage (DuckDB writes the delta encodings with
/// `PARQUET_VERSION v2`).
fn unread_encoding(at: &str, e: i32) -> StoreError {
    let name = match e {
        4 => "BIT_PACKED",
        5 => "DELTA_BINARY_PACKED",
        6 => "DELTA_LENGTH_BYTE_ARRAY",
        7 => "DELTA_BYTE_ARRAY",
        9 => "BYTE_STREAM_SPLIT",
        _ => return damaged(at, format!("values of encoding {e}")),
    };
    crate::part::input(format!(
        "{at}: values in the {name} encoding; an import reads PLAIN and dictionary-encoded values (what the export, DuckDB with its default PARQUET_VERSION v1 and pyarrow write): rewrite the file with those"
    ))
}

/// A value count a header declares.
fn count(n: i32) -> Result<usize, String> {
    usize::try_from(n).map_err(|_| format!("{n} values"))
}

/// A page's body decoded to the `size` bytes its header declares (already
/// checked against the chunk's bound).
fn inflate(body: Bytes, size: usize, codec: Codec) -> Result<Bytes, String> {
    match codec {
        Codec::None if body.len() == size => return Ok(body),
        Codec::None => {
            return Err(format!(
                "{} bytes stored uncompressed, not {size}",
                body.len()
            ))
        }
        Codec::Zstd => {
            // Decompressed into `size` bytes at most: a frame that holds
            // more is refused, not grown into.
            let out = zstd::bulk::decompress(&body, size).map_err(|e| format!("Zstandard: {e}"))?;
            if out.len() != size {
                return Err(format!(
                    "Zstandard data of {} bytes, not the {size} declared",
                    out.len()
                ));
            }
            return Ok(out.into());
        }
        Codec::Snappy => {}
    }
    let n = snap::raw::decompress_len(&body).map_err(|e| format!("Snappy: {e}"))?;
    if n != size {
        return Err(format!("Snappy data of {n} bytes, not the {size} declared"));
    }
    let mut out = vec![0; size];
    let got = snap::raw::Decoder::new()
        .decompress(&body, &mut out)
        .map_err(|e| format!("Snappy: {e}"))?;
    if got != size {
        return Err(format!(
            "Snappy data of {got} bytes, not the {size} declared"
        ));
    }
    Ok(out.into())
}

/// `n` PLAIN values from `data` appended to `values`: 8-byte integers, or
/// byte arrays each after its 4-byte length.
fn plain(data: &Bytes, n: usize, int64: bool, values: &mut Vec<Bytes>) -> Result<(), String> {
    let short = || format!("fewer than the {n} values declared");
    // Each value takes at least 4 bytes: a count beyond that is refused
    // before anything is kept.
    if n > data.len() / 4 {
        return Err(short());
    }
    let mut p = 0;
    for _ in 0..n {
        let len = if int64 {
            8
        } else {
            let b = data.get(p..p + 4).ok_or_else(short)?;
            p += 4;
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
        };
        let end = p
            .checked_add(len)
            .filter(|&e| e <= data.len())
            .ok_or_else(short)?;
        values.push(data.slice(p..end));
        p = end;
    }
    Ok(())
}

/// `n` values of `width` bits from the RLE/bit-packed hybrid encoding in
/// `data`, appended to `out`.
fn rle_hybrid(data: &[u8], width: u8, n: usize, out: &mut Vec<u32>) -> Result<(), String> {
    if width > 32 {
        return Err(format!("values of {width} bits"));
    }
    let short = || format!("fewer than the {n} values declared");
    let width = usize::from(width);
    let mut r = Compact { b: data, pos: 0 };
    let goal = out.len() + n;
    while out.len() < goal {
        let head = r.varint().ok_or_else(short)?;
        let left = goal - out.len();
        if head & 1 == 1 {
            // Bit-packed groups of 8 values; the last may be cut short.
            let groups = usize::try_from(head >> 1).map_err(|_| short())?;
            let values = groups.checked_mul(8).ok_or_else(short)?.min(left);
            if values == 0 {
                return Err("an empty bit-packed run".into());
            }
            let bits = r.b.get(r.pos..).unwrap_or_default();
            if values * width > bits.len() * 8 {
                return Err(short());
            }
            for i in 0..values {
                let mut v = 0u32;
                for bit in 0..width {
                    let at = i * width + bit;
                    v |= u32::from(bits[at / 8] >> (at % 8) & 1) << bit;
                }
                out.push(v);
            }
            let used = groups.saturating_mul(width).min(bits.len());
            r.pos += used;
        } else {
            let run = usize::try_from(head >> 1).map_err(|_| short())?;
            if run == 0 {
                return Err("an empty run".into());
            }
            let mut v = [0u8; 4];
            let vb = width.div_ceil(8);
            let b = r.b.get(r.pos..r.pos + vb).ok_or_else(short)?;
            v[..vb].copy_from_slice(b);
            r.pos += vb;
            out.extend(std::iter::repeat_n(u32::from_le_bytes(v), run.min(left)));
        }
    }
    Ok(())
}

/// What a page header declares (the fields read here).
struct PageHeader {
    header_len: usize,
    kind: i32,
    uncompressed: i32,
    compressed: i32,
    num_values: i32,
    encoding: i32,
    def_encoding: i32,
    v2: Option<V2>,
}

/// What a v2 data page header adds.
struct V2 {
    def_len: i32,
    rep_len: i32,
    is_compressed: bool,
}

impl PageHeader {
    /// The `PageHeader` (Thrift compact protocol) at the start of `b`;
    /// `None` when it does not parse or lacks a field its type needs.
    fn read(b: &[u8]) -> Option<Self> {
        let mut r = Compact { b, pos: 0 };
        let (mut kind, mut uncompressed, mut compressed) = (None, None, None);
        let (mut num_values, mut encoding, mut def_encoding) = (None, None, None);
        let mut v2 = None;
        r.fields(0, |r, id, ty| {
            match (id, ty) {
                (1, I32) => kind = Some(r.i32()?),
                (2, I32) => uncompressed = Some(r.i32()?),
                (3, I32) => compressed = Some(r.i32()?),
                // DataPageHeader, DictionaryPageHeader.
                (5 | 7, STRUCT) => r.fields(1, |r, id, ty| {
                    match (id, ty) {
                        (1, I32) => num_values = Some(r.i32()?),
                        (2, I32) => encoding = Some(r.i32()?),
                        (3, I32) => def_encoding = Some(r.i32()?),
                        _ => return Some(false),
                    }
                    Some(true)
                })?,
                (8, STRUCT) => {
                    let mut page = V2 {
                        def_len: -1,
                        rep_len: -1,
                        is_compressed: true,
                    };
                    r.fields(1, |r, id, ty| {
                        match (id, ty) {
                            (1, I32) => num_values = Some(r.i32()?),
                            (4, I32) => encoding = Some(r.i32()?),
                            (5, I32) => page.def_len = r.i32()?,
                            (6, I32) => page.rep_len = r.i32()?,
                            (7, TRUE | FALSE) => page.is_compressed = ty == TRUE,
                            _ => return Some(false),
                        }
                        Some(true)
                    })?;
                    v2 = Some(page);
                }
                _ => return Some(false),
            }
            Some(true)
        })?;
        let kind = kind?;
        let needs_values = matches!(kind, DATA_PAGE | DICTIONARY_PAGE | DATA_PAGE_V2);
        if kind == DATA_PAGE_V2 && v2.is_none() {
            return None;
        }
        Some(PageHeader {
            header_len: r.pos,
            kind,
            uncompressed: uncompressed?,
            compressed: compressed?,
            num_values: if needs_values { num_values? } else { 0 },
            encoding: if needs_values { encoding? } else { 0 },
            def_encoding: def_encoding.unwrap_or(RLE),
            v2: if kind == DATA_PAGE_V2 { v2 } else { None },
        })
    }
}

// Thrift compact protocol types.
const TRUE: u8 = 1;
const FALSE: u8 = 2;
const I32: u8 = 5;
const STRUCT: u8 = 12;

/// A reader of the Thrift compact protocol: the fields a caller asks for,
/// the others skipped.
struct Compact<'a> {
    b: &'a [u8],
    pos: usize,
}

/// Structs, lists and maps nested deeper are refused (a page header's
/// statistics nest three deep).
const MAX_NESTING: usize = 16;

impl Compact<'_> {
    fn byte(&mut self) -> Option<u8> {
        let x = *self.b.get(self.pos)?;
        self.pos += 1;
        Some(x)
    }

    fn take(&mut self, n: u64) -> Option<()> {
        let end = self.pos.checked_add(usize::try_from(n).ok()?)?;
        (end <= self.b.len()).then(|| self.pos = end)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let x = self.byte()?;
            v |= u64::from(x & 0x7f) << shift;
            if x & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn zigzag(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn i32(&mut self) -> Option<i32> {
        i32::try_from(self.zigzag()?).ok()
    }

    /// The fields of a struct up to its stop byte, each handed to `f` with
    /// its id and type: `f` reads it and says `true`, or says `false` and
    /// it is skipped.
    fn fields(
        &mut self,
        depth: usize,
        mut f: impl FnMut(&mut Self, i16, u8) -> Option<bool>,
    ) -> Option<()> {
        if depth > MAX_NESTING {
            return None;
        }
        let mut id = 0i16;
        loop {
            let head = self.byte()?;
            if head == 0 {
                return Some(());
            }
            let ty = head & 0x0f;
            id = match head >> 4 {
                0 => i16::try_from(self.zigzag()?).ok()?,
                delta => id.checked_add(i16::from(delta))?,
            };
            if !f(self, id, ty)? {
                self.skip(ty, depth + 1)?;
            }
        }
    }

    /// Skips one value of compact type `ty` (a field's; in a list or map
    /// a bool takes a byte, which [`Compact::element`] handles).
    fn skip(&mut self, ty: u8, depth: usize) -> Option<()> {
        if depth > MAX_NESTING {
            return None;
        }
        match ty {
            // A field's bool lives in its type.
            TRUE | FALSE => Some(()),
            3 => self.take(1),
            4..=6 => self.varint().map(drop),
            7 => self.take(8),
            8 => {
                let n = self.varint()?;
                self.take(n)
            }
            9 | 10 => {
                let head = self.byte()?;
                let n = match head >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                // Every element takes a byte at least: a count past the
                // bytes left ends at their end.
                for _ in 0..n {
                    self.element(head & 0x0f, depth + 1)?;
                }
                Some(())
            }
            11 => {
                let n = self.varint()?;
                if n == 0 {
                    return Some(());
                }
                let kinds = self.byte()?;
                for _ in 0..n {
                    self.element(kinds >> 4, depth + 1)?;
                    self.element(kinds & 0x0f, depth + 1)?;
                }
                Some(())
            }
            STRUCT => self.fields(depth, |_, _, _| Some(false)),
            _ => None,
        }
    }

    /// Skips one element of a list, set or map.
    fn element(&mut self, ty: u8, depth: usize) -> Option<()> {
        match ty {
            TRUE | FALSE => self.take(1),
            _ => self.skip(ty, depth),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rle_hybrid_reads_runs_and_bit_packed_groups() {
        // A run of 5 threes (width 2), then one group of 8 bit-packed
        // values 0..=3 twice.
        let data = [5 << 1, 3, 0b11, 0b1110_0100, 0b1110_0100];
        let mut out = Vec::new();
        rle_hybrid(&data, 2, 13, &mut out).unwrap();
        assert_eq!(out, [3, 3, 3, 3, 3, 0, 1, 2, 3, 0, 1, 2, 3]);
        // Asking for more than is there is refused, not padded.
        let mut out = Vec::new();
        assert!(rle_hybrid(&data, 2, 14, &mut out).is_err());
    }

    #[test]
    fn a_run_longer_than_asked_gives_only_what_was_asked() {
        // One run of 2^31 ones: 3 taken, nothing more kept.
        let mut data = vec![];
        let mut v = (1u64 << 31) << 1;
        while v >= 0x80 {
            data.push((v as u8) | 0x80);
            v >>= 7;
        }
        data.push(v as u8);
        data.push(1);
        let mut out = Vec::new();
        rle_hybrid(&data, 1, 3, &mut out).unwrap();
        assert_eq!(out, [1, 1, 1]);
    }

    #[test]
    fn plain_byte_arrays_past_the_page_are_refused() {
        let data = Bytes::from_static(b"\x03\0\0\0abc\x05\0\0\0de");
        let mut v = Vec::new();
        assert!(plain(&data, 1, false, &mut v).is_ok());
        assert_eq!(v, [Bytes::from_static(b"abc")]);
        let mut v = Vec::new();
        assert!(plain(&data, 2, false, &mut v).is_err());
        // A count the bytes cannot hold is refused before anything is kept.
        let mut v = Vec::new();
        assert!(plain(&data, 1 << 30, false, &mut v).is_err());
        assert!(v.is_empty());
    }
}
