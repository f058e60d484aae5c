//! The manifest's history: immutable pages that hold the entries a v5
//! manifest no longer lists itself, and the frontier that names them.
//!
//! A v5 manifest lists only its *recent* entries. Older entries are moved
//! (by a checkpoint, in the same CAS that drops them from the manifest) into
//! **leaf pages**: immutable objects, created once and never rewritten, each
//! holding a run of consecutive entries. Pointers to leaf pages are gathered
//! into **interior pages** of `fanout` pointers, those into pages one level
//! up, and so on: an append-only tree whose every page is full when written.
//!
//! The manifest keeps the tree's *frontier*: for each level, the pointers
//! not yet gathered into a page of the level above (fewer than `fanout`).
//! A checkpoint writes one leaf and pushes its pointer onto level 0; a level
//! that fills is written as one page whose pointer goes one level up. No
//! page is ever rewritten, so a checkpoint leaves no garbage behind, and a
//! lookup of any sequence reads the frontier (in the manifest) and then at
//! most one page per level: `O(log_fanout n)` small GETs.
//!
//! ```text
//!  manifest frontier            level 2: [P2a]                 (older)
//!                               level 1: [P1d, P1e]
//!                               level 0: [L40, L41, L42]       (newer)
//!                               recent entries: e.. e..        (newest)
//!  P2a -> [P1a, P1b, P1c] -> each [L.., L.., ...] -> each [entry, entry, ...]
//! ```
//!
//! In sequence order the history is: the subtrees of the highest level's
//! pointers, then the next level's, down to level 0, then the manifest's
//! recent entries.
//!
//! ## Retention
//!
//! `live_from` is the sequence of the first live entry. Truncation never
//! edits a page: it moves `live_from` forward and drops from the frontier
//! the pointers whose whole range lies before it. A page that straddles
//! `live_from` stays; readers and GC ignore what it holds before
//! `live_from`.
//!
//! ## Layouts (all integers little-endian; drawn in `docs/FORMATS.md`)
//!
//! ```text
//! pointer:  [first_seq u64][end_seq u64][entries u64][loc_len u16][loc utf8]
//!           the page covers sequences [first_seq, end_seq) and lists
//!           `entries` manifest entries in its subtree.
//!
//! history block (v5 manifests, after the entries):
//!           [live_from u64][level_count u8]
//!           level_count x ([pointer_count u16] pointer_count x pointer)
//!           level 0 first (pointers to leaf pages, the newest), then up.
//!
//! page:     "WHP1" | version u16 = 1 | level u8 | item_count u32
//!           item_count x item | crc32c u32 (of every byte before it)
//!           level 0 items: manifest entries in the v4/v5 entry layout;
//!           level k > 0 items: pointers to level k-1 pages.
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use super::fields::Reader;
use super::manifest::{
    ManifestEntry, ManifestVersion, check_entries, decode_entry_in, encode_entry,
};
use crate::error::{Error, Result};

const PAGE_MAGIC: &[u8; 4] = b"WHP1";
const PAGE_VERSION: u16 = 1;
/// Magic, version, level, item count.
const PAGE_HEADER_LEN: usize = 4 + 2 + 1 + 4;
/// A pointer without its location bytes.
const POINTER_FIXED_LEN: usize = 8 + 8 + 8 + 2;
/// The deepest tree weft reads: `fanout^MAX_LEVELS` leaves is beyond any
/// log, and the bound keeps every level count a `u8`.
pub const MAX_LEVELS: usize = 32;

/// Names one history page and what it covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PagePointer {
    /// The first sequence the page covers (its first entry's).
    pub first_seq: u64,
    /// One past the last sequence the page covers (its last entry's end).
    pub end_seq: u64,
    /// How many manifest entries the page's subtree holds.
    pub entries: u64,
    /// Object path of the page.
    pub location: String,
}

impl PagePointer {
    /// True when `seq` falls within `[first_seq, end_seq)`.
    pub fn contains(&self, seq: u64) -> bool {
        seq >= self.first_seq && seq < self.end_seq
    }

    fn encoded_len(&self) -> usize {
        POINTER_FIXED_LEN + self.location.len()
    }
}

