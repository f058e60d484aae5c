//! The one judgement of a log directory's data, which opening for writing
//! (`recovery.rs`), a read-only [`DirFollower`](super::DirFollower) and
//! [`check`](super::check()) all make through [`survey`]: finish or see an
//! interrupted trim, scan every segment, tell a torn tail from damage,
//! rebuild the counters and indexes. Whatever the survey refuses
//! (`Corrupt`), opening refuses and reading refuses; whatever it would cut
//! or remove is a [`Repair`], which opening for writing carries out, a
//! follower waits past, and `check` reports.
//!
//! ## Torn tail or corruption?
//!
//! The writer keeps one invariant that makes the two distinguishable: it
//! writes one *group* (one `write`, whole append batches, one segment) and
//! does not write the next group until the sync of the previous one has
//! returned. So after a crash only the bytes of the last group can be
//! missing or garbled; everything before it was synced. Every frame
//! records its group's first seqnum (through `group_offset`).
//!
//! Walking a segment, the scan keeps every frame up to the last one that
//! ends an append batch (`BATCH_END`). At the first damaged frame (short,
//! bad checksum, bad fields) or at an end of file inside a batch, let `t`
//! be the first seqnum not kept. Then:
//!
//! * if the segment is not the last one, the log is **corrupt**: a segment
//!   is synced in full before the next one is created;
//! * if any valid frame later in the segment belongs to a group that
//!   started after `t` (group first seqnum `> t`), the damaged bytes had
//!   been synced before that later group was written: **corrupt**;
//! * otherwise the damage lies in the last group, which was never (or not
//!   provably) acknowledged: a **torn tail**, cut back to the end of the
//!   last whole batch.
//!
//! A damaged frame inside the last group whose sync had completed cannot be
//! told from a torn write; it is treated as torn. A frame with a valid
//! checksum but an unexpected seqnum or version is always corrupt. Segments
//! written in [`SyncMode::Relaxed`](super::SyncMode::Relaxed) carry a flag;
//! in a relaxed last segment many groups may be unsynced, so any damage is
//! cut at the last whole batch without the later-group test.
//!
//! Around the segments: the first live segment must start at or before the
//! first live seqnum (the trim point plus one), or entries are missing —
//! **corrupt**, never a silently shorter log; each segment must start where
//! the previous one ended; segments wholly below the trim point are left
//! over from an interrupted trim (removed); a last segment no longer than
//! a header whose header is invalid is an interrupted creation (removed).
//!
//! The survey changes nothing; a `Corrupt` error leaves every file as it
//! was for opening too.
//!
//! ## Where a survey starts
//!
//! `check` (and a handle without a usable log index) surveys every segment
//! from its header. A handle whose log index covers the log up to some
//! entry starts where that entry ends ([`Start`]): the segments before are
//! taken as the names list them and judged only when read (a damaged frame
//! there is `Corrupt` to its reader), so opening costs the tail written
//! since the index's covered point, not the log's length. The judgement of
//! that tail — torn or damaged — is the same.
//!
//! ## Stream versions
//!
//! Each stream's versions must run densely. The scan learns where a stream
//! it meets for the first time stands from the trim point's counters
//! (`check`) or from the log index ([`Versions`]). A trim point records
//! only the streams with no entry left after it, so in a trimmed log a
//! stream the counters do not know may start at any version (its earlier
//! entries were trimmed); from there on it must run densely.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use super::fsutil::TEMP_SUFFIX;
use super::segment::{self, HEADER_LEN, Segment};
use super::trim::{self, TrimPoint};
use crate::error::{Error, Result};
use crate::format::dir_segment::SegmentHeader;
use crate::format::frame::{self, FIXED_LEN, FrameError, FrameMeta, MIN_FRAME_LEN};
use crate::index::Index;
use crate::model::{AppendResult, LogTag, MAX_ENTRY_BYTES, MAX_TAG_PART_BYTES, MAX_TAGS_PER_ENTRY};

/// The longest frame any writer can have produced.
const MAX_FRAME_LEN: usize = FIXED_LEN
    + MAX_TAGS_PER_ENTRY * (4 + 2 * MAX_TAG_PART_BYTES)
    + 1
    + frame::MAX_FRAME_APPEND_ID
    + MAX_ENTRY_BYTES;

/// How much of a segment the scan reads at once.
const CHUNK: usize = 4 << 20;

/// Distinct tag lists the scan keeps decoded; past this it starts over.
const TAG_CACHE_LIMIT: usize = 1 << 16;

