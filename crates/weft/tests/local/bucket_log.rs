//! The shared log on a bucket, on an in-memory store: the conformance suite
//! on the writer, followers that see exactly the writer's log, failover
//! that fences the old writer, follower restarts, and writers on faulty
//! stores. The scenario bodies that also run on the real servers are in
//! `support/bucket_log_cases.rs` (run there by `bucket_log_s3.rs` and
//! `bucket_log_azure.rs`).

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use support::bucket_log_cases::*;
use weft::storage::bucket::{BucketOptions, BucketStorage};
use weft::{AppendRequest, ErrorKind, Log, LogTag};
use weft_testkit::conformance::Fixture;

weft_testkit::conformance_suite!(bucket_in_memory, || async {
    Fixture::new(writer(Arc::new(InMemory::new())).await)
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_sees_the_writers_log_in_memory() {
    follower_sees_the_writers_log(Arc::new(InMemory::new())).await;
}

/// Regression: a conditional append that conflicted only with an append
/// still in flight answered `Conflict` at once; when that append then
/// failed (nothing committed), the answer named a version no state of the
/// log ever had. It now waits for the appends in flight. Found by the
/// simulation (tests/local/simulation.rs).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_conflict_with_an_append_in_flight_waits_for_it() {
    use weft::objects::RetryPolicy;
    use weft_testkit::fault::{FaultConfig, FaultStore};
    let faults = FaultStore::wrap(Arc::new(InMemory::new()), FaultConfig::default());
    let opts = BucketOptions::default()
        .with_flush_interval(Duration::from_millis(50))
        .with_retry(
            RetryPolicy::default()
                .with_max_attempts(2)
                .with_base_backoff(Duration::from_millis(5))
                .with_max_backoff(Duration::from_millis(5))
                .with_jitter(0.0),
        )
        .with_seed(Some(1));
    let acct: LogTag = "acct:0".parse().unwrap();

    // The append in flight commits: the conflict is real, and answered
    // after it.
    let log = Log::new(
        BucketStorage::open(faults.clone(), "a", opts.clone())
            .await
            .unwrap(),
    );
    let first = tokio::spawn({
        let (log, acct) = (log.clone(), acct.clone());
        async move { log.append(AppendRequest::new(acct, "first")).await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    let err = log
        .append_if(AppendRequest::new(acct.clone(), "second"), 0)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(err.conflict_next_version(), Some(1));
    assert_eq!(first.await.unwrap().unwrap().stream_version, 0);
    assert_eq!(
        log.next_version(&acct).await.unwrap(),
        1,
        "the conflict's answer is readable"
    );

    // The append in flight fails: no conflict is reported, the writer's
    // failure is.
    let log = Log::new(
        BucketStorage::open(faults.clone(), "b", opts)
            .await
            .unwrap(),
    );
    faults.fail_puts_under("b/segments/");
    let first = tokio::spawn({
        let (log, acct) = (log.clone(), acct.clone());
        async move { log.append(AppendRequest::new(acct, "first")).await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    let err = log
        .append_if(AppendRequest::new(acct.clone(), "second"), 0)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
    assert_eq!(
        first.await.unwrap().unwrap_err().kind(),
        ErrorKind::Unavailable
    );
    assert_eq!(
        log.next_version(&acct).await.unwrap(),
        0,
        "nothing was committed"
    );
}

/// Regression: opening a writer on a segment-numbered (v1/v2) WAL claimed
/// it first — bumping its epoch, fencing its writer and converting its
/// manifest to v4 — and then failed with `Corrupt` instead of the
/// documented `InvalidInput`. It is now refused before anything is
/// written.
#[tokio::test]
async fn a_segment_numbered_wal_is_refused_untouched() {
    use object_store::path::Path;
    use weft::format::{Compression, ManifestVersion, SegmentVersion, encode_segment};
    use weft::wal::Manifest;
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    for version in [ManifestVersion::V1, ManifestVersion::V2] {
        let mut m = Manifest::new(version);
        m.bump_epoch().unwrap();
        let seg = encode_segment(&[b"record"], Compression::None, SegmentVersion::V1).unwrap();
        store
            .put(&Path::from("wal/seg/0"), seg.into())
            .await
            .unwrap();
        m.append("wal/seg/0", vec![], 1).unwrap();
        let before = m.to_bytes().unwrap();
        store
            .put(&Path::from("wal/manifest"), before.clone().into())
            .await
            .unwrap();
        let err = BucketStorage::open(store.clone(), "wal", options())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{version:?}: {err}");
        let after = store
            .get(&Path::from("wal/manifest"))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(after, before, "{version:?}: the manifest was not touched");
    }
}

/// Regression: the rebuild on open read the log in one pass, so a single
/// failed segment fetch failed the open — after the claim had already
/// fenced the previous writer. On a flaky store a long log could not be
/// opened at all. The rebuild now retries, resuming where it stopped.
/// Found by the bucket-log simulation.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_writer_opens_on_a_flaky_store_by_retrying_the_rebuild() {
    use weft::objects::RetryPolicy;
    use weft_testkit::fault::{FaultConfig, FaultStore};
    let faults = FaultStore::wrap(Arc::new(InMemory::new()), FaultConfig::default());
    let first = writer(faults.clone()).await;
    write_some(&first, 0, 6).await;
    let want = everything(&first).await;
    first.close().await.unwrap();

    faults.fail_gets_under("log/segments/");
    tokio::spawn({
        let faults = faults.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            faults.clear_get_failures();
        }
    });
    let opts = options().with_retry(
        RetryPolicy::default()
            .with_max_attempts(10)
            .with_base_backoff(Duration::from_millis(20))
            .with_max_backoff(Duration::from_millis(200))
            .with_jitter(0.0),
    );
    let second = Log::new(
        BucketStorage::open(faults.clone(), "log", opts)
            .await
            .unwrap(),
    );
    assert_eq!(everything(&second).await, want);
    assert!(
        faults.stats().prefix_failures > 0,
        "the rebuild met failures"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_append_does_not_hide_the_appends_after_it() {
    use weft_testkit::fault::{FaultConfig, FaultStore, OpFaults};
    // Slow uploads, so the first append is still waiting when its caller
    // gives up.
    let slow = FaultStore::wrap(
        Arc::new(InMemory::new()),
        FaultConfig {
            seed: 5,
            put: OpFaults {
                latency: 1.0,
                latency_min: Duration::from_millis(150),
                latency_max: Duration::from_millis(200),
                ..OpFaults::default()
            },
            ..FaultConfig::default()
        },
    );
    let log = writer(slow).await;
    let t: LogTag = "t".parse().unwrap();
    let abandoned = tokio::time::timeout(
        Duration::from_millis(20),
        log.append(AppendRequest::new(t.clone(), "first")),
    )
    .await;
    assert!(abandoned.is_err(), "the first append was still in flight");
    let r = log
        .append(AppendRequest::new(t.clone(), "second"))
        .await
        .unwrap();
    assert_eq!(r.seqnum, 1);
    // Read-your-writes: the second is visible when its append returns, and
    // so is the first, which the WAL committed before it.
    let all: Vec<Vec<u8>> = everything(&log)
        .await
        .into_iter()
        .map(|e| e.data.to_vec())
        .collect();
    assert_eq!(all, [b"first".to_vec(), b"second".to_vec()]);
}

/// Append ids come back with the entries read from the bucket's objects
/// (after a reopen, nothing cached) and through a follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_ids_read_back_after_a_reopen_and_on_a_follower() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let first = writer(store.clone()).await;
    let t: LogTag = "orders".parse().unwrap();
    first
        .append(AppendRequest::new(t.clone(), "placed").with_id("o-1/placed"))
        .await
        .unwrap();
    first
        .append(AppendRequest::new(t.clone(), "plain"))
        .await
        .unwrap();
    first.close().await.unwrap();
    let want = vec![Some("o-1/placed".to_owned()), None];
    let ids = |entries: Vec<weft::LogEntry>| -> Vec<Option<String>> {
        entries.into_iter().map(|e| e.append_id).collect()
    };
    let second = writer(store.clone()).await;
    assert_eq!(ids(everything(&second).await), want);
    let follower = Log::new(
        weft::storage::bucket::BucketFollower::open(store.clone(), "log", follower_options())
            .await
            .unwrap(),
    );
    wait_caught_up(&follower, 2).await;
    assert_eq!(ids(everything(&follower).await), want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erase_removes_payloads_from_the_bucket_in_memory() {
    support::bucket_log_cases::erase_removes_payloads_from_the_bucket(Arc::new(InMemory::new()))
        .await;
}
