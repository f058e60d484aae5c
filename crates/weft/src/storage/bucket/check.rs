//! [`check`]: a bucket log judged the way opening its writer judges it —
//! the same function reads it: every segment the manifest lists fetched
//! (one it lists and the store does not have is `Corrupt`), decoded and
//! counted, every record decoded as an entry frame whose seqnum is the
//! record's WAL sequence, batches whole, versions dense, the entries ending
//! where the manifest says, the trim state restored from its snapshot.
//! Read-only: nothing is claimed or written.

use std::sync::Arc;

use object_store::ObjectStore;

use super::BucketLayout;
use super::catchup::read_numbers;
use super::writer::BucketOptions;
use crate::error::{Error, ErrorKind, Result};

/// What [`check`] found.
#[derive(Debug)]
#[non_exhaustive]
pub struct BucketCheck {
    /// The first live seqnum.
    pub first_seqnum: u64,
    /// The seqnum the next entry gets.
    pub next_seqnum: u64,
    /// Live entries.
    pub entries: u64,
    /// Why opening the writer (and reading) refuses the log, if it does:
    /// `Corrupt` for damaged or missing data, `InvalidInput` for a manifest
    /// that is not a weft log's.
    pub problem: Option<Error>,
    /// Damage to the stream-state checkpoints (`states/`), one `Corrupt`
    /// error per checkpoint: a writer that opens from such a checkpoint
    /// stops with `Corrupt` before it numbers a stream it finds misstated,
    /// or once its history fill reaches the checkpoint (see
    /// `docs/FAILURE_SEMANTICS.md`, "Stream-state checkpoints").
    /// Checked only when the log itself reads clean.
    pub checkpoint_problems: Vec<Error>,
}

/// Reads the whole bucket log at `prefix` in `store` as its writer's open
/// does, without claiming it.
///
/// Errors: `NotFound` when there is no manifest; store kinds
/// (`Unavailable` after the retries, `PermissionDenied`). Damage is not an
/// error: it is [`BucketCheck::problem`].
pub async fn check(store: Arc<dyn ObjectStore>, prefix: &str) -> Result<BucketCheck> {
    let layout = BucketLayout::new(prefix);
    let path = layout.manifest();
    match BucketOptions::default()
        .retry
        .backoff(0)
        .attempt(store.head(&path))
        .await
    {
        Ok(_) => {}
        Err(object_store::Error::NotFound { .. }) => {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("no bucket log at {path}: there is no manifest"),
            ));
        }
        Err(e) => {
            return Err(crate::objects::outcome::to_error(
                crate::objects::outcome::StoreOp::Read,
                path.as_ref(),
                e,
            ));
        }
    }
    let options = BucketOptions::default();
    match read_numbers(&store, &layout, options.rebuild_prefetch, &options.retry).await {
        Ok((index, _)) => Ok(BucketCheck {
            first_seqnum: index.first(),
            next_seqnum: index.next(),
            entries: index.len(),
            problem: None,
            checkpoint_problems: super::states::check_all(&store, &layout, &index, &options.retry)
                .await?,
        }),
        Err(e) if matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::InvalidInput) => {
            Ok(BucketCheck {
                first_seqnum: 0,
                next_seqnum: 0,
                entries: 0,
                problem: Some(e),
                checkpoint_problems: Vec::new(),
            })
        }
        Err(e) => Err(e),
    }
}

/// What [`check_cache`] found in a bucket log handle's cache directory.
#[derive(Debug)]
#[non_exhaustive]
pub enum CacheCheck {
    /// The index there was compared with the log: one `Corrupt` error per
    /// stream whose next version it gets wrong (a writer that meets such a
    /// row stops that append with `Corrupt`; see
    /// `docs/FAILURE_SEMANTICS.md`).
    Compared(Vec<Error>),
    /// Not compared: no index, one the next open rebuilds (damaged,
    /// another log's), one covering another range than the log (the next
    /// open brings it up to date), or one in use by a running handle.
    Skipped(String),
}

/// Compares the log index in `cache_dir` (a bucket writer's or follower's
/// [`cache_dir`](BucketOptions::cache_dir)) with the bucket log at
/// `prefix` in `store`, reading the whole log as [`check`] does. Changes
/// nothing in the directory (it opens a copy of the index).
///
/// Errors: the log's errors as [`check`] reads it (damage included:
/// [`check`] reports that); I/O kinds for the directory.
pub async fn check_cache(
    store: Arc<dyn ObjectStore>,
    prefix: &str,
    cache_dir: &std::path::Path,
) -> Result<CacheCheck> {
    let layout = BucketLayout::new(prefix);
    let options = BucketOptions::default();
    let (numbers, _) =
        read_numbers(&store, &layout, options.rebuild_prefetch, &options.retry).await?;
    let expected = match numbers.next() {
        0 => Vec::new(),
        next => numbers.next_versions_through(next - 1),
    };
    let (first, next) = (numbers.first(), numbers.next());
    let identity = super::numbers::identity(layout.manifest().as_ref());
    let dir = cache_dir.join("index");
    tokio::task::spawn_blocking(move || {
        let inspected = crate::index::inspect(&dir, identity.as_bytes(), |index| {
            if index.first() != first || index.next() != next {
                return Ok(CacheCheck::Skipped(format!(
                    "the log index covers entries {}..{}, the log {first}..{next}: the next \
                     open brings it up to date",
                    index.first(),
                    index.next()
                )));
            }
            index.version_problems(&expected).map(CacheCheck::Compared)
        });
        match inspected {
            Ok(Some(found)) => Ok(found),
            Ok(None) => Ok(CacheCheck::Skipped(
                "no sound log index there: the next open builds one".into(),
            )),
            Err(e) if e.kind() == ErrorKind::Locked => {
                Ok(CacheCheck::Skipped("the log index is in use".into()))
            }
            Err(e) => Err(e),
        }
    })
    .await
    .map_err(|e| Error::internal(format!("cache check task failed: {e}")))?
}
