//! The manifest as an object in the store: reading it together with the
//! version a conditional update must match and its write stamp, the write
//! stamp of an object it is about to reference (see [`window`](super::window)),
//! and the failure type every manifest read or write reports.
//!
//! Shared by the producer's committer ([`commit`](super::commit)), manifest
//! edits without a producer ([`maintenance`](super::maintenance)) and
//! snapshots, so none of them depends on another for it.

use object_store::path::Path;
use object_store::{ObjectStore, UpdateVersion};

use super::Manifest;
use crate::error::{Error, ErrorKind, Result};
use crate::objects::{Backoff, Outcome, StoreOp, classify, to_error};

/// A failed store interaction: what it means and the error to report.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) outcome: Outcome,
    pub(crate) error: Error,
}

impl Failed {
    pub(crate) fn store(op: StoreOp, path: &Path, err: object_store::Error) -> Self {
        Failed {
            outcome: classify(op, &err),
            error: to_error(op, path.as_ref(), err),
        }
    }
}

/// A manifest as read from the store, with the version to CAS against.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) manifest: Manifest,
    pub(crate) version: UpdateVersion,
    /// The store's `last_modified` stamp of this version, in ms since the
    /// Unix epoch.
    pub(crate) written_ms: i64,
}

impl Failed {
    /// An attempt (or read) cut off by its operation's deadline.
    pub(crate) fn out_of_time(what: &str) -> Self {
        Failed {
            outcome: Outcome::Transient,
            error: Error::new(
                ErrorKind::Unavailable,
                format!("{what} got no answer before the operation's deadline"),
            ),
        }
    }
}

/// [`read_manifest`] within `backoff`'s deadline.
pub(crate) async fn read_manifest_by(
    store: &dyn ObjectStore,
    path: &Path,
    backoff: &Backoff,
) -> std::result::Result<Option<Loaded>, Failed> {
    backoff
        .limit(read_manifest(store, path))
        .await
        .unwrap_or_else(|| Err(Failed::out_of_time("reading the manifest")))
}

/// Reads the manifest; `None` when it does not exist.
pub(crate) async fn read_manifest(
    store: &dyn ObjectStore,
    path: &Path,
) -> std::result::Result<Option<Loaded>, Failed> {
    let got = match store.get(path).await {
        Ok(got) => got,
        Err(e) if classify(StoreOp::Read, &e) == Outcome::NotFound => return Ok(None),
        Err(e) => return Err(Failed::store(StoreOp::Read, path, e)),
    };
    let version = UpdateVersion {
        e_tag: got.meta.e_tag.clone(),
        version: got.meta.version.clone(),
    };
    let written_ms = got.meta.last_modified.timestamp_millis();
    let bytes = got
        .bytes()
        .await
        .map_err(|e| Failed::store(StoreOp::Read, path, e))?;
    let manifest = Manifest::from_bytes(&bytes).map_err(|e| Failed {
        outcome: Outcome::Fatal,
        error: e.context(format!("manifest {path}")),
    })?;
    Ok(Some(Loaded {
        manifest,
        version,
        written_ms,
    }))
}

/// The store's `last_modified` stamp of the object at `location`, which an
/// edit is about to reference.
///
/// Errors: `InvalidInput` when the object does not exist (a pointer to it
/// would make the log unreadable); store kinds.
pub(crate) async fn object_written_ms(
    store: &dyn ObjectStore,
    location: &str,
    backoff: &Backoff,
) -> Result<i64> {
    let path = Path::from(location);
    let mut retries = backoff.clone();
    loop {
        match retries.attempt(store.head(&path)).await {
            Ok(meta) => return Ok(meta.last_modified.timestamp_millis()),
            Err(e) => match classify(StoreOp::Read, &e) {
                Outcome::NotFound => {
                    return Err(Error::invalid_input(format!(
                        "the manifest cannot point to {location}: there is no such object"
                    )));
                }
                Outcome::Transient if retries.wait().await => {}
                _ => return Err(to_error(StoreOp::Read, location, e)),
            },
        }
    }
}
