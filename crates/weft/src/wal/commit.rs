//! Manifest writes: claiming the log, and committing uploaded segments.
//!
//! This is the one place that reacts to manifest CAS outcomes:
//!
//! * **412 (conflict)**: someone else wrote the manifest. Reload it; a
//!   different epoch means a newer writer claimed the log, so the producer
//!   is *fenced* and commits nothing more (but a batch whose earlier,
//!   ambiguous attempt landed before the newer writer's claim is in the
//!   newer manifest, and is reported committed, not fenced); the same
//!   epoch (a snapshot or
//!   retention pass rewrote it) means re-plan on the fresh copy and retry.
//! * **409 / 5xx / connection errors (transient)**: nothing was written;
//!   back off, reload, retry.
//! * **timeout after sending (ambiguous)**: the write may have landed.
//!   Reload and look for this run's own segment locations among the entries
//!   added since the last known commit: found means committed (resolve the
//!   waiters from the manifest), absent means retry. A batch is never
//!   committed twice.
//! * **403 / 404 / anything else**: give up.
//!
//! Retries are bounded by the producer's [`RetryPolicy`]; a batch that runs
//! out of attempts halts the producer, and every pending waiter gets an
//! error. The reload after *every* failed attempt (not only after 412s) is
//! what makes ambiguity safe: object_store itself may resend a request whose
//! first copy landed and then report the second copy's 412.
//!
//! **Checkpoints** (v5): a commit that would leave the manifest over its
//! checkpoint policy first stores history pages holding its oldest entries
//! (create-only, under names unique to this run), then makes the same CAS
//! drop those entries and name the pages. Only entries committed before the
//! attempt move, so a batch's own entries are always in the manifest where
//! the ambiguity check above looks for them. A page upload that fails only
//! skips the checkpoint for this attempt (the pages are garbage GC
//! collects); the commit itself goes on.
//!
//! Commits are strictly in ordinal order. Uploads report in any order; the
//! committer keeps the early ones until the gap before them closes, then
//! coalesces up to `manifest_batch` contiguous segments into one CAS. If an
//! upload failed, the contiguous prefix before it is committed and then the
//! producer halts with the upload's error.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::{mpsc, oneshot};
use tracing::{Instrument, debug, info, info_span, warn};

use tokio::time::Instant;

use super::Manifest;
use super::flush::{UploadReport, Uploaded};
use super::history::{HistoryReader, PageName, page_path, store_page};
use super::maintenance::ManifestEdit;
use super::manifest::CheckpointPolicy;
use super::manifest_object::{Failed, Loaded, object_written_ms, read_manifest, read_manifest_by};
use super::pipeline::{Halt, Shared, Waiter};
use super::window;
use crate::clock::monotonic_now;
use crate::error::{Error, ErrorKind, Result};
use crate::format::ManifestVersion;
use crate::objects::{Backoff, Outcome, RetryPolicy, StoreOp};

/// How long the read that settles a commit's outcome may take after the
/// commit's own deadline passed.
const RESOLVE_READ: std::time::Duration = std::time::Duration::from_secs(5);

/// The log, claimed: the manifest as written with the new epoch.
#[derive(Debug)]
pub(crate) struct Claimed {
    pub(crate) manifest: Manifest,
    pub(crate) version: UpdateVersion,
    pub(crate) epoch: u64,
    /// When the claim's answer arrived (see [`window`]).
    pub(crate) learned: Instant,
}

