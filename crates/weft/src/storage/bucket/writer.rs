//! The writer of a bucket log: the one epoch-fenced process that appends.
//!
//! Opening claims the log (the producer bumps the manifest's epoch with a
//! conditional PUT, which fences any older writer), then rebuilds the
//! authoritative seqnum and version counters from the bucket. An append
//! plans its numbers under a lock — checking `expected_version` against
//! those counters — and hands its frames to the producer while still
//! holding the lock, so planning order is commit order. The manifest CAS
//! plus the epoch make that check as strong as a check in storage: a
//! writer that lost the epoch cannot commit anything, planned or not.
//!
//! Entries become readable (and are published to subscribers) once the
//! producer reports them committed. If the producer fails or is fenced,
//! numbers already planned can no longer be trusted, so the writer stops:
//! every later append fails with the producer's error (`Fenced` when a newer
//! writer took over); reads of what was committed keep working.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use object_store::ObjectStore;
use tokio::sync::{mpsc, oneshot};

use super::BucketLayout;
use super::kv::BucketKv;
use super::records::{BatchAssembler, encode_batch};
use crate::clock::{self, Clock};
use crate::error::{Error, ErrorKind, Result};
use crate::format::ManifestVersion;
use crate::kv::KvStore;
use crate::model::{AppendResult, LogEntry, LogTag, MAX_ENTRY_BYTES};
use crate::storage::cache::EntryCache;
use crate::storage::sequencer::Sequencer;
use crate::storage::{Capabilities, CommitFeed, NewEntry, Storage};
use crate::wal::{Applier, Durability, Producer, Record, Replica};

/// Settings of a bucket writer (plain data).
#[derive(Clone, Debug)]
pub struct BucketOptions {
    /// Longest wait before buffered appends are flushed.
    pub flush_interval: Duration,
    /// Buffered bytes that trigger a flush.
    pub flush_bytes: usize,
    /// Largest payload accepted.
    pub max_entry_bytes: usize,
    /// Segments fetched concurrently while rebuilding on open.
    pub rebuild_prefetch: usize,
}

impl Default for BucketOptions {
    fn default() -> Self {
        BucketOptions {
            flush_interval: Duration::from_millis(20),
            flush_bytes: 4 << 20,
            max_entry_bytes: MAX_ENTRY_BYTES,
            rebuild_prefetch: 8,
        }
    }
}

#[derive(Debug, Default)]
struct Committed {
    cache: EntryCache,
}

/// One planned batch on its way to visibility.
struct InFlight {
    planned: Vec<LogEntry>,
    durability: Durability,
    reply: oneshot::Sender<Result<()>>,
}

/// What the writer handle and its visibility task share.
#[derive(Debug)]
struct Shared {
    committed: Mutex<Committed>,
    feed: CommitFeed,
    /// Set once the producer failed: every later append gets this error.
    failed: Mutex<Option<(ErrorKind, String)>>,
    closed: AtomicBool,
}

/// The writer of a bucket log.
pub struct BucketStorage {
    producer: Producer,
    sequencer: tokio::sync::Mutex<Sequencer>,
    /// Batches in planning order; the visibility task makes them readable
    /// in that order, whether or not their callers are still waiting.
    in_flight: mpsc::UnboundedSender<InFlight>,
    shared: Arc<Shared>,
    kv: Arc<BucketKv>,
    clock: Arc<dyn Clock>,
    options: BucketOptions,
}

impl std::fmt::Debug for BucketStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketStorage").finish_non_exhaustive()
    }
}

/// Collects every committed batch during the rebuild on open.
struct Rebuild {
    assembler: BatchAssembler,
    batches: Vec<Vec<LogEntry>>,
}

#[async_trait]
impl Applier for Rebuild {
    async fn apply(&mut self, record: &Record) -> Result<()> {
        if let Some(batch) = self.assembler.push(record)? {
            self.batches.push(batch);
        }
        Ok(())
    }
}

