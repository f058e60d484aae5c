//! The entry frame: how one [`LogEntry`] is laid out on local disk.
//!
//! The `dir` storage backend writes its segment files as a sequence of
//! frames, one per entry. A frame is self-checking (its CRC-32C covers every
//! byte but the checksum itself) and self-delimiting (it starts with its own
//! length), so a reader can walk a segment and stop exactly where the valid
//! bytes end. This module is pure: it encodes into and decodes from byte
//! slices and never touches a file.
//!
//! ## Layout (all integers little-endian)
//!
//! ```text
//!  offset  size  field
//!  ------  ----  -----------------------------------------------------------
//!       0     4  body_len      bytes after the 8-byte prefix (offset 8 onward)
//!       4     4  crc32c        CRC-32C of bytes [0, 4) followed by [8, 8 + body_len)
//!       8     8  seqnum        global position of the entry
//!      16     8  version       the entry's version in its primary tag's stream
//!      24     8  timestamp_ms  when the storage accepted the entry
//!      32     4  group_offset  position of the entry in its write group
//!      36     1  flags         bit 0: BATCH_END (last entry of an atomic batch);
//!                              bit 1: APPEND_ID (the append id field follows
//!                              the tags); bit 2: ERASED (the payload was
//!                              erased: the data bytes are zeros and the
//!                              entry reads with an empty payload); other bits
//!                              are reserved and must be 0
//!      37     1  tag_count     1..=64; the first tag is the primary tag
//!      38     …  tags          tag_count times:
//!                                [ns_len u16][namespace utf-8]
//!                                [key_len u16][key utf-8]   (key_len 0: no key)
//!       …     …  append id     only with APPEND_ID: [id_len u8][id utf-8],
//!                              id_len 1..=255, no control characters
//!       …     …  data          the payload: every remaining body byte
//!
//!  ┌──────────┬────────┬────────┬─────────┬───────────┬─────────┬───────┬─────────┬──────┬─────┬──────┐
//!  │ body_len │ crc32c │ seqnum │ version │ timestamp │ grp_off │ flags │ tag_cnt │ tags │ id? │ data │
//!  │   u32    │  u32   │  u64   │   u64   │    u64    │   u32   │  u8   │   u8    │  …   │  …  │  …   │
//!  └──────────┴────────┴────────┴─────────┴───────────┴─────────┴───────┴─────────┴──────┴─────┴──────┘
//!  |<--- prefix 8 B --->|<--------------------------- body: body_len bytes ------------------------->|
//! ```
//!
//! The length is covered by the checksum, so a damaged length field is
//! caught like any other damaged byte. `group_offset` ties the entry to the
//! write (one `write` + one sync) that carried it: the group's first seqnum
//! is `seqnum - group_offset`. Recovery uses it to tell a torn last write
//! from damage to data that was already synced (see the `dir` backend).
//! `BATCH_END` marks where an atomic append batch ends, so recovery never
//! keeps half a batch.
//!
//! ## Versions
//!
//! The frame has no version field of its own: a flag bit says which
//! optional fields are present, and a decoder refuses flag bits it does not
//! know. Frames written before append ids existed (call them v1) never set
//! `APPEND_ID` and decode as entries without an id; a frame with an id
//! (v2) is refused by an older decoder as malformed instead of being
//! misread. The append id is in the frame, not in an index, so the log
//! itself is the durable record of which ids it holds: whatever index a
//! backend keeps of them is rebuilt from the frames. The `dir` backend
//! additionally marks segments that may hold v2 frames with segment format
//! version 2 ([`super::dir_segment`]), so an older build refuses such a
//! segment by its header rather than mistaking an id frame in the last
//! write for a torn tail.
//!
//! An *erased* frame (v3, [`erase_in_place`]) is a frame whose payload a
//! hard delete removed: the same length, the same header, tags and id, the
//! `ERASED` flag set and every data byte zero, so an erased frame takes the
//! place of the original byte for byte and whatever points into a segment
//! (offsets, record lengths, counts) stays true. An older decoder refuses
//! it as malformed.

use std::fmt;

use crate::error::Error;
use crate::model::{LogEntry, LogTag, MAX_TAGS_PER_ENTRY};

/// Bytes before the body: `body_len` and `crc32c`.
pub const PREFIX_LEN: usize = 8;

/// Bytes of the fixed part of a frame: the prefix plus every field up to and
/// including `tag_count`.
pub const FIXED_LEN: usize = 38;

/// The smallest possible frame: fixed part, one tag with one-byte namespace
/// and no key, empty payload.
pub const MIN_FRAME_LEN: usize = FIXED_LEN + 2 + 1 + 2;

