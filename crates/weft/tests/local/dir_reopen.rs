//! Reopening a `dir` log: counters, versions, tags, payloads, timestamps
//! and the trim point come back exactly.

use crate::support::dir as dir_support;

use std::sync::Arc;

use dir_support::{open, open_with, payload, segments, small_segments, tag};
use weft::clock::ManualClock;
use weft::storage::Storage;
use weft::storage::dir::{DirOptions, DirStorage};
use weft::{AppendRequest, ErrorKind, Log, LogEntry, Position};

async fn everything(log: &Log) -> Vec<LogEntry> {
    log.read_log(Position::Beginning, 100_000).await.unwrap()
}

#[tokio::test]
async fn counters_tags_versions_and_data_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000);
    let before = {
        let storage = DirStorage::open_with_clock(tmp.path(), small_segments(), clock.clone())
            .await
            .unwrap();
        let log = Log::new(storage);
        for i in 0..120u64 {
            clock.advance(3);
            let primary = tag(&format!("stream:{}", i % 4));
            let req = AppendRequest::new(primary, payload(i))
                .with_tag(tag("all"))
                .with_tag(tag(&format!("parity:{}", i % 2)));
            if i % 10 == 0 {
                let reqs = vec![
                    req.clone(),
                    AppendRequest::new(tag("batch"), payload(i + 1000)),
                ];
                log.append_batch(reqs).await.unwrap();
            } else {
                log.append(req).await.unwrap();
            }
        }
        let all = everything(&log).await;
        log.storage().close().await.unwrap();
        all
    };
    assert_eq!(before.len(), 132);

    let (_s, log) = open_with(tmp.path(), small_segments()).await;
    assert_eq!(
        everything(&log).await,
        before,
        "entries differ after reopen"
    );
    assert_eq!(log.tip().await.unwrap().next, 132);
    for k in 0..4 {
        assert_eq!(
            log.latest_version(&tag(&format!("stream:{k}")))
                .await
                .unwrap(),
            Some(29)
        );
    }
    assert_eq!(log.latest_version(&tag("batch")).await.unwrap(), Some(11));
    assert_eq!(
        log.latest_version(&tag("all")).await.unwrap(),
        None,
        "secondary-only tags have no version"
    );
    assert_eq!(log.read_all(&tag("parity:1")).await.unwrap().len(), 60);

    // Numbering continues exactly where it stopped.
    let r = log
        .append_if(AppendRequest::new(tag("stream:2"), "next"), 30)
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (132, 30));
    let err = log
        .append_if(AppendRequest::new(tag("batch"), "stale"), 11)
        .await
        .unwrap_err();
    assert_eq!(err.conflict_next_version(), Some(12));
}

#[tokio::test]
async fn reopen_of_an_empty_or_fresh_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let nested = tmp.path().join("a/b/log");
    {
        let (s, _log) = open(&nested).await;
        s.close().await.unwrap();
    }
    // Opening made the directory a log: its KV directory is there.
    assert!(nested.join("kv").is_dir());
    let (s, log) = open(&nested).await;
    assert_eq!(s.tip().await.unwrap().next, 0);
    assert!(everything(&log).await.is_empty());
    let r = log.append(AppendRequest::new(tag("t"), "x")).await.unwrap();
    assert_eq!(r.seqnum, 0);
}

#[tokio::test]
async fn trim_point_and_trimmed_versions_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let (gone, kept) = (tag("gone"), tag("kept"));
    {
        let (_s, log) = open_with(tmp.path(), small_segments()).await;
        for i in 0..100u64 {
            log.append(AppendRequest::new(gone.clone(), payload(i)))
                .await
                .unwrap();
        }
        for i in 100..200u64 {
            log.append(AppendRequest::new(kept.clone(), payload(i)))
                .await
                .unwrap();
        }
        log.trim(149).await.unwrap();
        log.storage().close().await.unwrap();
    }
    let (_s, log) = open_with(tmp.path(), small_segments()).await;
    assert_eq!(log.tip().await.unwrap().first, 150);
    assert_eq!(log.tip().await.unwrap().next, 200);
    assert_eq!(
        log.read_log(Position::At(149), 1).await.unwrap_err().kind(),
        ErrorKind::Trimmed
    );
    let first = log.read_log(Position::Beginning, 1).await.unwrap();
    assert_eq!((first[0].seqnum, first[0].stream_version), (150, 50));
    assert_eq!(&first[0].data[..], &payload(150)[..]);
    // A stream trimmed away entirely keeps its numbering.
    assert_eq!(log.latest_version(&gone).await.unwrap(), Some(99));
    assert!(log.read_all(&gone).await.unwrap().is_empty());
    assert_eq!(
        log.storage()
            .read_versions(&gone, 0, 10)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Trimmed
    );
    assert_eq!(
        log.storage()
            .read_versions(&kept, 10, 10)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Trimmed
    );
    assert_eq!(
        log.storage().read_versions(&kept, 50, 1).await.unwrap()[0].seqnum,
        150
    );
    let r = log
        .append_if(AppendRequest::new(gone.clone(), "back"), 100)
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (200, 100));
    let r = log
        .append_if(AppendRequest::new(kept.clone(), "more"), 100)
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (201, 100));
}

