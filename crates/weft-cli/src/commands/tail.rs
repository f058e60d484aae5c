//! `weft tail`: follow a log, printing entries as they are appended, until
//! interrupted (ctrl-c, SIGTERM), `--max` entries were printed, or
//! `--timeout` passed.
//!
//! The log is followed by a read-only follower, through its subscription:
//! for a `dir` log a `DirFollower`, which takes no lock (so writers keep
//! writing) and looks at the files every `--poll-ms` for whole batches (it
//! may show an entry a moment before the writer's sync makes it durable);
//! for a bucket a `BucketFollower`, which polls the manifest as often.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use weft::{Delivery, Error, ErrorKind, Log, LogEntry, LogTag, Position, Result, TagFilter};

use crate::commands::append::parse_tag;
use crate::interrupt;
use crate::location::{self, StoreArgs};
use crate::observe;
use crate::output::{self, EntryLine};

/// `weft tail`
#[derive(Debug, Args)]
pub(crate) struct TailArgs {
    /// The log: a directory, s3://bucket/prefix, az://container/prefix or
    /// file:///path (followed read-only, so writers keep writing).
    log: String,

    /// Only entries carrying this tag (`ns` or `ns:key`); repeat it for
    /// entries carrying any of several tags.
    #[arg(long, short = 't', value_name = "NS[:KEY]")]
    tag: Vec<String>,

    /// Only entries carrying a tag of this namespace (`ns` or any `ns:key`).
    #[arg(long, value_name = "NS", conflicts_with_all = ["tag", "tag_prefix"])]
    namespace: Option<String>,

    /// Only entries carrying a tag `ns:key` whose key starts with PREFIX
    /// (`orders:eu-`; `orders:` for any keyed `orders` tag).
    #[arg(long, value_name = "NS:PREFIX", conflicts_with = "tag")]
    tag_prefix: Option<String>,

    /// Also print how far the tail has looked while nothing matches: a
    /// line `passed N` (with --json, `{"passed":N}`) says every entry
    /// below seqnum N was examined; resume with `--from N`.
    #[arg(long)]
    marks: bool,

    /// Start at this seqnum instead of at the end (only new entries).
    #[arg(long, value_name = "SEQ")]
    from: Option<u64>,

    /// One JSON object per entry and line, as `weft read --json`.
    #[arg(long)]
    json: bool,

    /// Stop after printing this many entries.
    #[arg(long, value_name = "N")]
    max: Option<u64>,

    /// Stop after this many seconds (fractions allowed).
    #[arg(long, value_name = "SECS", value_parser = crate::seconds::parse_seconds)]
    timeout: Option<Duration>,

    /// How often the tail looks for new entries, in milliseconds (1 to
    /// 60000).
    #[arg(long, value_name = "MS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    poll_ms: u64,

    /// Serve Prometheus metrics on this address (e.g. 127.0.0.1:9464)
    /// while tailing.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
}

/// Why a tail stopped.
enum Stop {
    Interrupted,
    Max,
    Timeout,
    LogClosed,
}

