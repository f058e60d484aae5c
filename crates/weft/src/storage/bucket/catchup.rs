//! Bringing a writer's or follower's numbers up to the log: where they
//! start, and reading what they miss.
//!
//! [`open_numbers`] decides where the numbers start. Without a cache
//! directory they start empty at the log's first live entry. With one,
//! the persistent index there is trusted up to its covered point unless it
//! belongs to another log, is damaged, covers more than the log holds,
//! starts before a truncation the log has since made and that left a gap,
//! or records a check value for its last entry that the entry in the bucket
//! does not have — then it is rebuilt from the log's first live entry.
//!
//! [`fill`] reads the committed entries from there up to a given seqnum
//! (through the manifest and its history pages, segments `prefetch` at a
//! time) and adds their numbers, resuming after transient failures; a
//! truncation that overtakes it starts it over from the new trim point.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::ObjectStore;

use super::BucketLayout;
use super::budget::Budget;
use super::local::LocalLog;
use super::numbers::{CacheDir, Numbers, check_of, identity};
use super::open_checks::{check_weft_log, decode_trim_state};
use super::reader::BucketReader;
use super::records::BatchAssembler;
use crate::error::{Error, ErrorKind, Result};
use crate::format::{LogState, ManifestData, decode_manifest};
use crate::index::IndexOptions;
use crate::objects::{Outcome, RetryPolicy, StoreOp, retry_store, to_error};
use crate::storage::kit::AppendIds;
use crate::storage::kit::MemoryIndex;
use crate::storage::kit::result_of;
use crate::wal::{Applier, Cursor, CursorStore, HistoryReader, MemoryCursorStore, Record, Replica};

/// The manifest and, when the log was trimmed, the log state the writer
/// stored then (every stream's version floor). A state superseded and
/// collected between the two reads sends it back to the manifest, a few
/// times at most. `(None, None)` when the log does not exist yet. Each
/// read is retried under `retry` and bounded by its deadline.
///
/// Errors: store errors (`Unavailable` after the retries or the
/// deadline); `Corrupt` for an unreadable manifest or a trim state that is
/// not a weft log state.
pub(crate) async fn read_start(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    retry: &RetryPolicy,
) -> Result<(Option<ManifestData>, Option<LogState>)> {
    const ATTEMPTS: usize = 4;
    let path = layout.manifest();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(bytes) = get_bytes(store, &path, retry).await? else {
            return Ok((None, None));
        };
        let m = decode_manifest(&bytes).map_err(|e| e.context(format!("manifest {path}")))?;
        let Some(snap) = m.snapshot.clone() else {
            return Ok((Some(m), None));
        };
        let snap_path = object_store::path::Path::from(snap.location.as_str());
        let bytes = match get_bytes(store, &snap_path, retry).await? {
            Some(bytes) => bytes,
            None if attempt < ATTEMPTS => continue,
            None => {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!("trim state {} named by the manifest is gone", snap.location),
                ));
            }
        };
        let state = decode_trim_state(&bytes, snap.through_seq)?;
        return Ok((Some(m), Some(state)));
    }
}

/// The object at `path`, read under `retry`; `None` when there is none.
async fn get_bytes(
    store: &Arc<dyn ObjectStore>,
    path: &object_store::path::Path,
    retry: &RetryPolicy,
) -> Result<Option<Bytes>> {
    let mut backoff = retry.backoff(0x7374_6172_7400);
    let got = retry_store(
        &mut backoff,
        StoreOp::Read,
        true,
        |_, _| {},
        || async {
            let got = store.get(path).await?;
            got.bytes().await
        },
    )
    .await;
    match got {
        Ok(bytes) => Ok(Some(bytes)),
        Err(g) if g.outcome == Outcome::NotFound => Ok(None),
        Err(g) => Err(to_error(StoreOp::Read, path.as_ref(), g.error)),
    }
}

/// The first live seqnum of a log: its manifest's, or past its trim point.
pub(crate) fn first_live(manifest: &ManifestData) -> u64 {
    let after_snapshot = manifest
        .snapshot
        .as_ref()
        .map_or(0, |s| s.through_seq.saturating_add(1));
    manifest.first_sequence().max(after_snapshot)
}

