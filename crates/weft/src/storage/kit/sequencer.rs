//! Assigns seqnums and stream versions, and checks conditional appends, for
//! a backend that is its log's only writer.
//!
//! Single-writer backends (memory, dir, the bucket writer) keep one
//! [`Sequencer`] under their write lock. [`Sequencer::plan`] is
//! all-or-nothing: either every entry of a batch gets its numbers, or the
//! sequencer is untouched and a conflict is returned. A backend whose
//! numbers are assigned elsewhere (a database shared by many writer
//! processes) has no sequencer: its database checks and numbers.
//!
//! The next version of each stream lives in a [`VersionTable`]. The default,
//! [`MemoryVersions`], holds every stream in a `HashMap`; a table that looks
//! streams up on demand (a bounded cache over a persistent index) fits the
//! same trait, which is why its lookups take `&mut self` (to fill a cache)
//! and are fallible (to read from disk).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use crate::error::{Error, Result};
use crate::model::{LogEntry, LogTag};

use crate::storage::NewEntry;

/// Where a [`Sequencer`] keeps each stream's next version.
pub trait VersionTable: Send + 'static {
    /// The version the next entry with primary tag `tag` gets; `None` for a
    /// stream never written (whose next version is 0).
    ///
    /// Errors: the table's own (I/O kinds, `Corrupt`).
    fn next_version(&mut self, tag: &LogTag) -> Result<Option<u64>>;

    /// Records `next` as the version the next entry of `tag` gets.
    ///
    /// Errors: the table's own.
    fn set_next_version(&mut self, tag: &LogTag, next: u64) -> Result<()>;
}

/// Every stream's next version in a `HashMap`: fine while the number of
/// streams fits in memory.
#[derive(Debug, Default, Clone)]
pub struct MemoryVersions {
    next: HashMap<LogTag, u64>,
}

impl MemoryVersions {
    /// A table holding `versions` (tag, next version).
    pub fn from_versions(versions: impl IntoIterator<Item = (LogTag, u64)>) -> Self {
        MemoryVersions {
            next: versions.into_iter().collect(),
        }
    }

    /// Every stream with its next version.
    pub fn iter(&self) -> impl Iterator<Item = (&LogTag, u64)> {
        self.next.iter().map(|(t, v)| (t, *v))
    }
}

impl VersionTable for MemoryVersions {
    fn next_version(&mut self, tag: &LogTag) -> Result<Option<u64>> {
        Ok(self.next.get(tag).copied())
    }

    fn set_next_version(&mut self, tag: &LogTag, next: u64) -> Result<()> {
        // Clone the tag only for a stream's first entry.
        match self.next.get_mut(tag) {
            Some(v) => *v = next,
            None => {
                self.next.insert(tag.clone(), next);
            }
        }
        Ok(())
    }
}

/// The authoritative counters of one log: next seqnum and, per primary tag,
/// next version; and the timestamp of the newest entry, which no later
/// entry goes below.
///
/// Timestamps are monotonic per log: an entry's timestamp is the larger of
/// the clock and the previous entry's, so a clock that goes back repeats
/// the newest timestamp until it catches up instead of writing an earlier
/// one. That is what lets a read by time binary-search over seqnums
/// ([`Storage::seek_time`](crate::storage::Storage::seek_time)).
#[derive(Debug, Default, Clone)]
pub struct Sequencer<V = MemoryVersions> {
    next_seqnum: u64,
    versions: V,
    last_timestamp_ms: u64,
}

impl Sequencer<MemoryVersions> {
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
        Sequencer::with_table(next_seqnum, MemoryVersions::from_versions(next_versions))
    }

    /// Every primary tag with its next version.
    pub fn versions(&self) -> impl Iterator<Item = (&LogTag, u64)> {
        self.versions.iter()
    }
}

impl<V: VersionTable> Sequencer<V> {
    /// A sequencer whose next seqnum is `next_seqnum` and whose versions
    /// live in `versions`.
    pub fn with_table(next_seqnum: u64, versions: V) -> Self {
        Sequencer {
            next_seqnum,
            versions,
            last_timestamp_ms: 0,
        }
    }

    /// Accounts for an entry stamped `timestamp_ms` that is already in the
    /// log (the newest one, on open): later entries get no earlier stamp.
    pub fn note_timestamp(&mut self, timestamp_ms: u64) {
        self.last_timestamp_ms = self.last_timestamp_ms.max(timestamp_ms);
    }

