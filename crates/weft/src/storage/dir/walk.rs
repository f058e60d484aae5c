//! Reading entries by walking frames from a known position.
//!
//! The backend does not keep every entry's offset in memory: the log
//! index stores a *locator* — segment and offset — for the first entry of
//! every segment and then every [`LOCATOR_ENTRIES`] entries or
//! [`LOCATOR_BYTES`] bytes, whichever comes first ([`Locators`]). To read an entry, the
//! backend starts at the nearest locator at or before it and walks frame
//! by frame (each frame starts with its length) until it reaches it. Only
//! the frames returned are verified in full; a frame passed over must
//! still carry the seqnum the walk expects there, so a wrong locator is
//! found, never silently followed.
//!
//! ## Locator layout (the index's `locators` value)
//!
//! ```text
//!  [segment first seqnum u64][offset u32]     little-endian, 12 bytes
//! ```

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::format::frame::{self, FIXED_LEN};
use crate::index::{EntryTags, IndexEntry};
use crate::model::LogEntry;

/// At most this many entries lie between two locators.
pub(super) const LOCATOR_ENTRIES: u64 = 32;

/// At most about this many bytes lie between two locators (a locator is
/// written for the first entry that starts past it).
pub(super) const LOCATOR_BYTES: u64 = 32 << 10;

/// How much the walk reads at once.
const CHUNK: usize = 64 << 10;

/// Where an entry's frame starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Locator {
    /// The first seqnum of the segment file (its name).
    pub(super) segment: u64,
    /// The frame's byte offset in the file.
    pub(super) offset: u32,
}

impl Locator {
    pub(super) fn encode(&self) -> Bytes {
        let mut v = Vec::with_capacity(12);
        v.extend_from_slice(&self.segment.to_le_bytes());
        v.extend_from_slice(&self.offset.to_le_bytes());
        v.into()
    }

    /// Errors: `Corrupt` unless `bytes` is 12 bytes long.
    pub(super) fn decode(bytes: &[u8]) -> Result<Locator> {
        let b: &[u8; 12] = bytes.try_into().map_err(|_| {
            Error::corrupt(format!("a locator of {} bytes, expected 12", bytes.len()))
        })?;
        let mut seg = [0; 8];
        seg.copy_from_slice(&b[..8]);
        let mut off = [0; 4];
        off.copy_from_slice(&b[8..]);
        Ok(Locator {
            segment: u64::from_le_bytes(seg),
            offset: u32::from_le_bytes(off),
        })
    }
}

/// Decides which entries get a locator, as entries are recorded in order.
#[derive(Debug, Default)]
pub(super) struct Locators {
    /// The last locator placed: its segment, offset and seqnum.
    last: Option<(u64, u64, u64)>,
}

impl Locators {
    /// The index's record of an entry a scan accepted, with a locator if
    /// it needs one (see [`Locators::place`]).
    pub(super) fn index_entry(&mut self, a: &super::scan::Accepted) -> IndexEntry {
        IndexEntry {
            seqnum: a.seqnum,
            tags: EntryTags::from(&*a.tags),
            version: a.version,
            locator: self.place(a.segment, a.offset, a.seqnum),
            check: u64::from(a.crc),
        }
    }

    /// The locator of the entry `seqnum` whose frame starts at `offset` in
    /// segment `segment`, if it needs one: the first entry of a segment
    /// (a walk never crosses segments), the first entry recorded, and
    /// then every [`LOCATOR_ENTRIES`] entries or [`LOCATOR_BYTES`] bytes.
    pub(super) fn place(&mut self, segment: u64, offset: u64, seqnum: u64) -> Option<Bytes> {
        let due = match self.last {
            None => true,
            Some((seg, off, s)) => {
                seg != segment
                    || seqnum < s
                    || offset < off
                    || seqnum - s >= LOCATOR_ENTRIES
                    || offset - off >= LOCATOR_BYTES
            }
        };
        if !due {
            return None;
        }
        self.last = Some((segment, offset, seqnum));
        let offset = u32::try_from(offset).ok()?;
        Some(Locator { segment, offset }.encode())
    }
}

/// Where a walk stands: the frame at `offset` holds `seqnum`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Position {
    pub(super) offset: u64,
    pub(super) seqnum: u64,
}

/// Reads a segment file forward in chunks.
pub(super) struct Walker {
    file: Arc<File>,
    path: PathBuf,
    /// Bytes of the file that hold whole frames.
    end: u64,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    start: u64,
}

impl Walker {
    pub(super) fn new(file: Arc<File>, path: PathBuf, end: u64) -> Self {
        Walker {
            file,
            path,
            end,
            buf: Vec::new(),
            start: 0,
        }
    }

    fn corrupt(&self, why: String) -> Error {
        Error::corrupt(format!("{}: {why}", self.path.display()))
    }

