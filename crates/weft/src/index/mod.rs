//! The persistent log index: what a backend needs to find entries without
//! holding the log in memory or scanning it on open.
//!
//! A log of months is far larger than memory, and most of its streams are
//! idle. The index keeps, in an embedded store on local disk (see
//! [`store`] for which one and why):
//!
//! * per tag, the seqnums that carry it (reads by tag from a seqnum, and
//!   the last entry before a seqnum);
//! * per primary tag, the seqnum of each version (reads by version) and
//!   the stream's next version (what a sequencer checks a conditional
//!   append against: looked up on demand through a bounded cache,
//!   `IndexVersions` in the backends' kit, `storage::kit::index_versions`,
//!   so ten million streams cost disk, not memory);
//! * where entries live, as backend-defined *locators* (a segment file and
//!   offset for `dir`; a segment object and record for a bucket), sparse:
//!   one per run of entries the backend reads together;
//! * exactly-once append ids (a table reserved for them);
//! * how far it covers the log, the trim point and the version floors a
//!   trim leaves, and the identity of the log it describes.
//!
//! ## Derived state
//!
//! The log is the truth; the index is a cache of it. It is never trusted
//! beyond its covered point: on open the backend replays what lies after
//! it ([`Index::covered`]) into the index, and a missing, damaged, foreign
//! (another log's [identity](Index::open)) or inconsistent index is thrown
//! away and rebuilt from the log. The backend also checks the index's
//! [tip](Index::tip) — the check value it recorded for the last covered
//! entry — against the log, which catches an index left over from a log
//! that was since replaced or cut back.
//!
//! ## Tail and flusher
//!
//! [`Index::push`] records entries in an in-memory *tail*, indexed the
//! same ways; a background thread moves the tail into the store in batches
//! (one store transaction per batch, not per append, not synced: losing
//! the last batches to a crash only means replaying them on open). Reads
//! merge the store (below the covered point) with the tail. The tail's
//! memory is bounded ([`IndexOptions::tail_bytes`]): when the flusher falls
//! that far behind, `push` waits for it, which slows the appender rather
//! than growing without bound.

mod heap;
mod inspect;
pub mod store;
mod tail;

pub use inspect::inspect;

/// The index's in-memory maps, keyed by tags and tag ids: they sit on the
/// append path, where std's SipHash showed in profiles. foldhash is seeded
/// per process like std's maps, so their order is no more predictable.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use crate::error::{Error, ErrorKind, Result};
use crate::model::LogTag;

use store::{FlushBatch, Store};
use tail::Tail;

/// Settings of an [`Index`]: plain values, loadable with serde.
///
/// A backend derives them from its own memory budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct IndexOptions {
    /// Memory for the store's page cache. Default 64 MiB.
    pub cache_bytes: usize,
    /// Memory for the in-memory tail; `push` waits for the flusher beyond
    /// it. Default 32 MiB.
    pub tail_bytes: usize,
    /// Memory for the store's write buffers (fjall's memtables, all tables
    /// together). Default 64 MiB.
    pub write_buffer_bytes: usize,
    /// The flusher writes a batch once this many entries wait. Default 8192.
    pub flush_entries: usize,
    /// ... or once the oldest waited this long, in milliseconds. Default 200.
    pub flush_interval_ms: u64,
    /// Every this many batches, one is synced (so a crash replays at most
    /// about this many batches on open). Default 16.
    pub sync_every: u32,
}

setters! {
    IndexOptions {
        with_cache_bytes => cache_bytes: usize,
        with_tail_bytes => tail_bytes: usize,
        with_write_buffer_bytes => write_buffer_bytes: usize,
        with_flush_entries => flush_entries: usize,
        with_flush_interval_ms => flush_interval_ms: u64,
        with_sync_every => sync_every: u32,
    }
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            cache_bytes: 64 << 20,
            tail_bytes: 32 << 20,
            write_buffer_bytes: 64 << 20,
            flush_entries: 8192,
            flush_interval_ms: 200,
            sync_every: 16,
        }
    }
}

impl IndexOptions {
    /// Small caches, for a check that opens an index to read one row per
    /// stream ([`inspect`]).
    pub fn for_inspection() -> IndexOptions {
        IndexOptions {
            cache_bytes: 4 << 20,
            write_buffer_bytes: 4 << 20,
            tail_bytes: 1 << 20,
            ..IndexOptions::default()
        }
    }

    /// Checks the settings.
    ///
    /// Errors: `InvalidInput` naming the first setting out of range.
    pub fn validate(&self) -> Result<()> {
        if self.tail_bytes < 1 << 16 {
            return Err(Error::invalid_input(format!(
                "index tail_bytes {} is below 64 KiB",
                self.tail_bytes
            )));
        }
        if self.write_buffer_bytes < 4 << 20 {
            return Err(Error::invalid_input(format!(
                "index write_buffer_bytes {} is below 4 MiB",
                self.write_buffer_bytes
            )));
        }
        if self.flush_entries == 0 {
            return Err(Error::invalid_input(
                "index flush_entries must be at least 1",
            ));
        }
        if self.flush_interval_ms == 0 || self.flush_interval_ms > 60_000 {
            return Err(Error::invalid_input(format!(
                "index flush_interval_ms {} is outside 1..=60000",
                self.flush_interval_ms
            )));
        }
        if self.sync_every == 0 {
            return Err(Error::invalid_input("index sync_every must be at least 1"));
        }
        Ok(())
    }
}

