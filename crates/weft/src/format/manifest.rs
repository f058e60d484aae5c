//! Manifest objects, versions 1 to 5: the list of committed segments, an
//! optional snapshot pointer, and a footer with the epoch and next sequence;
//! v5 adds the frontier of the history tree that holds older entries (see
//! [`super::history`]), so the object stays small however long the log.
//!
//! ```text
//! +---------+---------+-----+---------+---------------+----------------+--------+
//! | entry 0 | entry 1 | ... | entry n | history block | snapshot block | footer |
//! +---------+---------+-----+---------+---------------+----------------+--------+
//!                                       (v5)            (v2 and later)
//!
//! entry:      [body_len u32][sequence u64]([count u32] v3/v4)[loc_len u16][loc utf8][md_count u32]
//!             then md_count x [start_index u32][ingestion_ms i64][payload_len u32][payload]
//!             body_len counts every byte after itself.
//! snapshot:   [loc bytes][loc_len u16][through_seq u64][created_ms i64]      (18 + loc_len bytes)
//! footer v1-v3 (22 B): entries_count u32 | next_sequence u64 | epoch u64 | version u16
//! footer v4, v5 (26 B): entries_count u32 | next_sequence u64 | epoch u64 | crc32c u32 | version u16
//!                      crc32c covers every byte before the crc field.
//! history (v5): [live_from u64][level_count u8] then per level [count u16][pointers]
//! ```
//!
//! v5 is weft's own layout (the seed's releases stop at v4): v4's entries
//! and footer, plus the history block between the entries and the snapshot
//! block. Its entries are the manifest's *recent* entries; the older ones
//! live in immutable history pages the block names. A v5 manifest with no
//! pages writes an empty block (`level_count = 0`, `live_from` = the first
//! entry's sequence).
//!
//! # Sequence numbering
//!
//! * **v1 and v2** number *segments*: an entry's `sequence` is its own
//!   ordinal, one sequence per segment however many records it holds, and
//!   `next_sequence` is the ordinal the next segment will get. This is what
//!   upstream opendata-buffer writes.
//! * **v3 to v5** number *records*: an entry with `count = n > 0` owns the
//!   record sequences `[sequence, sequence + n)` and `next_sequence` is the
//!   sequence of the next record. An entry with `count = 0` is a legacy
//!   whole-segment entry carried over from a v1/v2 manifest (the seed
//!   project's newer releases upgrade old manifests in place that way): it
//!   occupies the single sequence `sequence`, and its records' own
//!   sequences are not known.
//!
//! Either way an entry occupies [`ManifestEntry::slots`] sequences, entries
//! are in strictly increasing sequence order and never overlap, and every
//! entry ends at or before `next_sequence`. Gaps between entries are
//! allowed (nothing writes them today, but nothing breaks on them either).
//!
//! # Finding the snapshot block
//!
//! The footer is read from the end; then `entries_count` entries are parsed
//! from the front, each delimited by its `body_len`. Whatever lies between
//! the end of the last entry and the footer is the snapshot region:
//!
//! * v1: the region must be empty.
//! * v2 to v4: the region is either empty (no snapshot block at all) or
//!   exactly one snapshot block, whose `loc_len`, read 18 bytes before the
//!   footer, must make the block fill the region exactly. A block with an
//!   empty location means "no snapshot"; its `through_seq` and `created_ms`
//!   must then be zero.
//!
//! weft always writes the block in v2 to v4 (all zeros when there is no
//! snapshot), because the seed's readers locate it from the end and expect
//! it to be there. Reading both ways makes forward and backward parsing agree
//! on every object weft accepts.

use std::ops::Range;

use bytes::{BufMut, Bytes, BytesMut};

use super::fields::{Reader, split_tail};
use super::history_block::{History, check_history, decode_history_block, encode_history_block};
use crate::error::{Error, ErrorKind, Result};

