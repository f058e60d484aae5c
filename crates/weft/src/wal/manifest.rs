//! The in-memory manifest the producer mutates and replicas read.
//!
//! The manifest object is rewritten on every commit, so serializing it must
//! not cost more than copying its bytes: [`Manifest`] keeps every entry
//! already encoded in the layout it will write, appends new entry bytes to
//! that buffer, and builds the object as those bytes followed by a freshly
//! written snapshot block and footer. Old entries are only re-encoded when
//! the format version changes between the segment-numbered (v1/v2) and
//! record-numbered (v3/v4) layouts.
//!
//! See [`crate::format::manifest`] for the two sequence numbering schemes.

use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};

use crate::error::{Error, Result};
use crate::format::manifest::{
    ManifestData, ManifestEntry, ManifestFooter, ManifestVersion, Metadata, SnapshotPointer,
    check_snapshot, decode_manifest, encode_entry, encode_trailer, trailer_len,
};

/// A manifest held in memory: epoch, next sequence, live entries, snapshot
/// pointer, and the format version it writes.
///
/// The epoch and `next_sequence` only ever move forward ([`bump_epoch`],
/// [`append`]; [`truncate_through`] drops entries but keeps
/// `next_sequence`), and both are in every version's footer. So a manifest
/// that has changed in any way never serializes to the same bytes as an
/// older state of the same log, and a conditional write that names an older
/// object version can never succeed against a byte-identical copy of it.
///
/// ```
/// use weft::format::{ManifestVersion, Metadata};
/// use weft::wal::Manifest;
///
/// let mut m = Manifest::new(ManifestVersion::V4);
/// let first = m.append("log/run/0000000000000000", vec![], 3)?;
/// let second = m.append("log/run/0000000000000001", vec![], 2)?;
/// assert_eq!((first, second, m.next_sequence()), (0, 3, 5));
/// // A reader at record 4 still needs the second segment only.
/// assert_eq!(m.entries_from(4).len(), 1);
/// let copy = Manifest::from_bytes(&m.to_bytes()?)?;
/// assert_eq!(copy, m);
/// # Ok::<(), weft::Error>(())
/// ```
///
/// [`bump_epoch`]: Manifest::bump_epoch
/// [`append`]: Manifest::append
/// [`truncate_through`]: Manifest::truncate_through
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    version: ManifestVersion,
    epoch: u64,
    next_sequence: u64,
    entries: Vec<ManifestEntry>,
    /// Every entry, encoded in `version`'s entry layout, in order.
    encoded: BytesMut,
    /// Encoded length of each entry, parallel to `entries`.
    encoded_lens: Vec<usize>,
    snapshot: Option<SnapshotPointer>,
}

impl Default for Manifest {
    /// An empty v4 manifest.
    fn default() -> Self {
        Manifest::new(ManifestVersion::default())
    }
}

impl Manifest {
    /// An empty manifest at epoch 0 that writes `version`.
    pub fn new(version: ManifestVersion) -> Self {
        Manifest {
            version,
            epoch: 0,
            next_sequence: 0,
            entries: Vec::new(),
            encoded: BytesMut::new(),
            encoded_lens: Vec::new(),
            snapshot: None,
        }
    }

    /// Decode a manifest object. The manifest keeps writing the version it
    /// was read in until [`set_format_version`](Self::set_format_version).
    ///
    /// Errors: [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) for any
    /// malformed object (see [`decode_manifest`]).
    pub fn from_bytes(bytes: &[u8]) -> Result<Manifest> {
        let data = decode_manifest(bytes)?;
        Manifest::from_data(data)
            .map_err(|e| Error::corrupt("manifest: decoded state is not writable").with_source(e))
    }

