//! Producer test bodies shared by every real object store weft is tested on
//! (SeaweedFS for S3, Azurite for Azure Blob). Each takes the store to
//! test; `tests/servers/producer_s3.rs` and `tests/servers/producer_azure.rs` call them
//! with stores under fresh prefixes.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Duration;

use super::wal::{batch, manifest, records};
use bytes::Bytes;
use object_store::ObjectStore;
use weft::ErrorKind;
use weft::objects::RetryPolicy;
use weft::wal::{Producer, ProducerBuilder};
use weft_testkit::fault::{FaultConfig, FaultStore, OpFaults};

const MANIFEST: &str = "wal/manifest";
const SEGMENTS: &str = "wal/seg";

fn retries() -> RetryPolicy {
    RetryPolicy::default()
        .with_max_attempts(10)
        .with_base_backoff(Duration::from_millis(5))
        .with_max_backoff(Duration::from_millis(200))
        .with_jitter(0.5)
}

/// Opening fences any earlier writer at once (the failover these tests
/// make on purpose; the writer lease has its own tests).
fn builder(store: Arc<dyn ObjectStore>) -> ProducerBuilder {
    Producer::builder(store, MANIFEST, SEGMENTS)
        .with_take_over(true)
        .with_flush_interval(Duration::from_millis(10))
        .with_retry_policy(retries())
}

/// Appends come back from the bucket in order, byte for byte.
pub async fn appends_round_trip_through_the_bucket(store: Arc<dyn ObjectStore>) {
    let p = builder(store.clone()).open().await.unwrap();
    assert_eq!(p.epoch(), 1);
    let a = p
        .append(batch(0, 3), Some(Bytes::from_static(b"m")))
        .await
        .unwrap();
    let b = p.append(batch(1, 2), None).await.unwrap();
    assert_eq!(a.wait().await.unwrap(), 0);
    assert_eq!(b.wait().await.unwrap(), 3);
    p.close().await.unwrap();
    let got: Vec<Bytes> = records(&store, MANIFEST)
        .await
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    let expect: Vec<Bytes> = batch(0, 3).into_iter().chain(batch(1, 2)).collect();
    assert_eq!(got, expect);
}

/// A second producer takes over with the next epoch; the first is fenced and nothing it sends later is committed.
pub async fn a_second_producer_fences_the_first(store: Arc<dyn ObjectStore>) {
    let first = builder(store.clone()).open().await.unwrap();
    first
        .append(batch(1, 2), None)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    let second = builder(store.clone()).open().await.unwrap();
    assert_eq!(second.epoch(), first.epoch() + 1);

    let late = first.append(batch(1, 1), None).await.unwrap();
    assert_eq!(late.wait().await.unwrap_err().kind(), ErrorKind::Fenced);
    assert_eq!(
        first.append(batch(1, 1), None).await.unwrap_err().kind(),
        ErrorKind::Fenced
    );
    let d = second.append(batch(2, 1), None).await.unwrap();
    assert_eq!(d.wait().await.unwrap(), 2);
    second.close().await.unwrap();

    let m = manifest(&store, MANIFEST).await;
    let first_run = first.run_id().to_string();
    let from_first: Vec<bool> = m
        .entries()
        .iter()
        .map(|e| e.location.contains(&first_run))
        .collect();
    assert_eq!(from_first, vec![true, false]);
}

/// Racing opens each win one epoch; only the newest producer commits.
pub async fn racing_opens_get_distinct_epochs_and_only_the_last_commits(
    store: Arc<dyn ObjectStore>,
) {
    let opens = (0..3).map(|_| {
        let store = store.clone();
        tokio::spawn(async move { builder(store).open().await.unwrap() })
    });
    let mut producers = Vec::new();
    for o in opens {
        producers.push(o.await.unwrap());
    }
    let mut epochs: Vec<u64> = producers.iter().map(|p| p.epoch()).collect();
    epochs.sort();
    assert_eq!(epochs, vec![1, 2, 3], "each claim won exactly once");

    let mut outcomes = Vec::new();
    for p in &producers {
        let d = p.append(batch(p.epoch() as usize, 1), None).await.unwrap();
        outcomes.push((p.epoch(), d.wait().await.map_err(|e| e.kind())));
    }
    for (epoch, outcome) in outcomes {
        if epoch == 3 {
            assert_eq!(outcome, Ok(0));
        } else {
            assert_eq!(outcome, Err(ErrorKind::Fenced), "epoch {epoch}");
        }
    }
    let got = records(&store, MANIFEST).await;
    assert_eq!(got, vec![(0, batch(3, 1).remove(0))]);
}