/// An entry's tags, primary first, as the index records them: a lone
/// tag (most entries have one) is held as it is, without an allocation
/// per entry; more are shared behind one reference count. Reads as a
/// slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryTags(TagsRepr);

#[derive(Clone, Debug, PartialEq, Eq)]
enum TagsRepr {
    One(LogTag),
    Many(Arc<[LogTag]>),
}

impl std::ops::Deref for EntryTags {
    type Target = [LogTag];

    fn deref(&self) -> &[LogTag] {
        match &self.0 {
            TagsRepr::One(tag) => std::slice::from_ref(tag),
            TagsRepr::Many(tags) => tags,
        }
    }
}

impl From<&[LogTag]> for EntryTags {
    fn from(tags: &[LogTag]) -> Self {
        match tags {
            [tag] => EntryTags(TagsRepr::One(tag.clone())),
            _ => EntryTags(TagsRepr::Many(Arc::from(tags))),
        }
    }
}

impl From<Vec<LogTag>> for EntryTags {
    fn from(mut tags: Vec<LogTag>) -> Self {
        if tags.len() == 1
            && let Some(tag) = tags.pop()
        {
            return EntryTags(TagsRepr::One(tag));
        }
        EntryTags(TagsRepr::Many(Arc::from(tags)))
    }
}

impl FromIterator<LogTag> for EntryTags {
    fn from_iter<I: IntoIterator<Item = LogTag>>(tags: I) -> Self {
        tags.into_iter().collect::<Vec<_>>().into()
    }
}

/// One entry as the index records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Its seqnum.
    pub seqnum: u64,
    /// Its tags, primary first (shared: the index keeps them in its tail
    /// without copying the strings).
    pub tags: EntryTags,
    /// Its version in its primary tag's stream.
    pub version: u64,
    /// Where the backend reads it (and the entries after it, up to the
    /// next locator) from; `None` for an entry the backend finds from an
    /// earlier locator.
    pub locator: Option<Bytes>,
    /// A check value of the entry the backend can recompute from the log
    /// (for `dir`, its frame checksum); see [`Index::tip`].
    pub check: u64,
}

/// Why [`Index::open`] started from an empty index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fresh {
    /// There was no index.
    Missing,
    /// The index could not be read (damaged, or of an unknown format).
    Damaged(String),
    /// The index describes another log.
    OtherLog,
    /// The backend found it inconsistent with the log ([`Index::reset`]).
    Reset(String),
}

struct State {
    tail: Tail,
    /// The first live seqnum.
    first: u64,
}

struct Inner {
    /// `None` only while [`Index::reset`] replaces it.
    store: RwLock<Option<Store>>,
    dir: std::path::PathBuf,
    identity: Vec<u8>,
    state: RwLock<State>,
    /// Signalled when the tail shrinks or the flusher stops.
    drained: Condvar,
    drained_lock: Mutex<()>,
    /// Signalled when the flusher has work.
    work: Condvar,
    work_lock: Mutex<bool>,
    stop: AtomicBool,
    /// Set once a read found the store damaged.
    damaged: AtomicBool,
    /// Opened by [`Index::open_if_sound`] to be looked at: damage a read
    /// finds is reported, not marked (the marker is the owner's business).
    inspecting: bool,
    options: IndexOptions,
    /// Why the last flush failed (the flusher retries).
    failure: Mutex<Option<(ErrorKind, String)>>,
}

/// The persistent index of one log.
///
/// Cheap to share (`Arc` inside); every method takes `&self`. Reads may
/// block briefly on disk: call them from a blocking context or accept a
/// short stall of an async task (they read a few store pages).
pub struct Index {
    inner: Arc<Inner>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    fresh: Option<Fresh>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("path", &self.inner.dir)
            .field("covered", &self.covered())
            .finish()
    }
}

impl Index {
    /// Opens the index in directory `dir` (created if absent) for the log
    /// whose identity is `identity`.
    ///
    /// An index that is missing, cannot be read, or belongs to another log
    /// is replaced by an empty one ([`Index::fresh`] says which); the
    /// caller then replays its log from [`Index::covered`] on.
    ///
    /// Errors: `InvalidInput` for bad options; I/O kinds when the
    /// directory cannot be used at all.
    pub fn open(dir: &std::path::Path, identity: &[u8], options: IndexOptions) -> Result<Index> {
        options.validate()?;
        let (store, fresh) = Store::open_or_create(dir, identity, &options)?;
        Index::over(store, fresh, dir, identity, options, false)
    }

    /// Opens the index in `dir` only if it is there and sound for the log
    /// `identity`, changing nothing on disk otherwise (`None`: the index is
    /// missing, or one [`Index::open`] would start afresh). For a check
    /// that compares the index with its log without rebuilding it: a
    /// damaged row a read meets is returned as `Corrupt` but not marked,
    /// so the owner's next open still judges the index itself.
    ///
    /// Errors: `Locked` when another handle has it open; `InvalidInput`
    /// for bad options; I/O kinds.
    pub(super) fn open_if_sound(
        dir: &std::path::Path,
        identity: &[u8],
        options: IndexOptions,
    ) -> Result<Option<Index>> {
        options.validate()?;
        match Store::open_if_sound(dir, identity, &options)? {
            Some(store) => Index::over(store, None, dir, identity, options, true).map(Some),
            None => Ok(None),
        }
    }

