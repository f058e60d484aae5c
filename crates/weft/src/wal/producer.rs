//! The producer: the one epoch-fenced writer of a log in a bucket.
//!
//! ```text
//! append ─► buffer ─(interval | flush_bytes | close)─► flusher: pack segments
//!                                                         │  (ordinals)
//!                          uploads, concurrent, any order ▼
//!                                  committer: ordinal order, ≤ manifest_batch
//!                                  segments per manifest CAS ─► Durability
//! ```
//!
//! Opening claims the log: the manifest's epoch is bumped with a conditional
//! put. A producer whose later commit finds a different epoch was fenced by
//! a newer writer; it halts and commits nothing more.
//!
//! The flusher and the committer are separate tasks, so the uploads of one
//! flush overlap the manifest commit of the previous one. Backpressure is an
//! in-flight byte budget: an append waits while the bytes of appends not yet
//! committed (or failed) fill it.
//!
//! # Sequences
//!
//! [`Durability::wait`] returns the sequence the manifest gave the append:
//!
//! * manifest **v3/v4** (record-numbered, the default): the record-level
//!   sequence of the append's *first* record; its `n` records hold
//!   `seq..seq+n`, in the order given.
//! * manifest **v1/v2** (segment-numbered): the ordinal of the segment
//!   entry holding the append; every append packed into the same segment
//!   gets the same number, and records have no sequence of their own.
//!
//! An append is never split across segments (a group larger than
//! `segment_max_bytes` gets a segment of its own), so either way the whole
//! append is in one segment, in order, contiguous.
//!
//! # Errors and halting
//!
//! A producer halts for good when it is fenced, when a manifest commit or a
//! segment upload runs out of retries, or on a store error retrying cannot
//! fix. Every append that was pending then fails (with the cause's kind:
//! [`ErrorKind::Fenced`], [`ErrorKind::Unavailable`], [`ErrorKind::Conflict`]
//! after a 412 storm, [`ErrorKind::Indeterminate`] when the outcome could not
//! be learned, ...), and every later append fails with
//! [`ErrorKind::Fenced`] if it was fenced, [`ErrorKind::Closed`] otherwise.
//! No waiter is left hanging, also across [`Producer::close`] and drop.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;
use ulid::Ulid;

use super::commit::{Committer, Maintenance, PageSettings, claim};
use super::flush::{FlushSettings, SegmentNamer, run_flusher};
use super::history::{self, HistoryReader};
use super::lease::{self, LeaseIdentity, LeaseKeeper};
use super::maintenance::ManifestEdit;
use super::manifest::CheckpointPolicy;
use super::pipeline::{Group, Halt, Shared};
use crate::clock::{self, Clock};
use crate::error::{Error, ErrorKind, Result};
use crate::format::{Compression, ManifestVersion, SegmentVersion, SnapshotPointer};
use crate::objects::RetryPolicy;

/// The producer's plain settings (serde-loadable); injected parts (store,
/// clock, seed) go through [`ProducerBuilder`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ProducerOptions {
    /// Flush at least this often while anything is buffered.
    pub flush_interval: Duration,
    /// Flush early once this many bytes are buffered (capped at
    /// `max_inflight_bytes`, which the buffer can never exceed).
    pub flush_bytes: usize,
    /// Seal a segment before it grows past this many record bytes (a single
    /// append larger than this gets a segment of its own).
    pub segment_max_bytes: usize,
    /// Segment uploads in flight at once.
    pub upload_concurrency: usize,
    /// Bytes of appends accepted but not yet committed; appends wait while
    /// it is spent. One append may not exceed it (at most 4 GiB).
    pub max_inflight_bytes: usize,
    /// Segments coalesced into one manifest CAS, at most.
    pub manifest_batch: usize,
    /// Retries of claims, uploads and manifest commits, and the deadline
    /// of every append and edit ([`RetryPolicy::deadline`]): an append is
    /// settled — committed, or failed — within it.
    pub retry: RetryPolicy,
    /// When a v5 manifest moves older entries into history pages.
    pub checkpoint: CheckpointPolicy,
    /// How often the writer lease is renewed (see `super::lease`): an
    /// opening writer that finds the lease watches it for three such
    /// periods. At most a third of [`lease::MAX_WATCH`].
    pub lease_renew_every: Duration,
}

