//! The in-memory read index shared by backends: which seqnums carry a tag,
//! and which seqnum holds each version of a primary tag.
//!
//! The index holds numbers only; a backend maps a seqnum to its bytes
//! (a slot in memory, an offset in a segment file, a record in a bucket).

use std::collections::{HashMap, VecDeque};

use crate::error::{Error, Result};
use crate::model::LogTag;
use crate::storage::{StreamInfo, stream_order};

#[derive(Debug, Default, Clone)]
struct VersionIndex {
    /// The version of `seqnums[0]`.
    first_version: u64,
    seqnums: VecDeque<u64>,
}

/// Visible entries of a log, by tag and by version.
#[derive(Debug, Default, Clone)]
pub struct MemoryIndex {
    first: u64,
    next: u64,
    by_tag: HashMap<LogTag, VecDeque<u64>>,
    by_version: HashMap<LogTag, VersionIndex>,
}

impl MemoryIndex {
    /// An empty index whose first seqnum is `first`.
    pub fn starting_at(first: u64) -> Self {
        MemoryIndex {
            first,
            next: first,
            ..MemoryIndex::default()
        }
    }

    /// An empty index whose first seqnum is `first`, for a log trimmed
    /// before it: each `(tag, next_version)` sets where that tag's version
    /// numbering goes on (its latest version is `next_version - 1`, and
    /// versions below `next_version` read as trimmed).
    pub fn with_version_floors(
        first: u64,
        floors: impl IntoIterator<Item = (LogTag, u64)>,
    ) -> Self {
        let mut index = MemoryIndex::starting_at(first);
        for (tag, next) in floors {
            index.by_version.insert(
                tag,
                VersionIndex {
                    first_version: next,
                    seqnums: VecDeque::new(),
                },
            );
        }
        index
    }

    /// For every primary tag with an entry `<= through` (or a floor from an
    /// earlier trim), the version its next entry would get had the log
    /// ended after `through`: the floors to keep when trimming there.
    pub fn next_versions_through(&self, through: u64) -> Vec<(LogTag, u64)> {
        self.by_version
            .iter()
            .filter_map(|(tag, stream)| {
                let upto = stream.seqnums.partition_point(|&s| s <= through) as u64;
                let next = stream.first_version + upto;
                (next > 0).then(|| (tag.clone(), next))
            })
            .collect()
    }

    /// The first live seqnum.
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The seqnum after the last visible entry.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Number of live entries.
    pub fn len(&self) -> u64 {
        self.next - self.first
    }

    /// Adds the entry `seqnum` (which must be `next()`).
    pub fn insert(&mut self, seqnum: u64, tags: &[LogTag], version: u64) -> Result<()> {
        if seqnum != self.next {
            return Err(Error::corrupt(format!(
                "entry {seqnum} is not the next entry {}",
                self.next
            )));
        }
        // Look up before cloning: replaying a large log on open inserts
        // millions of entries whose tags are almost always known already.
        for tag in tags {
            match self.by_tag.get_mut(tag) {
                Some(list) => list.push_back(seqnum),
                None => {
                    self.by_tag.insert(tag.clone(), VecDeque::from([seqnum]));
                }
            }
        }
        let stream = match self.by_version.get_mut(&tags[0]) {
            Some(stream) => stream,
            None => self
                .by_version
                .entry(tags[0].clone())
                .or_insert_with(|| VersionIndex {
                    first_version: version,
                    seqnums: VecDeque::new(),
                }),
        };
        let expected = stream.first_version + stream.seqnums.len() as u64;
        if version != expected {
            return Err(Error::corrupt(format!(
                "entry {seqnum} has version {version} of {}, expected {expected}",
                tags[0]
            )));
        }
        stream.seqnums.push_back(seqnum);
        self.next = seqnum + 1;
        Ok(())
    }

    fn check_from(&self, from: u64) -> Result<()> {
        if from < self.first {
            return Err(Error::trimmed(from, self.first));
        }
        Ok(())
    }

