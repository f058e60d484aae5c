//! The scenarios of `tests/local/bucket_cache.rs` (in-memory) and
//! `tests/servers/bucket_cache_s3.rs` (SeaweedFS), and their helpers.

#![allow(clippy::disallowed_methods)]

pub use std::sync::Arc;
pub use std::sync::atomic::{AtomicUsize, Ordering};
pub use std::time::Duration;

pub use object_store::ObjectStore;
pub use weft::storage::bucket::{
    BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage,
};
pub use weft::wal::CheckpointPolicy;
pub use weft::{AppendRequest, ErrorKind, Log, LogEntry, LogTag, Storage};
pub use weft_testkit::hooked::{After, HookedStore, Op, after};

pub const PREFIX: &str = "log";

pub fn tag(t: &str) -> LogTag {
    t.parse().unwrap()
}

pub fn checkpoints() -> CheckpointPolicy {
    CheckpointPolicy::default()
        .with_max_recent_entries(6)
        .with_max_recent_bytes(1 << 20)
        .with_leaf_entries(4)
        .with_leaf_bytes(1 << 19)
        .with_fanout(3)
        .with_max_pages_per_commit(4)
}

pub fn options(cache: Option<&std::path::Path>) -> BucketOptions {
    BucketOptions::default()
        .with_flush_interval(Duration::from_millis(2))
        .with_checkpoint(checkpoints())
        .with_cache_dir(cache.map(|c| c.to_path_buf()))
}

pub fn follower_options(cache: Option<&std::path::Path>) -> BucketFollowerOptions {
    BucketFollowerOptions::default()
        .with_poll_interval(Duration::from_millis(5))
        .with_cache_dir(cache.map(|c| c.to_path_buf()))
}

/// A store that counts the segment objects read through it.
pub fn counting(store: Arc<dyn ObjectStore>) -> (Arc<dyn ObjectStore>, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let hooked = HookedStore::new(store).with_hook(after(move |call, ok, _| {
        if call.op == Op::Get && ok && call.path.as_ref().contains("/segments/") {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        async { After::Keep }
    }));
    (Arc::new(hooked), count)
}

/// Appends `n` entries, one commit each, over three streams; returns what
/// the writer acknowledged.
pub async fn append(log: &Log, from: usize, n: usize) {
    for i in from..from + n {
        let t = ["a", "b", "c"][i % 3];
        log.append(AppendRequest::new(tag(t), format!("{t}{i}")))
            .await
            .unwrap();
    }
}

pub async fn everything(log: &Log) -> Vec<LogEntry> {
    let tip = log.storage().tip().await.unwrap();
    log.storage()
        .read(None, tip.first, usize::MAX)
        .await
        .unwrap()
}

pub async fn by_tag(log: &Log, t: &str) -> Vec<u64> {
    log.storage()
        .read(Some(&tag(t)), 0, usize::MAX)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seqnum)
        .collect()
}