setters! {
    ProducerOptions {
        with_flush_interval => flush_interval: Duration,
        with_flush_bytes => flush_bytes: usize,
        with_segment_max_bytes => segment_max_bytes: usize,
        with_upload_concurrency => upload_concurrency: usize,
        with_max_inflight_bytes => max_inflight_bytes: usize,
        with_manifest_batch => manifest_batch: usize,
        with_retry => retry: RetryPolicy,
        with_checkpoint => checkpoint: CheckpointPolicy,
        with_lease_renew_every => lease_renew_every: Duration,
    }
}

impl Default for ProducerOptions {
    fn default() -> Self {
        ProducerOptions {
            flush_interval: Duration::from_millis(50),
            flush_bytes: 8 << 20,
            segment_max_bytes: 8 << 20,
            upload_concurrency: 8,
            // Room for two flushes' worth of full segments in flight
            // (2 x upload_concurrency x segment_max_bytes): with less, one
            // flush's uploads spend the budget and appenders stall until
            // its commit frees it, so uploads and commits stop overlapping.
            max_inflight_bytes: 128 << 20,
            manifest_batch: 64,
            retry: RetryPolicy::default(),
            checkpoint: CheckpointPolicy::default(),
            lease_renew_every: lease::DEFAULT_RENEW_EVERY,
        }
    }
}

impl ProducerOptions {
    fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::invalid_input(format!("producer options: {what}")));
        if self.flush_interval.is_zero() {
            return bad("flush_interval must be positive");
        }
        if self.flush_bytes == 0 || self.segment_max_bytes == 0 {
            return bad("flush_bytes and segment_max_bytes must be positive");
        }
        if self.upload_concurrency == 0 || self.manifest_batch == 0 {
            return bad("upload_concurrency and manifest_batch must be at least 1");
        }
        if self.max_inflight_bytes == 0 || self.max_inflight_bytes > u32::MAX as usize {
            return bad("max_inflight_bytes must be between 1 and 4 GiB");
        }
        if self.retry.max_attempts == 0 {
            return bad("retry.max_attempts must be at least 1");
        }
        if self.retry.deadline.is_zero() {
            return bad("retry.deadline must be positive");
        }
        if self.lease_renew_every.is_zero() || self.lease_renew_every * 3 > lease::MAX_WATCH {
            return bad(&format!(
                "lease_renew_every must be positive and at most {} s (a third of the longest \
                 an opening writer watches the lease)",
                (lease::MAX_WATCH / 3).as_secs()
            ));
        }
        self.checkpoint.validate()
    }
}

/// Builds and opens a [`Producer`].
#[derive(Debug)]
pub struct ProducerBuilder {
    store: Arc<dyn ObjectStore>,
    manifest_path: String,
    segment_prefix: String,
    options: ProducerOptions,
    compression: Compression,
    segment_version: SegmentVersion,
    manifest_version: Option<ManifestVersion>,
    history_prefix: Option<String>,
    clock: Arc<dyn Clock>,
    seed: Option<u64>,
    take_over: bool,
    holder: Option<String>,
}

impl ProducerBuilder {
    /// Claim the log even when its writer lease shows a live writer,
    /// fencing it (a deliberate failover). Without it (the default),
    /// [`open`](Self::open) waits to see whether the lease's writer is
    /// alive and fails with `Locked` if it is (see `super::lease`).
    pub fn with_take_over(mut self, take_over: bool) -> Self {
        self.take_over = take_over;
        self
    }

    /// How this writer names itself in its lease (shown to whoever it would
    /// lock out); the process id is added. Default: `weft writer`.
    pub fn with_holder(mut self, name: impl Into<String>) -> Self {
        self.holder = Some(name.into());
        self
    }

    /// See [`ProducerOptions::lease_renew_every`].
    pub fn with_lease_renewal(mut self, every: Duration) -> Self {
        self.options.lease_renew_every = every;
        self
    }

    /// Replaces all plain settings at once.
    pub fn with_options(mut self, options: ProducerOptions) -> Self {
        self.options = options;
        self
    }

    /// See [`ProducerOptions::flush_interval`].
    pub fn with_flush_interval(mut self, interval: Duration) -> Self {
        self.options.flush_interval = interval;
        self
    }

    /// See [`ProducerOptions::flush_bytes`].
    pub fn with_flush_bytes(mut self, bytes: usize) -> Self {
        self.options.flush_bytes = bytes;
        self
    }

    /// See [`ProducerOptions::segment_max_bytes`].
    pub fn with_segment_max_bytes(mut self, bytes: usize) -> Self {
        self.options.segment_max_bytes = bytes;
        self
    }

