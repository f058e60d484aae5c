//! Stream-state checkpoints: what lets a writer with no local state open a
//! long log without reading all of it.
//!
//! A writer must know every stream's next version before it takes an
//! append. Without a cache directory it used to learn them by reading the
//! whole live log, so its open grew with the log. Now and then (see
//! [`BucketOptions::state_checkpoint_entries`]) the writer stores the
//! numbering state as of its newest visible entry — every stream's next
//! version ([`crate::format::state_checkpoint`]) — as a create-only object
//! `states/<through, 20 digits>-<run id>`. A writer that opens with no
//! local state lists them, takes the newest one that checks out, reads only
//! the entries after it before taking appends, and fills in the numbers of
//! the history before it in the background, as a fresh follower does.
//!
//! A checkpoint is derived state, never the only copy of anything: the
//! manifest does not name it, and one that cannot be listed, read or
//! decoded, or whose `through` entry in the bucket does not carry the check
//! value it recorded (the log was recreated under the same prefix), is
//! passed over with a warning — the open falls back to an older checkpoint
//! or to reading the whole log. A checkpoint is only ever taken of entries
//! the writer saw committed, and committed entries never change, so one
//! written by a writer since fenced is as good as any.
//!
//! Cost: a checkpoint holds one row per stream (its tag text and 8
//! bytes). It is taken once `state_checkpoint_entries` entries were
//! committed since the last one *and* at least as many entries as the last
//! one had streams, so its upload costs at most about one row per entry
//! appended, and an open reads one checkpoint plus fewer entries than
//! that. After storing one, the writer deletes all but the newest two.
//!
//! [`BucketOptions::state_checkpoint_entries`]: super::BucketOptions::state_checkpoint_entries

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions};

use super::BucketLayout;
use super::local::LocalLog;
use super::numbers::check_of;
use super::reader::BucketReader;
use crate::error::{Error, Result};
use crate::format::state_checkpoint::TRIMMED;
use crate::format::{LogState, StateCheckpoint, decode_state_checkpoint, encode_state_checkpoint};
use crate::model::LogTag;
use crate::objects::{RetryPolicy, StoreOp, to_error};

/// How many checkpoints the writer keeps after storing one.
const KEEP: usize = 2;
/// How many checkpoints an open tries before reading the whole log.
const TRIES: usize = 3;

/// The object of the checkpoint through `through` written by run `run`.
fn object_path(layout: &BucketLayout, through: u64, run: &str) -> Path {
    Path::from(format!("{}/{through:020}-{run}", layout.states()))
}

/// The seqnum a checkpoint object's name says it covers.
fn through_of(path: &Path) -> Option<u64> {
    let name = path.filename()?;
    let (through, run) = name.split_once('-')?;
    if through.len() != 20 || run.is_empty() {
        return None;
    }
    through.parse().ok()
}

/// Every checkpoint object with the seqnum it covers, newest first.
async fn list(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    retry: &RetryPolicy,
) -> Result<Vec<(u64, Path)>> {
    let prefix = Path::from(layout.states());
    let listed: Vec<_> = retry
        .backoff(0x7374_6174_6573)
        .attempt(store.list(Some(&prefix)).try_collect())
        .await
        .map_err(|e| to_error(StoreOp::List, prefix.as_ref(), e))?;
    let mut found: Vec<(u64, Path)> = listed
        .into_iter()
        .filter_map(|m| through_of(&m.location).map(|t| (t, m.location)))
        .collect();
    found.sort_by(|a, b| b.cmp(a));
    Ok(found)
}

/// The newest checkpoint a writer of the log whose live entries are
/// `[first, next)` can start from: one through a live entry, decoded, whose
/// entry in the bucket carries the check value it recorded. `None` when
/// there is none (the caller reads the whole log); problems are logged and
/// passed over, never returned.
pub(crate) async fn newest(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    reader: &BucketReader,
    first: u64,
    next: u64,
    retry: &RetryPolicy,
) -> Option<StateCheckpoint> {
    let listed = match list(store, layout, retry).await {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list state checkpoints; reading the whole log");
            return None;
        }
    };
    let usable = listed
        .into_iter()
        .filter(|(through, _)| *through >= first && *through < next);
    for (through, path) in usable.take(TRIES) {
        match check(store, reader, through, &path, retry).await {
            Ok(state) => return Some(state),
            Err(e) => tracing::warn!(error = %e, %path, "state checkpoint passed over"),
        }
    }
    None
}

