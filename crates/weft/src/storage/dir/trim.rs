//! The trim point file: how far the log was trimmed, and the version
//! counters of the trimmed streams, replaced atomically.
//!
//! Trimming deletes whole segments, and with them the only record of how
//! many versions each stream had. The trim file keeps those counters so a
//! reopened log resumes numbering exactly.
//!
//! ```text
//!  offset  size  field
//!       0     4  magic         "WFTT"
//!       4     1  version       1
//!       5     3  reserved      0
//!       8     8  through       every seqnum <= through is trimmed
//!      16     4  stream_count
//!      20     …  stream_count times: [tag][next_version u64], where a tag is
//!                [ns_len u16][namespace][key_len u16][key] (key_len 0: none)
//!       …     4  crc32c        of every byte before it
//! ```

use std::path::Path;

use super::codec::{Reader, Writer};
use super::fsutil;
use crate::error::{Error, Result};
use crate::model::LogTag;

/// The trim file's name inside the log directory.
pub(super) const FILE_NAME: &str = "trim";

const MAGIC: &[u8; 4] = b"WFTT";
const VERSION: u8 = 1;

/// A durable trim point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TrimPoint {
    /// The last trimmed seqnum.
    pub(super) through: u64,
    /// Every primary tag with the version its next entry after `through`
    /// gets.
    pub(super) next_versions: Vec<(LogTag, u64)>,
}

impl TrimPoint {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.bytes(MAGIC).u8(VERSION).bytes(&[0; 3]).u64(self.through);
        w.u32(self.next_versions.len() as u32);
        for (tag, version) in &self.next_versions {
            w.tag(tag).u64(*version);
        }
        w.crc();
        w.buf
    }

    /// Errors: `Corrupt` for any damage.
    pub(super) fn decode(bytes: &[u8]) -> Result<TrimPoint> {
        let mut r = Reader::checked(bytes, "trim file")?;
        if r.take(4)? != MAGIC {
            return Err(Error::corrupt("trim file has a wrong magic"));
        }
        let version = r.u8()?;
        if version != VERSION || r.take(3)? != [0; 3] {
            return Err(Error::corrupt(format!(
                "trim file version {version} is not supported"
            )));
        }
        let through = r.u64()?;
        let count = r.u32()? as usize;
        // Each stream takes at least 13 bytes; refuse counts the input
        // cannot hold before allocating for them.
        if count > r.remaining() / 13 {
            return Err(Error::corrupt("trim file stream count exceeds its size"));
        }
        let mut next_versions = Vec::with_capacity(count);
        for _ in 0..count {
            let tag = r.tag()?;
            next_versions.push((tag, r.u64()?));
        }
        r.finish()?;
        Ok(TrimPoint {
            through,
            next_versions,
        })
    }

    /// Reads the trim point of `dir`; `None` when the log was never trimmed.
    ///
    /// Errors: `Corrupt` for a damaged file; I/O kinds.
    pub(super) fn load(dir: &Path) -> Result<Option<TrimPoint>> {
        let path = dir.join(FILE_NAME);
        match std::fs::read(&path) {
            Ok(bytes) => TrimPoint::decode(&bytes)
                .map(Some)
                .map_err(|e| e.context(path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("read {}", path.display()), e)),
        }
    }

    /// Makes this trim point durable, replacing the previous one atomically.
    ///
    /// Errors: I/O kinds.
    pub(super) fn store(&self, dir: &Path) -> Result<()> {
        fsutil::replace_atomically(dir, FILE_NAME, &self.encode())
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

    #[test]
    fn store_and_load() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(TrimPoint::load(dir.path()).unwrap(), None);
        let t = TrimPoint {
            through: 5,
            next_versions: vec![("x".parse().unwrap(), 6)],
        };
        t.store(dir.path()).unwrap();
        assert_eq!(TrimPoint::load(dir.path()).unwrap(), Some(t));
        assert!(!dir.path().join("trim.tmp").exists());
    }
}