    /// See [`ProducerOptions::upload_concurrency`].
    pub fn with_upload_concurrency(mut self, uploads: usize) -> Self {
        self.options.upload_concurrency = uploads;
        self
    }

    /// See [`ProducerOptions::max_inflight_bytes`].
    pub fn with_max_inflight_bytes(mut self, bytes: usize) -> Self {
        self.options.max_inflight_bytes = bytes;
        self
    }

    /// See [`ProducerOptions::manifest_batch`].
    pub fn with_manifest_batch(mut self, segments: usize) -> Self {
        self.options.manifest_batch = segments;
        self
    }

    /// See [`ProducerOptions::retry`].
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.options.retry = retry;
        self
    }

    /// See [`ProducerOptions::checkpoint`].
    pub fn with_checkpoint_policy(mut self, policy: CheckpointPolicy) -> Self {
        self.options.checkpoint = policy;
        self
    }

    /// Where a v5 manifest's history pages go (default:
    /// `history::default_prefix` of the manifest path, `history` next to
    /// it).
    pub fn with_history_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.history_prefix = Some(prefix.into());
        self
    }

    /// How segment record blocks are stored (default: uncompressed).
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// The segment layout to write (default: v2, checksummed).
    pub fn with_segment_version(mut self, version: SegmentVersion) -> Self {
        self.segment_version = version;
        self
    }

    /// The manifest layout to write. Without this, a new manifest is v5 and
    /// an existing one keeps its version; with it, an existing manifest is
    /// converted when claimed (v1/v2 → v3..v5 and v3/v4 → v5 always work;
    /// v5 → v4 only while no history page holds entries; v3..v5 → v1/v2
    /// only while no entry is record-numbered).
    pub fn with_manifest_version(mut self, version: ManifestVersion) -> Self {
        self.manifest_version = Some(version);
        self
    }

    /// The clock for ingestion timestamps and the run id (default: system).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Seeds the run id's random part and every backoff jitter, for
    /// reproducible tests. Without it the seed comes from the operating
    /// system, which keeps run ids (and so segment names) unique across
    /// processes; a fixed seed with a fixed clock repeats run ids, so use it
    /// only where each run has its own prefix.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Claims the log and starts the producer's tasks. Needs a tokio
    /// runtime.
    ///
    /// Unless [taking over](Self::with_take_over), first makes sure no live
    /// writer holds the log's lease: a lease nobody renews (its writer
    /// crashed) costs up to three renewal periods of waiting; a released
    /// one, nothing. After the claim it writes its own lease and renews it
    /// until it closes or halts.
    ///
    /// Errors: [`ErrorKind::Locked`] when a live writer holds the lease;
    /// [`ErrorKind::InvalidInput`] for bad settings or paths;
    /// [`ErrorKind::PermissionDenied`] when the store refuses the
    /// credentials; [`ErrorKind::NotFound`] when the bucket does not exist;
    /// [`ErrorKind::Unavailable`] when the store cannot be reached within
    /// the retry policy (or the claim kept losing: [`ErrorKind::Conflict`]);
    /// [`ErrorKind::Corrupt`] for an unreadable manifest.
    pub async fn open(self) -> Result<Producer> {
        self.options.validate()?;
        let manifest_path = Path::parse(self.manifest_path.trim_matches('/')).map_err(|e| {
            Error::invalid_input(format!(
                "manifest path {:?} is not valid",
                self.manifest_path
            ))
            .with_source(e)
        })?;
        if manifest_path.as_ref().is_empty() {
            return Err(Error::invalid_input("manifest path is empty"));
        }
        let prefix = self.segment_prefix.trim_matches('/');
        if !prefix.is_empty() {
            Path::parse(prefix).map_err(|e| {
                Error::invalid_input(format!(
                    "segment prefix {:?} is not valid",
                    self.segment_prefix
                ))
                .with_source(e)
            })?;
        }
        let seed = self.seed.unwrap_or_else(crate::random::os_seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let run_id = Ulid::from_parts(self.clock.now_ms(), rng.random());

        let cfg = &self.options;
        let identity = LeaseIdentity {
            run: run_id,
            epoch: lease::RESERVING_EPOCH,
            holder: format!(
                "{} (pid {})",
                self.holder.as_deref().unwrap_or("weft writer"),
                std::process::id()
            ),
            renew_every: cfg.lease_renew_every,
        };
        // Unless taking over, the lease is taken first, by compare-and-set
        // over the lease judged free: of two plain opens racing, the loser
        // is `Locked` and claims nothing, so it fences nobody.
        if !self.take_over {
            lease::reserve(
                self.store.as_ref(),
                &manifest_path,
                &identity,
                self.clock.as_ref(),
                &cfg.retry,
            )
            .await?;
        }
        let claimed = claim(
            self.store.as_ref(),
            &manifest_path,
            self.manifest_version,
            &cfg.retry,
            rng.random(),
        )
        .await;
        let claimed = match claimed {
            Ok(c) => c,
            Err(e) => {
                if !self.take_over {
                    lease::unreserve(
                        self.store.as_ref(),
                        &manifest_path,
                        &identity,
                        self.clock.as_ref(),
                        &cfg.retry,
                    )
                    .await;
                }
                return Err(e);
            }
        };
        let epoch = claimed.epoch;
        let manifest_version = claimed.manifest.version();

        let flush_threshold = cfg.flush_bytes.min(cfg.max_inflight_bytes);
        let shared = Arc::new(Shared::new(cfg.max_inflight_bytes, flush_threshold));
        let lease = LeaseKeeper::start(
            self.store.clone(),
            &manifest_path,
            LeaseIdentity { epoch, ..identity },
            self.clock.clone(),
            cfg.retry.clone(),
            shared.clone(),
        )
        .await
        .map_err(|e| e.context("the log was claimed, but its writer lease could not be written"))?;
        let (close_tx, close_rx) = mpsc::unbounded_channel();
        let (report_tx, report_rx) = mpsc::unbounded_channel();
        let (maintenance_tx, maintenance_rx) = mpsc::unbounded_channel();
        let history_prefix = self
            .history_prefix
            .map(|p| p.trim_matches('/').to_owned())
            .unwrap_or_else(|| history::default_prefix(manifest_path.as_ref()));
        let pages = PageSettings {
            prefix: history_prefix,
            run: run_id,
            policy: cfg.checkpoint.clone(),
            reader: HistoryReader::new(self.store.clone(), 1 << 20),
        };
        let committer = Committer::new(
            self.store.clone(),
            manifest_path.clone(),
            claimed,
            shared.clone(),
            cfg.manifest_batch,
            cfg.retry.clone(),
            rng.random(),
            pages,
        );
        let committer = tokio::spawn(committer.run(report_rx, maintenance_rx));
        let settings = FlushSettings {
            flush_interval: cfg.flush_interval,
            segment_max_bytes: cfg.segment_max_bytes,
            compression: self.compression,
            segment_version: self.segment_version,
            retry: cfg.retry.clone(),
            seed: rng.random(),
        };
        let flusher = tokio::spawn(run_flusher(
            shared.clone(),
            self.store.clone(),
            settings,
            SegmentNamer::new(prefix, run_id),
            close_rx,
            report_tx,
            Arc::new(Semaphore::new(cfg.upload_concurrency)),
        ));
        Ok(Producer {
            shared,
            close_tx,
            maintenance_tx,
            tasks: tokio::sync::Mutex::new(Some((flusher, committer))),
            clock: self.clock,
            epoch,
            run_id,
            manifest_path,
            manifest_version,
            max_append_bytes: cfg.max_inflight_bytes,
            deadline: cfg.retry.deadline,
            lease,
            closed: Mutex::new(None),
        })
    }
}

