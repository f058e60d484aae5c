//! A sequencer's version table over the persistent index: a bounded set of
//! streams held in memory, every other stream looked up in the index on
//! demand — so ten million streams cost disk, not memory.
//!
//! A single-writer backend numbers entries with a
//! [`Sequencer`](super::sequencer::Sequencer), which needs each stream's
//! next version. [`IndexVersions`] holds the streams in use and asks the
//! index for the others. That is exact as long as a stream is forgotten
//! only once the index knows the version the table handed out, and the
//! two backends that use it see to that in the two ways their indexes
//! allow:
//!
//! * the dir writer records every committed group in the index before it
//!   plans the next one, so between groups the index agrees with every
//!   held stream and [`IndexVersions::shrink`] may age them out without
//!   asking;
//! * a bucket writer's index learns of entries only once they are
//!   committed, after later groups were planned: when the table holds its
//!   capacity it forgets only the streams whose held version the index
//!   already has (one lookup each, amortized over the insertions since the
//!   last such pass).
//!
//! A bucket writer that opened from a state checkpoint has an index that
//! does not know every stream yet: until its history fill is done, a
//! stream it does not hold is answered from the checkpoint's versions
//! ([`IndexVersions::starting_at_checkpoint`]) and nothing is forgotten.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::sequencer::VersionTable;
use crate::error::Result;
use crate::index::{FastMap, Index};
use crate::model::LogTag;

/// Every stream's next version as of a state checkpoint.
pub type Floors = Arc<HashMap<LogTag, u64>>;

/// Whether a log's history fill is still going on, asked of the log
/// without this module knowing its type.
#[derive(Clone)]
pub struct FillWatch(Arc<dyn Fn() -> bool + Send + Sync>);

impl FillWatch {
    /// A watch that asks `filling`.
    pub fn new(filling: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        FillWatch(Arc::new(filling))
    }

    fn filling(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for FillWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FillWatch").field(&self.filling()).finish()
    }
}

/// The held streams in two generations: a stream used since the last turn
/// is in `young`; a turn makes `young` the `old` generation and forgets
/// the previous one. So a busy stream stays held across turns (every use
/// moves it into `young`) while idle ones age out, and no turn empties the
/// table at once (which sent every stream of a busy log to the index at
/// the same moment).
#[derive(Debug, Default)]
struct Held {
    young: FastMap<LogTag, u64>,
    old: FastMap<LogTag, u64>,
    capacity: usize,
    /// How many held streams start the next pass that forgets those the
    /// index knows (see [`IndexVersions::forget_indexed`]).
    check_at: usize,
}

impl Held {
    fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }
}

/// A [`VersionTable`] that holds a bounded set of streams and looks the
/// others up in an [`Index`] (see the module docs for when it may forget
/// one).
#[derive(Debug)]
pub struct IndexVersions {
    index: Arc<Index>,
    held: Mutex<Held>,
    /// The index learns of versions only after later groups are planned:
    /// forget only what it knows (a bucket writer), never by age.
    lagging: bool,
    /// While the writer fills in the history before the state checkpoint
    /// it opened from: the checkpoint's versions, and whether the fill
    /// goes on.
    while_filling: Option<(Floors, FillWatch)>,
}

impl IndexVersions {
    /// A table over `index` holding at most about `capacity` streams.
    pub fn new(index: Arc<Index>, capacity: usize) -> Self {
        let capacity = capacity.max(2);
        IndexVersions {
            index,
            held: Mutex::new(Held {
                young: FastMap::default(),
                old: FastMap::default(),
                capacity,
                check_at: capacity,
            }),
            lagging: false,
            while_filling: None,
        }
    }

    /// The table over an index that learns of a group only once it is
    /// committed, after later groups were planned: it forgets only the
    /// streams whose version the index has, and [`Self::shrink`] does
    /// nothing.
    pub fn lagging(mut self) -> Self {
        self.lagging = true;
        self
    }