    fn over(
        store: Store,
        fresh: Option<Fresh>,
        dir: &std::path::Path,
        identity: &[u8],
        options: IndexOptions,
        inspecting: bool,
    ) -> Result<Index> {
        let meta = store.meta()?;
        let inner = Arc::new(Inner {
            state: RwLock::new(State {
                tail: Tail::starting_at(meta.covered),
                first: meta.first,
            }),
            store: RwLock::new(Some(store)),
            dir: dir.to_path_buf(),
            identity: identity.to_vec(),
            drained: Condvar::new(),
            drained_lock: Mutex::new(()),
            work: Condvar::new(),
            work_lock: Mutex::new(false),
            stop: AtomicBool::new(false),
            damaged: AtomicBool::new(false),
            inspecting,
            options,
            failure: Mutex::new(None),
        });
        let flusher = {
            let inner = Arc::clone(&inner);
            std::thread::Builder::new()
                .name("weft-index-flush".into())
                .spawn(move || flush_loop(&inner))
                .map_err(|e| Error::io("start the index flusher", e))?
        };
        debug!(dir = %dir.display(), covered = meta.covered, ?fresh, "opened log index");
        Ok(Index {
            inner,
            flusher: Mutex::new(Some(flusher)),
            fresh,
        })
    }

    /// Why the index started empty on open, if it did.
    pub fn fresh(&self) -> Option<&Fresh> {
        self.fresh.as_ref()
    }

    fn read_state(&self) -> RwLockReadGuard<'_, State> {
        self.inner.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_state(&self) -> RwLockWriteGuard<'_, State> {
        self.inner.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Every entry below this seqnum is in the store; the caller replays
    /// its log from here on open.
    pub fn covered(&self) -> u64 {
        self.read_state().tail.start()
    }

    /// The seqnum after the last entry recorded (in the store or the tail).
    pub fn next(&self) -> u64 {
        self.read_state().tail.end()
    }

    /// The first live seqnum (the trim point plus one).
    pub fn first(&self) -> u64 {
        self.read_state().first
    }

    /// The seqnum and check value of the last entry the store covers, as
    /// recorded by [`push`](Index::push); `None` while it covers nothing.
    ///
    /// Errors: `Corrupt` when the store's record is damaged.
    pub fn tip(&self) -> Result<Option<(u64, u64)>> {
        self.read(|s| s.meta()).map(|m| m.tip)
    }

    /// Throws the index away and starts an empty one whose log begins at
    /// `first`, with the version `floors` a trim left (each tag's next
    /// version as of `first`). The caller replays its log from `first`.
    ///
    /// Errors: I/O kinds.
    pub fn reset(&mut self, first: u64, floors: &[(LogTag, u64)], why: &str) -> Result<()> {
        self.start_over(first, floors, why)?;
        self.fresh = Some(Fresh::Reset(why.to_owned()));
        Ok(())
    }

    /// As [`reset`](Index::reset), through a shared handle (readers that
    /// hold it meanwhile see an index that covers nothing yet); what
    /// [`fresh`](Index::fresh) says is left as it was on open.
    ///
    /// Errors: I/O kinds.
    pub fn start_over(&self, first: u64, floors: &[(LogTag, u64)], why: &str) -> Result<()> {
        warn!(reason = why, first, "rebuilding the log index");
        self.replace(first, floors)
    }

    /// As [`start_over`](Index::start_over) for an index that covers
    /// nothing yet (a fresh one) on a log that starts at `first`: an
    /// expected state, not a rebuild, so nothing is logged above debug.
    ///
    /// Errors: I/O kinds.
    pub fn start_at(&self, first: u64, floors: &[(LogTag, u64)]) -> Result<()> {
        debug!(first, "the empty log index starts where the log does");
        self.replace(first, floors)
    }

    /// An empty store in place of the current one, starting at `first`.
    fn replace(&self, first: u64, floors: &[(LogTag, u64)]) -> Result<()> {
        self.stop_flusher();
        let mut state = self.write_state();
        {
            // A new store in place of the old, whatever state that is in
            // (a store that met damage may refuse every write): the old
            // one is closed before its files are removed.
            let mut slot = self.inner.store.write().unwrap_or_else(|p| p.into_inner());
            drop(slot.take());
            *slot = Some(Store::recreate(
                &self.inner.dir,
                &self.inner.identity,
                &self.inner.options,
                first,
                floors,
            )?);
        }
        state.tail = Tail::starting_at(first);
        state.first = first;
        drop(state);
        self.inner.damaged.store(false, Ordering::Release);
        *self.inner.failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.inner.stop.store(false, Ordering::Release);
        let inner = Arc::clone(&self.inner);
        let handle = std::thread::Builder::new()
            .name("weft-index-flush".into())
            .spawn(move || flush_loop(&inner))
            .map_err(|e| Error::io("start the index flusher", e))?;
        *self.flusher.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        Ok(())
    }

