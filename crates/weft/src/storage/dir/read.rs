//! The read path both handles of a log directory share — the writer
//! ([`DirStorage`](super::DirStorage)) and a follower
//! ([`DirFollower`](super::DirFollower)): what is visible (index, segment
//! offsets), and turning seqnums into entries with positioned reads.
//!
//! The tag and version indexes and the byte offset of every entry are kept
//! in memory, so a read at any seqnum or version is one `pread` (on a
//! blocking thread) per run of adjacent entries.
//!
//! The state and the commit feed are one shared
//! [`Visible`](crate::storage::core::Visible): the writer makes a group
//! readable and announces it in one step; a follower's tailing thread
//! announces what its polls made readable.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;

use super::segment::Segment;
use crate::error::{Error, Result};
use crate::format::frame;
use crate::model::{LogEntry, LogTag};
use crate::storage::core::Visible;
use crate::storage::index::LogIndex;
use crate::storage::{CommitFeed, Tip};

/// What readers see: only entries of whole batches (the writer's: synced,
/// or, relaxed, written; a follower's: written).
#[derive(Debug)]
pub(super) struct ReadState {
    pub(super) index: LogIndex,
    /// Next version of the primary tags the index has no stream for: those
    /// whose every entry was trimmed before this handle opened.
    pub(super) gone_versions: HashMap<LogTag, u64>,
    /// Live segments by first seqnum.
    pub(super) segments: BTreeMap<u64, Segment>,
}

impl ReadState {
    /// The visible state of a surveyed directory: `versions` holds the next
    /// version of every primary tag ever written.
    pub(super) fn new(
        index: LogIndex,
        versions: HashMap<LogTag, u64>,
        segments: Vec<Segment>,
    ) -> ReadState {
        ReadState {
            gone_versions: versions
                .into_iter()
                .filter(|(tag, _)| index.next_version_at(tag, 0).is_none())
                .collect(),
            index,
            segments: segments.into_iter().map(|s| (s.first, s)).collect(),
        }
    }

    /// The latest version of `tag` as a primary tag.
    pub(super) fn latest_version(&self, tag: &LogTag) -> Option<u64> {
        self.index
            .latest_version(tag)
            .or_else(|| self.gone_versions.get(tag).and_then(|v| v.checked_sub(1)))
    }
}

/// The visible state behind a lock (read by many, changed by one thread)
/// with its commit feed.
#[derive(Debug)]
pub(super) struct Shelf(Visible<ReadState>);

impl Shelf {
    /// `state`, announced on a feed that starts at its next seqnum.
    pub(super) fn new(state: ReadState) -> Shelf {
        let next = state.index.next();
        Shelf(Visible::new(state, next))
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, ReadState> {
        self.0.read()
    }

    /// Changes the state without announcing (trims, a follower's polls).
    pub(super) fn write(&self) -> RwLockWriteGuard<'_, ReadState> {
        self.0.write()
    }

    /// Makes a committed group readable with `add` and announces it, in
    /// one step (see [`Visible::publish`]).
    ///
    /// Errors: `add`'s.
    pub(super) fn publish(
        &self,
        batch: Vec<LogEntry>,
        add: impl FnOnce(&mut ReadState, &[LogEntry]) -> Result<()>,
    ) -> Result<()> {
        self.0.publish(batch, add)
    }

    /// The commit feed.
    pub(super) fn feed(&self) -> &CommitFeed {
        self.0.feed()
    }

    /// The live range.
    pub(super) fn tip(&self) -> Tip {
        let state = self.read();
        Tip {
            first: state.index.first(),
            next: state.index.next(),
        }
    }

    /// Up to `max` entries with seqnum `>= from` (carrying `tag`).
    ///
    /// Errors: `Trimmed` below the first live seqnum; `Corrupt` for bytes
    /// that no longer decode; I/O kinds.
    pub(super) async fn entries(
        &self,
        tag: Option<&LogTag>,
        from: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let seqnums = self.read().index.seqnums(tag, from, max)?;
        self.fetch(seqnums).await
    }

