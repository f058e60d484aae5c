//! `weft verify`: read everything, check every checksum and invariant,
//! report, and exit 1 on any problem.
//!
//! Bucket: the manifest decodes (its CRC for v4), sequences are dense, every
//! referenced segment exists and decodes (its CRC for segment v2), record
//! counts agree with the manifest, metadata points inside its segment, and a
//! snapshot pointer names an existing object. `dir` log: every segment
//! header and frame checksum, and seqnums dense across all segments.
//!
//! A problem in the data is a finding (exit 1); failing to reach the data
//! at all (no such log, store unavailable) is an error with its own code.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use object_store::ObjectStore;
use serde::Serialize;
use weft::store::Location;
use weft::{ErrorKind, Result};

use crate::bucket;
use crate::dirlog;
use crate::exit;
use crate::location::{self, StoreArgs};
use crate::output;

/// `weft verify`
#[derive(Debug, Args)]
pub(crate) struct VerifyArgs {
    /// The log: a directory, s3://bucket/prefix, az://container/prefix or
    /// file:///path.
    log: String,

    /// Object path of the manifest in a bucket, relative to the prefix
    /// (weft's bucket logs: `manifest`; the upstream buffer:
    /// `ingest/manifest`; the seed's WAL: `wal/manifest`).
    #[arg(long, value_name = "PATH", default_value = bucket::DEFAULT_MANIFEST)]
    manifest: String,

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
        Location::Dir { path } => dirlog::verify(path).await?,
        _ => {
            let store = location::open_store(&location, store_args)?;
            verify_bucket(&store, location.to_string(), &args.manifest).await?
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

async fn verify_bucket(
    store: &Arc<dyn ObjectStore>,
    location: String,
    manifest_path: &str,
) -> Result<Findings> {
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
    let bar = output::progress(manifest.data.entries.len() as u64, "verifying");
    for entry in &manifest.data.entries {
        f.units += 1;
        match bucket::load_segment(store, entry).await {
            Ok((size, segment)) => {
                f.bytes += size;
                let n = segment.records.len();
                f.records += n as u64;
                if let Some(count) = bucket::manifest_count(entry)
                    && count as usize != n
                {
                    f.problem(format!(
                        "entry {}: the manifest says {count} records, segment {} holds {n}",
                        entry.sequence, entry.location
                    ));
                }
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
            Err(e) if e.kind() == ErrorKind::NotFound => f.problem(format!(
                "entry {}: segment {} does not exist",
                entry.sequence, entry.location
            )),
            Err(e) if e.kind() == ErrorKind::Corrupt => f.problem(crate::exit::one_line(&e)),
            Err(e) => return Err(e),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
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
