//! Read replicas: tail a bucket WAL and hand every committed record to an
//! [`Applier`].
//!
//! A replica never writes the manifest and is never fenced; any number may
//! tail the same log. Each [`Replica::poll`] loads the manifest (a
//! conditional GET, so an unchanged manifest costs one small request),
//! fetches the segments after the cursor — `prefetch` GETs in flight,
//! applied strictly in manifest order; a GET that finishes early frees its
//! slot at once (see `prefetch`), so memory stays bounded by
//! `2 × prefetch` segments — and applies their records. The cursor is saved
//! after each segment, and at the failed record when an applier fails, so
//! delivery is at least once and exact to the record: **appliers must be
//! idempotent**.
//!
//! A replica with no cursor starts at the first live entry, or, when the
//! manifest points to a snapshot, restores it through
//! [`Applier::restore`] and goes on from the record after it. A cursor below
//! the first live entry (the records it needs were truncated) is a
//! `Trimmed` error that names the snapshot to restore; it is never skipped
//! silently.
//!
//! Retention GC may delete a segment or a superseded snapshot right after
//! the manifest stops referencing it, so a replica can find an object it
//! was told about gone. It then reads the manifest again: a segment that
//! was truncated while the replica still needed it is the same `Trimmed`
//! error as above; a superseded snapshot is replaced by the current one.
//! Only an object the fresh manifest still references and the store does
//! not have is `Corrupt`.
//!
//! A v5 manifest lists only its recent entries; a replica whose cursor is
//! older reads the history pages (through a bounded page cache) and works
//! through them a chunk of entries at a time, so memory stays bounded by
//! the chunk and the prefetch window however far behind it starts. A page
//! that is gone is handled like a segment that is gone.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, ObjectStore};

use super::applier::{Applier, Record};
use super::cursor::{Cursor, CursorStore, MemoryCursorStore};
use super::history::{DEFAULT_PAGE_CACHE_BYTES, HistoryReader};
use super::prefetch::Prefetch;
use super::segments::{check_segment, missing_segment};
use crate::error::{Error, ErrorDetail, ErrorKind, Result};
use crate::format::manifest::{ManifestData, ManifestEntry, decode_manifest};
use crate::objects::DEFAULT_DEADLINE;
use crate::objects::outcome::{self, StoreOp};
use crate::outage::Outage;

/// What one [`Replica::poll`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PollOutcome {
    /// Records applied in this step.
    pub applied: usize,
    /// Segments completed in this step.
    pub segments: usize,
    /// The cursor after the step.
    pub cursor: Option<Cursor>,
    /// A snapshot was restored in this step.
    pub restored_snapshot: bool,
    /// The manifest does not exist (yet): nothing was done.
    pub manifest_missing: bool,
    /// The manifest was unchanged since the previous step (records it
    /// lists that an earlier, failed step did not apply are still applied).
    pub unchanged: bool,
}

/// Builds a [`Replica`].
pub struct ReplicaBuilder<A> {
    store: Arc<dyn ObjectStore>,
    manifest_path: Path,
    applier: A,
    cursor_store: Arc<dyn CursorStore>,
    prefetch: usize,
    poll_interval: Duration,
    page_cache_bytes: usize,
    stop_at: Option<u64>,
    request_timeout: Duration,
}

/// Entries one step works on at a time while reading history pages.
const CHUNK_ENTRIES: usize = 1024;

impl<A: Applier> ReplicaBuilder<A> {
    /// The longest one store request (a manifest or segment read) may take
    /// before the poll fails with `Unavailable` (default
    /// `DEFAULT_DEADLINE`): a store that stops answering fails polls
    /// instead of stalling them.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Where the replica keeps its cursor (default: in memory).
    pub fn with_cursor_store(mut self, cursor_store: impl CursorStore) -> Self {
        self.cursor_store = Arc::new(cursor_store);
        self
    }

