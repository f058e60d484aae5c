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
//! A v5 manifest keeps only its recent entries; [`Manifest::checkpoint`]
//! moves the oldest ones into immutable history pages (see
//! `crate::format::history`) and returns the pages to upload before the
//! CAS that drops them from the manifest. That keeps the object, and so the
//! cost of every commit, bounded however long the log grows.
//!
//! See `crate::format::manifest` for the two sequence numbering schemes.

use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::history::{History, HistoryPage, PageItems, PagePointer, encode_page};
use crate::format::manifest::{
    ManifestData, ManifestEntry, ManifestFooter, ManifestVersion, Metadata, SnapshotPointer,
    check_snapshot, decode_manifest, encode_entry, encode_trailer_with_history,
    trailer_len_with_history,
};

/// When a v5 manifest moves its oldest entries into history pages, and how
/// large those pages are (plain, serde-loadable settings).
///
/// A commit that leaves more than `max_recent_entries` entries (or more
/// than `max_recent_bytes` of them) in the manifest first moves the oldest
/// ones into leaf pages of at most `leaf_entries` entries and `leaf_bytes`
/// bytes, until it is back under both limits (at most
/// `max_pages_per_commit` leaves at once, so a large old manifest shrinks
/// over a few commits). Every `fanout` pages of one level are gathered into
/// one page of the level above.
///
/// The manifest object then stays below roughly `max_recent_bytes` plus one
/// commit's new entries plus the frontier (`fanout` pointers per level,
/// about 100 bytes each, a handful of levels).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct CheckpointPolicy {
    /// Most entries the manifest lists itself after a commit.
    pub max_recent_entries: usize,
    /// Most bytes of encoded entries the manifest lists itself.
    pub max_recent_bytes: usize,
    /// Most entries in one leaf page.
    pub leaf_entries: usize,
    /// Most bytes of encoded entries in one leaf page (a single larger
    /// entry still gets a page of its own).
    pub leaf_bytes: usize,
    /// Pages of one level gathered into one page of the level above.
    pub fanout: usize,
    /// Most leaf pages one commit writes.
    pub max_pages_per_commit: usize,
}

setters! {
    CheckpointPolicy {
        with_max_recent_entries => max_recent_entries: usize,
        with_max_recent_bytes => max_recent_bytes: usize,
        with_leaf_entries => leaf_entries: usize,
        with_leaf_bytes => leaf_bytes: usize,
        with_fanout => fanout: usize,
        with_max_pages_per_commit => max_pages_per_commit: usize,
    }
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        CheckpointPolicy {
            // 640 entries of ~100 bytes: a ~64 KiB manifest at most, of
            // which a checkpoint moves 512 into a page and keeps the newest
            // 128, so a follower a few seconds behind still finds its next
            // entries in the manifest itself.
            max_recent_entries: 640,
            max_recent_bytes: 128 << 10,
            leaf_entries: 512,
            leaf_bytes: 64 << 10,
            fanout: 64,
            max_pages_per_commit: 64,
        }
    }
}

impl CheckpointPolicy {
    /// Checks the settings.
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// for a zero limit, a fanout below 2, or leaves as large as the
    /// manifest's own limit (a checkpoint would leave nothing recent).
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::invalid_input(format!("checkpoint policy: {what}")));
        if self.leaf_entries == 0 || self.leaf_bytes == 0 || self.max_pages_per_commit == 0 {
            return bad("leaf_entries, leaf_bytes and max_pages_per_commit must be positive");
        }
        if self.leaf_entries >= self.max_recent_entries {
            return bad("leaf_entries must be below max_recent_entries");
        }
        if self.leaf_bytes >= self.max_recent_bytes {
            return bad("leaf_bytes must be below max_recent_bytes");
        }
        if self.fanout < 2 || self.fanout > usize::from(u16::MAX) {
            return bad("fanout must be between 2 and 65535");
        }
        Ok(())
    }
}

/// A history page a checkpoint made, to be stored (create-only) before the
/// manifest CAS that references it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageUpload {
    /// Where the page goes.
    pub location: String,
    /// Its bytes.
    pub bytes: Bytes,
    /// Its pointer, as the manifest or the page above holds it.
    pub pointer: PagePointer,
}

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
    /// v5: the history pages holding older entries, if any.
    history: Option<History>,
}