    /// Build a manifest from decoded or hand-made data.
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// for data that could not be encoded (see
    /// [`encode_manifest`](crate::format::encode_manifest)).
    pub fn from_data(data: ManifestData) -> Result<Manifest> {
        crate::format::manifest::check_entries(data.version, &data.entries, data.next_sequence)
            .map_err(|m| Error::invalid_input(format!("manifest: {m}")))?;
        check_snapshot(data.snapshot.as_ref(), data.version)?;
        check_entry_count(data.entries.len())?;
        let (encoded, encoded_lens) = encode_all(&data.entries, data.version)?;
        Ok(Manifest {
            version: data.version,
            epoch: data.epoch,
            next_sequence: data.next_sequence,
            entries: data.entries,
            encoded,
            encoded_lens,
            snapshot: data.snapshot,
        })
    }

    /// The whole state as plain data.
    pub fn to_data(&self) -> ManifestData {
        ManifestData {
            version: self.version,
            epoch: self.epoch,
            next_sequence: self.next_sequence,
            entries: self.entries.clone(),
            snapshot: self.snapshot.clone(),
        }
    }

    /// Serialize: the cached entry bytes, then the snapshot block and
    /// footer. Costs one copy of the entry bytes (and a CRC pass for v4).
    ///
    /// Errors: none for a manifest built through this type's methods, which
    /// keep it encodable; [`ErrorKind::InvalidInput`](crate::ErrorKind) is
    /// reserved for a broken invariant.
    pub fn to_bytes(&self) -> Result<Bytes> {
        let entries_count = check_entry_count(self.entries.len())?;
        let mut out = BytesMut::with_capacity(self.encoded_len());
        out.extend_from_slice(&self.encoded);
        encode_trailer(
            self.snapshot.as_ref(),
            &ManifestFooter {
                version: self.version,
                entries_count,
                next_sequence: self.next_sequence,
                epoch: self.epoch,
            },
            &mut out,
        )?;
        Ok(out.freeze())
    }

    /// Length in bytes of what [`to_bytes`](Self::to_bytes) returns.
    pub fn encoded_len(&self) -> usize {
        self.encoded.len() + trailer_len(self.snapshot.as_ref(), self.version)
    }

    /// The format version this manifest writes.
    pub fn version(&self) -> ManifestVersion {
        self.version
    }

    /// Write `version` from now on.
    ///
    /// Moving between v1/v2 and v3/v4 re-encodes every entry once: v1/v2
    /// entries become legacy v3/v4 entries with `count = Some(0)` (one slot
    /// each, as before); moving back is only possible while every entry is
    /// such a legacy entry, since a record-numbered entry has no v1/v2 form.
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// when moving to v1 with a snapshot set, or to v1/v2 with
    /// record-numbered entries. The manifest is unchanged on error.
    pub fn set_format_version(&mut self, version: ManifestVersion) -> Result<()> {
        check_snapshot(self.snapshot.as_ref(), version)?;
        if version.has_record_counts() == self.version.has_record_counts() {
            self.version = version;
            return Ok(());
        }
        let mut converted = self.entries.clone();
        for e in &mut converted {
            e.count = match (version.has_record_counts(), e.count) {
                (true, _) => Some(0),
                (false, Some(0)) => None,
                (false, _) => {
                    return Err(Error::invalid_input(format!(
                        "entry {} is record-numbered and has no v{} form",
                        e.sequence,
                        version.as_u16()
                    )));
                }
            };
        }
        let (encoded, encoded_lens) = encode_all(&converted, version)?;
        self.entries = converted;
        self.encoded = encoded;
        self.encoded_lens = encoded_lens;
        self.version = version;
        Ok(())
    }

    /// The fencing epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Claim the log: increase the epoch by one and return the new epoch.
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// if the epoch is already `u64::MAX` (upstream uses that value as an
    /// "uninitialized" marker, so it cannot be bumped).
    pub fn bump_epoch(&mut self) -> Result<u64> {
        self.epoch = self
            .epoch
            .checked_add(1)
            .ok_or_else(|| Error::invalid_input("manifest epoch is at u64::MAX"))?;
        Ok(self.epoch)
    }

