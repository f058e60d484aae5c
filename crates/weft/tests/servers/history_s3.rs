//! The history page scenarios of `tests/local/history.rs` on the real SeaweedFS
//! server (the bodies are in `support/history_cases.rs`).

#![allow(clippy::disallowed_methods)]

use crate::support;

use support::history_cases::*;

#[tokio::test]
async fn long_logs_keep_a_bounded_manifest_on_seaweedfs() {
    let (store, _) = support::s3::store("history_bounded");
    long_logs_keep_a_bounded_manifest(store).await;
}

#[tokio::test]
async fn truncation_into_history_is_exact_and_gc_keeps_the_live_on_seaweedfs() {
    let (store, _) = support::s3::store("history_truncation");
    truncation_into_history_is_exact_and_gc_keeps_the_live(store).await;
}

#[tokio::test]
async fn v4_logs_upgrade_in_place_on_seaweedfs() {
    let (store, _) = support::s3::store("history_upgrade");
    v4_logs_upgrade_in_place(store).await;
}
