//! What a bucket writer or follower keeps locally, and how it serves reads.
//!
//! Neither keeps the log's entries: only their numbers (which seqnums carry
//! each tag, which seqnum holds each version of a stream) and a bounded
//! cache of the newest entries. Any other entry is read on demand from its
//! segment ([`BucketReader`]), through bounded caches. So memory holds the
//! numbers and a configured budget of bytes, not the log's payloads.
//!
//! ## Filling in history
//!
//! A follower that starts with nothing indexed does not make its first
//! reader wait for the whole log: it serves the log's live end at once and
//! indexes the older history in the background. Until that fill reaches the
//! point where the follower started (`pending.from`), entries since then
//! are indexed apart ([`Pending`]); a query is answered at once when what it
//! asks lies there (or in the part already filled in), and otherwise waits
//! for the fill:
//!
//! * reads by seqnum never wait (they need no index);
//! * reads by tag from a seqnum wait only when the entries the fill has
//!   indexed do not already hold `max` answers;
//! * reads by version, `latest_version` and `read_prev` by tag are answered
//!   from the entries since the start when the stream shows up there, and
//!   otherwise wait.
//!
//! A query never returns an answer the complete index would not give.

use std::collections::VecDeque;

use std::sync::Arc;

use object_store::ObjectStore;
use tokio::sync::watch;

use super::numbers::{EntryNumbers, Floors, Numbers, check_of};
use super::reader::BucketReader;
use crate::error::{Error, ErrorKind, Result};
use crate::model::{LogEntry, LogTag};
use crate::storage::Tip;
use crate::storage::kit::MemoryIndex;
use crate::storage::kit::{Gate, Visible};

/// The entries since a follower started, while the history before them is
/// still being filled in.
#[derive(Debug)]
struct Pending {
    /// Where the follower started: the fill indexes everything before it.
    from: u64,
    index: MemoryIndex,
    numbers: Vec<EntryNumbers>,
    /// Every stream's next version as of `from`, when it is known (a
    /// writer that opened from a state checkpoint): then the latest
    /// version of any stream is known without the history.
    floors: Option<Floors>,
}

/// The newest entries, up to a byte budget.
#[derive(Debug, Default)]
struct Recent {
    entries: VecDeque<LogEntry>,
    bytes: usize,
    budget: usize,
}

fn entry_bytes(e: &LogEntry) -> usize {
    let tags: usize = e
        .tags
        .iter()
        .map(|t| t.namespace().len() + t.key().map_or(0, str::len) + 48)
        .sum();
    e.data.len() + tags + e.append_id.as_ref().map_or(0, String::len) + 64
}

impl Recent {
    fn push(&mut self, batch: &[LogEntry]) {
        for e in batch {
            if self
                .entries
                .back()
                .is_some_and(|b| b.seqnum + 1 != e.seqnum)
            {
                self.entries.clear();
                self.bytes = 0;
            }
            self.bytes += entry_bytes(e);
            self.entries.push_back(e.clone());
        }
        while self.bytes > self.budget {
            match self.entries.pop_front() {
                Some(e) => self.bytes -= entry_bytes(&e),
                None => break,
            }
        }
    }

    fn get(&self, seqnum: u64) -> Option<&LogEntry> {
        let first = self.entries.front()?.seqnum;
        self.entries
            .get(usize::try_from(seqnum.checked_sub(first)?).ok()?)
    }

    /// Empties the payloads of the held entries among `seqnums`.
    fn erase(&mut self, seqnums: &[u64]) {
        let Some(first) = self.entries.front().map(|e| e.seqnum) else {
            return;
        };
        for &s in seqnums {
            let Some(e) = s
                .checked_sub(first)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| self.entries.get_mut(i))
            else {
                continue;
            };
            self.bytes -= e.data.len();
            e.data = bytes::Bytes::new();
        }
    }

    fn trim(&mut self, through: u64) {
        while self.entries.front().is_some_and(|e| e.seqnum <= through) {
            if let Some(e) = self.entries.pop_front() {
                self.bytes -= entry_bytes(&e);
            }
        }
    }
}