    /// v1/v2: the ordinal the next entry gets. v3/v4: the sequence of the
    /// next record.
    pub fn next_sequence(&self) -> u64 {
        self.next_sequence
    }

    /// The first sequence still listed: the first entry's, or
    /// `next_sequence` when there are no entries.
    pub fn first_sequence(&self) -> u64 {
        self.entries
            .first()
            .map_or(self.next_sequence, |e| e.sequence)
    }

    /// Live entries in sequence order.
    pub fn entries(&self) -> &[ManifestEntry] {
        &self.entries
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no entry is live.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The snapshot pointer, if one is set.
    pub fn snapshot(&self) -> Option<&SnapshotPointer> {
        self.snapshot.as_ref()
    }

    /// Set or clear the snapshot pointer.
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// for a snapshot in a v1 manifest, an empty location or one over
    /// `u16::MAX` bytes. The manifest is unchanged on error.
    pub fn set_snapshot(&mut self, snapshot: Option<SnapshotPointer>) -> Result<()> {
        check_snapshot(snapshot.as_ref(), self.version)?;
        self.snapshot = snapshot;
        Ok(())
    }

    /// Append an entry for a committed segment of `record_count` records and
    /// return its sequence.
    ///
    /// v3/v4: the entry owns `[next_sequence, next_sequence + record_count)`
    /// and `next_sequence` advances by `record_count`. v1/v2: the entry gets
    /// the ordinal `next_sequence` and `next_sequence` advances by one.
    /// Amortized O(size of the new entry); no other entry is touched.
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// for zero or more than `u32::MAX` records, a sequence overflow, more
    /// than `u32::MAX` entries, or an entry that cannot be encoded (see
    /// [`encode_entry`]). The manifest is unchanged on error.
    pub fn append(
        &mut self,
        location: impl Into<String>,
        metadata: Vec<Metadata>,
        record_count: usize,
    ) -> Result<u64> {
        if record_count == 0 {
            return Err(Error::invalid_input(
                "a manifest entry must name a segment with at least one record",
            ));
        }
        let count = u32::try_from(record_count).map_err(|_| {
            Error::invalid_input(format!(
                "a segment of {record_count} records exceeds the u32 count field"
            ))
        })?;
        check_entry_count(self.entries.len() + 1)?;
        let entry = ManifestEntry {
            sequence: self.next_sequence,
            count: self.version.has_record_counts().then_some(count),
            location: location.into(),
            metadata,
        };
        let next = self
            .next_sequence
            .checked_add(entry.slots())
            .ok_or_else(|| {
                Error::invalid_input("appending would overflow the manifest's sequence space")
            })?;
        let before = self.encoded.len();
        encode_entry(&entry, self.version, &mut self.encoded)?;
        self.encoded_lens.push(self.encoded.len() - before);
        self.entries.push(entry);
        self.next_sequence = next;
        Ok(self.entries[self.entries.len() - 1].sequence)
    }

    /// Drop every entry all of whose sequences are `<= seq` (an entry that
    /// straddles `seq` is kept whole) and return how many were dropped.
    /// `next_sequence` and the epoch are unchanged.
    pub fn truncate_through(&mut self, seq: u64) -> usize {
        let dropped = self
            .entries
            .partition_point(|e| e.end_sequence() - 1 <= seq);
        if dropped == 0 {
            return 0;
        }
        let bytes: usize = self.encoded_lens[..dropped].iter().sum();
        self.encoded.advance(bytes);
        self.encoded_lens.drain(..dropped);
        self.entries.drain(..dropped);
        dropped
    }

    /// The entries a reader positioned at `seq` still needs, in order.
    ///
    /// v3/v4: every entry that ends after record `seq`, including the one
    /// containing it (the reader skips that segment's leading records, see
    /// [`locate`](Self::locate)). v1/v2: the entries whose ordinal is at
    /// least `seq`. If `seq` is below [`first_sequence`](Self::first_sequence)
    /// every entry is returned; telling the reader it missed trimmed records
    /// is the caller's job.
    pub fn entries_from(&self, seq: u64) -> &[ManifestEntry] {
        let start = self.entries.partition_point(|e| e.end_sequence() <= seq);
        &self.entries[start..]
    }

    /// The entry that holds sequence `seq`, and the index within its segment
    /// of the first record at or after `seq` (always 0 for a v1/v2 or legacy
    /// entry, whose records share one sequence).
    pub fn locate(&self, seq: u64) -> Option<(&ManifestEntry, u64)> {
        let e = self.entries_from(seq).first()?;
        if !e.contains(seq) {
            return None;
        }
        let offset = if e.record_range().is_some() {
            seq - e.sequence
        } else {
            0
        };
        Some((e, offset))
    }

    /// The record-level sequences the entry at `index` covers, where the
    /// manifest knows them (v3/v4 entries with a record count); `None` for
    /// v1/v2 and legacy entries or an index out of range.
    pub fn entry_record_range(&self, index: usize) -> Option<Range<u64>> {
        self.entries.get(index)?.record_range()
    }
}

fn check_entry_count(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::invalid_input("a manifest holds at most u32::MAX entries"))
}

