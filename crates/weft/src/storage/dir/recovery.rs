//! Opening a log directory for writing: the survey's judgement
//! ([`super::scan`]), then its repairs — remove temporary files and what an
//! interrupted trim left, cut a torn tail, remove a last segment without
//! entries — and the counters and indexes to resume from.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::path::Path;

use tracing::{info, warn};

use super::fsutil;
use super::scan::{self, Access, Repair};
use super::segment::Segment;
use crate::error::{Error, Result};
use crate::model::LogTag;
use crate::storage::append_ids::AppendIds;
use crate::storage::index::LogIndex;

/// What a directory holds after recovery.
#[derive(Debug)]
pub(super) struct Recovered {
    /// Live segments in log order; the last one is where writing resumes.
    pub(super) segments: Vec<Segment>,
    pub(super) index: LogIndex,
    /// Next version of every primary tag ever written (trimmed ones too).
    pub(super) versions: HashMap<LogTag, u64>,
    pub(super) next_seqnum: u64,
    /// The append ids of the newest live entries (the writer's window).
    pub(super) ids: AppendIds,
}

/// Recovers the log in `dir` (which the caller has locked).
///
/// Errors: `Corrupt` for damaged data that is not a torn tail, and for
/// missing segments (the files are left untouched); I/O kinds.
pub(super) fn recover(dir: &Path, id_window: usize) -> Result<Recovered> {
    let survey = scan::survey(dir, Access::ReadWrite, id_window)?;
    let versions = survey.versions();
    let mut removed = false;
    for repair in &survey.repairs {
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
                OpenOptions::new()
                    .write(true)
                    .open(path)
                    .and_then(|f| f.set_len(*keep).and_then(|()| f.sync_data()))
                    .map_err(|e| Error::io(format!("truncate {}", path.display()), e))?;
            }
        }
    }
    if removed {
        fsutil::sync_dir(dir)?;
    }
    Ok(Recovered {
        segments: survey.segments,
        index: survey.index,
        versions,
        next_seqnum: survey.next_seqnum,
        ids: survey.ids,
    })
}
