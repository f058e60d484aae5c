//! Segment objects: a block of length-prefixed records plus a small footer.
//!
//! ```text
//! v1 (upstream "batch v1", 7-byte footer)
//! +------------------------------+-------------+------------------+-------------+
//! | record block (maybe zstd)    | compression | record_count u32 | version u16 |
//! | ([len u32][bytes])*          |     u8      |                  |     = 1     |
//! +------------------------------+-------------+------------------+-------------+
//!
//! v2 (11-byte footer, adds CRC-32C)
//! +------------------------------+-------------+------------------+------------+-------------+
//! | record block (maybe zstd)    | compression | record_count u32 | crc32c u32 | version u16 |
//! +------------------------------+-------------+------------------+------------+-------------+
//!  \___________________ covered by crc32c ______________________/
//! ```
//!
//! All integers are little-endian. `compression` is 0 (none) or 1 (zstd);
//! with zstd the whole record block is one zstd frame and the CRC covers the
//! compressed bytes as stored. The footer's record count must equal the
//! number of records in the block, and the block must end exactly after the
//! last record: anything else is [`ErrorKind::Corrupt`](crate::ErrorKind).
//!
//! Decompression is bounded ([`DEFAULT_MAX_BLOCK_LEN`], or the limit given to
//! [`decode_segment_with_limit`]) so that a small hostile object cannot make
//! a reader allocate without bound.

use std::io::Read;

use bytes::{BufMut, Bytes, BytesMut};

use super::fields::{Reader, split_tail};
use crate::error::{Error, Result};

/// Footer length of a v1 segment.
pub const SEGMENT_V1_FOOTER_LEN: usize = 1 + 4 + 2;
/// Footer length of a v2 segment.
pub const SEGMENT_V2_FOOTER_LEN: usize = 1 + 4 + 4 + 2;
/// The largest record block a reader decompresses by default (256 MiB).
pub const DEFAULT_MAX_BLOCK_LEN: usize = 256 << 20;
/// The zstd level [`Compression::Zstd`] encodes with.
pub const ZSTD_LEVEL: i32 = 3;

const WHAT: &str = "segment";

/// Which footer layout a segment carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SegmentVersion {
    /// The upstream batch layout: no checksum.
    V1,
    /// v1 plus a CRC-32C over everything before the checksum field.
    #[default]
    V2,
}

impl SegmentVersion {
    /// The version number stored in the footer.
    pub fn as_u16(self) -> u16 {
        match self {
            SegmentVersion::V1 => 1,
            SegmentVersion::V2 => 2,
        }
    }

    /// The version with footer number `v`, if weft knows it.
    pub fn from_u16(v: u16) -> Option<Self> {
        match v {
            1 => Some(SegmentVersion::V1),
            2 => Some(SegmentVersion::V2),
            _ => None,
        }
    }

    /// Length of this version's footer in bytes.
    pub fn footer_len(self) -> usize {
        match self {
            SegmentVersion::V1 => SEGMENT_V1_FOOTER_LEN,
            SegmentVersion::V2 => SEGMENT_V2_FOOTER_LEN,
        }
    }
}

/// How a segment's record block is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Stored as is.
    #[default]
    None,
    /// One zstd frame holding the whole record block.
    Zstd,
}

impl Compression {
    /// The byte stored in the footer.
    pub fn as_u8(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Zstd => 1,
        }
    }

    /// The compression with footer byte `b`, if weft knows it.
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// What a segment's footer says, checked against the object (including its
/// checksum for v2) but without decoding the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Footer layout.
    pub version: SegmentVersion,
    /// How the block is stored.
    pub compression: Compression,
    /// Number of records the footer claims.
    pub record_count: u32,
    /// Length of the record block as stored (compressed length for zstd).
    pub stored_block_len: usize,
}

/// A decoded segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedSegment {
    /// Footer layout the object used.
    pub version: SegmentVersion,
    /// How the block was stored.
    pub compression: Compression,
    /// The records, in order. For an uncompressed segment these are slices
    /// of the input buffer; for zstd, slices of one decompressed buffer.
    pub records: Vec<Bytes>,
}

