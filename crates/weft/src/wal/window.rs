//! The commit window: how long an object uploaded create-only may wait for
//! the manifest CAS that references it — the rule that lets GC delete what
//! no manifest references without ever deleting what one is about to.
//!
//! # The class of objects it protects
//!
//! Segments, snapshots (and the log states the bucket log stores as
//! snapshots), and any later kind (checkpoints) are written the same way:
//! the object is uploaded first, create-only, under a fresh name; then one
//! manifest CAS makes it referenced. Between the two the object exists and
//! is unreferenced — exactly what GC deletes. And a CAS may land late: a
//! server can apply a request its client already gave up on, as long as
//! the manifest is still at the version the request was conditioned on.
//!
//! # The rule
//!
//! Writers: a CAS that references an object may only be conditioned on a
//! manifest version its writer learned (read, or got back from its own
//! previous CAS) at most [`COMMIT_WINDOW`] after the object's upload began.
//! Writers check it before every attempt; past the window they stop
//! (the producer halts, an edit fails) rather than reference the object.
//!
//! GC: an unreferenced object may be deleted once the manifest GC decided
//! on was *written* more than [`COMMIT_WINDOW`] + [`STAMP_MARGIN`] after
//! the object was (both times are the store's own `last_modified` stamps),
//! or when it can never be referenced again for a structural reason (see
//! [`super::gc`]).
//!
//! Why that is safe, for any grace period: a CAS can only land on the
//! version it was conditioned on, and manifest versions never repeat (see
//! [`super::maintenance`]). A CAS conditioned on the manifest GC read was
//! conditioned on a version learned after that version was written, so
//! (by the writer's rule) no more than the window after the object's upload
//! began — which GC has seen is not the case. A CAS conditioned on any
//! older version can no longer land at all. GC may decide on a manifest
//! that is already stale: newer versions were written later still, so the
//! argument holds for them too.
//!
//! Why no clock is compared across machines: the writer measures the
//! window on its own monotonic clock, from just before its upload to just
//! after it learned the version; GC compares two stamps of the same store.
//! The margin covers what separates the two: the stamps' resolution
//! (HTTP dates are whole seconds) and the skew between the store's own
//! nodes. A writer process frozen at any point cannot break the rule: what
//! matters is when the version it conditions on was learned, not when the
//! request is sent.

use std::time::Duration;

use tokio::time::Instant;

use crate::clock::monotonic_now;
use crate::error::{Error, ErrorKind, Result};

/// The longest time from the start of an object's upload to the moment its
/// writer learned the manifest version a CAS referencing it is conditioned
/// on. A constant of the format, not a setting: GC must know every
/// writer's bound.
pub const COMMIT_WINDOW: Duration = Duration::from_secs(120);

/// What GC adds to [`COMMIT_WINDOW`] for the store's stamps: their
/// one-second resolution (twice) and skew between the store's nodes.
pub const STAMP_MARGIN: Duration = Duration::from_secs(10);

/// When the upload of an object that a later CAS will reference began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct UploadStart(Instant);

impl UploadStart {
    /// Now: call it just before the upload's first attempt.
    pub fn now() -> Self {
        UploadStart(monotonic_now())
    }

    /// The start of an upload that began at `at`.
    pub fn at(at: Instant) -> Self {
        UploadStart(at)
    }

    /// The instant.
    pub fn instant(self) -> Instant {
        self.0
    }

    /// Whether a CAS referencing the object may be conditioned on a
    /// manifest version learned at `learned`.
    pub fn allows(self, learned: Instant) -> bool {
        learned.saturating_duration_since(self.0) <= COMMIT_WINDOW
    }

    /// `Ok` when [`allows`](Self::allows); otherwise the error the writer
    /// stops with: `what` was uploaded too long ago to be referenced.
    ///
    /// Errors: `Unavailable` (nothing was written by this check; the object
    /// stays unreferenced and GC collects it).
    pub fn check(self, learned: Instant, what: &str) -> Result<()> {
        if self.allows(learned) {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::Unavailable,
            format!(
                "{what} was uploaded {:.1} s before the manifest version it would be committed \
                 on was read, more than the {} s commit window (GC may delete unreferenced \
                 objects that old); it stays unreferenced",
                learned.saturating_duration_since(self.0).as_secs_f64(),
                COMMIT_WINDOW.as_secs()
            ),
        ))
    }
}

/// The writer's rule on store stamps, for a writer that did not time the
/// upload itself (an edit recording a snapshot someone else uploaded): a
/// CAS conditioned on a manifest written at `manifest_written_ms` may
/// reference an object written at `object_written_ms`.
///
/// Errors: `Unavailable` naming `what`, when it may not.
pub fn check_stamps(manifest_written_ms: i64, object_written_ms: i64, what: &str) -> Result<()> {
    let gap = manifest_written_ms.saturating_sub(object_written_ms);
    if gap <= COMMIT_WINDOW.as_millis() as i64 {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Unavailable,
        format!(
            "{what} was stored {:.1} s before the manifest version the edit would be made on, \
             more than the {} s commit window (GC may delete unreferenced objects that old); \
             store it again",
            gap as f64 / 1000.0,
            COMMIT_WINDOW.as_secs()
        ),
    ))
}

/// Whether GC may delete an unreferenced object written at
/// `object_written_ms` on the strength of a manifest written at
/// `manifest_written_ms` (both store stamps, ms since the Unix epoch).
pub fn outside_window(manifest_written_ms: i64, object_written_ms: i64) -> bool {
    let bound = (COMMIT_WINDOW + STAMP_MARGIN).as_millis() as i64;
    manifest_written_ms.saturating_sub(object_written_ms) > bound
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_window_is_measured_from_the_upload_start() {
        let start = UploadStart::now();
        assert!(start.allows(start.instant()));
        assert!(start.allows(start.instant() + COMMIT_WINDOW));
        let late = start.instant() + COMMIT_WINDOW + Duration::from_millis(1);
        assert!(!start.allows(late));
        assert_eq!(
            start.check(late, "segment x").unwrap_err().kind(),
            ErrorKind::Unavailable
        );
        // A version learned before the upload began is always fine.
        let early = UploadStart::at(start.instant() + Duration::from_secs(5));
        assert!(early.allows(start.instant()));
    }

    #[test]
    fn gc_needs_the_window_and_the_margin_between_the_stamps() {
        let edge = (COMMIT_WINDOW + STAMP_MARGIN).as_millis() as i64;
        assert!(!outside_window(1_000 + edge, 1_000));
        assert!(outside_window(1_001 + edge, 1_000));
        assert!(
            !outside_window(0, 1_000),
            "an object newer than the manifest"
        );
        assert!(!outside_window(i64::MIN, i64::MAX));
    }
}
