//! The cache directory reopen scenario of `tests/bucket_cache.rs` on the
//! real SeaweedFS server (the body is in `support/bucket_cache_cases.rs`).

#![allow(clippy::disallowed_methods)]

mod support;

use support::bucket_cache_cases::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopens_read_only_what_changed_on_seaweedfs() {
    let (store, _) = support::s3::store("bucket_cache_reopen");
    reopens_read_only_what_changed(store).await;
}