/// Every state checkpoint a writer of the log could open from, checked
/// against `index` (the numbers of the whole live log, read by
/// [`super::check`]): one that cannot be read or decoded, whose name and
/// content disagree, that lies past the log's end, or whose versions are
/// not those of the log up to its entry is a problem (`Corrupt`), one per
/// checkpoint. Checkpoints before the first live entry are never used and
/// not looked at.
///
/// Errors: store kinds listing or reading them.
pub(crate) async fn check_all(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    index: &crate::storage::kit::MemoryIndex,
    retry: &RetryPolicy,
) -> Result<Vec<Error>> {
    let mut problems = Vec::new();
    for (through, path) in list(store, layout, retry).await? {
        if through < index.first() {
            continue;
        }
        let at = |e: Error| e.context(format!("state checkpoint {path}"));
        if through >= index.next() {
            problems.push(at(Error::corrupt(format!(
                "it covers the log through seqnum {through}, past the log's end ({})",
                index.next()
            ))));
            continue;
        }
        let bytes = retry
            .backoff(through)
            .attempt(async { store.get(&path).await?.bytes().await })
            .await
            .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))?;
        let checkpoint = match decode_state_checkpoint(&bytes) {
            Ok(c) => c,
            Err(e) => {
                problems.push(at(e));
                continue;
            }
        };
        if checkpoint.state.through != through {
            problems.push(at(Error::corrupt(format!(
                "it covers the log through {}, its name says {through}",
                checkpoint.state.through
            ))));
            continue;
        }
        let mut theirs = checkpoint.state.next_versions.clone();
        let mut ours = index.next_versions_through(through);
        theirs.sort();
        ours.sort();
        if let Some(diff) = first_difference(&theirs, &ours) {
            problems.push(at(Error::corrupt(diff)));
        } else if let Some(diff) = last_entry_difference(&checkpoint, index) {
            problems.push(at(Error::corrupt(diff)));
        }
    }
    Ok(problems)
}

/// The first stream whose last entry (a version 2 checkpoint names it) is
/// not the one the log has, in words; the versions already agree.
fn last_entry_difference(
    checkpoint: &StateCheckpoint,
    index: &crate::storage::kit::MemoryIndex,
) -> Option<String> {
    let last = checkpoint.last_seqnums.as_ref()?;
    for ((tag, next), said) in checkpoint.state.next_versions.iter().zip(last) {
        let ours = match index.version_seqnums(tag, next.saturating_sub(1), 1) {
            Ok(found) => found.first().copied(),
            Err(_) => Some(TRIMMED),
        };
        if ours != Some(*said) {
            let name = |s: Option<u64>| match s {
                Some(TRIMMED) => "trimmed".to_string(),
                Some(s) => format!("at seqnum {s}"),
                None => "nowhere".to_string(),
            };
            return Some(format!(
                "it says the last entry of stream {tag} is {}, the log has it {}",
                name(Some(*said)),
                name(ours)
            ));
        }
    }
    None
}

/// The first stream whose next version differs between a checkpoint's
/// (sorted) rows and the log's, in words.
fn first_difference(theirs: &[(LogTag, u64)], ours: &[(LogTag, u64)]) -> Option<String> {
    let ours_of = |tag: &LogTag| ours.iter().find(|(t, _)| t == tag).map(|(_, v)| *v);
    for (tag, v) in theirs {
        match ours_of(tag) {
            Some(o) if o == *v => {}
            Some(o) => {
                return Some(format!(
                    "it says stream {tag} continues at version {v}, the log says {o}"
                ));
            }
            None => {
                return Some(format!(
                    "it names stream {tag}, which the log does not have"
                ));
            }
        }
    }
    ours.iter()
        .find(|(tag, _)| !theirs.iter().any(|(t, _)| t == tag))
        .map(|(tag, v)| format!("it leaves out stream {tag}, at version {v} in the log"))
}

/// The checkpoint at `path`, if it is one of this log.
async fn check(
    store: &Arc<dyn ObjectStore>,
    reader: &BucketReader,
    through: u64,
    path: &Path,
    retry: &RetryPolicy,
) -> Result<StateCheckpoint> {
    let bytes = retry
        .backoff(through)
        .attempt(async { store.get(path).await?.bytes().await })
        .await
        .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))?;
    let checkpoint = decode_state_checkpoint(&bytes)?;
    if checkpoint.state.through != through {
        return Err(Error::corrupt(format!(
            "it covers the log through {}, its name says {through}",
            checkpoint.state.through
        )));
    }
    let entry = reader.read_seqnums(&[through]).await?;
    match entry.first() {
        Some(e) if check_of(e) == checkpoint.through_check => Ok(checkpoint),
        _ => Err(Error::corrupt(format!(
            "entry {through} in the bucket is not the one it was taken of"
        ))),
    }
}

/// The writer's side: counts committed entries and stores a checkpoint
/// when enough have been committed since the last one.
#[derive(Debug)]
pub(crate) struct CheckpointTaker {
    store: Arc<dyn ObjectStore>,
    layout: BucketLayout,
    run: String,
    retry: RetryPolicy,
    /// Entries between checkpoints, at least (0: never).
    every: u64,
    /// Entries committed since the last checkpoint was started.
    since: u64,
    /// Streams in the last checkpoint stored: the next one waits for at
    /// least as many entries.
    streams: Arc<AtomicU64>,
    running: Option<tokio::task::JoinHandle<()>>,
}

