//! Opening a log directory on its log index: check the index against the
//! log, judge only what lies after the point the index covers, bring the
//! index up to date; for the writer, then carry out the survey's repairs —
//! remove temporary files and what an interrupted trim left, cut a torn
//! tail, remove a last segment without entries.
//!
//! The index is derived state ([`crate::index`]). It is used only when it
//! proves it describes this log: its tip — the frame checksum it recorded
//! for the last entry it covers — must be the checksum of the frame its
//! locator leads to. Otherwise (missing, damaged, another log's, behind a
//! trim, ahead of the log) it is started over at the log's first live
//! entry and rebuilt by a survey of every segment: slow, once. The same
//! happens when the survey of the tail refuses what it finds: a survey
//! of the whole log then gives the verdict, so a damaged or stale index
//! can never turn a readable log into a refused one, or the reverse.
//!
//! A segment written in relaxed sync mode may have lost unsynced pages to
//! an OS crash anywhere after its last sync, even before the index's
//! covered point; when the tip lies in such a last segment, the whole
//! segment is judged again (at most `segment_bytes`).

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use tracing::{debug, info, warn};

use super::fsutil;
use super::scan::{self, Access, Layout, Repair, Start, Survey, Versions};
use super::segment::{self, HEADER_LEN};
use super::walk::{Locator, Locators, Position, Walker};
use crate::error::{Error, ErrorKind, Result};
use crate::format::dir_segment::SegmentHeader;
use crate::index::Index;
use crate::model::AppendResult;
use crate::model::LogTag;

/// The writer's index directory, inside the log directory.
pub(super) const INDEX_DIR: &str = "index";

/// The identity the writer's index records. The directory names the log;
/// a log replaced under the same name is caught by the tip check.
pub(super) const IDENTITY: &[u8] = b"weft dir log";

/// A log directory judged and its index brought up to date.
#[derive(Debug)]
pub(super) struct Opened {
    pub(super) survey: Survey,
    /// Entries read into the index on open.
    pub(super) replayed: u64,
    /// Where the next locator goes.
    pub(super) locators: Locators,
    /// The append ids of the live entries the survey read, with their
    /// results, in log order.
    pub(super) tail_ids: Vec<(Box<str>, AppendResult)>,
    /// The first seqnum the survey read (entries before it were read into
    /// the index by an earlier open).
    pub(super) scanned_from: u64,
}

/// Judges the log in `dir` and records in `index` every whole batch it
/// does not cover yet (see the module docs). Changes no file of the log.
///
/// Errors: `Corrupt` for damage that is not a torn tail and for missing
/// segments; the index's errors; I/O kinds.
pub(super) fn open_indexed(dir: &Path, index: &Arc<Index>, access: Access) -> Result<Opened> {
    let layout = scan::layout(dir)?;
    let live_from = layout.live_from();
    let floors = floors(&layout);
    if index.first() != live_from && matches!(index.tip(), Ok(None)) {
        // An index that covers nothing (a fresh one) of a trimmed log: it
        // starts where the log does; nothing is being rebuilt.
        index.start_at(live_from, &floors)?;
    }
    let start = match plan_start(dir, &layout, index) {
        Ok(start) => start,
        Err(why) => {
            index.start_over(live_from, &floors, &why)?;
            None
        }
    };
    match survey_into(dir, layout, access, index, start) {
        Err(e) if start.is_some() && retry_from_scratch(&e) => {
            index.start_over(
                live_from,
                &floors,
                &format!("the log after the index's covered point: {e}"),
            )?;
            survey_into(dir, scan::layout(dir)?, access, index, None)
        }
        outcome => outcome,
    }
}

fn retry_from_scratch(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::NotFound)
}

/// The version floors the trim file records.
fn floors(layout: &Layout) -> Vec<(LogTag, u64)> {
    layout
        .trim
        .as_ref()
        .map(|t| t.next_versions.clone())
        .unwrap_or_default()
}

