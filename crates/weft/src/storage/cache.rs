//! An in-memory copy of a log's visible entries with their read index.
//!
//! The memory backend is this cache under a lock.
//!
//! Entries are kept in the committed batches they were published in, the
//! same `Arc` the commit feed hands to subscribers: publishing a batch
//! shares it instead of copying every entry (a clone per entry was a
//! quarter of a batched append's CPU).

use std::collections::VecDeque;

use super::feed::CommittedBatch;
use super::index::LogIndex;
use crate::error::{Error, Result};
use crate::model::{LogEntry, LogTag};

/// Entries `first..next` in seqnum order, indexed by tag and version.
#[derive(Debug, Default)]
pub struct EntryCache {
    index: LogIndex,
    /// Non-empty, dense batches in seqnum order; the first may start below
    /// `index.first()` (a trim inside it), the last ends at `index.next()`.
    batches: VecDeque<CommittedBatch>,
}

impl EntryCache {
    /// An empty cache whose first seqnum will be `first`.
    pub fn starting_at(first: u64) -> Self {
        EntryCache {
            index: LogIndex::starting_at(first),
            batches: VecDeque::new(),
        }
    }

    /// An empty cache of a log trimmed before `first`, whose version
    /// numbering goes on from `floors` (see
    /// [`LogIndex::with_version_floors`]).
    pub fn with_version_floors(
        first: u64,
        floors: impl IntoIterator<Item = (LogTag, u64)>,
    ) -> Self {
        EntryCache {
            index: LogIndex::with_version_floors(first, floors),
            batches: VecDeque::new(),
        }
    }

    /// The read index.
    pub fn index(&self) -> &LogIndex {
        &self.index
    }

    /// The entry `seqnum`, which the index holds.
    fn get(&self, seqnum: u64) -> LogEntry {
        // The batch holding it: the last one starting at or below it.
        let at = self.batches.partition_point(|b| b[0].seqnum <= seqnum) - 1;
        let batch = &self.batches[at];
        batch[(seqnum - batch[0].seqnum) as usize].clone()
    }

    /// Adds entries that continue the log.
    ///
    /// Errors: `Corrupt` when an entry does not follow densely.
    pub fn extend(&mut self, entries: impl IntoIterator<Item = LogEntry>) -> Result<()> {
        self.add_batch(entries.into_iter().collect::<Vec<_>>().into())
    }

    /// Adds a committed batch that continues the log, sharing it.
    ///
    /// Errors: `Corrupt` when an entry does not follow densely; the
    /// entries before it are kept.
    pub fn add_batch(&mut self, batch: CommittedBatch) -> Result<()> {
        for (i, entry) in batch.iter().enumerate() {
            if let Err(e) = self
                .index
                .insert(entry.seqnum, &entry.tags, entry.stream_version)
            {
                if i > 0 {
                    self.batches.push_back(batch[..i].to_vec().into());
                }
                return Err(e);
            }
        }
        if !batch.is_empty() {
            self.batches.push_back(batch);
        }
        Ok(())
    }

    /// See [`Storage::read`](super::Storage::read).
    pub fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        let seqnums = self.index.seqnums(tag, from, max)?;
        Ok(seqnums.into_iter().map(|s| self.get(s)).collect())
    }

    /// See [`Storage::read_versions`](super::Storage::read_versions).
    pub fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let seqnums = self.index.version_seqnums(tag, from_version, max)?;
        Ok(seqnums.into_iter().map(|s| self.get(s)).collect())
    }

    /// See [`Storage::read_prev`](super::Storage::read_prev).
    pub fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Option<LogEntry> {
        self.index.prev(tag, before).map(|s| self.get(s))
    }

    /// Checks that `through` can be trimmed.
    ///
    /// Errors: `InvalidInput` when `through` is not below the next seqnum.
    pub fn check_trim(&self, through: u64) -> Result<()> {
        if through >= self.index.next() {
            return Err(Error::invalid_input(format!(
                "cannot trim through {through}: the log ends before it (next seqnum {})",
                self.index.next()
            )));
        }
        Ok(())
    }

    /// Drops every entry with seqnum `<= through`.
    pub fn trim(&mut self, through: u64) {
        self.index.trim(through);
        let first = self.index.first();
        while self
            .batches
            .front()
            .is_some_and(|b| b[b.len() - 1].seqnum < first)
        {
            self.batches.pop_front();
        }
    }
}
