//! Behaviour of the `dir` backend through the `Log` API: reads, versions,
//! conditional and batch appends, trim, the commit feed, limits, close.

use crate::support::dir as dir_support;

use std::sync::Arc;

use dir_support::{open, open_with, payload, segments, small_segments, tag};
use futures::StreamExt;
use weft::storage::dir::{DirOptions, DirStorage, SyncMode};
use weft::storage::{NewEntry, Storage};
use weft::{AppendRequest, ErrorKind, Position};

#[tokio::test]
async fn appends_get_dense_seqnums_and_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let (_s, log) = open(tmp.path()).await;
    let (a, b) = (tag("a"), tag("b"));
    let mut expect = Vec::new();
    for i in 0..10u64 {
        let t = if i % 3 == 0 { &b } else { &a };
        let r = log
            .append(AppendRequest::new(t.clone(), payload(i)))
            .await
            .unwrap();
        assert_eq!(r.seqnum, i);
        expect.push((t.clone(), r.stream_version));
    }
    assert_eq!(log.latest_version(&a).await.unwrap(), Some(5));
    assert_eq!(log.latest_version(&b).await.unwrap(), Some(3));
    assert_eq!(log.latest_version(&tag("never")).await.unwrap(), None);
    assert_eq!(log.tip().await.unwrap().next, 10);
    let all = log.read_log(Position::Beginning, 100).await.unwrap();
    assert_eq!(all.len(), 10);
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e.seqnum, i as u64);
        assert_eq!(&e.data[..], &payload(i as u64)[..]);
        assert_eq!((e.tags[0].clone(), e.stream_version), expect[i]);
    }
}

#[tokio::test]
async fn reads_by_tag_version_and_prev_cross_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let (storage, log) = open_with(tmp.path(), small_segments()).await;
    let (a, b, shared) = (tag("a"), tag("b:key"), tag("shared"));
    for i in 0..200u64 {
        let t = if i % 2 == 0 { a.clone() } else { b.clone() };
        let mut req = AppendRequest::new(t, payload(i));
        if i % 5 == 0 {
            req = req.with_tag(shared.clone());
        }
        log.append(req).await.unwrap();
    }
    assert!(segments(tmp.path()).len() > 3, "small segments must roll");
    assert!(storage.stats().segments_created > 3);

    let of_a = log.read_all(&a).await.unwrap();
    assert_eq!(of_a.len(), 100);
    assert!(
        of_a.iter()
            .enumerate()
            .all(|(v, e)| e.stream_version == v as u64
                && e.seqnum == 2 * v as u64
                && e.data[..] == payload(2 * v as u64)[..])
    );

    let of_shared = log.read_all(&shared).await.unwrap();
    assert_eq!(
        of_shared.iter().map(|e| e.seqnum).collect::<Vec<_>>(),
        (0..200).step_by(5).collect::<Vec<u64>>()
    );

    let versions = log.storage().read_versions(&b, 40, 5).await.unwrap();
    assert_eq!(
        versions
            .iter()
            .map(|e| (e.stream_version, e.seqnum))
            .collect::<Vec<_>>(),
        vec![(40, 81), (41, 83), (42, 85), (43, 87), (44, 89)]
    );
    let after = log.read_after_version(&b, 98).await.unwrap();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].seqnum, 199);

    let prev = log
        .storage()
        .read_prev(Some(&shared), 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(prev.seqnum, 95);
    assert_eq!(&prev.data[..], &payload(95)[..]);
    let prev = log.storage().read_prev(None, 1).await.unwrap().unwrap();
    assert_eq!(prev.seqnum, 0);
    assert!(log.storage().read_prev(None, 0).await.unwrap().is_none());

    let middle = log.read_log(Position::At(57), 3).await.unwrap();
    assert_eq!(
        middle.iter().map(|e| e.seqnum).collect::<Vec<_>>(),
        vec![57, 58, 59]
    );
    assert!(log.read_log(Position::At(500), 3).await.unwrap().is_empty());
}

