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
//! On a trimmed log the rebuild starts from the log state the last trim
//! stored as the WAL's snapshot (see the [module docs](super)), so seqnums
//! and every stream's versions go on where they were, and the first
//! readable entry is the one after the trim point.
//!
//! A conditional append that conflicts only with batches still in flight
//! waits for them before answering `Conflict`: should one of them fail, the
//! conflict would have been false, and the answer is the writer's failure
//! instead.
//!
//! Append ids ([`AppendIds`]) are checked in the same
//! step as the numbers. A retry whose original is still in flight waits for
//! it the same way, and answers with the original's result once it is
//! committed (or with the writer's failure if it is not). A new writer
//! knows the ids of the newest [`BucketOptions::append_id_window`] entries,
//! so a retry after a failover is answered too: the ids of what it reads
//! when it opens, and — when that was not the whole live log (a cache
//! directory, whose index does not keep ids, or a state checkpoint) —
//! those of the entries before that, up to the window, read from the
//! bucket by the first append that carries an id (appends without ids
//! never wait for it).
//!
//! Entries become readable (and are published to subscribers) once the
//! producer reports them committed. If the producer fails or is fenced,
//! numbers already planned can no longer be trusted, so the writer stops:
//! every later append fails with [`Error::after_stop`] of the producer's
//! error (`Fenced`, with both epochs, when a newer writer took over;
//! `Closed` otherwise); reads of what was committed keep working.
//!
//! ## Memory
//!
//! The writer keeps the log's numbers (the counters above and, for reads,
//! which seqnums carry each tag and hold each version), not its entries:
//! the newest entries up to a budget, and any other entry read back from
//! its segment on demand through bounded caches. Its memory is the numbers
//! plus [`BucketOptions::memory_budget`] (which also bounds the appends in
//! flight), whatever the log's length.
//!
//! ## Open time: stream-state checkpoints
//!
//! Opening completes the numbers from the bucket, keeping no entry: only
//! what was committed since its cache directory's index last covered the
//! log, when it has one. A writer with less than that — no cache
//! directory, an empty one, one far behind — does not read the whole log
//! either: every [`BucketOptions::state_checkpoint_entries`] entries (and
//! at least as many entries as there were streams) the writer stores every
//! stream's next version in a `states/` object, and a new writer starts
//! from the newest one that checks out. It reads the entries after it
//! before it takes appends, so its open costs one checkpoint (a row per
//! stream) and at most an interval of entries, whatever the log's length;
//! the history before it is indexed in the background, as by a fresh
//! follower (reads by tag or version that need it wait; conditional
//! appends and `latest_version` do not). See `states` in this module's
//! parent and `docs/FAILURE_SEMANTICS.md`.
//!
//! The reads, the tip and the stop/close state are the shared local log
//! (`local`); this module adds the sequencer, the producer and the
//! visibility task.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use object_store::ObjectStore;
use tokio::sync::{mpsc, oneshot};

use super::BucketLayout;
use super::budget::Budget;
use super::catchup::{read_ids, request_timeout, spawn_history_fill};
use super::kv::BucketKv;
use super::local::LocalLog;
use super::numbers::{CacheDir, WriterVersions};
use super::open_checks::check_weft_log;
use super::records::encode_batch;
use super::restore::{self, Restored};
use super::states::CheckpointTaker;
use super::stream_checks::StreamChecks;
use crate::clock::{self, Clock};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{LogState, decode_manifest, encode_log_state};
use crate::kv::KvStore;
use crate::model::{AppendResult, LogEntry, LogTag, MAX_ENTRY_BYTES};
use crate::objects::RetryPolicy;
use crate::storage::kit::{self, AppendIds, MemoryVersions, Sequencer};
use crate::storage::{Capabilities, CommitFeed, Freshness, NewEntry, Storage, StreamInfo, Tip};
use crate::wal::{CheckpointPolicy, Durability, Producer, SnapshotWriter};

