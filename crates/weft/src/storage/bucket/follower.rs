//! A read-only follower of a bucket log.
//!
//! The follower keeps the log's numbers, not its entries: which seqnums
//! carry each tag and which seqnum holds each version of a stream, plus a
//! bounded cache of the newest entries. Every other entry is read on demand
//! from its segment through bounded caches (see `local` and `reader` in this
//! module's parent). Its memory is the numbers plus
//! [`FollowerOptions::memory_budget`], whatever the log's length.
//!
//! Opening reads the manifest and returns: the follower serves the log's
//! live end at once. Two background tasks then run a [`Replica`] each:
//!
//! * the **tail** follows the manifest from where the log ended at open,
//!   publishes every committed batch on the commit feed (so reads, views
//!   and subscriptions work as on the writer, lagging it by about one poll)
//!   and applies retention after every poll;
//! * the **fill** indexes the history before that point, reading segments
//!   `prefetch` at a time, and ends when it reaches it.
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

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::ObjectStore;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::BucketLayout;
use super::kv::BucketKv;
use super::local::{LocalLog, LocalState};
use super::reader::BucketReader;
use super::records::BatchAssembler;
use super::writer::decode_trim_state;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{ManifestData, decode_manifest};
use crate::kv::KvStore;
use crate::model::{AppendResult, LogEntry, LogTag, MAX_ENTRY_BYTES};
use crate::storage::index::LogIndex;
use crate::storage::{Capabilities, CommitFeed, Freshness, NewEntry, Storage, Tip};
use crate::store::{StoreOp, to_error};
use crate::wal::{Applier, Cursor, CursorStore, MemoryCursorStore, Record, Replica};

/// How a follower tails the bucket.
#[derive(Clone, Debug)]
pub struct FollowerOptions {
    /// Wait between polls that found nothing new.
    pub poll_interval: Duration,
    /// Segments fetched concurrently while catching up and filling in
    /// history.
    pub prefetch: usize,
    /// Bytes of entries, segments and history pages the follower keeps in
    /// memory (split between the newest entries, decoded segments and
    /// manifest history pages). Its other memory is the log's numbers.
    pub memory_budget: usize,
}

impl Default for FollowerOptions {
    fn default() -> Self {
        FollowerOptions {
            poll_interval: Duration::from_millis(50),
            prefetch: 8,
            memory_budget: 256 << 20,
        }
    }
}

/// How a memory budget is split between the caches.
pub(super) struct Budget {
    pub(super) recent: usize,
    pub(super) segments: usize,
    pub(super) pages: usize,
}

