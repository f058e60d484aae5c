//! The shared log on a bucket: a fenced writer and read-only followers.
//!
//! Each log entry travels as one WAL record holding its entry frame
//! ([`crate::format::frame`]: seqnum, version, timestamp, tags, data,
//! CRC-32C). The manifest is written in a record-numbered format (v3/v4), so
//! a record's WAL sequence *is* the entry's seqnum, and a whole append batch
//! is one producer group, committed in one segment by one manifest CAS.
//!
//! * [`BucketStorage`] — the writer: owns the epoch (opening it fences any
//!   older writer), checks conditional appends against its authoritative
//!   versions before the CAS, and rebuilds those versions from the bucket
//!   when it opens.
//! * [`BucketFollower`] — a read replica: tails the manifest, keeps the
//!   entries and their tag/version indexes locally, serves every read and
//!   subscription, and refuses writes with `ReadOnly`.
//!
//! Layout under the log's prefix: `manifest`, `segments/<run>/<ordinal>`,
//! `snapshots/<through>-<id>`, `kv/<scope>/<key>`.
//!
//! # Retention
//!
//! [`Storage::trim`](crate::Storage::trim) on the writer stores the log's
//! numbering state at the trim point ([`crate::format::log_state`]) as the
//! WAL's base snapshot and drops the entries it supersedes, in one manifest
//! CAS. A writer reopening the log and a follower starting on it restore
//! that state — first seqnum, and every stream's next version, also of
//! streams whose entries are all gone — and read on from the entry after
//! it. A running follower drops from its local copy whatever the manifest
//! no longer holds after each poll. [`gc`] deletes the objects nothing
//! references any more; [`trim_unowned`] trims from a tool without fencing
//! the writer.

pub mod check;
pub mod follower;
pub mod kv;
mod records;
pub mod retention;
pub mod writer;

pub use check::{BucketCheck, check};
pub use follower::{BucketFollower, FollowerOptions};
pub use kv::BucketKv;
pub use retention::{gc, trim_unowned};
pub use writer::{BucketOptions, BucketStorage};

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

    /// The prefix of snapshot objects.
    pub fn snapshots(&self) -> String {
        self.join("snapshots")
    }

    /// The prefix of KV objects.
    pub fn kv(&self) -> String {
        self.join("kv")
    }
}
