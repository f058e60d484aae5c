//! `weft retention LOG` (show or set the log's retention policy) and
//! `weft consumers LOG` (list the named consumer positions), on every
//! backend.
//!
//! The policy and the positions are stored with the log, in its KV (see
//! `weft::retention`), and the log's writer applies the policy in the
//! background. Showing and listing open the log as a follower would
//! (nothing locked or fenced). Setting writes the KV: through the bucket's
//! conditional PUTs (a running writer is not fenced), through PostgreSQL,
//! or through a `weft serve` URL; a directory log is opened as its writer
//! for the moment (its KV admits one process: while a writer runs, set the
//! policy through it or through `weft serve`).

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde_json::json;
use weft::connect::Location;
use weft::retention::{ConsumerPosition, Retention, RetentionPolicy, RetentionStep};
use weft::{Error, Log, Result};

use crate::location::{self, Create, StoreArgs};
use crate::output;

/// `weft retention`
#[derive(Debug, Args)]
pub(crate) struct RetentionArgs {
    /// The log: a directory, s3://, az://, postgres:// or a `weft serve`
    /// URL.
    log: String,
    /// Drop entries older than this: a number and a unit, ms, s, m, h, d
    /// or w (`7d`, `36h`).
    #[arg(long, value_parser = parse_age)]
    max_age: Option<u64>,
    /// Keep at most this many entries (the newest).
    #[arg(long)]
    max_count: Option<u64>,
    /// Keep at most this many payload bytes (the newest entries'): a
    /// number with an optional unit, B, KB, MB, GB, TB (powers of 1000) or
    /// KiB, MiB, GiB, TiB (powers of 1024).
    #[arg(long, value_parser = parse_bytes)]
    max_bytes: Option<u64>,
    /// Never drop what this named consumer has not committed past
    /// (repeatable).
    #[arg(long = "protect-consumer", value_name = "NAME")]
    protect_consumers: Vec<String>,
    /// Remove the policy: the log keeps everything.
    #[arg(long, conflicts_with_all = ["max_age", "max_count", "max_bytes", "protect_consumers"])]
    clear: bool,
    /// Apply the policy now, through this command's handle, until it has
    /// nothing more to drop (a directory, PostgreSQL or `weft serve` log;
    /// a bucket log's writer applies it in the background).
    #[arg(long)]
    apply: bool,
    /// Print the policy as one JSON object.
    #[arg(long)]
    json: bool,
}

/// `weft consumers`
#[derive(Debug, Args)]
pub(crate) struct ConsumersArgs {
    /// The log: a directory, s3://, az://, postgres:// or a `weft serve`
    /// URL.
    log: String,
    /// One JSON object per consumer and line: {"name", "filter" (null for
    /// the whole log), "position", "behind" (entries from the position to
    /// the log's end)}.
    #[arg(long)]
    json: bool,
    /// Advance this consumer's position (of the whole log) to `--to`; a
    /// position at or past it is left as it is.
    #[arg(long, value_name = "NAME", requires = "to")]
    commit: Option<String>,
    /// The position `--commit` advances to: the seqnum the consumer
    /// resumes at.
    #[arg(long, requires = "commit")]
    to: Option<u64>,
}

impl RetentionArgs {
    /// The policy the flags give, `None` when they set nothing (show).
    fn policy(&self) -> Option<RetentionPolicy> {
        let policy = RetentionPolicy::default()
            .with_max_age_ms(self.max_age)
            .with_max_count(self.max_count)
            .with_max_bytes(self.max_bytes)
            .with_protect_consumers(self.protect_consumers.clone());
        (policy != RetentionPolicy::default()).then_some(policy)
    }
}

/// Runs `weft retention`.
pub(crate) async fn run(args: RetentionArgs, store: &StoreArgs) -> Result<ExitCode> {
    let new = args.policy();
    if new.is_none() && !args.clear && !args.apply {
        let followed = location::follow_arg(&args.log, store, Duration::from_secs(60)).await?;
        let policy = followed.log.retention_policy().await;
        followed.close().await;
        return show(&args, policy?.as_ref(), "", None);
    }
    if let Some(p) = &new {
        p.validate()?;
    }
    if args.apply && is_bucket(&args.log) {
        return Err(Error::unsupported(
            "--apply: a bucket log's writer applies its policy in the background \
             (or drop entries now with `weft trim`)",
        ));
    }
    let log = open_for_writing(&args.log, store).await?;
    let done = async {
        if new.is_some() || args.clear {
            log.set_retention_policy(new.clone()).await?;
        }
        let policy = log.retention_policy().await?;
        let applied = if args.apply {
            Some(apply(&log).await?)
        } else {
            None
        };
        Ok::<_, Error>((policy, applied))
    }
    .await;
    let closed = log.close().await;
    let (policy, applied) = done?;
    closed?;
    let prefix = if new.is_some() || args.clear {
        "set: "
    } else {
        ""
    };
    show(&args, policy.as_ref(), prefix, applied.as_ref())
}

