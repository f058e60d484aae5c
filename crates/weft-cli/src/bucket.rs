//! Reading a bucket's write-ahead log directly: the manifest, the segment
//! objects it names, and the invariants a live manifest must hold.
//!
//! Used by `inspect`, `wal dump` and `verify` on `s3://`, `az://` and `file://`
//! locations; they need no writer and take no lock, so they work on a log
//! whatever process writes it, and on one written by the upstream buffer.

use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use weft::format::{
    Compression, DecodedSegment, ManifestData, ManifestEntry, SegmentVersion, decode_manifest,
};
use weft::objects::{StoreOp, to_error};
use weft::wal::HistoryReader;
use weft::{Error, ErrorKind, Result};

/// Where a weft bucket log keeps its manifest, relative to the log's
/// prefix (`weft::storage::bucket::BucketLayout`). The upstream buffer uses
/// `ingest/manifest`, the seed's WAL `wal/manifest`: pass `--manifest`.
pub(crate) const DEFAULT_MANIFEST: &str = "manifest";

/// A decoded manifest and where it came from.
#[derive(Debug)]
pub(crate) struct LoadedManifest {
    /// The manifest's object path.
    pub(crate) path: String,
    /// Its size in bytes.
    pub(crate) size: usize,
    /// Its contents.
    pub(crate) data: ManifestData,
}

fn object_path(path: &str) -> Result<ObjectPath> {
    ObjectPath::parse(path).map_err(|e| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("{path:?} is not a valid object path"),
        )
        .with_source(e)
    })
}

/// The bytes of the object at `path`.
///
/// Errors: `NotFound`, `InvalidInput` for a bad path, and the store's kinds.
pub(crate) async fn get(store: &Arc<dyn ObjectStore>, path: &str) -> Result<Bytes> {
    let p = object_path(path)?;
    let result = store
        .get(&p)
        .await
        .map_err(|e| to_error(StoreOp::Read, path, e))?;
    result
        .bytes()
        .await
        .map_err(|e| to_error(StoreOp::Read, path, e))
}

/// The size of the object at `path`, or `None` when it does not exist.
pub(crate) async fn size(store: &Arc<dyn ObjectStore>, path: &str) -> Result<Option<u64>> {
    let p = object_path(path)?;
    match store.head(&p).await {
        Ok(meta) => Ok(Some(meta.size)),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(to_error(StoreOp::Read, path, e)),
    }
}

/// Reads and decodes the manifest at `path`.
///
/// Errors: `NotFound` (no manifest there: no log), `Corrupt` (it does not
/// decode), and the store's kinds.
pub(crate) async fn load_manifest(
    store: &Arc<dyn ObjectStore>,
    path: &str,
) -> Result<LoadedManifest> {
    let bytes = get(store, path).await.map_err(|e| match e.kind() {
        ErrorKind::NotFound => Error::new(
            ErrorKind::NotFound,
            format!("no log here: there is no manifest at {path} (pass --manifest PATH?)"),
        ),
        _ => e,
    })?;
    let data = decode_manifest(&bytes).map_err(|e| e.context(format!("manifest {path}")))?;
    Ok(LoadedManifest {
        path: path.to_owned(),
        size: bytes.len(),
        data,
    })
}

/// Every live entry of a manifest, a chunk at a time: first those its
/// history pages hold (v5; read through a small page cache), then its own.
/// Memory stays at one chunk and the cache, however long the log.
pub(crate) struct EntryWalk<'a> {
    reader: HistoryReader,
    data: &'a ManifestData,
    next: u64,
    done: bool,
}

/// Entries one chunk of an [`EntryWalk`] holds at most.
const WALK_CHUNK: usize = 1024;

impl<'a> EntryWalk<'a> {
    /// A walk over `data`'s live entries, reading pages from `store`.
    pub(crate) fn new(store: &Arc<dyn ObjectStore>, data: &'a ManifestData) -> Self {
        EntryWalk {
            reader: HistoryReader::new(store.clone(), 4 << 20),
            data,
            next: data.first_sequence(),
            done: false,
        }
    }

    /// The next chunk of entries, `None` after the last.
    ///
    /// Errors: `NotFound` for a history page that is gone, `Corrupt` for a
    /// damaged one, and the store's kinds.
    pub(crate) async fn next_chunk(&mut self) -> Result<Option<Vec<ManifestEntry>>> {
        if self.done {
            return Ok(None);
        }
        let chunk = self
            .reader
            .entries_from(
                self.data.history.as_ref(),
                &self.data.entries,
                self.next,
                WALK_CHUNK,
            )
            .await?;
        match chunk.last() {
            Some(last) => self.next = last.end_sequence(),
            None => self.done = true,
        }
        Ok((!chunk.is_empty()).then_some(chunk))
    }

    /// Skips the history pages: the walk goes on with the manifest's own
    /// entries (after a page could not be read).
    pub(crate) fn skip_history(&mut self) {
        self.next = self.next.max(self.data.recent_from());
    }
}

/// How many entries a manifest holds, its history pages included (those
/// before the first live sequence in a straddling page too).
pub(crate) fn entry_count(data: &ManifestData) -> u64 {
    data.history.as_ref().map_or(0, |h| h.entries()) + data.entries.len() as u64
}

/// Reads, decodes and counts the segment an entry of the manifest at
/// `manifest_path` names, as a replica does
/// (`weft::wal::segments::fetch_listed_segment`).
///
/// Errors: `Corrupt` (it does not decode, holds another count than the
/// manifest says, or is missing while the manifest lists it),
/// `Unavailable` (it went away with a truncation while being read), and
/// the store's kinds.
pub(crate) async fn load_segment(
    store: &Arc<dyn ObjectStore>,
    manifest_path: &str,
    entry: &ManifestEntry,
) -> Result<(u64, DecodedSegment)> {
    weft::wal::segments::fetch_listed_segment(store, &object_path(manifest_path)?, entry).await
}

