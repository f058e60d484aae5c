//! The `dir` backend from the command's side: opening a log for writing
//! (through `weft::storage::dir`), and reading its files directly for
//! `inspect`, `verify`, and `read`/`tail` of a log another process has open.

mod layout;
mod scan;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use weft::format::frame::{self, FrameError};
use weft::storage::dir::DirStorage;
use weft::{Error, ErrorKind, Log, Result};

use crate::commands::verify::Findings;
use crate::location::{Create, require_dir};
use crate::output;
pub(crate) use scan::Scanner;

/// `NotFound` unless `dir` holds a `dir` log.
fn require_log(dir: &Path) -> Result<()> {
    require_dir(dir)?;
    if layout::is_log(dir)? {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "no log at {}: the directory holds no weft log",
                dir.display()
            ),
        ))
    }
}

/// Opens the `dir` log at `dir`, taking its exclusive lock.
///
/// Errors: `NotFound` (no log and `create` is [`Create::No`]), `Locked`
/// (another handle has it open), `Corrupt`, I/O kinds.
pub(crate) async fn open(dir: &Path, create: Create) -> Result<Log> {
    match create {
        Create::No => require_log(dir)?,
        Create::IfMissing => std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("create {}", dir.display()), e))?,
    }
    let storage = DirStorage::open(dir).await?;
    Ok(Log::new(storage))
}

/// A read-only scanner over the log at `dir`.
///
/// Errors: `NotFound` when there is no log.
pub(crate) fn scanner(dir: &Path) -> Result<Scanner> {
    require_log(dir)?;
    Ok(Scanner::new(dir))
}

/// `inspect --json` for a `dir` log; the field names are part of the format.
#[derive(Debug, Serialize)]
struct DirReport {
    kind: &'static str,
    path: String,
    first_seqnum: u64,
    next_seqnum: u64,
    /// The last trimmed seqnum, `null` when the log was never trimmed.
    trimmed_through: Option<u64>,
    entries: u64,
    segments: Vec<SegmentReport>,
    tags: Vec<TagReport>,
}

#[derive(Debug, Serialize)]
struct SegmentReport {
    file: String,
    first_seqnum: u64,
    size: u64,
}

#[derive(Debug, Serialize)]
struct TagReport {
    tag: String,
    /// Live entries carrying the tag (as primary or secondary tag).
    entries: u64,
    /// The latest version of the tag's own stream, `null` when the tag is
    /// nobody's primary tag.
    latest_version: Option<u64>,
}

/// Runs `weft inspect` on the `dir` log at `dir`, without taking its lock.
pub(crate) async fn inspect(dir: &Path, json: bool) -> Result<()> {
    let scanner = scanner(dir)?;
    let first = scanner.first_seqnum()?;
    let next = scanner.next_seqnum()?;
    let mut tags: BTreeMap<String, (u64, Option<u64>)> = BTreeMap::new();
    let mut entries = 0u64;
    let mut cursor = first;
    let bar = output::progress(next.saturating_sub(first), "inspecting");
    loop {
        let chunk = scanner.read(None, cursor, 4096)?;
        let Some(last) = chunk.last() else { break };
        cursor = last.seqnum + 1;
        entries += chunk.len() as u64;
        bar.inc(chunk.len() as u64);
        for e in &chunk {
            for (i, t) in e.tags.iter().enumerate() {
                let slot = tags.entry(t.to_string()).or_default();
                slot.0 += 1;
                if i == 0 {
                    slot.1 = Some(e.stream_version);
                }
            }
        }
    }
    bar.finish_and_clear();
    let report = DirReport {
        kind: "dir",
        path: dir.display().to_string(),
        first_seqnum: first,
        next_seqnum: next,
        trimmed_through: layout::trimmed_through(dir)?,
        entries,
        segments: layout::segments(dir)?
            .into_iter()
            .map(|s| SegmentReport {
                file: s
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                first_seqnum: s.first,
                size: s.size,
            })
            .collect(),
        tags: tags
            .into_iter()
            .map(|(tag, (entries, latest_version))| TagReport {
                tag,
                entries,
                latest_version,
            })
            .collect(),
    };
    if json {
        return output::json(&report);
    }
    output::line(&format!("log        {} (dir backend)", report.path))?;
    if next > first {
        output::line(&format!(
            "seqnums    {first}..={} ({entries} entries), next {next}",
            next - 1
        ))?;
    } else {
        output::line(&format!("seqnums    none (empty), next {next}"))?;
    }
    match report.trimmed_through {
        Some(t) => output::line(&format!("trimmed    through seqnum {t}"))?,
        None => output::line("trimmed    never")?,
    }
    output::line(&format!("segments   {}", report.segments.len()))?;
    for s in &report.segments {
        output::line(&format!(
            "  {}  from seqnum {}, {} bytes",
            s.file, s.first_seqnum, s.size
        ))?;
    }
    output::line(&format!("tags       {}", report.tags.len()))?;
    for t in &report.tags {
        let version = t
            .latest_version
            .map_or("no stream of its own".to_owned(), |v| {
                format!("latest version {v}")
            });
        output::line(&format!("  {:<24} {} entries, {version}", t.tag, t.entries))?;
    }
    Ok(())
}