/// True for an s3://, az:// or file:// location.
fn is_bucket(text: &str) -> bool {
    !crate::remote::is_remote(text)
        && crate::pg::location(text).is_none()
        && matches!(
            location::parse(text),
            Ok(Location::S3 { .. } | Location::Azure { .. } | Location::File { .. })
        )
}

/// Steps retention on `log` until it has nothing more to do (at most 10 000
/// steps); returns the last seqnum trimmed through and what held it back.
async fn apply(log: &Log) -> Result<RetentionStep> {
    let mut retention = Retention::new(weft::clock::system());
    let mut last = RetentionStep::default();
    for _ in 0..10_000 {
        let step = retention.step(log).await?;
        let more = step.more;
        last = RetentionStep {
            trimmed_through: step.trimmed_through.or(last.trimmed_through),
            ..step
        };
        if !more {
            break;
        }
    }
    Ok(last)
}

/// A handle whose KV may be written: a directory's writer; otherwise a
/// follower's (bucket, PostgreSQL, `weft serve`).
pub(crate) async fn open_for_writing(text: &str, store: &StoreArgs) -> Result<Log> {
    if !crate::remote::is_remote(text)
        && crate::pg::location(text).is_none()
        && let dir @ Location::Dir { .. } = location::parse(text)?
    {
        return location::open_log(&dir, Create::No, false, store).await;
    }
    Ok(location::follow_arg(text, store, Duration::from_secs(60))
        .await?
        .log)
}

