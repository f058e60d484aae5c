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
//! first seqnum at the first poll.
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

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::Log;
use crate::error::Result;
use crate::model::{LogEntry, LogTag, Position};
use crate::storage::feed::CommittedBatch;

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

struct State {
    log: Log,
    tag: Option<LogTag>,
    /// Next seqnum that may be delivered; `None` until `Beginning` is
    /// resolved by the first tip query.
    cursor: Option<u64>,
    buffer: VecDeque<LogEntry>,
    feed: Option<broadcast::Receiver<CommittedBatch>>,
    /// True while storage may hold entries at or above `cursor` that the
    /// feed will not deliver.
    catching_up: bool,
    done: bool,
}

impl State {
    fn matches(&self, entry: &LogEntry) -> bool {
        self.tag.as_ref().is_none_or(|t| entry.has_tag(t))
    }

    async fn next(&mut self) -> Option<Result<LogEntry>> {
        loop {
            if let Some(entry) = self.buffer.pop_front() {
                return Some(Ok(entry));
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
                        if entry.seqnum >= cursor && self.matches(entry) {
                            self.buffer.push_back(entry.clone());
                        }
                    }
                    if let Some(last) = batch.last() {
                        self.cursor = Some(cursor.max(last.seqnum + 1));
                    }
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
        let cursor = *self.cursor.get_or_insert(tip.first);
        let chunk = self
            .log
            .storage
            .read(self.tag.as_ref(), cursor, CATCH_UP_CHUNK)
            .await?;
        let short = chunk.len() < CATCH_UP_CHUNK;
        let mut next = chunk.last().map_or(cursor, |last| last.seqnum + 1);
        self.buffer.extend(chunk);
        if short {
            next = next.max(tip.next);
            self.catching_up = false;
        }
        self.cursor = Some(next);
        Ok(())
    }
}

impl Subscription {
    pub(crate) fn new(log: Log, tag: Option<LogTag>, position: Position) -> Self {
        // Subscribe to the feed first, then fix the cursor: an entry
        // committed in between is then both in storage and in the feed, and
        // the cursor keeps it from being delivered twice.
        let feed = log.storage.feed().subscribe();
        let cursor = match position {
            Position::At(s) => Some(s),
            Position::End => Some(*log.storage.feed().watch_tip().borrow()),
            Position::Beginning => None,
        };
        let state = State {
            log,
            tag,
            cursor,
            buffer: VecDeque::new(),
            done: feed.is_none(),
            feed,
            catching_up: position != Position::End,
        };
        let inner = futures::stream::unfold(state, |mut state| async move {
            let item = state.next().await?;
            Some((item, state))
        });
        Subscription {
            inner: Box::pin(inner),
        }
    }
}

impl Stream for Subscription {
    type Item = Result<LogEntry>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