/// Flag bit: this entry is the last of its atomic append batch.
pub const FLAG_BATCH_END: u8 = 1;

/// Flag bit: the frame carries an append id after its tags.
pub const FLAG_APPEND_ID: u8 = 2;

/// Flag bit: the payload was erased; the data bytes are zeros.
pub const FLAG_ERASED: u8 = 4;

const KNOWN_FLAGS: u8 = FLAG_BATCH_END | FLAG_APPEND_ID | FLAG_ERASED;

/// The offset of the flags byte in a frame.
const FLAGS_AT: usize = 36;

/// The longest append id a frame can hold, in bytes (its length is a `u8`).
pub const MAX_FRAME_APPEND_ID: usize = u8::MAX as usize;

/// Why bytes are not a valid frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The buffer ends before the frame does; `needed` is the frame's total
    /// length when it is known from the prefix, or the prefix length.
    Incomplete {
        /// Bytes the frame needs in total.
        needed: usize,
    },
    /// The length field claims a body shorter than a frame's fixed
    /// fields: damaged (or never written, zeroed) bytes.
    BadLength {
        /// The body length the field claims.
        body_len: u32,
    },
    /// The stored checksum does not match the bytes.
    Checksum {
        /// The checksum in the frame.
        stored: u32,
        /// The checksum of the bytes as read.
        computed: u32,
    },
    /// The checksum matches but a field is invalid (reserved flag set, tag
    /// malformed, lengths inconsistent).
    Malformed(String),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Incomplete { needed } => {
                write!(f, "frame incomplete: needs {needed} bytes")
            }
            FrameError::BadLength { body_len } => write!(
                f,
                "frame length field claims a {body_len}-byte body, fewer than the {} bytes \
                 of fixed fields every frame has",
                FIXED_LEN - PREFIX_LEN
            ),
            FrameError::Checksum { stored, computed } => write!(
                f,
                "frame checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"
            ),
            FrameError::Malformed(why) => write!(f, "malformed frame: {why}"),
        }
    }
}

impl std::error::Error for FrameError {}

impl From<FrameError> for Error {
    fn from(err: FrameError) -> Self {
        Error::corrupt(err.to_string())
    }
}

/// The fixed fields of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameMeta {
    /// Global position of the entry.
    pub seqnum: u64,
    /// Version in the primary tag's stream.
    pub stream_version: u64,
    /// Storage timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// Position of the entry within its write group.
    pub group_offset: u32,
    /// True for the last entry of an atomic append batch.
    pub batch_end: bool,
    /// True when a hard delete erased the payload (it reads as empty).
    pub erased: bool,
}

impl FrameMeta {
    /// The seqnum of the first entry of this entry's write group.
    pub fn group_first(&self) -> u64 {
        self.seqnum - u64::from(self.group_offset)
    }
}

/// A frame decoded in place: fixed fields, tags, and the payload as a slice
/// of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameRef<'a> {
    /// The fixed fields.
    pub meta: FrameMeta,
    /// The tags, primary first.
    pub tags: Vec<LogTag>,
    /// The raw encoded tags (for callers that cache decoded tags).
    pub raw_tags: &'a [u8],
    /// The append id, when the frame carries one.
    pub append_id: Option<&'a str>,
    /// The payload, borrowed from the input.
    pub data: &'a [u8],
    /// Total bytes of the frame, prefix included.
    pub frame_len: usize,
}

impl FrameRef<'_> {
    /// The entry this frame holds, copying the payload.
    pub fn to_entry(&self) -> LogEntry {
        LogEntry {
            seqnum: self.meta.seqnum,
            stream_version: self.meta.stream_version,
            tags: self.tags.clone(),
            data: bytes::Bytes::copy_from_slice(self.data),
            timestamp_ms: self.meta.timestamp_ms,
            append_id: self.append_id.map(String::from),
        }
    }
}

/// The encoded size of a frame holding `tags` and `data_len` payload bytes.
pub fn encoded_len(tags: &[LogTag], data_len: usize) -> usize {
    FIXED_LEN + tags_len(tags) + data_len
}

/// The encoded size of a frame holding `tags`, `append_id` and `data_len`
/// payload bytes.
pub fn encoded_len_with_id(tags: &[LogTag], append_id: Option<&str>, data_len: usize) -> usize {
    encoded_len(tags, data_len) + append_id.map_or(0, |id| 1 + id.len())
}

fn tags_len(tags: &[LogTag]) -> usize {
    tags.iter()
        .map(|t| 4 + t.namespace().len() + t.key().map_or(0, str::len))
        .sum()
}