/// Settings of a bucket writer (plain data).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct BucketOptions {
    /// Longest wait before buffered appends are flushed.
    pub flush_interval: Duration,
    /// Buffered bytes that trigger a flush.
    pub flush_bytes: usize,
    /// Largest payload accepted.
    pub max_entry_bytes: usize,
    /// Segment GETs in flight while rebuilding on open (segments that
    /// arrive ahead of their turn wait, so up to twice as many are held
    /// at once; see [`crate::wal::ReplicaBuilder::with_prefetch`]).
    pub rebuild_prefetch: usize,
    /// Retries of the claim, segment uploads and manifest commits, of the
    /// rebuild's reads on open and of KV requests; and the deadline of
    /// every operation ([`RetryPolicy::deadline`]): an append is settled
    /// (committed, or failed with `Unavailable`, or `Indeterminate` when
    /// its outcome is unknown) within it; opening fails once the store has
    /// made no progress for it. When a commit runs out of retries or time
    /// the writer halts (see the module docs), so this also bounds the
    /// store outage a writer rides out.
    pub retry: RetryPolicy,
    /// Seeds the writer's run id and backoff jitter, for reproducible tests
    /// and simulation; `None` (the default) draws it from the operating
    /// system, which keeps run ids unique across processes.
    pub seed: Option<u64>,
    /// How many append ids the writer remembers: a retry whose original is
    /// among the newest this many entries of the log is recognized, after
    /// a failover or a restart too (the ids are read back from the bucket:
    /// those of the entries a writer reads when it opens and, when that was
    /// not the whole live log (a [`cache_dir`](Self::cache_dir), a state
    /// checkpoint), those of the older entries up to the window, read once
    /// by the first append that carries an id). A
    /// retry whose original is older may be appended again. Each id costs
    /// its bytes, its entry's primary tag and about 120 bytes of memory.
    /// At least 1; default 65,536.
    pub append_id_window: usize,
    /// When the manifest moves older entries into history pages (which
    /// keeps it, and the cost of each commit, bounded).
    pub checkpoint: CheckpointPolicy,
    /// Bytes the writer holds besides the log's numbers: a quarter bounds
    /// the appends in flight (the producer's budget), the rest the newest
    /// entries, decoded segments read back, manifest history pages and
    /// (with a cache directory) the persistent index's caches.
    pub memory_budget: usize,
    /// A directory for the writer's persistent state (the log's numbers in
    /// a persistent index, see [`BucketFollowerOptions::cache_dir`]). With one, a
    /// reopened writer reads only what was committed since it last ran, and
    /// a standby follower's directory can be handed to a new writer; without
    /// one, the index lives in a private temporary directory removed when
    /// the writer closes (unless [`numbers_in_memory`](Self::numbers_in_memory)),
    /// and an open reads the log after the newest stream-state checkpoint
    /// before it takes appends (see
    /// [`state_checkpoint_entries`](Self::state_checkpoint_entries)).
    ///
    /// [`BucketFollowerOptions::cache_dir`]: super::BucketFollowerOptions::cache_dir
    pub cache_dir: Option<std::path::PathBuf>,
    /// Without a [`cache_dir`](Self::cache_dir), keep the log's numbers in
    /// memory instead of a temporary index directory: a few dozen bytes per
    /// live entry, so memory grows with the log. For short logs and tests;
    /// default off.
    pub numbers_in_memory: bool,
    /// How many committed entries at least lie between two stream-state
    /// checkpoints (`states/` objects holding every stream's next version,
    /// see the [module docs](self)); 0 stores none. A checkpoint also waits
    /// for as many entries as the previous one had streams, so its cost
    /// per entry appended stays bounded. A writer opened with no cache
    /// directory reads the newest checkpoint and the entries after it
    /// before it takes appends, instead of the whole log. Default 65,536.
    pub state_checkpoint_entries: u64,
    /// Open even when the log's writer lease shows a live writer, fencing
    /// it (a deliberate failover). By default opening waits to see whether
    /// the lease's writer is alive and fails with `Locked` if it is (see
    /// `crate::wal::lease`).
    pub take_over: bool,
    /// How often this writer renews its lease (at most 20 s).
    pub lease_renew_every: Duration,
    /// How this writer names itself in its lease (the process id is added).
    pub writer_name: Option<String>,
}