    /// The table of a writer that opened from a state checkpoint on an
    /// index that does not cover it yet: `floors` are every stream's next
    /// versions as of the checkpoint, `live` those of the entries read
    /// after it; the index answers for the other streams once `fill` says
    /// the log has filled in its history. Nothing is forgotten until then.
    pub fn starting_at_checkpoint(
        mut self,
        floors: Floors,
        live: Vec<(LogTag, u64)>,
        fill: FillWatch,
    ) -> Self {
        self.held_mut().young.extend(live);
        self.while_filling = Some((floors, fill));
        self
    }

    fn held_mut(&mut self) -> &mut Held {
        self.held.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ages the held streams: once the current generation holds half the
    /// capacity, forgets those not used in the generation before.
    ///
    /// Call it only when the index knows every version this table handed
    /// out (the dir writer: between write groups, after pushing them):
    /// a forgotten stream is looked up again.
    pub fn shrink(&self) {
        if self.lagging || self.while_filling.is_some() {
            return;
        }
        let mut held = self.lock();
        if held.young.len() >= held.capacity / 2 {
            held.old = std::mem::take(&mut held.young);
        }
    }

    /// How many streams are held now.
    #[cfg(test)]
    pub fn held_streams(&self) -> usize {
        self.lock().len()
    }

    /// Forgets the held streams whose version the index already has. The
    /// next pass comes once the table holds twice what this one kept (and
    /// at least its capacity), so a table whose streams are all in flight
    /// does not scan itself on every insertion.
    fn forget_indexed(&mut self) -> Result<()> {
        let index = Arc::clone(&self.index);
        let held = self.held_mut();
        let mut failed = None;
        let mut agrees = |tag: &LogTag, next: &mut u64| match index.next_version(tag) {
            Ok(v) => v == *next,
            Err(e) => {
                failed.get_or_insert(e);
                false
            }
        };
        held.young.retain(|tag, next| !agrees(tag, next));
        held.old.retain(|tag, next| !agrees(tag, next));
        held.check_at = held.capacity.max(2 * held.len());
        failed.map_or(Ok(()), Err)
    }

    /// Whether the writer's history fill still goes on (forgets the
    /// checkpoint once it is done).
    fn filling(&mut self) -> bool {
        match &self.while_filling {
            Some((_, fill)) if fill.filling() => true,
            Some(_) => {
                self.while_filling = None;
                false
            }
            None => false,
        }
    }
}

impl VersionTable for IndexVersions {
    fn next_version(&mut self, tag: &LogTag) -> Result<Option<u64>> {
        let held = self.held_mut();
        if let Some(&v) = held.young.get(tag) {
            return Ok((v > 0).then_some(v));
        }
        if let Some((tag, v)) = held.old.remove_entry(tag) {
            held.young.insert(tag, v);
            return Ok((v > 0).then_some(v));
        }
        if self.filling() {
            let floors = self.while_filling.as_ref().map(|(floors, _)| floors);
            return Ok(floors.and_then(|f| f.get(tag).copied()));
        }
        // Not held: the index knows it. Held from here on, so a stream
        // used again is not looked up again.
        let v = self.index.next_version(tag)?;
        self.held_mut().young.insert(tag.clone(), v);
        Ok((v > 0).then_some(v))
    }