fn encode_all(
    entries: &[ManifestEntry],
    version: ManifestVersion,
) -> Result<(BytesMut, Vec<usize>)> {
    let total = entries
        .iter()
        .map(|e| e.encoded_len(version))
        .fold(0, usize::saturating_add);
    let mut encoded = BytesMut::with_capacity(total);
    let mut lens = Vec::with_capacity(entries.len());
    for e in entries {
        let before = encoded.len();
        encode_entry(e, version, &mut encoded)?;
        lens.push(encoded.len() - before);
    }
    Ok((encoded, lens))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use crate::format::encode_manifest;

    fn md(start_index: u32) -> Metadata {
        Metadata {
            start_index,
            ingestion_ms: 1_700_000_000_000,
            payload: Bytes::from_static(b"m"),
        }
    }

    #[test]
    fn record_numbering_in_v4() {
        let mut m = Manifest::new(ManifestVersion::V4);
        assert_eq!(m.append("a", vec![md(0)], 4).unwrap(), 0);
        assert_eq!(m.append("b", vec![md(0), md(1)], 2).unwrap(), 4);
        assert_eq!(m.next_sequence(), 6);
        assert_eq!(m.entry_record_range(0), Some(0..4));
        assert_eq!(m.entry_record_range(1), Some(4..6));
        assert_eq!(m.entries_from(3).len(), 2);
        assert_eq!(m.entries_from(4).len(), 1);
        assert_eq!(m.entries_from(6).len(), 0);
        let (e, off) = m.locate(5).unwrap();
        assert_eq!((e.location.as_str(), off), ("b", 1));
        assert!(m.locate(6).is_none());
    }

    #[test]
    fn segment_numbering_in_v2() {
        let mut m = Manifest::new(ManifestVersion::V2);
        assert_eq!(m.append("a", vec![], 4).unwrap(), 0);
        assert_eq!(m.append("b", vec![], 2).unwrap(), 1);
        assert_eq!(m.next_sequence(), 2);
        assert_eq!(m.entries()[0].count, None);
        assert_eq!(m.entry_record_range(0), None);
        assert_eq!(m.entries_from(1)[0].location, "b");
        assert_eq!(m.locate(1).unwrap().1, 0);
    }

    #[test]
    fn to_bytes_matches_the_whole_manifest_encoder() {
        for version in ManifestVersion::ALL {
            let mut m = Manifest::new(version);
            m.bump_epoch().unwrap();
            for i in 0..5 {
                m.append(format!("seg/{i}"), vec![md(0)], i + 1).unwrap();
            }
            if version.has_snapshot_block() {
                m.set_snapshot(Some(SnapshotPointer {
                    location: "snap/1".into(),
                    through_seq: 2,
                    created_ms: 9,
                }))
                .unwrap();
            }
            m.truncate_through(2);
            let bytes = m.to_bytes().unwrap();
            assert_eq!(bytes, encode_manifest(&m.to_data()).unwrap());
            assert_eq!(bytes.len(), m.encoded_len());
            assert_eq!(Manifest::from_bytes(&bytes).unwrap(), m);
        }
    }

    #[test]
    fn truncate_keeps_straddling_entries_and_next_sequence() {
        let mut m = Manifest::new(ManifestVersion::V3);
        m.append("a", vec![], 3).unwrap(); // 0..3
        m.append("b", vec![], 3).unwrap(); // 3..6
        m.append("c", vec![], 3).unwrap(); // 6..9
        assert_eq!(m.truncate_through(1), 0);
        assert_eq!(m.truncate_through(3), 1);
        assert_eq!(m.first_sequence(), 3);
        assert_eq!(m.truncate_through(u64::MAX), 2);
        assert!(m.is_empty());
        assert_eq!((m.next_sequence(), m.first_sequence()), (9, 9));
        assert_eq!(m.append("d", vec![], 1).unwrap(), 9);
    }

    #[test]
    fn upgrade_turns_segment_entries_into_legacy_slots() {
        let mut m = Manifest::new(ManifestVersion::V1);
        m.append("a", vec![], 4).unwrap();
        m.append("b", vec![], 2).unwrap();
        m.set_format_version(ManifestVersion::V4).unwrap();
        assert_eq!(m.entries()[1].count, Some(0));
        assert_eq!(m.append("c", vec![], 3).unwrap(), 2);
        assert_eq!(m.entry_record_range(2), Some(2..5));
        assert_eq!(m.entries_from(1).len(), 2);
        let err = m.set_format_version(ManifestVersion::V2).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert_eq!(m.version(), ManifestVersion::V4);
        // Only the record-numbered entry is left: still no v2 form.
        assert_eq!(m.truncate_through(1), 2);
        m.set_format_version(ManifestVersion::V2).unwrap_err();
        let copy = Manifest::from_bytes(&m.to_bytes().unwrap()).unwrap();
        assert_eq!(copy, m);
    }

    #[test]
    fn misuse_is_invalid_input_and_changes_nothing() {
        let mut m = Manifest::new(ManifestVersion::V1);
        let before = m.clone();
        let snap = SnapshotPointer {
            location: "s".into(),
            through_seq: 0,
            created_ms: 0,
        };
        assert_eq!(
            m.set_snapshot(Some(snap.clone())).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(
            m.append("x".repeat(70_000), vec![], 1).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(
            m.append("a", vec![], 0).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        assert_eq!(m, before);
        let mut v2 = Manifest::new(ManifestVersion::V2);
        v2.set_snapshot(Some(snap)).unwrap();
        assert!(v2.set_format_version(ManifestVersion::V1).is_err());
        let empty = SnapshotPointer {
            location: String::new(),
            through_seq: 1,
            created_ms: 1,
        };
        assert!(v2.set_snapshot(Some(empty)).is_err());
    }

    #[test]
    fn every_change_changes_the_bytes() {
        let mut m = Manifest::new(ManifestVersion::V2);
        let a = m.to_bytes().unwrap();
        m.bump_epoch().unwrap();
        let b = m.to_bytes().unwrap();
        m.append("s", vec![], 1).unwrap();
        let c = m.to_bytes().unwrap();
        m.truncate_through(0);
        let d = m.to_bytes().unwrap();
        assert!(a != b && b != c && c != d && a != d && b != d);
    }

    #[test]
    fn epoch_at_max_cannot_be_bumped() {
        let mut data = ManifestData::empty(ManifestVersion::V1);
        data.epoch = u64::MAX;
        let mut m = Manifest::from_data(data).unwrap();
        assert_eq!(m.bump_epoch().unwrap_err().kind(), ErrorKind::InvalidInput);
        assert_eq!(m.epoch(), u64::MAX);
    }
}
