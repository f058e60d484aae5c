//! Reading back what a producer wrote, straight from the store (no replica),
//! so producer tests check the bytes in the bucket.

use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use weft::format::decode_segment;
use weft::wal::Manifest;

/// The manifest at `path`.
pub async fn manifest(store: &Arc<dyn ObjectStore>, path: &str) -> Manifest {
    let bytes = store
        .get(&Path::from(path))
        .await
        .expect("manifest exists")
        .bytes()
        .await
        .expect("manifest bytes");
    Manifest::from_bytes(&bytes).expect("manifest decodes")
}

/// Every committed record with its record-level sequence (v3/v4 manifests).
pub async fn records(store: &Arc<dyn ObjectStore>, path: &str) -> Vec<(u64, Bytes)> {
    let m = manifest(store, path).await;
    let mut out = Vec::new();
    for e in m.entries() {
        let seg = store
            .get(&Path::from(e.location.as_str()))
            .await
            .expect("segment exists")
            .bytes()
            .await
            .expect("segment bytes");
        let seg = decode_segment(seg).expect("segment decodes");
        assert_eq!(
            Some(seg.records.len() as u32),
            e.count,
            "entry count matches the segment"
        );
        for (i, r) in seg.records.into_iter().enumerate() {
            out.push((e.sequence + i as u64, r));
        }
    }
    out
}

/// `n` distinct records tagged by `who`.
pub fn batch(who: usize, n: usize) -> Vec<Bytes> {
    (0..n).map(|i| Bytes::from(format!("{who}:{i}"))).collect()
}
