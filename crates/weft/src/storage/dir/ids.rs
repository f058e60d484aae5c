//! The writer's append-id window, rebuilt on open.
//!
//! Opening scans only the entries the log index does not cover, so the
//! ids the survey saw are those of the newest entries only. The window is
//! filled further by walking the segments before the survey's start
//! backward, newest first, until it holds
//! [`DirOptions::append_id_window`](super::DirOptions::append_id_window)
//! ids or that many entries have been walked over (counting the surveyed
//! ones): a log without ids then costs a bounded walk rather than a read of
//! every segment. A retry whose original is among the newest
//! `append_id_window` entries is always recognized — unless that entry
//! or one before it in its segment is damaged (a damaged frame ends the
//! walk of its segment with a warning; the open does not fail, as damage
//! before the index's covered point is found when read).

use std::sync::Arc;

use super::segment::{self, HEADER_LEN, Segment, UNSCANNED};
use super::walk::{Position, Walker};
use tracing::warn;

use crate::error::{Error, ErrorKind, Result};
use crate::model::AppendResult;
use crate::storage::kit::AppendIds;

/// Builds the window from the surveyed ids (`tail`, in log order, of the
/// entries from `scanned_from` to `next`) and the segments before them.
///
/// Errors: `Corrupt` for a damaged frame in a walked segment; I/O kinds.
pub(super) fn rebuild(
    segments: &[Segment],
    live_from: u64,
    scanned_from: u64,
    next: u64,
    tail: Vec<(Box<str>, AppendResult)>,
    window: usize,
) -> Result<AppendIds> {
    let mut ids = AppendIds::bounded(window);
    let budget = window as u64;
    let mut walked = next.saturating_sub(scanned_from.max(live_from));
    let mut found = tail.len();
    // Older ids, one segment's worth at a time, newest segment first.
    let mut older: Vec<Vec<(Box<str>, AppendResult)>> = Vec::new();
    for seg in segments.iter().rev() {
        if found >= window || walked >= budget {
            break;
        }
        let from = seg.first.max(live_from);
        let to = seg.next.min(scanned_from);
        if from >= to {
            continue;
        }
        let file = Arc::new(segment::open_file(&seg.path, false)?);
        let end = if seg.end == UNSCANNED {
            file.metadata()
                .map_err(|e| Error::io(format!("stat {}", seg.path.display()), e))?
                .len()
        } else {
            seg.end
        };
        let mut walker = Walker::new(file, seg.path.clone(), end);
        let start = Position {
            offset: HEADER_LEN,
            seqnum: seg.first,
        };
        let mut pos = match walker.skip_to(start, from) {
            Ok(pos) => pos,
            Err(e) if e.kind() == ErrorKind::Corrupt => {
                warn!(error = %e, "damaged segment while rebuilding the append-id window");
                walked += to - from;
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut here = Vec::new();
        while pos.seqnum < to {
            let (entry, id, after, _) = match walker.read_with_id(pos) {
                Ok(read) => read,
                Err(e) if e.kind() == ErrorKind::Corrupt => {
                    // Damage before the index's covered point is found
                    // when read, not at open; the damaged entry's id is
                    // unreadable anyway. The walk goes on in older segments.
                    warn!(
                        error = %e,
                        "damaged entry while rebuilding the append-id window; ids after it in this segment are not remembered"
                    );
                    break;
                }
                Err(e) => return Err(e),
            };
            if let Some(id) = id {
                here.push((
                    id,
                    AppendResult {
                        seqnum: entry.seqnum,
                        stream_version: entry.stream_version,
                        primary_tag: entry.tags[0].clone(),
                        timestamp_ms: entry.timestamp_ms,
                    },
                ));
            }
            pos = after;
        }
        walked += to - from;
        found += here.len();
        older.push(here);
    }
    for (id, result) in older.into_iter().rev().flatten().chain(tail) {
        ids.observe(&id, result);
    }
    Ok(ids)
}
