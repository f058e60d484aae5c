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
//!
//! # Manifest versions never repeat
//!
//! A late CAS lands only on the exact version it was conditioned on, and S3
//! names a version by the MD5 of its bytes. So if a manifest could return
//! to an earlier state, a CAS made long ago could land on the later copy —
//! and GC's reasoning about which uploads may still become referenced
//! (`super::window`) would fail. Every write therefore moves the state
//! forward: claims raise the epoch, commits raise `next_sequence`,
//! truncation only drops entries from the front, and the snapshot pointer
//! only moves to a snapshot that sorts after the current one (by coverage,
//! then object name) and is never cleared. An edit that changes nothing is
//! not written at all.

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use tracing::info;

use super::Manifest;
use super::manifest_object::{object_written_ms, read_manifest_by};
use super::window;
use crate::error::{Error, ErrorKind, Result};
use crate::format::SnapshotPointer;
use crate::objects::{Outcome, RetryPolicy, StoreOp, classify, to_error};

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

    /// The object this edit makes referenced, if any (the new snapshot).
    pub fn new_reference(&self) -> Option<&str> {
        match &self.snapshot {
            Some(Some(s)) => Some(s.location.as_str()),
            _ => None,
        }
    }

    /// Applies the edit to `manifest`, or changes nothing and fails.
    ///
    /// Errors: [`ErrorKind::InvalidInput`] when the snapshot covers a
    /// sequence the log has not reached (`through_seq >= next_sequence`),
    /// when the live entries would not follow the snapshot without a gap
    /// (the log was truncated past what the snapshot covers), or when the
    /// manifest version has no snapshot block (v1); when the pointer would
    /// be cleared; [`ErrorKind::Conflict`] when the manifest already points
    /// to a snapshot that sorts after the new one (a newer snapshot won).
    /// Setting the pointer the manifest already holds changes nothing.
    ///
    /// On a v5 manifest whose history pages hold the truncation point, this
    /// keeps every page that holds a live entry whole and starts the log at
    /// that page's first entry (it reads no page); see
    /// [`apply_reading_history`](Self::apply_reading_history) for the exact
    /// point.
    pub fn apply(&self, manifest: &mut Manifest) -> Result<()> {
        self.check_pointer(manifest)?;
        let mut next = manifest.clone();
        self.apply_parts(&mut next)?;
        check_gap(&next)?;
        *manifest = next;
        Ok(())
    }

    /// The snapshot pointer only moves forward and is never cleared.
    fn check_pointer(&self, manifest: &Manifest) -> Result<()> {
        match (&self.snapshot, manifest.snapshot()) {
            (Some(None), Some(current)) => {
                return Err(Error::invalid_input(format!(
                    "the snapshot pointer ({}) cannot be removed: the manifest would return \
                     to an earlier state; point it to a newer snapshot instead",
                    current.location
                )));
            }
            (Some(Some(new)), Some(current)) if new != current && !sorts_after(new, current) => {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "the manifest already points to snapshot {} (through {}), which sorts \
                         after {} (through {}): the pointer only moves forward",
                        current.location, current.through_seq, new.location, new.through_seq
                    ),
                ));
            }
            _ => {}
        }
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
        self.check_pointer(manifest)?;
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

/// A stable 64-bit FNV-1a hash.
fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Whether snapshot `a` sorts after `b`: it covers more, or as much under a
/// later object name.
fn sorts_after(a: &SnapshotPointer, b: &SnapshotPointer) -> bool {
    (a.through_seq, a.location.as_str()) > (b.through_seq, b.location.as_str())
}

/// Applies `edit` to the manifest at `manifest_path` without claiming the
/// log: a conditional update that keeps the epoch, retried on a fresh copy
/// after a conflict or a transient failure within `retry` (and its
/// deadline). Returns the manifest as written (or as found, when the edit
/// was already in effect: then nothing is written).
///
/// An attempt whose outcome is unknown is simply applied again to a fresh
/// copy: the edit is idempotent (truncating through the same sequence or
/// setting the same pointer twice changes nothing more). An edit that makes
/// an object referenced (a snapshot pointer) needs the object to exist, and
/// is made only on manifest versions written within the commit window of
/// the object's own stamp (`super::window`).
///
/// Errors: [`ErrorKind::NotFound`] when there is no manifest (nothing is
/// created); the errors of [`ManifestEdit::apply`]; `InvalidInput` when
/// the referenced object does not exist; store errors
/// ([`ErrorKind::Unavailable`] after the retries or the deadline, or when
/// the object is older than the commit window; [`ErrorKind::Conflict`]
/// when every attempt lost a race, `PermissionDenied`, `ReadOnly`, ...);
/// [`ErrorKind::Corrupt`] for an unreadable manifest.
pub async fn edit_unowned(
    store: &Arc<dyn ObjectStore>,
    manifest_path: &Path,
    edit: &ManifestEdit,
    retry: &RetryPolicy,
) -> Result<Manifest> {
    // Jitter seeded by the edit: a snapshot's name is random, so tools do
    // not retry in lock step, and a seeded run replays.
    let mut backoff = retry.backoff(fnv(&format!("{manifest_path} {edit:?}")));
    let referenced = match edit.new_reference() {
        Some(location) => Some((
            location.to_owned(),
            object_written_ms(store.as_ref(), location, &backoff).await?,
        )),
        None => None,
    };
    let reader = super::HistoryReader::new(store.clone(), 1 << 20);
    loop {
        let loaded = match read_manifest_by(store.as_ref(), manifest_path, &backoff).await {
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
        let mut manifest = loaded.manifest.clone();
        edit.apply_reading_history(&mut manifest, &reader).await?;
        if manifest == loaded.manifest {
            return Ok(manifest);
        }
        if let Some((location, object_ms)) = &referenced {
            window::check_stamps(loaded.written_ms, *object_ms, &format!("object {location}"))?;
        }
        let bytes = manifest.to_bytes()?;
        let mode = PutMode::Update(loaded.version);
        match backoff
            .attempt(store.put_opts(
                manifest_path,
                PutPayload::from(bytes),
                PutOptions::from(mode),
            ))
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
    fn truncating_everything_is_allowed_and_the_pointer_only_moves_forward() {
        let mut m = log();
        ManifestEdit::snapshot(snap(4), true).apply(&mut m).unwrap();
        // The same pointer again changes nothing.
        let before = m.clone();
        ManifestEdit::snapshot(snap(4), true).apply(&mut m).unwrap();
        assert_eq!(m, before);
        ManifestEdit::snapshot(snap(8), true).apply(&mut m).unwrap();
        assert!(m.is_empty());
        assert_eq!(m.next_sequence(), 9);
        let after = m.clone();
        // Back to an older one, or none at all: refused, nothing changes.
        let back = ManifestEdit::snapshot(snap(4), false).apply(&mut m);
        assert_eq!(back.unwrap_err().kind(), ErrorKind::Conflict);
        let clear = ManifestEdit {
            truncate_through: None,
            snapshot: Some(None),
        };
        assert_eq!(
            clear.apply(&mut m).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(m, after);
        // Same coverage, a later name: forward.
        let mut later = snap(8);
        later.location = "snapshots/8b".into();
        ManifestEdit::snapshot(later.clone(), false)
            .apply(&mut m)
            .unwrap();
        assert_eq!(m.snapshot(), Some(&later));
    }
}
