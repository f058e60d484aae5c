//! A read-only follower of a bucket log.
//!
//! The follower runs a [`Replica`] on a background task. Its applier
//! reassembles committed batches from the records and adds them, whole, to
//! a local [`EntryCache`], then publishes them on the commit feed, so every
//! read, view, typed view and subscription of the core API works on a
//! follower exactly as on the writer — lagging it by about one poll
//! interval. Writes are refused with `ReadOnly`. The local copy lives in
//! memory: a restarted follower rebuilds it from the bucket (a snapshot
//! taken by the writer bounds that work once retention trims the log).
//!
//! Retention: a follower that starts on a trimmed log restores the log
//! state the writer stored when it trimmed (first seqnum, every stream's
//! next version) and reads on from there. While it runs, after every poll
//! it drops from its copy whatever the manifest no longer holds — the
//! entries through the snapshot, or below the first live entry — so its
//! reads fail with `Trimmed` where the writer's do. A follower that falls
//! so far behind that the entries it still needs were truncated stops with
//! `Trimmed` (see [`BucketFollower::stopped`]); it never skips entries.
//!
//! Tip and version queries answer for the prefix applied so far
//! ([`Freshness::AppliedPrefix`]): a follower never asks the bucket
//! whether the writer is ahead.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::ObjectStore;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::BucketLayout;
use super::kv::BucketKv;
use super::records::BatchAssembler;
use super::writer::decode_trim_state;
use crate::error::{Error, ErrorKind, Result};
use crate::format::ManifestData;
use crate::kv::KvStore;
use crate::model::{AppendResult, LogEntry, LogTag, MAX_ENTRY_BYTES};
use crate::outage::Outage;
use crate::storage::cache::EntryCache;
use crate::storage::core::CachedLog;
use crate::storage::{Capabilities, CommitFeed, Freshness, NewEntry, Storage, Tip};
use crate::store::RetryPolicy;
use crate::wal::{Applier, Record, Replica};

/// How a follower tails the bucket.
#[derive(Clone, Debug)]
pub struct FollowerOptions {
    /// Wait between polls that found nothing new.
    pub poll_interval: Duration,
    /// Segments fetched concurrently while catching up.
    pub prefetch: usize,
    /// Retries of the catch-up on open and of KV requests, and the
    /// deadline of every operation: opening fails (`Unavailable`) once the
    /// store has made no progress for [`RetryPolicy::deadline`], and a
    /// store request that takes longer than it (or the policy's attempt
    /// timeout) fails its poll, which the tailing task retries.
    pub retry: RetryPolicy,
}

impl Default for FollowerOptions {
    fn default() -> Self {
        FollowerOptions {
            poll_interval: Duration::from_millis(50),
            prefetch: 8,
            retry: RetryPolicy::default(),
        }
    }
}

/// The local copy, its feed, and why the tailing task stopped (the gate's
/// stop), shared by the handle and the tailing task.
type Shared = CachedLog;

struct FollowerApplier {
    shared: Arc<Shared>,
    assembler: BatchAssembler,
}

/// How long one store request of a replica may take under `retry`.
pub(super) fn request_timeout(retry: &RetryPolicy) -> Duration {
    retry
        .attempt_timeout
        .map_or(retry.deadline, |t| t.min(retry.deadline))
}

/// Polls until caught up, retrying transient failures within `retry`; the
/// deadline starts over whenever a poll made progress.
pub(super) async fn catch_up<A: crate::wal::Applier>(
    replica: &mut Replica<A>,
    retry: &RetryPolicy,
) -> Result<()> {
    let mut backoff = retry.backoff(0x666f_6c6c_6f77);
    loop {
        let before = replica.cursor();
        let err = match replica.poll().await {
            Ok(_) => return Ok(()),
            Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Indeterminate) => e,
            Err(e) => return Err(e),
        };
        if replica.cursor() != before {
            backoff.reset();
        }
        tracing::debug!(error = %err, "reading the bucket log: retrying");
        if !backoff.wait().await {
            return Err(err.context(format!(
                "reading the bucket log (no progress within {:.1} s or {} attempts)",
                retry.deadline.as_secs_f64(),
                backoff.attempts()
            )));
        }
    }
}

/// Retention, as the follower applies it to its copy.
trait HonourRetention {
    fn honour_retention(&self, manifest: &ManifestData);
}

