//! The part of [`super::check`] that judges the writer's log index
//! (`<dir>/index/`) against the log: the index is derived state, but a
//! writer numbers a stream's next entry from its row, so a row the log
//! contradicts is reported as a problem (the writer refuses such a row as
//! `Corrupt` when it meets it; see `docs/FAILURE_SEMANTICS.md`).
//!
//! Only an index that is there, sound and not in use is compared, and
//! only when it covers the whole log (an index behind the log is brought
//! up to date from the log by the next open, which is not a problem).
//! Opening it changes nothing: one the writer would start afresh is left
//! alone and noted.

use std::path::Path;

use super::check::DirCheck;
use super::recovery::{IDENTITY, INDEX_DIR};
use crate::error::{ErrorKind, Result};
use crate::index::{Index, IndexOptions};

/// Small caches: the check reads one row per stream.
fn options() -> IndexOptions {
    IndexOptions {
        cache_bytes: 4 << 20,
        write_buffer_bytes: 4 << 20,
        tail_bytes: 1 << 20,
        ..IndexOptions::default()
    }
}

/// Compares the index in `dir` with what `report` found in the log, adding
/// problems and notes to `report`.
pub(super) fn compare(dir: &Path, report: &mut DirCheck) -> Result<()> {
    let index = match Index::open_if_sound(&dir.join(INDEX_DIR), IDENTITY, options()) {
        Ok(Some(index)) => index,
        Ok(None) => {
            if dir.join(INDEX_DIR).exists() {
                report.notes.push(
                    "the log index is damaged or another log's: the next open rebuilds it".into(),
                );
            }
            return Ok(());
        }
        Err(e) if e.kind() == ErrorKind::Locked => {
            report
                .notes
                .push("the log index is in use by a writer: not compared with the log".into());
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let outcome = compare_rows(&index, report);
    let closed = index.close();
    outcome?;
    closed
}

fn compare_rows(index: &Index, report: &mut DirCheck) -> Result<()> {
    if index.next() != report.next_seqnum || index.first() != report.first_seqnum {
        report.notes.push(format!(
            "the log index covers entries {}..{}, the log {}..{}: the next open brings it up to date",
            index.first(),
            index.next(),
            report.first_seqnum,
            report.next_seqnum
        ));
        return Ok(());
    }
    let mut problems = Vec::new();
    for info in &report.tags {
        let Some(latest) = info.latest_version else {
            continue;
        };
        match index.next_version(&info.tag) {
            Ok(next) if next == latest + 1 => {}
            Ok(next) => problems.push(format!(
                "the log index says stream {} continues at version {next}, the log at {}",
                info.tag,
                latest + 1
            )),
            Err(e) if e.kind() == ErrorKind::Corrupt => problems.push(e.message().to_owned()),
            Err(e) => return Err(e),
        }
    }
    report.problems.extend(problems);
    Ok(())
}
