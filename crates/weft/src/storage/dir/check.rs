//! [`check`]: what is in a log directory and what is wrong with it, judged
//! by the same survey that opening the log and reading it make
//! ([`super::scan`]), without a lock and without changing anything.
//!
//! A *problem* is anything that makes the log's open or a read refuse
//! (`Corrupt`), or that opening would cut (a torn tail: entries whose
//! bytes are incomplete, which are not in the log), and a KV bucket that
//! does not decode. A *note* is what opening tidies without losing
//! anything (temporary files, segments an interrupted trim left behind).
//!
//! It reads every segment, whatever the log index covers (the writer's
//! open and reads only judge what they read), in bounded memory besides a
//! count per tag.
//!
//! The directory may have a live writer. A torn tail or damage at the end
//! of the last segment can then be a write in progress, so the survey is
//! repeated a few times after short pauses and only what stays put is
//! reported.

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::collections::HashMap;

use super::check_report::{DirCheck, DirSegmentInfo, DirTagInfo};
use super::presence::require_log;
use super::scan::{self, Access, Repair, Survey, Versions};
use crate::error::{Error, ErrorKind, Result};
use crate::format::dir_kv::decode_kv_bucket;
use crate::model::LogTag;

/// How often a moving (or damaged) tail is looked at, and the pause
/// between looks.
const LOOKS: u32 = 4;
const PAUSE: Duration = Duration::from_millis(50);

/// Checks the log in `path`: every segment header, frame checksum, seqnum
/// and version, the trim file and every KV bucket. Takes no lock and
/// changes nothing.
///
/// Errors: `NotFound` when there is no log; `InvalidInput` when `path` is
/// not a directory; I/O kinds when the files cannot be read at all. Damage
/// is not an error: it is in [`DirCheck::problems`].
pub async fn check(path: impl AsRef<Path>) -> Result<DirCheck> {
    let dir = path.as_ref().to_path_buf();
    tokio::task::spawn_blocking(move || check_blocking(&dir))
        .await
        .map_err(|e| Error::internal(format!("check task failed: {e}")))?
}

/// A survey of every segment with what it counted: live entries carrying
/// each tag.
type Counted = (Survey, HashMap<LogTag, u64>);

fn survey_counting(dir: &Path) -> Result<Counted> {
    let mut counts: HashMap<LogTag, u64> = HashMap::new();
    let survey = scan::survey(
        dir,
        scan::layout(dir)?,
        Access::ReadOnly,
        Versions::Counted,
        None,
        |a| {
            if a.live {
                for tag in a.tags.iter() {
                    match counts.get_mut(tag) {
                        Some(n) => *n += 1,
                        None => {
                            counts.insert(tag.clone(), 1);
                        }
                    }
                }
            }
            Ok(())
        },
    )?;
    Ok((survey, counts))
}

fn check_blocking(dir: &Path) -> Result<DirCheck> {
    require_log(dir)?;
    let mut outcome = survey_counting(dir);
    for _ in 1..LOOKS {
        if settled(&outcome) {
            break;
        }
        std::thread::sleep(PAUSE);
        let again = survey_counting(dir);
        let same = match (&outcome, &again) {
            (Ok(a), Ok(b)) => torn(&a.0) == torn(&b.0),
            (Err(a), Err(b)) => a.message() == b.message(),
            _ => false,
        };
        outcome = again;
        if same {
            break;
        }
    }
    let mut report = match outcome {
        Ok((survey, counts)) => describe(dir, survey, counts)?,
        Err(e) if e.kind() == ErrorKind::Corrupt => refused(dir, e)?,
        Err(e) => return Err(e),
    };
    check_kv(dir, &mut report)?;
    if report.refusal.is_none() {
        super::index_check::compare(dir, &mut report)?;
    }
    Ok(report)
}

/// True when a survey found nothing a live writer could still change.
fn settled(outcome: &Result<Counted>) -> bool {
    match outcome {
        Ok((survey, _)) => torn(survey).is_none(),
        Err(e) => e.kind() != ErrorKind::Corrupt,
    }
}