#[tokio::test]
async fn conditional_appends_check_versions_and_write_nothing_on_conflict() {
    let tmp = tempfile::tempdir().unwrap();
    let (storage, log) = open(tmp.path()).await;
    let t = tag("orders:1");
    log.append_if(AppendRequest::new(t.clone(), "placed"), 0)
        .await
        .unwrap();
    let err = log
        .append_if(AppendRequest::new(t.clone(), "dup"), 0)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(err.conflict_next_version(), Some(1));
    let r = log
        .append_if(AppendRequest::new(t.clone(), "paid"), 1)
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (1, 1));

    // A batch whose second expectation fails writes nothing at all.
    let u = tag("other");
    let err = log
        .append_batch_if(vec![
            (AppendRequest::new(u.clone(), "x"), Some(0)),
            (AppendRequest::new(t.clone(), "y"), Some(7)),
        ])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(log.tip().await.unwrap().next, 2);
    assert_eq!(log.latest_version(&u).await.unwrap(), None);

    // Expectations see the batch's own earlier entries.
    let rs = log
        .append_batch_if(vec![
            (AppendRequest::new(t.clone(), "a"), Some(2)),
            (AppendRequest::new(t.clone(), "b"), Some(3)),
            (AppendRequest::new(u.clone(), "c"), Some(0)),
        ])
        .await
        .unwrap();
    assert_eq!(
        rs.iter()
            .map(|r| (r.seqnum, r.stream_version))
            .collect::<Vec<_>>(),
        vec![(2, 2), (3, 3), (4, 0)]
    );
    assert_eq!(
        storage.stats().appends,
        3,
        "conflicts are not committed appends"
    );
}

#[tokio::test]
async fn concurrent_conditional_appends_have_one_winner_per_version() {
    let tmp = tempfile::tempdir().unwrap();
    let (_s, log) = open(tmp.path()).await;
    let t = tag("lease");
    let mut tasks = Vec::new();
    for i in 0..16 {
        let log = log.clone();
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            log.append_if(AppendRequest::new(t, format!("claim {i}")), 0)
                .await
        }));
    }
    let mut wins = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(r) => {
                assert_eq!(r.stream_version, 0);
                wins += 1;
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::Conflict),
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(log.read_all(&t).await.unwrap().len(), 1);
}

#[tokio::test]
async fn batches_are_contiguous_among_concurrent_appenders() {
    let tmp = tempfile::tempdir().unwrap();
    let (_s, log) = open(tmp.path()).await;
    let mut tasks = Vec::new();
    for w in 0..8u64 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for round in 0..10u64 {
                let reqs = (0..3)
                    .map(|k| AppendRequest::new(tag(&format!("w{w}")), format!("{w}/{round}/{k}")))
                    .collect();
                let rs = log.append_batch(reqs).await.unwrap();
                assert_eq!(rs[1].seqnum, rs[0].seqnum + 1);
                assert_eq!(rs[2].seqnum, rs[0].seqnum + 2);
                seen.push(rs[0].seqnum);
            }
            seen
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let all = log.read_log(Position::Beginning, 1000).await.unwrap();
    assert_eq!(all.len(), 240);
    for chunk in all.chunks(3) {
        let text: Vec<String> = chunk
            .iter()
            .map(|e| String::from_utf8(e.data.to_vec()).unwrap())
            .collect();
        let prefix = |s: &str| s.rsplit_once('/').unwrap().0.to_owned();
        assert_eq!(prefix(&text[0]), prefix(&text[2]), "batch split: {text:?}");
        assert!(text[0].ends_with("/0") && text[2].ends_with("/2"));
    }
}

