//! The writer lease of bucket writers on the real SeaweedFS server (the
//! scenario is in `support/writer_lease_cases.rs`, shared with the
//! in-memory run in `writer_lease.rs`).

use crate::support;

use support::writer_lease_cases::bucket_writers_see_each_others_lease;

#[tokio::test]
async fn bucket_writers_see_each_others_lease_on_seaweedfs() {
    let (store, _) = support::s3::store("writer_lease");
    bucket_writers_see_each_others_lease(store).await;
}