    /// How many segment GETs to keep in flight while catching up (default
    /// 8). Segments that arrive ahead of their turn wait, up to as many
    /// again, so a replica holds at most `2 × prefetch` segments at once.
    pub fn with_prefetch(mut self, prefetch: usize) -> Self {
        self.prefetch = prefetch.max(1);
        self
    }

    /// How long [`Replica::run`] waits between polls that found nothing new
    /// (default 100 ms).
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Bytes of history pages (v5 manifests) the replica keeps cached
    /// (default 16 MiB).
    pub fn with_page_cache_bytes(mut self, bytes: usize) -> Self {
        self.page_cache_bytes = bytes;
        self
    }

    /// Applies only the entries that start before sequence `end` (which
    /// must be where an entry starts, or the log's end, for the last
    /// applied segment to be whole): a reader that fills in history up to
    /// where another one tails from.
    pub fn with_stop_at(mut self, end: u64) -> Self {
        self.stop_at = Some(end);
        self
    }

    /// The replica.
    pub fn build(self) -> Replica<A> {
        Replica {
            stop_at: self.stop_at,
            history: HistoryReader::new(self.store.clone(), self.page_cache_bytes),
            store: self.store,
            manifest_path: self.manifest_path,
            applier: self.applier,
            cursor_store: self.cursor_store,
            prefetch: self.prefetch,
            poll_interval: self.poll_interval,
            request_timeout: self.request_timeout,
            cursor: None,
            loaded_cursor: false,
            etag: None,
            manifest: None,
        }
    }
}

/// A read replica of one bucket WAL.
pub struct Replica<A> {
    store: Arc<dyn ObjectStore>,
    manifest_path: Path,
    applier: A,
    cursor_store: Arc<dyn CursorStore>,
    prefetch: usize,
    poll_interval: Duration,
    request_timeout: Duration,
    cursor: Option<Cursor>,
    loaded_cursor: bool,
    etag: Option<String>,
    manifest: Option<ManifestData>,
    history: HistoryReader,
    stop_at: Option<u64>,
}

/// Reads one whole object, within `timeout`.
async fn fetch(store: Arc<dyn ObjectStore>, location: String, timeout: Duration) -> Result<Bytes> {
    let path = Path::from(location.as_str());
    let read = async {
        let got = store
            .get(&path)
            .await
            .map_err(|e| outcome::to_error(StoreOp::Read, &location, e))?;
        got.bytes()
            .await
            .map_err(|e| outcome::to_error(StoreOp::Read, &location, e))
    };
    within(timeout, &location, read).await
}

/// `request` within `timeout`; `Unavailable` (nothing read) when it takes
/// longer.
async fn within<T>(
    timeout: Duration,
    what: &str,
    request: impl Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, request).await {
        Ok(result) => result,
        Err(_) => Err(Error::new(
            ErrorKind::Unavailable,
            format!(
                "reading {what} got no answer within {:.1} s",
                timeout.as_secs_f64()
            ),
        )),
    }
}

/// The cursor just past `entry`'s last record.
fn entry_end(entry: &ManifestEntry) -> Cursor {
    // A legacy entry (count 0) occupies one sequence, like a v1/v2 one.
    Cursor::at_entry(entry.end_sequence())
}

/// [`entry_end`] of an entry of `manifest`.
fn after_entry(_manifest: &ManifestData, entry: &ManifestEntry) -> Cursor {
    entry_end(entry)
}

/// The cursor of the record after `through_seq` (a snapshot's coverage),
/// given the entry holding that record if any.
fn after_sequence(holder: Option<&ManifestEntry>, through_seq: u64) -> Cursor {
    let next = through_seq.saturating_add(1);
    if let Some(entry) = holder
        && let Some(count) = entry.count
        && entry.sequence <= next
        && next < entry.sequence + u64::from(count)
    {
        return Cursor {
            entry: entry.sequence,
            record: (next - entry.sequence) as u32,
        };
    }
    Cursor::at_entry(next)
}