/// Footer length of manifest versions 1 to 3.
pub const MANIFEST_FOOTER_LEN: usize = 4 + 8 + 8 + 2;
/// Footer length of manifest versions 4 and 5.
pub const MANIFEST_V4_FOOTER_LEN: usize = 4 + 8 + 8 + 4 + 2;
/// Length of a snapshot block without its location bytes.
pub const SNAPSHOT_BLOCK_FIXED_LEN: usize = 2 + 8 + 8;

const WHAT: &str = "manifest";
/// Smallest possible metadata item: start_index, ingestion_ms, payload_len.
const METADATA_FIXED_LEN: usize = 4 + 8 + 4;

/// Which manifest layout an object uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum ManifestVersion {
    /// Upstream opendata-buffer: segment-numbered entries, no snapshot block.
    V1,
    /// The seed's log: v1 plus a snapshot block.
    V2,
    /// Record-numbered entries (`count` field) and a snapshot block.
    V3,
    /// v3 plus a CRC-32C in the footer.
    V4,
    /// weft's own: v4 plus the history block, so older entries live in
    /// immutable pages and the manifest stays bounded.
    #[default]
    V5,
}

impl ManifestVersion {
    /// Every version, oldest first.
    pub const ALL: [ManifestVersion; 5] = [
        ManifestVersion::V1,
        ManifestVersion::V2,
        ManifestVersion::V3,
        ManifestVersion::V4,
        ManifestVersion::V5,
    ];

    /// The version number stored in the footer.
    pub fn as_u16(self) -> u16 {
        match self {
            ManifestVersion::V1 => 1,
            ManifestVersion::V2 => 2,
            ManifestVersion::V3 => 3,
            ManifestVersion::V4 => 4,
            ManifestVersion::V5 => 5,
        }
    }

    /// The version with footer number `v`, if weft knows it.
    pub fn from_u16(v: u16) -> Option<Self> {
        match v {
            1 => Some(ManifestVersion::V1),
            2 => Some(ManifestVersion::V2),
            3 => Some(ManifestVersion::V3),
            4 => Some(ManifestVersion::V4),
            5 => Some(ManifestVersion::V5),
            _ => None,
        }
    }

    /// True when entries carry a record `count` (v3 to v5): sequences
    /// number records rather than segments.
    pub fn has_record_counts(self) -> bool {
        matches!(
            self,
            ManifestVersion::V3 | ManifestVersion::V4 | ManifestVersion::V5
        )
    }

    /// True when the layout has room for a snapshot pointer (v2 and later).
    pub fn has_snapshot_block(self) -> bool {
        self != ManifestVersion::V1
    }

    /// True when the footer carries a checksum (v4, v5).
    pub fn has_checksum(self) -> bool {
        matches!(self, ManifestVersion::V4 | ManifestVersion::V5)
    }

    /// True when the layout has a history block (v5): older entries may
    /// live in history pages.
    pub fn has_history(self) -> bool {
        self == ManifestVersion::V5
    }

    /// Length of this version's footer in bytes.
    pub fn footer_len(self) -> usize {
        if self.has_checksum() {
            MANIFEST_V4_FOOTER_LEN
        } else {
            MANIFEST_FOOTER_LEN
        }
    }

    pub(crate) fn min_entry_len(self) -> usize {
        let count = if self.has_record_counts() { 4 } else { 0 };
        4 + 8 + count + 2 + 4
    }
}

/// One metadata item of an entry: a caller payload tagged to the run of
/// records starting at `start_index` within the entry's segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Metadata {
    /// Index, within the segment, of the first record this item describes.
    pub start_index: u32,
    /// When the records were ingested, in milliseconds since the Unix epoch.
    pub ingestion_ms: i64,
    /// The caller's opaque payload.
    pub payload: Bytes,
}

