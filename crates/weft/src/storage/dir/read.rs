//! The read path both handles of a log directory share — the writer
//! ([`DirStorage`](super::DirStorage)) and a follower
//! ([`DirFollower`](super::DirFollower)): what is visible, and turning
//! seqnums into entries.
//!
//! Nothing here grows with the log. Which seqnums carry a tag, which
//! seqnum holds a version, and where an entry's frame starts all come from
//! the persistent log index ([`crate::index`]); an entry is read by
//! walking frames from the nearest locator ([`super::walk`]), at most a
//! few dozen frames. Recently committed entries — what subscriptions and
//! tails ask for — are kept in a ring within the memory budget
//! ([`super::recent`]) and served without touching the disk. Segment files
//! are opened on demand, a bounded number at a time.
//!
//! The state and the commit feed are one shared
//! [`Visible`](crate::storage::kit::Visible): the writer records a group
//! in the index, makes it readable and announces it in one step; a
//! follower's tailing thread announces what its polls made readable.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLockReadGuard, RwLockWriteGuard};

use super::recent::Recent;
use super::segment::{HEADER_LEN, Segment, UNSCANNED};
use super::walk::{LOCATOR_ENTRIES, Locator, Position, Walker};
use crate::error::{Error, ErrorKind, Result};
use crate::format::dir_segment::SegmentHeader;
use crate::index::Index;
use crate::model::{LogEntry, LogTag};
use crate::storage::kit::CommittedBatch;
use crate::storage::kit::Visible;
use crate::storage::{CommitFeed, StreamInfo, Tip};

/// What readers see: only entries of whole batches (the writer's: synced,
/// or, relaxed, written; a follower's: written).
#[derive(Debug)]
pub(super) struct ReadState {
    /// The first live seqnum.
    pub(super) first: u64,
    /// The seqnum after the last visible entry.
    pub(super) next: u64,
    /// Live segments by first seqnum.
    pub(super) segments: BTreeMap<u64, Segment>,
    /// The last committed entries, within their budget.
    pub(super) recent: Recent,
}

impl ReadState {
    /// The state of a surveyed directory whose entries `first..next` are
    /// visible.
    pub(super) fn new(
        first: u64,
        next: u64,
        segments: Vec<Segment>,
        recent_bytes: usize,
    ) -> ReadState {
        ReadState {
            first,
            next,
            segments: segments.into_iter().map(|s| (s.first, s)).collect(),
            recent: Recent::new(recent_bytes),
        }
    }

    /// The segment holding the visible entry `seqnum`.
    fn segment_of(&self, seqnum: u64) -> Option<&Segment> {
        self.segments
            .range((Bound::Unbounded, Bound::Included(seqnum)))
            .next_back()
            .map(|(_, seg)| seg)
            .filter(|seg| seqnum < seg.next)
    }

    /// Drops what a trim through `through` removed: returns the segments
    /// wholly below it (never the last one), which the caller deletes.
    pub(super) fn trim(&mut self, through: u64) -> Vec<Segment> {
        self.first = self.first.max(through.saturating_add(1)).min(self.next);
        self.recent.trim_before(self.first);
        let firsts: Vec<u64> = self.segments.keys().copied().collect();
        let n = firsts
            .windows(2)
            .take_while(|w| w[1] <= through.saturating_add(1))
            .count();
        firsts[..n]
            .iter()
            .filter_map(|f| self.segments.remove(f))
            .collect()
    }
}

/// Segment files open for reading: at most this many at once.
const OPEN_FILES: usize = 64;

/// Open segment files by first seqnum, with their lengths when opened.
#[derive(Debug, Default)]
struct Files {
    open: Mutex<HashMap<u64, (Arc<File>, u64)>>,
}