impl DecodedSegment {
    /// Number of records (equal to the footer's count; the decoder checks).
    pub fn record_count(&self) -> usize {
        self.records.len()
    }
}

/// Builds a record block incrementally, so a writer can watch the block grow
/// while packing records and seal it when it is large enough.
///
/// ```
/// use weft::format::{Compression, SegmentBuilder, SegmentVersion, decode_segment};
///
/// let mut b = SegmentBuilder::new();
/// b.push(b"one")?;
/// b.push(b"two")?;
/// assert_eq!(b.block_len(), 14);
/// let bytes = b.finish(Compression::None, SegmentVersion::V2)?;
/// let seg = decode_segment(bytes)?;
/// assert_eq!(seg.records, vec![&b"one"[..], &b"two"[..]]);
/// # Ok::<(), weft::Error>(())
/// ```
#[derive(Debug, Default, Clone)]
pub struct SegmentBuilder {
    block: BytesMut,
    count: u32,
}

impl SegmentBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty builder with room for `block_bytes` of framed records.
    pub fn with_capacity(block_bytes: usize) -> Self {
        SegmentBuilder {
            block: BytesMut::with_capacity(block_bytes),
            count: 0,
        }
    }

    /// Append one record.
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// if the record is longer than `u32::MAX` bytes or the segment already
    /// holds `u32::MAX` records. The builder is unchanged on error.
    pub fn push(&mut self, record: impl AsRef<[u8]>) -> Result<()> {
        let record = record.as_ref();
        let len = u32::try_from(record.len()).map_err(|_| {
            Error::invalid_input(format!(
                "segment record of {} bytes exceeds the u32 length field",
                record.len()
            ))
        })?;
        let count = self
            .count
            .checked_add(1)
            .ok_or_else(|| Error::invalid_input("a segment holds at most u32::MAX records"))?;
        self.block.reserve(4 + record.len());
        self.block.put_u32_le(len);
        self.block.put_slice(record);
        self.count = count;
        Ok(())
    }

    /// Records pushed so far.
    pub fn record_count(&self) -> u32 {
        self.count
    }

    /// Uncompressed block length so far (records plus their length fields).
    pub fn block_len(&self) -> usize {
        self.block.len()
    }

    /// True when no record has been pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Seal the block into a segment object.
    ///
    /// Errors: [`ErrorKind::Internal`](crate::ErrorKind::Internal) if zstd
    /// fails to compress.
    pub fn finish(self, compression: Compression, version: SegmentVersion) -> Result<Bytes> {
        let mut out = match compression {
            Compression::None => {
                let mut out = self.block;
                out.reserve(version.footer_len());
                out
            }
            Compression::Zstd => {
                let compressed = zstd::bulk::compress(&self.block, ZSTD_LEVEL).map_err(|e| {
                    Error::internal("zstd failed to compress a segment block").with_source(e)
                })?;
                let mut out = BytesMut::with_capacity(compressed.len() + version.footer_len());
                out.put_slice(&compressed);
                out
            }
        };
        out.put_u8(compression.as_u8());
        out.put_u32_le(self.count);
        if version == SegmentVersion::V2 {
            let crc = crc32c::crc32c(&out);
            out.put_u32_le(crc);
        }
        out.put_u16_le(version.as_u16());
        Ok(out.freeze())
    }
}

/// Encode `records` as one segment object.
///
/// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a
/// record longer than `u32::MAX` bytes or more than `u32::MAX` records;
/// [`ErrorKind::Internal`](crate::ErrorKind::Internal) if zstd fails.
pub fn encode_segment<R: AsRef<[u8]>>(
    records: &[R],
    compression: Compression,
    version: SegmentVersion,
) -> Result<Bytes> {
    if u32::try_from(records.len()).is_err() {
        return Err(Error::invalid_input(format!(
            "{} records exceed the u32 count field of a segment",
            records.len()
        )));
    }
    let block_len = records
        .iter()
        .fold(0usize, |acc, r| acc.saturating_add(4 + r.as_ref().len()));
    let mut builder =
        SegmentBuilder::with_capacity(block_len.saturating_add(SEGMENT_V2_FOOTER_LEN));
    for r in records {
        builder.push(r)?;
    }
    builder.finish(compression, version)
}

