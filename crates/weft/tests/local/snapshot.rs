//! Base snapshots end to end: a real producer writes the log and a snapshot,
//! a new replica restores the snapshot and tails from the record after it,
//! replicas that were already tailing go on, stale cursors are told they
//! were trimmed. On the in-memory store; `snapshot_s3.rs` runs the
//! scenarios of `support/snapshot_cases.rs` on the SeaweedFS server.

use crate::support;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use support::snapshot_cases::*;
use support::wal::manifest;
use weft::clock::ManualClock;
use weft::format::ManifestVersion;
use weft::wal::{Applier, FnApplier, Record, Replica, write_snapshot};
use weft::{ErrorKind, Result};

#[tokio::test]
async fn snapshot_bootstraps_new_replicas_in_memory() {
    snapshot_bootstraps_new_replicas(Arc::new(InMemory::new())).await;
}

#[tokio::test]
async fn a_tool_snapshots_beside_a_live_writer_in_memory() {
    a_tool_snapshots_beside_a_live_writer(Arc::new(InMemory::new())).await;
}

#[tokio::test]
async fn an_applier_without_restore_cannot_bootstrap_and_says_so() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let p = builder(store.clone()).open().await.unwrap();
    append(&p, &["a=1", "b=1"]).await;
    write_snapshot(
        store.clone(),
        &p,
        Bytes::from_static(b"{}"),
        0,
        ManualClock::new(5),
    )
    .await
    .unwrap();
    let mut replica = Replica::builder(
        store.clone(),
        MANIFEST,
        FnApplier::new(|_r: &Record| Ok(())),
    )
    .build();
    assert_eq!(
        replica.poll().await.unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    assert_eq!(replica.cursor(), None, "nothing applied, no cursor");
    p.close().await.unwrap();
}

#[tokio::test]
async fn segment_numbered_logs_snapshot_by_entry_and_v1_refuses() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let p = builder(store.clone())
        .with_manifest_version(ManifestVersion::V2)
        .open()
        .await
        .unwrap();
    // v2 numbers entries: three appends, three segments 0, 1, 2.
    for (i, items) in [["a=1", "b=1"], ["a=2", "c=1"], ["d=1", "e=1"]]
        .iter()
        .enumerate()
    {
        assert_eq!(append(&p, items).await, i as u64);
    }
    let state = fold(&["a=1", "b=1", "a=2", "c=1"], 4);
    write_snapshot(
        store.clone(),
        &p,
        Bytes::from(serde_json::to_vec(&state).unwrap()),
        1,
        ManualClock::new(START_MS),
    )
    .await
    .unwrap();
    assert_eq!(manifest(&store, MANIFEST).await.first_sequence(), 2);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    struct Entries(Arc<std::sync::Mutex<Vec<(u64, u32)>>>, Option<u64>);
    #[async_trait]
    impl Applier for Entries {
        async fn apply(&mut self, r: &Record) -> Result<()> {
            self.0.lock().unwrap().push((r.entry_sequence, r.index));
            Ok(())
        }
        async fn restore(&mut self, _s: Bytes, through: u64) -> Result<()> {
            self.1 = Some(through);
            Ok(())
        }
    }
    let mut replica =
        Replica::builder(store.clone(), MANIFEST, Entries(seen.clone(), None)).build();
    replica.poll().await.unwrap();
    assert_eq!(replica.applier().1, Some(1));
    assert_eq!(*seen.lock().unwrap(), vec![(2, 0), (2, 1)]);
    p.close().await.unwrap();

    let v1: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let p = builder(v1.clone())
        .with_manifest_version(ManifestVersion::V1)
        .open()
        .await
        .unwrap();
    append(&p, &["a=1"]).await;
    let err = write_snapshot(
        v1.clone(),
        &p,
        Bytes::from_static(b"{}"),
        0,
        ManualClock::new(1),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(
        list(&v1, "wal/snapshots").await.is_empty(),
        "nothing left behind"
    );
    p.close().await.unwrap();
}

#[tokio::test]
async fn an_object_cursor_carries_a_replica_across_restarts_in_memory() {
    an_object_cursor_carries_a_replica_across_restarts(Arc::new(InMemory::new())).await;
}