/// A query's answer, or that it must wait until the history is filled in.
enum Plan<T> {
    Ready(T),
    Wait,
}

/// The numbers of a bucket log as a writer or follower knows them.
#[derive(Debug)]
pub(crate) struct LocalState {
    /// Tags and versions of `[first, indexed)`.
    index: Numbers,
    pending: Option<Pending>,
    recent: Recent,
    /// A trim point that came while filling in history: applied to the
    /// index once the fill is over (until then reads below it are
    /// refused here).
    deferred_trim: Option<u64>,
}

impl LocalState {
    /// Everything indexed from `index` on; entries after it are live.
    pub(crate) fn new(index: Numbers, recent_budget: usize) -> Self {
        LocalState {
            index,
            pending: None,
            recent: Recent {
                budget: recent_budget,
                ..Recent::default()
            },
            deferred_trim: None,
        }
    }

    /// A state that serves from `from` on at once while the history before
    /// it is filled in (see the module docs), starting from `index`.
    pub(crate) fn filling(index: Numbers, from: u64, recent_budget: usize) -> Self {
        let mut s = LocalState::new(index, recent_budget);
        if s.index.next() < from {
            s.pending = Some(Pending {
                from,
                index: MemoryIndex::starting_at(from),
                numbers: Vec::new(),
                floors: None,
            });
        }
        s
    }

    /// [`LocalState::filling`] when every stream's next version as of
    /// `from` is known (`floors`, from a state checkpoint through
    /// `from - 1`): version queries then never wait for the history.
    pub(crate) fn filling_from(
        index: Numbers,
        from: u64,
        floors: Floors,
        recent_budget: usize,
    ) -> Self {
        let mut s = LocalState::filling(index, from, recent_budget);
        if let Some(p) = &mut s.pending {
            p.floors = Some(floors);
        }
        s
    }

    /// The first live seqnum and the next one to be published.
    pub(crate) fn tip(&self) -> Tip {
        Tip {
            first: self.first(),
            next: self.next(),
        }
    }

    fn first(&self) -> u64 {
        let deferred = self.deferred_trim.map_or(0, |t| t.saturating_add(1));
        self.index.first().max(deferred).min(self.next())
    }

    fn next(&self) -> u64 {
        match &self.pending {
            Some(p) => p.index.next(),
            None => self.index.next(),
        }
    }

    /// How far the index is complete: every entry below it is indexed.
    pub(crate) fn indexed(&self) -> u64 {
        self.index.next()
    }

    /// True while history is being filled in.
    pub(crate) fn filling_in(&self) -> bool {
        self.pending.is_some()
    }

    /// The numbers (for a writer's trim: version floors; its sequencer).
    pub(crate) fn numbers(&self) -> &Numbers {
        &self.index
    }

    /// The entry at `seqnum`, when it is among the newest ones kept.
    pub(crate) fn recent_entry(&self, seqnum: u64) -> Option<&LogEntry> {
        self.recent.get(seqnum)
    }

    /// The next version of every stream with an entry at the live end,
    /// while history is being filled in (empty otherwise).
    pub(crate) fn live_next_versions(&self) -> Vec<(LogTag, u64)> {
        self.pending
            .as_ref()
            .map(|p| p.index.next_versions_through(u64::MAX))
            .unwrap_or_default()
    }

    /// Every stream with an entry at the live end, with the version of its
    /// first entry there, while history is being filled in (empty
    /// otherwise).
    pub(crate) fn live_first_versions(&self) -> Vec<(LogTag, u64)> {
        let Some(p) = &self.pending else {
            return Vec::new();
        };
        p.index
            .next_versions_through(u64::MAX)
            .into_iter()
            .filter_map(|(tag, _)| {
                let first = p.index.next_version_at(&tag, p.from)?;
                Some((tag, first))
            })
            .collect()
    }

