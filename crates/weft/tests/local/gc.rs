//! Retention GC with real producers: truncated segments, superseded
//! snapshots and a fenced writer's late upload are collected once older
//! than the grace period; referenced objects, uploads that may still be
//! committed, young objects and foreign names are kept; a dry run deletes
//! nothing; a commit that lands during a pass is respected; replicas that
//! find an object collected say `Trimmed`, not something vaguer.
//!
//! Ages: object stores stamp `last_modified` with their own clock (the
//! in-memory store with the system time), so a test makes objects "old"
//! by handing GC a clock that reads hours later.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};
use support::gc_cases::*;
use support::wal::manifest;
use weft::ErrorKind;
use weft::objects::RetryPolicy;
use weft::wal::KeepReason;
use weft::wal::{Gc, Manifest, Replica, SnapshotWriter};
use weft_testkit::hooked::{Before, HookedStore, Op, before};

#[tokio::test]
async fn gc_collects_what_no_manifest_needs_in_memory() {
    gc_collects_what_no_manifest_needs(Arc::new(InMemory::new())).await;
}

#[tokio::test]
async fn gc_without_a_manifest_deletes_nothing() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let orphan = format!("{SEGMENTS}/{}/{:016x}", ulid::Ulid::from_parts(1, 1), 0);
    store
        .put(&Path::from(orphan.as_str()), PutPayload::from_static(b"x"))
        .await
        .unwrap();
    let err = gc(&store, later(10 * HOUR)).run().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert!(list(&store, SEGMENTS).await.contains(&orphan));
    // A corrupt manifest is no better.
    store
        .put(&Path::from(MANIFEST), PutPayload::from_static(b"garbage"))
        .await
        .unwrap();
    let err = gc(&store, later(10 * HOUR)).run().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    assert!(list(&store, SEGMENTS).await.contains(&orphan));
}

/// Writes a log whose only writer run left `old` (two hours old in GC's
/// eyes) unreferenced, then returns the path of `old` and a manifest that
/// references it, for a hook to commit at the worst moment.
async fn log_with_a_late_commit(store: &Arc<dyn ObjectStore>) -> (String, Manifest) {
    let p = builder(store.clone()).open().await.unwrap();
    append(&p, "a").await;
    p.close().await.unwrap();
    let m = manifest(store, MANIFEST).await;
    // An upload of an older run that a (slow) writer commits late; it
    // belongs to no rule that would keep it, except being referenced.
    let old = format!("{SEGMENTS}/{}/{:016x}", ulid::Ulid::from_parts(1, 1), 0);
    let seg = weft::format::encode_segment(
        &["late"],
        weft::format::Compression::None,
        weft::format::SegmentVersion::V2,
    )
    .unwrap();
    store
        .put(&Path::from(old.as_str()), PutPayload::from(seg))
        .await
        .unwrap();
    let mut committed = m.clone();
    committed.append(old.clone(), vec![], 1).unwrap();
    (old, committed)
}

#[tokio::test]
async fn a_commit_that_lands_during_the_pass_is_respected() {
    // Landing between the listing and the decision.
    let hooked = Arc::new(HookedStore::new(Arc::new(InMemory::new())));
    let store: Arc<dyn ObjectStore> = hooked.clone();
    let (old, committed) = log_with_a_late_commit(&store).await;
    let bytes = committed.to_bytes().unwrap();
    hooked.add(before(move |call, inner| {
        let (op, path) = (call.op, call.path);
        let bytes = bytes.clone();
        async move {
            if op == Op::List && path.as_ref() == SEGMENTS {
                inner
                    .put(&Path::from(MANIFEST), bytes.into())
                    .await
                    .unwrap();
            }
            Before::Proceed
        }
    }));
    let report = gc(&store, later(2 * HOUR)).run().await.unwrap();
    assert!(report.deleted.is_empty(), "{report:?}");
    assert!(list(&store, SEGMENTS).await.contains(&old));

    // Landing after the decision, just before the deletes: the third read
    // of the manifest sees it.
    let hooked = Arc::new(HookedStore::new(Arc::new(InMemory::new())));
    let store: Arc<dyn ObjectStore> = hooked.clone();
    let (old, committed) = log_with_a_late_commit(&store).await;
    let bytes = committed.to_bytes().unwrap();
    let manifest_reads = Arc::new(AtomicUsize::new(0));
    let reads = manifest_reads.clone();
    hooked.add(before(move |call, inner| {
        let (op, path) = (call.op, call.path);
        let bytes = bytes.clone();
        let n = if op == Op::Get && path.as_ref() == MANIFEST {
            reads.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            0
        };
        async move {
            if n == 3 {
                inner
                    .put(&Path::from(MANIFEST), bytes.into())
                    .await
                    .unwrap();
            }
            Before::Proceed
        }
    }));
    let dry = gc(&store, later(2 * HOUR))
        .dry_run(true)
        .run()
        .await
        .unwrap();
    assert!(
        deleted(&dry).contains(&old),
        "without the commit it is garbage"
    );
    manifest_reads.store(0, Ordering::SeqCst);
    let report = gc(&store, later(2 * HOUR)).run().await.unwrap();
    assert_eq!(manifest_reads.load(Ordering::SeqCst), 3);
    assert!(!deleted(&report).contains(&old), "{report:?}");
    assert!(list(&store, SEGMENTS).await.contains(&old));
}