setters! {
    BucketOptions {
        with_flush_interval => flush_interval: Duration,
        with_flush_bytes => flush_bytes: usize,
        with_max_entry_bytes => max_entry_bytes: usize,
        with_rebuild_prefetch => rebuild_prefetch: usize,
        with_retry => retry: RetryPolicy,
        with_seed => seed: Option<u64>,
        with_append_id_window => append_id_window: usize,
        with_checkpoint => checkpoint: CheckpointPolicy,
        with_memory_budget => memory_budget: usize,
        with_cache_dir => cache_dir: Option<std::path::PathBuf>,
        with_numbers_in_memory => numbers_in_memory: bool,
        with_state_checkpoint_entries => state_checkpoint_entries: u64,
        with_take_over => take_over: bool,
        with_lease_renew_every => lease_renew_every: Duration,
        with_writer_name => writer_name: Option<String>,
    }
}

impl Default for BucketOptions {
    fn default() -> Self {
        BucketOptions {
            flush_interval: Duration::from_millis(20),
            flush_bytes: 4 << 20,
            max_entry_bytes: MAX_ENTRY_BYTES,
            rebuild_prefetch: 32,
            retry: RetryPolicy::default(),
            seed: None,
            append_id_window: 1 << 16,
            checkpoint: CheckpointPolicy::default(),
            memory_budget: 256 << 20,
            cache_dir: None,
            numbers_in_memory: false,
            state_checkpoint_entries: 1 << 16,
            take_over: false,
            lease_renew_every: crate::wal::lease::DEFAULT_RENEW_EVERY,
            writer_name: None,
        }
    }
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
    /// The committed log's numbers and newest entries, the reader of the
    /// others, the feed, and whether the writer stopped (shared with the
    /// fill of the history, when the writer opened from a checkpoint).
    log: Arc<LocalLog>,
    /// Ticks whenever a batch became visible or the writer failed.
    settled: tokio::sync::watch::Sender<()>,
}

/// The writer of a bucket log.
pub struct BucketStorage {
    producer: Producer,
    snapshots: SnapshotWriter,
    /// One trim at a time, so trim points (and snapshots) only move forward.
    trim_lock: tokio::sync::Mutex<()>,
    sequencer: tokio::sync::Mutex<Sequencer<WriterVersions>>,
    /// The append ids of the newest entries; changed only while the
    /// sequencer is held.
    ids: std::sync::Mutex<AppendIds>,
    /// The ids of the window's entries before `reads_from` (where the open
    /// began reading, past what a cache directory's index covered), read
    /// from the bucket by the first append with an id.
    older_ids: tokio::sync::OnceCell<AppendIds>,
    reads_from: u64,
    store: Arc<dyn ObjectStore>,
    layout: BucketLayout,
    /// Batches in planning order; the visibility task makes them readable
    /// in that order, whether or not their callers are still waiting.
    in_flight: mpsc::UnboundedSender<InFlight>,
    shared: Arc<Shared>,
    /// Indexes the history before the state checkpoint the writer opened
    /// from, if it opened from one and that is not done yet.
    history_fill: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Streams to check against the log before numbering them, when the
    /// writer opened from a state checkpoint (see `stream_checks`).
    stream_checks: Option<StreamChecks>,
    kv: Arc<BucketKv>,
    clock: Arc<dyn Clock>,
    options: BucketOptions,
    retention: crate::retention::RetentionSlot,
}

impl std::fmt::Debug for BucketStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketStorage").finish_non_exhaustive()
    }
}

