//! The shared log on a bucket: the conformance suite on the writer (on an
//! in-memory store, on the real SeaweedFS server and on the real Azurite
//! server), followers that see exactly the writer's log, failover that
//! fences the old writer, and follower restarts. Every scenario body takes
//! the store, so each runs on every store.

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use weft::conformance::Fixture;
use weft::storage::bucket::{BucketFollower, BucketOptions, BucketStorage, FollowerOptions};
use weft::{AppendRequest, ErrorKind, Log, LogEntry, LogTag, Position};

fn options() -> BucketOptions {
    BucketOptions {
        flush_interval: Duration::from_millis(2),
        ..BucketOptions::default()
    }
}

fn follower_options() -> FollowerOptions {
    FollowerOptions {
        poll_interval: Duration::from_millis(10),
        prefetch: 4,
    }
}

async fn writer(store: Arc<dyn ObjectStore>) -> Log {
    Log::new(BucketStorage::open(store, "log", options()).await.unwrap())
}

weft::conformance_suite!(bucket_in_memory, || async {
    Fixture::new(writer(Arc::new(InMemory::new())).await)
});

weft::conformance_suite!(bucket_seaweedfs, || async {
    let (store, _) = support::s3::store("bucket_conformance");
    Fixture::new(writer(store).await)
});

weft::conformance_suite!(bucket_azurite, || async {
    let (store, _) = support::azure::store("bucket_conformance");
    Fixture::new(writer(store).await)
});

async fn everything(log: &Log) -> Vec<LogEntry> {
    log.read_log(Position::Beginning, usize::MAX).await.unwrap()
}

async fn wait_caught_up(follower: &Log, next: u64) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while follower.storage().next_seqnum() < next {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("follower caught up within 30 s");
}

async fn write_some(log: &Log, from: usize, n: usize) {
    for i in from..from + n {
        let primary: LogTag = format!("acct:{}", i % 3).parse().unwrap();
        let req = AppendRequest::new(primary, format!("op{i}")).with_tag("all".parse().unwrap());
        log.append(req).await.unwrap();
    }
}

async fn follower_sees_the_writers_log(store: Arc<dyn ObjectStore>) {
    let w1 = writer(store.clone()).await;
    write_some(&w1, 0, 20).await;
    w1.append_batch(vec![
        AppendRequest::new("batch".parse().unwrap(), "b0"),
        AppendRequest::new("batch".parse().unwrap(), "b1"),
    ])
    .await
    .unwrap();
    let follower = Log::new(
        BucketFollower::open(store.clone(), "log", follower_options())
            .await
            .unwrap(),
    );
    assert_eq!(everything(&follower).await, everything(&w1).await);
    let all: LogTag = "all".parse().unwrap();
    let mut live = follower.subscribe(&all, Position::At(15));

    // Writes on a follower are refused.
    let err = follower
        .append(AppendRequest::new(all.clone(), "nope"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ReadOnly);

    // Failover: a new writer fences the first.
    let w2 = writer(store.clone()).await;
    let fenced = w1
        .append(AppendRequest::new(all.clone(), "zombie"))
        .await
        .unwrap_err();
    assert_eq!(fenced.kind(), ErrorKind::Fenced);
    assert_eq!(w2.latest_seqnum(), Some(21));
    assert_eq!(w2.next_version(&"acct:0".parse().unwrap()), 7);
    write_some(&w2, 20, 10).await;
    wait_caught_up(&follower, 32).await;
    let want = everything(&w2).await;
    assert_eq!(everything(&follower).await, want);
    assert!(!want.iter().any(|e| &e.data[..] == b"zombie"));
    // The subscription crossed the failover without a gap.
    let mut got = Vec::new();
    while got.len() < 15 {
        let e = tokio::time::timeout(Duration::from_secs(30), live.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got.push(e.seqnum);
    }
    let want_all: Vec<u64> = w2
        .read_from(&all, Position::At(15), 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seqnum)
        .collect();
    assert_eq!(got, want_all);
    // A restarted follower sees the same log.
    follower.close().await.unwrap();
    let again = Log::new(
        BucketFollower::open(store, "log", follower_options())
            .await
            .unwrap(),
    );
    assert_eq!(everything(&again).await, want);
    assert_eq!(
        again.latest_version(&"acct:1".parse().unwrap()),
        w2.latest_version(&"acct:1".parse().unwrap())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_sees_the_writers_log_in_memory() {
    follower_sees_the_writers_log(Arc::new(InMemory::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_sees_the_writers_log_on_seaweedfs() {
    let (store, _) = support::s3::store("bucket_follower");
    follower_sees_the_writers_log(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_sees_the_writers_log_on_azurite() {
    let (store, _) = support::azure::store("bucket_follower");
    follower_sees_the_writers_log(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopened_writer_resumes_counters_and_kv_holds_across_handles_on_seaweedfs() {
    let (store, _) = support::s3::store("bucket_reopen");
    reopened_writer_resumes_counters_and_kv_holds_across_handles(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopened_writer_resumes_counters_and_kv_holds_across_handles_on_azurite() {
    let (store, _) = support::azure::store("bucket_reopen");
    reopened_writer_resumes_counters_and_kv_holds_across_handles(store).await;
}

async fn reopened_writer_resumes_counters_and_kv_holds_across_handles(store: Arc<dyn ObjectStore>) {
    let w1 = writer(store.clone()).await;
    write_some(&w1, 0, 7).await;
    let kv1 = w1.kv("lease:x".parse().unwrap()).unwrap();
    assert!(kv1.set_if_absent("owner", "a").await.unwrap());
    w1.close().await.unwrap();
    let w2 = writer(store.clone()).await;
    assert_eq!(w2.latest_seqnum(), Some(6));
    let r = w2
        .append_if(AppendRequest::new("acct:0".parse().unwrap(), "x"), 3)
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (7, 3));
    let kv2 = w2.kv("lease:x".parse().unwrap()).unwrap();
    assert!(!kv2.set_if_absent("owner", "b").await.unwrap());
    assert!(!kv2.delete_if("owner", b"b").await.unwrap());
    assert!(kv2.delete_if("owner", b"a").await.unwrap());
    assert!(kv2.set_if_absent("owner", "b").await.unwrap());
}