#[tokio::test]
async fn trim_drops_entries_and_whole_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let (_s, log) = open_with(tmp.path(), small_segments()).await;
    let t = tag("t");
    for i in 0..300u64 {
        log.append(AppendRequest::new(t.clone(), payload(i)))
            .await
            .unwrap();
    }
    let before = segments(tmp.path()).len();
    log.trim(199).await.unwrap();
    let after = segments(tmp.path()).len();
    assert!(
        after < before,
        "segments wholly below the trim point go ({before} -> {after})"
    );
    assert_eq!(log.tip().await.unwrap().first, 200);
    let err = log.read_log(Position::At(150), 10).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    let err = log.storage().read_versions(&t, 10, 10).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    let first = log.read_log(Position::Beginning, 1).await.unwrap();
    assert_eq!(first[0].seqnum, 200);
    assert_eq!(&first[0].data[..], &payload(200)[..]);
    assert_eq!(log.latest_version(&t).await.unwrap(), Some(299));
    // Trimming below the trim point again is a no-op; past the end is an error.
    log.trim(10).await.unwrap();
    assert_eq!(log.tip().await.unwrap().first, 200);
    let err = log.trim(300).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    // Trimming everything keeps numbering.
    log.trim(299).await.unwrap();
    assert!(log.read_all(&t).await.unwrap().is_empty());
    let r = log
        .append_if(AppendRequest::new(t.clone(), "next"), 300)
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (300, 300));
}

#[tokio::test]
async fn subscriptions_get_backlog_then_live_entries() {
    let tmp = tempfile::tempdir().unwrap();
    let (_s, log) = open(tmp.path()).await;
    let t = tag("events");
    for i in 0..5u64 {
        log.append(AppendRequest::new(t.clone(), payload(i)))
            .await
            .unwrap();
    }
    let mut sub = log.subscribe(&t, Position::Beginning);
    let writer = {
        let log = log.clone();
        let t = t.clone();
        tokio::spawn(async move {
            for i in 5..50u64 {
                log.append(AppendRequest::new(t.clone(), payload(i)))
                    .await
                    .unwrap();
            }
        })
    };
    for i in 0..50u64 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), sub.next())
            .await
            .expect("subscription stalled")
            .unwrap()
            .unwrap();
        assert_eq!(e.seqnum, i);
        assert_eq!(&e.data[..], &payload(i)[..]);
    }
    writer.await.unwrap();
}

#[tokio::test]
async fn the_feed_only_carries_committed_entries_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let (storage, log) = open(tmp.path()).await;
    let mut rx = storage.feed().subscribe().unwrap();
    let mut tasks = Vec::new();
    for w in 0..4 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..25u64 {
                log.append(AppendRequest::new(tag(&format!("w{w}")), payload(i)))
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut next = 0;
    while next < 100 {
        let batch = rx.recv().await.unwrap();
        for e in batch.iter() {
            assert_eq!(e.seqnum, next);
            next += 1;
        }
    }
    // Each published batch was readable by then.
    assert_eq!(storage.tip().await.unwrap().next, 100);
}

