//! Base snapshots: an application's state as of a sequence, stored next to
//! the log, so that new replicas start from it instead of from the first
//! record, and so that the entries it covers can be truncated.
//!
//! Writing a snapshot is two steps, in this order:
//!
//! 1. the bytes go to a new object `<prefix>/<through_seq:016x>-<ulid>`,
//!    created with `PutMode::Create` (never overwriting anything);
//! 2. one manifest CAS records the pointer (location, `through_seq`,
//!    creation time) and, by default, drops the entries the snapshot
//!    supersedes.
//!
//! A crash between the steps — or a failure to record the pointer — leaves
//! an object no manifest references; retention GC deletes it (see
//! [`super::gc`]). Nothing here deletes it: after a failure whose outcome
//! is unknown the pointer may still be recorded later, and only GC knows
//! when that can no longer happen (`super::window`). A replica with no cursor that finds the pointer restores
//! the object through [`Applier::restore`](super::Applier::restore) and
//! tails from `through_seq + 1`.
//!
//! The default prefix is `snapshots` next to the manifest: the manifest
//! `wal/manifest` keeps its snapshots under `wal/snapshots/`.

use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use tracing::{debug, info, warn};
use ulid::Ulid;

use super::Producer;
use super::maintenance::{ManifestEdit, edit_unowned};
use super::manifest_object::read_manifest_by;
use crate::clock::{self, Clock};
use crate::error::{Error, ErrorKind, Result};
use crate::format::SnapshotPointer;
use crate::objects::{Outcome, RetryPolicy, StoreOp, classify, retry_store, to_error};

/// The default snapshot prefix of the log whose manifest is at
/// `manifest_path`: `snapshots` in the manifest's directory.
pub(crate) fn default_prefix(manifest_path: &str) -> String {
    let trimmed = manifest_path.trim_matches('/');
    match trimmed.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/snapshots"),
        None => "snapshots".to_owned(),
    }
}

/// The object path of a snapshot through `through_seq` with id `id`.
pub(crate) fn object_path(prefix: &str, through_seq: u64, id: Ulid) -> Path {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        Path::from(format!("{through_seq:016x}-{id}"))
    } else {
        Path::from(format!("{prefix}/{through_seq:016x}-{id}"))
    }
}

/// Parses the last part of a snapshot object's path
/// (`<through_seq:016x>-<ulid>`); `None` for any other name.
pub(crate) fn parse_object_name(name: &str) -> Option<(u64, Ulid)> {
    let (seq, id) = name.split_once('-')?;
    if seq.len() != 16 || !seq.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let seq = u64::from_str_radix(seq, 16).ok()?;
    let id = Ulid::from_string(id).ok()?;
    Some((seq, id))
}

/// Writes base snapshots of one log.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> weft::Result<()> {
/// use std::sync::Arc;
/// use bytes::Bytes;
/// use object_store::memory::InMemory;
/// use weft::wal::{Producer, SnapshotWriter};
///
/// let store = Arc::new(InMemory::new());
/// let producer = Producer::builder(store.clone(), "wal/manifest", "wal/seg").open().await?;
/// producer.append(vec![Bytes::from("a"), Bytes::from("b")], None).await?.wait().await?;
/// let pointer = SnapshotWriter::new(store, "wal/manifest")
///     .write(&producer, Bytes::from("state after a, b"), 1)
///     .await?;
/// assert!(pointer.location.starts_with("wal/snapshots/0000000000000001-"));
/// # producer.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SnapshotWriter {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    truncate: bool,
    clock: Arc<dyn Clock>,
    seed: Option<u64>,
    retry: RetryPolicy,
}

impl SnapshotWriter {
    /// A writer for the log whose manifest is at `manifest_path`, storing
    /// snapshots under `default_prefix`, truncating what they supersede.
    pub fn new(store: Arc<dyn ObjectStore>, manifest_path: &str) -> Self {
        SnapshotWriter {
            store,
            prefix: default_prefix(manifest_path),
            truncate: true,
            clock: clock::system(),
            seed: None,
            retry: RetryPolicy::default(),
        }
    }