    /// Records entries that continue the log (the first must be
    /// [`next`](Index::next)). Waits while the tail is over its budget.
    ///
    /// Errors: `Corrupt` for an entry out of order; `Closed` once the
    /// index was closed.
    pub fn push(&self, entries: &[IndexEntry]) -> Result<()> {
        self.wait_for_room()?;
        let mut state = self.write_state();
        for entry in entries {
            state.tail.push(entry)?;
        }
        if state.tail.len() >= self.inner.options.flush_entries {
            drop(state);
            self.wake_flusher();
        }
        Ok(())
    }

    /// Waits until the tail has room for more entries (what
    /// [`push`](Index::push) does first), so a caller can wait outside
    /// its own locks and then push under them without waiting.
    ///
    /// Errors: `Closed` once the index was closed.
    pub fn reserve(&self) -> Result<()> {
        self.wait_for_room()
    }

    fn wait_for_room(&self) -> Result<()> {
        let limit = self.inner.options.tail_bytes;
        let mut guard = self
            .inner
            .drained_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        loop {
            if self.inner.stop.load(Ordering::Acquire) {
                return Err(Error::closed("the log index is closed"));
            }
            if self.read_state().tail.bytes() < limit {
                return Ok(());
            }
            self.wake_flusher();
            guard = self
                .inner
                .drained
                .wait_timeout(guard, Duration::from_millis(50))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    fn wake_flusher(&self) {
        wake(&self.inner);
    }

    /// Records a trim: entries below `first` are gone, and `floors` gives
    /// the next version of each primary tag as of `first` (only tags whose
    /// floor is not implied by the index's own rows need to be listed).
    ///
    /// Errors: I/O kinds.
    pub fn trim(&self, first: u64, floors: &[(LogTag, u64)]) -> Result<()> {
        let mut state = self.write_state();
        if first <= state.first {
            return Ok(());
        }
        with_store(&self.inner, |s| s.trim(first, floors))?;
        state.first = first;
        Ok(())
    }

    /// Up to `max` seqnums `>= from` (and `>=` [`first`](Index::first)),
    /// carrying `tag` when given, in order.
    ///
    /// Errors: `Corrupt` for a damaged store; I/O kinds.
    pub fn seqnums(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<u64>> {
        let (covered, first, tail) = {
            let state = self.read_state();
            let from = from.max(state.first);
            (
                state.tail.start(),
                state.first,
                state.tail.seqnums(tag, from, max),
            )
        };
        let from = from.max(first);
        if from >= covered {
            return Ok(tail);
        }
        let mut out = match tag {
            None => (from..covered).take(max).collect(),
            Some(tag) => match self.read(|s| s.tag_row(tag))? {
                None => Vec::new(),
                Some(row) => self.read(|s| s.postings(row.id, from, covered, max))?,
            },
        };
        let room = max - out.len();
        out.extend(tail.into_iter().take(room));
        Ok(out)
    }

    /// `Trimmed` for a read of `tag`'s versions from `requested`, naming
    /// its first live version: the first from `lo` on whose entry is at or
    /// after `first` (a binary search, a few point reads).
    fn trimmed_from(&self, tag: &LogTag, requested: u64, lo: u64, first: u64) -> Error {
        match self.first_live_version(tag, lo, first) {
            Ok(v) => trimmed_version(tag, requested, v),
            Err(e) => e,
        }
    }

    fn first_live_version(&self, tag: &LogTag, lo: u64, first: u64) -> Result<u64> {
        let (mut lo, mut hi) = (lo, self.next_version(tag)?);
        let row = self.read(|s| s.tag_row(tag))?;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let in_tail = {
                let state = self.read_state();
                state
                    .tail
                    .first_version(tag)
                    .filter(|&t| mid >= t)
                    .map(|_| state.tail.version_seqnums(tag, mid, 1))
            };
            let seqnum = match (in_tail, row) {
                (Some(s), _) => s.first().copied(),
                (None, Some(row)) => self
                    .read(|s| s.versions(row.id, mid, 1))?
                    .first()
                    .filter(|&&(v, _)| v == mid)
                    .map(|&(_, s)| s),
                (None, None) => None,
            };
            // A version the index never recorded was trimmed before it
            // learnt of it.
            if seqnum.is_some_and(|s| s >= first) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }

    /// Up to `max` seqnums of `tag`'s versions `>= from_version`, in order.
    ///
    /// Errors: `Trimmed` when `from_version` was trimmed away; `Corrupt`;
    /// I/O kinds.
    pub fn version_seqnums(&self, tag: &LogTag, from_version: u64, max: usize) -> Result<Vec<u64>> {
        let (covered, first, tail_first, tail) = {
            let state = self.read_state();
            (
                state.tail.start(),
                state.first,
                state.tail.first_version(tag),
                state.tail.version_seqnums(tag, from_version, max),
            )
        };
        let row = self.read(|s| s.tag_row(tag))?;
        let floor = row.map_or(0, |r| r.floor);
        if from_version < floor {
            return Err(trimmed_version(tag, from_version, floor));
        }
        // The store holds the versions before the tail's first one.
        let mut out = Vec::new();
        if let Some(row) = row
            && tail_first.is_none_or(|t| from_version < t)
        {
            let rows = self.read(|s| s.versions(row.id, from_version, max))?;
            if let Some(&(v, _)) = rows.first()
                && v != from_version
            {
                // Versions the index never recorded: trimmed before it
                // learnt of them.
                return Err(self.trimmed_from(tag, from_version, v, first));
            }
            for (version, seqnum) in rows {
                if seqnum >= covered {
                    break;
                }
                if seqnum < first {
                    return Err(self.trimmed_from(tag, from_version, version + 1, first));
                }
                out.push(seqnum);
            }
        }
        if out.is_empty()
            && let Some(&s) = tail.first()
        {
            if s < first {
                return Err(self.trimmed_from(tag, from_version, from_version + 1, first));
            }
            if tail_first.is_some_and(|t| from_version < t) && row.is_none() {
                return Err(self.trimmed_from(tag, from_version, tail_first.unwrap_or(0), first));
            }
        }
        let room = max - out.len();
        out.extend(tail.into_iter().take(room));
        Ok(out)
    }

    /// The last seqnum `< before` (and live), carrying `tag` when given.
    ///
    /// Errors: `Corrupt`; I/O kinds.
    pub fn prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<u64>> {
        let (covered, first, in_tail) = {
            let state = self.read_state();
            (
                state.tail.start(),
                state.first,
                state.tail.prev(tag, before),
            )
        };
        if let Some(s) = in_tail {
            return Ok((s >= first).then_some(s));
        }
        let before = before.min(covered);
        if before <= first {
            return Ok(None);
        }
        match tag {
            None => Ok(Some(before - 1)),
            Some(tag) => match self.read(|s| s.tag_row(tag))? {
                None => Ok(None),
                Some(row) => Ok(self
                    .read(|s| s.last_posting_before(row.id, before))?
                    .filter(|&s| s >= first)),
            },
        }
    }

    /// The version `tag`'s next entry as a primary tag gets (0 for a
    /// stream never written), trimmed entries included.
    ///
    /// Errors: `Corrupt`; I/O kinds.
    pub fn next_version(&self, tag: &LogTag) -> Result<u64> {
        if let Some(v) = self.read_state().tail.next_version(tag) {
            return Ok(v);
        }
        // The one row a writer numbers from: checked against the version
        // rows, so a row that disagrees stops the append as `Corrupt` (and
        // marks the index damaged, so the next open rebuilds it).
        Ok(self
            .read(|s| s.checked_tag_row(tag))?
            .map_or(0, |r| r.next_version))
    }

    /// Compares the next version of each stream in `expected` (what the
    /// log says) with this index's, one problem per stream that differs or
    /// whose row is damaged: for a check of the index against its log.
    ///
    /// Errors: I/O kinds (damage is a problem, not an error).
    pub fn version_problems(&self, expected: &[(LogTag, u64)]) -> Result<Vec<Error>> {
        let mut problems = Vec::new();
        for (tag, next) in expected {
            match self.next_version(tag) {
                Ok(ours) if ours == *next => {}
                Ok(ours) => problems.push(Error::corrupt(format!(
                    "the log index says stream {tag} continues at version {ours}, the log at {next}"
                ))),
                Err(e) if e.kind() == ErrorKind::Corrupt => problems.push(e),
                Err(e) => return Err(e),
            }
        }
        Ok(problems)
    }

    /// The nearest locator at or before `seqnum`: the seqnum it belongs to
    /// and its bytes.
    ///
    /// Errors: `Corrupt`; I/O kinds.
    pub fn locate(&self, seqnum: u64) -> Result<Option<(u64, Bytes)>> {
        let (covered, in_tail) = {
            let state = self.read_state();
            (state.tail.start(), state.tail.locate(seqnum))
        };
        if in_tail.is_some() {
            return Ok(in_tail);
        }
        if covered == 0 {
            return Ok(None);
        }
        self.read(|s| s.locate(seqnum.min(covered - 1)))
    }

    /// The seqnum an exactly-once append id was committed at, if any.
    ///
    /// Errors: `Corrupt`; I/O kinds.
    pub fn append_id(&self, id: &[u8]) -> Result<Option<u64>> {
        self.read(|s| s.append_id(id))
    }

    /// How many live entries carry `tag`. Reads one row per chunk of its
    /// seqnums (for `inspect`): its cost grows with the tag's entries.
    ///
    /// Errors: `Corrupt`; I/O kinds.
    pub fn count(&self, tag: &LogTag) -> Result<u64> {
        let (covered, first, in_tail) = {
            let state = self.read_state();
            (
                state.tail.start(),
                state.first,
                state.tail.count(tag, state.first),
            )
        };
        let stored = match self.read(|s| s.tag_row(tag))? {
            None => 0,
            Some(row) => self.read(|s| s.count_postings(row.id, first, covered))?,
        };
        Ok(stored + in_tail)
    }

    /// Every tag the index knows, with its next version as a primary tag,
    /// in tag-key order, at most `max` (for `inspect`). Flushes the tail
    /// first; reads the tag table, so its cost grows with the number of
    /// tags, not entries.
    ///
    /// Errors: `Corrupt`; I/O kinds.
    pub fn tags(&self, max: usize) -> Result<Vec<(LogTag, u64)>> {
        self.flush()?;
        let rows = self.read(|s| s.tags(max, |_| true))?;
        Ok(rows.into_iter().map(|(t, r)| (t, r.next_version)).collect())
    }

    /// Up to `max` streams at or after `from` in
    /// [`stream_order`](crate::model::stream_order) (the tag table's key
    /// order), as [`Storage::streams`](crate::Storage::streams) lists
    /// them: tags with a next version or live entries. Reads the tag table
    /// from `from` on and the tail's tags; each stream's count reads one
    /// row per chunk of its live seqnums ([`Index::count`]), so a page
    /// costs time in its streams' entries and memory in `max`, never in
    /// the number of streams.
    ///
    /// Errors: `Corrupt`; I/O kinds.
    pub fn streams(
        &self,
        from: Option<&LogTag>,
        max: usize,
    ) -> Result<Vec<crate::model::StreamInfo>> {
        use std::ops::Bound;
        let mut out = Vec::new();
        let mut lower: Bound<LogTag> =
            from.map_or(Bound::Unbounded, |t| Bound::Included(t.clone()));
        while out.len() < max {
            let want = max - out.len();
            // The tail first: a tag the flusher moves meanwhile is in the
            // store by the time the store is read.
            let in_tail = self.read_state().tail.tags_from(lower.as_ref(), want);
            let key = match &lower {
                Bound::Included(t) => Bound::Included(crate::format::index_rows::tag_key(t)),
                Bound::Excluded(t) => Bound::Excluded(crate::format::index_rows::tag_key(t)),
                Bound::Unbounded => Bound::Unbounded,
            };
            let stored = self.read(|s| s.tags_after(key, want))?;
            let mut tags: Vec<LogTag> = stored.into_iter().chain(in_tail).collect();
            tags.sort_by(crate::model::stream_order);
            tags.dedup();
            tags.truncate(want);
            let full = tags.len() == want;
            let Some(last) = tags.last().cloned() else {
                break;
            };
            for tag in tags {
                let next_version = self.next_version(&tag)?;
                let entries = self.count(&tag)?;
                // A secondary tag whose entries were all trimmed away.
                if next_version > 0 || entries > 0 {
                    out.push(crate::model::StreamInfo {
                        tag,
                        next_version,
                        entries,
                    });
                }
            }
            if !full {
                break;
            }
            lower = Bound::Excluded(last);
        }
        Ok(out)
    }

    /// The primary tags none of whose entries lies after `through`, with
    /// their next versions: what a trim through `through` must remember
    /// outside the index, since no live entry will carry their numbering.
    /// Flushes the tail first; reads the whole tag table (a trim costs
    /// time in the number of streams, not entries).
    ///
    /// Errors: `Corrupt`; I/O kinds.
    pub fn streams_ending_by(&self, through: u64) -> Result<Vec<(LogTag, u64)>> {
        self.flush()?;
        let rows =
            self.read(|s| s.tags(usize::MAX, |r| r.next_version > 0 && r.last <= through))?;
        Ok(rows.into_iter().map(|(t, r)| (t, r.next_version)).collect())
    }

    /// Records that entry `seqnum`'s bytes changed in place (an erase) and
    /// that its check value is now `check`, so that the tip check of the
    /// next open still matches the log when `seqnum` is the tip. Flushes
    /// the tail first; a later entry makes this a no-op.
    ///
    /// Errors: the flush's and the store's.
    pub fn recheck(&self, seqnum: u64, check: u64) -> Result<()> {
        self.flush()?;
        with_store(&self.inner, |s| s.recheck(seqnum, check))
    }

    /// Moves the whole tail into the store and syncs it.
    ///
    /// Errors: the store's error when the flush fails.
    pub fn flush(&self) -> Result<()> {
        let target = self.next();
        loop {
            if self.covered() >= target {
                return with_store(&self.inner, Store::sync);
            }
            if self.inner.stop.load(Ordering::Acquire) {
                return Err(Error::closed("the log index is closed"));
            }
            if let Some((kind, why)) = self
                .inner
                .failure
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                return Err(Error::new(kind, format!("flushing the log index: {why}")));
            }
            self.wake_flusher();
            let guard = self
                .inner
                .drained_lock
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let _ = self
                .inner
                .drained
                .wait_timeout(guard, Duration::from_millis(20));
        }
    }

    /// Flushes and stops the flusher. Later pushes fail with `Closed`.
    ///
    /// Errors: the final flush's error.
    pub fn close(&self) -> Result<()> {
        let flushed = self.flush();
        self.stop_flusher();
        flushed?;
        if !self.inner.dir.is_dir() {
            // Removed under the open store: its memtables cannot be
            // written out (fjall would wait for that forever), and there
            // is nothing left for a next open to reuse.
            return Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "the log index directory {} was removed",
                    self.inner.dir.display()
                ),
            ));
        }
        // Leave nothing for the next open to replay.
        with_store(&self.inner, |s| {
            s.compact_journal(true)?;
            s.sync()
        })
    }

    /// [`close`](Index::close)s and lets go of the store, so its directory
    /// can be opened again at once (by this process or another) while this
    /// handle lives on in readers; later reads fail with `Closed`.
    ///
    /// After a close that succeeded, the store's journal is emptied once the
    /// store is let go of, so the next open has none to read (see
    /// `Store::release`).
    ///
    /// Errors: the final flush's error (the store is let go of anyway).
    pub fn release(&self) -> Result<()> {
        let closed = self.close();
        let store = self
            .inner
            .store
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(store) = store {
            store.release(closed.is_ok());
        }
        closed
    }

    /// Stops the flusher and lets go of the store without writing anything
    /// out: for an index whose directory is deleted next (a handle's
    /// private temporary one), where a final flush and sync would be
    /// wasted. Later reads and pushes fail with `Closed`.
    pub fn discard(&self) {
        self.stop_flusher();
        drop(
            self.inner
                .store
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
    }

    fn stop_flusher(&self) {
        self.inner.stop.store(true, Ordering::Release);
        wake(&self.inner);
        let handle = self
            .flusher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = handle
            && h.join().is_err()
        {
            warn!("the log index flusher panicked");
        }
        self.inner.drained.notify_all();
    }

    /// Runs a read of the store. A damaged store (a `Corrupt` answer, or a
    /// panic inside the store) marks the index damaged: its next open
    /// starts afresh, and [`damaged`](Index::damaged) tells the caller to
    /// stop trusting it now.
    fn read<T>(&self, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| with_store(&self.inner, f)))
                .unwrap_or_else(|_| Err(Error::corrupt("the log index store panicked on a read")));
        if let Err(e) = &result
            && e.kind() == ErrorKind::Corrupt
            && !self.inner.inspecting
            && !self.inner.damaged.swap(true, Ordering::AcqRel)
        {
            warn!(error = %e, "the log index is damaged; it will be rebuilt");
            if let Err(e) = with_store(&self.inner, Store::mark_damaged) {
                warn!(error = %e, "could not mark the log index damaged");
            }
        }
        result
    }

    /// True once a read found the store damaged: the caller should answer
    /// from its log instead and [`reset`](Index::reset) the index.
    pub fn damaged(&self) -> bool {
        self.inner.damaged.load(Ordering::Acquire)
    }

    /// Approximate bytes the tail holds now.
    pub fn tail_bytes(&self) -> usize {
        self.read_state().tail.bytes()
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        self.stop_flusher();
    }
}