    /// Takes the numbers out, leaving an empty index behind.
    pub(crate) fn take_numbers(&mut self) -> Numbers {
        std::mem::replace(&mut self.index, Numbers::Memory(MemoryIndex::default()))
    }

    /// Adds a committed batch at the live end.
    ///
    /// Errors: `Corrupt` when it does not continue the log.
    pub(crate) fn add_live(&mut self, batch: &[LogEntry]) -> Result<()> {
        match &mut self.pending {
            Some(p) => {
                for e in batch {
                    p.index.insert(e.seqnum, &e.tags, e.stream_version)?;
                    p.numbers.push(EntryNumbers::of(e));
                }
            }
            None => self.index.push(&EntryNumbers::of_all(batch))?,
        }
        self.recent.push(batch);
        Ok(())
    }

    /// Adds a batch of history (the fill); once it reaches where the live
    /// end started, the entries since are moved into the index and the fill
    /// is over. Entries at or past that point are ignored (the live end has
    /// them).
    ///
    /// Errors: `Corrupt` when it does not continue the index.
    pub(crate) fn add_history(&mut self, batch: &[LogEntry]) -> Result<()> {
        let until = self.pending.as_ref().map_or(u64::MAX, |p| p.from);
        let next = self.index.next();
        let fresh: Vec<EntryNumbers> = batch
            .iter()
            .filter(|e| e.seqnum >= next && e.seqnum < until)
            .map(EntryNumbers::of)
            .collect();
        if !fresh.is_empty() {
            self.index.push(&fresh)?;
        }
        if self.index.next() == until
            && let Some(floors) = self.pending.as_ref().and_then(|p| p.floors.as_ref())
        {
            // The history now reaches the state checkpoint the writer
            // opened from: the versions it took from there are checked
            // against the log itself before anything else relies on them.
            self.index.check_floors(floors)?;
        }
        if self.index.next() == until
            && let Some(p) = self.pending.take()
        {
            self.index.push(&p.numbers)?;
            if let Some(through) = self.deferred_trim.take() {
                self.index.trim(through, &[])?;
            }
        }
        Ok(())
    }

    /// Starts the index over at a trim point: history from `first` on, with
    /// the version `floors` the writer stored; the live entries stay.
    ///
    /// Errors: the index's I/O kinds.
    pub(crate) fn restore_history(&mut self, first: u64, floors: Vec<(LogTag, u64)>) -> Result<()> {
        match &mut self.index {
            Numbers::Memory(i) => {
                *i = MemoryIndex::with_version_floors(first, floors);
                Ok(())
            }
            Numbers::Disk(i, _) => i.trim(first, &floors),
        }
    }

    /// Forgets every entry with seqnum `<= through` (while filling in
    /// history, the index is trimmed once the fill is over).
    ///
    /// Errors: the index's I/O kinds.
    pub(crate) fn trim(&mut self, through: u64, floors: &[(LogTag, u64)]) -> Result<()> {
        self.recent.trim(through);
        match &mut self.pending {
            None => {
                if through >= self.index.first() {
                    self.index.trim(through, floors)?;
                }
            }
            Some(p) => {
                self.deferred_trim = Some(self.deferred_trim.map_or(through, |d| d.max(through)));
                if through >= p.from {
                    p.index.trim(through);
                }
            }
        }
        Ok(())
    }