/// Refuses, before claiming it, a manifest that is not a weft log's: the
/// claim would bump its epoch (fencing its own writer) and convert it.
async fn refuse_foreign_wal(
    store: &dyn ObjectStore,
    path: &object_store::path::Path,
    retry: &RetryPolicy,
) -> Result<()> {
    let read = retry.backoff(0).attempt(store.get(path)).await;
    let got = match read {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(()),
        // The claim reads the manifest again and reports store errors.
        Err(_) => return Ok(()),
    };
    let Ok(bytes) = got.bytes().await else {
        return Ok(());
    };
    let m = decode_manifest(&bytes).map_err(|e| e.context(format!("manifest {path}")))?;
    check_weft_log(path, &m)
}

impl BucketStorage {
    /// Opens the writer of the log at `prefix` in `store`, creating the log
    /// if absent and fencing any previous writer — unless its writer lease
    /// shows it alive and `options.take_over` is off (see
    /// `crate::wal::lease`).
    ///
    /// Errors: `Locked` (a live writer holds the log's lease; nothing was
    /// written), `PermissionDenied` (credentials), `NotFound` (bucket),
    /// `Unavailable` (endpoint), `Corrupt` (data), `InvalidInput` when the
    /// manifest is not a record-numbered (v3/v4) weft log — refused before
    /// anything is written; `Locked` when another handle uses
    /// [`BucketOptions::cache_dir`] (refused before the claim too). A WAL
    /// whose records are not entry frames is
    /// only found out while rebuilding, after the claim (`Corrupt`); the
    /// claim has then fenced that WAL's writer.
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
        if options.append_id_window == 0 {
            return Err(Error::invalid_input("append_id_window must be at least 1"));
        }
        refuse_foreign_wal(store.as_ref(), &layout.manifest(), &options.retry).await?;
        // Taken before the claim: a writer that cannot have its directory
        // must not fence the one that has it.
        let cache = CacheDir::for_handle(options.cache_dir.as_deref(), options.numbers_in_memory)?;
        let budget = Budget::writer(options.memory_budget);
        // Claim first, then read: once our epoch is in the manifest no older
        // writer can commit, so what we rebuild from is final.
        let producer = restore::claim(&store, &layout, &options, &budget, &clock).await?;
        let restored = restore::restore(&store, &layout, &options, cache, &budget).await?;
        let stream_checks = restored.stream_checks();
        let sequencer = restored.sequencer();
        let Restored {
            log,
            from,
            live_from,
            next,
            ids,
            ..
        } = restored;
        // Reads and trims that wait for the history get a fill's error.
        let history_fill = (live_from > from).then(|| {
            spawn_history_fill(
                store.clone(),
                layout.clone(),
                log.clone(),
                from,
                live_from,
                options.rebuild_prefetch,
                Duration::from_millis(50),
                request_timeout(&options.retry),
                "the bucket writer",
            )
        });
        let snapshots = SnapshotWriter::new(store.clone(), layout.manifest().as_ref())
            .with_prefix(layout.snapshots())
            .with_clock(clock.clone());
        let shared = Arc::new(Shared {
            log,
            settled: tokio::sync::watch::Sender::new(()),
        });
        let (in_flight, rx) = mpsc::unbounded_channel();
        let checkpoints = CheckpointTaker::new(
            store.clone(),
            layout.clone(),
            producer.run_id().to_string(),
            options.retry.clone(),
            options.state_checkpoint_entries,
        );
        tokio::spawn(make_visible(shared.clone(), rx, checkpoints));
        let storage = BucketStorage {
            producer,
            snapshots,
            trim_lock: tokio::sync::Mutex::new(()),
            sequencer: tokio::sync::Mutex::new(sequencer),
            ids: std::sync::Mutex::new(ids),
            older_ids: tokio::sync::OnceCell::new(),
            reads_from: live_from,
            store: store.clone(),
            layout: layout.clone(),
            in_flight,
            shared,
            history_fill: std::sync::Mutex::new(history_fill),
            stream_checks,
            kv: Arc::new(
                BucketKv::new(store, layout.kv()).with_retry_policy(options.retry.clone()),
            ),
            retention: crate::retention::RetentionSlot::new(clock.clone()),
            clock,
            options,
        };
        // New entries are stamped no earlier than the newest one in the
        // log, whatever this process's clock says.
        if next > live_from
            && let Some(newest) = storage.read_prev(None, next).await?
        {
            storage
                .sequencer
                .lock()
                .await
                .note_timestamp(newest.timestamp_ms);
        }
        Ok(storage)
    }

    /// The epoch this writer claimed the log with: a newer writer's is
    /// higher, and fences this one.
    pub fn epoch(&self) -> u64 {
        self.producer.epoch()
    }

    /// This writer's run id: the directory its segments are written under
    /// (`<prefix>/segments/<run id>/`), so every manifest entry names the
    /// writer that committed it.
    pub fn run_id(&self) -> ulid::Ulid {
        self.producer.run_id()
    }

    /// Why the writer stopped accepting appends, if it did: the error that
    /// stopped it (a `Fenced` one carries both epochs).
    pub fn stop_error(&self) -> Option<Error> {
        self.shared.log.gate().stopped()
    }

    /// True while the history before the state checkpoint this writer
    /// opened from is still being indexed (reads that need it wait).
    pub fn filling_in(&self) -> bool {
        self.shared.log.visible().read().filling_in()
    }

    /// Waits until the history before the checkpoint this writer opened
    /// from is indexed (at once when it read the whole log on open).
    ///
    /// Errors: why filling it in failed; `Closed`.
    pub async fn filled_in(&self) -> Result<()> {
        self.shared.log.filled_in().await
    }

    fn stop_history_fill(&self) {
        if let Some(t) = self
            .history_fill
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            t.abort();
        }
    }

    /// Checks the streams `tags` against the log before the writer
    /// numbers (or answers for) them from the state checkpoint it opened
    /// from; a disagreement stops the writer.
    ///
    /// Errors: `Corrupt` (the writer stops); the history fill's error;
    /// store kinds.
    async fn check_streams<'a>(&self, tags: impl IntoIterator<Item = &'a LogTag>) -> Result<()> {
        let Some(checks) = &self.stream_checks else {
            return Ok(());
        };
        match checks.before_numbering(tags, &self.shared.log).await {
            Err(e) if e.kind() == ErrorKind::Corrupt => {
                self.shared.fail(&e);
                Err(e)
            }
            other => other,
        }
    }

    fn check_failed(&self) -> Result<()> {
        self.shared.log.gate().check_writable()
    }

    /// The append ids (held only under the sequencer's lock, briefly).
    fn ids(&self) -> std::sync::MutexGuard<'_, AppendIds> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The ids of the window's entries before `reads_from`, read from the
    /// bucket once (the window's length back from there, not before the
    /// log's first live entry). Empty when the open read the whole live
    /// log.
    ///
    /// Errors: as for reading the log; the next call reads again.
    async fn older_ids(&self) -> Result<&AppendIds> {
        self.older_ids
            .get_or_try_init(|| async {
                let manifest = self.shared.log.reader().manifest();
                let window = self.options.append_id_window as u64;
                read_ids(
                    &self.store,
                    &self.layout,
                    &manifest,
                    self.reads_from.saturating_sub(window),
                    self.reads_from,
                    self.options.rebuild_prefetch,
                    request_timeout(&self.options.retry),
                )
                .await
            })
            .await
    }
}