/// Appends the frame of `entry` to `out`, without an append id.
///
/// Errors: `InvalidInput` when the entry has no tag, more than
/// [`MAX_TAGS_PER_ENTRY`] tags, or is too large for a `u32` length.
pub fn encode(
    out: &mut Vec<u8>,
    entry: &LogEntry,
    group_offset: u32,
    batch_end: bool,
) -> Result<(), Error> {
    encode_with_id(out, entry, None, group_offset, batch_end)
}

/// Appends the frame of `entry`, carrying `append_id` when given, to `out`.
///
/// Errors: as [`encode`]; `InvalidInput` for an append id that is empty,
/// longer than [`MAX_FRAME_APPEND_ID`] bytes or holds a control character.
pub fn encode_with_id(
    out: &mut Vec<u8>,
    entry: &LogEntry,
    append_id: Option<&str>,
    group_offset: u32,
    batch_end: bool,
) -> Result<(), Error> {
    let start = out.len();
    write_head(out, entry, append_id, group_offset, batch_end)?;
    out.extend_from_slice(&entry.data);
    let crc = checksum(&out[start..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Appends the frame of `entry` *without its payload*, which the caller
/// writes right after these bytes (for large payloads, so they need not be
/// copied). `data_crc` is the CRC-32C of `entry.data`, which the caller may
/// have computed elsewhere, in parallel; the frame's checksum is derived
/// from it.
///
/// Errors: as [`encode`].
pub fn encode_head(
    out: &mut Vec<u8>,
    entry: &LogEntry,
    group_offset: u32,
    batch_end: bool,
    data_crc: u32,
) -> Result<(), Error> {
    encode_head_with_id(out, entry, None, group_offset, batch_end, data_crc)
}

/// [`encode_head`] for a frame carrying `append_id` when given.
///
/// Errors: as [`encode_with_id`].
pub fn encode_head_with_id(
    out: &mut Vec<u8>,
    entry: &LogEntry,
    append_id: Option<&str>,
    group_offset: u32,
    batch_end: bool,
    data_crc: u32,
) -> Result<(), Error> {
    let start = out.len();
    write_head(out, entry, append_id, group_offset, batch_end)?;
    let head = crc32c::crc32c_append(
        crc32c::crc32c(&out[start..start + 4]),
        &out[start + PREFIX_LEN..],
    );
    let crc = crc32c::crc32c_combine(head, data_crc, entry.data.len());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Writes every field up to the payload, with a zero checksum.
fn write_head(
    out: &mut Vec<u8>,
    entry: &LogEntry,
    append_id: Option<&str>,
    group_offset: u32,
    batch_end: bool,
) -> Result<(), Error> {
    if let Some(id) = append_id
        && !valid_append_id(id)
    {
        return Err(Error::invalid_input(format!(
            "append id {id:?} must be 1 to {MAX_FRAME_APPEND_ID} bytes without control characters"
        )));
    }
    if entry.tags.is_empty() || entry.tags.len() > MAX_TAGS_PER_ENTRY {
        return Err(Error::invalid_input(format!(
            "an entry needs 1 to {MAX_TAGS_PER_ENTRY} tags, this one has {}",
            entry.tags.len()
        )));
    }
    if u64::from(group_offset) > entry.seqnum {
        return Err(Error::invalid_input(format!(
            "group offset {group_offset} exceeds seqnum {}",
            entry.seqnum
        )));
    }
    let total = encoded_len_with_id(&entry.tags, append_id, entry.data.len());
    let body_len = u32::try_from(total - PREFIX_LEN).map_err(|_| {
        Error::invalid_input(format!("entry of {total} bytes is too large for a frame"))
    })?;
    out.reserve(total - entry.data.len());
    out.extend_from_slice(&body_len.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&entry.seqnum.to_le_bytes());
    out.extend_from_slice(&entry.stream_version.to_le_bytes());
    out.extend_from_slice(&entry.timestamp_ms.to_le_bytes());
    out.extend_from_slice(&group_offset.to_le_bytes());
    let mut flags = if batch_end { FLAG_BATCH_END } else { 0 };
    if append_id.is_some() {
        flags |= FLAG_APPEND_ID;
    }
    out.push(flags);
    // Checked above: at most MAX_TAGS_PER_ENTRY (64) tags.
    out.push(entry.tags.len() as u8);
    for tag in &entry.tags {
        // LogTag bounds each part to MAX_TAG_PART_BYTES (255).
        let ns = tag.namespace().as_bytes();
        out.extend_from_slice(&(ns.len() as u16).to_le_bytes());
        out.extend_from_slice(ns);
        let key = tag.key().unwrap_or("").as_bytes();
        out.extend_from_slice(&(key.len() as u16).to_le_bytes());
        out.extend_from_slice(key);
    }
    if let Some(id) = append_id {
        // Checked above: 1..=255 bytes.
        out.push(id.len() as u8);
        out.extend_from_slice(id.as_bytes());
    }
    Ok(())
}

/// Erases the payload of the frame that fills `frame` exactly, in place:
/// sets `ERASED`, zeroes the data bytes and seals the checksum again. The
/// frame keeps its length, header, tags and append id. Returns false (and
/// changes nothing) when the frame was already erased.
///
/// Errors: as [`decode_head`] for a frame that does not verify, and
/// [`FrameError::Malformed`] when `frame` holds more than one frame.
pub fn erase_in_place(frame: &mut [u8]) -> Result<bool, FrameError> {
    let head = decode_head(frame)?;
    if head.frame_len != frame.len() {
        return Err(malformed(format!(
            "{} bytes hold a frame of {} and more",
            frame.len(),
            head.frame_len
        )));
    }
    if head.meta.erased {
        return Ok(false);
    }
    let data_len = head.data.len();
    let data_at = frame.len() - data_len;
    frame[data_at..].fill(0);
    frame[FLAGS_AT] |= FLAG_ERASED;
    let crc = checksum(frame);
    frame[4..PREFIX_LEN].copy_from_slice(&crc.to_le_bytes());
    Ok(true)
}

/// True for an id a frame can carry: 1 to [`MAX_FRAME_APPEND_ID`] bytes, no
/// control characters (the rule `AppendRequest::validate` applies).
fn valid_append_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_FRAME_APPEND_ID && !id.chars().any(char::is_control)
}

/// The CRC-32C a frame must carry: over the length field and the body.
fn checksum(frame: &[u8]) -> u32 {
    let head = frame.get(..4).unwrap_or(&[]);
    let body = frame.get(PREFIX_LEN..).unwrap_or(&[]);
    crc32c::crc32c_append(crc32c::crc32c(head), body)
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    let bytes = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    let bytes = buf.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    let bytes = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes(bytes.try_into().ok()?))
}

/// The total length a frame starting at `buf[0]` claims, read from its
/// prefix without any validation. `None` when fewer than 4 bytes remain.
pub fn claimed_len(buf: &[u8]) -> Option<usize> {
    u32_at(buf, 0).map(|body| body as usize + PREFIX_LEN)
}

/// The seqnum and group offset a frame at `buf[0]` claims, without any
/// validation (a cheap filter before a full [`decode`]).
pub fn claimed_position(buf: &[u8]) -> Option<(u64, u32)> {
    Some((u64_at(buf, 8)?, u32_at(buf, 32)?))
}

/// A frame whose checksum and fixed fields were verified, with its tags
/// still encoded (for callers that decode or cache tags themselves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHead<'a> {
    /// The fixed fields.
    pub meta: FrameMeta,
    /// How many tags `raw_tags` holds.
    pub tag_count: usize,
    /// The encoded tags; decode them with [`decode_tags`].
    pub raw_tags: &'a [u8],
    /// The append id, when the frame carries one (checked: 1 to 255 bytes
    /// of utf-8 without control characters).
    pub append_id: Option<&'a str>,
    /// The payload, borrowed from the input.
    pub data: &'a [u8],
    /// Total bytes of the frame, prefix included.
    pub frame_len: usize,
}

/// Decodes the frame at the start of `buf` (which may hold more bytes after
/// it). Never panics, whatever the input.
///
/// Errors: [`FrameError::Incomplete`] when `buf` ends inside the frame,
/// [`FrameError::Checksum`] when the bytes are damaged,
/// [`FrameError::Malformed`] when a checksummed field is invalid.
pub fn decode(buf: &[u8]) -> Result<FrameRef<'_>, FrameError> {
    let head = decode_head(buf)?;
    Ok(FrameRef {
        meta: head.meta,
        tags: decode_tags(head.raw_tags, head.tag_count)?,
        raw_tags: head.raw_tags,
        append_id: head.append_id,
        data: head.data,
        frame_len: head.frame_len,
    })
}