pub async fn reopens_read_only_what_changed(store: Arc<dyn ObjectStore>) {
    let writer_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let (counted, segment_gets) = counting(store.clone());
    let w = Log::new(
        BucketStorage::open(store.clone(), PREFIX, options(Some(writer_dir.path())))
            .await
            .unwrap(),
    );
    append(&w, 0, 60).await;
    // A follower on an empty directory: it reads the whole log once.
    let f = BucketFollower::open(
        counted.clone(),
        PREFIX,
        follower_options(Some(follower_dir.path())),
    )
    .await
    .unwrap();
    f.filled_in().await.unwrap();
    let f = Log::new(f);
    assert_eq!(by_tag(&f, "a").await, by_tag(&w, "a").await);
    f.close().await.unwrap();
    let first_read = segment_gets.swap(0, Ordering::SeqCst);
    assert!(
        first_read >= 60,
        "{first_read} segment GETs to read 60 segments"
    );

    // Ten more commits, then the follower restarts on its directory: it
    // reads the tip's segment (to check its index is this log's) and the
    // ten new ones, not the sixty before.
    append(&w, 60, 10).await;
    segment_gets.store(0, Ordering::SeqCst);
    let f = BucketFollower::open(
        counted.clone(),
        PREFIX,
        follower_options(Some(follower_dir.path())),
    )
    .await
    .unwrap();
    f.filled_in().await.unwrap();
    let catch_up = segment_gets.swap(0, Ordering::SeqCst);
    assert!(
        catch_up <= 10 + 1,
        "{catch_up} segment GETs to catch up on 10"
    );
    let f = Log::new(f);
    assert_eq!(everything(&f).await, everything(&w).await);
    for t in ["a", "b", "c"] {
        assert_eq!(by_tag(&f, t).await, by_tag(&w, t).await, "tag {t}");
        assert_eq!(
            f.latest_version(&tag(t)).await.unwrap(),
            w.latest_version(&tag(t)).await.unwrap()
        );
    }
    f.close().await.unwrap();
    w.close().await.unwrap();

    // The writer reopens on its directory: no segment of the old log is
    // read to rebuild its numbers beyond the tip check, and conditional
    // appends see every stream's version.
    segment_gets.store(0, Ordering::SeqCst);
    let w = Log::new(
        BucketStorage::open(counted.clone(), PREFIX, options(Some(writer_dir.path())))
            .await
            .unwrap(),
    );
    assert!(
        segment_gets.load(Ordering::SeqCst) <= 1,
        "{} segment GETs to reopen",
        segment_gets.load(Ordering::SeqCst)
    );
    let next_a = w.next_version(&tag("a")).await.unwrap();
    assert_eq!(next_a, 24);
    w.append_if(AppendRequest::new(tag("a"), "a-cond"), next_a)
        .await
        .unwrap();
    let err = w
        .append_if(AppendRequest::new(tag("a"), "stale"), next_a)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    w.close().await.unwrap();

    // A standby follower's directory serves a new writer just as well.
    segment_gets.store(0, Ordering::SeqCst);
    let w = Log::new(
        BucketStorage::open(counted, PREFIX, options(Some(follower_dir.path())))
            .await
            .unwrap(),
    );
    // At most the tip check's segments plus the newest entry, read once so
    // that new entries are stamped no earlier than it (times are monotonic
    // within a log): a fixed number, whatever the log's length.
    assert!(
        segment_gets.load(Ordering::SeqCst) <= 3,
        "{} segment GETs to open from a follower's directory",
        segment_gets.load(Ordering::SeqCst)
    );
    assert_eq!(w.next_version(&tag("a")).await.unwrap(), 25);
    let r = w
        .append(AppendRequest::new(tag("b"), "b-new"))
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (71, 23));
    w.close().await.unwrap();
}

/// A writer that erases the log's last entry records the entry's new
/// check in its cache directory's index (the check covers the payload),
/// so its next open trusts the index and reads the tip's segment only,
/// not the whole log again; the entry reads erased.
pub async fn an_erased_tip_keeps_the_cache_index(store: Arc<dyn ObjectStore>) {
    let dir = tempfile::tempdir().unwrap();
    let w = Log::new(
        BucketStorage::open(store.clone(), PREFIX, options(Some(dir.path())))
            .await
            .unwrap(),
    );
    append(&w, 0, 30).await;
    assert_eq!(w.storage().erase(&[28, 29]).await.unwrap(), 2);
    w.close().await.unwrap();
    let (counted, segment_gets) = counting(store.clone());
    let w = Log::new(
        BucketStorage::open(counted, PREFIX, options(Some(dir.path())))
            .await
            .unwrap(),
    );
    let all = everything(&w).await;
    assert_eq!(all.len(), 30);
    assert!(all[28].data.is_empty() && all[29].data.is_empty());
    assert_eq!(all[27].data, "a27");
    let gets = segment_gets.load(Ordering::SeqCst);
    // The reads above fetch each segment once more: 30, plus the tip's at
    // open; a rebuilt index would have read all 30 at open as well.
    assert!(gets <= 31, "{gets} segment GETs: the index was rebuilt");
    w.close().await.unwrap();
}