    /// The timestamp the next batch gets when the clock reads `now_ms`.
    fn stamp(&self, now_ms: u64) -> u64 {
        now_ms.max(self.last_timestamp_ms)
    }

    /// The seqnum the next entry gets.
    pub fn next_seqnum(&self) -> u64 {
        self.next_seqnum
    }

    /// The version the next entry with primary tag `tag` gets.
    ///
    /// Errors: the version table's.
    pub fn next_version(&mut self, tag: &LogTag) -> Result<u64> {
        Ok(self.versions.next_version(tag)?.unwrap_or(0))
    }

    /// The version table.
    pub fn table(&self) -> &V {
        &self.versions
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
        let expected = self.next_version(entry.primary_tag())?;
        if entry.stream_version != expected && expected != 0 {
            return Err(Error::corrupt(format!(
                "entry {} of {} has version {}, expected {expected}",
                entry.seqnum,
                entry.primary_tag(),
                entry.stream_version
            )));
        }
        self.next_seqnum = entry.seqnum + 1;
        self.note_timestamp(entry.timestamp_ms);
        self.versions
            .set_next_version(entry.primary_tag(), entry.stream_version + 1)
    }

    /// Moves the next seqnum forward to `next` (after a trim of a log whose
    /// entries are all gone, the numbering continues).
    pub fn advance_to(&mut self, next: u64) {
        self.next_seqnum = self.next_seqnum.max(next);
    }

    /// Assigns numbers to `batch` at `timestamp_ms` (raised to the newest
    /// entry's timestamp when the clock is behind it), or returns a
    /// conflict and changes nothing.
    ///
    /// The batch was checked with
    /// [`check_append`](crate::storage::kit::check_append) (an empty batch
    /// numbers nothing).
    ///
    /// Errors: `Conflict` (with
    /// [`ErrorDetail::VersionConflict`](crate::ErrorDetail::VersionConflict))
    /// when an expected version does not match; `InvalidInput` for an
    /// entry without a tag; the version table's (the counters may then be
    /// partly moved: the backend must stop writing).
    pub fn plan(&mut self, batch: Vec<NewEntry>, timestamp_ms: u64) -> Result<Vec<LogEntry>> {
        let first = self.next_seqnum;
        // A lone entry, the common case, needs neither an overlay nor a
        // list of versions: one lookup, one check.
        if let [entry] = &batch[..] {
            let next = self.number_one(entry)?;
            let timestamp_ms = self.stamp(timestamp_ms);
            self.last_timestamp_ms = timestamp_ms;
            return Ok(numbered(batch, first, [next], timestamp_ms));
        }
        // First pass: number every entry and check every expectation
        // against versions that include the batch's own earlier entries,
        // without touching the counters. One hash lookup per entry: the
        // entry API finds or fills the stream's slot and the count moves
        // in place.
        let mut versions = Vec::with_capacity(batch.len());
        let mut overlay: HashMap<&LogTag, u64> = HashMap::new();
        for entry in &batch {
            let primary = primary_of(entry)?;
            let next = match overlay.entry(primary) {
                Entry::Occupied(slot) => slot.into_mut(),
                Entry::Vacant(slot) => {
                    slot.insert(self.versions.next_version(primary)?.unwrap_or(0))
                }
            };
            check_expected(entry, *next)?;
            versions.push(*next);
            *next += 1;
        }
        // Second pass: move the counters.
        for (tag, next) in &overlay {
            self.versions.set_next_version(tag, *next)?;
        }
        self.next_seqnum += batch.len() as u64;
        let timestamp_ms = self.stamp(timestamp_ms);
        self.last_timestamp_ms = timestamp_ms;
        Ok(numbered(batch, first, versions, timestamp_ms))
    }

    /// Numbers one entry as [`plan`](Sequencer::plan) numbers a batch of
    /// one, without a vector either way.
    ///
    /// Errors: as [`plan`](Sequencer::plan).
    pub fn plan_one(&mut self, entry: NewEntry, timestamp_ms: u64) -> Result<LogEntry> {
        let seqnum = self.next_seqnum;
        let version = self.number_one(&entry)?;
        let timestamp_ms = self.stamp(timestamp_ms);
        self.last_timestamp_ms = timestamp_ms;
        Ok(LogEntry {
            seqnum,
            stream_version: version,
            tags: entry.tags,
            data: entry.data,
            timestamp_ms,
            append_id: entry.append_id,
        })
    }

