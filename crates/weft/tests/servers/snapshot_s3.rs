//! Base snapshots end to end on the real SeaweedFS server (scenario bodies
//! in `support/snapshot_cases.rs`, shared with the in-memory runs in
//! `snapshot.rs`).

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::snapshot_cases::{
    a_tool_snapshots_beside_a_live_writer, an_object_cursor_carries_a_replica_across_restarts,
    snapshot_bootstraps_new_replicas,
};

#[tokio::test]
async fn snapshot_bootstraps_new_replicas_on_seaweedfs() {
    let (store, _) = support::s3::store("snapshot_bootstrap");
    snapshot_bootstraps_new_replicas(store).await;
}

#[tokio::test]
async fn a_tool_snapshots_beside_a_live_writer_on_seaweedfs() {
    let (store, _) = support::s3::store("snapshot_unowned");
    a_tool_snapshots_beside_a_live_writer(store).await;
}

#[tokio::test]
async fn an_object_cursor_carries_a_replica_across_restarts_on_seaweedfs() {
    let (store, _) = support::s3::store("object_cursor");
    an_object_cursor_carries_a_replica_across_restarts(store).await;
}
