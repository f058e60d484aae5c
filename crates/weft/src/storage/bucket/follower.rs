//! A read-only follower of a bucket log.
//!
//! The follower keeps the log's numbers, not its entries: which seqnums
//! carry each tag and which seqnum holds each version of a stream, plus a
//! bounded cache of the newest entries. Every other entry is read on demand
//! from its segment through bounded caches (see `local` and `reader` in this
//! module's parent). Its memory is the numbers plus
//! [`BucketFollowerOptions::memory_budget`], whatever the log's length.
//!
//! Opening reads the manifest and returns: the follower serves the log's
//! live end at once. Two background tasks then run a [`Replica`] each:
//!
//! * the **tail** follows the manifest from where the log ended at open,
//!   publishes every committed batch on the commit feed (so reads, views
//!   and subscriptions work as on the writer, lagging it by about one poll)
//!   and applies retention after every poll;
//! * the **fill** indexes the history before that point, reading segments
//!   `fill_prefetch` at a time, and ends when it reaches it.
//!
//! Until the fill is over, reads by seqnum are served at once (any live
//! entry); reads by tag or version are served at once when what they ask
//! lies in what is indexed so far — the entries since open, or the part of
//! the history the fill has reached — and otherwise wait for the fill. No
//! read returns a partial answer. Writes are refused with `ReadOnly`.
//!
//! Retention: the fill starts from the log state the writer stored when it
//! last trimmed (first seqnum, every stream's next version); the tail drops
//! from the follower's copy whatever the manifest no longer holds after each
//! poll, so reads fail with `Trimmed` where the writer's do. A follower that
//! falls so far behind that the entries it still needs were truncated stops
//! with `Trimmed` (see [`BucketFollower::stopped`]); it never skips entries.
//!
//! Tip and version queries answer for the prefix applied so far
//! ([`Freshness::AppliedPrefix`]): a follower never asks the bucket whether
//! the writer is ahead.

use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::ObjectStore;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::BucketLayout;
use super::budget::Budget;
use super::catchup::{open_numbers, read_start, request_timeout, spawn_history_fill};
use super::kv::BucketKv;
use super::local::{LocalLog, LocalState};
use super::numbers::CacheDir;
use super::open_checks::{check_weft_log, decode_trim_state};
use super::records::BatchAssembler;
use crate::error::{Error, ErrorKind, Result};
use crate::format::ManifestData;
use crate::kv::KvStore;
use crate::model::{AppendResult, LogEntry, LogTag, MAX_ENTRY_BYTES};
use crate::objects::RetryPolicy;
use crate::outage::Outage;
use crate::storage::{Capabilities, CommitFeed, Freshness, NewEntry, Storage, StreamInfo, Tip};
use crate::wal::{Applier, Cursor, CursorStore, MemoryCursorStore, Record, Replica};

/// How a follower tails the bucket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct BucketFollowerOptions {
    /// Wait between polls that found nothing new.
    pub poll_interval: Duration,
    /// Segments fetched concurrently while tailing.
    pub prefetch: usize,
    /// Segments fetched concurrently while filling in history (a fresh
    /// follower reads the whole log this way: its speed is the GET
    /// parallelism; each segment in flight is held in memory).
    pub fill_prefetch: usize,
    /// Bytes the follower keeps in memory besides the log's numbers: the
    /// newest entries, decoded segments read back, manifest history pages,
    /// and (with a cache directory) the persistent index's caches.
    pub memory_budget: usize,
    /// A directory for the follower's persistent state (the log's numbers
    /// in a persistent index). With one, a restarted follower reads only
    /// what was committed since it last ran; without one, the index lives
    /// in a private temporary directory removed when the follower closes
    /// (unless [`numbers_in_memory`](Self::numbers_in_memory)), and every
    /// open reads the whole log in the background. Either way memory does
    /// not grow with the log. The state is derived from the log and rebuilt
    /// when it is damaged or belongs to another log. Two live handles must
    /// not share one.
    pub cache_dir: Option<std::path::PathBuf>,
    /// Without a [`cache_dir`](Self::cache_dir), keep the log's numbers in
    /// memory instead of a temporary index directory: a few dozen bytes per
    /// live entry, so memory grows with the log. For short logs and tests;
    /// default off.
    pub numbers_in_memory: bool,
    /// Retries of the reads on open and of KV requests, and the deadline
    /// of every operation: opening fails (`Unavailable`) once the store has
    /// made no progress for [`RetryPolicy::deadline`], and a store request
    /// that takes longer than it (or the policy's attempt timeout) fails
    /// its poll, which the tailing task (or the background fill) retries.
    pub retry: RetryPolicy,
}

setters! {
    BucketFollowerOptions {
        with_poll_interval => poll_interval: Duration,
        with_prefetch => prefetch: usize,
        with_fill_prefetch => fill_prefetch: usize,
        with_memory_budget => memory_budget: usize,
        with_cache_dir => cache_dir: Option<std::path::PathBuf>,
        with_numbers_in_memory => numbers_in_memory: bool,
        with_retry => retry: RetryPolicy,
    }
}

