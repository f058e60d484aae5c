//! Subscriptions: the backlog from storage, then live entries from the
//! commit feed, as one `futures::Stream`.
//!
//! A subscription keeps a cursor (the next seqnum it may deliver) and never
//! delivers below it, so the hand-over from backlog to live can neither skip
//! nor repeat an entry. The feed's receiver is created before the first
//! storage read, so nothing committed in between is missed. Each catch-up
//! read is preceded by a tip query ([`Storage::tip`]): when the read comes
//! back short, everything below that tip has been seen, and whatever
//! commits from it on reaches the feed after the receiver was created.
//!
//! Positions: `At(s)` is `s`; `End` is the feed's announced tip when the
//! subscription is made (so entries appended after `subscribe` returns are
//! delivered even if it is first polled later); `Beginning` is the tip's
//! first seqnum at the first poll; `Since(t)` is what
//! [`Storage::seek_time`](crate::Storage::seek_time) answers at the first
//! poll.
//!
//! [`Storage::tip`]: crate::Storage::tip
//!
//! Slow subscribers: the feed buffers a bounded number of batches. A
//! subscriber that falls further behind is told it lagged, goes back to
//! reading from storage at its cursor, and catches up from there. Appends
//! never wait for a subscriber, and no subscriber is dropped silently.
//! The stream ends when it is dropped (there is nothing to unsubscribe) or
//! when the log closes; a read error (for example `Trimmed`) is delivered
//! once and then the stream ends.
//!
//! Filtered subscriptions ([`Log::subscribe_filtered`]) follow a
//! [`TagFilter`] over the whole log: a namespace, a set of tags, a key
//! prefix. Their cursor walks every seqnum (catch-up reads the whole log
//! and keeps the matches; one tag alone is read from its index), and they
//! yield [`Delivery::Passed`] marks whenever the cursor moved beyond the
//! last entry delivered, so a subscriber can checkpoint how far it has
//! looked even while no entry matches, and a resumed one starts there
//! instead of scanning again what it already passed.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::Log;
use super::lifecycle::{StreamLifecycle, lifecycle_of};
use crate::error::Result;
use crate::model::{LogEntry, Position, TagFilter};
use crate::storage::kit::CommittedBatch;

/// How many entries one catch-up read fetches.
const CATCH_UP_CHUNK: usize = 1024;

/// A stream of entries: backlog, then live. Drop it to unsubscribe.
pub struct Subscription {
    inner: BoxStream<'static, Result<LogEntry>>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Subscription")
    }
}

/// One item of a [`FilteredSubscription`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// An entry that matches the filter.
    Entry(LogEntry),
    /// Every entry with a seqnum below this one has been examined, and
    /// those that matched were delivered before this mark. Storing it and
    /// resuming with `Position::At(it)` neither repeats nor skips a match,
    /// and reads nothing below it again.
    Passed(u64),
}

impl Delivery {
    /// The position to resume at after this item: the seqnum after the
    /// entry, or the mark itself.
    pub fn resume_at(&self) -> u64 {
        match self {
            Delivery::Entry(e) => e.seqnum + 1,
            Delivery::Passed(next) => *next,
        }
    }
}

/// A [`TagFilter`]'s entries over the whole log, backlog then live, with
/// [`Delivery::Passed`] marks while matches are sparse. Drop it to
/// unsubscribe.
pub struct FilteredSubscription {
    inner: BoxStream<'static, Result<Delivery>>,
}

impl std::fmt::Debug for FilteredSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FilteredSubscription")
    }
}

struct State {
    log: Log,
    filter: TagFilter,
    /// Yield [`Delivery::Passed`] marks.
    marks: bool,
    /// Next seqnum that may be delivered; `None` until `Beginning` is
    /// resolved by the first tip query.
    cursor: Option<u64>,
    /// The resume position the items handed out so far imply.
    announced: u64,
    /// For `Since`: the time the unresolved cursor stands for.
    since: Option<u64>,
    buffer: VecDeque<Delivery>,
    feed: Option<broadcast::Receiver<CommittedBatch>>,
    /// True while storage may hold entries at or above `cursor` that the
    /// feed will not deliver.
    catching_up: bool,
    /// For a one-tag filter, the stream's lifecycle, read at the first
    /// poll: the cursor starts no earlier than its start, so nothing below
    /// it is read or delivered.
    lifecycle: Option<StreamLifecycle>,
    done: bool,
}

impl State {
    fn push(&mut self, entry: LogEntry) {
        self.announced = entry.seqnum + 1;
        self.buffer.push_back(Delivery::Entry(entry));
    }

    /// A mark for the cursor, when it moved past what was handed out.
    fn mark(&mut self) {
        if let Some(cursor) = self.cursor
            && self.marks
            && cursor > self.announced
        {
            self.announced = cursor;
            self.buffer.push_back(Delivery::Passed(cursor));
        }
    }