    /// Checks `entry`'s expectation against its stream's next version and
    /// takes that version and the next seqnum for it.
    fn number_one(&mut self, entry: &NewEntry) -> Result<u64> {
        let primary = primary_of(entry)?;
        let next = self.next_version(primary)?;
        check_expected(entry, next)?;
        self.versions.set_next_version(primary, next + 1)?;
        self.next_seqnum += 1;
        Ok(next)
    }

    /// Gives back the numbers of `planned`, the batch the last
    /// [`plan`](Sequencer::plan) returned, when it could not be handed to
    /// durable storage after all. Nothing may have been planned since.
    ///
    /// Errors: `Internal` when `planned` is not the last planned batch; the
    /// version table's.
    pub fn unplan(&mut self, planned: &[LogEntry]) -> Result<()> {
        let Some(first) = planned.first() else {
            return Ok(());
        };
        if first.seqnum + planned.len() as u64 != self.next_seqnum {
            return Err(Error::internal(format!(
                "cannot give back entries {}..{}: the next seqnum is {}",
                first.seqnum,
                first.seqnum + planned.len() as u64,
                self.next_seqnum
            )));
        }
        // Each stream goes back to the version of its first planned entry.
        let mut seen: Vec<&LogTag> = Vec::new();
        for entry in planned {
            let tag = entry.primary_tag();
            if !seen.contains(&tag) {
                seen.push(tag);
                self.versions.set_next_version(tag, entry.stream_version)?;
            }
        }
        self.next_seqnum = first.seqnum;
        Ok(())
    }
}

/// `batch` as log entries from seqnum `first`, with `versions` in order.
fn numbered(
    batch: Vec<NewEntry>,
    first: u64,
    versions: impl IntoIterator<Item = u64>,
    timestamp_ms: u64,
) -> Vec<LogEntry> {
    // Pushed into a fresh vector: a `collect` here would reuse the batch's
    // allocation and then shrink it to the smaller entries, a `realloc`
    // per append on the writer's path.
    let mut planned = Vec::with_capacity(batch.len());
    for (seqnum, (entry, version)) in (first..).zip(batch.into_iter().zip(versions)) {
        planned.push(LogEntry {
            seqnum,
            stream_version: version,
            tags: entry.tags,
            data: entry.data,
            timestamp_ms,
            append_id: entry.append_id,
        });
    }
    planned
}

/// `Conflict` when `entry`'s condition does not admit a stream at `next`.
fn check_expected(entry: &NewEntry, next: u64) -> Result<()> {
    match entry.expected_version {
        Some(expected) => expected.check(&entry.tags[0], next),
        None => Ok(()),
    }
}