impl Budget {
    /// The follower's split: a quarter for the newest entries, half for
    /// decoded segments, an eighth for history pages (the rest is slack
    /// for the replicas' prefetch windows).
    pub(super) fn follower(total: usize) -> Self {
        Budget {
            recent: total / 4,
            segments: total / 2,
            pages: total / 8,
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
            .restore_history(LogIndex::with_version_floors(first, state.next_versions));
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

/// The fill's applier: indexes the history before the live end.
struct FillApplier {
    shared: Arc<Shared>,
    assembler: BatchAssembler,
}

#[async_trait]
impl Applier for FillApplier {
    /// The fill starts at the trim point the writer stored.
    async fn restore(&mut self, snapshot: Bytes, through_seq: u64) -> Result<()> {
        let state = decode_trim_state(&snapshot, through_seq)?;
        let first = through_seq.saturating_add(1);
        self.shared
            .visible()
            .write()
            .restore_history(LogIndex::with_version_floors(first, state.next_versions));
        self.assembler = BatchAssembler::starting_at(first);
        Ok(())
    }

    async fn apply(&mut self, record: &Record) -> Result<()> {
        if let Some(batch) = self.assembler.push(record)? {
            self.shared.add_history(&batch)?;
        }
        Ok(())
    }
}

/// Drops what `manifest` no longer holds from the follower's copy.
fn honour_retention(shared: &Shared, manifest: &ManifestData) {
    let after_snapshot = manifest
        .snapshot
        .as_ref()
        .map_or(0, |s| s.through_seq.saturating_add(1));
    let live_from = manifest.first_sequence().max(after_snapshot);
    let mut state = shared.visible().write();
    if live_from > state.tip().first {
        state.trim(live_from - 1);
    }
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
    loop {
        let wait = match replica.poll().await {
            Ok(outcome) => {
                if let Some(m) = replica.manifest() {
                    if !outcome.unchanged {
                        shared.reader().set_manifest(Arc::new(m.clone()));
                    }
                    honour_retention(shared, m);
                }
                if outcome.applied > 0 {
                    Duration::ZERO
                } else {
                    interval
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Indeterminate) => {
                tracing::warn!(error = %e, "follower poll failed; retrying");
                interval
            }
            Err(e) => return Err(e),
        };
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// Indexes the history before `until`, where the tail started. Transient
/// errors are retried after `interval`; a truncation that overtakes the
/// fill starts it over from the new trim point.
async fn fill(
    store: Arc<dyn ObjectStore>,
    layout: BucketLayout,
    shared: Arc<Shared>,
    until: u64,
    prefetch: usize,
    interval: Duration,
) -> Result<()> {
    loop {
        let applier = FillApplier {
            shared: shared.clone(),
            assembler: BatchAssembler::new(),
        };
        let mut replica = Replica::builder(store.clone(), layout.manifest(), applier)
            .with_prefetch(prefetch)
            .with_stop_at(until)
            .build();
        loop {
            if !shared.visible().read().filling_in() || shared.gate().is_closed() {
                return Ok(());
            }
            match replica.poll().await {
                Ok(_) => {
                    if shared.visible().read().filling_in() {
                        // Everything before `until` was read, yet the index
                        // does not reach it: the log has a gap.
                        return Err(Error::corrupt(format!(
                            "the log's history ends before seqnum {until}, where its live \
                             end started"
                        )));
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Indeterminate) => {
                    tracing::warn!(error = %e, "filling in history failed; retrying");
                    tokio::time::sleep(interval).await;
                }
                Err(e) if e.kind() == ErrorKind::Trimmed => break,
                Err(e) => return Err(e),
            }
        }
    }
}

/// A read-only replica of a bucket log that serves the whole read API.
pub struct BucketFollower {
    shared: Arc<Shared>,
    kv: Arc<BucketKv>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for BucketFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketFollower").finish_non_exhaustive()
    }
}

/// The manifest at `layout`, or `None` when the log does not exist yet.
async fn read_manifest(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
) -> Result<Option<ManifestData>> {
    let path = layout.manifest();
    let got = match store.get(&path).await {
        Ok(got) => got,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(to_error(StoreOp::Read, path.as_ref(), e)),
    };
    let bytes = got
        .bytes()
        .await
        .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))?;
    let m = decode_manifest(&bytes).map_err(|e| e.context(format!("manifest {path}")))?;
    Ok(Some(m))
}

/// The manifest and, when the log was trimmed, the log state the writer
/// stored then (every stream's version floor, so version queries are right
/// from the start). A state superseded and collected between the two reads
/// sends it back to the manifest, a few times at most.
async fn read_start(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
) -> Result<(Option<ManifestData>, Option<crate::format::LogState>)> {
    const ATTEMPTS: usize = 4;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(m) = read_manifest(store, layout).await? else {
            return Ok((None, None));
        };
        let Some(snap) = m.snapshot.clone() else {
            return Ok((Some(m), None));
        };
        let path = object_store::path::Path::from(snap.location.as_str());
        let got = match store.get(&path).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) if attempt < ATTEMPTS => continue,
            Err(e) => return Err(to_error(StoreOp::Read, &snap.location, e)),
        };
        let bytes = got
            .bytes()
            .await
            .map_err(|e| to_error(StoreOp::Read, &snap.location, e))?;
        let state = decode_trim_state(&bytes, snap.through_seq)?;
        return Ok((Some(m), Some(state)));
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
    /// bucket, `PermissionDenied`, `Unavailable`), `Corrupt` for an
    /// unreadable manifest or a trim state that is not a weft log state.
    pub async fn open(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        options: FollowerOptions,
    ) -> Result<Self> {
        let layout = BucketLayout::new(prefix);
        let budget = Budget::follower(options.memory_budget);
        let (manifest, floors) = read_start(&store, &layout).await?;
        // Where the live end starts, and the first live seqnum.
        let (live_from, first) = match &manifest {
            Some(m) => {
                let after_snapshot = m
                    .snapshot
                    .as_ref()
                    .map_or(0, |s| s.through_seq.saturating_add(1));
                (m.next_sequence, m.first_sequence().max(after_snapshot))
            }
            None => (0, 0),
        };
        let index = match floors {
            Some(state) => LogIndex::with_version_floors(first, state.next_versions),
            None => LogIndex::starting_at(first),
        };
        let state = LocalState::filling(index, live_from, budget.recent);
        let reader =
            BucketReader::new(
                store.clone(),
                layout.manifest(),
                Arc::new(manifest.clone().unwrap_or_else(|| {
                    ManifestData::empty(crate::format::ManifestVersion::default())
                })),
                budget.pages,
                budget.segments,
            );
        let shared = Arc::new(LocalLog::new("the bucket follower", state, reader));
        // The tail starts where the log ended at open (from scratch when
        // there was no log: then it restores a trim point itself).
        let cursors = MemoryCursorStore::new();
        if manifest.is_some() {
            cursors.save(Cursor::at_entry(live_from)).await?;
        }
        let tail_applier = TailApplier {
            shared: shared.clone(),
            assembler: match manifest {
                Some(_) => BatchAssembler::starting_at(live_from),
                None => BatchAssembler::new(),
            },
        };
        let mut replica = Replica::builder(store.clone(), layout.manifest(), tail_applier)
            .with_cursor_store(cursors)
            .with_prefetch(options.prefetch)
            .with_poll_interval(options.poll_interval)
            .with_page_cache_bytes(budget.pages)
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
        if shared.visible().read().filling_in() {
            let (store, shared, layout) = (store.clone(), shared.clone(), layout.clone());
            let prefetch = options.prefetch;
            tasks.push(tokio::spawn(async move {
                if let Err(e) =
                    fill(store, layout, shared.clone(), live_from, prefetch, interval).await
                {
                    tracing::error!(error = %e, "bucket follower could not fill in its history");
                    shared.fill_failed(&e);
                }
            }));
        }
        Ok(BucketFollower {
            shared,
            kv: Arc::new(BucketKv::new(store, layout.kv())),
            stop,
            tasks: Mutex::new(tasks),
        })
    }

    /// Why the follower stopped tailing, if it did (it then serves what it
    /// has and its subscriptions end): the error that stopped it.
    pub fn stopped(&self) -> Option<Error> {
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
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        // The tail stops at the signal; the fill is simply dropped.
        for (i, task) in tasks.into_iter().enumerate() {
            if i > 0 {
                task.abort();
            }
            let _ = task.await;
        }
        self.shared.close();
        Ok(())
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
