//! The header of a `dir` backend segment file.
//!
//! A segment file is this 20-byte header followed by entry frames
//! ([`super::frame`]) back to back:
//!
//! ```text
//!  offset  size  field
//!       0     4  magic          "WFTS"
//!       4     1  format version 1, 2 (frames may carry append ids) or 3
//!                               (frames may also be erased)
//!       5     1  flags          bit 0: RELAXED (written in SyncMode::Relaxed)
//!       6     2  reserved       0
//!       8     8  first_seqnum   equals the number in the file name
//!      16     4  crc32c         of bytes [0, 16)
//!      20     …  frames
//! ```
//!
//! Version 2 changes no byte of the header; it says that the segment's
//! frames may carry the append id field ([`super::frame`], flag
//! `APPEND_ID`). A build that reads only version 1 refuses such a segment
//! as a whole (`Corrupt`, nothing cut), where it would otherwise take an
//! id frame in the last write for a torn tail and truncate it. Writers
//! create version 2 segments and never put an id frame into a version 1
//! segment (they start a new segment instead); readers accept both.
//!
//! Version 3 says that some frames may be erased ([`super::frame`], flag
//! `ERASED`): a hard delete rewrites a sealed segment with its erased
//! frames and this version, so a build that does not know erased frames
//! refuses the segment by its header instead of meeting them. Only such
//! rewrites write version 3.

use super::fields::{Reader, Writer};
use crate::error::{Error, Result};

/// Bytes of the segment header.
pub const SEGMENT_HEADER_LEN: usize = 20;

const MAGIC: &[u8; 4] = b"WFTS";
/// The first format version: frames never carry append ids.
pub const SEGMENT_V1: u8 = 1;

/// The format version this build writes: frames may carry append ids.
pub const SEGMENT_V2: u8 = 2;

/// The format version of a segment a hard delete rewrote: frames may be
/// erased (and may carry append ids).
pub const SEGMENT_V3: u8 = 3;
const FLAG_RELAXED: u8 = 1;
const WHAT: &str = "segment header";

/// A decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The seqnum of the segment's first frame.
    pub first_seqnum: u64,
    /// Written in relaxed sync mode: many write groups at its end may be
    /// unsynced, which recovery takes into account.
    pub relaxed: bool,
    /// [`SEGMENT_V1`], [`SEGMENT_V2`] or [`SEGMENT_V3`].
    pub version: u8,
}

impl SegmentHeader {
    /// The header of a new segment, in the version this build writes.
    pub fn new(first_seqnum: u64, relaxed: bool) -> Self {
        SegmentHeader {
            first_seqnum,
            relaxed,
            version: SEGMENT_V2,
        }
    }

    /// True when the segment's frames may carry append ids.
    pub fn allows_append_ids(&self) -> bool {
        self.version >= SEGMENT_V2
    }

    /// The header's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.bytes(MAGIC)
            .u8(self.version)
            .u8(if self.relaxed { FLAG_RELAXED } else { 0 })
            .u16(0)
            .u64(self.first_seqnum)
            .crc();
        w.finish()
    }

    /// Decodes the header at the start of `bytes` (which may go on with
    /// frames).
    ///
    /// Errors: `Corrupt` when `bytes` is shorter than a header, or for a
    /// wrong checksum, magic or version, or reserved bits set.
    pub fn decode(bytes: &[u8]) -> Result<SegmentHeader> {
        let bytes = bytes.get(..SEGMENT_HEADER_LEN).ok_or_else(|| {
            Error::corrupt(format!(
                "{WHAT}: {} bytes is too short for the {SEGMENT_HEADER_LEN}-byte header",
                bytes.len()
            ))
        })?;
        let mut r = Reader::checked(bytes, WHAT)?;
        r.magic(MAGIC)?;
        let version = r.u8("format version")?;
        if !(SEGMENT_V1..=SEGMENT_V3).contains(&version) {
            return Err(Error::corrupt(format!(
                "segment format version {version} is not supported (this build reads \
                 {SEGMENT_V1} to {SEGMENT_V3})"
            )));
        }
        let flags = r.u8("flags")?;
        if flags & !FLAG_RELAXED != 0 {
            return Err(Error::corrupt(format!(
                "{WHAT}: reserved flag bits set ({flags:#04x})"
            )));
        }
        r.zeros(2, "reserved field")?;
        let first_seqnum = r.u64("first seqnum")?;
        r.finish()?;
        Ok(SegmentHeader {
            first_seqnum,
            relaxed: flags & FLAG_RELAXED != 0,
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_damage() {
        let h = SegmentHeader::new(7, true);
        assert_eq!(h.version, SEGMENT_V2);
        let bytes = h.encode();
        assert_eq!(bytes.len(), SEGMENT_HEADER_LEN);
        assert_eq!(SegmentHeader::decode(&bytes).unwrap(), h);
        for i in 0..bytes.len() * 8 {
            let mut bad = bytes.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(SegmentHeader::decode(&bad).is_err(), "bit {i}");
        }
        for cut in 0..bytes.len() {
            assert!(SegmentHeader::decode(&bytes[..cut]).is_err(), "cut {cut}");
        }
        assert!(SegmentHeader::decode(&[0; SEGMENT_HEADER_LEN]).is_err());
    }

    #[test]
    fn version_1_still_reads_and_unknown_versions_do_not() {
        let old = SegmentHeader {
            version: SEGMENT_V1,
            ..SegmentHeader::new(3, false)
        };
        let decoded = SegmentHeader::decode(&old.encode()).unwrap();
        assert_eq!(decoded, old);
        assert!(!decoded.allows_append_ids());
        assert!(SegmentHeader::new(3, false).allows_append_ids());
        let erased = SegmentHeader {
            version: SEGMENT_V3,
            ..SegmentHeader::new(3, false)
        };
        let decoded = SegmentHeader::decode(&erased.encode()).unwrap();
        assert_eq!(decoded, erased);
        assert!(decoded.allows_append_ids());
        let four = SegmentHeader {
            version: 4,
            ..SegmentHeader::new(3, false)
        };
        let err = SegmentHeader::decode(&four.encode()).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Corrupt);
        assert!(err.message().contains("version 4"), "{err}");
    }
}