/// The frontier of a v5 manifest's history tree, and its retention point.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct History {
    /// The sequence of the first live entry: everything before it is
    /// truncated, even where a page still holds it.
    pub live_from: u64,
    /// `levels[k]`: pointers to level-k pages not yet gathered into a page
    /// of level k+1, oldest first. Higher levels hold older ranges.
    pub levels: Vec<Vec<PagePointer>>,
}

impl History {
    /// Every pointer in sequence order: highest level first, each level
    /// oldest first.
    pub fn pointers(&self) -> impl Iterator<Item = (usize, &PagePointer)> {
        self.levels
            .iter()
            .enumerate()
            .rev()
            .flat_map(|(level, ps)| ps.iter().map(move |p| (level, p)))
    }

    /// True when no page is named.
    pub fn is_empty(&self) -> bool {
        self.levels.iter().all(Vec::is_empty)
    }

    /// The first sequence the pages cover, if any.
    pub fn first_seq(&self) -> Option<u64> {
        self.pointers().next().map(|(_, p)| p.first_seq)
    }

    /// One past the last sequence the pages cover, if any: where the
    /// manifest's own entries begin.
    pub fn end_seq(&self) -> Option<u64> {
        self.pointers().last().map(|(_, p)| p.end_seq)
    }

    /// How many manifest entries the pages hold (truncated ones included).
    pub fn entries(&self) -> u64 {
        self.pointers()
            .map(|(_, p)| p.entries)
            .fold(0, u64::saturating_add)
    }

    /// Encoded length of the history block.
    pub fn encoded_len(&self) -> usize {
        8 + 1
            + self
                .levels
                .iter()
                .map(|l| 2 + l.iter().map(PagePointer::encoded_len).sum::<usize>())
                .sum::<usize>()
    }
}

/// What a history page holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PageItems {
    /// A leaf (level 0): manifest entries.
    Entries(Vec<ManifestEntry>),
    /// An interior page (level > 0): pointers to pages one level down.
    Pointers(Vec<PagePointer>),
}

/// One immutable page of a manifest's history.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HistoryPage {
    /// 0 for a leaf; pages one level down for anything above.
    pub level: u8,
    /// The items, in sequence order.
    pub items: PageItems,
}

impl HistoryPage {
    /// The sequences the page covers: `[first, end)` of its items.
    pub fn range(&self) -> Option<(u64, u64)> {
        match &self.items {
            PageItems::Entries(es) => Some((es.first()?.sequence, es.last()?.end_sequence())),
            PageItems::Pointers(ps) => Some((ps.first()?.first_seq, ps.last()?.end_seq)),
        }
    }

    /// How many manifest entries the page's subtree holds.
    pub fn entries(&self) -> u64 {
        match &self.items {
            PageItems::Entries(es) => es.len() as u64,
            PageItems::Pointers(ps) => ps.iter().map(|p| p.entries).fold(0, u64::saturating_add),
        }
    }
}

fn put_pointer(p: &PagePointer, out: &mut BytesMut) -> Result<()> {
    let loc_len = u16::try_from(p.location.len()).map_err(|_| {
        Error::invalid_input(format!(
            "page location of {} bytes exceeds the u16 length field",
            p.location.len()
        ))
    })?;
    out.put_u64_le(p.first_seq);
    out.put_u64_le(p.end_seq);
    out.put_u64_le(p.entries);
    out.put_u16_le(loc_len);
    out.put_slice(p.location.as_bytes());
    Ok(())
}

fn read_pointer(c: &mut Reader<'_>) -> Result<PagePointer> {
    let first_seq = c.u64("pointer first_seq")?;
    let end_seq = c.u64("pointer end_seq")?;
    let entries = c.u64("pointer entries")?;
    let loc_len = c.u16("pointer location length")? as usize;
    let loc = c.take(loc_len, "pointer location")?;
    let location = std::str::from_utf8(loc)
        .map_err(|e| Error::corrupt("history: page location is not UTF-8").with_source(e))?
        .to_owned();
    Ok(PagePointer {
        first_seq,
        end_seq,
        entries,
        location,
    })
}

