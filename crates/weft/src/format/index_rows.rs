//! Keys and values of the persistent log index ([`crate::index`]).
//!
//! The index keeps its rows in an embedded key-value store whose keys are
//! byte strings compared lexicographically; these are weft's layouts of
//! them. Numbers inside keys are **big-endian** so that byte order is
//! numeric order (a range scan of one tag's postings runs in seqnum order);
//! numbers in values are little-endian like every other weft format.
//!
//! ```text
//!  table      key                                   value
//!  meta       name (ASCII, see [`meta`])            per name, below
//!  tags       tag                                   [id u64][next_version u64][floor u64][last u64]
//!  postings   [tag_id u64 BE][first seqnum u64 BE]  chunk: the seqnums carrying the tag
//!  versions   [tag_id u64 BE][first version u64 BE] chunk: the seqnums of versions first..
//!  locators   [seqnum u64 BE]                       backend-defined bytes
//!  append_ids [0x01][append id bytes]               [seqnum u64]
//!  (each)     [0xff; 9]  (the witness row)          [batch u64]
//!
//!  tag = [ns_len u16][namespace utf-8][key_len u16][key utf-8]   (key_len 0: no key)
//! ```
//!
//! A *chunk* lists ascending seqnums, those of one tag in one batch the
//! index wrote (at most [`CHUNK_MAX`]), so a log of few, busy tags costs a
//! row per tag per batch rather than per entry:
//!
//! ```text
//!  [count u32][first seqnum u64][count - 1 gaps: LEB128 varint, each >= 1]
//! ```
//!
//! A `postings` chunk's first seqnum equals its key's; a `versions` chunk
//! holds the seqnums of versions `first version .. first version + count`
//! of its tag as a primary tag, and the chunks of one tag cover its
//! versions densely.
//!
//! Every table (keyspace) carries a *witness* row, rewritten by every
//! batch that writes the index: the serial number of that batch
//! (`meta.batch`), which no two batches share (a trim leaves the covered
//! point as it was, so the covered point would not tell a lost trim). Its
//! key sorts after every other key of the table, so no scan meets it. On
//! open the witnesses must all equal `meta.batch`; a table whose witness
//! differs lost rows (a file deleted, a journal cut) and the index is
//! rebuilt.
//!
//! A tag's `id` is dense and assigned by the index when the tag first
//! appears; `next_version` is the version the tag's next entry as a
//! primary tag gets (0: none yet); `floor` is the first version that was
//! not trimmed away before the index learnt of it (versions below it read
//! as trimmed even though the index has no row for them); `last` is the
//! seqnum of its last entry as a primary tag (0 when it has none the index
//! saw), which tells a trim which streams it leaves without live entries.
//!
//! Every decoder returns `Corrupt` on malformed bytes and never panics: a
//! damaged index is rebuilt, never trusted.

use crate::error::{Error, Result};
use crate::model::LogTag;

/// Names and layouts of the `meta` table's rows.
pub mod meta {
    /// `[format u64]`: the index layout version, [`FORMAT`](super::FORMAT).
    pub const FORMAT: &str = "format";
    /// The identity of the log the index describes (backend-defined bytes).
    pub const IDENTITY: &str = "identity";
    /// `[covered u64]`: every entry with a lower seqnum is in the store.
    pub const COVERED: &str = "covered";
    /// `[first u64]`: the first live seqnum (the trim point plus one).
    pub const FIRST: &str = "first";
    /// `[seqnum u64][check u64]`: the backend's check value of the entry
    /// `covered - 1`, so a reopened backend can tell that the index still
    /// matches its log (absent while `covered` is 0).
    pub const TIP: &str = "tip";
    /// `[next_tag_id u64]`: the id the next new tag gets.
    pub const NEXT_TAG_ID: &str = "next_tag_id";
    /// `[batch u64]`: the serial number of the last batch written (0: the
    /// one that created the index); every table's witness must equal it.
    pub const BATCH: &str = "batch";
}

/// The index layout version this build writes and reads.
pub const FORMAT: u32 = 2;

