//! The shared log on a bucket: a fenced writer and read-only followers.
//!
//! Each log entry travels as one WAL record holding its entry frame
//! (`crate::format::frame`: seqnum, version, timestamp, tags, data,
//! CRC-32C). The manifest is written in weft's record-numbered format (v5:
//! bounded, older entries in history pages), so a record's WAL sequence
//! *is* the entry's seqnum, and a whole append batch is one producer group,
//! committed in one segment by one manifest CAS.
//!
//! * [`BucketStorage`] — the writer: owns the epoch (opening it fences any
//!   older writer), checks conditional appends against its authoritative
//!   versions before the CAS, and completes those versions from the bucket
//!   when it opens.
//! * [`BucketFollower`] — a read replica: tails the manifest, serves every
//!   read and subscription, and refuses writes with `ReadOnly`.
//!
//! Layout under the log's prefix: `manifest`, `segments/<run>/<ordinal>`,
//! `history/<level>-<first>-<end>-<run>-<plan>` (the manifest's history pages),
//! `snapshots/<through>-<id>`, `states/<through>-<run>` (stream-state
//! checkpoints, see [`writer`]), `kv/<scope>/<key>`.
//!
//! # Memory and open time
//!
//! Neither keeps the log's entries. Both keep its *numbers* (which seqnums
//! carry each tag, which seqnum holds each version) — in memory, or with a
//! cache directory in the persistent log index (`crate::index`) — plus the
//! newest entries up to a budget; any other entry is read back from its
//! segment on demand, through bounded caches of segments and history pages.
//! Everything but in-memory numbers comes out of one `memory_budget`.
//!
//! With a cache directory, opening reads only what was committed since the
//! directory's index last covered the log. Without one (or on an empty
//! one) a follower reads the whole live log in the background while it
//! already serves the live end (see [`follower`]); a writer reads only
//! what follows the newest stream-state checkpoint before it accepts
//! appends, and the rest in the background (see [`writer`]). A standby follower's directory can be handed to
//! a new writer. The directory is derived state, checked against the log
//! and rebuilt when it does not match (`docs/FAILURE_SEMANTICS.md`).
//!
//! # Retention
//!
//! [`Storage::trim`](crate::Storage::trim) on the writer stores the log's
//! numbering state at the trim point (`crate::format::log_state`) as the
//! WAL's base snapshot and drops the entries it supersedes, in one manifest
//! CAS. A writer reopening the log and a follower starting on it restore
//! that state — first seqnum, and every stream's next version, also of
//! streams whose entries are all gone — and read on from the entry after
//! it. A running follower drops from its local copy whatever the manifest
//! no longer holds after each poll. [`gc`] deletes the objects nothing
//! references any more; [`trim_unowned`] trims from a tool without fencing
//! the writer.

mod budget;
mod catchup;
pub mod check;
mod erase;
pub mod follower;
pub mod kv;
mod local;
mod numbers;
mod open_checks;
mod reader;
mod records;
mod restore;
pub mod retention;
mod states;
mod stream_checks;
pub mod writer;

pub use check::{BucketCheck, CacheCheck, check, check_cache};
pub use follower::{BucketFollower, BucketFollowerOptions};
pub use kv::BucketKv;
pub use retention::{gc, trim_unowned};
pub use writer::{BucketOptions, BucketStorage};

/// Whether another writer or follower handle (in this process or another)
/// uses the cache directory at `path` now, so that a tool can open without
/// it instead of failing: opening with a directory in use fails with
/// `Locked` (as does a writer lease held by a live writer, which this tells
/// apart). The answer can be stale by the time the directory is used.
///
/// Errors: I/O kinds when the directory cannot be created or locked.
pub fn cache_dir_in_use(path: &std::path::Path) -> crate::Result<bool> {
    match numbers::CacheDir::acquire(path) {
        Ok(_released_on_drop) => Ok(false),
        Err(e) if e.kind() == crate::ErrorKind::Locked => Ok(true),
        Err(e) => Err(e),
    }
}

use object_store::path::Path;

/// Where a bucket log keeps its objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketLayout {
    prefix: String,
}

impl BucketLayout {
    /// The layout of the log rooted at `prefix` (may be empty).
    pub fn new(prefix: impl Into<String>) -> Self {
        let prefix = prefix.into().trim_matches('/').to_owned();
        BucketLayout { prefix }
    }

    fn join(&self, rest: &str) -> String {
        if self.prefix.is_empty() {
            rest.to_owned()
        } else {
            format!("{}/{rest}", self.prefix)
        }
    }

    /// The manifest object.
    pub fn manifest(&self) -> Path {
        Path::from(self.join("manifest"))
    }

    /// The prefix of segment objects.
    pub fn segments(&self) -> String {
        self.join("segments")
    }

    /// The prefix of the manifest's history pages.
    pub fn history(&self) -> String {
        self.join("history")
    }

    /// The prefix of snapshot objects.
    pub fn snapshots(&self) -> String {
        self.join("snapshots")
    }

    /// The prefix of stream-state checkpoints.
    pub fn states(&self) -> String {
        self.join("states")
    }

    /// The prefix of KV objects.
    pub fn kv(&self) -> String {
        self.join("kv")
    }
}
