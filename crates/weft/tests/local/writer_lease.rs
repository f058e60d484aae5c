//! The writer lease: a running bucket writer is visible, and opening a
//! writer does not fence it by accident.
//!
//! In memory on tokio's paused clock (so renewal periods are exact); the
//! bucket writers' scenario (`support/writer_lease_cases.rs`) also runs on
//! SeaweedFS with two handles (`tests/servers/writer_lease_s3.rs`).

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use object_store::path::Path;
use support::writer_lease_cases::bucket_writers_see_each_others_lease;
use tokio::time::Instant;
use weft::ErrorKind;
use weft::clock::ManualClock;
use weft::format::{WriterLease, decode_lease};
use weft::objects::RetryPolicy;
use weft::wal::{Producer, ProducerBuilder};
use weft_testkit::fault::{FaultConfig, FaultStore};

const MANIFEST: &str = "wal/manifest";
const LEASE: &str = "wal/manifest.lease";
const RENEW: Duration = Duration::from_secs(2);

fn writer(store: &Arc<dyn ObjectStore>, name: &str) -> ProducerBuilder {
    Producer::builder(store.clone(), MANIFEST, "wal/seg")
        .with_holder(name)
        .with_lease_renewal(RENEW)
        .with_flush_interval(Duration::from_millis(5))
}

async fn lease(store: &Arc<dyn ObjectStore>) -> WriterLease {
    let bytes = store
        .get(&Path::from(LEASE))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    decode_lease(&bytes).unwrap()
}

async fn append(p: &Producer) -> weft::Result<u64> {
    p.append(vec![Bytes::from("x")], None).await?.wait().await
}

#[tokio::test(start_paused = true)]
async fn a_live_writer_is_refused_named_and_taken_over_only_on_purpose() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let service = writer(&store, "billing service").open().await.unwrap();
    append(&service).await.unwrap();
    let held = lease(&store).await;
    assert_eq!((held.run, held.epoch), (service.run_id(), service.epoch()));
    assert!(held.holder.starts_with("billing service (pid "));
    assert!(!held.released);

    // A second writer watches the lease, sees it renewed, and refuses.
    let started = Instant::now();
    let err = writer(&store, "weft append").open().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Locked);
    for part in ["billing service", &service.run_id().to_string(), "epoch 1"] {
        assert!(err.message().contains(part), "{part} in {err}");
    }
    assert!(
        started.elapsed() <= RENEW * 3,
        "within three renewal periods"
    );
    assert!(
        lease(&store).await.renewals > held.renewals,
        "renewed meanwhile"
    );
    // Nothing was written: the service goes on.
    append(&service).await.unwrap();
    assert_eq!(service.halted().map(|e| e.kind()), None);

    // Taking over on purpose fences it, and its renewals stop.
    let admin = writer(&store, "failover")
        .with_take_over(true)
        .open()
        .await
        .unwrap();
    assert_eq!(admin.epoch(), 2);
    assert_eq!(
        append(&service).await.unwrap_err().kind(),
        ErrorKind::Fenced
    );
    tokio::time::sleep(RENEW * 4).await;
    let now = lease(&store).await;
    assert_eq!(
        (now.run, now.epoch),
        (admin.run_id(), 2),
        "the new writer's"
    );
    append(&admin).await.unwrap();
    let _ = service.close().await;
    assert_eq!(
        lease(&store).await.run,
        admin.run_id(),
        "not released by the old one"
    );
    admin.close().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_opens_at_once_and_a_dead_writer_costs_three_periods() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    // Closed: released, the next writer opens without waiting.
    let first = writer(&store, "first").open().await.unwrap();
    append(&first).await.unwrap();
    first.close().await.unwrap();
    assert!(lease(&store).await.released);
    let started = Instant::now();
    let second = writer(&store, "second").open().await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    append(&second).await.unwrap();
    // Gone without closing (a crash): nobody renews; the next open waits
    // for three renewal periods, then takes the log.
    drop(second);
    let started = Instant::now();
    let third = writer(&store, "third").open().await.unwrap();
    let waited = started.elapsed();
    assert!(waited >= RENEW * 3 && waited <= RENEW * 3 + Duration::from_secs(3));
    assert_eq!(append(&third).await.unwrap(), 2, "the log goes on");
    third.close().await.unwrap();
}

/// The verdict depends on what the opener sees on its own clock, never on
/// comparing clocks: a live writer whose clock is decades ahead is still
/// live, a dead one whose clock is decades behind still dead.
#[tokio::test(start_paused = true)]
async fn clock_skew_does_not_change_the_verdict() {
    const YEAR_MS: u64 = 365 * 86_400_000;
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let ahead = writer(&store, "ahead")
        .with_clock(ManualClock::new(1_700_000_000_000 + 80 * YEAR_MS))
        .open()
        .await
        .unwrap();
    let behind = |name: &str| writer(&store, name).with_clock(ManualClock::new(1_000));
    assert_eq!(
        behind("opener").open().await.unwrap_err().kind(),
        ErrorKind::Locked
    );
    drop(ahead);
    let opened = behind("opener").open().await.unwrap();
    opened.close().await.unwrap();
}

/// A writer that halts for another reason than being fenced (the store
/// kept failing) gives its lease up, so it can be replaced at once.
#[tokio::test(start_paused = true)]
async fn a_halted_writer_releases_its_lease() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faults = FaultStore::wrap(inner.clone(), FaultConfig::default());
    let store: Arc<dyn ObjectStore> = faults.clone();
    let failing = writer(&store, "failing")
        .with_retry_policy(
            RetryPolicy::default()
                .with_max_attempts(2)
                .with_base_backoff(Duration::from_millis(1)),
        )
        .open()
        .await
        .unwrap();
    faults.fail_puts_under("wal/seg");
    assert_eq!(
        append(&failing).await.unwrap_err().kind(),
        ErrorKind::Unavailable
    );
    faults.clear_put_failures();
    tokio::time::sleep(RENEW * 2).await;
    assert!(lease(&inner).await.released);
    let started = Instant::now();
    let next = writer(&inner, "next").open().await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    next.close().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_damaged_lease_is_corrupt_until_taken_over_and_bad_periods_are_refused() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    store
        .put(&Path::from(LEASE), "not a lease".into())
        .await
        .unwrap();
    assert_eq!(
        writer(&store, "w").open().await.unwrap_err().kind(),
        ErrorKind::Corrupt
    );
    let w = writer(&store, "w")
        .with_take_over(true)
        .open()
        .await
        .unwrap();
    assert_eq!(lease(&store).await.run, w.run_id(), "replaced");
    w.close().await.unwrap();
    for bad in [Duration::ZERO, Duration::from_secs(21)] {
        let err = writer(&store, "w")
            .with_lease_renewal(bad)
            .open()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn bucket_writers_see_each_others_lease_in_memory() {
    bucket_writers_see_each_others_lease(Arc::new(InMemory::new())).await;
}