impl<A: Applier> Replica<A> {
    /// A builder for a replica of the log whose manifest is at
    /// `manifest_path` in `store`, delivering to `applier`.
    pub fn builder(
        store: Arc<dyn ObjectStore>,
        manifest_path: impl Into<Path>,
        applier: A,
    ) -> ReplicaBuilder<A> {
        ReplicaBuilder {
            store,
            manifest_path: manifest_path.into(),
            applier,
            cursor_store: Arc::new(MemoryCursorStore::new()),
            prefetch: 8,
            poll_interval: Duration::from_millis(100),
            page_cache_bytes: DEFAULT_PAGE_CACHE_BYTES,
            stop_at: None,
            request_timeout: DEFAULT_DEADLINE,
        }
    }

    /// The applier.
    pub fn applier(&self) -> &A {
        &self.applier
    }

    /// The applier, mutably.
    pub fn applier_mut(&mut self) -> &mut A {
        &mut self.applier
    }

    /// The cursor (next record to apply), once known.
    pub fn cursor(&self) -> Option<Cursor> {
        self.cursor
    }

    /// The manifest as of the last step.
    pub fn manifest(&self) -> Option<&ManifestData> {
        self.manifest.as_ref()
    }

    /// Loads the manifest unless it is unchanged. `Ok(None)`: missing.
    async fn load_manifest(&mut self) -> Result<Option<bool>> {
        let opts = GetOptions {
            if_none_match: self.etag.clone(),
            ..GetOptions::default()
        };
        let read = tokio::time::timeout(
            self.request_timeout,
            self.store.get_opts(&self.manifest_path, opts),
        );
        let got = match read.await {
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "reading the manifest {} got no answer within {:.1} s",
                        self.manifest_path,
                        self.request_timeout.as_secs_f64()
                    ),
                ));
            }
            Ok(got) => got,
        };
        let got = match got {
            Ok(got) => got,
            Err(object_store::Error::NotModified { .. }) => return Ok(Some(false)),
            Err(e) => {
                let err = outcome::to_error(StoreOp::Read, self.manifest_path.as_ref(), e);
                if err.kind() == ErrorKind::NotFound {
                    return Ok(None);
                }
                return Err(err);
            }
        };
        let etag = got.meta.e_tag.clone();
        let path = self.manifest_path.to_string();
        let bytes = within(self.request_timeout, &path, async {
            got.bytes()
                .await
                .map_err(|e| outcome::to_error(StoreOp::Read, &path, e))
        })
        .await?;
        let manifest = decode_manifest(&bytes)
            .map_err(|e| e.context(format!("manifest {}", self.manifest_path)))?;
        self.manifest = Some(manifest);
        self.etag = etag;
        Ok(Some(true))
    }

    /// Fixes the starting cursor on the first step: the saved one, or a
    /// snapshot restore, or the first live entry.
    async fn start_cursor(&mut self, outcome: &mut PollOutcome) -> Result<Cursor> {
        if let Some(c) = self.cursor {
            return Ok(c);
        }
        if !self.loaded_cursor {
            self.cursor = self.cursor_store.load().await?;
            self.loaded_cursor = true;
            if let Some(c) = self.cursor {
                return Ok(c);
            }
        }
        let cursor = match self.snapshot_to_restore().await? {
            Some((location, through, bytes)) => {
                let manifest = self.manifest.as_ref().expect("manifest loaded");
                let holder = within(
                    self.request_timeout,
                    "the manifest's history",
                    self.history.locate(
                        manifest.history.as_ref(),
                        &manifest.entries,
                        through.saturating_add(1),
                    ),
                )
                .await?;
                let start = after_sequence(holder.as_ref(), through);
                self.applier
                    .restore(bytes, through)
                    .await
                    .map_err(|e| e.context(format!("restoring snapshot {location}")))?;
                outcome.restored_snapshot = true;
                start
            }
            None => {
                let manifest = self.manifest.as_ref().expect("manifest loaded");
                Cursor::at_entry(manifest.first_sequence())
            }
        };
        self.cursor_store.save(cursor).await?;
        self.cursor = Some(cursor);
        Ok(cursor)
    }

    /// The snapshot the loaded manifest points to, fetched: its location,
    /// coverage and bytes; `None` when there is none.
    ///
    /// A snapshot object that is gone was superseded (and collected) after
    /// this replica read the manifest; the manifest is read again and the
    /// newer pointer followed, a few times at most.
    async fn snapshot_to_restore(&mut self) -> Result<Option<(String, u64, Bytes)>> {
        const ATTEMPTS: usize = 4;
        for attempt in 1..=ATTEMPTS {
            let manifest = self.manifest.as_ref().expect("manifest loaded");
            let Some(snap) = &manifest.snapshot else {
                return Ok(None);
            };
            let (location, through) = (snap.location.clone(), snap.through_seq);
            match fetch(self.store.clone(), location.clone(), self.request_timeout).await {
                Ok(bytes) => return Ok(Some((location, through, bytes))),
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    self.etag = None;
                    let still = match self.load_manifest().await? {
                        None => false,
                        Some(_) => self
                            .manifest
                            .as_ref()
                            .and_then(|m| m.snapshot.as_ref())
                            .is_some_and(|s| s.location == location),
                    };
                    if still || attempt == ATTEMPTS {
                        return Err(Error::corrupt(format!(
                            "the manifest points to snapshot {location}, which does not exist"
                        ))
                        .with_source(e));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns on its last attempt")
    }

    /// The error for a segment that was not found: `Trimmed` when a fresh
    /// manifest shows the entry was truncated meanwhile (its object then
    /// may be collected), `Corrupt` when the manifest still lists it.
    async fn missing_segment(
        &mut self,
        cursor: Cursor,
        entry: &ManifestEntry,
        err: Error,
    ) -> Error {
        self.etag = None;
        match self.load_manifest().await {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return err,
        }
        if let Err(trimmed) = self.pending(cursor, 1).await
            && trimmed.kind() == ErrorKind::Trimmed
        {
            return trimmed;
        }
        let listed = match self.manifest.as_ref() {
            Some(m) => match within(
                self.request_timeout,
                "the manifest's history",
                self.history
                    .locate(m.history.as_ref(), &m.entries, entry.sequence),
            )
            .await
            {
                Ok(found) => found.is_some_and(|e| e.location == entry.location),
                Err(e) => return e,
            },
            None => false,
        };
        if listed {
            return missing_segment(entry, err);
        }
        // Gone from the manifest but the cursor is not behind: the next
        // step re-plans on the fresh manifest.
        Error::new(
            ErrorKind::Unavailable,
            format!(
                "segment {} disappeared while the manifest changed; poll again",
                entry.location
            ),
        )
        .with_source(err)
    }

    /// Up to `max` entries still to apply from `cursor`, checked against
    /// the manifest (reading its history pages when the cursor is older
    /// than the entries it lists itself).
    async fn pending(&self, cursor: Cursor, max: usize) -> Result<Vec<ManifestEntry>> {
        let manifest = self.manifest.as_ref().expect("manifest loaded");
        if manifest.entries.is_empty() && manifest.history.is_none() {
            return Ok(Vec::new());
        }
        let first = manifest.first_sequence();
        if cursor.entry < first {
            let hint = match &manifest.snapshot {
                Some(s) => format!(
                    "; restore the snapshot at {} (through {}) and start again",
                    s.location, s.through_seq
                ),
                None => String::new(),
            };
            return Err(Error::new(
                ErrorKind::Trimmed,
                format!(
                    "replica cursor at entry {} is below the first live entry {first}: \
                     those records were truncated{hint}",
                    cursor.entry
                ),
            )
            .with_detail(ErrorDetail::Trimmed {
                requested: cursor.entry,
                first_available: first,
            }));
        }
        let rest = if cursor.entry < manifest.recent_from() {
            within(
                self.request_timeout,
                "the manifest's history",
                self.history.entries_from(
                    manifest.history.as_ref(),
                    &manifest.entries,
                    cursor.entry,
                    max,
                ),
            )
            .await?
        } else {
            let start = manifest
                .entries
                .partition_point(|e| e.sequence < cursor.entry);
            manifest.entries[start..]
                .iter()
                .take(max)
                .cloned()
                .collect()
        };
        match rest.first() {
            Some(e) if e.sequence == cursor.entry => Ok(rest),
            Some(e) => Err(Error::corrupt(format!(
                "replica cursor at entry {} falls inside the manifest but no entry starts \
                 there (next entry starts at {})",
                cursor.entry, e.sequence
            ))),
            None => {
                let end = match manifest.entries.last() {
                    Some(last) => after_entry(manifest, last).entry,
                    None => manifest.recent_from(),
                };
                if cursor.entry > end {
                    return Err(Error::corrupt(format!(
                        "replica cursor at entry {} is ahead of the log, which ends at {end}",
                        cursor.entry
                    )));
                }
                Ok(Vec::new())
            }
        }
    }

    /// One step: load the manifest, apply every record after the cursor.
    ///
    /// Errors: store errors (`Unavailable`, `NotFound`, `PermissionDenied`),
    /// `Corrupt` (a manifest or segment fails validation), `Trimmed` (the
    /// cursor's records were truncated), and whatever the applier returns —
    /// in which case the cursor stays at the failed record.
    pub async fn poll(&mut self) -> Result<PollOutcome> {
        let mut outcome = PollOutcome {
            applied: 0,
            segments: 0,
            cursor: self.cursor,
            restored_snapshot: false,
            manifest_missing: false,
            unchanged: false,
        };
        match self.load_manifest().await? {
            None => {
                outcome.manifest_missing = true;
                return Ok(outcome);
            }
            Some(changed) => outcome.unchanged = !changed && self.cursor.is_some(),
        }
        // Even an unchanged manifest may hold entries not applied yet: an
        // earlier step can have failed (a segment fetch, the applier) after
        // it loaded the manifest. So the cursor, not the ETag, decides.
        let mut cursor = self.start_cursor(&mut outcome).await?;
        loop {
            let mut pending = self.pending_rereading(cursor).await?;
            if let Some(end) = self.stop_at {
                pending.retain(|e| e.sequence < end);
            }
            if pending.is_empty() {
                break;
            }
            self.apply_entries(pending, &mut outcome).await?;
            let after = self.cursor.expect("cursor set");
            if after == cursor {
                break;
            }
            cursor = after;
        }
        outcome.cursor = self.cursor;
        if let (Some(c), Some(m)) = (self.cursor, self.manifest.as_ref()) {
            let end = m
                .entries
                .last()
                .map_or(m.recent_from(), |last| after_entry(m, last).entry);
            metrics::gauge!("weft_replica_lag_entries").set(end.saturating_sub(c.entry) as f64);
        }
        Ok(outcome)
    }

    /// [`pending`](Self::pending), reading the manifest again when a
    /// history page is gone: GC may delete a page right after a newer
    /// manifest stopped naming it, and the fresh copy then says `Trimmed`
    /// (or names the pages to read instead). A page the fresh manifest
    /// still needs and the store does not have is `Corrupt`.
    async fn pending_rereading(&mut self, cursor: Cursor) -> Result<Vec<ManifestEntry>> {
        match self.pending(cursor, CHUNK_ENTRIES).await {
            Err(e) if e.kind() == ErrorKind::NotFound => {
                self.etag = None;
                if self.load_manifest().await?.is_none() {
                    return Err(e);
                }
                match self.pending(cursor, CHUNK_ENTRIES).await {
                    Err(again) if again.kind() == ErrorKind::NotFound => Err(Error::corrupt(
                        "the manifest names a history page that does not exist",
                    )
                    .with_source(again)),
                    other => other,
                }
            }
            other => other,
        }
    }

    /// Fetches `pending`'s segments (up to `prefetch` at once) and applies
    /// their records after the cursor, saving the cursor after each.
    async fn apply_entries(
        &mut self,
        pending: Vec<ManifestEntry>,
        outcome: &mut PollOutcome,
    ) -> Result<()> {
        let store = self.store.clone();
        let timeout = self.request_timeout;
        // The segment is checked and split inside its fetch task, off the
        // apply loop's thread.
        let mut segments = Prefetch::new(pending.clone(), self.prefetch, move |entry| {
            let store = store.clone();
            async move {
                let bytes = fetch(store, entry.location.clone(), timeout).await?;
                check_segment(&entry, bytes)
            }
        });
        for entry in &pending {
            let segment = match segments.next().await {
                Some(Ok(segment)) => segment,
                None => return Err(Error::internal("segment stream ended early")),
                Some(Err(e)) if e.kind() == ErrorKind::NotFound => {
                    drop(segments);
                    let at = self.cursor.expect("cursor set");
                    return Err(self.missing_segment(at, entry, e).await);
                }
                Some(Err(e)) => return Err(e),
            };
            let mut cursor = self.cursor.expect("cursor set");
            let first = if cursor.entry == entry.sequence {
                cursor.record as usize
            } else {
                0
            };
            // Metadata items are sorted by start_index: walk them alongside
            // the records instead of searching per record.
            let mut meta_at = 0usize;
            for (index, data) in segment.records.into_iter().enumerate().skip(first) {
                while entry
                    .metadata
                    .get(meta_at + 1)
                    .is_some_and(|m| m.start_index as usize <= index)
                {
                    meta_at += 1;
                }
                let meta = entry
                    .metadata
                    .get(meta_at)
                    .filter(|m| m.start_index as usize <= index);
                let record = Record {
                    entry_sequence: entry.sequence,
                    index: index as u32,
                    sequence: entry.count.map(|_| entry.sequence + index as u64),
                    data,
                    metadata: meta.map(|m| m.payload.clone()),
                    ingestion_ms: meta.map(|m| m.ingestion_ms),
                };
                if let Err(err) = self.applier.apply(&record).await {
                    cursor = Cursor {
                        entry: entry.sequence,
                        record: index as u32,
                    };
                    self.cursor = Some(cursor);
                    self.cursor_store.save(cursor).await?;
                    // Force a fresh manifest read next time.
                    self.etag = None;
                    return Err(err);
                }
                outcome.applied += 1;
                metrics::counter!("weft_replica_records_applied").increment(1);
            }
            cursor = entry_end(entry);
            self.cursor_store.save(cursor).await?;
            self.cursor = Some(cursor);
            outcome.segments += 1;
        }
        Ok(())
    }

    /// Polls until `shutdown` completes. Transient store errors are retried
    /// after the poll interval; any other error ends the run.
    pub async fn run(&mut self, shutdown: impl Future<Output = ()>) -> Result<()> {
        tokio::pin!(shutdown);
        let mut outage = Outage::new("replica poll");
        loop {
            let result = self.poll().await;
            if result.is_ok() {
                outage.recovered();
            }
            let wait = match result {
                Ok(o) if o.applied > 0 => Duration::ZERO,
                Ok(_) => self.poll_interval,
                Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Indeterminate) => {
                    outage.failed(&e);
                    self.poll_interval
                }
                Err(e) => return Err(e),
            };
            tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = crate::clock::sleep(wait) => {}
            }
        }
    }
}
