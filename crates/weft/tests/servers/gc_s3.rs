//! Retention GC with real producers on the real SeaweedFS server (the
//! scenario body is in `support/gc_cases.rs`, shared with the in-memory
//! run in `gc.rs`).

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::gc_cases::gc_collects_what_no_manifest_needs;

#[tokio::test]
async fn gc_collects_what_no_manifest_needs_on_seaweedfs() {
    let (store, _) = support::s3::store("gc_collects");
    gc_collects_what_no_manifest_needs(store).await;
}