impl Default for BucketFollowerOptions {
    fn default() -> Self {
        BucketFollowerOptions {
            poll_interval: Duration::from_millis(50),
            prefetch: 8,
            fill_prefetch: 32,
            memory_budget: 256 << 20,
            cache_dir: None,
            numbers_in_memory: false,
            retry: RetryPolicy::default(),
        }
    }
}

/// What the tail and the fill share with the handle.
type Shared = LocalLog;

/// The tail's applier: publishes committed batches at the live end.
struct TailApplier {
    shared: Arc<Shared>,
    assembler: BatchAssembler,
}

#[async_trait]
impl Applier for TailApplier {
    /// A log whose manifest did not exist at open and was trimmed before
    /// the tail first read it: start over at the trim point the writer
    /// stored.
    async fn restore(&mut self, snapshot: Bytes, through_seq: u64) -> Result<()> {
        let state = decode_trim_state(&snapshot, through_seq)?;
        let first = through_seq.saturating_add(1);
        self.shared
            .visible()
            .write()
            .restore_history(first, state.next_versions)?;
        // Nothing below `first` will ever be announced.
        self.shared.feed().advance_to(first);
        self.assembler = BatchAssembler::starting_at(first);
        Ok(())
    }

    async fn apply(&mut self, record: &Record) -> Result<()> {
        if let Some(batch) = self.assembler.push(record)? {
            self.shared.publish(batch)?;
        }
        Ok(())
    }
}

/// Drops what `manifest` no longer holds from the follower's copy.
///
/// Errors: the persistent index's.
fn honour_retention(shared: &Shared, manifest: &ManifestData) -> Result<()> {
    let live_from = super::catchup::first_live(manifest);
    let mut state = shared.visible().write();
    if live_from > state.tip().first {
        state.trim(live_from - 1, &[])?;
    }
    Ok(())
}

/// Polls until `shutdown`, honouring retention after every poll. Transient
/// store errors are retried after `interval`; any other error ends it.
async fn tail(
    replica: &mut Replica<TailApplier>,
    shared: &Shared,
    interval: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    tokio::pin!(shutdown);
    let mut outage = Outage::new("bucket follower poll");
    loop {
        let wait = match replica.poll().await {
            Ok(outcome) => {
                outage.recovered();
                if let Some(m) = replica.manifest() {
                    if !outcome.unchanged {
                        shared.reader().set_manifest(Arc::new(m.clone()));
                    }
                    honour_retention(shared, m)?;
                }
                if outcome.applied > 0 {
                    Duration::ZERO
                } else {
                    interval
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Indeterminate) => {
                outage.failed(&e);
                interval
            }
            Err(e) => return Err(e),
        };
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = crate::clock::sleep(wait) => {}
        }
    }
}

/// A read-only replica of a bucket log that serves the whole read API.
pub struct BucketFollower {
    shared: Arc<Shared>,
    /// The store as given: erases write segment objects through it.
    store: Arc<dyn ObjectStore>,
    kv: Arc<BucketKv>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for BucketFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketFollower").finish_non_exhaustive()
    }
}