    /// Store snapshot objects under `prefix` instead.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into().trim_matches('/').to_owned();
        self
    }

    /// Whether setting the pointer also drops the entries the snapshot
    /// supersedes (default: true).
    pub fn with_truncate(mut self, truncate: bool) -> Self {
        self.truncate = truncate;
        self
    }

    /// The clock for the creation time and the object id (default: system).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Seeds the object id's random part (default: from the operating
    /// system, which keeps ids unique across processes).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Retries of the upload and of an unowned manifest edit.
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The prefix snapshot objects go under.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn rng(&self) -> ChaCha8Rng {
        crate::random::rng(self.seed)
    }

    /// Step 1 only: stores `bytes` as a new snapshot object covering
    /// everything through `through_seq`, and returns the pointer to record.
    ///
    /// The object is created with `PutMode::Create`. When the store says it
    /// already exists, the object is read back: the same bytes mean an
    /// earlier attempt of this call landed (object_store retries requests
    /// itself), anything else is a name collision.
    ///
    /// Errors: [`ErrorKind::Conflict`] for a collision; store errors
    /// (`Unavailable` after the retries, `PermissionDenied`, `NotFound` for
    /// a missing bucket).
    pub async fn upload(&self, bytes: Bytes, through_seq: u64) -> Result<SnapshotPointer> {
        let (pointer, seed) = self.plan(through_seq);
        self.store_object(&pointer, bytes, seed).await?;
        Ok(pointer)
    }

    /// The pointer a snapshot through `through_seq` will get (a fresh
    /// object name), and a seed for its upload's retries.
    fn plan(&self, through_seq: u64) -> (SnapshotPointer, u64) {
        let now = self.clock.now_ms();
        let mut rng = self.rng();
        let id = Ulid::from_parts(now, rng.random());
        let pointer = SnapshotPointer {
            location: object_path(&self.prefix, through_seq, id).to_string(),
            through_seq,
            created_ms: i64::try_from(now).unwrap_or(i64::MAX),
        };
        (pointer, rng.random())
    }

    /// Refuses, before anything is stored, an edit the manifest at
    /// `manifest_path` refuses now (a snapshot beyond the log's end, an
    /// older one than recorded, a v1 manifest, no manifest at all). The
    /// manifest may change before the edit is made; the edit checks again.
    async fn precheck(&self, manifest_path: &Path, edit: &ManifestEdit) -> Result<()> {
        let mut backoff = self.retry.backoff(0);
        loop {
            match read_manifest_by(self.store.as_ref(), manifest_path, &backoff).await {
                Ok(Some(mut loaded)) => return edit.apply(&mut loaded.manifest),
                Ok(None) => {
                    return Err(Error::new(
                        ErrorKind::NotFound,
                        format!("no manifest at {manifest_path}: nothing to snapshot"),
                    ));
                }
                Err(f) if f.outcome == Outcome::Transient && backoff.wait().await => {}
                Err(f) => return Err(f.error.context("reading the manifest")),
            }
        }
    }

    async fn store_object(&self, pointer: &SnapshotPointer, bytes: Bytes, seed: u64) -> Result<()> {
        let through_seq = pointer.through_seq;
        let path = Path::from(pointer.location.as_str());
        let mut backoff = self.retry.backoff(seed);
        let mut retries = 0u32;
        loop {
            let result = retry_store(
                &mut backoff,
                StoreOp::CreateIfAbsent,
                true,
                |outcome, err| {
                    // One warning per upload; an outage's further retries at
                    // debug.
                    retries += 1;
                    if retries == 1 {
                        warn!(?outcome, error = %err, %path, "snapshot upload failed; retrying");
                    } else {
                        debug!(retries, ?outcome, error = %err, %path, "snapshot upload retry");
                    }
                },
                || {
                    let opts = PutOptions::from(PutMode::Create);
                    self.store
                        .put_opts(&path, PutPayload::from(bytes.clone()), opts)
                },
            )
            .await;
            let gave_up = match result {
                Ok(_) => break,
                Err(gave_up) => gave_up,
            };
            if gave_up.outcome != Outcome::Conflict {
                return Err(
                    to_error(StoreOp::CreateIfAbsent, path.as_ref(), gave_up.error)
                        .context(format!("storing snapshot ({} attempts)", gave_up.attempts)),
                );
            }
            // "Already exists": an earlier attempt of ours, or a collision.
            let existing = match backoff.attempt(self.store.get(&path)).await {
                Ok(got) => got
                    .bytes()
                    .await
                    .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))?,
                // Not there after all (a 412 that was no answer about this
                // object): try the create again.
                Err(e) if classify(StoreOp::Read, &e) == Outcome::NotFound => {
                    if backoff.wait().await {
                        continue;
                    }
                    return Err(
                        to_error(StoreOp::CreateIfAbsent, path.as_ref(), gave_up.error)
                            .context("storing snapshot"),
                    );
                }
                Err(e) => return Err(to_error(StoreOp::Read, path.as_ref(), e)),
            };
            if existing != bytes {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("snapshot object {path} already exists with other contents"),
                ));
            }
            break;
        }
        info!(%path, through_seq, bytes = bytes.len(), "snapshot stored");
        Ok(())
    }

    /// Stores the snapshot and records it through the log's writer, in one
    /// manifest CAS ordered after every commit so far. Returns the pointer
    /// now in the manifest.
    ///
    /// Errors: those of [`upload`](Self::upload) and of
    /// [`Producer::set_snapshot`] (`InvalidInput` for a `through_seq` the
    /// log has not reached or a v1 manifest, `Conflict` when a newer
    /// snapshot is recorded, `Fenced`, ...). An edit the manifest refuses
    /// already is refused before anything is stored; when the pointer could
    /// not be recorded after the upload, the object stays for GC.
    pub async fn write(
        &self,
        producer: &Producer,
        bytes: Bytes,
        through_seq: u64,
    ) -> Result<SnapshotPointer> {
        let (pointer, seed) = self.plan(through_seq);
        let edit = ManifestEdit::snapshot(pointer.clone(), self.truncate);
        self.precheck(producer.manifest_path(), &edit).await?;
        self.store_object(&pointer, bytes, seed).await?;
        producer
            .set_snapshot(pointer.clone(), self.truncate)
            .await?;
        Ok(pointer)
    }

    /// Stores the snapshot and records it without a producer (for tools,
    /// with or without a live writer): a manifest CAS that keeps the epoch
    /// (see [`edit_unowned`]). Returns the pointer now in the manifest.
    ///
    /// Errors: those of [`upload`](Self::upload) and [`edit_unowned`]
    /// (`NotFound` when there is no manifest, `InvalidInput`, ...).
    pub async fn write_unowned(
        &self,
        manifest_path: &Path,
        bytes: Bytes,
        through_seq: u64,
    ) -> Result<SnapshotPointer> {
        let (pointer, seed) = self.plan(through_seq);
        let edit = ManifestEdit::snapshot(pointer.clone(), self.truncate);
        self.precheck(manifest_path, &edit).await?;
        self.store_object(&pointer, bytes, seed).await?;
        edit_unowned(&self.store, manifest_path, &edit, &self.retry).await?;
        Ok(pointer)
    }
}