impl Files {
    /// The file of `seg` and the end of its whole batches.
    fn get(&self, seg: &Segment) -> Result<(Arc<File>, u64)> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let (file, len) = match open.get(&seg.first) {
            Some((file, len)) => (Arc::clone(file), *len),
            None => {
                let file = File::open(&seg.path)
                    .map_err(|e| Error::io(format!("open segment {}", seg.path.display()), e))?;
                let len = file
                    .metadata()
                    .map_err(|e| Error::io(format!("stat {}", seg.path.display()), e))?
                    .len();
                check_header(&file, seg)?;
                if open.len() >= OPEN_FILES {
                    open.clear();
                }
                let file = Arc::new(file);
                open.insert(seg.first, (Arc::clone(&file), len));
                (file, len)
            }
        };
        let end = if seg.end == UNSCANNED { len } else { seg.end };
        Ok((file, end))
    }

    /// Forgets the segments `firsts` (removed by a trim).
    fn forget(&self, firsts: impl IntoIterator<Item = u64>) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        for f in firsts {
            open.remove(&f);
        }
    }
}

/// `Corrupt` unless `file` starts with a valid header naming `seg` (a
/// sealed segment's header is not read on open: it is checked here, once
/// per opening of the file).
fn check_header(file: &File, seg: &Segment) -> Result<()> {
    let corrupt = |why: String| Error::corrupt(format!("{}: {why}", seg.path.display()));
    let mut head = [0u8; HEADER_LEN as usize];
    file.read_exact_at(&mut head, 0).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            corrupt("the file is shorter than a segment header".into())
        } else {
            Error::io(format!("read {}", seg.path.display()), e)
        }
    })?;
    let header = SegmentHeader::decode(&head).map_err(|e| corrupt(e.message().to_owned()))?;
    if header.first_seqnum != seg.first {
        return Err(corrupt(format!(
            "header says the segment starts at {}, its name says {}",
            header.first_seqnum, seg.first
        )));
    }
    Ok(())
}

/// A directory removed once the last handle that uses it is gone (a
/// follower's private index).
#[derive(Debug)]
pub(super) struct TempDir(pub(super) PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.0.display(), error = %e, "could not remove a temporary log index");
        }
    }
}

#[derive(Debug)]
struct Inner {
    visible: Visible<ReadState>,
    index: Arc<Index>,
    files: Files,
    /// Declared after `index`, so the index closes before its directory
    /// goes.
    _temp: Option<TempDir>,
}

/// The visible state behind a lock (read by many, changed by one thread)
/// with its commit feed and the log index. Cheap to clone.
#[derive(Debug, Clone)]
pub(super) struct Shelf(Arc<Inner>);

impl Shelf {
    /// `state`, announced on a feed that starts at its next seqnum, read
    /// through `index` (in `temp`, removed with the last clone, if given).
    pub(super) fn new(state: ReadState, index: Arc<Index>, temp: Option<TempDir>) -> Shelf {
        let next = state.next;
        Shelf(Arc::new(Inner {
            visible: Visible::new(state, next),
            index,
            files: Files::default(),
            _temp: temp,
        }))
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, ReadState> {
        self.0.visible.read()
    }

    /// Changes the state without announcing (trims, a follower's polls).
    pub(super) fn write(&self) -> RwLockWriteGuard<'_, ReadState> {
        self.0.visible.write()
    }

    /// The log index reads go through.
    pub(super) fn index(&self) -> &Arc<Index> {
        &self.0.index
    }

    /// Makes a committed group readable with `add` and announces it, in
    /// one step (see [`Visible::publish`]).
    ///
    /// Errors: `add`'s.
    pub(super) fn publish(
        &self,
        batch: Vec<LogEntry>,
        add: impl FnOnce(&mut ReadState, &CommittedBatch) -> Result<()>,
    ) -> Result<()> {
        self.0.visible.publish_shared(batch.into(), add)
    }

    /// The commit feed.
    pub(super) fn feed(&self) -> &CommitFeed {
        self.0.visible.feed()
    }

    /// Forgets open files of segments a trim removed.
    pub(super) fn forget_segments(&self, firsts: impl IntoIterator<Item = u64>) {
        self.0.files.forget(firsts);
    }