impl Shared {
    /// Stops the writer because of `err` (the first cause wins).
    fn fail(&self, err: &Error) {
        self.log.gate().stop(err);
        self.settled.send_replace(());
    }

    /// Makes a committed batch readable and tells subscribers.
    fn publish(&self, batch: Vec<LogEntry>) -> Result<()> {
        self.log.publish(batch)?;
        self.settled.send_replace(());
        Ok(())
    }

    /// Waits until every batch planned below seqnum `through` is visible,
    /// or the writer stopped or closed.
    async fn settle(&self, through: u64) {
        let mut rx = self.settled.subscribe();
        let _ = rx
            .wait_for(|_| {
                self.log.gate().is_done() || self.log.visible().read().tip().next >= through
            })
            .await;
    }
}

/// Waits for each batch's commit in planning order (which is the WAL's
/// commit order) and makes it visible before answering its caller, so an
/// acknowledged append is readable at once and a caller that gave up
/// waiting cannot leave a gap.
async fn make_visible(
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<InFlight>,
    mut checkpoints: CheckpointTaker,
) {
    while let Some(InFlight {
        planned,
        durability,
        reply,
    }) = rx.recv().await
    {
        let count = planned.len();
        let result = match durability.wait().await {
            Ok(seq) if seq == planned[0].seqnum => shared.publish(planned),
            Ok(seq) => Err(Error::internal(format!(
                "the WAL committed the batch at {seq}, planned at {}",
                planned[0].seqnum
            ))),
            Err(e) => Err(e),
        };
        match &result {
            Ok(()) => checkpoints.committed(&shared.log, count),
            Err(e) => shared.fail(e),
        }
        let _ = reply.send(result);
    }
    // Dropping `checkpoints` stops a checkpoint still being taken.
}

