//! Assigns seqnums and stream versions, and checks conditional appends.
//!
//! Backends keep one [`Sequencer`] under their write lock. [`Sequencer::plan`]
//! is all-or-nothing: either every entry of a batch gets its numbers, or the
//! sequencer is untouched and a conflict is returned.
//!
//! A sequencer either holds the next version of every stream (memory,
//! bucket) or, [made with a lookup](Sequencer::with_lookup), only a bounded
//! cache of them, asking a [`VersionLookup`] (the persistent index) for a
//! stream it does not hold, so ten million streams need not live in memory.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::{LogEntry, LogTag};

use super::NewEntry;

/// Where a [`Sequencer`] finds the next version of a stream it does not
/// hold. It must count every entry committed so far.
pub trait VersionLookup: Send + Sync {
    /// The version `tag`'s next entry as a primary tag gets (0 for a new
    /// stream).
    ///
    /// Errors: whatever reading the source fails with.
    fn next_version(&self, tag: &LogTag) -> Result<u64>;
}

impl VersionLookup for crate::index::Index {
    fn next_version(&self, tag: &LogTag) -> Result<u64> {
        crate::index::Index::next_version(self, tag)
    }
}

/// The authoritative counters of one log: next seqnum and, per primary tag,
/// next version.
#[derive(Default, Clone)]
pub struct Sequencer {
    next_seqnum: u64,
    /// Every stream's next version, or (with `lookup`) a cache of some.
    next_versions: HashMap<LogTag, u64>,
    lookup: Option<Arc<dyn VersionLookup>>,
    /// With `lookup`: how many streams the cache holds before
    /// [`Sequencer::shrink_cache`] empties it.
    capacity: usize,
}

impl std::fmt::Debug for Sequencer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequencer")
            .field("next_seqnum", &self.next_seqnum)
            .field("streams_held", &self.next_versions.len())
            .field("lookup", &self.lookup.is_some())
            .finish()
    }
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
            ..Sequencer::default()
        }
    }

    /// A sequencer resuming at `next_seqnum` that holds at most about
    /// `capacity` streams' versions and asks `lookup` for the others.
    ///
    /// The caller keeps `lookup` up to date with every committed entry
    /// before planning the next group, and calls
    /// [`shrink_cache`](Sequencer::shrink_cache) only between groups.
    pub fn with_lookup(next_seqnum: u64, lookup: Arc<dyn VersionLookup>, capacity: usize) -> Self {
        Sequencer {
            next_seqnum,
            next_versions: HashMap::new(),
            lookup: Some(lookup),
            capacity: capacity.max(1),
        }
    }

    /// Empties the cache of a sequencer made [with a
    /// lookup](Sequencer::with_lookup) once it holds more than its
    /// capacity. Call it only when every planned entry has reached the
    /// lookup (between write groups). A no-op for other sequencers.
    pub fn shrink_cache(&mut self) {
        if self.lookup.is_some() && self.next_versions.len() > self.capacity {
            self.next_versions.clear();
        }
    }

    /// Makes sure `tag`'s next version is held, asking the lookup.
    fn hold(&mut self, tag: &LogTag) -> Result<()> {
        if let Some(lookup) = &self.lookup
            && !self.next_versions.contains_key(tag)
        {
            let v = lookup.next_version(tag)?;
            self.next_versions.insert(tag.clone(), v);
        }
        Ok(())
    }

    /// The seqnum the next entry gets.
    pub fn next_seqnum(&self) -> u64 {
        self.next_seqnum
    }

    /// The version the next entry with primary tag `tag` gets. A
    /// sequencer [with a lookup](Sequencer::with_lookup) answers only for
    /// streams it holds (0 for the others): ask its lookup instead.
    pub fn next_version(&self, tag: &LogTag) -> u64 {
        self.next_versions.get(tag).copied().unwrap_or(0)
    }

    /// Every primary tag held with its next version (with a lookup: only
    /// the cached ones).
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
        // With a lookup, fetch every stream's version first, so the passes
        // below cannot fail halfway (fetching changes no number).
        if self.lookup.is_some() {
            for entry in &batch {
                self.hold(&entry.tags[0])?;
            }
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

    /// Versions kept elsewhere, as the persistent index keeps them.
    struct Table(std::sync::Mutex<HashMap<LogTag, u64>>);

    impl VersionLookup for Table {
        fn next_version(&self, tag: &LogTag) -> Result<u64> {
            if tag.namespace() == "broken" {
                return Err(Error::corrupt("unreadable"));
            }
            Ok(self.0.lock().unwrap().get(tag).copied().unwrap_or(0))
        }
    }

    #[test]
    fn a_bounded_cache_over_a_lookup_numbers_like_a_full_map() {
        let table = Arc::new(Table(Default::default()));
        let mut bounded = Sequencer::with_lookup(0, table.clone(), 3);
        let mut full = Sequencer::new();
        for i in 0..200u64 {
            let tag = format!("s{}", (i * 7) % 11);
            let batch = vec![entry(&tag, None), entry(&format!("s{}", i % 5), None)];
            let a = bounded.plan(batch.clone(), 1).unwrap();
            let b = full.plan(batch, 1).unwrap();
            assert_eq!(a, b);
            // The backend records the group, then shrinks between groups.
            let mut t = table.0.lock().unwrap();
            for e in &a {
                t.insert(e.tags[0].clone(), e.stream_version + 1);
            }
            drop(t);
            bounded.shrink_cache();
            assert!(bounded.versions().count() <= 3);
        }
        // Conditional appends check against looked-up versions.
        bounded.shrink_cache();
        let next = full.next_version(&"s3".parse().unwrap());
        let err = bounded
            .plan(vec![entry("s3", Some(next + 1))], 1)
            .unwrap_err();
        assert_eq!(err.conflict_next_version(), Some(next));
        bounded.plan(vec![entry("s3", Some(next))], 1).unwrap();
        // A failed lookup fails the batch and numbers nothing.
        let seq = bounded.next_seqnum();
        let err = bounded
            .plan(vec![entry("s1", None), entry("broken", None)], 1)
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
        assert_eq!(bounded.next_seqnum(), seq);
    }
}