/// Pointers in order, each non-empty, none before the previous one ends.
fn check_pointers(ps: &[PagePointer]) -> std::result::Result<(), String> {
    let mut prev_end: Option<u64> = None;
    for (i, p) in ps.iter().enumerate() {
        if p.first_seq >= p.end_seq {
            return Err(format!(
                "pointer {i} covers the empty range {}..{}",
                p.first_seq, p.end_seq
            ));
        }
        if p.entries == 0 || p.location.is_empty() {
            return Err(format!("pointer {i} names no entries or no location"));
        }
        if let Some(end) = prev_end
            && p.first_seq < end
        {
            return Err(format!(
                "pointer {i} starts at {} before the previous one ends at {end}",
                p.first_seq
            ));
        }
        prev_end = Some(p.end_seq);
    }
    Ok(())
}

/// The rules a v5 manifest's history obeys together with its entries: at
/// least one page (a manifest without pages has no history at all), the
/// top level not empty, pointers in sequence order across levels (highest
/// level first), the recent entries after the last pointer, `live_from`
/// inside the first pointer's range, and at most [`MAX_LEVELS`] levels.
pub(crate) fn check_history(
    history: &History,
    entries: &[ManifestEntry],
    next_sequence: u64,
) -> std::result::Result<(), String> {
    if history.levels.len() > MAX_LEVELS {
        return Err(format!(
            "history has {} levels, more than {MAX_LEVELS}",
            history.levels.len()
        ));
    }
    if history.levels.last().is_some_and(Vec::is_empty) {
        return Err("history ends with an empty level".into());
    }
    let all: Vec<PagePointer> = history.pointers().map(|(_, p)| p.clone()).collect();
    check_pointers(&all).map_err(|m| format!("history: {m}"))?;
    for level in &history.levels {
        if level.len() > usize::from(u16::MAX) {
            return Err("history level holds more than u16::MAX pointers".into());
        }
    }
    let (Some(first), Some(last)) = (all.first(), all.last()) else {
        return Err("a history block names at least one page".into());
    };
    if !first.contains(history.live_from) {
        return Err(format!(
            "history live_from {} is outside the first page's range {}..{}",
            history.live_from, first.first_seq, first.end_seq
        ));
    }
    if let Some(e) = entries.first()
        && e.sequence < last.end_seq
    {
        return Err(format!(
            "the first entry starts at {} before the history ends at {}",
            e.sequence, last.end_seq
        ));
    }
    if last.end_seq > next_sequence {
        return Err(format!(
            "the history ends at {} beyond next_sequence {next_sequence}",
            last.end_seq
        ));
    }
    Ok(())
}

/// Appends the history block to `out`.
///
/// Errors: `InvalidInput` for a location over `u16::MAX` bytes or more
/// levels or pointers than the counts hold. Nothing is written on error.
pub(crate) fn encode_history_block(history: &History, out: &mut BytesMut) -> Result<()> {
    let levels = u8::try_from(history.levels.len())
        .ok()
        .filter(|&n| usize::from(n) <= MAX_LEVELS)
        .ok_or_else(|| Error::invalid_input("a history holds at most 32 levels"))?;
    let mut buf = BytesMut::with_capacity(history.encoded_len());
    buf.put_u64_le(history.live_from);
    buf.put_u8(levels);
    for level in &history.levels {
        let n = u16::try_from(level.len())
            .map_err(|_| Error::invalid_input("a history level holds at most 65535 pointers"))?;
        buf.put_u16_le(n);
        for p in level {
            put_pointer(p, &mut buf)?;
        }
    }
    out.put_slice(&buf);
    Ok(())
}

/// Reads a history block from `c`.
///
/// Errors: `Corrupt` for a truncated block or more than [`MAX_LEVELS`]
/// levels. The ordering rules are checked by the manifest decoder.
pub(crate) fn decode_history_block(c: &mut Reader<'_>) -> Result<History> {
    let live_from = c.u64("history live_from")?;
    let level_count = c.u8("history level count")? as usize;
    if level_count > MAX_LEVELS {
        return Err(Error::corrupt(format!(
            "history: {level_count} levels, more than {MAX_LEVELS}"
        )));
    }
    let mut levels = Vec::with_capacity(level_count);
    for _ in 0..level_count {
        let n = c.u16("history pointer count")? as usize;
        if n > c.remaining() / POINTER_FIXED_LEN {
            return Err(Error::corrupt(format!(
                "history: a level claims {n} pointers in {} bytes",
                c.remaining()
            )));
        }
        let mut level = Vec::with_capacity(n);
        for _ in 0..n {
            level.push(read_pointer(c)?);
        }
        levels.push(level);
    }
    Ok(History { live_from, levels })
}

