//! Recently committed entries, kept in memory for the readers that follow
//! the log (subscriptions catching up, tails), within a byte budget.
//!
//! Older entries are read from the segment files on demand; this ring only
//! saves those reads for the entries most likely to be asked for again.
//!
//! The ring holds the very batches the commit feed announces (shared, not
//! copied): keeping a group costs one reference count, not a copy of every
//! entry's tags, which the writer would otherwise pay per append.

use std::collections::VecDeque;

use crate::model::LogEntry;
use crate::storage::kit::CommittedBatch;

/// Fixed cost counted per entry besides its payload and tags.
const ENTRY_OVERHEAD: usize = 96;

fn cost(entry: &LogEntry) -> usize {
    ENTRY_OVERHEAD
        + entry.data.len()
        + entry
            .tags
            .iter()
            .map(|t| 48 + t.namespace().len() + t.key().map_or(0, str::len))
            .sum::<usize>()
}

/// The last committed entries, consecutive, within `budget` bytes.
#[derive(Debug)]
pub(super) struct Recent {
    /// Consecutive committed batches, oldest first; none is empty.
    batches: VecDeque<CommittedBatch>,
    /// How many entries of the oldest batch were dropped already.
    skip: usize,
    bytes: usize,
    budget: usize,
}

impl Recent {
    pub(super) fn new(budget: usize) -> Recent {
        Recent {
            batches: VecDeque::new(),
            skip: 0,
            bytes: 0,
            budget,
        }
    }

    fn clear(&mut self) {
        self.batches.clear();
        self.skip = 0;
        self.bytes = 0;
    }

    /// Drops everything held when it holds any of `seqnums` (ascending):
    /// their entries changed on disk (an erase), and reads must get the
    /// new bytes.
    pub(super) fn forget_any(&mut self, seqnums: &[u64]) {
        let (Some(start), Some(end)) = (self.start_seqnum(), self.end()) else {
            return;
        };
        let from = seqnums.partition_point(|&s| s < start);
        if seqnums.get(from).is_some_and(|&s| s < end) {
            self.clear();
        }
    }

    /// The seqnum of the first entry held.
    fn start_seqnum(&self) -> Option<u64> {
        let batch = self.batches.front()?;
        batch.get(self.skip).map(|e| e.seqnum)
    }

    /// The seqnum after the last entry held.
    fn end(&self) -> Option<u64> {
        self.batches.back()?.last().map(|e| e.seqnum + 1)
    }

    /// Adds a batch that continues the log, dropping the oldest entries
    /// beyond the budget. A batch that does not continue the ring (or
    /// whose seqnums are not consecutive) starts it over.
    pub(super) fn extend(&mut self, batch: &CommittedBatch) {
        let Some(first) = batch.first() else {
            return;
        };
        let consecutive = batch
            .windows(2)
            .all(|pair| pair[0].seqnum + 1 == pair[1].seqnum);
        if !consecutive {
            self.clear();
            return;
        }
        if self.end().is_some_and(|end| end != first.seqnum) {
            self.clear();
        }
        self.bytes += batch.iter().map(cost).sum::<usize>();
        self.batches.push_back(CommittedBatch::clone(batch));
        self.drop_front_while(|_, bytes, budget| bytes > budget);
    }

    /// Drops the oldest entries while `drop(entry, bytes, budget)` says so.
    fn drop_front_while(&mut self, drop: impl Fn(&LogEntry, usize, usize) -> bool) {
        while let Some(batch) = self.batches.front() {
            let Some(oldest) = batch.get(self.skip) else {
                self.batches.pop_front();
                self.skip = 0;
                continue;
            };
            if !drop(oldest, self.bytes, self.budget) {
                break;
            }
            self.bytes -= cost(oldest);
            self.skip += 1;
            if self.skip == batch.len() {
                self.batches.pop_front();
                self.skip = 0;
            }
        }
    }

