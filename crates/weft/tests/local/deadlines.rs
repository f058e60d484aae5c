//! Every bucket operation ends within its deadline when the store stops
//! answering (a paused server: requests are accepted and never answered),
//! with a clear kind: `Unavailable` when nothing can have been written,
//! `Indeterminate` for a write whose outcome is unknown.
//!
//! The store is the fault store with every request hanging for an hour; the
//! clock is tokio's paused one, so the deadlines are measured exactly.
//! `tests/server_pause.rs` does the same against a SIGSTOPped SeaweedFS.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use tokio::time::Instant;
use weft::kv::KvStore;
use weft::objects::RetryPolicy;
use weft::storage::bucket::{
    self, BucketFollower, BucketFollowerOptions, BucketKv, BucketOptions, BucketStorage,
};
use weft::wal::{Producer, Replica, SnapshotWriter};
use weft::{AppendRequest, ErrorKind, Log, LogTag};
use weft_testkit::fault::{FaultConfig, FaultStore, OpFaults};

const DEADLINE: Duration = Duration::from_secs(5);

/// How much past the deadline an operation may end: the one read that
/// settles a write's outcome (5 s at most), and the waits before it.
const SETTLE: Duration = Duration::from_secs(7);

fn retry() -> RetryPolicy {
    RetryPolicy::default().with_deadline(DEADLINE)
}

/// Every request hangs (nothing is performed) for an hour.
fn paused() -> FaultConfig {
    let hang = OpFaults {
        lost: 1.0,
        ..OpFaults::default()
    };
    FaultConfig {
        put: hang.clone(),
        get: hang.clone(),
        delete: hang,
        hang_for: Duration::from_secs(3_600),
        ..FaultConfig::default()
    }
}

type Op = Box<dyn FnOnce(Arc<dyn ObjectStore>) -> BoxFuture<'static, weft::Result<()>>>;

fn op<F, Fut>(f: F) -> Op
where
    F: FnOnce(Arc<dyn ObjectStore>) -> Fut + 'static,
    Fut: std::future::Future<Output = weft::Result<()>> + Send + 'static,
{
    Box::new(move |s| Box::pin(f(s)))
}

fn tag() -> LogTag {
    LogTag::new("orders").unwrap()
}