/// Checks every segment header and frame checksum of the log at `dir`, and
/// that seqnums are dense across segments. Takes no lock and changes
/// nothing. An unfinished last write (a torn tail, which the next open
/// discards) is a note, not a problem.
///
/// Errors: `NotFound` when there is no log; I/O kinds.
pub(crate) async fn verify(dir: &Path) -> Result<Findings> {
    require_log(dir)?;
    let mut f = Findings::new(dir.display().to_string());
    if let Err(e) = layout::trimmed_through(dir) {
        f.problem(crate::exit::one_line(&e));
    }
    let segments = layout::segments(dir)?;
    let total: u64 = segments.iter().map(|s| s.size).sum();
    let bar = output::progress(total, "verifying");
    let mut expected: Option<u64> = None;
    for (i, seg) in segments.iter().enumerate() {
        let is_last = i + 1 == segments.len();
        let name = seg.path.display().to_string();
        let bytes = std::fs::read(&seg.path).map_err(|e| Error::io(format!("read {name}"), e))?;
        f.units += 1;
        f.bytes += bytes.len() as u64;
        bar.inc(bytes.len() as u64);
        if let Some(exp) = expected
            && seg.first != exp
        {
            f.problem(format!(
                "{name}: starts at seqnum {} but the previous segment ends at {exp}",
                seg.first
            ));
        }
        if bytes.len() < layout::HEADER_LEN {
            if is_last {
                f.note(format!("{name}: an unfinished segment creation"));
            } else {
                f.problem(format!("{name}: shorter than a segment header"));
            }
            continue;
        }
        match layout::decode_header(&bytes) {
            Ok(first) if first == seg.first => {}
            Ok(first) => f.problem(format!(
                "{name}: the header says seqnum {first}, the file name {}",
                seg.first
            )),
            Err(e) => {
                f.problem(format!("{name}: {}", crate::exit::one_line(&e)));
                continue;
            }
        }
        let mut next = seg.first;
        let mut at = layout::HEADER_LEN;
        let mut in_batch = false;
        while let Some(rest) = bytes.get(at..).filter(|r| !r.is_empty()) {
            match frame::decode(rest) {
                Ok(fr) => {
                    if fr.meta.seqnum != next {
                        f.problem(format!(
                            "{name} at byte {at}: seqnum {} where {next} was expected",
                            fr.meta.seqnum
                        ));
                    }
                    next = fr.meta.seqnum + 1;
                    in_batch = !fr.meta.batch_end;
                    f.records += 1;
                    at += fr.frame_len;
                }
                Err(FrameError::Incomplete { .. }) if is_last => {
                    f.note(format!(
                        "{name}: the last {} bytes are an unfinished write (the next open discards them)",
                        rest.len()
                    ));
                    break;
                }
                Err(e) => {
                    f.problem(format!("{name} at byte {at} (seqnum {next}): {e}"));
                    break;
                }
            }
        }
        if in_batch {
            if is_last {
                f.note(format!(
                    "{name}: the last batch is unfinished (the next open discards it)"
                ));
            } else {
                f.problem(format!("{name}: ends inside an atomic batch"));
            }
        }
        expected = Some(next);
    }
    bar.finish_and_clear();
    Ok(f)
}
