//! The memory backend: the whole log in a `VecDeque` under a mutex.
//!
//! For unit tests, simulation and ephemeral logs; nothing survives the
//! process. Conditional appends and KV compare-and-set are atomic under the
//! backend's lock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::cache::EntryCache;
use super::sequencer::Sequencer;
use super::{Capabilities, CommitFeed, NewEntry, Storage};
use crate::clock::{self, Clock};
use crate::error::{Error, Result};
use crate::kv::{KvStore, MemoryKv};
use crate::model::{AppendResult, LogEntry, LogTag, MAX_ENTRY_BYTES};

#[derive(Debug, Default)]
struct State {
    sequencer: Sequencer,
    cache: EntryCache,
}

/// A log held in memory.
#[derive(Debug)]
pub struct MemoryStorage {
    state: Mutex<State>,
    feed: CommitFeed,
    kv: Arc<MemoryKv>,
    clock: Arc<dyn Clock>,
    max_entry_bytes: usize,
    closed: AtomicBool,
}

impl Default for MemoryStorage {
    fn default() -> Self {
        MemoryStorage::new()
    }
}

impl MemoryStorage {
    /// An empty log on the system clock.
    pub fn new() -> Self {
        MemoryStorage::with_clock(clock::system())
    }

    /// An empty log whose timestamps come from `clock`.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MemoryStorage {
            state: Mutex::new(State::default()),
            feed: CommitFeed::new(0),
            kv: Arc::new(MemoryKv::new()),
            clock,
            max_entry_bytes: MAX_ENTRY_BYTES,
            closed: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, State>> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::closed("the memory log is closed"));
        }
        Ok(self.state.lock().expect("memory storage lock"))
    }
}

#[async_trait]
impl Storage for MemoryStorage {
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        let now = self.clock.now_ms();
        let mut state = self.lock()?;
        let planned = state.sequencer.plan(batch, now)?;
        let results = planned
            .iter()
            .map(|e| AppendResult {
                seqnum: e.seqnum,
                stream_version: e.stream_version,
                primary_tag: e.tags[0].clone(),
                timestamp_ms: e.timestamp_ms,
            })
            .collect();
        state.cache.extend(planned.iter().cloned())?;
        // Published under the lock, so batches reach the feed in seqnum order.
        self.feed.publish(planned.into());
        Ok(results)
    }

    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.lock()?.cache.read(tag, from, max)
    }

    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        self.lock()?.cache.read_versions(tag, from_version, max)
    }

    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        Ok(self.lock()?.cache.read_prev(tag, before))
    }

    fn next_seqnum(&self) -> u64 {
        self.state
            .lock()
            .expect("memory storage lock")
            .cache
            .index()
            .next()
    }

    fn first_seqnum(&self) -> u64 {
        self.state
            .lock()
            .expect("memory storage lock")
            .cache
            .index()
            .first()
    }

    fn latest_version(&self, tag: &LogTag) -> Option<u64> {
        let state = self.state.lock().expect("memory storage lock");
        state.sequencer.next_version(tag).checked_sub(1)
    }

    async fn trim(&self, through: u64) -> Result<()> {
        let mut state = self.lock()?;
        state.cache.check_trim(through)?;
        state.cache.trim(through);
        Ok(())
    }

    fn feed(&self) -> &CommitFeed {
        &self.feed
    }

    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        Ok(self.kv.clone())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: false,
            durable: false,
            max_entry_bytes: self.max_entry_bytes,
        }
    }

    async fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        self.feed.close();
        Ok(())
    }
}