    fn seqnums(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Plan<Vec<u64>>> {
        let Some(p) = &self.pending else {
            return self.index.seqnums(tag, from, max).map(Plan::Ready);
        };
        if from >= p.from {
            return p.index.seqnums(tag, from, max).map(Plan::Ready);
        }
        if from < self.first() {
            return Err(Error::trimmed(from, self.first()));
        }
        let Some(tag) = tag else {
            // By seqnum: every live seqnum is there, indexed or not.
            let end = self.next().min(from.saturating_add(max as u64));
            return Ok(Plan::Ready((from..end.max(from)).collect()));
        };
        if from >= self.index.next() {
            return Ok(Plan::Wait);
        }
        let got = self.index.seqnums(Some(tag), from, max)?;
        Ok(if got.len() >= max {
            Plan::Ready(got)
        } else {
            Plan::Wait
        })
    }

    fn version_seqnums(&self, tag: &LogTag, from: u64, max: usize) -> Result<Plan<Vec<u64>>> {
        let Some(p) = &self.pending else {
            return self.index.version_seqnums(tag, from, max).map(Plan::Ready);
        };
        match p.index.next_version_at(tag, p.from) {
            // The stream shows up since the start, from this version on.
            Some(first_live) if from >= first_live => {
                p.index.version_seqnums(tag, from, max).map(Plan::Ready)
            }
            _ => Ok(Plan::Wait),
        }
    }

    fn prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Plan<Option<u64>>> {
        let Some(p) = &self.pending else {
            return self.index.prev(tag, before).map(Plan::Ready);
        };
        if tag.is_none() {
            let candidate = before.min(self.next()).checked_sub(1);
            return Ok(Plan::Ready(candidate.filter(|&c| c >= self.first())));
        }
        if before > p.from
            && let Some(found) = p.index.prev(tag, before)
        {
            return Ok(Plan::Ready(Some(found)));
        }
        if before <= self.index.next() {
            return self.index.prev(tag, before).map(Plan::Ready);
        }
        Ok(Plan::Wait)
    }

    /// Every stream is known only once the history is filled in.
    fn streams(
        &self,
        from: Option<&LogTag>,
        max: usize,
    ) -> Result<Plan<Vec<crate::storage::StreamInfo>>> {
        if self.pending.is_some() {
            return Ok(Plan::Wait);
        }
        self.index.streams(from, max).map(Plan::Ready)
    }

    fn latest_version(&self, tag: &LogTag) -> Result<Plan<Option<u64>>> {
        let Some(p) = &self.pending else {
            return self.index.latest_version(tag).map(Plan::Ready);
        };
        Ok(match (p.index.latest_version(tag), &p.floors) {
            (Some(v), _) => Plan::Ready(Some(v)),
            (None, Some(floors)) => Plan::Ready(floors.get(tag).and_then(|n| n.checked_sub(1))),
            (None, None) => Plan::Wait,
        })
    }
}

/// A bucket log as served by a writer or a follower: the local numbers,
/// the newest entries, the reader for everything else, the feed and the
/// handle's lifecycle.
#[derive(Debug)]
pub(crate) struct LocalLog {
    gate: Gate,
    visible: Visible<LocalState>,
    reader: BucketReader,
    /// How far the index is complete; ticks as the fill goes on.
    indexed: watch::Sender<u64>,
    /// Why the fill stopped, if it failed.
    fill_failed: std::sync::Mutex<Option<Error>>,
}

impl LocalLog {
    pub(crate) fn new(what: &'static str, state: LocalState, reader: BucketReader) -> Self {
        let next = state.next();
        let indexed = state.indexed();
        LocalLog {
            gate: Gate::new(what),
            visible: Visible::new(state, next),
            reader,
            indexed: watch::Sender::new(indexed),
            fill_failed: std::sync::Mutex::new(None),
        }
    }

    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }

    pub(crate) fn visible(&self) -> &Visible<LocalState> {
        &self.visible
    }

    pub(crate) fn reader(&self) -> &BucketReader {
        &self.reader
    }

    pub(crate) fn feed(&self) -> &crate::storage::CommitFeed {
        self.visible.feed()
    }

    /// Makes a committed batch readable and announces it.
    ///
    /// Errors: `Corrupt` when it does not continue the log.
    pub(crate) fn publish(&self, batch: Vec<LogEntry>) -> Result<()> {
        self.visible
            .publish(batch, |state, entries| state.add_live(entries))?;
        self.indexed.send_replace(self.visible.read().indexed());
        Ok(())
    }