/// One committed segment as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ManifestEntry {
    /// v1/v2: the entry's ordinal. v3/v4: the sequence of its first record
    /// (or, when `count` is `Some(0)`, the single legacy slot it occupies).
    pub sequence: u64,
    /// v3/v4: the number of records the entry owns (`Some(0)` for a legacy
    /// whole-segment entry). v1/v2: `None`.
    pub count: Option<u32>,
    /// Object path of the segment.
    pub location: String,
    /// Metadata items, in `start_index` order.
    pub metadata: Vec<Metadata>,
}

impl ManifestEntry {
    /// How many sequences the entry occupies: its record count for a
    /// record-numbered entry, otherwise 1.
    pub fn slots(&self) -> u64 {
        match self.count {
            Some(n) if n > 0 => u64::from(n),
            _ => 1,
        }
    }

    /// One past the last sequence the entry occupies (saturating, so it is
    /// total even on an entry no manifest would accept).
    pub fn end_sequence(&self) -> u64 {
        self.sequence.saturating_add(self.slots())
    }

    /// True when `seq` falls within the sequences the entry occupies.
    pub fn contains(&self, seq: u64) -> bool {
        seq >= self.sequence && seq < self.end_sequence()
    }

    /// The record-level sequences the entry's records carry, where the
    /// manifest knows them: `Some(sequence..sequence+count)` for a v3/v4
    /// entry with `count > 0`; `None` for v1/v2 and legacy entries, whose
    /// records all share the entry's one sequence.
    pub fn record_range(&self) -> Option<Range<u64>> {
        match self.count {
            Some(n) if n > 0 => Some(self.sequence..self.sequence.saturating_add(u64::from(n))),
            _ => None,
        }
    }

    /// Encoded length of this entry, including its `body_len` field.
    pub fn encoded_len(&self, version: ManifestVersion) -> usize {
        let md: usize = self
            .metadata
            .iter()
            .map(|m| METADATA_FIXED_LEN.saturating_add(m.payload.len()))
            .fold(0, usize::saturating_add);
        version
            .min_entry_len()
            .saturating_add(self.location.len())
            .saturating_add(md)
    }
}

/// A snapshot a replica can bootstrap from instead of replaying from zero.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SnapshotPointer {
    /// Object path of the snapshot (never empty).
    pub location: String,
    /// The last sequence the snapshot includes.
    pub through_seq: u64,
    /// When the snapshot was taken, in milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// The fixed fields at the end of a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestFooter {
    /// Layout of the object.
    pub version: ManifestVersion,
    /// Number of entries.
    pub entries_count: u32,
    /// v1/v2: the next entry ordinal. v3/v4: the next record sequence.
    pub next_sequence: u64,
    /// The fencing epoch.
    pub epoch: u64,
}

/// A whole decoded manifest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ManifestData {
    /// Layout of the object.
    pub version: ManifestVersion,
    /// The fencing epoch.
    pub epoch: u64,
    /// v1/v2: the next entry ordinal. v3/v4: the next record sequence.
    pub next_sequence: u64,
    /// Live entries, in sequence order.
    pub entries: Vec<ManifestEntry>,
    /// The latest snapshot pointer, if any (always `None` in v1).
    pub snapshot: Option<SnapshotPointer>,
    /// v5: the history pages holding entries older than `entries`, when
    /// there are any; always `None` in v1 to v4.
    pub history: Option<History>,
}

impl ManifestData {
    /// An empty manifest of `version` at epoch 0.
    pub fn empty(version: ManifestVersion) -> Self {
        ManifestData {
            version,
            epoch: 0,
            next_sequence: 0,
            entries: Vec::new(),
            snapshot: None,
            history: None,
        }
    }

    /// The first live sequence: the history's `live_from` when there are
    /// pages, else the first entry's sequence, else `next_sequence`.
    pub fn first_sequence(&self) -> u64 {
        match &self.history {
            Some(h) => h.live_from,
            None => self
                .entries
                .first()
                .map_or(self.next_sequence, |e| e.sequence),
        }
    }

