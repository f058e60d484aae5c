//! What every backend shares, so that each one writes only what is its own.
//!
//! A backend owns how entries are numbered, stored and read back. What is
//! left is the same everywhere and lives here:
//!
//! * [`Gate`] — the lifecycle of a handle: open, closed by the caller, or
//!   stopped for good by a failure, whose error (kind and detail kept)
//!   every later write gets.
//! * [`Visible`] — what readers see plus the [`CommitFeed`] that announces
//!   it, under one lock: a batch becomes readable and reaches the feed in
//!   one step, so batches reach the feed in seqnum order.
//! * [`Sequencer`] — single-writer numbering (seqnums, stream versions,
//!   conditions) over a [`VersionTable`]: all streams in memory
//!   ([`MemoryVersions`]), or (in weft's own backends) a bounded set over
//!   the persistent index.
//! * [`AppendIds`] — exactly-once appends on a sequencer.
//! * [`CommitFeed`] — announces committed batches to subscribers.
//! * [`check_append`] — the one check of an append batch, which every
//!   backend makes first, from its declared [`AppendLimits`].
//! * [`results_of`], [`result_of`] — the answer to an append, from the
//!   numbered entries.
//! * [`check_erasable`] — the argument check every backend's
//!   [`Storage::erase`](super::Storage::erase) makes first.
//!
//! A backend whose numbers are assigned by a shared database has no
//! sequencer and may keep no copy of the entries: it uses a [`Gate`] and
//! publishes what it learns of commits (its own and other processes', read
//! back in seqnum order by a tailer) straight to its [`CommitFeed`], which
//! skips whatever it already announced. See `docs/STORAGE_SEAM.md`.

mod append_check;
mod append_ids;
mod feed;
mod gate;
// Tables over weft's own persistent index, for its own backends only.
#[allow(unreachable_pub)]
mod index_versions;
#[allow(unreachable_pub)]
mod memory_index;
mod sequencer;
mod visible;

pub use append_check::{AppendLimits, check_append};
pub use append_ids::{AppendIds, Planned};
pub use feed::{CommitFeed, CommittedBatch, FEED_CAPACITY};
pub use gate::Gate;
pub(crate) use index_versions::{FillWatch, Floors, IndexVersions};
pub(crate) use memory_index::MemoryIndex;
pub use sequencer::{MemoryVersions, Sequencer, VersionTable};
pub use visible::Visible;

use crate::error::{Error, Result};
use crate::model::{AppendResult, LogEntry};

/// The result of appending `entries`, one per entry, in order.
pub fn results_of(entries: &[LogEntry]) -> Vec<AppendResult> {
    entries.iter().map(result_of).collect()
}

/// The one result of a batch of one.
///
/// Errors: `Internal` when `results` does not hold exactly one.
pub fn single_result(mut results: Vec<AppendResult>) -> Result<AppendResult> {
    match (results.pop(), results.is_empty()) {
        (Some(r), true) => Ok(r),
        _ => Err(Error::internal(
            "storage returned the wrong number of results",
        )),
    }
}

/// The result of appending `entry`.
pub fn result_of(entry: &LogEntry) -> AppendResult {
    AppendResult {
        seqnum: entry.seqnum,
        stream_version: entry.stream_version,
        primary_tag: entry.tags[0].clone(),
        timestamp_ms: entry.timestamp_ms,
    }
}

/// Checks the seqnums of an erase: ascending, without repeats, and all
/// below `next` (the log's end).
///
/// Errors: `InvalidInput`, and nothing is erased.
pub fn check_erasable(seqnums: &[u64], next: u64) -> Result<()> {
    if !seqnums.windows(2).all(|w| w[0] < w[1]) {
        return Err(Error::invalid_input(
            "the seqnums to erase must ascend without repeats",
        ));
    }
    match seqnums.last() {
        Some(&last) if last >= next => Err(Error::invalid_input(format!(
            "cannot erase seqnum {last}: the log ends before it (next seqnum {next})"
        ))),
        _ => Ok(()),
    }
}
