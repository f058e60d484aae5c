//! The segment a manifest entry names: fetched, decoded and counted the
//! same way for a replica and for tools (`weft wal dump`, `weft verify`),
//! so they agree on what is wrong with it.
//!
//! * A segment the manifest lists and the store does not have is
//!   `Corrupt` — unless a fresh read of the manifest no longer lists it
//!   (it was truncated meanwhile and may have been collected).
//! * A segment that does not decode, or holds another number of records
//!   than a record-numbered (v3/v4) entry says, is `Corrupt`.

use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;

use crate::error::{Error, ErrorKind, Result};
use crate::format::manifest::{ManifestEntry, decode_manifest};
use crate::format::segment::{DecodedSegment, decode_segment};
use crate::objects::read_whole;

/// Decodes the bytes of `entry`'s segment and checks its record count.
///
/// Errors: `Corrupt`.
pub fn check_segment(entry: &ManifestEntry, bytes: Bytes) -> Result<DecodedSegment> {
    let segment = decode_segment(bytes).map_err(|e| {
        e.context(format!(
            "segment {} (entry {})",
            entry.location, entry.sequence
        ))
    })?;
    if let Some(count) = entry.count
        && segment.records.len() != count as usize
    {
        return Err(Error::corrupt(format!(
            "segment {} (entry {}) holds {} records, the manifest says {count}",
            entry.location,
            entry.sequence,
            segment.records.len()
        )));
    }
    Ok(segment)
}

/// The error for `entry`'s segment, which the manifest lists and the store
/// does not have (`err` says so).
pub fn missing_segment(entry: &ManifestEntry, err: Error) -> Error {
    Error::corrupt(format!(
        "the manifest lists segment {} (entry {}), which does not exist",
        entry.location, entry.sequence
    ))
    .with_source(err)
}

/// Fetches, decodes and counts the segment of `entry`, an entry of the
/// manifest at `manifest_path`. Returns its size and its records.
///
/// Errors: `Corrupt` (see the module docs); `Unavailable` when the segment
/// is gone because the manifest no longer lists it (read again); store
/// kinds.
pub async fn fetch_listed_segment(
    store: &Arc<dyn ObjectStore>,
    manifest_path: &Path,
    entry: &ManifestEntry,
) -> Result<(u64, DecodedSegment)> {
    let bytes = match read_whole(store.as_ref(), &Path::from(entry.location.as_str())).await {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if still_listed(store, manifest_path, entry).await? {
                return Err(missing_segment(entry, e));
            }
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "segment {} disappeared: the log was truncated while it was read; read again",
                    entry.location
                ),
            )
            .with_source(e));
        }
        Err(e) => return Err(e),
    };
    let size = bytes.len() as u64;
    Ok((size, check_segment(entry, bytes)?))
}

/// True when a fresh read of the manifest still lists `entry`'s segment.
async fn still_listed(
    store: &Arc<dyn ObjectStore>,
    manifest_path: &Path,
    entry: &ManifestEntry,
) -> Result<bool> {
    let bytes = read_whole(store.as_ref(), manifest_path).await?;
    let manifest =
        decode_manifest(&bytes).map_err(|e| e.context(format!("manifest {manifest_path}")))?;
    if manifest
        .entries
        .iter()
        .any(|e| e.location == entry.location)
    {
        return Ok(true);
    }
    // A v5 manifest lists older entries in its history pages.
    if manifest.history.is_none() || entry.sequence < manifest.first_sequence() {
        return Ok(false);
    }
    let held = super::HistoryReader::new(store.clone(), 1 << 20)
        .locate(manifest.history.as_ref(), &manifest.entries, entry.sequence)
        .await?;
    Ok(held.is_some_and(|e| e.location == entry.location))
}
