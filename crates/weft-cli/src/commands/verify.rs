//! `weft verify`: read everything, check every checksum and invariant,
//! report, and exit 1 on any problem.
//!
//! Bucket: the manifest decodes (its CRC for v4), sequences are dense,
//! metadata points inside its segment, and a snapshot pointer names an
//! existing object. A weft bucket log (the default manifest) is then read
//! as its writer's open and its followers read it
//! (`weft::storage::bucket::check`: every segment, every entry frame);
//! another WAL has every segment fetched, decoded and counted as a replica
//! does (`weft::wal::segments`). A segment the manifest lists and the store
//! lacks is a problem (`Corrupt`), as it is for `read` and `wal dump`. `dir` log:
//! `weft::storage::dir::check`, the judgement opening and reading make —
//! whatever they refuse, or opening would cut, is a problem.
//!
//! A problem in the data is a finding (exit 1); failing to reach the data
//! at all (no such log, store unavailable) is an error with its own code.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use object_store::ObjectStore;
use serde::Serialize;
use weft::connect::Location;
use weft::{ErrorKind, Result};

use crate::bucket;
use crate::exit;
use crate::location::{self, StoreArgs};
use crate::output;

/// `weft verify`
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The log: a directory, s3://bucket/prefix, az://container/prefix or
    /// file:///path.
    log: String,

    /// Check a WAL other than the weft log at LOG: the object path of its
    /// manifest, relative to the prefix (the upstream buffer:
    /// `ingest/manifest`; the seed's WAL: `wal/manifest`). Its records are
    /// checked as opaque bytes. Without it, LOG is checked as the weft log
    /// `read` reads (its manifest at `manifest`, its records entry frames).
    #[arg(long, value_name = "PATH")]
    manifest: Option<String>,

    /// Print one JSON object: {"ok", "location", "units", "records", "bytes", "problems", "notes"}.
    #[arg(long)]
    json: bool,
}

/// What a verification looked at and what it found.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Findings {
    /// True when no problem was found.
    pub(crate) ok: bool,
    pub(crate) location: String,
    /// Segments (or manifest entries) checked.
    pub(crate) units: u64,
    /// Records or entries checked.
    pub(crate) records: u64,
    /// Bytes read.
    pub(crate) bytes: u64,
    /// One message per problem.
    pub(crate) problems: Vec<String>,
    /// Observations that are not problems (an unfinished last write).
    pub(crate) notes: Vec<String>,
}

impl Findings {
    pub(crate) fn new(location: String) -> Self {
        Findings {
            location,
            ..Findings::default()
        }
    }

    pub(crate) fn problem(&mut self, message: impl Into<String>) {
        let message = message.into();
        tracing::debug!(%message, "verify found a problem");
        self.problems.push(message);
    }

    pub(crate) fn note(&mut self, message: impl Into<String>) {
        self.notes.push(message.into());
    }
}

/// Runs `weft verify`.
pub(crate) async fn run(args: VerifyArgs, store_args: &StoreArgs) -> Result<ExitCode> {
    if let Some(pg) = crate::pg::location(&args.log) {
        return crate::pg::verify(pg?, args.json).await;
    }
    let location = location::parse(&args.log)?;
    let mut findings = match &location {
        Location::Dir { path } => verify_dir(path).await?,
        _ => {
            let store = location::open_store(&location, store_args)?;
            let mut f =
                verify_bucket(&store, location.to_string(), args.manifest.as_deref()).await?;
            if args.manifest.is_none() && f.problems.is_empty() {
                verify_caches(&store, &location, store_args, &mut f).await;
            }
            f
        }
    };
    findings.ok = findings.problems.is_empty();
    if args.json {
        output::json(&findings)?;
    } else {
        for n in &findings.notes {
            output::line(&format!("note: {n}"))?;
        }
        for p in &findings.problems {
            output::line(&format!("problem: {p}"))?;
        }
        output::line(&format!(
            "{}: {} segments, {} records, {} bytes checked; {}",
            findings.location,
            findings.units,
            findings.records,
            findings.bytes,
            match findings.problems.len() {
                0 => "no problems".to_owned(),
                1 => "1 problem".to_owned(),
                n => format!("{n} problems"),
            }
        ))?;
    }
    Ok(if findings.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::PROBLEM_FOUND)
    })
}

/// The log indexes this machine keeps for the bucket log in its cache
/// directories (`--cache-dir`), compared with the log: a row that
/// disagrees is a problem (an append to that stream stops with
/// `corrupt`, and the next open rebuilds the index).
async fn verify_caches(
    store: &Arc<dyn ObjectStore>,
    location: &Location,
    store_args: &StoreArgs,
    f: &mut Findings,
) {
    for role in [location::Role::Writer, location::Role::Reader] {
        let Some(dir) = store_args.cache_for(location, role) else {
            continue;
        };
        if !dir.exists() {
            continue;
        }
        let shown = dir.display();
        match weft::storage::bucket::check_cache(store.clone(), "", &dir).await {
            Ok(weft::storage::bucket::CacheCheck::Compared(problems)) => {
                for e in problems {
                    f.problem(format!(
                        "the log index in {shown}: {} (an append to that stream stops with \
                         `corrupt`; the next open rebuilds the index)",
                        crate::exit::one_line(&e)
                    ));
                }
            }
            Ok(weft::storage::bucket::CacheCheck::Skipped(why)) => {
                f.notes
                    .push(format!("the log index in {shown} was not compared: {why}"));
            }
            Ok(_) => {}
            Err(e) => f.notes.push(format!(
                "the log index in {shown} was not compared: {}",
                crate::exit::one_line(&e)
            )),
        }
    }
}