#[tokio::test]
async fn a_replica_that_loses_a_segment_to_gc_mid_poll_reports_trimmed() {
    let hooked = Arc::new(HookedStore::new(Arc::new(InMemory::new())));
    let store: Arc<dyn ObjectStore> = hooked.clone();
    let p = builder(store.clone()).open().await.unwrap();
    for t in ["a", "b", "c"] {
        append(&p, t).await;
    }
    let first_segment = manifest(&store, MANIFEST).await.entries()[0]
        .location
        .clone();
    // While the replica fetches the first segment, the writer truncates it
    // and GC deletes it.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let target = first_segment.clone();
    let done_rx = Arc::new(std::sync::Mutex::new(done_rx));
    hooked.add(before(move |call, inner| {
        let (op, path) = (call.op, call.path);
        let hit = op == Op::Get && path.as_ref() == target;
        let tx = tx.clone();
        let done_rx = done_rx.clone();
        async move {
            if hit {
                tx.send(()).unwrap();
                // Wait (bounded) for the truncation and delete.
                tokio::task::spawn_blocking(move || {
                    done_rx
                        .lock()
                        .unwrap()
                        .recv_timeout(Duration::from_secs(10))
                })
                .await
                .unwrap()
                .expect("the test truncated in time");
                let _ = inner;
            }
            Before::Proceed
        }
    }));
    let (seen, applier) = collecting();
    let mut replica = Replica::builder(store.clone(), MANIFEST, applier)
        .with_prefetch(1)
        .build();
    let poll = tokio::spawn(async move {
        let r = replica.poll().await;
        (r, replica)
    });
    rx.recv().await.unwrap();
    p.truncate_through(0).await.unwrap();
    hooked
        .inner()
        .delete(&Path::from(first_segment.as_str()))
        .await
        .unwrap();
    done_tx.send(()).unwrap();
    let (result, _replica) = poll.await.unwrap();
    let err = result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed, "{err}");
    assert!(texts(&seen).is_empty());
    hooked.clear();

    // A segment the manifest still lists but the store lost: corrupt.
    let second = manifest(&store, MANIFEST).await.entries()[0]
        .location
        .clone();
    store.delete(&Path::from(second.as_str())).await.unwrap();
    let (_, applier) = collecting();
    let mut replica = Replica::builder(store.clone(), MANIFEST, applier).build();
    assert_eq!(replica.poll().await.unwrap_err().kind(), ErrorKind::Corrupt);
    p.close().await.unwrap();
}