/// What a segment's footer says, read with one ranged request instead of
/// downloading the segment (its checksum is not checked: that is
/// `verify`'s job).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegmentFooter {
    pub(crate) version: SegmentVersion,
    pub(crate) compression: Compression,
    pub(crate) record_count: u32,
}

/// Reads the footer of the `size`-byte segment at `path`.
///
/// Errors: `Corrupt` for a footer that does not parse; the store's kinds.
pub(crate) async fn segment_footer(
    store: &Arc<dyn ObjectStore>,
    path: &str,
    size: u64,
) -> Result<SegmentFooter> {
    let longest = SegmentVersion::V2.footer_len() as u64;
    let start = size.saturating_sub(longest);
    let p = object_path(path)?;
    let tail = store
        .get_range(&p, start..size)
        .await
        .map_err(|e| to_error(StoreOp::Read, path, e))?;
    parse_footer(&tail).map_err(|e| e.context(format!("segment {path}")))
}

/// Parses a segment footer from the last bytes of the object (at least the
/// footer; more in front is ignored).
fn parse_footer(tail: &[u8]) -> Result<SegmentFooter> {
    let short = || Error::corrupt("the object is too short for a segment footer");
    let n = tail.len();
    let version_at = n.checked_sub(2).ok_or_else(short)?;
    let raw = u16::from_le_bytes(
        tail.get(version_at..n)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(short)?,
    );
    let version = SegmentVersion::from_u16(raw)
        .ok_or_else(|| Error::corrupt(format!("unknown segment version {raw}")))?;
    let footer_at = n.checked_sub(version.footer_len()).ok_or_else(short)?;
    let compression_byte = *tail.get(footer_at).ok_or_else(short)?;
    let compression = Compression::from_u8(compression_byte)
        .ok_or_else(|| Error::corrupt(format!("unknown compression {compression_byte}")))?;
    let record_count = u32::from_le_bytes(
        tail.get(footer_at + 1..footer_at + 5)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(short)?,
    );
    Ok(SegmentFooter {
        version,
        compression,
        record_count,
    })
}

/// The invariants of a live manifest that its decoder does not already
/// enforce: sequences are dense (each entry starts where the previous one
/// ended, the last one ends at `next_sequence`), and metadata items are in
/// order. Returns one message per violation.
pub(crate) fn manifest_problems(data: &ManifestData) -> Vec<String> {
    let mut problems = Vec::new();
    for pair in data.entries.windows(2) {
        if let [a, b] = pair
            && b.sequence != a.end_sequence()
        {
            problems.push(format!(
                "sequence gap: entry {} ends at {} but the next entry starts at {}",
                a.sequence,
                a.end_sequence(),
                b.sequence
            ));
        }
    }
    if let Some(last) = data.entries.last()
        && last.end_sequence() != data.next_sequence
    {
        problems.push(format!(
            "the last entry ends at {} but next_sequence is {}",
            last.end_sequence(),
            data.next_sequence
        ));
    }
    for entry in &data.entries {
        if entry
            .metadata
            .windows(2)
            .any(|m| matches!(m, [a, b] if a.start_index > b.start_index))
        {
            problems.push(format!(
                "entry {}: metadata items are not in start_index order",
                entry.sequence
            ));
        }
    }
    problems
}

/// How many records an entry holds according to the manifest, where the
/// manifest records it (v3/v4 entries with a count).
pub(crate) fn manifest_count(entry: &ManifestEntry) -> Option<u32> {
    entry.count.filter(|n| *n > 0)
}

#[cfg(test)]
mod tests {
    use weft::format::{ManifestVersion, encode_segment};

    use super::*;

    #[test]
    fn footers_parse_from_a_ranged_tail() {
        let seg = encode_segment(
            &[&b"a"[..], &b"bc"[..]],
            Compression::None,
            SegmentVersion::V2,
        )
        .unwrap();
        let f = parse_footer(&seg[seg.len() - 11..]).unwrap();
        assert_eq!((f.version, f.record_count), (SegmentVersion::V2, 2));
        let seg = encode_segment(&[b"a"], Compression::Zstd, SegmentVersion::V1).unwrap();
        let f = parse_footer(&seg).unwrap();
        assert_eq!(
            (f.version, f.compression, f.record_count),
            (SegmentVersion::V1, Compression::Zstd, 1)
        );
        for bad in [&b""[..], &b"\x01"[..], &b"\x00\x00\x00\x00\x00\x09\x00"[..]] {
            assert_eq!(parse_footer(bad).unwrap_err().kind(), ErrorKind::Corrupt);
        }
    }

    #[test]
    fn gaps_and_short_tails_are_problems() {
        let entry = |sequence, count| ManifestEntry {
            sequence,
            count: Some(count),
            location: format!("s/{sequence}"),
            metadata: vec![],
        };
        let mut data = ManifestData::empty(ManifestVersion::V4);
        data.entries = vec![entry(0, 2), entry(2, 3)];
        data.next_sequence = 5;
        assert!(manifest_problems(&data).is_empty());
        data.entries = vec![entry(0, 2), entry(3, 2)];
        assert_eq!(manifest_problems(&data).len(), 1);
        data.next_sequence = 6;
        assert_eq!(manifest_problems(&data).len(), 2);
    }
}
