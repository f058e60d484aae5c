//! `weft inspect`: what a log holds.
//!
//! For a bucket: the manifest's format version, epoch, next sequence, the
//! entries it lists itself (sequence range, segment location and size,
//! record count, metadata), a summary of its history pages (v5: how many
//! entries they hold, the frontier per level) and the snapshot pointer.
//! It reads the manifest and one footer per listed entry: its cost does not
//! grow with the log (a v5 manifest lists a bounded number of entries). For
//! a `dir` log: its segment files, the seqnum range, the trim point, and
//! its tags (up to `--max-tags`) with their entry counts and latest
//! versions, from a follower's log index.

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;
use weft::Result;
use weft::connect::Location;
use weft::format::{ManifestEntry, Metadata};

use crate::bucket;
use crate::location::{self, StoreArgs};
use crate::output;

/// `weft inspect`
#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    /// The log: a directory, s3://bucket/prefix, az://container/prefix or
    /// file:///path.
    log: String,

    /// Object path of the manifest in a bucket, relative to the prefix
    /// (weft's bucket logs: `manifest`; the upstream buffer:
    /// `ingest/manifest`; the seed's WAL: `wal/manifest`).
    #[arg(long, value_name = "PATH", default_value = bucket::DEFAULT_MANIFEST)]
    manifest: String,

    /// Print one JSON object instead of a report.
    #[arg(long)]
    json: bool,

    /// For a `dir` log: list at most this many tags (in tag order), each
    /// with its live entries and latest version.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    max_tags: usize,
}

/// Runs `weft inspect`.
pub(crate) async fn run(args: InspectArgs, store_args: &StoreArgs) -> Result<ExitCode> {
    if let Some(pg) = crate::pg::location(&args.log) {
        return crate::pg::inspect(pg?, args.json).await;
    }
    let location = location::parse(&args.log)?;
    match &location {
        Location::Dir { path } => inspect_dir(path, args.json, args.max_tags).await?,
        _ => inspect_bucket(&location, &args, store_args).await?,
    }
    Ok(ExitCode::SUCCESS)
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
    segments: Vec<DirSegmentReport>,
    tags: Vec<TagReport>,
    /// What opening the log would cut (a torn tail).
    problems: Vec<String>,
    /// What opening the log would tidy without losing anything.
    notes: Vec<String>,
}