/// Verifies the checksum and fixed fields of the frame at the start of
/// `buf` and locates its tags and payload, without decoding the tags.
///
/// Errors: as [`decode`], except that tag contents are not checked.
pub fn decode_head(buf: &[u8]) -> Result<FrameHead<'_>, FrameError> {
    let frame_len = claimed_len(buf).ok_or(FrameError::Incomplete { needed: PREFIX_LEN })?;
    if frame_len < FIXED_LEN {
        // A length this small can only be damage (or zeroed bytes).
        return Err(FrameError::BadLength {
            body_len: (frame_len - PREFIX_LEN) as u32,
        });
    }
    let frame = buf
        .get(..frame_len)
        .ok_or(FrameError::Incomplete { needed: frame_len })?;
    let stored = u32_at(frame, 4).unwrap_or(0);
    let computed = checksum(frame);
    if stored != computed {
        return Err(FrameError::Checksum { stored, computed });
    }
    parse_checked(frame)
}

fn malformed(why: impl Into<String>) -> FrameError {
    FrameError::Malformed(why.into())
}

/// Parses the fixed fields of a frame whose checksum already matched and
/// finds where its tags end.
fn parse_checked(frame: &[u8]) -> Result<FrameHead<'_>, FrameError> {
    let field = |v: Option<u64>| v.ok_or_else(|| malformed("fixed fields truncated"));
    let seqnum = field(u64_at(frame, 8))?;
    let stream_version = field(u64_at(frame, 16))?;
    let timestamp_ms = field(u64_at(frame, 24))?;
    let group_offset = u32_at(frame, 32).ok_or_else(|| malformed("fixed fields truncated"))?;
    let flags = *frame
        .get(FLAGS_AT)
        .ok_or_else(|| malformed("fixed fields truncated"))?;
    let tag_count = *frame
        .get(37)
        .ok_or_else(|| malformed("fixed fields truncated"))? as usize;
    if flags & !KNOWN_FLAGS != 0 {
        return Err(malformed(format!("reserved flag bits set: {flags:#04x}")));
    }
    if u64::from(group_offset) > seqnum {
        return Err(malformed(format!(
            "group offset {group_offset} exceeds seqnum {seqnum}"
        )));
    }
    if tag_count == 0 || tag_count > MAX_TAGS_PER_ENTRY {
        return Err(malformed(format!("tag count {tag_count} out of range")));
    }
    let mut at = FIXED_LEN;
    for _ in 0..2 * tag_count {
        let len =
            u16_at(frame, at).ok_or_else(|| malformed("tag length overruns the frame"))? as usize;
        at += 2 + len;
    }
    let raw_tags = frame
        .get(FIXED_LEN..at)
        .ok_or_else(|| malformed("tags overrun the frame"))?;
    let append_id = if flags & FLAG_APPEND_ID != 0 {
        let len = *frame
            .get(at)
            .ok_or_else(|| malformed("append id overruns the frame"))? as usize;
        let bytes = frame
            .get(at + 1..at + 1 + len)
            .ok_or_else(|| malformed("append id overruns the frame"))?;
        let id = std::str::from_utf8(bytes).map_err(|_| malformed("append id is not utf-8"))?;
        if !valid_append_id(id) {
            return Err(malformed(format!(
                "append id {id:?} is empty or holds a control character"
            )));
        }
        at += 1 + len;
        Some(id)
    } else {
        None
    };
    let mut data = frame
        .get(at..)
        .ok_or_else(|| malformed("tags overrun the frame"))?;
    let erased = flags & FLAG_ERASED != 0;
    if erased {
        // The zeros only keep the frame's length: they are no payload.
        if data.iter().any(|&b| b != 0) {
            return Err(malformed("an erased frame's data bytes are not all zero"));
        }
        data = &[];
    }
    Ok(FrameHead {
        meta: FrameMeta {
            seqnum,
            stream_version,
            timestamp_ms,
            group_offset,
            batch_end: flags & FLAG_BATCH_END != 0,
            erased,
        },
        tag_count,
        raw_tags,
        append_id,
        data,
        frame_len: frame.len(),
    })
}