    fn set_next_version(&mut self, tag: &LogTag, next: u64) -> Result<()> {
        let lagging = self.lagging;
        let held = self.held_mut();
        if lagging && held.len() >= held.check_at && !self.filling() {
            self.forget_indexed()?;
        }
        // The sequencer asked `next_version` first, which moved the stream
        // into `young`; a copy left in `old` is shadowed by it until the
        // next turn replaces `old` (and a lagging table, which never
        // turns, keeps `old` empty).
        self.held_mut().young.insert(tag.clone(), next);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{IndexEntry, IndexOptions};
    use crate::storage::NewEntry;
    use crate::storage::kit::Sequencer;

    fn entry(tag: &str, expected: Option<u64>) -> NewEntry {
        NewEntry {
            tags: vec![tag.parse().unwrap()],
            data: "x".into(),
            expected_version: expected.map(Into::into),
            append_id: None,
        }
    }

    fn recorded(entries: &[crate::model::LogEntry]) -> Vec<IndexEntry> {
        entries
            .iter()
            .map(|e| IndexEntry {
                seqnum: e.seqnum,
                tags: e.tags.clone().into(),
                version: e.stream_version,
                locator: None,
                check: 0,
            })
            .collect()
    }

    fn index() -> (tempfile::TempDir, Arc<Index>) {
        let tmp = tempfile::tempdir().unwrap();
        let index = Arc::new(Index::open(tmp.path(), b"t", IndexOptions::default()).unwrap());
        (tmp, index)
    }

    /// The dir writer's way: every group is in the index before the next
    /// is planned, and the table shrinks between groups.
    #[test]
    fn numbers_like_a_full_map_while_holding_few_streams() {
        let (_tmp, index) = index();
        let mut bounded = Sequencer::with_table(0, IndexVersions::new(index.clone(), 3));
        let mut full = Sequencer::new();
        for i in 0..300u64 {
            let batch = vec![
                entry(&format!("s{}", (i * 7) % 13), None),
                entry(&format!("s{}", i % 5), None),
            ];
            let a = bounded.plan(batch.clone(), 1).unwrap();
            assert_eq!(a, full.plan(batch, 1).unwrap());
            index.push(&recorded(&a)).unwrap();
            bounded.table().shrink();
            assert!(bounded.table().held_streams() <= 3);
            if i == 150 {
                index.flush().unwrap();
            }
        }
        // A conditional append checks against the looked-up version.
        bounded.table().shrink();
        let tag: LogTag = "s3".parse().unwrap();
        let next = full.next_version(&tag).unwrap();
        let err = bounded
            .plan(vec![entry("s3", Some(next + 1))], 1)
            .unwrap_err();
        assert_eq!(err.conflict_next_version(), Some(next));
        bounded.plan(vec![entry("s3", Some(next))], 1).unwrap();
    }

    /// A bucket writer's way: the index learns of groups late, and the
    /// table never forgets a stream whose planned version the index does
    /// not have yet, however many streams go by.
    #[test]
    fn an_index_that_lags_forgets_only_what_it_knows() {
        let (_tmp, index) = index();
        let mut bounded = Sequencer::with_table(0, IndexVersions::new(index.clone(), 16).lagging());
        let mut full = Sequencer::new();
        let mut unindexed = Vec::new();
        for i in 0..2_000u64 {
            let batch = vec![
                entry(&format!("s{}", (i * 31) % 211), None),
                entry(&format!("hot{}", i % 3), None),
            ];
            let a = bounded.plan(batch.clone(), 1).unwrap();
            assert_eq!(a, full.plan(batch, 1).unwrap());
            unindexed.push(a);
            // The index catches up with all but the newest 40 groups.
            if unindexed.len() > 40 {
                let caught_up: Vec<_> = unindexed.drain(..unindexed.len() - 40).collect();
                for group in caught_up {
                    index.push(&recorded(&group)).unwrap();
                }
            }
            // Held: about the in-flight streams, never every stream.
            assert!(bounded.table().held_streams() <= 2 * (16 + 2 * 40 + 3));
        }
    }

    /// While the history fill goes on, a stream not held is answered from
    /// the checkpoint, whatever the (incomplete) index says.
    #[test]
    fn a_checkpoint_answers_until_the_fill_is_done() {
        let (_tmp, index) = index();
        let filling = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let floors: Floors = Arc::new([("a".parse().unwrap(), 7)].into_iter().collect());
        let watch = FillWatch::new({
            let filling = filling.clone();
            move || filling.load(std::sync::atomic::Ordering::SeqCst)
        });
        let mut table = IndexVersions::new(index.clone(), 4)
            .lagging()
            .starting_at_checkpoint(floors, vec![("b".parse().unwrap(), 3)], watch);
        let a: LogTag = "a".parse().unwrap();
        let b: LogTag = "b".parse().unwrap();
        let c: LogTag = "c".parse().unwrap();
        assert_eq!(table.next_version(&a).unwrap(), Some(7));
        assert_eq!(table.next_version(&b).unwrap(), Some(3));
        assert_eq!(table.next_version(&c).unwrap(), None);
        filling.store(false, std::sync::atomic::Ordering::SeqCst);
        // Done: the index answers (it knows nothing of `a`).
        assert_eq!(table.next_version(&a).unwrap(), None);
        assert_eq!(table.next_version(&b).unwrap(), Some(3));
    }
}
