//! Exactly-once appends on a backend that is its log's only writer.
//!
//! A caller that got `Indeterminate` (the reply was lost, the writer died)
//! cannot tell whether its append landed. Retrying it with the same append
//! id ([`AppendRequest::with_id`](crate::AppendRequest::with_id)) is safe:
//! an append whose id is already in the log writes nothing and answers with
//! the original [`AppendResult`].
//!
//! The check sits where numbers are assigned: [`AppendIds::plan`] runs
//! under the backend's write lock, next to its
//! [`Sequencer`], so no two appends with one id can both be numbered.
//! Before a batch is numbered, each of its ids is looked up:
//!
//! * among the ids of every batch numbered so far — written, or still on
//!   its way to durable storage (a retry racing its own original must not
//!   write twice; the backend answers it once the original is committed);
//! * then, for ids older than that in-memory window, in whatever the
//!   backend keeps of older ids (the `older` lookup: a persistent index's
//!   id table), or nowhere.
//!
//! A known id answers with its entry's original result, whatever the
//! retried request says: a conditional append is not checked again (the
//! retry of an `append_if` that won must not report `Conflict`), and its
//! tags and payload are not compared. A batch mixing known and new ids
//! writes the new entries (atomically, contiguously, with their
//! conditions checked as usual) and answers the known ones with their
//! originals; an id repeated within one batch is `InvalidInput`.
//!
//! The ids themselves live in the entry frames (see
//! [`crate::format::frame`]), so the log is the durable record; the window
//! here is derived state a backend rebuilds on open with
//! [`AppendIds::observe`] from the log's tail. How far back ids are
//! remembered is each backend's window, documented on
//! [`AppendRequest::with_id`](crate::AppendRequest::with_id) and in
//! `docs/STORAGE_SEAM.md`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::results_of;
use super::sequencer::{Sequencer, VersionTable};
use crate::error::{Error, Result};
use crate::model::{AppendResult, LogEntry};
use crate::storage::NewEntry;

/// The append ids of a log's most recent entries, with each one's result.
///
/// Bounded by a capacity (the ids of the newest `capacity` entries that
/// carry one) or unbounded; ids of trimmed entries are dropped with
/// [`AppendIds::forget_through`]. One id costs its own bytes plus its
/// entry's primary tag and about 120 bytes of bookkeeping.
#[derive(Debug, Clone)]
pub struct AppendIds {
    by_id: HashMap<Arc<str>, AppendResult>,
    /// Ids in the order their entries were numbered (seqnum order).
    order: VecDeque<(u64, Arc<str>)>,
    capacity: usize,
}

impl Default for AppendIds {
    fn default() -> Self {
        AppendIds::unbounded()
    }
}

impl AppendIds {
    /// A window holding the ids of the newest `capacity` entries that
    /// carry one. With 0 it remembers nothing, and every id is looked up
    /// in the backend's `older` table.
    pub fn bounded(capacity: usize) -> Self {
        AppendIds {
            by_id: HashMap::new(),
            order: VecDeque::new(),
            capacity,
        }
    }

    /// A window holding the id of every entry until it is trimmed.
    pub fn unbounded() -> Self {
        AppendIds::bounded(usize::MAX)
    }

    /// How many ids the window holds.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when the window holds no id.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The most ids the window holds (`usize::MAX`: unbounded).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The result of the entry with `id`, when the window holds it.
    pub fn get(&self, id: &str) -> Option<&AppendResult> {
        self.by_id.get(id)
    }

    /// The lowest seqnum whose id the window still holds.
    pub fn oldest(&self) -> Option<u64> {
        self.order.front().map(|(s, _)| *s)
    }