#[async_trait]
impl Storage for BucketStorage {
    async fn append(&self, batch: Vec<NewEntry>) -> Result<Vec<AppendResult>> {
        kit::check_append(&batch, self.append_limits())?;
        self.check_failed()?;
        let older = if batch.iter().any(|e| e.append_id.is_some()) {
            Some(self.older_ids().await?)
        } else {
            None
        };
        if self.stream_checks.is_some() {
            let streams: Vec<&LogTag> = batch.iter().map(|e| &e.tags[0]).collect();
            self.check_streams(streams).await?;
        }
        let now = self.clock.now_ms();
        let (planned, durability) = {
            let mut sequencer = self.sequencer.lock().await;
            self.check_failed()?;
            // Ids of entries trimmed away since the older ones were read
            // are forgotten, as the window forgets its own.
            let first = self.shared.log.visible().read().tip().first;
            let plan = self.ids().plan(&mut sequencer, batch, now, |id| {
                Ok(older
                    .and_then(|o| o.get(id))
                    .filter(|r| r.seqnum >= first)
                    .cloned())
            });
            let planned = match plan {
                Ok(planned) => planned,
                Err(e) if e.kind() == ErrorKind::Conflict => {
                    // The check ran against every planned batch, committed
                    // or not; should one still in flight fail, the conflict
                    // would be false (and the writer stops). So answer only
                    // once they are all settled: nothing is planned
                    // meanwhile, as this holds the sequencer.
                    self.shared.settle(sequencer.next_seqnum()).await;
                    self.check_failed()?;
                    return Err(e);
                }
                Err(e) => return Err(e),
            };
            if planned.entries.is_empty() {
                // Every entry is a retry: nothing to write.
                (planned, None)
            } else {
                let handed = match encode_batch(&planned.entries, &planned.ids) {
                    Ok(records) => self.producer.append(records, None).await,
                    Err(e) => Err(e),
                };
                let durability = match handed {
                    Ok(d) => d,
                    Err(e) => {
                        // Not handed over: the numbers and ids go back, and
                        // the writer stops unless only this batch was at
                        // fault.
                        sequencer.unplan(&planned.entries)?;
                        self.ids().forget_from(planned.entries[0].seqnum);
                        if e.kind() != ErrorKind::InvalidInput {
                            self.shared.fail(&e);
                        }
                        return Err(e);
                    }
                };
                let (reply, answer) = oneshot::channel();
                let in_flight = InFlight {
                    planned: planned.entries.clone(),
                    durability,
                    reply,
                };
                if self.in_flight.send(in_flight).is_err() {
                    return Err(Error::closed("the bucket writer is closed"));
                }
                (planned, Some(answer))
            }
        };
        if let Some(durability) = durability {
            durability
                .await
                .unwrap_or_else(|_| Err(Error::closed("the bucket writer stopped")))?;
        }
        // A retried id whose original is still in flight is answered once
        // the original is committed (batches commit in planning order, so
        // this waits only when nothing of this call was written).
        if let Some(through) = planned.known_through {
            self.shared.settle(through + 1).await;
            if self.shared.log.visible().read().tip().next <= through {
                self.check_failed()?;
                return Err(Error::closed("the bucket writer is closed"));
            }
        }
        Ok(planned.results)
    }

