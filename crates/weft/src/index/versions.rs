//! A sequencer's version table over the index: a bounded set of streams
//! held in memory, every other stream looked up in the index on demand.
//!
//! A single-writer backend numbers entries with a
//! [`Sequencer`](crate::storage::sequencer::Sequencer), which needs each
//! stream's next version. Holding every stream in a map costs memory in
//! the number of streams; [`IndexVersions`] holds at most about
//! `capacity` of them and asks the index for the others — which is
//! exact, because the backend records every committed entry in the index
//! before it plans the next write group.

use std::sync::{Arc, Mutex};

use super::{FastMap, Index};
use crate::error::Result;
use crate::model::LogTag;
use crate::storage::sequencer::VersionTable;

/// The held streams in two generations: a stream used since the last
/// turn is in `young`; a turn makes `young` the `old` generation and
/// forgets the previous one. So a busy stream stays held across turns
/// (every use copies it into `young`) while idle ones age out, and no turn
/// empties the table at once (which sent every stream of a busy log to the
/// index at the same moment).
#[derive(Debug, Default)]
struct Held {
    young: FastMap<LogTag, u64>,
    old: FastMap<LogTag, u64>,
    capacity: usize,
}

/// A [`VersionTable`] that holds a bounded set of streams and looks the
/// others up in an [`Index`].
#[derive(Debug)]
pub struct IndexVersions {
    index: Arc<Index>,
    held: Mutex<Held>,
}

impl IndexVersions {
    /// A table over `index` holding at most about `capacity` streams.
    pub fn new(index: Arc<Index>, capacity: usize) -> Self {
        IndexVersions {
            index,
            held: Mutex::new(Held {
                young: FastMap::default(),
                old: FastMap::default(),
                capacity: capacity.max(2),
            }),
        }
    }

    fn held(&mut self) -> &mut Held {
        self.held.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets the streams not used in the last generation once the
    /// current one holds half the capacity.
    ///
    /// Call it only when every version set since the last call has reached
    /// the index (between write groups, after their entries were pushed):
    /// a forgotten stream is looked up again, and the index must know its
    /// planned entries by then.
    pub fn shrink(&self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.young.len() >= held.capacity / 2 {
            held.old = std::mem::take(&mut held.young);
        }
    }

    /// How many streams are held now.
    pub fn held_streams(&self) -> usize {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.young.len() + held.old.len()
    }
}

impl VersionTable for IndexVersions {
    fn next_version(&mut self, tag: &LogTag) -> Result<Option<u64>> {
        let held = self.held();
        if let Some(&v) = held.young.get(tag) {
            return Ok((v > 0).then_some(v));
        }
        let v = match held.old.remove_entry(tag) {
            Some((tag, v)) => {
                held.young.insert(tag, v);
                v
            }
            None => {
                let v = self.index.next_version(tag)?;
                self.held().young.insert(tag.clone(), v);
                v
            }
        };
        Ok((v > 0).then_some(v))
    }

    fn set_next_version(&mut self, tag: &LogTag, next: u64) -> Result<()> {
        let held = self.held();
        match held.young.get_mut(tag) {
            Some(v) => *v = next,
            None => {
                held.young.insert(tag.clone(), next);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{IndexEntry, IndexOptions};
    use crate::storage::NewEntry;
    use crate::storage::sequencer::Sequencer;

    fn entry(tag: &str, expected: Option<u64>) -> NewEntry {
        NewEntry {
            tags: vec![tag.parse().unwrap()],
            data: "x".into(),
            expected_version: expected.map(Into::into),
            append_id: None,
        }
    }

    #[test]
    fn numbers_like_a_full_map_while_holding_few_streams() {
        let tmp = tempfile::tempdir().unwrap();
        let index = Arc::new(Index::open(tmp.path(), b"t", IndexOptions::default()).unwrap());
        let mut bounded = Sequencer::with_table(0, IndexVersions::new(index.clone(), 3));
        let mut full = Sequencer::new();
        for i in 0..300u64 {
            let batch = vec![
                entry(&format!("s{}", (i * 7) % 13), None),
                entry(&format!("s{}", i % 5), None),
            ];
            let a = bounded.plan(batch.clone(), 1).unwrap();
            assert_eq!(a, full.plan(batch, 1).unwrap());
            // The backend records the group in the index, then shrinks.
            let recorded: Vec<IndexEntry> = a
                .iter()
                .map(|e| IndexEntry {
                    seqnum: e.seqnum,
                    tags: e.tags.clone().into(),
                    version: e.stream_version,
                    locator: None,
                    check: 0,
                })
                .collect();
            index.push(&recorded).unwrap();
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
}
