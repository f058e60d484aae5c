//! Bucket writers and followers whose numbers live in a cache directory
//! (the persistent log index), on the in-memory store (SeaweedFS: `bucket_cache_s3.rs`):
//! a reopen reads only what was committed since (counted in segment GETs),
//! a standby follower's directory serves a new writer, a directory of
//! another log or a damaged one is rebuilt, and a follower with nothing
//! local serves the log's live end at once while its history fills in.

#![allow(clippy::disallowed_methods)]

use crate::support;

use object_store::memory::InMemory;
use support::bucket_cache_cases::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopens_read_only_what_changed_in_memory() {
    reopens_read_only_what_changed(Arc::new(InMemory::new())).await;
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

/// The stream list of a writer whose numbers live in a cache directory
/// (the persistent index) passes the conformance check; a follower with
/// its own directory, and the writer reopened on its directory, list the
/// same streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_list_is_answered_from_the_cache_dir_index() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let wdir = tempfile::tempdir().unwrap();
    let open_writer = || {
        let store = store.clone();
        let path = wdir.path().to_path_buf();
        async move {
            Log::new(
                BucketStorage::open(store, PREFIX, options(Some(&path)))
                    .await
                    .unwrap(),
            )
        }
    };
    let w = open_writer().await;
    weft_testkit::conformance::streams_list_every_stream_in_order(
        weft_testkit::conformance::Fixture::new(w.clone()),
    )
    .await;
    let want = w.streams(None, 100).await.unwrap();
    assert_eq!(want.len(), 6);
    let next = w.tip().await.unwrap().next;
    let fdir = tempfile::tempdir().unwrap();
    let f = Log::new(
        BucketFollower::open(store.clone(), PREFIX, follower_options(Some(fdir.path())))
            .await
            .unwrap(),
    );
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while f.tip().await.unwrap().next < next {
            weft::clock::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the follower catches up");
    assert_eq!(f.streams(None, 100).await.unwrap(), want);
    f.close().await.unwrap();
    w.close().await.unwrap();
    let w = open_writer().await;
    assert_eq!(w.streams(None, 100).await.unwrap(), want);
    w.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_erased_tip_keeps_the_cache_index_in_memory() {
    an_erased_tip_keeps_the_cache_index(Arc::new(InMemory::new())).await;
}
