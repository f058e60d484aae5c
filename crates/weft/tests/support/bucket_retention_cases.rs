//! Retention scenarios and helpers shared by `tests/local/bucket_retention.rs`
//! (in memory) and `tests/servers/bucket_retention_s3.rs` (SeaweedFS).

use std::sync::Arc;
use std::time::Duration;

use super::wal::manifest;
use object_store::ObjectStore;
use weft::clock::{Clock, ManualClock, SystemClock};
use weft::format::decode_log_state;
use weft::storage::bucket::{
    self, BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage,
};
use weft::{AppendRequest, ErrorKind, Log, LogEntry, LogTag, Position, Tip};

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

pub async fn writer(store: &Arc<dyn ObjectStore>) -> Log {
    Log::new(
        BucketStorage::open(store.clone(), "log", options())
            .await
            .unwrap(),
    )
}

pub async fn follower(store: &Arc<dyn ObjectStore>) -> Log {
    Log::new(
        BucketFollower::open(store.clone(), "log", follower_options())
            .await
            .unwrap(),
    )
}

pub fn tag(s: &str) -> LogTag {
    s.parse().unwrap()
}

pub async fn everything(log: &Log) -> Vec<LogEntry> {
    log.read_log(Position::At(log.tip().await.unwrap().first), usize::MAX)
        .await
        .unwrap()
}

/// Waits (bounded) until `cond` holds on `log`'s tip.
pub async fn until(what: &str, log: &Log, cond: impl Fn(Tip) -> bool) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while !cond(log.tip().await.unwrap()) {
            weft::clock::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what} within 30 s"));
}

/// What every reader of the trimmed log must agree on.
pub async fn assert_trimmed_view(log: &Log, first: u64, writer: &Log) {
    assert_eq!(log.tip().await.unwrap().first, first);
    let err = log.read_log(Position::At(first - 1), 10).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    assert_eq!(everything(log).await, everything(writer).await);
    for t in ["gone", "acct:a", "acct:b"] {
        assert_eq!(
            log.latest_version(&tag(t)).await.unwrap(),
            writer.latest_version(&tag(t)).await.unwrap(),
            "latest version of {t}"
        );
    }
    // Versions of the fully trimmed stream read as trimmed, not as absent.
    let err = log.read_after_version(&tag("gone"), 0).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
}

