//! Segment files: their names, creating and opening them, and what the
//! backend remembers of each (no per-entry offsets: entries are found
//! from the log index's locators, see [`super::walk`]).
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
/// and its directory entry durable; returns it and its file, open for
/// writing.
///
/// Errors: the I/O error's kind; `Corrupt`-free (nothing is read).
pub(super) fn create(dir: &Path, first: u64, relaxed: bool) -> Result<(Segment, File)> {
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
    Ok((
        Segment {
            first,
            path,
            end: HEADER_LEN,
            next: first,
            relaxed,
            append_ids: true,
        },
        file,
    ))
}

/// One segment as the backend knows it: where it is, how far its whole
/// batches go, and which entries it holds.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    /// Seqnum of the first frame.
    pub(super) first: u64,
    pub(super) path: PathBuf,
    /// Bytes of whole, committed frames (plus the header): where the next
    /// write goes. [`UNSCANNED`] for a sealed segment this handle has not
    /// read: its whole file.
    pub(super) end: u64,
    /// The seqnum after its last entry.
    pub(super) next: u64,
    /// Written in relaxed mode (see [`SegmentHeader::relaxed`]).
    pub(super) relaxed: bool,
    /// Its format allows frames with append ids (segment version 2).
    pub(super) append_ids: bool,
}

/// The [`Segment::end`] of a sealed segment that was not scanned: a sealed
/// segment holds whole batches to the end of its file.
pub(super) const UNSCANNED: u64 = u64::MAX;

impl Segment {
    /// A sealed segment this handle did not scan: its entries run from
    /// `first` to `next` (the next segment's first seqnum).
    pub(super) fn sealed(dir: &Path, first: u64, next: u64) -> Segment {
        Segment {
            first,
            path: dir.join(file_name(first)),
            end: UNSCANNED,
            next,
            relaxed: false,
            // Unknown (its header is not read), and only the active
            // segment's matters: a writer never appends to this one.
            append_ids: false,
        }
    }

    /// Number of entries it holds.
    pub(super) fn entries(&self) -> u64 {
        self.next - self.first
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
