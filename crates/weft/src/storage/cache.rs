//! An in-memory copy of a log's visible entries with their read index.
//!
//! The memory backend is this cache under a lock; the bucket backends keep
//! one as their local, read-serving copy of what the bucket holds.

use std::collections::VecDeque;

use super::index::LogIndex;
use crate::error::{Error, Result};
use crate::model::{LogEntry, LogTag};

/// Entries `first..next` in seqnum order, indexed by tag and version.
#[derive(Debug, Default)]
pub struct EntryCache {
    index: LogIndex,
    /// `entries[i]` has seqnum `index.first() + i`.
    entries: VecDeque<LogEntry>,
}

impl EntryCache {
    /// An empty cache whose first seqnum will be `first`.
    pub fn starting_at(first: u64) -> Self {
        EntryCache {
            index: LogIndex::starting_at(first),
            entries: VecDeque::new(),
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
            entries: VecDeque::new(),
        }
    }

    /// The read index.
    pub fn index(&self) -> &LogIndex {
        &self.index
    }

    fn get(&self, seqnum: u64) -> LogEntry {
        self.entries[(seqnum - self.index.first()) as usize].clone()
    }

    /// Adds entries that continue the log.
    ///
    /// Errors: `Corrupt` when an entry does not follow densely.
    pub fn extend(&mut self, entries: impl IntoIterator<Item = LogEntry>) -> Result<()> {
        for entry in entries {
            self.index
                .insert(entry.seqnum, &entry.tags, entry.stream_version)?;
            self.entries.push_back(entry);
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
        let drop = ((through.saturating_add(1)).saturating_sub(self.index.first()) as usize)
            .min(self.entries.len());
        self.entries.drain(..drop);
        self.index.trim(through);
    }
}