/// Encodes a history page.
///
/// Errors: `InvalidInput` for an empty page, more than `u32::MAX` items, a
/// leaf that is not level 0 (or pointers at level 0), entries or pointers
/// out of order, and field sizes over their length fields.
pub fn encode_page(page: &HistoryPage) -> Result<Bytes> {
    let mut out = BytesMut::new();
    out.put_slice(PAGE_MAGIC);
    out.put_u16_le(PAGE_VERSION);
    out.put_u8(page.level);
    match &page.items {
        PageItems::Entries(es) => {
            if page.level != 0 {
                return Err(Error::invalid_input("entries belong in a level-0 page"));
            }
            check_leaf(es).map_err(|m| Error::invalid_input(format!("history page: {m}")))?;
            out.put_u32_le(item_count(es.len())?);
            for e in es {
                encode_entry(e, ManifestVersion::V5, &mut out)?;
            }
        }
        PageItems::Pointers(ps) => {
            if page.level == 0 {
                return Err(Error::invalid_input("a level-0 page holds entries"));
            }
            if ps.is_empty() {
                return Err(Error::invalid_input("a history page needs an item"));
            }
            check_pointers(ps).map_err(|m| Error::invalid_input(format!("history page: {m}")))?;
            out.put_u32_le(item_count(ps.len())?);
            for p in ps {
                put_pointer(p, &mut out)?;
            }
        }
    }
    let crc = crc32c::crc32c(&out);
    out.put_u32_le(crc);
    Ok(out.freeze())
}

fn item_count(n: usize) -> Result<u32> {
    u32::try_from(n)
        .map_err(|_| Error::invalid_input("a history page holds at most u32::MAX items"))
}

fn check_leaf(es: &[ManifestEntry]) -> std::result::Result<(), String> {
    let Some(last) = es.last() else {
        return Err("a history page needs an item".into());
    };
    check_entries(ManifestVersion::V5, es, last.end_sequence())
}