    /// Flushes, closes and lets go of the persistent index, if the numbers
    /// live in one, so that another handle may open its directory (off the
    /// runtime: it waits for the index's flusher). Call once the handle is
    /// closed: its reads fail with `Closed` from then on anyway.
    pub(crate) async fn close_index(&self) -> Result<()> {
        let numbers = self.visible().write().take_numbers();
        match numbers {
            Numbers::Disk(index, lock) => tokio::task::spawn_blocking(move || {
                if lock.is_temporary() {
                    // Deleted next: nothing to write out for a later open.
                    index.discard();
                    drop(index);
                    drop(lock);
                    return Ok(());
                }
                // Lets go of the store even if a reader still holds the index,
                // and, after a clean close, empties its journal for the next
                // open.
                let closed = index.release();
                drop(index);
                // Only now may another handle take the directory.
                drop(lock);
                closed
            })
            .await
            .map_err(|e| Error::internal("closing the log index panicked").with_source(e))?,
            Numbers::Memory(_) => Ok(()),
        }
    }

    /// Erases the payloads of `seqnums` (ascending, committed) in their
    /// segment objects (see [`super::erase`]), then in what this handle
    /// holds: its newest entries, its segment cache and, when the cache
    /// directory's index ends at one of them, the index's tip check.
    ///
    /// Errors: `InvalidInput` for a seqnum this handle has not seen
    /// committed; as [`super::erase::erase_entries`].
    pub(crate) async fn erase(&self, store: &Arc<dyn ObjectStore>, seqnums: &[u64]) -> Result<u64> {
        self.gate.check_writable()?;
        let next = self.visible.read().tip().next;
        crate::storage::kit::check_erasable(seqnums, next)?;
        let result = super::erase::erase_entries(store, &self.reader, seqnums).await;
        self.visible.write().recent.erase(seqnums);
        let erased = result?;
        let index = match self.visible.read().numbers() {
            Numbers::Disk(index, _) => Some(Arc::clone(index)),
            Numbers::Memory(..) => None,
        };
        if let (Some(index), Some(&last)) = (index, seqnums.last())
            && last + 1 == index.next()
        {
            // The tip check covers the payload: record the erased one's,
            // or the next open would find the tip changed and rebuild.
            let mut entry = self.reader.read_seqnums(&[last]).await?;
            if let Some(e) = entry.pop()
                && let Err(err) = index.recheck(last, check_of(&e))
            {
                tracing::warn!(error = %err, "could not record the erased tip's check in the cache index");
            }
        }
        Ok(erased)
    }

    /// Adds a batch of filled-in history.
    ///
    /// Errors: `Corrupt` when it does not continue the index.
    pub(crate) fn add_history(&self, batch: &[LogEntry]) -> Result<()> {
        let indexed = {
            let mut state = self.visible.write();
            let from_checkpoint = state.pending.as_ref().is_some_and(|p| p.floors.is_some());
            if let Err(e) = state.add_history(batch) {
                // A writer that opened from a state checkpoint numbered its
                // appends by it: if the history disagrees with it, or cannot
                // be taken in, it stops appending.
                if from_checkpoint && e.kind() == ErrorKind::Corrupt {
                    self.gate.stop(&e);
                }
                return Err(e);
            }
            state.indexed()
        };
        self.indexed.send_replace(indexed);
        Ok(())
    }

    /// Records that the fill failed: queries that wait for it get `err`.
    pub(crate) fn fill_failed(&self, err: &Error) {
        // A writer that opened from a state checkpoint took appends on the
        // word of a checkpoint its history can no longer confirm (damaged
        // or unreadable history): it stops appending, as a writer that
        // reads the whole log on open refuses such a log.
        if self
            .visible
            .read()
            .pending
            .as_ref()
            .is_some_and(|p| p.floors.is_some())
        {
            self.gate.stop(err);
        }
        *self.fill_failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(err.clone());
        self.indexed.send_replace(self.visible.read().indexed());
    }

