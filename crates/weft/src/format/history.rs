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
pub use super::history_block::{History, MAX_LEVELS, PagePointer};
use super::history_block::{POINTER_FIXED_LEN, check_pointers, put_pointer, read_pointer};
use super::manifest::{
    ManifestEntry, ManifestVersion, check_entries, decode_entry_in, encode_entry,
};
use crate::error::{Error, Result};

const PAGE_MAGIC: &[u8; 4] = b"WHP1";
const PAGE_VERSION: u16 = 1;
/// Magic, version, level, item count.
const PAGE_HEADER_LEN: usize = 4 + 2 + 1 + 4;
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
    use crate::format::history_block::tests::pointer;

    fn entry(sequence: u64, count: u32) -> ManifestEntry {
        ManifestEntry {
            sequence,
            count: Some(count),
            location: format!("seg/{sequence}"),
            metadata: vec![],
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
}