/// Concurrent appends are coalesced into segments and each learns its exact sequence.
pub async fn concurrent_appends_coalesce_with_correct_sequences(store: Arc<dyn ObjectStore>) {
    let p = Arc::new(
        builder(store.clone())
            .with_flush_interval(Duration::from_millis(40))
            .with_segment_max_bytes(64)
            .with_manifest_batch(4)
            .open()
            .await
            .unwrap(),
    );
    let tasks: Vec<_> = (0..16)
        .map(|who| {
            let p = p.clone();
            tokio::spawn(async move {
                let n = 1 + who % 3;
                let d = p.append(batch(who, n), None).await.unwrap();
                (who, n, d.wait().await.unwrap())
            })
        })
        .collect();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    p.close().await.unwrap();
    let log = records(&store, MANIFEST).await;
    for (who, n, seq) in results {
        let mine: Vec<Bytes> = log[seq as usize..seq as usize + n]
            .iter()
            .map(|(_, r)| r.clone())
            .collect();
        assert_eq!(mine, batch(who, n), "appender {who} at {seq}");
    }
}

/// Slow uploads still commit in order, and injected 409s and 412s on the way are retried.
pub async fn slow_uploads_commit_in_order_and_conflicts_are_retried(store: Arc<dyn ObjectStore>) {
    let config = FaultConfig {
        seed: 21,
        precondition_storm: 0.3,
        put: OpFaults {
            latency: 1.0,
            latency_min: Duration::from_millis(1),
            latency_max: Duration::from_millis(150),
            conflict_409: 0.1,
            ..OpFaults::default()
        },
        ..FaultConfig::default()
    };
    let faults = FaultStore::wrap(store.clone(), config.clone());
    let p = builder(faults.clone())
        .with_segment_max_bytes(1)
        .with_retry_policy(retries().with_max_attempts(30))
        .open()
        .await
        .unwrap();
    // How many manifest commits the appends coalesce into depends on the
    // store's speed (a fast one needs fewer), so a 30% storm alone can miss
    // every one of them. The first commit therefore meets a certain 412,
    // then the seeded storm goes on.
    faults.set_config(FaultConfig {
        precondition_storm: 1.0,
        ..config.clone()
    });
    let mut ds = Vec::new();
    for who in 0..8 {
        ds.push(p.append(batch(who, 2), None).await.unwrap());
    }
    tokio::time::timeout(Duration::from_secs(30), async {
        while faults.stats().preconditions == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("a manifest commit met the storm within 30 s");
    faults.set_config(config);
    let mut seqs = Vec::new();
    for d in ds {
        seqs.push(d.wait().await.unwrap());
    }
    p.close().await.unwrap();
    assert_eq!(seqs, (0..8).map(|i| i * 2).collect::<Vec<u64>>());
    assert!(faults.stats().preconditions > 0, "{:?}", faults.stats());
    let m = manifest(&store, MANIFEST).await;
    let locations: Vec<String> = m.entries().iter().map(|e| e.location.clone()).collect();
    let mut sorted = locations.clone();
    sorted.sort();
    assert_eq!(locations, sorted, "committed in ordinal order");
    let log: Vec<Bytes> = records(&store, MANIFEST)
        .await
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    let expect: Vec<Bytes> = (0..8).flat_map(|w| batch(w, 2)).collect();
    assert_eq!(log, expect);
}

/// When retries run out the producer halts, and every waiter gets the error.
pub async fn exhausted_retries_halt_and_every_waiter_errors(store: Arc<dyn ObjectStore>) {
    let faults = FaultStore::wrap(store.clone(), FaultConfig::default());
    let p = builder(faults.clone())
        .with_retry_policy(retries().with_max_attempts(3))
        .open()
        .await
        .unwrap();
    faults.set_config(FaultConfig {
        precondition_storm: 1.0,
        ..FaultConfig::default()
    });
    let mut ds = Vec::new();
    for who in 0..3 {
        ds.push(p.append(batch(who, 1), None).await.unwrap());
    }
    for d in ds {
        assert_eq!(d.wait().await.unwrap_err().kind(), ErrorKind::Conflict);
    }
    assert_eq!(
        p.append(batch(0, 1), None).await.unwrap_err().kind(),
        ErrorKind::Closed
    );
    assert_eq!(p.close().await.unwrap_err().kind(), ErrorKind::Conflict);
    assert!(manifest(&store, MANIFEST).await.is_empty());
}

/// Empty appends and appends larger than the in-flight budget are refused.
pub async fn empty_and_oversized_appends_are_refused(store: Arc<dyn ObjectStore>) {
    let p = builder(store)
        .with_max_inflight_bytes(1024)
        .open()
        .await
        .unwrap();
    assert_eq!(
        p.append(vec![], None).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        p.append(vec![Bytes::from(vec![0u8; 1024])], None)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
    let d = p.append(batch(0, 1), None).await.unwrap();
    assert_eq!(d.wait().await.unwrap(), 0);
    p.close().await.unwrap();
}

/// `bad` has a wrong secret: opening fails with `PermissionDenied`.
pub async fn wrong_credentials_fail_open_with_permission_denied(bad: Arc<dyn ObjectStore>) {
    let err = builder(bad).open().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
}

/// `dead` points at a closed port: opening fails with `Unavailable` after bounded retries.
pub async fn an_unreachable_endpoint_fails_open_with_unavailable(dead: Arc<dyn ObjectStore>) {
    let err = builder(dead)
        .with_retry_policy(retries().with_max_attempts(3))
        .open()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
}
