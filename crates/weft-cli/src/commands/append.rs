//! `weft append`: one entry, optionally conditional, durable before the
//! command exits 0.

use std::io::{IsTerminal, Read};
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;
use weft::{AppendRequest, Error, LogTag, Result};

use crate::location::{self, Create, StoreArgs};
use crate::output;

/// `weft append`
#[derive(Debug, Args)]
pub(crate) struct AppendArgs {
    /// The log: a directory, s3://bucket/prefix, az://container/prefix or
    /// postgres://USER@HOST/DB?log=NAME (see --create). Writing a bucket
    /// log claims its epoch; a running writer of it is not fenced unless
    /// --take-over is given. A PostgreSQL log has any number of writers.
    log: String,

    /// A tag, `namespace` or `namespace:key` (the first `:` splits). Repeat
    /// for several; the first is the primary tag, whose stream version the
    /// entry gets.
    #[arg(long = "tag", short = 't', value_name = "NS[:KEY]", required = true)]
    tags: Vec<String>,

    /// Append only if the new entry gets this version of its primary
    /// stream (0 for an empty stream); otherwise fail with a conflict
    /// (exit 5) and write nothing.
    #[arg(long, value_name = "N")]
    if_version: Option<u64>,

    /// Append only if the primary stream is in this state: `no-stream`
    /// (it never had an entry; a stream whose entries were all trimmed
    /// still exists), `stream-exists`, `any`, or a version number (as
    /// --if-version). Otherwise fail with a conflict (exit 5) and write
    /// nothing.
    #[arg(long, value_name = "STATE", conflicts_with = "if_version", value_parser = parse_expected)]
    expect: Option<weft::Expected>,

    /// An append id (exactly-once appends, on backends that keep ids):
    /// when an entry with this id is already in the log, nothing is
    /// written, and the command says so and prints the original seqnum
    /// (`"duplicate": true` with --json). Retry an append that failed with
    /// an unknown outcome (exit code of `indeterminate`) with the same id.
    #[arg(long, value_name = "ID")]
    id: Option<String>,

    /// Create the log if it does not exist.
    #[arg(long)]
    create: bool,

    /// Open the bucket log's writer even when another writer is running
    /// (its lease was renewed lately), fencing that writer: its next append
    /// fails. Without this, such a log is refused with `locked` (exit 7),
    /// naming the running writer.
    #[arg(long)]
    take_over: bool,

    /// Print exactly one line {"seqnum": N, "stream_version": V}.
    #[arg(long)]
    json: bool,

    /// The payload; `-` (or nothing, when stdin is not a terminal) reads it
    /// from stdin.
    data: Option<String>,
}

/// `append --json`; the field order is part of the format.
#[derive(Debug, Serialize)]
struct AppendLine {
    seqnum: u64,
    stream_version: u64,
    /// True when `--id` named an entry already in the log: nothing was
    /// written, and the numbers are the original's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    duplicate: bool,
}

/// Parses `--tag` values into tags, primary first.
///
/// Errors: `InvalidInput` naming the bad tag (empty namespace or key, a
/// control character, too long).
pub(crate) fn parse_tags(texts: &[String]) -> Result<Vec<LogTag>> {
    texts.iter().map(|t| parse_tag(t)).collect()
}

/// Parses one `--tag` value.
pub(crate) fn parse_tag(text: &str) -> Result<LogTag> {
    text.parse::<LogTag>()
        .map_err(|e| e.context(format!("bad tag {text:?}")))
}

fn payload(data: Option<String>) -> Result<Vec<u8>> {
    match data.as_deref() {
        Some("-") => read_stdin(),
        Some(text) => Ok(text.as_bytes().to_vec()),
        None if !std::io::stdin().is_terminal() => read_stdin(),
        None => Err(Error::invalid_input(
            "no payload: give DATA, or `-` to read it from stdin",
        )),
    }
}

fn read_stdin() -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut buf)
        .map_err(|e| Error::io("read the payload from stdin", e))?;
    Ok(buf)
}

/// Runs `weft append`.
pub(crate) async fn run(args: AppendArgs, store: &StoreArgs) -> Result<ExitCode> {
    let tags = parse_tags(&args.tags)?;
    // A server, a PostgreSQL location, or any other kind: parsed before the
    // payload is read, so a bad location fails before stdin is consumed.
    enum Target {
        Remote,
        Pg(Box<weft::storage::postgres::PgLocation>),
        Other(weft::connect::Location),
    }
    let target = if crate::remote::is_remote(&args.log) {
        Target::Remote
    } else {
        match crate::pg::location(&args.log) {
            Some(pg) => Target::Pg(Box::new(pg?)),
            None => Target::Other(location::parse(&args.log)?),
        }
    };
    let data = payload(args.data)?;
    let mut request = AppendRequest::with_tags(tags, data);
    if let Some(id) = args.id.clone() {
        request = request.with_id(id);
    }
    // Every argument is checked before the log is opened: opening claims a
    // bucket log's epoch (with --take-over, fencing its running writer) and
    // --create makes the log, and `invalid_input` promises no effect at all.
    // Every backend the command opens keeps the library's entry limit.
    request.validate(weft::model::MAX_ENTRY_BYTES)?;
    let create = if args.create {
        Create::IfMissing
    } else {
        Create::No
    };
    let log = match target {
        Target::Remote => crate::remote::open(&args.log, store.deadline()).await?,
        Target::Pg(pg) => weft::Log::new(crate::pg::open(*pg, create).await?),
        Target::Other(location) => {
            location::open_log(&location, create, args.take_over, store).await?
        }
    };
    // With an id, the log's end before the append tells a duplicate: an
    // entry numbered below it was in the log before this command started.
    // (One more round trip on PostgreSQL; free on the other backends.)
    let before = match request.append_id() {
        Some(_) => Some(log.tip().await),
        None => None,
    };
    let appended = match &before {
        Some(Err(e)) => Err(e.clone()),
        _ => match args.expect.or(args.if_version.map(weft::Expected::Exact)) {
            Some(expected) => log.append_if(request, expected).await,
            None => log.append(request).await,
        },
    };
    // Close in every case, so the lock is released and nothing is left
    // half-flushed; the append's own error wins over a close error.
    let closed = log.close().await;
    let result = appended?;
    closed?;
    let duplicate = matches!(before, Some(Ok(tip)) if result.seqnum < tip.next);
    if args.json {
        output::json(&AppendLine {
            seqnum: result.seqnum,
            stream_version: result.stream_version,
            duplicate,
        })?;
    } else if duplicate {
        output::line(&format!(
            "already in the log: append id {:?} is seqnum {} ({} v{}); nothing written",
            args.id.as_deref().unwrap_or_default(),
            result.seqnum,
            result.primary_tag,
            result.stream_version
        ))?;
    } else {
        output::line(&format!(
            "appended seqnum {} ({} v{})",
            result.seqnum, result.primary_tag, result.stream_version
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--expect`'s value, read as [`weft::Expected`] reads it.
fn parse_expected(s: &str) -> Result<weft::Expected, String> {
    s.parse().map_err(|e: weft::Error| e.message().to_owned())
}