pub async fn trim_is_durable_and_every_reader_honours_it(store: Arc<dyn ObjectStore>) {
    let w1 = writer(&store).await;
    for i in 0..3 {
        w1.append(AppendRequest::new(tag("gone"), format!("g{i}")))
            .await
            .unwrap();
    }
    // One atomic batch: seqnums 3, 4, 5.
    w1.append_batch(vec![
        AppendRequest::new(tag("acct:a"), "a0"),
        AppendRequest::new(tag("acct:a"), "a1"),
        AppendRequest::new(tag("acct:b"), "b0"),
    ])
    .await
    .unwrap();
    for i in 2..4 {
        w1.append(AppendRequest::new(tag("acct:a"), format!("a{i}")))
            .await
            .unwrap();
    }
    let running = follower(&store).await;
    assert_eq!(running.latest_seqnum().await.unwrap(), Some(7));

    // Trim through 4: inside the batch.
    w1.trim(4).await.unwrap();
    assert_eq!(w1.tip().await.unwrap().first, 5);
    assert_eq!(w1.latest_version(&tag("gone")).await.unwrap(), Some(2));
    let m = manifest(&store, "log/manifest").await;
    let snap = m.snapshot().expect("the trim stored the log state").clone();
    assert_eq!(snap.through_seq, 4);
    assert!(
        snap.location.starts_with("log/snapshots/"),
        "{}",
        snap.location
    );
    assert_eq!(
        m.first_sequence(),
        3,
        "the straddling batch stays in the WAL"
    );
    let state = store
        .get(&object_store::path::Path::from(snap.location.as_str()))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let state = decode_log_state(&state).unwrap();
    assert_eq!(state.through, 4);
    // Every stream with no live entry left needs its floor (gone); one
    // whose entries go on after the trim point may be listed (an index in
    // memory lists it, one on disk leaves it to the live entries); acct:b's
    // only entry is after the trim point.
    let listed: Vec<_> = state
        .next_versions
        .iter()
        .filter(|(t, _)| *t != tag("acct:a"))
        .cloned()
        .collect();
    assert_eq!(listed, vec![(tag("gone"), 3)]);
    if let Some((_, v)) = state
        .next_versions
        .iter()
        .find(|(t, _)| *t == tag("acct:a"))
    {
        assert_eq!(*v, 2);
    }
    // Trimming at or below the trim point again changes nothing; past the
    // end is refused.
    w1.trim(2).await.unwrap();
    assert_eq!(
        manifest(&store, "log/manifest").await.snapshot(),
        Some(&snap)
    );
    assert_eq!(
        w1.trim(8).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );

    // The running follower drops the trimmed entries after its next poll.
    until("the running follower trimmed", &running, |t| t.first == 5).await;
    assert_trimmed_view(&running, 5, &w1).await;

    // A follower that starts now restores the state and agrees.
    let fresh = follower(&store).await;
    assert_trimmed_view(&fresh, 5, &w1).await;

    // A new writer (failover) starts at the first live entry and keeps
    // every stream's numbering, the fully trimmed one included.
    let w2 = writer(&store).await;
    assert_trimmed_view(&w2, 5, &w1).await;
    let fenced = w1.append(AppendRequest::new(tag("gone"), "zombie")).await;
    assert_eq!(fenced.unwrap_err().kind(), ErrorKind::Fenced);
    let r = w2
        .append(AppendRequest::new(tag("gone"), "g3"))
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (8, 3));
    let r = w2
        .append_if(AppendRequest::new(tag("acct:b"), "b1"), 1)
        .await
        .unwrap();
    assert_eq!((r.seqnum, r.stream_version), (9, 1));
    let conflict = w2
        .append_if(AppendRequest::new(tag("acct:a"), "stale"), 1)
        .await
        .unwrap_err();
    assert_eq!(conflict.kind(), ErrorKind::Conflict);
    for f in [&running, &fresh] {
        until("followers saw the new writer", f, |t| t.last() == Some(9)).await;
        assert_eq!(everything(f).await, everything(&w2).await);
        assert_eq!(f.latest_version(&tag("gone")).await.unwrap(), Some(3));
    }

    // A second trim, past the whole first batch, through the new writer.
    w2.trim(7).await.unwrap();
    for f in [&running, &fresh] {
        until("followers took the second trim", f, |t| t.first == 8).await;
        assert_eq!(everything(f).await, everything(&w2).await);
    }

    // GC (two hours on) deletes the superseded snapshot and the segments
    // no entry needs; every reader, old and new, still sees the same log.
    let later: Arc<dyn Clock> = ManualClock::new(SystemClock.now_ms() + 2 * 3_600_000);
    let report = bucket::gc(store.clone(), "log")
        .with_clock(later)
        .run()
        .await
        .unwrap();
    let gone: Vec<&str> = report.deleted.iter().map(|o| o.location.as_str()).collect();
    assert!(gone.contains(&snap.location.as_str()), "{gone:?}");
    assert!(
        gone.iter()
            .filter(|l| l.starts_with("log/segments/"))
            .count()
            >= 4,
        "{gone:?}"
    );
    let m = manifest(&store, "log/manifest").await;
    assert!(
        m.entries()
            .iter()
            .all(|e| !gone.contains(&e.location.as_str()))
    );
    let after_gc = follower(&store).await;
    assert_eq!(after_gc.tip().await.unwrap().first, 8);
    assert_eq!(everything(&after_gc).await, everything(&w2).await);
    assert_eq!(
        after_gc.latest_version(&tag("gone")).await.unwrap(),
        Some(3)
    );
    assert_eq!(
        after_gc.latest_version(&tag("acct:a")).await.unwrap(),
        Some(3)
    );
    w2.append(AppendRequest::new(tag("acct:a"), "a4"))
        .await
        .unwrap();
    until("the running follower goes on after GC", &running, |t| {
        t.last() == Some(10)
    })
    .await;
    assert_eq!(everything(&running).await, everything(&w2).await);
    for f in [running, fresh, after_gc] {
        assert_eq!(f.tip().await.unwrap().first, 8);
        f.close().await.unwrap();
    }
    let w3 = writer(&store).await;
    assert_eq!(everything(&w3).await, everything(&w2).await);
    assert_eq!(w3.next_version(&tag("gone")).await.unwrap(), 4);
}