/// Where the survey starts: after the index's tip if the index proves to
/// describe this log (`None`: from the beginning, into an index that
/// covers nothing), else why the index must start over.
fn plan_start(
    dir: &Path,
    layout: &Layout,
    index: &Index,
) -> std::result::Result<Option<Start>, String> {
    let live_from = layout.live_from();
    if index.first() > live_from {
        return Err(format!(
            "it starts at entry {}, the log at {live_from}",
            index.first()
        ));
    }
    let tip = index.tip().map_err(|e| format!("its tip: {e}"))?;
    let Some((tip, check)) = tip else {
        return if index.first() == live_from {
            Ok(None)
        } else {
            Err(format!(
                "it is empty from entry {}, the log starts at {live_from}",
                index.first()
            ))
        };
    };
    if tip < live_from {
        return Err(format!("everything it covers (to entry {tip}) was trimmed"));
    }
    let (at, bytes) = index
        .locate(tip)
        .map_err(|e| format!("its locator of entry {tip}: {e}"))?
        .ok_or_else(|| format!("it has no locator for entry {tip}"))?;
    let loc = Locator::decode(&bytes).map_err(|e| e.to_string())?;
    if !layout.firsts.contains(&loc.segment) {
        return Err(format!(
            "it places entry {at} in segment {}, which is not there",
            segment::file_name(loc.segment)
        ));
    }
    let path = dir.join(segment::file_name(loc.segment));
    let file = segment::open_file(&path, false).map_err(|e| e.to_string())?;
    let len = file
        .metadata()
        .map_err(|e| format!("stat {}: {e}", path.display()))?
        .len();
    let file = Arc::new(file);
    let mut walker = Walker::new(Arc::clone(&file), path.clone(), len);
    let found = walker
        .skip_to(
            Position {
                offset: u64::from(loc.offset),
                seqnum: at,
            },
            tip,
        )
        .and_then(|pos| walker.read(pos))
        .map_err(|e| format!("its tip entry {tip}: {e}"))?;
    let (_, after, crc) = found;
    if u64::from(crc) != check {
        return Err(format!(
            "its tip entry {tip} has checksum {check:#x}, the log's {crc:#x}"
        ));
    }
    if index.first() < live_from {
        // A trim whose record in the index a crash interrupted.
        index
            .trim(live_from, &floors(layout))
            .map_err(|e| format!("recording the trim point: {e}"))?;
    }
    let last = layout.firsts.last().copied();
    if last == Some(loc.segment) && relaxed(&file) {
        return Ok(Some(Start {
            segment: loc.segment,
            offset: HEADER_LEN,
            seqnum: loc.segment,
            check_from: tip + 1,
        }));
    }
    Ok(Some(Start {
        segment: loc.segment,
        offset: after.offset,
        seqnum: tip + 1,
        check_from: tip + 1,
    }))
}

/// True when the segment's header says it was written in relaxed mode.
fn relaxed(file: &std::fs::File) -> bool {
    let mut head = [0u8; HEADER_LEN as usize];
    file.read_exact_at(&mut head, 0).is_ok()
        && SegmentHeader::decode(&head).is_ok_and(|h| h.relaxed)
}

/// Surveys from `start`, pushing every live entry from the index's next
/// one into it.
fn survey_into(
    dir: &Path,
    layout: Layout,
    access: Access,
    index: &Arc<Index>,
    start: Option<Start>,
) -> Result<Opened> {
    let from = index.next();
    let mut locators = Locators::default();
    let mut replayed = 0u64;
    let mut tail_ids = Vec::new();
    let scanned_from = start.map_or_else(|| layout.live_from(), |s| s.seqnum);
    let survey = scan::survey(
        dir,
        layout,
        access,
        Versions::Index(Arc::clone(index)),
        start,
        |a| {
            if a.live
                && let Some(id) = &a.append_id
            {
                tail_ids.push((id.clone(), a.result()));
            }
            if !a.live || a.seqnum < from {
                return Ok(());
            }
            replayed += 1;
            index.push(&[locators.index_entry(a)])
        },
    )?;
    if survey.next_seqnum < from {
        return Err(Error::corrupt(format!(
            "{}: the log's whole batches end at entry {}, before the index's covered point {from}",
            dir.display(),
            survey.next_seqnum
        )));
    }
    if replayed > 0 {
        info!(dir = %dir.display(), replayed, "brought the log index up to date");
    }
    Ok(Opened {
        survey,
        replayed,
        locators,
        tail_ids,
        scanned_from,
    })
}

/// Carries out what opening for writing changes (the survey's repairs).
///
/// Errors: I/O kinds.
pub(super) fn repair(dir: &Path, repairs: &[Repair]) -> Result<()> {
    let mut removed = false;
    for repair in repairs {
        match repair {
            Repair::RemoveTemp { path } => {
                fsutil::remove_file(path)?;
                removed = true;
            }
            Repair::RemoveBelowTrim { path } => {
                info!(path = %path.display(), "removing a segment below the trim point");
                fsutil::remove_file(path)?;
                removed = true;
            }
            Repair::RemoveUnfinished { path } => {
                warn!(path = %path.display(), "removing a segment without a whole batch");
                fsutil::remove_file(path)?;
                removed = true;
            }
            Repair::CutUnwritten { path, keep, len } => {
                debug!(
                    path = %path.display(),
                    cut = keep,
                    unwritten_bytes = len - keep,
                    "cutting the preallocated space of the last segment"
                );
                cut_file(path, *keep)?;
            }
            Repair::CutTornTail {
                path,
                keep,
                len,
                at,
                why,
                ..
            } => {
                warn!(
                    path = %path.display(),
                    at,
                    cut = keep,
                    dropped_bytes = len - keep,
                    reason = %why,
                    "truncating a torn tail"
                );
                cut_file(path, *keep)?;
            }
        }
    }
    if removed {
        fsutil::sync_dir(dir)?;
    }
    Ok(())
}

/// Truncates the file at `path` to `keep` bytes, durably.
fn cut_file(path: &Path, keep: u64) -> Result<()> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(keep).and_then(|()| f.sync_data()))
        .map_err(|e| Error::io(format!("truncate {}", path.display()), e))
}