/// Runs `weft tail`.
///
/// `--timeout` and a signal bound the whole command, opening the log
/// included: a store that does not answer (a paused server) delays neither.
pub(crate) async fn run(args: &TailArgs, store: &StoreArgs) -> Result<ExitCode> {
    let filter = filter_of(args)?;
    if let Some(addr) = args.metrics_addr {
        observe::serve_metrics(addr)?;
    }
    let ends = args.timeout.map(|t| weft::clock::monotonic_now() + t);
    let poll = Duration::from_millis(args.poll_ms);
    let opening = location::follow_arg(&args.log, store, poll);
    // One listener for the whole command, so no signal falls between two.
    let signal = interrupt::interrupted();
    tokio::pin!(signal);
    let followed = tokio::select! {
        r = opening => r?,
        () = &mut signal => return Ok(stopped(0, Stop::Interrupted)),
        () = sleep_until_or_forever(ends) => {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "the log could not be opened before --timeout passed",
            ));
        }
    };
    let mut printed = 0u64;
    let stop = if args.max == Some(0) {
        // Nothing to print: done, as `read --limit 0` is (the log is still
        // opened, so a missing or damaged one is reported).
        Stop::Max
    } else {
        let mut print = |entry: &LogEntry| -> Result<bool> {
            if args.json {
                output::json(&EntryLine::from(entry))?;
            } else {
                output::line(&output::entry_text(entry))?;
            }
            metrics::counter!("weft_cli_tail_entries_total").increment(1);
            printed += 1;
            Ok(args.max.is_some_and(|max| printed >= max))
        };
        let marks = args.marks;
        let json = args.json;
        let mut mark = |next: u64| -> Result<()> {
            if json {
                output::json(&serde_json::json!({ "passed": next }))
            } else {
                output::line(&format!("passed {next}"))
            }
        };
        let follow = follow(
            &followed.log,
            filter,
            args.from,
            &mut print,
            marks.then_some(&mut mark),
        );
        tokio::select! {
            r = follow => r?,
            () = &mut signal => Stop::Interrupted,
            () = sleep_until_or_forever(ends) => Stop::Timeout,
        }
    };
    // A follower whose tailing stopped on an error ends its subscription;
    // that is the command's error, not a clean end.
    let failed = match stop {
        Stop::LogClosed => followed.stop_error(),
        _ => None,
    };
    // Closing waits for the follower's tasks, which may be waiting on the
    // store: bounded, so the command ends when it said it would.
    interrupt::bounded(followed.close()).await;
    if let Some(err) = failed {
        return Err(err);
    }
    Ok(stopped(printed, stop))
}

/// Logs why the tail stopped; its exit code.
fn stopped(printed: u64, stop: Stop) -> ExitCode {
    let why = match stop {
        Stop::Interrupted => "interrupted",
        Stop::Max => "printed --max entries",
        Stop::Timeout => "--timeout passed",
        Stop::LogClosed => "the log closed",
    };
    tracing::info!(printed, why, "tail stopped");
    ExitCode::SUCCESS
}

/// The entries `--tag`, `--namespace` and `--tag-prefix` select.
///
/// Errors: `InvalidInput` for a bad tag, namespace or prefix.
fn filter_of(args: &TailArgs) -> Result<TagFilter> {
    if let Some(ns) = &args.namespace {
        return TagFilter::namespace(ns.as_str());
    }
    if let Some(p) = &args.tag_prefix {
        return TagFilter::parse_key_prefix(p);
    }
    if args.tag.is_empty() {
        return Ok(TagFilter::All);
    }
    let tags = args
        .tag
        .iter()
        .map(|t| parse_tag(t))
        .collect::<Result<Vec<LogTag>>>()?;
    TagFilter::tags(tags)
}

async fn follow(
    log: &Log,
    filter: TagFilter,
    from: Option<u64>,
    print: &mut impl FnMut(&LogEntry) -> Result<bool>,
    mut mark: Option<&mut impl FnMut(u64) -> Result<()>>,
) -> Result<Stop> {
    let position = from.map_or(Position::End, Position::At);
    let mut sub = log.subscribe_filtered(filter, position);
    while let Some(item) = sub.next().await {
        match item? {
            Delivery::Entry(entry) => {
                if print(&entry)? {
                    return Ok(Stop::Max);
                }
            }
            Delivery::Passed(next) => {
                if let Some(mark) = mark.as_mut() {
                    mark(next)?;
                }
            }
        }
    }
    Ok(Stop::LogClosed)
}

async fn sleep_until_or_forever(ends: Option<tokio::time::Instant>) {
    match ends {
        Some(t) => {
            weft::clock::sleep(t.saturating_duration_since(weft::clock::monotonic_now())).await
        }
        None => std::future::pending().await,
    }
}
