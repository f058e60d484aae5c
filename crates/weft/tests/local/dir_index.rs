//! The `dir` backend's log index (`<dir>/index/`) is derived state: a
//! clean reopen reads nothing but its tip; an index that is missing,
//! damaged, another log's, behind the log or ahead of it is rebuilt from
//! the segments, and every read answers exactly as before.

use crate::support::dir as dir_support;

use std::path::Path;

use bytes::Bytes;
use dir_support::{copy_dir, payload, small_segments, tag};
use weft::storage::dir::{DirFollower, DirStorage};
use weft::storage::{NewEntry, Storage, Tip};
use weft::{LogEntry, LogTag};

const STREAMS: u64 = 5;

fn stream(i: u64) -> LogTag {
    tag(&format!("s{}", i % STREAMS))
}

/// Appends entries `from..to`, two per batch, every third also tagged
/// `odd` or `even`.
async fn append(storage: &DirStorage, from: u64, to: u64) {
    let mut i = from;
    while i < to {
        let batch: Vec<NewEntry> = (i..to.min(i + 2))
            .map(|j| {
                let mut tags = vec![stream(j)];
                if j % 3 == 0 {
                    tags.push(tag(if j % 2 == 0 { "even" } else { "odd" }));
                }
                entry(tags, payload(j))
            })
            .collect();
        i += batch.len() as u64;
        storage.append(batch).await.unwrap();
    }
}

fn entry(tags: Vec<LogTag>, data: impl Into<Bytes>) -> NewEntry {
    NewEntry {
        tags,
        data: data.into(),
        expected_version: None,
        append_id: None,
    }
}

/// Everything reads show of a log.
#[derive(Debug, PartialEq)]
struct Reads {
    tip: Tip,
    all: Vec<LogEntry>,
    by_tag: Vec<Vec<LogEntry>>,
    by_version: Vec<Vec<LogEntry>>,
    latest: Vec<Option<u64>>,
    prev: Vec<Option<LogEntry>>,
}

async fn reads(storage: &dyn Storage) -> Reads {
    let tip = storage.tip().await.unwrap();
    let mut tags: Vec<LogTag> = (0..STREAMS).map(stream).collect();
    tags.extend([tag("odd"), tag("even"), tag("never")]);
    let mut by_tag = Vec::new();
    let mut by_version = Vec::new();
    let mut latest = Vec::new();
    let mut prev = Vec::new();
    for t in &tags {
        by_tag.push(storage.read(Some(t), tip.first, 10_000).await.unwrap());
        // From version 0 is below the trim point for trimmed streams.
        let from = match storage.read(Some(t), tip.first, 1).await.unwrap().first() {
            Some(e) if e.tags[0] == *t => e.stream_version,
            _ => 0,
        };
        by_version.push(storage.read_versions(t, from, 10_000).await.unwrap());
        latest.push(storage.latest_version(t).await.unwrap());
        prev.push(storage.read_prev(Some(t), tip.next).await.unwrap());
    }
    Reads {
        tip,
        all: storage.read(None, tip.first, 10_000).await.unwrap(),
        by_tag,
        by_version,
        latest,
        prev,
    }
}

/// A closed log of 300 entries over several segments, trimmed through 99.
async fn sample(dir: &Path) -> Reads {
    let storage = DirStorage::open_with(dir, small_segments()).await.unwrap();
    append(&storage, 0, 200).await;
    storage.trim(99).await.unwrap();
    append(&storage, 200, 300).await;
    let seen = reads(&storage).await;
    storage.close().await.unwrap();
    seen
}

/// Reopens `dir`, checks its reads against `want` and that writing goes
/// on with the right versions; returns how many entries the open replayed
/// into the index.
async fn reopen_same(dir: &Path, want: &Reads, what: &str) -> u64 {
    let storage = DirStorage::open_with(dir, small_segments()).await.unwrap();
    let replayed = storage.stats().replayed;
    assert_eq!(&reads(&storage).await, want, "{what}: reads after reopen");
    let next = want.tip.next;
    let got = storage
        .append(vec![entry(vec![stream(next)], "more")])
        .await
        .unwrap();
    let expected = want.latest[(next % STREAMS) as usize].map_or(0, |v| v + 1);
    assert_eq!(got[0].stream_version, expected, "{what}: next version");
    storage.close().await.unwrap();
    replayed
}

const LIVE: u64 = 200;

#[tokio::test]
async fn a_clean_reopen_replays_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let want = sample(tmp.path()).await;
    assert_eq!(
        want.tip,
        Tip {
            first: 100,
            next: 300
        }
    );
    assert_eq!(reopen_same(tmp.path(), &want, "clean").await, 0);
}