/// A reader of the log as `manifest` shows it, within `budget`'s page and
/// segment shares; the numbers a writer or follower starts from; and the
/// seqnum from which it must read the log to complete them.
///
/// Errors: I/O kinds for a cache directory that cannot be used; store
/// errors reading the entry the tip check needs (other than finding it
/// gone).
pub(crate) async fn open_numbers(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    manifest: &ManifestData,
    trim: Option<&LogState>,
    cache: Option<CacheDir>,
    budget: &Budget,
) -> Result<(BucketReader, Numbers, u64)> {
    let reader = BucketReader::new(
        store.clone(),
        layout.manifest(),
        Arc::new(manifest.clone()),
        budget.pages,
        budget.segments,
    );
    let (numbers, from) =
        numbers_from(layout, manifest, trim, cache, budget.index.clone(), &reader).await?;
    Ok((reader, numbers, from))
}

/// [`open_numbers`] with its reader made.
async fn numbers_from(
    layout: &BucketLayout,
    manifest: &ManifestData,
    trim: Option<&LogState>,
    cache: Option<CacheDir>,
    options: IndexOptions,
    reader: &BucketReader,
) -> Result<(Numbers, u64)> {
    let first = first_live(manifest);
    let next = manifest.next_sequence;
    let floors: Vec<_> = trim.map(|t| t.next_versions.clone()).unwrap_or_default();
    let Some(cache) = cache else {
        return Ok((
            Numbers::Memory(MemoryIndex::with_version_floors(first, floors)),
            first,
        ));
    };
    let manifest_path = layout.manifest();
    let mut index = cache.open_index(&identity(manifest_path.as_ref()), options)?;
    let covered = index.covered();
    if covered < first && index.tip()?.is_none() {
        // An index that covers nothing (a fresh one) of a trimmed log: it
        // starts where the log does; nothing is being rebuilt.
        index.start_at(first, &floors)?;
        return Ok((Numbers::Disk(Arc::new(index), Arc::new(cache)), first));
    }
    let reason = if covered > next {
        Some(format!(
            "it covers the log up to {covered} but the log ends at {next}"
        ))
    } else if covered < first && covered > index.first() {
        Some(format!(
            "the log was truncated through {} since it covered up to {covered}",
            first - 1
        ))
    } else if covered < first {
        Some(format!("it starts at {covered}, the log at {first}"))
    } else {
        tip_mismatch(&index, first, reader).await?
    };
    let from = match reason {
        Some(why) => {
            index.reset(first, &floors, &why)?;
            first
        }
        None => {
            if first > index.first() {
                index.trim(first, &floors)?;
            }
            covered.max(first)
        }
    };
    Ok((Numbers::Disk(Arc::new(index), Arc::new(cache)), from))
}

/// Why the index's last covered entry is not the log's, if it is not.
async fn tip_mismatch(
    index: &crate::index::Index,
    first: u64,
    reader: &BucketReader,
) -> Result<Option<String>> {
    let Some((seqnum, check)) = index.tip()? else {
        return Ok(None);
    };
    if seqnum < first {
        // Trimmed since: nothing left to compare with.
        return Ok(None);
    }
    match reader.read_seqnums(&[seqnum]).await {
        Ok(entries) => match entries.first() {
            Some(e) if check_of(e) == check => Ok(None),
            _ => Ok(Some(format!(
                "entry {seqnum} in the bucket is not the one it recorded"
            ))),
        },
        Err(e) if matches!(e.kind(), ErrorKind::Trimmed | ErrorKind::Corrupt) => {
            Ok(Some(format!("entry {seqnum} cannot be read back: {e}")))
        }
        Err(e) => Err(e),
    }
}

