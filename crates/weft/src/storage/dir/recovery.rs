//! Opening a log directory: finish an interrupted trim, scan every segment,
//! cut a torn tail, refuse damaged data, rebuild the counters and indexes.
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
//! Walking a segment, the backend keeps every frame up to the last one that
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
//!   provably) acknowledged: a **torn tail**. The segment is truncated back
//!   to the end of the last whole batch and the truncation is synced.
//!
//! A damaged frame inside the last group whose sync had completed cannot be
//! told from a torn write; it is treated as torn. A frame with a valid
//! checksum but an unexpected seqnum or version is always corrupt. Segments
//! written in [`SyncMode::Relaxed`](super::SyncMode::Relaxed) carry a flag;
//! in a relaxed last segment many groups may be unsynced, so any damage is
//! cut at the last whole batch without the later-group test.
//!
//! A `Corrupt` error leaves every file untouched.

use std::collections::HashMap;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use tracing::{info, warn};

use super::fsutil::{self, TEMP_SUFFIX};
use super::segment::{self, HEADER_LEN, Segment};
use super::trim;
use crate::error::{Error, Result};
use crate::format::dir_segment::SegmentHeader;
use crate::format::frame::{self, FIXED_LEN, FrameError, FrameMeta, MIN_FRAME_LEN};
use crate::model::{LogTag, MAX_ENTRY_BYTES, MAX_TAG_PART_BYTES, MAX_TAGS_PER_ENTRY};
use crate::storage::index::LogIndex;

/// The longest frame any writer can have produced.
const MAX_FRAME_LEN: usize =
    FIXED_LEN + MAX_TAGS_PER_ENTRY * (4 + 2 * MAX_TAG_PART_BYTES) + MAX_ENTRY_BYTES;

/// How much of a segment the scan reads at once.
const CHUNK: usize = 4 << 20;

/// Distinct tag lists the scan keeps decoded; past this it starts over.
const TAG_CACHE_LIMIT: usize = 1 << 16;

/// Hashes the `u64` it is given through a multiplicative mix (the keys
/// are CRC-32C values already).
#[derive(Default)]
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
struct Cached {
    raw: Box<[u8]>,
    tags: Rc<[LogTag]>,
    primary: usize,
}

/// Decoded tag lists by their encoded bytes, and the version counter of
/// every primary tag by a small number. Most entries of a log repeat a few
/// tag lists; decoding (validating, allocating) and hashing each one again
/// would dominate the scan of a log of small entries.
struct TagCache {
    lists: MixMap<Vec<Cached>>,
    cached: usize,
    ids: HashMap<LogTag, usize>,
    /// Per stream number: the tag and its next version.
    streams: Vec<(LogTag, u64)>,
}

impl TagCache {
    fn new(base: HashMap<LogTag, u64>) -> Self {
        let streams: Vec<(LogTag, u64)> = base.into_iter().collect();
        let ids = streams
            .iter()
            .enumerate()
            .map(|(i, (t, _))| (t.clone(), i))
            .collect();
        TagCache {
            lists: MixMap::default(),
            cached: 0,
            ids,
            streams,
        }
    }

    fn get(&mut self, raw: &[u8], count: usize) -> Result<(Rc<[LogTag]>, usize), FrameError> {
        let key = u64::from(crc32c::crc32c(raw));
        if let Some(hit) = self
            .lists
            .get(&key)
            .and_then(|bucket| bucket.iter().find(|c| &*c.raw == raw))
        {
            return Ok((Rc::clone(&hit.tags), hit.primary));
        }
        let tags: Rc<[LogTag]> = frame::decode_tags(raw, count)?.into();
        let primary = match self.ids.get(&tags[0]) {
            Some(&id) => id,
            None => {
                self.streams.push((tags[0].clone(), 0));
                self.ids.insert(tags[0].clone(), self.streams.len() - 1);
                self.streams.len() - 1
            }
        };
        if self.cached >= TAG_CACHE_LIMIT {
            self.lists.clear();
            self.cached = 0;
        }
        self.cached += 1;
        self.lists.entry(key).or_default().push(Cached {
            raw: raw.into(),
            tags: Rc::clone(&tags),
            primary,
        });
        Ok((tags, primary))
    }

    /// The next version of every primary tag that has one.
    fn into_versions(self) -> HashMap<LogTag, u64> {
        self.streams.into_iter().filter(|(_, v)| *v > 0).collect()
    }
}

/// What a directory holds after recovery.
#[derive(Debug)]
pub(super) struct Recovered {
    /// Live segments in log order; the last one is where writing resumes.
    pub(super) segments: Vec<Segment>,
    pub(super) index: LogIndex,
    /// Next version of every primary tag ever written (trimmed ones too).
    pub(super) versions: HashMap<LogTag, u64>,
    pub(super) next_seqnum: u64,
}

