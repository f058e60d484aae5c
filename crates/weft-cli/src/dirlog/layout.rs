//! The on-disk layout of a `dir` log, as far as a read-only reader needs
//! it: segment file names, the segment header, the trim file's trim point.
//!
//! This mirrors what `weft::storage::dir` writes (it keeps these helpers
//! private); frames themselves are decoded by the public
//! [`weft::format::frame`]. Reading the files directly is what lets
//! `inspect`, `verify`, and `read`/`tail` on a log another process has
//! open, work without the backend's exclusive lock and without the
//! recovery that opening would run.

use std::path::{Path, PathBuf};

use weft::{Error, Result};

/// Bytes of a segment header.
pub(crate) const HEADER_LEN: usize = 20;
const SEGMENT_MAGIC: &[u8; 4] = b"WFTS";
const SEGMENT_FORMAT: u8 = 1;
const TRIM_MAGIC: &[u8; 4] = b"WFTT";
const TRIM_FORMAT: u8 = 1;
/// The trim file's name inside the log directory.
const TRIM_FILE: &str = "trim";
/// The lock file's name inside the log directory.
pub(crate) const LOCK_FILE: &str = "LOCK";

/// One segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentFile {
    /// The seqnum of its first entry (from the file name).
    pub(crate) first: u64,
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
}

/// The first seqnum in a segment file name (`<20 digits>.seg`).
fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segment files of `dir`, in log order.
///
/// Errors: I/O kinds (`NotFound` for a missing directory).
pub(crate) fn segments(dir: &Path) -> Result<Vec<SegmentFile>> {
    let read =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
    let mut out = Vec::new();
    for item in read {
        let item = item.map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
        let name = item.file_name();
        let Some(first) = name.to_str().and_then(parse_name) else {
            continue;
        };
        let size = item
            .metadata()
            .map_err(|e| Error::io(format!("stat {}", item.path().display()), e))?
            .len();
        out.push(SegmentFile {
            first,
            path: item.path(),
            size,
        });
    }
    out.sort_by_key(|s| s.first);
    Ok(out)
}

/// True when `dir` looks like a `dir` log (a lock file or a segment).
pub(crate) fn is_log(dir: &Path) -> Result<bool> {
    Ok(dir.join(LOCK_FILE).exists() || !segments(dir)?.is_empty())
}

/// Checks a segment header and returns the first seqnum it records.
///
/// Errors: `Corrupt` for a short header, a wrong magic or version, reserved
/// bits set, or a checksum mismatch.
pub(crate) fn decode_header(bytes: &[u8]) -> Result<u64> {
    let h = bytes
        .get(..HEADER_LEN)
        .ok_or_else(|| Error::corrupt("segment header is truncated"))?;
    let (body, crc) = h.split_at(16);
    let stored = u32::from_le_bytes(crc.try_into().map_err(|_| Error::corrupt("short header"))?);
    if crc32c::crc32c(body) != stored {
        return Err(Error::corrupt("segment header checksum mismatch"));
    }
    if &body[..4] != SEGMENT_MAGIC {
        return Err(Error::corrupt("segment header has a wrong magic"));
    }
    if body[4] != SEGMENT_FORMAT {
        return Err(Error::corrupt(format!(
            "segment format version {} is not one this build reads",
            body[4]
        )));
    }
    if body[5] & !1 != 0 || body[6..8] != [0, 0] {
        return Err(Error::corrupt("segment header has reserved bits set"));
    }
    let first = u64::from_le_bytes(
        body[8..16]
            .try_into()
            .map_err(|_| Error::corrupt("short header"))?,
    );
    Ok(first)
}

/// The last trimmed seqnum, `None` when the log was never trimmed.
///
/// Errors: `Corrupt` for a damaged trim file; I/O kinds.
pub(crate) fn trimmed_through(dir: &Path) -> Result<Option<u64>> {
    let path = dir.join(TRIM_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("read {}", path.display()), e)),
    };
    let damaged = || Error::corrupt(format!("trim file {} is damaged", path.display()));
    let crc_at = bytes.len().checked_sub(4).ok_or_else(damaged)?;
    let stored = u32::from_le_bytes(bytes[crc_at..].try_into().map_err(|_| damaged())?);
    if crc32c::crc32c(&bytes[..crc_at]) != stored
        || bytes.get(..4) != Some(&TRIM_MAGIC[..])
        || bytes.get(4) != Some(&TRIM_FORMAT)
    {
        return Err(damaged());
    }
    let through = bytes
        .get(8..16)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(damaged)?;
    Ok(Some(through))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_sort_in_log_order() {
        assert_eq!(parse_name("00000000000000000042.seg"), Some(42));
        assert_eq!(parse_name("42.seg"), None);
        assert_eq!(parse_name("00000000000000000042.tmp"), None);
    }

    #[test]
    fn headers_are_checked() {
        let mut h = Vec::new();
        h.extend_from_slice(SEGMENT_MAGIC);
        h.extend_from_slice(&[SEGMENT_FORMAT, 0, 0, 0]);
        h.extend_from_slice(&7u64.to_le_bytes());
        let crc = crc32c::crc32c(&h);
        h.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_header(&h).unwrap(), 7);
        h[9] ^= 1;
        assert!(decode_header(&h).is_err());
        assert!(decode_header(&h[..10]).is_err());
    }
}
