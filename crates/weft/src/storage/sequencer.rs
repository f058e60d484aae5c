//! Assigns seqnums and stream versions, and checks conditional appends.
//!
//! Backends keep one [`Sequencer`] under their write lock. [`Sequencer::plan`]
//! is all-or-nothing: either every entry of a batch gets its numbers, or the
//! sequencer is untouched and a conflict is returned.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::model::{LogEntry, LogTag};

use super::NewEntry;

/// The authoritative counters of one log: next seqnum and, per primary tag,
/// next version.
#[derive(Debug, Default, Clone)]
pub struct Sequencer {
    next_seqnum: u64,
    next_versions: HashMap<LogTag, u64>,
}

impl Sequencer {
    /// A sequencer for an empty log.
    pub fn new() -> Self {
        Sequencer::default()
    }

    /// A sequencer resuming from known counters: the next seqnum and, per
    /// primary tag, the next version (a backend reopening after a trim,
    /// whose trimmed entries it can no longer replay).
    pub fn resume(
        next_seqnum: u64,
        next_versions: impl IntoIterator<Item = (LogTag, u64)>,
    ) -> Self {
        Sequencer {
            next_seqnum,
            next_versions: next_versions.into_iter().collect(),
        }
    }

    /// The seqnum the next entry gets.
    pub fn next_seqnum(&self) -> u64 {
        self.next_seqnum
    }

    /// The version the next entry with primary tag `tag` gets.
    pub fn next_version(&self, tag: &LogTag) -> u64 {
        self.next_versions.get(tag).copied().unwrap_or(0)
    }

    /// Every primary tag with its next version.
    pub fn versions(&self) -> impl Iterator<Item = (&LogTag, u64)> {
        self.next_versions.iter().map(|(t, v)| (t, *v))
    }

    /// Accounts for an entry recovered from durable storage (replay on open).
    ///
    /// Errors: `Corrupt` when the entry does not continue the log densely.
    pub fn observe(&mut self, entry: &LogEntry) -> Result<()> {
        if entry.seqnum != self.next_seqnum && self.next_seqnum != 0 {
            return Err(Error::corrupt(format!(
                "entry seqnum {} does not follow {}",
                entry.seqnum,
                self.next_seqnum.wrapping_sub(1)
            )));
        }
        let expected = self.next_version(entry.primary_tag());
        if entry.stream_version != expected && expected != 0 {
            return Err(Error::corrupt(format!(
                "entry {} of {} has version {}, expected {expected}",
                entry.seqnum,
                entry.primary_tag(),
                entry.stream_version
            )));
        }
        self.next_seqnum = entry.seqnum + 1;
        self.next_versions
            .insert(entry.primary_tag().clone(), entry.stream_version + 1);
        Ok(())
    }

    /// Moves the next seqnum forward to `next` (after a trim of a log whose
    /// entries are all gone, the numbering continues).
    pub fn advance_to(&mut self, next: u64) {
        self.next_seqnum = self.next_seqnum.max(next);
    }

    /// Assigns numbers to `batch` at `timestamp_ms`, or returns a conflict
    /// and changes nothing.
    ///
    /// Errors: `InvalidInput` for an empty batch; `Conflict` (with
    /// [`ErrorDetail::VersionConflict`](crate::ErrorDetail::VersionConflict))
    /// when an expected version does not match.
    pub fn plan(&mut self, batch: Vec<NewEntry>, timestamp_ms: u64) -> Result<Vec<LogEntry>> {
        if batch.is_empty() {
            return Err(Error::invalid_input(
                "an append batch needs at least one entry",
            ));
        }
        // First pass: check every expectation against versions that include
        // the batch's own earlier entries, without touching the counters
        // (nothing to check for unconditional batches, the common case).
        let conditional = batch.iter().any(|e| e.expected_version.is_some());
        let mut overlay: HashMap<&LogTag, u64> = HashMap::new();
        for entry in batch.iter().filter(|_| conditional) {
            let primary = &entry.tags[0];
            let next = overlay
                .get(primary)
                .copied()
                .unwrap_or_else(|| self.next_version(primary));
            if let Some(expected) = entry.expected_version
                && expected != next
            {
                return Err(Error::version_conflict(primary, expected, next));
            }
            overlay.insert(primary, next + 1);
        }
        // Second pass: assign.
        let mut out = Vec::with_capacity(batch.len());
        for entry in batch {
            // Clone the tag only for a stream's first entry.
            let version = match self.next_versions.get_mut(&entry.tags[0]) {
                Some(next) => {
                    *next += 1;
                    *next - 1
                }
                None => {
                    self.next_versions.insert(entry.tags[0].clone(), 1);
                    0
                }
            };
            out.push(LogEntry {
                seqnum: self.next_seqnum,
                stream_version: version,
                tags: entry.tags,
                data: entry.data,
                timestamp_ms,
            });
            self.next_seqnum += 1;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn entry(tag: &str, expected: Option<u64>) -> NewEntry {
        NewEntry {
            tags: vec![tag.parse().unwrap()],
            data: "x".into(),
            expected_version: expected,
            append_id: None,
        }
    }

    #[test]
    fn batch_conflict_changes_nothing() {
        let mut s = Sequencer::new();
        s.plan(vec![entry("a", None)], 1).unwrap();
        let err = s
            .plan(vec![entry("a", Some(1)), entry("a", Some(1))], 1)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert_eq!(err.conflict_next_version(), Some(2));
        assert_eq!(s.next_seqnum(), 1);
        assert_eq!(s.next_version(&"a".parse().unwrap()), 1);
        let planned = s
            .plan(
                vec![
                    entry("a", Some(1)),
                    entry("b", Some(0)),
                    entry("a", Some(2)),
                ],
                1,
            )
            .unwrap();
        let nums: Vec<_> = planned
            .iter()
            .map(|e| (e.seqnum, e.stream_version))
            .collect();
        assert_eq!(nums, vec![(1, 1), (2, 0), (3, 2)]);
    }
}
