//! Storage backends of the shared log, behind one trait.
//!
//! A [`Storage`] owns the durable order of entries: it assigns seqnums and
//! stream versions (or has its database assign them), checks conditional
//! appends, serves reads, answers tip queries, and publishes every
//! committed batch on its [`CommitFeed`] so subscriptions can go live
//! without polling. The [`Log`](crate::Log) service adds positions, paged
//! reads, views, subscriptions and typed access on top, identically for
//! every backend.
//!
//! Backends: [`memory`] (tests, simulation, ephemeral logs), [`dir`] (a
//! local directory: the embedded default), [`bucket`] (an S3-compatible
//! bucket: a fenced writer and read-only followers) and, with the
//! `postgres` feature, `postgres` (a PostgreSQL database that many writer
//! processes share). Each one passes the conformance suite of the
//! `weft-testkit` crate unchanged. What they share (lifecycle, publishing
//! under one lock, single-writer numbering, exactly-once appends, the one
//! append check) is in [`kit`]. The design and what each kind of backend
//! promises are in `docs/STORAGE_SEAM.md`.
//!
//! ## Tip queries and freshness
//!
//! [`Storage::tip`] and [`Storage::latest_version`] are async and
//! fallible: how current their answer is depends on who numbers the
//! entries, and [`Capabilities::freshness`] says which case a backend is.
//! [`CommitFeed::watch_tip`] is the explicit, cheap alternative: the last
//! state this handle announced.
//!
//! ## Stream versions
//!
//! An entry carries one stream version, taken from its **primary** tag (the
//! first). Version counters exist per primary tag and are dense from 0. A
//! tag that only ever appears as a secondary tag has no version stream of
//! its own: its entries show up in seqnum-keyed reads, but version-keyed
//! reads (`read_versions`, `latest_version`) look at the entries for which
//! the tag is primary.

pub mod bucket;
pub mod dir;
pub mod kit;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::kv::KvStore;
use crate::model::{AppendResult, Expected, LogEntry, LogTag};

pub use crate::model::{StreamInfo, stream_order};
pub use dir::DirStorage;
pub use kit::CommitFeed;
pub use kit::{MemoryVersions, Sequencer, VersionTable};
pub use memory::MemoryStorage;

/// One entry to append, as a backend receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEntry {
    /// Tags, primary first, validated and without duplicates.
    pub tags: Vec<LogTag>,
    /// The payload.
    pub data: Bytes,
    /// When set, the append succeeds only if the primary tag's stream
    /// satisfies this condition ([`Expected::admits`] its next version,
    /// counting the batch's own earlier entries). `None` and
    /// `Some(Expected::Any)` both mean no condition.
    pub expected_version: Option<Expected>,
    /// The caller's append id (exactly-once appends), only for backends
    /// whose [`Storage::supports_append_ids`] is true.
    pub append_id: Option<String>,
}

/// The live range of a log: entries `first..next` are readable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tip {
    /// The first seqnum still readable (the trim point plus one, or 0).
    pub first: u64,
    /// The seqnum the next committed entry gets (0 for an empty log).
    pub next: u64,
}

impl Tip {
    /// The seqnum of the last live entry; `None` when no entry is live.
    pub fn last(&self) -> Option<u64> {
        (self.next > self.first).then(|| self.next - 1)
    }

    /// True when no entry is live.
    pub fn is_empty(&self) -> bool {
        self.next <= self.first
    }
}

/// How current a backend's answers to [`Storage::tip`] and
/// [`Storage::latest_version`] are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Freshness {
    /// This handle is the log's only writer and numbers every entry itself
    /// (memory, dir, the bucket writer): the answer is exact and costs no
    /// I/O. Only this handle's own appends can move it.
    SingleWriter,
    /// A database shared by many writer processes numbers the entries: each
    /// query is one round trip to it and returns its state at that moment;
    /// other processes may append right after.
    SharedDatabase,
    /// A read replica (the bucket follower, the dir follower): the answer
    /// covers the prefix applied so far, which may lag the writer (by about
    /// one poll).
    AppliedPrefix,
}

/// What a backend can do, for callers and the conformance suite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Writes are rejected with [`ReadOnly`](crate::ErrorKind::ReadOnly).
    pub read_only: bool,
    /// Entries survive a restart of the process.
    pub durable: bool,
    /// The largest payload accepted.
    pub max_entry_bytes: usize,
    /// How current tip and version queries are.
    pub freshness: Freshness,
}

