//! The part of [`super::check`] that judges the writer's log index
//! (`<dir>/index/`) against the log: the index is derived state, but a
//! writer numbers a stream's next entry from its row, so a row the log
//! contradicts is reported as a problem (the writer refuses such a row as
//! `Corrupt` when it meets it; see `docs/FAILURE_SEMANTICS.md`).
//!
//! Only an index that is there, sound and not in use is compared (a copy
//! of it, [`index::inspect`], so nothing in the directory changes), and
//! only when it covers the whole log (an index behind the log is brought
//! up to date from the log by the next open, which is not a problem).

use std::path::Path;

use super::check_report::DirCheck;
use super::recovery::{IDENTITY, INDEX_DIR};
use crate::error::{ErrorKind, Result};
use crate::index::{self, Index};

/// Compares the index in `dir` with what `report` found in the log, adding
/// problems and notes to `report`.
pub(super) fn compare(dir: &Path, report: &mut DirCheck) -> Result<()> {
    match index::inspect(&dir.join(INDEX_DIR), IDENTITY, |index| {
        compare_rows(index, report)
    }) {
        Ok(Some(())) => {}
        Ok(None) => {
            if dir.join(INDEX_DIR).exists() {
                report.notes.push(
                    "the log index is damaged or another log's: the next open rebuilds it".into(),
                );
            }
        }
        Err(e) if e.kind() == ErrorKind::Locked => {
            report
                .notes
                .push("the log index is in use by a writer: not compared with the log".into());
        }
        Err(e) => return Err(e),
    }
    Ok(())
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
    let expected: Vec<_> = report
        .tags
        .iter()
        .filter_map(|t| t.latest_version.map(|v| (t.tag.clone(), v + 1)))
        .collect();
    let problems = index.version_problems(&expected)?;
    report
        .problems
        .extend(problems.iter().map(|e| e.message().to_owned()));
    Ok(())
}