    /// At least `need` bytes from `at` (fewer only at the end of the data).
    fn window(&mut self, at: u64, need: usize) -> Result<&[u8]> {
        let have_end = self.start + self.buf.len() as u64;
        let want_end = at.saturating_add(need as u64).min(self.end);
        if at < self.start || want_end > have_end {
            let len = (self.end.saturating_sub(at) as usize).min(need.max(CHUNK));
            self.buf.resize(len, 0);
            self.file.read_exact_at(&mut self.buf, at).map_err(|e| {
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    self.corrupt(format!(
                        "the file ends before byte {}, where its entries go on",
                        at + len as u64
                    ))
                } else {
                    Error::io(format!("read {}", self.path.display()), e)
                }
            })?;
            self.start = at;
        }
        Ok(self.buf.get((at - self.start) as usize..).unwrap_or(&[]))
    }

    /// Moves from `pos` to the frame of `seqnum` (`>= pos.seqnum`), checking
    /// the seqnum each frame passed over claims.
    pub(super) fn skip_to(&mut self, mut pos: Position, seqnum: u64) -> Result<Position> {
        while pos.seqnum < seqnum {
            if pos.offset >= self.end {
                return Err(self.corrupt(format!(
                    "entry {seqnum} lies past the end of the segment's data"
                )));
            }
            let head = self.window(pos.offset, FIXED_LEN)?;
            let (Some(len), Some((claimed, _))) =
                (frame::claimed_len(head), frame::claimed_position(head))
            else {
                return Err(self.corrupt(format!("a frame at byte {} is cut short", pos.offset)));
            };
            if claimed != pos.seqnum || len < FIXED_LEN {
                return Err(self.corrupt(format!(
                    "the frame at byte {} claims entry {claimed}, the walk expected {}",
                    pos.offset, pos.seqnum
                )));
            }
            pos = Position {
                offset: pos.offset + len as u64,
                seqnum: pos.seqnum + 1,
            };
        }
        Ok(pos)
    }

    /// Reads and verifies the frame at `pos`; returns the entry and the
    /// position after it.
    pub(super) fn read(&mut self, pos: Position) -> Result<(LogEntry, Position, u32)> {
        self.read_with_id(pos)
            .map(|(entry, _, next, crc)| (entry, next, crc))
    }

    /// [`read`](Walker::read), with the entry's append id.
    pub(super) fn read_with_id(
        &mut self,
        pos: Position,
    ) -> Result<(LogEntry, Option<Box<str>>, Position, u32)> {
        let head = self.window(pos.offset, FIXED_LEN)?;
        let need = frame::claimed_len(head).unwrap_or(FIXED_LEN);
        let bytes = self.window(pos.offset, need)?;
        let bytes = Bytes::copy_from_slice(bytes.get(..need).unwrap_or(bytes));
        let decoded = frame::decode(&bytes).map_err(|e| {
            self.corrupt(format!("entry {} at byte {}: {e}", pos.seqnum, pos.offset))
        })?;
        if decoded.meta.seqnum != pos.seqnum {
            return Err(self.corrupt(format!(
                "the frame at byte {} holds entry {}, expected {}",
                pos.offset, decoded.meta.seqnum, pos.seqnum
            )));
        }
        let crc = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        let id = decoded.append_id.map(Box::from);
        let entry = LogEntry {
            seqnum: pos.seqnum,
            stream_version: decoded.meta.stream_version,
            data: bytes.slice_ref(decoded.data),
            tags: decoded.tags,
            timestamp_ms: decoded.meta.timestamp_ms,
            append_id: decoded.append_id.map(String::from),
        };
        let next = Position {
            offset: pos.offset + decoded.frame_len as u64,
            seqnum: pos.seqnum + 1,
        };
        Ok((entry, id, next, crc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LogTag;

    fn entry(seqnum: u64, data: &str) -> LogEntry {
        LogEntry {
            seqnum,
            stream_version: seqnum,
            tags: vec![LogTag::new("t").unwrap()],
            data: Bytes::copy_from_slice(data.as_bytes()),
            timestamp_ms: 1,
            append_id: None,
        }
    }

    #[test]
    fn locators_start_each_segment_and_stay_within_bounds() {
        let mut l = Locators::default();
        assert!(l.place(0, 20, 0).is_some());
        assert!(l.place(0, 120, 1).is_none());
        assert!(l.place(0, 220, LOCATOR_ENTRIES).is_some());
        assert!(
            l.place(0, 220 + LOCATOR_BYTES, LOCATOR_ENTRIES + 1)
                .is_some()
        );
        assert!(
            l.place(40, 20, LOCATOR_ENTRIES + 2).is_some(),
            "a new segment"
        );
    }

    #[test]
    fn walks_to_entries_and_refuses_a_wrong_start() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("seg");
        let mut buf = vec![0u8; 20];
        let mut offsets = Vec::new();
        for s in 5..45 {
            offsets.push(buf.len() as u64);
            frame::encode(&mut buf, &entry(s, &"x".repeat(s as usize * 10)), 0, true).unwrap();
        }
        std::fs::write(&path, &buf).unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        let mut w = Walker::new(file, path, buf.len() as u64);
        let start = Position {
            offset: 20,
            seqnum: 5,
        };
        let at = w.skip_to(start, 30).unwrap();
        assert_eq!(at.offset, offsets[25]);
        let (e, next, _) = w.read(at).unwrap();
        assert_eq!(e, entry(30, &"x".repeat(300)));
        assert_eq!(next.seqnum, 31);
        // A locator naming the wrong entry is found out.
        let wrong = Position {
            offset: offsets[3],
            seqnum: 7,
        };
        assert_eq!(
            w.skip_to(wrong, 10).unwrap_err().kind(),
            crate::ErrorKind::Corrupt
        );
        assert!(w.skip_to(start, 60).is_err());
        let loc = Locator {
            segment: 5,
            offset: 99,
        };
        assert_eq!(Locator::decode(&loc.encode()).unwrap(), loc);
        assert!(Locator::decode(&[1, 2, 3]).is_err());
    }
}