    /// Where the manifest's own entries begin: the end of the history, or
    /// the first live sequence when there is none.
    pub fn recent_from(&self) -> u64 {
        self.history
            .as_ref()
            .and_then(History::end_seq)
            .unwrap_or_else(|| self.first_sequence())
    }
}

/// Read and check a manifest's footer (and, for v4, its checksum) without
/// parsing the entries.
///
/// Errors: [`ErrorKind::Corrupt`] for a short object, an unknown version or
/// a checksum mismatch.
pub fn read_manifest_footer(bytes: &[u8]) -> Result<ManifestFooter> {
    let (_, version_bytes) = split_tail(bytes, 2, WHAT, "version field")?;
    let raw = u16::from_le_bytes([version_bytes[0], version_bytes[1]]);
    let version = ManifestVersion::from_u16(raw)
        .ok_or_else(|| Error::corrupt(format!("manifest: unknown version {raw}")))?;
    let (_, footer) = split_tail(bytes, version.footer_len(), WHAT, "footer")?;
    let mut f = Reader::new(footer, WHAT);
    let entries_count = f.u32("entries count")?;
    let next_sequence = f.u64("next sequence")?;
    let epoch = f.u64("epoch")?;
    if version.has_checksum() {
        let stored = f.u32("crc32c")?;
        let actual = crc32c::crc32c(&bytes[..bytes.len() - 6]);
        if stored != actual {
            return Err(Error::corrupt(format!(
                "manifest: crc32c mismatch: stored {stored:08x}, computed {actual:08x}"
            )));
        }
    }
    Ok(ManifestFooter {
        version,
        entries_count,
        next_sequence,
        epoch,
    })
}

/// Decode a manifest object of any version.
///
/// Errors: [`ErrorKind::Corrupt`] when the object is truncated, has an
/// unknown version or a bad checksum, an entry whose `body_len` disagrees
/// with its contents, a location that is not UTF-8, fewer entries than the
/// footer counts, stray bytes or a malformed snapshot block before the
/// footer, entries out of sequence order or overlapping, an entry reaching
/// past `next_sequence` or overflowing `u64`, or metadata out of order or
/// beyond the entry's record count.
pub fn decode_manifest(bytes: &[u8]) -> Result<ManifestData> {
    let footer = read_manifest_footer(bytes)?;
    let version = footer.version;
    let body = &bytes[..bytes.len() - version.footer_len()];
    let mut c = Reader::new(body, WHAT);

    let count = footer.entries_count as usize;
    if count > body.len() / version.min_entry_len() {
        return Err(Error::corrupt(format!(
            "manifest: footer counts {count} entries but only {} bytes precede it",
            body.len()
        )));
    }
    let mut entries = Vec::with_capacity(count);
    for i in 0..count {
        let entry = decode_entry(&mut c, version).map_err(|e| e.context(format!("entry {i}")))?;
        entries.push(entry);
    }
    let history = if version.has_history() {
        let h = decode_history_block(&mut c)?;
        if h.levels.is_empty() {
            if h.live_from != 0 {
                return Err(Error::corrupt(
                    "manifest: a history block without pages has a non-zero live_from",
                ));
            }
            None
        } else {
            Some(h)
        }
    } else {
        None
    };
    let snapshot = decode_snapshot_region(c.rest(), version)?;
    check_entries(version, &entries, footer.next_sequence)
        .map_err(|msg| Error::corrupt(format!("manifest: {msg}")))?;
    if let Some(h) = &history {
        check_history(h, entries.first().map(|e| e.sequence), footer.next_sequence)
            .map_err(|msg| Error::corrupt(format!("manifest: {msg}")))?;
    }
    Ok(ManifestData {
        version,
        epoch: footer.epoch,
        next_sequence: footer.next_sequence,
        entries,
        snapshot,
        history,
    })
}

/// Reads one entry in `version`'s layout (for history pages).
pub(crate) fn decode_entry_in(
    c: &mut Reader<'_>,
    version: ManifestVersion,
) -> Result<ManifestEntry> {
    decode_entry(c, version)
}