#[derive(Debug, Serialize)]
struct DirSegmentReport {
    file: String,
    first_seqnum: u64,
    entries: u64,
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

/// Runs `weft inspect` on the `dir` log at `dir`: what a follower (no
/// lock) holds, from its log index kept in the user's cache, so the cost
/// is the tags listed and what was appended since the last command, not
/// the log's length. A log that opening and reading refuse is refused
/// here too (`Corrupt`); `weft verify` reads everything and says what is
/// wrong.
async fn inspect_dir(dir: &std::path::Path, json: bool, max_tags: usize) -> Result<()> {
    weft::storage::dir::require_log(dir)?;
    let follower =
        crate::index_cache::dir_follower(dir, std::time::Duration::from_secs(60)).await?;
    let inspected = follower.inspect(max_tags).await;
    if let Err(e) = weft::storage::Storage::close(&follower).await {
        tracing::warn!(error = %e, "closing the log failed");
    }
    let check = inspected?;
    let report = DirReport {
        kind: "dir",
        path: dir.display().to_string(),
        first_seqnum: check.first_seqnum,
        next_seqnum: check.next_seqnum,
        trimmed_through: check.trimmed_through,
        entries: check.entries,
        segments: check
            .segments
            .iter()
            .map(|s| DirSegmentReport {
                file: s.file.clone(),
                first_seqnum: s.first_seqnum,
                entries: s.entries,
                size: s.bytes,
            })
            .collect(),
        tags: check
            .tags
            .iter()
            .map(|t| TagReport {
                tag: t.tag.to_string(),
                entries: t.entries,
                latest_version: t.latest_version,
            })
            .collect(),
        problems: check.problems.clone(),
        notes: check.notes.clone(),
    };
    if json {
        return output::json(&report);
    }
    let (first, next, entries) = (report.first_seqnum, report.next_seqnum, report.entries);
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
            "  {}  from seqnum {}, {} entries, {} bytes",
            s.file, s.first_seqnum, s.entries, s.size
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
    for p in &report.problems {
        output::line(&format!("problem    {p}"))?;
    }
    for n in &report.notes {
        output::line(&format!("note       {n}"))?;
    }
    Ok(())
}

/// `inspect --json` for a bucket; the field names are part of the format.
#[derive(Debug, Serialize)]
struct BucketReport {
    kind: &'static str,
    location: String,
    manifest: String,
    manifest_size: usize,
    format_version: u16,
    epoch: u64,
    next_sequence: u64,
    /// The first live sequence (`next_sequence` when empty).
    first_sequence: u64,
    snapshot: Option<SnapshotReport>,
    /// v5: what the history pages hold; `null` when there are none.
    history: Option<HistoryReport>,
    /// The entries the manifest lists itself (v5: the recent ones).
    entries: Vec<EntryReport>,
}

#[derive(Debug, Serialize)]
struct HistoryReport {
    /// Sequences the pages cover: `[first_sequence, end_sequence)`.
    first_sequence: u64,
    end_sequence: u64,
    /// Manifest entries the pages hold (a page straddling the first live
    /// sequence counts whole).
    entries: u64,
    /// Pointers the manifest holds per level (level 0 names leaf pages).
    frontier: Vec<usize>,
}

#[derive(Debug, Serialize)]
struct SnapshotReport {
    location: String,
    through_seq: u64,
    created_ms: i64,
}

#[derive(Debug, Serialize)]
struct EntryReport {
    sequence: u64,
    /// One past the last sequence the entry occupies.
    end_sequence: u64,
    /// Records in the segment: the manifest's count (v3/v4) or the
    /// segment footer's (v1/v2); `null` when the segment is missing.
    count: Option<u32>,
    location: String,
    /// Bytes of the segment object; `null` when it is missing.
    size: Option<u64>,
    /// The segment's format version (1, or 2 with a checksum), from its
    /// footer; `null` when it is missing.
    segment_version: Option<u16>,
    /// `none` or `zstd`; `null` when the segment is missing.
    compression: Option<&'static str>,
    metadata: Vec<MetadataReport>,
}

#[derive(Debug, Serialize)]
struct MetadataReport {
    start_index: u32,
    ingestion_ms: i64,
    payload: String,
}

impl From<&Metadata> for MetadataReport {
    fn from(m: &Metadata) -> Self {
        MetadataReport {
            start_index: m.start_index,
            ingestion_ms: m.ingestion_ms,
            payload: output::base64(&m.payload),
        }
    }
}

async fn describe_entry(
    store: &std::sync::Arc<dyn object_store::ObjectStore>,
    entry: &ManifestEntry,
) -> Result<EntryReport> {
    let size = bucket::size(store, &entry.location).await?;
    let footer = match size {
        Some(size) => Some(bucket::segment_footer(store, &entry.location, size).await?),
        None => None,
    };
    let count = bucket::manifest_count(entry).or(footer.map(|f| f.record_count));
    Ok(EntryReport {
        sequence: entry.sequence,
        end_sequence: entry.end_sequence(),
        count,
        location: entry.location.clone(),
        size,
        segment_version: footer.map(|f| f.version.as_u16()),
        compression: footer.map(|f| match f.compression {
            weft::format::Compression::None => "none",
            weft::format::Compression::Zstd => "zstd",
        }),
        metadata: entry.metadata.iter().map(MetadataReport::from).collect(),
    })
}

async fn inspect_bucket(
    location: &Location,
    args: &InspectArgs,
    store_args: &StoreArgs,
) -> Result<()> {
    let store = location::open_store(location, store_args)?;
    let manifest = bucket::load_manifest(&store, &args.manifest).await?;
    let data = &manifest.data;
    let bar = output::progress(data.entries.len() as u64, "inspecting");
    let mut entries = Vec::with_capacity(data.entries.len());
    for entry in &data.entries {
        entries.push(describe_entry(&store, entry).await?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let report = BucketReport {
        kind: "bucket",
        location: location.to_string(),
        manifest: manifest.path.clone(),
        manifest_size: manifest.size,
        format_version: data.version.as_u16(),
        epoch: data.epoch,
        next_sequence: data.next_sequence,
        first_sequence: data.first_sequence(),
        history: data.history.as_ref().map(|h| HistoryReport {
            first_sequence: h.first_seq().unwrap_or(h.live_from),
            end_sequence: h.end_seq().unwrap_or(h.live_from),
            entries: h.entries(),
            frontier: h.levels.iter().map(Vec::len).collect(),
        }),
        snapshot: data.snapshot.as_ref().map(|s| SnapshotReport {
            location: s.location.clone(),
            through_seq: s.through_seq,
            created_ms: s.created_ms,
        }),
        entries,
    };
    if args.json {
        return output::json(&report);
    }
    print_bucket(&report)
}

fn print_bucket(r: &BucketReport) -> Result<()> {
    let numbering = if r.format_version >= 3 {
        "records"
    } else {
        "segments"
    };
    output::line(&format!("log        {}", r.location))?;
    output::line(&format!(
        "manifest   {} (format v{}, {} bytes; sequences number {numbering})",
        r.manifest, r.format_version, r.manifest_size
    ))?;
    output::line(&format!("epoch      {}", r.epoch))?;
    output::line(&format!(
        "sequences  [{}, {}) live, next {}",
        r.first_sequence, r.next_sequence, r.next_sequence
    ))?;
    match &r.snapshot {
        Some(s) => output::line(&format!(
            "snapshot   {} through {} (created at {} ms)",
            s.location, s.through_seq, s.created_ms
        ))?,
        None => output::line("snapshot   none")?,
    }
    if let Some(h) = &r.history {
        output::line(&format!(
            "history    {} entries in pages over [{}, {}), frontier per level {:?}",
            h.entries, h.first_sequence, h.end_sequence, h.frontier
        ))?;
    }
    output::line(&format!(
        "entries    {} listed in the manifest",
        r.entries.len()
    ))?;
    for e in &r.entries {
        let count = e.count.map_or("?".to_owned(), |n| n.to_string());
        let size = match (e.size, e.segment_version, e.compression) {
            (Some(n), Some(v), Some(c)) => format!("{n} bytes, segment v{v}, {c}"),
            _ => "MISSING".to_owned(),
        };
        output::line(&format!(
            "  [{}, {})  {}  {size}, {count} records, {} metadata",
            e.sequence,
            e.end_sequence,
            e.location,
            e.metadata.len()
        ))?;
        for m in &e.metadata {
            output::line(&format!(
                "      from record {}: ingested at {} ms, payload (base64) {}",
                m.start_index, m.ingestion_ms, m.payload
            ))?;
        }
    }
    Ok(())
}
