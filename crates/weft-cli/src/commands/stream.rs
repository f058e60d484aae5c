//! `weft stream LOG TAG`: show a stream's lifecycle, truncate it before a
//! version or delete it (softly), on every backend.
//!
//! The lifecycle is stored with the log, in its KV (see
//! `weft::log::lifecycle`): reads by tag leave out the stream's entries
//! below its start, its numbering goes on, and the entries stay in the log
//! (readable by seqnum) until retention or a trim drops them. `--erase`
//! is the hard delete: it erases the payloads of the entries the start
//! hides (after the change, when one is given too). Showing opens the log
//! as a follower would; changing it opens it as `weft retention` does (a
//! bucket log is erased without claiming it, so its writer is not fenced).

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use weft::{Error, LogTag, Result, StreamLifecycle};

use crate::location::{self, StoreArgs};
use crate::output;

/// `weft stream`
#[derive(Debug, Args)]
pub(crate) struct StreamArgs {
    /// The log: a directory, s3://, az://, postgres:// or a `weft serve`
    /// URL.
    log: String,
    /// The stream's tag, `namespace` or `namespace:key`.
    tag: String,
    /// Hide the stream's entries below this version from reads by tag
    /// (its numbering goes on; a start only moves forward).
    #[arg(long, value_name = "VERSION", conflicts_with = "delete")]
    truncate_before: Option<u64>,
    /// Delete the stream softly: hide every entry it has so far; a later
    /// append starts a new life at the next version.
    #[arg(long)]
    delete: bool,
    /// Erase for good the payloads of the entries the stream's start hides
    /// (after `--delete` or `--truncate-before` when given): they keep
    /// their seqnums, tags and versions and read with an empty payload.
    #[arg(long)]
    erase: bool,
    /// Print one JSON object: {"tag", "start_version", "start_seqnum",
    /// "next_version", "deleted"}, and "erased" with `--erase`.
    #[arg(long)]
    json: bool,
}

/// Runs `weft stream`.
pub(crate) async fn run(args: StreamArgs, store: &StoreArgs) -> Result<ExitCode> {
    let tag: LogTag = args.tag.parse()?;
    let changes = args.delete || args.truncate_before.is_some() || args.erase;
    let log = if changes {
        super::retention::open_for_writing(&args.log, store).await?
    } else {
        location::follow_arg(&args.log, store, Duration::from_secs(60))
            .await?
            .log
    };
    let done = async {
        let lifecycle = if args.delete {
            log.delete_stream(&tag).await?
        } else if let Some(v) = args.truncate_before {
            log.truncate_stream(&tag, v).await?
        } else {
            log.stream_lifecycle(&tag).await?
        };
        let erased = if args.erase {
            Some(log.erase_stream(&tag).await?)
        } else {
            None
        };
        Ok::<_, Error>((lifecycle, log.next_version(&tag).await?, erased))
    }
    .await;
    let closed = log.close().await;
    let (lifecycle, next, erased) = done?;
    closed?;
    let changed = args.delete || args.truncate_before.is_some();
    show(&args, &tag, lifecycle, next, changed, erased)
}

fn show(
    args: &StreamArgs,
    tag: &LogTag,
    lifecycle: StreamLifecycle,
    next: u64,
    changed: bool,
    erased: Option<u64>,
) -> Result<ExitCode> {
    if args.json {
        let mut out = json!({
            "tag": tag.to_string(),
            "start_version": lifecycle.start_version,
            "start_seqnum": lifecycle.start_seqnum,
            "next_version": next,
            "deleted": lifecycle.deleted,
        });
        if let Some(n) = erased {
            out["erased"] = json!(n);
        }
        output::json(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let prefix = if changed { "set: " } else { "" };
    let state = if lifecycle.deleted {
        format!(
            "deleted; reads start at version {}",
            lifecycle.start_version
        )
    } else if lifecycle.start_version > 0 {
        format!(
            "truncated; reads start at version {}",
            lifecycle.start_version
        )
    } else {
        "whole; reads start at version 0".to_owned()
    };
    output::line(&format!(
        "{prefix}stream {tag}: {state}; next version {next}"
    ))?;
    if let Some(n) = erased {
        output::line(&format!(
            "erased the payloads of {n} entries below version {}",
            lifecycle.start_version
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}