/// A `(u64, u64)` key, big-endian, so byte order is numeric order.
pub fn pair_key(a: u64, b: u64) -> [u8; 16] {
    let mut k = [0; 16];
    k[..8].copy_from_slice(&a.to_be_bytes());
    k[8..].copy_from_slice(&b.to_be_bytes());
    k
}

/// Decodes a [`pair_key`].
///
/// Errors: `Corrupt` unless `bytes` is 16 bytes long.
pub fn decode_pair_key(bytes: &[u8]) -> Result<(u64, u64)> {
    let k: &[u8; 16] = bytes
        .try_into()
        .map_err(|_| Error::corrupt(format!("index key of {} bytes, expected 16", bytes.len())))?;
    let (a, b) = k.split_at(8);
    Ok((be(a), be(b)))
}

/// The most seqnums one chunk holds.
pub const CHUNK_MAX: usize = 512;

/// Encodes ascending seqnums (at least one) as a chunk.
///
/// Errors: `InvalidInput` for an empty or non-ascending list, or more
/// than [`CHUNK_MAX`] seqnums.
pub fn encode_chunk(seqnums: &[u64]) -> Result<Vec<u8>> {
    let Some(&first) = seqnums.first() else {
        return Err(Error::invalid_input("an index chunk needs a seqnum"));
    };
    if seqnums.len() > CHUNK_MAX {
        return Err(Error::invalid_input(format!(
            "an index chunk holds at most {CHUNK_MAX} seqnums, not {}",
            seqnums.len()
        )));
    }
    let mut out = Vec::with_capacity(12 + seqnums.len() * 2);
    out.extend_from_slice(&(seqnums.len() as u32).to_le_bytes());
    out.extend_from_slice(&first.to_le_bytes());
    for w in seqnums.windows(2) {
        let gap = w[1]
            .checked_sub(w[0])
            .filter(|&g| g > 0)
            .ok_or_else(|| Error::invalid_input("index chunk seqnums must ascend"))?;
        let mut g = gap;
        loop {
            let byte = (g & 0x7f) as u8;
            g >>= 7;
            if g == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
    }
    Ok(out)
}

/// Decodes a chunk.
///
/// Errors: `Corrupt` for a truncated or overlong chunk, a count out of
/// range, a zero gap or a seqnum past `u64::MAX`.
pub fn decode_chunk(bytes: &[u8]) -> Result<Vec<u64>> {
    let bad = |why: &str| Error::corrupt(format!("index chunk: {why}"));
    if bytes.len() < 12 {
        return Err(bad("truncated"));
    }
    let count = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    if count == 0 || count > CHUNK_MAX || count - 1 > bytes.len() - 12 {
        return Err(bad("count out of range"));
    }
    let mut first = [0; 8];
    first.copy_from_slice(&bytes[4..12]);
    let mut s = u64::from_le_bytes(first);
    let mut out = Vec::with_capacity(count);
    out.push(s);
    let mut at = 12;
    for _ in 1..count {
        let mut gap: u64 = 0;
        let mut shift = 0u32;
        loop {
            let byte = *bytes.get(at).ok_or_else(|| bad("truncated"))?;
            at += 1;
            if shift > 63 || (shift == 63 && byte > 1) {
                return Err(bad("gap overflows"));
            }
            gap |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        if gap == 0 {
            return Err(bad("zero gap"));
        }
        s = s.checked_add(gap).ok_or_else(|| bad("seqnum overflows"))?;
        out.push(s);
    }
    if at != bytes.len() {
        return Err(bad("trailing bytes"));
    }
    Ok(out)
}

/// An append id as a key of the `append_ids` table: a `0x01` byte keeps
/// every id apart from the witness row.
pub fn append_id_key(id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + id.len());
    k.push(0x01);
    k.extend_from_slice(id);
    k
}

/// A seqnum key (the `locators` table).
pub fn seqnum_key(seqnum: u64) -> [u8; 8] {
    seqnum.to_be_bytes()
}

/// Decodes a [`seqnum_key`].
///
/// Errors: `Corrupt` unless `bytes` is 8 bytes long.
pub fn decode_seqnum_key(bytes: &[u8]) -> Result<u64> {
    let k: &[u8; 8] = bytes
        .try_into()
        .map_err(|_| Error::corrupt(format!("index key of {} bytes, expected 8", bytes.len())))?;
    Ok(u64::from_be_bytes(*k))
}

fn be(b: &[u8]) -> u64 {
    let mut x = [0; 8];
    x.copy_from_slice(b);
    u64::from_be_bytes(x)
}

/// A little-endian `u64` value.
pub fn u64_value(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// Decodes a [`u64_value`].
///
/// Errors: `Corrupt` unless `bytes` is 8 bytes long.
pub fn decode_u64_value(bytes: &[u8], what: &str) -> Result<u64> {
    let v: &[u8; 8] = bytes.try_into().map_err(|_| {
        Error::corrupt(format!(
            "index value {what} has {} bytes, expected 8",
            bytes.len()
        ))
    })?;
    Ok(u64::from_le_bytes(*v))
}

/// The `tags` table's value of one tag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TagRow {
    /// The tag's dense id (the first half of its postings and version keys).
    pub id: u64,
    /// The version its next entry as a primary tag gets.
    pub next_version: u64,
    /// Versions below this were trimmed before the index saw them.
    pub floor: u64,
    /// The seqnum of its last entry as a primary tag (0: none recorded).
    pub last: u64,
}

impl TagRow {
    /// Bytes of an encoded row.
    pub const LEN: usize = 32;

    /// The row's bytes.
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut v = [0; Self::LEN];
        v[..8].copy_from_slice(&self.id.to_le_bytes());
        v[8..16].copy_from_slice(&self.next_version.to_le_bytes());
        v[16..24].copy_from_slice(&self.floor.to_le_bytes());
        v[24..].copy_from_slice(&self.last.to_le_bytes());
        v
    }

    /// Errors: `Corrupt` for a wrong length or a floor past the next version.
    pub fn decode(bytes: &[u8]) -> Result<TagRow> {
        if bytes.len() != Self::LEN {
            return Err(Error::corrupt(format!(
                "index tag row has {} bytes, expected {}",
                bytes.len(),
                Self::LEN
            )));
        }
        let le = |r: std::ops::Range<usize>| {
            let mut x = [0; 8];
            x.copy_from_slice(&bytes[r]);
            u64::from_le_bytes(x)
        };
        let row = TagRow {
            id: le(0..8),
            next_version: le(8..16),
            floor: le(16..24),
            last: le(24..32),
        };
        if row.floor > row.next_version {
            return Err(Error::corrupt(format!(
                "index tag row has floor {} above its next version {}",
                row.floor, row.next_version
            )));
        }
        Ok(row)
    }
}