impl HonourRetention for CachedLog {
    /// Drops what `manifest` no longer holds from the local copy.
    fn honour_retention(&self, manifest: &ManifestData) {
        let first_entry = manifest
            .entries
            .first()
            .map_or(manifest.next_sequence, |e| e.sequence);
        let after_snapshot = manifest
            .snapshot
            .as_ref()
            .map_or(0, |s| s.through_seq.saturating_add(1));
        let live_from = first_entry.max(after_snapshot);
        let mut cache = self.visible().write();
        if live_from > cache.index().first() {
            cache.trim(live_from - 1);
        }
    }
}

#[async_trait]
impl Applier for FollowerApplier {
    /// Starts the local copy over at the trim point the writer stored.
    async fn restore(&mut self, snapshot: Bytes, through_seq: u64) -> Result<()> {
        let state = decode_trim_state(&snapshot, through_seq)?;
        let first = through_seq.saturating_add(1);
        *self.shared.visible().write() =
            EntryCache::with_version_floors(first, state.next_versions);
        // Nothing below `first` will ever be announced.
        self.shared.feed().advance_to(first);
        self.assembler = BatchAssembler::starting_at(first);
        Ok(())
    }

    async fn apply(&mut self, record: &Record) -> Result<()> {
        if let Some(batch) = self.assembler.push(record)? {
            self.shared.visible().publish(batch, |cache, entries| {
                if cache.index().is_empty() && cache.index().next() != entries[0].seqnum {
                    // The log was trimmed before we first saw it.
                    *cache = EntryCache::starting_at(entries[0].seqnum);
                }
                cache.extend(entries.iter().cloned())
            })?;
        }
        Ok(())
    }
}

/// Polls until `shutdown`, honouring retention after every poll. Transient
/// store errors are retried after `interval`; any other error ends it.
async fn tail(
    replica: &mut Replica<FollowerApplier>,
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
                    shared.honour_retention(m);
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
    kv: Arc<BucketKv>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for BucketFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketFollower").finish_non_exhaustive()
    }
}

impl BucketFollower {
    /// Opens a follower of the log at `prefix` in `store`: catches up once
    /// (so reads right after `open` see the log as of now), then keeps
    /// tailing in the background.
    ///
    /// Errors: store errors (`NotFound` for a missing bucket,
    /// `PermissionDenied`, `Unavailable` once the store has made no
    /// progress for `options.retry.deadline`), `Corrupt` data.
    pub async fn open(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        options: FollowerOptions,
    ) -> Result<Self> {
        let layout = BucketLayout::new(prefix);
        let shared = Arc::new(CachedLog::new(
            "the bucket follower",
            EntryCache::starting_at(0),
        ));
        let applier = FollowerApplier {
            shared: shared.clone(),
            assembler: BatchAssembler::new(),
        };
        let mut replica = Replica::builder(store.clone(), layout.manifest(), applier)
            .with_prefetch(options.prefetch)
            .with_poll_interval(options.poll_interval)
            .with_request_timeout(request_timeout(&options.retry))
            .build();
        catch_up(&mut replica, &options.retry).await?;
        if let Some(m) = replica.manifest() {
            shared.honour_retention(m);
        }
        let (stop, mut stopped_rx) = watch::channel(false);
        let task_shared = shared.clone();
        let interval = options.poll_interval;
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped_rx.wait_for(|s| *s).await;
            };
            if let Err(e) = tail(&mut replica, &task_shared, interval, shutdown).await {
                tracing::error!(error = %e, "bucket follower stopped");
                task_shared.gate().stop(&e);
                task_shared.feed().close();
            }
        });
        Ok(BucketFollower {
            shared,
            kv: Arc::new(BucketKv::new(store, layout.kv()).with_retry_policy(options.retry)),
            stop,
            task: Mutex::new(Some(task)),
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
        self.shared.read(tag, from, max)
    }

    async fn read_versions(
        &self,
        tag: &LogTag,
        from_version: u64,
        max: usize,
    ) -> Result<Vec<LogEntry>> {
        self.shared.read_versions(tag, from_version, max)
    }

    async fn read_prev(&self, tag: Option<&LogTag>, before: u64) -> Result<Option<LogEntry>> {
        self.shared.read_prev(tag, before)
    }

    async fn tip(&self) -> Result<Tip> {
        self.shared.tip()
    }

    async fn latest_version(&self, tag: &LogTag) -> Result<Option<u64>> {
        self.shared.latest_version(tag)
    }

    async fn trim(&self, _through: u64) -> Result<()> {
        Err(Self::read_only())
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
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
        self.shared.close();
        Ok(())
    }
}

impl Drop for BucketFollower {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
