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
//! A crash between the steps leaves an object no manifest references;
//! retention GC deletes it once it is older than the grace period (see
//! [`super::gc`]). A replica with no cursor that finds the pointer restores
//! the object through [`Applier::restore`](super::Applier::restore) and
//! tails from `through_seq + 1`.
//!
//! The default prefix is `snapshots` next to the manifest: the manifest
//! `wal/manifest` keeps its snapshots under `wal/snapshots/`.

use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tracing::{info, warn};
use ulid::Ulid;

use super::Producer;
use super::commit::read_manifest;
use super::maintenance::{ManifestEdit, edit_unowned};
use crate::clock::{self, Clock};
use crate::error::{Error, ErrorKind, Result};
use crate::format::SnapshotPointer;
use crate::store::{Outcome, RetryPolicy, StoreOp, retry_store, to_error};

/// The default snapshot prefix of the log whose manifest is at
/// `manifest_path`: `snapshots` in the manifest's directory.
pub fn default_prefix(manifest_path: &str) -> String {
    let trimmed = manifest_path.trim_matches('/');
    match trimmed.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/snapshots"),
        None => "snapshots".to_owned(),
    }
}

/// The object path of a snapshot through `through_seq` with id `id`.
pub fn object_path(prefix: &str, through_seq: u64, id: Ulid) -> Path {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        Path::from(format!("{through_seq:016x}-{id}"))
    } else {
        Path::from(format!("{prefix}/{through_seq:016x}-{id}"))
    }
}

/// Parses the last part of a snapshot object's path
/// (`<through_seq:016x>-<ulid>`); `None` for any other name.
pub fn parse_object_name(name: &str) -> Option<(u64, Ulid)> {
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
    /// snapshots under [`default_prefix`], truncating what they supersede.
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
        match self.seed {
            Some(seed) => ChaCha8Rng::seed_from_u64(seed),
            None => ChaCha8Rng::from_os_rng(),
        }
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
        let now = self.clock.now_ms();
        let mut rng = self.rng();
        let id = Ulid::from_parts(now, rng.random());
        let path = object_path(&self.prefix, through_seq, id);
        let mut backoff = self.retry.backoff(rng.random());
        let mut retries = 0u32;
        let result = retry_store(
            &mut backoff,
            StoreOp::CreateIfAbsent,
            true,
            |outcome, err| {
                retries += 1;
                if retries == 1 {
                    warn!(?outcome, error = %err, %path, "snapshot upload failed; retrying");
                } else {
                    tracing::debug!(retries, ?outcome, error = %err, %path, "snapshot upload retry");
                }
            },
            || {
                let opts = PutOptions::from(PutMode::Create);
                self.store
                    .put_opts(&path, PutPayload::from(bytes.clone()), opts)
            },
        )
        .await;
        match result {
            Ok(_) => {}
            Err(gave_up) if gave_up.outcome == Outcome::Conflict => {
                let existing = self
                    .store
                    .get(&path)
                    .await
                    .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))?
                    .bytes()
                    .await
                    .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))?;
                if existing != bytes {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("snapshot object {path} already exists with other contents"),
                    ));
                }
            }
            Err(gave_up) => {
                return Err(
                    to_error(StoreOp::CreateIfAbsent, path.as_ref(), gave_up.error)
                        .context(format!("storing snapshot ({} attempts)", gave_up.attempts)),
                );
            }
        }
        info!(%path, through_seq, bytes = bytes.len(), "snapshot stored");
        Ok(SnapshotPointer {
            location: path.to_string(),
            through_seq,
            created_ms: i64::try_from(now).unwrap_or(i64::MAX),
        })
    }

    /// Stores the snapshot and records it through the log's writer, in one
    /// manifest CAS ordered after every commit so far. Returns the pointer
    /// now in the manifest.
    ///
    /// Errors: those of [`upload`](Self::upload) and of
    /// [`Producer::set_snapshot`] (`InvalidInput` for a `through_seq` the
    /// log has not reached or a v1 manifest, `Fenced`, ...). When the
    /// pointer could not be recorded, the uploaded object is deleted again
    /// (best effort; GC collects it otherwise).
    pub async fn write(
        &self,
        producer: &Producer,
        bytes: Bytes,
        through_seq: u64,
    ) -> Result<SnapshotPointer> {
        let pointer = self.upload(bytes, through_seq).await?;
        match producer.set_snapshot(pointer.clone(), self.truncate).await {
            Ok(()) => Ok(pointer),
            Err(e) => {
                self.discard(producer.manifest_path(), &pointer).await;
                Err(e)
            }
        }
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
        let pointer = self.upload(bytes, through_seq).await?;
        let edit = ManifestEdit::snapshot(pointer.clone(), self.truncate);
        match edit_unowned(&self.store, manifest_path, &edit, &self.retry).await {
            Ok(_) => Ok(pointer),
            Err(e) => {
                self.discard(manifest_path, &pointer).await;
                Err(e)
            }
        }
    }

    /// Deletes an object whose pointer was not recorded — only once a fresh
    /// read of the manifest shows it is not referenced: after a failure
    /// whose outcome was unknown, the pointer may be there after all.
    async fn discard(&self, manifest_path: &Path, pointer: &SnapshotPointer) {
        match read_manifest(self.store.as_ref(), manifest_path).await {
            Ok(Some(l))
                if l.manifest.snapshot().map(|s| &s.location) != Some(&pointer.location) => {}
            Ok(None) => {}
            _ => return,
        }
        let path = Path::from(pointer.location.as_str());
        if let Err(e) = self.store.delete(&path).await {
            warn!(%path, error = %e, "could not delete an unrecorded snapshot; GC will");
        }
    }
}

/// Stores `bytes` as a snapshot through `through_seq` of the log written by
/// `producer` (under [`default_prefix`] of its manifest), records the
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
