//! `weft trim LOG --through N`: drops every entry up to a seqnum, on every
//! backend, keeping every stream's numbering (a later append to a stream
//! continues at its next version; reads below the new start get
//! `trimmed`).
//!
//! * A directory and a PostgreSQL log are opened as their writer would be
//!   (a directory is locked for the moment; PostgreSQL takes its head row
//!   lock for the statement), trimmed and closed.
//! * A bucket log is trimmed without claiming it, as `weft snapshot` does:
//!   a running writer is not fenced.
//! * A `weft serve` URL asks the server, which trims the log it serves.

use std::process::ExitCode;

use clap::Args;
use weft::{Result, clock};

use weft::connect::Location;

use crate::location::{self, Create, StoreArgs};
use crate::output;

/// `weft trim`
#[derive(Debug, Args)]
pub(crate) struct TrimArgs {
    /// The log: a directory, s3://, az://, postgres:// or a `weft serve`
    /// URL.
    log: String,
    /// The last seqnum to drop: the log starts after it. At or below the
    /// log's current start, nothing changes; at or past its end is
    /// `invalid_input`.
    #[arg(long)]
    through: u64,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `weft trim`.
pub(crate) async fn run(args: TrimArgs, store: &StoreArgs) -> Result<ExitCode> {
    if crate::remote::is_remote(&args.log) {
        let log = crate::remote::open(&args.log, store.deadline()).await?;
        return trim_log(log, &args).await;
    }
    if let Some(pg) = crate::pg::location(&args.log) {
        let log = weft::Log::new(crate::pg::open(pg?, Create::No).await?);
        return trim_log(log, &args).await;
    }
    let location = location::parse(&args.log)?;
    match &location {
        Location::S3 { .. } | Location::Azure { .. } | Location::File { .. } => {
            let objects = location::open_store(&location, store)?;
            let pointer = weft::storage::bucket::retention::trim_unowned(
                objects,
                "",
                args.through,
                clock::system(),
                &store.retry(),
            )
            .await?;
            report(&args, pointer.is_some())
        }
        _ => {
            let log = location::open_log(&location, Create::No, false, store).await?;
            trim_log(log, &args).await
        }
    }
}

/// Trims an opened log and closes it (the trim's error wins over the
/// close's).
async fn trim_log(log: weft::Log, args: &TrimArgs) -> Result<ExitCode> {
    let before = log.tip().await;
    let trimmed = match &before {
        Ok(_) => log.trim(args.through).await,
        Err(e) => Err(e.clone()),
    };
    let closed = log.close().await;
    trimmed?;
    closed?;
    let moved = before.is_ok_and(|tip| args.through >= tip.first);
    report(args, moved)
}

fn report(args: &TrimArgs, moved: bool) -> Result<ExitCode> {
    if args.json {
        output::json(&serde_json::json!({
            "through": args.through,
            "trimmed": moved,
        }))?;
    } else if moved {
        output::line(&format!(
            "trimmed through seqnum {}; the log starts at {}",
            args.through,
            args.through + 1
        ))?;
    } else {
        output::line(&format!(
            "the log already starts after seqnum {}; nothing changed",
            args.through
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}