    async fn read(&self, tag: Option<&LogTag>, from: u64, max: usize) -> Result<Vec<LogEntry>> {
        self.shared.log.read(tag, from, max).await
    }

    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        self.shared.log.read_versions(tag, from_version, max).await
    }

    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        self.shared.log.read_prev(tag, before).await
    }

    async fn tip(&self) -> Result<Tip> {
        self.shared.log.tip()
    }

    async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.check_streams([tag]).await?;
        self.shared.log.latest_version(tag).await
    }

    async fn streams(&self, from: Option<&LogTag>, max: usize) -> Result<Vec<StreamInfo>> {
        self.shared.log.streams(from, max).await
    }

    /// Stores the numbering state as of `through` as the WAL's snapshot and
    /// drops the entries it supersedes, in one manifest CAS; then forgets
    /// them locally. A trim point at or below an earlier one changes
    /// nothing.
    async fn trim(&self, through: u64) -> Result<()> {
        self.check_failed()?;
        let _one_at_a_time = self.trim_lock.lock().await;
        // Version floors need every stream's numbers: after a start from a
        // checkpoint, wait until the history before it is indexed.
        self.shared.log.filled_in().await?;
        let floors = {
            let state = self.shared.log.visible().read();
            let tip = state.tip();
            if through >= tip.next {
                return Err(Error::invalid_input(format!(
                    "cannot trim through {through}: the log ends before it (next seqnum {})",
                    tip.next
                )));
            }
            if through < tip.first {
                return Ok(());
            }
            state.numbers().floors_through(through)?
        };
        let floors_kept = floors.clone();
        let state = encode_log_state(&LogState::new(through, floors)?)?;
        self.snapshots
            .write(&self.producer, state, through)
            .await
            .map_err(|e| e.context(format!("trimming the bucket log through {through}")))?;
        self.shared
            .log
            .visible()
            .write()
            .trim(through, &floors_kept)?;
        let _numbering = self.sequencer.lock().await;
        self.ids().forget_through(through);
        Ok(())
    }

    async fn erase(&self, seqnums: &[u64]) -> Result<u64> {
        self.check_failed()?;
        self.shared.log.erase(&self.store, seqnums).await
    }

    fn feed(&self) -> &CommitFeed {
        self.shared.log.feed()
    }

    fn kv(&self) -> Result<Arc<dyn KvStore>> {
        Ok(self.kv.clone())
    }

    fn retention_slot(&self) -> Option<&crate::retention::RetentionSlot> {
        Some(&self.retention)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            read_only: false,
            durable: true,
            max_entry_bytes: self.options.max_entry_bytes,
            freshness: Freshness::SingleWriter,
        }
    }

    fn supports_append_ids(&self) -> bool {
        true
    }

    async fn close(&self) -> Result<()> {
        self.shared.log.gate().close();
        self.stop_history_fill();
        self.shared.settled.send_replace(());
        let result = self.producer.close().await;
        self.shared.log.feed().close();
        // The sequencer's hold on the index goes first, so closing it lets
        // go of its directory.
        *self.sequencer.lock().await =
            Sequencer::with_table(0, WriterVersions::Memory(MemoryVersions::default()));
        let closed = self.shared.log.close_index().await;
        result.and(closed)
    }
}

impl Drop for BucketStorage {
    fn drop(&mut self) {
        self.stop_history_fill();
    }
}