/// Streams whose counters a scan over a log index keeps in memory; past
/// this it forgets them and asks the index again.
const STREAM_CACHE_LIMIT: usize = 1 << 16;

/// Hashes the `u64` it is given through a multiplicative mix (the keys
/// are CRC-32C values already).
#[derive(Default, Debug)]
struct MixHasher(u64);

impl std::hash::Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type MixMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<MixHasher>>;

/// One decoded tag list, with the stream number of its primary tag.
#[derive(Debug)]
struct Cached {
    raw: Box<[u8]>,
    tags: Rc<[LogTag]>,
    primary: usize,
}

/// Where a scan learns the next version of a stream it meets for the
/// first time.
#[derive(Clone, Debug)]
pub(super) enum Versions {
    /// From the trim point's counters; the scan counts every stream itself
    /// (in memory: `check`).
    Counted,
    /// From a log index that holds every entry before where the scan
    /// started, and to which the scan's caller hands every entry it
    /// accepts before the scan reads on.
    Index(Arc<Index>),
}

/// Decoded tag lists by their encoded bytes, and the version counter of
/// every primary tag by a small number. Most entries of a log repeat a few
/// tag lists; decoding (validating, allocating) and hashing each one again
/// would dominate the scan of a log of small entries.
#[derive(Debug)]
struct TagCache {
    lists: MixMap<Vec<Cached>>,
    cached: usize,
    ids: HashMap<LogTag, usize>,
    /// Per stream number: the tag and its next version (`None`: unknown,
    /// its first entry seen may have any version).
    streams: Vec<(LogTag, Option<u64>)>,
    /// The trim point's counters.
    floors: HashMap<LogTag, u64>,
    versions: Versions,
    /// The log was trimmed: a stream the counters do not know may have
    /// lost its first entries.
    trimmed: bool,
}

impl TagCache {
    fn new(trim: Option<&TrimPoint>, versions: Versions) -> Self {
        TagCache {
            lists: MixMap::default(),
            cached: 0,
            ids: HashMap::new(),
            streams: Vec::new(),
            floors: trim
                .map(|t| t.next_versions.iter().cloned().collect())
                .unwrap_or_default(),
            versions,
            trimmed: trim.is_some(),
        }
    }

    /// The next version of a stream met for the first time.
    fn lookup(&self, tag: &LogTag) -> Result<Option<u64>> {
        let known = match &self.versions {
            Versions::Counted => self.floors.get(tag).copied(),
            Versions::Index(index) => Some(index.next_version(tag)?).filter(|&v| v > 0),
        };
        Ok(match known {
            Some(v) => Some(v),
            None if self.trimmed => None,
            None => Some(0),
        })
    }

    #[allow(clippy::type_complexity)]
    fn get(
        &mut self,
        raw: &[u8],
        count: usize,
    ) -> Result<Result<(Rc<[LogTag]>, usize), FrameError>> {
        let key = u64::from(crc32c::crc32c(raw));
        if let Some(hit) = self
            .lists
            .get(&key)
            .and_then(|bucket| bucket.iter().find(|c| &*c.raw == raw))
        {
            return Ok(Ok((Rc::clone(&hit.tags), hit.primary)));
        }
        let tags: Rc<[LogTag]> = match frame::decode_tags(raw, count) {
            Ok(tags) => tags.into(),
            Err(e) => return Ok(Err(e)),
        };
        let primary = match self.ids.get(&tags[0]) {
            Some(&id) => id,
            None => {
                let next = self.lookup(&tags[0])?;
                self.streams.push((tags[0].clone(), next));
                self.ids.insert(tags[0].clone(), self.streams.len() - 1);
                self.streams.len() - 1
            }
        };
        self.cached += 1;
        self.lists.entry(key).or_default().push(Cached {
            raw: raw.into(),
            tags: Rc::clone(&tags),
            primary,
        });
        Ok(Ok((tags, primary)))
    }

    /// Bounds the caches. Called between batches only: a pending entry
    /// holds a stream number.
    fn tidy(&mut self) {
        if self.cached >= TAG_CACHE_LIMIT {
            self.lists.clear();
            self.cached = 0;
        }
        // Over an index, every accepted entry is in the index by now, so
        // a forgotten stream is looked up again exactly.
        if matches!(self.versions, Versions::Index(_)) && self.streams.len() >= STREAM_CACHE_LIMIT {
            self.lists.clear();
            self.cached = 0;
            self.ids.clear();
            self.streams.clear();
        }
    }