fn show(
    args: &RetentionArgs,
    policy: Option<&RetentionPolicy>,
    prefix: &str,
    applied: Option<&RetentionStep>,
) -> Result<ExitCode> {
    if args.json {
        let mut out = json!({
            "policy": policy.map(|p| json!({
                "max_age_ms": p.max_age_ms,
                "max_count": p.max_count,
                "max_bytes": p.max_bytes,
                "protect_consumers": p.protect_consumers,
            })),
        });
        if let Some(step) = applied {
            out["applied"] = json!({
                "trimmed_through": step.trimmed_through,
                "held_by": step.held_by.as_ref().map(|(name, position)| json!({
                    "consumer": name,
                    "position": position,
                })),
            });
        }
        output::json(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(step) = applied {
        let mut text = match step.trimmed_through {
            Some(t) => format!("applied: trimmed through seqnum {t}"),
            None => "applied: nothing to drop".to_owned(),
        };
        if let Some((name, position)) = &step.held_by {
            text.push_str(&format!(
                " (held back by consumer {name}, at position {position})"
            ));
        }
        output::line(&text)?;
    }
    let Some(p) = policy.filter(|p| **p != RetentionPolicy::default()) else {
        output::line(&format!(
            "{prefix}no retention policy: the log keeps every entry"
        ))?;
        return Ok(ExitCode::SUCCESS);
    };
    let mut parts = Vec::new();
    if let Some(ms) = p.max_age_ms {
        parts.push(format!("max age {}", age_text(ms)));
    }
    if let Some(n) = p.max_count {
        parts.push(format!("max count {n}"));
    }
    if let Some(b) = p.max_bytes {
        parts.push(format!("max bytes {b}"));
    }
    if !p.protect_consumers.is_empty() {
        parts.push(format!(
            "protects consumers {}",
            p.protect_consumers.join(", ")
        ));
    }
    if p.keeps_everything() {
        parts.push("no limit: the log keeps every entry".to_owned());
    }
    output::line(&format!("{prefix}{}", parts.join("; ")))?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `weft consumers`.
pub(crate) async fn consumers(args: ConsumersArgs, store: &StoreArgs) -> Result<ExitCode> {
    let log = if args.commit.is_some() {
        open_for_writing(&args.log, store).await?
    } else {
        location::follow_arg(&args.log, store, Duration::from_secs(60))
            .await?
            .log
    };
    let listed = async {
        if let (Some(name), Some(to)) = (&args.commit, args.to) {
            log.consumer(name)?.commit(to).await?;
        }
        let list = log.consumers().await?;
        let tip = log.tip().await?;
        Ok::<_, Error>((list, tip))
    }
    .await;
    let closed = log.close().await;
    if listed.is_ok() {
        closed?;
    }
    let (list, tip) = listed?;
    for ConsumerPosition {
        name,
        filter,
        position,
    } in &list
    {
        let behind = tip.next.saturating_sub(*position);
        if args.json {
            output::json(&json!({
                "name": name,
                "filter": filter,
                "position": position,
                "behind": behind,
            }))?;
        } else {
            let filter = filter.as_deref().unwrap_or("the whole log");
            output::line(&format!("{name}\t{filter}\tat {position}\t{behind} behind"))?;
        }
    }
    if list.is_empty() && !args.json {
        output::line("no consumer has committed a position")?;
    }
    Ok(ExitCode::SUCCESS)
}

const AGE_UNITS: [(&str, u64); 6] = [
    ("w", 7 * 86_400_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1000),
    ("ms", 1),
];

/// The largest whole unit of `ms`.
fn age_text(ms: u64) -> String {
    for (unit, size) in AGE_UNITS {
        if ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// `7d`, `36h`, `500ms`: a positive whole number and a unit.
fn parse_age(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (number, unit) = text.split_at(digits);
    let size = AGE_UNITS
        .iter()
        .find(|(u, _)| *u == unit)
        .map(|(_, s)| *s)
        .ok_or_else(|| format!("{text:?}: give a number and a unit, ms, s, m, h, d or w (7d)"))?;
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: give a number and a unit, ms, s, m, h, d or w (7d)"))?;
    match n.checked_mul(size) {
        Some(0) => Err(format!("{text:?}: the age must be above 0")),
        Some(ms) => Ok(ms),
        None => Err(format!("{text:?} is too long")),
    }
}

/// `10GiB`, `500MB`, `4096`: a positive whole number of bytes and an
/// optional unit.
fn parse_bytes(text: &str) -> std::result::Result<u64, String> {
    const UNITS: [(&str, u64); 9] = [
        ("", 1),
        ("B", 1),
        ("KB", 1000),
        ("MB", 1000 * 1000),
        ("GB", 1000 * 1000 * 1000),
        ("TB", 1000 * 1000 * 1000 * 1000),
        ("KiB", 1 << 10),
        ("MiB", 1 << 20),
        ("GiB", 1 << 30),
    ];
    const TIB: (&str, u64) = ("TiB", 1 << 40);
    let text = text.trim();
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (number, unit) = text.split_at(digits);
    let bad = || format!("{text:?}: give a number of bytes and an optional unit (10GiB, 500MB)");
    let size = UNITS
        .iter()
        .chain(std::iter::once(&TIB))
        .find(|(u, _)| *u == unit.trim())
        .map(|(_, s)| *s)
        .ok_or_else(bad)?;
    let n: u64 = number.parse().map_err(|_| bad())?;
    match n.checked_mul(size) {
        Some(0) => Err(format!("{text:?}: the size must be above 0")),
        Some(b) => Ok(b),
        None => Err(format!("{text:?} is too large")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_sizes_parse_and_print() {
        assert_eq!(parse_age("7d"), Ok(7 * 86_400_000));
        assert_eq!(parse_age("36h"), Ok(36 * 3_600_000));
        assert_eq!(parse_age("500ms"), Ok(500));
        assert_eq!(parse_age("2w"), Ok(14 * 86_400_000));
        for bad in ["", "7", "d", "0s", "7 d", "-1d", "1y", "99999999999999999w"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
        assert_eq!(age_text(7 * 86_400_000), "1w");
        assert_eq!(age_text(36 * 3_600_000), "36h");
        assert_eq!(age_text(1500), "1500ms");
        assert_eq!(parse_bytes("10GiB"), Ok(10 << 30));
        assert_eq!(parse_bytes("500MB"), Ok(500_000_000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("1TiB"), Ok(1 << 40));
        for bad in ["", "0", "GiB", "1.5GiB", "10 XB", "99999999999TiB"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }
}