/// The writer of a log in a bucket. Share it behind an `Arc`; every method
/// takes `&self`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> weft::Result<()> {
/// use std::sync::Arc;
/// use bytes::Bytes;
/// use object_store::memory::InMemory;
/// use weft::wal::Producer;
///
/// let store = Arc::new(InMemory::new());
/// let producer = Producer::builder(store, "wal/manifest", "wal/seg").open().await?;
/// let first = producer.append(vec![Bytes::from("a"), Bytes::from("b")], None).await?;
/// let second = producer.append(vec![Bytes::from("c")], None).await?;
/// assert_eq!(first.wait().await?, 0);
/// assert_eq!(second.wait().await?, 2);
/// producer.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Producer {
    shared: Arc<Shared>,
    close_tx: mpsc::UnboundedSender<()>,
    maintenance_tx: mpsc::UnboundedSender<Maintenance>,
    tasks: tokio::sync::Mutex<Option<(JoinHandle<()>, JoinHandle<()>)>>,
    clock: Arc<dyn Clock>,
    epoch: u64,
    run_id: Ulid,
    manifest_path: Path,
    manifest_version: ManifestVersion,
    max_append_bytes: usize,
    /// How long an append or edit may take ([`RetryPolicy::deadline`]).
    deadline: Duration,
    /// The writer lease, renewed while the producer runs.
    lease: LeaseKeeper,
    /// What `close` returned, for repeated calls.
    closed: Mutex<Option<std::result::Result<(), Halt>>>,
}

