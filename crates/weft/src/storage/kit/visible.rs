//! What readers see, and the feed that announces it, under one lock.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::error::Result;
use crate::model::LogEntry;
use crate::storage::CommitFeed;
use crate::storage::kit::CommittedBatch;

/// A backend's readable state `V` (an entry cache, an index with segment
/// offsets) and its [`CommitFeed`].
///
/// [`publish`](Visible::publish) adds a committed batch to the state and
/// announces it while holding the write lock, so a reader never sees an
/// entry the feed has not been told about for longer than the lock is held,
/// and batches reach the feed in the order they became visible.
#[derive(Debug)]
pub struct Visible<V> {
    state: RwLock<V>,
    feed: CommitFeed,
}

impl<V> Visible<V> {
    /// `state`, announced on a feed whose next seqnum is `next_seqnum`.
    pub fn new(state: V, next_seqnum: u64) -> Self {
        Visible {
            state: RwLock::new(state),
            feed: CommitFeed::new(next_seqnum),
        }
    }

    /// Reads the state. (Every writer leaves the state consistent, so a
    /// panic elsewhere does not make it unreadable.)
    pub fn read(&self) -> RwLockReadGuard<'_, V> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the state without announcing anything (trims, restores).
    /// Adding entries goes through [`publish`](Visible::publish).
    pub fn write(&self) -> RwLockWriteGuard<'_, V> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `batch` (committed, in seqnum order, continuing what was
    /// published before) readable with `add`, then announces it, under the
    /// write lock. When `add` fails nothing is announced.
    ///
    /// Errors: `add`'s.
    pub fn publish<T>(
        &self,
        batch: Vec<LogEntry>,
        add: impl FnOnce(&mut V, &[LogEntry]) -> Result<T>,
    ) -> Result<T> {
        self.publish_shared(batch.into(), |state, batch| add(state, batch))
    }

    /// As [`publish`](Visible::publish), for a state that keeps the batch
    /// itself: `add` gets the `Arc` the feed announces, to share instead
    /// of copying the entries.
    ///
    /// Errors: `add`'s.
    pub fn publish_shared<T>(
        &self,
        batch: CommittedBatch,
        add: impl FnOnce(&mut V, &CommittedBatch) -> Result<T>,
    ) -> Result<T> {
        let mut state = self.write();
        let out = add(&mut state, &batch)?;
        self.feed.publish(batch);
        drop(state);
        Ok(out)
    }

    /// The feed.
    pub fn feed(&self) -> &CommitFeed {
        &self.feed
    }
}