    /// The next version of every primary tag that has one (complete when
    /// the versions are [`Versions::Counted`]).
    fn versions(&self) -> HashMap<LogTag, u64> {
        let mut out: HashMap<LogTag, u64> = self
            .floors
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(t, v)| (t.clone(), *v))
            .collect();
        for (t, v) in &self.streams {
            if let Some(v) = v.filter(|&v| v > 0) {
                out.insert(t.clone(), v);
            }
        }
        out
    }
}

/// How a survey opens segment files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    /// For the writer, which appends to the last segment.
    ReadWrite,
    /// For readers, which never write.
    ReadOnly,
}

/// Something opening the log for writing would change in the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Repair {
    /// Remove a half-written replacement file.
    RemoveTemp { path: PathBuf },
    /// Remove a segment wholly below the trim point (an interrupted trim).
    RemoveBelowTrim { path: PathBuf },
    /// Remove the last segment, which holds no whole batch (its creation
    /// or its first write was interrupted).
    RemoveUnfinished { path: PathBuf },
    /// Truncate the last segment to `keep` bytes: the bytes after it are
    /// zeros the writer set aside ([`DirOptions::preallocate_bytes`]) and
    /// never wrote. Nothing of an entry is in them.
    ///
    /// [`DirOptions::preallocate_bytes`]: super::DirOptions::preallocate_bytes
    CutUnwritten {
        path: PathBuf,
        /// Bytes kept: the end of the last whole batch.
        keep: u64,
        /// The file's length.
        len: u64,
    },
    /// Truncate the last segment to `keep` bytes: the bytes after it are a
    /// torn last write.
    CutTornTail {
        path: PathBuf,
        /// Bytes kept: the end of the last whole batch.
        keep: u64,
        /// The file's length.
        len: u64,
        /// The first seqnum not kept.
        from_seqnum: u64,
        /// Where the damage is, and what it is.
        at: u64,
        why: String,
    },
}

impl Repair {
    /// True when carrying it out drops bytes that hold (parts of) entries.
    pub(super) fn drops_data(&self) -> bool {
        matches!(self, Repair::CutTornTail { .. })
    }
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Repair::RemoveTemp { path } => {
                write!(
                    f,
                    "{}: a half-written replacement; opening removes it",
                    path.display()
                )
            }
            Repair::RemoveBelowTrim { path } => write!(
                f,
                "{}: wholly below the trim point (an interrupted trim); opening removes it",
                path.display()
            ),
            Repair::RemoveUnfinished { path } => write!(
                f,
                "{}: holds no whole batch (its creation was interrupted); opening removes it",
                path.display()
            ),
            Repair::CutUnwritten { path, keep, len } => write!(
                f,
                "{}: the last {} bytes are space set aside for writes and never written \
                 (zeros); opening cuts the file to {keep} bytes",
                path.display(),
                len - keep
            ),
            Repair::CutTornTail {
                path,
                keep,
                len,
                from_seqnum,
                at,
                why,
            } => write!(
                f,
                "{}: the last {} bytes, from entry {from_seqnum} on, are an unfinished write \
                 (at byte {at}: {why}); opening cuts the file to {keep} bytes, and those \
                 entries are not in the log",
                path.display(),
                len - keep
            ),
        }
    }
}

/// One whole batch's entry the scan accepted.
pub(super) struct Accepted {
    pub(super) seqnum: u64,
    pub(super) tags: Rc<[LogTag]>,
    pub(super) version: u64,
    /// The first seqnum of its segment (the segment's name).
    pub(super) segment: u64,
    pub(super) timestamp_ms: u64,
    /// Its append id, if its frame carries one.
    pub(super) append_id: Option<Box<str>>,
    /// Where its frame starts in the segment.
    pub(super) offset: u64,
    /// The frame's CRC-32C (what the log index records as its check).
    pub(super) crc: u32,
    /// Where its frame ends (for the last entry of a batch: where the
    /// whole batches end).
    pub(super) end: u64,
    /// At or above the first live seqnum (below it, the entry only shares
    /// a segment with live ones).
    pub(super) live: bool,
}

/// The parts of a segment a scan reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct SegmentRef<'a> {
    /// Its first seqnum (its name).
    pub(super) first: u64,
    pub(super) path: &'a Path,
    pub(super) file: &'a File,
    /// Written in relaxed sync mode (many unsynced groups may be torn).
    pub(super) relaxed: bool,
}

