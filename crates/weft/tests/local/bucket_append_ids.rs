//! Exactly-once appends on a bucket log, across writer failover: an append
//! whose outcome was `Indeterminate` (its manifest commit went unanswered)
//! is retried with its append ids on the next writer, which answers with
//! the original result when the commit had landed and writes the entries
//! when it had not; a retry after a plain failover, and of a batch and a
//! conditional append, answers with the originals; ids are rebuilt from
//! the bucket within `BucketOptions::append_id_window`. Here on an
//! in-memory store; the same scenarios (`support/append_id_cases.rs`) run
//! on the servers in `bucket_append_ids_s3.rs` and
//! `bucket_append_ids_azure.rs`.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::sync::Arc;

use object_store::memory::InMemory;
use support::append_id_cases::{
    a_trim_forgets_the_ids_it_drops, a_writer_on_a_cache_directory_knows_the_ids_before_it,
    an_indeterminate_append_is_retried_on_the_next_writer,
    retries_after_a_failover_answer_with_the_originals,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_indeterminate_append_is_retried_on_the_next_writer_in_memory() {
    an_indeterminate_append_is_retried_on_the_next_writer(Arc::new(InMemory::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_after_a_failover_answer_with_the_originals_in_memory() {
    retries_after_a_failover_answer_with_the_originals(Arc::new(InMemory::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trim_forgets_the_ids_it_drops_in_memory() {
    a_trim_forgets_the_ids_it_drops(Arc::new(InMemory::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_on_a_cache_directory_knows_the_ids_before_it_in_memory() {
    a_writer_on_a_cache_directory_knows_the_ids_before_it(Arc::new(InMemory::new())).await;
}