    /// Up to `max` seqnums `>= from`, carrying `tag` when given.
    ///
    /// Errors: `Trimmed` when `from` is below the first live seqnum.
    pub fn seqnums(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<u64>> {
        self.check_from(from)?;
        match tag {
            None => {
                let end = self.next.min(from.saturating_add(max as u64));
                Ok((from..end.max(from)).collect())
            }
            Some(tag) => {
                let Some(list) = self.by_tag.get(tag) else {
                    return Ok(Vec::new());
                };
                let start = list.partition_point(|&s| s < from);
                Ok(list.range(start..).take(max).copied().collect())
            }
        }
    }

    /// Up to `max` seqnums of `tag`'s versions `>= from_version`.
    ///
    /// Errors: `Trimmed` when `from_version` was trimmed away.
    pub fn version_seqnums(&self, tag: &LogTag, from_version: u64, max: usize) -> Result<Vec<u64>> {
        let Some(stream) = self.by_version.get(tag) else {
            return Ok(Vec::new());
        };
        if from_version < stream.first_version {
            return Err(Error::trimmed_version(
                tag,
                from_version,
                stream.first_version,
            ));
        }
        let skip = (from_version - stream.first_version) as usize;
        Ok(stream
            .seqnums
            .iter()
            .skip(skip)
            .take(max)
            .copied()
            .collect())
    }

    /// The last seqnum `< before` (carrying `tag` when given).
    pub fn prev(&self, tag: Option<&LogTag>, before: u64) -> Option<u64> {
        match tag {
            None => {
                let candidate = before.min(self.next).checked_sub(1)?;
                (candidate >= self.first).then_some(candidate)
            }
            Some(tag) => {
                let list = self.by_tag.get(tag)?;
                let idx = list.partition_point(|&s| s < before);
                idx.checked_sub(1).map(|i| list[i])
            }
        }
    }

    /// The latest live version of `tag` as a primary tag.
    pub fn latest_version(&self, tag: &LogTag) -> Option<u64> {
        let stream = self.by_version.get(tag)?;
        (stream.first_version + stream.seqnums.len() as u64).checked_sub(1)
    }

    /// The version of `tag`'s first live entry with seqnum `>= seqnum`, or
    /// the stream's next version when it has none that late; `None` when
    /// the index has no version stream for `tag`. After a trim through
    /// `seqnum - 1` this is the version numbering resumes from.
    pub fn next_version_at(&self, tag: &LogTag, seqnum: u64) -> Option<u64> {
        let stream = self.by_version.get(tag)?;
        let before = stream.seqnums.partition_point(|&s| s < seqnum);
        Some(stream.first_version + before as u64)
    }

    /// Up to `max` streams at or after `from` in
    /// [the stream order](crate::storage::stream_order), as
    /// [`Storage::streams`](crate::storage::Storage::streams) lists them. Walks
    /// every tag, keeping only the `max` first (a bounded heap), so the
    /// answer costs memory in `max`, not in the number of streams.
    pub fn streams(&self, from: Option<&LogTag>, max: usize) -> Vec<StreamInfo> {
        use std::cmp::Ordering;
        /// A tag ordered by the stream order, for the heap.
        struct ByOrder<'a>(&'a LogTag);
        impl PartialEq for ByOrder<'_> {
            fn eq(&self, other: &Self) -> bool {
                self.0 == other.0
            }
        }
        impl Eq for ByOrder<'_> {}
        impl PartialOrd for ByOrder<'_> {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for ByOrder<'_> {
            fn cmp(&self, other: &Self) -> Ordering {
                stream_order(self.0, other.0)
            }
        }
        if max == 0 {
            return Vec::new();
        }
        // A max-heap of the `max` smallest tags seen so far.
        let mut heap: std::collections::BinaryHeap<ByOrder<'_>> =
            std::collections::BinaryHeap::new();
        let tags = self.by_version.keys().chain(
            self.by_tag
                .keys()
                .filter(|t| !self.by_version.contains_key(*t)),
        );
        for tag in tags {
            if from.is_some_and(|f| stream_order(tag, f) == Ordering::Less) {
                continue;
            }
            let stream = self.by_version.get(tag);
            let never = stream.is_none_or(|s| s.first_version == 0 && s.seqnums.is_empty());
            if never && self.by_tag.get(tag).is_none_or(|l| l.is_empty()) {
                continue;
            }
            if heap.len() < max {
                heap.push(ByOrder(tag));
            } else if heap
                .peek()
                .is_some_and(|top| stream_order(tag, top.0) == Ordering::Less)
            {
                heap.pop();
                heap.push(ByOrder(tag));
            }
        }
        heap.into_sorted_vec()
            .into_iter()
            .map(|ByOrder(tag)| StreamInfo {
                tag: tag.clone(),
                next_version: self
                    .by_version
                    .get(tag)
                    .map_or(0, |s| s.first_version + s.seqnums.len() as u64),
                entries: self.by_tag.get(tag).map_or(0, |l| l.len() as u64),
            })
            .collect()
    }

    /// Forgets every entry with seqnum `<= through` (callers check that
    /// `through < next()`).
    pub fn trim(&mut self, through: u64) {
        self.first = self.first.max(through.saturating_add(1)).min(self.next);
        let first = self.first;
        self.by_tag.retain(|_, list| {
            while list.front().is_some_and(|&s| s < first) {
                list.pop_front();
            }
            !list.is_empty()
        });
        for stream in self.by_version.values_mut() {
            while stream.seqnums.front().is_some_and(|&s| s < first) {
                stream.seqnums.pop_front();
                stream.first_version += 1;
            }
        }
        // Keep empty version streams: their next version must survive a trim
        // (the latest version is gone, but the numbering continues).
    }
}