    /// Records that the entry answered by `result` carries `id`, for an
    /// entry recovered from the log (on open) or just numbered. Entries
    /// must come in seqnum order. Should an id occur twice (possible only
    /// once its first entry left the window), the later entry answers.
    pub fn observe(&mut self, id: &str, result: AppendResult) {
        if self.capacity == 0 {
            return;
        }
        let id: Arc<str> = Arc::from(id);
        self.order.push_back((result.seqnum, Arc::clone(&id)));
        self.by_id.insert(id, result);
        while self.order.len() > self.capacity {
            self.pop_front();
        }
    }

    /// Drops the ids of entries at or below `through` (trimmed away).
    pub fn forget_through(&mut self, through: u64) {
        while self.order.front().is_some_and(|(s, _)| *s <= through) {
            self.pop_front();
        }
    }

    /// Drops the ids of entries at or above `from` (numbers given back).
    pub fn forget_from(&mut self, from: u64) {
        while let Some((seqnum, id)) = self.order.back() {
            if *seqnum < from {
                break;
            }
            if self.by_id.get(id).is_some_and(|r| r.seqnum == *seqnum) {
                self.by_id.remove(id);
            }
            self.order.pop_back();
        }
    }

    fn pop_front(&mut self) {
        if let Some((seqnum, id)) = self.order.pop_front()
            && self.by_id.get(&id).is_some_and(|r| r.seqnum == seqnum)
        {
            self.by_id.remove(&id);
        }
    }

    /// Numbers `batch` with `sequencer`, except its entries whose id is
    /// already known (in this window, or to `older`), which answer with
    /// their original results. Ids are recorded as the entries are
    /// numbered, before they are durable: the backend must give them back
    /// with [`forget_from`](AppendIds::forget_from) when it gives back the
    /// numbers, and must not answer a known id before its entry is
    /// committed (see [`Planned::known_through`]).
    ///
    /// The batch was checked with
    /// [`check_append`](crate::storage::kit::check_append): its ids are
    /// valid and none repeats.
    ///
    /// Errors: `Conflict` as
    /// [`Sequencer::plan`] (nothing recorded); `older`'s errors and the
    /// version table's.
    pub fn plan<V: VersionTable>(
        &mut self,
        sequencer: &mut Sequencer<V>,
        batch: Vec<NewEntry>,
        timestamp_ms: u64,
        mut older: impl FnMut(&str) -> Result<Option<AppendResult>>,
    ) -> Result<Planned> {
        if batch.iter().all(|e| e.append_id.is_none()) {
            let entries = sequencer.plan(batch, timestamp_ms)?;
            let results = results_of(&entries);
            return Ok(Planned {
                entries,
                ids: Vec::new(),
                results,
                known_through: None,
            });
        }
        // Which entries are retries of appends already numbered.
        let mut known: Vec<Option<AppendResult>> = Vec::with_capacity(batch.len());
        for entry in &batch {
            let found = match entry.append_id.as_deref() {
                None => None,
                Some(id) => match self.by_id.get(id) {
                    Some(r) => Some(r.clone()),
                    None => older(id)?,
                },
            };
            known.push(found);
        }
        let known_through = known.iter().flatten().map(|r| r.seqnum).max();
        let mut fresh = Vec::with_capacity(batch.len());
        let mut ids = Vec::with_capacity(batch.len());
        for (entry, k) in batch.into_iter().zip(&known) {
            if k.is_none() {
                // The entry keeps its id too: readers of the planned entries
                // (the commit feed, caches) return it with the entry.
                ids.push(entry.append_id.clone());
                fresh.push(entry);
            }
        }
        let entries = if fresh.is_empty() {
            Vec::new()
        } else {
            sequencer.plan(fresh, timestamp_ms)?
        };
        let fresh_results = results_of(&entries);
        for (id, result) in ids.iter().zip(&fresh_results) {
            if let Some(id) = id {
                self.observe(id, result.clone());
            }
        }
        let mut new_results = fresh_results.into_iter();
        let results = known
            .into_iter()
            .map(|k| match k {
                Some(original) => Ok(original),
                None => new_results
                    .next()
                    .ok_or_else(|| Error::internal("an append id plan lost an entry")),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Planned {
            entries,
            ids,
            results,
            known_through,
        })
    }
}

/// A batch after [`AppendIds::plan`]: what to write, and what to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The entries to write, numbered: every entry of the batch whose id
    /// was not known, in batch order. Empty when every entry was a retry.
    pub entries: Vec<LogEntry>,
    /// The append id of each of `entries`, in order; empty when none of
    /// the batch's entries had an id.
    pub ids: Vec<Option<String>>,
    /// The answer for each entry of the batch, in batch order.
    pub results: Vec<AppendResult>,
    /// The highest seqnum among answers that were already known: the
    /// backend answers only once that entry is committed (it may belong
    /// to a batch still in flight, whose failure makes the answer an
    /// error).
    pub known_through: Option<u64>,
}