impl Default for Manifest {
    /// An empty manifest of the default version (v5).
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
            history: None,
        }
    }

    /// Decode a manifest object. The manifest keeps writing the version it
    /// was read in until [`set_format_version`](Self::set_format_version).
    ///
    /// Errors: [`ErrorKind::Corrupt`](crate::ErrorKind::Corrupt) for any
    /// malformed object (see `decode_manifest`).
    pub fn from_bytes(bytes: &[u8]) -> Result<Manifest> {
        let data = decode_manifest(bytes)?;
        Manifest::from_data(data)
            .map_err(|e| Error::corrupt("manifest: decoded state is not writable").with_source(e))
    }

    /// Build a manifest from decoded or hand-made data.
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// for data that could not be encoded (see
    /// `encode_manifest`).
    pub fn from_data(data: ManifestData) -> Result<Manifest> {
        crate::format::manifest::check_entries(data.version, &data.entries, data.next_sequence)
            .map_err(|m| Error::invalid_input(format!("manifest: {m}")))?;
        check_snapshot(data.snapshot.as_ref(), data.version)?;
        if let Some(h) = &data.history {
            if !data.version.has_history() {
                return Err(Error::invalid_input(format!(
                    "manifest: a v{} manifest has no history block",
                    data.version.as_u16()
                )));
            }
            crate::format::history_block::check_history(
                h,
                data.entries.first().map(|e| e.sequence),
                data.next_sequence,
            )
            .map_err(|m| Error::invalid_input(format!("manifest: {m}")))?;
        }
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
            history: data.history,
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
            history: self.history.clone(),
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
        encode_trailer_with_history(
            self.history.as_ref(),
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
        self.encoded.len()
            + trailer_len_with_history(self.history.as_ref(), self.snapshot.as_ref(), self.version)
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
    /// when moving to v1 with a snapshot set, to v1/v2 with
    /// record-numbered entries, or below v5 while history pages hold
    /// entries (they have no place in an older layout). The manifest is
    /// unchanged on error.
    pub fn set_format_version(&mut self, version: ManifestVersion) -> Result<()> {
        check_snapshot(self.snapshot.as_ref(), version)?;
        if self.history.is_some() && !version.has_history() {
            return Err(Error::invalid_input(format!(
                "history pages hold entries of this manifest; a v{} manifest cannot name them",
                version.as_u16()
            )));
        }
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

    /// The first live sequence: the first live entry's (in a history page
    /// or in the manifest), or `next_sequence` when there is none.
    pub fn first_sequence(&self) -> u64 {
        match &self.history {
            Some(h) => h.live_from,
            None => self
                .entries
                .first()
                .map_or(self.next_sequence, |e| e.sequence),
        }
    }

    /// The entries the manifest lists itself, in sequence order: every live
    /// entry up to v4; in v5 the recent ones, after those in history pages.
    pub fn entries(&self) -> &[ManifestEntry] {
        &self.entries
    }

    /// Number of entries the manifest lists itself.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the manifest lists no entry itself (history pages may
    /// still hold live ones: see [`history`](Self::history)).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// v5: the history pages holding the entries older than
    /// [`entries`](Self::entries), if any.
    pub fn history(&self) -> Option<&History> {
        self.history.as_ref()
    }

    /// Where the manifest's own entries begin: the end of the history, or
    /// [`first_sequence`](Self::first_sequence) without one.
    pub fn recent_from(&self) -> u64 {
        self.history
            .as_ref()
            .and_then(History::end_seq)
            .unwrap_or_else(|| self.first_sequence())
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
    /// `encode_entry`). The manifest is unchanged on error.
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
    ///
    /// v5 with history pages: a page is never edited, so a pointer is
    /// dropped once its whole range is `<= seq`, and the first live
    /// sequence becomes the start of the first page still named — a
    /// conservative point (nothing live is lost; the straddling page's
    /// head is kept). [`set_live_from`](Self::set_live_from) then moves it
    /// to the exact first live entry, which only reading that page tells.
    /// The count includes the entries of dropped pages.
    pub fn truncate_through(&mut self, seq: u64) -> usize {
        let mut dropped_pages = 0u64;
        if let Some(h) = &mut self.history {
            for level in &mut h.levels {
                let n = level.partition_point(|p| p.end_seq - 1 <= seq);
                dropped_pages += level.drain(..n).map(|p| p.entries).sum::<u64>();
            }
            while h.levels.last().is_some_and(Vec::is_empty) {
                h.levels.pop();
            }
            let first = h.first_seq();
            match first {
                Some(first) => h.live_from = h.live_from.max(first),
                None => self.history = None,
            }
        }
        let dropped = self
            .entries
            .partition_point(|e| e.end_sequence() - 1 <= seq);
        if dropped > 0 {
            let bytes: usize = self.encoded_lens[..dropped].iter().sum();
            self.encoded.advance(bytes);
            self.encoded_lens.drain(..dropped);
            self.entries.drain(..dropped);
        }
        dropped + usize::try_from(dropped_pages).unwrap_or(usize::MAX)
    }

    /// v5: moves the first live sequence forward to `seq`, the start of the
    /// first live entry inside the first history page (learned by reading
    /// that page after [`truncate_through`](Self::truncate_through)).
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// when there are no history pages, or `seq` is behind the current
    /// first live sequence or outside the first page. The manifest is
    /// unchanged on error.
    pub fn set_live_from(&mut self, seq: u64) -> Result<()> {
        let Some(h) = &mut self.history else {
            return Err(Error::invalid_input(
                "only a manifest with history pages has a separate first live sequence",
            ));
        };
        let first = h.pointers().next().map(|(_, p)| p.clone());
        match first {
            Some(p) if p.contains(seq) && seq >= h.live_from => {
                h.live_from = seq;
                Ok(())
            }
            _ => Err(Error::invalid_input(format!(
                "{seq} is not a first live sequence this manifest can move to (now {})",
                h.live_from
            ))),
        }
    }

    /// True when a commit leaving the manifest as it is should first move
    /// entries into history pages (v5 only).
    pub fn needs_checkpoint(&self, policy: &CheckpointPolicy) -> bool {
        self.version.has_history()
            && (self.entries.len() > policy.max_recent_entries
                || self.encoded.len() > policy.max_recent_bytes)
    }

    /// Moves the oldest entries into history pages until the manifest is
    /// back within `policy` (v5; nothing happens otherwise or when it is
    /// within already) and returns the pages, which must be stored before
    /// the manifest is written. Only entries ending at or before
    /// `movable_end` move: a commit passes the `next_sequence` it started
    /// from, so its own new entries stay in the manifest, where an
    /// ambiguous commit looks for them.
    ///
    /// `name(level, first_seq, end_seq)` gives each page's location; it
    /// must be unique to this writer (pages are created, never
    /// overwritten).
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// for a policy that does not validate, or a page that cannot be
    /// encoded. The manifest is unchanged on error.
    pub fn checkpoint(
        &mut self,
        policy: &CheckpointPolicy,
        movable_end: u64,
        mut name: impl FnMut(u8, u64, u64) -> String,
    ) -> Result<Vec<PageUpload>> {
        policy.validate()?;
        let mut next = self.clone();
        let mut uploads = Vec::new();
        let mut leaves = 0;
        while next.needs_checkpoint(policy) && leaves < policy.max_pages_per_commit {
            let mut n = 0;
            let mut bytes = 0;
            while n < next.entries.len()
                && n < policy.leaf_entries
                && next.entries[n].end_sequence() <= movable_end
                && (n == 0 || bytes + next.encoded_lens[n] <= policy.leaf_bytes)
            {
                bytes += next.encoded_lens[n];
                n += 1;
            }
            if n == 0 {
                break;
            }
            next.move_to_history(n, policy, &mut name, &mut uploads)?;
            leaves += 1;
        }
        *self = next;
        Ok(uploads)
    }

    /// Moves the oldest `n` entries into a leaf page and gathers full
    /// levels upwards.
    fn move_to_history(
        &mut self,
        n: usize,
        policy: &CheckpointPolicy,
        name: &mut impl FnMut(u8, u64, u64) -> String,
        uploads: &mut Vec<PageUpload>,
    ) -> Result<()> {
        let live_from = self.first_sequence();
        let moved: Vec<ManifestEntry> = self.entries[..n].to_vec();
        let leaf = page_upload(0, PageItems::Entries(moved), name)?;
        let bytes: usize = self.encoded_lens[..n].iter().sum();
        self.encoded.advance(bytes);
        self.encoded_lens.drain(..n);
        self.entries.drain(..n);
        let h = self.history.get_or_insert_with(|| History {
            live_from,
            levels: Vec::new(),
        });
        let mut carry = leaf.pointer.clone();
        uploads.push(leaf);
        let mut level = 0;
        loop {
            if h.levels.len() == level {
                h.levels.push(Vec::new());
            }
            h.levels[level].push(carry);
            if h.levels[level].len() < policy.fanout {
                break;
            }
            let full = std::mem::take(&mut h.levels[level]);
            let level_up = u8::try_from(level + 1)
                .ok()
                .filter(|&l| usize::from(l) < crate::format::MAX_LEVELS)
                .ok_or_else(|| Error::invalid_input("the history tree is full"))?;
            let page = page_upload(level_up, PageItems::Pointers(full), name)?;
            carry = page.pointer.clone();
            uploads.push(page);
            level += 1;
        }
        Ok(())
    }

    /// The entries a reader positioned at `seq` still needs, in order,
    /// among those the manifest lists itself (a v5 reader below
    /// [`recent_from`](Self::recent_from) reads history pages first).
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

fn page_upload(
    level: u8,
    items: PageItems,
    name: &mut impl FnMut(u8, u64, u64) -> String,
) -> Result<PageUpload> {
    let page = HistoryPage { level, items };
    let (first_seq, end_seq) = page
        .range()
        .ok_or_else(|| Error::invalid_input("a history page needs an item"))?;
    let entries = page.entries();
    let bytes = encode_page(&page)?;
    let location = name(level, first_seq, end_seq);
    Ok(PageUpload {
        pointer: PagePointer {
            first_seq,
            end_seq,
            entries,
            location: location.clone(),
        },
        location,
        bytes,
    })
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
    use std::collections::HashMap;

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

    fn small_policy() -> CheckpointPolicy {
        CheckpointPolicy {
            max_recent_entries: 6,
            max_recent_bytes: 1 << 20,
            leaf_entries: 4,
            leaf_bytes: 1 << 19,
            fanout: 3,
            max_pages_per_commit: 64,
        }
    }

    fn name(level: u8, first: u64, end: u64) -> String {
        format!("hist/{level}-{first}-{end}")
    }

    /// Appends `n` one-record entries, checkpointing after each as a
    /// committer would; returns every page stored, by location.
    fn grow(m: &mut Manifest, n: usize, pages: &mut HashMap<String, HistoryPage>) {
        for _ in 0..n {
            let committed = m.next_sequence();
            m.append(format!("seg/{committed}"), vec![], 1).unwrap();
            for up in m.checkpoint(&small_policy(), committed, name).unwrap() {
                let page = crate::format::decode_page(&up.bytes).unwrap();
                assert_eq!(
                    page.range(),
                    Some((up.pointer.first_seq, up.pointer.end_seq))
                );
                assert!(pages.insert(up.location, page).is_none(), "pages are new");
            }
        }
    }

    /// Every entry the history and the manifest hold, in order.
    fn all_entries(m: &Manifest, pages: &HashMap<String, HistoryPage>) -> Vec<u64> {
        fn walk(loc: &str, pages: &HashMap<String, HistoryPage>, out: &mut Vec<u64>) {
            match &pages[loc].items {
                PageItems::Entries(es) => out.extend(es.iter().map(|e| e.sequence)),
                PageItems::Pointers(ps) => {
                    for p in ps {
                        walk(&p.location, pages, out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        if let Some(h) = m.history() {
            for (_, p) in h.pointers() {
                walk(&p.location, pages, &mut out);
            }
        }
        out.extend(m.entries().iter().map(|e| e.sequence));
        out
    }

    #[test]
    fn checkpoints_keep_the_manifest_bounded_and_lose_nothing() {
        let mut m = Manifest::new(ManifestVersion::V5);
        let mut pages = HashMap::new();
        let mut max_len = 0;
        for round in 0..10 {
            grow(&mut m, 40, &mut pages);
            max_len = max_len.max(m.encoded_len());
            assert!(m.len() <= 6, "round {round}: {} recent entries", m.len());
            let h = m.history().unwrap();
            assert!(h.levels.iter().all(|l| l.len() < 3), "{h:?}");
            assert_eq!(
                all_entries(&m, &pages),
                (0..m.next_sequence()).collect::<Vec<_>>()
            );
            assert_eq!(h.entries() + m.len() as u64, m.next_sequence());
            let copy = Manifest::from_bytes(&m.to_bytes().unwrap()).unwrap();
            assert_eq!(copy, m);
        }
        // 400 entries: leaves of 4, gathered by 3 up to a few levels, and a
        // manifest that did not grow with the log.
        assert!(m.history().unwrap().levels.len() >= 4);
        assert!(max_len < 1_000, "{max_len} bytes");
        // Every page was created once; a checkpoint never rewrote one.
        assert!(pages.len() > 100);
    }

    #[test]
    fn a_checkpoint_moves_only_committed_entries() {
        let mut m = Manifest::new(ManifestVersion::V5);
        for i in 0..10 {
            m.append(format!("seg/{i}"), vec![], 1).unwrap();
        }
        // Only entries ending at or before 3 were committed before.
        let ups = m.checkpoint(&small_policy(), 3, name).unwrap();
        assert_eq!(ups.len(), 1);
        assert_eq!(m.recent_from(), 3);
        assert_eq!(m.entries().len(), 7);
        assert_eq!(m.first_sequence(), 0);
        // Nothing to do in v4, or within the limits.
        let mut v4 = Manifest::new(ManifestVersion::V4);
        v4.append("a", vec![], 1).unwrap();
        assert!(v4.checkpoint(&small_policy(), 1, name).unwrap().is_empty());
        let bad = CheckpointPolicy {
            fanout: 1,
            ..small_policy()
        };
        assert!(m.checkpoint(&bad, 10, name).is_err());
        // History has no v4 form.
        assert_eq!(
            m.set_format_version(ManifestVersion::V4)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidInput
        );
    }

    #[test]
    fn truncation_drops_whole_pages_and_then_moves_exactly() {
        let mut m = Manifest::new(ManifestVersion::V5);
        let mut pages = HashMap::new();
        grow(&mut m, 100, &mut pages);
        let end = m.recent_from();
        assert!(end > 80);
        let before = m.history().unwrap().entries();
        // Through 9: the frontier's oldest page (levels of 3 x 4 entries:
        // 0..36) straddles it and stays whole; nothing is dropped yet.
        assert_eq!(m.truncate_through(9), 0);
        let h = m.history().unwrap();
        assert_eq!(h.live_from, 0, "conservative: the straddling page's start");
        // Through 40: the pages ending by then go.
        let dropped = m.truncate_through(39);
        let h = m.history().unwrap();
        assert_eq!(h.live_from, h.first_seq().unwrap());
        assert!(h.live_from > 0 && dropped > 0);
        assert_eq!(dropped as u64, before - h.entries());
        let first_page = h.first_seq().unwrap();
        m.set_live_from(first_page + 1).unwrap();
        assert_eq!(m.first_sequence(), first_page + 1);
        assert!(m.set_live_from(first_page).is_err(), "never backwards");
        assert!(m.set_live_from(end + 100).is_err());
        let copy = Manifest::from_bytes(&m.to_bytes().unwrap()).unwrap();
        assert_eq!(copy.first_sequence(), first_page + 1);
        // Past the whole history: no pages left, entry-exact as in v4.
        m.truncate_through(end);
        assert!(m.history().is_none());
        assert_eq!(m.first_sequence(), end + 1);
        assert_eq!(Manifest::from_bytes(&m.to_bytes().unwrap()).unwrap(), m);
    }
}