    /// The entry `seqnum`, if held.
    pub(super) fn get(&self, seqnum: u64) -> Option<&LogEntry> {
        // Batches are consecutive: the one holding `seqnum` is the last
        // whose first entry is not after it.
        let after = self
            .batches
            .partition_point(|b| b.first().is_some_and(|e| e.seqnum <= seqnum));
        let batch = self.batches.get(after.checked_sub(1)?)?;
        let first = batch.first()?.seqnum;
        let i = usize::try_from(seqnum.checked_sub(first)?).ok()?;
        let skip = if after == 1 { self.skip } else { 0 };
        if i < skip {
            return None;
        }
        batch.get(i)
    }

    /// Forgets entries below `first` (after a trim).
    pub(super) fn trim_before(&mut self, first: u64) {
        self.drop_front_while(|oldest, _, _| oldest.seqnum < first);
    }

    /// Bytes counted against the budget.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LogTag;
    use bytes::Bytes;

    fn e(seqnum: u64) -> LogEntry {
        LogEntry {
            seqnum,
            stream_version: 0,
            tags: vec![LogTag::new("t").unwrap()],
            data: Bytes::from(vec![0; 100]),
            timestamp_ms: 0,
            append_id: None,
        }
    }

    fn batch(seqnums: impl IntoIterator<Item = u64>) -> CommittedBatch {
        seqnums.into_iter().map(e).collect()
    }

    fn held(r: &Recent, seqnums: std::ops::Range<u64>) -> Vec<u64> {
        seqnums
            .filter_map(|s| r.get(s).map(|x| x.seqnum))
            .collect::<Vec<_>>()
    }

    #[test]
    fn keeps_the_newest_within_budget() {
        let mut r = Recent::new(cost(&e(0)) * 3);
        r.extend(&batch(0..4));
        assert!(r.get(0).is_none());
        assert_eq!(r.get(3).map(|x| x.seqnum), Some(3));
        assert!(r.bytes() <= cost(&e(0)) * 3);
        r.trim_before(3);
        assert!(r.get(2).is_none());
        r.extend(&batch([9]));
        assert!(r.get(3).is_none(), "a gap starts the ring over");
        assert_eq!(r.get(9).map(|x| x.seqnum), Some(9));
    }

    #[test]
    fn drops_entry_by_entry_across_batches() {
        let mut r = Recent::new(cost(&e(0)) * 5);
        r.extend(&batch(0..3));
        r.extend(&batch(3..4));
        r.extend(&batch(4..7));
        // Seven entries, room for five: the first batch loses two of its
        // three, and the budget holds exactly.
        assert_eq!(held(&r, 0..10), vec![2, 3, 4, 5, 6]);
        assert_eq!(r.bytes(), cost(&e(0)) * 5);
        r.trim_before(4);
        assert_eq!(held(&r, 0..10), vec![4, 5, 6]);
        assert_eq!(r.bytes(), cost(&e(0)) * 3);
        r.trim_before(100);
        assert_eq!(held(&r, 0..10), Vec::<u64>::new());
        assert_eq!(r.bytes(), 0);
        // Emptied by a trim, it takes whatever comes next.
        r.extend(&batch(7..8));
        assert_eq!(held(&r, 0..10), vec![7]);
    }

    #[test]
    fn a_batch_larger_than_the_budget_keeps_its_newest_entries() {
        let mut r = Recent::new(cost(&e(0)) * 2);
        r.extend(&batch(10..20));
        assert_eq!(held(&r, 0..30), vec![18, 19]);
        r.extend(&batch(20..21));
        assert_eq!(held(&r, 0..30), vec![19, 20]);
    }

    #[test]
    fn a_batch_with_a_gap_inside_is_not_kept() {
        let mut r = Recent::new(1 << 20);
        r.extend(&batch(0..2));
        r.extend(&batch([2, 4]));
        assert_eq!(held(&r, 0..10), Vec::<u64>::new());
        r.extend(&CommittedBatch::from(Vec::new()));
        r.extend(&batch(5..6));
        assert_eq!(held(&r, 0..10), vec![5]);
    }
}