/// A tag as a key of the `tags` table.
pub fn tag_key(tag: &LogTag) -> Vec<u8> {
    let ns = tag.namespace().as_bytes();
    let key = tag.key().unwrap_or("").as_bytes();
    let mut out = Vec::with_capacity(4 + ns.len() + key.len());
    // Tag parts are at most 255 bytes (checked when the tag was made).
    out.extend_from_slice(&(ns.len() as u16).to_le_bytes());
    out.extend_from_slice(ns);
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
    out
}

/// Decodes a [`tag_key`].
///
/// Errors: `Corrupt` for malformed bytes or an invalid tag.
pub fn decode_tag_key(bytes: &[u8]) -> Result<LogTag> {
    let mut at = 0usize;
    let mut part = || -> Result<&str> {
        let len = bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            .ok_or_else(|| Error::corrupt("index tag key is truncated"))?;
        let text = bytes
            .get(at + 2..at + 2 + len)
            .ok_or_else(|| Error::corrupt("index tag key is truncated"))?;
        at += 2 + len;
        std::str::from_utf8(text).map_err(|_| Error::corrupt("index tag key is not utf-8"))
    };
    let ns = part()?;
    let key = part()?;
    if at != bytes.len() {
        return Err(Error::corrupt("index tag key has trailing bytes"));
    }
    let tag = if key.is_empty() {
        LogTag::new(ns)
    } else {
        LogTag::with_key(ns, key)
    };
    tag.map_err(|e| Error::corrupt(format!("index tag key: {}", e.message())))
}