async fn verify_dir(dir: &std::path::Path) -> Result<Findings> {
    let check = weft::storage::dir::check(dir).await?;
    let mut f = Findings::new(dir.display().to_string());
    f.units = check.segments.len() as u64;
    f.records = check.entries;
    f.bytes = check.bytes;
    for p in check.problems {
        f.problem(p);
    }
    for n in check.notes {
        f.note(n);
    }
    Ok(f)
}

async fn verify_bucket(
    store: &Arc<dyn ObjectStore>,
    location: String,
    wal_manifest: Option<&str>,
) -> Result<Findings> {
    let manifest_path = wal_manifest.unwrap_or(bucket::DEFAULT_MANIFEST);
    let mut f = Findings::new(location);
    let manifest = match bucket::load_manifest(store, manifest_path).await {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::Corrupt => {
            f.problem(crate::exit::one_line(&e));
            return Ok(f);
        }
        Err(e) => return Err(e),
    };
    f.bytes += manifest.size as u64;
    for p in bucket::manifest_problems(&manifest.data) {
        f.problem(format!("manifest {manifest_path}: {p}"));
    }
    if wal_manifest.is_none() {
        verify_weft_log(store, &manifest.data, &mut f).await?;
    } else {
        verify_segments(store, manifest_path, &manifest.data, &mut f).await?;
    }
    if let Some(snapshot) = &manifest.data.snapshot
        && bucket::size(store, &snapshot.location).await?.is_none()
    {
        f.problem(format!(
            "the snapshot pointer names {}, which does not exist",
            snapshot.location
        ));
    }
    Ok(f)
}

/// A weft bucket log: read as its writer's open and its followers read it
/// (`weft::storage::bucket::check`); what they refuse is the problem.
async fn verify_weft_log(
    store: &Arc<dyn ObjectStore>,
    data: &weft::format::ManifestData,
    f: &mut Findings,
) -> Result<()> {
    let check = weft::storage::bucket::check(store.clone(), "").await?;
    f.records = check.entries;
    if let Some(e) = &check.problem {
        f.problem(format!(
            "{} (reading the log refuses it, and so does opening a writer that reads the \
             whole log; a writer that opens from a state checkpoint past the damage takes \
             appends to the streams it can check by their last entry until it has read the \
             history up to the checkpoint, then stops with `corrupt`; an append to a stream \
             the checkpoint does not name waits for that and fails `corrupt`)",
            crate::exit::one_line(e)
        ));
    }
    for e in &check.checkpoint_problems {
        f.problem(format!(
            "{} (a writer that opens from it checks each stream against the log before it \
             numbers the stream and stops with `corrupt` on a mismatch; a forgery that names \
             an older entry of a stream is found once the writer has read the history up to \
             the checkpoint, and appends to that stream before that carry its wrong versions)",
            crate::exit::one_line(e)
        ));
    }
    let bar = output::progress(bucket::entry_count(data), "sizing");
    let mut walk = bucket::EntryWalk::new(store, data);
    while let Some(chunk) = next_chunk(&mut walk, f).await? {
        for entry in &chunk {
            f.units += 1;
            // A missing segment is the problem above already.
            f.bytes += bucket::size(store, &entry.location).await?.unwrap_or(0);
            metadata_problem(entry, entry.count.unwrap_or(0) as usize, f);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// The next chunk of a manifest's entries, its history pages included; a
/// page that cannot be read is a problem, and the walk goes on with the
/// manifest's own entries.
async fn next_chunk(
    walk: &mut bucket::EntryWalk<'_>,
    f: &mut Findings,
) -> Result<Option<Vec<weft::format::ManifestEntry>>> {
    loop {
        match walk.next_chunk().await {
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Corrupt) => {
                f.problem(format!(
                    "the manifest's history cannot be read: {}",
                    crate::exit::one_line(&e)
                ));
                walk.skip_history();
            }
            other => return other,
        }
    }
}

/// Any other WAL (the upstream buffer's, the seed's): every segment
/// fetched, decoded and counted as a replica does.
async fn verify_segments(
    store: &Arc<dyn ObjectStore>,
    manifest_path: &str,
    data: &weft::format::ManifestData,
    f: &mut Findings,
) -> Result<()> {
    let bar = output::progress(bucket::entry_count(data), "verifying");
    let mut walk = bucket::EntryWalk::new(store, data);
    while let Some(chunk) = next_chunk(&mut walk, f).await? {
        for entry in &chunk {
            f.units += 1;
            match bucket::load_segment(store, manifest_path, entry).await {
                Ok((size, segment)) => {
                    f.bytes += size;
                    let n = segment.records.len();
                    f.records += n as u64;
                    metadata_problem(entry, n, f);
                }
                Err(e) if e.kind() == ErrorKind::Corrupt => f.problem(crate::exit::one_line(&e)),
                Err(e) => return Err(e),
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// A metadata item that starts past the `n` records of its segment.
fn metadata_problem(entry: &weft::format::ManifestEntry, n: usize, f: &mut Findings) {
    if let Some(m) = entry
        .metadata
        .iter()
        .find(|m| m.start_index as usize >= n.max(1))
    {
        f.problem(format!(
            "entry {}: metadata starts at record {} of a {n}-record segment",
            entry.sequence, m.start_index
        ));
    }
}
