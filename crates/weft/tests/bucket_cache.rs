//! Bucket writers and followers whose numbers live in a cache directory
//! (the persistent log index), on the in-memory store and on SeaweedFS:
//! a reopen reads only what was committed since (counted in segment GETs),
//! a standby follower's directory serves a new writer, a directory of
//! another log or a damaged one is rebuilt, and a follower with nothing
//! local serves the log's live end at once while its history fills in.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use weft::storage::bucket::{BucketFollower, BucketOptions, BucketStorage, FollowerOptions};
use weft::wal::CheckpointPolicy;
use weft::{AppendRequest, ErrorKind, Log, LogEntry, LogTag, Storage};
use weft_testkit::hooked::{After, HookedStore, Op, after};

const PREFIX: &str = "log";

fn tag(t: &str) -> LogTag {
    t.parse().unwrap()
}

fn checkpoints() -> CheckpointPolicy {
    CheckpointPolicy {
        max_recent_entries: 6,
        max_recent_bytes: 1 << 20,
        leaf_entries: 4,
        leaf_bytes: 1 << 19,
        fanout: 3,
        max_pages_per_commit: 4,
    }
}

fn options(cache: Option<&std::path::Path>) -> BucketOptions {
    BucketOptions {
        flush_interval: Duration::from_millis(2),
        checkpoint: checkpoints(),
        cache_dir: cache.map(|c| c.to_path_buf()),
        ..BucketOptions::default()
    }
}

fn follower_options(cache: Option<&std::path::Path>) -> FollowerOptions {
    FollowerOptions {
        poll_interval: Duration::from_millis(5),
        cache_dir: cache.map(|c| c.to_path_buf()),
        ..FollowerOptions::default()
    }
}

/// A store that counts the segment objects read through it.
fn counting(store: Arc<dyn ObjectStore>) -> (Arc<dyn ObjectStore>, Arc<AtomicUsize>) {
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
async fn append(log: &Log, from: usize, n: usize) {
    for i in from..from + n {
        let t = ["a", "b", "c"][i % 3];
        log.append(AppendRequest::new(tag(t), format!("{t}{i}")))
            .await
            .unwrap();
    }
}

async fn everything(log: &Log) -> Vec<LogEntry> {
    let tip = log.storage().tip().await.unwrap();
    log.storage()
        .read(None, tip.first, usize::MAX)
        .await
        .unwrap()
}

async fn by_tag(log: &Log, t: &str) -> Vec<u64> {
    log.storage()
        .read(Some(&tag(t)), 0, usize::MAX)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seqnum)
        .collect()
}