/// Claims the log by bumping the manifest epoch with a conditional put
/// (create when absent, `If-Match` otherwise), retrying conflicts,
/// transient and ambiguous failures within `policy`.
///
/// A retry after an ambiguous claim bumps again rather than guessing whether
/// the first bump was this writer's: one more epoch is harmless. Every
/// request is cut off at the policy's deadline.
pub(crate) async fn claim(
    store: &dyn ObjectStore,
    path: &Path,
    want: Option<ManifestVersion>,
    policy: &RetryPolicy,
    seed: u64,
) -> Result<Claimed> {
    let mut backoff = policy.backoff(seed);
    loop {
        let (mut manifest, mode, op) = match read_manifest_by(store, path, &backoff).await {
            Ok(None) => (
                Manifest::new(want.unwrap_or_default()),
                PutMode::Create,
                StoreOp::CreateIfAbsent,
            ),
            Ok(Some(Loaded {
                mut manifest,
                version,
                ..
            })) => {
                if let Some(v) = want {
                    manifest.set_format_version(v).map_err(|e| {
                        e.context(format!(
                            "manifest {path} cannot be written as v{}",
                            v.as_u16()
                        ))
                    })?;
                }
                (manifest, PutMode::Update(version), StoreOp::UpdateIfMatch)
            }
            Err(f) if f.outcome == Outcome::Transient => {
                metrics::counter!("weft_producer_retries_total", "op" => "claim").increment(1);
                if backoff.wait().await {
                    continue;
                }
                return Err(gave_up(f.error, &backoff, "claiming the log"));
            }
            Err(f) => return Err(f.error.context("claiming the log")),
        };
        let epoch = manifest.bump_epoch()?;
        let bytes = manifest.to_bytes()?;
        let result = backoff
            .attempt(store.put_opts(path, PutPayload::from(bytes), PutOptions::from(mode)))
            .await;
        match result {
            Ok(put) => {
                info!(epoch, manifest = %path, "claimed the log");
                return Ok(Claimed {
                    manifest,
                    version: UpdateVersion::from(put),
                    epoch,
                    learned: monotonic_now(),
                });
            }
            Err(e) => {
                let f = Failed::store(op, path, e);
                match f.outcome {
                    Outcome::Conflict => {
                        metrics::counter!("weft_producer_cas_conflicts_total").increment(1)
                    }
                    Outcome::Transient | Outcome::Ambiguous => {
                        metrics::counter!("weft_producer_retries_total", "op" => "claim")
                            .increment(1)
                    }
                    _ => return Err(f.error.context("claiming the log")),
                }
                debug!(outcome = ?f.outcome, "claim attempt failed; re-reading the manifest");
                if !backoff.wait().await {
                    return Err(gave_up(f.error, &backoff, "claiming the log"));
                }
            }
        }
    }
}

fn gave_up(err: Error, backoff: &crate::objects::Backoff, what: &str) -> Error {
    err.context(format!(
        "{what} gave up after {} attempts",
        backoff.attempts()
    ))
}

/// A change to the manifest other than appending segments: retention
/// (dropping superseded entries) and the snapshot pointer. The committer
/// applies it between commits, so it is ordered with them.
#[derive(Debug)]
pub(crate) struct Maintenance {
    pub(crate) edit: ManifestEdit,
    /// When the caller's operation must be over.
    pub(crate) deadline: Instant,
    pub(crate) reply: oneshot::Sender<Result<()>>,
}

/// How a committer checkpoints a v5 manifest into history pages.
#[derive(Debug, Clone)]
pub(crate) struct PageSettings {
    pub(crate) prefix: String,
    pub(crate) run: ulid::Ulid,
    pub(crate) policy: CheckpointPolicy,
    pub(crate) reader: HistoryReader,
}

/// Where an uploaded segment stands in the committer's queue.
#[derive(Debug)]
enum Slot {
    Ready(Uploaded),
    Failed(Error, Vec<Waiter>),
}

/// The committer task's state.
#[derive(Debug)]
pub(crate) struct Committer {
    store: Arc<dyn ObjectStore>,
    path: Path,
    epoch: u64,
    manifest: Manifest,
    version: UpdateVersion,
    /// When `version` was learned (read, or returned by our own CAS): a
    /// CAS referencing a segment may only be conditioned on a version
    /// learned within the commit window of the segment's upload.
    learned: Instant,
    /// `manifest` holds uncommitted appends (a CAS failed); reload first.
    stale: bool,
    /// The newer writer's manifest, once a reload found this producer
    /// fenced: it tells which of our ambiguous commits landed before the
    /// claim. Never written back.
    fenced_by: Option<Manifest>,
    /// `next_sequence` of the last manifest state known to be committed:
    /// entries past it can only be this writer's.
    committed_next: u64,
    shared: Arc<Shared>,
    batch: usize,
    policy: RetryPolicy,
    rng: ChaCha8Rng,
    queue: BTreeMap<u64, Slot>,
    next_ordinal: u64,
    pages: PageSettings,
    /// The number of the next checkpoint plan: part of its pages' names,
    /// so no plan reuses a page an earlier one stored.
    next_plan: u64,
}