    /// Up to `max` entries of `tag`'s stream from version `from_version`.
    ///
    /// Errors: `Trimmed` when that version was trimmed; as [`Self::entries`].
    pub(super) async fn versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let seqnums = {
            let state = self.read();
            let seqnums = state.index.version_seqnums(tag, from_version, max)?;
            // A stream trimmed away entirely before this handle opened is
            // unknown to the index, but its versions are still trimmed.
            if seqnums.is_empty()
                && state.index.next_version_at(tag, 0).is_none()
                && let Some(&next) = state.gone_versions.get(tag)
                && from_version < next
            {
                // No live entry: the first readable version is the next one.
                return Err(Error::trimmed_version(tag, from_version, next));
            }
            seqnums
        };
        self.fetch(seqnums).await
    }

    /// The last entry with seqnum `< before` (carrying `tag`).
    ///
    /// Errors: as [`Self::entries`].
    pub(super) async fn prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        let Some(seqnum) = self.read().index.prev(tag, before) else {
            return Ok(None);
        };
        Ok(self.fetch(vec![seqnum]).await?.pop())
    }

    /// Reads the entries `seqnums` (ascending, all visible).
    pub(super) async fn fetch(&self, seqnums: Vec<u64>) -> Result<Vec<LogEntry>> {
        if seqnums.is_empty() {
            return Ok(Vec::new());
        }
        let spans = plan_reads(&self.read().segments, &seqnums)?;
        tokio::task::spawn_blocking(move || read_spans(spans))
            .await
            .map_err(|e| Error::internal(format!("read task failed: {e}")))?
    }

    /// As [`Self::fetch`], on the calling thread.
    pub(super) fn fetch_blocking(&self, seqnums: &[u64]) -> Result<Vec<LogEntry>> {
        if seqnums.is_empty() {
            return Ok(Vec::new());
        }
        let spans = plan_reads(&self.read().segments, seqnums)?;
        read_spans(spans)
    }
}

/// Bytes between wanted frames that a read still covers rather than
/// issuing another `pread`.
const READ_GAP: u64 = 16 << 10;

/// One positioned read and the frames wanted from it.
struct Span {
    file: Arc<std::fs::File>,
    path: PathBuf,
    start: u64,
    end: u64,
    /// Seqnum and offset (relative to `start`) of each wanted frame.
    wanted: Vec<(u64, usize)>,
}

fn plan_reads(segments: &BTreeMap<u64, Segment>, seqnums: &[u64]) -> Result<Vec<Span>> {
    let mut spans: Vec<Span> = Vec::new();
    for &s in seqnums {
        let seg = segments
            .range((Bound::Unbounded, Bound::Included(s)))
            .next_back()
            .map(|(_, seg)| seg)
            .filter(|seg| s < seg.next())
            .ok_or_else(|| Error::internal(format!("no segment holds visible entry {s}")))?;
        let (start, end) = seg
            .span(s, s + 1)
            .ok_or_else(|| Error::internal(format!("no offset for entry {s}")))?;
        if let Some(last) = spans.last_mut()
            && Arc::ptr_eq(&last.file, &seg.file)
            && start >= last.end
            && start - last.end <= READ_GAP
        {
            last.wanted.push((s, (start - last.start) as usize));
            last.end = end;
            continue;
        }
        spans.push(Span {
            file: Arc::clone(&seg.file),
            path: seg.path.clone(),
            start,
            end,
            wanted: vec![(s, 0)],
        });
    }
    Ok(spans)
}

fn read_spans(spans: Vec<Span>) -> Result<Vec<LogEntry>> {
    let mut out = Vec::with_capacity(spans.iter().map(|s| s.wanted.len()).sum());
    for span in spans {
        let mut buf = vec![0; (span.end - span.start) as usize];
        span.file
            .read_exact_at(&mut buf, span.start)
            .map_err(|e| Error::io(format!("read {}", span.path.display()), e))?;
        let buf = Bytes::from(buf);
        for (seqnum, at) in span.wanted {
            let frame = buf
                .get(at..)
                .ok_or_else(|| Error::internal("read span shorter than planned"))
                .and_then(|b| frame::decode(b).map_err(Error::from))
                .map_err(|e| e.context(format!("{} entry {seqnum}", span.path.display())))?;
            if frame.meta.seqnum != seqnum {
                return Err(Error::corrupt(format!(
                    "{}: the frame read for entry {seqnum} holds entry {}",
                    span.path.display(),
                    frame.meta.seqnum
                )));
            }
            out.push(LogEntry {
                seqnum,
                stream_version: frame.meta.stream_version,
                data: buf.slice_ref(frame.data),
                tags: frame.tags,
                timestamp_ms: frame.meta.timestamp_ms,
            });
        }
    }
    Ok(out)
}