    /// The live range.
    pub(super) fn tip(&self) -> Tip {
        let state = self.read();
        Tip {
            first: state.first,
            next: state.next,
        }
    }

    /// The latest version of `tag` as a primary tag, trimmed entries
    /// included. (Under the read lock: the writer records a group in the
    /// index under the write lock, so this never counts an entry readers
    /// cannot see yet.)
    ///
    /// Errors: the index's (`Corrupt`, I/O kinds).
    pub(super) fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        let _state = self.read();
        Ok(self.0.index.next_version(tag)?.checked_sub(1))
    }

    /// See [`Storage::streams`](crate::Storage::streams): from the log
    /// index, on a blocking thread. Not under the read lock (a page may
    /// read many index rows, and the writer takes the write lock to
    /// publish): it may count a group the writer is publishing.
    ///
    /// Errors: the index's (`Corrupt`, I/O kinds).
    pub(super) async fn streams(
        &self,
        from: Option<&LogTag>,
        max: usize,
    ) -> Result<Vec<StreamInfo>> {
        let from = from.cloned();
        self.blocking(move |shelf| shelf.0.index.streams(from.as_ref(), max))
            .await
    }

    /// Runs `f` on a blocking thread.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Shelf) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let shelf = self.clone();
        tokio::task::spawn_blocking(move || f(&shelf))
            .await
            .map_err(|e| Error::internal(format!("read task failed: {e}")))?
    }

    /// Up to `max` entries with seqnum `>= from` (carrying `tag`).
    ///
    /// Errors: `Trimmed` below the first live seqnum; `Corrupt` for bytes
    /// that no longer decode or a damaged index; I/O kinds.
    pub(super) async fn entries(
        &self,
        tag: Option<&LogTag>,
        from: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let Tip { first, next } = self.tip();
        if from < first {
            return Err(Error::trimmed(from, first));
        }
        if from >= next || max == 0 {
            return Ok(Vec::new());
        }
        if let Some(hot) = self.recent_entries(tag, from, max)? {
            return Ok(hot);
        }
        let tag = tag.cloned();
        self.blocking(move |shelf| {
            let seqnums = shelf.0.index.seqnums(tag.as_ref(), from, max)?;
            let entries = shelf.fetch_visible(seqnums)?;
            // A trim that overtook the lookup: the index skipped to its
            // new first entry.
            let first = shelf.read().first;
            if from < first {
                return Err(Error::trimmed(from, first));
            }
            Ok(entries)
        })
        .await
    }

    /// [`Self::entries`] without touching the disk, when the index's
    /// in-memory tail and the ring of recent entries hold the answer.
    fn recent_entries(
        &self,
        tag: Option<&LogTag>,
        from: u64,
        max: usize,
    ) -> Result<Option<Vec<LogEntry>>> {
        let index = &self.0.index;
        if from < index.covered() {
            return Ok(None);
        }
        let state = self.read();
        let seqnums = index.seqnums(tag, from, max)?;
        let mut out = Vec::with_capacity(seqnums.len());
        for s in seqnums.into_iter().take_while(|&s| s < state.next) {
            match state.recent.get(s) {
                Some(e) => out.push(e.clone()),
                None => return Ok(None),
            }
        }
        Ok(Some(out))
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
        if max == 0 {
            return Ok(Vec::new());
        }
        let tag = tag.clone();
        self.blocking(move |shelf| {
            let seqnums = shelf.0.index.version_seqnums(&tag, from_version, max)?;
            shelf.fetch_visible(seqnums)
        })
        .await
    }

    /// The last entry with seqnum `< before` (carrying `tag`).
    ///
    /// Errors: as [`Self::entries`].
    pub(super) async fn prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        let next = self.tip().next;
        let tag = tag.cloned();
        self.blocking(move |shelf| {
            let Some(seqnum) = shelf.0.index.prev(tag.as_ref(), before.min(next))? else {
                return Ok(None);
            };
            Ok(shelf.fetch_visible(vec![seqnum])?.pop())
        })
        .await
    }

    /// Reads the entries `seqnums` (ascending) that are visible.
    fn fetch_visible(&self, mut seqnums: Vec<u64>) -> Result<Vec<LogEntry>> {
        let next = self.read().next;
        seqnums.retain(|&s| s < next);
        self.fetch_blocking(&seqnums)
    }

    /// Reads the entries `seqnums` (ascending, all visible), on the calling
    /// thread: from the ring of recent entries, else by walking frames from
    /// the nearest locator.
    ///
    /// Errors: `Trimmed` when a trim removed one meanwhile; `Corrupt` for
    /// damaged frames, or a locator that does not lead to its entry; I/O
    /// kinds.
    pub(super) fn fetch_blocking(&self, seqnums: &[u64]) -> Result<Vec<LogEntry>> {
        if seqnums.is_empty() {
            return Ok(Vec::new());
        }
        // Under the lock: what the ring holds, and where the rest lives.
        let mut out: Vec<Option<LogEntry>> = Vec::with_capacity(seqnums.len());
        let mut misses: Vec<(usize, u64, Segment)> = Vec::new();
        {
            let state = self.read();
            for &s in seqnums {
                if let Some(e) = state.recent.get(s) {
                    out.push(Some(e.clone()));
                    continue;
                }
                let seg = match state.segment_of(s) {
                    Some(seg) => seg.clone(),
                    None if s < state.first => return Err(Error::trimmed(s, state.first)),
                    None => {
                        return Err(Error::internal(format!(
                            "no segment holds visible entry {s}"
                        )));
                    }
                };
                misses.push((out.len(), s, seg));
                out.push(None);
            }
        }
        let mut walk: Option<(u64, Walker, Position)> = None;
        for (slot, s, seg) in misses {
            let entry = self
                .read_one(&mut walk, s, &seg)
                .map_err(|e| self.trimmed_instead(e, s))?;
            out[slot] = Some(entry);
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// `Trimmed` when a trim removed `seqnum` while it was being read (its
    /// segment gone), else `err`.
    fn trimmed_instead(&self, err: Error, seqnum: u64) -> Error {
        let first = self.read().first;
        if seqnum < first && err.kind() == ErrorKind::NotFound {
            Error::trimmed(seqnum, first)
        } else {
            err
        }
    }

    /// Reads entry `s` of `seg`, going on from the walk in progress when it
    /// is in the same segment a little before `s`.
    fn read_one(
        &self,
        walk: &mut Option<(u64, Walker, Position)>,
        s: u64,
        seg: &Segment,
    ) -> Result<LogEntry> {
        let near = walk.as_ref().is_some_and(|(first, _, pos)| {
            *first == seg.first && pos.seqnum <= s && s - pos.seqnum <= LOCATOR_ENTRIES
        });
        if !near {
            let (at, bytes) = self.0.index.locate(s)?.ok_or_else(|| {
                Error::corrupt(format!("the log index has no locator for entry {s}"))
            })?;
            let loc = Locator::decode(&bytes)?;
            if loc.segment != seg.first {
                return Err(Error::corrupt(format!(
                    "the log index places entry {at} in segment {}, but entry {s} is in {}",
                    loc.segment, seg.first
                )));
            }
            let (file, end) = self.0.files.get(seg)?;
            let pos = Position {
                offset: u64::from(loc.offset),
                seqnum: at,
            };
            *walk = Some((seg.first, Walker::new(file, seg.path.clone(), end), pos));
        }
        let Some((_, walker, pos)) = walk.as_mut() else {
            return Err(Error::internal("no walk after placing one"));
        };
        let at = walker.skip_to(*pos, s)?;
        let (entry, after, _) = walker.read(at)?;
        *pos = after;
        Ok(entry)
    }
}