/// Recovers the log in `dir` (which the caller has locked).
///
/// Errors: `Corrupt` for damaged data that is not a torn tail; I/O kinds.
pub(super) fn recover(dir: &Path) -> Result<Recovered> {
    let mut firsts = Vec::new();
    let mut removed_temp = false;
    let listing = fs::read_dir(dir).map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
    for entry in listing {
        let entry = entry.map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(TEMP_SUFFIX) {
            fsutil::remove_file(&entry.path())?;
            removed_temp = true;
        } else if let Some(first) = segment::parse_name(name) {
            firsts.push(first);
        }
    }
    if removed_temp {
        fsutil::sync_dir(dir)?;
    }
    firsts.sort_unstable();

    let trim = trim::load(dir)?;
    let live_from = trim.as_ref().map_or(0, |t| t.through.saturating_add(1));

    // Finish a trim the crash interrupted: segments wholly below the trim
    // point (the next segment starts at or before the first live seqnum).
    let doomed = firsts.windows(2).take_while(|w| w[1] <= live_from).count();
    if doomed > 0 {
        for &first in &firsts[..doomed] {
            fsutil::remove_file(&dir.join(segment::file_name(first)))?;
        }
        fsutil::sync_dir(dir)?;
        firsts.drain(..doomed);
        info!(segments = doomed, "removed segments below the trim point");
    }
    if let Some(&first) = firsts.first()
        && first > live_from
    {
        return Err(Error::corrupt(format!(
            "{}: the first segment starts at seqnum {first}, but entries from {live_from} on \
             should be live; segments are missing",
            dir.display()
        )));
    }

    let mut scan = Scan {
        live_from,
        next: firsts.first().copied().unwrap_or(live_from),
        index: LogIndex::starting_at(live_from),
        tags: TagCache::new(
            trim.map(|t| t.next_versions.into_iter().collect())
                .unwrap_or_default(),
        ),
    };
    let mut segments = Vec::with_capacity(firsts.len());
    for (i, &first) in firsts.iter().enumerate() {
        let last = i + 1 == firsts.len();
        if let Some(seg) = scan.segment(dir, first, last)? {
            segments.push(seg);
        }
    }
    let next_seqnum = scan.next.max(live_from);
    Ok(Recovered {
        segments,
        index: scan.index,
        versions: scan.tags.into_versions(),
        next_seqnum,
    })
}

struct Scan {
    live_from: u64,
    /// The seqnum the next frame must carry.
    next: u64,
    index: LogIndex,
    tags: TagCache,
}

/// A frame read during the scan (its payload is not kept).
struct Scanned {
    meta: FrameMeta,
    tags: Rc<[LogTag]>,
    /// Stream number of the primary tag in the [`TagCache`].
    primary: usize,
    offset: u64,
}