impl CheckpointTaker {
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        layout: BucketLayout,
        run: String,
        retry: RetryPolicy,
        every: u64,
    ) -> Self {
        CheckpointTaker {
            store,
            layout,
            run,
            retry,
            every,
            since: 0,
            streams: Arc::new(AtomicU64::new(0)),
            running: None,
        }
    }

    /// Called after `count` entries became visible in `log`: starts a
    /// checkpoint in the background when one is due and none is running.
    pub(crate) fn committed(&mut self, log: &Arc<LocalLog>, count: usize) {
        if self.every == 0 {
            return;
        }
        self.since = self.since.saturating_add(count as u64);
        let due = self.every.max(self.streams.load(Ordering::Relaxed));
        if self.since < due || self.running.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        self.since = 0;
        let (store, layout, run, retry) = (
            self.store.clone(),
            self.layout.clone(),
            self.run.clone(),
            self.retry.clone(),
        );
        let (log, streams) = (log.clone(), self.streams.clone());
        self.running = Some(tokio::spawn(async move {
            match take(&store, &layout, &run, &retry, &log).await {
                Ok(Some((through, count))) => {
                    streams.store(count, Ordering::Relaxed);
                    tracing::debug!(through, streams = count, "state checkpoint stored");
                    if let Err(e) = prune(&store, &layout, &retry).await {
                        tracing::info!(error = %e, "cannot delete older state checkpoints");
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "cannot store a state checkpoint"),
            }
        }));
    }

    /// Stops a checkpoint in progress (closing the writer).
    pub(crate) fn stop(&mut self) {
        if let Some(t) = self.running.take() {
            t.abort();
        }
    }
}

impl Drop for CheckpointTaker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Stores a checkpoint of `log` as of its newest visible entry; returns
/// that seqnum and the number of streams, or `None` when there is nothing
/// to take (an empty log, or history still being filled in).
async fn take(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    run: &str,
    retry: &RetryPolicy,
    log: &Arc<LocalLog>,
) -> Result<Option<(u64, u64)>> {
    // The numbers are read under the read lock, so that they are those of
    // exactly the entries up to `through` (with an index on disk this waits
    // for its flush): off the runtime's threads.
    let held = log.clone();
    let taken = tokio::task::spawn_blocking(move || -> Result<_> {
        let state = held.visible().read();
        let tip = state.tip();
        if state.filling_in() || tip.next <= tip.first {
            return Ok(None);
        }
        let through = tip.next - 1;
        let floors = LogState::new(through, state.numbers().floors_through(through)?)?;
        // Each stream's last entry, so that a writer opening from the
        // checkpoint can check one stream by reading one entry.
        let last = floors
            .next_versions
            .iter()
            .map(|(tag, next)| state.numbers().last_seqnum(tag, *next))
            .collect::<Result<Vec<u64>>>()?;
        Ok(Some((floors, last, state.recent_entry(through).cloned())))
    })
    .await
    .map_err(|e| Error::internal("taking a state checkpoint panicked").with_source(e))??;
    let Some((state, last, entry)) = taken else {
        return Ok(None);
    };
    let through = state.through;
    let entry = match entry {
        Some(e) => e,
        None => log
            .reader()
            .read_seqnums(&[through])
            .await?
            .pop()
            .ok_or_else(|| Error::internal(format!("entry {through} cannot be read back")))?,
    };
    let streams = state.next_versions.len() as u64;
    let bytes = encode_state_checkpoint(&StateCheckpoint {
        state,
        through_check: check_of(&entry),
        last_seqnums: Some(last),
    })?;
    let path = object_path(layout, through, run);
    let put = retry
        .backoff(through)
        .attempt(store.put_opts(&path, bytes.into(), PutOptions::from(PutMode::Create)))
        .await;
    match put {
        // The same run's checkpoint through the same entry: the same bytes.
        Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => Ok(Some((through, streams))),
        Err(e) => Err(to_error(StoreOp::CreateIfAbsent, path.as_ref(), e)),
    }
}

/// Deletes every checkpoint but the newest [`KEEP`].
async fn prune(
    store: &Arc<dyn ObjectStore>,
    layout: &BucketLayout,
    retry: &RetryPolicy,
) -> Result<()> {
    for (_, path) in list(store, layout, retry).await?.into_iter().skip(KEEP) {
        match retry.backoff(0).attempt(store.delete(&path)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(to_error(StoreOp::Delete, path.as_ref(), e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_the_seqnum_they_cover() {
        let layout = BucketLayout::new("a/log");
        let p = object_path(&layout, 42, "01J0RUN");
        assert_eq!(p.as_ref(), "a/log/states/00000000000000000042-01J0RUN");
        assert_eq!(through_of(&p), Some(42));
        for odd in [
            "a/log/states/42-x",
            "a/log/states/junk",
            "a/log/states/00000000000000000042-",
        ] {
            assert_eq!(through_of(&Path::from(odd)), None, "{odd}");
        }
    }
}
