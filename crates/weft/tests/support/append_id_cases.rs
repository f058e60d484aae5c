//! Scenario bodies of exactly-once appends on a bucket log that run on
//! every store: the in-memory store (`tests/local/bucket_append_ids.rs`) and the
//! real servers (`tests/servers/bucket_append_ids_s3.rs`,
//! `tests/servers/bucket_append_ids_azure.rs`).

// Tests wait in real time: the determinism rules of clippy.toml are for
// library code.
#![allow(clippy::disallowed_methods)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::ObjectStore;
use weft::objects::RetryPolicy;
use weft::storage::bucket::{BucketOptions, BucketStorage};
use weft::{AppendRequest, ErrorKind, Log, LogTag, Position};
use weft_testkit::hooked::{Before, HookedStore, Op, before};

const MANIFEST: &str = "log/manifest";

fn options() -> BucketOptions {
    BucketOptions::default()
        .with_take_over(true)
        .with_flush_interval(Duration::from_millis(2))
        .with_retry(
            RetryPolicy::default()
                .with_max_attempts(3)
                .with_base_backoff(Duration::from_millis(1))
                .with_max_backoff(Duration::from_millis(5))
                .with_jitter(0.0),
        )
}

pub async fn writer(store: Arc<dyn ObjectStore>, options: BucketOptions) -> Log {
    Log::new(BucketStorage::open(store, "log", options).await.unwrap())
}

fn tag(t: &str) -> LogTag {
    t.parse().unwrap()
}

fn placed(i: u64) -> AppendRequest {
    AppendRequest::new(tag("orders"), format!("placed {i}")).with_id(format!("order-{i}"))
}

pub async fn payloads(log: &Log) -> Vec<String> {
    log.read_log(Position::Beginning, usize::MAX)
        .await
        .unwrap()
        .iter()
        .map(|e| String::from_utf8_lossy(&e.data).into_owned())
        .collect()
}

/// What the next manifest put meets; puts past the script pass.
#[derive(Debug, Clone, Copy)]
enum ManifestPut {
    /// Answered with a timeout at once, applied `after` later.
    Late(Duration),
    /// Answered with a timeout, never applied (the request was lost).
    Lost,
    /// A 503: refused, nothing applied.
    Refused,
}

fn timed_out() -> object_store::Error {
    object_store::Error::Generic {
        store: "test",
        source: Box::new(object_store::client::HttpError::new(
            object_store::client::HttpErrorKind::Timeout,
            std::io::Error::other("no answer"),
        )),
    }
}

type Script = Arc<Mutex<VecDeque<ManifestPut>>>;

/// `inner` with its manifest puts following `script`.
fn scripted(inner: Arc<dyn ObjectStore>, script: Script) -> Arc<dyn ObjectStore> {
    Arc::new(
        HookedStore::new(inner).with_hook(before(move |call, inner| {
            let step = if call.op == Op::Put && call.path.as_ref() == MANIFEST {
                script.lock().unwrap().pop_front()
            } else {
                None
            };
            async move {
                match step {
                    None => Before::Proceed,
                    Some(ManifestPut::Late(after)) => {
                        let (payload, opts) = call.put.expect("a put carries its payload");
                        tokio::spawn(async move {
                            tokio::time::sleep(after).await;
                            let _ = inner.put_opts(&call.path, payload, opts).await;
                        });
                        Before::Answer(timed_out())
                    }
                    Some(ManifestPut::Lost) => Before::Answer(timed_out()),
                    Some(ManifestPut::Refused) => Before::Answer(object_store::Error::Generic {
                        store: "test",
                        source: "503 Service Unavailable".into(),
                    }),
                }
            }
        })),
    )
}

/// The commit of an append lands but its answer is lost, and the writer
/// gives up: `Indeterminate`. The next writer answers the retry with the
/// original. Then a commit that never lands: the next writer writes it,
/// once.
pub async fn an_indeterminate_append_is_retried_on_the_next_writer(inner: Arc<dyn ObjectStore>) {
    let script: Script = Arc::new(Mutex::new(VecDeque::new()));
    let store = scripted(inner, script.clone());
    let a = writer(store.clone(), options()).await;
    let zero = a.append(placed(0)).await.unwrap();

    script.lock().unwrap().extend([
        ManifestPut::Late(Duration::from_millis(300)),
        ManifestPut::Refused,
        ManifestPut::Refused,
    ]);
    let err = a.append(placed(1)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Indeterminate, "{err}");
    // The request the writer gave up on lands; only then does the next
    // writer claim the log (a claim first would fence the late commit).
    tokio::time::sleep(Duration::from_millis(600)).await;
    let b = writer(store.clone(), options()).await;
    let one = b.append(placed(1)).await.unwrap();
    assert_eq!((one.seqnum, one.stream_version), (1, 1), "the original");
    assert_eq!(b.append(placed(0)).await.unwrap(), zero);
    assert_eq!(payloads(&b).await, ["placed 0", "placed 1"]);

    script.lock().unwrap().extend([
        ManifestPut::Lost,
        ManifestPut::Refused,
        ManifestPut::Refused,
    ]);
    let err = b.append(placed(2)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Indeterminate, "{err}");
    let c = writer(store.clone(), options()).await;
    let two = c.append(placed(2)).await.unwrap();
    assert_eq!((two.seqnum, two.stream_version), (2, 2), "written now");
    assert_eq!(c.append(placed(2)).await.unwrap(), two);
    assert_eq!(payloads(&c).await, ["placed 0", "placed 1", "placed 2"]);
    // The old writers are stopped or fenced; they write nothing.
    for old in [&a, &b] {
        let err = old.append(placed(3)).await.unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Closed | ErrorKind::Fenced),
            "{err}"
        );
    }
    c.close().await.unwrap();
}

