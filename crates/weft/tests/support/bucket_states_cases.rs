//! The scenarios of `tests/local/bucket_states.rs` (in-memory) and the
//! SeaweedFS run in `tests/servers/bucket_cache_s3.rs`: a writer with no local
//! state opens from the newest stream-state checkpoint.

#![allow(clippy::disallowed_methods)]

use std::sync::Mutex;

use object_store::path::Path;
use tokio::sync::watch;
use weft_testkit::hooked::{Before, before};

pub use super::bucket_cache_cases::*;

/// Writer options that store a checkpoint every 10 entries.
pub fn checkpointing() -> BucketOptions {
    options(None).with_state_checkpoint_entries(10)
}

/// The seqnums the stream-state checkpoints under `PREFIX` cover, newest
/// first.
pub async fn checkpoints_stored(store: &Arc<dyn ObjectStore>) -> Vec<u64> {
    use futures::TryStreamExt;
    let listed: Vec<_> = store
        .list(Some(&Path::from(format!("{PREFIX}/states"))))
        .try_collect()
        .await
        .unwrap();
    let mut through: Vec<u64> = listed
        .iter()
        .map(|m| {
            let name = m.location.filename().unwrap();
            name.split_once('-').unwrap().0.parse().unwrap()
        })
        .collect();
    through.sort_unstable_by(|a, b| b.cmp(a));
    through
}

/// The object of the checkpoint through `through` under `PREFIX`.
pub async fn checkpoint_path(store: &Arc<dyn ObjectStore>, through: u64) -> Path {
    use futures::TryStreamExt;
    let listed: Vec<_> = store
        .list(Some(&Path::from(format!("{PREFIX}/states"))))
        .try_collect()
        .await
        .unwrap();
    let name = format!("{through:020}-");
    listed
        .into_iter()
        .map(|m| m.location)
        .find(|p| p.filename().unwrap().starts_with(&name))
        .unwrap()
}

/// A store whose GETs of `held` segments wait until the returned sender
/// sends `true`, and which counts the segment GETs that got through.
pub fn holding(
    store: Arc<dyn ObjectStore>,
    held: Arc<Mutex<Vec<String>>>,
) -> (Arc<dyn ObjectStore>, watch::Sender<bool>, Arc<AtomicUsize>) {
    let (release, released) = watch::channel(false);
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let hooked = HookedStore::new(store).with_hook(before(move |call, _| {
        let mut released = released.clone();
        let wait = call.op == Op::Get
            && held
                .lock()
                .unwrap()
                .iter()
                .any(|h| h.as_str() == call.path.as_ref());
        if call.op == Op::Get && call.path.as_ref().contains("/segments/") && !wait {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        async move {
            if wait {
                let _ = released.wait_for(|r| *r).await;
            }
            Before::Proceed
        }
    }));
    (Arc::new(hooked), release, count)
}

/// A store that records the segments put through it, in order.
pub fn recording(store: Arc<dyn ObjectStore>) -> (Arc<dyn ObjectStore>, Arc<Mutex<Vec<String>>>) {
    let puts = Arc::new(Mutex::new(Vec::new()));
    let seen = puts.clone();
    let hooked = HookedStore::new(store).with_hook(after(move |call, ok, _| {
        if call.op == Op::Put && ok && call.path.as_ref().contains("/segments/") {
            seen.lock().unwrap().push(call.path.to_string());
        }
        async { After::Keep }
    }));
    (Arc::new(hooked), puts)
}

/// With `empty_cache_dir`, the new writer has a cache directory with
/// nothing in it (a new host); without, none at all.
pub async fn a_stateless_writer_opens_from_the_newest_checkpoint(
    store: Arc<dyn ObjectStore>,
    empty_cache_dir: bool,
) {
    let dir = tempfile::tempdir().unwrap();
    let stateless =
        checkpointing().with_cache_dir(empty_cache_dir.then(|| dir.path().to_path_buf()));
    // 100 entries, one commit (and one segment) each, over three streams;
    // every fifth carries an append id.
    let (recorded, segments) = recording(store.clone());
    let w = Log::new(
        BucketStorage::open(recorded, PREFIX, checkpointing())
            .await
            .unwrap(),
    );
    for i in 0..100usize {
        let t = ["a", "b", "c"][i % 3];
        let mut request = AppendRequest::new(tag(t), format!("{t}{i}"));
        if i % 5 == 0 {
            request = request.with_id(format!("id-{i}"));
        }
        w.append(request).await.unwrap();
    }
    let want_a = by_tag(&w, "a").await;
    let want_all = everything(&w).await;
    w.close().await.unwrap();
    let segments = segments.lock().unwrap().clone();
    assert_eq!(segments.len(), 100, "one segment per commit");
    let stored = checkpoints_stored(&store).await;
    assert!(
        !stored.is_empty() && stored.len() <= 3,
        "checkpoints kept: {stored:?}"
    );
    let through = stored[0] as usize;
    assert!(through >= 80, "newest checkpoint through {through}");

    // A new writer with no local state, while every segment before the
    // checkpoint's entry hangs: it opens, knows every stream's version,
    // and appends; what needs the history waits for the fill.
    // The segments of the other two streams' last entries before it are
    // not held: the writer reads each stream's last entry once before it
    // first numbers the stream (the check of the checkpoint's row).
    let held: Vec<String> = segments[..through - 2].to_vec();
    let held = Arc::new(Mutex::new(held));
    let (store_b, release, gets) = holding(store.clone(), held);
    let storage = BucketStorage::open(store_b, PREFIX, stateless.clone())
        .await
        .unwrap();
    assert!(storage.filling_in(), "the history is still held back");
    assert_eq!(
        gets.load(Ordering::SeqCst),
        100 - through,
        "segments read to open: the checkpoint's entry and those after it"
    );
    let w = Log::new(storage);
    // Versions: a has entries 0, 3, ..., 99 (34 of them).
    let r = w
        .append_if(AppendRequest::new(tag("a"), "a-cond"), 34)
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (100, 34));
    let err = w
        .append_if(AppendRequest::new(tag("b"), "stale"), 32)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    let r = w
        .append_if(AppendRequest::new(tag("b"), "b-cond"), 33)
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (101, 33));
    // Reads by seqnum never wait for the fill.
    assert_eq!(
        w.storage().read(None, through as u64, 1).await.unwrap(),
        want_all[through..=through].to_vec()
    );

    // Reads by tag from the start wait for it.
    let _ = release.send(true);
    let mut a = want_a.clone();
    a.push(100);
    assert_eq!(by_tag(&w, "a").await, a);
    assert_eq!(everything(&w).await[..100], want_all[..]);
    // A retry of an append from before the checkpoint is recognised.
    let r = w
        .append(AppendRequest::new(tag("c"), "c5").with_id("id-5"))
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (5, 1));
    // A trim needs every stream's floor: it works once the history is in.
    w.storage().trim(10).await.unwrap();
    w.close().await.unwrap();

    // The next writer (on the same directory, if any) starts from the trim
    // and what it has.
    let w = Log::new(
        BucketStorage::open(store.clone(), PREFIX, stateless)
            .await
            .unwrap(),
    );
    assert_eq!(w.next_version(&tag("c")).await.unwrap(), 33);
    assert_eq!(w.next_version(&tag("a")).await.unwrap(), 35);
    w.close().await.unwrap();
}