#[tokio::test]
async fn a_deleted_index_is_rebuilt_once() {
    let tmp = tempfile::tempdir().unwrap();
    let want = sample(tmp.path()).await;
    std::fs::remove_dir_all(tmp.path().join("index")).unwrap();
    assert_eq!(reopen_same(tmp.path(), &want, "deleted").await, LIVE);
    // The rebuilt index is kept: the next open replays nothing.
    let storage = DirStorage::open(tmp.path()).await.unwrap();
    assert_eq!(storage.stats().replayed, 0);
}

#[tokio::test]
async fn a_damaged_index_is_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let want = sample(tmp.path()).await;
    // Every file of the index overwritten with garbage of its length.
    let index_files = weft_testkit::files::files_under(&tmp.path().join("index"));
    assert!(!index_files.is_empty());
    for p in index_files {
        let len = std::fs::metadata(&p).unwrap().len() as usize;
        let garbage: Vec<u8> = (0..len.max(1)).map(|i| (i * 131 + 7) as u8).collect();
        std::fs::write(&p, garbage).unwrap();
    }
    assert_eq!(reopen_same(tmp.path(), &want, "damaged").await, LIVE);
}

#[tokio::test]
async fn another_logs_index_is_not_trusted() {
    let ours = tempfile::tempdir().unwrap();
    let want = sample(ours.path()).await;
    // Another log with the same layout, different payloads.
    let other = tempfile::tempdir().unwrap();
    {
        let storage = DirStorage::open_with(other.path(), small_segments())
            .await
            .unwrap();
        for i in 0..300u64 {
            storage
                .append(vec![entry(vec![stream(i)], format!("other {i}"))])
                .await
                .unwrap();
        }
        storage.close().await.unwrap();
    }
    std::fs::remove_dir_all(ours.path().join("index")).unwrap();
    std::fs::rename(other.path().join("index"), ours.path().join("index")).unwrap();
    assert_eq!(reopen_same(ours.path(), &want, "foreign").await, LIVE);
}

#[tokio::test]
async fn an_index_behind_the_log_replays_only_what_it_lacks() {
    let tmp = tempfile::tempdir().unwrap();
    let want = sample(tmp.path()).await;
    let stale = copy_dir(&tmp.path().join("index"));
    let storage = DirStorage::open_with(tmp.path(), small_segments())
        .await
        .unwrap();
    append(&storage, 300, 340).await;
    let longer = reads(&storage).await;
    storage.close().await.unwrap();
    assert_ne!(longer, want);
    std::fs::remove_dir_all(tmp.path().join("index")).unwrap();
    std::fs::rename(stale.path(), tmp.path().join("index")).unwrap();
    assert_eq!(reopen_same(tmp.path(), &longer, "behind").await, 40);
}

#[tokio::test]
async fn an_index_behind_a_trim_or_ahead_of_the_log_is_rebuilt() {
    // Behind a trim: everything it covers was trimmed since.
    let tmp = tempfile::tempdir().unwrap();
    let storage = DirStorage::open_with(tmp.path(), small_segments())
        .await
        .unwrap();
    append(&storage, 0, 60).await;
    storage.close().await.unwrap();
    let stale = copy_dir(&tmp.path().join("index"));
    let early_log = copy_dir(tmp.path());
    let storage = DirStorage::open_with(tmp.path(), small_segments())
        .await
        .unwrap();
    append(&storage, 60, 200).await;
    storage.trim(119).await.unwrap();
    let want = reads(&storage).await;
    storage.close().await.unwrap();
    let ahead = copy_dir(&tmp.path().join("index"));
    std::fs::remove_dir_all(tmp.path().join("index")).unwrap();
    std::fs::rename(stale.path(), tmp.path().join("index")).unwrap();
    assert_eq!(reopen_same(tmp.path(), &want, "behind a trim").await, 80);

    // Ahead of the log: the log is an earlier copy.
    let early = {
        let storage = DirStorage::open(early_log.path()).await.unwrap();
        let seen = reads(&storage).await;
        storage.close().await.unwrap();
        seen
    };
    std::fs::remove_dir_all(early_log.path().join("index")).unwrap();
    std::fs::rename(ahead.path(), early_log.path().join("index")).unwrap();
    assert_eq!(reopen_same(early_log.path(), &early, "ahead").await, 60);
}

#[tokio::test]
async fn a_follower_with_its_own_index_dir_reads_alike_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let want = sample(tmp.path()).await;
    let cache = tempfile::tempdir().unwrap();
    let settings = weft::storage::dir::FollowerIndex {
        dir: Some(cache.path().join("idx")),
        ..Default::default()
    };
    let follower = DirFollower::open_indexed(tmp.path(), Default::default(), settings.clone())
        .await
        .unwrap();
    assert_eq!(reads(&follower).await, want);
    // A second follower on the same index directory is refused, not
    // blocked.
    let second = DirFollower::open_indexed(tmp.path(), Default::default(), settings.clone()).await;
    assert_eq!(
        second.unwrap_err().kind(),
        weft::ErrorKind::Locked,
        "one follower per index directory"
    );
    follower.close().await.unwrap();
    drop(follower);
    // Appended meanwhile; a later follower reads on from its index.
    let storage = DirStorage::open_with(tmp.path(), small_segments())
        .await
        .unwrap();
    append(&storage, 300, 320).await;
    let longer = reads(&storage).await;
    storage.close().await.unwrap();
    let follower = DirFollower::open_indexed(tmp.path(), Default::default(), settings)
        .await
        .unwrap();
    assert_eq!(reads(&follower).await, longer);
}

