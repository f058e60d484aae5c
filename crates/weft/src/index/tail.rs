//! The index's in-memory tail: entries after the store's covered point,
//! indexed the same ways, until the flusher moves them into the store.
//!
//! The tail is the only part of the index on the append path: recording an
//! entry is a few hash-map pushes. Its size is bounded by the index's
//! budget (see [`super::IndexOptions`]); the flusher drains it from the
//! front in batches.

use std::collections::VecDeque;

use bytes::Bytes;

use super::{EntryTags, FastMap, IndexEntry};
use crate::error::{Error, Result};
use crate::model::LogTag;

/// One recorded entry.
#[derive(Debug, Clone)]
pub(super) struct TailEntry {
    pub(super) tags: EntryTags,
    pub(super) version: u64,
    pub(super) locator: Option<Bytes>,
    pub(super) check: u64,
}

/// One primary tag's versions in the tail.
#[derive(Debug, Default)]
struct Stream {
    /// The version of `seqnums[0]`.
    first_version: u64,
    seqnums: VecDeque<u64>,
}

/// Entries `start..start + entries.len()`, by tag and by version.
#[derive(Debug, Default)]
pub(super) struct Tail {
    start: u64,
    entries: VecDeque<TailEntry>,
    by_tag: FastMap<LogTag, VecDeque<u64>>,
    by_stream: FastMap<LogTag, Stream>,
    /// Approximate heap bytes held.
    bytes: usize,
}

/// Heap bytes of one tag held in a map key or list (approximate).
fn tag_bytes(tag: &LogTag) -> usize {
    48 + tag.namespace().len() + tag.key().map_or(0, str::len)
}

impl Tail {
    /// An empty tail whose first entry will be `start`.
    pub(super) fn starting_at(start: u64) -> Tail {
        Tail {
            start,
            ..Tail::default()
        }
    }

    /// The seqnum of the first entry held (the store's covered point).
    pub(super) fn start(&self) -> u64 {
        self.start
    }

