//! An in-memory copy of a log's visible entries with their read index.
//!
//! The memory backend is this cache under a lock.
//!
//! Entries are kept in the committed batches they were published in, the
//! same `Arc` the commit feed hands to subscribers: publishing a batch
//! shares it instead of copying every entry (a clone per entry was a
//! quarter of a batched append's CPU).

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::model::{LogEntry, LogTag};
use crate::storage::kit::CommittedBatch;
use crate::storage::kit::MemoryIndex;

/// Entries `first..next` in seqnum order, indexed by tag and version.
#[derive(Debug, Default)]
pub(super) struct EntryCache {
    index: MemoryIndex,
    /// Non-empty, dense batches in seqnum order; the first may start below
    /// `index.first()` (a trim inside it), the last ends at `index.next()`.
    batches: VecDeque<CommittedBatch>,
}

impl EntryCache {
    /// The read index.
    pub(super) fn index(&self) -> &MemoryIndex {
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
    #[cfg(test)]
    fn extend(&mut self, entries: impl IntoIterator<Item = LogEntry>) -> Result<()> {
        self.add_batch(entries.into_iter().collect::<Vec<_>>().into())
    }

    /// Adds a committed batch that continues the log, sharing it.
    ///
    /// Errors: `Corrupt` when an entry does not follow densely; the
    /// entries before it are kept.
    pub(super) fn add_batch(&mut self, batch: CommittedBatch) -> Result<()> {
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

    /// See [`Storage::read`](crate::storage::Storage::read).
    pub(super) fn read(
        &self,
        tag: Option<&LogTag>,
        from: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let seqnums = self.index.seqnums(tag, from, max)?;
        Ok(seqnums.into_iter().map(|s| self.get(s)).collect())
    }

    /// See [`Storage::read_versions`](crate::storage::Storage::read_versions).
    pub(super) fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let seqnums = self.index.version_seqnums(tag, from_version, max)?;
        Ok(seqnums.into_iter().map(|s| self.get(s)).collect())
    }

    /// See [`Storage::read_prev`](crate::storage::Storage::read_prev).
    pub(super) fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Option<LogEntry> {
        self.index.prev(tag, before).map(|s| self.get(s))
    }

    /// Empties the payloads of the cached entries `seqnums` (ascending;
    /// those not cached are skipped) and returns how many had one. A batch
    /// that holds one is copied once with its erased entries: subscribers
    /// that were handed the old batch keep what they were given.
    pub(super) fn erase(&mut self, seqnums: &[u64]) -> u64 {
        let mut erased = 0;
        let mut todo = seqnums.iter().copied().peekable();
        for batch in self.batches.iter_mut() {
            let (first, next) = (batch[0].seqnum, batch[0].seqnum + batch.len() as u64);
            while todo.next_if(|&s| s < first).is_some() {}
            let mut copy: Option<Vec<LogEntry>> = None;
            while let Some(s) = todo.next_if(|&s| s < next) {
                let at = (s - first) as usize;
                if batch[at].data.is_empty() {
                    continue;
                }
                let entries = copy.get_or_insert_with(|| batch.to_vec());
                entries[at].data = bytes::Bytes::new();
                erased += 1;
            }
            if let Some(entries) = copy {
                *batch = entries.into();
            }
            if todo.peek().is_none() {
                break;
            }
        }
        erased
    }

    /// Checks that `through` can be trimmed.
    ///
    /// Errors: `InvalidInput` when `through` is not below the next seqnum.
    pub(super) fn check_trim(&self, through: u64) -> Result<()> {
        if through >= self.index.next() {
            return Err(Error::invalid_input(format!(
                "cannot trim through {through}: the log ends before it (next seqnum {})",
                self.index.next()
            )));
        }
        Ok(())
    }

    /// Drops every entry with seqnum `<= through`.
    pub(super) fn trim(&mut self, through: u64) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn entries(tag: &str, seqnums: std::ops::Range<u64>, first_version: u64) -> Vec<LogEntry> {
        seqnums
            .enumerate()
            .map(|(i, s)| LogEntry {
                seqnum: s,
                stream_version: first_version + i as u64,
                tags: vec![tag.parse().unwrap()],
                data: vec![s as u8].into(),
                timestamp_ms: 0,
                append_id: None,
            })
            .collect()
    }

    fn seqnums(got: &[LogEntry]) -> Vec<u64> {
        got.iter().map(|e| e.seqnum).collect()
    }

    #[test]
    fn reads_across_shared_batches_and_a_trim_inside_one() {
        let mut cache = EntryCache::default();
        let first: CommittedBatch = entries("a", 0..3, 0).into();
        cache.add_batch(first.clone()).unwrap();
        cache.extend(entries("b", 3..4, 0)).unwrap();
        cache.add_batch(entries("a", 4..7, 3).into()).unwrap();
        assert_eq!(
            seqnums(&cache.read(None, 0, 100).unwrap()),
            (0..7).collect::<Vec<_>>()
        );
        let a: LogTag = "a".parse().unwrap();
        assert_eq!(seqnums(&cache.read(Some(&a), 2, 3).unwrap()), vec![2, 4, 5]);
        assert_eq!(cache.read_versions(&a, 3, 1).unwrap()[0].seqnum, 4);
        assert_eq!(cache.read_prev(None, 4).unwrap().data, vec![3u8]);
        // The cache shares the published batch rather than copying it.
        assert_eq!(std::sync::Arc::strong_count(&first), 2);

        // A trim inside the third batch drops the two before it.
        cache.trim(4);
        assert_eq!(std::sync::Arc::strong_count(&first), 1);
        assert_eq!(seqnums(&cache.read(None, 5, 100).unwrap()), vec![5, 6]);
        assert_eq!(
            cache.read(None, 4, 1).unwrap_err().kind(),
            ErrorKind::Trimmed
        );
        assert_eq!(cache.read_prev(None, 6).unwrap().seqnum, 5);
        assert!(cache.read_prev(None, 5).is_none());
    }

    #[test]
    fn a_batch_that_breaks_density_keeps_what_came_before_it() {
        let mut cache = EntryCache::default();
        let mut batch = entries("a", 0..3, 0);
        batch[2].seqnum = 9;
        let err = cache.add_batch(batch.into()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert_eq!(seqnums(&cache.read(None, 0, 10).unwrap()), vec![0, 1]);
        cache.extend(entries("a", 2..3, 2)).unwrap();
        assert_eq!(cache.index().next(), 3);
    }
}
