//! A log served from an in-memory entry cache.

use crate::error::Result;
use crate::model::{LogEntry, LogTag};
use crate::storage::kit::{Gate, Visible};
use crate::storage::memory::cache::EntryCache;
use crate::storage::{CommitFeed, StreamInfo, Tip};

/// A [`Gate`] and a [`Visible`] [`EntryCache`]: every read and tip query
/// of a backend that keeps its live entries in memory.
///
/// Reads work until the handle is closed (a stopped writer still serves
/// what it committed).
#[derive(Debug)]
pub(super) struct CachedLog {
    gate: Gate,
    visible: Visible<EntryCache>,
}

impl CachedLog {
    /// Serves `cache` for the handle `what` names.
    pub(super) fn new(what: &'static str, cache: EntryCache) -> Self {
        let next = cache.index().next();
        CachedLog {
            gate: Gate::new(what),
            visible: Visible::new(cache, next),
        }
    }

    /// The handle's lifecycle.
    pub(super) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The cache and its feed.
    pub(super) fn visible(&self) -> &Visible<EntryCache> {
        &self.visible
    }

    /// The feed of committed batches.
    pub(super) fn feed(&self) -> &CommitFeed {
        self.visible.feed()
    }

    /// Makes a committed batch readable and announces it.
    ///
    /// Errors: `Corrupt` when it does not continue the cache densely.
    pub(super) fn publish(&self, batch: Vec<LogEntry>) -> Result<()> {
        self.visible
            .publish_shared(batch.into(), |cache, batch| cache.add_batch(batch.clone()))
    }

    /// See [`Storage::read`](crate::Storage::read).
    pub(super) fn read(
        &self,
        tag: Option<&LogTag>,
        from: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        self.gate.check_open()?;
        self.visible.read().read(tag, from, max)
    }

    /// See [`Storage::read_versions`](crate::Storage::read_versions).
    pub(super) fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        self.gate.check_open()?;
        self.visible.read().read_versions(tag, from_version, max)
    }

    /// See [`Storage::read_prev`](crate::Storage::read_prev).
    pub(super) fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        self.gate.check_open()?;
        Ok(self.visible.read().read_prev(tag, before))
    }

    /// See [`Storage::tip`](crate::Storage::tip): what the cache holds.
    pub(super) fn tip(&self) -> Result<Tip> {
        self.gate.check_open()?;
        let cache = self.visible.read();
        Ok(Tip {
            first: cache.index().first(),
            next: cache.index().next(),
        })
    }

    /// See [`Storage::latest_version`](crate::Storage::latest_version).
    pub(super) fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.gate.check_open()?;
        Ok(self.visible.read().index().latest_version(tag))
    }

    /// See [`Storage::streams`](crate::Storage::streams).
    pub(super) fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<StreamInfo>> {
        self.gate.check_open()?;
        Ok(self.visible.read().index().streams(from, max))
    }

    /// Closes the handle and ends every subscription; true when this call
    /// closed it.
    pub(super) fn close(&self) -> bool {
        let first = self.gate.close();
        self.feed().close();
        first
    }
}