impl<'a> SegmentRef<'a> {
    pub(super) fn of(seg: &'a Segment, file: &'a File) -> Self {
        SegmentRef {
            first: seg.first,
            path: &seg.path,
            file,
            relaxed: seg.relaxed,
        }
    }
}

/// Where the scan of one segment ended.
#[derive(Debug)]
pub(super) struct Scanned {
    /// The end of the last whole batch: where the next frame goes.
    pub(super) end: u64,
    /// The torn tail after `end`, if the segment has one.
    pub(super) torn: Option<Repair>,
}

/// The judged contents of a log directory.
#[derive(Debug)]
pub(super) struct Survey {
    /// Live segments with at least one entry, in log order.
    pub(super) segments: Vec<Segment>,
    /// The seqnum the next entry gets.
    pub(super) next_seqnum: u64,
    pub(super) trim: Option<TrimPoint>,
    /// What opening for writing changes, in the order it does it.
    pub(super) repairs: Vec<Repair>,
    /// The state to scan on from (a follower keeps it).
    pub(super) scan: Scan,
}

impl Survey {
    /// The next version of every primary tag ever written, trimmed ones
    /// included (complete for a survey whose versions are
    /// [`Versions::Counted`]).
    pub(super) fn versions(&self) -> HashMap<LogTag, u64> {
        self.scan.tags.versions()
    }

    /// The first live seqnum.
    pub(super) fn live_from(&self) -> u64 {
        self.scan.live_from
    }
}

/// The segment files of `dir` by first seqnum, in log order, and its
/// temporary files.
pub(super) fn list(dir: &Path) -> Result<(Vec<u64>, Vec<PathBuf>)> {
    let mut firsts = Vec::new();
    let mut temps = Vec::new();
    let listing =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
    for entry in listing {
        let entry = entry.map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(TEMP_SUFFIX) {
            temps.push(entry.path());
        } else if let Some(first) = segment::parse_name(name) {
            firsts.push(first);
        }
    }
    firsts.sort_unstable();
    temps.sort();
    Ok((firsts, temps))
}

/// The first live seqnum of a log trimmed at `trim`.
pub(super) fn live_from(trim: Option<&TrimPoint>) -> u64 {
    trim.map_or(0, |t| t.through.saturating_add(1))
}

/// How many of `firsts` (sorted) lie wholly below `live_from`: a segment
/// does when the next one starts at or before the first live seqnum.
pub(super) fn below_trim(firsts: &[u64], live_from: u64) -> usize {
    firsts.windows(2).take_while(|w| w[1] <= live_from).count()
}

/// A log directory as its names and its trim file show it, before any
/// segment is read.
#[derive(Debug)]
pub(super) struct Layout {
    /// The live segments' first seqnums, in log order.
    pub(super) firsts: Vec<u64>,
    pub(super) trim: Option<TrimPoint>,
    /// Temporary files and segments an interrupted trim left.
    pub(super) repairs: Vec<Repair>,
}

impl Layout {
    /// The first live seqnum.
    pub(super) fn live_from(&self) -> u64 {
        live_from(self.trim.as_ref())
    }
}

/// Lists `dir` and loads its trim point (see the module docs).
///
/// Errors: `Corrupt` when the first live segment starts after the first
/// live seqnum (segments are missing) or the trim file is damaged; I/O
/// kinds.
pub(super) fn layout(dir: &Path) -> Result<Layout> {
    // The listing comes before the trim file: a trim replaces the trim
    // file before it deletes segments, so a listing that misses deleted
    // segments is always read with the trim point that deleted them.
    let (mut firsts, temps) = list(dir)?;
    let mut repairs: Vec<Repair> = temps
        .into_iter()
        .map(|path| Repair::RemoveTemp { path })
        .collect();
    let trim = trim::load(dir)?;
    let live_from = live_from(trim.as_ref());
    let doomed = below_trim(&firsts, live_from);
    for &first in &firsts[..doomed] {
        repairs.push(Repair::RemoveBelowTrim {
            path: dir.join(segment::file_name(first)),
        });
    }
    firsts.drain(..doomed);
    check_first(dir, firsts.first().copied(), live_from)?;
    Ok(Layout {
        firsts,
        trim,
        repairs,
    })
}