fn decode_entry(c: &mut Reader<'_>, version: ManifestVersion) -> Result<ManifestEntry> {
    let body_len = c.u32("entry body length")? as usize;
    let body = c.take(body_len, "entry body")?;
    let mut b = Reader::new(body, "manifest entry");
    let sequence = b.u64("sequence")?;
    let count = if version.has_record_counts() {
        Some(b.u32("record count")?)
    } else {
        None
    };
    let loc_len = b.u16("location length")? as usize;
    let location = utf8(b.take(loc_len, "location")?, "entry location")?;
    let md_count = b.u32("metadata count")? as usize;
    if md_count > b.remaining() / METADATA_FIXED_LEN {
        return Err(Error::corrupt(format!(
            "manifest: entry claims {md_count} metadata items in {} bytes",
            b.remaining()
        )));
    }
    let mut metadata = Vec::with_capacity(md_count);
    for _ in 0..md_count {
        let start_index = b.u32("metadata start index")?;
        let ingestion_ms = b.i64("metadata ingestion time")?;
        let payload_len = b.u32("metadata payload length")? as usize;
        let payload = Bytes::copy_from_slice(b.take(payload_len, "metadata payload")?);
        metadata.push(Metadata {
            start_index,
            ingestion_ms,
            payload,
        });
    }
    if b.remaining() != 0 {
        return Err(Error::corrupt(format!(
            "manifest: entry body_len {body_len} leaves {} bytes unparsed",
            b.remaining()
        )));
    }
    Ok(ManifestEntry {
        sequence,
        count,
        location,
        metadata,
    })
}

fn decode_snapshot_region(
    region: &[u8],
    version: ManifestVersion,
) -> Result<Option<SnapshotPointer>> {
    if region.is_empty() {
        return Ok(None);
    }
    if !version.has_snapshot_block() {
        return Err(Error::corrupt(format!(
            "manifest: {} stray bytes between the last entry and the v1 footer",
            region.len()
        )));
    }
    let (loc_region, fixed) = split_tail(region, SNAPSHOT_BLOCK_FIXED_LEN, WHAT, "snapshot block")?;
    let mut f = Reader::new(fixed, WHAT);
    let loc_len = f.u16("snapshot location length")? as usize;
    let through_seq = f.u64("snapshot through_seq")?;
    let created_ms = f.i64("snapshot created_ms")?;
    if loc_region.len() != loc_len {
        return Err(Error::corrupt(format!(
            "manifest: snapshot location is {loc_len} bytes but {} bytes lie before it",
            loc_region.len()
        )));
    }
    if loc_len == 0 {
        if through_seq != 0 || created_ms != 0 {
            return Err(Error::corrupt(
                "manifest: snapshot block has no location but non-zero fields",
            ));
        }
        return Ok(None);
    }
    Ok(Some(SnapshotPointer {
        location: utf8(loc_region, "snapshot location")?,
        through_seq,
        created_ms,
    }))
}

fn utf8(bytes: &[u8], field: &str) -> Result<String> {
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|e| Error::corrupt(format!("manifest: {field} is not UTF-8")).with_source(e))
}

/// The ordering and counting rules every manifest obeys, shared by the
/// decoder (violations are Corrupt) and the encoders (InvalidInput).
pub(crate) fn check_entries(
    version: ManifestVersion,
    entries: &[ManifestEntry],
    next_sequence: u64,
) -> std::result::Result<(), String> {
    let mut prev_end: Option<u64> = None;
    for (i, e) in entries.iter().enumerate() {
        check_entry_shape(version, e).map_err(|m| format!("entry {i}: {m}"))?;
        let end = e.sequence.checked_add(e.slots()).ok_or_else(|| {
            format!(
                "entry {i}: sequence {} + {} overflows u64",
                e.sequence,
                e.slots()
            )
        })?;
        if let Some(prev_end) = prev_end
            && e.sequence < prev_end
        {
            return Err(format!(
                "entry {i}: sequence {} is not after the previous entry, which ends at {prev_end}",
                e.sequence
            ));
        }
        prev_end = Some(end);
    }
    if let Some(end) = prev_end
        && end > next_sequence
    {
        return Err(format!(
            "the last entry ends at {end}, beyond next_sequence {next_sequence}"
        ));
    }
    Ok(())
}

