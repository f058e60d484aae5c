//! A read-only follower of a log directory: it tails the writer across
//! segment roll-overs, trims and restarts, waits past a write in progress,
//! stops on damage, and refuses writes.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support::dir as dir_support;

use std::future::Future;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use dir_support::{payload, segments, small_segments, tag};
use futures::StreamExt;
use weft::format::frame;
use weft::storage::Storage;
use weft::storage::dir::{DirFollower, DirFollowerOptions, DirStorage};
use weft::{AppendRequest, ErrorKind, Log, LogEntry, Position};

const WAIT: Duration = Duration::from_secs(20);

fn quick() -> DirFollowerOptions {
    DirFollowerOptions::default().with_poll_interval(Duration::from_millis(5))
}

async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Waits until `cond` holds, polling every few milliseconds.
async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    within(what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
}

async fn writer(dir: &Path) -> Log {
    Log::new(DirStorage::open_with(dir, small_segments()).await.unwrap())
}

async fn append_n(log: &Log, from: u64, n: u64) {
    for i in from..from + n {
        log.append(AppendRequest::new(tag(&format!("s{}", i % 3)), payload(i)))
            .await
            .unwrap();
    }
}

fn check_entry(e: &LogEntry, i: u64) {
    assert_eq!(e.seqnum, i);
    assert_eq!(e.tags[0], tag(&format!("s{}", i % 3)));
    assert_eq!(e.stream_version, i / 3);
    assert_eq!(&e.data[..], &payload(i)[..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_tails_the_writer_across_roll_overs_and_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let log = writer(tmp.path()).await;
    append_n(&log, 0, 10).await;
    let follower = Log::new(DirFollower::open_with(tmp.path(), quick()).await.unwrap());
    assert_eq!(follower.tip().await.unwrap().next, 10);
    let mut sub = follower.subscribe_log(Position::Beginning);

    append_n(&log, 10, 90).await;
    log.close().await.unwrap();
    assert!(segments(tmp.path()).len() > 3, "the writer rolled over");
    // A restarted writer goes on in the same directory.
    let log = writer(tmp.path()).await;
    append_n(&log, 100, 50).await;

    for i in 0..150 {
        let e = within("an entry", sub.next()).await.unwrap().unwrap();
        check_entry(&e, i);
    }
    assert_eq!(follower.tip().await.unwrap().next, 150);
    let s1 = tag("s1");
    assert_eq!(
        follower.latest_version(&s1).await.unwrap(),
        log.latest_version(&s1).await.unwrap()
    );
    let by_version = follower.read_after_version(&s1, 10).await.unwrap();
    assert_eq!(
        by_version.len(),
        log.read_after_version(&s1, 10).await.unwrap().len()
    );
    follower.close().await.unwrap();
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_follows_trims_and_starts_over_past_one_it_never_reached() {
    let tmp = tempfile::tempdir().unwrap();
    let log = writer(tmp.path()).await;
    append_n(&log, 0, 30).await;
    let follower = DirFollower::open_with(tmp.path(), quick()).await.unwrap();

    log.trim(9).await.unwrap();
    within("the follower sees the trim", async {
        while follower.tip().await.unwrap().first != 10 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    let err = follower.read(None, 0, 10).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    assert_eq!(follower.read(None, 10, 100).await.unwrap().len(), 20);
    follower.close().await.unwrap();

    // A follower that looks only every second, while the writer appends a
    // lot and trims past everything it has read.
    let slow = DirFollower::open_with(
        tmp.path(),
        DirFollowerOptions::default().with_poll_interval(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let batch: Vec<AppendRequest> = (30..130)
        .map(|i| AppendRequest::new(tag(&format!("s{}", i % 3)), payload(i)))
        .collect();
    log.append_batch(batch).await.unwrap();
    log.trim(99).await.unwrap();
    append_n(&log, 130, 5).await;
    within("the slow follower catches up", async {
        while slow.tip().await.unwrap().next != 135 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    assert_eq!(slow.tip().await.unwrap().first, 100);
    let read = slow.read(None, 100, 100).await.unwrap();
    assert_eq!(read.len(), 35);
    for (e, i) in read.iter().zip(100..) {
        check_entry(e, i);
    }
    for s in 0..3 {
        let t = tag(&format!("s{s}"));
        assert_eq!(
            slow.latest_version(&t).await.unwrap(),
            log.latest_version(&t).await.unwrap(),
            "{t}"
        );
    }
    slow.close().await.unwrap();
    log.close().await.unwrap();
}

/// The frame of entry `i` as the writer would write it, alone in its batch.
fn frame_of(i: u64) -> Vec<u8> {
    let entry = LogEntry {
        seqnum: i,
        stream_version: i / 3,
        tags: vec![tag(&format!("s{}", i % 3))],
        data: Bytes::from(payload(i)),
        timestamp_ms: 1,
        append_id: None,
    };
    let mut out = Vec::new();
    frame::encode(&mut out, &entry, 0, true).unwrap();
    out
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_in_progress_is_waited_past_and_damage_stops_the_tailing() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let log = writer(tmp.path()).await;
        append_n(&log, 0, 10).await;
        log.close().await.unwrap();
    }
    let last = segments(tmp.path()).pop().unwrap();
    let next = frame_of(10);
    let (head, rest) = next.split_at(next.len() / 2);
    append_bytes(&last, head);

    let follower = Log::new(DirFollower::open_with(tmp.path(), quick()).await.unwrap());
    assert_eq!(
        follower.tip().await.unwrap().next,
        10,
        "half a frame is not an entry"
    );
    let mut sub = follower.subscribe_log(Position::At(10));
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(follower.tip().await.unwrap().next, 10);
    append_bytes(&last, rest);
    let e = within("the completed entry", sub.next())
        .await
        .unwrap()
        .unwrap();
    check_entry(&e, 10);

    // A second writer's frame (valid checksum, wrong seqnum) behind it.
    append_bytes(&last, &frame_of(3));
    let stopped = within("the end of the subscription", sub.next()).await;
    assert!(
        stopped.is_none(),
        "the subscription ends when tailing stops"
    );
    let storage = DirFollower::open(tmp.path()).await.unwrap_err();
    assert_eq!(storage.kind(), ErrorKind::Corrupt, "{storage}");
    // What was read before the damage is still served.
    assert_eq!(
        follower.storage().read(None, 0, 100).await.unwrap().len(),
        11
    );
    follower.close().await.unwrap();
}

#[tokio::test]
async fn a_follower_reports_why_it_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let log = writer(tmp.path()).await;
        append_n(&log, 0, 4).await;
        log.close().await.unwrap();
    }
    let follower = DirFollower::open_with(tmp.path(), quick()).await.unwrap();
    assert_eq!(follower.stopped(), None);
    append_bytes(&segments(tmp.path()).pop().unwrap(), &frame_of(0));
    until("the follower stops", || follower.stopped().is_some()).await;
    let why = follower.stopped().unwrap();
    assert!(why.contains("corrupt"), "{why}");
}

#[tokio::test]
async fn writes_through_a_follower_are_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let log = writer(tmp.path()).await;
    append_n(&log, 0, 3).await;
    log.view(tag("v"))
        .kv()
        .unwrap()
        .set("k", "v1")
        .await
        .unwrap();
    let follower = Log::new(DirFollower::open(tmp.path()).await.unwrap());
    let kinds = [
        follower
            .append(AppendRequest::new(tag("s0"), "x"))
            .await
            .unwrap_err()
            .kind(),
        follower.trim(0).await.unwrap_err().kind(),
        follower.storage().erase(&[0]).await.unwrap_err().kind(),
        follower
            .view(tag("v"))
            .kv()
            .unwrap()
            .set("k", "v2")
            .await
            .unwrap_err()
            .kind(),
    ];
    assert_eq!(kinds, [ErrorKind::ReadOnly; 4]);
    let kv = follower.view(tag("v")).kv().unwrap();
    assert_eq!(kv.get("k").await.unwrap().as_deref(), Some(&b"v1"[..]));
    assert!(follower.storage().capabilities().read_only);
    // The writer was never disturbed.
    append_n(&log, 3, 1).await;
    follower.close().await.unwrap();
    let err = follower.storage().read(None, 0, 1).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    log.close().await.unwrap();
}

#[tokio::test]
async fn a_follower_needs_a_log() {
    let tmp = tempfile::tempdir().unwrap();
    let kind = |r: weft::Result<DirFollower>| r.unwrap_err().kind();
    let missing = tmp.path().join("missing");
    assert_eq!(kind(DirFollower::open(&missing).await), ErrorKind::NotFound);
    assert!(!missing.exists(), "a follower creates nothing");
    let file = tmp.path().join("file");
    std::fs::write(&file, b"not a log").unwrap();
    assert_eq!(
        kind(DirFollower::open(&file).await),
        ErrorKind::InvalidInput
    );
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(kind(DirFollower::open(&empty).await), ErrorKind::NotFound);
    let options = DirFollowerOptions::default().with_poll_interval(Duration::ZERO);
    assert_eq!(
        kind(DirFollower::open_with(tmp.path(), options).await),
        ErrorKind::InvalidInput
    );
    // A log opened once and closed, with no entry, is a log.
    writer(&empty).await.close().await.unwrap();
    let follower = DirFollower::open(&empty).await.unwrap();
    assert_eq!(follower.tip().await.unwrap().next, 0);
}