impl Committer {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        path: Path,
        claimed: Claimed,
        shared: Arc<Shared>,
        batch: usize,
        policy: RetryPolicy,
        seed: u64,
        pages: PageSettings,
    ) -> Self {
        Committer {
            store,
            path,
            epoch: claimed.epoch,
            committed_next: claimed.manifest.next_sequence(),
            manifest: claimed.manifest,
            version: claimed.version,
            learned: claimed.learned,
            stale: false,
            fenced_by: None,
            shared,
            batch: batch.max(1),
            policy,
            rng: ChaCha8Rng::seed_from_u64(seed),
            queue: BTreeMap::new(),
            next_ordinal: 0,
            pages,
            next_plan: 0,
        }
    }

    /// Moves the manifest's oldest committed entries into history pages
    /// when the policy asks for it, storing the pages first. A page that
    /// cannot be stored leaves the manifest as it was: the checkpoint waits
    /// for a later commit.
    async fn checkpoint(&mut self) {
        if !self.manifest.needs_checkpoint(&self.pages.policy) {
            return;
        }
        let mut trial = self.manifest.clone();
        let (prefix, run, plan) = (self.pages.prefix.clone(), self.pages.run, self.next_plan);
        self.next_plan += 1;
        let name = |level, first, end| {
            let name = PageName {
                level,
                first,
                end,
                run,
                plan,
            };
            page_path(&prefix, &name)
        };
        let uploads = match trial.checkpoint(&self.pages.policy, self.committed_next, name) {
            Ok(uploads) if !uploads.is_empty() => uploads,
            Ok(_) => return,
            Err(e) => {
                warn!(error = %e, "cannot plan a manifest checkpoint");
                return;
            }
        };
        let seed: u64 = self.rng.random();
        let store = self.store.clone();
        let policy = self.policy.clone();
        let results: Vec<Result<()>> =
            futures::stream::iter(uploads.clone().into_iter().enumerate())
                .map(move |(i, u)| {
                    let (store, policy) = (store.clone(), policy.clone());
                    async move { store_page(store.as_ref(), &u, &policy, seed ^ i as u64).await }
                })
                .buffer_unordered(8)
                .collect()
                .await;
        if let Some(err) = results.into_iter().find_map(|r| r.err()) {
            warn!(error = %err, "storing history pages failed; checkpoint postponed");
            return;
        }
        debug!(
            pages = uploads.len(),
            "checkpoint: entries move to history pages"
        );
        self.manifest = trial;
    }

    /// Runs until every upload has reported and the flusher has stopped.
    pub(crate) async fn run(
        mut self,
        mut reports: mpsc::UnboundedReceiver<UploadReport>,
        mut maintenance: mpsc::UnboundedReceiver<Maintenance>,
    ) {
        loop {
            let report = tokio::select! {
                biased;
                report = reports.recv() => report,
                Some(op) = maintenance.recv() => {
                    let result = match self.shared.halt_reason() {
                        Some(halt) => Err(halt.pending_error()),
                        None => self.maintain(&op).await,
                    };
                    let _ = op.reply.send(result);
                    continue;
                }
            };
            let Some(report) = report else { break };
            self.accept(report);
            // Everything that finished meanwhile joins the same commit.
            while let Ok(report) = reports.try_recv() {
                self.accept(report);
            }
            if let Some(halt) = self.shared.halt_reason() {
                self.fail_queue(&halt);
                continue;
            }
            if let Err(halt) = self.commit_ready().await {
                self.shared.halt(halt.clone());
                self.fail_queue(&halt);
            }
        }
        if !self.queue.is_empty() {
            // Only reachable if an upload task vanished without reporting.
            let halt = Halt::from_error(&Error::internal(format!(
                "segment {} was never reported by its upload",
                self.next_ordinal
            )));
            self.shared.halt(halt.clone());
            self.fail_queue(&halt);
        }
        debug!("committer stopped");
    }

    fn accept(&mut self, report: UploadReport) {
        let slot = match report.result {
            Ok(up) => Slot::Ready(up),
            Err((err, waiters)) => Slot::Failed(err, waiters),
        };
        self.queue.insert(report.ordinal, slot);
    }

    fn fail_queue(&mut self, halt: &Halt) {
        for (_, slot) in std::mem::take(&mut self.queue) {
            let waiters = match slot {
                Slot::Ready(up) => up.waiters,
                Slot::Failed(_, waiters) => waiters,
            };
            for w in waiters {
                w.resolve(Err(halt.pending_error()));
            }
        }
    }

    /// Commits every contiguous ready segment from `next_ordinal` on.
    async fn commit_ready(&mut self) -> std::result::Result<(), Halt> {
        loop {
            match self.queue.first_key_value() {
                Some((&ordinal, _)) if ordinal == self.next_ordinal => {}
                _ => return Ok(()),
            }
            if let Some(Slot::Failed(..)) = self.queue.get(&self.next_ordinal) {
                let Some(Slot::Failed(err, waiters)) = self.queue.remove(&self.next_ordinal) else {
                    unreachable!("checked just above");
                };
                let halt = Halt::from_error(&err.context(format!(
                    "the log holds every segment before ordinal {}; the producer halted",
                    self.next_ordinal
                )));
                for w in waiters {
                    w.resolve(Err(halt.pending_error()));
                }
                return Err(halt);
            }
            let mut batch = Vec::new();
            while batch.len() < self.batch {
                let next = self.next_ordinal + batch.len() as u64;
                match self.queue.get(&next) {
                    Some(Slot::Ready(_)) => {}
                    _ => break,
                }
                if let Some(Slot::Ready(up)) = self.queue.remove(&next) {
                    batch.push(up);
                }
            }
            let count = batch.len() as u64;
            self.commit_batch(batch).await?;
            self.next_ordinal += count;
        }
    }

    /// One CAS (with retries) for `batch`; resolves its waiters either way.
    async fn commit_batch(&mut self, batch: Vec<Uploaded>) -> std::result::Result<(), Halt> {
        let first = batch.first().map_or(0, |u| u.ordinal);
        let span = info_span!("commit", first_ordinal = first, segments = batch.len());
        let started = monotonic_now();
        let deadline = batch
            .iter()
            .map(|u| u.deadline)
            .min()
            .unwrap_or_else(monotonic_now);
        let result = self
            .commit_with_retries(&batch, deadline)
            .instrument(span)
            .await;
        match result {
            Ok(sequences) => {
                metrics::histogram!("weft_producer_commit_latency_seconds")
                    .record(started.elapsed().as_secs_f64());
                metrics::counter!("weft_producer_commits_total").increment(1);
                let record_numbered = self.manifest.version().has_record_counts();
                for (up, seq) in batch.into_iter().zip(sequences) {
                    for w in up.waiters {
                        let s = if record_numbered {
                            seq + u64::from(w.start_index)
                        } else {
                            seq
                        };
                        w.resolve(Ok(s));
                    }
                }
                Ok(())
            }
            Err(err) => {
                if err.kind() == ErrorKind::Fenced {
                    metrics::counter!("weft_producer_fenced_total").increment(1);
                }
                warn!(error = %err, first_ordinal = first, "manifest commit failed; halting");
                let halt = Halt::from_error(&err);
                for up in batch {
                    for w in up.waiters {
                        w.resolve(Err(halt.pending_error()));
                    }
                }
                Err(halt)
            }
        }
    }

    /// Returns the manifest sequence of each segment in `batch`. Gives up
    /// at `deadline` (the earliest of its appends'), and before it would
    /// condition a CAS on a manifest version learned past the commit window
    /// of a segment's upload.
    async fn commit_with_retries(
        &mut self,
        batch: &[Uploaded],
        deadline: Instant,
    ) -> Result<Vec<u64>> {
        let mut backoff = self.policy.backoff(self.rng.random()).until(deadline);
        let oldest = batch.iter().map(|u| u.started).min();
        // The versions unanswered attempts were conditioned on: such an
        // attempt may still be applied later (a server can finish a request
        // its client gave up on), as long as the manifest is at that version.
        let mut unanswered: Vec<UpdateVersion> = Vec::new();
        let mut last: Option<Failed> = None;
        loop {
            if self.stale {
                match self.reload_by(&backoff).await {
                    Ok(()) => {
                        if let Some(seqs) = self.find_own(batch)? {
                            debug!("an earlier attempt had committed the batch");
                            self.committed_next = self.manifest.next_sequence();
                            return Ok(seqs);
                        }
                    }
                    Err(f) if matches!(f.outcome, Outcome::Transient | Outcome::Ambiguous) => {
                        metrics::counter!("weft_producer_retries_total", "op" => "reload")
                            .increment(1);
                        if backoff.wait().await {
                            continue;
                        }
                        // Whether an earlier attempt landed is unknown.
                        return Err(Error::new(
                            ErrorKind::Indeterminate,
                            format!(
                                "manifest commit: cannot re-read {} to learn whether the \
                                 commit landed ({} attempts)",
                                self.path,
                                backoff.attempts()
                            ),
                        )
                        .with_source(f.error));
                    }
                    Err(f) => return self.after_failed_reload(batch, f.error).await,
                }
            }
            if let Some(oldest) = oldest
                && let Err(late) = oldest.check(self.learned, "a segment of this commit")
            {
                let f = last.take().unwrap_or(Failed {
                    outcome: Outcome::Transient,
                    error: late,
                });
                return self.give_up(batch, &unanswered, f, &backoff).await;
            }
            if backoff.expired() {
                let f = last
                    .take()
                    .unwrap_or_else(|| Failed::out_of_time("the manifest commit"));
                return self.give_up(batch, &unanswered, f, &backoff).await;
            }
            let mut sequences = Vec::with_capacity(batch.len());
            self.stale = true;
            for up in batch {
                let seq = self
                    .manifest
                    .append(up.location.clone(), up.metadata.clone(), up.record_count)
                    .map_err(|e| e.context("manifest commit"))?;
                sequences.push(seq);
            }
            self.checkpoint().await;
            let bytes = self.manifest.to_bytes()?;
            let attempted = self.version.clone();
            let mode = PutMode::Update(attempted.clone());
            let result = backoff
                .attempt(self.store.put_opts(
                    &self.path,
                    PutPayload::from(bytes),
                    PutOptions::from(mode),
                ))
                .await;
            let f = match result {
                Ok(put) => {
                    self.version = UpdateVersion::from(put);
                    self.learned = monotonic_now();
                    self.stale = false;
                    self.committed_next = self.manifest.next_sequence();
                    return Ok(sequences);
                }
                Err(e) => Failed::store(StoreOp::UpdateIfMatch, &self.path, e),
            };
            if f.outcome == Outcome::Ambiguous {
                unanswered.push(attempted);
            }
            match f.outcome {
                Outcome::Conflict => {
                    metrics::counter!("weft_producer_cas_conflicts_total").increment(1)
                }
                Outcome::Transient | Outcome::Ambiguous => {
                    metrics::counter!("weft_producer_retries_total", "op" => "commit").increment(1)
                }
                _ => return Err(f.error.context("manifest commit")),
            }
            debug!(outcome = ?f.outcome, "manifest CAS failed; re-reading");
            if !backoff.wait().await {
                return self.give_up(batch, &unanswered, f, &backoff).await;
            }
            last = Some(f);
        }
    }

    /// The commit of `batch` stops trying (out of attempts, time, or
    /// commit window); `last` is the last failure. One final read decides
    /// what the waiters are told: committed after all, certainly not
    /// (`Unavailable`, or `Conflict` after a 412 storm), or unknown
    /// (`Indeterminate`).
    async fn give_up(
        &mut self,
        batch: &[Uploaded],
        unanswered: &[UpdateVersion],
        last: Failed,
        backoff: &Backoff,
    ) -> Result<Vec<u64>> {
        let attempts = backoff.attempts();
        let reload = tokio::time::timeout(RESOLVE_READ, self.reload())
            .await
            .unwrap_or_else(|_| Err(Failed::out_of_time("re-reading the manifest")));
        match reload {
            Ok(_) => {
                if let Some(seqs) = self.find_own(batch)? {
                    self.committed_next = self.manifest.next_sequence();
                    return Ok(seqs);
                }
                if unanswered.contains(&self.version) {
                    // Nothing landed so far, but an unanswered attempt
                    // against this very version still can.
                    return Err(Error::new(
                        ErrorKind::Indeterminate,
                        format!(
                            "manifest commit gave up after {attempts} attempts; an unanswered \
                             attempt may still be applied"
                        ),
                    )
                    .with_source(last.error));
                }
                // The reload proves nothing landed, and the manifest moved
                // past every unanswered attempt's version (or there was
                // none), so none can land any more.
                let kind = match last.outcome {
                    Outcome::Conflict => ErrorKind::Conflict,
                    _ => ErrorKind::Unavailable,
                };
                return Err(Error::new(
                    kind,
                    format!(
                        "manifest commit gave up after {attempts} attempts; nothing of the \
                         batch was committed"
                    ),
                )
                .with_source(last.error));
            }
            Err(reload) if reload.error.kind() == ErrorKind::Fenced => {
                return self.after_failed_reload(batch, reload.error).await;
            }
            Err(_) => {}
        }
        let kind = if unanswered.is_empty() {
            last.outcome.error_kind()
        } else {
            ErrorKind::Indeterminate
        };
        Err(Error::new(
            kind,
            format!("manifest commit gave up after {attempts} attempts"),
        )
        .with_source(last.error))
    }

    /// Applies a maintenance change with one CAS, retrying conflicts and
    /// transient failures on a fresh copy (the change is idempotent, so an
    /// ambiguous attempt that landed is harmless to repeat), until the
    /// caller's deadline.
    ///
    /// An edit that makes an object referenced (a snapshot pointer) is
    /// checked first: the object must exist, and each attempt is made on a
    /// freshly read version written within the commit window of the
    /// object's own stamp (see [`window`]).
    async fn maintain(&mut self, op: &Maintenance) -> Result<()> {
        let mut backoff = self.policy.backoff(self.rng.random()).until(op.deadline);
        let referenced = match op.edit.new_reference() {
            Some(location) => Some((
                location.to_owned(),
                object_written_ms(self.store.as_ref(), location, &backoff).await?,
            )),
            None => None,
        };
        // Its stamp is needed: read the version to edit afresh.
        let mut written_ms = None;
        if referenced.is_some() {
            self.stale = true;
        }
        loop {
            if self.stale {
                match self.reload_stamped(&backoff).await {
                    Ok(stamp) => written_ms = Some(stamp),
                    Err(f) if matches!(f.outcome, Outcome::Transient | Outcome::Ambiguous) => {
                        if backoff.wait().await {
                            continue;
                        }
                        return Err(gave_up(f.error, &backoff, "manifest maintenance"));
                    }
                    Err(f) => return Err(f.error),
                }
            }
            // Checked on a copy: a refused edit leaves the manifest as it was.
            let mut edited = self.manifest.clone();
            op.edit
                .apply_reading_history(&mut edited, &self.pages.reader)
                .await?;
            if edited == self.manifest {
                // Already in effect: writing the same state again would
                // repeat a manifest version (see `maintenance`).
                return Ok(());
            }
            if let (Some((location, object_ms)), Some(manifest_ms)) = (&referenced, written_ms) {
                window::check_stamps(manifest_ms, *object_ms, &format!("object {location}"))?;
            }
            self.manifest = edited;
            self.stale = true;
            let bytes = self.manifest.to_bytes()?;
            let mode = PutMode::Update(self.version.clone());
            match backoff
                .attempt(self.store.put_opts(
                    &self.path,
                    PutPayload::from(bytes),
                    PutOptions::from(mode),
                ))
                .await
            {
                Ok(put) => {
                    self.version = UpdateVersion::from(put);
                    self.learned = monotonic_now();
                    self.stale = false;
                    self.committed_next = self.manifest.next_sequence();
                    return Ok(());
                }
                Err(e) => {
                    let f = Failed::store(StoreOp::UpdateIfMatch, &self.path, e);
                    if !matches!(
                        f.outcome,
                        Outcome::Conflict | Outcome::Transient | Outcome::Ambiguous
                    ) || !backoff.wait().await
                    {
                        return Err(f.error.context("manifest maintenance"));
                    }
                }
            }
        }
    }

    /// [`reload`](Self::reload) within `backoff`'s deadline.
    async fn reload_by(&mut self, backoff: &Backoff) -> std::result::Result<(), Failed> {
        self.reload_stamped(backoff).await.map(|_| ())
    }

    /// Reloads within `backoff`'s deadline; returns the version's stamp.
    async fn reload_stamped(&mut self, backoff: &Backoff) -> std::result::Result<i64, Failed> {
        backoff
            .limit(self.reload())
            .await
            .unwrap_or_else(|| Err(Failed::out_of_time("re-reading the manifest")))
    }

    /// Re-reads the manifest and checks the epoch; returns the stamp of the
    /// version read.
    async fn reload(&mut self) -> std::result::Result<i64, Failed> {
        let loaded = match read_manifest(self.store.as_ref(), &self.path).await? {
            Some(l) => l,
            None => {
                return Err(Failed {
                    outcome: Outcome::Fatal,
                    error: Error::new(
                        ErrorKind::NotFound,
                        format!(
                            "manifest {} disappeared while this producer owned it",
                            self.path
                        ),
                    ),
                });
            }
        };
        let theirs = loaded.manifest.epoch();
        if theirs != self.epoch {
            self.fenced_by = Some(loaded.manifest);
            return Err(Failed {
                outcome: Outcome::Fatal,
                error: Error::fenced(self.epoch, theirs),
            });
        }
        self.manifest = loaded.manifest;
        self.version = loaded.version;
        self.learned = monotonic_now();
        self.stale = false;
        Ok(loaded.written_ms)
    }

    /// A reload failed with `err`. When it found this producer fenced, an
    /// earlier attempt of `batch` may still have landed before the newer
    /// writer's claim: then the batch is committed (it is in the log the
    /// newer writer continues) and its sequences are returned; otherwise
    /// `err`.
    async fn after_failed_reload(&self, batch: &[Uploaded], err: Error) -> Result<Vec<u64>> {
        if err.kind() == ErrorKind::Fenced
            && let Some(newer) = &self.fenced_by
            && let Some(seqs) = self.find_own_in_newer(newer, batch).await?
        {
            info!(
                epoch = self.epoch,
                theirs = newer.epoch(),
                "fenced, but the batch had landed before the newer writer's claim"
            );
            return Ok(seqs);
        }
        Err(err)
    }

    /// The sequences of `batch`'s segments if the (freshly reloaded)
    /// manifest already lists them. Only this writer checkpoints under its
    /// epoch, and never its uncommitted entries, so they are in the
    /// manifest's own entries if anywhere.
    fn find_own(&self, batch: &[Uploaded]) -> Result<Option<Vec<u64>>> {
        find_own_in(self.manifest.entries_from(self.committed_next), batch)
    }

    /// [`find_own`](Self::find_own) in the manifest of the writer that
    /// fenced this one: its checkpoints may have moved our landed batch
    /// into history pages, so they are read too.
    async fn find_own_in_newer(
        &self,
        newer: &Manifest,
        batch: &[Uploaded],
    ) -> Result<Option<Vec<u64>>> {
        let entries = self
            .pages
            .reader
            .entries_from(
                newer.history(),
                newer.entries(),
                self.committed_next,
                batch.len(),
            )
            .await?;
        find_own_in(&entries, batch)
    }
}

/// The sequences of `batch`'s segments if `entries` (those from the last
/// known committed `next_sequence` on) list them (only this run can have
/// added those locations, so a match is this run's own commit).
fn find_own_in(
    entries: &[crate::format::ManifestEntry],
    batch: &[Uploaded],
) -> Result<Option<Vec<u64>>> {
    let since: HashMap<&str, u64> = entries
        .iter()
        .map(|e| (e.location.as_str(), e.sequence))
        .collect();
    let found: Vec<Option<u64>> = batch
        .iter()
        .map(|u| since.get(u.location.as_str()).copied())
        .collect();
    match found.iter().filter(|f| f.is_some()).count() {
        0 => Ok(None),
        n if n == batch.len() => Ok(Some(found.into_iter().flatten().collect())),
        n => Err(Error::internal(format!(
            "manifest lists {n} of the {} segments of one commit",
            batch.len()
        ))),
    }
}