/// Rules on one entry alone: count presence matches the version, metadata
/// is in order and inside the segment.
fn check_entry_shape(
    version: ManifestVersion,
    e: &ManifestEntry,
) -> std::result::Result<(), String> {
    match (version.has_record_counts(), e.count) {
        (true, None) => {
            return Err(format!(
                "a v{} entry needs a record count",
                version.as_u16()
            ));
        }
        (false, Some(_)) => {
            return Err(format!(
                "a v{} entry cannot carry a record count",
                version.as_u16()
            ));
        }
        _ => {}
    }
    let mut prev = 0u32;
    for m in &e.metadata {
        if m.start_index < prev {
            return Err(format!(
                "metadata start_index {} comes after {prev}",
                m.start_index
            ));
        }
        if let Some(n) = e.count
            && n > 0
            && m.start_index > n
        {
            return Err(format!(
                "metadata start_index {} is beyond the entry's {n} records",
                m.start_index
            ));
        }
        prev = m.start_index;
    }
    Ok(())
}

/// Append one entry in `version`'s layout to `out`.
///
/// Nothing is written when an error is returned. Checks the entry's own
/// shape (field sizes, count presence, metadata order), not its place among
/// other entries.
///
/// Errors: [`ErrorKind::InvalidInput`] for a location over `u16::MAX` bytes,
/// more than `u32::MAX` metadata items, a payload or body over `u32::MAX`
/// bytes, a `count` that does not match the version, or metadata out of
/// order.
pub fn encode_entry(
    entry: &ManifestEntry,
    version: ManifestVersion,
    out: &mut BytesMut,
) -> Result<()> {
    check_entry_shape(version, entry).map_err(Error::invalid_input)?;
    let loc_len = u16::try_from(entry.location.len()).map_err(|_| {
        Error::invalid_input(format!(
            "segment location of {} bytes exceeds the u16 length field",
            entry.location.len()
        ))
    })?;
    let md_count = u32::try_from(entry.metadata.len())
        .map_err(|_| Error::invalid_input("an entry holds at most u32::MAX metadata items"))?;
    for m in &entry.metadata {
        if u32::try_from(m.payload.len()).is_err() {
            return Err(Error::invalid_input(format!(
                "metadata payload of {} bytes exceeds the u32 length field",
                m.payload.len()
            )));
        }
    }
    let total = entry.encoded_len(version);
    let body_len = u32::try_from(total - 4).map_err(|_| {
        Error::invalid_input(format!(
            "manifest entry body of {} bytes exceeds u32",
            total - 4
        ))
    })?;
    out.reserve(total);
    out.put_u32_le(body_len);
    out.put_u64_le(entry.sequence);
    if let Some(count) = entry.count {
        out.put_u32_le(count);
    }
    out.put_u16_le(loc_len);
    out.put_slice(entry.location.as_bytes());
    out.put_u32_le(md_count);
    for m in &entry.metadata {
        out.put_u32_le(m.start_index);
        out.put_i64_le(m.ingestion_ms);
        out.put_u32_le(m.payload.len() as u32);
        out.put_slice(&m.payload);
    }
    Ok(())
}

