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
    /// takes its versions until its history fill reaches the checkpoint,
    /// then stops with that error (see `docs/FAILURE_SEMANTICS.md`).
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
            return Err(crate::store::outcome::to_error(
                crate::store::outcome::StoreOp::Read,
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