/// Where a survey starts reading, when not at the first segment's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Start {
    /// The segment (its first seqnum) it starts in.
    pub(super) segment: u64,
    /// The byte offset of the first frame to read.
    pub(super) offset: u64,
    /// That frame's seqnum.
    pub(super) seqnum: u64,
    /// Versions are checked (and handed on) from this seqnum: the entries
    /// before it are in the log index already, and are only judged as
    /// bytes (at least `seqnum`).
    pub(super) check_from: u64,
}

/// Judges the log in `dir` as `layout` found it (see the module docs),
/// from `start` (`None`: every segment from its header), handing every
/// entry of every whole batch to `accept` in log order. Changes nothing.
///
/// Errors: `Corrupt` for damage that is not a torn tail and for missing
/// segments; `NotFound` when `start` names a segment that is not there;
/// `accept`'s; I/O kinds.
pub(super) fn survey(
    dir: &Path,
    layout: Layout,
    access: Access,
    versions: Versions,
    start: Option<Start>,
    mut accept: impl FnMut(&Accepted) -> Result<()>,
) -> Result<Survey> {
    let Layout {
        firsts,
        trim,
        mut repairs,
    } = layout;
    let live_from = live_from(trim.as_ref());
    let mut scan = Scan::new(dir, access, trim.as_ref(), versions);
    let begin = match start {
        None => 0,
        Some(s) => firsts.iter().position(|&f| f == s.segment).ok_or_else(|| {
            Error::new(
                crate::ErrorKind::NotFound,
                format!(
                    "{}: no segment {} to resume the scan in",
                    dir.display(),
                    segment::file_name(s.segment)
                ),
            )
        })?,
    };
    let mut segments = Vec::with_capacity(firsts.len());
    for w in firsts.windows(2).take(begin) {
        segments.push(Segment::sealed(dir, w[0], w[1]));
    }
    if let Some(s) = start {
        scan.resume(s.seqnum, s.check_from);
    }
    for (i, &first) in firsts.iter().enumerate().skip(begin) {
        let last = i + 1 == firsts.len();
        let resume = start.filter(|_| i == begin);
        let Some((mut seg, file)) = scan.open_segment(first, last, resume.is_some())? else {
            repairs.push(Repair::RemoveUnfinished {
                path: dir.join(segment::file_name(first)),
            });
            continue;
        };
        let from = resume.map_or(HEADER_LEN, |s| s.offset);
        let scanned = scan.segment(SegmentRef::of(&seg, &file), from, last, &mut accept)?;
        seg.end = scanned.end;
        seg.next = scan.next;
        repairs.extend(scanned.torn);
        if seg.entries() == 0 {
            // Only a last segment gets here: nothing to resume into.
            repairs.push(Repair::RemoveUnfinished { path: seg.path });
            continue;
        }
        segments.push(seg);
    }
    let next_seqnum = scan.next.max(live_from);
    Ok(Survey {
        segments,
        next_seqnum,
        trim,
        repairs,
        scan,
    })
}

impl Accepted {
    /// The answer its append got.
    pub(super) fn result(&self) -> AppendResult {
        AppendResult {
            seqnum: self.seqnum,
            stream_version: self.version,
            primary_tag: self.tags[0].clone(),
            timestamp_ms: self.timestamp_ms,
        }
    }
}

