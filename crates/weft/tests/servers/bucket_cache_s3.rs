//! The cache directory reopen scenario of `tests/local/bucket_cache.rs` and the
//! stream-state checkpoint scenarios of `tests/local/bucket_states.rs` on the
//! real SeaweedFS server (the bodies are in `support/bucket_cache_cases.rs`
//! and `support/bucket_states_cases.rs`).

#![allow(clippy::disallowed_methods)]

use crate::support;

use support::bucket_cache_cases::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopens_read_only_what_changed_on_seaweedfs() {
    let (store, _) = support::s3::store("bucket_cache_reopen");
    reopens_read_only_what_changed(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_writer_opens_from_the_newest_checkpoint_on_seaweedfs() {
    let (store, _) = support::s3::store("bucket_states_open");
    support::bucket_states_cases::a_stateless_writer_opens_from_the_newest_checkpoint(store, true)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_or_foreign_checkpoints_are_passed_over_on_seaweedfs() {
    let (store, _) = support::s3::store("bucket_states_damaged");
    support::bucket_states_cases::damaged_or_foreign_checkpoints_are_passed_over(store).await;
}