impl BucketStorage {
    /// Opens the writer of the log at `prefix` in `store`, creating the log
    /// if absent and fencing any previous writer.
    ///
    /// Errors: `PermissionDenied` (credentials), `NotFound` (bucket),
    /// `Unavailable` (endpoint), `Corrupt` (data), `InvalidInput` when the
    /// manifest is not a record-numbered (v3/v4) weft log.
    pub async fn open(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        options: BucketOptions,
    ) -> Result<Self> {
        Self::open_with_clock(store, prefix, options, clock::system()).await
    }

    /// [`BucketStorage::open`] with an injected clock.
    pub async fn open_with_clock(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        options: BucketOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        let layout = BucketLayout::new(prefix);
        // Claim first, then read: once our epoch is in the manifest no older
        // writer can commit, so what we rebuild from is final.
        let producer = Producer::builder(store.clone(), layout.manifest(), layout.segments())
            .with_flush_interval(options.flush_interval)
            .with_flush_bytes(options.flush_bytes)
            .with_manifest_version(ManifestVersion::V4)
            .open()
            .await?;
        let rebuild = Rebuild {
            assembler: BatchAssembler::new(),
            batches: Vec::new(),
        };
        let mut replica = Replica::builder(store.clone(), layout.manifest(), rebuild)
            .with_prefetch(options.rebuild_prefetch)
            .build();
        replica.poll().await?;
        if let Some(m) = replica.manifest()
            && m.entries.iter().any(|e| e.count.is_none())
        {
            return Err(Error::invalid_input(format!(
                "{} is a {:?} manifest, which numbers segments, not records; \
                 a weft log needs v3 or v4",
                layout.manifest(),
                m.version
            )));
        }
        let mut sequencer = Sequencer::new();
        let mut committed = Committed::default();
        let batches = std::mem::take(&mut replica.applier_mut().batches);
        let first = batches
            .first()
            .map(|b| b[0].seqnum)
            .or_else(|| replica.manifest().map(|m| m.next_sequence))
            .unwrap_or(0);
        committed.cache = EntryCache::starting_at(first);
        for batch in batches {
            for entry in &batch {
                sequencer.observe(entry)?;
            }
            committed.cache.extend(batch)?;
        }
        let next = replica.manifest().map_or(0, |m| m.next_sequence);
        sequencer.advance_to(next);
        if sequencer.next_seqnum() != next {
            return Err(Error::corrupt(format!(
                "the log's entries end at seqnum {} but its manifest says {next}",
                sequencer.next_seqnum()
            )));
        }
        let shared = Arc::new(Shared {
            feed: CommitFeed::new(committed.cache.index().next()),
            committed: Mutex::new(committed),
            failed: Mutex::new(None),
            closed: AtomicBool::new(false),
        });
        let (in_flight, rx) = mpsc::unbounded_channel();
        tokio::spawn(make_visible(shared.clone(), rx));
        Ok(BucketStorage {
            producer,
            sequencer: tokio::sync::Mutex::new(sequencer),
            in_flight,
            shared,
            kv: Arc::new(BucketKv::new(store, layout.kv())),
            clock,
            options,
        })
    }

    fn committed(&self) -> Result<std::sync::MutexGuard<'_, Committed>> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::closed("the bucket log is closed"));
        }
        Ok(self.cache_lock())
    }

    fn cache_lock(&self) -> std::sync::MutexGuard<'_, Committed> {
        self.shared.committed.lock().expect("writer lock")
    }

    fn check_failed(&self) -> Result<()> {
        self.shared.check_failed()
    }
}

impl Shared {
    fn check_failed(&self) -> Result<()> {
        match &*self.failed.lock().expect("writer lock") {
            Some((kind, msg)) => Err(Error::new(*kind, msg.clone())),
            None => Ok(()),
        }
    }

    fn fail(&self, err: &Error) {
        let mut failed = self.failed.lock().expect("writer lock");
        if failed.is_none() {
            let kind = match err.kind() {
                ErrorKind::Fenced => ErrorKind::Fenced,
                _ => ErrorKind::Closed,
            };
            *failed = Some((
                kind,
                format!("the bucket writer stopped after an earlier failure: {err}"),
            ));
        }
    }