/// Stores `bytes` as a snapshot through `through_seq` of the log written by
/// `producer` (under `default_prefix` of its manifest), records the
/// pointer, and drops the entries it supersedes. Shorthand for
/// [`SnapshotWriter::write`] with the defaults and `clock`.
///
/// Errors: see [`SnapshotWriter::write`].
pub async fn write_snapshot(
    store: Arc<dyn ObjectStore>,
    producer: &Producer,
    bytes: Bytes,
    through_seq: u64,
    clock: Arc<dyn Clock>,
) -> Result<SnapshotPointer> {
    SnapshotWriter::new(store, producer.manifest_path().as_ref())
        .with_clock(clock)
        .write(producer, bytes, through_seq)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sort_by_coverage() {
        let id = Ulid::from_parts(1_700_000_000_000, 42);
        let p = object_path("log/snapshots/", 0x2a, id);
        assert_eq!(p.as_ref(), format!("log/snapshots/000000000000002a-{id}"));
        let name = p.filename().unwrap();
        assert_eq!(parse_object_name(name), Some((0x2a, id)));
        let later = object_path("log/snapshots", 0x100, id);
        assert!(later.as_ref() > p.as_ref());
        for bad in [
            "",
            "2a-x",
            "000000000000002a",
            "000000000000002g-01ARZ3NDEKTSV4RRFFQ69G5FAV",
        ] {
            assert_eq!(parse_object_name(bad), None, "{bad:?}");
        }
        assert_eq!(default_prefix("wal/manifest"), "wal/snapshots");
        assert_eq!(default_prefix("/manifest"), "snapshots");
        assert_eq!(default_prefix("a/b/m"), "a/b/snapshots");
    }
}