/// Check that `snapshot` can be written in `version`.
///
/// Errors: [`ErrorKind::InvalidInput`] for a snapshot in v1, an empty
/// location (reserved for "no snapshot"), or a location over `u16::MAX`
/// bytes.
pub fn check_snapshot(snapshot: Option<&SnapshotPointer>, version: ManifestVersion) -> Result<()> {
    let Some(s) = snapshot else { return Ok(()) };
    if !version.has_snapshot_block() {
        return Err(Error::invalid_input(
            "a v1 manifest has no room for a snapshot pointer",
        ));
    }
    if s.location.is_empty() {
        return Err(Error::invalid_input(
            "a snapshot location must not be empty",
        ));
    }
    if s.location.len() > usize::from(u16::MAX) {
        return Err(Error::invalid_input(format!(
            "snapshot location of {} bytes exceeds the u16 length field",
            s.location.len()
        )));
    }
    Ok(())
}

/// Finish a manifest without history pages: append the history block
/// (v5, empty), the snapshot block (v2 and later; zeros when `snapshot` is
/// `None`) and the footer to `out`, which must already hold exactly the
/// encoded entries and nothing else (the v4/v5 checksum covers all of
/// `out`).
///
/// Nothing is written when an error is returned.
///
/// Errors: [`ErrorKind::InvalidInput`] as for [`check_snapshot`].
pub fn encode_trailer(
    snapshot: Option<&SnapshotPointer>,
    footer: &ManifestFooter,
    out: &mut BytesMut,
) -> Result<()> {
    encode_trailer_with_history(None, snapshot, footer, out)
}

/// [`encode_trailer`] for a manifest whose older entries live in history
/// pages (`history`, v5 only).
///
/// Nothing is written when an error is returned.
///
/// Errors: [`ErrorKind::InvalidInput`] as for [`check_snapshot`], for a
/// history in a version without a history block, or one whose fields do
/// not fit their length fields.
pub fn encode_trailer_with_history(
    history: Option<&History>,
    snapshot: Option<&SnapshotPointer>,
    footer: &ManifestFooter,
    out: &mut BytesMut,
) -> Result<()> {
    let version = footer.version;
    check_snapshot(snapshot, version)?;
    if history.is_some() && !version.has_history() {
        return Err(Error::invalid_input(format!(
            "a v{} manifest has no history block",
            version.as_u16()
        )));
    }
    let mut tail = BytesMut::with_capacity(trailer_len_with_history(history, snapshot, version));
    if version.has_history() {
        let empty = History::default();
        encode_history_block(history.unwrap_or(&empty), &mut tail)?;
    }
    if version.has_snapshot_block() {
        match snapshot {
            Some(s) => {
                tail.put_slice(s.location.as_bytes());
                tail.put_u16_le(s.location.len() as u16);
                tail.put_u64_le(s.through_seq);
                tail.put_i64_le(s.created_ms);
            }
            None => tail.put_bytes(0, SNAPSHOT_BLOCK_FIXED_LEN),
        }
    }
    tail.put_u32_le(footer.entries_count);
    tail.put_u64_le(footer.next_sequence);
    tail.put_u64_le(footer.epoch);
    out.reserve(tail.len() + 6);
    out.put_slice(&tail);
    if version.has_checksum() {
        let crc = crc32c::crc32c(out);
        out.put_u32_le(crc);
    }
    out.put_u16_le(version.as_u16());
    Ok(())
}

/// Length of the history block, snapshot block and footer that
/// [`encode_trailer`] writes.
pub fn trailer_len(snapshot: Option<&SnapshotPointer>, version: ManifestVersion) -> usize {
    trailer_len_with_history(None, snapshot, version)
}

/// Length of what [`encode_trailer_with_history`] writes.
pub fn trailer_len_with_history(
    history: Option<&History>,
    snapshot: Option<&SnapshotPointer>,
    version: ManifestVersion,
) -> usize {
    let history = if version.has_history() {
        history.map_or(History::default().encoded_len(), History::encoded_len)
    } else {
        0
    };
    let block = if version.has_snapshot_block() {
        SNAPSHOT_BLOCK_FIXED_LEN + snapshot.map_or(0, |s| s.location.len())
    } else {
        0
    };
    history + block + version.footer_len()
}

