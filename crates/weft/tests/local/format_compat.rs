//! Byte compatibility with objects written by the real upstream
//! opendata-buffer 0.3 (set A in `tests/fixtures/opendata-buffer-0.3/`): the files are loaded into
//! an in-memory object store at their object paths, then read back through
//! the store and checked field by field against `expected.json`.

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::{ObjectStore, PutPayload, path::Path as ObjectPath};
use serde_json::Value;
use weft::format::{
    Compression, ManifestVersion, SegmentVersion, decode_manifest, decode_segment, encode_manifest,
    encode_segment,
};
use weft::wal::Manifest;

/// The upstream objects, kept in the repository as test fixtures (see the
/// README next to them for who wrote them and how).
fn compat_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/opendata-buffer-0.3/A");
    assert!(
        dir.join("expected.json").is_file(),
        "compat vectors missing: {} has no expected.json",
        dir.display()
    );
    dir
}

fn files_under(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(root, &path, out);
        } else {
            out.push(path.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

/// Every object file of the set (everything but the two description files),
/// loaded at its relative path.
async fn load_store(dir: &Path) -> InMemory {
    let mut files = Vec::new();
    files_under(dir, dir, &mut files);
    let store = InMemory::new();
    let mut loaded = 0;
    for rel in files {
        let name = rel.to_str().unwrap().replace('\\', "/");
        if name == "expected.json" {
            continue;
        }
        let bytes = std::fs::read(dir.join(&rel)).unwrap();
        store
            .put(&ObjectPath::from(name), PutPayload::from(bytes))
            .await
            .unwrap();
        loaded += 1;
    }
    assert!(loaded > 0, "no object files under {}", dir.display());
    store
}

async fn get(store: &InMemory, path: &str) -> Bytes {
    store
        .get(&ObjectPath::from(path))
        .await
        .unwrap_or_else(|e| panic!("get {path}: {e}"))
        .bytes()
        .await
        .unwrap()
}

fn b64(v: &Value) -> Vec<u8> {
    B64.decode(v.as_str().unwrap()).unwrap()
}

fn u64_of(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

#[tokio::test]
async fn upstream_set_a_reads_exactly_as_expected() {
    let dir = compat_dir();
    let expected: Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    let store = load_store(&dir).await;

    // The store holds exactly the listed objects, at the listed sizes.
    let mut listed: Vec<(String, u64)> = store
        .list(None)
        .map_ok(|m| (m.location.to_string(), m.size))
        .try_collect()
        .await
        .unwrap();
    listed.sort();
    let mut want: Vec<(String, u64)> = expected["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["path"].as_str().unwrap().to_owned(), u64_of(&o["size"])))
        .collect();
    want.sort();
    assert_eq!(listed, want);

    let manifest_path = expected["manifest_path"].as_str().unwrap();
    let manifest_bytes = get(&store, manifest_path).await;
    assert_eq!(
        manifest_bytes.len() as u64,
        u64_of(&expected["manifest_size"])
    );

    let m = decode_manifest(&manifest_bytes).unwrap();
    assert_eq!(m.version, ManifestVersion::V1);
    assert_eq!(m.epoch, u64_of(&expected["epoch"]));
    assert_eq!(m.next_sequence, u64_of(&expected["next_sequence"]));
    assert_eq!(m.snapshot, None);
    let entries = expected["entries"].as_array().unwrap();
    assert_eq!(m.entries.len() as u64, u64_of(&expected["entry_count"]));
    assert_eq!(m.entries.len(), entries.len());
    assert_eq!(
        m.entries[0].sequence,
        u64_of(&expected["first_live_sequence"])
    );

    let mut referenced = Vec::new();
    for (got, want) in m.entries.iter().zip(entries) {
        assert_eq!(got.sequence, u64_of(&want["sequence"]));
        assert_eq!(got.count, None, "v1 entries carry no record count");
        assert_eq!(got.record_range(), None);
        assert_eq!(got.location, want["location"].as_str().unwrap());
        let want_md = want["metadata"].as_array().unwrap();
        assert_eq!(got.metadata.len(), want_md.len());
        for (g, w) in got.metadata.iter().zip(want_md) {
            assert_eq!(u64::from(g.start_index), u64_of(&w["start_index"]));
            assert_eq!(g.ingestion_ms, w["ingestion_time_ms"].as_i64().unwrap());
            assert_eq!(&g.payload[..], &b64(&w["payload"])[..]);
        }

        let batch = get(&store, &got.location).await;
        assert_eq!(batch.len() as u64, u64_of(&want["batch_object_size"]));
        let seg = decode_segment(batch.clone()).unwrap();
        assert_eq!(seg.version, SegmentVersion::V1);
        let compression = match want["batch_compression"].as_str().unwrap() {
            "none" => Compression::None,
            "zstd" => Compression::Zstd,
            other => panic!("unexpected compression {other}"),
        };
        assert_eq!(seg.compression, compression);
        assert_eq!(seg.record_count() as u64, u64_of(&want["record_count"]));
        let want_records: Vec<Vec<u8>> = want["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(b64)
            .collect();
        let got_records: Vec<Vec<u8>> = seg.records.iter().map(|r| r.to_vec()).collect();
        assert_eq!(got_records, want_records);

        // Our encoder writes the same bytes for the uncompressed batch; for
        // zstd the frame depends on the compressor, so compare content.
        let again = encode_segment(&seg.records, compression, SegmentVersion::V1).unwrap();
        if compression == Compression::None {
            assert_eq!(again, batch);
        } else {
            assert_eq!(decode_segment(again).unwrap(), seg);
        }
        referenced.push(got.location.clone());
    }

    let unreferenced: Vec<String> = listed
        .iter()
        .map(|(p, _)| p.clone())
        .filter(|p| p.ends_with(".batch") && !referenced.contains(p))
        .collect();
    let want_unreferenced: Vec<String> = expected["unreferenced_batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(unreferenced, want_unreferenced);

    // Re-encoding the upstream manifest, directly or through the in-memory
    // manifest, reproduces its bytes exactly.
    assert_eq!(encode_manifest(&m).unwrap(), manifest_bytes);
    let mem = Manifest::from_bytes(&manifest_bytes).unwrap();
    assert_eq!(mem.version(), ManifestVersion::V1);
    assert_eq!(mem.to_bytes().unwrap(), manifest_bytes);
}

#[tokio::test]
async fn upstream_manifest_keeps_working_after_upgrade() {
    // A weft writer taking over an upstream log upgrades it to v4: old
    // entries become one-slot legacy entries, new ones are record-numbered.
    let dir = compat_dir();
    let store = load_store(&dir).await;
    let bytes = get(&store, "ingest/manifest").await;
    let mut m = Manifest::from_bytes(&bytes).unwrap();
    m.set_format_version(ManifestVersion::V4).unwrap();
    let epoch = m.bump_epoch().unwrap();
    let seq = m.append("wal/seg/run/0000000000000000", vec![], 3).unwrap();
    assert_eq!(seq, 2);
    let reread = Manifest::from_bytes(&m.to_bytes().unwrap()).unwrap();
    assert_eq!(reread.epoch(), epoch);
    assert_eq!(reread.entries().len(), 3);
    assert_eq!(reread.entries()[0].count, Some(0));
    assert_eq!(reread.entries_from(1).len(), 2);
    assert_eq!(reread.entry_record_range(2), Some(2..5));
    assert_eq!(reread.next_sequence(), 5);
}
