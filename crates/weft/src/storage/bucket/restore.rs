//! The steps a new bucket writer takes before it accepts appends: claim
//! the log (a new epoch in the manifest fences every older writer), then
//! rebuild its numbers from what is now final — from its cache directory,
//! from the newest stream-state checkpoint, or from the log — and number
//! on from there.

use std::collections::HashMap;
use std::sync::Arc;

use object_store::ObjectStore;

use super::BucketLayout;
use super::budget::Budget;
use super::catchup::{FillInto, Patience, SharedIds, fill, open_numbers, read_start};
use super::local::{LocalLog, LocalState};
use super::numbers::{CacheDir, FillWatch, Floors, IndexVersions, Numbers, WriterVersions};
use super::open_checks::check_weft_log;
use super::states;
use super::stream_checks::StreamChecks;
use super::writer::BucketOptions;
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::{LogState, ManifestData, ManifestVersion, StateCheckpoint};
use crate::storage::kit::AppendIds;
use crate::storage::kit::{MemoryVersions, Sequencer};
use crate::wal::Producer;

/// Streams a writer over the persistent index holds in memory at most
/// (about): any other is looked up in the index.
const HELD_STREAMS: usize = 100_000;

/// Claims the log: opens a producer, which writes a new epoch into the
/// manifest. Nothing the writer reads before this may be trusted.
pub(super) async fn claim(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    options: &BucketOptions,
    budget: &Budget,
    clock: &Arc<dyn Clock>,
) -> Result<Producer> {
    let mut builder = Producer::builder(store.clone(), layout.manifest(), layout.segments())
        .with_flush_interval(options.flush_interval)
        .with_flush_bytes(options.flush_bytes)
        .with_manifest_version(ManifestVersion::V5)
        .with_checkpoint_policy(options.checkpoint.clone())
        .with_history_prefix(layout.history())
        .with_retry_policy(options.retry.clone())
        .with_lease_renewal(options.lease_renew_every)
        .with_take_over(options.take_over)
        .with_clock(clock.clone())
        .with_max_inflight_bytes(budget.in_flight);
    if let Some(seed) = options.seed {
        builder = builder.with_seed(seed);
    }
    if let Some(name) = &options.writer_name {
        builder = builder.with_holder(name.clone());
    }
    builder.open().await
}

/// What a claimed writer rebuilt: its local log up to the manifest's end,
/// and where the history it has not read yet lies.
pub(super) struct Restored {
    pub(super) log: Arc<LocalLog>,
    /// The log's first seqnum (after its trim point).
    pub(super) from: u64,
    /// Where the entries read before appends are taken begin: after the
    /// checkpoint the writer opened from, or `from`. The history between
    /// the two is filled in the background.
    pub(super) live_from: u64,
    /// The seqnum the next append gets.
    pub(super) next: u64,
    /// The log's trim state, if it was ever trimmed.
    trim: Option<LogState>,
    /// The stream-state checkpoint the writer opened from, with every
    /// stream's next version as of it.
    checkpoint: Option<(StateCheckpoint, Floors)>,
    /// The append ids of the entries read before appends are taken.
    pub(super) ids: AppendIds,
}

/// Rebuilds a claimed writer's numbers (see [`Restored`]).
pub(super) async fn restore(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    options: &BucketOptions,
    cache: Option<CacheDir>,
    budget: &Budget,
) -> Result<Restored> {
    let (manifest, trim) = read_start(store, layout, &options.retry).await?;
    let manifest = manifest.unwrap_or_else(|| ManifestData::empty(ManifestVersion::default()));
    check_weft_log(&layout.manifest(), &manifest)?;
    let next = manifest.next_sequence;
    let (reader, numbers, from) =
        open_numbers(store, layout, &manifest, trim.as_ref(), cache, budget).await?;
    // With no local state, start from the newest stream-state checkpoint:
    // only the entries after it are read before appends are taken; the
    // history before it is indexed in the background.
    let checkpoint = if from < next {
        states::newest(store, layout, &reader, from, next, &options.retry).await
    } else {
        None
    }
    .map(|c| {
        let floors: HashMap<_, _> = c.state.next_versions.iter().cloned().collect();
        (c, Arc::new(floors))
    });
    let live_from = checkpoint
        .as_ref()
        .map_or(from, |(c, _)| c.state.through + 1);
    let state = match &checkpoint {
        Some((_, floors)) => {
            LocalState::filling_from(numbers, live_from, floors.clone(), budget.recent)
        }
        None => LocalState::new(numbers, budget.recent),
    };
    let log = Arc::new(LocalLog::new("the bucket writer", state, reader));
    let ids: SharedIds = Arc::new(std::sync::Mutex::new(AppendIds::bounded(
        options.append_id_window,
    )));
    let patience = Patience::Bounded(options.retry.clone(), options.seed.unwrap_or(0));
    let into = if live_from > from {
        FillInto::Live
    } else {
        FillInto::History
    };
    fill(
        store.clone(),
        layout.clone(),
        log.clone(),
        live_from,
        next,
        options.rebuild_prefetch,
        patience,
        Some(ids.clone()),
        into,
    )
    .await?;
    let ids = Arc::into_inner(ids)
        .ok_or_else(|| Error::internal("the rebuild kept a handle on the append ids"))?
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok(Restored {
        log,
        from,
        live_from,
        next,
        trim,
        checkpoint,
        ids,
    })
}

impl Restored {
    /// Until the history fill has compared the checkpoint the writer
    /// opened from with the log, each stream is checked before the writer
    /// first numbers it; none without such a checkpoint.
    pub(super) fn stream_checks(&self) -> Option<StreamChecks> {
        let (checkpoint, floors) = self.checkpoint.as_ref()?;
        let live = self.log.visible().read().live_first_versions();
        let trim_floors = self.trim.as_ref().map_or(&[][..], |t| &t.next_versions[..]);
        Some(StreamChecks::new(
            checkpoint,
            floors.clone(),
            live,
            trim_floors,
        ))
    }

    /// The writer's sequencer: numbering on from the log's end, with every
    /// stream's next version in memory or over the persistent index.
    pub(super) fn sequencer(&self) -> Sequencer<WriterVersions> {
        let state = self.log.visible().read();
        let floors = self.checkpoint.as_ref().map(|(_, floors)| floors.clone());
        let table = match (state.numbers(), floors) {
            // The checkpoint's versions, then those of the entries after
            // it (a stream's later entries win).
            (Numbers::Memory(_), Some(floors)) => {
                WriterVersions::Memory(MemoryVersions::from_versions(
                    floors
                        .iter()
                        .map(|(t, v)| (t.clone(), *v))
                        .chain(state.live_next_versions()),
                ))
            }
            (Numbers::Memory(index), None) => WriterVersions::Memory(
                MemoryVersions::from_versions(index.next_versions_through(u64::MAX)),
            ),
            (Numbers::Disk(index, _), Some(floors)) => WriterVersions::Index(
                IndexVersions::new(index.clone(), HELD_STREAMS)
                    .lagging()
                    .starting_at_checkpoint(
                        floors,
                        state.live_next_versions(),
                        FillWatch::new({
                            let log = self.log.clone();
                            move || log.visible().read().filling_in()
                        }),
                    ),
            ),
            (Numbers::Disk(index, _), None) => {
                WriterVersions::Index(IndexVersions::new(index.clone(), HELD_STREAMS).lagging())
            }
        };
        Sequencer::with_table(self.next, table)
    }
}