fn trimmed_version(tag: &LogTag, version: u64, first_live: u64) -> Error {
    Error::trimmed_version(tag, version, first_live)
}

/// Runs `f` on the store.
fn with_store<T>(inner: &Inner, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
    let slot = inner.store.read().unwrap_or_else(|p| p.into_inner());
    match slot.as_ref() {
        Some(store) => f(store),
        None => Err(Error::closed("the log index is closed or being rebuilt")),
    }
}

fn wake(inner: &Inner) {
    let mut pending = inner.work_lock.lock().unwrap_or_else(|p| p.into_inner());
    *pending = true;
    inner.work.notify_one();
}

/// The flusher: moves the tail's oldest entries into the store, one
/// transaction per batch, until told to stop; then once more.
fn flush_loop(inner: &Inner) {
    let interval = Duration::from_millis(inner.options.flush_interval_ms);
    let mut batches: u32 = 0;
    let mut heap = heap::HeapTrim::new();
    loop {
        let stopping = inner.stop.load(Ordering::Acquire);
        {
            let mut pending = inner.work_lock.lock().unwrap_or_else(|p| p.into_inner());
            if !*pending && !stopping {
                pending = inner
                    .work
                    .wait_timeout(pending, interval)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            *pending = false;
        }
        // Drain everything that is waiting, batch by batch.
        loop {
            batches = batches.wrapping_add(1);
            let sync = batches.is_multiple_of(inner.options.sync_every);
            match flush_once(inner, sync) {
                Ok(0) => break,
                Ok(_) => {
                    heap.maybe_trim();
                    *inner.failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    inner.drained.notify_all();
                }
                Err(e) => {
                    warn!(error = %e, "writing the log index failed; retrying");
                    *inner.failure.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some((e.kind(), e.message().to_owned()));
                    inner.drained.notify_all();
                    if inner.stop.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(interval);
                    break;
                }
            }
        }
        if stopping {
            return;
        }
    }
}

/// Writes one batch of the tail's oldest entries; the number written.
fn flush_once(inner: &Inner, sync: bool) -> Result<usize> {
    let batch = {
        let state = inner.state.read().unwrap_or_else(|p| p.into_inner());
        let n = state.tail.len().min(inner.options.flush_entries.max(1) * 4);
        if n == 0 {
            return Ok(0);
        }
        FlushBatch {
            entries: state.tail.front(n).map(|(s, e)| (s, e.clone())).collect(),
        }
    };
    let n = batch.entries.len();
    let upto = batch.entries.last().map_or(0, |(s, _)| s + 1);
    with_store(inner, |s| s.write(&batch, sync))?;
    // The batch is in the store: the tail lets go of it before anything
    // else can fail. A retry of a committed batch is refused (it starts
    // below what the store covers), so an error after the commit, with
    // the batch still in the tail, failed every later flush.
    inner
        .state
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .tail
        .drop_before(upto);
    with_store(inner, |s| s.after_batch(sync))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_tags_read_as_the_slice_they_were_made_from() {
        let tag = |k: &str| LogTag::with_key("t", k).unwrap();
        for n in 0..4 {
            let tags: Vec<LogTag> = (0..n).map(|i| tag(&i.to_string())).collect();
            let from_slice = EntryTags::from(tags.as_slice());
            let from_vec = EntryTags::from(tags.clone());
            let collected: EntryTags = tags.iter().cloned().collect();
            assert_eq!(&*from_slice, tags.as_slice());
            assert_eq!(from_slice, from_vec);
            assert_eq!(from_vec, collected);
            assert_eq!(from_slice.clone().first(), tags.first());
        }
        assert_ne!(
            EntryTags::from(vec![tag("a")]),
            EntryTags::from(vec![tag("b")])
        );
    }

    fn entries(from: u64, to: u64) -> Vec<IndexEntry> {
        (from..to)
            .map(|s| IndexEntry {
                seqnum: s,
                tags: vec![LogTag::with_key("orders", format!("c{}", s % 7)).unwrap()].into(),
                version: s / 7,
                locator: Some(Bytes::from(s.to_be_bytes().to_vec())),
                check: s,
            })
            .collect()
    }

    /// Flushes until a flush succeeds, for at most ten seconds; the last
    /// error if none did.
    fn flush_within_10s(index: &Index) -> Result<()> {
        let mut last = Ok(());
        for _ in 0..500 {
            last = index.flush();
            if last.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        last
    }

    #[test]
    fn an_error_after_a_batch_is_committed_does_not_wedge_the_flusher() {
        let tmp = tempfile::tempdir().unwrap();
        let index = Index::open(tmp.path(), b"log", IndexOptions::default()).unwrap();
        index.push(&entries(0, 100)).unwrap();
        flush_within_10s(&index).unwrap();
        // The next batch commits, then the work after it fails (as a
        // memtable flush that timed out did).
        with_store(&index.inner, |s| {
            s.fail_after_batch.store(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
        index.push(&entries(100, 200)).unwrap();
        let first = index.flush();
        assert_eq!(
            with_store(&index.inner, |s| Ok(s
                .fail_after_batch
                .load(Ordering::Relaxed)))
            .unwrap(),
            0,
            "the failure was injected ({first:?})"
        );
        // Later batches still go in.
        index.push(&entries(200, 300)).unwrap();
        flush_within_10s(&index).unwrap();
        assert_eq!(index.covered(), 300);
        let tag = LogTag::with_key("orders", "c3").unwrap();
        let all = index.seqnums(Some(&tag), 0, 1000).unwrap();
        assert_eq!(all, (0..300).filter(|s| s % 7 == 3).collect::<Vec<_>>());
        assert_eq!(index.version_seqnums(&tag, 40, 2).unwrap(), vec![283, 290]);
        index.close().unwrap();
    }

    use super::store::tests::journal_sizes;

    #[test]
    fn a_released_index_leaves_an_empty_journal_and_reopens_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let index = Index::open(tmp.path(), b"log", IndexOptions::default()).unwrap();
        for b in 0..20 {
            index.push(&entries(b * 500, (b + 1) * 500)).unwrap();
        }
        index.flush().unwrap();
        // Before the release, the journal holds the batches.
        assert!(journal_sizes(tmp.path()).iter().sum::<u64>() > 0);
        index.release().unwrap();
        // fjall's next open has no journal to read through.
        assert_eq!(journal_sizes(tmp.path()), vec![0]);
        drop(index);

        let tag = LogTag::with_key("orders", "c3").unwrap();
        for round in 0..2u64 {
            let index = Index::open(tmp.path(), b"log", IndexOptions::default()).unwrap();
            assert_eq!(index.fresh(), None, "round {round}");
            let covered = 10_000 + round * 700;
            assert_eq!(index.covered(), covered, "round {round}");
            assert_eq!(index.tip().unwrap(), Some((covered - 1, covered - 1)));
            let expected: Vec<u64> = (0..covered).filter(|s| s % 7 == 3).collect();
            let all = index.seqnums(Some(&tag), 0, 100_000).unwrap();
            assert_eq!(all, expected, "round {round}");
            assert_eq!(
                index.next_version(&tag).unwrap(),
                expected.len() as u64,
                "round {round}"
            );
            // It keeps writing into the emptied journal.
            index.push(&entries(covered, covered + 700)).unwrap();
            index.flush().unwrap();
            assert!(journal_sizes(tmp.path())[0] > 0, "round {round}");
            index.release().unwrap();
            assert_eq!(journal_sizes(tmp.path()), vec![0], "round {round}");
        }
    }

    #[test]
    fn an_index_dropped_without_release_keeps_its_journal() {
        let tmp = tempfile::tempdir().unwrap();
        let index = Index::open(tmp.path(), b"log", IndexOptions::default()).unwrap();
        index.push(&entries(0, 3000)).unwrap();
        index.flush().unwrap();
        // As after a crash: no close, fjall replays its journal.
        drop(index);
        assert!(journal_sizes(tmp.path()).iter().sum::<u64>() > 0);
        let index = Index::open(tmp.path(), b"log", IndexOptions::default()).unwrap();
        assert_eq!(index.fresh(), None);
        assert_eq!(index.covered(), 3000);
        let tag = LogTag::with_key("orders", "c3").unwrap();
        assert_eq!(
            index.seqnums(Some(&tag), 0, 10_000).unwrap(),
            (0..3000).filter(|s| s % 7 == 3).collect::<Vec<_>>()
        );
        index.release().unwrap();
    }
}