/// A log's numbers in memory, read from its first live entry, and the
/// manifest they were read from (for tools that need the numbers once: a
/// trim without a writer). No entry is kept.
///
/// Errors: `InvalidInput` for a segment-numbered manifest; `NotFound` when
/// there is no log; as for [`fill`].
pub(crate) async fn read_numbers(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    prefetch: usize,
    retry: &RetryPolicy,
) -> Result<(MemoryIndex, ManifestData)> {
    let (manifest, trim) = read_start(store, layout, retry).await?;
    let Some(manifest) = manifest else {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!("no bucket log at {}", layout.manifest()),
        ));
    };
    check_weft_log(&layout.manifest(), &manifest)?;
    // A tool's one-off read: small caches, no cache directory.
    let budget = Budget {
        in_flight: 0,
        recent: 0,
        segments: 8 << 20,
        pages: 1 << 20,
        index: IndexOptions::default(),
    };
    let (reader, numbers, from) =
        open_numbers(store, layout, &manifest, trim.as_ref(), None, &budget).await?;
    let log = Arc::new(LocalLog::new(
        "the bucket log",
        super::local::LocalState::new(numbers, 0),
        reader,
    ));
    let patience = Patience::Bounded(retry.clone(), 0);
    let until = manifest.next_sequence;
    fill(
        store.clone(),
        layout.clone(),
        log.clone(),
        from,
        until,
        prefetch,
        patience,
        None,
        FillInto::History,
    )
    .await?;
    let numbers = log.visible().write().take_numbers();
    match numbers {
        Numbers::Memory(index) => Ok((index, manifest)),
        Numbers::Disk(..) => Err(Error::internal("numbers read into memory came from disk")),
    }
}

/// Where a fill puts the batches it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FillInto {
    /// The index of the history (the entries before the live end).
    History,
    /// The live end: each batch is published as if just committed (a
    /// writer opened from a state checkpoint reads the entries after it
    /// this way, while the history before it is filled in apart).
    Live,
}

/// The fill's applier: adds the numbers of committed batches.
struct FillApplier {
    shared: Arc<LocalLog>,
    assembler: BatchAssembler,
    /// A writer's append-id window, fed the ids of the entries read.
    ids: Option<SharedIds>,
    into: FillInto,
}

/// An append-id window a fill feeds (the writer's open).
pub(crate) type SharedIds = Arc<std::sync::Mutex<AppendIds>>;

#[async_trait]
impl Applier for FillApplier {
    /// The fill starts at the trim point the writer stored.
    async fn restore(&mut self, snapshot: Bytes, through_seq: u64) -> Result<()> {
        let state = decode_trim_state(&snapshot, through_seq)?;
        let first = through_seq.saturating_add(1);
        self.shared
            .visible()
            .write()
            .restore_history(first, state.next_versions)?;
        self.assembler = BatchAssembler::starting_at(first);
        if let Some(ids) = &self.ids {
            ids.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .forget_through(through_seq);
        }
        Ok(())
    }

    async fn apply(&mut self, record: &Record) -> Result<()> {
        if let Some(batch) = self.assembler.push_with_ids(record)? {
            if let Some(ids) = &self.ids {
                let mut ids = ids
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                for (entry, id) in batch.entries.iter().zip(&batch.ids) {
                    if let Some(id) = id {
                        ids.observe(id, result_of(entry));
                    }
                }
            }
            match self.into {
                FillInto::History => self.shared.add_history(&batch.entries)?,
                FillInto::Live => self.shared.publish(batch.entries)?,
            }
        }
        Ok(())
    }
}

/// How a fill rides out transient store failures.
pub(crate) enum Patience {
    /// Within a retry policy (the budget starts over after progress): for
    /// a writer's open, which fails rather than wait forever.
    Bounded(RetryPolicy, u64),
    /// Forever (a follower's background fill): each request is cut off
    /// after `request_timeout`, and a failed read is tried again after
    /// `pause`.
    Forever {
        pause: Duration,
        request_timeout: Duration,
    },
}

impl Patience {
    fn request_timeout(&self) -> Duration {
        match self {
            Patience::Bounded(policy, _) => request_timeout(policy),
            Patience::Forever {
                request_timeout, ..
            } => *request_timeout,
        }
    }
}

/// How long one store request of a replica may take under `retry`.
pub(crate) fn request_timeout(retry: &RetryPolicy) -> Duration {
    retry
        .attempt_timeout
        .map_or(retry.deadline, |t| t.min(retry.deadline))
}

