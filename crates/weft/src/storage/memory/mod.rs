//! The memory backend: the whole log in an entry cache, numbered by a
//! sequencer.
//!
//! For unit tests, simulation and ephemeral logs; nothing survives the
//! process. Conditional appends are atomic under the sequencer's lock, and
//! the KV's compare-and-set under the KV's. Append ids are remembered for
//! every entry until it is trimmed (the whole log is in memory anyway).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

mod cache;
mod cached;

use super::kit;
use super::kit::AppendIds;
use super::kit::Sequencer;
use super::{Capabilities, CommitFeed, Freshness, NewEntry, Storage, StreamInfo, Tip};
use crate::clock::{self, Clock};
use crate::error::Result;
use crate::kv::{KvStore, MemoryKv};
use crate::model::{AppendResult, LogEntry, LogTag, MAX_ENTRY_BYTES};
use cache::EntryCache;
use cached::CachedLog;

/// A log held in memory.
#[derive(Debug)]
pub struct MemoryStorage {
    /// Held while a batch is numbered and published, so batches become
    /// visible (and reach the feed) in seqnum order.
    numbering: Mutex<Numbering>,
    log: CachedLog,
    kv: Arc<MemoryKv>,
    clock: Arc<dyn Clock>,
    max_entry_bytes: usize,
    retention: crate::retention::RetentionSlot,
}

/// The counters and the append ids, under one lock.
#[derive(Debug, Default)]
struct Numbering {
    sequencer: Sequencer,
    ids: AppendIds,
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
            numbering: Mutex::new(Numbering::default()),
            log: CachedLog::new("the memory log", EntryCache::default()),
            kv: Arc::new(MemoryKv::new()),
            retention: crate::retention::RetentionSlot::new(clock.clone()),
            clock,
            max_entry_bytes: MAX_ENTRY_BYTES,
        }
    }
}

#[async_trait]
impl Storage for MemoryStorage {
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        kit::check_append(&batch, self.append_limits())?;
        self.log.gate().check_writable()?;
        let now = self.clock.now_ms();
        let mut guard = self.numbering.lock().unwrap_or_else(|p| p.into_inner());
        let Numbering { sequencer, ids } = &mut *guard;
        // Every id numbered so far is published (under this lock), so a
        // known id's entry is already readable.
        let planned = ids.plan(sequencer, batch, now, |_| Ok(None))?;
        if !planned.entries.is_empty() {
            self.log.publish(planned.entries)?;
        }
        Ok(planned.results)
    }

    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.log.read(tag, from, max)
    }

    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        self.log.read_versions(tag, from_version, max)
    }

    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        self.log.read_prev(tag, before)
    }

    async fn tip(&self) -> Result<Tip> {
        self.log.tip()
    }

    async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.log.latest_version(tag)
    }

    async fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<StreamInfo>> {
        self.log.streams(from, max)
    }

    async fn trim(&self, through: u64) -> Result<()> {
        self.log.gate().check_writable()?;
        let mut numbering = self.numbering.lock().unwrap_or_else(|p| p.into_inner());
        let mut cache = self.log.visible().write();
        cache.check_trim(through)?;
        cache.trim(through);
        numbering.ids.forget_through(through);
        Ok(())
    }

    async fn erase(&self, seqnums: &[u64]) -> Result<u64> {
        self.log.gate().check_writable()?;
        let mut cache = self.log.visible().write();
        kit::check_erasable(seqnums, cache.index().next())?;
        Ok(cache.erase(seqnums))
    }

    fn feed(&self) -> &CommitFeed {
        self.log.feed()
    }

    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        Ok(self.kv.clone())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: false,
            durable: false,
            max_entry_bytes: self.max_entry_bytes,
            freshness: Freshness::SingleWriter,
        }
    }

    fn supports_append_ids(&self) -> bool {
        true
    }

    fn retention_slot(&self) -> Option<&crate::retention::RetentionSlot> {
        Some(&self.retention)
    }

    async fn close(&self) -> Result<()> {
        self.log.close();
        Ok(())
    }
}