/// The `tip` meta value.
pub fn tip_value(seqnum: u64, check: u64) -> [u8; 16] {
    let mut v = [0; 16];
    v[..8].copy_from_slice(&seqnum.to_le_bytes());
    v[8..].copy_from_slice(&check.to_le_bytes());
    v
}

/// Decodes a [`tip_value`].
///
/// Errors: `Corrupt` unless `bytes` is 16 bytes long.
pub fn decode_tip_value(bytes: &[u8]) -> Result<(u64, u64)> {
    if bytes.len() != 16 {
        return Err(Error::corrupt(format!(
            "index tip has {} bytes, expected 16",
            bytes.len()
        )));
    }
    let (a, b) = bytes.split_at(8);
    Ok((
        decode_u64_value(a, "tip seqnum")?,
        decode_u64_value(b, "tip check")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pair_keys_sort_numerically() {
        let mut keys: Vec<_> = [(1, 256), (1, 2), (0, u64::MAX), (2, 0)]
            .iter()
            .map(|&(a, b)| pair_key(a, b))
            .collect();
        keys.sort();
        let back: Vec<_> = keys.iter().map(|k| decode_pair_key(k).unwrap()).collect();
        assert_eq!(back, vec![(0, u64::MAX), (1, 2), (1, 256), (2, 0)]);
        assert!(decode_pair_key(&[0; 15]).is_err());
    }

    #[test]
    fn chunks_round_trip_and_refuse_bad_input() {
        for list in [vec![7], vec![0, 1, 2, 300, 70_000, u64::MAX]] {
            let bytes = encode_chunk(&list).unwrap();
            assert_eq!(decode_chunk(&bytes).unwrap(), list);
            for cut in 0..bytes.len() {
                assert!(decode_chunk(&bytes[..cut]).is_err(), "cut {cut}");
            }
        }
        assert!(encode_chunk(&[]).is_err());
        assert!(encode_chunk(&[3, 3]).is_err());
        assert!(encode_chunk(&vec![1; CHUNK_MAX + 1]).is_err());
        let mut extra = encode_chunk(&[1, 2]).unwrap();
        extra.push(1);
        assert!(decode_chunk(&extra).is_err());
    }

    #[test]
    fn tags_round_trip_and_damage_is_corrupt() {
        for text in ["orders", "orders:o-1", "a:b:c"] {
            let tag: LogTag = text.parse().unwrap();
            let key = tag_key(&tag);
            assert_eq!(decode_tag_key(&key).unwrap(), tag);
            for cut in 0..key.len() {
                assert!(decode_tag_key(&key[..cut]).is_err(), "{text} cut {cut}");
            }
        }
        let row = TagRow {
            id: 7,
            next_version: 9,
            floor: 3,
            last: 40,
        };
        assert_eq!(TagRow::decode(&row.encode()).unwrap(), row);
        let mut bad = row.encode();
        bad[16] = 10;
        assert!(TagRow::decode(&bad).is_err());
        assert!(TagRow::decode(&[0; 31]).is_err());
        assert_eq!(decode_tip_value(&tip_value(5, 6)).unwrap(), (5, 6));
    }

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_tag_key(&bytes);
            let _ = TagRow::decode(&bytes);
            let _ = decode_pair_key(&bytes);
            let _ = decode_seqnum_key(&bytes);
            let _ = decode_tip_value(&bytes);
            let _ = decode_u64_value(&bytes, "x");
            let _ = decode_chunk(&bytes);
        }

        #[test]
        fn chunks_round_trip(mut list in proptest::collection::vec(any::<u64>(), 1..200)) {
            list.sort_unstable();
            list.dedup();
            prop_assert_eq!(decode_chunk(&encode_chunk(&list).unwrap()).unwrap(), list);
        }
    }
}