impl Planned {
    /// The append id of `entries[i]`.
    pub fn id(&self, i: usize) -> Option<&str> {
        self.ids.get(i).and_then(|id| id.as_deref())
    }

    /// True when some entry to write carries an id.
    pub fn writes_ids(&self) -> bool {
        self.ids.iter().any(Option::is_some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use crate::model::LogTag;

    fn entry(tag: &str, id: Option<&str>, expected: Option<u64>) -> NewEntry {
        NewEntry {
            tags: vec![tag.parse().unwrap()],
            data: "x".into(),
            expected_version: expected.map(Into::into),
            append_id: id.map(str::to_owned),
        }
    }

    fn nums(rs: &[AppendResult]) -> Vec<(u64, u64)> {
        rs.iter().map(|r| (r.seqnum, r.stream_version)).collect()
    }

    fn none(_: &str) -> Result<Option<AppendResult>> {
        Ok(None)
    }

    #[test]
    fn a_known_id_answers_with_the_original_and_writes_nothing() {
        let (mut s, mut ids) = (Sequencer::new(), AppendIds::unbounded());
        let first = ids
            .plan(&mut s, vec![entry("a", Some("x"), None)], 10, none)
            .unwrap();
        assert_eq!(nums(&first.results), vec![(0, 0)]);
        assert_eq!(first.id(0), Some("x"));
        assert_eq!(first.known_through, None);
        ids.plan(&mut s, vec![entry("a", None, None)], 11, none)
            .unwrap();
        // The retry, even as a conditional append that would now conflict,
        // and on another tag: the original answer, nothing numbered.
        let retry = ids
            .plan(&mut s, vec![entry("b", Some("x"), Some(0))], 12, none)
            .unwrap();
        assert!(retry.entries.is_empty());
        assert_eq!(retry.results, first.results);
        assert_eq!(retry.results[0].timestamp_ms, 10);
        assert_eq!(retry.known_through, Some(0));
        assert_eq!(s.next_seqnum(), 2);
    }

    #[test]
    fn a_mixed_batch_writes_only_its_new_entries() {
        let (mut s, mut ids) = (Sequencer::new(), AppendIds::unbounded());
        ids.plan(&mut s, vec![entry("a", Some("k"), None)], 1, none)
            .unwrap();
        let mixed = ids
            .plan(
                &mut s,
                vec![
                    entry("a", Some("n1"), Some(1)),
                    entry("a", Some("k"), Some(0)),
                    entry("b", None, None),
                    entry("a", Some("n2"), Some(2)),
                ],
                2,
                none,
            )
            .unwrap();
        assert_eq!(nums(&mixed.results), vec![(1, 1), (0, 0), (2, 0), (3, 2)]);
        assert_eq!(mixed.entries.len(), 3);
        assert_eq!(
            mixed.ids,
            vec![Some("n1".to_owned()), None, Some("n2".to_owned())]
        );
        assert!(mixed.writes_ids());
        // A conflict among the new entries refuses the batch and records
        // none of its ids.
        let err = ids
            .plan(
                &mut s,
                vec![entry("a", Some("n3"), Some(0)), entry("a", Some("k"), None)],
                3,
                none,
            )
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert!(ids.get("n3").is_none());
        assert_eq!(s.next_seqnum(), 4);
    }

    #[test]
    fn the_window_evicts_oldest_first_and_older_ids_are_asked_for() {
        let (mut s, mut ids) = (Sequencer::new(), AppendIds::bounded(2));
        for id in ["a", "b", "c"] {
            ids.plan(&mut s, vec![entry("t", Some(id), None)], 1, none)
                .unwrap();
        }
        assert_eq!(ids.len(), 2);
        assert!(ids.get("a").is_none());
        assert_eq!(ids.oldest(), Some(1));
        // "a" left the window: the older lookup answers for it.
        let tag: LogTag = "t".parse().unwrap();
        let mut asked = Vec::new();
        let retry = ids
            .plan(&mut s, vec![entry("t", Some("a"), None)], 1, |id| {
                asked.push(id.to_owned());
                Ok(Some(AppendResult {
                    seqnum: 0,
                    stream_version: 0,
                    primary_tag: tag.clone(),
                    timestamp_ms: 1,
                }))
            })
            .unwrap();
        assert_eq!(asked, vec!["a".to_owned()]);
        assert_eq!(nums(&retry.results), vec![(0, 0)]);
        // A failing lookup fails the append, numbering nothing.
        let err = ids
            .plan(&mut s, vec![entry("t", Some("z"), None)], 1, |_| {
                Err(Error::new(ErrorKind::Unavailable, "index offline"))
            })
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert_eq!(s.next_seqnum(), 3);
        // Without a lookup, an id out of the window is written again.
        let again = ids
            .plan(&mut s, vec![entry("t", Some("a"), None)], 1, none)
            .unwrap();
        assert_eq!(nums(&again.results), vec![(3, 3)]);
    }

    #[test]
    fn trims_and_given_back_numbers_forget_their_ids() {
        let (mut s, mut ids) = (Sequencer::new(), AppendIds::unbounded());
        for id in ["a", "b", "c", "d"] {
            ids.plan(&mut s, vec![entry("t", Some(id), None)], 1, none)
                .unwrap();
        }
        ids.forget_through(1);
        assert!(ids.get("a").is_none() && ids.get("b").is_none());
        let last = ids
            .plan(&mut s, vec![entry("t", Some("e"), None)], 1, none)
            .unwrap();
        s.unplan(&last.entries).unwrap();
        ids.forget_from(last.entries[0].seqnum);
        assert!(ids.get("e").is_none());
        assert_eq!(ids.len(), 2);
        assert_eq!(ids.get("d").map(|r| r.seqnum), Some(3));
    }

    #[test]
    fn a_repeated_id_in_the_log_answers_with_its_later_entry() {
        let mut ids = AppendIds::bounded(3);
        let tag: LogTag = "t".parse().unwrap();
        let result = |seqnum| AppendResult {
            seqnum,
            stream_version: seqnum,
            primary_tag: tag.clone(),
            timestamp_ms: 0,
        };
        ids.observe("x", result(0));
        ids.observe("y", result(1));
        ids.observe("x", result(2));
        assert_eq!(ids.get("x").map(|r| r.seqnum), Some(2));
        // Evicting the first "x" keeps the later one.
        ids.observe("z", result(3));
        assert_eq!(ids.get("x").map(|r| r.seqnum), Some(2));
        assert_eq!(ids.len(), 3);
    }

    #[test]
    fn a_zero_window_remembers_nothing() {
        let (mut s, mut ids) = (Sequencer::new(), AppendIds::bounded(0));
        ids.plan(&mut s, vec![entry("t", Some("a"), None)], 1, none)
            .unwrap();
        assert!(ids.is_empty());
    }
}