#[tokio::test]
async fn a_replica_bootstrapping_from_a_collected_snapshot_follows_the_new_one() {
    let hooked = Arc::new(HookedStore::new(Arc::new(InMemory::new())));
    let store: Arc<dyn ObjectStore> = hooked.clone();
    let p = builder(store.clone()).open().await.unwrap();
    for t in ["a", "b", "c"] {
        append(&p, t).await;
    }
    let snaps = SnapshotWriter::new(store.clone(), MANIFEST);
    let s1 = snaps.write(&p, Bytes::from("a"), 0).await.unwrap();
    // When the replica goes for the first snapshot, a newer one replaces
    // it and the old one is collected.
    let target = s1.location.clone();
    let fired = Arc::new(AtomicUsize::new(0));
    let once = fired.clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let done_rx = Arc::new(std::sync::Mutex::new(done_rx));
    hooked.add(before(move |call, _inner| {
        let (op, path) = (call.op, call.path);
        let hit =
            op == Op::Get && path.as_ref() == target && once.fetch_add(1, Ordering::SeqCst) == 0;
        let tx = tx.clone();
        let done_rx = done_rx.clone();
        async move {
            if hit {
                tx.send(()).unwrap();
                tokio::task::spawn_blocking(move || {
                    done_rx
                        .lock()
                        .unwrap()
                        .recv_timeout(Duration::from_secs(10))
                })
                .await
                .unwrap()
                .expect("the test replaced the snapshot in time");
            }
            Before::Proceed
        }
    }));
    let mut replica = Replica::builder(store.clone(), MANIFEST, Joined(Vec::new())).build();
    let poll = tokio::spawn(async move {
        let r = replica.poll().await;
        (r, replica)
    });
    rx.recv().await.unwrap();
    snaps.write(&p, Bytes::from("a,b"), 1).await.unwrap();
    hooked
        .inner()
        .delete(&Path::from(s1.location.as_str()))
        .await
        .unwrap();
    done_tx.send(()).unwrap();
    let (result, replica) = poll.await.unwrap();
    let out = result.unwrap();
    assert!(out.restored_snapshot);
    assert_eq!(replica.applier().0, ["a", "b", "c"]);
    p.close().await.unwrap();
}

// ------------------------------------------------------------ the window

/// One writer of a CAS that references a fresh upload (the class GC must
/// protect), made to try its CAS only after the commit window passed while
/// someone else rewrote the manifest — when GC, with no grace period, has
/// already deleted the upload.
#[derive(Debug, Clone, Copy)]
enum LateReference {
    /// The producer's segment commit, held back by failing manifest puts.
    Commit,
    /// The producer's snapshot pointer (`set_snapshot`) for an object
    /// uploaded long before.
    WriterSnapshot,
    /// A tool's snapshot pointer (`edit_unowned`, keeping the epoch).
    ToolSnapshot,
}

