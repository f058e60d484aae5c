//! Stream-state checkpoints on the in-memory store (SeaweedFS:
//! `bucket_cache_s3.rs`): a writer with no local state opens from the
//! newest checkpoint, reading only the entries after it before it takes
//! appends; a damaged checkpoint, or one of another log, is passed over.

#![allow(clippy::disallowed_methods)]

mod support;

use object_store::memory::InMemory;
use support::bucket_states_cases::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_writer_opens_from_the_newest_checkpoint_in_memory() {
    a_stateless_writer_opens_from_the_newest_checkpoint(Arc::new(InMemory::new()), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_on_an_empty_cache_dir_opens_from_the_newest_checkpoint_in_memory() {
    a_stateless_writer_opens_from_the_newest_checkpoint(Arc::new(InMemory::new()), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_or_foreign_checkpoints_are_passed_over_in_memory() {
    damaged_or_foreign_checkpoints_are_passed_over(Arc::new(InMemory::new())).await;
}
