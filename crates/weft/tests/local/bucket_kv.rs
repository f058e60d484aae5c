//! The bucket KV's compare-and-set reports exactly what happened when the
//! store's answers go missing: every kind of unclear answer the fault store
//! can give, a rival writer in between, histories too short to tell, v1
//! objects, and the KV conformance check on a faulty store.

// Tests wait and measure in real (or tokio's paused) time and name their
// objects with fresh ULIDs: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use object_store::path::Path;
use weft::kv::KvStore;
use weft::objects::RetryPolicy;
use weft::storage::bucket::{BucketKv, BucketOptions, BucketStorage};
use weft::{ErrorKind, Log, LogTag};
use weft_testkit::conformance::{Fixture, kv_compare_and_set_is_atomic};
use weft_testkit::fault::{FaultConfig, FaultStore, OpFaults};

/// A key, the value compare-and-set expects there, and the new value.
type KvOp<'a> = (&'a str, Option<&'a [u8]>, Option<Bytes>);

fn scope() -> LogTag {
    LogTag::with_key("claims", "k").unwrap()
}

fn retries() -> RetryPolicy {
    RetryPolicy::default()
        .with_max_attempts(6)
        .with_base_backoff(Duration::from_millis(10))
        .with_max_backoff(Duration::from_millis(100))
}

/// A KV over `inner` behind a fault store that gives every put `faults`.
fn faulty(inner: Arc<InMemory>, faults: OpFaults) -> (Arc<FaultStore>, BucketKv) {
    let store = FaultStore::wrap(
        inner,
        FaultConfig {
            put: faults,
            hang_for: Duration::from_secs(1),
            late_by: Duration::from_millis(500),
            ..FaultConfig::default()
        },
    );
    let kv = BucketKv::new(store.clone(), "kv")
        .with_retry_policy(retries())
        .with_seed(7);
    (store, kv)
}

fn clean(inner: Arc<InMemory>) -> BucketKv {
    BucketKv::new(inner, "kv")
        .with_retry_policy(retries())
        .with_seed(99)
}

/// What the caller must hear for each way a put's answer can go wrong,
/// when the put itself lands (or, for `lost`, never does).
#[tokio::test(start_paused = true)]
async fn every_unclear_answer_is_resolved_exactly() {
    struct Case {
        name: &'static str,
        faults: OpFaults,
        /// `Ok(true)` when the write landed; the error kind otherwise.
        expect: Result<bool, ErrorKind>,
    }
    let one = |f: fn(&mut OpFaults)| {
        let mut o = OpFaults::default();
        f(&mut o);
        o
    };
    let cases = [
        Case {
            name: "reply lost after the write landed",
            faults: one(|o| o.ambiguous = 1.0),
            expect: Ok(true),
        },
        Case {
            name: "5xx after landing, resend answered 412",
            faults: one(|o| o.resent = 1.0),
            expect: Ok(true),
        },
        Case {
            name: "landed, then the caller heard nothing until its timeout",
            faults: one(|o| o.hang = 1.0),
            expect: Ok(true),
        },
        Case {
            name: "landed only after the caller's timeout",
            faults: one(|o| o.late = 1.0),
            expect: Ok(true),
        },
        Case {
            name: "never reached the store, no answer",
            faults: one(|o| o.lost = 1.0),
            expect: Err(ErrorKind::Indeterminate),
        },
        Case {
            name: "clean 5xx every time",
            faults: one(|o| o.error = 1.0),
            expect: Err(ErrorKind::Unavailable),
        },
    ];
    for case in cases {
        // set_if_absent (a create), compare_and_set (an update) and
        // delete_if (a tombstone), each through the faults.
        let inner = Arc::new(InMemory::new());
        let setup = clean(inner.clone());
        setup
            .compare_and_set(&scope(), "held", None, Some("old".into()))
            .await
            .unwrap();
        setup
            .compare_and_set(&scope(), "gone", None, Some("x".into()))
            .await
            .unwrap();
        let (_, kv) = faulty(inner.clone(), case.faults.clone());
        let ops: [KvOp; 3] = [
            ("new", None, Some("mine".into())),
            ("held", Some(b"old"), Some("mine".into())),
            ("gone", Some(b"x"), None),
        ];
        for (key, expected, value) in ops {
            let got = kv
                .compare_and_set(&scope(), key, expected, value.clone())
                .await
                .map_err(|e| e.kind());
            assert_eq!(got, case.expect, "{}: key {key}", case.name);
            // Let late writes land before judging the store.
            tokio::time::sleep(Duration::from_secs(5)).await;
            let stored = setup.get(&scope(), key).await.unwrap();
            if case.expect == Ok(true) {
                assert_eq!(stored, value, "{}: key {key} holds the write", case.name);
            } else {
                let before: Option<Bytes> = expected.map(Bytes::copy_from_slice);
                assert_eq!(stored, before, "{}: key {key} was not written", case.name);
            }
        }
    }
}