/// True when some file under `dir` holds `needle`.
fn on_disk(dir: &Path, needle: &[u8]) -> bool {
    weft_testkit::files::files_under(dir).iter().any(|p| {
        std::fs::read(p)
            .unwrap()
            .windows(needle.len())
            .any(|w| w == needle)
    })
}

/// An erase rewrites the segments that hold the entries — a sealed one,
/// and the active one (sealed first) — so that no file of the log holds
/// their payloads, and keeps the index valid: every other read answers as
/// before, and a reopen replays nothing, also when the log's last entry
/// was erased (its check changed with it).
#[tokio::test]
async fn an_erase_leaves_no_payload_on_disk_and_keeps_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = |i: u64| format!("SECRET-{i:04}-of-user-x").into_bytes();
    let user = tag("user:x");
    let storage = DirStorage::open_with(tmp.path(), small_segments())
        .await
        .unwrap();
    // Secrets at 0 (a sealed segment by the end), 150 and 160 (the active
    // segment), 160 the log's last entry.
    let mut doomed = Vec::new();
    for i in 0..161 {
        let e = if [0, 150, 160].contains(&i) {
            doomed.push(i);
            entry(vec![user.clone(), tag("audit")], secret(i))
        } else {
            entry(vec![stream(i)], payload(i))
        };
        storage.append(vec![e]).await.unwrap();
    }
    let before = reads(&storage).await;
    let segments_before = dir_support::segments(tmp.path()).len();
    for &i in &doomed {
        assert!(on_disk(tmp.path(), &secret(i)), "secret {i} is written");
    }

    assert_eq!(storage.erase(&doomed).await.unwrap(), 3);
    assert_eq!(storage.erase(&doomed).await.unwrap(), 0, "erased once");
    for &i in &doomed {
        assert!(!on_disk(tmp.path(), &secret(i)), "secret {i} is gone");
    }
    assert_eq!(
        dir_support::segments(tmp.path()).len(),
        segments_before + 1,
        "the active segment was sealed and a new one started"
    );
    let mut want = before;
    for e in want.all.iter_mut().chain(want.by_tag.iter_mut().flatten()) {
        if doomed.contains(&e.seqnum) {
            e.data = Bytes::new();
        }
    }
    for e in want.by_version.iter_mut().flatten() {
        if doomed.contains(&e.seqnum) {
            e.data = Bytes::new();
        }
    }
    for e in want.prev.iter_mut().flatten() {
        if doomed.contains(&e.seqnum) {
            e.data = Bytes::new();
        }
    }
    let got = reads(&storage).await;
    assert_eq!(got, want, "only the erased payloads changed");
    let mine = storage.read(Some(&user), 0, 10).await.unwrap();
    assert_eq!(mine.len(), 3);
    assert!(mine.iter().all(|e| e.data.is_empty() && e.tags.len() == 2));
    // Appends go on in the new segment.
    storage
        .append(vec![entry(vec![user.clone()], "after")])
        .await
        .unwrap();
    storage.close().await.unwrap();

    let storage = DirStorage::open_with(tmp.path(), small_segments())
        .await
        .unwrap();
    assert_eq!(storage.stats().replayed, 0, "the index stayed valid");
    let mine = storage.read(Some(&user), 0, 10).await.unwrap();
    assert_eq!(mine.len(), 4);
    assert_eq!(mine[3].data, "after");
    assert_eq!(mine[3].stream_version, 3);
    assert!(mine[..3].iter().all(|e| e.data.is_empty()));
    storage.close().await.unwrap();
}

/// The log's last entry erased and the log closed at once: the next open
/// finds the index's tip check current and replays nothing.
#[tokio::test]
async fn erasing_the_last_entry_keeps_the_index_tip_valid() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = DirStorage::open_with(tmp.path(), small_segments())
        .await
        .unwrap();
    append(&storage, 0, 40).await;
    storage.erase(&[39]).await.unwrap();
    storage.close().await.unwrap();
    let storage = DirStorage::open_with(tmp.path(), small_segments())
        .await
        .unwrap();
    assert_eq!(storage.stats().replayed, 0);
    let last = storage.read(None, 39, 1).await.unwrap();
    assert!(last[0].data.is_empty());
    storage.close().await.unwrap();
}
