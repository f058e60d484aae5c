//! The real upstream producer (`opendata-buffer` 0.3.0) writes batches
//! with metadata into the SeaweedFS server; a weft replica, on its own S3
//! client, tails the log (manifest v1, `ingest/<ULID>.batch` objects) and
//! must see every record and every metadata item exactly: in order, the
//! right bytes, the right payload and ingestion time for each record. Once
//! per upstream compression (none, zstd). Then the two sides run at the
//! same time, and an upstream consumer's acknowledgement (which removes
//! entries from the manifest) shows up in weft as `Trimmed`, never as a
//! silent skip.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use weft::format::{Compression, ManifestVersion, decode_manifest, inspect_segment};
use weft::wal::{Cursor, CursorStore, FnApplier, MemoryCursorStore, Record, Replica};
use weft::{ErrorKind, Result};
use weft_upstream_compat::{fresh_prefix, upstream_store, weft_store};

const MANIFEST: &str = "ingest/manifest";

/// One record as the replica must deliver it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    entry: u64,
    index: u32,
    data: Bytes,
    metadata: Option<Bytes>,
    ingestion_ms: Option<i64>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

fn collecting() -> (Log, FnApplier<impl FnMut(&Record) -> Result<()> + Send>) {
    let seen: Log = Arc::default();
    let sink = seen.clone();
    let applier = FnApplier::new(move |r: &Record| {
        assert_eq!(r.sequence, None, "v1 numbers entries, not records");
        sink.lock().unwrap().push(Seen {
            entry: r.entry_sequence,
            index: r.index,
            data: r.data.clone(),
            metadata: r.metadata.clone(),
            ingestion_ms: r.ingestion_ms,
        });
        Ok(())
    });
    (seen, applier)
}

/// A clock upstream reads for its ingestion times: fixed, moved by the
/// test, so every time is known exactly.
fn clock(start_ms: u64) -> Arc<common::clock::MockClock> {
    Arc::new(common::clock::MockClock::with_time(
        SystemTime::UNIX_EPOCH + Duration::from_millis(start_ms),
    ))
}

fn producer(
    store: Arc<dyn ObjectStore>,
    compression: buffer::CompressionType,
    clock: Arc<common::clock::MockClock>,
) -> buffer::Producer {
    let config = buffer::ProducerConfig {
        // Ignored: the store is handed in.
        object_store: common::ObjectStoreConfig::InMemory,
        data_path_prefix: "ingest".into(),
        manifest_path: MANIFEST.into(),
        // Batches end where the test calls `flush`, not on a timer.
        flush_interval: Duration::from_secs(3600),
        flush_size_bytes: 64 << 20,
        max_buffered_inputs: 1000,
        batch_compression: compression,
    };
    buffer::Producer::with_object_store(config, store, clock).expect("upstream producer")
}

/// Records of all shapes: empty, binary, one large.
fn records(batch: usize, group: usize) -> Vec<Bytes> {
    let mut out = vec![
        Bytes::from(format!("b{batch}g{group}r0")),
        Bytes::new(),
        Bytes::from((0..=255u8).collect::<Vec<u8>>()),
    ];
    if group == 1 {
        out.push(Bytes::from(vec![b'x'; 200_000 + batch]));
    }
    out
}

/// Produces one batch of `groups` produce calls (each its own metadata
/// item), flushes it, and returns what the replica must see for it.
async fn write_batch(
    p: &buffer::Producer,
    clock: &common::clock::MockClock,
    entry: u64,
    batch: usize,
    groups: usize,
) -> Vec<Seen> {
    let mut want = Vec::new();
    let mut handles = Vec::new();
    let mut index = 0u32;
    for g in 0..groups {
        clock.advance(Duration::from_millis(7));
        let recs = records(batch, g);
        // An empty payload is a metadata item too; keep one per batch.
        let meta = if g == 2 {
            Bytes::new()
        } else {
            Bytes::from(format!("meta b{batch} g{g}"))
        };
        let handle = p
            .produce(recs.clone(), meta.clone())
            .await
            .expect("produce");
        for data in recs {
            want.push(Seen {
                entry,
                index,
                data,
                metadata: Some(meta.clone()),
                ingestion_ms: Some(handle.ingestion_time_ms),
            });
            index += 1;
        }
        handles.push(handle);
    }
    p.flush().await.expect("flush");
    for mut h in handles {
        h.watcher.await_durable().await.expect("durable");
    }
    want
}

async fn manifest(store: &Arc<dyn ObjectStore>) -> weft::format::ManifestData {
    let bytes = store
        .get(&Path::from(MANIFEST))
        .await
        .expect("upstream wrote a manifest")
        .bytes()
        .await
        .unwrap();
    decode_manifest(&bytes).expect("weft decodes the upstream manifest")
}