/// Every kind of late reference: the writer refuses it (`Unavailable`:
/// nothing recorded), GC deletes the upload, and no manifest ever names a
/// missing object. Without the writers' window checks, each case lands a
/// manifest on a deleted object.
#[tokio::test(start_paused = true)]
async fn a_cas_past_the_commit_window_never_lands_on_a_collected_upload() {
    use support::stamped::{SimClock, Stamper};
    use weft::wal::window::{COMMIT_WINDOW, STAMP_MARGIN};
    use weft::wal::{ManifestEdit, edit_unowned};
    use weft_testkit::fault::{FaultConfig, FaultStore};

    let past_window = COMMIT_WINDOW + STAMP_MARGIN + Duration::from_secs(5);
    for case in [
        LateReference::Commit,
        LateReference::WriterSnapshot,
        LateReference::ToolSnapshot,
    ] {
        let clock = Arc::new(SimClock::new());
        let stamper = Arc::new(Stamper::new(
            Arc::new(InMemory::new()),
            clock.clone(),
            MANIFEST,
        ));
        let direct: Arc<dyn ObjectStore> = stamper.clone();
        let faulty = FaultStore::wrap(direct.clone(), FaultConfig::default());
        let patient = RetryPolicy::default()
            .with_deadline(Duration::from_secs(1_000))
            .with_max_attempts(1_000)
            .with_base_backoff(Duration::from_secs(5))
            .with_max_backoff(Duration::from_secs(5))
            .with_jitter(0.0)
            .with_attempt_timeout(None);
        let p = Arc::new(
            builder(faulty.clone())
                .with_clock(clock.clone())
                .with_retry_policy(patient.clone())
                .open()
                .await
                .unwrap(),
        );
        append(&p, "a").await;
        let tool = SnapshotWriter::new(faulty.clone(), MANIFEST)
            .with_clock(clock.clone())
            .with_seed(3)
            .with_retry_policy(patient.clone());
        let outcome = match case {
            LateReference::Commit => {
                faulty.fail_puts_under(MANIFEST);
                let pending = p.append(vec![Bytes::from("b")], None).await.unwrap();
                tokio::time::sleep(past_window).await;
                // Someone else writes the manifest: a tool's truncation.
                edit_unowned(
                    &direct,
                    &Path::from(MANIFEST),
                    &ManifestEdit::truncate(0),
                    &patient,
                )
                .await
                .unwrap();
                collect_now(&direct, &clock).await;
                faulty.clear_put_failures();
                pending.wait().await.map(|_| ())
            }
            LateReference::WriterSnapshot | LateReference::ToolSnapshot => {
                let pointer = tool.upload(Bytes::from("state"), 0).await.unwrap();
                tokio::time::sleep(past_window).await;
                append(&p, "b").await;
                // Every write of the edit lands only long after it was sent.
                faulty.set_config(FaultConfig {
                    put: weft_testkit::fault::OpFaults {
                        late: 1.0,
                        ..Default::default()
                    },
                    hang_for: Duration::from_secs(1),
                    late_by: Duration::from_secs(1),
                    ..FaultConfig::default()
                });
                let edit = tokio::spawn({
                    let faulty: Arc<dyn ObjectStore> = faulty.clone();
                    let p = p.clone();
                    async move {
                        match case {
                            LateReference::WriterSnapshot => p.set_snapshot(pointer, true).await,
                            _ => edit_unowned(
                                &faulty,
                                &Path::from(MANIFEST),
                                &ManifestEdit::snapshot(pointer, true),
                                &patient,
                            )
                            .await
                            .map(|_| ()),
                        }
                    }
                });
                // The edit has looked at the object and the manifest; a CAS
                // it sent now would land in a second. GC decides meanwhile.
                tokio::time::sleep(Duration::from_millis(100)).await;
                collect_now(&direct, &clock).await;
                let result = edit.await.unwrap();
                tokio::time::sleep(Duration::from_secs(10)).await;
                faulty.set_config(FaultConfig::default());
                result
            }
        };
        assert_eq!(
            outcome.map_err(|e| e.kind()),
            Err(ErrorKind::Unavailable),
            "{case:?}: refused, nothing recorded"
        );
        assert!(
            !stamper.deleted().is_empty(),
            "{case:?}: GC deleted the upload"
        );
        assert_eq!(stamper.violations(), Vec::<String>::new(), "{case:?}");
        let mut fresh = Replica::builder(direct.clone(), MANIFEST, Joined(Vec::new())).build();
        fresh
            .poll()
            .await
            .unwrap_or_else(|e| panic!("{case:?}: {e}"));
        let _ = p.close().await;
    }
}

/// A GC pass with no grace period, on the simulated clock.
async fn collect_now(store: &Arc<dyn ObjectStore>, clock: &Arc<support::stamped::SimClock>) {
    Gc::new(store.clone(), MANIFEST, SEGMENTS)
        .with_grace(Duration::ZERO)
        .with_clock(clock.clone())
        .run()
        .await
        .unwrap();
}

