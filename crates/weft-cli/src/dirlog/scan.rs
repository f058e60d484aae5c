//! [`Scanner`]: a read-only reader of a `dir` log's files, for logs another
//! process has open (the backend's lock keeps a second `DirStorage` out).
//!
//! It never writes, never repairs, and only hands out entries of complete
//! atomic batches (up to a frame flagged batch-end), so it never shows half
//! a batch that is still being written. It can show an entry a moment
//! before the writer's sync makes it durable.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use weft::format::frame::{self, FrameError};
use weft::{Error, LogEntry, LogTag, Result};

use super::layout::{self, HEADER_LEN, SegmentFile};

/// How many times a damaged-looking frame at the end of the log is read
/// again before it counts as corrupt, and the pause before each look.
const TAIL_RETRIES: u32 = 5;
const TAIL_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// A batch boundary: after it, the next frame starts at `offset` of the
/// segment whose first seqnum is `segment`, and holds `seqnum`.
#[derive(Debug, Clone, Copy)]
struct Boundary {
    segment: u64,
    offset: u64,
    seqnum: u64,
}

/// Reads a `dir` log's segment files without opening the log.
#[derive(Debug)]
pub(crate) struct Scanner {
    dir: PathBuf,
    /// The furthest batch boundary seen, to start the next read there.
    last: Mutex<Option<Boundary>>,
}

impl Scanner {
    /// A scanner over the log in `dir`.
    pub(crate) fn new(dir: &Path) -> Scanner {
        Scanner {
            dir: dir.to_path_buf(),
            last: Mutex::new(None),
        }
    }

    /// The first readable seqnum: after the trim point, else the first
    /// segment's first.
    ///
    /// Errors: `Corrupt` (trim file), I/O kinds.
    pub(crate) fn first_seqnum(&self) -> Result<u64> {
        if let Some(through) = layout::trimmed_through(&self.dir)? {
            return Ok(through + 1);
        }
        Ok(layout::segments(&self.dir)?.first().map_or(0, |s| s.first))
    }

    /// The seqnum after the last complete batch.
    ///
    /// Errors: as [`Scanner::read`].
    pub(crate) fn next_seqnum(&self) -> Result<u64> {
        let segments = layout::segments(&self.dir)?;
        let Some(last) = segments.last() else {
            return self.first_seqnum();
        };
        let (_, next) = self.walk(&segments, last.first, None, usize::MAX, false)?;
        Ok(next)
    }

    /// Up to `max` entries with seqnum `>= from` (carrying `tag` when
    /// given), from complete batches only, in seqnum order.
    ///
    /// Errors: `Trimmed` below the first readable seqnum; `Corrupt` for a
    /// damaged header or frame or a seqnum out of order; I/O kinds.
    pub(crate) fn read(
        &self,
        tag: Option<&LogTag>,
        from: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let first = self.first_seqnum()?;
        if from < first {
            return Err(Error::trimmed(from, first));
        }
        let segments = layout::segments(&self.dir)?;
        let (entries, _) = self.walk(&segments, from, tag, max, true)?;
        Ok(entries)
    }