#[tokio::test]
async fn invalid_appends_are_rejected_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let options = DirOptions::default().with_max_entry_bytes(1000);
    let (storage, log) = open_with(tmp.path(), options).await;
    let err = log
        .append(AppendRequest::new(tag("t"), vec![0u8; 1001]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(storage.capabilities().max_entry_bytes, 1000);
    assert!(storage.capabilities().durable);
    let err = storage.append(Vec::new()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = storage
        .append(vec![NewEntry {
            tags: vec![],
            data: "x".into(),
            expected_version: None,
            append_id: None,
        }])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = storage
        .append(vec![NewEntry {
            tags: vec![tag("t"), tag("t")],
            data: "x".into(),
            expected_version: None,
            append_id: None,
        }])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = storage
        .append(vec![
            NewEntry {
                tags: vec![tag("t")],
                data: "ok".into(),
                expected_version: None,
                append_id: None,
            },
            NewEntry {
                tags: vec![tag("t")],
                data: vec![1u8; 2000].into(),
                expected_version: None,
                append_id: None,
            },
        ])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(storage.tip().await.unwrap().next, 0);
    assert_eq!(storage.stats().bytes_written, 0);
}

#[tokio::test]
async fn bad_options_are_invalid_input() {
    let tmp = tempfile::tempdir().unwrap();
    for options in [
        DirOptions::default().with_segment_bytes(10),
        DirOptions::default().with_max_batch_entries(0),
        DirOptions::default().with_max_entry_bytes(usize::MAX),
    ] {
        let err = DirStorage::open_with(tmp.path(), options)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
    let json = serde_json::to_string(&DirOptions::default()).unwrap();
    let back: DirOptions = serde_json::from_str(&json).unwrap();
    assert_eq!(back, DirOptions::default());
    assert!(serde_json::from_str::<DirOptions>(r#"{"segmnet_bytes": 1}"#).is_err());
}

#[tokio::test]
async fn close_refuses_later_calls_and_releases_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (storage, log) = open(tmp.path()).await;
    log.append(AppendRequest::new(tag("t"), "x")).await.unwrap();
    storage.close().await.unwrap();
    storage.close().await.unwrap();
    let err = log
        .append(AppendRequest::new(tag("t"), "y"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    let err = log.read_log(Position::Beginning, 1).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed);
    assert_eq!(log.trim(0).await.unwrap_err().kind(), ErrorKind::Closed);
    // The handle still exists, but the directory is free again.
    let (_again, log2) = open(tmp.path()).await;
    assert_eq!(
        log2.read_log(Position::Beginning, 10).await.unwrap().len(),
        1
    );
}

#[tokio::test]
async fn a_failed_sync_stops_all_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let (storage, log) = open(tmp.path()).await;
    log.append(AppendRequest::new(tag("t"), "first"))
        .await
        .unwrap();
    storage.inject_sync_failure();
    let err = log
        .append(AppendRequest::new(tag("t"), "second"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Indeterminate);
    // The failed group never became visible.
    assert_eq!(storage.tip().await.unwrap().next, 1);
    for _ in 0..3 {
        let err = log
            .append(AppendRequest::new(tag("t"), "third"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed);
    }
    assert_eq!(log.trim(0).await.unwrap_err().kind(), ErrorKind::Closed);
    // Reads of what was durable still work.
    let all = log.read_log(Position::Beginning, 10).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(&all[0].data[..], b"first");
}

#[tokio::test]
async fn relaxed_mode_acknowledges_without_syncing_until_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let options = DirOptions::default().with_sync(SyncMode::Relaxed);
    {
        let (storage, log) = open_with(tmp.path(), options.clone()).await;
        for i in 0..20u64 {
            log.append(AppendRequest::new(tag("t"), payload(i)))
                .await
                .unwrap();
        }
        let syncs = storage.stats().syncs;
        assert_eq!(syncs, 0, "relaxed appends must not sync");
        storage.sync().await.unwrap();
        assert_eq!(storage.stats().syncs, 1);
        log.append(AppendRequest::new(tag("t"), payload(20)))
            .await
            .unwrap();
        storage.close().await.unwrap();
        assert_eq!(storage.stats().syncs, 2, "close syncs what is outstanding");
    }
    // Reopened durable: a new segment starts (segments record their mode).
    let (storage, log) = open(tmp.path()).await;
    log.append(AppendRequest::new(tag("t"), payload(21)))
        .await
        .unwrap();
    assert_eq!(storage.stats().segments_created, 1);
    assert_eq!(segments(tmp.path()).len(), 2);
    let all = log.read_all(&tag("t")).await.unwrap();
    assert_eq!(all.len(), 22);
    assert!(all.iter().all(|e| e.data[..] == payload(e.seqnum)[..]));
}

#[tokio::test]
async fn large_entries_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let (_s, log) = open_with(tmp.path(), small_segments()).await;
    let big: Vec<u8> = (0..(3 << 20)).map(|i| (i % 251) as u8).collect();
    log.append(AppendRequest::new(tag("big"), big.clone()))
        .await
        .unwrap();
    log.append(AppendRequest::new(tag("big"), "small"))
        .await
        .unwrap();
    let all = log.read_all(&tag("big")).await.unwrap();
    assert_eq!(&all[0].data[..], &big[..]);
    assert_eq!(&all[1].data[..], b"small");
}

#[tokio::test]
async fn kv_is_available_and_scoped() {
    let tmp = tempfile::tempdir().unwrap();
    let (_s, log) = open(tmp.path()).await;
    let a = log.kv(tag("view:a")).unwrap();
    let b = log.kv(tag("view:b")).unwrap();
    assert!(a.set_if_absent("owner", "node-1").await.unwrap());
    assert!(!a.set_if_absent("owner", "node-2").await.unwrap());
    assert_eq!(b.get("owner").await.unwrap(), None);
    assert_eq!(a.increment("n", 5).await.unwrap(), 5);
    let storage: Arc<dyn Storage> = log.storage().clone();
    storage.close().await.unwrap();
    assert_eq!(log.kv(tag("view:a")).unwrap_err().kind(), ErrorKind::Closed);
}

/// `Storage::append_one` (what `Log::append` uses; the dir backend sends a
/// lone entry to its writer without a vector either way) answers, refuses
/// and stores exactly as `append` of a batch of one: each case runs the
/// same sequence against two fresh logs, one per path, and compares every
/// answer and then the stored entries.
#[tokio::test]
async fn append_one_is_append_of_a_batch_of_one() {
    let entry = |t: &str, data: Vec<u8>, expected: Option<u64>, id: Option<&str>| NewEntry {
        tags: vec![tag(t)],
        data: data.into(),
        expected_version: expected.map(weft::Expected::Exact),
        append_id: id.map(str::to_owned),
    };
    let large = vec![7u8; 100 << 10];
    let cases: Vec<(&str, Vec<NewEntry>)> = vec![
        (
            "plain",
            vec![
                entry("a", payload(1), None, None),
                entry("b", payload(2), None, None),
            ],
        ),
        (
            "expected version met",
            vec![
                entry("a", payload(1), None, None),
                entry("a", payload(2), Some(1), None),
            ],
        ),
        (
            "expected version missed",
            vec![
                entry("a", payload(1), None, None),
                entry("a", payload(2), Some(5), None),
            ],
        ),
        (
            "append id, then its retry",
            vec![
                entry("a", payload(1), None, Some("x")),
                entry("a", payload(1), None, Some("x")),
            ],
        ),
        (
            "large payload (checksummed by the appender)",
            vec![
                entry("a", large.clone(), None, None),
                entry("a", large, Some(1), None),
            ],
        ),
        (
            "no tags",
            vec![NewEntry {
                tags: Vec::new(),
                ..entry("a", payload(1), None, None)
            }],
        ),
        (
            "too large",
            vec![entry("a", vec![0u8; (16 << 20) + 1], None, None)],
        ),
    ];
    for (name, entries) in cases {
        let (one_dir, batch_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let one = DirStorage::open(one_dir.path()).await.unwrap();
        let batch = DirStorage::open(batch_dir.path()).await.unwrap();
        for (i, e) in entries.into_iter().enumerate() {
            let by_one = one.append_one(e.clone()).await;
            let by_batch = batch.append(vec![e]).await;
            match (by_one, by_batch) {
                (Ok(o), Ok(mut b)) => {
                    assert_eq!(b.len(), 1, "{name}, append {i}");
                    let b = b.pop().unwrap();
                    // Everything but the time each log stamped.
                    assert_eq!(
                        (o.seqnum, o.stream_version, &o.primary_tag),
                        (b.seqnum, b.stream_version, &b.primary_tag),
                        "{name}, append {i}"
                    );
                }
                (Err(o), Err(b)) => {
                    assert_eq!(o.kind(), b.kind(), "{name}, append {i}");
                    assert_eq!(
                        o.conflict_next_version(),
                        b.conflict_next_version(),
                        "{name}, append {i}"
                    );
                }
                (o, b) => panic!("{name}, append {i}: append_one {o:?}, append {b:?}"),
            }
        }
        let stored_one = one.read(None, 0, 100).await.unwrap();
        let stored_batch = batch.read(None, 0, 100).await.unwrap();
        assert_eq!(stored_one.len(), stored_batch.len(), "{name}");
        for (o, b) in stored_one.iter().zip(&stored_batch) {
            assert_eq!(
                (o.seqnum, o.stream_version, &o.tags, &o.data),
                (b.seqnum, b.stream_version, &b.tags, &b.data),
                "{name}"
            );
        }
        one.close().await.unwrap();
        batch.close().await.unwrap();
    }
}