impl Producer {
    /// A builder for a producer writing the manifest at `manifest_path` and
    /// segments under `segment_prefix` of `store`.
    pub fn builder(
        store: Arc<dyn ObjectStore>,
        manifest_path: impl Into<String>,
        segment_prefix: impl Into<String>,
    ) -> ProducerBuilder {
        ProducerBuilder {
            store,
            manifest_path: manifest_path.into(),
            segment_prefix: segment_prefix.into(),
            options: ProducerOptions::default(),
            compression: Compression::default(),
            segment_version: SegmentVersion::default(),
            manifest_version: None,
            history_prefix: None,
            clock: clock::system(),
            seed: None,
            take_over: false,
            holder: None,
        }
    }

    /// Appends one group of records, with optional metadata attached to the
    /// group, and returns a handle to wait for its commit. Waits while the
    /// in-flight byte budget is spent.
    ///
    /// An empty group is refused: it would have no sequence to report.
    ///
    /// Errors: [`ErrorKind::InvalidInput`] for an empty group, a record over
    /// 4 GiB, or a group larger than `max_inflight_bytes` (counting 4 bytes
    /// of framing per record); [`ErrorKind::Fenced`] after the producer was
    /// fenced; [`ErrorKind::Closed`] after it was closed or halted.
    pub async fn append(&self, records: Vec<Bytes>, meta: Option<Bytes>) -> Result<Durability> {
        if records.is_empty() {
            return Err(Error::invalid_input("an append needs at least one record"));
        }
        let mut bytes: usize = 0;
        for r in &records {
            if r.len() > u32::MAX as usize {
                return Err(Error::invalid_input("a record may hold at most 4 GiB"));
            }
            bytes = bytes.saturating_add(4 + r.len());
        }
        if bytes > self.max_append_bytes {
            return Err(Error::invalid_input(format!(
                "an append of {bytes} bytes exceeds the in-flight budget of {} bytes",
                self.max_append_bytes
            )));
        }
        let permit = self.shared.reserve(bytes).await?;
        let (reply, rx) = oneshot::channel();
        let count = records.len() as u64;
        self.shared.push(Group {
            records,
            meta,
            bytes,
            ingestion_ms: i64::try_from(self.clock.now_ms()).unwrap_or(i64::MAX),
            deadline: self.deadline_from_now(),
            reply,
            permit,
        })?;
        metrics::counter!("weft_producer_appends_total").increment(1);
        metrics::counter!("weft_producer_records_total").increment(count);
        metrics::counter!("weft_producer_bytes_total").increment(bytes as u64);
        Ok(Durability {
            rx,
            shared: self.shared.clone(),
        })
    }

    /// Flushes what is buffered, waits until every accepted append is
    /// committed or failed, and stops. Later appends fail with
    /// [`ErrorKind::Closed`]. Calling it again returns the same result.
    ///
    /// Errors: the reason the producer halted, if it halted before or while
    /// closing ([`ErrorKind::Fenced`], [`ErrorKind::Unavailable`], ...).
    pub async fn close(&self) -> Result<()> {
        // Held to the end, so a concurrent second `close` waits for the
        // first instead of returning before the log is flushed.
        let mut tasks = self.tasks.lock().await;
        if let Some((flusher, committer)) = tasks.take() {
            self.shared.start_closing();
            // The flusher may already have stopped after a halt.
            let _ = self.close_tx.send(());
            let joined = [flusher.await, committer.await];
            let outcome = match self.shared.halt_reason() {
                Some(h) if h.kind() != ErrorKind::Closed => Err(h),
                _ => Ok(()),
            };
            self.shared.halt(Halt::closed());
            for j in joined {
                if let Err(e) = j {
                    let h = Halt::from_error(
                        &Error::internal("a producer task panicked").with_source(e),
                    );
                    *self.lock_closed() = Some(Err(h));
                }
            }
            // Give the log up (unless a newer writer holds the lease).
            self.lease.release().await;
            let mut closed = self.lock_closed();
            if closed.is_none() {
                *closed = Some(outcome);
            }
        }
        match self.lock_closed().as_ref() {
            Some(Err(h)) => Err(h.pending_error()),
            _ => Ok(()),
        }
    }

