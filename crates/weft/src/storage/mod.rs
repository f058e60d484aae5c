//! Storage backends of the shared log, behind one trait.
//!
//! A [`Storage`] owns the durable order of entries: it assigns seqnums and
//! stream versions, checks conditional appends, serves reads, and publishes
//! every committed batch on its [`CommitFeed`] so subscriptions can go live
//! without polling. The [`Log`](crate::Log) service adds views,
//! subscriptions and typed access on top, identically for every backend.
//!
//! Backends: [`memory`] (tests, simulation, ephemeral logs), [`dir`] (a
//! local directory: the embedded default), [`bucket`] (an S3-compatible
//! bucket) and, with the `postgres` feature, `postgres` (a PostgreSQL
//! database that many writer processes share). Each one passes the suite in [`crate::conformance`] unchanged.
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
pub mod cache;
pub mod dir;
pub mod feed;
pub mod index;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod sequencer;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::kv::KvStore;
use crate::model::{AppendResult, LogEntry, LogTag};

pub use dir::DirStorage;
pub use feed::CommitFeed;
pub use memory::MemoryStorage;

/// One entry to append, as a backend receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEntry {
    /// Tags, primary first, validated and without duplicates.
    pub tags: Vec<LogTag>,
    /// The payload.
    pub data: Bytes,
    /// When set, the append succeeds only if the primary tag's next version
    /// equals this value (0 for an empty stream).
    pub expected_version: Option<u64>,
    /// The caller's append id (exactly-once appends), only for backends
    /// whose [`Storage::supports_append_ids`] is true.
    pub append_id: Option<String>,
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
}

/// A storage backend for the shared log.
///
/// Implementations must make [`append`](Storage::append) atomic (every entry
/// of the batch or none, with contiguous seqnums), check every
/// `expected_version` against versions that include the batch's own earlier
/// entries, make an entry visible to reads only once it is durable (for the
/// backend's notion of durable), and publish committed batches on the
/// [`CommitFeed`] in seqnum order.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Appends `batch` atomically and returns one result per entry, in order.
    ///
    /// Errors: `InvalidInput` (empty batch, bad entry), `Conflict` (an
    /// expected version did not match; nothing written), `ReadOnly`,
    /// `Closed`, and backend I/O kinds.
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>>;

    /// Up to `max` entries with seqnum `>= from`, in seqnum order; only
    /// entries carrying `tag` when it is given.
    ///
    /// Errors: `Trimmed` when `from` is below the first live seqnum.
    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>>;

    /// Up to `max` entries whose primary tag is `tag` and whose version is
    /// `>= from_version`, in order.
    ///
    /// Errors: `Trimmed` when that version was trimmed away.
    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>>;

    /// The last entry with seqnum `< before` (carrying `tag` when given).
    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>>;

    /// The seqnum the next committed entry will get (0 for an empty log).
    fn next_seqnum(&self) -> u64;

    /// The first seqnum still readable (the trim point plus one, or 0).
    fn first_seqnum(&self) -> u64;

    /// The latest version of `tag` as a primary tag; `None` when it has none.
    fn latest_version(&self, tag: &LogTag) -> Option<u64>;

    /// Drops every entry with seqnum `<= through`.
    ///
    /// Errors: `InvalidInput` when `through` is not below `next_seqnum()`.
    async fn trim(&self, through: u64) -> Result<()>;

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

    /// True when the backend honours append ids (see
    /// [`AppendRequest::with_id`](crate::AppendRequest::with_id)); the
    /// [`Log`](crate::Log) refuses requests with ids otherwise.
    fn supports_append_ids(&self) -> bool {
        false
    }

    /// Flushes and releases the backend. Later calls fail with `Closed`.
    async fn close(&self) -> Result<()>;
}