/// Checks `data`'s history against its version and entries.
fn check_data_history(data: &ManifestData) -> std::result::Result<(), String> {
    match &data.history {
        None => Ok(()),
        Some(_) if !data.version.has_history() => Err(format!(
            "a v{} manifest has no history block",
            data.version.as_u16()
        )),
        Some(h) => check_history(
            h,
            data.entries.first().map(|e| e.sequence),
            data.next_sequence,
        ),
    }
}

/// Encode a whole manifest.
///
/// Errors: [`ErrorKind::InvalidInput`] for anything [`decode_manifest`] would
/// call corrupt (entries out of order, overlapping, past `next_sequence`,
/// count presence not matching the version, a history that breaks its
/// rules or in a version without one), for a snapshot the version cannot
/// hold, for field sizes over their length fields, and for more than
/// `u32::MAX` entries.
pub fn encode_manifest(data: &ManifestData) -> Result<Bytes> {
    let version = data.version;
    check_entries(version, &data.entries, data.next_sequence)
        .map_err(|m| Error::new(ErrorKind::InvalidInput, format!("manifest: {m}")))?;
    check_data_history(data).map_err(|m| Error::invalid_input(format!("manifest: {m}")))?;
    check_snapshot(data.snapshot.as_ref(), version)?;
    let entries_count = u32::try_from(data.entries.len())
        .map_err(|_| Error::invalid_input("a manifest holds at most u32::MAX entries"))?;
    let len = data.entries.iter().map(|e| e.encoded_len(version)).fold(
        trailer_len_with_history(data.history.as_ref(), data.snapshot.as_ref(), version),
        usize::saturating_add,
    );
    let mut out = BytesMut::with_capacity(len);
    for e in &data.entries {
        encode_entry(e, version, &mut out)?;
    }
    encode_trailer_with_history(
        data.history.as_ref(),
        data.snapshot.as_ref(),
        &ManifestFooter {
            version,
            entries_count,
            next_sequence: data.next_sequence,
            epoch: data.epoch,
        },
        &mut out,
    )?;
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sequence: u64, count: Option<u32>) -> ManifestEntry {
        ManifestEntry {
            sequence,
            count,
            location: format!("seg/{sequence}"),
            metadata: vec![],
        }
    }

    #[test]
    fn legacy_count_zero_occupies_one_slot() {
        let e = entry(5, Some(0));
        assert_eq!(e.slots(), 1);
        assert_eq!(e.record_range(), None);
        assert_eq!(entry(5, Some(3)).record_range(), Some(5..8));
        assert_eq!(entry(5, None).record_range(), None);
    }

    #[test]
    fn empty_snapshot_block_with_fields_is_corrupt() {
        let data = ManifestData::empty(ManifestVersion::V2);
        let mut bytes = encode_manifest(&data).unwrap().to_vec();
        // through_seq sits 2 bytes into the 18-byte block at the start.
        bytes[2] = 1;
        let err = decode_manifest(&bytes).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
    }

    #[test]
    fn encode_refuses_what_decode_would_reject() {
        let mut data = ManifestData::empty(ManifestVersion::V3);
        data.next_sequence = 10;
        data.entries = vec![entry(4, Some(3)), entry(6, Some(1))];
        assert_eq!(
            encode_manifest(&data).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        data.entries = vec![entry(4, None)];
        assert_eq!(
            encode_manifest(&data).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        data.entries = vec![entry(8, Some(3))];
        assert_eq!(
            encode_manifest(&data).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );
        data.entries = vec![entry(7, Some(3))];
        assert!(encode_manifest(&data).is_ok());
    }

    #[test]
    fn long_location_is_invalid_input_and_writes_nothing() {
        let mut e = entry(0, None);
        e.location = "x".repeat(usize::from(u16::MAX) + 1);
        let mut out = BytesMut::new();
        let err = encode_entry(&e, ManifestVersion::V1, &mut out).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        assert!(out.is_empty());
    }
}
