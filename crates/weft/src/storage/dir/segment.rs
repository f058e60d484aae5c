//! Segment files: their names, creating and opening them, and the
//! in-memory map from a seqnum to the frame's byte range.
//!
//! A segment is named after the seqnum of its first entry,
//! `<first seqnum as 20 decimal digits>.seg`, so a directory listing sorts
//! in log order. Its bytes are a header
//! ([`crate::format::dir_segment`]) and entry frames
//! ([`crate::format::frame`]) back to back.
//!
//! The header is written and synced (file and directory) when the segment
//! is created, before any frame goes in, so a damaged header with frames
//! behind it is corruption, while a file no longer than a header is a
//! creation the crash interrupted.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::fsutil;
use crate::error::{Error, Result};
use crate::format::dir_segment::{SEGMENT_HEADER_LEN, SegmentHeader};

/// Bytes of the segment header.
pub(super) const HEADER_LEN: u64 = SEGMENT_HEADER_LEN as u64;

/// The file name of the segment whose first entry is `first`.
pub(super) fn file_name(first: u64) -> String {
    format!("{first:020}.seg")
}

/// The first seqnum encoded in a segment file name, `None` for any other
/// file name.
pub(super) fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".seg")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Opens a segment file for reading, and for writing when `write`.
pub(super) fn open_file(path: &Path, write: bool) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .map_err(|e| Error::io(format!("open segment {}", path.display()), e))
}

/// Creates the segment starting at `first` in `dir`, with its header synced
/// and its directory entry durable.
///
/// Errors: the I/O error's kind; `Corrupt`-free (nothing is read).
pub(super) fn create(dir: &Path, first: u64, relaxed: bool) -> Result<Segment> {
    let path = dir.join(file_name(first));
    let io = |what: &str, e| Error::io(format!("{what} segment {}", path.display()), e);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| io("create", e))?;
    let header = SegmentHeader::new(first, relaxed).encode();
    file.write_all_at(&header, 0)
        .map_err(|e| io("write header of", e))?;
    file.sync_data().map_err(|e| io("sync", e))?;
    fsutil::sync_dir(dir)?;
    Ok(Segment {
        first,
        path,
        file: Arc::new(file),
        offsets: Vec::new(),
        end: HEADER_LEN,
        relaxed,
        append_ids: true,
    })
}

/// One segment as the backend knows it: the file and where each entry's
/// frame starts.
#[derive(Debug)]
pub(super) struct Segment {
    /// Seqnum of the first frame.
    pub(super) first: u64,
    pub(super) path: PathBuf,
    pub(super) file: Arc<File>,
    /// `offsets[i]` is where the frame of seqnum `first + i` starts.
    pub(super) offsets: Vec<u32>,
    /// Bytes of whole, committed frames (plus the header): where the next
    /// write goes.
    pub(super) end: u64,
    /// Written in relaxed mode (see [`Header::relaxed`]).
    pub(super) relaxed: bool,
    /// Its format allows frames with append ids (segment version 2).
    pub(super) append_ids: bool,
}

impl Segment {
    /// The seqnum after the last entry.
    pub(super) fn next(&self) -> u64 {
        self.first + self.offsets.len() as u64
    }

    /// The byte range `[start, end)` of the frames of seqnums
    /// `[from, to)`, all of which the segment holds.
    pub(super) fn span(&self, from: u64, to: u64) -> Option<(u64, u64)> {
        let i = usize::try_from(from.checked_sub(self.first)?).ok()?;
        let j = usize::try_from(to.checked_sub(self.first)?).ok()?;
        let start = u64::from(*self.offsets.get(i)?);
        let end = match self.offsets.get(j) {
            Some(&o) => u64::from(o),
            None if j == self.offsets.len() => self.end,
            None => return None,
        };
        Some((start, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_in_log_order_and_parse_back() {
        assert_eq!(file_name(42), "00000000000000000042.seg");
        assert_eq!(parse_name(&file_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_name("42.seg"), None);
        assert_eq!(parse_name("0000000000000000004x.seg"), None);
        assert_eq!(parse_name("00000000000000000042.seg.tmp"), None);
        assert!(file_name(9) < file_name(10));
    }
}