    /// Answers `plan` on the state, waiting for the fill when it must.
    async fn answer<T>(&self, plan: impl Fn(&LocalState) -> Result<Plan<T>>) -> Result<T> {
        let mut rx = self.indexed.subscribe();
        loop {
            self.gate.check_open()?;
            let attempt = plan(&self.visible.read())?;
            match attempt {
                Plan::Ready(t) => return Ok(t),
                Plan::Wait => {
                    if let Some(e) = self
                        .fill_failed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clone()
                    {
                        return Err(e.context("filling in the follower's history"));
                    }
                    if rx.changed().await.is_err() {
                        return Err(Error::closed("the bucket log is closed"));
                    }
                }
            }
        }
    }

    /// Waits until no history is left to fill in.
    ///
    /// Errors: why the fill failed; `Closed`.
    pub(crate) async fn filled_in(&self) -> Result<()> {
        self.answer(|s| {
            Ok(if s.filling_in() {
                Plan::Wait
            } else {
                Plan::Ready(())
            })
        })
        .await
    }

    /// The entries with these seqnums, in order.
    async fn entries(&self, seqnums: Vec<u64>) -> Result<Vec<LogEntry>> {
        let mut out = Vec::with_capacity(seqnums.len());
        let mut missing = Vec::new();
        {
            let state = self.visible.read();
            for (i, s) in seqnums.iter().enumerate() {
                match state.recent.get(*s) {
                    Some(e) => out.push(Some(e.clone())),
                    None => {
                        out.push(None);
                        missing.push(i);
                    }
                }
            }
        }
        if !missing.is_empty() {
            let wanted: Vec<u64> = missing.iter().map(|&i| seqnums[i]).collect();
            let fetched = self.reader.read_seqnums(&wanted).await?;
            for (i, e) in missing.into_iter().zip(fetched) {
                out[i] = Some(e);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// See [`Storage::read`](crate::Storage::read).
    pub(crate) async fn read(
        &self,
        tag: Option<&LogTag>,
        from: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let seqnums = self.answer(|s| s.seqnums(tag, from, max)).await?;
        self.entries(seqnums).await
    }

    /// See [`Storage::read_versions`](crate::Storage::read_versions).
    pub(crate) async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        let seqnums = self
            .answer(|s| s.version_seqnums(tag, from_version, max))
            .await?;
        self.entries(seqnums).await
    }

    /// See [`Storage::read_prev`](crate::Storage::read_prev).
    pub(crate) async fn read_prev(
        &self,
        tag: Option<&LogTag>,
        before: u64,
    ) -> Result<Option<LogEntry>> {
        let found = self.answer(|s| s.prev(tag, before)).await?;
        match found {
            Some(s) => Ok(self.entries(vec![s]).await?.pop()),
            None => Ok(None),
        }
    }

    /// See [`Storage::tip`](crate::Storage::tip).
    pub(crate) fn tip(&self) -> Result<Tip> {
        self.gate.check_open()?;
        Ok(self.visible.read().tip())
    }

    /// See [`Storage::latest_version`](crate::Storage::latest_version).
    pub(crate) async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.answer(|s| s.latest_version(tag)).await
    }

    /// See [`Storage::streams`](crate::Storage::streams): waits until the
    /// history is filled in.
    pub(crate) async fn streams(
        &self,
        from: Option<&LogTag>,
        max: usize,
    ) -> Result<Vec<crate::storage::StreamInfo>> {
        self.answer(|s| s.streams(from, max)).await
    }

    /// Closes the handle and ends every subscription.
    pub(crate) fn close(&self) -> bool {
        let first = self.gate.close();
        self.feed().close();
        self.indexed.send_replace(self.visible.read().indexed());
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(t: &str) -> LogTag {
        t.parse().unwrap()
    }

    fn entry(seqnum: u64, t: &str, version: u64) -> LogEntry {
        LogEntry {
            seqnum,
            stream_version: version,
            tags: vec![tag(t)],
            data: bytes::Bytes::from(vec![0u8; 10]),
            timestamp_ms: 0,
            append_id: None,
        }
    }

    fn ready<T>(p: Result<Plan<T>>) -> Option<T> {
        match p.unwrap() {
            Plan::Ready(t) => Some(t),
            Plan::Wait => None,
        }
    }

    /// A follower that started at 4 on a log whose entries 0..4 are
    /// `a0 b0 a1 b1` and goes on with `a2 c0`.
    fn filling() -> LocalState {
        let mut s = LocalState::filling(Numbers::Memory(MemoryIndex::starting_at(0)), 4, 1 << 20);
        s.add_live(&[entry(4, "a", 2), entry(5, "c", 0)]).unwrap();
        s
    }

    #[test]
    fn queries_answer_from_the_live_end_and_wait_for_history() {
        let mut s = filling();
        assert_eq!(s.tip(), Tip { first: 0, next: 6 });
        // By seqnum: anything live, at once.
        assert_eq!(ready(s.seqnums(None, 1, 3)), Some(vec![1, 2, 3]));
        // By tag from the start: after the fill. From the live end: now.
        assert!(ready(s.seqnums(Some(&tag("a")), 0, 10)).is_none());
        assert_eq!(ready(s.seqnums(Some(&tag("a")), 4, 10)), Some(vec![4]));
        // Versions: a's live versions from 2 on; older ones, and streams
        // not seen since the start, wait.
        assert_eq!(ready(s.version_seqnums(&tag("a"), 2, 5)), Some(vec![4]));
        assert!(ready(s.version_seqnums(&tag("a"), 1, 5)).is_none());
        assert!(ready(s.version_seqnums(&tag("b"), 0, 5)).is_none());
        assert!(matches!(
            s.latest_version(&tag("c")).unwrap(),
            Plan::Ready(Some(0))
        ));
        assert!(matches!(s.latest_version(&tag("b")).unwrap(), Plan::Wait));
        assert!(matches!(
            s.prev(Some(&tag("a")), 6).unwrap(),
            Plan::Ready(Some(4))
        ));
        assert!(matches!(s.prev(Some(&tag("b")), 6).unwrap(), Plan::Wait));

        // The fill: part of it answers what it holds enough of.
        s.add_history(&[entry(0, "a", 0), entry(1, "b", 0)])
            .unwrap();
        assert_eq!(ready(s.seqnums(Some(&tag("a")), 0, 1)), Some(vec![0]));
        assert!(ready(s.seqnums(Some(&tag("a")), 0, 2)).is_none());
        assert!(matches!(
            s.prev(Some(&tag("b")), 2).unwrap(),
            Plan::Ready(Some(1))
        ));
        // Done: the live numbers move in; everything answers.
        s.add_history(&[entry(2, "a", 1), entry(3, "b", 1), entry(4, "a", 2)])
            .unwrap();
        assert!(!s.filling_in());
        assert_eq!(
            ready(s.seqnums(Some(&tag("a")), 0, 10)),
            Some(vec![0, 2, 4])
        );
        assert_eq!(ready(s.version_seqnums(&tag("b"), 0, 5)), Some(vec![1, 3]));
        assert_eq!(s.tip(), Tip { first: 0, next: 6 });
        s.add_live(&[entry(6, "b", 2)]).unwrap();
        assert!(matches!(
            s.latest_version(&tag("b")).unwrap(),
            Plan::Ready(Some(2))
        ));
        assert_eq!(s.recent.get(6).map(|e| e.seqnum), Some(6));
        assert!(s.recent.get(0).is_none(), "history is never cached");
    }

    #[test]
    fn recent_entries_stay_within_their_budget() {
        let mut s = LocalState::new(Numbers::Memory(MemoryIndex::starting_at(0)), 300);
        for i in 0..10 {
            s.add_live(&[entry(i, "a", i)]).unwrap();
        }
        assert!(s.recent.bytes <= 300);
        assert!(s.recent.get(9).is_some() && s.recent.get(0).is_none());
        s.trim(8, &[]).unwrap();
        assert!(s.recent.get(8).is_none() && s.recent.get(9).is_some());
        assert_eq!(s.tip(), Tip { first: 9, next: 10 });
    }
}
