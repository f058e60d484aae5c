//! The log-state snapshot: what a shared log must remember about entries it
//! trimmed.
//!
//! Trimming drops entries, but not the numbering they took part in: the
//! next seqnum and, per primary tag, the next stream version continue where
//! the trimmed entries left off. The bucket backend stores this small state
//! as the WAL's base snapshot whenever it trims, so a writer that reopens a
//! trimmed log, and a follower that starts on one, know every stream's
//! version floor without the entries.
//!
//! ## Layout (all integers little-endian)
//!
//! ```text
//!  magic "WLS1" | version u16 = 1 | through u64 | tag_count u32
//!  tag_count times: [tag_len u16][tag text utf-8 ("ns" or "ns:key")][next_version u64]
//!  crc32c u32   (CRC-32C of every byte before it)
//! ```
//!
//! `through` is the last trimmed seqnum; tags are sorted by their text and
//! unique, so one state has one encoding.

use bytes::{BufMut, Bytes, BytesMut};

use super::fields::Reader;
use crate::error::{Error, Result};
use crate::model::LogTag;

const MAGIC: &[u8; 4] = b"WLS1";
const VERSION: u16 = 1;
/// Magic, version, through, tag count.
const HEADER_LEN: usize = 4 + 2 + 8 + 4;

/// The numbering state of a log as of a trim point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogState {
    /// The last seqnum the state covers: the log goes on at `through + 1`.
    pub through: u64,
    /// For every primary tag that ever had an entry `<= through`, the
    /// version its next entry gets; sorted by tag text, unique.
    pub next_versions: Vec<(LogTag, u64)>,
}

impl LogState {
    /// A state; sorts and checks `next_versions`.
    ///
    /// Errors: `InvalidInput` when a tag appears twice.
    pub fn new(through: u64, mut next_versions: Vec<(LogTag, u64)>) -> Result<Self> {
        next_versions.sort_by_cached_key(|(t, _)| t.to_string());
        if let Some(w) = next_versions.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(Error::invalid_input(format!(
                "log state lists tag {} twice",
                w[0].0
            )));
        }
        Ok(LogState {
            through,
            next_versions,
        })
    }
}

/// Encodes `state`.
///
/// Errors: `InvalidInput` for more than `u32::MAX` tags.
pub fn encode_log_state(state: &LogState) -> Result<Bytes> {
    let count = u32::try_from(state.next_versions.len())
        .map_err(|_| Error::invalid_input("a log state holds at most u32::MAX tags"))?;
    let mut buf = BytesMut::with_capacity(HEADER_LEN + 4 + state.next_versions.len() * 24);
    buf.put_slice(MAGIC);
    buf.put_u16_le(VERSION);
    buf.put_u64_le(state.through);
    buf.put_u32_le(count);
    for (tag, next) in &state.next_versions {
        let text = tag.to_string();
        // A tag's text is at most two 255-byte parts and a colon.
        let len = u16::try_from(text.len())
            .map_err(|_| Error::invalid_input(format!("tag {text} is too long")))?;
        buf.put_u16_le(len);
        buf.put_slice(text.as_bytes());
        buf.put_u64_le(*next);
    }
    let crc = crc32c::crc32c(&buf);
    buf.put_u32_le(crc);
    Ok(buf.freeze())
}

/// Decodes a log state.
///
/// Errors: `Corrupt` for a wrong magic, version, checksum or length, a tag
/// that is not valid, tags out of order or repeated, or trailing bytes.
pub fn decode_log_state(bytes: &[u8]) -> Result<LogState> {
    let mut r = Reader::checked(bytes, "log state")?;
    r.magic(MAGIC)?;
    let version = r.u16("version")?;
    if version != VERSION {
        return Err(Error::corrupt(format!(
            "unknown log state version {version}"
        )));
    }
    let through = r.u64("trim point")?;
    // Each tag takes at least 2 + 1 + 8 bytes.
    let count = r.count("tag count", 11)?;
    let mut next_versions = Vec::with_capacity(count);
    let mut previous: Option<&str> = None;
    for _ in 0..count {
        let text = r.text("tag")?;
        let tag: LogTag = text
            .parse()
            .map_err(|e: Error| Error::corrupt(format!("log state tag: {}", e.message())))?;
        if previous.is_some_and(|p| p >= text) {
            return Err(Error::corrupt(format!(
                "log state tags are not sorted and unique at {text:?}"
            )));
        }
        previous = Some(text);
        let next = r.u64("next version")?;
        next_versions.push((tag, next));
    }
    r.finish()?;
    Ok(LogState {
        through,
        next_versions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn state() -> LogState {
        LogState::new(
            41,
            vec![
                ("orders:o-7".parse().unwrap(), 3),
                ("acct".parse().unwrap(), 12),
                ("orders:o-1".parse().unwrap(), 1),
            ],
        )
        .unwrap()
    }

    #[test]
    fn round_trips_in_one_canonical_order() {
        let s = state();
        assert_eq!(s.next_versions[0].0.to_string(), "acct");
        let bytes = encode_log_state(&s).unwrap();
        assert_eq!(decode_log_state(&bytes).unwrap(), s);
        let empty = LogState::new(0, vec![]).unwrap();
        assert_eq!(
            decode_log_state(&encode_log_state(&empty).unwrap()).unwrap(),
            empty
        );
        let dup = LogState::new(
            1,
            vec![("a".parse().unwrap(), 1), ("a".parse().unwrap(), 2)],
        );
        assert_eq!(dup.unwrap_err().kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn every_damage_is_a_corrupt_error() {
        let bytes = encode_log_state(&state()).unwrap();
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.to_vec();
            b[i / 8] ^= 1 << (i % 8);
            assert_eq!(decode_log_state(&b).unwrap_err().kind(), ErrorKind::Corrupt);
        }
        for len in 0..bytes.len() {
            assert_eq!(
                decode_log_state(&bytes[..len]).unwrap_err().kind(),
                ErrorKind::Corrupt
            );
        }
    }

    /// Re-checksums `body` so that the structural checks, not the CRC, are
    /// what must catch the problem.
    fn sealed(body: &[u8]) -> Vec<u8> {
        let mut out = body.to_vec();
        out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
        out
    }

    #[test]
    fn well_checksummed_nonsense_is_refused() {
        let good = encode_log_state(&state()).unwrap();
        let body = &good[..good.len() - 4];
        // A huge tag count with no tags behind it.
        let mut b = body[..HEADER_LEN].to_vec();
        b[14..18].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            decode_log_state(&sealed(&b)).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
        // Trailing bytes.
        let mut b = body.to_vec();
        b.push(0);
        assert_eq!(
            decode_log_state(&sealed(&b)).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
        // Unsorted tags.
        let mut b = body[..HEADER_LEN].to_vec();
        b[14..18].copy_from_slice(&2u32.to_le_bytes());
        for t in ["b", "a"] {
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(t.as_bytes());
            b.extend_from_slice(&0u64.to_le_bytes());
        }
        assert_eq!(
            decode_log_state(&sealed(&b)).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
        // An invalid tag.
        let mut b = body[..HEADER_LEN].to_vec();
        b[14..18].copy_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&3u16.to_le_bytes());
        b.extend_from_slice(b"a\nb");
        b.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(
            decode_log_state(&sealed(&b)).unwrap_err().kind(),
            ErrorKind::Corrupt
        );
    }
}
