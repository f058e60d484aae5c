//! Replicas of a bucket WAL, on an in-memory object store: upstream
//! compatibility, record-exact resume, trimmed cursors, snapshots, prefetch,
//! cursor stores, and that readers never write the manifest.

use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};
use weft::format::{
    Compression, ManifestVersion, Metadata, SegmentVersion, SnapshotPointer, encode_segment,
};
use weft::wal::{
    Applier, Cursor, CursorStore, FileCursorStore, FnApplier, Manifest, MemoryCursorStore, Record,
    Replica, TypedApplier,
};
use weft::{Error, ErrorKind, Result};

const MANIFEST: &str = "wal/manifest";

/// Writes a log of `segments` segments (each `per` records named
/// `"s{seg}r{rec}"`) with a v4 manifest; returns the manifest.
async fn write_log(store: &Arc<dyn ObjectStore>, segments: usize, per: usize) -> Manifest {
    let mut manifest = Manifest::new(ManifestVersion::V4);
    for seg in 0..segments {
        let records: Vec<String> = (0..per).map(|r| format!("s{seg}r{r}")).collect();
        let bytes = encode_segment(&records, Compression::None, SegmentVersion::V2).unwrap();
        let loc = format!("wal/seg/run/{seg:016x}");
        store
            .put(&Path::from(loc.as_str()), bytes.into())
            .await
            .unwrap();
        let meta = vec![Metadata {
            start_index: 0,
            ingestion_ms: 1_000 + seg as i64,
            payload: Bytes::from(format!("m{seg}")),
        }];
        manifest.append(loc, meta, per).unwrap();
    }
    put_manifest(store, &manifest).await;
    manifest
}

async fn put_manifest(store: &Arc<dyn ObjectStore>, manifest: &Manifest) {
    store
        .put(&Path::from(MANIFEST), manifest.to_bytes().unwrap().into())
        .await
        .unwrap();
}

type Seen = Arc<Mutex<Vec<Record>>>;

fn collecting() -> (Seen, impl Applier) {
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let applier = FnApplier::new(move |r: &Record| {
        sink.lock().unwrap().push(r.clone());
        Ok(())
    });
    (seen, applier)
}

fn datas(seen: &Seen) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|r| String::from_utf8(r.data.to_vec()).unwrap())
        .collect()
}

/// Upstream writes one metadata item per produce call, an empty payload
/// included: each item covers its records up to the next item, and an
/// empty payload is still that call's metadata (with its ingestion time).
#[tokio::test]
async fn upstream_metadata_items_cover_their_records_up_to_the_next_item() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let records = ["a", "b", "c", "d", "e"];
    let bytes = encode_segment(&records, Compression::None, SegmentVersion::V1).unwrap();
    let loc = "ingest/01M8R78R162CKXDFM04D3KMGZ1.batch";
    store.put(&Path::from(loc), bytes.into()).await.unwrap();
    let item = |start_index, ingestion_ms, payload: &'static str| Metadata {
        start_index,
        ingestion_ms,
        payload: Bytes::from_static(payload.as_bytes()),
    };
    let mut manifest = Manifest::new(ManifestVersion::V1);
    manifest
        .append(
            loc.to_string(),
            vec![item(0, 10, "m1"), item(1, 20, ""), item(3, 30, "m3")],
            records.len(),
        )
        .unwrap();
    store
        .put(
            &Path::from("ingest/manifest"),
            manifest.to_bytes().unwrap().into(),
        )
        .await
        .unwrap();

    let (seen, applier) = collecting();
    Replica::builder(store, "ingest/manifest", applier)
        .build()
        .poll()
        .await
        .unwrap();
    let got: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.data.clone(), r.metadata.clone(), r.ingestion_ms))
        .collect();
    let want = |data: &'static str, meta: &'static str, at| {
        (
            Bytes::from_static(data.as_bytes()),
            Some(Bytes::from_static(meta.as_bytes())),
            Some(at),
        )
    };
    assert_eq!(
        got,
        vec![
            want("a", "m1", 10),
            want("b", "", 20),
            want("c", "", 20),
            want("d", "m3", 30),
            want("e", "m3", 30),
        ]
    );
}

