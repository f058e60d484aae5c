//! The header of a `dir` backend segment file.
//!
//! A segment file is this 20-byte header followed by entry frames
//! ([`super::frame`]) back to back:
//!
//! ```text
//!  offset  size  field
//!       0     4  magic          "WFTS"
//!       4     1  format version 1
//!       5     1  flags          bit 0: RELAXED (written in SyncMode::Relaxed)
//!       6     2  reserved       0
//!       8     8  first_seqnum   equals the number in the file name
//!      16     4  crc32c         of bytes [0, 16)
//!      20     …  frames
//! ```

use super::fields::{Reader, Writer};
use crate::error::{Error, Result};

/// Bytes of the segment header.
pub const SEGMENT_HEADER_LEN: usize = 20;

const MAGIC: &[u8; 4] = b"WFTS";
const FORMAT_VERSION: u8 = 1;
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
}

impl SegmentHeader {
    /// The header's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.bytes(MAGIC)
            .u8(FORMAT_VERSION)
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
        if version != FORMAT_VERSION {
            return Err(Error::corrupt(format!(
                "segment format version {version} is not supported (this build reads {FORMAT_VERSION})"
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_damage() {
        let h = SegmentHeader {
            first_seqnum: 7,
            relaxed: true,
        };
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
}
