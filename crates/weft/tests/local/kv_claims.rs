//! Conditional KV semantics under concurrency: claims, counters,
//! compare-and-set, releases. Written against `ViewKv` only, so the same
//! bodies can run on any backend's KV; here they run on the memory log.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Barrier;
use weft::{Log, LogTag, ViewKv};

fn kv(log: &Log, key: &str) -> ViewKv {
    log.kv(LogTag::with_key("claims", key).unwrap()).unwrap()
}

async fn exactly_one_claimant_wins(log: Log, rounds: usize, contenders: usize) {
    let kv = kv(&log, "race");
    for round in 0..rounds {
        let key = format!("owner-{round}");
        let barrier = Arc::new(Barrier::new(contenders));
        let tasks: Vec<_> = (0..contenders)
            .map(|c| {
                let (kv, key, barrier) = (kv.clone(), key.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let won = kv.set_if_absent(&key, format!("node-{c}")).await.unwrap();
                    (c, won)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (c, won) = task.await.unwrap();
            if won {
                winners.push(c);
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let stored = kv.get(&key).await.unwrap();
        assert_eq!(
            stored,
            Some(Bytes::from(format!("node-{}", winners[0]))),
            "round {round}: the stored value is the winner's"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_one_of_many_concurrent_claimants_wins() {
    exactly_one_claimant_wins(Log::memory(), 200, 8).await;
}

async fn concurrent_increments_lose_nothing(log: Log, tasks: usize, per_task: usize) {
    let kv = kv(&log, "counter");
    let barrier = Arc::new(Barrier::new(tasks));
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (kv, barrier) = (kv.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let mut seen = Vec::with_capacity(per_task);
                for _ in 0..per_task {
                    seen.push(kv.increment("hits", 1).await.unwrap());
                }
                seen
            })
        })
        .collect();
    let mut all = HashSet::new();
    for handle in handles {
        for value in handle.await.unwrap() {
            assert!(all.insert(value), "two increments returned {value}");
        }
    }
    let total = (tasks * per_task) as i64;
    assert_eq!(all, (1..=total).collect::<HashSet<_>>());
    assert_eq!(kv.increment("hits", 0).await.unwrap(), total);
    assert_eq!(kv.increment("hits", -total).await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_increments_lose_nothing_on_memory() {
    concurrent_increments_lose_nothing(Log::memory(), 8, 250).await;
}

#[tokio::test]
async fn compare_and_set_semantics() {
    let log = Log::memory();
    let kv = kv(&log, "cas");

    // expected None requires absence.
    assert!(
        kv.compare_and_set("k", None, Some("a".into()))
            .await
            .unwrap()
    );
    assert!(
        !kv.compare_and_set("k", None, Some("b".into()))
            .await
            .unwrap()
    );
    assert_eq!(kv.get("k").await.unwrap(), Some(Bytes::from("a")));

    // A wrong expectation writes nothing.
    assert!(
        !kv.compare_and_set("k", Some(b"zzz"), Some("c".into()))
            .await
            .unwrap()
    );
    assert_eq!(kv.get("k").await.unwrap(), Some(Bytes::from("a")));

    // The right one swaps.
    assert!(
        kv.compare_and_set("k", Some(b"a"), Some("c".into()))
            .await
            .unwrap()
    );
    assert_eq!(kv.get("k").await.unwrap(), Some(Bytes::from("c")));

    // new None deletes, and only from the expected value.
    assert!(!kv.compare_and_set("k", Some(b"a"), None).await.unwrap());
    assert!(kv.compare_and_set("k", Some(b"c"), None).await.unwrap());
    assert_eq!(kv.get("k").await.unwrap(), None);

    // Deleting an absent key "from absence" is a successful no-op.
    assert!(kv.compare_and_set("k", None, None).await.unwrap());
    assert_eq!(kv.get("k").await.unwrap(), None);
    // Expecting a value on an absent key fails.
    assert!(
        !kv.compare_and_set("k", Some(b"c"), Some("d".into()))
            .await
            .unwrap()
    );
    assert_eq!(kv.get("k").await.unwrap(), None);
}

#[tokio::test]
async fn a_stale_holder_cannot_release_another_claim() {
    let log = Log::memory();
    let kv = kv(&log, "release");
    assert!(kv.set_if_absent("owner", "node-a").await.unwrap());
    // node-b takes over from the exact bytes it read.
    assert!(
        kv.compare_and_set("owner", Some(b"node-a"), Some("node-b".into()))
            .await
            .unwrap()
    );
    // node-a, stale, tries to release what it believes is its claim.
    assert!(!kv.delete_if("owner", b"node-a").await.unwrap());
    assert_eq!(kv.get("owner").await.unwrap(), Some(Bytes::from("node-b")));
    // node-b can.
    assert!(kv.delete_if("owner", b"node-b").await.unwrap());
    assert_eq!(kv.get("owner").await.unwrap(), None);
}

#[tokio::test]
async fn scopes_are_separate() {
    let log = Log::memory();
    let a = kv(&log, "a");
    let b = kv(&log, "b");
    assert!(a.set_if_absent("owner", "x").await.unwrap());
    assert!(b.set_if_absent("owner", "y").await.unwrap());
    assert_eq!(a.get("owner").await.unwrap(), Some(Bytes::from("x")));
    assert_eq!(b.get("owner").await.unwrap(), Some(Bytes::from("y")));
}

#[tokio::test]
async fn a_non_counter_value_is_not_incremented() {
    let log = Log::memory();
    let kv = kv(&log, "bad-counter");
    kv.set("n", "not eight bytes").await.unwrap();
    let err = kv.increment("n", 1).await.unwrap_err();
    assert_eq!(err.kind(), weft::ErrorKind::InvalidInput);
    assert_eq!(
        kv.get("n").await.unwrap(),
        Some(Bytes::from("not eight bytes"))
    );
}