#[tokio::test]
async fn tails_the_upstream_buffer_log_from_compat_vectors() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/opendata-buffer-0.3/A");
    assert!(
        root.join("expected.json").exists(),
        "compat vectors missing at {}",
        root.display()
    );
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    for rel in [
        "ingest/manifest",
        "ingest/01M8R78R162CKXDFM04D3KMGZ1.batch",
        "ingest/01M8R78R17MPSNZRYF3VK32HQ6.batch",
    ] {
        let bytes = std::fs::read(root.join(rel)).unwrap();
        store
            .put(&Path::from(rel), PutPayload::from(bytes))
            .await
            .unwrap();
    }
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("expected.json")).unwrap()).unwrap();
    let (seen, applier) = collecting();
    let mut replica = Replica::builder(store, "ingest/manifest", applier).build();
    let out = replica.poll().await.unwrap();
    assert_eq!(out.segments, 2);
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut want = Vec::new();
    for entry in expected["entries"].as_array().unwrap() {
        let seq = entry["sequence"].as_u64().unwrap();
        let metas = entry["metadata"].as_array().unwrap();
        for (i, rec) in entry["records"].as_array().unwrap().iter().enumerate() {
            let meta = metas
                .iter()
                .rev()
                .find(|m| m["start_index"].as_u64().unwrap() as usize <= i)
                .unwrap();
            want.push((
                seq,
                i as u32,
                b64.decode(rec.as_str().unwrap()).unwrap(),
                b64.decode(meta["payload"].as_str().unwrap()).unwrap(),
                meta["ingestion_time_ms"].as_i64().unwrap(),
            ));
        }
    }
    let got: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r.sequence, None, "v1 numbers entries, not records");
            (
                r.entry_sequence,
                r.index,
                r.data.to_vec(),
                r.metadata.clone().unwrap().to_vec(),
                r.ingestion_ms.unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(replica.cursor(), Some(Cursor::at_entry(2)));
    // Nothing new: the next poll applies nothing.
    assert_eq!(replica.poll().await.unwrap().applied, 0);
}

#[tokio::test]
async fn applier_failure_resumes_at_the_exact_record() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    write_log(&store, 3, 4).await;
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let fail_once = Arc::new(Mutex::new(true));
    let flag = fail_once.clone();
    let applier = FnApplier::new(move |r: &Record| {
        if r.entry_sequence == 4 && r.index == 2 && std::mem::take(&mut *flag.lock().unwrap()) {
            return Err(Error::new(ErrorKind::Unavailable, "downstream busy"));
        }
        sink.lock().unwrap().push(r.clone());
        Ok(())
    });
    let cursors = MemoryCursorStore::new();
    let mut replica = Replica::builder(store, MANIFEST, applier)
        .with_cursor_store(cursors.clone())
        .build();
    let err = replica.poll().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(
        cursors.load().await.unwrap(),
        Some(Cursor {
            entry: 4,
            record: 2
        })
    );
    assert_eq!(seen.lock().unwrap().len(), 6);
    replica.poll().await.unwrap();
    let want: Vec<String> = (0..3)
        .flat_map(|s| (0..4).map(move |r| format!("s{s}r{r}")))
        .collect();
    assert_eq!(datas(&seen), want, "no record skipped or repeated");
    let seqs: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.sequence.unwrap())
        .collect();
    assert_eq!(seqs, (0..12).collect::<Vec<_>>());
}