/// Reads the committed entries from `from` up to `until` and adds their
/// numbers to `shared`'s state, `into` its history index or its live end
/// (and, given `ids`, their append ids to it).
///
/// Errors: `Corrupt` for damaged objects or a log with a gap; store errors
/// once the patience runs out; the index's; `Trimmed` when a truncation
/// overtakes a fill into the live end (one into the history starts over at
/// the trim point).
// The fill's inputs are independent settings of one read; a struct would
// only rename them.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn fill(
    store: Arc<dyn ObjectStore>,
    layout: BucketLayout,
    shared: Arc<LocalLog>,
    from: u64,
    until: u64,
    prefetch: usize,
    patience: Patience,
    ids: Option<SharedIds>,
    into: FillInto,
) -> Result<()> {
    let reached = |shared: &LocalLog| {
        let state = shared.visible().read();
        match into {
            FillInto::History => state.indexed(),
            FillInto::Live => state.tip().next,
        }
    };
    let mut from = Some(from);
    let mut backoff = match &patience {
        Patience::Bounded(policy, seed) => Some(policy.backoff(*seed ^ 0x0066_696c_6c00)),
        Patience::Forever { .. } => None,
    };
    let timeout = patience.request_timeout();
    loop {
        let mut replica = start(
            &store,
            &layout,
            &shared,
            from.take(),
            until,
            prefetch,
            timeout,
            ids.clone(),
            into,
        )
        .await?;
        loop {
            if reached(&shared) >= until || shared.gate().is_closed() {
                return Ok(());
            }
            let before = replica.cursor();
            let err = match replica.poll().await {
                Ok(_) => {
                    if reached(&shared) < until {
                        return Err(Error::corrupt(format!(
                            "the log's entries end before seqnum {until}, its end when this \
                             reader started"
                        )));
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Trimmed && into == FillInto::History => break,
                Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Indeterminate) => {
                    e
                }
                Err(e) => return Err(e),
            };
            tracing::debug!(error = %err, "reading the bucket log: retrying");
            match (&mut backoff, &patience) {
                (Some(b), _) => {
                    if replica.cursor() != before {
                        b.reset();
                    }
                    if !b.wait().await {
                        return Err(err.context("reading the bucket log"));
                    }
                }
                (None, Patience::Forever { pause, .. }) => crate::clock::sleep(*pause).await,
                (None, Patience::Bounded(..)) => unreachable!("bounded patience has a backoff"),
            }
        }
        // A truncation overtook the fill: start over at the trim point.
        tracing::info!("the log was truncated while being read; starting over");
    }
}

/// A replica that reads from `from` (or, with `None`, from the log's first
/// live entry, restoring its trim state) up to `until`.
#[allow(clippy::too_many_arguments)]
async fn start(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    shared: &Arc<LocalLog>,
    from: Option<u64>,
    until: u64,
    prefetch: usize,
    request_timeout: Duration,
    ids: Option<SharedIds>,
    into: FillInto,
) -> Result<Replica<FillApplier>> {
    let manifest = shared.reader().manifest();
    let cursors = MemoryCursorStore::new();
    let from = from.filter(|&f| f > first_live(&manifest));
    let assembler = match from {
        Some(f) => {
            cursors.save(cursor_at(store, &manifest, f).await?).await?;
            BatchAssembler::starting_at(f)
        }
        None => BatchAssembler::new(),
    };
    let applier = FillApplier {
        shared: shared.clone(),
        assembler,
        ids,
        into,
    };
    Ok(Replica::builder(store.clone(), layout.manifest(), applier)
        .with_cursor_store(cursors)
        .with_prefetch(prefetch)
        .with_stop_at(until)
        .with_request_timeout(request_timeout)
        .build())
}

/// Fills in the history of `log` from `from` up to `until` in a task of
/// its own, riding out store failures forever (each request cut off at
/// `request_timeout`, failed reads tried again after `pause`). A fill that
/// fails for good is recorded in `log`: the reads that wait for it, and
/// `filled_in`, get its error. `what` names the handle in the log line.
// The fill's inputs, as for `fill`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spawn_history_fill(
    store: Arc<dyn ObjectStore>,
    layout: BucketLayout,
    log: Arc<LocalLog>,
    from: u64,
    until: u64,
    prefetch: usize,
    pause: Duration,
    request_timeout: Duration,
    what: &'static str,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let patience = Patience::Forever {
            pause,
            request_timeout,
        };
        let filled = fill(
            store,
            layout,
            log.clone(),
            from,
            until,
            prefetch.max(1),
            patience,
            None,
            FillInto::History,
        );
        if let Err(e) = filled.await {
            // Under a target of its own: a program that reports every
            // error its reads meet (the `weft` command) hears of this one
            // from the read that needed the history, and can mute this
            // second report of it; a long-running service keeps it.
            tracing::warn!(target: crate::HISTORY_FILL_LOG_TARGET, error = %e, "{what} could not fill in its history");
            log.fill_failed(&e);
        }
    })
}