fn torn(survey: &Survey) -> Option<&Repair> {
    survey.repairs.iter().find(|r| r.drops_data())
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn describe(dir: &Path, survey: Survey, counts: HashMap<LogTag, u64>) -> Result<DirCheck> {
    let first = survey.live_from();
    let mut report = DirCheck {
        first_seqnum: first,
        next_seqnum: survey.next_seqnum,
        trimmed_through: survey.trim.as_ref().map(|t| t.through),
        entries: survey.next_seqnum - first,
        ..DirCheck::empty(dir)
    };
    for seg in &survey.segments {
        let bytes = std::fs::metadata(&seg.path)
            .map_err(|e| Error::io(format!("stat {}", seg.path.display()), e))?
            .len();
        report.bytes += bytes;
        report.segments.push(DirSegmentInfo {
            file: file_name(&seg.path),
            first_seqnum: seg.first,
            entries: seg.entries(),
            bytes,
        });
    }
    let versions = survey.versions();
    let mut tags: Vec<DirTagInfo> = counts
        .into_iter()
        .map(|(tag, n)| DirTagInfo {
            latest_version: versions.get(&tag).and_then(|v| v.checked_sub(1)),
            tag,
            entries: n,
        })
        .collect();
    tags.sort_by(|a, b| a.tag.cmp(&b.tag));
    report.tags = tags;
    for repair in &survey.repairs {
        match repair {
            Repair::CutTornTail { path, len, .. } => {
                if !report.segments.iter().any(|s| s.file == file_name(path)) {
                    report.bytes += len;
                }
                report.problems.push(repair.to_string());
            }
            // Nothing of an entry goes (a removed last segment's torn
            // bytes, if any, are the problem above).
            _ => report.notes.push(repair.to_string()),
        }
    }
    Ok(report)
}

/// The report for a log that opening and reading refuse: the refusal is
/// the problem; the segment files are listed as found.
fn refused(dir: &Path, err: Error) -> Result<DirCheck> {
    let (firsts, _) = scan::list(dir)?;
    let mut segments = Vec::with_capacity(firsts.len());
    for first in firsts {
        let path = dir.join(super::segment::file_name(first));
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        segments.push(DirSegmentInfo {
            file: file_name(&path),
            first_seqnum: first,
            entries: 0,
            bytes,
        });
    }
    Ok(DirCheck {
        path: dir.to_path_buf(),
        first_seqnum: 0,
        next_seqnum: 0,
        trimmed_through: None,
        entries: 0,
        bytes: segments.iter().map(|s| s.bytes).sum(),
        segments,
        tags: Vec::new(),
        kv_buckets: 0,
        problems: vec![format!(
            "{} (opening and reading the log refuse it)",
            err.message()
        )],
        notes: Vec::new(),
        refusal: Some(err),
    })
}

/// Decodes every KV bucket: a damaged one is what a `get` of its keys
/// refuses.
fn check_kv(dir: &Path, report: &mut DirCheck) -> Result<()> {
    let kv = dir.join("kv");
    let listing = match std::fs::read_dir(&kv) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("list {}", kv.display()), e)),
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in listing {
        let entry = entry.map_err(|e| Error::io(format!("list {}", kv.display()), e))?;
        paths.push(entry.path());
    }
    paths.sort();
    for path in paths {
        let name = file_name(&path);
        if name.ends_with(super::fsutil::TEMP_SUFFIX) {
            report.notes.push(format!(
                "{}: a half-written replacement; opening removes it",
                path.display()
            ));
            continue;
        }
        if !name.ends_with(".kv") {
            continue;
        }
        let bytes =
            std::fs::read(&path).map_err(|e| Error::io(format!("read {}", path.display()), e))?;
        report.kv_buckets += 1;
        report.bytes += bytes.len() as u64;
        if let Err(e) = decode_kv_bucket(&bytes) {
            report.problems.push(format!(
                "{}: {} (a get of its keys refuses)",
                path.display(),
                e.message()
            ));
        }
    }
    Ok(())
}
