//! The history block of a v5 manifest: the frontier of its history tree
//! (the pointers to pages not yet gathered into a page one level up) and
//! its retention point. The pages themselves, which hold manifest entries,
//! are [`super::history`]; the block is apart so that the manifest, which
//! carries it, and the pages, which carry manifest entries, need not
//! import each other. Layout in `docs/FORMATS.md` and [`super::history`].

use bytes::{BufMut, BytesMut};

use super::fields::Reader;
use crate::error::{Error, Result};

/// A pointer without its location bytes.
pub(super) const POINTER_FIXED_LEN: usize = 8 + 8 + 8 + 2;
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

    pub(super) fn encoded_len(&self) -> usize {
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

pub(super) fn put_pointer(p: &PagePointer, out: &mut BytesMut) -> Result<()> {
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

pub(super) fn read_pointer(c: &mut Reader<'_>) -> Result<PagePointer> {
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
pub(super) fn check_pointers(ps: &[PagePointer]) -> std::result::Result<(), String> {
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
    first_entry: Option<u64>,
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
    if let Some(first_entry) = first_entry
        && first_entry < last.end_seq
    {
        return Err(format!(
            "the first entry starts at {first_entry} before the history ends at {}",
            last.end_seq
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A pointer to a page of two entries covering `first..end`.
    pub(in crate::format) fn pointer(first: u64, end: u64) -> PagePointer {
        PagePointer {
            first_seq: first,
            end_seq: end,
            entries: 2,
            location: format!("hist/{first}"),
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
        check_history(&h, Some(9), 10).unwrap();
        // An entry inside the history, live_from outside the first page,
        // levels out of order, a trailing empty level.
        assert!(check_history(&h, Some(8), 10).is_err());
        let mut bad = h.clone();
        bad.live_from = 5;
        assert!(check_history(&bad, None, 10).is_err());
        let mut bad = h.clone();
        bad.levels.swap(0, 1);
        assert!(check_history(&bad, None, 10).is_err());
        let mut bad = h.clone();
        bad.levels.push(vec![]);
        assert!(check_history(&bad, None, 10).is_err());
        assert!(check_history(&h, None, 8).is_err());
        // A history names at least one page.
        let empty = History {
            live_from: 4,
            levels: vec![vec![]],
        };
        assert!(check_history(&empty, Some(4), 5).is_err());
    }
}
