//! The shared log on a bucket in the real Azurite server: the conformance
//! suite on the writer, a follower that sees exactly the writer's log
//! across a failover, and a reopened writer (scenario bodies in
//! `support/bucket_log_cases.rs`, shared with the in-memory runs).

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use support::bucket_log_cases::{
    follower_sees_the_writers_log, reopened_writer_resumes_counters_and_kv_holds_across_handles,
    writer,
};
use weft_testkit::conformance::Fixture;

weft_testkit::conformance_suite!(bucket_azurite, || async {
    let (store, _) = support::azure::store("bucket_conformance");
    Fixture::new(writer(store).await)
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_sees_the_writers_log_on_azurite() {
    let (store, _) = support::azure::store("bucket_follower");
    follower_sees_the_writers_log(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopened_writer_resumes_counters_and_kv_holds_across_handles_on_azurite() {
    let (store, _) = support::azure::store("bucket_reopen");
    reopened_writer_resumes_counters_and_kv_holds_across_handles(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erase_removes_payloads_from_the_bucket_on_azurite() {
    support::bucket_log_cases::erase_removes_payloads_from_the_bucket(
        support::azure::store("bucket_erase").0,
    )
    .await;
}
