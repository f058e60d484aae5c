//! The writer lease scenario of bucket writers, shared by
//! `tests/local/writer_lease.rs` (in memory) and `tests/servers/writer_lease_s3.rs`
//! (SeaweedFS).

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use weft::storage::bucket::{BucketOptions, BucketStorage};
use weft::{AppendRequest, ErrorKind, Log, LogTag};

/// The bucket log's writer keeps the same lease: a second `BucketStorage`
/// on a log a service is writing is refused; `take_over` is the failover.
pub async fn bucket_writers_see_each_others_lease(store: Arc<dyn ObjectStore>) {
    let options = |take_over| {
        BucketOptions::default()
            .with_take_over(take_over)
            .with_lease_renew_every(Duration::from_millis(300))
            .with_writer_name(Some("orders service".into()))
    };
    let tag = LogTag::new("orders").unwrap();
    let service = Log::new(
        BucketStorage::open(store.clone(), "log", options(false))
            .await
            .unwrap(),
    );
    service
        .append(AppendRequest::new(tag.clone(), "a"))
        .await
        .unwrap();
    let err = BucketStorage::open(store.clone(), "log", options(false))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Locked);
    assert!(err.message().contains("orders service"), "{err}");
    service
        .append(AppendRequest::new(tag.clone(), "b"))
        .await
        .unwrap();
    let failover = Log::new(
        BucketStorage::open(store.clone(), "log", options(true))
            .await
            .unwrap(),
    );
    let fenced = service.append(AppendRequest::new(tag.clone(), "c")).await;
    assert_eq!(fenced.unwrap_err().kind(), ErrorKind::Fenced);
    failover
        .append(AppendRequest::new(tag.clone(), "c"))
        .await
        .unwrap();
    failover.close().await.unwrap();
    let _ = service.close().await;
    // Released on close: the next writer opens at once.
    let next = Log::new(
        BucketStorage::open(store, "log", options(false))
            .await
            .unwrap(),
    );
    assert_eq!(next.read_all(&tag).await.unwrap().len(), 3);
    next.close().await.unwrap();
}
