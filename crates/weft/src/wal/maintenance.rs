//! Manifest changes other than appending segments: truncating superseded
//! entries and setting the snapshot pointer.
//!
//! There are two ways to make such a change, and both run the same checks
//! ([`ManifestEdit::apply`]):
//!
//! * through the log's [`Producer`](super::Producer)
//!   ([`Producer::truncate_through`](super::Producer::truncate_through),
//!   [`Producer::set_snapshot`](super::Producer::set_snapshot)): the edit is
//!   ordered with the producer's commits, in its committer task;
//! * without a producer ([`edit_unowned`]), for tools: a read–modify–CAS on
//!   the manifest that keeps the epoch as it is, so it fences nobody. A
//!   writer that holds the epoch sees the changed manifest on its next CAS
//!   (a 412 with its own epoch), reloads, and commits on top of the edit;
//!   the edit itself retries on top of any commit that beat it.
//!
//! The checks keep the log bootstrappable: a snapshot must cover only
//! committed sequences, and the entries after it must follow it without a
//! gap, so a new replica that restores the snapshot can always go on from
//! the sequence after it.

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tracing::info;

use super::Manifest;
use super::commit::read_manifest;
use crate::error::{Error, ErrorKind, Result};
use crate::format::SnapshotPointer;
use crate::store::{Outcome, RetryPolicy, StoreOp, classify, to_error};

/// A change to a manifest's retention state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestEdit {
    /// Drop every entry all of whose sequences are `<=` this (an entry that
    /// straddles it stays).
    pub truncate_through: Option<u64>,
    /// Replace the snapshot pointer (`Some(None)` clears it).
    pub snapshot: Option<Option<SnapshotPointer>>,
}

impl ManifestEdit {
    /// An edit that drops the entries through `through`.
    pub fn truncate(through: u64) -> Self {
        ManifestEdit {
            truncate_through: Some(through),
            snapshot: None,
        }
    }

    /// An edit that points the manifest at `snapshot` and, with `truncate`,
    /// drops the entries it supersedes.
    pub fn snapshot(snapshot: SnapshotPointer, truncate: bool) -> Self {
        ManifestEdit {
            truncate_through: truncate.then_some(snapshot.through_seq),
            snapshot: Some(Some(snapshot)),
        }
    }

    /// Applies the edit to `manifest`, or changes nothing and fails.
    ///
    /// Errors: [`ErrorKind::InvalidInput`] when the snapshot covers a
    /// sequence the log has not reached (`through_seq >= next_sequence`),
    /// when the live entries would not follow the snapshot without a gap
    /// (the log was truncated past what the snapshot covers), or when the
    /// manifest version has no snapshot block (v1).
    ///
    /// On a v5 manifest whose history pages hold the truncation point, this
    /// keeps every page that holds a live entry whole and starts the log at
    /// that page's first entry (it reads no page); see
    /// [`apply_reading_history`](Self::apply_reading_history) for the exact
    /// point.
    pub fn apply(&self, manifest: &mut Manifest) -> Result<()> {
        let mut next = manifest.clone();
        self.apply_parts(&mut next)?;
        check_gap(&next)?;
        *manifest = next;
        Ok(())
    }

    /// [`apply`](Self::apply), reading the history page that holds the
    /// truncation point (if a v5 manifest's history does) so the first
    /// live sequence is exactly that of the entry straddling it, as in
    /// every other version.
    ///
    /// Errors: those of [`apply`](Self::apply); `NotFound`, `Corrupt` or
    /// store errors reading the page. The manifest is unchanged on error.
    pub async fn apply_reading_history(
        &self,
        manifest: &mut Manifest,
        reader: &super::HistoryReader,
    ) -> Result<()> {
        let mut next = manifest.clone();
        self.apply_parts(&mut next)?;
        if let (Some(through), Some(history)) = (self.truncate_through, next.history())
            && let Some(first) = reader
                .first_entry_from(history, through.saturating_add(1))
                .await?
            && first > next.first_sequence()
        {
            next.set_live_from(first)?;
        }
        check_gap(&next)?;
        *manifest = next;
        Ok(())
    }

    /// Everything but the gap check, on `next`.
    fn apply_parts(&self, next: &mut Manifest) -> Result<()> {
        if let Some(Some(snap)) = &self.snapshot
            && snap.through_seq >= next.next_sequence()
        {
            return Err(Error::invalid_input(format!(
                "a snapshot through {} covers sequences the log has not reached \
                 (its next sequence is {})",
                snap.through_seq,
                next.next_sequence()
            )));
        }
        if let Some(through) = self.truncate_through {
            next.truncate_through(through);
        }
        if let Some(snapshot) = &self.snapshot {
            next.set_snapshot(snapshot.clone())?;
        }
        Ok(())
    }
}

/// The live entries must follow the snapshot without a gap.
fn check_gap(next: &Manifest) -> Result<()> {
    if let Some(snap) = next.snapshot()
        && snap.through_seq.saturating_add(1) < next.first_sequence()
    {
        return Err(Error::invalid_input(format!(
            "the snapshot at {} covers sequences through {} but the first live sequence \
             would be {}: a replica restoring it could not go on",
            snap.location,
            snap.through_seq,
            next.first_sequence()
        )));
    }
    Ok(())
}