/// An entry's primary tag. [`check_append`](crate::storage::kit::check_append)
/// refuses an entry without one; this keeps a direct caller that skipped it
/// from a panic.
fn primary_of(entry: &NewEntry) -> Result<&LogTag> {
    entry
        .tags
        .first()
        .ok_or_else(|| Error::invalid_input("an entry needs at least one tag"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn entry(tag: &str, expected: Option<u64>) -> NewEntry {
        NewEntry {
            tags: vec![tag.parse().unwrap()],
            data: "x".into(),
            expected_version: expected.map(Into::into),
            append_id: None,
        }
    }

    /// `plan_one` numbers, refuses and moves the counters exactly as
    /// `plan` of a batch of one does, case by case, from the same state.
    #[test]
    fn plan_one_is_plan_of_a_batch_of_one() {
        let no_tags = NewEntry {
            tags: Vec::new(),
            ..entry("a", None)
        };
        let cases: Vec<(&str, NewEntry)> = vec![
            ("new stream", entry("c", None)),
            ("existing stream", entry("a", None)),
            ("expected version met", entry("a", Some(2))),
            ("expected version missed", entry("a", Some(7))),
            ("new stream expected at 0", entry("d", Some(0))),
            ("new stream expected past 0", entry("e", Some(1))),
            ("no tags", no_tags),
        ];
        for (name, e) in cases {
            let mut by_batch = Sequencer::new();
            by_batch
                .plan(
                    vec![entry("a", None), entry("a", None), entry("b", None)],
                    5,
                )
                .unwrap();
            let mut by_one = by_batch.clone();
            let batch = by_batch.plan(vec![e.clone()], 9);
            let one = by_one.plan_one(e, 9);
            match (batch, one) {
                (Ok(mut b), Ok(o)) => {
                    assert_eq!(b.len(), 1, "{name}");
                    assert_eq!(b.pop().unwrap(), o, "{name}");
                }
                (Err(b), Err(o)) => {
                    assert_eq!(b.kind(), o.kind(), "{name}");
                    assert_eq!(
                        b.conflict_next_version(),
                        o.conflict_next_version(),
                        "{name}"
                    );
                }
                (b, o) => panic!("{name}: plan gave {b:?}, plan_one gave {o:?}"),
            }
            assert_eq!(by_batch.next_seqnum(), by_one.next_seqnum(), "{name}");
            for tag in ["a", "b", "c", "d", "e"] {
                let tag: LogTag = tag.parse().unwrap();
                assert_eq!(
                    by_batch.next_version(&tag).unwrap(),
                    by_one.next_version(&tag).unwrap(),
                    "{name}: {tag}"
                );
            }
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
        assert_eq!(s.next_version(&"a".parse().unwrap()).unwrap(), 1);
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

    /// A table that keeps one stream in memory and looks the others up in
    /// a backing map on demand, as a bounded cache over a persistent index
    /// would; it can also fail like one.
    #[derive(Default)]
    struct OneSlot {
        backing: std::collections::BTreeMap<LogTag, u64>,
        slot: Option<(LogTag, u64)>,
        lookups: usize,
        broken: bool,
    }

    impl VersionTable for OneSlot {
        fn next_version(&mut self, tag: &LogTag) -> Result<Option<u64>> {
            if self.broken {
                return Err(Error::new(ErrorKind::Unavailable, "index offline"));
            }
            if let Some((t, v)) = &self.slot
                && t == tag
            {
                return Ok(Some(*v));
            }
            self.lookups += 1;
            let found = self.backing.get(tag).copied();
            if let Some(v) = found {
                self.slot = Some((tag.clone(), v));
            }
            Ok(found)
        }

        fn set_next_version(&mut self, tag: &LogTag, next: u64) -> Result<()> {
            self.backing.insert(tag.clone(), next);
            self.slot = Some((tag.clone(), next));
            Ok(())
        }
    }

    #[test]
    fn versions_can_be_looked_up_on_demand() {
        let mut s = Sequencer::with_table(0, OneSlot::default());
        for tags in [vec!["a", "b", "a"], vec!["b"], vec!["a", "c"]] {
            let batch = tags.iter().map(|t| entry(t, None)).collect();
            s.plan(batch, 1).unwrap();
        }
        let err = s.plan(vec![entry("b", Some(1))], 1).unwrap_err();
        assert_eq!(err.conflict_next_version(), Some(2));
        let planned = s
            .plan(vec![entry("c", Some(1)), entry("a", Some(3))], 1)
            .unwrap();
        let nums: Vec<_> = planned
            .iter()
            .map(|e| (e.seqnum, e.stream_version))
            .collect();
        assert_eq!(nums, vec![(6, 1), (7, 3)]);
        assert!(s.table().lookups > 0, "streams were looked up");
        // A failing lookup is the append's error; nothing is numbered.
        s.versions.broken = true;
        let err = s.plan(vec![entry("a", None)], 1).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert_eq!(s.next_seqnum(), 8);
    }

    #[test]
    fn unplan_gives_back_the_last_batch_only() {
        let mut s = Sequencer::new();
        s.plan(vec![entry("a", None)], 1).unwrap();
        let planned = s
            .plan(
                vec![entry("a", None), entry("b", None), entry("a", None)],
                1,
            )
            .unwrap();
        let older = s.plan(vec![entry("c", None)], 1).unwrap();
        assert_eq!(
            s.unplan(&planned).unwrap_err().kind(),
            ErrorKind::Internal,
            "not the last batch"
        );
        s.unplan(&older).unwrap();
        s.unplan(&planned).unwrap();
        assert_eq!(s.next_seqnum(), 1);
        for (tag, next) in [("a", 1), ("b", 0), ("c", 0)] {
            assert_eq!(s.next_version(&tag.parse().unwrap()).unwrap(), next);
        }
        let again = s.plan(vec![entry("a", Some(1))], 1).unwrap();
        assert_eq!((again[0].seqnum, again[0].stream_version), (1, 1));
    }
}