impl BucketFollower {
    /// Opens a follower of the log at `prefix` in `store`. It reads the
    /// manifest and returns: from then on it serves the log as of that
    /// read, and newer entries as the tail applies them (see the
    /// [module docs](self) for what waits for the history to be filled
    /// in).
    ///
    /// Errors: store errors reading the manifest (`NotFound` for a missing
    /// bucket, `PermissionDenied`, `Unavailable` once the store has made no
    /// progress for `options.retry.deadline`), `Corrupt` for an unreadable
    /// manifest or a trim state that is not a weft log state;
    /// `InvalidInput` for a manifest that is not a weft log's (a
    /// segment-numbered WAL);
    /// `Locked` when another handle uses [`BucketFollowerOptions::cache_dir`].
    pub async fn open(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        options: BucketFollowerOptions,
    ) -> Result<Self> {
        let layout = BucketLayout::new(prefix);
        let budget = Budget::follower(options.memory_budget);
        let cache = CacheDir::for_handle(options.cache_dir.as_deref(), options.numbers_in_memory)?;
        let (manifest, trim) = read_start(&store, &layout, &options.retry).await?;
        if let Some(m) = &manifest {
            check_weft_log(&layout.manifest(), m)?;
        }
        let exists = manifest.is_some();
        let manifest = manifest
            .unwrap_or_else(|| ManifestData::empty(crate::format::ManifestVersion::default()));
        let (reader, numbers, from) =
            open_numbers(&store, &layout, &manifest, trim.as_ref(), cache, &budget).await?;
        // The live end starts where the log ended at open.
        let live_from = manifest.next_sequence;
        let state = LocalState::filling(numbers, live_from, budget.recent);
        let shared = Arc::new(LocalLog::new("the bucket follower", state, reader));
        // The tail goes on from there (from scratch when there was no log:
        // then it restores a trim point itself).
        let cursors = MemoryCursorStore::new();
        if exists {
            cursors.save(Cursor::at_entry(live_from)).await?;
        }
        let tail_applier = TailApplier {
            shared: shared.clone(),
            assembler: if exists {
                BatchAssembler::starting_at(live_from)
            } else {
                BatchAssembler::new()
            },
        };
        let mut replica = Replica::builder(store.clone(), layout.manifest(), tail_applier)
            .with_cursor_store(cursors)
            .with_prefetch(options.prefetch)
            .with_poll_interval(options.poll_interval)
            .with_page_cache_bytes(budget.pages)
            .with_request_timeout(request_timeout(&options.retry))
            .build();
        let (stop, mut stopped_rx) = watch::channel(false);
        let task_shared = shared.clone();
        let interval = options.poll_interval;
        let tail_task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped_rx.wait_for(|s| *s).await;
            };
            if let Err(e) = tail(&mut replica, &task_shared, interval, shutdown).await {
                tracing::error!(error = %e, "bucket follower stopped");
                task_shared.gate().stop(&e);
                task_shared.fill_failed(&e);
                task_shared.feed().close();
            }
        });
        let mut tasks = vec![tail_task];
        if from < live_from {
            // Every read that waits for the fill gets its error (and
            // `filled_in`): that is where it is reported.
            tasks.push(spawn_history_fill(
                store.clone(),
                layout.clone(),
                shared.clone(),
                from,
                live_from,
                options.fill_prefetch,
                interval,
                request_timeout(&options.retry),
                "the bucket follower",
            ));
        }
        Ok(BucketFollower {
            shared,
            kv: Arc::new(
                BucketKv::new(store.clone(), layout.kv()).with_retry_policy(options.retry),
            ),
            store,
            stop,
            tasks: Mutex::new(tasks),
        })
    }

    /// Why the follower stopped tailing, if it did (it then serves what it
    /// has and its subscriptions end), as a message.
    pub fn stopped(&self) -> Option<String> {
        self.stop_error().map(|e| e.to_string())
    }

    /// The error that stopped the tailing, if one did.
    pub fn stop_error(&self) -> Option<Error> {
        self.shared.gate().stopped()
    }

    /// True while the follower is still indexing the history from before it
    /// opened (reads that need it wait).
    pub fn filling_in(&self) -> bool {
        self.shared.visible().read().filling_in()
    }

    /// Waits until the history from before the follower opened is indexed.
    ///
    /// Errors: why filling it in failed; `Closed`.
    pub async fn filled_in(&self) -> Result<()> {
        self.shared.filled_in().await
    }

    /// Bytes the follower's caches hold now (entries read back, history
    /// pages), excluding the newest entries it keeps.
    pub fn cached_bytes(&self) -> usize {
        self.shared.reader().cached_bytes()
    }

    fn read_only() -> Error {
        Error::new(
            ErrorKind::ReadOnly,
            "this is a read-only follower of a bucket log; write through the writer",
        )
    }
}

#[async_trait]
impl Storage for BucketFollower {
    async fn append(&self, _batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        Err(Self::read_only())
    }

    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.shared.read(tag, from, max).await
    }

    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        self.shared.read_versions(tag, from_version, max).await
    }

    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        self.shared.read_prev(tag, before).await
    }

    async fn tip(&self) -> Result<Tip> {
        self.shared.tip()
    }

    async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.shared.latest_version(tag).await
    }

    async fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<StreamInfo>> {
        self.shared.streams(from, max).await
    }

    async fn trim(&self, _through: u64) -> Result<()> {
        Err(Self::read_only())
    }

    /// A follower erases as a tool does: it rewrites segment objects
    /// without claiming the log (no manifest is written, so the writer is
    /// not fenced), through the store it was given — a read-only store
    /// refuses with `ReadOnly`.
    async fn erase(&self, seqnums: &[u64]) -> Result<u64> {
        self.shared.erase(&self.store, seqnums).await
    }

    fn feed(&self) -> &CommitFeed {
        self.shared.feed()
    }

    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        Ok(self.kv.clone())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: true,
            durable: true,
            max_entry_bytes: MAX_ENTRY_BYTES,
            freshness: Freshness::AppliedPrefix,
        }
    }

    async fn close(&self) -> Result<()> {
        self.shared.gate().close();
        let _ = self.stop.send(true);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        // The tail stops at the signal; the fill is simply dropped.
        for (i, task) in tasks.into_iter().enumerate() {
            if i > 0 {
                task.abort();
            }
            let _ = task.await;
        }
        self.shared.close();
        self.shared.close_index().await
    }
}

impl Drop for BucketFollower {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for task in self.tasks.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            task.abort();
        }
    }
}