    async fn next(&mut self) -> Option<Result<Delivery>> {
        if self.lifecycle.is_none() && !self.done {
            let known = match self.filter.single_tag() {
                Some(tag) => lifecycle_of(self.log.storage.as_ref(), tag).await,
                None => Ok(StreamLifecycle::default()),
            };
            match known {
                Ok(known) => {
                    // A truncated stream is followed from its start.
                    self.cursor = self.cursor.map(|c| c.max(known.start_seqnum));
                    self.announced = self.announced.max(known.start_seqnum);
                    self.lifecycle = Some(known);
                }
                Err(err) => {
                    self.done = true;
                    return Some(Err(err));
                }
            }
        }
        loop {
            if let Some(item) = self.buffer.pop_front() {
                return Some(Ok(item));
            }
            if self.done {
                return None;
            }
            if self.catching_up {
                if let Err(err) = self.catch_up().await {
                    self.done = true;
                    return Some(Err(err));
                }
                continue;
            }
            let Some(cursor) = self.cursor else {
                // Only `Beginning` starts unresolved, and it starts catching up.
                self.catching_up = true;
                continue;
            };
            let feed = self.feed.as_mut()?;
            match feed.recv().await {
                Ok(batch) => {
                    let Some(first) = batch.first().map(|e| e.seqnum) else {
                        continue;
                    };
                    if first > cursor {
                        // A gap between what we have and what the feed holds:
                        // fill it from storage before going on.
                        self.catching_up = true;
                        continue;
                    }
                    for entry in batch.iter() {
                        if entry.seqnum >= cursor && self.filter.matches(entry) {
                            self.push(entry.clone());
                        }
                    }
                    if let Some(last) = batch.last() {
                        self.cursor = Some(cursor.max(last.seqnum + 1));
                    }
                    self.mark();
                }
                Err(RecvError::Lagged(_)) => self.catching_up = true,
                Err(RecvError::Closed) => self.done = true,
            }
        }
    }

    /// One catch-up read at the cursor, after a tip query; stops catching
    /// up when the read comes back short.
    async fn catch_up(&mut self) -> Result<()> {
        // The tip before the read: if the read comes back short, everything
        // below it has been seen.
        let tip = self.log.storage.tip().await?;
        let cursor = match (self.cursor, self.since) {
            (Some(c), _) => c,
            (None, Some(t)) => self.log.storage.seek_time(t).await?,
            (None, None) => tip.first,
        }
        .max(self.lifecycle.map_or(0, |l| l.start_seqnum));
        self.cursor = Some(cursor);
        self.announced = self.announced.max(cursor);
        // One tag (or every entry) reads exactly the matches; any other
        // filter reads every entry and keeps the matching ones, so the
        // cursor moves over the whole log either way.
        let tag = self.filter.single_tag().cloned();
        let chunk = self
            .log
            .storage
            .read(tag.as_ref(), cursor, CATCH_UP_CHUNK)
            .await?;
        let short = chunk.len() < CATCH_UP_CHUNK;
        let mut next = chunk.last().map_or(cursor, |last| last.seqnum + 1);
        for entry in chunk {
            if tag.is_some() || self.filter.matches(&entry) {
                self.push(entry);
            }
        }
        if short {
            next = next.max(tip.next);
            self.catching_up = false;
        }
        self.cursor = Some(next);
        self.mark();
        Ok(())
    }
}

fn deliveries(
    log: Log,
    filter: TagFilter,
    position: Position,
    marks: bool,
) -> BoxStream<'static, Result<Delivery>> {
    // Subscribe to the feed first, then fix the cursor: an entry
    // committed in between is then both in storage and in the feed, and
    // the cursor keeps it from being delivered twice.
    let feed = log.storage.feed().subscribe();
    let cursor = match position {
        Position::At(s) => Some(s),
        Position::End => Some(*log.storage.feed().watch_tip().borrow()),
        Position::Beginning | Position::Since(_) => None,
    };
    let state = State {
        log,
        filter,
        marks,
        announced: cursor.unwrap_or(0),
        cursor,
        since: match position {
            Position::Since(t) => Some(t),
            _ => None,
        },
        buffer: VecDeque::new(),
        done: feed.is_none(),
        feed,
        catching_up: position != Position::End,
        lifecycle: None,
    };
    Box::pin(futures::stream::unfold(state, |mut state| async move {
        let item = state.next().await?;
        Some((item, state))
    }))
}

impl Subscription {
    pub(crate) fn new(log: Log, filter: TagFilter, position: Position) -> Self {
        use futures::StreamExt;
        let inner = deliveries(log, filter, position, false).filter_map(|item| async move {
            match item {
                Ok(Delivery::Entry(e)) => Some(Ok(e)),
                Ok(Delivery::Passed(_)) => None,
                Err(e) => Some(Err(e)),
            }
        });
        Subscription {
            inner: Box::pin(inner),
        }
    }
}

impl FilteredSubscription {
    pub(crate) fn new(log: Log, filter: TagFilter, position: Position) -> Self {
        FilteredSubscription {
            inner: deliveries(log, filter, position, true),
        }
    }
}

impl Stream for Subscription {
    type Item = Result<LogEntry>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl Stream for FilteredSubscription {
    type Item = Result<Delivery>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