#[tokio::test]
async fn cursor_below_the_first_live_entry_is_a_trimmed_error() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let mut manifest = write_log(&store, 3, 2).await;
    let cursors = MemoryCursorStore::new();
    cursors.save(Cursor::at_entry(0)).await.unwrap();
    manifest.truncate_through(3);
    manifest
        .set_snapshot(Some(SnapshotPointer {
            location: "wal/snap/1".into(),
            through_seq: 3,
            created_ms: 5,
        }))
        .unwrap();
    put_manifest(&store, &manifest).await;
    let (seen, applier) = collecting();
    let mut replica = Replica::builder(store, MANIFEST, applier)
        .with_cursor_store(cursors)
        .build();
    let err = replica.poll().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    assert!(err.message().contains("wal/snap/1"), "{err}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing applied past a gap"
    );
}

struct Restoring {
    restored: Option<(Bytes, u64)>,
    seen: Vec<String>,
}

#[async_trait::async_trait]
impl Applier for Restoring {
    async fn apply(&mut self, record: &Record) -> Result<()> {
        self.seen
            .push(String::from_utf8(record.data.to_vec()).unwrap());
        Ok(())
    }

    async fn restore(&mut self, snapshot: Bytes, through_seq: u64) -> Result<()> {
        self.restored = Some((snapshot, through_seq));
        Ok(())
    }
}

#[tokio::test]
async fn new_replica_restores_the_snapshot_then_tails_after_it() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let mut manifest = write_log(&store, 3, 2).await;
    store
        .put(
            &Path::from("wal/snap/1"),
            Bytes::from_static(b"state@2").into(),
        )
        .await
        .unwrap();
    // The snapshot covers records 0..=2, which ends inside segment 1.
    manifest.truncate_through(1);
    manifest
        .set_snapshot(Some(SnapshotPointer {
            location: "wal/snap/1".into(),
            through_seq: 2,
            created_ms: 5,
        }))
        .unwrap();
    put_manifest(&store, &manifest).await;
    let applier = Restoring {
        restored: None,
        seen: Vec::new(),
    };
    let mut replica = Replica::builder(store, MANIFEST, applier).build();
    let out = replica.poll().await.unwrap();
    assert!(out.restored_snapshot);
    let applier = replica.applier();
    assert_eq!(applier.restored, Some((Bytes::from_static(b"state@2"), 2)));
    assert_eq!(applier.seen, vec!["s1r1", "s2r0", "s2r1"]);
}

#[tokio::test]
async fn prefetching_replica_applies_in_manifest_order_and_resumes_from_a_file_cursor() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    write_log(&store, 40, 3).await;
    let dir = tempfile::tempdir().unwrap();
    let cursor_path = dir.path().join("replica.cursor");
    let (seen, applier) = collecting();
    let mut replica = Replica::builder(store.clone(), MANIFEST, applier)
        .with_prefetch(8)
        .with_cursor_store(FileCursorStore::new(&cursor_path))
        .build();
    let out = replica.poll().await.unwrap();
    assert_eq!((out.segments, out.applied), (40, 120));
    let seqs: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.sequence.unwrap())
        .collect();
    assert_eq!(seqs, (0..120).collect::<Vec<_>>());

    // More entries arrive; a new replica process resumes from the file.
    let manifest_bytes = store
        .get(&Path::from(MANIFEST))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let mut manifest = Manifest::from_bytes(&manifest_bytes).unwrap();
    let bytes = encode_segment(&["late"], Compression::Zstd, SegmentVersion::V2).unwrap();
    store
        .put(&Path::from("wal/seg/run/late"), bytes.into())
        .await
        .unwrap();
    manifest.append("wal/seg/run/late", vec![], 1).unwrap();
    put_manifest(&store, &manifest).await;
    let (seen2, applier2) = collecting();
    let mut again = Replica::builder(store, MANIFEST, applier2)
        .with_cursor_store(FileCursorStore::new(&cursor_path))
        .build();
    again.poll().await.unwrap();
    assert_eq!(datas(&seen2), vec!["late"]);
}

