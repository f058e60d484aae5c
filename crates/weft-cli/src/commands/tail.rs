//! `weft tail`: follow a log, printing entries as they are appended, until
//! interrupted (ctrl-c, SIGTERM), `--max` entries were printed, or
//! `--timeout` passed.
//!
//! A `dir` log is followed read-only: `tail` never opens it (that would
//! take the backend's exclusive lock and lock every writer out) but polls
//! its segment files every `--poll-ms` for complete batches. It may show an
//! entry a moment before the writer's sync makes it durable. A bucket log is
//! followed by a read-only follower that polls the manifest, through its
//! subscription.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use weft::{LogEntry, LogTag, Position, Result};

use crate::commands::append::parse_tag;
use crate::location::StoreArgs;
use crate::observe;
use crate::output::{self, EntryLine};
use crate::source::Source;

/// `weft tail`
#[derive(Debug, Args)]
pub(crate) struct TailArgs {
    /// The log: a directory, s3://bucket/prefix, az://container/prefix or
    /// file:///path (followed read-only, so writers keep writing).
    log: String,

    /// Only entries carrying this tag (`ns` or `ns:key`).
    #[arg(long, short = 't', value_name = "NS[:KEY]")]
    tag: Option<String>,

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
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,

    /// How often a read-only tail looks for new entries, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100)]
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
pub(crate) async fn run(args: TailArgs, store: &StoreArgs) -> Result<ExitCode> {
    let tag = args.tag.as_deref().map(parse_tag).transpose()?;
    if let Some(addr) = args.metrics_addr {
        observe::serve_metrics(addr)?;
    }
    let timeout = match args.timeout {
        Some(secs) if secs.is_finite() && secs >= 0.0 => Some(Duration::from_secs_f64(secs)),
        Some(secs) => {
            return Err(weft::Error::invalid_input(format!(
                "--timeout {secs} is not a number of seconds"
            )));
        }
        None => None,
    };
    let source = Source::open_arg(&args.log, store).await?;
    let mut printed = 0u64;
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
    let follow = follow(&source, tag.as_ref(), args.from, args.poll_ms, &mut print);
    let stop = tokio::select! {
        r = follow => r?,
        () = interrupted() => Stop::Interrupted,
        () = sleep_or_forever(timeout) => Stop::Timeout,
    };
    source.close().await;
    let why = match stop {
        Stop::Interrupted => "interrupted",
        Stop::Max => "printed --max entries",
        Stop::Timeout => "--timeout passed",
        Stop::LogClosed => "the log closed",
    };
    tracing::info!(printed, why, "tail stopped");
    Ok(ExitCode::SUCCESS)
}

async fn follow(
    source: &Source,
    tag: Option<&LogTag>,
    from: Option<u64>,
    poll_ms: u64,
    print: &mut impl FnMut(&LogEntry) -> Result<bool>,
) -> Result<Stop> {
    let position = from.map_or(Position::End, Position::At);
    match source {
        Source::Log(log) => {
            let mut sub = match tag {
                Some(t) => log.subscribe(t, position),
                None => log.subscribe_log(position),
            };
            while let Some(entry) = sub.next().await {
                if print(&entry?)? {
                    return Ok(Stop::Max);
                }
            }
            Ok(Stop::LogClosed)
        }
        Source::Scan(scan) => {
            let mut cursor = match position {
                Position::At(s) => s,
                _ => scan.next_seqnum()?,
            };
            let mut poll = tokio::time::interval(Duration::from_millis(poll_ms.max(1)));
            poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                poll.tick().await;
                loop {
                    let chunk = scan.read(tag, cursor, 1024)?;
                    let Some(last) = chunk.last() else { break };
                    cursor = last.seqnum + 1;
                    for entry in &chunk {
                        if print(entry)? {
                            return Ok(Stop::Max);
                        }
                    }
                }
            }
        }
    }
}

async fn sleep_or_forever(timeout: Option<Duration>) {
    match timeout {
        Some(t) => tokio::time::sleep(t).await,
        None => std::future::pending().await,
    }
}

/// Resolves on ctrl-c or SIGTERM.
async fn interrupted() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    () = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => ctrl_c.await,
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}
