//! `weft gc` and `weft snapshot`: retention of a bucket log from outside
//! its writer. Neither claims the log, so a running writer is not fenced.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use weft::Result;
use weft::clock;
use weft::storage::bucket::retention;

use crate::location::{self, StoreArgs};
use crate::output;

/// `weft gc`
#[derive(Debug, Args)]
pub(crate) struct GcArgs {
    /// The bucket: s3://bucket/prefix or az://container/prefix (a file://
    /// copy is read-only: only --dry-run, or a pass with nothing to delete,
    /// succeeds there).
    log: String,
    /// List what would be deleted, delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// Keep unreferenced objects younger than this many seconds (a
    /// snapshot just superseded, a truncated segment a lagging replica may
    /// still read). Any value is safe, 0 included: uploads that may still
    /// be committed are kept whatever the grace.
    #[arg(long, default_value_t = 3600)]
    grace_secs: u64,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// `weft snapshot`
#[derive(Debug, Args)]
pub(crate) struct SnapshotArgs {
    /// The bucket: s3://bucket/prefix or az://container/prefix.
    log: String,
    /// Trim the log through this seqnum: its state as of there (every
    /// stream's numbering) becomes the manifest's snapshot, and the entries
    /// it supersedes are dropped from the manifest in the same CAS.
    #[arg(long)]
    through: u64,
    /// Print the snapshot pointer as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `weft gc`.
pub(crate) async fn gc(args: GcArgs, store_args: &StoreArgs) -> Result<ExitCode> {
    let location = location::parse(&args.log)?;
    let store = location::open_store(&location, store_args)?;
    let report = retention::gc(store, "")
        .with_retry_policy(store_args.retry())
        .with_grace(Duration::from_secs(args.grace_secs))
        .dry_run(args.dry_run)
        .run()
        .await?;
    if args.json {
        output::json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    let verb = if report.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    for object in &report.deleted {
        output::line(&format!(
            "{verb} {} ({} bytes)",
            object.location, object.size
        ))?;
    }
    output::line(&format!(
        "{} objects listed, {} referenced by the manifest (epoch {}), {verb} {} ({} bytes), \
         kept {} unreferenced (grace {} s)",
        report.listed,
        report.referenced,
        report.epoch,
        report.deleted.len(),
        report.deleted_bytes,
        report.kept.len(),
        args.grace_secs
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `weft snapshot`.
pub(crate) async fn snapshot(args: SnapshotArgs, store_args: &StoreArgs) -> Result<ExitCode> {
    let location = location::parse(&args.log)?;
    let store = location::open_store(&location, store_args)?;
    let retry = store_args.retry();
    let pointer = retention::trim_unowned(store, "", args.through, clock::system(), &retry).await?;
    match (pointer, args.json) {
        (Some(p), true) => output::json(&serde_json::json!({
            "location": p.location,
            "through_seq": p.through_seq,
            "created_ms": p.created_ms,
        }))?,
        (Some(p), false) => output::line(&format!(
            "snapshot {} covers seqnums through {}; the manifest now starts after it",
            p.location, p.through_seq
        ))?,
        (None, true) => output::json(&serde_json::json!({ "location": null }))?,
        (None, false) => output::line(&format!(
            "the log is already trimmed through {} or further; nothing written",
            args.through
        ))?,
    }
    Ok(ExitCode::SUCCESS)
}