#[tokio::test]
async fn readers_never_write_the_manifest_and_typed_appliers_report_decode_errors() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    write_log(&store, 2, 2).await;
    let before = store.head(&Path::from(MANIFEST)).await.unwrap();
    let decoded: Arc<Mutex<Vec<u32>>> = Arc::default();
    let sink = decoded.clone();
    let applier = TypedApplier::new(
        |bytes: &[u8]| {
            let s = std::str::from_utf8(bytes).map_err(|e| Error::corrupt(e.to_string()))?;
            s.strip_prefix("s0r")
                .and_then(|n| n.parse::<u32>().ok())
                .ok_or_else(|| Error::invalid_input(format!("not an s0 record: {s}")))
        },
        move |_r: &Record, n: u32| {
            sink.lock().unwrap().push(n);
            Ok(())
        },
    );
    let mut replica = Replica::builder(store.clone(), MANIFEST, applier).build();
    let err = replica.poll().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(*decoded.lock().unwrap(), vec![0, 1]);
    assert_eq!(
        replica.cursor(),
        Some(Cursor {
            entry: 2,
            record: 0
        })
    );
    let after = store.head(&Path::from(MANIFEST)).await.unwrap();
    assert_eq!(before.e_tag, after.e_tag);
    assert_eq!(before.last_modified, after.last_modified);
}

#[tokio::test]
async fn corrupt_segment_stops_the_replica_with_a_corrupt_error() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    write_log(&store, 2, 2).await;
    let path = Path::from("wal/seg/run/0000000000000001");
    let mut bytes = store
        .get(&path)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    bytes[3] ^= 0x40;
    store.put(&path, PutPayload::from(bytes)).await.unwrap();
    let (seen, applier) = collecting();
    let mut replica = Replica::builder(store, MANIFEST, applier).build();
    assert_eq!(replica.poll().await.unwrap_err().kind(), ErrorKind::Corrupt);
    assert_eq!(datas(&seen), vec!["s0r0", "s0r1"]);
    assert_eq!(replica.cursor(), Some(Cursor::at_entry(2)));
}

/// Regression: a step that loaded a new manifest and then failed to fetch a
/// segment kept the manifest's ETag, so every later step saw "unchanged"
/// and applied nothing until the writer committed again; on a quiet log the
/// replica stayed behind for good.
#[tokio::test]
async fn a_failed_segment_fetch_is_retried_even_if_the_manifest_is_unchanged() {
    use weft_testkit::fault::{FaultConfig, FaultStore};
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    write_log(&inner, 1, 2).await;
    let faults = FaultStore::wrap(inner.clone(), FaultConfig::default());
    let (seen, applier) = collecting();
    let mut replica = Replica::builder(faults.clone(), MANIFEST, applier).build();
    replica.poll().await.unwrap();
    assert_eq!(datas(&seen), vec!["s0r0", "s0r1"]);

    // The writer commits a second segment; fetching it fails once.
    let mut manifest = Manifest::from_bytes(
        &inner
            .get(&Path::from(MANIFEST))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    let loc = "wal/seg/run/0000000000000001";
    let bytes = encode_segment(&["s1r0"], Compression::None, SegmentVersion::V2).unwrap();
    inner.put(&Path::from(loc), bytes.into()).await.unwrap();
    manifest.append(loc, vec![], 1).unwrap();
    put_manifest(&inner, &manifest).await;
    faults.fail_gets_under("wal/seg/");
    assert_eq!(
        replica.poll().await.unwrap_err().kind(),
        ErrorKind::Unavailable
    );
    faults.clear_get_failures();

    // The manifest has not changed since, but its last entry is not applied.
    let step = replica.poll().await.unwrap();
    assert!(step.unchanged);
    assert_eq!(step.applied, 1);
    assert_eq!(datas(&seen), vec!["s0r0", "s0r1", "s1r0"]);
    assert_eq!(replica.cursor(), Some(Cursor::at_entry(3)));
    let quiet = replica.poll().await.unwrap();
    assert_eq!((quiet.unchanged, quiet.applied), (true, 0));
}