pub async fn damaged_or_foreign_checkpoints_are_passed_over(store: Arc<dyn ObjectStore>) {
    let w = Log::new(
        BucketStorage::open(store.clone(), PREFIX, checkpointing())
            .await
            .unwrap(),
    );
    append(&w, 0, 60).await;
    w.close().await.unwrap();
    let stored = checkpoints_stored(&store).await;
    assert!(stored.len() >= 2, "checkpoints kept: {stored:?}");
    // The newest one damaged.
    let newest = checkpoint_path(&store, stored[0]).await;
    let mut bytes = store
        .get(&newest)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    store.put(&newest, bytes.into()).await.unwrap();
    // The one before it as another log would have it: the same numbers,
    // taken of an entry with other contents.
    let second = checkpoint_path(&store, stored[1]).await;
    let bytes = store.get(&second).await.unwrap().bytes().await.unwrap();
    let mut foreign = weft::format::decode_state_checkpoint(&bytes).unwrap();
    foreign.through_check ^= 1;
    let foreign_bytes = weft::format::encode_state_checkpoint(&foreign).unwrap();
    store.put(&second, foreign_bytes.into()).await.unwrap();

    // Neither is trusted: the writer reads more of the log, and its
    // numbers are the log's.
    let (counted, segment_gets) = counting(store.clone());
    let w = Log::new(
        BucketStorage::open(counted, PREFIX, checkpointing())
            .await
            .unwrap(),
    );
    assert!(
        segment_gets.load(Ordering::SeqCst) as u64 > 60 - stored[1],
        "{} segment GETs",
        segment_gets.load(Ordering::SeqCst)
    );
    for t in ["a", "b", "c"] {
        assert_eq!(w.next_version(&tag(t)).await.unwrap(), 20, "tag {t}");
    }
    let r = w
        .append_if(AppendRequest::new(tag("a"), "a-cond"), 20)
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (60, 20));
    w.close().await.unwrap();
}

/// Every stream of the checkpoint through `through`: tag, next version and
/// the seqnum of its last entry (`None` for a version 1 checkpoint).
pub async fn checkpoint_rows(
    store: &Arc<dyn ObjectStore>,
    through: u64,
) -> Vec<(LogTag, u64, Option<u64>)> {
    let path = checkpoint_path(store, through).await;
    let bytes = store.get(&path).await.unwrap().bytes().await.unwrap();
    let cp = weft::format::decode_state_checkpoint(&bytes).unwrap();
    let last = cp.last_seqnums.clone();
    cp.state
        .next_versions
        .iter()
        .enumerate()
        .map(|(i, (t, v))| (t.clone(), *v, last.as_ref().map(|l| l[i])))
        .collect()
}

/// Rewrites the checkpoint through `through` with `rows` (tag, next
/// version, last seqnum) and a valid checksum: version 2 when every row
/// names a last seqnum, else version 1. The check value of its entry is
/// kept, so a writer takes it for one of this log.
pub async fn forge_checkpoint(
    store: &Arc<dyn ObjectStore>,
    through: u64,
    mut rows: Vec<(LogTag, u64, Option<u64>)>,
) {
    use weft::format::{
        LogState, StateCheckpoint, decode_state_checkpoint, encode_state_checkpoint,
    };
    let path = checkpoint_path(store, through).await;
    let bytes = store.get(&path).await.unwrap().bytes().await.unwrap();
    let cp = decode_state_checkpoint(&bytes).unwrap();
    // The encoding lists rows by tag text; so must the last seqnums.
    rows.sort_by_key(|(t, _, _)| t.to_string());
    let last: Option<Vec<u64>> = rows.iter().map(|(_, _, l)| *l).collect();
    let forged = encode_state_checkpoint(&StateCheckpoint {
        state: LogState::new(
            through,
            rows.iter().map(|(t, v, _)| (t.clone(), *v)).collect(),
        )
        .unwrap(),
        through_check: cp.through_check,
        last_seqnums: last,
    })
    .unwrap();
    store.put(&path, forged.into()).await.unwrap();
}