/// Decodes a history page.
///
/// Errors: `Corrupt` for a wrong magic, version or checksum, a truncated
/// or empty page, trailing bytes, and items that break the ordering rules.
pub fn decode_page(bytes: &[u8]) -> Result<HistoryPage> {
    const WHAT: &str = "history page";
    if bytes.len() < PAGE_HEADER_LEN + 4 {
        return Err(Error::corrupt(format!(
            "history page: {} bytes is too short",
            bytes.len()
        )));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let actual = crc32c::crc32c(body);
    if stored != actual {
        return Err(Error::corrupt(format!(
            "history page: crc32c mismatch: stored {stored:08x}, computed {actual:08x}"
        )));
    }
    let mut c = Reader::new(body, WHAT);
    if c.take(4, "magic")? != PAGE_MAGIC {
        return Err(Error::corrupt("history page: bad magic"));
    }
    let version = c.u16("version")?;
    if version != PAGE_VERSION {
        return Err(Error::corrupt(format!(
            "history page: unknown version {version}"
        )));
    }
    let level = c.u8("level")?;
    let count = c.u32("item count")? as usize;
    let items = if level == 0 {
        if count > c.remaining() / ManifestVersion::V5.min_entry_len() {
            return Err(Error::corrupt(format!(
                "history page: claims {count} entries in {} bytes",
                c.remaining()
            )));
        }
        let mut es = Vec::with_capacity(count);
        for i in 0..count {
            es.push(
                decode_entry_in(&mut c, ManifestVersion::V5)
                    .map_err(|e| e.context(format!("history page entry {i}")))?,
            );
        }
        check_leaf(&es).map_err(|m| Error::corrupt(format!("history page: {m}")))?;
        PageItems::Entries(es)
    } else {
        if count > c.remaining() / POINTER_FIXED_LEN {
            return Err(Error::corrupt(format!(
                "history page: claims {count} pointers in {} bytes",
                c.remaining()
            )));
        }
        let mut ps = Vec::with_capacity(count);
        for _ in 0..count {
            ps.push(read_pointer(&mut c)?);
        }
        if ps.is_empty() {
            return Err(Error::corrupt("history page: no items"));
        }
        check_pointers(&ps).map_err(|m| Error::corrupt(format!("history page: {m}")))?;
        PageItems::Pointers(ps)
    };
    if c.remaining() != 0 {
        return Err(Error::corrupt(format!(
            "history page: {} bytes after the last item",
            c.remaining()
        )));
    }
    Ok(HistoryPage { level, items })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn entry(sequence: u64, count: u32) -> ManifestEntry {
        ManifestEntry {
            sequence,
            count: Some(count),
            location: format!("seg/{sequence}"),
            metadata: vec![],
        }
    }

    fn pointer(first: u64, end: u64) -> PagePointer {
        PagePointer {
            first_seq: first,
            end_seq: end,
            entries: 2,
            location: format!("hist/{first}"),
        }
    }

    #[test]
    fn pages_round_trip_and_refuse_damage() {
        let leaf = HistoryPage {
            level: 0,
            items: PageItems::Entries(vec![entry(0, 3), entry(3, 2)]),
        };
        let inner = HistoryPage {
            level: 1,
            items: PageItems::Pointers(vec![pointer(0, 5), pointer(5, 9)]),
        };
        for page in [leaf, inner] {
            let bytes = encode_page(&page).unwrap();
            assert_eq!(decode_page(&bytes).unwrap(), page);
            for cut in 0..bytes.len() {
                assert_eq!(
                    decode_page(&bytes[..cut]).unwrap_err().kind(),
                    ErrorKind::Corrupt
                );
            }
            let mut flipped = bytes.to_vec();
            flipped[6] ^= 1;
            assert_eq!(
                decode_page(&flipped).unwrap_err().kind(),
                ErrorKind::Corrupt
            );
        }
        assert_eq!(
            decode_page(
                &encode_page(&HistoryPage {
                    level: 0,
                    items: PageItems::Entries(vec![entry(0, 3)]),
                })
                .unwrap()
            )
            .unwrap()
            .range(),
            Some((0, 3))
        );
    }

    #[test]
    fn pages_refuse_what_a_reader_could_not_use() {
        let cases = [
            HistoryPage {
                level: 0,
                items: PageItems::Entries(vec![]),
            },
            HistoryPage {
                level: 1,
                items: PageItems::Entries(vec![entry(0, 1)]),
            },
            HistoryPage {
                level: 0,
                items: PageItems::Pointers(vec![pointer(0, 1)]),
            },
            HistoryPage {
                level: 0,
                items: PageItems::Entries(vec![entry(3, 2), entry(0, 1)]),
            },
            HistoryPage {
                level: 2,
                items: PageItems::Pointers(vec![pointer(4, 9), pointer(0, 5)]),
            },
            HistoryPage {
                level: 2,
                items: PageItems::Pointers(vec![pointer(4, 4)]),
            },
        ];
        for page in cases {
            assert_eq!(
                encode_page(&page).unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{page:?}"
            );
        }
    }

    #[test]
    fn history_rules() {
        let h = History {
            live_from: 2,
            levels: vec![vec![pointer(5, 9)], vec![pointer(0, 5)]],
        };
        assert_eq!(
            h.pointers()
                .map(|(l, p)| (l, p.first_seq))
                .collect::<Vec<_>>(),
            vec![(1, 0), (0, 5)]
        );
        assert_eq!(
            (h.first_seq(), h.end_seq(), h.entries()),
            (Some(0), Some(9), 4)
        );
        check_history(&h, &[entry(9, 1)], 10).unwrap();
        // An entry inside the history, live_from outside the first page,
        // levels out of order, a trailing empty level.
        assert!(check_history(&h, &[entry(8, 1)], 10).is_err());
        let mut bad = h.clone();
        bad.live_from = 5;
        assert!(check_history(&bad, &[], 10).is_err());
        let mut bad = h.clone();
        bad.levels.swap(0, 1);
        assert!(check_history(&bad, &[], 10).is_err());
        let mut bad = h.clone();
        bad.levels.push(vec![]);
        assert!(check_history(&bad, &[], 10).is_err());
        assert!(check_history(&h, &[], 8).is_err());
        // A history names at least one page.
        let empty = History {
            live_from: 4,
            levels: vec![vec![]],
        };
        assert!(check_history(&empty, &[entry(4, 1)], 5).is_err());
    }
}