/// A plain failover: every kind of append retried on the new writer
/// answers with its original, and the new writer's window is the newest
/// `append_id_window` ids.
pub async fn retries_after_a_failover_answer_with_the_originals(store: Arc<dyn ObjectStore>) {
    let a = writer(store.clone(), options()).await;
    let single = a.append(placed(0)).await.unwrap();
    let batch = vec![
        placed(1),
        AppendRequest::new(tag("orders"), "no id"),
        placed(2),
    ];
    let batched = a.append_batch(batch.clone()).await.unwrap();
    let conditional = a.append_if(placed(3), 4).await.unwrap();
    for i in 4..8 {
        a.append(placed(i)).await.unwrap();
    }
    let b = writer(store.clone(), options()).await;
    assert_eq!(b.append(placed(0)).await.unwrap(), single);
    // The batch again: its entry without an id is written again (it has
    // no id to be known by); the two with ids answer with their originals.
    let again = b.append_batch(batch).await.unwrap();
    assert_eq!(again[0], batched[0]);
    assert_eq!(again[2], batched[2]);
    assert_eq!(again[1].seqnum, 9);
    // A stale conditional retry: the original, not a conflict.
    assert_eq!(b.append_if(placed(3), 4).await.unwrap(), conditional);
    assert_eq!(b.tip().await.unwrap().next, 10);
    // The fenced writer has not noticed yet: a retry of what it committed
    // needs no write, and it answers with the original too. Anything new
    // is refused (and stops it, so then everything is).
    assert_eq!(a.append(placed(0)).await.unwrap(), single);
    assert_eq!(
        a.append(placed(100)).await.unwrap_err().kind(),
        ErrorKind::Fenced
    );
    assert_eq!(
        a.append(placed(0)).await.unwrap_err().kind(),
        ErrorKind::Fenced
    );
    b.close().await.unwrap();

    // A writer with a window of 2 remembers only the newest two ids.
    let small = options().with_append_id_window(2);
    let c = writer(store.clone(), small).await;
    assert_eq!(c.append(placed(7)).await.unwrap().seqnum, 8);
    assert_eq!(c.append(placed(6)).await.unwrap().seqnum, 7);
    assert_eq!(
        c.append(placed(5)).await.unwrap().seqnum,
        10,
        "out of the window"
    );
    let zero = options().with_append_id_window(0);
    let err = BucketStorage::open(store, "log", zero).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    c.close().await.unwrap();
}

/// A trim forgets the ids it drops, also for the next writer.
pub async fn a_trim_forgets_the_ids_it_drops(store: Arc<dyn ObjectStore>) {
    let a = writer(store.clone(), options()).await;
    for i in 0..4 {
        a.append(placed(i)).await.unwrap();
    }
    a.trim(1).await.unwrap();
    assert_eq!(a.append(placed(1)).await.unwrap().seqnum, 4);
    assert_eq!(a.append(placed(2)).await.unwrap().seqnum, 2);
    a.close().await.unwrap();
    let b = writer(store, options()).await;
    assert_eq!(b.append(placed(0)).await.unwrap().seqnum, 5);
    assert_eq!(b.append(placed(3)).await.unwrap().seqnum, 3);
    assert_eq!(b.append(placed(1)).await.unwrap().seqnum, 4);
    b.close().await.unwrap();
}

/// A writer opened on a cache directory reads only what its index lacks,
/// and the index keeps no ids: the ids of the window's older entries are
/// read from the bucket by its first append with an id — across history
/// pages too — so a retry after a restart is still answered with its
/// original, and a trimmed one is not.
pub async fn a_writer_on_a_cache_directory_knows_the_ids_before_it(store: Arc<dyn ObjectStore>) {
    let cache = tempfile::tempdir().unwrap();
    let cached = options()
        .with_cache_dir(Some(cache.path().to_path_buf()))
        .with_checkpoint(
            weft::wal::CheckpointPolicy::default()
                .with_max_recent_entries(4)
                .with_leaf_entries(2)
                .with_fanout(2),
        )
        .with_flush_interval(Duration::from_millis(1));
    let a = writer(store.clone(), cached.clone()).await;
    let mut originals = Vec::new();
    for i in 0..12 {
        originals.push(a.append(placed(i)).await.unwrap());
        a.append(AppendRequest::new(tag("other"), "no id"))
            .await
            .unwrap();
    }
    a.close().await.unwrap();

    // The cache covers the whole log: the reopened writer reads nothing
    // at open, and still knows every id.
    let b = writer(store.clone(), cached.clone()).await;
    b.append(AppendRequest::new(tag("other"), "no id"))
        .await
        .unwrap();
    for (i, original) in originals.iter().enumerate() {
        assert_eq!(
            &b.append(placed(i as u64)).await.unwrap(),
            original,
            "id {i}"
        );
    }
    assert_eq!(b.tip().await.unwrap().next, 25);
    b.trim(3).await.unwrap();
    b.close().await.unwrap();

    // After a trim the trimmed ids are forgotten, the live ones are not.
    let c = writer(store.clone(), cached.clone()).await;
    assert_eq!(c.append(placed(1)).await.unwrap().seqnum, 25);
    assert_eq!(c.append(placed(2)).await.unwrap(), originals[2]);
    c.close().await.unwrap();

    // A window of 4 entries: the ids of the newest 4 entries before where
    // the open began are read, not more.
    let small = cached.with_append_id_window(4);
    let d = writer(store, small).await;
    assert_eq!(d.tip().await.unwrap().next, 26);
    assert_eq!(d.append(placed(1)).await.unwrap().seqnum, 25);
    assert_eq!(
        d.append(placed(5)).await.unwrap().seqnum,
        26,
        "out of the window"
    );
    d.close().await.unwrap();
}