    /// The seqnum after the last entry held.
    pub(super) fn end(&self) -> u64 {
        self.start + self.entries.len() as u64
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Approximate heap bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds `entry`, which must be [`end`](Tail::end).
    ///
    /// Errors: `Corrupt` for an entry out of order, without tags or at a
    /// version its stream does not continue with: the entries come from
    /// stored bytes, so numbers that do not follow on are damaged data.
    pub(super) fn push(&mut self, entry: &IndexEntry) -> Result<()> {
        if entry.seqnum != self.end() {
            return Err(Error::corrupt(format!(
                "index got entry {} where {} was next",
                entry.seqnum,
                self.end()
            )));
        }
        let Some(primary) = entry.tags.first() else {
            return Err(Error::corrupt(format!(
                "index got entry {} without tags",
                entry.seqnum
            )));
        };
        // Check before changing anything: a refused entry leaves no trace.
        // (One lookup of the stream serves the check and the push below.)
        let stream = self.by_stream.get_mut(primary);
        if let Some(stream) = &stream {
            let expected = stream.first_version + stream.seqnums.len() as u64;
            if entry.version != expected {
                return Err(Error::corrupt(format!(
                    "index got version {} of {primary} for entry {}, expected {expected}",
                    entry.version, entry.seqnum
                )));
            }
        }
        let mut bytes = 64 + entry.locator.as_ref().map_or(0, |l| l.len() + 32);
        for tag in entry.tags.iter() {
            bytes += 8 + tag_bytes(tag);
            match self.by_tag.get_mut(tag) {
                Some(list) => list.push_back(entry.seqnum),
                None => {
                    bytes += 64 + tag_bytes(tag);
                    self.by_tag
                        .insert(tag.clone(), VecDeque::from([entry.seqnum]));
                }
            }
        }
        match stream {
            Some(stream) => stream.seqnums.push_back(entry.seqnum),
            None => {
                bytes += 64 + tag_bytes(primary);
                self.by_stream.insert(
                    primary.clone(),
                    Stream {
                        first_version: entry.version,
                        seqnums: VecDeque::from([entry.seqnum]),
                    },
                );
            }
        }
        self.bytes += bytes;
        self.entries.push_back(TailEntry {
            tags: entry.tags.clone(),
            version: entry.version,
            locator: entry.locator.clone(),
            check: entry.check,
        });
        Ok(())
    }

    /// The first `n` entries (for the flusher), oldest first.
    pub(super) fn front(&self, n: usize) -> impl Iterator<Item = (u64, &TailEntry)> {
        let start = self.start;
        self.entries
            .iter()
            .take(n)
            .enumerate()
            .map(move |(i, e)| (start + i as u64, e))
    }

    /// Forgets entries below `upto` (the flusher stored them).
    pub(super) fn drop_before(&mut self, upto: u64) {
        while self.start < upto {
            let Some(entry) = self.entries.pop_front() else {
                self.start = upto;
                break;
            };
            let seqnum = self.start;
            self.start += 1;
            let mut bytes = 64 + entry.locator.as_ref().map_or(0, |l| l.len() + 32);
            for tag in entry.tags.iter() {
                bytes += 8 + tag_bytes(tag);
                if let Some(list) = self.by_tag.get_mut(tag) {
                    if list.front() == Some(&seqnum) {
                        list.pop_front();
                    }
                    if list.is_empty() {
                        bytes += 64 + tag_bytes(tag);
                        self.by_tag.remove(tag);
                    }
                }
            }
            let primary = &entry.tags[0];
            if let Some(stream) = self.by_stream.get_mut(primary) {
                if stream.seqnums.front() == Some(&seqnum) {
                    stream.seqnums.pop_front();
                    stream.first_version += 1;
                }
                if stream.seqnums.is_empty() {
                    bytes += 64 + tag_bytes(primary);
                    self.by_stream.remove(primary);
                }
            }
            self.bytes = self.bytes.saturating_sub(bytes);
        }
    }

    /// The entry `seqnum`, if held.
    pub(super) fn get(&self, seqnum: u64) -> Option<&TailEntry> {
        let i = usize::try_from(seqnum.checked_sub(self.start)?).ok()?;
        self.entries.get(i)
    }

    /// Up to `max` seqnums `>= from` carrying `tag` (every seqnum when
    /// `None`).
    pub(super) fn seqnums(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Vec<u64> {
        let from = from.max(self.start);
        match tag {
            None => (from..self.end()).take(max).collect(),
            Some(tag) => match self.by_tag.get(tag) {
                None => Vec::new(),
                Some(list) => {
                    let at = list.partition_point(|&s| s < from);
                    list.range(at..).take(max).copied().collect()
                }
            },
        }
    }

    /// Up to `max` tags entries held here carry, those after `lower` in
    /// [`stream_order`](crate::model::stream_order), in that order.
    pub(super) fn tags_from(&self, lower: std::ops::Bound<&LogTag>, max: usize) -> Vec<LogTag> {
        use std::cmp::Ordering::{Greater, Less};
        use std::ops::Bound;
        let mut tags: Vec<LogTag> = self
            .by_tag
            .keys()
            .filter(|t| match lower {
                Bound::Included(l) => crate::model::stream_order(t, l) != Less,
                Bound::Excluded(l) => crate::model::stream_order(t, l) == Greater,
                Bound::Unbounded => true,
            })
            .cloned()
            .collect();
        tags.sort_by(crate::model::stream_order);
        tags.truncate(max);
        tags
    }

    /// How many seqnums `>= from` held here carry `tag`.
    pub(super) fn count(&self, tag: &LogTag, from: u64) -> u64 {
        self.by_tag.get(tag).map_or(0, |list| {
            (list.len() - list.partition_point(|&s| s < from)) as u64
        })
    }

    /// Up to `max` seqnums of `tag`'s versions `>= from_version` held here.
    pub(super) fn version_seqnums(&self, tag: &LogTag, from_version: u64, max: usize) -> Vec<u64> {
        let Some(stream) = self.by_stream.get(tag) else {
            return Vec::new();
        };
        let skip = from_version.saturating_sub(stream.first_version);
        let Ok(skip) = usize::try_from(skip) else {
            return Vec::new();
        };
        stream
            .seqnums
            .iter()
            .skip(skip)
            .take(max)
            .copied()
            .collect()
    }

    /// The first version of `tag` held here, if any.
    pub(super) fn first_version(&self, tag: &LogTag) -> Option<u64> {
        self.by_stream.get(tag).map(|s| s.first_version)
    }

    /// The version `tag`'s next entry gets, if the tail holds any of its
    /// entries.
    pub(super) fn next_version(&self, tag: &LogTag) -> Option<u64> {
        self.by_stream
            .get(tag)
            .map(|s| s.first_version + s.seqnums.len() as u64)
    }

    /// The last seqnum `< before` carrying `tag` (any when `None`).
    pub(super) fn prev(&self, tag: Option<&LogTag>, before: u64) -> Option<u64> {
        match tag {
            None => {
                let s = before.min(self.end()).checked_sub(1)?;
                (s >= self.start).then_some(s)
            }
            Some(tag) => {
                let list = self.by_tag.get(tag)?;
                let at = list.partition_point(|&s| s < before);
                at.checked_sub(1).map(|i| list[i])
            }
        }
    }

    /// The nearest entry `<= seqnum` held here that has a locator.
    pub(super) fn locate(&self, seqnum: u64) -> Option<(u64, Bytes)> {
        let last = seqnum.min(self.end().checked_sub(1)?);
        let mut s = last;
        loop {
            let entry = self.get(s)?;
            if let Some(loc) = &entry.locator {
                return Some((s, loc.clone()));
            }
            s = s.checked_sub(1).filter(|&p| p >= self.start)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(seqnum: u64, tags: &[&str], version: u64) -> IndexEntry {
        IndexEntry {
            seqnum,
            tags: tags.iter().map(|t| t.parse().unwrap()).collect(),
            version,
            locator: seqnum
                .is_multiple_of(2)
                .then(|| Bytes::from(vec![seqnum as u8])),
            check: seqnum * 10,
        }
    }

    #[test]
    fn reads_and_draining_keep_the_maps_consistent() {
        let mut t = Tail::starting_at(10);
        t.push(&e(10, &["a", "x"], 0)).unwrap();
        t.push(&e(11, &["b"], 5)).unwrap();
        t.push(&e(12, &["a"], 1)).unwrap();
        t.push(&e(13, &["b", "x"], 6)).unwrap();
        assert!(t.push(&e(15, &["a"], 2)).is_err());
        assert!(t.push(&e(14, &["a"], 7)).is_err());
        let x: LogTag = "x".parse().unwrap();
        let a: LogTag = "a".parse().unwrap();
        let b: LogTag = "b".parse().unwrap();
        assert_eq!(t.seqnums(Some(&x), 0, 10), vec![10, 13]);
        assert_eq!(t.seqnums(None, 11, 2), vec![11, 12]);
        assert_eq!(t.version_seqnums(&b, 6, 10), vec![13]);
        assert_eq!(t.next_version(&a), Some(2));
        assert_eq!(t.prev(Some(&a), 12), Some(10));
        assert_eq!(t.prev(None, 100), Some(13));
        assert_eq!(t.locate(13), Some((12, Bytes::from(vec![12]))));
        let before = t.bytes();
        t.drop_before(12);
        assert!(t.bytes() < before);
        assert_eq!(t.start(), 12);
        assert_eq!(t.seqnums(Some(&x), 0, 10), vec![13]);
        assert_eq!(t.first_version(&b), Some(6));
        assert_eq!(t.locate(11), None);
        t.drop_before(14);
        assert_eq!(t.len(), 0);
        assert_eq!(t.bytes(), 0);
        assert_eq!(t.next_version(&a), None);
    }
}
