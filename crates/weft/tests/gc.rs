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

mod support;

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
use weft::wal::{Manifest, Replica, SnapshotWriter};
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
