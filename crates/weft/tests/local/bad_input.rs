//! Regression cases: every public entry point given malformed arguments or
//! bytes returns a typed error (and writes nothing). New cases found
//! anywhere go here.

use bytes::Bytes;
use weft::format::replica_cursor::decode_cursor;
use weft::format::{decode_manifest, decode_segment};
use weft::{AppendRequest, ErrorKind, Log, LogTag, Position};

fn kind<T: std::fmt::Debug>(r: weft::Result<T>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

#[test]
fn malformed_tags_are_invalid_input() {
    let long = "n".repeat(300);
    for text in ["", ":key", "ns:", "a\tb", "\u{7f}", long.as_str()] {
        assert_eq!(
            kind(text.parse::<LogTag>()),
            ErrorKind::InvalidInput,
            "{text:?}"
        );
    }
    assert_eq!(kind(LogTag::with_key("ns", "k\n")), ErrorKind::InvalidInput);
    assert_eq!(kind(LogTag::new("a:b")), ErrorKind::InvalidInput);
}

#[test]
fn garbage_bytes_are_corrupt_for_every_decoder() {
    let inputs: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0xff; 7],
        vec![0xff; 26],
        b"definitely not a weft object".to_vec(),
        vec![0; 64],
    ];
    for input in &inputs {
        assert_eq!(
            kind(decode_segment(Bytes::from(input.clone()))),
            ErrorKind::Corrupt,
            "segment {input:?}"
        );
        assert_eq!(
            kind(decode_manifest(input)),
            ErrorKind::Corrupt,
            "manifest {input:?}"
        );
        assert_eq!(
            kind(decode_cursor(input)),
            ErrorKind::Corrupt,
            "cursor {input:?}"
        );
    }
}

