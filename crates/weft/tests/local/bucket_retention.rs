//! Retention of the shared log on a bucket: a trim is durable (the log
//! state goes into the WAL's snapshot), running followers drop what the
//! manifest no longer holds, followers and writers that start on a trimmed
//! log begin at the first live entry with every stream's numbering intact
//! (even streams whose entries are all gone), and GC afterwards leaves a
//! log everyone still reads the same. On the in-memory store;
//! `bucket_retention_s3.rs` runs the shared scenario
//! (`support/bucket_retention_cases.rs`) on the SeaweedFS server.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use support::bucket_retention_cases::*;
use support::wal::manifest;
use weft::objects::RetryPolicy;
use weft::storage::bucket::{self, BucketFollower, BucketStorage};
use weft::{AppendRequest, ErrorKind, Position};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trim_is_durable_and_every_reader_honours_it_in_memory() {
    trim_is_durable_and_every_reader_honours_it(Arc::new(InMemory::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trimming_everything_leaves_a_log_that_goes_on() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let w1 = writer(&store).await;
    for i in 0..4 {
        w1.append(AppendRequest::new(tag("t"), format!("{i}")))
            .await
            .unwrap();
    }
    w1.trim(3).await.unwrap();
    assert_eq!(w1.latest_seqnum().await.unwrap(), None);
    assert_eq!(w1.latest_version(&tag("t")).await.unwrap(), Some(3));
    let f = follower(&store).await;
    assert_eq!(f.tip().await.unwrap().first, 4);
    assert_eq!(f.tip().await.unwrap().next, 4);
    assert_eq!(f.latest_version(&tag("t")).await.unwrap(), Some(3));
    w1.close().await.unwrap();
    let w2 = writer(&store).await;
    let r = w2.append(AppendRequest::new(tag("t"), "4")).await.unwrap();
    assert_eq!((r.seqnum, r.stream_version), (4, 4));
    until("the follower saw entry 4", &f, |t| t.last() == Some(4)).await;
    assert_eq!(everything(&f).await, everything(&w2).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_refuses_a_snapshot_that_is_not_a_log_state() {
    // A bucket log whose WAL snapshot was written by something else: a
    // follower and a writer refuse it as corrupt rather than guess.
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let w = writer(&store).await;
    w.append(AppendRequest::new(tag("t"), "0")).await.unwrap();
    w.append(AppendRequest::new(tag("t"), "1")).await.unwrap();
    w.close().await.unwrap();
    let producer = weft::wal::Producer::builder(store.clone(), "log/manifest", "log/segments")
        .open()
        .await
        .unwrap();
    weft::wal::write_snapshot(
        store.clone(),
        &producer,
        bytes::Bytes::from_static(b"application state"),
        0,
        weft::clock::system(),
    )
    .await
    .unwrap();
    producer.close().await.unwrap();
    let err = BucketFollower::open(store.clone(), "log", follower_options())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    let err = BucketStorage::open(store, "log", options())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_trims_beside_a_live_writer_without_fencing_it() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let w = writer(&store).await;
    for i in 0..3 {
        w.append(AppendRequest::new(tag("gone"), format!("g{i}")))
            .await
            .unwrap();
    }
    w.append(AppendRequest::new(tag("t"), "t0")).await.unwrap();
    let epoch = manifest(&store, "log/manifest").await.epoch();
    let pointer = bucket::trim_unowned(
        store.clone(),
        "log",
        2,
        weft::clock::system(),
        &RetryPolicy::default(),
    )
    .await
    .unwrap()
    .expect("a new trim point");
    assert_eq!(pointer.through_seq, 2);
    let m = manifest(&store, "log/manifest").await;
    assert_eq!((m.epoch(), m.first_sequence()), (epoch, 3), "nobody fenced");
    // The writer commits on top of the tool's change.
    let r = w
        .append(AppendRequest::new(tag("gone"), "g3"))
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (4, 3));
    let f = follower(&store).await;
    assert_eq!(f.tip().await.unwrap().first, 3);
    assert_eq!(f.latest_version(&tag("gone")).await.unwrap(), Some(3));
    assert_eq!(
        everything(&f).await,
        w.read_log(Position::At(3), 10).await.unwrap()
    );
    // Again at or below the trim point: nothing to do; past the end or on
    // a missing log: refused.
    let again = bucket::trim_unowned(
        store.clone(),
        "log",
        1,
        weft::clock::system(),
        &RetryPolicy::default(),
    )
    .await;
    assert_eq!(again.unwrap(), None);
    let past = bucket::trim_unowned(
        store.clone(),
        "log",
        5,
        weft::clock::system(),
        &RetryPolicy::default(),
    )
    .await;
    assert_eq!(past.unwrap_err().kind(), ErrorKind::InvalidInput);
    let none = bucket::trim_unowned(
        store.clone(),
        "nolog",
        0,
        weft::clock::system(),
        &RetryPolicy::default(),
    )
    .await;
    assert_eq!(none.unwrap_err().kind(), ErrorKind::NotFound);
    // The writer's own next trim works on top of the tool's.
    w.trim(3).await.unwrap();
    let reopened = writer(&store).await;
    assert_eq!(reopened.tip().await.unwrap().first, 4);
    assert_eq!(reopened.next_version(&tag("gone")).await.unwrap(), 4);
    assert_eq!(reopened.next_version(&tag("t")).await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_truncated_without_a_log_state_starts_at_its_first_live_entry() {
    // A WAL-level truncation (no log state stored): readers adopt the
    // first live entry's seqnum; streams with live entries go on.
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let w = writer(&store).await;
    for i in 0..4 {
        w.append(AppendRequest::new(tag("t"), format!("{i}")))
            .await
            .unwrap();
    }
    w.close().await.unwrap();
    let p = weft::wal::Producer::builder(store.clone(), "log/manifest", "log/segments")
        .open()
        .await
        .unwrap();
    p.truncate_through(1).await.unwrap();
    p.close().await.unwrap();
    assert!(manifest(&store, "log/manifest").await.snapshot().is_none());
    let f = follower(&store).await;
    assert_eq!(f.tip().await.unwrap().first, 2);
    assert_eq!(f.latest_version(&tag("t")).await.unwrap(), Some(3));
    let w2 = writer(&store).await;
    assert_eq!(w2.tip().await.unwrap().first, 2);
    assert_eq!(everything(&w2).await, everything(&f).await);
    let r = w2.append(AppendRequest::new(tag("t"), "4")).await.unwrap();
    assert_eq!((r.seqnum, r.stream_version), (4, 4));
}