/// Decodes `count` encoded tags (a frame's `raw_tags`), checking each as
/// [`LogTag`] does and refusing duplicates.
///
/// Errors: [`FrameError::Malformed`].
pub fn decode_tags(raw: &[u8], count: usize) -> Result<Vec<LogTag>, FrameError> {
    let mut at = 0;
    let mut tags = Vec::with_capacity(count);
    for _ in 0..count {
        let (ns, next) = text_at(raw, at)?;
        let (key, next) = text_at(raw, next)?;
        at = next;
        let tag = if key.is_empty() {
            LogTag::new(ns)
        } else {
            LogTag::with_key(ns, key)
        }
        .map_err(|e| malformed(format!("bad tag: {}", e.message())))?;
        if tags.contains(&tag) {
            return Err(malformed(format!("duplicate tag {tag}")));
        }
        tags.push(tag);
    }
    if at != raw.len() {
        return Err(malformed("trailing bytes after the tags"));
    }
    Ok(tags)
}

/// A `[len u16][utf-8]` string at `at`; returns it and the offset after it.
fn text_at(frame: &[u8], at: usize) -> Result<(&str, usize), FrameError> {
    let len = u16_at(frame, at).ok_or_else(|| malformed("tag length overruns the frame"))? as usize;
    let start = at + 2;
    let bytes = frame
        .get(start..start + len)
        .ok_or_else(|| malformed("tag text overruns the frame"))?;
    let text = std::str::from_utf8(bytes).map_err(|_| malformed("tag is not utf-8"))?;
    Ok((text, start + len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use proptest::prelude::*;

    fn entry(seqnum: u64, tags: &[&str], data: &[u8]) -> LogEntry {
        LogEntry {
            seqnum,
            stream_version: seqnum / 2,
            tags: tags.iter().map(|t| t.parse().unwrap()).collect(),
            data: Bytes::copy_from_slice(data),
            timestamp_ms: 1_700_000_000_000 + seqnum,
            append_id: None,
        }
    }

    #[test]
    fn round_trips_and_reports_its_length() {
        let e = entry(42, &["orders", "orders:o-1"], b"placed");
        let mut buf = Vec::new();
        encode(&mut buf, &e, 3, true).unwrap();
        assert_eq!(buf.len(), encoded_len(&e.tags, e.data.len()));
        buf.extend_from_slice(b"trailing bytes of the next frame");
        let frame = decode(&buf).unwrap();
        assert_eq!(frame.to_entry(), e);
        assert_eq!(frame.meta.group_offset, 3);
        assert_eq!(frame.meta.group_first(), 39);
        assert!(frame.meta.batch_end);
        assert_eq!(frame.frame_len, encoded_len(&e.tags, e.data.len()));
        assert_eq!(claimed_len(&buf), Some(frame.frame_len));
        assert_eq!(claimed_position(&buf), Some((42, 3)));
    }

    #[test]
    fn an_erased_frame_keeps_its_place_and_loses_its_payload() {
        let mut e = entry(42, &["orders:o-1", "audit"], b"card 4111 1111 1111 1111");
        e.append_id = Some("order-42/placed".into());
        let mut buf = Vec::new();
        encode_with_id(&mut buf, &e, e.append_id.as_deref(), 3, true).unwrap();
        let len = buf.len();
        assert!(erase_in_place(&mut buf).unwrap());
        assert_eq!(buf.len(), len, "same length, so offsets after it hold");
        assert!(
            !buf.windows(4).any(|w| w == b"4111"),
            "payload bytes remain"
        );
        let f = decode(&buf).unwrap();
        assert!(f.meta.erased);
        assert!(f.meta.batch_end);
        assert_eq!(f.meta.group_offset, 3);
        let erased = f.to_entry();
        assert_eq!(erased.data, Bytes::new());
        assert_eq!(
            (erased.seqnum, erased.stream_version, erased.timestamp_ms),
            (e.seqnum, e.stream_version, e.timestamp_ms)
        );
        assert_eq!((erased.tags, erased.append_id), (e.tags, e.append_id));
        // Idempotent: a second erase changes nothing.
        let before = buf.clone();
        assert!(!erase_in_place(&mut buf).unwrap());
        assert_eq!(buf, before);
    }

    #[test]
    fn an_erased_frame_with_data_left_is_malformed() {
        let e = entry(5, &["t"], b"secret");
        let mut buf = Vec::new();
        encode(&mut buf, &e, 0, true).unwrap();
        // The flag set without zeroing the data, checksum sealed again.
        buf[FLAGS_AT] |= FLAG_ERASED;
        let crc = checksum(&buf);
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(decode(&buf), Err(FrameError::Malformed(_))));
        let mut damaged = buf.clone();
        assert!(erase_in_place(&mut damaged).is_err());
        // Bytes after the frame are refused rather than zeroed with it.
        let mut good = Vec::new();
        encode(&mut good, &e, 0, true).unwrap();
        good.push(0);
        assert!(matches!(
            erase_in_place(&mut good),
            Err(FrameError::Malformed(_))
        ));
    }

    #[test]
    fn encode_head_plus_payload_equals_encode() {
        for len in [0usize, 1, 100, 70_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 13) as u8).collect();
            let e = entry(77, &["big", "x:y"], &data);
            let mut whole = Vec::new();
            encode(&mut whole, &e, 5, true).unwrap();
            let mut split = Vec::new();
            encode_head(&mut split, &e, 5, true, crc32c::crc32c(&data)).unwrap();
            split.extend_from_slice(&data);
            assert_eq!(split, whole, "payload of {len} bytes");
        }
    }

    #[test]
    fn layout_matches_the_documented_offsets() {
        let e = entry(7, &["a:k"], b"xy");
        let mut buf = Vec::new();
        encode(&mut buf, &e, 0, false).unwrap();
        assert_eq!(buf.len(), FIXED_LEN + 2 + 1 + 2 + 1 + 2);
        assert_eq!(u32_at(&buf, 0), Some((buf.len() - PREFIX_LEN) as u32));
        assert_eq!(u64_at(&buf, 8), Some(7));
        assert_eq!(u64_at(&buf, 16), Some(3));
        assert_eq!(buf[36], 0);
        assert_eq!(buf[37], 1);
        assert_eq!(&buf[38..40], &1u16.to_le_bytes());
        assert_eq!(buf[40], b'a');
        assert_eq!(&buf[41..43], &1u16.to_le_bytes());
        assert_eq!(buf[43], b'k');
        assert_eq!(&buf[44..], b"xy");
    }

    #[test]
    fn every_truncation_is_incomplete() {
        let e = entry(1, &["t"], b"payload");
        let mut buf = Vec::new();
        encode(&mut buf, &e, 0, true).unwrap();
        for cut in 0..buf.len() {
            match decode(&buf[..cut]) {
                Err(FrameError::Incomplete { .. }) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let e = entry(9, &["t", "u:v"], b"some payload");
        let mut buf = Vec::new();
        encode(&mut buf, &e, 1, true).unwrap();
        for byte in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[byte] ^= 1 << bit;
                assert!(decode(&bad).is_err(), "flip {byte}:{bit} went unnoticed");
            }
        }
    }

    #[test]
    fn reserved_flags_and_bad_tags_are_malformed() {
        let e = entry(5, &["t"], b"x");
        let mut buf = Vec::new();
        encode(&mut buf, &e, 0, false).unwrap();
        buf[36] = 0x80;
        let crc = checksum(&buf);
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(decode(&buf), Err(FrameError::Malformed(_))));

        let mut buf = Vec::new();
        encode(&mut buf, &e, 0, false).unwrap();
        buf[40] = b':';
        let crc = checksum(&buf);
        buf[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(decode(&buf), Err(FrameError::Malformed(_))));
    }

    #[test]
    fn an_append_id_round_trips_between_tags_and_payload() {
        let e = entry(7, &["a:k"], b"xy");
        let mut buf = Vec::new();
        encode_with_id(&mut buf, &e, Some("order-42/placed"), 0, true).unwrap();
        assert_eq!(
            buf.len(),
            encoded_len_with_id(&e.tags, Some("order-42/placed"), 2)
        );
        assert_eq!(buf[36], FLAG_BATCH_END | FLAG_APPEND_ID);
        // Tags end at 44; then the id's length and bytes; then the payload.
        assert_eq!(buf[44], 15);
        assert_eq!(&buf[45..60], b"order-42/placed");
        assert_eq!(&buf[60..], b"xy");
        let frame = decode(&buf).unwrap();
        assert_eq!(frame.append_id, Some("order-42/placed"));
        let read = frame.to_entry();
        assert_eq!(read.append_id.as_deref(), Some("order-42/placed"));
        assert_eq!(
            read,
            LogEntry {
                append_id: Some("order-42/placed".into()),
                ..e.clone()
            }
        );
        assert!(frame.meta.batch_end);

        // The split encoder agrees, for ids too.
        let mut split = Vec::new();
        encode_head_with_id(&mut split, &e, Some("order-42/placed"), 0, true, {
            crc32c::crc32c(&e.data)
        })
        .unwrap();
        split.extend_from_slice(&e.data);
        assert_eq!(split, buf);
    }

    #[test]
    fn a_frame_without_an_id_is_byte_for_byte_the_old_layout() {
        // Bytes of a frame written before append ids existed: they decode
        // as an entry without an id, and today's encoder writes the same.
        let old: &[u8] = &[
            // body_len, then the crc32c (computed apart from this code)
            0x26, 0x00, 0x00, 0x00, 0x61, 0x16, 0x8c, 0x47, 0x07, 0, 0, 0, 0, 0, 0,
            0, // seqnum 7
            0x03, 0, 0, 0, 0, 0, 0, 0, // version 3
            0x07, 0x68, 0xe5, 0xcf, 0x8b, 0x01, 0, 0, // timestamp
            0, 0, 0, 0, // group offset
            0x01, 0x01, // BATCH_END, one tag
            0x01, 0x00, b'a', 0x01, 0x00, b'k', // a:k
            b'x', b'y',
        ];
        let e = entry(7, &["a:k"], b"xy");
        let frame = decode(old).unwrap();
        assert_eq!(frame.append_id, None);
        assert_eq!(frame.to_entry(), e);
        let mut buf = Vec::new();
        encode(&mut buf, &e, 0, true).unwrap();
        assert_eq!(buf, old);
        let mut none = Vec::new();
        encode_with_id(&mut none, &e, None, 0, true).unwrap();
        assert_eq!(none, old);
    }

    #[test]
    fn bad_append_ids_are_refused_both_ways() {
        let e = entry(1, &["t"], b"x");
        let long = "i".repeat(MAX_FRAME_APPEND_ID + 1);
        for bad in ["", "a\nb", long.as_str()] {
            let err = encode_with_id(&mut Vec::new(), &e, Some(bad), 0, true).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{bad:?}");
        }
        let longest = "i".repeat(MAX_FRAME_APPEND_ID);
        let mut buf = Vec::new();
        encode_with_id(&mut buf, &e, Some(&longest), 0, true).unwrap();
        assert_eq!(decode(&buf).unwrap().append_id, Some(longest.as_str()));

        // Checksummed but invalid ids: empty, a control character, not
        // utf-8, longer than the frame.
        let at = FIXED_LEN + 2 + 1 + 2; // after the one tag "t"
        let patch = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut buf = Vec::new();
            encode_with_id(&mut buf, &e, Some("ab"), 0, true).unwrap();
            f(&mut buf);
            let body = (buf.len() - PREFIX_LEN) as u32;
            buf[..4].copy_from_slice(&body.to_le_bytes());
            let crc = checksum(&buf);
            buf[4..8].copy_from_slice(&crc.to_le_bytes());
            decode(&buf).map(|_| ())
        };
        type Edit<'a> = (&'a str, &'a dyn Fn(&mut Vec<u8>));
        let cases: [Edit<'_>; 4] = [
            ("empty", &|b| {
                b[at] = 0;
            }),
            ("control", &|b| b[at + 1] = 0x07),
            ("utf-8", &|b| b[at + 1] = 0xff),
            ("overrun", &|b| b[at] = 200),
        ];
        for (what, f) in cases {
            assert!(
                matches!(patch(f), Err(FrameError::Malformed(_))),
                "{what}: {:?}",
                patch(f)
            );
        }
    }

    #[test]
    fn every_cut_and_flip_of_a_frame_with_an_id_is_caught() {
        let e = entry(9, &["t", "u:v"], b"some payload");
        let mut buf = Vec::new();
        encode_with_id(&mut buf, &e, Some("id-1"), 1, true).unwrap();
        for cut in 0..buf.len() {
            assert!(
                matches!(decode(&buf[..cut]), Err(FrameError::Incomplete { .. })),
                "cut at {cut}"
            );
        }
        for byte in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[byte] ^= 1 << bit;
                assert!(decode(&bad).is_err(), "flip {byte}:{bit} went unnoticed");
            }
        }
    }

    #[test]
    fn encode_rejects_group_offset_beyond_seqnum() {
        let e = entry(2, &["t"], b"x");
        let err = encode(&mut Vec::new(), &e, 3, false).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn decode_of_damaged_frames_never_panics(
            data in proptest::collection::vec(any::<u8>(), 0..64),
            at in 0usize..200,
            value in any::<u8>(),
        ) {
            let e = entry(11, &["ns:key", "other"], &data);
            let mut buf = Vec::new();
            encode(&mut buf, &e, 2, true).unwrap();
            let at = at % buf.len();
            let original = buf[at];
            buf[at] = value;
            let result = decode(&buf);
            if original == value {
                prop_assert_eq!(result.unwrap().to_entry(), e);
            } else {
                prop_assert!(result.is_err());
            }
        }

        #[test]
        fn round_trip(
            seqnum in 0u64..u64::MAX / 2,
            offset in 0u32..1000,
            data in proptest::collection::vec(any::<u8>(), 0..256),
            end in any::<bool>(),
            id in proptest::option::of("[a-z0-9/:-]{1,40}"),
        ) {
            let seqnum = seqnum + u64::from(offset);
            let e = entry(seqnum, &["a", "b:c"], &data);
            let mut buf = Vec::new();
            encode_with_id(&mut buf, &e, id.as_deref(), offset, end).unwrap();
            prop_assert_eq!(buf.len(), encoded_len_with_id(&e.tags, id.as_deref(), data.len()));
            let frame = decode(&buf).unwrap();
            prop_assert_eq!(frame.append_id, id.as_deref());
            prop_assert_eq!(frame.to_entry(), LogEntry { append_id: id.clone(), ..e });
            prop_assert_eq!(frame.meta.batch_end, end);
            prop_assert_eq!(frame.meta.group_offset, offset);
        }
    }

    #[test]
    fn zeroed_bytes_are_a_bad_length_not_a_self_contradicting_checksum() {
        let err = decode(&[0; 64]).unwrap_err();
        assert_eq!(err, FrameError::BadLength { body_len: 0 });
        let text = err.to_string();
        assert!(!text.contains("checksum"), "{text}");
    }
}