#[tokio::test]
async fn malformed_log_calls_are_typed_errors_and_write_nothing() {
    let log = Log::memory();
    let t: LogTag = "t".parse().unwrap();
    assert_eq!(
        kind(log.append_batch(vec![]).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(log.append(AppendRequest::with_tags(vec![], "x")).await),
        ErrorKind::InvalidInput
    );
    let too_many: Vec<LogTag> = (0..65).map(|i| format!("t{i}").parse().unwrap()).collect();
    assert_eq!(
        kind(log.append(AppendRequest::with_tags(too_many, "x")).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(kind(log.trim(0).await), ErrorKind::InvalidInput);
    assert_eq!(log.latest_seqnum().await.unwrap(), None);
    log.append(AppendRequest::new(t.clone(), "x"))
        .await
        .unwrap();
    // Reading past the end is not an error: there is simply nothing there.
    assert!(
        log.read_from(&t, Position::At(u64::MAX), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(log.read_after(&t, u64::MAX).await.unwrap().is_empty());
    assert!(
        log.read_after_version(&t, u64::MAX)
            .await
            .unwrap()
            .is_empty()
    );
    let kv = log.kv(t.clone()).unwrap();
    let long_key = "k".repeat(256);
    for key in ["", "a\nb", long_key.as_str()] {
        assert_eq!(
            kind(kv.set(key, "v").await),
            ErrorKind::InvalidInput,
            "{key:?}"
        );
        assert_eq!(kind(kv.get(key).await), ErrorKind::InvalidInput, "{key:?}");
    }
    assert_eq!(
        kind(kv.set("big", vec![0u8; (1 << 20) + 1]).await),
        ErrorKind::InvalidInput
    );
    kv.set("text", "abc").await.unwrap();
    assert_eq!(kind(kv.increment("text", 1).await), ErrorKind::InvalidInput);
    kv.set("max", weft::kv::encode_counter(i64::MAX))
        .await
        .unwrap();
    assert_eq!(kind(kv.increment("max", 1).await), ErrorKind::InvalidInput);
    assert_eq!(log.latest_seqnum().await.unwrap(), Some(0));
}

// ---------- the bucket log, the WAL, the dir backend ----------

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use weft::DirStorage;
use weft::connect::Location;
use weft::format::{ManifestVersion, SnapshotPointer};
use weft::storage::bucket::{BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage};
use weft::wal::{
    Cursor, CursorStore, FnApplier, Manifest, MemoryCursorStore, ObjectCursorStore, Producer,
    Record, Replica,
};

async fn put(store: &Arc<dyn ObjectStore>, path: &str, bytes: impl Into<Bytes>) {
    store
        .put(&ObjectPath::from(path), bytes.into().into())
        .await
        .unwrap();
}

#[tokio::test]
async fn bucket_logs_refuse_damaged_foreign_and_malformed_locations() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    // Not a manifest at all.
    put(
        &store,
        "junk/manifest",
        Bytes::from_static(b"not a manifest"),
    )
    .await;
    let opts = BucketOptions::default;
    assert_eq!(
        kind(BucketStorage::open(store.clone(), "junk", opts()).await),
        ErrorKind::Corrupt
    );
    assert_eq!(
        kind(BucketFollower::open(store.clone(), "junk", BucketFollowerOptions::default()).await),
        ErrorKind::Corrupt
    );
    // A segment-numbered (v2) manifest: a WAL, but not a weft log.
    let mut v2 = Manifest::new(ManifestVersion::V2);
    let seg = weft::format::encode_segment(
        &[b"r".to_vec()],
        weft::format::Compression::None,
        weft::format::SegmentVersion::V2,
    )
    .unwrap();
    put(&store, "wal2/seg/0", seg).await;
    v2.append("wal2/seg/0", vec![], 1).unwrap();
    put(&store, "wal2/manifest", v2.to_bytes().unwrap()).await;
    assert_eq!(
        kind(BucketStorage::open(store.clone(), "wal2", opts()).await),
        ErrorKind::InvalidInput
    );
    assert_eq!(
        kind(BucketFollower::open(store.clone(), "wal2", BucketFollowerOptions::default()).await),
        ErrorKind::InvalidInput
    );
    // A v4 WAL whose records are not entry frames.
    let mut v4 = Manifest::new(ManifestVersion::V4);
    put(&store, "raw/seg/0", {
        weft::format::encode_segment(
            &[b"plain bytes".to_vec()],
            weft::format::Compression::None,
            weft::format::SegmentVersion::V2,
        )
        .unwrap()
    })
    .await;
    v4.append("raw/seg/0", vec![], 1).unwrap();
    put(&store, "raw/manifest", v4.to_bytes().unwrap()).await;
    // A follower opens on the manifest alone; the records are found out
    // when read.
    let follower = BucketFollower::open(store.clone(), "raw", BucketFollowerOptions::default())
        .await
        .unwrap();
    assert_eq!(
        kind(weft::Storage::read(&follower, None, 0, 1).await),
        ErrorKind::Corrupt
    );
    weft::Storage::close(&follower).await.unwrap();
    // An object path that cannot exist.
    assert_eq!(
        kind(BucketStorage::open(store.clone(), "a//b", opts()).await),
        ErrorKind::InvalidInput
    );
    // Bad writer settings.
    let zero = BucketOptions::default().with_flush_interval(Duration::ZERO);
    assert_eq!(
        kind(BucketStorage::open(store.clone(), "fresh", zero).await),
        ErrorKind::InvalidInput
    );
}

#[tokio::test]
async fn a_damaged_bucket_kv_object_is_corrupt_not_absent() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let log = Log::new(
        BucketStorage::open(store.clone(), "log", BucketOptions::default())
            .await
            .unwrap(),
    );
    let kv = log.kv("lease:x".parse().unwrap()).unwrap();
    kv.set("owner", "a").await.unwrap();
    // Overwrite the key's object with foreign bytes.
    let objects: Vec<_> = {
        use futures::TryStreamExt;
        store
            .list(Some(&ObjectPath::from("log/kv")))
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
    };
    assert_eq!(objects.len(), 1, "one object per key");
    store
        .put(&objects[0].location, Bytes::from_static(b"XXXX").into())
        .await
        .unwrap();
    assert_eq!(kind(kv.get("owner").await), ErrorKind::Corrupt);
    assert_eq!(
        kind(kv.set_if_absent("owner", "b").await),
        ErrorKind::Corrupt
    );
}

#[tokio::test]
async fn replica_cursors_outside_the_log_and_damaged_cursor_objects_are_corrupt() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let p = Producer::builder(store.clone(), "wal/manifest", "wal/seg")
        .with_seed(1)
        .open()
        .await
        .unwrap();
    for n in [3, 2] {
        let recs = (0..n).map(|i| Bytes::from(format!("r{i}"))).collect();
        p.append(recs, None).await.unwrap().wait().await.unwrap();
    }
    p.close().await.unwrap();
    // Entries start at 0 and 3; the log ends at 5.
    for (cursor, what) in [
        (Cursor::at_entry(9), "ahead of the log"),
        (Cursor::at_entry(1), "inside an entry"),
    ] {
        let cursors = MemoryCursorStore::new();
        cursors.save(cursor).await.unwrap();
        let mut r = Replica::builder(
            store.clone(),
            "wal/manifest",
            FnApplier::new(|_: &Record| Ok(())),
        )
        .with_cursor_store(cursors)
        .build();
        assert_eq!(kind(r.poll().await), ErrorKind::Corrupt, "{what}");
    }
    put(&store, "cursors/r1", Bytes::from_static(b"WCUR garbage")).await;
    let cursors = ObjectCursorStore::new(store.clone(), ObjectPath::from("cursors/r1"));
    assert_eq!(kind(cursors.load().await), ErrorKind::Corrupt);
}

#[tokio::test]
async fn producer_maintenance_with_bad_arguments_is_invalid_input_and_harmless() {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let v1 = Producer::builder(store.clone(), "v1/manifest", "v1/seg")
        .with_manifest_version(ManifestVersion::V1)
        .open()
        .await
        .unwrap();
    let snap = SnapshotPointer {
        location: "v1/snap".into(),
        through_seq: 0,
        created_ms: 0,
    };
    assert_eq!(
        kind(v1.set_snapshot(snap.clone(), false).await),
        ErrorKind::InvalidInput,
        "v1 manifests have no snapshot block"
    );
    let v4 = Producer::builder(store.clone(), "v4/manifest", "v4/seg")
        .open()
        .await
        .unwrap();
    let empty = SnapshotPointer {
        location: String::new(),
        ..snap
    };
    assert_eq!(
        kind(v4.set_snapshot(empty, true).await),
        ErrorKind::InvalidInput
    );
    // Both producers still work.
    for p in [&v1, &v4] {
        let d = p.append(vec![Bytes::from("ok")], None).await.unwrap();
        assert_eq!(d.wait().await.unwrap(), 0);
        p.close().await.unwrap();
    }
}

#[tokio::test]
async fn dir_backend_refuses_files_and_damaged_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let err = DirStorage::open(&file).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    let dir = tmp.path().join("log");
    {
        let log = Log::new(DirStorage::open(&dir).await.unwrap());
        log.append(AppendRequest::new("t".parse().unwrap(), "x"))
            .await
            .unwrap();
        log.storage().close().await.unwrap();
    }
    let seg = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .expect("a segment file");
    // A foreign header is damage, not a torn tail.
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[0] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();
    assert_eq!(kind(DirStorage::open(&dir).await), ErrorKind::Corrupt);
}

#[test]
fn malformed_locations_and_frames_are_typed_errors() {
    for text in [
        "",
        "s3://",
        "s3:///prefix",
        "nope://x",
        "file://relative/path",
        "az://",
    ] {
        assert_eq!(
            kind(Location::parse(text)),
            ErrorKind::InvalidInput,
            "{text:?}"
        );
    }
    for input in [&b""[..], &[0xff; 7], &[0; 64], b"definitely not a frame"] {
        let err = weft::format::frame::decode(input).unwrap_err();
        assert_eq!(weft::Error::from(err).kind(), ErrorKind::Corrupt);
    }
}
