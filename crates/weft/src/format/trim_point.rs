//! The `dir` backend's trim file: how far the log was trimmed, and the
//! version counters of the streams as of that point.
//!
//! Trimming deletes whole segments, and with them the only record of how
//! many versions each stream had; the trim file keeps those counters so a
//! reopened log resumes numbering exactly.
//!
//! ```text
//!  offset  size  field
//!       0     4  magic         "WFTT"
//!       4     1  version       2 (1: files of builds before the log index)
//!       5     3  reserved      0
//!       8     8  through       every seqnum <= through is trimmed
//!      16     4  stream_count
//!      20     …  stream_count times: [tag][next_version u64], where a tag is
//!                [ns_len u16][namespace][key_len u16][key] (key_len 0: none)
//!       …     4  crc32c        of every byte before it
//! ```
//!
//! Version 2 has version 1's bytes; its meaning narrowed. A version 1 file
//! names every stream; a version 2 file names only the streams the trim
//! left without a live entry (the others go on from their live entries).
//! A build that knows only version 1 would misjudge such a log, so it
//! refuses the file by its version instead. Both versions read the same.

use super::fields::{Reader, Writer};
use crate::error::{Error, Result};
use crate::model::LogTag;

const MAGIC: &[u8; 4] = b"WFTT";
/// The version written.
const VERSION: u8 = 2;
/// Versions read.
const READABLE: [u8; 2] = [1, 2];
const WHAT: &str = "trim file";

/// A trim point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrimPoint {
    /// The last trimmed seqnum.
    pub through: u64,
    /// Every primary tag with the version its next entry after `through`
    /// gets.
    pub next_versions: Vec<(LogTag, u64)>,
}

impl TrimPoint {
    /// The trim file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.bytes(MAGIC).u8(VERSION).bytes(&[0; 3]).u64(self.through);
        w.u32(self.next_versions.len() as u32);
        for (tag, version) in &self.next_versions {
            w.tag(tag).u64(*version);
        }
        w.crc();
        w.finish()
    }

    /// Decodes a trim file.
    ///
    /// Errors: `Corrupt` for any damage.
    pub fn decode(bytes: &[u8]) -> Result<TrimPoint> {
        let mut r = Reader::checked(bytes, WHAT)?;
        r.magic(MAGIC)?;
        let version = r.u8("version")?;
        if !READABLE.contains(&version) {
            return Err(Error::corrupt(format!(
                "trim file version {version} is not supported"
            )));
        }
        r.zeros(3, "reserved field")?;
        let through = r.u64("through")?;
        // Each stream takes at least 13 bytes.
        let count = r.count("stream count", 13)?;
        let mut next_versions = Vec::with_capacity(count);
        for _ in 0..count {
            let tag = r.tag("tag")?;
            next_versions.push((tag, r.u64("next version")?));
        }
        r.finish()?;
        Ok(TrimPoint {
            through,
            next_versions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_damage() {
        let t = TrimPoint {
            through: 99,
            next_versions: vec![("a".parse().unwrap(), 3), ("b:key".parse().unwrap(), 70)],
        };
        let bytes = t.encode();
        assert_eq!(TrimPoint::decode(&bytes).unwrap(), t);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(TrimPoint::decode(&bad).is_err(), "byte {i}");
        }
        for cut in 0..bytes.len() {
            assert!(TrimPoint::decode(&bytes[..cut]).is_err(), "cut {cut}");
        }
    }

    /// `bytes` with its version byte set to `version` and the checksum
    /// recomputed.
    fn with_version(bytes: &[u8], version: u8) -> Vec<u8> {
        let mut out = bytes[..bytes.len() - 4].to_vec();
        out[4] = version;
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    #[test]
    fn writes_version_2_reads_1_and_refuses_others() {
        let t = TrimPoint {
            through: 7,
            next_versions: vec![("s".parse().unwrap(), 4)],
        };
        let bytes = t.encode();
        assert_eq!(bytes[4], 2);
        assert_eq!(TrimPoint::decode(&with_version(&bytes, 1)).unwrap(), t);
        for version in [0u8, 3, 255] {
            let err = TrimPoint::decode(&with_version(&bytes, version)).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::Corrupt, "version {version}");
        }
    }
}