/// A storage backend for the shared log.
///
/// Implementations must make [`append`](Storage::append) atomic (every entry
/// of the batch or none, with contiguous seqnums), check every
/// `expected_version` (with [`Expected::check`]) against versions that
/// include the batch's own earlier entries, make an entry visible to reads only once it is durable (for the
/// backend's notion of durable), and publish committed batches on the
/// [`CommitFeed`] in seqnum order (every committed entry eventually, and
/// none before it is readable).
///
/// Reads return bounded pages (`max` entries); the [`Log`](crate::Log)
/// turns them into streams. Tip queries are async and fallible, and as
/// fresh as [`Capabilities::freshness`] says.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Appends `batch` atomically and returns one result per entry, in order.
    ///
    /// Errors: `InvalidInput` (empty batch, bad entry), `Conflict` (an
    /// expected version did not match; nothing written), `ReadOnly`,
    /// `Closed`, and backend I/O kinds.
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>>;

    /// Appends one entry: the same as [`append`](Storage::append) of a
    /// batch of one, with its one result. The default does exactly that; a
    /// backend whose appends cross threads may override it to spare the
    /// batch's vector each way (the dir backend does).
    ///
    /// Errors: as [`append`](Storage::append).
    async fn append_one(&self, entry: NewEntry) -> Result<AppendResult> {
        kit::single_result(self.append(vec![entry]).await?)
    }

    /// Up to `max` entries with seqnum `>= from`, in seqnum order; only
    /// entries carrying `tag` when it is given.
    ///
    /// Errors: `Trimmed` (with
    /// [`ErrorDetail::Trimmed`](crate::ErrorDetail::Trimmed)) when `from` is
    /// below the first live seqnum.
    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>>;

    /// Up to `max` entries whose primary tag is `tag` and whose version is
    /// `>= from_version`, in order.
    ///
    /// Errors: `Trimmed` when that version was trimmed away, with
    /// [`ErrorDetail::Trimmed`](crate::ErrorDetail::Trimmed) in versions.
    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>>;

    /// The last entry with seqnum `< before` (carrying `tag` when given).
    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>>;

    /// The first live seqnum whose entry's timestamp is `>= time_ms`; the
    /// tip's `next` when no live entry is that recent (a subscription from
    /// there sees the next entry appended).
    ///
    /// Timestamps are monotonic within a log (each writer stamps an entry
    /// with the larger of its clock and the newest entry's timestamp), so
    /// the default binary-searches the live seqnums with one single-entry
    /// [`read`](Storage::read) per step: O(log n) reads of the seqnum
    /// index, never a scan. A backend with an index on time may answer
    /// from it instead.
    ///
    /// Errors: as [`Storage::read`] and [`Storage::tip`]; `Trimmed` only
    /// when a trim races the search (search again).
    async fn seek_time(&self, time_ms: u64) -> Result<u64> {
        let tip = self.tip().await?;
        // Invariant: every live entry below `lo` is older than `time_ms`,
        // and the entry at or after `hi` (if any) is not.
        let (mut lo, mut hi) = (tip.first, tip.next);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.read(None, mid, 1).await?.into_iter().next() {
                // The first entry at or after `mid` (seqnums may skip).
                // (When seqnums skip, reading from the answer still
                // starts at the right entry.)
                Some(e) if e.seqnum < hi && e.timestamp_ms < time_ms => lo = e.seqnum + 1,
                // Recent enough, or nothing live in `mid..hi`: the answer
                // is at or below `mid`.
                _ => hi = mid,
            }
        }
        Ok(lo)
    }

    /// The live range of the log: first readable and next seqnum, as fresh
    /// as [`Capabilities::freshness`] says. Entries below `next` are
    /// readable once this returns.
    ///
    /// Errors: `Closed`; for a backend that asks its database, that
    /// round trip's I/O kinds.
    async fn tip(&self) -> Result<Tip>;

    /// The latest version of `tag` as a primary tag; `None` when it has
    /// none. As fresh as [`Capabilities::freshness`] says.
    ///
    /// Errors: as [`Storage::tip`].
    async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>>;

    /// Up to `max` streams, those at or after `from` in [`stream_order`]
    /// (every one when `from` is `None`), in that order: every tag that was
    /// ever a primary tag (trimmed-away streams with no live entry keep
    /// their next version) and every tag live entries carry. A backend
    /// answers from its index or tables without holding every stream in
    /// memory; the page is as fresh as [`Capabilities::freshness`] says
    /// (a backend with a persistent index may miss the last moment's
    /// appends).
    ///
    /// Errors: as [`Storage::tip`]; `Corrupt` when the index is damaged.
    async fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<StreamInfo>>;

    /// Drops every entry with seqnum `<= through`.
    ///
    /// Errors: `InvalidInput` when `through` is not below the tip's `next`.
    async fn trim(&self, through: u64) -> Result<()>;

    /// Erases the payloads of the committed entries `seqnums` (ascending):
    /// each keeps its place — seqnum, tags, version, time, append id — and
    /// reads with an empty payload from then on, through this handle and
    /// every later reader of the stored log, while the stored bytes of its
    /// payload are overwritten (a hard delete; see
    /// [`Log::erase_stream`](crate::Log::erase_stream)). Seqnums a trim
    /// removed meanwhile are skipped. Returns how many entries were erased
    /// by this call (an entry erased before is not counted again).
    ///
    /// Errors: `Unsupported` (the default: the backend cannot erase);
    /// `InvalidInput` for a seqnum at or past the tip's `next`; `ReadOnly`;
    /// `Closed`; backend I/O kinds, after which some of the entries may be
    /// erased and the rest not (erase again).
    async fn erase(&self, seqnums: &[u64]) -> Result<u64> {
        let _ = seqnums;
        Err(Error::unsupported(
            "this storage backend cannot erase entries",
        ))
    }

    /// Erases the payloads of `tag`'s entries below `before_version` (as
    /// [`erase`](Storage::erase) does), which all lie below seqnum
    /// `below_seqnum` (the stream's start, see
    /// [`Log::erase_stream`](crate::Log::erase_stream)). Returns how many
    /// this call erased.
    ///
    /// The default reads the tag's entries a page at a time from the log's
    /// first live seqnum and erases each page's share; a backend that
    /// forwards the whole request elsewhere (a server's client) overrides
    /// it.
    ///
    /// Errors: as [`read`](Storage::read) and [`erase`](Storage::erase).
    async fn erase_below(
        &self,
        tag: &LogTag,
        before_version: u64,
        below_seqnum: u64,
    ) -> Result<u64> {
        const PAGE: usize = 256;
        let mut from = self.tip().await?.first;
        let mut erased = 0;
        while from < below_seqnum {
            let page = match self.read(Some(tag), from, PAGE).await {
                Ok(page) => page,
                Err(e) if e.kind() == crate::ErrorKind::Trimmed => {
                    // A trim moved the start meanwhile; trims only go
                    // forward, so this ends.
                    let first = self.tip().await?.first;
                    if first <= from {
                        return Err(e);
                    }
                    from = first;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Some(last) = page.last() else {
                break;
            };
            from = last.seqnum + 1;
            let doomed: Vec<u64> = page
                .iter()
                .filter(|e| {
                    e.primary_tag() == tag
                        && e.stream_version < before_version
                        && !e.data.is_empty()
                })
                .map(|e| e.seqnum)
                .collect();
            if !doomed.is_empty() {
                erased += self.erase(&doomed).await?;
            }
            if page.len() < PAGE {
                break;
            }
        }
        Ok(erased)
    }

    /// The feed of committed batches.
    fn feed(&self) -> &CommitFeed;

    /// The per-view key-value store, if the backend has one.
    ///
    /// Errors: `Unsupported` when the backend cannot provide an atomic KV.
    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        Err(Error::unsupported(
            "this storage backend has no key-value store",
        ))
    }

    /// What the backend can do.
    fn capabilities(&self) -> Capabilities;

    /// The slot of the background task that applies the log's retention
    /// policy, for a backend whose handle is (or may act as) the log's
    /// writer; `None` (the default) runs no task (followers, clients of a
    /// server, whose server runs it).
    fn retention_slot(&self) -> Option<&crate::retention::RetentionSlot> {
        None
    }

    /// True when the backend honours append ids (see
    /// [`AppendRequest::with_id`](crate::AppendRequest::with_id)); the
    /// [`Log`](crate::Log) refuses requests with ids otherwise.
    fn supports_append_ids(&self) -> bool {
        false
    }

    /// What this backend accepts in an append, from its
    /// [`capabilities`](Storage::capabilities) and
    /// [`supports_append_ids`](Storage::supports_append_ids): the limits
    /// [`kit::check_append`] checks every batch against, first thing in
    /// [`append`](Storage::append).
    fn append_limits(&self) -> kit::AppendLimits {
        kit::AppendLimits {
            max_entry_bytes: self.capabilities().max_entry_bytes,
            append_ids: self.supports_append_ids(),
        }
    }

    /// Flushes and releases the backend. Later calls fail with `Closed`.
    async fn close(&self) -> Result<()>;
}