    /// Walks frames from the segment holding `from` until `max` entries are
    /// collected or the written data ends. Returns the entries and the
    /// seqnum after the last complete batch walked.
    fn walk(
        &self,
        segments: &[SegmentFile],
        from: u64,
        tag: Option<&LogTag>,
        max: usize,
        collect: bool,
    ) -> Result<(Vec<LogEntry>, u64)> {
        let Some(start) = segments.iter().rposition(|s| s.first <= from) else {
            return Ok((Vec::new(), segments.first().map_or(from, |s| s.first)));
        };
        let cached = *self
            .last
            .lock()
            .map_err(|_| Error::internal("scanner lock"))?;
        let mut pos = match cached {
            Some(b) if b.segment == segments[start].first && b.seqnum <= from => b,
            _ => Boundary {
                segment: segments[start].first,
                offset: HEADER_LEN as u64,
                seqnum: segments[start].first,
            },
        };
        let mut out = Vec::new();
        let mut index = start;
        'segments: while let Some(seg) = segments.get(index) {
            if seg.first != pos.segment {
                // Moving on to the next segment: it must start where the
                // previous one ended.
                if seg.first != pos.seqnum {
                    return Err(Error::corrupt(format!(
                        "{}: starts at seqnum {} but the previous segment ends at {}",
                        seg.path.display(),
                        seg.first,
                        pos.seqnum
                    )));
                }
                pos = Boundary {
                    segment: seg.first,
                    offset: HEADER_LEN as u64,
                    seqnum: seg.first,
                };
            }
            if pos.offset == HEADER_LEN as u64 {
                let header = read_from(&seg.path, 0)?;
                if header.len() >= HEADER_LEN {
                    let first = layout::decode_header(&header)
                        .map_err(|e| e.context(seg.path.display()))?;
                    if first != seg.first {
                        return Err(Error::corrupt(format!(
                            "{}: the header says it starts at seqnum {first}",
                            seg.path.display()
                        )));
                    }
                }
            }
            let mut attempt = 0;
            let (bytes, at, in_batch) = 'attempt: loop {
                attempt += 1;
                // Offsets below are relative to `base`; `pos` moves on at
                // every batch end.
                let base = pos.offset;
                let bytes = read_from(&seg.path, base)?;
                let mut at = 0usize;
                let mut pending = Vec::new();
                let mut in_batch = false;
                let mut expected = pos.seqnum;
                loop {
                    let rest = bytes.get(at..).unwrap_or_default();
                    if rest.is_empty() {
                        break;
                    }
                    let f = match frame::decode(rest) {
                        Ok(f) => f,
                        // The writer has not finished writing this frame.
                        Err(FrameError::Incomplete { .. }) => break,
                        // A reader can see a write in progress as damaged bytes
                        // (the file grew before all of the data landed): look
                        // again before calling the tail of the log corrupt.
                        Err(_) if index + 1 == segments.len() && attempt < TAIL_RETRIES => {
                            std::thread::sleep(TAIL_RETRY_PAUSE);
                            continue 'attempt;
                        }
                        Err(e) => {
                            return Err(Error::corrupt(format!(
                                "{} at byte {}: {e}",
                                seg.path.display(),
                                base + at as u64
                            )));
                        }
                    };
                    if f.meta.seqnum != expected {
                        return Err(Error::corrupt(format!(
                            "{} at byte {}: seqnum {} where {expected} was expected",
                            seg.path.display(),
                            base + at as u64,
                            f.meta.seqnum
                        )));
                    }
                    expected += 1;
                    at += f.frame_len;
                    in_batch = !f.meta.batch_end;
                    if collect && f.meta.seqnum >= from && tag.is_none_or(|t| f.tags.contains(t)) {
                        pending.push(f.to_entry());
                    }
                    if f.meta.batch_end {
                        if out.len() >= max {
                            break 'segments;
                        }
                        out.append(&mut pending);
                        if out.len() > max {
                            out.truncate(max);
                            break 'segments;
                        }
                        pos = Boundary {
                            segment: seg.first,
                            offset: base + at as u64,
                            seqnum: expected,
                        };
                        if let Ok(mut last) = self.last.lock()
                            && last.is_none_or(|b| b.seqnum <= pos.seqnum)
                        {
                            *last = Some(pos);
                        }
                    }
                }
                break (bytes, at, in_batch);
            };
            let unfinished = in_batch || at < bytes.len();
            if index + 1 == segments.len() {
                // The end of the log, or a batch still being written.
                break;
            }
            if unfinished {
                return Err(Error::corrupt(format!(
                    "{}: ends inside a frame or batch, but a later segment exists",
                    seg.path.display()
                )));
            }
            index += 1;
        }
        Ok((out, pos.seqnum))
    }
}

/// The bytes of `path` from `offset` to its current end.
fn read_from(path: &Path, offset: u64) -> Result<Vec<u8>> {
    let mut file =
        std::fs::File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| Error::io(format!("seek {}", path.display()), e))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf)
        .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    Ok(buf)
}