    fn lock_closed(&self) -> std::sync::MutexGuard<'_, Option<std::result::Result<(), Halt>>> {
        self.closed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `edit` in one manifest CAS, ordered after every commit so
    /// far (see [`ManifestEdit::apply`] for the checks).
    ///
    /// Errors: those of [`ManifestEdit::apply`] (`InvalidInput`); otherwise
    /// as for a commit (`Fenced`, `Unavailable`, `Closed`, ...). A refused
    /// or failed edit does not halt the producer.
    pub async fn edit_manifest(&self, edit: ManifestEdit) -> Result<()> {
        self.shared.check_open()?;
        let (reply, rx) = oneshot::channel();
        let op = Maintenance {
            edit,
            deadline: self.deadline_from_now(),
            reply,
        };
        if self.maintenance_tx.send(op).is_err() {
            return Err(self.shared.stopped_error());
        }
        rx.await
            .unwrap_or_else(|_| Err(self.shared.stopped_error()))
    }

    /// Drops, in one manifest CAS ordered after every commit so far, every
    /// entry all of whose record sequences are `<= through` (an entry that
    /// straddles `through` stays). The segment objects stay until retention
    /// GC deletes them.
    ///
    /// Errors: `InvalidInput` when the manifest has a snapshot pointer and
    /// the truncation would leave a gap between it and the first live entry
    /// (set a newer snapshot with [`set_snapshot`](Self::set_snapshot)
    /// instead); otherwise as for a commit (`Fenced`, `Unavailable`,
    /// `Closed`, ...).
    pub async fn truncate_through(&self, through: u64) -> Result<()> {
        self.edit_manifest(ManifestEdit::truncate(through)).await
    }

    /// Records `snapshot` as the manifest's snapshot pointer and, with
    /// `truncate`, drops the entries it supersedes (through its
    /// `through_seq`) in the same CAS. The snapshot object must already be
    /// stored.
    ///
    /// Errors: `InvalidInput` for a manifest version without a snapshot
    /// block (v1), a `through_seq` the log has not reached, or a snapshot
    /// older than the first live entry; otherwise as for a commit.
    pub async fn set_snapshot(&self, snapshot: SnapshotPointer, truncate: bool) -> Result<()> {
        self.edit_manifest(ManifestEdit::snapshot(snapshot, truncate))
            .await
    }

    /// When an operation started now must be over.
    fn deadline_from_now(&self) -> tokio::time::Instant {
        let now = crate::clock::monotonic_now();
        now.checked_add(self.deadline)
            .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365))
    }

    /// The epoch this producer claimed the log with.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// This run's id: the directory its segments are written under.
    pub fn run_id(&self) -> Ulid {
        self.run_id
    }

    /// The manifest's object path.
    pub fn manifest_path(&self) -> &Path {
        &self.manifest_path
    }

    /// The manifest layout this producer writes.
    pub fn manifest_version(&self) -> ManifestVersion {
        self.manifest_version
    }

    /// The error appends get now, if the producer halted (fenced, failed or
    /// closed); `None` while it accepts appends.
    pub fn halted(&self) -> Option<Error> {
        self.shared.check_open().err()
    }
}

/// The pending commit of one append.
#[derive(Debug)]
#[must_use = "an append is only known durable once `wait` returns"]
pub struct Durability {
    rx: oneshot::Receiver<Result<u64>>,
    shared: Arc<Shared>,
}

impl Durability {
    /// Waits until the append is committed and returns its sequence (see
    /// the module docs for what the number means per manifest
    /// version).
    ///
    /// Errors: the reason the producer halted before committing it
    /// ([`ErrorKind::Fenced`], [`ErrorKind::Unavailable`],
    /// [`ErrorKind::Conflict`], [`ErrorKind::Indeterminate`],
    /// [`ErrorKind::Closed`], ...).
    pub async fn wait(self) -> Result<u64> {
        match self.rx.await {
            Ok(result) => result,
            // The waiter was dropped unresolved: only a halting or vanished
            // task does that.
            Err(_) => Err(self.shared.stopped_error()),
        }
    }
}