/// A rival's write lands between ours (unanswered, landing late) and our
/// re-read: ours can then never land, and the answer is an exact `false`.
#[tokio::test(start_paused = true)]
async fn a_rival_between_an_unanswered_write_and_the_re_read_is_a_clean_loss() {
    let inner = Arc::new(InMemory::new());
    let rival = clean(inner.clone());
    let (_, slow) = faulty(
        inner.clone(),
        OpFaults {
            late: 1.0,
            ..OpFaults::default()
        },
    );
    let mine = tokio::spawn({
        let slow = slow.clone();
        async move {
            slow.compare_and_set(&scope(), "owner", None, Some("slow".into()))
                .await
        }
    });
    // While our create hangs (and before it lands), the rival claims.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        rival
            .compare_and_set(&scope(), "owner", None, Some("rival".into()))
            .await
            .unwrap()
    );
    assert!(!mine.await.unwrap().unwrap(), "exactly: we lost");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        rival.get(&scope(), "owner").await.unwrap(),
        Some(Bytes::from("rival"))
    );
}

/// Our write lands but its answer hangs; meanwhile others build on it. With
/// a few writes since, the object's history still names us (`true`); with
/// more than it keeps, the answer is `Indeterminate`, never a guess.
#[tokio::test(start_paused = true)]
async fn writes_after_ours_are_judged_by_the_history_while_it_reaches() {
    for (writes_after, expect) in [
        (3, Ok(true)),
        (120, Ok(true)),
        (130, Err(ErrorKind::Indeterminate)),
    ] {
        let inner = Arc::new(InMemory::new());
        let other = clean(inner.clone());
        let (_, slow) = faulty(
            inner.clone(),
            OpFaults {
                hang: 1.0,
                ..OpFaults::default()
            },
        );
        let mine = tokio::spawn({
            let slow = slow.clone();
            async move {
                slow.compare_and_set(&scope(), "n", None, Some(Bytes::from("0")))
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        for i in 0..writes_after {
            let prev = Bytes::from(i.to_string());
            let next = Bytes::from((i + 1).to_string());
            assert!(
                other
                    .compare_and_set(&scope(), "n", Some(&prev), Some(next))
                    .await
                    .unwrap(),
                "write {i} after ours"
            );
        }
        let got = mine.await.unwrap().map_err(|e| e.kind());
        assert_eq!(got, expect, "{writes_after} writes after ours");
    }
}

/// Objects written before writer tokens existed (v1) read, and are
/// replaced by compare-and-set; the new object is v2.
#[tokio::test]
async fn v1_objects_still_read_and_update() {
    let inner = Arc::new(InMemory::new());
    let kv = clean(inner.clone());
    let path = Path::from(format!("kv/{}/{}", hex(&scope().to_string()), hex("old")));
    inner
        .put(&path, Bytes::from_static(b"WKV1\x01before").into())
        .await
        .unwrap();
    assert_eq!(
        kv.get(&scope(), "old").await.unwrap(),
        Some(Bytes::from("before"))
    );
    assert!(
        !kv.compare_and_set(&scope(), "old", Some(b"other"), Some("x".into()))
            .await
            .unwrap()
    );
    assert!(
        kv.compare_and_set(&scope(), "old", Some(b"before"), Some("after".into()))
            .await
            .unwrap()
    );
    let raw = inner.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(&raw[..4], b"WKV2");
    assert_eq!(
        kv.get(&scope(), "old").await.unwrap(),
        Some(Bytes::from("after"))
    );
    inner
        .put(&path, Bytes::from_static(b"WKV9junk").into())
        .await
        .unwrap();
    assert_eq!(
        kv.get(&scope(), "old").await.unwrap_err().kind(),
        ErrorKind::Corrupt
    );
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The KV conformance check (one winner among claimants, no lost
/// increments, stale holders cannot release) on a bucket log whose store
/// loses answers, lands writes behind 412s and throws 5xx and 412 storms.
///
/// Every request takes 1 to 3 ms, as every request to a real store takes
/// about one round trip: then no more writes can follow one of ours before
/// its re-read than an object's history keeps, and every outcome is
/// exact. (With free requests beside one slow put, a key can change more
/// often than that in between, and the honest answer is `Indeterminate`:
/// see `writes_after_ours_are_judged_by_the_history_while_it_reaches`.)
///
/// On tokio's paused clock, so the latencies are exact whatever else the
/// machine is doing.
#[tokio::test(start_paused = true)]
async fn kv_conformance_holds_on_a_store_that_loses_answers() {
    let round_trip = |faults: OpFaults| OpFaults {
        latency: 1.0,
        latency_min: Duration::from_millis(1),
        latency_max: Duration::from_millis(3),
        ..faults
    };
    for seed in 0..3 {
        let store = FaultStore::wrap(Arc::new(InMemory::new()), FaultConfig::default());
        let storage = BucketStorage::open(store.clone(), "log", BucketOptions::default())
            .await
            .unwrap();
        store.set_config(FaultConfig {
            seed,
            put: round_trip(OpFaults {
                error: 0.1,
                ambiguous: 0.15,
                resent: 0.15,
                ..OpFaults::default()
            }),
            get: round_trip(OpFaults {
                error: 0.05,
                ..OpFaults::default()
            }),
            precondition_storm: 0.05,
            ..FaultConfig::default()
        });
        kv_compare_and_set_is_atomic(Fixture::new(Log::new(storage))).await;
        let stats = store.stats();
        assert!(
            stats.ambiguous > 0 && stats.resent > 0 && stats.preconditions > 0,
            "seed {seed}: the faults fired: {stats:?}"
        );
    }
}
