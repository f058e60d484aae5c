//! `weft read`: entries of a log, or of one tag, in seqnum order.

use std::process::ExitCode;

use clap::Args;
use weft::Result;

use crate::commands::append::parse_tag;
use crate::location::{self, StoreArgs};
use crate::output::{self, EntryLine};

/// How many entries one storage read fetches.
const CHUNK: usize = 1024;

/// `weft read`
#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    /// The log: a directory, s3://bucket/prefix, az://container/prefix or
    /// file:///path. It is read by a read-only follower, which takes no
    /// lock and never fences the writer.
    log: String,

    /// Only entries carrying this tag (`ns` or `ns:key`).
    #[arg(long, short = 't', value_name = "NS[:KEY]")]
    tag: Option<String>,

    /// Start at this seqnum (default: the first entry still in the log; a
    /// seqnum below the trim point is an error).
    #[arg(long, value_name = "SEQ")]
    from: Option<u64>,

    /// Start at the first entry stamped at or after this time: an RFC 3339
    /// time (`2026-12-01T10:00:00Z`) or an age (`1h`, `15m`, `90s`, `2d`).
    /// Found by a binary search over the log's timestamps, which never go
    /// down along a log.
    #[arg(long, value_name = "TIME|AGE", conflicts_with = "from",
          value_parser = crate::since::parse_since)]
    since: Option<crate::since::Since>,

    /// Print at most this many entries.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,

    /// One JSON object per entry and line: {"seqnum", "stream_version",
    /// "tags", "timestamp_ms", "id" (the append id or null), "data"
    /// (standard base64)}.
    #[arg(long)]
    json: bool,
}

/// Runs `weft read`.
pub(crate) async fn run(args: ReadArgs, store: &StoreArgs) -> Result<ExitCode> {
    let tag = args.tag.as_deref().map(parse_tag).transpose()?;
    // One look is all a read needs; the poll interval never comes up.
    let followed =
        location::follow_arg(&args.log, store, std::time::Duration::from_secs(60)).await?;
    let log = &followed.log;
    let mut cursor = match (args.from, args.since) {
        (Some(from), _) => from,
        (None, Some(since)) => {
            let t = since.at(weft::clock::system().now_ms());
            log.storage().seek_time(t).await?
        }
        (None, None) => log.tip().await?.first,
    };
    let mut left = args.limit.unwrap_or(usize::MAX);
    let outcome = async {
        while left > 0 {
            let want = left.min(CHUNK);
            // By tag through the log, which leaves out a truncated
            // stream's hidden entries (and fills the chunk past them).
            let chunk = match &tag {
                Some(t) => log.read_from(t, weft::Position::At(cursor), want).await?,
                None => log.storage().read(None, cursor, want).await?,
            };
            for entry in &chunk {
                if args.json {
                    output::json(&EntryLine::from(entry))?;
                } else {
                    output::line(&output::entry_text(entry))?;
                }
            }
            left -= chunk.len();
            match chunk.last() {
                Some(last) if chunk.len() == want => cursor = last.seqnum + 1,
                _ => break,
            }
        }
        Ok(())
    }
    .await;
    followed.close().await;
    outcome.map(|()| ExitCode::SUCCESS)
}