impl Scan {
    /// Scans one segment; `None` when it holds no entry and was removed.
    fn segment(&mut self, dir: &Path, first: u64, last: bool) -> Result<Option<Segment>> {
        let path = dir.join(segment::file_name(first));
        let corrupt = |why: String| Error::corrupt(format!("{}: {why}", path.display()));
        let file = segment::open_file(&path)?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("stat {}", path.display()), e))?
            .len();
        let mut head = vec![0; (HEADER_LEN.min(len)) as usize];
        file.read_exact_at(&mut head, 0)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        let header = match SegmentHeader::decode(&head) {
            Ok(h) => h,
            Err(_) if last && len <= HEADER_LEN => {
                // The crash interrupted the segment's creation.
                warn!(path = %path.display(), "removing a segment whose creation was interrupted");
                drop(file);
                fsutil::remove_file(&path)?;
                fsutil::sync_dir(dir)?;
                return Ok(None);
            }
            Err(e) => return Err(corrupt(e.message().to_owned())),
        };
        if header.first_seqnum != first {
            return Err(corrupt(format!(
                "header says the segment starts at {}, its name says {first}",
                header.first_seqnum
            )));
        }
        if first != self.next {
            return Err(corrupt(format!(
                "segment starts at seqnum {first}, but the log before it ends at {}",
                self.next
            )));
        }

        let mut seg = Segment {
            first,
            path: path.clone(),
            file: Arc::new(file),
            offsets: Vec::new(),
            end: HEADER_LEN,
            relaxed: header.relaxed,
        };
        let file = Arc::clone(&seg.file);
        let mut reader = Chunks::new(&file, len);
        let mut pending: Vec<Scanned> = Vec::new();
        let mut pos = HEADER_LEN;
        let damage = loop {
            if pos == len {
                break (!pending.is_empty())
                    .then(|| (pos, "the file ends inside a batch".to_owned()));
            }
            let frame = reader
                .frame(pos, &mut self.tags)
                .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
            match frame {
                Ok((meta, (tags, primary), frame_len)) => {
                    let want = self.next + pending.len() as u64;
                    if meta.seqnum != want {
                        return Err(corrupt(format!(
                            "frame at byte {pos} has seqnum {}, expected {want}",
                            meta.seqnum
                        )));
                    }
                    pending.push(Scanned {
                        meta,
                        tags,
                        primary,
                        offset: pos,
                    });
                    pos += frame_len as u64;
                    if meta.batch_end {
                        self.commit(&mut seg, pending.drain(..))
                            .map_err(|e| e.context(path.display()))?;
                        seg.end = pos;
                    }
                }
                Err(why) => break Some((pos, why.to_string())),
            }
        };

        if let Some((at, why)) = damage {
            if !last {
                return Err(corrupt(format!(
                    "damaged at byte {at} ({why}), and later segments exist"
                )));
            }
            let torn_from = self.next;
            if !seg.relaxed {
                if let Some(p) = pending.iter().find(|p| p.meta.group_first() > torn_from) {
                    return Err(corrupt(format!(
                        "frame at byte {} belongs to a group written after the damaged entry {torn_from}",
                        p.offset
                    )));
                }
                if let Some(p) = reader
                    .later_group(at, torn_from, &mut self.tags)
                    .map_err(|e| Error::io(format!("read {}", path.display()), e))?
                {
                    return Err(corrupt(format!(
                        "damaged at byte {at} ({why}), but a valid frame of a later group \
                         follows at byte {p}: the damaged bytes had been synced"
                    )));
                }
            }
            warn!(
                path = %path.display(),
                at,
                cut = seg.end,
                dropped_bytes = len - seg.end,
                reason = %why,
                "truncating a torn tail"
            );
            file.set_len(seg.end)
                .and_then(|()| file.sync_data())
                .map_err(|e| Error::io(format!("truncate {}", path.display()), e))?;
        }

        if last && seg.offsets.is_empty() {
            // Nothing to resume into; the writer starts a fresh segment.
            drop(reader);
            drop(seg);
            drop(file);
            fsutil::remove_file(&path)?;
            fsutil::sync_dir(dir)?;
            return Ok(None);
        }
        Ok(Some(seg))
    }

    /// Accounts for one whole batch.
    fn commit(&mut self, seg: &mut Segment, batch: impl Iterator<Item = Scanned>) -> Result<()> {
        for entry in batch {
            let offset = u32::try_from(entry.offset)
                .map_err(|_| Error::corrupt("segment larger than 4 GiB"))?;
            seg.offsets.push(offset);
            let seqnum = entry.meta.seqnum;
            self.next = seqnum + 1;
            if seqnum < self.live_from {
                continue;
            }
            let version = entry.meta.stream_version;
            let Some((primary, next)) = self.tags.streams.get_mut(entry.primary) else {
                return Err(Error::internal("scan lost a stream number"));
            };
            if *next != version {
                return Err(Error::corrupt(format!(
                    "entry {seqnum} has version {version} of {primary}, expected {next}"
                )));
            }
            *next += 1;
            self.index.insert(seqnum, &entry.tags, version)?;
        }
        Ok(())
    }
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
            self.file.read_exact_at(&mut self.buf, at)?;
            self.start = at;
        }
        Ok(self.buf.get((at - self.start) as usize..).unwrap_or(&[]))
    }

    /// The frame at `at`: its fixed fields, tags and length, or why the
    /// bytes there are not a frame.
    #[allow(clippy::type_complexity)]
    fn frame(
        &mut self,
        at: u64,
        cache: &mut TagCache,
    ) -> std::io::Result<Result<(FrameMeta, (Rc<[LogTag]>, usize), usize), FrameError>> {
        let len = self.len;
        let head = self.window(at, FIXED_LEN)?;
        let need = frame::claimed_len(head).unwrap_or(FIXED_LEN);
        if at.saturating_add(need as u64) > len {
            return Ok(Err(FrameError::Incomplete { needed: need }));
        }
        self.window(at, need)?;
        let bytes = self.buf.get((at - self.start) as usize..).unwrap_or(&[]);
        let head = match frame::decode_head(bytes) {
            Ok(head) => head,
            Err(e) => return Ok(Err(e)),
        };
        Ok(cache
            .get(head.raw_tags, head.tag_count)
            .map(|tags| (head.meta, tags, head.frame_len)))
    }

    /// The offset of a valid frame after `damage` whose group started after
    /// `torn_from`, if there is one.
    fn later_group(
        &mut self,
        damage: u64,
        torn_from: u64,
        cache: &mut TagCache,
    ) -> std::io::Result<Option<u64>> {
        let end = self.len;
        let mut p = damage + 1;
        while p + MIN_FRAME_LEN as u64 <= end {
            let w = self.window(p, FIXED_LEN)?;
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
                && matches!(self.frame(p, cache)?, Ok((meta, _, _)) if meta.group_first() > torn_from)
            {
                return Ok(Some(p));
            }
            p += 1;
        }
        Ok(None)
    }
}