/// Read and check a segment's footer (and, for v2, its checksum) without
/// decoding the records.
///
/// Errors: [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) for a short
/// object, unknown version or compression, or a checksum mismatch.
pub fn inspect_segment(bytes: &[u8]) -> Result<SegmentInfo> {
    let (_, version_bytes) = split_tail(bytes, 2, WHAT, "version field")?;
    let raw_version = u16::from_le_bytes([version_bytes[0], version_bytes[1]]);
    let version = SegmentVersion::from_u16(raw_version)
        .ok_or_else(|| Error::corrupt(format!("segment: unknown version {raw_version}")))?;
    let (block, footer) = split_tail(bytes, version.footer_len(), WHAT, "footer")?;
    let mut f = Reader::new(footer, WHAT);
    let raw_compression = f.u8("compression")?;
    let record_count = f.u32("record count")?;
    if version == SegmentVersion::V2 {
        let stored = f.u32("crc32c")?;
        let covered_len = bytes.len() - 6;
        let actual = crc32c::crc32c(&bytes[..covered_len]);
        if stored != actual {
            return Err(Error::corrupt(format!(
                "segment: crc32c mismatch: stored {stored:08x}, computed {actual:08x}"
            )));
        }
    }
    let compression = Compression::from_u8(raw_compression)
        .ok_or_else(|| Error::corrupt(format!("segment: unknown compression {raw_compression}")))?;
    Ok(SegmentInfo {
        version,
        compression,
        record_count,
        stored_block_len: block.len(),
    })
}

/// Decode a segment object, decompressing at most [`DEFAULT_MAX_BLOCK_LEN`].
///
/// Errors: [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) for any
/// malformed object (see [`decode_segment_with_limit`]).
pub fn decode_segment(bytes: Bytes) -> Result<DecodedSegment> {
    decode_segment_with_limit(bytes, DEFAULT_MAX_BLOCK_LEN)
}

/// Decode a segment object whose decompressed block may be at most
/// `max_block_len` bytes.
///
/// Errors: [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) when the object
/// is truncated, has an unknown version or compression, fails its checksum,
/// holds a zstd block that is not exactly one valid frame or expands beyond
/// `max_block_len`, has a record running past the block, leaves bytes after
/// the last record, or holds a different number of records than its footer
/// says.
pub fn decode_segment_with_limit(bytes: Bytes, max_block_len: usize) -> Result<DecodedSegment> {
    let info = inspect_segment(&bytes)?;
    let stored = bytes.slice(..info.stored_block_len);
    let block = match info.compression {
        Compression::None => stored,
        Compression::Zstd => decompress_block(&stored, max_block_len)?,
    };
    let records = split_records(&block, info.record_count)?;
    Ok(DecodedSegment {
        version: info.version,
        compression: info.compression,
        records,
    })
}

/// Decompress a block that must be exactly one zstd frame of at most `limit`
/// decompressed bytes.
fn decompress_block(stored: &[u8], limit: usize) -> Result<Bytes> {
    let frame_len = zstd::zstd_safe::find_frame_compressed_size(stored).map_err(|code| {
        Error::corrupt(format!(
            "segment: zstd block is not a complete frame ({})",
            zstd::zstd_safe::get_error_name(code)
        ))
    })?;
    if frame_len != stored.len() {
        return Err(Error::corrupt(format!(
            "segment: zstd frame is {frame_len} bytes but the block is {} bytes",
            stored.len()
        )));
    }
    // Refuse early when the frame header already announces too much.
    let declared = zstd::zstd_safe::get_frame_content_size(stored)
        .map_err(|_| Error::corrupt("segment: zstd frame header is invalid"))?;
    if let Some(declared) = declared
        && declared > limit as u64
    {
        return Err(Error::corrupt(format!(
            "segment: zstd frame declares {declared} bytes, more than the {limit}-byte limit"
        )));
    }
    let decoder = zstd::stream::read::Decoder::with_buffer(stored)
        .map_err(|e| Error::internal("zstd decoder could not be created").with_source(e))?
        .single_frame();
    let mut out = Vec::new();
    // Read one byte past the limit so that "exactly at the limit" and
    // "beyond it" can be told apart without trusting the header.
    decoder
        .take((limit as u64).saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| Error::corrupt("segment: zstd frame does not decode").with_source(e))?;
    if out.len() > limit {
        return Err(Error::corrupt(format!(
            "segment: zstd block expands beyond the {limit}-byte limit"
        )));
    }
    Ok(Bytes::from(out))
}