/// A bucket log with a few entries and a writer that closed.
async fn a_log(store: &Arc<dyn ObjectStore>) {
    let log = Log::new(
        BucketStorage::open(store.clone(), "log", BucketOptions::default())
            .await
            .unwrap(),
    );
    for i in 0..3 {
        log.append(AppendRequest::new(tag(), format!("e{i}")))
            .await
            .unwrap();
    }
    log.close().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn every_operation_ends_at_its_deadline_on_a_store_that_stopped_answering() {
    let options = || BucketOptions::default().with_retry(retry());
    let cases: Vec<(&str, Op, &[ErrorKind])> = vec![
        (
            "writer open",
            op(move |s| async move { BucketStorage::open(s, "log", options()).await.map(|_| ()) }),
            &[ErrorKind::Unavailable],
        ),
        (
            "follower open",
            op(|s| async move {
                let o = BucketFollowerOptions::default().with_retry(retry());
                BucketFollower::open(s, "log", o).await.map(|_| ())
            }),
            &[ErrorKind::Unavailable],
        ),
        (
            "producer open",
            op(|s| async move {
                Producer::builder(s, "log/manifest", "log/segments")
                    .with_retry_policy(retry())
                    .open()
                    .await
                    .map(|_| ())
            }),
            &[ErrorKind::Unavailable, ErrorKind::Indeterminate],
        ),
        (
            "replica poll",
            op(|s| async move {
                Replica::builder(s, "log/manifest", weft::wal::FnApplier::new(|_| Ok(())))
                    .with_request_timeout(DEADLINE)
                    .build()
                    .poll()
                    .await
                    .map(|_| ())
            }),
            &[ErrorKind::Unavailable],
        ),
        (
            "kv get",
            op(|s| async move {
                BucketKv::new(s, "log/kv")
                    .with_retry_policy(retry())
                    .get(&tag(), "k")
                    .await
                    .map(|_| ())
            }),
            &[ErrorKind::Unavailable],
        ),
        (
            "kv compare-and-set",
            op(|s| async move {
                BucketKv::new(s, "log/kv")
                    .with_retry_policy(retry())
                    .compare_and_set(&tag(), "k", None, Some(Bytes::from("v")))
                    .await
                    .map(|_| ())
            }),
            &[ErrorKind::Unavailable],
        ),
        (
            "gc",
            op(|s| async move {
                bucket::gc(s, "log")
                    .with_retry_policy(retry())
                    .run()
                    .await
                    .map(|_| ())
            }),
            &[ErrorKind::Unavailable],
        ),
        (
            "tool trim",
            op(|s| async move {
                bucket::trim_unowned(s, "log", 0, weft::clock::system(), &retry())
                    .await
                    .map(|_| ())
            }),
            &[ErrorKind::Unavailable],
        ),
        (
            "snapshot upload",
            op(|s| async move {
                SnapshotWriter::new(s, "log/manifest")
                    .with_retry_policy(retry())
                    .upload(Bytes::from("x"), 0)
                    .await
                    .map(|_| ())
            }),
            &[ErrorKind::Indeterminate, ErrorKind::Unavailable],
        ),
    ];
    for (name, run, kinds) in cases {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        a_log(&inner).await;
        let store = FaultStore::wrap(inner, paused());
        let started = Instant::now();
        let err = run(store)
            .await
            .expect_err(&format!("{name} succeeded on a silent store"));
        let took = started.elapsed();
        assert!(
            kinds.contains(&err.kind()),
            "{name}: {:?} ({err}), expected one of {kinds:?}",
            err.kind()
        );
        assert!(took <= DEADLINE + SETTLE, "{name} took {took:?}");
    }
}

/// Appends to a writer whose store stops answering: each is settled within
/// its deadline — `Indeterminate` (the commit may yet land) or
/// `Unavailable` — and the writer stops; nothing hangs.
#[tokio::test(start_paused = true)]
async fn appends_settle_within_their_deadline_when_the_store_stops_answering() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let store = FaultStore::wrap(inner, FaultConfig::default());
    let writer = BucketStorage::open(
        store.clone(),
        "log",
        BucketOptions::default().with_retry(retry()),
    )
    .await
    .unwrap();
    let log = Log::new(writer);
    log.append(AppendRequest::new(tag(), "before"))
        .await
        .unwrap();
    store.set_config(paused());
    let started = Instant::now();
    let appends: Vec<_> = (0..4)
        .map(|i| log.append(AppendRequest::new(tag(), format!("during {i}"))))
        .collect();
    for result in futures::future::join_all(appends).await {
        let kind = result.unwrap_err().kind();
        assert!(
            matches!(
                kind,
                ErrorKind::Indeterminate | ErrorKind::Unavailable | ErrorKind::Closed
            ),
            "{kind:?}"
        );
    }
    let took = started.elapsed();
    assert!(took <= DEADLINE + SETTLE, "the appends took {took:?}");
    let later = log.append(AppendRequest::new(tag(), "after")).await;
    assert_eq!(later.unwrap_err().kind(), ErrorKind::Closed);
    let _ = log.storage().close().await;
}

/// Reads that descend a v5 manifest's history pages end at the deadline
/// too when only the pages stop answering (the manifest still does): a
/// replica starting at the log's beginning, and GC walking the tree.
#[tokio::test(start_paused = true)]
async fn history_page_reads_end_at_the_deadline() {
    use weft::wal::{CheckpointPolicy, Gc};
    use weft_testkit::hooked::{Before, HookedStore, before};
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let producer = Producer::builder(inner.clone(), "log/manifest", "log/segments")
        .with_flush_interval(Duration::from_millis(1))
        .with_checkpoint_policy(
            CheckpointPolicy::default()
                .with_max_recent_entries(4)
                .with_leaf_entries(2)
                .with_fanout(2),
        )
        .open()
        .await
        .unwrap();
    for i in 0..20 {
        producer
            .append(vec![Bytes::from(format!("r{i}"))], None)
            .await
            .unwrap()
            .wait()
            .await
            .unwrap();
    }
    producer.close().await.unwrap();
    let pages = inner
        .list_with_delimiter(Some(&"log/history".into()))
        .await
        .unwrap();
    assert!(!pages.objects.is_empty(), "the log checkpointed");
    let store: Arc<dyn ObjectStore> = Arc::new(HookedStore::new(inner).with_hook(before(
        |call, _inner| async move {
            if call.path.as_ref().starts_with("log/history/") {
                tokio::time::sleep(Duration::from_secs(3_600)).await;
            }
            Before::Proceed
        },
    )));
    let started = Instant::now();
    let err = Replica::builder(
        store.clone(),
        "log/manifest",
        weft::wal::FnApplier::new(|_| Ok(())),
    )
    .with_request_timeout(DEADLINE)
    .build()
    .poll()
    .await
    .expect_err("the replica read hung pages");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(started.elapsed() <= DEADLINE + SETTLE);
    let started = Instant::now();
    let err = Gc::new(store, "log/manifest", "log/segments")
        .with_retry_policy(retry())
        .run()
        .await
        .expect_err("GC read hung pages");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(started.elapsed() <= DEADLINE + SETTLE);
}
