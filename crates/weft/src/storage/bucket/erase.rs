//! Hard deletes on a bucket log: segment objects rewritten in place with
//! some of their records erased.
//!
//! A record is an entry frame; an erased frame keeps its length
//! ([`frame::erase_in_place`]), so the segment keeps its record count and
//! every record its length, the manifest (which names the object, not its
//! bytes) stays true, and the object stays byte-compatible with the
//! upstream segment layout. The new bytes replace the object under the
//! same key with a conditional `PUT` (`If-Match` on the copy that was
//! read): a concurrent rewrite makes it re-read and erase again, a trimmed
//! and collected segment is never brought back, and a `PUT` whose outcome
//! is unknown is settled by reading again. No manifest is written and no
//! epoch is claimed, so a running writer is not fenced: the writer's own
//! `Storage::erase` and a tool's [`erase_unowned`] use the same steps.

use std::sync::Arc;

use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};

use super::reader::BucketReader;
use crate::error::{Error, ErrorKind, Result};
use crate::format::frame;
use crate::format::manifest::ManifestEntry;
use crate::format::segment::{decode_segment, encode_segment};
use crate::objects::{Outcome, StoreOp, classify, to_error};

/// How many times one segment's rewrite starts over after a conflict or an
/// unknown outcome.
const ATTEMPTS: usize = 8;

/// Erases the entries `seqnums` (ascending, committed) of the log `reader`
/// reads, segment by segment; entries trimmed meanwhile are skipped.
/// Returns how many were erased by this call.
///
/// Errors: `Corrupt` when a segment does not hold its records intact;
/// `Unavailable` after [`ATTEMPTS`] lost races on one segment; store kinds
/// (`ReadOnly` through a read-only store). Segments rewritten before the
/// error stay rewritten.
pub(crate) async fn erase_entries(
    store: &Arc<dyn ObjectStore>,
    reader: &BucketReader,
    seqnums: &[u64],
) -> Result<u64> {
    let mut erased = 0;
    for (entry, list) in reader.segments_of(seqnums).await? {
        let result = rewrite(store.as_ref(), reader, &entry, &list).await;
        // Whatever happened, the next read fetches the object again.
        reader.forget_segment(&entry.location);
        erased += result?;
    }
    Ok(erased)
}

/// Rewrites the segment of manifest entry `entry` with the records of
/// `seqnums` erased; returns how many were not erased before.
async fn rewrite(
    store: &dyn ObjectStore,
    reader: &BucketReader,
    entry: &ManifestEntry,
    seqnums: &[u64],
) -> Result<u64> {
    let path = Path::from(entry.location.as_str());
    for _ in 0..ATTEMPTS {
        let got = match store.get(&path).await {
            Ok(got) => got,
            Err(e) if classify(StoreOp::Read, &e) == Outcome::NotFound => {
                let err = to_error(StoreOp::Read, path.as_ref(), e);
                return match reader.missing(seqnums[0], entry, err).await {
                    // Trimmed and collected meanwhile: nothing to erase.
                    e if e.kind() == ErrorKind::Trimmed => Ok(0),
                    e => Err(e),
                };
            }
            Err(e) => return Err(to_error(StoreOp::Read, path.as_ref(), e)),
        };
        let version = UpdateVersion {
            e_tag: got.meta.e_tag.clone(),
            version: got.meta.version.clone(),
        };
        let bytes = got
            .bytes()
            .await
            .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))?;
        let Some((new_bytes, erased)) = erased_copy(entry, seqnums, bytes)? else {
            return Ok(0);
        };
        let opts = PutOptions::from(PutMode::Update(version));
        match store
            .put_opts(&path, PutPayload::from(new_bytes), opts)
            .await
        {
            Ok(_) => return Ok(erased),
            Err(e) => match classify(StoreOp::UpdateIfMatch, &e) {
                // Someone rewrote it meanwhile, the answer was lost, or a
                // trim's collection removed it: read it again (and erase
                // what is left, or find it gone).
                Outcome::Conflict | Outcome::Ambiguous | Outcome::Transient | Outcome::NotFound => {
                    continue;
                }
                _ => return Err(to_error(StoreOp::UpdateIfMatch, path.as_ref(), e)),
            },
        }
    }
    Err(Error::new(
        ErrorKind::Unavailable,
        format!(
            "erasing entries of segment {}: the object kept changing; erase again",
            entry.location
        ),
    ))
}

/// The segment `bytes` of `entry` with the records of `seqnums` erased, in
/// its own footer version and compression, and how many records changed;
/// `None` when none did.
///
/// Errors: `Corrupt` when the segment does not decode or does not hold the
/// records the manifest says.
fn erased_copy(
    entry: &ManifestEntry,
    seqnums: &[u64],
    bytes: bytes::Bytes,
) -> Result<Option<(bytes::Bytes, u64)>> {
    let segment = crate::wal::segments::check_segment(entry, bytes)?;
    let damaged = |why: String| Error::corrupt(format!("segment {}: {why}", entry.location));
    let mut records: Vec<Vec<u8>> = segment.records.iter().map(|r| r.to_vec()).collect();
    let mut erased = 0;
    for &seq in seqnums {
        let at = usize::try_from(seq - entry.sequence).unwrap_or(usize::MAX);
        let record = records
            .get_mut(at)
            .ok_or_else(|| damaged(format!("holds no record for seqnum {seq}")))?;
        let claimed = frame::claimed_position(record).map(|(s, _)| s);
        if claimed != Some(seq) {
            return Err(damaged(format!("record {at} is not entry {seq}")));
        }
        if frame::erase_in_place(record).map_err(|e| damaged(format!("record {at}: {e}")))? {
            erased += 1;
        }
    }
    if erased == 0 {
        return Ok(None);
    }
    let encoded = encode_segment(&records, segment.compression, segment.version)?;
    // The upstream layout is kept: what was decodable stays decodable.
    decode_segment(encoded.clone()).map_err(|e| e.context("an erased segment"))?;
    Ok(Some((encoded, erased)))
}