/// Split a record block into its records, zero-copy.
fn split_records(block: &Bytes, record_count: u32) -> Result<Vec<Bytes>> {
    // Each record needs at least its 4-byte length, so a count the block
    // cannot hold is refused before anything is allocated for it.
    let count = record_count as usize;
    if count > block.len() / 4 {
        return Err(Error::corrupt(format!(
            "segment: footer claims {count} records but the block has only {} bytes",
            block.len()
        )));
    }
    let mut records = Vec::with_capacity(count);
    let mut c = Reader::new(block, WHAT);
    for i in 0..count {
        let len = c.u32("record length")? as usize;
        let start = c.position();
        c.take(len, "record")
            .map_err(|e| e.context(format!("record {i}")))?;
        records.push(block.slice(start..start + len));
    }
    if c.remaining() != 0 {
        return Err(Error::corrupt(format!(
            "segment: {} bytes follow the last of {count} records",
            c.remaining()
        )));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn zero_copy_for_uncompressed_segments() {
        let bytes = encode_segment(&[b"ab", b"cd"], Compression::None, SegmentVersion::V1).unwrap();
        let seg = decode_segment(bytes.clone()).unwrap();
        let base = bytes.as_ptr() as usize;
        let first = seg.records[0].as_ptr() as usize;
        assert!(first >= base && first < base + bytes.len());
    }

    #[test]
    fn zstd_bomb_is_refused() {
        let big = vec![0u8; 1 << 20];
        let bytes = encode_segment(&[&big], Compression::Zstd, SegmentVersion::V2).unwrap();
        assert!(bytes.len() < 4096);
        let err = decode_segment_with_limit(bytes.clone(), 64 << 10).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        let seg = decode_segment_with_limit(bytes, (1 << 20) + 4).unwrap();
        assert_eq!(seg.records[0].len(), 1 << 20);
    }

    #[test]
    fn zstd_frame_without_content_size_is_still_bounded() {
        // A streaming encoder does not know the size up front, so the frame
        // header carries no content size; the reader must stop on its own.
        let mut block = BytesMut::new();
        block.put_u32_le(1 << 20);
        block.put_slice(&vec![7u8; 1 << 20]);
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        std::io::Write::write_all(&mut enc, &block).unwrap();
        let mut out = enc.finish().unwrap();
        assert_eq!(zstd::zstd_safe::get_frame_content_size(&out).unwrap(), None);
        out.push(1);
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        let out = Bytes::from(out);
        let err = decode_segment_with_limit(out.clone(), 1000).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert_eq!(decode_segment(out).unwrap().records[0].len(), 1 << 20);
    }

    #[test]
    fn huge_record_count_is_refused_without_allocating() {
        let mut b = BytesMut::new();
        b.put_u8(0);
        b.put_u32_le(u32::MAX);
        b.put_u16_le(1);
        let err = decode_segment(b.freeze()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
    }

    #[test]
    fn empty_segment_round_trips() {
        for version in [SegmentVersion::V1, SegmentVersion::V2] {
            for compression in [Compression::None, Compression::Zstd] {
                let none: [&[u8]; 0] = [];
                let bytes = encode_segment(&none, compression, version).unwrap();
                let seg = decode_segment(bytes).unwrap();
                assert_eq!(seg.record_count(), 0);
                assert_eq!((seg.version, seg.compression), (version, compression));
            }
        }
    }
}