/// Applies `edit` to the manifest at `manifest_path` without claiming the
/// log: a conditional update that keeps the epoch, retried on a fresh copy
/// after a conflict or a transient failure within `retry`. Returns the
/// manifest as written.
///
/// An attempt whose outcome is unknown is simply applied again to a fresh
/// copy: the edit is idempotent (truncating through the same sequence or
/// setting the same pointer twice changes nothing more).
///
/// Errors: [`ErrorKind::NotFound`] when there is no manifest (nothing is
/// created); the errors of [`ManifestEdit::apply`]; store errors
/// ([`ErrorKind::Unavailable`] after the retries, [`ErrorKind::Conflict`]
/// when every attempt lost a race, `PermissionDenied`, ...);
/// [`ErrorKind::Corrupt`] for an unreadable manifest.
pub async fn edit_unowned(
    store: &Arc<dyn ObjectStore>,
    manifest_path: &Path,
    edit: &ManifestEdit,
    retry: &RetryPolicy,
) -> Result<Manifest> {
    let mut backoff = retry.backoff(ChaCha8Rng::from_os_rng().random());
    let reader = super::HistoryReader::new(store.clone(), 1 << 20);
    loop {
        let loaded = match read_manifest(store.as_ref(), manifest_path).await {
            Ok(Some(l)) => l,
            Ok(None) => {
                return Err(Error::new(
                    ErrorKind::NotFound,
                    format!("no manifest at {manifest_path}: nothing to edit"),
                ));
            }
            Err(f) if f.outcome == Outcome::Transient && backoff.wait().await => continue,
            Err(f) => return Err(f.error.context("manifest edit")),
        };
        let mut manifest = loaded.manifest;
        edit.apply_reading_history(&mut manifest, &reader).await?;
        let bytes = manifest.to_bytes()?;
        let mode = PutMode::Update(loaded.version);
        match store
            .put_opts(
                manifest_path,
                PutPayload::from(bytes),
                PutOptions::from(mode),
            )
            .await
        {
            Ok(_) => {
                info!(manifest = %manifest_path, epoch = manifest.epoch(), "manifest edited");
                return Ok(manifest);
            }
            Err(e) => {
                let outcome = classify(StoreOp::UpdateIfMatch, &e);
                let err = to_error(StoreOp::UpdateIfMatch, manifest_path.as_ref(), e);
                let retryable = matches!(
                    outcome,
                    Outcome::Conflict | Outcome::Transient | Outcome::Ambiguous
                );
                if !retryable || !backoff.wait().await {
                    return Err(
                        err.context(format!("manifest edit ({} attempts)", backoff.attempts()))
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::ManifestVersion;

    fn snap(through: u64) -> SnapshotPointer {
        SnapshotPointer {
            location: format!("snapshots/{through}"),
            through_seq: through,
            created_ms: 1,
        }
    }

    fn log() -> Manifest {
        let mut m = Manifest::new(ManifestVersion::V4);
        m.append("a", vec![], 3).unwrap(); // 0..3
        m.append("b", vec![], 3).unwrap(); // 3..6
        m.append("c", vec![], 3).unwrap(); // 6..9
        m
    }

    #[test]
    fn snapshot_with_truncate_keeps_the_straddling_entry() {
        let mut m = log();
        ManifestEdit::snapshot(snap(4), true).apply(&mut m).unwrap();
        assert_eq!(m.first_sequence(), 3);
        assert_eq!(m.snapshot(), Some(&snap(4)));
    }

    #[test]
    fn refused_edits_change_nothing() {
        let before = log();
        let mut m = before.clone();
        let beyond = ManifestEdit::snapshot(snap(9), true).apply(&mut m);
        assert_eq!(beyond.unwrap_err().kind(), ErrorKind::InvalidInput);
        ManifestEdit::snapshot(snap(2), true).apply(&mut m).unwrap();
        let snapshotted = m.clone();
        // Truncating past the snapshot would strand a restoring replica.
        let gap = ManifestEdit::truncate(5).apply(&mut m);
        assert_eq!(gap.unwrap_err().kind(), ErrorKind::InvalidInput);
        assert_eq!(m, snapshotted);
        // An older snapshot than the live entries need is refused too.
        let mut m = before.clone();
        ManifestEdit::truncate(5).apply(&mut m).unwrap();
        let stale = ManifestEdit::snapshot(snap(1), false).apply(&mut m);
        assert_eq!(stale.unwrap_err().kind(), ErrorKind::InvalidInput);
        let mut v1 = Manifest::new(ManifestVersion::V1);
        v1.append("a", vec![], 1).unwrap();
        let err = ManifestEdit::snapshot(snap(0), false).apply(&mut v1);
        assert_eq!(err.unwrap_err().kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn clearing_the_pointer_and_truncating_everything_is_allowed() {
        let mut m = log();
        ManifestEdit::snapshot(snap(8), true).apply(&mut m).unwrap();
        assert!(m.is_empty());
        let clear = ManifestEdit {
            truncate_through: None,
            snapshot: Some(None),
        };
        clear.apply(&mut m).unwrap();
        assert_eq!(m.snapshot(), None);
        assert_eq!(m.next_sequence(), 9);
    }
}
