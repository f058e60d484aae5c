//! Recently committed entries, kept in memory for the readers that follow
//! the log (subscriptions catching up, tails), within a byte budget.
//!
//! Older entries are read from the segment files on demand; this ring only
//! saves those reads for the entries most likely to be asked for again.

use std::collections::VecDeque;

use crate::model::LogEntry;

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
    entries: VecDeque<LogEntry>,
    bytes: usize,
    budget: usize,
}

impl Recent {
    pub(super) fn new(budget: usize) -> Recent {
        Recent {
            entries: VecDeque::new(),
            bytes: 0,
            budget,
        }
    }

    /// Adds entries that continue the log, dropping the oldest beyond the
    /// budget. An entry that does not continue the ring starts it over.
    pub(super) fn extend<'a>(&mut self, entries: impl IntoIterator<Item = &'a LogEntry>) {
        for entry in entries {
            let follows = self
                .entries
                .back()
                .is_none_or(|last| last.seqnum + 1 == entry.seqnum);
            if !follows {
                self.entries.clear();
                self.bytes = 0;
            }
            self.bytes += cost(entry);
            self.entries.push_back(entry.clone());
            while self.bytes > self.budget {
                let Some(old) = self.entries.pop_front() else {
                    break;
                };
                self.bytes -= cost(&old);
            }
        }
    }

    /// The entry `seqnum`, if held.
    pub(super) fn get(&self, seqnum: u64) -> Option<&LogEntry> {
        let first = self.entries.front()?.seqnum;
        let i = usize::try_from(seqnum.checked_sub(first)?).ok()?;
        self.entries.get(i)
    }

    /// Forgets entries below `first` (after a trim).
    pub(super) fn trim_before(&mut self, first: u64) {
        while self.entries.front().is_some_and(|e| e.seqnum < first) {
            if let Some(old) = self.entries.pop_front() {
                self.bytes -= cost(&old);
            }
        }
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
        }
    }

    #[test]
    fn keeps_the_newest_within_budget() {
        let mut r = Recent::new(cost(&e(0)) * 3);
        r.extend(&[e(0), e(1), e(2), e(3)]);
        assert!(r.get(0).is_none());
        assert_eq!(r.get(3).map(|x| x.seqnum), Some(3));
        assert!(r.bytes() <= cost(&e(0)) * 3);
        r.trim_before(3);
        assert!(r.get(2).is_none());
        r.extend(&[e(9)]);
        assert!(r.get(3).is_none(), "a gap starts the ring over");
        assert_eq!(r.get(9).map(|x| x.seqnum), Some(9));
    }
}