/// The race first reported: a snapshot's manifest CAS still on its way
/// (it lands only after its caller timed out) while GC runs with
/// `--grace-secs 0`. GC used to delete the new snapshot object, which the
/// manifest then named: every later read failed `Corrupt`. Now the object
/// is kept as pending, the CAS lands, and the log reads from the snapshot.
#[tokio::test(start_paused = true)]
async fn gc_with_no_grace_keeps_a_snapshot_whose_cas_lands_late() {
    use support::stamped::{SimClock, Stamper};
    use weft::wal::{ManifestEdit, edit_unowned};
    use weft_testkit::fault::{FaultConfig, FaultStore, OpFaults};

    let clock = Arc::new(SimClock::new());
    let stamper = Arc::new(Stamper::new(
        Arc::new(InMemory::new()),
        clock.clone(),
        MANIFEST,
    ));
    let direct: Arc<dyn ObjectStore> = stamper.clone();
    let faulty = FaultStore::wrap(direct.clone(), FaultConfig::default());
    let p = builder(direct.clone())
        .with_clock(clock.clone())
        .open()
        .await
        .unwrap();
    for text in ["a", "b", "c"] {
        append(&p, text).await;
    }
    let pointer = SnapshotWriter::new(faulty.clone(), MANIFEST)
        .with_clock(clock.clone())
        .upload(Bytes::from("a,b"), 1)
        .await
        .unwrap();
    faulty.set_config(FaultConfig {
        put: OpFaults {
            late: 1.0,
            ..OpFaults::default()
        },
        hang_for: Duration::from_secs(2),
        late_by: Duration::from_secs(3),
        ..FaultConfig::default()
    });
    let retry = RetryPolicy::default().with_max_attempts(1);
    let edit = tokio::spawn({
        let faulty: Arc<dyn ObjectStore> = faulty.clone();
        let pointer = pointer.clone();
        async move {
            edit_unowned(
                &faulty,
                &Path::from(MANIFEST),
                &ManifestEdit::snapshot(pointer, true),
                &retry,
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let report = Gc::new(direct.clone(), MANIFEST, SEGMENTS)
        .with_grace(Duration::ZERO)
        .with_clock(clock.clone())
        .run()
        .await
        .unwrap();
    assert!(
        kept(&report, KeepReason::Pending).contains(&pointer.location),
        "{report:?}"
    );
    assert_eq!(
        edit.await.unwrap().unwrap_err().kind(),
        ErrorKind::Indeterminate,
        "the caller gave up; the CAS is still on its way"
    );
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        manifest(&direct, MANIFEST).await.snapshot(),
        Some(&pointer),
        "the late CAS landed"
    );
    assert_eq!(stamper.violations(), Vec::<String>::new());
    let mut fresh = Replica::builder(direct.clone(), MANIFEST, Joined(Vec::new())).build();
    fresh.poll().await.unwrap();
    assert_eq!(fresh.applier().0, vec!["a", "b", "c"]);
    p.close().await.unwrap();
}

/// The checker must catch what it claims to: a manifest landing on a
/// deleted object, and a delete of a referenced one.
mod stamper_checks {
    use super::*;
    use futures::TryStreamExt;
    use object_store::ObjectMeta;
    use object_store::memory::InMemory;
    use std::time::Duration;
    use support::stamped::{EPOCH_MS, SimClock, Stamper};
    use weft::format::ManifestVersion;
    use weft::wal::Manifest;

    const MANIFEST: &str = "wal/manifest";

    fn stamper() -> (Arc<Stamper>, Arc<dyn ObjectStore>) {
        let clock = Arc::new(SimClock::new());
        let s = Arc::new(Stamper::new(Arc::new(InMemory::new()), clock, MANIFEST));
        (s.clone(), s)
    }

    fn manifest_with(locations: &[&str]) -> Bytes {
        let mut m = Manifest::new(ManifestVersion::V4);
        for l in locations {
            m.append(*l, vec![], 1).unwrap();
        }
        m.to_bytes().unwrap()
    }

    #[tokio::test]
    async fn a_manifest_naming_a_deleted_object_and_a_delete_of_a_referenced_one_are_caught() {
        let (s, store) = stamper();
        let seg = Path::from("wal/seg/a/0");
        store.put(&seg, "x".into()).await.unwrap();
        store.delete(&seg).await.unwrap();
        store
            .put(
                &Path::from(MANIFEST),
                manifest_with(&["wal/seg/a/0"]).into(),
            )
            .await
            .unwrap();
        let v = s.violations();
        assert!(v[0].contains("does not exist (deleted: true)"), "{v:?}");

        let (s, store) = stamper();
        store.put(&seg, "x".into()).await.unwrap();
        store
            .put(
                &Path::from(MANIFEST),
                manifest_with(&["wal/seg/a/0"]).into(),
            )
            .await
            .unwrap();
        assert!(s.violations().is_empty());
        store.delete(&seg).await.unwrap();
        assert!(s.violations()[0].contains("current manifest references it"));
    }

    #[tokio::test(start_paused = true)]
    async fn objects_carry_simulated_stamps() {
        let (_, store) = stamper();
        let a = Path::from("wal/seg/a/0");
        store.put(&a, "x".into()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(90)).await;
        let b = Path::from("wal/seg/a/1");
        store.put(&b, "y".into()).await.unwrap();
        let ms = |m: &ObjectMeta| m.last_modified.timestamp_millis();
        let (ha, hb) = (store.head(&a).await.unwrap(), store.head(&b).await.unwrap());
        assert_eq!(ms(&hb) - ms(&ha), 90_000);
        let listed: Vec<ObjectMeta> = store.list(None).try_collect().await.unwrap();
        assert!(
            listed
                .iter()
                .all(|m| m.last_modified.timestamp_millis() >= EPOCH_MS as i64)
        );
    }
}
