//! Scenario bodies of the shared log on a bucket that run on every store:
//! the in-memory store (`tests/local/bucket_log.rs`) and the real servers
//! (`tests/servers/bucket_log_s3.rs`, `tests/servers/bucket_log_azure.rs`).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use object_store::ObjectStore;
use weft::storage::bucket::{BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage};
use weft::{AppendRequest, ErrorKind, Log, LogEntry, LogTag, Position};

/// Opening fences any earlier writer at once (failovers on purpose; the
/// writer lease has its own tests).
pub fn options() -> BucketOptions {
    BucketOptions::default()
        .with_take_over(true)
        .with_flush_interval(Duration::from_millis(2))
}

pub fn follower_options() -> BucketFollowerOptions {
    BucketFollowerOptions::default()
        .with_poll_interval(Duration::from_millis(10))
        .with_prefetch(4)
}

pub async fn writer(store: Arc<dyn ObjectStore>) -> Log {
    Log::new(BucketStorage::open(store, "log", options()).await.unwrap())
}

pub async fn everything(log: &Log) -> Vec<LogEntry> {
    log.read_log(Position::Beginning, usize::MAX).await.unwrap()
}

pub async fn wait_caught_up(follower: &Log, next: u64) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while follower.tip().await.unwrap().next < next {
            weft::clock::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("follower caught up within 30 s");
}

pub async fn write_some(log: &Log, from: usize, n: usize) {
    for i in from..from + n {
        let primary: LogTag = format!("acct:{}", i % 3).parse().unwrap();
        let req = AppendRequest::new(primary, format!("op{i}")).with_tag("all".parse().unwrap());
        log.append(req).await.unwrap();
    }
}

pub async fn follower_sees_the_writers_log(store: Arc<dyn ObjectStore>) {
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
    assert_eq!(w2.latest_seqnum().await.unwrap(), Some(21));
    assert_eq!(
        w2.next_version(&"acct:0".parse().unwrap()).await.unwrap(),
        7
    );
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
        again
            .latest_version(&"acct:1".parse().unwrap())
            .await
            .unwrap(),
        w2.latest_version(&"acct:1".parse().unwrap()).await.unwrap()
    );
}

pub async fn reopened_writer_resumes_counters_and_kv_holds_across_handles(
    store: Arc<dyn ObjectStore>,
) {
    let w1 = writer(store.clone()).await;
    write_some(&w1, 0, 7).await;
    let kv1 = w1.kv("lease:x".parse().unwrap()).unwrap();
    assert!(kv1.set_if_absent("owner", "a").await.unwrap());
    w1.close().await.unwrap();
    let w2 = writer(store.clone()).await;
    assert_eq!(w2.latest_seqnum().await.unwrap(), Some(6));
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

/// True when some object under `log/` holds `needle`, in its bytes or in
/// a record of it decoded as a segment (so compression hides nothing).
pub async fn bucket_holds(store: &Arc<dyn ObjectStore>, needle: &[u8]) -> bool {
    let has = |b: &[u8]| b.windows(needle.len()).any(|w| w == needle);
    let objects: Vec<_> = store
        .list(Some(&object_store::path::Path::from("log")))
        .map(|m| m.unwrap().location)
        .collect()
        .await;
    assert!(!objects.is_empty());
    for path in objects {
        let bytes = store.get(&path).await.unwrap().bytes().await.unwrap();
        if has(&bytes) {
            return true;
        }
        if let Ok(segment) = weft::format::decode_segment(bytes)
            && segment.records.iter().any(|r| has(r))
        {
            return true;
        }
    }
    false
}

/// A hard delete on a bucket log: the writer and a follower (as a tool
/// would) erase streams whose entries share a segment, at the same time,
/// and both erasures hold (each rewrite is conditional on the copy it
/// read). Afterwards no object holds the payloads, the writer is not
/// fenced (no manifest was written by the erase), and a reopened writer
/// and a new follower read the entries erased, in place.
pub async fn erase_removes_payloads_from_the_bucket(store: Arc<dyn ObjectStore>) {
    let (u1, u2, keep): (LogTag, LogTag, LogTag) = (
        "user:1".parse().unwrap(),
        "user:2".parse().unwrap(),
        "orders".parse().unwrap(),
    );
    let w = writer(store.clone()).await;
    // One batch, one segment: both users' entries and one to keep.
    w.append_batch(vec![
        AppendRequest::new(u1.clone(), "SECRET-one"),
        AppendRequest::new(u2.clone(), "SECRET-two"),
        AppendRequest::new(keep.clone(), "keep-me"),
    ])
    .await
    .unwrap();
    write_some(&w, 0, 6).await;
    w.append(AppendRequest::new(u1.clone(), "SECRET-three"))
        .await
        .unwrap();
    let next = w.tip().await.unwrap().next;
    let follower = Log::new(
        BucketFollower::open(store.clone(), "log", follower_options())
            .await
            .unwrap(),
    );
    wait_caught_up(&follower, next).await;
    for s in ["SECRET-one", "SECRET-two", "SECRET-three"] {
        assert!(bucket_holds(&store, s.as_bytes()).await, "{s} is written");
    }
    let before = everything(&w).await;
    w.delete_stream(&u1).await.unwrap();
    follower.delete_stream(&u2).await.unwrap();

    let (by_writer, by_follower) = tokio::join!(w.erase_stream(&u1), follower.erase_stream(&u2));
    assert_eq!((by_writer.unwrap(), by_follower.unwrap()), (2, 1));
    for s in ["SECRET-one", "SECRET-two", "SECRET-three"] {
        assert!(!bucket_holds(&store, s.as_bytes()).await, "{s} is gone");
    }
    assert!(bucket_holds(&store, b"keep-me").await);
    // Not fenced: the erase claimed nothing.
    w.append(AppendRequest::new(keep.clone(), "after"))
        .await
        .unwrap();

    // Each handle reads what it erased itself as erased at once; what the
    // other erased it may serve from its caches until they turn over (see
    // FAILURE_SEMANTICS), so the whole log is compared after a reopen.
    let own = |log_entries: Vec<LogEntry>, t: &LogTag| {
        let mine: Vec<LogEntry> = log_entries
            .into_iter()
            .filter(|e| e.primary_tag() == t)
            .collect();
        assert!(!mine.is_empty() && mine.iter().all(|e| e.data.is_empty()));
    };
    own(everything(&w).await, &u1);
    own(everything(&follower).await, &u2);
    let erased = |e: &LogEntry| e.primary_tag() == &u1 || e.primary_tag() == &u2;
    let mut want = before.clone();
    for e in want.iter_mut().filter(|e| erased(e)) {
        e.data = bytes::Bytes::new();
    }
    w.close().await.unwrap();
    follower.close().await.unwrap();
    let reopened = writer(store.clone()).await;
    assert_eq!(&everything(&reopened).await[..before.len()], &want[..]);
    let fresh = Log::new(
        BucketFollower::open(store.clone(), "log", follower_options())
            .await
            .unwrap(),
    );
    assert_eq!(&everything(&fresh).await[..before.len()], &want[..]);
    assert_eq!(reopened.erase_stream(&u1).await.unwrap(), 0);
    // The numbering goes on.
    let again = reopened
        .append(AppendRequest::new(u1.clone(), "new life"))
        .await
        .unwrap();
    assert_eq!(again.stream_version, 2);
}
