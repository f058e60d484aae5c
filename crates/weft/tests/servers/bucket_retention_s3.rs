//! Retention of the shared log on a bucket in the real SeaweedFS server
//! (the scenario body is in `support/bucket_retention_cases.rs`, shared
//! with the in-memory run in `bucket_retention.rs`).

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::bucket_retention_cases::trim_is_durable_and_every_reader_honours_it;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trim_is_durable_and_every_reader_honours_it_on_seaweedfs() {
    let (store, _) = support::s3::store("bucket_retention");
    trim_is_durable_and_every_reader_honours_it(store).await;
}