    /// Makes a committed batch readable and tells subscribers.
    fn publish(&self, batch: Vec<LogEntry>) -> Result<()> {
        let mut c = self.committed.lock().expect("writer lock");
        c.cache.extend(batch.iter().cloned())?;
        // Under the cache lock, so the feed sees batches in order.
        self.feed.publish(batch.into());
        Ok(())
    }
}

/// Waits for each batch's commit in planning order (which is the WAL's
/// commit order) and makes it visible before answering its caller, so an
/// acknowledged append is readable at once and a caller that gave up
/// waiting cannot leave a gap.
async fn make_visible(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<InFlight>) {
    while let Some(InFlight {
        planned,
        durability,
        reply,
    }) = rx.recv().await
    {
        let result = match durability.wait().await {
            Ok(seq) if seq == planned[0].seqnum => shared.publish(planned),
            Ok(seq) => Err(Error::internal(format!(
                "the WAL committed the batch at {seq}, planned at {}",
                planned[0].seqnum
            ))),
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            shared.fail(e);
        }
        let _ = reply.send(result);
    }
}

#[async_trait]
impl Storage for BucketStorage {
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        self.check_failed()?;
        let now = self.clock.now_ms();
        let (planned, durability) = {
            let mut sequencer = self.sequencer.lock().await;
            self.check_failed()?;
            let mut trial = sequencer.clone();
            let planned = trial.plan(batch, now)?;
            let records = encode_batch(&planned)?;
            let durability = match self.producer.append(records, None).await {
                Ok(d) => d,
                Err(e) if e.kind() == ErrorKind::InvalidInput => return Err(e),
                Err(e) => {
                    self.shared.fail(&e);
                    return Err(e);
                }
            };
            *sequencer = trial;
            let (reply, answer) = oneshot::channel();
            let in_flight = InFlight {
                planned: planned.clone(),
                durability,
                reply,
            };
            if self.in_flight.send(in_flight).is_err() {
                return Err(Error::closed("the bucket writer is closed"));
            }
            (planned, answer)
        };
        durability
            .await
            .unwrap_or_else(|_| Err(Error::closed("the bucket writer stopped")))?;
        let results = planned
            .iter()
            .map(|e| AppendResult {
                seqnum: e.seqnum,
                stream_version: e.stream_version,
                primary_tag: e.tags[0].clone(),
                timestamp_ms: e.timestamp_ms,
            })
            .collect();
        Ok(results)
    }

    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.committed()?.cache.read(tag, from, max)
    }

    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        self.committed()?
            .cache
            .read_versions(tag, from_version, max)
    }

    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        Ok(self.committed()?.cache.read_prev(tag, before))
    }

    fn next_seqnum(&self) -> u64 {
        self.cache_lock().cache.index().next()
    }

    fn first_seqnum(&self) -> u64 {
        self.cache_lock().cache.index().first()
    }

    fn latest_version(&self, tag: &LogTag) -> Option<u64> {
        self.cache_lock().cache.index().latest_version(tag)
    }

    async fn trim(&self, through: u64) -> Result<()> {
        self.check_failed()?;
        self.committed()?.cache.check_trim(through)?;
        self.producer.truncate_through(through).await?;
        self.committed()?.cache.trim(through);
        Ok(())
    }

    fn feed(&self) -> &CommitFeed {
        &self.shared.feed
    }

    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        Ok(self.kv.clone())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: false,
            durable: true,
            max_entry_bytes: self.options.max_entry_bytes,
        }
    }

    async fn close(&self) -> Result<()> {
        self.shared.closed.store(true, Ordering::Release);
        {
            let mut failed = self.shared.failed.lock().expect("writer lock");
            if failed.is_none() {
                *failed = Some((ErrorKind::Closed, "the bucket log is closed".into()));
            }
        }
        let result = self.producer.close().await;
        self.shared.feed.close();
        result
    }
}