#[tokio::test]
async fn trim_of_everything_then_reopen_continues_numbering() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let (_s, log) = open_with(tmp.path(), small_segments()).await;
        for i in 0..80u64 {
            log.append(AppendRequest::new(tag("t"), payload(i)))
                .await
                .unwrap();
        }
        log.trim(79).await.unwrap();
        log.storage().close().await.unwrap();
    }
    let (_s, log) = open_with(tmp.path(), small_segments()).await;
    assert_eq!(log.tip().await.unwrap().first, 80);
    assert_eq!(log.tip().await.unwrap().next, 80);
    assert!(everything(&log).await.is_empty());
    let r = log.append(AppendRequest::new(tag("t"), "x")).await.unwrap();
    assert_eq!((r.seqnum, r.stream_version), (80, 80));
}

#[tokio::test]
async fn an_interrupted_trim_is_finished_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let copy;
    {
        let (_s, log) = open_with(tmp.path(), small_segments()).await;
        for i in 0..200u64 {
            log.append(AppendRequest::new(tag("t"), payload(i)))
                .await
                .unwrap();
        }
        // Keep the segments as they were before the trim...
        copy = dir_support::copy_dir(tmp.path());
        log.trim(150).await.unwrap();
        log.storage().close().await.unwrap();
    }
    // ...and put the new trim file next to them: the crash came after the
    // trim point was durable but before any segment was deleted.
    std::fs::copy(tmp.path().join("trim"), copy.path().join("trim")).unwrap();
    let before = segments(copy.path()).len();
    let (_s, log) = open_with(copy.path(), small_segments()).await;
    assert!(segments(copy.path()).len() < before);
    assert_eq!(log.tip().await.unwrap().first, 151);
    assert_eq!(everything(&log).await.len(), 49);
    assert_eq!(log.latest_version(&tag("t")).await.unwrap(), Some(199));
}

#[tokio::test]
async fn many_reopens_keep_appending_densely() {
    let tmp = tempfile::tempdir().unwrap();
    let mut expected = 0u64;
    for round in 0..6u64 {
        let options = DirOptions::default().with_segment_bytes(4096 + round * 1000);
        let (storage, log) = open_with(tmp.path(), options).await;
        assert_eq!(storage.tip().await.unwrap().next, expected);
        for _ in 0..15 {
            let r = log
                .append_if(AppendRequest::new(tag("t"), payload(expected)), expected)
                .await
                .unwrap();
            assert_eq!(r.seqnum, expected);
            expected += 1;
        }
        drop(log);
        assert!(
            Arc::try_unwrap(storage).is_ok(),
            "the test holds the only handle"
        );
    }
    let (_s, log) = open(tmp.path()).await;
    let all = everything(&log).await;
    assert_eq!(all.len() as u64, expected);
    assert!(
        all.iter()
            .all(|e| e.data[..] == payload(e.seqnum)[..] && e.stream_version == e.seqnum)
    );
}

#[tokio::test]
async fn large_and_small_payloads_mixed_in_batches_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let big = |i: u64| -> Vec<u8> {
        (0..(100_000 + i as usize * 777))
            .map(|j| (j as u64 * 31 + i) as u8)
            .collect()
    };
    let mut expected = Vec::new();
    {
        let (_s, log) = open(tmp.path()).await;
        let mut tasks = Vec::new();
        for w in 0..4u64 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..5u64 {
                    let k = w * 100 + i;
                    let reqs = vec![
                        AppendRequest::new(tag(&format!("w{w}")), payload(k)),
                        AppendRequest::new(tag(&format!("w{w}")), big(k)),
                        AppendRequest::new(tag(&format!("w{w}")), payload(k + 50)),
                    ];
                    log.append_batch(reqs).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        expected.extend(everything(&log).await);
        log.storage().close().await.unwrap();
    }
    assert_eq!(expected.len(), 60);
    for chunk in expected.chunks(3) {
        assert!(
            chunk[0].data.len() < 300
                && chunk[1].data.len() >= 100_000
                && chunk[2].data.len() < 300
        );
    }
    let (_s, log) = open(tmp.path()).await;
    assert_eq!(everything(&log).await, expected);
}
