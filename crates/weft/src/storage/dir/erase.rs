//! Hard deletes: rewriting a sealed segment with some of its frames erased.
//!
//! An erased frame has the same length as the frame it replaces
//! ([`frame::erase_in_place`]), so every offset into the segment — the
//! index's locators, a follower's read position — stays true, and the
//! rewrite changes nothing but the erased payloads (zeroed) and the
//! header's version (3, so a build that does not know erased frames
//! refuses the segment instead of meeting one). The new file replaces the
//! old one atomically (written beside it, synced, renamed, directory
//! synced): a crash leaves the old segment or the new one, never a mix.
//!
//! Only sealed segments are rewritten — the active segment's file is the
//! one appends go to, so the writer seals it first — and only by the
//! writer thread, which also owns trims, so a segment is never rewritten
//! while it is removed.

use std::path::Path;

use super::fsutil;
use super::segment::{self, HEADER_LEN};
use crate::error::{Error, Result};
use crate::format::dir_segment::{SEGMENT_HEADER_LEN, SEGMENT_V3, SegmentHeader};
use crate::format::frame;

/// What a rewrite did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Rewritten {
    /// How many frames it erased (frames erased before are not counted).
    pub(super) erased: u64,
    /// The seqnum and new check value (CRC-32C) of the last frame it
    /// erased (the index's tip check needs it when that is the tip).
    pub(super) last_check: Option<(u64, u64)>,
}

/// Erases the frames `seqnums` (ascending, all inside the segment) of the
/// sealed segment starting at `first` in `dir`, replacing its file
/// atomically. Writes nothing when every one was erased before.
///
/// Errors: `Corrupt` when the file does not hold those frames intact; I/O
/// kinds (the old file is then still in place).
pub(super) fn rewrite_segment(dir: &Path, first: u64, seqnums: &[u64]) -> Result<Rewritten> {
    let name = segment::file_name(first);
    let path = dir.join(&name);
    let mut bytes =
        std::fs::read(&path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    let damaged = |why: String| Error::corrupt(format!("segment {}: {why}", path.display()));
    let mut header = SegmentHeader::decode(&bytes).map_err(|e| e.context(path.display()))?;
    let mut done = Rewritten::default();
    let mut todo = seqnums.iter().copied().peekable();
    let mut at = HEADER_LEN as usize;
    while let Some(&wanted) = todo.peek() {
        let rest = &bytes[at..];
        let (Some(len), Some((seqnum, _))) =
            (frame::claimed_len(rest), frame::claimed_position(rest))
        else {
            return Err(damaged(format!("ends before seqnum {wanted}")));
        };
        let end = at
            .checked_add(len)
            .filter(|&end| end <= bytes.len() && len > frame::PREFIX_LEN)
            .ok_or_else(|| damaged(format!("the frame at offset {at} overruns the file")))?;
        if seqnum > wanted {
            return Err(damaged(format!("holds no frame for seqnum {wanted}")));
        }
        if seqnum == wanted {
            todo.next();
            let slot = &mut bytes[at..end];
            if frame::erase_in_place(slot).map_err(|e| damaged(format!("frame {seqnum}: {e}")))? {
                done.erased += 1;
                let crc = u32::from_le_bytes([slot[4], slot[5], slot[6], slot[7]]);
                done.last_check = Some((seqnum, u64::from(crc)));
            }
        }
        at = end;
    }
    if done.erased > 0 {
        header.version = header.version.max(SEGMENT_V3);
        bytes[..SEGMENT_HEADER_LEN].copy_from_slice(&header.encode());
        fsutil::replace_atomically(dir, &name, &bytes)?;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::model::LogEntry;

    fn segment_with(dir: &Path, first: u64, payloads: &[&str]) -> Vec<u8> {
        let mut bytes = SegmentHeader::new(first, false).encode();
        for (i, p) in payloads.iter().enumerate() {
            let seqnum = first + i as u64;
            let entry = LogEntry {
                seqnum,
                stream_version: i as u64,
                tags: vec!["t".parse().unwrap()],
                data: Bytes::copy_from_slice(p.as_bytes()),
                timestamp_ms: 1,
                append_id: None,
            };
            frame::encode(&mut bytes, &entry, 0, true).unwrap();
        }
        std::fs::write(dir.join(segment::file_name(first)), &bytes).unwrap();
        bytes
    }

    #[test]
    fn erases_in_place_and_keeps_every_offset() {
        let dir = tempfile::tempdir().unwrap();
        let before = segment_with(dir.path(), 10, &["alpha-secret", "bravo", "charlie-secret"]);
        let done = rewrite_segment(dir.path(), 10, &[10, 12]).unwrap();
        assert_eq!(done.erased, 2);
        let after = std::fs::read(dir.path().join(segment::file_name(10))).unwrap();
        assert_eq!(after.len(), before.len());
        assert!(!after.windows(6).any(|w| w == b"secret"));
        let header = SegmentHeader::decode(&after).unwrap();
        assert_eq!((header.version, header.first_seqnum), (SEGMENT_V3, 10));
        let mut at = HEADER_LEN as usize;
        let mut seen = Vec::new();
        while at < after.len() {
            let f = frame::decode(&after[at..]).unwrap();
            seen.push((f.meta.seqnum, f.meta.erased, f.data.to_vec()));
            at += f.frame_len;
        }
        assert_eq!(
            seen,
            vec![
                (10, true, vec![]),
                (11, false, b"bravo".to_vec()),
                (12, true, vec![])
            ]
        );
        // A second erase of the same frames writes nothing.
        assert_eq!(
            rewrite_segment(dir.path(), 10, &[10, 12]).unwrap().erased,
            0
        );
        assert!(!dir.path().join("00000000000000000010.seg.tmp").exists());
    }

    #[test]
    fn a_seqnum_the_segment_does_not_hold_is_corrupt_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let before = segment_with(dir.path(), 0, &["a", "b"]);
        for missing in [[0u64, 5], [1, 2]] {
            let err = rewrite_segment(dir.path(), 0, &missing).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::Corrupt, "{err}");
        }
        let mut torn = before.clone();
        torn.truncate(before.len() - 1);
        std::fs::write(dir.path().join(segment::file_name(0)), &torn).unwrap();
        let err = rewrite_segment(dir.path(), 0, &[1]).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::Corrupt, "{err}");
        assert_eq!(
            std::fs::read(dir.path().join(segment::file_name(0))).unwrap(),
            torn
        );
    }
}
