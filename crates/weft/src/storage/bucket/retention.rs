//! Retention of a bucket log from outside its writer: GC passes and trims
//! made by a tool (the `weft` command), with or without a live writer.
//!
//! The writer trims through [`Storage::trim`](crate::Storage::trim). A
//! tool that must not fence the writer uses [`trim_unowned`]: it reads the
//! log like a follower, computes the same log state, and records it with a
//! manifest CAS that keeps the epoch. A live writer then commits on top of
//! that change; its own local copy keeps the trimmed entries until it is
//! reopened (its readers see them, followers and new writers do not).

use std::sync::Arc;

use object_store::ObjectStore;

use super::BucketLayout;
use super::catchup::read_numbers;
use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{LogState, SnapshotPointer, encode_log_state};
use crate::objects::RetryPolicy;
use crate::wal::{Gc, SnapshotWriter};

/// A retention GC pass over the bucket log at `prefix` in `store` (the
/// defaults of [`Gc`]: a one-hour grace period, not a dry run; adjust with
/// its builder methods, then [`Gc::run`]).
pub fn gc(store: Arc<dyn ObjectStore>, prefix: &str) -> Gc {
    let layout = BucketLayout::new(prefix);
    Gc::new(store, layout.manifest().to_string(), layout.segments())
        .with_snapshot_prefix(layout.snapshots())
        .with_history_prefix(layout.history())
}

/// Trims the bucket log at `prefix` through `through` without claiming it:
/// stores the log state as of `through` as its snapshot and drops the
/// entries it supersedes, by a manifest CAS that fences nobody. Returns the
/// new snapshot pointer, or `None` when the log is already trimmed at or
/// past `through` (nothing is written then).
///
/// Every store request is retried and bounded by `retry` (and its
/// deadline; reading the log fails once it made no progress for that long).
///
/// Errors: `NotFound` when there is no log; `InvalidInput` when `through`
/// is not a committed seqnum (at or past the log's end) or the manifest is
/// segment-numbered; `Conflict` when a snapshot covering more is already
/// recorded; `Corrupt` data; store errors (`Unavailable` after the retries
/// or the deadline, `ReadOnly`, ...).
pub async fn trim_unowned(
    store: Arc<dyn ObjectStore>,
    prefix: &str,
    through: u64,
    clock: Arc<dyn Clock>,
    retry: &RetryPolicy,
) -> Result<Option<SnapshotPointer>> {
    let layout = BucketLayout::new(prefix);
    let manifest = layout.manifest();
    if retry
        .backoff(0)
        .attempt(store.head(&manifest))
        .await
        .is_err_and(|e| matches!(e, object_store::Error::NotFound { .. }))
    {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("no bucket log at {manifest}: nothing to trim"),
        ));
    }
    let (index, _) = read_numbers(&store, &layout, 8, retry).await?;
    if through >= index.next() {
        return Err(Error::invalid_input(format!(
            "cannot trim through {through}: the log ends before it (next seqnum {})",
            index.next()
        )));
    }
    if through < index.first() {
        return Ok(None);
    }
    let state = LogState::new(through, index.next_versions_through(through))?;
    let pointer = SnapshotWriter::new(store, manifest.as_ref())
        .with_prefix(layout.snapshots())
        .with_clock(clock)
        .with_retry_policy(retry.clone())
        .write_unowned(&manifest, encode_log_state(&state)?, through)
        .await?;
    Ok(Some(pointer))
}
