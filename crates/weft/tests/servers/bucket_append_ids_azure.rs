//! Exactly-once appends on a bucket log in the real Azurite server
//! (scenario bodies in `support/append_id_cases.rs`, shared with the
//! in-memory runs of `tests/local/bucket_append_ids.rs`).

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::append_id_cases::{
    a_writer_on_a_cache_directory_knows_the_ids_before_it,
    an_indeterminate_append_is_retried_on_the_next_writer,
    retries_after_a_failover_answer_with_the_originals,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indeterminate_append_is_retried_on_the_next_writer_on_azurite() {
    let (store, _) = support::azure::store("append_ids_indeterminate");
    an_indeterminate_append_is_retried_on_the_next_writer(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_after_a_failover_answer_with_the_originals_on_azurite() {
    let (store, _) = support::azure::store("append_ids_failover");
    retries_after_a_failover_answer_with_the_originals(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_on_a_cache_directory_knows_the_ids_before_it_on_azurite() {
    let (store, _) = support::azure::store("append_ids_cache");
    a_writer_on_a_cache_directory_knows_the_ids_before_it(store).await;
}