async fn reopens_read_only_what_changed(store: Arc<dyn ObjectStore>) {
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
    assert!(segment_gets.load(Ordering::SeqCst) <= 2);
    assert_eq!(w.next_version(&tag("a")).await.unwrap(), 25);
    let r = w
        .append(AppendRequest::new(tag("b"), "b-new"))
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (71, 23));
    w.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopens_read_only_what_changed_in_memory() {
    reopens_read_only_what_changed(Arc::new(InMemory::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopens_read_only_what_changed_on_seaweedfs() {
    let (store, _) = support::s3::store("bucket_cache_reopen");
    reopens_read_only_what_changed(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_dir_of_another_log_or_a_damaged_one_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let one: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let other: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    for (store, n) in [(&one, 20), (&other, 30)] {
        let w = Log::new(
            BucketStorage::open(store.clone(), PREFIX, options(None))
                .await
                .unwrap(),
        );
        append(&w, 0, n).await;
        w.close().await.unwrap();
    }
    let open = |store: &Arc<dyn ObjectStore>| {
        let store = store.clone();
        let path = dir.path().to_path_buf();
        async move {
            let f = BucketFollower::open(store, PREFIX, follower_options(Some(&path)))
                .await
                .unwrap();
            f.filled_in().await.unwrap();
            Log::new(f)
        }
    };
    let f = open(&one).await;
    let want_one = by_tag(&f, "a").await;
    // One handle per directory: a second is refused while the first lives.
    let err = BucketFollower::open(one.clone(), PREFIX, follower_options(Some(dir.path())))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Locked);
    f.close().await.unwrap();
    // The same directory for another log (same path in another bucket):
    // the recorded tip does not match; the index is rebuilt.
    let f = open(&other).await;
    assert_eq!(everything(&f).await.len(), 30);
    assert_eq!(
        by_tag(&f, "a").await,
        (0..30).step_by(3).collect::<Vec<u64>>()
    );
    f.close().await.unwrap();
    // Damaged: every file of the index overwritten with garbage.
    for entry in walk(&dir.path().join("index")) {
        std::fs::write(&entry, b"not an index").unwrap();
    }
    let f = open(&one).await;
    assert_eq!(by_tag(&f, "a").await, want_one);
    f.close().await.unwrap();
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trim_while_a_follower_was_away_is_honoured_on_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let w = Log::new(
        BucketStorage::open(store.clone(), PREFIX, options(None))
            .await
            .unwrap(),
    );
    append(&w, 0, 30).await;
    let f = BucketFollower::open(store.clone(), PREFIX, follower_options(Some(dir.path())))
        .await
        .unwrap();
    f.filled_in().await.unwrap();
    f.close().await.unwrap();
    append(&w, 30, 10).await;
    w.trim(34).await.unwrap();
    let f = BucketFollower::open(store.clone(), PREFIX, follower_options(Some(dir.path())))
        .await
        .unwrap();
    f.filled_in().await.unwrap();
    let f = Log::new(f);
    assert_eq!(f.storage().tip().await.unwrap().first, 35);
    assert_eq!(everything(&f).await, everything(&w).await);
    assert_eq!(
        f.storage().read(None, 3, 1).await.unwrap_err().kind(),
        ErrorKind::Trimmed
    );
    for t in ["a", "b", "c"] {
        assert_eq!(
            f.latest_version(&tag(t)).await.unwrap(),
            w.latest_version(&tag(t)).await.unwrap()
        );
    }
    f.close().await.unwrap();
    w.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_follower_serves_the_live_end_at_once() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let w = Log::new(
        BucketStorage::open(store.clone(), PREFIX, options(None))
            .await
            .unwrap(),
    );
    append(&w, 0, 40).await;
    // A store whose segment reads hang until released: the fill cannot
    // make progress, yet the follower serves by seqnum and its live end.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let released = gate.clone();
    let held = HookedStore::new(store.clone()).with_hook(weft_testkit::hooked::before(
        move |call, _inner| {
            let gate = released.clone();
            let wait = call.op == Op::Get && call.path.as_ref().contains("/history/");
            async move {
                if wait {
                    drop(gate.acquire().await);
                }
                weft_testkit::hooked::Before::Proceed
            }
        },
    ));
    let f = BucketFollower::open(Arc::new(held), PREFIX, follower_options(None))
        .await
        .unwrap();
    assert!(f.filling_in());
    assert_eq!(f.tip().await.unwrap().next, 40);
    let newest = f.read(None, 39, 1).await.unwrap();
    assert_eq!(newest[0].seqnum, 39);
    // Live appends and reads from the live end by tag need no history.
    let f = Log::new(f);
    append(&w, 40, 3).await;
    for _ in 0..200 {
        if f.storage().tip().await.unwrap().next == 43 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(by_tag_from(&f, "a", 40).await, vec![42]);
    // A read by tag from the start waits for the fill.
    let early = tokio::time::timeout(Duration::from_millis(100), by_tag(&f, "b")).await;
    assert!(
        early.is_err(),
        "a read needing history answered before the fill"
    );
    gate.add_permits(1 << 20);
    assert_eq!(by_tag(&f, "b").await, by_tag(&w, "b").await);
    f.close().await.unwrap();
    w.close().await.unwrap();
}

async fn by_tag_from(log: &Log, t: &str, from: u64) -> Vec<u64> {
    log.storage()
        .read(Some(&tag(t)), from, usize::MAX)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seqnum)
        .collect()
}