async fn replica_sees_every_upstream_record(
    test: &str,
    compression: buffer::CompressionType,
    weft_compression: Compression,
) {
    let prefix = fresh_prefix(test);
    let upstream = upstream_store(&prefix);
    let ours = weft_store(&prefix);
    let clock = clock(1_700_000_000_000);
    let p = producer(upstream, compression, clock.clone());
    let mut want = Vec::new();
    for batch in 0..3 {
        want.extend(write_batch(&p, &clock, batch as u64, batch, 3).await);
    }

    // The bytes in the bucket are what weft expects of upstream.
    let m = manifest(&ours).await;
    assert_eq!(m.version, ManifestVersion::V1);
    assert_eq!(m.entries.len(), 3);
    assert_eq!(m.next_sequence, 3);
    for (i, e) in m.entries.iter().enumerate() {
        assert_eq!(e.sequence, i as u64);
        let name = e
            .location
            .strip_prefix("ingest/")
            .and_then(|n| n.strip_suffix(".batch"))
            .unwrap_or_else(|| panic!("unexpected location {}", e.location));
        ulid::Ulid::from_string(name).expect("batch objects are named by a ULID");
        assert_eq!(
            e.metadata.iter().map(|m| m.start_index).collect::<Vec<_>>(),
            vec![0, 3, 7],
            "one metadata item per produce call"
        );
        let seg = ours
            .get(&Path::from(e.location.as_str()))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let info = inspect_segment(&seg).expect("weft reads the upstream batch footer");
        assert_eq!(info.compression, weft_compression);
        assert_eq!(info.record_count, 10);
    }

    // A weft replica sees everything exactly.
    let cursors = MemoryCursorStore::new();
    let (seen, applier) = collecting();
    let mut replica = Replica::builder(ours.clone(), MANIFEST, applier)
        .with_cursor_store(cursors.clone())
        .with_prefetch(2)
        .build();
    let out = replica.poll().await.expect("replica poll");
    assert_eq!((out.segments, out.applied), (3, 30));
    assert_eq!(*seen.lock().unwrap(), want);
    assert_eq!(cursors.load().await.unwrap(), Some(Cursor::at_entry(3)));

    // Live: upstream keeps producing while the replica runs.
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let runner = tokio::spawn(async move {
        replica
            .run(async {
                let _ = stop_rx.await;
            })
            .await
            .map(|()| replica)
    });
    for batch in 3..6 {
        want.extend(write_batch(&p, &clock, batch as u64, batch, 3).await);
    }
    tokio::time::timeout(Duration::from_secs(60), async {
        while seen.lock().unwrap().len() < want.len() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the running replica caught up within 60 s");
    stop_tx.send(()).unwrap();
    runner.await.unwrap().expect("replica run ended cleanly");
    assert_eq!(*seen.lock().unwrap(), want);

    // A restarted replica resumes from its cursor: only what is new.
    let more = write_batch(&p, &clock, 6, 6, 3).await;
    let (again, applier) = collecting();
    let mut resumed = Replica::builder(ours.clone(), MANIFEST, applier)
        .with_cursor_store(cursors.clone())
        .build();
    resumed.poll().await.unwrap();
    assert_eq!(*again.lock().unwrap(), more);
    p.close().await.expect("upstream close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_sees_every_upstream_record_uncompressed() {
    replica_sees_every_upstream_record(
        "uncompressed",
        buffer::CompressionType::None,
        Compression::None,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_sees_every_upstream_record_zstd() {
    replica_sees_every_upstream_record("zstd", buffer::CompressionType::Zstd, Compression::Zstd)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_consumers_ack_is_trimmed_for_weft_replicas() {
    let prefix = fresh_prefix("consumer_ack");
    let upstream = upstream_store(&prefix);
    let ours = weft_store(&prefix);
    let clock = clock(1_800_000_000_000);
    let p = producer(
        upstream.clone(),
        buffer::CompressionType::None,
        clock.clone(),
    );
    let mut want = Vec::new();
    for batch in 0..3 {
        want.push(write_batch(&p, &clock, batch as u64, batch, 3).await);
    }
    // A weft replica that read the first entry only.
    let cursors = MemoryCursorStore::new();
    cursors.save(Cursor::at_entry(1)).await.unwrap();

    // The upstream consumer (the queue's owner) takes and acknowledges the
    // first two batches: upstream drops their entries from the manifest.
    let config = buffer::ConsumerConfig {
        object_store: common::ObjectStoreConfig::InMemory,
        manifest_path: MANIFEST.into(),
        data_path_prefix: "ingest".into(),
        // No upstream GC during the test.
        gc_interval: Duration::from_secs(3600),
        gc_grace_period: Duration::from_secs(3600),
    };
    let mut consumer = buffer::Consumer::with_object_store(config, upstream, None)
        .await
        .expect("upstream consumer");
    let first = consumer.next_batch().await.unwrap().expect("a batch");
    let second = consumer.next_batch().await.unwrap().expect("a batch");
    assert_eq!((first.sequence, second.sequence), (0, 1));
    consumer.ack_through(1).await.expect("ack");
    consumer.close().await.expect("consumer close");

    let m = manifest(&ours).await;
    assert_eq!(m.entries.first().map(|e| e.sequence), Some(2));
    assert_eq!(m.epoch, 1, "the consumer claimed the queue");

    // The replica behind the ack is told, and applies nothing.
    let (seen, applier) = collecting();
    let mut behind = Replica::builder(ours.clone(), MANIFEST, applier)
        .with_cursor_store(cursors)
        .build();
    let err = behind.poll().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    assert!(seen.lock().unwrap().is_empty());

    // A new replica starts at the first live entry and sees it exactly.
    let (seen, applier) = collecting();
    let mut fresh = Replica::builder(ours, MANIFEST, applier).build();
    fresh.poll().await.unwrap();
    assert_eq!(*seen.lock().unwrap(), want[2]);
    p.close().await.expect("upstream close");
}