/// `Corrupt` unless the first live segment (`first`, if any) starts at or
/// before `live_from`.
pub(super) fn check_first(dir: &Path, first: Option<u64>, live_from: u64) -> Result<()> {
    match first {
        Some(first) if first > live_from => Err(Error::corrupt(format!(
            "{}: the first segment starts at seqnum {first}, but entries from {live_from} on \
             should be live (no trim record covers them); segments are missing",
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// The scan's running state: what the next frame must be.
#[derive(Debug)]
pub(super) struct Scan {
    dir: PathBuf,
    access: Access,
    live_from: u64,
    /// The seqnum the next frame must carry.
    next: u64,
    /// A segment has been opened (only the first may start below `next`).
    seen_segment: bool,
    /// Versions are checked from this seqnum on (see [`Start::check_from`]).
    check_from: u64,
    tags: TagCache,
}

impl Scan {
    pub(super) fn new(
        dir: &Path,
        access: Access,
        trim: Option<&TrimPoint>,
        versions: Versions,
    ) -> Scan {
        let live_from = live_from(trim);
        Scan {
            dir: dir.to_path_buf(),
            access,
            live_from,
            next: live_from,
            seen_segment: false,
            check_from: 0,
            tags: TagCache::new(trim, versions),
        }
    }

    /// Continues from the frame of `seqnum` (in the segment opened next),
    /// checking versions from `check_from` on.
    fn resume(&mut self, seqnum: u64, check_from: u64) {
        self.next = seqnum;
        self.check_from = check_from;
    }

    /// The seqnum the next frame must carry.
    pub(super) fn next(&self) -> u64 {
        self.next
    }

    /// The first live seqnum.
    pub(super) fn live_from(&self) -> u64 {
        self.live_from
    }

    /// The log was trimmed at `trim` while a follower watched. When the
    /// scan had not reached the trim point yet, the entries in between are
    /// gone unread: it starts over at the trim point, with the stream
    /// counters the trim file records.
    pub(super) fn trimmed(&mut self, trim: &TrimPoint) {
        let live_from = live_from(Some(trim));
        if live_from <= self.live_from {
            return;
        }
        self.live_from = live_from;
        if self.next < live_from {
            let versions = self.tags.versions.clone();
            *self = Scan::new(&self.dir, self.access, Some(trim), versions);
        }
    }

    /// Opens the segment starting at `first` and checks its header; `None`
    /// when it is the last one and its creation was interrupted (no longer
    /// than a header, and the header is not whole). `resume`: the scan
    /// goes on inside it, from the seqnum it was resumed at.
    ///
    /// Errors: `Corrupt` for a damaged header, a header that disagrees with
    /// the file name, or a segment that does not start where the log before
    /// it ends; I/O kinds (`NotFound` when it vanished).
    pub(super) fn open_segment(
        &mut self,
        first: u64,
        last: bool,
        resume: bool,
    ) -> Result<Option<(Segment, File)>> {
        let path = self.dir.join(segment::file_name(first));
        let corrupt = |why: String| Error::corrupt(format!("{}: {why}", path.display()));
        let file = segment::open_file(&path, self.access == Access::ReadWrite)?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
            .len();
        let mut head = vec![0; HEADER_LEN.min(len) as usize];
        file.read_exact_at(&mut head, 0)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        let header = match SegmentHeader::decode(&head) {
            Ok(h) => h,
            Err(_) if last && len <= HEADER_LEN => return Ok(None),
            Err(e) => return Err(corrupt(e.message().to_owned())),
        };
        if header.first_seqnum != first {
            return Err(corrupt(format!(
                "header says the segment starts at {}, its name says {first}",
                header.first_seqnum
            )));
        }
        // The first segment may start below the first live seqnum (the
        // trim point falls inside it); every later one where the log
        // before it ends.
        let fits = if self.seen_segment && !resume {
            first == self.next
        } else {
            first <= self.next
        };
        if !fits {
            return Err(corrupt(format!(
                "segment starts at seqnum {first}, but the log before it ends at {}",
                self.next
            )));
        }
        self.seen_segment = true;
        if !resume {
            self.next = first;
        }
        Ok(Some((
            Segment {
                first,
                path,
                end: HEADER_LEN,
                next: self.next,
                relaxed: header.relaxed,
                append_ids: header.allows_append_ids(),
            },
            file,
        )))
    }

    /// Scans `seg` from byte `from` (the end of its last whole batch seen
    /// so far) to its current end, handing every entry of every whole batch
    /// to `accept`. Returns where the whole batches end, and a torn tail
    /// after them if there is one.
    ///
    /// Errors: `Corrupt` (see the module docs); I/O kinds.
    pub(super) fn segment(
        &mut self,
        seg: SegmentRef<'_>,
        from: u64,
        last: bool,
        mut accept: impl FnMut(&Accepted) -> Result<()>,
    ) -> Result<Scanned> {
        let path = seg.path;
        let corrupt = |why: String| Error::corrupt(format!("{}: {why}", path.display()));
        let io = |e| Error::io(format!("read {}", path.display()), e);
        let len = seg
            .file
            .metadata()
            .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
            .len();
        let mut reader = Chunks::new(seg.file, len);
        let segment = seg.first;
        let mut pending: Vec<Pending> = Vec::new();
        let mut pos = from;
        let mut end = from;
        let damage = loop {
            if pos >= reader.len {
                break (!pending.is_empty())
                    .then(|| (pos, "the file ends inside a batch".to_owned()));
            }
            match reader.frame(pos, &mut self.tags, io)? {
                Ok(framed) => {
                    let Framed {
                        meta,
                        tags,
                        primary,
                        len: frame_len,
                        crc,
                        append_id,
                    } = framed;
                    let want = self.next + pending.len() as u64;
                    if meta.seqnum != want {
                        return Err(corrupt(format!(
                            "frame at byte {pos} has seqnum {}, expected {want}",
                            meta.seqnum
                        )));
                    }
                    pending.push(Pending {
                        meta,
                        tags,
                        primary,
                        append_id,
                        offset: pos,
                        end: pos + frame_len as u64,
                        crc,
                    });
                    pos += frame_len as u64;
                    if meta.batch_end {
                        for p in pending.drain(..) {
                            let accepted = self
                                .account(p, segment)
                                .map_err(|e| e.context(path.display()))?;
                            accept(&accepted)?;
                        }
                        end = pos;
                        self.tags.tidy();
                    }
                }
                Err(why) => break Some((pos, describe(&mut reader, pos, &why).map_err(&io)?)),
            }
        };
        let Some((at, why)) = damage else {
            return Ok(Scanned { end, torn: None });
        };
        if !last {
            return Err(corrupt(format!(
                "damaged at byte {at} ({why}), and later segments exist"
            )));
        }
        // Nothing after the last whole batch but zeros: the writer's
        // preallocated space (or a write that left no byte behind).
        if pending.is_empty() && at == end && reader.zeros_from(at).map_err(&io)? {
            return Ok(Scanned {
                end,
                torn: Some(Repair::CutUnwritten {
                    path: path.to_path_buf(),
                    keep: end,
                    len: reader.len,
                }),
            });
        }
        let torn_from = self.next;
        if !seg.relaxed {
            if let Some(p) = pending.iter().find(|p| p.meta.group_first() > torn_from) {
                return Err(corrupt(format!(
                    "frame at byte {} belongs to a group written after the damaged entry {torn_from}",
                    p.offset
                )));
            }
            if let Some(p) = reader.later_group(at, torn_from, &mut self.tags, io)? {
                return Err(corrupt(format!(
                    "damaged at byte {at} ({why}), but a valid frame of a later group \
                     follows at byte {p}: the damaged bytes had been synced"
                )));
            }
        }
        Ok(Scanned {
            end,
            torn: Some(Repair::CutTornTail {
                path: path.to_path_buf(),
                keep: end,
                len: reader.len,
                from_seqnum: torn_from,
                at,
                why,
            }),
        })
    }

    /// Checks one entry of a whole batch and counts it.
    fn account(&mut self, entry: Pending, segment: u64) -> Result<Accepted> {
        let seqnum = entry.meta.seqnum;
        self.next = seqnum + 1;
        let live = seqnum >= self.live_from;
        let version = entry.meta.stream_version;
        if live && seqnum >= self.check_from {
            let Some((primary, next)) = self.tags.streams.get_mut(entry.primary) else {
                return Err(Error::internal("scan lost a stream number"));
            };
            if let Some(next) = *next
                && next != version
            {
                return Err(Error::corrupt(format!(
                    "entry {seqnum} has version {version} of {primary}, expected {next}"
                )));
            }
            *next = Some(version + 1);
        }
        Ok(Accepted {
            seqnum,
            tags: entry.tags,
            version,
            segment,
            offset: entry.offset,
            crc: entry.crc,
            timestamp_ms: entry.meta.timestamp_ms,
            append_id: entry.append_id,
            end: entry.end,
            live,
        })
    }
}

/// What the bytes at `at` are, for a message: zeroed space says more than
/// the frame error it causes.
fn describe(reader: &mut Chunks<'_>, at: u64, why: &FrameError) -> std::io::Result<String> {
    let rest = reader.len - at;
    if rest <= CHUNK as u64 && reader.window(at, rest as usize)?.iter().all(|&b| b == 0) {
        return Ok(format!(
            "the last {rest} bytes are zeros: space allocated, data never written"
        ));
    }
    Ok(why.to_string())
}

/// A frame read during the scan, in a batch not yet whole (its payload is
/// not kept).
struct Pending {
    meta: FrameMeta,
    tags: Rc<[LogTag]>,
    /// Stream number of the primary tag in the [`TagCache`].
    primary: usize,
    append_id: Option<Box<str>>,
    offset: u64,
    end: u64,
    crc: u32,
}

/// A frame as the scan reads it: fixed fields, tags, length, checksum and
/// append id (the payload is not kept).
struct Framed {
    meta: FrameMeta,
    tags: Rc<[LogTag]>,
    /// Stream number of the primary tag in the [`TagCache`].
    primary: usize,
    len: usize,
    crc: u32,
    append_id: Option<Box<str>>,
}

/// Reads a segment in large chunks and hands out frames.
struct Chunks<'f> {
    file: &'f File,
    len: u64,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    start: u64,
}

impl<'f> Chunks<'f> {
    fn new(file: &'f File, len: u64) -> Self {
        Chunks {
            file,
            len,
            buf: Vec::new(),
            start: 0,
        }
    }

    /// The bytes from `at` on, at least `need` of them unless the file ends
    /// sooner.
    fn window(&mut self, at: u64, need: usize) -> std::io::Result<&[u8]> {
        let have_end = self.start + self.buf.len() as u64;
        let want_end = at.saturating_add(need as u64).min(self.len);
        if at < self.start || want_end > have_end {
            let read = (self.len.saturating_sub(at) as usize).min(need.max(CHUNK));
            self.buf.resize(read, 0);
            let got = read_up_to(self.file, &mut self.buf, at)?;
            if got < read {
                // The file got shorter while being read (a writer's
                // recovery cut a torn tail): judge what is there.
                self.buf.truncate(got);
                self.len = at + got as u64;
            }
            self.start = at;
        }
        Ok(self.buf.get((at - self.start) as usize..).unwrap_or(&[]))
    }

    /// True when every byte from `at` to the end of the file is zero.
    fn zeros_from(&mut self, at: u64) -> std::io::Result<bool> {
        let mut p = at;
        while p < self.len {
            let w = self.window(p, CHUNK)?;
            if w.is_empty() {
                break;
            }
            if w.iter().any(|&b| b != 0) {
                return Ok(false);
            }
            p += w.len() as u64;
        }
        Ok(true)
    }

    /// The frame at `at`, or why the bytes there are not a frame.
    fn frame(
        &mut self,
        at: u64,
        cache: &mut TagCache,
        io: impl Fn(std::io::Error) -> Error,
    ) -> Result<Result<Framed, FrameError>> {
        let head = self.window(at, FIXED_LEN).map_err(&io)?;
        let need = frame::claimed_len(head).unwrap_or(FIXED_LEN);
        if at.saturating_add(need as u64) > self.len {
            return Ok(Err(FrameError::Incomplete { needed: need }));
        }
        self.window(at, need).map_err(&io)?;
        let bytes = self.buf.get((at - self.start) as usize..).unwrap_or(&[]);
        let head = match frame::decode_head(bytes) {
            Ok(head) => head,
            Err(e) => return Ok(Err(e)),
        };
        let crc = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        Ok(cache
            .get(head.raw_tags, head.tag_count)?
            .map(|(tags, primary)| Framed {
                meta: head.meta,
                tags,
                primary,
                len: head.frame_len,
                crc,
                append_id: head.append_id.map(Box::from),
            }))
    }

    /// The offset of a valid frame after `damage` whose group started after
    /// `torn_from`, if there is one.
    fn later_group(
        &mut self,
        damage: u64,
        torn_from: u64,
        cache: &mut TagCache,
        io: impl Fn(std::io::Error) -> Error,
    ) -> Result<Option<u64>> {
        let mut p = damage + 1;
        while p + MIN_FRAME_LEN as u64 <= self.len {
            let end = self.len;
            let w = self.window(p, FIXED_LEN).map_err(&io)?;
            // No frame starts with a zero length: step over a run of zeros
            // (a writer's preallocated space) to the last place a length
            // ending in its first non-zero byte could start.
            if w.len() >= 4 && w[..4] == [0; 4] {
                let zeros = w.iter().take_while(|&&b| b == 0).count();
                p += zeros.saturating_sub(3).max(1) as u64;
                continue;
            }
            let plausible = match (frame::claimed_len(w), frame::claimed_position(w)) {
                (Some(len), Some((seqnum, offset))) => {
                    (MIN_FRAME_LEN..=MAX_FRAME_LEN).contains(&len)
                        && p + len as u64 <= end
                        && seqnum > torn_from
                        && seqnum - torn_from < 1 << 32
                        && seqnum.saturating_sub(u64::from(offset)) > torn_from
                }
                _ => false,
            };
            if plausible
                && matches!(self.frame(p, cache, &io)?, Ok(f) if f.meta.group_first() > torn_from)
            {
                return Ok(Some(p));
            }
            p += 1;
        }
        Ok(None)
    }
}

/// Reads into `buf` from `at` until it is full or the file ends; returns
/// the bytes read.
fn read_up_to(file: &File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], at + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
