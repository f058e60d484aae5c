//! The manifest as an object in the store: reading it together with the
//! version a conditional update must match, and the failure type every
//! manifest read or write reports.
//!
//! Shared by the producer's committer ([`commit`](super::commit)), manifest
//! edits without a producer ([`maintenance`](super::maintenance)) and
//! snapshots, so none of them depends on another for it.

use object_store::path::Path;
use object_store::{ObjectStore, UpdateVersion};

use super::Manifest;
use crate::error::Error;
use crate::store::{Outcome, StoreOp, classify, to_error};

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
    let bytes = got
        .bytes()
        .await
        .map_err(|e| Failed::store(StoreOp::Read, path, e))?;
    let manifest = Manifest::from_bytes(&bytes).map_err(|e| Failed {
        outcome: Outcome::Fatal,
        error: e.context(format!("manifest {path}")),
    })?;
    Ok(Some(Loaded { manifest, version }))
}