/// The replica cursor of the record holding seqnum `f` (found through the
/// manifest and, for older entries, its history pages).
///
/// Errors: store errors reading a history page; `Corrupt`.
async fn cursor_at(
    store: &Arc<dyn ObjectStore>,
    manifest: &ManifestData,
    f: u64,
) -> Result<Cursor> {
    let holder = HistoryReader::new(store.clone(), 1 << 20)
        .locate(manifest.history.as_ref(), &manifest.entries, f)
        .await?;
    Ok(match holder {
        Some(e) if e.sequence < f => Cursor {
            entry: e.sequence,
            record: u32::try_from(f - e.sequence)
                .map_err(|_| Error::corrupt("a manifest entry holds over 4 G records"))?,
        },
        _ => Cursor::at_entry(f),
    })
}

/// The append ids of the entries from `from` up to `until`, in log order:
/// what a writer opened on a cache directory reads of the ids its index
/// does not keep (see `BucketStorage::append`). One read, not retried: a
/// failure is the caller's to report, and the next caller reads again.
///
/// Errors: store errors; `Corrupt` for damaged objects; `Trimmed` when a
/// truncation overtook the read.
pub(crate) async fn read_ids(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    manifest: &ManifestData,
    from: u64,
    until: u64,
    prefetch: usize,
    request_timeout: Duration,
) -> Result<AppendIds> {
    let from = from.max(first_live(manifest));
    if from >= until {
        return Ok(AppendIds::unbounded());
    }
    let cursors = MemoryCursorStore::new();
    cursors
        .save(cursor_at(store, manifest, from).await?)
        .await?;
    let applier = IdApplier {
        assembler: BatchAssembler::starting_at(from),
        until,
        reached: from,
        ids: AppendIds::unbounded(),
    };
    let mut replica = Replica::builder(store.clone(), layout.manifest(), applier)
        .with_cursor_store(cursors)
        .with_prefetch(prefetch)
        .with_stop_at(until)
        .with_request_timeout(request_timeout)
        .build();
    replica.poll().await?;
    let applier = replica.applier_mut();
    if applier.reached < until {
        return Err(Error::corrupt(format!(
            "the log's entries end at {} before seqnum {until}, where this writer's reading began",
            applier.reached
        )));
    }
    Ok(std::mem::take(&mut applier.ids))
}

/// [`read_ids`]'s applier: keeps the ids of entries before `until`.
struct IdApplier {
    assembler: BatchAssembler,
    until: u64,
    /// The seqnum after the last whole batch read.
    reached: u64,
    ids: AppendIds,
}

#[async_trait]
impl Applier for IdApplier {
    async fn apply(&mut self, record: &Record) -> Result<()> {
        if let Some(batch) = self.assembler.push_with_ids(record)? {
            for (entry, id) in batch.entries.iter().zip(&batch.ids) {
                if let Some(id) = id
                    && entry.seqnum < self.until
                {
                    self.ids.observe(id, result_of(entry));
                }
            }
            if let Some(last) = batch.entries.last() {
                self.reached = self.reached.max(last.seqnum + 1);
            }
        }
        Ok(())
    }

    /// A snapshot means the read started before the log's first live
    /// entry: the ids start after it.
    async fn restore(&mut self, _snapshot: Bytes, through_seq: u64) -> Result<()> {
        self.assembler = BatchAssembler::starting_at(through_seq.saturating_add(1));
        self.reached = self.reached.max(through_seq.saturating_add(1));
        self.ids.forget_through(through_seq);
        Ok(())
    }
}
